//! The text log's writer thread: debug and trace lines are
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

/// The log queue's capacity in 64-byte slots (`src/log_queue.rs`); a
/// trace line of asynclog.c (about 108 bytes) takes two. A full queue
/// waits 100 ms for the writer thread, then drops lines by design, and a
/// loaded machine may leave the writer unscheduled that long: so each
/// test's lines fit in the queue (at most `LINES_THAT_FIT` queued at any
/// time, whatever the writer does), and a line lost, doubled or out of
/// order is the shim's fault, never the machine's.
const QUEUE_SLOTS: u64 = 16384;
const LINES_THAT_FIT: u64 = QUEUE_SLOTS / 2;

/// The log's lines (each must be well formed: none torn or interleaved),
/// with no line dropped: the tests' lines fit in the queue.
fn lines(log: &Path) -> Vec<LogLine> {
    let text = std::fs::read_to_string(log).unwrap_or_else(|e| panic!("{}: {e}", log.display()));
    if let Some(drop) = text.lines().find(|l| l.contains("lines dropped")) {
        panic!("lines were dropped though they fit in the queue: {drop}");
    }
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
    // 8 x 900 = 7,200 lines: as many as fit, with room to spare.
    let n = 900;
    assert!(8 * n < LINES_THAT_FIT);
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
    assert!(n < LINES_THAT_FIT);
    run_ok(&mut cmd(&log, &["exit-thread", &n.to_string()]));
    let tags = by_tag(&lines(&log));
    assert_all_in_order("the exiting thread", &tags[&1].0, n);
}

