//! Contexts and objects the real library never handed out or has freed
//! (issue 9, item 7): every export that takes a context refuses garbage and
//! closed contexts with EINVAL and a warning instead of forwarding them (the
//! real rdma-core crashes on garbage: `ibv_alloc_pd((void *)0x1234)` is a
//! SIGSEGV); objects known destroyed or of a closed context are refused; a
//! context opened behind the shim's back on a device it handed out is
//! adopted, not refused.
//!
//! `tests/c/bad/contexts.c` runs on the real rdma-core in the test bed
//! (garbage contexts: no context opens there) and on the sim (closed
//! contexts, dead objects, adoption), preloaded and drop-in.

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
