"""Usage: link_rate.py serve ADDRESS PORT BYTES
       link_rate.py send ADDRESS PORT BYTES

serve: accepts one TCP connection on ADDRESS:PORT, reads BYTES bytes and
answers with one byte. send: connects (retrying for 20 s while the server
starts), sends BYTES bytes, waits for the answer and prints the payload
rate in bit/s, from the first byte sent to the answer received."""
import socket
import sys
import time


def serve(address, port, n):
    with socket.socket() as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        s.bind((address, port))
        s.listen(1)
        conn, _ = s.accept()
        with conn:
            got = 0
            while got < n:
                b = conn.recv(1 << 20)
                if not b:
                    break
                got += len(b)
            conn.sendall(b"k")
    return 0 if got == n else 1


def send(address, port, n):
    deadline = time.monotonic() + 20
    while True:
        try:
            s = socket.create_connection((address, port), timeout=60)
            break
        except OSError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.1)
    block = bytes(1 << 16)
    with s:
        t0 = time.monotonic()
        left = n
        while left > 0:
            k = min(left, len(block))
            s.sendall(block[:k])
            left -= k
        if s.recv(1) != b"k":
            return 1
        t1 = time.monotonic()
    print("%.0f" % (n * 8 / (t1 - t0)))
    return 0


if __name__ == "__main__":
    mode, address, port, n = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
    sys.exit(serve(address, port, n) if mode == "serve" else send(address, port, n))
