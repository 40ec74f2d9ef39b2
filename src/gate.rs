//! The fast-path gate: one word that says whether an export must leave
//! its fast path. Zero (one relaxed load) while logging is below debug, the
//! process has noted its first verbs call and nothing else asks for the
//! slow path. Each reason is a bit, set and cleared by its owner; the slow
//! path then asks the owner itself (`log::enabled`, `report::note_use`,
//! ...). A leaf module, so the logger and the report can both flip bits.
//!
//! A new reason (fault injection, a tracer) takes the next free bit: the
//! fast paths need no change, and cost nothing more while it is clear.

use std::sync::atomic::{AtomicU32, Ordering};

/// Logging at debug or above, or the level not read yet (`log`).
pub const LOG: u32 = 1;
/// This process has not noted its first verbs call (`report::used`).
pub const FIRST_USE: u32 = 2;
/// Fault injection armed: its hook runs on the slow path.
pub const FAULTS: u32 = 4;

static WORD: AtomicU32 = AtomicU32::new(LOG | FIRST_USE);

/// Must this call take the slow path?
#[inline(always)]
pub fn any() -> bool {
    WORD.load(Ordering::Relaxed) != 0
}

/// Is reason `bit` set?
#[inline(always)]
pub fn is_set(bit: u32) -> bool {
    WORD.load(Ordering::Relaxed) & bit != 0
}

pub fn set(bit: u32) {
    WORD.fetch_or(bit, Ordering::Relaxed);
}

pub fn clear(bit: u32) {
    WORD.fetch_and(!bit, Ordering::Relaxed);
}
