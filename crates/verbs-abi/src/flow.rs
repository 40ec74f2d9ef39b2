//! Flow steering: the specs a `struct ibv_flow_attr` is followed by in
//! memory (`ibv_create_flow`), and the ESP flow action's parameters.
//!
//! Every spec starts with the same two fields, its `type` (an
//! `ibv_flow_spec_type`) and its `size` in bytes, then a value and a mask of
//! the same filter. C gathers them in `struct ibv_flow_spec`, a struct whose
//! only member is an anonymous union; here that union is
//! `ibv_flow_spec_union` and C code still writes `spec.eth.val.ether_type`.
//!
//! rdma-core spells the ESP enums and structs under the kernel's names
//! (`ib_uverbs_flow_action_esp_*`) and aliases them to `ibv_*` by `#define`;
//! the mirror uses the `ibv_*` names directly, which C code sees the same
//! way. Enum-typed fields are read as `c_int` in Rust (see the `device`
//! module docs). Layout numbers come from gcc against rdma-core 44's
//! `verbs.h` (x86_64).

use core::ffi::c_int;

use crate::{ibv_counters, ibv_flow_action};

/// Bits of `ibv_flow_attr.flags`.
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ibv_flow_flags {
    /// Matching packets still reach the normal receive path too.
    IBV_FLOW_ATTR_FLAGS_DONT_TRAP = 1 << 1,
    /// The rule applies to transmitted packets.
    IBV_FLOW_ATTR_FLAGS_EGRESS = 1 << 2,
}

/// What a flow spec matches or does (its `type` field); `IBV_FLOW_SPEC_INNER`
/// may be or-ed in to match inside a tunnel.
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ibv_flow_spec_type {
    IBV_FLOW_SPEC_ETH = 0x20,
    IBV_FLOW_SPEC_IPV4 = 0x30,
    IBV_FLOW_SPEC_IPV6 = 0x31,
    IBV_FLOW_SPEC_IPV4_EXT = 0x32,
    IBV_FLOW_SPEC_ESP = 0x34,
    IBV_FLOW_SPEC_TCP = 0x40,
    IBV_FLOW_SPEC_UDP = 0x41,
    IBV_FLOW_SPEC_VXLAN_TUNNEL = 0x50,
    IBV_FLOW_SPEC_GRE = 0x51,
    IBV_FLOW_SPEC_MPLS = 0x60,
    IBV_FLOW_SPEC_INNER = 0x100,
    IBV_FLOW_SPEC_ACTION_TAG = 0x1000,
    IBV_FLOW_SPEC_ACTION_DROP = 0x1001,
    IBV_FLOW_SPEC_ACTION_HANDLE = 0x1002,
    IBV_FLOW_SPEC_ACTION_COUNT = 0x1003,
}

/// Ethernet header fields to match; `vlan_tag` is laid out as 802.1Q's TCI.
#[repr(C)]
#[derive(Clone, Copy)]
pub struct ibv_flow_eth_filter {
    pub dst_mac: [u8; 6],
    pub src_mac: [u8; 6],
    pub ether_type: u16,
    pub vlan_tag: u16,
}

/// An Ethernet match (`IBV_FLOW_SPEC_ETH`).
#[repr(C)]
#[derive(Clone, Copy)]
pub struct ibv_flow_spec_eth {
    /// `enum ibv_flow_spec_type`.
    pub r#type: c_int,
    pub size: u16,
    pub val: ibv_flow_eth_filter,
    pub mask: ibv_flow_eth_filter,
}

/// IPv4 addresses to match.
#[repr(C)]
#[derive(Clone, Copy)]
pub struct ibv_flow_ipv4_filter {
    pub src_ip: u32,
    pub dst_ip: u32,
}

/// An IPv4 address match (`IBV_FLOW_SPEC_IPV4`).
#[repr(C)]
#[derive(Clone, Copy)]
pub struct ibv_flow_spec_ipv4 {
    /// `enum ibv_flow_spec_type`.
    pub r#type: c_int,
    pub size: u16,
    pub val: ibv_flow_ipv4_filter,
    pub mask: ibv_flow_ipv4_filter,
}

/// IPv4 addresses plus protocol, TOS, TTL and flags to match.
#[repr(C)]
#[derive(Clone, Copy)]
pub struct ibv_flow_ipv4_ext_filter {
    pub src_ip: u32,
    pub dst_ip: u32,
    pub proto: u8,
    pub tos: u8,
    pub ttl: u8,
    pub flags: u8,
}

