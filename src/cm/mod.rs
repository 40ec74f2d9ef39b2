//! The connection manager's objects, as the program made them through
//! librdmacm: event channels, cm_ids (port space, state, the listener an
//! incoming id came from, its QP), events fetched and not yet acked (type,
//! where fetched), `rdma_getaddrinfo` lists and `rdma_get_devices` lists.
//! A side table keyed by address, as the verbs registry is: the pointers
//! the program gets are librdmacm's own. Connection setup is not a hot
//! path: one fork-safe lock over hash maps, never held across a forwarded
//! call. A leaf: the exports (`exports::cm`, with their diagnoses) fill
//! it, the exit report (`report::cm`) reads it.

use std::collections::{HashMap, HashSet};

use once_cell::sync::Lazy;

use std::sync::atomic::{AtomicBool, Ordering};

use crate::registry::lock::{mutex, ForkStep, Mutex};

/// An event channel (`rdma_create_event_channel`).
#[derive(Clone, Debug)]
pub struct Channel {
    pub fd: i32,
    pub site: usize,
    pub tid: i32,
    /// When it was made (seconds since the epoch).
    pub at: f64,
}

/// A cm_id: made by `rdma_create_id` / `rdma_create_ep` /
/// `rdma_get_request`, or arriving with a `CONNECT_REQUEST` event.
#[derive(Clone, Debug)]
pub struct Id {
    pub channel: usize,
    pub ps: u32,
    pub site: usize,
    pub tid: i32,
    /// The listener a connection request's id came from (0: none).
    pub listener: usize,
    /// The QP `rdma_create_qp` / `rdma_create_ep` made for it (0: none).
    pub qp: usize,
    /// The other verbs objects librdmacm made for it, and its PD.
    pub verbs: IdVerbs,
    /// The id's state as the shim last saw it (its last event, or call).
    pub state: &'static str,
    /// Reached ESTABLISHED (an event, or a synchronous connect/accept).
    pub connected: bool,
    /// The call (or event) that made it.
    pub via: &'static str,
    pub at: f64,
}

/// What an id's verbs fields held after the call that made its QP
/// (`rdma_cm_id`'s `pd`, `send_cq`, ...; 0: none). librdmacm sets the CQs,
/// their completion channels and the SRQ only when it made them itself
/// (the program gave none), and destroys them with the id's QP; the PD is
/// the QP's, whoever made it: memory that `rdma_reg_msgs` and its kin
/// register (inline `ibv_reg_mr` calls on `id->pd`) lives on it.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct IdVerbs {
    pub pd: usize,
    pub send_cq: usize,
    pub recv_cq: usize,
    pub send_cq_channel: usize,
    pub recv_cq_channel: usize,
    pub srq: usize,
}

impl IdVerbs {
    /// The objects librdmacm made, each with its role's name (the PD is
    /// not one of them).
    pub fn made(&self) -> [(&'static str, usize); 5] {
        [
            ("send_cq", self.send_cq),
            ("recv_cq", self.recv_cq),
            ("send_cq_channel", self.send_cq_channel),
            ("recv_cq_channel", self.recv_cq_channel),
            ("srq", self.srq),
        ]
    }
}

/// An event fetched by `rdma_get_cm_event` and not acked yet.
#[derive(Clone, Debug)]
pub struct Event {
    pub kind: u32,
    pub status: i32,
    /// The id the event counts against (`event->id`).
    pub id: usize,
    pub channel: usize,
    pub site: usize,
    pub tid: i32,
    pub at: f64,
}

/// A list the program must free: `rdma_getaddrinfo`'s or
/// `rdma_get_devices`'.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ListKind {
    AddrInfo,
    Devices,
}

#[derive(Clone, Debug)]
pub struct List {
    pub kind: ListKind,
    pub site: usize,
    pub tid: i32,
    pub at: f64,
}

/// A problem diagnosed at a call, kept for the exit report.
#[derive(Clone, Debug)]
pub struct Finding {
    pub what: &'static str,
    pub text: String,
}

