//! One run of a fault sweep, watched by a process of its own: the
//! launcher's executable again (`/proc/self/exe`, named [`ARGV0`]), which
//! becomes a child subreaper (`PR_SET_CHILD_SUBREAPER`), runs the program
//! in a process group of its own and waits for it. Every descendant the
//! program leaves, even one that left the group or the session
//! (`setsid()`), is reparented to the reaper rather than to init; when the
//! program ends, hangs past the timeout, or the launcher says stop
//! (SIGTERM), the reaper kills the group and then each child it has, over
//! and over, until none is left, and only then writes how the program
//! ended and exits. So when the launcher reads the run's reports and later
//! removes their directory, nothing of the run is still running.
//!
//! A process of its own because the sweep's runs go in parallel threads:
//! the subreaper attribute is the whole process's, and a fork without an
//! exec in a threaded program may not do what this does.

use std::ffi::OsString;
use std::io::Write;
use std::os::unix::process::CommandExt;
use std::path::Path;
use std::process::Command;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

/// The reaper's `argv[0]`: `main` runs [`main`] when it sees it.
pub const ARGV0: &str = "ibv-shim-sweep-run";

/// How the watched program ended, as the reaper writes it.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Ended {
    pub exit: Option<i32>,
    pub signal: Option<i32>,
    /// Still running at the timeout (killed).
    pub hung: bool,
}

impl Ended {
    fn text(&self) -> String {
        let mut s = String::new();
        if let Some(c) = self.exit {
            s.push_str(&format!("exit {c}\n"));
        }
        if let Some(sig) = self.signal {
            s.push_str(&format!("signal {sig}\n"));
        }
        if self.hung {
            s.push_str("hung\n");
        }
        s
    }

    /// Reads what [`Ended::text`] wrote; `None` if the file is not there
    /// (the reaper itself was killed).
    pub fn read(path: &Path) -> Option<Ended> {
        let text = crate::files::read_text(path, 4096).ok()?;
        let mut e = Ended::default();
        for line in text.lines() {
            match line.split_once(' ') {
                Some(("exit", n)) => e.exit = n.parse().ok(),
                Some(("signal", n)) => e.signal = n.parse().ok(),
                _ if line == "hung" => e.hung = true,
                _ => {}
            }
        }
        Some(e)
    }
}

/// The dynamic loader's variables: the program's, not the reaper's (the
/// shim preloaded into the reaper would be a second process with the
/// run's options: its trace path, its report path).
pub const LOADER_VARS: [&str; 2] = ["LD_PRELOAD", "LD_LIBRARY_PATH"];

/// The command that runs `program` (shown to it as `argv0`) with `args`
/// under a reaper: the program is killed after `timeout` seconds; how it
/// ended goes to `status`. `loader` are the [`LOADER_VARS`] the program
/// gets; the reaper runs without them.
pub fn command(
    program: &Path,
    argv0: &OsString,
    args: &[OsString],
    timeout: u64,
    status: &Path,
    loader: &[(OsString, OsString)],
) -> Command {
    let mut cmd = Command::new("/proc/self/exe");
    cmd.arg0(ARGV0)
        .arg(timeout.to_string())
        .arg(status)
        .arg(loader.len().to_string());
    for (k, v) in loader {
        cmd.arg(k).arg(v);
    }
    cmd.arg(program).arg(argv0).args(args);
    for k in LOADER_VARS {
        cmd.env_remove(k);
    }
    cmd
}

/// Set by SIGTERM, SIGINT or SIGHUP (the launcher stopping, or dying: the
/// parent-death signal): kill everything now.
static STOP: AtomicBool = AtomicBool::new(false);

extern "C" fn on_stop(_sig: libc::c_int) {
    STOP.store(true, Ordering::SeqCst);
}

