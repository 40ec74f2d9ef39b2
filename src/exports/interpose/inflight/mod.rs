//! Work in flight (`IBV_SHIM_CHECK=inflight`): each posted work request is
//! kept, per queue, from its post to its completion (`ring`, `table`),
//! and what the program does to it meanwhile is judged:
//!
//! - a send's source bytes (SEND, WRITE; not inline data) are kept per
//!   SGE at the post (`evidence`: a copy of up to 64 bytes, else xxh3
//!   fingerprints of up to 8 blocks) and compared again when its
//!   completion is polled (its own, or a later signalled one of the same
//!   send queue): a change is `send_modified`, counted exactly on
//!   ibv-sim for a long source too (`sim`: the bytes the sim read);
//! - a receive buffer (or a READ's or an atomic's local buffer) given to
//!   a receive or a READ while an earlier receive on it has not
//!   completed is `recv_reused` (on the same queue, or on any other
//!   queue that posted receives: `table::receivers_but`);
//! - `ibv_dereg_mr` / `ibv_rereg_mr` of an MR that outstanding work uses
//!   is `teardown_mr`; `ibv_destroy_qp` or a move to RESET with sends
//!   whose completions were never polled, `teardown_qp`;
//!   `ibv_destroy_cq` with completions of posted work never polled,
//!   `teardown_cq`; `ibv_dealloc_mw` of a window whose own bind or
//!   local invalidation posted here has not completed, `teardown_mw`
//!   (`mw`);
//! - more completions due on a CQ (signalled sends and receives of its
//!   queues, not yet polled) than it has entries, at the post that makes
//!   them so: `cq_overrun`.
//!
//! Reported through `datapath::violation` (once per site and rule, counted,
//! `abort`). Bytes are read only inside an MR the lkey index vouches for.

mod evidence;
mod ex;
mod mw;
mod reuse;
mod ring;
mod sim;
mod table;
mod teardown;

use evidence::{differs, evidence, Diff};
pub(super) use ex::{ex_begun, ex_cancel, ex_done, ex_sges, ex_start, ex_window};
pub(super) use mw::{bind_posted, bind_posting, mw_going};
use reuse::{reused, reused_elsewhere};
pub(crate) use teardown::Pending;
pub(super) use teardown::{
    cq_destroying, mr_going, qp_destroying, qp_error, qp_reset, srq_destroying,
};

use std::ffi::c_int;

use verbs_abi::{ibv_cq, ibv_qp, ibv_recv_wr, ibv_send_wr, ibv_sge, ibv_srq, ibv_wc};

use super::datapath::{self, chain_limit, Queue, Wr};
use super::{caps, clean, keys};
use crate::checks::Check;
use ring::{flag, Entry, Ring};
use table::Tracker;

/// What one post added to a ring: positions `from..from + n`.
#[derive(Clone, Copy)]
pub(super) struct Added {
    from: u64,
    n: u64,
}

impl Added {
    pub(super) const NONE: Added = Added { from: 0, n: 0 };
}

const SEND_SIGNALED: u32 = verbs_abi::ibv_send_flags::IBV_SEND_SIGNALED as u32;
const WC_RECV: c_int = verbs_abi::ibv_wc_opcode::IBV_WC_RECV as c_int;

/// Does the operation send bytes read from its SGEs?
fn sources(op: c_int) -> bool {
    use verbs_abi::ibv_wr_opcode::*;
    [
        IBV_WR_RDMA_WRITE,
        IBV_WR_RDMA_WRITE_WITH_IMM,
        IBV_WR_SEND,
        IBV_WR_SEND_WITH_IMM,
        IBV_WR_SEND_WITH_INV,
    ]
    .iter()
    .any(|&o| o as c_int == op)
}

const BIND_MW: c_int = verbs_abi::ibv_wr_opcode::IBV_WR_BIND_MW as c_int;
const LOCAL_INV: c_int = verbs_abi::ibv_wr_opcode::IBV_WR_LOCAL_INV as c_int;

