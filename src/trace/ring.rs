//! The trace file's mapping and the producer side of its rings.
//!
//! Each thread claims a ring (one CAS on its owner word, on its first
//! record) and is the only one to write records there, so a record is a
//! few stores into the shared mapping: the record's commit word cleared,
//! the fields and text written, the commit word set (release), the ring's
//! head advanced. Records lie back to back, each its used length (about
//! 80 bytes for a device verb, not a 256-byte slot): the writer copies a
//! ring out in at most two pieces, and a ring's lines are each written
//! once per lap. The writer thread only reads below the head and advances
//! the tail. A thread that exits hands its ring on. In `block` mode the
//! last SHARED_RINGS rings are no thread's: a thread that finds every
//! other ring taken writes to one of them, taking turns with the others
//! under the ring's busy word (a lock then), so no record is lost to the
//! number of threads.
//!
//! The mapping covers the whole file, but only file space that is
//! allocated is ever touched: the header at open, a ring as it fills
//! (`grow`: a CHUNK at a time, `fallocate`, before the first record
//! there), so a full disk is a record dropped and counted, never a
//! SIGBUS, and a large ring costs disk only as far as it is used.

use std::cell::Cell;
use std::fmt;
use std::sync::atomic::{
    compiler_fence, fence, AtomicI32, AtomicPtr, AtomicU32, AtomicU64, AtomicUsize, Ordering,
};

use trace_format::{
    header, ring as meta, slot, FLAG_TRUNCATED, HEADER_SIZE, RECORD_MAX, RING_META_SIZE, RING_UNIT,
    SHARED_OWNER, SLOT_TEXT, TEXT_MAX,
};

mod shared;
mod space;

use super::config;
use crate::files::Identity;
use shared::lock_shared;
use space::{grow, reserve};

/// The mapping (null when there is none) and its shape.
static BASE: AtomicPtr<u8> = AtomicPtr::new(std::ptr::null_mut());
static LEN: AtomicUsize = AtomicUsize::new(0);
/// A ring's size in bytes.
static SIZE: AtomicUsize = AtomicUsize::new(0);
/// The file, for the writer's appends, and which file it is.
pub static FD: AtomicI32 = AtomicI32::new(-1);
pub static FD_DEV: AtomicU64 = AtomicU64::new(0);
pub static FD_INO: AtomicU64 = AtomicU64::new(0);
/// Bumped in a forked child: a ring claimed before the fork is the
/// parent's.
static GENERATION: AtomicU32 = AtomicU32::new(1);
/// The trace file's path (the one made: `PATH.<pid>` when the asked one
/// was taken), for reopening it; a leaked C string, null before `open`.
static PATH: AtomicPtr<libc::c_char> = AtomicPtr::new(std::ptr::null_mut());
/// Rings handed on so far: a thread on a shared ring tries for one of its
/// own again when this moves.
static RELEASED: AtomicU32 = AtomicU32::new(0);

const NO_RING: u32 = u32::MAX;
/// Rings threads share in `block` mode (the last ones).
pub const SHARED_RINGS: usize = 4;
/// A claim's ring bit: a shared ring, taken per record.
const GUEST: u32 = 1 << 31;

/// This thread's ring; released by the destructor when the thread exits.
struct Claim {
    generation: Cell<u32>,
    ring: Cell<u32>,
    /// The thread's id, read when it claims the ring (one thread-local
    /// access per record rather than two).
    tid: Cell<u32>,
    /// `RELEASED` when a thread on a shared ring last looked for its own.
    released: Cell<u32>,
}

impl Drop for Claim {
    fn drop(&mut self) {
        let ring = self.ring.get();
        if ring != NO_RING
            && ring & GUEST == 0
            && self.generation.get() == GENERATION.load(Ordering::Relaxed)
        {
            if let Some(m) = mapping() {
                m.owner(ring as usize).store(0, Ordering::Release);
                RELEASED.fetch_add(1, Ordering::Release);
            }
        }
    }
}

thread_local! {
    static CLAIM: Claim = const {
        Claim {
            generation: Cell::new(0),
            ring: Cell::new(NO_RING),
            tid: Cell::new(0),
            released: Cell::new(0),
        }
    };
}

/// A view of the mapping.
#[derive(Clone, Copy)]
pub struct Mapping {
    base: *mut u8,
    /// A ring's size in bytes.
    pub size: usize,
}

