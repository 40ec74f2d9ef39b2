//! `ibv-shim --fault-sweep -- PROGRAM`: run the program once to count its
//! injectable verbs calls (by verb and call site), then once per call (or
//! per distinct call site, `--sweep-sites`) with that call failing, and
//! report for each run how it ended and what it leaked.
//!
//! Each run is the program under the shim with `IBV_SHIM_FAULTS` set to one
//! rule naming the call (`VERB:nth=N`, or `VERB:site=MODULE+0xOFF:nth=1`),
//! watched by a reaper (`reaper.rs`: a hang is killed whole, descendants
//! that left its process group or session too, and a run is over only when
//! nothing of it runs), stdio to files. The
//! runs' order, and so the table, is the order of the counting run's calls:
//! the same program and options give the same table.

use std::collections::BTreeMap;
use std::ffi::OsString;
use std::io::{IsTerminal, Write};
use std::os::unix::fs::OpenOptionsExt;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use serde_json::{json, Value};

use crate::options::{Options, UsageError};
use crate::reaper;

mod pair;
use crate::report::Report;

/// The sweep's options.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Sweep {
    /// `--fault-sweep`.
    pub enabled: bool,
    /// `-j N` / `--jobs N`: runs at once (default 1).
    pub jobs: Option<usize>,
    /// `--sweep-verbs LIST`: the verbs to fail (`all`: every one, releases
    /// too); default every verb but the releases.
    pub verbs: Option<Vec<String>>,
    /// `--sweep-sites`: fail each distinct call site once.
    pub sites: bool,
    /// `--sweep-timeout SECS`: a run still going after it hangs (default 60).
    pub timeout: Option<u64>,
    /// `--sweep-json PATH` (default `ibv-shim-sweep.json`).
    pub json: Option<PathBuf>,
    /// `--sweep-infallible`: also fail the calls the real library cannot
    /// fail (`fault_rules::INFALLIBLE`), left out by default.
    pub infallible: bool,
    /// `--peer COMMAND`: the other end of a client/server pair, as words.
    pub peer: Option<Vec<OsString>>,
}

/// Checks the sweep options as a whole once the command line is read.
pub fn validate(o: &Options) -> Result<(), UsageError> {
    let s = &o.sweep;
    if !s.enabled && *s != Sweep::default() {
        return Err(UsageError(
            "-j, --sweep-verbs, --sweep-sites, --sweep-infallible, --sweep-timeout, --sweep-json and --peer go with --fault-sweep"
                .into(),
        ));
    }
    if s.peer.as_ref().is_some_and(|p| p.is_empty()) {
        return Err(UsageError("--peer names no program".into()));
    }
    if s.enabled && o.faults.is_some() {
        return Err(UsageError(
            "--faults and --fault-sweep do not go together: the sweep sets the rules".into(),
        ));
    }
    Ok(())
}

/// One call to fail.
#[derive(Clone, Debug)]
struct Planned {
    /// A call of the peer (`--peer`), not of the program.
    peer: bool,
    verb: String,
    nth: u64,
    site: String,
    rule: String,
}

/// How a run ended.
#[derive(Debug, Default)]
struct Outcome {
    exit: Option<i32>,
    signal: Option<i32>,
    hung: bool,
    /// Leaked objects by kind (suppressed ones left out).
    leaks: BTreeMap<String, u64>,
    /// The shim's reports listed the injected failure.
    injected: bool,
    /// No process wrote a report (the shim never ran, or the program died).
    no_report: bool,
    /// A peer still running after the program ended, stopped (not a hang).
    stopped: bool,
}

impl Outcome {
    fn crashed(&self) -> bool {
        !self.stopped
            && matches!(
                self.signal,
                Some(
                    libc::SIGSEGV
                        | libc::SIGABRT
                        | libc::SIGBUS
                        | libc::SIGILL
                        | libc::SIGFPE
                        | libc::SIGTRAP
                        | libc::SIGSYS
                )
            )
    }

    fn leaked(&self) -> bool {
        self.leaks.values().any(|&n| n > 0)
    }

    fn failed(&self) -> bool {
        self.crashed() || self.hung || self.leaked()
    }

