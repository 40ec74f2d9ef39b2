//! The extended verbs: `struct verbs_context` (the function table the inline
//! verbs and macros of `verbs.h` reach through `verbs_get_ctx`), the
//! extended attribute structs (`ibv_device_attr_ex`, `ibv_cq_init_attr_ex`,
//! `ibv_qp_init_attr_ex`, `ibv_srq_init_attr_ex`, `ibv_values_ex`, ...) and
//! the objects only those verbs create (`ibv_cq_ex`, `ibv_qp_ex`, `ibv_wq`,
//! `ibv_dm`, `ibv_td`, flows, counters, ...).
//!
//! C nests a few anonymous structs; each gets a Rust name and the member
//! keeps C's spelling (`odp_caps.per_transport_caps.rc_odp_caps`).
//!
//! Enum-typed fields must be read as `c_int`, never as the Rust enum (see
//! the `device` module docs). Every number in `assert_layout!` comes from a
//! C program compiled with gcc against rdma-core 44's own `verbs.h`
//! (x86_64), printing `sizeof`, `_Alignof` and `offsetof`.

use core::ffi::{c_int, c_uint, c_void};

use crate::{
    ibv_ah, ibv_context, ibv_cq, ibv_device_attr, ibv_gid, ibv_mr, ibv_mw, ibv_mw_bind_info,
    ibv_pd, ibv_qp, ibv_qp_cap, ibv_recv_wr, ibv_sge, ibv_srq, ibv_srq_attr, ibv_wc_opcode,
    ibv_xrcd, raw,
};

/// `abi_compat` of an `ibv_context` embedded in a `struct verbs_context`
/// (C's `__VERBS_ABI_IS_EXTENDED`, `(void *)UINTPTR_MAX`).
pub const VERBS_ABI_IS_EXTENDED: *mut c_void = usize::MAX as *mut c_void;

// ---------------------------------------------------------------------------
// Enums
// ---------------------------------------------------------------------------

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

/// Bits of `ibv_values_ex.comp_mask`.
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ibv_values_mask {
    IBV_VALUES_MASK_RAW_CLOCK = 1 << 0,
    IBV_VALUES_MASK_RESERVED = 1 << 1,
}

/// Bits of `ibv_odp_caps.general_caps`.
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ibv_odp_general_caps {
    IBV_ODP_SUPPORT = 1 << 0,
    IBV_ODP_SUPPORT_IMPLICIT = 1 << 1,
}

/// Bits of `ibv_odp_caps.per_transport_caps.*_odp_caps`.
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ibv_odp_transport_cap_bits {
    IBV_ODP_SUPPORT_SEND = 1 << 0,
    IBV_ODP_SUPPORT_RECV = 1 << 1,
    IBV_ODP_SUPPORT_WRITE = 1 << 2,
    IBV_ODP_SUPPORT_READ = 1 << 3,
    IBV_ODP_SUPPORT_ATOMIC = 1 << 4,
    IBV_ODP_SUPPORT_SRQ_RECV = 1 << 5,
}

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

/// What a flow counter counts.
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ibv_counter_description {
    IBV_COUNTER_PACKETS = 0,
    IBV_COUNTER_BYTES = 1,
}

/// Kind of flow steering rule.
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ibv_flow_attr_type {
    IBV_FLOW_ATTR_NORMAL = 0,
    IBV_FLOW_ATTR_ALL_DEFAULT = 1,
    IBV_FLOW_ATTR_MC_DEFAULT = 2,
    IBV_FLOW_ATTR_SNIFFER = 3,
}

/// `ibv_advise_mr` advice.
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ibv_advise_mr_advice {
    IBV_ADVISE_MR_ADVICE_PREFETCH = 0,
    IBV_ADVISE_MR_ADVICE_PREFETCH_WRITE = 1,
    IBV_ADVISE_MR_ADVICE_PREFETCH_NO_FAULT = 2,
}

// ---------------------------------------------------------------------------
// ibv_query_device_ex
// ---------------------------------------------------------------------------

/// Input of `ibv_query_device_ex`; `comp_mask` must be 0.
#[repr(C)]
#[derive(Clone, Copy, Default)]
pub struct ibv_query_device_ex_input {
    pub comp_mask: u32,
}

