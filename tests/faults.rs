//! Fault injection (`IBV_SHIM_FAULTS`, `ibv-shim --faults`) and the error
//! path sweep (`ibv-shim --fault-sweep`), on ibv-sim through the launcher,
//! with C programs compiled against the real `/usr/include/infiniband/verbs.h`
//! (`tests/c/faults/`), the seed's examples and the real `ibv_devinfo`.
//!
//! That an injected call never reached the real verb is seen on the sim:
//! the PD handles and QP numbers it hands out are consecutive, so a call
//! that reached it would leave a gap.
//!
//! Needs the launcher, the shim and the sim built in the same profile as
//! this test (`make test` builds them) and gcc with libibverbs-dev.

mod common;

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use common::*;

/// The launcher on the sim, on a fabric of its own, without the shim's
/// variables of the test's environment.
fn launcher(fabric: &str, args: &[&str]) -> Command {
    // The launcher preloads the shim next to it (shim_so checks it is built).
    shim_so();
    let mut cmd = Command::new(target_dir().join("ibv-shim"));
    cmd.arg("--sim")
        .arg("--sim-dir")
        .arg(sim_dir())
        .args(args)
        .env("IBV_SIM_FABRIC", fabric);
    for var in [
        "LD_PRELOAD",
        "LD_LIBRARY_PATH",
        "IBV_SHIM_LOG",
        "IBV_SHIM_REPORT",
        "IBV_SHIM_FAULTS",
        "IBV_SHIM_FAULT_COUNT",
        "IBV_SHIM_LEAK_EXITCODE",
        "IBV_SIM_DEVICES",
    ] {
        cmd.env_remove(var);
    }
    cmd
}

fn fabric(tag: &str) -> FabricGuard {
    FabricGuard(fabric_name("faults", tag))
}

fn c_program(name: &str, defines: &[&str]) -> PathBuf {
    let src = repo_dir().join(format!("tests/c/faults/{name}.c"));
    let mut args: Vec<&str> = defines.to_vec();
    args.extend(["-libverbs", "-lpthread"]);
    let tag = format!("{name}{}", defines.join("").replace("-D", "_"));
    cc(&tag, &[src.as_path()], &args)
}

/// `calls WHAT N` with `--faults RULES`: its exit status, its lines, and
/// the shim's lines.
fn calls_status(rules: &str, what: &str, n: u32) -> (Option<i32>, Vec<String>, String) {
    let f = fabric(what);
    let out = run(launcher(&f.0, &["-q", "--faults", rules, "--"])
        .arg(c_program("calls", &[]))
        .args([what, &n.to_string()]));
    (
        out.status.code(),
        stdout(&out).lines().map(str::to_string).collect(),
        stderr(&out),
    )
}

/// [`calls_status`] of a run that must succeed.
fn calls(rules: &str, what: &str, n: u32) -> (Vec<String>, String) {
    let (status, lines, log) = calls_status(rules, what, n);
    assert_eq!(status, Some(0), "{log}");
    (lines, log)
}

/// The numbers of the calls that failed, and the values the others got.
fn split(lines: &[String]) -> (Vec<u32>, Vec<u64>) {
    let (mut failed, mut got) = (Vec::new(), Vec::new());
    for l in lines {
        let mut w = l.split(' ');
        let n: u32 = w.next().unwrap().parse().unwrap();
        match w.next() {
            Some("ok") => got.push(w.next().unwrap().parse().unwrap()),
            _ => failed.push(n),
        }
    }
    (failed, got)
}

fn consecutive(v: &[u64]) -> bool {
    v.windows(2).all(|w| w[1] == w[0] + 1)
}

/// The shim's warning for each injection, one per failed call.
fn injections(log: &str) -> Vec<String> {
    log.lines()
        .filter(|l| l.contains("WARN fault injected: "))
        .map(|l| l.split("fault injected: ").nth(1).unwrap().to_string())
        .collect()
}

