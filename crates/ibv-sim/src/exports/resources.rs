//! PD, MR, completion channel, CQ, SRQ, QP, AH and multicast verbs.

// The `.symver` directives that give this module's exports their versions.
#[cfg(not(test))]
core::arch::global_asm!(include_str!(concat!(
    env!("OUT_DIR"),
    "/symver_resources.s"
)));

use core::ffi::{c_int, c_uint, c_void};

use verbs_abi::{
    ibv_ah, ibv_ah_attr, ibv_comp_channel, ibv_context, ibv_cq, ibv_gid, ibv_grh, ibv_mr, ibv_pd,
    ibv_qp, ibv_qp_attr, ibv_qp_init_attr, ibv_srq, ibv_srq_attr, ibv_srq_init_attr, ibv_wc,
};

use crate::guard;
use crate::{ah, cq, mr, pd, qp, srq};

#[no_mangle]
pub unsafe extern "C" fn ibv_alloc_pd(ctx: *mut ibv_context) -> *mut ibv_pd {
    guard::ptr(|| pd::alloc(ctx))
}

#[no_mangle]
pub unsafe extern "C" fn ibv_dealloc_pd(pd: *mut ibv_pd) -> c_int {
    guard::errval(|| pd::dealloc(pd))
}

#[no_mangle]
pub unsafe extern "C" fn ibv_reg_mr(
    pd: *mut ibv_pd,
    addr: *mut c_void,
    length: usize,
    access: c_int,
) -> *mut ibv_mr {
    guard::ptr(|| mr::reg(pd, addr, length, addr as u64, access as u32))
}

#[no_mangle]
pub unsafe extern "C" fn ibv_reg_mr_iova(
    pd: *mut ibv_pd,
    addr: *mut c_void,
    length: usize,
    iova: u64,
    access: c_int,
) -> *mut ibv_mr {
    guard::ptr(|| mr::reg(pd, addr, length, iova, access as u32))
}

#[no_mangle]
pub unsafe extern "C" fn ibv_reg_mr_iova2(
    pd: *mut ibv_pd,
    addr: *mut c_void,
    length: usize,
    iova: u64,
    access: c_uint,
) -> *mut ibv_mr {
    guard::ptr(|| mr::reg(pd, addr, length, iova, access))
}

#[no_mangle]
pub unsafe extern "C" fn ibv_rereg_mr(
    mr: *mut ibv_mr,
    flags: c_int,
    pd: *mut ibv_pd,
    addr: *mut c_void,
    length: usize,
    access: c_int,
) -> c_int {
    guard::call(mr::REREG_ERR_CMD, || {
        match mr::rereg(mr, flags, pd, addr, length, access) {
            Ok(()) => 0,
            Err((code, e)) => {
                guard::set_errno(e);
                code
            }
        }
    })
}

#[no_mangle]
pub unsafe extern "C" fn ibv_dereg_mr(mr: *mut ibv_mr) -> c_int {
    guard::errval(|| mr::dereg(mr))
}

#[no_mangle]
pub unsafe extern "C" fn ibv_create_comp_channel(ctx: *mut ibv_context) -> *mut ibv_comp_channel {
    guard::ptr(|| cq::create_channel(ctx))
}

#[no_mangle]
pub unsafe extern "C" fn ibv_destroy_comp_channel(ch: *mut ibv_comp_channel) -> c_int {
    guard::errval(|| cq::destroy_channel(ch))
}

#[no_mangle]
pub unsafe extern "C" fn ibv_create_cq(
    ctx: *mut ibv_context,
    cqe: c_int,
    cq_context: *mut c_void,
    channel: *mut ibv_comp_channel,
    comp_vector: c_int,
) -> *mut ibv_cq {
    guard::ptr(|| cq::create(ctx, cqe, cq_context, channel, comp_vector))
}

#[no_mangle]
pub unsafe extern "C" fn ibv_resize_cq(cq: *mut ibv_cq, cqe: c_int) -> c_int {
    guard::errval(|| cq::resize(cq, cqe))
}

#[no_mangle]
pub unsafe extern "C" fn ibv_destroy_cq(cq: *mut ibv_cq) -> c_int {
    guard::errval(|| cq::destroy(cq))
}

#[no_mangle]
pub unsafe extern "C" fn ibv_get_cq_event(
    channel: *mut ibv_comp_channel,
    cq: *mut *mut ibv_cq,
    cq_context: *mut *mut c_void,
) -> c_int {
    guard::minus_one(|| cq::get_event(channel, cq, cq_context))
}

#[no_mangle]
pub unsafe extern "C" fn ibv_ack_cq_events(cq: *mut ibv_cq, nevents: c_uint) {
    guard::void(|| cq::ack_events(cq, nevents))
}

