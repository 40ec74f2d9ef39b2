//! The fabric: processes of one user on one machine that use the sim, joined
//! through one shared-memory segment so that their QPs reach each other.
//!
//! The segment is `/dev/shm/ibv-sim-<uid>-<name>` (`IBV_SIM_FABRIC`, default
//! `default`; the temporary directory where there is no `/dev/shm`), mode
//! 0600, opened with `O_NOFOLLOW`, refused unless a private regular file
//! of this user. It holds:
//!
//! - a header (magic, version, layout) checked on every attach;
//! - a table of process slots: a token (pid and a generation) and the
//!   process's start time, so a dead process (or a reused pid) is told
//!   from a live one without any lock it could have held;
//! - a table of ports (port GUID -> fabric-wide LID, with the slots using it);
//! - the QP table: QP number -> owning slot and generation, claimed with
//!   one CAS, so QP numbers are unique across the fabric;
//! - the multicast groups (`mcast`): MGID -> the slots with a QP attached;
//! - one inbound ring per slot (`ring`), into which every other process
//!   writes requests and responses (`wire`).
//!
//! Each process executes what arrives in its own ring against its own
//! memory (its progress engine): from `ibv_poll_cq`, and from a background
//! thread for a process that is not polling (the passive side of RDMA
//! READ / WRITE / atomics, or one blocked on a completion channel).
//!
//! Attaching (the first `ibv_open_device`) takes an `flock` on the segment
//! (released by the kernel if the holder dies), reclaims the slots of dead
//! processes, claims a slot and registers the ports; the last
//! `ibv_close_device` gives the slot back, or the process's exit when a
//! context is left open (`attach::at_exit`), and the last process out
//! removes the file; so does a process that created it and could not map
//! it (`RLIMIT_AS`). Nothing else takes a lock that lives in the segment.
//!
//! This module: the segment and its layout. `attach`: liveness, joining and
//! leaving; `qpn`: fabric-wide QP numbers; `mcast`: multicast groups; `progress`: sending and the
//! progress engine; [`ring`], [`wire`]: the rings and the message format.

mod attach;
mod limits;
mod mcast;
mod progress;
mod qpn;
pub mod ring;
pub mod wire;

pub use attach::*;
pub use mcast::*;
pub use progress::*;
pub use qpn::*;

use core::sync::atomic::{AtomicBool, AtomicPtr, AtomicU32, AtomicU64, Ordering};
use std::collections::{HashMap, VecDeque};
use std::ffi::CString;
use std::sync::Arc;

use parking_lot::Mutex;

use crate::device::SimDevice;
use ring::{Ring, CHUNK, RING_BYTES};
use wire::Wire;

/// The variable naming the fabric.
pub const ENV_FABRIC: &str = "IBV_SIM_FABRIC";

const MAGIC: u64 = u64::from_le_bytes(*b"IBVSIMFB");
/// Bumped on any change of the segment's layout or protocol.
pub const VERSION: u32 = 4;

const MAX_PROCS: usize = 128;
const MAX_PORTS: usize = 1024;
/// The QP table: twice the largest `max_qp` a profile advertises, so two
/// devices of the largest kind fit (8 bytes an entry: 16 MiB, of a sparse
/// file whose pages cost memory only once QP numbers reach them).
const MAX_QPS: usize = 1 << 21;
const _: () = assert!(MAX_QPS >= 2 * crate::profile::LARGEST_MAX_QP as usize);

const HDR_BYTES: usize = 4096;
const PROCS_OFF: usize = HDR_BYTES;
const PORTS_OFF: usize = PROCS_OFF + MAX_PROCS * 64;
const QPS_OFF: usize = PORTS_OFF + MAX_PORTS * 32;
const DEVS_OFF: usize = QPS_OFF + MAX_QPS * 8;
const MCAST_OFF: usize = DEVS_OFF + limits::MAX_DEVS * limits::DEV_BYTES;
const RINGS_OFF: usize =
    (MCAST_OFF + mcast::MAX_GROUPS * mcast::GROUP_BYTES).next_multiple_of(4096);
const TOTAL: usize = RINGS_OFF + MAX_PROCS * RING_BYTES;

/// What the header pins besides the version: the layout constants.
const LAYOUT: [u32; 6] = [
    MAX_PROCS as u32,
    MAX_PORTS as u32,
    MAX_QPS as u32,
    ring::SLOTS as u32,
    ring::SLOT_SIZE as u32,
    core::mem::size_of::<Wire>() as u32,
];

