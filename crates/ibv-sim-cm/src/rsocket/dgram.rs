//! Datagram rsockets (`SOCK_DGRAM`): an `RDMA_PS_UDP` id bound to the
//! socket's address and listening there, with a UD QP (qkey
//! `RDMA_UDP_QKEY`). A destination is resolved once, with a SIDR exchange
//! from a synchronous id of its own (the peer's socket answers with its
//! QP number), and kept as an address handle. Each datagram carries the
//! sender's bound address before the data, which `rrecvfrom` reports (the
//! sender listens there, so a reply reaches it). A socket that sends or
//! connects unbound is bound first to the route's source address, on a
//! port of its own. No receive buffer free: the datagram is dropped, as
//! UD drops it.

use core::ffi::{c_int, c_uint};
use std::collections::{HashMap, VecDeque};
use std::net::IpAddr;

use rdmacm_abi::*;
use verbs_abi::*;

use super::api::*;
use super::queues::{self, Completion, Queues};
use super::{Rs, St};
use crate::addr::Addr;
use crate::guard::errno;
use crate::verbs::*;

/// The sender's address in front of every datagram: family (4 or 6), 0,
/// port (big-endian), 16 bytes of address.
const HDR: usize = 20;
/// The GRH a UD receive starts with.
const GRH: usize = 40;
/// A buffer: the GRH, the header and up to 4096 bytes.
const SLOT: usize = GRH + HDR + 4096;
const NRECV: usize = 256;
const NSEND: usize = 64;
const WR_SEND: u32 = 2;
const SEND_SIGNALED: c_uint = 2;
const WC_RECV: u32 = 128;

type Key = (IpAddr, u16);

/// Where a destination's datagrams go.
struct Peer {
    ah: *mut ibv_ah,
    qpn: u32,
    qkey: u32,
}

pub struct Dgram {
    /// The buffers, the CQ and its channel, the id's QP.
    q: Queues,
    pd: *mut ibv_pd,
    /// Datagrams not yet read: (sender, data).
    inbox: VecDeque<(Addr, Vec<u8>)>,
    peers: HashMap<Key, Peer>,
    /// `rconnect`'s destination.
    pub dest: Option<Addr>,
    /// This socket's address, sent with each datagram.
    local: Addr,
    /// The largest datagram: the path MTU less the header.
    max: usize,
}

fn key(a: &Addr) -> Key {
    (a.canonical().ip, a.port)
}

fn header(a: &Addr) -> [u8; HDR] {
    let mut h = [0u8; HDR];
    h[2..4].copy_from_slice(&a.port.to_be_bytes());
    match a.canonical().ip {
        IpAddr::V4(v) => {
            h[0] = 4;
            h[4..8].copy_from_slice(&v.octets());
        }
        IpAddr::V6(v) => {
            h[0] = 6;
            h[4..20].copy_from_slice(&v.octets());
        }
    }
    h
}

fn from_header(h: &[u8]) -> Option<Addr> {
    let port = u16::from_be_bytes([h[2], h[3]]);
    let ip = match h[0] {
        4 => IpAddr::from(<[u8; 4]>::try_from(&h[4..8]).ok()?),
        6 => IpAddr::from(<[u8; 16]>::try_from(&h[4..20]).ok()?),
        _ => return None,
    };
    Some(Addr { ip, port, scope: 0 })
}

