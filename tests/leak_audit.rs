//! The leak audit: tracking, the reports at close and at exit,
//! the JSON document and its schema, the exit code, suppressions, fork,
//! threads, and destroys the shim must not forward.
//!
//! C programs in `tests/c/leak/` are compiled against the real
//! `<infiniband/verbs.h>`, linked with `-libverbs`, and run on the sim
//! (`target/sim/libibverbs.so.1`) with the shim preloaded. Each prints what
//! it created (`obj KIND HANDLE PARENT FUNCTION`); the tests compare that
//! with the shim's log and JSON report. Imported objects and dma-buf MRs,
//! which the sim does not simulate, run against `fake_verbs.c` selected
//! with `IBV_SHIM_LIBRARY`. The schema check needs python3 with the
//! `jsonschema` module (Debian: python3-jsonschema).

mod common;

use std::collections::{BTreeMap, BTreeSet};
use std::hash::{Hash, Hasher};
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::time::Duration;

use common::*;
use serde_json::Value;

fn leak_source(name: &str) -> PathBuf {
    repo_dir().join("tests/c/leak").join(name)
}

/// `-DLEAK_DEPS=<hash>` of files a build depends on besides its source, so
/// that `cc`'s cache notices when they change.
fn deps_flag(files: &[&str]) -> String {
    let mut h = std::collections::hash_map::DefaultHasher::new();
    for f in files {
        std::fs::read(leak_source(f)).unwrap().hash(&mut h);
    }
    format!("-DLEAK_DEPS={:x}", h.finish())
}

/// A test program, with `-rdynamic` so that the reports can name the
/// functions that created each object.
fn prog(name: &str) -> PathBuf {
    let deps = deps_flag(&["common.h"]);
    cc(
        name,
        &[&leak_source(&format!("{name}.c"))],
        &["-rdynamic", "-pthread", &deps, "-libverbs"],
    )
}

/// What one run of a program under the shim left behind.
struct Run {
    cmd: String,
    out: Output,
    /// Every log line of every process of the run.
    log: Vec<LogLine>,
    /// The JSON reports, by pid.
    reports: BTreeMap<u32, Value>,
    _dir: TempDir,
}

impl Run {
    fn stdout(&self) -> String {
        stdout(&self.out)
    }

    /// The one report of a single-process run.
    fn report(&self) -> &Value {
        assert_eq!(self.reports.len(), 1, "expected one report\n{self}");
        self.reports.values().next().unwrap()
    }

    fn warnings(&self) -> Vec<&LogLine> {
        self.log
            .iter()
            .filter(|l| l.level == "WARN" || l.level == "ERROR")
            .collect()
    }

    /// The lines of the log block that starts with a line containing
    /// `head`: that line and the indented lines after it (same thread).
    fn block(&self, head: &str) -> Vec<String> {
        let start = self
            .log
            .iter()
            .position(|l| l.message.contains(head))
            .unwrap_or_else(|| panic!("no log line containing {head:?}\n{self}"));
        let first = &self.log[start];
        let mut lines = vec![first.message.clone()];
        lines.extend(
            self.log[start + 1..]
                .iter()
                .take_while(|l| {
                    l.tid == first.tid && l.pid == first.pid && l.message.starts_with("  ")
                })
                .map(|l| l.message.clone()),
        );
        lines
    }
}

impl std::fmt::Display for Run {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        writeln!(f, "command: {}", self.cmd)?;
        writeln!(f, "status: {}", self.out.status)?;
        writeln!(f, "stdout:\n{}", self.stdout())?;
        writeln!(f, "stderr:\n{}", stderr(&self.out))?;
        write!(f, "log:\n{}", show_log(&self.log))
    }
}

/// Environment for a run: on the sim (unless `IBV_SHIM_LIBRARY` is given),
/// shim preloaded, log and reports into a fresh directory.
fn command(prog: &Path, args: &[&str], env: &[(&str, &str)], dir: &TempDir) -> Command {
    let mut cmd = Command::new(prog);
    cmd.args(args);
    for var in [
        "IBV_SHIM_LOG",
        "IBV_SHIM_LIBRARY",
        "IBV_SHIM_SUPPRESS",
        "IBV_SHIM_LEAK_EXITCODE",
        "IBV_SHIM_BACKTRACE",
        "IBV_SIM_DEVICES",
    ] {
        cmd.env_remove(var);
    }
    if !env.iter().any(|(k, _)| *k == "IBV_SHIM_LIBRARY") {
        cmd.env("LD_LIBRARY_PATH", sim_dir());
    }
    preload_shim(&mut cmd)
        .env("IBV_SHIM_LOG_FILE", dir.join("log.%p"))
        .env("IBV_SHIM_REPORT", dir.join("report.%p.json"))
        .envs(env.iter().copied());
    cmd
}

fn collect(cmd: &Command, out: Output, dir: TempDir) -> Run {
    let log = read_logs_matching(dir.path(), "log.");
    let mut reports = BTreeMap::new();
    for e in std::fs::read_dir(dir.path()).unwrap() {
        let name = e.unwrap().file_name().into_string().unwrap();
        if let Some(pid) = name
            .strip_prefix("report.")
            .and_then(|r| r.strip_suffix(".json"))
        {
            let text = std::fs::read_to_string(dir.join(&name)).unwrap();
            let json: Value = serde_json::from_str(&text)
                .unwrap_or_else(|e| panic!("{name} is not JSON: {e}\n{text}"));
            reports.insert(pid.parse().unwrap(), json);
        }
    }
    Run {
        cmd: format!("{cmd:?}"),
        out,
        log,
        reports,
        _dir: dir,
    }
}

