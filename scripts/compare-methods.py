#!/usr/bin/env python3
"""Reproduce the paper's comparison: every method on every data setting, at one
rank count and one step budget, then a table in the shape of the paper's
Table I and plots.

Usage: scripts/compare-methods.py [--quick] [options]

Methods: bsp; fedavg every S/4 and every S/8 steps, and C = 0.5 every S/4;
ssp with staleness 100 and 200; local SGD; selsync with delta 0.3 and 0.5,
whole-model and per-layer. Settings (suites):
  iid           cfg/fmnist.cfg, disjoint iid shards
  seldp         cfg/fmnist.cfg, SelDP (every rank reads all chunks in turn)
  label         cfg/fmnist.cfg, K classes per rank (label:K)
  label-inject  the same with data injection (0.5, 0.5); all methods but ssp
  det           the Fashion-MNIST detection set with cfg/fmnist-det.cfg (mAP@0.5)
  wide          cfg/fmnist-wide.cfg (about 12 MB of parameters), iid shards
Every run starts from the same seed, trains for the same number of steps and
is evaluated every K steps on held-out images (top-1, or mAP@0.5 for the
detector) and once more after training on the final model.

Network: by default every rank runs on its own emulated host (network
namespaces joined by links shaped to --bandwidth, see
scripts/emulated-cluster.sh), and BSP and SelSync (delta 0.3) run once more
in plain shared memory. Where namespaces are not permitted the runs use
shared memory and the tables give the communication time modelled from the
measured bytes instead, saying so. The emulated hosts are removed on every
exit, also on failure or Ctrl-C.

Output: RESULTS/<date>-<ranks>ranks-<bandwidth>-<steps>steps[-quick]/ with
comparison.md (the tables), summary.tsv, plots/*.png, and per run the exact
cfg, Darknet's output and the per-rank metrics files (runs/SUITE/RUN/).
"""
import argparse
import concurrent.futures
import math
import os
import platform
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
CLUSTER = os.path.join(ROOT, "scripts", "emulated-cluster.sh")
SUITES = ["iid", "seldp", "label", "label-inject", "det", "wide"]
# emulated: every rank on its own emulated host; shm: shared memory;
# modelled: shared memory, communication time modelled from the bytes
NETWORKS = ("emulated", "shm", "modelled")


class Failure(Exception):
    """A run or a preparation step failed; the message says which and why."""


def fail(msg):
    raise Failure(msg)


# --- what runs -----------------------------------------------------------------

