#!/bin/sh
# Usage: test_reference_equal.sh TRAIN_STEPS TRAIN_STEPS_REFERENCE SOURCE_DIR DARKNET_DIR WORK_DIR
# The optimised convolution and batch-norm loops against Darknet's reference
# loops: two training steps of the same cfg from the same start with both
# builds give the same losses and parameters up to floating-point rounding
# (relative error max|a - b| / max|b| below 1e-4 for the losses and for all
# parameters, and below 2e-5 for the weight gradients of the first step,
# which both builds take from the same parameters).
# Covers a cfg with strided, grouped, 1x1 and biased convolutions at batch
# 4 and 1, one whose 3x3 convolutions take the Winograd path (even and odd
# sizes, grouped, with and without batch norm), upstream cifar.cfg at batch
# 10 (Winograd at 28x28 and 14x14), cfg/fmnist.cfg and yolov3-tiny at
# 96x96, and the optimised build on two threads against one; then the small
# networks and fmnist.cfg again under every OpenBLAS kernel this CPU can
# run, the reference build also against itself on the first kernel.
#
# A max pool or a leaky unit whose inputs lie within rounding of each other
# can go one way in one run and the other way in the other (builds and
# OpenBLAS kernels round differently) and so change its layer's gradient
# and those of the layers below outright. fmnist.cfg at batch 16 has such a
# max pool (layer 3, image 9, channel 11: inputs 0.78566408 and 0.78566432):
# the reference build picks one input on the Prescott to Sandybridge
# kernels, the other on Haswell, Zen, SkylakeX and Cooperlake, the
# optimised build switches between Zen and SkylakeX; where they differ,
# layers 2 and 0 get gradients 3.7e-3 apart and the parameters after the
# second step differ by 6.1e-4, while every output and every gradient above
# that max pool agree within 3e-6. In cifar.cfg about 10 of 5.6 million
# leaky units lie within 1e-6 of 0 in the first step, in every kernel.
# So train_steps records which way each max pool and leaky or relu unit
# went (OUT.t) and, where the two runs differ, holds only what that cannot
# change: the losses up to that step, the first step's gradients of the
# layers above the highest one that differs, no parameters; and it fails
# when more channels differ than such ties explain. yolov3-tiny's [yolo]
# layers branch on thresholds that are not recorded, so its gradients are
# reported only.
set -u
opt=$1 ref=$2 src=$3 dn=$4 work=$5
rm -rf "$work"; mkdir -p "$work"
export OPENBLAS_NUM_THREADS=1 OMP_NUM_THREADS=1
steps=2 tol=1e-4 grad_tol=2e-5
pass=0 fail=0

check() { # LABEL A B GRADIENT_TOLERANCE: compares the runs A and B
    if r=$("$opt" --compare "$2" "$3" $tol $steps "$4" 2>&1); then
        pass=$((pass + 1)); echo "ok   $1: $r"
    else
        fail=$((fail + 1)); echo "FAIL $1: $r"
    fi
}

on_kernel() { # KERNEL COMMAND...: COMMAND on that OpenBLAS kernel (empty: the environment's)
    k=$1; shift
    if [ -n "$k" ]; then OPENBLAS_CORETYPE=$k "$@"; else "$@"; fi
}

train() { # RUN CFG KERNEL: both builds, as $work/RUN.opt and $work/RUN.ref
    on_kernel "$3" "$opt" "$2" $steps "$work/$1.opt" >"$work/$1.opt.log" 2>&1 \
        && on_kernel "$3" "$ref" "$2" $steps "$work/$1.ref" >"$work/$1.ref.log" 2>&1 && return 0
    fail=$((fail + 1)); echo "FAIL $1: training failed"; tail -5 "$work/$1.opt.log" "$work/$1.ref.log"
    return 1
}

