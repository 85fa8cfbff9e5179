#!/usr/bin/env python3
"""Validates virtual time against emulated hosts.

For every rank count and link rate asked for: runs the same comparison
twice with scripts/compare-methods.py, once in real time on emulated hosts
with links of that rate and once in virtual time, and prints one Markdown
table of the
total training time and the time to BSP's final score of every run in
both, with their ratio (virtual / emulated); a ratio outside 0.85-1.15 is
marked. The virtual network is calibrated on the emulated hosts: the
latency from scripts/calibrate-virtual.sh (the time of a 4 KiB ring
all-reduce), the bandwidth from the emulated BSP runs' own all-reduces
(their bytes sent over their transfer time, every step of every rank, on
the setting that sent the most), which is the traffic the runs make: the
benchmark's back-to-back all-reduces of up to 16 MiB reach a lower rate on
the emulated links. The table also goes to VALIDATION.md in the results folder, beside
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


def training_rate(folder):
    """(bits per second, setting) of the emulated BSP runs' all-reduces:
    bytes sent over transfer time, on the setting that sent the most."""
    best = (0, 0, None)
    runs = os.path.join(folder, "runs")
    for suite in sorted(os.listdir(runs)):
        d = os.path.join(runs, suite, "emulated-bsp")
        if not os.path.isdir(d):
            continue
        sent = secs = 0.0
        for name in os.listdir(d):
            if not re.fullmatch(r"metrics\.\d+\.tsv", name):
                continue
            with open(os.path.join(d, name)) as f:
                rows = [l.rstrip("\n").split("\t") for l in f if not l.startswith("#")]
            cols = rows[0]
            for r in rows[1:]:
                sent += float(r[cols.index("bytes_sent")])
                secs += float(r[cols.index("t_transfer")])
        if sent > best[0] and secs > 0:
            best = (sent, secs, suite)
    if not best[2]:
        sys.exit("validate-virtual: no emulated BSP run with transfers in %s" % folder)
    return best[0] * 8 / best[1], best[2]


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
            bench_bw, lat = calibrate(rate, ranks)
            case = os.path.join(out, "%dranks-%s" % (ranks, rate))
            common = ["--ranks", str(ranks), "--shm-methods", "none"] + extra
            emu_folder = compare(case, common + ["--bandwidth", rate])
            bits, suite = training_rate(emu_folder)
            bw = "%dmbit" % round(bits / 1e6)
            sys.stderr.write("validate-virtual: %d ranks, %s links: BSP's all-reduces on %s ran at %s/s (the "
                             "benchmark: %s/s); latency %.0f us\n" % (ranks, rate, suite, bw, bench_bw, lat * 1e6))
            emu = rows(emu_folder)
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
