#!/bin/sh
# Usage: test_package.sh SOURCE_DIR BUILD_DIR WORK_DIR VERSION
# `cpack -G DEB --config BUILD/CPackConfig.cmake` into WORK_DIR, then the
# package's control fields and files, and a training with the binary
# extracted from it:
#  - one selsync-darknet_VERSION_ARCH.deb;
#  - Depends: openmpi-bin and the libraries' packages dpkg-shlibdeps found
#    (libopenblas, libopenmpi, libc6); Conflicts, Replaces and Provides
#    darknet (Debian's darknet installs /usr/bin/darknet as well);
#    Recommends the data set;
#  - the files: usr/bin/darknet and usr/bin/selsync-elastic alone in
#    usr/bin (the launcher executable, its shell's syntax sound), every cfg of cfg/ and
#    the data scripts under usr/share/selsync-darknet, the README and
#    Darknet's licence, all owned by root; the binary stripped, with no run path;
#  - `mpirun -np 2` of the extracted darknet trains a small Fashion-MNIST set
#    (made by the extracted prepare-fashion-mnist.py): exits 0, both ranks
#    log every step, the weights are written.
set -u
src=$1 build=$2 work=$3 version=$4
rm -rf "$work"; mkdir -p "$work"
. "$src/tests/common/checks.sh"
arch=$(dpkg --print-architecture)

"${CPACK:-cpack}" -G DEB --config "$build/CPackConfig.cmake" -B "$work/pkg" >"$work/cpack.log" 2>&1
check "cpack exits 0" '[ $? -eq 0 ]' || cat "$work/cpack.log"
deb=$work/pkg/selsync-darknet_${version}_$arch.deb
check "one package, selsync-darknet_${version}_$arch.deb" '[ -f "$deb" ] && [ "$(ls "$work/pkg"/*.deb | wc -l)" -eq 1 ]'
[ -f "$deb" ] || { echo "$pass passed, $fail failed"; exit 1; }

dpkg-deb -I "$deb" >"$work/info.txt"
cat "$work/info.txt"
field() { dpkg-deb -f "$deb" "$1"; }
# has LIST NAME-PATTERN: the comma-separated LIST has an entry starting with a
# package whose name matches NAME-PATTERN (an extended regular expression)
has() { echo "$1" | tr ',' '\n' | grep -Eq "^ *($2)( |\$|\|)"; }
depends=$(field Depends)
check "Package and Version" '[ "$(field Package)" = selsync-darknet ] && [ "$(field Version)" = "$version" ]'
check "Depends: openmpi-bin (mpirun)" 'has "$depends" openmpi-bin'
check "Depends: OpenBLAS's library package" 'has "$depends" "libopenblas[0-9a-z-]*"'
check "Depends: Open MPI's library package" 'has "$depends" "libopenmpi[0-9]+"'
check "Depends: libc6, with a version (dpkg-shlibdeps ran)" 'has "$depends" "libc6 \(>= [0-9.]+\)"'
check "Conflicts, Replaces and Provides darknet" \
    '[ "$(field Conflicts)" = darknet ] && [ "$(field Replaces)" = darknet ] && [ "$(field Provides)" = darknet ]'
check "Recommends dataset-fashion-mnist and python3" \
    'has "$(field Recommends)" dataset-fashion-mnist && has "$(field Recommends)" python3'
check "a description of more than one line" '[ "$(field Description | wc -l)" -gt 1 ]'

dpkg-deb -c "$deb" >"$work/contents.txt"
paths() { awk '{ print $NF }' "$work/contents.txt"; }
check "usr/bin holds darknet and selsync-elastic alone" \
    '[ "$(paths | grep "^\./usr/bin/." | sort | tr "\n" " ")" = "./usr/bin/darknet ./usr/bin/selsync-elastic " ]'
missing=""
for c in "$src"/cfg/*.cfg; do
    paths | grep -qx "./usr/share/selsync-darknet/cfg/$(basename "$c")" || missing="$missing $(basename "$c")"
done
check "every cfg of cfg/ packaged (missing:${missing:- none})" '[ -z "$missing" ]'
check "the data scripts packaged" 'paths | grep -qx ./usr/share/selsync-darknet/scripts/data/prepare-fashion-mnist.py &&
    paths | grep -qx ./usr/share/selsync-darknet/scripts/data/make-detection-set.py'
check "the README and Darknet's licence packaged" 'paths | grep -qx ./usr/share/doc/selsync-darknet/README.md &&
    paths | grep -qx ./usr/share/doc/selsync-darknet/LICENSE.darknet'
check "every file owned by root" '[ "$(awk "\$2 != \"root/root\"" "$work/contents.txt" | wc -l)" -eq 0 ]'

root=$work/root
dpkg-deb -x "$deb" "$root"
check "dpkg-deb -x extracts darknet" '[ -x "$root/usr/bin/darknet" ]'
check "selsync-elastic is executable and parses" \
    '[ -x "$root/usr/bin/selsync-elastic" ] && sh -n "$root/usr/bin/selsync-elastic" && "$root/usr/bin/selsync-elastic" --help | grep -q "restarts it from its last checkpoint"'
check "the packaged darknet is stripped, with no run path" \
    'readelf -S -d "$root/usr/bin/darknet" >"$work/elf.txt" && ! grep -Eq "\.debug_info|RPATH|RUNPATH" "$work/elf.txt"'
share=$root/usr/share/selsync-darknet
python3 "$share/scripts/data/prepare-fashion-mnist.py" --out "$work/data" --train-limit 256 --valid-limit 64 \
    >"$work/prepare.log" 2>&1
check "the packaged prepare-fashion-mnist.py writes a data set" '[ $? -eq 0 ] && [ -s "$work/data/fmnist.data" ]' \
    || cat "$work/prepare.log"
{ sed 's/^max_batches=.*/max_batches=20/' "$share/cfg/fmnist-tiny.cfg"
  printf '\n[selsync]\nmethod=selsync\nwindow=5\nlog=%s/m.%%r.tsv\n' "$work"; } >"$work/tiny.cfg"
timeout 120 "${MPIEXEC:-mpirun}" --oversubscribe -np 2 "$root/usr/bin/darknet" \
    classifier train "$work/data/fmnist.data" "$work/tiny.cfg" >"$work/train.out" 2>&1
check "training with the packaged darknet exits 0" '[ $? -eq 0 ]' || tail -n 30 "$work/train.out"
check_trained "$work/train.out" "$work" "$work/data/backup/tiny.weights"
echo "$pass passed, $fail failed"
[ "$fail" -eq 0 ]
