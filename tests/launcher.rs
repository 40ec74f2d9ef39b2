//! The launcher, `ibv-shim [options] -- PROGRAM ARGS...`, run as a user
//! runs it: `target/<profile>/ibv-shim`, with the shim next to it.
//!
//! - Its command line: `--help`, `--version`, usage errors (exit 2), a
//!   program not found (127) or not executable (126), the program's exit
//!   status and death by signal (128+N), the environment it gives the
//!   program.
//! - Its summary, from reports a shell script writes to the contract (the
//!   launcher's side alone): several processes, the leak exit code, kept
//!   and private report files, old reports left out.
//! - End to end on the sim (`--sim`): a C program compiled against the
//!   real `/usr/include/infiniband/verbs.h` that leaks a PD, under the
//!   shim's leak audit.
//!
//! Needs the launcher, the shim and the sim built in the same profile as
//! this test (`make test` builds them) and gcc with libibverbs-dev.

mod common;

use common::*;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

/// `target/<profile>/<name>`; panics if it has not been built.
fn built(name: &str) -> PathBuf {
    let path = target_dir().join(name);
    assert!(
        path.is_file(),
        "{} does not exist: run `make test` (it builds the launcher, the shim and the sim before the tests)",
        path.display()
    );
    path
}

/// `target/<profile>/ibv-shim`.
fn launcher_exe() -> PathBuf {
    built("ibv-shim")
}

/// The variables the launcher sets or reads: removed from the tests'
/// environment so each test gives only its own.
const SHIM_VARS: [&str; 13] = [
    "IBV_SHIM_STATUS_DIR",
    "IBV_SHIM_RUN",
    "IBV_SHIM_DEFAULT_SUPPRESSIONS",
    "LD_PRELOAD",
    "LD_LIBRARY_PATH",
    "IBV_SHIM_LOG",
    "IBV_SHIM_LOG_FILE",
    "IBV_SHIM_REPORT",
    "IBV_SHIM_LEAK_EXITCODE",
    "IBV_SHIM_SUPPRESS",
    "IBV_SHIM_BACKTRACE",
    "IBV_SHIM_LIBRARY",
    "IBV_SIM_DEVICES",
];

/// `program` with `args`, without [`SHIM_VARS`] in its environment.
fn hermetic(program: impl AsRef<std::ffi::OsStr>, args: &[&str]) -> Command {
    let mut cmd = Command::new(program);
    cmd.args(args);
    for var in SHIM_VARS {
        cmd.env_remove(var);
    }
    cmd
}

/// The launcher with `args` (stdin /dev/null once run). The shim it
/// preloads is its default, `libibv_shim.so` next to it, which must exist.
fn launcher(args: &[&str]) -> Command {
    built("libibv_shim.so");
    hermetic(launcher_exe(), args)
}

/// The launcher's own summary lines (`ibv-shim: ...`) in stderr; the
/// shim's log lines (`ibv-shim <time> ...`) are left out.
fn summary(output: &Output) -> Vec<String> {
    stderr(output)
        .lines()
        .filter(|l| l.starts_with("ibv-shim: "))
        .map(str::to_string)
        .collect()
}

fn code(output: &Output) -> Option<i32> {
    output.status.code()
}

#[test]
fn help_explains_every_option_its_variables_and_exit_statuses() {
    let mut cmd = launcher(&["--help"]);
    let output = run(&mut cmd);
    assert_eq!(code(&output), Some(0), "{}", describe(&cmd, &output));
    let help = stdout(&output);
    let mut missing = Vec::new();
    for word in [
        "usage: ibv-shim [options] -- PROGRAM",
        "--log LEVEL",
        "off|error|warn|info|debug|trace",
        "--log-file PATH",
        "--report PATH",
        "--leak-exitcode N",
        "--fail-on-leak",
        "--suppress FILE",
        "--backtrace",
        "--sim ",
        "--sim-devices LIST",
        "--library PATH",
        "--shim PATH",
        "--sim-dir DIR",
        "-q, --quiet",
        "-h, --help",
        "-V, --version",
        "IBV_SHIM_LOG.",
        "IBV_SHIM_LOG_FILE",
        "IBV_SHIM_REPORT",
        "IBV_SHIM_LEAK_EXITCODE",
        "IBV_SHIM_SUPPRESS",
        "IBV_SHIM_BACKTRACE=1",
        "IBV_SIM_DEVICES",
        "IBV_SHIM_LIBRARY",
        "LD_PRELOAD",
        "LD_LIBRARY_PATH",
        "%p",
        "Exit status",
        "128+N",
        "2    usage error",
        "126",
        "127",
    ] {
        if !help.contains(word) {
            missing.push(word);
        }
    }
    assert!(
        missing.is_empty(),
        "--help does not mention {missing:?}:\n{help}"
    );
    let mut short = launcher(&["-h"]);
    assert_eq!(stdout(&run(&mut short)), help, "-h is --help");
}

#[test]
fn version_names_the_program() {
    for flag in ["--version", "-V"] {
        let mut cmd = launcher(&[flag]);
        let output = run(&mut cmd);
        assert_eq!(code(&output), Some(0), "{}", describe(&cmd, &output));
        assert!(
            stdout(&output).starts_with("ibv-shim "),
            "{}",
            describe(&cmd, &output)
        );
    }
}

