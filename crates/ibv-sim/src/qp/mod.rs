//! Queue pairs: create / query / modify / destroy, multicast attachment,
//! and the state changes the data path triggers (errors, flushes).
//! `modify`: `ibv_modify_qp` and its checks; `mcast`: multicast attachment.

mod events;
pub mod ex;
mod mcast;
mod modify;

pub use mcast::*;
pub use modify::*;

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
    pub events: EventCounter,
    /// A forked child's data path refuses its parent's QPs.
    pub born: crate::fork::Born,
    async_q: Arc<EventQueue<AsyncEvent>>,
    /// `IBV_EVENT_COMM_EST` was raised (once per QP: `events.rs`).
    comm_est: AtomicBool,
    /// Send work requests taken and not yet completed.
    pub sq_use: SqUse,
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

/// What `ibv_create_qp` / `ibv_create_qp_ex` ask for.
pub struct QpInit {
    pub qp_context: *mut c_void,
    pub send_cq: *mut ibv_cq,
    pub recv_cq: *mut ibv_cq,
    pub srq: *mut ibv_srq,
    pub cap: ibv_qp_cap,
    pub qp_type: c_int,
    pub sq_sig_all: c_int,
    /// `IBV_QPT_XRC_RECV`: its XRC domain (`IBV_QP_INIT_ATTR_XRCD`).
    pub xrcd: *mut verbs_abi::ibv_xrcd,
}

impl QpInit {
    /// Reads an `ibv_qp_init_attr` (its enum field as `c_int`).
    ///
    /// # Safety
    /// `a` must point at a readable `ibv_qp_init_attr`.
    pub unsafe fn from_attr(a: *const ibv_qp_init_attr) -> QpInit {
        // SAFETY: guaranteed by the caller; the enum is read as an int.
        unsafe {
            QpInit {
                qp_context: (*a).qp_context,
                send_cq: (*a).send_cq,
                recv_cq: (*a).recv_cq,
                srq: (*a).srq,
                cap: (*a).cap,
                qp_type: addr_of!((*a).qp_type).cast::<c_int>().read(),
                sq_sig_all: (*a).sq_sig_all,
                xrcd: core::ptr::null_mut(),
            }
        }
    }
}

fn cq_of(ctx: &SimContext, cq: *mut ibv_cq) -> Result<&'static SimCq, c_int> {
    let (c_ctx, c) = cq::get(cq)?;
    if !core::ptr::eq(c_ctx, ctx) {
        return Err(libc::EINVAL);
    }
    Ok(c)
}

