//! Receive work queues and their indirection tables (RSS).

use core::ffi::{c_int, c_void};

use crate::{ibv_context, ibv_cq, ibv_pd, ibv_recv_wr, raw};

/// State of a receive work queue.
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ibv_wq_state {
    IBV_WQS_RESET = 0,
    IBV_WQS_RDY = 1,
    IBV_WQS_ERR = 2,
    IBV_WQS_UNKNOWN = 3,
}

/// Kind of work queue.
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ibv_wq_type {
    IBV_WQT_RQ = 0,
}

/// A receive work queue.
#[repr(C)]
pub struct ibv_wq {
    pub context: *mut ibv_context,
    pub wq_context: *mut c_void,
    pub pd: *mut ibv_pd,
    pub cq: *mut ibv_cq,
    pub wq_num: u32,
    pub handle: u32,
    /// Read as `c_int` (see the `device` module docs).
    pub state: raw::ibv_wq_state,
    /// Read as `c_int` (see the `device` module docs).
    pub wq_type: raw::ibv_wq_type,
    pub post_recv: Option<
        unsafe extern "C" fn(
            current: *mut ibv_wq,
            recv_wr: *mut ibv_recv_wr,
            bad_recv_wr: *mut *mut ibv_recv_wr,
        ) -> c_int,
    >,
    pub mutex: libc::pthread_mutex_t,
    pub cond: libc::pthread_cond_t,
    pub events_completed: u32,
    pub comp_mask: u32,
}

/// Attributes for `ibv_create_wq`.
#[repr(C)]
#[derive(Clone, Copy)]
pub struct ibv_wq_init_attr {
    pub wq_context: *mut c_void,
    /// Read as `c_int` (see the `device` module docs).
    pub wq_type: raw::ibv_wq_type,
    pub max_wr: u32,
    pub max_sge: u32,
    pub pd: *mut ibv_pd,
    pub cq: *mut ibv_cq,
    pub comp_mask: u32,
    pub create_flags: u32,
}

/// Attributes for `ibv_modify_wq`.
#[repr(C)]
#[derive(Clone, Copy)]
pub struct ibv_wq_attr {
    pub attr_mask: u32,
    /// Read as `c_int` (see the `device` module docs).
    pub wq_state: raw::ibv_wq_state,
    /// Read as `c_int` (see the `device` module docs).
    pub curr_wq_state: raw::ibv_wq_state,
    pub flags: u32,
    pub flags_mask: u32,
}

/// A receive work queue indirection table (RSS).
#[repr(C)]
pub struct ibv_rwq_ind_table {
    pub context: *mut ibv_context,
    pub ind_tbl_handle: c_int,
    pub ind_tbl_num: c_int,
    pub comp_mask: u32,
}

/// Attributes for `ibv_create_rwq_ind_table`.
#[repr(C)]
#[derive(Clone, Copy)]
pub struct ibv_rwq_ind_table_init_attr {
    pub log_ind_tbl_size: u32,
    pub ind_tbl: *mut *mut ibv_wq,
    pub comp_mask: u32,
}

crate::assert_layout!(ibv_wq_state, 4, 4);
crate::assert_layout!(ibv_wq, 152, 8;
    context => 0, wq_context => 8, pd => 16, cq => 24, wq_num => 32, handle => 36,
    state => 40, wq_type => 44, post_recv => 48, mutex => 56, cond => 96,
    events_completed => 144, comp_mask => 148);
crate::assert_layout!(ibv_wq_init_attr, 48, 8;
    wq_context => 0, wq_type => 8, max_wr => 12, max_sge => 16, pd => 24, cq => 32,
    comp_mask => 40, create_flags => 44);
crate::assert_layout!(ibv_wq_attr, 20, 4;
    attr_mask => 0, wq_state => 4, curr_wq_state => 8, flags => 12, flags_mask => 16);
crate::assert_layout!(ibv_rwq_ind_table, 24, 8;
    context => 0, ind_tbl_handle => 8, ind_tbl_num => 12, comp_mask => 16);
crate::assert_layout!(ibv_rwq_ind_table_init_attr, 24, 8;
    log_ind_tbl_size => 0, ind_tbl => 8, comp_mask => 16);
