//! The shim over the REAL rdma-core 44, with devices but no hardware.
//!
//! Every test runs a program twice or more in the test bed (see
//! `common::Testbed`): once against the real libibverbs alone, once with
//! `LD_PRELOAD=libibv_shim.so`, and compares. The expected output is the
//! real library's own run; this file only pins the shim's contract (ENOSYS
//! when it cannot forward, what its log must say).
//!
//! Needs root (mount namespace, overlayfs), gcc, libibverbs-dev,
//! ibverbs-utils and ibverbs-providers, and a built shim (`make test`).

mod common;

use common::*;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

/// Runs `cmd`, then asserts that it exited 0.
fn run_ok(cmd: &mut Command) -> Output {
    let output = run(cmd);
    assert!(output.status.success(), "{}", describe(cmd, &output));
    output
}

/// A C test program from `tests/c/device/`, against the real header and
/// library.
fn c_prog(name: &str) -> PathBuf {
    cc(name, &[&c_test_source(name)], &["-libverbs", "-pthread"])
}

/// A program of `c_examples/`, against the real header and library.
fn example(name: &str) -> PathBuf {
    cc(name, &[&c_example(name)], &["-libverbs"])
}

/// Runs `prog ARGS` in the test bed three ways — without the shim, with it
/// preloaded at its defaults, with it preloaded logging at debug into a
/// fresh directory — and asserts that all three print byte-identical stdout
/// and stderr and end the same way. Returns the plain run and the debug log.
fn same_with_and_without_shim(tb: &Testbed, prog: &Path, args: &[&str]) -> (Output, Vec<LogLine>) {
    let what = format!("{} {}", prog.display(), args.join(" "));
    let mut plain = tb.command(prog);
    plain.args(args);
    let plain_out = run(&mut plain);

    let mut quiet = tb.command(prog);
    quiet.args(args);
    preload_shim(&mut quiet);
    let quiet_out = run(&mut quiet);
    assert_same_output(
        &format!("{what} (without the shim, then with it at its default log level)"),
        (&plain, &plain_out),
        (&quiet, &quiet_out),
    );

    let logs = TempDir::new("log");
    let mut debug = tb.command(prog);
    debug.args(args).envs(debug_log_env(logs.path()));
    preload_shim(&mut debug);
    let debug_out = run(&mut debug);
    assert_same_output(
        &format!("{what} (without the shim, then with it logging at debug to a file)"),
        (&plain, &plain_out),
        (&debug, &debug_out),
    );
    (plain_out, read_logs(logs.path()))
}

/// Asserts that `log` has a call line for `function` whose message contains
/// every one of `needles`.
fn assert_call_logged(log: &[LogLine], function: &str, needles: &[&str], context: &str) {
    let found = log_lines_for(log, function)
        .iter()
        .any(|l| needles.iter().all(|n| l.message.contains(n)));
    assert!(
        found,
        "{context}: no log line for {function}(...) containing {needles:?}; the log:\n{}",
        show_log(log)
    );
}

fn assert_lists_every_device(what: &str, output: &Output, tb: &Testbed) {
    let text = stdout(output);
    for dev in tb.devices() {
        assert!(
            text.contains(dev.name),
            "the test bed is broken: {what} on the real library alone does not list {}\n\
             stdout:\n{text}\nstderr:\n{}",
            dev.name,
            stderr(output)
        );
    }
}

/// The shim's WARN/ERROR lines in a run's stderr (the default log target).
fn problems_in_stderr(what: &str, output: &Output) -> Vec<LogLine> {
    shim_lines_in(&format!("stderr of {what}"), &stderr(output))
        .into_iter()
        .filter(|l| l.level == "WARN" || l.level == "ERROR")
        .collect()
}

#[test]
fn ibv_devices_prints_the_same_and_the_log_shows_each_call() {
    let tb = Testbed::new();
    let (plain, log) = same_with_and_without_shim(&tb, Path::new("ibv_devices"), &[]);
    assert!(plain.status.success(), "ibv_devices failed in the test bed");
    assert_lists_every_device("ibv_devices", &plain, &tb);
    let guids = stdout(&plain);
    for dev in tb.devices() {
        // The GUID as the real ibv_devices printed it, next to the name.
        let guid = guids
            .lines()
            .find_map(|l| {
                let mut w = l.split_whitespace();
                (w.next() == Some(dev.name)).then(|| w.next().map(str::to_string))?
            })
            .unwrap_or_else(|| panic!("ibv_devices printed no GUID for {}", dev.name));
        assert_call_logged(&log, "ibv_get_device_name", &[dev.name], "ibv_devices");
        assert_call_logged(
            &log,
            "ibv_get_device_guid",
            &[dev.name, &guid],
            "ibv_devices (the device as name/GUID, GUID as ibv_devices prints it)",
        );
    }
    assert_call_logged(&log, "ibv_get_device_list", &[], "ibv_devices");
    assert_call_logged(&log, "ibv_free_device_list", &[], "ibv_devices");
    let calls: Vec<&str> = log.iter().filter_map(LogLine::function).collect();
    assert_eq!(
        (calls.first(), calls.last()),
        (Some(&"ibv_get_device_list"), Some(&"ibv_free_device_list")),
        "ibv_devices lists first and frees last; the log:\n{}",
        show_log(&log)
    );
}

