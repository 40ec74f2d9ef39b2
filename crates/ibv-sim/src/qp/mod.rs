//! Queue pairs: create / query / modify / destroy, multicast attachment,
//! and the state changes the data path triggers (errors, flushes).
//! `create`: create and open; `query`; `modify`: `ibv_modify_qp` and its
//! checks; `destroy`; `mcast`: multicast attachment. This file: the QP's
//! state and its lookup.

mod create;
mod destroy;
mod events;
pub mod ex;
mod mcast;
mod modify;
mod query;

pub use create::*;
pub use destroy::*;
pub use mcast::*;
pub use modify::*;
use query::RawQpAttr;
pub use query::*;

use core::ffi::{c_int, c_void};
use core::ptr::{addr_of, addr_of_mut};
use std::collections::{HashMap, VecDeque};
use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::sync::Arc;

use once_cell::sync::Lazy;
use parking_lot::Mutex;
use verbs_abi::{
    ibv_ah_attr, ibv_context, ibv_cq, ibv_pd, ibv_qp, ibv_qp_attr, ibv_qp_cap, ibv_qp_init_attr,
    ibv_qp_init_attr_ex, ibv_qp_init_attr_mask, ibv_sge, ibv_srq,
};

use crate::abi::{WC_RECV, WC_RETRY_EXC_ERR};
use crate::context::{self, SimContext};
use crate::cq::{self, CqShared, SimCq};
use crate::device::SimDevice;
use crate::events::{async_kind, AsyncEvent, EventCounter, EventQueue};
use crate::fabric::wire::Wire;
use crate::fabric::{Dest, Peer};
use crate::pd::{self, SimPd};
use crate::qp_state::{self, mask, ERR, INIT, QPT_RC, QPT_UC, QPT_UD, RESET, RTR, RTS, SQD, SQE};
use crate::recvq::{Parked, RecvQueue};
use crate::registry::{self, Entry, Kind, Sharded, OBJECTS};
use crate::srq::{self, SimSrq, SrqShared};

/// Attributes a QP was given by `ibv_modify_qp` (enums kept as `c_int`).
#[derive(Clone, Copy)]
pub struct QpAttrs {
    pub path_mtu: c_int,
    pub path_mig_state: c_int,
    pub qkey: u32,
    pub rq_psn: u32,
    pub sq_psn: u32,
    pub dest_qp_num: u32,
    pub access: u32,
    pub ah: ibv_ah_attr,
    pub alt_ah: ibv_ah_attr,
    pub pkey_index: u16,
    pub alt_pkey_index: u16,
    pub en_sqd_async_notify: u8,
    pub max_rd_atomic: u8,
    pub max_dest_rd_atomic: u8,
    pub min_rnr_timer: u8,
    pub port_num: u8,
    pub timeout: u8,
    pub retry_cnt: u8,
    pub rnr_retry: u8,
    pub alt_port_num: u8,
    pub alt_timeout: u8,
    pub rate_limit: u32,
}

impl Default for QpAttrs {
    fn default() -> Self {
        // SAFETY: ibv_ah_attr is plain data; all-zero is valid.
        let ah: ibv_ah_attr = unsafe { core::mem::zeroed() };
        QpAttrs {
            path_mtu: 1,
            path_mig_state: 0,
            qkey: 0,
            rq_psn: 0,
            sq_psn: 0,
            dest_qp_num: 0,
            access: 0,
            ah,
            alt_ah: ah,
            pkey_index: 0,
            alt_pkey_index: 0,
            en_sqd_async_notify: 0,
            max_rd_atomic: 0,
            max_dest_rd_atomic: 0,
            min_rnr_timer: 0,
            port_num: 0,
            timeout: 0,
            retry_cnt: 0,
            rnr_retry: 0,
            alt_port_num: 0,
            alt_timeout: 0,
            rate_limit: 0,
        }
    }
}

/// Mutable QP state, under the QP's own lock.
pub struct QpInner {
    pub state: c_int,
    pub attrs: QpAttrs,
    /// The receive queue (unused when the QP has an SRQ).
    pub rq: RecvQueue,
    /// Multicast groups attached (`ibv_attach_mcast`).
    pub mcast: Vec<([u8; 16], u16)>,
    /// RC requests to other processes waiting for their responses, in order.
    pub out: VecDeque<Outstanding>,
    /// Sequence number of the next such request.
    pub next_seq: u64,
    /// Requests from other processes that arrived before this QP could
    /// receive (its peer was quicker to RTS): replayed, in order, when it
    /// reaches RTR, as the requester's retries would deliver them.
    pub early: VecDeque<(Wire, Vec<u8>)>,
}

