//! The responder's side of work requests from other processes: a request
//! arriving in this process's progress engine is checked the way a
//! responder HCA checks it (the QP exists, takes this type, can receive,
//! is connected back, is reached at the address used; rkey, bounds and
//! access), executed against this process's memory, and answered (ACK,
//! NAK with the requester's status, data, or DROP). RDMA WRITE fragments
//! are placed straight into the target memory. The requester's side is
//! `remote`.

use core::ffi::c_int;
use core::sync::atomic::{AtomicU64, Ordering};

use verbs_abi::ibv_ah_attr;

use super::{
    deliver, deliver_for, land, reaches, remote as remote_mem, take_wqe, Message, Origin, RnrWait,
    Taken, WC_LOC_LEN_ERR, WC_RDMA_WRITE, WC_REM_INV_REQ_ERR, WC_RETRY_EXC_ERR, WC_SEND,
    WC_SUCCESS,
};
use crate::fabric::wire::{flag, kind, Wire};
use crate::fabric::{self, Peer};
use crate::mr::{REMOTE_ATOMIC, REMOTE_READ, REMOTE_WRITE};
use crate::qp::{self, QpShared, QPS};
use crate::qp_state::QPT_UD;

pub(super) fn reply_data(p: &Peer, k: u32, old: u64, data: &[u8]) {
    let mut w = Wire::zeroed();
    w.kind = k;
    w.dst_qpn = p.qpn;
    w.seq = p.seq;
    w.compare_add = old;
    fabric::send(p.dest, &mut w, data);
}

/// Whether the address a request was sent to reaches `dst`'s port.
pub(super) fn reached(w: &Wire, dst: &QpShared, port: u8) -> bool {
    // SAFETY: plain data; all-zero is valid.
    let mut ah: ibv_ah_attr = unsafe { core::mem::zeroed() };
    ah.dlid = w.dlid;
    ah.is_global = w.is_global;
    ah.grh.dgid.raw = w.dgid;
    reaches(&ah, dst, u32::from(port))
}

/// The message a request from `peer` carries to a receive queue.
pub(super) fn message(
    w: &Wire,
    peer: &Peer,
    payload: Vec<u8>,
    write_imm_len: Option<u32>,
    send_opcode: c_int,
) -> Message {
    Message {
        src: Origin::Remote(Peer {
            dest: peer.dest,
            qpn: peer.qpn,
            seq: peer.seq,
            reply: peer.reply,
        }),
        src_qpn: w.src_qpn,
        payload,
        imm: (w.flags & flag::IMM != 0).then_some(w.imm),
        inv: (w.flags & flag::INV != 0).then_some(w.rkey),
        xrc: None,
        write_imm_len,
        solicited: w.flags & flag::SOLICITED != 0,
        grh: None,
        grh_valid: false,
        slid: w.slid,
        sl: w.sl,
        wr_id: 0,
        signaled: false,
        send_opcode,
    }
}

/// Whether `dst` (locked in `g`) takes a connected-mode request `w`: the
/// type pairs, the QP can receive, is connected back to the requester,
/// and the address the request was sent to reaches its port.
/// One it takes counts as arrived (`QpShared::arrived`).
pub(super) fn accepts(w: &Wire, dst: &QpShared, g: &qp::QpInner) -> bool {
    let ok = super::peers(w.qp_type, dst.qp_type)
        && qp::can_receive(g.state)
        && g.attrs.dest_qp_num == w.src_qpn
        && reached(w, dst, g.attrs.port_num);
    if ok {
        dst.arrived(g.state);
    }
    ok
}

