//! Built-in suppressions: librdmacm keeps its device list and one open
//! context per device for the life of the process on purpose, so a correct
//! rdmacm program must be reported clean ("kept by librdmacm (suppressed by
//! default)"), exit with its own status under `--fail-on-leak`, and still
//! be reported when it leaks an object of its own on such a context.
//!
//! librdmacm on two libibverbs: the sim (`LD_LIBRARY_PATH=target/sim`,
//! where the sim's own librdmacm is found, which keeps what rdma-core's
//! does) and the real one with rdma-core 44's librdmacm on the fake-sysfs
//! test bed; real third-party programs: `fi_info -p verbs` (libfabric's
//! verbs provider) and `ucx_info -d` (UCX).

mod common;

use common::*;
use serde_json::Value;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

/// Variables of the shim and the sim, removed so each test sets its own.
const SHIM_VARS: [&str; 12] = [
    "LD_PRELOAD",
    "LD_LIBRARY_PATH",
    "IBV_SHIM_LOG",
    "IBV_SHIM_LOG_FILE",
    "IBV_SHIM_REPORT",
    "IBV_SHIM_LEAK_EXITCODE",
    "IBV_SHIM_SUPPRESS",
    "IBV_SHIM_DEFAULT_SUPPRESSIONS",
    "IBV_SHIM_BACKTRACE",
    "IBV_SHIM_LIBRARY",
    "IBV_SIM_DEVICES",
    "SYSFS_PATH",
];

fn hermetic(cmd: &mut Command) -> &mut Command {
    for v in SHIM_VARS {
        cmd.env_remove(v);
    }
    cmd
}

fn rdmacm_prog(name: &str, libs: &[&str]) -> PathBuf {
    let src = repo_dir().join("tests/c/rdmacm").join(format!("{name}.c"));
    cc(name, &[&src], libs)
}

/// The correct program, linked to librdmacm only.
fn keep_devices() -> PathBuf {
    rdmacm_prog("keep_devices", &["-lrdmacm"])
}

fn launcher() -> PathBuf {
    let p = target_dir().join("ibv-shim");
    assert!(p.is_file(), "{} is not built: make test", p.display());
    p
}

/// The launcher's summary lines.
fn summary(out: &Output) -> Vec<String> {
    stderr(out)
        .lines()
        .filter(|l| l.starts_with("ibv-shim: "))
        .map(str::to_string)
        .collect()
}

/// The one report in `dir` (`r.%p.json`).
fn the_report(dir: &TempDir) -> Value {
    let mut docs: Vec<Value> = std::fs::read_dir(dir.path())
        .unwrap()
        .filter_map(Result::ok)
        .filter(|e| e.file_name().to_string_lossy().ends_with(".json"))
        .map(|e| serde_json::from_slice(&std::fs::read(e.path()).unwrap()).unwrap())
        .collect();
    assert_eq!(
        docs.len(),
        1,
        "one report expected in {}",
        dir.path().display()
    );
    docs.pop().unwrap()
}

/// Runs `prog` preloaded with the shim on the sim, reports in `dir`.
fn on_sim(prog: &Path, dir: &TempDir, env: &[(&str, &str)]) -> (Output, Value) {
    let mut cmd = Command::new(prog);
    hermetic(&mut cmd)
        .env("LD_LIBRARY_PATH", sim_dir())
        .env("LD_PRELOAD", shim_so())
        .env("IBV_SHIM_REPORT", dir.join("r.%p.json"))
        .envs(env.iter().copied());
    let out = run(&mut cmd);
    let report = the_report(dir);
    (out, report)
}

fn objects(report: &Value) -> &Vec<Value> {
    report["objects"].as_array().expect("objects array")
}

#[test]
fn a_correct_rdmacm_program_is_clean_and_what_librdmacm_keeps_is_named() {
    let dir = TempDir::new("rdmacm-clean");
    let (out, report) = on_sim(&keep_devices(), &dir, &[]);
    assert!(out.status.success(), "{}", stderr(&out));
    assert_eq!(stdout(&out).trim(), "devices 2");
    assert_eq!(report["leaked"], false, "{report:#}");
    let objs = objects(&report);
    // Its device list and a context per device, each made by librdmacm.
    let kinds: Vec<&str> = objs.iter().map(|o| o["kind"].as_str().unwrap()).collect();
    assert_eq!(
        kinds.iter().filter(|k| **k == "context").count(),
        2,
        "{report:#}"
    );
    assert_eq!(
        kinds.iter().filter(|k| **k == "device_list").count(),
        1,
        "{report:#}"
    );
    for o in objs {
        assert_eq!(o["suppressed"], true, "{o}");
        assert_eq!(o["kept_by"], "librdmacm", "{o}");
        let module = o["created"]["module"].as_str().unwrap();
        assert!(module.contains("librdmacm.so"), "{o}");
    }
    let log = stderr(&out);
    assert!(!log.contains("never closed"), "{log}");
}

