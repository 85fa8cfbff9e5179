#!/bin/sh
# Cost of the SelSync hooks on steps that do not synchronise: trains a cfg
# with SelSync's defaults on RANKS ranks with a threshold no step reaches
# (delta=1e30: every step after the warm-up is local unless the drift rule
# averages), then the same cfg with local SGD (method=local: no change
# measured, no agreement), and prints from the per-step metrics of every
# rank what a SelSync local step spends beyond a local SGD step:
# measuring the change (SelSync's t_measure less local SGD's: both passes
# also check finiteness and apply Darknet's update where the engine does)
# and the agreement (that of the last rank to arrive, its own cost; the
# rest is waiting for it), each as a share of local SGD's step
# (t_compute + t_measure).
# Usage: scripts/bench/bench-overhead.sh [RANKS] [STEPS] [CFG] [OTHER_DARKNET]
#   CFG: a classifier cfg (default cfg/fmnist.cfg, on Fashion-MNIST) or a
#        detector's (a cfg with [yolo], on the detection set, batch 16);
#   OTHER_DARKNET: another build's darknet, run right after this build's on
#        the same cfg, so that the two are measured side by side.
# Environment: BENCH_SELSYNC, more [selsync] lines for SelSync (e.g. "lag=1");
#   BENCH_SIZE, the network's width and height in pixels instead of the cfg's.
# Prints the machine, the OpenBLAS environment and the commit first.
set -eu
common_root=$(cd "$(dirname "$0")/../.." && pwd)
. "$common_root/scripts/common.sh"
ranks=${1:-2}
steps=${2:-300}
cfg=${3:-$root/cfg/fmnist.cfg}
other=${4:-}
fmnist_workdir
python3 "$root/scripts/compare/provenance.py" - -- "$0" "$@" | sed 's/^/== /' # the machine, its BLAS, the commit, the command
if grep -q '^\[yolo\]' "$cfg"; then
    kind=detector data=$root/data/fmnist-det/fmnist-det.data
    [ -f "$data" ] || python3 "$root/scripts/data/make-detection-set.py" >/dev/null
    sed "s#^backup=.*#backup=$work#" "$data" >"$work/run.data"
else
    kind=classifier
    cp "$work/fmnist.data" "$work/run.data"
fi
net_part() { sed -e '/^\[selsync\]/,$d' -e "s/^max_batches=.*/max_batches=$steps/" \
                 ${BENCH_SIZE:+-e "s/^width=.*/width=$BENCH_SIZE/" -e "s/^height=.*/height=$BENCH_SIZE/"} "$cfg"; }
{ net_part; printf '\n[selsync]\ndelta=1e30\nwindow=25\nlog=%s/run.%%r.tsv\n%s\n' "$work" "${BENCH_SELSYNC:-}"; } >"$work/run.cfg"
{ net_part; printf '\n[selsync]\nmethod=local\nlog=%s/run.%%r.tsv\n' "$work"; } >"$work/local.cfg"

# train DARKNET CFG: one run; its per-step metrics in $work/run.*.tsv
train() {
    rm -f "$work"/run.*.tsv
    mpirun -np "$ranks" --oversubscribe "$1" $kind train "$work/run.data" "$2" >"$work/out" 2>&1 \
        || { tail "$work/out"; exit 1; }
}

# measure DARKNET: SelSync's run, then local SGD's, then the shares
measure() {
    train "$1" "$work/local.cfg"
    # local SGD's mean step (the mean over ranks of its steps after the first)
    base=$(awk -F'\t' -v ranks="$ranks" '/^#/ { next } $1 == "step" { for (k = 1; k <= NF; k++) col[$k] = k; next }
        $1 > 0 { C += $col["t_compute"]; M += $col["t_measure"]; n++ }
        END { if (!n) exit 1; printf "%.9f %.9f", C / n, M / n }' "$work"/run.*.tsv) || { echo "no local SGD step"; exit 1; }
    train "$1" "$work/run.cfg"
    # per step: the mean over ranks, and the agreement of the last rank to
    # arrive (the minimum over ranks: its own cost, without waiting for others)
    awk -F'\t' -v ranks="$ranks" -v base="$base" '
        /^#/ { next }
        $1 == "step" { for (k = 1; k <= NF; k++) col[$k] = k; next }
        $col["decision"] == "local" {
            c[$1] += $col["t_compute"]; m[$1] += $col["t_measure"]; t = $col["t_agree"]; a[$1] += t
            if (!($1 in amin) || t < amin[$1]) amin[$1] = t }
        END {
            for (s in c) { n++; C += c[s] / ranks; M += m[s] / ranks; A += a[s] / ranks; L += amin[s] }
            if (!n) { print "no local step"; exit 1 }
            split(base, b, " "); local = b[1] + b[2]
            step = (C + M + A) / n
            printf "  local SGD: mean step %.2f ms: compute %.2f ms, finiteness check and update %.3f ms\n", 1e3 * local, 1e3 * b[1], 1e3 * b[2]
            printf "  SelSync local steps: %d; mean step %.2f ms: compute %.2f ms, measure and update %.3f ms, agree %.3f ms", n, 1e3 * step, 1e3 * C / n, 1e3 * M / n, 1e3 * A / n
            printf " (the last rank to arrive %.3f ms, the rest is waiting for it)\n", 1e3 * L / n
            extra = M / n - b[2]
            printf "  beyond local SGD: measuring %.2f%% + agreement %.2f%% = %.2f%% of its step\n", 100 * extra / local, 100 * L / n / local, 100 * (extra + L / n) / local
            printf "  waiting for the slowest rank at the agreement: %.2f%% of the step\n", 100 * (A - L) / n / local }' "$work"/run.*.tsv
}
echo "$build/darknet:"
measure "$build/darknet"
if [ -n "$other" ]; then
    echo "$other:"
    measure "$other"
fi
echo "($ranks ranks, $(basename "$cfg")${BENCH_SIZE:+ at ${BENCH_SIZE}x$BENCH_SIZE}, $steps steps, $kind${BENCH_SELSYNC:+, $BENCH_SELSYNC})"
