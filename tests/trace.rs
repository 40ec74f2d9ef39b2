//! Binary tracing (`IBV_SHIM_TRACE`): records survive every way a process
//! ends, the decoder (`ibv-shim trace`) gives text, Chrome JSON and
//! statistics, a full ring blocks or drops-and-counts as asked, and the
//! host's fork, closed descriptors and hostile paths do not break it.
//!
//! The program is `tests/c/trace/tracer.c` on ibv-sim's devices, under the
//! shim, its trace in a temporary directory; each test reads the trace
//! back through the launcher's decoder, the way a user would.

mod common;

use common::*;
use serde_json::Value;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::Duration;

fn tracer() -> PathBuf {
    cc(
        "tracer",
        &[&repo_dir().join("tests/c/trace/tracer.c")],
        &["-libverbs", "-lpthread"],
    )
}

/// `tracer MODE THREADS CALLS` on the sim under the shim, tracing to
/// `dir/t.%p`, with `env` on top.
fn command(dir: &TempDir, args: &[&str], env: &[(&str, &str)]) -> (Command, FabricGuard) {
    let fabric = fabric_name("trace", args[0]);
    let mut cmd = Command::new(tracer());
    cmd.args(args)
        .env_remove("IBV_SHIM_LOG_FILE")
        .env_remove("IBV_SHIM_TRACE_FULL")
        .env_remove("IBV_SHIM_TRACE_SLOTS")
        .env("LD_LIBRARY_PATH", sim_dir())
        .env("LD_PRELOAD", shim_so())
        .env("IBV_SIM_FABRIC", &fabric)
        .env("IBV_SHIM_LOG", "warn")
        .env("IBV_SHIM_TRACE", dir.join("t.%p"));
    for (k, v) in env {
        cmd.env(k, v);
    }
    (cmd, FabricGuard(fabric))
}

/// `target/<profile>/ibv-shim`, the launcher (built by `make test`).
fn launcher() -> PathBuf {
    let path = target_dir().join("ibv-shim");
    assert!(
        path.is_file(),
        "{} does not exist: run `make build`",
        path.display()
    );
    path
}

fn trace_files(dir: &TempDir) -> Vec<PathBuf> {
    let mut v: Vec<PathBuf> = std::fs::read_dir(dir.path())
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| {
            p.file_name()
                .and_then(|n| n.to_str())
                .is_some_and(|n| n.starts_with("t."))
        })
        .collect();
    v.sort();
    v
}

/// `ibv-shim trace ARGS FILES`: its output; panics if it fails.
fn decode(args: &[&str], files: &[PathBuf]) -> Output {
    let out = run(Command::new(launcher()).arg("trace").args(args).args(files));
    assert!(
        out.status.success(),
        "ibv-shim trace failed: {}",
        stderr(&out)
    );
    out
}

/// The decoded text lines that record `verb`.
fn lines_of(text: &str, verb: &str) -> usize {
    text.lines()
        .filter(|l| l.contains(&format!(" {verb}(")))
        .count()
}

/// `--stats`' table: verb -> (calls, errors, errors by errno).
fn stats(files: &[PathBuf]) -> BTreeMap<String, (u64, u64, String)> {
    let out = decode(&["--stats"], files);
    stdout(&out)
        .lines()
        .skip(1)
        .filter(|l| l.starts_with("ibv_"))
        .map(|l| {
            let f: Vec<&str> = l.split_whitespace().collect();
            (
                f[0].to_string(),
                (
                    f[1].parse().unwrap(),
                    f[2].parse().unwrap(),
                    f[8..].join(" "),
                ),
            )
        })
        .collect()
}

/// Every way a process can end keeps every complete record: the calls
/// made before the end are all in the file, whether the exit ran the
/// shim's destructor (exit) or nothing at all (SIGKILL, SIGSEGV, abort,
/// _exit). Rings of 64 records, blocking: most records were copied out
/// by the writer, the rest are still in the rings; both are read.
#[test]
fn every_complete_record_survives_the_end_of_the_process() {
    for (mode, signal) in [
        ("exit", None),
        ("kill", Some(libc::SIGKILL)),
        ("segv", Some(libc::SIGSEGV)),
        ("abort", Some(libc::SIGABRT)),
        ("_exit", None),
    ] {
        let dir = TempDir::new("trace-end");
        let (mut cmd, _fabric) = command(
            &dir,
            &[mode, "4", "1000"],
            &[
                ("IBV_SHIM_TRACE_SLOTS", "64"),
                ("IBV_SHIM_TRACE_FULL", "block"),
                ("TRACER_FAILS", "5"),
            ],
        );
        let out = run_unchecked(&mut cmd, Duration::from_secs(60));
        assert_eq!(
            common::signal(&out.status),
            signal,
            "{mode}: {}",
            describe(&cmd, &out)
        );
        let files = trace_files(&dir);
        assert_eq!(files.len(), 1, "{mode}: one trace file: {files:?}");
        let s = stats(&files);
        assert_eq!(s["ibv_get_device_name"].0, 4000, "{mode}: {s:?}");
        assert_eq!(s["ibv_query_gid"], (20, 20, "EINVAL:20".into()), "{mode}");
        assert_eq!(s["ibv_open_device"].0, 1, "{mode}");
        assert_eq!(
            s.contains_key("ibv_close_device"),
            mode == "exit",
            "{mode}: {s:?}"
        );
    }
}

