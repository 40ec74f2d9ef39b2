//! The report at exit: the log's listing, then the JSON document and the
//! leak exit code.

use std::fmt::Write as _;
use std::sync::atomic::Ordering;

use crate::config;
use crate::log::Level;
use crate::oom;
use crate::registry::contexts;

use super::close::guid_of;
use super::inventory::{How, Inventory};
use super::json::write_json;
use super::site::site;
use super::suppress::Suppressor;
use super::text::{device_text, log_lines, plural, say_if_truncated, tree, why_text, NotLeaks};
use super::used::USED;

/// The exit report (see the module docs); then the JSON document and the
/// leak exit code.
pub fn at_exit() {
    if !USED.load(Ordering::Relaxed) {
        return;
    }
    // Read the device names while the open contexts still are.
    for (ctx, c) in contexts::all() {
        if c.open {
            contexts::describe_device(ctx, guid_of);
        }
    }
    let all = contexts::all();
    let zombies = contexts::zombies();
    let mut sup = Suppressor::new();
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
        let mut text = oom::Text::default();
        for g in &inv.groups {
            let owned = g.tally.loud;
            let ctx = g.ctx;
            match (g.how, g.info) {
                (How::Open, Some(c)) => {
                    let quiet = inv
                        .open
                        .iter()
                        .find(|(k, _, _)| *k == ctx)
                        .and_then(|(_, _, q)| *q);
                    if quiet.is_some() && owned.total() == 0 {
                        continue;
                    }
                    let _ = write!(
                        text,
                        "\n  context {ctx:#x}{} opened by thread {} at {} was never closed{}",
                        device_text(g.info),
                        c.tid,
                        site(c.caller),
                        why_text(quiet)
                    );
                    if owned.total() > 0 {
                        let _ = write!(
                            text,
                            "; it still owns {} ({owned}):",
                            plural(owned.total(), "object", "objects")
                        );
                    }
                }
                (How::Closed, _) if owned.total() > 0 => {
                    let _ = write!(
                        text,
                        "\n  context {ctx:#x}{} was closed with {} still allocated ({owned}), reported at close:",
                        device_text(g.info),
                        plural(owned.total(), "object", "objects"),
                    );
                }
                (How::Foreign, _) if owned.total() > 0 => {
                    let _ = write!(
                        text,
                        "\n  context {ctx:#x} (not opened by this process) has {} never destroyed ({owned}):",
                        plural(owned.total(), "object", "objects"),
                    );
                }
                _ => continue,
            }
            tree(&mut text, &g.tally, "    ", &mut sup);
        }
        for (l, _) in inv.lists.iter().filter(|(_, quiet)| quiet.is_none()) {
            let _ = write!(
                text,
                "\n  device list {:#x} ({}) from ibv_get_device_list by thread {} at {} was never freed",
                l.list,
                plural(l.count, "device", "devices"),
                l.tid,
                site(l.caller)
            );
        }
        log_lines(&text);
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

    if let (true, Some(code)) = (leaked, config::get().leak_exitcode) {
        // Destructors run before stdio is flushed at exit, and _exit skips
        // the flush: flush the program's output first.
        // SAFETY: fflush(NULL) flushes every stream; _exit never returns.
        unsafe {
            libc::fflush(std::ptr::null_mut());
            libc::_exit(code);
        }
    }
}