/// `ibv_odp_caps.per_transport_caps` (anonymous in C).
#[repr(C)]
#[derive(Clone, Copy, Default)]
pub struct ibv_odp_caps_per_transport {
    pub rc_odp_caps: u32,
    pub uc_odp_caps: u32,
    pub ud_odp_caps: u32,
}

/// On-demand paging capabilities.
#[repr(C)]
#[derive(Clone, Copy, Default)]
pub struct ibv_odp_caps {
    /// Bits of `ibv_odp_general_caps`.
    pub general_caps: u64,
    pub per_transport_caps: ibv_odp_caps_per_transport,
}

/// TCP segmentation offload capabilities.
#[repr(C)]
#[derive(Clone, Copy, Default)]
pub struct ibv_tso_caps {
    pub max_tso: u32,
    pub supported_qpts: u32,
}

/// Receive-side scaling capabilities.
#[repr(C)]
#[derive(Clone, Copy, Default)]
pub struct ibv_rss_caps {
    pub supported_qpts: u32,
    pub max_rwq_indirection_tables: u32,
    pub max_rwq_indirection_table_size: u32,
    pub rx_hash_fields_mask: u64,
    pub rx_hash_function: u8,
}

/// Packet pacing (rate limit) capabilities.
#[repr(C)]
#[derive(Clone, Copy, Default)]
pub struct ibv_packet_pacing_caps {
    pub qp_rate_limit_min: u32,
    pub qp_rate_limit_max: u32,
    pub supported_qpts: u32,
}

/// Tag matching capabilities.
#[repr(C)]
#[derive(Clone, Copy, Default)]
pub struct ibv_tm_caps {
    pub max_rndv_hdr_size: u32,
    pub max_num_tags: u32,
    pub flags: u32,
    pub max_ops: u32,
    pub max_sge: u32,
}

/// CQ moderation capabilities.
#[repr(C)]
#[derive(Clone, Copy, Default)]
pub struct ibv_cq_moderation_caps {
    pub max_cq_count: u16,
    pub max_cq_period: u16,
}

/// PCIe atomic operation sizes supported.
#[repr(C)]
#[derive(Clone, Copy, Default)]
pub struct ibv_pci_atomic_caps {
    pub fetch_add: u16,
    pub swap: u16,
    pub compare_swap: u16,
}

/// Extended device attributes, filled by `ibv_query_device_ex`.
#[repr(C)]
#[derive(Clone, Copy)]
pub struct ibv_device_attr_ex {
    pub orig_attr: ibv_device_attr,
    pub comp_mask: u32,
    pub odp_caps: ibv_odp_caps,
    pub completion_timestamp_mask: u64,
    /// In kHz.
    pub hca_core_clock: u64,
    pub device_cap_flags_ex: u64,
    pub tso_caps: ibv_tso_caps,
    pub rss_caps: ibv_rss_caps,
    pub max_wq_type_rq: u32,
    pub packet_pacing_caps: ibv_packet_pacing_caps,
    /// Bits of `ibv_raw_packet_caps`.
    pub raw_packet_caps: u32,
    pub tm_caps: ibv_tm_caps,
    pub cq_mod_caps: ibv_cq_moderation_caps,
    pub max_dm_size: u64,
    pub pci_atomic_caps: ibv_pci_atomic_caps,
    pub xrc_odp_caps: u32,
    pub phys_port_cnt_ex: u32,
}

/// Real-time values of a device (`ibv_query_rt_values_ex`).
#[repr(C)]
#[derive(Clone, Copy)]
pub struct ibv_values_ex {
    /// Bits of `ibv_values_mask`: what to read on input, what was read on output.
    pub comp_mask: u32,
    pub raw_clock: libc::timespec,
}

/// One GID table entry (`ibv_query_gid_ex`, `ibv_query_gid_table`).
#[repr(C)]
#[derive(Clone, Copy)]
pub struct ibv_gid_entry {
    pub gid: ibv_gid,
    pub gid_index: u32,
    pub port_num: u32,
    /// An `ibv_gid_type` value.
    pub gid_type: u32,
    pub ndev_ifindex: u32,
}

// ---------------------------------------------------------------------------
// Extended CQ
// ---------------------------------------------------------------------------

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

// ---------------------------------------------------------------------------
// Extended QP and SRQ
// ---------------------------------------------------------------------------

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