/// An extended IPv4 match (`IBV_FLOW_SPEC_IPV4_EXT`).
#[repr(C)]
#[derive(Clone, Copy)]
pub struct ibv_flow_spec_ipv4_ext {
    /// `enum ibv_flow_spec_type`.
    pub r#type: c_int,
    pub size: u16,
    pub val: ibv_flow_ipv4_ext_filter,
    pub mask: ibv_flow_ipv4_ext_filter,
}

/// IPv6 header fields to match.
#[repr(C)]
#[derive(Clone, Copy)]
pub struct ibv_flow_ipv6_filter {
    pub src_ip: [u8; 16],
    pub dst_ip: [u8; 16],
    pub flow_label: u32,
    pub next_hdr: u8,
    pub traffic_class: u8,
    pub hop_limit: u8,
}

/// An IPv6 match (`IBV_FLOW_SPEC_IPV6`).
#[repr(C)]
#[derive(Clone, Copy)]
pub struct ibv_flow_spec_ipv6 {
    /// `enum ibv_flow_spec_type`.
    pub r#type: c_int,
    pub size: u16,
    pub val: ibv_flow_ipv6_filter,
    pub mask: ibv_flow_ipv6_filter,
}

/// ESP security parameter index and sequence number to match.
#[repr(C)]
#[derive(Clone, Copy)]
pub struct ibv_flow_esp_filter {
    pub spi: u32,
    pub seq: u32,
}

/// An ESP match (`IBV_FLOW_SPEC_ESP`).
#[repr(C)]
#[derive(Clone, Copy)]
pub struct ibv_flow_spec_esp {
    /// `enum ibv_flow_spec_type`.
    pub r#type: c_int,
    pub size: u16,
    pub val: ibv_flow_esp_filter,
    pub mask: ibv_flow_esp_filter,
}

/// TCP or UDP ports to match.
#[repr(C)]
#[derive(Clone, Copy)]
pub struct ibv_flow_tcp_udp_filter {
    pub dst_port: u16,
    pub src_port: u16,
}

/// A TCP or UDP port match (`IBV_FLOW_SPEC_TCP`, `IBV_FLOW_SPEC_UDP`).
#[repr(C)]
#[derive(Clone, Copy)]
pub struct ibv_flow_spec_tcp_udp {
    /// `enum ibv_flow_spec_type`.
    pub r#type: c_int,
    pub size: u16,
    pub val: ibv_flow_tcp_udp_filter,
    pub mask: ibv_flow_tcp_udp_filter,
}

/// GRE header fields to match: the first 16 bits of the header (checksum,
/// key and sequence-present bits, version), the protocol and the key.
#[repr(C)]
#[derive(Clone, Copy)]
pub struct ibv_flow_gre_filter {
    pub c_ks_res0_ver: u16,
    pub protocol: u16,
    pub key: u32,
}

/// A GRE match (`IBV_FLOW_SPEC_GRE`).
#[repr(C)]
#[derive(Clone, Copy)]
pub struct ibv_flow_spec_gre {
    /// `enum ibv_flow_spec_type`.
    pub r#type: c_int,
    pub size: u16,
    pub val: ibv_flow_gre_filter,
    pub mask: ibv_flow_gre_filter,
}

/// One whole MPLS label entry (label, traffic class, bottom-of-stack, TTL).
#[repr(C)]
#[derive(Clone, Copy)]
pub struct ibv_flow_mpls_filter {
    pub label: u32,
}

/// An MPLS match (`IBV_FLOW_SPEC_MPLS`).
#[repr(C)]
#[derive(Clone, Copy)]
pub struct ibv_flow_spec_mpls {
    /// `enum ibv_flow_spec_type`.
    pub r#type: c_int,
    pub size: u16,
    pub val: ibv_flow_mpls_filter,
    pub mask: ibv_flow_mpls_filter,
}

/// A tunnel identifier (the VXLAN VNI) to match.
#[repr(C)]
#[derive(Clone, Copy)]
pub struct ibv_flow_tunnel_filter {
    pub tunnel_id: u32,
}

/// A tunnel match (`IBV_FLOW_SPEC_VXLAN_TUNNEL`).
#[repr(C)]
#[derive(Clone, Copy)]
pub struct ibv_flow_spec_tunnel {
    /// `enum ibv_flow_spec_type`.
    pub r#type: c_int,
    pub size: u16,
    pub val: ibv_flow_tunnel_filter,
    pub mask: ibv_flow_tunnel_filter,
}

