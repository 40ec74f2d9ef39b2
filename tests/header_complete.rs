//! The generated `include/infiniband/verbs.h` is a complete stand-in for
//! rdma-core 44's: it defines the same identifiers, and real programs written
//! against rdma-core's header compile against it alone and run.
//!
//! - `same_identifiers_as_real_verbs_h`: every macro, struct/union/enum tag,
//!   enum constant and function that rdma-core's `verbs.h` (with the
//!   `verbs_api.h` it includes) defines after preprocessing, and nothing else
//!   (the synthetic names of tests/layout/anonymous.txt excepted). Values,
//!   layouts and prototypes are tests/layout.rs's business.
//! - `every_declared_function_is_exported`: each prototype of the header
//!   resolves to an export of the shim, the sim and rdma-core's library.
//! - `rdma_core_examples_and_perftest_build_on_our_header_alone`: rdma-core
//!   44's `libibverbs/examples` (device_list, uc/ud/srq/xsrq_pingpong with
//!   pingpong.c) and perftest (every program of its Makefile.am), unchanged,
//!   compiled with `-Werror=implicit-function-declaration` in a private
//!   mount namespace where `/usr/include/infiniband` is an empty tmpfs but
//!   for rdma-core's SA headers (`sa.h`, `sa-kern-abi.h`, which librdmacm's
//!   `<rdma/rdma_cma.h>` includes; they are not part of the verbs API), then
//!   run as client and server on ibv-sim. The sources are Debian 12's, put
//!   in a cache by `make deps` (scripts/deps.sh); without them the test
//!   fails naming them, unless `IBV_SHIM_TEST_SKIP=sources-debian12`: then
//!   it builds the next release's (rdma-core 56.1, perftest 25.01) and
//!   the suite's summary counts and names the skip of Debian 12's.
//!
//! Run: `cargo test --release --test header_complete`. Needs gcc,
//! libibverbs-dev (the reference header), librdmacm-dev, root (for
//! `unshare -m`), a built sim (`make build`), and the cached sources
//! (`make deps`).

mod common;

use std::collections::{BTreeMap, BTreeSet};
use std::fmt::Write as _;
use std::fs;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

use common::{
    describe, dynamic_symbols, fabric_name, free_port, listening, real_libibverbs, require,
    run_unchecked, shim_so, sim_dir, sim_lib, FabricGuard,
};

/// The files of rdma-core's header that ours replaces.
const REAL_FILES: [&str; 2] = [
    "/usr/include/infiniband/verbs.h",
    "/usr/include/infiniband/verbs_api.h",
];
/// verbs.h also includes the kernel's uverbs ABI, whose `ib_uverbs_*` names
/// are not the verbs API: verbs_api.h aliases the few that belong to the API
/// to `ibv_*` names, and those are compared. The kernel's own names that
/// verbs.h mentions (after alias expansion) are left out.
const KERNEL_ABI: &str = "/usr/include/infiniband/ib_user_ioctl_verbs.h";

fn root() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

fn scratch(test: &str) -> PathBuf {
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR"))
        .join("header_complete")
        .join(test);
    fs::create_dir_all(&dir).unwrap_or_else(|e| panic!("{}: {e}", dir.display()));
    dir
}

