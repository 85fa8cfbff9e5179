"""The emulated cluster: one network namespace per rank, made and removed
by scripts/emulated-cluster.sh."""
import random
import subprocess

from .common import CLUSTER, fail

class Cluster:
    """The emulated hosts (network namespaces); removed by close()."""

    def __init__(self, hosts, rate):
        self.name = None
        self.hosts, self.rate, self.up = hosts, rate, False

    def start(self):
        """Creates the hosts under a name that no cluster has (one a killed
        comparison left is skipped)."""
        rng = random.SystemRandom()
        for _ in range(20):
            self.name = "cmp%05d" % rng.randrange(100000)
            self.up = True  # down is harmless when up failed half-way
            p = subprocess.run(["sh", CLUSTER, "up", self.name, str(self.hosts), self.rate],
                               stdout=subprocess.PIPE, stderr=subprocess.STDOUT, universal_newlines=True)
            if p.returncode != 3:  # 3: the name is taken
                break
            self.up = False
        if p.returncode:
            fail("could not create the emulated hosts:\n" + p.stdout)

    def close(self):
        if self.up:
            subprocess.call(["sh", CLUSTER, "down", self.name])
            self.up = False
