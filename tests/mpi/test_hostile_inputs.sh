#!/bin/sh
# Usage: test_hostile_inputs.sh DARKNET SOURCE_DIR WORK_DIR
# Hostile input through the real darknet executable, alone and under
# `mpirun -np 2`: bad data files, label lists and label files, bad [selsync]
# values, partitions at the extremes, damaged checkpoints. Each must end
# with exit status 1 to 123 (never a signal, never the outer timeout) and a
# message naming the file (and line or key where there is one); where a run
# has several ranks, every rank reports the error. Prints one line per case
# ("case NAME: exit N: first message line") for the record.
set -u
darknet=$1 src=$2 work=$3
rm -rf "$work"; mkdir -p "$work/backup"
. "$src/tests/common/checks.sh"
mpi() { timeout 120 ${MPIEXEC:-mpirun} --oversubscribe "$@"; }
cases=0

# refused NAME NP PATTERN EVERY_RANK CMD...: CMD (under mpirun when NP > 1)
# ends with exit status 1..123 and PATTERN in its output; EVERY_RANK=1: each
# of the NP ranks prints a line with PATTERN ("rank R: ..."); EVERY_RANK=n:
# PATTERN appears NP times (a message of Darknet's own, without a rank).
refused() {
    name=$1 np=$2 pattern=$3 every=$4; shift 4
    cases=$((cases + 1))
    if [ "$np" -gt 1 ]; then mpi -np "$np" "$@" >"$work/$name.log" 2>&1
    else timeout 120 "$@" >"$work/$name.log" 2>&1; fi
    rc=$?
    echo "case $name: exit $rc: $(grep -F -m1 -- "$pattern" "$work/$name.log" | cut -c1-200)"
    check "$name: exit status 1..123 (got $rc)" '[ $rc -ge 1 ] && [ $rc -le 123 ]'
    check "$name: message '$pattern'" 'grep -qF -- "$pattern" "$work/$name.log"'
    if [ "$every" = n ]; then
        check "$name: every rank reports it" '[ "$(grep -cF -- "$pattern" "$work/$name.log")" -ge "$np" ]'
    fi
    if [ "$every" = 1 ]; then
        r=0
        while [ $r -lt "$np" ]; do
            check "$name: rank $r reports it" 'grep "rank $r: " "$work/$name.log" | grep -qF -- "$pattern"'
            r=$((r + 1))
        done
    fi
}

fmnist_data
data="$work/fmnist.data"
base() { sed "s/^max_batches=.*/max_batches=${1}/" "$src/cfg/fmnist-tiny.cfg"; }

# --- [selsync] values: FILE:LINE: [selsync] KEY = 'VALUE' ------------------------
n=0
for kv in 'delta=-1' 'delta=abc' 'delta=0x10' 'delta=nan' 'delta=inf' 'delta=1e400' 'window=0' \
          'window=1000001' 'window=2.5' 'smoothing=1.5' 'smoothing=-0.1' 'warmup=-1' 'method=foo' \
          'granularity=row' 'aggregate=sum' 'sync_bn_stats=2' 'fedavg_interval=0' 'fedavg_fraction=0' \
          'fedavg_fraction=1.5' 'ssp_staleness=-1' 'partition=label:0' 'partition=dirichlet:0' \
          'partition=dirichlet:-1' 'partition=dirichlet:0x1p-3' 'partition=stripes' 'inject_alpha=2' \
          'inject_beta=-0.5' 'seed=-1' 'seed=18446744073709551616' 'eval_every=-5' 'checkpoint_every=x' \
          'on_nonfinite=ignore' 'frobnicate=1'; do
    n=$((n + 1))
    key=${kv%%=*}
    { base 5; printf '\n[selsync]\n%s\n' "$kv"; } >"$work/value$n.cfg"
    line=$(grep -n -F -x -- "$kv" "$work/value$n.cfg" | cut -d: -f1)
    refused "value_$key$n" 1 "$work/value$n.cfg:$line: [selsync] " 0 \
        "$darknet" classifier train "$data" "$work/value$n.cfg"
