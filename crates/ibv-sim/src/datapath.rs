//! The data path: `post_send`, `post_recv`, `post_srq_recv`, `poll_cq`,
//! `req_notify_cq`, and execution of work requests between QPs of this
//! process (on the same or another simulated device). Work requests for
//! QPs of other processes go through [`remote`] and the fabric.
//!
//! A send is executed when it is posted: the payload is gathered through
//! the sender's lkeys, the peer QP is found by QP number (and must be
//! connected back, with an address that reaches its port), and the data is
//! scattered through the peer's receive WQE or written / read / updated
//! through its rkey, with the access checks real hardware makes. Errors
//! produce the completion statuses hardware would (`IBV_WC_REM_ACCESS_ERR`,
//! `IBV_WC_LOC_PROT_ERR`, `IBV_WC_RNR_RETRY_EXC_ERR`, `IBV_WC_RETRY_EXC_ERR`,
//! ...) and move the QP to the error state. A send that finds no receive
//! WQE waits for one when `rnr_retry` is 7 (infinite), as hardware retries.

use core::ffi::c_int;
use core::ptr::{addr_of, addr_of_mut};
use std::collections::VecDeque;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use verbs_abi::{ibv_ah, ibv_cq, ibv_qp, ibv_recv_wr, ibv_send_wr, ibv_sge, ibv_srq, ibv_wc};

use crate::ah::SimAh;
use crate::cq;
use crate::mr::{self, LOCAL_WRITE, REMOTE_ATOMIC, REMOTE_READ, REMOTE_WRITE};
use crate::qp::{self, QpAttrs, QpShared, QPS};
use crate::qp_state::{ERR, QPT_RC, QPT_UC, QPT_UD, RTS, SQE};
use crate::registry::{self, Kind};
use crate::srq;

pub mod remote;

/// `ibv_wc_opcode`.
pub const WC_SEND: c_int = 0;
pub const WC_RDMA_WRITE: c_int = 1;
pub const WC_RDMA_READ: c_int = 2;
pub const WC_COMP_SWAP: c_int = 3;
pub const WC_FETCH_ADD: c_int = 4;
pub const WC_RECV: c_int = 128;
pub const WC_RECV_RDMA_WITH_IMM: c_int = 129;

/// `ibv_wc_status`.
pub const WC_SUCCESS: c_int = 0;
pub const WC_LOC_LEN_ERR: c_int = 1;
pub const WC_LOC_PROT_ERR: c_int = 4;
pub const WC_WR_FLUSH_ERR: c_int = 5;
pub const WC_REM_INV_REQ_ERR: c_int = 9;
pub const WC_REM_ACCESS_ERR: c_int = 10;
pub const WC_REM_OP_ERR: c_int = 11;
pub const WC_RETRY_EXC_ERR: c_int = 12;
pub const WC_RNR_RETRY_EXC_ERR: c_int = 13;

/// `ibv_wr_opcode`.
pub const WR_RDMA_WRITE: c_int = 0;
pub const WR_RDMA_WRITE_WITH_IMM: c_int = 1;
pub const WR_SEND: c_int = 2;
pub const WR_SEND_WITH_IMM: c_int = 3;
pub const WR_RDMA_READ: c_int = 4;
pub const WR_ATOMIC_CMP_AND_SWP: c_int = 5;
pub const WR_ATOMIC_FETCH_AND_ADD: c_int = 6;

/// `ibv_send_flags`.
pub const SEND_SIGNALED: u32 = 1 << 1;
pub const SEND_SOLICITED: u32 = 1 << 2;
pub const SEND_INLINE: u32 = 1 << 3;

/// `ibv_wc_flags`.
const WC_GRH: u32 = 1;
const WC_WITH_IMM: u32 = 1 << 1;

/// Size of the GRH that precedes every UD receive.
pub const GRH_LEN: usize = 40;

/// A posted receive.
pub struct RecvWqe {
    pub wr_id: u64,
    pub sge: Vec<ibv_sge>,
}

/// A message waiting for a receive WQE (the sender's RNR retries).
pub struct Pending {
    dst: Arc<QpShared>,
    msg: Message,
}

/// A receive queue (of a QP or an SRQ) and the messages waiting on it.
pub struct RecvQueue {
    pub wqes: VecDeque<RecvWqe>,
    pub max_wr: u32,
    pub max_sge: u32,
    pub pending: VecDeque<Pending>,
}

