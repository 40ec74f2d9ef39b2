//! Raw events into the program's `rdma_cm_event`s, on the program's
//! thread in `rdma_get_cm_event`, doing what librdmacm does on the way: a
//! new id for each request, the QP's RTR/RTS and the RTU on a reply, the
//! DREP to a crossing DREQ, the time-wait after a disconnection.

use core::ffi::c_int;
use std::sync::Arc;

use rdmacm_abi::*;

use super::connect::{self, delivered_len, TIME_WAIT};
use super::{Phase, Raw, Shared};
use crate::addr::{self, Addr};
use crate::cm::event::{self, EventBox};
use crate::cm::rendezvous::{engine, wire, wire::Msg};
use crate::verbs::QPT_UD;

/// The event `raw` makes for `to`, if any (one for an id already gone, or
/// a message its phase does not expect, makes none).
pub fn process(to: Arc<Shared>, raw: Raw) -> Option<Box<EventBox>> {
    let id = to.face_ptr();
    if id.is_null() {
        return None;
    }
    match raw {
        Raw::Plain(kind, status) => Some(event::new(to, id, kind, status)),
        Raw::Join(ud) => {
            let mut ev = event::new(to, id, RDMA_CM_EVENT_MULTICAST_JOIN, 0);
            ev.face.param.ud = ud.0;
            Some(ev)
        }
        Raw::Request(new, m) => request(to, id, new, m),
        Raw::Msg(m) => message(to, id, m),
        Raw::Eof => eof(to, id),
        Raw::ReqTimeout => {
            let mut st = to.st.lock();
            if st.phase != Phase::Connecting {
                return None;
            }
            st.phase = Phase::Closed;
            let fd = st.conn.take();
            drop(st);
            if let Some(fd) = fd {
                connect::shutdown(&fd);
            }
            Some(event::new(
                to,
                id,
                RDMA_CM_EVENT_UNREACHABLE,
                -libc::ETIMEDOUT,
            ))
        }
        Raw::DreqTimeout => {
            let mut st = to.st.lock();
            if st.phase != Phase::DisconnectSent {
                return None;
            }
            st.phase = Phase::Closed;
            drop(st);
            engine::later(&to, TIME_WAIT, Raw::Plain(RDMA_CM_EVENT_TIMEWAIT_EXIT, 0));
            Some(event::new(to, id, RDMA_CM_EVENT_DISCONNECTED, 0))
        }
    }
}

fn conn_param(ev: &mut EventBox, m: &Msg, ps: u32) {
    ev.set_private(&m.private_data, delivered_len(ps, m.kind), false);
    // SAFETY: writing the conn view of the union.
    let c = unsafe { &mut ev.face.param.conn };
    // What the peer offers, seen from here: its initiator depth is our
    // responder resources, and the other way round.
    c.responder_resources = m.initiator_depth;
    c.initiator_depth = m.responder_resources;
    c.flow_control = m.flow_control;
    c.retry_count = m.retry_count;
    c.rnr_retry_count = m.rnr_retry_count;
    c.srq = m.srq;
    c.qp_num = m.qpn;
}

fn ud_param(ev: &mut EventBox, m: &Msg, ps: u32, local: &addr::Local) {
    ev.set_private(&m.private_data, delivered_len(ps, m.kind), true);
    // SAFETY: writing the ud view of the union.
    let u = unsafe { &mut ev.face.param.ud };
    u.ah_attr = crate::cm::qp::ah_to(local, m.lid, &m.gid, 0);
    u.qp_num = m.qpn;
    u.qkey = m.qkey;
}

