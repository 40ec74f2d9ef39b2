//! `ibv-shim trace [--format text|chrome] [--stats] [--per-qp] FILE...`: reads the
//! shim's binary trace files (`IBV_SHIM_TRACE`) and prints them as text
//! (the log's line format), as Chrome trace-event JSON (Perfetto,
//! chrome://tracing: one track per thread, a slice per verbs call), or as
//! per-verb statistics, or per QP: posts matched to their completions.
//! Records a process lost (full rings) are always
//! reported, on stderr.

use std::collections::{BTreeMap, HashMap, VecDeque};
use std::ffi::OsString;
use std::io::Write;

use serde_json::{json, Value};
use trace_format::{errno_name, Record, Trace, FLAG_EVENT, FLAG_TRUNCATED};

const USAGE: &str = "usage: ibv-shim trace [--format text|chrome] [--stats] [--per-qp] FILE...\n";

pub const HELP: &str = "\
ibv-shim trace [--format text|chrome] [--stats] [--per-qp] FILE...

Decodes the binary trace files the shim writes with --trace / IBV_SHIM_TRACE
(one per process), also those of a process that was killed or crashed: every
complete record is kept.

  --format text     one line per call, as the debug log prints it (default)
  --format chrome   Chrome trace-event JSON (open in Perfetto or
                    chrome://tracing): a track per thread, a slice per call
                    with its arguments and result; failed calls marked
  --stats           per verb: calls, errors by errno, total, mean, p50, p99
                    and max latency
  --per-qp          per QP (a process's qp_num): work requests posted,
                    completions, failed completions, and the latency from
                    each post to its completion (matched by wr_id, send or
                    receive, first in first out); needs the posts in the
                    trace (the shim wraps ibv_post_send/ibv_post_recv and
                    ibv_poll_cq of a traced process; not an SRQ's posts nor
                    the ibv_wr_* or extended-CQ paths)

Records lost to full rings are reported on stderr.
";

/// How the trace is shown.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Format {
    Text,
    Chrome,
    Stats,
    PerQp,
}

/// What `ibv-shim trace` was asked (`cli` parses it).
#[derive(Debug, PartialEq, Eq)]
pub struct TraceOptions {
    pub format: Format,
    pub files: Vec<OsString>,
}

/// Runs the subcommand; returns the exit status.
pub fn main(o: TraceOptions) -> i32 {
    let TraceOptions { format, files } = o;
    let mut traces = Vec::new();
    for f in &files {
        let decoded = open_trace(f)
            .map_err(|e| e.to_string())
            .and_then(|file| trace_format::decode_from(&file).map_err(|e| e.to_string()));
        match decoded {
            Ok(t) => {
                report_lost(&f.to_string_lossy(), &t);
                if let Some(at) = t.damaged_at {
                    eprintln!(
                        "ibv-shim trace: {}: no record at offset {at} of the drained area \
                         (damaged, or a hole): the rest of it was not read",
                        f.to_string_lossy()
                    );
                }
                traces.push(t);
            }
            Err(e) => {
                eprintln!("ibv-shim trace: {}: {e}", f.to_string_lossy());
                return 1;
            }
        }
    }
    let out = match format {
        Format::Text => text(&traces),
        Format::Chrome => {
            let mut s = serde_json::to_string(&chrome(&traces)).expect("JSON values serialise");
            s.push('\n');
            s
        }
        Format::Stats => stats(&traces),
        Format::PerQp => per_qp(&traces),
    };
    print(&out);
    0
}

/// Opens a trace file to read: a regular file only (a FIFO would block
/// the open or the reads for ever, a device never end), checked before
/// opening (opening a device can do things) and after; non-blocking, so a
/// FIFO swapped in between cannot hang it.
fn open_trace(path: &OsString) -> std::io::Result<std::fs::File> {
    use std::os::unix::fs::{FileTypeExt, OpenOptionsExt};
    let kind = |t: std::fs::FileType| {
        if t.is_file() {
            None
        } else if t.is_dir() {
            Some("a directory")
        } else if t.is_fifo() {
            Some("a FIFO")
        } else if t.is_char_device() {
            Some("a character device")
        } else if t.is_block_device() {
            Some("a block device")
        } else if t.is_socket() {
            Some("a socket")
        } else {
            Some("not a regular file")
        }
    };
    let refuse = |what: &str| {
        std::io::Error::new(
            std::io::ErrorKind::InvalidInput,
            format!("{what}, not a regular file; refused"),
        )
    };
    if let Some(what) = kind(std::fs::metadata(path)?.file_type()) {
        return Err(refuse(what));
    }
    let file = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NONBLOCK | libc::O_NOCTTY)
        .open(path)?;
    if let Some(what) = kind(file.metadata()?.file_type()) {
        return Err(refuse(what));
    }
    Ok(file)
}

