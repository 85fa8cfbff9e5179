"""Usage: make_tiny_detection.py OUT_DIR [COUNT]

Writes a tiny detection set in Darknet's layout for tests: COUNT 64x64
greyscale PNGs under OUT_DIR/images/ holding one or two bright rectangles
of 2 classes (wide = 0, tall = 1) on a dark background, their boxes in
OUT_DIR/labels/ ("class cx cy w h", normalised), train.list, names.txt,
tiny.data, and tiny.cfg: a small YOLO-style detector for them (6 steps of
batch 4; tests adjust max_batches and learning_rate and may append a
[selsync] section). Deterministic."""
import importlib.util
import os
import random
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
spec = importlib.util.spec_from_file_location(
    "prepare", os.path.join(HERE, "..", "..", "scripts", "data", "prepare-fashion-mnist.py"))
prepare = importlib.util.module_from_spec(spec)
spec.loader.exec_module(prepare)

SIZE = 64

TINY_CFG = """[net]
batch=4
subdivisions=1
width=64
height=64
channels=3
momentum=0.9
decay=0.0005
learning_rate=0.001
policy=constant
max_batches=6

[convolutional]
batch_normalize=1
filters=8
size=3
stride=1
pad=1
activation=leaky

[maxpool]
size=2
stride=2

[convolutional]
batch_normalize=1
filters=16
size=3
stride=1
pad=1
activation=leaky

[maxpool]
size=4
stride=4

[convolutional]
filters=21
size=1
stride=1
pad=1
activation=linear

[yolo]
mask=0,1,2
anchors=8,24, 24,8, 16,16
classes=2
num=3
jitter=0
ignore_thresh=.7
truth_thresh=1
random=0
"""


def main():
    out = os.path.abspath(sys.argv[1])
    count = int(sys.argv[2]) if len(sys.argv) > 2 else 8
    rng = random.Random(7)
    os.makedirs(os.path.join(out, "images"), exist_ok=True)
    os.makedirs(os.path.join(out, "labels"), exist_ok=True)
    os.makedirs(os.path.join(out, "backup"), exist_ok=True)
    paths = []
    for i in range(count):
        pixels = bytearray(SIZE * SIZE)
        boxes = []
        for _ in range(rng.randint(1, 2)):
            cls = rng.randint(0, 1)
            w, h = (rng.randint(20, 30), rng.randint(8, 12))[::1 if cls == 0 else -1]
            x, y = rng.randint(0, SIZE - w), rng.randint(0, SIZE - h)
            for yy in range(y, y + h):
                pixels[yy * SIZE + x:yy * SIZE + x + w] = bytes([220]) * w
            boxes.append("%d %.6f %.6f %.6f %.6f" % (
                cls, (x + w / 2) / SIZE, (y + h / 2) / SIZE, w / SIZE, h / SIZE))
        path = os.path.join(out, "images", "img%03d.png" % i)
        prepare.write_atomic(path, prepare.png_gray(SIZE, SIZE, bytes(pixels)))
        prepare.write_atomic(os.path.join(out, "labels", "img%03d.txt" % i),
                             ("\n".join(boxes) + "\n").encode())
        paths.append(path)
    prepare.write_atomic(os.path.join(out, "train.list"), ("\n".join(paths) + "\n").encode())
    prepare.write_atomic(os.path.join(out, "names.txt"), b"wide\ntall\n")
    prepare.write_atomic(os.path.join(out, "tiny.cfg"), TINY_CFG.encode())
    prepare.write_atomic(os.path.join(out, "tiny.data"), (
        "classes=2\ntrain=%s/train.list\nvalid=%s/train.list\nnames=%s/names.txt\nbackup=%s/backup\n"
        % (out, out, out, out)).encode())


if __name__ == "__main__":
    main()
