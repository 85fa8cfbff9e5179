"""Where a result was made: the machine.txt every results folder carries.

write_machine_txt(folder, argv) records the date, the command, the CPU
model and flags, the cores, the kernel, Open MPI, OpenBLAS's version and
the kernel it chooses here (asked from the library itself, so that
OPENBLAS_CORETYPE counts), the OPENBLAS_* and OMP_* environment, the BLAS
threads, the ranks when the caller knows them, and the commit with its
dirty state. A field that cannot be found reads "unknown". Run as a
script it writes FOLDER/machine.txt, or prints the same to stdout when
FOLDER is "-":
    python3 scripts/compare/provenance.py FOLDER [--ranks N] -- COMMAND...
"""
import ctypes
import ctypes.util
import os
import platform
import shlex
import subprocess
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def _run(cmd):
    try:
        return subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                              universal_newlines=True).stdout.strip("\n")
    except OSError:
        return ""


def cpu():
    """(model name, flags) from /proc/cpuinfo."""
    model = flags = "unknown"
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                key, _, value = line.partition(":")
                if key.strip() == "model name" and model == "unknown":
                    model = value.strip()
                if key.strip() == "flags" and flags == "unknown":
                    flags = value.strip()
    except OSError:
        pass
    return model, flags


def _openblas():
    """(version line, chosen kernel, threads) as the library reports them."""
    for name in ("libopenblas.so.0", ctypes.util.find_library("openblas")):
        if not name:
            continue
        try:
            lib = ctypes.CDLL(name)
        except OSError:
            continue
        lib.openblas_get_config.restype = ctypes.c_char_p
        lib.openblas_get_corename.restype = ctypes.c_char_p
        return (lib.openblas_get_config().decode(), lib.openblas_get_corename().decode(),
                str(lib.openblas_get_num_threads()))
    return "unknown (no libopenblas.so.0)", "unknown", "unknown"


def commit_state():
    """(the commit's hash or "unknown", `git status --porcelain` of the
    tracked files: empty when clean)."""
    return (_run(["git", "-C", ROOT, "rev-parse", "HEAD"]) or "unknown",
            _run(["git", "-C", ROOT, "status", "--porcelain", "--untracked-files=no"]))


def blas_environment():
    """The OPENBLAS_* and OMP_* variables, as NAME=VALUE strings."""
    return ["%s=%s" % kv for kv in sorted(os.environ.items()) if kv[0].startswith(("OPENBLAS_", "OMP_"))]


def open_mpi():
    """mpirun's version line, or "unknown"."""
    lines = _run(["mpirun", "--version"]).splitlines()
    return lines[0] if lines else "unknown"


def machine_lines(argv, ranks=None):
    """The lines of machine.txt for a run of argv."""
    model, flags = cpu()
    config, core, threads = _openblas()
    commit, dirty = commit_state()
    env = blas_environment()
    return ["date: %s" % time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime()),
            "command: %s" % " ".join(shlex.quote(a) for a in argv),
            "cpu: %s" % model,
            "cpu flags: %s" % flags,
            "cores: %d" % (os.cpu_count() or 0),
            "kernel: Linux %s" % platform.release(),
            "open mpi: %s" % open_mpi(),
            "openblas: %s" % config,
            "openblas kernel: %s" % core,
            "environment: %s" % (" ".join(env) or "no OPENBLAS_* or OMP_* variable"),
            "blas threads per process: %s" % threads,
            "ranks: %s" % (ranks if ranks is not None else "see the command"),
            "commit: %s (%s)" % (commit, "with uncommitted changes:\n  " + dirty.replace("\n", "\n  ")
                                 if dirty else "clean")]


def write_machine_txt(folder, argv, ranks=None):
    """folder/machine.txt (the folder is created); returns its path."""
    os.makedirs(folder, exist_ok=True)
    path = os.path.join(folder, "machine.txt")
    with open(path, "w") as f:
        f.write("\n".join(machine_lines(argv, ranks)) + "\n")
    return path


def main(args):
    if "--" not in args or not args[:args.index("--")]:
        print(__doc__.strip().splitlines()[-1].strip(), file=sys.stderr)
        return 2
    head, argv = args[:args.index("--")], args[args.index("--") + 1:]
    ranks = head[head.index("--ranks") + 1] if "--ranks" in head and head.index("--ranks") + 1 < len(head) else None
    if head[0] == "-":
        print("\n".join(machine_lines(argv, ranks)))
    else:
        write_machine_txt(head[0], argv, ranks)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