/// What a request of `op` names of a memory window: a bind its window
/// (`mw`, its address), a local invalidation the rkey it invalidates
/// (`inv`); 0 for anything else.
fn window_of(op: c_int, inv: u32, mw: impl FnOnce() -> u64) -> u64 {
    match op {
        BIND_MW => mw(),
        LOCAL_INV => u64::from(inv),
        _ => 0,
    }
}

/// May the SGE's bytes be read: inside the virtual range of the live MR
/// its lkey names, on the queue's PD?
fn readable(ctx: usize, pd: usize, s: &ibv_sge) -> bool {
    if s.length == 0 {
        return false;
    }
    if keys::passes(ctx, s.lkey, pd, s.addr, s.length, false) {
        return true;
    }
    match keys::lookup(ctx, s.lkey) {
        keys::Key::Mr(o) => {
            let f = keys::Facts::of(&o);
            f.ranged && f.covers(s.addr, s.length)
        }
        _ => false,
    }
}

/// The in-flight state of a QP, made at its first tracked post.
///
/// # Safety
/// `qp` is a live QP.
unsafe fn of_qp(qp: *mut ibv_qp) -> Option<&'static Tracker> {
    if let Some(t) = table::find(qp as usize) {
        return Some(t);
    }
    sim::start();
    // SAFETY: the caller's contract.
    let c = unsafe { caps::of_qp(qp) }?;
    // SAFETY: the caller's contract.
    let (ctx, send_cq, recv_cq, srq, qp_num) = unsafe { table::qp_facts(qp) };
    // SAFETY: the caller's contract.
    let sig_all = unsafe { sig_all(qp) };
    table::make(
        qp as usize,
        (c.send_wr as usize, c.send_sge as usize),
        (c.recv_wr as usize, c.recv_sge as usize),
        |t| {
            t.ctx = ctx;
            t.qp_num = qp_num;
            t.send_cq = send_cq;
            t.recv_cq = recv_cq;
            t.srq = srq;
            t.sig_all = sig_all;
            t.is_srq = false;
        },
    )
}

/// The in-flight state of an SRQ, made at its first tracked post.
///
/// # Safety
/// `srq` is a live SRQ.
unsafe fn of_srq(srq: *mut ibv_srq) -> Option<&'static Tracker> {
    if let Some(t) = table::find(srq as usize) {
        return Some(t);
    }
    // SAFETY: the caller's contract.
    let c = unsafe { caps::of_srq(srq) }?;
    // SAFETY: the caller's contract.
    let ctx = unsafe { (*srq).context } as usize;
    table::make(
        srq as usize,
        (1, 1),
        (c.recv_wr as usize, c.recv_sge as usize),
        |t| {
            t.ctx = ctx;
            t.qp_num = 0;
            t.send_cq = 0;
            t.recv_cq = 0;
            t.srq = 0;
            t.sig_all = false;
            t.is_srq = true;
        },
    )
}

/// Does the QP signal every send (`sq_sig_all`)? Asked once, with the
/// real query (false if it fails).
///
/// # Safety
/// `qp` is a live QP.
unsafe fn sig_all(qp: *mut ibv_qp) -> bool {
    use std::mem::MaybeUninit;
    use verbs_abi::{ibv_qp_attr, ibv_qp_init_attr};
    let Ok(real) = crate::real::slots::QueryQp::unhooked() else {
        return false;
    };
    // SAFETY: plain C structs of integers and pointers, all-zero valid.
    let (mut a, mut i) = unsafe {
        (
            MaybeUninit::<ibv_qp_attr>::zeroed().assume_init(),
            MaybeUninit::<ibv_qp_init_attr>::zeroed().assume_init(),
        )
    };
    let mask = verbs_abi::ibv_qp_attr_mask::IBV_QP_CAP as c_int;
    // SAFETY: a live QP and our own buffers.
    unsafe { real.call(qp, &mut a, mask, &mut i) == 0 && i.sq_sig_all != 0 }
}