/// The mapping, if the trace is open.
pub fn mapping() -> Option<Mapping> {
    let base = BASE.load(Ordering::Acquire);
    (!base.is_null()).then(|| Mapping {
        base,
        size: SIZE.load(Ordering::Relaxed),
    })
}

impl Mapping {
    /// An aligned 8-byte word of the header.
    pub fn word(&self, at: usize) -> &AtomicU64 {
        debug_assert!(at.is_multiple_of(8) && at < HEADER_SIZE);
        // SAFETY: `at` is 8-aligned inside the header of the live mapping
        // (page-aligned, never unmapped while the trace is on but in a
        // forked child, where no other thread exists).
        unsafe { &*self.base.add(at).cast::<AtomicU64>() }
    }
    pub fn ring_word(&self, ring: usize, field: usize) -> &AtomicU64 {
        self.word(header::RINGS_META + ring * RING_META_SIZE + field)
    }
    pub fn owner(&self, ring: usize) -> &AtomicU32 {
        self.word32(header::RINGS_META + ring * RING_META_SIZE + meta::OWNER)
    }
    /// Set while the owner writes a record: a signal handler that makes a
    /// verbs call meanwhile would write the same place.
    fn busy(&self, ring: usize) -> &AtomicU32 {
        self.word32(header::RINGS_META + ring * RING_META_SIZE + meta::BUSY)
    }
    fn word32(&self, at: usize) -> &AtomicU32 {
        debug_assert!(at.is_multiple_of(4) && at < HEADER_SIZE);
        // SAFETY: as in `word`; `at` is 4-aligned.
        unsafe { &*self.base.add(at).cast::<AtomicU32>() }
    }
    /// Where position `pos` of `ring` lies (the size is a power of two).
    pub fn at(&self, ring: usize, pos: u64) -> *mut u8 {
        let off = ring * self.size + (pos as usize & (self.size - 1));
        // SAFETY: ring < RINGS and the offset is below the ring's size:
        // inside the mapping.
        unsafe { self.base.add(HEADER_SIZE + off) }
    }
}

/// Makes the trace file (0600, never through a link, only a regular file),
/// sizes it and maps it. Says why not, once, at error.
pub fn open() -> bool {
    let cfg = config::get();
    let Some(template) = cfg.file.as_ref() else {
        return false;
    };
    let asked = crate::config::expand_pid(template);
    let made = match crate::files::create_trace(&asked) {
        Ok(v) => v,
        Err(e) => {
            crate::log!(
                crate::log::Level::Error,
                "IBV_SHIM_TRACE={}: {e}; not tracing",
                asked.to_string_lossy()
            );
            return false;
        }
    };
    let (fd, id) = (made.fd, made.id);
    let path = made.path;
    if let Some(why) = &made.instead {
        crate::log!(
            crate::log::Level::Warn,
            "IBV_SHIM_TRACE={}: {why}; tracing to {} instead",
            asked.to_string_lossy(),
            path.to_string_lossy()
        );
    }
    let slots = cfg.slots;
    let size = trace_format::ring_bytes(slots);
    let len = trace_format::rings_end(config::RINGS, slots);
    // The file's size, sparse: only the header is allocated now (the
    // mapping touches nothing else until `grow` allocates it).
    // SAFETY: fd is the regular file just created, open read-write.
    let sized = unsafe { libc::ftruncate(fd, len as libc::off_t) } == 0;
    if let (true, Err(e)) = (sized, reserve(fd, 0, HEADER_SIZE as u64)) {
        // SAFETY: our own descriptor, not handed out; the path is the
        // file just made, still empty of records.
        unsafe {
            libc::unlink(path.as_ptr());
            libc::close(fd);
        }
        crate::log!(
            crate::log::Level::Error,
            "IBV_SHIM_TRACE={}: cannot allocate the trace's header: {e}; not tracing",
            path.to_string_lossy()
        );
        return false;
    }
    let base = if sized {
        // SAFETY: a fresh shared mapping of `len` bytes of our own file.
        unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                len,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_SHARED,
                fd,
                0,
            )
        }
    } else {
        libc::MAP_FAILED
    };
    if base == libc::MAP_FAILED {
        let e = std::io::Error::last_os_error();
        // SAFETY: our own descriptor, not handed out; the path is the file
        // just made, with no header yet (left, it would be no trace).
        unsafe {
            libc::unlink(path.as_ptr());
            libc::close(fd);
        }
        crate::log!(
            crate::log::Level::Error,
            "IBV_SHIM_TRACE={}: cannot map {len} bytes: {e}; not tracing",
            path.to_string_lossy()
        );
        return false;
    }
    let base = base.cast::<u8>();
    let m = Mapping { base, size };
    // SAFETY: the header's first bytes, inside the fresh mapping.
    unsafe {
        std::ptr::copy_nonoverlapping(trace_format::MAGIC.as_ptr(), base, 8);
        let put32 = |at: usize, v: u32| base.add(at).cast::<u32>().write(v);
        put32(header::VERSION, trace_format::VERSION);
        put32(header::PID, libc::getpid() as u32);
        put32(header::RINGS, config::RINGS as u32);
        put32(header::SLOTS, slots as u32);
        put32(header::SLOT_SIZE, RING_UNIT as u32);
        put32(header::POLICY, cfg.block as u32);
    }
    if cfg.block {
        for r in config::RINGS - SHARED_RINGS..config::RINGS {
            m.owner(r).store(SHARED_OWNER, Ordering::Relaxed);
        }
    }
    m.word(header::REALTIME_NS).store(
        crate::log::clock_ns(libc::CLOCK_REALTIME),
        Ordering::Relaxed,
    );
    m.word(header::MONOTONIC_NS)
        .store(crate::clock::monotonic_ns(), Ordering::Relaxed);
    // SAFETY: the header's clock field, inside the fresh mapping.
    unsafe {
        base.add(header::CLOCK)
            .cast::<u32>()
            .write(if crate::clock::tsc() {
                trace_format::CLOCK_TSC
            } else {
                0
            })
    };
    store_clock(&m);
    m.word(header::DRAINED_END)
        .store(len as u64, Ordering::Relaxed);
    FD_DEV.store(id.dev, Ordering::Relaxed);
    FD_INO.store(id.ino, Ordering::Relaxed);
    // Kept for the life of the process (a forked child's own trace leaks
    // its parent's few bytes).
    PATH.store(path.into_raw(), Ordering::Release);
    FD.store(fd, Ordering::Relaxed);
    SIZE.store(size, Ordering::Relaxed);
    LEN.store(len, Ordering::Relaxed);
    BASE.store(base, Ordering::Release);
    true
}

