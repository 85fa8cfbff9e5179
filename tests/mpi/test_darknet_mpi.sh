#!/bin/sh
# Usage: test_darknet_mpi.sh DARKNET SOURCE_DIR WORK_DIR
# The darknet executable under a real `mpirun -np 2`:
#  - classifier training on Fashion-MNIST with [selsync]: exits 0, the
#    decision is appended to Darknet's per-iteration line, a summary and a
#    metrics file per rank are written, the weights are written once;
#  - detector training on a tiny generated detection set: exits 0, final
#    weights written once;
#  - ranks that built different networks, a file missing on one rank, or a
#    bad [selsync] value end the whole job with a message, never a hang.
set -u
darknet=$1 src=$2 work=$3
here=$(cd "$(dirname "$0")" && pwd)
rm -rf "$work"; mkdir -p "$work/backup"
. "$src/tests/common/checks.sh"
mpi() { timeout 120 ${MPIEXEC:-mpirun} --oversubscribe "$@"; }

fmnist_data

# --- classifier ----------------------------------------------------------------
{ sed 's/^max_batches=.*/max_batches=20/' "$src/cfg/fmnist-tiny.cfg"
  printf '\n[selsync]\ndelta=0.3\nwindow=5\nlog=%s/cls.%%r.tsv\n' "$work"; } >"$work/cls.cfg"
mpi -np 2 "$darknet" classifier train "$work/fmnist.data" "$work/cls.cfg" >"$work/cls.out" 2>&1
check "classifier under mpirun exits 0" '[ $? -eq 0 ]'
check "weights saved once" '[ "$(grep -c "Saving weights" "$work/cls.out")" -eq 1 ] && [ -s "$work/backup/cls.weights" ]'
check "decision on the iteration line" 'grep -q "^20, .* images | .*synced [0-9]*/20 " "$work/cls.out"'
check "iteration lines from rank 0 only" '[ "$(grep -c " avg, " "$work/cls.out")" -eq 20 ]'
check "summary printed" 'grep -q "^selsync: summary: method=selsync, 2 ranks, 20 steps" "$work/cls.out"'
check "a metrics file per rank" '[ "$(grep -vc "^#" "$work/cls.0.tsv")" -eq 21 ] && [ "$(grep -vc "^#" "$work/cls.1.tsv")" -eq 21 ]'
check "the partition recorded in the metrics" '[ "$(grep -c "^# partition iid rank" "$work/cls.0.tsv")" -eq 2 ]'
check "ranks trained on different shards" '! cmp -s "$work/cls.0.tsv" "$work/cls.1.tsv"'

# loads_match OUT: with injection a sender loads b' + s images and every other
# rank b', so the ranks load K*s + N*b' images per step: the summary's mean
# per rank and step must be b' + K*s/N, from the sizes rank 0 reported.
loads_match() {
    awk '/injection: each step/ { sub(/.*injection: each step /, ""); k = $1; n = $3; s = $6; own = $16; sub(",", "", own) }
         /^selsync: summary: data injection sent/ { got = $(NF - 11) }
         END { want = own + k * s / n; printf "  (own images per rank and step: %s, expected %.2f)\n", got, want
               exit !(k > 0 && got != "" && got + 0 > want - 0.006 && got + 0 < want + 0.006) }' "$1"
}
{ sed 's/^max_batches=.*/max_batches=12/' "$src/cfg/fmnist-tiny.cfg"
  printf '\n[selsync]\npartition=label:5\ninject_alpha=0.5\ninject_beta=0.5\n'; } >"$work/cls-inject.cfg"
mpi -np 2 "$darknet" classifier train "$work/fmnist.data" "$work/cls-inject.cfg" >"$work/cls-inject.out" 2>&1
check "classifier with injection exits 0" '[ $? -eq 0 ]'
check "classifier injection: only senders load their shared images" 'loads_match "$work/cls-inject.out"'

# --- detector ------------------------------------------------------------------
python3 "$here/make_tiny_detection.py" "$work/det" 8
# one image whose label file holds each class once, the higher class first:
# its class is 0 (a tie goes to the lowest class)
cp "$work/det/images/img000.png" "$work/det/images/tie.png"
printf '1 0.25 0.25 0.2 0.3\n0 0.70 0.70 0.3 0.2\n' >"$work/det/labels/tie.txt"
echo "$work/det/images/tie.png" >>"$work/det/train.list"
{ cat "$work/det/tiny.cfg"; printf '\n[selsync]\nmethod=bsp\n'; } >"$work/det.cfg"
cp "$work/det.cfg" "$work/det-skew.cfg"
printf 'partition=label:1\ninject_alpha=0.5\ninject_beta=0.5\nlog=%s/det.%%r.tsv\n' "$work" >>"$work/det-skew.cfg"
mpi -np 2 "$darknet" detector train "$work/det/tiny.data" "$work/det.cfg" >"$work/det.out" 2>&1
check "detector under mpirun exits 0" '[ $? -eq 0 ]'
check "detector weights saved once" '[ "$(grep -c "Saving weights" "$work/det.out")" -eq 1 ] && [ -s "$work/det/backup/det_final.weights" ]'
check "detector summary" 'grep -q "^selsync: summary: method=bsp, 2 ranks, 6 steps, 6 synchronised" "$work/det.out"'

