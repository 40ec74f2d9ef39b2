//! The clean post: the data-path checks of a chain that passes them all,
//! with nothing but loads (the queue's state, its caps in `caps`, each
//! SGE's MR in the lkey cache of `keys`) and the `recent` record of each
//! work request. No lock, no call, no boundary, no errno save: nothing
//! here can fail, panic or touch errno. At the first thing it cannot vouch
//! for (a rule broken, caps not yet asked, an lkey not cached, a parent
//! domain) it answers false, and the post takes the full path
//! (`wr_rules::check_sends` / `check_recvs`), which checks the chain again
//! from its start and reports; the records already written are written
//! again, the same.
//!
//! The rules are those of `wr_rules` (its `check_state`, `check_caps`,
//! `check_sge`, the chain's length), each only in its passing direction.
//! No SGE past the queue's granted count is read, and no chain walked
//! past the queue's depth.

use std::ffi::c_int;
use std::ptr::addr_of_mut;

use verbs_abi::{
    ibv_qp, ibv_qp_state, ibv_recv_wr, ibv_send_flags, ibv_send_wr, ibv_sge, ibv_srq, ibv_wr_opcode,
};

use super::completions::{self, Posted};
use super::{caps, keys};

// IBV_QPS_* and IBV_WR_* / IBV_SEND_* values of verbs.h, as the C ints
// the rules compare.
const QPS_RESET: c_int = ibv_qp_state::IBV_QPS_RESET as c_int;
const QPS_RTS: c_int = ibv_qp_state::IBV_QPS_RTS as c_int;
const QPS_SQD: c_int = ibv_qp_state::IBV_QPS_SQD as c_int;
const QPS_ERR: c_int = ibv_qp_state::IBV_QPS_ERR as c_int;
const WR_RDMA_READ: c_int = ibv_wr_opcode::IBV_WR_RDMA_READ as c_int;
const WR_ATOMIC_CMP_AND_SWP: c_int = ibv_wr_opcode::IBV_WR_ATOMIC_CMP_AND_SWP as c_int;
const WR_ATOMIC_FETCH_AND_ADD: c_int = ibv_wr_opcode::IBV_WR_ATOMIC_FETCH_AND_ADD as c_int;
pub(super) const SEND_INLINE: u32 = ibv_send_flags::IBV_SEND_INLINE as u32;

// The rules both paths apply (`wr_rules` reports what breaks them).

/// May a QP in `state` post sends?
#[inline(always)]
pub(super) fn sends_allowed(state: c_int) -> bool {
    matches!(state, QPS_RTS | QPS_SQD | QPS_ERR)
}

/// May a QP in `state` post receives?
#[inline(always)]
pub(super) fn recvs_allowed(state: c_int) -> bool {
    state != QPS_RESET
}

/// Does the send `opcode` write into its SGEs' buffers (local write)?
#[inline(always)]
pub(super) fn writes(opcode: c_int) -> bool {
    matches!(
        opcode,
        WR_RDMA_READ | WR_ATOMIC_CMP_AND_SWP | WR_ATOMIC_FETCH_AND_ADD
    )
}

/// Does one work request's SGE list pass? `max`: the queue's granted
/// SGEs; `inline`: the QP's `max_inline_data` when the WR is inline (its
/// SGEs are copied, not looked up); `write`: the operation writes into
/// the buffers.
///
/// # Safety
/// `sges` is the program's list of at least `num_sge` entries, read while its post is under way.
#[inline(always)]
unsafe fn sges_pass(
    ctx: usize,
    pd: usize,
    sges: *const ibv_sge,
    num_sge: c_int,
    max: u32,
    inline: Option<u32>,
    write: bool,
) -> bool {
    // Negative: far above any `max` (saturated at 16 bits).
    let n = num_sge as u32;
    if n > max {
        return false;
    }
    if sges.is_null() {
        // A list is read only where `num_sge` says there is none.
        return n == 0;
    }
    if let Some(limit) = inline {
        let mut bytes = 0u64;
        for i in 0..n as usize {
            // SAFETY: the program's SGE list of `num_sge` entries, read
            // while its post is under way.
            bytes += unsafe { (*sges.add(i)).length } as u64;
        }
        return bytes <= limit as u64;
    }
    for i in 0..n as usize {
        // SAFETY: as above.
        let s = unsafe { *sges.add(i) };
        if s.length == 0 {
            continue;
        }
        if !keys::passes(ctx, s.lkey, pd, s.addr, s.length, write) {
            return false;
        }
    }
    true
}

/// What a rule needs of a QP: its context, PD, number and state (read
/// as the int it is in C, atomically: another thread's `ibv_modify_qp`
/// may be writing it).
///
/// # Safety
/// `qp` is a live QP.
#[inline(always)]
unsafe fn facts(qp: *mut ibv_qp) -> (usize, usize, u32, c_int) {
    // SAFETY: a live QP (the inline verb read its context); `state` is an
    // aligned int-sized field, read with a relaxed atomic load (a plain
    // `mov`, as the plain read was).
    unsafe {
        (
            (*qp).context as usize,
            (*qp).pd as usize,
            (*qp).qp_num,
            core::sync::atomic::AtomicI32::from_ptr(addr_of_mut!((*qp).state).cast::<i32>())
                .load(core::sync::atomic::Ordering::Relaxed),
        )
    }
}

