//! Device memory (`ibv_alloc_dm`), thread and parent domains, and
//! `ibv_advise_mr`'s advice.

use core::ffi::{c_int, c_void};

use crate::{ibv_context, ibv_pd};

/// `ibv_advise_mr` advice.
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ibv_advise_mr_advice {
    IBV_ADVISE_MR_ADVICE_PREFETCH = 0,
    IBV_ADVISE_MR_ADVICE_PREFETCH_WRITE = 1,
    IBV_ADVISE_MR_ADVICE_PREFETCH_NO_FAULT = 2,
}

/// Attributes for `ibv_alloc_dm`.
#[repr(C)]
#[derive(Clone, Copy, Default)]
pub struct ibv_alloc_dm_attr {
    pub length: usize,
    pub log_align_req: u32,
    pub comp_mask: u32,
}

/// Device memory.
#[repr(C)]
pub struct ibv_dm {
    pub context: *mut ibv_context,
    pub memcpy_to_dm: Option<
        unsafe extern "C" fn(
            dm: *mut ibv_dm,
            dm_offset: u64,
            host_addr: *const c_void,
            length: usize,
        ) -> c_int,
    >,
    pub memcpy_from_dm: Option<
        unsafe extern "C" fn(
            host_addr: *mut c_void,
            dm: *mut ibv_dm,
            dm_offset: u64,
            length: usize,
        ) -> c_int,
    >,
    pub comp_mask: u32,
    pub handle: u32,
}

/// A thread domain.
#[repr(C)]
pub struct ibv_td {
    pub context: *mut ibv_context,
}

/// Attributes for `ibv_alloc_td`.
#[repr(C)]
#[derive(Clone, Copy, Default)]
pub struct ibv_td_init_attr {
    pub comp_mask: u32,
}

/// Attributes for `ibv_alloc_parent_domain`.
#[repr(C)]
#[derive(Clone, Copy)]
pub struct ibv_parent_domain_init_attr {
    pub pd: *mut ibv_pd,
    pub td: *mut ibv_td,
    pub comp_mask: u32,
    pub alloc: Option<
        unsafe extern "C" fn(
            pd: *mut ibv_pd,
            pd_context: *mut c_void,
            size: usize,
            alignment: usize,
            resource_type: u64,
        ) -> *mut c_void,
    >,
    pub free: Option<
        unsafe extern "C" fn(
            pd: *mut ibv_pd,
            pd_context: *mut c_void,
            ptr: *mut c_void,
            resource_type: u64,
        ),
    >,
    pub pd_context: *mut c_void,
}

crate::assert_layout!(ibv_alloc_dm_attr, 16, 8; length => 0, log_align_req => 8, comp_mask => 12);
crate::assert_layout!(ibv_dm, 32, 8;
    context => 0, memcpy_to_dm => 8, memcpy_from_dm => 16, comp_mask => 24, handle => 28);
crate::assert_layout!(ibv_td, 8, 8; context => 0);
crate::assert_layout!(ibv_td_init_attr, 4, 4; comp_mask => 0);
crate::assert_layout!(ibv_parent_domain_init_attr, 48, 8;
    pd => 0, td => 8, comp_mask => 16, alloc => 24, free => 32, pd_context => 40);