#[test]
fn usage_errors_exit_2_with_a_message_and_run_nothing() {
    let marker = TempDir::new("launcher-usage");
    let touch = format!("touch {}", marker.join("ran").display());
    let cases: [(&[&str], &str); 10] = [
        (&[], "missing `--`"),
        (&["sh", "-c", &touch], "put the program after `--`"),
        (&["--sim"], "missing `--`"),
        (&["--"], "no program after `--`"),
        (
            &["--bogus", "--", "sh", "-c", &touch],
            "unknown option --bogus",
        ),
        (&["-x", "--", "sh", "-c", &touch], "unknown option -x"),
        (&["--log", "loud", "--", "sh", "-c", &touch], "--log"),
        (&["--log"], "--log needs a value"),
        (
            &["--leak-exitcode", "256", "--", "sh", "-c", &touch],
            "--leak-exitcode",
        ),
        (
            &["--leak-exitcode=ten", "--", "sh", "-c", &touch],
            "--leak-exitcode",
        ),
    ];
    let mut failures = Vec::new();
    for (args, needle) in cases {
        let mut cmd = launcher(args);
        let output = run(&mut cmd);
        let err = stderr(&output);
        if code(&output) != Some(2)
            || !err.contains(needle)
            || !err.contains("usage: ibv-shim [options] -- PROGRAM")
            || !output.stdout.is_empty()
        {
            failures.push(format!(
                "expected exit 2 and {needle:?} in stderr\n{}",
                describe(&cmd, &output)
            ));
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
    assert!(
        !marker.join("ran").exists(),
        "a usage error still ran the program"
    );
}

#[test]
fn a_program_without_verbs_exits_0_and_made_no_verbs_calls() {
    let mut cmd = launcher(&["--", "true"]);
    let output = run(&mut cmd);
    assert_eq!(code(&output), Some(0), "{}", describe(&cmd, &output));
    assert_eq!(
        summary(&output),
        ["ibv-shim: true made no verbs calls"],
        "{}",
        describe(&cmd, &output)
    );
}

#[test]
fn the_program_exit_status_is_passed_through() {
    let mut cmd = launcher(&["--", "sh", "-c", "exit 7"]);
    let output = run(&mut cmd);
    assert_eq!(code(&output), Some(7), "{}", describe(&cmd, &output));
    // Stdout and arguments reach the program untouched, `--` included.
    let mut cmd = launcher(&["-q", "--", "sh", "-c", "echo \"$0|$1|$2\"", "--", "-q"]);
    let output = run(&mut cmd);
    assert_eq!(code(&output), Some(0), "{}", describe(&cmd, &output));
    assert_eq!(stdout(&output), "--|-q|\n", "{}", describe(&cmd, &output));
    assert!(summary(&output).is_empty(), "-q: no summary");
}

#[test]
fn death_by_signal_is_128_plus_the_signal() {
    let mut cmd = launcher(&["--", "sh", "-c", "kill -KILL $$"]);
    let output = run(&mut cmd);
    assert_eq!(code(&output), Some(128 + 9), "{}", describe(&cmd, &output));
    assert_eq!(
        summary(&output),
        ["ibv-shim: sh was killed by signal 9 (SIGKILL); no leak report was written"]
    );
}

#[test]
fn sigint_to_the_process_group_stops_the_program_not_the_launcher() {
    // As a terminal's ^C does: SIGINT to the whole foreground process group
    // (a new one, made by setsid, so the test harness is not in it). The
    // launcher must survive it (`run` panics if it is killed) and report.
    built("libibv_shim.so");
    let exe = launcher_exe();
    let mut cmd = hermetic(
        "setsid",
        &[
            exe.to_str().unwrap(),
            "--",
            "sh",
            "-c",
            "kill -INT 0; exec sleep 30",
        ],
    );
    // A terminal's foreground job has SIGINT at its default; a test run
    // from a background job inherits it ignored, which the launcher (as
    // a shell does) passes on: start from the terminal's disposition.
    // SAFETY: only async-signal-safe sigaction calls between fork and exec.
    unsafe {
        std::os::unix::process::CommandExt::pre_exec(&mut cmd, || {
            libc::signal(libc::SIGINT, libc::SIG_DFL);
            libc::signal(libc::SIGQUIT, libc::SIG_DFL);
            Ok(())
        });
    }
    let output = run(&mut cmd);
    assert_eq!(code(&output), Some(128 + 2), "{}", describe(&cmd, &output));
    assert_eq!(
        summary(&output),
        ["ibv-shim: sh was killed by signal 2 (SIGINT); no leak report was written"],
        "{}",
        describe(&cmd, &output)
    );
}

#[test]
fn sigterm_to_the_launcher_is_passed_to_the_program() {
    let mut cmd = launcher(&["--", "sh", "-c", "kill -TERM $PPID; exec sleep 30"]);
    let output = run(&mut cmd);
    assert_eq!(code(&output), Some(128 + 15), "{}", describe(&cmd, &output));
}

#[test]
fn a_program_not_found_is_127_and_not_executable_is_126() {
    let dir = TempDir::new("launcher-exec");
    let script = dir.join("not-executable");
    std::fs::write(&script, "#!/bin/sh\necho ran\n").unwrap();
    let cases: [(&str, i32, &str); 4] = [
        ("no-such-program-for-ibv-shim", 127, "command not found"),
        ("/no/such/dir/prog", 127, "No such file or directory"),
        (script.to_str().unwrap(), 126, "Permission denied"),
        (dir.path().to_str().unwrap(), 126, "Is a directory"),
    ];
    for (prog, status, needle) in cases {
        let mut cmd = launcher(&["--", prog]);
        let output = run(&mut cmd);
        assert_eq!(code(&output), Some(status), "{}", describe(&cmd, &output));
        assert!(
            stderr(&output).contains(needle) && stderr(&output).contains(prog),
            "expected {needle:?}\n{}",
            describe(&cmd, &output)
        );
        assert!(output.stdout.is_empty());
    }
}

#[test]
fn a_missing_shim_is_a_clear_error() {
    let mut cmd = launcher(&["--shim", "/no/such/libibv_shim.so", "--", "true"]);
    let output = run(&mut cmd);
    assert_eq!(code(&output), Some(125), "{}", describe(&cmd, &output));
    assert!(
        stderr(&output).contains("/no/such/libibv_shim.so does not exist"),
        "{}",
        describe(&cmd, &output)
    );
}

/// The program's environment under the launcher, from `env`.
fn env_under(args: &[&str], extra: &[(&str, &str)]) -> (Vec<(String, String)>, Output) {
    let mut all = args.to_vec();
    all.extend(["--", "env"]);
    let mut cmd = launcher(&all);
    for (k, v) in extra {
        cmd.env(k, v);
    }
    let output = run(&mut cmd);
    assert_eq!(code(&output), Some(0), "{}", describe(&cmd, &output));
    let vars = stdout(&output)
        .lines()
        .filter_map(|l| l.split_once('='))
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
    (vars, output)
}

fn var<'a>(vars: &'a [(String, String)], name: &str) -> Option<&'a str> {
    vars.iter()
        .find(|(k, _)| k == name)
        .map(|(_, v)| v.as_str())
}

