//! Files the shim opens in someone else's process.
//!
//! The paths come from the environment, so they may name anything: a FIFO
//! nobody reads (an `open` that blocks for ever), a device (`/dev/zero`, an
//! endless read), a symbolic link planted in a world-writable directory (an
//! overwrite of someone else's file). Every file the shim opens goes
//! through here, and the rules are:
//!
//! - only regular files: anything else is refused, with its kind named,
//!   before it is opened (opening a device can have side effects) and again
//!   after (`fstat`, in case it was swapped in between); opens are
//!   non-blocking so a FIFO swapped in cannot hang the program;
//! - files the shim writes are never reached through a symbolic link
//!   (`O_NOFOLLOW`), are created mode 0600 (reports and logs hold heap
//!   addresses) and are close-on-exec;
//! - a file found at such a path (the shim did not create it) is used only
//!   if it is a regular file owned by the effective user and not writable
//!   by group or others: one planted by someone else in a shared directory
//!   is refused, never written, never changed;
//! - the trace file, which is mapped shared, is never truncated: it is
//!   created `O_EXCL`, locked (`flock`) for the life of its process, and
//!   a trace found at its path is replaced (unlinked, made anew) only when
//!   no live process holds it; otherwise the process traces to
//!   `PATH.<pid>` (see [`create_trace`]);
//! - the JSON report is written to an unpredictable temporary created with
//!   `O_EXCL` beside its target, then renamed over it;
//! - what the shim reads has a size limit.

use std::ffi::{CStr, CString, OsStr};
use std::io;
use std::os::unix::ffi::OsStrExt;

mod trace;

pub use trace::{create_trace, reopen_trace, Trace};

/// The largest suppression file the shim reads.
pub const SUPPRESS_LIMIT: u64 = 1 << 20;

/// What a file system object is, for an error message.
fn kind_of(mode: libc::mode_t) -> &'static str {
    match mode & libc::S_IFMT {
        libc::S_IFREG => "a regular file",
        libc::S_IFDIR => "a directory",
        libc::S_IFIFO => "a FIFO",
        libc::S_IFCHR => "a character device",
        libc::S_IFBLK => "a block device",
        libc::S_IFSOCK => "a socket",
        libc::S_IFLNK => "a symbolic link",
        _ => "not a regular file",
    }
}

fn refused(what: &str) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidInput, what.to_string())
}

fn not_regular(mode: libc::mode_t) -> io::Error {
    refused(&format!("{}, not a regular file; refused", kind_of(mode)))
}

fn cstring(path: &OsStr) -> io::Result<CString> {
    CString::new(path.as_bytes()).map_err(|_| refused("the path contains a NUL byte"))
}

/// `stat` (following links when `follow`), or `None` if nothing is there.
fn stat(path: &CStr, follow: bool) -> io::Result<Option<libc::stat>> {
    // SAFETY: all-zero is a valid `struct stat`; it is only written.
    let mut st: libc::stat = unsafe { std::mem::zeroed() };
    // SAFETY: path is NUL-terminated; st is writable.
    let r = unsafe {
        if follow {
            libc::stat(path.as_ptr(), &mut st)
        } else {
            libc::lstat(path.as_ptr(), &mut st)
        }
    };
    if r == 0 {
        return Ok(Some(st));
    }
    let e = io::Error::last_os_error();
    if e.raw_os_error() == Some(libc::ENOENT) {
        Ok(None)
    } else {
        Err(e)
    }
}

fn fstat(fd: i32) -> io::Result<libc::stat> {
    // SAFETY: all-zero is a valid `struct stat`; it is only written.
    let mut st: libc::stat = unsafe { std::mem::zeroed() };
    // SAFETY: st is writable; a bad fd is reported as EBADF.
    if unsafe { libc::fstat(fd, &mut st) } == 0 {
        Ok(st)
    } else {
        Err(io::Error::last_os_error())
    }
}

fn is_regular(st: &libc::stat) -> bool {
    st.st_mode & libc::S_IFMT == libc::S_IFREG
}

/// A descriptor the shim opened and owns; closed on drop.
struct Fd(i32);

impl Drop for Fd {
    fn drop(&mut self) {
        // SAFETY: the descriptor is ours and still open.
        unsafe { libc::close(self.0) };
    }
}

