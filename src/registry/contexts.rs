//! Device contexts the shim has seen opened, and their state.
//!
//! A closed context stays here as a zombie while objects created on it are
//! still tracked, so that a later destroy of one of them is recognised as a
//! use after close instead of being forwarded into freed memory.

use std::collections::HashMap;

use parking_lot::RwLock;

/// What the registry knows about one context.
#[derive(Clone, Debug)]
pub struct ContextInfo {
    /// `struct ibv_device *` it was opened on.
    pub device: usize,
    /// Open, or closed by `ibv_close_device` (a zombie).
    pub open: bool,
    /// Thread that opened it and the return address of the opening call.
    pub tid: i32,
    pub caller: usize,
    /// Order of opening within the process, for stable reports.
    pub seq: u64,
}

static CONTEXTS: RwLock<Option<HashMap<usize, ContextInfo>>> = RwLock::new(None);
static SEQ: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);

pub fn opened(ctx: usize, device: usize, tid: i32, caller: usize) {
    let seq = SEQ.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let info = ContextInfo { device, open: true, tid, caller, seq };
    CONTEXTS.write().get_or_insert_with(HashMap::new).insert(ctx, info);
}

pub fn get(ctx: usize) -> Option<ContextInfo> {
    CONTEXTS.read().as_ref()?.get(&ctx).cloned()
}

/// Is `ctx` an open context?
pub fn is_open(ctx: usize) -> bool {
    CONTEXTS.read().as_ref().and_then(|m| m.get(&ctx)).is_some_and(|c| c.open)
}

/// Marks a context closed (it stays as a zombie).
pub fn closed(ctx: usize) {
    if let Some(c) = CONTEXTS.write().as_mut().and_then(|m| m.get_mut(&ctx)) {
        c.open = false;
    }
}

/// Drops a closed context that owns nothing any more.
pub fn forget(ctx: usize) {
    if let Some(m) = CONTEXTS.write().as_mut() {
        m.remove(&ctx);
    }
}

/// Every context known, in opening order.
pub fn all() -> Vec<(usize, ContextInfo)> {
    let mut v: Vec<_> = CONTEXTS
        .read()
        .as_ref()
        .map(|m| m.iter().map(|(k, v)| (*k, v.clone())).collect())
        .unwrap_or_default();
    v.sort_by_key(|(_, c)| c.seq);
    v
}

pub(super) fn fork_lock() {
    std::mem::forget(CONTEXTS.write());
}

pub(super) fn fork_unlock(child: bool) {
    // SAFETY: fork_lock took the write lock on this thread and forgot the guard.
    unsafe { CONTEXTS.force_unlock_write() };
    if child {
        // The child reports only what it creates itself.
        *CONTEXTS.write() = None;
    }
}