/// The work request at `pos` of `r`, as the log shows it.
fn wr_at(r: &Ring, pos: u64, via: Option<&'static str>) -> Wr {
    let e = r.get(pos);
    let sges = r.sges(pos);
    Wr {
        wr_id: e.wr_id,
        opcode: (e.opcode >= 0).then_some(e.opcode),
        sges: sges.as_ptr(),
        num_sge: sges.len() as c_int,
        readable: sges.len(),
        via,
    }
}

/// A signalled send or a receive was posted at `site`: one more completion
/// due on `cq`, reported when more are due than it has entries.
fn one_due(cq: usize, q: Queue, w: &Wr, site: usize) {
    let Some(d) = table::due(cq) else {
        return;
    };
    let n = d.n.fetch_add(1, std::sync::atomic::Ordering::Relaxed) + 1;
    // SAFETY: a CQ of a live queue the program posts to.
    let cqe = unsafe { (*(cq as *const ibv_cq)).cqe } as i64;
    if n > cqe {
        datapath::violation(
            Check::CqOverrun,
            q,
            w,
            site,
            format_args!(
                "{n} completions are due on CQ {cq:#x}, which has {cqe} entries: \
                 it overruns (a fatal CQ error on hardware)"
            ),
        );
    }
}

/// A posted receive's SGEs (at most `max`) and the request as the log
/// shows it.
///
/// # Safety
/// `w` is the program's receive being posted: its `sg_list` holds
/// `num_sge` readable entries (when not NULL).
unsafe fn recv_view(w: &ibv_recv_wr, max: usize) -> (&[ibv_sge], Wr) {
    let n = if w.sg_list.is_null() || w.num_sge <= 0 {
        0
    } else {
        (w.num_sge as usize).min(max)
    };
    // SAFETY: the caller's contract; `n` is within the list.
    let list = unsafe { std::slice::from_raw_parts(w.sg_list, n) };
    let shown = Wr {
        wr_id: w.wr_id,
        opcode: None,
        sges: list.as_ptr(),
        num_sge: w.num_sge,
        readable: n,
        via: None,
    };
    (list, shown)
}

