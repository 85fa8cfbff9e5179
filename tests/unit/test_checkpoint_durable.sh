#!/bin/sh
# Usage: test_checkpoint_durable.sh CHECKPOINT_WRITER WORK_DIR
# A checkpoint survives a power cut, not only a killed process: under
# strace, one checkpoint write (checkpoint_writer once) must fsync the
# temporary file after its last write and before renaming it over the
# checkpoint, and then fsync the directory that holds it (the rename).
# Without the first fsync a crash could leave the new name on a file whose
# data never reached the disk; without the second, the old name.
# Exits 77 (skipped) where strace cannot trace (no ptrace permission).
set -u
writer=$1 work=$2
rm -rf "$work"; mkdir -p "$work"
path=$work/model.weights
if ! strace -f -qq -o "$work/probe.trace" true 2>"$work/probe.err"; then
    echo "strace cannot trace here ($(head -n 1 "$work/probe.err")): skipped"
    exit 77
fi
# (LeakSanitizer cannot run under ptrace: in the sanitizer build the traced
# write goes without it; test_checkpoint_kill runs the writer with it)
ASAN_OPTIONS="${ASAN_OPTIONS:-}:detect_leaks=0" \
    strace -f -qq -e trace=openat,write,fsync,fdatasync,close,rename,renameat,renameat2 -o "$work/calls.trace" \
    "$writer" once "$path" || { echo "FAIL the write failed"; exit 1; }
"$writer" check "$path" >/dev/null || { echo "FAIL the checkpoint is not whole"; exit 1; }
# the order of the calls, each file descriptor followed to its file
python3 - "$work/calls.trace" "$path" "$work" <<'EOF'
import re, sys
trace, path, folder = sys.argv[1:4]
tmp = path + ".tmp"
fds, events = {}, []          # fd -> file; (call, file) in order
for line in open(trace):
    m = re.match(r'\s*(?:\d+\s+)?(\w+)\((.*)\)\s+=\s+(-?\d+)', line)
    if not m:
        continue
    call, args, rc = m.group(1), m.group(2), int(m.group(3))
    if call == "openat" and rc >= 0:
        fds[rc] = re.search(r'"([^"]*)"', args).group(1)
    elif call in ("write", "fsync", "fdatasync", "close"):
        fd = int(args.split(",")[0])
        events.append((call, fds.get(fd, "?")))
        if call == "close":
            fds.pop(fd, None)
    elif call.startswith("rename") and rc == 0:
        names = re.findall(r'"([^"]*)"', args)
        events.append(("rename", tuple(names)))
def index(pred, start=0):
    for i in range(start, len(events)):
        if pred(events[i]):
            return i
    return -1
fail = 0
def check(what, ok):
    global fail
    print(("ok   " if ok else "FAIL ") + what)
    fail += not ok
ren = index(lambda e: e[0] == "rename" and e[1] == (tmp, path))
check("the temporary file is renamed over the checkpoint", ren >= 0)
last_write = max([i for i, e in enumerate(events[:ren]) if e == ("write", tmp)], default=-1)
check("the temporary file is written before the rename", last_write >= 0)
sync = index(lambda e: e[0] in ("fsync", "fdatasync") and e[1] == tmp, last_write + 1)
check("its data is synced after its last write and before the rename", 0 <= sync < ren)
dsync = index(lambda e: e[0] in ("fsync", "fdatasync") and e[1] in (folder, folder + "/"), ren + 1)
check("the folder is synced after the rename", dsync > ren)
sys.exit(1 if fail else 0)
EOF
