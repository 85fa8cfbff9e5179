#!/bin/sh
# Usage: test_project_cfgs.sh CFG_SHAPES CFG_DIR WORK_DIR
# Every cfg this project ships parses with the patched Darknet (its
# [selsync] section, if any, accepted) into one layer per layer section.
set -u
shapes=$1 cfgdir=$2 work=$3
rm -rf "$work"; mkdir -p "$work"
. "$(dirname "$0")/../common/checks.sh"
n=0
for cfg in "$cfgdir"/*.cfg; do
    name=$(basename "$cfg" .cfg)
    sed -e 's/^batch=.*/batch=1/' -e 's/^subdivisions=.*/subdivisions=1/' "$cfg" >"$work/$name.cfg"
    if ! "$shapes" "$work/$name.cfg" >"$work/$name.out" 2>"$work/$name.err"; then
        bad "$name: does not parse"; tail -3 "$work/$name.err"; continue
    fi
    want=$(grep '^\[' "$cfg" | grep -cv '^\[net\]\|^\[selsync\]')
    got=$(sed -n 's/^layers \([0-9]*\) .*/\1/p' "$work/$name.out")
    [ "$got" = "$want" ] || bad "$name: $got layers, expected $want"
    n=$((n + 1))
done
echo "$n cfgs, $fail failed"
[ "$n" -gt 0 ] && [ "$fail" -eq 0 ]
