//! Options from the environment, read once on first use.
//!
//! Like rdma-core with its own path variables, the shim ignores every
//! path-like option in secure-execution mode (setuid programs,
//! `getauxval(AT_SECURE)`), so an unprivileged user cannot make a privileged
//! program load a library or write a file of their choosing.
//!
//! The options are read when the shim is loaded (a constructor), and
//! relative paths are made absolute then: a program that later changes
//! directory (`chdir`, `daemon()`) still logs, reports and reads
//! suppressions where its user meant.

use std::ffi::{CString, OsString};
use std::os::unix::ffi::{OsStrExt, OsStringExt};

use once_cell::sync::Lazy;

use crate::level::Level;

/// Every option the shim reads. docs/environment.md documents each one.
#[derive(Debug)]
pub struct Config {
    /// `IBV_SHIM_LOG`: `off|error|warn|info|debug|trace` (default `warn`).
    pub log_level: Level,
    /// `IBV_SHIM_LOG_FILE`: a path; `%p` becomes the pid. Default stderr.
    pub log_file: Option<OsString>,
    /// `IBV_SHIM_LOG_SYNC=1`: write debug and trace lines on the calling
    /// thread, not through the writer thread (nothing queued for a crash
    /// to lose).
    pub log_sync: bool,
    /// `IBV_SHIM_LIBRARY`: the library to forward to instead of `libibverbs.so.1`.
    pub library: Option<CString>,
    /// `IBV_SHIM_REPORT`: where to write the JSON leak report; `%p` = pid.
    pub report: Option<OsString>,
    /// `IBV_SHIM_LEAK_EXITCODE`: exit status of a process that leaked.
    pub leak_exitcode: Option<i32>,
    /// `IBV_SHIM_SUPPRESS`: a file of leak suppressions.
    pub suppress: Option<OsString>,
    /// `IBV_SHIM_STATUS_DIR` (set by the launcher): each process that uses
    /// verbs notes itself there (`<pid>.started`).
    pub status_dir: Option<OsString>,
    /// `IBV_SHIM_RUN` (set by the launcher): the run the process belongs
    /// to, written into its report.
    pub run: Option<String>,
    /// `IBV_SHIM_BACKTRACE=1`: record a full backtrace at each creation.
    pub backtrace: bool,
    /// `IBV_SHIM_CHECK=datapath[,abort]`: check every posted work request
    /// (and abort at the first violation).
    pub check_datapath: bool,
    pub check_abort: bool,
    /// `IBV_SHIM_CHECK=inflight`: also track posted work until its
    /// completion (implies `datapath`).
    pub check_inflight: bool,
    /// `IBV_SHIM_DEFAULT_SUPPRESSIONS=0` turns the built-in suppressions off.
    pub default_suppressions: bool,
    /// Set when the process runs in secure-execution mode.
    pub secure: bool,
    /// Problems found while reading the options, logged once the logger runs.
    pub problems: Vec<String>,
}

static CONFIG: Lazy<Config> = Lazy::new(Config::from_env);

/// The checks' level as one byte the data path's wrappers test:
/// [`CHECK_UNSET`] until the configuration is read, then 0 (off), 1
/// (`datapath`) or 2 (`inflight`).
pub static CHECK_LEVEL: std::sync::atomic::AtomicU8 = std::sync::atomic::AtomicU8::new(CHECK_UNSET);
pub const CHECK_UNSET: u8 = 0xff;

/// The process's configuration.
pub fn get() -> &'static Config {
    &CONFIG
}

fn secure_execution() -> bool {
    // SAFETY: getauxval has no preconditions; it returns 0 for unknown types.
    unsafe { libc::getauxval(libc::AT_SECURE) != 0 }
}

