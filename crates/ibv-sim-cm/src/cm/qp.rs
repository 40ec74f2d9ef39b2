//! The QP of an id, driven as librdmacm drives it: made and moved to INIT
//! (UD to RTS) by `rdma_create_qp`, to RTR and RTS with the peer's numbers
//! when the connection is made, to ERR by `rdma_disconnect`; and
//! `rdma_init_qp_attr`'s attributes for each of those steps, the IB CM's.

use core::ffi::c_int;

use rdmacm_abi::*;
use verbs_abi::*;

use crate::cm::{Shared, State};
use crate::verbs::*;

/// The defaults librdmacm's CM uses for an RC QP.
const MIN_RNR_TIMER: u8 = 12;
const LOCAL_ACK_TIMEOUT: u8 = 14;
const HOP_LIMIT: u8 = 64;

fn qkey_of(st: &State) -> u32 {
    if st.ps == RDMA_PS_IB {
        st.remote.as_ref().map_or(RDMA_UDP_QKEY, |r| r.qkey)
    } else {
        RDMA_UDP_QKEY
    }
}

/// An `ibv_qp_attr` kept as bytes: its enum fields hold C's integers
/// (all-zero is no valid Rust `ibv_mtu`), so it is only written through
/// raw pointers and handed to C.
pub struct Attr(core::mem::MaybeUninit<ibv_qp_attr>);

macro_rules! set {
    ($a:expr, $($f:ident).+ = $v:expr) => {
        // SAFETY: writes one field of the zeroed block in place.
        unsafe { (&raw mut (*$a.0.as_mut_ptr()).$($f).+).write($v) }
    };
}

impl Attr {
    fn new() -> Attr {
        Attr(core::mem::MaybeUninit::zeroed())
    }

    pub fn as_mut_ptr(&mut self) -> *mut ibv_qp_attr {
        self.0.as_mut_ptr()
    }
}

/// The attributes for moving an id's QP to `state` (INIT, RTR or RTS), and
/// their mask; `EINVAL` for another state or an id not far enough along.
pub fn init_attr(st: &State, state: u32) -> Result<(Attr, c_int), c_int> {
    let local = st.local.ok_or(libc::EINVAL)?;
    let mut a = Attr::new();
    let ud = st.qp_type == QPT_UD;
    set_state(&mut a, state);
    let mut mask = QP_STATE;
    match state {
        QPS_INIT => {
            set!(a, pkey_index = 0);
            set!(a, port_num = local.port);
            mask |= QP_PKEY_INDEX | QP_PORT;
            if ud {
                set!(a, qkey = qkey_of(st));
                mask |= QP_QKEY;
            } else {
                set!(a, qp_access_flags = ACCESS_REMOTE_WRITE);
                if st.responder_resources > 0 {
                    set!(
                        a,
                        qp_access_flags =
                            ACCESS_REMOTE_WRITE | ACCESS_REMOTE_READ | ACCESS_REMOTE_ATOMIC
                    );
                }
                mask |= QP_ACCESS_FLAGS;
            }
        }
        QPS_RTR if ud => {}
        QPS_RTR => {
            let r = st.remote.as_ref().ok_or(libc::EINVAL)?;
            let mtu = local.active_mtu.min(r.mtu).max(1);
            // SAFETY: path_mtu is an int-sized enum field of the block.
            unsafe {
                (&raw mut (*a.as_mut_ptr()).path_mtu)
                    .cast::<u32>()
                    .write(mtu.min(5))
            };
            set!(a, dest_qp_num = r.qpn);
            set!(a, rq_psn = r.psn);
            set!(a, max_dest_rd_atomic = st.responder_resources);
            set!(a, min_rnr_timer = MIN_RNR_TIMER);
            set!(a, ah_attr = ah_to(&local, r.lid, &r.gid, st.tos));
            mask |= QP_AV
                | QP_PATH_MTU
                | QP_DEST_QPN
                | QP_RQ_PSN
                | QP_MAX_DEST_RD_ATOMIC
                | QP_MIN_RNR_TIMER;
        }
        QPS_RTS if ud => {
            set!(a, sq_psn = st.psn);
            mask |= QP_SQ_PSN;
        }
        QPS_RTS => {
            set!(a, sq_psn = st.psn);
            set!(a, timeout = st.ack_timeout.unwrap_or(LOCAL_ACK_TIMEOUT));
            set!(a, retry_cnt = st.retry_count.min(7));
            set!(a, rnr_retry = st.rnr_retry_count.min(7));
            set!(a, max_rd_atomic = st.initiator_depth);
            mask |= QP_SQ_PSN | QP_TIMEOUT | QP_RETRY_CNT | QP_RNR_RETRY | QP_MAX_QP_RD_ATOMIC;
        }
        _ => return Err(libc::EINVAL),
    }
    Ok((a, mask))
}

