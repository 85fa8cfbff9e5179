#!/bin/sh
# Bytes, sync fraction, time and held-out accuracy of several methods on the
# same network, data, rank count and step budget, run one after the other in
# one invocation and printed as one table.
# Usage: scripts/bench-methods.sh [RANKS] [STEPS]
# Environment: BENCH_CFG (default cfg/fmnist.cfg), BENCH_METHODS (default
# "bsp selsync:0.3 selsync:0.5 fedavg:250 local"; selsync:D is selsync with
# delta=D, fedavg:I fedavg every I steps), SELSYNC_BUILD_DIR.
set -eu
. "$(dirname "$0")/common.sh"
ranks=${1:-2}
steps=${2:-500}
cfg=${BENCH_CFG:-$root/cfg/fmnist.cfg}
methods=${BENCH_METHODS:-"bsp selsync:0.3 selsync:0.5 fedavg:250 local"}
fmnist_workdir

printf '%-14s %8s %10s %12s %10s %10s %8s\n' method synced "MB/rank" "bytes/step" "wall s" "comm %" top-1
for m in $methods; do
    name=$(echo "$m" | tr ':.' '__')
    case $m in
        bsp) section="method=bsp" ;;
        local) section="method=local" ;;
        selsync:*) section="method=selsync
delta=${m#selsync:}" ;;
        fedavg:*) section="method=fedavg
fedavg_interval=${m#fedavg:}" ;;
        *) echo "unknown method $m" >&2; exit 1 ;;
    esac
    { sed -e '/^\[selsync\]/,$d' -e "s/^max_batches=.*/max_batches=$steps/" "$cfg"
      printf '\n[selsync]\n%s\nlog=%s/%s.%%r.tsv\n' "$section" "$work" "$name"; } >"$work/$name.cfg"
    start=$(date +%s.%N)
    mpirun -np "$ranks" --oversubscribe "$build/darknet" classifier train "$work/fmnist.data" \
        "$work/$name.cfg" >"$work/$name.out" 2>&1 || { tail "$work/$name.out"; exit 1; }
    wall=$(echo "$start $(date +%s.%N)" | awk '{ printf "%.1f", $2 - $1 }')
    top1=$("$build/darknet" classifier valid "$work/fmnist.data" "$work/$name.cfg" \
        "$work/$name.weights" 2>/dev/null | sed -n 's/.*top 1: \([0-9.]*\),.*/\1/p' | tail -n 1)
    awk -F'\t' -v m="$m" -v wall="$wall" -v top1="$top1" '
        NR > 1 { n++; s += ($8 == "sync"); b += $10; comm += $12 + $13 + $14; all += $11 + $12 + $13 + $14 }
        END { printf "%-14s %7.1f%% %10.2f %12.0f %10s %9.1f%% %8s\n", m, 100 * s / n, b / 1e6, b / n,
              wall, 100 * comm / all, top1 }' "$work/$name.0.tsv"
done
echo "($ranks ranks, $steps steps each, $(basename "$cfg"); MB and bytes/step: rank 0's synchronisation payload," \
     "final average excluded; comm %: measure + agree + transfer over the step time)"
