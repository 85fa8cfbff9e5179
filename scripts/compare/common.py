"""Paths, names and small helpers shared by the comparison's modules."""
import os
import re
import shutil
import statistics
import subprocess

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
CLUSTER = os.path.join(ROOT, "scripts", "emulated-cluster.sh")
SUITES = ["iid", "seldp", "label", "label-inject", "det", "wide"]
# emulated: every rank on its own emulated host; shm: shared memory;
# modelled: shared memory, communication time modelled from the bytes;
# virtual: shared memory, every time the ranks' virtual clocks (SELSYNC_VIRTUAL)
NETWORKS = ("emulated", "shm", "modelled", "virtual")


def spread(xs):
    """The sample standard deviation of xs (0 for fewer than two)."""
    return statistics.stdev(xs) if len(xs) > 1 else 0.0


def fedavg_period(method):
    """N of a FedAvg method key fedavg-N, else None."""
    m = re.fullmatch(r"fedavg-(\d+)", method)
    return int(m.group(1)) if m else None


class Failure(Exception):
    """A run or a preparation step failed; the message says which and why."""


def fail(msg):
    raise Failure(msg)


def seeds_of(text):
    """The seeds of a comma-separated list such as 1,2,3; None when one is
    not an integer."""
    try:
        return [int(x) for x in text.split(",")]
    except ValueError:
        return None


def read_list(path):
    with open(path) as f:
        return [line.strip() for line in f if line.strip()]


def write(path, text):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w") as f:
        f.write(text)


def clock(s):
    s = int(round(s))
    return "%d:%02d:%02d" % (s // 3600, s // 60 % 60, s % 60) if s >= 3600 else "%d:%02d" % (s // 60, s % 60)


def draw_png(folder, name, script):
    """Writes FOLDER/NAME.gp and runs gnuplot on it, which must write
    FOLDER/NAME.png: None, or why it did not."""
    gnuplot = shutil.which("gnuplot")
    if not gnuplot:
        return "gnuplot is missing: scripts/install-deps.sh installs it (Debian package gnuplot-nox)"
    write(os.path.join(folder, name + ".gp"), script)
    p = subprocess.run([gnuplot, name + ".gp"], cwd=folder, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                       universal_newlines=True)
    if p.returncode or not os.path.exists(os.path.join(folder, name + ".png")):
        return "gnuplot failed on %s/%s.gp:\n%s" % (folder, name, p.stdout[-2000:])
    return None