#[test]
fn nth_fails_that_call_only_with_its_errno_and_creates_nothing() {
    let (lines, log) = calls("ibv_alloc_pd:nth=3:errno=ENOMEM", "pd", 6);
    let (failed, handles) = split(&lines);
    assert_eq!(failed, [3], "{lines:?}");
    assert!(
        lines[2].ends_with("fail Cannot allocate memory"),
        "{lines:?}"
    );
    // The sim never saw call 3: no handle was used up by it.
    assert_eq!(handles.len(), 5);
    assert!(consecutive(&handles), "{handles:?}");
    let inj = injections(&log);
    assert_eq!(inj.len(), 1, "{log}");
    assert!(
        inj[0].starts_with("ibv_alloc_pd call 3 from ")
            && inj[0].contains("/calls")
            && inj[0].ends_with("failed with errno=ENOMEM, the real verb not called"),
        "{inj:?}"
    );
    // An errno given by number is named in the log (any of the kernel's,
    // 1..=133), not shown as E?.
    let (lines, log) = calls("ibv_alloc_pd:nth=1:errno=100", "pd", 1);
    assert!(lines[0].ends_with("fail Network is down"), "{lines:?}");
    let inj = injections(&log);
    assert!(
        inj.len() == 1 && inj[0].ends_with("failed with errno=ENETDOWN, the real verb not called"),
        "{inj:?}"
    );
}

/// A rule also fires for a verb the program called before the shim was
/// set up (from a library's constructor, which runs before the preloaded
/// shim's): the real function resolved then is marked for the fault check
/// when the rules are armed (fails when a resolved function's fast path
/// skips the check).
#[test]
fn a_rule_fires_for_a_verb_first_called_before_the_shim_was_set_up() {
    let src = repo_dir().join("tests/c/faults/early.c");
    let lib = cc(
        "early_lib",
        &[src.as_path()],
        &["-DEARLY_LIB", "-shared", "-fPIC", "-libverbs"],
    );
    // Linked even though the program uses none of its symbols.
    let lib = lib.to_str().unwrap();
    let prog = cc(
        "early",
        &[src.as_path()],
        &["-Wl,--no-as-needed", lib, "-libverbs"],
    );
    let f = fabric("early");
    let out = run(launcher(
        &f.0,
        &["-q", "--faults", "ibv_alloc_pd:nth=1:errno=ENOMEM", "--"],
    )
    .arg(prog));
    let text = stdout(&out);
    assert_eq!(
        text,
        format!("early ok\npd fail {}\n", libc::ENOMEM),
        "{}",
        stderr(&out)
    );
}

#[test]
fn every_fails_each_nth_call() {
    let (lines, log) = calls("ibv_create_qp:every=3:errno=EAGAIN", "qp", 7);
    let (failed, qpns) = split(&lines);
    assert_eq!(failed, [3, 6], "{lines:?}");
    assert!(lines[5].ends_with("fail Resource temporarily unavailable"));
    assert!(
        consecutive(&qpns),
        "QP numbers {qpns:?}: a call reached the sim"
    );
    assert_eq!(injections(&log).len(), 2, "{log}");
}

#[test]
fn after_fails_every_later_call() {
    let (lines, _) = calls("ibv_reg_mr:after=2:errno=EFAULT", "mr", 5);
    let (failed, _) = split(&lines);
    assert_eq!(failed, [3, 4, 5], "{lines:?}");
    assert!(lines[4].ends_with("fail Bad address"));
}

/// `ibv_modify_qp` returns the errno value itself (rdma-core's
/// convention for modify, query and destroy verbs).
#[test]
fn a_verb_returning_an_errno_value_returns_the_rule_s() {
    let (lines, _) = calls("ibv_modify_qp:nth=2:errno=ETIMEDOUT", "modify", 3);
    assert_eq!(
        lines,
        [
            "1 ok 0",
            &format!("2 fail rc={} Connection timed out", libc::ETIMEDOUT),
            "3 ok 0"
        ]
    );
}

