//! The calls that move an id through its life: bind, resolve, listen,
//! connect, accept, reject, establish, disconnect, and the hang-up of a
//! destroyed id. Each sends what the IB CM would and queues what the
//! kernel would; the peer's answers come back through the engine.

use core::ffi::c_int;
use std::sync::Arc;
use std::time::Duration;

use rdmacm_abi::*;

use super::{Phase, Raw, Shared};
use crate::addr::{self, Addr};
use crate::cm::rendezvous::{self, engine, wire, wire::Msg};
use crate::verbs::QPT_UD;

/// How long after a disconnection its time-wait ends (`TIMEWAIT_EXIT`).
pub const TIME_WAIT: Duration = Duration::from_millis(500);
/// How long a REQ waits for its reply before UNREACHABLE: the kernel's CM
/// response timeout with its retries, about a minute; `IBV_SIM_CM_TIMEOUT_MS`
/// sets another.
fn req_timeout() -> Duration {
    let ms = std::env::var("IBV_SIM_CM_TIMEOUT_MS")
        .ok()
        .and_then(|v| v.parse::<u64>().ok())
        .unwrap_or(60_000);
    Duration::from_millis(ms)
}

/// How long a DREQ waits for the peer's DREP before the id counts as
/// disconnected anyway (the IB CM's DREQ timeout).
pub const DREQ_TIMEOUT: Duration = Duration::from_secs(2);

pub fn set_route_addrs(id: *mut rdma_cm_id, src: Option<Addr>, dst: Option<Addr>) {
    // SAFETY: the caller's live id face (program thread).
    let f = unsafe { &mut *id };
    if let Some(s) = src {
        f.route.addr.src.storage = s.storage();
    }
    if let Some(d) = dst {
        f.route.addr.dst.storage = d.storage();
    }
}

pub fn set_local(id: *mut rdma_cm_id, l: &addr::Local) {
    // SAFETY: the caller's live id face.
    let f = unsafe { &mut *id };
    let ctx = l.device().context();
    if f.verbs != ctx || f.pd.is_null() {
        // As librdmacm binds an id to a device: `id->pd` is the device's
        // own PD (UCX makes its QPs on it).
        f.pd = l.device().pd().unwrap_or(core::ptr::null_mut());
    }
    f.verbs = ctx;
    f.port_num = l.port;
    f.route.addr.addr.ibaddr.sgid.raw = l.gid;
    f.route.addr.addr.ibaddr.pkey = 0xffffu16.to_be();
}

/// The id's source address as the program sees it.
pub fn src_of(id: *mut rdma_cm_id) -> Option<Addr> {
    // SAFETY: the caller's live id face; the storage is 128 bytes.
    unsafe { Addr::read((&raw const (*id).route.addr.src.addr).cast()) }.ok()
}

/// The id's destination address.
pub fn dst_of(id: *mut rdma_cm_id) -> Option<Addr> {
    // SAFETY: as above.
    unsafe { Addr::read((&raw const (*id).route.addr.dst.addr).cast()) }.ok()
}

/// `rdma_bind_addr`.
pub fn bind(sh: &Arc<Shared>, id: *mut rdma_cm_id, a: Addr) -> Result<(), c_int> {
    let a = a.canonical();
    let mut st = sh.st.lock();
    if st.phase != Phase::Idle {
        return Err(libc::EINVAL);
    }
    let local = if a.is_any() {
        None
    } else {
        Some(addr::resolve(a.ip).ok_or(libc::EADDRNOTAVAIL)?)
    };
    let (fd, name, bound) = rendezvous::bind(st.ps, a)?;
    st.bound = Some((fd, name));
    st.phase = Phase::Bound;
    st.local = local;
    drop(st);
    set_route_addrs(id, Some(bound), None);
    if let Some(l) = local {
        set_local(id, &l);
    }
    Ok(())
}

