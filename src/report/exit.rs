//! The report at exit: the log's listing, then the JSON document and the
//! leak exit code.

use std::sync::atomic::Ordering;

use crate::config;
use crate::log::Level;
use crate::real::device_guid;
use crate::registry::contexts;

use super::inventory::Inventory;
use super::json::write_json;
use super::suppress::Suppressor;
use super::text::{exit_listing, log_lines, plural, say_if_truncated, summary_line, NotLeaks};
use super::used::USED;

/// Said instead of the exit report when the process exits from a signal
/// handler that interrupted a verbs call (see `lifecycle`). Allocates
/// nothing: the heap may be halfway through a change, so the line is left
/// out when the log file is not open yet.
pub fn skipped_at_exit() {
    if USED.load(Ordering::Relaxed) && crate::log::writable_without_allocating() {
        crate::log!(
            Level::Warn,
            "no leak report at exit: the process exited from a signal handler that \
             interrupted a verbs call, whose state (and the heap's) may be half changed"
        );
    }
}

/// The exit report (see the module docs); then the JSON document and the
/// leak exit code.
pub fn at_exit() {
    if !USED.load(Ordering::Relaxed) && !crate::faults::any_injected() {
        return;
    }
    // Read the device names while the open contexts still are.
    for (ctx, c) in contexts::all() {
        if c.open {
            // SAFETY: `describe_device` hands over the device of an open context.
            contexts::describe_device(ctx, |d| unsafe { device_guid(d) });
        }
    }
    let all = contexts::all();
    let zombies = contexts::zombies();
    let mut sup = Suppressor::new();
    let cm_leaked = super::cm::at_exit(&mut sup);
    let inv = Inventory::take(&all, &zombies, &mut sup);
    let leaked = inv.loud.total() > 0;

    if leaked && crate::log::enabled(Level::Warn) {
        let loud = inv.loud;
        crate::log!(
            Level::Warn,
            "leak report at exit: {} never freed ({loud}){}:",
            plural(loud.total(), "thing was", "things were"),
            NotLeaks(&inv.quiet)
        );
        log_lines(&exit_listing(&inv, &mut sup));
        // Last, as sanitizers end theirs: one line CI logs can grep for.
        crate::log!(Level::Warn, "{}", summary_line(&inv));
    } else if inv.quiet.total() > 0 {
        crate::log!(
            Level::Info,
            "exit: {} left allocated, none a leak: {}",
            plural(inv.quiet.total(), "thing", "things"),
            inv.quiet
        );
    }

    if let Some(path) = &config::get().report {
        if let Err(e) = write_json(path, &inv, &mut sup) {
            crate::log!(
                Level::Error,
                "IBV_SHIM_REPORT={}: cannot write the report: {e}",
                path.to_string_lossy()
            );
        }
    }

    say_if_truncated(inv.dropped);
    let untracked = crate::registry::objects::untracked();
    if untracked > 0 {
        crate::log!(
            Level::Warn,
            "report incomplete: {untracked} objects, contexts or device lists were created while memory ran out and never tracked"
        );
    }

    if let (true, Some(code)) = (leaked || cm_leaked, config::get().leak_exitcode) {
        // Destructors run before stdio is flushed at exit, and _exit skips
        // the flush: flush the program's output first.
        // SAFETY: fflush(NULL) flushes every stream; _exit never returns.
        unsafe {
            libc::fflush(std::ptr::null_mut());
            libc::_exit(code);
        }
    }
}
