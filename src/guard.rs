//! The panic boundary every export sits behind, and how an export fails.
//!
//! A panic must never unwind into C (that aborts the host program), so each
//! export runs its body inside `catch_unwind` and turns a panic into the
//! function's documented failure value with errno set. Panics are bugs in
//! the shim; the message goes to the log at ERROR.
//!
//! An export's body is a closure returning `Result<R, Refused>` passed to
//! [`export`]: a refusal (bad input, already logged) and a real function
//! that cannot be called (`real::Unavailable`) are `Err`, so they work with
//! `?`, and `R` ([`CReturn`]) decides the value C sees on failure: NULL for
//! pointers, [`ErrnoCode`] for verbs that return an errno value,
//! [`MinusOne`] for -1, nothing for `void`. errno is set in every case.

use std::panic::{catch_unwind, AssertUnwindSafe};

use crate::log::Level;

pub use crate::errno::{errno_name, set_errno, Errno};

/// An export's call ended without the real library's answer: refused (bad
/// input; the refusal is logged where it is decided) or the real function
/// is unavailable. Carries the errno the caller gets.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Refused(pub i32);

/// What an export returns to C, and its failure value. The body's `Ok`
/// type decides, so no export restates its failure convention.
pub trait CReturn {
    /// The C return type.
    type C;
    /// The value for C.
    fn into_c(self) -> Self::C;
    /// The value for C when the call fails with `errno` (set by the caller).
    fn failure(errno: i32) -> Self::C;
}

impl<T> CReturn for *mut T {
    type C = Self;
    #[inline(always)]
    fn into_c(self) -> Self {
        self
    }
    #[inline(always)]
    fn failure(_: i32) -> Self {
        std::ptr::null_mut()
    }
}

impl<T> CReturn for *const T {
    type C = Self;
    #[inline(always)]
    fn into_c(self) -> Self {
        self
    }
    #[inline(always)]
    fn failure(_: i32) -> Self {
        std::ptr::null()
    }
}

impl CReturn for () {
    type C = ();
    #[inline(always)]
    fn into_c(self) {}
    #[inline(always)]
    fn failure(_: i32) {}
}

/// A `__be64` GUID: 0 on failure.
impl CReturn for u64 {
    type C = u64;
    #[inline(always)]
    fn into_c(self) -> u64 {
        self
    }
    #[inline(always)]
    fn failure(_: i32) -> u64 {
        0
    }
}

/// A verb that returns 0 or an errno value (rdma-core's destroy, modify
/// and query verbs): on failure the errno itself.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ErrnoCode(pub std::ffi::c_int);

impl CReturn for ErrnoCode {
    type C = std::ffi::c_int;
    #[inline(always)]
    fn into_c(self) -> std::ffi::c_int {
        self.0
    }
    #[inline(always)]
    fn failure(errno: i32) -> std::ffi::c_int {
        errno
    }
}

/// A verb that returns -1 with errno on failure.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct MinusOne(pub std::ffi::c_int);

impl CReturn for MinusOne {
    type C = std::ffi::c_int;
    #[inline(always)]
    fn into_c(self) -> std::ffi::c_int {
        self.0
    }
    #[inline(always)]
    fn failure(_: i32) -> std::ffi::c_int {
        -1
    }
}

/// Runs an export's body behind the panic boundary: `Err(Refused(e))`
/// becomes `R`'s failure value with errno `e`; a panic, the failure value
/// with errno `EIO`.
#[inline(always)]
pub fn export<R: CReturn>(name: &'static str, body: impl FnOnce() -> Result<R, Refused>) -> R::C {
    boundary(name, R::failure(libc::EIO), || match body() {
        Ok(v) => v.into_c(),
        Err(Refused(e)) => {
            set_errno(e);
            R::failure(e)
        }
    })
}

/// Is this thread inside one of the shim's boundaries? At exit it means
/// `exit()` was called from a signal handler that interrupted a verbs call
/// (qperf's SIGURG handler does): the real library, the shim's tables and
/// malloc may all be halfway through a change.
pub fn inside_boundary() -> bool {
    crate::thread::inside_boundary()
}

/// Runs an export's body; a panic becomes `on_panic` with errno `EIO`.
#[inline(always)]
pub fn boundary<T>(name: &'static str, on_panic: T, body: impl FnOnce() -> T) -> T {
    crate::thread::enter_boundary();
    let result = catch_unwind(AssertUnwindSafe(body));
    crate::thread::leave_boundary();
    match result {
        Ok(v) => v,
        Err(payload) => {
            panicked(name, payload);
            on_panic
        }
    }
}

#[cold]
#[inline(never)]
fn panicked(name: &str, payload: Box<dyn std::any::Any + Send>) {
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
    fn the_return_type_decides_the_failure_value() {
        set_errno(0);
        let p = export("t", || -> Result<*mut u8, Refused> {
            Err(Refused(libc::EINVAL))
        });
        assert!(p.is_null());
        assert_eq!(Errno::save().0, libc::EINVAL);
        assert_eq!(
            export("t", || -> Result<ErrnoCode, Refused> {
                Err(Refused(libc::ENOSYS))
            }),
            libc::ENOSYS
        );
        assert_eq!(
            export("t", || -> Result<MinusOne, Refused> {
                Err(Refused(libc::EOPNOTSUPP))
            }),
            -1
        );
        assert_eq!(Errno::save().0, libc::EOPNOTSUPP);
        assert_eq!(
            export("t", || -> Result<ErrnoCode, Refused> { panic!("boom") }),
            libc::EIO
        );
        set_errno(7);
        assert_eq!(export("t", || Ok(MinusOne(3))), 3);
        assert_eq!(Errno::save().0, 7, "success leaves errno alone");
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
