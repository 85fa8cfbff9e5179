#!/bin/sh
# Usage: test_patch_series.sh SOURCE_DIR DOWNLOAD_DIR WORK_DIR
# The patch series applies cleanly to a fresh copy of Debian's pristine
# tarball, the tree builds with Darknet's own Makefile after every patch,
# and a patch that does not apply is reported by name without changing the
# tree. Every patch has a DEP-3 header; the series file's comment and blank
# lines are skipped. A plugin built for another plugin interface version
# (patch 0012) is refused before any of its code runs.
#
# The series' shape: patches are numbered 0001, 0002, ... in series order;
# they come in five groups, each opened by one comment line of series
# ("# Upstream bug fixes ...", "# Extension points ...", "# Performance
# ...", "# The YOLOv4 / YOLOv7 family ...", "# Reproducible runs ..."), in that order, each group once, no patch outside a group; and each
# upstream fix applies alone to the pristine tree, so that it can be taken
# without the others.
set -u
src=$1 cache=$2 work=$3
rm -rf "$work"; mkdir -p "$work"
. "$src/tests/common/checks.sh"

# The patch names in series: its lines without comments and blank lines.
names() { sed -e 's/^[[:space:]]*//' -e 's/[[:space:]]*$//' -e '/^#/d' -e '/^$/d' "$src/patches/series"; }

# DEP-3: each patch says what it does, who wrote it, whether it went
# upstream and when its header last changed.
for name in $(names); do
    missing=
    for field in Description Author Forwarded Last-Update; do
        sed '/^---/q' "$src/patches/$name" | grep -q "^$field: ." || missing="$missing $field"
    done
    [ -z "$missing" ] && ok || bad "$name: no DEP-3$missing"
done

# Numbers: the Nth patch of series is numbered N (4 digits).
i=0 misnumbered=
for name in $(names); do
    i=$((i + 1))
    [ "${name%%-*}" = "$(printf '%04d' $i)" ] || misnumbered="$misnumbered $name"
done
[ -z "$misnumbered" ] && ok || bad "patch numbers not consecutive in series order:$misnumbered"

# Groups: each patch's group is the last group comment above it; prints
# "GROUP NAME" per patch, "GROUP" per group comment as "= GROUP".
groups() {
    sed -e 's/^[[:space:]]*//' -e 's/[[:space:]]*$//' -e '/^$/d' "$src/patches/series" | awk '
        /^# Upstream bug fixes/ { g = "fix"; print "= " g; next }
        /^# Extension points/   { g = "ext"; print "= " g; next }
        /^# Performance/        { g = "perf"; print "= " g; next }
        /^# The YOLOv4/         { g = "yolo"; print "= " g; next }
        /^# Reproducible runs/  { g = "repro"; print "= " g; next }
        /^#/ { next }
        { print (g == "" ? "none" : g), $0 }'
}
order=$(groups | sed -n 's/^= //p' | tr '\n' ' ')
[ "$order" = "fix ext perf yolo repro " ] && ok || bad "series groups are \"$order\", not \"fix ext perf yolo repro\" once each"
groups | grep -q '^none ' && bad "patches outside any group: $(groups | sed -n 's/^none //p' | tr '\n' ' ')" || ok
fixes=$(groups | sed -n 's/^fix //p')
[ -n "$fixes" ] && ok || bad "no upstream fixes in series"

sh "$src/scripts/build/fetch-darknet.sh" "$work/pristine" "$cache" >/dev/null || { echo "FAIL fetch"; exit 1; }

# Each upstream fix alone on a fresh pristine tree.
mkdir -p "$work/alone"
for name in $fixes; do
    printf '%s\n' "$name" >"$work/alone/series"
    cp "$src/patches/$name" "$work/alone/"
    rm -rf "$work/alone-tree" && cp -a "$work/pristine" "$work/alone-tree"
    sh "$src/scripts/build/apply-patches.sh" "$work/alone-tree" "$work/alone" >"$work/alone.out" 2>&1 \
        && ok || { bad "upstream fix $name does not apply alone to the pristine tree"; sed 's/^/  /' "$work/alone.out"; }
done
rm -rf "$work/alone-tree"

# One patch at a time: each applies and leaves a tree that builds.
cp -a "$work/pristine" "$work/tree"
mkdir -p "$work/one"
names | while read -r name; do
    printf '%s\n' "$name" >"$work/one/series"
    cp "$src/patches/$name" "$work/one/"
    sh "$src/scripts/build/apply-patches.sh" "$work/tree" "$work/one" >/dev/null || { echo "FAIL $name does not apply"; exit 1; }
    make -C "$work/tree" -j2 >"$work/build.log" 2>&1 || { echo "FAIL tree does not build after $name"; tail -5 "$work/build.log"; exit 1; }
    echo "built after $name"
