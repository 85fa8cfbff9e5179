#!/bin/sh
# Usage: test_compare_virtual.sh SOURCE_DIR WORK_DIR
# scripts/experiments/compare-methods.py --quick --virtual --ranks 4 end to end, in
# shared memory with virtual time:
#  - it exits 0 and writes one results folder whose tables name virtual
#    time and the modelled network, with rows for Darknet's multi-GPU scheme
#    (FedAvg every 4) and the paper's sweep of delta;
#  - every rank of every run logs its virtual clock;
#  - the times are the clocks': a BSP step on the wide network lasts at
#    least its bytes' time on a 1 Gbit/s link, so the BSP run's training
#    time is at least its bytes over 125e6 bytes/s, and its communication
#    is not zero; local SGD communicates once, in its final average (BSP
#    in each of the 4 steps too), and its time counts that average;
#  - --stragglers jitter=1:1s: the table's header names the jitter with the
#    run's seed, and BSP's training time is at least the 4 steps' pauses;
#    --stragglers without --virtual, or with another part, is refused;
#  - --settings-net wide trains the skewed setting with injection on the
#    wide network: its table says so and BSP sends the wide network's bytes.
set -u
src=$1 work=$2
rm -rf "$work"; mkdir -p "$work"
. "$src/tests/common/checks.sh"
timeout 600 python3 "$src/scripts/experiments/compare-methods.py" --quick --virtual --ranks 4 --suites iid,wide \
    --results "$work/results" >"$work/out.txt" 2>&1
rc=$?
cat "$work/out.txt"
check "exits 0" '[ $rc -eq 0 ]'
set -- "$work"/results/*-4ranks-virtual-1gbit-4steps-quick
out=$1 folders=$#
check "one results folder" '[ $folders -eq 1 ] && [ -d "$out" ]'
md=$out/comparison.md
check "the table says virtual time and how it is made" \
    'grep -q "^Virtual time (.SELSYNC_VIRTUAL=bandwidth=1000Mbit,latency=50us.): the 4 ranks shared" "$md"'
for s in "Fashion-MNIST, iid shards" "Fashion-MNIST, wide network (cfg/fmnist-wide.cfg)"; do
    check "a table for $s" 'grep -q "^## $s: virtual time, 1gbit links, 50 us latency$" "$md"'
done
for m in "BSP" "FedAvg every 4 (Darknet's multi-GPU scheme)" "SelSync δ=0.05" "SelSync δ=0.1" "SelSync δ=0.3" \
         "SSP s=100" "local SGD"; do
    check "a row for $m" 'grep -q "^| $m | [0-9.]* | " "$md"'
done
missing=0
for m in "$out"/runs/*/virtual-*/metrics.[0-3].tsv; do
    grep -v '^#' "$m" | head -n 1 | grep -q '	virtual_s$' || { echo "no virtual_s column in $m"; missing=$((missing + 1)); }
done
check "every rank of every run logs its virtual clock" \
    '[ $missing -eq 0 ] && [ "$(ls "$out"/runs/*/virtual-*/metrics.[0-3].tsv | wc -l)" -ge 80 ]'
