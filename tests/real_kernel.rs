//! The shim on a real kernel RDMA stack: Soft-RoCE (rxe0) on Debian's own
//! kernel in the micro-VM (`common::kernel_vm`; test group `vm`).
//!
//! - The audit against the kernel's own count: while `tests/c/kernel/hold.c`
//!   holds objects, `rdma resource show ctx|pd|mr|cq|qp|srq` for its pid
//!   equals, kind by kind, what the shim reports live for that process, at
//!   each of its stopping points. After `ibv_close_device` with objects
//!   alive the kernel keeps them all (rxe: until exit), and the shim reports
//!   exactly those as orphaned at the close.
//! - A fault sweep on the real stack (`--fault-sweep` of the launcher inside
//!   the VM).
//! - For users: `ibv-shim --vm -- ibv_devices` lists rxe0; `ibv-shim --vm
//!   --fail-on-leak -- <a leaky program>` exits 23 (each boots its own VM).
//!
//! The third-party programs on the real stack are `third_party.rs`'s
//! `on_the_kernel` cases; the sim against the kernel is `differential.rs`.

mod common;

use common::*;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

/// `rdma resource show` objects and the shim's report kinds.
const KINDS: [(&str, &str); 6] = [
    ("ctx", "context"),
    ("pd", "pd"),
    ("mr", "mr"),
    ("cq", "cq"),
    ("qp", "qp"),
    ("srq", "srq"),
];

type Counts = BTreeMap<&'static str, usize>;

/// The kernel's count of each kind of object process `pid` holds.
fn kernel_counts(vm: &Vm, pid: u32) -> Counts {
    let mut counts = Counts::new();
    for (res, kind) in KINDS {
        let text = vm_sh(vm, &format!("rdma -j resource show {res}"));
        let list: serde_json::Value = serde_json::from_str(text.trim())
            .unwrap_or_else(|e| panic!("rdma -j resource show {res}: not JSON ({e}): {text}"));
        let n = list
            .as_array()
            .unwrap_or_else(|| panic!("rdma -j resource show {res}: not a list: {text}"))
            .iter()
            .filter(|o| o["pid"].as_u64() == Some(u64::from(pid)))
            .count();
        counts.insert(kind, n);
    }
    counts
}

/// The shim's report: objects by kind, for those found at `found`.
fn report_counts(report: &serde_json::Value, found: &str) -> Counts {
    let mut counts: Counts = KINDS.iter().map(|(_, k)| (*k, 0)).collect();
    for o in report["objects"].as_array().expect("objects") {
        if o["found"] == found {
            if let Some(n) = KINDS.iter().find(|(_, k)| o["kind"] == *k) {
                *counts.get_mut(n.1).unwrap() += 1;
            }
        }
    }
    counts
}

const POINTS: [&str; 4] = ["created", "destroyed", "before_close", "after_close"];