crate::assert_layout!(ibv_ops_wr, 72, 8; wr_id => 0, next => 8, opcode => 16, flags => 20, tm => 24);
crate::assert_layout!(ibv_ops_wr_tm, 48, 8; unexpected_cnt => 0, handle => 4, add => 8);
crate::assert_layout!(ibv_ops_wr_tm_add, 40, 8; recv_wr_id => 0, sg_list => 8, num_sge => 16, tag => 24, mask => 32);

/// Attributes for `ibv_open_xrcd`.
#[repr(C)]
#[derive(Clone, Copy, Default)]
pub struct ibv_xrcd_init_attr {
    pub comp_mask: u32,
    pub fd: c_int,
    pub oflags: c_int,
}

// ---------------------------------------------------------------------------
// Work queues, indirection tables, flows, counters, DM, TD
// ---------------------------------------------------------------------------

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

/// A flow steering rule.
#[repr(C)]
pub struct ibv_flow {
    pub comp_mask: u32,
    pub context: *mut ibv_context,
    pub handle: u32,
}

/// The header of a flow steering rule; the specs follow it in memory.
#[repr(C)]
#[derive(Clone, Copy)]
pub struct ibv_flow_attr {
    pub comp_mask: u32,
    /// Read as `c_int` (see the `device` module docs).
    pub r#type: raw::ibv_flow_attr_type,
    pub size: u16,
    pub priority: u16,
    pub num_of_specs: u8,
    pub port: u8,
    pub flags: u32,
}

/// A flow action (e.g. ESP).
#[repr(C)]
pub struct ibv_flow_action {
    pub context: *mut ibv_context,
}

/// ESP flow action attributes (`ibv_create_flow_action_esp`).
#[repr(C)]
#[derive(Clone, Copy)]
pub struct ibv_flow_action_esp_attr {
    pub esp_attr: *mut ibv_flow_action_esp,
    /// `enum ibv_flow_action_esp_keymat`.
    pub keymat_proto: c_int,
    pub keymat_len: u16,
    pub keymat_ptr: *mut c_void,
    /// `enum ibv_flow_action_esp_replay`.
    pub replay_proto: c_int,
    pub replay_len: u16,
    pub replay_ptr: *mut c_void,
    pub esp_encap: *mut ibv_flow_action_esp_encap,
    pub comp_mask: u32,
    pub esn: u32,
}

crate::assert_layout!(ibv_flow_action_esp_attr, 56, 8; esp_attr => 0, keymat_proto => 8, keymat_len => 12,
    keymat_ptr => 16, replay_proto => 24, replay_len => 28, replay_ptr => 32, esp_encap => 40,
    comp_mask => 48, esn => 52);

/// ESP parameters (the kernel's `struct ib_uverbs_flow_action_esp`).
#[repr(C)]
#[derive(Clone, Copy)]
pub struct ibv_flow_action_esp {
    pub spi: u32,
    pub seq: u32,
    pub tfc_pad: u32,
    pub flags: u32,
    pub hard_limit_pkts: u64,
}

/// One ESP encapsulation filter (the kernel's
/// `struct ib_uverbs_flow_action_esp_encap`). In C each pointer shares its
/// 8 bytes with a `__aligned_u64` view (`RDMA_UAPI_PTR`).
#[repr(C)]
#[derive(Clone, Copy)]
pub struct ibv_flow_action_esp_encap {
    pub val_ptr: *mut c_void,
    pub next_ptr: *mut ibv_flow_action_esp_encap,
    pub len: u16,
    pub r#type: u16,
}

