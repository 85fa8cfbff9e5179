#!/bin/sh
# Usage: test_distributed.sh TRAIN_SYNTHETIC RANKS WORK_DIR
# Distributed training through the Darknet adapter under a real mpirun with
# RANKS ranks, on deterministic synthetic data (see train_synthetic.c):
#  - bsp with gradient averaging equals one process with RANKS times the batch,
#    also with 400-byte buckets (a sum per tensor);
#  - bsp with its gradient buckets summed during the backward pass (overlap)
#    gives the bits of bsp that sums them after it;
#  - with BatchNorm, bsp with sync_batchnorm=1 equals one process with
#    RANKS times the batch (also with buckets summed meanwhile); without it
#    it does not;
#  - after every synchronisation all ranks hold bitwise identical parameters,
#    and decisions are identical on all ranks;
#  - delta=0 synchronises every step, a huge delta (drift=0) only during warm-up;
#  - the defaults' bound: with a huge delta and no drift rule the warm-up,
#    the lag's first step and then every 8th step synchronise;
#  - a flag raised on one rank alone makes every rank synchronise, and with
#    agree=mean the ranks' mean change decides instead;
#  - with lag=2 a step applies the agreement of two steps before;
#  - the drift rule: every rank logs the same (agreed) drift, a step
#    synchronises exactly when it exceeds the threshold, and the step after
#    an average measures 0;
#  - local SGD drifts apart and ends with one identical average;
#  - fedavg averages every fedavg_interval steps; with the outer step the
#    replicas are equal after each average, and not those of the plain one;
#  - ranks that built different random weights all start from rank 0's;
#  - speed_batches: a slow rank trains fewer mini-batches, and bsp still
#    equals one process with the whole batch.
set -u
prog=$1 np=$2 work=$3
here=$(cd "$(dirname "$0")" && pwd)
rm -rf "$work"; mkdir -p "$work"
. "$here/../common/checks.sh"
run() { timeout 120 ${MPIEXEC:-mpirun} --oversubscribe -np "$np" "$prog" "$@" >>"$work/log" 2>&1; }

# cfg BATCH BN SELSYNC_LINES: a small conv + connected network
cfg() {
    printf '[net]\nbatch=%s\nsubdivisions=1\nheight=6\nwidth=6\nchannels=2\n' "$1"
    printf 'learning_rate=0.05\nmomentum=0.9\ndecay=0.0005\npolicy=constant\nmax_batches=100\n\n'
    printf '[convolutional]\nbatch_normalize=%s\nfilters=4\nsize=3\nstride=1\npad=1\nactivation=leaky\n\n' "$2"
    printf '[connected]\noutput=3\nactivation=linear\n\n[softmax]\n'
    [ -n "$3" ] && printf '\n[selsync]\n%s\n' "$3"
    return 0
}
# column NAME FILE: the values of a metrics column, one per line
column() { awk -F'\t' -v c="$1" '/^#/ { next } !k { for (i = 1; i <= NF; i++) if ($i == c) k = i; next } { print $k }' "$2"; }

# --- bsp with gradient averaging == one process with np x batch ---------------
cfg 4 0 "" >"$work/init.cfg"
cfg 4 0 "method=bsp" >"$work/bsp.cfg"
cfg $((4 * np)) 0 "" >"$work/big.cfg"
"$prog" "$work/init.cfg" 0 "$work/init" --save "$work/init.weights" >>"$work/log" 2>&1
run "$work/bsp.cfg" 10 "$work/bsp" --init "$work/init.weights" --save "$work/bsp.weights" \
    || bad "($np ranks) bsp run failed"
"$prog" "$work/big.cfg" 10 "$work/big" --init "$work/init.weights" --save "$work/big.weights" >>"$work/log" 2>&1
python3 "$here/compare_weights.py" "$work/bsp.weights" "$work/big.weights" 1e-5 \
    && ok || bad "($np ranks) bsp on $np ranks differs from one process with batch $((4 * np))"