done && ok || bad "series, patch by patch"

# Plugin interface versions: the tree's darknet linked with a plugin that
# states this Darknet's version, another one, or none. Only the first runs;
# the others stop with a message before the plugin's init.
cat >"$work/plugin.c" <<'PLUGIN'
#include <stdio.h>
#include <string.h>
#include "darknet.h"
#ifdef VERSION
const int darknet_plugin_api_version = VERSION;
#endif
int darknet_plugin_init(int *argc, char ***argv) { (void)argc, (void)argv; puts("init ran"); return 0; }
int darknet_plugin_command(int argc, char **argv)
{
    if (argc < 2 || strcmp(argv[1], "plugin-ping") != 0) return -1;
    puts("pong");
    return 0;
}
PLUGIN
objs=$(sed -n 's/^EXECOBJA=//p' "$work/tree/Makefile" | tr ' ' '\n' | sed -n "s|^\(.*\.o\)$|$work/tree/obj/\1|p")
plugin_run() { # [VERSION_FLAG]: links a darknet with the plugin, runs `darknet plugin-ping`
    cc -I"$work/tree/include" "$@" -o "$work/plugin-darknet" "$work/plugin.c" $objs "$work/tree/libdarknet.a" \
        -lm -pthread >"$work/plugin.out" 2>&1 || return 99
    "$work/plugin-darknet" plugin-ping >"$work/plugin.out" 2>&1
}
plugin_run -DVERSION=DARKNET_PLUGIN_API_VERSION
[ $? -eq 0 ] && grep -q '^init ran$' "$work/plugin.out" && grep -q '^pong$' "$work/plugin.out" \
    && ok || { bad "a plugin of this version does not run"; cat "$work/plugin.out"; }
plugin_run '-DVERSION=(DARKNET_PLUGIN_API_VERSION+1)'
rc=$?
[ $rc -eq 1 ] && ! grep -q 'init ran\|pong' "$work/plugin.out" \
    && grep -q 'built for plugin interface version [0-9]*, this Darknet.s is version [0-9]*' "$work/plugin.out" \
    && ok || { bad "a plugin of another version was not refused (exit $rc)"; cat "$work/plugin.out"; }
plugin_run
rc=$?
[ $rc -eq 1 ] && ! grep -q 'init ran\|pong' "$work/plugin.out" \
    && grep -q 'does not define darknet_plugin_api_version' "$work/plugin.out" \
    && ok || { bad "a plugin without a version was not refused (exit $rc)"; cat "$work/plugin.out"; }

# The whole series at once matches the patch-by-patch result.
cp -a "$work/pristine" "$work/whole"
sh "$src/scripts/build/apply-patches.sh" "$work/whole" "$src/patches" >/dev/null || bad "series does not apply"
make -C "$work/tree" clean >/dev/null 2>&1
diff -r -q -x obj -x backup -x results "$work/whole" "$work/tree" >/dev/null && ok || bad "whole series differs from patch by patch"

# Applying twice fails on the first patch, naming it, and changes nothing.
cp -a "$work/whole" "$work/twice"
first=$(names | head -n 1)
if sh "$src/scripts/build/apply-patches.sh" "$work/twice" "$src/patches" 2>"$work/twice.err"; then
    bad "applying the series twice succeeded"
else
    grep -qF "patch $first does not apply" "$work/twice.err" && grep -q "hunk\|Reversed\|previously applied" "$work/twice.err" \
        && ok || { bad "failure message does not name $first and its hunks"; cat "$work/twice.err"; }
    diff -r -q "$work/whole" "$work/twice" >/dev/null && ok || bad "a failed application changed the tree"
fi

# A missing patch named in series is an error.
mkdir -p "$work/broken" && printf 'no-such.patch\n' >"$work/broken/series"
sh "$src/scripts/build/apply-patches.sh" "$work/pristine" "$work/broken" 2>"$work/broken.err" \
    && bad "missing patch accepted" || { grep -qF "no-such.patch" "$work/broken.err" && ok || bad "missing patch not named"; }

# Comment lines, indented ones too, and blank lines in series are skipped.
mkdir -p "$work/comments" && cp "$src/patches/$first" "$work/comments/"
printf '# a group\n\n   # indented\n\t\n%s\n' "$first" >"$work/comments/series"
cp -a "$work/pristine" "$work/commented"
sh "$src/scripts/build/apply-patches.sh" "$work/commented" "$work/comments" >"$work/comments.out" 2>&1 \
    && grep -q 'applied 1 patches' "$work/comments.out" && ok || { bad "comments in series not skipped"; cat "$work/comments.out"; }

echo "$pass passed, $fail failed"
[ "$fail" -eq 0 ]
