#!/usr/bin/python3
"""One rank of PyTorch DistributedDataParallel training of a Darknet cfg's
network on Fashion-MNIST, for scripts/bench/bench-ddp.py.

Usage: bench_ddp_worker.py CFG STEPS BATCH EVAL_EVERY HELDOUT OUT
       bench_ddp_worker.py allreduce REPS MIB...

Rank and size come from the MPI launcher's environment (mpirun is only the
launcher here); the ranks meet over gloo at MASTER_ADDR:MASTER_PORT. The
network is scripts/bench/bench_torch.py's rebuild of CFG, initialised and
trained as Darknet does it: convolution weights normal with standard
deviation sqrt(2 / fan-in), connected ones uniform in +-sqrt(2 / fan-in),
biases 0; SGD with the cfg's momentum and decay, its learning rate and
policy (constant, poly, steps) over STEPS steps of BATCH images per rank,
softmax cross-entropy averaged over the batch (Darknet scales the summed
gradient by 1/batch), each image flipped left to right with probability
1/2 (Darknet's classifier loader does so). Every rank draws its batches at random from its own
1/N of the 60000 training images (a fixed permutation, as Darknet's iid
partition); DDP averages the gradients in buckets during the backward pass.
One thread per rank (torch.set_num_threads(1)).

Rank 0 scores top-1 on the first HELDOUT t10k images every EVAL_EVERY steps
and after the last step, in eval mode (batch norm's running statistics, as
Darknet evaluates). Evaluation time is left out of the training time.
Rank 0 writes OUT: one line "eval STEP TRAIN_S TOP1" per evaluation and a
line "steps STEPS TRAIN_S" (seconds of training, wall clock).

With allreduce, the ranks time gloo's all_reduce of MIB mebibytes of
float32 instead (two untimed, then REPS timed, each after a barrier) and
rank 0 prints "allreduce MIB MEDIAN_MS" per size.
"""
import os
import sys
import time

import torch
import torch.distributed as dist
import torch.nn.functional as F
from torch.nn.parallel import DistributedDataParallel

here = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, here)
from bench_torch import Net, read_cfg  # noqa: E402

SOURCE = "/usr/share/datasets/fashion-mnist"


def read_idx(path):
    import gzip
    import struct
    with gzip.open(path, "rb") as f:
        data = f.read()
    ndim = data[3]
    dims = struct.unpack(">%dI" % ndim, data[4:4 + 4 * ndim])
    return dims, data[4 + 4 * ndim:]


def load(prefix, limit=None):
    """Images as floats in [0, 1], grey repeated on 3 channels (Darknet loads
    the PNGs as RGB), and labels."""
    (n, rows, cols), pixels = read_idx(os.path.join(SOURCE, prefix + "-images-idx3-ubyte.gz"))
    _, labels = read_idx(os.path.join(SOURCE, prefix + "-labels-idx1-ubyte.gz"))
    n = min(n, limit) if limit else n
    x = torch.frombuffer(bytearray(pixels[:n * rows * cols]), dtype=torch.uint8).float().div_(255)
    x = x.view(n, 1, rows, cols).expand(n, 3, rows, cols).contiguous()
    y = torch.frombuffer(bytearray(labels[:n]), dtype=torch.uint8).long()
    return x, y


def darknet_init(model):
    for m in model.modules():
        if isinstance(m, torch.nn.Conv2d):
            fan_in = m.in_channels // m.groups * m.kernel_size[0] * m.kernel_size[1]
            torch.nn.init.normal_(m.weight, 0.0, (2.0 / fan_in) ** 0.5)
        elif isinstance(m, torch.nn.Linear):
            s = (2.0 / m.in_features) ** 0.5
            torch.nn.init.uniform_(m.weight, -s, s)
        else:
            continue
        if m.bias is not None:
            torch.nn.init.zeros_(m.bias)


def rate(netp, step, steps):
    lr = float(netp.get("learning_rate", 0.001))
    policy = netp.get("policy", "constant")
    if policy == "poly":
        return lr * (1 - step / float(steps)) ** float(netp.get("power", 4))
    if policy == "steps":
        marks = [int(v) for v in netp.get("steps", "").split(",") if v]
        scales = [float(v) for v in netp.get("scales", "").split(",") if v]
        for m, s in zip(marks, scales):
            if step >= m:
                lr *= s
    return lr


def top1(model, x, y):
    model.eval()
    right = 0
    with torch.no_grad():
        for i in range(0, len(y), 500):
            out, _ = model(x[i:i + 500])
            right += (out.argmax(1) == y[i:i + 500]).sum().item()
    model.train()
    return right / float(len(y))


def join():
    rank = int(os.environ["OMPI_COMM_WORLD_RANK"])
    world = int(os.environ["OMPI_COMM_WORLD_SIZE"])
    torch.set_num_threads(1)
    dist.init_process_group("gloo", init_method="tcp://%s:%s" % (os.environ["MASTER_ADDR"],
                                                                  os.environ["MASTER_PORT"]),
                            rank=rank, world_size=world)
    return rank, world


def allreduce(reps, sizes):
    rank, _ = join()
    for mib in sizes:
        x = torch.ones(int(mib * 262144))
        times = []
        for i in range(2 + reps):
            dist.barrier()
            t0 = time.perf_counter()
            dist.all_reduce(x)
            if i >= 2:
                times.append(time.perf_counter() - t0)
        times.sort()
        if rank == 0:
            print("allreduce %g %.3f" % (mib, 1000 * times[len(times) // 2]), flush=True)
    dist.destroy_process_group()


def main():
    if sys.argv[1] == "allreduce":
        return allreduce(int(sys.argv[2]), [float(v) for v in sys.argv[3:]])
    cfg, steps, batch, every, heldout, out_path = sys.argv[1:7]
    steps, batch, every, heldout = int(steps), int(batch), int(every), int(heldout)
    rank, world = join()
    torch.manual_seed(1)  # the same initial weights on every rank (DDP also broadcasts rank 0's)
    sections = read_cfg(cfg)
    netp = sections[0][1]
    net = Net(sections)
    darknet_init(net)
    model = DistributedDataParallel(net)
    opt = torch.optim.SGD(model.parameters(), lr=rate(netp, 0, steps),
                          momentum=float(netp.get("momentum", 0.9)),
                          weight_decay=float(netp.get("decay", 0.0001)))
    x, y = load("train")
    order = torch.randperm(len(y), generator=torch.Generator().manual_seed(7))
    mine = order[rank * len(y) // world:(rank + 1) * len(y) // world]
    vx, vy = load("t10k", heldout) if rank == 0 else (None, None)
    draw = torch.Generator().manual_seed(100 + rank)
    lines, train_s = [], 0.0
    model.train()
    for step in range(steps):
        t0 = time.perf_counter()
        pick = mine[torch.randint(len(mine), (batch,), generator=draw)]
        for g in opt.param_groups:
            g["lr"] = rate(netp, step, steps)
        batch_x = x[pick]
        flip = torch.rand(batch, generator=draw) < 0.5
        batch_x[flip] = batch_x[flip].flip(3)
        out, _ = model(batch_x)
        loss = F.cross_entropy(out, y[pick])
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        train_s += time.perf_counter() - t0
        if rank == 0 and ((step + 1) % every == 0 or step + 1 == steps):
            lines.append("eval %d %.6f %.6f" % (step + 1, train_s, top1(model.module, vx, vy)))
    if rank == 0:
        lines.append("steps %d %.6f" % (steps, train_s))
        with open(out_path, "w") as f:
            f.write("\n".join(lines) + "\n")
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
