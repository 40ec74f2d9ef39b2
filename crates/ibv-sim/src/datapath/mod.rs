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
//!
//! This module: the verbs' entry points (post, poll, notify). `recv`:
//! delivery to receive queues (the queues: `recvq`); `memory`: access
//! through lkeys and rkeys; `execute`: executing a send; `mcast`: multicast
//! sends between processes; [`remote`]: the
//! same across processes (reached from the fabric through
//! [`remote::RECEIVER`]).

use core::ffi::c_int;
use core::ptr::addr_of;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use verbs_abi::{ibv_ah, ibv_cq, ibv_qp, ibv_recv_wr, ibv_send_wr, ibv_sge, ibv_srq, ibv_wc};

use crate::abi::*;
use crate::ah::SimAh;
use crate::cq::{self, flush_wc, wc};
use crate::mr::{self, LOCAL_WRITE, REMOTE_ATOMIC, REMOTE_READ, REMOTE_WRITE};
use crate::qp::{self, QpAttrs, QpShared, QPS};
use crate::qp_state::{ERR, QPT_RC, QPT_UC, QPT_UD, QPT_XRC_RECV, QPT_XRC_SEND, RTS, SQE};
use crate::recvq::{Parked, RecvWqe};
use crate::registry::{self, Kind};
use crate::srq;

mod execute;
mod mcast;
mod memory;
mod recv;
pub mod remote;
mod responder;

pub(crate) use execute::*;
pub(crate) use memory::*;
pub use recv::*;

/// Size of the GRH that precedes every UD receive.
pub const GRH_LEN: usize = 40;

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
    /// `IBV_WR_BIND_MW` (and `ibv_bind_mw`): what to bind; `rkey` is the
    /// window's new rkey. (`IBV_WR_LOCAL_INV` / `SEND_WITH_INV`: `rkey` is
    /// the one to invalidate.)
    pub bind: Option<crate::mw::BindReq>,
    /// XRC send QPs: the remote XRC SRQ (`qp_type.xrc.remote_srqn`).
    pub xrc_srqn: u32,
}

/// # Safety
/// `w` must point at a readable `ibv_send_wr` whose `sg_list` holds `num_sge` entries
/// ([`list_ok`] checked them against the queue first).
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
                WR_LOCAL_INV | WR_SEND_WITH_INV => (*w).imm_data,
                WR_BIND_MW => (*w).anon.bind_mw.rkey,
                _ => (*w).wr.rdma.rkey,
            },
            compare_add: (*w).wr.atomic.compare_add,
            swap: (*w).wr.atomic.swap,
            ah: (*w).wr.ud.ah,
            remote_qpn: (*w).wr.ud.remote_qpn,
            remote_qkey: (*w).wr.ud.remote_qkey,
            xrc_srqn: (*w).qp_type.xrc.remote_srqn,
            bind: (addr_of!((*w).opcode).cast::<c_int>().read() == WR_BIND_MW).then(|| {
                let b = (*w).anon.bind_mw;
                crate::mw::BindReq {
                    mw: b.mw as usize,
                    mr: b.bind_info.mr as usize,
                    addr: b.bind_info.addr,
                    len: b.bind_info.length,
                    access: b.bind_info.mw_access_flags,
                    ty: crate::mw::TYPE_2,
                }
            }),
        }
    }
}

/// Whether a QP of type `src` talks to one of type `dst` (connected types:
/// the same type, or an XRC send QP to an XRC receive QP).
pub(crate) fn peers(src: c_int, dst: c_int) -> bool {
    matches!(
        (src, dst),
        (QPT_RC, QPT_RC) | (QPT_UC, QPT_UC) | (QPT_XRC_SEND, QPT_XRC_RECV)
    )
}

