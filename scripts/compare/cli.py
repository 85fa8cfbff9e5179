"""The command line and the order of a comparison: options, runs, cleanup,
tables and plots."""
import argparse
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time

from .cluster import Cluster
from .common import CLUSTER, ROOT, SUITES, clock, fail, write
from .data import prepare_data, probe_eval_every
from .metrics import collect
from .plots import plots
from .provenance import write_machine_txt
from .report import blas_kernel, machine, report
from .runs import Progress, diverged, end, methods, plan, run_all, score_in, suites

def rate(text):
    """A tc rate in bit/s units (1gbit, 100mbit, 500kbit) -> (text, bytes per second)."""
    m = re.fullmatch(r"(\d+(?:\.\d+)?)(k|m|g)?bit", text.lower())
    if not m or float(m.group(1)) <= 0:
        raise argparse.ArgumentTypeError("a rate like 1gbit, 100mbit or 500kbit, got '%s'" % text)
    return text, float(m.group(1)) * {None: 1, "k": 1e3, "m": 1e6, "g": 1e9}[m.group(2)] / 8


def options(argv):
    p = argparse.ArgumentParser(
        description="Compare bsp, fedavg, ssp, local SGD and selsync on Fashion-MNIST (iid, SelDP, skewed "
                    "without and with injection), the detection set and a wide network, and write a table "
                    "and plots.")
    p.add_argument("--quick", action="store_true",
                   help="a few steps per run on small slices of the data: proves the pipeline end to end")
    p.add_argument("--ranks", type=int, default=2, help="MPI ranks (emulated hosts) for every run (default 2)")
    p.add_argument("--steps", type=int, help="steps per classifier run (default 100; quick 4)")
    p.add_argument("--det-steps", type=int, help="steps per detector run (default 80; quick 4)")
    p.add_argument("--eval-every", type=int, help="held-out evaluation every K steps (default steps/4; quick 2)")
    p.add_argument("--det-eval-every", type=int, help="the same for the detector (default det-steps/4; quick 2)")
    p.add_argument("--eval-images", type=int, help="held-out images per evaluation (default 500; quick 40)")
    p.add_argument("--det-eval-images", type=int, help="held-out canvases per mAP (default 100; quick 8)")
    p.add_argument("--settings-net", choices=("small", "wide"), default="small",
                   help="the network of the iid, seldp, label and label-inject settings: cfg/fmnist.cfg "
                   "(small, default) or cfg/fmnist-wide.cfg (wide: 12 MB per synchronisation)")
    p.add_argument("--classes-per-rank", type=int, default=2, help="K of the skewed setting label:K (default 2)")
    p.add_argument("--bandwidth", type=rate, default=rate("1gbit"),
                   help="rate of every emulated link, as tc writes it (default 1gbit)")
    p.add_argument("--latency", type=float, default=50e-6,
                   help="per-message latency in seconds for the modelled network (default 5e-05)")
    p.add_argument("--suites", default=",".join(SUITES), help="comma-separated subset of: " + ", ".join(SUITES))
    p.add_argument("--methods", default="", help="comma-separated method keys to run (default: all)")
    p.add_argument("--shm-methods", default="bsp,selsync-0.3",
                   help="methods repeated in shared memory (default bsp,selsync-0.3; 'none')")
    p.add_argument("--no-emulation", action="store_true",
                   help="no network namespaces: shared memory, with modelled communication time")
    p.add_argument("--batch", type=int, default=0, help="batch per rank (default: the cfg's; quick 8)")
    p.add_argument("--subdivisions", type=int, default=0,
                   help="mini-batches per rank and step (Darknet's subdivisions; default: the cfg's): the "
                   "granularity of speed_batches' shares")
    p.add_argument("--lr-rule", choices=("cfg", "linear"), default="cfg",
                   help="learning rate: the cfg's (default), or linear: the cfg's x ranks x batch per rank / the "
                   "cfg's batch, after a warm-up over a tenth of the steps (the same rule for every method)")
    p.add_argument("--virtual", action="store_true",
                   help="virtual time (SELSYNC_VIRTUAL): the ranks share the cores, one thread each, and every "
                   "time is what --ranks machines on --bandwidth links with --latency would see; any rank count")
    p.add_argument("--stragglers", metavar="SPEC", default="",
                   help="with --virtual: stragglers in SELSYNC_VIRTUAL's terms, slow=R:F[+R:F...] (rank R computes "
                        "F times slower) and/or jitter=P:TIME[:SEED] (every rank pauses TIME at the start of a step "
                        "with probability P; SEED defaults to --seed), comma-separated")
    p.add_argument("--cpu-limit", metavar="H:PCT[+H:PCT]", default="",
                   help="on emulated hosts: host H (1 or more) limited to PCT %% of one CPU, as a slower machine "
                   "(scripts/emulated-cluster.sh's EMULATED_CLUSTER_CPU)")
    p.add_argument("--emulated-clock", metavar="SPEC", default="",
                   help="on emulated hosts: every rank also keeps a virtual clock on the network SPEC "
                   "(SELSYNC_VIRTUAL's form, e.g. bandwidth=944Mbit,latency=33us) with its computation in wall "
                   "time, so that one run gives the measured and the modelled times (scripts/experiments/validate-virtual.py)")
    p.add_argument("--jobs", type=int, help="runs at the same time (default 1; quick 4); more than 1 "
                   "distorts the times, so only for checking the pipeline")
    p.add_argument("--run-timeout", type=int, help="seconds after which a run counts as failed "
                   "(default 3600; quick 300)")
    p.add_argument("--seed", type=int, default=1, help="[selsync] seed of every run (default 1)")
    p.add_argument("--bn-recalibrate", type=int, metavar="N",
                   help="[selsync] bn_recalibrate of every run: training images per rank that re-estimate the "
                   "final model's BatchNorm statistics (0 = off; default: the build's)")
    p.add_argument("--results", default=os.path.join(ROOT, "results"), help="parent folder of the results")
    p.add_argument("--report", metavar="DIR", help="only rebuild the tables and plots of the results folder DIR "
                   "(give the options it was made with)")
    p.add_argument("--det-cfg", default=os.path.join(ROOT, "cfg", "fmnist-det.cfg"),
                   help="the detector's cfg of the det suite (default cfg/fmnist-det.cfg)")
    a = p.parse_args(argv)
    q = a.quick
    # quick: small batches, so that a run costs little more than its start
    a.batch = a.batch or (8 if q else 0)
    a.steps = a.steps or (4 if q else 100)
    a.det_steps = a.det_steps or (4 if q else 80)
    a.eval_every = a.eval_every or (2 if q else max(1, a.steps // 4))
    a.det_eval_every = a.det_eval_every or (2 if q else max(1, a.det_steps // 4))
    a.eval_images = a.eval_images or (40 if q else 500)
    a.det_eval_images = a.det_eval_images or (8 if q else 100)
    a.train_images = 2000 if q else 0
    a.jobs = a.jobs or (4 if q else 1)
    a.run_timeout = a.run_timeout or (300 if q else 3600)
    if a.jobs < 1:
        p.error("--jobs must be at least 1")
    a.all_suites = suites(a)
    a.suites = [s for s in a.suites.split(",") if s]
    bad = [s for s in a.suites if s not in SUITES]
    if bad or not a.suites:
        p.error("--suites: unknown %s; choose from %s" % (", ".join(bad) or "(none)", ", ".join(SUITES)))
    known = [k for k, _, _ in methods(a.steps, True)] + [k for k, _, _ in methods(a.det_steps, True)]
    a.methods = [m for m in a.methods.split(",") if m]
    a.shm_methods = [] if a.shm_methods == "none" else [m for m in a.shm_methods.split(",") if m]
    for m in a.methods + a.shm_methods:
        base, *pairs = m.split("+")
        if base not in known:
            p.error("unknown method '%s'; methods: %s (each may be followed by +KEY=VALUE settings)"
                    % (base, ", ".join(dict.fromkeys(known))))
        bad = [x for x in pairs if not re.fullmatch(r"(net\.)?[a-z_]+=[^+,=\s]+", x)]
        if bad:
            p.error("method '%s': '%s' is not a [selsync] KEY=VALUE setting" % (m, bad[0]))
    if a.ranks < 2:
        p.error("--ranks must be at least 2")
    if a.classes_per_rank < 1 or a.classes_per_rank > 10:
        p.error("--classes-per-rank must be 1..10")
    a.bandwidth, a.bandwidth_bytes = a.bandwidth
    a.virtual_spec = "bandwidth=%sMbit,latency=%sus" % (plain(a.bandwidth_bytes * 8 / 1e6), plain(a.latency * 1e6))
    if a.stragglers:
        if not a.virtual:
            p.error("--stragglers goes with --virtual")
        parts = a.stragglers.split(",")
        if any(not (x.startswith("slow=") or x.startswith("jitter=")) for x in parts):
            p.error("--stragglers %s: expected slow=R:F[+R:F...] and/or jitter=P:TIME[:SEED], comma-separated"
                    % a.stragglers)
        # the jitter's draws follow the run's seed unless the spec names one
        parts = [x + ":%d" % a.seed if x.startswith("jitter=") and x.count(":") == 1 else x for x in parts]
        a.virtual_spec += "," + ",".join(parts)
    if a.virtual:
        a.shm_methods = []
    if a.emulated_clock and (a.virtual or a.no_emulation):
        p.error("--emulated-clock goes with emulated hosts, not with --virtual or --no-emulation")
    if a.cpu_limit and (a.virtual or a.no_emulation):
        p.error("--cpu-limit goes with emulated hosts, not with --virtual or --no-emulation (there: --stragglers)")
    if a.emulated_clock and "compute=" not in a.emulated_clock:
        a.emulated_clock += ",compute=wall"
    return a


def plain(x):
    """x as a plain decimal (no exponent), as SELSYNC_VIRTUAL reads numbers."""
    return ("%.6f" % x).rstrip("0").rstrip(".")


def rebuild(args, gnuplot):
    """--report DIR: the tables and plots again from DIR's run folders."""
    out = os.path.abspath(args.report)
    info = {}
    try:
        with open(os.path.join(out, "run-info.txt")) as f:
            info = dict(line.rstrip("\n").split("=", 1) for line in f if "=" in line)
    except OSError:
        fail("%s/run-info.txt is missing: not a results folder of this script" % out)
    net_main = "emulated" if info.get("cluster") else "virtual" if info.get("virtual") else "modelled"
    args.eval_supported = True
    runs = plan(args, net_main)
    for run in runs:
        rdir = os.path.join(out, "runs", run.suite.key, "%s-%s" % (run.net, run.key))
        run.diverged = diverged(rdir)
        if os.path.isdir(rdir) and not run.diverged:
            run.result = collect(args, run, rdir, lambda: score_in(os.path.join(rdir, "final-eval.txt")))
    if not any(r.result or r.diverged for r in runs):
        fail("no run of these options in %s (give the options it was made with)" % out)
    made = plots(args, out, runs, args.all_suites, gnuplot)
    report(args, out, runs, args.all_suites, made, info)
    print("compare-methods: rebuilt %s" % os.path.join(out, "comparison.md"), file=sys.stderr)
    return 0


def main(argv):
    args = options(argv)
    started = time.time()
    command = " ".join(["scripts/experiments/compare-methods.py"] + argv)
    darknet = os.path.join(os.environ.get("SELSYNC_BUILD_DIR", os.path.join(ROOT, "build")), "darknet")
    if not os.access(darknet, os.X_OK):
        fail("%s is missing: build first (cmake -S . -B build && cmake --build build)" % darknet)
    gnuplot = shutil.which("gnuplot")
    if not gnuplot:
        fail("gnuplot is missing: scripts/install-deps.sh installs it (Debian package gnuplot-nox)")
    if args.report:
        return rebuild(args, gnuplot)
    det_cfg = args.det_cfg
    if "det" in args.suites and not os.path.exists(det_cfg):
        fail("%s is missing (the detector cfg for the detection set)" % det_cfg)
    os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
    os.environ["OMPI_ALLOW_RUN_AS_ROOT"] = os.environ["OMPI_ALLOW_RUN_AS_ROOT_CONFIRM"] = "1"

    note = ""
    net_main = "emulated"
    if args.virtual:
        net_main = "virtual"
    elif args.no_emulation:
        net_main = "modelled"
        note = ("No emulated network (--no-emulation): every run used shared memory; communication times "
                "are modelled from the measured bytes at %s and %g s latency per message."
                % (args.bandwidth, args.latency))
    else:
        p = subprocess.run(["sh", CLUSTER, "check"], stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                           universal_newlines=True)
        if p.returncode:
            net_main = "modelled"
            note = ("Network namespaces are not permitted here (%s): every run used shared memory; "
                    "communication times are modelled from the measured bytes at %s and %g s latency per message."
                    % (p.stdout.strip(), args.bandwidth, args.latency))
    if note:
        print("compare-methods: " + note, file=sys.stderr)

    name = "%s-%dranks-%s-%dsteps%s" % (time.strftime("%Y%m%d-%H%M%S", time.gmtime(started)), args.ranks,
                                        {"emulated": "", "virtual": "virtual-"}.get(net_main, "shm-modelled-")
                                        + args.bandwidth,
                                        args.steps, "-quick" if args.quick else "")
    out = os.path.join(os.path.abspath(args.results), name)
    os.makedirs(out)
    write_machine_txt(out, sys.argv, args.ranks)
    work = tempfile.mkdtemp(prefix="compare-methods.")
    cluster = Cluster(args.ranks, args.bandwidth) if net_main == "emulated" else None
    ctx = {"out": out, "work": work, "darknet": darknet, "cluster": cluster, "procs": set(), "pool": None,
           "stop": False, "lock": threading.Lock(),
           "cfg_small": os.path.join(ROOT, "cfg", "fmnist.cfg"),
           "cfg_wide": os.path.join(ROOT, "cfg", "fmnist-wide.cfg"), "cfg_det": det_cfg}

    def stop(signum, frame):
        raise KeyboardInterrupt("signal %d" % signum)
    for sig in (signal.SIGTERM, signal.SIGHUP):
        signal.signal(sig, stop)
    # Ctrl-C cleans up even where the caller started this with SIGINT ignored
    signal.signal(signal.SIGINT, signal.default_int_handler)
    runs = []
    try:
        print("compare-methods: results in %s" % out, file=sys.stderr)
        ctx["datas"] = prepare_data(args, out, work)
        args.eval_supported = probe_eval_every(work, darknet)
        if not args.eval_supported:
            print("compare-methods: this build has no eval_every; each run is evaluated after training only",
                  file=sys.stderr)
        runs = plan(args, net_main)
        if cluster:
            cluster.start()
            print("compare-methods: %d emulated hosts %s-h0..%d, links shaped to %s"
                  % (args.ranks, cluster.name, args.ranks - 1, args.bandwidth), file=sys.stderr)
        ctx["progress"] = Progress(runs, args.jobs == 1)
        run_all(args, runs, ctx)
        all_suites = args.all_suites
        made = plots(args, out, runs, all_suites, gnuplot)
        info = {"command": command, "started": time.strftime("%Y-%m-%d %H:%M", time.gmtime(started)),
                "took": clock(time.time() - started), "machine": machine(), "blas": blas_kernel(out),
                "threads": "1 (virtual time)" if net_main == "virtual" else os.environ.get("OPENBLAS_NUM_THREADS", "?"),
                "cluster": cluster.name if cluster else "", "note": note,
                "virtual": args.virtual_spec if net_main == "virtual" else ""}
        write(os.path.join(out, "run-info.txt"), "".join("%s=%s\n" % kv for kv in info.items()))
        report(args, out, runs, all_suites, made, info)
        print("compare-methods: %d runs in %s; table: %s" % (len(runs), clock(time.time() - started),
                                                           os.path.join(out, "comparison.md")), file=sys.stderr)
        return 0
    finally:
        # the cleanup runs to its end: a further Ctrl-C, SIGTERM or SIGHUP waits
        for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
            signal.signal(sig, signal.SIG_IGN)
        with ctx["lock"]:
            ctx["stop"] = True
        for proc in list(ctx["procs"]):
            end(proc)
        if ctx["pool"]:
            ctx["pool"].shutdown(wait=True, cancel_futures=True)
        if cluster:
            cluster.close()
        shutil.rmtree(work, ignore_errors=True)
