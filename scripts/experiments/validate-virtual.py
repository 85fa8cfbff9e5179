#!/usr/bin/env python3
"""Validates virtual time against emulated hosts.

For every rank count and link rate asked for: calibrates the modelled
network on emulated hosts with links of that rate (scripts/calibrate-
virtual.sh: the bandwidth from the transport's large ring all-reduces, the
latency from a 4 KiB one; the highest bandwidth of three), then runs one comparison with
scripts/experiments/compare-methods.py on those hosts in which every rank also keeps a
virtual clock on the calibrated network with its computation in wall time
(--emulated-clock). Each run so gives the time it took on the emulated
network and the time the model gives for the same steps, the same
computation and the same evaluations: their ratio tests the network model
and the clock's rules (a ratio outside 0.85-1.15 is marked). The same
comparison then runs once more in plain virtual time, every rank's
computation its thread's CPU time as a core of its own gives it; its
training times, and the emulated hosts' computation (they share this
machine's cores) over its own, are in the table too. The table also goes
to VALIDATION.md in the results folder, beside the comparisons of every
case. The comparisons' own options (steps, suites, methods, ...) follow
`--`.

Example:
  scripts/experiments/validate-virtual.py --ranks 2,4 --rates 1gbit,100mbit -- \\
      --suites iid,wide --methods bsp,selsync-0.3,fedavg-15,ssp-100 --steps 60
"""
import argparse
import csv
import os
import re
import subprocess
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(ROOT, "scripts"))
from compare.metrics import read_metrics  # noqa: E402
from compare.provenance import write_machine_txt  # noqa: E402


def calibrate(rate, ranks, tries=3):
    """(bandwidth as SELSYNC_VIRTUAL writes it, latency in seconds) fitted on
    emulated hosts: the fit of the highest bandwidth of `tries` calibrations.
    The emulated links slow down at times (the two cores also carry their
    TCP stacks and shapers: one calibration at 100 Mbit/s gave 48 Mbit/s
    where the ones minutes before and after gave 86-90), and such a
    slow-down only ever lowers the rate."""
    fits = []
    for _ in range(tries):
        p = subprocess.run(["sh", os.path.join(ROOT, "scripts", "bench", "calibrate-virtual.sh"), rate, str(ranks)],
                           stdout=subprocess.PIPE, stderr=subprocess.STDOUT, universal_newlines=True)
        sys.stderr.write(p.stdout)
        m = re.search(r"SELSYNC_VIRTUAL=bandwidth=(\d+)Mbit,latency=(\d+)us", p.stdout)
        if p.returncode or not m:
            sys.exit("validate-virtual: calibration of %s on %d hosts failed" % (rate, ranks))
        fits.append((int(m.group(1)), int(m.group(2))))
    bw, us = max(fits)
    sys.stderr.write("validate-virtual: %d hosts, %s: calibrated %s Mbit/s; the highest, %d Mbit/s and %d us, "
                     "is the model's\n" % (ranks, rate, ", ".join(str(b) for b, _ in fits), bw, us))
    return "%dMbit" % bw, us * 1e-6


def compare(results, extra):
    """Runs compare-methods.py into a fresh folder under results; its folder."""
    os.makedirs(results, exist_ok=True)
    before = set(os.listdir(results))
    cmd = [sys.executable, os.path.join(ROOT, "scripts", "experiments", "compare-methods.py"), "--results", results] + extra
    sys.stderr.write("validate-virtual: %s\n" % " ".join(cmd))
    if subprocess.run(cmd).returncode:
        sys.exit("validate-virtual: the comparison failed")
    (made,) = set(os.listdir(results)) - before
    return os.path.join(results, made)


def rows(folder):
    with open(os.path.join(folder, "summary.tsv")) as f:
        return {(r["suite"], r["method"]): r for r in csv.DictReader(f, delimiter="\t") if r["training_s"]}