# the same with 400-byte buckets (the four tensors in separate buckets,
# several segments per sum), summed during the backward pass on the
# background thread and after it: each equals the one process, whose
# gradient no bucket touched
for o in 1 0; do
    cfg 4 0 "method=bsp
overlap=$o
bucket_mb=0.0004" >"$work/bsp-buckets$o.cfg"
    run "$work/bsp-buckets$o.cfg" 10 "$work/bsp-buckets$o" --background-sums --init "$work/init.weights" \
        --save "$work/bsp-buckets$o.weights" || bad "($np ranks) bsp with 400-byte buckets, overlap=$o, failed"
    python3 "$here/compare_weights.py" "$work/bsp-buckets$o.weights" "$work/big.weights" 1e-5 \
        && ok || bad "($np ranks) bsp with 400-byte buckets (overlap=$o) differs from one process with batch $((4 * np))"
done
grep -q "^selsync: summary: gradients averaged in [0-9]* buckets of 0.0004 MB" "$work/log" \
    && ok || bad "($np ranks) bsp: no summary of 400-byte buckets"

# --- sync_batchnorm: with BatchNorm, bsp equals one process with np x batch
# only when every layer normalises all ranks' batches as one (forward
# statistics and backward sums), also with the gradient buckets summed on
# the background thread while the backward pass sums the BatchNorm's
cfg 4 1 "" >"$work/bn-init.cfg"
cfg $((4 * np)) 1 "" >"$work/bn-big.cfg"
"$prog" "$work/bn-init.cfg" 0 "$work/bn-init" --save "$work/bn-init.weights" >>"$work/log" 2>&1
"$prog" "$work/bn-big.cfg" 10 "$work/bn-big" --init "$work/bn-init.weights" --save "$work/bn-big.weights" \
    >>"$work/log" 2>&1
for v in "sync_batchnorm=1" "sync_batchnorm=1
bucket_mb=0.0004"; do
    cfg 4 1 "method=bsp
$v" >"$work/bn-sync.cfg"
    run "$work/bn-sync.cfg" 10 "$work/bn-sync" --background-sums --init "$work/bn-init.weights" \
        --save "$work/bn-sync.weights" || bad "($np ranks) bsp with $v failed"
    python3 "$here/compare_weights.py" "$work/bn-sync.weights" "$work/bn-big.weights" 1e-5 \
        && ok || bad "($np ranks) bsp with BatchNorm and $(echo $v) differs from one process with batch $((4 * np))"
done
grep -q "sync_batchnorm=1" "$work/log" && ok || bad "($np ranks) the cfg line does not show sync_batchnorm=1"
grep -q "^selsync: summary: synchronised BatchNorm: 20 sums per rank (2.0 per step)" "$work/log" \
    && ok || bad "($np ranks) no summary of the synchronised BatchNorm's 20 sums (one layer, two a step, 10 steps)"
cfg 4 1 "method=bsp" >"$work/bn-local.cfg"
run "$work/bn-local.cfg" 10 "$work/bn-local" --init "$work/bn-init.weights" --save "$work/bn-local.weights" \
    || bad "($np ranks) bsp with BatchNorm failed"
python3 "$here/compare_weights.py" "$work/bn-local.weights" "$work/bn-big.weights" 1e-3 >>"$work/log" \
    && bad "($np ranks) control: bsp with each rank's own BatchNorm statistics equals the one process" || ok

# every rank's hash after STEP ("final" for the end): identical on all ranks?
same_hashes() { # PREFIX STEP
    n=$(cat "$1".*.hashes | awk -v s="$2" '$1 == s { print $2 }' | sort -u | wc -l)
    [ "$n" -eq 1 ]
}

