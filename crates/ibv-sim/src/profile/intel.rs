//! The Intel (and QLogic) adapters: the InfiniPath and Omni-Path HCAs of
//! the qib and hfi1 families, whose verbs the kernel's rdmavt implements
//! in software, and the Ethernet RDMA engines irdma drives (E810 RoCE v2,
//! X722 iWARP; Linux 6.1 has no i40iw driver, irdma took X722 over).

use super::hca::{
    BAD_PKEY_CNTR, BAD_QKEY_CNTR, HCA, MEM_MGT_EXTENSIONS, MEM_WINDOW, PORT_ACTIVE_EVENT,
    PORT_CM_SUP, PORT_REINIT_SUP, RC_RNR_NAK_GEN, SHUTDOWN_PORT, SPEED_FDR10, SRQ_RESIZE,
    SYS_IMAGE_GUID, WIDTH_1X,
};
use super::Profile;

/// What rdmavt's HCAs share: every figure a module parameter of the
/// driver (`hw/qib/qib_verbs.c`, `hw/hfi1/verbs.c`, their defaults),
/// 16,384 multicast groups of 16 QPs, 65,536 MRs (a 16-bit lkey table),
/// global atomics; rdma-core's ipathverbs and hfi1verbs providers have no
/// memory windows, XRC or extended verbs.
const RDMAVT: Profile = Profile {
    max_qp_wr: 16_383,
    max_sge: 96,
    max_sge_rd: 96,
    max_cq: 131_071,
    max_cqe: 196_607,
    max_mr: 65_536,
    max_pd: 65_535,
    max_qp_rd_atom: 16,
    max_qp_init_rd_atom: 255,
    max_mcast_grp: 16_384,
    max_mcast_qp_attach: 16,
    max_ah: 65_535,
    max_srq: 1024,
    max_srq_wr: 131_071,
    max_srq_sge: 128,
    page_size_cap: 4096,
    atomic_glob: true,
    ..HCA
};

/// QLogic QLE7340 (qib): Linux 6.1's qib (`hw/qib/qib_verbs.c`,
/// `qib_fill_device_attr`: 16,384 QPs by default).
pub static QLE7340: Profile = Profile {
    name: "QLogic QLE7340 (qib)",
    max_qp: 16_384,
    cap_flags: Some(
        BAD_PKEY_CNTR
            | BAD_QKEY_CNTR
            | SHUTDOWN_PORT
            | SYS_IMAGE_GUID
            | RC_RNR_NAK_GEN
            | PORT_ACTIVE_EVENT
            | SRQ_RESIZE,
    ),
    ..RDMAVT
};

/// Intel Omni-Path HFI 100 (hfi1): Linux 6.1's hfi1 (`hw/hfi1/verbs.c`,
/// `hfi1_fill_device_attr`: 32,768 QPs and 3,145,727 CQEs by default,
/// fast registration).
pub static OMNIPATH: Profile = Profile {
    name: "Omni-Path HFI 100 (hfi1)",
    max_qp: 32_768,
    max_cqe: 0x2f_ffff,
    cap_flags: Some(
        BAD_PKEY_CNTR
            | BAD_QKEY_CNTR
            | SHUTDOWN_PORT
            | SYS_IMAGE_GUID
            | RC_RNR_NAK_GEN
            | PORT_ACTIVE_EVENT
            | SRQ_RESIZE
            | MEM_MGT_EXTENSIONS,
    ),
    ..RDMAVT
};

/// What both irdma generations share: `irdma_query_device`
/// (`hw/irdma/verbs.c`): type 1 memory windows (rdma-core 44's
/// `irdma_ualloc_mw` refuses type 2 with ENOTSUP), as many windows as
/// MRs, no SRQ (rdma-core 44's irdma has no SRQ verbs: EOPNOTSUPP), no
/// atomics, UC or XRC, and a P_Key table of one. Its limits are the
/// firmware's (HMC) figures: typical ones of a default profile.
const IRDMA: Profile = Profile {
    max_cq: 262_141,
    max_cqe: 1_048_575,
    max_mr: 2_097_150,
    max_mw: 2_097_150,
    max_pd: 262_144,
    max_qp_init_rd_atom: 255,
    max_pkeys: Some(1),
    mw: true,
    srq: false,
    max_msg_sz: 0x7fff_ffff,
    roce_port_cap_flags: PORT_CM_SUP | PORT_REINIT_SUP,
    ..HCA
};

/// Intel E810 (irdma gen 2, RoCE v2; `icrdma_hw.h`): 13 SGEs and 101
/// bytes inline (`max_hw_wq_frags`, `max_hw_inline`), IRD 127 and ORD
/// 255, a completion clock (its
/// extended CQ takes timestamps), 32 GIDs (`irdma_query_port`), 100 Gb/s.
pub static E810: Profile = Profile {
    name: "Intel E810 (irdma, RoCE v2)",
    max_qp: 131_069,
    max_qp_wr: 4063,
    max_sge: 13,
    max_sge_rd: 13,
    max_qp_rd_atom: 127,
    max_mcast_grp: 256,
    max_mcast_qp_attach: 8,
    max_ah: 131_072,
    max_inline_data: 101,
    page_size_cap: 0x4020_1000, // 4 KiB, 2 MiB, 1 GiB
    cap_flags: Some(MEM_WINDOW | MEM_MGT_EXTENSIONS | RC_RNR_NAK_GEN),
    timestamps: true,
    cq_ex: true,
    gid_tbl_len: 32,
    ..IRDMA
};

/// Intel X722 (irdma gen 1, iWARP; the i40iw figures, `i40iw_hw.h`): 3
/// SGEs, 1 for RDMA READ, 48 bytes inline, 2,047 work requests, IRD 64
/// and ORD 127, 32,768 PDs, no extended CQ (irdma refuses one on gen 1
/// with EOPNOTSUPP), 10 Gb/s.
pub static X722: Profile = Profile {
    name: "Intel X722 (irdma gen 1, iWARP)",
    max_qp: 16_381,
    max_qp_wr: 2047,
    max_sge: 3,
    max_sge_rd: 1,
    max_pd: 32_768,
    max_qp_rd_atom: 64,
    max_qp_init_rd_atom: 127,
    max_inline_data: 48,
    page_size_cap: 0x20_1000, // 4 KiB, 2 MiB
    // P_Keys are RoCE's only.
    max_pkeys: Some(0),
    cap_flags: Some(MEM_WINDOW | MEM_MGT_EXTENSIONS),
    active_width: WIDTH_1X,
    active_speed: SPEED_FDR10,
    ..IRDMA
};