#[test]
fn prob_with_a_seed_fails_the_same_calls_every_run() {
    let rule = "ibv_alloc_pd:prob=0.5:seed=42";
    let (a, _) = calls(rule, "pd", 40);
    let (b, _) = calls(rule, "pd", 40);
    assert_eq!(a, b);
    let (failed, handles) = split(&a);
    assert!((8..=32).contains(&failed.len()), "{failed:?}");
    assert!(consecutive(&handles), "{handles:?}");
    let (c, _) = calls("ibv_alloc_pd:prob=0.5:seed=43", "pd", 40);
    assert_ne!(split(&c).0, failed, "another seed, other calls");
    // `*` covers every verb, each counted on its own.
    let (status, lines, log) = calls_status("*:prob=1", "pd", 3);
    assert_eq!(
        status,
        Some(3),
        "ibv_get_device_list fails first: {lines:?}"
    );
    assert_eq!(injections(&log).len(), 1, "{log}");
}

/// Calls are counted per verb across threads: 4 threads x 25 PDs with
/// every=10 fail exactly 10.
#[test]
fn counting_is_per_verb_across_threads() {
    let (lines, log) = calls("ibv_alloc_pd:every=10", "threads", 25);
    assert_eq!(lines, ["failed 10 of 100"]);
    let inj = injections(&log);
    assert_eq!(inj.len(), 10);
    for n in [10, 50, 100] {
        assert!(
            inj.iter()
                .any(|l| l.starts_with(&format!("ibv_alloc_pd call {n} "))),
            "{inj:?}"
        );
    }
}

/// Completion faults: `ibv_poll_cq` is a static inline verb of verbs.h
/// that reaches the provider through the context's table, which the shim
/// wraps; the rule's status replaces the real one in exactly the
/// completions it picks, with the work request's id kept.
#[test]
fn a_wc_rule_fails_the_completions_it_names() {
    let dir = repo_dir().join("tests/c");
    let src = dir.join("faults/completions.c");
    let inc_sim = format!("-I{}", dir.join("sim").display());
    let inc_pair = format!("-I{}", dir.join("common").display());
    let prog = cc(
        "completions",
        &[src.as_path()],
        &[&inc_sim, &inc_pair, "-libverbs"],
    );
    let statuses = |rules: Option<&str>| -> (Vec<String>, String) {
        let f = fabric("wc");
        let mut args = vec!["-q"];
        if let Some(r) = rules {
            args.extend(["--faults", r]);
        }
        args.push("--");
        let out = run(launcher(&f.0, &args).arg(&prog).arg("4"));
        assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
        (
            stdout(&out).lines().map(str::to_string).collect(),
            stderr(&out),
        )
    };
    // IBV_WC_SUCCESS = 0, IBV_WC_RETRY_EXC_ERR = 12, IBV_WC_REM_ACCESS_ERR = 10.
    assert_eq!(statuses(None).0, ["0", "0", "0", "0"]);
    let (got, log) = statuses(Some("wc:nth=2:status=IBV_WC_RETRY_EXC_ERR"));
    assert_eq!(got, ["0", "12", "0", "0"], "{log}");
    assert_eq!(injections(&log).len(), 1, "{log}");
    let (got, _) = statuses(Some("wc:every=2:status=IBV_WC_REM_ACCESS_ERR"));
    assert_eq!(got, ["0", "10", "0", "10"]);
    let (got, _) = statuses(Some("wc:after=3:status=RETRY_EXC_ERR"));
    assert_eq!(got, ["0", "0", "0", "12"]);
}

