//! Which ring a thread writes to: claimed on its first record (one CAS
//! on the ring's owner word), held in a thread-local, handed on when the
//! thread exits; in `block` mode a shared ring when every other is taken,
//! and the busy word held while a record is written.

use std::cell::Cell;
use std::sync::atomic::{compiler_fence, AtomicU32, Ordering};

use super::shared::lock_shared;
use super::{Mapping, SHARED_RINGS};
use crate::trace::config;

/// parent's.
static GENERATION: AtomicU32 = AtomicU32::new(1);
/// Rings handed on so far: a thread on a shared ring tries for one of its
/// own again when this moves.
static RELEASED: AtomicU32 = AtomicU32::new(0);

const NO_RING: u32 = u32::MAX;
/// A claim's ring bit: a shared ring, taken per record.
pub(super) const GUEST: u32 = 1 << 31;

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
            if let Some(m) = super::mapping() {
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

/// This thread's ring and id, the ring claimed on its first record (with
/// the GUEST bit: a shared ring, see `Busy::enter`); `None` when every
/// ring is taken or during the thread's own exit.
///
/// A thread first tries ring `tid % RINGS` (where `claim` starts): its
/// owner word says whether it is this thread's, with no thread-local
/// access (a `thread_local!` in a shared library is a `__tls_get_addr`
/// call); the thread-local claim is for a thread that got another ring.
#[inline(always)]
pub(super) fn my_ring(m: &Mapping) -> Option<(usize, u32)> {
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
                    None if config::get().block => {
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
pub(super) struct Busy<'a>(&'a AtomicU32);

impl<'a> Busy<'a> {
    #[inline(always)]
    pub(super) fn enter(m: &'a Mapping, ring: usize, tid: u32) -> Option<Busy<'a>> {
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
pub(super) fn with_my_ring(m: &Mapping, write: impl FnOnce(usize, u32)) -> bool {
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

/// In a forked child: a ring claimed before the fork is the parent's.
pub(super) fn forked() {
    GENERATION.fetch_add(1, Ordering::Relaxed);
}
