//! The recent posts the error-completion explainer matches a failed
//! completion to (by context, QP number and `wr_id`): a fixed,
//! direct-mapped table written at each checked post without a lock or an
//! allocation (a lock and a map entry here cost ~40 ns per post). A post
//! overwrites the older one of its slot, so what is kept is the recent
//! past of every QP, shared: a QP's work request is found as long as fewer
//! than a few thousand posts, all QPs together, came after it.
//!
//! Each slot is a seqlock whose writer first claims it (even -> odd): a
//! writer finding it claimed by another thread drops its record (it is a
//! diagnostic); a reader that sees it claimed or changed finds nothing.

use std::ffi::c_int;
use std::sync::atomic::{fence, AtomicU32, AtomicU64, Ordering};

use super::completions::Posted;

struct Slot {
    seq: AtomicU32,
    qp_num: AtomicU32,
    ctx: AtomicU64,
    wr_id: AtomicU64,
    /// opcode (low 32 bits, as the C int), num_sge (high).
    op: AtomicU64,
    sge_addr: AtomicU64,
    /// length (low), lkey (high); `u64::MAX`: no SGE.
    sge: AtomicU64,
    site: AtomicU64,
}

/// A power of two; 56 bytes each, zeroed static memory.
const SLOTS: usize = 1 << 12;

static TABLE: [Slot; SLOTS] = [const {
    Slot {
        seq: AtomicU32::new(0),
        qp_num: AtomicU32::new(0),
        ctx: AtomicU64::new(0),
        wr_id: AtomicU64::new(0),
        op: AtomicU64::new(0),
        sge_addr: AtomicU64::new(0),
        sge: AtomicU64::new(0),
        site: AtomicU64::new(0),
    }
}; SLOTS];

#[inline]
fn slot(ctx: usize, qp_num: u32, wr_id: u64) -> &'static Slot {
    let h = (wr_id ^ (qp_num as u64).rotate_left(24) ^ (ctx as u64).rotate_left(40))
        .wrapping_mul(0x9e37_79b9_7f4a_7c15);
    &TABLE[(h >> 52) as usize & (SLOTS - 1)]
}

/// Remembers a work request posted at `site` to QP `qp_num` of `ctx`.
#[inline]
pub(super) fn remember(ctx: usize, qp_num: u32, p: &Posted, site: usize) {
    let s = slot(ctx, qp_num, p.wr_id);
    let seq = s.seq.load(Ordering::Relaxed);
    if seq & 1 != 0
        || s.seq
            .compare_exchange(
                seq,
                seq.wrapping_add(1),
                Ordering::Acquire,
                Ordering::Relaxed,
            )
            .is_err()
    {
        return;
    }
    // The fields after the claim: Release on the fence orders the odd
    // `seq` before them for a reader.
    fence(Ordering::Release);
    s.qp_num.store(qp_num, Ordering::Relaxed);
    s.ctx.store(ctx as u64, Ordering::Relaxed);
    s.wr_id.store(p.wr_id, Ordering::Relaxed);
    s.op.store(
        p.opcode as u32 as u64 | (p.num_sge as u32 as u64) << 32,
        Ordering::Relaxed,
    );
    let (addr, rest) = match p.sge {
        Some((a, l, k)) => (a, l as u64 | (k as u64) << 32),
        None => (0, u64::MAX),
    };
    s.sge_addr.store(addr, Ordering::Relaxed);
    s.sge.store(rest, Ordering::Relaxed);
    s.site.store(site as u64, Ordering::Relaxed);
    s.seq.store(seq.wrapping_add(2), Ordering::Release);
}

/// The last work request posted with `wr_id` to QP `qp_num` of `ctx`, and
/// its site, if still kept.
pub(super) fn find(ctx: usize, qp_num: u32, wr_id: u64) -> Option<(Posted, usize)> {
    let s = slot(ctx, qp_num, wr_id);
    let seq = s.seq.load(Ordering::Acquire);
    if seq == 0 || seq & 1 != 0 {
        return None;
    }
    let mine = s.qp_num.load(Ordering::Relaxed) == qp_num
        && s.ctx.load(Ordering::Relaxed) == ctx as u64
        && s.wr_id.load(Ordering::Relaxed) == wr_id;
    let op = s.op.load(Ordering::Relaxed);
    let (addr, rest) = (
        s.sge_addr.load(Ordering::Relaxed),
        s.sge.load(Ordering::Relaxed),
    );
    let site = s.site.load(Ordering::Relaxed) as usize;
    fence(Ordering::Acquire);
    if !mine || s.seq.load(Ordering::Relaxed) != seq {
        return None;
    }
    let p = Posted {
        wr_id,
        opcode: op as u32 as c_int,
        num_sge: (op >> 32) as u32 as c_int,
        sge: (rest != u64::MAX).then_some((addr, rest as u32, (rest >> 32) as u32)),
    };
    Some((p, site))
}

/// `fork()`, in the child: a slot a thread of the parent was writing
/// (a thread that does not exist here) is released, its record dropped.
pub(super) fn fork(step: crate::registry::lock::ForkStep) {
    if !matches!(step, crate::registry::lock::ForkStep::Child) {
        return;
    }
    for s in &TABLE {
        let seq = s.seq.load(Ordering::Relaxed);
        if seq & 1 != 0 {
            s.ctx.store(0, Ordering::Relaxed);
            s.seq.store(seq.wrapping_add(1), Ordering::Relaxed);
        }
    }
}