/// The JSON report lists each injection, in the report model's types.
#[test]
fn the_json_report_lists_the_injections() {
    let dir = TempDir::new("faults-report");
    let f = fabric("report");
    let report = dir.join("r.json");
    let out = run(launcher(
        &f.0,
        &[
            "-q",
            "--faults",
            "ibv_create_cq:nth=1:errno=EAGAIN",
            "--report",
            report.to_str().unwrap(),
            "--",
        ],
    )
    .arg(c_program("error_paths", &[])));
    assert_eq!(out.status.code(), Some(1));
    let text = std::fs::read_to_string(&report).unwrap();
    let r: report_model::Report = serde_json::from_str(&text).unwrap();
    assert_eq!(r.faults.len(), 1, "{text}");
    let f = &r.faults[0];
    assert_eq!(
        (&*f.verb, f.nth, f.errno.as_deref(), &*f.rule),
        (
            "ibv_create_cq",
            1,
            Some("EAGAIN"),
            "ibv_create_cq:nth=1:errno=EAGAIN"
        )
    );
    assert!(
        f.module.as_deref().unwrap().contains("error_paths"),
        "{f:?}"
    );
    // The leaks the early return left: the context, its PD and MR.
    assert_eq!(
        (
            r.totals.get(report_model::Kind::Context),
            r.totals.get(report_model::Kind::Pd)
        ),
        (1, 1)
    );
    assert_eq!(r.totals.get(report_model::Kind::Mr), 1);
    // Valid against the schema too.
    let check = Command::new("python3")
        .args([
            "-c",
            "import json,sys,jsonschema; jsonschema.validate(json.load(open(sys.argv[1])), json.load(open(sys.argv[2])))",
        ])
        .arg(&report)
        .arg(repo_dir().join("docs/leak-report.schema.json"))
        .output()
        .unwrap();
    assert!(
        check.status.success(),
        "{}",
        String::from_utf8_lossy(&check.stderr)
    );
}

#[test]
fn a_wrong_rule_is_a_clear_error() {
    let f = fabric("wrong");
    let prog = c_program("calls", &[]);
    // The launcher refuses it before the program runs.
    let out = run(launcher(
        &f.0,
        &["--faults", "ibv_alloc_pd:nth=3,ibv_reg_mrr:nth=1", "--"],
    )
    .arg(&prog)
    .args(["pd", "3"]));
    assert_eq!(out.status.code(), Some(2));
    assert!(
        stderr(&out)
            .contains("--faults: fault rule \"ibv_reg_mrr:nth=1\": \"ibv_reg_mrr\" is not a verb"),
        "{}",
        stderr(&out)
    );
    assert!(stdout(&out).is_empty(), "the program did not run");
    // An errno the kernel does not have, and a key given twice, likewise.
    for (rules, says) in [
        ("ibv_alloc_pd:nth=1:errno=200", "a number 1..=133"),
        ("ibv_alloc_pd:nth=1:nth=2", "nth= is given twice"),
    ] {
        let out = run(launcher(&f.0, &["--faults", rules, "--"])
            .arg(&prog)
            .args(["pd", "3"]));
        assert_eq!(out.status.code(), Some(2), "{rules}: {}", stderr(&out));
        assert!(
            stderr(&out).contains(&format!("--faults: fault rule {rules:?}: "))
                && stderr(&out).contains(says),
            "{rules}: {}",
            stderr(&out)
        );
        assert!(stdout(&out).is_empty(), "the program did not run");
    }
    // Preloaded by hand: an ERROR line at start-up names the rule, and no
    // rule of the variable applies (the program runs unharmed).
    for (rules, says) in [
        (
            "ibv_alloc_pd:nth=2:errno=EWHAT",
            "errno=\"EWHAT\" is not an errno name",
        ),
        ("ibv_alloc_pd:nth=2,ibv_alloc_pd", "says not when"),
        ("wc:nth=1:status=IBV_WC_NOT_A_STATUS", "status"),
        // Past the kernel's errno values (EHWPOISON, 133).
        (
            "ibv_alloc_pd:nth=2:errno=200",
            "fault rule \"ibv_alloc_pd:nth=2:errno=200\": errno=\"200\" is not an errno name",
        ),
        (
            "ibv_alloc_pd:nth=2:errno=EIO:errno=ENOMEM",
            "fault rule \"ibv_alloc_pd:nth=2:errno=EIO:errno=ENOMEM\": errno= is given twice",
        ),
    ] {
        let mut cmd = Command::new(&prog);
        cmd.args(["pd", "3"])
            .env("LD_PRELOAD", shim_so())
            .env("LD_LIBRARY_PATH", sim_dir())
            .env("IBV_SIM_FABRIC", &f.0)
            .env("IBV_SHIM_FAULTS", rules)
            .env_remove("IBV_SHIM_LOG");
        let out = run(&mut cmd);
        assert_eq!(out.status.code(), Some(0));
        let err = stderr(&out);
        let error: Vec<&str> = err.lines().filter(|l| l.contains(" ERROR ")).collect();
        assert_eq!(error.len(), 1, "{err}");
        assert!(
            error[0].contains("IBV_SHIM_FAULTS: fault rule") && error[0].contains(says),
            "{rules}: {err}"
        );
        assert!(error[0].ends_with("no fault is injected in this process"));
        assert_eq!(
            split(&stdout(&out).lines().map(str::to_string).collect::<Vec<_>>()).0,
            Vec::<u32>::new()
        );
    }
}