/// `ibv_create_qp`; writes the granted capacities back into `init.cap`.
/// XRC receive QPs have no PD, CQs or queues of their own (each message
/// names the XRC SRQ it lands in, `objects::xrc`); XRC send QPs no receive
/// side.
pub fn create(pd_ptr: *mut ibv_pd, init: &mut QpInit) -> Result<*mut ibv_qp, c_int> {
    let xrc_recv = init.qp_type == qp_state::QPT_XRC_RECV;
    let (ctx, pd, xrcd) = if xrc_recv {
        let (c, x) = crate::xrcd::get(init.xrcd)?;
        (c, None, Some(x))
    } else {
        let (c, p) = pd::get(pd_ptr)?;
        (c, Some(p), None)
    };
    let fam = ctx.dev.family;
    match init.qp_type {
        QPT_RC => {}
        qp_state::QPT_XRC_SEND | qp_state::QPT_XRC_RECV => {
            crate::profile::offered(ctx.dev.profile().xrc)?
        }
        QPT_UC if fam.uc => {}
        QPT_UD if fam.ud => {}
        QPT_UC | QPT_UD => return Err(libc::EOPNOTSUPP),
        qp_state::QPT_RAW_PACKET => return Err(libc::EOPNOTSUPP),
        _ => return Err(libc::EINVAL),
    }
    let no_recv = matches!(
        init.qp_type,
        qp_state::QPT_XRC_SEND | qp_state::QPT_XRC_RECV
    );
    if no_recv {
        init.cap.max_recv_wr = 0;
        init.cap.max_recv_sge = 0;
        if !init.srq.is_null() {
            return Err(libc::EINVAL);
        }
    }
    if xrc_recv {
        init.cap = ibv_qp_cap {
            max_send_wr: 0,
            max_recv_wr: 0,
            max_send_sge: 0,
            max_recv_sge: 0,
            max_inline_data: 0,
        };
    }
    let pr = ctx.dev.profile();
    let cap = &mut init.cap;
    if cap.max_send_wr > pr.max_qp_wr as u32
        || cap.max_send_sge > pr.max_sge as u32
        || cap.max_inline_data > pr.max_inline_data
    {
        return Err(libc::EINVAL);
    }
    if init.srq.is_null()
        && (cap.max_recv_wr > pr.max_qp_wr as u32 || cap.max_recv_sge > pr.max_sge as u32)
    {
        return Err(libc::EINVAL);
    }
    let mut st = ctx.lock_open()?;
    let live = match xrcd {
        Some(_) => registry::is_live(init.xrcd as usize, Kind::Xrcd),
        None => registry::is_live(pd_ptr as usize, Kind::Pd),
    };
    if !live {
        return Err(libc::EINVAL);
    }
    let send_cq = if xrc_recv {
        None
    } else {
        Some(cq_of(ctx, init.send_cq)?)
    };
    let recv_cq = if no_recv {
        None
    } else {
        Some(cq_of(ctx, init.recv_cq)?)
    };
    // Queues that never complete anything still need a CQ to name.
    let unused_cq = || cq::CqShared::unused(ctx.async_q.clone());
    let send_shared = send_cq.map_or_else(unused_cq, |c| c.shared.clone());
    let recv_shared = recv_cq.map_or_else(|| send_shared.clone(), |c| c.shared.clone());
    let srq: Option<&SimSrq> = if init.srq.is_null() {
        None
    } else {
        let (s_ctx, s) = srq::get(init.srq)?;
        if !core::ptr::eq(s_ctx, ctx) {
            return Err(libc::EINVAL);
        }
        Some(s)
    };
    if srq.is_some() {
        cap.max_recv_wr = 0;
        cap.max_recv_sge = 0;
    }
    if pr.ring_queues {
        ring_caps(cap, !xrc_recv, srq.is_none() && !no_recv);
    }
    // Unique across the fabric; a process that is not attached (a forked
    // child that never opened a device) numbers its own.
    ctx.dev.take(crate::device::Limit::Qp)?;
    let qp_num = match crate::fabric::alloc_qpn() {
        Some(r) => r.inspect_err(|_| ctx.dev.give(crate::device::Limit::Qp))?,
        None => loop {
            let n = NEXT_QPN.fetch_add(1, Ordering::Relaxed) & 0x00ff_ffff;
            if n > 1 && n != 0x00ff_ffff && QPS.get(n).is_none() {
                break n;
            }
        },
    };
    let mut b = Box::<SimQp>::new_zeroed();
    let raw = b.as_mut_ptr();
    let shared = Arc::new(QpShared {
        addr: raw as usize,
        qp_num,
        qp_type: init.qp_type,
        dev: ctx.dev,
        pd: pd.map_or(0, |p| p.base()),
        xrc_domain: xrcd.map_or(0, |x| x.domain),
        handles: AtomicU32::new(1),
        sq_sig_all: init.sq_sig_all != 0,
        cap: *cap,
        send_cq: send_shared,
        recv_cq: recv_shared,
        srq: srq.map(|s| s.shared.clone()),
        st: Mutex::new(QpInner {
            state: RESET,
            attrs: QpAttrs::default(),
            rq: RecvQueue::new(cap.max_recv_wr, cap.max_recv_sge),
            mcast: Vec::new(),
            out: VecDeque::new(),
            next_seq: 0,
            early: VecDeque::new(),
        }),
        events: EventCounter::default(),
        born: crate::fork::Born::now(),
        async_q: ctx.async_q.clone(),
        comm_est: AtomicBool::new(false),
        sq_use: SqUse::default(),
    });
    // SAFETY: raw points at zeroed, uninitialised-by-Rust storage for a
    // SimQp; every field that is not valid as zero (the Arc, the qp_type
    // enum) is written before assume_init.
    let raw = unsafe {
        let q = addr_of_mut!((*raw).qp);
        addr_of_mut!((*q).context).write(ctx.ibv());
        addr_of_mut!((*q).qp_context).write(init.qp_context);
        addr_of_mut!((*q).pd).write(pd_ptr);
        addr_of_mut!((*q).send_cq).write(init.send_cq);
        addr_of_mut!((*q).recv_cq).write(init.recv_cq);
        addr_of_mut!((*q).srq).write(init.srq);
        addr_of_mut!((*q).handle).write(st.handle());
        addr_of_mut!((*q).qp_num).write(qp_num);
        addr_of_mut!((*q).state).cast::<c_int>().write(RESET);
        addr_of_mut!((*q).qp_type)
            .cast::<c_int>()
            .write(init.qp_type);
        addr_of_mut!((*raw).shared).write(shared.clone());
        addr_of_mut!((*raw).pd).write(pd.map_or(core::ptr::null(), |p| p as *const SimPd));
        addr_of_mut!((*raw).send_cq)
            .write(send_cq.map_or(core::ptr::null(), |c| c as *const SimCq));
        addr_of_mut!((*raw).recv_cq)
            .write(recv_cq.map_or(core::ptr::null(), |c| c as *const SimCq));
        addr_of_mut!((*raw).xrcd).write(xrcd.map_or(core::ptr::null(), |x| x as *const _));
        addr_of_mut!((*raw).srq).write(srq.map_or(core::ptr::null(), |s| s as *const SimSrq));
        Box::into_raw(b.assume_init())
    };
    for users in [
        pd.map(|p| &p.users),
        send_cq.map(|c| &c.users),
        recv_cq.map(|c| &c.users),
    ]
    .into_iter()
    .flatten()
    {
        users.fetch_add(1, Ordering::Relaxed);
    }
    if let Some(x) = xrcd {
        x.users.take();
    }
    if let Some(s) = srq {
        s.users.fetch_add(1, Ordering::Relaxed);
    }
    st.children += 1;
    QPS.insert(qp_num, shared);
    OBJECTS.insert(
        raw as usize,
        Entry {
            kind: Kind::Qp,
            ctx: ctx.addr(),
            // SAFETY: raw was just boxed here and is not shared yet.
            handle: unsafe { (*raw).qp.handle },
        },
    );
    Ok(raw.cast())
}