# --- bsp with its gradient buckets summed during the backward pass ------------
# 400-byte buckets (the network's 2 layers in several): the same bits as
# with the buckets summed after the backward pass (overlap=0), replicas
# identical after every step, and the buckets did start during it.
cfg 4 1 "method=bsp
bucket_mb=0.0004" >"$work/ov1.cfg"
cfg 4 1 "method=bsp
overlap=0
bucket_mb=0.0004" >"$work/ov0.cfg"
cfg 4 1 "" >"$work/initbn.cfg"
"$prog" "$work/initbn.cfg" 0 "$work/initbn" --save "$work/init4.weights" >>"$work/log" 2>&1
for o in 1 0; do
    run "$work/ov$o.cfg" 8 "$work/ov$o" --begin --background-sums --init "$work/init4.weights" || bad "($np ranks) bsp overlap=$o run failed"
done
cmp -s "$work/ov1.0.hashes" "$work/ov0.0.hashes" && ok || bad "($np ranks) bsp: overlap=1 and overlap=0 differ"
for t in 0 3 7 final; do
    same_hashes "$work/ov1" $t || bad "($np ranks) bsp overlap: replicas differ after step $t"
done
grep -q "^selsync: summary: gradients averaged in [0-9]* buckets of 0.0004 MB, 100.0% of them started during the backward pass (overlap = 1" \
    "$work/log" && ok || bad "($np ranks) bsp overlap: the buckets did not start during the backward pass"
grep -q "buckets of 0.0004 MB, 0.0% of them started during the backward pass (overlap = 0" "$work/log" \
    && ok || bad "($np ranks) bsp overlap=0: buckets started early"
# --- selsync's parameter average in the background (overlap=1) ---------------
# Applied one step late, so replicas differ between the averages but are
# identical after the final one; the transport's background thread gives
# the bits of the sums run on the caller's thread; a step's row holds the
# bytes of the average sent during it (none in step 0).
for b in bg fg; do
    cfg 4 1 "delta=0
window=5
overlap=1
log=$work/late$b.%r.tsv" >"$work/late$b.cfg"
done
run "$work/latebg.cfg" 12 "$work/latebg" --begin --background-sums --init "$work/init4.weights" \
    || bad "($np ranks) selsync overlap=1 run failed"
run "$work/latefg.cfg" 12 "$work/latefg" --begin --init "$work/init4.weights" \
    || bad "($np ranks) selsync overlap=1 run without the thread failed"
cmp -s "$work/latebg.0.hashes" "$work/latefg.0.hashes" && ok \
    || bad "($np ranks) selsync overlap=1: the background thread changed the bits"
same_hashes "$work/latebg" final && ok || bad "($np ranks) selsync overlap=1: replicas differ after the final average"
same_hashes "$work/latebg" 5 && bad "($np ranks) selsync overlap=1: replicas equal after step 5 (average not late?)" || ok
[ "$(column bytes_sent "$work/latebg.0.tsv" | head -2 | tr '\n' ' ')" != "0 0 " ] \
    && [ "$(column bytes_sent "$work/latebg.0.tsv" | head -1)" = 0 ] && ok \
    || bad "($np ranks) selsync overlap=1: step rows do not carry the average's bytes a step late"
grep -q "aggregate=params overlap=1" "$work/log" && ok || bad "($np ranks) selsync overlap=1 not described"
grep -q "^selsync: summary: 12 parameter averages ran while the next step computed and were applied one step late" \
    "$work/log" && ok || bad "($np ranks) selsync overlap=1: the summary does not count the late averages"

decisions_agree() { # PREFIX: the decision columns of all ranks are equal
    column decision "$1.0.tsv" >"$1.d0"
    r=1
    while [ $r -lt "$np" ]; do
        column decision "$1.$r.tsv" | cmp -s - "$1.d0" || return 1
        r=$((r + 1))
    done
}