/// `gcc -E -dD` of `#include <infiniband/verbs.h>` (with `include_dir` first
/// on the search path, if given), keeping only the lines that come from
/// `files`: the header's own text, macro definitions included.
fn preprocessed(dir: &Path, include_dir: Option<&Path>, files: &[PathBuf]) -> String {
    let src = dir.join("include_verbs.c");
    fs::write(&src, "#include <infiniband/verbs.h>\n").unwrap();
    let mut gcc = Command::new("gcc");
    gcc.args(["-std=gnu11", "-E", "-dD"]);
    if let Some(inc) = include_dir {
        gcc.arg(format!("-I{}", inc.display()));
    }
    let out = gcc
        .arg(&src)
        .output()
        .unwrap_or_else(|e| panic!("cannot run gcc: {e}"));
    assert!(
        out.status.success(),
        "gcc -E failed:\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let mut keep = false;
    let mut text = String::new();
    for line in String::from_utf8_lossy(&out.stdout).lines() {
        // Line markers: `# 42 "/usr/include/infiniband/verbs.h" 1`.
        if let Some(rest) = line.strip_prefix("# ") {
            if let Some(file) = rest.split('"').nth(1) {
                keep = files.iter().any(|f| Path::new(file) == f);
                continue;
            }
        }
        if keep {
            text.push_str(line);
            text.push('\n');
        }
    }
    assert!(!text.is_empty(), "gcc -E showed nothing of {files:?}");
    text
}

/// C tokens that are not identifiers of the header even where they stand
/// before a `(` at file scope.
const NOT_NAMES: [&str; 8] = [
    "__attribute__",
    "__typeof__",
    "sizeof",
    "__extension__",
    "__inline",
    "__restrict",
    "_Static_assert",
    "__asm__",
];

fn tokens(code: &str) -> Vec<&str> {
    let mut out = Vec::new();
    let bytes = code.as_bytes();
    let mut i = 0;
    while i < bytes.len() {
        let c = bytes[i];
        if c.is_ascii_alphabetic() || c == b'_' {
            let start = i;
            while i < bytes.len() && (bytes[i].is_ascii_alphanumeric() || bytes[i] == b'_') {
                i += 1;
            }
            out.push(&code[start..i]);
        } else if c == b'"' || c == b'\'' {
            // Skip a string or character literal.
            i += 1;
            while i < bytes.len() && bytes[i] != c {
                i += if bytes[i] == b'\\' { 2 } else { 1 };
            }
            i += 1;
        } else if c.is_ascii_whitespace() {
            i += 1;
        } else if c.is_ascii_digit() {
            while i < bytes.len() && (bytes[i].is_ascii_alphanumeric() || bytes[i] == b'.') {
                i += 1;
            }
        } else {
            out.push(&code[i..i + 1]);
            i += 1;
        }
    }
    out
}

fn is_ident(t: &str) -> bool {
    t.starts_with(|c: char| c.is_ascii_alphabetic() || c == '_')
}

/// The identifiers a preprocessed header defines at file scope: macros,
/// struct/union/enum tags, enum constants, and functions (declared or
/// defined), as C code using the header can name them.
fn defined_identifiers(text: &str) -> BTreeSet<String> {
    scan(text).0
}

/// [`defined_identifiers`], and apart the functions only declared (the
/// prototypes, which must resolve to a library's export; inline definitions
/// need none).
fn scan(text: &str) -> (BTreeSet<String>, BTreeSet<String>) {
    let mut names = BTreeSet::new();
    let mut prototypes = BTreeSet::new();
    // The function the current file-scope declaration names, until its `;`
    // (a prototype) or `{` (a definition).
    let mut pending: Option<&str> = None;
    let mut code = String::new();
    for line in text.lines() {
        if let Some(rest) = line.trim_start().strip_prefix("#define ") {
            let name: String = rest
                .chars()
                .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
                .collect();
            names.insert(name);
        } else if !line.trim_start().starts_with('#') {
            code.push_str(line);
            code.push('\n');
        }
    }
    let toks = tokens(&code);
    let (mut depth, mut parens) = (0usize, 0usize);
    // Whether the current file-scope declaration has named its function yet.
    let mut named = false;
    let mut i = 0;
    while i < toks.len() {
        let t = toks[i];
        let next = toks.get(i + 1).copied().unwrap_or("");
        match t {
            // A tag counts wherever it is named: C gives a tag first named
            // in a member or parameter the same scope as a declared one.
            "struct" | "union" | "enum" if is_ident(next) => {
                names.insert(next.to_string());
                if t == "enum" && toks.get(i + 2) == Some(&"{") {
                    i = enum_constants(&toks, i + 3, &mut names);
                    continue;
                }
            }
            "enum" if next == "{" => {
                i = enum_constants(&toks, i + 2, &mut names);
                continue;
            }
            "{" => {
                if depth == 0 && parens == 0 {
                    pending = None;
                }
                depth += 1;
            }
            "}" => {
                depth = depth.saturating_sub(1);
                if depth == 0 && parens == 0 {
                    named = false;
                }
            }
            "(" => parens += 1,
            ")" => parens = parens.saturating_sub(1),
            ";" if depth == 0 && parens == 0 => {
                named = false;
                if let Some(f) = pending.take() {
                    prototypes.insert(f.to_string());
                }
            }
            _ if depth == 0
                && parens == 0
                && !named
                && next == "("
                && is_ident(t)
                && !NOT_NAMES.contains(&t) =>
            {
                names.insert(t.to_string());
                named = true;
                pending = Some(t);
            }
            _ => {}
        }
        i += 1;
    }
    (names, prototypes)
}

/// Records the constants of an enum body starting at `toks[i]`; returns the
/// index after its closing brace.
fn enum_constants(toks: &[&str], mut i: usize, names: &mut BTreeSet<String>) -> usize {
    let mut expect_name = true;
    let mut nesting = 0usize;
    while i < toks.len() {
        match toks[i] {
            "}" if nesting == 0 => return i + 1,
            "(" | "{" => nesting += 1,
            ")" | "}" => nesting = nesting.saturating_sub(1),
            "," if nesting == 0 => expect_name = true,
            t if expect_name && is_ident(t) => {
                names.insert(t.to_string());
                expect_name = false;
            }
            _ => {}
        }
        i += 1;
    }
    i
}

/// The macros and the enum constants a preprocessed header defines, apart:
/// a C program sees the difference (`#ifdef`, `sizeof`, a switch's
/// enumeration warnings, a debugger showing the name).
/// Each macro comes with its definition.
fn macros_and_enum_constants(text: &str) -> (BTreeMap<String, String>, BTreeSet<String>) {
    let mut macros = BTreeMap::new();
    let mut code = String::new();
    for line in text.lines() {
        if let Some(rest) = line.trim_start().strip_prefix("#define ") {
            let name: String = rest
                .chars()
                .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
                .collect();
            let body = rest[name.len()..].trim().to_string();
            macros.insert(name, body);
        } else if !line.trim_start().starts_with('#') {
            code.push_str(line);
            code.push('\n');
        }
    }
    let toks = tokens(&code);
    let mut constants = BTreeSet::new();
    let mut i = 0;
    while i < toks.len() {
        let next = toks.get(i + 1).copied().unwrap_or("");
        if toks[i] == "enum" && next == "{" {
            i = enum_constants(&toks, i + 2, &mut constants);
            continue;
        }
        if toks[i] == "enum" && is_ident(next) && toks.get(i + 2) == Some(&"{") {
            i = enum_constants(&toks, i + 3, &mut constants);
            continue;
        }
        i += 1;
    }
    (macros, constants)
}

/// What rdma-core's verbs.h makes an enum constant is one in ours, and
/// what it makes a macro is a macro in ours, but for verbs_api.h's aliases
/// of the kernel's `IB_UVERBS_*` enum constants (`#define
/// IBV_ADVISE_MR_ADVICE_PREFETCH IB_UVERBS_ADVISE_MR_ADVICE_PREFETCH`):
/// ours does not include the kernel's ioctl headers, and its constants of
/// the same names and values are enum constants.
#[test]
fn enum_constants_and_macros_are_what_they_are_in_real_verbs_h() {
    let dir = scratch("kinds");
    let files: Vec<PathBuf> = REAL_FILES.iter().map(PathBuf::from).collect();
    let (real_macros, real_enums) = macros_and_enum_constants(&preprocessed(&dir, None, &files));
    let include = root().join("include");
    let ours = [include.join("infiniband/verbs.h")];
    let (our_macros, our_enums) =
        macros_and_enum_constants(&preprocessed(&dir, Some(&include), &ours));
    assert!(real_enums.contains("IBV_WC_SUCCESS") && our_enums.contains("IBV_WC_SUCCESS"));
    let now_macros: Vec<&String> = real_enums
        .iter()
        .filter(|n| our_macros.contains_key(*n))
        .collect();
    let now_enums: Vec<&String> = real_macros
        .iter()
        .filter(|(n, body)| our_enums.contains(*n) && !body.starts_with("IB_UVERBS_"))
        .map(|(n, _)| n)
        .collect();
    assert!(
        now_macros.is_empty() && now_enums.is_empty(),
        "enum constants in rdma-core's verbs.h, macros in ours: {now_macros:?}; \
         macros in rdma-core's, enum constants in ours: {now_enums:?}"
    );
}

/// The shim's own additions to the API, declared in the header on purpose.
const SHIM_OWN: [&str; 1] = [
    // Which shim a program runs under (src/exports).
    "ibvshim_version",
];

/// Type names of the generated header that stand for unnamed C types
/// (tests/layout/anonymous.txt): cbindgen can only emit named types.
fn synthetic_names() -> BTreeSet<String> {
    let path = root().join("tests/layout/anonymous.txt");
    let text = fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    text.lines()
        .map(str::trim)
        .filter(|l| !l.is_empty() && !l.starts_with('#'))
        .filter_map(|l| l.split_once('=').map(|(name, _)| name.trim()))
        .filter(|name| !name.contains('.'))
        .map(String::from)
        .collect()
}

fn real_identifiers(dir: &Path) -> BTreeSet<String> {
    assert!(
        Path::new(REAL_FILES[0]).is_file(),
        "{}: install libibverbs-dev (make deps)",
        REAL_FILES[0]
    );
    let files: Vec<PathBuf> = REAL_FILES.iter().map(PathBuf::from).collect();
    let kernel = defined_identifiers(&preprocessed(dir, None, &[PathBuf::from(KERNEL_ABI)]));
    defined_identifiers(&preprocessed(dir, None, &files))
        .difference(&kernel)
        .cloned()
        .collect()
}

fn our_identifiers(dir: &Path) -> BTreeSet<String> {
    let include = root().join("include");
    let files = [include.join("infiniband/verbs.h")];
    defined_identifiers(&preprocessed(dir, Some(&include), &files))
}

#[test]
fn same_identifiers_as_real_verbs_h() {
    let dir = scratch("identifiers");
    let real = real_identifiers(&dir);
    let ours = our_identifiers(&dir);
    let synthetic = synthetic_names();
    // Sanity: the scan finds the obvious ones in both.
    for name in [
        "ibv_open_device",
        "ibv_wc_status",
        "IBV_WC_SUCCESS",
        "ibv_qp_attr",
    ] {
        assert!(
            real.contains(name),
            "the scan missed {name} in rdma-core's verbs.h"
        );
        assert!(ours.contains(name), "the scan missed {name} in ours");
    }
    let missing: Vec<&String> = real.difference(&ours).collect();
    let extra: Vec<&String> = ours
        .difference(&real)
        .filter(|n| !synthetic.contains(*n) && !SHIM_OWN.contains(&n.as_str()))
        .collect();
    let unused: Vec<&String> = synthetic.iter().filter(|n| !ours.contains(*n)).collect();
    let show = |v: &[&String]| v.iter().map(|s| s.as_str()).collect::<Vec<_>>().join(" ");
    assert!(
        missing.is_empty() && extra.is_empty() && unused.is_empty(),
        "include/infiniband/verbs.h and rdma-core's verbs.h define different identifiers \
         ({} in rdma-core's, {} in ours):\n\
         missing from ours ({}): {}\n\
         only in ours ({}): {}\n\
         mapped in tests/layout/anonymous.txt but not in ours ({}): {}",
        real.len(),
        ours.len(),
        missing.len(),
        show(&missing),
        extra.len(),
        show(&extra),
        unused.len(),
        show(&unused)
    );
}

/// Every function the header declares (rather than defines inline) is an
/// export of the shim, of the sim and (but for the shim's own) of rdma-core's
/// library: a program that calls it links and runs with any of the three.
#[test]
fn every_declared_function_is_exported() {
    let dir = scratch("exports");
    let include = root().join("include");
    let text = preprocessed(&dir, Some(&include), &[include.join("infiniband/verbs.h")]);
    let (_, declared) = scan(&text);
    for name in ["ibv_open_device", "ibv_wc_status_str", "_ibv_query_gid_ex"] {
        assert!(
            declared.contains(name),
            "the scan missed the prototype of {name}"
        );
    }
    assert!(
        !declared.contains("ibv_poll_cq"),
        "ibv_poll_cq is inline, not a prototype"
    );
    let mut problems = Vec::new();
    for (what, lib) in [
        ("the shim", shim_so()),
        ("the sim", sim_lib()),
        ("rdma-core", real_libibverbs()),
    ] {
        let exported: BTreeSet<String> = dynamic_symbols(&lib)
            .into_iter()
            .filter(|s| !s.undefined && s.default)
            .map(|s| s.name)
            .collect();
        for f in &declared {
            // The shim's own additions exist in the shim only.
            let expected = what == "the shim" || !SHIM_OWN.contains(&f.as_str());
            if expected && !exported.contains(f) {
                problems.push(format!(
                    "{f}: declared, but {what} ({}) does not export it",
                    lib.display()
                ));
            }
        }
    }
    assert!(
        problems.is_empty(),
        "{} problem(s):\n  {}",
        problems.len(),
        problems.join("\n  ")
    );
}

// ---------------------------------------------------------------------------
// Real programs, compiled against our header alone
// ---------------------------------------------------------------------------

/// Where scripts/deps.sh unpacks Debian's sources (`IBV_SHIM_SRC_CACHE`).
fn source_cache() -> PathBuf {
    if let Some(dir) = std::env::var_os("IBV_SHIM_SRC_CACHE") {
        return PathBuf::from(dir);
    }
    let base = std::env::var_os("XDG_CACHE_HOME")
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|h| Path::new(&h).join(".cache")))
        .expect("neither XDG_CACHE_HOME nor HOME is set");
    base.join("ibv-shim/src")
}

