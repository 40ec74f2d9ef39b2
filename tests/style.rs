//! Comments and docs say what the code does and why, not which numbered
//! work item or work session asked for it: the list those numbers name
//! is not in the repository, so a reader cannot follow them. Fails on any
//! such citation in the sources, tests, benchmarks, scripts and docs.

use std::path::{Path, PathBuf};

/// Where citations are looked for, from the repository's root.
const SCANNED: &[&str] = &[
    "src",
    "crates",
    "tests",
    "bench",
    "scripts",
    "docs",
    "man",
    "DESIGN.md",
    "README.md",
    "BENCHMARKS.md",
];

/// The citation in `line`, if any: the word for a filed work item, plural
/// or not, then an optional space and `#`, then a digit; a work session's
/// word, a space, a digit; or that list by name.
fn citation(line: &str) -> Option<&'static str> {
    let lower = line.to_ascii_lowercase();
    let numbered = |word: &str, plural: bool| {
        lower.match_indices(word).any(|(at, w)| {
            let mut rest = &lower.as_bytes()[at + w.len()..];
            let before = lower.as_bytes()[..at].last();
            if before.is_some_and(|b| b.is_ascii_alphanumeric()) {
                return false;
            }
            if plural && rest.first() == Some(&b's') {
                rest = &rest[1..];
            }
            if rest.first() == Some(&b' ') {
                rest = &rest[1..];
            }
            if plural && rest.first() == Some(&b'#') {
                rest = &rest[1..];
            }
            rest.first().is_some_and(u8::is_ascii_digit)
        })
    };
    if numbered("issue", true) {
        return Some("a numbered work item");
    }
    if numbered("session ", false) {
        return Some("a numbered work session");
    }
    if lower.contains(concat!("the track", "er")) {
        return Some("the list of work items");
    }
    None
}

fn files(path: &Path, out: &mut Vec<PathBuf>) {
    if path.is_dir() {
        if path
            .file_name()
            .is_some_and(|n| n == "target" || n == ".git")
        {
            return;
        }
        let mut entries: Vec<_> = std::fs::read_dir(path)
            .unwrap_or_else(|e| panic!("{}: {e}", path.display()))
            .map(|e| e.expect("a directory entry").path())
            .collect();
        entries.sort();
        for e in entries {
            files(&e, out);
        }
    } else if path.is_file() {
        out.push(path.to_path_buf());
    }
}

#[test]
fn no_comment_or_doc_cites_a_numbered_work_item_or_session() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut all = Vec::new();
    for p in SCANNED {
        let p = root.join(p);
        assert!(p.exists(), "{} is missing", p.display());
        files(&p, &mut all);
    }
    assert!(all.len() > 100, "only {} files found", all.len());
    let mut found = Vec::new();
    for f in &all {
        let bytes = std::fs::read(f).unwrap_or_else(|e| panic!("{}: {e}", f.display()));
        // Binary files (a committed ABI snapshot, images) hold no prose.
        if bytes.contains(&0) {
            continue;
        }
        let text = String::from_utf8_lossy(&bytes);
        for (n, line) in text.lines().enumerate() {
            if let Some(what) = citation(line) {
                let at = f.strip_prefix(root).unwrap_or(f).display();
                found.push(format!("{at}:{}: {what}: {}", n + 1, line.trim()));
            }
        }
    }
    assert!(
        found.is_empty(),
        "say what the code does and why instead of citing:\n{}",
        found.join("\n")
    );
}

#[test]
fn the_matcher_finds_each_form_and_spares_plain_words() {
    let cites = [
        concat!("(iss", "ue 12)"),
        concat!("Iss", "ue 9: trustworthy"),
        concat!("the budgets of iss", "ues 5 and 11"),
        concat!("see iss", "ue #27"),
        concat!("fails on the shim of sess", "ion 19"),
        concat!("an item of the track", "er"),
    ];
    for c in cites {
        assert!(citation(c).is_some(), "{c:?} is not found");
    }
    for plain in [
        "an issue with the lock",
        "issues a FUTEX_WAKE",
        "the session's 2 cores",
        "sweep run 5/5: ibv_create_cq #1",
        "tissue 5",
    ] {
        assert_eq!(citation(plain), None, "{plain:?}");
    }
}

/// Crate roots that deny an unsafe operation outside an `unsafe` block
/// (also in an `unsafe fn`) and an `unsafe` block without its `SAFETY:`
/// line, so that `make lint` (clippy, `-D warnings`) fails on either.
const DENYING_UNSAFE: &[&str] = &[
    "crates/launcher/src/main.rs",
    "crates/vm/src/lib.rs",
    "crates/abi-build/src/lib.rs",
    "crates/abi-build/src/main.rs",
    "crates/fork-lock/src/lib.rs",
    "crates/fault-rules/src/lib.rs",
];

#[test]
fn crate_roots_deny_unsafe_without_a_block_or_a_safety_line() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    for f in DENYING_UNSAFE {
        let text = std::fs::read_to_string(root.join(f)).unwrap_or_else(|e| panic!("{f}: {e}"));
        let denied = text
            .lines()
            .filter(|l| l.starts_with("#![deny("))
            .collect::<String>();
        for lint in [
            "unsafe_op_in_unsafe_fn",
            "clippy::undocumented_unsafe_blocks",
        ] {
            assert!(denied.contains(lint), "{f} does not deny {lint}");
        }
    }
}