impl QpInner {
    /// Drops the early requests of a QP that is reset, fails or goes
    /// away: their requesters' retries run out.
    pub fn drop_early(&mut self) {
        for (w, _) in self.early.drain(..) {
            Peer::of(&w).reply(WC_RETRY_EXC_ERR);
        }
        if self.early.capacity() > 0 {
            self.early.shrink_to_fit();
        }
    }
}

/// An RC work request of ours waiting for its response.
pub struct Outstanding {
    pub seq: u64,
    pub wr_id: u64,
    pub signaled: bool,
    pub opcode: c_int,
    /// Where READ / atomic results go.
    pub sge: Vec<ibv_sge>,
    /// The byte count of a successful completion.
    pub byte_len: u32,
    pub dest: Option<Dest>,
    pub deadline: u64,
    pub timeout: u64,
    /// The responder dropped it: fail at the deadline.
    pub doomed: bool,
    /// The responder's QP was not ready: fail at the deadline unless
    /// answered by then.
    pub not_ready: bool,
    pub done: Option<c_int>,
}

/// The part of a QP the data path shares (peers find it by QP number).
pub struct QpShared {
    /// Address of the `ibv_qp`.
    pub addr: usize,
    pub qp_num: u32,
    pub qp_type: c_int,
    pub dev: &'static SimDevice,
    /// Address of the SimPd (0: an XRC receive QP, which has none).
    pub pd: usize,
    /// An XRC receive QP's domain (`SimXrcd::domain`; 0 otherwise).
    pub xrc_domain: usize,
    /// `ibv_qp` handles of this QP: 1, more for an XRC receive QP that
    /// `ibv_open_qp` opened again; the QP lives until the last goes.
    handles: AtomicU32,
    pub sq_sig_all: bool,
    pub cap: ibv_qp_cap,
    pub send_cq: Arc<CqShared>,
    pub recv_cq: Arc<CqShared>,
    pub srq: Option<Arc<SrqShared>>,
    pub st: Mutex<QpInner>,
    /// Destroyed: set under `st` (and before its SRQ's parked messages
    /// are failed); a message that finds it set fails instead of parking.
    pub gone: AtomicBool,
    pub events: EventCounter,
    /// A forked child's data path refuses its parent's QPs.
    pub born: crate::fork::Born,
    async_q: Arc<EventQueue<AsyncEvent>>,
    /// `IBV_EVENT_COMM_EST` was raised (once per QP: `events.rs`).
    comm_est: AtomicBool,
    /// Send work requests taken and not yet completed.
    pub sq_use: SqUse,
    /// What its sends read, while the sim keeps sources (`witness`).
    pub sent: crate::witness::Sent,
}

/// The send queue's occupancy: work requests posted in RTS and not yet
/// completed (successfully, in error, or flushed). Counted on every QP;
/// enforced where the profile's send queue is a ring (rxe), whose slot is
/// freed only when its completion is made.
#[derive(Default)]
pub struct SqUse {
    posted: AtomicU32,
    done: AtomicU32,
}

impl SqUse {
    /// Takes a slot of a queue of `cap`; false when all are in use.
    pub fn take(&self, cap: u32) -> bool {
        let mut p = self.posted.load(Ordering::Relaxed);
        loop {
            if p.wrapping_sub(self.done.load(Ordering::Acquire)) >= cap {
                return false;
            }
            match self.posted.compare_exchange_weak(
                p,
                p.wrapping_add(1),
                Ordering::AcqRel,
                Ordering::Relaxed,
            ) {
                Ok(_) => return true,
                Err(now) => p = now,
            }
        }
    }

    /// A work request completed: its slot is free again.
    pub fn release(&self) {
        self.done.fetch_add(1, Ordering::Release);
    }

    /// RESET: the queue is empty (what was outstanding is dropped).
    pub fn reset(&self) {
        self.done
            .store(self.posted.load(Ordering::Acquire), Ordering::Release);
    }
}

impl QpShared {
    /// Writes the state into the `ibv_qp` programs read (`qp->state`),
    /// atomically: other threads (a shim's checks, the program) read it
    /// while the data path or `ibv_modify_qp` moves it.
    fn publish_state(&self, state: c_int) {
        // SAFETY: addr is the live ibv_qp this shared part belongs to (the
        // QP is freed only after it left the QP table and its last use);
        // the state field is an aligned int-sized C enum.
        unsafe {
            core::sync::atomic::AtomicI32::from_ptr(
                addr_of_mut!((*(self.addr as *mut ibv_qp)).state).cast::<i32>(),
            )
            .store(state, Ordering::Relaxed)
        };
    }

