//! The extended QP: `ibv_qp_init_attr_ex` (RSS hash, create flags),
//! `ibv_open_qp`, `ibv_qp_ex` (the `ibv_wr_*` post-send interface) and its
//! inline data lists, rate limits, ECE.

use core::ffi::{c_int, c_uint, c_void};

use crate::{
    ibv_ah, ibv_cq, ibv_mw, ibv_mw_bind_info, ibv_pd, ibv_qp, ibv_qp_cap, ibv_rwq_ind_table,
    ibv_sge, ibv_srq, ibv_xrcd, raw,
};

/// Bits of `ibv_qp_init_attr_ex.comp_mask`.
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ibv_qp_init_attr_mask {
    IBV_QP_INIT_ATTR_PD = 1 << 0,
    IBV_QP_INIT_ATTR_XRCD = 1 << 1,
    IBV_QP_INIT_ATTR_CREATE_FLAGS = 1 << 2,
    IBV_QP_INIT_ATTR_MAX_TSO_HEADER = 1 << 3,
    IBV_QP_INIT_ATTR_IND_TABLE = 1 << 4,
    IBV_QP_INIT_ATTR_RX_HASH = 1 << 5,
    IBV_QP_INIT_ATTR_SEND_OPS_FLAGS = 1 << 6,
}

/// Bits of `ibv_qp_init_attr_ex.create_flags`.
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ibv_qp_create_flags {
    IBV_QP_CREATE_BLOCK_SELF_MCAST_LB = 1 << 1,
    IBV_QP_CREATE_SCATTER_FCS = 1 << 8,
    IBV_QP_CREATE_CVLAN_STRIPPING = 1 << 9,
    IBV_QP_CREATE_SOURCE_QPN = 1 << 10,
    IBV_QP_CREATE_PCI_WRITE_END_PADDING = 1 << 11,
}

/// RSS hash configuration of a QP (`ibv_qp_init_attr_ex.rx_hash_conf`).
#[repr(C)]
#[derive(Clone, Copy)]
pub struct ibv_rx_hash_conf {
    pub rx_hash_function: u8,
    pub rx_hash_key_len: u8,
    pub rx_hash_key: *mut u8,
    pub rx_hash_fields_mask: u64,
}

/// Attributes for `ibv_create_qp_ex`; starts with the fields of `ibv_qp_init_attr`.
#[repr(C)]
#[derive(Clone, Copy)]
pub struct ibv_qp_init_attr_ex {
    pub qp_context: *mut c_void,
    pub send_cq: *mut ibv_cq,
    pub recv_cq: *mut ibv_cq,
    pub srq: *mut ibv_srq,
    pub cap: ibv_qp_cap,
    /// Read as `c_int` (see the `device` module docs).
    pub qp_type: raw::ibv_qp_type,
    pub sq_sig_all: c_int,
    /// Bits of `ibv_qp_init_attr_mask`.
    pub comp_mask: u32,
    pub pd: *mut ibv_pd,
    pub xrcd: *mut ibv_xrcd,
    /// Bits of `ibv_qp_create_flags`.
    pub create_flags: u32,
    pub max_tso_header: u16,
    pub rwq_ind_tbl: *mut ibv_rwq_ind_table,
    pub rx_hash_conf: ibv_rx_hash_conf,
    pub source_qpn: u32,
    /// Bits of `ibv_qp_create_send_ops_flags`.
    pub send_ops_flags: u64,
}

/// Attributes for `ibv_open_qp`.
#[repr(C)]
#[derive(Clone, Copy)]
pub struct ibv_qp_open_attr {
    pub comp_mask: u32,
    pub qp_num: u32,
    pub xrcd: *mut ibv_xrcd,
    pub qp_context: *mut c_void,
    /// Read as `c_int` (see the `device` module docs).
    pub qp_type: raw::ibv_qp_type,
}