impl Dgram {
    /// The data path of a bound id: buffers, CQ and a UD QP made by
    /// `rdma_create_qp` (so it is at RTS with the UDP qkey), receives posted.
    fn new(id: *mut rdma_cm_id, local: Addr) -> Result<Box<Dgram>, c_int> {
        // SAFETY: a live id bound to a device.
        let (ctx, port) = unsafe { ((*id).verbs, (*id).port_num) };
        if ctx.is_null() {
            return Err(libc::EADDRNOTAVAIL);
        }
        let pd = crate::devices::by_context(ctx)
            .ok_or(libc::ENODEV)?
            .1
            .pd()?;
        let mut pa = core::mem::MaybeUninit::<ibv_port_attr>::zeroed();
        // SAFETY: our open context, a writable block.
        unsafe { ibv_query_port(ctx, port, pa.as_mut_ptr()) };
        // SAFETY: the enum field read as its integer (1..5 = 256..4096).
        let mtu = unsafe { (&raw const (*pa.as_ptr()).active_mtu).cast::<u32>().read() };
        let mtu = if (1..=5).contains(&mtu) {
            128 << mtu
        } else {
            1024
        };
        let mut d = Box::new(Dgram {
            // SAFETY: our open context and a PD of its device.
            q: unsafe { Queues::new(ctx, pd, SLOT, NRECV, NSEND)? },
            pd,
            inbox: VecDeque::new(),
            peers: HashMap::new(),
            dest: None,
            local,
            max: mtu - HDR,
        });
        let mut attr = d.q.qp_attr(QPT_UD, NSEND as u32);
        // SAFETY: a live id and valid attributes.
        if unsafe { rdma_create_qp(id, pd, &mut attr) } != 0 {
            return Err(errno());
        }
        // SAFETY: the QP just made.
        d.q.qp = unsafe { (*id).qp };
        d.q.post_all_recvs()?;
        Ok(d)
    }

    /// Takes every completion there is.
    fn poll(&mut self) {
        queues::drain(self, |d| &mut d.q, Dgram::completed);
    }

    fn completed(&mut self, c: &Completion) {
        let i = c.index();
        if !c.is_recv() {
            if i < NSEND {
                self.q.free_slots.push(i);
            }
            return;
        }
        if i >= NRECV {
            return;
        }
        if c.status == 0 && c.opcode == WC_RECV && (GRH + HDR..=SLOT).contains(&c.len) {
            let b = self.q.received(i, c.len);
            if let Some(from) = from_header(&b[GRH..GRH + HDR]) {
                self.inbox.push_back((from, b[GRH + HDR..].to_vec()));
            }
        }
        if c.status == 0 {
            let _ = self.q.post_recv(i);
        }
    }

    /// Posts one datagram to `to`: Ok(false) when no send buffer is free.
    fn post(&mut self, to: &Key, data: &[u8]) -> Result<bool, c_int> {
        if data.len() > self.max {
            return Err(libc::EMSGSIZE);
        }
        let peer = self.peers.get(to).ok_or(libc::EDESTADDRREQ)?;
        let (ah, qpn, qkey) = (peer.ah, peer.qpn, peer.qkey);
        let Some(slot) = self.q.free_slots.pop() else {
            return Ok(false);
        };
        let h = header(&self.local);
        let b = &mut self.q.send_buf[slot * SLOT..];
        b[..HDR].copy_from_slice(&h);
        b[HDR..HDR + data.len()].copy_from_slice(data);
        let mut sge = self.q.send_sge(slot, HDR + data.len());
        let mut wr = core::mem::MaybeUninit::<ibv_send_wr>::zeroed();
        let p = wr.as_mut_ptr();
        // SAFETY: fields of the zeroed request, the opcode as its integer.
        unsafe {
            (*p).wr_id = slot as u64;
            (*p).sg_list = &mut sge;
            (*p).num_sge = 1;
            (&raw mut (*p).opcode).cast::<u32>().write(WR_SEND);
            (*p).send_flags = SEND_SIGNALED;
            (*p).wr.ud.ah = ah;
            (*p).wr.ud.remote_qpn = qpn;
            (*p).wr.ud.remote_qkey = qkey;
        }
        // SAFETY: the request and its SGE outlive the call.
        let r = unsafe { self.q.post_send(p) };
        if r != 0 {
            self.q.free_slots.push(slot);
            return Err(r);
        }
        Ok(true)
    }
}

impl Drop for Dgram {
    fn drop(&mut self) {
        // The address handles first, then the queues (their own Drop).
        for (_, p) in self.peers.drain() {
            // SAFETY: an AH made for this socket, destroyed once.
            unsafe { ibv_destroy_ah(p.ah) };
        }
    }
}

/// A datagram socket's id: `RDMA_PS_UDP`.
pub const PS: u32 = RDMA_PS_UDP;

