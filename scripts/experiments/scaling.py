#!/usr/bin/env python3
"""BSP and SelSync at several rank counts in virtual time: throughput and
time to a common accuracy against the number of ranks, one table and one
plot.

Usage: scripts/experiments/scaling.py [--ranks 4,8,16,32] [--methods bsp,selsync-0.3]
           [--suite wide] [--steps S] [--batch B] [--eval-every K]
           [--lr-rule cfg|linear] [--bandwidth RATE] [--jobs J] [--quick]
           [--results DIR]

Every rank count runs scripts/experiments/compare-methods.py --virtual (each rank a
machine of its own on the modelled network, whatever the cores here) with
the same per-rank batch, step budget and learning-rate rule (cfg, the
default: the cfg's rate at every global batch; linear: the rate grows with
the global batch, after a warm-up), so more ranks see more images in the
same steps (weak scaling). A run that diverged gets a row saying so and
stays out of the common score and the plot.

Printed and written (RESULTS/<date>-scaling-<suite>-<rate>/scaling.md,
scaling.tsv, scaling.png; the comparisons under runs/): per rank count and
method the images trained, the virtual training time, images/s, the final
held-out score, the virtual time to the common score (the lowest final
score of all the runs, so that every run reaches it, at an evaluation or at
the end), the share of synchronised steps, and the distribution of the
change Δ after SelSync's warm-up (rank 0's metrics; the steps of a run
without a warm-up count from step 25 alike).

--quick: 2 and 4 ranks, compare-methods' quick budget (4 steps, batch 8):
the test of the script, not a measurement.
"""
import argparse
import math
import os
import subprocess
import sys
import time

# the modules: scripts/compare/
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))  # scripts/, for compare/
from compare.common import draw_png  # noqa: E402
from compare.metrics import WARMUP, quantile, read_metrics  # noqa: E402
from compare.provenance import write_machine_txt  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
COMPARE = os.path.join(ROOT, "scripts", "experiments", "compare-methods.py")


def fail(msg):
    print("scaling: " + msg, file=sys.stderr)
    sys.exit(1)


def options():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--ranks", help="comma-separated rank counts (default 4,8,16,32; quick 2,4)")
    ap.add_argument("--methods", default="bsp,selsync-0.3", help="compare-methods' method keys")
    ap.add_argument("--suite", default="wide", help="a compare-methods suite (default wide)")
    ap.add_argument("--steps", type=int, default=200)
    ap.add_argument("--batch", type=int, default=16, help="images per rank and step")
    ap.add_argument("--eval-every", type=int, help="held-out evaluation every K steps (default steps/4)")
    ap.add_argument("--lr-rule", choices=("cfg", "linear"), default="cfg",
                    help="compare-methods' learning-rate rule (default cfg: the cfg's rate at every global batch)")
    ap.add_argument("--bandwidth", default="1gbit")
    ap.add_argument("--jobs", type=int, default=1, help="runs at the same time within a rank count")
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--results", default=os.path.join(ROOT, "results"))
    a = ap.parse_args()
    try:
        a.ranks = [int(r) for r in (a.ranks or ("2,4" if a.quick else "4,8,16,32")).split(",")]
    except ValueError:
        fail("--ranks takes comma-separated integers, e.g. 4,8,16")
    if min(a.ranks) < 2 or min(a.steps, a.batch, a.jobs) < 1:
        fail("every rank count must be >= 2, and --steps, --batch and --jobs >= 1")
    a.methods = [m for m in a.methods.split(",") if m]
    return a