crate::assert_layout!(ibv_flow_action_esp, 24, 8; spi => 0, seq => 4, tfc_pad => 8, flags => 12, hard_limit_pkts => 16);
crate::assert_layout!(ibv_flow_action_esp_encap, 24, 8; val_ptr => 0, next_ptr => 8, len => 16, r#type => 18);

/// A set of flow counters.
#[repr(C)]
pub struct ibv_counters {
    pub context: *mut ibv_context,
}

/// Attributes for `ibv_create_counters`.
#[repr(C)]
#[derive(Clone, Copy, Default)]
pub struct ibv_counters_init_attr {
    pub comp_mask: u32,
}

/// Where a counter is attached (`ibv_attach_counters_point_flow`).
#[repr(C)]
#[derive(Clone, Copy)]
pub struct ibv_counter_attach_attr {
    /// Read as `c_int` (see the `device` module docs).
    pub counter_desc: raw::ibv_counter_description,
    pub index: u32,
    pub comp_mask: u32,
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

/// rdma-core's private part of `verbs_context`; only ever a pointer.
pub struct verbs_ex_private {
    // Not `repr(C)`, so cbindgen declares it as an incomplete struct, as C does.
    _opaque: [u8; 0],
}

// ---------------------------------------------------------------------------
// struct verbs_context
// ---------------------------------------------------------------------------

/// The provider's extended context. The `ibv_context` handed to programs is
/// its **last** member; the inline verbs find this struct from it by
/// `container_of` when `context.abi_compat == VERBS_ABI_IS_EXTENDED`, and
/// check `sz` (the size the provider knows, measured back from `context`)
/// before using an op. New members are added at the front ("grows up").
#[repr(C)]
pub struct verbs_context {
    pub query_port: Option<
        unsafe extern "C" fn(
            context: *mut ibv_context,
            port_num: u8,
            port_attr: *mut crate::ibv_port_attr,
            port_attr_len: usize,
        ) -> c_int,
    >,
    pub advise_mr: Option<
        unsafe extern "C" fn(
            pd: *mut ibv_pd,
            advice: raw::ibv_advise_mr_advice,
            flags: u32,
            sg_list: *mut ibv_sge,
            num_sges: u32,
        ) -> c_int,
    >,
    pub alloc_null_mr: Option<unsafe extern "C" fn(pd: *mut ibv_pd) -> *mut ibv_mr>,
    pub read_counters: Option<
        unsafe extern "C" fn(
            counters: *mut ibv_counters,
            counters_value: *mut u64,
            ncounters: u32,
            flags: u32,
        ) -> c_int,
    >,
    pub attach_counters_point_flow: Option<
        unsafe extern "C" fn(
            counters: *mut ibv_counters,
            attr: *mut ibv_counter_attach_attr,
            flow: *mut ibv_flow,
        ) -> c_int,
    >,
    pub create_counters: Option<
        unsafe extern "C" fn(
            context: *mut ibv_context,
            init_attr: *mut ibv_counters_init_attr,
        ) -> *mut ibv_counters,
    >,
    pub destroy_counters: Option<unsafe extern "C" fn(counters: *mut ibv_counters) -> c_int>,
    pub reg_dm_mr: Option<
        unsafe extern "C" fn(
            pd: *mut ibv_pd,
            dm: *mut ibv_dm,
            dm_offset: u64,
            length: usize,
            access: c_uint,
        ) -> *mut ibv_mr,
    >,
    pub alloc_dm: Option<
        unsafe extern "C" fn(
            context: *mut ibv_context,
            attr: *mut ibv_alloc_dm_attr,
        ) -> *mut ibv_dm,
    >,
    pub free_dm: Option<unsafe extern "C" fn(dm: *mut ibv_dm) -> c_int>,
    pub modify_flow_action_esp: Option<
        unsafe extern "C" fn(
            action: *mut ibv_flow_action,
            attr: *mut ibv_flow_action_esp_attr,
        ) -> c_int,
    >,
    pub destroy_flow_action: Option<unsafe extern "C" fn(action: *mut ibv_flow_action) -> c_int>,
    pub create_flow_action_esp: Option<
        unsafe extern "C" fn(
            context: *mut ibv_context,
            attr: *mut ibv_flow_action_esp_attr,
        ) -> *mut ibv_flow_action,
    >,
    pub modify_qp_rate_limit:
        Option<unsafe extern "C" fn(qp: *mut ibv_qp, attr: *mut ibv_qp_rate_limit_attr) -> c_int>,
    pub alloc_parent_domain: Option<
        unsafe extern "C" fn(
            context: *mut ibv_context,
            attr: *mut ibv_parent_domain_init_attr,
        ) -> *mut ibv_pd,
    >,
    pub dealloc_td: Option<unsafe extern "C" fn(td: *mut ibv_td) -> c_int>,
    pub alloc_td: Option<
        unsafe extern "C" fn(
            context: *mut ibv_context,
            init_attr: *mut ibv_td_init_attr,
        ) -> *mut ibv_td,
    >,
    pub modify_cq:
        Option<unsafe extern "C" fn(cq: *mut ibv_cq, attr: *mut ibv_modify_cq_attr) -> c_int>,
    pub post_srq_ops: Option<
        unsafe extern "C" fn(
            srq: *mut ibv_srq,
            op: *mut ibv_ops_wr,
            bad_op: *mut *mut ibv_ops_wr,
        ) -> c_int,
    >,
    pub destroy_rwq_ind_table:
        Option<unsafe extern "C" fn(rwq_ind_table: *mut ibv_rwq_ind_table) -> c_int>,
    pub create_rwq_ind_table: Option<
        unsafe extern "C" fn(
            context: *mut ibv_context,
            init_attr: *mut ibv_rwq_ind_table_init_attr,
        ) -> *mut ibv_rwq_ind_table,
    >,
    pub destroy_wq: Option<unsafe extern "C" fn(wq: *mut ibv_wq) -> c_int>,
    pub modify_wq:
        Option<unsafe extern "C" fn(wq: *mut ibv_wq, wq_attr: *mut ibv_wq_attr) -> c_int>,
    pub create_wq: Option<
        unsafe extern "C" fn(
            context: *mut ibv_context,
            wq_init_attr: *mut ibv_wq_init_attr,
        ) -> *mut ibv_wq,
    >,
    pub query_rt_values: Option<
        unsafe extern "C" fn(context: *mut ibv_context, values: *mut ibv_values_ex) -> c_int,
    >,
    pub create_cq_ex: Option<
        unsafe extern "C" fn(
            context: *mut ibv_context,
            init_attr: *mut ibv_cq_init_attr_ex,
        ) -> *mut ibv_cq_ex,
    >,
    pub r#priv: *mut verbs_ex_private,
    pub query_device_ex: Option<
        unsafe extern "C" fn(
            context: *mut ibv_context,
            input: *const ibv_query_device_ex_input,
            attr: *mut ibv_device_attr_ex,
            attr_size: usize,
        ) -> c_int,
    >,
    pub ibv_destroy_flow: Option<unsafe extern "C" fn(flow: *mut ibv_flow) -> c_int>,
    /// Unused slot ("DO NOT COPY THIS GARBAGE" in C).
    pub ABI_placeholder2: Option<unsafe extern "C" fn()>,
    pub ibv_create_flow: Option<
        unsafe extern "C" fn(qp: *mut ibv_qp, flow_attr: *mut ibv_flow_attr) -> *mut ibv_flow,
    >,
    /// Unused slot.
    pub ABI_placeholder1: Option<unsafe extern "C" fn()>,
    pub open_qp: Option<
        unsafe extern "C" fn(context: *mut ibv_context, attr: *mut ibv_qp_open_attr) -> *mut ibv_qp,
    >,
    pub create_qp_ex: Option<
        unsafe extern "C" fn(
            context: *mut ibv_context,
            qp_init_attr_ex: *mut ibv_qp_init_attr_ex,
        ) -> *mut ibv_qp,
    >,
    pub get_srq_num: Option<unsafe extern "C" fn(srq: *mut ibv_srq, srq_num: *mut u32) -> c_int>,
    pub create_srq_ex: Option<
        unsafe extern "C" fn(
            context: *mut ibv_context,
            srq_init_attr_ex: *mut ibv_srq_init_attr_ex,
        ) -> *mut ibv_srq,
    >,
    pub open_xrcd: Option<
        unsafe extern "C" fn(
            context: *mut ibv_context,
            xrcd_init_attr: *mut ibv_xrcd_init_attr,
        ) -> *mut ibv_xrcd,
    >,
    pub close_xrcd: Option<unsafe extern "C" fn(xrcd: *mut ibv_xrcd) -> c_int>,
    pub _ABI_placeholder3: u64,
    /// Size of this struct as the provider knows it; must sit right before `context`.
    pub sz: usize,
    /// The context handed to programs; must be the last member.
    pub context: ibv_context,
}

crate::assert_layout!(ibv_query_device_ex_input, 4, 4; comp_mask => 0);
crate::assert_layout!(ibv_odp_caps_per_transport, 12, 4;
    rc_odp_caps => 0, uc_odp_caps => 4, ud_odp_caps => 8);
crate::assert_layout!(ibv_odp_caps, 24, 8; general_caps => 0, per_transport_caps => 8);
crate::assert_layout!(ibv_tso_caps, 8, 4; max_tso => 0, supported_qpts => 4);
crate::assert_layout!(ibv_rss_caps, 32, 8;
    supported_qpts => 0, max_rwq_indirection_tables => 4, max_rwq_indirection_table_size => 8,
    rx_hash_fields_mask => 16, rx_hash_function => 24);
crate::assert_layout!(ibv_packet_pacing_caps, 12, 4;
    qp_rate_limit_min => 0, qp_rate_limit_max => 4, supported_qpts => 8);
crate::assert_layout!(ibv_tm_caps, 20, 4;
    max_rndv_hdr_size => 0, max_num_tags => 4, flags => 8, max_ops => 12, max_sge => 16);
crate::assert_layout!(ibv_cq_moderation_caps, 4, 2; max_cq_count => 0, max_cq_period => 2);
crate::assert_layout!(ibv_pci_atomic_caps, 6, 2; fetch_add => 0, swap => 2, compare_swap => 4);
crate::assert_layout!(ibv_device_attr_ex, 400, 8;
    orig_attr => 0, comp_mask => 232, odp_caps => 240, completion_timestamp_mask => 264,
    hca_core_clock => 272, device_cap_flags_ex => 280, tso_caps => 288, rss_caps => 296,
    max_wq_type_rq => 328, packet_pacing_caps => 332, raw_packet_caps => 344, tm_caps => 348,
    cq_mod_caps => 368, max_dm_size => 376, pci_atomic_caps => 384, xrc_odp_caps => 392,
    phys_port_cnt_ex => 396);
crate::assert_layout!(ibv_values_ex, 24, 8; comp_mask => 0, raw_clock => 8);
crate::assert_layout!(ibv_gid_entry, 32, 8;
    gid => 0, gid_index => 16, port_num => 20, gid_type => 24, ndev_ifindex => 28);
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
crate::assert_layout!(ibv_tm_cap, 8, 4; max_num_tags => 0, max_ops => 4);
crate::assert_layout!(ibv_srq_init_attr_ex, 64, 8;
    srq_context => 0, attr => 8, comp_mask => 20, srq_type => 24, pd => 32, xrcd => 40,
    cq => 48, tm_cap => 56);
crate::assert_layout!(ibv_xrcd_init_attr, 12, 4; comp_mask => 0, fd => 4, oflags => 8);
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
crate::assert_layout!(ibv_flow, 24, 8; comp_mask => 0, context => 8, handle => 16);
crate::assert_layout!(ibv_flow_attr, 20, 4;
    comp_mask => 0, r#type => 4, size => 8, priority => 10, num_of_specs => 12, port => 13,
    flags => 16);
crate::assert_layout!(ibv_flow_action, 8, 8; context => 0);
crate::assert_layout!(ibv_counters, 8, 8; context => 0);
crate::assert_layout!(ibv_counters_init_attr, 4, 4; comp_mask => 0);
crate::assert_layout!(ibv_counter_attach_attr, 12, 4; counter_desc => 0, index => 4, comp_mask => 8);
crate::assert_layout!(ibv_alloc_dm_attr, 16, 8; length => 0, log_align_req => 8, comp_mask => 12);
crate::assert_layout!(ibv_dm, 32, 8;
    context => 0, memcpy_to_dm => 8, memcpy_from_dm => 16, comp_mask => 24, handle => 28);
crate::assert_layout!(ibv_td, 8, 8; context => 0);
crate::assert_layout!(ibv_td_init_attr, 4, 4; comp_mask => 0);
crate::assert_layout!(ibv_parent_domain_init_attr, 48, 8;
    pd => 0, td => 8, comp_mask => 16, alloc => 24, free => 32, pd_context => 40);
crate::assert_layout!(verbs_context, 648, 8;
    query_port => 0, advise_mr => 8, alloc_null_mr => 16, query_rt_values => 192,
    create_cq_ex => 200, r#priv => 208, query_device_ex => 216, open_qp => 256,
    create_qp_ex => 264, get_srq_num => 272, create_srq_ex => 280, open_xrcd => 288,
    close_xrcd => 296, _ABI_placeholder3 => 304, sz => 312, context => 320);
crate::assert_layout!(ibv_srq_type, 4, 4);
crate::assert_layout!(ibv_wq_state, 4, 4);