/// The test group that opts out of Debian 12's exact sources.
const SOURCES_GROUP: &str = "sources-debian12";

/// A source tree from the cache: `exact` (Debian 12's version, the one
/// this test is about) when scripts/deps.sh unpacked it. Without it the
/// test fails naming it, unless `IBV_SHIM_TEST_SKIP` names
/// `sources-debian12`: then the skip of the exact version is recorded
/// (counted and named in the suite's summary) and `stand_in` (the next
/// Debian release's version, which a mirror that dropped Debian 12's
/// tarballs still serves) is built in its place.
fn source(exact: &str, stand_in: &str) -> PathBuf {
    let cache = source_cache();
    let complete = |name: &str| {
        let dir = cache.join(name);
        dir.join(".complete").exists().then_some(dir)
    };
    if let Some(dir) = complete(exact) {
        return dir;
    }
    let why = format!(
        "{exact} is not in {} (`make deps` fetches it through the machine's apt sources)",
        cache.display()
    );
    let why = match complete(stand_in) {
        Some(_) => format!("{why}; building {stand_in} in its place"),
        None => format!("{why}; nor is {stand_in}, so nothing is built"),
    };
    let _ = require::<()>(SOURCES_GROUP, Err(why));
    complete(stand_in)
        .unwrap_or_else(|| panic!("neither {exact} nor {stand_in} is in {}", cache.display()))
}