/// SIGKILL from outside, in the middle of a stream of calls: the records
/// decode up to the last complete one, with no hole before it (each
/// thread's records are numbered in its ring). The program says "ready"
/// after its first 2000 calls (`LOOP_FIRST`) and goes on: killed at once
/// then, whatever the machine's speed, at least those 2000 are recorded.
#[test]
fn a_program_killed_mid_stream_decodes_up_to_its_last_record() {
    let dir = TempDir::new("trace-kill");
    let (mut cmd, _fabric) = command(
        &dir,
        &["loop", "1", "10"],
        &[("IBV_SHIM_TRACE_FULL", "block")],
    );
    cmd.stdout(Stdio::piped()).stderr(Stdio::null());
    let mut child = cmd.spawn().unwrap();
    let mut ready = String::new();
    use std::io::BufRead;
    std::io::BufReader::new(child.stdout.take().unwrap())
        .read_line(&mut ready)
        .unwrap();
    assert_eq!(ready.trim(), "ready");
    // At once: the loop records millions of calls a second, all decoded
    // below (300 ms of it made a 240 MB file that took minutes to decode).
    child.kill().unwrap();
    child.wait().unwrap();
    let files = trace_files(&dir);
    let text = stdout(&decode(&[], &files));
    let names = lines_of(&text, "ibv_get_device_name");
    assert!(
        names >= 2000,
        "the 2000 calls made before \"ready\" are recorded: {names}"
    );
    // Raw check of numbering: decode the file with the format crate's
    // rules through the Chrome output, which keeps every record.
    let chrome: Value =
        serde_json::from_slice(&decode(&["--format", "chrome"], &files).stdout).unwrap();
    let slices = chrome["traceEvents"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|e| e["ph"] == "X")
        .count();
    assert_eq!(slices, names + 2, "list + open + every name call");
}

/// Chrome trace-event JSON: valid JSON, one track (tid) per thread with
/// its slices, failed calls marked with their errno.
#[test]
fn the_chrome_trace_has_a_track_per_thread_and_marks_failed_calls() {
    let dir = TempDir::new("trace-chrome");
    let (mut cmd, _fabric) = command(
        &dir,
        &["exit", "4", "50"],
        &[("IBV_SHIM_TRACE_FULL", "block"), ("TRACER_FAILS", "3")],
    );
    let out = run(&mut cmd);
    assert!(out.status.success(), "{}", describe(&cmd, &out));
    let files = trace_files(&dir);
    let json: Value = serde_json::from_slice(&decode(&["--format", "chrome"], &files).stdout)
        .expect("valid JSON");
    let events = json["traceEvents"].as_array().expect("traceEvents");
    let mut per_thread: BTreeMap<u64, (usize, usize)> = BTreeMap::new();
    let mut named = 0;
    for e in events {
        match e["ph"].as_str().unwrap() {
            "M" if e["name"] == "thread_name" => named += 1,
            "X" => {
                assert!(e["ts"].is_number() && e["dur"].is_number(), "{e}");
                let t = per_thread.entry(e["tid"].as_u64().unwrap()).or_default();
                if e["name"] == "ibv_get_device_name" {
                    t.0 += 1;
                    assert!(
                        e["args"]["device"].as_str().unwrap().contains("mlx5_0"),
                        "{e}"
                    );
                }
                if e["name"] == "ibv_query_gid" {
                    assert_eq!(e["args"]["failed"], true, "{e}");
                    assert_eq!(e["args"]["errno"], "EINVAL", "{e}");
                    assert_eq!(e["args"]["port_num"], "99", "{e}");
                    assert_eq!(e["cname"], "terrible", "{e}");
                    t.1 += 1;
                }
            }
            _ => {}
        }
    }
    let workers: Vec<_> = per_thread.values().filter(|t| t.0 > 0).collect();
    assert_eq!(workers.len(), 4, "{per_thread:?}");
    assert!(workers.iter().all(|t| **t == (50, 3)), "{per_thread:?}");
    assert_eq!(named, per_thread.len(), "a named track per thread");
}

/// 16 threads, rings of 16 records, blocking: nothing is lost.
#[test]
fn sixteen_threads_lose_nothing_in_blocking_mode() {
    let dir = TempDir::new("trace-block");
    let (mut cmd, _fabric) = command(
        &dir,
        &["exit", "16", "5000"],
        &[
            ("IBV_SHIM_TRACE_SLOTS", "16"),
            ("IBV_SHIM_TRACE_FULL", "block"),
        ],
    );
    let out = run(&mut cmd);
    assert!(out.status.success(), "{}", describe(&cmd, &out));
    assert!(!stderr(&out).contains("lost"), "{}", stderr(&out));
    let files = trace_files(&dir);
    let decoded = decode(&["--stats"], &files);
    assert!(stderr(&decoded).is_empty(), "{}", stderr(&decoded));
    assert_eq!(stats(&files)["ibv_get_device_name"].0, 80_000);
}

