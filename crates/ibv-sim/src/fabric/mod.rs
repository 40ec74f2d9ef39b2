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
//! `ibv_close_device` gives the slot back. Nothing else takes a lock that
//! lives in the segment.

pub mod ring;
pub mod wire;

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
pub const VERSION: u32 = 1;

const MAX_PROCS: usize = 128;
const MAX_PORTS: usize = 1024;
const MAX_QPS: usize = 1 << 16;

const HDR_BYTES: usize = 4096;
const PROCS_OFF: usize = HDR_BYTES;
const PORTS_OFF: usize = PROCS_OFF + MAX_PROCS * 64;
const QPS_OFF: usize = PORTS_OFF + MAX_PORTS * 32;
const RINGS_OFF: usize = (QPS_OFF + MAX_QPS * 8).next_multiple_of(4096);
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
            return close(format!("cannot size {path}: {}", last_os_error()));
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
            return close(format!("cannot map {path}: {}", last_os_error()));
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

/// A process's start time in clock ticks since boot, from `/proc/PID/stat`.
fn start_time(pid: u32) -> Option<u64> {
    let s = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let rest = &s[s.rfind(')')? + 1..];
    rest.split_whitespace().nth(19)?.parse().ok()
}

fn pid_alive(pid: u32, start: u64) -> bool {
    // SAFETY: signal 0 only checks for existence.
    let r = unsafe { libc::kill(pid as libc::pid_t, 0) };
    if r != 0 && crate::guard::errno() == libc::ESRCH {
        return false;
    }
    match start_time(pid) {
        Some(t) => t == start,
        // /proc not readable: trust kill().
        None => true,
    }
}

fn slot_alive(seg: &Segment, slot: usize) -> bool {
    let p = seg.proc_(slot);
    let tok = p.token.load(Ordering::Acquire);
    tok != 0 && pid_alive(tok as u32, p.start.load(Ordering::Acquire))
}

/// This process's attachment.
struct Attached {
    refs: usize,
    /// Devices whose ports this process registered.
    devices: Vec<usize>,
    slot: usize,
    token: u64,
    stop: Arc<AtomicBool>,
    thread: Option<std::thread::JoinHandle<()>>,
}

static STATE: Mutex<Option<Attached>> = Mutex::new(None);
/// This process's slot and token, for the hot path (token 0: detached).
static MY_TOKEN: AtomicU64 = AtomicU64::new(0);
static MY_SLOT: AtomicU32 = AtomicU32::new(0);
static ATFORK: std::sync::Once = std::sync::Once::new();

extern "C" fn child_after_fork() {
    // The child has no progress thread and must not answer for its
    // parent's slot: it is detached, and attaches anew on its next open.
    MY_TOKEN.store(0, Ordering::SeqCst);
    if let Some(mut g) = STATE.try_lock() {
        if let Some(a) = g.take() {
            core::mem::forget(a);
        }
    }
}

fn ports_clear_owner(seg: &Segment, slot: usize) {
    for i in 0..MAX_PORTS {
        seg.port(i).owners[slot / 64].fetch_and(!(1u64 << (slot % 64)), Ordering::AcqRel);
    }
}

fn port_in_use(p: &Port) -> bool {
    p.owners.iter().any(|o| o.load(Ordering::Acquire) != 0)
}

/// Registers the InfiniBand ports of a device this process opened;
/// returns (port, LID). Under the attach lock.
fn register_ports(seg: &Segment, slot: usize, d: &SimDevice) -> Vec<(u32, u16)> {
    let mut out = Vec::new();
    if !d.is_ethernet() {
        for port in 1..=u32::from(d.phys_ports()) {
            let guid = d.port_guid(port);
            let natural = d.natural_lid(port);
            let bit = 1u64 << (slot % 64);
            let mut found = None;
            for i in 0..MAX_PORTS {
                let p = seg.port(i);
                if p.guid.load(Ordering::Acquire) == guid && port_in_use(p) {
                    found = Some(i);
                    break;
                }
            }
            let i = match found {
                Some(i) => i,
                None => {
                    let used: Vec<u16> = (0..MAX_PORTS)
                        .map(|i| seg.port(i))
                        .filter(|p| port_in_use(p))
                        .map(|p| p.lid.load(Ordering::Acquire) as u16)
                        .collect();
                    let lid = if used.contains(&natural) {
                        (1..0xc000u16)
                            .find(|l| !used.contains(l))
                            .unwrap_or(natural)
                    } else {
                        natural
                    };
                    let Some(i) = (0..MAX_PORTS).find(|&i| !port_in_use(seg.port(i))) else {
                        continue;
                    };
                    let p = seg.port(i);
                    p.guid.store(guid, Ordering::Release);
                    p.lid.store(u32::from(lid), Ordering::Release);
                    i
                }
            };
            let p = seg.port(i);
            p.owners[slot / 64].fetch_or(bit, Ordering::AcqRel);
            out.push((port, p.lid.load(Ordering::Acquire) as u16));
        }
    }
    out
}

