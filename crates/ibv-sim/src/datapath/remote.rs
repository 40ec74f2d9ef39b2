//! Work requests between QPs of different processes, the requester's
//! side (the responder's is `responder`).
//!
//! The requester sends a request to the process owning the destination QP
//! number (the fabric's QP table). The responder's progress engine checks
//! it the way a responder HCA does (the QP exists, is of the same type,
//! can receive, is connected back to the requester, is reached at the
//! address used; rkey, bounds and access flags for RDMA and atomics),
//! executes it against its own memory, and answers: ACK, NAK with the
//! requester's completion status, data (READ, atomics), or DROP when the
//! request is silently discarded. RC requests stay outstanding at the
//! requester until answered; one that is dropped, or whose responder
//! died, completes with `IBV_WC_RETRY_EXC_ERR` once the QP's retries
//! (`timeout`, `retry_cnt`) have run out, as on hardware. UC and UD never
//! hear back.

use core::ffi::c_int;
use core::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use verbs_abi::ibv_ah_attr;

use super::responder::{handle_request, on_placed, place_write};
use super::{
    complete_send, payload, scatter, total_len, wc_opcode_of, Payload, SendWr, GRH_LEN,
    SEND_INLINE, SEND_SOLICITED, WC_COMP_SWAP, WC_FETCH_ADD, WC_RDMA_READ, WC_RDMA_WRITE,
    WC_REM_INV_REQ_ERR, WC_RETRY_EXC_ERR, WC_SEND, WC_SUCCESS, WR_ATOMIC_CMP_AND_SWP,
    WR_ATOMIC_FETCH_AND_ADD, WR_RDMA_READ, WR_RDMA_WRITE, WR_RDMA_WRITE_WITH_IMM, WR_SEND_WITH_IMM,
};
use crate::fabric::wire::{flag, kind, Wire};
use crate::fabric::{self};
use crate::qp::{self, Outstanding, QpAttrs, QpShared, QPS};
use crate::qp_state::{ERR, QPT_UC, QPT_UD};

/// What the fabric hands to the data path.
pub static RECEIVER: fabric::Receiver = fabric::Receiver {
    request: handle_request,
    place: place_write,
    placed: on_placed,
    response: on_response,
    tick: check_deadlines,
    busy,
};

/// QPs with outstanding requests (their deadlines are watched). A forked
/// child finds it free, and skips the parent's QPs in it (`fork`).
static WAITING: crate::fork_lock::Mutex<Vec<Arc<QpShared>>> =
    crate::fork_lock::Mutex::new(Vec::new());
static N_WAITING: AtomicUsize = AtomicUsize::new(0);

/// Whether any request of ours waits for a response.
pub fn busy() -> bool {
    N_WAITING.load(Ordering::Relaxed) > 0 || super::recv::rnr_waiting()
}

/// How long hardware retries before `IBV_WC_RETRY_EXC_ERR`: 4.096 us *
/// 2^timeout per try, `retry_cnt` + 1 tries; `timeout` 0 (infinite) and
/// very long values are capped, so a dead peer is always noticed; very
/// short ones are raised to 250 ms (processes are slower than HCAs).
fn retry_ns(a: &QpAttrs) -> u64 {
    const CAP: u64 = 4_000_000_000;
    if a.timeout == 0 {
        return CAP;
    }
    let per_try = 4096u64 << u32::from(a.timeout.min(31));
    per_try
        .saturating_mul(u64::from(a.retry_cnt.min(7)) + 1)
        .clamp(250_000_000, CAP)
}

fn address(w: &mut Wire, a: &QpAttrs, slid: u16) {
    w.dlid = a.ah.dlid;
    w.slid = slid;
    w.sl = a.ah.sl;
    w.is_global = a.ah.is_global;
    // SAFETY: reading the raw bytes of a GID union.
    w.dgid = unsafe { a.ah.grh.dgid.raw };
}