# one class per rank (the most frequent class of each image's label file)
# and injection: detection samples (image + boxes) travel between ranks
mpi -np 2 "$darknet" detector train "$work/det/tiny.data" "$work/det-skew.cfg" >"$work/det-skew.out" 2>&1
check "detector with label:1 and injection exits 0" '[ $? -eq 0 ]'
# expected files per class: the most frequent class of a label file, a tie
# going to the lowest class
want0=$(for f in "$work"/det/labels/*.txt; do awk '{ n[$1]++ } END { b = -1; for (c = 0; c < 2; c++) if (n[c] > (b < 0 ? 0 : n[b])) b = c; print b }' "$f"; done | grep -c '^0$')
want1=$(for f in "$work"/det/labels/*.txt; do awk '{ n[$1]++ } END { b = -1; for (c = 0; c < 2; c++) if (n[c] > (b < 0 ? 0 : n[b])) b = c; print b }' "$f"; done | grep -c '^1$')
check "detector partition: a file's class is its most frequent, ties to the lowest ($want0 and $want1 files)" 'grep -q "^selsync: rank 0: partition label rank 0: $want0 samples; 0:$want0$" "$work/det-skew.out" && grep -q "^selsync: rank 0: partition label rank 1: $want1 samples; 1:$want1$" "$work/det-skew.out"'
check "detector partition by label files" 'grep -q "^selsync: rank 0: partition label rank 0: [0-9]* samples; 0:[0-9]*$" "$work/det-skew.out" && grep -q "^selsync: rank 0: partition label rank 1: [0-9]* samples; 1:[0-9]*$" "$work/det-skew.out"'
check "detector injection: only senders load their shared images" 'loads_match "$work/det-skew.out"'
check "detector injection bytes recorded" 'awk -F"\t" "!/^#/ && \$1 != \"step\" { s += \$11 } END { exit !(s > 0) }" "$work/det.0.tsv" "$work/det.1.tsv"'

# --- failures end the whole job ----------------------------------------------------
sed 's/^filters=8$/filters=6/' "$work/cls.cfg" >"$work/other.cfg"
mpi -np 1 "$darknet" classifier train "$work/fmnist.data" "$work/cls.cfg" : \
    -np 1 "$darknet" classifier train "$work/fmnist.data" "$work/other.cfg" >"$work/layout.out" 2>&1
rc=$?
check "different networks: job fails, no hang (status $rc)" '[ $rc -ne 0 ] && [ $rc -ne 124 ]'
check "different networks: message" 'grep -q "differs from rank 0" "$work/layout.out"'

mpi -np 1 "$darknet" classifier train "$work/fmnist.data" "$work/cls.cfg" : \
    -np 1 "$darknet" classifier train "$work/missing.data" "$work/cls.cfg" >"$work/missing.out" 2>&1
rc=$?
check "file missing on one rank: job fails, no hang (status $rc)" '[ $rc -ne 0 ] && [ $rc -ne 124 ]'
check "file missing on one rank: message" 'grep -q "Couldn.t open file: $work/missing.data" "$work/missing.out"'

sed 's/^delta=0.3$/delta=-1/' "$work/cls.cfg" >"$work/bad.cfg"
mpi -np 2 "$darknet" classifier train "$work/fmnist.data" "$work/bad.cfg" >"$work/bad.out" 2>&1
rc=$?
check "bad [selsync] value: job fails (status $rc)" '[ $rc -ne 0 ] && [ $rc -ne 124 ]'
check "bad [selsync] value: message names file, line and key" 'grep -q "$work/bad.cfg:[0-9]*: \[selsync\] delta = .-1.: out of range" "$work/bad.out"'
check "bad [selsync] value: every rank reports it" 'grep -q "selsync: rank 0: $work/bad.cfg:[0-9]*: \[selsync\] delta" "$work/bad.out" && grep -q "selsync: rank 1: $work/bad.cfg:[0-9]*: \[selsync\] delta" "$work/bad.out"'

sed 's/^delta=0.3$/partition=label:11/' "$work/cls.cfg" >"$work/k11.cfg"
mpi -np 2 "$darknet" classifier train "$work/fmnist.data" "$work/k11.cfg" >"$work/k11.out" 2>&1
rc=$?
check "label:K with K > classes: job fails before training (status $rc)" '[ $rc -ne 0 ] && [ $rc -ne 124 ] && ! grep -q " avg, " "$work/k11.out"'
check "label:K with K > classes: message" 'grep -q "$work/k11.cfg:[0-9]*: \[selsync\] partition = .label:11.: " "$work/k11.out"'

[ "$fail" -gt 0 ] && for f in cls det det-skew layout missing bad k11; do echo "--- $f"; tail -5 "$work/$f.out"; done
echo "$pass passed, $fail failed"
[ "$fail" -eq 0 ]