#[test]
fn options_become_the_shims_variables() {
    let dir = TempDir::new("launcher-env");
    let shim = std::fs::canonicalize(built("libibv_shim.so")).unwrap();
    let suppress = dir.join("leaks.supp");
    std::fs::write(&suppress, "").unwrap();
    let report = dir.join("r.%p.json");
    let (vars, _) = env_under(
        &[
            "--log",
            "debug",
            "--log-file",
            dir.join("log.%p").to_str().unwrap(),
            "--report",
            report.to_str().unwrap(),
            "--fail-on-leak",
            "--suppress",
            suppress.to_str().unwrap(),
            "--backtrace",
            "--library",
            "/opt/rdma/libibverbs.so.1",
            "-q",
        ],
        &[("LD_PRELOAD", "/opt/a.so /opt/b.so")],
    );
    let want = [
        ("IBV_SHIM_LOG", "debug".to_string()),
        (
            "IBV_SHIM_LOG_FILE",
            dir.join("log.%p").display().to_string(),
        ),
        ("IBV_SHIM_REPORT", report.display().to_string()),
        ("IBV_SHIM_LEAK_EXITCODE", "23".into()),
        ("IBV_SHIM_SUPPRESS", suppress.display().to_string()),
        ("IBV_SHIM_BACKTRACE", "1".into()),
        ("IBV_SHIM_LIBRARY", "/opt/rdma/libibverbs.so.1".into()),
        (
            "LD_PRELOAD",
            format!("{}:/opt/a.so:/opt/b.so", shim.display()),
        ),
    ];
    for (name, value) in &want {
        assert_eq!(var(&vars, name), Some(value.as_str()), "{name}: {vars:?}");
    }
    assert_eq!(var(&vars, "IBV_SIM_DEVICES"), None);
    assert_eq!(var(&vars, "LD_LIBRARY_PATH"), None, "no --sim: no sim");

    let (vars, _) = env_under(&["--leak-exitcode", "42"], &[]);
    assert_eq!(var(&vars, "IBV_SHIM_LEAK_EXITCODE"), Some("42"));
    assert_eq!(
        var(&vars, "LD_PRELOAD"),
        Some(shim.to_str().unwrap()),
        "alone in LD_PRELOAD when none was inherited"
    );
    assert_eq!(var(&vars, "IBV_SHIM_LOG"), None, "unset unless asked for");
}

#[test]
fn sim_puts_the_sims_directory_first_in_the_library_path() {
    // A copy of the launcher and the shim in bin/ of a fresh tree, with a
    // stand-in sim: the launcher's defaults are relative to its own place.
    let tree = TempDir::new("launcher-sim-dir");
    let bin = tree.join("bin");
    std::fs::create_dir_all(&bin).unwrap();
    for name in ["ibv-shim", "libibv_shim.so"] {
        std::fs::copy(built(name), bin.join(name)).unwrap();
    }
    let run_env = |args: &[&str]| {
        let mut cmd = hermetic(bin.join("ibv-shim"), args);
        cmd.env("LD_LIBRARY_PATH", "/opt/old/lib");
        let output = run(&mut cmd);
        (describe(&cmd, &output), output)
    };

    // No sim built next to it: a clear error, nothing run.
    let (context, output) = run_env(&["--sim", "--", "env"]);
    assert_eq!(code(&output), Some(125), "{context}");
    assert!(
        stderr(&output).contains("the sim is not built"),
        "{context}"
    );
    assert!(output.stdout.is_empty(), "{context}");

    // With libibv_sim.so next to it: ../sim/libibverbs.so.1 is made from it.
    std::fs::write(bin.join("libibv_sim.so"), b"stand-in sim").unwrap();
    let (context, output) = run_env(&["--sim-devices", "rxe0,mlx4_0", "-q", "--", "env"]);
    assert_eq!(code(&output), Some(0), "{context}");
    let sim = std::fs::canonicalize(tree.join("sim")).unwrap();
    assert_eq!(
        std::fs::read(sim.join("libibverbs.so.1")).unwrap(),
        b"stand-in sim"
    );
    let text = stdout(&output);
    let want_path = format!("LD_LIBRARY_PATH={}:/opt/old/lib", sim.display());
    assert!(
        text.lines().any(|l| l == want_path),
        "{want_path}\n{context}"
    );
    assert!(
        text.lines().any(|l| l == "IBV_SIM_DEVICES=rxe0,mlx4_0"),
        "{context}"
    );

    // --sim-dir names another directory, which must hold the library.
    let (context, output) = run_env(&["--sim-dir", bin.to_str().unwrap(), "--", "env"]);
    assert_eq!(code(&output), Some(125), "{context}");
    assert!(
        stderr(&output).contains("no libibverbs.so.1 in it"),
        "{context}"
    );
}

