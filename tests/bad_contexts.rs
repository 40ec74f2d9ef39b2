//! Contexts and objects the real library never handed out or has freed:
//! every export that takes a context refuses garbage and
//! closed contexts with EINVAL and a warning instead of forwarding them (the
//! real rdma-core crashes on garbage: `ibv_alloc_pd((void *)0x1234)` is a
//! SIGSEGV); objects known destroyed or of a closed context are refused; a
//! context opened behind the shim's back on a device it handed out is
//! adopted, not refused.
//!
//! `tests/c/bad/contexts.c` runs on the real rdma-core in the test bed
//! (garbage contexts: no context opens there) and on the sim (closed
//! contexts, dead objects, adoption), preloaded and drop-in.
//!
//! Also: two threads closing one context forward one close; NULL object
//! arguments of create and query verbs are refused, not crashed on.

mod common;

use std::path::PathBuf;
use std::process::Command;

use common::*;

fn prog() -> PathBuf {
    let src = repo_dir().join("tests/c/bad/contexts.c");
    cc("bad_contexts", &[&src], &["-libverbs", "-ldl"])
}

/// Runs the program in preload and drop-in mode; `real` is the sim's
/// directory or None for the system's rdma-core in the test bed.
fn run_both(args: &[&str], real: Option<PathBuf>) -> Vec<(String, String, String)> {
    let prog = prog();
    let tb = real.is_none().then(Testbed::new);
    let mut runs = Vec::new();
    for mode in ["preload", "dropin"] {
        let tmp = TempDir::new("badctx");
        let mut cmd = match &tb {
            Some(tb) => tb.command(&prog),
            None => Command::new(&prog),
        };
        cmd.args(args)
            .env("IBV_SHIM_LOG", "info")
            .env("IBV_SHIM_LOG_FILE", tmp.join("log"));
        let lib = match &real {
            Some(dir) => dir.join("libibverbs.so.1"),
            None => PathBuf::from("/usr/lib/x86_64-linux-gnu/libibverbs.so.1"),
        };
        if mode == "preload" {
            cmd.env("LD_PRELOAD", shim_so());
            if let Some(dir) = &real {
                cmd.env("LD_LIBRARY_PATH", dir);
            }
        } else {
            let dir = tmp.join("dropin");
            std::fs::create_dir_all(&dir).unwrap();
            std::os::unix::fs::symlink(shim_so(), dir.join("libibverbs.so.1")).unwrap();
            cmd.env("LD_LIBRARY_PATH", &dir)
                .env("IBV_SHIM_LIBRARY", &lib);
        }
        // `run` fails the test on a crash (a signal) or a hang.
        let out = run(&mut cmd);
        let text = stdout(&out);
        let log = std::fs::read_to_string(tmp.join("log")).unwrap_or_default();
        assert!(
            out.status.success() && text.contains("done failures=0"),
            "{mode}: some verb was not refused\n{}\nlog:\n{log}",
            describe(&cmd, &out)
        );
        runs.push((mode.to_string(), text, log));
    }
    runs
}

/// Every check the program made must have left its warning.
fn assert_warned(mode: &str, text: &str, log: &str) {
    let refusals = text.lines().filter(|l| l.starts_with("ok ")).count();
    let warned = log
        .lines()
        .filter(|l| {
            l.contains(" WARN ") && (l.contains("not forwarded") || l.contains("double close"))
        })
        .count();
    assert!(
        warned >= refusals.min(27),
        "{mode}: {refusals} refusals but {warned} warnings\n{log}"
    );
}

#[test]
fn garbage_contexts_are_refused_by_every_verb_on_the_real_library() {
    for (mode, text, log) in run_both(&["garbage"], None) {
        for what in ["0x1234", "heap", "device"] {
            for verb in [
                "ibv_alloc_pd",
                "ibv_create_cq",
                "ibv_create_comp_channel",
                "ibv_query_device",
                "ibv_query_port",
                "ibv_query_gid",
                "ibv_query_pkey",
                "ibv_get_async_event",
                "ibv_close_device",
            ] {
                assert!(
                    text.contains(&format!("ok {what} {verb}\n")),
                    "{mode}: {what} {verb} not checked\n{text}"
                );
                assert!(
                    log.contains(&format!("{verb}(context=")),
                    "{mode}: no warning for {verb} on {what}\n{log}"
                );
            }
        }
        assert_warned(&mode, &text, &log);
    }
}