    fn ended(&self) -> String {
        match (self.hung, self.signal, self.exit) {
            _ if self.stopped => "stopped".into(),
            (true, _, _) => "killed".into(),
            (_, Some(s), _) => signal_name(s),
            (_, _, Some(c)) => format!("exit {c}"),
            _ => "?".into(),
        }
    }

    fn verdict(&self, timeout: u64) -> String {
        let mut v = Vec::new();
        if self.crashed() {
            v.push("CRASH".to_string());
        }
        if self.hung {
            v.push(format!("HANG (>{timeout}s)"));
        }
        if self.leaked() {
            v.push("LEAK".into());
        }
        if v.is_empty() {
            v.push("ok".into());
        }
        v.join(" ")
    }

    fn leak_text(&self) -> String {
        let parts: Vec<String> = self
            .leaks
            .iter()
            .filter(|(_, &n)| n > 0)
            .map(|(k, n)| format!("{n} {k}"))
            .collect();
        match parts.is_empty() {
            true => "-".into(),
            false => parts.join(", "),
        }
    }
}

fn signal_name(s: i32) -> String {
    let name = match s {
        libc::SIGSEGV => "SIGSEGV",
        libc::SIGABRT => "SIGABRT",
        libc::SIGBUS => "SIGBUS",
        libc::SIGILL => "SIGILL",
        libc::SIGFPE => "SIGFPE",
        libc::SIGTRAP => "SIGTRAP",
        libc::SIGSYS => "SIGSYS",
        libc::SIGKILL => "SIGKILL",
        libc::SIGTERM => "SIGTERM",
        libc::SIGINT => "SIGINT",
        libc::SIGPIPE => "SIGPIPE",
        _ => return format!("signal {s}"),
    };
    name.into()
}

/// Set by SIGINT/SIGTERM: stop starting runs, kill the running ones.
static STOP: AtomicBool = AtomicBool::new(false);

extern "C" fn on_stop(_sig: libc::c_int) {
    STOP.store(true, Ordering::SeqCst);
}

fn catch_stop() {
    for sig in [libc::SIGINT, libc::SIGTERM, libc::SIGHUP] {
        // SAFETY: installs a handler that only stores to an atomic.
        unsafe {
            let mut new: libc::sigaction = std::mem::zeroed();
            new.sa_sigaction = on_stop as extern "C" fn(libc::c_int) as usize;
            libc::sigemptyset(&mut new.sa_mask);
            libc::sigaction(sig, &new, std::ptr::null_mut());
        }
    }
}

/// What every run shares.
struct Setup<'a> {
    program: PathBuf,
    o: &'a Options,
    vars: Vec<(OsString, OsString)>,
    work: PathBuf,
    timeout: u64,
    /// `--peer`: the other end of the pair.
    peer: Option<pair::Peer>,
}

/// A run started: its reaper, and the file the reaper writes how the run
/// ended to.
struct Running {
    child: std::process::Child,
    status: PathBuf,
}

