//! `fork()` in verbs programs: no child hangs, and each child's reports
//! are its own.
//!
//! - A multi-threaded program whose threads keep the shim's registry busy
//!   while the main thread forks: no child may hang in the shim's fork
//!   handlers. 2,000 forks each with 1, 2 and 16 churning threads, with the
//!   shim preloaded and as drop-in, on the sim (fast: a PD per iteration);
//!   then fewer forks on the test bed with the real rdma-core (device lists,
//!   as no context opens there). A hung child is counted by the C program
//!   (killed after 5 s), never judged by speed.
//! - A child keeps what it inherited: it refuses a destroy of a PD whose
//!   context the parent closed or that the parent destroyed, and a use of
//!   the closed context, may destroy the parent's live PD, and reports only
//!   what it created itself.
//! - A child may close the contexts and free the device lists it inherited.
//!
//! C programs: `tests/c/fork/`. Needs gcc, libibverbs-dev, root (test bed)
//! and a built shim and sim (`make test`).

mod common;

use std::path::PathBuf;
use std::process::Command;
use std::time::Duration;

use common::*;
use serde_json::Value;

fn fork_prog(name: &str) -> PathBuf {
    let src = repo_dir().join("tests/c/fork").join(format!("{name}.c"));
    cc(name, &[&src], &["-O2", "-pthread", "-libverbs"])
}

#[derive(Clone, Copy, Debug)]
enum Mode {
    Preload,
    DropIn,
}

/// A directory with the shim as `libibverbs.so.1` (drop-in mode).
fn dropin_dir(tmp: &TempDir) -> PathBuf {
    let dir = tmp.join("dropin");
    std::fs::create_dir_all(&dir).unwrap();
    std::os::unix::fs::symlink(shim_so(), dir.join("libibverbs.so.1")).unwrap();
    dir
}

/// Runs `cmd` with the shim in `mode` over `real` (the sim's directory, or
/// None for the system's rdma-core).
fn with_shim(cmd: &mut Command, mode: Mode, real: Option<&PathBuf>, tmp: &TempDir) {
    match mode {
        Mode::Preload => {
            cmd.env("LD_PRELOAD", shim_so());
            if let Some(dir) = real {
                cmd.env("LD_LIBRARY_PATH", dir);
            }
        }
        Mode::DropIn => {
            cmd.env("LD_LIBRARY_PATH", dropin_dir(tmp));
            match real {
                Some(dir) => cmd.env("IBV_SHIM_LIBRARY", dir.join("libibverbs.so.1")),
                None => cmd.env(
                    "IBV_SHIM_LIBRARY",
                    "/usr/lib/x86_64-linux-gnu/libibverbs.so.1",
                ),
            };
        }
    }
}

/// `forks=N hung=H` from the churn program.
fn churn_result(out: &std::process::Output, cmd: &Command) -> (u32, u32) {
    let text = stdout(out);
    let field = |k: &str| {
        text.split_whitespace()
            .find_map(|w| w.strip_prefix(k))
            .and_then(|v| v.parse().ok())
            .unwrap_or_else(|| panic!("no {k} in the output\n{}", describe(cmd, out)))
    };
    (field("forks="), field("hung="))
}

/// Runs the churn program in every configuration; returns the failures.
fn churn(
    bed: Option<&Testbed>,
    what: &str,
    threads: &[u32],
    forks: u32,
    real: Option<&PathBuf>,
) -> Vec<String> {
    let prog = fork_prog("churn");
    let mut failures = Vec::new();
    for mode in [Mode::Preload, Mode::DropIn] {
        for &t in threads {
            let tmp = TempDir::new("fork");
            let mut cmd = match bed {
                Some(tb) => tb.command(&prog),
                None => Command::new(&prog),
            };
            cmd.args([what, &t.to_string(), &forks.to_string()]);
            with_shim(&mut cmd, mode, real, &tmp);
            let out = run_unchecked(&mut cmd, Duration::from_secs(300));
            if !out.status.success() {
                failures.push(format!(
                    "{mode:?}, {t} threads: failed\n{}",
                    describe(&cmd, &out)
                ));
                continue;
            }
            let (made, hung) = churn_result(&out, &cmd);
            eprintln!("{what} {mode:?} {t} threads: {made} forks, {hung} hung");
            if hung != 0 || made != forks {
                failures.push(format!(
                    "{mode:?}, {t} churning threads: {hung} of {made} children hung in the shim \
                     (the program stops after 3)\n{}",
                    describe(&cmd, &out)
                ));
            }
        }
    }
    failures
}