/// A sweep: its exit status, its table (stderr) and its JSON summary.
fn sweep(
    tag: &str,
    args: &[&str],
    program: &Path,
    prog_args: &[&str],
) -> (Output, serde_json::Value) {
    let dir = TempDir::new("faults-sweep");
    let f = fabric(tag);
    let json = dir.join("sweep.json");
    let mut cmd = launcher(
        &f.0,
        &["--fault-sweep", "--sweep-json", json.to_str().unwrap()],
    );
    cmd.args(args).arg("--").arg(program).args(prog_args);
    let out = run(&mut cmd);
    let summary = std::fs::read_to_string(&json)
        .unwrap_or_else(|e| panic!("{}: {e}\n{}", json.display(), stderr(&out)));
    (out, serde_json::from_str(&summary).unwrap())
}

fn table_row(out: &Output, verb: &str) -> Vec<String> {
    let err = stderr(out);
    let line = err
        .lines()
        .find(|l| l.split_whitespace().nth(1) == Some(verb))
        .unwrap_or_else(|| panic!("no row for {verb}:\n{err}"));
    line.split("  ")
        .map(str::trim)
        .filter(|c| !c.is_empty())
        .map(str::to_string)
        .collect()
}

#[test]
fn the_sweep_catches_an_error_path_that_returns_without_cleanup() {
    let leaky = c_program("error_paths", &[]);
    let (out, s) = sweep("leaky", &[], &leaky, &[]);
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    // Counted: every verb the program calls; swept: all but the releases.
    assert_eq!(s["counted"]["ibv_create_cq"], 1);
    assert_eq!(s["counted"]["ibv_dealloc_pd"], 1);
    let runs = s["runs"].as_array().unwrap();
    let verbs: Vec<&str> = runs.iter().map(|r| r["verb"].as_str().unwrap()).collect();
    assert_eq!(
        verbs,
        [
            "ibv_get_device_list",
            "ibv_open_device",
            "ibv_alloc_pd",
            "ibv_reg_mr",
            "ibv_create_cq"
        ]
    );
    assert!(runs.iter().all(|r| r["injected"] == true), "{s:#}");
    let cq = &runs[4];
    assert_eq!(cq["leaked"], true);
    assert_eq!(
        cq["leaks"],
        serde_json::json!({"context": 1, "mr": 1, "pd": 1})
    );
    assert!(
        cq["site"].as_str().unwrap().starts_with("error_paths"),
        "{cq}"
    );
    assert_eq!(s["failed"], 1, "only the early return leaks: {s:#}");
    // The table names the injected call, where it was made, and the leaks.
    let row = table_row(&out, "ibv_create_cq");
    assert_eq!(row[2], "1");
    assert_eq!(row[3], cq["site"].as_str().unwrap());
    assert_eq!(row[4..], ["exit 1", "LEAK", "1 context, 1 mr, 1 pd"]);
    assert!(stderr(&out).contains("ibv-shim: fault sweep: 6 runs, 1 crashed, hung or leaked"));

    // Deterministic: the same table again, here by call site.
    let (again, s2) = sweep("leaky2", &["--sweep-sites", "-j", "3"], &leaky, &[]);
    assert_eq!(again.status.code(), Some(1));
    let key = |s: &serde_json::Value| {
        s["runs"]
            .as_array()
            .unwrap()
            .iter()
            .map(|r| {
                (
                    r["verb"].to_string(),
                    r["site"].to_string(),
                    r["leaks"].to_string(),
                )
            })
            .collect::<Vec<_>>()
    };
    assert_eq!(key(&s), key(&s2));
    assert_eq!(s2["mode"], "sites");
}