impl Setup<'_> {
    /// Runs the program once: `extra` variables on top of the shim's, stdio
    /// to `work/NAME.out`, reports to `work/NAME.<pid>.json`.
    fn run(&self, name: &str, extra: &[(&str, OsString)]) -> Outcome {
        match self.spawn(name, false, extra) {
            Ok(r) => self.wait(name, r, None),
            Err(o) => o,
        }
    }

    /// Starts the program (`peer`: the peer) as [`run`](Self::run) does.
    fn spawn(
        &self,
        name: &str,
        peer: bool,
        extra: &[(&str, OsString)],
    ) -> Result<Running, Outcome> {
        let status = self.work.join(format!("{name}.status"));
        // The loader's variables as the launcher would give them: its own
        // (the shim first in LD_PRELOAD), else the inherited ones.
        let loader: Vec<(OsString, OsString)> = reaper::LOADER_VARS
            .iter()
            .filter_map(|k| {
                let v = self
                    .vars
                    .iter()
                    .find(|(name, _)| name == k)
                    .map(|(_, v)| v.clone())
                    .or_else(|| std::env::var_os(k))?;
                Some((OsString::from(k), v))
            })
            .collect();
        let (program, argv0, args) = match (&self.peer, peer) {
            (Some(p), true) => (&p.program, &p.argv0, p.args.as_slice()),
            _ => (&self.program, &self.o.program, self.o.args.as_slice()),
        };
        let mut cmd = reaper::command(program, argv0, args, self.timeout, &status, &loader);
        // The sweep's own rules only.
        cmd.env_remove("IBV_SHIM_FAULTS")
            .env_remove("IBV_SHIM_FAULT_COUNT");
        for (k, v) in &self.vars {
            if !reaper::LOADER_VARS.iter().any(|l| k == l) {
                cmd.env(k, v);
            }
        }
        if self.o.log.is_none() {
            // Each run's warnings (the injection, the leaks) are in its report.
            cmd.env("IBV_SHIM_LOG", "error");
        }
        let report = self.work.join(format!("{name}.%p.json"));
        cmd.env("IBV_SHIM_REPORT", &report);
        for (k, v) in extra {
            cmd.env(k, v);
        }
        // Made here, never an existing file or a link planted there.
        let out = std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .custom_flags(libc::O_NOFOLLOW | libc::O_CLOEXEC)
            .open(self.work.join(format!("{name}.out")));
        let (stdout, stderr) = match out.and_then(|f| Ok((f.try_clone()?, f))) {
            Ok((a, b)) => (Stdio::from(a), Stdio::from(b)),
            Err(_) => (Stdio::null(), Stdio::null()),
        };
        // The reaper (its own process group, away from the terminal's
        // signals) runs the program and kills what it leaves.
        cmd.stdin(Stdio::null())
            .stdout(stdout)
            .stderr(stderr)
            .process_group(0);
        match cmd.spawn() {
            Ok(child) => Ok(Running { child, status }),
            Err(_) => Err(Outcome {
                exit: Some(126),
                ..Outcome::default()
            }),
        }
    }

    /// Waits for a run to end and reads how it ended and its reports;
    /// past `stop_at` it is stopped (a peer the program no longer needs).
    fn wait(&self, name: &str, run: Running, stop_at: Option<Instant>) -> Outcome {
        let Running { mut child, status } = run;
        let mut outcome = Outcome::default();
        let reaper = child.id() as i32;
        // The reaper ends the run at the timeout; past it by this much it
        // is itself stuck, and killed.
        let give_up = Instant::now() + Duration::from_secs(self.timeout + 30);
        let mut told = false;
        loop {
            match child.try_wait() {
                Ok(Some(_)) | Err(_) => break,
                Ok(None) => {}
            }
            let late = stop_at.is_some_and(|t| Instant::now() >= t);
            if (STOP.load(Ordering::SeqCst) || late) && !told {
                // SAFETY: signals the reaper, our child (pid > 0).
                unsafe { libc::kill(reaper, libc::SIGTERM) };
                told = true;
                outcome.stopped = late;
            }
            if Instant::now() >= give_up {
                // SAFETY: as above.
                unsafe { libc::kill(reaper, libc::SIGKILL) };
                let _ = child.wait();
                outcome.hung = true;
                break;
            }
            std::thread::sleep(Duration::from_millis(10));
        }
        if let Some(e) = reaper::Ended::read(&status) {
            outcome.exit = e.exit;
            outcome.signal = e.signal;
            outcome.hung = e.hung;
        }
        self.read_reports(name, &mut outcome);
        outcome
    }

    fn read_reports(&self, name: &str, outcome: &mut Outcome) {
        let prefix = format!("{name}.");
        let mut files: Vec<PathBuf> = std::fs::read_dir(&self.work)
            .map(|d| d.flatten().map(|e| e.path()).collect())
            .unwrap_or_default();
        files.retain(|p| {
            p.file_name()
                .and_then(|n| n.to_str())
                .is_some_and(|n| n.starts_with(&prefix) && n.ends_with(".json"))
        });
        files.sort();
        outcome.no_report = files.is_empty();
        for f in files {
            if let Ok(r) = Report::read(&f) {
                for (kind, n) in r.counts() {
                    *outcome.leaks.entry(kind).or_insert(0) += n;
                }
            }
            let v: Option<Value> = crate::files::read_text(&f, crate::files::MAX_REPORT)
                .ok()
                .and_then(|t| serde_json::from_str(&t).ok());
            if v.as_ref()
                .and_then(|v| v.get("faults"))
                .and_then(Value::as_array)
                .is_some_and(|a| !a.is_empty())
            {
                outcome.injected = true;
            }
        }
    }
}

