//! The C programs of the whole-API and data-path-check tests
//! (`tests/c/wholeapi/`), run on the sim under the preloaded shim with
//! its log and JSON report in a temporary directory.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use serde_json::Value;

use super::{cc, fabric_name, preload_shim, repo_dir, run_unchecked, sim_dir, stdout, TempDir};

/// Builds `tests/c/wholeapi/NAME.c` at -O2: the inline verbs inlined, as
/// in real programs (the site of a report is the program's own call).
pub fn wholeapi_program(name: &str) -> PathBuf {
    let include = |dir: &str| format!("-I{}", repo_dir().join(dir).display());
    cc(
        name,
        &[&repo_dir().join(format!("tests/c/wholeapi/{name}.c"))],
        &[
            &include("tests/c/sim"),
            &include("tests/c/common"),
            "-O2",
            "-libverbs",
            "-ldl",
        ],
    )
}

/// What a run under the shim left: its output, the shim's log and report.
pub struct ShimRun {
    pub stdout: String,
    pub log: String,
    pub json: Option<Value>,
    pub status: std::process::ExitStatus,
    _dir: TempDir,
}

/// Runs `program args` on the sim (a fabric named after `tag` and the
/// first argument) under the preloaded shim, with none of the shim's
/// options inherited but `env`.
pub fn shim_run(program: &Path, tag: &str, args: &[&str], env: &[(&str, &str)]) -> ShimRun {
    let dir = TempDir::new(tag);
    let mut cmd = Command::new(program);
    cmd.args(args);
    for var in [
        "IBV_SHIM_LOG",
        "IBV_SHIM_LIBRARY",
        "IBV_SHIM_CHECK",
        "IBV_SHIM_TRACE",
        "IBV_SHIM_FAULTS",
        "IBV_SHIM_LEAK_EXITCODE",
        "IBV_SIM_DEVICES",
        "IBV_SIM_WITNESS",
    ] {
        cmd.env_remove(var);
    }
    cmd.env("LD_LIBRARY_PATH", sim_dir())
        .env("IBV_SIM_FABRIC", fabric_name(tag, args[0]));
    preload_shim(&mut cmd)
        .env("IBV_SHIM_LOG_FILE", dir.join("log"))
        .env("IBV_SHIM_REPORT", dir.join("report.json"))
        .envs(env.iter().copied());
    let out = run_unchecked(&mut cmd, Duration::from_secs(60));
    let log = std::fs::read_to_string(dir.join("log")).unwrap_or_default();
    let json = std::fs::read_to_string(dir.join("report.json"))
        .ok()
        .map(|t| serde_json::from_str(&t).unwrap_or_else(|e| panic!("bad JSON {e}: {t}")));
    ShimRun {
        stdout: stdout(&out),
        log,
        json,
        status: out.status,
        _dir: dir,
    }
}
