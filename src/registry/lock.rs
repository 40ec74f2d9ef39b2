//! The registry's lock: a futex mutex whose whole state is one word, so a
//! `fork()` child can simply reset it.
//!
//! parking_lot (used before) parks waiters in a process-wide hash table.
//! A thread of the parent may hold one of that table's bucket locks, or be
//! parked on a registry lock, at the instant of `fork()`; the child then
//! unlocks a lock whose "parked" bit is set, goes to that table to wake a
//! thread that does not exist in it, and waits forever on the bucket.
//! Here waiters sleep in the kernel on the lock word itself: nothing of a
//! waiter is left in the child's memory but the word, which the child's
//! fork handler overwrites with "unlocked".

use std::sync::atomic::{AtomicU32, Ordering};

use parking_lot::lock_api::{self, RawMutex as _};

/// 0: unlocked; 1: locked; 2: locked, and a thread may be waiting.
pub struct RawLock(AtomicU32);

const UNLOCKED: u32 = 0;
const LOCKED: u32 = 1;
const CONTENDED: u32 = 2;

// SAFETY: lock() returns only once this thread changed the word from
// UNLOCKED to LOCKED or CONTENDED (an atomic read-modify-write with
// Acquire), and unlock() publishes with Release: mutual exclusion.
unsafe impl lock_api::RawMutex for RawLock {
    #[allow(clippy::declare_interior_mutable_const)]
    const INIT: RawLock = RawLock(AtomicU32::new(UNLOCKED));
    type GuardMarker = lock_api::GuardSend;

    #[inline]
    fn lock(&self) {
        if self
            .0
            .compare_exchange(UNLOCKED, LOCKED, Ordering::Acquire, Ordering::Relaxed)
            .is_err()
        {
            self.lock_slow();
        }
    }

    #[inline]
    fn try_lock(&self) -> bool {
        self.0
            .compare_exchange(UNLOCKED, LOCKED, Ordering::Acquire, Ordering::Relaxed)
            .is_ok()
    }

    #[inline]
    unsafe fn unlock(&self) {
        if self.0.swap(UNLOCKED, Ordering::Release) == CONTENDED {
            self.wake();
        }
    }
}

impl RawLock {
    /// Leaves errno as it was (a failed futex call sets it), so that the
    /// registry is errno-transparent without a save on its fast path.
    #[cold]
    fn lock_slow(&self) {
        let errno = crate::errno::Errno::save();
        self.wait();
        errno.restore();
    }

    #[inline(always)]
    fn wait(&self) {
        // Critical sections here are short: spin a little before sleeping.
        for _ in 0..64 {
            if self.0.load(Ordering::Relaxed) == UNLOCKED && self.try_lock() {
                return;
            }
            std::hint::spin_loop();
        }
        // From now on the word says CONTENDED whenever this thread may
        // sleep, so that the unlocker wakes it.
        while self.0.swap(CONTENDED, Ordering::Acquire) != UNLOCKED {
            // Returns at once when the word is no longer CONTENDED.
            crate::futex::wait(&self.0, CONTENDED, None);
        }
    }

    #[cold]
    fn wake(&self) {
        let errno = crate::errno::Errno::save();
        crate::futex::wake(&self.0, 1);
        errno.restore();
    }
}

/// A mutex of the registry.
pub type Mutex<T> = lock_api::Mutex<RawLock, T>;

/// A new, unlocked mutex (usable in a `static`).
pub const fn mutex<T>(value: T) -> Mutex<T> {
    lock_api::Mutex::const_new(<RawLock as lock_api::RawMutex>::INIT, value)
}

/// `fork()` prepare: takes `m` and keeps it taken (the guard is forgotten)
/// until [`fork_release`] in the parent or [`fork_reset`] in the child.
/// One step of `fork()` for a lock: taken before (`Prepare`), released in
/// the parent, reset in the child.
#[derive(Clone, Copy)]
pub enum ForkStep {
    Prepare,
    Parent,
    Child,
}

impl ForkStep {
    pub fn apply<T>(self, m: &Mutex<T>) {
        match self {
            ForkStep::Prepare => fork_hold(m),
            ForkStep::Parent => fork_release(m),
            ForkStep::Child => fork_reset(m),
        }
    }
}

pub fn fork_hold<T>(m: &Mutex<T>) {
    std::mem::forget(m.lock());
}

/// `fork()` in the parent: releases what [`fork_hold`] took.
pub fn fork_release<T>(m: &Mutex<T>) {
    // SAFETY: fork_hold took the lock on this thread and forgot the guard.
    unsafe { m.force_unlock() };
}

/// `fork()` in the child: the lock is unlocked, whatever the parent's
/// threads were doing with it (they do not exist here).
pub fn fork_reset<T>(m: &Mutex<T>) {
    // SAFETY: raw() only exposes the lock word; the child is the only
    // thread, and fork_hold made sure no thread was inside the data.
    unsafe { m.raw() }.0.store(UNLOCKED, Ordering::Release);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn excludes_and_wakes() {
        static M: Mutex<u64> = mutex(0);
        let threads: Vec<_> = (0..4)
            .map(|_| {
                std::thread::spawn(|| {
                    for _ in 0..100_000 {
                        *M.lock() += 1;
                    }
                })
            })
            .collect();
        threads.into_iter().for_each(|t| t.join().unwrap());
        assert_eq!(*M.lock(), 400_000);
    }

    #[test]
    fn reset_unlocks() {
        let m = mutex(1);
        fork_hold(&m);
        assert!(m.try_lock().is_none());
        fork_reset(&m);
        assert_eq!(*m.lock(), 1);
    }
}
