#!/bin/sh
# Installs what building and testing ibv-shim needs on Debian 12, as root:
# rdma-core's libibverbs (headers, the real library, provider plugins,
# ibv_devices/ibv_devinfo), the tools the tests and benchmarks drive, the
# third-party verbs programs tests/third_party.rs runs unmodified (perftest,
# qperf, rdmacm-utils, libfabric-bin, ucx-utils, python3-pyverbs), and the
# pinned cbindgen. Does nothing that is already done.
set -eu

CBINDGEN_VERSION=0.27.0
PACKAGES="libibverbs-dev ibverbs-utils ibverbs-providers gcc make binutils lld util-linux valgrind ltrace python3-jsonschema"
PACKAGES="$PACKAGES librdmacm-dev rdmacm-utils perftest qperf libfabric-bin ucx-utils python3-pyverbs"
# `make install` and tests/install.rs: the .pc file, rendering the man pages.
PACKAGES="$PACKAGES pkg-config man-db groff-base"
# The bench set: the tracers `make bench` compares the shim's trace with.
PACKAGES="$PACKAGES uftrace liblttng-ust-dev lttng-tools"
# The real-kernel test bed and `ibv-shim --vm` (crates/vm): QEMU, a static
# busybox for the initramfs, kmod (depmod, modprobe --show-depends), iproute2
# (ip, rdma) inside the guest. The kernel package itself is fetched on first
# use with apt-get download into ~/.cache/ibv-shim/vm.
PACKAGES="$PACKAGES qemu-system-x86 busybox-static kmod iproute2"

missing=""
for p in $PACKAGES; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing="$missing $p"
done
if [ -n "$missing" ]; then
    if [ "$(id -u)" != 0 ]; then
        echo "deps: missing Debian packages:$missing (run as root, or install them)" >&2
        exit 1
    fi
    echo "deps: installing$missing"
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq
    apt-get install -y -qq --no-install-recommends $missing >/dev/null
fi

PATH="$HOME/.cargo/bin:$PATH"
if [ "$(cbindgen --version 2>/dev/null)" != "cbindgen $CBINDGEN_VERSION" ]; then
    echo "deps: installing cbindgen $CBINDGEN_VERSION"
    cargo install --quiet --locked --force cbindgen --version "$CBINDGEN_VERSION"
fi

# Sources that tests/header_complete.rs compiles against the shim's header:
# rdma-core 44's libibverbs/examples and perftest, the versions Debian 12
# ships, from Debian's archive. The orig tarballs are pinned by SHA-256 (the
# values of their .dsc files) and unpacked into a cache outside the
# repository (IBV_SHIM_SRC_CACHE, default ~/.cache/ibv-shim/src), one
# directory each, marked complete by a .complete file. A failed download
# is reported, not fatal: only that test needs them.
SRC_CACHE=${IBV_SHIM_SRC_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/ibv-shim/src}
DEBIAN_POOL=${DEBIAN_POOL:-http://deb.debian.org/debian/pool/main}

fetch_source() { # dir pool-path sha256
    dir=$SRC_CACHE/$1
    [ -e "$dir/.complete" ] && return 0
    if ! command -v curl >/dev/null; then
        echo "deps: curl is missing: cannot download $2" >&2
        return 1
    fi
    mkdir -p "$SRC_CACHE"
    tarball=$SRC_CACHE/${2##*/}
    echo "deps: downloading $DEBIAN_POOL/$2"
    if ! curl -fsSL --retry 2 -o "$tarball.part" "$DEBIAN_POOL/$2"; then
        echo "deps: cannot download $DEBIAN_POOL/$2" \
            "(tests/header_complete.rs needs it or its fallback; or unpack it into $dir and touch $dir/.complete)" >&2
        rm -f "$tarball.part"
        return 1
    fi
    if ! echo "$3  $tarball.part" | sha256sum -c --quiet -; then
        echo "deps: $2 does not match its pinned SHA-256; not used" >&2
        rm -f "$tarball.part"
        return 1
    fi
    rm -rf "$dir" && mkdir -p "$dir"
    tar -xzf "$tarball.part" -C "$dir" --strip-components=1
    rm -f "$tarball.part"
    touch "$dir/.complete"
}

# Debian 12's versions first. A mirror that follows the current release
# may no longer serve them (seen: deb.debian.org answering 404 for both while
# serving Debian 13's); then Debian 13's, also pinned: rdma-core 56.1's
# examples (identical to 44's but for 4 lines of xsrq_pingpong.c) and
# perftest 25.01 (its memory back ends in files of their own). The test
# uses the first present and prints which. tests/pyverbs_suite.rs runs
# rdma-core 44.0's tests/ (pyverbs' suite) when present; 56.1's does not
# load against Debian 12's pyverbs 44, so without 44.0 that test skips.
fetch_source rdma-core-44.0 r/rdma-core/rdma-core_44.0.orig.tar.gz \
    25d6601e60f27bbcd75e07fe340400cb80e6c3c487679700535385cfc9d9858b ||
    fetch_source rdma-core-56.1 r/rdma-core/rdma-core_56.1.orig.tar.gz \
        63ce7f2baa7242c2dbc76375dac957c420187dd27f8c5e148efc07971ee522a8 ||
    echo "deps: no rdma-core sources: tests/header_complete.rs will fail" >&2
fetch_source perftest-4.5+0.17 p/perftest/perftest_4.5+0.17.orig.tar.gz \
    86fc75af293a75ac7e15fed7cc5adf628e660d8992835c0ac8b91d500b63aa5f ||
    fetch_source perftest-25.01.0+0.80 p/perftest/perftest_25.01.0+0.80.orig.tar.gz \
        54e86b131f0b06862b8b9cd692739737295463cfef467bdda5f5aa3dae8c5b05 ||
    echo "deps: no perftest sources: tests/header_complete.rs will fail" >&2
