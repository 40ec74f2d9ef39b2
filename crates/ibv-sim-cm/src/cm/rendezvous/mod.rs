//! The rendezvous between processes: a directory of Unix sockets per fabric,
//! `/dev/shm/ibv-sim-cm-<uid>-<fabric>` (`IBV_SIM_FABRIC`, as the sim's
//! segment; the temporary directory where there is no `/dev/shm`), mode
//! 0700. A bound id is a listening `SOCK_SEQPACKET` socket named by its
//! port space, address and port (`tcp-4-7f000001-7471`, `tcp-4-any-7471`);
//! a connection is one accepted socket, over which the CM's messages go
//! (`wire`); a peer that dies closes it, and the kernel says so (EOF).
//!
//! Safety against planted files: the directory is made 0700, opened
//! `O_DIRECTORY | O_NOFOLLOW` and used only if it is this user's and no one
//! else may enter it; sockets are reached through that open directory
//! (`/proc/self/fd/N/NAME`), each checked to be a socket of this user
//! before a connect, and each peer's credentials (`SO_PEERCRED`) must be
//! this user's.
//!
//! `engine`: the thread that accepts and reads these sockets.

pub mod engine;
pub mod wire;

use core::ffi::c_int;
use std::ffi::CString;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::sync::Arc;

use parking_lot::Mutex;

use crate::addr::Addr;
use crate::guard::{check, errno};

static DIR: Mutex<Option<Arc<OwnedFd>>> = Mutex::new(None);

fn fabric_name() -> Result<String, c_int> {
    let name = std::env::var("IBV_SIM_FABRIC").unwrap_or_else(|_| "default".to_string());
    let ok = !name.is_empty()
        && name.len() < 64
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-' || b == b'.');
    if ok {
        Ok(name)
    } else {
        Err(libc::EINVAL)
    }
}

/// The directory's path.
pub fn dir_path() -> Result<std::path::PathBuf, c_int> {
    let base = if std::path::Path::new("/dev/shm").is_dir() {
        std::path::PathBuf::from("/dev/shm")
    } else {
        std::env::temp_dir()
    };
    // SAFETY: plain system call.
    let uid = unsafe { libc::geteuid() };
    Ok(base.join(format!("ibv-sim-cm-{uid}-{}", fabric_name()?)))
}

fn open_dir() -> Result<Arc<OwnedFd>, c_int> {
    let path = dir_path()?;
    let c = CString::new(path.as_os_str().as_encoded_bytes()).map_err(|_| libc::EINVAL)?;
    // SAFETY: a NUL-terminated path.
    if unsafe { libc::mkdir(c.as_ptr(), 0o700) } != 0 && errno() != libc::EEXIST {
        return Err(errno());
    }
    // SAFETY: as above.
    let fd = check(unsafe {
        libc::open(
            c.as_ptr(),
            libc::O_DIRECTORY | libc::O_NOFOLLOW | libc::O_CLOEXEC | libc::O_RDONLY,
        )
    })?;
    // SAFETY: a new descriptor we own.
    let fd = unsafe { OwnedFd::from_raw_fd(fd) };
    // SAFETY: all-zero is a valid stat buffer.
    let mut st: libc::stat = unsafe { core::mem::zeroed() };
    // SAFETY: our descriptor, a writable buffer.
    check(unsafe { libc::fstat(fd.as_raw_fd(), &mut st) })?;
    // SAFETY: plain system call.
    let me = unsafe { libc::geteuid() };
    if st.st_mode & libc::S_IFMT != libc::S_IFDIR || st.st_uid != me || st.st_mode & 0o077 != 0 {
        return Err(libc::EACCES);
    }
    Ok(Arc::new(fd))
}

/// The open directory (opened again if it was removed meanwhile).
fn dir(fresh: bool) -> Result<Arc<OwnedFd>, c_int> {
    let mut d = DIR.lock();
    if fresh || d.is_none() {
        *d = Some(open_dir()?);
    }
    Ok(d.as_ref().unwrap().clone())
}

fn path_in(dir: &OwnedFd, name: &str) -> libc::sockaddr_un {
    // SAFETY: all-zero is a valid sockaddr_un.
    let mut sun: libc::sockaddr_un = unsafe { core::mem::zeroed() };
    sun.sun_family = libc::AF_UNIX as u16;
    let p = format!("/proc/self/fd/{}/{name}", dir.as_raw_fd());
    for (i, b) in p.bytes().take(sun.sun_path.len() - 1).enumerate() {
        sun.sun_path[i] = b as libc::c_char;
    }
    sun
}

