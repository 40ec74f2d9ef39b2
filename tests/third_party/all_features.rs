//! The "all features" runs of `third_party.rs`: every option of the shim on
//! at once (debug log through its writer thread, binary trace, data-path
//! checks), for the features that run side by side on the same calls to
//! show they still agree with each other on unmodified programs.
//!
//! On top of what every shim run is judged on (exit status, output, leaks),
//! each process that used verbs must have:
//! - no data-path violation (the JSON `checks`, and no violation line)
//!   but the in-flight findings the program really earns
//!   ([`EXPECTED_INFLIGHT`]);
//! - a trace of its own (`trace.<pid>`) that `ibv-shim trace --stats`
//!   decodes with nothing on stderr (no lost record: the ring blocks);
//! - the same calls in its trace as in its debug log, line for line but the
//!   time stamp (the log's lines come through the writer thread's queue,
//!   the trace's through the rings: neither may lose or garble one);
//! - object arguments that are real: the first argument of a destroy, free
//!   or acknowledge is an address a verb of the process returned earlier
//!   (a record whose words slipped shows `NULL` or a count there).
//!
//! And a pair on the sim that ran to the end must have posted work
//! requests and polled their completions, none failed (`--per-qp`).

use super::{Proc, Role};
use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::process::Command;

/// The shim's environment for an all-features run; `out` is the process's
/// directory (log and report are set by the caller).
pub fn env(out: &Path) -> [(&'static str, String); 4] {
    [
        ("IBV_SHIM_LOG", "debug".into()),
        ("IBV_SHIM_TRACE", out.join("trace.%p").display().to_string()),
        ("IBV_SHIM_TRACE_FULL", "block".into()),
        ("IBV_SHIM_CHECK", "datapath,inflight".into()),
    ]
}

/// The in-flight findings these programs really earn (each checked in
/// its source; docs/compatibility.md, "Found in the wild"): a program
/// may show these rules, and no other finding. Benchmarks that post
/// every receive over one buffer (they never read it), teardowns that
/// leave signalled sends unpolled at exit, and UCX rewriting a send
/// buffer it knows is delivered (its UD acknowledgements; `ucp_put_bw`'s
/// end-of-run marker).
const EXPECTED_INFLIGHT: &[(&str, &[&str])] = &[
    ("ibv_rc_pingpong", &["recv_reused"]),
    ("ibv_uc_pingpong", &["recv_reused"]),
    ("ibv_ud_pingpong", &["recv_reused"]),
    (
        "ibv_srq_pingpong",
        &["recv_reused", "teardown_qp", "teardown_cq"],
    ),
    ("ibv_xsrq_pingpong", &["recv_reused"]),
    ("ucmatose", &["recv_reused", "teardown_qp", "teardown_cq"]),
    ("udaddy", &["recv_reused"]),
    ("mckey", &["recv_reused"]),
    ("ib_send_lat", &["recv_reused"]),
    ("ib_send_bw", &["recv_reused"]),
    ("qperf", &["recv_reused", "teardown_qp", "teardown_cq"]),
    ("ucx_perftest", &["send_modified"]),
    // librdmacm's own rsockets (the real kernel's rows; the sim's
    // librdmacm has its own).
    ("riostream", &["teardown_qp", "teardown_cq"]),
    ("rstream", &["teardown_qp", "teardown_cq"]),
];

/// Whether `rule` is one of `program`'s expected in-flight findings.
fn expected(program: &str, rule: &str) -> bool {
    EXPECTED_INFLIGHT
        .iter()
        .any(|(p, rules)| *p == program && rules.contains(&rule))
}

/// The rule a data-path check line names (`... data-path check RULE: ...`).
fn rule_of(line: &str) -> &str {
    line.split_once("data-path check ")
        .and_then(|(_, r)| r.split_once(':'))
        .map_or("", |(r, _)| r)
}

/// The trace files in a process's directory.
pub fn traces(dir: &Path) -> Vec<PathBuf> {
    let mut v: Vec<PathBuf> = std::fs::read_dir(dir)
        .unwrap()
        .flatten()
        .map(|e| e.path())
        .filter(|p| {
            p.file_name()
                .is_some_and(|n| n.to_string_lossy().starts_with("trace."))
        })
        .collect();
    v.sort();
    v
}

fn launcher() -> PathBuf {
    let path = crate::common::target_dir().join("ibv-shim");
    assert!(path.is_file(), "{}: run `make build`", path.display());
    path
}

/// `ibv-shim trace ARGS FILES`: (exit code, stdout, stderr).
fn decode(args: &[&str], files: &[PathBuf]) -> (Option<i32>, String, String) {
    let out = Command::new(launcher())
        .arg("trace")
        .args(args)
        .args(files)
        .output()
        .expect("run ibv-shim trace");
    (
        out.status.code(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// A call line without its time stamp and duration (`<pid>:<tid> DEBUG
/// verb(...) = ...`), when `line` is one: a DEBUG line naming a function and ending
/// in the call's duration.
fn call_line(line: &str) -> Option<&str> {
    let rest = line.strip_prefix("ibv-shim ")?;
    let (_, rest) = rest.split_once(' ')?;
    let (_, msg) = rest.split_once(" DEBUG ")?;
    let (name, _) = msg.split_once('(')?;
    // A text record cut to fit its slot (a long device list) ends in
    // ` (cut)` after its duration.
    let line = line.strip_suffix(" (cut)").unwrap_or(line);
    let rest = rest.strip_suffix(" (cut)").unwrap_or(rest);
    let is_call = !name.is_empty()
        && name.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_')
        && line.ends_with("us]");
    // The duration goes too: the log converts the TSC with the shim's
    // calibration of the moment, the decoder with the file's (the last
    // digit may differ).
    is_call.then(|| rest.rsplit_once(" [").map_or(rest, |x| x.0))
}

fn verb_of(call: &str) -> &str {
    let msg = call.split_once(" DEBUG ").map_or(call, |x| x.1);
    msg.split_once('(').map_or(msg, |x| x.0)
}

/// Verbs whose first argument is an object (or list) the process must have
/// got from an earlier verb.
const TAKES_AN_OBJECT: &[&str] = &[
    "ibv_free_device_list",
    "ibv_close_device",
    "ibv_dealloc_pd",
    "ibv_dereg_mr",
    "ibv_destroy_cq",
    "ibv_destroy_qp",
    "ibv_destroy_srq",
    "ibv_destroy_ah",
    "ibv_destroy_comp_channel",
    "ibv_ack_cq_events",
    "ibv_modify_qp",
    "ibv_query_qp",
];

/// The first ten first arguments of [`TAKES_AN_OBJECT`] calls that no
/// earlier call of the log returned.
fn unknown_objects(calls: &[&str]) -> Vec<String> {
    let mut returned: BTreeSet<&str> = BTreeSet::new();
    let mut bad = Vec::new();
    for call in calls {
        let msg = call.split_once(" DEBUG ").map_or(*call, |x| x.1);
        let (head, result) = msg.split_once(") = ").unwrap_or((msg, ""));
        let verb = verb_of(call);
        if TAKES_AN_OBJECT.contains(&verb) {
            let first = head
                .split_once('(')
                .and_then(|(_, args)| args.split_once('='))
                .map(|(_, v)| v.split([',', ' ', ')']).next().unwrap_or(""))
                .unwrap_or("");
            if !returned.contains(first) {
                bad.push(format!(
                    "{verb}'s object argument {first:?} was never returned by a verb: {call}"
                ));
                // qperf makes 100,000 calls: the first few tell.
                if bad.len() == 10 {
                    break;
                }
            }
        }
        returned.extend(
            result
                .split(|c: char| !c.is_ascii_alphanumeric())
                .filter(|w| w.starts_with("0x")),
        );
    }
    bad
}

/// The records the decoder says were lost for want of a ring (calls made
/// after the trace was closed at exit), when that is all its stderr says;
/// 0 otherwise.
fn late_records(err: &str) -> usize {
    let mut late = 0;
    for l in err.lines() {
        let Some((_, rest)) = l.split_once(" records lost (0 to full rings, ") else {
            return 0;
        };
        let Some(n) = rest
            .split_whitespace()
            .next()
            .and_then(|n| n.parse::<usize>().ok())
        else {
            return 0;
        };
        if !rest.contains(" with no ring to write to") {
            return 0;
        }
        late += n;
    }
    late
}

/// Everything wrong with one process of an all-features run.
pub fn judge(p: &Proc) -> Vec<String> {
    let mut bad = Vec::new();
    // UCX's processes run under `unshare ... sh devns.sh ... PROGRAM`.
    let program = p
        .argv
        .iter()
        .filter_map(|a| Path::new(a).file_name()?.to_str())
        .find(|a| EXPECTED_INFLIGHT.iter().any(|(p, _)| p == a))
        .unwrap_or_else(|| p.name());
    for line in p.log.lines() {
        if line.contains("data-path check ") && !expected(program, rule_of(line)) {
            bad.push(format!("a violation on a clean program: {line}"));
        }
    }
    let log_calls: Vec<&str> = p.log.lines().filter_map(call_line).collect();
    bad.extend(unknown_objects(&log_calls));
    for r in &p.reports {
        let unexpected: Vec<_> = r
            .checks
            .iter()
            .filter(|(rule, n)| *n != 0 && !expected(program, rule))
            .collect();
        if !unexpected.is_empty() {
            bad.push(format!("the report counts violations: {unexpected:?}"));
        }
        let Some(trace) = p
            .traces
            .iter()
            .find(|t| t.file_name().unwrap().to_string_lossy() == format!("trace.{}", r.pid))
        else {
            bad.push(format!(
                "no trace of pid {} (trace files: {:?})",
                r.pid, p.traces
            ));
            continue;
        };
        let files = [trace.clone()];
        let (code, stats, err) = decode(&["--stats"], &files);
        // Calls made after the shim closed the trace at exit (a library's
        // own destructor running after the shim's: libfabric frees its
        // rdma_getaddrinfo lists there) have no ring left: the decoder
        // says how many, and the log may hold that many calls more.
        let late = late_records(&err);
        let err = if late > 0 { String::new() } else { err };
        if code != Some(0) || !err.is_empty() {
            bad.push(format!(
                "`ibv-shim trace --stats {}` exit {code:?}, stderr:\n{err}",
                trace.display()
            ));
        }
        let listed: BTreeSet<&str> = stats
            .lines()
            .skip(1)
            .filter_map(|l| l.split_whitespace().next())
            // The lost records' own line (`pid N: ... lost`).
            .filter(|w| late == 0 || *w != "pid")
            .collect();
        let (code, text, err) = decode(&[], &files);
        let err = if late_records(&err) > 0 {
            String::new()
        } else {
            err
        };
        if code != Some(0) || !err.is_empty() {
            bad.push(format!(
                "`ibv-shim trace {}` exit {code:?}, stderr:\n{err}",
                trace.display()
            ));
        }
        let pid = format!("{}:", r.pid);
        let mine = |c: &&str| c.starts_with(&pid);
        let traced: Vec<&str> = text.lines().filter_map(call_line).collect();
        // A record cut to fit its slot: the log's line that begins with
        // what is left of it stands for the same call.
        let cut: Vec<&str> = text
            .lines()
            .filter(|l| l.ends_with(" (cut)"))
            .filter_map(call_line)
            .collect();
        let logged: Vec<&str> = log_calls
            .iter()
            .copied()
            .filter(mine)
            .map(|l| cut.iter().copied().find(|c| l.starts_with(c)).unwrap_or(l))
            .collect();
        if traced.is_empty() {
            bad.push(format!("the trace of pid {} has no call", r.pid));
        }
        // Lines the log's queue had to drop (it stayed full past its
        // bounded wait: a writer thread left unscheduled on a loaded
        // machine) are said in a warning; that many calls may be missing
        // from the log, never more, and none may be in it that the trace
        // does not hold.
        let dropped: usize = p
            .log
            .lines()
            .filter(|l| l.contains(&format!(" {}:", r.pid)))
            .filter_map(|l| l.split(" WARN ").nth(1))
            .filter(|w| w.contains(" debug and trace lines dropped"))
            .filter_map(|w| w.split_whitespace().next()?.parse::<usize>().ok())
            .sum();
        let in_log: BTreeSet<&str> = logged.iter().map(|c| verb_of(c)).collect();
        if listed != in_log
            && !(dropped > 0 && in_log.is_subset(&listed))
            && !(late > 0 && listed.is_subset(&in_log))
        {
            bad.push(format!(
                "trace --stats lists {listed:?}, the debug log has {in_log:?}"
            ));
        }
        let count = |calls: &[&str]| {
            let mut m: BTreeMap<String, usize> = BTreeMap::new();
            for c in calls {
                *m.entry(c.to_string()).or_default() += 1;
            }
            m
        };
        let (t, l) = (count(&traced), count(&logged));
        let within_drops = dropped > 0
            && l.iter().all(|(k, n)| t.get(k).is_some_and(|m| m >= n))
            && traced.len() - logged.len().min(traced.len()) <= dropped;
        let within_late = late > 0
            && t.iter().all(|(k, n)| l.get(k).is_some_and(|m| m >= n))
            && logged.len() - traced.len().min(logged.len()) <= late;
        if t != l && !within_drops && !within_late {
            let only = |a: &BTreeMap<String, usize>, b: &BTreeMap<String, usize>| {
                a.iter()
                    .filter(|(k, n)| b.get(*k) != Some(n))
                    .take(5)
                    .map(|(k, n)| format!("    {n} x {k}\n"))
                    .collect::<String>()
            };
            bad.push(format!(
                "pid {}: the trace's calls ({}) are not the debug log's ({}, {dropped} lines \
                 dropped); in the trace, not so in the log:\n{}in the log, not so in the trace:\n{}",
                r.pid,
                traced.len(),
                logged.len(),
                only(&t, &l),
                only(&l, &t)
            ));
        }
    }
    bad
}

/// Posts, completions and failed completions of every QP in `procs`'
/// traces (`ibv-shim trace --per-qp`).
fn per_qp(procs: &[Proc]) -> Result<(u64, u64, u64), String> {
    let files: Vec<PathBuf> = procs.iter().flat_map(|p| p.traces.clone()).collect();
    if files.is_empty() {
        return Err("no trace files".into());
    }
    let (code, out, err) = decode(&["--per-qp"], &files);
    if code != Some(0) {
        return Err(format!("`ibv-shim trace --per-qp` exit {code:?}: {err}"));
    }
    let mut sum = (0, 0, 0);
    for line in out.lines().skip(1) {
        let w: Vec<u64> = line
            .split_whitespace()
            .skip(2)
            .take(3)
            .filter_map(|x| x.parse().ok())
            .collect();
        if let [posts, completions, failed] = w[..] {
            sum = (sum.0 + posts, sum.1 + completions, sum.2 + failed);
        }
    }
    Ok(sum)
}

/// Everything wrong with a whole pair run on the sim that ended well: its
/// work requests must be in the traces (and, unless its teardown flushes
/// posted receives, complete without error).
pub fn judge_data_path(procs: &[Proc], flushes: bool) -> Vec<String> {
    let ended_well = procs.len() == 2
        && procs
            .iter()
            .all(|p| p.killed_by_us || p.ended.status.is_some_and(|s| s.success()));
    if !ended_well || !procs.iter().any(|p| p.role == Role::Server) {
        return Vec::new();
    }
    match per_qp(procs) {
        Err(e) => vec![e],
        Ok((posts, completions, failed))
            if posts == 0
                || completions == 0
                || failed >= completions
                || (failed != 0 && !flushes) =>
        {
            vec![format!(
                "the traces hold {posts} posts, {completions} completions ({failed} failed): \
                 the pair's data path is not in them"
            )]
        }
        Ok(_) => Vec::new(),
    }
}
