//! Resources created on a context (PD, MR, CQ, SRQ, QP, AH, MW, XRCD), their
//! attribute structs, and the enums that go with them.
//!
//! Enum-typed fields must be read as `c_int`, never as the Rust enum (see
//! the `device` module docs). Numbers in `assert_layout!` come from a C
//! program compiled against rdma-core 44's `verbs.h` (x86_64).

use core::ffi::{c_int, c_uint, c_void};

use crate::{ibv_context, ibv_gid, raw};

/// Memory access rights (`int access` of `ibv_reg_mr`, `qp_access_flags`, ...).
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ibv_access_flags {
    IBV_ACCESS_LOCAL_WRITE = 1,
    IBV_ACCESS_REMOTE_WRITE = 1 << 1,
    IBV_ACCESS_REMOTE_READ = 1 << 2,
    IBV_ACCESS_REMOTE_ATOMIC = 1 << 3,
    IBV_ACCESS_MW_BIND = 1 << 4,
    IBV_ACCESS_ZERO_BASED = 1 << 5,
    IBV_ACCESS_ON_DEMAND = 1 << 6,
    IBV_ACCESS_HUGETLB = 1 << 7,
    /// `IBV_ACCESS_OPTIONAL_FIRST`: the first of the optional flags a device may ignore.
    IBV_ACCESS_RELAXED_ORDERING = 1 << 20,
}

/// Queue pair transport service type.
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ibv_qp_type {
    IBV_QPT_RC = 2,
    IBV_QPT_UC = 3,
    IBV_QPT_UD = 4,
    IBV_QPT_RAW_PACKET = 8,
    IBV_QPT_XRC_SEND = 9,
    IBV_QPT_XRC_RECV = 10,
    IBV_QPT_DRIVER = 0xff,
}

/// Queue pair state machine states.
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ibv_qp_state {
    IBV_QPS_RESET = 0,
    IBV_QPS_INIT = 1,
    IBV_QPS_RTR = 2,
    IBV_QPS_RTS = 3,
    IBV_QPS_SQD = 4,
    IBV_QPS_SQE = 5,
    IBV_QPS_ERR = 6,
    IBV_QPS_UNKNOWN = 7,
}

/// Automatic path migration state.
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ibv_mig_state {
    IBV_MIG_MIGRATED = 0,
    IBV_MIG_REARM = 1,
    IBV_MIG_ARMED = 2,
}

/// Which `ibv_qp_attr` fields `ibv_modify_qp` / `ibv_query_qp` use (`int attr_mask`).
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ibv_qp_attr_mask {
    IBV_QP_STATE = 1 << 0,
    IBV_QP_CUR_STATE = 1 << 1,
    IBV_QP_EN_SQD_ASYNC_NOTIFY = 1 << 2,
    IBV_QP_ACCESS_FLAGS = 1 << 3,
    IBV_QP_PKEY_INDEX = 1 << 4,
    IBV_QP_PORT = 1 << 5,
    IBV_QP_QKEY = 1 << 6,
    IBV_QP_AV = 1 << 7,
    IBV_QP_PATH_MTU = 1 << 8,
    IBV_QP_TIMEOUT = 1 << 9,
    IBV_QP_RETRY_CNT = 1 << 10,
    IBV_QP_RNR_RETRY = 1 << 11,
    IBV_QP_RQ_PSN = 1 << 12,
    IBV_QP_MAX_QP_RD_ATOMIC = 1 << 13,
    IBV_QP_ALT_PATH = 1 << 14,
    IBV_QP_MIN_RNR_TIMER = 1 << 15,
    IBV_QP_SQ_PSN = 1 << 16,
    IBV_QP_MAX_DEST_RD_ATOMIC = 1 << 17,
    IBV_QP_PATH_MIG_STATE = 1 << 18,
    IBV_QP_CAP = 1 << 19,
    IBV_QP_DEST_QPN = 1 << 20,
    IBV_QP_RATE_LIMIT = 1 << 25,
}

/// Which `ibv_srq_attr` fields `ibv_modify_srq` uses (`int srq_attr_mask`).
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ibv_srq_attr_mask {
    IBV_SRQ_MAX_WR = 1 << 0,
    IBV_SRQ_LIMIT = 1 << 1,
}

