//! The panic boundary every export sits behind, and errno.
//!
//! A panic must never unwind into C: each export runs its body through one
//! of these helpers, which turn a panic into the function's error return
//! (errno `EIO`).

use core::ffi::c_int;
use std::panic::{catch_unwind, AssertUnwindSafe};

/// Sets the calling thread's errno.
pub fn set_errno(value: c_int) {
    // SAFETY: __errno_location always returns the calling thread's errno slot.
    unsafe { *libc::__errno_location() = value };
}

/// Reads the calling thread's errno.
pub fn errno() -> c_int {
    // SAFETY: as above.
    unsafe { *libc::__errno_location() }
}

/// Runs `f`; on a panic returns `on_panic` and sets errno to `EIO`.
pub fn call<T>(on_panic: T, f: impl FnOnce() -> T) -> T {
    match catch_unwind(AssertUnwindSafe(f)) {
        Ok(v) => v,
        Err(_) => {
            set_errno(libc::EIO);
            on_panic
        }
    }
}

/// librdmacm's convention: 0, or -1 with errno.
pub fn int(f: impl FnOnce() -> Result<(), c_int>) -> c_int {
    call(-1, || match f() {
        Ok(()) => 0,
        Err(e) => {
            set_errno(e);
            -1
        }
    })
}

/// A value, or -1 with errno.
pub fn value(f: impl FnOnce() -> Result<c_int, c_int>) -> c_int {
    call(-1, || match f() {
        Ok(v) => v,
        Err(e) => {
            set_errno(e);
            -1
        }
    })
}

/// A pointer, or NULL with errno.
pub fn ptr<T>(f: impl FnOnce() -> Result<*mut T, c_int>) -> *mut T {
    call(core::ptr::null_mut(), || match f() {
        Ok(p) => p,
        Err(e) => {
            set_errno(e);
            core::ptr::null_mut()
        }
    })
}

/// For `void` functions.
pub fn void(f: impl FnOnce()) {
    call((), f)
}

/// A system call's `-1`: its errno as `Err`.
pub fn check(ret: c_int) -> Result<c_int, c_int> {
    if ret < 0 {
        Err(errno())
    } else {
        Ok(ret)
    }
}