/// Executes a send work request of an RC / UC QP whose peer is not ours.
pub(super) fn execute(s: &Arc<QpShared>, a: &QpAttrs, w: SendWr, signaled: bool, slid: u16) {
    let opcode = wc_opcode_of(w.opcode);
    let done = |status: c_int, len: u32| complete_send(s, w.wr_id, signaled, opcode, status, len);
    // Found wrong before it is sent (a bad local key, a misaligned
    // atomic): a send queue completes in order, so the requests still
    // outstanding ahead of it are flushed first (the QP goes to ERR with
    // them, as it would with this one's error).
    let refused = |status: c_int| {
        if !s.st.lock().out.is_empty() {
            s.fail(ERR);
        }
        done(status, 0)
    };
    let mut wire = Wire::zeroed();
    wire.qp_type = s.qp_type;
    wire.src_qpn = s.qp_num;
    wire.dst_qpn = a.dest_qp_num;
    address(&mut wire, a, slid);
    if w.flags & SEND_SOLICITED != 0 {
        wire.flags |= flag::SOLICITED;
    }
    if matches!(w.opcode, WR_SEND_WITH_IMM | WR_RDMA_WRITE_WITH_IMM) {
        wire.flags |= flag::IMM;
        wire.imm = w.imm;
    }
    wire.remote_addr = w.remote_addr;
    wire.rkey = w.rkey;
    wire.qkey = w.xrc_srqn;
    if w.opcode == super::WR_SEND_WITH_INV {
        wire.flags |= flag::INV;
    }
    let (k, body, byte_len) = match w.opcode {
        WR_RDMA_READ => {
            let len = total_len(&w.sge);
            wire.compare_add = len;
            (kind::READ, Payload::Owned(Vec::new()), len as u32)
        }
        WR_ATOMIC_CMP_AND_SWP | WR_ATOMIC_FETCH_AND_ADD => {
            if !w.remote_addr.is_multiple_of(8) || total_len(&w.sge) < 8 {
                return refused(WC_REM_INV_REQ_ERR);
            }
            wire.compare_add = w.compare_add;
            wire.swap = w.swap;
            let k = if w.opcode == WR_ATOMIC_CMP_AND_SWP {
                kind::CMP_SWAP
            } else {
                kind::FETCH_ADD
            };
            (k, Payload::Owned(Vec::new()), 8)
        }
        _ => {
            let data = match payload(s, &w, w.flags & SEND_INLINE != 0) {
                Ok(d) => d,
                Err(st) => return refused(st),
            };
            let n = data.len() as u32;
            match w.opcode {
                WR_RDMA_WRITE => (kind::WRITE, data, n),
                WR_RDMA_WRITE_WITH_IMM => (kind::WRITE_IMM, data, n),
                _ => (kind::SEND, data, 0),
            }
        }
    };
    wire.kind = k;
    let dest = fabric::owner_of(a.dest_qp_num);
    if s.qp_type == QPT_UC {
        // Unreliable: sent (or lost) and done.
        if let Some(d) = dest {
            fabric::send(d, &mut wire, body.bytes());
        }
        let len = if opcode == WC_RDMA_WRITE { byte_len } else { 0 };
        return done(WC_SUCCESS, len);
    }
    wire.flags |= flag::REPLY;
    if a.rnr_retry == 7 {
        wire.flags |= flag::RNR_WAIT;
    } else {
        wire.flags |= u32::from(a.rnr_retry & 7) << flag::RNR_RETRY_SHIFT;
    }
    let timeout = retry_ns(a);
    {
        let mut g = s.st.lock();
        let seq = g.next_seq;
        g.next_seq += 1;
        wire.seq = seq;
        g.out.push_back(Outstanding {
            seq,
            wr_id: w.wr_id,
            signaled,
            opcode,
            sge: if matches!(opcode, WC_RDMA_READ | WC_COMP_SWAP | WC_FETCH_ADD) {
                w.sge
            } else {
                Vec::new()
            },
            byte_len: if opcode == WC_SEND { 0 } else { byte_len },
            dest,
            deadline: fabric::now_ns() + timeout,
            timeout,
            doomed: dest.is_none(),
            not_ready: false,
            done: None,
        });
        // Sent under the QP's lock: a QP's requests stay in order.
        if let Some(d) = dest {
            match body {
                // SAFETY: the program's registered memory of this
                // request, left alone until it completes; what the outbox
                // still reads of it is copied first whenever it could go
                // back to the program early (`fabric::settle_outbox`: error
                // and flush completions, reset, destroy, deregistration).
                Payload::InPlace(..) => unsafe {
                    fabric::send_in_place(d, &mut wire, body.bytes())
                },
                Payload::Owned(_) => fabric::send(d, &mut wire, body.bytes()),
            }
        }
    }
    static FORK_SAFE: std::sync::Once = std::sync::Once::new();
    FORK_SAFE.call_once(|| {
        // SAFETY: a static.
        unsafe { crate::fork_lock::register(WAITING.raw(), crate::fork_lock::Tier::Waiting) };
    });
    let mut wl = WAITING.lock();
    if !wl.iter().any(|q| Arc::ptr_eq(q, s)) {
        wl.push(s.clone());
        N_WAITING.store(wl.len(), Ordering::Relaxed);
    }
}

