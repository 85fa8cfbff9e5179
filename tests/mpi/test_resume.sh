#!/bin/sh
# Usage: test_resume.sh TRAIN_SYNTHETIC WORK_DIR
# Checkpoint and resume through the Darknet adapter under a real mpirun
# (2 ranks, deterministic synthetic data; see train_synthetic.c), for bsp
# and for selsync (whose ranks differ between synchronisations): a run of
# 12 steps split in two by a checkpoint at step 6 and a resume ends with the
# same parameters on every rank, the same decisions and the same step count
# as the uninterrupted run. Also selsync with the two guards past its
# warm-up: max_local=4 with a delta no change reaches (every fifth step
# synchronises; the checkpoint falls after a run of 4 local steps, so the
# resumed run must synchronise its first step: the run of local steps is
# restored), and target_sync=0.5 (delta adapts; the resumed run goes on
# from the adapted delta: the delta column equals the uninterrupted run's),
# and lag=3 (the checkpoint holds the agreements of steps 3-5, which steps
# 6-8 of the resumed run apply). A checkpoint of 2 ranks resumes on 4 and
# one of 4 on 2 (below).
set -u
prog=$1 work=$2
here=$(cd "$(dirname "$0")" && pwd)
rm -rf "$work"; mkdir -p "$work"
. "$(dirname "$0")/../common/checks.sh"
run() { # DIR ARGS...: NP (2) ranks in DIR (the checkpoint goes to DIR/backup/)
    d=$1; shift
    mkdir -p "$d/backup"
    (cd "$d" && timeout 120 ${MPIEXEC:-mpirun} --oversubscribe -np "${NP:-2}" "$prog" "$@" >>log 2>&1)
}
cfg() { # SELSYNC_LINES
    printf '[net]\nbatch=4\nsubdivisions=1\nheight=6\nwidth=6\nchannels=2\n'
    printf 'learning_rate=0.05\nmomentum=0.9\ndecay=0.0005\npolicy=constant\nmax_batches=100\n\n'
    printf '[convolutional]\nbatch_normalize=1\nfilters=4\nsize=3\nstride=1\npad=1\nactivation=leaky\n\n'
    printf '[connected]\noutput=3\nactivation=linear\n\n[softmax]\n\n[selsync]\n%s\ncheckpoint_every=6\nlog=m%%r.tsv\n' "$1"
}
column() { awk -F'\t' -v c="$1" '/^#/ { next } !k { for (i = 1; i <= NF; i++) if ($i == c) k = i; next } { print $k }' "$2"; }

selsync="method=selsync
window=3
warmup=2"
for name in bsp selsync max_local target_sync lag; do
    case $name in
    bsp) method="method=bsp" ;;
    selsync) method="$selsync
delta=0.2" ;;
    max_local) method="$selsync
delta=1000
drift=0
lag=0
max_local=4" ;;
    target_sync) method="$selsync
delta=0.2
target_sync=0.5" ;;
    lag) method="$selsync
