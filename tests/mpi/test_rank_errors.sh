#!/bin/sh
# Usage: test_rank_errors.sh DARKNET SOURCE_DIR WORK_DIR
# Errors that every rank meets are reported by every rank (3 ranks under a
# real mpirun), each line naming its rank, and end the job (never a hang):
#  - a cfg that needs more ranks (fedavg_fraction=0.3 leaves no rank of 3
#    taking part): FILE:LINE, key and value;
#  - a detection label file that is missing, and one that is malformed
#    (FILE:LINE), found while every rank computes the data partition.
# An image that cannot be read is met only by the rank that loads it: the
# job ends, Darknet's message names the image and the plugin names the rank.
set -u
darknet=$1 src=$2 work=$3
here=$(cd "$(dirname "$0")" && pwd)
rm -rf "$work"; mkdir -p "$work/backup"
. "$src/tests/common/checks.sh"
np=3
# job NAME ARGS...: darknet ARGS on np ranks, output in NAME.out; sets rc
job() {
    name=$1; shift
    timeout 120 ${MPIEXEC:-mpirun} --oversubscribe -np $np "$darknet" "$@" >"$work/$name.out" 2>&1
    rc=$?
}
# every_rank NAME PATTERN: a line "selsync: rank R: " PATTERN from every rank
every_rank() {
    r=0
    while [ $r -lt $np ]; do
        grep -q "^selsync: rank $r: $2" "$work/$1.out" || { echo "  no line from rank $r in $1.out"; return 1; }
        r=$((r + 1))
    done
}
failed() { [ "$rc" -ne 0 ] && [ "$rc" -ne 124 ]; }

# a classifier data set of uniform images (one per class)
for c in 0 1 2 3 4 5 6 7 8 9; do echo "_c${c}_"; done >"$work/labels.txt"
for c in 0 1 2 3 4 5; do
    python3 "$src/tests/common/uniform_png.py" "$work/u${c}_c${c}_.png" 28 28 $((c * 40 + 10))
    echo "$work/u${c}_c${c}_.png"
done >"$work/train.list"
printf 'classes=10\ntrain=%s/train.list\nlabels=%s/labels.txt\nbackup=%s/backup\n' "$work" "$work" "$work" >"$work/cls.data"
cls_cfg() { sed 's/^max_batches=.*/max_batches=5/' "$src/cfg/fmnist-tiny.cfg"; printf '\n[selsync]\n%s\n' "$1"; }

# --- a cfg that needs more ranks ---------------------------------------------------
cls_cfg "method=fedavg
fedavg_fraction=0.3" >"$work/fed.cfg"
job fed classifier train "$work/cls.data" "$work/fed.cfg"
check "needs more ranks: the job fails (status $rc)" 'failed'
line=$(grep -n '^fedavg_fraction=' "$work/fed.cfg" | cut -d: -f1)
check "needs more ranks: every rank names file, line, key and value" \
    'every_rank fed "$work/fed.cfg:$line: \[selsync\] fedavg_fraction = .0\.3.: no rank would take part on 3 ranks"'

# --- detection label files ------------------------------------------------------------
python3 "$here/make_tiny_detection.py" "$work/det" 8 >/dev/null
{ cat "$work/det/tiny.cfg"; printf '\n[selsync]\nmethod=bsp\n'; } >"$work/det.cfg"
lab=$(sed -n 1p "$work/det/train.list" | sed -e 's#/images/#/labels/#' -e 's#\.png$#.txt#')
mv "$lab" "$lab.kept"
job missing detector train "$work/det/tiny.data" "$work/det.cfg"
check "missing label file: the job fails (status $rc)" 'failed'
check "missing label file: every rank names it" 'every_rank missing "$lab: cannot open"'
printf '0 0.5 0.5 0.2\n' >"$lab"
job malformed detector train "$work/det/tiny.data" "$work/det.cfg"
check "malformed label file: the job fails (status $rc)" 'failed'
check "malformed label file: every rank names file and line" 'every_rank malformed "$lab:1: "'
mv "$lab.kept" "$lab"

# --- an image that cannot be read --------------------------------------------------------
echo "not an image" >"$work/bad_c7_.png"
echo "$work/bad_c7_.png" >>"$work/train.list"
cls_cfg "method=bsp" >"$work/img.cfg"
job image classifier train "$work/cls.data" "$work/img.cfg"
check "unreadable image: the job fails (status $rc)" 'failed'
check "unreadable image: the message names it" 'grep -q "Cannot load image \"$work/bad_c7_.png\"" "$work/image.out"'
check "unreadable image: the rank that met it is named" 'grep -q "^selsync: rank [0-2] exited without finishing" "$work/image.out"'

[ "$fail" -gt 0 ] && for f in fed missing malformed image; do echo "--- $f"; grep "selsync\|Cannot" "$work/$f.out" | head -8; done
echo "$pass passed, $fail failed"
[ "$fail" -eq 0 ]