#[derive(Default)]
pub(crate) struct State {
    pub channels: HashMap<usize, Channel>,
    pub ids: HashMap<usize, Id>,
    pub events: HashMap<usize, Event>,
    /// Events acked through the shim and not fetched again since (a
    /// second ack of one is a double ack).
    pub acked: HashSet<usize>,
    /// Ids whose QP `rdma_destroy_qp` destroyed (a second one is a double
    /// destroy).
    pub qp_destroyed: HashSet<usize>,
    pub lists: HashMap<usize, List>,
    pub findings: Vec<Finding>,
    /// Destroys under way that had unacked events (the watchdog's).
    pub blocked: Vec<Blocked>,
}

/// A destroy under way that had unacked events.
#[derive(Clone, Debug)]
pub struct Blocked {
    pub token: u64,
    pub call: &'static str,
    pub what: usize,
    pub tid: i32,
    pub since_ms: u64,
    /// When it was last said (0: not yet).
    pub said_ms: u64,
}

/// Is the watchdog thread of blocked destroys running?
pub static WATCHDOG: AtomicBool = AtomicBool::new(false);

pub(crate) static STATE: Lazy<Mutex<State>> = Lazy::new(|| mutex(State::default()));

/// Did the program make any connection-manager object?
pub(crate) static USED: AtomicBool = AtomicBool::new(false);

/// Runs `f` on the state (the lock held only for `f`).
pub(crate) fn with<R>(f: impl FnOnce(&mut State) -> R) -> R {
    let errno = crate::guard::Errno::save();
    let r = f(&mut STATE.lock());
    errno.restore();
    r
}

/// The fork handlers' step on the table's lock.
pub fn fork(step: ForkStep) {
    step.apply(&STATE);
    if matches!(step, ForkStep::Child) {
        // A forked child has no watchdog thread.
        WATCHDOG.store(false, Ordering::Relaxed);
    }
}

/// Forces the lazy table before the fork handlers are registered.
pub fn init() {
    Lazy::force(&STATE);
}

/// An event type's name, as `rdma_event_str` gives it.
pub fn event_name(kind: u32) -> &'static str {
    use rdmacm_abi::*;
    match kind {
        RDMA_CM_EVENT_ADDR_RESOLVED => "ADDR_RESOLVED",
        RDMA_CM_EVENT_ADDR_ERROR => "ADDR_ERROR",
        RDMA_CM_EVENT_ROUTE_RESOLVED => "ROUTE_RESOLVED",
        RDMA_CM_EVENT_ROUTE_ERROR => "ROUTE_ERROR",
        RDMA_CM_EVENT_CONNECT_REQUEST => "CONNECT_REQUEST",
        RDMA_CM_EVENT_CONNECT_RESPONSE => "CONNECT_RESPONSE",
        RDMA_CM_EVENT_CONNECT_ERROR => "CONNECT_ERROR",
        RDMA_CM_EVENT_UNREACHABLE => "UNREACHABLE",
        RDMA_CM_EVENT_REJECTED => "REJECTED",
        RDMA_CM_EVENT_ESTABLISHED => "ESTABLISHED",
        RDMA_CM_EVENT_DISCONNECTED => "DISCONNECTED",
        RDMA_CM_EVENT_DEVICE_REMOVAL => "DEVICE_REMOVAL",
        RDMA_CM_EVENT_MULTICAST_JOIN => "MULTICAST_JOIN",
        RDMA_CM_EVENT_MULTICAST_ERROR => "MULTICAST_ERROR",
        RDMA_CM_EVENT_ADDR_CHANGE => "ADDR_CHANGE",
        RDMA_CM_EVENT_TIMEWAIT_EXIT => "TIMEWAIT_EXIT",
        _ => "UNKNOWN",
    }
}

/// A port space's name.
pub fn port_space(ps: u32) -> &'static str {
    match ps {
        0x0002 => "IPOIB",
        0x0106 => "TCP",
        0x0111 => "UDP",
        0x013f => "IB",
        _ => "?",
    }
}

/// Now, in seconds since the epoch (a creation time for the report).
fn wall() -> f64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: clock_gettime writes the timespec it is given.
    unsafe { libc::clock_gettime(libc::CLOCK_REALTIME, &mut ts) };
    ts.tv_sec as f64 + (ts.tv_nsec / 1_000_000) as f64 / 1000.0
}

