//! Leak reports: what is still allocated when a context closes and when the
//! process exits.
//!
//! - At `ibv_close_device`: the context's orphans as a tree (each PD, then
//!   its MRs, QPs, SRQs, AHs; CQs and channels at the top), with counts by
//!   kind and each object's creation site, logged at warn. They stay in the
//!   table as zombies: destroying one later is refused as a use after close.
//! - At exit (a library destructor, after the program's `atexit` handlers):
//!   contexts never closed with what they own, device lists never freed,
//!   and the zombies; the JSON document (`IBV_SHIM_REPORT`, schema in
//!   `docs/leak-report.schema.json`); the leak exit code
//!   (`IBV_SHIM_LEAK_EXITCODE`). Only a process that used verbs reports.
//! - Suppressions (`IBV_SHIM_SUPPRESS`): `leak:<kind>:<pattern>` lines; a
//!   suppressed object is still in the JSON (`"suppressed": true`) but is
//!   not a leak for `leaked` or the exit code. Built-in ones
//!   (the `fault-rules` crate's `default_suppressions.txt`, off with `IBV_SHIM_DEFAULT_SUPPRESSIONS=0`)
//!   cover what a library keeps for the process's life on purpose, matched
//!   by the creating call's module only, and name it (`"kept_by"`).
//!
//! Creation sites are kept as bare return addresses and resolved with
//! `dladdr` only here, once per distinct address.

mod close;
mod cm;
mod exit;
mod inventory;
mod json;
mod ser;
mod site;
mod suppress;
mod text;
mod used;
mod vendor;

use once_cell::sync::Lazy;

pub use close::{context_closed, context_closing};
pub use exit::{at_exit, skipped_at_exit};
pub use site::{capture_frames, loaded_modules, note_departed, site, Module, Site};
pub use suppress::{
    default_suppressions, glob, parse_suppressions, Suppression, Why, DEFAULT_SUPPRESSIONS,
};
pub use text::Brief;
pub use used::{after_fork_in_child, note_use, used_verbs};
pub use vendor::vendor;

/// Initialises the report's lazy state up front (called before the fork
/// handlers are registered), so that a `fork()` can never catch one of them
/// half-initialised and leave the child waiting on it.
pub fn init() {
    Lazy::force(&site::SITES);
    Lazy::force(&site::DEPARTED);
    Lazy::force(&suppress::SUPPRESSIONS);
    Lazy::force(&suppress::DEFAULTS);
}

/// `fork()` prepare: a report being written in another thread holds the
/// creation-site cache; the child must not inherit it locked.
pub fn fork_lock() {
    crate::registry::lock::fork_hold(&site::SITES);
    crate::registry::lock::fork_hold(&site::DEPARTED);
}

/// `fork()`: the parent releases what `fork_lock` took, the child resets it.
pub fn fork_unlock(child: bool) {
    match child {
        true => {
            crate::registry::lock::fork_reset(&site::SITES);
            crate::registry::lock::fork_reset(&site::DEPARTED);
        }
        false => {
            crate::registry::lock::fork_release(&site::SITES);
            crate::registry::lock::fork_release(&site::DEPARTED);
        }
    }
}
