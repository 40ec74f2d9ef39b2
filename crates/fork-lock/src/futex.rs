//! The futex calls waits are built on: no allocation, no lock, the raw
//! system call, so async-signal-safe. A failed call sets errno: callers
//! that must keep errno save it.
//!
//! `wait`/`wake` are private futexes (the word and every waiter in this
//! process); `wait_shared`/`wake_shared` are for a word of a mapping
//! shared with other processes, whose waiters may be in any of them.

use core::sync::atomic::AtomicU32;
use core::time::Duration;

/// Sleeps while `word` is `seen`, at most `timeout` (none: until woken).
/// Returns at once if the word no longer is `seen`; may return early
/// (a signal, a spurious wake-up): callers look again.
pub fn wait(word: &AtomicU32, seen: u32, timeout: Option<Duration>) {
    futex_wait(
        word,
        libc::FUTEX_WAIT | libc::FUTEX_PRIVATE_FLAG,
        seen,
        timeout,
    );
}

/// Wakes up to `n` threads sleeping on `word` with [`wait`].
pub fn wake(word: &AtomicU32, n: i32) {
    futex_wake(word, libc::FUTEX_WAKE | libc::FUTEX_PRIVATE_FLAG, n);
}

/// [`wait`] on a word of shared memory, woken by [`wake_shared`] from
/// any process that maps it.
pub fn wait_shared(word: &AtomicU32, seen: u32, timeout: Option<Duration>) {
    futex_wait(word, libc::FUTEX_WAIT, seen, timeout);
}

/// Wakes up to `n` threads of any process sleeping on `word` with
/// [`wait_shared`].
pub fn wake_shared(word: &AtomicU32, n: i32) {
    futex_wake(word, libc::FUTEX_WAKE, n);
}

fn futex_wait(word: &AtomicU32, op: libc::c_int, seen: u32, timeout: Option<Duration>) {
    let ts = timeout.map(|d| libc::timespec {
        tv_sec: d.as_secs().min(libc::time_t::MAX as u64) as libc::time_t,
        tv_nsec: d.subsec_nanos() as libc::c_long,
    });
    let tsp = ts
        .as_ref()
        .map_or(core::ptr::null(), |t| t as *const libc::timespec);
    // SAFETY: FUTEX_WAIT on a valid, aligned u32 (a reference), with a
    // relative timeout that lives across the call (or none); the kernel
    // only reads the word and the timeout.
    unsafe { libc::syscall(libc::SYS_futex, word.as_ptr(), op, seen, tsp) };
}

fn futex_wake(word: &AtomicU32, op: libc::c_int, n: i32) {
    // SAFETY: FUTEX_WAKE on a valid, aligned u32 (a reference); the
    // kernel only uses its address.
    unsafe { libc::syscall(libc::SYS_futex, word.as_ptr(), op, n) };
}
