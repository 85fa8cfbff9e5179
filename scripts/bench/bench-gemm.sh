#!/bin/sh
# Training throughput of the same cfg with Darknet's stock gemm and with
# OpenBLAS, measured side by side in one run, printed as a ratio.
# Usage: scripts/bench/bench-gemm.sh [BUILD_DIR] [STEPS]
# Environment: BENCH_CFGS (default: upstream cfg/cifar.cfg and cfg/fmnist.cfg),
# BENCH_BATCH (default 32), OPENBLAS_NUM_THREADS (default 1).
set -eu
root=$(cd "$(dirname "$0")/../.." && pwd)
python3 "$root/scripts/compare/provenance.py" - -- "$0" "$@" | sed 's/^/== /' # the machine, its BLAS, the commit, the command
build=${1:-$root/build}
steps=${2:-3}
batch=${BENCH_BATCH:-32}
export OPENBLAS_NUM_THREADS=${OPENBLAS_NUM_THREADS:-1}
cfgs=${BENCH_CFGS:-"$build/darknet-src/cfg/cifar.cfg $root/cfg/fmnist.cfg"}

[ -x "$build/tests/bench_train" ] || cmake --build "$build" --target bench_train bench_train_stockgemm
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

rate() { "$1" "$2" "$steps" 1 2>/dev/null | sed -n 's/^\([0-9.]*\) images\/s.*/\1/p'; }

printf '%-14s %6s %14s %14s %8s\n' cfg batch "stock img/s" "OpenBLAS img/s" ratio
for cfg in $cfgs; do
    name=$(basename "$cfg" .cfg)
    sed -e "s/^batch=.*/batch=$batch/" -e 's/^subdivisions=.*/subdivisions=1/' "$cfg" >"$tmp/$name.cfg"
    blas=$(rate "$build/tests/bench_train" "$tmp/$name.cfg")
    stock=$(rate "$build/tests/bench_train_stockgemm" "$tmp/$name.cfg")
    printf '%-14s %6d %14s %14s %7.2fx\n' "$name" "$batch" "$stock" "$blas" \
        "$(echo "$blas $stock" | awk '{ print $1 / $2 }')"
done
echo "(one process, OPENBLAS_NUM_THREADS=$OPENBLAS_NUM_THREADS, $steps timed batches after 1 warm-up)"
