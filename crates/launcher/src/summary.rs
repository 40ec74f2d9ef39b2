//! The summary printed after the program exits, from its processes'
//! reports.
//!
//! ```text
//! ibv-shim: leaky leaked 3 RDMA objects: 1 pd, 1 mr, 1 context (1 suppressed)
//! ibv-shim:   pd           0x5581a2c0 on rxe0, created at leaky:main+0x5d (orphaned at close)
//! ...
//! ```
//!
//! With several processes, each leaking one gets a `pid N:` line over its
//! objects. At most [`MAX_OBJECT_LINES`] objects are listed.

use std::path::PathBuf;

use report_model::Kind;

use crate::report::{Object, Report};
use crate::status::Started;

/// How many leaked objects the summary lists.
pub const MAX_OBJECT_LINES: usize = 10;

/// Every line starts with this.
pub const PREFIX: &str = "ibv-shim: ";

/// The order kinds are counted in: parents before children, as the
/// contract lists them, then contexts and device lists (the model's order
/// with its first two last). Kinds not known follow in alphabetical order.
fn rank(kind: &str) -> usize {
    let n = Kind::ALL.len();
    Kind::from_name(kind).map_or(usize::MAX, |k| (k.index() + n - 2) % n)
}

/// How the program ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Status {
    Exited(i32),
    Signaled(i32),
}

/// Why the launcher exits with its status.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Reason {
    /// The program's own exit status.
    Program,
    /// 128 + the signal that killed the program.
    Signal(i32),
    /// The leak exit code: the program leaked.
    Leak,
}

/// The launcher's exit status: the program's, 128+signal, or the leak exit
/// code when a process leaked and the program exited with it or with 0.
pub fn exit_status(status: Status, leak_exitcode: Option<u8>, leaked: bool) -> (i32, Reason) {
    match (status, leak_exitcode) {
        (Status::Signaled(sig), _) => (128 + sig, Reason::Signal(sig)),
        (Status::Exited(code), Some(n)) if leaked && (code == i32::from(n) || code == 0) => {
            (i32::from(n), Reason::Leak)
        }
        (Status::Exited(code), _) => (code, Reason::Program),
    }
}

/// What the summary is made from.
#[derive(Debug)]
pub struct Input<'a> {
    /// The program as the user named it.
    pub program: &'a str,
    /// This run's reports, in file name order.
    pub reports: &'a [Report],
    /// Report files that could not be read, with why.
    pub unreadable: &'a [(PathBuf, String)],
    /// The files read, when the user asked to keep them (`--report`).
    pub kept: Option<&'a [PathBuf]>,
    /// The launcher's exit status and why.
    pub exit: (i32, Reason),
    /// The leak exit code in force, if any.
    pub leak_exitcode: Option<u8>,
    /// The processes that used verbs (those that wrote a report, and those
    /// that died before they could).
    pub started: &'a [Started],
    /// Processes whose report could not be written where it goes, with
    /// why (the path is a FIFO, a link, ...): the shim refused it.
    pub refused: &'a [(u64, String)],
    /// The pid of the program the launcher started.
    pub child: Option<u32>,
}

/// `s` with each control character (C0, DEL, C1: a terminal's escape
/// sequences, a newline that would start a line of its own) shown as
/// `\xNN`, and a backslash as `\\` so the text reads back unambiguously.
pub fn printable(s: &str) -> std::borrow::Cow<'_, str> {
    if !s.chars().any(|c| c.is_control() || c == '\\') {
        return s.into();
    }
    let mut out = String::with_capacity(s.len() + 8);
    for c in s.chars() {
        match c {
            '\\' => out.push_str("\\\\"),
            c if c.is_control() => out.push_str(&format!("\\x{:02x}", c as u32)),
            c => out.push(c),
        }
    }
    out.into()
}

/// A file name without its directory.
fn base(path: &str) -> &str {
    path.rsplit('/').next().unwrap_or(path)
}

/// What to call the program: the process that used verbs when that is
/// not the program the user named (a wrapper: `timeout 20 prog`), else the
/// program as named.
fn subject(input: &Input) -> String {
    let mut used = input
        .reports
        .iter()
        .map(|r| r.program.as_deref().unwrap_or_default())
        .chain(input.started.iter().map(|s| s.program.as_str()))
        .map(base);
    match used.next() {
        Some(first)
            if !first.is_empty() && used.all(|p| p == first) && first != base(input.program) =>
        {
            first.to_string()
        }
        _ => input.program.to_string(),
    }
}