# --- selsync: identical parameters after every sync, identical decisions ------
# (averages applied at once, overlap=0; the late ones are checked above)
cfg 4 1 "method=selsync
delta=0.3
window=5
overlap=0
log=$work/sel.%r.tsv" >"$work/sel.cfg"
run "$work/sel.cfg" 40 "$work/sel" || bad "($np ranks) selsync run failed"
decisions_agree "$work/sel" && ok || bad "($np ranks) selsync decisions differ between ranks"
nsync=0 nlocal=0 diverged=0
t=0
for d in $(cat "$work/sel.d0"); do
    if [ "$d" = sync ]; then
        nsync=$((nsync + 1))
        same_hashes "$work/sel" $t || bad "($np ranks) parameters differ after synchronised step $t"
    else
        nlocal=$((nlocal + 1))
        same_hashes "$work/sel" $t || diverged=$((diverged + 1))
    fi
    t=$((t + 1))
done
echo "selsync delta=0.3 on $np ranks: $nsync synchronised, $nlocal local steps"
[ "$nsync" -ge 5 ] && ok || bad "($np ranks) fewer synchronised steps than the warm-up"
same_hashes "$work/sel" final && ok || bad "($np ranks) parameters differ after the final average"

# --- delta=0 synchronises every step; a huge delta only during warm-up --------
cfg 4 1 "delta=0
window=5
log=$work/d0.%r.tsv" >"$work/d0.cfg"
run "$work/d0.cfg" 20 "$work/d0" || bad "($np ranks) delta=0 run failed"
[ "$(column decision "$work/d0.0.tsv" | grep -c sync)" -eq 20 ] && ok || bad "($np ranks) delta=0 did not sync every step"
[ "$(column t_agree "$work/d0.1.tsv" | wc -l)" -eq 20 ] && ok || bad "($np ranks) rank 1 metrics incomplete"

cfg 4 1 "delta=1e30
drift=0
max_local=0
lag=0
window=5
warmup=7
log=$work/dinf.%r.tsv" >"$work/dinf.cfg"
run "$work/dinf.cfg" 20 "$work/dinf" || bad "($np ranks) huge delta run failed"
expected=$(printf 'sync\n%.0s' 1 2 3 4 5 6 7; printf 'local\n%.0s' $(seq 8 20))
[ "$(column decision "$work/dinf.0.tsv")" = "$expected" ] && ok || bad "($np ranks) huge delta: not exactly the 7 warm-up steps synchronised"
same_hashes "$work/dinf" 15 && bad "($np ranks) local steps did not drift apart (the hash check cannot fail)" || ok

# --- the defaults bound the local run: max_local=7, lag=1 ---------------------
# Δ and the drift never fire: the 5 warm-up steps, then step 5 (no
# agreement completed yet with the lag), then every 8th step (7 local
# steps in a row at most).
cfg 4 1 "delta=1e30
drift=0
window=5
log=$work/bound.%r.tsv" >"$work/bound.cfg"
run "$work/bound.cfg" 24 "$work/bound" || bad "($np ranks) defaults' bound run failed"
expected=$(for t in $(seq 0 23); do
    if [ $t -le 5 ] || [ $(((t - 5) % 8)) -eq 0 ]; then echo sync; else echo local; fi; done)
[ "$(column decision "$work/bound.0.tsv")" = "$expected" ] && ok \
    || bad "($np ranks) defaults: not the warm-up, the lag's first step and every 8th: $(column decision "$work/bound.0.tsv" | tr '\n' ' ')"
decisions_agree "$work/bound" && ok || bad "($np ranks) defaults' bound: decisions differ between ranks"
grep -q " agree=mean max_local=7 lag=1 aggregate=" "$work/log" && ok || bad "($np ranks) the defaults max_local=7 lag=1 not described"

