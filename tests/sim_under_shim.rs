//! The sim's own self-checking C programs (`tests/c/sim/`: every simulated
//! verb and its errno, bad arguments, EBUSY ordering, the QP state machine,
//! the loopback data path, threads, fork, the extended verbs) pass unchanged with the shim in
//! front of the sim, preloaded and in drop-in mode: the shim does not change
//! the outcome of any call it forwards.
//!
//! Needs gcc, libibverbs-dev and a built shim and sim (`make test`).

mod common;

use common::*;
use std::process::Command;

const SUITES: &[&str] = &[
    "sim_verbs",
    "sim_errors",
    "sim_fork",
    "sim_qp_state",
    "sim_loopback",
    "sim_threads",
    "sim_everything",
    "sim_ext_post",
    "sim_ext_device",
    "sim_ext_threads",
];

fn suite(name: &str) -> std::path::PathBuf {
    let dir = repo_dir().join("tests/c/sim");
    let include = format!("-I{}", dir.display());
    cc(
        &format!("under_shim_{name}"),
        &[&dir.join(format!("{name}.c"))],
        &[&include, "-libverbs", "-lpthread"],
    )
}

fn passed(out: &std::process::Output) -> bool {
    out.status.success() && stdout(out).lines().any(|l| l.ends_with("checks passed"))
}

#[test]
fn the_sims_self_checks_pass_with_the_shim_preloaded_and_as_dropin() {
    let dropin = TempDir::new("sim-under-shim");
    let d = dropin.join("dropin");
    std::fs::create_dir_all(&d).unwrap();
    std::os::unix::fs::symlink(shim_so(), d.join("libibverbs.so.1")).unwrap();
    let sim = sim_dir();
    for name in SUITES {
        let prog = suite(name);
        let mut modes: Vec<(&str, Command)> = Vec::new();
        let mut preload = Command::new(&prog);
        preload
            .env("LD_LIBRARY_PATH", &sim)
            .env("LD_PRELOAD", shim_so())
            .env("IBV_SHIM_LOG", "off");
        modes.push(("preloaded", preload));
        let mut dropin_mode = Command::new(&prog);
        dropin_mode
            .env(
                "LD_LIBRARY_PATH",
                std::env::join_paths([d.as_path(), sim.as_path()]).unwrap(),
            )
            .env("IBV_SHIM_LOG", "off")
            .env_remove("LD_PRELOAD");
        modes.push(("drop-in", dropin_mode));
        for (mode, mut cmd) in modes {
            cmd.env_remove("IBV_SHIM_LIBRARY")
                .env_remove("IBV_SIM_DEVICES")
                .env_remove("IBV_SHIM_LEAK_EXITCODE");
            let out = run_unchecked(&mut cmd, std::time::Duration::from_secs(120));
            assert!(
                passed(&out),
                "{name} failed with the shim {mode}\n{}",
                describe(&cmd, &out)
            );
        }
    }
}
