#!/bin/sh
# Checks the Debian package the way a user on a fresh Debian bookworm machine
# gets it: in a minimal chroot, where a library missing from the package's
# Depends cannot be hidden by what this machine has installed (as it can for
# scripts/package/check-package.sh):
#   1. builds darknet in BUILD (default build/, or SELSYNC_BUILD_DIR) and
#      selsync-darknet_VERSION_ARCH.deb with cpack (or takes the .deb given
#      as DEB, the second argument or the environment variable);
#   2. makes a clean root with `debootstrap --variant=minbase bookworm` from
#      the Debian mirror this machine's apt uses (SELSYNC_DEBIAN_MIRROR
#      overrides it); the fresh root is kept as a tar file in
#      BUILD/chroot-cache with apt's lists and downloaded packages, so later
#      runs download only what changed (remove that folder to start afresh);
#   3. in the chroot: apt-get update and
#      `apt-get install --no-install-recommends ./FILE.deb`, so the Depends
#      alone, resolved from the mirror, must let /usr/bin/darknet load its
#      libraries (checked with ldd); then python3 and dataset-fashion-mnist,
#      which the package recommends, with apt-get;
#   4. in the chroot, scripts/package/package-train-check.sh as check-package.sh runs it: a small
#      Fashion-MNIST set with the installed prepare-fashion-mnist.py, trains
#      /usr/bin/darknet on 2 MPI ranks with an installed cfg and checks the
#      job: exit 0, the summary of 2 ranks and 20 steps, a metrics file per
#      rank with every step, the weights.
# /proc, /sys, /dev, /dev/pts and /dev/shm are mounted in the chroot from
# within a private mount namespace (unshare), and unmounted on every exit;
# should the script be killed outright, they go with the namespace (its
# temporary folder stays, to be removed by hand). Nothing is installed on
# this machine but debootstrap and debian-archive-keyring (with apt-get,
# where missing). The chroot is removed at the end (SELSYNC_KEEP_CHROOT=1 keeps
# it); when a step fails, the logs stay in the temporary folder it names.
# Needs root and the Debian mirror. Exit status 0 when every step passed.
# Usage: scripts/package/check-package-chroot.sh [BUILD [DEB]]
set -eu
root=$(cd "$(dirname "$0")/../.." && pwd)
build=${1:-${SELSYNC_BUILD_DIR:-$root/build}}
build=${build%/}
deb=${2:-${DEB:-}}
suite=bookworm
step() { echo "== check-package-chroot: $*"; }
fail() { echo "check-package-chroot: FAILED: $*" >&2; exit 1; }
# show LOG: its last lines, for a failure
show() { echo "--- last lines of $1:" >&2; tail -n 30 "$1" >&2; }

[ "$(id -u)" -eq 0 ] || fail "debootstrap, chroot and mount need root"
# Re-run in a private mount namespace: the chroot's mounts are seen by
# nothing else, and vanish with the script's processes however they end.
if [ -z "${SELSYNC_CHROOT_NAMESPACE:-}" ]; then
    unshare --mount --propagation private true 2>/dev/null \
        || fail "unshare --mount (util-linux) does not work here; it keeps the chroot's mounts private"
    SELSYNC_CHROOT_NAMESPACE=1 exec unshare --mount --propagation private sh "$0" "$@"
fi
[ -z "$deb" ] || [ -f "$deb" ] || fail "no such package: $deb"
[ -z "$deb" ] || deb=$(cd "$(dirname "$deb")" && pwd)/$(basename "$deb")

start=$(date +%s)
arch=$(dpkg --print-architecture)
cache=$build/chroot-cache
base=$cache/$suite-$arch-minbase.tar # the fresh root
aptcache=$cache/apt-$suite-$arch     # lists/ and archives/ of its apt
work=$(mktemp -d /tmp/check-package-chroot.XXXXXX)
r=$work/root # the chroot
mounted=""   # its mount points, the last mounted first