/// Runs hold.c up to `last` under the shim (preloaded, or drop-in), takes
/// the kernel's counts at each point, and returns them with the report.
fn hold(
    vm: &Vm,
    last: &str,
    dropin_mode: bool,
) -> (BTreeMap<&'static str, Counts>, serde_json::Value, String) {
    let prog = cc(
        "kernel_hold",
        &[repo_dir().join("tests/c/kernel/hold.c").as_path()],
        &["-libverbs"],
    );
    let tmp = TempDir::new("kernel-hold");
    let report = tmp.join("report.json");
    let mut job = Job::new([prog.as_os_str(), tmp.path().as_os_str(), last.as_ref()])
        .cwd(tmp.path())
        .env("IBV_SHIM_REPORT", &report)
        .env("IBV_SHIM_LOG_FILE", tmp.join("log"))
        .timeout(Duration::from_secs(300));
    job = if dropin_mode {
        job.env("LD_LIBRARY_PATH", dropin(&tmp))
    } else {
        job.env("LD_PRELOAD", shim_so())
    };
    let running = vm.spawn(&job).unwrap_or_else(|e| panic!("hold: {e}"));
    let pid = loop {
        if let Some(pid) = running.pid() {
            break pid;
        }
        std::thread::sleep(Duration::from_millis(10));
    };
    let mut counts = BTreeMap::new();
    for p in POINTS {
        let deadline = Instant::now() + Duration::from_secs(240);
        while !tmp.join(p).exists() {
            if let Ok(Some(o)) = running.try_wait() {
                panic!(
                    "hold ended before {p}: status {}\n{}",
                    o.status,
                    String::from_utf8_lossy(&o.stderr)
                );
            }
            assert!(Instant::now() < deadline, "hold never reached {p}");
            std::thread::sleep(Duration::from_millis(20));
        }
        counts.insert(p, kernel_counts(vm, pid));
        std::fs::write(tmp.join(format!("{p}.go")), b"").unwrap();
        if p == last {
            break;
        }
    }
    let out = running.wait().unwrap_or_else(|e| panic!("hold: {e}"));
    let log = std::fs::read_to_string(tmp.join("log")).unwrap_or_default();
    assert_eq!(
        out.status,
        0,
        "hold exited {}:\n{}\nshim log:\n{log}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    let text = std::fs::read_to_string(&report)
        .unwrap_or_else(|e| panic!("{}: {e}\nshim log:\n{log}", report.display()));
    (counts, serde_json::from_str(&text).unwrap(), log)
}

/// What hold.c makes: two contexts of 2 PDs, 3 MRs, 3 CQs, an SRQ, 2 QPs;
/// then one PD, MR, CQ and QP of each goes.
fn made(point: &str) -> Counts {
    let per_ctx: [usize; 6] = match point {
        "created" => [1, 2, 3, 3, 2, 1],
        _ => [1, 1, 2, 2, 1, 1],
    };
    KINDS
        .iter()
        .zip(per_ctx)
        .map(|((_, k), n)| (*k, 2 * n))
        .collect()
}

fn the_shim_counts_what_the_kernel_counts(last: &str) {
    let Some(vm) = kernel_vm() else { return };
    for dropin_mode in [false, true] {
        let (counts, report, log) = hold(vm, last, dropin_mode);
        let mode = if dropin_mode { "drop-in" } else { "preloaded" };
        let kernel = &counts[last];
        // Not 0 == 0: the kernel saw what the program made.
        let want = if last == "after_close" {
            made("destroyed")
        } else {
            made(last)
        };
        if last != "after_close" {
            assert_eq!(kernel, &want, "{mode}: the kernel's count at {last}");
        }
        let shim = report_counts(&report, "exit");
        if last != "after_close" {
            assert_eq!(
                &shim, kernel,
                "{mode}: at {last}, the shim's live objects (left) and the kernel's `rdma resource` count (right)\nreport: {report:#}"
            );
            continue;
        }
        // After `ibv_close_device` with objects alive, the kernel frees
        // nothing either (measured on rxe: the context and every object
        // stay until the process exits, as the queues' buffers stay mapped
        // from the device file). The shim reports those objects orphaned
        // at the close; with the closed context they are what the kernel
        // still holds beside the live ones.
        assert_eq!(
            kernel, &counts["before_close"],
            "{mode}: the kernel at the close"
        );
        let orphans = report_counts(&report, "close");
        assert_eq!(
            orphans,
            made("destroyed")
                .into_iter()
                .map(|(k, v)| (k, if k == "context" { 0 } else { v / 2 }))
                .collect::<Counts>(),
            "{mode}: the orphans the shim reported at the close\nreport: {report:#}"
        );
        let mut held = shim.clone();
        for (k, v) in &orphans {
            *held.get_mut(k).unwrap() += v;
        }
        *held.get_mut("context").unwrap() += 1; // the closed context
        assert_eq!(
            &held, kernel,
            "{mode}: the shim's live objects, orphans and closed context (left), the kernel's count (right)"
        );
        assert!(
            log.contains("leak: ibv_close_device(")
                && log.contains("7 objects created on this context were never destroyed"),
            "{mode}: the close report:\n{log}"
        );
    }
}

#[test]
fn the_audit_equals_the_kernels_count_after_creates() {
    the_shim_counts_what_the_kernel_counts("created");
}

#[test]
fn the_audit_equals_the_kernels_count_after_some_destroys() {
    the_shim_counts_what_the_kernel_counts("destroyed");
}

#[test]
fn the_orphans_reported_at_close_are_what_the_kernel_still_holds() {
    the_shim_counts_what_the_kernel_counts("after_close");
}

/// The test bed itself: a job killed from the host ends at once, with what
/// it started in the background (its whole process group), and its status
/// says it was killed.
#[test]
fn a_killed_job_ends_with_everything_it_started() {
    let Some(vm) = kernel_vm() else { return };
    let tmp = TempDir::new("kernel-kill");
    let flag = tmp.join("child.pid");
    let job = Job::new([
        "sh",
        "-c",
        &format!("sleep 1000 & echo $! > {}; sleep 1000", flag.display()),
    ])
    .timeout(Duration::from_secs(600));
    let running = vm.spawn(&job).unwrap();
    let deadline = Instant::now() + Duration::from_secs(120);
    while !flag.exists() {
        assert!(Instant::now() < deadline, "the job never started");
        std::thread::sleep(Duration::from_millis(20));
    }
    let child = std::fs::read_to_string(&flag).unwrap().trim().to_string();
    running.kill();
    let started = Instant::now();
    let out = running.wait().unwrap();
    assert_eq!(out.status, 137, "killed by SIGKILL");
    assert!(!out.timed_out);
    // Well before the job's own timeout of 600 s.
    assert!(started.elapsed() < Duration::from_secs(300));
    let alive = vm_sh(
        vm,
        &format!("kill -0 {child} 2>/dev/null && echo alive || echo gone"),
    );
    assert_eq!(alive.trim(), "gone", "the background child of a killed job");
}

fn launcher() -> PathBuf {
    target_dir().join("ibv-shim")
}

/// A sweep inside the VM: the launcher's table and JSON summary.
fn sweep_in_vm(vm: &Vm, program: &Path) -> (VmOutput, serde_json::Value) {
    let tmp = TempDir::new("kernel-sweep");
    let json = tmp.join("sweep.json");
    let out = vm
        .run(
            &Job::new([
                launcher().as_os_str(),
                "--fault-sweep".as_ref(),
                "-j".as_ref(),
                "2".as_ref(),
                "--sweep-json".as_ref(),
                json.as_os_str(),
                "--".as_ref(),
                program.as_os_str(),
            ])
            .cwd(tmp.path())
            .timeout(Duration::from_secs(600)),
        )
        .unwrap_or_else(|e| panic!("sweep: {e}"));
    let text = std::fs::read_to_string(&json).unwrap_or_else(|e| {
        panic!(
            "{}: {e}\n{}",
            json.display(),
            String::from_utf8_lossy(&out.stderr)
        )
    });
    (out, serde_json::from_str(&text).unwrap())
}

/// The sweep on the real stack: every verb of `error_paths.c` failed in
/// turn; its early return after a failed `ibv_create_cq` leaks what it made
/// before, and the cleaned-up variant leaks nothing on any path.
#[test]
fn a_fault_sweep_on_the_real_stack_finds_the_leaking_error_path() {
    let Some(vm) = kernel_vm() else { return };
    let src = repo_dir().join("tests/c/faults/error_paths.c");
    let leaky = cc("kernel_error_paths", &[src.as_path()], &["-libverbs"]);
    let (out, s) = sweep_in_vm(vm, &leaky);
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status, 1, "{err}");
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
        ],
        "{s:#}"
    );
    assert!(
        runs.iter()
            .all(|r| r["injected"] == true && r["crashed"] == false && r["hung"] == false),
        "{s:#}"
    );
    assert_eq!(
        runs[4]["leaks"],
        serde_json::json!({"context": 1, "mr": 1, "pd": 1}),
        "{s:#}"
    );
    assert_eq!(s["failed"], 1, "{s:#}");

    let clean = cc(
        "kernel_error_paths_clean",
        &[src.as_path()],
        &["-libverbs", "-DCLEANUP"],
    );
    let (out, s) = sweep_in_vm(vm, &clean);
    assert_eq!(out.status, 0, "{}", String::from_utf8_lossy(&out.stderr));
    assert_eq!(s["failed"], 0, "{s:#}");
}