done

# --- data files and lists --------------------------------------------------------
{ base 5; printf '\n[selsync]\nmethod=bsp\n'; } >"$work/bsp.cfg"
sed "s#^labels=.*#labels=$work/short.labels#" "$data" >"$work/short-labels.data"
head -7 "$src/data/fashion-mnist/labels.txt" >"$work/short.labels"
refused labels_fewer_than_classes 2 "classes=10, but its labels file $work/short.labels has 7 lines" 1 \
    "$darknet" classifier train "$work/short-labels.data" "$work/bsp.cfg"
: >"$work/empty.labels"
sed "s#^labels=.*#labels=$work/empty.labels#" "$data" >"$work/empty-labels.data"
refused labels_empty 2 "its labels file $work/empty.labels has 0 lines" 1 \
    "$darknet" classifier train "$work/empty-labels.data" "$work/bsp.cfg"
sed "s#^train=.*#train=$work/none.list#" "$data" >"$work/no-list.data"
refused train_list_missing 2 "$work/none.list" 0 "$darknet" classifier train "$work/no-list.data" "$work/bsp.cfg"
: >"$work/empty.list"
sed "s#^train=.*#train=$work/empty.list#" "$data" >"$work/empty-list.data"
refused train_list_empty 2 "the training list $work/empty.list is empty" 1 "$darknet" classifier train "$work/empty-list.data" "$work/bsp.cfg"
refused data_file_missing 1 "$work/none.data" 0 "$darknet" classifier train "$work/none.data" "$work/bsp.cfg"
refused cfg_missing 1 "$work/none.cfg" 0 "$darknet" classifier train "$data" "$work/none.cfg"
{ base 5; printf '\n[selsync]\nmethod=bsp\neval_every=2\n'; } >"$work/eval.cfg"
sed "s#^valid=.*#valid=$work/none-valid.list#" "$data" >"$work/no-valid.data"
refused valid_list_missing 2 "cannot read the held-out list $work/none-valid.list" 0 \
    "$darknet" classifier train "$work/no-valid.data" "$work/eval.cfg"

# partitions that leave a rank without samples, or need more ranks
{ base 5; printf '\n[selsync]\npartition=label:1\n'; } >"$work/label1.cfg"
grep -m 3 '_c0_' "$src/data/fashion-mnist/train.list" >"$work/one-class.list"
sed "s#^train=.*#train=$work/one-class.list#" "$data" >"$work/one-class.data"
refused partition_rank_without_samples 2 "rank 1 gets no samples" 1 \
    "$darknet" classifier train "$work/one-class.data" "$work/label1.cfg"
{ base 5; printf '\n[selsync]\nmethod=ssp\n'; } >"$work/ssp.cfg"
refused ssp_needs_two_ranks 1 "ssp" 0 "$darknet" classifier train "$data" "$work/ssp.cfg"
{ base 5; printf '\n[selsync]\nfedavg_fraction=0.1\nmethod=fedavg\n'; } >"$work/fedavg.cfg"
refused rank_count_refused 2 "fedavg_fraction" 1 "$darknet" classifier train "$data" "$work/fedavg.cfg"

# an image that cannot be read, listed for every rank
for i in 1 2 3 4; do echo "$work/missing_c0_$i.png"; done >"$work/unreadable.list"
sed "s#^train=.*#train=$work/unreadable.list#" "$data" >"$work/unreadable.data"
refused image_unreadable 2 "missing_c0_" 0 "$darknet" classifier train "$work/unreadable.data" "$work/bsp.cfg"

