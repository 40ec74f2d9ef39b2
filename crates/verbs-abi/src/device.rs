//! Devices, contexts, ports and async events: the device half of `verbs.h`.
//!
//! # Enums
//!
//! The C enums are mirrored as `#[repr(C)]` Rust enums so that cbindgen
//! emits real `enum ibv_...` types. A Rust enum may only ever hold one of
//! its listed values, and memory written by C (the real library, a
//! provider, the program) can hold any `int`: newer rdma-core values,
//! driver-private values, garbage. So no struct field or callback argument
//! has a Rust enum type: each is `raw::ibv_...`, a transparent newtype over
//! `c_int` that cbindgen still writes as the C enum (see the `raw` module);
//! its `get()` is the validated variant. The flag enums
//! (`ibv_access_flags`, ...) exist for their constants: combine them as
//! `c_int` / `u32`, never as the Rust enum.
//!
//! Layouts are pinned by `assert_layout!` below; the numbers come from
//! compiling a C program against rdma-core 44's own `verbs.h` (x86_64), and
//! `tests/layout.rs` re-checks the generated header against it.

use core::ffi::{c_char, c_int, c_uint, c_void};

use crate::{
    ibv_cq, ibv_mw, ibv_mw_bind, ibv_pd, ibv_qp, ibv_recv_wr, ibv_send_wr, ibv_srq, ibv_wc, ibv_wq,
    raw,
};

/// A 64-bit value in network byte order (big-endian), as in `<linux/types.h>`.
///
/// An alias, not a newtype: the bytes are stored as they arrive. The header
/// keeps C's spelling because cbindgen.toml excludes these aliases, so the
/// definitions come from `<linux/types.h>` (`unsigned long long`, which C
/// treats as a different type from `uint64_t`).
pub type __be64 = u64;
/// A 32-bit value in network byte order (big-endian), as in `<linux/types.h>`.
pub type __be32 = u32;
/// A 16-bit value in network byte order (big-endian), as in `<linux/types.h>`.
pub type __be16 = u16;

/// Length of the sysfs name buffers in `struct ibv_device`.
pub const IBV_SYSFS_NAME_MAX: usize = 64;
/// Length of the sysfs path buffers in `struct ibv_device`.
pub const IBV_SYSFS_PATH_MAX: usize = 256;

/// `ibv_port_attr.link_layer`: not reported.
pub const IBV_LINK_LAYER_UNSPECIFIED: u8 = 0;
/// `ibv_port_attr.link_layer`: InfiniBand.
pub const IBV_LINK_LAYER_INFINIBAND: u8 = 1;
/// `ibv_port_attr.link_layer`: Ethernet (RoCE, iWARP).
pub const IBV_LINK_LAYER_ETHERNET: u8 = 2;

/// The `global` view of a GID: two 64-bit halves, both in network byte order.
#[repr(C)]
#[derive(Clone, Copy)]
pub struct ibv_gid_global {
    /// Subnet prefix, network byte order.
    pub subnet_prefix: __be64,
    /// Interface id (port GUID for the default GID), network byte order.
    pub interface_id: __be64,
}

/// A 128-bit global identifier, as raw bytes or as its two halves.
#[repr(C)]
#[derive(Clone, Copy)]
pub union ibv_gid {
    /// The GID bytes, network byte order.
    pub raw: [u8; 16],
    /// The GID as subnet prefix and interface id.
    pub global: ibv_gid_global,
}

/// How a GID table entry is used on the wire.
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ibv_gid_type {
    IBV_GID_TYPE_IB = 0,
    IBV_GID_TYPE_ROCE_V1 = 1,
    IBV_GID_TYPE_ROCE_V2 = 2,
}

/// The kind of node a device is (`ibv_device.node_type`).
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ibv_node_type {
    IBV_NODE_UNKNOWN = -1,
    IBV_NODE_CA = 1,
    IBV_NODE_SWITCH = 2,
    IBV_NODE_ROUTER = 3,
    IBV_NODE_RNIC = 4,
    IBV_NODE_USNIC = 5,
    IBV_NODE_USNIC_UDP = 6,
    IBV_NODE_UNSPECIFIED = 7,
}

