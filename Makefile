# ibv-shim. `make demo` and `make test` install what they need (scripts/deps.sh).
#
#   make            build the shim, the sim and the launcher (release)
#   make demo       run the examples under the shim and show what it saw
#   make test       every test binary, then a summary of what failed,
#                   was ignored or skipped (scripts/test.sh; needs root)
#   make bench      the cost of the shim, measured against the real thing
#   make header     regenerate include/infiniband/verbs.h (pinned cbindgen)
#   make lint       cargo fmt --check and clippy -D warnings
#   make install    install under PREFIX (default /usr/local), staged in DESTDIR
#   make uninstall  remove what make install put there
#   make deb        the Debian package target/ibv-shim_<version>_<arch>.deb
#                   of what make built (scripts/deb.sh; dpkg-deb, no debhelper)

CARGO  ?= cargo
export PATH := $(HOME)/.cargo/bin:$(PATH)
TARGET := target
REL    := $(TARGET)/release

.PHONY: all build deps demo test bench header lint abi-snapshot clean install uninstall deb

all: build

deps:
	@sh scripts/deps.sh

# The sim installs as target/sim/libibverbs.so.1; drop-in mode is the shim
# itself under the real library's names in target/dropin/. Copied, then
# renamed: cp over the old file would rewrite it in place, under the
# programs still running on it (tests in progress die of SIGBUS). The copy
# has a name of its own (the shell's pid): two builds at once (tests that
# run the CI snippets) must not rename each other's.
build:
	$(CARGO) build --release --workspace
	@mkdir -p $(TARGET)/sim $(TARGET)/dropin
	@t=$(TARGET)/sim/.libibverbs.so.1.$$$$; cp -f $(REL)/libibv_sim.so $$t && mv -f $$t $(TARGET)/sim/libibverbs.so.1
	@ln -sf libibverbs.so.1 $(TARGET)/sim/libibverbs.so
	@t=$(TARGET)/sim/.librdmacm.so.1.$$$$; cp -f $(REL)/libibv_sim_cm.so $$t && mv -f $$t $(TARGET)/sim/librdmacm.so.1
	@ln -sf librdmacm.so.1 $(TARGET)/sim/librdmacm.so
	@ln -sf ../release/libibv_shim.so $(TARGET)/dropin/libibverbs.so.1
	@ln -sf libibverbs.so.1 $(TARGET)/dropin/libibverbs.so
	@ln -sf ../release/libibv_shim.so $(TARGET)/dropin/librdmacm.so.1

demo: deps build
	@sh scripts/demo.sh

# TEST_ARGS: arguments for cargo test, e.g. TEST_ARGS='--test deb' (default: all).
test: deps build
	@CARGO="$(CARGO)" sh scripts/test.sh $(TEST_ARGS)

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

# Installed layout (the launcher finds the shim and the sim in
# ../lib/ibv-shim from its own directory, so LIBDIR must stay PREFIX/lib):
#   BINDIR/ibv-shim                       the launcher
#   PKGLIBDIR/libibv_shim.so              the shim, to preload
#   PKGLIBDIR/dropin/libibverbs.so.1, .so the shim under the real libraries' names
#   PKGLIBDIR/dropin/librdmacm.so.1, .so  (one file: it stands in for both)
#   PKGLIBDIR/sim/libibverbs.so.1, .so    ibv-sim
#   PKGLIBDIR/sim/librdmacm.so.1, .so     ibv-sim's connection manager
#   INCLUDEDIR/ibv-shim/infiniband/verbs.h, PKGCONFIGDIR/ibv-shim.pc
#   MANDIR/man1/ibv-shim.1, MANDIR/man7/ibv-shim.7
PREFIX       ?= /usr/local
DESTDIR      ?=
BINDIR       := $(PREFIX)/bin
LIBDIR       := $(PREFIX)/lib
PKGLIBDIR    := $(LIBDIR)/ibv-shim
INCLUDEDIR   := $(PREFIX)/include
PKGCONFIGDIR := $(LIBDIR)/pkgconfig
MANDIR       := $(PREFIX)/share/man
VERSION      := $(shell sed -n 's/^version = "\(.*\)"/\1/p' Cargo.toml | head -n 1)
INSTALLED    := $(BINDIR)/ibv-shim $(PKGLIBDIR)/libibv_shim.so \
	$(PKGLIBDIR)/dropin/libibverbs.so.1 $(PKGLIBDIR)/dropin/libibverbs.so \
	$(PKGLIBDIR)/dropin/librdmacm.so.1 $(PKGLIBDIR)/dropin/librdmacm.so \
	$(PKGLIBDIR)/sim/libibverbs.so.1 $(PKGLIBDIR)/sim/libibverbs.so \
	$(PKGLIBDIR)/sim/librdmacm.so.1 $(PKGLIBDIR)/sim/librdmacm.so \
	$(INCLUDEDIR)/ibv-shim/infiniband/verbs.h $(PKGCONFIGDIR)/ibv-shim.pc \
	$(MANDIR)/man1/ibv-shim.1 $(MANDIR)/man7/ibv-shim.7
