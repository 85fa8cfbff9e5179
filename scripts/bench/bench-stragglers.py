#!/usr/bin/env python3
"""What stragglers cost each method, in virtual time: every method of the
list under each straggler setting, side by side, with the settings in the
output's header.

Usage: scripts/bench/bench-stragglers.py [--ranks 16] [--suite wide] [--steps 100]
           [--batch 32] [--subdivisions K] [--seeds 1] [--methods bsp,ssp-100,fedavg-4,selsync]
           [--settings none,jitter,slow-one,slow-quarter[,slow-tenth-jitter]] [--eval-images 2000]
           [--quick] [--results DIR]

The settings (SELSYNC_VIRTUAL's terms, docs/virtual-time.md):
  none          no straggler;
  jitter        each rank pauses, on 2 % of its steps (drawn from the seed),
                for one step's computation: BSP's computation per step in
                the run without stragglers;
  slow-one      the last rank computes at half speed (slow=R:2);
  slow-quarter  the last quarter of the ranks compute at two-thirds speed
                (slow=R:1.5 each);
  slow-tenth-jitter
                the last rank computes 10 % slower (slow=R:1.1) and every
                rank pauses as in jitter (run when named in --settings).

Each setting is one scripts/experiments/frontier.py folder, RESULTS/SETTING/, resumable
like it (a finished run is not run again). For every method and setting
the table gives the final held-out score (mean ± sd over the seeds), the
training time and its ratio to the same method without stragglers, the
share of the ideal throughput it reached (the ideal time: its time
without stragglers plus the computation that the ranks' lost speed costs
when the work is spread in proportion to each rank's speed, communication
unchanged: T0 + C0 (1/s - 1), with s the ranks' summed speed relative to
all at full speed and C0 its computation without stragglers), the time to BSP's final score without stragglers (the first
evaluation at or above it; "-" when none), and the time a rank spent
waiting for the others and on the network (the ranks' mean, from the
run's summary.tsv: virtual time does not log it per rank).
Written to RESULTS/stragglers.md and stragglers.tsv; printed as well;
RESULTS/stragglers.png plots each method's training time against the
settings' severity (with gnuplot).

--quick: 2 ranks, frontier.py's quick budget, methods bsp,ssp-100,selsync,
seed 1:
the test of the script, not a measurement.
"""
import argparse
import glob
import os
import shutil
import statistics
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))  # scripts/, for its compare package
from compare.common import seeds_of  # noqa: E402
from compare.metrics import read_metrics  # noqa: E402  (the modules: scripts/compare/)
from compare.provenance import write_machine_txt  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
FRONTIER = os.path.join(ROOT, "scripts", "experiments", "frontier.py")
DEFAULT_SETTINGS = ("none", "jitter", "slow-one", "slow-quarter")
SETTINGS = DEFAULT_SETTINGS + ("slow-tenth-jitter",)  # the rest run when named
JITTERED = ("jitter", "slow-tenth-jitter")
JITTER_P = 0.02


def fail(msg):
    print("bench-stragglers: " + msg, file=sys.stderr)
    sys.exit(1)


def options():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--ranks", type=int, help="virtual ranks (default 16; quick 2)")
    ap.add_argument("--suite", default="wide", help="a compare-methods suite (default wide)")
    ap.add_argument("--steps", type=int, default=100, help="steps per run (default 100)")
    ap.add_argument("--batch", type=int, default=32, help="images per rank and step (default 32)")
    ap.add_argument("--subdivisions", type=int, default=0,
                    help="mini-batches per rank and step, every method (default: the cfg's; the shares of "
                    "the -speed methods need more than 1)")
    ap.add_argument("--seeds", help="comma-separated seeds (default 1)")
    ap.add_argument("--methods", help="method keys (default bsp,ssp-100,fedavg-4,selsync; quick bsp,ssp-100,selsync)")
    ap.add_argument("--settings", default=",".join(DEFAULT_SETTINGS),
                    help="a subset of " + ", ".join(SETTINGS) + " (default: " + ",".join(DEFAULT_SETTINGS) + ")")
    ap.add_argument("--eval-images", type=int, default=2000, help="held-out images per evaluation (default 2000)")
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--results", default=os.path.join(ROOT, "results", "stragglers"),
                    help="the folder of this benchmark (default results/stragglers); run again, it resumes")
    a = ap.parse_args()
    a.ranks = a.ranks or (2 if a.quick else 16)
    a.seeds = seeds_of(a.seeds or "1")
    if a.seeds is None:
        fail("--seeds takes comma-separated integers, e.g. 1,2,3")
    a.methods = [m for m in (a.methods or ("bsp,ssp-100,selsync" if a.quick else "bsp,ssp-100,fedavg-4,selsync")).split(",") if m]
    a.settings = [s for s in a.settings.split(",") if s]
    unknown = [s for s in a.settings if s not in SETTINGS]
    if unknown:
        fail("--settings: unknown %s; known: %s" % (", ".join(unknown), ", ".join(SETTINGS)))
    if "none" not in a.settings:
        a.settings.insert(0, "none")  # every ratio is to it
    if a.ranks < 2 or min(a.steps, a.batch, a.eval_images) < 1 or not a.seeds or not a.methods:
        fail("--ranks must be >= 2; --steps, --batch, --eval-images >= 1; at least one seed and method")
    if "bsp" not in a.methods:
        fail("--methods must include bsp: its final score and computation per step are the references")
    return a


