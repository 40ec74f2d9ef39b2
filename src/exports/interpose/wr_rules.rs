//! The rules a posted work request is checked against (each SGE's lkey,
//! PD, range and access; `num_sge` and inline data against the queue's
//! caps; the QP's state; the chain's length), walking a send or receive
//! chain; each broken rule is reported through `datapath::violation`.

use std::ffi::c_int;
use std::ptr::addr_of;

use verbs_abi::{ibv_qp, ibv_recv_wr, ibv_send_wr, ibv_sge};

use super::datapath::{caps_of, chain_limit, violation, Queue, Wr};
use super::keys::{self, Key};
use super::{clean, completions};
use crate::checks::Check;
use crate::registry::objects::{self, Kind, Obj};

/// Does the MR's PD `mr_pd` serve a queue on `pd`? Equal, or one is a
/// parent domain of the other's PD.
fn same_pd(pd: usize, mr_pd: usize) -> bool {
    if pd == mr_pd {
        return true;
    }
    let base = |p: usize| match objects::get(p) {
        Some(o) if o.kind() == Kind::ParentDomain => o.parent,
        _ => p,
    };
    base(pd) == base(mr_pd)
}

/// Checks one SGE of `wr`; `write`: the operation writes into the buffer.
#[inline]
fn check_sge(q: Queue, ctx: usize, wr: &Wr, s: &ibv_sge, write: bool, site: usize) {
    if s.length == 0 {
        return;
    }
    // SAFETY: the queue the program posts to, live while its post is under
    // way (every `Queue` of the checks is one).
    let pd = unsafe { q.pd() };
    // The clean post of a known lkey: no lock, no registry lookup.
    if keys::passes(ctx, s.lkey, pd, s.addr, s.length, write) {
        return;
    }
    check_sge_fully(q, ctx, wr, s, write, site);
}

/// [`check_sge`] through the lkey index (which caches a live MR's facts).
#[inline(never)]
fn check_sge_fully(q: Queue, ctx: usize, wr: &Wr, s: &ibv_sge, write: bool, site: usize) {
    let mr: Obj = match keys::lookup(ctx, s.lkey) {
        Key::Mr(o) => o,
        Key::OtherContext(o) => {
            return violation(
                Check::OtherContext,
                q,
                wr,
                site,
                format_args!(
                    "lkey {:#x} is MR {:#x} of context {:#x}, not of this queue's context {ctx:#x}",
                    s.lkey, o.addr, o.ctx
                ),
            )
        }
        Key::Gone(mr) => {
            return violation(
                Check::DeadLkey,
                q,
                wr,
                site,
                format_args!("lkey {:#x} is MR {mr:#x}, which was deregistered", s.lkey),
            )
        }
        Key::Unknown => {
            return violation(
                Check::DeadLkey,
                q,
                wr,
                site,
                format_args!("lkey {:#x} is no MR registered through the shim", s.lkey),
            )
        }
    };
    // SAFETY: as in `check_sge`.
    let pd = unsafe { q.pd() };
    if !same_pd(pd, mr.parent) {
        violation(
            Check::OtherPd,
            q,
            wr,
            site,
            format_args!(
                "lkey {:#x} is MR {:#x} of PD {:#x}, not of the queue's PD {pd:#x}",
                s.lkey, mr.addr, mr.parent
            ),
        );
    }
    let f = keys::Facts::of(&mr);
    if !f.covers(s.addr, s.length) {
        let (start, end) = (f.start as u128, f.start as u128 + f.len as u128);
        let (s_start, s_end) = (s.addr as u128, s.addr as u128 + s.length as u128);
        violation(
            Check::OutOfRange,
            q,
            wr,
            site,
            format_args!(
                "[{:#x}, {:#x}) is not inside MR {:#x} [{:#x}, {:#x}) (lkey {:#x})",
                s_start, s_end, mr.addr, start, end, s.lkey
            ),
        );
    }
    if write && !f.writable {
        violation(
            Check::Access,
            q,
            wr,
            site,
            format_args!(
                "the operation writes into MR {:#x} (lkey {:#x}), registered without \
                 IBV_ACCESS_LOCAL_WRITE (access={:#x})",
                mr.addr,
                s.lkey,
                match mr.facts {
                    objects::Facts::Mr(m) => m.access,
                    _ => 0,
                }
            ),
        );
    }
}

/// Checks one work request (its SGEs read only as far as `readable`).
#[inline]
pub(super) fn check_wr(q: Queue, ctx: usize, wr: &Wr, write: bool, inline: bool, site: usize) {
    if wr.num_sge < 0 {
        return violation(
            Check::NumSge,
            q,
            wr,
            site,
            format_args!("num_sge is negative"),
        );
    }
    if wr.num_sge > 0 && wr.sges.is_null() {
        return violation(
            Check::NullSgList,
            q,
            wr,
            site,
            format_args!(
                "sg_list is NULL with num_sge {}: the provider reads the SGEs there",
                wr.num_sge
            ),
        );
    }
    check_caps(q, wr, inline, site);
    if inline {
        return;
    }
    for sge in wr.sges() {
        check_sge(q, ctx, wr, &sge, write, site);
    }
}

