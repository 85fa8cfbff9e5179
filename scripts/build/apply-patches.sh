#!/bin/sh
# Usage: apply-patches.sh TREE [PATCH_DIR]
# Applies every patch named in PATCH_DIR/series, in order, to TREE; lines
# whose first non-blank character is '#', and blank lines, are skipped. Each
# patch is first tried with --dry-run, so a patch that does not apply changes
# nothing; the failing patch and patch(1)'s report of its hunks are printed.
set -eu

tree=${1:?usage: apply-patches.sh TREE [PATCH_DIR]}
dir=${2:-$(cd "$(dirname "$0")/../../patches" && pwd)}
[ -f "$dir/series" ] || { echo "apply-patches: no series file in $dir" >&2; exit 1; }

n=0
while read -r name || [ -n "$name" ]; do
    case "$name" in ''|'#'*) continue ;; esac
    p="$dir/$name"
    [ -f "$p" ] || { echo "apply-patches: $name is listed in series but missing" >&2; exit 1; }
    if ! out=$(patch -d "$tree" -p1 --forward --batch --dry-run <"$p" 2>&1); then
        echo "apply-patches: patch $name does not apply to $tree:" >&2
        echo "$out" | sed 's/^/  /' >&2
        exit 1
    fi
    patch -d "$tree" -p1 --forward --batch --silent --no-backup-if-mismatch <"$p"
    n=$((n + 1))
done <"$dir/series"
echo "apply-patches: applied $n patches"
