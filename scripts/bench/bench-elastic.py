#!/usr/bin/env python3
"""The accuracy of a job that loses one rank of N and goes on with N - 1,
against the same job uninterrupted, over several seeds.

Per seed, two runs of Fashion-MNIST's small classifier (cfg/fmnist.cfg)
with SelSync's defaults, each scored at its end on every held-out image
(the data file's valid= list; all 10 000 test images when prepared whole):
  whole  N ranks from step 0 to STEPS;
  lost   N ranks with checkpoint_every = LOSE_AT x STEPS; once the first
         checkpoint is written, rank N - 1 is killed with SIGKILL (as when
         its host dies, so the steps since that checkpoint are lost), and
         the job resumes from the checkpoint on N - 1 ranks (every rank
         from the old ranks' mean model, docs/usage.md) to STEPS; with
         --keep K ranks K .. N - 1 are killed and it resumes on K, each
         rank with the cfg's batch or, with --resume-batch global, its
         share of the old global batch (resume_batch, docs/configuration.md).
Writes OUT/elastic.tsv (one row per run: seed, run, final top-1, the
resumed step) and prints the table of means and standard deviations.

Usage: scripts/bench/bench-elastic.py OUT [--ranks 4] [--steps 300] [--batch 32]
       [--lose-at 0.3] [--keep RANKS-1] [--resume-batch rank|global]
       [--runs whole,lost] [--seeds 1,2,3] [--data data/fashion-mnist/fmnist.data]"""
import argparse
import os
import re
import signal
import statistics
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))  # scripts/, for its compare package
from compare.provenance import write_machine_txt  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
DARKNET = os.path.join(ROOT, "build", "darknet")


def cfg_text(steps, batch, seed, every, log, resume_batch):
    lines = []
    with open(os.path.join(ROOT, "cfg", "fmnist.cfg")) as f:
        for line in f:
            if line.startswith("max_batches="):
                line = "max_batches=%d\n" % steps
            elif line.startswith("batch="):
                line = "batch=%d\n" % batch
            lines.append(line)
    lines.append("\n[selsync]\nmethod=selsync\nseed=%d\neval_every=%d\nlog=%s\nchart_every=0\n" % (seed, steps, log))
    if every:
        lines.append("checkpoint_every=%d\nresume_batch=%s\n" % (every, resume_batch))
    return "".join(lines)


def mpirun(ranks, args, out):
    env = dict(os.environ, OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1",
               OPENBLAS_NUM_THREADS="1")
    cmd = ["mpirun", "--oversubscribe", "-np", str(ranks), "-x", "OPENBLAS_NUM_THREADS", DARKNET] + args
    return subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT, env=env, start_new_session=True)


def rank_pid(parent, rank):
    """The pid of the darknet process of MPI rank `rank` under mpirun `parent`."""
    for pid in os.listdir("/proc"):
        if not pid.isdigit():
            continue
        try:
            with open("/proc/%s/stat" % pid) as f:
                ppid = int(f.read().rsplit(")", 1)[1].split()[1])
            if ppid != parent:
                continue
            with open("/proc/%s/environ" % pid, "rb") as f:
                env = f.read().split(b"\0")
            if ("OMPI_COMM_WORLD_RANK=%d" % rank).encode() in env:
                return int(pid)
        except (OSError, IndexError, ValueError):
            continue
    return None


def final_top1(metrics):
    top1 = None
    with open(metrics) as f:
        for line in f:
            if line.startswith("# eval"):
                m = re.search(r"\ttop1=([0-9.]+)", line)
                top1 = float(m.group(1)) if m else top1
    if top1 is None:
        sys.exit("%s: no evaluation row" % metrics)
    return top1


def run_whole(a, seed, folder):
    os.makedirs(folder, exist_ok=True)
    cfg = os.path.join(folder, "run.cfg")
    with open(cfg, "w") as f:
        f.write(cfg_text(a.steps, a.batch, seed, 0, os.path.join(folder, "m.%r.tsv"), a.resume_batch))
    with open(os.path.join(folder, "output.txt"), "w") as out:
        if mpirun(a.ranks, ["classifier", "train", a.data, cfg], out).wait() != 0:
            sys.exit("%s: the run failed (see output.txt)" % folder)
    return final_top1(os.path.join(folder, "m.0.tsv")), ""


