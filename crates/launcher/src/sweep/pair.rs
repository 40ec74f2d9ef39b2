//! `--fault-sweep --peer COMMAND -- PROGRAM`: a client/server pair swept
//! as one. Every run starts the peer first, under the shim, and the
//! program once the peer has called `rdma_listen` (its count file says
//! so) or after [`READY_WAIT`]; the peer gets [`GRACE`] to end after the
//! program, and is then stopped (a server waiting for a client that gave
//! up is no hang). The counting run counts both ends' calls; each is then
//! failed in turn, on its own end, and the table names the end.

use std::collections::BTreeMap;
use std::ffi::OsString;
use std::io::IsTerminal;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use serde_json::json;

use super::{
    counted, finish, plan, signal_name, table, to_stderr, Outcome, Planned, Progress, Setup, STOP,
};

/// The other end of the pair.
pub struct Peer {
    pub program: PathBuf,
    pub argv0: OsString,
    pub args: Vec<OsString>,
}

/// How long the program waits for the peer to listen.
const READY_WAIT: Duration = Duration::from_secs(5);
/// How long the peer may run on once the program ended.
const GRACE: Duration = Duration::from_secs(5);

/// Has the peer, counting its calls to `calls`, called `rdma_listen`?
fn listening(calls: &Path) -> bool {
    std::fs::read_to_string(calls).is_ok_and(|t| t.lines().any(|l| l.contains(" rdma_listen ")))
}

