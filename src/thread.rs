//! Per-thread state: the kernel thread id (for log lines and creation
//! records) and whether this thread is inside a forwarded call. A leaf
//! module: the logger and the exports both use it.

use std::cell::Cell;

/// One thread-local, so one TLS lookup.
struct ThreadState {
    /// Cached `gettid()` (a system call); 0 = not read yet.
    tid: Cell<i32>,
    /// Forwarded calls this thread is inside (see [`nested`]).
    depth: Cell<u32>,
}

thread_local! {
    static THREAD: ThreadState = const { ThreadState { tid: Cell::new(0), depth: Cell::new(0) } };
}

/// This thread's kernel thread id, read once per thread.
#[inline]
pub fn tid() -> i32 {
    THREAD.with(|t| match t.tid.get() {
        0 => {
            // SAFETY: gettid cannot fail.
            let tid = unsafe { libc::gettid() };
            t.tid.set(tid);
            tid
        }
        tid => tid,
    })
}

/// Is this thread already inside a forwarded call? Then the real library
/// is calling one of its own exported verbs, which the preloaded shim
/// interposes (rdma-core's `ibv_reg_mr` calls `ibv_reg_mr_iova2`,
/// `ibv_create_ah_from_wc` calls `ibv_create_ah`, both through its PLT). The
/// outer export records and logs the object, so the inner one only forwards.
#[inline]
pub fn nested() -> bool {
    THREAD.with(|t| t.depth.get() != 0)
}

/// Runs a forwarded call with this thread marked as inside the real library.
#[inline]
pub fn inside<R>(f: impl FnOnce() -> R) -> R {
    THREAD.with(|t| t.depth.set(t.depth.get() + 1));
    let r = f();
    THREAD.with(|t| t.depth.set(t.depth.get() - 1));
    r
}

/// After `fork()`, in the child: its one thread has a new id.
pub fn after_fork_in_child() {
    THREAD.with(|t| t.tid.set(0));
}