/// Drop mode (the default) with tiny rings: records are dropped, and every
/// dropped one is counted: what the file holds plus what it says was lost
/// is exactly the number of calls, and the shim and decoder both say so.
#[test]
fn drop_mode_counts_every_lost_record() {
    let dir = TempDir::new("trace-drop");
    let (mut cmd, _fabric) = command(
        &dir,
        &["exit", "4", "50000"],
        &[("IBV_SHIM_TRACE_SLOTS", "16")],
    );
    let out = run(&mut cmd);
    assert!(out.status.success(), "{}", describe(&cmd, &out));
    let files = trace_files(&dir);
    let decoded = decode(&[], &files);
    // list, open, 4 x 50000 names, close, free.
    let kept = stdout(&decoded)
        .lines()
        .filter(|l| l.contains(" DEBUG ibv_"))
        .count();
    let lost: u64 = stderr(&decoded)
        .split(" records lost")
        .next()
        .and_then(|s| s.rsplit(' ').next())
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("the decoder reports the loss: {}", stderr(&decoded)));
    assert!(lost > 0, "tiny rings drop records");
    assert_eq!(kept as u64 + lost, 200_000 + 4, "kept {kept} + lost {lost}");
    assert!(
        stderr(&out).contains(&format!("trace: {lost} records lost")),
        "the shim reports the loss at exit: {}",
        stderr(&out)
    );
}

/// fork(): with `%p` the child writes a trace of its own and the parent's
/// holds only the parent's calls; without `%p` the child is not traced and
/// the parent's file is intact.
#[test]
fn a_forked_child_never_writes_into_the_parents_trace() {
    let dir = TempDir::new("trace-fork");
    let (mut cmd, _fabric) = command(
        &dir,
        &["fork", "1", "300"],
        &[("IBV_SHIM_TRACE_FULL", "block")],
    );
    let out = run(&mut cmd);
    assert!(out.status.success(), "{}", describe(&cmd, &out));
    let files = trace_files(&dir);
    assert_eq!(files.len(), 2, "{files:?}");
    let all: Vec<_> = files
        .iter()
        .map(|f| stats(std::slice::from_ref(f)))
        .collect();
    let (parent, child) = if all[0].contains_key("ibv_get_device_list") {
        (&all[0], &all[1])
    } else {
        (&all[1], &all[0])
    };
    assert_eq!(parent["ibv_get_device_name"].0, 301, "{parent:?}");
    assert!(!parent.contains_key("ibv_get_device_guid"), "{parent:?}");
    assert_eq!(child["ibv_get_device_guid"].0, 300, "{child:?}");
    assert!(!child.contains_key("ibv_get_device_name"), "{child:?}");

    let dir = TempDir::new("trace-fork-one");
    let (mut cmd, _fabric) = command(
        &dir,
        &["fork", "1", "300"],
        &[("IBV_SHIM_TRACE_FULL", "block")],
    );
    cmd.env("IBV_SHIM_TRACE", dir.join("t.one"));
    let out = run(&mut cmd);
    assert!(out.status.success(), "{}", describe(&cmd, &out));
    let s = stats(&trace_files(&dir));
    assert_eq!(s["ibv_get_device_name"].0, 301, "{s:?}");
    assert!(!s.contains_key("ibv_get_device_guid"), "{s:?}");
}

/// A program that closes every descriptor and reuses the numbers: the
/// trace is neither lost nor written into the program's files.
#[test]
fn a_closed_and_reused_descriptor_does_not_lose_or_misdirect_records() {
    let dir = TempDir::new("trace-fds");
    let (mut cmd, _fabric) = command(
        &dir,
        &["closefds", "2", "3000"],
        &[
            ("IBV_SHIM_TRACE_SLOTS", "16"),
            ("IBV_SHIM_TRACE_FULL", "block"),
        ],
    );
    let out = run(&mut cmd);
    assert!(out.status.success(), "{}", describe(&cmd, &out));
    assert_eq!(stats(&trace_files(&dir))["ibv_get_device_name"].0, 6000);
}

/// A trace path that is a symbolic link is not followed: the link and its
/// target are left as they are, and the process traces to `PATH.<pid>`,
/// saying so (one warning).
#[test]
fn a_trace_path_through_a_link_is_not_followed() {
    let dir = TempDir::new("trace-link");
    let victim = dir.join("victim");
    std::fs::write(&victim, b"keep me").unwrap();
    std::os::unix::fs::symlink(&victim, dir.join("t.link")).unwrap();
    let (mut cmd, _fabric) = command(&dir, &["exit", "1", "10"], &[]);
    cmd.env("IBV_SHIM_TRACE", dir.join("t.link"));
    let out = run(&mut cmd);
    assert!(out.status.success(), "{}", describe(&cmd, &out));
    assert_eq!(std::fs::read(&victim).unwrap(), b"keep me");
    assert_eq!(std::fs::read_link(dir.join("t.link")).unwrap(), victim);
    let err = stderr(&out);
    assert!(
        err.contains("WARN IBV_SHIM_TRACE=")
            && err.contains("a symbolic link, not followed; tracing to"),
        "{err}"
    );
    let files: Vec<PathBuf> = trace_files(&dir)
        .into_iter()
        .filter(|f| f.is_file() && !f.is_symlink())
        .collect();
    assert_eq!(files.len(), 1, "{files:?}");
    assert_eq!(file_mode(&files[0]), 0o600);
    assert_eq!(stats(&files)["ibv_get_device_name"].0, 10);
}

/// The pid in a trace file's header.
fn header_pid(p: &Path) -> u32 {
    let b = std::fs::read(p).unwrap();
    u32::from_le_bytes(b[12..16].try_into().unwrap())
}

