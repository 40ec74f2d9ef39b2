//! The resource registry: what the real library has handed out, in side
//! tables keyed by address (the program always holds the real library's own
//! pointers; the shim never wraps them).
//!
//! - [`devices`]: devices and device lists.
//! - [`contexts`]: contexts, open and closed.
//! - [`objects`]: everything created on a context (PDs, MRs, CQs, ...).
//!
//! No lock here is ever held across a forwarded call: exports look up or
//! record before and after the real call, never around it. The locks are
//! [`lock`]'s futex mutexes, which a `fork()` child can reset.

pub mod contexts;
pub mod devices;
pub mod lock;
pub mod objects;

/// What [`begin_close`] decided.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Closing {
    /// Marked closed, its objects flagged: forward the close, then
    /// `objects::finish_close` (or [`abort_close`] if the real close failed).
    Proceed,
    /// Closed already (or being closed by another thread).
    AlreadyClosed,
    /// Not a context the registry knows.
    Unknown,
}

/// Before the real `ibv_close_device(ctx)`: marks the context closed and
/// flags its live objects as zombies (walking only its own objects), as
/// one step, so that of two racing closes only one is forwarded and a new
/// context that the allocator puts at the same address once the real close
/// freed it is never touched by this close.
pub fn begin_close(ctx: usize) -> Closing {
    if !contexts::closed(ctx) {
        return match contexts::get(ctx) {
            Some(_) => Closing::AlreadyClosed,
            None => Closing::Unknown,
        };
    }
    objects::begin_close(ctx);
    Closing::Proceed
}

/// The real close failed: the context and its objects are live again.
pub fn abort_close(ctx: usize) {
    objects::abort_close(ctx);
    contexts::reopen(ctx);
}

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

/// `fork()` in the child: reset the locks; the tables are kept, what was
/// there marked inherited (a child reports only what it creates itself).
pub fn fork_child() {
    objects::fork_unlock(true);
    contexts::fork_unlock(true);
    devices::fork_unlock(true);
}
