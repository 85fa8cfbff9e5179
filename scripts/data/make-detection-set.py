#!/usr/bin/env python3
"""Compose a small object-detection set for Darknet from Debian's Fashion-MNIST
(package dataset-fashion-mnist), using only the Python standard library.

Each canvas is a black SIZExSIZE greyscale PNG holding 1..K Fashion-MNIST
items (train canvases from the train split, valid canvases from t10k), each
scaled by nearest neighbour to a random side of 20..40 px and pasted at a
random position (pixel = max of overlapping items; boxes overlap with IoU <
0.3).  A box is the tight bounding box of the item's non-zero pixels.

Output (default: <repository>/data/fmnist-det), in Darknet's convention:
  images/{train,valid}/NNNNN.png   canvases
  labels/{train,valid}/NNNNN.txt   "class cx cy w h" per item, normalised
  train.list, valid.list           absolute image paths
  names.txt                        the 10 class names
  fmnist-det.data                  Darknet .data file; backup/ for weights
The output is a pure function of the options and the sources: the same seed
gives byte-identical files.  A stamp records the parameters and source CRCs,
and a run whose stamp matches (and whose files all exist) does nothing.
"""
import argparse
import importlib.util
import os
import random
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
_spec = importlib.util.spec_from_file_location("prepare", os.path.join(HERE, "prepare-fashion-mnist.py"))
prepare = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(prepare)

SPLITS = [("train", "train"), ("valid", "t10k")]  # (output split, source prefix)
STAMP = ".made"
VERSION = 1
MIN_SIDE, MAX_SIDE, MAX_IOU, TRIES = 20, 40, 0.3, 10
# Substrings Darknet (and the SelSync plugin) rewrite when turning an image path
# into a label path; OUT must not contain any of them.
REWRITTEN = ["images", "labels", "JPEGImages", "raw", ".jpg", ".png", ".JPG", ".JPEG"]


def fail(msg):
    sys.exit("make-detection-set: error: " + msg)


def iou(a, b):
    iw = min(a[2], b[2]) - max(a[0], b[0])
    ih = min(a[3], b[3]) - max(a[1], b[1])
    if iw <= 0 or ih <= 0:
        return 0.0
    inter = iw * ih
    return inter / ((a[2] - a[0]) * (a[3] - a[1]) + (b[2] - b[0]) * (b[3] - b[1]) - inter)