/// Two processes on one trace path (no `%p`): a traced program that forks
/// and execs another traced program, which opens the same path while the
/// parent is still writing records. Neither truncates the other's file
/// (a truncated shared mapping is SIGBUS at the next record): the child
/// finds the parent's trace held and writes `PATH.<its pid>`, saying so;
/// the parent's file holds every one of the parent's calls and none of
/// the child's. A finished run's trace at the path is replaced by the
/// next run's, as before.
#[test]
fn two_processes_on_one_trace_path_never_share_a_file() {
    let dir = TempDir::new("trace-exec");
    let (mut cmd, _fabric) = command(
        &dir,
        &["exec", "2", "300"],
        &[("IBV_SHIM_TRACE_FULL", "block")],
    );
    cmd.env("IBV_SHIM_TRACE", dir.join("t.one"));
    let out = run(&mut cmd);
    assert!(out.status.success(), "{}", describe(&cmd, &out));
    let made: u64 = stdout(&out)
        .trim()
        .strip_prefix("parent calls ")
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("{}", describe(&cmd, &out)));
    let files = trace_files(&dir);
    assert_eq!(files.len(), 2, "{files:?}");
    let parent = dir.join("t.one");
    let child = files.iter().find(|f| **f != parent).unwrap();
    let child_pid: u32 = child
        .to_str()
        .unwrap()
        .rsplit('.')
        .next()
        .unwrap()
        .parse()
        .unwrap();
    assert_eq!(header_pid(child), child_pid);
    assert_ne!(
        header_pid(&parent),
        child_pid,
        "the parent's file is the parent's"
    );
    assert!(
        stderr(&out).contains(&format!(
            "the trace of a live process; tracing to {} instead",
            child.display()
        )),
        "{}",
        stderr(&out)
    );
    let p = stats(std::slice::from_ref(&parent));
    assert_eq!(p["ibv_get_device_name"].0, 600 + made, "{p:?}");
    assert_eq!(p["ibv_get_device_list"].0, 1, "{p:?}");
    assert_eq!(
        stats(std::slice::from_ref(child))["ibv_get_device_name"].0,
        300
    );
    assert_eq!(file_mode(&parent), 0o600);
    assert_eq!(file_mode(child), 0o600);

    // One run after another: the second replaces the first's trace.
    let dir = TempDir::new("trace-rerun");
    let mut pids = Vec::new();
    for _ in 0..2 {
        let (mut cmd, _fabric) = command(&dir, &["exit", "1", "10"], &[]);
        cmd.env("IBV_SHIM_TRACE", dir.join("t.again"));
        let out = run(&mut cmd);
        assert!(out.status.success(), "{}", describe(&cmd, &out));
        assert!(!stderr(&out).contains("WARN"), "{}", stderr(&out));
        pids.push(header_pid(&dir.join("t.again")));
    }
    assert_eq!(trace_files(&dir), [dir.join("t.again")]);
    assert_ne!(pids[0], pids[1]);
}

/// `uid:gid mode` and contents of a file, not following a link.
fn file_state(p: &Path) -> (u32, u32, Vec<u8>) {
    use std::os::unix::fs::MetadataExt;
    let m = std::fs::symlink_metadata(p).unwrap();
    let body = if m.file_type().is_symlink() {
        std::fs::read_link(p)
            .unwrap()
            .into_os_string()
            .into_encoded_bytes()
    } else {
        std::fs::read(p).unwrap()
    };
    (m.uid(), m.mode(), body)
}

fn root() -> Result<(), String> {
    // SAFETY: geteuid cannot fail.
    if unsafe { libc::geteuid() } == 0 {
        Ok(())
    } else {
        Err("needs root (files of another uid; a private mount namespace)".into())
    }
}

/// Files planted at the trace and log paths by another user (mode 0666,
/// owned by uid 65534: in a shared directory they could read the records
/// and write into the live rings) and links to a victim: none is written,
/// truncated, mapped or changed. The trace goes to `PATH.<pid>` (made by
/// the shim, 0600), the log to stderr, each refusal said with its reason.
#[test]
fn planted_trace_and_log_files_are_refused_and_left_as_they_are() {
    let Some(()) = require("root", root()) else {
        return;
    };
    use std::os::unix::fs::PermissionsExt;
    let dir = TempDir::new("trace-planted");
    let victim = dir.join("victim");
    std::fs::write(&victim, b"keep me").unwrap();
    for name in ["t.planted", "log.planted"] {
        let p = dir.join(name);
        std::fs::write(&p, b"planted by uid 65534").unwrap();
        std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o666)).unwrap();
        std::os::unix::fs::chown(&p, Some(65534), Some(65534)).unwrap();
    }
    for name in ["t.link", "log.link"] {
        std::os::unix::fs::symlink(&victim, dir.join(name)).unwrap();
    }
    let planted = ["t.planted", "log.planted", "t.link", "log.link", "victim"];
    let before: Vec<_> = planted.iter().map(|n| file_state(&dir.join(n))).collect();
    for (trace, log) in [("t.planted", "log.planted"), ("t.link", "log.link")] {
        let (mut cmd, _fabric) = command(&dir, &["exit", "2", "10"], &[]);
        cmd.env("IBV_SHIM_TRACE", dir.join(trace))
            .env("IBV_SHIM_LOG_FILE", dir.join(log));
        let out = run(&mut cmd);
        assert!(out.status.success(), "{}", describe(&cmd, &out));
        let err = stderr(&out);
        let why = if trace == "t.planted" {
            "a file owned by uid 65534, not by this process's user (uid 0); refused"
        } else {
            "symbolic link"
        };
        assert!(
            err.contains(&format!(
                "WARN IBV_SHIM_TRACE={}: ",
                dir.join(trace).display()
            )) && err.contains(why)
                && err.contains("tracing to"),
            "{err}"
        );
        assert!(
            err.contains(&format!(
                "WARN IBV_SHIM_LOG_FILE={}: ",
                dir.join(log).display()
            )) && err.contains(why)
                && err.contains("logging to stderr"),
            "{err}"
        );
        let made: Vec<PathBuf> = std::fs::read_dir(dir.path())
            .unwrap()
            .map(|e| e.unwrap().path())
            .filter(|p| {
                p.to_str()
                    .unwrap()
                    .starts_with(&format!("{}.", dir.join(trace).display()))
            })
            .collect();
        assert_eq!(made.len(), 1, "{made:?}");
        assert_eq!(file_mode(&made[0]), 0o600);
        assert_eq!(stats(&made)["ibv_get_device_name"].0, 20);
        std::fs::remove_file(&made[0]).unwrap();
    }
    let after: Vec<_> = planted.iter().map(|n| file_state(&dir.join(n))).collect();
    assert_eq!(
        before, after,
        "the planted files and the victim are unchanged"
    );
}