/// Under the attach lock: reclaims the slots of dead processes (crashed or
/// killed), claims a free one and registers the ports.
#[allow(clippy::type_complexity)]
fn claim(
    seg: &Segment,
    pid: u32,
    start: u64,
    dev: &SimDevice,
) -> Option<(usize, u64, Vec<(u32, u16)>)> {
    seg.reclaim_dead();
    let slot = (0..MAX_PROCS).find(|&i| seg.proc_(i).token.load(Ordering::Acquire) == 0)?;
    let gen = seg.hdr().next_gen.fetch_add(1, Ordering::AcqRel).max(1);
    let token = (u64::from(gen) << 32) | u64::from(pid);
    ports_clear_owner(seg, slot);
    seg.ring(slot).reset();
    seg.proc_(slot).start.store(start, Ordering::Release);
    seg.proc_(slot).token.store(token, Ordering::Release);
    let lids = register_ports(seg, slot, dev);
    Some((slot, token, lids))
}

/// Joins the fabric (the first open context) or counts one more user;
/// registers the ports of `dev` (a process uses the ports it opens).
pub fn attach(dev: &'static SimDevice) -> Result<(), String> {
    let mut st = STATE.lock();
    if let Some(a) = st.as_mut() {
        if !a.devices.contains(&dev.index) {
            let Some(seg) = current() else {
                return Err("the fabric segment is gone".into());
            };
            let slot = a.slot;
            match seg.locked(|| register_ports(seg, slot, dev)) {
                Ok(lids) => lids.into_iter().for_each(|(p, l)| dev.set_lid(p, l)),
                Err(LockError::Stale) => return Err(format!("{} was removed", seg.path_str())),
                Err(LockError::Other(e)) => return Err(e),
            }
            a.devices.push(dev.index);
        }
        a.refs += 1;
        return Ok(());
    }
    // SAFETY: getpid cannot fail.
    let pid = unsafe { libc::getpid() } as u32;
    let start = start_time(pid).unwrap_or(0);
    let mut tries = 0;
    let (seg, claimed) = loop {
        let seg = segment()?;
        match seg.locked(|| claim(seg, pid, start, dev)) {
            Ok(c) => break (seg, c),
            Err(LockError::Stale) if tries < 10 => {
                tries += 1;
                forget_stale(seg);
            }
            Err(LockError::Stale) => return Err(format!("{} keeps vanishing", seg.path_str())),
            Err(LockError::Other(e)) => return Err(e),
        }
    };
    let Some((slot, token, lids)) = claimed else {
        return Err(format!(
            "the fabric {} has no free process slot ({MAX_PROCS} processes use it)",
            seg.path_str()
        ));
    };
    for (port, lid) in lids {
        dev.set_lid(port, lid);
    }
    // Whatever a forked parent left queued was not ours to send.
    OUTBOX.lock().clear();
    MY_SLOT.store(slot as u32, Ordering::SeqCst);
    MY_TOKEN.store(token, Ordering::SeqCst);
    ATFORK.call_once(|| {
        // SAFETY: registering a plain extern "C" handler.
        unsafe { libc::pthread_atfork(None, None, Some(child_after_fork)) };
    });
    let stop = Arc::new(AtomicBool::new(false));
    let stop2 = stop.clone();
    let thread = std::thread::Builder::new()
        .name("ibv-sim-fabric".into())
        .spawn(move || progress_thread(stop2))
        .ok();
    *st = Some(Attached {
        refs: 1,
        devices: vec![dev.index],
        slot,
        token,
        stop,
        thread,
    });
    Ok(())
}