fn open(path: &CStr, flags: i32, mode: libc::c_uint) -> io::Result<Fd> {
    // SAFETY: path is NUL-terminated; flags and mode are plain integers.
    let fd = unsafe { libc::open(path.as_ptr(), flags, mode) };
    if fd >= 0 {
        return Ok(Fd(fd));
    }
    let e = io::Error::last_os_error();
    // O_NOFOLLOW on a link fails with ELOOP: say what it was.
    if e.raw_os_error() == Some(libc::ELOOP) && flags & libc::O_NOFOLLOW != 0 {
        return Err(refused("a symbolic link; refused (not followed)"));
    }
    Err(e)
}

/// Which file a descriptor refers to: device and inode.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Identity {
    pub dev: u64,
    pub ino: u64,
}

impl Identity {
    /// The file behind `fd`, or `None` if `fd` is not open.
    pub fn of(fd: i32) -> Option<Identity> {
        fstat(fd).ok().map(|st| Identity {
            dev: st.st_dev,
            ino: st.st_ino,
        })
    }
}

/// Opens `path` with `flags` (creating it mode 0600 where they say so),
/// refusing anything but a regular file, checked before opening (never
/// blocks on a FIFO) and after (the file opened).
fn open_regular(path: &CStr, flags: i32) -> io::Result<(Fd, Identity)> {
    if let Some(st) = stat(path, false)? {
        if !is_regular(&st) {
            return Err(not_regular(st.st_mode));
        }
    }
    let fd = open(path, flags, 0o600)?;
    let st = fstat(fd.0)?;
    if !is_regular(&st) {
        return Err(not_regular(st.st_mode));
    }
    let id = Identity {
        dev: st.st_dev,
        ino: st.st_ino,
    };
    Ok((fd, id))
}

/// Is a file found at a path the shim writes (one it did not create)
/// fit to write? Only a regular file of the effective user that neither
/// group nor others may write: anything else may be someone else's, who
/// could read the shim's output or write into it.
fn check_found(st: &libc::stat) -> io::Result<()> {
    if !is_regular(st) {
        return Err(not_regular(st.st_mode));
    }
    // SAFETY: geteuid cannot fail.
    let euid = unsafe { libc::geteuid() };
    if st.st_uid != euid {
        return Err(refused(&format!(
            "a file owned by uid {}, not by this process's user (uid {euid}); refused",
            st.st_uid
        )));
    }
    if st.st_mode & 0o022 != 0 {
        return Err(refused(&format!(
            "mode {:04o}: writable by group or others; refused",
            st.st_mode & 0o7777
        )));
    }
    Ok(())
}

/// Creates `path` with `flags | O_CREAT | O_EXCL` (mode 0600): `Ok(None)`
/// when something is there already.
fn create_new(path: &CStr, flags: i32) -> io::Result<Option<(Fd, Identity)>> {
    match open(path, flags | libc::O_CREAT | libc::O_EXCL, 0o600) {
        Ok(fd) => {
            let st = fstat(fd.0)?;
            let id = Identity {
                dev: st.st_dev,
                ino: st.st_ino,
            };
            Ok(Some((fd, id)))
        }
        Err(e) if e.raw_os_error() == Some(libc::EEXIST) => Ok(None),
        Err(e) => Err(e),
    }
}

/// Opens (creating it, mode 0600) the log file for appending. Refuses a
/// symbolic link, anything but a regular file, and a file found there that
/// is not the effective user's own or that group or others may write
/// (`check_found`); never blocks. Returns the descriptor (the caller keeps
/// it for the life of the process) and its identity.
pub fn open_log(path: &CStr) -> io::Result<(i32, Identity)> {
    let flags = libc::O_WRONLY
        | libc::O_APPEND
        | libc::O_CLOEXEC
        | libc::O_NOFOLLOW
        | libc::O_NONBLOCK
        | libc::O_NOCTTY;
    // A file removed between the two opens: try again, a few times.
    for _ in 0..4 {
        if let Some(st) = stat(path, false)? {
            if st.st_mode & libc::S_IFMT == libc::S_IFLNK {
                return Err(refused("a symbolic link; refused (not followed)"));
            }
        }
        if let Some((fd, id)) = create_new(path, flags)? {
            let raw = fd.0;
            std::mem::forget(fd);
            return Ok((raw, id));
        }
        let (fd, _) = match open_regular(path, flags) {
            Err(e) if e.raw_os_error() == Some(libc::ENOENT) => continue,
            r => r?,
        };
        let st = fstat(fd.0)?;
        check_found(&st)?;
        let id = Identity {
            dev: st.st_dev,
            ino: st.st_ino,
        };
        let raw = fd.0;
        std::mem::forget(fd);
        return Ok((raw, id));
    }
    Err(refused(
        "created and removed by someone else meanwhile; refused",
    ))
}

