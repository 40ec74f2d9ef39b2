//! The text log's queue: debug and trace lines are written by a writer
//! thread in batches: one `write(2)` and one identity check of the log's
//! descriptor per batch instead of per line. An entry is a line formatted
//! on the calling thread, or a binary entry (a timed call's words, see
//! `log::entry`) that the thread draining the queue turns into its line
//! ([`Hooks::render`]): no formatting on the calling thread.
//!
//! One bounded multi-producer ring of 64-byte slots in static memory (only
//! the pages used become resident). A producer claims the slots of a line
//! with a compare-and-swap on `TAIL` (after checking there is room),
//! copies the line in, and publishes it by storing its position in the
//! first slot's stamp. The consumer takes lines in position order, so the
//! lines of one thread keep their order, and gives their slots back
//! (`HEAD`) as soon as it copied them out. No lock: the consumer role is
//! one flag with the holder's thread id, and every wait is bounded, so a
//! `fork()`, a signal handler or an exiting thread can never hang on it.
//!
//! A full ring: the producer wakes the writer and waits for room, at most
//! 100 ms (a writer thread that a loaded machine leaves unscheduled that
//! long), then drops the line and counts it; the count is logged (warn).
//! Until the writer frees room again, later lines are dropped at once.
//! Lines still queued are lost if the process dies without running its
//! exit handlers (`_exit`, a crash); `IBV_SHIM_LOG_SYNC=1` writes every
//! line on the calling thread instead, and the binary trace
//! (`IBV_SHIM_TRACE`) is the crash-proof recording.
//!
//! Knows nothing of the log's format or file: `log` registers how a batch
//! is written, how a drop is said and how a binary entry becomes its line
//! ([`register`]).

use std::cell::UnsafeCell;
use std::sync::atomic::Ordering::{AcqRel, Acquire, Relaxed, Release, SeqCst};
use std::sync::atomic::{fence, AtomicBool, AtomicI32, AtomicU16, AtomicU32, AtomicU64, AtomicU8};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

const SLOT: usize = 64;
/// A power of two: 1 MiB of lines (about 7,000 of a typical 140 bytes).
const SLOTS: usize = 16384;
const BYTES: usize = SLOT * SLOTS;
/// The consumer's copy buffer: the most one `write(2)` takes.
const BATCH: usize = 64 * 1024;
/// The longest binary entry, and the longest line one renders to.
pub const ENTRY_MAX: usize = 512;
pub const RENDERED_MAX: usize = 1024;
/// `LEN`'s bit for a binary entry.
const BINARY: u16 = 0x8000;

/// What the ring needs from the logger.
pub struct Hooks {
    /// Writes a batch of whole lines to the log, after checking that the
    /// descriptor still is the log's. With `may_open` false (the writer
    /// thread) a lost log is not reopened: `false` = not written, keep
    /// the lines.
    pub write: fn(&[u8], bool) -> bool,
    /// Says (synchronously) that `n` lines were dropped.
    pub dropped: fn(u64),
    /// Turns a binary entry into its line at `out` (RENDERED_MAX bytes);
    /// returns the line's length.
    pub render: fn(&[u8], &mut [u8]) -> usize,
}
static HOOKS: OnceLock<Hooks> = OnceLock::new();

/// Called once the logger runs; until then every line is synchronous.
pub fn register(hooks: Hooks) {
    let _ = HOOKS.set(hooks);
}

/// Bytes written by producers and read by the consumer; who may touch
/// which slots is decided by `TAIL`, `HEAD` and the stamps.
struct Bytes<const N: usize>(UnsafeCell<[u8; N]>);
// SAFETY: a slot's bytes are written only by the producer that claimed it
// (CAS on TAIL, after HEAD showed it free) and read only by the consumer
// after its stamp was published (Release/Acquire); the batch buffer only by
// the holder of CONSUMER.
unsafe impl<const N: usize> Sync for Bytes<N> {}

static DATA: Bytes<BYTES> = Bytes(UnsafeCell::new([0; BYTES]));
static OUT: Bytes<BATCH> = Bytes(UnsafeCell::new([0; BATCH]));
/// `position + 1` once the line starting at `position` is complete.
static STAMP: [AtomicU64; SLOTS] = [const { AtomicU64::new(0) }; SLOTS];
static LEN: [AtomicU16; SLOTS] = [const { AtomicU16::new(0) }; SLOTS];
/// A cache line of its own: producers hammer `TAIL`, the consumer `HEAD`.
#[repr(align(64))]
struct Line<T>(T);

impl<T> std::ops::Deref for Line<T> {
    type Target = T;
    fn deref(&self) -> &T {
        &self.0
    }
}