#[test]
fn the_same_program_with_cleanup_passes_the_sweep() {
    let clean = c_program("error_paths", &["-DCLEANUP"]);
    let (out, s) = sweep("clean", &[], &clean, &[]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert_eq!(s["failed"], 0);
    assert_eq!(s["runs"].as_array().unwrap().len(), 5, "{s:#}");
    // `all` sweeps the releases too: a failed release keeps its object,
    // which the audit reports, exactly that object.
    let (out, s) = sweep("clean-all", &["--sweep-verbs", "all"], &clean, &[]);
    assert_eq!(out.status.code(), Some(1));
    let leaks = |verb: &str| {
        let runs = s["runs"].as_array().unwrap();
        let r = runs.iter().find(|r| r["verb"] == verb).unwrap();
        r["leaks"].clone()
    };
    assert_eq!(leaks("ibv_destroy_cq"), serde_json::json!({"cq": 1}));
    assert_eq!(leaks("ibv_close_device"), serde_json::json!({"context": 1}));
    assert_eq!(leaks("ibv_create_cq"), serde_json::json!({}));
}

/// A crash and a hang are named. The sweep's timeout is what tells a hang
/// from a run that ends, so it is long enough for any machine to run the
/// counting run and the ibv_alloc_pd run (each a few milliseconds of a
/// small program) well inside it, however loaded: 20 s, which the hanging
/// run then waits out (2 s made a slow machine's ordinary run a "hang").
#[test]
fn the_sweep_names_crashes_and_hangs() {
    let crash = c_program("error_paths", &["-DCLEANUP", "-DCRASH"]);
    let (out, s) = sweep("crash", &["--sweep-verbs", "ibv_create_cq"], &crash, &[]);
    assert_eq!(out.status.code(), Some(1));
    assert_eq!(s["runs"][0]["crashed"], true);
    assert_eq!(s["runs"][0]["signal"], "SIGSEGV");
    assert_eq!(table_row(&out, "ibv_create_cq")[4..6], ["SIGSEGV", "CRASH"]);

    let hang = c_program("error_paths", &["-DCLEANUP", "-DHANG"]);
    let (out, s) = sweep(
        "hang",
        &[
            "--sweep-verbs",
            "ibv_create_cq,ibv_alloc_pd",
            "--sweep-timeout",
            "20",
        ],
        &hang,
        &[],
    );
    assert_eq!(out.status.code(), Some(1));
    let runs = s["runs"].as_array().unwrap();
    assert_eq!(
        (runs[0]["verb"].as_str(), runs[0]["hung"].as_bool()),
        (Some("ibv_alloc_pd"), Some(false))
    );
    assert_eq!(
        (runs[1]["verb"].as_str(), runs[1]["hung"].as_bool()),
        (Some("ibv_create_cq"), Some(true))
    );
    assert_eq!(table_row(&out, "ibv_create_cq")[5], "HANG (>20s)");
}

/// A hung run that started a daemon (a grandchild that left the run's
/// process group and session, `setsid`) is killed whole: when the sweep is
/// over nothing of the run is still running, and the run's report
/// directory went only after it.
#[test]
fn a_hung_run_s_daemon_is_killed_with_it() {
    let prog = c_program("error_paths", &["-DCLEANUP", "-DHANG", "-DORPHAN"]);
    let dir = TempDir::new("faults-orphan");
    let f = fabric("orphan");
    let pid_file = dir.join("orphan.pid");
    let json = dir.join("sweep.json");
    let mut cmd = launcher(
        &f.0,
        &[
            "--fault-sweep",
            "--sweep-json",
            json.to_str().unwrap(),
            "--sweep-verbs",
            "ibv_create_cq",
            "--sweep-timeout",
            "3",
            "--",
        ],
    );
    cmd.arg(&prog).env("ORPHAN_PID_FILE", &pid_file);
    let out = run(&mut cmd);
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    let s: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
    assert_eq!(s["runs"][0]["hung"], true, "{s:#}");
    let pid: i32 = std::fs::read_to_string(&pid_file)
        .unwrap_or_else(|e| panic!("the daemon wrote no pid: {e}\n{}", stderr(&out)))
        .trim()
        .parse()
        .unwrap();
    // Still there (and ours): the sweep left it running. Killed here, so
    // that the failure leaves nothing behind.
    let alive = std::fs::read(format!("/proc/{pid}/cmdline"))
        .is_ok_and(|c| String::from_utf8_lossy(&c).contains("error_paths"));
    if alive {
        // SAFETY: a pid the test's own program wrote, checked above.
        unsafe { libc::kill(pid, libc::SIGKILL) };
    }
    assert!(
        !alive,
        "the hung run's daemon (pid {pid}) still runs after the sweep\n{}",
        stderr(&out)
    );
}

/// The process that watches a run (the reaper) is not itself under the
/// shim: only the program gets the loader's variables.
#[test]
fn the_process_watching_a_run_runs_without_the_shim() {
    let dir = TempDir::new("faults-reaper-env");
    let f = fabric("reaper-env");
    let out_file = dir.join("maps");
    let script = format!(
        "grep -c libibv_shim /proc/$PPID/maps > {0}; grep -c libibv_shim /proc/$$/maps >> {0}; exit 0",
        out_file.display()
    );
    let mut cmd = launcher(
        &f.0,
        &[
            "--fault-sweep",
            "--sweep-json",
            dir.join("s.json").to_str().unwrap(),
            "--",
        ],
    );
    cmd.args(["sh", "-c", &script]);
    let out = run(&mut cmd);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let counts = std::fs::read_to_string(&out_file).unwrap();
    let counts: Vec<&str> = counts.lines().collect();
    assert_eq!(counts[0], "0", "the reaper has the shim mapped");
    assert_ne!(counts[1], "0", "the program has not");
}

/// The sweep's JSON summary is written through a temporary renamed into
/// place: a symbolic link planted at its path (the default
/// `./ibv-shim-sweep.json` in a shared `/tmp`) is refused and its target
/// left as it was.
#[test]
fn the_sweep_json_never_follows_a_link() {
    let prog = c_program("error_paths", &["-DCLEANUP"]);
    let dir = TempDir::new("faults-json-link");
    let f = fabric("json-link");
    let victim = dir.join("victim");
    std::fs::write(&victim, "precious\n").unwrap();
    let link = dir.join("ibv-shim-sweep.json");
    std::os::unix::fs::symlink(&victim, &link).unwrap();
    let mut cmd = launcher(
        &f.0,
        &["--fault-sweep", "--sweep-verbs", "ibv_alloc_pd", "--"],
    );
    cmd.arg(&prog).current_dir(dir.path());
    let out = run(&mut cmd);
    assert_eq!(std::fs::read_to_string(&victim).unwrap(), "precious\n");
    assert!(
        std::fs::symlink_metadata(&link)
            .unwrap()
            .file_type()
            .is_symlink(),
        "the link was replaced"
    );
    assert!(
        stderr(&out).contains(
            "ibv-shim: cannot write ibv-shim-sweep.json: it is a symbolic link, which is not followed"
        ),
        "{}",
        stderr(&out)
    );
    // A regular file there is replaced, nothing left beside it.
    std::fs::remove_file(&link).unwrap();
    std::fs::write(&link, "old").unwrap();
    let mut cmd = launcher(
        &f.0,
        &["--fault-sweep", "--sweep-verbs", "ibv_alloc_pd", "--"],
    );
    cmd.arg(&prog).current_dir(dir.path());
    let out = run(&mut cmd);
    let s: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(&link).unwrap())
        .unwrap_or_else(|e| panic!("{e}\n{}", stderr(&out)));
    assert_eq!(s["schema"], "ibv-shim/fault-sweep/1");
    let names: Vec<_> = std::fs::read_dir(dir.path())
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .collect();
    assert_eq!(names.len(), 2, "{names:?}");
}

