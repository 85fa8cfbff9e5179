#!/bin/sh
# Usage: test_scaling.sh SOURCE_DIR WORK_DIR
# scripts/scaling.py --quick (bsp and selsync at 2 and 4 ranks in virtual
# time) end to end:
#  - it exits 0 and writes one results folder with the table, the TSV, the
#    plot and one compare-methods folder per rank count;
#  - a row per rank count and method; at the same steps and batch per rank,
#    4 ranks train twice the images of 2; images/s is images over the
#    virtual training time; every run reaches the common score (the lowest
#    final one) within its training time; bsp's rows are 1.00x bsp.
set -u
src=$1 work=$2
rm -rf "$work"; mkdir -p "$work"
. "$src/tests/common/checks.sh"
timeout 600 python3 "$src/scripts/scaling.py" --quick --results "$work/results" >"$work/out.txt" 2>&1
rc=$?
cat "$work/out.txt"
check "exits 0" '[ $rc -eq 0 ]'
set -- "$work"/results/*-scaling-wide-1gbit-quick
out=$1 folders=$#
check "one results folder" '[ $folders -eq 1 ] && [ -d "$out" ]'
check "table, TSV and plot written" '[ -s "$out/scaling.md" ] && [ -s "$out/scaling.tsv" ] && [ -s "$out/scaling.png" ]'
check "one compare-methods folder per rank count" \
    '[ -d "$out"/runs/*-2ranks-virtual-1gbit-4steps-quick ] && [ -d "$out"/runs/*-4ranks-virtual-1gbit-4steps-quick ]'
tsv=$out/scaling.tsv
check "a row per rank count and method" '[ "$(tail -n +2 "$tsv" | cut -f1,2 | sort | tr "\n" " ")" = "2	bsp 2	selsync-0.3 4	bsp 4	selsync-0.3 " ]'
img() { awk -F'\t' -v r="$1" -v m="$2" '$1 == r && $2 == m { print $4 }' "$tsv"; }
check "4 ranks train twice the images of 2" '[ "$(img 4 bsp)" -eq $(( 2 * $(img 2 bsp) )) ] && [ "$(img 2 bsp)" -gt 0 ]'
check "images/s is images over the training time" \
    'awk -F"\t" "NR > 1 { if (\$5 <= 0 || (\$6 - \$4 / \$5) ^ 2 > 0.01) bad = 1 } END { exit bad }" "$tsv"'
check "every run reaches the common score within its training time" \
    'awk -F"\t" "NR > 1 { if (\$8 <= 0 || \$8 > \$5 + 0.001) bad = 1 } END { exit bad }" "$tsv"'
check "bsp's rows are 1.00x bsp" '[ "$(grep -c "| bsp | .* | 1.00x | " "$out/scaling.md")" -eq 2 ]'
echo "$pass passed, $fail failed"
[ "$fail" -eq 0 ]
