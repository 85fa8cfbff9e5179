#!/bin/sh
# Usage: test_detector_mpi.sh DARKNET SOURCE_DIR WORK_DIR TRAIN_SYNTHETIC
# The detector path end to end under a real mpirun with 2 ranks, on a tiny
# generated detection set:
#  - a short selsync run from fixed initial weights (TRAIN_SYNTHETIC writes
#    them from srand(1); Darknet's trainers seed their own from the clock):
#    the loss goes down (the mean of the last 10 steps below 0.7 x that of
#    the first 10; its loader threads still draw in an order of their own,
#    and 100 runs gave ratios of at most 0.06), rank 0 alone writes the final
#    weights, the metrics hold evaluation rows (mAP@0.5) every eval_every steps,
#    the last of which (above 0.05) equals `selsync map` of the final
#    weights (the ranks' mean model, which the final average makes every
#    rank's), to 1e-4;
#  - a rank killed with SIGKILL ends the job with a non-zero status (not the
#    timeout's); the last checkpoint is whole and a run resumed from it
#    continues at its step (read from the file) and finishes;
#  - a non-finite loss stops the job naming the step and the rank, or with
#    on_nonfinite = skip cannot repair infinite parameters and stops too;
#  - a missing or malformed label file stops the job naming the file, and
#    eval_every without a readable held-out list names the cfg line and list.
set -u
darknet=$1 src=$2 work=$3 synthetic=$4
rm -rf "$work"; mkdir -p "$work"
pass=0 fail=0
ok() { pass=$((pass + 1)); }
bad() { echo "FAIL $*"; fail=$((fail + 1)); }
mpi() { # SECONDS ARGS...
    t=$1; shift
    timeout "$t" ${MPIEXEC:-mpirun} --oversubscribe -np 2 "$darknet" detector train "$@"
}
column() { awk -F'\t' -v c="$1" '/^#/ { next } !k { for (i = 1; i <= NF; i++) if ($i == c) k = i; next } { print $k }' "$2"; }

python3 "$src/tests/mpi/make_tiny_detection.py" "$work/det" 16 >/dev/null
data=$work/det/tiny.data
cfg() { # NAME MAX_BATCHES LEARNING_RATE SELSYNC_LINES
    sed -e "s/^max_batches=.*/max_batches=$2/" -e "s/^learning_rate=.*/learning_rate=$3\nburn_in=20/" \
        "$work/det/tiny.cfg" >"$work/$1.cfg"
    printf '\n[selsync]\nlog=%s/%s-%%r.tsv\n%s\n' "$work" "$1" "$4" >>"$work/$1.cfg"
}

# --- a short run ---------------------------------------------------------------
"$synthetic" "$work/det/tiny.cfg" 0 "$work/init" --save "$work/init.weights" >"$work/init.log" 2>&1 \
    || bad "writing the initial weights failed (see init.log)"
cfg short 300 0.005 "method=selsync
eval_every=100"
mpi 300 "$data" "$work/short.cfg" "$work/init.weights" >"$work/short.log" 2>&1 && ok || bad "short run failed (see short.log)"
column loss "$work/short-0.tsv" >"$work/loss"
first=$(head -10 "$work/loss" | awk '{ s += $1 } END { print s / NR }')
last=$(tail -10 "$work/loss" | awk '{ s += $1 } END { print s / NR }')
awk -v a="$first" -v b="$last" 'BEGIN { exit !(b < 0.7 * a) }' && ok || bad "loss did not go down ($first -> $last)"
[ "$(grep -c 'Saving weights to .*short_final.weights' "$work/short.log")" -eq 1 ] && ok \
    || bad "the final weights were not written exactly once"
[ -s "$work/det/backup/short_final.weights" ] && ok || bad "no final weights"
rows=$(grep -c "^# eval	step=[0-9]*	wall_s=[0-9.]*	train_s=[0-9.]*	map50=[0-9.]*	eval_s=" "$work/short-0.tsv")
[ "$rows" -eq 3 ] && ok || bad "expected evaluation rows at steps 100, 200, 300; found $rows"
grep -q "^# eval" "$work/short-1.tsv" && bad "rank 1 evaluated" || ok
# the last row scores the ranks' mean model, which the final average makes
# every rank's and rank 0 writes: `selsync map` on the final weights gives
# the same mAP (rank 0's own model before the average would not)
row=$(sed -n 's/^# eval	step=300	.*	map50=\([0-9.]*\)	.*/\1/p' "$work/short-0.tsv")
"$darknet" selsync map "$data" "$work/short.cfg" "$work/det/backup/short_final.weights" >"$work/map.out" 2>"$work/map.err"
whole=$(sed -n 's/^mAP@0.5 = \([0-9.]*\) .*/\1/p' "$work/map.out")
echo "mAP@0.5 at step 300: $row in the metrics, $whole from selsync map on the final weights"
awk -v a="$row" -v b="$whole" 'BEGIN { d = a - b; if (d < 0) d = -d; exit !(a != "" && b != "" && d <= 1e-4) }' && ok \
    || bad "the step-300 evaluation ($row) is not selsync map of the final weights ($whole)"
# 300 steps find boxes (0.28-0.48 seen; the loader threads' order varies it)
awk -v a="${row:-0}" 'BEGIN { exit !(a > 0.05) }' && ok || bad "the step-300 mAP@0.5 is $row: the evaluation found no boxes"