/// Records a send chain before it is forwarded.
///
/// # Safety
/// `qp` is a live QP and `wr` NULL or the head of the program's chain, posted to it now.
pub(super) unsafe fn sends(qp: *mut ibv_qp, mut wr: *mut ibv_send_wr, site: usize) -> Added {
    // SAFETY: the caller's contract.
    let Some(t) = (unsafe { of_qp(qp) }) else {
        return Added::NONE;
    };
    // SAFETY: a live QP.
    let pd = unsafe { (*qp).pd } as usize;
    let limit = chain_limit(Queue::Send(qp));
    let rq = if t.srq != 0 {
        table::find(t.srq)
    } else {
        Some(t)
    };
    // SAFETY: the caller's contract.
    let granted = unsafe { caps::of_qp(qp) }.map_or(ring::MAX_SGES, |c| c.send_sge as usize);
    t.sq.with(|r| {
        let from = r.head;
        let mut walked = 0;
        while !wr.is_null() && walked < limit {
            walked += 1;
            // SAFETY: the program's chain, copied while its post is under
            // way (plain integers and pointers, the opcode a raw int).
            let w = unsafe { wr.read() };
            wr = w.next;
            let op = w.opcode.0;
            let mut f = 0;
            if t.sig_all || w.send_flags & SEND_SIGNALED != 0 {
                f |= flag::SIGNALED;
            }
            let inline = w.send_flags & clean::SEND_INLINE != 0;
            let source = sources(op) && !inline;
            if clean::writes(op) {
                f |= flag::WRITES;
            }
            let Some(pos) = r.push(Entry {
                wr_id: w.wr_id,
                opcode: op,
                flags: f,
                nsge: 0,
                site,
                // SAFETY: `bind_mw` is the union's member for a bind (a
                // pointer read as its address only).
                obj: window_of(op, w.imm_data, || unsafe { w.anon.bind_mw.mw } as u64),
            }) else {
                break;
            };
            if !inline && !w.sg_list.is_null() && w.num_sge > 0 {
                let n = (w.num_sge as usize).min(granted);
                // More SGEs than kept: not fingerprinted (nor checked).
                let mut fingerprinted = source && n <= r.per_wr();
                for i in 0..n {
                    // SAFETY: the program's SGE list, within the SGEs the
                    // provider reads.
                    let s = unsafe { *w.sg_list.add(i) };
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
            }
            let wr_shown = wr_at(r, pos, None);
            if f & flag::WRITES != 0 {
                let own = if t.srq != 0 { t.srq } else { t.qp };
                for s in r.sges(pos) {
                    if let Some(rq) = rq {
                        rq.rq
                            .with(|rr| reused(rr, s, Queue::Send(qp), &wr_shown, site, None));
                    }
                    reused_elsewhere(own, s, Queue::Send(qp), &wr_shown, site);
                }
            }
            if f & flag::SIGNALED != 0 {
                one_due(t.send_cq, Queue::Send(qp), &wr_shown, site);
            }
        }
        Added {
            from,
            n: r.head - from,
        }
    })
    .unwrap_or(Added::NONE)
}

/// Records a receive chain (to a QP, or to an SRQ) before it is forwarded.
///
/// # Safety
/// `q`'s queue is live and `wr` NULL or the head of the program's chain, posted to it now.
pub(super) unsafe fn recvs(q: Queue, mut wr: *mut ibv_recv_wr, site: usize) -> Added {
    let (t, cq) = match q {
        // SAFETY: the caller's contract.
        Queue::Srq(s) => (unsafe { of_srq(s) }, 0),
        // SAFETY: the caller's contract.
        Queue::Send(qp) | Queue::Recv(qp) => match unsafe { of_qp(qp) } {
            Some(t) if t.srq == 0 => (Some(t), t.recv_cq),
            _ => (None, 0),
        },
    };
    let Some(t) = t else {
        return Added::NONE;
    };
    let limit = chain_limit(q);
    if table::receivers_but(t.qp).next().is_some() {
        // SAFETY: the caller's contract.
        unsafe { recvs_elsewhere(t.qp, q, wr, limit, site) };
    }
    t.rq.with(|r| {
        let from = r.head;
        let mut walked = 0;
        while !wr.is_null() && walked < limit {
            walked += 1;
            // SAFETY: the program's chain, copied while its post is under way.
            let w = unsafe { wr.read() };
            wr = w.next;
            // SAFETY: the program's receive, posted now (this function's
            // contract).
            let (list, shown) = unsafe { recv_view(&w, r.per_wr()) };
            for s in list {
                reused(r, s, q, &shown, site, None);
            }
            let Some(pos) = r.push(Entry {
                wr_id: w.wr_id,
                opcode: -1,
                flags: flag::WRITES,
                nsge: 0,
                site,
                obj: 0,
            }) else {
                break;
            };
            for s in list {
                if r.add_sge(pos, *s, [0; 8]) {
                    t.widen(s.addr, s.length);
                }
            }
            if cq != 0 {
                one_due(cq, q, &shown, site);
            }
        }
        Added {
            from,
            n: r.head - from,
        }
    })
    .inspect(|a| {
        if a.n > 0 {
            table::list(t);
        }
    })
    .unwrap_or(Added::NONE)
}

/// A receive chain's buffers, looked for among other queues' outstanding
/// receives (before the poster's own ring is locked: no two receive rings
/// are ever held at once).
///
/// # Safety
/// `wr` is NULL or the head of the program's chain, posted now.
unsafe fn recvs_elsewhere(
    own: usize,
    q: Queue,
    mut wr: *mut ibv_recv_wr,
    limit: usize,
    site: usize,
) {
    let mut walked = 0;
    while !wr.is_null() && walked < limit {
        walked += 1;
        // SAFETY: the program's chain, copied while its post is under way.
        let w = unsafe { wr.read() };
        wr = w.next;
        // SAFETY: the program's receive, posted now (this function's
        // contract).
        let (list, shown) = unsafe { recv_view(&w, ring::MAX_SGES) };
        for s in list {
            reused_elsewhere(own, s, q, &shown, site);
        }
    }
}

/// After the forward: a post that failed at `bad` had nothing from there
/// on reach the queue.
///
/// # Safety
/// `head` is the chain the program posted; `bad` its `bad_wr` argument.
pub(super) unsafe fn posted<W>(
    q: Queue,
    a: Added,
    rc: c_int,
    head: *mut W,
    bad: *mut *mut W,
    next: impl Fn(*mut W) -> *mut W,
) {
    let Some(ring) = ring_of(q).filter(|_| rc != 0 && a.n != 0) else {
        return;
    };
    // SAFETY: the provider set `*bad` to a WR of the chain (or left it).
    let bad = if bad.is_null() { head } else { unsafe { *bad } };
    let mut k = 0;
    let mut w = head;
    while !w.is_null() && w != bad && k < a.n {
        k += 1;
        w = next(w);
    }
    ring.with(|r| r.cancel(a.from + k, a.from + a.n));
}

/// The ring a post of `q` went to.
fn ring_of(q: Queue) -> Option<&'static ring::Locked<Ring>> {
    match q {
        Queue::Send(qp) => table::find(qp as usize).map(|t| &t.sq),
        Queue::Recv(qp) => table::find(qp as usize).map(|t| &t.rq),
        Queue::Srq(s) => table::find(s as usize).map(|t| &t.rq),
    }
}

