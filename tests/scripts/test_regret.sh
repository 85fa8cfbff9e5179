#!/bin/sh
# Usage: test_regret.sh SOURCE_DIR WORK_DIR
# scripts/experiments/regret.py on two workloads written here (frontier.tsv files of 3
# seeds): the best FedAvg period of each (fedavg-2 on one, fedavg-8 on the
# other), every method's paired regret in points (mean ± sd of the per-seed
# regret), bytes against the best period's, the row over the workloads
# with the worst case, and the verdict on the goal: met, then missed when
# SelSync is 0.5 points behind on one workload. A method's diverged runs
# are named in its row and make it the worst case over the workloads; a
# period that diverged on a seed is not the best, whatever its other
# seeds; a folder without frontier.tsv and a workload without a period are
# refused. A workload of two folders pools their runs (a method run in both
# must have the same final scores) and --defaults names the method the goal
# is checked for, or several, of which each workload takes the first it ran.
set -u
src=$1 work=$2
rm -rf "$work"; mkdir -p "$work/a" "$work/b" "$work/c" "$work/d" "$work/e" "$work/f" "$work/none"
. "$src/tests/common/checks.sh"
head='seed\tmethod\tfinal\tlocal_fraction\tbytes_per_rank\ttraining_s\n'
rows() { # METHOD MB SECONDS FINAL1 FINAL2 FINAL3
    m=$1 b=$2 t=$3; shift 3
    s=0; for f in "$@"; do s=$((s + 1)); printf '%d\t%s\t%s\t0.5\t%d\t%s\n' $s $m $f $b $t; done
}
{ printf "$head"; rows fedavg-2 2000000 10 0.8000 0.8100 0.8200; rows fedavg-8 500000 8 0.7800 0.7900 0.8000
  rows selsync 400000 8 0.7990 0.8080 0.8200; } >"$work/a/frontier.tsv"
{ printf "$head"; rows fedavg-2 2000000 10 0.7000 0.7000 0.7000; rows fedavg-8 500000 8 0.7200 0.7250 0.7300
  rows selsync 400000 8 0.7200 0.7200 0.7300; printf '3\tbsp\tdiverged at step 5\t0\t0\t0\n'
  rows fedavg-16 250000 6 0.7500 0.7500; printf '3\tfedavg-16\tdiverged at step 9\t0\t0\t0\n'; } >"$work/b/frontier.tsv"
regret() { python3 "$src/scripts/experiments/regret.py" --out "$work/out" "$@"; }

regret A="$work/a" B="$work/b" >"$work/ab.txt" 2>&1
check "exits 0 and writes regret.md" '[ $? -eq 0 ] && [ -s "$work/out/regret.md" ]'
check "and machine.txt, naming the command" 'grep -q "^command: .*regret.py --out" "$work/out/machine.txt"'
md=$work/out/regret.md
check "A: the best period is fedavg-2" 'grep -q "the best period: fedavg-2, 0.8100" "$md"'
check "B: the best period is fedavg-8" 'grep -q "the best period: fedavg-8, 0.7250" "$md"'
# per seed on A: selsync 0.1, 0.2, 0 points under fedavg-2: mean 0.10, sd 0.10
check "A: selsync's paired regret and bytes" 'grep -qF "| selsync | 0.8090 | +0.10 ± 0.10 (3 seeds) | 0.40 | 0.20x | 8.0 |" "$md"'
check "A: fedavg-8 2 points behind every seed" 'grep -qF "| fedavg-8 | 0.7900 | +2.00 ± 0.00 (3 seeds) |" "$md"'
check "B: fedavg-2's regret 2.5 ± 0.5, at 4x the best period's bytes" 'grep -qF "| fedavg-2 | 0.7000 | +2.50 ± 0.50 (3 seeds) | 2.00 | 4.00x |" "$md"'
check "B: bsp, diverged on its one seed, named without figures" 'grep -qF "| bsp | - | diverged on seed 3 | - | - | - |" "$md"'
check "B: fedavg-16, above fedavg-8 on its 2 finished seeds but diverged on the third, is not the best" \
    'grep -qF "| fedavg-16 | 0.7500 | -2.75 ± 0.35 (2 seeds; diverged on seed 3) | 0.25 | 0.50x | 6.0 |" "$md"'