/// `rdma_resolve_addr`: ADDR_RESOLVED at once for an address the rule
/// maps to a port, ADDR_ERROR (`-ETIMEDOUT`, like an unanswered ARP) after
/// `timeout_ms` for any other.
pub fn resolve_addr(
    sh: &Arc<Shared>,
    id: *mut rdma_cm_id,
    src: Option<Addr>,
    dst: Addr,
    timeout_ms: c_int,
) -> Result<(), c_int> {
    let dst = dst.canonical();
    let phase = sh.st.lock().phase;
    if !matches!(phase, Phase::Idle | Phase::Bound | Phase::AddrResolved) {
        return Err(libc::EINVAL);
    }
    if phase == Phase::Idle {
        if let Some(s) = src {
            bind(sh, id, s)?;
        }
    }
    let Some(local) = addr::resolve(dst.ip) else {
        // As the kernel: no route to the address fails at once; a routed
        // one no device answers for times out (an unanswered ARP).
        if let Some(e) = unroutable(&dst) {
            return Err(e);
        }
        engine::later(
            sh,
            Duration::from_millis(timeout_ms.max(0) as u64),
            Raw::Plain(RDMA_CM_EVENT_ADDR_ERROR, -libc::ETIMEDOUT),
        );
        return Ok(());
    };
    let mut st = sh.st.lock();
    if let Some(l) = st.local {
        if l.dev != local.dev || l.port != local.port {
            return Err(libc::EINVAL);
        }
    }
    st.local = Some(local);
    st.phase = Phase::AddrResolved;
    drop(st);
    let src_now = src_of(id).filter(|s| !s.is_any() || s.port != 0);
    let src_addr = match src_now {
        Some(s) if !s.is_any() => s,
        Some(s) => loopback_or(dst).with_port(s.port),
        None => loopback_or(dst).with_port(32768 + (addr::random_u32() % 28000) as u16),
    };
    set_route_addrs(id, Some(src_addr), Some(dst));
    set_local(id, &local);
    // SAFETY: the live id face: the destination GID of the route (the same
    // port: every address the rule knows is on this machine).
    unsafe { (*id).route.addr.addr.ibaddr.dgid.raw = local.gid };
    sh.deliver(Raw::Plain(RDMA_CM_EVENT_ADDR_RESOLVED, 0));
    Ok(())
}

/// Whether the host has no route to `dst`: a UDP socket's `connect`
/// (which only looks the route up) fails with `ENETUNREACH` or
/// `EHOSTUNREACH`, the error the kernel's `rdma_resolve_addr` returns.
fn unroutable(dst: &Addr) -> Option<c_int> {
    let st = dst.with_port(dst.port.max(1)).storage();
    // SAFETY: plain system calls on a socket of our own, closed below.
    unsafe {
        let s = libc::socket(dst.family(), libc::SOCK_DGRAM | libc::SOCK_CLOEXEC, 0);
        if s < 0 {
            return None;
        }
        let r = libc::connect(s, (&raw const st).cast(), addr::len_of(dst.family()));
        let e = crate::guard::errno();
        libc::close(s);
        (r != 0 && (e == libc::ENETUNREACH || e == libc::EHOSTUNREACH)).then_some(e)
    }
}

/// The source address a connection to `dst` gets: `dst` itself, as every
/// address the rule resolves is this machine's.
fn loopback_or(dst: Addr) -> Addr {
    dst.with_port(0)
}

