#!/usr/bin/python3
"""darknet's bsp (gradient buckets summed after the backward pass, and
overlapped with it) and selsync against PyTorch DistributedDataParallel, on
the same network, data, batch and hosts, side by side in one run.

Usage: scripts/bench/bench-ddp.py [--cfg CFG] [--steps S] [--batch B] [--ranks N]
           [--rate RATE] [--pml LIST] [--eval-every K] [--heldout H] [--rounds R]
           [--build DIR] [--out DIR]
       scripts/bench/bench-ddp.py --transfer [--ranks N] [--rate RATE] [--pml LIST] [--build DIR] [--out DIR]

  --cfg       a classifier cfg (default cfg/fmnist-wide.cfg, 12 MB of parameters)
  --steps     training steps of every run (default 300); the cfg's
              max_batches is set to it, so its learning-rate policy spans it
  --batch     images per rank and step (default 64)
  --ranks     ranks (default 2)
  --rate      the emulated hosts' links (default 1gbit; see
              scripts/emulated-cluster.sh), or shm: one machine, shared memory
  --pml       Open MPI's transports the darknet runs use between the
              emulated hosts, each in turn (default ucx,ob1: UCX, the
              cluster's default, and ob1 with its TCP btl); ucx is left
              out, said in one line, where Open MPI has no UCX pml
  --eval-every  held-out top-1 every K steps (default 50) and at the end
  --heldout   held-out images: the first H of t10k (default 2000)
  --rounds    the runs are repeated R times in turn (default 1); the table
              gives the median time per step of each
  --build     darknet's build folder (default build)
  --out       where the runs' files go (default: a new temporary folder, kept)

The runs, one thread each per rank (OPENBLAS_NUM_THREADS=1,
torch.set_num_threads(1)):
  ddp            PyTorch DDP over gloo (scripts/bench/bench_ddp_worker.py: the cfg
                 rebuilt by scripts/bench/bench_torch.py, 25 MB buckets reduced
                 during the backward pass)
  bsp-after      darknet bsp, overlap=0: the gradient buckets summed after
                 the backward pass
  bsp            darknet bsp, overlap=1 (the default): the buckets summed
                 while the backward pass goes on
  selsync-now    darknet selsync, delta 0.3, overlap=0: parameters averaged
                 at once
  selsync        darknet selsync with the cfg's [selsync] defaults (delta
                 0.3, overlap=1): each parameter average runs during the
                 next step and is applied one step late
The darknet runs start from the same initial weights (darknet partial), and
run once per --pml transport (named "bsp (ucx)", "bsp (ob1)", ...).

--transfer times the sums alone instead, on the same hosts, at 1, 4, 12
and 32 MiB (the median of 10 after 2): darknet's ring (the transport's
sum_f32, tests/bench_transfer) and Open MPI's MPI_Allreduce over each
--pml transport, and gloo's all_reduce; and the share of the link's rate
(956 Mbit/s of payload) a ring all-reduce's 2 (N-1)/N S bytes per rank give.

Printed: per run the training time per step (evaluations left out), for
darknet the communication the step waited for (exposed: the metrics'
t_transfer) and, for bsp and selsync, the communication hidden behind
computation (the exposed time of the same run without overlap, bsp-after
or selsync-now, minus its own), the final top-1, and the training
time to the common accuracy (the lowest final top-1 of the runs) and to
ddp's final top-1, each reached at an evaluation. Ratios are against ddp. Needs Debian's python3-torch.
"""
import argparse
import os
import random
import statistics
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))  # scripts/, for its compare package
from compare.metrics import read_metrics  # noqa: E402  (the one reader of metrics files)
from compare.provenance import write_machine_txt  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
CLUSTER = os.path.join(ROOT, "scripts", "emulated-cluster.sh")
WORKER = os.path.join(ROOT, "scripts", "bench", "bench_ddp_worker.py")
DARKNET_RUNS = [("bsp-after", "method=bsp\noverlap=0\n"), ("bsp", "method=bsp\n"),
                ("selsync-now", "method=selsync\noverlap=0\n"), ("selsync", "method=selsync\n")]
HIDDEN_AGAINST = {"bsp": "bsp-after", "selsync": "selsync-now"}  # the same run without overlap
# mpirun's options per transport: UCX is the emulated cluster's default
PML_OPTIONS = {"ucx": [], "ob1": ["--mca", "pml", "ob1", "--mca", "btl", "tcp,self"]}


