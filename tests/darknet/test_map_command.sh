#!/bin/sh
# Usage: test_map_command.sh DARKNET SOURCE_DIR WORK_DIR TRAIN_SYNTHETIC
# `darknet selsync map DATA CFG WEIGHTS` on a detector: after overfitting a
# tiny detector to 8 generated images it reports a per-class AP and a mAP
# well above zero on those images, and it fails cleanly on bad input.
# Training starts from fixed weights (TRAIN_SYNTHETIC writes them from
# srand(1)), but Darknet's trainer seeds its sampling from the clock and its
# loader threads draw in an order of their own, so the mAP differs from run
# to run: 100 runs of this setting gave 0.26 to 1 (mean 0.84); with batch 4
# and rate 0.01, 1 in 100 collapsed to 0. So "well above zero" is asserted
# of the first of up to 3 trainings that gets there: a map command that
# never sees the boxes fails all 3.
set -u
darknet=$1 src=$2 work=$3 synthetic=$4
rm -rf "$work"; mkdir -p "$work"
. "$src/tests/common/checks.sh"

python3 "$src/tests/mpi/make_tiny_detection.py" "$work/det" 8
# every step a batch of 8 (as many as there are images); burn_in ramps the
# rate up, which keeps YOLO's first steps from collapsing the objectness scores
sed -e 's/^batch=.*/batch=8/' -e 's/^max_batches=.*/max_batches=400/' \
    -e 's/^learning_rate=.*/learning_rate=0.005\nburn_in=100/' "$work/det/tiny.cfg" >"$work/tiny.cfg"
"$synthetic" "$work/tiny.cfg" 0 "$work/init" --save "$work/init.weights" >"$work/init.out" 2>&1
check "initial weights written" '[ $? -eq 0 ] && [ -s "$work/init.weights" ]'
for try in 1 2 3; do
    rm -f "$work/det/backup/tiny_final.weights"
    OPENBLAS_NUM_THREADS=1 "$darknet" detector train "$work/det/tiny.data" "$work/tiny.cfg" "$work/init.weights" \
        >"$work/train.out" 2>&1
    trained=$?
    "$darknet" selsync map "$work/det/tiny.data" "$work/tiny.cfg" "$work/det/backup/tiny_final.weights" \
        >"$work/map.out" 2>"$work/map.err"
    mapped=$?
    m=$(sed -n 's/^mAP@0.5 = \([0-9.]*\) (8 images, 10 boxes, .*/\1/p' "$work/map.out")
    echo "training $try: mAP@0.5 = ${m:-none}"
    awk -v m="${m:-0}" 'BEGIN { exit !(m > 0.05) }' && break
done
check "training exits 0" '[ $trained -eq 0 ] && [ -s "$work/det/backup/tiny_final.weights" ]'
check "map exits 0" '[ $mapped -eq 0 ]'
cat "$work/map.out"
check "an AP per class" '[ "$(grep -c "^class [01]: AP@0.5 = " "$work/map.out")" -eq 2 ]'
check "mAP line" '[ -n "$m" ]'
check "mAP well above zero after overfitting ($m)" 'awk -v m="${m:-0}" "BEGIN { exit !(m > 0.05 && m <= 1) }"'
"$darknet" selsync map "$work/det/tiny.data" "$work/tiny.cfg" "$work/none.weights" >/dev/null 2>&1
check "missing weights fail" '[ $? -ne 0 ]'
"$darknet" selsync map "$work/det/tiny.data" >/dev/null 2>"$work/usage.err"
check "too few arguments: usage" '[ $? -ne 0 ] && grep -q "usage: .* selsync map DATA CFG WEIGHTS" "$work/usage.err"'
echo "$pass passed, $fail failed"
[ "$fail" -eq 0 ]
