//! Did this process use verbs? The flag every forwarding export sets, the
//! launcher's status markers, and where this process's report goes.

use std::ffi::OsString;
use std::os::unix::ffi::OsStringExt;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

use crate::config;
use crate::log::Level;

pub(super) static USED: AtomicBool = AtomicBool::new(false);

/// When this process (or forked child) first used verbs, in nanoseconds of
/// `CLOCK_REALTIME_COARSE`, the clock file modification times come from:
/// a report file modified since then was written by another process.
pub(super) static SINCE: AtomicU64 = AtomicU64::new(0);

/// Marks this process as a verbs user (called by every export that
/// forwards a call): only such a process writes a report.
#[inline(always)]
pub fn note_use() {
    // Read first: after the first call this is a load of a line no one writes.
    if !USED.load(Ordering::Relaxed) && !USED.swap(true, Ordering::Relaxed) {
        first_use();
        crate::gate::clear(crate::gate::FIRST_USE);
    }
}

/// Has this process used verbs (so it will write a report)?
pub fn used_verbs() -> bool {
    USED.load(Ordering::Relaxed)
}

/// After `fork()`, in the child: it has used nothing yet.
pub fn after_fork_in_child() {
    USED.store(false, Ordering::Relaxed);
    crate::gate::set(crate::gate::FIRST_USE);
}

pub(super) fn coarse_now_ns() -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: ts is a valid out-pointer; the clock always exists on Linux.
    unsafe { libc::clock_gettime(libc::CLOCK_REALTIME_COARSE, &mut ts) };
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

/// The first verbs call of this process: note the time, and tell the
/// launcher (`IBV_SHIM_STATUS_DIR`) that this process uses verbs, so that
/// if it dies before writing its report the launcher can say so and name
/// it. No allocation: the marker is formatted on the stack.
#[cold]
#[inline(never)]
pub(super) fn first_use() {
    let saved = crate::guard::Errno::save();
    SINCE.store(coarse_now_ns(), Ordering::Relaxed);
    if let Some(dir) = &config::get().status_dir {
        let mut text = [0u8; 4200];
        // SAFETY: getpid cannot fail.
        let pid = crate::log::Dec::new(unsafe { libc::getpid() } as u64);
        let mut len = pid.as_bytes().len();
        text[..len].copy_from_slice(pid.as_bytes());
        text[len] = b' ';
        len += 1;
        // SAFETY: the buffer has 4096 bytes free at `len`; readlink adds no NUL.
        let exe = unsafe {
            libc::readlink(
                c"/proc/self/exe".as_ptr(),
                text[len..].as_mut_ptr().cast(),
                4096,
            )
        };
        len += exe.max(0) as usize;
        text[len] = b'\n';
        write_status(dir.as_encoded_bytes(), b".started", &text[..len + 1]);
        catch_termination();
    }
    saved.restore();
}

/// Writes `<dir>/<pid><suffix>` holding `body`, allocation-free and
/// async-signal-safe (it also runs in a signal handler).
pub(super) fn write_status(dir: &[u8], suffix: &[u8], body: &[u8]) {
    // SAFETY: getpid cannot fail.
    let pid = crate::log::Dec::new(unsafe { libc::getpid() } as u64);
    let mut path = [0u8; 4096];
    if dir.len() + 1 + pid.as_bytes().len() + suffix.len() >= path.len() {
        return;
    }
    let mut n = 0;
    for part in [dir, b"/", pid.as_bytes(), suffix] {
        path[n..n + part.len()].copy_from_slice(part);
        n += part.len();
    }
    // SAFETY: path is NUL-terminated (zeroed past `n`); O_NOFOLLOW refuses
    // a symlink planted at the name.
    let fd = unsafe {
        libc::open(
            path.as_ptr().cast(),
            libc::O_WRONLY | libc::O_CREAT | libc::O_TRUNC | libc::O_NOFOLLOW | libc::O_CLOEXEC,
            0o600 as libc::c_uint,
        )
    };
    if fd >= 0 {
        // SAFETY: fd is ours; body is valid for its length.
        unsafe {
            libc::write(fd, body.as_ptr().cast(), body.len());
            libc::close(fd);
        }
    }
}

/// The signals that end a process that has no handler for them, and that
/// a wrapper (`timeout`) or a user sends.
pub(super) const TERMINATION: [libc::c_int; 3] = [libc::SIGTERM, libc::SIGINT, libc::SIGHUP];