def slow_factors(a, setting):
    """{rank: factor} of a slow-* setting."""
    if setting == "slow-one":
        return {a.ranks - 1: 2.0}
    if setting == "slow-quarter":
        return {r: 1.5 for r in range(a.ranks - max(1, a.ranks // 4), a.ranks)}
    if setting == "slow-tenth-jitter":
        return {a.ranks - 1: 1.1}
    return {}


def spec_of(a, setting, step_compute):
    """--stragglers of a setting ('' for none)."""
    factors = slow_factors(a, setting)
    parts = ["slow=" + "+".join("%d:%g" % (r, f) for r, f in sorted(factors.items()))] if factors else []
    parts += ["jitter=%g:%.6gs" % (JITTER_P, step_compute)] if setting in JITTERED else []
    return ",".join(parts)


def speed_share(a, setting):
    """The ranks' summed speed relative to all at full speed (the ideal
    throughput's share); a pause of one step's compute on P of the steps
    costs 1/(1 + P)."""
    factors = slow_factors(a, setting)
    share = sum(1.0 / factors.get(r, 1.0) for r in range(a.ranks)) / a.ranks
    return share / (1.0 + JITTER_P) if setting in JITTERED else share


def run_setting(a, setting, spec):
    out = os.path.join(a.results, setting)
    cmd = [sys.executable, FRONTIER, "--suite", a.suite, "--ranks", str(a.ranks),
           "--seeds", ",".join(map(str, a.seeds)), "--methods", ",".join(a.methods), "--results", out]
    cmd += ["--quick"] if a.quick else ["--steps", str(a.steps), "--batch", str(a.batch),
                                       "--eval-images", str(a.eval_images)]
    cmd += ["--stragglers", spec] if spec else []
    cmd += ["--subdivisions", str(a.subdivisions)] if a.subdivisions else []
    print("bench-stragglers: %s (%s)" % (setting, spec or "no straggler"), flush=True)
    if subprocess.call(cmd):
        fail("%s: frontier.py failed (its log is above; the runs are in %s)" % (setting, out))
    return out


def run_dir(out, seed, method):
    """The per-rank metrics folder of one finished run."""
    found = glob.glob(os.path.join(out, "seed-%d" % seed, method, "*", "runs", "*", "*", "metrics.0.tsv"))
    if len(found) != 1:
        fail("expected one run of %s, seed %d in %s; found %d" % (method, seed, out, len(found)))
    return os.path.dirname(found[0])


def summary_row(rdir):
    path = os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(rdir))), "summary.tsv")
    with open(path) as f:
        head = f.readline().rstrip("\n").split("\t")
        return dict(zip(head, f.readline().rstrip("\n").split("\t")))


def figures(out, seed, method, target):
    """One run's figures in virtual time, from its summary row: final score,
    training time, computation (per rank, and per step), waiting for other
    ranks and network (per rank, the ranks' mean), and the time of the
    first evaluation at or above target (None: none, or no target)."""
    rdir = run_dir(out, seed, method)
    row = summary_row(rdir)
    reached = None
    for path in sorted(glob.glob(os.path.join(rdir, "metrics.*.tsv"))):
        for e in read_metrics(path)[1]:
            score = e.get("top1", e.get("map50"))
            if target is not None and score is not None and score >= target and "virtual_s" in e:
                reached = e["virtual_s"] if reached is None else min(reached, e["virtual_s"])
    compute = float(row["compute_s"])
    return {"final": float(row["final"]) if not row["final"].startswith("diverged") else float("nan"),
            "time": float(row["training_s"]), "compute": compute,
            "step_compute": compute / max(1, int(row["steps"])), "waiting": float(row["comm_s"]),
            "to_target": reached}