/// Runs `prog` under the shim on the sim; panics on a crash or a hang.
fn shim_run(prog: &Path, args: &[&str], env: &[(&str, &str)]) -> Run {
    let dir = TempDir::new("leak");
    let mut cmd = command(prog, args, env, &dir);
    let out = run(&mut cmd);
    collect(&cmd, out, dir)
}

/// Like `shim_run`, with another time limit.
fn shim_run_timeout(prog: &Path, args: &[&str], env: &[(&str, &str)], timeout: Duration) -> Run {
    let dir = TempDir::new("leak");
    let mut cmd = command(prog, args, env, &dir);
    let out = run_unchecked(&mut cmd, timeout);
    assert!(
        signal(&out.status).is_none(),
        "crashed\n{}",
        describe(&cmd, &out)
    );
    collect(&cmd, out, dir)
}

/// Log lines from the files in `dir` whose names start with `prefix`.
fn read_logs_matching(dir: &Path, prefix: &str) -> Vec<LogLine> {
    let mut files: Vec<PathBuf> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.file_name().unwrap().to_string_lossy().starts_with(prefix))
        .collect();
    files.sort();
    files
        .iter()
        .flat_map(|f| {
            parse_log(
                &f.display().to_string(),
                &std::fs::read_to_string(f).unwrap(),
            )
        })
        .collect()
}

/// An object a program says it created.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
struct Made {
    kind: String,
    handle: String,
    parent: Option<String>,
    func: String,
}

/// The `obj ...` lines of a program's output.
fn made(stdout: &str) -> Vec<Made> {
    stdout
        .lines()
        .filter_map(|l| l.strip_prefix("obj "))
        .map(|l| {
            let w: Vec<&str> = l.split_whitespace().collect();
            Made {
                kind: w[0].into(),
                handle: w[1].into(),
                parent: (w[2] != "null").then(|| w[2].to_string()),
                func: w[3].into(),
            }
        })
        .collect()
}

/// The second word of the first stdout line starting with `key`.
fn value_of(stdout: &str, key: &str) -> String {
    stdout
        .lines()
        .find_map(|l| {
            l.strip_prefix(key)
                .map(|r| r.split_whitespace().next().unwrap().to_string())
        })
        .unwrap_or_else(|| panic!("no {key:?} line in\n{stdout}"))
}

fn objects(report: &Value) -> &Vec<Value> {
    report["objects"].as_array().expect("objects is an array")
}

/// The report's objects of the kinds that are created on a context.
fn resources(report: &Value) -> Vec<&Value> {
    objects(report)
        .iter()
        .filter(|o| !matches!(o["kind"].as_str(), Some("context" | "device_list")))
        .collect()
}

fn as_made(o: &Value) -> (String, String, Option<String>) {
    (
        o["kind"].as_str().unwrap().into(),
        o["handle"].as_str().unwrap().into(),
        o["parent"].as_str().map(String::from),
    )
}

/// Checks that `report` lists exactly `expected` (kind, handle, parent),
/// each created by the function that says it made it.
fn assert_exactly(run: &Run, report: &Value, expected: &[Made], found: &str) {
    let got: BTreeSet<_> = resources(report).iter().map(|o| as_made(o)).collect();
    let want: BTreeSet<_> = expected
        .iter()
        .map(|m| (m.kind.clone(), m.handle.clone(), m.parent.clone()))
        .collect();
    assert_eq!(
        got, want,
        "the report lists other objects than the program made\n{run}"
    );
    for m in expected {
        let o = resources(report)
            .into_iter()
            .find(|o| o["handle"] == m.handle.as_str())
            .unwrap();
        assert_eq!(
            o["created"]["symbol"],
            m.func.as_str(),
            "creation site of {m:?}\n{o}"
        );
        assert_eq!(o["found"], found, "{o}");
        assert_eq!(o["suppressed"], false, "{o}");
    }
}

/// Checks the text listing of a report block: each object on one line
/// (`kind handle (...) created by thread N at FUNCTION+0x..`), those on a PD
/// indented under it, and nothing else.
fn assert_tree(run: &Run, block: &[String], base: usize, expected: &[Made]) {
    let listed: Vec<&String> = block[1..]
        .iter()
        .filter(|l| !l.trim_start().starts_with("...") && !l.trim_start().starts_with('('))
        .collect();
    assert_eq!(
        listed.len(),
        expected.len(),
        "the listing has other objects than the program made\n{run}"
    );
    let pds: BTreeSet<&str> = expected
        .iter()
        .filter(|m| m.kind == "pd" || m.kind == "imported_pd")
        .map(|m| m.handle.as_str())
        .collect();
    for m in expected {
        let prefix = format!("{} {} (", m.kind, m.handle);
        let line = listed
            .iter()
            .find(|l| l.trim_start().starts_with(&prefix))
            .unwrap_or_else(|| panic!("{m:?} is not listed\n{run}"));
        let under_pd = m.parent.as_deref().is_some_and(|p| pds.contains(p)) && m.kind != "cq";
        let indent = line.len() - line.trim_start().len();
        assert_eq!(
            indent,
            base + if under_pd { 2 } else { 0 },
            "indentation of {line:?}\n{run}"
        );
        assert!(
            line.contains(&format!(" at {}+0x", m.func)),
            "creation site in {line:?}\n{run}"
        );
    }
}

