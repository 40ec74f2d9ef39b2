//! Teardown under posted work: a QP destroyed or reset with sends never
//! completed, a CQ destroyed with completions never polled, an MR torn
//! down under the work requests that use it.

use verbs_abi::{ibv_cq, ibv_mr, ibv_qp, ibv_srq};

use super::ring::flag;
use super::table::{self, Tracker};
use super::wr_at;
use crate::checks::Check;
use crate::exports::interpose::datapath::{self, Queue, Wr};

/// The sends of `t` never completed, reported as `verb` at `site`: those
/// up to the last signalled one, whose completion the program could have
/// polled. Unsignalled sends after it have no completion to wait for (a
/// UD sender, or one that knows delivery from its peer, leaves them so):
/// not a finding. Destroyed (`orphan`): the signalled ones stay due on
/// the CQ, which should not be destroyed before they are polled; reset:
/// the provider drops them.
fn unpolled_sends(t: &Tracker, verb: &'static str, site: usize, what: &str, orphan: bool) {
    let qp = t.qp as *mut ibv_qp;
    t.sq.with(|r| {
        let signalled = |p: &u64| r.get(*p).flags & flag::SIGNALED != 0;
        let n = r
            .live()
            .enumerate()
            .filter(|(_, p)| signalled(p))
            .last()
            .map_or(0, |(i, _)| i + 1);
        if let Some(p) = r.live().next().filter(|_| n > 0) {
            datapath::violation(
                Check::TeardownQp,
                Queue::Send(qp),
                &wr_at(r, p, Some(verb)),
                site,
                format_args!(
                    "{what} with {n} send work request(s) whose completions were never polled \
                     (the first shown, posted at {})",
                    crate::report::site(r.get(p).site)
                ),
            );
        }
        // Signalled sends polled never: due on the CQ still, orphaned.
        let due = r
            .live()
            .filter(|&p| r.get(p).flags & flag::SIGNALED != 0)
            .count();
        if let Some(d) = table::due(t.send_cq).filter(|_| orphan) {
            d.orphan
                .fetch_add(due as i64, std::sync::atomic::Ordering::Relaxed);
        }
        table::settle_live(t.send_cq, due as i64);
        r.clear();
    });
    let received = t.rq.with(|r| {
        let n = r.live().count();
        r.clear();
        n
    });
    if !t.is_srq && t.srq == 0 {
        table::settle_live(t.recv_cq, received.unwrap_or(0) as i64);
    }
}

/// `ibv_destroy_qp` at `site`, before it is forwarded (a QP not tracked
/// is not looked at).
pub(in crate::exports::interpose) fn qp_destroying(qp: *mut ibv_qp, site: usize) {
    if let Some(t) = table::find(qp as usize) {
        unpolled_sends(t, "ibv_destroy_qp", site, "destroyed", true);
        table::forget(qp as usize);
    }
}

/// `ibv_destroy_srq`, before it is forwarded.
pub(in crate::exports::interpose) fn srq_destroying(srq: *mut ibv_srq) {
    table::forget(srq as usize);
}

/// `ibv_modify_qp` to RESET at `site` succeeded.
pub(in crate::exports::interpose) fn qp_reset(qp: *mut ibv_qp, site: usize) {
    if let Some(t) = table::find(qp as usize) {
        unpolled_sends(t, "ibv_modify_qp", site, "moved to RESET", false);
    }
}

/// `ibv_modify_qp` to ERR succeeded: the device flushes the QP's own
/// queues and touches none of their buffers again (an SRQ's receives stay
/// posted); their completions stay due.
pub(in crate::exports::interpose) fn qp_error(qp: *mut ibv_qp) {
    if let Some(t) = table::find(qp as usize) {
        for ring in [&t.sq, &t.rq] {
            ring.with(|r| {
                for p in r.tail..r.head {
                    let e = r.get_mut(p);
                    e.flags = (e.flags | flag::FLUSHED) & !flag::SOURCE;
                }
            });
        }
    }
}

/// `ibv_destroy_cq` at `site`, before it is forwarded.
pub(in crate::exports::interpose) fn cq_destroying(cq: *mut ibv_cq, site: usize) {
    let Some(d) = table::due(cq as usize) else {
        return;
    };
    use std::sync::atomic::Ordering::Relaxed;
    let n = d.n.load(Relaxed) + d.orphan.load(Relaxed);
    if n > 0 {
        let w = Wr::bare(0, None, None);
        datapath::violation_on(
            Check::TeardownCq,
            ("ibv_destroy_cq", "cq", cq as usize),
            &w,
            site,
            format_args!("destroyed with {n} completion(s) of posted work requests never polled"),
        );
    }
    table::cq_gone(cq as usize);
}

/// `verb` (`ibv_dereg_mr`, `ibv_rereg_mr`) of `mr` at `site`, before it
/// is forwarded: outstanding work that uses its lkey is reported, and its
/// bytes are not read again. An MR the registry does not hold live is
/// not looked at.
pub(in crate::exports::interpose) fn mr_going(mr: *mut ibv_mr, verb: &'static str, site: usize) {
    let Some(o) = crate::registry::objects::get(mr as usize) else {
        return;
    };
    let Some((_, _, keys)) = o.facts.mr_range() else {
        return;
    };
    let (ctx, lkey) = (o.ctx, keys.lkey);
    let mut reported = false;
    for t in table::all().filter(|t| t.ctx == ctx) {
        for (ring, q) in [
            (&t.sq, Queue::Send(t.qp as *mut ibv_qp)),
            (
                &t.rq,
                if t.is_srq {
                    Queue::Srq(t.qp as *mut ibv_srq)
                } else {
                    Queue::Recv(t.qp as *mut ibv_qp)
                },
            ),
        ] {
            ring.with(|r| {
                let using: Vec<u64> = r
                    .live()
                    .filter(|&p| {
                        r.get(p).flags & flag::FLUSHED == 0
                            && r.sges(p).iter().any(|s| s.lkey == lkey)
                    })
                    .collect();
                if let (Some(&p), false) = (using.first(), reported) {
                    reported = true;
                    datapath::violation(
                        Check::TeardownMr,
                        q,
                        &wr_at(r, p, Some(verb)),
                        site,
                        format_args!(
                            "MR {mr:p} (lkey {lkey:#x}) torn down while {} posted work \
                             request(s) of this queue use it (the first shown, posted at {})",
                            using.len(),
                            crate::report::site(r.get(p).site)
                        ),
                    );
                }
                for p in using {
                    r.get_mut(p).flags &= !flag::SOURCE;
                }
            });
        }
    }
}