cfg() { # NAME FILE BATCH GRADIENT_TOLERANCE [sed expressions...]
    name=$1 file=$2 batch=$3 gtol=$4; shift 4
    sed -e "s/^batch *=.*/batch=$batch/" -e 's/^subdivisions *=.*/subdivisions=1/' "$@" "$file" >"$work/$name.cfg"
    train "$name" "$work/$name.cfg" "" && check "$name" "$work/$name.opt" "$work/$name.ref" "$gtol"
}

# The gradients are held to 2e-5 (measured: 1e-6 to 3e-6 on the small
# networks and fmnist.cfg, 4e-6 to 5e-6 on cifar.cfg above its ties; a
# filter transform off by 1e-4 in one term gives 6e-5).
cfg small-b4 "$src/tests/darknet/reference.cfg" 4 $grad_tol
cfg small-b1 "$src/tests/darknet/reference.cfg" 1 $grad_tol
cfg winograd-b4 "$src/tests/darknet/winograd.cfg" 4 $grad_tol
# the same at 6x6 (F(2x2, 3x3), which F(4x4) ties there) and at 8x8 (F(4x4)
# reading the deltas in place: the width is a multiple of 4), gradients
# held to 5e-6 (measured 5e-7 and 8e-7; one F(2x2) filter term off by 2e-4
# gives 1.8e-5 at 6x6)
cfg winograd-6x6-b32 "$src/tests/darknet/winograd.cfg" 32 5e-6 -e 's/^width=.*/width=6/' -e 's/^height=.*/height=6/'
cfg winograd-8x8-b16 "$src/tests/darknet/winograd.cfg" 16 5e-6 -e 's/^width=.*/width=8/' -e 's/^height=.*/height=8/'
cfg cifar-b10 "$dn/cfg/cifar.cfg" 10 $grad_tol -e 's/^learning_rate=.*/learning_rate=0.01/'
cfg fmnist-b16 "$src/cfg/fmnist.cfg" 16 $grad_tol
cfg yolov3-tiny-b4 "$dn/cfg/yolov3-tiny.cfg" 4 inf -e 's/^width=.*/width=96/' -e 's/^height=.*/height=96/' \
    -e 's/^learning_rate=.*/learning_rate=0.0001/'
echo "(the runs above: OpenBLAS kernel $(sed -n 's/^openblas kernel //p' "$work/small-b4.ref.log"))"

# The optimised build on two threads against one: the loops over images and
# channels and the split gemms give the same results (no races).
for name in small-b4 winograd-b4 fmnist-b16; do
    if OMP_NUM_THREADS=2 "$opt" "$work/$name.cfg" $steps "$work/$name.opt2" >"$work/$name.opt2.log" 2>&1; then
        check "$name on 2 threads" "$work/$name.opt2" "$work/$name.opt" $grad_tol
    else
        fail=$((fail + 1)); echo "FAIL $name on 2 threads: training failed"
    fi
done

# Every OpenBLAS kernel (OPENBLAS_CORETYPE) whose instructions this CPU has
# (forcing another one stops the program with SIGILL; /proc/cpuinfo's
# flags): the optimised build against the reference on the same kernel,
# and the reference against the reference on the first kernel, so that a
# kernel which computes wrong results, or a call that only some kernels
# tolerate (a wrong leading dimension, an unset buffer), fails.
flags=" $(sed -n 's/^flags[[:space:]]*: //p' /proc/cpuinfo 2>/dev/null | head -n 1) "
has() { for f; do case $flags in *" $f "*) ;; *) return 1 ;; esac; done; }
kernels=
has pni && kernels="$kernels Prescott"
has ssse3 && kernels="$kernels Core2"
has ssse3 movbe && kernels="$kernels Atom"
has sse4_1 && kernels="$kernels Penryn Dunnington"
has sse4a 3dnowprefetch && kernels="$kernels Barcelona"
has sse4_2 && kernels="$kernels Nehalem"
has avx && kernels="$kernels Sandybridge"
has avx2 fma && kernels="$kernels Haswell Zen"
has avx512f avx512bw avx512dq avx512vl && kernels="$kernels SkylakeX"
has avx512f avx512bw avx512dq avx512vl avx512_bf16 && kernels="$kernels Cooperlake"
echo "OpenBLAS kernels this CPU runs:${kernels:- none known}"
first=
for k in $kernels; do
    first=${first:-$k}
    for name in small-b4 small-b1 winograd-b4 fmnist-b16; do
        train "$name.$k" "$work/$name.cfg" $k || continue
        used=$(sed -n 's/^openblas kernel //p' "$work/$name.$k.ref.log")
        [ "$used" = "$k" ] || echo "note: OPENBLAS_CORETYPE=$k runs kernel $used"
        check "$name on $k" "$work/$name.$k.opt" "$work/$name.$k.ref" $grad_tol
        [ "$k" = "$first" ] \
            || check "$name reference on $k against $first" "$work/$name.$k.ref" "$work/$name.$first.ref" $grad_tol
    done
