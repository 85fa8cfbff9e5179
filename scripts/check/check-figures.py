#!/usr/bin/env python3
"""Recompute every figure that the README and docs/results.md state.

docs/figures.tsv has one row per figure: the page (relative to the
repository), the figure exactly as the page writes it, the data file it
comes from (or several of the same columns, joined by " + ", pooled), and
the computation that gives it from that file. The
computation is a Python expression over the helpers below whose value is
the figure's text, its format giving the stated rounding. A row fails when
the page does not contain the figure or the computation gives other text.
Every decimal number outside code blocks on a listed page must belong to
some row, so that no figure goes unchecked.

Usage: check-figures.py [--root DIR] [--figures FILE]
Exit status 0 when every figure matches, 1 otherwise (each mismatch named).
"""
import argparse
import csv
import os
import re
import statistics
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


class Data:
    """One data file: a tab-separated table with a header, or text; or
    several files of the same columns, their rows pooled (the later files'
    header lines dropped)."""

    def __init__(self, paths):
        self.path = " + ".join(paths)
        texts = []
        for i, part in enumerate(paths):
            with open(part) as f:
                text = f.read()
            texts.append(text.split("\n", 1)[1] if i else text)
        self.text = "\n".join(t.rstrip("\n") for t in texts) + "\n"
        self._rows = None

    def rows(self, **where):
        """The table's rows (dicts) whose columns equal every where= value."""
        if self._rows is None:
            lines = [x for x in self.text.splitlines() if x and not x.startswith("#")]
            self._rows = list(csv.DictReader(lines, delimiter="\t"))
        return [r for r in self._rows if all(r.get(k) == str(v) for k, v in where.items())]

    def col(self, name, **where):
        """The floats of one column over the rows that match, in file order."""
        vals = [float(r[name]) for r in self.rows(**where)]
        if not vals:
            raise ValueError("no row of %s matches %s" % (self.path, where))
        return vals

    def by_seed(self, name, **where):
        """{seed: float} of one column over the rows that match."""
        return {r["seed"]: float(r[name]) for r in self.rows(**where)}

    def line(self, pattern):
        """The first line of the text that matches the regular expression."""
        for x in self.text.splitlines():
            if re.search(pattern, x):
                return x
        raise ValueError("no line of %s matches %r" % (self.path, pattern))

    def num(self, pattern):
        """The first group of the first match of pattern, as a float."""
        m = re.search(pattern, self.text)
        if not m:
            raise ValueError("%r not in %s" % (pattern, self.path))
        return float(m.group(1))


def mean(xs):
    return statistics.fmean(xs)


def sd(xs):
    """The sample standard deviation."""
    return statistics.stdev(xs)


def paired(a, b):
    """Per-seed differences 100 * (a - b) of two {seed: value} maps, on the
    seeds both have (points, for scores that are fractions)."""
    seeds = sorted(set(a) & set(b))
    if not seeds:
        raise ValueError("no seed in common")
    return [100 * (a[s] - b[s]) for s in seeds]


def plus_minus(xs, digits):
    """'mean ± sd' of xs with the given decimals."""
    return "%.*f ± %.*f" % (digits, mean(xs), digits, sd(xs))


def signed(xs, digits):
    """'+mean ± sd' of xs, the sign always written."""
    return "%+.*f ± %.*f" % (digits, mean(xs), digits, sd(xs))


def method_row(d, label, versus, **where):
    """One method's row of a results table from a per-seed runs table (a
    frontier.tsv, or a summary.tsv filtered by workload):
    | label | score mean ± sd | paired difference to versus, in points | MB
    sent per rank | training time (s) | local steps |. where= picks the
    method's rows (method=... and any other column); versus names the
    method the difference is taken to, on the same other columns."""
    rows = d.rows(**where)
    if not rows:
        raise ValueError("no row of %s matches %s" % (d.path, where))
    score = "final" if "final" in rows[0] else "final_map50"
    others = {k: v for k, v in where.items() if k != "method"}
    finished = lambda rs: {r["seed"]: float(r[score]) for r in rs if not r[score].startswith("diverged")}  # noqa: E731
    mine = finished(rows)
    gone = len(rows) - len(mine)
    rows = [r for r in rows if r["seed"] in mine]
    diffs = paired(mine, finished(d.rows(method=versus, **others)))
    diff = "-" if versus == where["method"] else "%s (%d seed%s%s)" % (
        signed(diffs, 2) if len(diffs) > 1 else "%+.2f" % diffs[0], len(mine), "s" * (len(mine) > 1),
        "; %d diverged" % gone if gone else "")
    local = [float(r["local_fraction"]) if "local_fraction" in r else 1 - float(r["sync_share"]) for r in rows]
    return "| %s | %.4f ± %s | %s | %.1f | %.1f | %.1f%% |" % (
        label, mean(list(mine.values())), "%.4f" % sd(list(mine.values())) if len(mine) > 1 else "n/a", diff,
        mean([float(r["bytes_per_rank"]) for r in rows]) / 1e6, mean([float(r["training_s"]) for r in rows]),
        100 * mean(local))