#[test]
fn without_report_the_launcher_uses_a_private_directory_and_removes_it() {
    let (vars, output) = env_under(&[], &[]);
    let report = var(&vars, "IBV_SHIM_REPORT").expect("IBV_SHIM_REPORT is set");
    let report = Path::new(report);
    assert!(
        report.is_absolute() && report.file_name().unwrap() == "ibv-shim-report.%p.json",
        "{}",
        report.display()
    );
    let dir = report.parent().unwrap();
    assert!(
        !dir.exists(),
        "{} is still there after the run",
        dir.display()
    );
    assert_eq!(summary(&output), ["ibv-shim: env made no verbs calls"]);
}

/// A shell script that writes the reports a forking program's processes
/// would: `write PID JSON` puts JSON at IBV_SHIM_REPORT with `%p` = PID,
/// each marked with the launcher's run (`IBV_SHIM_RUN`) as the shim marks
/// it.
const WRITE_REPORTS: &str = r#"
write() { f=$(printf '%s' "$IBV_SHIM_REPORT" | sed "s/%p/$1/g"); printf '%s\n' "$2" > "$f"; }
OBJ='"handle":"0x10","context":"0x1","device":"mlx5_0","guid":null,"parent":null'
PD='"fields":{"handle":1}'
MR='"fields":{"addr":"0x1000","length":64,"lkey":1,"rkey":1,"access":1,"via":"ibv_reg_mr"}'
write 1001 '{"schema":"ibv-shim/leak-report/1","pid":1001,"program":"forker","run":"'"$IBV_SHIM_RUN"'","leaked":true,"totals":{"pd":1,"context":1},"objects":[
 {"kind":"pd",'"$OBJ,$PD"',"created":{"thread":1,"time":0.1,"module":"/x/forker","symbol":"main","offset":32,"backtrace":null},"found":"close","suppressed":false},
 {"kind":"context","handle":"0x1","context":null,"device":"mlx5_0","guid":"0c42a10300000001","parent":null,"fields":{"imported":false},"created":{"thread":1,"time":0.0,"module":"/x/forker","symbol":"main","offset":16,"backtrace":null},"found":"exit","suppressed":false}]}'
write 1002 '{"schema":"ibv-shim/leak-report/1","pid":1002,"program":"forker","run":"'"$IBV_SHIM_RUN"'","leaked":true,"totals":{"mr":1},"objects":[
 {"kind":"mr",'"$OBJ,$MR"',"created":{"thread":2,"time":0.2,"module":"/x/forker","symbol":"child","offset":8,"backtrace":null},"found":"exit","suppressed":false},
 {"kind":"pd",'"$OBJ,$PD"',"created":{"thread":2,"time":0.2,"module":"/x/libkeep.so","symbol":"init","offset":8,"backtrace":null},"found":"exit","suppressed":true}]}'
write 1003 '{"schema":"ibv-shim/leak-report/1","pid":1003,"program":"forker","run":"'"$IBV_SHIM_RUN"'","leaked":false,"totals":{},"objects":[]}'
exit "${1:-0}"
"#;

/// Named after the program that used verbs (`forker`), not the shell that
/// ran it.
const FORKER_SUMMARY: [&str; 6] = [
    "ibv-shim: forker leaked 3 RDMA objects in 2 of 3 processes: 1 pd, 1 mr, 1 context (1 suppressed)",
    "ibv-shim:   pid 1001 (forker): 1 pd, 1 context",
    "ibv-shim:     pd           0x10 on mlx5_0, created at forker:main+0x20 (orphaned at close)",
    "ibv-shim:     context      0x1 on mlx5_0, created at forker:main+0x10 (still live at exit)",
    "ibv-shim:   pid 1002 (forker): 1 mr",
    "ibv-shim:     mr           0x10 on mlx5_0, created at forker:child+0x8 (still live at exit)",
];

#[test]
fn the_summary_covers_every_process_report() {
    let mut cmd = launcher(&["--", "sh", "-c", WRITE_REPORTS]);
    let output = run(&mut cmd);
    assert_eq!(code(&output), Some(0), "{}", describe(&cmd, &output));
    let got = summary(&output);
    let mut want: Vec<&str> = FORKER_SUMMARY.to_vec();
    want.push("ibv-shim: --report PATH keeps the full JSON report");
    assert_eq!(got, want, "{}", describe(&cmd, &output));
}

#[test]
fn the_leak_exit_code_is_passed_through_or_applied() {
    // The shim made the program exit with the leak code: passed through.
    let mut cmd = launcher(&[
        "--fail-on-leak",
        "--",
        "sh",
        "-c",
        WRITE_REPORTS,
        "sh",
        "23",
    ]);
    let output = run(&mut cmd);
    assert_eq!(code(&output), Some(23), "{}", describe(&cmd, &output));
    assert!(
        summary(&output)
            .contains(&"ibv-shim: exit status 23: the program leaked (--leak-exitcode 23)".into()),
        "{}",
        describe(&cmd, &output)
    );
    // The program exited 0 but one of its processes leaked: the leak code.
    let mut cmd = launcher(&["--leak-exitcode", "42", "--", "sh", "-c", WRITE_REPORTS]);
    let output = run(&mut cmd);
    assert_eq!(code(&output), Some(42), "{}", describe(&cmd, &output));
    // The program's own failure is not hidden.
    let mut cmd = launcher(&["--fail-on-leak", "--", "sh", "-c", WRITE_REPORTS, "sh", "3"]);
    let output = run(&mut cmd);
    assert_eq!(code(&output), Some(3), "{}", describe(&cmd, &output));
    // Without the option the program's status stands.
    let mut cmd = launcher(&["--", "sh", "-c", WRITE_REPORTS]);
    assert_eq!(code(&run(&mut cmd)), Some(0));
}

