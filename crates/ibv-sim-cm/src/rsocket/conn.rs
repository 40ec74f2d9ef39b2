//! An rsocket's connection, through this library's own connection manager:
//! a stream socket is an `RDMA_PS_TCP` id on an event channel of its own
//! (non-blocking, so `rpoll` can drive it), resolved, connected or
//! accepted, with an RC QP whose `rnr_retry` is 7.

use core::ffi::c_int;

use rdmacm_abi::*;

use super::api::*;
use super::data::Data;
use super::{Rs, St};
use crate::guard::errno;

/// The connection parameters both sides use.
fn params() -> rdma_conn_param {
    rdma_conn_param {
        private_data: core::ptr::null(),
        private_data_len: 0,
        responder_resources: 1,
        initiator_depth: 1,
        flow_control: 0,
        retry_count: 7,
        rnr_retry_count: 7,
        srq: 0,
        qp_num: 0,
    }
}

/// A new event channel whose fd does not block.
pub fn new_channel() -> Result<*mut rdma_event_channel, c_int> {
    // SAFETY: no arguments.
    let ch = unsafe { rdma_create_event_channel() };
    if ch.is_null() {
        return Err(errno());
    }
    // SAFETY: our channel's descriptor.
    unsafe {
        let fd = (*ch).fd;
        libc::fcntl(
            fd,
            libc::F_SETFL,
            libc::fcntl(fd, libc::F_GETFL) | libc::O_NONBLOCK,
        );
    }
    Ok(ch)
}

/// The next event on `ch`, acknowledged at once: (kind, status, id).
pub fn next_event(ch: *mut rdma_event_channel) -> Option<(u32, c_int, *mut rdma_cm_id)> {
    let mut ev: *mut rdma_cm_event = core::ptr::null_mut();
    // SAFETY: our channel, an out pointer.
    if unsafe { rdma_get_cm_event(ch, &mut ev) } != 0 {
        return None;
    }
    // SAFETY: the event just handed out, acknowledged below.
    let out = unsafe { ((*ev).event, (*ev).status, (*ev).id) };
    // SAFETY: the event handed out above, not used after.
    unsafe { rdma_ack_cm_event(ev) };
    Some(out)
}

/// The data path of `id`: buffers, CQ, QP (on librdmacm's own PD of the
/// device), receives posted.
pub fn make_data(id: *mut rdma_cm_id) -> Result<Box<Data>, c_int> {
    // SAFETY: a live id whose address is resolved.
    let ctx = unsafe { (*id).verbs };
    let pd = crate::devices::by_context(ctx)
        .ok_or(libc::ENODEV)?
        .1
        .pd()?;
    // SAFETY: a context and a PD of one device.
    let mut d = unsafe { Data::new(ctx, pd)? };
    let mut attr = d.qp_attr();
    // SAFETY: a live id and valid attributes.
    if unsafe { rdma_create_qp(id, pd, &mut attr) } != 0 {
        return Err(errno());
    }
    // SAFETY: the QP just made.
    d.q.qp = unsafe { (*id).qp };
    d.q.post_all_recvs()?;
    Ok(d)
}

/// Moves a connecting socket on by the events queued for it: address,
/// route, then the connection. Errors land in `rs.err` (`SO_ERROR`).
pub fn drive(rs: &mut Rs) {
    while let Some((kind, status, _)) = next_event(rs.ch) {
        match (rs.st, kind) {
            (St::Resolving, RDMA_CM_EVENT_ADDR_RESOLVED)
                // SAFETY: the socket's live id.
                if unsafe { rdma_resolve_route(rs.id, 2000) } != 0 =>
            {
                fail(rs, errno());
            }
            (St::Resolving, RDMA_CM_EVENT_ROUTE_RESOLVED) => match make_data(rs.id) {
                Ok(d) => {
                    rs.data = Some(d);
                    let mut p = params();
                    // SAFETY: a live id and valid parameters.
                    if unsafe { rdma_connect(rs.id, &mut p) } != 0 {
                        fail(rs, errno());
                    } else {
                        rs.st = St::Connecting;
                    }
                }
                Err(e) => fail(rs, e),
            },
            (St::Connecting, RDMA_CM_EVENT_ESTABLISHED) => rs.st = St::Connected,
            (St::Connected, RDMA_CM_EVENT_DISCONNECTED) => {
                rs.peer_gone = true;
                if let Some(d) = rs.data.as_mut() {
                    d.poll();
                    d.eof = true;
                }
            }
            (St::Resolving | St::Connecting, RDMA_CM_EVENT_REJECTED) => {
                fail(rs, libc::ECONNREFUSED)
            }
            (
                St::Resolving | St::Connecting,
                RDMA_CM_EVENT_ADDR_ERROR | RDMA_CM_EVENT_ROUTE_ERROR,
            ) => fail(rs, libc::EHOSTUNREACH),
            (
                St::Resolving | St::Connecting,
                RDMA_CM_EVENT_UNREACHABLE | RDMA_CM_EVENT_CONNECT_ERROR,
            ) => fail(rs, if status < 0 { -status } else { libc::ETIMEDOUT }),
            _ => {}
        }
    }
}

fn fail(rs: &mut Rs, e: c_int) {
    rs.err = e;
    rs.st = St::Closed;
}

/// A listener takes the requests queued for it, acknowledged, into its
/// backlog.
pub fn take_requests(rs: &mut Rs) {
    while let Some((kind, _, id)) = next_event(rs.ch) {
        if kind == RDMA_CM_EVENT_CONNECT_REQUEST {
            rs.backlog.push_back(id);
        }
    }
}

/// Accepts request `id` as a new connected socket: its own channel, QP
/// and receives, then `rdma_accept`, waiting for ESTABLISHED.
pub fn accept(id: *mut rdma_cm_id) -> Result<Rs, c_int> {
    let ch = new_channel()?;
    let mut rs = Rs::new(ch, id)?;
    // SAFETY: a request's live id and our new channel.
    if unsafe { rdma_migrate_id(id, ch) } != 0 {
        return Err(errno());
    }
    rs.data = Some(make_data(id)?);
    let mut p = params();
    // SAFETY: a live id and valid parameters.
    if unsafe { rdma_accept(id, &mut p) } != 0 {
        return Err(errno());
    }
    loop {
        match next_event(ch) {
            Some((RDMA_CM_EVENT_ESTABLISHED, _, _)) => break,
            Some((
                RDMA_CM_EVENT_REJECTED | RDMA_CM_EVENT_CONNECT_ERROR | RDMA_CM_EVENT_DISCONNECTED,
                _,
                _,
            )) => return Err(libc::ECONNABORTED),
            Some(_) => {}
            None => super::wait_fd(rs.ch_fd(), -1),
        }
    }
    rs.st = St::Connected;
    Ok(rs)
}