/// The summary's lines, each starting with [`PREFIX`], without newlines.
pub fn lines(input: &Input) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    // Report fields (programs, modules, devices) are the program's text: a
    // control character in one would reach the terminal.
    let mut say = |s: String| out.push(format!("{PREFIX}{}", printable(&s)));
    for (path, why) in input.unreadable {
        say(format!("cannot read the report {}: {why}", path.display()));
    }
    for r in input.reports {
        if let Some(why) = &r.truncated {
            let pid = r.pid.map_or("?".to_string(), |p| p.to_string());
            say(format!("the report of pid {pid} is truncated: {why}"));
        }
    }
    if let Some(line) = crate::checks_line::line(input.reports) {
        say(line);
    }
    let named = subject(input);
    let program = named.as_str();
    let reports = input.reports;
    // Processes that used verbs but wrote no report: they never reached
    // their exit (killed, `_exit`, or still running).
    let lost: Vec<&Started> = input
        .started
        .iter()
        .filter(|s| !reports.iter().any(|r| r.pid == Some(s.pid)))
        .collect();
    for s in &lost {
        let name = match s.program.as_str() {
            "" => "a process".to_string(),
            p => base(p).to_string(),
        };
        let signal = s.signal.or(match input.exit.1 {
            Reason::Signal(sig) if input.child.map(u64::from) == Some(s.pid) => Some(sig),
            _ => None,
        });
        let refused = input.refused.iter().find(|(pid, _)| *pid == s.pid);
        match (signal, refused) {
            (_, Some((_, why))) => say(format!(
                "{name} (pid {}) used verbs but its report was refused: {why}",
                s.pid
            )),
            (Some(sig), None) => say(format!(
                "{name} (pid {}) was killed by {} before writing its report",
                s.pid,
                signal_name(sig)
            )),
            (None, None) => say(format!(
                "{name} (pid {}) used verbs but wrote no report: it did not exit normally \
                 (killed, or _exit) or is still running",
                s.pid
            )),
        }
    }
    let leaking: Vec<&Report> = reports.iter().filter(|r| total(&r.counts()) > 0).collect();
    let counts = merge(reports.iter().map(Report::counts));
    let leaked = total(&counts);
    let suppressed: u64 = reports.iter().map(Report::suppressed).sum();
    let kept_by_libraries = merge_kept(reports);
    let mut suppressed_note = if suppressed > 0 {
        format!(" ({suppressed} suppressed)")
    } else {
        String::new()
    };
    for (owner, n) in &kept_by_libraries {
        suppressed_note.push_str(&format!(
            "; {} kept by {owner} (suppressed by default)",
            plural(*n, "object", "objects")
        ));
    }

    let unreadable_note = if input.unreadable.is_empty() {
        ""
    } else {
        " in the reports that could be read"
    };
    if reports.is_empty() {
        match input.exit.1 {
            // The lines above already say what there is.
            _ if !input.unreadable.is_empty() || !lost.is_empty() => {}
            Reason::Signal(sig) => say(format!(
                "{program} was killed by {}; no leak report was written",
                signal_name(sig)
            )),
            _ => say(format!("{program} made no verbs calls")),
        }
    } else if leaked == 0 {
        say(format!(
            "no RDMA resources leaked{unreadable_note}{suppressed_note}"
        ));
    } else {
        let processes = match (leaking.len(), reports.len()) {
            (_, 1) => String::new(),
            (l, n) if l == n => format!(" in {n} processes"),
            (l, n) => format!(" in {l} of {n} processes"),
        };
        say(format!(
            "{program} leaked {}{processes}: {}{suppressed_note}",
            plural(leaked, "RDMA object", "RDMA objects"),
            describe_counts(&counts)
        ));
        let mut listed = 0usize;
        let mut unlisted = 0u64;
        for r in &leaking {
            let objects: Vec<&Object> = r
                .objects
                .iter()
                .flatten()
                .filter(|o| !o.suppressed)
                .collect();
            let indent = if reports.len() > 1 {
                if listed < MAX_OBJECT_LINES {
                    let pid = r.pid.map_or("?".to_string(), |p| p.to_string());
                    // Descendants may be other programs (fork and exec).
                    let name = r
                        .program
                        .as_deref()
                        .map(|p| format!(" ({})", p.rsplit('/').next().unwrap_or(p)))
                        .unwrap_or_default();
                    say(format!(
                        "  pid {pid}{name}: {}",
                        describe_counts(&order(r.counts()))
                    ));
                }
                "    "
            } else {
                "  "
            };
            for o in &objects {
                if listed < MAX_OBJECT_LINES {
                    say(format!("{indent}{}", object_line(o)));
                    listed += 1;
                } else {
                    unlisted += 1;
                }
            }
            // A report with totals but no (or an incomplete) object list
            // adds what it cannot list.
            unlisted += total(&r.counts()).saturating_sub(objects.len() as u64);
        }
        if unlisted > 0 && listed > 0 {
            say(format!("  ... and {unlisted} more"));
        }
    }

    match input.exit {
        (code, Reason::Signal(sig))
            if !reports.is_empty()
                && !lost
                    .iter()
                    .any(|s| input.child.map(u64::from) == Some(s.pid)) =>
        {
            // The launcher's own child, which a wrapper may be.
            say(format!(
                "{} was killed by {}; exit status {code}",
                input.program,
                signal_name(sig)
            ))
        }
        (code, Reason::Leak) => say(format!(
            "exit status {code}: the program leaked (--leak-exitcode {})",
            input.leak_exitcode.map_or(code, i32::from)
        )),
        _ => {}
    }
    if leaked > 0 || suppressed > 0 {
        match input.kept {
            Some([one]) => say(format!("full report: {}", one.display())),
            Some(files) if !files.is_empty() => say(format!(
                "full reports: {}",
                files
                    .iter()
                    .map(|f| f.display().to_string())
                    .collect::<Vec<_>>()
                    .join(" ")
            )),
            Some(_) => {}
            None if leaked > 0 => say("--report PATH keeps the full JSON report".into()),
            None => {}
        }
    }
    out
}