/// The transport a device speaks (`ibv_device.transport_type`).
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ibv_transport_type {
    IBV_TRANSPORT_UNKNOWN = -1,
    IBV_TRANSPORT_IB = 0,
    IBV_TRANSPORT_IWARP = 1,
    IBV_TRANSPORT_USNIC = 2,
    IBV_TRANSPORT_USNIC_UDP = 3,
    IBV_TRANSPORT_UNSPECIFIED = 4,
}

/// Bits of `ibv_device_attr.device_cap_flags`.
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ibv_device_cap_flags {
    IBV_DEVICE_RESIZE_MAX_WR = 1,
    IBV_DEVICE_BAD_PKEY_CNTR = 1 << 1,
    IBV_DEVICE_BAD_QKEY_CNTR = 1 << 2,
    IBV_DEVICE_RAW_MULTI = 1 << 3,
    IBV_DEVICE_AUTO_PATH_MIG = 1 << 4,
    IBV_DEVICE_CHANGE_PHY_PORT = 1 << 5,
    IBV_DEVICE_UD_AV_PORT_ENFORCE = 1 << 6,
    IBV_DEVICE_CURR_QP_STATE_MOD = 1 << 7,
    IBV_DEVICE_SHUTDOWN_PORT = 1 << 8,
    IBV_DEVICE_INIT_TYPE = 1 << 9,
    IBV_DEVICE_PORT_ACTIVE_EVENT = 1 << 10,
    IBV_DEVICE_SYS_IMAGE_GUID = 1 << 11,
    IBV_DEVICE_RC_RNR_NAK_GEN = 1 << 12,
    IBV_DEVICE_SRQ_RESIZE = 1 << 13,
    IBV_DEVICE_N_NOTIFY_CQ = 1 << 14,
    IBV_DEVICE_MEM_WINDOW = 1 << 17,
    IBV_DEVICE_UD_IP_CSUM = 1 << 18,
    IBV_DEVICE_XRC = 1 << 20,
    IBV_DEVICE_MEM_MGT_EXTENSIONS = 1 << 21,
    IBV_DEVICE_MEM_WINDOW_TYPE_2A = 1 << 23,
    IBV_DEVICE_MEM_WINDOW_TYPE_2B = 1 << 24,
    IBV_DEVICE_RC_IP_CSUM = 1 << 25,
    IBV_DEVICE_RAW_IP_CSUM = 1 << 26,
    IBV_DEVICE_MANAGED_FLOW_STEERING = 1 << 29,
}

/// `device_cap_flags_ex` bit: scatters the FCS (above bit 31, so not in the enum).
pub const IBV_DEVICE_RAW_SCATTER_FCS: u64 = 1u64 << 34;
/// `device_cap_flags_ex` bit: PCI write end padding (above bit 31, so not in the enum).
pub const IBV_DEVICE_PCI_WRITE_END_PADDING: u64 = 1u64 << 36;

/// What `ibv_is_fork_initialized` reports.
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ibv_fork_status {
    IBV_FORK_DISABLED = 0,
    IBV_FORK_ENABLED = 1,
    IBV_FORK_UNNEEDED = 2,
}

/// Atomic operation support (`ibv_device_attr.atomic_cap`).
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ibv_atomic_cap {
    IBV_ATOMIC_NONE = 0,
    IBV_ATOMIC_HCA = 1,
    IBV_ATOMIC_GLOB = 2,
}

/// Path MTU, as a code (not bytes): 1 = 256 up to 5 = 4096.
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ibv_mtu {
    IBV_MTU_256 = 1,
    IBV_MTU_512 = 2,
    IBV_MTU_1024 = 3,
    IBV_MTU_2048 = 4,
    IBV_MTU_4096 = 5,
}