fn set_state(a: &mut Attr, state: u32) {
    // SAFETY: qp_state is an int-sized enum field of the block.
    unsafe {
        (&raw mut (*a.as_mut_ptr()).qp_state)
            .cast::<u32>()
            .write(state)
    };
}

/// An address vector from `local`'s port to (`lid`, `gid`).
pub fn ah_to(local: &crate::addr::Local, lid: u16, gid: &[u8; 16], tos: u8) -> ibv_ah_attr {
    // SAFETY: all-zero is a valid ibv_ah_attr.
    let mut ah: ibv_ah_attr = unsafe { core::mem::zeroed() };
    ah.dlid = lid;
    ah.port_num = local.port;
    if local.is_roce() || gid[0] == 0xff {
        ah.is_global = 1;
        ah.grh.dgid = ibv_gid { raw: *gid };
        ah.grh.sgid_index = local.gid_index;
        ah.grh.hop_limit = HOP_LIMIT;
        ah.grh.traffic_class = tos;
    }
    ah
}

/// Moves `qp` to `state` with the id's attributes.
pub fn move_to(st: &State, qp: *mut ibv_qp, state: u32) -> Result<(), c_int> {
    let (mut a, mask) = init_attr(st, state)?;
    // SAFETY: the id's QP, made by rdma_create_qp (or the program's own).
    let r = unsafe { ibv_modify_qp(qp, a.as_mut_ptr(), mask) };
    if r != 0 {
        return Err(if r > 0 { r } else { libc::EINVAL });
    }
    Ok(())
}

/// The connection's RTR then RTS, after refreshing INIT's access flags
/// (the responder resources are known now), as librdmacm does.
pub fn connect_qp(st: &State, qp: *mut ibv_qp) -> Result<(), c_int> {
    if st.qp_type == QPT_UD {
        return Ok(());
    }
    move_to(st, qp, QPS_INIT)?;
    move_to(st, qp, QPS_RTR)?;
    move_to(st, qp, QPS_RTS)
}

/// `rdma_disconnect`'s ERR.
pub fn to_error(qp: *mut ibv_qp) {
    let mut a = Attr::new();
    set_state(&mut a, QPS_ERR);
    // SAFETY: the id's QP.
    unsafe { ibv_modify_qp(qp, a.as_mut_ptr(), QP_STATE) };
}

/// `rdma_create_qp` / `rdma_create_qp_ex`.
///
/// # Safety
/// `id` is a live id's face, `attr` a valid `ibv_qp_init_attr_ex` (only its
/// base part when `ex` is false).
pub unsafe fn create(
    shared: &Shared,
    id: *mut rdma_cm_id,
    attr: *mut ibv_qp_init_attr_ex,
    ex: bool,
) -> Result<(), c_int> {
    if attr.is_null() {
        return Err(libc::EINVAL);
    }
    // SAFETY: the caller's contract.
    let face = unsafe { &mut *id };
    if face.verbs.is_null() {
        return Err(libc::EINVAL);
    }
    // SAFETY: the caller's attributes.
    let pd_given = unsafe {
        if (*attr).comp_mask & IBV_QP_INIT_ATTR_PD_BIT != 0 {
            (*attr).pd
        } else {
            core::ptr::null_mut()
        }
    };
    let dev = crate::devices::by_context(face.verbs)
        .ok_or(libc::EINVAL)?
        .1;
    let pd = if !pd_given.is_null() {
        pd_given
    } else if !face.pd.is_null() {
        face.pd
    } else {
        dev.pd()?
    };
    // SAFETY: a PD is an ibv_pd.
    if unsafe { (*pd).context } != face.verbs {
        return Err(libc::EINVAL);
    }
    // Fields of the caller's block, through raw pointers (its enum field
    // may hold any integer).
    // SAFETY: the caller's contract, for every access to `attr` below.
    unsafe {
        if (*attr).srq.is_null() && !face.srq.is_null() {
            (*attr).srq = face.srq;
        }
        if (*attr).send_cq.is_null() || (*attr).recv_cq.is_null() {
            make_cqs(face, attr)?;
        }
    }
    let qp = if ex {
        // SAFETY: as above.
        unsafe {
            (*attr).comp_mask |= IBV_QP_INIT_ATTR_PD_BIT;
            (*attr).pd = pd;
        }
        // SAFETY: an open context and the caller's extended attributes.
        unsafe { crate::verbs::ibv_create_qp_ex(face.verbs, attr)? }
    } else {
        // SAFETY: the caller's base attributes; a PD of the id's device.
        let qp = unsafe { ibv_create_qp(pd, attr.cast()) };
        if qp.is_null() {
            return Err(crate::guard::errno());
        }
        qp
    };
    let st = shared.st.lock();
    let ud = st.qp_type == QPT_UD;
    let r = move_to(&st, qp, QPS_INIT).and_then(|()| {
        if ud {
            move_to(&st, qp, QPS_RTR)?;
            move_to(&st, qp, QPS_RTS)
        } else {
            Ok(())
        }
    });
    drop(st);
    if let Err(e) = r {
        // SAFETY: the QP made above.
        unsafe { ibv_destroy_qp(qp) };
        return Err(e);
    }
    face.qp = qp;
    // The PD the QP went on is the id's from now (`rdma_reg_msgs` uses it).
    face.pd = pd;
    Ok(())
}

