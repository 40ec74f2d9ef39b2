//! Device contexts the shim has seen opened (or imported), and their state.
//!
//! A closed context stays here marked closed, so a second close is told
//! from a pointer that never was a context. One closed with objects still
//! tracked on it is also copied into the list of zombie contexts, which the
//! exit report uses to describe those orphans even after the context's
//! address has been reused by a new context.
//!
//! Every verb that takes a context asks whether it is open: that question
//! is answered without a lock by [`is_open_fast`], a small lock-free set of
//! open contexts; only a context missing from it (closed, unknown, or one
//! that did not fit) takes the lock of the full table.
//!
//! A `fork()` child keeps every context, open or closed, marked inherited:
//! it may use and close the open ones, a closed one stays refused, and only
//! its own are its to report.

use std::collections::HashMap;
use std::ffi::CStr;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};

use verbs_abi::{ibv_context, ibv_device};

use super::lock::{self, mutex, Mutex};
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

static CONTEXTS: Mutex<Option<HashMap<usize, ContextInfo>>> = mutex(None);
static ZOMBIES: Mutex<Vec<(usize, ContextInfo)>> = mutex(Vec::new());
static SEQ: AtomicU64 = AtomicU64::new(0);

// --- the lock-free set of open contexts ------------------------------------------

/// Slots of the set; a context lives in one of the [`WINDOW`] slots from
/// its home slot, or not at all (then the full table answers).
const FAST: usize = 1024;
const WINDOW: usize = 8;
/// A slot whose context was closed (0 is a slot never used).
const TOMB: usize = 1;
static OPEN: [AtomicUsize; FAST] = [const { AtomicUsize::new(0) }; FAST];

#[inline]
fn home(ctx: usize) -> usize {
    crate::addr_table::hash(ctx as u64, 10)
}

/// Is `ctx` an open context? A few loads, no lock, no write. False also
/// for an open context that did not fit in the set: ask [`get`] then.
#[inline]
pub fn is_open_fast(ctx: usize) -> bool {
    if ctx <= TOMB {
        return false;
    }
    let h = home(ctx);
    for k in 0..WINDOW {
        match OPEN[(h + k) % FAST].load(Ordering::Acquire) {
            v if v == ctx => return true,
            // A context is stored at the first free slot of its window and
            // a slot never becomes 0 again: none is further on.
            0 => return false,
            _ => {}
        }
    }
    false
}

/// Adds `ctx` to the set (the caller holds the CONTEXTS lock, so there is
/// one writer at a time).
fn fast_add(ctx: usize) {
    if is_open_fast(ctx) {
        return;
    }
    let h = home(ctx);
    for k in 0..WINDOW {
        let slot = &OPEN[(h + k) % FAST];
        let v = slot.load(Ordering::Relaxed);
        if v == 0 || v == TOMB {
            slot.store(ctx, Ordering::Release);
            return;
        }
    }
}

/// Takes `ctx` out of the set (the caller holds the CONTEXTS lock).
fn fast_remove(ctx: usize) {
    let h = home(ctx);
    for k in 0..WINDOW {
        let slot = &OPEN[(h + k) % FAST];
        match slot.load(Ordering::Relaxed) {
            v if v == ctx => return slot.store(TOMB, Ordering::Release),
            0 => return,
            _ => {}
        }
    }
}

// --- the table ------------------------------------------------------------------------

/// False when memory ran out (the context is then not tracked).
fn add(ctx: usize, device: usize, tid: i32, caller: usize, imported: bool) -> bool {
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
    let mut guard = CONTEXTS.lock();
    let map = guard.get_or_insert_with(HashMap::new);
    if !map.contains_key(&ctx) && crate::oom::without_reserve(|| map.try_reserve(1)).is_err() {
        drop(guard);
        super::objects::note_untracked();
        return false;
    }
    map.insert(ctx, info);
    fast_add(ctx);
    true
}

