//! What every hardware adapter's profile shares: the IB spec's transport
//! rules (no software device's quirks), the device capability bits the
//! profiles name, and a provider that offers only what it implements
//! (each profile turns on its own features and gives its own figures).

use super::{Profile, SPEC};

// `ibv_device_cap_flags` bits the hardware profiles report.
crate::abi::values!(pub(super) u32: ibv_device_cap_flags {
    RESIZE_MAX_WR = IBV_DEVICE_RESIZE_MAX_WR,
    BAD_PKEY_CNTR = IBV_DEVICE_BAD_PKEY_CNTR,
    BAD_QKEY_CNTR = IBV_DEVICE_BAD_QKEY_CNTR,
    AUTO_PATH_MIG = IBV_DEVICE_AUTO_PATH_MIG,
    CHANGE_PHY_PORT = IBV_DEVICE_CHANGE_PHY_PORT,
    UD_AV_PORT_ENFORCE = IBV_DEVICE_UD_AV_PORT_ENFORCE,
    CURR_QP_STATE_MOD = IBV_DEVICE_CURR_QP_STATE_MOD,
    SHUTDOWN_PORT = IBV_DEVICE_SHUTDOWN_PORT,
    PORT_ACTIVE_EVENT = IBV_DEVICE_PORT_ACTIVE_EVENT,
    SYS_IMAGE_GUID = IBV_DEVICE_SYS_IMAGE_GUID,
    RC_RNR_NAK_GEN = IBV_DEVICE_RC_RNR_NAK_GEN,
    SRQ_RESIZE = IBV_DEVICE_SRQ_RESIZE,
    N_NOTIFY_CQ = IBV_DEVICE_N_NOTIFY_CQ,
    MEM_WINDOW = IBV_DEVICE_MEM_WINDOW,
    XRC = IBV_DEVICE_XRC,
    MEM_MGT_EXTENSIONS = IBV_DEVICE_MEM_MGT_EXTENSIONS,
    MEM_WINDOW_TYPE_2B = IBV_DEVICE_MEM_WINDOW_TYPE_2B,
});

/// `port_cap_flags` bits of an Ethernet port (`IB_PORT_*`).
pub(super) const PORT_CM_SUP: u32 = 1 << 16;
pub(super) const PORT_REINIT_SUP: u32 = 1 << 25;
pub(super) const PORT_IP_BASED_GIDS: u32 = 1 << 26;

/// `ibv_port_attr` link encodings: width 1X / 4X, speed SDR ... EDR.
pub(super) const WIDTH_1X: u8 = 1;
pub(super) const WIDTH_4X: u8 = 2;
pub(super) const SPEED_DDR: u8 = 2;
pub(super) const SPEED_FDR10: u8 = 8;
pub(super) const SPEED_EDR: u8 = 32;

/// The base of every hardware profile: figures 0 and no optional
/// feature, each profile gives its own (`..HCA` takes the rest): the
/// transport as the IB spec has it, a work request with too many SGEs
/// refused with EINVAL (the post verbs of ipathverbs, hfi1verbs, irdma,
/// hns and vmw_pvrdma; mthca returns -1, cxgb4 and qedr -EINVAL, which
/// the sim does not copy), a create past a limit ENOMEM.
pub(super) const HCA: Profile = Profile {
    name: "",
    max_qp: 0,
    max_qp_wr: 0,
    max_sge: 0,
    max_sge_rd: 0,
    max_cq: 0,
    max_cqe: 0,
    max_mr: 0,
    max_pd: 0,
    max_qp_rd_atom: 0,
    max_res_rd_atom: 0,
    max_qp_init_rd_atom: 0,
    max_mcast_grp: 0,
    max_mcast_qp_attach: 0,
    max_total_mcast_qp_attach: None,
    max_ah: 0,
    max_srq: 0,
    max_srq_wr: 0,
    max_srq_sge: 0,
    max_mw: 0,
    max_inline_data: 0,
    max_pkeys: None,
    local_ca_ack_delay: 0,
    page_size_cap: 0xffff_f000,
    fw_ver: None,
    cap_flags: None,
    xrc: false,
    odp: false,
    device_memory: false,
    domains: false,
    timestamps: false,
    wq: false,
    mw: false,
    mw_type2: false,
    srq: true,
    ud_qp_refused: None,
    atomic_glob: false,
    cq_ex: false,
    qp_ex: false,
    gid_tbl_len: 16,
    roce_port_cap_flags: PORT_CM_SUP | PORT_IP_BASED_GIDS,
    roce_port_flags: 0,
    max_msg_sz: 0x8000_0000,
    active_width: WIDTH_4X,
    active_speed: SPEED_EDR,
    roce_v2_only: false,
    ring_queues: false,
    send_byte_len: false,
    responder_fails: true,
    qp_access_inv_req: false,
    short_recv_qp_op_err: false,
    cq_overflow_fails_qp: false,
    rnr_timer: false,
    mw_key_byte_only: false,
    unanswered_times_out: false,
    comp_vector_per_cpu: false,
    spec_qp_events: true,
    lkey_qp_op_err: false,
    post_errno: libc::EINVAL,
    post_state_errno: libc::EINVAL,
    builder_errno: libc::EINVAL,
    // rdma-core 44 gives `ibv_rereg_mr` to mlx5, mlx4 and hns only.
    quirks: super::Quirks {
        no_rereg_mr: true,
        ..SPEC
    },
    limit_errno: libc::ENOMEM,
};
