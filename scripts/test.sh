#!/bin/sh
# Runs the whole test suite: installs missing Debian packages (as root),
# builds in build/ and runs CTest. Extra arguments go to ctest, e.g.
#   scripts/test.sh -L unit        (only the unit tests)
#   scripts/test.sh -LE slow       (skip the slow ones)
# When that passes, it builds build-sanitize/ (beside the build directory)
# with -DSELSYNC_SANITIZE=ON (AddressSanitizer, LeakSanitizer and
# UndefinedBehaviorSanitizer) and runs the `unit`, `darknet` and `mpi`
# labels there (not those that install or need network namespaces), then
# build-tsan/ with -DSELSYNC_TSAN=ON (ThreadSanitizer) and its `tsan` label:
# the transport and its background thread under real mpirun. Both narrowed
# by the same extra arguments.
# Environment: SELSYNC_BUILD_DIR (default build/) moves the build directory;
# SELSYNC_TEST_SANITIZE=0 skips the sanitizer builds and their tests.
set -eu
root=$(cd "$(dirname "$0")/.." && pwd)
build=${SELSYNC_BUILD_DIR:-$root/build}
build=${build%/}

sh "$root/scripts/install-deps.sh"
cmake -S "$root" -B "$build" -DSELSYNC_WERROR=ON >/dev/null
cmake --build "$build" -j "$(nproc)"
# ranks x BLAS threads must fit the cores; tests never rely on timing
export OPENBLAS_NUM_THREADS=1
(cd "$build" && ctest --output-on-failure -j "$(nproc)" "$@")

[ "${SELSYNC_TEST_SANITIZE:-1}" = 0 ] && exit 0
sanitize=$build-sanitize
# the Darknet tarball the first build fetched, not a second download
if [ -z "${DARKNET_TARBALL:-}" ]; then
    for t in "$build"/download/darknet_*.orig.tar.xz; do
        if [ -f "$t" ]; then export DARKNET_TARBALL="$t"; fi
    done
fi
echo "== sanitizer build: $sanitize (SELSYNC_TEST_SANITIZE=0 skips it)"
cmake -S "$root" -B "$sanitize" -DSELSYNC_WERROR=ON -DSELSYNC_SANITIZE=ON >/dev/null
cmake --build "$sanitize" -j "$(nproc)"
(cd "$sanitize" && ctest --output-on-failure -j "$(nproc)" -L 'unit|darknet|mpi' -LE 'install|netns' "$@")

tsan=$build-tsan
echo "== ThreadSanitizer build: $tsan"
cmake -S "$root" -B "$tsan" -DSELSYNC_WERROR=ON -DSELSYNC_TSAN=ON >/dev/null
cmake --build "$tsan" -j "$(nproc)" --target tsan_tests
cd "$tsan"
ctest --output-on-failure -j "$(nproc)" -L tsan "$@"