/// `ibv-shim --vm ARGS`, as a user runs it, from a directory of theirs:
/// `None` when the `vm` group is opted out (counted as skipped).
fn launcher_vm(args: &[&str], dir: &Path) -> Option<(std::process::Output, String)> {
    if opted_out("vm") {
        return require("vm", Err("the real-kernel VM is opted out".into()));
    }
    let mut cmd = Command::new(launcher());
    cmd.arg("--vm")
        .args(args)
        .current_dir(dir)
        .env_remove("LD_PRELOAD");
    let out = run_unchecked(&mut cmd, Duration::from_secs(600));
    let shown = describe(&cmd, &out);
    Some((out, shown))
}

#[test]
fn ibv_shim_vm_lists_rxe0() {
    let dir = TempDir::new("vm-devices");
    let Some((out, shown)) = launcher_vm(&["--", "ibv_devices"], dir.path()) else {
        return;
    };
    let text = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(0), "{shown}");
    assert!(
        text.lines()
            .any(|l| l.split_whitespace().next() == Some("rxe0")),
        "{shown}"
    );
}

#[test]
fn ibv_shim_vm_fails_a_leaky_program_with_the_leak_exit_code() {
    let dir = TempDir::new("vm-leaky");
    let leaky = cc(
        "kernel_leaky",
        &[c_example("leaky").as_path()],
        &["-libverbs"],
    );
    let report = dir.join("r.json");
    let Some((out, shown)) = launcher_vm(
        &[
            "--fail-on-leak",
            "--report",
            report.to_str().unwrap(),
            "--",
            leaky.to_str().unwrap(),
        ],
        dir.path(),
    ) else {
        return;
    };
    assert_eq!(out.status.code(), Some(23), "{shown}");
    // The report, written in the guest, is in the shared directory.
    let doc: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&report).unwrap()).unwrap();
    assert_eq!(doc["leaked"], true, "{doc:#}");
    let total: u64 = ["pd", "mr", "cq", "qp"]
        .iter()
        .map(|k| doc["totals"][k].as_u64().unwrap())
        .sum();
    assert_eq!(total, 4, "{doc:#}");
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("on rxe0"),
        "{shown}"
    );
}

