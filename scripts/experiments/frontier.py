#!/usr/bin/env python3
"""The accuracy-communication frontier of one workload: every method of a
grid, with several seeds, in virtual time; final held-out score against
bytes sent per rank and against training time, mean and spread over the
seeds. Resumable: a run whose results are there is not run again.

Usage: scripts/experiments/frontier.py [--suite wide|det|...] [--ranks 16] [--seeds 1,2,3]
           [--methods KEY,...] [--steps S] [--batch B] [--eval-images N]
           [--bandwidth RATE] [--stragglers SPEC] [--lr-rule cfg|linear] [--det-cfg CFG] [--jobs J]
           [--eval-every K] [--target SCORE] [--real] [--quick] [--results DIR]

Each (seed, method) is one scripts/experiments/compare-methods.py --virtual run (each
rank a machine of its own on the modelled network, whatever the cores here;
with --real, ranks over real MPI between emulated hosts instead, whose
times are measured and need the cores) in RESULTS/seed-S/METHOD/; a run is done when its summary.tsv is there, so
the command run again goes on where it stopped (a run cut short starts
again). Progress goes to stdout, one line per run with the time left
estimated from the runs so far: run it with nohup and a log.

The grid (--methods): BSP; FedAvg every 2, 4, 8 and 16 steps; SelSync over
delta (0.05, 0.1, 0.3, 0.5) and over target_sync (0.05, 0.1, 0.25, 0.5),
the shares of synchronised steps that delta is adapted to; SelSync with the
quadratic synchronisation rule (delta 0.3, max_local 4, qsr_alpha 0.1:
the bound on local steps in a row grows as the rate decays); SelSync on the
drift rule alone (drift 1e-4, 3e-4, 1e-3; delta never fires); FedAvg every
4 and SelSync delta 0.3 with SlowMo's outer momentum (0.5); SelSync with its
defaults (delta 0.3 on the ranks' mean change and the drift rule at 1e-4;
every other SelSync key here sets drift = 0 and agree = any, the paper's
rule alone). Outside the grid, selsync-postlocal: the defaults after
post-local SGD's synchronised start (sync_until=burn_in, for cfgs with a
burn_in); selsync-any and selsync-mean: the defaults with each agreement
on the change; selsync-mean-drift-3e-4 and -1e-3: the same with a higher
drift threshold. The seed sets
the data order and partition; every run of a seed starts from the same
initial weights.

Written to RESULTS/: frontier.tsv (one row per run), frontier.md (per method
the mean and sample standard deviation of the final score over the seeds,
its bytes per rank, training time and synchronised share, and which
differences to BSP's mean lie inside the seeds' spread; then, paired seed
by seed, each method against BSP and against the FedAvg period nearest it
in bytes: the mean ± sd of the per-seed difference and a sign count, e.g.
3/3 above; then where the time goes: each method's training time per
rank, its computation, measuring, agreement and transfer over real MPI, or
its computation, waiting and network in virtual time, and its training
time against BSP's, seed by seed), frontier.png (the two plots, with
error bars). A method key that compare-methods does not know is refused
before anything runs. Every run of
a seed starts from the same initial weights and draws the same data
(runs are reproducible), so the per-seed differences are paired.

Time to a score: every method's training time (virtual) at its first
held-out evaluation at or above --target (default: BSP's mean final
score, when bsp is among the methods), the mean over the seeds that
reached it; --eval-every K evaluates every K steps (default a quarter of
the steps), which sets the resolution.

--quick: 2 ranks, compare-methods' quick budget (4 steps, batch 8), seeds
1,2, methods bsp,fedavg-2: the test of the script, not a measurement.
"""
import argparse
import glob
import math
import os
import shutil
import statistics
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))  # scripts/, for compare/
from compare.common import draw_png, fedavg_period, seeds_of, spread  # noqa: E402  (the modules: scripts/compare/)
from compare.metrics import read_metrics, run_times  # noqa: E402
from compare.runs import methods as known_methods  # noqa: E402
from compare.provenance import write_machine_txt  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
COMPARE = os.path.join(ROOT, "scripts", "experiments", "compare-methods.py")
GRID = ("bsp,fedavg-2,fedavg-4,fedavg-8,fedavg-16,selsync-0.05,selsync-0.1,selsync-0.3,selsync-0.5,"
        "selsync-target-0.05,selsync-target-0.1,selsync-target-0.25,selsync-target-0.5,selsync-qsr,"
        "selsync-drift-1e-4,selsync-drift-3e-4,selsync-drift-1e-3,fedavg-4-outer,selsync-0.3-outer,selsync")