def canvas(rng, size, max_items, pixels, classes):
    """Return (PNG bytes, label text) of one random canvas."""
    img, boxes, lines = bytearray(size * size), [], []
    for _ in range(rng.randint(1, max_items)):
        idx = rng.randrange(len(classes))
        side = rng.randint(MIN_SIDE, min(MAX_SIDE, size))
        item = pixels[idx * 784:(idx + 1) * 784]
        rows = [bytes(item[(y * 28 // side) * 28 + x * 28 // side] for x in range(side)) for y in range(side)]
        ys = [y for y in range(side) if any(rows[y])]
        if not ys:
            continue  # blank item: nothing to detect
        xs = [x for x in range(side) if any(r[x] for r in rows)]
        for _ in range(TRIES):
            x, y = rng.randint(0, size - side), rng.randint(0, size - side)
            box = (x + xs[0], y + ys[0], x + xs[-1] + 1, y + ys[-1] + 1)
            if all(iou(box, b) < MAX_IOU for b in boxes):
                break
        else:
            continue  # no room: drop the item
        for r in range(side):
            o = (y + r) * size + x
            img[o:o + side] = bytes(map(max, img[o:o + side], rows[r]))
        boxes.append(box)
        lines.append("%d %.6f %.6f %.6f %.6f\n" % (
            classes[idx], (box[0] + box[2]) / 2 / size, (box[1] + box[3]) / 2 / size,
            (box[2] - box[0]) / size, (box[3] - box[1]) / size))
    return prepare.png_gray(size, size, bytes(img)), "".join(lines)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", default=prepare.data_folder("fmnist-det"), help="output folder (default %(default)s)")
    ap.add_argument("--source", default=prepare.SOURCE, help="folder with the *-ubyte.gz files (default %(default)s)")
    ap.add_argument("--size", type=int, default=96, help="canvas side in pixels (default %(default)s)")
    ap.add_argument("--train", type=int, default=4000, metavar="N", help="training canvases (default %(default)s)")
    ap.add_argument("--valid", type=int, default=500, metavar="N", help="validation canvases (default %(default)s)")
    ap.add_argument("--max-items", type=int, default=3, metavar="K", help="items per canvas, 1..K (default %(default)s)")
    ap.add_argument("--seed", type=int, default=1, help="random seed (default %(default)s)")
    a = ap.parse_args()
    out, src = os.path.abspath(a.out), os.path.abspath(a.source)
    if a.size < MIN_SIDE or a.train < 1 or a.valid < 1 or a.max_items < 1:
        fail("need --size >= %d and positive --train, --valid, --max-items" % MIN_SIDE)
    bad = [s for s in REWRITTEN if s in out] + [c for c in " \t\n=" if c in out]
    if bad:
        fail("output path %r contains %s; Darknet derives label paths by rewriting these "
             "(or its .data parser strips them), choose another --out" % (out, ", ".join(map(repr, bad))))
    sources = [os.path.join(src, "%s-%s-ubyte.gz" % (p, k)) for _, p in SPLITS for k in ("images-idx3", "labels-idx1")]
    missing = [s for s in sources if not os.path.isfile(s)]
    if missing:
        fail("missing source file(s): %s\n(`apt-get install dataset-fashion-mnist` provides them, "
             "or pass --source DIR)" % ", ".join(missing))
    counts = {"train": a.train, "valid": a.valid}
    stamp = "version=%d\nout=%s\nsize=%d\ntrain=%d\nvalid=%d\nmax_items=%d\nseed=%d\n" % (
        VERSION, out, a.size, a.train, a.valid, a.max_items, a.seed)
    stamp += "".join("%s size=%d crc32=%08x\n" % (os.path.basename(s), os.path.getsize(s), prepare.crc32_file(s))
                     for s in sources)
    stamp_path, data_path = os.path.join(out, STAMP), os.path.join(out, "fmnist-det.data")
    outputs = [os.path.join(out, n) for n in ("names.txt", "fmnist-det.data", "train.list", "valid.list", "backup")]
    outputs += [os.path.join(out, kind, s, "%05d.%s" % (i, ext)) for s in counts for i in range(counts[s])
                for kind, ext in (("images", "png"), ("labels", "txt"))]
    try:
        with open(stamp_path) as f:
            if f.read() == stamp and all(os.path.exists(p) for p in outputs):
                print("make-detection-set: %s is up to date" % out)
                return
    except OSError:
        pass

    os.makedirs(os.path.join(out, "backup"), exist_ok=True)
    for stale in (stamp_path, data_path):  # unusable until complete
        if os.path.exists(stale):
            os.remove(stale)
    rng, done, total, nboxes = random.Random(a.seed), 0, a.train + a.valid, 0
    progress = prepare.Progress("make-detection-set", "canvases", total)
    for split, prefix in SPLITS:
        (n, rows, cols), pixels = prepare.read_idx(os.path.join(src, prefix + "-images-idx3-ubyte.gz"), 0x803)
        (nl,), classes = prepare.read_idx(os.path.join(src, prefix + "-labels-idx1-ubyte.gz"), 0x801)
        if (rows, cols) != (28, 28) or n != nl or max(classes) > 9:
            fail("%s split: expected 28x28 images with one label 0..9 each" % prefix)
        paths = []
        for kind in ("images", "labels"):
            os.makedirs(os.path.join(out, kind, split), exist_ok=True)
        for i in range(counts[split]):
            png, label = canvas(rng, a.size, a.max_items, pixels, classes)
            path = os.path.join(out, "images", split, "%05d.png" % i)
            prepare.write_atomic(path, png)
            prepare.write_atomic(os.path.join(out, "labels", split, "%05d.txt" % i), label)
            paths.append(path)
            done, nboxes = done + 1, nboxes + label.count("\n")
            progress.step(done)
        for kind, ext in (("images", "png"), ("labels", "txt")):  # drop files of an earlier, larger run
            keep = set("%05d.%s" % (i, ext) for i in range(counts[split]))
            for name in os.listdir(os.path.join(out, kind, split)):
                if name not in keep:
                    os.remove(os.path.join(out, kind, split, name))
        prepare.write_atomic(os.path.join(out, split + ".list"), "".join(p + "\n" for p in paths))
    prepare.write_atomic(os.path.join(out, "names.txt"), "".join(n + "\n" for n in prepare.NAMES))
    prepare.write_atomic(data_path, "classes=10\ntrain=%s/train.list\nvalid=%s/valid.list\nnames=%s/names.txt\n"
                         "backup=%s/backup\n" % (out, out, out, out))
    prepare.write_atomic(stamp_path, stamp)
    print("make-detection-set: wrote %d train + %d valid %dx%d canvases (%d boxes) to %s (data file %s)"
          % (a.train, a.valid, a.size, a.size, nboxes, out, data_path))


if __name__ == "__main__":
    try:
        main()
    except KeyboardInterrupt:
        sys.exit("make-detection-set: interrupted; run it again to finish")
