//! The trace's options, read with the rest when the shim is loaded.
//!
//! `IBV_SHIM_TRACE=FILE` (`%p` = pid) turns binary tracing on;
//! `IBV_SHIM_TRACE_FULL=drop|block` is what a full ring does;
//! `IBV_SHIM_TRACE_SLOTS=N` sizes each thread's ring (N x 128 bytes, a
//! power of two; a device verb's record takes about 80; its file space is
//! allocated as it fills); `IBV_SHIM_TRACE_CLOCK=monotonic` times calls with CLOCK_MONOTONIC
//! even where the TSC could be used (`tsc`, the default, uses it when it
//! is invariant and the kernel's clocksource). Like the other path options, `IBV_SHIM_TRACE` is made absolute at
//! load and ignored in secure-execution mode.

use std::ffi::OsString;
use std::os::unix::ffi::OsStrExt;

use once_cell::sync::Lazy;

/// Rings in a trace file: threads tracing at once (a ring is handed on
/// when its thread exits); in `block` mode the last `ring::SHARED_RINGS`
/// are shared by the threads past the rest.
pub const RINGS: usize = 64;
/// 1 MiB a ring (the 256-byte slots' size before): about 13,000 device verb records.
const DEFAULT_SLOTS: usize = 8192;

#[derive(Debug)]
pub struct TraceConfig {
    pub file: Option<OsString>,
    pub block: bool,
    pub slots: usize,
    /// May calls be timed with the TSC (see `clock`)?
    pub tsc: bool,
    pub problems: Vec<String>,
}

static CONFIG: Lazy<TraceConfig> = Lazy::new(TraceConfig::from_env);

pub fn get() -> &'static TraceConfig {
    &CONFIG
}

impl TraceConfig {
    fn from_env() -> TraceConfig {
        let var = |name: &str| std::env::var_os(name).filter(|v| !v.is_empty());
        let mut problems = Vec::new();
        let mut file = var("IBV_SHIM_TRACE");
        if file.is_some() && crate::config::get().secure {
            problems.push("IBV_SHIM_TRACE ignored: secure-execution mode (uid != euid)".into());
            file = None;
        }
        let file = file.map(|v| {
            if v.as_bytes().starts_with(b"/") {
                return v;
            }
            match std::env::current_dir() {
                Ok(dir) => dir.join(&v).into_os_string(),
                Err(_) => v,
            }
        });
        let block = match var("IBV_SHIM_TRACE_FULL") {
            None => false,
            Some(v) if v == "drop" => false,
            Some(v) if v == "block" => true,
            Some(v) => {
                problems.push(format!(
                    "IBV_SHIM_TRACE_FULL={v:?} is not drop|block; using drop"
                ));
                false
            }
        };
        let slots = match var("IBV_SHIM_TRACE_SLOTS") {
            None => DEFAULT_SLOTS,
            Some(v) => match v.to_string_lossy().parse::<usize>() {
                Ok(n) if n.is_power_of_two() && (16..=1 << 20).contains(&n) => n,
                _ => {
                    problems.push(format!(
                        "IBV_SHIM_TRACE_SLOTS={v:?} is not a power of two from 16 to 1048576; \
                         using {DEFAULT_SLOTS}"
                    ));
                    DEFAULT_SLOTS
                }
            },
        };
        let tsc = match var("IBV_SHIM_TRACE_CLOCK") {
            None => true,
            Some(v) if v == "tsc" => true,
            Some(v) if v == "monotonic" => false,
            Some(v) => {
                problems.push(format!(
                    "IBV_SHIM_TRACE_CLOCK={v:?} is not tsc|monotonic; using tsc"
                ));
                true
            }
        };
        TraceConfig {
            file,
            block,
            slots,
            tsc,
            problems,
        }
    }
}
