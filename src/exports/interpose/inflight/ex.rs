//! The extended post API's work: a builder (`ibv_wr_send`, ...) adds its
//! request, the setters its SGEs; `ibv_wr_abort` or a failed
//! `ibv_wr_complete` takes the batch back.

use std::ffi::c_int;

use verbs_abi::{ibv_qp, ibv_sge};

use super::ring::{flag, Entry};
use super::{
    evidence, of_qp, one_due, readable, reused, reused_elsewhere, sources, table, wr_at,
    SEND_SIGNALED,
};
use crate::exports::interpose::clean;
use crate::exports::interpose::datapath::Queue;

/// `ibv_wr_start` on `qp`: a batch begins.
pub(in crate::exports::interpose) fn ex_start(qp: *mut ibv_qp) {
    use std::sync::atomic::Ordering::Relaxed;
    if let Some(t) = table::find(qp as usize) {
        if let Some(h) = t.sq.with(|r| r.head) {
            t.batch.store(h + 1, Relaxed);
        }
        t.building.store(0, Relaxed);
    }
}

/// A builder began request `op` (`wr_id`, `wr_flags`) at `site`.
///
/// # Safety
/// `qp` is a live extended QP.
pub(in crate::exports::interpose) unsafe fn ex_begun(
    qp: *mut ibv_qp,
    op: c_int,
    wr_id: u64,
    wr_flags: u32,
    site: usize,
) {
    use std::sync::atomic::Ordering::Relaxed;
    // SAFETY: the caller's contract.
    let Some(t) = (unsafe { of_qp(qp) }) else {
        return;
    };
    let mut f = 0;
    if t.sig_all || wr_flags & SEND_SIGNALED != 0 {
        f |= flag::SIGNALED;
    }
    if clean::writes(op) {
        f |= flag::WRITES;
    }
    let pos = t.sq.with(|r| {
        let pos = r.push(Entry {
            wr_id,
            opcode: op,
            flags: f,
            nsge: 0,
            site,
            obj: 0,
        })?;
        if f & flag::SIGNALED != 0 {
            one_due(t.send_cq, Queue::Send(qp), &wr_at(r, pos, None), site);
        }
        Some(pos)
    });
    if t.batch.load(Relaxed) == 0 {
        if let Some(Some(p)) = pos {
            t.batch.store(p + 1, Relaxed);
        }
    }
    t.building
        .store(pos.flatten().map_or(0, |p| p + 1), Relaxed);
}

/// A setter gave the request under construction `n` SGEs at `list`: a
/// source's are fingerprinted, a buffer the device writes (a READ's, an
/// atomic's) is looked for among outstanding receives.
///
/// # Safety
/// `qp` is a live extended QP; `list` the setter's `n` SGEs.
pub(in crate::exports::interpose) unsafe fn ex_sges(
    qp: *mut ibv_qp,
    list: *const ibv_sge,
    n: usize,
) {
    use std::sync::atomic::Ordering::Relaxed;
    let Some(t) = table::find(qp as usize) else {
        return;
    };
    let Some(pos) = t.building.load(Relaxed).checked_sub(1) else {
        return;
    };
    // SAFETY: a live QP.
    let pd = unsafe { (*qp).pd } as usize;
    t.sq.with(|r| {
        if pos < r.tail || pos >= r.head {
            return;
        }
        let source = sources(r.get(pos).opcode);
        let mut fingerprinted = source && n <= r.per_wr();
        for i in 0..n.min(r.per_wr()) {
            // SAFETY: the caller's contract.
            let s = unsafe { *list.add(i) };
            let h = if source && readable(t.ctx, pd, &s) {
                // SAFETY: inside a live MR's range.
                unsafe { evidence(s.addr, s.length) }
            } else {
                fingerprinted &= s.length == 0;
                [0; 8]
            };
            r.add_sge(pos, s, h);
        }
        if fingerprinted {
            r.get_mut(pos).flags |= flag::SOURCE;
        }
        if r.get(pos).flags & flag::WRITES != 0 {
            let shown = wr_at(r, pos, None);
            let (rq, own) = if t.srq != 0 {
                (table::find(t.srq), t.srq)
            } else {
                (Some(t), t.qp)
            };
            let q = Queue::Send(qp);
            let site = r.get(pos).site;
            for s in r.sges(pos) {
                if let Some(rq) = rq {
                    rq.rq.with(|rr| reused(rr, s, q, &shown, site, None));
                }
                reused_elsewhere(own, s, q, &shown, site);
            }
        }
    });
}

/// A bind or local invalidation under construction names `window` (the
/// window's address, or the rkey it invalidates).
pub(in crate::exports::interpose) fn ex_window(qp: *mut ibv_qp, window: u64) {
    use std::sync::atomic::Ordering::Relaxed;
    let Some(t) = table::find(qp as usize) else {
        return;
    };
    let Some(pos) = t.building.load(Relaxed).checked_sub(1) else {
        return;
    };
    t.sq.with(|r| {
        if pos >= r.tail && pos < r.head {
            r.get_mut(pos).obj = window;
        }
    });
}

/// `ibv_wr_abort`, or an `ibv_wr_complete` that failed: the batch never
/// reached the queue.
pub(in crate::exports::interpose) fn ex_cancel(qp: *mut ibv_qp) {
    use std::sync::atomic::Ordering::Relaxed;
    if let Some(t) = table::find(qp as usize) {
        if let Some(from) = t.batch.swap(0, Relaxed).checked_sub(1) {
            t.sq.with(|r| {
                let due = (from.max(r.tail)..r.head)
                    .filter(|&p| r.get(p).flags & (flag::SIGNALED | flag::DONE) == flag::SIGNALED)
                    .count();
                table::settle_live(t.send_cq, due as i64);
                let head = r.head;
                r.cancel(from, head)
            });
        }
        t.building.store(0, Relaxed);
    }
}

/// `ibv_wr_complete` succeeded: the batch is posted.
pub(in crate::exports::interpose) fn ex_done(qp: *mut ibv_qp) {
    use std::sync::atomic::Ordering::Relaxed;
    if let Some(t) = table::find(qp as usize) {
        t.batch.store(0, Relaxed);
        t.building.store(0, Relaxed);
    }
}
