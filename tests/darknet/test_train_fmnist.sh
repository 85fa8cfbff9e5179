#!/bin/sh
# Usage: test_train_fmnist.sh DARKNET SOURCE_DIR WORK_DIR
# A short real training run of cfg/fmnist-tiny.cfg on Fashion-MNIST (prepared
# from Debian's dataset-fashion-mnist): every image gets exactly one label,
# the loss goes down, the weights are written, and the trained network beats
# chance on the held-out images by a wide margin. It starts from fixed
# initial weights (`darknet partial` with none: rand()'s default seed), as
# the trainer draws them from the clock and 40 iterations from an unlucky
# draw may stay near chance.
set -u
darknet=$1 src=$2 work=$3
rm -rf "$work"; mkdir -p "$work/backup"
. "$src/tests/common/checks.sh"

fmnist_data

"$darknet" partial "$src/cfg/fmnist-tiny.cfg" "" "$work/init.weights" 100 >"$work/partial.log" 2>&1 \
    || { cat "$work/partial.log"; echo "0 passed, 1 failed"; exit 1; }
OPENBLAS_NUM_THREADS=1 "$darknet" classifier train "$work/fmnist.data" "$src/cfg/fmnist-tiny.cfg" "$work/init.weights" \
    >"$work/train.out" 2>"$work/train.err"
check "training exits 0" '[ $? -eq 0 ]'
check "every image has exactly one label" '! grep -q "Too many or too few labels" "$work/train.out"'
# per-iteration lines: "I, EPOCH: LOSS, AVG avg, ..."
awk -F'[,:]' '/ avg, /{ print $3 }' "$work/train.out" >"$work/losses"
n=$(wc -l <"$work/losses")
check "40 iterations ran ($n)" '[ "$n" -eq 40 ]'
first=$(head -n 5 "$work/losses" | awk '{ s += $1 } END { print s / NR }')
last=$(tail -n 5 "$work/losses" | awk '{ s += $1 } END { print s / NR }')
echo "mean loss of the first 5 iterations $first, of the last 5 $last"
check "the loss goes down" 'awk -v a="$first" -v b="$last" "BEGIN { exit !(b < 0.75 * a) }"'
check "weights written" '[ -s "$work/backup/fmnist-tiny.weights" ]'

OPENBLAS_NUM_THREADS=1 "$darknet" classifier valid "$work/fmnist.data" "$src/cfg/fmnist-tiny.cfg" \
    "$work/backup/fmnist-tiny.weights" >"$work/valid.out" 2>"$work/valid.err"
top1=$(sed -n 's/.*top 1: \([0-9.]*\),.*/\1/p' "$work/valid.out" | tail -n 1)
echo "held-out top-1 after 40 iterations: $top1"
check "held-out top-1 above 0.3" 'awk -v t="${top1:-0}" "BEGIN { exit !(t > 0.3) }"'

echo "$pass passed, $fail failed"
[ "$fail" -eq 0 ]