/// Memory window type.
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ibv_mw_type {
    IBV_MW_TYPE_1 = 1,
    IBV_MW_TYPE_2 = 2,
}

/// What `ibv_rereg_mr` changes (`int flags`).
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ibv_rereg_mr_flags {
    IBV_REREG_MR_CHANGE_TRANSLATION = 1 << 0,
    IBV_REREG_MR_CHANGE_PD = 1 << 1,
    IBV_REREG_MR_CHANGE_ACCESS = 1 << 2,
    IBV_REREG_MR_FLAGS_SUPPORTED = (1 << 3) - 1,
}

/// Negative results of `ibv_rereg_mr`, saying whether the old MR is still usable.
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ibv_rereg_mr_err_code {
    IBV_REREG_MR_ERR_INPUT = -1,
    IBV_REREG_MR_ERR_DONT_FORK_NEW = -2,
    IBV_REREG_MR_ERR_DO_FORK_OLD = -3,
    IBV_REREG_MR_ERR_CMD = -4,
    IBV_REREG_MR_ERR_CMD_AND_DO_FORK_NEW = -5,
}

/// Completion status (`ibv_wc.status`).
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ibv_wc_status {
    IBV_WC_SUCCESS = 0,
    IBV_WC_LOC_LEN_ERR = 1,
    IBV_WC_LOC_QP_OP_ERR = 2,
    IBV_WC_LOC_EEC_OP_ERR = 3,
    IBV_WC_LOC_PROT_ERR = 4,
    IBV_WC_WR_FLUSH_ERR = 5,
    IBV_WC_MW_BIND_ERR = 6,
    IBV_WC_BAD_RESP_ERR = 7,
    IBV_WC_LOC_ACCESS_ERR = 8,
    IBV_WC_REM_INV_REQ_ERR = 9,
    IBV_WC_REM_ACCESS_ERR = 10,
    IBV_WC_REM_OP_ERR = 11,
    IBV_WC_RETRY_EXC_ERR = 12,
    IBV_WC_RNR_RETRY_EXC_ERR = 13,
    IBV_WC_LOC_RDD_VIOL_ERR = 14,
    IBV_WC_REM_INV_RD_REQ_ERR = 15,
    IBV_WC_REM_ABORT_ERR = 16,
    IBV_WC_INV_EECN_ERR = 17,
    IBV_WC_INV_EEC_STATE_ERR = 18,
    IBV_WC_FATAL_ERR = 19,
    IBV_WC_RESP_TIMEOUT_ERR = 20,
    IBV_WC_GENERAL_ERR = 21,
    IBV_WC_TM_ERR = 22,
    IBV_WC_TM_RNDV_INCOMPLETE = 23,
}

/// Completion opcode (`ibv_wc.opcode`); receives have `IBV_WC_RECV` (bit 7) set.
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ibv_wc_opcode {
    IBV_WC_SEND = 0,
    IBV_WC_RDMA_WRITE = 1,
    IBV_WC_RDMA_READ = 2,
    IBV_WC_COMP_SWAP = 3,
    IBV_WC_FETCH_ADD = 4,
    IBV_WC_BIND_MW = 5,
    IBV_WC_LOCAL_INV = 6,
    IBV_WC_TSO = 7,
    IBV_WC_ATOMIC_WRITE = 9,
    IBV_WC_RECV = 1 << 7,
    IBV_WC_RECV_RDMA_WITH_IMM = 129,
    IBV_WC_TM_ADD = 130,
    IBV_WC_TM_DEL = 131,
    IBV_WC_TM_SYNC = 132,
    IBV_WC_TM_RECV = 133,
    IBV_WC_TM_NO_TAG = 134,
    IBV_WC_DRIVER1 = 135,
    IBV_WC_DRIVER2 = 136,
    IBV_WC_DRIVER3 = 137,
}

/// Send work request opcode (`ibv_send_wr.opcode`).
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ibv_wr_opcode {
    IBV_WR_RDMA_WRITE = 0,
    IBV_WR_RDMA_WRITE_WITH_IMM = 1,
    IBV_WR_SEND = 2,
    IBV_WR_SEND_WITH_IMM = 3,
    IBV_WR_RDMA_READ = 4,
    IBV_WR_ATOMIC_CMP_AND_SWP = 5,
    IBV_WR_ATOMIC_FETCH_AND_ADD = 6,
    IBV_WR_LOCAL_INV = 7,
    IBV_WR_BIND_MW = 8,
    IBV_WR_SEND_WITH_INV = 9,
    IBV_WR_TSO = 10,
    IBV_WR_DRIVER1 = 11,
    IBV_WR_ATOMIC_WRITE = 15,
}