/// `tests/c/rdmacm/unload.c`: librdmacm loaded by hand and unloaded
/// before exit (Open MPI's mtl ofi at `MPI_Finalize`). What librdmacm made
/// is still named after it, so the default suppressions still match, and
/// a clean program stays clean under the leak exit code.
#[test]
fn what_librdmacm_kept_is_still_its_own_after_it_is_unloaded() {
    let prog = rdmacm_prog("unload", &["-ldl"]);
    let dir = TempDir::new("rdmacm-unload");
    let (out, report) = on_sim(&prog, &dir, &[("IBV_SHIM_LEAK_EXITCODE", "23")]);
    assert_eq!(
        stdout(&out),
        "devices 2\nunloaded\n",
        "librdmacm was unloaded: {}",
        stderr(&out)
    );
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert_eq!(report["leaked"], false, "{report:#}");
    let objs = objects(&report);
    assert_eq!(objs.len(), 3, "2 contexts and the device list: {report:#}");
    for o in objs {
        let created = &o["created"];
        let module = created["module"].as_str().unwrap_or_default();
        assert!(module.ends_with("/librdmacm.so.1"), "{o}");
        assert!(created["offset"].as_u64().is_some(), "{o}");
        assert!(created["build_id"].as_str().is_some(), "{o}");
        assert_eq!(o["suppressed"], true, "{o}");
        assert_eq!(o["kept_by"], "librdmacm", "{o}");
    }
    assert!(!stderr(&out).contains("unknown site"), "{}", stderr(&out));
}

#[test]
fn under_fail_on_leak_it_exits_with_its_own_status_and_the_summary_says_why() {
    let mut cmd = Command::new(launcher());
    hermetic(&mut cmd)
        .args(["--sim", "--fail-on-leak", "--"])
        .arg(keep_devices());
    let out = run(&mut cmd);
    assert_eq!(out.status.code(), Some(0), "{}", describe(&cmd, &out));
    assert_eq!(
        summary(&out),
        ["ibv-shim: no RDMA resources leaked; 3 objects kept by librdmacm (suppressed by default)"],
        "{}",
        describe(&cmd, &out)
    );
}

#[test]
fn the_defaults_are_listed_and_switched_off_by_option_and_variable() {
    let mut cmd = Command::new(launcher());
    hermetic(&mut cmd).arg("--list-default-suppressions");
    let out = run(&mut cmd);
    assert!(out.status.success());
    let list = stdout(&out);
    for rule in [
        "leak:device_list:librdmacm.so*",
        "leak:context:librdmacm.so*",
    ] {
        assert!(
            list.lines()
                .any(|l| l.starts_with(rule) && l.contains("librdmacm")),
            "{rule} missing:\n{list}"
        );
    }

    let mut cmd = Command::new(launcher());
    hermetic(&mut cmd)
        .args(["--sim", "--fail-on-leak", "--no-default-suppressions", "--"])
        .arg(keep_devices());
    let out = run(&mut cmd);
    assert_eq!(out.status.code(), Some(23), "{}", describe(&cmd, &out));
    assert_eq!(
        summary(&out)[0],
        "ibv-shim: keep_devices leaked 3 RDMA objects: 2 context, 1 device_list"
            .replace("keep_devices", &keep_devices().to_string_lossy()),
        "{}",
        describe(&cmd, &out)
    );

    let dir = TempDir::new("rdmacm-off");
    let (out, report) = on_sim(
        &keep_devices(),
        &dir,
        &[("IBV_SHIM_DEFAULT_SUPPRESSIONS", "0")],
    );
    assert!(out.status.success());
    assert_eq!(report["leaked"], true, "{report:#}");
    assert_eq!(report["totals"]["context"], 2, "{report:#}");
    assert!(objects(&report).iter().all(|o| o["kept_by"].is_null()));
}

#[test]
fn a_pd_the_program_leaks_on_an_rdmacm_context_is_still_reported() {
    let prog = rdmacm_prog("leak_pd", &["-lrdmacm", "-libverbs"]);
    let dir = TempDir::new("rdmacm-pd");
    let (out, report) = on_sim(&prog, &dir, &[("IBV_SHIM_LEAK_EXITCODE", "23")]);
    assert_eq!(out.status.code(), Some(23), "{}", stderr(&out));
    assert_eq!(report["leaked"], true);
    let t = &report["totals"];
    assert_eq!(
        (
            t["pd"].as_u64(),
            t["context"].as_u64(),
            t["device_list"].as_u64()
        ),
        (Some(1), Some(0), Some(0)),
        "{report:#}"
    );
    let pd = objects(&report)
        .iter()
        .find(|o| o["kind"] == "pd")
        .expect("the pd is listed");
    assert_eq!(pd["suppressed"], false, "{pd}");
    // Made by the program itself, not by librdmacm.
    assert_eq!(pd["created"]["module"], prog.to_str().unwrap(), "{pd}");
    let log = stderr(&out);
    let name = prog.file_name().unwrap().to_str().unwrap();
    assert!(
        log.lines().any(|l| l.contains("pd 0x") && l.contains(name)),
        "{log}"
    );
    assert!(
        log.contains("kept by librdmacm (suppressed by default)"),
        "{log}"
    );
}

