#!/bin/sh
# Usage: test_bench_ssp.sh SOURCE_DIR WORK_DIR
# scripts/bench/bench-ssp.sh (scripts/bench/bench-methods.sh underneath) for 20 steps:
#  - it exits 0 and prints the header with KB/step, vs bsp and the blocked
#    time, and a row each for bsp, ssp with s = 100 and 200 and selsync;
#  - bsp sends 1.00x what bsp would; an ssp worker pushes and pulls the whole
#    model every step, 2x bsp's bytes on 2 ranks, so a ratio (never "-", as
#    with one worker) shows that ssp ran with 2 workers, i.e. 3 processes;
#  - every row has 20 steps' worth of KB/step (sync MB / 20) and a top-1.
set -u
src=$1 work=$2
rm -rf "$work"; mkdir -p "$work"
. "$src/tests/common/checks.sh"

timeout 600 sh "$src/scripts/bench/bench-ssp.sh" 2 20 >"$work/out.txt" 2>&1
rc=$?
cat "$work/out.txt"
check "exits 0" '[ $rc -eq 0 ]'
check "the machine first, then the header" 'grep -q "^== cpu: ." "$work/out.txt" &&
    grep -v "^== " "$work/out.txt" | head -n 1 | grep -q "sync MB  KB/step  vs bsp .* agree/blocked s "'
# row METHOD: the fields of its row
row() { awk -v m="$1" '$1 == m' "$work/out.txt"; }
check "four rows" '[ "$(awk "NF == 11 && \$2 ~ /%$/" "$work/out.txt" | wc -l)" -eq 4 ]'
check "bsp: 1.00x" '[ "$(row bsp | awk "{ print \$5 }")" = 1.00x ]'
for s in 100 200; do
    check "ssp s=$s: 2 workers, about 2x bsp's bytes" \
        'row ssp,ssp_staleness=$s | awk "{ v = \$5; sub(/x$/, \"\", v); exit !(v > 1.9 && v < 2.1) }"'
done
check "KB/step = sync MB / steps" 'awk "NF == 11 && \$2 ~ /%$/ { d = \$3 * 1e3 / 20 - \$4; if (d > 0.5 || d < -0.5) bad++ }
    END { exit bad > 0 }" "$work/out.txt"'
check "a top-1 per row" 'awk "NF == 11 && \$2 ~ /%$/ && !(\$11 > 0) { bad++ } END { exit bad > 0 }" "$work/out.txt"'
check "footer" 'grep -q "^(2 training ranks (ssp: + a parameter server), 20 steps each" "$work/out.txt"'
echo "$pass passed, $fail failed"
[ "$fail" -eq 0 ]