# --- the drift rule ------------------------------------------------------------
# (delta never fires; averages at once, so the step after one starts from it)
cfg 4 1 "delta=1e30
window=5
warmup=3
overlap=0
max_local=0
lag=0
drift=0.008
log=$work/drift.%r.tsv" >"$work/drift.cfg"
run "$work/drift.cfg" 30 "$work/drift" || bad "($np ranks) drift run failed"
decisions_agree "$work/drift" && ok || bad "($np ranks) drift: decisions differ between ranks"
column drift "$work/drift.0.tsv" >"$work/drift.c0"
r=1
while [ $r -lt "$np" ]; do
    column drift "$work/drift.$r.tsv" | cmp -s - "$work/drift.c0" && ok || bad "($np ranks) drift: rank $r logs another drift"
    r=$((r + 1))
done
paste "$work/drift.d0" "$work/drift.c0" >"$work/drift.dc"
awk 'NR > 3 && (($1 == "sync") != ($2 > 0.008)) { bad++ } END { exit bad > 0 }' "$work/drift.dc" \
    && ok || bad "($np ranks) drift: a step after the warm-up synchronised without its drift above 0.008, or not with it"
awk 'NR > 3 && prev == "sync" && $2 != 0 { bad++ } { prev = $1 } END { exit bad > 0 }' "$work/drift.dc" \
    && ok || bad "($np ranks) drift: the step after an average does not measure 0"
[ "$(awk 'NR > 3 && $1 == "sync"' "$work/drift.dc" | wc -l)" -ge 3 ] && [ "$(awk 'NR > 3 && $1 == "local"' "$work/drift.dc" | wc -l)" -ge 10 ] \
    && ok || bad "($np ranks) drift: after the warm-up, fewer than 3 averages or 10 local steps: $(tr '\n' ' ' <"$work/drift.d0")"
t=0
for d in $(cat "$work/drift.d0"); do
    [ "$d" = sync ] && { same_hashes "$work/drift" $t || bad "($np ranks) drift: parameters differ after synchronised step $t"; }
    t=$((t + 1))
done
grep -q " drift=0.008 aggregate=params" "$work/log" && ok || bad "($np ranks) drift not described"

# --- one rank's flag alone makes every rank synchronise -----------------------
# (the spiked inputs may drive the loss to infinity a few steps later:
# those steps are skipped rather than ending the run)
spike=$((np - 1))
cfg 4 0 "delta=20
drift=0
agree=any
max_local=0
window=5
on_nonfinite=skip
log=$work/spike.%r.tsv" >"$work/spike.cfg"
run "$work/spike.cfg" 20 "$work/spike" --spike-rank $spike --spike-step 12 || bad "($np ranks) spike run failed"
decisions_agree "$work/spike" && ok || bad "($np ranks) spike: decisions differ between ranks"
flags_at_12=$(r=0; while [ $r -lt "$np" ]; do column local_flag "$work/spike.$r.tsv" | sed -n 13p; r=$((r + 1)); done | tr -d '\n')
want=$(r=0; while [ $r -lt "$np" ]; do [ $r -eq $spike ] && printf 1 || printf 0; r=$((r + 1)); done)
[ "$flags_at_12" = "$want" ] && ok || bad "($np ranks) spike: local flags at step 12 are $flags_at_12, expected $want"
[ "$(sed -n 13p "$work/spike.d0")" = sync ] && [ "$(sed -n 12p "$work/spike.d0")" = local ] \
    && ok || bad "($np ranks) spike: step 12 not synchronised by the one flag"
same_hashes "$work/spike" 12 && ok || bad "($np ranks) spike: parameters differ after the synchronised step"

# --- agree=mean: the ranks' mean change decides, not any one rank's flag -------
# The same spike (its change about 700-2200 on one rank, so the mean is a
# 1/np share of it): with delta 0.5 the mean rule holds at every step and
# the spike synchronises; with delta 600 the spike rank's flag is up alone
# and is outvoted (with agree=any it synchronised above).
for d in 0.5 600; do
    cfg 4 0 "delta=$d