#[test]
fn a_forked_child_logs_its_own_lines_in_order_with_its_parents() {
    let dir = TempDir::new("asynclog-fork");
    let log = dir.join("log");
    let n = 2000;
    // The parent queues tags 1 and 3, the child tag 2 in its own queue.
    assert!(2 * n < LINES_THAT_FIT);
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

/// `asynclog ARGS` on ibv-sim's `devices` under the shim, the debug log
/// to `log`.
fn on_sim(log: &Path, devices: &str, args: &[&str]) -> Command {
    let mut cmd = Command::new(prog());
    cmd.args(args)
        .env("LD_LIBRARY_PATH", sim_dir())
        .env_remove("IBV_SHIM_LOG_SYNC")
        .env_remove("IBV_SHIM_LIBRARY")
        .env_remove("IBV_SHIM_TRACE")
        .env("IBV_SIM_DEVICES", devices)
        .env("IBV_SHIM_LOG", "debug")
        .env("IBV_SHIM_LOG_FILE", log);
    preload_shim(&mut cmd);
    cmd
}

/// A debug line is made from the call's words by the writer thread, later:
/// the names in it are the ones the call saw, copied at call time, not
/// what the device's memory holds when the line is formatted (the program
/// overwrites every name right after its calls). A list longer than its
/// record's six device slots shows the first six and `...`. With
/// `IBV_SHIM_LOG_SYNC=1` the calling thread formats the same lines.
#[test]
fn lines_show_the_names_the_calls_saw_and_a_long_list_is_cut_and_marked() {
    for sync in ["0", "1"] {
        names_the_calls_saw(sync);
    }
}

fn names_the_calls_saw(sync: &str) {
    let dir = TempDir::new("asynclog-rename");
    let log = dir.join("log");
    let names = [
        "mlx5_0", "mlx5_1", "rxe0", "mlx4_0", "mlx5_2", "mlx5_3", "mlx5_4", "mlx5_5",
    ];
    run_ok(on_sim(&log, &names.join(","), &["rename", "0"]).env("IBV_SHIM_LOG_SYNC", sync));
    let log = lines(&log);
    let text = show_log(&log);
    assert!(
        !text.contains("gone"),
        "a name read after the call:\n{text}"
    );
    let list = log
        .iter()
        .find(|l| l.message.starts_with("ibv_get_device_list("))
        .unwrap_or_else(|| panic!("no list line\n{text}"));
    let shown = list.message.split(" [8 devices: ").nth(1).unwrap_or("");
    for (i, name) in names.iter().enumerate() {
        assert_eq!(
            shown.contains(&format!(" {name}/")),
            i < 6,
            "device {i} ({name}) in the list line: {}",
            list.message
        );
    }
    assert!(
        shown.contains("[NVIDIA/Mellanox], ...] ["),
        "a cut list is marked: {}",
        list.message
    );
    for name in names {
        assert!(
            log.iter()
                .any(|l| l.message.starts_with("ibv_get_device_name(")
                    && l.message.contains(&format!(" {name}/"))
                    && l.message.contains(&format!(") = \"{name}\" ["))),
            "no ibv_get_device_name line for {name}:\n{text}"
        );
    }
}

/// Instructions (callgrind, `--separate-threads`) that the debug log adds
/// to the thread making `ibv_get_device_name` calls, per call: the call's
/// words queued, no text (370 measured; 439 with the entry's buffer
/// zeroed and the payload made by a walk over the verb's descriptor; the
/// line formatted on the calling thread, as before the binary
/// entries, cost about 4,000 more). With `IBV_SHIM_LOG_SYNC=1` the calling
/// thread formats its lines itself: the same measurement must see that,
/// or it measures nothing.
#[test]
fn the_calling_thread_formats_no_debug_line() {
    let dir = TempDir::new("asynclog-cost");
    let count = |calls: u64, shim: bool, sync: bool| -> u64 {
        let log = dir.join("log");
        let out = dir.join(format!("cg.{calls}.{shim}.{sync}"));
        let cmd = on_sim(&log, "mlx5_0", &["names", &calls.to_string()]);
        let mut vg = Command::new("valgrind");
        vg.args(["--tool=callgrind", "--separate-threads=yes"])
            .arg(format!("--callgrind-out-file={}", out.display()))
            .arg(cmd.get_program())
            .args(cmd.get_args());
        for (k, v) in cmd.get_envs() {
            match v {
                Some(v) if shim || k != "LD_PRELOAD" => {
                    vg.env(k, v);
                }
                _ => {
                    vg.env_remove(k);
                }
            }
        }
        if sync {
            vg.env("IBV_SHIM_LOG_SYNC", "1");
        }
        run_ok(&mut vg);
        if shim {
            let n = lines(&log)
                .iter()
                .filter(|l| l.message.starts_with("ibv_get_device_name("))
                .count();
            assert_eq!(n as u64, calls, "lines logged under callgrind");
        }
        let _ = std::fs::remove_file(&log);
        // Thread 2: the program's second thread, the one making the calls
        // (the shim's writer thread, started by its first line, is 3).
        let file = format!("{}-02", out.display());
        let text = std::fs::read_to_string(&file).unwrap_or_else(|e| panic!("{file}: {e}"));
        text.lines()
            .find_map(|l| l.strip_prefix("totals: "))
            .and_then(|v| v.trim().parse().ok())
            .unwrap_or_else(|| panic!("no totals in {file}"))
    };
    let (short, long) = (1_000u64, 3_000u64);
    let per_call = |shim, sync| {
        (count(long, shim, sync) as f64 - count(short, shim, sync) as f64) / (long - short) as f64
    };
    let direct = per_call(false, false);
    let added = per_call(true, false) - direct;
    let sync = per_call(true, true) - direct;
    eprintln!("the debug log adds {added:.0} instructions per call to the calling thread ({sync:.0} formatting there)");
    assert!(
        added <= 382.0,
        "the debug log adds {added:.0} instructions per ibv_get_device_name to the calling thread"
    );
    assert!(
        sync > 2.0 * 800.0,
        "IBV_SHIM_LOG_SYNC=1 (lines formatted on the calling thread) measured {sync:.0}: the measurement sees nothing"
    );
}
