//! The consumer side: copies committed records out of the rings to the
//! end of the trace file, so the rings have room again. A writer thread
//! does it every few milliseconds, and keeps the file allocated ahead; at
//! exit the exiting thread does it one last time; in `block` mode a thread
//! whose ring is full does it itself (or sleeps while the writer is at
//! it). Only copies: the exit summary's
//! figures are counted from the file at exit (`stats`).

use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use trace_format::{header, ring as meta, RECORD_MAX};

use super::ring::{self, Mapping};

/// Held by whoever is draining (writer thread, exit, a blocked producer).
static DRAINING: AtomicBool = AtomicBool::new(false);
static STOP: AtomicBool = AtomicBool::new(false);
/// The file is no longer ours (its descriptor closed and the number
/// reused, or the file replaced): records stay in the rings, nothing more
/// is appended.
static BROKEN: AtomicBool = AtomicBool::new(false);

/// How long a producer in `block` mode waits for room before it drops the
/// record (and counts it): a writer that cannot make progress must not
/// hang the program.
pub const BLOCK_LIMIT: Duration = Duration::from_secs(10);

/// The file system holding the trace is full: no more space is asked for
/// (a ring no longer grows, a copy-out that failed is not waited for in
/// `block` mode); what does not fit is dropped and counted.
static NO_SPACE: AtomicBool = AtomicBool::new(false);

/// Has the trace stopped for want of space?
pub fn out_of_space() -> bool {
    NO_SPACE.load(Ordering::Relaxed)
}

/// The trace's file system said `e` to an allocation or a copy-out: the
/// trace stops there, said once (warn).
#[cold]
pub fn no_space(e: &std::io::Error) {
    if NO_SPACE.swap(true, Ordering::Relaxed) {
        return;
    }
    let path = ring::path().map(|p| p.to_string_lossy().into_owned());
    crate::log!(
        crate::log::Level::Warn,
        "IBV_SHIM_TRACE={}: trace stopped: no space ({e}); records that do not fit are dropped \
         and counted",
        path.as_deref().unwrap_or("?")
    );
}

/// A full ring: `true` once there is room (block mode), `false` to drop.
///
/// # Safety
///
/// `ring` is below `config::RINGS`.
#[cold]
pub unsafe fn room(m: &Mapping, ring: usize, pos: u64) -> bool {
    if !super::config::get().block || BROKEN.load(Ordering::Relaxed) || out_of_space() {
        return false;
    }
    let started = Instant::now();
    // SAFETY: `ring` is a ring of the file (the caller's contract);
    // `meta::TAIL` is one of its words.
    let tail = unsafe { m.ring_word(ring, meta::TAIL) };
    loop {
        if pos + RECORD_MAX as u64 - tail.load(Ordering::Acquire) <= m.size as u64 {
            return true;
        }
        if started.elapsed() > BLOCK_LIMIT || BROKEN.load(Ordering::Relaxed) || out_of_space() {
            return false;
        }
        // Copy the rings out itself rather than sleep until the writer
        // wakes (a sleep or a yield on a busy machine lasts milliseconds);
        // when the writer is at it, sleep until its round ends (spinning
        // would take the core from a writer that shares it).
        let seen = ROUNDS.load(Ordering::Acquire);
        match try_drain(m, Then::Nothing) {
            Some(true) => {}
            // Nothing could be copied (a full disk): try again shortly.
            Some(false) => std::thread::sleep(Duration::from_micros(100)),
            None => {
                WAITERS.fetch_add(1, Ordering::SeqCst);
                if DRAINING.load(Ordering::SeqCst) {
                    crate::futex::wait(&ROUNDS, seen, Some(Duration::from_millis(1)));
                }
                WAITERS.fetch_sub(1, Ordering::Relaxed);
            }
        }
    }
}

/// Drain rounds ended (a futex: producers blocked on a full ring wait on
/// it), and how many wait.
static ROUNDS: AtomicU32 = AtomicU32::new(0);
static WAITERS: AtomicU32 = AtomicU32::new(0);