# Removed by uninstall when empty (deepest first).
INSTALLED_DIRS := $(PKGLIBDIR)/dropin $(PKGLIBDIR)/sim $(PKGLIBDIR) \
	$(INCLUDEDIR)/ibv-shim/infiniband $(INCLUDEDIR)/ibv-shim

# Installs what `make` built; it builds nothing (so `sudo make install`
# leaves no root-owned files in target/). REL=DIR installs another build.
install:
	@for f in ibv-shim libibv_shim.so libibv_sim.so libibv_sim_cm.so; do \
		test -f $(REL)/$$f || { echo "make install: $(REL)/$$f is missing: run make first" >&2; exit 1; }; \
	done
	install -d $(DESTDIR)$(BINDIR) $(DESTDIR)$(PKGLIBDIR)/dropin $(DESTDIR)$(PKGLIBDIR)/sim \
		$(DESTDIR)$(INCLUDEDIR)/ibv-shim/infiniband $(DESTDIR)$(PKGCONFIGDIR) \
		$(DESTDIR)$(MANDIR)/man1 $(DESTDIR)$(MANDIR)/man7
	install -m 755 $(REL)/ibv-shim $(DESTDIR)$(BINDIR)/ibv-shim
	install -m 755 $(REL)/libibv_shim.so $(DESTDIR)$(PKGLIBDIR)/libibv_shim.so
	ln -sf ../libibv_shim.so $(DESTDIR)$(PKGLIBDIR)/dropin/libibverbs.so.1
	ln -sf libibverbs.so.1 $(DESTDIR)$(PKGLIBDIR)/dropin/libibverbs.so
	ln -sf ../libibv_shim.so $(DESTDIR)$(PKGLIBDIR)/dropin/librdmacm.so.1
	ln -sf librdmacm.so.1 $(DESTDIR)$(PKGLIBDIR)/dropin/librdmacm.so
	install -m 755 $(REL)/libibv_sim.so $(DESTDIR)$(PKGLIBDIR)/sim/libibverbs.so.1
	ln -sf libibverbs.so.1 $(DESTDIR)$(PKGLIBDIR)/sim/libibverbs.so
	install -m 755 $(REL)/libibv_sim_cm.so $(DESTDIR)$(PKGLIBDIR)/sim/librdmacm.so.1
	ln -sf librdmacm.so.1 $(DESTDIR)$(PKGLIBDIR)/sim/librdmacm.so
	install -m 644 include/infiniband/verbs.h $(DESTDIR)$(INCLUDEDIR)/ibv-shim/infiniband/verbs.h
	sed -e 's|@PREFIX@|$(PREFIX)|' -e 's|@LIBDIR@|$(LIBDIR)|' \
		-e 's|@INCLUDEDIR@|$(INCLUDEDIR)|' -e 's|@VERSION@|$(VERSION)|' \
		ibv-shim.pc.in > $(DESTDIR)$(PKGCONFIGDIR)/ibv-shim.pc
	chmod 644 $(DESTDIR)$(PKGCONFIGDIR)/ibv-shim.pc
	install -m 644 man/ibv-shim.1 $(DESTDIR)$(MANDIR)/man1/ibv-shim.1
	install -m 644 man/ibv-shim.7 $(DESTDIR)$(MANDIR)/man7/ibv-shim.7

uninstall:
	rm -f $(addprefix $(DESTDIR),$(INSTALLED))
	-rmdir $(addprefix $(DESTDIR),$(INSTALLED_DIRS)) 2>/dev/null || true

# The Debian package of what `make` built (it builds nothing, like install).
deb:
	@for f in ibv-shim libibv_shim.so libibv_sim.so libibv_sim_cm.so; do \
		test -f $(REL)/$$f || { echo "make deb: $(REL)/$$f is missing: run make first" >&2; exit 1; }; \
	done
	@sh scripts/deb.sh $(REL) $(TARGET)
