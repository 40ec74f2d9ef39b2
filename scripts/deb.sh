#!/bin/sh
# `make deb`: the Debian package ibv-shim_<version>_<arch>.deb of what
# `make` built (it builds nothing), with dpkg-deb alone (no debhelper):
#   /usr/bin/ibv-shim                                the launcher
#   /usr/lib/<triplet>/ibv-shim/libibv_shim.so       the shim, to preload
#   /usr/lib/<triplet>/ibv-shim/dropin/, sim/        drop-in names, ibv-sim
#   /usr/include/ibv-shim/infiniband/verbs.h         the header
#   /usr/lib/<triplet>/pkgconfig/ibv-shim.pc         pkg-config
#   /usr/share/man/man1/ibv-shim.1.gz, man7/ibv-shim.7.gz
#   /usr/share/doc/ibv-shim/copyright, changelog.gz
# The libraries live in a private directory, so nothing shadows the
# system's libibverbs. Depends: what dpkg-shlibdeps finds the binaries
# need (libc, libgcc); the real libibverbs is recommended, not required
# (`ibv-shim --sim` needs none). Usage: deb.sh REL OUTDIR.
set -eu
cd "$(dirname "$0")/.."
REL=${1:-target/release}
OUT=${2:-target}
case $OUT in /*) ;; *) OUT=$PWD/$OUT ;; esac
VERSION=$(sed -n 's/^version = "\(.*\)"/\1/p' Cargo.toml | head -n 1)
ARCH=$(dpkg --print-architecture)
TRIPLET=$(dpkg-architecture -qDEB_HOST_MULTIARCH 2>/dev/null || gcc -print-multiarch)
PKG=ibv-shim
DEB=$OUT/${PKG}_${VERSION}_${ARCH}.deb
WORK=$OUT/deb
STAGE=$WORK/root

rm -rf "$WORK"
mkdir -p "$STAGE"
make -s install PREFIX=/usr LIBDIR="/usr/lib/$TRIPLET" DESTDIR="$STAGE" REL="$REL" >/dev/null
PKGLIB=$STAGE/usr/lib/$TRIPLET/ibv-shim

# Debug information and the static symbol tables stay in the build tree;
# the dynamic symbols and the build ID stay in the files.
strip --remove-section=.comment "$STAGE/usr/bin/ibv-shim"
for f in "$PKGLIB/libibv_shim.so" "$PKGLIB/sim/libibverbs.so.1" "$PKGLIB/sim/librdmacm.so.1"; do
    strip --strip-unneeded --remove-section=.comment "$f"
done
chmod 644 "$PKGLIB/libibv_shim.so" "$PKGLIB/sim/libibverbs.so.1" "$PKGLIB/sim/librdmacm.so.1"
gzip -9n "$STAGE/usr/share/man/man1/ibv-shim.1" "$STAGE/usr/share/man/man7/ibv-shim.7"

DOC=$STAGE/usr/share/doc/$PKG
mkdir -p "$DOC"
EPOCH=${SOURCE_DATE_EPOCH:-$(git log -1 --format=%ct 2>/dev/null || date +%s)}
YEAR=$(date -u -d "@$EPOCH" +%Y)
cat >"$DOC/copyright" <<EOF
Format: https://www.debian.org/doc/packaging-manuals/copyright-format/1.0/
Upstream-Name: ibv-shim
Comment: A drop-in shim for the RDMA verbs C API (libibverbs), and ibv-sim,
 a software libibverbs. The C header mirrors rdma-core 44's verbs.h
 interface (rdma-core: GPL-2.0 or BSD-2-Clause, OpenIB.org).

Files: *
Copyright: $YEAR the ibv-shim developers
License: MIT or Apache-2.0

License: MIT
 Permission is hereby granted, free of charge, to any person obtaining a
 copy of this software and associated documentation files (the "Software"),
 to deal in the Software without restriction, including without limitation
 the rights to use, copy, modify, merge, publish, distribute, sublicense,
 and/or sell copies of the Software, and to permit persons to whom the
 Software is furnished to do so, subject to the following conditions:
 .
 The above copyright notice and this permission notice shall be included
 in all copies or substantial portions of the Software.
 .
 THE SOFTWARE IS PROVIDED "AS IS", WITHOUT WARRANTY OF ANY KIND, EXPRESS
 OR IMPLIED, INCLUDING BUT NOT LIMITED TO THE WARRANTIES OF
 MERCHANTABILITY, FITNESS FOR A PARTICULAR PURPOSE AND NONINFRINGEMENT. IN
 NO EVENT SHALL THE AUTHORS OR COPYRIGHT HOLDERS BE LIABLE FOR ANY CLAIM,
 DAMAGES OR OTHER LIABILITY, WHETHER IN AN ACTION OF CONTRACT, TORT OR
 OTHERWISE, ARISING FROM, OUT OF OR IN CONNECTION WITH THE SOFTWARE OR THE
 USE OR OTHER DEALINGS IN THE SOFTWARE.

License: Apache-2.0
 On Debian systems, the full text of the Apache License, Version 2.0 is
 in /usr/share/common-licenses/Apache-2.0.
EOF
DATE=$(date -u -R -d "@$EPOCH")
printf '%s (%s) unstable; urgency=medium\n\n  * Built from the ibv-shim repository (make deb).\n\n -- ibv-shim developers <ibv-shim@example.org>  %s\n' \
    "$PKG" "$VERSION" "$DATE" | gzip -9n >"$DOC/changelog.gz"

# Dependencies: what the ELF files need, as dpkg-shlibdeps reads them
# from the installed libraries' symbols files. (The sim's librdmacm needs
# libibverbs.so.1: the sim's own, beside it, not rdma-core's.)
mkdir -p "$WORK/shlibs/debian"
printf 'Source: %s\n\nPackage: %s\nArchitecture: any\n' "$PKG" "$PKG" >"$WORK/shlibs/debian/control"
DEPENDS=$(cd "$WORK/shlibs" && dpkg-shlibdeps -O \
    "$STAGE/usr/bin/ibv-shim" "$PKGLIB/libibv_shim.so" "$PKGLIB/sim/libibverbs.so.1" 2>/dev/null |
    sed -n 's/^shlibs:Depends=//p')

mkdir -p "$STAGE/DEBIAN"
SIZE=$(du -sk --exclude=DEBIAN "$STAGE" | cut -f1)
cat >"$STAGE/DEBIAN/control" <<EOF
Package: $PKG
Version: $VERSION
Architecture: $ARCH
Maintainer: ibv-shim developers <ibv-shim@example.org>
Installed-Size: $SIZE
Depends: $DEPENDS
Recommends: libibverbs1 (>= 44), ibverbs-providers
Section: devel
Priority: optional
Description: leak audit, call log and checks for RDMA verbs programs
 ibv-shim runs an unmodified libibverbs program with a shim in front of
 the real library (ibv-shim --fail-on-leak -- PROGRAM): every verbs call
 can be logged or traced, the resources a program never freed are
 reported (text, JSON, JUnit), posted work requests can be checked, and
 chosen calls can be made to fail to test error paths.
 .
 It also carries ibv-sim, a software libibverbs with simulated devices
 (ibv-shim --sim), for machines without RDMA hardware. Its libraries live
 in a private directory and never shadow the system's libibverbs.
EOF
(cd "$STAGE" && find . -path ./DEBIAN -prune -o -type f -printf '%P\0' | sort -z | xargs -0 md5sum) >"$STAGE/DEBIAN/md5sums"
find "$STAGE" -type d -exec chmod 755 {} +
chmod 644 "$STAGE/DEBIAN/control" "$STAGE/DEBIAN/md5sums"

dpkg-deb --root-owner-group -Zxz --build "$STAGE" "$DEB" >/dev/null
echo "$DEB"