#[test]
fn kept_reports_stay_and_old_ones_are_not_summarised() {
    let dir = TempDir::new("launcher-kept");
    let template = dir.join("r.%p.json");
    let old = dir.join("r.77.json");
    std::fs::write(
        &old,
        r#"{"pid":77,"leaked":true,"objects":[{"kind":"qp","handle":"0x7"}]}"#,
    )
    .unwrap();
    let mut cmd = launcher(&[
        "--report",
        template.to_str().unwrap(),
        "--",
        "sh",
        "-c",
        WRITE_REPORTS,
    ]);
    let output = run(&mut cmd);
    assert_eq!(code(&output), Some(0), "{}", describe(&cmd, &output));
    let got = summary(&output);
    assert_eq!(got[..6], FORKER_SUMMARY, "{}", describe(&cmd, &output));
    let files: Vec<String> = ["r.1001.json", "r.1002.json", "r.1003.json"]
        .iter()
        .map(|f| dir.join(f).display().to_string())
        .collect();
    assert_eq!(
        got[6..],
        [format!("ibv-shim: full reports: {}", files.join(" "))],
        "{}",
        describe(&cmd, &output)
    );
    for f in &files {
        assert!(Path::new(f).is_file(), "{f} was removed");
    }
    assert!(old.is_file());

    // Only the old report is there: this run wrote none.
    let mut cmd = launcher(&["--report", old.to_str().unwrap(), "--", "true"]);
    let output = run(&mut cmd);
    assert_eq!(summary(&output), ["ibv-shim: true made no verbs calls"]);
}

#[test]
fn an_unreadable_report_is_named() {
    let script =
        r#"f=$(printf '%s' "$IBV_SHIM_REPORT" | sed "s/%p/5/"); printf '{"pid":5,' > "$f""#;
    let mut cmd = launcher(&["--", "sh", "-c", script]);
    let output = run(&mut cmd);
    assert_eq!(code(&output), Some(0), "{}", describe(&cmd, &output));
    let got = summary(&output);
    assert!(
        got.len() == 1
            && got[0].starts_with("ibv-shim: cannot read the report ")
            && got[0].contains("ibv-shim-report.5.json"),
        "{}",
        describe(&cmd, &output)
    );
}

/// Another launcher's processes writing to the same directory at the same
/// time (the same `--report DIR/r.%p.json`, an inherited
/// `IBV_SHIM_REPORT`) are not this run's: only the reports marked with
/// this run's id are summarised.
#[test]
fn reports_of_another_launcher_s_run_are_not_summarised() {
    let dir = TempDir::new("launcher-two-runs");
    let template = dir.join("r.%p.json");
    // A report another run's process wrote meanwhile (a leak), beside this
    // run's own (clean).
    let script = r#"
f() { printf '%s' "$IBV_SHIM_REPORT" | sed "s/%p/$1/g"; }
printf '%s\n' '{"schema":"ibv-shim/leak-report/1","pid":2001,"program":"server","run":"ibv-shim.1.other","leaked":true,"totals":{"pd":1},"objects":[{"kind":"pd","handle":"0x10","context":"0x1","device":"mlx5_0","guid":null,"parent":null,"fields":{"handle":1},"created":{"thread":1,"time":0.1,"module":"/x/server","symbol":"main","offset":32,"backtrace":null},"found":"exit","suppressed":false}]}' > "$(f 2001)"
[ "$1" = alone ] && exit 0
printf '%s\n' '{"schema":"ibv-shim/leak-report/1","pid":2002,"program":"client","run":"'"$IBV_SHIM_RUN"'","leaked":false,"totals":{},"objects":[]}' > "$(f 2002)"
"#;
    let mut cmd = launcher(&[
        "--fail-on-leak",
        "--report",
        template.to_str().unwrap(),
        "--",
        "sh",
        "-c",
        script,
    ]);
    let output = run(&mut cmd);
    assert_eq!(code(&output), Some(0), "{}", describe(&cmd, &output));
    assert_eq!(
        summary(&output),
        ["ibv-shim: no RDMA resources leaked"],
        "{}",
        describe(&cmd, &output)
    );
    // A program that never used verbs is not given the other's summary.
    let mut cmd = launcher(&[
        "--fail-on-leak",
        "--report",
        template.to_str().unwrap(),
        "--",
        "sh",
        "-c",
        script,
        "sh",
        "alone",
    ]);
    let output = run(&mut cmd);
    assert_eq!(code(&output), Some(0), "{}", describe(&cmd, &output));
    assert_eq!(
        summary(&output),
        ["ibv-shim: sh made no verbs calls"],
        "{}",
        describe(&cmd, &output)
    );
}