/// The kinds of the objects the program made, as the report counts them.
fn counts_text(expected: &[Made]) -> String {
    let order = [
        "pd",
        "mr",
        "cq",
        "comp_channel",
        "srq",
        "qp",
        "ah",
        "imported_pd",
        "imported_mr",
    ];
    order
        .iter()
        .filter_map(|k| {
            let n = expected.iter().filter(|m| m.kind == *k).count();
            (n > 0).then(|| format!("{n} {k}"))
        })
        .collect::<Vec<_>>()
        .join(", ")
}

/// The resolution of CLOCK_MONOTONIC_COARSE, in seconds (a jiffy: 4 ms at
/// HZ=250, 10 ms at HZ=100).
fn coarse_resolution() -> f64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: ts is a valid out-pointer for clock_getres.
    let rc = unsafe { libc::clock_getres(libc::CLOCK_MONOTONIC_COARSE, &mut ts) };
    assert_eq!(rc, 0, "clock_getres(CLOCK_MONOTONIC_COARSE)");
    ts.tv_sec as f64 + ts.tv_nsec as f64 / 1e9
}

#[test]
fn each_kind_leaked_is_reported_at_close_as_a_tree_and_in_the_json() {
    let p = prog("leak_each");
    let wall = || {
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_secs_f64()
    };
    let started = wall();
    let run = shim_run(&p, &["close"], &[]);
    let ended = wall();
    assert!(run.out.status.success(), "{run}");
    let out = run.stdout();
    let expected = made(&out);
    let kinds: BTreeSet<&str> = expected.iter().map(|m| m.kind.as_str()).collect();
    assert_eq!(
        kinds,
        ["ah", "comp_channel", "cq", "mr", "pd", "qp", "srq"].into(),
        "{run}"
    );
    let ctx = value_of(&out, "context ");

    // The text report at close.
    let block = run.block(&format!("leak: ibv_close_device({ctx}) on mlx5_0 (guid "));
    assert!(
        block[0].contains(&format!(
            "9 objects created on this context were never destroyed ({})",
            counts_text(&expected)
        )),
        "{run}"
    );
    assert_tree(&run, &block, 2, &expected);
    // ... and again at exit, as zombies of the closed context.
    let exit = run.block("leak report at exit: 9 things were never freed");
    assert!(
        exit[1].contains(&format!("context {ctx} on mlx5_0"))
            && exit[1].contains("was closed with 9 objects"),
        "{run}"
    );
    assert_tree(&run, &exit[1..], 4, &expected);

    // The JSON report.
    let report = run.report();
    assert_eq!(report["schema"], "ibv-shim/leak-report/1");
    assert_eq!(report["leaked"], true);
    assert_eq!(
        report["pid"].as_u64().unwrap() as u32,
        *run.reports.keys().next().unwrap()
    );
    assert_eq!(
        report["program"],
        std::fs::canonicalize(&p).unwrap().to_str().unwrap()
    );
    assert_exactly(&run, report, &expected, "close");
    assert_eq!(
        objects(report).len(),
        expected.len(),
        "no context or device list is left\n{run}"
    );
    for (kind, n) in report["totals"].as_object().unwrap() {
        assert_eq!(
            n.as_u64().unwrap() as usize,
            expected.iter().filter(|m| &m.kind == kind).count(),
            "totals.{kind}"
        );
    }
    for o in resources(report) {
        assert_eq!(o["context"], ctx.as_str());
        assert_eq!(o["device"], "mlx5_0");
        assert!(o["guid"].as_str().unwrap().len() == 16, "{o}");
        assert_eq!(
            o["created"]["module"],
            std::fs::canonicalize(&p).unwrap().to_str().unwrap()
        );
        assert!(o["created"]["offset"].as_u64().unwrap() > 0);
        assert_eq!(o["created"]["backtrace"], Value::Null);
        // Made while the program ran: a slow or loaded machine only
        // widens [started, ended]. The stamp is CLOCK_MONOTONIC_COARSE ms,
        // converted with an offset also read through the coarse clock, so
        // it is off by at most the coarse clock's resolution (a jiffy), one
        // ms of truncation and the JSON's rounding to the ms.
        let time = o["created"]["time"].as_f64().unwrap();
        let slack = coarse_resolution() + 0.002;
        assert!(
            time >= started - slack && time <= ended + slack,
            "{started} <= {time} <= {ended} (slack {slack} s): {o}"
        );
    }
    // The MR whose access flags were not a compile-time constant went
    // through ibv_reg_mr_iova2.
    for line in out.lines().filter_map(|l| l.strip_prefix("mr-via ")) {
        let (handle, via) = line.split_once(' ').unwrap();
        let mr = objects(report)
            .iter()
            .find(|o| o["handle"] == handle)
            .unwrap();
        assert_eq!(mr["fields"]["via"], via, "{mr}");
        assert_eq!(mr["fields"]["length"], 4096);
    }
    let links: Vec<&str> = out
        .lines()
        .find_map(|l| l.strip_prefix("qp-links "))
        .unwrap()
        .split(' ')
        .collect();
    let qp = objects(report)
        .iter()
        .find(|o| o["handle"] == links[0])
        .unwrap();
    assert_eq!(qp["fields"]["send_cq"], links[1]);
    assert_eq!(qp["fields"]["recv_cq"], links[2]);
    assert_eq!(qp["fields"]["srq"], links[3]);
    assert_eq!(
        qp["fields"]["qp_num"].as_u64().unwrap().to_string(),
        links[4]
    );
    assert_eq!(qp["fields"]["qp_type"], "RC");
}