/// The reaper itself: `TIMEOUT STATUS N [NAME VALUE]{N} PROGRAM ARGV0
/// ARGS...` after its `argv[0]` (the pairs: the program's loader
/// variables). Returns its exit status (0; 125 when it cannot work).
pub fn main(mut args: impl Iterator<Item = OsString>) -> i32 {
    let not_a_command = || {
        eprintln!("ibv-shim: {ARGV0} is the fault sweep's own helper, not a command");
        125
    };
    let (Some(timeout), Some(status), Some(n)) = (args.next(), args.next(), args.next()) else {
        return not_a_command();
    };
    let Ok(n) = n.to_string_lossy().parse::<usize>() else {
        return not_a_command();
    };
    let mut loader = Vec::new();
    for _ in 0..n.min(LOADER_VARS.len()) {
        let (Some(k), Some(v)) = (args.next(), args.next()) else {
            return not_a_command();
        };
        loader.push((k, v));
    }
    let (Some(program), Some(argv0)) = (args.next(), args.next()) else {
        return not_a_command();
    };
    let timeout: u64 = timeout.to_string_lossy().parse().unwrap_or(60);
    for sig in [libc::SIGTERM, libc::SIGINT, libc::SIGHUP] {
        // SAFETY: installs a handler that only stores to an atomic.
        unsafe {
            let mut new: libc::sigaction = std::mem::zeroed();
            new.sa_sigaction = on_stop as extern "C" fn(libc::c_int) as usize;
            libc::sigemptyset(&mut new.sa_mask);
            libc::sigaction(sig, &new, std::ptr::null_mut());
        }
    }
    // SAFETY: prctl with integer arguments only.
    let reaper = unsafe {
        libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGTERM as libc::c_ulong);
        libc::prctl(libc::PR_SET_CHILD_SUBREAPER, 1 as libc::c_ulong)
    };
    if reaper != 0 {
        eprintln!(
            "ibv-shim: {ARGV0}: PR_SET_CHILD_SUBREAPER: {}",
            std::io::Error::last_os_error()
        );
        return 125;
    }
    // The launcher went before the parent-death signal was set.
    // SAFETY: getppid has no preconditions.
    if unsafe { libc::getppid() } == 1 {
        return 125;
    }
    let mut cmd = Command::new(&program);
    cmd.arg0(&argv0).args(args).process_group(0);
    for (k, v) in &loader {
        cmd.env(k, v);
    }
    // The launcher's handlers do not pass exec; the signals the program
    // gets are at their defaults.
    let mut ended = Ended::default();
    let child = match cmd.spawn() {
        Ok(c) => c,
        Err(_) => {
            ended.exit = Some(126);
            return write_status(Path::new(&status), &ended);
        }
    };
    let pid = child.id() as libc::pid_t;
    let deadline = Instant::now() + Duration::from_secs(timeout);
    loop {
        let mut st = 0;
        // Reaps the program and whatever of its descendants ends meanwhile.
        // SAFETY: waitpid with a valid out-pointer.
        let got = unsafe { libc::waitpid(-1, &mut st, libc::WNOHANG) };
        if got == pid {
            if libc::WIFEXITED(st) {
                ended.exit = Some(libc::WEXITSTATUS(st));
            } else if libc::WIFSIGNALED(st) {
                ended.signal = Some(libc::WTERMSIG(st));
            }
            break;
        }
        if got > 0 {
            continue;
        }
        if STOP.load(Ordering::SeqCst) {
            break;
        }
        if Instant::now() >= deadline {
            ended.hung = true;
            break;
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    kill_all(pid);
    write_status(Path::new(&status), &ended)
}

/// Kills the program's process group and every child the reaper has
/// (descendants that left the group are reparented to it as their parents
/// die), until it has none.
fn kill_all(pgid: libc::pid_t) {
    // SAFETY: getpid has no preconditions.
    let me = unsafe { libc::getpid() };
    loop {
        // SAFETY: signals the program's own group (pgid > 0); ESRCH when
        // it is empty.
        unsafe { libc::kill(-pgid, libc::SIGKILL) };
        for pid in children(me) {
            // SAFETY: a child of this process: never 0 or negative.
            unsafe { libc::kill(pid, libc::SIGKILL) };
        }
        let mut st = 0;
        // SAFETY: waitpid with a valid out-pointer.
        match unsafe { libc::waitpid(-1, &mut st, libc::WNOHANG) } {
            -1 if std::io::Error::last_os_error().raw_os_error() == Some(libc::ECHILD) => return,
            0 | -1 => std::thread::sleep(Duration::from_millis(1)),
            _ => {}
        }
    }
}

/// The processes whose parent is `parent`, from `/proc/<pid>/stat`.
fn children(parent: libc::pid_t) -> Vec<libc::pid_t> {
    let Ok(dir) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    dir.filter_map(Result::ok)
        .filter_map(|e| e.file_name().to_str()?.parse::<libc::pid_t>().ok())
        .filter(|pid| {
            let Ok(stat) = std::fs::read_to_string(format!("/proc/{pid}/stat")) else {
                return false;
            };
            // `pid (comm) state ppid ...`: comm may hold spaces and ')'.
            stat.rsplit_once(')')
                .and_then(|(_, rest)| rest.split_whitespace().nth(1)?.parse().ok())
                == Some(parent)
        })
        .collect()
}

fn write_status(path: &Path, ended: &Ended) -> i32 {
    let written = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .open(path)
        .and_then(|mut f| f.write_all(ended.text().as_bytes()));
    match written {
        Ok(()) => 0,
        Err(e) => {
            eprintln!("ibv-shim: {ARGV0}: {}: {e}", path.display());
            125
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_status_reads_back() {
        let dir = crate::environment::private_dir().unwrap();
        for e in [
            Ended {
                exit: Some(3),
                ..Ended::default()
            },
            Ended {
                signal: Some(9),
                hung: true,
                ..Ended::default()
            },
        ] {
            let f = dir.join(format!("s{}", e.text().len()));
            assert_eq!(write_status(&f, &e), 0);
            assert_eq!(Ended::read(&f), Some(e));
        }
        assert_eq!(Ended::read(&dir.join("none")), None);
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn children_are_found_by_parent() {
        let mut c = Command::new("sleep").arg("5").spawn().unwrap();
        // SAFETY: getpid has no preconditions.
        let me = unsafe { libc::getpid() };
        assert!(children(me).contains(&(c.id() as libc::pid_t)));
        c.kill().unwrap();
        c.wait().unwrap();
    }
}