/// A report without a run id (a shim older than the launcher, given with
/// `--shim`) is this run's when its process noted itself in this run's
/// private directory (`IBV_SHIM_STATUS_DIR`), and not otherwise.
#[test]
fn a_report_without_a_run_id_is_this_run_s_if_its_process_is() {
    let dir = TempDir::new("launcher-no-run-id");
    let template = dir.join("r.%p.json");
    let script = r#"
f() { printf '%s' "$IBV_SHIM_REPORT" | sed "s/%p/$1/g"; }
doc() { printf '%s\n' '{"schema":"ibv-shim/leak-report/1","pid":'$1',"program":"p'$1'","leaked":true,"totals":{"pd":1},"objects":[{"kind":"pd","handle":"0x10","context":"0x1","device":"mlx5_0","guid":null,"parent":null,"fields":{"handle":1},"created":{"thread":1,"time":0.1,"module":"/x/p","symbol":"main","offset":32,"backtrace":null},"found":"exit","suppressed":false}]}' > "$(f $1)"; }
printf '3001 /x/p3001\n' > "$IBV_SHIM_STATUS_DIR/3001.started"
doc 3001
doc 3002
"#;
    let mut cmd = launcher(&[
        "--report",
        template.to_str().unwrap(),
        "--",
        "sh",
        "-c",
        script,
    ]);
    let output = run(&mut cmd);
    assert_eq!(code(&output), Some(0), "{}", describe(&cmd, &output));
    let got = summary(&output);
    assert_eq!(
        got.first().map(String::as_str),
        Some("ibv-shim: p3001 leaked 1 RDMA object: 1 pd"),
        "{}",
        describe(&cmd, &output)
    );
    assert!(!got.iter().any(|l| l.contains("3002")), "{got:?}");
}

// ---- End to end: the shim's leak audit on the sim -------------------------

/// A program that opens the first device, allocates a PD and closes the
/// device without freeing the PD (`leak`), or frees it first (`clean`).
const LEAK_PD_C: &str = r#"
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <infiniband/verbs.h>

int main(int argc, char **argv)
{
    int clean = argc > 1 && strcmp(argv[1], "clean") == 0;
    int n = 0;
    struct ibv_device **list = ibv_get_device_list(&n);
    if (!list || n == 0) {
        fprintf(stderr, "leak_pd: no RDMA device: %s\n", list ? "empty list" : strerror(errno));
        return 1;
    }
    struct ibv_context *ctx = ibv_open_device(list[0]);
    if (!ctx) {
        perror("leak_pd: ibv_open_device");
        return 1;
    }
    printf("leak_pd: device %s\n", ibv_get_device_name(ctx->device));
    struct ibv_pd *pd = ibv_alloc_pd(ctx);
    if (!pd) {
        perror("leak_pd: ibv_alloc_pd");
        return 1;
    }
    if (clean && ibv_dealloc_pd(pd)) {
        perror("leak_pd: ibv_dealloc_pd");
        return 1;
    }
    if (ibv_close_device(ctx)) {
        perror("leak_pd: ibv_close_device");
        return 1;
    }
    ibv_free_device_list(list);
    printf("leak_pd: %s\n", clean ? "freed the PD" : "left the PD behind");
    return 0;
}
"#;

/// `leak_pd`, compiled with gcc against the real `verbs.h` (the system's
/// include path; `-libverbs`).
fn leak_pd() -> PathBuf {
    assert!(
        Path::new("/usr/include/infiniband/verbs.h").is_file(),
        "/usr/include/infiniband/verbs.h is missing: install libibverbs-dev"
    );
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join("launcher");
    std::fs::create_dir_all(&dir).unwrap();
    let src = dir.join("leak_pd.c");
    if std::fs::read_to_string(&src).ok().as_deref() != Some(LEAK_PD_C) {
        // Unique per thread too: the tests of this binary run in parallel.
        let tmp = dir.join(format!(
            ".leak_pd.c.{}.{:?}",
            std::process::id(),
            std::thread::current().id()
        ));
        std::fs::write(&tmp, LEAK_PD_C).unwrap();
        std::fs::rename(&tmp, &src).unwrap();
    }
    cc("leak_pd", &[&src], &["-libverbs"])
}

/// The launcher on the sim (its default sim directory, made from
/// `libibv_sim.so` next to it) with one device, `mlx5_0`.
fn on_sim(args: &[&str], prog: &Path, prog_args: &[&str]) -> (Command, Output) {
    built("libibv_sim.so");
    let mut all = vec!["--sim-devices", "mlx5_0"];
    all.extend(args);
    all.push("--");
    all.push(prog.to_str().unwrap());
    all.extend(prog_args);
    let mut cmd = launcher(&all);
    let output = run(&mut cmd);
    (cmd, output)
}

fn header(prog: &Path, rest: &str) -> String {
    format!("ibv-shim: {} {rest}", prog.display())
}

#[test]
fn a_leaked_pd_on_the_sim_is_summarised() {
    let prog = leak_pd();
    let (cmd, output) = on_sim(&[], &prog, &[]);
    let context = describe(&cmd, &output);
    assert_eq!(code(&output), Some(0), "{context}");
    assert!(
        stdout(&output).contains("leak_pd: left the PD behind"),
        "{context}"
    );
    let got = summary(&output);
    assert_eq!(
        got.first().map(String::as_str),
        Some(header(&prog, "leaked 1 RDMA object: 1 pd").as_str()),
        "{context}"
    );
    let objects: Vec<&String> = got
        .iter()
        .filter(|l| l.starts_with("ibv-shim:   "))
        .collect();
    assert_eq!(objects.len(), 1, "one object line: {context}");
    assert!(
        objects[0].starts_with("ibv-shim:   pd ")
            && objects[0].contains(" on mlx5_0")
            && objects[0].ends_with("(orphaned at close)"),
        "the PD, on mlx5_0, found at ibv_close_device: {context}"
    );
}