/// `rbind`: the id bound and listening (for the SIDR requests of the
/// senders), its QP made.
pub fn bind(rs: &mut Rs, addr: *const libc::sockaddr) -> Result<(), c_int> {
    if rs.st != St::Idle {
        return Err(libc::EINVAL);
    }
    // SAFETY: the caller's address.
    let a = unsafe { Addr::read(addr) }?;
    if a.is_any() {
        // The socket's address goes with every datagram for the replies:
        // it must name a device.
        return Err(libc::EADDRNOTAVAIL);
    }
    // SAFETY: the caller's address.
    if unsafe { rdma_bind_addr(rs.id, addr.cast_mut()) } != 0 {
        return Err(errno());
    }
    // SAFETY: the socket's live id.
    if unsafe { rdma_listen(rs.id, 128) } != 0 {
        return Err(errno());
    }
    // SAFETY: the id's bound address.
    let local = unsafe { Addr::read(&raw const (*rs.id).route.addr.src.addr) }?;
    rs.dgram = Some(Dgram::new(rs.id, local)?);
    rs.st = St::Bound;
    Ok(())
}

/// Resolves `to` (once): a SIDR exchange from a synchronous id, which
/// binds this socket first if it is not.
fn resolve(rs: &mut Rs, to: &Addr) -> Result<Key, c_int> {
    let k = key(to);
    if rs.dgram.as_ref().is_some_and(|d| d.peers.contains_key(&k)) {
        return Ok(k);
    }
    let mut id: *mut rdma_cm_id = core::ptr::null_mut();
    // SAFETY: an out pointer; a synchronous id (NULL channel).
    if unsafe { rdma_create_id(core::ptr::null_mut(), &mut id, core::ptr::null_mut(), PS) } != 0 {
        return Err(errno());
    }
    let r = sidr(rs, id, to);
    // SAFETY: the id made above (its last event is acknowledged with it).
    unsafe { rdma_destroy_id(id) };
    let p = r?;
    rs.dgram.as_mut().ok_or(libc::EINVAL)?.peers.insert(k, p);
    Ok(k)
}

fn sidr(rs: &mut Rs, id: *mut rdma_cm_id, to: &Addr) -> Result<Peer, c_int> {
    let mut dst = to.storage();
    // SAFETY: a live synchronous id; our address (each call waits for its event).
    unsafe {
        if rdma_resolve_addr(id, core::ptr::null_mut(), (&raw mut dst).cast(), 2000) != 0
            || rdma_resolve_route(id, 2000) != 0
        {
            return Err(errno());
        }
    }
    if rs.st == St::Idle {
        // SAFETY: the route's source address.
        let src = unsafe { Addr::read(&raw const (*id).route.addr.src.addr) }?;
        let mut any_port = src.with_port(0).storage();
        bind(rs, (&raw mut any_port).cast())?;
    }
    let d = rs.dgram.as_ref().ok_or(libc::EINVAL)?;
    // SAFETY: our QP.
    let mut param = sidr_param(unsafe { (*d.q.qp).qp_num });
    // SAFETY: a live synchronous id; its event is in `id->event` after.
    if unsafe { rdma_connect(id, &mut param) } != 0 {
        return Err(match errno() {
            libc::ECONNREFUSED | libc::ETIMEDOUT => libc::ECONNREFUSED,
            e => e,
        });
    }
    // SAFETY: the ESTABLISHED event the connect waited for.
    let ud = unsafe {
        let ev = (*id).event;
        if ev.is_null() || (*ev).event != RDMA_CM_EVENT_ESTABLISHED {
            return Err(libc::ECONNREFUSED);
        }
        (*ev).param.ud
    };
    let mut ah_attr = ud.ah_attr;
    // SAFETY: our PD, the address vector the peer's answer gave.
    let ah = unsafe { ibv_create_ah(d.pd, &mut ah_attr) };
    if ah.is_null() {
        return Err(errno().max(libc::ENOMEM));
    }
    Ok(Peer {
        ah,
        qpn: ud.qp_num,
        qkey: ud.qkey,
    })
}

/// The parameters of a SIDR request or answer: only the socket's QP
/// number.
fn sidr_param(qp_num: u32) -> rdma_conn_param {
    rdma_conn_param {
        private_data: core::ptr::null(),
        private_data_len: 0,
        responder_resources: 0,
        initiator_depth: 0,
        flow_control: 0,
        retry_count: 0,
        rnr_retry_count: 0,
        srq: 0,
        qp_num,
    }
}