#[repr(C)]
struct Header {
    magic: AtomicU64,
    version: u32,
    _r: u32,
    size: u64,
    layout: [u32; 6],
    next_qpn: AtomicU32,
    next_gen: AtomicU32,
}

#[repr(C, align(64))]
struct Proc {
    /// `generation << 32 | pid`; 0 when free.
    token: AtomicU64,
    /// The process's start time (`/proc/PID/stat`, clock ticks since boot).
    start: AtomicU64,
}

#[repr(C)]
struct Port {
    guid: AtomicU64,
    lid: AtomicU32,
    _r: u32,
    /// Bit i: slot i uses this port.
    owners: [AtomicU64; 2],
}

const _: () = assert!(core::mem::size_of::<Proc>() == 64);
const _: () = assert!(core::mem::size_of::<Port>() == 32);
const _: () = assert!(core::mem::size_of::<Header>() <= HDR_BYTES);

/// Where a message goes: a process slot, as long as it holds `token`.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub struct Dest {
    pub slot: u32,
    pub token: u64,
}

/// The mapped segment (kept for the life of the process once mapped, so
/// no thread ever reads through an unmapped pointer).
struct Segment {
    base: usize,
    path: CString,
    /// The file's inode: the last process to leave a fabric removes the
    /// file, and whoever still holds the old mapping must notice.
    ino: u64,
}

/// Why the attach lock was not taken.
enum LockError {
    /// The file was removed (or replaced) since this mapping was made.
    Stale,
    Other(String),
}

impl Segment {
    fn hdr(&self) -> &Header {
        // SAFETY: the mapping is TOTAL bytes long and never unmapped; the
        // header's fields are atomics or integers written before `magic`.
        unsafe { &*(self.base as *const Header) }
    }

    fn proc_(&self, slot: usize) -> &Proc {
        // SAFETY: inside the mapping; all atomics.
        unsafe { &*((self.base + PROCS_OFF + slot * 64) as *const Proc) }
    }

    fn port(&self, i: usize) -> &Port {
        // SAFETY: inside the mapping; all atomics.
        unsafe { &*((self.base + PORTS_OFF + i * 32) as *const Port) }
    }

    fn qp(&self, i: usize) -> &AtomicU64 {
        // SAFETY: inside the mapping; accessed atomically only.
        unsafe { &*((self.base + QPS_OFF + i * 8) as *const AtomicU64) }
    }

    fn ring(&self, slot: usize) -> Ring {
        // SAFETY: each ring is RING_BYTES inside the never-unmapped mapping.
        unsafe { Ring::at(self.base + RINGS_OFF + slot * RING_BYTES) }
    }

    /// Runs `f` under the segment's attach lock (an `flock` on a fresh
    /// descriptor, so a forked child never shares its parent's lock), if
    /// the path still names this mapping's file.
    fn locked<R>(&self, f: impl FnOnce() -> R) -> Result<R, LockError> {
        // SAFETY: plain system calls on a path we own; results checked.
        let fd = unsafe {
            libc::open(
                self.path.as_ptr(),
                libc::O_RDWR | libc::O_NOFOLLOW | libc::O_CLOEXEC,
            )
        };
        if fd < 0 {
            return Err(match crate::guard::errno() {
                libc::ENOENT => LockError::Stale,
                _ => LockError::Other(format!(
                    "cannot open {}: {}",
                    self.path_str(),
                    last_os_error()
                )),
            });
        }
        let unlock = || {
            // SAFETY: fd is ours; closing it drops the lock too.
            unsafe {
                libc::flock(fd, libc::LOCK_UN);
                libc::close(fd)
            };
        };
        // SAFETY: fd is ours.
        while unsafe { libc::flock(fd, libc::LOCK_EX) } != 0 {
            if crate::guard::errno() != libc::EINTR {
                unlock();
                return Err(LockError::Other(format!("cannot lock {}", self.path_str())));
            }
        }
        // SAFETY: stat buffers are plain data, filled by the kernel.
        let (mut a, mut b): (libc::stat, libc::stat) = unsafe { core::mem::zeroed() };
        // SAFETY: as above.
        let same = unsafe {
            libc::fstat(fd, &mut a) == 0
                && libc::stat(self.path.as_ptr(), &mut b) == 0
                && a.st_ino == b.st_ino
                && a.st_ino == self.ino
        };
        if !same {
            unlock();
            return Err(LockError::Stale);
        }
        let r = f();
        unlock();
        Ok(r)
    }