#[no_mangle]
pub unsafe extern "C" fn ibv_create_srq(
    pd: *mut ibv_pd,
    init: *mut ibv_srq_init_attr,
) -> *mut ibv_srq {
    guard::ptr(|| {
        if init.is_null() {
            return Err(libc::EINVAL);
        }
        // SAFETY: init points at the caller's init attributes (plain data).
        let i = unsafe { &mut *init };
        srq::create(pd, i.srq_context, &mut i.attr)
    })
}

#[no_mangle]
pub unsafe extern "C" fn ibv_modify_srq(
    srq: *mut ibv_srq,
    attr: *mut ibv_srq_attr,
    mask: c_int,
) -> c_int {
    guard::errval(|| srq::modify(srq, attr, mask))
}

#[no_mangle]
pub unsafe extern "C" fn ibv_query_srq(srq: *mut ibv_srq, attr: *mut ibv_srq_attr) -> c_int {
    guard::errval(|| srq::query(srq, attr))
}

#[no_mangle]
pub unsafe extern "C" fn ibv_destroy_srq(srq: *mut ibv_srq) -> c_int {
    guard::errval(|| srq::destroy(srq))
}

#[no_mangle]
pub unsafe extern "C" fn ibv_create_qp(
    pd: *mut ibv_pd,
    init: *mut ibv_qp_init_attr,
) -> *mut ibv_qp {
    guard::ptr(|| {
        if init.is_null() {
            return Err(libc::EINVAL);
        }
        // SAFETY: init points at the caller's ibv_qp_init_attr.
        let mut i = unsafe { qp::QpInit::from_attr(init) };
        let q = qp::create(pd, &mut i)?;
        // SAFETY: as above; the granted capacities are written back.
        unsafe { (*init).cap = i.cap };
        Ok(q)
    })
}

#[no_mangle]
pub unsafe extern "C" fn ibv_query_qp(
    qp: *mut ibv_qp,
    attr: *mut ibv_qp_attr,
    attr_mask: c_int,
    init: *mut ibv_qp_init_attr,
) -> c_int {
    guard::errval(|| qp::query(qp, attr, attr_mask, init))
}

#[no_mangle]
pub unsafe extern "C" fn ibv_modify_qp(
    qp: *mut ibv_qp,
    attr: *mut ibv_qp_attr,
    attr_mask: c_int,
) -> c_int {
    guard::errval(|| qp::modify(qp, attr, attr_mask))
}

#[no_mangle]
pub unsafe extern "C" fn ibv_destroy_qp(qp: *mut ibv_qp) -> c_int {
    guard::errval(|| qp::destroy(qp))
}

#[no_mangle]
pub unsafe extern "C" fn ibv_create_ah(pd: *mut ibv_pd, attr: *mut ibv_ah_attr) -> *mut ibv_ah {
    guard::ptr(|| ah::create(pd, attr))
}

#[no_mangle]
pub unsafe extern "C" fn ibv_destroy_ah(ah: *mut ibv_ah) -> c_int {
    guard::errval(|| ah::destroy(ah))
}

#[no_mangle]
pub unsafe extern "C" fn ibv_init_ah_from_wc(
    ctx: *mut ibv_context,
    port_num: u8,
    wc: *mut ibv_wc,
    grh: *mut ibv_grh,
    ah_attr: *mut ibv_ah_attr,
) -> c_int {
    guard::minus_one(|| ah::init_from_wc(ctx, port_num, wc, grh, ah_attr))
}

#[no_mangle]
pub unsafe extern "C" fn ibv_create_ah_from_wc(
    pd: *mut ibv_pd,
    wc: *mut ibv_wc,
    grh: *mut ibv_grh,
    port_num: u8,
) -> *mut ibv_ah {
    guard::ptr(|| {
        let (ctx, _) = pd::get(pd)?;
        // SAFETY: plain data; all-zero is valid.
        let mut a: ibv_ah_attr = unsafe { core::mem::zeroed() };
        ah::init_from_wc(ctx.ibv(), port_num, wc, grh, &mut a)?;
        ah::create(pd, &a)
    })
}

#[no_mangle]
pub unsafe extern "C" fn ibv_attach_mcast(qp: *mut ibv_qp, gid: *const ibv_gid, lid: u16) -> c_int {
    guard::errval(|| qp::attach_mcast(qp, gid.cast(), lid))
}

#[no_mangle]
pub unsafe extern "C" fn ibv_detach_mcast(qp: *mut ibv_qp, gid: *const ibv_gid, lid: u16) -> c_int {
    guard::errval(|| qp::detach_mcast(qp, gid.cast(), lid))
}
