//! The kernel's software devices the rxe and siw families stand for.

use super::{Profile, Quirks, SPEC};

// `ibv_device_cap_flags` of Linux 6.1's RXE_DEVICE_CAP_FLAGS.
crate::abi::values!(u32: ibv_device_cap_flags {
    BAD_PKEY_CNTR = IBV_DEVICE_BAD_PKEY_CNTR,
    BAD_QKEY_CNTR = IBV_DEVICE_BAD_QKEY_CNTR,
    AUTO_PATH_MIG = IBV_DEVICE_AUTO_PATH_MIG,
    CHANGE_PHY_PORT = IBV_DEVICE_CHANGE_PHY_PORT,
    UD_AV_PORT_ENFORCE = IBV_DEVICE_UD_AV_PORT_ENFORCE,
    PORT_ACTIVE_EVENT = IBV_DEVICE_PORT_ACTIVE_EVENT,
    SYS_IMAGE_GUID = IBV_DEVICE_SYS_IMAGE_GUID,
    RC_RNR_NAK_GEN = IBV_DEVICE_RC_RNR_NAK_GEN,
    SRQ_RESIZE = IBV_DEVICE_SRQ_RESIZE,
    MEM_WINDOW = IBV_DEVICE_MEM_WINDOW,
    MEM_MGT_EXTENSIONS = IBV_DEVICE_MEM_MGT_EXTENSIONS,
    MEM_WINDOW_TYPE_2B = IBV_DEVICE_MEM_WINDOW_TYPE_2B,
});

/// The kernel's default table size for rxe objects (`DEFAULT_MAX_VALUE`).
pub(super) const RXE_DEFAULT_MAX: i32 = 1 << 20;

/// Soft-RoCE: rdma-core 44's rxe provider on Linux 6.1 (`rxe_param.h`).
pub static RXE: Profile = Profile {
    name: "Soft-RoCE (rxe, rdma-core 44, Linux 6.1)",
    // QP indices 16 and up of the default table.
    max_qp: RXE_DEFAULT_MAX - 16,
    max_qp_wr: RXE_DEFAULT_MAX,
    max_sge: 32,
    max_sge_rd: 32,
    max_cq: RXE_DEFAULT_MAX,
    max_cqe: (1 << 15) - 1,
    // MR indices 0x1 .. 0x80000, MW indices 0x80001 .. 0x100000.
    max_mr: 0x8_0000 - 1,
    max_pd: RXE_DEFAULT_MAX,
    max_qp_rd_atom: 128,
    max_res_rd_atom: 0x3f000,
    max_qp_init_rd_atom: 128,
    max_mcast_grp: 8192,
    max_mcast_qp_attach: 56,
    max_total_mcast_qp_attach: Some(0x70000),
    max_ah: (1 << 15) - 1,
    // SRQ indices 0x20001 .. 0x100000 (measured: 917503).
    max_srq: 0x10_0000 - 0x2_0001,
    max_srq_wr: RXE_DEFAULT_MAX,
    max_srq_sge: 27,
    max_mw: 0x10_0000 - 0x8_0001,
    // 32 SGEs of 16 bytes.
    max_inline_data: 32 * 16,
    max_pkeys: Some(64),
    local_ca_ack_delay: 15,
    page_size_cap: 0xffff_f000,
    fw_ver: Some("0.0.0"),
    cap_flags: Some(
        BAD_PKEY_CNTR
            | BAD_QKEY_CNTR
            | AUTO_PATH_MIG
            | CHANGE_PHY_PORT
            | UD_AV_PORT_ENFORCE
            | PORT_ACTIVE_EVENT
            | SYS_IMAGE_GUID
            | RC_RNR_NAK_GEN
            | SRQ_RESIZE
            | MEM_WINDOW
            | MEM_MGT_EXTENSIONS
            | MEM_WINDOW_TYPE_2B,
    ),
    xrc: false,
    odp: false,
    device_memory: false,
    domains: false,
    timestamps: false,
    wq: false,
    mw: true,
    cq_ex: true,
    qp_ex: true,
    gid_tbl_len: 1024,
    // CM_SUP; GRH required (measured on Linux 6.1's rxe).
    roce_port_cap_flags: 1 << 16,
    roce_port_flags: 1,
    max_msg_sz: 0x80_0000,
    // What the kernel derives from a NIC of unknown speed: 1X SDR.
    active_width: 1,
    active_speed: 1,
    roce_v2_only: true,
    ring_queues: true,
    send_byte_len: true,
    responder_fails: true,
    qp_access_inv_req: true,
    short_recv_qp_op_err: true,
    cq_overflow_fails_qp: true,
    rnr_timer: true,
    mw_key_byte_only: true,
    unanswered_times_out: true,
    comp_vector_per_cpu: true,
    spec_qp_events: false,
    lkey_qp_op_err: true,
    post_errno: libc::EINVAL,
    post_state_errno: libc::EINVAL,
    builder_errno: libc::ENOSPC,
    quirks: Quirks {
        inline_list_empty: true,
        sge_list_first_len: true,
        unexecutable_ops: true,
        no_credit_stalls: true,
        no_dest_credit_refused: true,
        no_rereg_mr: true,
    },
    limit_errno: libc::EINVAL,
};

