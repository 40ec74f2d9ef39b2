//! The public verbs API this library uses, resolved through `DT_NEEDED
//! libibverbs.so.1` at rdma-core's default versions (whichever libibverbs
//! the program runs on). The inline verbs of `verbs.h` that go through the
//! context's tables (`ibv_create_qp_ex`, `ibv_create_srq_ex`) are written
//! out here as the header writes them.

use core::ffi::{c_int, c_void};
use verbs_abi::*;

extern "C" {
    pub fn ibv_get_device_list(num: *mut c_int) -> *mut *mut ibv_device;
    pub fn ibv_open_device(device: *mut ibv_device) -> *mut ibv_context;

    pub fn ibv_query_device(ctx: *mut ibv_context, attr: *mut ibv_device_attr) -> c_int;
    pub fn ibv_query_port(ctx: *mut ibv_context, port: u8, attr: *mut ibv_port_attr) -> c_int;
    pub fn ibv_query_gid(ctx: *mut ibv_context, port: u8, index: c_int, gid: *mut ibv_gid)
        -> c_int;
    pub fn ibv_alloc_pd(ctx: *mut ibv_context) -> *mut ibv_pd;
    pub fn ibv_create_comp_channel(ctx: *mut ibv_context) -> *mut ibv_comp_channel;
    pub fn ibv_destroy_comp_channel(ch: *mut ibv_comp_channel) -> c_int;
    pub fn ibv_create_cq(
        ctx: *mut ibv_context,
        cqe: c_int,
        cq_context: *mut c_void,
        channel: *mut ibv_comp_channel,
        comp_vector: c_int,
    ) -> *mut ibv_cq;
    pub fn ibv_destroy_cq(cq: *mut ibv_cq) -> c_int;
    pub fn ibv_get_cq_event(
        channel: *mut ibv_comp_channel,
        cq: *mut *mut ibv_cq,
        cq_context: *mut *mut c_void,
    ) -> c_int;
    pub fn ibv_ack_cq_events(cq: *mut ibv_cq, nevents: u32);
    pub fn ibv_reg_mr(
        pd: *mut ibv_pd,
        addr: *mut c_void,
        length: usize,
        access: c_int,
    ) -> *mut ibv_mr;
    pub fn ibv_dereg_mr(mr: *mut ibv_mr) -> c_int;
    pub fn ibv_create_qp(pd: *mut ibv_pd, attr: *mut ibv_qp_init_attr) -> *mut ibv_qp;
    pub fn ibv_modify_qp(qp: *mut ibv_qp, attr: *mut ibv_qp_attr, mask: c_int) -> c_int;
    pub fn ibv_destroy_qp(qp: *mut ibv_qp) -> c_int;
    pub fn ibv_create_ah(pd: *mut ibv_pd, attr: *mut ibv_ah_attr) -> *mut ibv_ah;
    pub fn ibv_destroy_ah(ah: *mut ibv_ah) -> c_int;
    pub fn ibv_create_srq(pd: *mut ibv_pd, attr: *mut ibv_srq_init_attr) -> *mut ibv_srq;
    pub fn ibv_destroy_srq(srq: *mut ibv_srq) -> c_int;
    pub fn ibv_attach_mcast(qp: *mut ibv_qp, gid: *const ibv_gid, lid: u16) -> c_int;
    pub fn ibv_detach_mcast(qp: *mut ibv_qp, gid: *const ibv_gid, lid: u16) -> c_int;
}

/// The `struct verbs_context` around `ctx`, when it has one and knows the
/// op at `offset` (`verbs_get_ctx_op`'s test).
///
/// # Safety
/// `ctx` must be an open context.
unsafe fn verbs_ctx(ctx: *mut ibv_context, offset: usize) -> Option<*mut verbs_context> {
    // SAFETY: the caller's open context.
    if unsafe { (*ctx).abi_compat } != VERBS_ABI_IS_EXTENDED {
        return None;
    }
    let base = core::mem::offset_of!(verbs_context, context);
    let vctx = ctx.cast::<u8>().wrapping_sub(base).cast::<verbs_context>();
    // SAFETY: an extended context is the last member of its verbs_context.
    let sz = unsafe { (*vctx).sz };
    (sz >= core::mem::size_of::<verbs_context>() - offset).then_some(vctx)
}