delta=0.2
drift=0
lag=3" ;;
    esac
    w=$work/$name
    mkdir -p "$w/whole" "$w/split"
    cfg "$method" >"$w/net.cfg"
    "$prog" "$w/net.cfg" 0 "$w/init" --save "$w/init.weights" >>"$w/log" 2>&1
    run "$w/whole" ../net.cfg 12 h --begin --init ../init.weights || bad "$name: uninterrupted run failed"
    run "$w/split" ../net.cfg 6 h1 --begin --init ../init.weights || bad "$name: first half failed"
    ck=$w/split/backup/net_checkpoint.weights
    [ -s "$ck" ] && ok || bad "$name: no checkpoint after the first half"
    cp "$ck" "$w/at6.weights"
    run "$w/split" ../net.cfg 6 h2 --begin --resume ../at6.weights || bad "$name: resumed half failed"
    grep -q "resumed at step 6" "$w/split/log" && ok || bad "$name: no 'resumed at step 6'"
    for r in 0 1; do
        a=$(awk '$1 == "final" { print $2 }' "$w/whole/h.$r.hashes")
        b=$(awk '$1 == "final" { print $2 }' "$w/split/h2.$r.hashes")
        [ -n "$a" ] && [ "$a" = "$b" ] && ok || bad "$name: rank $r final parameters differ ($a vs $b)"
        # the resumed steps are numbered 6..11 and hash as the uninterrupted ones
        awk '$1 ~ /^[0-9]+$/ && $1 >= 6' "$w/whole/h.$r.hashes" >"$w/a.$r"
        awk '$1 ~ /^[0-9]+$/' "$w/split/h2.$r.hashes" >"$w/b.$r"
        cmp -s "$w/a.$r" "$w/b.$r" && ok || bad "$name: rank $r parameters differ after some resumed step"
        # the metrics file goes on: 12 steps, the same decisions and smoothed norms
        column step "$w/split/m$r.tsv" | tr '\n' ' ' >"$w/steps.$r"
        [ "$(cat "$w/steps.$r")" = "0 1 2 3 4 5 6 7 8 9 10 11 " ] && ok || bad "$name: rank $r metrics steps: $(cat "$w/steps.$r")"
        columns="decision smoothed"
        [ $name = target_sync ] && columns="$columns delta"
        for c in $columns; do
            column $c "$w/whole/m$r.tsv" >"$w/c1"; column $c "$w/split/m$r.tsv" >"$w/c2"
            cmp -s "$w/c1" "$w/c2" && ok || bad "$name: rank $r column $c differs after resuming"
        done
    done
    grep -q "12 steps" "$w/split/log" && ok || bad "$name: the summary does not count 12 steps"
    case $name in
    max_local)
        d=$(column decision "$w/whole/m0.tsv" | tr '\n' ' ')
        [ "$d" = "sync sync local local local local sync local local local local sync " ] && ok \
            || bad "max_local: decisions $d" ;;
    target_sync)
        n=$(column delta "$w/whole/m0.tsv" | sort -u | wc -l)
        # (one value: delta never moved; it may alternate between two)
        [ "$n" -ge 2 ] && ok || bad "target_sync: delta took $n value in 12 steps (it does not adapt)" ;;
    lag)
        # steps 6-8 apply the agreements of steps 3-5, pending in the checkpoint:
        # one of them local, so a resumed run that lost them (and synchronised) differs
        d=$(column decision "$w/whole/m0.tsv" | sed -n '7,9p' | tr '\n' ' ')
        case $d in *local*) ok ;; *) bad "lag: steps 6-8 all synchronise ($d); the test checks nothing" ;; esac ;;
    esac