def compare(a, ranks, runs_dir):
    """One compare-methods run at `ranks`; its results folder."""
    os.makedirs(runs_dir, exist_ok=True)
    before = set(os.listdir(runs_dir))
    cmd = [sys.executable, COMPARE, "--virtual", "--ranks", str(ranks), "--suites", a.suite,
           "--methods", ",".join(a.methods), "--bandwidth", a.bandwidth, "--jobs", str(a.jobs),
           "--results", runs_dir]
    cmd += ["--quick"] if a.quick else ["--steps", str(a.steps), "--batch", str(a.batch), "--lr-rule", a.lr_rule,
                                        "--eval-every", str(a.eval_every or max(1, a.steps // 4))]
    log = os.path.join(runs_dir, "%dranks.log" % ranks)
    with open(log, "w") as f:
        if subprocess.call(cmd, stdout=f, stderr=subprocess.STDOUT):
            fail("compare-methods at %d ranks failed; see %s" % (ranks, log))
    new = sorted(set(os.listdir(runs_dir)) - before - {os.path.basename(log)})
    if len(new) != 1:
        fail("expected one new results folder in %s, found %s" % (runs_dir, new))
    return os.path.join(runs_dir, new[0])


def read_results(a, ranks, folder):
    """Per method: steps, virtual training time, final score and the score
    curve [(seconds, score)] of compare-methods' results folder."""
    rows = {}
    with open(os.path.join(folder, "summary.tsv")) as f:
        head = f.readline().rstrip("\n").split("\t")
        for line in f:
            r = dict(zip(head, line.rstrip("\n").split("\t")))
            if r["suite"] == a.suite and r["network"] == "virtual" and r["method"] in a.methods:
                rows[r["method"]] = r
    out = {}
    for m in a.methods:
        if m not in rows:
            fail("%s has no %s run on %s" % (folder, m, a.suite))
        if rows[m]["final"].startswith("diverged"):
            out[m] = {"ranks": ranks, "diverged": rows[m]["final"]}
            continue
        with open(os.path.join(folder, "plots", "acc-%s-virtual-%s.dat" % (a.suite, m))) as f:
            curve = [(float(w[1]), float(w[2])) for w in (line.split() for line in f) if len(w) == 3]
        with open(os.path.join(folder, "runs", a.suite, "virtual-%s" % m, "run.cfg")) as f:
            batch = next(int(line.split("=")[1]) for line in f if line.replace(" ", "").startswith("batch="))
        steps_rows, _ = read_metrics(os.path.join(folder, "runs", a.suite, "virtual-%s" % m, "metrics.0.tsv"))
        decisions = [row["decision"] for row in steps_rows]
        changes = [row["change"] for row in steps_rows if row["step"] >= WARMUP and math.isfinite(row["change"])]
        r = rows[m]
        steps = int(r["steps"])
        out[m] = {"ranks": ranks, "steps": steps, "images": ranks * steps * batch,
                  "time": float(r["training_s"]), "final": float(r["final"]), "curve": curve,
                  "synced": decisions.count("sync") / max(1, len(decisions)), "changes": sorted(changes)}
    return out


def plot(out, rows, methods, target):
    plots = []
    for i, m in enumerate(methods):
        dat = "scaling-%s.dat" % m
        with open(os.path.join(out, dat), "w") as f:
            for r in rows:
                if r["method"] == m:
                    f.write("%d\t%.3f\t%.4f\n" % (r["ranks"], r["images"] / r["time"], r["to_target"]))
        plots.append((dat, m))
    script = ("set terminal pngcairo size 1200,500 noenhanced font ',10'\nset output 'scaling.png'\n"
              "set multiplot layout 1,2 title 'virtual time, %s'\nset logscale x 2\nset grid\n"
              "set xlabel 'ranks'\nset key top left\n"
              "set ylabel 'images/s'\nset title 'throughput'\nplot %s\n"
              "set ylabel 'seconds'\nset title 'time to held-out %.4f (the lowest final score)'\nplot %s\n"
              "unset multiplot\n"
              % (os.path.basename(out), ", ".join("'%s' using 1:2 with linespoints title '%s'" % p for p in plots),
                 target, ", ".join("'%s' using 1:3 with linespoints title '%s'" % p for p in plots)))
    why = draw_png(out, "scaling", script)
    if why:
        fail(why)


def main():
    a = options()
    started = time.time()
    out = os.path.join(os.path.abspath(a.results), "%s-scaling-%s-%s%s" % (
        time.strftime("%Y%m%d-%H%M%S", time.gmtime(started)), a.suite, a.bandwidth, "-quick" if a.quick else ""))
    os.makedirs(out)
    write_machine_txt(out, sys.argv)
    print("scaling: %s at %s ranks, virtual time, %s links; results in %s"
          % (", ".join(a.methods), ", ".join(map(str, a.ranks)), a.bandwidth, out), flush=True)
    rows = []
    for n in a.ranks:
        t0 = time.time()
        res = read_results(a, n, compare(a, n, os.path.join(out, "runs")))
        for m in a.methods:
            rows.append(dict(res[m], method=m))
        print("  %d ranks done in %.0f s" % (n, time.time() - t0), flush=True)
    done = [r for r in rows if "diverged" not in r]
    if not done:
        fail("every run diverged; see the comparisons in %s" % os.path.join(out, "runs"))
    target = min(r["final"] for r in done)
    for r in done:  # the first evaluation at or above the target (the last point is the final model)
        r["to_target"] = next(t for t, s in r["curve"] if s >= target)
    bsp = {r["ranks"]: r["to_target"] for r in done if r["method"] == "bsp"}
    lines = ["| ranks | method | steps | images | virtual training time (s) | images/s | final | "
             "time to %.4f (s) | vs bsp | synchronised | Δ after warm-up: median, 90th percentile |" % target,
             "|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|---|"]
    with open(os.path.join(out, "scaling.tsv"), "w") as f:
        f.write("ranks\tmethod\tsteps\timages\ttraining_s\timages_per_s\tfinal\ttime_to_target_s\n")
        for r in rows:
            if "diverged" in r:
                lines.append("| %d | %s | %s | | | | | | | | |" % (r["ranks"], r["method"], r["diverged"]))
                continue
            f.write("%d\t%s\t%d\t%d\t%.3f\t%.1f\t%.4f\t%.3f\n" % (r["ranks"], r["method"], r["steps"], r["images"],
                                                                r["time"], r["images"] / r["time"], r["final"],
                                                                r["to_target"]))
            vs = "%.2fx" % (bsp[r["ranks"]] / r["to_target"]) if r["ranks"] in bsp else "-"
            med, p90 = quantile(r["changes"], 0.5), quantile(r["changes"], 0.9)
            lines.append("| %d | %s | %d | %d | %.1f | %.0f | %.4f | %.1f | %s | %.0f%% | %s |"
                         % (r["ranks"], r["method"], r["steps"], r["images"], r["time"], r["images"] / r["time"],
                            r["final"], r["to_target"], vs, 100 * r["synced"],
                            "%.3g, %.3g" % (med, p90) if med is not None else "-"))
    plot(out, done, a.methods, target)
    text = "\n".join(lines)
    with open(os.path.join(out, "scaling.md"), "w") as f:
        f.write("# Scaling in virtual time\n\n`%s` (%.0f s)\n\n%s\n\nvs bsp: BSP's time to the score over this "
                "run's, at the same rank count. Plot: scaling.png.\n"
                % (" ".join(["scripts/experiments/scaling.py"] + sys.argv[1:]), time.time() - started, text))
    print("\n" + text + "\n\nscaling: %s (%.0f s)" % (os.path.join(out, "scaling.md"), time.time() - started))


if __name__ == "__main__":
    try:
        main()
    except KeyboardInterrupt:
        fail("interrupted")
