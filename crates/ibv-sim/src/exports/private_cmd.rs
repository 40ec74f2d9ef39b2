//! `IBVERBS_PRIVATE_34`'s kernel commands (`ibv_cmd_*`), for provider
//! plugins linked into a sim process (see `private`): the sim has no kernel,
//! so every one fails with `EOPNOTSUPP` in its own convention.

// The `.symver` directives that give this module's functions their versions.
#[cfg(not(test))]
core::arch::global_asm!(include_str!(concat!(
    env!("OUT_DIR"),
    "/symver_private_cmd.s"
)));

use core::ffi::{c_int, c_uint, c_void};

use verbs_abi::{
    ibv_context, ibv_cq, ibv_device_attr_ex, ibv_port_attr, ibv_qp, ibv_qp_attr, ibv_qp_init_attr,
    ibv_query_device_ex_input, ibv_recv_wr, ibv_send_wr, ibv_srq, ibv_wc,
};

use super::private::no_kernel;
use crate::guard;

// Opaque rdma-core types (`verbs_*`, command and response buffers) are
// `*mut c_void`; the sim never reads them.

#[no_mangle]
pub unsafe extern "C" fn ibv_cmd_get_context(
    _ctx: *mut c_void,
    _cmd: *mut c_void,
    _cmd_size: usize,
    _resp: *mut c_void,
    _resp_size: usize,
) -> c_int {
    no_kernel()
}

#[no_mangle]
pub unsafe extern "C" fn ibv_cmd_query_context(
    _ctx: *mut ibv_context,
    _driver: *mut c_void,
) -> c_int {
    no_kernel()
}

#[no_mangle]
pub unsafe extern "C" fn ibv_cmd_query_device_any(
    _ctx: *mut ibv_context,
    _input: *const ibv_query_device_ex_input,
    _attr: *mut ibv_device_attr_ex,
    _attr_size: usize,
    _resp: *mut c_void,
    _resp_size: *mut usize,
) -> c_int {
    no_kernel()
}

#[no_mangle]
pub unsafe extern "C" fn ibv_cmd_query_port(
    _ctx: *mut ibv_context,
    _port_num: u8,
    _port_attr: *mut ibv_port_attr,
    _cmd: *mut c_void,
    _cmd_size: usize,
) -> c_int {
    no_kernel()
}

#[no_mangle]
pub unsafe extern "C" fn ibv_cmd_alloc_pd(
    _ctx: *mut ibv_context,
    _pd: *mut c_void,
    _cmd: *mut c_void,
    _cmd_size: usize,
    _resp: *mut c_void,
    _resp_size: usize,
) -> c_int {
    no_kernel()
}

#[no_mangle]
pub unsafe extern "C" fn ibv_cmd_dealloc_pd(_pd: *mut c_void) -> c_int {
    no_kernel()
}

#[no_mangle]
pub unsafe extern "C" fn ibv_cmd_open_xrcd(
    _ctx: *mut ibv_context,
    _xrcd: *mut c_void,
    _vxrcd_size: c_int,
    _attr: *mut c_void,
    _cmd: *mut c_void,
    _cmd_size: usize,
    _resp: *mut c_void,
    _resp_size: usize,
) -> c_int {
    no_kernel()
}

#[no_mangle]
pub unsafe extern "C" fn ibv_cmd_close_xrcd(_xrcd: *mut c_void) -> c_int {
    no_kernel()
}

#[no_mangle]
pub unsafe extern "C" fn ibv_cmd_reg_mr(
    _pd: *mut c_void,
    _addr: *mut c_void,
    _length: usize,
    _hca_va: u64,
    _access: c_int,
    _vmr: *mut c_void,
    _cmd: *mut c_void,
    _cmd_size: usize,
    _resp: *mut c_void,
    _resp_size: usize,
) -> c_int {
    no_kernel()
}

#[no_mangle]
pub unsafe extern "C" fn ibv_cmd_rereg_mr(
    _vmr: *mut c_void,
    _flags: u32,
    _addr: *mut c_void,
    _length: usize,
    _hca_va: u64,
    _access: c_int,
    _pd: *mut c_void,
    _cmd: *mut c_void,
    _cmd_size: usize,
    _resp: *mut c_void,
    _resp_size: usize,
) -> c_int {
    no_kernel()
}

#[no_mangle]
pub unsafe extern "C" fn ibv_cmd_dereg_mr(_vmr: *mut c_void) -> c_int {
    no_kernel()
}