/// Sends a UD datagram to the other processes it is for: the one with the
/// QP `remote_qpn` names (lost if nobody has it), or, to a multicast group
/// (`remote_qpn` 0xffffff), each one with a QP attached to the group (this
/// process's own QPs are the caller's).
pub(super) fn send_ud(
    s: &QpShared,
    w: &SendWr,
    ah: &ibv_ah_attr,
    qkey: u32,
    slid: u16,
    grh: Option<[u8; GRH_LEN]>,
    payload: &[u8],
) {
    let mut wire = Wire::zeroed();
    wire.kind = kind::UD;
    wire.qp_type = QPT_UD;
    wire.src_qpn = s.qp_num;
    wire.dst_qpn = w.remote_qpn;
    wire.qkey = qkey;
    wire.dlid = ah.dlid;
    wire.slid = slid;
    wire.sl = ah.sl;
    wire.is_global = ah.is_global;
    // SAFETY: reading the raw bytes of a GID union.
    wire.dgid = unsafe { ah.grh.dgid.raw };
    if let Some(g) = grh {
        wire.grh = g;
        wire.flags |= flag::GRH_VALID;
    }
    if w.opcode == WR_SEND_WITH_IMM {
        wire.flags |= flag::IMM;
        wire.imm = w.imm;
    }
    if w.flags & SEND_SOLICITED != 0 {
        wire.flags |= flag::SOLICITED;
    }
    // Each destination gets its own copy (sending fills in its fields).
    let send = |d| fabric::send(d, &mut { wire }, payload);
    if w.remote_qpn == MCAST_QPN {
        fabric::mcast_members(&wire.dgid).into_iter().for_each(send);
    } else if let Some(d) = fabric::owner_of(w.remote_qpn) {
        send(d);
    }
}

/// The QP number of a send to a multicast group.
const MCAST_QPN: u32 = 0x00ff_ffff;

/// Completes a request the requester carries out by itself (a memory
/// window bind, a local invalidate) with `status`, in its place: a send
/// queue completes in posting order, so behind RC requests still waiting
/// for their answers it joins them, answered already, and completes when
/// they have (`complete_front`), or is flushed with them.
pub(super) fn complete_in_order(
    s: &Arc<QpShared>,
    wr_id: u64,
    signaled: bool,
    opcode: c_int,
    status: c_int,
) {
    let mut g = s.st.lock();
    if g.out.is_empty() {
        drop(g);
        return complete_send(s, wr_id, signaled, opcode, status, 0);
    }
    // Never at the front unanswered: `complete_front` takes it with the
    // answered ones ahead of it.
    queue_unsent(&mut g, wr_id, signaled, opcode, Some(status));
}