/// Puts the clock's latest calibration in the header (a reader turns TSC
/// ticks into ns with it, also after a crash).
pub fn store_clock(m: &Mapping) {
    if !crate::clock::tsc() {
        return;
    }
    // A fresh pair when the last is over a millisecond old; the header
    // gets the pairs either way (the first time at open: a process killed
    // before any drain still has a calibration in its file).
    crate::clock::calibrate();
    let [t0, m0, t1, m1] = crate::clock::pairs();
    m.word(header::TSC0).store(t0, Ordering::Relaxed);
    m.word(header::MONO0).store(m0, Ordering::Relaxed);
    m.word(header::TSC1).store(t1, Ordering::Relaxed);
    m.word(header::MONO1).store(m1, Ordering::Relaxed);
}

/// The trace file's path, once it is made.
pub fn path() -> Option<&'static std::ffi::CStr> {
    let p = PATH.load(Ordering::Acquire);
    // SAFETY: a C string leaked by `open`, never freed.
    (!p.is_null()).then(|| unsafe { std::ffi::CStr::from_ptr(p) })
}

/// Is `FD` still the trace file? (Daemons close every descriptor and the
/// number may be another file's now.)
pub fn fd_is_ours(fd: i32) -> bool {
    Identity::of(fd)
        == Some(Identity {
            dev: FD_DEV.load(Ordering::Relaxed),
            ino: FD_INO.load(Ordering::Relaxed),
        })
}

/// This thread's ring and id, the ring claimed on its first record (with
/// the GUEST bit: a shared ring, see `Busy::enter`); `None` when every
/// ring is taken or during the thread's own exit.
///
/// A thread first tries ring `tid % RINGS` (where `claim` starts): its
/// owner word says whether it is this thread's, with no thread-local
/// access (a `thread_local!` in a shared library is a `__tls_get_addr`
/// call); the thread-local claim is for a thread that got another ring.
#[inline(always)]
fn my_ring(m: &Mapping) -> Option<(usize, u32)> {
    let tid = crate::thread::tid() as u32;
    let ring = tid as usize % config::RINGS;
    // Only this thread stores its own id there (`claim`) or takes it
    // away (its exit).
    if m.owner(ring).load(Ordering::Relaxed) == tid {
        return Some((ring, tid));
    }
    // Packed in one word: an `Option` of a pair comes back through memory.
    let packed = claimed_ring(m.base, m.size);
    (packed != NONE).then_some(((packed >> 32) as usize, packed as u32))
}

