"""The tables: comparison.md and summary.tsv."""
import os
import platform

from .common import NETWORKS, write
from .metrics import WARMUP, curve
from .provenance import blas_environment, commit_state, cpu, open_mpi

def fmt_time(t):
    return "not reached" if t is None else "%.1f s" % t


def table(args, suite, runs, net):
    """The Table I rows of one suite on one network, as Markdown lines."""
    done = [r for r in runs if r.suite is suite and r.net == net and r.result]
    if not done and not any(r.suite is suite and r.net == net and r.diverged for r in runs):
        return []
    bsp = next((r for r in done if r.key == "bsp"), None)
    # no target when BSP learnt nothing (a score of 0 is reached at once)
    target = bsp.result["final"] if bsp and bsp.result["final"] > 0 else None
    tb = reach(args, bsp.result, target) if target is not None else None
    comm = {"modelled": "modelled communication", "virtual": "virtual communication and waiting"}.get(
        net, "time in communication")
    lines = ["| method | final %s | time to %s | speed-up vs BSP | local steps | MB sent per rank | %s | training time |"
             % (suite.metric, "BSP's %.4f" % target if target is not None else "BSP's final", comm),
             "|---|---:|---:|---:|---:|---:|---:|---:|"]
    for r in done:
        res = r.result
        t = reach(args, res, target) if target is not None else None
        sp = "%.2fx" % (tb / t) if t and tb else ("-" if t is None else "")
        loc = "n/a (server)" if res["local"] is None else "%.1f %%" % (100 * res["local"])
        mb = res["bytes"] / 1e6
        mbs = "%.2f" % mb if not res["inject"] else "%.2f (+%.2f injected)" % (mb, res["inject"] / 1e6)
        c = res["model_comm"] if net == "modelled" else res["comm"]
        total = res["end"]
        lines.append("| %s | %.4f | %s | %s | %s | %s | %.1f s | %.1f s |"
                     % (r.label, res["final"], fmt_time(t) if target is not None else "no target", sp, loc, mbs, c,
                        total))
    for r in runs:
        if r.suite is suite and r.net == net and r.diverged:
            lines.append("| %s | diverged (loss not finite at %s) | | | | | | |" % (r.label, r.diverged))
    deltas = ["%s %.3f / %.3f" % (r.label, r.result["delta"][0], r.result["delta"][1])
              for r in done if r.result["delta"]]
    if deltas:
        lines += ["", "Δ after the %d warm-up steps, every training rank's, median / 90th percentile: %s."
                  % (WARMUP, "; ".join(deltas))]
    return lines


def reach(args, res, target):
    """Training time of the first evaluation at or above the target."""
    for step, sec, val in curve(args, res):
        if val >= target - 1e-9:
            return sec
    return None


def ratio_table(args, runs, all_suites):
    lines = ["| setting | network | BSP compute per rank | BSP communication per rank | communication / compute |",
             "|---|---|---:|---:|---:|"]
    for skey in args.suites:
        for r in runs:
            if r.suite.key == skey and r.key == "bsp" and r.result:
                res = r.result
                net = net_label(args, r.net)
                c = res["model_comm"] if r.net == "modelled" else res["comm"]
                lines.append("| %s | %s | %.1f s | %.1f s | %.2f |" % (
                    r.suite.title, net, res["compute"], c, c / res["compute"] if res["compute"] else float("nan")))
    return lines


def net_label(args, net):
    if net == "shm":
        return "shared memory"
    if net == "modelled":
        return "modelled %s (measured in shared memory)" % args.bandwidth
    if net == "virtual":
        return "virtual time, %s links, %g us latency" % (args.bandwidth, args.latency * 1e6)
    return "emulated hosts, %s links" % args.bandwidth


def machine():
    """This machine, its build and environment, as one line: the CPU, cores,
    kernel and Open MPI; the commit (with "+changes" when the tree differs
    from it); the OPENBLAS_* and OMP_* environment the runs inherit
    (machine.txt, written by provenance.py, has the whole record)."""
    commit, changed = commit_state()
    return "%s, %d cores, Linux %s, %s; commit %s%s; environment: %s" % (
        cpu()[0], os.cpu_count() or 0, platform.release(), open_mpi(), commit[:7], "+changes" if changed else "",
        " ".join(blas_environment()) or "no OPENBLAS_* or OMP_* variable")


def blas_kernel(out):
    """The OpenBLAS kernel the runs of results folder out used, as their
    metrics files name it ("OpenBLAS Haswell (detected)"), or "unknown"."""
    for base, _, files in os.walk(os.path.join(out, "runs")):
        for f in sorted(files):
            if f.startswith("metrics.") and f.endswith(".tsv"):
                with open(os.path.join(base, f)) as m:
                    for line in m:
                        if not line.startswith("#"):
                            break
                        if line.startswith("# OpenBLAS"):
                            return line[2:].strip()
    return "unknown"