/// perftest's `config.h`: what its configure script defines, decided by the
/// same kind of probe (one verbs.h feature each) compiled against the header
/// in use. Left out: the provider extensions (mlx5dv, efadv: not the verbs
/// header), relaxed ordering (`HAVE_RO` also needs libpci-dev), CUDA/ROCm.
const PERFTEST_PROBES: [(&str, &str); 12] = [
    (
        "HAVE_RAW_ETH_REG",
        "struct ibv_flow *f = ibv_create_flow(NULL, NULL); (void)f;",
    ),
    (
        "HAVE_XRCD",
        "struct ibv_xrcd *x = ibv_open_xrcd(NULL, NULL); (void)x;",
    ),
    (
        "HAVE_IBV_WR_API",
        "int x = IBV_QP_INIT_ATTR_SEND_OPS_FLAGS; (void)x;",
    ),
    (
        "HAVE_GID_TYPE_DECLARED",
        "int x = IBV_GID_TYPE_ROCE_V1; (void)x;",
    ),
    ("HAVE_IPV6", "int x = IBV_FLOW_SPEC_IPV6; (void)x;"),
    ("HAVE_IPV4_EXT", "int x = IBV_FLOW_SPEC_IPV4_EXT; (void)x;"),
    ("HAVE_SNIFFER", "int x = IBV_FLOW_ATTR_SNIFFER; (void)x;"),
    (
        "HAVE_EX",
        "struct ibv_device_attr_ex *a = NULL; int x = a ? (int)a->comp_mask : 0; (void)x;",
    ),
    ("HAVE_EX_ODP", "int x = IBV_ACCESS_ON_DEMAND; (void)x;"),
    (
        "HAVE_PACKET_PACING",
        "struct ibv_qp_attr *a = NULL; int x = a ? (int)a->rate_limit : 0; (void)x;",
    ),
    (
        "HAVE_OOO_ATTR",
        "int x = IBV_OOO_RW_DATA_PLACEMENT; (void)x;",
    ),
    ("HAVE_SCIF", "char *c = IBV_LINK_LAYER_SCIF; (void)c;"),
];

