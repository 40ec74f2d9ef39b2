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
const KIND_RECV: u64 = 1 << 32;
const WR_SEND: u32 = 2;
const SEND_SIGNALED: c_uint = 2;
const WC_RECV: u32 = 128;
const LOCAL_WRITE: c_int = 1;

type Key = (IpAddr, u16);

/// Where a destination's datagrams go.
struct Peer {
    ah: *mut ibv_ah,
    qpn: u32,
    qkey: u32,
}

pub struct Dgram {
    qp: *mut ibv_qp,
    cq: *mut ibv_cq,
    comp: *mut ibv_comp_channel,
    pd: *mut ibv_pd,
    recv_mr: *mut ibv_mr,
    send_mr: *mut ibv_mr,
    recv_buf: Vec<u8>,
    send_buf: Vec<u8>,
    free_slots: Vec<usize>,
    /// Datagrams not yet read: (sender, data).
    inbox: VecDeque<(Addr, Vec<u8>)>,
    peers: HashMap<Key, Peer>,
    /// `rconnect`'s destination.
    pub dest: Option<Addr>,
    /// This socket's address, sent with each datagram.
    local: Addr,
    /// The largest datagram: the path MTU less the header.
    max: usize,
    armed: bool,
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
            qp: core::ptr::null_mut(),
            cq: core::ptr::null_mut(),
            comp: core::ptr::null_mut(),
            pd,
            recv_mr: core::ptr::null_mut(),
            send_mr: core::ptr::null_mut(),
            recv_buf: vec![0u8; SLOT * NRECV],
            send_buf: vec![0u8; SLOT * NSEND],
            free_slots: (0..NSEND).collect(),
            inbox: VecDeque::new(),
            peers: HashMap::new(),
            dest: None,
            local,
            max: mtu - HDR,
            armed: false,
        });
        // SAFETY: our buffers, which live as long as `d` (deregistered in
        // Drop); our context.
        unsafe {
            d.recv_mr = ibv_reg_mr(
                pd,
                d.recv_buf.as_mut_ptr().cast(),
                d.recv_buf.len(),
                LOCAL_WRITE,
            );
            d.send_mr = ibv_reg_mr(
                pd,
                d.send_buf.as_mut_ptr().cast(),
                d.send_buf.len(),
                LOCAL_WRITE,
            );
            d.comp = ibv_create_comp_channel(ctx);
            if !d.comp.is_null() {
                let depth = (NRECV + NSEND + 4) as c_int;
                d.cq = ibv_create_cq(ctx, depth, core::ptr::null_mut(), d.comp, 0);
            }
        }
        if d.recv_mr.is_null() || d.send_mr.is_null() || d.cq.is_null() {
            return Err(errno().max(libc::ENOMEM));
        }
        // SAFETY: our channel's descriptor (rpoll polls it).
        unsafe {
            let fd = (*d.comp).fd;
            libc::fcntl(
                fd,
                libc::F_SETFL,
                libc::fcntl(fd, libc::F_GETFL) | libc::O_NONBLOCK,
            );
        }
        // SAFETY: zeroed is valid for every field but qp_type, written as
        // its integer.
        let mut a: core::mem::MaybeUninit<ibv_qp_init_attr> = core::mem::MaybeUninit::zeroed();
        let p = a.as_mut_ptr();
        // SAFETY: fields of the zeroed block.
        unsafe {
            (*p).send_cq = d.cq;
            (*p).recv_cq = d.cq;
            (*p).cap.max_send_wr = NSEND as u32;
            (*p).cap.max_recv_wr = NRECV as u32;
            (*p).cap.max_send_sge = 1;
            (*p).cap.max_recv_sge = 1;
            (&raw mut (*p).qp_type).cast::<u32>().write(QPT_UD);
        }
        // SAFETY: a live id and valid attributes.
        if unsafe { rdma_create_qp(id, pd, p) } != 0 {
            return Err(errno());
        }
        // SAFETY: the QP just made.
        d.qp = unsafe { (*id).qp };
        for i in 0..NRECV {
            d.post_recv(i)?;
        }
        Ok(d)
    }

    fn post_recv(&mut self, i: usize) -> Result<(), c_int> {
        let mut sge = ibv_sge {
            addr: self.recv_buf[i * SLOT..].as_ptr() as u64,
            length: SLOT as u32,
            // SAFETY: our MR.
            lkey: unsafe { (*self.recv_mr).lkey },
        };
        let mut wr = ibv_recv_wr {
            wr_id: KIND_RECV | i as u64,
            next: core::ptr::null_mut(),
            sg_list: &mut sge,
            num_sge: 1,
        };
        let mut bad: *mut ibv_recv_wr = core::ptr::null_mut();
        // SAFETY: the provider's op on our QP; `wr` and `sge` outlive the call.
        let r = unsafe {
            match (*(*self.qp).context).ops.post_recv {
                Some(f) => f(self.qp, &mut wr, &mut bad),
                None => libc::EOPNOTSUPP,
            }
        };
        if r != 0 {
            return Err(r);
        }
        Ok(())
    }

    /// Takes every completion there is.
    fn poll(&mut self) {
        let mut wc = [core::mem::MaybeUninit::<ibv_wc>::zeroed(); 16];
        loop {
            // SAFETY: the provider's op on our CQ, into 16 slots.
            let n = unsafe {
                match (*(*self.cq).context).ops.poll_cq {
                    Some(f) => f(self.cq, 16, wc.as_mut_ptr().cast()),
                    None => -1,
                }
            };
            if n <= 0 {
                return;
            }
            for w in &wc[..n as usize] {
                let p = w.as_ptr();
                // SAFETY: fields the provider filled, enum ones read as integers.
                let (id, status, opcode, len) = unsafe {
                    (
                        (*p).wr_id,
                        (&raw const (*p).status).cast::<u32>().read(),
                        (&raw const (*p).opcode).cast::<u32>().read(),
                        (*p).byte_len as usize,
                    )
                };
                let i = (id & 0xffff_ffff) as usize;
                if id & KIND_RECV == 0 {
                    if i < NSEND {
                        self.free_slots.push(i);
                    }
                    continue;
                }
                if i >= NRECV {
                    continue;
                }
                if status == 0 && opcode == WC_RECV && (GRH + HDR..=SLOT).contains(&len) {
                    let b = &self.recv_buf[i * SLOT..i * SLOT + len];
                    if let Some(from) = from_header(&b[GRH..GRH + HDR]) {
                        self.inbox.push_back((from, b[GRH + HDR..].to_vec()));
                    }
                }
                if status == 0 {
                    let _ = self.post_recv(i);
                }
            }
        }
    }

    fn arm(&mut self) {
        let mut cq: *mut ibv_cq = core::ptr::null_mut();
        let mut ctx: *mut core::ffi::c_void = core::ptr::null_mut();
        // SAFETY: our channel, non-blocking: takes what is there.
        while unsafe { ibv_get_cq_event(self.comp, &mut cq, &mut ctx) } == 0 {
            // SAFETY: the event's CQ is ours.
            unsafe { ibv_ack_cq_events(cq, 1) };
            self.armed = false;
        }
        if !self.armed {
            // SAFETY: the provider's op on our CQ.
            unsafe {
                if let Some(f) = (*(*self.cq).context).ops.req_notify_cq {
                    f(self.cq, 0);
                }
            }
            self.armed = true;
        }
    }

    /// Posts one datagram to `to`: Ok(false) when no send buffer is free.
    fn post(&mut self, to: &Key, data: &[u8]) -> Result<bool, c_int> {
        if data.len() > self.max {
            return Err(libc::EMSGSIZE);
        }
        let peer = self.peers.get(to).ok_or(libc::EDESTADDRREQ)?;
        let (ah, qpn, qkey) = (peer.ah, peer.qpn, peer.qkey);
        let Some(slot) = self.free_slots.pop() else {
            return Ok(false);
        };
        let h = header(&self.local);
        let b = &mut self.send_buf[slot * SLOT..];
        b[..HDR].copy_from_slice(&h);
        b[HDR..HDR + data.len()].copy_from_slice(data);
        let mut sge = ibv_sge {
            addr: b.as_ptr() as u64,
            length: (HDR + data.len()) as u32,
            // SAFETY: our MR.
            lkey: unsafe { (*self.send_mr).lkey },
        };
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
        let mut bad: *mut ibv_send_wr = core::ptr::null_mut();
        // SAFETY: the provider's op on our QP; the request and its SGE
        // outlive the call.
        let r = unsafe {
            match (*(*self.qp).context).ops.post_send {
                Some(f) => f(self.qp, p, &mut bad),
                None => libc::EOPNOTSUPP,
            }
        };
        if r != 0 {
            self.free_slots.push(slot);
            return Err(r);
        }
        Ok(true)
    }
}