fn print(s: &str) {
    let _ = std::io::stdout().lock().write_all(s.as_bytes());
}

/// A usage error: the message, the usage line, status 2.
pub fn usage(msg: &str) -> i32 {
    eprint!("ibv-shim trace: {msg}\n{USAGE}");
    2
}

fn report_lost(name: &str, t: &Trace) {
    if t.lost_full + t.lost_no_ring > 0 {
        eprintln!(
            "ibv-shim trace: {name}: pid {}: {} records lost ({} to full rings, {} with no ring to write to; {} rings)",
            t.pid,
            t.lost_full + t.lost_no_ring,
            t.lost_full,
            t.lost_no_ring,
            t.rings
        );
    }
}

/// A record's wall-clock time in ns.
fn realtime(t: &Trace, r: &Record) -> u64 {
    t.realtime_ns
        .wrapping_add(r.start_ns.wrapping_sub(t.monotonic_ns))
}

fn micros(ns: u64) -> String {
    format!("{}.{}us", ns / 1000, ns % 1000 / 100)
}

/// The log's line format: `ibv-shim <secs>.<micros> <pid>:<tid> DEBUG ...`.
fn text(traces: &[Trace]) -> String {
    let mut out = String::new();
    for t in traces {
        for r in &t.records {
            let ns = realtime(t, r);
            out.push_str(&format!(
                "ibv-shim {}.{:06} {}:{} {} {}",
                ns / 1_000_000_000,
                ns % 1_000_000_000 / 1000,
                t.pid,
                r.tid,
                if r.flags & FLAG_EVENT != 0 {
                    "EVENT"
                } else {
                    "DEBUG"
                },
                r.call
            ));
            if !r.result.is_empty() {
                out.push_str(&format!(" = {}", r.result));
            }
            if r.failed() {
                out.push_str(&format!(" errno={}", errno_name(r.errno)));
            }
            if r.flags & FLAG_EVENT == 0 {
                out.push_str(&format!(" [{}]", micros(r.dur_ns)));
            }
            if r.flags & FLAG_TRUNCATED != 0 {
                out.push_str(" (cut)");
            }
            out.push('\n');
        }
        out.push_str(&lost_line("ibv-shim trace: ", t));
    }
    out
}

/// `PREFIXpid N: M records lost\n`, or nothing when none was.
fn lost_line(prefix: &str, t: &Trace) -> String {
    match t.lost_full + t.lost_no_ring {
        0 => String::new(),
        n => format!("{prefix}pid {}: {n} records lost\n", t.pid),
    }
}

/// The arguments of `name(a=1, b=2)` as a JSON object (`args` when they
/// do not split cleanly).
fn arguments(call: &str) -> Value {
    let inner = call
        .split_once('(')
        .map(|(_, rest)| rest.strip_suffix(')').unwrap_or(rest))
        .unwrap_or("");
    let mut map = serde_json::Map::new();
    for part in inner.split(", ").filter(|p| !p.is_empty()) {
        match part.split_once('=') {
            Some((k, v)) if !k.contains(' ') => {
                map.insert(k.to_string(), Value::String(v.to_string()));
            }
            _ => {
                return json!({ "args": inner });
            }
        }
    }
    Value::Object(map)
}

