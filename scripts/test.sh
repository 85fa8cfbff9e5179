#!/bin/sh
# Runs the whole test suite: installs missing Debian packages (as root),
# builds in build/ and runs CTest. Extra arguments go to ctest, e.g.
#   scripts/test.sh -L unit        (only the unit tests)
#   scripts/test.sh -LE slow       (skip the slow ones)
set -eu
root=$(cd "$(dirname "$0")/.." && pwd)
build=${SELSYNC_BUILD_DIR:-$root/build}

sh "$root/scripts/install-deps.sh"
cmake -S "$root" -B "$build" -DSELSYNC_WERROR=ON >/dev/null
cmake --build "$build" -j "$(nproc)"
# ranks x BLAS threads must fit the cores; tests never rely on timing
export OPENBLAS_NUM_THREADS=1
cd "$build"
ctest --output-on-failure -j "$(nproc)" "$@"