def plot(a, table, path):
    """PATH (PNG, gnuplot): each method's training time against the
    settings' severity, the share of the ideal throughput the stragglers
    take (1 - the ranks' summed speed); no plot without gnuplot."""
    if not shutil.which("gnuplot"):
        print("bench-stragglers: no gnuplot; no plot")
        return
    order = sorted(a.settings, key=lambda s: 1 - speed_share(a, s))
    data = path[:-4] + ".dat"
    with open(data, "w") as f:
        f.write("# severity\tsetting\t" + "\t".join(a.methods) + "\n")
        for s in order:
            times = ["%.4f" % statistics.mean(r["time"] for r in table[s, m]) for m in a.methods]
            f.write("%.4f\t%s\t%s\n" % (1 - speed_share(a, s), s, "\t".join(times)))
    lines = ", ".join("'%s' using 1:%d%s with linespoints title '%s'"
                      % (os.path.basename(data), i + 3, ":xtic(2)" if i == 0 else "", m)
                      for i, m in enumerate(a.methods))
    script = ("set terminal pngcairo size 900,560 noenhanced font ',10'\nset output '%s'\n"
              "set title 'Training time against straggler severity (%s, %d ranks, virtual time)'\n"
              "set xlabel 'severity: share of the ideal throughput the stragglers take'\n"
              "set ylabel 'training time (s, virtual)'\nset key outside right\nset grid\n"
              "set datafile separator '\\t'\nplot %s\n" % (os.path.basename(path), a.suite, a.ranks, lines))
    gp = path[:-4] + ".gp"
    with open(gp, "w") as f:
        f.write(script)
    if subprocess.call(["gnuplot", os.path.basename(gp)], cwd=os.path.dirname(path)):
        fail("gnuplot failed on %s" % gp)


def mean_sd(xs):
    return statistics.mean(xs), statistics.stdev(xs) if len(xs) > 1 else 0.0


def main():
    a = options()
    a.results = os.path.abspath(a.results)
    write_machine_txt(a.results, sys.argv)
    outs, specs = {}, {}
    outs["none"] = run_setting(a, "none", "")
    specs["none"] = ""
    bsp_none = [figures(outs["none"], s, "bsp", None) for s in a.seeds]
    target = statistics.mean(f["final"] for f in bsp_none)
    step_compute = statistics.mean(f["step_compute"] for f in bsp_none)
    for setting in a.settings[1:]:
        specs[setting] = spec_of(a, setting, step_compute)
        outs[setting] = run_setting(a, setting, specs[setting])
    table = {}
    for setting in a.settings:
        for m in a.methods:
            table[setting, m] = [figures(outs[setting], s, m, target) for s in a.seeds]
    head = ["setting", "method", "final", "final_sd", "training_s", "vs_none", "of_ideal", "to_bsp_s", "waiting_s"]
    lines, md = [], []
    for setting in a.settings:
        for m in a.methods:
            runs = table[setting, m]
            final, sd = mean_sd([r["final"] for r in runs])
            t = statistics.mean(r["time"] for r in runs)
            t0 = statistics.mean(r["time"] for r in table["none", m])
            c0 = statistics.mean(r["compute"] for r in table["none", m])
            ideal = t0 + c0 * (1.0 / speed_share(a, setting) - 1.0)
            reached = [r["to_target"] for r in runs if r["to_target"] is not None]
            to_bsp = statistics.mean(reached) if len(reached) == len(runs) else None
            vals = [setting, m, "%.4f" % final, "%.4f" % sd, "%.2f" % t, "%.3f" % (t / t0),
                    "%.3f" % (ideal / t), "-" if to_bsp is None else "%.2f" % to_bsp,
                    "%.2f" % statistics.mean(r["waiting"] for r in runs)]
            lines.append("\t".join(vals))
            md.append("| %s | %s | %s ± %s | %s | %sx | %.0f %% | %s | %s |" % (
                setting, m, vals[2], vals[3], vals[4], vals[5], 100 * float(vals[6]), vals[7], vals[8]))
    budget = "compare-methods' quick budget" if a.quick else "%d steps of %d images" % (a.steps, a.batch)
    budget += " in %d mini-batches" % a.subdivisions if a.subdivisions else ""
    header = ["# Stragglers: %s, %d ranks, %s, virtual time at 1gbit, seeds %s" % (
                  a.suite, a.ranks, budget, ",".join(map(str, a.seeds))),
              "",
              "BSP without stragglers: final %.4f, %.4g s of computation per step." % (target, step_compute),
              "Settings:"]
    header += ["- %s: %s (ideal throughput %.0f %% of full speed)" % (s, specs[s] or "no straggler",
                                                                      100 * speed_share(a, s)) for s in a.settings]
    header += ["", "| setting | method | final (mean ± sd) | training time (s) | vs none | of ideal throughput "
               "| time to BSP's final without stragglers (s) | waiting and network per rank (s) |",
               "|---|---|---:|---:|---:|---:|---:|---:|"]
    text = "\n".join(header + md) + "\n"
    with open(os.path.join(a.results, "stragglers.md"), "w") as f:
        f.write(text)
    with open(os.path.join(a.results, "stragglers.tsv"), "w") as f:
        f.write("\t".join(head) + "\n" + "\n".join(lines) + "\n")
    print(text, end="")
    plot(a, table, os.path.join(a.results, "stragglers.png"))
    print("bench-stragglers: written %s" % os.path.join(a.results, "stragglers.md"))


if __name__ == "__main__":
    main()
