//! The text log's writer thread (issue 11): debug and trace lines are
//! formatted on the calling thread and written by the shim's writer thread
//! in batches; warnings, errors and reports stay synchronous, after the
//! queued lines.
//!
//! `tests/c/asynclog/asynclog.c` logs `ibv_rate_to_mult(TAG << 20 | i)` at
//! `IBV_SHIM_LOG=trace` (a forwarded call, logged with its raw first
//! argument) on the real rdma-core libibverbs, so each line names its
//! sender and its place in that sender's sequence: a lost, doubled,
//! reordered or torn line is seen. The program wraps `write(2)` (linked
//! `-rdynamic`) to count the writes each of its threads makes.
//!
//! Needs gcc, libibverbs-dev and a built shim and sim (`make build`).

mod common;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use common::*;

fn prog() -> PathBuf {
    let src = repo_dir().join("tests/c/asynclog/asynclog.c");
    cc(
        "asynclog",
        &[&src],
        &["-O2", "-pthread", "-rdynamic", "-libverbs"],
    )
}

/// `asynclog ARGS` under the shim at trace level, logging to `log`.
fn cmd(log: &Path, args: &[&str]) -> Command {
    let mut cmd = Command::new(prog());
    cmd.args(args)
        .env_remove("LD_LIBRARY_PATH")
        .env_remove("IBV_SHIM_LOG_SYNC")
        .env_remove("IBV_SHIM_LIBRARY")
        .env("IBV_SHIM_LOG", "trace")
        .env("IBV_SHIM_LOG_FILE", log);
    preload_shim(&mut cmd);
    cmd
}

fn run_ok(cmd: &mut Command) -> Output {
    let out = run(cmd);
    assert!(out.status.success(), "{}", describe(cmd, &out));
    out
}

/// The log's lines (each must be well formed: none torn or interleaved).
fn lines(log: &Path) -> Vec<LogLine> {
    let text = std::fs::read_to_string(log).unwrap_or_else(|e| panic!("{}: {e}", log.display()));
    parse_log(&log.display().to_string(), &text)
}

/// A call line's (tag, index), from `ibv_rate_to_mult(0x..., ...)`.
fn call(l: &LogLine) -> Option<(u64, u64)> {
    let arg = l.message.strip_prefix("ibv_rate_to_mult(0x")?;
    let v = u64::from_str_radix(arg.split(',').next()?, 16).ok()?;
    Some((v >> 20, v & 0xfffff))
}

/// A tag's indices in log order, and the (pid, tid)s that logged them.
type Sent = (Vec<u64>, Vec<(u32, u32)>);

/// Each tag's lines.
fn by_tag(log: &[LogLine]) -> BTreeMap<u64, Sent> {
    let mut out: BTreeMap<u64, Sent> = BTreeMap::new();
    for l in log {
        if let Some((tag, i)) = call(l) {
            let e = out.entry(tag).or_default();
            e.0.push(i);
            if !e.1.contains(&(l.pid, l.tid)) {
                e.1.push((l.pid, l.tid));
            }
        }
    }
    out
}

/// Every index 0..n exactly once, in order.
fn assert_all_in_order(what: &str, got: &[u64], n: u64) {
    let want: Vec<u64> = (0..n).collect();
    if got != want.as_slice() {
        let first_bad = got
            .iter()
            .zip(&want)
            .position(|(a, b)| a != b)
            .unwrap_or(got.len().min(want.len()));
        panic!(
            "{what}: {} lines, want {n} in order; first difference at {first_bad}: {:?}",
            got.len(),
            &got[first_bad.saturating_sub(2)..(first_bad + 3).min(got.len())]
        );
    }
}

#[test]
fn eight_threads_lines_all_there_once_in_order_and_not_written_by_the_callers() {
    let dir = TempDir::new("asynclog-threads");
    let log = dir.join("log");
    let n = 3000;
    let out = run_ok(&mut cmd(&log, &["threads", "8", &n.to_string()]));
    let log = lines(&log);
    let tags = by_tag(&log);
    assert_eq!(tags.len(), 8, "{}", show_log(&log[..log.len().min(20)]));
    for (tag, (idx, who)) in &tags {
        assert_all_in_order(&format!("thread {tag}"), idx, n);
        assert_eq!(
            who.len(),
            1,
            "thread {tag}'s lines name one thread: {who:?}"
        );
    }
    // The callers hand their lines over: at most one write(2) of their own
    // (the synchronous info line of the first forwarded call).
    let text = stdout(&out);
    let writes: Vec<u64> = text
        .lines()
        .filter_map(|l| l.strip_prefix("writes "))
        .map(|l| l.split(' ').nth(1).unwrap().parse().unwrap())
        .collect();
    assert_eq!(writes.len(), 8, "{text}");
    assert!(
        writes.iter().all(|&w| w <= 1),
        "the calling threads wrote their own lines: write(2) calls per thread {writes:?} for {n} lines each"
    );
}

#[test]
fn with_log_sync_the_callers_write_their_own_lines() {
    let dir = TempDir::new("asynclog-sync");
    let log = dir.join("log");
    let n = 200;
    let out = run_ok(cmd(&log, &["threads", "2", &n.to_string()]).env("IBV_SHIM_LOG_SYNC", "1"));
    let tags = by_tag(&lines(&log));
    for (tag, (idx, _)) in &tags {
        assert_all_in_order(&format!("thread {tag}"), idx, n);
    }
    let text = stdout(&out);
    for l in text.lines().filter_map(|l| l.strip_prefix("writes ")) {
        let w: u64 = l.split(' ').nth(1).unwrap().parse().unwrap();
        assert!(
            w >= n,
            "IBV_SHIM_LOG_SYNC=1: a thread made {w} writes for {n} lines\n{text}"
        );
    }
}

