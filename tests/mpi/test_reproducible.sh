#!/bin/sh
# Usage: test_reproducible.sh DARKNET SOURCE_DIR WORK_DIR
# The same cfg and seed give the same run: under a real `mpirun -np 2`, each
# run twice from the cfg alone (initial weights included), the final
# weights are byte-identical and so are the ranks' per-step losses and
# decisions, for the classifier (flips, two loader threads per rank) with
# bsp, selsync's defaults, fedavg, selsync with overlap=1 and with lag=2,
# local SGD and ssp (one worker beside the server),
# the detector (jitter, colour, mosaic) with bsp and selsync, and selsync
# in virtual time. Another
# seed gives other weights (the check above can fail). A run cut by a
# checkpoint and resumed ends with the uninterrupted run's weights.
set -u
darknet=$1 src=$2 work=$3
rm -rf "$work"; mkdir -p "$work/backup"
. "$src/tests/common/checks.sh"
mpi() { timeout 120 ${MPIEXEC:-mpirun} --oversubscribe -np 2 "$@"; }
fmnist_data

# losses DIR: every rank's per-step loss and decision (the metrics files)
losses() {
    for r in 0 1; do
        awk -F'\t' '/^#/ { next } !k { for (i = 1; i <= NF; i++) { if ($i == "loss") l = i; if ($i == "decision") d = i }; k = 1; next }
                    { print $1, $l, $d }' "$1/m.$r.tsv"
    done
}
# train NAME KIND DATA CFG [WEIGHTS]: one run in its own folder; rank 0's weights in NAME/backup
train() {
    name=$1 kind=$2 data=$3 cfg=$4 weights=${5:-}
    d=$work/$name; rm -rf "$d"; mkdir -p "$d/backup"
    sed "s#^backup=.*#backup=$d/backup#" "$data" >"$d/run.data"
    { sed '/^\[selsync\]/,$d' "$cfg"; printf '[selsync]\nlog=%s/m.%%r.tsv\n' "$d"; sed '1,/^\[selsync\]/d' "$cfg"; } >"$d/run.cfg"
    mpi "$darknet" $kind train "$d/run.data" "$d/run.cfg" $weights >"$d/out" 2>&1
}
# same NAME KIND DATA CFG: two runs of CFG agree byte for byte
same() {
    pair=$1
    train "$pair.a" $2 "$3" "$4"; ra=$?
    train "$pair.b" $2 "$3" "$4"; rb=$?
    check "$pair: both runs exit 0 ($ra, $rb)" '[ $ra -eq 0 ] && [ $rb -eq 0 ]'
    check "$pair: the same final weights" 'cmp -s "$work/$pair.a/backup/run.weights" "$work/$pair.b/backup/run.weights" ||
        cmp -s "$work/$pair.a/backup/run_final.weights" "$work/$pair.b/backup/run_final.weights"'
    losses "$work/$pair.a" >"$work/$pair.a/losses"; losses "$work/$pair.b" >"$work/$pair.b/losses"
    check "$pair: the same losses and decisions on every rank and step" \
        '[ -s "$work/$pair.a/losses" ] && cmp -s "$work/$pair.a/losses" "$work/$pair.b/losses"'
    grep -q " local" "$work/$pair.a/losses" && echo "  ($pair: $(grep -c " sync" "$work/$pair.a/losses") of $(wc -l <"$work/$pair.a/losses") rank-steps synchronised)"
}
cls() { # SELSYNC_LINES: fmnist-tiny, 16 steps (selsync: local steps after the 4th)
    sed 's/^max_batches=.*/max_batches=16/' "$src/cfg/fmnist-tiny.cfg"
    printf '\n[selsync]\n%s\n' "$1"
    case "$1" in method=selsync*) printf 'warmup=4\nwindow=4\n' ;; esac
}

cls 'method=bsp' >"$work/bsp.cfg"
cls 'method=selsync' >"$work/selsync.cfg"
cls 'method=fedavg
fedavg_interval=4' >"$work/fedavg.cfg"
cls 'method=selsync
overlap=1' >"$work/overlap.cfg"
cls 'method=selsync
lag=2' >"$work/lag.cfg"
cls 'method=local' >"$work/local.cfg"
cls 'method=ssp' >"$work/ssp.cfg"
for m in bsp selsync fedavg overlap lag local ssp; do
    same cls-$m classifier "$work/fmnist.data" "$work/$m.cfg"
done

# virtual time (1 Gbit/s, one thread per rank): the clock differs from run
# to run, the training does not
OMP_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1 SELSYNC_VIRTUAL=bandwidth=1Gbit,latency=50us \
    same cls-virtual classifier "$work/fmnist.data" "$work/selsync.cfg"

# another seed: other initial weights and draws, so other final weights
cls 'method=bsp
seed=2' >"$work/seed2.cfg"
train cls-seed2 classifier "$work/fmnist.data" "$work/seed2.cfg"
check "another seed gives other weights" '[ -s "$work/cls-seed2/backup/run.weights" ] &&
    ! cmp -s "$work/cls-bsp.a/backup/run.weights" "$work/cls-seed2/backup/run.weights"'

# the detector: jitter, colour jitter and mosaic
python3 "$src/tests/mpi/make_tiny_detection.py" "$work/det" 8 >/dev/null
for m in bsp selsync; do
    sed -e 's/^max_batches=.*/max_batches=8/' -e 's/^learning_rate=.*/learning_rate=0.01/' \
        -e 's/^decay=.*/decay=0.0005\nmosaic=1\nhue=.1\nsaturation=1.5\nexposure=1.5/' \
        -e 's/^jitter=.*/jitter=.2/' "$work/det/tiny.cfg" >"$work/det-$m.cfg"
    printf '\n[selsync]\nmethod=%s\n' $m >>"$work/det-$m.cfg"
    [ $m = selsync ] && printf 'warmup=2\nwindow=2\n' >>"$work/det-$m.cfg"
    same det-$m detector "$work/det/tiny.data" "$work/det-$m.cfg"
done

# a resumed run: 16 steps, or 8, a checkpoint and 8 more from it
cls 'method=selsync
checkpoint_every=8' >"$work/ck.cfg"
train ck-whole classifier "$work/fmnist.data" "$work/ck.cfg"
sed 's/^max_batches=.*/max_batches=8/' "$work/ck.cfg" >"$work/ck8.cfg"
train ck-first classifier "$work/fmnist.data" "$work/ck8.cfg"
cp "$work/ck-first/backup/run_checkpoint.weights" "$work/at8.weights" 2>/dev/null
train ck-resumed classifier "$work/fmnist.data" "$work/ck.cfg" "$work/at8.weights"
check "resumed: goes on from step 8" 'grep -q "resumed at step 8" "$work/ck-resumed/out"'
check "resumed: the uninterrupted run's final weights" '[ -s "$work/ck-whole/backup/run.weights" ] &&
    cmp -s "$work/ck-whole/backup/run.weights" "$work/ck-resumed/backup/run.weights"'

[ "$fail" -gt 0 ] && for d in "$work"/*/out; do echo "--- $d"; tail -3 "$d"; done
echo "$pass passed, $fail failed"
[ "$fail" -eq 0 ]