def methods(steps):
    """(key, label, [selsync] settings) of every method, for a step budget."""
    a = max(2, steps // 4)
    b = a // 2
    out = [("bsp", "BSP", {"method": "bsp"}),
           ("fedavg-%d" % a, "FedAvg, every %d" % a, {"method": "fedavg", "fedavg_interval": a}),
           ("fedavg-%d" % b, "FedAvg, every %d" % b, {"method": "fedavg", "fedavg_interval": b}),
           ("fedavg-%d-c0.5" % a, "FedAvg C=0.5, every %d" % a,
            {"method": "fedavg", "fedavg_interval": a, "fedavg_fraction": 0.5}),
           ("ssp-100", "SSP s=100", {"method": "ssp", "ssp_staleness": 100}),
           ("ssp-200", "SSP s=200", {"method": "ssp", "ssp_staleness": 200}),
           ("local", "local SGD", {"method": "local"})]
    for gran in ("model", "layer"):
        for d in ("0.3", "0.5"):
            key = "selsync-%s%s" % (d, "-layer" if gran == "layer" else "")
            label = "SelSync δ=%s%s" % (d, ", per layer" if gran == "layer" else "")
            out.append((key, label, {"method": "selsync", "delta": d, "granularity": gran}))
    return out


class Suite:
    def __init__(self, key, title, kind, partition, inject=False):
        self.key, self.title, self.kind, self.partition, self.inject = key, title, kind, partition, inject
        self.detector = kind == "det"
        self.metric = "mAP@0.5" if self.detector else "top-1"


def suites(args):
    k = args.classes_per_rank
    return {
        "iid": Suite("iid", "Fashion-MNIST, iid shards", "small", "iid"),
        "seldp": Suite("seldp", "Fashion-MNIST, SelDP", "small", "seldp"),
        "label": Suite("label", "Fashion-MNIST, %d class%s per rank" % (k, "" if k == 1 else "es"),
                       "small", "label:%d" % k),
        "label-inject": Suite("label-inject", "Fashion-MNIST, %d class%s per rank, injection (0.5, 0.5)"
                              % (k, "" if k == 1 else "es"), "small", "label:%d" % k, inject=True),
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
        ms = methods(steps)
        if args.quick and skey != "iid":
            # quick: one method of each kind beyond the iid setting
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


# --- data and cfgs ---------------------------------------------------------------

def read_list(path):
    with open(path) as f:
        return [line.strip() for line in f if line.strip()]


def write(path, text):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w") as f:
        f.write(text)


def class_of(path):
    m = re.search(r"_c(\d+)_", os.path.basename(path))
    return int(m.group(1)) if m else None


def prepare_data(args, out, work):
    """Writes the evaluation lists (and in quick mode the training slices)
    into out/data; returns the .data text (without backup=) of every suite."""
    py = sys.executable
    log = os.path.join(work, "prepare.log")
    fm = os.path.join(ROOT, "data", "fashion-mnist")
    with open(log, "a") as f:
        if subprocess.call([py, os.path.join(ROOT, "scripts", "prepare-fashion-mnist.py")],
                           stdout=f, stderr=subprocess.STDOUT):
            fail("preparing Fashion-MNIST failed:\n" + open(log).read()[-2000:])
    valid = read_list(os.path.join(fm, "valid.list"))
    d = os.path.join(out, "data")
    datas = {}

    def data_file(name, train_list, valid_list, classes, names, extra=""):
        if args.train_images:
            sliced = os.path.join(d, name + ".train.list")
            write(sliced, "\n".join(read_list(train_list)[:args.train_images]) + "\n")
            train_list = sliced
        write(os.path.join(d, name + ".eval.list"), "\n".join(valid_list) + "\n")
        # each run writes this with its own backup= line (where its weights go)
        return ("classes=%d\ntrain=%s\nvalid=%s\n%snames=%s\n"
                % (classes, train_list, os.path.join(d, name + ".eval.list"), extra, names))

    # the first images of the held-out list (it is in the source's order, which
    # mixes the classes); quick mode trains on a slice of the train list
    ev = valid[:args.eval_images]
    labels, names = os.path.join(fm, "labels.txt"), os.path.join(fm, "names.txt")
    tr = os.path.join(fm, "train.list")
    fm_data = data_file("fmnist", tr, ev, 10, names, "labels=%s\n" % labels)
    k = args.classes_per_rank
    held = sorted({(r * k + j) % 10 for r in range(args.ranks) for j in range(k)})
    ev_label = [p for p in valid if class_of(p) in held][:args.eval_images]
    label_data = data_file("fmnist-label", tr, ev_label, 10, names, "labels=%s\n" % labels)
    for s in ("iid", "seldp", "wide"):
        datas[s] = fm_data
    datas["label"] = datas["label-inject"] = label_data
    if "det" in args.suites:
        det_dir = os.path.join(ROOT, "data", "fmnist-det")
        opts = []
        if args.quick:
            det_dir = os.path.join(work, "fmnist-det")
            opts = ["--train", "64", "--valid", "16"]
        with open(log, "a") as f:
            if subprocess.call([py, os.path.join(ROOT, "scripts", "make-detection-set.py"), "--out", det_dir]
                               + opts, stdout=f, stderr=subprocess.STDOUT):
                fail("making the detection set failed:\n" + open(log).read()[-2000:])
        dvalid = read_list(os.path.join(det_dir, "valid.list"))[:args.det_eval_images]
        datas["det"] = data_file("fmnist-det", os.path.join(det_dir, "train.list"), dvalid, 10,
                                 os.path.join(det_dir, "names.txt"))
    return datas


def base_cfg(path, steps, batch=0):
    """The cfg without its [selsync] section, with max_batches = steps (and
    the batch size, when given)."""
    out, found = [], False
    with open(path) as f:
        for line in f:
            if line.strip().startswith("[selsync]"):
                break
            if re.match(r"\s*max_batches\s*=", line):
                line, found = "max_batches=%d\n" % steps, True
            if batch and re.match(r"\s*batch\s*=", line):
                line = "batch=%d\n" % batch
            out.append(line)
    if not found:
        fail("%s: no max_batches line in [net]" % path)
    return "".join(out).rstrip("\n") + "\n"


def run_cfg(args, run, cfg_path, metrics):
    s = dict(run.settings)
    s["partition"] = run.suite.partition
    if run.suite.inject:
        s["inject_alpha"] = s["inject_beta"] = 0.5
    s["seed"] = args.seed
    if args.eval_supported and run.eval_every:
        s["eval_every"] = run.eval_every
    s["log"] = metrics
    body = "".join("%s=%s\n" % (k, v) for k, v in s.items())
    return base_cfg(cfg_path, run.steps, args.batch) + "\n[selsync]\n" + body


def probe_eval_every(work, darknet):
    """True when this build accepts eval_every in [selsync]."""
    cfg = os.path.join(work, "probe.cfg")
    write(cfg, base_cfg(os.path.join(ROOT, "cfg", "fmnist-tiny.cfg"), 1) + "\n[selsync]\neval_every=1\n")
    one = os.path.join(work, "probe.list")
    write(one, read_list(os.path.join(ROOT, "data", "fashion-mnist", "valid.list"))[0] + "\n")
    data = os.path.join(work, "probe.data")
    write(data, "classes=10\ntrain=%s\nvalid=%s\nlabels=%s\nbackup=%s\n"
          % (one, one, os.path.join(ROOT, "data", "fashion-mnist", "labels.txt"), work))
    p = subprocess.run([darknet, "classifier", "valid", data, cfg], stdout=subprocess.PIPE,
                       stderr=subprocess.STDOUT, universal_newlines=True)
    if "eval_every" in p.stdout and "not available" in p.stdout:
        return False
    if p.returncode:
        fail("could not check the build's [selsync] keys:\n" + p.stdout[-2000:])
    return True


# --- running ---------------------------------------------------------------------

class Cluster:
    """The emulated hosts (network namespaces); removed by close()."""

    def __init__(self, hosts, rate):
        self.name = "cmp%d" % (os.getpid() % 100000)
        self.hosts, self.rate, self.up = hosts, rate, False

    def start(self):
        self.up = True  # down is harmless when up failed half-way
        p = subprocess.run(["sh", CLUSTER, "up", self.name, str(self.hosts), self.rate],
                           stdout=subprocess.PIPE, stderr=subprocess.STDOUT, universal_newlines=True)
        if p.returncode:
            fail("could not create the emulated hosts:\n" + p.stdout)

    def close(self):
        if self.up:
            subprocess.call(["sh", CLUSTER, "down", self.name])
            self.up = False


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


def clock(s):
    s = int(round(s))
    return "%d:%02d:%02d" % (s // 3600, s // 60 % 60, s % 60) if s >= 3600 else "%d:%02d" % (s // 60, s % 60)


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
    train = [ctx["darknet"], mode, "train", data, cfg]
    if run.net == "emulated":
        cmd = ["sh", CLUSTER, "mpirun", ctx["cluster"].name, "-np", str(args.ranks)] + train
    else:
        cmd = ["mpirun", "-np", str(args.ranks), "--oversubscribe"] + train
    watch = os.path.join(rdir, "metrics.%d.tsv" % (1 if run.ssp else 0))
    start = time.time()
    with open(os.path.join(rdir, "output.txt"), "w") as log:
        log.write("$ " + " ".join(cmd) + "\n")
        log.flush()
        if ctx["stop"]:
            fail("stopped")
        proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
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


def diverged(rdir):
    """'step N' when the run's training stopped on a non-finite loss or
    gradient (the plugin ends the job then), else None."""
    try:
        text = open(os.path.join(rdir, "output.txt"), errors="replace").read()
    except OSError:
        return None
    m = re.search(r"step (\d+): rank \d+: the loss .* is not finite; stopping", text)
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


# --- metrics -------------------------------------------------------------------------

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
    rep = ranks[trainers[0]][0]
    res["rows"] = rep  # the first training rank's steps: delta plot, modelled times
    # time axis: training time at each step of the first training rank
    t, cum = 0.0, []
    for x in rep:
        if run.net == "modelled":
            t += x["t_compute"] + x["t_measure"] + modelled_comm(args, x)
        else:
            t += x["t_compute"] + x["t_measure"] + x["t_agree"] + x["t_transfer"]
        cum.append(t)
    res["cum"] = cum
    res["modelled"] = run.net == "modelled"
    if res["modelled"]:
        res["model_comm"] = sum(modelled_comm(args, x) for r in trainers for x in ranks[r][0]) / n
    return res


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
        sec = time_at(res, e["step"]) if res["modelled"] or "train_s" not in e else e["train_s"]
        pts.append((e["step"], sec, val))
    if not pts or pts[-1][0] < res["steps"]:
        pts.append((res["steps"], res["cum"][-1] if res["cum"] else 0.0, res["final"]))
    return pts


# --- report ---------------------------------------------------------------------------

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
    comm = "modelled communication" if net == "modelled" else "time in communication"
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
        total = res["cum"][-1] if res["cum"] else 0.0
        lines.append("| %s | %.4f | %s | %s | %s | %s | %.1f s | %.1f s |"
                     % (r.label, res["final"], fmt_time(t) if target is not None else "no target", sp, loc, mbs, c,
                        total))
    for r in runs:
        if r.suite is suite and r.net == net and r.diverged:
            lines.append("| %s | diverged (loss not finite at %s) | | | | | | |" % (r.label, r.diverged))
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
    return "emulated hosts, %s links" % args.bandwidth


def plots(args, out, runs, all_suites, gnuplot):
    pdir = os.path.join(out, "plots")
    os.makedirs(pdir, exist_ok=True)
    made = []

    def gp(name, script):
        path = os.path.join(pdir, name + ".gp")
        write(path, "set terminal pngcairo size 1000,600 noenhanced font ',10'\nset output '%s.png'\n%s"
              % (name, script))
        p = subprocess.run([gnuplot, name + ".gp"], cwd=pdir, stdout=subprocess.PIPE,
                           stderr=subprocess.STDOUT, universal_newlines=True)
        if p.returncode or not os.path.exists(os.path.join(pdir, name + ".png")):
            fail("gnuplot failed on %s:\n%s" % (path, p.stdout[-2000:]))
        made.append(name + ".png")

    def q(s):
        return "'" + s.replace("'", "") + "'"

    for skey in args.suites:
        s = all_suites[skey]
        for net in NETWORKS:
            done = [r for r in runs if r.suite is s and r.net == net and r.result]
            if len(done) < 2:
                continue
            tag = "%s-%s" % (skey, net)
            # accuracy vs training time
            plotcmd = []
            for r in done:
                dat = "acc-%s-%s.dat" % (tag, r.key)
                write(os.path.join(pdir, dat), "".join("%d\t%.4f\t%.6f\n" % p for p in curve(args, r.result)))
                plotcmd.append("%s using 2:3 with linespoints title %s" % (q(dat), q(r.label)))
            gp("accuracy-" + tag, "set title %s\nset xlabel 'training time (s)%s'\nset ylabel 'held-out %s'\n"
               "set key outside right\nset grid\nplot %s\n"
               % (q("%s, %d ranks, %s" % (s.title, args.ranks, net_label(args, net))),
                  ", modelled" if net == "modelled" else "", s.metric, ", ".join(plotcmd)))
            # bytes per method
            dat = "bytes-%s.dat" % tag
            write(os.path.join(pdir, dat), "".join(
                "%s\t%.4f\t%.4f\n" % (q(r.label).replace("'", '"'), r.result["bytes"] / 1e6, r.result["inject"] / 1e6)
                for r in done))
            gp("bytes-" + tag, "set title %s\nset ylabel 'MB sent per rank'\nset style data histograms\n"
               "set style histogram rowstacked\nset style fill solid 0.8 border -1\nset boxwidth 0.7\n"
               "set xtics rotate by -30\nset grid ytics\nset key top right\n"
               "plot %s using 2:xtic(1) title 'synchronisation', '' using 3 title 'injection'\n"
               % (q("bytes sent per rank: %s, %d ranks, %d steps" % (s.title, args.ranks, done[0].steps)), q(dat)))
            # delta over steps, with the threshold and the synchronised steps
            sel = [r for r in done if r.settings["method"] == "selsync"]
            if sel:
                parts = ["set multiplot layout %d,1 title %s" % (len(sel), q("Δ over steps: " + s.title))]
                for r in sel:
                    dat = "delta-%s-%s.dat" % (tag, r.key)
                    write(os.path.join(pdir, dat), "".join(
                        "%d\t%s\t%d\n" % (x["step"], repr(x["change"]) if math.isfinite(x["change"]) else "NaN",
                                          x["decision"] == "sync") for x in r.result["rows"]))
                    d = float(r.settings["delta"])
                    parts.append("set title %s\nset logscale y\nset grid\nset ylabel 'Δ'\nset xlabel 'step'\n"
                                 "set key outside right\n"
                                 "plot %s using 1:2 with lines lc rgb '#888888' title 'Δ (whole model)', "
                                 "%g with lines lw 2 lc rgb 'red' title 'δ = %g', "
                                 "%s using 1:($3 > 0 ? $2 : 1/0) with points pt 7 ps 0.5 lc rgb 'blue' "
                                 "title 'synchronised'\nunset logscale y\n"
                                 % (q(r.label), q(dat), d, d, q(dat)))
                parts.append("unset multiplot")
                gp("delta-" + tag, "set terminal pngcairo size 1000,%d noenhanced font ',10'\nset output 'delta-%s.png'\n%s\n"
                   % (260 * len(sel) + 60, tag, "\n".join(parts)))
    # non-IID: final accuracy without and with injection
    for net in NETWORKS:
        a = {r.key: r for r in runs if r.suite.key == "label" and r.net == net and r.result}
        b = {r.key: r for r in runs if r.suite.key == "label-inject" and r.net == net and r.result}
        keys = [k for k in a if k in b]
        if not keys:
            continue
        dat = "noniid-%s.dat" % net
        write(os.path.join(pdir, dat), "".join('"%s"\t%.4f\t%.4f\n' % (a[k].label, a[k].result["final"],
                                                                    b[k].result["final"]) for k in keys))
        gp("noniid-" + net, "set title %s\nset ylabel 'held-out top-1 (classes held by the ranks)'\n"
           "set style data histograms\nset style histogram clustered gap 1\nset style fill solid 0.8 border -1\n"
           "set xtics rotate by -30\nset yrange [0:1]\nset grid ytics\nset key top right\n"
           "plot %s using 2:xtic(1) title 'without injection', '' using 3 title 'with injection (0.5, 0.5)'\n"
           % (q("skewed data (%d classes per rank, %d ranks): final accuracy" % (args.classes_per_rank, args.ranks)),
              q(dat)))
    return made


def machine():
    cpu = "unknown CPU"
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    cpu = line.split(":", 1)[1].strip()
                    break
    except OSError:
        pass
    mpi = subprocess.run(["mpirun", "--version"], stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                         universal_newlines=True).stdout.splitlines()
    return "%s, %d cores, Linux %s, %s" % (cpu, os.cpu_count() or 0, platform.release(),
                                           mpi[0] if mpi else "mpirun")


def report(args, out, runs, all_suites, made, info):
    """comparison.md and summary.tsv; info: command, started, took, machine,
    cluster (the emulated hosts' name) and note (run-info.txt)."""
    note = info.get("note", "")
    lines = ["# Method comparison", "",
             "Command: `%s`  " % info["command"],
             "Started %s UTC, took %s. Machine: %s.  " % (info["started"], info["took"], info["machine"]),
             "%d ranks; %d steps per run (detector: %d), held-out evaluation every %s steps "
             "(detector: every %s) on %d images (detector: %d) and once more on the final model; seed %d."
             % (args.ranks, args.steps, args.det_steps, args.eval_every if args.eval_supported else "-",
                args.det_eval_every if args.eval_supported else "-", args.eval_images, args.det_eval_images,
                args.seed), ""]
    if note:
        lines += ["**%s**" % note, ""]
    elif info.get("cluster"):
        lines += ["Network: every rank on its own emulated host (network namespaces %s-h0 .. %s-h%d, removed "
                  "afterwards), links to a bridge shaped to %s with tbf, TCP between the hosts; the shared-memory "
                  "runs use one host." % (info["cluster"], info["cluster"], args.ranks - 1, args.bandwidth), ""]
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
            "\tcompute_s\tcomm_s\ttraining_s"]
    for r in runs:
        if r.result:
            res = r.result
            rows.append("%s\t%s\t%s\t%.4f\t%d\t%s\t%.0f\t%.0f\t%.3f\t%.3f\t%.3f" % (
                r.suite.key, r.net, r.key, res["final"], res["steps"],
                "" if res["local"] is None else "%.4f" % res["local"], res["bytes"], res["inject"],
                res["compute"], res["model_comm"] if r.net == "modelled" else res["comm"],
                res["cum"][-1] if res["cum"] else 0))
        elif r.diverged:
            rows.append("%s\t%s\t%s\tdiverged at %s\t\t\t\t\t\t\t" % (r.suite.key, r.net, r.key, r.diverged))
    write(os.path.join(out, "summary.tsv"), "\n".join(rows) + "\n")


# --- main ---------------------------------------------------------------------------------

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
    p.add_argument("--jobs", type=int, help="runs at the same time (default 1; quick 4); more than 1 "
                   "distorts the times, so only for checking the pipeline")
    p.add_argument("--run-timeout", type=int, help="seconds after which a run counts as failed "
                   "(default 3600; quick 300)")
    p.add_argument("--seed", type=int, default=1, help="[selsync] seed of every run (default 1)")
    p.add_argument("--results", default=os.path.join(ROOT, "results"), help="parent folder of the results")
    p.add_argument("--report", metavar="DIR", help="only rebuild the tables and plots of the results folder DIR "
                   "(give the options it was made with)")
    p.add_argument("--det-cfg", default=os.path.join(ROOT, "cfg", "fmnist-det.cfg"), help=argparse.SUPPRESS)
    a = p.parse_args(argv)
    q = a.quick
    # quick: small batches, so that a run costs little more than its start
    a.batch = 8 if q else 0
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
    known = [k for k, _, _ in methods(a.steps)] + [k for k, _, _ in methods(a.det_steps)]
    a.methods = [m for m in a.methods.split(",") if m]
    a.shm_methods = [] if a.shm_methods == "none" else [m for m in a.shm_methods.split(",") if m]
    for m in a.methods + a.shm_methods:
        if m not in known:
            p.error("unknown method '%s'; methods: %s" % (m, ", ".join(dict.fromkeys(known))))
    if a.ranks < 2:
        p.error("--ranks must be at least 2")
    if a.classes_per_rank < 1 or a.classes_per_rank > 10:
        p.error("--classes-per-rank must be 1..10")
    a.bandwidth, a.bandwidth_bytes = a.bandwidth
    return a


def rebuild(args, gnuplot):
    """--report DIR: the tables and plots again from DIR's run folders."""
    out = os.path.abspath(args.report)
    info = {}
    try:
        with open(os.path.join(out, "run-info.txt")) as f:
            info = dict(line.rstrip("\n").split("=", 1) for line in f if "=" in line)
    except OSError:
        fail("%s/run-info.txt is missing: not a results folder of this script" % out)
    net_main = "emulated" if info.get("cluster") else "modelled"
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
    command = " ".join(["scripts/compare-methods.py"] + argv)
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
    if args.no_emulation:
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
                                        args.bandwidth if net_main == "emulated" else "shm-modelled-" + args.bandwidth,
                                        args.steps, "-quick" if args.quick else "")
    out = os.path.join(os.path.abspath(args.results), name)
    os.makedirs(out)
    work = tempfile.mkdtemp(prefix="compare-methods.")
    cluster = Cluster(args.ranks, args.bandwidth) if net_main == "emulated" else None
    ctx = {"out": out, "work": work, "darknet": darknet, "cluster": cluster, "procs": set(), "pool": None,
           "stop": False,
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
                "took": clock(time.time() - started), "machine": machine(),
                "cluster": cluster.name if cluster else "", "note": note}
        write(os.path.join(out, "run-info.txt"), "".join("%s=%s\n" % kv for kv in info.items()))
        report(args, out, runs, all_suites, made, info)
        print("compare-methods: %d runs in %s; table: %s" % (len(runs), clock(time.time() - started),
                                                           os.path.join(out, "comparison.md")), file=sys.stderr)
        return 0
    finally:
        ctx["stop"] = True
        for proc in list(ctx["procs"]):
            end(proc)
        if ctx["pool"]:
            ctx["pool"].shutdown(wait=True, cancel_futures=True)
        if cluster:
            cluster.close()
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    try:
        sys.exit(main(sys.argv[1:]))
    except Failure as e:
        print("\ncompare-methods: error: %s" % e, file=sys.stderr)
        sys.exit(1)
    except KeyboardInterrupt:
        print("\ncompare-methods: interrupted; emulated hosts removed", file=sys.stderr)
        sys.exit(130)