/// The calls of the counting run, in order, as (verb, nth, site): the
/// first process's only (the one that made the first injectable call).
fn counted(path: &Path) -> Vec<(String, u64, String)> {
    let text = std::fs::read_to_string(path).unwrap_or_default();
    let mut first_pid = None;
    let mut nth: BTreeMap<String, u64> = BTreeMap::new();
    let mut calls = Vec::new();
    for line in text.lines() {
        let mut f = line.split(' ');
        let (Some(pid), Some(verb), Some(site)) = (f.next(), f.next(), f.next()) else {
            continue;
        };
        if *first_pid.get_or_insert_with(|| pid.to_string()) != pid {
            continue;
        }
        let n = nth.entry(verb.to_string()).or_insert(0);
        *n += 1;
        calls.push((verb.to_string(), *n, site.to_string()));
    }
    calls
}

/// The runs to make from the counted calls.
fn plan(calls: &[(String, u64, String)], s: &Sweep) -> Vec<Planned> {
    let all = s
        .verbs
        .as_ref()
        .is_some_and(|v| v.iter().any(|x| x == "all"));
    let wanted = |verb: &str| match &s.verbs {
        // `cm_event`: every event replacement the counting run counted.
        Some(list) if !all => list
            .iter()
            .any(|x| x == verb || (x == "cm_event" && verb.starts_with("cm_event:"))),
        _ => {
            (all || !fault_rules::is_release(verb))
                && (all || s.infallible || !fault_rules::is_infallible(verb))
        }
    };
    let mut seen = std::collections::HashSet::new();
    let mut out = Vec::new();
    for (verb, nth, site) in calls {
        if !wanted(verb) {
            continue;
        }
        if s.sites {
            if seen.insert((verb.clone(), site.clone())) {
                out.push(Planned {
                    peer: false,
                    verb: verb.clone(),
                    nth: *nth,
                    site: site.clone(),
                    rule: format!("{verb}:site={site}:nth=1"),
                });
            }
        } else {
            out.push(Planned {
                peer: false,
                verb: verb.clone(),
                nth: *nth,
                site: site.clone(),
                rule: format!("{verb}:nth={nth}"),
            });
        }
    }
    out
}

/// Progress: a line rewritten in place on a terminal, plain lines otherwise.
struct Progress {
    tty: bool,
    total: usize,
    start: Instant,
    done: AtomicUsize,
    out: Mutex<()>,
}

impl Progress {
    fn step(&self, p: &Planned, o: &Outcome, timeout: u64) {
        let done = self.done.fetch_add(1, Ordering::SeqCst) + 1;
        let elapsed = self.start.elapsed().as_secs_f64();
        let eta = elapsed / done as f64 * (self.total - done) as f64;
        let _g = self.out.lock();
        let mut err = std::io::stderr().lock();
        let _ = if self.tty {
            write!(
                err,
                "\r\x1b[Kibv-shim: sweep {done}/{} runs, {elapsed:.0}s elapsed, ETA {eta:.0}s",
                self.total
            )
        } else {
            writeln!(
                err,
                "ibv-shim: sweep run {done}/{}: {} #{} at {}: {} {}",
                self.total,
                p.verb,
                p.nth,
                p.site,
                o.ended(),
                o.verdict(timeout)
            )
        };
    }

    fn finish(&self) {
        if self.tty {
            let _ = writeln!(std::io::stderr());
        }
    }
}

