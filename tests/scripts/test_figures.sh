#!/bin/sh
# Usage: test_figures.sh SOURCE_DIR WORK_DIR
# scripts/check/check-figures.py on the repository: every figure that README.md
# and docs/results.md state is recomputed from the committed data and
# matches. Then on copies of the pages and the list (docs/ linked): a
# figure altered on the page, a figure altered on the page and in the
# list (so only the recomputation can tell), an unlisted figure added to
# the prose, a computation over a missing data file: each fails, naming
# the row or the number; so does a row pooled from two files (" + ")
# whose second file is missing.
set -u
src=$1 work=$2
rm -rf "$work"; mkdir -p "$work/root/docs"
. "$src/tests/common/checks.sh"
figures() { python3 "$src/scripts/check/check-figures.py" "$@"; }

figures >"$work/repo.txt" 2>&1
check "the repository's figures all match ($(tail -1 "$work/repo.txt"))" '[ $? -eq 0 ]'
grep -q " 0 mismatches" "$work/repo.txt" && ok || { bad "no '0 mismatches' line"; cat "$work/repo.txt"; }

# a copy: README.md and docs/results.md copied, everything else linked
root=$work/root
for f in "$src"/docs/*; do ln -s "$f" "$root/docs/"; done
rm "$root/docs/results.md" "$root/docs/figures.tsv"
reset() {
    cp "$src/README.md" "$root/README.md"
    cp "$src/docs/results.md" "$root/docs/results.md"
    cp "$src/docs/figures.tsv" "$root/docs/figures.tsv"
}
run() { figures --root "$root" >"$work/out.txt" 2>&1; }
reset
run
check "the copy matches as the repository does" '[ $? -eq 0 ]'

# the demo's top-1 in the status table, 0.8891 -> 0.8892
reset
sed -i 's/held-out top-1 0.8891/held-out top-1 0.8892/' "$root/README.md"
run
check "a figure altered on the page fails" '[ $? -ne 0 ]'
check "... naming the row of the figure it lost" "grep -q \"README.md: '0.8891'): the page does not state this figure\" '$work/out.txt'"
check "... and the unlisted number it gained" "grep -q \"'0.8892' in .* is not in docs/figures.tsv\" '$work/out.txt'"

# SelSync's score in the label-skew table, altered in both places
reset
sed -i 's/| selsync+max_local=0+lag=0 | 0.7551 ± 0.0152 |/| selsync+max_local=0+lag=0 | 0.7651 ± 0.0152 |/' "$root/docs/results.md" "$root/docs/figures.tsv"
grep -q "0.7651 ± 0.0152" "$root/docs/figures.tsv" && ok || bad "the list was not altered"
run
check "a figure altered on the page and in the list fails" '[ $? -ne 0 ]'
check "... the recomputation names what the data gives" "grep -q \"gives '| selsync+max_local=0+lag=0 | 0.7551 ± 0.0152 |\" '$work/out.txt'"

reset
printf '\nSelSync is 4.2x faster.\n' >>"$root/docs/results.md"
run
check "an unlisted figure in the prose fails" '[ $? -ne 0 ]'
check "... naming it" "grep -q \"docs/results.md: '4.2' in 'SelSync is 4.2x faster.' is not in\" '$work/out.txt'"

reset
sed -i '0,/docs\/demo\/demo-output.txt/s//docs\/demo\/missing.txt/' "$root/docs/figures.tsv"
run
check "a missing data file fails" '[ $? -ne 0 ]'
check "... naming the file" "grep -q 'missing.txt' '$work/out.txt'"

# a row pooled from two files (" + "), the second one missing
reset
sed -i '0,/ + docs\/regret\/variants\/wide-label2-4\/frontier.tsv/s//&.missing/' "$root/docs/figures.tsv"
grep -q "variants/wide-label2-4/frontier.tsv.missing" "$root/docs/figures.tsv" && ok || bad "the list was not altered"
run
check "a pooled row with a missing file fails, naming it" \
    '[ $? -ne 0 ] && grep -q "variants/wide-label2-4/frontier.tsv.missing" "$work/out.txt"'

echo "$pass passed, $fail failed"
[ "$fail" -eq 0 ]
