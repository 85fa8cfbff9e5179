#!/bin/sh
# Usage: package-build.sh BUILD WORK
# Builds darknet in BUILD and selsync-darknet_VERSION_ARCH.deb with cpack
# into WORK/pkg (logs WORK/build.log, WORK/cpack.log) for
# scripts/package/check-package.sh and check-package-chroot.sh; prints the .deb's
# path. Exit status 1 with a message naming the log on failure.
set -eu
build=${1:?usage: package-build.sh BUILD WORK} work=${2:?usage: package-build.sh BUILD WORK}
root=$(cd "$(dirname "$0")/../.." && pwd)
fail() { echo "package-build: FAILED: $*" >&2; exit 1; }
show() { echo "--- last lines of $1:" >&2; tail -n 30 "$1" >&2; }
{ cmake -S "$root" -B "$build" && cmake --build "$build" -j "$(nproc)" --target darknet; } >"$work/build.log" 2>&1 \
    || { show "$work/build.log"; fail "the build failed (log: $work/build.log)"; }
cpack -G DEB --config "$build/CPackConfig.cmake" -B "$work/pkg" >"$work/cpack.log" 2>&1 \
    || { show "$work/cpack.log"; fail "cpack failed (log: $work/cpack.log)"; }
set -- "$work"/pkg/selsync-darknet_*.deb
[ $# -eq 1 ] && [ -f "$1" ] || fail "cpack made no single selsync-darknet_*.deb in $work/pkg"
echo "$1"