drift=0
agree=mean
max_local=0
window=5
on_nonfinite=skip
log=$work/mean$d.%r.tsv" >"$work/mean$d.cfg"
    run "$work/mean$d.cfg" 20 "$work/mean$d" --spike-rank $spike --spike-step 12 || bad "($np ranks) agree=mean, delta $d: run failed"
    decisions_agree "$work/mean$d" && ok || bad "($np ranks) agree=mean, delta $d: decisions differ between ranks"
    r=0
    while [ $r -lt "$np" ]; do
        column change "$work/mean$d.$r.tsv" >"$work/mean$d.c$r"
        column local_flag "$work/mean$d.$r.tsv" >"$work/mean$d.f$r"
        r=$((r + 1))
    done
    # per step: the decision, the ranks' mean change (inf as 1e300), whether any flag is up
    paste "$work/mean$d.d0" "$work/mean$d".c[0-9]* "$work/mean$d".f[0-9]* | awk -v np="$np" '{
        m = 0; f = 0
        for (i = 2; i < 2 + np; i++) m += ($i ~ /inf/) ? 1e300 : $i
        for (; i < 2 + 2 * np; i++) f += $i
        print $1, m / np, (f > 0) }' >"$work/mean$d.dm"
    awk -v d="$d" 'NR > 5 && ($2 - d > 1e-6 * d || d - $2 > 1e-6 * d) && (($1 == "sync") != ($2 >= d)) { bad++ } END { exit bad > 0 }' \
        "$work/mean$d.dm" && ok || bad "($np ranks) agree=mean, delta $d: a step synchronised without the mean change at delta, or not with it: $(tr '\n' '|' <"$work/mean$d.dm")"
done
[ "$(sed -n 13p "$work/mean0.5.d0")" = sync ] && ok || bad "($np ranks) agree=mean: the spike at step 12 did not synchronise with delta 0.5"
[ "$(sed -n 13p "$work/mean600.dm" | cut -d' ' -f1,3)" = "local 1" ] \
    && ok || bad "($np ranks) agree=mean: with delta 600 the spike rank's flag was not outvoted at step 12: $(sed -n 13p "$work/mean600.dm")"
grep -q " granularity=model agree=mean aggregate=" "$work/log" && ok || bad "($np ranks) agree=mean not described"

# --- lag=2: a step's agreement completes two steps later ---------------------
# Steps 0-4 are the warm-up; 5 and 6 have no agreement to complete and
# synchronise; from step 7 on a step synchronises exactly when the ranks'
# mean change two steps before reached delta; decisions are the same on
# every rank and the replicas identical after a synchronised step.
# Without the lag the same run decides by each step's own mean.
for k in 2 0; do
    cfg 4 0 "delta=0.12
drift=0
agree=mean
max_local=0
lag=$k
window=5
overlap=0
log=$work/lag$k.%r.tsv" >"$work/lag$k.cfg"
    run "$work/lag$k.cfg" 24 "$work/lag$k" --init "$work/init.weights" || bad "($np ranks) lag=$k: run failed"
    decisions_agree "$work/lag$k" && ok || bad "($np ranks) lag=$k: decisions differ between ranks"
    r=0
    while [ $r -lt "$np" ]; do column change "$work/lag$k.$r.tsv" >"$work/lag$k.c$r"; r=$((r + 1)); done
    # per step: the decision, then whether the ranks' mean change of step - k reached delta
    paste "$work/lag$k.d0" "$work/lag$k".c[0-9]* | awk -v np="$np" -v k="$k" -v d=0.12 '{
        m = 0
        for (i = 2; i < 2 + np; i++) m += $i
        dec[NR] = $1; hit[NR] = m / np >= d
        } END { for (t = 1; t <= NR; t++) print dec[t], (t > k ? hit[t - k] : "-") }' >"$work/lag$k.dm"
    awk -v k="$k" 'NR >= 6 && NR <= 5 + k && $1 != "sync" { bad++ }
        NR > 5 + k && (($1 == "sync") != ($2 == 1)) { bad++ } END { exit bad > 0 }' "$work/lag$k.dm" \
        && ok || bad "($np ranks) lag=$k: a decision is not the mean change's of $k steps before: $(tr '\n' '|' <"$work/lag$k.dm")"
    [ "$(sed -n '8,$p' "$work/lag$k.dm" | cut -d' ' -f1 | sort -u | wc -l)" -eq 2 ] \
        && ok || bad "($np ranks) lag=$k: the decisions after step 6 are all alike; the test checks nothing"