/// Logical port state (`ibv_port_attr.state`).
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ibv_port_state {
    IBV_PORT_NOP = 0,
    IBV_PORT_DOWN = 1,
    IBV_PORT_INIT = 2,
    IBV_PORT_ARMED = 3,
    IBV_PORT_ACTIVE = 4,
    IBV_PORT_ACTIVE_DEFER = 5,
}

/// Bits of `ibv_port_attr.port_cap_flags`.
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ibv_port_cap_flags {
    IBV_PORT_SM = 1 << 1,
    IBV_PORT_NOTICE_SUP = 1 << 2,
    IBV_PORT_TRAP_SUP = 1 << 3,
    IBV_PORT_OPT_IPD_SUP = 1 << 4,
    IBV_PORT_AUTO_MIGR_SUP = 1 << 5,
    IBV_PORT_SL_MAP_SUP = 1 << 6,
    IBV_PORT_MKEY_NVRAM = 1 << 7,
    IBV_PORT_PKEY_NVRAM = 1 << 8,
    IBV_PORT_LED_INFO_SUP = 1 << 9,
    IBV_PORT_SYS_IMAGE_GUID_SUP = 1 << 11,
    IBV_PORT_PKEY_SW_EXT_PORT_TRAP_SUP = 1 << 12,
    IBV_PORT_EXTENDED_SPEEDS_SUP = 1 << 14,
    IBV_PORT_CAP_MASK2_SUP = 1 << 15,
    IBV_PORT_CM_SUP = 1 << 16,
    IBV_PORT_SNMP_TUNNEL_SUP = 1 << 17,
    IBV_PORT_REINIT_SUP = 1 << 18,
    IBV_PORT_DEVICE_MGMT_SUP = 1 << 19,
    IBV_PORT_VENDOR_CLASS_SUP = 1 << 20,
    IBV_PORT_DR_NOTICE_SUP = 1 << 21,
    IBV_PORT_CAP_MASK_NOTICE_SUP = 1 << 22,
    IBV_PORT_BOOT_MGMT_SUP = 1 << 23,
    IBV_PORT_LINK_LATENCY_SUP = 1 << 24,
    IBV_PORT_CLIENT_REG_SUP = 1 << 25,
    IBV_PORT_IP_BASED_GIDS = 1 << 26,
}

/// Bits of `ibv_port_attr.port_cap_flags2`.
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ibv_port_cap_flags2 {
    IBV_PORT_SET_NODE_DESC_SUP = 1 << 0,
    IBV_PORT_INFO_EXT_SUP = 1 << 1,
    IBV_PORT_VIRT_SUP = 1 << 2,
    IBV_PORT_SWITCH_PORT_STATE_TABLE_SUP = 1 << 3,
    IBV_PORT_LINK_WIDTH_2X_SUP = 1 << 4,
    IBV_PORT_LINK_SPEED_HDR_SUP = 1 << 5,
    IBV_PORT_LINK_SPEED_NDR_SUP = 1 << 10,
}

/// Asynchronous event kinds (`ibv_async_event.event_type`).
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ibv_event_type {
    IBV_EVENT_CQ_ERR = 0,
    IBV_EVENT_QP_FATAL = 1,
    IBV_EVENT_QP_REQ_ERR = 2,
    IBV_EVENT_QP_ACCESS_ERR = 3,
    IBV_EVENT_COMM_EST = 4,
    IBV_EVENT_SQ_DRAINED = 5,
    IBV_EVENT_PATH_MIG = 6,
    IBV_EVENT_PATH_MIG_ERR = 7,
    IBV_EVENT_DEVICE_FATAL = 8,
    IBV_EVENT_PORT_ACTIVE = 9,
    IBV_EVENT_PORT_ERR = 10,
    IBV_EVENT_LID_CHANGE = 11,
    IBV_EVENT_PKEY_CHANGE = 12,
    IBV_EVENT_SM_CHANGE = 13,
    IBV_EVENT_SRQ_ERR = 14,
    IBV_EVENT_SRQ_LIMIT_REACHED = 15,
    IBV_EVENT_QP_LAST_WQE_REACHED = 16,
    IBV_EVENT_CLIENT_REREGISTER = 17,
    IBV_EVENT_GID_CHANGE = 18,
    IBV_EVENT_WQ_FATAL = 19,
}

