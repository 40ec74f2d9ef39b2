//! `ibv_query_device_ex` and the device's extended values: the extended
//! attributes and their capability structs (ODP, TSO, RSS, packet pacing,
//! tag matching, CQ moderation, PCIe atomics), `ibv_values_ex` and the GID
//! table's entries.

use crate::{ibv_device_attr, ibv_gid};

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