# --- detection label files -------------------------------------------------------
python3 "$src/tests/mpi/make_tiny_detection.py" "$work/det" 8 >/dev/null
first_label=$(sed -n 1p "$work/det/train.list" | sed -e 's#/images/#/labels/#' -e 's#\.png$#.txt#')
cp "$first_label" "$work/label.keep"
{ cat "$work/det/tiny.cfg"; printf '\n[selsync]\nmethod=bsp\n'; } >"$work/det.cfg"
det_label() { # NAME PATTERN CONTENT (printf format): a damaged first label file
    printf '%b' "$3" >"$first_label"
    refused "$1" 2 "$2" 0 "$darknet" detector train "$work/det/tiny.data" "$work/det.cfg"
    cp "$work/label.keep" "$first_label"
}
det_label label_class_out_of_range "$first_label:1: not a detection label" '99 0.5 0.5 0.2 0.2\n'
det_label label_negative_class "$first_label:1: not a detection label" '-1 0.5 0.5 0.2 0.2\n'
det_label label_box_outside "$first_label:2: not a detection label" '0 0.5 0.5 0.2 0.2\n0 1.5 0.5 0.2 0.2\n'
det_label label_zero_width "$first_label:1: not a detection label" '0 0.5 0.5 0 0.2\n'
det_label label_nan "$first_label:1: not a detection label" '0 nan 0.5 0.2 0.2\n'
det_label label_hex "$first_label:1: not a detection label" '0 0x1p-1 0.5 0.2 0.2\n'
det_label label_trailing_text "$first_label:1: not a detection label" '0 0.5 0.5 0.2 0.2 extra\n'
det_label label_too_few_fields "$first_label:3: not a detection label" '0 0.5 0.5 0.2 0.2\n\n1 0.5\n'
det_label label_nul_byte "$first_label:1: not a detection label" '0 0.5\0000.5 0.2 0.2\n'
det_label label_huge_number "$first_label:1: not a detection label" '0 0.5 0.5 0.2 1e999\n'
rm "$first_label"
refused label_missing 2 "cannot open" 0 "$darknet" detector train "$work/det/tiny.data" "$work/det.cfg"
cp "$work/label.keep" "$first_label"
# a held-out list whose label files hold no box: refused before training
mkdir -p "$work/det/images2" "$work/det/labels2"
for i in 0 1; do
    cp "$work/det/images/img00$i.png" "$work/det/images2/empty$i.png"
    : >"$work/det/labels2/empty$i.txt"
    echo "$work/det/images2/empty$i.png"
done >"$work/det/empty-valid.list"
sed "s#^valid=.*#valid=$work/det/empty-valid.list#" "$work/det/tiny.data" >"$work/det/empty-valid.data"
grep -q '^valid=' "$work/det/empty-valid.data" || echo "valid=$work/det/empty-valid.list" >>"$work/det/empty-valid.data"
{ cat "$work/det/tiny.cfg"; printf '\n[selsync]\nmethod=bsp\neval_every=2\n'; } >"$work/det-eval.cfg"
refused heldout_without_boxes 2 "hold no ground-truth box" 0 \
    "$darknet" detector train "$work/det/empty-valid.data" "$work/det-eval.cfg"
check "heldout_without_boxes: refused before the first step" '! grep -q "avg" "$work/heldout_without_boxes.log"'

# --- checkpoints -----------------------------------------------------------------
# seldp, 3 steps, a checkpoint after step 3: it records the position after
# the 3 trained batches (3 x 32 images), not the batch loaded meanwhile;
# lag=0, so that its state ends with the momentum arrays (nan-momentum)
{ base 3; printf '\n[selsync]\npartition=seldp\nlag=0\ncheckpoint_every=3\n'; } >"$work/ck.cfg"
timeout 120 "$darknet" classifier train "$data" "$work/ck.cfg" >"$work/ck.log" 2>&1
check "checkpoint run exits 0" '[ $? -eq 0 ]'
ck="$work/backup/ck_checkpoint.weights"
check "checkpoint written" '[ -s "$ck" ]'
# ckpt.py OP FILE [OUT]: reads or rewrites a field of the plugin's state and
# reseals the checksum (FNV-1a over weights and state), as a forger would
cat >"$work/ckpt.py" <<'EOF'
import struct, sys
op, path = sys.argv[1], sys.argv[2]
b = bytearray(open(path, "rb").read())
model, state, _, magic = struct.unpack("<QQQ8s", b[-32:])
s = model                      # the state: adapter head (32), then rank 0's position, engine snapshot
def reseal():
    h = 1469598103934665603
    for x in b[:-32]:
        h = ((h ^ x) * 1099511628211) & 0xFFFFFFFFFFFFFFFF
    b[-16:-8] = struct.pack("<Q", h)