#[test]
fn fail_on_leak_makes_the_exit_status_23() {
    let prog = leak_pd();
    let (cmd, output) = on_sim(&["--fail-on-leak"], &prog, &[]);
    let context = describe(&cmd, &output);
    assert_eq!(code(&output), Some(23), "{context}");
    let got = summary(&output);
    assert_eq!(
        got.first().map(String::as_str),
        Some(header(&prog, "leaked 1 RDMA object: 1 pd").as_str()),
        "{context}"
    );
    assert!(
        got.contains(&"ibv-shim: exit status 23: the program leaked (--leak-exitcode 23)".into()),
        "{context}"
    );
    let (cmd, output) = on_sim(&["--leak-exitcode", "99", "-q"], &prog, &[]);
    assert_eq!(code(&output), Some(99), "{}", describe(&cmd, &output));
    assert!(summary(&output).is_empty(), "-q: no summary");
}

#[test]
fn a_clean_program_on_the_sim_leaks_nothing() {
    let prog = leak_pd();
    let (cmd, output) = on_sim(&["--fail-on-leak"], &prog, &["clean"]);
    let context = describe(&cmd, &output);
    assert_eq!(code(&output), Some(0), "{context}");
    assert!(
        stdout(&output).contains("leak_pd: freed the PD"),
        "{context}"
    );
    assert_eq!(
        summary(&output),
        ["ibv-shim: no RDMA resources leaked"],
        "{context}"
    );
}

#[test]
fn a_kept_report_from_the_sim_follows_the_contract() {
    let prog = leak_pd();
    let dir = TempDir::new("launcher-sim-report");
    let template = dir.join("leak.%p.json");
    let (cmd, output) = on_sim(&["--report", template.to_str().unwrap()], &prog, &[]);
    let context = describe(&cmd, &output);
    assert_eq!(code(&output), Some(0), "{context}");
    let files: Vec<PathBuf> = std::fs::read_dir(dir.path())
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    assert_eq!(
        files.len(),
        1,
        "one process, one report: {files:?}\n{context}"
    );
    let text = std::fs::read_to_string(&files[0]).unwrap();
    let compact: String = text.split_whitespace().collect();
    for needle in [
        r#""schema":"ibv-shim/leak-report/1""#,
        r#""leaked":true"#,
        r#""kind":"pd""#,
        r#""found":"close""#,
    ] {
        assert!(
            compact.contains(needle),
            "{needle} not in the report:\n{text}"
        );
    }
    assert_eq!(
        summary(&output).last(),
        Some(&format!("ibv-shim: full report: {}", files[0].display())),
        "{context}"
    );
}

/// `tests/c/launcher/ends.c`: uses verbs, then ends as its argument says.
fn ends() -> PathBuf {
    cc(
        "ends",
        &[&repo_dir().join("tests/c/launcher/ends.c")],
        &["-libverbs"],
    )
}

/// The pids the program printed (`pid N`, `child N`).
fn printed_pid(output: &Output, what: &str) -> u32 {
    stdout(output)
        .lines()
        .find_map(|l| l.strip_prefix(what)?.strip_prefix(' ')?.parse().ok())
        .unwrap_or_else(|| panic!("no `{what} N` in stdout:\n{}", stdout(output)))
}

#[test]
fn a_forked_child_never_replaces_its_parents_report_at_a_fixed_name() {
    let prog = ends();
    let dir = TempDir::new("launcher-fixed-report");
    let fixed = dir.join("r.json");
    let (cmd, output) = on_sim(
        &[
            "--report",
            fixed.to_str().unwrap(),
            "--log-file",
            dir.join("log").to_str().unwrap(),
        ],
        &prog,
        &["fork"],
    );
    let context = describe(&cmd, &output);
    assert_eq!(code(&output), Some(0), "{context}");
    let (parent, child) = (printed_pid(&output, "pid"), printed_pid(&output, "child"));
    // The child exits first and takes the name; the parent, finding a
    // report written since it started, adds its pid.
    let read = |p: PathBuf| -> serde_json::Value {
        let text = std::fs::read_to_string(&p)
            .unwrap_or_else(|e| panic!("{}: {e}\n{context}", p.display()));
        serde_json::from_str(&text).unwrap()
    };
    assert_eq!(read(fixed.clone())["pid"], child, "{context}");
    assert_eq!(
        read(dir.join(format!("r.{parent}.json")))["pid"],
        parent,
        "{context}"
    );
    let log = std::fs::read_to_string(dir.join("log")).unwrap();
    assert!(
        log.lines().any(|l| l.contains(" WARN ")
            && l.contains("another process wrote its report there")
            && l.contains(&format!("r.{parent}.json"))),
        "{log}"
    );
    // And the summary covers both.
    assert_eq!(
        summary(&output).first(),
        Some(&header(
            &prog,
            "leaked 4 RDMA objects in 2 processes: 2 pd, 1 context, 1 device_list"
        )),
        "{context}"
    );
}

#[test]
fn a_program_killed_before_its_report_is_named_with_the_signal() {
    let prog = ends();
    let name = prog.file_name().unwrap().to_str().unwrap().to_string();
    // Killed directly: the launcher's own child.
    let (cmd, output) = on_sim(&[], &prog, &["kill"]);
    let context = describe(&cmd, &output);
    assert_eq!(code(&output), Some(137), "{context}");
    let pid = printed_pid(&output, "pid");
    assert_eq!(
        summary(&output),
        [format!(
            "ibv-shim: {name} (pid {pid}) was killed by signal 9 (SIGKILL) before writing its report"
        )],
        "{context}"
    );

    // Through a wrapper that kills it with SIGTERM: named after the
    // program that used verbs, not the wrapper. (5 s: time enough, on a
    // loaded machine, to reach its first verbs call.)
    let (cmd, output) = on_sim(
        &[],
        Path::new("/usr/bin/timeout"),
        &["5", prog.to_str().unwrap(), "sleep"],
    );
    let context = describe(&cmd, &output);
    assert_eq!(code(&output), Some(124), "timeout's own status: {context}");
    let pid = printed_pid(&output, "pid");
    assert_eq!(
        summary(&output),
        [format!(
            "ibv-shim: {name} (pid {pid}) was killed by signal 15 (SIGTERM) before writing its report"
        )],
        "{context}"
    );
}