impl Config {
    fn from_env() -> Config {
        let secure = secure_execution();
        let mut problems = Vec::new();
        let var = |name: &str| std::env::var_os(name).filter(|v| !v.is_empty());
        let mut path = |name: &str| {
            let v = var(name)?;
            if secure {
                problems.push(format!(
                    "{name} ignored: secure-execution mode (uid != euid)"
                ));
                return None;
            }
            Some(v)
        };
        let log_file = path("IBV_SHIM_LOG_FILE");
        // A bare library name is looked up on the search path, as dlopen does.
        let library = path("IBV_SHIM_LIBRARY");
        let report = path("IBV_SHIM_REPORT");
        let suppress = path("IBV_SHIM_SUPPRESS");
        let status_dir = path("IBV_SHIM_STATUS_DIR");
        let cwd = std::env::current_dir().ok();
        let mut absolute = |name: &str, v: OsString| -> OsString {
            let bytes = v.as_bytes();
            if bytes.starts_with(b"/") || (name == "IBV_SHIM_LIBRARY" && !bytes.contains(&b'/')) {
                return v;
            }
            match &cwd {
                Some(dir) => dir.join(&v).into_os_string(),
                None => {
                    problems.push(format!(
                        "{name}={v:?} is relative and the current directory is unknown; used as it is"
                    ));
                    v
                }
            }
        };
        let log_file = log_file.map(|v| absolute("IBV_SHIM_LOG_FILE", v));
        let library = library
            .map(|v| absolute("IBV_SHIM_LIBRARY", v))
            .and_then(|v| CString::new(v.into_vec()).ok());
        let report = report.map(|v| absolute("IBV_SHIM_REPORT", v));
        let suppress = suppress.map(|v| absolute("IBV_SHIM_SUPPRESS", v));
        let status_dir = status_dir.map(|v| absolute("IBV_SHIM_STATUS_DIR", v));

        let log_level = match var("IBV_SHIM_LOG") {
            None => Level::Warn,
            Some(v) => Level::parse(&v.to_string_lossy()).unwrap_or_else(|| {
                problems.push(format!(
                    "IBV_SHIM_LOG={:?} is not one of off|error|warn|info|debug|trace; using warn",
                    v
                ));
                Level::Warn
            }),
        };
        let leak_exitcode =
            var("IBV_SHIM_LEAK_EXITCODE").and_then(|v| match v.to_string_lossy().parse::<i32>() {
                Ok(n) if (0..=255).contains(&n) => Some(n),
                _ => {
                    problems.push(format!(
                        "IBV_SHIM_LEAK_EXITCODE={v:?} is not 0..255; ignored"
                    ));
                    None
                }
            });
        let run = var("IBV_SHIM_RUN").map(|v| v.to_string_lossy().into_owned());
        let backtrace = var("IBV_SHIM_BACKTRACE").is_some_and(|v| v != "0");
        let log_sync = var("IBV_SHIM_LOG_SYNC").is_some_and(|v| v != "0");
        let default_suppressions = var("IBV_SHIM_DEFAULT_SUPPRESSIONS").is_none_or(|v| v != "0");
        let (mut check_datapath, mut check_abort, mut check_inflight) = (false, false, false);
        if let Some(v) = var("IBV_SHIM_CHECK") {
            for word in v.to_string_lossy().split(',').map(str::trim) {
                match word {
                    "datapath" => check_datapath = true,
                    "abort" => check_abort = true,
                    "inflight" => (check_datapath, check_inflight) = (true, true),
                    "" | "none" => {}
                    _ => problems.push(format!(
                        "IBV_SHIM_CHECK: {word:?} is not one of datapath, inflight, abort; ignored"
                    )),
                }
            }
        }
        let level = if check_inflight {
            2
        } else {
            u8::from(check_datapath)
        };
        CHECK_LEVEL.store(level, std::sync::atomic::Ordering::Relaxed);
        Config {
            check_datapath,
            check_abort,
            check_inflight,
            log_level,
            log_file,
            log_sync,
            library,
            report,
            leak_exitcode,
            suppress,
            status_dir,
            run,
            backtrace,
            default_suppressions,
            secure,
            problems,
        }
    }
}

/// Reads the options now (the first call parses them); `lifecycle` calls
/// it as the shim is loaded, before the program can change directory.
pub fn load() {
    Lazy::force(&CONFIG);
}

/// Expands `%p` in a path template to the current pid.
pub fn expand_pid(template: &OsString) -> CString {
    // SAFETY: getpid cannot fail.
    let pid = unsafe { libc::getpid() }.to_string();
    let bytes = template.as_bytes();
    let mut out = Vec::with_capacity(bytes.len() + 8);
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'%' && bytes.get(i + 1) == Some(&b'p') {
            out.extend_from_slice(pid.as_bytes());
            i += 2;
        } else {
            out.push(bytes[i]);
            i += 1;
        }
    }
    out.retain(|&b| b != 0);
    CString::new(out).expect("NULs removed")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pid_is_expanded_everywhere() {
        let pid = std::process::id().to_string();
        let got = expand_pid(&OsString::from("/tmp/a.%p.%p.log"));
        assert_eq!(got.to_str().unwrap(), format!("/tmp/a.{pid}.{pid}.log"));
        assert_eq!(
            expand_pid(&OsString::from("/x/%q")).to_str().unwrap(),
            "/x/%q"
        );
    }
}
