//! The recent posts the error-completion explainer matches a failed
//! completion to (by context, QP number and `wr_id`): a fixed,
//! direct-mapped table written at each checked post without a lock or an
//! allocation (a lock and a map entry here cost ~40 ns per post). A post
//! overwrites the older one of its slot, so what is kept is the recent
//! past of every QP, shared: a QP's work request is found as long as fewer
//! than a few thousand posts, all QPs together, came after it.
//!
//! A slot is written with plain stores, no read-modify-write (a claim
//! would cost an atomic operation per post): its last word is a check of
//! the others, which a reader recomputes; a record torn by two threads
//! writing the same slot at once fails it and is not found (it is a
//! diagnostic, not a check).

use std::ffi::c_int;
use std::sync::atomic::{AtomicU64, Ordering};

use super::completions::Posted;

/// ctx, qp_num, wr_id, opcode | num_sge << 32, sge addr, sge length |
/// lkey << 32 (`u64::MAX`: no SGE), site, then the check of those.
struct Slot([AtomicU64; 8]);

/// A power of two; 64 bytes each, zeroed static memory (an all-zero slot
/// fails its check: see [`check`]).
const SLOTS: usize = 1 << 12;

static TABLE: [Slot; SLOTS] = [const { Slot([const { AtomicU64::new(0) }; 8]) }; SLOTS];

#[inline]
fn slot(ctx: usize, qp_num: u32, wr_id: u64) -> &'static Slot {
    let key = wr_id ^ (qp_num as u64).rotate_left(24) ^ (ctx as u64).rotate_left(40);
    &TABLE[crate::addr_table::hash(key, SLOTS.trailing_zeros())]
}

/// The check word of a record (odd: never that of a zeroed slot). The
/// words folded side by side, one multiply: no chain of dependent
/// multiplies on the post path.
#[inline]
fn check(w: &[u64; 7]) -> u64 {
    let folded = w
        .iter()
        .enumerate()
        .fold(0, |h, (i, &v)| h ^ v.rotate_left(9 * i as u32));
    crate::addr_table::mix(folded) | 1
}

/// Remembers a work request posted at `site` to QP `qp_num` of `ctx`.
#[inline]
pub(super) fn remember(ctx: usize, qp_num: u32, p: &Posted, site: usize) {
    let (addr, rest) = match p.sge {
        Some((a, l, k)) => (a, l as u64 | (k as u64) << 32),
        None => (0, u64::MAX),
    };
    let w = [
        ctx as u64,
        qp_num as u64,
        p.wr_id,
        p.opcode as u32 as u64 | (p.num_sge as u32 as u64) << 32,
        addr,
        rest,
        site as u64,
    ];
    let s = slot(ctx, qp_num, p.wr_id);
    for (cell, v) in s.0[..7].iter().zip(w) {
        cell.store(v, Ordering::Relaxed);
    }
    s.0[7].store(check(&w), Ordering::Relaxed);
}

/// The last work request posted with `wr_id` to QP `qp_num` of `ctx`, and
/// its site, if still kept.
pub(super) fn find(ctx: usize, qp_num: u32, wr_id: u64) -> Option<(Posted, usize)> {
    let s = slot(ctx, qp_num, wr_id);
    let mut w = [0u64; 7];
    for (v, cell) in w.iter_mut().zip(s.0.iter()) {
        *v = cell.load(Ordering::Relaxed);
    }
    if s.0[7].load(Ordering::Relaxed) != check(&w) || w[..3] != [ctx as u64, qp_num as u64, wr_id] {
        return None;
    }
    let p = Posted {
        wr_id,
        opcode: w[3] as u32 as c_int,
        num_sge: (w[3] >> 32) as u32 as c_int,
        sge: (w[5] != u64::MAX).then_some((w[4], w[5] as u32, (w[5] >> 32) as u32)),
    };
    Some((p, w[6] as usize))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn found_by_qp_and_wr_id_overwritten_by_a_later_post_torn_not_found() {
        let p = |wr_id, op| Posted {
            wr_id,
            opcode: op,
            num_sge: 1,
            sge: Some((0x1000, 64, 0x55)),
        };
        let ctx = 0x5555_0000_1000;
        assert!(find(ctx, 7, 1).is_none());
        remember(ctx, 7, &p(1, 2), 0xabc);
        let (got, site) = find(ctx, 7, 1).unwrap();
        assert_eq!(
            (got.opcode, got.sge, site),
            (2, Some((0x1000, 64, 0x55)), 0xabc)
        );
        assert!(find(ctx, 8, 1).is_none() && find(ctx + 8, 7, 1).is_none());
        remember(ctx, 7, &p(1, 4), 0xdef);
        assert_eq!(find(ctx, 7, 1).unwrap().0.opcode, 4);
        // A field changed under the check word: torn, not found.
        slot(ctx, 7, 1).0[4].store(0x2000, Ordering::Relaxed);
        assert!(find(ctx, 7, 1).is_none());
    }
}