/// Obsolete device hooks kept for layout only; never called.
#[repr(C)]
#[derive(Clone, Copy)]
pub struct _ibv_device_ops {
    /// Unused.
    pub _dummy1:
        Option<unsafe extern "C" fn(device: *mut ibv_device, cmd_fd: c_int) -> *mut ibv_context>,
    /// Unused.
    pub _dummy2: Option<unsafe extern "C" fn(context: *mut ibv_context)>,
}

/// An RDMA device as listed by `ibv_get_device_list` (owned by the library).
#[repr(C)]
pub struct ibv_device {
    /// Obsolete, never used.
    pub _ops: _ibv_device_ops,
    /// Node type; read as `c_int` (see the module docs).
    pub node_type: raw::ibv_node_type,
    /// Transport type; read as `c_int` (see the module docs).
    pub transport_type: raw::ibv_transport_type,
    /// Name of the kernel IB device, e.g. "mlx5_0" (NUL-terminated).
    pub name: [c_char; IBV_SYSFS_NAME_MAX],
    /// Name of the uverbs device, e.g. "uverbs0".
    pub dev_name: [c_char; IBV_SYSFS_NAME_MAX],
    /// Path of the infiniband_verbs class device in sysfs.
    pub dev_path: [c_char; IBV_SYSFS_PATH_MAX],
    /// Path of the infiniband class device in sysfs.
    pub ibdev_path: [c_char; IBV_SYSFS_PATH_MAX],
}

/// Old-ABI port attributes; only named by a compat hook, never defined.
pub struct _compat_ibv_port_attr {
    // Not `repr(C)`, so cbindgen declares it as an incomplete struct, as C does.
    _opaque: [u8; 0],
}