/// The CQs (each with its completion channel) librdmacm makes for a QP
/// whose program gave none, recorded in the id.
///
/// # Safety
/// `a` points at valid attributes.
unsafe fn make_cqs(face: &mut rdma_cm_id, a: *mut ibv_qp_init_attr_ex) -> Result<(), c_int> {
    let ctx = face.verbs;
    // The id is each CQ's context (rdma_verbs.h's completion helpers check it).
    let owner: *mut core::ffi::c_void = (face as *mut rdma_cm_id).cast();
    let one =
        |size: u32, ch: &mut *mut ibv_comp_channel, cq: &mut *mut ibv_cq| -> Result<(), c_int> {
            // SAFETY: an open context.
            let c = unsafe { ibv_create_comp_channel(ctx) };
            if c.is_null() {
                return Err(crate::guard::errno());
            }
            // SAFETY: as above, with the channel just made.
            let q = unsafe { ibv_create_cq(ctx, size.max(1) as c_int, owner, c, 0) };
            if q.is_null() {
                let e = crate::guard::errno();
                // SAFETY: the channel made above.
                unsafe { ibv_destroy_comp_channel(c) };
                return Err(e);
            }
            *ch = c;
            *cq = q;
            Ok(())
        };
    // SAFETY: the caller's contract, for each field below.
    unsafe {
        if (*a).recv_cq.is_null() {
            one(
                (*a).cap.max_recv_wr,
                &mut face.recv_cq_channel,
                &mut face.recv_cq,
            )?;
            (*a).recv_cq = face.recv_cq;
        }
        if (*a).send_cq.is_null() {
            one(
                (*a).cap.max_send_wr,
                &mut face.send_cq_channel,
                &mut face.send_cq,
            )?;
            (*a).send_cq = face.send_cq;
        }
    }
    Ok(())
}

/// `rdma_destroy_qp`: the QP, then the CQs the library made for it.
///
/// # Safety
/// `id` is a live id's face.
pub unsafe fn destroy(id: *mut rdma_cm_id) {
    // SAFETY: the caller's contract.
    let face = unsafe { &mut *id };
    if !face.qp.is_null() {
        // SAFETY: the id's QP.
        unsafe { ibv_destroy_qp(face.qp) };
        face.qp = core::ptr::null_mut();
    }
    // SAFETY: the CQs and channels below were made by make_cqs (or set by the program).
    unsafe {
        if !face.recv_cq.is_null() {
            ibv_destroy_cq(face.recv_cq);
            face.recv_cq = core::ptr::null_mut();
        }
        if !face.recv_cq_channel.is_null() {
            ibv_destroy_comp_channel(face.recv_cq_channel);
            face.recv_cq_channel = core::ptr::null_mut();
        }
        if !face.send_cq.is_null() {
            ibv_destroy_cq(face.send_cq);
            face.send_cq = core::ptr::null_mut();
        }
        if !face.send_cq_channel.is_null() {
            ibv_destroy_comp_channel(face.send_cq_channel);
            face.send_cq_channel = core::ptr::null_mut();
        }
    }
}
