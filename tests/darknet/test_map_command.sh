#!/bin/sh
# Usage: test_map_command.sh DARKNET SOURCE_DIR WORK_DIR
# `darknet selsync map DATA CFG WEIGHTS` on a detector: after overfitting a
# tiny detector to 8 generated images it reports a per-class AP and a mAP
# well above zero on those images, and it fails cleanly on bad input.
set -u
darknet=$1 src=$2 work=$3
rm -rf "$work"; mkdir -p "$work"
. "$src/tests/common/checks.sh"

python3 "$src/tests/mpi/make_tiny_detection.py" "$work/det" 8
# burn_in ramps the rate up, which keeps YOLO's first steps from collapsing
# the objectness scores (Darknet seeds its weights from the clock)
sed -e 's/^max_batches=.*/max_batches=400/' -e 's/^learning_rate=.*/learning_rate=0.01\nburn_in=100/' \
    "$work/det/tiny.cfg" >"$work/tiny.cfg"
OPENBLAS_NUM_THREADS=1 "$darknet" detector train "$work/det/tiny.data" "$work/tiny.cfg" >"$work/train.out" 2>&1
check "training exits 0" '[ $? -eq 0 ] && [ -s "$work/det/backup/tiny_final.weights" ]'
"$darknet" selsync map "$work/det/tiny.data" "$work/tiny.cfg" "$work/det/backup/tiny_final.weights" \
    >"$work/map.out" 2>"$work/map.err"
check "map exits 0" '[ $? -eq 0 ]'
cat "$work/map.out"
check "an AP per class" '[ "$(grep -c "^class [01]: AP@0.5 = " "$work/map.out")" -eq 2 ]'
m=$(sed -n 's/^mAP@0.5 = \([0-9.]*\) (8 images, 10 boxes, .*/\1/p' "$work/map.out")
check "mAP line" '[ -n "$m" ]'
check "mAP well above zero after overfitting ($m)" 'awk -v m="${m:-0}" "BEGIN { exit !(m > 0.05 && m <= 1) }"'
"$darknet" selsync map "$work/det/tiny.data" "$work/tiny.cfg" "$work/none.weights" >/dev/null 2>&1
check "missing weights fail" '[ $? -ne 0 ]'
"$darknet" selsync map "$work/det/tiny.data" >/dev/null 2>"$work/usage.err"
check "too few arguments: usage" '[ $? -ne 0 ] && grep -q "usage: .* selsync map DATA CFG WEIGHTS" "$work/usage.err"'
echo "$pass passed, $fail failed"
[ "$fail" -eq 0 ]