def fail(msg):
    print("frontier: " + msg, file=sys.stderr)
    sys.exit(1)


def options():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--suite", default="wide", help="a compare-methods suite (default wide)")
    ap.add_argument("--ranks", type=int, help="ranks of every run (default 16; quick 2)")
    ap.add_argument("--seeds", help="comma-separated seeds (default 1,2,3; quick 1,2)")
    ap.add_argument("--methods", help="compare-methods' method keys (default: the grid above)")
    ap.add_argument("--steps", type=int, default=200, help="steps per run (default 200)")
    ap.add_argument("--batch", type=int, default=32, help="images per rank and step (default 32)")
    ap.add_argument("--subdivisions", type=int, default=0,
                    help="mini-batches per rank and step (default: the cfg's; compare-methods --subdivisions)")
    ap.add_argument("--eval-images", type=int, default=10000,
                    help="held-out images of every evaluation (default 10000: all of Fashion-MNIST's test set)")
    ap.add_argument("--bandwidth", default="1gbit")
    ap.add_argument("--stragglers", default="", metavar="SPEC",
                    help="compare-methods' --stragglers: slow=R:F[+R:F...] and/or jitter=P:TIME (drawn from each seed)")
    ap.add_argument("--lr-rule", choices=("cfg", "linear"), default="cfg",
                    help="compare-methods' learning-rate rule (linear: the cfg's rate times the ranks)")
    ap.add_argument("--det-cfg", help="the detector's cfg of the det suite (default cfg/fmnist-det.cfg; "
                    "cfg/fmnist-det-tiny-yolov3.cfg is Darknet's yolov3-tiny layout)")
    ap.add_argument("--settings-net", choices=("small", "wide"),
                    help="the network of the iid, label and label-inject suites (compare-methods "
                    "--settings-net; default small, cfg/fmnist.cfg)")
    ap.add_argument("--jobs", type=int, default=1, help="runs at the same time (compare-methods --jobs)")
    ap.add_argument("--eval-every", type=int, default=0,
                    help="held-out evaluations every K steps (default: a quarter of the steps)")
    ap.add_argument("--target", type=float,
                    help="the score whose time each method reports (default: BSP's mean, when bsp runs)")
    ap.add_argument("--real", action="store_true",
                    help="real MPI between emulated hosts at --bandwidth (compare-methods without --virtual; "
                    "measured times) instead of virtual time")
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--results", default=os.path.join(ROOT, "results", "frontier"),
                    help="the folder of this frontier (default results/frontier); run again, it resumes")
    a = ap.parse_args()
    a.ranks = a.ranks or (2 if a.quick else 16)
    a.seeds = seeds_of(a.seeds or ("1,2" if a.quick else "1,2,3"))
    if a.seeds is None:
        fail("--seeds takes comma-separated integers, e.g. 1,2,3")
    a.methods = [m for m in (a.methods or ("bsp,fedavg-2" if a.quick else GRID)).split(",") if m]
    if a.det_cfg and not os.path.isfile(a.det_cfg):
        fail("--det-cfg %s: no such file" % a.det_cfg)
    a.det_cfg = a.det_cfg and os.path.abspath(a.det_cfg)
    known = [k for k, _, _ in known_methods(4 if a.quick else a.steps, True)]
    unknown = [m for m in a.methods if m.split("+")[0] not in known]
    if unknown:
        fail("unknown method '%s'; methods: %s (each may be followed by +KEY=VALUE settings)"
             % (unknown[0], ", ".join(known)))
    if a.ranks < 2 or min(a.steps, a.batch, a.jobs, a.eval_images) < 1 or a.eval_every < 0 or not a.seeds or not a.methods:
        fail("--ranks must be >= 2; --steps, --batch, --jobs, --eval-images >= 1; --eval-every >= 0; "
             "at least one seed and method")
    return a