#[no_mangle]
pub unsafe extern "C" fn ibv_cmd_query_mr(
    _pd: *mut c_void,
    _vmr: *mut c_void,
    _handle: u32,
) -> c_int {
    no_kernel()
}

#[no_mangle]
pub unsafe extern "C" fn ibv_cmd_advise_mr(
    _pd: *mut c_void,
    _advice: c_int,
    _flags: u32,
    _sg_list: *mut c_void,
    _num_sge: u32,
) -> c_int {
    no_kernel()
}

#[no_mangle]
pub unsafe extern "C" fn ibv_cmd_reg_dmabuf_mr(
    _pd: *mut c_void,
    _offset: u64,
    _length: usize,
    _iova: u64,
    _fd: c_int,
    _access: c_int,
    _vmr: *mut c_void,
) -> c_int {
    no_kernel()
}

#[no_mangle]
pub unsafe extern "C" fn ibv_cmd_alloc_mw(
    _pd: *mut c_void,
    _type: c_int,
    _mw: *mut c_void,
    _cmd: *mut c_void,
    _cmd_size: usize,
    _resp: *mut c_void,
    _resp_size: usize,
) -> c_int {
    no_kernel()
}

#[no_mangle]
pub unsafe extern "C" fn ibv_cmd_dealloc_mw(_mw: *mut c_void) -> c_int {
    no_kernel()
}

#[no_mangle]
pub unsafe extern "C" fn ibv_cmd_create_cq(
    _ctx: *mut ibv_context,
    _cqe: c_int,
    _channel: *mut c_void,
    _comp_vector: c_int,
    _cq: *mut c_void,
    _cmd: *mut c_void,
    _cmd_size: usize,
    _resp: *mut c_void,
    _resp_size: usize,
) -> c_int {
    no_kernel()
}

#[no_mangle]
pub unsafe extern "C" fn ibv_cmd_create_cq_ex(
    _ctx: *mut ibv_context,
    _attr: *const c_void,
    _cq: *mut c_void,
    _cmd: *mut c_void,
    _cmd_size: usize,
    _resp: *mut c_void,
    _resp_size: usize,
    _cmd_flags: u32,
) -> c_int {
    no_kernel()
}

/// `int ibv_cmd_poll_cq(struct ibv_cq *, int ne, struct ibv_wc *)`: a
/// count, or -1 with errno like `ibv_poll_cq`'s failure.
#[no_mangle]
pub unsafe extern "C" fn ibv_cmd_poll_cq(_cq: *mut ibv_cq, _ne: c_int, _wc: *mut ibv_wc) -> c_int {
    guard::minus_one(|| Err(libc::EOPNOTSUPP))
}

#[no_mangle]
pub unsafe extern "C" fn ibv_cmd_req_notify_cq(_cq: *mut ibv_cq, _solicited_only: c_int) -> c_int {
    no_kernel()
}

#[no_mangle]
pub unsafe extern "C" fn ibv_cmd_resize_cq(
    _cq: *mut ibv_cq,
    _cqe: c_int,
    _cmd: *mut c_void,
    _cmd_size: usize,
    _resp: *mut c_void,
    _resp_size: usize,
) -> c_int {
    no_kernel()
}

#[no_mangle]
pub unsafe extern "C" fn ibv_cmd_destroy_cq(_cq: *mut ibv_cq) -> c_int {
    no_kernel()
}

#[no_mangle]
pub unsafe extern "C" fn ibv_cmd_modify_cq(
    _cq: *mut ibv_cq,
    _attr: *mut c_void,
    _cmd: *mut c_void,
    _cmd_size: usize,
) -> c_int {
    no_kernel()
}

#[no_mangle]
pub unsafe extern "C" fn ibv_cmd_create_srq(
    _pd: *mut c_void,
    _srq: *mut ibv_srq,
    _attr: *mut c_void,
    _cmd: *mut c_void,
    _cmd_size: usize,
    _resp: *mut c_void,
    _resp_size: usize,
) -> c_int {
    no_kernel()
}

#[no_mangle]
pub unsafe extern "C" fn ibv_cmd_create_srq_ex(
    _ctx: *mut ibv_context,
    _srq: *mut c_void,
    _attr: *mut c_void,
    _cmd: *mut c_void,
    _cmd_size: usize,
    _resp: *mut c_void,
    _resp_size: usize,
) -> c_int {
    no_kernel()
}

#[no_mangle]
pub unsafe extern "C" fn ibv_cmd_modify_srq(
    _srq: *mut ibv_srq,
    _attr: *mut c_void,
    _attr_mask: c_int,
    _cmd: *mut c_void,
    _cmd_size: usize,
) -> c_int {
    no_kernel()
}

