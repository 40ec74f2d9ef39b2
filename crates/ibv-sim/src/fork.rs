//! `ibv_fork_init` and the fork-protection ranges.
//!
//! Like rdma-core on a kernel without copy-on-fork support: once memory was
//! registered (`ibv_dontfork_range` ran without fork protection), it is too
//! late and `ibv_fork_init` fails with `EINVAL`. The sim does no DMA, so it
//! records the state but does not `madvise` the ranges.

use core::ffi::{c_int, c_void};

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
