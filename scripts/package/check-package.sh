#!/bin/sh
# Checks the Debian package the way a user installs it, on a machine without
# it (CI runs this after scripts/test.sh):
#   1. builds darknet in BUILD (default build/, or SELSYNC_BUILD_DIR) and
#      selsync-darknet_VERSION_ARCH.deb with cpack (scripts/package/package-build.sh);
#   2. installs it with `apt-get install ./FILE.deb` (as root);
#   3. makes a small Fashion-MNIST set with the installed
#      prepare-fashion-mnist.py and trains /usr/bin/darknet on 2 MPI ranks
#      with an installed cfg, from a temporary folder, and checks the job:
#      exit 0, the summary of 2 ranks and 20 steps, a metrics file per rank
#      with every step, the weights (scripts/package/package-train-check.sh);
#   4. removes the package (`apt-get remove`), also when a step fails, and
#      checks that /usr/bin/darknet is gone.
# It refuses to start where darknet or selsync-darknet is installed already
# (it would replace or remove it). Exit status 0 when every step passed.
# Usage: scripts/package/check-package.sh [BUILD]
set -eu
root=$(cd "$(dirname "$0")/../.." && pwd)
build=${1:-${SELSYNC_BUILD_DIR:-$root/build}}
build=${build%/}
export OPENBLAS_NUM_THREADS=1 OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
step() { echo "== check-package: $*"; }
fail() { echo "check-package: FAILED: $*" >&2; exit 1; }
# show LOG: its last lines, for a failure
show() { echo "--- last lines of $1:" >&2; tail -n 30 "$1" >&2; }

[ "$(id -u)" -eq 0 ] || fail "installing the package needs root (apt-get); run it as root on a machine you may change"
for p in selsync-darknet darknet; do
    if dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "ok installed"; then
        fail "the package $p is installed already; this check installs and removes selsync-darknet (remove $p first: apt-get remove $p)"
    fi
done
[ ! -e /usr/bin/darknet ] || fail "/usr/bin/darknet exists and belongs to no package; this check would overwrite it"

work=$(mktemp -d /tmp/check-package.XXXXXX)
installed=0
finish() {
    rc=$?
    if [ "$installed" = 1 ]; then
        step "remove the package"
        if apt-get remove -y selsync-darknet >"$work/remove.log" 2>&1 && [ ! -e /usr/bin/darknet ]; then
            echo "   removed; /usr/bin/darknet is gone"
        else
            show "$work/remove.log"
            echo "check-package: FAILED: apt-get remove selsync-darknet (log: $work/remove.log)" >&2
            exit 1
        fi
    fi
    if [ "$rc" -eq 0 ]; then
        rm -rf "$work"
        echo "check-package: passed"
    else
        echo "check-package: the logs are in $work" >&2
    fi
    exit "$rc"
}
trap finish EXIT
trap 'exit 1' INT TERM HUP

step "build darknet in $build and the package (scripts/package/package-build.sh)"
deb=$(sh "$root/scripts/package/package-build.sh" "$build" "$work")
echo "   $(basename "$deb"): Depends: $(dpkg-deb -f "$deb" Depends)"

step "apt-get install ./$(basename "$deb")"
installed=1 # from here on the package is removed on every exit
DEBIAN_FRONTEND=noninteractive apt-get install -y "$deb" >"$work/install.log" 2>&1 \
    || { show "$work/install.log"; fail "apt-get install failed (log: $work/install.log)"; }
owner=$(dpkg -S /usr/bin/darknet 2>/dev/null | cut -d: -f1)
[ "$owner" = selsync-darknet ] || fail "/usr/bin/darknet belongs to '${owner:-no package}', not selsync-darknet"
echo "   /usr/bin/darknet from selsync-darknet $(dpkg-query -W -f='${Version}' selsync-darknet)"

step "train the installed darknet (scripts/package/package-train-check.sh)"
sh "$root/scripts/package/package-train-check.sh" "$work"
cd /