/// `claimed_ring`'s "no ring".
const NONE: u64 = u64::MAX;

/// The ring in the high half, the thread's id in the low; `NONE`.
#[inline(never)]
fn claimed_ring(base: *mut u8, size: usize) -> u64 {
    let m = Mapping { base, size };
    let generation = GENERATION.load(Ordering::Relaxed);
    CLAIM
        .try_with(|c| {
            let ring = c.ring.get();
            if c.generation.get() != generation
                || ring == NO_RING
                || (ring & GUEST != 0 && RELEASED.load(Ordering::Relaxed) != c.released.get())
            {
                // Read before looking: a ring handed on meanwhile is seen
                // by the next record.
                c.released.set(RELEASED.load(Ordering::Acquire));
                let ring = match claim(&m) {
                    Some(r) => r as u32,
                    None if super::config::get().block => {
                        let tid = crate::thread::tid() as u32;
                        (config::RINGS - SHARED_RINGS + tid as usize % SHARED_RINGS) as u32 | GUEST
                    }
                    None => return None,
                };
                c.generation.set(generation);
                c.ring.set(ring);
                // A forked child claims anew: its own id.
                c.tid.set(crate::thread::tid() as u32);
            }
            Some(u64::from(c.ring.get()) << 32 | u64::from(c.tid.get()))
        })
        .ok()
        .flatten()
        .unwrap_or(NONE)
}

/// A ring's busy word held while a record is written there; `enter` is
/// `None` when a record of this thread is being written there already (a
/// signal handler's call in the middle of one). On a thread's own ring
/// only the owner (and its signal handlers) touch the word: the compiler
/// fences keep the record's stores between the two. On a shared ring
/// (`ring` has the GUEST bit) it is a lock holding the writer's id, taken
/// by CAS (`lock_shared`). Dropped also by a panic in a Display impl; the
/// release store (a plain store on x86) ends either.
struct Busy<'a>(&'a AtomicU32);

impl<'a> Busy<'a> {
    #[inline(always)]
    fn enter(m: &'a Mapping, ring: usize, tid: u32) -> Option<Busy<'a>> {
        if ring as u32 & GUEST != 0 {
            let busy = m.busy(ring & !(GUEST as usize));
            return lock_shared(busy, tid).then_some(Busy(busy));
        }
        let busy = m.busy(ring);
        if busy.load(Ordering::Relaxed) != 0 {
            return None;
        }
        busy.store(1, Ordering::Relaxed);
        compiler_fence(Ordering::SeqCst);
        Some(Busy(busy))
    }
}

impl Drop for Busy<'_> {
    #[inline(always)]
    fn drop(&mut self) {
        compiler_fence(Ordering::SeqCst);
        self.0.store(0, Ordering::Release);
    }
}

/// Runs `write` with this thread's ring; `false` when there is none or
/// it is busy (see `my_ring`, `Busy`).
#[inline(always)]
fn with_my_ring(m: &Mapping, write: impl FnOnce(usize, u32)) -> bool {
    let Some((ring, tid)) = my_ring(m) else {
        return false;
    };
    let Some(_busy) = Busy::enter(m, ring, tid) else {
        return false;
    };
    write(ring & !(GUEST as usize), tid);
    true
}

#[cold]
fn claim(m: &Mapping) -> Option<usize> {
    let tid = crate::thread::tid() as u32;
    let first = tid as usize % config::RINGS;
    let ring = (0..config::RINGS)
        .map(|i| (first + i) % config::RINGS)
        .find(|&r| {
            m.owner(r)
                .compare_exchange(0, tid.max(1), Ordering::AcqRel, Ordering::Relaxed)
                .is_ok()
        })?;
    // A thread that ended in the middle of a record (cancelled) left it
    // set: the ring is this thread's now.
    m.busy(ring).store(0, Ordering::Relaxed);
    Some(ring)
}

/// Formats straight into a record's text, cutting what does not fit.
struct SlotText {
    at: *mut u8,
    len: usize,
    cut: bool,
}

impl fmt::Write for SlotText {
    fn write_str(&mut self, s: &str) -> fmt::Result {
        let n = s.len().min(TEXT_MAX - self.len);
        // SAFETY: len + n <= TEXT_MAX: inside the record's text.
        unsafe { std::ptr::copy_nonoverlapping(s.as_ptr(), self.at.add(self.len), n) };
        self.len += n;
        self.cut |= n < s.len();
        Ok(())
    }
}