/// Next position to claim; positions below `HEAD` are free again.
static TAIL: Line<AtomicU64> = Line(AtomicU64::new(0));
static HEAD: Line<AtomicU64> = Line(AtomicU64::new(0));
/// The thread id of whoever is draining (0: nobody).
static CONSUMER: AtomicI32 = AtomicI32::new(0);
static DROPPED: AtomicU64 = AtomicU64::new(0);
/// Set by a drop, cleared when the consumer frees slots: while the writer
/// makes no progress (blocked on a full pipe), lines are dropped at once
/// instead of each waiting its 100 ms.
static DROPPING: AtomicBool = AtomicBool::new(false);
/// The writer thread found the log's descriptor gone (closed, or its
/// number reused by the program): it never opens files itself — an open
/// on another thread takes the lowest free number, the very one a
/// program that just closed its descriptors is about to open (daemons) —
/// so the next thread that logs writes the queue out and reopens the log,
/// inside its verbs call, as the synchronous logger always did.
static REOPEN: AtomicBool = AtomicBool::new(false);

/// Futex words: the writer sleeps on `WAKE`, producers waiting for room
/// on `ROOM`.
static WAKE: AtomicU32 = AtomicU32::new(0);
static ROOM: AtomicU32 = AtomicU32::new(0);
static SLEEPING: AtomicBool = AtomicBool::new(false);
static WAITERS: AtomicU32 = AtomicU32::new(0);

const UNSTARTED: u8 = 0;
const STARTING: u8 = 1;
const ASYNC: u8 = 2;
/// Every line on the calling thread: `IBV_SHIM_LOG_SYNC=1`, no writer
/// thread could be started, or the process is exiting.
const SYNC: u8 = 3;
static MODE: AtomicU8 = AtomicU8::new(UNSTARTED);

/// Queues a whole line for the writer thread. `false`: write it yourself
/// (synchronous mode, or no writer thread). A line that finds the ring
/// full for 100 ms is dropped and counted.
pub fn push(line: &[u8]) -> bool {
    push_entry(false, line)
}

/// Queues a binary entry (at most ENTRY_MAX bytes) for the writer thread
/// to render; `false` as [`push`].
pub fn push_binary(entry: &[u8]) -> bool {
    push_entry(true, entry)
}

#[inline(always)]
fn push_entry(binary: bool, entry: &[u8]) -> bool {
    // While one thread starts the writer, the others queue already.
    let mode = MODE.load(Acquire);
    if mode != ASYNC && mode != STARTING && !start() {
        return false;
    }
    let max = if binary {
        ENTRY_MAX
    } else {
        BINARY as usize - 1
    };
    let len = entry.len().min(max);
    let k = len.div_ceil(SLOT).max(1) as u64;
    let mut waited = 0;
    let (t, h) = loop {
        // HEAD first: it never passes TAIL, so `h <= t`.
        let h = HEAD.load(Acquire);
        let t = TAIL.load(Relaxed);
        if t + k - h > SLOTS as u64 {
            if DROPPING.load(Relaxed) || !wait_for_room(&mut waited) {
                DROPPING.store(true, Relaxed);
                DROPPED.fetch_add(1, Relaxed);
                return true;
            }
            continue;
        }
        if TAIL
            .compare_exchange_weak(t, t + k, SeqCst, Relaxed)
            .is_ok()
        {
            break (t, h);
        }
    };
    let at = (t as usize % SLOTS) * SLOT;
    let first = len.min(BYTES - at);
    // SAFETY: slots t..t+k are this thread's (claimed above, HEAD past
    // their last use); `at + first <= BYTES`, and the rest (`len - first
    // <= BYTES`) goes to the start.
    unsafe {
        let base = DATA.0.get().cast::<u8>();
        std::ptr::copy_nonoverlapping(entry.as_ptr(), base.add(at), first);
        if first < len {
            std::ptr::copy_nonoverlapping(entry.as_ptr().add(first), base, len - first);
        }
    }
    let i = t as usize % SLOTS;
    LEN[i].store(len as u16 | if binary { BINARY } else { 0 }, Relaxed);
    STAMP[i].store(t + 1, Release);
    // Pairs with the writer's fence before it goes to sleep: either it
    // sees this line, or this thread sees it asleep and wakes it.
    fence(SeqCst);
    let used = t + k - h;
    let half = SLOTS as u64 / 2;
    if (SLEEPING.load(Relaxed) && SLEEPING.swap(false, AcqRel)) || (used > half && used - k <= half)
    {
        wake(&WAKE);
    }
    if REOPEN.load(Relaxed) {
        flush();
    }
    true
}