/// Chrome trace-event JSON: complete events ("X") per call, instants
/// ("i") per event, thread names as metadata; times in microseconds from
/// the earliest record.
fn chrome(traces: &[Trace]) -> Value {
    let origin = traces
        .iter()
        .flat_map(|t| t.records.iter().map(move |r| realtime(t, r)))
        .min()
        .unwrap_or(0);
    let mut events = Vec::new();
    for t in traces {
        let mut threads: Vec<u32> = t.records.iter().map(|r| r.tid).collect();
        threads.sort_unstable();
        threads.dedup();
        events.push(
            json!({"ph": "M", "name": "process_name", "pid": t.pid, "tid": 0,
            "args": {"name": format!("pid {}", t.pid)}}),
        );
        for tid in threads {
            events.push(
                json!({"ph": "M", "name": "thread_name", "pid": t.pid, "tid": tid,
                "args": {"name": format!("thread {tid}")}}),
            );
        }
        for r in &t.records {
            let ts = (realtime(t, r) - origin) as f64 / 1000.0;
            let mut args = arguments(&r.call);
            args["result"] = Value::String(r.result.trim_start_matches(" = ").to_string());
            if r.failed() {
                args["errno"] = Value::String(errno_name(r.errno));
                args["failed"] = Value::Bool(true);
            }
            let mut e = json!({
                "name": r.name(),
                "cat": if r.failed() { "verbs,failed" } else { "verbs" },
                "pid": t.pid,
                "tid": r.tid,
                "ts": ts,
                "args": args,
            });
            if r.flags & FLAG_EVENT != 0 {
                e["ph"] = json!("i");
                e["s"] = json!("t");
            } else {
                e["ph"] = json!("X");
                e["dur"] = json!(r.dur_ns as f64 / 1000.0);
            }
            if r.failed() {
                // Chrome's reserved colour name: failed calls stand out.
                e["cname"] = json!("terrible");
            }
            events.push(e);
        }
    }
    json!({ "traceEvents": events, "displayTimeUnit": "ns" })
}

#[derive(Default)]
struct VerbStats {
    durations: Vec<u64>,
    errors: BTreeMap<String, u64>,
}

fn percentile(sorted: &[u64], p: f64) -> u64 {
    if sorted.is_empty() {
        return 0;
    }
    // Nearest rank.
    let rank = ((p / 100.0) * sorted.len() as f64).ceil() as usize;
    sorted[rank.clamp(1, sorted.len()) - 1]
}

fn stats(traces: &[Trace]) -> String {
    let mut verbs: BTreeMap<&str, VerbStats> = BTreeMap::new();
    for r in traces.iter().flat_map(|t| &t.records) {
        if r.flags & FLAG_EVENT != 0 {
            continue;
        }
        let v = verbs.entry(r.name()).or_default();
        v.durations.push(r.dur_ns);
        if r.failed() {
            *v.errors.entry(errno_name(r.errno)).or_default() += 1;
        }
    }
    let mut out = format!(
        "{:<28} {:>8} {:>8} {:>12} {:>10} {:>10} {:>10} {:>10}  errors by errno\n",
        "verb", "calls", "errors", "total", "mean", "p50", "p99", "max"
    );
    for (name, v) in &mut verbs {
        v.durations.sort_unstable();
        let total: u64 = v.durations.iter().sum();
        let n = v.durations.len() as u64;
        let errors: u64 = v.errors.values().sum();
        let by: Vec<String> = v.errors.iter().map(|(e, c)| format!("{e}:{c}")).collect();
        out.push_str(&format!(
            "{:<28} {:>8} {:>8} {:>12} {:>10} {:>10} {:>10} {:>10}  {}\n",
            name,
            n,
            errors,
            micros(total),
            micros(total / n.max(1)),
            micros(percentile(&v.durations, 50.0)),
            micros(percentile(&v.durations, 99.0)),
            micros(*v.durations.last().unwrap_or(&0)),
            if by.is_empty() {
                "-".to_string()
            } else {
                by.join(" ")
            }
        ));
    }
    for t in traces {
        out.push_str(&lost_line("", t));
    }
    out
}

