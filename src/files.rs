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
//! - the JSON report is written to an unpredictable temporary created with
//!   `O_EXCL` beside its target, then renamed over it;
//! - what the shim reads has a size limit.

use std::ffi::{CStr, CString, OsStr};
use std::io;
use std::os::unix::ffi::OsStrExt;

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

/// Opens (creating it, mode 0600) the log file for appending. Refuses a
/// symbolic link and anything but a regular file; never blocks. Returns
/// the descriptor (the caller keeps it for the life of the process) and
/// its identity.
pub fn open_log(path: &CStr) -> io::Result<(i32, Identity)> {
    let (fd, id) = open_regular(
        path,
        libc::O_WRONLY
            | libc::O_CREAT
            | libc::O_APPEND
            | libc::O_CLOEXEC
            | libc::O_NOFOLLOW
            | libc::O_NONBLOCK
            | libc::O_NOCTTY,
    )?;
    let raw = fd.0;
    std::mem::forget(fd);
    Ok((raw, id))
}

/// Creates (truncating, mode 0600) the binary trace file, open read-write
/// for its shared mapping; refuses a symbolic link and anything but a
/// regular file. The descriptor is numbered out of the program's way.
pub fn create_trace(path: &CStr) -> io::Result<(i32, Identity)> {
    let (fd, id) = open_regular(
        path,
        libc::O_RDWR
            | libc::O_CREAT
            | libc::O_TRUNC
            | libc::O_CLOEXEC
            | libc::O_NOFOLLOW
            | libc::O_NONBLOCK
            | libc::O_NOCTTY,
    )?;
    // SAFETY: fcntl on our own open descriptor; no pointers.
    let high = unsafe { libc::fcntl(fd.0, libc::F_DUPFD_CLOEXEC, 100) };
    if high >= 0 {
        drop(fd);
        return Ok((high, id));
    }
    let raw = fd.0;
    std::mem::forget(fd);
    Ok((raw, id))
}

/// Opens the trace file again (the program closed the shim's descriptor):
/// never through a link, never creating; the caller checks its identity.
pub fn reopen_trace(path: &CStr) -> io::Result<i32> {
    let fd = open(
        path,
        libc::O_RDWR | libc::O_CLOEXEC | libc::O_NOFOLLOW | libc::O_NONBLOCK | libc::O_NOCTTY,
        0,
    )?;
    let raw = fd.0;
    std::mem::forget(fd);
    Ok(raw)
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
