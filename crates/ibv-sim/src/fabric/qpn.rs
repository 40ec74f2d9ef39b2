//! Fabric-wide QP numbers: allocation, release, and their owners.

use super::*;

/// This process's attachment: its segment, slot and token.
pub(super) fn me() -> Option<(&'static Segment, usize, u64)> {
    let token = MY_TOKEN.load(Ordering::Acquire);
    if token == 0 {
        return None;
    }
    Some((current()?, MY_SLOT.load(Ordering::Relaxed) as usize, token))
}

pub(super) fn pack(qpn: u32, slot: usize, token: u64) -> u64 {
    u64::from(qpn & 0x00ff_ffff) | ((slot as u64 & 0xff) << 24) | (token & !0xffff_ffff)
}

pub(super) fn entry_owner(seg: &Segment, e: u64) -> Option<Dest> {
    if e == 0 {
        return None;
    }
    let slot = ((e >> 24) & 0xff) as usize;
    let tok = seg.proc_(slot).token.load(Ordering::Acquire);
    if tok != 0 && tok >> 32 == e >> 32 {
        Some(Dest {
            slot: slot as u32,
            token: tok,
        })
    } else {
        None
    }
}

/// A QP number unique across the fabric, registered to this process.
/// `None` when not attached (the caller falls back to a local number).
pub fn alloc_qpn() -> Option<Result<u32, i32>> {
    let (seg, slot, token) = me()?;
    for _ in 0..2 * MAX_QPS {
        let n = seg.hdr().next_qpn.fetch_add(1, Ordering::Relaxed) & 0x00ff_ffff;
        if n < 0x100 || n == 0x00ff_ffff {
            continue;
        }
        let cell = seg.qp(n as usize % MAX_QPS);
        let cur = cell.load(Ordering::Acquire);
        let free = cur == 0
            || match entry_owner(seg, cur) {
                None => true,
                Some(d) => !slot_alive(seg, d.slot as usize),
            };
        if free
            && cell
                .compare_exchange(
                    cur,
                    pack(n, slot, token),
                    Ordering::AcqRel,
                    Ordering::Acquire,
                )
                .is_ok()
        {
            return Some(Ok(n));
        }
    }
    Some(Err(libc::ENOMEM))
}

/// Gives a QP number back.
pub fn free_qpn(qpn: u32) {
    let Some((seg, slot, token)) = me() else {
        return;
    };
    let cell = seg.qp(qpn as usize % MAX_QPS);
    let _ = cell.compare_exchange(
        pack(qpn, slot, token),
        0,
        Ordering::AcqRel,
        Ordering::Acquire,
    );
}

/// The process owning QP number `qpn`, if a live attachment holds it.
pub fn owner_of(qpn: u32) -> Option<Dest> {
    let (seg, _, _) = me()?;
    let e = seg.qp(qpn as usize % MAX_QPS).load(Ordering::Acquire);
    if e as u32 & 0x00ff_ffff != qpn & 0x00ff_ffff {
        return None;
    }
    entry_owner(seg, e)
}

/// Whether `d` is still the live process it was.
pub fn alive(d: Dest) -> bool {
    let Some((seg, _, _)) = me() else {
        return false;
    };
    seg.proc_(d.slot as usize).token.load(Ordering::Acquire) == d.token
        && slot_alive(seg, d.slot as usize)
}

/// This process as a destination (for tests of our own ownership).
pub fn myself() -> Option<Dest> {
    let (_, slot, token) = me()?;
    Some(Dest {
        slot: slot as u32,
        token,
    })
}
