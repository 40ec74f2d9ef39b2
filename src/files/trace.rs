//! The trace file's creation and takeover: created `O_EXCL`, locked
//! (`flock`) for the life of its process, a finished run's trace at the
//! path replaced, a live one's left for `PATH.<pid>`.

use std::ffi::{CStr, CString};
use std::io;

use super::{check_found, create_new, fstat, is_regular, kind_of, open, refused, stat, Identity};

/// The trace file the shim made: its descriptor (read-write, locked, out
/// of the program's way), identity and path, and why that path is not the
/// one asked for, when it is not.
pub struct Trace {
    pub fd: i32,
    pub id: Identity,
    pub path: CString,
    pub instead: Option<String>,
}

/// Creates the binary trace file, mode 0600, for its shared mapping,
/// never truncating a file: another process may have it mapped (a
/// truncated mapping kills its process with SIGBUS at its next record).
///
/// The file is created `O_CREAT | O_EXCL | O_NOFOLLOW` and locked
/// (`flock`, held while the descriptor is, so by the live process that
/// traces into it, dropped by the kernel when it ends) before its header
/// is written. A file found at the path is replaced (unlinked, created
/// anew) only when it is a trace (its magic), the effective user's with no
/// group or other write, and no one holds its lock: a finished run's
/// trace. Otherwise (a live process's trace, as when a traced program
/// execs another or two programs share the path; a link; a file of
/// someone else's or not a trace) it is left as it is and the process
/// traces to `PATH.<pid>`, the caller saying so with `instead`'s reason.
pub fn create_trace(path: &CStr) -> io::Result<Trace> {
    let why = match create_trace_at(path)? {
        Ok((fd, id)) => {
            return Ok(Trace {
                fd,
                id,
                path: path.to_owned(),
                instead: None,
            })
        }
        Err(why) => why,
    };
    let mut derived = path.to_bytes().to_vec();
    // SAFETY: getpid cannot fail.
    derived.extend_from_slice(format!(".{}", unsafe { libc::getpid() }).as_bytes());
    let derived = CString::new(derived).expect("no NUL: a C string and digits");
    match create_trace_at(&derived)? {
        Ok((fd, id)) => Ok(Trace {
            fd,
            id,
            path: derived,
            instead: Some(why),
        }),
        Err(also) => Err(refused(&format!(
            "{why}; and {}: {also}",
            derived.to_string_lossy()
        ))),
    }
}

/// `create_trace` at one path: the descriptor, or why the path is taken.
fn create_trace_at(path: &CStr) -> io::Result<Result<(i32, Identity), String>> {
    let flags =
        libc::O_RDWR | libc::O_CLOEXEC | libc::O_NOFOLLOW | libc::O_NONBLOCK | libc::O_NOCTTY;
    for _ in 0..4 {
        if let Some((fd, id)) = create_new(path, flags)? {
            // Locked before the header (the magic) is written: a process
            // that finds the magic finds the lock held.
            // SAFETY: flock on our own descriptor.
            unsafe { libc::flock(fd.0, libc::LOCK_EX | libc::LOCK_NB) };
            // SAFETY: fcntl on our own open descriptor; no pointers.
            let high = unsafe { libc::fcntl(fd.0, libc::F_DUPFD_CLOEXEC, 100) };
            if high >= 0 {
                // The lock belongs to the open file, which the copy shares.
                drop(fd);
                return Ok(Ok((high, id)));
            }
            let raw = fd.0;
            std::mem::forget(fd);
            return Ok(Ok((raw, id)));
        }
        match stale_trace(path)? {
            Stale::Removed | Stale::Gone => continue,
            Stale::Kept(why) => return Ok(Err(why)),
        }
    }
    Ok(Err("created and removed by others meanwhile".into()))
}

enum Stale {
    /// A finished run's trace, unlinked.
    Removed,
    /// Nothing there any more.
    Gone,
    /// Left as it is, and why.
    Kept(String),
}

/// What is at a trace path that `O_EXCL` found taken (see `create_trace`).
fn stale_trace(path: &CStr) -> io::Result<Stale> {
    let Some(st) = stat(path, false)? else {
        return Ok(Stale::Gone);
    };
    if st.st_mode & libc::S_IFMT == libc::S_IFLNK {
        return Ok(Stale::Kept("a symbolic link, not followed".into()));
    }
    if !is_regular(&st) {
        return Ok(Stale::Kept(format!(
            "{}, not a regular file",
            kind_of(st.st_mode)
        )));
    }
    let fd = match open(
        path,
        libc::O_RDONLY | libc::O_CLOEXEC | libc::O_NOFOLLOW | libc::O_NONBLOCK | libc::O_NOCTTY,
        0,
    ) {
        Ok(fd) => fd,
        Err(e) if e.raw_os_error() == Some(libc::ENOENT) => return Ok(Stale::Gone),
        Err(e) => return Ok(Stale::Kept(format!("cannot open it to check it: {e}"))),
    };
    let st = fstat(fd.0)?;
    if let Err(e) = check_found(&st) {
        return Ok(Stale::Kept(e.to_string()));
    }
    let mut magic = [0u8; 8];
    // SAFETY: reads at most 8 bytes into `magic`.
    let n = unsafe { libc::pread(fd.0, magic.as_mut_ptr().cast(), 8, 0) };
    if n != 8 || magic != trace_format::MAGIC {
        return Ok(Stale::Kept("not a trace file (left as it is)".into()));
    }
    // SAFETY: flock on our own descriptor.
    if unsafe { libc::flock(fd.0, libc::LOCK_EX | libc::LOCK_NB) } != 0 {
        return Ok(Stale::Kept("the trace of a live process".into()));
    }
    // Still the file checked (not swapped meanwhile)?
    match stat(path, false)? {
        Some(now) if now.st_dev == st.st_dev && now.st_ino == st.st_ino => {}
        _ => return Ok(Stale::Gone),
    }
    // Unlinked, not truncated: whoever still maps it keeps their pages.
    // SAFETY: path is NUL-terminated.
    if unsafe { libc::unlink(path.as_ptr()) } != 0 {
        let e = io::Error::last_os_error();
        return Ok(Stale::Kept(format!(
            "a finished trace that cannot be replaced: {e}"
        )));
    }
    Ok(Stale::Removed)
}

/// Opens the trace file again (the program closed the shim's descriptor):
/// never through a link, never creating; the caller checks its identity.
/// Takes the lock again (the program's close dropped it).
pub fn reopen_trace(path: &CStr) -> io::Result<i32> {
    let fd = open(
        path,
        libc::O_RDWR | libc::O_CLOEXEC | libc::O_NOFOLLOW | libc::O_NONBLOCK | libc::O_NOCTTY,
        0,
    )?;
    // SAFETY: flock on our own descriptor.
    unsafe { libc::flock(fd.0, libc::LOCK_EX | libc::LOCK_NB) };
    let raw = fd.0;
    std::mem::forget(fd);
    Ok(raw)
}
