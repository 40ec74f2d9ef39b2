//! Connection identifiers: the C face (`rdma_cm_id`, first member of an
//! [`IdBox`] at a stable address) and the state the library keeps for it
//! ([`Shared`], also reached by the rendezvous engine's thread).
//!
//! The engine thread only queues raw events ([`Raw`]); what the kernel's
//! librdmacm does when it reads an event (a new id for a request, the QP's
//! RTR/RTS on a reply, the RTU) happens here in `process`, on the
//! program's thread inside `rdma_get_cm_event`, as librdmacm does it.
//! `connect`: the active and passive sides' calls; `process`: raw events
//! into `rdma_cm_event`s.

pub mod channel;
pub mod connect;
pub mod event;
pub mod mcast;
pub mod process;
pub mod qp;
pub mod rendezvous;

use core::ffi::{c_int, c_void};
use std::collections::HashMap;
use std::os::fd::OwnedFd;
use std::sync::Arc;

use once_cell::sync::Lazy;
use parking_lot::{Condvar, Mutex};
use rdmacm_abi::*;

use crate::addr::Local;
use crate::cm::channel::{Channel, ChannelBox};
use crate::cm::rendezvous::wire::Msg;

/// A C struct holding pointers the library only hands back to the program
/// (a multicast context, `rdma_create_ep`'s CQs and SRQ), moved between threads.
#[derive(Clone, Copy)]
pub struct Carried<T>(pub T);
// SAFETY: the pointers inside are never dereferenced by the thread that
// carries them; they are the program's values, given back to it.
unsafe impl<T> Send for Carried<T> {}

/// Where an id is in its life (the kernel's `rdma_cm_state`, condensed).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Phase {
    Idle,
    Bound,
    AddrResolved,
    RouteResolved,
    Listen,
    /// REQ sent, no reply yet.
    Connecting,
    /// A request delivered to the program, not yet accepted or rejected.
    Requested,
    /// REP sent, no RTU yet.
    Accepted,
    /// REP received with no QP on the id: `rdma_establish` sends the RTU.
    Replied,
    Connected,
    /// `rdma_disconnect` sent a DREQ, no DREP yet.
    DisconnectSent,
    /// The peer's DREQ arrived (DISCONNECTED queued).
    DreqReceived,
    /// Disconnected both ways.
    Closed,
}

/// What the engine (or a call) queues for an id.
pub enum Raw {
    /// An event as it is, with its status.
    Plain(u32, c_int),
    /// A request for a listener: the new id's state (its connection
    /// registered with the engine already) and the REQ.
    Request(Arc<Shared>, Box<Msg>),
    /// A message on the id's connection.
    Msg(Box<Msg>),
    /// The connection's peer is gone.
    Eof,
    /// A DREQ's wait for its DREP is over.
    DreqTimeout,
    /// A REQ's wait for its reply is over (the CM's response timeout).
    ReqTimeout,
    /// A multicast group joined: the group's parameters.
    Join(Box<Carried<rdma_ud_param>>),
}

pub struct State {
    pub channel: Arc<Channel>,
    /// A synchronous id (NULL channel): calls wait for their events.
    pub sync: bool,
    pub phase: Phase,
    pub ps: u32,
    pub qp_type: u32,
    /// The connection to the peer (a `SOCK_SEQPACKET` socket).
    pub conn: Option<Arc<OwnedFd>>,
    /// The bound rendezvous socket (listeners) and its name in the directory.
    pub bound: Option<(Arc<OwnedFd>, String)>,
    pub local: Option<Local>,
    /// The peer's REQ (passive side) or REP (active side).
    pub remote: Option<Box<Msg>>,
    pub psn: u32,
    /// For the QP, as the connection negotiated them.
    pub responder_resources: u8,
    pub initiator_depth: u8,
    pub retry_count: u8,
    pub rnr_retry_count: u8,
    /// Events handed to the program, and acknowledged.
    pub reported: u64,
    pub acked: u64,
    pub destroyed: bool,
    pub local_ece: Option<(u32, u32)>,
    pub remote_ece: (u32, u32),
    pub tos: u8,
    pub reuseaddr: bool,
    pub afonly: bool,
    pub ack_timeout: Option<u8>,
    /// Multicast groups: (address bytes, GID, LID, program context).
    pub groups: Vec<crate::cm::mcast::Group>,
    /// The path records the program set (`RDMA_OPTION_IB_PATH`) or the route made.
    pub path: Option<Box<ibv_sa_path_rec>>,
    /// The private channel of a synchronous id, owned here.
    pub own_channel: Option<Box<ChannelBox>>,
    /// `rdma_create_ep`'s QP attributes and PD for a listener's new ids.
    pub ep_qp: Option<Carried<(core::mem::MaybeUninit<verbs_abi::ibv_qp_init_attr>, usize)>>,
}

/// An id's state, shared with the engine thread.
pub struct Shared {
    /// The [`IdBox`]'s address (0 while a request's new id has none yet).
    pub face: Mutex<usize>,
    pub st: Mutex<State>,
    pub cond: Condvar,
}

/// The C face of an id and its state.
#[repr(C)]
pub struct IdBox {
    pub face: rdma_cm_id,
    pub shared: Arc<Shared>,
}

/// The live ids, by the address programs hold.
static IDS: Lazy<Mutex<HashMap<usize, Arc<Shared>>>> = Lazy::new(|| Mutex::new(HashMap::new()));

