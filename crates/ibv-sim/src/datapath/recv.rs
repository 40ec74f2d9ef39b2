//! Delivery of messages to receive queues (of QPs and SRQs): landing in a
//! receive WQE, parking a message until one is posted (the sender's RNR
//! wait), and completing the sender. The queues themselves: `recvq`.

use std::collections::VecDeque;

use crate::srq::SrqShared;

use super::*;

/// A message waiting for a receive WQE (the sender's RNR retries).
pub struct Pending {
    pub(super) dst: Arc<QpShared>,
    pub(super) msg: Message,
    /// Timed retries (a profile with `rnr_timer`, `rnr_retry` below 7):
    /// the message lands at a retry, not when the receive is posted.
    rnr: Option<RnrRetry>,
}

/// A parked message's RNR retries: the next one's time, those left, and
/// the responder's RNR timer.
#[derive(Clone, Copy)]
struct RnrRetry {
    due: u64,
    left: u8,
    period: u64,
}

impl Parked for Pending {
    fn dst_qpn(&self) -> u32 {
        self.dst.qp_num
    }

    fn land(self: Box<Self>, wqe: RecvWqe) {
        finish(&self.dst, wqe, self.msg);
    }

    fn fail(self: Box<Self>) {
        // As when the peer vanishes.
        complete_msg(&self.msg, WC_RETRY_EXC_ERR, 0);
    }

    fn due(&self) -> u64 {
        self.rnr.map_or(0, |r| r.due)
    }

    fn retry(&mut self, now: u64) -> bool {
        match &mut self.rnr {
            Some(r) if r.left > 0 => {
                r.left -= 1;
                r.due = now.saturating_add(r.period);
                true
            }
            _ => false,
        }
    }

    fn sender(&self) -> usize {
        match &self.msg.src {
            Origin::Local(s) => s.addr,
            Origin::Remote(_) => 0,
        }
    }

    fn refuse(self: Box<Self>, status: c_int) {
        complete_msg(&self.msg, status, 0);
    }
}

/// How a send that finds no receive WQE waits.
#[derive(Clone, Copy)]
pub(crate) enum RnrWait {
    /// Fails at once (RNR_RETRY_EXC_ERR): no retries.
    Fail,
    /// Waits for a receive however long it takes (`rnr_retry` 7).
    Forever,
    /// Retries every `period` ns, `retries` times, then fails.
    Timed { retries: u8, period: u64 },
}

/// The IB spec's RNR NAK timer (`min_rnr_timer` codes 0-31), microseconds.
const RNR_TIMER_US: [u64; 32] = [
    655_360, 10, 20, 30, 40, 60, 80, 120, 160, 240, 320, 480, 640, 960, 1_280, 1_920, 2_560, 3_840,
    5_120, 7_680, 10_240, 15_360, 20_480, 30_720, 40_960, 61_440, 81_920, 122_880, 163_840,
    245_760, 327_680, 491_520,
];

/// The RNR NAK timer of a responder's `min_rnr_timer`, ns.
pub(crate) fn rnr_timer_ns(code: u8) -> u64 {
    RNR_TIMER_US[usize::from(code & 31)] * 1_000
}

/// How a sender with attributes `a` waits for `dst`'s receives: forever
/// at `rnr_retry` 7; on a profile with `rnr_timer` (rxe), `rnr_retry`
/// retries of the responder's RNR timer; otherwise it fails at once.
pub(crate) fn rnr_wait_of(a: &QpAttrs, dst: &QpShared) -> RnrWait {
    if a.rnr_retry >= 7 {
        RnrWait::Forever
    } else if dst.dev.profile().rnr_timer {
        let code = dst.st.lock().attrs.min_rnr_timer;
        RnrWait::Timed {
            retries: a.rnr_retry,
            period: rnr_timer_ns(code),
        }
    } else {
        RnrWait::Fail
    }
}

/// Destination QPs, and SRQs, with messages on timed RNR retries
/// (`rnr_tick` looks at them). A forked child finds the locks free.
static RNR_QPS: crate::fork_lock::Mutex<Vec<Arc<QpShared>>> =
    crate::fork_lock::Mutex::new(Vec::new());
static RNR_SRQS: crate::fork_lock::Mutex<Vec<Arc<SrqShared>>> =
    crate::fork_lock::Mutex::new(Vec::new());
static N_RNR: core::sync::atomic::AtomicUsize = core::sync::atomic::AtomicUsize::new(0);

/// Whether a message waits on a timed RNR retry (the progress engine
/// keeps ticking while one does).
pub(crate) fn rnr_waiting() -> bool {
    N_RNR.load(Ordering::Relaxed) > 0
}

