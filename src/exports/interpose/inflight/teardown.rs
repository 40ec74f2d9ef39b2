//! Teardown under posted work: a QP destroyed or reset with sends never
//! completed, a CQ destroyed with completions never polled, an MR torn
//! down under the work requests that use it.

use core::ffi::c_int;

use verbs_abi::{ibv_cq, ibv_mr, ibv_qp, ibv_sge, ibv_srq};

use super::ring::{flag, MAX_SGES};
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

/// A teardown finding, found before the call is forwarded (while the
/// state it names is as the program left it) and reported only once the
/// call has succeeded: a failed call tore nothing down (`ibv_dereg_mr`'s
/// EBUSY under bound windows, a provider without `ibv_rereg_mr`,
/// `ibv_destroy_cq`'s EBUSY while QPs use it). The request shown is
/// copied: its ring slot may be reused meanwhile.
pub(crate) struct Pending {
    check: Check,
    queue: Option<Queue>,
    wr_id: u64,
    opcode: Option<c_int>,
    sges: [ibv_sge; MAX_SGES],
    num_sge: usize,
    via: Option<&'static str>,
    site: usize,
    what: What,
}

enum What {
    Mr {
        mr: *mut ibv_mr,
        lkey: u32,
        using: usize,
        posted: usize,
    },
    Cq {
        cq: *mut ibv_cq,
        n: i64,
    },
}

impl Pending {
    fn of(check: Check, queue: Option<Queue>, w: &Wr, site: usize, what: What) -> Pending {
        const EMPTY: ibv_sge = ibv_sge {
            addr: 0,
            length: 0,
            lkey: 0,
        };
        let mut sges = [EMPTY; MAX_SGES];
        let num_sge = w.readable.min(MAX_SGES);
        if num_sge > 0 {
            // SAFETY: `w` views a ring entry: `readable` SGEs in the
            // ring's own storage, read under its lock.
            let src = unsafe { std::slice::from_raw_parts(w.sges, num_sge) };
            sges[..num_sge].copy_from_slice(src);
        }
        Pending {
            check,
            queue,
            wr_id: w.wr_id,
            opcode: w.opcode,
            sges,
            num_sge,
            via: w.via,
            site,
            what,
        }
    }

    /// The call succeeded: reported (and a CQ's completions due let go),
    /// the call's errno kept.
    pub(crate) fn report(self) {
        let saved = crate::errno::Errno::save();
        let w = Wr {
            wr_id: self.wr_id,
            opcode: self.opcode,
            sges: self.sges.as_ptr(),
            num_sge: self.num_sge as c_int,
            readable: self.num_sge,
            via: self.via,
        };
        match self.what {
            What::Mr {
                mr,
                lkey,
                using,
                posted,
            } => {
                if let Some(q) = self.queue {
                    datapath::violation(
                        self.check,
                        q,
                        &w,
                        self.site,
                        format_args!(
                            "MR {mr:p} (lkey {lkey:#x}) torn down while {using} posted work \
                             request(s) of this queue use it (the first shown, posted at {})",
                            crate::report::site(posted)
                        ),
                    );
                }
            }
            What::Cq { cq, n } => {
                if n > 0 {
                    datapath::violation_on(
                        self.check,
                        ("ibv_destroy_cq", "cq", cq as usize),
                        &w,
                        self.site,
                        format_args!(
                            "destroyed with {n} completion(s) of posted work requests never polled"
                        ),
                    );
                }
                table::cq_gone(cq as usize);
            }
        }
        saved.restore();
    }
}

/// `ibv_destroy_cq` at `site`, before it is forwarded: what to report,
/// and the CQ's completions due to let go, once it succeeds.
pub(in crate::exports::interpose) fn cq_destroying(
    cq: *mut ibv_cq,
    site: usize,
) -> Option<Pending> {
    let d = table::due(cq as usize)?;
    use std::sync::atomic::Ordering::Relaxed;
    let n = d.n.load(Relaxed) + d.orphan.load(Relaxed);
    let w = Wr::bare(0, None, None);
    Some(Pending::of(
        Check::TeardownCq,
        None,
        &w,
        site,
        What::Cq { cq, n },
    ))
}

/// `verb` (`ibv_dereg_mr`, `ibv_rereg_mr`) of `mr` at `site`, before it
/// is forwarded: the first queue's outstanding work that uses its lkey,
/// to report once the call succeeds. The bytes of all of it are not read
/// again, whether or not it succeeds (the range may be unmapped next).
/// An MR the registry does not hold live is not looked at.
pub(in crate::exports::interpose) fn mr_going(
    mr: *mut ibv_mr,
    verb: &'static str,
    site: usize,
) -> Option<Pending> {
    let o = crate::registry::objects::get(mr as usize)?;
    let (_, _, keys) = o.facts.mr_range()?;
    let (ctx, lkey) = (o.ctx, keys.lkey);
    let mut found = None;
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
                if let (Some(&p), None) = (using.first(), &found) {
                    let what = What::Mr {
                        mr,
                        lkey,
                        using: using.len(),
                        posted: r.get(p).site,
                    };
                    let w = wr_at(r, p, Some(verb));
                    found = Some(Pending::of(Check::TeardownMr, Some(q), &w, site, what));
                }
                for p in using {
                    r.get_mut(p).flags &= !flag::SOURCE;
                }
            });
        }
    }
    found
}
