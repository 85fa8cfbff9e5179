"""Usage: make_tiny_detection.py OUT_DIR [COUNT]

Writes a tiny detection set in Darknet's layout for tests: COUNT 64x64
greyscale PNGs under OUT_DIR/images/ holding one or two bright rectangles
of 2 classes (wide = 0, tall = 1) on a dark background, their boxes in
OUT_DIR/labels/ ("class cx cy w h", normalised), train.list, names.txt and
tiny.data. Deterministic."""
import importlib.util
import os
import random
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
spec = importlib.util.spec_from_file_location(
    "prepare", os.path.join(HERE, "..", "..", "scripts", "prepare-fashion-mnist.py"))
prepare = importlib.util.module_from_spec(spec)
spec.loader.exec_module(prepare)

SIZE = 64


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
    prepare.write_atomic(os.path.join(out, "tiny.data"), (
        "classes=2\ntrain=%s/train.list\nvalid=%s/train.list\nnames=%s/names.txt\nbackup=%s/backup\n"
        % (out, out, out, out)).encode())


if __name__ == "__main__":
    main()