/// Starts the writer thread (its signals blocked: the program's signals
/// are the program's). Without one (no memory, no threads) records are
/// still kept in the rings and drained at exit.
pub fn start() {
    STOP.store(false, Ordering::Relaxed);
    // Without a writer thread (no memory, no threads) the rings are
    // copied out by a blocked producer and at exit.
    let _ = crate::thread::spawn_quiet("ibv-shim-trace", run);
}

/// The writer's wake-up word (a futex) and whether it waits on it.
static WAKE: AtomicU32 = AtomicU32::new(0);
static NAPPING: AtomicBool = AtomicBool::new(false);

fn run() {
    while !STOP.load(Ordering::Relaxed) {
        // Round after round while there is work; a short nap when idle,
        // cut short by a ring half full (`wake`).
        let Some(m) = ring::mapping() else {
            nap(Duration::from_millis(2));
            continue;
        };
        let drained = try_drain(&m, Then::Nothing);
        // One allocation step between rounds, no nap while some is due.
        let allocated = allocate_ahead(&m);
        if drained != Some(true) && !allocated {
            nap(Duration::from_millis(2));
        }
    }
}

fn nap(d: Duration) {
    let seen = WAKE.load(Ordering::Acquire);
    NAPPING.store(true, Ordering::SeqCst);
    crate::futex::wait(&WAKE, seen, Some(d));
    NAPPING.store(false, Ordering::Relaxed);
}

/// A ring is half full: wakes the writer if it naps (one system call per
/// half ring at most; none while the writer is at work).
#[cold]
pub fn wake() {
    WAKE.fetch_add(1, Ordering::Release);
    if NAPPING.load(Ordering::SeqCst) {
        crate::futex::wake(&WAKE, 1);
    }
}

/// At exit: the writer stops, the rings are copied out one last time.
pub fn stop_and_drain() {
    STOP.store(true, Ordering::SeqCst);
    let Some(m) = ring::mapping() else { return };
    let started = Instant::now();
    while try_drain(&m, Then::CutOff).is_none() {
        // The writer is mid-copy: it finishes within milliseconds.
        if started.elapsed() > Duration::from_secs(2) {
            return;
        }
        std::thread::sleep(Duration::from_micros(200));
    }
}

/// What a drainer does after a round, still the only drainer: the exit
/// cuts the space allocated ahead off.
#[derive(Clone, Copy, PartialEq)]
enum Then {
    Nothing,
    CutOff,
}

/// The space allocated ahead and not used: the file ends at its last
/// record. After STOP: once no allocation is under way, none starts.
fn cut_off(m: &Mapping) {
    let started = Instant::now();
    while ALLOCATING.load(Ordering::SeqCst) {
        if started.elapsed() > Duration::from_secs(2) {
            return;
        }
        std::thread::sleep(Duration::from_micros(200));
    }
    // SAFETY: `header::DRAINED_END` is an 8-aligned header word.
    let end = unsafe { m.word(header::DRAINED_END) }.load(Ordering::Relaxed);
    if ALLOCATED.swap(0, Ordering::Relaxed) > end {
        if let Some(fd) = descriptor() {
            // SAFETY: the trace file's own descriptor; only shrinks what
            // `allocate_ahead` added past the records.
            unsafe { libc::ftruncate(fd, end as libc::off_t) };
        }
    }
}

/// How far the writer allocates the file ahead of its drained records,
/// a STEP per round (a few tens of microseconds: a long allocation would
/// keep it from the rings, which fill in a few hundred).
const AHEAD: u64 = 4 << 20;
const STEP: u64 = 256 << 10;
/// The file's allocated end, past the drained records (0: nothing ahead).
static ALLOCATED: AtomicU64 = AtomicU64::new(0);
/// Set while the writer allocates (outside DRAINING: a blocked producer
/// does not wait for it).
static ALLOCATING: AtomicBool = AtomicBool::new(false);

