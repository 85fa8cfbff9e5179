#!/bin/sh
# Usage: test_darknet_mpi.sh DARKNET SOURCE_DIR WORK_DIR
# The darknet executable under a real `mpirun -np 2`:
#  - classifier training on Fashion-MNIST with [selsync]: exits 0, the
#    decision is appended to Darknet's per-iteration line, a summary and a
#    metrics file per rank are written, the weights are written once;
#  - every rank trains on its own shard (iid on a list of two images);
#  - data injection, classifier and detector: the images each rank loads
#    and the injected bytes of every step, exactly as the README's sizes give;
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
check "decision on the iteration line" 'grep -q "^20, .* images, elapsed [0-9:]* | .*synced [0-9]*/20 " "$work/cls.out"'
check "iteration lines from rank 0 only" '[ "$(grep -c " avg, " "$work/cls.out")" -eq 20 ]'
check "summary printed" 'grep -q "^selsync: summary: method=selsync, 2 ranks, 20 steps" "$work/cls.out"'
check "a metrics file per rank" '[ "$(grep -vc "^#" "$work/cls.0.tsv")" -eq 21 ] && [ "$(grep -vc "^#" "$work/cls.1.tsv")" -eq 21 ]'
check "the partition recorded in the metrics" '[ "$(grep -c "^# partition iid rank" "$work/cls.0.tsv")" -eq 2 ]'

# --- every rank trains on its own shard ------------------------------------------
# Two uniform images (flips and whole-image crops leave them unchanged) of
# classes 0 and 1: with iid on 2 ranks each rank holds one of them, so its
# first batch is 32 copies of it and its step-0 loss is that image's alone,
# as one process finds it on a list of that image only, from the same weights.
mkdir -p "$work/shard"
python3 "$src/tests/common/uniform_png.py" "$work/shard/dark_c0_.png" 28 28 40
python3 "$src/tests/common/uniform_png.py" "$work/shard/light_c1_.png" 28 28 220
"$darknet" partial "$src/cfg/fmnist-tiny.cfg" "" "$work/shard/init.weights" 100 >"$work/shard/partial.out" 2>&1
# shard_run NAME RANKS FILES...: step-0 losses of a run on a list of FILES
shard_run() {
    name=$1 np=$2; shift 2
    for f in "$@"; do echo "$work/shard/$f"; done >"$work/shard/$name.list"
    sed -e "s#^train=.*#train=$work/shard/$name.list#" "$work/fmnist.data" >"$work/shard/$name.data"
    { sed 's/^max_batches=.*/max_batches=1/' "$src/cfg/fmnist-tiny.cfg"
      printf '\n[selsync]\nlog=%s/shard/%s.%%r.tsv\n' "$work" "$name"; } >"$work/shard/$name.cfg"
    mpi -np "$np" "$darknet" classifier train "$work/shard/$name.data" "$work/shard/$name.cfg" \
        "$work/shard/init.weights" >"$work/shard/$name.out" 2>&1
}
shard_run dark 1 dark_c0_.png
shard_run light 1 light_c1_.png
shard_run both 2 dark_c0_.png light_c1_.png
loss0() { awk -F'\t' '/^#/ || $1 == "step" { next } $1 == 0 { print $2 }' "$work/shard/$1.tsv"; }
# the two ranks' step-0 losses are those of the two images, one each
echo "  step-0 losses: dark alone $(loss0 dark.0), light alone $(loss0 light.0); rank 0 $(loss0 both.0), rank 1 $(loss0 both.1)"
same_loss() { awk -v a="$1" -v b="$2" 'BEGIN { d = a - b; if (d < 0) d = -d; exit !(a != "" && d <= 1e-4 * (a < 0 ? -a : a)) }'; }
check "shards: the two images give different losses (the checks below can fail)" '! same_loss "$(loss0 dark.0)" "$(loss0 light.0)"'
check "shards: each rank trained on one image, not the same one" \
    '{ same_loss "$(loss0 both.0)" "$(loss0 dark.0)" && same_loss "$(loss0 both.1)" "$(loss0 light.0)"; } ||
     { same_loss "$(loss0 both.0)" "$(loss0 light.0)" && same_loss "$(loss0 both.1)" "$(loss0 dark.0)"; }'