#[test]
fn a_context_never_closed_and_a_list_never_freed_are_reported_at_exit() {
    let p = prog("leak_each");
    let run = shim_run(&p, &["keep"], &[]);
    assert!(run.out.status.success(), "{run}");
    let expected = made(&run.stdout());
    let ctx = value_of(&run.stdout(), "context ");
    let block =
        run.block("leak report at exit: 11 things were never freed (1 context, 1 device_list, ");
    assert!(
        block[1].contains(&format!("context {ctx} on mlx5_0")),
        "{run}"
    );
    assert!(
        block[1].contains("was never closed; it still owns 9 objects"),
        "{run}"
    );
    assert!(
        block
            .last()
            .unwrap()
            .contains("(2 devices) from ibv_get_device_list by thread"),
        "{run}"
    );
    assert!(block.last().unwrap().ends_with("was never freed"), "{run}");
    assert!(
        !run.log
            .iter()
            .any(|l| l.message.starts_with("leak: ibv_close_device")),
        "{run}"
    );

    let report = run.report();
    assert_exactly(&run, report, &expected, "exit");
    let context = objects(report)
        .iter()
        .find(|o| o["kind"] == "context")
        .expect("the context");
    assert_eq!(context["handle"], ctx.as_str());
    assert_eq!(context["context"], ctx.as_str());
    assert_eq!(context["device"], "mlx5_0");
    assert_eq!(context["fields"]["imported"], false);
    assert_eq!(context["found"], "exit");
    let list = objects(report)
        .iter()
        .find(|o| o["kind"] == "device_list")
        .expect("the device list");
    assert_eq!(list["fields"]["count"], 2);
    assert_eq!(list["context"], Value::Null);
    assert_eq!(report["totals"]["context"], 1);
    assert_eq!(report["totals"]["device_list"], 1);
}

#[test]
fn a_program_that_cleans_up_reports_nothing() {
    let run = shim_run(&prog("clean"), &[], &[]);
    assert!(run.out.status.success(), "{run}");
    assert!(
        run.warnings().is_empty(),
        "a clean program got warnings\n{run}"
    );
    let report = run.report();
    assert_eq!(report["leaked"], false);
    assert!(objects(report).is_empty(), "{run}");
    assert!(
        report["totals"]
            .as_object()
            .unwrap()
            .values()
            .all(|n| n == 0),
        "{run}"
    );
}

#[test]
fn a_destroy_that_fails_with_ebusy_names_the_holders_and_a_retry_succeeds() {
    let run = shim_run(&prog("busy"), &[], &[]);
    assert!(run.out.status.success(), "{run}");
    let out = run.stdout();
    for call in [
        "dealloc_pd",
        "destroy_cq",
        "destroy_srq",
        "destroy_comp_channel",
    ] {
        assert!(
            out.contains(&format!("busy {call} 16\n")),
            "{call} was not EBUSY\n{run}"
        );
        assert!(
            out.contains(&format!("retry {call} 0\n")),
            "retrying {call} failed\n{run}"
        );
    }
    let addr = |what: &str| value_of(&out, &format!("{what} "));
    let holders = |call: &str, arg: &str, objs: &[(&str, &str)]| {
        let line = run
            .log
            .iter()
            .find(|l| {
                l.message
                    .starts_with(&format!("{call}({arg}={}) = EBUSY", addr(arg)))
            })
            .unwrap_or_else(|| panic!("no EBUSY warning for {call}\n{run}"));
        let n = objs.len();
        assert!(
            line.message.contains(&format!(
                "still held by {n} object{}: ",
                if n == 1 { "" } else { "s" }
            )),
            "{line:?}"
        );
        for (kind, what) in objs {
            assert!(
                line.message.contains(&format!("{kind} {} (", addr(what))),
                "{line:?} misses {kind}"
            );
        }
    };
    holders(
        "ibv_dealloc_pd",
        "pd",
        &[("mr", "mr"), ("srq", "srq"), ("qp", "qp")],
    );
    holders("ibv_destroy_cq", "cq", &[("qp", "qp")]);
    holders("ibv_destroy_srq", "srq", &[("qp", "qp")]);
    holders("ibv_destroy_comp_channel", "channel", &[("cq", "cq")]);
    // The failed destroys kept the objects tracked, the retries untracked
    // them: nothing is left at exit.
    let report = run.report();
    assert_eq!(report["leaked"], false, "{run}");
    assert!(objects(report).is_empty(), "{run}");
}