impl Shared {
    pub fn new(channel: Arc<Channel>, sync: bool, ps: u32, qp_type: u32) -> Arc<Shared> {
        Arc::new(Shared {
            face: Mutex::new(0),
            st: Mutex::new(State {
                channel,
                sync,
                phase: Phase::Idle,
                ps,
                qp_type,
                conn: None,
                bound: None,
                local: None,
                remote: None,
                psn: crate::addr::random_u32() & 0x00ff_ffff,
                responder_resources: 0,
                initiator_depth: 0,
                retry_count: 7,
                rnr_retry_count: 7,
                reported: 0,
                acked: 0,
                destroyed: false,
                local_ece: None,
                remote_ece: (0, 0),
                tos: 0,
                reuseaddr: false,
                afonly: false,
                ack_timeout: None,
                groups: Vec::new(),
                path: None,
                own_channel: None,
                ep_qp: None,
            }),
            cond: Condvar::new(),
        })
    }

    /// Queues `raw` on the id's current channel (nothing once destroyed).
    pub fn deliver(self: &Arc<Self>, raw: Raw) {
        let st = self.st.lock();
        if st.destroyed {
            return;
        }
        let ch = st.channel.clone();
        drop(st);
        ch.push(self.clone(), raw);
    }

    /// The id's C face, when it has one.
    pub fn face_ptr(&self) -> *mut rdma_cm_id {
        *self.face.lock() as *mut rdma_cm_id
    }
}

/// The port space's QP type (`RDMA_PS_UDP`: UD, the others RC).
pub fn qp_type_of(ps: u32) -> Option<u32> {
    match ps {
        RDMA_PS_TCP | RDMA_PS_IB => Some(crate::verbs::QPT_RC),
        RDMA_PS_UDP | RDMA_PS_IPOIB => Some(crate::verbs::QPT_UD),
        _ => None,
    }
}

/// Makes the C face for `shared` and registers it.
pub fn publish(
    shared: Arc<Shared>,
    channel: *mut rdma_event_channel,
    context: *mut c_void,
) -> *mut rdma_cm_id {
    let (ps, qp_type) = {
        let st = shared.st.lock();
        (st.ps, st.qp_type)
    };
    // SAFETY: all-zero is a valid rdma_cm_id (null pointers, zero numbers).
    let mut face: rdma_cm_id = unsafe { core::mem::zeroed() };
    face.channel = channel;
    face.context = context;
    face.ps = ps;
    face.qp_type = qp_type;
    let b = Box::into_raw(Box::new(IdBox {
        face,
        shared: shared.clone(),
    }));
    *shared.face.lock() = b as usize;
    IDS.lock().insert(b as usize, shared);
    b.cast()
}

/// The state behind a program's id pointer, or `EINVAL` for one this
/// library did not make (or already destroyed).
pub fn lookup(id: *mut rdma_cm_id) -> Result<Arc<Shared>, c_int> {
    IDS.lock().get(&(id as usize)).cloned().ok_or(libc::EINVAL)
}

/// `rdma_create_id`.
///
/// # Safety
/// `channel` is NULL or a channel this library made; `out` is writable.
pub unsafe fn create(
    channel: *mut rdma_event_channel,
    out: *mut *mut rdma_cm_id,
    context: *mut c_void,
    ps: u32,
) -> Result<(), c_int> {
    if out.is_null() {
        return Err(libc::EINVAL);
    }
    let qp_type = qp_type_of(ps).ok_or(libc::EINVAL)?;
    let (ch, own, face_ch) = if channel.is_null() {
        let b = crate::cm::channel::new_channel()?;
        let inner = b.inner.clone();
        let p = (&raw const b.face).cast_mut();
        (inner, Some(b), p)
    } else {
        (crate::cm::channel::lookup_channel(channel)?, None, channel)
    };
    let shared = Shared::new(ch, channel.is_null(), ps, qp_type);
    shared.st.lock().own_channel = own;
    let id = publish(shared, face_ch, context);
    // SAFETY: the caller's out pointer.
    unsafe { *out = id };
    Ok(())
}

/// `rdma_destroy_id`: waits until every event reported for the id has been
/// acknowledged, then ends its connection (a DREQ to a connected peer) and
/// frees it.
///
/// # Safety
/// `id` is one this library made, not used by the program afterwards.
pub unsafe fn destroy(id: *mut rdma_cm_id) -> Result<(), c_int> {
    let shared = lookup(id)?;
    {
        let mut st = shared.st.lock();
        // A synchronous id's last event is its own to acknowledge.
        // SAFETY: our id's face.
        let ev = unsafe { (*id).event };
        if st.sync && !ev.is_null() {
            drop(st);
            crate::cm::event::ack(ev)?;
            // SAFETY: as above.
            unsafe { (*id).event = core::ptr::null_mut() };
            st = shared.st.lock();
        }
        while st.reported != st.acked {
            shared.cond.wait(&mut st);
        }
        st.destroyed = true;
    }
    IDS.lock().remove(&(id as usize));
    connect::hang_up(&shared);
    // SAFETY: our id's face, for the multicast groups' QP.
    let qp = unsafe { (*id).qp };
    crate::cm::mcast::leave_all(&shared, qp);
    let mut st = shared.st.lock();
    let ch = st.channel.clone();
    drop(ch.take_for(&shared));
    if let Some((fd, name)) = st.bound.take() {
        crate::cm::rendezvous::unbind(&fd, &name);
    }
    st.conn = None;
    let own = st.own_channel.take();
    drop(st);
    drop(own);
    *shared.face.lock() = 0;
    // SAFETY: made by Box::into_raw in publish, removed from IDS above.
    drop(unsafe { Box::from_raw(id.cast::<IdBox>()) });
    Ok(())
}