/// `rdma_resolve_route`: the path record of the resolved port.
pub fn resolve_route(sh: &Arc<Shared>, id: *mut rdma_cm_id) -> Result<(), c_int> {
    let mut st = sh.st.lock();
    if !matches!(st.phase, Phase::AddrResolved | Phase::RouteResolved) {
        return Err(libc::EINVAL);
    }
    let local = st.local.ok_or(libc::EINVAL)?;
    if st.path.is_none() {
        // SAFETY: all-zero is a valid path record.
        let mut p: Box<ibv_sa_path_rec> = Box::new(unsafe { core::mem::zeroed() });
        p.sgid = verbs_abi::ibv_gid { raw: local.gid };
        p.dgid = verbs_abi::ibv_gid { raw: local.gid };
        p.slid = local.lid.to_be();
        p.dlid = local.lid.to_be();
        p.pkey = 0xffffu16.to_be();
        p.hop_limit = if local.is_roce() { 64 } else { 0 };
        p.traffic_class = st.tos;
        p.reversible = 1;
        p.numb_path = 1;
        p.mtu_selector = 2;
        p.mtu = local.active_mtu as u8;
        p.rate_selector = 2;
        p.rate = 3;
        p.packet_life_time_selector = 2;
        p.packet_life_time = 18;
        st.path = Some(p);
    }
    let pr: *mut ibv_sa_path_rec = &mut **st.path.as_mut().unwrap();
    st.phase = Phase::RouteResolved;
    drop(st);
    // SAFETY: the live id face; the record lives as long as the id.
    unsafe {
        (*id).route.path_rec = pr;
        (*id).route.num_paths = 1;
    }
    sh.deliver(Raw::Plain(RDMA_CM_EVENT_ROUTE_RESOLVED, 0));
    Ok(())
}

/// `rdma_listen` (an unbound id is bound to the wildcard first).
pub fn listen(sh: &Arc<Shared>, id: *mut rdma_cm_id) -> Result<(), c_int> {
    if sh.st.lock().phase == Phase::Idle {
        bind(sh, id, Addr::any(libc::AF_INET))?;
    }
    let mut st = sh.st.lock();
    match st.phase {
        Phase::Bound => {}
        Phase::Listen => return Ok(()),
        _ => return Err(libc::EINVAL),
    }
    st.phase = Phase::Listen;
    let fd = st.bound.as_ref().ok_or(libc::EINVAL)?.0.clone();
    drop(st);
    engine::watch_listener(fd, sh);
    Ok(())
}

/// The private data limit of a message in the id's port space.
fn limit(ps: u32, kind: u32) -> usize {
    let ib = ps == RDMA_PS_IB;
    match kind {
        wire::REQ if ib => IB_REQ_PRIVATE_DATA,
        wire::REQ => TCP_CONNECT_PRIVATE_DATA,
        wire::REP => TCP_ACCEPT_PRIVATE_DATA,
        wire::REJ => IB_REJ_PRIVATE_DATA,
        wire::SIDR_REQ if ib => IB_SIDR_REQ_PRIVATE_DATA,
        wire::SIDR_REQ => UDP_CONNECT_PRIVATE_DATA,
        wire::SIDR_REP => UDP_ACCEPT_PRIVATE_DATA,
        _ => IB_DREQ_PRIVATE_DATA,
    }
}

/// What a message's receiver sees as the private data's length.
pub fn delivered_len(ps: u32, kind: u32) -> usize {
    limit(ps, kind)
}

fn fill_from_local(m: &mut Msg, l: &addr::Local) {
    m.lid = l.lid;
    m.port = l.port;
    m.link_layer = l.link_layer;
    m.gid = l.gid;
    m.mtu = l.active_mtu;
}

/// Checks the program's connection parameters against the device (as
/// librdmacm's `ucma_valid_param`) and copies them into `m`.
fn conn_params(
    m: &mut Msg,
    p: Option<&rdma_conn_param>,
    qp_num: Option<u32>,
    kind: u32,
    ps: u32,
) -> Result<(), c_int> {
    if let Some(p) = p {
        if usize::from(p.private_data_len) > limit(ps, kind) {
            return Err(libc::EINVAL);
        }
        m.responder_resources = p.responder_resources;
        m.initiator_depth = p.initiator_depth;
        m.flow_control = p.flow_control;
        m.retry_count = p.retry_count;
        m.rnr_retry_count = p.rnr_retry_count;
        m.srq = p.srq;
        // SAFETY: the program's private data of its stated length.
        unsafe { m.set_private(p.private_data.cast(), p.private_data_len) };
        if qp_num.is_none() {
            m.qpn = p.qp_num & 0x00ff_ffff;
        }
    }
    if let Some(n) = qp_num {
        m.qpn = n;
    }
    Ok(())
}