/// The capacities a ring-queue provider (rxe) grants: each queue a power of
/// two slots with one kept free, and a send WQE's room for inline data is
/// what its SGEs take (16 bytes each) or the inline size asked, whichever
/// is larger, the SGEs it holds counted from that room.
fn ring_caps(cap: &mut ibv_qp_cap, send: bool, recv: bool) {
    use crate::profile::ring_capacity;
    const SGE: u32 = core::mem::size_of::<verbs_abi::ibv_sge>() as u32;
    if send {
        cap.max_send_wr = ring_capacity(cap.max_send_wr);
        let room = (cap.max_send_sge * SGE).max(cap.max_inline_data);
        cap.max_send_sge = room / SGE;
        cap.max_inline_data = room;
    }
    if recv {
        cap.max_recv_wr = ring_capacity(cap.max_recv_wr);
    }
}

/// Plain-integer view of `ibv_qp_attr`, so the caller's struct can be read
/// without ever holding (possibly invalid) enum values as Rust enums. The
/// enum fields are the first four ints; `assert_layout!` below pins the
/// rest to `ibv_qp_attr`'s offsets.
#[repr(C)]
struct RawQpAttr {
    qp_state: c_int,
    cur_qp_state: c_int,
    path_mtu: c_int,
    path_mig_state: c_int,
    qkey: u32,
    rq_psn: u32,
    sq_psn: u32,
    dest_qp_num: u32,
    qp_access_flags: u32,
    cap: ibv_qp_cap,
    ah_attr: ibv_ah_attr,
    alt_ah_attr: ibv_ah_attr,
    pkey_index: u16,
    alt_pkey_index: u16,
    en_sqd_async_notify: u8,
    sq_draining: u8,
    max_rd_atomic: u8,
    max_dest_rd_atomic: u8,
    min_rnr_timer: u8,
    port_num: u8,
    timeout: u8,
    retry_cnt: u8,
    rnr_retry: u8,
    alt_port_num: u8,
    alt_timeout: u8,
    rate_limit: u32,
}

verbs_abi::assert_layout!(RawQpAttr, 144, 8;
    qp_state => 0, cur_qp_state => 4, path_mtu => 8, path_mig_state => 12, qkey => 16,
    rq_psn => 20, sq_psn => 24, dest_qp_num => 28, qp_access_flags => 32, cap => 36,
    ah_attr => 56, alt_ah_attr => 88, pkey_index => 120, alt_pkey_index => 122,
    en_sqd_async_notify => 124, sq_draining => 125, max_rd_atomic => 126,
    max_dest_rd_atomic => 127, min_rnr_timer => 128, port_num => 129, timeout => 130,
    retry_cnt => 131, rnr_retry => 132, alt_port_num => 133, alt_timeout => 134,
    rate_limit => 136);
const _: () = assert!(core::mem::size_of::<RawQpAttr>() == core::mem::size_of::<ibv_qp_attr>());

