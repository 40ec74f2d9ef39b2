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

/// One `#[no_mangle] extern "C"` stub per entry, with that C signature,
/// failing with `EOPNOTSUPP`: as an errno value, or `-> minus_one` for
/// the commands whose verb returns -1 and sets errno. build.rs reads the
/// names from this invocation to give each its symbol version.
macro_rules! no_kernel_commands {
    ($($name:ident($($arg:ident: $ty:ty),* $(,)?) $(-> $how:ident)?;)*) => {$(
        #[no_mangle]
        #[allow(unused_variables, clippy::too_many_arguments)]
        pub unsafe extern "C" fn $name($($arg: $ty),*) -> c_int {
            no_kernel_commands!(@fail $($how)?)
        }
    )*};
    (@fail) => {
        no_kernel()
    };
    (@fail minus_one) => {
        guard::minus_one(|| Err(libc::EOPNOTSUPP))
    };
}

// Opaque rdma-core types (`verbs_*`, command and response buffers) are
// `*mut c_void`; the sim never reads them.
no_kernel_commands! {
    ibv_cmd_get_context(ctx: *mut c_void, cmd: *mut c_void, cmd_size: usize, resp: *mut c_void, resp_size: usize);
    ibv_cmd_query_context(ctx: *mut ibv_context, driver: *mut c_void);
    ibv_cmd_query_device_any(ctx: *mut ibv_context, input: *const ibv_query_device_ex_input, attr: *mut ibv_device_attr_ex, attr_size: usize, resp: *mut c_void, resp_size: *mut usize);
    ibv_cmd_query_port(ctx: *mut ibv_context, port_num: u8, port_attr: *mut ibv_port_attr, cmd: *mut c_void, cmd_size: usize);
    ibv_cmd_alloc_pd(ctx: *mut ibv_context, pd: *mut c_void, cmd: *mut c_void, cmd_size: usize, resp: *mut c_void, resp_size: usize);
    ibv_cmd_dealloc_pd(pd: *mut c_void);
    ibv_cmd_open_xrcd(ctx: *mut ibv_context, xrcd: *mut c_void, vxrcd_size: c_int, attr: *mut c_void, cmd: *mut c_void, cmd_size: usize, resp: *mut c_void, resp_size: usize);
    ibv_cmd_close_xrcd(xrcd: *mut c_void);
    ibv_cmd_reg_mr(pd: *mut c_void, addr: *mut c_void, length: usize, hca_va: u64, access: c_int, vmr: *mut c_void, cmd: *mut c_void, cmd_size: usize, resp: *mut c_void, resp_size: usize);
    ibv_cmd_rereg_mr(vmr: *mut c_void, flags: u32, addr: *mut c_void, length: usize, hca_va: u64, access: c_int, pd: *mut c_void, cmd: *mut c_void, cmd_size: usize, resp: *mut c_void, resp_size: usize);
    ibv_cmd_dereg_mr(vmr: *mut c_void);
    ibv_cmd_query_mr(pd: *mut c_void, vmr: *mut c_void, handle: u32);
    ibv_cmd_advise_mr(pd: *mut c_void, advice: c_int, flags: u32, sg_list: *mut c_void, num_sge: u32);
    ibv_cmd_reg_dmabuf_mr(pd: *mut c_void, offset: u64, length: usize, iova: u64, fd: c_int, access: c_int, vmr: *mut c_void);
    ibv_cmd_alloc_mw(pd: *mut c_void, type_: c_int, mw: *mut c_void, cmd: *mut c_void, cmd_size: usize, resp: *mut c_void, resp_size: usize);
    ibv_cmd_dealloc_mw(mw: *mut c_void);
    ibv_cmd_create_cq(ctx: *mut ibv_context, cqe: c_int, channel: *mut c_void, comp_vector: c_int, cq: *mut c_void, cmd: *mut c_void, cmd_size: usize, resp: *mut c_void, resp_size: usize);
    ibv_cmd_create_cq_ex(ctx: *mut ibv_context, attr: *const c_void, cq: *mut c_void, cmd: *mut c_void, cmd_size: usize, resp: *mut c_void, resp_size: usize, cmd_flags: u32);
    ibv_cmd_poll_cq(cq: *mut ibv_cq, ne: c_int, wc: *mut ibv_wc) -> minus_one;
    ibv_cmd_req_notify_cq(cq: *mut ibv_cq, solicited_only: c_int);
    ibv_cmd_resize_cq(cq: *mut ibv_cq, cqe: c_int, cmd: *mut c_void, cmd_size: usize, resp: *mut c_void, resp_size: usize);
    ibv_cmd_destroy_cq(cq: *mut ibv_cq);
    ibv_cmd_modify_cq(cq: *mut ibv_cq, attr: *mut c_void, cmd: *mut c_void, cmd_size: usize);
    ibv_cmd_create_srq(pd: *mut c_void, srq: *mut ibv_srq, attr: *mut c_void, cmd: *mut c_void, cmd_size: usize, resp: *mut c_void, resp_size: usize);
    ibv_cmd_create_srq_ex(ctx: *mut ibv_context, srq: *mut c_void, attr: *mut c_void, cmd: *mut c_void, cmd_size: usize, resp: *mut c_void, resp_size: usize);
    ibv_cmd_modify_srq(srq: *mut ibv_srq, attr: *mut c_void, attr_mask: c_int, cmd: *mut c_void, cmd_size: usize);
    ibv_cmd_query_srq(srq: *mut ibv_srq, attr: *mut c_void, cmd: *mut c_void, cmd_size: usize);
    ibv_cmd_destroy_srq(srq: *mut ibv_srq);
    ibv_cmd_create_qp(pd: *mut c_void, qp: *mut ibv_qp, attr: *mut ibv_qp_init_attr, cmd: *mut c_void, cmd_size: usize, resp: *mut c_void, resp_size: usize);
    ibv_cmd_create_qp_ex(ctx: *mut ibv_context, qp: *mut c_void, attr: *mut c_void, cmd: *mut c_void, cmd_size: usize, resp: *mut c_void, resp_size: usize);
    ibv_cmd_create_qp_ex2(ctx: *mut ibv_context, qp: *mut c_void, attr: *mut c_void, cmd: *mut c_void, cmd_size: usize, resp: *mut c_void, resp_size: usize);
    ibv_cmd_open_qp(ctx: *mut ibv_context, qp: *mut c_void, vqp_sz: c_int, attr: *mut c_void, cmd: *mut c_void, cmd_size: usize, resp: *mut c_void, resp_size: usize);
    ibv_cmd_query_qp(qp: *mut ibv_qp, attr: *mut ibv_qp_attr, attr_mask: c_int, init_attr: *mut ibv_qp_init_attr, cmd: *mut c_void, cmd_size: usize);
    ibv_cmd_modify_qp(qp: *mut ibv_qp, attr: *mut ibv_qp_attr, attr_mask: c_int, cmd: *mut c_void, cmd_size: usize);
    ibv_cmd_modify_qp_ex(qp: *mut ibv_qp, attr: *mut ibv_qp_attr, attr_mask: c_int, cmd: *mut c_void, cmd_size: usize, resp: *mut c_void, resp_size: usize);
    ibv_cmd_destroy_qp(qp: *mut ibv_qp);
    ibv_cmd_post_send(qp: *mut ibv_qp, wr: *mut ibv_send_wr, bad_wr: *mut *mut ibv_send_wr);
    ibv_cmd_post_recv(qp: *mut ibv_qp, wr: *mut ibv_recv_wr, bad_wr: *mut *mut ibv_recv_wr);
    ibv_cmd_post_srq_recv(srq: *mut ibv_srq, wr: *mut ibv_recv_wr, bad_wr: *mut *mut ibv_recv_wr);
    ibv_cmd_create_ah(pd: *mut c_void, ah: *mut c_void, attr: *mut c_void, resp: *mut c_void, resp_size: usize);
    ibv_cmd_destroy_ah(ah: *mut c_void);
    ibv_cmd_attach_mcast(qp: *mut ibv_qp, gid: *const c_void, lid: u16);
    ibv_cmd_detach_mcast(qp: *mut ibv_qp, gid: *const c_void, lid: u16);
    ibv_cmd_create_flow(qp: *mut ibv_qp, flow: *mut c_void, attr: *mut c_void, ucmd: *mut c_void, ucmd_size: usize);
    ibv_cmd_destroy_flow(flow: *mut c_void);
    ibv_cmd_create_flow_action_esp(ctx: *mut ibv_context, attr: *mut c_void, action: *mut c_void, driver: *mut c_void);
    ibv_cmd_modify_flow_action_esp(action: *mut c_void, attr: *mut c_void, driver: *mut c_void);
    ibv_cmd_destroy_flow_action(action: *mut c_void);
    ibv_cmd_create_wq(ctx: *mut ibv_context, attr: *mut c_void, wq: *mut c_void, cmd: *mut c_void, cmd_size: usize, resp: *mut c_void, resp_size: usize);
    ibv_cmd_modify_wq(wq: *mut c_void, attr: *mut c_void, cmd: *mut c_void, cmd_size: usize);
    ibv_cmd_destroy_wq(wq: *mut c_void);
    ibv_cmd_create_rwq_ind_table(ctx: *mut ibv_context, attr: *mut c_void, table: *mut c_void, resp: *mut c_void, resp_size: usize);
    ibv_cmd_destroy_rwq_ind_table(table: *mut c_void);
    ibv_cmd_create_counters(ctx: *mut ibv_context, attr: *mut c_void, counters: *mut c_void, link: *mut c_void);
    ibv_cmd_destroy_counters(counters: *mut c_void);
    ibv_cmd_read_counters(counters: *mut c_void, values: *mut u64, ncounters: u32, flags: u32, link: *mut c_void);
    ibv_cmd_alloc_dm(ctx: *mut ibv_context, attr: *const c_void, dm: *mut c_void, link: *mut c_void);
    ibv_cmd_free_dm(dm: *mut c_void);
    ibv_cmd_reg_dm_mr(pd: *mut c_void, dm: *mut c_void, offset: u64, length: usize, access: c_uint, vmr: *mut c_void, link: *mut c_void);
}