#[test]
fn objects_of_a_closed_context_are_not_passed_to_the_library() {
    let run = shim_run(&prog("after_close"), &[], &[]);
    assert!(run.out.status.success(), "{run}");
    let out = run.stdout();
    let expected = [
        ("ibv_dereg_mr", "22 22"),
        ("ibv_destroy_qp", "22 22"),
        ("ibv_destroy_ah", "22 22"),
        ("ibv_destroy_srq", "22 22"),
        ("ibv_destroy_cq", "22 22"),
        ("ibv_destroy_comp_channel", "22 22"),
        ("ibv_dealloc_pd", "22 22"),
        ("ibv_rereg_mr", "-1 22"),
        ("ibv_resize_cq", "22 22"),
        ("ibv_modify_qp", "22 22"),
        ("ibv_query_qp", "22 22"),
        ("ibv_reg_mr", "NULL 22"),
        ("ibv_create_qp", "NULL 22"),
    ];
    for (call, result) in expected {
        assert!(
            out.contains(&format!("\n{call} {result}\n")),
            "{call}: expected {result} (EINVAL)\n{run}"
        );
        assert!(
            run.log.iter().any(|l| l.level == "WARN"
                && l.message.starts_with(&format!("use after close: {call}("))),
            "no use-after-close warning for {call}\n{run}"
        );
    }
    // Still tracked, as zombies of the closed context.
    let report = run.report();
    let kinds: BTreeSet<&str> = resources(report)
        .iter()
        .map(|o| o["kind"].as_str().unwrap())
        .collect();
    assert_eq!(
        kinds,
        ["ah", "comp_channel", "cq", "mr", "pd", "qp", "srq"].into(),
        "{run}"
    );
    assert!(
        resources(report).iter().all(|o| o["found"] == "close"),
        "{run}"
    );
}

#[test]
fn a_second_destroy_is_refused_without_reaching_the_library() {
    let p = prog("double_destroy");
    let run = shim_run(&p, &[], &[("IBV_SHIM_LOG", "debug")]);
    assert!(run.out.status.success(), "{run}");
    let out = run.stdout();
    for (call, arg) in [
        ("ibv_destroy_qp", "qp"),
        ("ibv_destroy_ah", "ah"),
        ("ibv_destroy_srq", "srq"),
        ("ibv_destroy_cq", "cq"),
        ("ibv_destroy_comp_channel", "channel"),
        ("ibv_dereg_mr", "mr"),
        ("ibv_dealloc_pd", "pd"),
    ] {
        assert!(
            out.contains(&format!("\n{call} 0 22")),
            "{call}: expected 0 then EINVAL\n{run}"
        );
        let refused: Vec<usize> = (0..run.log.len())
            .filter(|&i| {
                run.log[i].level == "WARN"
                    && run.log[i]
                        .message
                        .starts_with(&format!("double destroy: {call}({arg}="))
            })
            .collect();
        assert_eq!(refused.len(), 1, "{call}\n{run}");
        // Only the first call reached the library: one debug line for it
        // before the refusal (the address may be reused after).
        let warning = &run.log[refused[0]].message;
        let addr = warning
            .split_once(&format!("{arg}="))
            .unwrap()
            .1
            .split(')')
            .next()
            .unwrap();
        let forwarded = log_lines_for(&run.log[..refused[0]], call)
            .into_iter()
            .filter(|l| {
                l.level == "DEBUG" && l.message.starts_with(&format!("{call}({arg}={addr})"))
            })
            .count();
        assert_eq!(
            forwarded, 1,
            "{call}({addr}) was forwarded {forwarded} times\n{run}"
        );
    }
    assert!(out.contains("errno 22"), "{run}");
    // A new PD at a recycled address is destroyed normally.
    assert!(out.contains("\nibv_dealloc_pd-again 0\n"), "{run}");
    assert_eq!(run.report()["leaked"], false, "{run}");
}

#[test]
fn pointers_the_shim_never_saw_are_forwarded_unchanged_with_a_warning() {
    let p = prog("unknown");
    let with = shim_run(&p, &[], &[]);
    assert!(with.out.status.success(), "{with}");
    let mut cmd = Command::new(&p);
    cmd.env("LD_LIBRARY_PATH", sim_dir())
        .env_remove("LD_PRELOAD")
        .env_remove("IBV_SIM_DEVICES");
    let without = run(&mut cmd);
    assert!(without.status.success(), "{}", describe(&cmd, &without));
    // Same results with and without the shim (but the context's address).
    let results = |s: &str| {
        s.lines()
            .filter(|l| !l.starts_with("context "))
            .map(String::from)
            .collect::<Vec<_>>()
    };
    assert_eq!(
        results(&with.stdout()),
        results(&stdout(&without)),
        "the shim changed a result\n{with}"
    );

    let warned = |needle: &str| {
        with.log
            .iter()
            .filter(|l| l.level == "WARN" && l.message.contains(needle))
            .count()
    };
    for call in [
        "ibv_dealloc_pd(pd=NULL)",
        "ibv_destroy_cq(cq=NULL)",
        "ibv_dereg_mr(mr=NULL)",
    ] {
        assert_eq!(
            warned(&format!("{call}: forwarding unchanged")),
            1,
            "{call}\n{with}"
        );
    }
    // The QPs of ibv_create_qp_ex go through the context's table, which the
    // shim interposes: seen, so destroyed without a warning.
    assert_eq!(warned("not a qp the shim saw created"), 0, "{with}");
    // The fake PD, and the program's own memory at a destroyed PD's address.
    assert_eq!(warned("not a pd the shim saw created"), 2, "{with}");
    assert_eq!(warned("double destroy"), 0, "{with}");
    let err = stderr(&with.out);
    assert!(
        err.contains("lookalike-same-address 1"),
        "the look-alike did not reuse the PD's memory, so the case is not exercised\n{with}"
    );
}