# in_root COMMAND...: runs COMMAND in the chroot with a clean environment
in_root() {
    chroot "$r" /usr/bin/env -i HOME=/root LANG=C.UTF-8 TERM=dumb \
        PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin \
        DEBIAN_FRONTEND=noninteractive OPENBLAS_NUM_THREADS=1 \
        OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 "$@"
}
# in_root_log LOG COMMAND...: in_root COMMAND, its output in LOG; waited for
# in the background, so that a signal ends the script (and it) at once
in_root_log() {
    log=$1
    shift
    in_root "$@" >"$log" 2>&1 &
    wait $!
}
# mount_in TARGET MOUNT-ARGUMENTS...
mount_in() {
    target=$r/$1
    shift
    mount "$@" "$target" || fail "mount $* $target"
    mounted="$target $mounted"
}
# mounts_left: whether anything is still mounted in the chroot
mounts_left() {
    awk -v r="$r/" 'index($5 "/", r) == 1 { found = 1 } END { exit !found }' /proc/self/mountinfo
}
release_root() {
    # end what still runs in the chroot (after a failure or a signal)
    for p in /proc/[0-9]*; do
        if [ "$(readlink "$p/root" 2>/dev/null)" = "$r" ]; then
            kill -KILL "${p#/proc/}" 2>/dev/null || true
        fi
    done
    for m in $mounted; do
        umount "$m" 2>/dev/null || umount -l "$m" 2>/dev/null || echo "check-package-chroot: cannot unmount $m" >&2
    done
    mounted=""
}
finish() {
    rc=$?
    trap '' INT TERM HUP
    release_root
    if [ -d "$r/check/run" ]; then
        mkdir -p "$work/run"
        cp "$r"/check/run/*.cfg "$r"/check/run/*.tsv "$work/run/" 2>/dev/null || true
    fi
    if [ -d "$r" ]; then
        if mounts_left; then
            echo "check-package-chroot: something is still mounted under $r; it is left in place" >&2
            [ "$rc" -ne 0 ] || rc=1
        elif [ "${SELSYNC_KEEP_CHROOT:-0}" = 1 ]; then
            echo "check-package-chroot: the chroot is kept: $r"
        else
            rm -rf --one-file-system "$r"
        fi
    fi
    if [ "$rc" -eq 0 ]; then
        [ "${SELSYNC_KEEP_CHROOT:-0}" = 1 ] || rm -rf --one-file-system "$work"
        echo "check-package-chroot: passed ($(($(date +%s) - start)) s)"
    else
        echo "check-package-chroot: the logs are in $work" >&2
    fi
    exit "$rc"
}
trap finish EXIT
trap 'exit 1' INT TERM HUP

if [ -n "$deb" ]; then
    step "the package $deb"
else
    step "build darknet in $build and the package (scripts/package/package-build.sh)"
    deb=$(sh "$root/scripts/package/package-build.sh" "$build" "$work")
fi
[ "$(dpkg-deb -f "$deb" Architecture)" = "$arch" ] || fail "$(basename "$deb") is not for $arch"
echo "   $(basename "$deb"): Depends: $(dpkg-deb -f "$deb" Depends)"
echo "   Recommends: $(dpkg-deb -f "$deb" Recommends)"

# The mirror and its suites as this machine's apt has them (one-line or
# deb822 sources alike), else Debian's own.
targets=$(apt-get indextargets --format '$(TARGET_OF) $(REPO_URI) $(RELEASE)' 'Identifier: Packages' 2>/dev/null || true)
uri_of() { echo "$targets" | awk -v s="$1" '$1 == "deb" && $3 == s { print $2; exit }'; }
mirror=${SELSYNC_DEBIAN_MIRROR:-$(uri_of "$suite")}
if [ -n "$mirror" ]; then
    updates=$(uri_of "$suite-updates")
    security=$(uri_of "$suite-security")
else
    mirror=http://deb.debian.org/debian/ updates=http://deb.debian.org/debian/
    security=http://deb.debian.org/debian-security/
fi
{ echo "deb $mirror $suite main"
  [ -z "$updates" ] || echo "deb $updates $suite-updates main"
  [ -z "$security" ] || echo "deb $security $suite-security main"; } >"$work/sources.list"
# how this machine's apt reaches the mirror (a proxy, a snapshot whose
# Release files are past their Valid-Until), for the chroot's apt too
apt_value() {
    apt-config dump --no-empty --format '%f %v%n' "$1" 2>/dev/null \
        | awk -v k="$1" '$1 == k { sub(/^[^ ]+ /, ""); print; exit }' || true
}
: >"$work/apt.conf"
for key in Acquire::Check-Valid-Until Acquire::Check-Date Acquire::http::Proxy Acquire::https::Proxy; do
    value=$(apt_value "$key")
    [ -z "$value" ] || printf '%s "%s";\n' "$key" "$value" >>"$work/apt.conf"
done
proxy=$(apt_value Acquire::http::Proxy)
[ -z "$proxy" ] || [ -n "${http_proxy:-}" ] || export http_proxy="$proxy"

if [ -f "$base" ]; then
    step "unpack the cached $suite root ($base)"
    mkdir "$r"
    tar -C "$r" --numeric-owner -xpf "$base" || fail "cannot unpack $base (remove it to debootstrap again)"
else
    step "debootstrap --variant=minbase $suite from $mirror (kept in $cache)"
    if ! command -v debootstrap >/dev/null 2>&1; then
        DEBIAN_FRONTEND=noninteractive apt-get install -y debootstrap >"$work/debootstrap-install.log" 2>&1 \
            || { show "$work/debootstrap-install.log"; fail "cannot install debootstrap (log: $work/debootstrap-install.log)"; }
    fi
    keyring=/usr/share/keyrings/debian-archive-keyring.gpg
    if [ ! -f "$keyring" ]; then
        DEBIAN_FRONTEND=noninteractive apt-get install -y debian-archive-keyring >"$work/keyring-install.log" 2>&1 \
            || { show "$work/keyring-install.log"; fail "cannot install debian-archive-keyring (log: $work/keyring-install.log)"; }
    fi
    debootstrap --variant=minbase --arch="$arch" --keyring="$keyring" "$suite" "$r" "$mirror" \
        >"$work/debootstrap.log" 2>&1 || { show "$work/debootstrap.log"; fail "debootstrap failed (log: $work/debootstrap.log)"; }
    mkdir -p "$cache"
    if ! tar -C "$r" --numeric-owner -cpf "$base.$$" . || ! mv "$base.$$" "$base"; then
        rm -f "$base.$$"
        fail "cannot write $base"
    fi
fi

step "set up the chroot: sources, mounts, the package"
cp "$work/sources.list" "$r/etc/apt/sources.list"
rm -f "$r"/etc/apt/sources.list.d/*
cp "$work/apt.conf" "$r/etc/apt/apt.conf.d/99mirror-access"
rm -f "$r/etc/resolv.conf" "$r/etc/hosts"
cp -L /etc/resolv.conf /etc/hosts "$r/etc/"
if [ -d "$aptcache/lists" ]; then
    cp -a "$aptcache/lists/." "$r/var/lib/apt/lists/"
    find "$aptcache/archives" -name '*.deb' -exec cp {} "$r/var/cache/apt/archives/" \;
fi
mount_in proc -t proc proc
mount_in sys -t sysfs -o ro sysfs
mount_in dev --bind /dev
mount_in dev/pts --bind /dev/pts
mount_in dev/shm -t tmpfs -o mode=1777,nosuid,nodev shm
mkdir -m 755 "$r/check"
cp "$deb" "$r/check/"
chmod 644 "$r/check/$(basename "$deb")"
sed 's/^/   /' "$r/etc/apt/sources.list"

# save_apt_cache: the chroot's apt lists and packages, for the next run
save_apt_cache() {
    mkdir -p "$aptcache"
    rm -rf "$aptcache/lists.$$" "$aptcache/archives.$$"
    mkdir "$aptcache/lists.$$" "$aptcache/archives.$$"
    find "$r/var/lib/apt/lists" -maxdepth 1 -type f ! -name lock -exec cp {} "$aptcache/lists.$$/" \;
    find "$r/var/cache/apt/archives" -maxdepth 1 -name '*.deb' -exec cp {} "$aptcache/archives.$$/" \;
    rm -rf "$aptcache/lists" "$aptcache/archives"
    mv "$aptcache/lists.$$" "$aptcache/lists"
    mv "$aptcache/archives.$$" "$aptcache/archives"
}

step "apt-get update in the chroot"
in_root_log "$work/update.log" apt-get update \
    || { show "$work/update.log"; fail "apt-get update failed in the chroot (log: $work/update.log)"; }

step "apt-get install --no-install-recommends ./$(basename "$deb") in the chroot"
in_root_log "$work/install.log" apt-get install -y --no-install-recommends "/check/$(basename "$deb")" \
    || { show "$work/install.log"; fail "apt-get install failed in the chroot (log: $work/install.log)"; }
owner=$(in_root dpkg -S /usr/bin/darknet 2>/dev/null | cut -d: -f1)
[ "$owner" = selsync-darknet ] || fail "/usr/bin/darknet belongs to '${owner:-no package}', not selsync-darknet"
echo "   /usr/bin/darknet from selsync-darknet $(in_root dpkg-query -W -f='${Version}' selsync-darknet)"

step "/usr/bin/darknet finds its libraries with the Depends alone"
in_root ldd /usr/bin/darknet >"$work/ldd.log" 2>&1 || true
if grep -q 'not found' "$work/ldd.log" || ! grep -q '=>' "$work/ldd.log"; then
    in_root /usr/bin/darknet >"$work/load.log" 2>&1 || true
    cat "$work/ldd.log" "$work/load.log" | grep -E 'not found|error while loading' | sed 's/^/   /' >&2
    fail "/usr/bin/darknet cannot load its libraries on a fresh $suite: the package's Depends lack their packages (logs: $work/ldd.log, $work/load.log)"
fi
echo "   ldd: $(grep -c '=>' "$work/ldd.log") libraries, none missing"

step "apt-get install python3 dataset-fashion-mnist (recommended) in the chroot"
in_root_log "$work/install-data.log" apt-get install -y --no-install-recommends python3 dataset-fashion-mnist \
    || { show "$work/install-data.log"; fail "apt-get install python3 dataset-fashion-mnist failed in the chroot (log: $work/install-data.log)"; }
in_root apt-get autoclean >/dev/null 2>&1 || true
save_apt_cache

step "train the installed darknet in the chroot (scripts/package/package-train-check.sh)"
cp "$root/scripts/package/package-train-check.sh" "$r/check/"
in_root_log "$work/train-check.log" sh /check/package-train-check.sh /check \
    || { show "$work/train-check.log"; fail "the installed darknet did not train in the chroot (log: $work/train-check.log; its logs in /check of the chroot)"; }
grep '^   selsync: summary' "$work/train-check.log" || true
