//! The registry's lock: `fork_lock`'s futex mutex, whose whole state is
//! one word, so a `fork()` child can simply reset it (why not parking_lot:
//! see that crate). Its slow paths leave errno as it was, so the registry
//! is errno-transparent without a save on its fast path.
//!
//! The fork steps here are the shim's: only the fork handlers of
//! `lifecycle` reach them (through each module's `fork_lock` /
//! `fork_unlock` or `fork(step)`), in the order `pthread_atfork` runs
//! them, on the thread that forks; that is the contract `fork_lock`'s
//! unsafe steps ask for.

pub use fork_lock::{mutex, Mutex};

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

/// `fork()` prepare: takes `m` and keeps it taken until [`fork_release`]
/// in the parent or [`fork_reset`] in the child.
pub fn fork_hold<T>(m: &Mutex<T>) {
    fork_lock::fork_hold(m);
}

/// `fork()` in the parent: releases what [`fork_hold`] took.
pub fn fork_release<T>(m: &Mutex<T>) {
    // SAFETY: called by the parent's fork handler after the prepare
    // handler's fork_hold on this thread (module doc).
    unsafe { fork_lock::fork_release(m) };
}

/// `fork()` in the child: the lock is unlocked, whatever the parent's
/// threads were doing with it (they do not exist here).
pub fn fork_reset<T>(m: &Mutex<T>) {
    // SAFETY: called by the child's fork handler, its only thread, after
    // the prepare handler's fork_hold (module doc).
    unsafe { fork_lock::fork_reset(m) };
}