/// The device's RDMA read limits: `RDMA_MAX_RESP_RES` / `_INIT_DEPTH` mean
/// "the device's maximum"; more than it is `EINVAL`.
fn clamp_depths(m: &mut Msg, l: &addr::Local) -> Result<(), c_int> {
    let mut attr = core::mem::MaybeUninit::<verbs_abi::ibv_device_attr>::zeroed();
    // SAFETY: our open context, a writable block.
    unsafe { crate::verbs::ibv_query_device(l.device().context(), attr.as_mut_ptr()) };
    let p = attr.as_ptr();
    // SAFETY: int fields of the block the query filled.
    let (rd, init) = unsafe {
        (
            (&raw const (*p).max_qp_rd_atom).read(),
            (&raw const (*p).max_qp_init_rd_atom).read(),
        )
    };
    let (rd, init) = (rd.clamp(0, 255) as u8, init.clamp(0, 255) as u8);
    if m.responder_resources == RDMA_MAX_RESP_RES {
        m.responder_resources = rd;
    } else if m.responder_resources > rd {
        return Err(libc::EINVAL);
    }
    if m.initiator_depth == RDMA_MAX_INIT_DEPTH {
        m.initiator_depth = init;
    } else if m.initiator_depth > init {
        return Err(libc::EINVAL);
    }
    Ok(())
}

/// `rdma_connect`: the REQ (SIDR REQ for UD) to whoever listens at the
/// destination; REJECTED (reason 8) when nobody does.
pub fn connect(
    sh: &Arc<Shared>,
    id: *mut rdma_cm_id,
    p: Option<&rdma_conn_param>,
) -> Result<(), c_int> {
    let mut st = sh.st.lock();
    if st.phase != Phase::RouteResolved {
        return Err(libc::EINVAL);
    }
    let local = st.local.ok_or(libc::EINVAL)?;
    let ud = st.qp_type == QPT_UD;
    let kind = if ud { wire::SIDR_REQ } else { wire::REQ };
    let mut m = Msg::new(kind);
    m.retry_count = 7;
    m.rnr_retry_count = 7;
    // With no parameters librdmacm offers the device's maximum depths.
    m.responder_resources = RDMA_MAX_RESP_RES;
    m.initiator_depth = RDMA_MAX_INIT_DEPTH;
    // SAFETY: the live id face.
    let qp = unsafe { (*id).qp };
    // SAFETY: a QP made by rdma_create_qp.
    let qpn = (!qp.is_null()).then(|| unsafe { (*qp).qp_num });
    conn_params(&mut m, p, qpn, kind, st.ps)?;
    if !ud {
        clamp_depths(&mut m, &local)?;
    }
    fill_from_local(&mut m, &local);
    m.ps = st.ps;
    m.qp_type = st.qp_type;
    m.psn = st.psn;
    m.qkey = RDMA_UDP_QKEY;
    if let Some((v, o)) = st.local_ece {
        m.has_ece = 1;
        m.ece_vendor = v;
        m.ece_options = o;
    }
    let src = src_of(id).ok_or(libc::EINVAL)?;
    let dst = dst_of(id).ok_or(libc::EINVAL)?;
    m.src = src.bytes();
    m.dst = dst.bytes();
    st.responder_resources = m.responder_resources;
    st.initiator_depth = m.initiator_depth;
    st.retry_count = m.retry_count;
    st.rnr_retry_count = m.rnr_retry_count;
    let ps = st.ps;
    st.phase = Phase::Connecting;
    drop(st);
    match rendezvous::connect(ps, dst) {
        Ok(fd) => {
            let fd = Arc::new(fd);
            m.send(&*fd)?;
            sh.st.lock().conn = Some(fd.clone());
            engine::watch_conn(fd, sh);
            engine::later(sh, req_timeout(), Raw::ReqTimeout);
        }
        Err(libc::ENOENT) => {
            sh.st.lock().phase = Phase::Closed;
            let raw = if ud {
                let mut r = Msg::new(wire::SIDR_REP);
                r.status = wire::SIDR_UNSUPPORTED;
                Raw::Msg(r)
            } else {
                let mut r = Msg::new(wire::REJ);
                r.status = IB_CM_REJ_INVALID_SERVICE_ID;
                Raw::Msg(r)
            };
            sh.deliver(raw);
        }
        Err(e) => return Err(e),
    }
    Ok(())
}

