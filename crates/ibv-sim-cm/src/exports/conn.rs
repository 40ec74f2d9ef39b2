//! Connections, QP attributes, ECE and multicast.
core::arch::global_asm!(include_str!(concat!(env!("OUT_DIR"), "/symver_conn.s")));

use core::ffi::{c_int, c_void};

use libc::sockaddr;
use rdmacm_abi::*;
use verbs_abi::{ibv_ece, ibv_qp_attr};

use std::sync::Arc;

use crate::addr::Addr;
use crate::cm::{self as id, connect, process, Shared};
use crate::guard;

/// An export's body on a live id: `f` with the id's shared state, behind
/// the panic boundary (an unknown id is `EINVAL`).
fn on_id(id: *mut rdma_cm_id, f: impl FnOnce(&Arc<Shared>) -> Result<(), c_int>) -> c_int {
    guard::int(|| f(&id::lookup(id)?))
}

/// Reads the program's connection parameters, if any.
///
/// # Safety
/// `p` is NULL or a valid `rdma_conn_param`.
unsafe fn params<'a>(p: *mut rdma_conn_param) -> Option<&'a rdma_conn_param> {
    // SAFETY: the caller's contract.
    unsafe { p.as_ref() }
}

/// Sends a connection request (SIDR request for UD ids).
///
/// # Safety
/// `conn_param` is NULL or valid, its private data readable.
#[no_mangle]
pub unsafe extern "C" fn rdma_connect(
    id: *mut rdma_cm_id,
    conn_param: *mut rdma_conn_param,
) -> c_int {
    on_id(id, |sh| {
        // SAFETY: the caller's contract.
        connect::connect(sh, id, unsafe { params(conn_param) })?;
        process::complete(sh, id)
    })
}

/// Accepts a connection request.
///
/// # Safety
/// `conn_param` is NULL or valid, its private data readable.
#[no_mangle]
pub unsafe extern "C" fn rdma_accept(
    id: *mut rdma_cm_id,
    conn_param: *mut rdma_conn_param,
) -> c_int {
    on_id(id, |sh| {
        // SAFETY: the caller's contract.
        connect::accept(sh, id, unsafe { params(conn_param) })?;
        if sh.st.lock().qp_type == crate::verbs::QPT_UD {
            return Ok(());
        }
        process::complete(sh, id)
    })
}

/// Rejects a connection request (reason 28, consumer defined).
///
/// # Safety
/// `data` (the private data) is NULL or `len` readable bytes.
#[no_mangle]
pub unsafe extern "C" fn rdma_reject(id: *mut rdma_cm_id, data: *const c_void, len: u8) -> c_int {
    // SAFETY: the caller's contract.
    unsafe { reject(id, data, len, IB_CM_REJ_CONSUMER_DEFINED) }
}

/// Rejects a connection request for its ECE (reason 35).
///
/// # Safety
/// As [`rdma_reject`].
#[no_mangle]
pub unsafe extern "C" fn rdma_reject_ece(
    id: *mut rdma_cm_id,
    data: *const c_void,
    len: u8,
) -> c_int {
    // SAFETY: the caller's contract.
    unsafe { reject(id, data, len, IB_CM_REJ_VENDOR_OPTION_NOT_SUPPORTED) }
}

/// A REJ with `reason` and the program's private data.
///
/// # Safety
/// As [`rdma_reject`].
unsafe fn reject(id: *mut rdma_cm_id, data: *const c_void, len: u8, reason: c_int) -> c_int {
    // SAFETY: the program's private data of `len` bytes (the caller's
    // contract, `rdma_reject`'s).
    on_id(id, |sh| unsafe {
        connect::reject(sh, data.cast(), len, reason)
    })
}

/// Completes an active connection whose id has no QP (after CONNECT_RESPONSE).
#[no_mangle]
pub extern "C" fn rdma_establish(id: *mut rdma_cm_id) -> c_int {
    on_id(id, connect::establish)
}

/// Disconnects: the QP to ERR, a DREQ (or the DREP) to the peer.
#[no_mangle]
pub extern "C" fn rdma_disconnect(id: *mut rdma_cm_id) -> c_int {
    on_id(id, |sh| {
        connect::disconnect(sh, id)?;
        process::complete(sh, id)
    })
}