/// perftest's libperftest.a sources (Makefile.am, with raw Ethernet).
const PERFTEST_LIB: [&str; 6] = [
    "get_clock",
    "perftest_communication",
    "perftest_parameters",
    "perftest_resources",
    "perftest_counters",
    "raw_ethernet_resources",
];

/// perftest's programs: (binary, main source, extra source).
const PERFTEST_PROGRAMS: [(&str, &str, Option<&str>); 12] = [
    ("ib_send_bw", "send_bw", Some("multicast_resources")),
    ("ib_send_lat", "send_lat", Some("multicast_resources")),
    ("ib_write_bw", "write_bw", None),
    ("ib_write_lat", "write_lat", None),
    ("ib_read_bw", "read_bw", None),
    ("ib_read_lat", "read_lat", None),
    ("ib_atomic_bw", "atomic_bw", None),
    ("ib_atomic_lat", "atomic_lat", None),
    ("raw_ethernet_bw", "raw_ethernet_send_bw", None),
    ("raw_ethernet_lat", "raw_ethernet_send_lat", None),
    (
        "raw_ethernet_burst_lat",
        "raw_ethernet_send_burst_lat",
        None,
    ),
    ("raw_ethernet_fs_rate", "raw_ethernet_fs_rate", None),
];

/// rdma-core's examples that use public headers only: (binary, source).
const EXAMPLES: [&str; 5] = [
    "device_list",
    "uc_pingpong",
    "ud_pingpong",
    "srq_pingpong",
    "xsrq_pingpong",
];

