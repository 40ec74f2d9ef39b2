//! The Ethernet adapters of other vendors: Broadcom, Marvell (QLogic),
//! HiSilicon, Emulex and Chelsio, and VMware's paravirtual device. Each
//! kernel driver reports what its firmware (or hypervisor) says, so the
//! limits are typical figures of the named adapter; what the provider
//! offers is rdma-core 44's (`providers/<name>/`: its verbs table).

use super::hca::{
    CURR_QP_STATE_MOD, HCA, MEM_MGT_EXTENSIONS, MEM_WINDOW, MEM_WINDOW_TYPE_2B, N_NOTIFY_CQ,
    PORT_ACTIVE_EVENT, PORT_CM_SUP, PORT_IP_BASED_GIDS, PORT_REINIT_SUP, RC_RNR_NAK_GEN,
    RESIZE_MAX_WR, SHUTDOWN_PORT, SPEED_DDR, SYS_IMAGE_GUID, WIDTH_1X, XRC,
};
use super::Profile;

/// Broadcom BCM57508 (bnxt_re, 100 GbE): Linux 6.1's
/// `hw/bnxt_re/ib_verbs.c` (`bnxt_re_query_device`, the firmware's
/// `bnxt_qplib_get_dev_attr`), 4X EDR. The kernel has memory windows; rdma-core
/// 44's provider has no `alloc_mw` (EOPNOTSUPP), XRC or extended verbs.
pub static BCM57508: Profile = Profile {
    name: "Broadcom BCM57508 (bnxt_re)",
    max_qp: 65_537,
    max_qp_wr: 65_407,
    max_sge: 6,
    max_sge_rd: 6,
    max_cq: 131_072,
    max_cqe: 16_777_215,
    max_mr: 262_144,
    max_pd: 65_536,
    max_qp_rd_atom: 126,
    // Set to 0 by the driver.
    max_res_rd_atom: 0,
    max_qp_init_rd_atom: 126,
    max_ah: 131_072,
    max_srq: 8192,
    max_srq_wr: 65_534,
    max_srq_sge: 6,
    max_mw: 262_144,
    max_inline_data: 96,
    max_pkeys: Some(1),
    local_ca_ack_delay: 16,
    page_size_cap: 0x7fff_f000,
    cap_flags: Some(
        CURR_QP_STATE_MOD
            | RC_RNR_NAK_GEN
            | SHUTDOWN_PORT
            | SYS_IMAGE_GUID
            | RESIZE_MAX_WR
            | PORT_ACTIVE_EVENT
            | N_NOTIFY_CQ
            | MEM_WINDOW
            | MEM_WINDOW_TYPE_2B
            | MEM_MGT_EXTENSIONS,
    ),
    gid_tbl_len: 256,
    // With PCIe atomics (`is_atomic`): global.
    atomic_glob: true,
    // A full queue or too many SGEs (`bnxt_re_post_send`).
    post_errno: libc::ENOMEM,
    ..HCA
};

/// Marvell (QLogic) FastLinQ QL41000 (qedr, RoCE): Linux 6.1's
/// `hw/qedr/verbs.c` (`qedr_query_device`, the qed core's figures).
/// rdma-core 44's qedr has XRC (`qelr_open_xrcd`), no memory windows, no
/// extended CQ, and `qelr_create_qp_ex` takes a PD or an XRC domain and
/// nothing else (send operations: EOPNOTSUPP).
pub static QL41000: Profile = Profile {
    name: "Marvell FastLinQ QL41000 (qedr)",
    max_qp: 8192,
    max_qp_wr: 8192,
    max_sge: 4,
    max_sge_rd: 4,
    max_cq: 16_384,
    max_cqe: 32_767,
    max_mr: 131_072,
    max_pd: 65_536,
    max_qp_rd_atom: 16,
    max_res_rd_atom: 16 * 8192,
    max_qp_init_rd_atom: 16,
    max_ah: 8192,
    max_srq: 8192,
    max_srq_wr: 8192,
    max_srq_sge: 4,
    max_mw: 131_072,
    max_inline_data: 256,
    max_pkeys: Some(1),
    local_ca_ack_delay: 15,
    cap_flags: Some(CURR_QP_STATE_MOD | RC_RNR_NAK_GEN | MEM_MGT_EXTENSIONS | XRC),
    xrc: true,
    gid_tbl_len: 128,
    // 25 GbE, as ib_get_eth_speed encodes it.
    active_width: WIDTH_1X,
    ..HCA
};

/// HiSilicon Hip08 (hns, RoCE v2): Linux 6.1's `hw/hns/hns_roce_main.c`
/// (`hns_roce_query_device`, the firmware's caps of `hns_roce_hw_v2.c`;
/// one SGE for RDMA READ, one P_Key, a 2 GiB message).
/// rdma-core 44's hns has XRC, memory windows of both types, the
/// extended CQ (without timestamps: EOPNOTSUPP) and QP (send operations)
/// and `ibv_rereg_mr`; it refuses UD and UC QPs from user space
/// (`check_qp_create_mask`: UD EINVAL on Hip08, UC EOPNOTSUPP).
pub static HIP08: Profile = Profile {
    name: "HiSilicon Hip08 (hns)",
    max_qp: 262_144,
    max_qp_wr: 32_768,
    max_sge: 64,
    max_sge_rd: 1,
    max_cq: 1_048_576,
    max_cqe: 4_194_304,
    max_mr: 1_048_576,
    max_pd: 16_777_216,
    max_qp_rd_atom: 128,
    max_res_rd_atom: 128 * 262_144,
    max_qp_init_rd_atom: 128,
    max_srq: 1_048_576,
    max_srq_wr: 32_768,
    max_srq_sge: 64,
    // Reports no windows (it makes them) nor address handles.
    max_mw: 0,
    max_inline_data: 32,
    max_pkeys: Some(1),
    // Fast registration's bit is Hip09's.
    cap_flags: Some(PORT_ACTIVE_EVENT | RC_RNR_NAK_GEN | XRC),
    xrc: true,
    mw: true,
    mw_type2: true,
    cq_ex: true,
    qp_ex: true,
    ud_qp_refused: Some(libc::EINVAL),
    gid_tbl_len: 256,
    // CM, reinit, vendor class and boot management; 4X SDR whatever the
    // link (`hns_roce_query_port`).
    roce_port_cap_flags: PORT_CM_SUP | PORT_REINIT_SUP | 1 << 23 | 1 << 24,
    active_speed: 1,
    quirks: super::SPEC,
    ..HCA
};