#[test]
fn ibv_devinfo_l_prints_the_same_and_the_log_shows_each_call() {
    let tb = Testbed::new();
    let (plain, log) = same_with_and_without_shim(&tb, Path::new("ibv_devinfo"), &["-l"]);
    assert!(
        plain.status.success(),
        "ibv_devinfo -l failed in the test bed"
    );
    assert_lists_every_device("ibv_devinfo -l", &plain, &tb);
    assert_call_logged(&log, "ibv_get_device_list", &[], "ibv_devinfo -l");
    for dev in tb.devices() {
        assert_call_logged(&log, "ibv_get_device_name", &[dev.name], "ibv_devinfo -l");
    }
    assert_call_logged(&log, "ibv_free_device_list", &[], "ibv_devinfo -l");
}

#[test]
fn seed_programs_print_the_same_with_and_without_the_shim() {
    let tb = Testbed::new();

    let (plain, log) = same_with_and_without_shim(&tb, &example("list_devices"), &[]);
    assert_lists_every_device("list_devices", &plain, &tb);
    for dev in tb.devices() {
        assert_call_logged(&log, "ibv_get_device_name", &[dev.name], "list_devices");
    }

    // open_close stops at the first device it cannot open.
    let (plain, log) = same_with_and_without_shim(&tb, &example("open_close"), &[]);
    let first = tb.devices()[0].name;
    assert!(
        stderr(&plain).contains(first),
        "the test bed is broken: open_close on the real library did not report {first}\n{}",
        stderr(&plain)
    );
    assert_call_logged(
        &log,
        "ibv_open_device",
        &[first, "NULL", "errno="],
        "open_close",
    );

    let (plain, log) = same_with_and_without_shim(&tb, &example("device_guids"), &[]);
    assert_lists_every_device("device_guids", &plain, &tb);
    for dev in tb.devices() {
        assert_call_logged(&log, "ibv_get_device_guid", &[dev.name], "device_guids");
        assert_call_logged(&log, "ibv_get_device_index", &[dev.name], "device_guids");
    }
}

#[test]
fn open_device_fails_with_the_real_errno_and_the_log_records_it() {
    let tb = Testbed::new();
    let (plain, log) = same_with_and_without_shim(&tb, &c_prog("probe"), &[]);
    let text = stdout(&plain);
    for dev in tb.devices() {
        let prefix = format!("open {}: ", dev.name);
        let result = text
            .lines()
            .find_map(|l| l.strip_prefix(&prefix))
            .unwrap_or_else(|| panic!("probe did not try to open {}:\n{text}", dev.name));
        // The real library's answer; without a uverbs driver it must fail.
        let errno = result.strip_prefix("NULL errno=").unwrap_or_else(|| {
            panic!(
                "the test bed is broken: the real ibv_open_device({}) gave {result:?}, \
                 not a failure\n{text}",
                dev.name
            )
        });
        assert_call_logged(
            &log,
            "ibv_open_device",
            &[dev.name, "NULL", &format!("errno={errno}")],
            "probe",
        );
    }
}

#[test]
fn without_the_test_bed_enosys_passes_through() {
    // No namespace, no fake tree: this machine's kernel has no RDMA.
    let no_rdma = !Path::new("/sys/class/infiniband_verbs").exists();
    let logs = TempDir::new("log");
    for prog in [PathBuf::from("ibv_devices"), c_prog("probe")] {
        let mut plain = Command::new(&prog);
        plain.env_remove("SYSFS_PATH");
        let plain_out = run(&mut plain);
        let mut shim = Command::new(&prog);
        shim.env_remove("SYSFS_PATH")
            .envs(debug_log_env(logs.path()));
        preload_shim(&mut shim);
        let shim_out = run(&mut shim);
        assert_same_output(
            &format!("{} without RDMA", prog.display()),
            (&plain, &plain_out),
            (&shim, &shim_out),
        );
        if no_rdma && prog.ends_with("probe") {
            for (cmd, out) in [(&plain, &plain_out), (&shim, &shim_out)] {
                assert_eq!(
                    stdout(out),
                    "list: NULL errno=ENOSYS\n",
                    "without RDMA in the kernel, ibv_get_device_list gives NULL + ENOSYS\n{}",
                    describe(cmd, out)
                );
            }
        }
    }
    if no_rdma {
        let log = read_logs(logs.path());
        assert_call_logged(
            &log,
            "ibv_get_device_list",
            &["NULL", "errno=ENOSYS"],
            "without RDMA",
        );
    }
}