/// A context returned by `ibv_open_device` (or `verbs_open_device`).
pub fn opened(ctx: usize, device: usize, tid: i32, caller: usize) -> bool {
    add(ctx, device, tid, caller, false)
}

/// A context returned by `ibv_import_device`.
pub fn imported(ctx: usize, device: usize, tid: i32, caller: usize) -> bool {
    add(ctx, device, tid, caller, true)
}

pub fn get(ctx: usize) -> Option<ContextInfo> {
    if ctx <= TOMB {
        return None;
    }
    CONTEXTS.lock().as_ref()?.get(&ctx).cloned()
}

/// Is `ctx` an open context?
pub fn is_open(ctx: usize) -> bool {
    is_open_fast(ctx)
        || CONTEXTS
            .lock()
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
    if let Some(c) = CONTEXTS.lock().as_mut().and_then(|m| m.get_mut(&ctx)) {
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
pub(super) fn closed(ctx: usize) -> bool {
    let mut map = CONTEXTS.lock();
    match map.as_mut().and_then(|m| m.get_mut(&ctx)) {
        Some(c) if c.open => {
            c.open = false;
            fast_remove(ctx);
            true
        }
        _ => false,
    }
}

/// The real close of a context [`closed`] marked failed: it is open again.
pub(super) fn reopen(ctx: usize) {
    let mut map = CONTEXTS.lock();
    if let Some(c) = map.as_mut().and_then(|m| m.get_mut(&ctx)) {
        c.open = true;
        fast_add(ctx);
    }
}

/// Records that `ctx` was closed with objects still tracked on it.
pub fn entomb(ctx: usize) {
    if let Some(info) = get(ctx) {
        let mut z = ZOMBIES.lock();
        // Out of memory: the exit report names these orphans' context by
        // address only.
        if z.try_reserve(1).is_ok() {
            z.push((ctx, info));
        }
    }
}

/// Contexts closed with objects still tracked, in closing order.
pub fn zombies() -> Vec<(usize, ContextInfo)> {
    ZOMBIES.lock().clone()
}

/// Every context this process must report on (not those inherited across
/// `fork()`), in opening order.
pub fn all() -> Vec<(usize, ContextInfo)> {
    let mut v: Vec<_> = CONTEXTS
        .lock()
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
    lock::fork_hold(&CONTEXTS);
    lock::fork_hold(&ZOMBIES);
}

pub(super) fn fork_unlock(child: bool) {
    if !child {
        lock::fork_release(&CONTEXTS);
        lock::fork_release(&ZOMBIES);
        return;
    }
    lock::fork_reset(&CONTEXTS);
    lock::fork_reset(&ZOMBIES);
    // The child reports only what it creates itself, but may still use and
    // close the open contexts it inherited, and must still refuse the
    // closed ones: keep them all, marked.
    if let Some(m) = CONTEXTS.lock().as_mut() {
        m.values_mut().for_each(|c| c.inherited = true);
    }
    ZOMBIES
        .lock()
        .iter_mut()
        .for_each(|(_, c)| c.inherited = true);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_fast_set_follows_open_and_close() {
        let ctxs: Vec<usize> = (1..200).map(|i| 0x5600_0000_0000 + i * 0x1000).collect();
        for &c in &ctxs {
            assert!(opened(c, 0x10, 1, 0));
        }
        // Some may not fit in their window; every one is open all the same.
        assert!(ctxs.iter().all(|&c| is_open(c)));
        assert!(ctxs.iter().filter(|&&c| is_open_fast(c)).count() > 150);
        for &c in &ctxs[..100] {
            assert!(closed(c));
            assert!(!closed(c), "a second close is refused");
        }
        assert!(ctxs[..100].iter().all(|&c| !is_open_fast(c) && !is_open(c)));
        assert!(ctxs[100..].iter().all(|&c| is_open(c)));
        reopen(ctxs[0]);
        assert!(is_open(ctxs[0]));
        assert!(!is_open_fast(0) && !is_open_fast(TOMB) && !is_open(0x1234));
    }
}
