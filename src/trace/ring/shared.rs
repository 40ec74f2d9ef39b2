//! The lock of a shared ring (`block` mode, every other ring taken): a
//! CAS holding the writer's id, waited for up to BLOCK_LIMIT.

use std::sync::atomic::{AtomicU32, Ordering};

use crate::trace::writer;

/// Takes a shared ring's lock for thread `tid`: `false` when this thread
/// holds it already (a signal handler's call in the middle of its record)
/// or it stays taken for BLOCK_LIMIT (a holder that cannot go on: the
/// record is dropped and counted rather than the program hung).
#[cold]
#[inline(never)]
pub(super) fn lock_shared(busy: &AtomicU32, tid: u32) -> bool {
    let me = tid.max(1);
    let mut spins = 0u32;
    let mut since = None;
    loop {
        match busy.compare_exchange_weak(0, me, Ordering::Acquire, Ordering::Relaxed) {
            Ok(_) => return true,
            Err(held) if held == me => return false,
            Err(_) => {}
        }
        spins += 1;
        if spins < 100 {
            std::hint::spin_loop();
            continue;
        }
        let since = *since.get_or_insert_with(std::time::Instant::now);
        if since.elapsed() > writer::BLOCK_LIMIT {
            return false;
        }
        // SAFETY: sched_yield has no preconditions.
        unsafe { libc::sched_yield() };
    }
}