/// The seed's examples and the real `ibv_devinfo`, swept to the end.
#[test]
fn sweeps_of_the_seed_examples_and_ibv_devinfo_run_to_completion() {
    for ex in ["list_devices", "open_close", "device_guids"] {
        let prog = cc(ex, &[c_example(ex).as_path()], &["-libverbs"]);
        let (out, s) = sweep(ex, &["-j", "2"], &prog, &[]);
        let n = s["runs"].as_array().unwrap().len();
        assert!(n >= 1, "{ex}: {s:#}");
        assert!(
            stderr(&out).contains(&format!("ibv-shim: fault sweep: {} runs", n + 1)),
            "{}",
            stderr(&out)
        );
        assert!(
            s["runs"]
                .as_array()
                .unwrap()
                .iter()
                .all(|r| r["crashed"] == false && r["hung"] == false),
            "{ex}: {s:#}"
        );
        // ibv_get_device_name of a listed device cannot fail in the real
        // library: swept only when asked.
        let named = |s: &serde_json::Value| {
            s["runs"]
                .as_array()
                .unwrap()
                .iter()
                .filter(|r| r["verb"] == "ibv_get_device_name")
                .count()
        };
        assert_eq!(named(&s), 0, "{ex}: {s:#}");
        if s["counted"]["ibv_get_device_name"].as_u64().unwrap_or(0) > 0 {
            let (_, all) = sweep(
                &format!("{ex}-infallible"),
                &["-j", "2", "--sweep-infallible"],
                &prog,
                &[],
            );
            assert_eq!(
                named(&all) as u64,
                s["counted"]["ibv_get_device_name"].as_u64().unwrap(),
                "{ex}: {all:#}"
            );
        }
    }
    let (out, s) = sweep("devinfo", &["-j", "2"], Path::new("ibv_devinfo"), &[]);
    let runs = s["runs"].as_array().unwrap();
    // ibv_devinfo's queries are inline verbs (query_device_ex, query_port):
    // what reaches the shim is the device list, names and opens.
    assert!(runs.len() >= 3, "{s:#}");
    assert!(runs.iter().any(|r| r["verb"] == "ibv_open_device"), "{s:#}");
    assert!(
        runs.iter()
            .all(|r| r["crashed"] == false && r["hung"] == false && r["injected"] == true),
        "{}",
        stderr(&out)
    );
}