def fail(msg):
    print("bench-ddp: " + msg, file=sys.stderr)
    sys.exit(1)


def options():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--cfg", default=os.path.join(ROOT, "cfg", "fmnist-wide.cfg"))
    ap.add_argument("--steps", type=int, default=300)
    ap.add_argument("--batch", type=int, default=64)
    ap.add_argument("--ranks", type=int, default=2)
    ap.add_argument("--rate", default="1gbit")
    ap.add_argument("--eval-every", type=int, default=50)
    ap.add_argument("--heldout", type=int, default=2000)
    ap.add_argument("--rounds", type=int, default=1)
    ap.add_argument("--build", default=os.path.join(ROOT, "build"))
    ap.add_argument("--out")
    ap.add_argument("--pml", default="ucx,ob1")
    ap.add_argument("--transfer", action="store_true")
    a = ap.parse_args()
    if min(a.steps, a.batch, a.ranks, a.eval_every, a.heldout, a.rounds) < 1:
        fail("--steps, --batch, --ranks, --eval-every, --heldout and --rounds must be >= 1")
    a.pml = [p for p in a.pml.split(",") if p]
    if not a.pml or any(p not in PML_OPTIONS for p in a.pml):
        fail("--pml takes ucx, ob1 or both, comma-separated")
    if a.rate == "shm":
        a.pml = a.pml[:1]  # one machine: shared memory whatever the pml
    elif "ucx" in a.pml and "MCA pml: ucx " not in subprocess.run(
            ["ompi_info"], stdout=subprocess.PIPE, universal_newlines=True).stdout:
        print("bench-ddp: Open MPI has no UCX pml here: ucx left out", file=sys.stderr)
        a.pml = [p for p in a.pml if p != "ucx"] or ["ob1"]
    return a


def run(cmd, log, env=None):
    with open(log, "w") as f:
        p = subprocess.run(cmd, stdout=f, stderr=subprocess.STDOUT, env=env, timeout=3600)
    if p.returncode:
        fail("%s failed (exit status %d); see %s" % (" ".join(cmd[:6]), p.returncode, log))


class Hosts:
    """The emulated hosts, or shared memory (rate shm)."""

    def __init__(self, ranks, rate):
        self.ranks, self.rate, self.name = ranks, rate, None

    def __enter__(self):
        if self.rate != "shm":
            for _ in range(20):
                self.name = "ddp%05d" % random.SystemRandom().randrange(100000)
                p = subprocess.run(["sh", CLUSTER, "up", self.name, str(self.ranks), self.rate],
                                   stdout=subprocess.PIPE, stderr=subprocess.STDOUT, universal_newlines=True)
                if p.returncode != 3:
                    break
            if p.returncode:
                self.name = None
                fail("could not create the emulated hosts:\n" + p.stdout)
        return self

    def __exit__(self, *exc):
        if self.name:
            subprocess.call(["sh", CLUSTER, "down", self.name])

    def mpirun(self, env_vars, argv, pml="ucx"):
        xs = PML_OPTIONS[pml] + [w for v in env_vars for w in ("-x", v)]
        if self.name:
            return ["sh", CLUSTER, "mpirun", self.name, "-np", str(self.ranks)] + xs + argv
        return ["mpirun", "--oversubscribe", "-np", str(self.ranks)] + xs + argv

    def master(self):
        return "127.0.0.1" if self.rate == "shm" else "10.231.0.1"


def darknet_files(a, out):
    """The data file (held-out list of H images), the initial weights and one
    cfg per darknet run."""
    data = os.path.join(ROOT, "data", "fashion-mnist")
    if not os.path.exists(os.path.join(data, "train.list")):
        run([sys.executable, os.path.join(ROOT, "scripts", "data", "prepare-fashion-mnist.py")],
            os.path.join(out, "prepare.log"))
    with open(os.path.join(data, "valid.list")) as f:
        heldout = [line for line in f][:a.heldout]
    with open(os.path.join(out, "heldout.list"), "w") as f:
        f.writelines(heldout)
    with open(os.path.join(data, "fmnist.data")) as f:
        lines = f.read().splitlines()
    os.makedirs(os.path.join(out, "backup"), exist_ok=True)
    lines = [("valid=%s/heldout.list" % out if l.startswith("valid=") else
              "backup=%s/backup" % out if l.startswith("backup=") else l) for l in lines]
    with open(os.path.join(out, "bench.data"), "w") as f:
        f.write("\n".join(lines) + "\n")
    with open(a.cfg) as f:
        text = f.read()
    base = []
    for line in text.splitlines():
        key = line.split("=")[0].strip()
        if key == "batch":
            line = "batch=%d" % a.batch
        elif key == "max_batches":
            line = "max_batches=%d" % a.steps
        base.append(line)
    cfgs = {}
    for name, lines in DARKNET_RUNS:
        path = os.path.join(out, name + ".cfg")
        with open(path, "w") as f:
            f.write("\n".join(base) + "\n\n[selsync]\n" + lines +
                    "eval_every=%d\nlog=%s/%s.%%r.tsv\n" % (a.eval_every, out, name))
        cfgs[name] = path
    init = os.path.join(out, "init.weights")
    run([os.path.join(a.build, "darknet"), "partial", cfgs["bsp"], "", init, "1000"],
        os.path.join(out, "partial.log"))
    return os.path.join(out, "bench.data"), init, cfgs


