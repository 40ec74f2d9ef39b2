//! `ibv_fork_init` and the fork-protection ranges; what a forked child
//! may still use.
//!
//! Like rdma-core on a kernel without copy-on-fork support: once memory was
//! registered (`ibv_dontfork_range` ran without fork protection), it is too
//! late and `ibv_fork_init` fails with `EINVAL`. The sim does no DMA, so it
//! records the state but does not `madvise` the ranges.
//!
//! A child's queues: with rdma-core's providers a child cannot use the QPs,
//! CQs and SRQs its parent made (their doorbells and buffers are not
//! mapped in it). In the sim their locks are: a parent thread that held
//! one at the instant of `fork()` never releases it in the child, so a
//! post or poll there would wait for ever. Each queue notes the process
//! generation ([`Born`]) it was made in; the child's fork handler starts a
//! new one, and the data path refuses a queue of an older one before
//! touching its locks (`EINVAL`, a poll `-EINVAL`): an error, not a hang.

use core::ffi::{c_int, c_void};
use std::sync::atomic::{AtomicU32, Ordering};

use parking_lot::Mutex;

struct State {
    enabled: bool,
    too_late: bool,
}

static STATE: Mutex<State> = Mutex::new(State {
    enabled: false,
    too_late: false,
});

/// `ibv_fork_init`: 0, or `EINVAL` once memory was registered.
pub fn init() -> c_int {
    let mut s = STATE.lock();
    if s.enabled {
        return 0;
    }
    if s.too_late {
        return libc::EINVAL;
    }
    s.enabled = true;
    0
}

/// `RDMAV_FORK_SAFE` / `IBV_FORK_SAFE`, honoured when devices are first listed.
pub fn init_from_env() {
    if std::env::var_os("RDMAV_FORK_SAFE").is_some() || std::env::var_os("IBV_FORK_SAFE").is_some()
    {
        static ONCE: std::sync::Once = std::sync::Once::new();
        ONCE.call_once(|| {
            if init() != 0 {
                eprintln!("libibverbs: Warning: fork()-safety requested but init failed");
            }
        });
    }
}

/// `ibv_dontfork_range`.
pub fn dontfork_range(_addr: *mut c_void, _len: usize) -> Result<(), c_int> {
    let mut s = STATE.lock();
    if !s.enabled {
        s.too_late = true;
    }
    Ok(())
}

/// `ibv_dofork_range`.
pub fn dofork_range(_addr: *mut c_void, _len: usize) -> c_int {
    0
}

/// `ibv_is_fork_initialized`: `IBV_FORK_DISABLED` (0) or `IBV_FORK_ENABLED` (1).
pub fn status() -> c_int {
    c_int::from(STATE.lock().enabled)
}

/// The process generation: 0 in the process that loaded the sim, one more
/// in each forked child (and its children).
static GENERATION: AtomicU32 = AtomicU32::new(0);

extern "C" fn child() {
    GENERATION.fetch_add(1, Ordering::Relaxed);
}

/// Registers the fork handlers: once, before the first queue is made
/// (from `ibv_open_device`).
pub fn watch() {
    crate::fork_lock::install();
    static ONCE: std::sync::Once = std::sync::Once::new();
    ONCE.call_once(|| {
        // SAFETY: registering a plain extern "C" handler.
        unsafe { libc::pthread_atfork(None, None, Some(child)) };
    });
}

/// The process generation a queue was made in.
#[derive(Clone, Copy, Debug)]
pub struct Born(u32);

impl Born {
    pub fn now() -> Born {
        Born(GENERATION.load(Ordering::Relaxed))
    }

    /// `EINVAL` for a queue a parent process made (see the module doc).
    #[inline]
    pub fn here(self) -> Result<(), c_int> {
        if self.0 == GENERATION.load(Ordering::Relaxed) {
            Ok(())
        } else {
            Err(libc::EINVAL)
        }
    }
}
