#!/bin/sh
# Usage: test_frontier.sh SOURCE_DIR WORK_DIR
# scripts/experiments/frontier.py --quick (bsp and fedavg-2, seeds 1 and 2, 2 ranks in
# virtual time) end to end:
#  - it exits 0 and writes the table (with the machine, the OpenBLAS kernel
#    and the threads per rank), the TSV and the plot; one row per run
#    in the TSV, one per method in the table, each over 2 seeds, with the
#    mean and sample standard deviation of the TSV's finals (recomputed
#    here), fedavg-2 synchronising half the steps and sending fewer bytes
#    than bsp;
#  - the paired table: each method against bsp and against the nearest
#    FedAvg period, the mean ± sd of the per-seed differences (recomputed
#    here) and the sign count;
#  - where the time goes: each run's computation, waiting and network in
#    the TSV add up to its virtual training time; the table gives each
#    method's training time against BSP's on the same seeds (recomputed
#    here);
#  - run again, it resumes: every run "done before", nothing trained; with
#    one run's folder removed, only that run trains again;
#  - --target: each method's time to that score, "not reached" where no
#    evaluation reached it; by default BSP's mean;
#  - a method key with +KEY=VALUE settings runs with them ([selsync] and,
#    as net.KEY, [net]);
#  - bad options (a seed, a method, a setting, a detector cfg) are refused
#    with a message and a non-zero exit.
set -u
src=$1 work=$2
rm -rf "$work"; mkdir -p "$work"
. "$src/tests/common/checks.sh"
out=$work/frontier
front() { timeout 600 python3 "$src/scripts/experiments/frontier.py" --quick --results "$out" "$@"; }
front >"$work/first.txt" 2>&1
rc=$?
cat "$work/first.txt"
check "exits 0" '[ $rc -eq 0 ]'
check "table, TSV and plot written" '[ -s "$out/frontier.md" ] && [ -s "$out/frontier.tsv" ] && [ -s "$out/frontier.png" ]'
check "the table records the machine, kernel and threads" \
    'grep -q "^Machine (the last run.s): .*; commit [0-9a-f]*.*; OpenBLAS .*; threads per rank: 1 (virtual time)$" "$out/frontier.md"'
tsv=$out/frontier.tsv
check "machine.txt: the CPU, OpenBLAS's kernel as the library reports it, the commit, the command" \
    'grep -q "^cpu: ." "$out/machine.txt" && grep -q "^openblas kernel: [A-Za-z]" "$out/machine.txt" &&
     grep -q "^commit: [0-9a-f]\{40\} " "$out/machine.txt" && grep -q "^command: .*frontier.py --quick" "$out/machine.txt" &&
     grep -q "^ranks: 2$" "$out/machine.txt"'
check "every compare-methods folder has its machine.txt" \
    '[ "$(find "$out" -mindepth 2 -name machine.txt | wc -l)" -eq 4 ]'
check "a row per seed and method" \
    '[ "$(tail -n +2 "$tsv" | cut -f1,2 | sort | tr "\t\n" ": ")" = "1:bsp 1:fedavg-2 2:bsp 2:fedavg-2 " ]'