/// Keeps AHEAD bytes allocated past the drained records (the writer, a
/// STEP after each round that leaves less; `true` if it took one): a
/// copy-out then only copies,
/// the file's pages are found rather than made (a third to a half of an
/// append's cost into tmpfs here). A crash leaves the allocated zeros
/// past `DRAINED_END`, which readers ignore; an exit cuts them off.
fn allocate_ahead(m: &Mapping) -> bool {
    // SAFETY: `header::DRAINED_END` is an 8-aligned header word.
    let end = unsafe { m.word(header::DRAINED_END) }.load(Ordering::Relaxed);
    let have = ALLOCATED.load(Ordering::Relaxed).max(end);
    if have - end >= AHEAD || BROKEN.load(Ordering::Relaxed) {
        return false;
    }
    let mut done = false;
    // The exit sets STOP, then waits for ALLOCATING to clear: either it
    // sees this allocation or this sees STOP.
    ALLOCATING.store(true, Ordering::SeqCst);
    // The descriptor as it is (reopening is the drainer's: two threads
    // reopening at once would leak one).
    let fd = ring::FD.load(Ordering::Relaxed);
    if !STOP.load(Ordering::SeqCst) && fd >= 0 && ring::fd_is_ours(fd) {
        let at = have as libc::off_t;
        // SAFETY: the trace file's own descriptor; only adds zeroed space
        // past its records (a file system without fallocate says
        // EOPNOTSUPP: the copy-out then appends as it did).
        if unsafe { libc::fallocate(fd, 0, at, STEP as libc::off_t) } == 0 {
            ALLOCATED.store(have + STEP, Ordering::Relaxed);
            done = true;
        }
    }
    ALLOCATING.store(false, Ordering::SeqCst);
    done
}

/// Drains every ring if no one else is (`None` when someone is); `true`
/// if it drained something.
fn try_drain(m: &Mapping, then: Then) -> Option<bool> {
    if DRAINING.swap(true, Ordering::Acquire) {
        return None;
    }
    let mut any = false;
    // A fresh calibration pair for the header, one drainer at a time.
    ring::store_clock(m);
    if !BROKEN.load(Ordering::Relaxed) {
        for ring in 0..super::config::RINGS {
            // SAFETY: `ring` is below RINGS.
            any |= unsafe { drain_ring(m, ring) };
        }
    }
    match then {
        Then::Nothing => {}
        Then::CutOff => cut_off(m),
    }
    DRAINING.store(false, Ordering::Release);
    ROUNDS.fetch_add(1, Ordering::Release);
    if WAITERS.load(Ordering::SeqCst) > 0 {
        crate::futex::wake(&ROUNDS, i32::MAX);
    }
    Some(any)
}