tsv=$out/summary.tsv
field() { awk -F'\t' -v s="$1" -v m="$2" -v f="$3" 'NR == 1 { for (i = 1; i <= NF; i++) c[$i] = i; next }
    $1 == s && $2 == "virtual" && $3 == m { print $c[f] }' "$tsv"; }
b=$(field wide bsp bytes_per_rank) t=$(field wide bsp training_s) c=$(field wide bsp comm_s)
check "wide BSP: training time $t s is at least its $b bytes at 1 Gbit/s" \
    'awk -v b="$b" -v t="$t" "BEGIN { exit !(b > 1e7 && t >= b / 125e6) }"'
check "wide BSP: communication $c s is not zero" 'awk -v c="$c" "BEGIN { exit !(c > 0) }"'
lc=$(field wide local comm_s) lt=$(field wide local training_s)
check "wide local SGD: communication $lc s, under a third of BSP's, and within its training time $lt s" \
    'awk -v c="$lc" -v b="$c" -v t="$lt" "BEGIN { exit !(c > 0 && c < b / 3 && c < t) }"'

timeout 600 python3 "$src/scripts/experiments/compare-methods.py" --quick --virtual --ranks 2 --suites iid --methods bsp \
    --seed 5 --stragglers jitter=1:1s --results "$work/jitter" >"$work/jitter.txt" 2>&1
rc=$?
check "--stragglers jitter=1:1s exits 0" '[ $rc -eq 0 ]'
set -- "$work"/jitter/*-2ranks-virtual-1gbit-4steps-quick
jout=$1 tsv=$1/summary.tsv
check "--stragglers: the header names the jitter with the run's seed" \
    'grep -q "SELSYNC_VIRTUAL=bandwidth=1000Mbit,latency=50us,jitter=1:1s:5" "$jout/comparison.md"'
jt=$(field iid bsp training_s)
check "--stragglers jitter=1:1s: BSP's 4 steps take at least 4 s ($jt s)" 'awk -v t="$jt" "BEGIN { exit !(t >= 4) }"'
python3 "$src/scripts/experiments/compare-methods.py" --quick --stragglers slow=1:2 --results "$work/no" >"$work/no.txt" 2>&1
check "--stragglers without --virtual: refused" '[ $? -ne 0 ] && grep -q "stragglers goes with --virtual" "$work/no.txt"'
python3 "$src/scripts/experiments/compare-methods.py" --quick --virtual --stragglers bandwidth=1Mbit --results "$work/no" >"$work/no2.txt" 2>&1
check "--stragglers with another part: refused" '[ $? -ne 0 ] && grep -q "expected slow=R:F" "$work/no2.txt"'

timeout 600 python3 "$src/scripts/experiments/compare-methods.py" --quick --virtual --ranks 4 --suites label-inject \
    --settings-net wide --methods bsp --results "$work/wide-settings" >"$work/wide-settings.txt" 2>&1
rc=$?
cat "$work/wide-settings.txt"
check "--settings-net wide exits 0" '[ $rc -eq 0 ]'
set -- "$work"/wide-settings/*-4ranks-virtual-1gbit-4steps-quick
out=$1 tsv=$1/summary.tsv
check "--settings-net wide: the table names the wide network" \
    'grep -q "^## Fashion-MNIST, 2 classes per rank, injection (0.5, 0.5), wide network: virtual time" "$out/comparison.md"'
b=$(field label-inject bsp bytes_per_rank)
check "--settings-net wide: BSP sent $b bytes per rank, the wide network's 4 x 12 MB" \
    'awk -v b="$b" "BEGIN { exit !(b > 4e7) }"'
# Δ after the warm-up, from every training rank's metrics: two ranks of 30
# steps whose Δ after step 25 are 0.1-0.5 and 0.6-1.0 give a median of 0.6
# and a 90th percentile of 1.0; the warm-up's larger values and inf count not
mkdir -p "$work/delta-run"
for r in 0 1; do
    awk -v r="$r" 'BEGIN { OFS = "\t"
        print "step", "bytes_sent", "inject_bytes", "t_compute", "t_measure", "t_agree", "t_transfer",
              "decision", "change", "virtual_s"
        for (s = 0; s < 30; s++)
            print s, 0, 0, 0.1, 0, 0, 0, "local", (s == 0 ? "inf" : s < 25 ? 9 : (s - 24 + 5 * r) / 10), s }' \
        >"$work/delta-run/metrics.$r.tsv"
done
delta=$(cd "$src/scripts" && python3 -c '
import sys, types
from compare.metrics import collect
args = types.SimpleNamespace(ranks=2)
run = types.SimpleNamespace(id="delta", ssp=False, net="emulated", steps=30)
print("%.2f %.2f" % collect(args, run, sys.argv[1], lambda: 0.0)["delta"])' "$work/delta-run")
check "Δ after the warm-up over every rank: median and 90th percentile 0.60 1.00 (got $delta)" \
    '[ "$delta" = "0.60 1.00" ]'
echo "$pass passed, $fail failed"
[ "$fail" -eq 0 ]