fn watch_rnr(dst: &Arc<QpShared>) {
    let mut v = RNR_QPS.lock();
    if !v.iter().any(|q| Arc::ptr_eq(q, dst)) {
        v.push(dst.clone());
        N_RNR.fetch_add(1, Ordering::Relaxed);
    }
}

fn watch_rnr_srq(s: &Arc<SrqShared>) {
    let mut v = RNR_SRQS.lock();
    if !v.iter().any(|q| Arc::ptr_eq(q, s)) {
        v.push(s.clone());
        N_RNR.fetch_add(1, Ordering::Relaxed);
    }
}

/// The retries that are due: a message whose receive was posted since
/// lands; one still without a receive retries again later, or, out of
/// retries, fails its sender with `IBV_WC_RNR_RETRY_EXC_ERR` (the sender
/// goes to ERR, and its messages parked behind it are flushed). Runs from
/// the progress engine's tick; for QPs' own receive queues and for SRQs.
pub(crate) fn rnr_tick() {
    if !rnr_waiting() {
        return;
    }
    let now = crate::fabric::now_ns();
    let qps: Vec<Arc<QpShared>> = RNR_QPS.lock().clone();
    for dst in qps.iter().filter(|q| q.born.here().is_ok()) {
        rnr_retry_due(|| dst.st.lock(), |g| &mut g.rq, |_| {}, now);
    }
    let srqs: Vec<Arc<SrqShared>> = RNR_SRQS.lock().clone();
    for s in srqs.iter().filter(|s| s.born.here().is_ok()) {
        rnr_retry_due(|| s.rq.lock(), |g| &mut g.rq, |g| s.after_take(g), now);
    }
    let timed = |rq: &crate::recvq::RecvQueue| rq.pending.iter().any(|p| p.due() != 0);
    let mut v = RNR_QPS.lock();
    v.retain(|q| q.born.here().is_ok() && timed(&q.st.lock().rq));
    let mut w = RNR_SRQS.lock();
    w.retain(|s| s.born.here().is_ok() && timed(&s.rq.lock().rq));
    N_RNR.store(v.len() + w.len(), Ordering::Relaxed);
}

/// [`rnr_tick`] for one queue: `lock` takes its owner's lock, `rq` finds
/// the queue under it, `took` runs after a WQE was taken (an SRQ's limit).
fn rnr_retry_due<G: core::ops::DerefMut>(
    lock: impl Fn() -> G,
    rq: impl Fn(&mut G::Target) -> &mut crate::recvq::RecvQueue,
    took: impl Fn(&mut G::Target),
    now: u64,
) {
    // Once the retry at the front landed, the messages waiting behind it
    // land too while receives are there.
    let mut landed = false;
    loop {
        let mut g = lock();
        let q = rq(&mut g);
        let Some(due) = q.pending.front().map(|p| p.due()) else {
            return;
        };
        if due > now || (due == 0 && !landed) {
            return;
        }
        if !q.wqes.is_empty() {
            let (Some(w), Some(p)) = (q.wqes.pop_front(), q.pending.pop_front()) else {
                return;
            };
            took(&mut g);
            drop(g);
            p.land(w);
            landed = true;
            continue;
        }
        if due == 0 {
            return;
        }
        // Still no receive: one more retry, or none left.
        let retried = q.pending.front_mut().is_some_and(|p| p.retry(now));
        if retried {
            return;
        }
        let Some(p) = q.pending.pop_front() else {
            return;
        };
        // Its sender goes to ERR: its messages parked behind it are flushed.
        let sender = p.sender();
        let (behind, rest): (VecDeque<_>, VecDeque<_>) = q
            .pending
            .drain(..)
            .partition(|m| sender != 0 && m.sender() == sender);
        q.pending = rest;
        drop(g);
        p.refuse(WC_RNR_RETRY_EXC_ERR);
        for m in behind {
            m.refuse(WC_WR_FLUSH_ERR);
        }
    }
}

/// Who sent a message, and so who learns how it ended.
pub enum Origin {
    /// A QP of this process: its completion is pushed directly.
    Local(Arc<QpShared>),
    /// A QP of another process: it gets a response over the fabric.
    Remote(crate::fabric::Peer),
}

/// A message on its way to a receive WQE.
pub struct Message {
    pub(super) src: Origin,
    pub(super) src_qpn: u32,
    pub(super) payload: Vec<u8>,
    pub(super) imm: Option<u32>,
    /// Send with invalidate: the responder's rkey to invalidate.
    pub(super) inv: Option<u32>,
    /// To an XRC receive QP: the XRC SRQ it lands in (and completes on).
    pub(super) xrc: Option<Arc<crate::xrc::XrcSrq>>,
    /// RDMA write with immediate: nothing to scatter, `byte_len` is this.
    pub(super) write_imm_len: Option<u32>,
    pub(super) solicited: bool,
    /// UD: the 40 bytes that precede the payload in the receive buffer.
    pub(super) grh: Option<[u8; GRH_LEN]>,
    /// UD: whether those bytes are a real GRH (`IBV_WC_GRH`).
    pub(super) grh_valid: bool,
    pub(super) slid: u16,
    pub(super) sl: u8,
    /// The sender's work request, completed when the message lands.
    pub(super) wr_id: u64,
    pub(super) signaled: bool,
    pub(super) send_opcode: c_int,
}

