#!/bin/sh
# Usage: test_error_exits.sh DARKNET WORK_DIR
# Failures that stock Darknet reported with exit status 0 now exit non-zero.
set -u
darknet=$1 work=$2
rm -rf "$work"; mkdir -p "$work"
. "$(dirname "$0")/../common/checks.sh"

# expect_failure NAME PATTERN COMMAND...: COMMAND must exit non-zero without a
# signal and print PATTERN on stderr.
expect_failure() {
    name=$1 pattern=$2; shift 2
    "$@" >"$work/$name.out" 2>"$work/$name.err"
    rc=$?
    if [ "$rc" -eq 0 ] || [ "$rc" -gt 128 ]; then
        bad "$name: exit status $rc"
    elif ! grep -qF -- "$pattern" "$work/$name.err"; then
        bad "$name: no '$pattern' in stderr"; tail -3 "$work/$name.err"
    else
        ok
    fi
}

printf '[net]\nbatch=1\nheight=4\nwidth=4\nchannels=1\n[softmax]\n' >"$work/ok.cfg"
printf 'classes=2\ntrain=%s/missing.list\nlabels=%s/missing.labels\nbackup=%s\n' \
    "$work" "$work" "$work" >"$work/missing-lists.data"
printf 'height=4\n[net]\nbatch=1\n[softmax]\n' >"$work/orphan.cfg"

expect_failure missing_cfg "Couldn't open file: $work/none.cfg" "$darknet" ops "$work/none.cfg"
expect_failure missing_weights "Couldn't open file: $work/none.weights" \
    "$darknet" classifier predict "$work/missing-lists.data" "$work/ok.cfg" "$work/none.weights" "$work/none.png"
expect_failure missing_list "Couldn't open file: $work/missing" \
    "$darknet" classifier train "$work/missing-lists.data" "$work/ok.cfg"
expect_failure unknown_command "Not an option: frobnicate" "$darknet" frobnicate
expect_failure no_command "usage:" "$darknet"
for trainer in classifier detector; do
    expect_failure "${trainer}_unknown" "Not an option: $trainer frobnicate" \
        "$darknet" "$trainer" frobnicate "$work/missing-lists.data" "$work/ok.cfg"
    expect_failure "${trainer}_no_cfg" "usage:" "$darknet" "$trainer" train "$work/missing-lists.data"
done
expect_failure option_before_section "$work/orphan.cfg:1: option outside of any section" \
    "$darknet" ops "$work/orphan.cfg"

# [net] mosaic=1 draws four images per training image: fewer than 4 in the
# training list is refused before training, and mosaic (or letter_box) in a
# cfg that another trainer than the detector's reads is refused too
printf '%s/a.png\n%s/b.png\n%s/c.png\n' "$work" "$work" "$work" >"$work/three.list"
printf 'a\nb\n' >"$work/two.labels"
printf 'classes=2\ntrain=%s/three.list\nlabels=%s/two.labels\nbackup=%s\n' "$work" "$work" "$work" >"$work/three.data"
printf '[net]\nbatch=1\nheight=8\nwidth=8\nchannels=3\nmosaic=1\n[convolutional]\nfilters=14\nsize=1\n'\
'[yolo]\nclasses=2\nnum=2\nanchors=1,2,3,4\n' >"$work/mosaic-det.cfg"
printf '[net]\nbatch=1\nheight=8\nwidth=8\nchannels=3\nmosaic=1\n[convolutional]\nfilters=2\nsize=1\n'\
'[avgpool]\n[softmax]\n' >"$work/mosaic-class.cfg"
expect_failure mosaic_three_images "mosaic-det.cfg: [net] mosaic=1 needs at least 4 training images; $work/three.list lists 3" \
    "$darknet" detector train "$work/three.data" "$work/mosaic-det.cfg"
expect_failure mosaic_classifier "[net] mosaic=1 and letter_box=1 apply to detection training (darknet detector train) only" \
    "$darknet" classifier train "$work/three.data" "$work/mosaic-class.cfg"

echo "$pass passed, $fail failed"
[ "$fail" -eq 0 ]