def report(args, out, runs, all_suites, made, info):
    """comparison.md and summary.tsv; info: command, started, took, machine,
    cluster (the emulated hosts' name) and note (run-info.txt)."""
    note = info.get("note", "")
    lines = ["# Method comparison", "",
             "Command: `%s`  " % info["command"],
             "Started %s UTC, took %s. Machine: %s; %s; threads per rank: %s.  "
             % (info["started"], info["took"], info["machine"], info["blas"], info["threads"]),
             "%d ranks; %d steps per run (detector: %d), held-out evaluation every %s steps "
             "(detector: every %s) on %d images (detector: %d) and once more on the final model; seed %d."
             % (args.ranks, args.steps, args.det_steps, args.eval_every if args.eval_supported else "-",
                args.det_eval_every if args.eval_supported else "-", args.eval_images, args.det_eval_images,
                args.seed), ""]
    if args.batch or args.lr_rule == "linear":
        lines += ["Batch per rank: %s; learning rate: %s." % (
            args.batch or "the cfg's",
            "the linear scaling rule, the cfg's x ranks x batch per rank / the cfg's batch, after a warm-up "
            "(burn_in) over a tenth of the steps" if args.lr_rule == "linear" else "the cfg's"), ""]
    if note:
        lines += ["**%s**" % note, ""]
    elif info.get("cluster"):
        lines += ["Network: every rank on its own emulated host (network namespaces %s-h0 .. %s-h%d, removed "
                  "afterwards), links to a bridge shaped to %s with tbf, TCP between the hosts; the shared-memory "
                  "runs use one host." % (info["cluster"], info["cluster"], args.ranks - 1, args.bandwidth), ""]
    if any(r.net == "virtual" for r in runs):
        lines += ["Virtual time (`SELSYNC_VIRTUAL=%s`): the %d ranks shared this machine's cores, one thread "
                  "each; a rank's computation is the CPU time of its thread, and every collective and message "
                  "costs what the modelled network (%s links, %g us latency per message) would take, after the "
                  "latest rank arrives (docs/virtual-time.md)." % (args.virtual_spec, args.ranks, args.bandwidth,
                                                                    args.latency * 1e6), ""]
    lines += ["Time columns are training time (evaluation excluded) of the first training rank; "
              "communication = time in the agreement and the transfers (including waiting for the slower rank), "
              "MB sent = bytes of synchronisation (and of injected samples) per training rank, without the final "
              "average; local steps = steps without any averaging. SSP: rank 0 is the parameter server, "
              "the figures are the workers'.", ""]
    lines += ["## Communication / compute under BSP", ""] + ratio_table(args, runs, all_suites) + [""]
    for skey in args.suites:
        s = all_suites[skey]
        for net in NETWORKS:
            t = table(args, s, runs, net)
            if not t:
                continue
            lines += ["## %s: %s" % (s.title, net_label(args, net)), ""] + t + [""]
            for kind in ("accuracy", "delta", "bytes"):
                name = "%s-%s-%s.png" % (kind, skey, net)
                if name in made:
                    lines.append("![%s](plots/%s)" % (name[:-4], name))
            lines.append("")
    for net in NETWORKS:
        if "noniid-%s.png" % net in made:
            lines += ["## Skewed data without and with injection (%s)" % net_label(args, net), "",
                      "![noniid-%s](plots/noniid-%s.png)" % (net, net), ""]
    write(os.path.join(out, "comparison.md"), "\n".join(lines))
    # one machine-readable line per run
    rows = ["suite\tnetwork\tmethod\tfinal\tsteps\tlocal_fraction\tbytes_per_rank\tinject_bytes_per_rank"
            "\tcompute_s\tcomm_s\ttraining_s\ttime_to_bsp_s"]
    for r in runs:
        if r.result:
            res = r.result
            bsp = next((b for b in runs if b.suite is r.suite and b.net == r.net and b.key == "bsp" and b.result), None)
            target = bsp.result["final"] if bsp and bsp.result["final"] > 0 else None
            t = reach(args, res, target) if target is not None else None
            rows.append("%s\t%s\t%s\t%.4f\t%d\t%s\t%.0f\t%.0f\t%.3f\t%.3f\t%.3f\t%s" % (
                r.suite.key, r.net, r.key, res["final"], res["steps"],
                "" if res["local"] is None else "%.4f" % res["local"], res["bytes"], res["inject"],
                res["compute"], res["model_comm"] if r.net == "modelled" else res["comm"],
                res["end"], "" if t is None else "%.3f" % t))
        elif r.diverged:
            rows.append("%s\t%s\t%s\tdiverged at %s\t\t\t\t\t\t\t\t" % (r.suite.key, r.net, r.key, r.diverged))
    write(os.path.join(out, "summary.tsv"), "\n".join(rows) + "\n")