# --- a rank killed with SIGKILL; resume from the last checkpoint ---------------
cfg kill 100000 0.001 "checkpoint_every=10"
mpi 600 "$data" "$work/kill.cfg" >"$work/kill.log" 2>&1 &
job=$!
until grep -qs "step 20: checkpoint" "$work/kill.log" || ! kill -0 $job 2>/dev/null; do sleep 0.2; done
victim=$(pgrep -f "^$darknet detector train $data $work/kill.cfg" | tail -1)
if [ -n "$victim" ] && grep -q "step 20: checkpoint" "$work/kill.log"; then
    kill -9 "$victim"
    wait $job
    rc=$?
    [ $rc -ne 0 ] && [ $rc -ne 124 ] && ok || bad "the job exited with status $rc after a rank was killed (124: it hung)"
    grep -qi "signal 9\|killed" "$work/kill.log" && ok || bad "no message names the killed process"
else
    bad "the kill run never reached its checkpoint at step 20"
    pkill -9 -f "^$darknet detector train $data $work/kill.cfg"
    wait $job
fi
ck=$work/det/backup/kill_checkpoint.weights
# the checkpoint's step from its Darknet header (images seen, a size_t at
# byte 12, over batch 4): one sealed as the job ended may have no message
seen=$(od -An -tu8 -j 12 -N 8 "$ck" 2>/dev/null | tr -d ' ')
step=$((${seen:-0} / 4))
echo "the last checkpoint: step $step"
[ "$step" -ge 20 ] && [ $((step % 10)) -eq 0 ] && ok || bad "the last checkpoint is at step $step, not 20, 30, ..."
cp "$ck" "$work/resume.weights" 2>/dev/null && ok || bad "no checkpoint after the kill"
sed -e "s/^max_batches=.*/max_batches=$((${step:-0} + 10))/" "$work/kill.cfg" >"$work/resume.cfg"
mpi 300 "$data" "$work/resume.cfg" "$work/resume.weights" >"$work/resume.log" 2>&1 \
    && ok || bad "resuming from the checkpoint failed (see resume.log)"
grep -q "resumed at step $step" "$work/resume.log" && ok || bad "not resumed at step $step"
grep -q "summary: method=selsync, 2 ranks, $((${step:-0} + 10)) steps" "$work/resume.log" \
    && ok || bad "the resumed run did not count $((${step:-0} + 10)) steps"

# --- non-finite loss ---------------------------------------------------------------
cfg nan 40 1e30 ""
mpi 300 "$data" "$work/nan.cfg" >"$work/nan.log" 2>&1
rc=$?
[ $rc -ne 0 ] && [ $rc -ne 124 ] && ok || bad "a NaN loss did not stop the job (rc $rc)"
grep -q "rank [01]: \[selsync\] step [0-9]*: rank [01]: \(the gradient\|a trained parameter\) is not finite (gradient's squared norm .*, loss .*); stopping" \
    "$work/nan.log" && ok || bad "no message naming the step and rank of the non-finite loss"
# a learning rate this large makes the parameters themselves infinite, which
# skipping cannot repair (a bad batch with finite parameters is skipped:
# test_nonfinite)
cfg skip 20 1e30 "on_nonfinite=skip"
mpi 300 "$data" "$work/skip.cfg" >"$work/skip.log" 2>&1
rc=$?
[ $rc -ne 0 ] && [ $rc -ne 124 ] && ok || bad "on_nonfinite=skip with infinite parameters did not stop (rc $rc)"
grep -q "a trained parameter is not finite .*; stopping (no setting can repair the parameters)" "$work/skip.log" \
    && ok || bad "no message naming the non-finite parameters"

# --- a missing and a malformed label file ------------------------------------------
lab=$(sed -n 1p "$work/det/train.list" | sed -e 's#/images/#/labels/#' -e 's#\.png$#.txt#')
mv "$lab" "$lab.away"
cfg labels 5 0.01 ""
mpi 120 "$data" "$work/labels.cfg" >"$work/missing.log" 2>&1
rc=$?
[ $rc -ne 0 ] && [ $rc -ne 124 ] && grep -q "$lab" "$work/missing.log" && ok || bad "a missing label file: rc $rc"
printf '0 0.5 0.5 0.2\n' >"$lab"
mpi 120 "$data" "$work/labels.cfg" >"$work/malformed.log" 2>&1
rc=$?
[ $rc -ne 0 ] && [ $rc -ne 124 ] && grep -q "$lab:1: " "$work/malformed.log" && ok || bad "a malformed label file: rc $rc"
mv "$lab.away" "$lab"

# --- eval_every without a readable held-out list -----------------------------------
cfg noeval 5 0.01 "eval_every=2"
grep -v '^valid' "$data" >"$work/novalid.data"
mpi 120 "$work/novalid.data" "$work/noeval.cfg" >"$work/novalid.log" 2>&1
rc=$?
[ $rc -ne 0 ] && [ $rc -ne 124 ] && grep -q "noeval.cfg:[0-9]*: \[selsync\] eval_every needs valid=" "$work/novalid.log" \
    && ok || bad "eval_every without valid=: rc $rc"
echo "valid=$work/none.list" >>"$work/novalid.data"
mpi 120 "$work/novalid.data" "$work/noeval.cfg" >"$work/nolist.log" 2>&1
rc=$?
[ $rc -ne 0 ] && [ $rc -ne 124 ] && grep -q "cannot read the held-out list $work/none.list" "$work/nolist.log" \
    && ok || bad "eval_every with a missing list: rc $rc"

echo "$pass passed, $fail failed"
[ "$fail" -eq 0 ]
