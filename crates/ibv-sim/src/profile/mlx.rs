//! The Mellanox generations the mlx5, mlx4 and mthca families stand for.

use super::hca::{
    AUTO_PATH_MIG, BAD_PKEY_CNTR, BAD_QKEY_CNTR, CHANGE_PHY_PORT, HCA, PORT_ACTIVE_EVENT,
    RC_RNR_NAK_GEN, SYS_IMAGE_GUID, UD_AV_PORT_ENFORCE,
};
use super::Profile;

/// What the ConnectX providers (mlx5, mlx4) share beyond the base: XRC,
/// completion timestamps, WQs and memory windows of both types in the
/// provider, and post verbs that refuse a full queue, too many SGEs or
/// too much inline data with ENOMEM (as their extended builders do).
/// `ibv_rereg_mr` is theirs too.
const CONNECTX: Profile = Profile {
    xrc: true,
    timestamps: true,
    wq: true,
    mw: true,
    mw_type2: true,
    cq_ex: true,
    qp_ex: true,
    post_errno: libc::ENOMEM,
    builder_errno: libc::ENOMEM,
    max_msg_sz: 0x4000_0000,
    quirks: super::SPEC,
    ..HCA
};

/// ConnectX-6 (MT4123, mlx5): rdma-core 44's mlx5 provider
/// (`providers/mlx5/verbs.c`, `mlx5.c`) on Linux 6.1's mlx5_ib
/// (`hw/mlx5/main.c`, `mlx5_ib_query_device`: figures the firmware's
/// HCA caps give, a ConnectX-6 with firmware 20.35's).
pub static CONNECTX6: Profile = Profile {
    name: "ConnectX-6 (mlx5)",
    max_qp: 262_144,
    max_qp_wr: 32_768,
    max_sge: 30,
    max_sge_rd: 30,
    max_cq: 16_777_216,
    max_cqe: 4_194_303,
    max_mr: 16_777_216,
    max_pd: 16_777_216,
    max_qp_rd_atom: 16,
    max_res_rd_atom: 4_194_304,
    max_qp_init_rd_atom: 16,
    max_mcast_grp: 2_097_152,
    max_mcast_qp_attach: 240,
    max_ah: i32::MAX,
    max_srq: 8_388_608,
    max_srq_wr: 32_767,
    max_srq_sge: 31,
    max_mw: 1 << 16,
    max_inline_data: 512,
    local_ca_ack_delay: 16,
    page_size_cap: 0xffff_ffff_ffff_f000,
    odp: true,
    device_memory: true,
    domains: true,
    // Its send queue takes no work request before RTS (ENOMEM).
    post_state_errno: libc::ENOMEM,
    ..CONNECTX
};

/// ConnectX-3 (MT4099, mlx4): rdma-core 44's mlx4 provider
/// (`providers/mlx4/verbs.c`) on Linux 6.1's mlx4_ib (`hw/mlx4/main.c`,
/// `mlx4_ib_query_device`), as `ibv_devinfo -v` shows a ConnectX-3 with
/// firmware 2.42. No on-demand paging, device memory, thread or parent
/// domains (rdma-core's placeholders: EOPNOTSUPP).
pub static CONNECTX3: Profile = Profile {
    name: "ConnectX-3 (mlx4)",
    max_qp: 392_632,
    max_qp_wr: 16_351,
    max_sge: 32,
    max_sge_rd: 30,
    max_cq: 65_408,
    max_cqe: 4_194_303,
    max_mr: 524_032,
    max_pd: 32_764,
    max_qp_rd_atom: 16,
    max_res_rd_atom: 6_282_112,
    max_qp_init_rd_atom: 128,
    max_mcast_grp: 131_072,
    max_mcast_qp_attach: 244,
    max_total_mcast_qp_attach: Some(31_981_568),
    max_ah: i32::MAX,
    max_srq: 65_472,
    max_srq_wr: 16_383,
    max_srq_sge: 31,
    // mlx4_ib reports none; its windows come from the MR table.
    max_mw: 0,
    // The provider's bound at QP creation.
    max_inline_data: 1024,
    max_pkeys: Some(128),
    local_ca_ack_delay: 15,
    page_size_cap: 0xffff_fe00,
    gid_tbl_len: 128,
    active_speed: 16, // FDR
    // The provider does not check the state; the sim refuses as rxe.
    post_state_errno: libc::EINVAL,
    ..CONNECTX
};

/// InfiniHost III Ex in mem-free mode (MT25218, mthca): rdma-core 44's
/// mthca provider (`providers/mthca/mthca.c`: no memory windows, XRC or
/// extended verbs) on Linux 6.1's mthca (`hw/mthca/mthca_provider.c`,
/// `mthca_query_device`). Its limits are what the firmware's QUERY_DEV_LIM
/// and the driver's default profile (`mthca_main.c`) leave after the
/// reserved entries: typical figures of a 128 MB card. It reports no
/// `max_ah` or `max_mw` (address handles live in host memory, uncounted).
pub static INFINIHOST3: Profile = Profile {
    name: "InfiniHost III Ex (mthca)",
    max_qp: 64_512,
    max_qp_wr: 16_384,
    max_sge: 27,
    max_sge_rd: 27,
    max_cq: 65_408,
    max_cqe: 131_071,
    max_mr: 131_056,
    max_pd: 32_764,
    max_qp_rd_atom: 4,
    max_res_rd_atom: 258_048,
    max_qp_init_rd_atom: 128,
    max_mcast_grp: 8192,
    max_mcast_qp_attach: 56,
    max_srq: 65_472,
    max_srq_wr: 16_383,
    max_srq_sge: 27,
    max_inline_data: 64,
    max_pkeys: Some(64),
    local_ca_ack_delay: 15,
    cap_flags: Some(
        BAD_PKEY_CNTR
            | BAD_QKEY_CNTR
            | AUTO_PATH_MIG
            | CHANGE_PHY_PORT
            | UD_AV_PORT_ENFORCE
            | PORT_ACTIVE_EVENT
            | SYS_IMAGE_GUID
            | RC_RNR_NAK_GEN,
    ),
    ..HCA
};