if op == "position":
    print(struct.unpack_from("<Q", b, s + 32)[0])
    sys.exit(0)
if op == "nan-ratio":        # engine head: magic 8, 8 u64 (ratio_n the 7th), then ratio
    struct.pack_into("<d", b, s + 40 + 72, float("nan"))
    struct.pack_into("<Q", b, s + 40 + 56, 2**62)
elif op == "negative-time":   # wall, after ratio
    struct.pack_into("<d", b, s + 40 + 80, -5.0)
elif op == "escape-tag":      # the engine's format tag: a terminal escape and a newline
    struct.pack_into("8s", b, s + 40, b"SS\x1b[2J\n\x00")
elif op == "nan-momentum":    # the last float of the state: the last gradient (momentum) array's
    struct.pack_into("<f", b, len(b) - 36, float("nan"))
elif op == "empty-model":     # the state and trailer alone, the trailer saying 0 bytes of weights
    b = b[model:]
    struct.pack_into("<Q", b, len(b) - 32, 0)
elif op.startswith("step="):  # the engine's step (6th u64 of its head)
    struct.pack_into("<Q", b, s + 40 + 48, int(op[5:]))
reseal()
open(sys.argv[3], "wb").write(b)
EOF
check "the checkpoint records the trained batches' position (96)" \
    '[ "$(python3 "$work/ckpt.py" position "$ck")" = 96 ]'
{ base 5; printf '\n[selsync]\npartition=seldp\nlag=0\n'; } >"$work/resume.cfg"
timeout 120 "$darknet" classifier train "$data" "$work/resume.cfg" "$ck" >"$work/resume-ok.log" 2>&1
check "an intact checkpoint resumes" '[ $? -eq 0 ] && grep -q "resumed at step 3" "$work/resume-ok.log"'
size=$(wc -c <"$ck")
head -c $((size - 100)) "$ck" >"$work/cut-end.weights"
refused checkpoint_cut_end 1 "damaged checkpoint" 0 "$darknet" classifier train "$data" "$work/resume.cfg" "$work/cut-end.weights"
head -c 2000 "$ck" >"$work/cut-weights.weights"
refused checkpoint_cut_in_weights 1 "cut-weights.weights: ends inside layer" 0 "$darknet" classifier train "$data" "$work/resume.cfg" "$work/cut-weights.weights"
{ head -c 1000 "$ck"; tail -c +1101 "$ck"; } >"$work/hole.weights"
refused checkpoint_bytes_missing 1 "damaged checkpoint" 0 "$darknet" classifier train "$data" "$work/resume.cfg" "$work/hole.weights"
cp "$ck" "$work/flip.weights"; printf 'X' | dd of="$work/flip.weights" bs=1 seek=500 conv=notrunc 2>/dev/null
refused checkpoint_weights_flipped 1 "do not match its checksum" 0 "$darknet" classifier train "$data" "$work/resume.cfg" "$work/flip.weights"
cp "$ck" "$work/flip-state.weights"; printf 'X' | dd of="$work/flip-state.weights" bs=1 seek=$((size - 40)) conv=notrunc 2>/dev/null
# rank 0 reads the checkpoint; its refusal is every rank's, with the reason
refused checkpoint_weights_flipped_2 2 "do not match its checksum" 1 "$darknet" classifier train "$data" "$work/resume.cfg" "$work/flip.weights"
refused checkpoint_cut_end_2 2 "its trailer is missing" 1 "$darknet" classifier train "$data" "$work/resume.cfg" "$work/cut-end.weights"
refused checkpoint_state_flipped 1 "do not match its checksum" 0 "$darknet" classifier train "$data" "$work/resume.cfg" "$work/flip-state.weights"
python3 "$work/ckpt.py" nan-ratio "$ck" "$work/nan-ratio.weights"
refused checkpoint_nan_ratio 1 "$work/nan-ratio.weights: [selsync] the saved state is damaged: its transfer ratio" 0 "$darknet" classifier train "$data" "$work/resume.cfg" "$work/nan-ratio.weights"
python3 "$work/ckpt.py" negative-time "$ck" "$work/negative-time.weights"
refused checkpoint_negative_time 1 "the saved state is damaged: its times" 0 "$darknet" classifier train "$data" "$work/resume.cfg" "$work/negative-time.weights"
python3 "$work/ckpt.py" escape-tag "$ck" "$work/escape-tag.weights"
refused checkpoint_escape_tag 1 "$work/escape-tag.weights: [selsync] the saved state is in format 'unknown'" 0 \
    "$darknet" classifier train "$data" "$work/resume.cfg" "$work/escape-tag.weights"