#[test]
fn a_program_run_through_a_wrapper_is_named_after_itself() {
    let prog = ends();
    let name = prog.file_name().unwrap().to_str().unwrap().to_string();
    let (cmd, output) = on_sim(
        &[],
        Path::new("/usr/bin/timeout"),
        &["20", prog.to_str().unwrap()],
    );
    let context = describe(&cmd, &output);
    assert_eq!(code(&output), Some(0), "{context}");
    assert_eq!(
        summary(&output).first(),
        Some(&format!(
            "ibv-shim: {name} leaked 3 RDMA objects: 1 pd, 1 context, 1 device_list"
        )),
        "{context}"
    );
}

/// A launcher run inside another's, both with the same `--report`: the
/// inner run's leaking program is the inner launcher's, not the outer's.
#[test]
fn a_launcher_inside_another_summarises_only_its_own_processes() {
    let prog = leak_pd();
    built("libibv_sim.so");
    let dir = TempDir::new("launcher-nested");
    let template = dir.join("r.%p.json");
    let inner = format!(
        "{} --sim-devices mlx5_0 --report {} -- {} > /dev/null 2>&1; exit 0",
        launcher_exe().display(),
        template.display(),
        prog.display()
    );
    let mut cmd = launcher(&[
        "--fail-on-leak",
        "--report",
        template.to_str().unwrap(),
        "--",
        "sh",
        "-c",
        &inner,
    ]);
    let output = run(&mut cmd);
    let context = describe(&cmd, &output);
    assert_eq!(code(&output), Some(0), "{context}");
    assert_eq!(
        summary(&output),
        ["ibv-shim: sh made no verbs calls"],
        "{context}"
    );
    // The inner run did write its leaking report there.
    let reports = std::fs::read_dir(dir.path()).unwrap().count();
    assert_eq!(reports, 1, "{context}");
}

/// The shim refuses to write its report over a FIFO (or any special
/// file) at the report's path; the summary says so, not that the process
/// died.
#[test]
fn a_refused_report_is_named_with_why() {
    let prog = ends();
    let name = prog.file_name().unwrap().to_str().unwrap().to_string();
    let dir = TempDir::new("launcher-fifo-report");
    let fifo = dir.join("r.json");
    let c = std::ffi::CString::new(fifo.to_str().unwrap()).unwrap();
    // SAFETY: a NUL-terminated path.
    assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0);
    let (cmd, output) = on_sim(&["--report", fifo.to_str().unwrap()], &prog, &[]);
    let context = describe(&cmd, &output);
    assert_eq!(code(&output), Some(0), "{context}");
    let pid = printed_pid(&output, "pid");
    assert_eq!(
        summary(&output),
        [format!(
            "ibv-shim: {name} (pid {pid}) used verbs but its report was refused: {}: it is a FIFO, not a regular file",
            fifo.display()
        )],
        "{context}"
    );
}

/// Runs `ends HOW` under the launcher, sends the launcher SIGTERM (which it
/// passes on) once the program has made its verbs calls, and returns the
/// program's pid and the launcher's output.
fn terminate(how: &str) -> (u32, Output) {
    use std::io::BufRead;
    let prog = ends();
    built("libibv_sim.so");
    let mut cmd = launcher(&["--sim-devices", "mlx5_0", "--", prog.to_str().unwrap(), how]);
    let mut child = cmd
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    // Once it printed its pid it has made its verbs calls (it then sleeps
    // 60 s at most: no hang).
    let mut line = String::new();
    std::io::BufReader::new(child.stdout.take().unwrap())
        .read_line(&mut line)
        .unwrap();
    let pid: u32 = line.trim().strip_prefix("pid ").unwrap().parse().unwrap();
    let kill = Command::new("kill")
        .args(["-TERM", &child.id().to_string()])
        .status()
        .unwrap();
    assert!(kill.success());
    (pid, child.wait_with_output().unwrap())
}

#[test]
fn a_program_terminated_under_the_launcher_still_dies_of_the_signal() {
    let name = ends().file_name().unwrap().to_str().unwrap().to_string();
    let (pid, out) = terminate("sleep");
    // Its death is the signal's, as without the shim's handler: 128 + 15.
    assert_eq!(code(&out), Some(143), "{}", stderr(&out));
    assert_eq!(
        summary(&out),
        [format!(
            "ibv-shim: {name} (pid {pid}) was killed by signal 15 (SIGTERM) before writing its report"
        )],
        "{}",
        stderr(&out)
    );
}

#[test]
fn a_sigterm_handler_of_the_program_s_own_is_left_alone() {
    let name = ends().file_name().unwrap().to_str().unwrap().to_string();
    let (pid, out) = terminate("handler");
    assert_eq!(code(&out), Some(9), "its handler ran: {}", stderr(&out));
    assert_eq!(
        summary(&out),
        [format!(
            "ibv-shim: {name} (pid {pid}) used verbs but wrote no report: it did not exit normally (killed, or _exit) or is still running"
        )],
        "{}",
        stderr(&out)
    );
}
