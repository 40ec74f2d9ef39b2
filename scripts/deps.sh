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
# The bench set: the tracers `make bench` compares the shim's trace with.
PACKAGES="$PACKAGES uftrace liblttng-ust-dev lttng-tools"

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