impl RecvQueue {
    pub fn new(max_wr: u32, max_sge: u32) -> Self {
        RecvQueue {
            wqes: VecDeque::new(),
            max_wr,
            max_sge,
            pending: VecDeque::new(),
        }
    }
}

/// A completion with every other field zero.
pub fn wc(wr_id: u64, status: c_int, opcode: c_int, qp_num: u32) -> ibv_wc {
    // SAFETY: ibv_wc is plain data; zero is IBV_WC_SUCCESS / IBV_WC_SEND.
    let mut w: ibv_wc = unsafe { core::mem::zeroed() };
    w.wr_id = wr_id;
    w.qp_num = qp_num;
    // SAFETY: the callers pass members of ibv_wc_status / ibv_wc_opcode.
    unsafe {
        addr_of_mut!(w.status).cast::<c_int>().write(status);
        addr_of_mut!(w.opcode).cast::<c_int>().write(opcode);
    }
    w
}

/// A flushed work request's completion.
pub fn flush_wc(wr_id: u64, opcode: c_int, qp_num: u32) -> ibv_wc {
    wc(wr_id, WC_WR_FLUSH_ERR, opcode, qp_num)
}

/// Who sent a message, and so who learns how it ended.
pub enum Origin {
    /// A QP of this process: its completion is pushed directly.
    Local(Arc<QpShared>),
    /// A QP of another process: it gets a response over the fabric.
    Remote(remote::Peer),
}

/// A message on its way to a receive WQE.
pub struct Message {
    src: Origin,
    src_qpn: u32,
    payload: Vec<u8>,
    imm: Option<u32>,
    /// RDMA write with immediate: nothing to scatter, `byte_len` is this.
    write_imm_len: Option<u32>,
    solicited: bool,
    /// UD: the 40 bytes that precede the payload in the receive buffer.
    grh: Option<[u8; GRH_LEN]>,
    /// UD: whether those bytes are a real GRH (`IBV_WC_GRH`).
    grh_valid: bool,
    slid: u16,
    sl: u8,
    /// The sender's work request, completed when the message lands.
    wr_id: u64,
    signaled: bool,
    send_opcode: c_int,
}

pub(crate) fn copy_bytes(src: usize, dst: usize, n: usize) {
    if n > 0 {
        // SAFETY: both ranges were checked against registered MRs (or are
        // the program's inline buffers); they may overlap on loopback.
        unsafe { core::ptr::copy(src as *const u8, dst as *mut u8, n) };
    }
}

/// Host address of `[addr, addr + len)` through the local key `lkey`.
fn local(pd: usize, lkey: u32, addr: u64, len: u64, need: u32) -> Result<usize, c_int> {
    let m = mr::by_key(lkey).ok_or(WC_LOC_PROT_ERR)?;
    let info = *m.info.lock();
    if info.pd != pd || info.access & need != need {
        return Err(WC_LOC_PROT_ERR);
    }
    info.host(addr, len).ok_or(WC_LOC_PROT_ERR)
}

/// Host address of remote memory through `rkey`, as the responder checks it.
pub(crate) fn remote(
    dst: &QpShared,
    dst_access: u32,
    rkey: u32,
    addr: u64,
    len: u64,
    need: u32,
) -> Result<usize, c_int> {
    if dst_access & need == 0 {
        return Err(WC_REM_ACCESS_ERR);
    }
    let m = mr::by_key(rkey).ok_or(WC_REM_ACCESS_ERR)?;
    let info = *m.info.lock();
    if info.pd != dst.pd || info.access & need == 0 {
        return Err(WC_REM_ACCESS_ERR);
    }
    info.host(addr, len).ok_or(WC_REM_ACCESS_ERR)
}

/// Reads a work request's scatter/gather list.
fn sges(list: *const ibv_sge, n: c_int) -> Vec<ibv_sge> {
    if list.is_null() || n <= 0 {
        return Vec::new();
    }
    // SAFETY: the program passes num_sge readable entries.
    unsafe { core::slice::from_raw_parts(list, n as usize) }.to_vec()
}

pub(crate) fn total_len(s: &[ibv_sge]) -> u64 {
    s.iter().map(|e| u64::from(e.length)).sum()
}

