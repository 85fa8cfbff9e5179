#!/bin/sh
# Usage: test_patch_series.sh SOURCE_DIR DOWNLOAD_DIR WORK_DIR
# The patch series applies cleanly to a fresh copy of Debian's pristine
# tarball, the tree builds with Darknet's own Makefile after every patch,
# and a patch that does not apply is reported by name without changing the
# tree.
set -u
src=$1 cache=$2 work=$3
rm -rf "$work"; mkdir -p "$work"
pass=0 fail=0
ok() { pass=$((pass + 1)); }
bad() { echo "FAIL $*"; fail=$((fail + 1)); }

sh "$src/scripts/fetch-darknet.sh" "$work/pristine" "$cache" >/dev/null || { echo "FAIL fetch"; exit 1; }

# One patch at a time: each applies and leaves a tree that builds.
cp -a "$work/pristine" "$work/tree"
mkdir -p "$work/one"
grep -v '^#' "$src/patches/series" | grep . | while read -r name; do
    printf '%s\n' "$name" >"$work/one/series"
    cp "$src/patches/$name" "$work/one/"
    sh "$src/scripts/apply-patches.sh" "$work/tree" "$work/one" >/dev/null || { echo "FAIL $name does not apply"; exit 1; }
    make -C "$work/tree" -j2 >"$work/build.log" 2>&1 || { echo "FAIL tree does not build after $name"; tail -5 "$work/build.log"; exit 1; }
    echo "built after $name"
done && ok || bad "series, patch by patch"

# The whole series at once matches the patch-by-patch result.
cp -a "$work/pristine" "$work/whole"
sh "$src/scripts/apply-patches.sh" "$work/whole" "$src/patches" >/dev/null || bad "series does not apply"
make -C "$work/tree" clean >/dev/null 2>&1
diff -r -q -x obj -x backup -x results "$work/whole" "$work/tree" >/dev/null && ok || bad "whole series differs from patch by patch"

# Applying twice fails on the first patch, naming it, and changes nothing.
cp -a "$work/whole" "$work/twice"
first=$(grep -v '^#' "$src/patches/series" | grep . | head -n 1)
if sh "$src/scripts/apply-patches.sh" "$work/twice" "$src/patches" 2>"$work/twice.err"; then
    bad "applying the series twice succeeded"
else
    grep -qF "patch $first does not apply" "$work/twice.err" && grep -q "hunk\|Reversed\|previously applied" "$work/twice.err" \
        && ok || { bad "failure message does not name $first and its hunks"; cat "$work/twice.err"; }
    diff -r -q "$work/whole" "$work/twice" >/dev/null && ok || bad "a failed application changed the tree"
fi

# A missing patch named in series is an error.
mkdir -p "$work/broken" && printf 'no-such.patch\n' >"$work/broken/series"
sh "$src/scripts/apply-patches.sh" "$work/pristine" "$work/broken" 2>"$work/broken.err" \
    && bad "missing patch accepted" || { grep -qF "no-such.patch" "$work/broken.err" && ok || bad "missing patch not named"; }

echo "$pass passed, $fail failed"
[ "$fail" -eq 0 ]