/// A full disk (the trace on a 64 KiB tmpfs, in a private mount
/// namespace): the program runs on and exits normally, never SIGBUS (the
/// mapping is only ever touched where file space is allocated); the shim
/// says once that the trace stopped for want of space, counts what it
/// dropped, and the file decodes.
#[test]
fn a_full_disk_stops_the_trace_not_the_program() {
    let Some(()) = require("root", root()) else {
        return;
    };
    for (size, threads, calls, full) in [
        ("64k", "3", "20000", "drop"),
        ("64k", "3", "20000", "block"),
        ("6m", "3", "100000", "drop"),
    ] {
        let dir = TempDir::new("trace-full");
        let mnt = dir.join("mnt");
        std::fs::create_dir(&mnt).unwrap();
        let (cmd, _fabric) = command(
            &dir,
            &["exit", threads, calls],
            &[("IBV_SHIM_TRACE_FULL", full)],
        );
        let mut sh = Command::new("unshare");
        sh.args(["-m", "--propagation", "private", "sh", "-c"])
            .arg(format!(
                "mount -t tmpfs -o size={size} ibv-trace-full \"$1\" && shift && \"$@\"; \
                 rc=$?; cp \"$0\"/t.* \"$0\"/..; exit $rc"
            ))
            .arg(&mnt)
            .arg(&mnt)
            .arg(cmd.get_program())
            .args(cmd.get_args());
        for (k, v) in cmd.get_envs() {
            match v {
                Some(v) => sh.env(k, v),
                None => sh.env_remove(k),
            };
        }
        sh.env("IBV_SHIM_TRACE", mnt.join("t.%p"));
        let out = run(&mut sh);
        assert!(out.status.success(), "{}", describe(&sh, &out));
        let err = stderr(&out);
        assert!(
            err.contains("trace stopped: no space (No space left on device"),
            "{size} {full}: {err}"
        );
        assert!(err.contains("records lost"), "{err}");
        let files = trace_files(&dir);
        assert_eq!(files.len(), 1, "{files:?}");
        let decoded = decode(&["--stats"], &files);
        assert!(
            stderr(&decoded).contains("records lost"),
            "{}",
            stderr(&decoded)
        );
    }
}

/// `block` mode past the rings' number: 200 threads live at once, each
/// holding the trace (64 rings) until all have made their calls: every
/// record is kept (the threads beyond share rings), none lost.
#[test]
fn more_threads_than_rings_lose_nothing_in_blocking_mode() {
    let dir = TempDir::new("trace-many");
    let (mut cmd, _fabric) = command(
        &dir,
        &["together", "200", "100"],
        &[
            ("IBV_SHIM_TRACE_SLOTS", "64"),
            ("IBV_SHIM_TRACE_FULL", "block"),
        ],
    );
    let out = run(&mut cmd);
    assert!(out.status.success(), "{}", describe(&cmd, &out));
    assert!(!stderr(&out).contains("lost"), "{}", stderr(&out));
    let files = trace_files(&dir);
    let decoded = decode(&[], &files);
    assert!(stderr(&decoded).is_empty(), "{}", stderr(&decoded));
    let text = stdout(&decoded);
    assert_eq!(lines_of(&text, "ibv_get_device_name"), 20_000);
    let mut tids: Vec<&str> = text
        .lines()
        .filter(|l| l.contains(" ibv_get_device_name("))
        .filter_map(|l| l.split_whitespace().nth(2))
        .collect();
    tids.sort_unstable();
    tids.dedup();
    assert_eq!(tids.len(), 200, "each thread's calls under its own id");
}

/// The largest rings (`IBV_SHIM_TRACE_SLOTS=1048576`, 128 MiB each) take
/// file space as they fill, not whole when a thread first records: five
/// threads' few calls take a few MiB of disk (a MiB per ring), not 640.
#[test]
fn a_large_ring_takes_disk_only_as_it_fills() {
    use std::os::unix::fs::MetadataExt;
    let dir = TempDir::new("trace-large");
    let (mut cmd, _fabric) = command(
        &dir,
        &["exit", "4", "100"],
        &[("IBV_SHIM_TRACE_SLOTS", "1048576")],
    );
    let out = run(&mut cmd);
    assert!(out.status.success(), "{}", describe(&cmd, &out));
    let files = trace_files(&dir);
    assert_eq!(stats(&files)["ibv_get_device_name"].0, 400);
    let m = std::fs::metadata(&files[0]).unwrap();
    assert!(
        m.len() > 8 << 30,
        "the file's size is its 64 rings: {}",
        m.len()
    );
    let used = m.blocks() * 512;
    assert!(
        used < 32 << 20,
        "{used} bytes of disk for 5 rings' few records"
    );
}