/// A field of an event's call text (`post_send(qp_num=0x1a, wr_id=0x2)`).
fn field(call: &str, key: &str) -> Option<u64> {
    let at = call.find(&format!("{key}="))? + key.len() + 1;
    let v: String = call[at..]
        .chars()
        .take_while(|c| c.is_ascii_alphanumeric())
        .collect();
    match v.strip_prefix("0x") {
        Some(h) => u64::from_str_radix(h, 16).ok(),
        None => v.parse().ok(),
    }
}

/// One QP's posts and completions.
#[derive(Default)]
struct QpFlow {
    posts: u64,
    completions: u64,
    failed: u64,
    latencies: Vec<u64>,
    /// Post times not yet completed, by (receive?, wr_id).
    pending: HashMap<(bool, u64), VecDeque<u64>>,
}

/// Per QP of each process: posts, completions and post-to-completion
/// latency (a completion takes the oldest pending post of its wr_id).
fn per_qp(traces: &[Trace]) -> String {
    let mut qps: BTreeMap<(u32, u64), QpFlow> = BTreeMap::new();
    for t in traces {
        for r in t.records.iter().filter(|r| r.flags & FLAG_EVENT != 0) {
            let recv = match r.name() {
                "post_send" => Some(false),
                "post_recv" => Some(true),
                "completion" => None,
                _ => continue,
            };
            let (Some(qp), Some(wr_id)) = (field(&r.call, "qp_num"), field(&r.call, "wr_id"))
            else {
                continue;
            };
            let q = qps.entry((t.pid, qp)).or_default();
            match recv {
                Some(recv) => {
                    q.posts += 1;
                    q.pending
                        .entry((recv, wr_id))
                        .or_default()
                        .push_back(r.start_ns);
                }
                None => {
                    q.completions += 1;
                    q.failed += r.failed() as u64;
                    let recv = field(&r.call, "recv") == Some(1);
                    let posted = q
                        .pending
                        .get_mut(&(recv, wr_id))
                        .and_then(|p| p.pop_front());
                    if let Some(at) = posted {
                        q.latencies.push(r.start_ns.saturating_sub(at));
                    }
                }
            }
        }
    }
    let mut out = format!(
        "{:>8} {:>10} {:>8} {:>11} {:>8} {:>8} {:>10} {:>10} {:>10} {:>10}\n",
        "pid", "qp_num", "posts", "completions", "failed", "matched", "mean", "p50", "p99", "max"
    );
    for ((pid, qp), q) in &mut qps {
        q.latencies.sort_unstable();
        let n = q.latencies.len() as u64;
        let total: u64 = q.latencies.iter().sum();
        out.push_str(&format!(
            "{:>8} {:>10} {:>8} {:>11} {:>8} {:>8} {:>10} {:>10} {:>10} {:>10}\n",
            pid,
            format!("{qp:#x}"),
            q.posts,
            q.completions,
            q.failed,
            n,
            micros(total / n.max(1)),
            micros(percentile(&q.latencies, 50.0)),
            micros(percentile(&q.latencies, 99.0)),
            micros(*q.latencies.last().unwrap_or(&0)),
        ));
    }
    for t in traces {
        out.push_str(&lost_line("", t));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn arguments_split_into_fields() {
        assert_eq!(
            arguments("ibv_open_device(device=0x10 mlx5_0/98)"),
            json!({"device": "0x10 mlx5_0/98"})
        );
        assert_eq!(
            arguments("ibv_reg_mr(pd=0x1, addr=0x2, length=3)"),
            json!({"pd": "0x1", "addr": "0x2", "length": "3"})
        );
        assert_eq!(arguments("f()"), json!({}));
    }

    #[test]
    fn percentiles_are_nearest_rank() {
        let v: Vec<u64> = (1..=100).collect();
        assert_eq!(percentile(&v, 50.0), 50);
        assert_eq!(percentile(&v, 99.0), 99);
        assert_eq!(percentile(&[7], 99.0), 7);
        assert_eq!(percentile(&[], 50.0), 0);
    }
}
