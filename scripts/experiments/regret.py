#!/usr/bin/env python3
"""SelSync against the best fixed averaging period, workload by workload:
the regret of every method (the best FedAvg period's mean final score
minus its own), read from frontier folders (scripts/experiments/frontier.py) that ran
the same seeds.

Usage: scripts/experiments/regret.py [--out DIR] [--defaults METHOD[,METHOD...]] NAME=DIR[,DIR...] ...

A workload may take several frontier folders of the same seeds (a second
one holding variants run later): their runs are pooled. A method in more
than one of them must have the same final score on every seed it shares
(the runs are bit-identical), else regret stops with the method and seed.

For each workload (a frontier folder, named NAME in the tables): the
FedAvg periods it ran (methods fedavg-N), the best of them by mean final
score, and for every method its mean final score, its regret in points
(100 x the best period's mean minus its mean; paired seed by seed, mean ±
sd of the per-seed regret), its bytes per rank and training time against
the best period's. Then one row per method over the workloads: its regret
on each and its worst case. Written to DIR/regret.md (default: the first
folder's parent) and printed.

The verdict line checks the goal stated for SelSync's defaults (method
`selsync`, or --defaults METHOD when the defaults were run under another
name): within 0.3 points of the best period on every workload at no
more than that period's bytes, while every fixed period is 1 point or more
behind the best on at least one workload. --defaults KEY,KEY... names the
keys the defaults ran under in order of preference, each workload taking
the first it ran (a key whose meaning changed between folders, such as
`selsync` before and after a change of defaults, goes last); the table
over the workloads then has a row for the defaults so gathered.
"""
import argparse
import math
import os
import statistics
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))  # scripts/, for compare/
from compare.common import fedavg_period, spread  # noqa: E402  (scripts/compare/)
from compare.provenance import write_machine_txt  # noqa: E402


def fail(msg):
    print("regret: " + msg, file=sys.stderr)
    sys.exit(1)


def read_frontier(folder):
    """({method: {seed: (final, bytes, seconds)}} of a frontier folder's
    finished, not diverged runs; {method: [seeds whose run diverged]})."""
    path = os.path.join(folder, "frontier.tsv")
    if not os.path.isfile(path):
        fail("%s: no frontier.tsv (run scripts/experiments/frontier.py there first)" % folder)
    runs, diverged = {}, {}
    with open(path) as f:
        head = f.readline().rstrip("\n").split("\t")
        for line in f:
            r = dict(zip(head, line.rstrip("\n").split("\t")))
            if r["final"].startswith("diverged"):
                diverged.setdefault(r["method"], []).append(int(r["seed"]))
                continue
            runs.setdefault(r["method"], {})[int(r["seed"])] = (float(r["final"]), float(r["bytes_per_rank"]),
                                                                float(r["training_s"]))
    return runs, diverged


def read_frontiers(folders):
    """read_frontier of each folder, pooled: a method's seeds from all of
    them; the first folder's time where two ran the same seed, whose final
    scores must then be equal."""
    runs, diverged = {}, {}
    for folder in folders:
        more, gone = read_frontier(folder)
        for m, seeds in more.items():
            for s, r in seeds.items():
                old = runs.setdefault(m, {}).setdefault(s, r)
                if old[0] != r[0]:
                    fail("%s, seed %d: final %s in %s but %s before: not the same run (another build or machine?)"
                         % (m, s, r[0], folder, old[0]))
        for m, seeds in gone.items():
            diverged[m] = sorted(set(diverged.get(m, [])) | set(seeds))
    return runs, diverged