    /// Whether no live process holds a slot (dead ones are reclaimed).
    fn reclaim_dead(&self) -> bool {
        let mut empty = true;
        for i in 0..MAX_PROCS {
            if self.proc_(i).token.load(Ordering::Acquire) != 0 {
                if slot_alive(self, i) {
                    empty = false;
                } else {
                    self.proc_(i).token.store(0, Ordering::Release);
                    ports_clear_owner(self, i);
                    self.clear_counts(i);
                }
            }
        }
        empty
    }

    fn path_str(&self) -> String {
        self.path.to_string_lossy().into_owned()
    }
}

fn last_os_error() -> std::io::Error {
    std::io::Error::last_os_error()
}

/// The fabric's name: `IBV_SIM_FABRIC`, or `default`.
pub fn fabric_name() -> Result<String, String> {
    match std::env::var(ENV_FABRIC) {
        Err(_) => Ok("default".into()),
        Ok(s) if s.is_empty() => Ok("default".into()),
        Ok(s) => {
            if s.len() > 64
                || !s
                    .bytes()
                    .all(|b| b.is_ascii_alphanumeric() || b"._-".contains(&b))
                || s.starts_with('.')
            {
                Err(format!(
                    "invalid {ENV_FABRIC}={s:?}: use up to 64 letters, digits, '.', '_', '-'"
                ))
            } else {
                Ok(s)
            }
        }
    }
}

/// The segment's path for this user and fabric name.
pub fn segment_path() -> Result<String, String> {
    // SAFETY: getuid cannot fail.
    let uid = unsafe { libc::getuid() };
    // /dev/shm where there is one (containers may lack it): the temporary
    // directory otherwise; the file's owner and mode are checked either way.
    let dir = if std::path::Path::new("/dev/shm").is_dir() {
        std::path::PathBuf::from("/dev/shm")
    } else {
        std::env::temp_dir()
    };
    Ok(format!(
        "{}/ibv-sim-{uid}-{}",
        dir.display(),
        fabric_name()?
    ))
}

/// The mapped segment (leaked: a mapping is never unmapped, so no thread
/// can read through a dangling pointer; a stale one is only replaced).
static SEGMENT: AtomicPtr<Segment> = AtomicPtr::new(core::ptr::null_mut());
static SEGMENT_INIT: Mutex<()> = Mutex::new(());

fn check_header(h: &[u8], path: &str) -> Result<bool, String> {
    let magic = u64::from_le_bytes(h[0..8].try_into().unwrap_or_default());
    if magic == 0 {
        // Never finished by its creator (which died holding the lock).
        return Ok(false);
    }
    if magic != MAGIC {
        return Err(format!(
            "{path} is not an ibv-sim fabric segment (bad magic): it is corrupted; remove it"
        ));
    }
    let version = u32::from_le_bytes(h[8..12].try_into().unwrap_or_default());
    let size = u64::from_le_bytes(h[16..24].try_into().unwrap_or_default());
    let mut layout = [0u32; 6];
    for (i, l) in layout.iter_mut().enumerate() {
        *l = u32::from_le_bytes(h[24 + 4 * i..28 + 4 * i].try_into().unwrap_or_default());
    }
    if version != VERSION || layout != LAYOUT || size != TOTAL as u64 {
        return Err(format!(
            "{path} is a fabric segment of another ibv-sim version ({version}, this is {VERSION}); \
             end the programs using it and remove it, or set {ENV_FABRIC} to another name"
        ));
    }
    Ok(true)
}

