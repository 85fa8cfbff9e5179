"""A run's figures from its per-rank metrics files."""
import math
import os
import re

from .common import fail

WARMUP = 25  # [selsync] warmup's default: Δ after it is what decides


def quantile(xs, q):
    """The q-quantile of the sorted xs (nearest rank); None when empty."""
    return xs[min(len(xs) - 1, int(q * len(xs)))] if xs else None


def read_metrics(path):
    """(step rows as dicts, eval rows as dicts) of one rank's metrics file."""
    rows, evals, cols = [], [], None
    with open(path) as f:
        for line in f:
            line = line.rstrip("\n")
            if line.startswith("# eval"):
                ev = {}
                for kv in line.split("\t")[1:]:
                    k, _, v = kv.partition("=")
                    ev[k] = float(v)
                evals.append(ev)
            elif line.startswith("#") or not line:
                continue
            elif cols is None:
                cols = line.split("\t")
            else:
                vals = line.split("\t")
                r = dict(zip(cols, vals))
                for k in cols:
                    if k != "decision":
                        r[k] = float(r[k])
                rows.append(r)
    return rows, evals


def collect(args, run, rdir, final_score):
    """Totals of one run from its per-rank metrics files; the final score is
    the evaluation after the last step, or else final_score()."""
    ranks = {}
    for r in range(args.ranks):
        p = os.path.join(rdir, "metrics.%d.tsv" % r)
        if not os.path.exists(p):
            fail("run %s: rank %d wrote no metrics file %s" % (run.id, r, p))
        ranks[r] = read_metrics(p)
    trainers = [r for r in ranks if not (run.ssp and r == 0)]
    evals = [e for r in ranks for e in ranks[r][1]]
    evals.sort(key=lambda e: e["step"])
    n = len(trainers)
    last = [e for e in evals if e["step"] >= run.steps and ("top1" in e or "map50" in e)]
    if last:
        final = last[-1].get("top1", last[-1].get("map50"))
    else:
        final = final_score()
    res = {"final": final, "evals": evals, "trainers": n}
    res["steps"] = sum(len(ranks[r][0]) for r in trainers) / n
    res["bytes"] = sum(x["bytes_sent"] for r in trainers for x in ranks[r][0]) / n
    res["inject"] = sum(x["inject_bytes"] for r in trainers for x in ranks[r][0]) / n
    res["compute"] = sum(x["t_compute"] + x["t_measure"] for r in trainers for x in ranks[r][0]) / n
    res["comm"] = sum(x["t_agree"] + x["t_transfer"] for r in trainers for x in ranks[r][0]) / n
    res["local"] = None if run.ssp else (
        sum(x["decision"] == "local" for r in trainers for x in ranks[r][0]) / max(1, n * res["steps"]))
    # Δ of every training rank after the warm-up: median and 90th percentile
    changes = sorted(x["change"] for r in trainers for x in ranks[r][0]
                     if x["step"] >= WARMUP and math.isfinite(x["change"]))
    res["delta"] = (quantile(changes, 0.5), quantile(changes, 0.9)) if changes else None
    rep = ranks[trainers[0]][0]
    res["rows"] = rep  # the first training rank's steps: delta plot, modelled times
    if run.net == "virtual":
        res["end"], res["compute"], res["comm"] = virtual_parts(rdir)
    # time axis: training time at each step of the first training rank
    t, cum = 0.0, []
    for x in rep:
        if run.net == "virtual":
            t = x["virtual_s"]
        elif run.net == "modelled":
            t += x["t_compute"] + x["t_measure"] + modelled_comm(args, x)
        else:
            t += x["t_compute"] + x["t_measure"] + x["t_agree"] + x["t_transfer"]
        cum.append(t)
    res["cum"] = cum
    # when the final model is there: virtual time counts the final average
    res.setdefault("end", cum[-1] if cum else 0.0)
    res["modelled"] = run.net == "modelled"
    res["virtual"] = run.net == "virtual"
    if res["modelled"]:
        res["model_comm"] = sum(modelled_comm(args, x) for r in trainers for x in ranks[r][0]) / n
    return res


MEASURED = re.compile(r"time per (?:rank|worker): compute ([0-9.]+) s, measure ([0-9.]+) s, "
                      r"(?:blocked \(agree\)|agree) ([0-9.]+) s, transfer ([0-9.]+) s")
VIRTUAL = re.compile(r"virtual time per (?:rank|worker): ([0-9.]+) s \(compute ([0-9.]+) s, waiting for other ranks "
                     r"([0-9.]+) s, network ([0-9.]+) s\)")


def run_times(rdir):
    """Seconds per rank (the mean over the training ranks) from the summary
    of a run (its output.txt): compute, measure, agree and transfer as
    measured; in virtual time also virtual (the total), virtual_compute,
    waiting and network, else those None. ValueError without a summary."""
    text = open(os.path.join(rdir, "output.txt"), errors="replace").read()
    m = MEASURED.search(text)
    if not m:
        raise ValueError("no time per rank in the summary of %s/output.txt" % rdir)
    out = dict(zip(("compute", "measure", "agree", "transfer"), map(float, m.groups())))
    v = VIRTUAL.search(text)
    out.update(zip(("virtual", "virtual_compute", "waiting", "network"),
                   map(float, v.groups()) if v else (None,) * 4))
    return out


def virtual_parts(rdir):
    """(total, compute, waiting + network) per rank, final average included,
    from the summary of a virtual-time run (its output.txt)."""
    t = run_times(rdir)
    if t["virtual"] is None:
        raise ValueError("no virtual time in the summary of %s/output.txt" % rdir)
    return t["virtual"], t["virtual_compute"], t["waiting"] + t["network"]


def modelled_comm(args, row):
    """Communication time of one step at the chosen bandwidth and latency:
    the measured bytes over the link plus 2(N-1) latencies per exchange."""
    b = row["bytes_sent"] + row["inject_bytes"]
    if b <= 0:
        return 0.0
    return b / args.bandwidth_bytes + 2 * (args.ranks - 1) * args.latency


def time_at(res, step):
    """Training time of the first training rank up to a step."""
    cum = res["cum"]
    if not cum:
        return 0.0
    return cum[min(len(cum), max(1, int(step))) - 1]


def curve(args, res):
    """(step, seconds, value) points of held-out accuracy: the evaluations
    during training, then the final model."""
    pts = []
    for e in res["evals"]:
        val = e.get("top1", e.get("map50"))
        if val is None:
            continue
        if res.get("virtual"):
            sec = e["virtual_s"]
        else:
            sec = time_at(res, e["step"]) if res["modelled"] or "train_s" not in e else e["train_s"]
        pts.append((e["step"], sec, val))
    if not pts or pts[-1][0] < res["steps"]:
        pts.append((res["steps"], res["end"], res["final"]))
    return pts