#[test]
fn closed_contexts_and_dead_objects_are_refused_and_hidden_contexts_adopted_on_the_sim() {
    let sim = sim_dir();
    // A second name for the sim: dlopen of it finds the sim already loaded
    // (same file), where "libibverbs.so.1" would be the shim's own handle.
    let alias_dir = TempDir::new("simalias");
    let alias = alias_dir.join("simalias.so");
    std::os::unix::fs::symlink(sim.join("libibverbs.so.1"), &alias).unwrap();
    let alias = alias.display().to_string();
    for (mode, text, log) in run_both(&["closed", &alias], Some(sim.clone())) {
        for want in [
            "ok closed ibv_alloc_pd",
            "ok closed ibv_query_device",
            "ok closed ibv_get_async_event",
            "ok destroyed pd ibv_reg_mr",
            "ok closed pd ibv_reg_mr",
            "ok closed cq ibv_resize_cq",
            "ok hidden ibv_alloc_pd",
            "ok hidden ibv_close_device",
        ] {
            assert!(text.contains(want), "{mode}: no \"{want}\"\n{text}\n{log}");
        }
        for want in [
            "use after close: ibv_alloc_pd(context=",
            "use after close: ibv_create_cq(context=",
            "use after destroy: ibv_reg_mr(pd=",
            "use after close: ibv_reg_mr(pd=",
            // Adopted, logged at info, then tracked: its leak is reported.
            "tracked from now on",
        ] {
            assert!(
                log.contains(want),
                "{mode}: the log lacks \"{want}\"\n{log}"
            );
        }
        let leak = text
            .lines()
            .find_map(|l| l.strip_prefix("leak pd "))
            .unwrap_or_else(|| panic!("{mode}: no leak line\n{text}"));
        assert!(
            log.lines()
                .any(|l| l.contains(&format!("pd {leak} ")) && l.contains("WARN")),
            "{mode}: the PD leaked on the adopted context is not reported at its close\n{log}"
        );
        assert_warned(&mode, &text, &log);
    }
}

/// rdma-core's private `verbs_open_device` (how `mlx5dv_open_device` opens
/// a context) is the shim's own export: called directly, it is forwarded to
/// the real library with its result and errno unchanged (ENOENT on the test
/// bed, where no uverbs driver answers), and logged.
#[test]
fn verbs_open_device_is_instrumented_and_forwarded_unchanged() {
    let src = repo_dir().join("tests/c/bad/private_open.c");
    let prog = cc("private_open", &[&src], &["-libverbs"]);
    let tb = Testbed::new();
    let direct = run(&mut tb.command(&prog));
    let want = stdout(&direct);
    assert!(want.contains("verbs_open_device -> NULL errno=2"), "{want}");
    for mode in ["preload", "dropin"] {
        let tmp = TempDir::new("private");
        let mut cmd = tb.command(&prog);
        cmd.env("IBV_SHIM_LOG", "debug")
            .env("IBV_SHIM_LOG_FILE", tmp.join("log"));
        if mode == "preload" {
            cmd.env("LD_PRELOAD", shim_so());
        } else {
            let dir = tmp.join("dropin");
            std::fs::create_dir_all(&dir).unwrap();
            std::os::unix::fs::symlink(shim_so(), dir.join("libibverbs.so.1")).unwrap();
            cmd.env("LD_LIBRARY_PATH", &dir).env(
                "IBV_SHIM_LIBRARY",
                "/usr/lib/x86_64-linux-gnu/libibverbs.so.1",
            );
        }
        let out = run(&mut cmd);
        let log = std::fs::read_to_string(tmp.join("log")).unwrap_or_default();
        assert_eq!(stdout(&out), want, "{mode}: the result changed\n{log}");
        assert!(
            log.contains("verbs_open_device(device=") && log.contains("= NULL errno=ENOENT"),
            "{mode}: the call was not seen by the shim\n{log}"
        );
    }
}

const RACING_CLOSE: &str = r#"
#include <infiniband/verbs.h>
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
static pthread_barrier_t go;
static struct ibv_context *ctx;
static int rc[2], err[2];
static void *closer(void *arg) {
    int i = (int)(long)arg;
    pthread_barrier_wait(&go);
    rc[i] = ibv_close_device(ctx);
    err[i] = errno;
    return NULL;
}
int main(void) {
    int n = 0;
    struct ibv_device **list = ibv_get_device_list(&n);
    if (!list || n < 1) { printf("no devices\n"); return 1; }
    for (int round = 0; round < 300; round++) {
        ctx = ibv_open_device(list[0]);
        if (!ctx) { printf("open failed\n"); return 1; }
        pthread_t t[2];
        pthread_barrier_init(&go, NULL, 2);
        for (long i = 0; i < 2; i++) pthread_create(&t[i], NULL, closer, (void *)i);
        for (int i = 0; i < 2; i++) pthread_join(t[i], NULL);
        pthread_barrier_destroy(&go);
        int ok = (rc[0] == 0) + (rc[1] == 0);
        int refused = (rc[0] == -1 && err[0] == EINVAL) + (rc[1] == -1 && err[1] == EINVAL);
        if (ok != 1 || refused != 1) {
            printf("round %d: rc %d/%d errno %d/%d\n", round, rc[0], rc[1], err[0], err[1]);
            return 1;
        }
    }
    ibv_free_device_list(list);
    printf("ok\n");
    return 0;
}
"#;

