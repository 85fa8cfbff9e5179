#!/bin/sh
# Installs the Debian packages this project needs to build, test and run.
# As root it runs apt-get; otherwise it prints the command and exits 1.
set -eu

# file (with dpkg-shlibdeps of dpkg-dev): cpack -G DEB, the Debian package;
# strace: the checkpoint's system calls (test_checkpoint_durable)
PACKAGES="build-essential cmake pkg-config dpkg-dev file xz-utils patch python3
libopenmpi-dev openmpi-bin libopenblas-dev libcmocka-dev dataset-fashion-mnist
iproute2 gnuplot-nox clang libclang-rt-dev llvm strace"

missing=""
for p in $PACKAGES; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" \
        || missing="$missing $p"
done
[ -z "$missing" ] && exit 0

if [ "$(id -u)" -ne 0 ]; then
    echo "missing packages:$missing" >&2
    echo "install them with:  sudo apt-get install -y$missing" >&2
    exit 1
fi
echo "installing:$missing"
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq
# shellcheck disable=SC2086
apt-get install -y -qq --no-install-recommends $missing