/// `kind handle on device, created at site (found)`.
fn object_line(o: &Object) -> String {
    let mut s = format!("{:<12} {}", o.kind, o.handle.as_deref().unwrap_or("?"));
    if let Some(dev) = &o.device {
        s.push_str(" on ");
        s.push_str(dev);
    }
    match o.site() {
        Some(site) => {
            s.push_str(", created at ");
            s.push_str(&site);
        }
        None => s.push_str(", creation site unknown"),
    }
    match o.found.as_deref() {
        Some("close") => s.push_str(" (orphaned at close)"),
        Some("exit") => s.push_str(" (still live at exit)"),
        _ => {}
    }
    s
}

/// Objects kept on purpose by libraries, over all reports, by library.
fn merge_kept(reports: &[Report]) -> Vec<(String, u64)> {
    let mut kept: Vec<(String, u64)> = Vec::new();
    for (owner, n) in reports.iter().flat_map(Report::kept) {
        match kept.iter_mut().find(|(k, _)| *k == owner) {
            Some((_, m)) => *m += n,
            None => kept.push((owner, n)),
        }
    }
    kept
}

/// Adds per-process counts together, in [`rank`] order.
fn merge(all: impl Iterator<Item = Vec<(String, u64)>>) -> Vec<(String, u64)> {
    let mut counts: Vec<(String, u64)> = Vec::new();
    for (kind, n) in all.flatten() {
        match counts.iter_mut().find(|(k, _)| *k == kind) {
            Some((_, m)) => *m += n,
            None => counts.push((kind, n)),
        }
    }
    order(counts)
}

fn order(mut counts: Vec<(String, u64)>) -> Vec<(String, u64)> {
    counts.retain(|(_, n)| *n > 0);
    counts.sort_by(|(a, _), (b, _)| rank(a).cmp(&rank(b)).then_with(|| a.cmp(b)));
    counts
}

fn total(counts: &[(String, u64)]) -> u64 {
    counts.iter().map(|(_, n)| n).sum()
}

