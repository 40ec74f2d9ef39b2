//! Running the program: finding it like a shell does, starting it as a
//! child with the shim's environment, and waiting for it with the terminal's
//! signals left to it.

use std::ffi::{OsStr, OsString};
use std::os::unix::fs::PermissionsExt;
use std::os::unix::process::{CommandExt, ExitStatusExt};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::atomic::{AtomicI32, Ordering};

use crate::summary::Status;

/// The program could not be started: the status a shell would give (126 or
/// 127) and why.
#[derive(Debug, PartialEq, Eq)]
pub struct NotRun {
    pub status: i32,
    pub message: String,
}

/// The default search path when `PATH` is unset (bash's).
const DEFAULT_PATH: &str = "/usr/local/bin:/usr/bin:/bin";

fn executable(p: &Path) -> Result<bool, std::io::Error> {
    let m = std::fs::metadata(p)?;
    Ok(m.is_file() && m.permissions().mode() & 0o111 != 0)
}

/// Finds `program` the way a shell does: a name with a `/` is a path, any
/// other name is looked up in `path` (`PATH`). Not found is 127; found but
/// not executable (or a directory) is 126.
pub fn resolve(program: &OsStr, path: Option<&OsStr>) -> Result<PathBuf, NotRun> {
    let shown = program.to_string_lossy();
    let fail = |status, what: &str| NotRun {
        status,
        message: format!("{shown}: {what}"),
    };
    if program.as_encoded_bytes().contains(&b'/') {
        let p = PathBuf::from(program);
        return match std::fs::metadata(&p) {
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                Err(fail(127, "No such file or directory"))
            }
            Err(e) => Err(fail(126, &e.to_string())),
            Ok(m) if m.is_dir() => Err(fail(126, "Is a directory")),
            Ok(_) if !executable(&p).unwrap_or(false) => Err(fail(126, "Permission denied")),
            Ok(_) => Ok(p),
        };
    }
    let search = path
        .filter(|p| !p.is_empty())
        .unwrap_or(OsStr::new(DEFAULT_PATH));
    let mut not_executable = None;
    for dir in std::env::split_paths(search) {
        // An empty entry is the current directory.
        let dir = if dir.as_os_str().is_empty() {
            PathBuf::from(".")
        } else {
            dir
        };
        let candidate = dir.join(program);
        match executable(&candidate) {
            Ok(true) => return Ok(candidate),
            Ok(false) if candidate.is_file() => {
                not_executable.get_or_insert(candidate);
            }
            _ => {}
        }
    }
    match not_executable {
        Some(p) => Err(NotRun {
            status: 126,
            message: format!("{}: Permission denied", p.display()),
        }),
        None => Err(fail(127, "command not found")),
    }
}

/// The child's pid while it runs, for the forwarding signal handler; 0
/// before and after.
static CHILD: AtomicI32 = AtomicI32::new(0);

/// A forwarded signal that came before the child had a pid, passed on as
/// soon as it has one. (Blocking the signals around `spawn` instead would
/// leave them blocked in the child: std does not reset the mask.)
static PENDING: AtomicI32 = AtomicI32::new(0);

/// SIGTERM and SIGHUP: passed on to the child.
extern "C" fn forward(sig: libc::c_int) {
    let pid = CHILD.load(Ordering::SeqCst);
    if pid > 0 {
        // SAFETY: kill is async-signal-safe; `pid` is the child's (never 0
        // or negative, which would signal a process group).
        unsafe { libc::kill(pid, sig) };
    } else {
        PENDING.store(sig, Ordering::SeqCst);
    }
}

/// SIGINT and SIGQUIT: the terminal sends them to the whole foreground
/// process group, so the child has them already; the launcher stays to
/// print the summary. A handler rather than `SIG_IGN`, because `exec`
/// resets a handled signal to its default in the child but keeps an
/// ignored one ignored.
extern "C" fn ignore(_sig: libc::c_int) {}

/// The signal dispositions the launcher had before [`Signals::install`].
struct Signals(Vec<(libc::c_int, libc::sigaction)>);

impl Signals {
    fn install() -> Signals {
        let mut saved = Vec::new();
        let handlers: [(libc::c_int, extern "C" fn(libc::c_int)); 4] = [
            (libc::SIGINT, ignore),
            (libc::SIGQUIT, ignore),
            (libc::SIGTERM, forward),
            (libc::SIGHUP, forward),
        ];
        for (sig, handler) in handlers {
            // SAFETY: sigaction with a zeroed, then filled, struct; the
            // handlers only call async-signal-safe functions and read an
            // atomic. `old` receives the previous disposition.
            unsafe {
                let mut new: libc::sigaction = std::mem::zeroed();
                new.sa_sigaction = handler as usize;
                new.sa_flags = libc::SA_RESTART;
                libc::sigemptyset(&mut new.sa_mask);
                let mut old: libc::sigaction = std::mem::zeroed();
                // A signal ignored when the launcher started (nohup) stays
                // ignored, for the launcher and, inherited, the child.
                if libc::sigaction(sig, std::ptr::null(), &mut old) == 0
                    && old.sa_sigaction == libc::SIG_IGN
                {
                    continue;
                }
                if libc::sigaction(sig, &new, &mut old) == 0 {
                    saved.push((sig, old));
                }
            }
        }
        Signals(saved)
    }
}