done

# The comparison notices a changed parameter or weight gradient (the top
# byte of one float), tolerates one channel whose branches differ (one
# byte of its hash) and notices three. Each check needs a run whose
# comparison holds everything: no branch differs, so every parameter and
# every gradient is compared (which runs those are depends on the CPU, its
# OpenBLAS kernel and the build). The first such run, as the comparison
# reports it, is the one the checks damage.
clean=
for name in small-b4 small-b1 winograd-b4 fmnist-b16 $(for k in $kernels; do
        printf '%s ' small-b4.$k small-b1.$k winograd-b4.$k fmnist-b16.$k; done); do
    [ -f "$work/$name.opt.t" ] || continue
    r=$("$opt" --compare "$work/$name.opt" "$work/$name.ref" $tol $steps 2>&1) || continue
    case $r in *"branches differ"*) continue ;; esac
    clean=$name; break
done
# a byte inside the first layer's floats of the weights file and of OUT.g,
# well inside both: past the losses and the 20-byte header, past a record's
# 8-byte header; the top byte of float 43 and of float 48
param_at=$((4 * steps + 20 + 4 * 43 + 3)) grad_at=$((8 + 4 * 48 + 3))
notices() { # WHAT [EXPECTED_STATUS]
    if "$opt" --compare "$work/broken" "$work/$clean.ref" $tol $steps >/dev/null 2>&1; then
        status=0
    else
        status=1
    fi
    if [ $status -eq "${2:-1}" ]; then
        pass=$((pass + 1))
    else
        fail=$((fail + 1)); echo "FAIL $1 (run $clean)"
    fi
}
restore() {
    for suffix in "" .g .t; do cp "$work/$clean.opt$suffix" "$work/broken$suffix"; done
}
poke() { # FILE OFFSET...: adds 1 to the byte at each OFFSET
    file=$1; shift
    for at; do
        byte=$(od -A n -t u1 -j "$at" -N 1 "$file")
        printf "\\$(printf %o $(((byte + 1) % 256)))" | dd of="$file" bs=1 seek="$at" conv=notrunc 2>/dev/null
    done
}
set_top() { # FILE OFFSET: sets the byte at OFFSET to 0x42 (a float's top byte: a value of 2^5 to 2^6)
    printf '\102' | dd of="$1" bs=1 seek="$2" conv=notrunc 2>/dev/null
}
if [ -z "$clean" ]; then
    fail=$((fail + 1)); echo "FAIL no run whose branches all agree: the comparison's self-checks have nothing to damage"
else
    echo "(the comparison's self-checks damage run $clean)"
    restore; set_top "$work/broken" $param_at
    notices "a changed parameter is not noticed"
    restore; set_top "$work/broken.g" $grad_at
    notices "a changed weight gradient is not noticed"
    # OUT.t: a 20-byte record header, then the first record's channel hashes of 8 bytes
    restore; poke "$work/broken.t" 20
    notices "one channel whose branches differ fails" 0
    restore; poke "$work/broken.t" 20 28 36
    notices "three channels whose branches differ in the first step are not noticed"
fi

echo "$pass passed, $fail failed"
[ "$fail" -eq 0 ]