def run_one(a, seed, method, folder):
    """compare-methods for one (seed, method) into folder; the summary.tsv of
    its results folder."""
    os.makedirs(folder, exist_ok=True)
    for old in os.listdir(folder):  # a run cut short starts again
        path = os.path.join(folder, old)
        shutil.rmtree(path) if os.path.isdir(path) else os.remove(path)
    cmd = [sys.executable, COMPARE] + (["--shm-methods", "none"] if a.real else ["--virtual"])
    cmd += ["--ranks", str(a.ranks), "--suites", a.suite,
           "--methods", method, "--seed", str(seed), "--bandwidth", a.bandwidth, "--results", folder]
    cmd += ["--quick"] if a.quick else ["--steps", str(a.steps), "--batch", str(a.batch),
                                       "--eval-images", str(a.eval_images), "--det-eval-images", str(a.eval_images),
                                       "--det-steps", str(a.steps)]
    cmd += ["--det-cfg", a.det_cfg] if a.det_cfg else []
    cmd += ["--lr-rule", a.lr_rule]
    cmd += ["--settings-net", a.settings_net] if a.settings_net else []
    cmd += ["--stragglers", a.stragglers] if a.stragglers else []
    cmd += ["--subdivisions", str(a.subdivisions)] if a.subdivisions else []
    cmd += ["--eval-every", str(a.eval_every), "--det-eval-every", str(a.eval_every)] if a.eval_every else []
    log = os.path.join(folder, "compare.log")
    with open(log, "w") as f:
        if subprocess.call(cmd, stdout=f, stderr=subprocess.STDOUT):
            fail("seed %d, %s failed; see %s" % (seed, method, log))
    found = [d for d in os.listdir(folder) if os.path.exists(os.path.join(folder, d, "summary.tsv"))]
    if len(found) != 1:
        fail("expected one results folder in %s, found %s" % (folder, found))
    return os.path.join(folder, found[0], "summary.tsv")


def summary_of(folder):
    """The summary.tsv of a finished run in folder, or None."""
    if not os.path.isdir(folder):
        return None
    for d in sorted(os.listdir(folder)):
        path = os.path.join(folder, d, "summary.tsv")
        if os.path.exists(path):
            return path
    return None


def read_row(a, path, method):
    with open(path) as f:
        head = f.readline().rstrip("\n").split("\t")
        for line in f:
            r = dict(zip(head, line.rstrip("\n").split("\t")))
            if r["suite"] == a.suite and r["method"] == method:
                return r
    fail("%s has no row for %s on %s" % (path, method, a.suite))


def time_to(folder, target):
    """The training time (virtual where the run had it) of the first held-out
    evaluation at or above target of the run in folder (rank 0's metrics),
    or None when none reached it."""
    for path in glob.glob(os.path.join(folder, "*", "runs", "*", "*", "metrics.0.tsv")):
        for e in sorted(read_metrics(path)[1], key=lambda e: e["step"]):
            score = e.get("top1", e.get("map50"))
            if score is not None and score >= target:
                return e.get("virtual_s", e.get("train_s"))
    return None


TIME_COLS = ("compute_s", "measure_s", "agree_s", "transfer_s", "waiting_s", "network_s")


def times_of(folder):
    """{column: seconds per rank or ""} of the run in folder (TIME_COLS):
    over real MPI the measured compute, measure, agree and transfer (waiting
    for the other ranks inside the last two); in virtual time the virtual
    compute (measuring included: its wall-clock time on shared cores says
    nothing of a host's), waiting and network."""
    outs = glob.glob(os.path.join(folder, "*", "runs", "*", "*", "output.txt"))
    if len(outs) != 1:
        fail("expected one run's output.txt in %s, found %d" % (folder, len(outs)))
    try:
        t = run_times(os.path.dirname(outs[0]))
    except ValueError as e:
        fail(str(e))
    if t["virtual"] is None:
        parts = (t["compute"], t["measure"], t["agree"], t["transfer"], None, None)
    else:
        parts = (t["virtual_compute"], None, None, None, t["waiting"], t["network"])
    return {c: "" if x is None else "%.3f" % x for c, x in zip(TIME_COLS, parts)}