def metrics(path):
    """Rank 0's metrics: mean t_transfer of the steps, and the eval rows as
    (train_s, top1)."""
    rows, evals = read_metrics(path)
    transfer = [r["t_transfer"] for r in rows]
    return sum(transfer) / max(1, len(transfer)), [(e["train_s"], e["top1"]) for e in evals]


def ddp_result(path):
    evals, steps_s = [], None
    with open(path) as f:
        for line in f:
            w = line.split()
            if w and w[0] == "eval":
                evals.append((float(w[2]), float(w[3])))
            elif w and w[0] == "steps":
                steps_s = float(w[2])
    return steps_s, evals


TRANSFER_MIB = [1, 4, 12, 32]


def gloo_env(hosts, rate):
    port = str(29500 + random.randrange(400))
    gloo = [] if rate == "shm" else ["GLOO_SOCKET_IFNAME=eth0"]  # the host's link, not lo
    return ["MASTER_ADDR=" + hosts.master(), "MASTER_PORT=" + port] + gloo


def transfer(a, out, env):
    """The sums alone: darknet's ring and MPI_Allreduce over each pml, gloo."""
    bench = os.path.join(a.build, "tests", "bench_transfer")
    if not os.access(bench, os.X_OK):
        fail("%s not found (cmake --build %s --target bench_transfer)" % (bench, a.build))
    ms = {}
    sizes = [str(m) for m in TRANSFER_MIB]
    with Hosts(a.ranks, a.rate) as hosts:
        for pml in a.pml:
            log = os.path.join(out, "transfer-%s.log" % pml)
            run(hosts.mpirun(["OPENBLAS_NUM_THREADS=1"], [bench, "10", "2"] + sizes, pml), log, env)
            with open(log) as f:
                rows = [l.split() for l in f if l.split() and l.split()[0].isdigit()]
            for r in rows:
                mib = int(r[0]) / 2.0 ** 20
                ms.setdefault(mib, {})["ring, " + pml] = float(r[1])
                ms[mib]["MPI_Allreduce, " + pml] = float(r[3])
        log = os.path.join(out, "transfer-gloo.log")
        run(hosts.mpirun(gloo_env(hosts, a.rate), ["/usr/bin/python3", WORKER, "allreduce", "10"] + sizes), log, env)
        with open(log) as f:
            for l in f:
                w = l.split()
                if w and w[0] == "allreduce":
                    ms.setdefault(float(w[1]), {})["gloo"] = float(w[2])
    cols = [c % p for p in a.pml for c in ("ring, %s", "MPI_Allreduce, %s")] + ["gloo"]
    print("\n| MiB | " + " | ".join(c + " (ms)" for c in cols) + " | the link's time (ms) |")
    print("|---:|" + "---:|" * (len(cols) + 1))
    for mib in sorted(ms):
        row = ms[mib]
        link = 2.0 * (a.ranks - 1) / a.ranks * mib * 2 ** 20 * 8 / 956e6 * 1000
        cell = lambda c: "%.1f (%.0f %%)" % (row[c], 100 * link / row[c]) if c in row else "-"  # noqa: E731
        print("| %g | %s | %.1f |" % (mib, " | ".join(cell(c) for c in cols), link))


