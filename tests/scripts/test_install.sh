#!/bin/sh
# Usage: test_install.sh SOURCE_DIR BUILD_DIR WORK_DIR
# `cmake --install BUILD --prefix P` into a temporary folder outside the
# source and build trees, and a training with what it installed:
#  - P/bin holds darknet and selsync-elastic alone (no test programs, no
#    darknet-stockgemm),
#    with no run path; P/share/selsync-darknet every cfg of cfg/ and the data
#    scripts; P/share/doc/selsync-darknet the README and docs/ (not the
#    comparison's raw runs);
#  - the installed prepare-fashion-mnist.py makes a small Fashion-MNIST set;
#  - `mpirun -np 2 P/bin/darknet classifier train` on an installed cfg,
#    started in a folder outside both trees, with the source tree (and the
#    build tree in it) hidden where a mount namespace can be made: exits 0,
#    both ranks log every step, rank 0 prints the summary, the weights are
#    written.
set -u
src=$1 build=$2 work=$3
rm -rf "$work"; mkdir -p "$work"
. "$src/tests/common/checks.sh"
tmp=$(mktemp -d /tmp/selsync-install.XXXXXX) || exit 1
trap 'rm -rf "$tmp"' EXIT
trap 'exit 1' INT TERM HUP
prefix=$tmp/prefix share=$tmp/prefix/share/selsync-darknet doc=$tmp/prefix/share/doc/selsync-darknet

"${CMAKE:-cmake}" --install "$build" --prefix "$prefix" >"$work/install.log" 2>&1
check "cmake --install exits 0" '[ $? -eq 0 ]' || cat "$work/install.log"
check "darknet is installed, executable" '[ -x "$prefix/bin/darknet" ]'
check "selsync-elastic is installed beside it, executable" '[ -x "$prefix/bin/selsync-elastic" ]'
check "nothing else in bin" '[ "$(ls "$prefix/bin" 2>&1 | tr "\n" " ")" = "darknet selsync-elastic " ]'
check "no test program installed" '[ -z "$(find "$prefix" -name "test_*" -o -name "*stockgemm*" -o -name "train_synthetic")" ]'
check "no run path in the installed darknet" \
    'readelf -d "$prefix/bin/darknet" >"$work/dynamic.txt" && ! grep -Eq "RPATH|RUNPATH" "$work/dynamic.txt"'
installed=$(ls "$share/cfg" 2>/dev/null) wanted=$(cd "$src/cfg" && ls ./*.cfg | sed 's#^\./##')
check "every cfg of cfg/ installed" '[ -n "$wanted" ] && [ "$installed" = "$wanted" ]'
check "the data scripts installed, executable" \
    '[ -x "$share/scripts/data/prepare-fashion-mnist.py" ] && [ -x "$share/scripts/data/make-detection-set.py" ]'
check "the documentation installed beside the README" '[ -s "$doc/README.md" ] && [ -s "$doc/docs/usage.md" ]'
check "the comparison's raw runs not installed" '[ -d "$doc/docs/comparison" ] && [ ! -e "$doc/docs/comparison/runs" ]'

python3 "$share/scripts/data/prepare-fashion-mnist.py" --out "$tmp/data" --train-limit 256 --valid-limit 64 \
    >"$work/prepare.log" 2>&1
check "the installed prepare-fashion-mnist.py writes a data set" '[ $? -eq 0 ] && [ -s "$tmp/data/fmnist.data" ]' \
    || cat "$work/prepare.log"

# a relative metrics path: written in the folder the job starts in
mkdir "$tmp/run"
{ sed 's/^max_batches=.*/max_batches=20/' "$share/cfg/fmnist-tiny.cfg"
  printf '\n[selsync]\nmethod=selsync\nwindow=5\nlog=m.%%r.tsv\n'; } >"$tmp/run/tiny.cfg"
# hidden DIR... -- COMMAND...: COMMAND in a mount namespace of its own in
# which every DIR is an empty folder (exit status 99 when one is not)
hidden() {
    unshare --mount sh -c 'while [ "$1" != -- ]; do mount -t tmpfs none "$1" && [ -z "$(ls -A "$1")" ] || exit 99; shift; done
                           shift; exec "$@"' sh "$@"
}
cd "$tmp/run" || exit 1
set -- timeout 120 "${MPIEXEC:-mpirun}" --oversubscribe -np 2 "$prefix/bin/darknet" \
    classifier train "$tmp/data/fmnist.data" tiny.cfg
mkdir "$tmp/probe"
if hidden "$tmp/probe" -- true 2>/dev/null; then
    echo "(the build and source trees are hidden from the job)"
    hidden "$build" "$src" -- "$@" >"$tmp/train.out" 2>&1 # the build tree first: it may lie in the source tree
else
    echo "(no mount namespace here: the build and source trees stay visible to the job)"
    "$@" >"$tmp/train.out" 2>&1
fi
rc=$?
cd "$work" || exit 1
cp "$tmp/train.out" "$work/train.out"
check "training with the installed darknet exits 0" '[ $rc -eq 0 ]' || tail -n 30 "$tmp/train.out"
check_trained "$tmp/train.out" "$tmp/run" "$tmp/data/backup/tiny.weights"
echo "$pass passed, $fail failed"
[ "$fail" -eq 0 ]