/// The provider's function table embedded in every context; inline verbs call through it.
#[repr(C)]
#[derive(Clone, Copy)]
pub struct ibv_context_ops {
    /// Old-ABI query_device; compat only.
    pub _compat_query_device: Option<
        unsafe extern "C" fn(context: *mut ibv_context, device_attr: *mut ibv_device_attr) -> c_int,
    >,
    /// Old-ABI query_port; compat only.
    pub _compat_query_port: Option<
        unsafe extern "C" fn(
            context: *mut ibv_context,
            port_num: u8,
            port_attr: *mut _compat_ibv_port_attr,
        ) -> c_int,
    >,
    /// Compat slot.
    pub _compat_alloc_pd: Option<unsafe extern "C" fn() -> *mut c_void>,
    /// Compat slot.
    pub _compat_dealloc_pd: Option<unsafe extern "C" fn() -> *mut c_void>,
    /// Compat slot.
    pub _compat_reg_mr: Option<unsafe extern "C" fn() -> *mut c_void>,
    /// Compat slot.
    pub _compat_rereg_mr: Option<unsafe extern "C" fn() -> *mut c_void>,
    /// Compat slot.
    pub _compat_dereg_mr: Option<unsafe extern "C" fn() -> *mut c_void>,
    /// Behind the inline `ibv_alloc_mw`.
    pub alloc_mw:
        Option<unsafe extern "C" fn(pd: *mut ibv_pd, type_: raw::ibv_mw_type) -> *mut ibv_mw>,
    /// Behind the inline `ibv_bind_mw`.
    pub bind_mw: Option<
        unsafe extern "C" fn(qp: *mut ibv_qp, mw: *mut ibv_mw, mw_bind: *mut ibv_mw_bind) -> c_int,
    >,
    /// Behind the inline `ibv_dealloc_mw`.
    pub dealloc_mw: Option<unsafe extern "C" fn(mw: *mut ibv_mw) -> c_int>,
    /// Compat slot.
    pub _compat_create_cq: Option<unsafe extern "C" fn() -> *mut c_void>,
    /// Behind the inline `ibv_poll_cq`.
    pub poll_cq:
        Option<unsafe extern "C" fn(cq: *mut ibv_cq, num_entries: c_int, wc: *mut ibv_wc) -> c_int>,
    /// Behind the inline `ibv_req_notify_cq`.
    pub req_notify_cq:
        Option<unsafe extern "C" fn(cq: *mut ibv_cq, solicited_only: c_int) -> c_int>,
    /// Compat slot.
    pub _compat_cq_event: Option<unsafe extern "C" fn() -> *mut c_void>,
    /// Compat slot.
    pub _compat_resize_cq: Option<unsafe extern "C" fn() -> *mut c_void>,
    /// Compat slot.
    pub _compat_destroy_cq: Option<unsafe extern "C" fn() -> *mut c_void>,
    /// Compat slot.
    pub _compat_create_srq: Option<unsafe extern "C" fn() -> *mut c_void>,
    /// Compat slot.
    pub _compat_modify_srq: Option<unsafe extern "C" fn() -> *mut c_void>,
    /// Compat slot.
    pub _compat_query_srq: Option<unsafe extern "C" fn() -> *mut c_void>,
    /// Compat slot.
    pub _compat_destroy_srq: Option<unsafe extern "C" fn() -> *mut c_void>,
    /// Behind the inline `ibv_post_srq_recv`.
    pub post_srq_recv: Option<
        unsafe extern "C" fn(
            srq: *mut ibv_srq,
            recv_wr: *mut ibv_recv_wr,
            bad_recv_wr: *mut *mut ibv_recv_wr,
        ) -> c_int,
    >,
    /// Compat slot.
    pub _compat_create_qp: Option<unsafe extern "C" fn() -> *mut c_void>,
    /// Compat slot.
    pub _compat_query_qp: Option<unsafe extern "C" fn() -> *mut c_void>,
    /// Compat slot.
    pub _compat_modify_qp: Option<unsafe extern "C" fn() -> *mut c_void>,
    /// Compat slot.
    pub _compat_destroy_qp: Option<unsafe extern "C" fn() -> *mut c_void>,
    /// Behind the inline `ibv_post_send`.
    pub post_send: Option<
        unsafe extern "C" fn(
            qp: *mut ibv_qp,
            wr: *mut ibv_send_wr,
            bad_wr: *mut *mut ibv_send_wr,
        ) -> c_int,
    >,
    /// Behind the inline `ibv_post_recv`.
    pub post_recv: Option<
        unsafe extern "C" fn(
            qp: *mut ibv_qp,
            wr: *mut ibv_recv_wr,
            bad_wr: *mut *mut ibv_recv_wr,
        ) -> c_int,
    >,
    /// Compat slot.
    pub _compat_create_ah: Option<unsafe extern "C" fn() -> *mut c_void>,
    /// Compat slot.
    pub _compat_destroy_ah: Option<unsafe extern "C" fn() -> *mut c_void>,
    /// Compat slot.
    pub _compat_attach_mcast: Option<unsafe extern "C" fn() -> *mut c_void>,
    /// Compat slot.
    pub _compat_detach_mcast: Option<unsafe extern "C" fn() -> *mut c_void>,
    /// Compat slot.
    pub _compat_async_event: Option<unsafe extern "C" fn() -> *mut c_void>,
}

/// An open device context; the last member of the provider's `struct verbs_context`.
#[repr(C)]
pub struct ibv_context {
    /// The device this context was opened on.
    pub device: *mut ibv_device,
    /// The provider's data-path function table.
    pub ops: ibv_context_ops,
    /// The uverbs command file descriptor.
    pub cmd_fd: c_int,
    /// The async event file descriptor.
    pub async_fd: c_int,
    /// Number of completion vectors.
    pub num_comp_vectors: c_int,
    /// Library-internal lock.
    pub mutex: libc::pthread_mutex_t,
    /// `UINTPTR_MAX` when this context is embedded in a `struct verbs_context`.
    pub abi_compat: *mut c_void,
}