/// Under the launcher only: for each of [`TERMINATION`] still at its
/// default action, a handler that notes the signal (`<pid>.signal`) and
/// dies of it as the default action would, so the launcher can say what
/// killed a process it did not start itself (`ibv-shim -- timeout 20
/// prog`). A disposition the program set is left alone, and a handler it
/// sets later replaces this one.
pub(super) fn catch_termination() {
    for sig in TERMINATION {
        // SAFETY: sigaction is plain data; all-zero is a valid value; the
        // handler only calls async-signal-safe functions.
        unsafe {
            let mut old: libc::sigaction = std::mem::zeroed();
            if libc::sigaction(sig, std::ptr::null(), &mut old) != 0
                || old.sa_sigaction != libc::SIG_DFL
            {
                continue;
            }
            let mut new: libc::sigaction = std::mem::zeroed();
            new.sa_sigaction = on_termination as extern "C" fn(libc::c_int) as usize;
            new.sa_flags = libc::SA_RESTART;
            libc::sigemptyset(&mut new.sa_mask);
            libc::sigaction(sig, &new, std::ptr::null_mut());
        }
    }
}

extern "C" fn on_termination(sig: libc::c_int) {
    let saved = crate::guard::Errno::save();
    if let Some(dir) = &config::get().status_dir {
        let n = crate::log::Dec::new(sig as u64);
        let mut body = [b'\n'; 24];
        body[..n.as_bytes().len()].copy_from_slice(n.as_bytes());
        write_status(
            dir.as_encoded_bytes(),
            b".signal",
            &body[..n.as_bytes().len() + 1],
        );
    }
    // Die of it as if no handler had been set: the default action again,
    // and the signal (blocked while this handler runs) delivered as soon
    // as it returns.
    // SAFETY: signal and raise are async-signal-safe.
    unsafe {
        libc::signal(sig, libc::SIG_DFL);
        libc::raise(sig);
    }
    saved.restore();
}

/// Where this process writes its report: `IBV_SHIM_REPORT` with `%p` as
/// the pid. A name without `%p` is shared by every process of the program
/// (a forked child, a program run by another): when another process has
/// written its report there since this one started using verbs, this one
/// adds its pid to the name (`r.json` -> `r.<pid>.json`) and warns, rather
/// than replace that report.
pub(super) fn report_path(template: &OsString) -> std::ffi::CString {
    let path = config::expand_pid(template);
    if template.as_encoded_bytes().windows(2).any(|w| w == b"%p") {
        return path;
    }
    // SAFETY: stat is plain data; all-zero is a valid value.
    let mut st: libc::stat = unsafe { std::mem::zeroed() };
    // SAFETY: path is NUL-terminated; st is a valid out-pointer.
    if unsafe { libc::lstat(path.as_ptr(), &mut st) } != 0
        || st.st_mode & libc::S_IFMT != libc::S_IFREG
    {
        return path;
    }
    let mtime = st.st_mtime as u64 * 1_000_000_000 + st.st_mtime_nsec as u64;
    if mtime < SINCE.load(Ordering::Relaxed) {
        // An old report, from before this process used verbs.
        return path;
    }
    let mine = config::expand_pid(&OsString::from_vec(with_pid(template.as_encoded_bytes())));
    crate::log!(
        Level::Warn,
        "IBV_SHIM_REPORT={}: another process wrote its report there while this one ran; \
         this process's report is {} (put %p in the name for one report per process)",
        template.to_string_lossy(),
        mine.to_string_lossy()
    );
    mine
}

/// `dir/r.json` -> `dir/r.%p.json`; `dir/r` -> `dir/r.%p`.
pub(super) fn with_pid(path: &[u8]) -> Vec<u8> {
    let base = path.iter().rposition(|&b| b == b'/').map_or(0, |i| i + 1);
    let at = match path[base..].iter().rposition(|&b| b == b'.') {
        // Not a leading dot (a hidden file's name is not an extension).
        Some(dot) if dot > 0 => base + dot,
        _ => path.len(),
    };
    let mut out = Vec::with_capacity(path.len() + 3);
    out.extend_from_slice(&path[..at]);
    out.extend_from_slice(b".%p");
    out.extend_from_slice(&path[at..]);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_shared_report_name_gets_the_pid_before_its_extension() {
        let w = |p: &str| String::from_utf8(with_pid(p.as_bytes())).unwrap();
        assert_eq!(w("/t/r.json"), "/t/r.%p.json");
        assert_eq!(w("/t/report"), "/t/report.%p");
        assert_eq!(w("/t.d/report"), "/t.d/report.%p");
        assert_eq!(w("/t/.hidden"), "/t/.hidden.%p");
        assert_eq!(w("r.x.json"), "r.x.%p.json");
    }
}