impl Drop for Dgram {
    fn drop(&mut self) {
        // SAFETY: our own objects, each made once in `new` (the QP is the
        // id's, destroyed before this).
        unsafe {
            for (_, p) in self.peers.drain() {
                ibv_destroy_ah(p.ah);
            }
            if !self.recv_mr.is_null() {
                ibv_dereg_mr(self.recv_mr);
            }
            if !self.send_mr.is_null() {
                ibv_dereg_mr(self.send_mr);
            }
            if !self.cq.is_null() {
                ibv_destroy_cq(self.cq);
            }
            if !self.comp.is_null() {
                ibv_destroy_comp_channel(self.comp);
            }
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
    let mut param = rdma_conn_param {
        private_data: core::ptr::null(),
        private_data_len: 0,
        responder_resources: 0,
        initiator_depth: 0,
        flow_control: 0,
        retry_count: 0,
        rnr_retry_count: 0,
        srq: 0,
        // SAFETY: our QP.
        qp_num: unsafe { (*d.qp).qp_num },
    };
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
            unsafe { (*d.qp).qp_num }
        });
        let mut param = rdma_conn_param {
            private_data: core::ptr::null(),
            private_data_len: 0,
            responder_resources: 0,
            initiator_depth: 0,
            flow_control: 0,
            retry_count: 0,
            rnr_retry_count: 0,
            srq: 0,
            qp_num: qpn,
        };
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
        d.arm();
        // SAFETY: our completion channel.
        v.push(unsafe { (*d.comp).fd });
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
    if !d.free_slots.is_empty() {
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