def time_row(d, label, **where):
    """One method's row of a where-the-time-goes table from a frontier.tsv
    of runs over real MPI: | label | training time | computation |
    measuring | agreement | transfer (seconds per rank, mean ± sd over the
    seeds) | measuring, then agreement and transfer, as shares of the
    computation (the mean over the seeds) | the training time over BSP's,
    seed by seed (mean ± sd), or - for BSP itself |."""
    rows = d.rows(**where)
    if not rows:
        raise ValueError("no row of %s matches %s" % (d.path, where))
    col = lambda c: [float(r[c]) for r in rows]  # noqa: E731
    share = lambda cs: "%.1f%%" % mean([100 * sum(float(r[c]) for c in cs) / float(r["compute_s"])  # noqa: E731
                                         for r in rows])
    bsp = d.by_seed("training_s", method="bsp")
    ratios = [float(r["training_s"]) / bsp[r["seed"]] for r in rows]
    vs = "-" if where["method"] == "bsp" else "%.2fx ± %.2f" % (mean(ratios), sd(ratios))
    return "| %s | %s | %s | %s | %s | %s | %s | %s | %s |" % (
        label, *(plus_minus(col(c), 2) for c in ("training_s", "compute_s", "measure_s", "agree_s", "transfer_s")),
        share(["measure_s"]), share(["agree_s", "transfer_s"]), vs)


HELPERS = {"mean": mean, "sd": sd, "paired": paired, "plus_minus": plus_minus, "signed": signed,
           "method_row": method_row, "time_row": time_row}


def prose(text):
    """The page's text outside fenced code blocks and link targets."""
    out, fenced = [], False
    for x in text.splitlines():
        if x.startswith("```"):
            fenced = not fenced
            continue
        if not fenced:
            out.append(re.sub(r"\]\([^)]*\)", "]", x))
    return "\n".join(out)


def check(root, figures):
    bad, data, pages = [], {}, {}
    with open(figures) as f:
        rows = list(csv.DictReader((x for x in f if x.strip() and not x.startswith("#")), delimiter="\t",
                                   quoting=csv.QUOTE_NONE))
    for n, r in enumerate(rows, 2):
        where = "%s row %d (%s: %r)" % (os.path.relpath(figures, root), n, r["page"], r["figure"])
        page = pages.setdefault(r["page"], open(os.path.join(root, r["page"])).read())
        if not re.search(r"(?<![\d.])" + re.escape(r["figure"]) + r"(?!\d)", page):  # not part of a longer number
            bad.append("%s: the page does not state this figure" % where)
        try:
            if r["data"] not in data:  # each file read once, not once per figure
                data[r["data"]] = Data([os.path.join(root, p) for p in r["data"].split(" + ")])
            d = data[r["data"]]
            got = eval(r["computation"], {"__builtins__": {}}, dict(HELPERS, d=d))  # our own committed file
        except (OSError, ValueError, KeyError, ZeroDivisionError, statistics.StatisticsError, SyntaxError,
                NameError, TypeError) as e:
            bad.append("%s: %s fails: %s" % (where, r["computation"], e))
            continue
        if str(got) != r["figure"]:
            bad.append("%s: %s gives %r" % (where, r["computation"], str(got)))
    for name, text in pages.items():
        listed = [r["figure"] for r in rows if r["page"] == name]
        for x in prose(text).splitlines():
            rest = re.sub(r"`[^`]*`", " ", x)
            for fig in sorted(listed, key=len, reverse=True):
                rest = rest.replace(fig, " ")
            for m in re.finditer(r"(?<![\w.@])\d+\.\d+(?!\.?\d)", rest):
                bad.append("%s: %r in %r is not in %s" % (name, m.group(0), x.strip()[:80],
                                                          os.path.relpath(figures, root)))
    return bad, len(rows)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--root", default=ROOT, help="the repository (default: this script's)")
    ap.add_argument("--figures", help="the list of figures (default: ROOT/docs/figures.tsv)")
    a = ap.parse_args()
    figures = a.figures or os.path.join(a.root, "docs", "figures.tsv")
    bad, n = check(a.root, figures)
    for x in bad:
        print("check-figures: " + x, file=sys.stderr)
    print("check-figures: %d figures, %d mismatches" % (n, len(bad)))
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
