#!/bin/sh
# Installs what building and testing ibv-shim needs on Debian 12, as root:
# rdma-core's libibverbs (headers, the real library, provider plugins,
# ibv_devices/ibv_devinfo), the tools the tests and benchmarks drive, the
# third-party verbs programs tests/third_party.rs runs unmodified (perftest,
# qperf, rdmacm-utils, libfabric-bin, ucx-utils, python3-pyverbs), the
# pinned cbindgen, and the sources some tests build (below). Checks the Rust
# toolchain (Cargo.toml's rust-version or newer; it installs none). Does
# nothing that is already done.
set -eu

CBINDGEN_VERSION=0.27.0
PACKAGES="libibverbs-dev ibverbs-utils ibverbs-providers gcc make binutils lld util-linux valgrind ltrace strace python3-jsonschema"
PACKAGES="$PACKAGES librdmacm-dev rdmacm-utils perftest qperf libfabric-bin ucx-utils python3-pyverbs"
# tests/sim_cm_ucx.rs builds a UCP program (UCX over the rdmacm connection manager).
PACKAGES="$PACKAGES libucx-dev"
# `make install`, `make deb` and tests/install.rs, tests/deb.rs: the .pc file,
# rendering the man pages, checking the package.
PACKAGES="$PACKAGES pkg-config man-db groff-base dpkg-dev fakeroot lintian"
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
# The oldest Rust that builds the code is Cargo.toml's rust-version.
RUST_MIN=$(sed -n 's/^rust-version = "\(.*\)"/\1/p' "$(dirname "$0")/../Cargo.toml" | head -n 1)
rust_have=$(rustc --version 2>/dev/null | sed -n 's/^rustc \([0-9][0-9.]*\).*/\1/p')
if [ -z "$rust_have" ] ||
    [ "$(printf '%s\n%s\n' "$RUST_MIN" "$rust_have" | sort -V | head -n 1)" != "$RUST_MIN" ]; then
    echo "deps: needs Rust $RUST_MIN or newer (rustc and cargo on PATH or in ~/.cargo/bin; found: ${rust_have:-none});" \
        "e.g. rustup toolchain install $RUST_MIN" >&2
    exit 1
fi
if [ "$(cbindgen --version 2>/dev/null)" != "cbindgen $CBINDGEN_VERSION" ]; then
    echo "deps: installing cbindgen $CBINDGEN_VERSION"
    cargo install --quiet --locked --force cbindgen --version "$CBINDGEN_VERSION"
fi

# Sources the tests compile and run: rdma-core 44's libibverbs/examples
# and perftest (tests/header_complete.rs builds them against the shim's
# header), rdma-core 44's tests/ (tests/pyverbs_suite.rs), the versions
# Debian 12 ships. They come through this machine's own apt sources: a
# private apt configuration in the cache (nothing of the system's changed)
# holds a deb-src entry for each deb entry the machine has, plus the same
# entries for Debian 13, the fallback (a mirror that follows the current
# release may no longer serve Debian 12's tarballs: seen, it answers 404
# for both while serving Debian 13's); `apt-get source --download-only
# PACKAGE=VERSION` fetches the exact version, checked by apt against the
# signed Sources index and here against the pinned SHA-256 (the values of
# the .dsc files). Each upstream tarball is unpacked into a cache outside
# the repository (IBV_SHIM_SRC_CACHE, default ~/.cache/ibv-shim/src), one
# directory each, marked complete by a .complete file. A failed download
# is reported, not fatal here: the tests that need a source fail and name
# it (or, opted out by IBV_SHIM_TEST_SKIP, are counted as skipped).
SRC_CACHE=${IBV_SHIM_SRC_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/ibv-shim/src}
APT_DIR=$SRC_CACHE/.apt
CODENAME=$(. /etc/os-release && echo "${VERSION_CODENAME:-}")
NEXT_CODENAME=trixie

# deb-src twins of the machine's deb entries (one-line and deb822 files),
# and of those for $CODENAME itself, the same for $NEXT_CODENAME.
apt_sources() {
    rm -rf "$APT_DIR/parts"
    mkdir -p "$APT_DIR/parts" "$APT_DIR/lists/partial" "$APT_DIR/cache/archives/partial"
    : > "$APT_DIR/none.list"
    for f in /etc/apt/sources.list /etc/apt/sources.list.d/*.list; do
        [ -f "$f" ] || continue
        sed -n 's/^[[:space:]]*deb[[:space:]]\{1,\}/deb-src /p' "$f" >> "$APT_DIR/parts/derived.list"
        sed -n "s/^[[:space:]]*deb[[:space:]]\{1,\}\(.*[[:space:]]\)$CODENAME\([[:space:]]\)/deb-src \1$NEXT_CODENAME\2/p" \
            "$f" >> "$APT_DIR/parts/next.list"
    done
    for f in /etc/apt/sources.list.d/*.sources; do
        [ -f "$f" ] || continue
        base=${f##*/}
        sed 's/^Types:.*/Types: deb-src/' "$f" > "$APT_DIR/parts/derived-$base"
        awk -v c="$CODENAME" -v n="$NEXT_CODENAME" 'BEGIN { RS = ""; ORS = "\n\n" }
            /(^|\n)Types:[^\n]*deb/ {
                k = split($0, line, "\n"); hit = 0; out = ""
                for (i = 1; i <= k; i++) {
                    if (line[i] ~ /^Suites:/ && (" " line[i] " ") ~ (" " c " ")) { line[i] = "Suites: " n; hit = 1 }
                    if (line[i] ~ /^Types:/) line[i] = "Types: deb-src"
                    out = out line[i] "\n"
                }
                if (hit) printf "%s\n", out
            }' "$f" > "$APT_DIR/parts/next-$base"
    done
}