fn quote(p: &Path) -> String {
    format!("'{}'", p.display())
}

/// A shell script that hides `/usr/include/infiniband` (a tmpfs holding only
/// the SA headers, copied in first) and then runs `body`, to be run under
/// `unshare -m` so that the machine's view stays as it is.
fn hidden_headers_script(body: &str) -> String {
    format!(
        "set -eu\n\
         keep=$(mktemp -d)\n\
         cp /usr/include/infiniband/sa.h /usr/include/infiniband/sa-kern-abi.h \"$keep\"/\n\
         mount -t tmpfs -o size=1m ibv-shim-hidden /usr/include/infiniband\n\
         cp \"$keep\"/* /usr/include/infiniband/\n\
         rm -r \"$keep\"\n\
         test ! -e /usr/include/infiniband/verbs.h\n\
         {body}"
    )
}

/// Runs a script in a private mount namespace; panics with its output if it fails.
fn run_hidden(dir: &Path, name: &str, body: &str) -> Output {
    let script = dir.join(format!("{name}.sh"));
    fs::write(&script, hidden_headers_script(body)).unwrap();
    let mut cmd = Command::new("unshare");
    cmd.arg("-m").arg("sh").arg(&script).stdin(Stdio::null());
    let out = run_unchecked(&mut cmd, Duration::from_secs(600));
    assert!(
        out.status.success(),
        "{name} failed against {} with /usr/include/infiniband hidden:\n{}",
        root().join("include/infiniband/verbs.h").display(),
        describe(&cmd, &out)
    );
    out
}

/// gcc flags every build here uses: our header first, a call to anything it
/// does not declare is an error, and libibverbs is the sim's.
fn cflags(extra_include: &[&Path]) -> String {
    let mut f = format!(
        "-O2 -g -Werror=implicit-function-declaration -I{}",
        quote(&root().join("include"))
    );
    for inc in extra_include {
        write!(f, " -I{}", quote(inc)).unwrap();
    }
    f
}

fn libs() -> String {
    format!("-L{} -l:libibverbs.so.1", quote(&sim_dir()))
}

/// Builds the examples into `out`; returns the shell commands.
fn examples_build(examples: &Path, out: &Path) -> String {
    let mut sh = String::new();
    let (cf, libs) = (cflags(&[out]), libs());
    // The examples include rdma-core's build-generated config.h; nothing in
    // them needs a definition from it.
    writeln!(sh, ": > {}", quote(&out.join("config.h"))).unwrap();
    for ex in EXAMPLES {
        let extra = if ex == "device_list" {
            String::new()
        } else {
            quote(&examples.join("pingpong.c"))
        };
        writeln!(
            sh,
            "gcc {cf} -o {} {} {extra} {libs}",
            quote(&out.join(ex)),
            quote(&examples.join(format!("{ex}.c")))
        )
        .unwrap();
    }
    sh
}