/// On a terminal the sweep shows one progress line rewritten in place
/// (runs done / total, elapsed, ETA); elsewhere one plain line per run.
#[test]
fn the_sweep_shows_progress_on_a_terminal_and_plain_lines_elsewhere() {
    let prog = c_program("error_paths", &["-DCLEANUP"]);
    let (out, _) = sweep("plain", &[], &prog, &[]);
    let err = stderr(&out);
    assert!(
        err.contains("ibv-shim: sweep run 5/5: ibv_create_cq #1 at error_paths"),
        "{err}"
    );
    assert!(!err.contains('\r'));

    let dir = TempDir::new("faults-tty");
    let f = fabric("tty");
    let launcher = target_dir().join("ibv-shim");
    let line = format!(
        "{} --sim --sim-dir {} --fault-sweep --sweep-json {} -- {}",
        launcher.display(),
        sim_dir().display(),
        dir.join("s.json").display(),
        prog.display()
    );
    // script(1) gives the launcher a terminal.
    let out = run(Command::new("script")
        .args(["-qec", &line, "/dev/null"])
        .env("IBV_SIM_FABRIC", &f.0)
        .env_remove("LD_PRELOAD")
        .env_remove("IBV_SHIM_FAULTS"));
    let text = stdout(&out);
    assert!(
        text.contains("\r\x1b[Kibv-shim: sweep 1/5 runs, ")
            && text.contains("\r\x1b[Kibv-shim: sweep 5/5 runs, "),
        "{text:?}"
    );
    assert!(text.contains(" elapsed, ETA "), "{text:?}");
    assert!(!text.contains("sweep run 1/5"), "{text:?}");
}
