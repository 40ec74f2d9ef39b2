#!/bin/sh
# `make test`: every test binary of the workspace runs (`cargo test
# --no-fail-fast`: a failing binary does not stop the ones after it), then
# a summary counts and names what failed, what is #[ignore]d and what
# skipped. A test whose dependency is missing fails unless its group is
# opted out by name (IBV_SHIM_TEST_SKIP=group,...; tests/common/skip.rs);
# an opted-out test records `SKIPPED [group] test: why` in
# IBV_SHIM_SKIP_LOG, which this script sets. A skipped test is not
# counted as passed. The last line is
#   summary: N passed, N failed, N ignored, N skipped
# and the exit status is cargo's. Extra arguments go to `cargo test`.
set -u
cd "$(dirname "$0")/.."
CARGO=${CARGO:-cargo}
mkdir -p target
log=target/test.log
rc_file=target/test.rc
IBV_SHIM_SKIP_LOG=$PWD/target/test-skips.log
export IBV_SHIM_SKIP_LOG
: >"$IBV_SHIM_SKIP_LOG"
rm -f "$rc_file"

(
    $CARGO test --release --workspace --no-fail-fast "$@" 2>&1
    echo $? >"$rc_file"
) | tee "$log"
rc=$(cat "$rc_file" 2>/dev/null || echo 1)

# Per binary (cargo's `Running tests/NAME.rs (...)`, `Running unittests
# ...`, `Doc-tests NAME`): the names of failed and ignored tests; the
# counts from each `test result:` line.
awk -v skips="$IBV_SHIM_SKIP_LOG" '
    /^ *Running / {
        bin = $2; sub(/^tests\//, "", bin); sub(/\.rs$/, "", bin)
        if ($2 == "unittests") { bin = $NF; sub(/^\(.*\//, "", bin); sub(/-[0-9a-f]+\)$/, "", bin); bin = "unittests " bin }
    }
    /^ *Doc-tests / { bin = "doc:" $2 }
    /^test .* \.\.\. FAILED$/ { failed[++nf] = bin ": " $2 }
    /^test .* \.\.\. ignored/ { line = $0; sub(/^test /, "", line); sub(/ \.\.\. ignored/, "", line); ignored[++ni] = bin ": " line }
    /^test result:/ { for (i = 1; i <= NF; i++) { if ($i ~ /^passed/) p += $(i-1); if ($i ~ /^failed/) f += $(i-1); if ($i ~ /^ignored/) ig += $(i-1) } }
    /^error: .*(could not compile|failed to run)/ { build_failed = 1 }
    END {
        ns = 0
        while ((getline s < skips) > 0) if (s ~ /^SKIPPED /) { t = s; sub(/:.*/, "", t); if (!(t in seen)) { seen[t] = 1; skipped[++ns] = s } }
        for (i = 1; i <= nf; i++) printf "summary: failed:  %s\n", failed[i]
        for (i = 1; i <= ni; i++) printf "summary: ignored: %s\n", ignored[i]
        for (i = 1; i <= ns; i++) printf "summary: skipped: %s\n", substr(skipped[i], 9)
        if (build_failed) print "summary: a test binary did not build (see above): its tests are not counted"
        printf "summary: %d passed, %d failed, %d ignored, %d skipped\n", p - ns, f, ig, ns
    }' "$log"
exit "$rc"
