//! The resource registry: what the real library has handed out, in side
//! tables keyed by address (the program always holds the real library's own
//! pointers; the shim never wraps them).
//!
//! - [`devices`]: devices and device lists.
//! - [`contexts`]: contexts, open and closed.
//! - [`objects`]: everything created on a context (PDs, MRs, CQs, ...).
//!
//! No lock here is ever held across a forwarded call: exports look up or
//! record before and after the real call, never around it.

pub mod contexts;
pub mod devices;
pub mod objects;

/// `fork()` prepare: take every registry lock so the child never inherits
/// a table in the middle of a change.
pub fn fork_prepare() {
    devices::fork_lock();
    contexts::fork_lock();
    objects::fork_lock();
}

/// `fork()` in the parent: release the locks.
pub fn fork_parent() {
    objects::fork_unlock(false);
    contexts::fork_unlock(false);
    devices::fork_unlock(false);
}

/// `fork()` in the child: release the locks and start with empty tables;
/// a child reports only what it creates itself.
pub fn fork_child() {
    objects::fork_unlock(true);
    contexts::fork_unlock(true);
    devices::fork_unlock(true);
}