/// A completion polled from `cq` of `ctx`: its work request (and, for a
/// send, every earlier one it implies) is no longer outstanding; a send's
/// source is fingerprinted again.
pub(super) fn completed(
    ctx: usize,
    cq: usize,
    qp_num: Option<u32>,
    wr_id: u64,
    status: c_int,
    opcode: c_int,
) {
    table::settle(cq, 1);
    let recv = opcode & WC_RECV != 0;
    let t = match qp_num {
        Some(n) => table::by_qpn(ctx, n),
        // An extended CQ without the QP number: the queue on this CQ whose
        // oldest request has this wr_id.
        None => table::all().find(|t| {
            !t.is_srq
                && (if recv { t.recv_cq } else { t.send_cq }) == cq
                && (if recv { &t.rq } else { &t.sq })
                    .with(|r| r.live().next().is_some_and(|p| r.get(p).wr_id == wr_id))
                    .unwrap_or(false)
        }),
    };
    let Some(t) = t else {
        return;
    };
    if recv {
        let rq = if t.srq != 0 {
            table::find(t.srq)
        } else {
            Some(t)
        };
        // Where the message landed (its first SGEs).
        let mut landed = [(0u64, 0u32); 4];
        let mut n = 0;
        if let Some(rq) = rq {
            rq.rq.with(|r| {
                let found = r.live().find(|&p| r.get(p).wr_id == wr_id);
                if let Some(p) = found {
                    if status == 0 {
                        for s in r.sges(p).iter().take(landed.len()) {
                            landed[n] = (s.addr, s.length);
                            n += 1;
                        }
                    }
                    r.get_mut(p).flags |= flag::DONE;
                    r.advance();
                    if r.tail == r.head {
                        rq.narrow();
                    }
                }
            });
        }
        if n > 0 {
            received_over_sources(t, &landed[..n]);
        }
        return;
    }
    let qp = t.qp as *mut ibv_qp;
    t.sq.with(|r| {
        // The signalled request of this wr_id; else (a completion of one
        // posted unsignalled: the provider signalled it anyway) the oldest.
        let signalled = r.live().find(|&p| {
            let e = r.get(p);
            e.wr_id == wr_id && (e.flags & flag::SIGNALED != 0 || status != 0)
        });
        let Some(end) = signalled.or_else(|| r.live().find(|&p| r.get(p).wr_id == wr_id)) else {
            return;
        };
        for p in r.tail..=end {
            let e = *r.get(p);
            if e.flags & flag::DONE != 0 {
                continue;
            }
            if status == 0 && e.flags & flag::SOURCE != 0 {
                verify(r, p, qp, |a, l| receive_holds(t, a, l));
            }
            r.get_mut(p).flags |= flag::DONE;
        }
        r.advance();
    });
}