/// `1 pd, 2 mr, 1 cq`.
fn describe_counts(counts: &[(String, u64)]) -> String {
    counts
        .iter()
        .map(|(k, n)| format!("{n} {k}"))
        .collect::<Vec<_>>()
        .join(", ")
}

fn plural(n: u64, one: &str, many: &str) -> String {
    format!("{n} {}", if n == 1 { one } else { many })
}

/// `signal 9 (SIGKILL)`.
pub fn signal_name(sig: i32) -> String {
    let name = match sig {
        1 => "SIGHUP",
        2 => "SIGINT",
        3 => "SIGQUIT",
        4 => "SIGILL",
        5 => "SIGTRAP",
        6 => "SIGABRT",
        7 => "SIGBUS",
        8 => "SIGFPE",
        9 => "SIGKILL",
        10 => "SIGUSR1",
        11 => "SIGSEGV",
        12 => "SIGUSR2",
        13 => "SIGPIPE",
        14 => "SIGALRM",
        15 => "SIGTERM",
        _ => return format!("signal {sig}"),
    };
    format!("signal {sig} ({name})")
}

#[cfg(test)]
mod tests {
    use super::*;

    const ONE_PROCESS: &str = r#"{
      "schema": "ibv-shim/leak-report/1",
      "pid": 4242,
      "program": "/tmp/leaky",
      "leaked": true,
      "totals": {"context": 1, "pd": 1, "mr": 2, "cq": 1},
      "objects": [
        {"kind": "context", "handle": "0x5581a000", "context": null, "device": "rxe0",
         "guid": "0c42a10300123456", "parent": null, "fields": {},
         "created": {"thread": 1, "time": 0.25, "module": "/tmp/leaky", "symbol": "main",
                     "offset": 42, "backtrace": null},
         "found": "exit", "suppressed": false},
        {"kind": "pd", "handle": "0x5581a2c0", "context": "0x5581a000", "device": "rxe0",
         "guid": null, "parent": null, "fields": {},
         "created": {"thread": 1, "time": 0.5, "module": "/tmp/leaky", "symbol": "main",
                     "offset": 93, "backtrace": null},
         "found": "exit", "suppressed": false},
        {"kind": "mr", "handle": "0x5581a400", "context": "0x5581a000", "device": "rxe0",
         "parent": "0x5581a2c0", "fields": {"lkey": 7},
         "created": {"module": "/usr/lib/libhelper.so", "symbol": null, "offset": 4096},
         "found": "exit", "suppressed": false},
        {"kind": "mr", "handle": "0x5581a500", "device": null,
         "created": {"module": null},
         "found": "close", "suppressed": false},
        {"kind": "cq", "handle": "0x5581a600", "device": "rxe0",
         "created": {"module": "/tmp/leaky", "symbol": "make_cq", "offset": 8},
         "found": "exit", "suppressed": false},
        {"kind": "pd", "handle": "0x5581a700", "device": "rxe0",
         "created": {"module": "/usr/lib/libkeeper.so", "symbol": "init", "offset": 1},
         "found": "exit", "suppressed": true}
      ]
    }"#;

    /// A report from a short fixture, completed to the model's document.
    fn report(json: &str) -> Report {
        Report::parse(&crate::report::tests::complete(json)).expect("valid report")
    }

    fn summary(reports: &[Report], exit: (i32, Reason), leak: Option<u8>) -> Vec<String> {
        lines(&Input {
            program: "./leaky",
            reports,
            unreadable: &[],
            kept: None,
            exit,
            leak_exitcode: leak,
            started: &[],
            refused: &[],
            child: None,
        })
    }

    #[test]
    fn one_leaking_process() {
        let got = summary(&[report(ONE_PROCESS)], (0, Reason::Program), None);
        let want = [
            "ibv-shim: ./leaky leaked 5 RDMA objects: 1 pd, 2 mr, 1 cq, 1 context (1 suppressed)",
            "ibv-shim:   context      0x5581a000 on rxe0, created at leaky:main+0x2a (still live at exit)",
            "ibv-shim:   pd           0x5581a2c0 on rxe0, created at leaky:main+0x5d (still live at exit)",
            "ibv-shim:   mr           0x5581a400 on rxe0, created at libhelper.so+0x1000 (still live at exit)",
            "ibv-shim:   mr           0x5581a500, creation site unknown (orphaned at close)",
            "ibv-shim:   cq           0x5581a600 on rxe0, created at leaky:make_cq+0x8 (still live at exit)",
            "ibv-shim: --report PATH keeps the full JSON report",
        ];
        assert_eq!(got, want);
    }

    #[test]
    fn the_leak_exit_code_is_explained_and_kept_reports_named() {
        let r = [report(ONE_PROCESS)];
        let kept = [PathBuf::from("/out/r.4242.json")];
        let got = lines(&Input {
            program: "./leaky",
            reports: &r,
            unreadable: &[],
            kept: Some(&kept),
            exit: (23, Reason::Leak),
            leak_exitcode: Some(23),
            started: &[],
            refused: &[],
            child: None,
        });
        let tail = &got[got.len() - 2..];
        assert_eq!(
            tail,
            [
                "ibv-shim: exit status 23: the program leaked (--leak-exitcode 23)",
                "ibv-shim: full report: /out/r.4242.json",
            ]
        );
    }

    #[test]
    fn nothing_leaked() {
        let clean = r#"{"schema":"ibv-shim/leak-report/1","pid":1,"program":"p","leaked":false,"totals":{},"objects":[]}"#;
        assert_eq!(
            summary(&[report(clean)], (0, Reason::Program), None),
            ["ibv-shim: no RDMA resources leaked"]
        );
        let only_suppressed = r#"{"leaked":false,"objects":[{"kind":"context","suppressed":true},{"kind":"pd","suppressed":true}]}"#;
        assert_eq!(
            summary(&[report(only_suppressed)], (0, Reason::Program), None),
            ["ibv-shim: no RDMA resources leaked (2 suppressed)"]
        );
        let kept = r#"{"leaked":false,"objects":[
            {"kind":"device_list","suppressed":true,"kept_by":"librdmacm"},
            {"kind":"context","suppressed":true,"kept_by":"librdmacm"},
            {"kind":"pd","suppressed":true,"kept_by":null}]}"#;
        assert_eq!(
            summary(&[report(kept)], (0, Reason::Program), None),
            ["ibv-shim: no RDMA resources leaked (1 suppressed); 2 objects kept by librdmacm (suppressed by default)"]
        );
    }

    #[test]
    fn no_report_means_no_verbs_calls_unless_killed() {
        assert_eq!(
            summary(&[], (0, Reason::Program), None),
            ["ibv-shim: ./leaky made no verbs calls"]
        );
        assert_eq!(
            summary(&[], (137, Reason::Signal(9)), None),
            ["ibv-shim: ./leaky was killed by signal 9 (SIGKILL); no leak report was written"]
        );
    }

    #[test]
    fn several_processes_get_a_line_each() {
        let parent = r#"{"pid":100,"leaked":true,"objects":[
            {"kind":"pd","handle":"0x10","device":"sim0","created":{"module":"/bin/forker","symbol":"main","offset":16},"found":"close"},
            {"kind":"context","handle":"0x1","device":"sim0","created":{"module":"/bin/forker","symbol":"main","offset":8},"found":"exit"}]}"#;
        let child = r#"{"pid":101,"program":"/usr/bin/helper","leaked":true,"objects":[
            {"kind":"pd","handle":"0x20","device":"sim0","created":{"module":"/bin/forker","symbol":"child","offset":4},"found":"exit"}]}"#;
        let clean = r#"{"pid":102,"leaked":false,"objects":[]}"#;
        let got = summary(
            &[report(parent), report(child), report(clean)],
            (0, Reason::Program),
            None,
        );
        let want = [
            "ibv-shim: ./leaky leaked 3 RDMA objects in 2 of 3 processes: 2 pd, 1 context",
            "ibv-shim:   pid 100: 1 pd, 1 context",
            "ibv-shim:     pd           0x10 on sim0, created at forker:main+0x10 (orphaned at close)",
            "ibv-shim:     context      0x1 on sim0, created at forker:main+0x8 (still live at exit)",
            "ibv-shim:   pid 101 (helper): 1 pd",
            "ibv-shim:     pd           0x20 on sim0, created at forker:child+0x4 (still live at exit)",
            "ibv-shim: --report PATH keeps the full JSON report",
        ];
        assert_eq!(got, want);
    }

    #[test]
    fn at_most_ten_objects_are_listed() {
        let objects: Vec<String> = (0..25)
            .map(|i| format!(r#"{{"kind":"mr","handle":"0x{i:x}","found":"exit"}}"#))
            .collect();
        let doc = format!(r#"{{"pid":7,"objects":[{}]}}"#, objects.join(","));
        let got = summary(&[report(&doc)], (0, Reason::Program), None);
        assert_eq!(got[0], "ibv-shim: ./leaky leaked 25 RDMA objects: 25 mr");
        assert_eq!(got.len(), 1 + MAX_OBJECT_LINES + 2);
        assert_eq!(got[MAX_OBJECT_LINES + 1], "ibv-shim:   ... and 15 more");
    }

    #[test]
    fn totals_only_and_unreadable_reports() {
        let doc = r#"{"pid":9,"leaked":true,"totals":{"qp":2,"pd":1},"truncated":"out of memory"}"#;
        let bad = [(
            PathBuf::from("/t/r.8.json"),
            "EOF while parsing".to_string(),
        )];
        let got = lines(&Input {
            program: "p",
            reports: &[report(doc)],
            unreadable: &bad,
            kept: None,
            exit: (0, Reason::Program),
            leak_exitcode: None,
            started: &[],
            refused: &[],
            child: None,
        });
        assert_eq!(
            got[0],
            "ibv-shim: cannot read the report /t/r.8.json: EOF while parsing"
        );
        // A truncated report's list is short: its totals are counted.
        assert!(
            got.iter()
                .any(|l| l == "ibv-shim: p leaked 3 RDMA objects: 1 pd, 2 qp"),
            "{got:?}"
        );
        // An unreadable report is not a clean one.
        let only_bad = lines(&Input {
            program: "p",
            reports: &[],
            unreadable: &bad,
            kept: None,
            exit: (0, Reason::Program),
            leak_exitcode: None,
            started: &[],
            refused: &[],
            child: None,
        });
        assert_eq!(only_bad.len(), 1, "{only_bad:?}");
        let clean = report(r#"{"pid":9,"leaked":false,"objects":[]}"#);
        let partly = lines(&Input {
            program: "p",
            reports: &[clean],
            unreadable: &bad,
            kept: None,
            exit: (0, Reason::Program),
            leak_exitcode: None,
            started: &[],
            refused: &[],
            child: None,
        });
        assert_eq!(
            partly[1],
            "ibv-shim: no RDMA resources leaked in the reports that could be read"
        );
    }

    #[test]
    fn a_process_that_died_before_its_report_is_named_with_its_signal() {
        let run = |started: &[Started], exit, child| {
            lines(&Input {
                program: "timeout",
                reports: &[],
                unreadable: &[],
                kept: None,
                exit,
                leak_exitcode: None,
                started,
                refused: &[],
                child,
            })
        };
        let prog = |signal| Started {
            pid: 42,
            program: "/opt/bin/rping".into(),
            signal,
        };
        // Through a wrapper: the shim saw the signal.
        assert_eq!(
            run(&[prog(Some(15))], (124, Reason::Program), Some(41)),
            ["ibv-shim: rping (pid 42) was killed by signal 15 (SIGTERM) before writing its report"]
        );
        // The launcher's own child: its wait status says.
        assert_eq!(
            run(&[prog(None)], (137, Reason::Signal(9)), Some(42)),
            ["ibv-shim: rping (pid 42) was killed by signal 9 (SIGKILL) before writing its report"]
        );
        assert_eq!(
            run(&[prog(None)], (0, Reason::Program), Some(41)),
            ["ibv-shim: rping (pid 42) used verbs but wrote no report: it did not exit normally (killed, or _exit) or is still running"]
        );
        // The shim refused to write where the report goes: that is said.
        let refused = [(42, "/r/x.json is a FIFO, not a regular file".to_string())];
        let got = lines(&Input {
            program: "rping",
            reports: &[],
            unreadable: &[],
            kept: None,
            exit: (0, Reason::Program),
            leak_exitcode: None,
            started: &[prog(None)],
            refused: &refused,
            child: Some(42),
        });
        assert_eq!(
            got,
            ["ibv-shim: rping (pid 42) used verbs but its report was refused: /r/x.json is a FIFO, not a regular file"]
        );
        // A report from the program a wrapper ran is named after it.
        let r = report(r#"{"pid":42,"program":"/opt/bin/rping","leaked":false,"objects":[]}"#);
        let got = lines(&Input {
            program: "timeout",
            reports: &[r],
            unreadable: &[],
            kept: None,
            exit: (0, Reason::Program),
            leak_exitcode: None,
            started: &[prog(None)],
            refused: &[],
            child: Some(41),
        });
        assert_eq!(got, ["ibv-shim: no RDMA resources leaked"]);
        let r = report(ONE_PROCESS);
        let got = lines(&Input {
            program: "timeout",
            reports: &[r],
            unreadable: &[],
            kept: None,
            exit: (0, Reason::Program),
            leak_exitcode: None,
            started: &[],
            refused: &[],
            child: Some(41),
        });
        assert!(
            got[0].starts_with("ibv-shim: leaky leaked 5 RDMA objects"),
            "{got:?}"
        );
    }

    #[test]
    fn a_truncated_report_says_so() {
        let r = report(
            r#"{"pid":5,"leaked":true,"totals":{"pd":1},"objects":[],"truncated":"out of memory"}"#,
        );
        assert_eq!(
            summary(&[r], (0, Reason::Program), None)[..2],
            [
                "ibv-shim: the report of pid 5 is truncated: out of memory",
                "ibv-shim: ./leaky leaked 1 RDMA object: 1 pd"
            ]
        );
        let r = report(r#"{"pid":5,"leaked":false,"objects":[],"truncated":null}"#);
        assert_eq!(
            summary(&[r], (0, Reason::Program), None),
            ["ibv-shim: no RDMA resources leaked"]
        );
    }

    #[test]
    fn a_signal_is_reported_with_the_summary() {
        let clean = r#"{"pid":1,"leaked":false,"objects":[]}"#;
        let got = summary(&[report(clean)], (139, Reason::Signal(11)), None);
        assert_eq!(
            got,
            [
                "ibv-shim: no RDMA resources leaked",
                "ibv-shim: ./leaky was killed by signal 11 (SIGSEGV); exit status 139",
            ]
        );
    }

    #[test]
    fn control_characters_from_reports_are_shown_escaped() {
        assert_eq!(printable("plain /x/y"), "plain /x/y");
        assert_eq!(
            printable("a\x1b]0;pwned\x07b\nc\u{9b}d\\"),
            "a\\x1b]0;pwned\\x07b\\x0ac\\x9bd\\\\"
        );
        let r = report(
            r#"{"pid":3,"program":"/bin/e\u001b[2Jvil","leaked":true,"objects":[
            {"kind":"pd","handle":"0x10","device":"mlx5\u001b[31m","created":{"module":"/x/m\nibv-shim: fake","symbol":"f","offset":1},"found":"exit"}]}"#,
        );
        let got = summary(&[r], (0, Reason::Program), None);
        assert!(
            got.iter().all(|l| !l.chars().any(char::is_control)),
            "{got:?}"
        );
        assert!(
            got[1].contains("on mlx5\\x1b[31m, created at m\\x0aibv-shim: fake:f+0x1"),
            "{got:?}"
        );
    }

    #[test]
    fn exit_status_rules() {
        use Status::*;
        assert_eq!(exit_status(Exited(7), None, true), (7, Reason::Program));
        assert_eq!(exit_status(Exited(0), None, true), (0, Reason::Program));
        assert_eq!(
            exit_status(Signaled(9), Some(23), true),
            (137, Reason::Signal(9))
        );
        assert_eq!(exit_status(Exited(23), Some(23), true), (23, Reason::Leak));
        // Another process leaked while the program itself exited cleanly.
        assert_eq!(exit_status(Exited(0), Some(23), true), (23, Reason::Leak));
        // The program's own failure is not hidden behind the leak code.
        assert_eq!(exit_status(Exited(1), Some(23), true), (1, Reason::Program));
        // The same number without a leak is the program's own.
        assert_eq!(
            exit_status(Exited(23), Some(23), false),
            (23, Reason::Program)
        );
        assert_eq!(
            exit_status(Exited(0), Some(23), false),
            (0, Reason::Program)
        );
    }
}