/// `ibv_query_qp`: fills every attribute (as the kernel does) and the init attributes.
pub fn query(
    qp: *mut ibv_qp,
    attr: *mut ibv_qp_attr,
    _attr_mask: c_int,
    init: *mut ibv_qp_init_attr,
) -> Result<(), c_int> {
    let (_ctx, q) = get(qp)?;
    if attr.is_null() || init.is_null() {
        return Err(libc::EINVAL);
    }
    let s = &q.shared;
    let g = s.st.lock();
    let t = &g.attrs;
    let out = RawQpAttr {
        qp_state: g.state,
        cur_qp_state: g.state,
        path_mtu: t.path_mtu,
        path_mig_state: t.path_mig_state,
        qkey: t.qkey,
        rq_psn: t.rq_psn,
        sq_psn: t.sq_psn,
        dest_qp_num: t.dest_qp_num,
        qp_access_flags: t.access,
        cap: s.cap,
        ah_attr: t.ah,
        alt_ah_attr: t.alt_ah,
        pkey_index: t.pkey_index,
        alt_pkey_index: t.alt_pkey_index,
        en_sqd_async_notify: t.en_sqd_async_notify,
        sq_draining: 0,
        max_rd_atomic: t.max_rd_atomic,
        max_dest_rd_atomic: t.max_dest_rd_atomic,
        min_rnr_timer: t.min_rnr_timer,
        port_num: t.port_num,
        timeout: t.timeout,
        retry_cnt: t.retry_cnt,
        rnr_retry: t.rnr_retry,
        alt_port_num: t.alt_port_num,
        alt_timeout: t.alt_timeout,
        rate_limit: t.rate_limit,
    };
    let state = g.state;
    drop(g);
    // SAFETY: attr and init point at the caller's structs; RawQpAttr has
    // ibv_qp_attr's layout with valid values for its enum fields; the
    // init attributes' enum field is written as an int.
    unsafe {
        attr.cast::<RawQpAttr>().write(out);
        addr_of_mut!((*init).qp_context).write((*qp).qp_context);
        addr_of_mut!((*init).send_cq).write((*qp).send_cq);
        addr_of_mut!((*init).recv_cq).write((*qp).recv_cq);
        addr_of_mut!((*init).srq).write((*qp).srq);
        addr_of_mut!((*init).cap).write(s.cap);
        addr_of_mut!((*init).qp_type)
            .cast::<c_int>()
            .write(s.qp_type);
        addr_of_mut!((*init).sq_sig_all).write(c_int::from(s.sq_sig_all));
    }
    s.publish_state(state);
    Ok(())
}

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
        g.state = RESET;
        g.rq.wqes.clear();
        g.out.clear();
    }
    crate::fabric::settle_outbox();
    drop_pending_from(s);
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

/// `ibv_qp_init_attr_mask` bits.
const INIT_PD: u32 = ibv_qp_init_attr_mask::IBV_QP_INIT_ATTR_PD as u32;
const INIT_CREATE_FLAGS: u32 = ibv_qp_init_attr_mask::IBV_QP_INIT_ATTR_CREATE_FLAGS as u32;
const INIT_XRCD: u32 = ibv_qp_init_attr_mask::IBV_QP_INIT_ATTR_XRCD as u32;
/// Every bit up to `IBV_QP_INIT_ATTR_SEND_OPS_FLAGS`.
const INIT_KNOWN: u32 = (ibv_qp_init_attr_mask::IBV_QP_INIT_ATTR_SEND_OPS_FLAGS as u32) * 2 - 1;

/// `ibv_create_qp_ex` of a plain QP (`ext::qp` adds send ops on top).
pub fn create_ex(
    ctx: *mut ibv_context,
    attr: *mut ibv_qp_init_attr_ex,
) -> Result<*mut ibv_qp, c_int> {
    let sim = context::from_ibv(ctx)?;
    if attr.is_null() {
        return Err(libc::EINVAL);
    }
    // SAFETY: attr points at the caller's ibv_qp_init_attr_ex, whose
    // leading fields are an ibv_qp_init_attr.
    let (mask, pd_ptr, flags, xrcd, mut init) = unsafe {
        (
            (*attr).comp_mask,
            (*attr).pd,
            (*attr).create_flags,
            (*attr).xrcd,
            QpInit::from_attr(attr.cast()),
        )
    };
    // An XRC receive QP names its XRC domain instead of a PD.
    let xrc_recv = init.qp_type == qp_state::QPT_XRC_RECV;
    let needed = if xrc_recv { INIT_XRCD } else { INIT_PD };
    if mask & !INIT_KNOWN != 0 || mask & needed == 0 {
        return Err(libc::EINVAL);
    }
    // TSO and RSS are not simulated (send ops: see ext::qp).
    if mask & !(INIT_PD | INIT_XRCD | INIT_CREATE_FLAGS) != 0
        || (mask & INIT_CREATE_FLAGS != 0 && flags != 0)
    {
        return Err(libc::EOPNOTSUPP);
    }
    if xrc_recv {
        init.xrcd = xrcd;
        let q = create(core::ptr::null_mut(), &mut init)?;
        // SAFETY: as above.
        unsafe { (*attr).cap = init.cap };
        return Ok(q);
    }
    let (pctx, _) = pd::get(pd_ptr)?;
    if !core::ptr::eq(pctx, sim) {
        return Err(libc::EINVAL);
    }
    let q = create(pd_ptr, &mut init)?;
    // SAFETY: as above.
    unsafe { (*attr).cap = init.cap };
    Ok(q)
}