    /// Moves the QP to `state` after an error found by the data path (RC:
    /// ERR, UC/UD: SQE), flushing its receive queue on ERR.
    pub fn fail(&self, state: c_int) {
        let mut g = self.st.lock();
        if g.state == ERR || g.state == RESET {
            return;
        }
        g.state = state;
        self.publish_state(state);
        if state == ERR {
            self.flush_locked(&mut g);
        }
    }

    /// ERR: outstanding receives complete with `IBV_WC_WR_FLUSH_ERR`; a QP
    /// on an SRQ reports `IBV_EVENT_QP_LAST_WQE_REACHED` instead.
    fn flush_locked(&self, g: &mut QpInner) {
        g.drop_early();
        // Flushed requests' buffers go back to the program: the outbox
        // must not read them any more.
        crate::fabric::settle_outbox();
        for e in g.out.drain(..) {
            self.sq_use.release();
            self.send_cq
                .push(cq::flush_wc(e.wr_id, e.opcode, self.qp_num), true);
        }
        for w in g.rq.wqes.drain(..) {
            self.recv_cq
                .push(cq::flush_wc(w.wr_id, WC_RECV, self.qp_num), true);
        }
        if self.srq.is_some() {
            self.async_q.push(AsyncEvent {
                event_type: async_kind::QP_LAST_WQE_REACHED,
                element: self.addr,
            });
        }
    }
}

/// A queue pair; `qp` first so `*mut ibv_qp` is the object's address.
#[repr(C)]
pub struct SimQp {
    pub qp: ibv_qp,
    /// Must follow `qp`: with it, an `ibv_qp_ex` (see `ext::qp`); valid all-zero.
    pub ex: ex::QpEx,
    pub shared: Arc<QpShared>,
    pd: *const SimPd,
    send_cq: *const SimCq,
    recv_cq: *const SimCq,
    srq: *const SimSrq,
    /// `IBV_QPT_XRC_RECV`: its XRC domain (NULL otherwise).
    xrcd: *const crate::xrcd::SimXrcd,
    /// Flow steering rules attached (`objects::flow`); valid all-zero.
    pub users: AtomicU32,
}

/// Members of each multicast group, by GID.
pub type McastGroups = HashMap<[u8; 16], Vec<Arc<QpShared>>>;

/// Multicast groups: GID -> attached QPs.
pub static MCAST: Lazy<Mutex<McastGroups>> = Lazy::new(|| Mutex::new(HashMap::new()));

/// QPs by QP number (the data path finds the peer here).
pub static QPS: Lazy<Sharded<u32, Arc<QpShared>>> = Lazy::new(Sharded::new);

static NEXT_QPN: AtomicU32 = AtomicU32::new(0x100);

/// A live QP and its context.
pub fn get(qp: *mut ibv_qp) -> Result<(&'static SimContext, &'static SimQp), c_int> {
    get_as(qp, libc::EINVAL)
}

/// As [`get`], with `unknown` the error for an object whose handle or
/// context the program changed (a destroy's `ENOENT`, as the kernel's).
pub fn get_as(
    qp: *mut ibv_qp,
    unknown: c_int,
) -> Result<(&'static SimContext, &'static SimQp), c_int> {
    let ctx = context::owner_of(qp as usize, Kind::Qp)?;
    // SAFETY: a live QP (the registry says so): its C fields are readable.
    let (named, handle) = unsafe { ((*qp).context, (*qp).handle) };
    context::known(ctx, qp as usize, named, handle).map_err(|_| unknown)?;
    // SAFETY: the registry says a live SimQp is at this address.
    Ok((ctx, unsafe { &*(qp as *const SimQp) }))
}

/// The QP behind a pointer, unchecked (data path).
///
/// # Safety
/// `qp` must be a QP created by the sim and not yet freed.
pub unsafe fn unchecked<'a>(qp: *mut ibv_qp) -> &'a SimQp {
    // SAFETY: guaranteed by the caller.
    unsafe { &*(qp as *const SimQp) }
}

/// States in which a QP accepts incoming messages.
pub fn can_receive(state: c_int) -> bool {
    matches!(state, RTR | RTS | SQD | SQE)
}

/// States in which receives may be posted.
pub fn can_post_recv(state: c_int) -> bool {
    state >= INIT
}
