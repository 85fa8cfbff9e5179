"""The data files and cfgs of the runs."""
import os
import re
import subprocess
import sys

from .common import ROOT, fail, read_list, write

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
        if subprocess.call([py, os.path.join(ROOT, "scripts", "data", "prepare-fashion-mnist.py")],
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
            if subprocess.call([py, os.path.join(ROOT, "scripts", "data", "make-detection-set.py"), "--out", det_dir]
                               + opts, stdout=f, stderr=subprocess.STDOUT):
                fail("making the detection set failed:\n" + open(log).read()[-2000:])
        dvalid = read_list(os.path.join(det_dir, "valid.list"))[:args.det_eval_images]
        datas["det"] = data_file("fmnist-det", os.path.join(det_dir, "train.list"), dvalid, 10,
                                 os.path.join(det_dir, "names.txt"))
    return datas


def with_net(path, lines, net):
    """lines with the [net] section's KEY=VALUE lines replaced by net's
    values and the keys it lacks added at its end, before its blank lines."""
    net, out, section = dict(net), [], None

    def add_missing():
        at = len(out)
        while at > 0 and not out[at - 1].strip():
            at -= 1
        out[at:at] = ["%s=%s\n" % kv for kv in net.items()]
        net.clear()

    for line in lines:
        if line.strip().startswith("["):
            if section == "[net]":
                add_missing()
            section = line.strip()
        m = re.match(r"\s*([a-z_]+)\s*=", line)
        if section == "[net]" and m and m.group(1) in net:
            line = "%s=%s\n" % (m.group(1), net.pop(m.group(1)))
        out.append(line)
    if section == "[net]":
        add_missing()
    if net:
        fail("%s: no [net] section for %s" % (path, ", ".join(net)))
    return out


def base_cfg(path, steps, batch=0, ranks=0, subdivisions=0, net=None):
    """The cfg without its [selsync] section, with max_batches = steps (and
    the batch size per rank and its subdivisions, when given). ranks > 0: the linear scaling rule
    for the global batch of that many ranks, lr = cfg's lr x ranks x batch /
    cfg's batch, reached after a warm-up (burn_in) of a tenth of the steps
    unless the cfg has one. net: {KEY: VALUE} that replace (or, missing, are
    added to) the [net] section's lines, before the rest."""
    out, found, lr, cfg_batch, burn = [], False, None, None, False
    with open(path) as f:
        lines = []
        for line in f:
            if line.strip().startswith("[selsync]"):
                break
            lines.append(line)
        for line in with_net(path, lines, net or {}):
            if re.match(r"\s*max_batches\s*=", line):
                line, found = "max_batches=%d\n" % steps, True
            m = re.match(r"\s*batch\s*=\s*(\d+)", line)
            if m:
                cfg_batch = int(m.group(1))
                if batch:
                    line = "batch=%d\n" % batch
            if subdivisions and re.match(r"\s*subdivisions\s*=", line):
                line = "subdivisions=%d\n" % subdivisions
            m = re.match(r"\s*learning_rate\s*=\s*([0-9.]+)", line)
            if m and lr is None:
                lr = (float(m.group(1)), len(out))
            burn = burn or re.match(r"\s*burn_in\s*=", line) is not None
            out.append(line)
    if not found:
        fail("%s: no max_batches line in [net]" % path)
    if ranks:
        if lr is None or not cfg_batch:
            fail("%s: the linear scaling rule needs learning_rate and batch in [net]" % path)
        scaled = lr[0] * ranks * (batch or cfg_batch) / cfg_batch
        out[lr[1]] = "learning_rate=%.6g\n" % scaled + ("" if burn else "burn_in=%d\n" % max(1, steps // 10))
    return "".join(out).rstrip("\n") + "\n"


def run_cfg(args, run, cfg_path, metrics):
    s = dict(run.settings)
    s["partition"] = run.suite.partition
    if run.suite.inject:
        s["inject_alpha"] = s["inject_beta"] = 0.5
    s["seed"] = args.seed
    if getattr(args, "bn_recalibrate", None) is not None:
        s["bn_recalibrate"] = args.bn_recalibrate
    if args.eval_supported and run.eval_every:
        s["eval_every"] = run.eval_every
    s["log"] = metrics
    net = {k[4:]: s.pop(k) for k in list(s) if k.startswith("net.")}  # method keys' +net.KEY=VALUE
    body = "".join("%s=%s\n" % (k, v) for k, v in s.items())
    return (base_cfg(cfg_path, run.steps, args.batch, args.ranks if args.lr_rule == "linear" else 0,
                     getattr(args, "subdivisions", 0), net)
            + "\n[selsync]\n" + body)


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
