#!/bin/sh
# ablation: yolov4-tiny on the detection set, 500 steps of batch 16, one process, beside yolov3-tiny
set -u
root=$(pwd); dn=$root/build/darknet; data=$root/data/fmnist-det/fmnist-det.data
out=${1:?usage: command.sh OUT_DIR (run from the repository root)}; mkdir -p $out; cd $out
base() { sed -e '/^\[selsync\]/,$d' -e 's/^max_batches=.*/max_batches=500/' -e 's/^steps=1600,1800/steps=400,450/' "$@"; }
base $root/cfg/fmnist-det-tiny-yolov3.cfg > v3.cfg
base $root/cfg/yolov4-tiny-selsync.cfg > v4t.cfg
sed 's/^mask=1,2,3/mask=0,1,2/' v4t.cfg > v4t-m012.cfg
sed 's/^resize=.*/resize=1/' v4t-m012.cfg > v4t-m012-r1.cfg
sed -e 's/^iou_loss=.*/iou_loss=mse/' -e 's/^iou_normalizer=.*/iou_normalizer=1/' v4t-m012.cfg > v4t-m012-mse.cfg
sed -e 's/^resize=.*/resize=1/' v4t-m012-mse.cfg > v4t-m012-mse-r1.cfg
{ lscpu | grep 'Model name'; nproc; git -C $root rev-parse HEAD; echo "OPENBLAS_NUM_THREADS=2 darknet detector train DATA CFG (500 steps of 16), then darknet selsync map DATA CFG final.weights"; } > machine.txt
printf 'variant\tmap50\ttrain_s\n' > ablation.tsv
for v in v3 v4t v4t-m012 v4t-m012-r1 v4t-m012-mse v4t-m012-mse-r1; do
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