#[test]
fn on_the_real_libibverbs_a_correct_rdmacm_program_is_clean() {
    let tb = Testbed::new();
    let mut cmd = tb.command(launcher());
    hermetic(&mut cmd)
        .env("SYSFS_PATH", tb.sysfs_path())
        .args(["--fail-on-leak", "--"])
        .arg(keep_devices());
    let out = run(&mut cmd);
    assert_eq!(out.status.code(), Some(0), "{}", describe(&cmd, &out));
    // librdmacm lists the devices but cannot open them here (no uverbs
    // driver answers): it keeps its device list all the same.
    assert_eq!(
        summary(&out),
        ["ibv-shim: no RDMA resources leaked; 1 object kept by librdmacm (suppressed by default)"],
        "{}",
        describe(&cmd, &out)
    );
}

#[test]
fn on_the_real_libibverbs_libfabric_and_ucx_are_clean() {
    let tb = Testbed::new();
    for (prog, args) in [("fi_info", &["-p", "verbs"][..]), ("ucx_info", &["-d"][..])] {
        // The program's own status here (fi_info finds no usable verbs
        // device: the test bed's cannot be opened).
        let mut own = tb.command(prog);
        hermetic(&mut own)
            .env("SYSFS_PATH", tb.sysfs_path())
            .args(args);
        let own = run(&mut own);
        let mut cmd = tb.command(launcher());
        hermetic(&mut cmd)
            .env("SYSFS_PATH", tb.sysfs_path())
            .args(["--fail-on-leak", "--", prog])
            .args(args);
        let out = run(&mut cmd);
        assert_eq!(
            out.status.code(),
            own.status.code(),
            "{}",
            describe(&cmd, &out)
        );
        let s = summary(&out);
        assert_eq!(s.len(), 1, "{}", describe(&cmd, &out));
        assert!(
            s[0].starts_with("ibv-shim: no RDMA resources leaked"),
            "{}",
            describe(&cmd, &out)
        );
    }
}

#[test]
fn real_programs_on_libfabric_and_ucx_are_clean() {
    for (prog, args) in [("fi_info", &["-p", "verbs"][..]), ("ucx_info", &["-d"][..])] {
        let mut cmd = Command::new(launcher());
        hermetic(&mut cmd)
            .args(["--sim", "--fail-on-leak", "--", prog])
            .args(args);
        let out = run(&mut cmd);
        assert_eq!(out.status.code(), Some(0), "{}", describe(&cmd, &out));
        let s = summary(&out);
        assert_eq!(s.len(), 1, "{}", describe(&cmd, &out));
        assert!(
            s[0].starts_with("ibv-shim: no RDMA resources leaked; ")
                && s[0].contains(" kept by librdmacm (suppressed by default)"),
            "{}",
            describe(&cmd, &out)
        );
    }
}

#[test]
fn rping_exits_with_its_own_status_under_fail_on_leak() {
    // A server on an address no sim device has (TEST-NET-2):
    // rdma_bind_addr fails (EADDRNOTAVAIL) before rping makes a verbs
    // object of its own, so all there is is what librdmacm keeps (its
    // device list and contexts); its status is its own, not the leak exit
    // code.
    let args = ["-s", "-a", "198.51.100.7", "-C", "1"];
    let mut own = Command::new("rping");
    hermetic(&mut own)
        .env("LD_LIBRARY_PATH", sim_dir())
        .args(args);
    let own = run(&mut own);
    assert_ne!(
        own.status.code(),
        Some(0),
        "{}",
        describe(&Command::new("rping"), &own)
    );
    let mut cmd = Command::new(launcher());
    hermetic(&mut cmd)
        .args(["--sim", "--fail-on-leak", "--", "rping"])
        .args(args);
    let out = run(&mut cmd);
    assert_eq!(
        out.status.code(),
        own.status.code(),
        "{}",
        describe(&cmd, &out)
    );
    assert_ne!(out.status.code(), Some(23), "{}", describe(&cmd, &out));
    let s = summary(&out);
    assert!(
        s.len() == 1
            && s[0].starts_with("ibv-shim: no RDMA resources leaked; ")
            && s[0].ends_with(" kept by librdmacm (suppressed by default)"),
        "{}",
        describe(&cmd, &out)
    );
}