/// `rconnect`: the default destination of `rsend`.
pub fn connect(rs: &mut Rs, addr: *const libc::sockaddr) -> Result<(), c_int> {
    // SAFETY: the caller's address.
    let to = unsafe { Addr::read(addr) }?;
    resolve(rs, &to)?;
    rs.dgram.as_mut().ok_or(libc::EINVAL)?.dest = Some(to);
    // SAFETY: the id's face, the peer's address for rgetpeername.
    unsafe { (*rs.id).route.addr.dst.storage = to.storage() };
    Ok(())
}

/// Answers the SIDR requests queued on the socket's id with its QP.
pub fn progress(rs: &mut Rs) {
    while let Some((kind, _, id)) = super::conn::next_event(rs.ch) {
        if kind != RDMA_CM_EVENT_CONNECT_REQUEST || id == rs.id {
            continue;
        }
        let qpn = rs.dgram.as_ref().map_or(0, |d| {
            // SAFETY: our QP.
            unsafe { (*d.q.qp).qp_num }
        });
        let mut param = sidr_param(qpn);
        // SAFETY: the request's new id, answered then destroyed.
        unsafe {
            if qpn == 0 {
                rdma_reject(id, core::ptr::null(), 0);
            } else {
                rdma_accept(id, &mut param);
            }
            rdma_destroy_id(id);
        }
    }
    if let Some(d) = rs.dgram.as_mut() {
        d.poll();
    }
}

pub fn wake_fds(rs: &mut Rs, v: &mut Vec<c_int>) {
    if let Some(d) = rs.dgram.as_mut() {
        d.q.arm();
        v.push(d.q.fd());
    }
}

pub fn revents(rs: &Rs) -> i16 {
    let Some(d) = rs.dgram.as_ref() else {
        return libc::POLLOUT;
    };
    let mut r = 0;
    if !d.inbox.is_empty() {
        r |= libc::POLLIN;
    }
    if !d.q.free_slots.is_empty() {
        r |= libc::POLLOUT;
    }
    r
}

/// `rsendto` (`to` None: `rconnect`'s destination).
pub fn send_to(
    cell: &parking_lot::Mutex<Rs>,
    buf: &[u8],
    flags: c_int,
    to: Option<Addr>,
) -> Result<usize, c_int> {
    loop {
        let mut rs = cell.lock();
        let to = match to.or_else(|| rs.dgram.as_ref().and_then(|d| d.dest)) {
            Some(a) => a,
            None => return Err(libc::EDESTADDRREQ),
        };
        let k = resolve(&mut rs, &to)?;
        rs.progress();
        let nonblock = rs.nonblock || flags & libc::MSG_DONTWAIT != 0;
        if rs.dgram.as_mut().ok_or(libc::EINVAL)?.post(&k, buf)? {
            return Ok(buf.len());
        }
        if nonblock {
            return Err(libc::EAGAIN);
        }
        drop(rs);
        super::wait(cell);
    }
}

/// `rrecvfrom`: one datagram (the rest of a longer one is dropped, as
/// `recvfrom(2)` does); its sender into `from`.
pub fn recv_from(
    cell: &parking_lot::Mutex<Rs>,
    buf: &mut [u8],
    flags: c_int,
    from: &mut Option<Addr>,
) -> Result<usize, c_int> {
    loop {
        let mut rs = cell.lock();
        if rs.dgram.is_none() {
            return Err(libc::EINVAL);
        }
        rs.progress();
        let nonblock = rs.nonblock || flags & libc::MSG_DONTWAIT != 0;
        let d = rs.dgram.as_mut().ok_or(libc::EINVAL)?;
        if let Some((a, data)) = d.inbox.pop_front() {
            let n = data.len().min(buf.len());
            buf[..n].copy_from_slice(&data[..n]);
            *from = Some(a);
            return Ok(n);
        }
        if nonblock {
            return Err(libc::EAGAIN);
        }
        drop(rs);
        super::wait(cell);
    }
}