/// One context fewer; the last one gives the slot back.
pub fn detach() {
    let mut st = STATE.lock();
    let Some(a) = st.as_mut() else { return };
    a.refs -= 1;
    if a.refs > 0 {
        return;
    }
    let a = st.take().expect("attached");
    drop(st);
    a.stop.store(true, Ordering::SeqCst);
    let Some(seg) = current() else { return };
    seg.ring(a.slot).kick();
    if let Some(t) = a.thread {
        let _ = t.join();
    }
    let _e = ENGINE.lock();
    let mut o = OUTBOX.lock();
    o.clear();
    MY_TOKEN.store(0, Ordering::SeqCst);
    drop(o);
    let _ = seg.locked(|| {
        if seg.proc_(a.slot).token.load(Ordering::Acquire) == a.token {
            ports_clear_owner(seg, a.slot);
            seg.proc_(a.slot).token.store(0, Ordering::Release);
        }
        if seg.reclaim_dead() {
            // The last one out removes the file: nothing of a fabric
            // outlives its processes (others see the inode change).
            // SAFETY: unlinking our own fabric file by path.
            unsafe { libc::unlink(seg.path.as_ptr()) };
        }
    });
}

/// This process's attachment: its segment, slot and token.
fn me() -> Option<(&'static Segment, usize, u64)> {
    let token = MY_TOKEN.load(Ordering::Acquire);
    if token == 0 {
        return None;
    }
    Some((current()?, MY_SLOT.load(Ordering::Relaxed) as usize, token))
}

fn pack(qpn: u32, slot: usize, token: u64) -> u64 {
    u64::from(qpn & 0x00ff_ffff) | ((slot as u64 & 0xff) << 24) | (token & !0xffff_ffff)
}

fn entry_owner(seg: &Segment, e: u64) -> Option<Dest> {
    if e == 0 {
        return None;
    }
    let slot = ((e >> 24) & 0xff) as usize;
    let tok = seg.proc_(slot).token.load(Ordering::Acquire);
    if tok != 0 && tok >> 32 == e >> 32 {
        Some(Dest {
            slot: slot as u32,
            token: tok,
        })
    } else {
        None
    }
}

/// A QP number unique across the fabric, registered to this process.
/// `None` when not attached (the caller falls back to a local number).
pub fn alloc_qpn() -> Option<Result<u32, i32>> {
    let (seg, slot, token) = me()?;
    for _ in 0..2 * MAX_QPS {
        let n = seg.hdr().next_qpn.fetch_add(1, Ordering::Relaxed) & 0x00ff_ffff;
        if n < 0x100 || n == 0x00ff_ffff {
            continue;
        }
        let cell = seg.qp(n as usize % MAX_QPS);
        let cur = cell.load(Ordering::Acquire);
        let free = cur == 0
            || match entry_owner(seg, cur) {
                None => true,
                Some(d) => !slot_alive(seg, d.slot as usize),
            };
        if free
            && cell
                .compare_exchange(
                    cur,
                    pack(n, slot, token),
                    Ordering::AcqRel,
                    Ordering::Acquire,
                )
                .is_ok()
        {
            return Some(Ok(n));
        }
    }
    Some(Err(libc::ENOMEM))
}

/// Gives a QP number back.
pub fn free_qpn(qpn: u32) {
    let Some((seg, slot, token)) = me() else {
        return;
    };
    let cell = seg.qp(qpn as usize % MAX_QPS);
    let _ = cell.compare_exchange(
        pack(qpn, slot, token),
        0,
        Ordering::AcqRel,
        Ordering::Acquire,
    );
}

/// The process owning QP number `qpn`, if a live attachment holds it.
pub fn owner_of(qpn: u32) -> Option<Dest> {
    let (seg, _, _) = me()?;
    let e = seg.qp(qpn as usize % MAX_QPS).load(Ordering::Acquire);
    if e as u32 & 0x00ff_ffff != qpn & 0x00ff_ffff {
        return None;
    }
    entry_owner(seg, e)
}

