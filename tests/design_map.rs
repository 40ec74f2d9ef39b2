//! DESIGN.md is the map of the code: every source file of every crate is
//! placed on it, so a newcomer finds where a concern lives. A crate's
//! files are looked for in its scope: the `##` section whose heading
//! names the crate's `src/` directory, or the table row whose first cell
//! does. Within it, a file is placed by its path under `src/` in
//! backquotes, or by its path below one of its directories on a row whose
//! first cell names that directory. Fails on a file the map does not
//! place and on a crate it has no scope for.

use std::path::Path;
use std::process::Command;

fn root() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

/// Every tracked file under a crate's `src/`, as (crate dir, path under src).
fn sources() -> Vec<(String, String)> {
    let out = Command::new("git")
        .arg("ls-files")
        .current_dir(root())
        .output()
        .expect("git ls-files (git is needed to list the tracked sources)");
    assert!(out.status.success(), "git ls-files failed");
    String::from_utf8(out.stdout)
        .expect("file names are UTF-8")
        .lines()
        .filter_map(|f| {
            let (krate, rel) = match f.strip_prefix("src/") {
                Some(rel) => ("", rel),
                None => {
                    let rest = f.strip_prefix("crates/")?;
                    let (name, rest) = rest.split_once('/')?;
                    (name, rest.strip_prefix("src/")?)
                }
            };
            let krate = if krate.is_empty() {
                String::new()
            } else {
                format!("crates/{krate}")
            };
            Some((krate, rel.to_string()))
        })
        .collect()
}

/// The lines of DESIGN.md that are `krate`'s scope: a section whose
/// heading names `<krate>/src/` (`src/` for the root crate), or the rows
/// whose first cell does.
fn scope<'a>(design: &'a str, krate: &str) -> Vec<&'a str> {
    let dir = if krate.is_empty() {
        "`src/`".to_string()
    } else {
        format!("`{krate}/src/`")
    };
    let mut out = Vec::new();
    let mut inside = false;
    for line in design.lines() {
        if let Some(h) = line.strip_prefix("## ") {
            inside = h.contains(&dir);
            continue;
        }
        if inside || first_cell(line).is_some_and(|c| c.contains(&dir)) {
            out.push(line);
        }
    }
    out
}

fn first_cell(line: &str) -> Option<&str> {
    let rest = line.strip_prefix('|')?;
    Some(rest.split('|').next().unwrap_or(""))
}

/// Whether `rel` is placed in `lines`: named whole, or, on a row whose
/// first cell names one of its directories (`a/`, `a/b/`), named by its
/// path below that directory.
fn placed(lines: &[&str], rel: &str) -> bool {
    let whole = format!("`{rel}`");
    lines.iter().any(|l| {
        if l.contains(&whole) {
            return true;
        }
        let Some(cell) = first_cell(l) else {
            return false;
        };
        rel.match_indices('/').any(|(at, _)| {
            let (dir, below) = rel.split_at(at + 1);
            cell.contains(dir) && l.contains(&format!("`{below}`"))
        })
    })
}

#[test]
fn every_source_file_is_placed_on_the_design_map() {
    let design = std::fs::read_to_string(root().join("DESIGN.md")).expect("DESIGN.md");
    let mut missing = Vec::new();
    for (krate, rel) in sources() {
        let lines = scope(&design, &krate);
        let shown = if krate.is_empty() { "." } else { &krate };
        if lines.is_empty() {
            missing.push(format!("{shown}: no section or row names its src/"));
        } else if !placed(&lines, &rel) {
            missing.push(format!("{shown}/src/{rel}"));
        }
    }
    missing.dedup();
    assert!(
        missing.is_empty(),
        "DESIGN.md does not place these files (name each on its crate's map):\n  {}",
        missing.join("\n  ")
    );
}

#[test]
fn the_rule_finds_a_file_by_path_or_by_name_under_its_directory() {
    let rows = [
        "| `fabric/` | the segment: `ring.rs`, `wire.rs` |",
        "| `lib.rs`, `guard.rs` | roots |",
    ];
    assert!(placed(&rows, "fabric/ring.rs"));
    assert!(placed(&rows, "guard.rs"));
    assert!(!placed(&rows, "fabric/attach.rs"));
    assert!(!placed(&rows, "qp/ring.rs"));
    let nested = ["| `ext/` | `qp.rs`, `qp/builders.rs` |"];
    assert!(placed(&nested, "ext/qp/builders.rs"));
    assert!(!placed(&nested, "ext/cq/builders.rs"));
}