/// Writes one record into this thread's ring.
pub fn record(
    start_ns: u64,
    dur_ns: u64,
    flags: u16,
    errno: i32,
    call: fmt::Arguments<'_>,
    result: fmt::Arguments<'_>,
) {
    let Some(m) = mapping() else { return };
    let written = with_my_ring(&m, |ring, tid| {
        write(&m, ring, tid, start_ns, dur_ns, flags, errno, call, result)
    });
    if !written {
        m.word(header::LOST_NO_RING).fetch_add(1, Ordering::Relaxed);
    }
}

/// Writes one binary record into this thread's ring: `verb`'s id, and the
/// payload `encode` writes (see `capture`) at the pointer it gets, with
/// room for the length it gets; it returns the payload's length and
/// whether it was cut. Inlined into its callers (a call and an event): one
/// frame less.
#[inline(always)]
pub fn record_bin(
    start: u64,
    dur: u64,
    flags: u16,
    errno: i32,
    verb: u16,
    encode: impl FnOnce(*mut u8, usize) -> (usize, bool),
) {
    let Some(m) = mapping() else { return };
    // `with_my_ring` spelt out: its closure is not always inlined here.
    let Some((ring, tid)) = my_ring(&m) else {
        return lost(&m);
    };
    let Some(_busy) = Busy::enter(&m, ring, tid) else {
        return lost(&m);
    };
    let ring = ring & !(GUEST as usize);
    write_with(
        &m,
        ring,
        tid,
        start,
        dur,
        flags,
        errno,
        #[inline(always)]
        |at, flags| {
            // `at` is the record's text area, TEXT_MAX bytes.
            let (len, cut) = encode(at, TEXT_MAX);
            if cut {
                *flags |= FLAG_TRUNCATED;
            }
            (verb, len as u16)
        },
    );
}

/// A record with no ring to go to.
#[cold]
fn lost(m: &Mapping) {
    m.word(header::LOST_NO_RING).fetch_add(1, Ordering::Relaxed);
}

#[allow(clippy::too_many_arguments)]
#[inline(always)]
fn write(
    m: &Mapping,
    ring: usize,
    tid: u32,
    start_ns: u64,
    dur_ns: u64,
    flags: u16,
    errno: i32,
    call: fmt::Arguments<'_>,
    result: fmt::Arguments<'_>,
) {
    // SlotText keeps to the text area's TEXT_MAX bytes.
    write_with(m, ring, tid, start_ns, dur_ns, flags, errno, |at, flags| {
        let mut text = SlotText {
            at,
            len: 0,
            cut: false,
        };
        let _ = fmt::write(&mut text, call);
        let call_len = text.len;
        let _ = fmt::write(&mut text, result);
        if text.cut {
            *flags |= FLAG_TRUNCATED;
        }
        (call_len as u16, text.len as u16)
    });
}