/// An RDMA WRITE that arrives in fragments, one fragment (`first`: the
/// one at offset 0), written straight into the target memory instead of
/// being reassembled first. The first fragment is taken only when the
/// request would be executed at once (QP found, accepting, nothing held
/// before it, keys good for the whole length, as the responder checks a
/// RETH); any `Err` there leaves the message to [`handle_request`],
/// which answers it as before. Each later fragment is checked again
/// (the QP or the MR may have gone meanwhile): an `Err` is the message's
/// outcome, answered by [`on_placed`].
pub(super) fn place_write(w: &Wire, data: &[u8], first: bool) -> Result<(), c_int> {
    if !matches!(w.kind, kind::WRITE | kind::WRITE_IMM) {
        return Err(WC_REM_INV_REQ_ERR);
    }
    let dst = QPS.get(w.dst_qpn).ok_or(WC_RETRY_EXC_ERR)?;
    let access = {
        let g = dst.st.lock();
        if (first && !g.early.is_empty()) || !accepts(w, &dst, &g) {
            return Err(WC_RETRY_EXC_ERR);
        }
        g.attrs.access
    };
    let host = remote_mem(
        &dst,
        access,
        w.qkey,
        w.rkey,
        w.remote_addr,
        u64::from(w.total),
        REMOTE_WRITE,
    )
    // The first fragment's refusal is handle_request's to make (once:
    // it moves a responder that fails to ERR).
    .map_err(|st| if first { st } else { super::refused(&dst, st) })?;
    let off = w.offset as usize;
    if off.saturating_add(data.len()) > w.total as usize {
        return Err(WC_REM_INV_REQ_ERR);
    }
    super::copy_bytes(data.as_ptr() as usize, host.host + off, data.len());
    Ok(())
}

/// The end of an RDMA WRITE placed by [`place_write`]: answered as
/// [`handle_request`] answers one it executes.
pub(super) fn on_placed(w: &Wire, outcome: Result<(), c_int>) {
    let peer = Peer::of(w);
    if let Err(st) = outcome {
        return peer.reply(st);
    }
    if w.kind != kind::WRITE_IMM {
        return peer.reply(WC_SUCCESS);
    }
    let Some(dst) = QPS.get(w.dst_qpn) else {
        return peer.reply(WC_RETRY_EXC_ERR);
    };
    // The immediate takes a receive of the named XRC SRQ.
    let m = Message {
        xrc: super::xrc_target(&dst, w.qkey).ok().flatten(),
        ..message(w, &peer, Vec::new(), Some(w.total), WC_RDMA_WRITE)
    };
    deliver(&dst, m, w.flags & flag::RNR_WAIT != 0);
}