#[test]
fn two_threads_closing_one_context_forward_one_close() {
    let dir = TempDir::new("close");
    let prog = cc_text(&dir, "close", RACING_CLOSE, &["-libverbs", "-pthread"]);
    let mut cmd = Command::new(&prog);
    cmd.env("LD_LIBRARY_PATH", sim_dir())
        .env("LD_PRELOAD", shim_so())
        .env("IBV_SHIM_LOG", "warn")
        .env_remove("IBV_SHIM_LOG_FILE")
        .env_remove("IBV_SHIM_LIBRARY");
    let out = run(&mut cmd);
    assert_eq!(
        String::from_utf8_lossy(&out.stdout).trim(),
        "ok",
        "{}",
        describe(&cmd, &out)
    );
    assert!(out.status.success(), "{}", describe(&cmd, &out));
    // The sim survives a second close and fails it; rdma-core frees the
    // context twice. So the shim itself must refuse the loser every round.
    let refused = String::from_utf8_lossy(&out.stderr)
        .lines()
        .filter(|l| l.contains("double close (not forwarded"))
        .count();
    assert_eq!(refused, 300, "{}", describe(&cmd, &out));
}

const NULL_OBJECTS: &str = r#"
#include <infiniband/verbs.h>
#include <errno.h>
#include <stdio.h>
#define SHOW(expr) do { errno = 0; long r_ = (long)(expr); printf("%s %s %d\n", #expr, r_ == 0 ? "0" : r_ == -1 ? "-1" : r_ == EINVAL ? "EINVAL" : "other", errno); } while (0)
int main(void) {
    struct ibv_port_attr port;
    struct ibv_device_attr dev;
    union ibv_gid gid;
    struct ibv_qp_attr qa;
    struct ibv_qp_init_attr qia = {0};
    SHOW(ibv_alloc_pd(NULL));
    SHOW(ibv_reg_mr(NULL, &port, sizeof(port), IBV_ACCESS_LOCAL_WRITE));
    SHOW(ibv_create_cq(NULL, 16, NULL, NULL, 0));
    SHOW(ibv_create_comp_channel(NULL));
    SHOW(ibv_create_qp(NULL, &qia));
    SHOW(ibv_query_device(NULL, &dev));
    SHOW(ibv_query_gid(NULL, 1, 0, &gid));
    SHOW(ibv_modify_qp(NULL, &qa, IBV_QP_STATE));
    (void)port;
    return 0;
}
"#;

/// rdma-core dereferences the object argument of a create or query verb:
/// NULL crashes the program without the shim. Under the shim it is refused
/// with the verb's failure value and errno EINVAL, and a warning.
#[test]
fn null_object_arguments_are_refused_not_crashed_on() {
    let dir = TempDir::new("null");
    let prog = cc_text(&dir, "null", NULL_OBJECTS, &["-libverbs"]);
    let mut cmd = Command::new(&prog);
    cmd.env("LD_PRELOAD", shim_so())
        .env_remove("IBV_SHIM_LIBRARY")
        .env_remove("IBV_SHIM_LOG");
    let out = run(&mut cmd);
    let text = stdout(&out);
    for (call, want) in [
        ("ibv_alloc_pd(NULL)", "0 22"),
        ("ibv_create_cq(NULL, 16, NULL, NULL, 0)", "0 22"),
        ("ibv_create_comp_channel(NULL)", "0 22"),
        ("ibv_create_qp(NULL, &qia)", "0 22"),
        ("ibv_query_device(NULL, &dev)", "EINVAL 22"),
        ("ibv_query_gid(NULL, 1, 0, &gid)", "-1 22"),
        ("ibv_modify_qp(NULL, &qa, IBV_QP_STATE)", "EINVAL 22"),
    ] {
        assert!(
            text.lines().any(|l| l == format!("{call} {want}")),
            "{call}: want `{want}`\n{}",
            describe(&cmd, &out)
        );
    }
    assert!(
        text.lines()
            .any(|l| l.starts_with("ibv_reg_mr(NULL") && l.ends_with(" 0 22")),
        "{}",
        describe(&cmd, &out)
    );
    let warnings = stderr(&out)
        .lines()
        .filter(|l| l.contains(" WARN ") && l.contains("=NULL) (not forwarded"))
        .count();
    assert_eq!(warnings, 8, "{}", describe(&cmd, &out));
}