/// Bits of `ibv_send_wr.send_flags`.
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ibv_send_flags {
    IBV_SEND_FENCE = 1 << 0,
    IBV_SEND_SIGNALED = 1 << 1,
    IBV_SEND_SOLICITED = 1 << 2,
    IBV_SEND_INLINE = 1 << 3,
    IBV_SEND_IP_CSUM = 1 << 4,
}

/// Static injection rate (`ibv_ah_attr.static_rate`); the values are codes, not in order.
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ibv_rate {
    IBV_RATE_MAX = 0,
    IBV_RATE_2_5_GBPS = 2,
    IBV_RATE_5_GBPS = 5,
    IBV_RATE_10_GBPS = 3,
    IBV_RATE_20_GBPS = 6,
    IBV_RATE_30_GBPS = 4,
    IBV_RATE_40_GBPS = 7,
    IBV_RATE_60_GBPS = 8,
    IBV_RATE_80_GBPS = 9,
    IBV_RATE_120_GBPS = 10,
    IBV_RATE_14_GBPS = 11,
    IBV_RATE_56_GBPS = 12,
    IBV_RATE_112_GBPS = 13,
    IBV_RATE_168_GBPS = 14,
    IBV_RATE_25_GBPS = 15,
    IBV_RATE_100_GBPS = 16,
    IBV_RATE_200_GBPS = 17,
    IBV_RATE_300_GBPS = 18,
    IBV_RATE_28_GBPS = 19,
    IBV_RATE_50_GBPS = 20,
    IBV_RATE_400_GBPS = 21,
    IBV_RATE_600_GBPS = 22,
    IBV_RATE_800_GBPS = 23,
    IBV_RATE_1200_GBPS = 24,
}

/// A protection domain.
#[repr(C)]
pub struct ibv_pd {
    pub context: *mut ibv_context,
    pub handle: u32,
}

/// A registered memory region.
#[repr(C)]
pub struct ibv_mr {
    pub context: *mut ibv_context,
    pub pd: *mut ibv_pd,
    pub addr: *mut c_void,
    pub length: usize,
    pub handle: u32,
    /// Local key, used in `ibv_sge.lkey`.
    pub lkey: u32,
    /// Remote key, handed to the peer for RDMA access.
    pub rkey: u32,
}

/// A completion event channel.
#[repr(C)]
pub struct ibv_comp_channel {
    pub context: *mut ibv_context,
    pub fd: c_int,
    pub refcnt: c_int,
}

/// A completion queue.
#[repr(C)]
pub struct ibv_cq {
    pub context: *mut ibv_context,
    pub channel: *mut ibv_comp_channel,
    pub cq_context: *mut c_void,
    pub handle: u32,
    pub cqe: c_int,
    pub mutex: libc::pthread_mutex_t,
    pub cond: libc::pthread_cond_t,
    pub comp_events_completed: u32,
    pub async_events_completed: u32,
}

/// Shared receive queue attributes (`ibv_modify_srq`, `ibv_query_srq`).
#[repr(C)]
#[derive(Clone, Copy)]
pub struct ibv_srq_attr {
    pub max_wr: u32,
    pub max_sge: u32,
    pub srq_limit: u32,
}

/// Attributes for `ibv_create_srq`.
#[repr(C)]
#[derive(Clone, Copy)]
pub struct ibv_srq_init_attr {
    pub srq_context: *mut c_void,
    pub attr: ibv_srq_attr,
}

/// A shared receive queue.
#[repr(C)]
pub struct ibv_srq {
    pub context: *mut ibv_context,
    pub srq_context: *mut c_void,
    pub pd: *mut ibv_pd,
    pub handle: u32,
    pub mutex: libc::pthread_mutex_t,
    pub cond: libc::pthread_cond_t,
    pub events_completed: u32,
}

