//! ibv-sim's objects of issue 12, each created, used and destroyed by a C
//! program compiled against the real `/usr/include/infiniband/verbs.h`,
//! reaching them the way every program does: through the inline verbs,
//! which jump through the context's function tables. Each program checks
//! the objects' behaviour and the errno of each misuse, and prints
//! "checks passed".
//!
//! Needs gcc, libibverbs-dev and a built sim (`make test`).

mod common;

use std::path::PathBuf;
use std::process::{Command, Stdio};

use common::*;

/// Compiles `tests/c/objects/NAME.c` (with `tests/c/sim/check.h`).
fn c_program(name: &str) -> PathBuf {
    let dir = repo_dir().join("tests/c/objects");
    let inc_sim = format!("-I{}", repo_dir().join("tests/c/sim").display());
    let inc_own = format!("-I{}", dir.display());
    let src = dir.join(format!("{name}.c"));
    cc(name, &[src.as_path()], &[&inc_sim, &inc_own, "-libverbs"])
}

/// A command running `prog` on the sim alone (its default two devices).
fn on_sim(prog: impl AsRef<std::ffi::OsStr>) -> Command {
    let mut c = Command::new(prog);
    c.env("LD_LIBRARY_PATH", sim_dir())
        .env_remove("IBV_SIM_DEVICES")
        .env_remove("LD_PRELOAD")
        .stdin(Stdio::null());
    c
}

/// Runs the self-checking C program `name` on the sim.
fn run_c(name: &str) {
    let bin = c_program(name);
    let mut cmd = on_sim(&bin);
    let out = run(&mut cmd);
    assert!(
        out.status.success() && stdout(&out).contains("checks passed"),
        "{}",
        describe(&cmd, &out)
    );
}

/// Memory windows: alloc / dealloc, type 1 and type 2 binds (three APIs),
/// invalidation, and the responder's rkey checks.
#[test]
fn memory_windows() {
    run_c("obj_mw");
}

/// XRC domains (private and file-named), thread domains, parent domains
/// (used as PDs in the data path), device memory (copies and an MR on it
/// in the data path), each with the kernel's errno on misuse.
#[test]
fn domains_and_device_memory() {
    run_c("obj_domains");
}
