#!/bin/sh
# Usage: test_cfg_sections.sh CFG_SHAPES CFG_DIR WORK_DIR [all|errors]
# Every cfg in CFG_DIR (Darknet's upstream cfg/) parses, and parses to the
# same layers when a [selsync] section is appended or inserted in the
# middle. An unknown section inserted in the middle is a clean error
# (exit 1, no signal) naming the file and line. With "errors" (the
# sanitizer build, where each parse of a large cfg takes seconds) each cfg
# is parsed once and the unknown section is refused, but the two [selsync]
# placements, which test the parser's logic and not its memory, are left to
# the normal build.
set -u
shapes=$1 cfgdir=$2 work=$3 variants=${4:-all}
rm -rf "$work"; mkdir -p "$work"
# some cfgs name files relative to Darknet's tree (e.g. data/9k.tree)
. "$(cd "$(dirname "$0")" && pwd)/../common/checks.sh"
cd "$cfgdir/.." || exit 1
n=0

for cfg in "$cfgdir"/*.cfg; do
    name=$(basename "$cfg" .cfg)
    base="$work/$name.cfg"
    # batch 1 keeps memory small; shapes do not depend on it
    sed -e 's/^batch=.*/batch=1/' -e 's/^subdivisions=.*/subdivisions=1/' "$cfg" >"$base"
    if ! "$shapes" "$base" >"$work/$name.out" 2>"$work/$name.err"; then
        bad "$name: does not parse"; sed 's/^/  /' "$work/$name.err" | tail -3
        continue
    fi
    sections=$(grep -c '^\[' "$base")
    layers=$(sed -n 's/^layers \([0-9]*\) .*/\1/p' "$work/$name.out")
    [ "$layers" -eq $((sections - 1)) ] || bad "$name: $layers layers for $sections sections"

    # insertion point: just before the section header in the middle
    mid=$(grep -n '^\[' "$base" | sed -n "$(( (sections + 2) / 2 ))p" | cut -d: -f1)

    { cat "$base"; printf '\n[selsync]\nmethod=bsp\nseed=7\n'; } >"$work/$name.append.cfg"
    { head -n $((mid - 1)) "$base"; printf '[selsync]\ndelta=0.5\n\n'; tail -n +"$mid" "$base"; } \
        >"$work/$name.middle.cfg"
    [ "$variants" = all ] && placements="append middle" || placements=
    for v in $placements; do
        if ! "$shapes" "$work/$name.$v.cfg" >"$work/$name.$v.out" 2>"$work/$name.$v.err"; then
            bad "$name ($v): does not parse"; tail -3 "$work/$name.$v.err"
        elif ! cmp -s "$work/$name.out" "$work/$name.$v.out"; then
            bad "$name ($v): layers differ"; diff "$work/$name.out" "$work/$name.$v.out" | head -5
        fi
    done

    { head -n $((mid - 1)) "$base"; printf '[bogus]\nsize=3\n\n'; tail -n +"$mid" "$base"; } \
        >"$work/$name.bogus.cfg"
    "$shapes" "$work/$name.bogus.cfg" >/dev/null 2>"$work/$name.bogus.err"
    rc=$?
    if [ $rc -ne 1 ]; then
        bad "$name (unknown section): exit status $rc, expected 1"
    elif ! grep -qF "$work/$name.bogus.cfg:$mid: unknown section [bogus]" "$work/$name.bogus.err"; then
        bad "$name (unknown section): message does not name file and line"
        tail -2 "$work/$name.bogus.err"
    fi
    n=$((n + 1))
done

echo "$((n * (${placements:+2} + 2) - fail)) passed, $fail failed"
[ "$fail" -eq 0 ] && [ "$n" -gt 0 ]