impl Drop for Signals {
    fn drop(&mut self) {
        for (sig, old) in &self.0 {
            // SAFETY: restores a disposition sigaction gave us.
            unsafe { libc::sigaction(*sig, old, std::ptr::null_mut()) };
        }
    }
}

/// How the program ran: its pid and how it ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Ran {
    pub pid: u32,
    pub status: Status,
}

/// Runs `program` (found by [`resolve`], shown to it as `argv0`) with
/// `args` and the extra variables `vars`, stdio inherited, and waits.
pub fn run(
    program: &Path,
    argv0: &OsStr,
    args: &[OsString],
    vars: &[(OsString, OsString)],
) -> Result<Ran, NotRun> {
    let mut cmd = Command::new(program);
    cmd.arg0(argv0).args(args);
    for (k, v) in vars {
        cmd.env(k, v);
    }
    let signals = Signals::install();
    let mut child = match cmd.spawn() {
        Ok(child) => child,
        Err(e) => {
            drop(signals);
            let sig = PENDING.swap(0, Ordering::SeqCst);
            if sig != 0 {
                // Told to stop before it had a child: the launcher stops,
                // by the signal's default action (restored by the drop).
                // SAFETY: raise has no memory preconditions.
                unsafe { libc::raise(sig) };
            }
            // The file is there (resolve saw it): "not found" is about its
            // interpreter or dynamic loader. A shell says 126 too.
            let hint = if e.kind() == std::io::ErrorKind::NotFound {
                " (its interpreter or dynamic loader is missing)"
            } else {
                ""
            };
            return Err(NotRun {
                status: 126,
                message: format!("{}: cannot execute: {e}{hint}", argv0.to_string_lossy()),
            });
        }
    };
    let pid = child.id() as i32;
    CHILD.store(pid, Ordering::SeqCst);
    // A SIGTERM or SIGHUP that came while the child was starting.
    let sig = PENDING.swap(0, Ordering::SeqCst);
    if sig != 0 {
        // SAFETY: kill has no memory preconditions; `pid` is our child's.
        unsafe { libc::kill(pid, sig) };
    }
    let status = child.wait();
    CHILD.store(0, Ordering::SeqCst);
    drop(signals);
    let status = status.map_err(|e| NotRun {
        status: 125,
        message: format!("waiting for {}: {e}", argv0.to_string_lossy()),
    })?;
    let status = match (status.code(), status.signal()) {
        (Some(code), _) => Status::Exited(code),
        (None, Some(sig)) => Status::Signaled(sig),
        (None, None) => Status::Exited(125),
    };
    Ok(Ran {
        pid: pid as u32,
        status,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_found_in_path_and_paths_are_checked() {
        let path = OsStr::new("/nonexistent-dir:/bin:/usr/bin");
        let sh = resolve(OsStr::new("sh"), Some(path)).unwrap();
        assert!(sh.ends_with("sh") && sh.is_absolute(), "{}", sh.display());
        let e = resolve(OsStr::new("no-such-program-ibv"), Some(path)).unwrap_err();
        assert_eq!(e.status, 127);
        assert_eq!(e.message, "no-such-program-ibv: command not found");
        let e = resolve(OsStr::new("/no/such/file"), Some(path)).unwrap_err();
        assert_eq!(
            (e.status, e.message.as_str()),
            (127, "/no/such/file: No such file or directory")
        );
        let e = resolve(OsStr::new("/"), Some(path)).unwrap_err();
        assert_eq!(e.status, 126);
        assert!(resolve(OsStr::new("/bin/sh"), None).is_ok());
    }

    #[test]
    fn a_file_without_execute_permission_is_126() {
        let dir = crate::environment::private_dir().unwrap();
        let f = dir.join("script");
        std::fs::write(&f, "#!/bin/sh\n").unwrap();
        let e = resolve(f.as_os_str(), None).unwrap_err();
        assert_eq!(e.status, 126);
        assert!(e.message.ends_with("Permission denied"), "{}", e.message);
        let e = resolve(OsStr::new("script"), Some(dir.as_os_str())).unwrap_err();
        assert_eq!(e.status, 126);
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn exit_codes_and_signals_come_back() {
        let sh = Path::new("/bin/sh");
        let run_sh = |script: &str| {
            run(sh, OsStr::new("sh"), &["-c".into(), script.into()], &[])
                .unwrap()
                .status
        };
        assert_eq!(run_sh("exit 7"), Status::Exited(7));
        assert_eq!(run_sh("kill -KILL $$"), Status::Signaled(9));
        // The child does not inherit the launcher's own SIGINT handling. (A
        // test run from a background job starts with SIGINT ignored, which
        // the launcher rightly passes on: start from the default, as a
        // terminal's foreground job has it.)
        // SAFETY: sets a disposition of this test process; no handler runs.
        unsafe { libc::signal(libc::SIGINT, libc::SIG_DFL) };
        assert_eq!(run_sh("kill -INT $$; exit 0"), Status::Signaled(2));
        // Nor a blocked signal: the forwarded ones must reach it.
        assert_eq!(
            run_sh("grep -q '^SigBlk:[[:space:]]*0*$' /proc/self/status"),
            Status::Exited(0)
        );
        let vars = [("IBV_SHIM_TEST_VAR".into(), "x y".into())];
        let st = run(
            sh,
            OsStr::new("sh"),
            &["-c".into(), "[ \"$IBV_SHIM_TEST_VAR\" = 'x y' ]".into()],
            &vars,
        )
        .unwrap();
        assert_eq!(st.status, Status::Exited(0));
    }
}