/// Completes the sender's work request; errors move the sender to ERR
/// (RC) or SQE (UC, UD).
pub(crate) fn complete_send(
    src: &QpShared,
    wr_id: u64,
    signaled: bool,
    opcode: c_int,
    status: c_int,
    byte_len: u32,
) {
    if status != WC_SUCCESS {
        // The buffer goes back to the program before all of it was sent.
        crate::fabric::settle_outbox();
    }
    src.sq_use.release();
    if status != WC_SUCCESS || signaled {
        let mut w = wc(wr_id, status, opcode, src.qp_num);
        w.byte_len = byte_len;
        src.send_cq.push(w, status != WC_SUCCESS);
    }
    if status != WC_SUCCESS {
        src.fail(if matches!(src.qp_type, QPT_RC | QPT_XRC_SEND) {
            ERR
        } else {
            SQE
        });
    }
}

/// Tells a message's sender how it ended.
pub(super) fn complete_msg(msg: &Message, status: c_int, byte_len: u32) {
    match &msg.src {
        Origin::Local(s) => complete_send(
            s,
            msg.wr_id,
            msg.signaled,
            msg.send_opcode,
            status,
            byte_len,
        ),
        Origin::Remote(p) => p.reply(status),
    }
}

/// Lands a message in a receive WQE of `dst`; returns the sender's status.
pub(crate) fn land(dst: &QpShared, wqe: RecvWqe, msg: &Message) -> c_int {
    let grh: &[u8] = msg.grh.as_ref().map_or(&[], |g| &g[..]);
    let (pd, recv_cq) = match &msg.xrc {
        Some(x) => (x.pd, &x.cq),
        None => (dst.pd, &dst.recv_cq),
    };
    let (result, byte_len) = match msg.write_imm_len {
        Some(n) => (Ok(()), n),
        // A window of ours that is not bound with that rkey: a protection
        // error here, a remote operation error at the sender.
        None if msg.inv.is_some_and(|k| !crate::mw::invalidate(pd, k)) => (Err(WC_LOC_PROT_ERR), 0),
        None => (
            scatter(pd, &wqe.sge, &[grh, &msg.payload]),
            (grh.len() + msg.payload.len()) as u32,
        ),
    };
    let opcode = if msg.write_imm_len.is_some() {
        WC_RECV_RDMA_WITH_IMM
    } else {
        WC_RECV
    };
    match result {
        Ok(()) => {
            let mut w = wc(wqe.wr_id, WC_SUCCESS, opcode, dst.qp_num);
            w.byte_len = byte_len;
            w.src_qp = msg.src_qpn;
            w.slid = msg.slid;
            w.sl = msg.sl;
            if let Some(imm) = msg.imm {
                w.imm_data = imm;
                w.wc_flags |= WC_WITH_IMM;
            }
            if let Some(k) = msg.inv {
                // `wc.invalidated_rkey` shares the immediate's bytes.
                w.imm_data = k;
                w.wc_flags |= WC_WITH_INV;
            }
            if msg.grh_valid {
                w.wc_flags |= WC_GRH;
            }
            // rxe: a receive completion lost to a full CQ is a class A
            // error of the responder, which goes to ERR (the CQ raised
            // IBV_EVENT_CQ_ERR).
            if !recv_cq.push(w, msg.solicited)
                && dst.dev.profile().cq_overflow_fails_qp
                && dst.qp_type != QPT_UD
            {
                dst.fail(ERR);
            }
            WC_SUCCESS
        }
        Err(status) => {
            let status = if status == WC_LOC_LEN_ERR && dst.dev.profile().short_recv_qp_op_err {
                WC_LOC_QP_OP_ERR
            } else {
                status
            };
            recv_cq.push(wc(wqe.wr_id, status, opcode, dst.qp_num), true);
            if dst.qp_type == QPT_UD {
                // Unreliable: the sender never learns.
                return WC_SUCCESS;
            }
            dst.fail(ERR);
            if status == WC_LOC_LEN_ERR && !dst.dev.profile().short_recv_qp_op_err {
                WC_REM_INV_REQ_ERR
            } else {
                WC_REM_OP_ERR
            }
        }
    }
}

pub(super) enum Taken {
    Wqe(RecvWqe, Message),
    Parked,
    None(Message),
    /// The QP was destroyed meanwhile: nothing answers the requester.
    Gone(Message),
}