/// A queue pair.
#[repr(C)]
pub struct ibv_qp {
    pub context: *mut ibv_context,
    pub qp_context: *mut c_void,
    pub pd: *mut ibv_pd,
    pub send_cq: *mut ibv_cq,
    pub recv_cq: *mut ibv_cq,
    pub srq: *mut ibv_srq,
    pub handle: u32,
    pub qp_num: u32,
    /// Read as `c_int` (see the `device` module docs).
    pub state: raw::ibv_qp_state,
    /// Read as `c_int` (see the `device` module docs).
    pub qp_type: raw::ibv_qp_type,
    pub mutex: libc::pthread_mutex_t,
    pub cond: libc::pthread_cond_t,
    pub events_completed: u32,
}

/// Queue pair capacities, requested at creation and reported back.
#[repr(C)]
#[derive(Clone, Copy)]
pub struct ibv_qp_cap {
    pub max_send_wr: u32,
    pub max_recv_wr: u32,
    pub max_send_sge: u32,
    pub max_recv_sge: u32,
    pub max_inline_data: u32,
}

/// Attributes for `ibv_create_qp`.
#[repr(C)]
#[derive(Clone, Copy)]
pub struct ibv_qp_init_attr {
    pub qp_context: *mut c_void,
    pub send_cq: *mut ibv_cq,
    pub recv_cq: *mut ibv_cq,
    pub srq: *mut ibv_srq,
    pub cap: ibv_qp_cap,
    /// Read as `c_int` (see the `device` module docs).
    pub qp_type: raw::ibv_qp_type,
    pub sq_sig_all: c_int,
}

/// The GRH part of an address vector.
#[repr(C)]
#[derive(Clone, Copy)]
pub struct ibv_global_route {
    pub dgid: ibv_gid,
    pub flow_label: u32,
    pub sgid_index: u8,
    pub hop_limit: u8,
    pub traffic_class: u8,
}

/// An address vector (`ibv_create_ah`, `ibv_qp_attr.ah_attr`).
#[repr(C)]
#[derive(Clone, Copy)]
pub struct ibv_ah_attr {
    pub grh: ibv_global_route,
    pub dlid: u16,
    pub sl: u8,
    pub src_path_bits: u8,
    /// An `ibv_rate` code.
    pub static_rate: u8,
    pub is_global: u8,
    pub port_num: u8,
}

/// Queue pair attributes (`ibv_modify_qp`, `ibv_query_qp`).
#[repr(C)]
#[derive(Clone, Copy)]
pub struct ibv_qp_attr {
    /// Read as `c_int` (see the `device` module docs).
    pub qp_state: raw::ibv_qp_state,
    /// Read as `c_int` (see the `device` module docs).
    pub cur_qp_state: raw::ibv_qp_state,
    /// Read as `c_int` (see the `device` module docs).
    pub path_mtu: raw::ibv_mtu,
    /// Read as `c_int` (see the `device` module docs).
    pub path_mig_state: raw::ibv_mig_state,
    pub qkey: u32,
    pub rq_psn: u32,
    pub sq_psn: u32,
    pub dest_qp_num: u32,
    /// Bits of `ibv_access_flags`.
    pub qp_access_flags: c_uint,
    pub cap: ibv_qp_cap,
    pub ah_attr: ibv_ah_attr,
    pub alt_ah_attr: ibv_ah_attr,
    pub pkey_index: u16,
    pub alt_pkey_index: u16,
    pub en_sqd_async_notify: u8,
    pub sq_draining: u8,
    pub max_rd_atomic: u8,
    pub max_dest_rd_atomic: u8,
    pub min_rnr_timer: u8,
    pub port_num: u8,
    pub timeout: u8,
    pub retry_cnt: u8,
    pub rnr_retry: u8,
    pub alt_port_num: u8,
    pub alt_timeout: u8,
    pub rate_limit: u32,
}

/// An address handle.
#[repr(C)]
pub struct ibv_ah {
    pub context: *mut ibv_context,
    pub pd: *mut ibv_pd,
    pub handle: u32,
}

/// A memory window.
#[repr(C)]
pub struct ibv_mw {
    pub context: *mut ibv_context,
    pub pd: *mut ibv_pd,
    pub rkey: u32,
    pub handle: u32,
    /// Read as `c_int` (see the `device` module docs).
    pub r#type: raw::ibv_mw_type,
}