check "over the workloads: a method that diverged is at its worst there" \
    'grep -qF "| bsp | - | diverged | diverged |" "$md" && grep -qF "| fedavg-16 | - | diverged | diverged |" "$md"'
check "over the workloads: each method's regrets and worst" \
    'grep -qF "| fedavg-2 | +0.00 | +2.50 | +2.50 |" "$md" && grep -qF "| selsync | +0.10 | +0.17 | +0.17 |" "$md"'
check "goal met: selsync within 0.3, every period 1 point behind somewhere" \
    'grep -q "SelSync (selsync) meets it; fixed periods each miss by 1 point somewhere" "$md"'

{ printf "$head"; rows fedavg-2 2000000 10 0.8000 0.8100 0.8200; rows selsync 400000 8 0.7950 0.8050 0.8150; } >"$work/c/frontier.tsv"
regret A="$work/a" C="$work/c" >"$work/ac.txt" 2>&1
check "goal missed: selsync 0.5 points behind on C" '[ $? -eq 0 ] && grep -q "SelSync (selsync) does not;" "$md"'
check "goal missed: fedavg-2 is the best period on both" 'grep -q "not all miss by 1 point anywhere" "$md"'

# C's variants in a second folder: selsync again (the same finals) and a
# variant level with fedavg-2
{ printf "$head"; rows selsync 400000 9 0.7950 0.8050 0.8150; rows selsync+max_local=7 600000 9 0.8000 0.8100 0.8200
} >"$work/d/frontier.tsv"
regret A="$work/a" C="$work/c,$work/d" >"$work/acd.txt" 2>&1
check "two folders of one workload pool their runs" '[ $? -eq 0 ] &&
    grep -qF "| selsync+max_local=7 | 0.8100 | +0.00 ± 0.00 (3 seeds) | 0.60 | 0.30x | 9.0 |" "$md" &&
    grep -qF "| selsync | 0.8050 | +0.50 ± 0.00 (3 seeds) | 0.40 | 0.20x | 8.0 |" "$md"'
{ printf "$head"; rows selsync+max_local=7 600000 9 0.8000 0.8100 0.8200; } >"$work/f/frontier.tsv"
regret --defaults selsync+max_local=7 A="$work/a,$work/f" C="$work/c,$work/d" >"$work/defaults.txt" 2>&1
check "--defaults: the goal checked for the method named" '[ $? -eq 0 ] &&
    grep -q "SelSync (selsync+max_local=7) meets it" "$md"'
regret --defaults selsync+max_local=7,selsync A="$work/a,$work/f" C="$work/c" >"$work/keys.txt" 2>&1
check "--defaults KEY,KEY: each workload takes the first key it ran, in a row of their own and in the goal" \
    '[ $? -eq 0 ] && grep -qF "| SelSync'"'"'s defaults (selsync+max_local=7, else selsync) | +0.00 | +0.50 | +0.50 |" "$md" &&
     grep -q "SelSync (selsync+max_local=7, else selsync) does not;" "$md"'
{ printf "$head"; rows selsync 400000 9 0.7950 0.8051 0.8150; } >"$work/e/frontier.tsv"
regret C="$work/c,$work/e" >"$work/mismatch.txt" 2>&1
check "a method run in two folders with another final is refused, naming it and the seed" '[ $? -ne 0 ] &&
    grep -q "selsync, seed 2: final 0.8051 in .*/e but 0.805 before: not the same run" "$work/mismatch.txt"'

regret A="$work/missing" >"$work/missing.txt" 2>&1
check "a folder without frontier.tsv is refused" '[ $? -ne 0 ] && grep -q "no frontier.tsv" "$work/missing.txt"'
{ printf "$head"; rows bsp 2000000 10 0.8 0.8 0.8; } >"$work/none/frontier.tsv"
regret N="$work/none" >"$work/none.txt" 2>&1
check "a workload without a FedAvg period is refused" '[ $? -ne 0 ] && grep -q "no FedAvg period" "$work/none.txt"'
regret "$work/a" >"$work/noname.txt" 2>&1
check "a workload without NAME= is refused" '[ $? -ne 0 ] && grep -q "expected NAME=FRONTIER_DIR" "$work/noname.txt"'

echo "$pass passed, $fail failed"
[ "$fail" -eq 0 ]