fn used() {
    USED.store(true, Ordering::Relaxed);
}

/// A channel was made.
pub fn channel_made(addr: usize, fd: i32, site: usize) {
    used();
    let tid = crate::thread::tid();
    let at = wall();
    with(|s| s.channels.insert(addr, Channel { fd, site, tid, at }));
}

/// An id was made at `site` (`via`: the call that made it).
pub fn id_made(
    addr: usize,
    channel: usize,
    ps: u32,
    qp: usize,
    verbs: IdVerbs,
    site: usize,
    via: &'static str,
) {
    used();
    let (tid, at) = (crate::thread::tid(), wall());
    with(|s| {
        s.qp_destroyed.remove(&addr);
        s.ids.insert(
            addr,
            Id {
                channel,
                ps,
                site,
                tid,
                listener: 0,
                qp,
                verbs,
                state: "IDLE",
                connected: false,
                via,
                at,
            },
        )
    });
}

/// A list was handed out.
pub fn list_made(addr: usize, kind: ListKind, site: usize) {
    used();
    let tid = crate::thread::tid();
    let at = wall();
    with(|s| {
        s.lists.insert(
            addr,
            List {
                kind,
                site,
                tid,
                at,
            },
        )
    });
}

/// A list was freed (unknown lists pass: made before the shim saw them).
pub fn list_freed(addr: usize) {
    with(|s| s.lists.remove(&addr));
}

/// Sets an id's state (`connected` when it reached ESTABLISHED).
pub fn set_state(id: usize, state: &'static str, connected: Option<bool>) {
    with(|s| {
        if let Some(i) = s.ids.get_mut(&id) {
            i.state = state;
            if let Some(c) = connected {
                i.connected = c;
            }
        }
    });
}

/// The QP an id now holds, and what was made with it (after
/// `rdma_create_qp`).
pub fn set_qp(id: usize, qp: usize, verbs: IdVerbs) {
    with(|s| {
        if let Some(i) = s.ids.get_mut(&id) {
            i.qp = qp;
            i.verbs = verbs;
        }
        s.qp_destroyed.remove(&id);
    });
}

/// `rdma_migrate_id` moved an id to another channel.
pub fn migrated(id: usize, channel: usize) {
    with(|s| {
        if let Some(i) = s.ids.get_mut(&id) {
            i.channel = channel;
        }
    });
}

/// An event was fetched at `site`: `event` (librdmacm's, just returned)
/// counts against `id`; a connection request's id is new, under its
/// listener.
pub fn event_fetched(event: usize, e: &rdmacm_abi::rdma_cm_event, channel: usize, site: usize) {
    used();
    let (tid, at) = (crate::thread::tid(), wall());
    let id = e.id as usize;
    let kind = e.event;
    with(|s| {
        s.acked.remove(&event);
        s.events.insert(
            event,
            Event {
                kind,
                status: e.status,
                id,
                channel,
                site,
                tid,
                at,
            },
        );
        let state = event_name(kind);
        if kind == rdmacm_abi::RDMA_CM_EVENT_CONNECT_REQUEST && !s.ids.contains_key(&id) {
            s.qp_destroyed.remove(&id);
            s.ids.insert(
                id,
                Id {
                    channel,
                    ps: 0,
                    site,
                    tid,
                    listener: e.listen_id as usize,
                    qp: 0,
                    verbs: IdVerbs::default(),
                    state,
                    connected: false,
                    via: "a CONNECT_REQUEST event",
                    at,
                },
            );
        } else if let Some(i) = s.ids.get_mut(&id) {
            i.state = state;
            match kind {
                rdmacm_abi::RDMA_CM_EVENT_ESTABLISHED => i.connected = true,
                rdmacm_abi::RDMA_CM_EVENT_DISCONNECTED => i.state = "DISCONNECTED",
                _ => {}
            }
        }
    });
}

/// The port space of a connection request's new id (read by the export).
pub fn set_port_space(id: usize, ps: u32) {
    with(|s| {
        if let Some(i) = s.ids.get_mut(&id) {
            i.ps = ps;
        }
    });
}