def main():
    a = options()
    if subprocess.call(["/usr/bin/python3", "-c", "import torch"], stderr=subprocess.DEVNULL):
        fail("needs Debian's python3-torch (apt-get install python3-torch)")
    out = a.out or tempfile.mkdtemp(prefix="bench-ddp.")
    write_machine_txt(out, sys.argv)
    env = dict(os.environ, OPENBLAS_NUM_THREADS="1", OMPI_ALLOW_RUN_AS_ROOT="1",
               OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1")
    if a.transfer:
        print("bench-ddp: the sums alone, %d ranks, %s; files in %s"
              % (a.ranks, "shared memory" if a.rate == "shm" else "emulated hosts, " + a.rate, out), flush=True)
        return transfer(a, out, env)
    data, init, cfgs = darknet_files(a, out)
    runs = [("ddp", None, None)] + [("%s (%s)" % (n, p) if a.rate != "shm" else n, n, p)
                                    for p in a.pml for n, _ in DARKNET_RUNS]
    names = [name for name, _, _ in runs]
    res = {n: {"ms": [], "exposed": [], "evals": None} for n in names}
    print("bench-ddp: %s, %d ranks, %s, batch %d per rank, %d steps, %d round(s); files in %s"
          % (os.path.basename(a.cfg), a.ranks, "shared memory" if a.rate == "shm" else "emulated hosts, " + a.rate,
             a.batch, a.steps, a.rounds, out), flush=True)
    with Hosts(a.ranks, a.rate) as hosts:
        for r in range(a.rounds):
            for n, kind, pml in runs:
                log = os.path.join(out, "%s.%d.log" % (n.replace(" (", ".").rstrip(")"), r))
                if n == "ddp":
                    res_file = os.path.join(out, "ddp.%d.out" % r)
                    run(hosts.mpirun(gloo_env(hosts, a.rate),
                                     ["/usr/bin/python3", WORKER, a.cfg, str(a.steps), str(a.batch),
                                      str(a.eval_every), str(a.heldout), res_file]), log, env)
                    total, evals = ddp_result(res_file)
                    exposed = None
                else:
                    run(hosts.mpirun(["OPENBLAS_NUM_THREADS=1"],
                                     [os.path.join(a.build, "darknet"), "classifier", "train", data, cfgs[kind],
                                      init], pml), log, env)
                    exposed, evals = metrics(os.path.join(out, "%s.0.tsv" % kind))
                    total = evals[-1][0]
                res[n]["ms"].append(1000 * total / a.steps)
                if exposed is not None:
                    res[n]["exposed"].append(1000 * exposed)
                res[n]["evals"] = evals
                print("  round %d %-15s %7.1f ms/step, final top-1 %.4f" % (r + 1, n, res[n]["ms"][-1], evals[-1][1]),
                      flush=True)
    target = min(res[n]["evals"][-1][1] for n in names)
    ddp_ms = statistics.median(res["ddp"]["ms"])
    ddp_tta = next(t for t, s in res["ddp"]["evals"] if s >= target)
    ddp_final = res["ddp"]["evals"][-1][1]
    print("\n| run | ms per step | vs ddp | communication exposed (ms) | hidden (ms) | final top-1 | "
          "time to %.4f (s) | vs ddp | time to ddp's %.4f (s) | vs ddp |" % (target, ddp_final))
    print("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    for n, kind, pml in runs:
        ms = statistics.median(res[n]["ms"])
        exp = statistics.median(res[n]["exposed"]) if res[n]["exposed"] else None
        against = n.replace(kind, HIDDEN_AGAINST[kind], 1) if kind in HIDDEN_AGAINST else None
        hidden = statistics.median(res[against]["exposed"]) - exp if against else None
        tta = next(t for t, s in res[n]["evals"] if s >= target)
        ttd = next((t for t, s in res[n]["evals"] if s >= ddp_final), None)
        print("| %s | %.1f | %.2fx | %s | %s | %.4f | %.1f | %.2fx | %s | %s |"
              % (n, ms, ms / ddp_ms, "%.1f" % exp if exp is not None else "-",
                 "%.1f" % hidden if hidden is not None else "-", res[n]["evals"][-1][1], tta, ddp_tta / tta,
                 "%.1f" % ttd if ttd else "not reached", "%.2fx" % (res["ddp"]["evals"][-1][0] / ttd) if ttd else "-"))
    print("\nms per step: training time / steps (evaluations left out), median of %d round(s); vs ddp: "
          "this run's time / ddp's for ms, ddp's / this run's for time to accuracy (> 1: faster than ddp)."
          % a.rounds)


if __name__ == "__main__":
    try:
        main()
    except KeyboardInterrupt:
        fail("interrupted; emulated hosts removed")