def run_lost(a, seed, folder):
    os.makedirs(folder, exist_ok=True)
    cfg = os.path.join(folder, "run.cfg")
    every = max(1, round(a.lose_at * a.steps))
    with open(cfg, "w") as f:
        f.write(cfg_text(a.steps, a.batch, seed, every, os.path.join(folder, "m.%r.tsv"), a.resume_batch))
    backup = None
    with open(a.data) as f:
        for line in f:
            if line.startswith("backup="):
                backup = line.split("=", 1)[1].strip()
    checkpoint = os.path.join(backup, "run_checkpoint.weights")
    if os.path.exists(checkpoint):
        os.remove(checkpoint)
    with open(os.path.join(folder, "output.txt"), "w") as out:
        job = mpirun(a.ranks, ["classifier", "train", a.data, cfg], out)
        while not os.path.exists(checkpoint) and job.poll() is None:
            time.sleep(0.02)
        pids = [rank_pid(job.pid, r) for r in range(a.keep, a.ranks)]
        if None in pids or job.poll() is not None:
            sys.exit("%s: the job ended before its checkpoint at step %d was written" % (folder, every))
        for pid in pids:
            os.kill(pid, signal.SIGKILL)
        job.wait()
        out.write("\n--- ranks %d..%d killed after the checkpoint of step %d; resuming on %d ranks ---\n"
                  % (a.keep, a.ranks - 1, every, a.keep))
        out.flush()
        if mpirun(a.keep, ["classifier", "train", a.data, cfg, checkpoint], out).wait() != 0:
            sys.exit("%s: the resumed run failed (see output.txt)" % folder)
    with open(os.path.join(folder, "output.txt")) as f:
        resumed = re.search(r"resumed at step (\d+) from a checkpoint", f.read())
    return final_top1(os.path.join(folder, "m.0.tsv")), resumed.group(1) if resumed else "?"


def main():
    p = argparse.ArgumentParser()
    p.add_argument("out")
    p.add_argument("--ranks", type=int, default=4)
    p.add_argument("--steps", type=int, default=300)
    p.add_argument("--batch", type=int, default=32)
    p.add_argument("--lose-at", type=float, default=0.3)
    p.add_argument("--keep", type=int, help="ranks after the loss (default: --ranks - 1)")
    p.add_argument("--resume-batch", choices=("rank", "global"), default="rank")
    p.add_argument("--runs", default="whole,lost", help="which runs: whole, lost or both")
    p.add_argument("--seeds", default="1,2,3")
    p.add_argument("--data", default=os.path.join(ROOT, "data", "fashion-mnist", "fmnist.data"))
    a = p.parse_args()
    a.keep = a.ranks - 1 if a.keep is None else a.keep
    runs = a.runs.split(",")
    if a.ranks < 2 or not 0 < a.lose_at < 1 or not 1 <= a.keep < a.ranks or not set(runs) <= {"whole", "lost"}:
        sys.exit("--ranks must be at least 2, --lose-at in (0, 1), --keep from 1 to --ranks - 1, "
                 "--runs whole, lost or both")
    if not os.path.exists(a.data):
        sys.exit("%s: no data file (scripts/data/prepare-fashion-mnist.py --out %s)" % (a.data, os.path.dirname(a.data)))
    write_machine_txt(a.out, sys.argv)
    rows = []
    for seed in [int(s) for s in a.seeds.split(",")]:
        for name, fn in (("whole", run_whole), ("lost", run_lost)):
            if name not in runs:
                continue
            t0 = time.time()
            top1, resumed = fn(a, seed, os.path.join(a.out, "seed-%d" % seed, name))
            rows.append((seed, name, top1, resumed))
            print("seed %d %s: top-1 %.4f%s (%.0f s)" % (seed, name, top1,
                  ", resumed at step %s on %d ranks" % (resumed, a.keep) if resumed else "", time.time() - t0),
                  flush=True)
    with open(os.path.join(a.out, "elastic.tsv"), "w") as f:
        f.write("seed\trun\ttop1\tresumed_step\n")
        for r in rows:
            f.write("%d\t%s\t%.4f\t%s\n" % r)
    print("| run | top-1 (mean ± sd) | per seed |")
    print("|---|---:|---|")
    sd = lambda v: statistics.stdev(v) if len(v) > 1 else 0.0
    for name, label in (("whole", "%d ranks throughout" % a.ranks),
                        ("lost", "ranks %d..%d lost at %.0f %%, %d ranks after (resume_batch = %s)"
                         % (a.keep, a.ranks - 1, 100 * a.lose_at, a.keep, a.resume_batch))):
        v = [r[2] for r in rows if r[1] == name]
        if not v:
            continue
        print("| %s | %.4f ± %.4f | %s |" % (label, statistics.mean(v), sd(v), " / ".join("%.4f" % x for x in v)))


if __name__ == "__main__":
    main()