#[test]
fn exit_from_a_second_thread_writes_every_queued_line() {
    let dir = TempDir::new("asynclog-exit");
    let log = dir.join("log");
    let n = 5000;
    run_ok(&mut cmd(&log, &["exit-thread", &n.to_string()]));
    let tags = by_tag(&lines(&log));
    assert_all_in_order("the exiting thread", &tags[&1].0, n);
}

#[test]
fn a_forked_child_logs_its_own_lines_in_order_with_its_parents() {
    let dir = TempDir::new("asynclog-fork");
    let log = dir.join("log");
    let n = 2000;
    let out = run_ok(&mut cmd(&log, &["fork", &n.to_string()]));
    assert_eq!(stdout(&out), "child 0\n");
    let log = lines(&log);
    let tags = by_tag(&log);
    for tag in 1..=3 {
        assert_all_in_order(&format!("tag {tag}"), &tags[&tag].0, n);
    }
    let parent = tags[&1].1[0].0;
    assert_eq!(tags[&3].1[0].0, parent);
    let child = &tags[&2].1;
    assert!(
        child.len() == 1 && child[0].0 != parent,
        "the child's lines carry its own pid: {child:?} (parent {parent})"
    );
    // Before the fork, the parent's queue is written (prepare handler):
    // the child's first line, a warning, follows every line of tag 1; the
    // child's lines are out (by its own writer thread: it leaves with
    // `_exit`) before the parent goes on.
    let warn = log
        .iter()
        .position(|l| l.level == "WARN" && l.pid == child[0].0)
        .unwrap_or_else(|| panic!("no warning from the child\n{}", show_log(&log)));
    let seq: Vec<u64> = log.iter().filter_map(call).map(|(t, _)| t).collect();
    let mut sorted = seq.clone();
    sorted.sort();
    assert!(
        seq == sorted,
        "the parent's and the child's lines are out of order"
    );
    assert!(
        log[warn..].iter().filter_map(call).all(|(t, _)| t > 1),
        "lines the parent logged before the fork come after the child's first line"
    );
}

#[test]
fn a_warning_follows_the_debug_lines_logged_before_it() {
    let dir = TempDir::new("asynclog-warn");
    let log = dir.join("log");
    let n = 3000;
    run_ok(&mut cmd(&log, &["warn", &n.to_string()]));
    let log = lines(&log);
    let warn = log
        .iter()
        .position(|l| l.level == "WARN" && l.message.contains("ibv_close_device(context=NULL)"))
        .unwrap_or_else(|| panic!("no warning\n{}", show_log(&log)));
    let before: Vec<u64> = log[..warn]
        .iter()
        .filter_map(call)
        .map(|(_, i)| i)
        .collect();
    assert_all_in_order("lines before the warning", &before, n);
}

#[test]
fn a_descriptor_the_program_reuses_for_its_own_file_gets_no_shim_line() {
    let dir = TempDir::new("asynclog-reuse");
    let log = dir.join("log");
    let own = dir.join("own.txt");
    let n = 3000;
    let out = run_ok(&mut cmd(
        &log,
        &["reuse", &n.to_string(), own.to_str().unwrap()],
    ));
    assert!(stdout(&out).starts_with("fd "), "{}", stdout(&out));
    assert_eq!(
        std::fs::read_to_string(&own).unwrap(),
        "the program's own line\n",
        "the shim wrote into the program's file"
    );
    // The log file is reopened by its path and keeps every line.
    let tags = by_tag(&lines(&log));
    assert_all_in_order("before the close", &tags[&1].0, n);
    assert_all_in_order("after the close", &tags[&2].0, n);
}

/// `ibv_close_device`'s own line is written before the close returns: a
/// program that leaves by `_exit` right after (no exit handlers) keeps it
/// (`tests/c/asynclog/close_exit.c`, on the sim).
#[test]
fn the_close_line_survives_an_exit_right_after_the_close() {
    let dir = TempDir::new("asynclog-close-exit");
    let log = dir.join("log");
    let src = repo_dir().join("tests/c/asynclog/close_exit.c");
    let prog = cc("close_exit", &[&src], &["-O2", "-libverbs"]);
    let fabric = FabricGuard(fabric_name("asynclog", "close-exit"));
    let mut cmd = Command::new(prog);
    cmd.env("LD_LIBRARY_PATH", sim_dir())
        .env_remove("IBV_SHIM_LOG_SYNC")
        .env_remove("IBV_SHIM_LIBRARY")
        .env("IBV_SIM_FABRIC", &fabric.0)
        .env("IBV_SHIM_LOG", "debug")
        .env("IBV_SHIM_LOG_FILE", &log);
    preload_shim(&mut cmd);
    run_ok(&mut cmd);
    let log = lines(&log);
    assert!(
        log.iter()
            .any(|l| l.level == "DEBUG" && l.message.starts_with("ibv_close_device(")),
        "the close's line is lost:\n{}",
        show_log(&log)
    );
}
