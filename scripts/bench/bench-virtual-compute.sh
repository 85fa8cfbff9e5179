#!/bin/sh
# How much a rank's computation, as virtual time counts it (the CPU time of
# its thread), grows when many ranks share the machine's cores: trains CFG
# (default cfg/fmnist-wide.cfg) for STEPS steps (default 40) with method
# local (no communication) under SELSYNC_VIRTUAL on each rank count given
# (default 1 4 16), one after the other, and prints the mean computation
# per step and rank, and its ratio to the first rank count's.
# Usage: scripts/bench/bench-virtual-compute.sh [STEPS] [CFG] [RANKS...]
# Environment: SELSYNC_BUILD_DIR (default build).
set -eu
root=$(cd "$(dirname "$0")/../.." && pwd)
python3 "$root/scripts/compare/provenance.py" - -- "$0" "$@" | sed 's/^/== /' # the machine, its BLAS, the commit, the command
steps=${1:-40} cfg=${2:-$root/cfg/fmnist-wide.cfg}
[ $# -gt 2 ] && shift 2 || set -- 1 4 16
darknet=${SELSYNC_BUILD_DIR:-$root/build}/darknet
data=$root/data/fashion-mnist/fmnist.data
[ -x "$darknet" ] || { echo "bench-virtual-compute: $darknet is missing (build first)" >&2; exit 2; }
python3 "$root/scripts/data/prepare-fashion-mnist.py" >/dev/null
export OMP_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1 OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
export SELSYNC_VIRTUAL=bandwidth=1Gbit,latency=50us
work=$(mktemp -d "${TMPDIR:-/tmp}/bench-virtual-compute.XXXXXX")
trap 'rm -rf "$work"' EXIT
{ sed "s/^max_batches=.*/max_batches=$steps/" "$cfg"; printf '\n[selsync]\nmethod=local\nchart_every=0\n'; } >"$work/run.cfg"
sed "s#^backup=.*#backup=$work#" "$data" >"$work/run.data"
echo "# $(basename "$cfg"), $steps steps, method local, $(getconf _NPROCESSORS_ONLN) cores; computation per step and rank (thread CPU time)"
printf '%6s %12s %8s\n' ranks "ms per step" ratio
first=""
for np in "$@"; do
    mpirun --oversubscribe -np "$np" "$darknet" classifier train "$work/run.data" "$work/run.cfg" >"$work/out" 2>&1 \
        || { tail -n 20 "$work/out" >&2; exit 1; }
    ms=$(sed -n 's/.*virtual time per rank: [0-9.]* s (compute \([0-9.]*\) s.*/\1/p' "$work/out" |
         awk -v s="$steps" '{ printf "%.2f", $1 / s * 1000 }')
    first=${first:-$ms}
    printf '%6d %12s %8s\n' "$np" "$ms" "$(awk -v a="$ms" -v b="$first" 'BEGIN { printf "%.2f", a / b }')"
done
