//! The functions behind the inline verbs of `verbs.h`: the entries of
//! `ibv_context.ops` and `struct verbs_context` (not exported by name).

// The `.symver` directives that give this module's exports their versions.
#[cfg(not(test))]
core::arch::global_asm!(include_str!(concat!(env!("OUT_DIR"), "/symver_ops.s")));

use core::ffi::c_int;

use verbs_abi::{
    ibv_context, ibv_cq, ibv_port_attr, ibv_qp, ibv_recv_wr, ibv_send_wr, ibv_srq,
    ibv_srq_init_attr_ex, ibv_values_ex, ibv_wc,
};

use crate::guard;
use crate::{context, datapath, pd, srq};
use verbs_abi::verbs_context;

/// Fills a new context's function tables (`context::open` calls it): these
/// functions, then the extended verbs' (`ext::install`, which also
/// fills `create_qp_ex`).
pub fn install(vctx: &mut verbs_context) {
    vctx.query_port = Some(sim_query_port);
    vctx.query_rt_values = Some(sim_query_rt_values);
    vctx.create_srq_ex = Some(sim_create_srq_ex);
    crate::ext::install(vctx);
    crate::objects::install(vctx);
    let c = &mut vctx.context;
    c.ops.poll_cq = Some(sim_poll_cq);
    c.ops.req_notify_cq = Some(sim_req_notify_cq);
    c.ops.post_send = Some(sim_post_send);
    c.ops.post_recv = Some(sim_post_recv);
    c.ops.post_srq_recv = Some(sim_post_srq_recv);
}

/// `verbs_context.query_port` (the `ibv_query_port` macro).
pub unsafe extern "C" fn sim_query_port(
    ctx: *mut ibv_context,
    port: u8,
    attr: *mut ibv_port_attr,
    len: usize,
) -> c_int {
    guard::errval(|| context::query_port(ctx, port, attr.cast(), len))
}

/// `verbs_context.query_rt_values` (`ibv_query_rt_values_ex`).
pub unsafe extern "C" fn sim_query_rt_values(
    ctx: *mut ibv_context,
    values: *mut ibv_values_ex,
) -> c_int {
    guard::errval(|| context::query_rt_values(ctx, values))
}

/// `ibv_srq_init_attr_mask` bits.
const SRQ_INIT_TYPE: u32 = verbs_abi::ibv_srq_init_attr_mask::IBV_SRQ_INIT_ATTR_TYPE as u32;
const SRQ_INIT_PD: u32 = verbs_abi::ibv_srq_init_attr_mask::IBV_SRQ_INIT_ATTR_PD as u32;
const SRQ_INIT_KNOWN: u32 =
    verbs_abi::ibv_srq_init_attr_mask::IBV_SRQ_INIT_ATTR_RESERVED as u32 - 1;
const SRQ_INIT_XRCD: u32 = verbs_abi::ibv_srq_init_attr_mask::IBV_SRQ_INIT_ATTR_XRCD as u32;
const SRQ_INIT_CQ: u32 = verbs_abi::ibv_srq_init_attr_mask::IBV_SRQ_INIT_ATTR_CQ as u32;
/// `ibv_srq_type`.
const SRQT_BASIC: c_int = verbs_abi::ibv_srq_type::IBV_SRQT_BASIC as c_int;
const SRQT_XRC: c_int = verbs_abi::ibv_srq_type::IBV_SRQT_XRC as c_int;

/// `verbs_context.create_srq_ex` (`ibv_create_srq_ex` beyond the plain case).
pub unsafe extern "C" fn sim_create_srq_ex(
    ctx: *mut ibv_context,
    attr: *mut ibv_srq_init_attr_ex,
) -> *mut ibv_srq {
    guard::ptr(|| {
        let sim = context::from_ibv(ctx)?;
        if attr.is_null() {
            return Err(libc::EINVAL);
        }
        // SAFETY: attr points at the caller's struct; the enum is read as an int.
        let (mask, ty, pd_ptr, xrcd, cq) = unsafe {
            (
                (*attr).comp_mask,
                core::ptr::addr_of!((*attr).srq_type).cast::<c_int>().read(),
                (*attr).pd,
                (*attr).xrcd,
                (*attr).cq,
            )
        };
        if mask & !SRQ_INIT_KNOWN != 0 || mask & SRQ_INIT_PD == 0 {
            return Err(libc::EINVAL);
        }
        let ty = if mask & SRQ_INIT_TYPE != 0 {
            ty
        } else {
            SRQT_BASIC
        };
        match ty {
            SRQT_BASIC => {}
            // An XRC SRQ needs its domain and CQ.
            SRQT_XRC if mask & (SRQ_INIT_XRCD | SRQ_INIT_CQ) != SRQ_INIT_XRCD | SRQ_INIT_CQ => {
                return Err(libc::EINVAL)
            }
            SRQT_XRC => crate::profile::offered(sim.dev.profile().xrc)?,
            // Tag-matching SRQs are not simulated.
            _ => return Err(libc::EOPNOTSUPP),
        }
        let (pctx, _) = pd::get(pd_ptr)?;
        if !core::ptr::eq(pctx, sim) {
            return Err(libc::EINVAL);
        }
        // SAFETY: as above.
        let (srq_context, a) = unsafe { ((*attr).srq_context, &mut (*attr).attr) };
        if ty == SRQT_XRC {
            return crate::xrc::create_srq(sim, pd_ptr, xrcd, cq, srq_context, a);
        }
        srq::create(pd_ptr, srq_context, a)
    })
}

/// `ibv_context.ops.poll_cq` (the inline `ibv_poll_cq`).
pub unsafe extern "C" fn sim_poll_cq(cq: *mut ibv_cq, n: c_int, wc: *mut ibv_wc) -> c_int {
    guard::call(-libc::EIO, || datapath::poll_cq(cq, n, wc))
}

/// `ibv_context.ops.req_notify_cq` (the inline `ibv_req_notify_cq`).
pub unsafe extern "C" fn sim_req_notify_cq(cq: *mut ibv_cq, solicited_only: c_int) -> c_int {
    guard::call(libc::EIO, || datapath::req_notify_cq(cq, solicited_only))
}

/// `ibv_context.ops.post_send` (the inline `ibv_post_send`).
pub unsafe extern "C" fn sim_post_send(
    qp: *mut ibv_qp,
    wr: *mut ibv_send_wr,
    bad: *mut *mut ibv_send_wr,
) -> c_int {
    guard::call(libc::EIO, || datapath::post_send(qp, wr, bad))
}

/// `ibv_context.ops.post_recv` (the inline `ibv_post_recv`).
pub unsafe extern "C" fn sim_post_recv(
    qp: *mut ibv_qp,
    wr: *mut ibv_recv_wr,
    bad: *mut *mut ibv_recv_wr,
) -> c_int {
    guard::call(libc::EIO, || datapath::post_recv(qp, wr, bad))
}

/// `ibv_context.ops.post_srq_recv` (the inline `ibv_post_srq_recv`).
pub unsafe extern "C" fn sim_post_srq_recv(
    srq: *mut ibv_srq,
    wr: *mut ibv_recv_wr,
    bad: *mut *mut ibv_recv_wr,
) -> c_int {
    guard::call(libc::EIO, || datapath::post_srq_recv(srq, wr, bad))
}