/// Runs the probe in the test bed with the shim preloaded and
/// `IBV_SHIM_LIBRARY=library`, logging at the default level to stderr.
fn probe_with_library(tb: &Testbed, library: &Path) -> (Command, Output) {
    let mut cmd = tb.command(c_prog("probe"));
    cmd.env("IBV_SHIM_LIBRARY", library);
    preload_shim(&mut cmd);
    let output = run(&mut cmd);
    (cmd, output)
}

fn assert_enosys(cmd: &Command, output: &Output, why: &str) {
    assert!(
        output.status.success() && stdout(output) == "list: NULL errno=ENOSYS\n",
        "{why}: ibv_get_device_list must give NULL with errno ENOSYS\n{}",
        describe(cmd, output)
    );
}

/// What dlopen() itself says about `path`: "ok" or dlerror()'s text.
fn dlopen_says(path: &Path) -> String {
    let prog = cc(
        "dlopen_reason",
        &[&c_test_source("dlopen_reason")],
        &["-ldl"],
    );
    let mut cmd = Command::new(prog);
    cmd.arg(path);
    stdout(&run(&mut cmd)).trim_end().to_string()
}

#[test]
fn missing_real_library_gives_enosys_and_the_log_says_why() {
    let tb = Testbed::new();
    let path = Path::new("/nonexistent");
    let dlerror = dlopen_says(path);
    assert_ne!(dlerror, "ok", "{} exists", path.display());
    // dlerror() is "PATH: REASON"; the reason is what the log must give.
    let reason = dlerror
        .strip_prefix(&format!("{}: ", path.display()))
        .unwrap_or(&dlerror);
    let (cmd, output) = probe_with_library(&tb, path);
    assert_enosys(&cmd, &output, "IBV_SHIM_LIBRARY=/nonexistent");
    let problems = problems_in_stderr("probe", &output);
    assert!(
        problems
            .iter()
            .any(|l| l.message.contains("/nonexistent") && l.message.contains(reason)),
        "no WARN/ERROR log line names /nonexistent and dlopen's reason {reason:?}\n{}",
        describe(&cmd, &output)
    );
}