/// Refuses a library path that is not a regular file, before `dlopen`
/// opens it (a FIFO would block it for ever). Links are followed: library
/// paths are full of them.
pub fn check_loadable(path: &CStr) -> io::Result<()> {
    match stat(path, true)? {
        Some(st) if !is_regular(&st) => Err(not_regular(st.st_mode)),
        // A missing file is left to dlopen, which says so in its own words.
        _ => Ok(()),
    }
}

/// Reads a small regular file whole; refuses anything else, and a file
/// larger than `limit` bytes.
pub fn read_small(path: &OsStr, limit: u64) -> io::Result<Vec<u8>> {
    let c = cstring(path)?;
    let too_big = || refused(&format!("larger than the limit of {limit} bytes; refused"));
    match stat(&c, true)? {
        None => return Err(io::Error::from_raw_os_error(libc::ENOENT)),
        Some(st) if !is_regular(&st) => return Err(not_regular(st.st_mode)),
        Some(st) if st.st_size as u64 > limit => return Err(too_big()),
        Some(_) => {}
    }
    let fd = open(
        &c,
        libc::O_RDONLY | libc::O_CLOEXEC | libc::O_NONBLOCK | libc::O_NOCTTY,
        0,
    )?;
    let st = fstat(fd.0)?;
    if !is_regular(&st) {
        return Err(not_regular(st.st_mode));
    }
    // Read one byte past the limit to notice a file that grew meanwhile.
    let mut buf = vec![0u8; limit as usize + 1];
    let mut len = 0;
    while len < buf.len() {
        // SAFETY: the destination is the unfilled rest of `buf`.
        let n = unsafe { libc::read(fd.0, buf[len..].as_mut_ptr().cast(), buf.len() - len) };
        match n {
            0 => break,
            n if n > 0 => len += n as usize,
            _ => {
                let e = io::Error::last_os_error();
                if e.kind() != io::ErrorKind::Interrupted {
                    return Err(e);
                }
            }
        }
    }
    if len as u64 > limit {
        return Err(too_big());
    }
    buf.truncate(len);
    Ok(buf)
}

/// 64 unpredictable bits, for a temporary file's name.
fn random() -> u64 {
    let mut v = 0u64;
    // SAFETY: writes at most 8 bytes into v.
    let n = unsafe { libc::getrandom((&mut v as *mut u64).cast(), 8, libc::GRND_NONBLOCK) };
    if n == 8 {
        return v;
    }
    // No entropy yet (early boot): the name is still checked with O_EXCL,
    // only less unpredictable.
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: ts is a valid out-pointer.
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut ts) };
    let stack = &ts as *const _ as u64;
    (ts.tv_nsec as u64)
        ^ (ts.tv_sec as u64).rotate_left(32)
        ^ stack.rotate_left(17)
        ^ u64::from(std::process::id()).rotate_left(48)
}

/// A file written whole and then put in place with `rename`, so a reader
/// never sees half of it and nothing else is ever written through its name.
/// Dropped without [`AtomicFile::commit`], the temporary is removed.
pub struct AtomicFile {
    fd: Fd,
    tmp: CString,
    path: CString,
    committed: bool,
}