/// Device attributes, filled by `ibv_query_device`.
#[repr(C)]
#[derive(Clone, Copy)]
pub struct ibv_device_attr {
    /// Firmware version string (NUL-terminated).
    pub fw_ver: [c_char; 64],
    /// Node GUID, network byte order.
    pub node_guid: __be64,
    /// System image GUID, network byte order.
    pub sys_image_guid: __be64,
    pub max_mr_size: u64,
    pub page_size_cap: u64,
    pub vendor_id: u32,
    pub vendor_part_id: u32,
    pub hw_ver: u32,
    pub max_qp: c_int,
    pub max_qp_wr: c_int,
    /// Bits of `ibv_device_cap_flags`.
    pub device_cap_flags: c_uint,
    pub max_sge: c_int,
    pub max_sge_rd: c_int,
    pub max_cq: c_int,
    pub max_cqe: c_int,
    pub max_mr: c_int,
    pub max_pd: c_int,
    pub max_qp_rd_atom: c_int,
    pub max_ee_rd_atom: c_int,
    pub max_res_rd_atom: c_int,
    pub max_qp_init_rd_atom: c_int,
    pub max_ee_init_rd_atom: c_int,
    /// Atomic support; read as `c_int` (see the module docs).
    pub atomic_cap: raw::ibv_atomic_cap,
    pub max_ee: c_int,
    pub max_rdd: c_int,
    pub max_mw: c_int,
    pub max_raw_ipv6_qp: c_int,
    pub max_raw_ethy_qp: c_int,
    pub max_mcast_grp: c_int,
    pub max_mcast_qp_attach: c_int,
    pub max_total_mcast_qp_attach: c_int,
    pub max_ah: c_int,
    pub max_fmr: c_int,
    pub max_map_per_fmr: c_int,
    pub max_srq: c_int,
    pub max_srq_wr: c_int,
    pub max_srq_sge: c_int,
    pub max_pkeys: u16,
    pub local_ca_ack_delay: u8,
    pub phys_port_cnt: u8,
}

/// Port attributes, filled by `ibv_query_port`.
#[repr(C)]
#[derive(Clone, Copy)]
pub struct ibv_port_attr {
    /// Read as `c_int` (see the module docs).
    pub state: raw::ibv_port_state,
    /// Read as `c_int` (see the module docs).
    pub max_mtu: raw::ibv_mtu,
    /// Read as `c_int` (see the module docs).
    pub active_mtu: raw::ibv_mtu,
    pub gid_tbl_len: c_int,
    /// Bits of `ibv_port_cap_flags`.
    pub port_cap_flags: u32,
    pub max_msg_sz: u32,
    pub bad_pkey_cntr: u32,
    pub qkey_viol_cntr: u32,
    pub pkey_tbl_len: u16,
    pub lid: u16,
    pub sm_lid: u16,
    pub lmc: u8,
    pub max_vl_num: u8,
    pub sm_sl: u8,
    pub subnet_timeout: u8,
    pub init_type_reply: u8,
    pub active_width: u8,
    pub active_speed: u8,
    pub phys_state: u8,
    /// One of the `IBV_LINK_LAYER_*` constants.
    pub link_layer: u8,
    pub flags: u8,
    /// Bits of `ibv_port_cap_flags2`.
    pub port_cap_flags2: u16,
}

/// The object an async event is about; which member is valid depends on the event type.
#[repr(C)]
#[derive(Clone, Copy)]
pub union ibv_async_event_element {
    pub cq: *mut ibv_cq,
    pub qp: *mut ibv_qp,
    pub srq: *mut ibv_srq,
    pub wq: *mut ibv_wq,
    pub port_num: c_int,
}

/// An asynchronous event, filled by `ibv_get_async_event`.
#[repr(C)]
#[derive(Clone, Copy)]
pub struct ibv_async_event {
    /// The affected object.
    pub element: ibv_async_event_element,
    /// Read as `c_int` (see the module docs).
    pub event_type: raw::ibv_event_type,
}

