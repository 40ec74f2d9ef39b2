//! Devices and device lists the real library has handed out.
//!
//! Devices are few and live as long as the process, so they sit in a fixed
//! array scanned without a lock: the check that guards every device call
//! against NULL and unknown pointers costs a few loads, well inside the
//! budget of a forwarded call. Device lists are tracked so that a double
//! free is refused and lists never freed show up in the exit report.

use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};

use verbs_abi::ibv_device;

use super::lock::{self, mutex, Mutex};

const MAX_DEVICES: usize = 256;

struct Slot {
    device: AtomicUsize,
    /// The GUID (network byte order) once known; 0 = not yet read.
    guid: AtomicU64,
}

#[allow(clippy::declare_interior_mutable_const)]
const EMPTY: Slot = Slot {
    device: AtomicUsize::new(0),
    guid: AtomicU64::new(0),
};
static DEVICES: [Slot; MAX_DEVICES] = [EMPTY; MAX_DEVICES];
static COUNT: AtomicUsize = AtomicUsize::new(0);
static ADD: Mutex<()> = mutex(());

/// A direct-mapped index of `DEVICES` by address hash, for the device
/// check on the fast path: one hash and one compare, whatever the device's
/// place in the list. A device whose slot another one took is found by
/// [`is_known`]'s scan instead (the same answer, a few loads more).
const FAST_BITS: u32 = 10;
#[allow(clippy::declare_interior_mutable_const)]
const FAST_EMPTY: AtomicUsize = AtomicUsize::new(0);
static FAST: [AtomicUsize; 1 << FAST_BITS] = {
    let mut fast = [FAST_EMPTY; 1 << FAST_BITS];
    // NULL hashes to slot 0, so slot 0 starts with a value that hashes
    // elsewhere: an empty slot never matches the address that maps to it.
    assert!(fast_index(1) != 0 && fast_index(0) == 0);
    fast[0] = AtomicUsize::new(1);
    fast
};

#[inline(always)]
const fn fast_index(device: usize) -> usize {
    crate::addr_table::hash(device as u64, FAST_BITS)
}

/// Is this a device the real library handed out, with its getters
/// resolved (see [`allow_fast`])? One hash and one load; false may still be
/// a known device (see `FAST`): ask [`is_known`].
#[inline(always)]
pub fn is_known_fast(device: *const ibv_device) -> bool {
    FAST[fast_index(device as usize)].load(Ordering::Relaxed) == device as usize
}

fn slot(device: *const ibv_device) -> Option<&'static Slot> {
    let n = COUNT.load(Ordering::Acquire).min(MAX_DEVICES);
    DEVICES[..n]
        .iter()
        .find(|s| s.device.load(Ordering::Relaxed) == device as usize)
}

/// Has the real library handed out this device? (Always true once the
/// table is full, so that a machine with hundreds of devices still works.)
#[inline]
pub fn is_known(device: *const ibv_device) -> bool {
    is_known_fast(device) || slot(device).is_some() || COUNT.load(Ordering::Relaxed) >= MAX_DEVICES
}

/// Records a device from a list or a context.
pub fn remember(device: *mut ibv_device) {
    if device.is_null() || slot(device).is_some() {
        return;
    }
    let _g = ADD.lock();
    if slot(device).is_some() {
        return;
    }
    let n = COUNT.load(Ordering::Relaxed);
    if n < MAX_DEVICES {
        DEVICES[n].device.store(device as usize, Ordering::Relaxed);
        COUNT.store(n + 1, Ordering::Release);
    }
}

/// Lets `device` (remembered) take the getters' fast path: the caller has
/// resolved the real getters (`exports::device`), which the fast path then
/// calls unchecked.
pub fn allow_fast(device: *mut ibv_device) {
    if is_known_fast(device) {
        return;
    }
    let _g = ADD.lock();
    let fast = &FAST[fast_index(device as usize)];
    // Still the initial value (0, or 1 in slot 0): no device there.
    if fast.load(Ordering::Relaxed) <= 1 {
        fast.store(device as usize, Ordering::Relaxed);
    }
}

/// The device's GUID if the program (or the debug log) has read it.
pub fn cached_guid(device: *const ibv_device) -> Option<u64> {
    slot(device)
        .map(|s| s.guid.load(Ordering::Relaxed))
        .filter(|&g| g != 0)
}

pub fn cache_guid(device: *const ibv_device, guid_be: u64) {
    if let Some(s) = slot(device) {
        s.guid.store(guid_be, Ordering::Relaxed);
    }
}

/// A list returned by `ibv_get_device_list` and not yet freed.
#[derive(Clone, Debug)]
pub struct LiveList {
    pub list: usize,
    pub count: usize,
    pub tid: i32,
    pub caller: usize,
    /// CLOCK_MONOTONIC_COARSE milliseconds (`objects::now_ms`).
    pub time_ms: u64,
    /// Returned to the parent before a `fork()`: the child may free it, but
    /// it is not the child's leak.
    pub inherited: bool,
}

static LISTS: Mutex<Vec<LiveList>> = mutex(Vec::new());

/// False when it could not be tracked (out of memory): it is then freed
/// unchecked, as a list the shim never saw.
pub fn list_returned(list: LiveList) -> bool {
    let mut lists = LISTS.lock();
    if crate::oom::without_reserve(|| lists.try_reserve(1)).is_err() {
        drop(lists);
        UNTRACKED_LISTS.fetch_add(1, Ordering::Relaxed);
        super::objects::note_untracked();
        return false;
    }
    lists.push(list);
    true
}

/// A list the shim could not track (out of memory) is being freed: true
/// while such lists exist, so that the free is forwarded, not refused.
pub fn untracked_lists() -> bool {
    UNTRACKED_LISTS.load(Ordering::Relaxed) > 0
}

/// Lists handed out but not tracked for want of memory.
pub static UNTRACKED_LISTS: AtomicUsize = AtomicUsize::new(0);

/// Forgets a list; false when it is not a live list (double free, or not
/// from `ibv_get_device_list`).
pub fn list_freed(list: usize) -> bool {
    let mut lists = LISTS.lock();
    match lists.iter().position(|l| l.list == list) {
        Some(i) => {
            lists.swap_remove(i);
            true
        }
        None => false,
    }
}

/// Lists never freed, for the exit report (not those inherited across `fork()`).
pub fn live_lists() -> Vec<LiveList> {
    LISTS
        .lock()
        .iter()
        .filter(|l| !l.inherited)
        .cloned()
        .collect()
}

/// `fork()` protocol (see `registry::fork_prepare`): hold the locks across
/// the fork so the child never inherits a half-made change.
pub(super) fn fork_lock() {
    lock::fork_hold(&ADD);
    lock::fork_hold(&LISTS);
}

/// Releases what `fork_lock` took; in the child, the parent's lists are
/// marked inherited: the child may free them, but they are not its leaks.
pub(super) fn fork_unlock(child: bool) {
    if !child {
        lock::fork_release(&ADD);
        lock::fork_release(&LISTS);
        return;
    }
    lock::fork_reset(&ADD);
    lock::fork_reset(&LISTS);
    LISTS.lock().iter_mut().for_each(|l| l.inherited = true);
}