apt_src() { # apt-get/apt-cache with the private configuration
    tool=$1
    shift
    "$tool" -o Dir::Etc::SourceList="$APT_DIR/none.list" -o Dir::Etc::SourceParts="$APT_DIR/parts" \
        -o Dir::State::Lists="$APT_DIR/lists" -o Dir::Cache="$APT_DIR/cache" \
        -o APT::Sandbox::User="$(id -un)" -o Debug::NoLocking=1 "$@"
}

APT_READY=""
fetch_source() { # dir package version upstream-tarball sha256
    dir=$SRC_CACHE/$1
    [ -e "$dir/.complete" ] && return 0
    # Not served here a day ago: not asked again until tomorrow.
    if [ -n "$(find "$SRC_CACHE/.$1.unavailable" -mtime -1 2>/dev/null)" ]; then
        echo "deps: $4 is not served by this machine's apt sources (tried in the last day;" \
            "rm $SRC_CACHE/.$1.unavailable to try again)" >&2
        return 1
    fi
    if [ -z "$APT_READY" ]; then
        apt_sources
        echo "deps: reading the source indexes of this machine's apt sources"
        apt_src apt-get update -qq >/dev/null 2>"$APT_DIR/update.log" ||
            echo "deps: apt-get update (deb-src) reported problems: $APT_DIR/update.log" >&2
        APT_READY=1
    fi
    work=$SRC_CACHE/.download
    rm -rf "$work" && mkdir -p "$work"
    echo "deps: apt-get source --download-only $2=$3"
    # The .dsc may be missing on a mirror that still has the tarball: apt
    # then fails, having fetched (and checked) what it could.
    (cd "$work" && apt_src apt-get source -qq --download-only "$2=$3") >"$work.log" 2>&1 || true
    tarball=$work/$4
    if [ ! -f "$tarball" ]; then
        echo "deps: cannot get $4 through this machine's apt sources ($(grep -m1 '^E:' "$work.log" || echo "see $work.log"))" \
            "(or unpack it into $dir and touch $dir/.complete)" >&2
        rm -rf "$work"
        touch "$SRC_CACHE/.$1.unavailable"
        return 1
    fi
    if ! echo "$5  $tarball" | sha256sum -c --quiet -; then
        echo "deps: $4 does not match its pinned SHA-256; not used" >&2
        rm -rf "$work"
        return 1
    fi
    rm -rf "$dir" && mkdir -p "$dir"
    tar -xzf "$tarball" -C "$dir" --strip-components=1
    rm -rf "$work" "$work.log"
    touch "$dir/.complete"
}

# Debian 12's versions first, then Debian 13's, also pinned: rdma-core
# 56.1's examples (identical to 44's but for 4 lines of xsrq_pingpong.c)
# and perftest 25.01 (its memory back ends in files of their own).
# tests/header_complete.rs builds Debian 12's and, without them, fails
# unless its opt-out (IBV_SHIM_TEST_SKIP=sources-debian12) lets it build
# these, counted as a skip. tests/pyverbs_suite.rs needs rdma-core 44.0's
# tests/: 56.1's do not load against Debian 12's pyverbs 44.
fetch_source rdma-core-44.0 rdma-core 44.0-2 rdma-core_44.0.orig.tar.gz \
    25d6601e60f27bbcd75e07fe340400cb80e6c3c487679700535385cfc9d9858b ||
    fetch_source rdma-core-56.1 rdma-core 56.1-1 rdma-core_56.1.orig.tar.gz \
        63ce7f2baa7242c2dbc76375dac957c420187dd27f8c5e148efc07971ee522a8 ||
    echo "deps: no rdma-core sources: tests/header_complete.rs will fail" >&2
fetch_source perftest-4.5+0.17 perftest 4.5+0.17-1 perftest_4.5+0.17.orig.tar.gz \
    86fc75af293a75ac7e15fed7cc5adf628e660d8992835c0ac8b91d500b63aa5f ||
    fetch_source perftest-25.01.0+0.80 perftest 25.01.0+0.80-1 perftest_25.01.0+0.80.orig.tar.gz \
        54e86b131f0b06862b8b9cd692739737295463cfef467bdda5f5aa3dae8c5b05 ||
    echo "deps: no perftest sources: tests/header_complete.rs will fail" >&2
