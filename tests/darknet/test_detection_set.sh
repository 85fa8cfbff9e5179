#!/bin/sh
# Usage: test_detection_set.sh OUT_BASE
# Checks scripts/data/make-detection-set.py: counts, label format and ranges,
# determinism (same seed -> identical images and labels, other seed differs),
# idempotence (second run is a no-op), the progress line and the
# missing-source error.
set -u
base=$1
script=$(cd "$(dirname "$0")/../.." && pwd)/scripts/data/make-detection-set.py
rm -rf "$base"; mkdir -p "$base"
. "$(dirname "$0")/../common/checks.sh"

# gen NAME DIR ARGS...: run the generator, output in $base/NAME.log
gen() {
    name=$1 dir=$2; shift 2
    if python3 "$script" --out "$dir" --train 50 --valid 10 "$@" >"$base/$name.log" 2>&1; then ok
    else bad "$name: exit status $?"; tail -3 "$base/$name.log"; fi
}

gen a1 "$base/a" --seed 3
gen a2 "$base/a" --seed 3
gen b "$base/b" --seed 3
gen c "$base/c" --seed 4

if grep -q "is up to date" "$base/a2.log"; then ok; else bad "second run into a did not say up to date"; fi
# progress: the last line of it says all 60 are written
if grep -q "^make-detection-set: 60/60 canvases written (100%, [0-9]* s, about 0 s left)$" "$base/a1.log"; then ok
else bad "no final progress line in a1.log"; fi

for d in a b c; do
    for s in train:50 valid:10; do
        split=${s%:*} n=${s#*:}
        ni=$(ls "$base/$d/images/$split" 2>/dev/null | grep -c '\.png$')
        nl=$(ls "$base/$d/labels/$split" 2>/dev/null | grep -c '\.txt$')
        nlist=$(wc -l <"$base/$d/$split.list" 2>/dev/null || echo 0)
        if [ "$ni" -eq "$n" ] && [ "$nl" -eq "$n" ] && [ "$nlist" -eq "$n" ]; then ok
        else bad "$d/$split: $ni images, $nl labels, $nlist list lines (want $n)"; fi
    done
    # every label line: 5 fields, class 0..9, box inside the unit square
    bad=$(cat "$base/$d"/labels/*/*.txt | awk '
        NF != 5 || $1 !~ /^[0-9]$/ { print "line " NR ": " $0; next }
        { x0 = $2 - $4 / 2; x1 = $2 + $4 / 2; y0 = $3 - $5 / 2; y1 = $3 + $5 / 2
          if ($2 < 0 || $2 > 1 || $3 < 0 || $3 > 1 || $4 <= 0 || $4 > 1 || $5 <= 0 || $5 > 1 ||
              x0 < -1e-5 || y0 < -1e-5 || x1 > 1 + 1e-5 || y1 > 1 + 1e-5) print "line " NR ": " $0 }')
    if [ -z "$bad" ]; then ok; else bad "$d: bad label lines:"; echo "$bad" | head -3; fi
    if grep -q "^classes=10$" "$base/$d/fmnist-det.data" && [ -d "$base/$d/backup" ] &&
       [ "$(wc -l <"$base/$d/names.txt")" -eq 10 ]; then ok; else bad "$d: bad .data, names.txt or backup/"; fi
    # every listed image has its label where Darknet looks for it
    missing=$(sed 's#/images/#/labels/#; s#\.png$#.txt#' "$base/$d/train.list" | while read -r f; do
        [ -f "$f" ] || echo "$f"; done)
    if [ -z "$missing" ]; then ok; else bad "$d: labels missing: $(echo "$missing" | head -1)"; fi
done

if diff -r "$base/a/images" "$base/b/images" >/dev/null && diff -r "$base/a/labels" "$base/b/labels" >/dev/null
then ok; else bad "same seed gave different images or labels in a and b"; fi
if diff -r "$base/a/labels" "$base/c/labels" >/dev/null; then bad "another seed gave the same labels"; else ok; fi

mkdir -p "$base/nosrc"
python3 "$script" --out "$base/d" --train 5 --valid 5 --source "$base/nosrc" >"$base/nosrc.log" 2>&1
rc=$?
if [ "$rc" -ne 0 ] && grep -qF "$base/nosrc/train-images-idx3-ubyte.gz" "$base/nosrc.log" &&
   grep -qF "apt-get install dataset-fashion-mnist" "$base/nosrc.log"; then ok
else bad "missing source: exit status $rc"; cat "$base/nosrc.log"; fi

echo "$pass passed, $fail failed"
[ "$fail" -eq 0 ]