check "checkpoint_escape_tag: no escape code on the terminal" '! grep -q "$(printf "\033")" "$work/checkpoint_escape_tag.log"'
python3 "$work/ckpt.py" nan-momentum "$ck" "$work/nan-momentum.weights"
refused checkpoint_nan_momentum 1 \
    "$work/nan-momentum.weights: [selsync] the saved state is damaged: its parameters, gradients or momentum are not finite" 0 \
    "$darknet" classifier train "$data" "$work/resume.cfg" "$work/nan-momentum.weights"
python3 "$work/ckpt.py" empty-model "$ck" "$work/empty-model.weights"
refused checkpoint_empty_model 1 "empty-model.weights': damaged checkpoint, or one of another network (its weights take 0 bytes; this network's take " 0 \
    "$darknet" classifier train "$data" "$work/resume.cfg" "$work/empty-model.weights"
python3 "$work/ckpt.py" step=9007199254740992 "$ck" "$work/step-over.weights"
refused checkpoint_step_over 1 "$work/step-over.weights: [selsync] the saved state is damaged: its step counters" 0 \
    "$darknet" classifier train "$data" "$work/resume.cfg" "$work/step-over.weights"
# the last step a run can count is accepted, and a run with no step limit
# (max_batches=0; with one the resumed step counter is past it: nothing to
# train) stops at it with a message instead of writing a checkpoint it
# could not resume
python3 "$work/ckpt.py" step=9007199254740991 "$ck" "$work/step-last.weights"
{ base 0; printf '\n[selsync]\npartition=seldp\nlag=0\n'; } >"$work/resume-unbounded.cfg"
refused checkpoint_step_last 1 "the step counter is at 9007199254740991, the most a run can count" 0 \
    "$darknet" classifier train "$data" "$work/resume-unbounded.cfg" "$work/step-last.weights"
# a checkpoint of 1 rank resumes on 2, each with its half of the data
mpi -np 2 "$darknet" classifier train "$data" "$work/resume.cfg" "$ck" >"$work/resume-2.log" 2>&1
check "a checkpoint of 1 rank resumes on 2" '[ $? -eq 0 ] &&
    grep -q "resumed at step 3 from a checkpoint of 1 rank on 2: every rank starts from the old rank'"'"'s model" "$work/resume-2.log"'
check "its data is partitioned for 2 ranks" '[ "$(grep -c "partition seldp rank [01]:" "$work/resume-2.log")" -eq 2 ]'
{ base 5; printf '\n[selsync]\npartition=seldp\nlag=0\nwindow=7\n'; } >"$work/resume-w7.cfg"
refused checkpoint_other_window 1 "does not fit this network and the [selsync]" 0 \
    "$darknet" classifier train "$data" "$work/resume-w7.cfg" "$ck"