/// Writes out what is queued now, on this thread, before a synchronous
/// line (so the log reads in order), before `fork()`, at exit and at
/// `ibv_close_device`. Bounded: a queue it cannot drain within a second
/// (the writer stuck in a write to a full pipe, a line whose producer was
/// interrupted by the signal handler now flushing) is left to the writer.
pub fn flush() {
    let target = TAIL.load(Acquire);
    if HEAD.load(Acquire) >= target {
        return;
    }
    let Some(hooks) = HOOKS.get() else { return };
    let me = crate::thread::tid();
    if CONSUMER.load(Relaxed) == me {
        return;
    }
    // Called inside the program's fork() and verbs calls: their errno is
    // theirs.
    let saved = crate::errno::Errno::save();
    drain_all_before(target, hooks, me);
    saved.restore();
}

fn drain_all_before(target: u64, hooks: &Hooks, me: i32) {
    let started = Instant::now();
    let mut waits = 0u32;
    let mut bounded_wait = || {
        waits += 1;
        if waits < 64 {
            // SAFETY: sched_yield has no preconditions.
            unsafe { libc::sched_yield() };
        } else {
            std::thread::sleep(Duration::from_micros(50));
        }
        started.elapsed() < Duration::from_secs(1)
    };
    while CONSUMER.compare_exchange(0, me, Acquire, Relaxed).is_err() {
        if !bounded_wait() {
            return;
        }
    }
    while HEAD.load(Relaxed) < target {
        if drain(hooks, true) == 0 && !bounded_wait() {
            break;
        }
    }
    CONSUMER.store(0, Release);
    say_dropped(hooks);
}

/// At exit: every later line is written synchronously (the writer thread
/// may be gone any moment), and what is queued is written now.
pub fn at_exit() {
    MODE.store(SYNC, Release);
    flush();
}

/// After `fork()`, in the child: no writer thread, nobody draining; the
/// lines still queued are the parent's (its writer writes them).
pub fn after_fork_in_child() {
    CONSUMER.store(0, Relaxed);
    SLEEPING.store(false, Relaxed);
    WAITERS.store(0, Relaxed);
    DROPPED.store(0, Relaxed);
    DROPPING.store(false, Relaxed);
    HEAD.store(TAIL.load(Relaxed), Release);
    if MODE.load(Relaxed) != SYNC {
        MODE.store(UNSTARTED, Release);
    }
}

/// Copies out the complete lines at the head of the ring (as many as fit
/// one batch), frees their slots, then writes them. The caller holds
/// CONSUMER. Returns the number of lines written.
fn drain(hooks: &Hooks, may_open: bool) -> usize {
    let mut h = HEAD.load(Relaxed);
    let out = OUT.0.get().cast::<u8>();
    let base = DATA.0.get().cast::<u8>();
    let (mut n, mut used) = (0, 0);
    while h < TAIL.load(Acquire) {
        let i = h as usize % SLOTS;
        if STAMP[i].load(Acquire) != h + 1 {
            // Claimed, still being copied in.
            break;
        }
        let word = LEN[i].load(Relaxed);
        let binary = word & BINARY != 0;
        let len = (word & !BINARY) as usize;
        if used + if binary { RENDERED_MAX } else { len } > BATCH {
            break;
        }
        let at = i * SLOT;
        let first = len.min(BYTES - at);
        if binary {
            let copy: [u8; ENTRY_MAX];
            let entry = if first == len {
                // SAFETY: published, and ours until HEAD moves (below).
                unsafe { std::slice::from_raw_parts(base.add(at), len) }
            } else {
                // Wraps at the ring's end: put together.
                let mut c = [0u8; ENTRY_MAX];
                // SAFETY: as below; `len <= ENTRY_MAX` (`push_binary`).
                unsafe {
                    std::ptr::copy_nonoverlapping(base.add(at), c.as_mut_ptr(), first);
                    std::ptr::copy_nonoverlapping(base, c.as_mut_ptr().add(first), len - first);
                }
                copy = c;
                &copy[..len]
            };
            // SAFETY: `out` is ours while we hold CONSUMER, and
            // `used + RENDERED_MAX <= BATCH`.
            let to = unsafe { std::slice::from_raw_parts_mut(out.add(used), RENDERED_MAX) };
            used += (hooks.render)(entry, to).min(RENDERED_MAX);
        } else {
            // SAFETY: the line is published (stamp read with Acquire) and its
            // slots stay unclaimed until HEAD moves past them; `out` is ours
            // while we hold CONSUMER, and `used + len <= BATCH`.
            unsafe {
                std::ptr::copy_nonoverlapping(base.add(at), out.add(used), first);
                std::ptr::copy_nonoverlapping(base, out.add(used + first), len - first);
            }
            used += len;
        }
        n += 1;
        h += len.div_ceil(SLOT).max(1) as u64;
    }
    if n == 0 {
        return 0;
    }
    // SAFETY: the first `used` bytes of `out` were just written.
    if !(hooks.write)(unsafe { std::slice::from_raw_parts(out, used) }, may_open) {
        // The log is gone and only a program thread may reopen it: the
        // lines stay queued (HEAD not moved) for that thread.
        REOPEN.store(true, Relaxed);
        return 0;
    }
    if may_open {
        REOPEN.store(false, Relaxed);
    }
    HEAD.store(h, Release);
    if DROPPING.load(Relaxed) {
        DROPPING.store(false, Relaxed);
    }
    if WAITERS.load(SeqCst) > 0 {
        wake(&ROOM);
    }
    n
}

