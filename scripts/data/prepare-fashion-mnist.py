#!/usr/bin/env python3
"""Convert Debian's Fashion-MNIST (package dataset-fashion-mnist) to Darknet's
classifier layout, using only the Python standard library.

Output (default: data/fashion-mnist of the source tree, or of the current
folder for an installed copy):
  train/NNNNN_cK_<name>.png  60000 training images (8-bit greyscale PNG, 28x28)
  valid/NNNNN_cK_<name>.png  10000 t10k images (held out)
  labels.txt                 label strings _c0_ .. _c9_ (class order 0..9)
  names.txt                  human class names, same order
  train.list, valid.list     absolute image paths, one per line
  fmnist.data                Darknet .data file with absolute paths
  backup/                    where Darknet writes its weights
Darknet labels an image with every label string that is a substring of its
full path, so the labels are "_c<digit>_" tokens that occur only in the file
names; the script checks that each path matches exactly one label.

The run is idempotent: a stamp file records the parameters and source sizes
and CRCs, and nothing is redone when it matches.  Every file is written to a
temporary name and renamed; the stamp and fmnist.data are removed first and
written last, so an interrupted run never looks complete. A lock file in the
output folder makes runs started at the same time wait for one another.
"""
import argparse
import fcntl
import gzip
import os
import struct
import sys
import time
import zlib

SOURCE = "/usr/share/datasets/fashion-mnist"
NAMES = ["T-shirt/top", "Trouser", "Pullover", "Dress", "Coat",
         "Sandal", "Shirt", "Sneaker", "Bag", "Ankle boot"]
SLUGS = ["tshirt", "trouser", "pullover", "dress", "coat",
         "sandal", "shirt", "sneaker", "bag", "ankleboot"]
LABELS = ["_c%d_" % k for k in range(10)]
SPLITS = [("train", "train"), ("valid", "t10k")]  # (output dir, source prefix)
STAMP = ".prepared"
VERSION = 1


def fail(msg):
    sys.exit("prepare-fashion-mnist: error: " + msg)