/// The decoder reads a trace file a window at a time and only a regular
/// file: a 20 GB sparse trace (also one whose header says its drained
/// records run to the end) is decoded in a 1 GiB address space, `/dev/zero`
/// and a FIFO are refused by name, at once (a FIFO never hangs it).
#[test]
fn the_decoder_reads_in_bounded_memory_and_only_regular_files() {
    use std::os::unix::process::CommandExt;
    let dir = TempDir::new("trace-decoder");
    let (mut cmd, _fabric) = command(&dir, &["exit", "1", "10"], &[]);
    let out = run(&mut cmd);
    assert!(out.status.success(), "{}", describe(&cmd, &out));
    let real = trace_files(&dir).remove(0);
    let limited = |args: &[&str], file: &Path| {
        let mut c = Command::new(launcher());
        c.arg("trace").args(args).arg(file);
        // SAFETY: setrlimit is async-signal-safe; nothing else runs here.
        unsafe {
            c.pre_exec(|| {
                let lim = libc::rlimit {
                    rlim_cur: 1 << 30,
                    rlim_max: 1 << 30,
                };
                if libc::setrlimit(libc::RLIMIT_AS, &lim) != 0 {
                    return Err(std::io::Error::last_os_error());
                }
                Ok(())
            });
        }
        let out = run(&mut c);
        (out.status.code(), stdout(&out), stderr(&out))
    };
    let sparse = dir.join("sparse");
    std::fs::copy(&real, &sparse).unwrap();
    let f = std::fs::OpenOptions::new()
        .write(true)
        .open(&sparse)
        .unwrap();
    f.set_len(20 << 30).unwrap();
    let (code, out, err) = limited(&["--stats"], &sparse);
    assert_eq!(code, Some(0), "{err}");
    assert!(out.contains("ibv_get_device_name "), "{out}");
    // The header's drained end moved to the file's end: zeros, not records.
    use std::os::unix::fs::FileExt;
    f.write_at(&(20u64 << 30).to_le_bytes(), 56).unwrap();
    let (code, out, err) = limited(&[], &sparse);
    assert_eq!(code, Some(0), "{err}");
    assert_eq!(lines_of(&out, "ibv_get_device_name"), 10, "{out}");
    assert!(err.contains("the rest of it was not read"), "{err}");

    let (code, _, err) = limited(&[], Path::new("/dev/zero"));
    assert_eq!(code, Some(1), "{err}");
    assert!(
        err.contains("/dev/zero: a character device, not a regular file; refused"),
        "{err}"
    );
    let fifo = dir.join("fifo");
    let c = std::ffi::CString::new(fifo.to_str().unwrap()).unwrap();
    // SAFETY: a NUL-terminated path.
    assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0);
    let (code, _, err) = limited(&[], &fifo);
    assert_eq!(code, Some(1), "{err}");
    assert!(
        err.contains("fifo: a FIFO, not a regular file; refused"),
        "{err}"
    );
}

/// Tracing does not put debug lines in the text log: it keeps its level.
#[test]
fn tracing_leaves_the_text_log_at_its_level() {
    let dir = TempDir::new("trace-text");
    let (mut cmd, _fabric) = command(&dir, &["exit", "1", "10"], &[]);
    cmd.env("IBV_SHIM_LOG", "info");
    let out = run(&mut cmd);
    let err = stderr(&out);
    assert!(!err.contains(" DEBUG "), "{err}");
    assert!(
        err.contains("INFO trace: ibv_get_device_name: 10 calls, 0 failed"),
        "the exit summary at info: {err}"
    );
    assert_eq!(file_mode(&trace_files(&dir)[0]), 0o600);
}

fn file_mode(p: &Path) -> u32 {
    use std::os::unix::fs::PermissionsExt;
    std::fs::metadata(p).unwrap().permissions().mode() & 0o777
}

/// A file of an older format (version 3: 256-byte slots) is refused by
/// name, not misread: the layouts differ.
#[test]
fn an_older_trace_format_is_refused_with_its_version() {
    let dir = TempDir::new("trace-version");
    let (mut cmd, _fabric) = command(&dir, &["exit", "1", "10"], &[]);
    let out = run(&mut cmd);
    assert!(out.status.success(), "{}", describe(&cmd, &out));
    let files = trace_files(&dir);
    let mut bytes = std::fs::read(&files[0]).unwrap();
    assert!(decode(&[], &files).status.success());
    bytes[8..12].copy_from_slice(&3u32.to_le_bytes());
    std::fs::write(&files[0], &bytes).unwrap();
    let out = run(Command::new(launcher()).arg("trace").args(&files));
    assert!(!out.status.success(), "{}", stdout(&out));
    assert!(
        stderr(&out).contains("trace format version 3, written by an older ibv-shim"),
        "{}",
        stderr(&out)
    );
}

