//! The report at `ibv_close_device`: the context's orphans as a tree.

use std::fmt::Write as _;

use crate::log::Level;
use crate::oom;
use crate::real::device_guid;
use crate::registry::contexts;
use crate::registry::objects;

use super::inventory::Tally;
use super::suppress::Suppressor;
use super::text::{device_text, log_lines, plural, say_if_truncated, tree};

/// Before `ibv_close_device(ctx)` is forwarded: remember the device's name
/// and GUID for the reports (the device may be gone after the close).
pub fn context_closing(ctx: usize) {
    // SAFETY: `describe_device` hands over the device of an open context.
    contexts::describe_device(ctx, |d| unsafe { device_guid(d) });
}

/// Called after a context closed successfully: reports its orphans, which
/// stay tracked as zombies.
pub fn context_closed(ctx: usize) {
    // The program's lines up to the close are in the log when it returns.
    crate::log_queue::flush();
    let talk = crate::log::enabled(Level::Info) || crate::log::enabled(Level::Warn);
    let dropped = oom::dropped();
    let mut sup = Suppressor::new();
    let mut tally = Tally::default();
    let n = objects::finish_close(ctx, |o| {
        if talk {
            tally.add(o, sup.obj(o));
        }
    });
    if n == 0 {
        say_if_untracked(ctx);
        return;
    }
    contexts::entomb(ctx);
    if !talk {
        return;
    }
    let info = contexts::get(ctx);
    let loud = tally.loud;
    if loud.total() == 0 {
        crate::log!(
            Level::Info,
            "ibv_close_device({ctx:#x}){}: {} left allocated, none a leak: {}",
            device_text(info.as_ref()),
            plural(tally.quiet.total(), "object", "objects"),
            tally.quiet
        );
        return;
    }
    // The headline needs no memory; the tree under it may not fit.
    crate::log!(
        Level::Warn,
        "leak: ibv_close_device({ctx:#x}){}: {} created on this context {} never destroyed ({loud}). \
         They stay allocated and unusable; destroying them now fails with EINVAL:",
        device_text(info.as_ref()),
        plural(loud.total(), "object", "objects"),
        if loud.total() == 1 { "was" } else { "were" },
    );
    let mut text = oom::Text::default();
    tree(&mut text, &tally, "  ", &mut sup);
    if tally.quiet.total() > 0 {
        let _ = write!(text, "\n  ({:#}, not shown)", tally.quiet);
    }
    log_lines(&text);
    say_if_truncated(dropped);
    say_if_untracked(ctx);
}

/// Out of memory, the registry may have left objects of this context
/// untracked: a close that found nothing (or less) must not read as clean.
fn say_if_untracked(ctx: usize) {
    let untracked = objects::untracked();
    if untracked > 0 {
        crate::log!(
            Level::Warn,
            "ibv_close_device({ctx:#x}): report incomplete: {untracked} objects of this process \
             were created while memory ran out and never tracked; some may be this context's"
        );
    }
}