/// `ibv_create_qp_ex` as `verbs.h` inlines it.
///
/// # Safety
/// `ctx` must be an open context and `attr` a valid `ibv_qp_init_attr_ex`.
pub unsafe fn ibv_create_qp_ex(
    ctx: *mut ibv_context,
    attr: *mut ibv_qp_init_attr_ex,
) -> Result<*mut ibv_qp, c_int> {
    // SAFETY: the caller's attributes.
    let mask = unsafe { (*attr).comp_mask };
    if mask & !(IBV_QP_INIT_ATTR_PD_BIT) == 0 {
        // SAFETY: ibv_qp_init_attr_ex begins with ibv_qp_init_attr's members.
        let qp = unsafe { ibv_create_qp((*attr).pd, attr.cast()) };
        return if qp.is_null() {
            Err(crate::guard::errno())
        } else {
            Ok(qp)
        };
    }
    let off = core::mem::offset_of!(verbs_context, create_qp_ex);
    // SAFETY: the caller's open context.
    let Some(v) = (unsafe { verbs_ctx(ctx, off) }) else {
        return Err(libc::EOPNOTSUPP);
    };
    // SAFETY: checked by verbs_ctx's size test.
    let Some(f) = (unsafe { (*v).create_qp_ex }) else {
        return Err(libc::EOPNOTSUPP);
    };
    // SAFETY: the provider's op, on its own context.
    let qp = unsafe { f(ctx, attr) };
    if qp.is_null() {
        Err(crate::guard::errno())
    } else {
        Ok(qp)
    }
}

/// `ibv_create_srq_ex` as `verbs.h` inlines it.
///
/// # Safety
/// `ctx` must be an open context and `attr` a valid `ibv_srq_init_attr_ex`.
pub unsafe fn ibv_create_srq_ex(
    ctx: *mut ibv_context,
    attr: *mut ibv_srq_init_attr_ex,
) -> Result<*mut ibv_srq, c_int> {
    // SAFETY: the caller's attributes.
    let (mask, ty) = unsafe {
        (
            (*attr).comp_mask,
            (&raw const (*attr).srq_type).cast::<u32>().read(),
        )
    };
    if mask & !SRQ_INIT_ATTR_PD == 0
        || (mask & SRQ_INIT_ATTR_TYPE != 0
            && mask & !(SRQ_INIT_ATTR_PD | SRQ_INIT_ATTR_TYPE) == 0
            && ty == 0)
    {
        let mut plain = ibv_srq_init_attr {
            // SAFETY: the caller's attributes.
            srq_context: unsafe { (*attr).srq_context },
            // SAFETY: as above.
            attr: unsafe { (*attr).attr },
        };
        // SAFETY: the caller's PD; `plain` lives across the call.
        let srq = unsafe { ibv_create_srq((*attr).pd, &mut plain) };
        return if srq.is_null() {
            Err(crate::guard::errno())
        } else {
            Ok(srq)
        };
    }
    let off = core::mem::offset_of!(verbs_context, create_srq_ex);
    // SAFETY: the caller's open context.
    let Some(v) = (unsafe { verbs_ctx(ctx, off) }) else {
        return Err(libc::EOPNOTSUPP);
    };
    // SAFETY: checked by verbs_ctx's size test.
    let Some(f) = (unsafe { (*v).create_srq_ex }) else {
        return Err(libc::EOPNOTSUPP);
    };
    // SAFETY: the provider's op, on its own context.
    let srq = unsafe { f(ctx, attr) };
    if srq.is_null() {
        Err(crate::guard::errno())
    } else {
        Ok(srq)
    }
}

/// `IBV_QP_INIT_ATTR_PD`.
pub const IBV_QP_INIT_ATTR_PD_BIT: u32 = 1;
/// `IBV_SRQ_INIT_ATTR_TYPE`, `_PD`.
pub const SRQ_INIT_ATTR_TYPE: u32 = 1;
pub const SRQ_INIT_ATTR_PD: u32 = 2;

// ibv_qp_attr_mask bits.
pub const QP_STATE: c_int = 1;
pub const QP_ACCESS_FLAGS: c_int = 1 << 3;
pub const QP_PKEY_INDEX: c_int = 1 << 4;
pub const QP_PORT: c_int = 1 << 5;
pub const QP_QKEY: c_int = 1 << 6;
pub const QP_AV: c_int = 1 << 7;
pub const QP_PATH_MTU: c_int = 1 << 8;
pub const QP_TIMEOUT: c_int = 1 << 9;
pub const QP_RETRY_CNT: c_int = 1 << 10;
pub const QP_RNR_RETRY: c_int = 1 << 11;
pub const QP_RQ_PSN: c_int = 1 << 12;
pub const QP_MAX_QP_RD_ATOMIC: c_int = 1 << 13;
pub const QP_MIN_RNR_TIMER: c_int = 1 << 15;
pub const QP_SQ_PSN: c_int = 1 << 16;
pub const QP_MAX_DEST_RD_ATOMIC: c_int = 1 << 17;
pub const QP_DEST_QPN: c_int = 1 << 20;

// ibv_qp_state values.
pub const QPS_INIT: u32 = 1;
pub const QPS_RTR: u32 = 2;
pub const QPS_RTS: u32 = 3;
pub const QPS_ERR: u32 = 6;

// ibv_qp_type values.
pub const QPT_RC: u32 = 2;
pub const QPT_UD: u32 = 4;

// ibv_access_flags.
pub const ACCESS_REMOTE_WRITE: u32 = 1 << 1;
pub const ACCESS_REMOTE_READ: u32 = 1 << 2;
pub const ACCESS_REMOTE_ATOMIC: u32 = 1 << 3;

pub const LINK_LAYER_ETHERNET: u8 = 2;