// Offsets measured with gcc against rdma-core 44's verbs.h (x86_64).
crate::assert_layout!(ibv_gid_global, 16, 8; subnet_prefix => 0, interface_id => 8);
crate::assert_layout!(ibv_gid, 16, 8; raw => 0, global => 0);
crate::assert_layout!(_ibv_device_ops, 16, 8; _dummy1 => 0, _dummy2 => 8);
crate::assert_layout!(ibv_device, 664, 8;
    _ops => 0, node_type => 16, transport_type => 20, name => 24, dev_name => 88,
    dev_path => 152, ibdev_path => 408);
crate::assert_layout!(ibv_context_ops, 256, 8;
    _compat_query_device => 0, _compat_query_port => 8, _compat_alloc_pd => 16,
    _compat_dealloc_pd => 24, _compat_reg_mr => 32, _compat_rereg_mr => 40,
    _compat_dereg_mr => 48, alloc_mw => 56, bind_mw => 64, dealloc_mw => 72,
    _compat_create_cq => 80, poll_cq => 88, req_notify_cq => 96, _compat_cq_event => 104,
    _compat_resize_cq => 112, _compat_destroy_cq => 120, _compat_create_srq => 128,
    _compat_modify_srq => 136, _compat_query_srq => 144, _compat_destroy_srq => 152,
    post_srq_recv => 160, _compat_create_qp => 168, _compat_query_qp => 176,
    _compat_modify_qp => 184, _compat_destroy_qp => 192, post_send => 200, post_recv => 208,
    _compat_create_ah => 216, _compat_destroy_ah => 224, _compat_attach_mcast => 232,
    _compat_detach_mcast => 240, _compat_async_event => 248);
crate::assert_layout!(ibv_context, 328, 8;
    device => 0, ops => 8, cmd_fd => 264, async_fd => 268, num_comp_vectors => 272,
    mutex => 280, abi_compat => 320);
crate::assert_layout!(ibv_device_attr, 232, 8;
    fw_ver => 0, node_guid => 64, sys_image_guid => 72, max_mr_size => 80,
    page_size_cap => 88, vendor_id => 96, vendor_part_id => 100, hw_ver => 104,
    max_qp => 108, max_qp_wr => 112, device_cap_flags => 116, max_sge => 120,
    max_sge_rd => 124, max_cq => 128, max_cqe => 132, max_mr => 136, max_pd => 140,
    max_qp_rd_atom => 144, max_ee_rd_atom => 148, max_res_rd_atom => 152,
    max_qp_init_rd_atom => 156, max_ee_init_rd_atom => 160, atomic_cap => 164,
    max_ee => 168, max_rdd => 172, max_mw => 176, max_raw_ipv6_qp => 180,
    max_raw_ethy_qp => 184, max_mcast_grp => 188, max_mcast_qp_attach => 192,
    max_total_mcast_qp_attach => 196, max_ah => 200, max_fmr => 204,
    max_map_per_fmr => 208, max_srq => 212, max_srq_wr => 216, max_srq_sge => 220,
    max_pkeys => 224, local_ca_ack_delay => 226, phys_port_cnt => 227);
crate::assert_layout!(ibv_port_attr, 52, 4;
    state => 0, max_mtu => 4, active_mtu => 8, gid_tbl_len => 12, port_cap_flags => 16,
    max_msg_sz => 20, bad_pkey_cntr => 24, qkey_viol_cntr => 28, pkey_tbl_len => 32,
    lid => 34, sm_lid => 36, lmc => 38, max_vl_num => 39, sm_sl => 40,
    subnet_timeout => 41, init_type_reply => 42, active_width => 43, active_speed => 44,
    phys_state => 45, link_layer => 46, flags => 47, port_cap_flags2 => 48);
crate::assert_layout!(ibv_async_event_element, 8, 8;
    cq => 0, qp => 0, srq => 0, wq => 0, port_num => 0);
crate::assert_layout!(ibv_async_event, 16, 8; element => 0, event_type => 8);
// Every C enum in this crate is an `int`-sized enum; pin the Rust side too.
crate::assert_layout!(ibv_node_type, 4, 4);
crate::assert_layout!(ibv_mtu, 4, 4);