done
for t in $(awk '$1 == "sync" { print NR - 1 }' "$work/lag2.dm"); do
    same_hashes "$work/lag2" "$t" || bad "($np ranks) lag=2: replicas differ after the synchronised step $t"
done
grep -q " agree=mean lag=2 aggregate=" "$work/log" && ok || bad "($np ranks) lag=2 not described"

# --- local SGD drifts and ends with one average ------------------------------
cfg 4 1 "method=local
log=$work/local.%r.tsv" >"$work/local.cfg"
run "$work/local.cfg" 10 "$work/local" || bad "($np ranks) local run failed"
[ "$(column decision "$work/local.0.tsv" | grep -c sync)" -eq 0 ] && ok || bad "($np ranks) local synchronised during training"
same_hashes "$work/local" 9 && bad "($np ranks) local replicas did not drift" || ok
same_hashes "$work/local" final && ok || bad "($np ranks) local: final average not identical"

# --- fedavg every 4 steps, each average at once (overlap=0) --------------------
cfg 4 1 "method=fedavg
fedavg_interval=4
overlap=0
log=$work/fed.%r.tsv" >"$work/fed.cfg"
run "$work/fed.cfg" 12 "$work/fed" || bad "($np ranks) fedavg run failed"
[ "$(column decision "$work/fed.0.tsv" | tr '\n' ' ')" = "local local local sync local local local sync local local local sync " ] \
    && ok || bad "($np ranks) fedavg did not average exactly every 4th step"
same_hashes "$work/fed" 7 && ok || bad "($np ranks) fedavg: parameters differ after an average"

# --- fedavg with the outer step (outer_momentum, outer_lr) --------------------
cfg 4 1 "method=fedavg
fedavg_interval=4
overlap=0
outer_momentum=0.5
outer_lr=1.5
log=$work/fedouter.%r.tsv" >"$work/fedouter.cfg"
run "$work/fedouter.cfg" 12 "$work/fedouter" || bad "($np ranks) fedavg with the outer step failed"
for t in 3 7 11; do
    same_hashes "$work/fedouter" $t && ok || bad "($np ranks) fedavg outer step: parameters differ after the average of step $t"
done
n=$(cat "$work/fed.0.hashes" "$work/fedouter.0.hashes" | awk '$1 == 7 { print $2 }' | sort -u | wc -l)
[ "$n" -eq 2 ] && ok || bad "($np ranks) fedavg outer step: the same parameters as the plain average at step 7"
grep -q " outer_momentum=0.5 outer_lr=1.5" "$work/log" && ok || bad "($np ranks) outer step not described"

# --- fedavg every 4 steps, each average a step late (the default) -------------
cfg 4 1 "method=fedavg
fedavg_interval=4
log=$work/fedlate.%r.tsv" >"$work/fedlate.cfg"
run "$work/fedlate.cfg" 12 "$work/fedlate" || bad "($np ranks) fedavg (late averages) run failed"
[ "$(column decision "$work/fedlate.0.tsv" | tr '\n' ' ')" = "local local local sync local local local sync local local local sync " ] \
    && ok || bad "($np ranks) fedavg (late averages) did not average every 4th step"
same_hashes "$work/fedlate" 7 && bad "($np ranks) fedavg: a late average was applied at once" || ok
same_hashes "$work/fedlate" final && ok || bad "($np ranks) fedavg (late averages): final average not identical"