/// A missing piece of the test bed is an error that names it, before
/// anything boots: exit 125 from the launcher (no VM needed).
#[test]
fn ibv_shim_vm_names_what_is_missing() {
    let dir = TempDir::new("vm-missing");
    let empty = TempDir::new("vm-empty-path");
    let mut no_qemu = Command::new(launcher());
    no_qemu
        .args(["--vm", "--", "true"])
        .current_dir(dir.path())
        .env("PATH", empty.path());
    let out = run(&mut no_qemu);
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(125), "{}", describe(&no_qemu, &out));
    assert!(
        err.contains("qemu-system-x86_64 is not on PATH (apt-get install qemu-system-x86)"),
        "{err}"
    );

    let mut no_kernel = Command::new(launcher());
    no_kernel
        .args(["--vm", "--", "true"])
        .current_dir(dir.path())
        .env("IBV_SHIM_VM_KERNEL", dir.join("no-such-kernel"));
    let out = run(&mut no_kernel);
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(
        out.status.code(),
        Some(125),
        "{}",
        describe(&no_kernel, &out)
    );
    assert!(
        err.contains("IBV_SHIM_VM_KERNEL=") && err.contains("unpacked kernel package"),
        "{err}"
    );

    // And `/` is never shared writable.
    let mut at_root = Command::new(launcher());
    at_root.args(["--vm", "--", "true"]).current_dir("/");
    let out = run(&mut at_root);
    assert_eq!(out.status.code(), Some(125), "{}", describe(&at_root, &out));
}