/// Runs the sweep; returns the launcher's exit status (0: no run crashed,
/// hung or leaked; 1: one did; 125: the sweep could not run).
/// `peer` is `--peer`'s program, found on the PATH.
pub fn run(
    o: &Options,
    program: PathBuf,
    peer: Option<PathBuf>,
    vars: Vec<(OsString, OsString)>,
    work: &Path,
) -> Result<i32, String> {
    let s = &o.sweep;
    let work = work.join("sweep");
    std::fs::create_dir_all(&work).map_err(|e| format!("{}: {e}", work.display()))?;
    let timeout = s.timeout.unwrap_or(60);
    let words = s.peer.as_deref().unwrap_or_default();
    let setup = Setup {
        program,
        o,
        vars,
        work: work.clone(),
        timeout,
        peer: peer
            .zip(words.split_first())
            .map(|(program, (argv0, args))| pair::Peer {
                program,
                argv0: argv0.clone(),
                args: args.to_vec(),
            }),
    };
    catch_stop();
    if setup.peer.is_some() {
        return Ok(pair::sweep(&setup));
    }
    let shown = o.program.to_string_lossy().into_owned();
    let count_file = work.join("calls");
    let baseline = setup.run(
        "count",
        &[("IBV_SHIM_FAULT_COUNT", count_file.clone().into_os_string())],
    );
    let calls = counted(&count_file);
    let planned = plan(&calls, s);
    let mut by_verb: BTreeMap<&str, u64> = BTreeMap::new();
    for (verb, _, _) in &calls {
        *by_verb.entry(verb).or_insert(0) += 1;
    }
    to_stderr(&format!(
        "ibv-shim: fault sweep of {shown}: {} injectable call{} counted ({}), {} run{} to make\n",
        calls.len(),
        if calls.len() == 1 { "" } else { "s" },
        by_verb
            .iter()
            .map(|(v, n)| format!("{v} {n}"))
            .collect::<Vec<_>>()
            .join(", "),
        planned.len(),
        if planned.len() == 1 { "" } else { "s" },
    ));

    let progress = Progress {
        tty: std::io::stderr().is_terminal(),
        total: planned.len(),
        start: Instant::now(),
        done: AtomicUsize::new(0),
        out: Mutex::new(()),
    };
    let results: Mutex<Vec<Option<Outcome>>> =
        Mutex::new((0..planned.len()).map(|_| None).collect());
    let next = AtomicUsize::new(0);
    let jobs = s.jobs.unwrap_or(1).clamp(1, planned.len().max(1));
    std::thread::scope(|scope| {
        for _ in 0..jobs {
            scope.spawn(|| loop {
                let i = next.fetch_add(1, Ordering::SeqCst);
                if i >= planned.len() || STOP.load(Ordering::SeqCst) {
                    break;
                }
                let p = &planned[i];
                let out = setup.run(
                    &format!("run{i:05}"),
                    &[("IBV_SHIM_FAULTS", p.rule.clone().into())],
                );
                progress.step(p, &out, timeout);
                results.lock().unwrap_or_else(|e| e.into_inner())[i] = Some(out);
            });
        }
    });
    progress.finish();
    let results = results.into_inner().unwrap_or_else(|e| e.into_inner());

    // The table.
    let mut rows: Vec<[String; 7]> = vec![[
        "#".into(),
        "injected call".into(),
        "nth".into(),
        "call site".into(),
        "ended".into(),
        "result".into(),
        "leaked".into(),
    ]];
    rows.push([
        "0".into(),
        "(none: the counting run)".into(),
        "-".into(),
        "-".into(),
        baseline.ended(),
        baseline.verdict(timeout),
        baseline.leak_text(),
    ]);
    let mut failed = usize::from(baseline.failed());
    let mut json_runs = Vec::new();
    for (i, (p, r)) in planned.iter().zip(&results).enumerate() {
        let Some(r) = r else { continue };
        failed += usize::from(r.failed());
        let mut verdict = r.verdict(timeout);
        if !r.injected && !r.hung && !r.crashed() {
            verdict.push_str(" (call not reached)");
        }
        rows.push([
            (i + 1).to_string(),
            p.verb.clone(),
            p.nth.to_string(),
            p.site.clone(),
            r.ended(),
            verdict,
            r.leak_text(),
        ]);
        json_runs.push(json!({
            "verb": p.verb, "nth": p.nth, "site": p.site, "rule": p.rule,
            "exit": r.exit, "signal": r.signal.map(signal_name),
            "crashed": r.crashed(), "hung": r.hung, "leaked": r.leaked(),
            "leaks": r.leaks, "injected": r.injected,
        }));
    }
    let stopped = STOP.load(Ordering::SeqCst);
    let mut text = table(&rows);
    text.push_str(&format!(
        "ibv-shim: fault sweep: {} run{}, {failed} crashed, hung or leaked{}\n",
        json_runs.len() + 1,
        if json_runs.is_empty() { "" } else { "s" },
        if stopped { " (stopped early)" } else { "" }
    ));
    let json_path = s
        .json
        .clone()
        .unwrap_or_else(|| PathBuf::from("ibv-shim-sweep.json"));
    let summary = json!({
        "schema": "ibv-shim/fault-sweep/1",
        "program": shown,
        "args": o.args.iter().map(|a| a.to_string_lossy()).collect::<Vec<_>>(),
        "mode": if s.sites { "sites" } else { "calls" },
        "timeout": timeout,
        "counted": by_verb,
        "baseline": {
            "exit": baseline.exit, "signal": baseline.signal.map(signal_name),
            "crashed": baseline.crashed(), "hung": baseline.hung,
            "leaked": baseline.leaked(), "leaks": baseline.leaks,
        },
        "runs": json_runs,
        "failed": failed,
        "stopped": stopped,
    });
    finish(&json_path, &summary, text);
    Ok(if failed > 0 || stopped { 1 } else { 0 })
}

