//! Memory windows under posted work. What the shim can see of a window
//! is local: the program's own binds (`ibv_bind_mw`, a posted
//! `IBV_WR_BIND_MW`) and local invalidations (`IBV_WR_LOCAL_INV` of an
//! rkey of its index: the upper 24 bits, which a bind does not change)
//! on its own send queues. `ibv_dealloc_mw` while one of them has
//! not completed frees the window under the device, which still executes
//! (or has executed, unseen) the request: `teardown_mw`. A peer's READ or
//! WRITE through the window's rkey is not seen here (it is the peer's
//! work request), nor is a remote invalidation.

use verbs_abi::{ibv_mw, ibv_mw_bind, ibv_qp};

use super::ring::{flag, Entry};
use super::{of_qp, one_due, table, wr_at, Added, BIND_MW, LOCAL_INV, SEND_SIGNALED};
use crate::checks::Check;
use crate::exports::interpose::datapath::{self, Queue};

/// `ibv_bind_mw(qp, mw, bind)` at `site`, before it is forwarded: the
/// provider posts the bind on `qp`'s send queue itself, so it is kept
/// there as a posted `IBV_WR_BIND_MW`.
///
/// # Safety
/// `qp` is a live QP; `bind` NULL or the program's `ibv_mw_bind`.
pub(in crate::exports::interpose) unsafe fn bind_posting(
    qp: *mut ibv_qp,
    mw: *mut ibv_mw,
    bind: *const ibv_mw_bind,
    site: usize,
) -> Added {
    if bind.is_null() {
        return Added::NONE;
    }
    // SAFETY: the caller's contract.
    let Some(t) = (unsafe { of_qp(qp) }) else {
        return Added::NONE;
    };
    // SAFETY: the program's struct, read during its call (plain integers).
    let (wr_id, flags) = unsafe { ((*bind).wr_id, (*bind).send_flags) };
    let mut f = 0;
    if t.sig_all || flags & SEND_SIGNALED != 0 {
        f |= flag::SIGNALED;
    }
    t.sq.with(|r| {
        let Some(pos) = r.push(Entry {
            wr_id,
            opcode: BIND_MW,
            flags: f,
            nsge: 0,
            site,
            obj: mw as u64,
        }) else {
            return Added::NONE;
        };
        if f & flag::SIGNALED != 0 {
            one_due(t.send_cq, Queue::Send(qp), &wr_at(r, pos, None), site);
        }
        Added { from: pos, n: 1 }
    })
    .unwrap_or(Added::NONE)
}

/// After `ibv_bind_mw`'s forward: a bind the provider refused never
/// reached the queue.
pub(in crate::exports::interpose) fn bind_posted(qp: *mut ibv_qp, a: Added, rc: i32) {
    if rc == 0 || a.n == 0 {
        return;
    }
    if let Some(t) = table::find(qp as usize) {
        t.sq.with(|r| {
            if r.get(a.from).flags & (flag::SIGNALED | flag::DONE) == flag::SIGNALED {
                table::settle_live(t.send_cq, 1);
            }
            r.cancel(a.from, a.from + a.n)
        });
    }
}

/// `ibv_dealloc_mw(mw)` at `site`, before it is forwarded: outstanding
/// binds of the window, and local invalidations of its rkey, on the
/// context's send queues are reported (a QP moved to ERR has flushed its
/// own). A window the registry does not hold live is not looked at.
pub(in crate::exports::interpose) fn mw_going(mw: *mut ibv_mw, site: usize) {
    let Some(o) = crate::registry::objects::get(mw as usize) else {
        return;
    };
    let crate::registry::objects::Facts::Mw { rkey: known, .. } = o.facts else {
        return;
    };
    // SAFETY: a live window (the registry holds it): its rkey is a plain
    // word the provider writes at a bind.
    let now = unsafe { std::ptr::addr_of!((*mw).rkey).read() };
    let names = |e: &Entry| {
        e.flags & flag::FLUSHED == 0
            && match e.opcode {
                BIND_MW => e.obj == mw as u64,
                // The rkey's upper 24 bits name the window (its index);
                // a type 2 bind changes only its key byte.
                LOCAL_INV => [now, known].iter().any(|&k| e.obj as u32 >> 8 == k >> 8),
                _ => false,
            }
    };
    for t in table::all().filter(|t| t.ctx == o.ctx && !t.is_srq) {
        let qp = t.qp as *mut ibv_qp;
        let found = t.sq.with(|r| {
            let mut using = r.live().filter(|&p| names(r.get(p)));
            let first = using.next()?;
            let n = 1 + using.count();
            let e = r.get(first);
            datapath::violation(
                Check::TeardownMw,
                Queue::Send(qp),
                &wr_at(r, first, Some("ibv_dealloc_mw")),
                site,
                format_args!(
                    "MW {mw:p} (rkey {now:#x}) deallocated while {n} posted work request(s) \
                     of this queue that {} it have not completed (the first shown, posted at {})",
                    if e.opcode == BIND_MW {
                        "bind"
                    } else {
                        "invalidate"
                    },
                    crate::report::site(e.site)
                ),
            );
            Some(())
        });
        if let Some(Some(())) = found {
            return;
        }
    }
}
