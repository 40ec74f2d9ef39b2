//! The `@IBVERBS_1.0` compat entry points (binaries linked before
//! rdma-core's 1.1 ABI, with the old struct layouts). The sim does not
//! simulate the old layouts: every one of them fails cleanly, NULL or an
//! error with errno `EOPNOTSUPP` (the `void` ones do nothing), whatever
//! arguments it is given. `build.rs` turns each `NAME__compat_IBVERBS_1_0`
//! into `NAME@IBVERBS_1.0`.
//!
//! The arguments are not declared: they are never read, and on x86_64 a
//! caller passing arguments to a function that ignores them is harmless.

// The `.symver` directives that give this module's exports their versions.
#[cfg(not(test))]
core::arch::global_asm!(include_str!(concat!(env!("OUT_DIR"), "/symver_compat.s")));

use core::ffi::{c_int, c_void};

use crate::guard::set_errno;

fn fail_ptr() -> *mut c_void {
    set_errno(libc::EOPNOTSUPP);
    core::ptr::null_mut()
}

fn fail_int(v: c_int) -> c_int {
    set_errno(libc::EOPNOTSUPP);
    v
}

#[no_mangle]
pub unsafe extern "C" fn ibv_ack_async_event__compat_IBVERBS_1_0() {}

#[no_mangle]
pub unsafe extern "C" fn ibv_ack_cq_events__compat_IBVERBS_1_0() {}

#[no_mangle]
pub unsafe extern "C" fn ibv_alloc_pd__compat_IBVERBS_1_0() -> *mut c_void {
    fail_ptr()
}

#[no_mangle]
pub unsafe extern "C" fn ibv_attach_mcast__compat_IBVERBS_1_0() -> c_int {
    fail_int(libc::EOPNOTSUPP)
}

#[no_mangle]
pub unsafe extern "C" fn ibv_close_device__compat_IBVERBS_1_0() -> c_int {
    fail_int(-1)
}

#[no_mangle]
pub unsafe extern "C" fn ibv_create_ah__compat_IBVERBS_1_0() -> *mut c_void {
    fail_ptr()
}

#[no_mangle]
pub unsafe extern "C" fn ibv_create_cq__compat_IBVERBS_1_0() -> *mut c_void {
    fail_ptr()
}

#[no_mangle]
pub unsafe extern "C" fn ibv_create_qp__compat_IBVERBS_1_0() -> *mut c_void {
    fail_ptr()
}

#[no_mangle]
pub unsafe extern "C" fn ibv_create_srq__compat_IBVERBS_1_0() -> *mut c_void {
    fail_ptr()
}

#[no_mangle]
pub unsafe extern "C" fn ibv_dealloc_pd__compat_IBVERBS_1_0() -> c_int {
    fail_int(libc::EOPNOTSUPP)
}

#[no_mangle]
pub unsafe extern "C" fn ibv_dereg_mr__compat_IBVERBS_1_0() -> c_int {
    fail_int(libc::EOPNOTSUPP)
}

#[no_mangle]
pub unsafe extern "C" fn ibv_destroy_ah__compat_IBVERBS_1_0() -> c_int {
    fail_int(libc::EOPNOTSUPP)
}

#[no_mangle]
pub unsafe extern "C" fn ibv_destroy_cq__compat_IBVERBS_1_0() -> c_int {
    fail_int(libc::EOPNOTSUPP)
}

#[no_mangle]
pub unsafe extern "C" fn ibv_destroy_qp__compat_IBVERBS_1_0() -> c_int {
    fail_int(libc::EOPNOTSUPP)
}

#[no_mangle]
pub unsafe extern "C" fn ibv_destroy_srq__compat_IBVERBS_1_0() -> c_int {
    fail_int(libc::EOPNOTSUPP)
}

#[no_mangle]
pub unsafe extern "C" fn ibv_detach_mcast__compat_IBVERBS_1_0() -> c_int {
    fail_int(libc::EOPNOTSUPP)
}

#[no_mangle]
pub unsafe extern "C" fn ibv_free_device_list__compat_IBVERBS_1_0() {}

#[no_mangle]
pub unsafe extern "C" fn ibv_get_async_event__compat_IBVERBS_1_0() -> c_int {
    fail_int(-1)
}

#[no_mangle]
pub unsafe extern "C" fn ibv_get_cq_event__compat_IBVERBS_1_0() -> c_int {
    fail_int(-1)
}

#[no_mangle]
pub unsafe extern "C" fn ibv_get_device_guid__compat_IBVERBS_1_0() -> u64 {
    set_errno(libc::EOPNOTSUPP);
    0
}

#[no_mangle]
pub unsafe extern "C" fn ibv_get_device_list__compat_IBVERBS_1_0() -> *mut c_void {
    fail_ptr()
}

#[no_mangle]
pub unsafe extern "C" fn ibv_get_device_name__compat_IBVERBS_1_0() -> *mut c_void {
    fail_ptr()
}

#[no_mangle]
pub unsafe extern "C" fn ibv_modify_qp__compat_IBVERBS_1_0() -> c_int {
    fail_int(libc::EOPNOTSUPP)
}

#[no_mangle]
pub unsafe extern "C" fn ibv_modify_srq__compat_IBVERBS_1_0() -> c_int {
    fail_int(libc::EOPNOTSUPP)
}

#[no_mangle]
pub unsafe extern "C" fn ibv_open_device__compat_IBVERBS_1_0() -> *mut c_void {
    fail_ptr()
}

#[no_mangle]
pub unsafe extern "C" fn ibv_query_device__compat_IBVERBS_1_0() -> c_int {
    fail_int(libc::EOPNOTSUPP)
}

#[no_mangle]
pub unsafe extern "C" fn ibv_query_gid__compat_IBVERBS_1_0() -> c_int {
    fail_int(-1)
}

#[no_mangle]
pub unsafe extern "C" fn ibv_query_pkey__compat_IBVERBS_1_0() -> c_int {
    fail_int(-1)
}

#[no_mangle]
pub unsafe extern "C" fn ibv_query_port__compat_IBVERBS_1_0() -> c_int {
    fail_int(libc::EOPNOTSUPP)
}

#[no_mangle]
pub unsafe extern "C" fn ibv_query_qp__compat_IBVERBS_1_0() -> c_int {
    fail_int(libc::EOPNOTSUPP)
}

#[no_mangle]
pub unsafe extern "C" fn ibv_query_srq__compat_IBVERBS_1_0() -> c_int {
    fail_int(libc::EOPNOTSUPP)
}

#[no_mangle]
pub unsafe extern "C" fn ibv_reg_mr__compat_IBVERBS_1_0() -> *mut c_void {
    fail_ptr()
}

#[no_mangle]
pub unsafe extern "C" fn ibv_resize_cq__compat_IBVERBS_1_0() -> c_int {
    fail_int(libc::EOPNOTSUPP)
}

/// `ibv_register_driver@IBVERBS_1.1`: the pre-plugin driver API, gone from
/// rdma-core long ago; like rdma-core, warn and ignore.
#[no_mangle]
pub unsafe extern "C" fn ibv_register_driver__compat_IBVERBS_1_1() {
    eprintln!("libibverbs: ibv_register_driver is obsolete and ignored");
}
