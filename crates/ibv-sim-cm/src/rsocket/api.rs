//! The public librdmacm API rsockets are built on, as any librdmacm
//! program calls it (these are this library's own exports, reached by
//! their C names).

use core::ffi::{c_int, c_void};

use libc::sockaddr;
use rdmacm_abi::*;
use verbs_abi::{ibv_pd, ibv_qp_init_attr};

extern "C" {
    pub fn rdma_create_event_channel() -> *mut rdma_event_channel;
    pub fn rdma_destroy_event_channel(channel: *mut rdma_event_channel);
    pub fn rdma_get_cm_event(
        channel: *mut rdma_event_channel,
        event: *mut *mut rdma_cm_event,
    ) -> c_int;
    pub fn rdma_ack_cm_event(event: *mut rdma_cm_event) -> c_int;
    pub fn rdma_create_id(
        channel: *mut rdma_event_channel,
        id: *mut *mut rdma_cm_id,
        context: *mut c_void,
        ps: u32,
    ) -> c_int;
    pub fn rdma_destroy_id(id: *mut rdma_cm_id) -> c_int;
    pub fn rdma_bind_addr(id: *mut rdma_cm_id, addr: *mut sockaddr) -> c_int;
    pub fn rdma_listen(id: *mut rdma_cm_id, backlog: c_int) -> c_int;
    pub fn rdma_resolve_addr(
        id: *mut rdma_cm_id,
        src: *mut sockaddr,
        dst: *mut sockaddr,
        timeout_ms: c_int,
    ) -> c_int;
    pub fn rdma_resolve_route(id: *mut rdma_cm_id, timeout_ms: c_int) -> c_int;
    pub fn rdma_migrate_id(id: *mut rdma_cm_id, channel: *mut rdma_event_channel) -> c_int;
    pub fn rdma_create_qp(
        id: *mut rdma_cm_id,
        pd: *mut ibv_pd,
        attr: *mut ibv_qp_init_attr,
    ) -> c_int;
    pub fn rdma_destroy_qp(id: *mut rdma_cm_id);
    pub fn rdma_connect(id: *mut rdma_cm_id, param: *mut rdma_conn_param) -> c_int;
    pub fn rdma_accept(id: *mut rdma_cm_id, param: *mut rdma_conn_param) -> c_int;
    pub fn rdma_reject(id: *mut rdma_cm_id, data: *const c_void, len: u8) -> c_int;
    pub fn rdma_disconnect(id: *mut rdma_cm_id) -> c_int;
}