/// Writes the JSON summary to `path`, says where (or why not) after
/// `text`, the sweep's table, and prints it all.
fn finish(path: &Path, summary: &serde_json::Value, mut text: String) {
    let json_text = serde_json::to_string_pretty(summary).unwrap_or_default() + "\n";
    match crate::files::write_replacing(path, json_text.as_bytes(), 0o666) {
        Ok(()) => text.push_str(&format!("ibv-shim: JSON summary: {}\n", path.display())),
        Err(e) => text.push_str(&format!("ibv-shim: cannot write {}: {e}\n", path.display())),
    }
    to_stderr(&text);
}

fn to_stderr(text: &str) {
    let _ = std::io::stderr().lock().write_all(text.as_bytes());
}

/// Columns padded to their widest cell; a cell's control characters (a
/// module path is the program's text) shown as `\xNN`.
fn table<const N: usize>(rows: &[[String; N]]) -> String {
    let rows: Vec<[String; N]> = rows
        .iter()
        .map(|r| {
            r.clone()
                .map(|c| crate::summary::printable(&c).into_owned())
        })
        .collect();
    let rows = rows.as_slice();
    let mut width = [0usize; N];
    for r in rows {
        for (w, c) in width.iter_mut().zip(r) {
            *w = (*w).max(c.chars().count());
        }
    }
    let mut out = String::new();
    for r in rows {
        let line: Vec<String> = r
            .iter()
            .zip(width)
            .map(|(c, w)| format!("{c:<w$}"))
            .collect();
        out.push_str(line.join("  ").trim_end());
        out.push('\n');
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn calls() -> Vec<(String, u64, String)> {
        let dir = std::env::temp_dir().join(format!("sweep-test-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let f = dir.join("calls");
        std::fs::write(
            &f,
            "7 ibv_alloc_pd prog+0x10\n7 ibv_reg_mr prog+0x20\n8 ibv_reg_mr other+0x1\n\
             7 ibv_reg_mr prog+0x20\n7 ibv_dealloc_pd prog+0x30\n",
        )
        .unwrap();
        let c = counted(&f);
        let _ = std::fs::remove_dir_all(&dir);
        c
    }

    #[test]
    fn the_plan_follows_the_counting_run() {
        let c = calls();
        assert_eq!(c.len(), 4, "the second process's call is left out");
        let rules = |s: &Sweep| plan(&c, s).into_iter().map(|p| p.rule).collect::<Vec<_>>();
        assert_eq!(
            rules(&Sweep::default()),
            ["ibv_alloc_pd:nth=1", "ibv_reg_mr:nth=1", "ibv_reg_mr:nth=2"]
        );
        let sites = Sweep {
            sites: true,
            ..Sweep::default()
        };
        assert_eq!(
            rules(&sites),
            [
                "ibv_alloc_pd:site=prog+0x10:nth=1",
                "ibv_reg_mr:site=prog+0x20:nth=1"
            ]
        );
        let all = Sweep {
            verbs: Some(vec!["all".into()]),
            ..Sweep::default()
        };
        assert_eq!(rules(&all).len(), 4);
        let some = Sweep {
            verbs: Some(vec!["ibv_reg_mr".into()]),
            ..Sweep::default()
        };
        assert_eq!(rules(&some), ["ibv_reg_mr:nth=1", "ibv_reg_mr:nth=2"]);
        for r in rules(&sites) {
            fault_rules::parse(&r).unwrap();
        }
    }

    #[test]
    fn calls_the_real_library_cannot_fail_are_swept_only_when_asked() {
        let c: Vec<(String, u64, String)> = [
            ("ibv_get_device_list", 1),
            ("ibv_get_device_name", 1),
            ("ibv_get_device_name", 2),
            ("ibv_open_device", 1),
        ]
        .iter()
        .map(|(v, n)| (v.to_string(), *n, "p+0x1".to_string()))
        .collect();
        let verbs = |s: &Sweep| plan(&c, s).into_iter().map(|p| p.verb).collect::<Vec<_>>();
        assert_eq!(
            verbs(&Sweep::default()),
            ["ibv_get_device_list", "ibv_open_device"]
        );
        let asked = Sweep {
            infallible: true,
            ..Sweep::default()
        };
        assert_eq!(verbs(&asked).len(), 4);
        let named = Sweep {
            verbs: Some(vec!["ibv_get_device_name".into()]),
            ..Sweep::default()
        };
        assert_eq!(
            verbs(&named),
            ["ibv_get_device_name", "ibv_get_device_name"]
        );
    }

    fn parse(args: &[&str]) -> Result<Options, UsageError> {
        match crate::options::parse(args.iter().map(OsString::from))? {
            crate::options::Command::Run(o) => Ok(*o),
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn sweep_and_fault_options() {
        let o = parse(&[
            "--fault-sweep",
            "-j",
            "4",
            "--sweep-verbs",
            "ibv_reg_mr,ibv_alloc_pd",
            "--sweep-sites",
            "--sweep-timeout=5",
            "--sweep-json",
            "s.json",
            "--peer",
            "srv  -s -p 1",
            "--",
            "p",
        ])
        .unwrap();
        assert_eq!(
            o.sweep,
            Sweep {
                enabled: true,
                jobs: Some(4),
                verbs: Some(vec!["ibv_reg_mr".into(), "ibv_alloc_pd".into()]),
                sites: true,
                timeout: Some(5),
                json: Some("s.json".into()),
                infallible: false,
                peer: Some(vec!["srv".into(), "-s".into(), "-p".into(), "1".into()]),
            }
        );
        let o = parse(&["--faults", "ibv_reg_mr:nth=3:errno=ENOMEM", "--", "p"]).unwrap();
        assert_eq!(o.faults.as_deref(), Some("ibv_reg_mr:nth=3:errno=ENOMEM"));
        for (args, says) in [
            (
                &["--faults", "ibv_reg_mr:nth=0", "--", "p"][..],
                "fault rule \"ibv_reg_mr:nth=0\"",
            ),
            (&["-j", "2", "--", "p"], "go with --fault-sweep"),
            (&["--fault-sweep", "-j", "0", "--", "p"], "above 0"),
            (
                &["--fault-sweep", "--sweep-verbs", "ibv_post_send", "--", "p"],
                "not a verb",
            ),
            (
                &["--fault-sweep", "--faults", "ibv_reg_mr:nth=1", "--", "p"],
                "do not go together",
            ),
        ] {
            let e = parse(args).unwrap_err().0;
            assert!(e.contains(says), "{args:?}: {e}");
        }
    }
}