/// Takes a receive WQE of `dst` for `msg`, or parks `msg` until one is
/// posted (`wait`), atomically with respect to posters.
pub(super) fn take_wqe(dst: &Arc<QpShared>, msg: Message, wait: bool) -> Taken {
    take_wqe_for(
        dst,
        msg,
        if wait {
            RnrWait::Forever
        } else {
            RnrWait::Fail
        },
    )
}

/// [`take_wqe`] with the sender's way of waiting: a timed wait parks on
/// the receive queue (the QP's own or its SRQ) with its first retry due
/// one RNR timer from now.
pub(super) fn take_wqe_for(dst: &Arc<QpShared>, msg: Message, how: RnrWait) -> Taken {
    let wait = !matches!(how, RnrWait::Fail);
    let first_retry = |behind: bool| match how {
        RnrWait::Timed { retries, period } if !behind => Some(RnrRetry {
            due: crate::fabric::now_ns().saturating_add(period),
            left: retries,
            period,
        }),
        _ => None,
    };
    // RC is in order: behind a parked message, the next one parks too.
    let srq = msg
        .xrc
        .as_ref()
        .map(|x| &x.srq)
        .or(dst.srq.as_ref())
        .cloned();
    if let Some(s) = &srq {
        let mut g = s.rq.lock();
        if dst.gone.load(Ordering::SeqCst) {
            return Taken::Gone(msg);
        }
        let behind = wait && g.rq.pending.iter().any(|p| p.dst_qpn() == dst.qp_num);
        if let Some(w) = (!behind).then(|| g.rq.wqes.pop_front()).flatten() {
            s.after_take(&mut g);
            return Taken::Wqe(w, msg);
        }
        if wait {
            let rnr = first_retry(behind);
            let timed = rnr.is_some();
            g.rq.pending.push_back(Box::new(Pending {
                dst: dst.clone(),
                msg,
                rnr,
            }));
            drop(g);
            if timed {
                watch_rnr_srq(s);
            }
            return Taken::Parked;
        }
        return Taken::None(msg);
    }
    let mut g = dst.st.lock();
    if dst.gone.load(Ordering::SeqCst) {
        return Taken::Gone(msg);
    }
    let behind = wait && !g.rq.pending.is_empty();
    if let Some(w) = (!behind).then(|| g.rq.wqes.pop_front()).flatten() {
        return Taken::Wqe(w, msg);
    }
    if wait {
        // Behind another message it waits its turn; at the front, a timed
        // wait's first retry is one RNR timer away.
        let rnr = first_retry(behind);
        let timed = rnr.is_some();
        g.rq.pending.push_back(Box::new(Pending {
            dst: dst.clone(),
            msg,
            rnr,
        }));
        drop(g);
        if timed {
            watch_rnr(dst);
        }
        return Taken::Parked;
    }
    Taken::None(msg)
}

/// Delivers `msg` to `dst` and completes the sender, now or (RNR wait) later.
pub(crate) fn deliver(dst: &Arc<QpShared>, msg: Message, rnr_wait: bool) {
    deliver_for(
        dst,
        msg,
        if rnr_wait {
            RnrWait::Forever
        } else {
            RnrWait::Fail
        },
    )
}

/// [`deliver`] with the sender's way of waiting ([`rnr_wait_of`]).
pub(crate) fn deliver_for(dst: &Arc<QpShared>, msg: Message, how: RnrWait) {
    match take_wqe_for(dst, msg, how) {
        Taken::Wqe(w, msg) => finish(dst, w, msg),
        Taken::Parked => {}
        Taken::Gone(msg) => {
            let status = if dst.qp_type == QPT_UD {
                WC_SUCCESS
            } else {
                WC_RETRY_EXC_ERR
            };
            complete_msg(&msg, status, 0);
        }
        Taken::None(msg) => {
            let status = if dst.qp_type == QPT_UD {
                WC_SUCCESS
            } else {
                WC_RNR_RETRY_EXC_ERR
            };
            complete_msg(&msg, status, 0);
        }
    }
}

pub(super) fn finish(dst: &QpShared, w: RecvWqe, msg: Message) {
    let status = land(dst, w, &msg);
    let len = msg.write_imm_len.unwrap_or(msg.payload.len() as u32);
    // A requester whose profile reports it (rxe) learns the bytes sent.
    let reports = matches!(&msg.src, Origin::Local(s) if s.dev.profile().send_byte_len);
    let byte_len = if msg.send_opcode == WC_RDMA_WRITE || reports {
        len
    } else {
        0
    };
    complete_msg(&msg, status, byte_len);
}

/// Delivers parked messages now that receives were posted.
pub(super) fn drain(take: impl Fn() -> Option<(RecvWqe, Box<dyn Parked>)>) {
    while let Some((w, p)) = take() {
        p.land(w);
    }
}
