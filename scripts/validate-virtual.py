#!/usr/bin/env python3
"""Validates virtual time against emulated hosts.

For every rank count and link rate asked for: calibrates the virtual
network on emulated hosts with that rate (scripts/calibrate-virtual.sh),
runs the same comparison twice with scripts/compare-methods.py, once in
real time on the emulated hosts and once in virtual time with the
calibrated bandwidth and latency, and prints one Markdown table of the
total training time and the time to BSP's final score of every run in
both, with their ratio (virtual / emulated); a ratio outside 0.85-1.15 is
marked. The table also goes to VALIDATION.md in the results folder, beside
the two comparisons of every case. The comparisons' own options (steps,
suites, methods, ...) follow `--`.

Example:
  scripts/validate-virtual.py --ranks 2,4 --rates 1gbit,100mbit -- \\
      --suites iid,wide --methods bsp,selsync-0.3,fedavg-15,ssp-100 --steps 60
"""
import argparse
import csv
import os
import re
import subprocess
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def calibrate(rate, ranks):
    """(bandwidth as a tc rate, latency in seconds) fitted on emulated hosts."""
    p = subprocess.run(["sh", os.path.join(ROOT, "scripts", "calibrate-virtual.sh"), rate, str(ranks)],
                       stdout=subprocess.PIPE, stderr=subprocess.STDOUT, universal_newlines=True)
    sys.stderr.write(p.stdout)
    m = re.search(r"SELSYNC_VIRTUAL=bandwidth=(\d+)Mbit,latency=(\d+)us", p.stdout)
    if p.returncode or not m:
        sys.exit("validate-virtual: calibration of %s on %d hosts failed" % (rate, ranks))
    return "%smbit" % m.group(1), int(m.group(2)) * 1e-6


def compare(results, extra):
    """Runs compare-methods.py into a fresh folder under results; its folder."""
    os.makedirs(results, exist_ok=True)
    before = set(os.listdir(results))
    cmd = [sys.executable, os.path.join(ROOT, "scripts", "compare-methods.py"), "--results", results] + extra
    sys.stderr.write("validate-virtual: %s\n" % " ".join(cmd))
    if subprocess.run(cmd).returncode:
        sys.exit("validate-virtual: the comparison failed")
    (made,) = set(os.listdir(results)) - before
    return os.path.join(results, made)


def rows(folder):
    with open(os.path.join(folder, "summary.tsv")) as f:
        return {(r["suite"], r["method"]): r for r in csv.DictReader(f, delimiter="\t") if r["training_s"]}


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
    lines = ["| ranks | links | calibrated | setting | method | training time emulated | virtual | ratio "
             "| time to BSP's score emulated | virtual | ratio |",
             "|---:|---|---|---|---|---:|---:|---:|---:|---:|---:|"]
    for ranks in [int(x) for x in a.ranks.split(",")]:
        for rate in a.rates.split(","):
            bw, lat = calibrate(rate, ranks)
            case = os.path.join(out, "%dranks-%s" % (ranks, rate))
            common = ["--ranks", str(ranks), "--shm-methods", "none"] + extra
            emu = rows(compare(case, common + ["--bandwidth", rate]))
            vir = rows(compare(case, common + ["--virtual", "--bandwidth", bw, "--latency", repr(lat)]))
            for key in sorted(emu):
                e, v = emu[key], vir.get(key)
                if not v:
                    continue
                rt, off = ratio(v["training_s"], e["training_s"])
                ra, offa = ratio(v["time_to_bsp_s"], e["time_to_bsp_s"])
                lines.append("| %d | %s | %s, %.0f us | %s | %s | %.1f s | %.1f s | %s%s | %s | %s | %s%s |" % (
                    ranks, rate, bw, lat * 1e6, key[0], key[1], float(e["training_s"]), float(v["training_s"]),
                    rt, " **off**" if off else "",
                    "%.1f s" % float(e["time_to_bsp_s"]) if e["time_to_bsp_s"] else "not reached",
                    "%.1f s" % float(v["time_to_bsp_s"]) if v["time_to_bsp_s"] else "not reached",
                    ra, " **off**" if offa else ""))
            sys.stdout.write("\n".join(lines) + "\n")
            sys.stdout.flush()
    with open(os.path.join(out, "VALIDATION.md"), "w") as f:
        f.write("Command: `%s`\n\n" % " ".join(["scripts/validate-virtual.py"] + sys.argv[1:]) + "\n".join(lines) + "\n")
    print("validate-virtual: %s" % os.path.join(out, "VALIDATION.md"), file=sys.stderr)


if __name__ == "__main__":
    main()