/// `ibv_qp_open_attr_mask` bits.
const OPEN_NUM: u32 = 1;
const OPEN_XRCD: u32 = 1 << 1;
const OPEN_CONTEXT: u32 = 1 << 2;
const OPEN_TYPE: u32 = 1 << 3;

/// `ibv_open_qp`: another handle of an XRC receive QP of this process,
/// found by number in the XRC domain `attr.xrcd` names (`EINVAL` if none).
pub fn open_xrc(
    ctx: *mut ibv_context,
    attr: *mut verbs_abi::ibv_qp_open_attr,
) -> Result<*mut ibv_qp, c_int> {
    let sim = context::from_ibv(ctx)?;
    if attr.is_null() {
        return Err(libc::EINVAL);
    }
    // SAFETY: attr points at the caller's struct; the enum read as an int.
    let (mask, num, xrcd, qp_context, ty) = unsafe {
        (
            (*attr).comp_mask,
            (*attr).qp_num,
            (*attr).xrcd,
            (*attr).qp_context,
            addr_of!((*attr).qp_type).cast::<c_int>().read(),
        )
    };
    let needed = OPEN_NUM | OPEN_XRCD | OPEN_TYPE;
    if mask & !(needed | OPEN_CONTEXT) != 0 || mask & needed != needed {
        return Err(libc::EINVAL);
    }
    if ty != qp_state::QPT_XRC_RECV {
        return Err(libc::EINVAL);
    }
    let (xctx, x) = crate::xrcd::get(xrcd)?;
    if !core::ptr::eq(xctx, sim) {
        return Err(libc::EINVAL);
    }
    let shared = QPS
        .get(num)
        .filter(|s| s.qp_type == qp_state::QPT_XRC_RECV && s.xrc_domain == x.domain)
        .ok_or(libc::EINVAL)?;
    let mut st = sim.lock_open()?;
    if !registry::is_live(xrcd as usize, Kind::Xrcd) {
        return Err(libc::EINVAL);
    }
    let state = shared.st.lock().state;
    let mut b = Box::<SimQp>::new_zeroed();
    let raw = b.as_mut_ptr();
    // SAFETY: as in `create`: every field not valid as zero is written.
    let raw = unsafe {
        let q = addr_of_mut!((*raw).qp);
        addr_of_mut!((*q).context).write(sim.ibv());
        if mask & OPEN_CONTEXT != 0 {
            addr_of_mut!((*q).qp_context).write(qp_context);
        }
        addr_of_mut!((*q).handle).write(st.handle());
        addr_of_mut!((*q).qp_num).write(num);
        addr_of_mut!((*q).state).cast::<c_int>().write(state);
        addr_of_mut!((*q).qp_type).cast::<c_int>().write(ty);
        addr_of_mut!((*raw).shared).write(shared.clone());
        addr_of_mut!((*raw).xrcd).write(x);
        Box::into_raw(b.assume_init())
    };
    shared.handles.fetch_add(1, Ordering::Relaxed);
    x.users.take();
    st.children += 1;
    OBJECTS.insert(
        raw as usize,
        Entry {
            kind: Kind::Qp,
            ctx: sim.addr(),
            // SAFETY: raw was just boxed here and is not shared yet.
            handle: unsafe { (*raw).qp.handle },
        },
    );
    Ok(raw.cast())
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

/// States in which a QP accepts incoming messages.
pub fn can_receive(state: c_int) -> bool {
    matches!(state, RTR | RTS | SQD | SQE)
}

/// States in which receives may be posted.
pub fn can_post_recv(state: c_int) -> bool {
    state >= INIT
}
