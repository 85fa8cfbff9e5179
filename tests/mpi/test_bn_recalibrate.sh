#!/bin/sh
# Usage: test_bn_recalibrate.sh CHECK DARKNET SOURCE_DIR RANKS WORK_DIR
# BatchNorm recalibration of the final model (bn_recalibrate) on RANKS
# ranks with label-skewed shards (label:2: rank r holds classes 2r, 2r+1
# only): a network with three normalised layers (two convolutional, one
# fully connected) trains a few bsp steps through the plugin path
# (CHECK train); at TRAIN_END every rank re-estimates the statistics on the
# first 25 images of its shard (two batches of 16, the second partial).
#  - every rank ends with the same statistics, bit for bit;
#  - they equal, to float rounding, the batch statistics of Darknet's own
#    training forward pass over the union of the ranks' 25 images as one
#    batch (CHECK reference: every layer's input normalised with the
#    statistics of the layers before it, variance divided by n - 1);
#  - the statistics before TRAIN_END are not (the check can fail);
#  - rank 0 says so once; bn_recalibrate out of range is refused with the
#    cfg file, line and key, bn_recalibrate=0 leaves the statistics as the
#    final average made them.
set -u
check_prog=$1 darknet=$2 src=$3 np=$4 work=$5
rm -rf "$work"; mkdir -p "$work/backup"
. "$src/tests/common/checks.sh"
fmnist_data
mpirun_() { timeout 300 ${MPIEXEC:-mpirun} --oversubscribe -np "$@"; }

# 30 training images of each class 0 .. 2*np-1 (every one held by a rank)
: >"$work/train.list"
c=0
while [ $c -lt $((2 * np)) ]; do
    grep "_c${c}_" "$src/data/fashion-mnist/train.list" | head -n 30 >>"$work/train.list"
    c=$((c + 1))
done

net() { # net BATCH: the network
    printf '[net]\nbatch=%s\nsubdivisions=1\nheight=28\nwidth=28\nchannels=3\nlearning_rate=0.05\npolicy=constant\n' "$1"
    printf 'max_batches=100\nmomentum=0.9\ndecay=0.0005\n\n'
    printf '[convolutional]\nbatch_normalize=1\nfilters=8\nsize=3\nstride=1\npad=1\nactivation=leaky\n\n'
    printf '[maxpool]\nsize=2\nstride=2\n\n'
    printf '[convolutional]\nbatch_normalize=1\nfilters=8\nsize=3\nstride=1\npad=1\nactivation=leaky\n\n'
    printf '[maxpool]\nsize=2\nstride=2\n\n'
    printf '[connected]\nbatch_normalize=1\noutput=16\nactivation=leaky\n\n'
    printf '[connected]\noutput=10\nactivation=linear\n\n[softmax]\ngroups=1\n'
}
{ net 16; printf '\n[selsync]\nmethod=bsp\npartition=label:2\nseed=3\nchart_every=0\nbn_recalibrate=25\n'; } >"$work/recal.cfg"
net $((25 * np)) >"$work/reference.cfg"

mpirun_ "$np" "$check_prog" train "$work/recal.cfg" "$work/train.list" 6 "$work/r" >"$work/train.out" 2>&1
check "training with bn_recalibrate=25 on $np ranks exits 0" '[ $? -eq 0 ]' || cat "$work/train.out"
check "rank 0 reports the recalibration once" \
    '[ "$(grep -c "BatchNorm statistics of the final model re-estimated on up to 25 training samples per rank" "$work/train.out")" -eq 1 ]'
r=0
: >"$work/union.list"
while [ $r -lt "$np" ]; do
    check "rank $r: the statistics equal rank 0's, bit for bit" 'cmp -s "$work/r.$r.after" "$work/r.0.after"'
    check "rank $r: only classes $((2 * r)) and $((2 * r + 1)) in its shard" \
        '[ -z "$(grep -v -e "_c$((2 * r))_" -e "_c$((2 * r + 1))_" "$work/r.$r.files")" ] && [ "$(wc -l <"$work/r.$r.files")" -eq 60 ]'
    head -n 25 "$work/r.$r.files" >>"$work/union.list"
    r=$((r + 1))
done
"$check_prog" reference "$work/reference.cfg" "$work/r.weights" "$work/union.list" "$work/reference.stats" \
    >"$work/reference.out" 2>&1
check "the reference pass exits 0" '[ $? -eq 0 ]' || cat "$work/reference.out"
# close A REF: same layers and channels; means within 2e-3 of a standard
# deviation (plus 2e-3 of the mean), variances within 2e-3 relative. The
# reference's statistics are float sums over up to 100 x 784 values: under
# -Ofast they are vectorised (errors near 1e-6), without (the sanitizer
# build) they run in one accumulator, whose rounding reaches a few 1e-4
# (bound: n x 2^-24 = 5e-3). The statistics before the recalibration are
# off by more than 0.9.
close() {
    awk 'NR == FNR { m[$1" "$2] = $3; v[$1" "$2] = $4; n++; next }
         { k = $1" "$2; if (!(k in m)) { bad++; next } seen++
           d = $3 - m[k]; if (d < 0) d = -d; s = sqrt(v[k]); mm = m[k] < 0 ? -m[k] : m[k]
           if (d > 2e-3 * (s + mm) + 1e-6) bad++
           e = $4 - v[k]; if (e < 0) e = -e; if (e > 2e-3 * v[k] + 1e-7) bad++ }
         END { exit !(n > 0 && seen == n && !bad) }' "$2" "$1"
}
check "three normalised layers, 32 channels" '[ "$(wc -l <"$work/reference.stats")" -eq 32 ]'
check "rank 0's statistics are those of one pass over all ranks' images" \
    'close "$work/r.0.after" "$work/reference.stats"'
check "the statistics before the recalibration are not (control)" \
    '! close "$work/r.0.before" "$work/reference.stats"'

# bn_recalibrate=0: the statistics are the final average's, not re-estimated
sed 's/^bn_recalibrate=25$/bn_recalibrate=0/' "$work/recal.cfg" >"$work/off.cfg"
mpirun_ "$np" "$check_prog" train "$work/off.cfg" "$work/train.list" 6 "$work/off" >"$work/off.out" 2>&1
check "bn_recalibrate=0: exits 0, no recalibration" \
    '[ $? -eq 0 ] && ! grep -q "re-estimated" "$work/off.out" && ! close "$work/off.0.after" "$work/reference.stats"'

# out of range: refused on every rank with file, line and key
sed 's/^bn_recalibrate=25$/bn_recalibrate=-1/' "$work/recal.cfg" >"$work/bad.cfg"
line=$(grep -n '^bn_recalibrate' "$work/bad.cfg" | cut -d: -f1)
mpirun_ "$np" "$darknet" classifier train "$work/fmnist.data" "$work/bad.cfg" >"$work/bad.out" 2>&1
rc=$?
check "bn_recalibrate=-1: exit status 1" '[ $rc -eq 1 ]' || cat "$work/bad.out"
check "bn_recalibrate=-1: the message names the file, line and key" \
    'grep -q "$work/bad.cfg:$line: \[selsync\] bn_recalibrate = '"'"'-1'"'"': out of range; allowed: an integer from 0 to 1000000 (0 = off)" "$work/bad.out"'
echo "$pass passed, $fail failed"
[ "$fail" -eq 0 ]