/// Writes one record: `fill` writes the text area (at most TEXT_MAX bytes
/// at its pointer) and returns the CALL_LEN and TEXT_LEN fields (TEXT_LEN
/// at most TEXT_MAX).
#[allow(clippy::too_many_arguments)]
#[inline(always)]
fn write_with(
    m: &Mapping,
    ring: usize,
    tid: u32,
    start_ns: u64,
    dur_ns: u64,
    flags: u16,
    errno: i32,
    fill: impl FnOnce(*mut u8, &mut u16) -> (u16, u16),
) {
    // Only this thread moves the head.
    let head = m.ring_word(ring, meta::HEAD).load(Ordering::Relaxed);
    // `ring_next` without its division (the size is a power of two).
    let left = m.size as u64 - (head & (m.size as u64 - 1));
    let pos = if left < RECORD_MAX as u64 {
        head + left
    } else {
        head
    };
    // Room for the longest record (its length is known once written),
    // in the ring and in the file: below the ring's limit (`make_room`).
    if pos + RECORD_MAX as u64 > m.ring_word(ring, meta::LIMIT).load(Ordering::Relaxed)
        && !make_room(m.base, m.size, ring, pos)
    {
        m.ring_word(ring, meta::LOST)
            .fetch_add(1, Ordering::Relaxed);
        return;
    }
    if pos & (m.size as u64 - 1) == 0 {
        // A new lap: where the last one's records end, for the writer
        // (published by the head's release below).
        m.ring_word(ring, meta::WRAP).store(head, Ordering::Relaxed);
    }
    let s = m.at(ring, pos);
    // SAFETY: RECORD_MAX bytes from `s` are this thread's until the head
    // passes them (the writer reads only below the head; a record never
    // wraps, see `ring_next`); every offset is aligned for its type
    // (positions are multiples of 8).
    let len = unsafe {
        let seq = &*s.add(slot::SEQ).cast::<AtomicU64>();
        // Uncommitted first: a crash halfway leaves no half-old record.
        seq.store(0, Ordering::Relaxed);
        fence(Ordering::Release);
        // The fields the text does not change first, then the text.
        s.add(slot::START_NS).cast::<u64>().write(start_ns);
        s.add(slot::DUR_NS).cast::<u64>().write(dur_ns);
        s.add(slot::TID).cast::<u32>().write(tid);
        s.add(slot::ERRNO).cast::<i32>().write(errno);
        s.add(slot::RING).cast::<u16>().write(ring as u16);
        // `fill` adds to the flags where they lie.
        let flags_at = s.add(slot::FLAGS).cast::<u16>();
        flags_at.write(flags);
        let (call_len, text_len) = fill(s.add(SLOT_TEXT), &mut *flags_at);
        s.add(slot::CALL_LEN).cast::<u16>().write(call_len);
        s.add(slot::TEXT_LEN).cast::<u16>().write(text_len);
        seq.store(pos + 1, Ordering::Release);
        // `record_len` without its bound: `fill` keeps to TEXT_MAX.
        debug_assert!(text_len as usize <= TEXT_MAX);
        ((SLOT_TEXT + text_len as usize + 7) & !7) as u64
    };
    m.ring_word(ring, meta::HEAD)
        .store(pos + len, Ordering::Release);
    // Every half ring written: the writer copies the ring out now, on its
    // own core if there is one, rather than this thread when the ring is
    // full (one system call per half ring at most, none while the writer
    // is at work). A half-ring mark is crossed when its bit changes from
    // the old head to the new (a record and the gap before a lap are
    // shorter than half a ring).
    if ((head ^ (pos + len)) & (m.size / 2) as u64) != 0 {
        super::writer::wake();
    }
}

/// A record at `pos` would pass the ring's limit (`meta::LIMIT`, kept by
/// its writer: how far it may write with no other check, the lesser of
/// the tail's lap end and the file space allocated): allocates file space
/// (`grow`), waits for the tail in `block` mode (`writer::room`), and sets
/// the limit anew; `false` to drop the record.
#[cold]
#[inline(never)]
fn make_room(base: *mut u8, size: usize, ring: usize, pos: u64) -> bool {
    let m = Mapping { base, size };
    let need = pos + RECORD_MAX as u64;
    let alloc = m.ring_word(ring, meta::ALLOC);
    let off = pos & (size as u64 - 1);
    if off + RECORD_MAX as u64 > alloc.load(Ordering::Relaxed) && !grow(base, size, ring, off) {
        return false;
    }
    let tail = m.ring_word(ring, meta::TAIL);
    if need - tail.load(Ordering::Acquire) > size as u64 && !room(base, size, ring, pos) {
        return false;
    }
    // A ring allocated short of its end is in its first lap (see `grow`):
    // its positions are offsets.
    let allocated = alloc.load(Ordering::Relaxed);
    let by_file = if allocated >= size as u64 {
        u64::MAX
    } else {
        allocated
    };
    let by_tail = tail.load(Ordering::Acquire) + size as u64;
    m.ring_word(ring, meta::LIMIT)
        .store(by_tail.min(by_file), Ordering::Relaxed);
    true
}

/// `writer::room`, the mapping passed in registers (a `&Mapping` would
/// make every record put it in memory).
#[cold]
#[inline(never)]
fn room(base: *mut u8, size: usize, ring: usize, pos: u64) -> bool {
    super::writer::room(&Mapping { base, size }, ring, pos)
}

/// In a forked child: drop the parent's mapping and descriptor (the
/// child's copies; the parent's file is untouched).
pub fn after_fork_in_child() {
    GENERATION.fetch_add(1, Ordering::Relaxed);
    let base = BASE.swap(std::ptr::null_mut(), Ordering::AcqRel);
    if !base.is_null() {
        // SAFETY: the child's copy of the mapping made by `open`; the
        // child has one thread, which is here.
        unsafe { libc::munmap(base.cast(), LEN.load(Ordering::Relaxed)) };
    }
    let fd = FD.swap(-1, Ordering::Relaxed);
    if fd >= 0 && fd_is_ours(fd) {
        // SAFETY: the child's copy of the shim's own descriptor.
        unsafe { libc::close(fd) };
    }
}