/// The front door: `ibv-shim --sim --trace DIR/t.%p -- PROG`, then
/// `ibv-shim trace DIR/t.*`.
#[test]
fn the_launcher_traces_a_program_and_decodes_it() {
    let dir = TempDir::new("trace-launcher");
    let fabric = fabric_name("trace", "launcher");
    let _guard = FabricGuard(fabric.clone());
    let mut cmd = Command::new(launcher());
    for v in [
        "LD_PRELOAD",
        "LD_LIBRARY_PATH",
        "IBV_SHIM_LOG",
        "IBV_SHIM_TRACE",
        "IBV_SHIM_REPORT",
    ] {
        cmd.env_remove(v);
    }
    cmd.env("IBV_SIM_FABRIC", &fabric)
        .arg("--sim")
        .arg("-q")
        .arg("--trace")
        .arg(dir.join("t.%p"))
        .arg("--")
        .arg(tracer())
        .args(["exit", "2", "25"]);
    let out = run(&mut cmd);
    assert!(out.status.success(), "{}", describe(&cmd, &out));
    let files = trace_files(&dir);
    assert_eq!(files.len(), 1, "{files:?}");
    let text = stdout(&decode(&[], &files));
    assert_eq!(lines_of(&text, "ibv_get_device_name"), 50, "{text}");
    assert!(
        text.lines().next().unwrap().starts_with("ibv-shim ")
            && text.contains(" DEBUG ibv_open_device(device="),
        "the log's line format: {text}"
    );
}

/// A thread that exits hands its ring on: 200 threads one after another
/// (more than the 64 rings) lose nothing.
#[test]
fn rings_of_exited_threads_are_reused() {
    let dir = TempDir::new("trace-serial");
    let (mut cmd, _fabric) = command(
        &dir,
        &["serial", "200", "20"],
        &[("IBV_SHIM_TRACE_FULL", "block")],
    );
    let out = run(&mut cmd);
    assert!(out.status.success(), "{}", describe(&cmd, &out));
    assert!(!stderr(&out).contains("lost"), "{}", stderr(&out));
    let files = trace_files(&dir);
    assert_eq!(stats(&files)["ibv_get_device_name"].0, 4000);
    let text = stdout(&decode(&[], &files));
    let mut tids: Vec<&str> = text
        .lines()
        .filter(|l| l.contains(" ibv_get_device_name("))
        .filter_map(|l| l.split_whitespace().nth(2))
        .collect();
    tids.sort_unstable();
    tids.dedup();
    assert_eq!(tids.len(), 200, "each thread's calls under its own id");
}

/// The decoded trace and the debug log show each call the same way: the
/// trace stores a verb id and raw words (no text), both sides format them
/// from `trace_format::verbs`. Also the times, with either clock
/// (`IBV_SHIM_TRACE_CLOCK`): the trace's TSC ticks,
/// turned into wall-clock time by the calibration in its header, land
/// where the log's own timestamps are (the log stamps a line after the
/// call, to the microsecond; an uncalibrated tick count would be off by
/// the run's length times the TSC's GHz).
#[test]
fn the_decoded_trace_and_the_debug_log_say_the_same() {
    for clock in ["tsc", "monotonic"] {
        trace_and_log_agree(clock);
    }
}

fn trace_and_log_agree(clock: &str) {
    let dir = TempDir::new("trace-vs-log");
    let log = dir.join("debug.log");
    let (mut cmd, _fabric) = command(
        &dir,
        &["exit", "1", "300"],
        &[
            ("IBV_SHIM_TRACE_FULL", "block"),
            ("TRACER_FAILS", "2"),
            ("TRACER_OBJECTS", "1"),
            ("IBV_SHIM_LOG", "debug"),
            ("IBV_SHIM_LOG_FILE", log.to_str().unwrap()),
            ("IBV_SHIM_TRACE_CLOCK", clock),
        ],
    );
    let wall_before = wall_minus_monotonic();
    let out = run(&mut cmd);
    let wall_after = wall_minus_monotonic();
    assert!(out.status.success(), "{}", describe(&cmd, &out));
    // `ibv-shim <secs>.<micros> <pid>:<tid> DEBUG <call> = <result> [<time>]`
    let calls = |text: &str| -> Vec<(f64, String)> {
        text.lines()
            .filter(|l| l.contains(" DEBUG ibv_"))
            .map(|l| {
                let f: Vec<&str> = l.splitn(5, ' ').collect();
                let body = f[4].rsplit_once(" [").map_or(f[4], |(b, _)| b);
                (f[1].parse::<f64>().unwrap(), body.to_string())
            })
            .collect()
    };
    let logged = calls(&std::fs::read_to_string(&log).unwrap());
    let files = trace_files(&dir);
    let traced = calls(&stdout(&decode(&[], &files)));
    // The file holds no text for these calls: verb ids and words.
    let bytes = std::fs::read(&files[0]).unwrap();
    let at = trace_format::header::CLOCK;
    let kind = u32::from_le_bytes(bytes[at..at + 4].try_into().unwrap());
    if clock == "monotonic" {
        assert_eq!(
            kind, 0,
            "IBV_SHIM_TRACE_CLOCK=monotonic: CLOCK_MONOTONIC times"
        );
    }
    let raw = trace_format::decode(&bytes).unwrap();
    let names: Vec<_> = raw
        .records
        .iter()
        .filter(|r| r.name() == "ibv_get_device_name")
        .collect();
    assert_eq!(names.len(), 300);
    // The verbs with words of their own (an MR's keys, a QP's number, the
    // device a context is on) are binary records too.
    for verb in [
        "ibv_open_device",
        "ibv_reg_mr",
        "ibv_create_qp",
        "ibv_modify_qp",
        "ibv_rereg_mr",
        "ibv_destroy_qp",
        "ibv_destroy_cq",
        "ibv_dereg_mr",
        "ibv_dealloc_pd",
        "ibv_close_device",
        "ibv_free_device_list",
    ] {
        let of: Vec<_> = raw
            .records
            .iter()
            .filter(|r| r.name().starts_with(verb))
            .collect();
        assert!(!of.is_empty(), "no {verb} record");
        assert!(
            of.iter().all(|r| r.flags & trace_format::FLAG_BINARY != 0),
            "{verb} is not a binary record: {:?}",
            of[0]
        );
    }
    assert!(
        names
            .iter()
            .all(|r| r.flags & trace_format::FLAG_BINARY != 0),
        "{:?}",
        names[0]
    );
    assert!(logged.len() >= 303, "{logged:?}");
    assert_eq!(
        traced.iter().map(|c| &c.1).collect::<Vec<_>>(),
        logged.iter().map(|c| &c.1).collect::<Vec<_>>()
    );
    // A void verb's record: its argument, not an empty result word.
    assert!(
        traced
            .iter()
            .any(|c| c.1.starts_with("ibv_free_device_list(list=0x") && c.1.ends_with(" = void")),
        "{:?}",
        traced
            .iter()
            .filter(|c| c.1.starts_with("ibv_free_device_list"))
            .collect::<Vec<_>>()
    );
    assert!(
        traced
            .iter()
            .any(|c| c.1.starts_with("ibv_query_gid(context=0x")
                && c.1.contains(", port_num=99, index=0, gid=0x")
                && c.1.ends_with(") = -1 errno=EINVAL")),
        "{traced:?}"
    );
    // Each call starts before its line is written, and not long before
    // (generous bounds: a loaded machine may preempt between the two, and
    // both sides are cut to the microsecond; a wrong calibration is off by
    // milliseconds or more). The trace turns its times into wall-clock time
    // with the offset it sampled when it opened, the log with the one at
    // the moment it writes the line: a step of the wall clock during the
    // run (some VMs step it 500 us every 100 ms) moves one against the
    // other by as much, and is allowed for.
    let stepped = (wall_after - wall_before).abs();
    for (t, l) in traced.iter().zip(&logged) {
        let lead = l.0 - t.0;
        assert!(
            (-0.000_05 - stepped..0.5 + stepped).contains(&lead),
            "{clock}: trace {} vs log {}: {} (the wall clock stepped {stepped:.6} s \
             against the monotonic one during the run)",
            t.0,
            l.0,
            l.1
        );
    }
}