#[no_mangle]
pub unsafe extern "C" fn ibv_cmd_query_srq(
    _srq: *mut ibv_srq,
    _attr: *mut c_void,
    _cmd: *mut c_void,
    _cmd_size: usize,
) -> c_int {
    no_kernel()
}

#[no_mangle]
pub unsafe extern "C" fn ibv_cmd_destroy_srq(_srq: *mut ibv_srq) -> c_int {
    no_kernel()
}

#[no_mangle]
pub unsafe extern "C" fn ibv_cmd_create_qp(
    _pd: *mut c_void,
    _qp: *mut ibv_qp,
    _attr: *mut ibv_qp_init_attr,
    _cmd: *mut c_void,
    _cmd_size: usize,
    _resp: *mut c_void,
    _resp_size: usize,
) -> c_int {
    no_kernel()
}

#[no_mangle]
pub unsafe extern "C" fn ibv_cmd_create_qp_ex(
    _ctx: *mut ibv_context,
    _qp: *mut c_void,
    _attr: *mut c_void,
    _cmd: *mut c_void,
    _cmd_size: usize,
    _resp: *mut c_void,
    _resp_size: usize,
) -> c_int {
    no_kernel()
}

#[no_mangle]
pub unsafe extern "C" fn ibv_cmd_create_qp_ex2(
    _ctx: *mut ibv_context,
    _qp: *mut c_void,
    _attr: *mut c_void,
    _cmd: *mut c_void,
    _cmd_size: usize,
    _resp: *mut c_void,
    _resp_size: usize,
) -> c_int {
    no_kernel()
}

#[no_mangle]
pub unsafe extern "C" fn ibv_cmd_open_qp(
    _ctx: *mut ibv_context,
    _qp: *mut c_void,
    _vqp_sz: c_int,
    _attr: *mut c_void,
    _cmd: *mut c_void,
    _cmd_size: usize,
    _resp: *mut c_void,
    _resp_size: usize,
) -> c_int {
    no_kernel()
}

#[no_mangle]
pub unsafe extern "C" fn ibv_cmd_query_qp(
    _qp: *mut ibv_qp,
    _attr: *mut ibv_qp_attr,
    _attr_mask: c_int,
    _init_attr: *mut ibv_qp_init_attr,
    _cmd: *mut c_void,
    _cmd_size: usize,
) -> c_int {
    no_kernel()
}

#[no_mangle]
pub unsafe extern "C" fn ibv_cmd_modify_qp(
    _qp: *mut ibv_qp,
    _attr: *mut ibv_qp_attr,
    _attr_mask: c_int,
    _cmd: *mut c_void,
    _cmd_size: usize,
) -> c_int {
    no_kernel()
}

#[no_mangle]
pub unsafe extern "C" fn ibv_cmd_modify_qp_ex(
    _qp: *mut ibv_qp,
    _attr: *mut ibv_qp_attr,
    _attr_mask: c_int,
    _cmd: *mut c_void,
    _cmd_size: usize,
    _resp: *mut c_void,
    _resp_size: usize,
) -> c_int {
    no_kernel()
}

#[no_mangle]
pub unsafe extern "C" fn ibv_cmd_destroy_qp(_qp: *mut ibv_qp) -> c_int {
    no_kernel()
}

#[no_mangle]
pub unsafe extern "C" fn ibv_cmd_post_send(
    _qp: *mut ibv_qp,
    _wr: *mut ibv_send_wr,
    _bad_wr: *mut *mut ibv_send_wr,
) -> c_int {
    no_kernel()
}

#[no_mangle]
pub unsafe extern "C" fn ibv_cmd_post_recv(
    _qp: *mut ibv_qp,
    _wr: *mut ibv_recv_wr,
    _bad_wr: *mut *mut ibv_recv_wr,
) -> c_int {
    no_kernel()
}

#[no_mangle]
pub unsafe extern "C" fn ibv_cmd_post_srq_recv(
    _srq: *mut ibv_srq,
    _wr: *mut ibv_recv_wr,
    _bad_wr: *mut *mut ibv_recv_wr,
) -> c_int {
    no_kernel()
}

#[no_mangle]
pub unsafe extern "C" fn ibv_cmd_create_ah(
    _pd: *mut c_void,
    _ah: *mut c_void,
    _attr: *mut c_void,
    _resp: *mut c_void,
    _resp_size: usize,
) -> c_int {
    no_kernel()
}

