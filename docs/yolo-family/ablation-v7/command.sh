#!/bin/sh
# ablation: yolov7-tiny on the detection set, 500 steps of batch 16, one process, one run per head setting
set -u
root=$(pwd); dn=${DARKNET:-$root/build/darknet}; data=$root/data/fmnist-det/fmnist-det.data
out=${1:?usage: command.sh OUT_DIR (run from the repository root)}; mkdir -p $out; cd $out
base() { sed -e '/^\[selsync\]/,$d' -e 's/^max_batches=.*/max_batches=500/' -e 's/^steps=1600,1800/steps=400,450/' "$@"; }
base $root/cfg/yolov7-tiny-selsync.cfg > v7t.cfg
sed 's/^resize=.*/resize=1/' v7t.cfg > v7t-r1.cfg
sed 's/^iou_thresh=.*/iou_thresh=1/' v7t.cfg > v7t-t1.cfg
sed -e 's/^iou_loss=.*/iou_loss=mse/' -e 's/^iou_normalizer=.*/iou_normalizer=1/' v7t.cfg > v7t-mse.cfg
sed -e 's/^resize=.*/resize=1/' -e 's/^iou_thresh=.*/iou_thresh=1/' v7t-mse.cfg > v7t-mse-r1-t1.cfg
# YOLOv3's head on the yolov7-tiny layers: a linear convolution before each head and the logistic inside it
awk '/^\[convolutional\]/{n=NR} {l[NR]=$0} END{for(i=1;i<=NR;i++){ if(l[i]=="activation=logistic") l[i]="activation=linear"; print l[i]}}' v7t-mse-r1-t1.cfg |
  sed -e 's/^new_coords=.*/new_coords=0/' -e 's/^scale_x_y=.*/scale_x_y=1/' -e 's/^objectness_smooth=.*/objectness_smooth=0/' \
      -e 's/^cls_normalizer=.*/cls_normalizer=1/' > v7t-v3head.cfg
{ lscpu | grep 'Model name'; nproc; git -C $root rev-parse HEAD; env | grep '^OPENBLAS_' | sort;
  echo "OPENBLAS_NUM_THREADS=2 darknet detector train DATA CFG (500 steps of 16), then darknet selsync map DATA CFG final.weights"; } > machine.txt
printf 'variant\tmap50\ttrain_s\n' > ablation.tsv
for v in v7t v7t-r1 v7t-t1 v7t-mse v7t-mse-r1-t1 v7t-v3head; do
  rm -rf b-$v; mkdir -p b-$v
  printf 'classes=10\ntrain=%s\nvalid=%s\nnames=%s\nbackup=%s\n' "$root/data/fmnist-det/train.list" "$root/data/fmnist-det/valid.list" "$root/data/fmnist-det/names.txt" "$out/b-$v" > $v.data
  s=$(date +%s.%N)
  OPENBLAS_NUM_THREADS=2 $dn detector train $v.data $v.cfg > $v.train.txt 2>&1
  e=$(date +%s.%N)
  OPENBLAS_NUM_THREADS=2 $dn selsync map $v.data $v.cfg b-$v/${v}_final.weights > $v.map.txt 2>&1
  m=$(grep -io "map@0.5[^0-9]*[0-9.]*\|mean[^0-9]*[0-9.]*" $v.map.txt | tail -1 | grep -o "[0-9.]*$")
  printf '%s\t%s\t%.1f\n' $v "$m" "$(echo "$e - $s" | bc)" >> ablation.tsv
done
cat ablation.tsv
