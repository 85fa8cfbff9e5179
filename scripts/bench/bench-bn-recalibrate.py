#!/usr/bin/env python3
"""BSP under label skew and iid, the final model's BatchNorm statistics
without and with recalibration (bn_recalibrate), over several seeds.

Every run is one scripts/experiments/compare-methods.py run of BSP (--virtual) whose only
evaluation before the end is at its last step: that row scores the final
(averaged) model as training left it, and the row the session writes after
the recalibration scores the same model with re-estimated statistics. Both
are on all 10 000 held-out images (with label:K, when every class is held
by some rank). Writes OUT/bn-recalibrate.tsv (one row per run) and prints
the table of means and standard deviations.

Usage: scripts/bench/bench-bn-recalibrate.py OUT [--ranks 16] [--steps 300] [--batch 32]
       [--seeds 1,2,3] [--samples 1000] [--settings-net small] [--partitions iid,label]"""
import argparse
import glob
import os
import statistics
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))  # scripts/, for its compare package
from compare.provenance import write_machine_txt  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def evals(metrics):
    rows = []
    with open(metrics) as f:
        for line in f:
            if line.startswith("# eval"):
                kv = dict(x.split("=", 1) for x in line.rstrip("\n").split("\t")[1:])
                rows.append(kv)
    return rows


def main():
    p = argparse.ArgumentParser()
    p.add_argument("out")
    p.add_argument("--ranks", type=int, default=16)
    p.add_argument("--steps", type=int, default=300)
    p.add_argument("--batch", type=int, default=32)
    p.add_argument("--seeds", default="1,2,3")
    p.add_argument("--samples", type=int, default=1000)
    p.add_argument("--settings-net", default="small")
    p.add_argument("--partitions", default="iid,label")
    a = p.parse_args()
    write_machine_txt(a.out, sys.argv)
    tsv = os.path.join(a.out, "bn-recalibrate.tsv")
    rows = []
    for seed in [int(s) for s in a.seeds.split(",")]:
        res = os.path.join(a.out, "seed%d" % seed)
        cmd = [sys.executable, os.path.join(ROOT, "scripts", "experiments", "compare-methods.py"), "--virtual",
               "--ranks", str(a.ranks), "--steps", str(a.steps), "--eval-every", str(a.steps),
               "--eval-images", "10000", "--batch", str(a.batch), "--lr-rule", "cfg",
               "--settings-net", a.settings_net, "--suites", a.partitions, "--methods", "bsp",
               "--seed", str(seed), "--bn-recalibrate", str(a.samples), "--results", res]
        print("+ " + " ".join(cmd), flush=True)
        subprocess.run(cmd, check=True)
        for suite in a.partitions.split(","):
            run = sorted(glob.glob(os.path.join(res, "*", "runs", suite, "*-bsp")))[-1]
            ev = [e for e in evals(os.path.join(run, "metrics.0.tsv")) if int(e["step"]) == a.steps]
            if len(ev) != 2:
                sys.exit("%s: expected two evaluation rows at step %d, found %d" % (run, a.steps, len(ev)))
            with open(os.path.join(run, "output.txt")) as f:
                recal = [l for l in f if "re-estimated" in l]
            secs = recal[-1].split("(")[1].split(" s")[0] if recal else ""
            rows.append([a.ranks, a.steps, a.batch, a.settings_net, suite, seed, a.samples,
                         ev[0]["top1"], ev[1]["top1"], secs, os.path.relpath(run, a.out)])
    with open(tsv, "w") as f:
        f.write("ranks\tsteps\tbatch\tnet\tsuite\tseed\tbn_recalibrate\ttop1_off\ttop1_on\trecalibrate_s\trun\n")
        for r in rows:
            f.write("\t".join(str(x) for x in r) + "\n")
    print("| suite | recalibration off | on (%d images per rank) | runs |" % a.samples)
    print("|---|---|---|---|")
    for suite in a.partitions.split(","):
        off = [float(r[7]) for r in rows if r[4] == suite]
        on = [float(r[8]) for r in rows if r[4] == suite]
        sd = lambda v: statistics.stdev(v) if len(v) > 1 else 0.0
        print("| %s | %.4f ± %.4f | %.4f ± %.4f | %d |" % (suite, statistics.mean(off), sd(off),
                                                         statistics.mean(on), sd(on), len(on)))
    print("rows: " + tsv)


if __name__ == "__main__":
    main()