/// A QP with the new post-send interface (`ibv_qp_to_qp_ex`).
#[repr(C)]
pub struct ibv_qp_ex {
    pub qp_base: ibv_qp,
    pub comp_mask: u64,
    pub wr_id: u64,
    /// Bits of `ibv_send_flags`.
    pub wr_flags: c_uint,
    pub wr_atomic_cmp_swp: Option<
        unsafe extern "C" fn(
            qp: *mut ibv_qp_ex,
            rkey: u32,
            remote_addr: u64,
            compare: u64,
            swap: u64,
        ),
    >,
    pub wr_atomic_fetch_add:
        Option<unsafe extern "C" fn(qp: *mut ibv_qp_ex, rkey: u32, remote_addr: u64, add: u64)>,
    pub wr_bind_mw: Option<
        unsafe extern "C" fn(
            qp: *mut ibv_qp_ex,
            mw: *mut ibv_mw,
            rkey: u32,
            bind_info: *const ibv_mw_bind_info,
        ),
    >,
    pub wr_local_inv: Option<unsafe extern "C" fn(qp: *mut ibv_qp_ex, invalidate_rkey: u32)>,
    pub wr_rdma_read: Option<unsafe extern "C" fn(qp: *mut ibv_qp_ex, rkey: u32, remote_addr: u64)>,
    pub wr_rdma_write:
        Option<unsafe extern "C" fn(qp: *mut ibv_qp_ex, rkey: u32, remote_addr: u64)>,
    pub wr_rdma_write_imm: Option<
        unsafe extern "C" fn(qp: *mut ibv_qp_ex, rkey: u32, remote_addr: u64, imm_data: u32),
    >,
    pub wr_send: Option<unsafe extern "C" fn(qp: *mut ibv_qp_ex)>,
    pub wr_send_imm: Option<unsafe extern "C" fn(qp: *mut ibv_qp_ex, imm_data: u32)>,
    pub wr_send_inv: Option<unsafe extern "C" fn(qp: *mut ibv_qp_ex, invalidate_rkey: u32)>,
    pub wr_send_tso:
        Option<unsafe extern "C" fn(qp: *mut ibv_qp_ex, hdr: *mut c_void, hdr_sz: u16, mss: u16)>,
    pub wr_set_ud_addr: Option<
        unsafe extern "C" fn(
            qp: *mut ibv_qp_ex,
            ah: *mut ibv_ah,
            remote_qpn: u32,
            remote_qkey: u32,
        ),
    >,
    pub wr_set_xrc_srqn: Option<unsafe extern "C" fn(qp: *mut ibv_qp_ex, remote_srqn: u32)>,
    pub wr_set_inline_data:
        Option<unsafe extern "C" fn(qp: *mut ibv_qp_ex, addr: *mut c_void, length: usize)>,
    pub wr_set_inline_data_list: Option<
        unsafe extern "C" fn(qp: *mut ibv_qp_ex, num_buf: usize, buf_list: *const ibv_data_buf),
    >,
    pub wr_set_sge:
        Option<unsafe extern "C" fn(qp: *mut ibv_qp_ex, lkey: u32, addr: u64, length: u32)>,
    pub wr_set_sge_list:
        Option<unsafe extern "C" fn(qp: *mut ibv_qp_ex, num_sge: usize, sg_list: *const ibv_sge)>,
    pub wr_start: Option<unsafe extern "C" fn(qp: *mut ibv_qp_ex)>,
    pub wr_complete: Option<unsafe extern "C" fn(qp: *mut ibv_qp_ex) -> c_int>,
    pub wr_abort: Option<unsafe extern "C" fn(qp: *mut ibv_qp_ex)>,
    pub wr_atomic_write: Option<
        unsafe extern "C" fn(
            qp: *mut ibv_qp_ex,
            rkey: u32,
            remote_addr: u64,
            atomic_wr: *const c_void,
        ),
    >,
}

/// A buffer for `ibv_wr_set_inline_data_list`.
#[repr(C)]
#[derive(Clone, Copy)]
pub struct ibv_data_buf {
    pub addr: *mut c_void,
    pub length: usize,
}

/// Rate limit attributes (`ibv_modify_qp_rate_limit`).
#[repr(C)]
#[derive(Clone, Copy, Default)]
pub struct ibv_qp_rate_limit_attr {
    /// In kbps.
    pub rate_limit: u32,
    pub max_burst_sz: u32,
    pub typical_pkt_sz: u16,
    pub comp_mask: u32,
}

/// Enhanced connection establishment options (`ibv_query_ece`, `ibv_set_ece`).
#[repr(C)]
#[derive(Clone, Copy, Default)]
pub struct ibv_ece {
    pub vendor_id: u32,
    pub options: u32,
    pub comp_mask: u32,
}

crate::assert_layout!(ibv_rx_hash_conf, 24, 8;
    rx_hash_function => 0, rx_hash_key_len => 1, rx_hash_key => 8, rx_hash_fields_mask => 16);
crate::assert_layout!(ibv_qp_init_attr_ex, 136, 8;
    qp_context => 0, send_cq => 8, recv_cq => 16, srq => 24, cap => 32, qp_type => 52,
    sq_sig_all => 56, comp_mask => 60, pd => 64, xrcd => 72, create_flags => 80,
    max_tso_header => 84, rwq_ind_tbl => 88, rx_hash_conf => 96, source_qpn => 120,
    send_ops_flags => 128);
crate::assert_layout!(ibv_qp_open_attr, 32, 8;
    comp_mask => 0, qp_num => 4, xrcd => 8, qp_context => 16, qp_type => 24);
crate::assert_layout!(ibv_qp_ex, 352, 8;
    qp_base => 0, comp_mask => 160, wr_id => 168, wr_flags => 176, wr_atomic_cmp_swp => 184,
    wr_send => 240, wr_start => 320, wr_complete => 328, wr_abort => 336,
    wr_atomic_write => 344);
crate::assert_layout!(ibv_data_buf, 16, 8; addr => 0, length => 8);
crate::assert_layout!(ibv_qp_rate_limit_attr, 16, 4;
    rate_limit => 0, max_burst_sz => 4, typical_pkt_sz => 8, comp_mask => 12);
crate::assert_layout!(ibv_ece, 12, 4; vendor_id => 0, options => 4, comp_mask => 8);