impl AtomicFile {
    /// Creates the temporary beside `path`: `.<name>.<random>.tmp`, with
    /// `O_CREAT | O_EXCL | O_NOFOLLOW`, mode 0600. Refuses a `path` that
    /// exists and is not a regular file (a link, FIFO, device, directory).
    pub fn create(path: &OsStr) -> io::Result<AtomicFile> {
        let c = cstring(path)?;
        if let Some(st) = stat(&c, false)? {
            if !is_regular(&st) {
                return Err(not_regular(st.st_mode));
            }
        }
        let bytes = path.as_bytes();
        let (dir, name) = match bytes.iter().rposition(|&b| b == b'/') {
            Some(i) => (&bytes[..=i], &bytes[i + 1..]),
            None => (&b""[..], bytes),
        };
        if name.is_empty() {
            return Err(refused("names a directory; refused"));
        }
        let mut last = None;
        for _ in 0..16 {
            let mut t = dir.to_vec();
            t.push(b'.');
            t.extend_from_slice(name);
            t.extend_from_slice(format!(".{:016x}.tmp", random()).as_bytes());
            let tmp = CString::new(t).expect("no NUL: checked above");
            match open(
                &tmp,
                libc::O_WRONLY
                    | libc::O_CREAT
                    | libc::O_EXCL
                    | libc::O_NOFOLLOW
                    | libc::O_CLOEXEC
                    | libc::O_NOCTTY,
                0o600,
            ) {
                Ok(fd) => {
                    return Ok(AtomicFile {
                        fd,
                        tmp,
                        path: c,
                        committed: false,
                    })
                }
                Err(e) if e.raw_os_error() == Some(libc::EEXIST) => last = Some(e),
                Err(e) => return Err(e),
            }
        }
        Err(last.unwrap_or_else(|| io::Error::from_raw_os_error(libc::EEXIST)))
    }

    /// Renames the temporary over the target.
    pub fn commit(mut self) -> io::Result<()> {
        // SAFETY: both paths are NUL-terminated.
        if unsafe { libc::rename(self.tmp.as_ptr(), self.path.as_ptr()) } != 0 {
            return Err(io::Error::last_os_error());
        }
        self.committed = true;
        Ok(())
    }
}

impl io::Write for AtomicFile {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        // SAFETY: buf is valid for buf.len() bytes.
        let n = unsafe { libc::write(self.fd.0, buf.as_ptr().cast(), buf.len()) };
        if n < 0 {
            Err(io::Error::last_os_error())
        } else {
            Ok(n as usize)
        }
    }

    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

