//! Locks a forked child inherits free: the process-wide ones (the lookup
//! tables' shards, the fabric's attachment, progress engine and outbox).
//!
//! A thread of the parent may hold any of them at the instant of `fork()`;
//! in the child that thread does not exist and the lock would stay taken
//! for ever, so the child's first verb that needs it (opening a device,
//! any post: the tables are looked up on every one) would hang. The fork
//! handlers take every registered lock before the fork (in [`Tier`]
//! order, the order the sim nests them in, so this cannot deadlock), so
//! what they guard is consistent; the parent releases them, the child
//! overwrites their words with "unlocked".
//!
//! The lock is the `fork-lock` crate's futex mutex (why not parking_lot:
//! see that crate): the word is all the child resets. (The per-object
//! locks stay parking_lot: a child never touches its parent's queues, see
//! `fork`.)

use std::sync::atomic::{AtomicU8, AtomicUsize, Ordering};

use parking_lot::lock_api::RawMutex as _;

/// The futex mutex of the `fork-lock` crate: one word, which the child
/// resets.
pub use ::fork_lock::{Mutex, MutexGuard, RawLock};

/// The order the sim takes these locks in when it nests them (each may be
/// held while taking a later one, never an earlier one).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
#[repr(u8)]
pub enum Tier {
    /// The fabric attachment (held across opening the segment).
    Attach = 0,
    /// The progress engine (it sends answers: the outbox, the tables).
    Engine = 1,
    /// The QPs waiting for answers (the QPs' own locks are taken under
    /// it, and the outbox and tables under those).
    Waiting = 2,
    Outbox = 3,
    /// The lookup tables' shards: one at a time, nothing taken under one.
    Table = 4,
}

const TIERS: [Tier; 5] = [
    Tier::Attach,
    Tier::Engine,
    Tier::Waiting,
    Tier::Outbox,
    Tier::Table,
];

/// The registered locks' addresses (0: none) and tiers. Lock-free, as a
/// lock of its own would have to be taken by the fork handlers while a
/// registering thread (a table made lazily under another lock) waits for
/// it. Six tables of 64 shards and the fabric's few use under 400.
static LOCKS: [AtomicUsize; 1024] = [const { AtomicUsize::new(0) }; 1024];
static TIER_OF: [AtomicU8; 1024] = [const { AtomicU8::new(0) }; 1024];
static USED: AtomicUsize = AtomicUsize::new(0);

/// Has the fork handlers take `lock` (see the module doc). A map made
/// while a fork is in its handlers may be missed (only its first use
/// races the fork); one past the capacity is never taken.
///
/// # Safety
/// `lock` must stay valid until [`unregister`]ed (statics: for ever).
pub unsafe fn register(lock: *const RawLock, tier: Tier) {
    let i = USED.fetch_add(1, Ordering::AcqRel);
    if i < LOCKS.len() {
        TIER_OF[i].store(tier as u8, Ordering::Relaxed);
        // Release: the tier is visible to whoever sees the address.
        LOCKS[i].store(lock as usize, Ordering::Release);
    }
}

/// Forgets a lock that goes away.
pub fn unregister(lock: *const RawLock) {
    for slot in &LOCKS[..USED.load(Ordering::Acquire).min(LOCKS.len())] {
        let _ = slot.compare_exchange(lock as usize, 0, Ordering::AcqRel, Ordering::Relaxed);
    }
}

/// Installs the fork handlers (once; before the first fork that matters:
/// from `ibv_open_device`, before the fabric registers its own child
/// handler, which runs after ours and finds the attachment's lock free).
pub fn install() {
    static ONCE: std::sync::Once = std::sync::Once::new();
    ONCE.call_once(|| {
        // SAFETY: registering plain extern "C" handlers.
        unsafe { libc::pthread_atfork(Some(prepare), Some(parent), Some(child)) };
    });
}

/// Calls `f` on each registered lock of `tier`.
fn each(tier: Tier, f: impl Fn(&RawLock)) {
    let used = USED.load(Ordering::Acquire).min(LOCKS.len());
    for (slot, t) in LOCKS[..used].iter().zip(&TIER_OF) {
        let p = slot.load(Ordering::Acquire);
        if p != 0 && t.load(Ordering::Relaxed) == tier as u8 {
            // SAFETY: registered locks are valid until unregistered (maps
            // are statics in the sim: never).
            f(unsafe { &*(p as *const RawLock) });
        }
    }
}

extern "C" fn prepare() {
    for t in TIERS {
        each(t, |l| l.lock());
    }
}

extern "C" fn parent() {
    for t in TIERS.into_iter().rev() {
        // SAFETY: prepare took each of them in this thread.
        each(t, |l| unsafe { l.unlock() });
    }
}

extern "C" fn child() {
    // Unlocking would do, as this thread took them; a reset also
    // forgets any parent thread that marked one contended.
    for t in TIERS {
        // SAFETY: the child's only thread; prepare took each of them, so
        // no thread was inside what they guard.
        each(t, |l| unsafe { l.reset() });
    }
}
