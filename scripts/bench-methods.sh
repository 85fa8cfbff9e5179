#!/bin/sh
# Bytes, sync fraction, time and held-out accuracy of several methods on the
# same network, data, rank count and step budget, run one after the other in
# one invocation and printed as one table.
# Usage: scripts/bench-methods.sh [RANKS] [STEPS]
# Environment:
#   BENCH_CFG      the network (default cfg/fmnist.cfg; its [selsync] is ignored)
#   BENCH_METHODS  runs, separated by spaces; each is a method followed by
#                  [selsync] settings, comma-separated, e.g. "bsp
#                  selsync,delta=0.3 fedavg,fedavg_interval=250
#                  selsync,delta=0.3,inject_alpha=0.5,inject_beta=0.5"
#   BENCH_COMMON   settings for every run, comma-separated (e.g. partition=label:5)
# With ssp, rank 0 is the parameter server: RANKS-1 workers train.
set -eu
. "$(dirname "$0")/common.sh"
ranks=${1:-2}
steps=${2:-500}
cfg=${BENCH_CFG:-$root/cfg/fmnist.cfg}
methods=${BENCH_METHODS:-"bsp selsync,delta=0.3 selsync,delta=0.5 fedavg,fedavg_interval=250 local"}
common=${BENCH_COMMON:-}
fmnist_workdir

printf '%-52s %7s %9s %9s %8s %8s %8s %7s %8s\n' run synced "sync MB" "inject MB" "wall s" "ms/step" "agree s" "comm %" top-1
i=0
for m in $methods; do
    i=$((i + 1))
    name=run$i
    { sed -e '/^\[selsync\]/,$d' -e "s/^max_batches=.*/max_batches=$steps/" "$cfg"
      printf '\n[selsync]\nmethod=%s\nlog=%s/%s.%%r.tsv\n' "$m${common:+,$common}" "$work" "$name" \
          | tr ',' '\n'; } >"$work/$name.cfg"
    # with ssp rank 0 is the parameter server: read the first worker's metrics
    r=0; case $m in ssp*) r=1 ;; esac
    start=$(date +%s.%N)
    mpirun -np "$ranks" --oversubscribe "$build/darknet" classifier train "$work/fmnist.data" \
        "$work/$name.cfg" >"$work/$name.out" 2>&1 || { tail "$work/$name.out"; exit 1; }
    wall=$(echo "$start $(date +%s.%N)" | awk '{ printf "%.1f", $2 - $1 }')
    top1=$("$build/darknet" classifier valid "$work/fmnist.data" "$work/$name.cfg" \
        "$work/$name.weights" 2>/dev/null | sed -n 's/.*top 1: \([0-9.]*\),.*/\1/p' | tail -n 1)
    awk -F'\t' -v m="$m" -v wall="$wall" -v top1="$top1" '
        /^#/ { next }
        $1 == "step" { for (k = 1; k <= NF; k++) col[$k] = k; next }
        { n++; s += ($col["decision"] == "sync"); b += $col["bytes_sent"]; inj += $col["inject_bytes"]
          agree += $col["t_agree"]
          comm += $col["t_measure"] + $col["t_agree"] + $col["t_transfer"]
          all += $col["t_compute"] + $col["t_measure"] + $col["t_agree"] + $col["t_transfer"] }
        END { printf "%-52s %6.1f%% %9.2f %9.2f %8s %8.1f %8.2f %6.1f%% %8s\n", m, 100 * s / n, b / 1e6,
              inj / 1e6, wall, 1e3 * all / n, agree, 100 * comm / all, top1 }' "$work/$name.$r.tsv"
done
echo "($ranks ranks, $steps steps each, $(basename "$cfg")${common:+, $common}; figures of rank 0 (ssp: worker" \
     "rank 1): MB sent without the final average, ms/step = compute + communication, agree s = time in the" \
     "agreement (ssp: blocked by the staleness bound), comm % = measure + agree + transfer over the step" \
     "time; top-1 on the 10000 held-out images)"
