#!/bin/sh
# Usage: test_bench_stragglers.sh SOURCE_DIR WORK_DIR
# scripts/bench/bench-stragglers.py --quick (bsp, ssp-100 and selsync, 2 ranks in
# virtual time, every straggler setting) end to end:
#  - it exits 0 and writes the table and the TSV, a row per setting and
#    method (SSP's frontier table without a share of synchronised steps); the header names each setting's SELSYNC_VIRTUAL terms, the
#    jitter's pause being BSP's computation per step without stragglers
#    (recomputed here from that run's summary), and the jitter runs carry it;
#  - the runs without stragglers are the reference (ratio 1, all of the
#    ideal throughput), and a rank at half speed slows BSP;
#  - run again, it resumes (nothing trained); slow-tenth-jitter, named,
#    slows the last rank by a tenth on top of the jitter; bad options are
#    refused.
set -u
src=$1 work=$2
rm -rf "$work"; mkdir -p "$work"
. "$src/tests/common/checks.sh"
out=$work/stragglers
bench() { timeout 800 python3 "$src/scripts/bench/bench-stragglers.py" --quick --results "$out" "$@"; }
bench >"$work/first.txt" 2>&1
rc=$?
cat "$work/first.txt"
check "exits 0" '[ $rc -eq 0 ]'
check "table and TSV written" '[ -s "$out/stragglers.md" ] && [ -s "$out/stragglers.tsv" ]'
check "the plot's data: a row per setting, by severity, a column per method" \
    '[ "$(grep -v "^#" "$out/stragglers.dat" | cut -f2 | tr "\n" " ")" = "none jitter slow-quarter slow-one " ] &&
     [ "$(grep -v "^#" "$out/stragglers.dat" | awk -F"\t" "{ print NF }" | sort -u)" = 5 ]'
command -v gnuplot >/dev/null && check "the plot drawn" '[ -s "$out/stragglers.png" ]'
tsv=$out/stragglers.tsv
check "a row per setting and method" '[ "$(tail -n +2 "$tsv" | cut -f1,2 | tr "\t\n" ": ")" = "$(for x in none jitter slow-one slow-quarter; do printf "$x:bsp $x:ssp-100 $x:selsync "; done)" ]'
check "ssp: no share of synchronised steps" 'grep -q "^| ssp-100 | 1 | .* | - |\( [^|]* |\)\{0,1\}$" "$out/none/frontier.md"'
check "the slow settings named" 'grep -q "^- slow-one: slow=1:2 " "$out/stragglers.md" && grep -q "^- slow-quarter: slow=1:1.5 " "$out/stragglers.md"'
pause=$(sed -n 's/^- jitter: jitter=0.02:\([0-9.e-]*\)s .*/\1/p' "$out/stragglers.md")
summary=$(ls "$out"/none/seed-1/bsp/*/summary.tsv)
step=$(awk -F'\t' 'NR == 1 { for (i = 1; i <= NF; i++) c[$i] = i } NR == 2 { print $c["compute_s"] / $c["steps"] }' "$summary")
check "the jitter's pause is BSP's computation per step ($pause s, $step s)" \
    '[ -n "$pause" ] && awk -v a="$pause" -v b="$step" "BEGIN { exit !(b > 0 && (a - b) ^ 2 < (1e-3 * b) ^ 2) }"'
ms=$(awk -v a="$pause" 'BEGIN { printf "%g", a * 1e3 }')
check "the jitter runs pause ($ms ms)" 'grep -q "pauses of $ms ms with probability 0.02 per step" "$out"/jitter/seed-1/selsync/*/runs/*/*/output.txt'
check "no straggler: the reference" '[ "$(awk -F"\t" "\$1 == \"none\" { print \$6, \$7 }" "$tsv" | sort -u)" = "1.000 1.000" ]'
t() { awk -F'\t' -v s="$1" -v m="$2" '$1 == s && $2 == m { print $5 }' "$tsv"; }
check "a rank at half speed slows bsp ($(t none bsp) s, $(t slow-one bsp) s)" \
    'awk -v a="$(t none bsp)" -v b="$(t slow-one bsp)" "BEGIN { exit !(b > a) }"'

bench >"$work/again.txt" 2>&1
check "run again: exits 0, nothing trained" '[ $? -eq 0 ] && [ "$(grep -c ": done before" "$work/again.txt")" -eq 12 ]'
bench --settings none,slow-tenth-jitter >"$work/tenth.txt" 2>&1
check "slow-tenth-jitter, named: the last rank 10 % slower and every rank pausing, 94 % of the ideal throughput" \
    '[ $? -eq 0 ] && [ "$(grep -c ": done before" "$work/tenth.txt")" -eq 3 ] &&
     grep -q "^- slow-tenth-jitter: slow=1:1.1,jitter=0.02:${pause}s (ideal throughput 94 % of full speed)" "$out/stragglers.md" &&
     grep -q "pauses of $ms ms with probability 0.02 per step" "$out"/slow-tenth-jitter/seed-1/selsync/*/runs/*/*/output.txt'
bench --settings none,sometimes >"$work/bad.txt" 2>&1
check "an unknown setting: refused" '[ $? -ne 0 ] && grep -q "bench-stragglers: --settings: unknown sometimes" "$work/bad.txt"'
bench --methods selsync >"$work/bad2.txt" 2>&1
check "no bsp: refused" '[ $? -ne 0 ] && grep -q "bench-stragglers: --methods must include bsp" "$work/bad2.txt"'
echo "$pass passed, $fail failed"
[ "$fail" -eq 0 ]