/// The attributes for moving the id's QP to `qp_attr->qp_state`.
///
/// # Safety
/// `qp_attr` and `qp_attr_mask` are writable.
#[no_mangle]
pub unsafe extern "C" fn rdma_init_qp_attr(
    id: *mut rdma_cm_id,
    qp_attr: *mut ibv_qp_attr,
    qp_attr_mask: *mut c_int,
) -> c_int {
    on_id(id, |sh| {
        if qp_attr.is_null() || qp_attr_mask.is_null() {
            return Err(libc::EINVAL);
        }
        // SAFETY: the caller's attributes; the enum field read as its integer.
        let state = unsafe { (&raw const (*qp_attr).qp_state).cast::<u32>().read() };
        let (mut a, m) = crate::cm::qp::init_attr(&sh.st.lock(), state)?;
        // SAFETY: the caller's contract; the block is copied as bytes.
        unsafe {
            core::ptr::copy_nonoverlapping(a.as_mut_ptr(), qp_attr, 1);
            *qp_attr_mask = m;
        }
        Ok(())
    })
}

/// The ECE this side offers in its REQ or REP.
///
/// # Safety
/// `ece` is NULL or valid.
#[no_mangle]
pub unsafe extern "C" fn rdma_set_local_ece(id: *mut rdma_cm_id, ece: *mut ibv_ece) -> c_int {
    on_id(id, |sh| {
        // SAFETY: the caller's contract.
        let e = unsafe { ece.as_ref() }.ok_or(libc::EINVAL)?;
        if e.vendor_id == 0 || e.comp_mask != 0 {
            return Err(libc::EINVAL);
        }
        sh.st.lock().local_ece = Some((e.vendor_id, e.options));
        Ok(())
    })
}

/// The ECE the peer offered.
///
/// # Safety
/// `ece` is NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn rdma_get_remote_ece(id: *mut rdma_cm_id, ece: *mut ibv_ece) -> c_int {
    on_id(id, |sh| {
        // SAFETY: the caller's contract.
        let e = unsafe { ece.as_mut() }.ok_or(libc::EINVAL)?;
        let (v, o) = sh.st.lock().remote_ece;
        e.vendor_id = v;
        e.options = o;
        e.comp_mask = 0;
        Ok(())
    })
}

/// Joins a multicast group (MULTICAST_JOIN, with `context` as its private data).
///
/// # Safety
/// `addr` is a socket address.
#[no_mangle]
pub unsafe extern "C" fn rdma_join_multicast(
    id: *mut rdma_cm_id,
    addr: *mut sockaddr,
    context: *mut c_void,
) -> c_int {
    on_id(id, |sh| {
        // SAFETY: the caller's contract.
        let a = unsafe { Addr::read(addr) }?;
        crate::cm::mcast::join(sh, id, a, context)
    })
}

/// As [`rdma_join_multicast`], with join flags (full or send-only member).
///
/// # Safety
/// `attr` is valid and its address a socket address.
#[no_mangle]
pub unsafe extern "C" fn rdma_join_multicast_ex(
    id: *mut rdma_cm_id,
    attr: *mut rdma_cm_join_mc_attr_ex,
    context: *mut c_void,
) -> c_int {
    on_id(id, |sh| {
        // SAFETY: the caller's contract.
        let a = unsafe { attr.as_ref() }.ok_or(libc::EINVAL)?;
        let need = RDMA_CM_JOIN_MC_ATTR_ADDRESS | RDMA_CM_JOIN_MC_ATTR_JOIN_FLAGS;
        if a.comp_mask & need != need
            || a.comp_mask & !need != 0
            || a.join_flags > RDMA_MC_JOIN_FLAG_SENDONLY_FULLMEMBER
        {
            return Err(libc::EINVAL);
        }
        // SAFETY: as above.
        let addr = unsafe { Addr::read(a.addr) }?;
        crate::cm::mcast::join(sh, id, addr, context)
    })
}

/// Leaves a multicast group.
///
/// # Safety
/// `addr` is a socket address.
#[no_mangle]
pub unsafe extern "C" fn rdma_leave_multicast(id: *mut rdma_cm_id, addr: *mut sockaddr) -> c_int {
    on_id(id, |sh| {
        // SAFETY: the caller's contract.
        let a = unsafe { Addr::read(addr) }?;
        crate::cm::mcast::leave(sh, id, a)
    })
}