class Progress:
    """Prints "WHO: DONE/TOTAL WHAT written (P%, Es, about Ls left)" when a
    step is done, at most every `every` seconds, and always at the last."""

    def __init__(self, who, what, total, every=5.0):
        self.who, self.what, self.total, self.every = who, what, total, every
        self.start = self.shown = time.monotonic()

    def step(self, done):
        now = time.monotonic()
        if done < self.total and now - self.shown < self.every:
            return
        self.shown, elapsed = now, now - self.start
        left = elapsed / done * (self.total - done) if done else 0
        print("%s: %d/%d %s written (%d%%, %.0f s, about %.0f s left)"
              % (self.who, done, self.total, self.what, 100 * done // max(self.total, 1), elapsed, left), flush=True)


def write_atomic(path, data):
    tmp = "%s.tmp%d" % (path, os.getpid())
    with open(tmp, "wb") as f:
        f.write(data if isinstance(data, bytes) else data.encode())
    os.replace(tmp, path)


def crc32_file(path):
    crc = 0
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            crc = zlib.crc32(chunk, crc)
    return crc


def png_gray(width, height, pixels):
    def chunk(kind, body):
        return (struct.pack(">I", len(body)) + kind + body +
                struct.pack(">I", zlib.crc32(kind + body)))
    raw = b"".join(b"\0" + pixels[y * width:(y + 1) * width] for y in range(height))
    return (b"\x89PNG\r\n\x1a\n" +
            chunk(b"IHDR", struct.pack(">IIBBBBB", width, height, 8, 0, 0, 0, 0)) +
            chunk(b"IDAT", zlib.compress(raw, 6)) + chunk(b"IEND", b""))


def read_idx(path, magic):
    with gzip.open(path, "rb") as f:
        data = f.read()
    ndim = magic & 0xff
    if len(data) < 4 + 4 * ndim or struct.unpack(">I", data[:4])[0] != magic:
        fail("%s is not an IDX file with magic 0x%08x" % (path, magic))
    dims = struct.unpack(">%dI" % ndim, data[4:4 + 4 * ndim])
    body = data[4 + 4 * ndim:]
    size = 1
    for d in dims:
        size *= d
    if len(body) != size:
        fail("%s: expected %d data bytes, found %d" % (path, size, len(body)))
    return dims, body


def convert(out, src, split, prefix, limit, done, progress):
    images = os.path.join(src, prefix + "-images-idx3-ubyte.gz")
    labels = os.path.join(src, prefix + "-labels-idx1-ubyte.gz")
    (n, rows, cols), pixels = read_idx(images, 0x803)
    (nl,), classes = read_idx(labels, 0x801)
    if n != nl:
        fail("%s has %d images but %s has %d labels" % (images, n, labels, nl))
    if limit is not None:
        n = min(n, limit)
    folder = os.path.join(out, split)
    os.makedirs(folder, exist_ok=True)
    paths, step = [], rows * cols
    for i in range(n):
        k = classes[i]
        if k >= len(LABELS):
            fail("%s: label %d out of range at index %d" % (labels, k, i))
        path = os.path.join(folder, "%05d%s%s.png" % (i, LABELS[k], SLUGS[k]))
        write_atomic(path, png_gray(cols, rows, pixels[i * step:(i + 1) * step]))
        paths.append(path)
        done += 1
        progress.step(done)
    keep = set(os.path.basename(p) for p in paths)
    for name in os.listdir(folder):  # drop images of an earlier, larger run
        if name not in keep:
            os.remove(os.path.join(folder, name))
    write_atomic(os.path.join(out, split + ".list"), "".join(p + "\n" for p in paths))
    return paths, done


def data_folder(name):
    """DATA/name: DATA is the source tree's data/ when this script runs from
    one, else (an installed copy) data/ in the current folder."""
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    if not os.path.isfile(os.path.join(root, "CMakeLists.txt")):
        root = os.getcwd()
    return os.path.join(root, "data", name)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--source", default=SOURCE, help="folder with the *-ubyte.gz files (default %(default)s)")
    ap.add_argument("--out", default=data_folder("fashion-mnist"),
                    help="output folder (default %(default)s)")
    ap.add_argument("--train-limit", type=int, metavar="N", help="use only the first N training images")
    ap.add_argument("--valid-limit", type=int, metavar="N", help="use only the first N t10k images")
    ap.add_argument("--force", action="store_true", help="rebuild even if the stamp matches")
    args = ap.parse_args()
    out, src = os.path.abspath(args.out), os.path.abspath(args.source)
    limits = {"train": args.train_limit, "valid": args.valid_limit}
    if any(v is not None and v < 1 for v in limits.values()):
        fail("limits must be positive")
    if any(c in out for c in " \t\n="):
        fail("output path %r may not contain whitespace or '=' (Darknet's .data parser strips them)" % out)
    if any(label in out for label in LABELS):
        fail("output path %r contains a label string (_cK_), which would mislabel images" % out)
    if any(a != b and a in b for a in LABELS for b in LABELS):
        fail("internal error: a label string is a substring of another")

    sources = [os.path.join(src, "%s-%s-ubyte.gz" % (p, kind))
               for _, p in SPLITS for kind in ("images-idx3", "labels-idx1")]
    missing = [s for s in sources if not os.path.isfile(s)]
    if missing:
        fail("missing source file(s): %s\n(`apt-get install dataset-fashion-mnist` provides them, "
             "or pass --source DIR)" % ", ".join(missing))
    # one preparation at a time: others wait here, then find it up to date
    os.makedirs(out, exist_ok=True)
    lock = open(os.path.join(out, ".lock"), "w")
    fcntl.flock(lock, fcntl.LOCK_EX)
    stamp = "version=%d\nout=%s\nlimits=%s\n" % (VERSION, out, sorted(limits.items()))
    stamp += "".join("%s size=%d crc32=%08x\n" % (os.path.basename(s), os.path.getsize(s), crc32_file(s))
                     for s in sources)
    stamp_path = os.path.join(out, STAMP)
    try:
        with open(stamp_path) as f:
            current = f.read() == stamp
        outputs = [os.path.join(out, n) for n in ("labels.txt", "names.txt", "fmnist.data", "backup")]
        for split, _ in SPLITS:
            with open(os.path.join(out, split + ".list")) as f:
                outputs += [p for p in f.read().split("\n") if p]
        current = current and all(os.path.exists(p) for p in outputs)
    except OSError:
        current = False
    if current and not args.force:
        print("prepare-fashion-mnist: %s is up to date" % out)
        return

    os.makedirs(os.path.join(out, "backup"), exist_ok=True)
    for stale in (stamp_path, os.path.join(out, "fmnist.data")):  # unusable until complete
        if os.path.exists(stale):
            os.remove(stale)
    total = sum(min(n, limits[s] or n) for s, n in (("train", 60000), ("valid", 10000)))
    done, counts = 0, {}
    progress = Progress("prepare-fashion-mnist", "images", total)
    for split, prefix in SPLITS:
        paths, done = convert(out, src, split, prefix, limits[split], done, progress)
        for p in paths:
            if sum(label in p for label in LABELS) != 1:
                fail("path %r does not match exactly one label" % p)
        counts[split] = len(paths)
    write_atomic(os.path.join(out, "labels.txt"), "".join(label + "\n" for label in LABELS))
    write_atomic(os.path.join(out, "names.txt"), "".join(n + "\n" for n in NAMES))
    backup = os.path.join(out, "backup")
    if len(backup) > 200:
        print("prepare-fashion-mnist: warning: Darknet builds weight paths in a 256-byte buffer; "
              "%s is long" % backup, file=sys.stderr)
    write_atomic(os.path.join(out, "fmnist.data"),
                 "classes=10\ntrain=%s/train.list\nvalid=%s/valid.list\nlabels=%s/labels.txt\n"
                 "names=%s/names.txt\nbackup=%s\ntop=2\n" % (out, out, out, out, backup))
    write_atomic(stamp_path, stamp)
    print("prepare-fashion-mnist: wrote %d train + %d valid images to %s (data file %s)"
          % (counts["train"], counts["valid"], out, os.path.join(out, "fmnist.data")))


if __name__ == "__main__":
    try:
        main()
    except KeyboardInterrupt:
        sys.exit("prepare-fashion-mnist: interrupted; run it again to finish")
