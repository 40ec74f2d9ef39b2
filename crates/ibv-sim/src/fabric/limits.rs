//! Object limits machine-wide, as the kernel counts them: per device,
//! across every process of the fabric. The segment holds a table of
//! devices (by node GUID) and, for each, a row of counters per process
//! slot: the live objects of each `Limit` kind that slot's process holds.
//! A create counts itself in its own row, then sums the device's rows: past
//! the advertised maximum it takes its count back and fails. A process's
//! row is zeroed when it leaves (at its last close or exit) and when a dead
//! process's slot is reclaimed, as the kernel frees a dead process's
//! objects; a row is seeded with the process's live counts when it joins.
//! Concurrent creates at the limit may both fail (each sees the other's
//! count), never both succeed.

use super::*;
use crate::device::{self, Limit, SharedLimits};

/// Devices a fabric counts for (distinct node GUIDs); a device past them
/// is counted per process only.
pub(super) const MAX_DEVS: usize = 64;
/// Counters per (device, slot): one per `Limit` kind, padded.
const KINDS: usize = 8;
const ROW_BYTES: usize = KINDS * 4;
/// A device entry: its GUID (64 bytes with padding), then a row per slot.
pub(super) const DEV_BYTES: usize = 64 + MAX_PROCS * ROW_BYTES;

const _: () = assert!(Limit::COUNT <= KINDS);

/// The device entry each of this process's devices counts in
/// (`u32::MAX`: none), by device index.
static ENTRY: [AtomicU32; 64] = [const { AtomicU32::new(u32::MAX) }; 64];

impl Segment {
    fn dev_guid(&self, e: usize) -> &AtomicU64 {
        // SAFETY: inside the mapping (e < MAX_DEVS); accessed atomically only.
        unsafe { &*((self.base + DEVS_OFF + e * DEV_BYTES) as *const AtomicU64) }
    }

    fn count(&self, e: usize, slot: usize, kind: usize) -> &AtomicU32 {
        let off = DEVS_OFF + e * DEV_BYTES + 64 + slot * ROW_BYTES + kind * 4;
        // SAFETY: inside the mapping (e < MAX_DEVS, slot < MAX_PROCS,
        // kind < KINDS), 4-aligned; accessed atomically only.
        unsafe { &*((self.base + off) as *const AtomicU32) }
    }

    /// Zeroes a slot's row on every device, and its multicast
    /// memberships (it left, or died).
    pub(super) fn clear_counts(&self, slot: usize) {
        self.clear_groups(slot);
        for e in 0..MAX_DEVS {
            for k in 0..KINDS {
                self.count(e, slot, k).store(0, Ordering::Release);
            }
        }
    }
}

/// The entry of the device with node GUID `guid`, claimed if new.
/// Under the attach lock.
fn entry_of(seg: &Segment, guid: u64) -> Option<usize> {
    let key = guid.max(1);
    if let Some(e) = (0..MAX_DEVS).find(|&e| seg.dev_guid(e).load(Ordering::Acquire) == key) {
        return Some(e);
    }
    let e = (0..MAX_DEVS).find(|&e| seg.dev_guid(e).load(Ordering::Acquire) == 0)?;
    for s in 0..MAX_PROCS {
        for k in 0..KINDS {
            seg.count(e, s, k).store(0, Ordering::Relaxed);
        }
    }
    seg.dev_guid(e).store(key, Ordering::Release);
    Some(e)
}

/// Under the attach lock, as `slot` starts using `dev`: its entry, and the
/// row seeded with what this process already holds there.
pub(super) fn join(seg: &Segment, slot: usize, dev: &SimDevice) {
    static HOOK: std::sync::Once = std::sync::Once::new();
    HOOK.call_once(|| device::set_shared_limits(&FABRIC));
    let Some(cell) = ENTRY.get(dev.index) else {
        return;
    };
    let Some(e) = entry_of(seg, dev.guid) else {
        cell.store(u32::MAX, Ordering::Release);
        return;
    };
    for (k, n) in dev.local_counts().into_iter().enumerate() {
        seg.count(e, slot, k).store(n, Ordering::Release);
    }
    cell.store(e as u32, Ordering::Release);
}

/// This process's devices stop counting in the fabric (it left).
pub(super) fn leave_all() {
    for c in &ENTRY {
        c.store(u32::MAX, Ordering::Release);
    }
}

/// Under the attach lock: zeroes the rows of dead processes' slots (as
/// `Segment::reclaim_dead` would, without taking their slots).
fn release_dead(seg: &Segment) {
    for i in 0..MAX_PROCS {
        let tok = seg.proc_(i).token.load(Ordering::Acquire);
        if tok == 0 || !slot_alive(seg, i) {
            seg.clear_counts(i);
        }
    }
}

struct Fabric;

static FABRIC: Fabric = Fabric;

impl Fabric {
    /// This process's slot and the device's entry, while attached.
    fn place(dev: &SimDevice) -> Option<(&'static Segment, usize, usize)> {
        let (seg, slot, _) = me()?;
        let e = ENTRY.get(dev.index)?.load(Ordering::Acquire);
        (e != u32::MAX).then_some((seg, slot, e as usize))
    }

    fn total(seg: &Segment, e: usize, kind: usize) -> u64 {
        (0..MAX_PROCS)
            .map(|s| u64::from(seg.count(e, s, kind).load(Ordering::Acquire)))
            .sum()
    }
}

impl SharedLimits for Fabric {
    fn take(&self, dev: &SimDevice, l: Limit, max: u32) -> bool {
        let Some((seg, slot, e)) = Self::place(dev) else {
            return true;
        };
        let k = l as usize;
        let mine = seg.count(e, slot, k);
        mine.fetch_add(1, Ordering::AcqRel);
        if Self::total(seg, e, k) <= u64::from(max) {
            return true;
        }
        // A process that died holding objects: the kernel would have freed
        // them. Release its count (under the lock) and look again.
        let _ = seg.locked(|| release_dead(seg));
        if Self::total(seg, e, k) <= u64::from(max) {
            return true;
        }
        give_one(mine);
        false
    }

    fn give(&self, dev: &SimDevice, l: Limit) {
        if let Some((seg, slot, e)) = Self::place(dev) {
            give_one(seg.count(e, slot, l as usize));
        }
    }
}

/// One fewer, never below zero (a row zeroed under a late destroy).
fn give_one(c: &AtomicU32) {
    let _ = c.fetch_update(Ordering::AcqRel, Ordering::Acquire, |n| n.checked_sub(1));
}
