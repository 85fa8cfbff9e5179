#!/bin/sh
# Usage: test_eval_rows.sh DARKNET SOURCE_DIR WORK_DIR
# The `# eval` rows of the metrics file hold the score of the ranks' mean
# model: 2 ranks train Fashion-MNIST with method local (the ranks drift
# apart, so the mean is no rank's own model) on label:5 shards, with
# eval_every=10, and the top-1 of the last row equals what
# `darknet classifier valid` finds on the weights rank 0 saves (the final
# average), on the same 500 held-out images:
#  - 20 steps: the last row is scored at step 20 from the mean of the ranks'
#    models (before the final average, which computes the same mean);
#  - 15 steps: the last row is scored at the end, after the final average.
# Every row names its step, and train_s <= wall_s.
# The training chart: rank 0 draws BACKUP/chart_CFGNAME.png (chart_every's
# default) during training; `darknet selsync chart` draws one from a
# finished run's metrics file, and names file and line of a malformed row.
set -u
darknet=$1 src=$2 work=$3
rm -rf "$work"; mkdir -p "$work/backup"
. "$src/tests/common/checks.sh"
fmnist_data
head -n 500 "$src/data/fashion-mnist/valid.list" >"$work/valid500.list"
sed -i "s#^valid=.*#valid=$work/valid500.list#" "$work/fmnist.data"

# top1_of VALID_OUTPUT: the running top-1 after the last image
top1_of() { sed -n 's/.*top 1: \([0-9.]*\),.*/\1/p' "$1" | tail -n 1; }
# row_top1 METRICS STEP: top1= of the eval row of STEP
row_top1() { awk -F'\t' -v s="step=$2" '$1 == "# eval" && $2 == s { for (i = 3; i <= NF; i++) if ($i ~ /^top1=/) print substr($i, 6) }' "$1"; }

for steps in 20 15; do
    name=eval$steps
    { sed "s/^max_batches=.*/max_batches=$steps/" "$src/cfg/fmnist-tiny.cfg"
      printf '\n[selsync]\nmethod=local\npartition=label:5\neval_every=10\nlog=%s/%s.%%r.tsv\n' "$work" "$name"; } \
        >"$work/$name.cfg"
    timeout 300 ${MPIEXEC:-mpirun} --oversubscribe -np 2 "$darknet" classifier train "$work/fmnist.data" "$work/$name.cfg" \
        >"$work/$name.out" 2>&1
    check "$steps steps: training exits 0" '[ $? -eq 0 ]'
    "$darknet" classifier valid "$work/fmnist.data" "$work/$name.cfg" "$work/backup/$name.weights" \
        >"$work/$name.valid" 2>&1
    want=$(top1_of "$work/$name.valid")
    got=$(row_top1 "$work/$name.0.tsv" "$steps")
    echo "  $steps steps: eval row top1=$got; classifier valid on the saved weights: $want"
    check "$steps steps: eval rows at steps 10 and $steps" \
        '[ "$(grep "^# eval" "$work/$name.0.tsv" | cut -f 2 | tr "\n" " ")" = "step=10 step=$steps " ]'
    check "$steps steps: the last row scores the saved mean model" \
        '[ -n "$want" ] && [ -n "$got" ] && awk -v a="$got" -v b="$want" "BEGIN { exit !(a - b < 1e-6 && b - a < 1e-6) }"'
    check "$steps steps: train_s <= wall_s in every row" \
        'awk -F"\t" "\$1 == \"# eval\" { w = \$3; t = \$4; sub(/wall_s=/, \"\", w); sub(/train_s=/, \"\", t); n++; if (t + 0 > w + 0) bad++ }
             END { exit !(n > 0 && !bad) }" "$work/$name.0.tsv"'
    check "$steps steps: only rank 0 writes eval rows" '! grep -q "^# eval" "$work/$name.1.tsv"'
done

# png_ok FILE: a PNG signature
png_ok() { [ "$(head -c 8 "$1" | od -An -tx1 | tr -d ' \n')" = 89504e470d0a1a0a ]; }
check "training drew the chart in the backup folder" 'png_ok "$work/backup/chart_eval20.png"'
check "only the console rank announces it" '[ "$(grep -c "training chart .*chart_eval20.png" "$work/eval20.out")" -eq 1 ]'
"$darknet" selsync chart "$work/eval20.0.tsv" >"$work/chart.out" 2>&1
check "selsync chart of a finished run: exit 0, METRICS.png named" \
    '[ $? -eq 0 ] && [ "$(cat "$work/chart.out")" = "$work/eval20.0.png" ] && png_ok "$work/eval20.0.png"'
{ head -n 5 "$work/eval20.0.tsv"; printf '4\tnot-a-loss\n'; } >"$work/bad.tsv"
"$darknet" selsync chart "$work/bad.tsv" "$work/bad.png" >"$work/bad-chart.out" 2>&1
check "selsync chart of a malformed file: exit 1, file and line named, no picture" \
    '[ $? -eq 1 ] && grep -q "$work/bad.tsv:6: " "$work/bad-chart.out" && [ ! -e "$work/bad.png" ]'
[ "$fail" -gt 0 ] && tail -n 5 "$work"/eval*.out "$work"/*chart.out
echo "$pass passed, $fail failed"
[ "$fail" -eq 0 ]