/// CLOCK_REALTIME minus CLOCK_MONOTONIC, in seconds: constant unless the
/// wall clock is stepped. Read as the tightest of a few tries.
fn wall_minus_monotonic() -> f64 {
    let read = |clock| {
        let mut ts = libc::timespec {
            tv_sec: 0,
            tv_nsec: 0,
        };
        // SAFETY: a valid out-pointer; both clocks exist on Linux.
        unsafe { libc::clock_gettime(clock, &mut ts) };
        ts.tv_sec as f64 + ts.tv_nsec as f64 * 1e-9
    };
    (0..5)
        .map(|_| {
            let a = read(libc::CLOCK_MONOTONIC);
            let w = read(libc::CLOCK_REALTIME);
            let b = read(libc::CLOCK_MONOTONIC);
            (b - a, w - (a + b) / 2.0)
        })
        .fold(
            (f64::MAX, 0.0),
            |best, x| if x.0 < best.0 { x } else { best },
        )
        .1
}

/// What a traced call costs the calling process, in instructions
/// (callgrind: deterministic): the record is a few words copied into the
/// ring, not text formatted on the calling thread (2,240 added when the
/// call's text was formatted into the record; 565 with per-verb figures
/// counted as records were copied out, the device's name copied twice;
/// 485 with 256-byte slots copied out one `iovec` each, the thread's ring
/// found through a `thread_local!`, and a blocked producer spinning; 467
/// with records back to back copied out a ring at a time, 470 with the
/// debug log's binary entries merged in; 301..304 with the device
/// getters' records written by a function of their own, no walk over the
/// verb's descriptor, and fewer values kept in memory across the record).
/// Counted with everything the trace makes the process do: the copy-out
/// to the file and the writer thread included (which varies by a few from
/// run to run).
#[test]
fn a_traced_call_adds_at_most_315_instructions() {
    let dir = TempDir::new("trace-cost");
    let count = |calls: u64, shim: bool| -> u64 {
        let (cmd, _fabric) = command(
            &dir,
            &["exit", "1", &calls.to_string()],
            &[("IBV_SHIM_TRACE_FULL", "block")],
        );
        let mut vg = Command::new("valgrind");
        vg.args(CALLGRIND)
            .arg(cmd.get_program())
            .args(cmd.get_args());
        for (k, v) in cmd.get_envs() {
            match v {
                Some(v) if shim || (k != "LD_PRELOAD" && k != "IBV_SHIM_TRACE") => {
                    vg.env(k, v);
                }
                _ => {
                    vg.env_remove(k);
                }
            }
        }
        let out = run(&mut vg);
        assert!(out.status.success(), "{}", describe(&vg, &out));
        instructions_counted(&vg, &out)
    };
    let (short, long) = (2_000u64, 12_000u64);
    let per_call =
        |shim| (count(long, shim) as f64 - count(short, shim) as f64) / (long - short) as f64;
    let added = per_call(true) - per_call(false);
    eprintln!("a traced ibv_get_device_name adds {added:.0} instructions");
    assert!(added <= 315.0, "a traced call adds {added:.0} instructions");
}