/// Decides perftest's config.h by compiling each probe against our header
/// (inside the namespace), then builds every program into `out`.
fn perftest_build(perftest: &Path, umad_dir: &Path, out: &Path) -> String {
    let src = perftest.join("src");
    let cf = format!(
        "{} -DHAVE_CONFIG_H -D_GNU_SOURCE -Wall",
        cflags(&[out, umad_dir])
    );
    let config = quote(&out.join("config.h"));
    let mut sh = String::new();
    // configure.ac's AC_INIT version, which the programs print.
    writeln!(sh, "echo '#define VERSION \"6.06\"' > {config}").unwrap();
    writeln!(sh, "echo '#define HAVE_ENDIAN 1' >> {config}").unwrap();
    for (i, (def, body)) in PERFTEST_PROBES.iter().enumerate() {
        let probe = out.join(format!("probe{i}.c"));
        writeln!(
            sh,
            "printf '%s\\n' '#include <infiniband/verbs.h>' 'int main(void) {{ {body} return 0; }}' > {p}\n\
             if gcc {cf} -o {p}.out {p} {libs} 2>/dev/null; then echo '#define {def} 1' >> {config}; fi",
            p = quote(&probe),
            libs = libs(),
        )
        .unwrap();
    }
    // configure: the raw Ethernet tests come with flow steering, the gid
    // type query with the new post-send API.
    writeln!(
        sh,
        "grep -q HAVE_RAW_ETH_REG {config} && echo '#define HAVE_RAW_ETH 1' >> {config}"
    )
    .unwrap();
    writeln!(
        sh,
        "grep -q HAVE_IBV_WR_API {config} && echo '#define HAVE_GID_TYPE 1' >> {config}"
    )
    .unwrap();
    let mut objs = String::new();
    // perftest 25 moved its memory back ends into files of their own.
    let backends = ["host_memory", "mmap_memory"]
        .into_iter()
        .filter(|f| src.join(format!("{f}.c")).exists());
    let lib_sources: Vec<&str> = PERFTEST_LIB.into_iter().chain(backends).collect();
    for lib in lib_sources {
        let obj = out.join(format!("{lib}.o"));
        writeln!(
            sh,
            "gcc {cf} -c -o {} {}",
            quote(&obj),
            quote(&src.join(format!("{lib}.c")))
        )
        .unwrap();
        write!(objs, " {}", quote(&obj)).unwrap();
    }
    let link = format!("-lrdmacm -l:libibumad.so.3 -lm -lpthread {}", libs());
    for (bin, main, extra) in PERFTEST_PROGRAMS {
        let extra = extra.map_or(String::new(), |e| quote(&src.join(format!("{e}.c"))));
        writeln!(
            sh,
            "gcc {cf} -o {} {} {extra}{objs} {link}",
            quote(&out.join(bin)),
            quote(&src.join(format!("{main}.c")))
        )
        .unwrap();
    }
    writeln!(sh, "cat {config}").unwrap();
    sh
}

fn on_sim(prog: &Path, fabric: &str) -> Command {
    let mut c = Command::new(prog);
    c.env("LD_LIBRARY_PATH", sim_dir())
        .env("IBV_SIM_FABRIC", fabric)
        .env("IBV_SIM_DEVICES", "mlx5_0")
        .env_remove("LD_PRELOAD")
        .stdin(Stdio::null());
    c
}