/// A request from another process, in the responder's progress engine
/// (`replayed`: one that arrived early, delivered now).
pub(super) fn handle_request(w: &Wire, data: &[u8], replayed: bool) {
    if w.kind == kind::UD && w.dst_qpn == 0x00ff_ffff {
        return super::mcast::deliver(w, data);
    }
    let peer = Peer::of(w);
    let Some(dst) = QPS.get(w.dst_qpn) else {
        return peer.reply(WC_RETRY_EXC_ERR);
    };
    let msg = |payload: Vec<u8>, write_imm_len: Option<u32>, send_opcode: c_int| {
        message(w, &peer, payload, write_imm_len, send_opcode)
    };
    if w.kind == kind::UD {
        let g = dst.st.lock();
        let ok = dst.qp_type == QPT_UD
            && qp::can_receive(g.state)
            && g.attrs.qkey == w.qkey
            && reached(w, &dst, g.attrs.port_num);
        drop(g);
        if !ok {
            return;
        }
        let mut m = msg(data.to_vec(), None, WC_SEND);
        m.grh = Some(w.grh);
        m.grh_valid = w.flags & flag::GRH_VALID != 0;
        if let Taken::Wqe(wqe, m) = take_wqe(&dst, m, false) {
            land(&dst, wqe, &m);
        }
        return;
    }
    let (ok, (access, no_credit)) = {
        let mut g = dst.st.lock();
        if dst.gone.load(Ordering::SeqCst) {
            drop(g);
            return peer.reply(WC_RETRY_EXC_ERR);
        }
        // Not receiving yet (RESET / INIT), or behind such requests: wait
        // for RTR. The requester's retries bound how long (`NOT_READY`).
        let early = super::peers(w.qp_type, dst.qp_type)
            && (g.state == crate::qp_state::RESET || g.state == crate::qp_state::INIT)
            || (!replayed && !g.early.is_empty());
        if early {
            g.early.push_back((*w, data.to_vec()));
            drop(g);
            if peer.reply {
                let mut r = Wire::zeroed();
                r.kind = kind::NOT_READY;
                r.dst_qpn = peer.qpn;
                r.seq = peer.seq;
                fabric::send(peer.dest, &mut r, &[]);
            }
            return;
        }
        let no_credit = g.attrs.max_dest_rd_atomic == 0;
        (accepts(w, &dst, &g), (g.attrs.access, no_credit))
    };
    if !ok {
        return peer.reply(WC_RETRY_EXC_ERR);
    }
    // A READ or atomic to a responder without read credits
    // (`Quirks::no_dest_credit_refused`).
    if no_credit
        && matches!(w.kind, kind::READ | kind::CMP_SWAP | kind::FETCH_ADD)
        && dst.dev.profile().quirks.no_dest_credit_refused
    {
        return peer.reply(super::refused(&dst, WC_REM_INV_REQ_ERR));
    }
    let rnr_wait = rnr_wait_for(w, &dst);
    match w.kind {
        kind::SEND => {
            // XRC: the SRQ number travels in `qkey` (unused by RC).
            let xrc = match super::xrc_target(&dst, w.qkey) {
                Ok(x) => x,
                Err(st) => return peer.reply(super::refused(&dst, st)),
            };
            let m = Message {
                xrc,
                ..msg(data.to_vec(), None, WC_SEND)
            };
            deliver_for(&dst, m, rnr_wait)
        }
        kind::WRITE | kind::WRITE_IMM => {
            if !data.is_empty() {
                match remote_mem(
                    &dst,
                    access,
                    w.qkey,
                    w.rkey,
                    w.remote_addr,
                    data.len() as u64,
                    REMOTE_WRITE,
                ) {
                    Ok(host) => super::copy_bytes(data.as_ptr() as usize, host.host, data.len()),
                    Err(st) => return peer.reply(super::refused(&dst, st)),
                }
            }
            if w.kind == kind::WRITE_IMM {
                let n = data.len() as u32;
                // The immediate takes a receive of the named XRC SRQ.
                let m = Message {
                    xrc: super::xrc_target(&dst, w.qkey).ok().flatten(),
                    ..msg(Vec::new(), Some(n), WC_RDMA_WRITE)
                };
                deliver_for(&dst, m, rnr_wait);
            } else {
                peer.reply(WC_SUCCESS);
            }
        }
        kind::READ => {
            let len = w.compare_add;
            if len > u64::from(u32::MAX) {
                return peer.reply(WC_LOC_LEN_ERR);
            }
            if len == 0 {
                return reply_data(&peer, kind::READ_RESP, 0, &[]);
            }
            match remote_mem(
                &dst,
                access,
                w.qkey,
                w.rkey,
                w.remote_addr,
                len,
                REMOTE_READ,
            ) {
                Ok(host) => {
                    // SAFETY: [host, host + len) lies in a registered MR of
                    // this process with remote read access (checked above).
                    let src = unsafe {
                        core::slice::from_raw_parts(host.host as *const u8, len as usize)
                    };
                    reply_data(&peer, kind::READ_RESP, 0, src);
                }
                Err(st) => peer.reply(super::refused(&dst, st)),
            }
        }
        kind::CMP_SWAP | kind::FETCH_ADD => {
            let host = match remote_mem(
                &dst,
                access,
                w.qkey,
                w.rkey,
                w.remote_addr,
                8,
                REMOTE_ATOMIC,
            ) {
                Ok(h) => h,
                Err(st) => return peer.reply(super::refused(&dst, st)),
            };
            // SAFETY: 8 aligned bytes (the requester checked the alignment)
            // inside a registered MR of this process with atomic access.
            let cell = unsafe { &*(host.host as *const AtomicU64) };
            let old = if w.kind == kind::CMP_SWAP {
                match cell.compare_exchange(
                    w.compare_add,
                    w.swap,
                    Ordering::SeqCst,
                    Ordering::SeqCst,
                ) {
                    Ok(v) | Err(v) => v,
                }
            } else {
                cell.fetch_add(w.compare_add, Ordering::SeqCst)
            };
            reply_data(&peer, kind::ATOMIC_RESP, old, &[]);
        }
        _ => peer.reply(WC_REM_INV_REQ_ERR),
    }
}

/// How a request from another process waits for a receive: as the
/// requester's `rnr_retry` (in the request's flags) and the responder's
/// profile and RNR timer say, as for a sender of this process.
pub(super) fn rnr_wait_for(w: &Wire, dst: &QpShared) -> RnrWait {
    if w.flags & flag::RNR_WAIT != 0 {
        RnrWait::Forever
    } else if dst.dev.profile().rnr_timer {
        let code = dst.st.lock().attrs.min_rnr_timer;
        RnrWait::Timed {
            retries: ((w.flags >> flag::RNR_RETRY_SHIFT) & 7) as u8,
            period: super::recv::rnr_timer_ns(code),
        }
    } else {
        RnrWait::Fail
    }
}
