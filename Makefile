# ibv-shim. `make demo` and `make test` install what they need (scripts/deps.sh).
#
#   make            build the shim, the sim and the launcher (release)
#   make demo       run the examples under the shim and show what it saw
#   make test       the whole test suite
#   make bench      the cost of the shim, measured against the real thing
#   make header     regenerate include/infiniband/verbs.h (pinned cbindgen)
#   make lint       cargo fmt --check and clippy -D warnings

CARGO  ?= cargo
export PATH := $(HOME)/.cargo/bin:$(PATH)
TARGET := target
REL    := $(TARGET)/release

.PHONY: all build deps demo test bench header lint abi-snapshot clean

all: build

deps:
	@sh scripts/deps.sh

# The sim installs as target/sim/libibverbs.so.1; drop-in mode is the shim
# itself under the real library's names in target/dropin/.
build:
	$(CARGO) build --release --workspace
	@mkdir -p $(TARGET)/sim $(TARGET)/dropin
	@cp -f $(REL)/libibv_sim.so $(TARGET)/sim/libibverbs.so.1
	@ln -sf libibverbs.so.1 $(TARGET)/sim/libibverbs.so
	@ln -sf ../release/libibv_shim.so $(TARGET)/dropin/libibverbs.so.1
	@ln -sf libibverbs.so.1 $(TARGET)/dropin/libibverbs.so

demo: deps build
	@sh scripts/demo.sh

test: deps build
	$(CARGO) test --release --workspace

bench: deps build
	@sh bench/run.sh

header: deps
	cbindgen --config cbindgen.toml --crate ibv-shim --output include/infiniband/verbs.h

lint:
	$(CARGO) fmt --all --check
	$(CARGO) clippy --release --workspace --all-targets -- -D warnings

abi-snapshot:
	$(CARGO) run -q -p abi-build --bin abi-dump -- /usr/lib/x86_64-linux-gnu/libibverbs.so.1 > abi/libibverbs.so.1.abi.new
	@sed -i '1s|.*|# Exported ABI of libibverbs.so.1.14.44.0 (rdma-core 44.0, Debian 12, x86_64)|' abi/libibverbs.so.1.abi.new
	@mv abi/libibverbs.so.1.abi.new abi/libibverbs.so.1.abi

clean:
	$(CARGO) clean