/// `rdma_accept`: RTR/RTS of the id's QP with the requester's numbers,
/// then the REP (SIDR REP for UD).
pub fn accept(
    sh: &Arc<Shared>,
    id: *mut rdma_cm_id,
    p: Option<&rdma_conn_param>,
) -> Result<(), c_int> {
    if sh.st.lock().phase != Phase::Requested {
        return Err(libc::EINVAL);
    }
    let r = accept_requested(sh, id, p);
    if r.is_err() {
        // As the kernel's rdma_accept: a request it cannot accept is
        // rejected (consumer defined), and the id is done with.
        // SAFETY: no private data.
        let _ = unsafe { reject(sh, core::ptr::null(), 0, IB_CM_REJ_CONSUMER_DEFINED) };
    }
    r
}

fn accept_requested(
    sh: &Arc<Shared>,
    id: *mut rdma_cm_id,
    p: Option<&rdma_conn_param>,
) -> Result<(), c_int> {
    let mut st = sh.st.lock();
    if st.phase != Phase::Requested {
        return Err(libc::EINVAL);
    }
    let local = st.local.ok_or(libc::EINVAL)?;
    let ud = st.qp_type == QPT_UD;
    let kind = if ud { wire::SIDR_REP } else { wire::REP };
    let mut m = Msg::new(kind);
    // SAFETY: the live id face.
    let qp = unsafe { (*id).qp };
    // SAFETY: a QP made by rdma_create_qp.
    let qpn = (!qp.is_null()).then(|| unsafe { (*qp).qp_num });
    // librdmacm's defaults: what the requester offered.
    m.responder_resources = st.responder_resources;
    m.initiator_depth = st.initiator_depth;
    m.retry_count = st.retry_count;
    m.rnr_retry_count = st.rnr_retry_count;
    conn_params(&mut m, p, qpn, kind, st.ps)?;
    if !ud {
        clamp_depths(&mut m, &local)?;
        m.responder_resources = m.responder_resources.min(st.responder_resources);
        m.initiator_depth = m.initiator_depth.min(st.initiator_depth);
    }
    fill_from_local(&mut m, &local);
    m.ps = st.ps;
    m.qp_type = st.qp_type;
    m.psn = st.psn;
    m.qkey = RDMA_UDP_QKEY;
    m.status = wire::SIDR_SUCCESS;
    if let Some((v, o)) = st.local_ece {
        m.has_ece = 1;
        m.ece_vendor = v;
        m.ece_options = o;
    }
    st.responder_resources = m.responder_resources;
    st.initiator_depth = m.initiator_depth;
    if !qp.is_null() && !ud {
        crate::cm::qp::connect_qp(&st, qp)?;
    }
    let fd = st.conn.clone().ok_or(libc::EINVAL)?;
    st.phase = if ud { Phase::Closed } else { Phase::Accepted };
    drop(st);
    if m.send(&*fd).is_err() && !ud {
        sh.deliver(Raw::Plain(RDMA_CM_EVENT_CONNECT_ERROR, -libc::ETIMEDOUT));
    }
    Ok(())
}