fn open_segment() -> Result<Segment, String> {
    let path = segment_path()?;
    let cpath = CString::new(path.clone()).map_err(|_| "bad path".to_string())?;
    // SAFETY: plain system calls; every result is checked.
    unsafe {
        let fd = libc::open(
            cpath.as_ptr(),
            libc::O_RDWR | libc::O_CREAT | libc::O_NOFOLLOW | libc::O_CLOEXEC,
            0o600 as libc::c_uint,
        );
        if fd < 0 {
            return Err(format!("cannot open {path}: {}", last_os_error()));
        }
        // The mapping keeps the open file (and so an flock) alive: unlock
        // explicitly before closing.
        let close = |e: String| {
            libc::flock(fd, libc::LOCK_UN);
            libc::close(fd);
            Err(e)
        };
        // A file nobody finished (this process made it, or its maker died
        // before setting the magic) is no fabric anyone uses: it goes with
        // the failure, under the lock, so that a process that cannot map
        // the segment leaves nothing behind. Whoever waits for the lock on
        // it finds the path gone when it attaches, and makes a new one.
        let abandon = |e: String| {
            libc::unlink(cpath.as_ptr());
            close(e)
        };
        while libc::flock(fd, libc::LOCK_EX) != 0 {
            if crate::guard::errno() != libc::EINTR {
                return close(format!("cannot lock {path}: {}", last_os_error()));
            }
        }
        let mut st: libc::stat = core::mem::zeroed();
        if libc::fstat(fd, &mut st) != 0 {
            return close(format!("cannot stat {path}: {}", last_os_error()));
        }
        if st.st_mode & libc::S_IFMT != libc::S_IFREG
            || st.st_uid != libc::getuid()
            || st.st_mode & 0o077 != 0
        {
            return close(format!(
                "{path} is not a private regular file of this user; refusing to use it"
            ));
        }
        let mut fresh = st.st_size == 0;
        if !fresh {
            let mut h = [0u8; 64];
            if st.st_size < HDR_BYTES as i64 || libc::pread(fd, h.as_mut_ptr().cast(), 64, 0) != 64
            {
                return close(format!(
                    "{path} is too short to be an ibv-sim fabric segment: it is corrupted; remove it"
                ));
            }
            match check_header(&h, &path) {
                Ok(true) => {}
                Ok(false) => fresh = true,
                Err(e) => return close(e),
            }
        }
        if fresh && libc::ftruncate(fd, TOTAL as libc::off_t) != 0 {
            return abandon(format!("cannot size {path}: {}", last_os_error()));
        }
        let p = libc::mmap(
            core::ptr::null_mut(),
            TOTAL,
            libc::PROT_READ | libc::PROT_WRITE,
            libc::MAP_SHARED,
            fd,
            0,
        );
        if p == libc::MAP_FAILED {
            let e = format!("cannot map {path}: {}", last_os_error());
            return if fresh { abandon(e) } else { close(e) };
        }
        let seg = Segment {
            base: p as usize,
            path: cpath,
            ino: st.st_ino,
        };
        if fresh {
            // Under the lock: nobody else reads the segment until magic is set.
            let h = p as *mut Header;
            core::ptr::addr_of_mut!((*h).version).write(VERSION);
            core::ptr::addr_of_mut!((*h).size).write(TOTAL as u64);
            core::ptr::addr_of_mut!((*h).layout).write(LAYOUT);
            seg.hdr()
                .next_qpn
                .store(first_qpn(&path), Ordering::Relaxed);
            seg.hdr().next_gen.store(1, Ordering::Relaxed);
            for i in 0..MAX_PROCS {
                seg.proc_(i).token.store(0, Ordering::Relaxed);
            }
            seg.hdr().magic.store(MAGIC, Ordering::Release);
        }
        libc::flock(fd, libc::LOCK_UN);
        libc::close(fd);
        Ok(seg)
    }
}

/// Where a fabric starts numbering QPs: from a hash of its name, so that a
/// QP number learnt in one fabric is unlikely to name a QP in another
/// (a program given the wrong fabric then fails instead of reaching some
/// unrelated QP).
fn first_qpn(path: &str) -> u32 {
    let h = path.bytes().fold(0xcbf2_9ce4_8422_2325u64, |h, b| {
        (h ^ u64::from(b)).wrapping_mul(0x100_0000_01b3)
    });
    0x100 + ((h >> 20) as u32 % 0x00f0_0000)
}

fn current() -> Option<&'static Segment> {
    let p = SEGMENT.load(Ordering::Acquire);
    // SAFETY: non-null values are leaked boxes, never freed.
    (!p.is_null()).then(|| unsafe { &*p })
}

fn segment() -> Result<&'static Segment, String> {
    if let Some(s) = current() {
        return Ok(s);
    }
    let _g = SEGMENT_INIT.lock();
    if let Some(s) = current() {
        return Ok(s);
    }
    let s: &'static Segment = Box::leak(Box::new(open_segment()?));
    SEGMENT.store(s as *const Segment as *mut Segment, Ordering::Release);
    static AT_EXIT: std::sync::Once = std::sync::Once::new();
    AT_EXIT.call_once(|| {
        // SAFETY: registering a plain extern "C" handler (it also runs if
        // the library is unloaded, when leaving the fabric is as right).
        unsafe { libc::atexit(at_exit) };
    });
    Ok(s)
}

/// Forgets a mapping whose file was removed, so the next attach maps the new one.
fn forget_stale(seg: &'static Segment) {
    let _ = SEGMENT.compare_exchange(
        seg as *const Segment as *mut Segment,
        core::ptr::null_mut(),
        Ordering::AcqRel,
        Ordering::Acquire,
    );
}