#[test]
fn the_leak_exit_code_applies_only_to_unsuppressed_leaks() {
    let leaky = prog("leak_each");
    let clean = prog("clean");
    let code = [("IBV_SHIM_LEAK_EXITCODE", "23")];
    let run = shim_run(&leaky, &["close"], &code);
    assert_eq!(run.out.status.code(), Some(23), "{run}");
    // The program's buffered output was flushed before _exit.
    assert!(run.stdout().ends_with("closed\n"), "{run}");
    assert_eq!(run.report()["leaked"], true);
    let run = shim_run(&clean, &[], &code);
    assert_eq!(run.out.status.code(), Some(0), "{run}");
    let run = shim_run(&clean, &["3"], &code);
    assert_eq!(
        run.out.status.code(),
        Some(3),
        "the program's own status is kept\n{run}"
    );
    let run = shim_run(&leaky, &["close"], &[]);
    assert_eq!(
        run.out.status.code(),
        Some(0),
        "no exit code unless asked\n{run}"
    );
}

#[test]
fn suppressed_leaks_are_listed_but_do_not_count() {
    let p = prog("leak_each");
    let dir = TempDir::new("supp");
    let some = dir.join("some.supp");
    std::fs::write(&some, "# the MRs and the AH are kept on purpose\nleak:mr:leak_mr_*\n\nleak:ah:*leak_each*\nleak:bogus\n").unwrap();
    let run = shim_run(
        &p,
        &["close"],
        &[
            ("IBV_SHIM_SUPPRESS", some.to_str().unwrap()),
            ("IBV_SHIM_LEAK_EXITCODE", "23"),
        ],
    );
    assert_eq!(
        run.out.status.code(),
        Some(23),
        "the PD, QP, ... still leak\n{run}"
    );
    assert!(
        run.log.iter().any(|l| l.level == "WARN"
            && l.message
                .contains("\"leak:bogus\" is not leak:<kind>:<pattern>")),
        "{run}"
    );
    let report = run.report();
    for o in resources(report) {
        let quiet = matches!(o["kind"].as_str(), Some("mr" | "ah"));
        assert_eq!(o["suppressed"], quiet, "{o}");
    }
    assert_eq!(report["totals"]["mr"], 0);
    assert_eq!(report["totals"]["ah"], 0);
    assert_eq!(report["totals"]["pd"], 1);
    assert_eq!(report["leaked"], true);
    let block = run.block("leak: ibv_close_device(");
    assert!(block[0].contains("5 objects created on this context were never destroyed (1 pd, 1 cq, 1 comp_channel, 1 srq, 1 qp)"), "{run}");
    assert!(
        block
            .iter()
            .all(|l| !l.trim_start().starts_with("mr ") && !l.trim_start().starts_with("ah ")),
        "{run}"
    );
    assert!(
        block
            .last()
            .unwrap()
            .contains("(4 more suppressed by IBV_SHIM_SUPPRESS, not shown)"),
        "{run}"
    );

    let all = dir.join("all.supp");
    std::fs::write(&all, "leak:*:leak_each*\n").unwrap();
    let run = shim_run(
        &p,
        &["close"],
        &[
            ("IBV_SHIM_SUPPRESS", all.to_str().unwrap()),
            ("IBV_SHIM_LEAK_EXITCODE", "23"),
        ],
    );
    assert_eq!(run.out.status.code(), Some(0), "{run}");
    assert!(run.warnings().is_empty(), "{run}");
    let report = run.report();
    assert_eq!(report["leaked"], false);
    assert_eq!(resources(report).len(), 9);
    assert!(
        objects(report).iter().all(|o| o["suppressed"] == true),
        "{run}"
    );
}

#[test]
fn a_forked_child_reports_only_what_it_made_and_a_child_without_verbs_nothing() {
    let run = shim_run(&prog("fork"), &[], &[]);
    assert!(run.out.status.success(), "{run}");
    let out = run.stdout();
    let pid = |role: &str| {
        value_of(&out, &format!("{role} pid="))
            .parse::<u32>()
            .unwrap()
    };
    let objs = |role: &str| -> BTreeSet<String> {
        out.lines()
            .filter_map(|l| l.strip_prefix(&format!("{role} obj pd ")))
            .map(String::from)
            .collect()
    };
    let (parent, child1, child2) = (pid("parent"), pid("child1"), pid("child2"));
    assert_eq!(
        run.reports.keys().copied().collect::<Vec<_>>(),
        {
            let mut v = vec![parent, child1];
            v.sort();
            v
        },
        "one report each from the parent and the child that used verbs\n{run}"
    );
    let pds = |pid: u32| -> BTreeSet<String> {
        objects(&run.reports[&pid])
            .iter()
            .filter(|o| o["kind"] == "pd")
            .map(|o| o["handle"].as_str().unwrap().to_string())
            .collect()
    };
    assert_eq!(pds(parent), objs("parent"), "{run}");
    assert_eq!(pds(child1), objs("child1"), "{run}");
    let kinds = |pid: u32| {
        objects(&run.reports[&pid])
            .iter()
            .map(|o| o["kind"].as_str().unwrap().to_string())
            .collect::<Vec<_>>()
    };
    assert_eq!(
        kinds(child1).iter().filter(|k| *k == "context").count(),
        1,
        "only the child's own context\n{run}"
    );
    let own = value_of(&out, "child1 own-context ");
    assert!(
        objects(&run.reports[&child1])
            .iter()
            .any(|o| o["kind"] == "context" && o["handle"] == own.as_str()),
        "{run}"
    );
    assert!(
        run.log.iter().all(|l| l.pid != child2),
        "the child that never used verbs logged\n{run}"
    );
    let child_text: Vec<&LogLine> = run.log.iter().filter(|l| l.pid == child1).collect();
    assert!(
        child_text.iter().any(|l| l
            .message
            .contains("(not opened by this process) has 1 object never destroyed")),
        "{run}"
    );
}