#[test]
fn no_child_hangs_when_threads_churn_during_fork_on_the_sim() {
    let failures = churn(None, "pd", &[1, 2, 16], 2000, Some(&sim_dir()));
    assert!(failures.is_empty(), "{}", failures.join("\n\n"));
}

/// The data-path checks' own locks (the lkey index, the sites reported)
/// churn in other threads while the main thread forks; each child makes
/// one checked post, which takes them.
#[test]
fn no_child_hangs_in_the_data_path_checks_after_fork() {
    let prog = fork_prog("churn");
    let mut failures = Vec::new();
    for t in [2, 16] {
        let tmp = TempDir::new("fork");
        let mut cmd = Command::new(&prog);
        cmd.args(["post", &t.to_string(), "1000"])
            .env("IBV_SHIM_CHECK", "datapath")
            .env("IBV_SHIM_LOG", "error");
        with_shim(&mut cmd, Mode::Preload, Some(&sim_dir()), &tmp);
        let out = run_unchecked(&mut cmd, Duration::from_secs(300));
        assert!(out.status.success(), "{}", describe(&cmd, &out));
        let (made, hung) = churn_result(&out, &cmd);
        eprintln!("post {t} threads: {made} forks, {hung} hung");
        if hung != 0 || made != 1000 {
            failures.push(format!(
                "{t} threads: {hung} of {made} children hung in the checks\n{}",
                describe(&cmd, &out)
            ));
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n\n"));
}

/// The real rdma-core under the shim: its device-list path (sysfs scans,
/// the shim's list table) is what churns.
#[test]
fn no_child_hangs_when_threads_churn_during_fork_on_the_real_library() {
    let tb = Testbed::new();
    let failures = churn(Some(&tb), "list", &[2, 16], 300, None);
    assert!(failures.is_empty(), "{}", failures.join("\n\n"));
}

#[test]
fn a_child_keeps_what_it_inherited_and_reports_only_its_own() {
    let prog = fork_prog("inherit");
    for mode in [Mode::Preload, Mode::DropIn] {
        let tmp = TempDir::new("inherit");
        let mut cmd = Command::new(&prog);
        with_shim(&mut cmd, mode, Some(&sim_dir()), &tmp);
        cmd.env("IBV_SHIM_LOG", "warn")
            .env("IBV_SHIM_LOG_FILE", tmp.join("log.%p"))
            .env("IBV_SHIM_REPORT", tmp.join("report.%p"));
        let out = run(&mut cmd);
        let text = stdout(&out);
        let ctx = describe(&cmd, &out);
        assert!(out.status.success(), "{mode:?}\n{ctx}");
        assert!(!text.contains("FAIL"), "{mode:?}: a check failed\n{ctx}");
        let child: u32 = text
            .lines()
            .find_map(|l| l.strip_prefix("child pid="))
            .and_then(|v| v.parse().ok())
            .unwrap_or_else(|| panic!("no child pid\n{ctx}"));
        let own = text
            .lines()
            .find_map(|l| l.strip_prefix("child leak pd "))
            .unwrap_or_else(|| panic!("no child leak\n{ctx}"))
            .to_string();

        // Refused, not forwarded, each with its reason.
        let log = std::fs::read_to_string(tmp.join(format!("log.{child}"))).unwrap_or_default();
        for want in [
            "use after close: ibv_dealloc_pd(pd=",
            "double destroy: ibv_dealloc_pd(pd=",
            "use after close: ibv_alloc_pd(context=",
            "double close",
        ] {
            assert!(
                log.contains(want),
                "{mode:?}: the child's log lacks \"{want}\"\n{log}\n{ctx}"
            );
        }
        assert!(
            !log.contains("forwarding unchanged"),
            "{mode:?}: the child forwarded something it inherited as unknown\n{log}"
        );

        // The child's report: its own PD, nothing of the parent's.
        let report: Value = serde_json::from_str(
            &std::fs::read_to_string(tmp.join(format!("report.{child}")))
                .unwrap_or_else(|e| panic!("{mode:?}: no report of the child: {e}\n{ctx}")),
        )
        .unwrap();
        let objects: Vec<(String, String)> = report["objects"]
            .as_array()
            .unwrap()
            .iter()
            .map(|o| {
                (
                    o["kind"].as_str().unwrap().to_string(),
                    o["handle"].as_str().unwrap().to_string(),
                )
            })
            .collect();
        assert_eq!(
            objects,
            vec![("pd".to_string(), own.clone())],
            "{mode:?}: the child reports {objects:?}, expected only its own PD {own}\n{report:#}"
        );
    }
}

const FORK_INHERITED: &str = r#"
#include <infiniband/verbs.h>
#include <errno.h>
#include <stdio.h>
#include <sys/wait.h>
#include <unistd.h>
int main(void) {
    int n = 0;
    struct ibv_device **list = ibv_get_device_list(&n);
    if (!list || n < 1) { printf("no devices\n"); return 1; }
    struct ibv_context *ctx = ibv_open_device(list[0]);
    if (!ctx) { printf("open failed\n"); return 1; }
    fflush(stdout);
    pid_t pid = fork();
    if (pid == 0) {
        /* The child closes and frees what it inherited: legitimate calls. */
        errno = 0;
        int rc = ibv_close_device(ctx);
        printf("child close=%d errno=%d\n", rc, errno);
        ibv_free_device_list(list);
        printf("child freed the list\n");
        fflush(stdout);
        _exit(0);
    }
    int status = 0;
    waitpid(pid, &status, 0);
    printf("parent: child exited %d\n", WEXITSTATUS(status));
    /* The parent keeps and cleans up its own. */
    printf("parent close=%d\n", ibv_close_device(ctx));
    ibv_free_device_list(list);
    return 0;
}
"#;

/// A forked child may close the contexts and free the device lists it
/// inherited (they used to be refused as unknown), and they are not its leaks.
#[test]
fn a_forked_child_may_close_what_it_inherited() {
    let dir = TempDir::new("fork");
    let prog = cc_text(&dir, "fork", FORK_INHERITED, &["-libverbs"]);
    let reports = dir.join("reports");
    std::fs::create_dir_all(&reports).unwrap();
    let mut cmd = Command::new(&prog);
    cmd.env("LD_LIBRARY_PATH", sim_dir())
        .env("IBV_SIM_DEVICES", "mlx5_0")
        .env("LD_PRELOAD", shim_so())
        .env("IBV_SHIM_REPORT", reports.join("report.%p.json"))
        .env("IBV_SHIM_LEAK_EXITCODE", "23")
        .env_remove("IBV_SHIM_LIBRARY");
    let out = run(&mut cmd);
    let text = stdout(&out);
    assert!(
        text.contains("child close=0 errno=0"),
        "{}",
        describe(&cmd, &out)
    );
    assert!(
        text.contains("child freed the list"),
        "{}",
        describe(&cmd, &out)
    );
    assert!(
        text.contains("parent: child exited 0"),
        "{}",
        describe(&cmd, &out)
    );
    assert!(text.contains("parent close=0"), "{}", describe(&cmd, &out));
    assert_eq!(out.status.code(), Some(0), "{}", describe(&cmd, &out));
    assert!(
        !stderr(&out).contains("not a context") && !stderr(&out).contains("double free"),
        "the child's calls were refused\n{}",
        describe(&cmd, &out)
    );
    // Each process that used verbs wrote a report; none leaked.
    let mut docs = 0;
    for e in std::fs::read_dir(&reports).unwrap().flatten() {
        let doc = std::fs::read_to_string(e.path()).unwrap();
        assert!(
            doc.contains("\"leaked\":false"),
            "{}: {doc}",
            e.path().display()
        );
        docs += 1;
    }
    assert!(docs >= 1, "no report written\n{}", describe(&cmd, &out));
}

/// `forks=N hung=H refused=R` from the shared-QP program.
fn shared_qp_result(out: &std::process::Output, cmd: &Command) -> (u32, u32, u32) {
    let (forks, hung) = churn_result(out, cmd);
    let refused = stdout(out)
        .split_whitespace()
        .find_map(|w| w.strip_prefix("refused="))
        .and_then(|v| v.parse().ok())
        .unwrap_or_else(|| panic!("no refused= in the output\n{}", describe(cmd, out)));
    (forks, hung, refused)
}

/// The sim's own fork safety: threads post and poll on a QP while the
/// main thread forks; each child posts on that QP (refused: a child
/// cannot use its parent's queues, `EINVAL`), then makes a connected pair
/// of its own and completes a WRITE on it (the process-wide tables, the
/// fabric's attachment, engine and outbox, which the parent's threads
/// keep busy, are free in the child). Without the shim, preloaded, and as
/// drop-in. Before the fix 3 of the first 5 to 7 children hung on the
/// parent's QP's locks, and with that refused, 3 of the first 98 to 239 on
/// the outbox's lock when opening a device.
#[test]
fn a_child_that_posts_on_its_parents_busy_qp_gets_an_error_not_a_hang() {
    let prog = {
        let dir = repo_dir().join("tests/c");
        let src = dir.join("fork/shared_qp.c");
        let common = format!("-I{}", dir.join("common").display());
        let sim = format!("-I{}", dir.join("sim").display());
        cc(
            "shared_qp",
            &[&src],
            &["-O2", "-pthread", &common, &sim, "-libverbs"],
        )
    };
    let forks = 300;
    let mut failures = Vec::new();
    for mode in [None, Some(Mode::Preload), Some(Mode::DropIn)] {
        for threads in [2, 4] {
            let tmp = TempDir::new("fork");
            let fabric = fabric_name("fork", "shared-qp");
            let _gone = FabricGuard(fabric.clone());
            let mut cmd = Command::new(&prog);
            cmd.args([&threads.to_string(), &forks.to_string(), "own"])
                .env("IBV_SIM_FABRIC", &fabric)
                .env("IBV_SHIM_LOG", "error");
            match mode {
                Some(m) => with_shim(&mut cmd, m, Some(&sim_dir()), &tmp),
                None => {
                    cmd.env("LD_LIBRARY_PATH", sim_dir())
                        .env_remove("LD_PRELOAD");
                }
            }
            let out = run_unchecked(&mut cmd, Duration::from_secs(300));
            if !out.status.success() {
                failures.push(format!(
                    "{mode:?}, {threads} threads: failed\n{}",
                    describe(&cmd, &out)
                ));
                continue;
            }
            let (made, hung, refused) = shared_qp_result(&out, &cmd);
            eprintln!("shared QP {mode:?} {threads} threads: {made} forks, {hung} hung, {refused} refused");
            if hung != 0 || made != forks || refused != forks {
                failures.push(format!(
                    "{mode:?}, {threads} threads: {hung} of {made} children hung, {refused} had \
                     their post on the parent's QP refused (the program stops after 3 hung)\n{}",
                    describe(&cmd, &out)
                ));
            }
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n\n"));
}
