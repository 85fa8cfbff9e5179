"""The runner: the list of runs (methods times suites) and the training
jobs that execute them, one at a time or several in parallel."""
import concurrent.futures
import os
import re
import signal
import subprocess
import sys
import time

from .common import CLUSTER, clock, fail, write
from .data import base_cfg, run_cfg
from .metrics import collect

# the paper's rule alone: a layer synchronises when its change reaches delta on any rank
PAPER = {"drift": 0, "agree": "any"}


def methods(steps, extra=False, named=()):
    """(key, label, [selsync] settings) of every method, for a step budget;
    extra: also the frontier's (scripts/experiments/frontier.py), run only when named;
    named: keys BASE+KEY=VALUE[+...], the method BASE with those [selsync]
    settings added or replaced (a BASE that is not a method is left out)."""
    a = max(2, steps // 4)
    b = a // 2
    out = [("bsp", "BSP", {"method": "bsp"}),
           # Darknet's own multi-GPU training (AlexeyAB's and hank-ai's forks): every GPU
           # steps alone and the weights are averaged every 4 iterations
           ("fedavg-4", "FedAvg every 4 (Darknet's multi-GPU scheme)", {"method": "fedavg", "fedavg_interval": 4}),
           ("fedavg-%d" % a, "FedAvg, every %d" % a, {"method": "fedavg", "fedavg_interval": a}),
           ("fedavg-%d" % b, "FedAvg, every %d" % b, {"method": "fedavg", "fedavg_interval": b}),
           ("fedavg-%d-c0.5" % a, "FedAvg C=0.5, every %d" % a,
            {"method": "fedavg", "fedavg_interval": a, "fedavg_fraction": 0.5}),
           ("ssp-100", "SSP s=100", {"method": "ssp", "ssp_staleness": 100}),
           ("ssp-200", "SSP s=200", {"method": "ssp", "ssp_staleness": 200}),
           ("local", "local SGD", {"method": "local"})]
    # the keys with a delta are the paper's rule alone (drift = 0)
    for d in ("0.05", "0.1"):  # the rest of the paper's sweep of delta
        out.append(("selsync-%s" % d, "SelSync δ=%s" % d, {"method": "selsync", "delta": d, **PAPER}))
    # beyond the paper: a bound on local steps in a row, and delta adapted to a share of synchronised steps
    g = max(2, steps // 10)
    out.append(("selsync-0.3-max%d" % g, "SelSync δ=0.3, at most %d local steps in a row" % g,
                {"method": "selsync", "delta": "0.3", "max_local": g, **PAPER}))
    out.append(("selsync-target-0.1", "SelSync, δ adapted to 10 % synchronised steps",
                {"method": "selsync", "delta": "0.3", "target_sync": "0.1", **PAPER}))
    for gran in ("model", "layer"):
        for d in ("0.3", "0.5"):
            key = "selsync-%s%s" % (d, "-layer" if gran == "layer" else "")
            label = "SelSync δ=%s%s" % (d, ", per layer" if gran == "layer" else "")
            out.append((key, label, {"method": "selsync", "delta": d, "granularity": gran, **PAPER}))
    if extra:
        out.append(("selsync", "SelSync, defaults (δ=0.3 on the ranks' mean Δ, drift 1e-4)", {"method": "selsync"}))
        for rule in ("any", "mean"):  # the defaults with each agreement on Δ
            out.append(("selsync-%s" % rule, "SelSync, defaults, Δ agreed by its %s" % ("ranks' mean" if rule == "mean" else "any rank"),
                        {"method": "selsync", "agree": rule}))
        for d in ("3e-4", "1e-3"):  # the mean rule with a higher drift threshold
            out.append(("selsync-mean-drift-%s" % d, "SelSync, Δ's mean, drift rule at %s" % d,
                        {"method": "selsync", "agree": "mean", "drift": d}))
        for k in (1, 2, 4):  # the defaults with each step's agreement completed k steps later
            out.append(("selsync-lag-%d" % k, "SelSync, defaults, agreement completed %d step%s later"
                        % (k, "" if k == 1 else "s"), {"method": "selsync", "lag": k}))
        for key, label, base in (("bsp", "BSP", {"method": "bsp"}), ("selsync", "SelSync, defaults", {"method": "selsync"}),
                                 ("fedavg-4", "FedAvg every 4", {"method": "fedavg", "fedavg_interval": 4})):
            # every training batch normalised with the statistics of all ranks' batches together, and
            # the final model's BatchNorm statistics re-estimated on 1000 images per rank
            out.append((key + "-syncbn", label + ", synchronised BatchNorm", {**base, "sync_batchnorm": 1}))
            out.append((key + "-recal", label + ", BatchNorm recalibrated", {**base, "bn_recalibrate": 1000}))
            out.append((key + "-syncbn-recal", label + ", synchronised BatchNorm, recalibrated",
                        {**base, "sync_batchnorm": 1, "bn_recalibrate": 1000}))
        for d in ("1e-3", "4e-4"):  # with the lag, a lower drift threshold for the decisions that come 2 steps late
            out.append(("selsync-mean-drift-%s-lag-2" % d, "SelSync, Δ's mean, drift rule at %s, agreement 2 steps later" % d,
                        {"method": "selsync", "agree": "mean", "drift": d, "lag": 2}))
        # each rank's share of the step's mini-batches follows its speed (needs --subdivisions > 1)
        for key, label, base in (("bsp", "BSP", {"method": "bsp"}), ("selsync", "SelSync, defaults", {"method": "selsync"}),
                                 ("selsync-lag-2", "SelSync, defaults, lag 2", {"method": "selsync", "lag": 2})):
            out.append((key + "-speed", label + ", batches that follow speed", {**base, "speed_batches": "auto"}))
            out.append((key + "-speed-on", label + ", batches that follow every change of speed",
                        {**base, "speed_batches": "on"}))
        for k in (2, 8, 16, 32):
            out.append(("fedavg-%d" % k, "FedAvg, every %d" % k, {"method": "fedavg", "fedavg_interval": k}))
        # post-local SGD: every step synchronises until Darknet's burn_in ends
        out.append(("selsync-postlocal", "SelSync, defaults, every step synchronised until burn_in ends",
                    {"method": "selsync", "sync_until": "burn_in"}))
        out.append(("selsync-qsr", "SelSync δ=0.3, quadratic rule from 4 local steps in a row",
                    {"method": "selsync", "delta": "0.3", "max_local": 4, "qsr_alpha": 0.1, **PAPER}))
        # SlowMo's outer momentum on each average (beta 0.5, alpha 1)
        out.append(("fedavg-4-outer", "FedAvg every 4, outer momentum 0.5",
                    {"method": "fedavg", "fedavg_interval": 4, "outer_momentum": 0.5}))
        out.append(("selsync-0.3-outer", "SelSync δ=0.3, outer momentum 0.5",
                    {"method": "selsync", "delta": "0.3", "outer_momentum": 0.5, **PAPER}))
        for d in ("1e-4", "3e-4"):  # delta 0.3 with the drift rule
            out.append(("selsync-0.3-drift-%s" % d, "SelSync δ=0.3 with the drift rule at %s" % d,
                        {"method": "selsync", "delta": "0.3", "drift": d, "agree": "any"}))
        for d in ("1e-4", "3e-4", "1e-3"):  # the drift rule alone (delta never fires)
            out.append(("selsync-drift-%s" % d, "SelSync, drift rule at %s (Δ off)" % d,
                        {"method": "selsync", "delta": "1e30", "drift": d}))
        for t in ("0.05", "0.25", "0.5"):
            out.append(("selsync-target-%s" % t, "SelSync, δ adapted to %g %% synchronised steps" % (100 * float(t)),
                        {"method": "selsync", "delta": "0.3", "target_sync": t, **PAPER}))
    base = {k: (label, st) for k, label, st in out}
    for name in named:
        parts = name.split("+")
        if len(parts) > 1 and parts[0] in base:
            label, st = base[parts[0]]
            pairs = dict(p.split("=", 1) for p in parts[1:])
            out.append((name, label + ", " + ", ".join("%s=%s" % kv for kv in pairs.items()), {**st, **pairs}))
    seen = set()  # a budget of 16 steps makes fedavg-A Darknet's fedavg-4: once
    return [m for m in out if not (m[0] in seen or seen.add(m[0]))]


class Suite:
    def __init__(self, key, title, kind, partition, inject=False):
        self.key, self.title, self.kind, self.partition, self.inject = key, title, kind, partition, inject
        self.detector = kind == "det"
        self.metric = "mAP@0.5" if self.detector else "top-1"


def suites(args):
    """The settings; the Fashion-MNIST ones (iid, seldp, label, label-inject)
    train args.settings_net: the small network, or the wide one."""
    k = args.classes_per_rank
    net = args.settings_net
    on = "" if net == "small" else ", wide network"
    return {
        "iid": Suite("iid", "Fashion-MNIST, iid shards" + on, net, "iid"),
        "seldp": Suite("seldp", "Fashion-MNIST, SelDP" + on, net, "seldp"),
        "label": Suite("label", "Fashion-MNIST, %d class%s per rank%s" % (k, "" if k == 1 else "es", on),
                       net, "label:%d" % k),
        "label-inject": Suite("label-inject", "Fashion-MNIST, %d class%s per rank, injection (0.5, 0.5)%s"
                              % (k, "" if k == 1 else "es", on), net, "label:%d" % k, inject=True),
        "det": Suite("det", "Fashion-MNIST detection set", "det", "iid"),
        "wide": Suite("wide", "Fashion-MNIST, wide network (cfg/fmnist-wide.cfg)", "wide", "iid"),
    }


class Run:
    def __init__(self, suite, key, label, settings, net, steps, eval_every):
        self.suite, self.key, self.label, self.settings = suite, key, label, settings
        self.net, self.steps, self.eval_every = net, steps, eval_every
        self.id = "%s/%s-%s" % (suite.key, net, key)
        self.ssp = settings["method"] == "ssp"
        self.result = None
        self.diverged = None  # "step N" when training stopped on a non-finite loss


def plan(args, net_main):
    """The runs, in order: per suite every method on the main network, then the
    shared-memory repeats."""
    runs = []
    for skey in args.suites:
        s = args.all_suites[skey]
        steps = args.det_steps if s.detector else args.steps
        every = args.det_eval_every if s.detector else args.eval_every
        ms = methods(steps, extra=bool(args.methods), named=args.methods)
        if args.quick and skey != "iid" and not args.methods:
            # quick: one method of each kind beyond the iid setting (unless named)
            ms = [m for m in ms if m[0] in ("bsp", ms[1][0], "ssp-100", "local", "selsync-0.3", "selsync-0.3-layer")]
        for key, label, st in ms:
            if s.inject and st["method"] == "ssp":
                continue  # injection does not apply to ssp
            if args.methods and key not in args.methods:
                continue
            runs.append(Run(s, key, label, st, net_main, steps, every))
            if net_main == "emulated" and key in args.shm_methods and not (args.quick and skey != "iid"):
                runs.append(Run(s, key, label, st, "shm", steps, every))
    # shared-memory repeats after the main runs of the same suite
    runs.sort(key=lambda r: (args.suites.index(r.suite.key), r.net == "shm"))
    return runs

class Progress:
    """One status line: run i/n, its step, elapsed and estimated remaining time."""

    def __init__(self, runs, enabled):
        self.runs, self.enabled = runs, enabled
        self.tty = sys.stderr.isatty()
        self.start = time.time()
        self.done = []  # (run, seconds)
        self.last = 0.0

    def rate(self, run):
        """Seconds per step of finished runs of this kind (network and cfg)."""
        same = [(r, t) for r, t in self.done if r.suite.kind == run.suite.kind and r.net == run.net]
        pool = same or self.done
        if not pool:
            return None
        return sum(t for _, t in pool) / sum(r.steps for r, _ in pool)

    def eta(self, i, step, run_elapsed):
        remaining = 0.0
        cur = self.runs[i]
        r = self.rate(cur)
        if step and (r is None or not self.done):
            r = run_elapsed / step
        if r is None:
            return None
        remaining += max(0.0, (cur.steps - (step or 0)) * r)
        for later in self.runs[i + 1:]:
            lr = self.rate(later) or r
            remaining += later.steps * lr
        return remaining

    def show(self, i, step, run_start, force=False):
        if not self.enabled:
            return
        now = time.time()
        if not force and now - self.last < (1.0 if self.tty else 30.0):
            return
        self.last = now
        run = self.runs[i]
        eta = self.eta(i, step, now - run_start)
        line = "[%d/%d] %-13s %-26s %-8s step %4s/%d  run %s  total %s  left %s" % (
            i + 1, len(self.runs), run.suite.key, run.label, run.net, step if step is not None else "-",
            run.steps, clock(now - run_start), clock(now - self.start), "?" if eta is None else "~" + clock(eta))
        if self.tty:
            sys.stderr.write("\r\033[K" + line)
        else:
            sys.stderr.write(line + "\n")
        sys.stderr.flush()

    def finish(self, i, seconds, note):
        self.done.append((self.runs[i], seconds))
        if not self.enabled:
            return
        run = self.runs[i]
        line = "[%d/%d] %-13s %-26s %-8s %s in %s" % (i + 1, len(self.runs), run.suite.key, run.label,
                                                       run.net, note, clock(seconds))
        sys.stderr.write(("\r\033[K" if self.tty else "") + line + "\n")
        sys.stderr.flush()


def last_step(path):
    """The step of the last data line of a metrics file, or None."""
    try:
        with open(path, "rb") as f:
            f.seek(0, 2)
            f.seek(max(0, f.tell() - 4096))
            lines = f.read().decode(errors="replace").splitlines()
    except OSError:
        return None
    for line in reversed(lines[:-1] if lines and not lines[-1] else lines):
        fields = line.split("\t")
        if fields and fields[0].isdigit():
            return int(fields[0])
    return None


def execute(args, run, i, ctx):
    """Trains one run and evaluates its final model; fills run.result."""
    rdir = os.path.join(ctx["out"], "runs", run.suite.key, "%s-%s" % (run.net, run.key))
    os.makedirs(rdir, exist_ok=True)
    cfg_src = {"small": ctx["cfg_small"], "wide": ctx["cfg_wide"], "det": ctx["cfg_det"]}[run.suite.kind]
    cfg = os.path.join(rdir, "run.cfg")
    write(cfg, run_cfg(args, run, cfg_src, os.path.join(rdir, "metrics.%r.tsv")))
    backup = os.path.join(ctx["work"], "run%d" % i)
    os.makedirs(backup)
    data = os.path.join(rdir, "run.data")
    write(data, ctx["datas"][run.suite.key] + "backup=%s\n" % backup)
    mode = "detector" if run.suite.detector else "classifier"
    train = [ctx["darknet"], mode, "train", data, cfg, initial_weights(run.suite.kind, cfg_src, ctx)]
    env = None
    if run.net == "emulated":
        cmd = ["sh", CLUSTER, "mpirun", ctx["cluster"].name, "-np", str(args.ranks)] + train
        env = dict(os.environ, EMULATED_CLUSTER_CPU=args.cpu_limit) if args.cpu_limit else None
        if args.emulated_clock:  # the modelled clock beside the measured times
            env = dict(env or os.environ, SELSYNC_VIRTUAL=args.emulated_clock)
            cmd[6:6] = ["-x", "SELSYNC_VIRTUAL"]
    else:
        cmd = ["mpirun", "-np", str(args.ranks), "--oversubscribe"] + train
        # a TMPDIR of its own: jobs that share one remove each other's
        # session folders while they are made
        env = dict(os.environ, TMPDIR=os.path.join(ctx["work"], "tmp%d" % i))
        os.makedirs(env["TMPDIR"])
        if run.net == "virtual":  # one thread per rank: its CPU time is its computation
            env.update(SELSYNC_VIRTUAL=args.virtual_spec, OMP_NUM_THREADS="1", OPENBLAS_NUM_THREADS="1")
    watch = os.path.join(rdir, "metrics.%d.tsv" % (1 if run.ssp else 0))
    start = time.time()
    with open(os.path.join(rdir, "output.txt"), "w") as log:
        log.write("$ " + " ".join(cmd) + "\n")
        log.flush()
        with ctx["lock"]:  # a job is either started and ended at the end, or never started
            if ctx["stop"]:
                fail("stopped")
            proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, start_new_session=True, env=env)
            ctx["procs"].add(proc)
        while proc.poll() is None:
            ctx["progress"].show(i, last_step(watch), start)
            if time.time() - start > args.run_timeout:
                end(proc)
                fail("run %s did not end within %d s (--run-timeout); its output: %s"
                     % (run.id, args.run_timeout, os.path.join(rdir, "output.txt")))
            time.sleep(0.25)
        ctx["procs"].discard(proc)
    train_s = time.time() - start
    run.diverged = diverged(rdir)
    if run.diverged:
        return train_s  # an outcome of the method: the table says so
    if proc.returncode:
        tail = open(os.path.join(rdir, "output.txt"), errors="replace").read()[-3000:]
        fail("run %s failed (exit status %d); its output (%s):\n%s"
             % (run.id, proc.returncode, os.path.join(rdir, "output.txt"), tail))
    weights = os.path.join(backup, "run_final.weights" if run.suite.detector else "run.weights")
    if not os.path.exists(weights):
        fail("run %s wrote no weights (%s)" % (run.id, weights))
    run.result = collect(args, run, rdir, lambda: evaluate(ctx["darknet"], run.suite.detector, data, cfg, weights,
                                                           os.path.join(rdir, "final-eval.txt")))
    run.result["wall_s"] = train_s
    return time.time() - start


def initial_weights(kind, cfg_src, ctx):
    """The weights every run of this cfg starts from, made once: Darknet's
    initial weights from rand()'s default seed (`darknet partial` of no
    weights), where training alone would draw them from the clock."""
    with ctx["lock"]:
        path = os.path.join(ctx["work"], "init-%s.weights" % kind)
        if not os.path.exists(path):
            cfg = os.path.join(ctx["work"], "init-%s.cfg" % kind)
            write(cfg, base_cfg(cfg_src, 1))
            p = subprocess.run([ctx["darknet"], "partial", cfg, "", path, "1000"], stdout=subprocess.PIPE,
                               stderr=subprocess.STDOUT, universal_newlines=True)
            if p.returncode or not os.path.exists(path):
                fail("making the initial weights of %s failed:\n%s" % (cfg_src, p.stdout[-2000:]))
        return path


def diverged(rdir):
    """'step N' when the run's training stopped on a non-finite loss,
    gradient or parameter (the plugin ends the job then), else None."""
    try:
        text = open(os.path.join(rdir, "output.txt"), errors="replace").read()
    except OSError:
        return None
    m = re.search(r"step (\d+): rank \d+: the (?:loss|gradient|parameter)\b.* (?:is|are) not finite", text)
    return "step %s" % m.group(1) if m else None


def run_all(args, runs, ctx):
    """Runs one after the other, or --jobs at a time (for --quick)."""
    def one(i):
        seconds = execute(args, runs[i], i, ctx)
        res = runs[i].result
        ctx["progress"].finish(i, seconds, "diverged at " + runs[i].diverged if runs[i].diverged else
                               "%s %.4f, %.1f MB/rank" % (runs[i].suite.metric, res["final"],
                                                         (res["bytes"] + res["inject"]) / 1e6))

    if args.jobs == 1:
        for i in range(len(runs)):
            one(i)
        return
    ctx["pool"] = concurrent.futures.ThreadPoolExecutor(args.jobs)
    futures = [ctx["pool"].submit(one, i) for i in range(len(runs))]
    for f in concurrent.futures.as_completed(futures):
        f.result()  # the first failure ends the comparison


def end(proc):
    """Ends a training job (mpirun and its ranks) that is still running."""
    if proc.poll() is not None:
        return
    try:
        os.killpg(proc.pid, signal.SIGTERM)
        proc.wait(timeout=10)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
    except ProcessLookupError:
        pass


def evaluate(darknet, detector, data, cfg, weights, log):
    if detector:
        cmd = [darknet, "selsync", "map", data, cfg, weights]
    else:
        cmd = [darknet, "classifier", "valid", data, cfg, weights]
    p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, universal_newlines=True)
    with open(log, "w") as f:
        f.write("$ " + " ".join(cmd) + "\n" + p.stdout)
    if p.returncode:
        fail("evaluating %s failed:\n%s" % (weights, p.stdout[-2000:]))
    return score_in(log)


def score_in(log):
    """The score an evaluation's output (final-eval.txt) ends with."""
    text = open(log, errors="replace").read()
    vals = re.findall(r"^mAP@0\.5 = ([0-9.]+)", text, re.M) or re.findall(r"top 1: ([0-9.]+)", text)
    if not vals:
        fail("no score in %s" % log)
    return float(vals[-1])