impl Setup<'_> {
    /// One run of the pair, `NAME` for the program and `NAME-peer` for
    /// the peer, each with its own extra variables: (program, peer).
    fn run_pair(
        &self,
        name: &str,
        program: &[(&str, OsString)],
        peer: &[(&str, OsString)],
    ) -> (Outcome, Outcome) {
        let peer_name = format!("{name}-peer");
        let mut peer_vars = peer.to_vec();
        // The peer's calls are counted in every run: the line for its
        // rdma_listen says the program may start.
        let calls = self.work.join(format!("{peer_name}.calls"));
        if !peer_vars.iter().any(|(k, _)| *k == "IBV_SHIM_FAULT_COUNT") {
            peer_vars.push(("IBV_SHIM_FAULT_COUNT", calls.clone().into_os_string()));
        }
        let calls = peer_vars
            .iter()
            .find(|(k, _)| *k == "IBV_SHIM_FAULT_COUNT")
            .map(|(_, v)| PathBuf::from(v))
            .unwrap_or(calls);
        let mut started = match self.spawn(&peer_name, true, &peer_vars) {
            Ok(r) => r,
            Err(o) => return (self.run(name, program), o),
        };
        let since = Instant::now();
        while since.elapsed() < READY_WAIT && !STOP.load(Ordering::SeqCst) {
            if listening(&calls) {
                // Its rdma_listen is counted just before it is made.
                std::thread::sleep(Duration::from_millis(200));
                break;
            }
            if matches!(started.child.try_wait(), Ok(Some(_))) {
                break;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        let ours = self.run(name, program);
        let theirs = self.wait(&peer_name, started, Some(Instant::now() + GRACE));
        (ours, theirs)
    }
}

/// Both ends' outcomes as one, for the verdict: a crash, hang or leak of
/// either.
fn joined(a: &Outcome, b: &Outcome) -> Outcome {
    let mut leaks = a.leaks.clone();
    for (k, n) in &b.leaks {
        *leaks.entry(k.clone()).or_insert(0) += n;
    }
    Outcome {
        exit: a.exit,
        signal: if a.crashed() {
            a.signal
        } else {
            b.signal.filter(|_| b.crashed())
        },
        hung: a.hung || (b.hung && !b.stopped),
        leaks,
        injected: a.injected || b.injected,
        no_report: a.no_report && b.no_report,
        stopped: false,
    }
}

/// Runs the pair's sweep (the caller made `setup` with a peer); returns
/// the launcher's exit status, as `sweep::run`.
pub(super) fn sweep(setup: &Setup) -> i32 {
    let (o, s, timeout) = (setup.o, &setup.o.sweep, setup.timeout);
    let shown = o.program.to_string_lossy().into_owned();
    let peer_shown = s
        .peer
        .as_deref()
        .unwrap_or_default()
        .iter()
        .map(|w| w.to_string_lossy())
        .collect::<Vec<_>>()
        .join(" ");
    let (count_file, peer_count) = (setup.work.join("calls"), setup.work.join("peer-calls"));
    let (base, base_peer) = setup.run_pair(
        "count",
        &[("IBV_SHIM_FAULT_COUNT", count_file.clone().into_os_string())],
        &[("IBV_SHIM_FAULT_COUNT", peer_count.clone().into_os_string())],
    );
    let (calls, peer_calls) = (counted(&count_file), counted(&peer_count));
    let mut planned = plan(&calls, s);
    planned.extend(
        plan(&peer_calls, s)
            .into_iter()
            .map(|p| Planned { peer: true, ..p }),
    );
    let tally = |calls: &[(String, u64, String)]| {
        let mut by: BTreeMap<String, u64> = BTreeMap::new();
        for (verb, _, _) in calls {
            *by.entry(verb.clone()).or_insert(0) += 1;
        }
        by
    };
    let (by_verb, by_peer) = (tally(&calls), tally(&peer_calls));
    let list = |by: &BTreeMap<String, u64>| {
        by.iter()
            .map(|(v, n)| format!("{v} {n}"))
            .collect::<Vec<_>>()
            .join(", ")
    };
    to_stderr(&format!(
        "ibv-shim: fault sweep of {shown} with peer {peer_shown}: {} injectable calls counted in the program ({}), {} in the peer ({}), {} runs to make\n",
        calls.len(),
        list(&by_verb),
        peer_calls.len(),
        list(&by_peer),
        planned.len(),
    ));
    let progress = Progress {
        tty: std::io::stderr().is_terminal(),
        total: planned.len(),
        start: Instant::now(),
        done: AtomicUsize::new(0),
        out: Mutex::new(()),
    };
    type Pair = (Outcome, Outcome);
    let results: Mutex<Vec<Option<Pair>>> = Mutex::new((0..planned.len()).map(|_| None).collect());
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
                let rule = [("IBV_SHIM_FAULTS", OsString::from(&p.rule))];
                let (ours, theirs) = match p.peer {
                    true => setup.run_pair(&format!("run{i:05}"), &[], &rule),
                    false => setup.run_pair(&format!("run{i:05}"), &rule, &[]),
                };
                progress.step(p, &joined(&ours, &theirs), timeout);
                results.lock().unwrap_or_else(|e| e.into_inner())[i] = Some((ours, theirs));
            });
        }
    });
    progress.finish();
    let results = results.into_inner().unwrap_or_else(|e| e.into_inner());

    let head = [
        "#",
        "end",
        "injected call",
        "nth",
        "call site",
        "ended (program, peer)",
        "result",
        "leaked (program; peer)",
    ];
    let mut rows: Vec<[String; 8]> = vec![head.map(String::from)];
    let ended = |a: &Outcome, b: &Outcome| format!("{}, {}", a.ended(), b.ended());
    let leaked = |a: &Outcome, b: &Outcome| format!("{}; {}", a.leak_text(), b.leak_text());
    let joint = joined(&base, &base_peer);
    rows.push([
        "0".into(),
        "-".into(),
        "(none: the counting run)".into(),
        "-".into(),
        "-".into(),
        ended(&base, &base_peer),
        joint.verdict(timeout),
        leaked(&base, &base_peer),
    ]);
    let mut failed = usize::from(joint.failed());
    let end = |o: &Outcome| {
        json!({
            "exit": o.exit, "signal": o.signal.map(signal_name), "crashed": o.crashed(),
            "hung": o.hung && !o.stopped, "stopped": o.stopped, "leaked": o.leaked(),
            "leaks": o.leaks, "injected": o.injected,
        })
    };
    let mut json_runs = Vec::new();
    for (i, (p, r)) in planned.iter().zip(&results).enumerate() {
        let Some((ours, theirs)) = r else { continue };
        let joint = joined(ours, theirs);
        failed += usize::from(joint.failed());
        let mut verdict = joint.verdict(timeout);
        if !joint.injected && !joint.hung && !joint.crashed() {
            verdict.push_str(" (call not reached)");
        }
        rows.push([
            (i + 1).to_string(),
            if p.peer { "peer" } else { "program" }.into(),
            p.verb.clone(),
            p.nth.to_string(),
            p.site.clone(),
            ended(ours, theirs),
            verdict,
            leaked(ours, theirs),
        ]);
        json_runs.push(json!({
            "end": if p.peer { "peer" } else { "program" },
            "verb": p.verb, "nth": p.nth, "site": p.site, "rule": p.rule,
            "failed": joint.failed(), "program": end(ours), "peer": end(theirs),
        }));
    }
    let stopped = STOP.load(Ordering::SeqCst);
    let mut text = table(&rows);
    text.push_str(&format!(
        "ibv-shim: fault sweep: {} runs of the pair, {failed} crashed, hung or leaked{}\n",
        json_runs.len() + 1,
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
        "peer": peer_shown,
        "mode": if s.sites { "sites" } else { "calls" },
        "timeout": timeout,
        "counted": by_verb,
        "counted_peer": by_peer,
        "baseline": {"program": end(&base), "peer": end(&base_peer)},
        "runs": json_runs,
        "failed": failed,
        "stopped": stopped,
    });
    finish(&json_path, &summary, text);
    i32::from(failed > 0 || stopped)
}