/// Appends the ring's committed records to the file as they lie in the
/// ring, back to back (one piece, or two when the head is a lap ahead:
/// the last lap's records up to where they end, then the new lap's), then
/// moves its tail. A crash between the two leaves a record in both
/// places; readers count it once.
///
/// # Safety
///
/// `ring` is below `config::RINGS`.
unsafe fn drain_ring(m: &Mapping, ring: usize) -> bool {
    // SAFETY: `ring` is a ring of the file (the caller's contract);
    // HEAD and TAIL are its words.
    let (head, tail_word) = unsafe {
        (
            m.ring_word(ring, meta::HEAD).load(Ordering::Acquire),
            m.ring_word(ring, meta::TAIL),
        )
    };
    let tail = tail_word.load(Ordering::Relaxed);
    if head == tail {
        return false;
    }
    let Some(fd) = descriptor() else {
        BROKEN.store(true, Ordering::Relaxed);
        return false;
    };
    let size = m.size as u64;
    let lap_end = (tail / size + 1) * size;
    // The producer is at most a lap ahead of the tail (it leaves room for
    // a whole record), so one wrap at most: the WRAP word (published with
    // the head) says where the records before it end.
    let pieces = if head <= lap_end {
        [(tail, head), (head, head)]
    } else {
        // SAFETY: as for HEAD above.
        let wrap = unsafe { m.ring_word(ring, meta::WRAP) }.load(Ordering::Relaxed);
        [(tail, wrap.clamp(tail, lap_end)), (lap_end, head)]
    };
    let iov = pieces.map(|(from, to)| libc::iovec {
        iov_base: m.at(ring, from).cast(),
        iov_len: (to - from) as usize,
    });
    let used: usize = iov.iter().map(|v| v.iov_len).sum();
    // SAFETY: `header::DRAINED_END` is an 8-aligned header word.
    let end_word = unsafe { m.word(header::DRAINED_END) };
    let at = end_word.load(Ordering::Relaxed);
    // SAFETY: committed records of the ring, below the head (the tail is
    // not moved past them until they are written); pwritev only reads.
    let wrote = unsafe { libc::pwritev(fd, iov.as_ptr(), 2, at as libc::off_t) };
    if wrote != used as isize {
        // A full disk: the records stay in the ring (what no longer fits
        // is dropped and counted; a blocked producer no longer waits).
        let e = if wrote < 0 {
            std::io::Error::last_os_error()
        } else {
            std::io::Error::from_raw_os_error(libc::ENOSPC)
        };
        if matches!(
            e.raw_os_error(),
            Some(libc::ENOSPC | libc::EDQUOT | libc::EFBIG)
        ) {
            no_space(&e);
        }
        return false;
    }
    end_word.store(at + used as u64, Ordering::Release);
    tail_word.store(head, Ordering::Release);
    true
}

/// Set while a thread reopens the trace file (two reopening at once
/// would leak a descriptor).
static REOPENING: AtomicBool = AtomicBool::new(false);

/// The trace file's descriptor, reopened by path if the program closed
/// it; `None` when the path no longer is the same file (or another thread
/// is reopening it and has not finished).
pub fn descriptor() -> Option<i32> {
    let fd = ring::FD.load(Ordering::Acquire);
    if fd >= 0 && ring::fd_is_ours(fd) {
        return Some(fd);
    }
    for _ in 0..1000 {
        if !REOPENING.swap(true, Ordering::Acquire) {
            let fd = reopen();
            REOPENING.store(false, Ordering::Release);
            return fd;
        }
        // SAFETY: sched_yield has no preconditions.
        unsafe { libc::sched_yield() };
    }
    None
}

fn reopen() -> Option<i32> {
    // Another thread reopened it meanwhile.
    let fd = ring::FD.load(Ordering::Acquire);
    if fd >= 0 && ring::fd_is_ours(fd) {
        return Some(fd);
    }
    let fd = crate::files::reopen_trace(ring::path()?).ok()?;
    if ring::fd_is_ours(fd) {
        ring::FD.store(fd, Ordering::Release);
        Some(fd)
    } else {
        // SAFETY: the descriptor just opened, not handed out.
        unsafe { libc::close(fd) };
        None
    }
}

/// In a forked child: the writer thread is not there, no lock is held.
pub fn after_fork_in_child() {
    DRAINING.store(false, Ordering::Relaxed);
    NAPPING.store(false, Ordering::Relaxed);
    BROKEN.store(false, Ordering::Relaxed);
    WAITERS.store(0, Ordering::Relaxed);
    ALLOCATED.store(0, Ordering::Relaxed);
    ALLOCATING.store(false, Ordering::Relaxed);
    REOPENING.store(false, Ordering::Relaxed);
    NO_SPACE.store(false, Ordering::Relaxed);
}

/// Records lost so far: rings full, and no ring free.
pub fn lost(m: &Mapping) -> (u64, u64) {
    let full = (0..super::config::RINGS)
        // SAFETY: `r` is below RINGS; `meta::LOST` is one of its words.
        .map(|r| unsafe { m.ring_word(r, meta::LOST) }.load(Ordering::Relaxed))
        .sum();
    // SAFETY: `header::LOST_NO_RING` is an 8-aligned header word.
    let no_ring = unsafe { m.word(header::LOST_NO_RING) }.load(Ordering::Relaxed);
    (full, no_ring)
}