/// Gathers the payload of a send / write (through lkeys, or inline).
pub(crate) fn gather(src: &QpShared, list: &[ibv_sge], inline: bool) -> Result<Vec<u8>, c_int> {
    let mut out = Vec::with_capacity(total_len(list) as usize);
    for e in list {
        if e.length == 0 {
            continue;
        }
        let host = if inline {
            e.addr as usize
        } else {
            local(src.pd, e.lkey, e.addr, u64::from(e.length), 0)?
        };
        let at = out.len();
        out.resize(at + e.length as usize, 0);
        copy_bytes(host, out[at..].as_mut_ptr() as usize, e.length as usize);
    }
    Ok(out)
}

/// Scatters `data` through a receive (or read response) scatter list of
/// `owner`: `LOC_LEN_ERR` when it does not fit, `LOC_PROT_ERR` on a bad key.
pub(crate) fn scatter(owner_pd: usize, list: &[ibv_sge], data: &[&[u8]]) -> Result<(), c_int> {
    let need: u64 = data.iter().map(|d| d.len() as u64).sum();
    if need > total_len(list) {
        return Err(WC_LOC_LEN_ERR);
    }
    // Resolve every target first, then copy.
    let mut targets = Vec::with_capacity(list.len());
    let mut left = need;
    for e in list {
        if left == 0 {
            break;
        }
        let n = u64::from(e.length).min(left);
        if n == 0 {
            continue;
        }
        targets.push((local(owner_pd, e.lkey, e.addr, n, LOCAL_WRITE)?, n as usize));
        left -= n;
    }
    let mut src = data.iter().flat_map(|d| d.chunks(1 << 30)).peekable();
    let mut cur: &[u8] = src.next().unwrap_or(&[]);
    for (mut dst, mut room) in targets {
        while room > 0 {
            while cur.is_empty() {
                match src.next() {
                    Some(c) => cur = c,
                    None => return Ok(()),
                }
            }
            let n = room.min(cur.len());
            copy_bytes(cur.as_ptr() as usize, dst, n);
            cur = &cur[n..];
            dst += n;
            room -= n;
        }
    }
    Ok(())
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
    if status != WC_SUCCESS || signaled {
        let mut w = wc(wr_id, status, opcode, src.qp_num);
        w.byte_len = byte_len;
        src.send_cq.push(w, status != WC_SUCCESS);
    }
    if status != WC_SUCCESS {
        src.fail(if src.qp_type == QPT_RC { ERR } else { SQE });
    }
}

/// Tells a message's sender how it ended.
fn complete_msg(msg: &Message, status: c_int, byte_len: u32) {
    match &msg.src {
        Origin::Local(s) => complete_send(
            s,
            msg.wr_id,
            msg.signaled,
            msg.send_opcode,
            status,
            byte_len,
        ),
        Origin::Remote(p) => remote::reply(p, status),
    }
}

/// Lands a message in a receive WQE of `dst`; returns the sender's status.
pub(crate) fn land(dst: &QpShared, wqe: RecvWqe, msg: &Message) -> c_int {
    let grh: &[u8] = msg.grh.as_ref().map_or(&[], |g| &g[..]);
    let (result, byte_len) = match msg.write_imm_len {
        Some(n) => (Ok(()), n),
        None => (
            scatter(dst.pd, &wqe.sge, &[grh, &msg.payload]),
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
            if msg.grh_valid {
                w.wc_flags |= WC_GRH;
            }
            dst.recv_cq.push(w, msg.solicited);
            WC_SUCCESS
        }
        Err(status) => {
            dst.recv_cq
                .push(wc(wqe.wr_id, status, opcode, dst.qp_num), true);
            if dst.qp_type == QPT_UD {
                // Unreliable: the sender never learns.
                return WC_SUCCESS;
            }
            dst.fail(ERR);
            if status == WC_LOC_LEN_ERR {
                WC_REM_INV_REQ_ERR
            } else {
                WC_REM_OP_ERR
            }
        }
    }
}

enum Taken {
    Wqe(RecvWqe, Message),
    Parked,
    None(Message),
}