#[test]
fn eight_threads_creating_and_destroying_leave_the_table_consistent() {
    let p = prog("threads");
    for mode in ["one", "many"] {
        let run = shim_run_timeout(&p, &[mode, "2", "0"], &[], Duration::from_secs(90));
        assert!(run.out.status.success(), "{mode}\n{run}");
        assert!(
            value_of(&run.stdout(), "rounds ").parse::<u64>().unwrap() > 1000,
            "{run}"
        );
        let report = run.report();
        assert!(
            objects(report).is_empty(),
            "{mode}: objects left or lost\n{run}"
        );
        assert!(run.warnings().is_empty(), "{mode}\n{run}");
    }
    let run = shim_run_timeout(&p, &["many", "1", "3"], &[], Duration::from_secs(90));
    assert!(run.out.status.success(), "{run}");
    let report = run.report();
    assert_eq!(report["totals"]["pd"], 24, "{run}");
    assert_eq!(report["totals"]["mr"], 24, "{run}");
    assert_eq!(objects(report).len(), 48, "{run}");
    let pds: BTreeSet<&str> = resources(report)
        .iter()
        .filter(|o| o["kind"] == "pd")
        .map(|o| o["handle"].as_str().unwrap())
        .collect();
    let parents: Vec<&str> = resources(report)
        .iter()
        .filter(|o| o["kind"] == "mr")
        .map(|o| o["parent"].as_str().unwrap())
        .collect();
    assert_eq!(
        parents.iter().copied().collect::<BTreeSet<_>>(),
        pds,
        "each leaked PD has its MR"
    );
    assert!(resources(report).iter().all(|o| o["found"] == "close"));
    let tids: BTreeSet<u64> = resources(report)
        .iter()
        .map(|o| o["created"]["thread"].as_u64().unwrap())
        .collect();
    assert_eq!(tids.len(), 8, "the creating threads are recorded\n{run}");
}

#[test]
fn no_shim_lock_is_held_while_a_real_verb_blocks() {
    let run = shim_run_timeout(&prog("blocked"), &[], &[], Duration::from_secs(60));
    let out = run.stdout();
    assert!(
        out.contains("waiter blocked in ibv_get_cq_event\n"),
        "{run}"
    );
    assert!(out.contains("workers done: "), "{run}");
    assert!(run.out.status.success(), "{run}");
    // The exit report ran too, with the waiter still inside the library.
    assert!(
        run.log
            .iter()
            .any(|l| l.message.starts_with("leak report at exit:")),
        "{run}"
    );
}

/// `fake_verbs.c` built as a library with rdma-core's version nodes.
fn fake_verbs() -> PathBuf {
    let map = leak_source("fake_verbs.map");
    let script = format!("-Wl,--version-script={}", map.display());
    let deps = deps_flag(&["fake_verbs.map"]);
    cc(
        "fake_verbs",
        &[&leak_source("fake_verbs.c")],
        &["-shared", "-fPIC", &script, &deps],
    )
}

#[test]
fn imported_objects_and_dmabuf_mrs_are_tracked_and_missing_verbs_fail_with_eopnotsupp() {
    let lib = fake_verbs();
    let p = prog("imports");
    let run = shim_run(&p, &[], &[("IBV_SHIM_LIBRARY", lib.to_str().unwrap())]);
    assert!(run.out.status.success(), "{run}");
    let out = run.stdout();
    let expected = made(&out);
    for missing in [
        "ibv_alloc_pd NULL 95",
        "ibv_dealloc_pd 95 95",
        "ibv_create_cq NULL 95",
        "ibv_query_device 95 95",
    ] {
        assert!(
            out.contains(&format!("missing {missing}\n")),
            "{missing}\n{run}"
        );
    }
    let ctx = value_of(&out, "context ");
    let block = run.block(&format!(
        "leak: ibv_close_device({ctx}) on fake0 (guid 0002c90300001234)"
    ));
    assert!(block[0].contains("4 objects created on this context were never destroyed (1 mr, 2 imported_pd, 1 imported_mr)"), "{run}");
    assert_tree(&run, &block, 2, &expected);
    let report = run.report();
    assert_exactly(&run, report, &expected, "close");
    let dmabuf = objects(report).iter().find(|o| o["kind"] == "mr").unwrap();
    assert_eq!(dmabuf["fields"]["via"], "ibv_reg_dmabuf_mr");
    assert_eq!(dmabuf["guid"], "0002c90300001234");
    let handles: BTreeSet<u64> = objects(report)
        .iter()
        .filter(|o| o["kind"] == "imported_pd")
        .map(|o| o["fields"]["handle"].as_u64().unwrap())
        .collect();
    assert_eq!(handles, [7, 8].into());
    // The unimported MR (handle 10) is gone.
    assert!(
        objects(report).iter().all(|o| o["fields"]["handle"] != 10),
        "{run}"
    );
}