def workload(name, runs, diverged):
    """The rows of one workload: (method, regret points mean, sd, MB, s,
    diverged seeds) and the best period, among the periods that never
    diverged (all of them when each did). A method whose every run
    diverged gets a row of its divergence alone."""
    periods = [m for m in runs if fedavg_period(m)]
    if not periods:
        fail("%s: no FedAvg period (fedavg-N) among its methods" % name)
    mean = {m: statistics.mean(v[0] for v in runs[m].values()) for m in runs}
    best = max([m for m in periods if m not in diverged] or periods, key=lambda m: mean[m])
    order = lambda m: (fedavg_period(m) is None, fedavg_period(m) or 0, m)  # noqa: E731
    rows = [{"method": m, "diverged": diverged[m], "seeds": 0} for m in sorted(set(diverged) - set(runs), key=order)]
    for m in sorted(runs, key=order):
        seeds = sorted(set(runs[m]) & set(runs[best]))
        regrets = [100 * (runs[best][s][0] - runs[m][s][0]) for s in seeds]
        rows.append({"method": m, "final": mean[m], "regret": statistics.mean(regrets), "sd": spread(regrets),
                     "seeds": len(seeds), "mb": statistics.mean(v[1] for v in runs[m].values()) / 1e6,
                     "s": statistics.mean(v[2] for v in runs[m].values()), "diverged": diverged.get(m, [])})
    return best, rows


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", help="the folder of regret.md (default: the first frontier folder's parent)")
    ap.add_argument("--defaults", default="selsync", metavar="METHOD[,METHOD...]",
                    help="the method key of SelSync's defaults, which the goal is checked for (default selsync); "
                    "several: each workload takes the first it ran")
    ap.add_argument("workloads", nargs="+", metavar="NAME=DIR[,DIR...]")
    a = ap.parse_args()
    named = []
    for w in a.workloads:
        if "=" not in w:
            fail("%s: expected NAME=FRONTIER_DIR[,FRONTIER_DIR...]" % w)
        name, folders = w.split("=", 1)
        named.append((name, read_frontiers(folders.split(",")), folders))
    out = a.out or os.path.dirname(os.path.abspath(named[0][2].split(",")[0]))
    text, worst = [], {}
    for name, (runs, diverged), folder in named:
        best, rows = workload(name, runs, diverged)
        b = next(r for r in rows if r["method"] == best)
        text += ["## %s" % name, "", "`%s`; the best period: %s, %.4f" % (folder, best, b["final"]), "",
                 "| method | final (mean) | regret (points, paired: mean ± sd) | MB per rank | vs the best period's | "
                 "training time (s) |", "|---|---:|---:|---:|---:|---:|"]
        for r in rows:
            gone = "diverged on seed%s %s" % ("s" * (len(r["diverged"]) > 1), ", ".join(map(str, r["diverged"])))
            if not r["seeds"]:
                text.append("| %s | - | %s | - | - | - |" % (r["method"], gone))
                worst.setdefault(r["method"], {})[name] = (math.inf, False)
                continue
            text.append("| %s | %.4f | %+.2f ± %.2f (%d seeds%s) | %.2f | %.2fx | %.1f |" % (
                r["method"], r["final"], r["regret"], r["sd"], r["seeds"], "; " + gone if r["diverged"] else "",
                r["mb"], r["mb"] / b["mb"] if b["mb"] else 0, r["s"]))
            worst.setdefault(r["method"], {})[name] = (math.inf if r["diverged"] else r["regret"],
                                                       r["mb"] <= b["mb"] * 1.0001)
        text.append("")
    names = [n for n, _, _ in named]
    text += ["## Over the workloads", "", "| method | " + " | ".join(names) + " | worst |",
             "|---|" + "---:|" * (len(names) + 1)]
    points = lambda x: "diverged" if x == math.inf else "%+.2f" % x  # noqa: E731
    row = lambda label, per: "| %s | %s | %s |" % (  # noqa: E731  (one row over the workloads: each, then the worst)
        label, " | ".join(points(per[n][0]) if n in per else "-" for n in names), points(max(v[0] for v in per.values())))
    text += [row(m, per) for m, per in worst.items()]
    keys = [k for k in a.defaults.split(",") if k]
    sel = {}  # per workload: the first of the keys it ran
    for n in names:
        key = next((k for k in keys if n in worst.get(k, {})), None)
        if key:
            sel[n] = worst[key][n]
    if len(keys) > 1 and sel:
        text.append(row("SelSync's defaults (%s)" % ", else ".join(keys), sel))
    fixed = {m: per for m, per in worst.items() if fedavg_period(m)}
    if sel and len(sel) == len(names):
        sel_ok = all(r <= 0.3 and cheap for r, cheap in sel.values())
        fixed_bad = all(max(r for r, _ in per.values()) >= 1.0 for per in fixed.values())
        text += ["", "Goal (SelSync's defaults within 0.3 points of the best period on every workload at no more than "
                 "its bytes; every fixed period 1 point or more behind on at least one): SelSync (%s) %s; fixed periods %s."
                 % (", else ".join(keys), "meets it" if sel_ok else "does not", "each miss by 1 point somewhere" if fixed_bad
                    else "not all miss by 1 point anywhere")]
    text += ["", "Regret: 100 x (the best FedAvg period's final score minus the method's), seed by seed on the seeds "
             "both ran; negative is better than the best period. Scores are top-1 or mAP@0.5 fractions. A method "
             "that diverged on any seed (training stopped: the gradient was not finite) counts as the worst case "
             "there; the best period is chosen among the periods that never diverged."]
    write_machine_txt(out, sys.argv)
    with open(os.path.join(out, "regret.md"), "w") as f:
        f.write("# Regret against the best fixed period\n\n`%s`\n\n%s\n" % (" ".join(sys.argv), "\n".join(text)))
    print("\n".join(text))
    print("regret: written %s" % os.path.join(out, "regret.md"))


if __name__ == "__main__":
    main()
