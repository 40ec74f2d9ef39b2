//! Multicast groups across the fabric: which processes have a QP attached
//! to a group, so a multicast send reaches every one of them.
//!
//! The segment holds a table of groups, each its MGID and a bit per
//! process slot. A process sets its bit when its first QP attaches to the
//! group and clears it when its last one detaches; a slot that leaves or
//! dies has its bits cleared with its other rows. A send to the group goes
//! as one UD message to each member process (but the sender's), whose
//! progress engine hands it to its own attached QPs. Changes are made
//! under the attach lock; senders read the table without it (a group
//! joined or left during a send may miss or get that datagram, as UD
//! multicast may).

use super::*;

/// Groups the fabric tracks at once (a group past them reaches the
/// joining process's own QPs only).
pub(super) const MAX_GROUPS: usize = 1024;
/// An entry: the MGID (two words, 0 when free), then the members' bits.
pub(super) const GROUP_BYTES: usize = 32;

const _: () = assert!(MAX_PROCS <= 128);

impl Segment {
    fn group(&self, i: usize) -> &[AtomicU64; 4] {
        // SAFETY: inside the mapping (i < MAX_GROUPS), 8-aligned; accessed
        // atomically only.
        unsafe { &*((self.base + MCAST_OFF + i * GROUP_BYTES) as *const [AtomicU64; 4]) }
    }

    /// Clears a slot's bit in every group (it left, or died).
    pub(super) fn clear_groups(&self, slot: usize) {
        for i in 0..MAX_GROUPS {
            let g = self.group(i);
            g[2 + slot / 64].fetch_and(!(1u64 << (slot % 64)), Ordering::AcqRel);
            free_if_empty(g);
        }
    }
}

fn key(mgid: &[u8; 16]) -> (u64, u64) {
    let (a, b) = mgid.split_at(8);
    (
        u64::from_ne_bytes(a.try_into().unwrap_or_default()),
        u64::from_ne_bytes(b.try_into().unwrap_or_default()),
    )
}

fn is(g: &[AtomicU64; 4], k: (u64, u64)) -> bool {
    g[0].load(Ordering::Acquire) == k.0 && g[1].load(Ordering::Acquire) == k.1
}

fn free_if_empty(g: &[AtomicU64; 4]) {
    if g[2].load(Ordering::Acquire) == 0 && g[3].load(Ordering::Acquire) == 0 {
        g[0].store(0, Ordering::Release);
        g[1].store(0, Ordering::Release);
    }
}

/// Marks this process a member of group `mgid` (its first QP attached).
pub fn mcast_join(mgid: &[u8; 16]) {
    let Some((seg, slot, _)) = me() else {
        return;
    };
    let k = key(mgid);
    let _ = seg.locked(|| {
        let i = (0..MAX_GROUPS)
            .find(|&i| is(seg.group(i), k))
            .or_else(|| (0..MAX_GROUPS).find(|&i| is(seg.group(i), (0, 0))));
        if let Some(i) = i {
            let g = seg.group(i);
            g[0].store(k.0, Ordering::Release);
            g[1].store(k.1, Ordering::Release);
            g[2 + slot / 64].fetch_or(1u64 << (slot % 64), Ordering::AcqRel);
        }
    });
}

/// This process is no longer a member of `mgid` (its last QP detached).
pub fn mcast_leave(mgid: &[u8; 16]) {
    let Some((seg, slot, _)) = me() else {
        return;
    };
    let k = key(mgid);
    let _ = seg.locked(|| {
        if let Some(i) = (0..MAX_GROUPS).find(|&i| is(seg.group(i), k)) {
            let g = seg.group(i);
            g[2 + slot / 64].fetch_and(!(1u64 << (slot % 64)), Ordering::AcqRel);
            free_if_empty(g);
        }
    });
}

/// The other processes with a QP attached to `mgid`.
pub fn mcast_members(mgid: &[u8; 16]) -> Vec<Dest> {
    let Some((seg, me_slot, _)) = me() else {
        return Vec::new();
    };
    let k = key(mgid);
    if k == (0, 0) {
        return Vec::new();
    }
    let Some(g) = (0..MAX_GROUPS).map(|i| seg.group(i)).find(|g| is(g, k)) else {
        return Vec::new();
    };
    let bits = [g[2].load(Ordering::Acquire), g[3].load(Ordering::Acquire)];
    (0..MAX_PROCS)
        .filter(|&s| s != me_slot && bits[s / 64] & (1u64 << (s % 64)) != 0)
        .filter_map(|s| {
            let token = seg.proc_(s).token.load(Ordering::Acquire);
            (token != 0).then_some(Dest {
                slot: s as u32,
                token,
            })
        })
        .collect()
}