#[test]
fn a_library_without_verbs_gives_enosys_and_the_log_names_the_symbol() {
    let tb = Testbed::new();
    let mut gcc = Command::new("gcc");
    gcc.arg("-print-file-name=libc.so.6");
    let libc = PathBuf::from(stdout(&run(&mut gcc)).trim())
        .canonicalize()
        .expect("libc.so.6 exists");
    assert_eq!(dlopen_says(&libc), "ok", "{} must load", libc.display());
    let verbs: Vec<String> = dynamic_symbols(&real_libibverbs())
        .into_iter()
        .filter(|s| !s.undefined && s.name.starts_with("ibv_"))
        .map(|s| s.name)
        .collect();

    let (cmd, output) = probe_with_library(&tb, &libc);
    assert_enosys(&cmd, &output, "IBV_SHIM_LIBRARY=libc.so.6");
    let problems = problems_in_stderr("probe", &output);
    let names_symbol = |l: &LogLine| {
        l.message.contains(&*libc.to_string_lossy())
            && l.message
                .split(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
                .any(|w| verbs.iter().any(|v| v == w))
    };
    assert!(
        problems.iter().any(names_symbol),
        "no WARN/ERROR log line names {} and the verbs symbol it lacks\n{}",
        libc.display(),
        describe(&cmd, &output)
    );
}

#[test]
fn shim_named_as_the_real_library_refuses_to_forward_to_itself() {
    let tb = Testbed::new();
    let (cmd, output) = probe_with_library(&tb, &shim_so());
    assert_enosys(&cmd, &output, "IBV_SHIM_LIBRARY=<the shim>");
    assert!(
        problems_in_stderr("probe", &output)
            .iter()
            .any(|l| l.message.contains("itself")),
        "no WARN/ERROR log line says the shim refuses to forward to itself\n{}",
        describe(&cmd, &output)
    );
}

#[test]
fn shim_first_on_the_library_path_does_not_recurse() {
    let tb = Testbed::new();
    let probe = c_prog("probe");
    let mut plain = tb.command(&probe);
    let plain_out = run_ok(&mut plain);

    // A directory whose libibverbs.so.1 is the shim, first on the path: the
    // probe's own DT_NEEDED and the shim's dlopen("libibverbs.so.1") find it.
    let dir = TempDir::new("selflib");
    std::os::unix::fs::symlink(shim_so(), dir.join("libibverbs.so.1")).unwrap();
    let logs = TempDir::new("log");
    let mut cmd = tb.command(&probe);
    cmd.env("LD_LIBRARY_PATH", dir.path())
        .envs(debug_log_env(logs.path()));
    preload_shim(&mut cmd);
    let output = run(&mut cmd); // panics on a crash or a hang

    let works = output.status.success() && output.stdout == plain_out.stdout;
    let fails_clearly = output.status.success() && stdout(&output) == "list: NULL errno=ENOSYS\n";
    assert!(
        works || fails_clearly,
        "with the shim first on LD_LIBRARY_PATH the probe must either work as without \
         the shim or get NULL + ENOSYS\n--- without the shim ---\n{}\n--- with it ---\n{}",
        describe(&plain, &plain_out),
        describe(&cmd, &output)
    );
    let log = read_logs(logs.path());
    assert!(
        log.iter().any(|l| l.message.contains("itself")),
        "no log line (at any level) says the shim found itself as libibverbs.so.1\n{}\nthe log:\n{}",
        describe(&cmd, &output),
        show_log(&log)
    );
}

/// Every line is there. The lines fit in the log's queue (16,384 slots of
/// 64 bytes; a debug entry here takes at most 3 slots, most take 2), so
/// none is dropped whatever the writer thread does: a full queue waits
/// 100 ms for the writer, then drops lines by design, and a loaded machine
/// may leave the writer unscheduled that long.
#[test]
fn eight_threads_lose_no_log_line() {
    const THREADS: usize = 8;
    const ITERATIONS: usize = 64;
    const QUEUE_SLOTS: usize = 16384;
    let tb = Testbed::new();
    let prog = c_prog("threads");
    let args = [THREADS.to_string(), ITERATIONS.to_string()];

    // The program itself is sound on the real library alone.
    run_ok(tb.command(&prog).args(&args));

    let logs = TempDir::new("log");
    let mut cmd = tb.command(&prog);
    cmd.args(&args).envs(debug_log_env(logs.path()));
    preload_shim(&mut cmd);
    let output = run_ok(&mut cmd);

    // "threads=8 iterations=64 devices=3 reference_rounds=1"
    let report = stdout(&output);
    let field = |key: &str| -> usize {
        report
            .split_whitespace()
            .find_map(|w| w.strip_prefix(key)?.strip_prefix('=')?.parse().ok())
            .unwrap_or_else(|| panic!("no {key}= in the program's output {report:?}"))
    };
    let devices = field("devices");
    assert_eq!(devices, tb.devices().len(), "devices seen under the shim");
    let rounds = THREADS * ITERATIONS + field("reference_rounds");

    let entries = rounds * (2 + 3 * devices);
    assert!(
        rounds * 3 + (entries - rounds) * 2 < QUEUE_SLOTS,
        "{entries} log lines do not fit in the queue: lower ITERATIONS"
    );
    let log = read_logs(logs.path()); // panics on a torn line
    if let Some(drop) = log.iter().find(|l| l.message.contains("lines dropped")) {
        panic!("lines were dropped though they fit in the queue: {drop:?}");
    }
    let expected = [
        ("ibv_get_device_list", rounds),
        ("ibv_get_device_name", rounds * devices),
        ("ibv_get_device_guid", rounds * devices),
        ("ibv_get_device_index", rounds * devices),
        ("ibv_free_device_list", rounds),
    ];
    let mut wrong = Vec::new();
    for (function, count) in expected {
        let lines = log_lines_for(&log, function);
        if lines.len() != count {
            wrong.push(format!(
                "{function}: {} lines, expected {count}",
                lines.len()
            ));
        }
        if let Some(bad) = lines.iter().find(|l| !l.message.contains(" = ")) {
            wrong.push(format!("{function}: a line without its result: {bad:?}"));
        }
    }
    let tids: std::collections::BTreeSet<u32> = log_lines_for(&log, "ibv_get_device_list")
        .iter()
        .map(|l| l.tid)
        .collect();
    if tids.len() < THREADS {
        wrong.push(format!(
            "ibv_get_device_list logged from {} threads, expected at least {THREADS}",
            tids.len()
        ));
    }
    assert!(
        wrong.is_empty(),
        "{THREADS} threads x {ITERATIONS} rounds over {devices} devices:\n{}\n({} log lines in all)",
        wrong.join("\n"),
        log.len()
    );
}