def where_time_goes(rows, methods, real):
    """The table of each method's training time per rank and its parts:
    mean ± sd over the seeds, the parts' shares of the computation, and
    the training time against BSP's on the same seeds (mean ± sd of the
    per-seed ratios)."""
    def col(mine, c):
        if not mine[0][c]:
            return "-"
        xs = [float(r[c]) for r in mine]
        return "%.2f ± %.2f" % (statistics.mean(xs), spread(xs))

    def share(mine, cs):
        if not mine[0][cs[0]]:
            return "-"
        xs = [100 * sum(float(r[c]) for c in cs) / float(r["compute_s"]) for r in mine]
        return "%.1f%%" % statistics.mean(xs)
    parts = ("agree_s", "transfer_s") if real else ("waiting_s", "network_s")
    bsp = {r["seed"]: float(r["training_s"]) for r in rows if r["method"] == "bsp"}
    lines = ["| method | training time | computation | measuring | %s | %s | measuring, of the computation | "
             "%s, of the computation | time vs BSP, same seeds |" % (("agreement", "transfer", "agreement + transfer")
                                                                    if real else ("waiting", "network",
                                                                                  "waiting + network")),
             "|---|---:|---:|---:|---:|---:|---:|---:|---|"]
    for m in methods:
        mine = [r for r in rows if r["method"] == m and r["compute_s"]]
        if not mine:
            continue
        ratios = [float(r["training_s"]) / bsp[r["seed"]] for r in mine if r["seed"] in bsp]
        vs = "%.2fx ± %.2f" % (statistics.mean(ratios), spread(ratios)) if ratios and m != "bsp" else "-"
        lines.append("| %s | %s | %s | %s | %s | %s | %s | %s | %s |"
                     % (m, col(mine, "training_s"), col(mine, "compute_s"), col(mine, "measure_s"),
                        col(mine, parts[0]), col(mine, parts[1]), share(mine, ("measure_s",)), share(mine, parts), vs))
    return lines


def machine_of(folder):
    """The machine line of the run in folder (its run-info.txt: machine,
    OpenBLAS kernel, threads per rank), or "unknown"."""
    for path in glob.glob(os.path.join(folder, "*", "run-info.txt")):
        with open(path) as f:
            info = dict(line.rstrip("\n").split("=", 1) for line in f if "=" in line)
        return "%s; %s; threads per rank: %s" % (info.get("machine", "unknown"), info.get("blas", "kernel unknown"),
                                                 info.get("threads", "?"))
    return "unknown"


def paired(rows, method, other):
    """method against other on the seeds both finished: the per-seed
    differences of the final score as "mean ± sd (k/n above)", or "-"."""
    final = {}
    for r in rows:
        if not r["final"].startswith("diverged"):
            final[(r["method"], r["seed"])] = float(r["final"])
    diffs = [final[(method, s)] - final[(other, s)] for (m, s) in final if m == method and (other, s) in final]
    if not diffs or method == other:
        return "-"
    return "%+.4f ± %.4f (%d/%d above)" % (statistics.mean(diffs), spread(diffs), sum(d > 0 for d in diffs),
                                           len(diffs))


def nearest_period(stats, s):
    """The FedAvg period (fedavg-N) whose mean bytes are nearest s's, s excluded; None without one."""
    periods = [x for x in stats if fedavg_period(x["method"]) and x is not s]
    return min(periods, key=lambda x: abs(math.log(x["mb"] / s["mb"])) if x["mb"] > 0 and s["mb"] > 0
               else abs(x["mb"] - s["mb"]), default=None)