/// Where a message to `dst` lands: for an XRC receive QP, the XRC SRQ of
/// its domain numbered `srqn` (`Err`: the requester's status); else the
/// QP's own queue (`None`).
pub(crate) fn xrc_target(
    dst: &QpShared,
    srqn: u32,
) -> Result<Option<Arc<crate::xrc::XrcSrq>>, c_int> {
    if dst.qp_type != QPT_XRC_RECV {
        return Ok(None);
    }
    crate::xrc::target(dst.xrc_domain, srqn)
        .map(Some)
        .ok_or(WC_REM_INV_REQ_ERR)
}

pub(crate) fn wc_opcode_of(wr_opcode: c_int) -> c_int {
    match wr_opcode {
        WR_RDMA_WRITE | WR_RDMA_WRITE_WITH_IMM => WC_RDMA_WRITE,
        WR_RDMA_READ => WC_RDMA_READ,
        WR_ATOMIC_CMP_AND_SWP => WC_COMP_SWAP,
        WR_ATOMIC_FETCH_AND_ADD => WC_FETCH_ADD,
        WR_BIND_MW => WC_BIND_MW,
        WR_LOCAL_INV => WC_LOCAL_INV,
        _ => WC_SEND,
    }
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
        RTS => {
            check_send(s, &w)?;
            // A ring send queue (rxe) takes no more than its capacity of
            // work requests still waiting for their completions.
            if !s.sq_use.take(sq_slots(s)) {
                return Err(libc::ENOMEM);
            }
            execute(s, &attrs, w);
            Ok(())
        }
        ERR | SQE => check_send(s, &w).map(|()| {
            s.send_cq
                .push(flush_wc(w.wr_id, wc_opcode_of(w.opcode), s.qp_num), true);
        }),
        // RESET, INIT, RTR, SQD: the send queue is not processing (the
        // provider's answer: rxe EINVAL, mlx5 ENOMEM).
        _ => Err(s.dev.profile().post_state_errno),
    }
}

/// A work request's SGE list against its queue, before any of it is read
/// (the list may end at an unreadable page): `num_sge` within the SGEs
/// the queue takes (`max_sge`, as the QP's creation granted it; EINVAL,
/// as rxe and mlx5's receive side answer), and a list there when
/// `num_sge` says so (NULL with SGEs: EINVAL, where rxe and mlx5 read
/// through the NULL and crash).
fn list_ok(sg_list: *const ibv_sge, num_sge: c_int, max_sge: u32) -> Result<(), c_int> {
    if num_sge < 0 || num_sge as u32 > max_sge.max(1) || (num_sge > 0 && sg_list.is_null()) {
        return Err(libc::EINVAL);
    }
    Ok(())
}

/// A send work request `list_ok` refused: one with more SGEs than the
/// queue takes fails with the provider's `post_errno` (mlx5, mlx4:
/// ENOMEM), a NULL list with EINVAL.
fn too_many_sges(s: &QpShared, list: *const ibv_sge, num_sge: c_int, e: c_int) -> c_int {
    if num_sge > 0 && !list.is_null() {
        s.dev.profile().post_errno
    } else {
        e
    }
}

/// How many work requests of one chain a queue of `depth` takes: the
/// next fails with ENOMEM as the queue is full (hardware's answer), so a
/// chain that loops back on itself ends there.
fn chain_limit(depth: u32) -> usize {
    depth.max(1) as usize
}

