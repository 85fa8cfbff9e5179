#!/bin/sh
# Usage: test_scaling.sh SOURCE_DIR WORK_DIR
# scripts/experiments/scaling.py --quick (bsp and selsync at 2 and 4 ranks in virtual
# time) end to end:
#  - it exits 0 and writes one results folder with the table, the TSV, the
#    plot and one compare-methods folder per rank count;
#  - a row per rank count and method; at the same steps and batch per rank,
#    4 ranks train twice the images of 2; images/s is images over the
#    virtual training time; every run reaches the common score (the lowest
#    final one) within its training time, at the virtual time of its first
#    evaluation row that scores it (recomputed from the run's metrics);
#    bsp's rows are 1.00x bsp.
set -u
src=$1 work=$2
rm -rf "$work"; mkdir -p "$work"
. "$src/tests/common/checks.sh"
timeout 600 python3 "$src/scripts/experiments/scaling.py" --quick --results "$work/results" >"$work/out.txt" 2>&1
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
# the time to the common score, recomputed from each run's own metrics: the
# virtual time of its first evaluation row scoring at least the lowest final
python3 - "$tsv" "$out/runs" >"$work/recomputed.txt" 2>&1 <<'EOF'
import csv, glob, sys
rows = list(csv.DictReader(open(sys.argv[1]), delimiter="\t"))
common = min(float(r["final"]) for r in rows)
bad = 0
for r in rows:
    [metrics] = glob.glob(f"{sys.argv[2]}/*-{r['ranks']}ranks-*/runs/wide/virtual-{r['method']}/metrics.0.tsv")
    first = None
    for line in open(metrics):
        if line.startswith("# eval\t"):
            f = dict(x.split("=", 1) for x in line.rstrip("\n").split("\t")[1:])
            if first is None and round(float(f["top1"]), 4) >= common:
                first = float(f["virtual_s"])
    ok = first is not None and abs(first - float(r["time_to_target_s"])) <= 0.0015
    print(f"{r['ranks']} ranks {r['method']}: {r['time_to_target_s']} s in the table, {first} s from its metrics"
          + ("" if ok else "  <- differs"))
    bad += not ok
sys.exit(1 if bad else 0)
EOF
check "the time to the common score is each run's first evaluation reaching it ($(tr '\n' ';' <"$work/recomputed.txt"))" '[ $? -eq 0 ]'
check "bsp's rows are 1.00x bsp" '[ "$(grep -c "| bsp | .* | 1.00x | " "$out/scaling.md")" -eq 2 ]'
echo "$pass passed, $fail failed"
[ "$fail" -eq 0 ]
