//! `ibv_destroy_qp`, and failing the messages parked for a QP that is
//! reset or destroyed.

use super::*;

/// `ibv_destroy_qp`: `EBUSY` while attached to multicast groups; waits for
/// its async events to be acknowledged; drops its completions from the CQs.
pub fn destroy(qp: *mut ibv_qp) -> Result<(), c_int> {
    let (ctx, q) = get_as(qp, libc::ENOENT)?;
    let s = &q.shared;
    {
        let mut st = ctx.lock_open()?;
        if !registry::is_live(qp as usize, Kind::Qp) {
            return Err(libc::EINVAL);
        }
        if !s.st.lock().mcast.is_empty() || q.users.load(Ordering::Relaxed) > 0 {
            return Err(libc::EBUSY);
        }
        OBJECTS.remove(qp as usize);
        if s.handles.fetch_sub(1, Ordering::Relaxed) > 1 {
            // Another handle of an XRC receive QP keeps the QP.
            // SAFETY: its XRC domain is live: the handle counts as a user.
            unsafe { (*q.xrcd).users.give() };
            st.children -= 1;
            drop(st);
            // The QP publishes its state into the handle it was created
            // with (`QpShared::addr`): that one stays allocated (a small
            // leak, only when it goes before a handle `ibv_open_qp` made).
            if s.addr != qp as usize {
                // SAFETY: allocated by Box in `open_xrc`, unregistered above.
                drop(unsafe { Box::from_raw(qp as *mut SimQp) });
            }
            return Ok(());
        }
        QPS.remove(s.qp_num);
        crate::fabric::free_qpn(s.qp_num);
        ctx.dev.give(crate::device::Limit::Qp);
    }
    {
        let mut g = s.st.lock();
        s.gone.store(true, Ordering::SeqCst);
        g.state = RESET;
        g.rq.wqes.clear();
        g.out.clear();
    }
    crate::fabric::settle_outbox();
    drop_pending_from(s);
    s.sent.clear();
    let addr = qp as usize;
    ctx.async_q
        .purge(|e| e.element == addr && e.event_type != async_kind::CQ_ERR);
    s.events.wait_settled();
    s.send_cq.remove_qp(s.qp_num);
    s.recv_cq.remove_qp(s.qp_num);
    let mut st = ctx.lock();
    // SAFETY: the QP's PD, CQs, SRQ and XRC domain (those it has) are
    // live: the QP counts as their user.
    unsafe {
        if let Some(p) = q.pd.as_ref() {
            p.users.fetch_sub(1, Ordering::Relaxed);
        }
        for c in [q.send_cq, q.recv_cq] {
            if let Some(c) = c.as_ref() {
                c.users.fetch_sub(1, Ordering::Relaxed);
            }
        }
        if let Some(x) = q.xrcd.as_ref() {
            x.users.give();
        }
        if !q.srq.is_null() {
            (*q.srq).users.fetch_sub(1, Ordering::Relaxed);
        }
    }
    st.children -= 1;
    drop(st);
    // SAFETY: allocated by Box in `create`, unregistered above.
    drop(unsafe { Box::from_raw(qp as *mut SimQp) });
    Ok(())
}

/// Fails the messages parked on `s`'s receive queue (or destined to `s`
/// on its SRQ): used when `s` is reset or destroyed. Their senders see
/// `IBV_WC_RETRY_EXC_ERR`, as when the peer vanishes.
pub fn drop_pending_from(s: &QpShared) {
    let mut failed: Vec<Box<dyn Parked>> = {
        let mut g = s.st.lock();
        g.drop_early();
        g.rq.pending.drain(..).collect()
    };
    if let Some(srq) = &s.srq {
        failed.extend(srq.rq.lock().rq.take_pending_of(s.qp_num));
    }
    for p in failed {
        p.fail();
    }
}