# mean and sample sd of each method's finals, as frontier.md gives them
stats() { awk -F'\t' -v m="$1" 'NR > 1 && $2 == m { x[++n] = $3; s += $3 }
    END { mu = s / n; for (i = 1; i <= n; i++) v += (x[i] - mu) ^ 2; printf "%.4f ± %.4f", mu, sqrt(v / (n - 1)) }' "$tsv"; }
for m in bsp fedavg-2; do
    check "$m: mean ± sd over the 2 seeds" 'grep -q "^| $m | 2 | $(stats $m) |" "$out/frontier.md"'
done
# paired: the per-seed differences of A's and B's finals, as frontier.md gives them
paired() { awk -F'\t' -v a="$1" -v b="$2" 'NR > 1 { f[$2, $1] = $3; seeds[$1] }
    END { for (s in seeds) { d[++n] = f[a, s] - f[b, s]; mu += d[n] / 2; up += d[n] > 0 }
          for (i = 1; i <= n; i++) v += (d[i] - mu) ^ 2; printf "%+.4f ± %.4f (%d/%d above)", mu, sqrt(v / (n - 1)), up, n }' "$tsv"; }
check "paired: fedavg-2 against bsp seed by seed, no other period to compare" \
    'grep -qF "| fedavg-2 | $(paired fedavg-2 bsp) | - | - |" "$out/frontier.md"'
check "paired: bsp against the nearest period, fedavg-2" \
    'grep -qF "| bsp | - | fedavg-2 | $(paired bsp fedavg-2) |" "$out/frontier.md"'
bytes() { awk -F'\t' -v m="$1" 'NR > 1 && $2 == m { s += $5 } END { print s }' "$tsv"; }
check "fedavg-2 synchronises half the steps, bsp all" \
    'grep -q "^| fedavg-2 | 2 | .* | 50% |" "$out/frontier.md" && grep -q "^| bsp | 2 | .* | 100% |" "$out/frontier.md"'
check "fedavg-2 sends fewer bytes than bsp" '[ "$(bytes fedavg-2)" -lt "$(bytes bsp)" ] && [ "$(bytes fedavg-2)" -gt 0 ]'
col() { head -1 "$tsv" | tr '\t' '\n' | grep -nx "$1" | cut -d: -f1; }
check "each run's computation, waiting and network add up to its training time" \
    '[ "$(awk -F"\t" -v t=$(col training_s) -v c=$(col compute_s) -v w=$(col waiting_s) -v n=$(col network_s) \
        "NR > 1 && \$c > 0 { d = \$t - \$c - \$w - \$n; ok += d < 0.01 && d > -0.01; k++ } END { print ok \"/\" k }" "$tsv")" = 4/4 ]'
ratio() { awk -F'\t' -v t=$(col training_s) 'NR > 1 { x[$2, $1] = $t; seeds[$1] }
    END { for (s in seeds) { r[++n] = x["fedavg-2", s] / x["bsp", s]; mu += r[n] / 2 }
          for (i = 1; i <= n; i++) v += (r[i] - mu) ^ 2; printf "%.2fx ± %.2f", mu, sqrt(v / (n - 1)) }' "$tsv"; }
check "where the time goes: fedavg-2's training time against bsp's, seed by seed; bsp's own '-'" \
    'sed -n "/^## Where the time goes/,\$p" "$out/frontier.md" | grep -qF "| $(ratio) |" &&
     sed -n "/^## Where the time goes/,\$p" "$out/frontier.md" | grep -q "^| bsp | .* | - |$"'

front >"$work/again.txt" 2>&1
check "run again: exits 0" '[ $? -eq 0 ]'
check "run again: every run done before" '[ "$(grep -c ": done before" "$work/again.txt")" -eq 4 ]'
front --target 0 >"$work/target.txt" 2>&1
check "--target 0: every method reaches it at its first evaluation" \
    '[ $? -eq 0 ] && grep -q "time to 0.0000 (s) |$" "$out/frontier.md" &&
     [ "$(grep -cE "^\| (bsp|fedavg-2) \| 2 \| .* \| [0-9]+\.[0-9]+ \|$" "$out/frontier.md")" -eq 2 ]'
front --target 2 >"$work/target2.txt" 2>&1
check "--target 2: not reached" '[ $? -eq 0 ] && [ "$(grep -c "| not reached |$" "$out/frontier.md")" -eq 2 ]'
check "with bsp among the methods the default target is its mean" \
    'front >/dev/null 2>&1 && grep -q "time to $(stats bsp | cut -d" " -f1) (s) |$" "$out/frontier.md"'
rm -rf "$out/seed-2/fedavg-2"
front >"$work/resume.txt" 2>&1
check "one run removed: exits 0" '[ $? -eq 0 ]'
check "one run removed: only it trains again" \
    '[ "$(grep -c ": done before" "$work/resume.txt")" -eq 3 ] && grep -q "seed 2 fedavg-2: [0-9]* s" "$work/resume.txt"'
check "one run removed: the TSV has every run again" '[ "$(tail -n +2 "$tsv" | wc -l)" -eq 4 ]'

m='fedavg-2+fedavg_interval=3+net.momentum=0.5'
front --methods "$m" --seeds 9 >"$work/set.txt" 2>&1
check "a method with +KEY=VALUE settings: exits 0" '[ $? -eq 0 ]'
cfg=$(find "$out/seed-9" -name run.cfg | head -1)
check "its [selsync] setting replaced, its [net] one too" \
    'sed -n "/^\[selsync\]/,\$p" "$cfg" | grep -qx "fedavg_interval=3" &&
     sed -n "/^\[net\]/,/^\[conv/p" "$cfg" | grep -qx "momentum=0.5" && [ "$(grep -c "^momentum=" "$cfg")" -eq 1 ]'
check "its table row: a quarter of the steps synchronised" 'grep -q "^| $m | 1 | .* | 25% |$" "$out/frontier.md"'
front --methods 'bsp+Delta' --seeds 9 >"$work/bad4.txt" 2>&1
check "a setting that is not KEY=VALUE: refused naming it" \
    '[ $? -ne 0 ] && grep -q "Delta.* is not a \[selsync\] KEY=VALUE setting" "$work/bad4.txt" "$out"/seed-9/bsp+Delta/compare.log'
front --seeds 1,x >"$work/bad.txt" 2>&1
check "a bad seed: refused" '[ $? -ne 0 ] && grep -q "frontier: --seeds takes comma-separated integers" "$work/bad.txt"'
front --methods nosuch --seeds 9 >"$work/bad2.txt" 2>&1
check "an unknown method: refused naming it" '[ $? -ne 0 ] && grep -q "frontier: unknown method .nosuch." "$work/bad2.txt"'
front --methods bsp,ssp --seeds 9 >"$work/bad5.txt" 2>&1
check "an unknown method among known ones: refused before any run, naming it" \
    '[ $? -ne 0 ] && grep -q "frontier: unknown method .ssp.; methods: bsp, " "$work/bad5.txt" && [ ! -d "$out/seed-9/bsp" ]'
front --det-cfg "$work/no-such.cfg" >"$work/bad3.txt" 2>&1
check "a missing --det-cfg: refused naming it" '[ $? -ne 0 ] && grep -q "frontier: --det-cfg .*no-such.cfg: no such file" "$work/bad3.txt"'
echo "$pass passed, $fail failed"
[ "$fail" -eq 0 ]
