#!/bin/sh
# Usage: test_maxpool_equal.sh MAXPOOL_CHECK MAXPOOL_CHECK_REFERENCE WORK_DIR
# The optimised max pool (patch 0024) gives the reference loop's outputs and
# indexes bit for bit on finite inputs, and indexes inside their windows
# with NaNs and infinities (tests/darknet/maxpool_check.c), on one thread and
# on two.
set -u
opt=$1 ref=$2 work=$3
rm -rf "$work"; mkdir -p "$work"
fail=0
OMP_NUM_THREADS=1 "$ref" >"$work/reference.txt" || { echo "FAIL reference run"; exit 1; }
lines=$(wc -l <"$work/reference.txt")
[ "$lines" -gt 1000 ] || { echo "FAIL only $lines outputs"; fail=1; }
for t in 1 2; do
    if ! OMP_NUM_THREADS=$t "$opt" >"$work/optimised.$t.txt"; then
        echo "FAIL optimised run on $t thread(s)"; fail=1
    elif ! cmp -s "$work/reference.txt" "$work/optimised.$t.txt"; then
        echo "FAIL $t thread(s): outputs differ from the reference loop's, first:"
        diff "$work/reference.txt" "$work/optimised.$t.txt" | head -n 6; fail=1
    else
        echo "ok   $t thread(s): $lines outputs and indexes equal to the reference loop's"
    fi
done
exit $fail
