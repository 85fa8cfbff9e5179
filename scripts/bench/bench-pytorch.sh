#!/bin/sh
# Training throughput of Darknet against PyTorch on the same networks, batch
# and thread count, measured side by side in one run: Darknet's reference
# loops (before), the optimised build (after) and the same network rebuilt
# in PyTorch by scripts/bench/bench_torch.py (Debian's python3-torch, CPU).
# Each figure is the best of ROUNDS runs, taken in turns, of at least STEPS
# timed batches (more for small networks: about 2 s of the reference) after
# one warm-up batch.
# Also printed: the floating point operations of a training step per image
# and the share of OpenBLAS's sgemm peak (bench_train --peak on one thread,
# times the thread count) that Darknet (after) and PyTorch reach with them.
# Usage: scripts/bench/bench-pytorch.sh [BUILD_DIR] [STEPS] [ROUNDS]
# Environment: BENCH_CFGS (default: upstream cifar.cfg at 28x28,
# cfg/fmnist.cfg, cfg/fmnist-tiny.cfg, upstream yolov3-tiny.cfg at 96x96;
# an entry CFG:SIZE runs CFG at SIZE x SIZE, e.g. yolov3-tiny.cfg:416),
# BENCH_BATCH (default 32), BENCH_THREADS (default "1 2"), BENCH_CORETYPE
# (one or more words, each measured in every round and given its own rows:
# "default" (or unset): what a user gets, the environment's
# OPENBLAS_CORETYPE if set, else darknet's choice from the CPU's features,
# patch 0023; "choose": darknet's choice even where OPENBLAS_CORETYPE is
# set; a name: that OPENBLAS_CORETYPE, e.g. "default Haswell SkylakeX").
set -eu
root=$(cd "$(dirname "$0")/../.." && pwd)
python3 "$root/scripts/compare/provenance.py" - -- "$0" "$@" | sed 's/^/== /' # the machine, its BLAS, the commit, the command
build=${1:-$root/build}
steps=${2:-3}
rounds=${3:-3}
batch=${BENCH_BATCH:-32}
threads=${BENCH_THREADS:-"1 2"}
dn=$build/darknet-src/cfg
cfgs=${BENCH_CFGS:-"$dn/cifar.cfg $root/cfg/fmnist.cfg $root/cfg/fmnist-tiny.cfg $dn/yolov3-tiny.cfg"}
py=/usr/bin/python3

/usr/bin/python3 -c "import torch" 2>/dev/null \
    || { echo "bench-pytorch: needs Debian's python3-torch (apt-get install python3-torch)" >&2; exit 1; }
[ -x "$build/tests/bench_train" ] && [ -x "$build/tests/bench_train_reference" ] \
    || cmake --build "$build" --target bench_train bench_train_reference
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

# The kernels: by default what darknet runs with for a user of this machine
# (bench_train chooses as darknet does); a forced older kernel (e.g. an
# environment's Haswell on an AVX-512 CPU) is slower. Each word of
# BENCH_CORETYPE gets its own before/after rows and its own sgemm peak.
kernels=${BENCH_CORETYPE:-default}
# run a command under kernel word $1
with_kernel() {
    k=$1
    shift
    case "$k" in
        default) "$@" ;;
        choose) env -u OPENBLAS_CORETYPE "$@" ;;
        *) OPENBLAS_CORETYPE=$k "$@" ;;
    esac
}
for k in $kernels; do
    # the core OpenBLAS reports, and the anchor: its sgemm peak per thread
    # (GFLOP/s on one thread); t threads are held against t times it
    with_kernel "$k" env OPENBLAS_VERBOSE=2 OPENBLAS_NUM_THREADS=1 "$build/tests/bench_train" /dev/null 0 0 \
        2>&1 | sed -n 's/^Core: //p' | tail -n 1 >"$tmp/core.$k" || true
    with_kernel "$k" env OPENBLAS_NUM_THREADS=1 OMP_NUM_THREADS=1 "$build/tests/bench_train" --peak 2 \
        | sed -n 's/^\([0-9.]*\) GFLOP\/s.*/\1/p' >"$tmp/peak.$k"
done

# best images/s of one command over the rounds (one figure per round in $1)
best() { sort -n "$1" | tail -n 1; }
rate() { sed -n 's/^\([0-9.]*\) images\/s.*/\1/p'; }

printf '%-15s %5s %3s %-10s %9s %9s %9s %10s %10s %9s %8s %8s\n' cfg batch thr kernel before after pytorch \
    after/before after/pytorch GFLOP/img after%pk torch%pk