fn seqpacket() -> Result<OwnedFd, c_int> {
    // SAFETY: plain system call.
    let fd = check(unsafe {
        libc::socket(libc::AF_UNIX, libc::SOCK_SEQPACKET | libc::SOCK_CLOEXEC, 0)
    })?;
    // SAFETY: a new descriptor we own.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

const SUN_LEN: libc::socklen_t = core::mem::size_of::<libc::sockaddr_un>() as libc::socklen_t;

/// The peer of a connected socket is this user.
pub fn peer_is_me(fd: c_int) -> bool {
    // SAFETY: all-zero is a valid ucred.
    let mut cred: libc::ucred = unsafe { core::mem::zeroed() };
    let mut len = core::mem::size_of::<libc::ucred>() as libc::socklen_t;
    // SAFETY: reads the peer's credentials into `cred`.
    let r = unsafe {
        libc::getsockopt(
            fd,
            libc::SOL_SOCKET,
            libc::SO_PEERCRED,
            (&raw mut cred).cast(),
            &mut len,
        )
    };
    // SAFETY: plain system call.
    r == 0 && cred.uid == unsafe { libc::geteuid() }
}

fn name_of(ps: u32, a: &Addr) -> String {
    let ps = match ps {
        rdmacm_abi::RDMA_PS_TCP => "tcp",
        rdmacm_abi::RDMA_PS_UDP => "udp",
        rdmacm_abi::RDMA_PS_IB => "ib",
        _ => "ipoib",
    };
    format!("{ps}-{}", a.key())
}

/// Whether a socket file of this user is at `name` in `dir`.
fn is_my_socket(dir: &OwnedFd, name: &str) -> bool {
    let Ok(c) = CString::new(name) else {
        return false;
    };
    // SAFETY: all-zero is a valid stat buffer.
    let mut st: libc::stat = unsafe { core::mem::zeroed() };
    // SAFETY: our directory, a NUL-terminated name, a writable buffer.
    let r = unsafe {
        libc::fstatat(
            dir.as_raw_fd(),
            c.as_ptr(),
            &mut st,
            libc::AT_SYMLINK_NOFOLLOW,
        )
    };
    // SAFETY: plain system call.
    r == 0 && st.st_mode & libc::S_IFMT == libc::S_IFSOCK && st.st_uid == unsafe { libc::geteuid() }
}

fn try_connect(dir: &OwnedFd, name: &str) -> Result<OwnedFd, c_int> {
    if !is_my_socket(dir, name) {
        return Err(libc::ENOENT);
    }
    let s = seqpacket()?;
    let sun = path_in(dir, name);
    // SAFETY: our socket, a valid sockaddr_un.
    check(unsafe { libc::connect(s.as_raw_fd(), (&raw const sun).cast(), SUN_LEN) })?;
    if !peer_is_me(s.as_raw_fd()) {
        return Err(libc::EACCES);
    }
    Ok(s)
}

/// Binds `addr` in port space `ps` (port 0: a free one is chosen) and
/// listens at once (a request to an id that does not listen is rejected by
/// the engine). A name left by a process that died is taken over.
pub fn bind(ps: u32, addr: Addr) -> Result<(Arc<OwnedFd>, String, Addr), c_int> {
    let mut fresh = false;
    for attempt in 0..200 {
        let a = if addr.port == 0 {
            addr.with_port(32768 + (crate::addr::random_u32() % 28000) as u16)
        } else {
            addr
        };
        let d = dir(fresh)?;
        let name = name_of(ps, &a);
        let s = seqpacket()?;
        let sun = path_in(&d, &name);
        // SAFETY: our socket, a valid sockaddr_un.
        let r = unsafe { libc::bind(s.as_raw_fd(), (&raw const sun).cast(), SUN_LEN) };
        if r == 0 {
            // SAFETY: our bound socket.
            check(unsafe { libc::listen(s.as_raw_fd(), 128) })?;
            return Ok((Arc::new(s), name, a));
        }
        match errno() {
            libc::ENOENT if !fresh => fresh = true,
            libc::EADDRINUSE => {
                match try_connect(&d, &name) {
                    Err(libc::ECONNREFUSED) => {
                        // Its owner is gone: take the name over.
                        if let Ok(c) = CString::new(name.as_str()) {
                            // SAFETY: our directory, a NUL-terminated name.
                            unsafe { libc::unlinkat(d.as_raw_fd(), c.as_ptr(), 0) };
                        }
                    }
                    _ if addr.port != 0 => return Err(libc::EADDRINUSE),
                    _ => {}
                }
                if attempt > 100 && addr.port != 0 {
                    return Err(libc::EADDRINUSE);
                }
            }
            e => return Err(e),
        }
    }
    Err(libc::EADDRINUSE)
}

/// Removes a bound id's socket file (and the directory, once empty).
pub fn unbind(_fd: &OwnedFd, name: &str) {
    let Ok(d) = dir(false) else {
        return;
    };
    if let Ok(c) = CString::new(name) {
        // SAFETY: our directory, a NUL-terminated name.
        unsafe { libc::unlinkat(d.as_raw_fd(), c.as_ptr(), 0) };
    }
}

/// How long a connection request looks for a listener before it counts
/// as sent to nobody: the REQ's flight to the peer's CM, during which a
/// server that is re-creating its listener (perftest does, between its
/// control and data connections) binds again.
const LISTENER_GRACE: std::time::Duration = std::time::Duration::from_millis(250);

/// Connects to whoever bound `dst` in `ps`: the address itself, else the
/// wildcard of its family, else (IPv4) the IPv6 wildcard. `Err(ENOENT)`:
/// nobody listens there, after [`LISTENER_GRACE`] (the REJ of reason 8 the
/// kernel's CM would get).
pub fn connect(ps: u32, dst: Addr) -> Result<OwnedFd, c_int> {
    let deadline = std::time::Instant::now() + LISTENER_GRACE;
    loop {
        match connect_once(ps, dst) {
            Err(libc::ENOENT) if std::time::Instant::now() < deadline => {
                std::thread::sleep(std::time::Duration::from_millis(2));
            }
            r => return r,
        }
    }
}

fn connect_once(ps: u32, dst: Addr) -> Result<OwnedFd, c_int> {
    let d = dir(false)?;
    let mut names = vec![
        name_of(ps, &dst),
        name_of(ps, &Addr::any(dst.family()).with_port(dst.port)),
    ];
    if dst.ip.is_ipv4() {
        names.push(name_of(ps, &Addr::any(libc::AF_INET6).with_port(dst.port)));
    }
    for n in names {
        match try_connect(&d, &n) {
            Ok(s) => return Ok(s),
            Err(libc::ENOENT) | Err(libc::ECONNREFUSED) => continue,
            Err(e) => return Err(e),
        }
    }
    Err(libc::ENOENT)
}