/// Takes a receive WQE of `dst` for `msg`, or parks `msg` until one is
/// posted (`wait`), atomically with respect to posters.
fn take_wqe(dst: &Arc<QpShared>, msg: Message, wait: bool) -> Taken {
    // RC is in order: behind a parked message, the next one parks too.
    if let Some(s) = &dst.srq {
        let mut g = s.rq.lock();
        let behind = wait && g.rq.pending.iter().any(|p| p.dst.qp_num == dst.qp_num);
        if let Some(w) = (!behind).then(|| g.rq.wqes.pop_front()).flatten() {
            s.after_take(&mut g);
            return Taken::Wqe(w, msg);
        }
        if wait {
            g.rq.pending.push_back(Pending {
                dst: dst.clone(),
                msg,
            });
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
        g.rq.pending.push_back(Pending {
            dst: dst.clone(),
            msg,
        });
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

fn finish(dst: &QpShared, w: RecvWqe, msg: Message) {
    let status = land(dst, w, &msg);
    let len = msg.write_imm_len.unwrap_or(msg.payload.len() as u32);
    let byte_len = if msg.send_opcode == WC_RDMA_WRITE {
        len
    } else {
        0
    };
    complete_msg(&msg, status, byte_len);
}

/// Delivers parked messages now that receives were posted.
fn drain(take: impl Fn() -> Option<(RecvWqe, Pending)>) {
    while let Some((w, p)) = take() {
        finish(&p.dst, w, p.msg);
    }
}

/// Fails the messages parked on `s`'s receive queue (or destined to `s`
/// on its SRQ): used when `s` is reset or destroyed. Their senders see
/// `IBV_WC_RETRY_EXC_ERR`, as when the peer vanishes.
pub fn drop_pending_from(s: &QpShared) {
    let mut failed: Vec<Pending> = {
        let mut g = s.st.lock();
        remote::drop_early(&mut g);
        g.rq.pending.drain(..).collect()
    };
    if let Some(srq) = &s.srq {
        let mut g = srq.rq.lock();
        let (mine, rest): (Vec<Pending>, Vec<Pending>) =
            g.rq.pending
                .drain(..)
                .partition(|p| p.dst.qp_num == s.qp_num);
        g.rq.pending.extend(rest);
        failed.extend(mine);
    }
    for p in failed {
        complete_msg(&p.msg, WC_RETRY_EXC_ERR, 0);
    }
}

/// The connected peer of an RC / UC QP: it must exist, be of the same
/// type, be able to receive, point back at us, and be reachable at the
/// address we were given.
fn connected_peer(src: &QpShared, a: &QpAttrs) -> Option<(Arc<QpShared>, u32)> {
    let dst = QPS.get(a.dest_qp_num)?;
    if dst.qp_type != src.qp_type {
        return None;
    }
    let g = dst.st.lock();
    if !qp::can_receive(g.state) || g.attrs.dest_qp_num != src.qp_num {
        return None;
    }
    if !reaches(&a.ah, &dst, u32::from(g.attrs.port_num)) {
        return None;
    }
    let access = g.attrs.access;
    drop(g);
    Some((dst, access))
}

/// Whether an address vector reaches `port` of `dst`'s device.
pub(crate) fn reaches(ah: &verbs_abi::ibv_ah_attr, dst: &QpShared, port: u32) -> bool {
    if !dst.dev.port_valid(port) {
        return false;
    }
    if dst.dev.is_ethernet() || dst.dev.is_iwarp() {
        if ah.is_global == 0 {
            return false;
        }
        // SAFETY: reading the raw bytes of a GID union.
        let dgid = unsafe { ah.grh.dgid.raw };
        (0..dst.dev.gid_tbl_len() as u32)
            .any(|i| matches!(dst.dev.gid(port, i), Ok(Some((g, _))) if g == dgid))
    } else {
        ah.dlid == dst.dev.lid(port)
    }
}

/// The fields of an `ibv_send_wr`, read without forming Rust enums.
pub struct SendWr {
    pub wr_id: u64,
    pub sge: Vec<ibv_sge>,
    pub num_sge: c_int,
    pub opcode: c_int,
    pub flags: u32,
    pub imm: u32,
    pub remote_addr: u64,
    pub rkey: u32,
    pub compare_add: u64,
    pub swap: u64,
    pub ah: *mut ibv_ah,
    pub remote_qpn: u32,
    pub remote_qkey: u32,
}

/// # Safety
/// `w` must point at a readable `ibv_send_wr` whose `sg_list` holds `num_sge` entries.
unsafe fn read_send_wr(w: *const ibv_send_wr) -> SendWr {
    // SAFETY: guaranteed by the caller; the union members are plain data
    // read as the opcode's member (all-integer or pointer fields).
    unsafe {
        let num_sge = (*w).num_sge;
        SendWr {
            wr_id: (*w).wr_id,
            sge: sges((*w).sg_list, num_sge),
            num_sge,
            opcode: addr_of!((*w).opcode).cast::<c_int>().read(),
            flags: (*w).send_flags,
            imm: (*w).imm_data,
            remote_addr: (*w).wr.rdma.remote_addr,
            rkey: match addr_of!((*w).opcode).cast::<c_int>().read() {
                WR_ATOMIC_CMP_AND_SWP | WR_ATOMIC_FETCH_AND_ADD => (*w).wr.atomic.rkey,
                _ => (*w).wr.rdma.rkey,
            },
            compare_add: (*w).wr.atomic.compare_add,
            swap: (*w).wr.atomic.swap,
            ah: (*w).wr.ud.ah,
            remote_qpn: (*w).wr.ud.remote_qpn,
            remote_qkey: (*w).wr.ud.remote_qkey,
        }
    }
}

pub(crate) fn wc_opcode_of(wr_opcode: c_int) -> c_int {
    match wr_opcode {
        WR_RDMA_WRITE | WR_RDMA_WRITE_WITH_IMM => WC_RDMA_WRITE,
        WR_RDMA_READ => WC_RDMA_READ,
        WR_ATOMIC_CMP_AND_SWP => WC_COMP_SWAP,
        WR_ATOMIC_FETCH_AND_ADD => WC_FETCH_ADD,
        _ => WC_SEND,
    }
}

/// Checks a send work request the way the provider does before queueing it.
fn check_send(s: &QpShared, w: &SendWr) -> Result<(), c_int> {
    if w.num_sge < 0 || w.num_sge as u32 > s.cap.max_send_sge.max(1) {
        return Err(libc::EINVAL);
    }
    if w.flags & SEND_INLINE != 0 && total_len(&w.sge) > u64::from(s.cap.max_inline_data) {
        return Err(libc::EINVAL);
    }
    let ok = match s.qp_type {
        QPT_RC => {
            matches!(
                w.opcode,
                WR_RDMA_WRITE | WR_RDMA_WRITE_WITH_IMM | WR_SEND | WR_SEND_WITH_IMM | WR_RDMA_READ
            ) || (s.dev.family.atomics
                && matches!(w.opcode, WR_ATOMIC_CMP_AND_SWP | WR_ATOMIC_FETCH_AND_ADD))
        }
        QPT_UC => matches!(
            w.opcode,
            WR_RDMA_WRITE | WR_RDMA_WRITE_WITH_IMM | WR_SEND | WR_SEND_WITH_IMM
        ),
        QPT_UD => matches!(w.opcode, WR_SEND | WR_SEND_WITH_IMM),
        _ => false,
    };
    if !ok {
        return Err(libc::EINVAL);
    }
    if s.qp_type == QPT_UD && !registry::is_live(w.ah as usize, Kind::Ah) {
        return Err(libc::EINVAL);
    }
    Ok(())
}

/// Port MTU in bytes of a path MTU code.
fn mtu_bytes(code: c_int) -> usize {
    128usize << code.clamp(1, 5)
}

/// Executes one send work request of an RTS QP.
fn execute(s: &Arc<QpShared>, a: &QpAttrs, w: SendWr) {
    let signaled = s.sq_sig_all || w.flags & SEND_SIGNALED != 0;
    let opcode = wc_opcode_of(w.opcode);
    let done = |status: c_int, len: u32| complete_send(s, w.wr_id, signaled, opcode, status, len);
    let inline = w.flags & SEND_INLINE != 0;
    let slid = s.dev.lid(u32::from(a.port_num.max(1)));
    let with_imm = matches!(w.opcode, WR_SEND_WITH_IMM | WR_RDMA_WRITE_WITH_IMM);

    if s.qp_type == QPT_UD {
        return execute_ud(s, a, w, signaled, slid);
    }
    if QPS.get(a.dest_qp_num).is_none() {
        // Not ours: the fabric decides whether anybody answers.
        return remote::execute(s, a, w, signaled, slid);
    }
    let Some((dst, dst_access)) = connected_peer(s, a) else {
        // Nobody answers: RC retries and gives up; UC just loses the message.
        return done(
            if s.qp_type == QPT_RC {
                WC_RETRY_EXC_ERR
            } else {
                WC_SUCCESS
            },
            0,
        );
    };
    let msg_for = |payload: Vec<u8>, write_imm_len: Option<u32>| Message {
        src: Origin::Local(s.clone()),
        src_qpn: s.qp_num,
        payload,
        imm: with_imm.then_some(w.imm),
        write_imm_len,
        solicited: w.flags & SEND_SOLICITED != 0,
        grh: None,
        grh_valid: false,
        slid,
        sl: a.ah.sl,
        wr_id: w.wr_id,
        signaled,
        send_opcode: opcode,
    };
    match w.opcode {
        WR_SEND | WR_SEND_WITH_IMM => match gather(s, &w.sge, inline) {
            Ok(p) => deliver(&dst, msg_for(p, None), a.rnr_retry == 7),
            Err(st) => done(st, 0),
        },
        WR_RDMA_WRITE | WR_RDMA_WRITE_WITH_IMM => {
            let data = match gather(s, &w.sge, inline) {
                Ok(d) => d,
                Err(st) => return done(st, 0),
            };
            if !data.is_empty() {
                match remote(
                    &dst,
                    dst_access,
                    w.rkey,
                    w.remote_addr,
                    data.len() as u64,
                    REMOTE_WRITE,
                ) {
                    Ok(host) => copy_bytes(data.as_ptr() as usize, host, data.len()),
                    Err(st) => return done(st, 0),
                }
            }
            if w.opcode == WR_RDMA_WRITE_WITH_IMM {
                let n = data.len() as u32;
                deliver(&dst, msg_for(Vec::new(), Some(n)), a.rnr_retry == 7);
            } else {
                done(WC_SUCCESS, data.len() as u32);
            }
        }
        WR_RDMA_READ => {
            let len = total_len(&w.sge);
            let host = if len == 0 {
                0
            } else {
                match remote(&dst, dst_access, w.rkey, w.remote_addr, len, REMOTE_READ) {
                    Ok(h) => h,
                    Err(st) => return done(st, 0),
                }
            };
            let mut data = vec![0u8; len as usize];
            copy_bytes(host, data.as_mut_ptr() as usize, len as usize);
            match scatter(s.pd, &w.sge, &[&data]) {
                Ok(()) => done(WC_SUCCESS, len as u32),
                Err(st) => done(st, 0),
            }
        }
        WR_ATOMIC_CMP_AND_SWP | WR_ATOMIC_FETCH_AND_ADD => {
            if !w.remote_addr.is_multiple_of(8) || total_len(&w.sge) < 8 {
                return done(WC_REM_INV_REQ_ERR, 0);
            }
            let host = match remote(&dst, dst_access, w.rkey, w.remote_addr, 8, REMOTE_ATOMIC) {
                Ok(h) => h,
                Err(st) => return done(st, 0),
            };
            // SAFETY: 8 aligned bytes inside a registered MR with atomic access.
            let cell = unsafe { &*(host as *const AtomicU64) };
            let old = if w.opcode == WR_ATOMIC_CMP_AND_SWP {
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
            match scatter(s.pd, &w.sge, &[&old.to_ne_bytes()]) {
                Ok(()) => done(WC_SUCCESS, 8),
                Err(st) => done(st, 0),
            }
        }
        _ => done(WC_REM_INV_REQ_ERR, 0),
    }
}

fn execute_ud(s: &Arc<QpShared>, a: &QpAttrs, w: SendWr, signaled: bool, slid: u16) {
    let done = |status: c_int| complete_send(s, w.wr_id, signaled, WC_SEND, status, 0);
    let payload = match gather(s, &w.sge, w.flags & SEND_INLINE != 0) {
        Ok(p) => p,
        Err(st) => return done(st),
    };
    let port = u32::from(a.port_num.max(1));
    let mtu = s
        .dev
        .port_attr(port)
        .map_or(4096, |p| mtu_bytes(p.active_mtu as c_int));
    if payload.len() > mtu {
        return done(WC_LOC_LEN_ERR);
    }
    // SAFETY: the AH was checked live when the request was posted.
    let ah = unsafe { &*(w.ah as *const SimAh) }.attr;
    let qkey = if w.remote_qkey & 0x8000_0000 != 0 {
        a.qkey
    } else {
        w.remote_qkey
    };
    let grh = (ah.is_global != 0).then(|| {
        let mut g = [0u8; GRH_LEN];
        let flow =
            (6u32 << 28) | (u32::from(ah.grh.traffic_class) << 20) | (ah.grh.flow_label & 0xfffff);
        g[0..4].copy_from_slice(&flow.to_be_bytes());
        g[4..6].copy_from_slice(&(payload.len() as u16).to_be_bytes());
        g[6] = 0x1b;
        g[7] = ah.grh.hop_limit;
        if let Ok(Some((sgid, _))) = s
            .dev
            .gid(u32::from(ah.port_num), u32::from(ah.grh.sgid_index))
        {
            g[8..24].copy_from_slice(&sgid);
        }
        // SAFETY: reading the raw bytes of a GID union.
        g[24..40].copy_from_slice(&unsafe { ah.grh.dgid.raw });
        g
    });
    if w.remote_qpn != 0x00ff_ffff && QPS.get(w.remote_qpn).is_none() {
        remote::send_ud(s, &w, &ah, qkey, slid, grh, &payload);
        return done(WC_SUCCESS);
    }
    let targets: Vec<Arc<QpShared>> = if w.remote_qpn == 0x00ff_ffff {
        // SAFETY: reading the raw bytes of a GID union.
        let dgid = unsafe { ah.grh.dgid.raw };
        qp::MCAST
            .lock()
            .get(&dgid)
            .map(|v| v.iter().filter(|q| q.qp_num != s.qp_num).cloned().collect())
            .unwrap_or_default()
    } else {
        QPS.get(w.remote_qpn).into_iter().collect()
    };
    for dst in targets {
        let g = dst.st.lock();
        let ok = dst.qp_type == QPT_UD
            && qp::can_receive(g.state)
            && g.attrs.qkey == qkey
            && (w.remote_qpn == 0x00ff_ffff || reaches(&ah, &dst, u32::from(g.attrs.port_num)));
        drop(g);
        if !ok {
            continue;
        }
        let msg = Message {
            src: Origin::Local(s.clone()),
            src_qpn: s.qp_num,
            payload: payload.clone(),
            imm: (w.opcode == WR_SEND_WITH_IMM).then_some(w.imm),
            write_imm_len: None,
            solicited: w.flags & SEND_SOLICITED != 0,
            grh: Some(grh.unwrap_or([0u8; GRH_LEN])),
            grh_valid: grh.is_some(),
            slid,
            sl: ah.sl,
            wr_id: 0,
            signaled: false,
            send_opcode: WC_SEND,
        };
        // No receive posted: the datagram is dropped.
        if let Taken::Wqe(wqe, m) = take_wqe(&dst, msg, false) {
            land(&dst, wqe, &m);
        }
    }
    done(WC_SUCCESS);
}

/// Posts one send work request on a QP: checked as the provider checks
/// it (`Err(errno)` when refused), then executed (a QP of this process:
/// at once; of another: through the fabric) or flushed in the error
/// states. Its completion goes to the QP's send CQ (`CqShared::push`).
/// The entry point for every post API (`ibv_post_send`, `ibv_wr_*`).
pub fn post_one(s: &Arc<QpShared>, w: SendWr) -> Result<(), c_int> {
    let (state, attrs) = {
        let g = s.st.lock();
        (g.state, g.attrs)
    };
    match state {
        RTS => check_send(s, &w).map(|()| execute(s, &attrs, w)),
        ERR | SQE => check_send(s, &w).map(|()| {
            s.send_cq
                .push(flush_wc(w.wr_id, wc_opcode_of(w.opcode), s.qp_num), true)
        }),
        // RESET, INIT, RTR, SQD: the send queue is not processing.
        _ => Err(libc::EINVAL),
    }
}

/// `ibv_post_send`.
pub fn post_send(qp: *mut ibv_qp, wr: *mut ibv_send_wr, bad: *mut *mut ibv_send_wr) -> c_int {
    if qp.is_null() {
        return libc::EINVAL;
    }
    // SAFETY: the program passes a QP it created (the inline verb reached
    // the sim through this QP's context).
    let s = &unsafe { qp::unchecked(qp) }.shared;
    let mut cur = wr;
    while !cur.is_null() {
        // SAFETY: a work request of the program's list.
        let w = unsafe { read_send_wr(cur) };
        // SAFETY: as above.
        let next = unsafe { (*cur).next };
        if let Err(e) = post_one(s, w) {
            if !bad.is_null() {
                // SAFETY: bad points at the program's out pointer.
                unsafe { *bad = cur };
            }
            return e;
        }
        cur = next;
    }
    0
}

/// # Safety
/// `w` must point at a readable `ibv_recv_wr`.
unsafe fn read_recv_wr(w: *const ibv_recv_wr) -> (u64, c_int, Vec<ibv_sge>) {
    // SAFETY: guaranteed by the caller.
    unsafe { ((*w).wr_id, (*w).num_sge, sges((*w).sg_list, (*w).num_sge)) }
}

/// Posts a list of receives to `q` (a QP's or an SRQ's queue).
fn post_recv_list(
    wr: *mut ibv_recv_wr,
    bad: *mut *mut ibv_recv_wr,
    mut push: impl FnMut(u64, c_int, Vec<ibv_sge>) -> Result<(), c_int>,
) -> c_int {
    let mut cur = wr;
    while !cur.is_null() {
        // SAFETY: a work request of the program's list.
        let (wr_id, n, list) = unsafe { read_recv_wr(cur) };
        if let Err(e) = push(wr_id, n, list) {
            if !bad.is_null() {
                // SAFETY: bad points at the program's out pointer.
                unsafe { *bad = cur };
            }
            return e;
        }
        // SAFETY: as above.
        cur = unsafe { (*cur).next };
    }
    0
}

/// `ibv_post_recv`.
pub fn post_recv(qp: *mut ibv_qp, wr: *mut ibv_recv_wr, bad: *mut *mut ibv_recv_wr) -> c_int {
    if qp.is_null() {
        return libc::EINVAL;
    }
    // SAFETY: a QP the program created (see post_send).
    let s = &unsafe { qp::unchecked(qp) }.shared;
    if s.srq.is_some() {
        if !bad.is_null() {
            // SAFETY: bad points at the program's out pointer.
            unsafe { *bad = wr };
        }
        return libc::EINVAL;
    }
    let r = post_recv_list(wr, bad, |wr_id, n, list| {
        let mut g = s.st.lock();
        if !qp::can_post_recv(g.state) {
            return Err(libc::EINVAL);
        }
        if n < 0 || n as u32 > g.rq.max_sge.max(1) {
            return Err(libc::EINVAL);
        }
        if g.state == ERR {
            drop(g);
            s.recv_cq.push(flush_wc(wr_id, WC_RECV, s.qp_num), true);
            return Ok(());
        }
        if g.rq.wqes.len() >= g.rq.max_wr as usize {
            return Err(libc::ENOMEM);
        }
        g.rq.wqes.push_back(RecvWqe { wr_id, sge: list });
        Ok(())
    });
    drain(|| {
        let mut g = s.st.lock();
        if g.rq.wqes.is_empty() || g.rq.pending.is_empty() {
            return None;
        }
        let w = g.rq.wqes.pop_front()?;
        let p = g.rq.pending.pop_front()?;
        Some((w, p))
    });
    r
}

/// `ibv_post_srq_recv`.
pub fn post_srq_recv(srq: *mut ibv_srq, wr: *mut ibv_recv_wr, bad: *mut *mut ibv_recv_wr) -> c_int {
    if srq.is_null() {
        return libc::EINVAL;
    }
    // SAFETY: an SRQ the program created.
    let s = &unsafe { srq::unchecked(srq) }.shared;
    let r = post_recv_list(wr, bad, |wr_id, n, list| {
        let mut g = s.rq.lock();
        if n < 0 || n as u32 > g.rq.max_sge {
            return Err(libc::EINVAL);
        }
        if g.rq.wqes.len() >= g.rq.max_wr as usize {
            return Err(libc::ENOMEM);
        }
        g.rq.wqes.push_back(RecvWqe { wr_id, sge: list });
        Ok(())
    });
    drain(|| {
        let mut g = s.rq.lock();
        if g.rq.wqes.is_empty() || g.rq.pending.is_empty() {
            return None;
        }
        let w = g.rq.wqes.pop_front()?;
        let p = g.rq.pending.pop_front()?;
        s.after_take(&mut g);
        Some((w, p))
    });
    r
}

/// `ibv_poll_cq`.
pub fn poll_cq(cq: *mut ibv_cq, n: c_int, out: *mut ibv_wc) -> c_int {
    if cq.is_null() || n < 0 || (n > 0 && out.is_null()) {
        return -libc::EINVAL;
    }
    if n == 0 {
        return 0;
    }
    // What other processes sent us lands now (busy polling is the fast
    // path). Every poll API calls this before reading its CQ.
    crate::fabric::poll_progress();
    // SAFETY: a CQ the program created.
    let c = unsafe { cq::unchecked(cq) };
    c.shared.poll(out, n as usize) as c_int
}

/// `ibv_req_notify_cq`.
pub fn req_notify_cq(cq: *mut ibv_cq, solicited_only: c_int) -> c_int {
    if cq.is_null() {
        return libc::EINVAL;
    }
    // SAFETY: a CQ the program created.
    unsafe { cq::unchecked(cq) }.shared.arm(solicited_only != 0);
    0
}
