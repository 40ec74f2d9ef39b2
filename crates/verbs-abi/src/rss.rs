//! Receive-side scaling: work queues (`ibv_create_wq`), their indirection
//! tables, the hash a RSS QP spreads packets with, and the raw-packet
//! capabilities a device reports for them. The structs live in
//! `extended`; these are the flag sets their `uint32_t` / `uint64_t` fields
//! take, which C declares as enums.

/// Bits of `ibv_rx_hash_conf.rx_hash_function`.
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ibv_rx_hash_function_flags {
    IBV_RX_HASH_FUNC_TOEPLITZ = 1 << 0,
}

/// Bits of `ibv_rx_hash_conf.rx_hash_fields_mask`: the header fields hashed.
/// `IBV_RX_HASH_INNER` (bit 31) hashes the inner headers of a tunnel; it
/// makes C's enum unsigned, hence the literal.
// The mirror is of the 64-bit ABI only (pointer sizes are asserted
// throughout), where this discriminant fits.
#[allow(clippy::enum_clike_unportable_variant)]
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ibv_rx_hash_fields {
    IBV_RX_HASH_SRC_IPV4 = 1 << 0,
    IBV_RX_HASH_DST_IPV4 = 1 << 1,
    IBV_RX_HASH_SRC_IPV6 = 1 << 2,
    IBV_RX_HASH_DST_IPV6 = 1 << 3,
    IBV_RX_HASH_SRC_PORT_TCP = 1 << 4,
    IBV_RX_HASH_DST_PORT_TCP = 1 << 5,
    IBV_RX_HASH_SRC_PORT_UDP = 1 << 6,
    IBV_RX_HASH_DST_PORT_UDP = 1 << 7,
    IBV_RX_HASH_IPSEC_SPI = 1 << 8,
    IBV_RX_HASH_INNER = 2147483648,
}

/// Bits of `ibv_device_attr_ex.raw_packet_caps`.
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ibv_raw_packet_caps {
    IBV_RAW_PACKET_CAP_CVLAN_STRIPPING = 1 << 0,
    IBV_RAW_PACKET_CAP_SCATTER_FCS = 1 << 1,
    IBV_RAW_PACKET_CAP_IP_CSUM = 1 << 2,
    IBV_RAW_PACKET_CAP_DELAY_DROP = 1 << 3,
}

/// Bits of `ibv_wq_init_attr.comp_mask`.
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ibv_wq_init_attr_mask {
    /// `create_flags` is valid.
    IBV_WQ_INIT_ATTR_FLAGS = 1 << 0,
    IBV_WQ_INIT_ATTR_RESERVED = 1 << 1,
}

/// Bits of `ibv_wq_init_attr.create_flags` and `ibv_wq_attr.flags`.
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ibv_wq_flags {
    IBV_WQ_FLAGS_CVLAN_STRIPPING = 1 << 0,
    IBV_WQ_FLAGS_SCATTER_FCS = 1 << 1,
    IBV_WQ_FLAGS_DELAY_DROP = 1 << 2,
    IBV_WQ_FLAGS_PCI_WRITE_END_PADDING = 1 << 3,
    IBV_WQ_FLAGS_RESERVED = 1 << 4,
}

/// Bits of `ibv_wq_attr.attr_mask`: which fields `ibv_modify_wq` applies.
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ibv_wq_attr_mask {
    IBV_WQ_ATTR_STATE = 1 << 0,
    IBV_WQ_ATTR_CURR_STATE = 1 << 1,
    IBV_WQ_ATTR_FLAGS = 1 << 2,
    IBV_WQ_ATTR_RESERVED = 1 << 3,
}

/// Bits of `ibv_rwq_ind_table_init_attr.comp_mask` (none defined yet).
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ibv_ind_table_init_attr_mask {
    IBV_CREATE_IND_TABLE_RESERVED = 1 << 0,
}

const _: () = assert!(core::mem::size_of::<ibv_rx_hash_fields>() == 4);
