//! Making a QP: `ibv_create_qp`, `ibv_create_qp_ex` (the plain part;
//! `ext::qp` adds send ops) and `ibv_open_qp` of an XRC receive QP, the
//! capacities granted and the QP registered.

use super::*;

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
        QPT_UD if fam.ud => {
            if let Some(e) = ctx.dev.profile().ud_qp_refused {
                return Err(e);
            }
        }
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
        gone: AtomicBool::new(false),
        sq_use: SqUse::default(),
        sent: Default::default(),
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
