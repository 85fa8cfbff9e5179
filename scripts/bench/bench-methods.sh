#!/bin/sh
# Bytes, sync fraction, time and held-out accuracy of several methods on the
# same network, data, rank count and step budget, run one after the other in
# one invocation and printed as one table.
# Usage: scripts/bench/bench-methods.sh [RANKS] [STEPS]
# Environment:
#   BENCH_CFG      the network (default cfg/fmnist.cfg; its [selsync] is ignored)
#   BENCH_METHODS  runs, separated by spaces; each is a method followed by
#                  [selsync] settings, comma-separated, e.g. "bsp
#                  selsync,delta=0.3 fedavg,fedavg_interval=250
#                  selsync,delta=0.3,inject_alpha=0.5,inject_beta=0.5"
#   BENCH_COMMON   settings for every run, comma-separated (e.g. partition=label:5)
# RANKS is the number of training ranks of every run. With ssp rank 0 is a
# parameter server that does not train, so an ssp run launches RANKS+1
# processes (RANKS workers) and its row shows the first worker (rank 1).
# Columns: sync MB and KB/step are the bytes the row's rank sent to
# synchronise models (without the final average and without injection), in
# all and per step; vs bsp is sync MB over what bsp would have sent on the
# same training ranks in the same steps (the figure of the run's own
# summary, "-" where that is 0, i.e. on one rank); agree/blocked s is the time
# in the agreement collective, for ssp the time the staleness bound held the
# worker's pulls.
set -eu
common_root=$(cd "$(dirname "$0")/../.." && pwd)
. "$common_root/scripts/common.sh"
python3 "$root/scripts/compare/provenance.py" - -- "$0" "$@" | sed 's/^/== /' # the machine, its BLAS, the commit, the command
ranks=${1:-2}
steps=${2:-500}
cfg=${BENCH_CFG:-$root/cfg/fmnist.cfg}
methods=${BENCH_METHODS:-"bsp selsync,delta=0.3 selsync,delta=0.5 fedavg,fedavg_interval=250 local"}
common=${BENCH_COMMON:-}
fmnist_workdir

printf '%-52s %7s %9s %8s %7s %9s %8s %8s %15s %7s %8s\n' run synced "sync MB" KB/step "vs bsp" \
    "inject MB" "wall s" "ms/step" "agree/blocked s" "comm %" top-1
i=0
for m in $methods; do
    i=$((i + 1))
    name=run$i
    { sed -e '/^\[selsync\]/,$d' -e "s/^max_batches=.*/max_batches=$steps/" "$cfg"
      printf '\n[selsync]\nmethod=%s\nlog=%s/%s.%%r.tsv\n' "$m${common:+,$common}" "$work" "$name" \
          | tr ',' '\n'; } >"$work/$name.cfg"
    # with ssp rank 0 is the parameter server: one more process, and the
    # first worker's metrics
    r=0 np=$ranks; case $m in ssp*) r=1 np=$((ranks + 1)) ;; esac
    start=$(date +%s.%N)
    mpirun -np "$np" --oversubscribe "$build/darknet" classifier train "$work/fmnist.data" \
        "$work/$name.cfg" >"$work/$name.out" 2>&1 || { tail "$work/$name.out"; exit 1; }
    wall=$(echo "$start $(date +%s.%N)" | awk '{ printf "%.1f", $2 - $1 }')
    top1=$("$build/darknet" classifier valid "$work/fmnist.data" "$work/$name.cfg" \
        "$work/$name.weights" 2>/dev/null | sed -n 's/.*top 1: \([0-9.]*\),.*/\1/p' | tail -n 1)
    # MB bsp would have sent, from the summary (per rank, or per worker for ssp)
    bsp=$(sed -n -e 's/^selsync: summary: .*bsp would have sent \([0-9.]*\) MB.*/\1/p' \
        -e 's/^selsync: summary: .* vs \([0-9.]*\) MB sent for bsp.*/\1/p' "$work/$name.out" | tail -n 1)
    awk -F'\t' -v m="$m" -v wall="$wall" -v top1="$top1" -v bsp="${bsp:-0}" '
        /^#/ { next }
        $1 == "step" { for (k = 1; k <= NF; k++) col[$k] = k; next }
        { n++; s += ($col["decision"] == "sync"); b += $col["bytes_sent"]; inj += $col["inject_bytes"]
          agree += $col["t_agree"]
          comm += $col["t_measure"] + $col["t_agree"] + $col["t_transfer"]
          all += $col["t_compute"] + $col["t_measure"] + $col["t_agree"] + $col["t_transfer"] }
        END { vs = bsp > 0 ? sprintf("%.2fx", b / (bsp * 1e6)) : "-"
              printf "%-52s %6.1f%% %9.2f %8.1f %7s %9.2f %8s %8.1f %15.2f %6.1f%% %8s\n", m, 100 * s / n,
                     b / 1e6, b / n / 1e3, vs, inj / 1e6, wall, 1e3 * all / n, agree, 100 * comm / all, top1 }
        ' "$work/$name.$r.tsv"
done
echo "($ranks training ranks (ssp: + a parameter server), $steps steps each, $(basename "$cfg")${common:+, $common};" \
     "figures of rank 0 (ssp: worker rank 1): MB and KB/step sent to synchronise, without the final average;" \
     "vs bsp = that over what bsp would have sent; ms/step = compute + communication; agree/blocked s = time" \
     "in the agreement (ssp: pulls held by the staleness bound); comm % = measure + agree + transfer over the" \
     "step time; top-1 on the 10000 held-out images)"