fn say_dropped(hooks: &Hooks) {
    let n = DROPPED.swap(0, Relaxed);
    if n > 0 {
        (hooks.dropped)(n);
    }
}

/// A full ring: wakes the writer and waits up to half a millisecond for
/// room, at most 200 times (100 ms). `false`: give up, drop the line.
#[cold]
fn wait_for_room(waited: &mut u32) -> bool {
    if *waited >= 200 || CONSUMER.load(Relaxed) == crate::thread::tid() {
        // The consumer itself (a signal handler that interrupted a drain)
        // would wait for itself.
        return false;
    }
    *waited += 1;
    let seen = ROOM.load(SeqCst);
    WAITERS.fetch_add(1, SeqCst);
    wake(&WAKE);
    futex_wait(&ROOM, seen, Some(Duration::from_micros(500)));
    WAITERS.fetch_sub(1, SeqCst);
    true
}

/// Starts the writer thread on the first queued line (and again in a
/// forked child). `true` once it runs.
#[cold]
fn start() -> bool {
    if MODE.load(Acquire) == SYNC || HOOKS.get().is_none() {
        return false;
    }
    if crate::config::get().log_sync {
        MODE.store(SYNC, Release);
        return false;
    }
    if MODE
        .compare_exchange(UNSTARTED, STARTING, AcqRel, Acquire)
        .is_err()
    {
        // Another thread is starting it (or has, or gave up).
        return MODE.load(Acquire) != SYNC;
    }
    let spawned = crate::thread::spawn_quiet("ibv-shim-log", run);
    let mode = if spawned { ASYNC } else { SYNC };
    // An exit meanwhile decided otherwise: keep its choice.
    let _ = MODE.compare_exchange(STARTING, mode, AcqRel, Acquire);
    if MODE.load(Acquire) == SYNC {
        // What others queued while the thread was being started.
        flush();
        return false;
    }
    true
}

/// The writer: drains while there are lines, naps 2 ms between rounds so
/// lines gather into batches (producers wake it early when the ring is
/// half full), and sleeps until woken after 50 ms without a line.
fn run() {
    let Some(hooks) = HOOKS.get() else { return };
    let me = crate::thread::tid();
    let mut idle = 0;
    loop {
        let seen = WAKE.load(SeqCst);
        let mut wrote = 0;
        if CONSUMER.compare_exchange(0, me, Acquire, Relaxed).is_ok() {
            loop {
                let n = drain(hooks, false);
                wrote += n;
                if n == 0 {
                    break;
                }
            }
            CONSUMER.store(0, Release);
            say_dropped(hooks);
        }
        idle = if wrote > 0 { 0 } else { idle + 1 };
        if idle < 25 {
            futex_wait(&WAKE, seen, Some(Duration::from_millis(2)));
            continue;
        }
        SLEEPING.store(true, SeqCst);
        fence(SeqCst);
        if !ready() {
            futex_wait(&WAKE, seen, None);
        }
        SLEEPING.store(false, SeqCst);
        idle = 0;
    }
}

/// Is a complete line waiting at the head?
fn ready() -> bool {
    let h = HEAD.load(Acquire);
    h < TAIL.load(SeqCst) && STAMP[h as usize % SLOTS].load(Acquire) == h + 1
}

fn wake(word: &AtomicU32) {
    word.fetch_add(1, SeqCst);
    crate::futex::wake(word, i32::MAX);
}

fn futex_wait(word: &AtomicU32, seen: u32, timeout: Option<Duration>) {
    crate::futex::wait(word, seen, timeout);
}
