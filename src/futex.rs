//! The futex calls the shim's own waits are built on (the registry's lock,
//! the log's and the trace's writer threads): private futexes on words of
//! the shim's own memory. No allocation, no lock; the raw system call, so
//! async-signal-safe. A leaf module. Callers that must keep errno save it.

use std::sync::atomic::AtomicU32;
use std::time::Duration;

/// Sleeps while `word` is `seen`, at most `timeout` (none: until woken).
/// Returns at once if the word no longer is `seen`; may return early
/// (a signal, a spurious wake-up): callers look again.
pub fn wait(word: &AtomicU32, seen: u32, timeout: Option<Duration>) {
    let ts = timeout.map(|d| libc::timespec {
        tv_sec: d.as_secs() as libc::time_t,
        tv_nsec: d.subsec_nanos() as libc::c_long,
    });
    let tsp = ts
        .as_ref()
        .map_or(std::ptr::null(), |t| t as *const libc::timespec);
    // SAFETY: FUTEX_WAIT on a valid, aligned u32 of this process, with a
    // relative timeout that lives across the call (or none); the kernel
    // only reads the word.
    unsafe {
        libc::syscall(
            libc::SYS_futex,
            word.as_ptr(),
            libc::FUTEX_WAIT | libc::FUTEX_PRIVATE_FLAG,
            seen,
            tsp,
        )
    };
}

/// Wakes up to `n` threads sleeping on `word`.
pub fn wake(word: &AtomicU32, n: i32) {
    // SAFETY: FUTEX_WAKE on a valid, aligned u32 of this process; the
    // kernel only uses the address.
    unsafe {
        libc::syscall(
            libc::SYS_futex,
            word.as_ptr(),
            libc::FUTEX_WAKE | libc::FUTEX_PRIVATE_FLAG,
            n,
        )
    };
}