/// Whether `d` is still the live process it was.
pub fn alive(d: Dest) -> bool {
    let Some((seg, _, _)) = me() else {
        return false;
    };
    seg.proc_(d.slot as usize).token.load(Ordering::Acquire) == d.token
        && slot_alive(seg, d.slot as usize)
}

/// This process as a destination (for tests of our own ownership).
pub fn myself() -> Option<Dest> {
    let (_, slot, token) = me()?;
    Some(Dest {
        slot: slot as u32,
        token,
    })
}

/// Fragments waiting for a full ring, in order.
static OUTBOX: Mutex<VecDeque<(Dest, Wire, Vec<u8>)>> = Mutex::new(VecDeque::new());

/// Sends a message (in fragments when longer than a slot) to `d`. Never
/// blocks: what does not fit in the ring waits in the outbox, which the
/// progress engine flushes.
pub fn send(d: Dest, wire: &mut Wire, payload: &[u8]) {
    let Some((seg, slot, token)) = me() else {
        return;
    };
    wire.src_slot = slot as u32;
    wire.src_token = token;
    wire.total = payload.len() as u32;
    // Under the outbox lock all of one process's fragments go out in
    // order, so a message's fragments reach each ring one after another.
    let mut o = OUTBOX.lock();
    let target = seg.ring(d.slot as usize);
    // Behind fragments already waiting for this ring, wait too (in order);
    // other destinations are not held up.
    let mut queued = o.iter().any(|(q, _, _)| *q == d);
    let mut off = 0usize;
    loop {
        let n = (payload.len() - off).min(CHUNK);
        wire.offset = off as u32;
        wire.len = n as u32;
        let chunk = &payload[off..off + n];
        if queued || !target.push(token, wire, chunk) {
            queued = true;
            o.push_back((d, *wire, chunk.to_vec()));
        }
        off += n;
        if off >= payload.len() {
            break;
        }
    }
}

static NEXT_LIVENESS: AtomicU64 = AtomicU64::new(0);

/// Moves waiting fragments to their rings, each destination in order;
/// drops those for processes that are gone (a dead one's full ring would
/// otherwise hold them for ever).
fn flush_outbox(seg: &Segment) -> bool {
    let mut o = OUTBOX.lock();
    if o.is_empty() {
        return false;
    }
    let mut did = false;
    let mut full: Vec<Dest> = Vec::new();
    let mut dead: Vec<Dest> = Vec::new();
    // Liveness costs a read of /proc: at most every 10 ms.
    let now = now_ns();
    let check = now >= NEXT_LIVENESS.load(Ordering::Relaxed);
    if check {
        NEXT_LIVENESS.store(now + 10_000_000, Ordering::Relaxed);
    }
    o.retain(|(d, w, data)| {
        if dead.contains(d) || seg.proc_(d.slot as usize).token.load(Ordering::Acquire) != d.token {
            return false;
        }
        if full.contains(d) {
            return true;
        }
        if seg.ring(d.slot as usize).push(w.src_token, w, data) {
            did = true;
            return false;
        }
        if !check || slot_alive(seg, d.slot as usize) {
            full.push(*d);
            true
        } else {
            dead.push(*d);
            false
        }
    });
    if o.is_empty() {
        o.shrink_to_fit();
    }
    did
}

/// The progress engine's state: fragments being reassembled.
struct Engine {
    partial: HashMap<(u32, u32, bool), (Wire, Vec<u8>)>,
    next_deadline_check: u64,
    /// The ring's head slot claimed but unpublished since (position, ns).
    stall: Option<(u64, u64)>,
}

static ENGINE: once_cell::sync::Lazy<Mutex<Engine>> = once_cell::sync::Lazy::new(|| {
    Mutex::new(Engine {
        partial: HashMap::new(),
        next_deadline_check: 0,
        stall: None,
    })
});

/// Monotonic nanoseconds.
pub fn now_ns() -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: plain system call into a local.
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut ts) };
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

/// Messages handled per progress call at most (so one call stays short).
const BUDGET: usize = 64;