done
# --- resume at another rank count: 2 -> 4 and 4 -> 2 ---------------------------
# Local steps after the warm-up (delta no change reaches, no bound, no
# lag), so the ranks
# differ at the checkpoint; a job of FROM ranks writes it at step 6, and a
# job of TO ranks resumes it: every rank starts from the same model (its
# hash right after the begin), the old ranks' mean, which is what the old
# job's own final average of that checkpoint gives (resumed at FROM with no
# step), except the rolling variances, which are those of the old ranks'
# data pooled (the variance of their rolling means added), and not the old
# rank 0's; the first line says what changed, and
# the resumed job trains on from step 6.
w=$work/resize
mkdir -p "$w"
cfg "$selsync
delta=1000
drift=0
max_local=0
lag=0" >"$w/net.cfg"
"$prog" "$w/net.cfg" 0 "$w/init" --save "$w/init.weights" >>"$w/log" 2>&1
for pair in 2:4 4:2; do
    from=${pair%:*} to=${pair#*:}
    NP=$from run "$w/old$from" ../net.cfg 6 h --begin --init ../init.weights || bad "$pair: the $from-rank job failed"
    cp "$w/old$from/backup/net_checkpoint.weights" "$w/ck$from.weights" || bad "$pair: no checkpoint"
    NP=$from run "$w/mean$from" ../net.cfg 0 m --begin --resume ../ck$from.weights --save ../mean$from.weights \
        || bad "$pair: the $from-rank average of the checkpoint failed"
    NP=$to run "$w/new$from" ../net.cfg 0 n --begin --resume ../ck$from.weights --save ../resized$from.weights \
        || bad "$pair: resuming on $to ranks failed"
    [ "$(cat "$w/new$from"/n.*.begun | sort -u | wc -l)" -eq 1 ] && [ "$(ls "$w/new$from"/n.*.begun | wc -l)" -eq "$to" ] \
        && ok || bad "$pair: the $to ranks do not start from one model: $(cat "$w/new$from"/n.*.begun | tr '\n' ' ')"
    python3 "$here/check_pooled_stats.py" "$w/resized$from.weights" "$w/mean$from.weights" "$w/old$from"/h.*.stats \
        && ok || bad "$pair: the resumed model is not the $from ranks' mean with their BatchNorm statistics pooled"
    [ "$(cut -d' ' -f2 "$w/new$from/n.0.begun")" != "$(awk '$1 == 5 { print $2 }' "$w/old$from/h.0.hashes")" ] \
        && ok || bad "$pair: the resumed model is the old rank 0's own, not the mean"
    grep -q "resumed at step 6 from a checkpoint of $from ranks on $to: every rank starts from the old ranks' mean model" \
        "$w/new$from/log" && ok || bad "$pair: no line saying what changed"
    NP=$to run "$w/on$from" ../net.cfg 3 o --begin --resume ../ck$from.weights || bad "$pair: training on after resuming failed"
    [ "$(column step "$w/on$from/m0.tsv" | tr '\n' ' ')" = "6 7 8 " ] && ok \
        || bad "$pair: the resumed steps are $(column step "$w/on$from/m0.tsv" | tr '\n' ' ')"
done
# --- resume_batch = global --------------------------------------------------------
# The 4-rank checkpoint (4 samples per rank and step) resumed on 2 ranks
# with resume_batch = global trains 2 mini-batches of 4 per rank and step,
# the old global batch of 16: the same bits as a job whose cfg says batch=8
# subdivisions=2 resuming it with the per-rank rule; its steps go on from 6.
# On 3 ranks 16 samples are not whole mini-batches per rank: refused, with
# the key's line, by every rank.
cfg "$selsync
delta=1000
drift=0
max_local=0
lag=0
resume_batch=global" >"$w/global.cfg"
cfg "$selsync
delta=1000
drift=0
max_local=0
lag=0" | sed 's/^batch=4$/batch=8/; s/^subdivisions=1$/subdivisions=2/' >"$w/eight.cfg"
NP=2 run "$w/global" ../global.cfg 3 g --begin --resume ../ck4.weights || bad "global: resuming on 2 ranks failed"
NP=2 run "$w/eight" ../eight.cfg 3 g --begin --resume ../ck4.weights || bad "global: the batch=8 job failed"
grep -q "each rank trains 8 samples per step (2 mini-batches of 4): the checkpoint's global batch of 16 (resume_batch = global)" \
    "$w/global/log" && ok || bad "global: no line saying the global batch is kept"
[ "$(column step "$w/global/m0.tsv" | tr '\n' ' ')" = "6 7 8 " ] && ok \
    || bad "global: the resumed steps are $(column step "$w/global/m0.tsv" | tr '\n' ' ')"
for r in 0 1; do
    a=$(awk '$1 == "final" { print $2 }' "$w/global/g.$r.hashes")
    b=$(awk '$1 == "final" { print $2 }' "$w/eight/g.$r.hashes")
    [ -n "$a" ] && [ "$a" = "$b" ] && ok || bad "global: rank $r differs from the batch=8 subdivisions=2 job ($a vs $b)"
done
NP=3 run "$w/three" ../global.cfg 3 g --begin --resume ../ck4.weights && bad "global: 16 samples on 3 ranks were accepted"
[ "$(grep -c "global.cfg:.*: \[selsync\] resume_batch = global: the checkpoint's global batch of 16 samples (4 ranks of 4) is not a whole number of mini-batches of 4 samples" "$w/three/log")" -eq 3 ] \
    && ok || bad "global: the refusal on 3 ranks is not every rank's: $(cat "$w/three/log")"
echo "$pass passed, $fail failed"
[ "$fail" -eq 0 ]