# --- weights files that are not this network's: refused on every rank -------------
# plain Darknet weights: the checkpoint without the plugin's state and
# trailer, and without its mark (the header's revision, Darknet's 0)
python3 - "$ck" "$work/plain.weights" <<'EOF'
import struct, sys
b = bytearray(open(sys.argv[1], "rb").read())
b = b[:struct.unpack("<Q", b[-32:-24])[0]]
b[8:12] = bytes(4)
open(sys.argv[2], "wb").write(b)
EOF
plain=$(wc -c <"$work/plain.weights")
: >"$work/zero.weights"
refused weights_zero_bytes 2 "$work/zero.weights: too short for a weights file's header (0 bytes)" n \
    "$darknet" classifier train "$data" "$work/bsp.cfg" "$work/zero.weights"
head -c 10 "$work/plain.weights" >"$work/header-cut.weights"
refused weights_header_cut 1 "$work/header-cut.weights: too short for a weights file's header" 0 \
    "$darknet" classifier train "$data" "$work/bsp.cfg" "$work/header-cut.weights"
head -c $((plain - 6)) "$work/plain.weights" >"$work/cut.weights"
refused weights_cut_in_layer 2 "$work/cut.weights: ends inside layer " n \
    "$darknet" classifier train "$data" "$work/bsp.cfg" "$work/cut.weights"
head -c 20 "$work/plain.weights" >"$work/header-only.weights"
refused weights_header_only 2 "$work/header-only.weights: holds no layer's weights (20 bytes)" n \
    "$darknet" classifier train "$data" "$work/bsp.cfg" "$work/header-only.weights"
# darknet partial's prefix (the first layer; layer 1, a max pool, has no weights): trains,
# saying which layers it held
"$darknet" partial "$work/bsp.cfg" "$work/plain.weights" "$work/first.weights" 1 >"$work/partial.log" 2>&1
cases=$((cases + 1))
mpi -np 2 "$darknet" classifier train "$data" "$work/bsp.cfg" "$work/first.weights" >"$work/weights_prefix.log" 2>&1
rc=$?
echo "case weights_prefix: exit $rc: $(grep -m1 'holds the weights' "$work/weights_prefix.log")"
check "weights_prefix: a layer-boundary prefix trains (rc $rc)" \
    '[ $rc -eq 0 ] && grep -q "summary: method=bsp" "$work/weights_prefix.log"'
check "weights_prefix: says which layers it held" \
    'grep -q "first.weights holds the weights of the layers before layer 2 only" "$work/weights_prefix.log"'
timeout 120 "$darknet" classifier train "$data" "$work/bsp.cfg" "$work/plain.weights" >"$work/weights_whole.log" 2>&1
check "weights_whole: the whole file trains without a note" \
    '[ $? -eq 0 ] && ! grep -q "holds the weights" "$work/weights_whole.log"'

# --- partitions at the extremes: train or refuse cleanly, never a signal ----------
for a in 4.9406564584124654e-324 2.2250738585072014e-308 1e-300 1e300 1.7976931348623157e308; do
    { base 2; printf '\n[selsync]\nmethod=bsp\npartition=dirichlet:%s\nseed=203\n' "$a"; } >"$work/dir.cfg"
    cases=$((cases + 1))
    mpi -np 2 "$darknet" classifier train "$data" "$work/dir.cfg" >"$work/dirichlet-$a.log" 2>&1
    rc=$?
    echo "case dirichlet_$a: exit $rc: $(grep -m1 'partition = \|summary: method' "$work/dirichlet-$a.log")"
    check "dirichlet:$a trains or is refused (rc $rc)" \
        '{ [ $rc -eq 0 ] && grep -q "summary: method=bsp" "$work/dirichlet-$a.log"; } ||
         { [ $rc -ge 1 ] && [ $rc -le 123 ] && grep -q "dir.cfg:[0-9]*: \[selsync\] partition = " "$work/dirichlet-$a.log"; }'
done

echo "$cases hostile inputs"
echo "$pass passed, $fail failed"
[ "$fail" -eq 0 ]
