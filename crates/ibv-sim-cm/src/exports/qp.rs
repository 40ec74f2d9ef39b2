//! QPs, SRQs and endpoints of ids.
core::arch::global_asm!(include_str!(concat!(env!("OUT_DIR"), "/symver_qp.s")));

use core::ffi::c_int;
use std::sync::Arc;

use rdmacm_abi::*;
use verbs_abi::{
    ibv_pd, ibv_qp_init_attr, ibv_qp_init_attr_ex, ibv_srq_init_attr, ibv_srq_init_attr_ex,
};

use crate::cm::{self as id, Shared};
use crate::guard;
use crate::verbs::*;

/// Makes the id's QP on its device and moves it to INIT (UD: RTS).
///
/// # Safety
/// `qp_init_attr` is valid.
#[no_mangle]
pub unsafe extern "C" fn rdma_create_qp(
    id: *mut rdma_cm_id,
    pd: *mut ibv_pd,
    qp_init_attr: *mut ibv_qp_init_attr,
) -> c_int {
    guard::int(|| {
        let sh = id::lookup(id)?;
        if qp_init_attr.is_null() {
            return Err(libc::EINVAL);
        }
        // The base attributes in an extended block (kept as bytes: its enum
        // field holds C's integer).
        let mut ex = core::mem::MaybeUninit::<ibv_qp_init_attr_ex>::zeroed();
        let e = ex.as_mut_ptr();
        // SAFETY: ibv_qp_init_attr_ex begins with ibv_qp_init_attr's members.
        unsafe {
            core::ptr::copy_nonoverlapping(
                qp_init_attr.cast::<u8>(),
                e.cast::<u8>(),
                core::mem::size_of::<ibv_qp_init_attr>(),
            )
        };
        if !pd.is_null() {
            // SAFETY: plain fields of the block.
            unsafe {
                (&raw mut (*e).pd).write(pd);
                (&raw mut (*e).comp_mask).write(IBV_QP_INIT_ATTR_PD_BIT);
            }
        }
        // SAFETY: a live id; `ex` lives across the call.
        unsafe { crate::cm::qp::create(&sh, id, e, false) }?;
        // The caps granted (and CQs made) go back to the caller, as ibv_create_qp does.
        // SAFETY: as above, back into the caller's base attributes.
        unsafe {
            core::ptr::copy_nonoverlapping(
                e.cast::<u8>(),
                qp_init_attr.cast::<u8>(),
                core::mem::size_of::<ibv_qp_init_attr>(),
            )
        };
        Ok(())
    })
}

/// As [`rdma_create_qp`], with extended attributes (`comp_mask` PD and the rest).
///
/// # Safety
/// `qp_init_attr` is valid.
#[no_mangle]
pub unsafe extern "C" fn rdma_create_qp_ex(
    id: *mut rdma_cm_id,
    qp_init_attr: *mut ibv_qp_init_attr_ex,
) -> c_int {
    guard::int(|| {
        let sh = id::lookup(id)?;
        // SAFETY: the caller's contract.
        unsafe { crate::cm::qp::create(&sh, id, qp_init_attr, true) }
    })
}

/// Destroys the id's QP and the CQs made for it.
#[no_mangle]
pub extern "C" fn rdma_destroy_qp(id: *mut rdma_cm_id) {
    guard::void(|| {
        if id::lookup(id).is_ok() {
            // SAFETY: a live id.
            unsafe { crate::cm::qp::destroy(id) };
        }
    })
}

/// Makes an SRQ for the id (`id->srq`), on `pd` or the device's own PD.
///
/// # Safety
/// `attr` is valid.
#[no_mangle]
pub unsafe extern "C" fn rdma_create_srq(
    id: *mut rdma_cm_id,
    pd: *mut ibv_pd,
    attr: *mut ibv_srq_init_attr,
) -> c_int {
    guard::int(|| {
        id::lookup(id)?;
        // SAFETY: a live id's face.
        let face = unsafe { &mut *id };
        if attr.is_null() || face.verbs.is_null() {
            return Err(libc::EINVAL);
        }
        let pd = pick_pd(face, pd)?;
        // SAFETY: the caller's attributes, a PD of the id's device.
        let srq = unsafe { ibv_create_srq(pd, attr) };
        if srq.is_null() {
            return Err(guard::errno());
        }
        face.srq = srq;
        Ok(())
    })
}

/// As [`rdma_create_srq`], with extended attributes.
///
/// # Safety
/// `attr` is valid.
#[no_mangle]
pub unsafe extern "C" fn rdma_create_srq_ex(
    id: *mut rdma_cm_id,
    attr: *mut ibv_srq_init_attr_ex,
) -> c_int {
    guard::int(|| {
        id::lookup(id)?;
        // SAFETY: a live id's face.
        let face = unsafe { &mut *id };
        if attr.is_null() || face.verbs.is_null() {
            return Err(libc::EINVAL);
        }
        // SAFETY: the caller's attributes, by field (its enum field may hold any integer).
        unsafe {
            if (*attr).comp_mask & SRQ_INIT_ATTR_PD == 0 || (*attr).pd.is_null() {
                (*attr).pd = pick_pd(face, core::ptr::null_mut())?;
                (*attr).comp_mask |= SRQ_INIT_ATTR_PD;
            }
        }
        // SAFETY: an open context and the caller's attributes.
        face.srq = unsafe { ibv_create_srq_ex(face.verbs, attr) }?;
        Ok(())
    })
}

