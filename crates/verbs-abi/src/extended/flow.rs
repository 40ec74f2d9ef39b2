//! Flow steering rules (`ibv_flow_attr`, the header the specs of the
//! `flow` module follow), flow actions (ESP) and flow counters.

use core::ffi::{c_int, c_void};

use crate::{ibv_context, raw};

/// What a flow counter counts.
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ibv_counter_description {
    IBV_COUNTER_PACKETS = 0,
    IBV_COUNTER_BYTES = 1,
}

/// Kind of flow steering rule.
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ibv_flow_attr_type {
    IBV_FLOW_ATTR_NORMAL = 0,
    IBV_FLOW_ATTR_ALL_DEFAULT = 1,
    IBV_FLOW_ATTR_MC_DEFAULT = 2,
    IBV_FLOW_ATTR_SNIFFER = 3,
}

/// A flow steering rule.
#[repr(C)]
pub struct ibv_flow {
    pub comp_mask: u32,
    pub context: *mut ibv_context,
    pub handle: u32,
}

/// The header of a flow steering rule; the specs follow it in memory.
#[repr(C)]
#[derive(Clone, Copy)]
pub struct ibv_flow_attr {
    pub comp_mask: u32,
    /// Read as `c_int` (see the `device` module docs).
    pub r#type: raw::ibv_flow_attr_type,
    pub size: u16,
    pub priority: u16,
    pub num_of_specs: u8,
    pub port: u8,
    pub flags: u32,
}

/// A flow action (e.g. ESP).
#[repr(C)]
pub struct ibv_flow_action {
    pub context: *mut ibv_context,
}

/// ESP flow action attributes (`ibv_create_flow_action_esp`).
#[repr(C)]
#[derive(Clone, Copy)]
pub struct ibv_flow_action_esp_attr {
    pub esp_attr: *mut ibv_flow_action_esp,
    /// `enum ibv_flow_action_esp_keymat`.
    pub keymat_proto: c_int,
    pub keymat_len: u16,
    pub keymat_ptr: *mut c_void,
    /// `enum ibv_flow_action_esp_replay`.
    pub replay_proto: c_int,
    pub replay_len: u16,
    pub replay_ptr: *mut c_void,
    pub esp_encap: *mut ibv_flow_action_esp_encap,
    pub comp_mask: u32,
    pub esn: u32,
}

/// ESP parameters (the kernel's `struct ib_uverbs_flow_action_esp`).
#[repr(C)]
#[derive(Clone, Copy)]
pub struct ibv_flow_action_esp {
    pub spi: u32,
    pub seq: u32,
    pub tfc_pad: u32,
    pub flags: u32,
    pub hard_limit_pkts: u64,
}

/// One ESP encapsulation filter (the kernel's
/// `struct ib_uverbs_flow_action_esp_encap`). In C each pointer shares its
/// 8 bytes with a `__aligned_u64` view (`RDMA_UAPI_PTR`).
#[repr(C)]
#[derive(Clone, Copy)]
pub struct ibv_flow_action_esp_encap {
    pub val_ptr: *mut c_void,
    pub next_ptr: *mut ibv_flow_action_esp_encap,
    pub len: u16,
    pub r#type: u16,
}

/// A set of flow counters.
#[repr(C)]
pub struct ibv_counters {
    pub context: *mut ibv_context,
}

/// Attributes for `ibv_create_counters`.
#[repr(C)]
#[derive(Clone, Copy, Default)]
pub struct ibv_counters_init_attr {
    pub comp_mask: u32,
}

/// Where a counter is attached (`ibv_attach_counters_point_flow`).
#[repr(C)]
#[derive(Clone, Copy)]
pub struct ibv_counter_attach_attr {
    /// Read as `c_int` (see the `device` module docs).
    pub counter_desc: raw::ibv_counter_description,
    pub index: u32,
    pub comp_mask: u32,
}

crate::assert_layout!(ibv_flow, 24, 8; comp_mask => 0, context => 8, handle => 16);
crate::assert_layout!(ibv_flow_attr, 20, 4;
    comp_mask => 0, r#type => 4, size => 8, priority => 10, num_of_specs => 12, port => 13,
    flags => 16);
crate::assert_layout!(ibv_flow_action, 8, 8; context => 0);
crate::assert_layout!(ibv_flow_action_esp_attr, 56, 8; esp_attr => 0, keymat_proto => 8, keymat_len => 12,
    keymat_ptr => 16, replay_proto => 24, replay_len => 28, replay_ptr => 32, esp_encap => 40,
    comp_mask => 48, esn => 52);
crate::assert_layout!(ibv_flow_action_esp, 24, 8; spi => 0, seq => 4, tfc_pad => 8, flags => 12, hard_limit_pkts => 16);
crate::assert_layout!(ibv_flow_action_esp_encap, 24, 8; val_ptr => 0, next_ptr => 8, len => 16, r#type => 18);
crate::assert_layout!(ibv_counters, 8, 8; context => 0);
crate::assert_layout!(ibv_counters_init_attr, 4, 4; comp_mask => 0);
crate::assert_layout!(ibv_counter_attach_attr, 12, 4; counter_desc => 0, index => 4, comp_mask => 8);