# --- per-layer granularity -----------------------------------------------------
cfg 4 1 "delta=0.3
window=5
granularity=layer
log=$work/layer.%r.tsv" >"$work/layer.cfg"
run "$work/layer.cfg" 30 "$work/layer" || bad "($np ranks) granularity=layer run failed"
decisions_agree "$work/layer" && ok || bad "($np ranks) granularity=layer: decisions differ between ranks"
column layers_synced "$work/layer.0.tsv" | awk '$1 > 2 { exit 1 }' && ok || bad "($np ranks) more layers synchronised than the network has"

# --- every rank starts from rank 0's weights ------------------------------------
# --rank-init seeds Darknet's random initialisation with the rank: without
# [selsync] the ranks' weights differ; with it they are rank 0's, bitwise.
cfg 4 1 "" >"$work/plain.cfg"
cfg 4 1 "method=bsp" >"$work/init.cfg"
run "$work/plain.cfg" 0 "$work/plain" --rank-init || bad "($np ranks) run without [selsync] failed"
run "$work/init.cfg" 1 "$work/init" --rank-init || bad "($np ranks) bsp run from different random weights failed"
[ "$(cat "$work"/plain.*.loaded | sort -u | wc -l)" -eq "$np" ] && ok \
    || bad "($np ranks) --rank-init did not give every rank different weights (the check below cannot fail)"
[ "$(cat "$work"/init.*.loaded | sort -u | wc -l)" -eq 1 ] && cmp -s "$work/init.0.loaded" "$work/plain.0.loaded" \
    && ok || bad "($np ranks) after loading, the ranks do not all hold rank 0's weights"
# bsp averages gradients: from different weights the ranks would stay apart
same_hashes "$work/init" 0 && ok || bad "($np ranks) parameters differ after the first bsp step"

# --- speed_batches: a slow rank trains fewer of the step's mini-batches ------
# Batch 4 in 2 mini-batches of 2 per rank; the last rank sleeps 40 ms a
# step, so after the speeds are measured at step 2 it trains 1 mini-batch
# and the others the rest. Every rank's samples follow the lower ranks'
# (--loads), so each step's samples are those of one process with the
# whole batch (4 x np in 2 x np mini-batches of 2): bsp equals it, every
# rank divides its gradient sum by the ranks' mean batch, and the replicas
# stay identical.
cfg 4 0 "method=bsp
speed_batches=on
speed_every=2" | sed 's/^subdivisions=1$/subdivisions=2/' >"$work/speed.cfg"
cfg $((4 * np)) 0 "" | sed "s/^subdivisions=1\$/subdivisions=$((2 * np))/" >"$work/speed-big.cfg"
run "$work/speed.cfg" 10 "$work/speed" --init "$work/init.weights" --save "$work/speed.weights" --begin --loads \
    --slow-rank $((np - 1)) --slow-ms 40 || bad "($np ranks) bsp with speed_batches failed"
"$prog" "$work/speed-big.cfg" 10 "$work/speed-big" --init "$work/init.weights" --save "$work/speed-big.weights" \
    >>"$work/log" 2>&1
shares=$(grep -o "rank 0: step 2: mini-batches per rank by speed:[ 0-9]*" "$work/log" | sed 's/.*speed://')
[ "$(echo $shares | awk '{ print $NF }')" = 1 ] && [ "$(echo $shares | wc -w)" -eq "$np" ] && ok \
    || bad "($np ranks) speed_batches: the shares after step 2 are '$shares', the slow rank's not 1"
python3 "$here/compare_weights.py" "$work/speed.weights" "$work/speed-big.weights" 1e-5 \
    && ok || bad "($np ranks) bsp with batches that follow speed differs from one process with the whole batch"
same_hashes "$work/speed" 9 && ok || bad "($np ranks) speed_batches: the replicas differ after the last step"
grep -q "batches that follow speed: the shares changed [0-9]* time" "$work/log" && ok \
    || bad "($np ranks) speed_batches: no summary line"

[ "$fail" -gt 0 ] && tail -20 "$work/log"
echo "$pass passed, $fail failed"
[ "$fail" -eq 0 ]
