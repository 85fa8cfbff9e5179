"""Usage: uniform_png.py OUT.png WIDTH HEIGHT TOP [BOTTOM]

Writes an 8-bit RGB gray PNG whose rows are uniform: row y has the value
TOP + (BOTTOM - TOP) * y / (HEIGHT - 1) (BOTTOM defaults to TOP, a uniform
image). Darknet's horizontal flips and whole-image crops leave it unchanged."""
import struct
import sys
import zlib


def chunk(kind, data):
    return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data) & 0xFFFFFFFF)


def main():
    out, w, h, top = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
    bottom = int(sys.argv[5]) if len(sys.argv) > 5 else top
    rows = b""
    for y in range(h):
        v = top + (bottom - top) * y // max(h - 1, 1)
        rows += b"\x00" + bytes([v, v, v]) * w
    with open(out, "wb") as f:
        f.write(b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", w, h, 8, 2, 0, 0, 0))
                + chunk(b"IDAT", zlib.compress(rows)) + chunk(b"IEND", b""))


if __name__ == "__main__":
    main()