for cfg in $cfgs; do
    size=
    case "$cfg" in
        *.cfg:*) size=${cfg##*:} cfg=${cfg%:*} ;;
    esac
    name=$(basename "$cfg" .cfg)
    if [ -n "$size" ]; then
        name=$name-$size
    else
        case "$name" in
            cifar) size=28 ;;
            yolo*) size=96 ;;
        esac
    fi
    sed -e "s/^batch *=.*/batch=$batch/" -e 's/^subdivisions *=.*/subdivisions=1/' \
        ${size:+-e "s/^width *=.*/width=$size/" -e "s/^height *=.*/height=$size/"} \
        "$cfg" >"$tmp/$name.cfg"
    # at least STEPS batches and about 2 s of the reference per run
    n=$(OPENBLAS_NUM_THREADS=1 OMP_NUM_THREADS=1 "$build/tests/bench_train_reference" \
        "$tmp/$name.cfg" 1 1 2>/dev/null | rate | awk -v s="$steps" -v b="$batch" \
        '{ n = int(2 * $1 / b + 0.5); print (n > s ? n : s) }')
    for t in $threads; do
        : >"$tmp/torch"
        for k in $kernels; do : >"$tmp/ref.$k" ; : >"$tmp/opt.$k" ; done
        r=0
        while [ $r -lt "$rounds" ]; do
            for k in $kernels; do
                with_kernel "$k" env OPENBLAS_NUM_THREADS=$t OMP_NUM_THREADS=$t \
                    "$build/tests/bench_train_reference" "$tmp/$name.cfg" "$n" 1 2>/dev/null | rate >>"$tmp/ref.$k"
                with_kernel "$k" env OPENBLAS_NUM_THREADS=$t OMP_NUM_THREADS=$t \
                    "$build/tests/bench_train" "$tmp/$name.cfg" "$n" 1 2>/dev/null >"$tmp/opt.out"
                rate <"$tmp/opt.out" >>"$tmp/opt.$k"
                gflop=$(sed -n 's/^\([0-9.]*\) GFLOP per image.*/\1/p' "$tmp/opt.out")
            done
            OPENBLAS_NUM_THREADS=$t OMP_NUM_THREADS=$t "$py" "$root/scripts/bench/bench_torch.py" \
                "$tmp/$name.cfg" "$n" 1 "$t" | rate >>"$tmp/torch"
            r=$((r + 1))
        done
        p=$(best "$tmp/torch")
        for k in $kernels; do
            b=$(best "$tmp/ref.$k") a=$(best "$tmp/opt.$k")
            peak=$(awk -v t="$t" '{ print $1 * t }' "$tmp/peak.$k")
            printf '%-15s %5d %3d %-10s %9s %9s %9s %9.2fx %9.2fx %9.4f %7.1f%% %7.1f%%\n' "$name" "$batch" "$t" \
                "$(cat "$tmp/core.$k")" "$b" "$a" "$p" "$(echo "$a $b" | awk '{ print $1 / $2 }')" \
                "$(echo "$a $p" | awk '{ print $1 / $2 }')" "$gflop" \
                "$(echo "$a $gflop $peak" | awk '{ print 100 * $1 * $2 / $3 }')" \
                "$(echo "$p $gflop $peak" | awk '{ print 100 * $1 * $2 / $3 }')"
        done
    done
done
for k in $kernels; do
    echo "(kernel $(cat "$tmp/core.$k") from BENCH_CORETYPE word '$k': OpenBLAS's sgemm peak on 1024x1024 matrices," \
         "one thread, $(cat "$tmp/peak.$k") GFLOP/s)"
done
echo "(peak: times the thread count; GFLOP/img: a training step's floating point operations per image, 2 per"
echo " multiply-add of the conv and connected layers' forward pass, weight gradients and input gradients, as im2col"
echo " counts them (Winograd does fewer); %pk: images/s x GFLOP/img / the row kernel's peak; PyTorch measured once"
echo " per round, with the environment as it is)"
echo "(images/s, best of $rounds runs of at least $steps batches (about 2 s) after 1 warm-up; cifar at 28x28, yolo at 96x96 unless CFG:SIZE;"
echo " environment OPENBLAS_CORETYPE=${OPENBLAS_CORETYPE:-unset}; Darknet threads = OPENBLAS_NUM_THREADS = OMP_NUM_THREADS," \
     "PyTorch torch.set_num_threads)"
