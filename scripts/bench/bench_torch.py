#!/usr/bin/python3
"""Training throughput of a Darknet cfg's network rebuilt in PyTorch.

Usage: bench_torch.py CFG STEPS WARMUP THREADS

Reads the layers of a Darknet cfg (convolutional, connected, maxpool,
avgpool, dropout, softmax, route, shortcut, upsample, yolo), builds the same
network with torch.nn (Darknet's padding, leaky slope 0.1, batch norm
without a convolution bias), trains it with SGD (momentum and decay of the
cfg) on fixed pseudo-random images and one-hot targets, and prints
"N images/s" like bench_train. A [yolo] layer is replaced by a squared error
on its sigmoid-activated input (its cost in Darknet is small next to the
convolutions). Needs Debian's python3-torch; run with /usr/bin/python3.
"""
import sys
import time

import torch
from torch import nn
import torch.nn.functional as F


def read_cfg(path):
    sections = []
    with open(path) as f:
        for raw in f:
            line = "".join(raw.split())
            if not line or line[0] in "#;":
                continue
            if line[0] == "[":
                sections.append((line.strip("[]"), {}))
            else:
                key, _, value = line.partition("=")
                sections[-1][1][key] = value
    return sections


def act(name):
    return {"leaky": nn.LeakyReLU(0.1), "linear": nn.Identity(), "relu": nn.ReLU(),
            "logistic": nn.Sigmoid(), "tanh": nn.Tanh()}[name]


class DarknetMaxPool(nn.Module):
    """Darknet's maxpool: output (w + padding - size) / stride + 1, padding
    (default size - 1) split as padding / 2 before and the rest after."""

    def __init__(self, size, stride, padding):
        super().__init__()
        self.size, self.stride, self.padding = size, stride, padding

    def forward(self, x):
        lo = self.padding // 2
        hi = self.padding - lo
        if lo or hi:
            x = F.pad(x, (lo, hi, lo, hi), value=float("-inf"))
        return F.max_pool2d(x, self.size, self.stride)


class Net(nn.Module):
    def __init__(self, sections):
        super().__init__()
        netp = sections[0][1]
        c = int(netp.get("channels", 3))
        h = int(netp.get("height", 0))
        w = int(netp.get("width", 0))
        self.input_shape = (c, h, w)
        self.layers = nn.ModuleList()
        self.kinds, self.args = [], []
        shapes = []
        for kind, p in sections[1:]:
            arg = None
            if kind in ("convolutional", "conv"):
                n = int(p.get("filters", 1))
                size = int(p.get("size", 1))
                stride = int(p.get("stride", 1))
                pad = int(p.get("padding", 0))
                if int(p.get("pad", 0)):
                    pad = size // 2
                groups = int(p.get("groups", 1))
                bn = int(p.get("batch_normalize", 0))
                mods = [nn.Conv2d(c, n, size, stride, pad, groups=groups, bias=not bn)]
                if bn:
                    mods.append(nn.BatchNorm2d(n, eps=1e-5, momentum=0.01))
                mods.append(act(p.get("activation", "logistic")))
                mod = nn.Sequential(*mods)
                h = (h + 2 * pad - size) // stride + 1
                w = (w + 2 * pad - size) // stride + 1
                c = n
            elif kind in ("maxpool", "max"):
                size = int(p.get("size", 1))
                stride = int(p.get("stride", 1))
                padding = int(p.get("padding", size - 1))
                mod = DarknetMaxPool(size, stride, padding)
                h = (h + padding - size) // stride + 1
                w = (w + padding - size) // stride + 1
            elif kind in ("avgpool", "avg"):
                mod = nn.AdaptiveAvgPool2d(1)
                h = w = 1
            elif kind in ("dropout",):
                mod = nn.Dropout(float(p.get("probability", 0.5)))
            elif kind in ("connected", "conn"):
                n = int(p.get("output", 1))
                bn = int(p.get("batch_normalize", 0))
                mods = [nn.Flatten(), nn.Linear(c * h * w, n, bias=not bn)]
                if bn:
                    mods.append(nn.BatchNorm1d(n, eps=1e-5, momentum=0.01))
                mods.append(act(p.get("activation", "logistic")))
                mod = nn.Sequential(*mods)
                c, h, w = n, 1, 1
            elif kind in ("softmax", "soft"):
                mod = nn.Flatten()
            elif kind == "upsample":
                s = int(p.get("stride", 2))
                mod = nn.Upsample(scale_factor=s, mode="nearest")
                h, w = h * s, w * s
            elif kind == "route":
                idx = [int(v) for v in p["layers"].split(",")]
                idx = [i if i >= 0 else len(shapes) + i for i in idx]
                arg = idx
                c = sum(shapes[i][0] for i in idx)
                h, w = shapes[idx[0]][1], shapes[idx[0]][2]
                mod = nn.Identity()
            elif kind == "shortcut":
                i = int(p["from"])
                arg = i if i >= 0 else len(shapes) + i
                mod = act(p.get("activation", "linear"))
            elif kind == "yolo":
                mod = nn.Sigmoid()
            else:
                raise SystemExit("bench_torch.py: unsupported section [%s]" % kind)
            self.layers.append(mod)
            self.kinds.append(kind)
            self.args.append(arg)
            shapes.append((c, h, w))

    def forward(self, x):
        outs, heads = [], []
        for mod, kind, arg in zip(self.layers, self.kinds, self.args):
            if kind == "route":
                x = torch.cat([outs[i] for i in arg], 1) if len(arg) > 1 else outs[arg[0]]
            elif kind == "shortcut":
                x = mod(x + outs[arg])
            else:
                x = mod(x)
            if kind == "yolo":
                heads.append(x)
            outs.append(x)
        return x, heads


def main():
    cfg, steps, warmup, threads = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
    torch.set_num_threads(threads)
    torch.manual_seed(1)
    sections = read_cfg(cfg)
    netp = sections[0][1]
    batch = int(netp.get("batch", 1))
    model = Net(sections)
    # Darknet divides the rate by the batch; a small rate keeps the loss on
    # random targets finite (the speed does not depend on it)
    opt = torch.optim.SGD(model.parameters(), lr=float(netp.get("learning_rate", 0.001)) / 100,
                          momentum=float(netp.get("momentum", 0.9)),
                          weight_decay=float(netp.get("decay", 0.0001)))
    x = torch.rand((batch,) + model.input_shape)
    model.train()
    y = None
    for i in range(warmup + steps):
        if i == warmup:
            t0 = time.perf_counter()
        out, heads = model(x)
        if heads:
            loss = sum(((hd - 0.5) ** 2).sum() for hd in heads) / batch
        else:
            if y is None:
                y = torch.arange(batch) % out.shape[1]
            loss = F.cross_entropy(out, y)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
    dt = time.perf_counter() - t0
    print("%.2f images/s (%d batches of %d in %.2f s, last loss %.4f)"
          % (steps * batch / dt, steps, batch, dt, loss.item()))


if __name__ == "__main__":
    main()