/// Destroys the id's SRQ.
#[no_mangle]
pub extern "C" fn rdma_destroy_srq(id: *mut rdma_cm_id) {
    guard::void(|| {
        if id::lookup(id).is_ok() {
            // SAFETY: a live id's face and its SRQ.
            unsafe {
                if !(*id).srq.is_null() {
                    ibv_destroy_srq((*id).srq);
                    (*id).srq = core::ptr::null_mut();
                }
            }
        }
    })
}

fn pick_pd(face: &rdma_cm_id, pd: *mut ibv_pd) -> Result<*mut ibv_pd, c_int> {
    if !pd.is_null() {
        return Ok(pd);
    }
    if !face.pd.is_null() {
        return Ok(face.pd);
    }
    crate::devices::by_context(face.verbs)
        .ok_or(libc::EINVAL)?
        .1
        .pd()
}

/// A new id from a listener made by `rdma_create_ep` with QP attributes
/// gets its QP as it comes out of `rdma_get_request`.
pub fn ep_qp(listener: &Arc<Shared>, new: *mut rdma_cm_id) -> Result<(), c_int> {
    let Some(crate::cm::Carried((mut attr, pd))) = listener.st.lock().ep_qp else {
        return Ok(());
    };
    // SAFETY: the new id's live face.
    unsafe { (*new).pd = pd as *mut ibv_pd };
    // SAFETY: `attr` is a byte copy of the program's attributes.
    let r = unsafe { rdma_create_qp(new, pd as *mut ibv_pd, attr.as_mut_ptr()) };
    if r != 0 {
        return Err(guard::errno());
    }
    Ok(())
}

/// A synchronous id for `res`: bound (passive) or resolved up to its route
/// (active), with a QP when `qp_init_attr` is given.
///
/// # Safety
/// `id` is writable, `res` a `rdma_getaddrinfo` result, `qp_init_attr` NULL or valid.
#[no_mangle]
pub unsafe extern "C" fn rdma_create_ep(
    id: *mut *mut rdma_cm_id,
    res: *mut rdma_addrinfo,
    pd: *mut ibv_pd,
    qp_init_attr: *mut ibv_qp_init_attr,
) -> c_int {
    guard::int(|| {
        if id.is_null() || res.is_null() {
            return Err(libc::EINVAL);
        }
        // SAFETY: the caller's contract.
        let r = unsafe { &*res };
        let mut cm: *mut rdma_cm_id = core::ptr::null_mut();
        // SAFETY: a synchronous id into `cm`.
        unsafe {
            id::create(
                core::ptr::null_mut(),
                &mut cm,
                core::ptr::null_mut(),
                r.ai_port_space as u32,
            )
        }?;
        if !qp_init_attr.is_null() {
            // librdmacm gives the QP the result's type, whatever the program set.
            // SAFETY: the caller's attributes; the enum field written as its integer.
            unsafe {
                (&raw mut (*qp_init_attr).qp_type)
                    .cast::<c_int>()
                    .write(r.ai_qp_type)
            };
        }
        let done = (|| {
            let sh = id::lookup(cm)?;
            if r.ai_flags & RAI_PASSIVE != 0 {
                // SAFETY: the result's address.
                let a = unsafe { crate::addr::Addr::read(r.ai_src_addr) }?;
                id::connect::bind(&sh, cm, a)?;
                if !qp_init_attr.is_null() {
                    let mut copy = core::mem::MaybeUninit::<ibv_qp_init_attr>::uninit();
                    // SAFETY: the caller's attributes, copied as bytes.
                    unsafe { core::ptr::copy_nonoverlapping(qp_init_attr, copy.as_mut_ptr(), 1) };
                    sh.st.lock().ep_qp = Some(crate::cm::Carried((copy, pd as usize)));
                }
                return Ok(());
            }
            // SAFETY: the result's addresses.
            let src = if r.ai_src_addr.is_null() {
                None
            } else {
                Some(unsafe { crate::addr::Addr::read(r.ai_src_addr) }?)
            };
            // SAFETY: as above.
            let dst = unsafe { crate::addr::Addr::read(r.ai_dst_addr) }?;
            id::connect::resolve_addr(&sh, cm, src, dst, 2000)?;
            id::process::complete(&sh, cm)?;
            id::connect::resolve_route(&sh, cm)?;
            id::process::complete(&sh, cm)?;
            // SAFETY: our new id's face.
            unsafe { (*cm).pd = pd };
            if !qp_init_attr.is_null() {
                // SAFETY: the caller's attributes.
                if unsafe { rdma_create_qp(cm, pd, qp_init_attr) } != 0 {
                    return Err(guard::errno());
                }
            }
            Ok(())
        })();
        if let Err(e) = done {
            // SAFETY: our id, not handed out.
            unsafe { id::destroy(cm) }.ok();
            return Err(e);
        }
        // SAFETY: the caller's out pointer.
        unsafe { *id = cm };
        Ok(())
    })
}

/// Destroys an endpoint: its QP, SRQ, then the id.
///
/// # Safety
/// `id` is not used afterwards.
#[no_mangle]
pub unsafe extern "C" fn rdma_destroy_ep(id: *mut rdma_cm_id) {
    guard::void(|| {
        if id::lookup(id).is_err() {
            return;
        }
        // SAFETY: a live id.
        unsafe {
            crate::cm::qp::destroy(id);
            if !(*id).srq.is_null() {
                ibv_destroy_srq((*id).srq);
                (*id).srq = core::ptr::null_mut();
            }
            let _ = id::destroy(id);
        }
    })
}