/// A message landed in `landed` (address, length) on `t`: a send of the
/// same QP whose source overlaps it is no longer checked, since its
/// bytes changed by the device, not the program (perftest posts its key
/// exchange's SEND from the buffer of a posted receive, and the peer's
/// answer lands there before the send's completion is polled).
fn received_over_sources(t: &table::Tracker, landed: &[(u64, u32)]) {
    let overlaps = |a: u64, l: u32| {
        landed
            .iter()
            .any(|&(b, m)| a < b.saturating_add(u64::from(m)) && b < a.saturating_add(u64::from(l)))
    };
    t.sq.with(|r| {
        for p in r.tail..r.head {
            let e = *r.get(p);
            if e.flags & (flag::DONE | flag::SOURCE) == flag::SOURCE
                && r.sges(p).iter().any(|s| overlaps(s.addr, s.length))
            {
                r.get_mut(p).flags &= !flag::SOURCE;
            }
        }
    });
}

/// Whether a receive still posted on `t` (its own queue or its SRQ)
/// holds part of `[addr, addr + len)`: a message may have landed there
/// that the program has not polled yet.
fn receive_holds(t: &table::Tracker, addr: u64, len: u32) -> bool {
    let end = addr.saturating_add(u64::from(len));
    let rq = if t.srq != 0 {
        table::find(t.srq)
    } else {
        Some(t)
    };
    rq.and_then(|q| {
        q.rq.with(|r| {
            r.live().any(|p| {
                r.sges(p)
                    .iter()
                    .any(|s| s.addr < end && addr < s.addr.saturating_add(u64::from(s.length)))
            })
        })
    })
    .unwrap_or(false)
}

/// The source bytes of the send at `pos`, fingerprinted again. A change
/// inside a posted receive's buffer (`landed`) is the device's, not the
/// program's: not reported.
fn verify(r: &Ring, pos: u64, qp: *mut ibv_qp, landed: impl Fn(u64, u32) -> bool) {
    let e = r.get(pos);
    let sges = r.sges(pos);
    let mut offset = 0u64;
    for (i, (s, kept)) in sges.iter().zip(r.evidence(pos)).enumerate() {
        let at = offset;
        offset += u64::from(s.length);
        if s.length == 0 {
            continue;
        }
        // SAFETY: the SGE was inside a live MR at the post and the MR has
        // not been deregistered since (that clears SOURCE: `mr_going`).
        let Some(mut d) = (unsafe { differs(s.addr, s.length, kept) }) else {
            continue;
        };
        if !landed(s.addr, s.length) {
            if matches!(d, Diff::Blocks { .. }) {
                // SAFETY: as above.
                if let Some(x) = unsafe { sim::exact(qp, e.wr_id, sges[0].addr, at, s, kept) } {
                    d = x;
                }
            }
            datapath::violation(
                Check::SendModified,
                Queue::Send(qp),
                &wr_at(r, pos, None),
                e.site,
                format_args!(
                    "sge[{i}]'s bytes [{:#x}, +{}) changed between the post and its \
                     completion: {d}",
                    s.addr, s.length
                ),
            );
            return;
        }
    }
}

/// Completions polled from `cq` (the plain `poll_cq`).
pub(super) fn polled(ctx: usize, cq: *mut ibv_cq, done: &[ibv_wc]) {
    for wc in done {
        // SAFETY: int-sized C enums written by the provider, read as ints.
        let (status, opcode) = unsafe {
            (
                std::ptr::addr_of!(wc.status).cast::<c_int>().read(),
                std::ptr::addr_of!(wc.opcode).cast::<c_int>().read(),
            )
        };
        completed(ctx, cq as usize, Some(wc.qp_num), wc.wr_id, status, opcode);
    }
}