/// Action: mark matching packets with `tag_id` (read back as the flow tag
/// of the completion).
#[repr(C)]
#[derive(Clone, Copy)]
pub struct ibv_flow_spec_action_tag {
    /// `enum ibv_flow_spec_type`.
    pub r#type: c_int,
    pub size: u16,
    pub tag_id: u32,
}

/// Action: drop matching packets.
#[repr(C)]
#[derive(Clone, Copy)]
pub struct ibv_flow_spec_action_drop {
    /// `enum ibv_flow_spec_type`.
    pub r#type: c_int,
    pub size: u16,
}

/// Action: apply a flow action object (ESP, ...) to matching packets.
#[repr(C)]
#[derive(Clone, Copy)]
pub struct ibv_flow_spec_action_handle {
    /// `enum ibv_flow_spec_type`.
    pub r#type: c_int,
    pub size: u16,
    pub action: *const ibv_flow_action,
}

/// Action: count matching packets in a counters object.
#[repr(C)]
#[derive(Clone, Copy)]
pub struct ibv_flow_spec_counter_action {
    /// `enum ibv_flow_spec_type`.
    pub r#type: c_int,
    pub size: u16,
    pub counters: *mut ibv_counters,
}

/// The common start of every spec: its type and size.
#[repr(C)]
#[derive(Clone, Copy)]
pub struct ibv_flow_spec_hdr {
    /// `enum ibv_flow_spec_type`.
    pub r#type: c_int,
    pub size: u16,
}

/// The anonymous union inside `struct ibv_flow_spec`: any one spec.
#[repr(C)]
#[derive(Clone, Copy)]
pub union ibv_flow_spec_union {
    pub hdr: ibv_flow_spec_hdr,
    pub eth: ibv_flow_spec_eth,
    pub ipv4: ibv_flow_spec_ipv4,
    pub tcp_udp: ibv_flow_spec_tcp_udp,
    pub ipv4_ext: ibv_flow_spec_ipv4_ext,
    pub ipv6: ibv_flow_spec_ipv6,
    pub esp: ibv_flow_spec_esp,
    pub tunnel: ibv_flow_spec_tunnel,
    pub gre: ibv_flow_spec_gre,
    pub mpls: ibv_flow_spec_mpls,
    pub flow_tag: ibv_flow_spec_action_tag,
    pub drop: ibv_flow_spec_action_drop,
    pub handle: ibv_flow_spec_action_handle,
    pub flow_count: ibv_flow_spec_counter_action,
}

/// Room for any one spec; C code names the union's members directly
/// (`spec.ipv4.val.src_ip`).
#[repr(C)]
#[derive(Clone, Copy)]
pub struct ibv_flow_spec {
    pub anon: ibv_flow_spec_union,
}

/// Bits of `ibv_flow_action_esp_attr.comp_mask`.
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ibv_flow_action_esp_mask {
    /// `esn` is valid.
    IBV_FLOW_ACTION_ESP_MASK_ESN = 1 << 0,
}

/// The keying material protocol of an ESP action (`keymat_proto`).
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ibv_flow_action_esp_keymat {
    IBV_FLOW_ACTION_ESP_KEYMAT_AES_GCM = 0,
}

/// How the AES-GCM initialisation vector is generated.
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ibv_flow_action_esp_keymat_aes_gcm_iv_algo {
    /// From a sequence counter.
    IBV_FLOW_ACTION_IV_ALGO_SEQ = 0,
}

/// AES-GCM keying material (`keymat_ptr` when `keymat_proto` is
/// `IBV_FLOW_ACTION_ESP_KEYMAT_AES_GCM`).
#[repr(C)]
#[derive(Clone, Copy)]
pub struct ibv_flow_action_esp_keymat_aes_gcm {
    pub iv: u64,
    /// `enum ibv_flow_action_esp_keymat_aes_gcm_iv_algo`.
    pub iv_algo: u32,
    pub salt: u32,
    pub icv_len: u32,
    pub key_len: u32,
    pub aes_key: [u32; 8],
}

/// The anti-replay protection of an ESP action (`replay_proto`).
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ibv_flow_action_esp_replay {
    IBV_FLOW_ACTION_ESP_REPLAY_NONE = 0,
    IBV_FLOW_ACTION_ESP_REPLAY_BMP = 1,
}

/// Bitmap anti-replay parameters: the window size.
#[repr(C)]
#[derive(Clone, Copy)]
pub struct ibv_flow_action_esp_replay_bmp {
    pub size: u32,
}

