#!/bin/sh
# Cost of the SelSync hooks on steps that do not synchronise: trains the
# Fashion-MNIST cfg with SelSync on RANKS ranks with a threshold no step
# reaches (so every step after the warm-up is local) and prints, from the
# per-step metrics of every rank, the time spent measuring the gradient and
# agreeing on the decision as a share of the step time.
# Usage: scripts/bench-overhead.sh [RANKS] [STEPS]
set -eu
. "$(dirname "$0")/common.sh"
ranks=${1:-2}
steps=${2:-300}
fmnist_workdir
{ sed -e '/^\[selsync\]/,$d' -e "s/^max_batches=.*/max_batches=$steps/" "$root/cfg/fmnist.cfg"
  printf '\n[selsync]\ndelta=1e30\nwindow=25\nlog=%s/run.%%r.tsv\n' "$work"; } >"$work/run.cfg"
mpirun -np "$ranks" --oversubscribe "$build/darknet" classifier train "$work/fmnist.data" \
    "$work/run.cfg" >"$work/out" 2>&1 || { tail "$work/out"; exit 1; }
# per step: the mean over ranks, and the agreement of the last rank to arrive
# (the minimum over ranks: the collective itself, without waiting for others)
awk -F'\t' -v ranks="$ranks" '
    /^#/ { next }
    $1 == "step" { for (k = 1; k <= NF; k++) col[$k] = k; next }
    $col["decision"] == "local" {
        c[$1] += $col["t_compute"]; m[$1] += $col["t_measure"]; t = $col["t_agree"]; a[$1] += t
        if (!($1 in amin) || t < amin[$1]) amin[$1] = t }
    END {
        for (s in c) { n++; C += c[s] / ranks; M += m[s] / ranks; A += a[s] / ranks; L += amin[s] }
        step = (C + M + A) / n
        printf "local steps: %d; mean step %.2f ms: compute %.2f ms, measure %.3f ms, agree %.3f ms", n, 1e3 * step, 1e3 * C / n, 1e3 * M / n, 1e3 * A / n
        printf " (the collective itself %.3f ms, the rest is waiting for the slowest rank)\n", 1e3 * L / n
        printf "hook cost on local steps: measure %.2f%% + agreement collective %.2f%% = %.2f%% of the step time\n", 100 * M / n / step, 100 * L / n / step, 100 * (M + L) / n / step
        printf "waiting for the slowest rank at the agreement: %.2f%% of the step time\n", 100 * (A - L) / n / step }' "$work"/run.*.tsv
echo "($ranks ranks, cfg/fmnist.cfg, $steps steps)"
