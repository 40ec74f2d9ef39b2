//! The panic boundary every export sits behind, and errno handling.
//!
//! A panic must never unwind into C (that aborts the host program), so each
//! export runs its body inside `catch_unwind` and turns a panic into the
//! function's documented failure value with errno set. Panics are bugs in
//! the shim; the message goes to the log at ERROR.

use std::cell::Cell;
use std::panic::{catch_unwind, AssertUnwindSafe};

use crate::log::Level;

/// errno, saved so the shim's own work (logging, bookkeeping) never
/// clobbers what the real call left for the program.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Errno(pub i32);

impl Errno {
    #[inline]
    pub fn save() -> Errno {
        // SAFETY: __errno_location always returns this thread's errno slot.
        Errno(unsafe { *libc::__errno_location() })
    }

    #[inline]
    pub fn restore(self) {
        set_errno(self.0);
    }
}

#[inline]
pub fn set_errno(value: i32) {
    // SAFETY: __errno_location always returns this thread's errno slot.
    unsafe { *libc::__errno_location() = value };
}

thread_local! {
    /// Boundaries this thread is inside: an export's body (the forwarded
    /// call, the shim's bookkeeping) or the shim's own start-up and exit.
    static INSIDE: Cell<u32> = const { Cell::new(0) };
}

/// Is this thread inside one of the shim's boundaries? At exit it means
/// `exit()` was called from a signal handler that interrupted a verbs call
/// (qperf's SIGURG handler does): the real library, the shim's tables and
/// malloc may all be halfway through a change.
pub fn inside_boundary() -> bool {
    INSIDE.with(|n| n.get() != 0)
}

/// Runs an export's body; a panic becomes `on_panic` with errno `EIO`.
#[inline(always)]
pub fn boundary<T>(name: &'static str, on_panic: T, body: impl FnOnce() -> T) -> T {
    INSIDE.with(|n| n.set(n.get() + 1));
    let result = catch_unwind(AssertUnwindSafe(body));
    INSIDE.with(|n| n.set(n.get() - 1));
    match result {
        Ok(v) => v,
        Err(payload) => {
            let msg = payload
                .downcast_ref::<&str>()
                .copied()
                .or_else(|| payload.downcast_ref::<String>().map(String::as_str))
                .unwrap_or("(no message)");
            crate::log!(
                Level::Error,
                "{name}: internal error in the shim (panic: {msg}); call failed"
            );
            set_errno(libc::EIO);
            on_panic
        }
    }
}

/// The symbolic name of an errno value, for the log.
pub fn errno_name(e: i32) -> &'static str {
    match e {
        libc::EPERM => "EPERM",
        libc::ENOENT => "ENOENT",
        libc::ESRCH => "ESRCH",
        libc::EINTR => "EINTR",
        libc::EIO => "EIO",
        libc::ENXIO => "ENXIO",
        libc::EBADF => "EBADF",
        libc::EAGAIN => "EAGAIN",
        libc::ENOMEM => "ENOMEM",
        libc::EACCES => "EACCES",
        libc::EFAULT => "EFAULT",
        libc::EBUSY => "EBUSY",
        libc::EEXIST => "EEXIST",
        libc::ENODEV => "ENODEV",
        libc::EINVAL => "EINVAL",
        libc::ENFILE => "ENFILE",
        libc::EMFILE => "EMFILE",
        libc::ENOSPC => "ENOSPC",
        libc::ERANGE => "ERANGE",
        libc::ENOSYS => "ENOSYS",
        libc::EOPNOTSUPP => "EOPNOTSUPP",
        libc::EPROTONOSUPPORT => "EPROTONOSUPPORT",
        libc::ETIMEDOUT => "ETIMEDOUT",
        libc::EOVERFLOW => "EOVERFLOW",
        _ => "E?",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_panic_becomes_the_failure_value() {
        let r = boundary("t", -1, || -> i32 { panic!("boom") });
        assert_eq!(r, -1);
        assert_eq!(Errno::save().0, libc::EIO);
    }

    #[test]
    fn errno_round_trips() {
        set_errno(libc::ENOENT);
        let e = Errno::save();
        set_errno(0);
        e.restore();
        assert_eq!(Errno::save(), Errno(libc::ENOENT));
        assert_eq!(errno_name(libc::EBUSY), "EBUSY");
    }
}