/// Runs `prog args -p PORT` as server and then as client of 127.0.0.1 on
/// one sim fabric; both must exit 0. Returns the client's output.
fn client_server(prog: &Path, args: &[&str]) -> String {
    let name = prog.file_name().unwrap().to_string_lossy().into_owned();
    let fab = fabric_name("hdr", &name);
    let _g = FabricGuard(fab.clone());
    let port = free_port();
    let p = port.to_string();
    let mut server = on_sim(prog, &fab);
    server.args(args).args(["-p", &p]);
    // The server runs (under run_unchecked's timeout) in a thread of its own.
    let server = std::thread::spawn(move || {
        let out = run_unchecked(&mut server, Duration::from_secs(180));
        (out.status.success(), describe(&server, &out))
    });
    let deadline = Instant::now() + Duration::from_secs(30);
    while !listening(port) {
        if server.is_finished() {
            let (_, text) = server.join().expect("server thread");
            panic!("{name} server exited before listening:\n{text}");
        }
        assert!(Instant::now() < deadline, "{name} server never listened");
        std::thread::sleep(Duration::from_millis(20));
    }
    let mut client = on_sim(prog, &fab);
    client.args(args).args(["-p", &p, "127.0.0.1"]);
    let c = run_unchecked(&mut client, Duration::from_secs(120));
    let (server_ok, server_text) = server.join().expect("server thread");
    assert!(
        c.status.success() && server_ok,
        "{name} {args:?} on the sim failed\nclient:\n{}\nserver:\n{server_text}",
        describe(&client, &c)
    );
    String::from_utf8_lossy(&c.stdout).into_owned() + &String::from_utf8_lossy(&c.stderr)
}

#[test]
fn rdma_core_examples_and_perftest_build_on_our_header_alone() {
    let rdma_core = source("rdma-core-44.0", "rdma-core-56.1");
    let perftest = source("perftest-4.5+0.17", "perftest-25.01.0+0.80");
    let dir = scratch("programs");
    let (ex_out, pt_out, umad) = (dir.join("examples"), dir.join("perftest"), dir.join("umad"));
    for d in [&ex_out, &pt_out, &umad.join("infiniband")] {
        let _ = fs::remove_dir_all(d);
        fs::create_dir_all(d).unwrap();
    }
    // perftest's multicast code includes <infiniband/umad.h> (libibumad-dev,
    // not installed): rdma-core's own copy from the same sources, linked to
    // the runtime library libibumad3.
    fs::copy(
        rdma_core.join("libibumad/umad.h"),
        umad.join("infiniband/umad.h"),
    )
    .unwrap();

    let examples = rdma_core.join("libibverbs/examples");
    run_hidden(&dir, "examples", &examples_build(&examples, &ex_out));
    let built = run_hidden(&dir, "perftest", &perftest_build(&perftest, &umad, &pt_out));
    let config = String::from_utf8_lossy(&built.stdout).into_owned();
    // Against rdma-core's header these verbs features are all there; so
    // they must be against ours (the others are absent from both).
    for def in [
        "HAVE_RAW_ETH",
        "HAVE_XRCD",
        "HAVE_IBV_WR_API",
        "HAVE_IPV6",
        "HAVE_IPV4_EXT",
        "HAVE_SNIFFER",
        "HAVE_EX",
        "HAVE_EX_ODP",
        "HAVE_PACKET_PACING",
    ] {
        assert!(
            config.contains(&format!("#define {def} 1")),
            "perftest's {def} probe fails against our header:\n{config}"
        );
    }

    // Run them on the sim.
    let listed = {
        let fab = fabric_name("hdr", "device_list");
        let _g = FabricGuard(fab.clone());
        let mut c = on_sim(&ex_out.join("device_list"), &fab);
        let out = run_unchecked(&mut c, Duration::from_secs(30));
        assert!(out.status.success(), "{}", describe(&c, &out));
        String::from_utf8_lossy(&out.stdout).into_owned()
    };
    assert!(listed.contains("mlx5_0"), "device_list:\n{listed}");
    for ex in ["uc_pingpong", "ud_pingpong", "srq_pingpong"] {
        let text = client_server(&ex_out.join(ex), &["-d", "mlx5_0", "-c", "-n", "100"]);
        assert!(text.contains("100 iters in"), "{ex}:\n{text}");
    }
    // The sim has XRC domains, SRQs and QPs: xsrq_pingpong runs too.
    let text = client_server(
        &ex_out.join("xsrq_pingpong"),
        &["-d", "mlx5_0", "-n", "100"],
    );
    assert!(text.contains("success"), "xsrq_pingpong:\n{text}");
    for prog in [
        "ib_send_bw",
        "ib_write_bw",
        "ib_read_bw",
        "ib_atomic_bw",
        "ib_send_lat",
        "ib_write_lat",
        "ib_read_lat",
        "ib_atomic_lat",
    ] {
        let text = client_server(&pt_out.join(prog), &["-d", "mlx5_0", "-n", "200"]);
        assert!(
            text.contains("#bytes"),
            "{prog} printed no results:\n{text}"
        );
    }
}