impl Drop for AtomicFile {
    fn drop(&mut self) {
        if !self.committed {
            // SAFETY: tmp is NUL-terminated; it is the file this created.
            unsafe { libc::unlink(self.tmp.as_ptr()) };
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write as _;
    use std::os::unix::fs::PermissionsExt;

    fn scratch(name: &str) -> std::path::PathBuf {
        let d = std::env::temp_dir().join(format!("ibvshim-files-{}-{name}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        std::fs::create_dir_all(&d).unwrap();
        d
    }

    #[test]
    fn an_atomic_file_replaces_the_target_mode_0600_and_leaves_no_temporary() {
        let d = scratch("atomic");
        let target = d.join("r.json");
        std::fs::write(&target, "old").unwrap();
        std::fs::set_permissions(&target, std::fs::Permissions::from_mode(0o644)).unwrap();
        let mut f = AtomicFile::create(target.as_os_str()).unwrap();
        f.write_all(b"new").unwrap();
        f.commit().unwrap();
        assert_eq!(std::fs::read_to_string(&target).unwrap(), "new");
        let mode = std::fs::metadata(&target).unwrap().permissions().mode();
        assert_eq!(mode & 0o777, 0o600);
        assert_eq!(std::fs::read_dir(&d).unwrap().count(), 1);
        // Dropped uncommitted: nothing left behind, target untouched.
        drop(AtomicFile::create(target.as_os_str()).unwrap());
        assert_eq!(std::fs::read_dir(&d).unwrap().count(), 1);
        std::fs::remove_dir_all(&d).unwrap();
    }

    #[test]
    fn links_fifos_and_devices_are_refused() {
        let d = scratch("refuse");
        let victim = d.join("victim");
        std::fs::write(&victim, "keep").unwrap();
        let link = d.join("link");
        std::os::unix::fs::symlink(&victim, &link).unwrap();
        let e = AtomicFile::create(link.as_os_str()).err().unwrap();
        assert!(e.to_string().contains("symbolic link"), "{e}");
        let e = open_log(&cstring(link.as_os_str()).unwrap()).err().unwrap();
        assert!(e.to_string().contains("symbolic link"), "{e}");
        assert_eq!(std::fs::read_to_string(&victim).unwrap(), "keep");
        let e = read_small(OsStr::new("/dev/zero"), 10).err().unwrap();
        assert!(e.to_string().contains("character device"), "{e}");
        let e = check_loadable(c"/dev/null").err().unwrap();
        assert!(e.to_string().contains("character device"), "{e}");
        std::fs::remove_dir_all(&d).unwrap();
    }

    #[test]
    fn a_found_log_is_used_only_if_it_is_the_users_own_and_not_group_writable() {
        let d = scratch("found");
        let log = d.join("log");
        let c = cstring(log.as_os_str()).unwrap();
        let (fd, _) = open_log(&c).unwrap();
        // SAFETY: the descriptor just opened.
        unsafe { libc::close(fd) };
        assert_eq!(
            std::fs::metadata(&log).unwrap().permissions().mode() & 0o777,
            0o600
        );
        let (fd, _) = open_log(&c).unwrap();
        // SAFETY: as above.
        unsafe { libc::close(fd) };
        std::fs::set_permissions(&log, std::fs::Permissions::from_mode(0o664)).unwrap();
        let e = open_log(&c).err().unwrap();
        assert!(
            e.to_string()
                .contains("mode 0664: writable by group or others"),
            "{e}"
        );
        std::fs::remove_dir_all(&d).unwrap();
    }

    /// A trace held by a live process (here: this one's first descriptor)
    /// is left to it: the next gets `PATH.<pid>`; once it is closed, the
    /// path's finished trace is replaced; a file that is not a trace is
    /// never replaced.
    #[test]
    fn a_live_trace_is_never_taken_over_and_a_finished_one_is_replaced() {
        let d = scratch("trace");
        let p = d.join("t");
        let c = cstring(p.as_os_str()).unwrap();
        let first = create_trace(&c).unwrap();
        assert_eq!(first.path.as_c_str(), c.as_c_str());
        assert!(first.instead.is_none());
        // SAFETY: writes 8 bytes to our own file.
        let n = unsafe { libc::pwrite(first.fd, trace_format::MAGIC.as_ptr().cast(), 8, 0) };
        assert_eq!(n, 8);
        let second = create_trace(&c).unwrap();
        assert_eq!(
            second.path.to_str().unwrap(),
            format!("{}.{}", p.display(), std::process::id())
        );
        assert_eq!(
            second.instead.as_deref(),
            Some("the trace of a live process")
        );
        // The first file, open without its lock (as a mapping keeps it).
        let kept = std::fs::File::open(&p).unwrap();
        // SAFETY: our own descriptors.
        unsafe {
            libc::close(first.fd);
            libc::close(second.fd);
        }
        let third = create_trace(&c).unwrap();
        assert_eq!(third.path.as_c_str(), c.as_c_str());
        assert!(third.instead.is_none());
        use std::os::unix::fs::MetadataExt;
        let old = kept.metadata().unwrap();
        assert_eq!((old.nlink(), old.len()), (0, 8), "unlinked, not truncated");
        assert_ne!(third.id.ino, old.ino());
        // SAFETY: our own descriptor.
        unsafe { libc::close(third.fd) };
        let other = d.join("notes");
        std::fs::write(&other, "not a trace").unwrap();
        std::fs::set_permissions(&other, std::fs::Permissions::from_mode(0o600)).unwrap();
        let t = create_trace(&cstring(other.as_os_str()).unwrap()).unwrap();
        assert!(t.instead.unwrap().contains("not a trace file"));
        assert_eq!(std::fs::read_to_string(&other).unwrap(), "not a trace");
        std::fs::remove_dir_all(&d).unwrap();
    }

    #[test]
    fn small_files_are_read_and_large_ones_refused() {
        let d = scratch("small");
        let f = d.join("s");
        std::fs::write(&f, "0123456789").unwrap();
        assert_eq!(read_small(f.as_os_str(), 10).unwrap(), b"0123456789");
        let e = read_small(f.as_os_str(), 9).err().unwrap();
        assert!(e.to_string().contains("limit of 9 bytes"), "{e}");
        std::fs::remove_dir_all(&d).unwrap();
    }
}