# loads_match OUT: with injection a sender loads b' + s images and every other
# rank b', so the ranks load K*s + N*b' images per step: the summary's mean
# per rank and step must be b' + K*s/N, from the sizes rank 0 reported.
loads_match() {
    awk '/injection: each step/ { sub(/.*injection: each step /, ""); k = $1; n = $3; s = $6; own = $16; sub(",", "", own) }
         /^selsync: summary: data injection sent/ { got = $(NF - 11) }
         END { want = own + k * s / n; printf "  (own images per rank and step: %s, expected %.2f)\n", got, want
               exit !(k > 0 && got != "" && got + 0 > want - 0.006 && got + 0 < want + 0.006) }' "$1"
}
# inject_exact STEPS ROW_FLOATS BATCH ALPHA BETA METRICS...: the README's
# sizes, k = round(alpha N) senders of s = floor((b - b') / k) samples with
# b' = round(b / (1 + beta k)), a sample being ROW_FLOATS floats (image and
# truth); a broadcast counts (N - 1) copies of its payload (comm_mpi.h: a
# binomial tree), so every one of the STEPS steps the N ranks' inject_bytes
# add up to k (N - 1) s ROW_FLOATS 4.
inject_exact() {
    steps=$1 row=$2 b=$3 alpha=$4 beta=$5; shift 5
    awk -F'\t' -v steps="$steps" -v row="$row" -v b="$b" -v a="$alpha" -v be="$beta" -v n=$# '
        function round(x) { return int(x + 0.5) }
        /^#/ || $1 == "step" { next }
        { if (!($1 in sum)) m++; sum[$1] += $11 }
        END { k = round(a * n); if (k < 1) k = 1; own = round(b / (1 + be * k)); s = int((b - own) / k)
              want = k * (n - 1) * s * row * 4
              for (t in sum) if (sum[t] != want) { bad++; if (bad == 1) got = sum[t] " at step " t }
              printf "  (injected bytes per step, all ranks: expected %d = %d x %d x %d x %d floats x 4 bytes; %d steps, %d differ%s)\n",
                     want, k, n - 1, s, row, m, bad, bad ? ", e.g. " got : ""
              exit !(m == steps && bad == 0) }' "$@"
}
{ sed 's/^max_batches=.*/max_batches=12/' "$src/cfg/fmnist-tiny.cfg"
  printf '\n[selsync]\npartition=label:5\ninject_alpha=0.5\ninject_beta=0.5\nlog=%s/cls-inject.%%r.tsv\n' "$work"; } >"$work/cls-inject.cfg"
mpi -np 2 "$darknet" classifier train "$work/fmnist.data" "$work/cls-inject.cfg" >"$work/cls-inject.out" 2>&1
check "classifier with injection exits 0" '[ $? -eq 0 ]'
check "classifier injection: only senders load their shared images" 'loads_match "$work/cls-inject.out"'
# a sample: a 28x28x3 image and 10 class scores
check "classifier injection: exact bytes every step" \
    'inject_exact 12 $((28 * 28 * 3 + 10)) 32 0.5 0.5 "$work/cls-inject.0.tsv" "$work/cls-inject.1.tsv"'

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
# a sample: a canvas of the cfg's size and Darknet's 90 boxes of 5 floats
canvas=$(awk -F= '$1 == "width" { w = $2 } $1 == "height" { h = $2 } $1 == "channels" { c = $2 } END { print w * h * c }' "$work/det.cfg")
check "detector injection: exact bytes every step" \
    'inject_exact 6 $((canvas + 90 * 5)) 4 0.5 0.5 "$work/det.0.tsv" "$work/det.1.tsv"'

# --- failures end the whole job ----------------------------------------------------
sed 's/^filters=8$/filters=6/' "$work/cls.cfg" >"$work/other.cfg"
mpi -np 1 "$darknet" classifier train "$work/fmnist.data" "$work/cls.cfg" : \
    -np 1 "$darknet" classifier train "$work/fmnist.data" "$work/other.cfg" >"$work/layout.out" 2>&1
rc=$?
check "different networks: job fails, no hang (status $rc)" '[ $rc -ne 0 ] && [ $rc -ne 124 ]'
check "different networks: message" \
    'grep -q "the cfg (its parsed sections) differs: .* the network built from it differs: rank 0 ([^;]*; $work/cls.cfg): layout hash [0-9a-f]*; rank 1 ([^;]*; $work/other.cfg): layout hash" "$work/layout.out"'

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