def plot(out, stats):
    with open(os.path.join(out, "frontier.dat"), "w") as f:
        for s in stats:
            f.write("%s\t%.6f\t%.6f\t%.6f\t%.3f\n" % (s["method"], s["mb"], s["final"], s["sd"], s["time"]))
    script = ("set terminal pngcairo size 1400,560 noenhanced font ',10'\nset output 'frontier.png'\n"
              "set multiplot layout 1,2 title 'final held-out score, mean and sd over the seeds'\nset grid\n"
              "set key off\nset datafile separator '\\t'\nset ylabel 'final score'\n"
              "set xlabel 'MB sent per rank'\nset logscale x\n"
              "plot 'frontier.dat' using 2:3:4 with yerrorbars pt 7, '' using 2:3:1 with labels offset 0,1 font ',8'\n"
              "unset logscale x\nset xlabel 'training time (s, virtual)'\n"
              "plot 'frontier.dat' using 5:3:4 with yerrorbars pt 7, '' using 5:3:1 with labels offset 0,1 font ',8'\n"
              "unset multiplot\n")
    why = draw_png(out, "frontier", script)
    if why:
        fail(why)


def main():
    a = options()
    out = os.path.abspath(a.results)
    write_machine_txt(out, sys.argv, a.ranks)
    todo = [(s, m) for s in a.seeds for m in a.methods]
    print("frontier: %s, %d ranks, %s at %s, seeds %s, %d runs; results in %s"
          % (a.suite + (" (wide network)" if a.settings_net == "wide" else ""), a.ranks, "emulated hosts" if a.real else "virtual time", a.bandwidth,
             ",".join(map(str, a.seeds)), len(todo), out), flush=True)
    rows, took = [], []
    for i, (seed, method) in enumerate(todo):
        folder = os.path.join(out, "seed-%d" % seed, method)
        path = summary_of(folder)
        if path:
            print("  [%d/%d] seed %d %s: done before" % (i + 1, len(todo), seed, method), flush=True)
        else:
            t0 = time.time()
            path = run_one(a, seed, method, folder)
            took.append(time.time() - t0)
            left = statistics.mean(took) * sum(1 for s, m in todo[i + 1:]
                                               if not summary_of(os.path.join(out, "seed-%d" % s, m)))
            print("  [%d/%d] seed %d %s: %.0f s; about %.0f min left" % (i + 1, len(todo), seed, method, took[-1],
                                                                        left / 60), flush=True)
        r = dict(read_row(a, path, method), seed=seed, folder=folder)
        r.update(dict.fromkeys(TIME_COLS, "") if r["final"].startswith("diverged") else times_of(folder))
        rows.append(r)
    with open(os.path.join(out, "frontier.tsv"), "w") as f:
        cols = ["seed", "method", "final", "local_fraction", "bytes_per_rank", "training_s", *TIME_COLS]
        f.write("\t".join(cols) + "\n")
        for r in rows:
            f.write("\t".join(str(r[c]) for c in cols) + "\n")
    stats = []
    for m in a.methods:
        mine = [r for r in rows if r["method"] == m and not r["final"].startswith("diverged")]
        if not mine:
            continue
        finals = [float(r["final"]) for r in mine]
        gone = sum(1 for r in rows if r["method"] == m) - len(mine)
        stats.append({"method": m, "n": len(mine), "gone": gone, "final": statistics.mean(finals), "sd": spread(finals),
                      "mb": statistics.mean(float(r["bytes_per_rank"]) for r in mine) / 1e6,
                      "time": statistics.mean(float(r["training_s"]) for r in mine),
                      "synced": None if any(r["local_fraction"] == "" for r in mine)  # ssp: no steps to count
                      else 1 - statistics.mean(float(r["local_fraction"]) for r in mine)})
    if not stats:
        fail("every run diverged; see %s" % out)
    bsp = next((s for s in stats if s["method"] == "bsp"), None)
    target = a.target if a.target is not None else bsp and round(bsp["final"], 4)
    for s in stats:
        if target is not None:
            times = [t for t in (time_to(r["folder"], target) for r in rows
                                 if r["method"] == s["method"] and not r["final"].startswith("diverged")) if t is not None]
            s["to"] = "%.2f" % statistics.mean(times) if times else "not reached"
            s["to"] += " (%d of %d seeds)" % (len(times), s["n"]) if 0 < len(times) < s["n"] else ""
    lines = ["| method | seeds | final (mean ± sd) | vs BSP's mean | MB sent per rank | training time (s) | "
             "synchronised |" + (" time to %.4f (s) |" % target if target is not None else ""),
             "|---|---:|---:|---|---:|---:|---:|" + ("---:|" if target is not None else "")]
    for s in stats:
        vs = "-"
        if bsp and s is not bsp:
            d = s["final"] - bsp["final"]
            noise = max(s["sd"], bsp["sd"])
            vs = "%+.4f%s" % (d, " (inside the spread)" if abs(d) <= noise else "")
        synced = "-" if s["synced"] is None else "%.0f%%" % (100 * s["synced"])
        seeds = "%d" % s["n"] + (" (%d diverged)" % s["gone"] if s["gone"] else "")
        lines.append("| %s | %s | %.4f ± %.4f | %s | %.2f | %.2f | %s |" % (s["method"], seeds, s["final"], s["sd"], vs,
                                                                      s["mb"], s["time"], synced)
                     + (" %s |" % s["to"] if target is not None else ""))
    lost = [m for m in a.methods if m not in [s["method"] for s in stats]]
    if lost:
        lines.append("\nDiverged on every seed (training stopped: the gradient was not finite): %s." % ", ".join(lost))
    pairs = ["| method | vs BSP, same seeds | nearest FedAvg period (bytes) | vs it, same seeds |",
             "|---|---|---|---|"]
    for s in stats:
        near = nearest_period(stats, s)
        pairs.append("| %s | %s | %s | %s |" % (s["method"], paired(rows, s["method"], "bsp") if bsp else "-",
                                                near["method"] if near else "-",
                                                paired(rows, s["method"], near["method"]) if near else "-"))
    times = where_time_goes(rows, a.methods, a.real)
    plot(out, stats)
    with open(os.path.join(out, "frontier.md"), "w") as f:
        f.write("# Frontier: %s, %d ranks, %s at %s%s\n\nseeds %s; `%s`\n\nMachine (the last run's): %s\n\n%s\n\n"
                "vs BSP's mean: the difference of the means, \"inside the spread\" when it is no larger than the "
                "larger of the two standard deviations. Time to a score: the mean training time of the first "
                "held-out evaluation at or above it, over the seeds that reached it. Plot: frontier.png. "
                "Every run: frontier.tsv.\n\n## Paired, seed by seed\n\n%s\n\n"
                "Each method against BSP and against the FedAvg period nearest it in bytes (on a log scale), on the "
                "seeds both finished: the mean ± sd of the per-seed difference of the final score, and on how many "
                "seeds the method was above.\n\n## Where the time goes\n\n%s\n\n"
                "Seconds per rank, mean ± sd over the seeds that finished: the training time rank 0's, as above, its parts "
                "the mean over the training ranks. %s "
                "Time vs BSP: each seed's training time over BSP's on the same seed.\n"
                % (a.suite + (" (wide network)" if a.settings_net == "wide" else ""), a.ranks, "emulated hosts, real MPI," if a.real else "virtual time", a.bandwidth,
                   ", stragglers " + a.stragglers if a.stragglers else "",
                   ",".join(map(str, a.seeds)), " ".join(sys.argv), machine_of(rows[-1]["folder"]), "\n".join(lines),
                   "\n".join(pairs), "\n".join(times),
                   "Measured over real MPI: the agreement and the transfer include the waiting for the other ranks."
                   if a.real else "Virtual: the computation (measuring included) timed as each rank's own CPU time, "
                   "the waiting for slower ranks and the modelled network; measuring is not timed apart here, as its "
                   "wall-clock time on shared cores says nothing of a host's."))
    print("\n".join(lines), flush=True)
    print("\n".join(pairs), flush=True)
    print("\n".join(times), flush=True)
    print("frontier: written %s" % os.path.join(out, "frontier.md"), flush=True)


if __name__ == "__main__":
    main()
