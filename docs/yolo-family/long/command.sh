#!/bin/sh
# yolov4-tiny (as published, and with YOLOv3's box term and no resize) beside
# Darknet's yolov3-tiny layout on the detection set: the cfgs' own 2000 steps
# of 16 canvases (learning rate steps at 1600 and 1800), one process, seeds
# 1-3, mAP@0.5 on all 500 held-out canvases every 250 steps.
# usage: sh docs/yolo-family/long/command.sh OUT_DIR [VARIANT...] (from the repository root)
set -eu
root=$(pwd); dn=$root/build/darknet
out=${1:?usage: command.sh OUT_DIR [VARIANT...]}; shift
variants=${*:-v3 v4t v4t-m012-mse-r1}
mkdir -p "$out"; cd "$out"
# one process of plain synchronous training (bsp on one rank), seeded, evaluated every 250 steps
one() { sed -e '/^\[selsync\]/,$d' "$@"; }
one "$root/cfg/fmnist-det-tiny-yolov3.cfg" > v3.cfg
one "$root/cfg/yolov4-tiny-selsync.cfg" > v4t.cfg
one "$root/cfg/yolov7-tiny-selsync.cfg" > v7t.cfg
sed -e 's/^mask=1,2,3/mask=0,1,2/' -e 's/^iou_loss=.*/iou_loss=mse/' -e 's/^iou_normalizer=.*/iou_normalizer=1/' \
    -e 's/^resize=.*/resize=1/' v4t.cfg > v4t-m012-mse-r1.cfg
python3 "$root/scripts/compare/provenance.py" . --ranks 1 -- sh docs/yolo-family/long/command.sh OUT_DIR $variants
[ -f long.tsv ] || printf 'variant\tseed\tstep\tmap50\ttrain_s\n' > long.tsv
for v in $variants; do
  for s in 1 2 3; do
    run=$v-s$s; rm -rf "$run"; mkdir -p "$run/backup"
    { cat $v.cfg; printf '[selsync]\nmethod=bsp\neval_every=250\nseed=%s\nlog=%s\n' $s "$run/metrics.tsv"; } > "$run/train.cfg"
    printf 'classes=10\ntrain=%s\nvalid=%s\nnames=%s\nbackup=%s\n' "$root/data/fmnist-det/train.list" \
      "$root/data/fmnist-det/valid.list" "$root/data/fmnist-det/names.txt" "$run/backup" > "$run/train.data"
    OPENBLAS_NUM_THREADS=${OPENBLAS_NUM_THREADS:-2} "$dn" detector train "$run/train.data" "$run/train.cfg" > "$run/train.txt" 2>&1
    awk -v v=$v -v s=$s '$1 == "#" && $2 == "eval" { for (i = 3; i <= NF; i++) { split($i, kv, "="); f[kv[1]] = kv[2] }
         printf "%s\t%s\t%s\t%s\t%s\n", v, s, f["step"], f["map50"], f["train_s"] }' "$run/metrics.tsv" >> long.tsv
    rm -rf "$run/backup"
  done
done
cat long.tsv