/// Bits of `ibv_flow_action_esp.flags`. Each bit chooses between two modes;
/// C names both, and the zero-valued defaults that a Rust enum cannot repeat
/// (tunnel, decrypt) are the constants below it.
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ibv_flow_action_esp_flags {
    IBV_FLOW_ACTION_ESP_FLAGS_INLINE_CRYPTO = 0,
    IBV_FLOW_ACTION_ESP_FLAGS_FULL_OFFLOAD = 1,
    IBV_FLOW_ACTION_ESP_FLAGS_TRANSPORT = 1 << 1,
    IBV_FLOW_ACTION_ESP_FLAGS_ENCRYPT = 1 << 2,
    IBV_FLOW_ACTION_ESP_FLAGS_ESN_NEW_WINDOW = 1 << 3,
}

/// Tunnel mode, the default (0), beside `IBV_FLOW_ACTION_ESP_FLAGS_TRANSPORT`.
pub const IBV_FLOW_ACTION_ESP_FLAGS_TUNNEL: u32 = 0;
/// Decryption, the default (0), beside `IBV_FLOW_ACTION_ESP_FLAGS_ENCRYPT`.
pub const IBV_FLOW_ACTION_ESP_FLAGS_DECRYPT: u32 = 0;

crate::assert_layout!(ibv_flow_eth_filter, 16, 2; dst_mac => 0, src_mac => 6, ether_type => 12, vlan_tag => 14);
crate::assert_layout!(ibv_flow_spec_eth, 40, 4; r#type => 0, size => 4, val => 6, mask => 22);
crate::assert_layout!(ibv_flow_ipv4_filter, 8, 4; src_ip => 0, dst_ip => 4);
crate::assert_layout!(ibv_flow_spec_ipv4, 24, 4; r#type => 0, size => 4, val => 8, mask => 16);
crate::assert_layout!(ibv_flow_ipv4_ext_filter, 12, 4; proto => 8, tos => 9, ttl => 10, flags => 11);
crate::assert_layout!(ibv_flow_spec_ipv4_ext, 32, 4; val => 8, mask => 20);
crate::assert_layout!(ibv_flow_ipv6_filter, 40, 4; src_ip => 0, dst_ip => 16, flow_label => 32,
    next_hdr => 36, traffic_class => 37, hop_limit => 38);
crate::assert_layout!(ibv_flow_spec_ipv6, 88, 4; val => 8, mask => 48);
crate::assert_layout!(ibv_flow_esp_filter, 8, 4; spi => 0, seq => 4);
crate::assert_layout!(ibv_flow_spec_esp, 24, 4; val => 8, mask => 16);
crate::assert_layout!(ibv_flow_tcp_udp_filter, 4, 2; dst_port => 0, src_port => 2);
crate::assert_layout!(ibv_flow_spec_tcp_udp, 16, 4; val => 6, mask => 10);
crate::assert_layout!(ibv_flow_gre_filter, 8, 4; c_ks_res0_ver => 0, protocol => 2, key => 4);
crate::assert_layout!(ibv_flow_spec_gre, 24, 4; val => 8, mask => 16);
crate::assert_layout!(ibv_flow_mpls_filter, 4, 4; label => 0);
crate::assert_layout!(ibv_flow_spec_mpls, 16, 4; val => 8, mask => 12);
crate::assert_layout!(ibv_flow_tunnel_filter, 4, 4; tunnel_id => 0);
crate::assert_layout!(ibv_flow_spec_tunnel, 16, 4; val => 8, mask => 12);
crate::assert_layout!(ibv_flow_spec_action_tag, 12, 4; r#type => 0, size => 4, tag_id => 8);
crate::assert_layout!(ibv_flow_spec_action_drop, 8, 4; r#type => 0, size => 4);
crate::assert_layout!(ibv_flow_spec_action_handle, 16, 8; size => 4, action => 8);
crate::assert_layout!(ibv_flow_spec_counter_action, 16, 8; size => 4, counters => 8);
crate::assert_layout!(ibv_flow_spec_hdr, 8, 4; r#type => 0, size => 4);
crate::assert_layout!(ibv_flow_spec, 88, 8; anon => 0);
crate::assert_layout!(ibv_flow_action_esp_keymat_aes_gcm, 56, 8; iv => 0, iv_algo => 8, salt => 12,
    icv_len => 16, key_len => 20, aes_key => 24);
crate::assert_layout!(ibv_flow_action_esp_replay_bmp, 4, 4; size => 0);
