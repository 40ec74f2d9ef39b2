//! Out of memory, the shim never aborts the host process.
//!
//! `tests/c/oom/tight.c` sets up (a device list, a context, optionally a
//! PD it leaks), then limits its address space (`RLIMIT_AS`) to what it
//! has and takes every byte malloc can still give; then it closes the
//! context and returns 5 from `main`. The shim's close and exit paths run
//! with no memory left: the close must still be forwarded, the process
//! must exit with its own status, and the report must degrade ("report
//! truncated: out of memory") instead of aborting ("memory allocation of
//! N bytes failed"). The real library is `tests/c/oom/static_verbs.c`, a
//! stand-in that itself never allocates, so only the shim is under test.

mod common;

use common::*;
use serde_json::Value;
use std::path::PathBuf;
use std::process::{Command, Output};

fn static_verbs() -> PathBuf {
    let dir = repo_dir().join("tests/c/oom");
    let script = format!(
        "-Wl,--version-script={}",
        dir.join("static_verbs.map").display()
    );
    // The map is an input too: in the arguments, so the cache sees it.
    let map_hash = format!(
        "-DMAP_LEN={}",
        std::fs::read(dir.join("static_verbs.map")).unwrap().len()
    );
    cc(
        "static_verbs",
        &[&dir.join("static_verbs.c")],
        &["-shared", "-fPIC", &script, &map_hash],
    )
}

fn tight() -> PathBuf {
    cc(
        "tight",
        &[&repo_dir().join("tests/c/oom/tight.c")],
        &["-libverbs"],
    )
}

/// Runs `tight ARGS` with the shim preloaded over the static library;
/// returns its output and its JSON report, if it wrote one.
fn run_tight(args: &[&str], env: &[(&str, &str)]) -> (String, Output, Option<Value>) {
    let dir = TempDir::new("oom");
    let report = dir.join("r.json");
    let mut cmd = Command::new(tight());
    cmd.args(args);
    for v in [
        "LD_LIBRARY_PATH",
        "IBV_SHIM_LOG",
        "IBV_SHIM_LOG_FILE",
        "IBV_SHIM_LEAK_EXITCODE",
        "IBV_SHIM_SUPPRESS",
        "IBV_SHIM_BACKTRACE",
        "IBV_SHIM_STATUS_DIR",
    ] {
        cmd.env_remove(v);
    }
    cmd.env("LD_PRELOAD", shim_so())
        .env("IBV_SHIM_LIBRARY", static_verbs())
        .env("IBV_SHIM_REPORT", &report)
        .envs(env.iter().copied());
    // `run` panics on a death by signal: the abort this is about.
    let out = run(&mut cmd);
    let json = std::fs::read(&report)
        .ok()
        .map(|b| serde_json::from_slice(&b).expect("the report is valid JSON"));
    (describe(&cmd, &out), out, json)
}

#[test]
fn closing_a_clean_context_and_returning_from_main_out_of_memory_do_not_abort() {
    let (context, out, report) = run_tight(&[], &[]);
    assert_eq!(out.status.code(), Some(5), "its own status: {context}");
    assert_eq!(stdout(&out), "no memory\nclosed 0\n", "{context}");
    let err = stderr(&out);
    assert!(!err.contains("memory allocation of"), "{context}");
    let report = report.expect("a report, even out of memory");
    assert_eq!(report["leaked"], false, "{report}");
}

#[test]
fn a_leak_found_out_of_memory_is_reported_truncated() {
    let (context, out, report) = run_tight(&["leak"], &[]);
    assert_eq!(out.status.code(), Some(5), "its own status: {context}");
    assert_eq!(stdout(&out), "no memory\nclosed 0\n", "{context}");
    let err = stderr(&out);
    assert!(!err.contains("memory allocation of"), "{context}");
    assert!(
        err.lines()
            .any(|l| l.contains("leak: ibv_close_device(") && l.contains("(1 pd)")),
        "the close still says what leaked: {context}"
    );
    assert!(
        err.lines()
            .any(|l| l.ends_with(" WARN report truncated: out of memory")),
        "{context}"
    );
    let report = report.expect("a report, even out of memory");
    assert_eq!(report["leaked"], true, "{report}");
    assert_eq!(report["totals"]["pd"], 1, "{report}");
    assert_eq!(report["truncated"], "out of memory", "{report}");

    // And the leak exit code still applies.
    let (context, out, _) = run_tight(&["leak"], &[("IBV_SHIM_LEAK_EXITCODE", "23")]);
    assert_eq!(out.status.code(), Some(23), "{context}");
}

#[test]
fn objects_created_with_no_memory_left_make_the_report_incomplete() {
    // 250,000 PDs after memory ran out: more than the emergency reserve
    // can track. Each is still created (the call is forwarded), errno left
    // as the library left it (the registry's failed growth keeps it); the ones
    // the registry could not record are counted, and the reports say they
    // are incomplete instead of claiming a full list.
    let (context, out, report) = run_tight(&["many"], &[]);
    assert_eq!(out.status.code(), Some(5), "its own status: {context}");
    assert_eq!(stdout(&out), "no memory\nclosed 0\n", "{context}");
    let err = stderr(&out);
    assert!(!err.contains("memory allocation of"), "{context}");
    assert!(
        err.lines().any(|l| l.contains(" WARN report incomplete: ")
            && l.ends_with("created while memory ran out and never tracked")),
        "{context}"
    );
    let report = report.expect("a report, even out of memory");
    assert_eq!(report["truncated"], "out of memory", "{report}");
    // Nor does the close read as clean.
    assert!(
        err.lines()
            .any(|l| l.contains(" WARN ibv_close_device(") && l.contains("): report incomplete: ")),
        "{context}"
    );
}
