//! Verbs the sim does not simulate: they fail the way rdma-core fails for
//! a device without the feature (NULL / an error, errno `EOPNOTSUPP`).

// The `.symver` directives that give this module's exports their versions.
#[cfg(not(test))]
core::arch::global_asm!(include_str!(concat!(
    env!("OUT_DIR"),
    "/symver_unsupported.s"
)));

use core::ffi::c_int;

use verbs_abi::{ibv_context, ibv_dm, ibv_ece, ibv_mr, ibv_pd, ibv_qp};

use crate::guard::{self, set_errno};

fn unsupported<T>() -> *mut T {
    set_errno(libc::EOPNOTSUPP);
    core::ptr::null_mut()
}

#[no_mangle]
pub unsafe extern "C" fn ibv_import_device(_cmd_fd: c_int) -> *mut ibv_context {
    guard::call(core::ptr::null_mut(), unsupported)
}

#[no_mangle]
pub unsafe extern "C" fn ibv_import_pd(_ctx: *mut ibv_context, _handle: u32) -> *mut ibv_pd {
    guard::call(core::ptr::null_mut(), unsupported)
}

#[no_mangle]
pub unsafe extern "C" fn ibv_unimport_pd(_pd: *mut ibv_pd) {}

#[no_mangle]
pub unsafe extern "C" fn ibv_import_mr(_pd: *mut ibv_pd, _handle: u32) -> *mut ibv_mr {
    guard::call(core::ptr::null_mut(), unsupported)
}

#[no_mangle]
pub unsafe extern "C" fn ibv_unimport_mr(_mr: *mut ibv_mr) {}

#[no_mangle]
pub unsafe extern "C" fn ibv_import_dm(_ctx: *mut ibv_context, _handle: u32) -> *mut ibv_dm {
    guard::call(core::ptr::null_mut(), unsupported)
}

#[no_mangle]
pub unsafe extern "C" fn ibv_unimport_dm(_dm: *mut ibv_dm) {}

#[no_mangle]
pub unsafe extern "C" fn ibv_reg_dmabuf_mr(
    _pd: *mut ibv_pd,
    _offset: u64,
    _length: usize,
    _iova: u64,
    _fd: c_int,
    _access: c_int,
) -> *mut ibv_mr {
    guard::call(core::ptr::null_mut(), unsupported)
}

#[no_mangle]
pub unsafe extern "C" fn ibv_query_qp_data_in_order(
    _qp: *mut ibv_qp,
    _op: c_int,
    _flags: u32,
) -> c_int {
    0
}

#[no_mangle]
pub unsafe extern "C" fn ibv_query_ece(_qp: *mut ibv_qp, _ece: *mut ibv_ece) -> c_int {
    set_errno(libc::EOPNOTSUPP);
    libc::EOPNOTSUPP
}

#[no_mangle]
pub unsafe extern "C" fn ibv_set_ece(_qp: *mut ibv_qp, _ece: *mut ibv_ece) -> c_int {
    set_errno(libc::EOPNOTSUPP);
    libc::EOPNOTSUPP
}
