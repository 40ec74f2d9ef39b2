//! Delivery of messages to receive queues (of QPs and SRQs): landing in a
//! receive WQE, parking a message until one is posted (the sender's RNR
//! wait), and completing the sender. The queues themselves: `recvq`.

use super::*;

/// A message waiting for a receive WQE (the sender's RNR retries).
pub struct Pending {
    pub(super) dst: Arc<QpShared>,
    pub(super) msg: Message,
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
            recv_cq.push(w, msg.solicited);
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
}

/// Takes a receive WQE of `dst` for `msg`, or parks `msg` until one is
/// posted (`wait`), atomically with respect to posters.
pub(super) fn take_wqe(dst: &Arc<QpShared>, msg: Message, wait: bool) -> Taken {
    // RC is in order: behind a parked message, the next one parks too.
    let srq = msg
        .xrc
        .as_ref()
        .map(|x| &x.srq)
        .or(dst.srq.as_ref())
        .cloned();
    if let Some(s) = &srq {
        let mut g = s.rq.lock();
        let behind = wait && g.rq.pending.iter().any(|p| p.dst_qpn() == dst.qp_num);
        if let Some(w) = (!behind).then(|| g.rq.wqes.pop_front()).flatten() {
            s.after_take(&mut g);
            return Taken::Wqe(w, msg);
        }
        if wait {
            g.rq.pending.push_back(Box::new(Pending {
                dst: dst.clone(),
                msg,
            }));
            return Taken::Parked;
        }
        return Taken::None(msg);
    }
    let mut g = dst.st.lock();
    let behind = wait && !g.rq.pending.is_empty();
    if let Some(w) = (!behind).then(|| g.rq.wqes.pop_front()).flatten() {
        return Taken::Wqe(w, msg);
    }
    if wait {
        g.rq.pending.push_back(Box::new(Pending {
            dst: dst.clone(),
            msg,
        }));
        return Taken::Parked;
    }
    Taken::None(msg)
}

/// Delivers `msg` to `dst` and completes the sender, now or (RNR wait) later.
pub(crate) fn deliver(dst: &Arc<QpShared>, msg: Message, rnr_wait: bool) {
    match take_wqe(dst, msg, rnr_wait) {
        Taken::Wqe(w, msg) => finish(dst, w, msg),
        Taken::Parked => {}
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