/// `rdma_reject` (reason 28) and `rdma_reject_ece` (35).
///
/// # Safety
/// `data` is NULL or `len` readable bytes (the program's private data).
pub unsafe fn reject(
    sh: &Arc<Shared>,
    data: *const u8,
    len: u8,
    reason: c_int,
) -> Result<(), c_int> {
    let mut st = sh.st.lock();
    if st.phase != Phase::Requested {
        return Err(libc::EINVAL);
    }
    let ud = st.qp_type == QPT_UD;
    let kind = if ud { wire::SIDR_REP } else { wire::REJ };
    if usize::from(len) > limit(st.ps, kind) {
        return Err(libc::EINVAL);
    }
    let mut m = Msg::new(kind);
    m.status = if ud { wire::SIDR_REJECT } else { reason };
    // SAFETY: the program's private data of its stated length (this
    // function's contract).
    unsafe { m.set_private(data, len) };
    let fd = st.conn.take().ok_or(libc::EINVAL)?;
    st.phase = Phase::Closed;
    drop(st);
    let _ = m.send(&*fd);
    shutdown(&fd);
    Ok(())
}

/// `rdma_establish`: the RTU after a CONNECT_RESPONSE on an id with no QP.
pub fn establish(sh: &Arc<Shared>) -> Result<(), c_int> {
    let mut st = sh.st.lock();
    if st.phase != Phase::Replied {
        return Err(libc::EINVAL);
    }
    let fd = st.conn.clone().ok_or(libc::EINVAL)?;
    st.phase = Phase::Connected;
    drop(st);
    Msg::new(wire::RTU).send(&*fd)
}

/// `rdma_disconnect`: the QP to ERR, a DREQ (or the DREP to the peer's).
pub fn disconnect(sh: &Arc<Shared>, id: *mut rdma_cm_id) -> Result<(), c_int> {
    let mut st = sh.st.lock();
    let reply = match st.phase {
        Phase::Connected | Phase::Accepted | Phase::Replied => false,
        Phase::DreqReceived => true,
        _ => return Err(libc::EINVAL),
    };
    // SAFETY: the live id face.
    let qp = unsafe { (*id).qp };
    if !qp.is_null() {
        crate::cm::qp::to_error(qp);
    }
    let fd = st.conn.clone();
    st.phase = if reply {
        Phase::Closed
    } else {
        Phase::DisconnectSent
    };
    drop(st);
    if let Some(fd) = fd {
        let sent = Msg::new(if reply { wire::DREP } else { wire::DREQ }).send(&*fd);
        if reply {
            engine::later(sh, TIME_WAIT, Raw::Plain(RDMA_CM_EVENT_TIMEWAIT_EXIT, 0));
        } else if sent.is_err() {
            sh.deliver(Raw::Eof);
        } else {
            engine::later(sh, DREQ_TIMEOUT, Raw::DreqTimeout);
        }
    }
    Ok(())
}

pub fn shutdown(fd: &std::os::fd::OwnedFd) {
    use std::os::fd::AsRawFd;
    // SAFETY: our socket; the engine sees the end and drops it.
    unsafe { libc::shutdown(fd.as_raw_fd(), libc::SHUT_RDWR) };
}

/// A destroyed id's connection: a DREQ (or REJ) to a peer that still
/// counts on it, then the socket shut, which the peer's engine sees.
pub fn hang_up(sh: &Arc<Shared>) {
    let mut st = sh.st.lock();
    let Some(fd) = st.conn.take() else {
        return;
    };
    let msg = match st.phase {
        Phase::Connected | Phase::Accepted | Phase::Replied => Some(wire::DREQ),
        Phase::DreqReceived => Some(wire::DREP),
        Phase::Requested if st.qp_type != QPT_UD => Some(wire::REJ),
        _ => None,
    };
    st.phase = Phase::Closed;
    drop(st);
    if let Some(k) = msg {
        let mut m = Msg::new(k);
        m.status = IB_CM_REJ_CONSUMER_DEFINED;
        let _ = m.send(&*fd);
    }
    shutdown(&fd);
}