def modelled(folder, suite, method, target, final):
    """(training time, time to target or None) on the virtual clock the first
    training rank of an emulated run kept beside it: the clock after its
    last step, and at the first evaluation at or above target (or, when
    the final score is, at the end)."""
    d = os.path.join(folder, "runs", suite, "emulated-" + method)
    first = 1 if method.startswith("ssp") else 0  # with ssp rank 0 serves
    steps, evals = read_metrics(os.path.join(d, "metrics.%d.tsv" % first))
    if not steps or "virtual_s" not in steps[-1]:
        sys.exit("validate-virtual: %s has no virtual clock" % d)
    end = steps[-1]["virtual_s"]
    if target is None:
        return end, None
    if first:
        evals = read_metrics(os.path.join(d, "metrics.0.tsv"))[1]
    for e in sorted(evals, key=lambda e: e["step"]):
        if "virtual_s" in e and e.get("top1", e.get("map50", -1)) >= target - 1e-9:
            return end, min(e["virtual_s"], end)
    return end, end if final >= target - 1e-9 else None


def ratio(v, e):
    if not v or not e or float(e) == 0:
        return "", False
    x = float(v) / float(e)
    return "%.2f" % x, abs(x - 1) > 0.15


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter, epilog=__doc__)
    p.add_argument("--ranks", default="2,4", help="rank counts (default 2,4)")
    p.add_argument("--rates", default="1gbit,100mbit", help="link rates (default 1gbit,100mbit)")
    p.add_argument("--results", default=os.path.join(ROOT, "results"), help="parent folder")
    p.add_argument("extra", nargs=argparse.REMAINDER, help="-- then options of compare-methods.py")
    a = p.parse_args()
    extra = [x for x in a.extra if x != "--"]
    out = os.path.join(os.path.abspath(a.results), time.strftime("validate-%Y%m%d-%H%M%S", time.gmtime()))
    write_machine_txt(out, sys.argv)
    lines = ["| ranks | links | calibrated | setting | method | training time emulated | clock beside it | ratio "
             "| time to BSP's score emulated | clock beside it | ratio | virtual time, own cores "
             "| emulated computation / own cores' |",
             "|---:|---|---|---|---|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for ranks in [int(x) for x in a.ranks.split(",")]:
        for rate in a.rates.split(","):
            bw, lat = calibrate(rate, ranks)
            case = os.path.join(out, "%dranks-%s" % (ranks, rate))
            common = ["--ranks", str(ranks), "--shm-methods", "none"] + extra
            emu_folder = compare(case, common + ["--bandwidth", rate, "--emulated-clock",
                                                 "bandwidth=%s,latency=%dus" % (bw, round(lat * 1e6))])
            emu = rows(emu_folder)
            vir = rows(compare(case, common + ["--virtual", "--bandwidth", bw.lower(), "--latency", repr(lat)]))
            for key in sorted(emu):
                e, v, bsp = emu[key], vir.get(key), emu.get((key[0], "bsp"))
                target = float(bsp["final"]) if bsp and float(bsp["final"]) > 0 else None
                train, reached = modelled(emu_folder, key[0], key[1], target, float(e["final"]))
                rt, off = ratio(train, e["training_s"])
                ra, offa = ratio(reached, e["time_to_bsp_s"])
                own = "%.1f s" % float(v["training_s"]) if v else ""
                share = "%.2f" % (float(e["compute_s"]) / float(v["compute_s"])) if v and float(v["compute_s"]) else ""
                lines.append("| %d | %s | %s, %.0f us | %s | %s | %.1f s | %.1f s | %s%s | %s | %s | %s%s | %s | %s |" % (
                    ranks, rate, bw, lat * 1e6, key[0], key[1], float(e["training_s"]), train,
                    rt, " **off**" if off else "",
                    "%.1f s" % float(e["time_to_bsp_s"]) if e["time_to_bsp_s"] else "not reached",
                    "%.1f s" % reached if reached is not None else "not reached",
                    ra, " **off**" if offa else "", own, share))
            sys.stdout.write("\n".join(lines) + "\n")
            sys.stdout.flush()
    with open(os.path.join(out, "VALIDATION.md"), "w") as f:
        f.write("Command: `%s`\n\n" % " ".join(["scripts/experiments/validate-virtual.py"] + sys.argv[1:]) + "\n".join(lines) + "\n")
    print("validate-virtual: %s" % os.path.join(out, "VALIDATION.md"), file=sys.stderr)


if __name__ == "__main__":
    main()