#[no_mangle]
pub unsafe extern "C" fn ibv_cmd_destroy_ah(_ah: *mut c_void) -> c_int {
    no_kernel()
}

#[no_mangle]
pub unsafe extern "C" fn ibv_cmd_attach_mcast(
    _qp: *mut ibv_qp,
    _gid: *const c_void,
    _lid: u16,
) -> c_int {
    no_kernel()
}

#[no_mangle]
pub unsafe extern "C" fn ibv_cmd_detach_mcast(
    _qp: *mut ibv_qp,
    _gid: *const c_void,
    _lid: u16,
) -> c_int {
    no_kernel()
}

#[no_mangle]
pub unsafe extern "C" fn ibv_cmd_create_flow(
    _qp: *mut ibv_qp,
    _flow: *mut c_void,
    _attr: *mut c_void,
    _ucmd: *mut c_void,
    _ucmd_size: usize,
) -> c_int {
    no_kernel()
}

#[no_mangle]
pub unsafe extern "C" fn ibv_cmd_destroy_flow(_flow: *mut c_void) -> c_int {
    no_kernel()
}

#[no_mangle]
pub unsafe extern "C" fn ibv_cmd_create_flow_action_esp(
    _ctx: *mut ibv_context,
    _attr: *mut c_void,
    _action: *mut c_void,
    _driver: *mut c_void,
) -> c_int {
    no_kernel()
}

#[no_mangle]
pub unsafe extern "C" fn ibv_cmd_modify_flow_action_esp(
    _action: *mut c_void,
    _attr: *mut c_void,
    _driver: *mut c_void,
) -> c_int {
    no_kernel()
}

#[no_mangle]
pub unsafe extern "C" fn ibv_cmd_destroy_flow_action(_action: *mut c_void) -> c_int {
    no_kernel()
}

#[no_mangle]
pub unsafe extern "C" fn ibv_cmd_create_wq(
    _ctx: *mut ibv_context,
    _attr: *mut c_void,
    _wq: *mut c_void,
    _cmd: *mut c_void,
    _cmd_size: usize,
    _resp: *mut c_void,
    _resp_size: usize,
) -> c_int {
    no_kernel()
}

#[no_mangle]
pub unsafe extern "C" fn ibv_cmd_modify_wq(
    _wq: *mut c_void,
    _attr: *mut c_void,
    _cmd: *mut c_void,
    _cmd_size: usize,
) -> c_int {
    no_kernel()
}

#[no_mangle]
pub unsafe extern "C" fn ibv_cmd_destroy_wq(_wq: *mut c_void) -> c_int {
    no_kernel()
}

#[no_mangle]
pub unsafe extern "C" fn ibv_cmd_create_rwq_ind_table(
    _ctx: *mut ibv_context,
    _attr: *mut c_void,
    _table: *mut c_void,
    _resp: *mut c_void,
    _resp_size: usize,
) -> c_int {
    no_kernel()
}

#[no_mangle]
pub unsafe extern "C" fn ibv_cmd_destroy_rwq_ind_table(_table: *mut c_void) -> c_int {
    no_kernel()
}

#[no_mangle]
pub unsafe extern "C" fn ibv_cmd_create_counters(
    _ctx: *mut ibv_context,
    _attr: *mut c_void,
    _counters: *mut c_void,
    _link: *mut c_void,
) -> c_int {
    no_kernel()
}

#[no_mangle]
pub unsafe extern "C" fn ibv_cmd_destroy_counters(_counters: *mut c_void) -> c_int {
    no_kernel()
}

#[no_mangle]
pub unsafe extern "C" fn ibv_cmd_read_counters(
    _counters: *mut c_void,
    _values: *mut u64,
    _ncounters: u32,
    _flags: u32,
    _link: *mut c_void,
) -> c_int {
    no_kernel()
}

#[no_mangle]
pub unsafe extern "C" fn ibv_cmd_alloc_dm(
    _ctx: *mut ibv_context,
    _attr: *const c_void,
    _dm: *mut c_void,
    _link: *mut c_void,
) -> c_int {
    no_kernel()
}

#[no_mangle]
pub unsafe extern "C" fn ibv_cmd_free_dm(_dm: *mut c_void) -> c_int {
    no_kernel()
}

#[no_mangle]
pub unsafe extern "C" fn ibv_cmd_reg_dm_mr(
    _pd: *mut c_void,
    _dm: *mut c_void,
    _offset: u64,
    _length: usize,
    _access: c_uint,
    _vmr: *mut c_void,
    _link: *mut c_void,
) -> c_int {
    no_kernel()
}
