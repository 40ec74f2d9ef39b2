//! The generated `include/infiniband/verbs.h` is a complete stand-in for
//! rdma-core 44's: it defines the same identifiers, and real programs written
//! against rdma-core's header compile against it alone and run.
//!
//! - `same_identifiers_as_real_verbs_h`: every macro, struct/union/enum tag,
//!   enum constant and function that rdma-core's `verbs.h` (with the
//!   `verbs_api.h` it includes) defines after preprocessing, and nothing else
//!   (the synthetic names of tests/layout/anonymous.txt excepted). Values,
//!   layouts and prototypes are tests/layout.rs's business.
//!
//! Run: `cargo test --release --test header_complete`. Needs gcc and
//! libibverbs-dev (`make deps`).

use std::collections::BTreeSet;
use std::fs;
use std::path::{Path, PathBuf};
use std::process::Command;

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
    let mut names = BTreeSet::new();
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
            "{" => depth += 1,
            "}" => {
                depth = depth.saturating_sub(1);
                if depth == 0 && parens == 0 {
                    named = false;
                }
            }
            "(" => parens += 1,
            ")" => parens = parens.saturating_sub(1),
            ";" if depth == 0 && parens == 0 => named = false,
            _ if depth == 0
                && parens == 0
                && !named
                && next == "("
                && is_ident(t)
                && !NOT_NAMES.contains(&t) =>
            {
                names.insert(t.to_string());
                named = true;
            }
            _ => {}
        }
        i += 1;
    }
    names
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