/// Soft-iWARP: rdma-core 44's siw provider on Linux 6.1's siw (`siw.h`,
/// `siw_query_device`): 6 SGEs, 80 bytes inline, one SGE for RDMA READ
/// responses, no memory windows, atomics, address handles or multicast
/// (iWARP), no XRC, on-demand paging, device memory or domains; objects
/// past the device's counts fail with ENOMEM.
pub static SIW: Profile = Profile {
    name: "Soft-iWARP (siw, rdma-core 44, Linux 6.1)",
    max_qp: 1024 * 100,
    max_qp_wr: 1024 * 32,
    max_sge: 6,
    max_sge_rd: 1,
    max_cq: 1024 * 100,
    max_cqe: 1024 * 32 * 100,
    max_mr: 1024 * 100 * 10,
    max_pd: 1024 * 100,
    max_qp_rd_atom: 128,
    max_res_rd_atom: 1024 * 100 * 128,
    max_qp_init_rd_atom: 128,
    max_mcast_grp: 0,
    max_mcast_qp_attach: 0,
    max_total_mcast_qp_attach: Some(0),
    max_ah: 0,
    max_srq: 1024 * 100,
    max_srq_wr: 1024 * 32 * 10,
    max_srq_sge: 6,
    max_mw: 0,
    // Five SGEs of 16 bytes.
    max_inline_data: 80,
    max_pkeys: None,
    local_ca_ack_delay: 0,
    page_size_cap: 4096,
    fw_ver: None,
    cap_flags: Some(MEM_MGT_EXTENSIONS),
    xrc: false,
    odp: false,
    device_memory: false,
    domains: false,
    timestamps: false,
    wq: false,
    mw: false,
    cq_ex: false,
    qp_ex: false,
    gid_tbl_len: 1,
    roce_port_cap_flags: 0,
    roce_port_flags: 0,
    max_msg_sz: 0x7fff_ffff,
    active_width: 2,
    active_speed: 1,
    roce_v2_only: false,
    ring_queues: false,
    send_byte_len: true,
    responder_fails: true,
    qp_access_inv_req: false,
    short_recv_qp_op_err: false,
    cq_overflow_fails_qp: false,
    rnr_timer: false,
    mw_key_byte_only: false,
    unanswered_times_out: false,
    comp_vector_per_cpu: false,
    spec_qp_events: false,
    lkey_qp_op_err: false,
    post_errno: libc::EINVAL,
    post_state_errno: libc::EINVAL,
    builder_errno: libc::EINVAL,
    // Not a departure from the spec, a verb the provider lacks.
    quirks: Quirks {
        no_rereg_mr: true,
        ..SPEC
    },
    limit_errno: libc::ENOMEM,
};