/// Emulex OneConnect OCe14000 (ocrdma, RoCE): Linux 6.1's
/// `hw/ocrdma/ocrdma_verbs.c` (`ocrdma_query_device`, the firmware's
/// `ocrdma_mbx_query_config`; no SGE for RDMA READ, 512 address handles,
/// one P_Key). rdma-core 44's ocrdma has no memory
/// windows, XRC or extended verbs; the adapter no atomics or UC.
pub static OCE14000: Profile = Profile {
    name: "Emulex OneConnect OCe14000 (ocrdma)",
    max_qp: 2048,
    max_qp_wr: 2048,
    max_sge: 4,
    max_sge_rd: 0,
    max_cq: 8192,
    max_cqe: 8191,
    max_mr: 65_536,
    max_pd: 1024,
    max_qp_rd_atom: 8,
    max_res_rd_atom: 8 * 2048,
    max_qp_init_rd_atom: 8,
    // OCRDMA_MAX_AH.
    max_ah: 512,
    max_srq: 2048,
    max_srq_wr: 2048,
    max_srq_sge: 4,
    max_inline_data: 256,
    max_pkeys: Some(1),
    page_size_cap: 0x0fff_f000,
    cap_flags: Some(
        CURR_QP_STATE_MOD | RC_RNR_NAK_GEN | SHUTDOWN_PORT | SYS_IMAGE_GUID | MEM_MGT_EXTENSIONS,
    ),
    // CM, reinit, device management, vendor class, IP-based GIDs; 16
    // GIDs (OCRDMA_MAX_SGID); a 10 GbE link, 1X QDR.
    roce_port_cap_flags: PORT_CM_SUP | PORT_REINIT_SUP | 1 << 19 | 1 << 24 | PORT_IP_BASED_GIDS,
    gid_tbl_len: 16,
    active_width: WIDTH_1X,
    active_speed: 4,
    // A full queue or too many SGEs (`ocrdma_post_send`).
    post_errno: libc::ENOMEM,
    ..HCA
};

/// Chelsio T6 (T62100, cxgb4, iWARP): Linux 6.1's `hw/cxgb4/provider.c`
/// (`c4iw_query_device`: 4 SGEs, 1 for RDMA READ, 65,536 PDs; QPs half
/// the firmware's QP range) and `c4iw_query_port` (4X DDR, one GID).
/// rdma-core 44's cxgb4 has SRQs and no memory windows or extended verbs.
pub static T6: Profile = Profile {
    name: "Chelsio T6 (cxgb4, iWARP)",
    max_qp: 32_768,
    max_qp_wr: 16_383,
    max_sge: 4,
    max_sge_rd: 1,
    max_cq: 65_536,
    max_cqe: 65_535,
    max_mr: 32_768,
    max_pd: 65_536,
    max_qp_rd_atom: 8,
    max_res_rd_atom: 8 * 32_768,
    max_qp_init_rd_atom: 8,
    max_srq: 1024,
    max_srq_wr: 16_383,
    max_srq_sge: 4,
    max_inline_data: 280,
    max_pkeys: Some(0),
    page_size_cap: 0xffff_f000,
    cap_flags: Some(MEM_WINDOW | MEM_MGT_EXTENSIONS),
    max_msg_sz: u32::MAX,
    // CM, SNMP tunnel, device management, boot management, vendor
    // class and reinit, as c4iw_query_port sets them.
    roce_port_cap_flags: PORT_CM_SUP | 1 << 17 | 1 << 19 | 1 << 23 | 1 << 24 | PORT_REINIT_SUP,
    active_speed: SPEED_DDR,
    ..HCA
};

/// VMware PVRDMA (vmw_pvrdma, RoCE): Linux 6.1's
/// `hw/vmw_pvrdma/pvrdma_verbs.c` (`pvrdma_query_device`: every figure
/// the hypervisor's device caps give, ESXi's typical ones). rdma-core 44's
/// vmw_pvrdma has SRQs and no memory windows, XRC or extended verbs; the
/// device no atomics or UC.
pub static PVRDMA: Profile = Profile {
    name: "VMware PVRDMA (vmw_pvrdma)",
    max_qp: 32_768,
    max_qp_wr: 1024,
    max_sge: 16,
    max_sge_rd: 16,
    max_cq: 4096,
    max_cqe: 262_144,
    max_mr: 65_536,
    max_pd: 4096,
    max_qp_rd_atom: 32,
    max_res_rd_atom: 32 * 32_768,
    max_qp_init_rd_atom: 32,
    max_ah: 4096,
    max_srq: 4096,
    max_srq_wr: 1024,
    max_srq_sge: 16,
    max_inline_data: 64,
    max_pkeys: Some(128),
    // What the driver adds to the hypervisor's (none by default).
    cap_flags: Some(RC_RNR_NAK_GEN | PORT_ACTIVE_EVENT),
    gid_tbl_len: 6,
    ..HCA
};