#[test]
fn backtraces_when_asked_for() {
    let p = prog("leak_each");
    let run = shim_run(&p, &["close"], &[("IBV_SHIM_BACKTRACE", "1")]);
    assert!(run.out.status.success(), "{run}");
    let expected = made(&run.stdout());
    let report = run.report();
    for m in &expected {
        let o = objects(report)
            .iter()
            .find(|o| o["handle"] == m.handle.as_str())
            .unwrap();
        let frames: Vec<&str> = o["created"]["backtrace"]
            .as_array()
            .expect("a backtrace")
            .iter()
            .map(|f| f.as_str().unwrap())
            .collect();
        // From the program's call down: the function that made it, unless
        // that call sits in one of verbs.h's inline wrappers (ibv_reg_mr).
        let first = frames.iter().find(|f| !f.contains("/infiniband/verbs.h:"));
        assert!(
            first.is_some_and(|f| f.starts_with(&m.func)),
            "{m:?}: {frames:?}"
        );
        assert!(
            frames.iter().any(|f| f.starts_with("main")),
            "{m:?}: {frames:?}"
        );
        assert!(
            frames.iter().all(|f| !f.contains("ibv_shim::")),
            "{m:?}: {frames:?}"
        );
    }
    let block = run.block("leak: ibv_close_device(");
    assert!(
        block
            .iter()
            .any(|l| l.trim_start().starts_with("leak_pd") && l.contains("leak_each.c:")),
        "{run}"
    );
}

#[test]
fn a_process_that_never_calls_verbs_writes_no_report() {
    let dir = TempDir::new("leak");
    let mut cmd = command(Path::new("/bin/true"), &[], &[], &dir);
    let out = run(&mut cmd);
    assert!(out.status.success());
    let run = collect(&cmd, out, dir);
    assert!(run.reports.is_empty() && run.log.is_empty(), "{run}");
}

#[test]
fn reports_match_the_schema() {
    let dir = TempDir::new("schema");
    let leaky = prog("leak_each");
    let mut docs: Vec<(String, Value)> = Vec::new();
    let mut add = |name: &str, run: Run| {
        for (pid, r) in run.reports {
            docs.push((format!("{name}.{pid}"), r));
        }
    };
    add("close", shim_run(&leaky, &["close"], &[]));
    add(
        "keep",
        shim_run(&leaky, &["keep"], &[("IBV_SHIM_BACKTRACE", "1")]),
    );
    add("clean", shim_run(&prog("clean"), &[], &[]));
    // Objects librdmacm keeps: suppressed by default, with "kept_by".
    let rdmacm = cc(
        "keep_devices",
        &[&repo_dir().join("tests/c/rdmacm/keep_devices.c")],
        &["-lrdmacm"],
    );
    add("rdmacm", shim_run(&rdmacm, &[], &[]));
    add("fork", shim_run(&prog("fork"), &[], &[]));
    add(
        "imports",
        shim_run(
            &prog("imports"),
            &[],
            &[("IBV_SHIM_LIBRARY", fake_verbs().to_str().unwrap())],
        ),
    );
    let supp = dir.join("s.supp");
    std::fs::write(&supp, "leak:*:leak_mr*\n").unwrap();
    add(
        "suppressed",
        shim_run(
            &leaky,
            &["keep"],
            &[("IBV_SHIM_SUPPRESS", supp.to_str().unwrap())],
        ),
    );
    // And one that must fail, to show the validator validates.
    let mut bad = docs[0].1.clone();
    bad["objects"][0]["kind"] = "bogus".into();
    docs.push(("bad".into(), bad));
    for (name, doc) in &docs {
        std::fs::write(
            dir.join(format!("{name}.json")),
            serde_json::to_string(doc).unwrap(),
        )
        .unwrap();
    }
    let script = r#"
import glob, json, os, sys
import jsonschema
schema = json.load(open(sys.argv[1]))
jsonschema.Draft202012Validator.check_schema(schema)
v = jsonschema.Draft202012Validator(schema)
for f in sorted(glob.glob(os.path.join(sys.argv[2], "*.json"))):
    errors = list(v.iter_errors(json.load(open(f))))
    print(os.path.basename(f), "invalid" if errors else "valid", "; ".join(e.message for e in errors[:3]))
"#;
    let mut cmd = Command::new("python3");
    cmd.arg("-c")
        .arg(script)
        .arg(repo_dir().join("docs/leak-report.schema.json"))
        .arg(dir.path());
    let out = run(&mut cmd);
    assert!(
        out.status.success(),
        "python3 with jsonschema is needed (Debian: python3-jsonschema)\n{}",
        describe(&cmd, &out)
    );
    let text = stdout(&out);
    for (name, _) in &docs {
        let want = if name == "bad" { "invalid" } else { "valid" };
        assert!(
            text.lines()
                .any(|l| l.starts_with(&format!("{name}.json {want}"))),
            "{name}: expected {want}\n{text}"
        );
    }
    // The launcher reads them with the report model's types: each real
    // report reads, and writes back the same document; the bad one fails.
    for (name, doc) in &docs {
        let text = doc.to_string();
        let read = serde_json::from_str::<report_model::Report>(&text);
        match (name.as_str(), read) {
            ("bad", r) => assert!(r.is_err(), "bad: read as the model"),
            (_, Err(e)) => panic!("{name}: not the report model: {e}\n{text}"),
            (_, Ok(r)) => assert_eq!(&serde_json::to_value(&r).unwrap(), doc, "{name}"),
        }
    }
}
