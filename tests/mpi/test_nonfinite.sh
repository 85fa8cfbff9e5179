#!/bin/sh
# Usage: test_nonfinite.sh TRAIN_SYNTHETIC RANKS WORK_DIR
# A NaN on one rank under a real mpirun with RANKS ranks (see
# train_synthetic.c: the last rank's step 4 has a NaN input, so its loss and
# gradient are NaN), method bsp, which synchronises every step:
#  - on_nonfinite=skip: every rank records step 4 as `skip` and the steps
#    before it as `sync`; no rank ever holds a parameter that is not finite,
#    also after the final average (the bad step spreads nowhere), and the
#    steps after it synchronise again;
#  - on_nonfinite=stop (the default): the job fails naming step 4 and the rank.
set -u
prog=$1 np=$2 work=$3
rm -rf "$work"; mkdir -p "$work"
. "$(dirname "$0")/../common/checks.sh"
run() { timeout 120 ${MPIEXEC:-mpirun} --oversubscribe -np "$np" "$prog" "$@" >>"$work/log" 2>&1; }
cfg() { # SELSYNC_LINES
    printf '[net]\nbatch=4\nsubdivisions=1\nheight=6\nwidth=6\nchannels=2\n'
    printf 'learning_rate=0.05\nmomentum=0.9\ndecay=0.0005\npolicy=constant\nmax_batches=100\n\n'
    printf '[convolutional]\nbatch_normalize=1\nfilters=4\nsize=3\nstride=1\npad=1\nactivation=leaky\n\n'
    printf '[connected]\noutput=3\nactivation=linear\n\n[softmax]\n\n[selsync]\n%s\n' "$1"
}
column() { awk -F'\t' -v c="$1" '/^#/ { next } !k { for (i = 1; i <= NF; i++) if ($i == c) k = i; next } { print $k }' "$2"; }
nan=$((np - 1))

cfg "method=bsp
aggregate=params
on_nonfinite=skip
log=$work/skip.%r.tsv" >"$work/skip.cfg"
run "$work/skip.cfg" 8 "$work/skip" --nan-rank $nan --nan-step 4 && ok || bad "($np ranks) on_nonfinite=skip: the run failed"
[ "$(column loss "$work/skip.$nan.tsv" | sed -n 5p)" = nan ] && ok || bad "($np ranks) the NaN input did not give rank $nan a NaN loss"
r=0
while [ $r -lt "$np" ]; do
    d=$(column decision "$work/skip.$r.tsv" | tr '\n' ' ')
    case $d in
        "sync sync sync sync skip "*) ok ;;
        *) bad "($np ranks) rank $r: decisions '$d', expected steps 0-3 sync and step 4 skip" ;;
    esac
    [ "$d" = "sync sync sync sync skip sync sync sync " ] && ok \
        || bad "($np ranks) rank $r: decisions '$d': the steps after the skipped one do not synchronise again"
    # third column of the hashes: parameters that are not finite
    awk '$3 != 0 { exit 1 }' "$work/skip.$r.hashes" && ok \
        || bad "($np ranks) rank $r holds parameters that are not finite (step hash count): $(awk '$3 != 0' "$work/skip.$r.hashes" | head -3 | tr '\n' ' ')"
    r=$((r + 1))
done

cfg "method=bsp
log=$work/stop.%r.tsv" >"$work/stop.cfg"
run "$work/stop.cfg" 8 "$work/stop" --nan-rank $nan --nan-step 4
rc=$?
[ $rc -ne 0 ] && [ $rc -ne 124 ] && ok || bad "($np ranks) on_nonfinite=stop: the job did not fail (status $rc)"
grep -q "selsync: rank $nan: \[selsync\] step 4: rank $nan: .*not finite" "$work/log" && ok \
    || bad "($np ranks) on_nonfinite=stop: no message naming step 4, rank $nan and 'not finite'"

[ "$fail" -gt 0 ] && tail -20 "$work/log"
echo "$pass passed, $fail failed"
[ "$fail" -eq 0 ]
