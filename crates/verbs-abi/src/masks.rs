//! Flag sets and attribute masks of the extended verbs that C declares as
//! enums but stores in plain integer fields (`comp_mask`, `flags`, ...), and
//! the few `verbs.h` constants that are macros over kernel-ABI names.

/// Bits of `ibv_alloc_dm_attr.comp_mask`.
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ibv_dm_mask {
    IBV_DM_MASK_HANDLE = 1 << 0,
}

/// Bits of `ibv_tm_caps.flags`.
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ibv_tm_cap_flags {
    /// Tag matching works on RC QPs.
    IBV_TM_CAP_RC = 1 << 0,
}

/// Bits of `ibv_pci_atomic_caps`' fields: the operand sizes supported.
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ibv_pci_atomic_op_size {
    IBV_PCI_ATOMIC_OPERATION_4_BYTE_SIZE_SUP = 1 << 0,
    IBV_PCI_ATOMIC_OPERATION_8_BYTE_SIZE_SUP = 1 << 1,
    IBV_PCI_ATOMIC_OPERATION_16_BYTE_SIZE_SUP = 1 << 2,
}

/// Bits of `ibv_xrcd_init_attr.comp_mask`.
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ibv_xrcd_init_attr_mask {
    /// `fd` is valid: the XRC domain is shared through that file.
    IBV_XRCD_INIT_ATTR_FD = 1 << 0,
    /// `oflags` is valid (`O_CREAT`, `O_EXCL`).
    IBV_XRCD_INIT_ATTR_OFLAGS = 1 << 1,
    IBV_XRCD_INIT_ATTR_RESERVED = 1 << 2,
}

/// Bits of `ibv_qp_init_attr_ex.send_ops_flags`: the `ibv_wr_*` operations
/// the extended QP must support.
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ibv_qp_create_send_ops_flags {
    IBV_QP_EX_WITH_RDMA_WRITE = 1 << 0,
    IBV_QP_EX_WITH_RDMA_WRITE_WITH_IMM = 1 << 1,
    IBV_QP_EX_WITH_SEND = 1 << 2,
    IBV_QP_EX_WITH_SEND_WITH_IMM = 1 << 3,
    IBV_QP_EX_WITH_RDMA_READ = 1 << 4,
    IBV_QP_EX_WITH_ATOMIC_CMP_AND_SWP = 1 << 5,
    IBV_QP_EX_WITH_ATOMIC_FETCH_AND_ADD = 1 << 6,
    IBV_QP_EX_WITH_LOCAL_INV = 1 << 7,
    IBV_QP_EX_WITH_BIND_MW = 1 << 8,
    IBV_QP_EX_WITH_SEND_WITH_INV = 1 << 9,
    IBV_QP_EX_WITH_TSO = 1 << 10,
    IBV_QP_EX_WITH_ATOMIC_WRITE = 1 << 12,
}

/// Bits of `ibv_qp_open_attr.comp_mask`.
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ibv_qp_open_attr_mask {
    IBV_QP_OPEN_ATTR_NUM = 1 << 0,
    IBV_QP_OPEN_ATTR_XRCD = 1 << 1,
    IBV_QP_OPEN_ATTR_CONTEXT = 1 << 2,
    IBV_QP_OPEN_ATTR_TYPE = 1 << 3,
    IBV_QP_OPEN_ATTR_RESERVED = 1 << 4,
}

/// `ibv_ops_wr.opcode`: tag-matching list operations on an SRQ.
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ibv_ops_wr_opcode {
    IBV_WR_TAG_ADD = 0,
    IBV_WR_TAG_DEL = 1,
    IBV_WR_TAG_SYNC = 2,
}

/// Bits of `ibv_ops_wr.flags`.
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ibv_ops_flags {
    IBV_OPS_SIGNALED = 1 << 0,
    IBV_OPS_TM_SYNC = 1 << 1,
}

/// Bits of `ibv_modify_cq_attr.attr_mask`.
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ibv_cq_attr_mask {
    IBV_CQ_ATTR_MODERATE = 1 << 0,
    IBV_CQ_ATTR_RESERVED = 1 << 1,
}

/// Bits of `ibv_cq_init_attr_ex.flags`.
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ibv_create_cq_attr_flags {
    /// Only one thread polls the CQ, so the provider may skip its lock.
    IBV_CREATE_CQ_ATTR_SINGLE_THREADED = 1 << 0,
    IBV_CREATE_CQ_ATTR_IGNORE_OVERRUN = 1 << 1,
}

/// Bits of `ibv_parent_domain_init_attr.comp_mask`.
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ibv_parent_domain_init_attr_mask {
    /// `alloc` and `free` are valid.
    IBV_PARENT_DOMAIN_INIT_ATTR_ALLOCATORS = 1 << 0,
    /// `pd_context` is valid.
    IBV_PARENT_DOMAIN_INIT_ATTR_PD_CONTEXT = 1 << 1,
}

/// `flags` of `ibv_read_counters`.
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ibv_read_counters_flags {
    /// A cached value will do; the provider need not ask the device.
    IBV_READ_COUNTERS_ATTR_PREFER_CACHED = 1 << 0,
}

/// The work-completion fields every extended CQ can report
/// (byte length, immediate, QP number, source QP, SLID, SL, path bits).
pub const IBV_WC_STANDARD_FLAGS: u32 = 0x7f;
/// Every `ibv_create_cq_wc_flags` bit `ibv_create_cq_ex` knows.
pub const IBV_CREATE_CQ_SUP_WC_FLAGS: u32 = 0xfff;

/// `flags` of `ibv_advise_mr`: wait until the advice has been acted on.
pub const IBV_ADVISE_MR_FLAG_FLUSH: u32 = 1 << 0;
/// `ibv_port_attr.flags` bit: the port needs a GRH on every packet.
pub const IBV_QPF_GRH_REQUIRED: u32 = 1 << 0;
/// The first access flag a device may ignore when it lacks the feature.
pub const IBV_ACCESS_OPTIONAL_FIRST: u32 = 1 << 20;
/// All the optional access flags (bits 20 to 29).
pub const IBV_ACCESS_OPTIONAL_RANGE: u32 = 0x3ff0_0000;

/// Length of a MAC address (`ibv_resolve_eth_l2_from_gid`).
pub const ETHERNET_LL_SIZE: u32 = 6;
/// The lowest UDP source port RoCE v2 uses.
pub const IB_ROCE_UDP_ENCAP_VALID_PORT_MIN: u32 = 0xC000;
/// The highest UDP source port RoCE v2 uses.
pub const IB_ROCE_UDP_ENCAP_VALID_PORT_MAX: u32 = 0xFFFF;
/// The bits of a GRH flow label.
pub const IB_GRH_FLOWLABEL_MASK: u32 = 0x000F_FFFF;
