//! The extended SRQ and XRC: `ibv_srq_init_attr_ex` (basic, XRC, tag
//! matching), tag matching list operations, `ibv_open_xrcd`.

use core::ffi::{c_int, c_void};

use crate::{ibv_cq, ibv_pd, ibv_sge, ibv_srq_attr, ibv_xrcd, raw};

/// Kind of shared receive queue (`ibv_srq_init_attr_ex.srq_type`).
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ibv_srq_type {
    IBV_SRQT_BASIC = 0,
    IBV_SRQT_XRC = 1,
    IBV_SRQT_TM = 2,
}

/// Bits of `ibv_srq_init_attr_ex.comp_mask`.
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ibv_srq_init_attr_mask {
    IBV_SRQ_INIT_ATTR_TYPE = 1 << 0,
    IBV_SRQ_INIT_ATTR_PD = 1 << 1,
    IBV_SRQ_INIT_ATTR_XRCD = 1 << 2,
    IBV_SRQ_INIT_ATTR_CQ = 1 << 3,
    IBV_SRQ_INIT_ATTR_TM = 1 << 4,
    IBV_SRQ_INIT_ATTR_RESERVED = 1 << 5,
}

/// Tag matching limits of a TM SRQ.
#[repr(C)]
#[derive(Clone, Copy, Default)]
pub struct ibv_tm_cap {
    pub max_num_tags: u32,
    pub max_ops: u32,
}

/// Attributes for `ibv_create_srq_ex`; starts with the fields of `ibv_srq_init_attr`.
#[repr(C)]
#[derive(Clone, Copy)]
pub struct ibv_srq_init_attr_ex {
    pub srq_context: *mut c_void,
    pub attr: ibv_srq_attr,
    /// Bits of `ibv_srq_init_attr_mask`.
    pub comp_mask: u32,
    /// Read as `c_int` (see the `device` module docs).
    pub srq_type: raw::ibv_srq_type,
    pub pd: *mut ibv_pd,
    pub xrcd: *mut ibv_xrcd,
    pub cq: *mut ibv_cq,
    pub tm_cap: ibv_tm_cap,
}

/// A tag matching list operation (`ibv_post_srq_ops`).
#[repr(C)]
#[derive(Clone, Copy)]
pub struct ibv_ops_wr {
    pub wr_id: u64,
    pub next: *mut ibv_ops_wr,
    /// `enum ibv_ops_wr_opcode`.
    pub opcode: c_int,
    pub flags: c_int,
    pub tm: ibv_ops_wr_tm,
}

/// The tag matching part of `struct ibv_ops_wr` (anonymous in C).
#[repr(C)]
#[derive(Clone, Copy)]
pub struct ibv_ops_wr_tm {
    pub unexpected_cnt: u32,
    pub handle: u32,
    pub add: ibv_ops_wr_tm_add,
}

/// The tag to add, in `struct ibv_ops_wr` (anonymous in C).
#[repr(C)]
#[derive(Clone, Copy)]
pub struct ibv_ops_wr_tm_add {
    pub recv_wr_id: u64,
    pub sg_list: *mut ibv_sge,
    pub num_sge: c_int,
    pub tag: u64,
    pub mask: u64,
}

/// Attributes for `ibv_open_xrcd`.
#[repr(C)]
#[derive(Clone, Copy, Default)]
pub struct ibv_xrcd_init_attr {
    pub comp_mask: u32,
    pub fd: c_int,
    pub oflags: c_int,
}

crate::assert_layout!(ibv_srq_type, 4, 4);
crate::assert_layout!(ibv_tm_cap, 8, 4; max_num_tags => 0, max_ops => 4);
crate::assert_layout!(ibv_srq_init_attr_ex, 64, 8;
    srq_context => 0, attr => 8, comp_mask => 20, srq_type => 24, pd => 32, xrcd => 40,
    cq => 48, tm_cap => 56);
crate::assert_layout!(ibv_ops_wr, 72, 8; wr_id => 0, next => 8, opcode => 16, flags => 20, tm => 24);
crate::assert_layout!(ibv_ops_wr_tm, 48, 8; unexpected_cnt => 0, handle => 4, add => 8);
crate::assert_layout!(ibv_ops_wr_tm_add, 40, 8; recv_wr_id => 0, sg_list => 8, num_sge => 16, tag => 24, mask => 32);
crate::assert_layout!(ibv_xrcd_init_attr, 12, 4; comp_mask => 0, fd => 4, oflags => 8);
