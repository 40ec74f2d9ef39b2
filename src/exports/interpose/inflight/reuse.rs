//! A buffer the device is about to write (a receive, a READ's or an
//! atomic's destination) that is a buffer of an outstanding receive: of
//! the same queue, or of another QP or SRQ (`recv_reused`).

use verbs_abi::ibv_sge;

use super::datapath::{Queue, Wr};
use super::ring::Ring;
use super::table::{self, Tracker};
use super::*;

fn overlaps(a: &ibv_sge, b: &ibv_sge) -> bool {
    a.length > 0
        && b.length > 0
        && a.addr < b.addr.saturating_add(b.length as u64)
        && b.addr < a.addr.saturating_add(a.length as u64)
}

/// Is `s` (a buffer the NIC is about to write) a buffer of an
/// outstanding receive of `rq`? Reported at `site` as `q`'s post of `w`;
/// `other`: `rq` is another queue's (that queue's tracker). Whether it was.
pub(super) fn reused(
    rq: &Ring,
    s: &ibv_sge,
    q: Queue,
    w: &Wr,
    site: usize,
    other: Option<&Tracker>,
) -> bool {
    let Some(p) = rq.live().find(|&p| {
        rq.get(p).flags & (flag::WRITES | flag::FLUSHED) == flag::WRITES
            && rq.sges(p).iter().any(|o| overlaps(o, s))
    }) else {
        return false;
    };
    let e = rq.get(p);
    datapath::violation(
        Check::RecvReused,
        q,
        w,
        site,
        format_args!(
            "its buffer [{:#x}, +{}) is that of a receive (wr_id={:#x}{}, posted at {}) \
             that has not completed",
            s.addr,
            s.length,
            e.wr_id,
            On(other),
            crate::report::site(e.site)
        ),
    );
    true
}

/// Where a receive was posted, when another queue's.
struct On<'a>(Option<&'a Tracker>);

impl std::fmt::Display for On<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self.0 {
            None => Ok(()),
            Some(t) if t.is_srq => write!(f, " of another queue, srq={:#x}", t.qp),
            Some(t) => write!(f, " of another queue, qp={:#x} qp_num={}", t.qp, t.qp_num),
        }
    }
}

/// Is `s` a buffer of an outstanding receive of another queue than the
/// one at `own` (the poster's receive queue: its QP, or its SRQ)? Each
/// listed queue's span is looked at first, its ring (locked) only when
/// the span holds part of `s`; the first that holds it is reported.
/// Called with no receive ring's lock held.
pub(super) fn reused_elsewhere(own: usize, s: &ibv_sge, q: Queue, w: &Wr, site: usize) {
    if s.length == 0 {
        return;
    }
    let end = s.addr.saturating_add(u64::from(s.length));
    for u in table::receivers_but(own).filter(|u| u.may_hold(s.addr, end)) {
        if u.rq.with(|rr| reused(rr, s, q, w, site, Some(u))) == Some(true) {
            return;
        }
    }
}
