#!/bin/sh
# Usage: test_reference_equal.sh TRAIN_STEPS TRAIN_STEPS_REFERENCE SOURCE_DIR DARKNET_DIR WORK_DIR
# The optimised convolution and batch-norm loops against Darknet's reference
# loops: two training steps of the same cfg from the same start with both
# builds give the same losses and parameters up to floating-point rounding
# (relative error max|a - b| / max|b| below 1e-4 for the losses and for all
# parameters). Covers a cfg with strided, grouped, 1x1, biased and
# Winograd (even and odd sizes, grouped) convolutions at batch 4 and 1,
# upstream cifar.cfg at batch 10 (Winograd layers at 28x28, 14x14 and 7x7),
# cfg/fmnist.cfg and yolov3-tiny at 96x96. More steps let
# rounding differences grow (a max pool or leaky unit that flips changes a
# gradient outright); the same network with another OpenBLAS kernel
# differs by as much from the reference.
set -u
opt=$1 ref=$2 src=$3 dn=$4 work=$5
rm -rf "$work"; mkdir -p "$work"
export OPENBLAS_NUM_THREADS=1 OMP_NUM_THREADS=1
steps=2 tol=1e-4
pass=0 fail=0

run() { # NAME CFG
    "$opt" "$2" $steps "$work/$1.opt" >"$work/$1.opt.log" 2>&1 \
        && "$ref" "$2" $steps "$work/$1.ref" >"$work/$1.ref.log" 2>&1 \
        || { echo "FAIL $1: training failed"; cat "$work/$1.opt.log" "$work/$1.ref.log" | tail -5; fail=$((fail + 1)); return; }
    if r=$("$opt" --compare "$work/$1.opt" "$work/$1.ref" $tol $steps); then
        pass=$((pass + 1)); echo "ok   $1: $r"
    else
        fail=$((fail + 1)); echo "FAIL $1: $r"
    fi
}

cfg() { # NAME FILE BATCH [sed expressions...]
    name=$1 file=$2 batch=$3; shift 3
    sed -e "s/^batch *=.*/batch=$batch/" -e 's/^subdivisions *=.*/subdivisions=1/' "$@" "$file" >"$work/$name.cfg"
    run "$name" "$work/$name.cfg"
}

cfg small-b4 "$src/tests/darknet/reference.cfg" 4
cfg small-b1 "$src/tests/darknet/reference.cfg" 1
cfg cifar-b10 "$dn/cfg/cifar.cfg" 10 -e 's/^learning_rate=.*/learning_rate=0.01/'
cfg fmnist-b16 "$src/cfg/fmnist.cfg" 16
cfg yolov3-tiny-b4 "$dn/cfg/yolov3-tiny.cfg" 4 -e 's/^width=.*/width=96/' -e 's/^height=.*/height=96/' \
    -e 's/^learning_rate=.*/learning_rate=0.0001/'

# the comparison itself notices a changed parameter (the top byte of one float)
cp "$work/small-b4.opt" "$work/broken"
printf '\102' | dd of="$work/broken" bs=1 seek=203 conv=notrunc 2>/dev/null
if "$opt" --compare "$work/broken" "$work/small-b4.ref" $tol $steps >/dev/null; then
    fail=$((fail + 1)); echo "FAIL a changed parameter is not noticed"
else
    pass=$((pass + 1))
fi

echo "$pass passed, $fail failed"
[ "$fail" -eq 0 ]
