//! Device contexts the shim has seen opened (or imported), and their state.
//!
//! A closed context stays here marked closed, so a second close is told
//! from a pointer that never was a context. One closed with objects still
//! tracked on it is also copied into the list of zombie contexts, which the
//! exit report uses to describe those orphans even after the context's
//! address has been reused by a new context.
//!
//! Only opening, closing and reports come here: the create/destroy path
//! never does, so the plain lock costs nothing where it matters.

use std::collections::HashMap;
use std::ffi::CStr;
use std::sync::atomic::{AtomicU64, Ordering};

use parking_lot::RwLock;
use verbs_abi::{ibv_context, ibv_device};

use super::objects::now_ms;

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
    /// When it was opened (see `objects::now_ms`).
    pub time_ms: u64,
    /// Made by `ibv_import_device` rather than `ibv_open_device`.
    pub imported: bool,
    /// The device's name and GUID (network byte order), read while the
    /// context was open (see [`describe_device`]), for the reports.
    pub device_name: Option<String>,
    pub guid: Option<u64>,
    /// Opened by the parent before a `fork()`: the child may use and close
    /// it, but it is the parent's to report, not the child's.
    pub inherited: bool,
}

static CONTEXTS: RwLock<Option<HashMap<usize, ContextInfo>>> = RwLock::new(None);
static ZOMBIES: RwLock<Vec<(usize, ContextInfo)>> = RwLock::new(Vec::new());
static SEQ: AtomicU64 = AtomicU64::new(0);

fn add(ctx: usize, device: usize, tid: i32, caller: usize, imported: bool) {
    let seq = SEQ.fetch_add(1, Ordering::Relaxed);
    let info = ContextInfo {
        device,
        open: true,
        tid,
        caller,
        seq,
        time_ms: now_ms(),
        imported,
        device_name: None,
        guid: None,
        inherited: false,
    };
    CONTEXTS
        .write()
        .get_or_insert_with(HashMap::new)
        .insert(ctx, info);
}

/// A context returned by `ibv_open_device`.
pub fn opened(ctx: usize, device: usize, tid: i32, caller: usize) {
    add(ctx, device, tid, caller, false);
}

/// A context returned by `ibv_import_device`.
pub fn imported(ctx: usize, device: usize, tid: i32, caller: usize) {
    add(ctx, device, tid, caller, true);
}

pub fn get(ctx: usize) -> Option<ContextInfo> {
    CONTEXTS.read().as_ref()?.get(&ctx).cloned()
}

/// Is `ctx` an open context?
pub fn is_open(ctx: usize) -> bool {
    CONTEXTS
        .read()
        .as_ref()
        .and_then(|m| m.get(&ctx))
        .is_some_and(|c| c.open)
}

/// Reads the device name and GUID of an open context into its entry, for
/// the reports (the device may be freed once the context is closed).
/// `guid_of` asks the real library when the GUID is not cached already.
pub fn describe_device(ctx: usize, guid_of: impl FnOnce(*mut ibv_device) -> Option<u64>) {
    let Some(info) = get(ctx) else { return };
    if info.device_name.is_some() || !info.open {
        return;
    }
    // SAFETY: ctx is an open context from the real library, so its device
    // pointer is valid; `name` is a NUL-terminated char[64] in the device.
    let (device, name) = unsafe {
        let dev = (*(ctx as *const ibv_context)).device;
        if dev.is_null() {
            return;
        }
        (
            dev,
            CStr::from_ptr((*dev).name.as_ptr())
                .to_string_lossy()
                .into_owned(),
        )
    };
    let guid = super::devices::cached_guid(device).or_else(|| guid_of(device));
    if let Some(c) = CONTEXTS.write().as_mut().and_then(|m| m.get_mut(&ctx)) {
        c.device_name = Some(name);
        c.guid = guid.filter(|&g| g != 0);
    }
}

/// Marks an open context closed (it stays, so a second close is
/// recognised). Called *before* the real close, atomically: of two racing
/// closes only one is forwarded, and a new context that the allocator puts
/// at the same address once the real close freed it is never marked closed
/// by the old close. False when it was not open. [`reopen`] undoes it when
/// the real close fails.
pub fn closed(ctx: usize) -> bool {
    match CONTEXTS.write().as_mut().and_then(|m| m.get_mut(&ctx)) {
        Some(c) if c.open => {
            c.open = false;
            true
        }
        _ => false,
    }
}

/// The real close of a context [`closed`] marked failed: it is open again.
pub fn reopen(ctx: usize) {
    if let Some(c) = CONTEXTS.write().as_mut().and_then(|m| m.get_mut(&ctx)) {
        c.open = true;
    }
}

/// Records that `ctx` was closed with objects still tracked on it.
pub fn entomb(ctx: usize) {
    if let Some(info) = get(ctx) {
        ZOMBIES.write().push((ctx, info));
    }
}

/// Contexts closed with objects still tracked, in closing order.
pub fn zombies() -> Vec<(usize, ContextInfo)> {
    ZOMBIES.read().clone()
}

/// Every context this process must report on (not those inherited across
/// `fork()`), in opening order.
pub fn all() -> Vec<(usize, ContextInfo)> {
    let mut v: Vec<_> = CONTEXTS
        .read()
        .as_ref()
        .map(|m| {
            m.iter()
                .filter(|(_, v)| !v.inherited)
                .map(|(k, v)| (*k, v.clone()))
                .collect()
        })
        .unwrap_or_default();
    v.sort_by_key(|(_, c)| c.seq);
    v
}

pub(super) fn fork_lock() {
    std::mem::forget(CONTEXTS.write());
    std::mem::forget(ZOMBIES.write());
}

pub(super) fn fork_unlock(child: bool) {
    // SAFETY: fork_lock took both write locks on this thread and forgot the guards.
    unsafe {
        CONTEXTS.force_unlock_write();
        ZOMBIES.force_unlock_write();
    }
    if child {
        // The child reports only what it creates itself, but may still use
        // and close the contexts it inherited: keep the open ones, marked.
        if let Some(m) = CONTEXTS.write().as_mut() {
            m.retain(|_, c| c.open);
            m.values_mut().for_each(|c| c.inherited = true);
        }
        ZOMBIES.write().clear();
    }
}
