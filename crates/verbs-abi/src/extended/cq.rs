//! The extended CQ: `ibv_cq_init_attr_ex` (what a completion reports),
//! `ibv_cq_ex` and its poll cursor's input, CQ moderation.

use core::ffi::{c_int, c_uint, c_void};

use crate::{ibv_context, ibv_pd, ibv_wc_opcode, raw};

/// Bits of `ibv_cq_init_attr_ex.comp_mask`.
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ibv_cq_init_attr_mask {
    IBV_CQ_INIT_ATTR_MASK_FLAGS = 1 << 0,
    IBV_CQ_INIT_ATTR_MASK_PD = 1 << 1,
}

/// Bits of `ibv_cq_init_attr_ex.wc_flags`: what an extended CQ reports.
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ibv_create_cq_wc_flags {
    IBV_WC_EX_WITH_BYTE_LEN = 1 << 0,
    IBV_WC_EX_WITH_IMM = 1 << 1,
    IBV_WC_EX_WITH_QP_NUM = 1 << 2,
    IBV_WC_EX_WITH_SRC_QP = 1 << 3,
    IBV_WC_EX_WITH_SLID = 1 << 4,
    IBV_WC_EX_WITH_SL = 1 << 5,
    IBV_WC_EX_WITH_DLID_PATH_BITS = 1 << 6,
    IBV_WC_EX_WITH_COMPLETION_TIMESTAMP = 1 << 7,
    IBV_WC_EX_WITH_CVLAN = 1 << 8,
    IBV_WC_EX_WITH_FLOW_TAG = 1 << 9,
    IBV_WC_EX_WITH_TM_INFO = 1 << 10,
    IBV_WC_EX_WITH_COMPLETION_TIMESTAMP_WALLCLOCK = 1 << 11,
}

/// Attributes for `ibv_create_cq_ex`.
#[repr(C)]
#[derive(Clone, Copy)]
pub struct ibv_cq_init_attr_ex {
    pub cqe: u32,
    pub cq_context: *mut c_void,
    pub channel: *mut crate::ibv_comp_channel,
    pub comp_vector: u32,
    /// Bits of `ibv_create_cq_wc_flags`.
    pub wc_flags: u64,
    /// Bits of `ibv_cq_init_attr_mask`.
    pub comp_mask: u32,
    /// Bits of `ibv_create_cq_attr_flags`.
    pub flags: u32,
    pub parent_domain: *mut ibv_pd,
}

/// Input of `ibv_start_poll`; `comp_mask` must be 0.
#[repr(C)]
#[derive(Clone, Copy, Default)]
pub struct ibv_poll_cq_attr {
    pub comp_mask: u32,
}

/// Tag matching information of a completion.
#[repr(C)]
#[derive(Clone, Copy, Default)]
pub struct ibv_wc_tm_info {
    pub tag: u64,
    pub r#priv: u32,
}

/// An extended completion queue; starts with the fields of `ibv_cq`.
#[repr(C)]
pub struct ibv_cq_ex {
    pub context: *mut ibv_context,
    pub channel: *mut crate::ibv_comp_channel,
    pub cq_context: *mut c_void,
    pub handle: u32,
    pub cqe: c_int,
    pub mutex: libc::pthread_mutex_t,
    pub cond: libc::pthread_cond_t,
    pub comp_events_completed: u32,
    pub async_events_completed: u32,
    pub comp_mask: u32,
    /// Read as `c_int` (see the `device` module docs).
    pub status: raw::ibv_wc_status,
    pub wr_id: u64,
    pub start_poll:
        Option<unsafe extern "C" fn(current: *mut ibv_cq_ex, attr: *mut ibv_poll_cq_attr) -> c_int>,
    pub next_poll: Option<unsafe extern "C" fn(current: *mut ibv_cq_ex) -> c_int>,
    pub end_poll: Option<unsafe extern "C" fn(current: *mut ibv_cq_ex)>,
    pub read_opcode: Option<unsafe extern "C" fn(current: *mut ibv_cq_ex) -> ibv_wc_opcode>,
    pub read_vendor_err: Option<unsafe extern "C" fn(current: *mut ibv_cq_ex) -> u32>,
    pub read_byte_len: Option<unsafe extern "C" fn(current: *mut ibv_cq_ex) -> u32>,
    /// Returns network byte order.
    pub read_imm_data: Option<unsafe extern "C" fn(current: *mut ibv_cq_ex) -> u32>,
    pub read_qp_num: Option<unsafe extern "C" fn(current: *mut ibv_cq_ex) -> u32>,
    pub read_src_qp: Option<unsafe extern "C" fn(current: *mut ibv_cq_ex) -> u32>,
    pub read_wc_flags: Option<unsafe extern "C" fn(current: *mut ibv_cq_ex) -> c_uint>,
    pub read_slid: Option<unsafe extern "C" fn(current: *mut ibv_cq_ex) -> u32>,
    pub read_sl: Option<unsafe extern "C" fn(current: *mut ibv_cq_ex) -> u8>,
    pub read_dlid_path_bits: Option<unsafe extern "C" fn(current: *mut ibv_cq_ex) -> u8>,
    pub read_completion_ts: Option<unsafe extern "C" fn(current: *mut ibv_cq_ex) -> u64>,
    pub read_cvlan: Option<unsafe extern "C" fn(current: *mut ibv_cq_ex) -> u16>,
    pub read_flow_tag: Option<unsafe extern "C" fn(current: *mut ibv_cq_ex) -> u32>,
    pub read_tm_info:
        Option<unsafe extern "C" fn(current: *mut ibv_cq_ex, tm_info: *mut ibv_wc_tm_info)>,
    pub read_completion_wallclock_ns: Option<unsafe extern "C" fn(current: *mut ibv_cq_ex) -> u64>,
}

/// CQ moderation parameters.
#[repr(C)]
#[derive(Clone, Copy, Default)]
pub struct ibv_moderate_cq {
    pub cq_count: u16,
    /// In microseconds.
    pub cq_period: u16,
}

/// Input of `ibv_modify_cq`.
#[repr(C)]
#[derive(Clone, Copy, Default)]
pub struct ibv_modify_cq_attr {
    pub attr_mask: u32,
    pub moderate: ibv_moderate_cq,
}

crate::assert_layout!(ibv_cq_init_attr_ex, 56, 8;
    cqe => 0, cq_context => 8, channel => 16, comp_vector => 24, wc_flags => 32,
    comp_mask => 40, flags => 44, parent_domain => 48);
crate::assert_layout!(ibv_poll_cq_attr, 4, 4; comp_mask => 0);
crate::assert_layout!(ibv_wc_tm_info, 16, 8; tag => 0, r#priv => 8);
crate::assert_layout!(ibv_cq_ex, 288, 8;
    context => 0, channel => 8, cq_context => 16, handle => 24, cqe => 28, mutex => 32,
    cond => 72, comp_events_completed => 120, async_events_completed => 124,
    comp_mask => 128, status => 132, wr_id => 136, start_poll => 144, next_poll => 152,
    end_poll => 160, read_opcode => 168, read_tm_info => 272,
    read_completion_wallclock_ns => 280);
crate::assert_layout!(ibv_moderate_cq, 4, 2; cq_count => 0, cq_period => 2);
crate::assert_layout!(ibv_modify_cq_attr, 8, 4; attr_mask => 0, moderate => 4);
