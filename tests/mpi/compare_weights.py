"""Usage: compare_weights.py A.weights B.weights TOLERANCE

Compares two Darknet weight files of the same network, ignoring the header
(version and images seen): passes when max|a - b| / max|b| <= TOLERANCE over
all parameters. Prints the figures either way."""
import struct
import sys


def params(path):
    with open(path, "rb") as f:
        blob = f.read()
    major, minor, _ = struct.unpack_from("<3i", blob)
    header = 12 + (8 if major * 10 + minor >= 2 else 4)
    n = (len(blob) - header) // 4
    return struct.unpack_from("<%df" % n, blob, header)


def main():
    a, b, tol = params(sys.argv[1]), params(sys.argv[2]), float(sys.argv[3])
    if len(a) != len(b):
        print("different sizes: %d vs %d parameters" % (len(a), len(b)))
        return 1
    scale = max(abs(x) for x in b) or 1.0
    worst = max(abs(x - y) for x, y in zip(a, b)) / scale
    print("%d parameters, max |a-b| / max|b| = %.3g (tolerance %g)" % (len(a), worst, tol))
    return 0 if worst <= tol else 1


if __name__ == "__main__":
    sys.exit(main())