fn request(
    listener: Arc<Shared>,
    lid: *mut rdma_cm_id,
    new: Arc<Shared>,
    m: Box<Msg>,
) -> Option<Box<EventBox>> {
    let src = Addr::from_bytes(&m.src)?;
    let dst = Addr::from_bytes(&m.dst)?;
    let lst = listener.st.lock();
    let local = addr::resolve(dst.ip).or(lst.local)?;
    let sync = lst.sync;
    let lch = lst.channel.clone();
    drop(lst);
    // SAFETY: the listener's live face.
    let (lface_ch, lctx) = unsafe { ((*lid).channel, (*lid).context) };
    let mut face_ch = lface_ch;
    {
        let mut st = new.st.lock();
        st.local = Some(local);
        st.responder_resources = m.initiator_depth;
        st.initiator_depth = m.responder_resources;
        st.retry_count = m.retry_count;
        st.rnr_retry_count = m.rnr_retry_count;
        if m.has_ece != 0 {
            st.remote_ece = (m.ece_vendor, m.ece_options);
        }
        st.remote = Some(m.clone());
        if sync {
            // A synchronous listener's requests get ids of their own channel.
            if let Ok(b) = crate::cm::channel::new_channel() {
                st.channel = b.inner.clone();
                face_ch = (&raw const b.face).cast_mut();
                st.own_channel = Some(b);
            }
        }
    }
    let moved = lch.take_for(&new);
    let face = super::publish(new.clone(), face_ch, lctx);
    if sync {
        for r in moved {
            new.deliver(r);
        }
    } else {
        for r in moved {
            lch.push(new.clone(), r);
        }
    }
    // SAFETY: the new id's face, ours alone until the event is handed out.
    unsafe {
        (*face).route.addr.src.storage = dst.storage();
        (*face).route.addr.dst.storage = src.storage();
        (*face).verbs = local.device().context();
        (*face).pd = local.device().pd().unwrap_or(core::ptr::null_mut());
        (*face).port_num = local.port;
        (*face).route.addr.addr.ibaddr.sgid.raw = local.gid;
        (*face).route.addr.addr.ibaddr.dgid.raw = m.gid;
        (*face).route.addr.addr.ibaddr.pkey = 0xffffu16.to_be();
    }
    let ps = new.st.lock().ps;
    let mut ev = event::new(listener, face, RDMA_CM_EVENT_CONNECT_REQUEST, 0);
    ev.face.listen_id = lid;
    if m.kind == wire::SIDR_REQ {
        ud_param(&mut ev, &m, ps, &local);
    } else {
        conn_param(&mut ev, &m, ps);
    }
    Some(ev)
}

fn message(to: Arc<Shared>, id: *mut rdma_cm_id, m: Box<Msg>) -> Option<Box<EventBox>> {
    let mut st = to.st.lock();
    let ps = st.ps;
    match (m.kind, st.phase) {
        (wire::REP, Phase::Connecting) => {
            st.responder_resources = m.initiator_depth;
            st.initiator_depth = m.responder_resources;
            if m.has_ece != 0 {
                st.remote_ece = (m.ece_vendor, m.ece_options);
            }
            st.remote = Some(m.clone());
            // SAFETY: the live id face.
            let qp = unsafe { (*id).qp };
            if qp.is_null() {
                st.phase = Phase::Replied;
                drop(st);
                let mut ev = event::new(to, id, RDMA_CM_EVENT_CONNECT_RESPONSE, 0);
                conn_param(&mut ev, &m, ps);
                return Some(ev);
            }
            let fd = st.conn.clone();
            match crate::cm::qp::connect_qp(&st, qp) {
                Ok(()) => {
                    st.phase = Phase::Connected;
                    drop(st);
                    if let Some(fd) = fd {
                        let _ = Msg::new(wire::RTU).send(&*fd);
                    }
                    let mut ev = event::new(to, id, RDMA_CM_EVENT_ESTABLISHED, 0);
                    conn_param(&mut ev, &m, ps);
                    Some(ev)
                }
                Err(e) => {
                    st.phase = Phase::Closed;
                    drop(st);
                    if let Some(fd) = fd {
                        let mut r = Msg::new(wire::REJ);
                        r.status = IB_CM_REJ_CONSUMER_DEFINED;
                        let _ = r.send(&*fd);
                    }
                    Some(event::new(to, id, RDMA_CM_EVENT_CONNECT_ERROR, -e))
                }
            }
        }
        (wire::RTU, Phase::Accepted) => {
            st.phase = Phase::Connected;
            drop(st);
            Some(event::new(to, id, RDMA_CM_EVENT_ESTABLISHED, 0))
        }
        (wire::REJ, Phase::Connecting | Phase::Accepted | Phase::Replied | Phase::Closed) => {
            st.phase = Phase::Closed;
            drop(st);
            let mut ev = event::new(to, id, RDMA_CM_EVENT_REJECTED, m.status);
            ev.set_private(&m.private_data, delivered_len(ps, wire::REJ), false);
            Some(ev)
        }
        (wire::DREQ, Phase::Connected | Phase::Accepted | Phase::Replied) => {
            st.phase = Phase::DreqReceived;
            drop(st);
            Some(event::new(to, id, RDMA_CM_EVENT_DISCONNECTED, 0))
        }
        (wire::DREQ, Phase::DisconnectSent) | (wire::DREP, Phase::DisconnectSent) => {
            st.phase = Phase::Closed;
            let fd = st.conn.clone();
            drop(st);
            if m.kind == wire::DREQ {
                if let Some(fd) = fd {
                    let _ = Msg::new(wire::DREP).send(&*fd);
                }
            }
            engine::later(&to, TIME_WAIT, Raw::Plain(RDMA_CM_EVENT_TIMEWAIT_EXIT, 0));
            Some(event::new(to, id, RDMA_CM_EVENT_DISCONNECTED, 0))
        }
        (wire::SIDR_REP, Phase::Connecting | Phase::Closed) => {
            st.phase = Phase::Closed;
            let local = st.local?;
            drop(st);
            if m.status == wire::SIDR_SUCCESS {
                let mut ev = event::new(to, id, RDMA_CM_EVENT_ESTABLISHED, 0);
                ud_param(&mut ev, &m, ps, &local);
                Some(ev)
            } else {
                Some(event::new(to, id, RDMA_CM_EVENT_UNREACHABLE, m.status))
            }
        }
        _ => None,
    }
}

