#!/bin/sh
# Usage: fetch-darknet.sh DEST_DIR [CACHE_DIR]
# Unpacks Debian's pristine upstream Darknet tarball into DEST_DIR (which
# must not exist). The tarball is taken from $DARKNET_TARBALL, from CACHE_DIR,
# or fetched with `apt-get source --download-only darknet` (as root, a
# bookworm deb-src entry is added when none is configured). Its SHA-256 is
# always verified; Debian's own patches are not applied.
set -eu

VERSION="0.0.0+git20180914.61c9d02e"
TARBALL="darknet_${VERSION}.orig.tar.xz"
SHA256="ec536ae11853846aab96183d8ec18730a46cce71f7d935768d235029329f9e93"

dest=${1:?usage: fetch-darknet.sh DEST_DIR [CACHE_DIR]}
cache=${2:-$(dirname "$dest")/download}
[ -e "$dest" ] && { echo "fetch-darknet: $dest already exists" >&2; exit 1; }
mkdir -p "$cache"

have_deb_src() {
    grep -rqsE '^(deb-src|Types:.*deb-src)' /etc/apt/sources.list /etc/apt/sources.list.d/
}

tarball=${DARKNET_TARBALL:-$cache/$TARBALL}
if [ ! -f "$tarball" ]; then
    if ! have_deb_src; then
        if [ "$(id -u)" -ne 0 ]; then
            echo "fetch-darknet: no deb-src entry in apt's sources; add one for bookworm main" >&2
            echo "  or set DARKNET_TARBALL to $TARBALL, or DARKNET_SOURCE_DIR (CMake) to an unpacked tree" >&2
            exit 1
        fi
        echo "fetch-darknet: adding a bookworm deb-src entry to apt's sources"
        cat > /etc/apt/sources.list.d/bookworm-src.sources <<SRC
Types: deb-src
URIs: http://deb.debian.org/debian
Suites: bookworm
Components: main
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg
SRC
        apt-get update -qq
    fi
    echo "fetch-darknet: apt-get source --download-only darknet"
    (cd "$cache" && apt-get source -qq --download-only "darknet=${VERSION}-2" >/dev/null 2>&1) \
        || (cd "$cache" && apt-get source -q --download-only darknet)
    [ -f "$tarball" ] || { echo "fetch-darknet: apt-get did not produce $TARBALL" >&2; exit 1; }
fi

echo "$SHA256  $tarball" | sha256sum -c --quiet - || {
    echo "fetch-darknet: SHA-256 mismatch for $tarball (expected $SHA256)" >&2
    exit 1
}
tmp="$dest.tmp.$$"
rm -rf "$tmp"; mkdir -p "$tmp"
tar -xJf "$tarball" -C "$tmp"
mv "$tmp/darknet" "$dest"
rmdir "$tmp"
echo "fetch-darknet: unpacked $TARBALL (SHA-256 verified)"