impl Engine {
    /// Takes one fragment; hands whole messages to the data path.
    fn feed(&mut self, w: &Wire, data: &[u8]) {
        let whole = w.offset == 0 && w.len == w.total;
        if whole {
            return dispatch(w, data);
        }
        let key = (w.src_slot, w.src_qpn, wire::kind::is_response(w.kind));
        let e = self
            .partial
            .entry(key)
            .or_insert_with(|| (*w, vec![0; w.total as usize]));
        if w.offset == 0 {
            // A new message from this sender: whatever was half-built is stale.
            e.0 = *w;
            e.1.clear();
            e.1.resize(w.total as usize, 0);
        }
        let off = w.offset as usize;
        let end = off + data.len();
        if end <= e.1.len() {
            e.1[off..end].copy_from_slice(data);
        }
        if end >= w.total as usize {
            if let Some((head, buf)) = self.partial.remove(&key) {
                dispatch(&head, &buf);
            }
            if self.partial.is_empty() {
                self.partial.shrink_to_fit();
            }
        }
    }
}

fn dispatch(w: &Wire, data: &[u8]) {
    if wire::kind::is_response(w.kind) {
        crate::datapath::remote::on_response(w, data);
    } else {
        crate::datapath::remote::on_request(w, data);
    }
}

fn run_engine(seg: &Segment, slot: usize, e: &mut Engine) -> bool {
    let mut did = flush_outbox(seg);
    let ring = seg.ring(slot);
    for _ in 0..BUDGET {
        if ring.pop(|w, d| e.feed(w, d)).is_none() {
            break;
        }
        did = true;
    }
    let now = now_ns();
    if now >= e.next_deadline_check {
        e.next_deadline_check = now + 1_000_000;
        crate::datapath::remote::check_deadlines();
        unstall(seg, ring, e, now);
    }
    did
}

/// A producer killed between claiming a slot of our ring and publishing
/// it would stall the ring for ever: once the head has been stuck for
/// 100 ms and its claimer is known dead, skip the slot.
fn unstall(seg: &Segment, ring: Ring, e: &mut Engine, now: u64) {
    let Some((pos, claimer)) = ring.stalled_head() else {
        e.stall = None;
        return;
    };
    match e.stall {
        Some((p, since)) if p == pos => {
            if now.saturating_sub(since) < 100_000_000 || claimer == 0 {
                return;
            }
            let slot =
                (0..MAX_PROCS).find(|&i| seg.proc_(i).token.load(Ordering::Acquire) == claimer);
            if slot.is_none_or(|i| !slot_alive(seg, i)) {
                ring.skip_head(pos);
                e.stall = None;
            }
        }
        _ => e.stall = Some((pos, now)),
    }
}

/// Runs the progress engine once from a program thread (`ibv_poll_cq`):
/// skipped when another thread is already at it.
pub fn poll_progress() {
    let Some((seg, slot, _)) = me() else { return };
    let ring = seg.ring(slot);
    if ring.is_empty() && !crate::datapath::remote::busy() && OUTBOX.lock().is_empty() {
        return;
    }
    if let Some(mut e) = ENGINE.try_lock() {
        if MY_TOKEN.load(Ordering::Acquire) != 0 {
            run_engine(seg, slot, &mut e);
        }
    }
}

/// How long the progress thread keeps looking at its ring after the last
/// message before it sleeps: a peer in a request loop (the passive side of
/// `ib_read_lat`, `ib_write_bw`) is answered at once instead of after a
/// futex wake-up each time (tens of microseconds on a loaded machine).
const SPIN_NS: u64 = 1_000_000;

fn progress_thread(stop: Arc<AtomicBool>) {
    let mut last_active = 0u64;
    while !stop.load(Ordering::SeqCst) {
        let Some((seg, slot, _)) = me() else { return };
        let did = {
            let mut e = ENGINE.lock();
            run_engine(seg, slot, &mut e)
        };
        let now = now_ns();
        if did {
            last_active = now;
            continue;
        }
        let ring = seg.ring(slot);
        if now.saturating_sub(last_active) < SPIN_NS {
            // Busy: look again without sleeping, yielding the CPU to any
            // other runnable thread.
            std::thread::yield_now();
            continue;
        }
        let busy = crate::datapath::remote::busy() || !OUTBOX.lock().is_empty();
        ring.wait(if busy { 1_000_000 } else { 100_000_000 });
    }
}