fn eof(to: Arc<Shared>, id: *mut rdma_cm_id) -> Option<Box<EventBox>> {
    let mut st = to.st.lock();
    let (kind, status) = match st.phase {
        // The listener's process died holding the request: its kernel's CM
        // would reject it as the id is destroyed.
        Phase::Connecting if st.qp_type != QPT_UD => {
            (RDMA_CM_EVENT_REJECTED, IB_CM_REJ_CONSUMER_DEFINED)
        }
        Phase::Accepted => (RDMA_CM_EVENT_CONNECT_ERROR, -libc::ETIMEDOUT),
        Phase::Connected | Phase::Replied | Phase::DisconnectSent => {
            engine::later(&to, TIME_WAIT, Raw::Plain(RDMA_CM_EVENT_TIMEWAIT_EXIT, 0));
            (RDMA_CM_EVENT_DISCONNECTED, 0)
        }
        _ => return None,
    };
    st.phase = if kind == RDMA_CM_EVENT_DISCONNECTED {
        Phase::DreqReceived
    } else {
        Phase::Closed
    };
    drop(st);
    Some(event::new(to, id, kind, status))
}

/// `rdma_get_cm_event` on `ch`.
pub fn get_event(ch: &crate::cm::channel::Channel) -> Result<*mut rdma_cm_event, c_int> {
    loop {
        let (to, raw) = ch.pop()?;
        if let Some(ev) = process(to, raw) {
            return Ok(event::hand_out(ev));
        }
    }
}

/// A synchronous id's wait: acknowledges its previous event, takes the next
/// from its private channel into `id->event`, and fails as librdmacm does
/// for a bad status (`ECONNREFUSED` for a rejection).
pub fn complete(sh: &Arc<Shared>, id: *mut rdma_cm_id) -> Result<(), c_int> {
    let st = sh.st.lock();
    if !st.sync {
        return Ok(());
    }
    let ch = st.channel.clone();
    drop(st);
    // SAFETY: the live id face.
    let prev = unsafe { (*id).event };
    if !prev.is_null() {
        let _ = event::ack(prev);
        // SAFETY: as above.
        unsafe { (*id).event = core::ptr::null_mut() };
    }
    let ev = get_event(&ch)?;
    // SAFETY: as above; the event was just handed out.
    unsafe { (*id).event = ev };
    // SAFETY: a live event.
    let (kind, status) = unsafe { ((*ev).event, (*ev).status) };
    if status == 0 {
        return Ok(());
    }
    Err(if kind == RDMA_CM_EVENT_REJECTED {
        libc::ECONNREFUSED
    } else if status < 0 {
        -status
    } else {
        status
    })
}