/// A chain of send WRs to `qp`, posted at `site`: true when all passed
/// (each remembered for the error explainer).
///
/// # Safety
/// `qp` is a live QP and `wr` NULL or the head of the program's WR chain, posted to it now.
#[inline(always)]
pub(super) unsafe fn sends(qp: *mut ibv_qp, mut wr: *mut ibv_send_wr, site: usize) -> bool {
    // SAFETY: a live QP the program posts to.
    let (ctx, pd, qp_num, state) = unsafe { facts(qp) };
    if !sends_allowed(state) {
        return false;
    }
    let Some(c) = caps::known_packed(qp as usize) else {
        return false;
    };
    // The queue holds `left` more: a longer chain (or one that loops) is
    // the full path's to report (so is any post to a queue of depth 0).
    let mut left = c.send_wr();
    while !wr.is_null() {
        if left == 0 {
            return false;
        }
        left -= 1;
        // SAFETY: the program's WR chain, read (copied, no reference made)
        // while its post is under way; every field is a plain integer or
        // pointer (the opcode `verbs_abi::raw`'s int), so any contents are
        // a valid value.
        let r = unsafe { wr.read() };
        let opcode = r.opcode.0;
        let write = writes(opcode);
        let inline = (r.send_flags & SEND_INLINE != 0).then_some(c.inline());
        // SAFETY: the program's SGE list of `num_sge` entries, read while its post is under way.
        if !unsafe { sges_pass(ctx, pd, r.sg_list, r.num_sge, c.send_sge(), inline, write) } {
            return false;
        }
        // SAFETY: the program's SGE list of `num_sge` entries, read while its post is under way.
        let p = unsafe { Posted::of(r.wr_id, opcode, r.sg_list, r.num_sge) };
        completions::posted(crate::addr::Addr::new(ctx), qp_num, &p, site);
        wr = r.next;
    }
    true
}

/// A chain of receive WRs to `qp`, posted at `site`: as [`sends`].
#[inline(always)]
pub(super) fn recvs(qp: *mut ibv_qp, wr: *mut ibv_recv_wr, site: usize) -> bool {
    // SAFETY: a live QP the program posts to.
    let (ctx, pd, qp_num, state) = unsafe { facts(qp) };
    if !recvs_allowed(state) {
        return false;
    }
    let Some(c) = caps::known_packed(qp as usize) else {
        return false;
    };
    // SAFETY: the program's WR chain, posted now.
    unsafe { recv_chain(ctx, pd, c.recv_sge(), c.recv_wr(), Some(qp_num), wr, site) }
}

/// A chain of receive WRs to `srq`: as [`sends`] (an SRQ has no state
/// rule, and its posts are not remembered: no QP number).
///
/// # Safety
/// `srq` is a live SRQ and `wr` NULL or the head of the program's WR chain, posted to it now.
#[inline(always)]
pub(super) unsafe fn srq_recvs(srq: *mut ibv_srq, wr: *mut ibv_recv_wr, site: usize) -> bool {
    // SAFETY: a live SRQ (the inline verb read its context).
    let (ctx, pd) = unsafe { ((*srq).context as usize, (*srq).pd as usize) };
    let Some(c) = caps::known_packed(srq as usize) else {
        return false;
    };
    // SAFETY: the program's WR chain, posted now.
    unsafe { recv_chain(ctx, pd, c.recv_sge(), c.recv_wr(), None, wr, site) }
}

///
/// # Safety
/// `wr` is NULL or the head of the program's WR chain, posted now.
#[inline(always)]
unsafe fn recv_chain(
    ctx: usize,
    pd: usize,
    max: u32,
    depth: u32,
    qp_num: Option<u32>,
    mut wr: *mut ibv_recv_wr,
    site: usize,
) -> bool {
    // As in `sends`.
    let mut left = depth;
    while !wr.is_null() {
        if left == 0 {
            return false;
        }
        left -= 1;
        // SAFETY: the program's WR chain, copied while its post is under
        // way (plain integers and pointers: any contents are valid).
        let r = unsafe { wr.read() };
        // SAFETY: the program's SGE list of `num_sge` entries, read while its post is under way.
        if !unsafe { sges_pass(ctx, pd, r.sg_list, r.num_sge, max, None, true) } {
            return false;
        }
        if let Some(n) = qp_num {
            // SAFETY: the program's SGE list of `num_sge` entries, read while its post is under way.
            let p = unsafe { Posted::of(r.wr_id, -1, r.sg_list, r.num_sge) };
            completions::posted(crate::addr::Addr::new(ctx), n, &p, site);
        }
        wr = r.next;
    }
    true
}