/// A request that waits for a read credit the QP will never have
/// (`Quirks::no_credit_stalls`): queued unanswered with no deadline, it
/// holds the send queue until the QP is reset or fails (flushed then).
pub(super) fn stall(s: &Arc<QpShared>, wr_id: u64, signaled: bool, opcode: c_int) {
    queue_unsent(&mut s.st.lock(), wr_id, signaled, opcode, None);
}

/// Queues a request that sends nothing and waits for no answer, with no
/// deadline: `done` is its status (`None`: it waits until the QP is reset
/// or fails).
fn queue_unsent(
    g: &mut qp::QpInner,
    wr_id: u64,
    signaled: bool,
    opcode: c_int,
    done: Option<c_int>,
) {
    let seq = g.next_seq;
    g.next_seq += 1;
    g.out.push_back(Outstanding {
        seq,
        wr_id,
        signaled,
        opcode,
        sge: Vec::new(),
        byte_len: 0,
        dest: None,
        deadline: u64::MAX,
        timeout: 0,
        doomed: false,
        not_ready: false,
        done,
    });
}

/// Completes the answered requests at the front of `q`'s queue, in order.
fn complete_front(q: &Arc<QpShared>, mut g: parking_lot::MutexGuard<'_, qp::QpInner>) {
    let mut finished = Vec::new();
    while g.out.front().is_some_and(|e| e.done.is_some()) {
        if let Some(e) = g.out.pop_front() {
            finished.push(e);
        }
    }
    drop(g);
    for e in finished {
        let status = e.done.unwrap_or(WC_RETRY_EXC_ERR);
        let len = if status == WC_SUCCESS { e.byte_len } else { 0 };
        complete_send(q, e.wr_id, e.signaled, e.opcode, status, len);
    }
}

/// A response to one of our requests, in the requester's progress engine.
pub fn on_response(w: &Wire, data: &[u8]) {
    let Some(q) = QPS.get(w.dst_qpn) else {
        return;
    };
    let mut g = q.st.lock();
    let pd = q.pd;
    let Some(e) = g.out.iter_mut().find(|e| e.seq == w.seq) else {
        return;
    };
    match w.kind {
        kind::ACK => e.done = Some(WC_SUCCESS),
        kind::NAK => e.done = Some(w.status),
        kind::DROP => e.doomed = true,
        // Parked until the responder's QP reaches RTR: no more patience
        // than the retries give.
        kind::NOT_READY => e.not_ready = true,
        kind::READ_RESP => {
            e.done = Some(match scatter(pd, &e.sge, &[data]) {
                Ok(()) => WC_SUCCESS,
                Err(st) => st,
            })
        }
        kind::ATOMIC_RESP => {
            e.done = Some(match scatter(pd, &e.sge, &[&w.compare_add.to_ne_bytes()]) {
                Ok(()) => WC_SUCCESS,
                Err(st) => st,
            })
        }
        _ => {}
    }
    complete_front(&q, g);
}

/// Fails requests whose retries ran out: dropped by the responder, or
/// sent to a process that died (or to a QP number nobody holds).
pub fn check_deadlines() {
    super::recv::rnr_tick();
    if !busy() {
        return;
    }
    let list: Vec<Arc<QpShared>> = WAITING.lock().clone();
    let now = fabric::now_ns();
    for q in list.iter().filter(|q| q.born.here().is_ok()) {
        let mut g = q.st.lock();
        if let Some(e) = g.out.front_mut() {
            if now >= e.deadline {
                if e.doomed || e.not_ready || !e.dest.is_some_and(fabric::alive) {
                    e.done = Some(WC_RETRY_EXC_ERR);
                    complete_front(q, g);
                    continue;
                }
                // Alive and not dropped: the answer is on its way.
                e.deadline = now + e.timeout;
            }
        }
    }
    let mut wl = WAITING.lock();
    wl.retain(|q| q.born.here().is_ok() && !q.st.lock().out.is_empty());
    if wl.is_empty() {
        wl.shrink_to_fit();
    }
    N_WAITING.store(wl.len(), Ordering::Relaxed);
}
