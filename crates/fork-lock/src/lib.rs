//! A mutex whose whole state is one futex word, so a `fork()` child can
//! simply reset it; and the futex calls it (and other waits) sleep on.
//!
//! Why not parking_lot's mutex: its waiters queue in a process-wide hash
//! table. A thread of the parent may hold one of that table's bucket
//! locks, or be parked on a lock, at the instant of `fork()`; the child
//! then unlocks a lock whose "parked" bit is set, goes to that table to
//! wake a thread that does not exist in it, and waits forever on the
//! bucket. Here waiters sleep in the kernel on the lock word itself:
//! nothing of a waiter is left in the child's memory but the word, which
//! the child's fork handler overwrites with "unlocked".
//!
//! The fork protocol for a lock: the prepare handler takes it and keeps
//! it ([`fork_hold`]), so what it guards is consistent at the fork; the
//! parent releases it ([`fork_release`]), the child resets it
//! ([`fork_reset`]).
//!
//! The slow paths (a contended lock, a wake-up) leave errno as they found
//! it: a library that must be errno-transparent needs no save of its own
//! around a lock.
#![deny(unsafe_op_in_unsafe_fn, clippy::undocumented_unsafe_blocks)]

pub mod futex;

use core::sync::atomic::{AtomicU32, Ordering};

use lock_api::RawMutex as _;

/// The lock word: 0 unlocked; 1 locked; 2 locked, and a thread may be
/// waiting.
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
        if !self.try_lock() {
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
    /// The lock unlocked, whatever it was.
    ///
    /// # Safety
    /// No thread may hold the lock or be inside the data it guards: in a
    /// `fork()` child, whose only thread is the one that forked, after
    /// the prepare handler took the lock (or made sure no one held it).
    pub unsafe fn reset(&self) {
        self.0.store(UNLOCKED, Ordering::Release);
    }

    #[cold]
    fn lock_slow(&self) {
        let errno = Errno::save();
        // Critical sections are short: spin a little before sleeping.
        for _ in 0..64 {
            if self.0.load(Ordering::Relaxed) == UNLOCKED && self.try_lock() {
                errno.restore();
                return;
            }
            core::hint::spin_loop();
        }
        // From now on the word says CONTENDED whenever this thread may
        // sleep, so that the unlocker wakes it.
        while self.0.swap(CONTENDED, Ordering::Acquire) != UNLOCKED {
            // Returns at once when the word is no longer CONTENDED.
            futex::wait(&self.0, CONTENDED, None);
        }
        errno.restore();
    }

    #[cold]
    fn wake(&self) {
        let errno = Errno::save();
        futex::wake(&self.0, 1);
        errno.restore();
    }
}

/// This thread's errno, kept across a futex call.
struct Errno(i32);

impl Errno {
    fn save() -> Errno {
        // SAFETY: __errno_location always returns this thread's errno slot.
        Errno(unsafe { *libc::__errno_location() })
    }

    fn restore(self) {
        // SAFETY: as in save.
        unsafe { *libc::__errno_location() = self.0 };
    }
}

/// A mutex on a [`RawLock`].
pub type Mutex<T> = lock_api::Mutex<RawLock, T>;
/// Its guard.
pub type MutexGuard<'a, T> = lock_api::MutexGuard<'a, RawLock, T>;

/// A new, unlocked mutex (usable in a `static`).
pub const fn mutex<T>(value: T) -> Mutex<T> {
    lock_api::Mutex::const_new(RawLock::INIT, value)
}

/// `fork()` prepare: takes `m` and keeps it taken (the guard is forgotten)
/// until [`fork_release`] in the parent or [`fork_reset`] in the child.
pub fn fork_hold<T>(m: &Mutex<T>) {
    core::mem::forget(m.lock());
}

/// `fork()` in the parent: releases what [`fork_hold`] took.
///
/// # Safety
/// This thread took `m` with [`fork_hold`] and has not released it.
pub unsafe fn fork_release<T>(m: &Mutex<T>) {
    // SAFETY: the caller's contract: this thread holds the lock, whose
    // guard fork_hold forgot.
    unsafe { m.force_unlock() };
}

/// `fork()` in the child: the lock is unlocked, whatever the parent's
/// threads were doing with it (they do not exist here).
///
/// # Safety
/// In a `fork()` child (its only thread), after [`fork_hold`] took `m`
/// in the parent's prepare handler, so no thread was inside the data.
pub unsafe fn fork_reset<T>(m: &Mutex<T>) {
    // SAFETY: raw() only exposes the lock word; the caller's contract is
    // reset's.
    unsafe { m.raw().reset() };
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
        // SAFETY: this test's thread holds m (fork_hold) and no other
        // thread knows it.
        unsafe { fork_reset(&m) };
        assert_eq!(m.try_lock().map(|g| *g), Some(1));
    }

    #[test]
    fn release_unlocks() {
        let m = mutex(2);
        fork_hold(&m);
        assert!(m.try_lock().is_none());
        // SAFETY: this thread took m with fork_hold just above.
        unsafe { fork_release(&m) };
        assert_eq!(m.try_lock().map(|g| *g), Some(2));
    }

    #[test]
    fn a_shared_wait_returns_when_the_word_moved_or_the_time_is_up() {
        let w = AtomicU32::new(5);
        // Not 4: returns at once.
        futex::wait_shared(&w, 4, None);
        futex::wait(&w, 4, None);
        // Still 5: returns after the timeout.
        futex::wait_shared(&w, 5, Some(std::time::Duration::from_millis(1)));
        futex::wake_shared(&w, 1);
        futex::wake(&w, 1);
    }
}