/// How many send work requests a QP holds at once: its capacity where the
/// profile's send queue is a ring, else no bound.
fn sq_slots(s: &QpShared) -> u32 {
    if s.dev.profile().ring_queues {
        s.cap.max_send_wr
    } else {
        u32::MAX
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
    if let Err(e) = s.born.here() {
        return refuse(bad, wr, e);
    }
    let limit = chain_limit(s.cap.max_send_wr);
    let mut cur = wr;
    let mut posted = 0;
    while !cur.is_null() {
        // SAFETY: a work request of the program's list (its head only).
        let (list, n) = unsafe { ((*cur).sg_list, (*cur).num_sge) };
        let fits = if posted == limit {
            Err(libc::ENOMEM)
        } else {
            list_ok(list, n, s.cap.max_send_sge).map_err(|e| too_many_sges(s, list, n, e))
        };
        if let Err(e) = fits {
            return refuse(bad, cur, e);
        }
        posted += 1;
        // SAFETY: a work request of the program's list, its SGE list
        // checked against the queue.
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

/// Posts a list of receives to a queue (a QP's or an SRQ's) of `depth`
/// work requests of `max_sge` SGEs each: each one's list checked before
/// it is read ([`list_ok`]), the chain no longer than the queue.
fn post_recv_list(
    wr: *mut ibv_recv_wr,
    bad: *mut *mut ibv_recv_wr,
    (depth, max_sge): (u32, u32),
    mut push: impl FnMut(u64, Vec<ibv_sge>) -> Result<(), c_int>,
) -> c_int {
    let limit = chain_limit(depth);
    let mut cur = wr;
    let mut posted = 0;
    while !cur.is_null() {
        // SAFETY: a work request of the program's list.
        let (wr_id, list, n) = unsafe { ((*cur).wr_id, (*cur).sg_list, (*cur).num_sge) };
        let r = if posted == limit {
            Err(libc::ENOMEM)
        } else {
            // The list is copied only once checked against the queue.
            list_ok(list, n, max_sge).and_then(|()| push(wr_id, sges(list, n)))
        };
        if let Err(e) = r {
            return refuse(bad, cur, e);
        }
        posted += 1;
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
        return refuse(bad, wr, libc::EINVAL);
    }
    if let Err(e) = s.born.here() {
        return refuse(bad, wr, e);
    }
    let shape = {
        let g = s.st.lock();
        (g.rq.max_wr, g.rq.max_sge)
    };
    let r = post_recv_list(wr, bad, shape, |wr_id, list| {
        let mut g = s.st.lock();
        if !qp::can_post_recv(g.state) {
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
        // A message on timed RNR retries lands at its next retry
        // (`recv::rnr_tick`), not as soon as the receive is posted.
        if g.rq.pending.front().is_some_and(|p| p.due() != 0) {
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
    if let Err(e) = s.born.here() {
        return refuse(bad, wr, e);
    }
    let shape = {
        let g = s.rq.lock();
        (g.rq.max_wr, g.rq.max_sge)
    };
    let r = post_recv_list(wr, bad, shape, |wr_id, list| {
        let mut g = s.rq.lock();
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
        // As on a QP's own queue: a timed retry lands at its retry.
        if g.rq.pending.front().is_some_and(|p| p.due() != 0) {
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
    // SAFETY: a CQ the program created.
    let c = unsafe { cq::unchecked(cq) };
    if let Err(e) = c.shared.born.here() {
        return -e;
    }
    // What other processes sent us lands now (busy polling is the fast
    // path). Every poll API calls this before reading its CQ.
    crate::fabric::poll_progress();
    // SAFETY: `ibv_poll_cq`'s contract: the program passed room for `n`
    // completions at `out` (non-null, checked above).
    unsafe { c.shared.poll(out, n as usize) as c_int }
}

/// `ibv_req_notify_cq`.
pub fn req_notify_cq(cq: *mut ibv_cq, solicited_only: c_int) -> c_int {
    if cq.is_null() {
        return libc::EINVAL;
    }
    // SAFETY: a CQ the program created.
    let s = &unsafe { cq::unchecked(cq) }.shared;
    if let Err(e) = s.born.here() {
        return e;
    }
    s.arm(solicited_only != 0);
    // A program thread will wait for the event: the engine must run.
    crate::fabric::armed();
    0
}

/// A post refused as a whole: `*bad` is its first work request.
fn refuse<W>(bad: *mut *mut W, wr: *mut W, e: c_int) -> c_int {
    if !bad.is_null() {
        // SAFETY: bad points at the program's out pointer.
        unsafe { *bad = wr };
    }
    e
}