/// `num_sge` and inline data against what the provider granted the queue.
fn check_caps(q: Queue, wr: &Wr, inline: bool, site: usize) {
    let Some(c) = caps_of(q) else {
        return;
    };
    let (max, field) = match q {
        Queue::Send(_) => (c.send_sge, "max_send_sge"),
        Queue::Recv(_) => (c.recv_sge, "max_recv_sge"),
        Queue::Srq(_) => (c.recv_sge, "max_sge"),
    };
    let n = wr.num_sge as u32;
    if n > max {
        // The provider refuses it before reading the list: neither are
        // its SGEs checked past the granted count.
        return violation(
            Check::NumSge,
            q,
            wr,
            site,
            format_args!("num_sge {n} is above the queue's {field} {max}"),
        );
    }
    if !inline {
        return;
    }
    let bytes: u64 = wr.sges().map(|s| s.length as u64).sum();
    if bytes > c.inline as u64 {
        violation(
            Check::InlineSize,
            q,
            wr,
            site,
            format_args!(
                "IBV_SEND_INLINE with {bytes} bytes, above the QP's max_inline_data {}",
                c.inline
            ),
        );
    }
}

/// The QP's state, read as the int it is in C, atomically (another
/// thread's `ibv_modify_qp` may be writing it).
///
/// # Safety
/// `qp` is a live QP.
unsafe fn qp_state(qp: *mut ibv_qp) -> c_int {
    // SAFETY: a live QP the program is posting to; `state` is an aligned
    // int-sized field.
    unsafe {
        core::sync::atomic::AtomicI32::from_ptr(core::ptr::addr_of_mut!((*qp).state).cast::<i32>())
            .load(core::sync::atomic::Ordering::Relaxed)
    }
}

pub(super) fn state_name(state: c_int) -> &'static str {
    [
        "RESET", "INIT", "RTR", "RTS", "SQD", "SQE", "ERR", "UNKNOWN",
    ]
    .get(state as usize)
    .copied()
    .unwrap_or("?")
}

pub(super) fn check_state(q: Queue, wr: &Wr, site: usize) {
    let (qp, ok): (_, fn(c_int) -> bool) = match q {
        Queue::Send(qp) => (qp, clean::sends_allowed),
        Queue::Recv(qp) => (qp, clean::recvs_allowed),
        Queue::Srq(_) => return,
    };
    // SAFETY: a live QP the program posts to.
    let state = unsafe { qp_state(qp) };
    if !ok(state) {
        violation(
            Check::QpState,
            q,
            wr,
            site,
            format_args!(
                "the QP is in state {}, where {} is not allowed",
                state_name(state),
                wr.via.unwrap_or(q.verb())
            ),
        );
    }
}

/// Checks a chain of send WRs and remembers them for the error explainer.
///
/// # Safety
/// `qp` is a live QP and `wr` NULL or the head of the program's WR chain, posted to it now.
pub(super) unsafe fn check_sends(qp: *mut ibv_qp, mut wr: *mut ibv_send_wr, site: usize) {
    // SAFETY: a live QP (the inline verb read its context).
    let (ctx, qp_num) = unsafe { ((*qp).context as usize, (*qp).qp_num) };
    let q = Queue::Send(qp);
    let limit = chain_limit(q);
    let mut walked = 0;
    while !wr.is_null() {
        // SAFETY: the program's WR chain, read while its post is under way;
        // the opcode read as the int it is in C.
        let (w, flags) = unsafe {
            let r = &*wr;
            let op = addr_of!(r.opcode).cast::<c_int>().read();
            (
                Wr::new(q, r.wr_id, Some(op), r.sg_list, r.num_sge, None),
                r.send_flags,
            )
        };
        if walked == limit {
            return too_long(q, &w, limit, site);
        }
        let op = w.opcode.unwrap_or(0);
        if walked == 0 {
            check_state(q, &w, site);
        }
        let inline = flags & clean::SEND_INLINE != 0;
        check_wr(q, ctx, &w, clean::writes(op), inline, site);
        completions::posted(crate::addr::Addr::new(ctx), qp_num, &w.summary(), site);
        walked += 1;
        // SAFETY: as above.
        wr = unsafe { (*wr).next };
    }
}

/// Checks a chain of receive WRs (to a QP, or to an SRQ).
///
/// # Safety
/// `q`'s queue is live and `wr` NULL or the head of the program's WR chain, posted to it now.
pub(super) unsafe fn check_recvs(q: Queue, mut wr: *mut ibv_recv_wr, site: usize) {
    // SAFETY: a live QP or SRQ (the inline verb read its context).
    let (ctx, qp_num) = unsafe {
        match q {
            Queue::Send(qp) | Queue::Recv(qp) => ((*qp).context as usize, Some((*qp).qp_num)),
            Queue::Srq(s) => ((*s).context as usize, None),
        }
    };
    let limit = chain_limit(q);
    let mut walked = 0;
    while !wr.is_null() {
        // SAFETY: the program's WR chain, read while its post is under way.
        let w = unsafe {
            let r = &*wr;
            Wr::new(q, r.wr_id, None, r.sg_list, r.num_sge, None)
        };
        if walked == limit {
            return too_long(q, &w, limit, site);
        }
        if walked == 0 {
            check_state(q, &w, site);
        }
        check_wr(q, ctx, &w, true, false, site);
        if let Some(n) = qp_num {
            completions::posted(crate::addr::Addr::new(ctx), n, &w.summary(), site);
        }
        walked += 1;
        // SAFETY: as above.
        wr = unsafe { (*wr).next };
    }
}

/// `w`, the WR after the first `limit` of its chain, does not fit in the
/// queue: the provider fails the post there (ENOMEM, `bad_wr` = `w`), and
/// the walk stops (a chain that loops back on itself ends here too).
fn too_long(q: Queue, w: &Wr, limit: usize, site: usize) {
    violation(
        Check::ChainLength,
        q,
        w,
        site,
        format_args!(
            "work request chain longer than the queue (loops?): this is WR {} of a queue \
             of {limit}; the provider fails it with ENOMEM",
            limit + 1
        ),
    );
}