/// What a memory window binds to: an MR range and access rights.
#[repr(C)]
#[derive(Clone, Copy)]
pub struct ibv_mw_bind_info {
    pub mr: *mut ibv_mr,
    pub addr: u64,
    pub length: u64,
    /// Bits of `ibv_access_flags`.
    pub mw_access_flags: c_uint,
}

/// A type 1 memory window bind request (`ibv_bind_mw`).
#[repr(C)]
#[derive(Clone, Copy)]
pub struct ibv_mw_bind {
    pub wr_id: u64,
    /// Bits of `ibv_send_flags`.
    pub send_flags: c_uint,
    pub bind_info: ibv_mw_bind_info,
}

/// An XRC domain.
#[repr(C)]
pub struct ibv_xrcd {
    pub context: *mut ibv_context,
}

crate::assert_layout!(ibv_pd, 16, 8; context => 0, handle => 8);
crate::assert_layout!(ibv_mr, 48, 8;
    context => 0, pd => 8, addr => 16, length => 24, handle => 32, lkey => 36, rkey => 40);
crate::assert_layout!(ibv_comp_channel, 16, 8; context => 0, fd => 8, refcnt => 12);
crate::assert_layout!(ibv_cq, 128, 8;
    context => 0, channel => 8, cq_context => 16, handle => 24, cqe => 28, mutex => 32,
    cond => 72, comp_events_completed => 120, async_events_completed => 124);
crate::assert_layout!(ibv_srq_attr, 12, 4; max_wr => 0, max_sge => 4, srq_limit => 8);
crate::assert_layout!(ibv_srq_init_attr, 24, 8; srq_context => 0, attr => 8);
crate::assert_layout!(ibv_srq, 128, 8;
    context => 0, srq_context => 8, pd => 16, handle => 24, mutex => 32, cond => 72,
    events_completed => 120);
crate::assert_layout!(ibv_qp, 160, 8;
    context => 0, qp_context => 8, pd => 16, send_cq => 24, recv_cq => 32, srq => 40,
    handle => 48, qp_num => 52, state => 56, qp_type => 60, mutex => 64, cond => 104,
    events_completed => 152);
crate::assert_layout!(ibv_qp_cap, 20, 4;
    max_send_wr => 0, max_recv_wr => 4, max_send_sge => 8, max_recv_sge => 12,
    max_inline_data => 16);
crate::assert_layout!(ibv_qp_init_attr, 64, 8;
    qp_context => 0, send_cq => 8, recv_cq => 16, srq => 24, cap => 32, qp_type => 52,
    sq_sig_all => 56);
crate::assert_layout!(ibv_global_route, 24, 8;
    dgid => 0, flow_label => 16, sgid_index => 20, hop_limit => 21, traffic_class => 22);
crate::assert_layout!(ibv_ah_attr, 32, 8;
    grh => 0, dlid => 24, sl => 26, src_path_bits => 27, static_rate => 28, is_global => 29,
    port_num => 30);
crate::assert_layout!(ibv_qp_attr, 144, 8;
    qp_state => 0, cur_qp_state => 4, path_mtu => 8, path_mig_state => 12, qkey => 16,
    rq_psn => 20, sq_psn => 24, dest_qp_num => 28, qp_access_flags => 32, cap => 36,
    ah_attr => 56, alt_ah_attr => 88, pkey_index => 120, alt_pkey_index => 122,
    en_sqd_async_notify => 124, sq_draining => 125, max_rd_atomic => 126,
    max_dest_rd_atomic => 127, min_rnr_timer => 128, port_num => 129, timeout => 130,
    retry_cnt => 131, rnr_retry => 132, alt_port_num => 133, alt_timeout => 134,
    rate_limit => 136);
crate::assert_layout!(ibv_ah, 24, 8; context => 0, pd => 8, handle => 16);
crate::assert_layout!(ibv_mw, 32, 8; context => 0, pd => 8, rkey => 16, handle => 20, r#type => 24);
crate::assert_layout!(ibv_mw_bind_info, 32, 8; mr => 0, addr => 8, length => 16, mw_access_flags => 24);
crate::assert_layout!(ibv_mw_bind, 48, 8; wr_id => 0, send_flags => 8, bind_info => 16);
crate::assert_layout!(ibv_xrcd, 8, 8; context => 0);
crate::assert_layout!(ibv_qp_type, 4, 4);
crate::assert_layout!(ibv_access_flags, 4, 4);
