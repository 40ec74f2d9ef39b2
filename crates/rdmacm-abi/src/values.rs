//! The integer constants of `rdma_cma.h`: C enums as `u32`/`i32` values.

/// `enum rdma_cm_event_type`.
pub type rdma_cm_event_type = u32;
pub const RDMA_CM_EVENT_ADDR_RESOLVED: u32 = 0;
pub const RDMA_CM_EVENT_ADDR_ERROR: u32 = 1;
pub const RDMA_CM_EVENT_ROUTE_RESOLVED: u32 = 2;
pub const RDMA_CM_EVENT_ROUTE_ERROR: u32 = 3;
pub const RDMA_CM_EVENT_CONNECT_REQUEST: u32 = 4;
pub const RDMA_CM_EVENT_CONNECT_RESPONSE: u32 = 5;
pub const RDMA_CM_EVENT_CONNECT_ERROR: u32 = 6;
pub const RDMA_CM_EVENT_UNREACHABLE: u32 = 7;
pub const RDMA_CM_EVENT_REJECTED: u32 = 8;
pub const RDMA_CM_EVENT_ESTABLISHED: u32 = 9;
pub const RDMA_CM_EVENT_DISCONNECTED: u32 = 10;
pub const RDMA_CM_EVENT_DEVICE_REMOVAL: u32 = 11;
pub const RDMA_CM_EVENT_MULTICAST_JOIN: u32 = 12;
pub const RDMA_CM_EVENT_MULTICAST_ERROR: u32 = 13;
pub const RDMA_CM_EVENT_ADDR_CHANGE: u32 = 14;
pub const RDMA_CM_EVENT_TIMEWAIT_EXIT: u32 = 15;

/// The names `rdma_event_str` gives, by event number.
pub const EVENT_NAMES: [&core::ffi::CStr; 16] = [
    c"RDMA_CM_EVENT_ADDR_RESOLVED",
    c"RDMA_CM_EVENT_ADDR_ERROR",
    c"RDMA_CM_EVENT_ROUTE_RESOLVED",
    c"RDMA_CM_EVENT_ROUTE_ERROR",
    c"RDMA_CM_EVENT_CONNECT_REQUEST",
    c"RDMA_CM_EVENT_CONNECT_RESPONSE",
    c"RDMA_CM_EVENT_CONNECT_ERROR",
    c"RDMA_CM_EVENT_UNREACHABLE",
    c"RDMA_CM_EVENT_REJECTED",
    c"RDMA_CM_EVENT_ESTABLISHED",
    c"RDMA_CM_EVENT_DISCONNECTED",
    c"RDMA_CM_EVENT_DEVICE_REMOVAL",
    c"RDMA_CM_EVENT_MULTICAST_JOIN",
    c"RDMA_CM_EVENT_MULTICAST_ERROR",
    c"RDMA_CM_EVENT_ADDR_CHANGE",
    c"RDMA_CM_EVENT_TIMEWAIT_EXIT",
];

/// `enum rdma_port_space`.
pub type rdma_port_space = u32;
pub const RDMA_PS_IPOIB: u32 = 0x0002;
pub const RDMA_PS_TCP: u32 = 0x0106;
pub const RDMA_PS_UDP: u32 = 0x0111;
pub const RDMA_PS_IB: u32 = 0x013f;

pub const RDMA_IB_IP_PS_MASK: u64 = 0xffff_ffff_ffff_0000;
pub const RDMA_IB_IP_PORT_MASK: u64 = 0x0000_0000_0000_ffff;
pub const RDMA_IB_IP_PS_TCP: u64 = 0x0000_0000_0106_0000;
pub const RDMA_IB_IP_PS_UDP: u64 = 0x0000_0000_0111_0000;
pub const RDMA_IB_PS_IB: u64 = 0x0000_0000_013f_0000;

/// The qkey of `RDMA_PS_UDP` ids (and of multicast groups they join).
pub const RDMA_UDP_QKEY: u32 = 0x0123_4567;

pub const RDMA_MAX_RESP_RES: u8 = 0xff;
pub const RDMA_MAX_INIT_DEPTH: u8 = 0xff;

/// `rdma_addrinfo.ai_flags`.
pub const RAI_PASSIVE: i32 = 0x1;
pub const RAI_NUMERICHOST: i32 = 0x2;
pub const RAI_NOROUTE: i32 = 0x4;
pub const RAI_FAMILY: i32 = 0x8;

/// `rdma_cm_join_mc_attr_ex.comp_mask` bits.
pub const RDMA_CM_JOIN_MC_ATTR_ADDRESS: u32 = 1 << 0;
pub const RDMA_CM_JOIN_MC_ATTR_JOIN_FLAGS: u32 = 1 << 1;
/// `rdma_cm_join_mc_attr_ex.join_flags` values.
pub const RDMA_MC_JOIN_FLAG_FULLMEMBER: u32 = 0;
pub const RDMA_MC_JOIN_FLAG_SENDONLY_FULLMEMBER: u32 = 1;

/// `rdma_set_option` levels and names.
pub const RDMA_OPTION_ID: i32 = 0;
pub const RDMA_OPTION_IB: i32 = 1;
pub const RDMA_OPTION_ID_TOS: i32 = 0;
pub const RDMA_OPTION_ID_REUSEADDR: i32 = 1;
pub const RDMA_OPTION_ID_AFONLY: i32 = 2;
pub const RDMA_OPTION_ID_ACK_TIMEOUT: i32 = 3;
pub const RDMA_OPTION_IB_PATH: i32 = 1;

/// `ibv_path_data.flags`.
pub const IBV_PATH_FLAG_GMP: u32 = 1 << 0;
pub const IBV_PATH_FLAG_PRIMARY: u32 = 1 << 1;
pub const IBV_PATH_FLAG_ALTERNATE: u32 = 1 << 2;
pub const IBV_PATH_FLAG_OUTBOUND: u32 = 1 << 3;
pub const IBV_PATH_FLAG_INBOUND: u32 = 1 << 4;
pub const IBV_PATH_FLAG_INBOUND_REVERSE: u32 = 1 << 5;
pub const IBV_PATH_RECORD_REVERSIBLE: u8 = 0x80;

/// The IB CM's reject reasons librdmacm programs see in `event.status`.
pub const IB_CM_REJ_INVALID_SERVICE_ID: i32 = 8;
pub const IB_CM_REJ_CONSUMER_DEFINED: i32 = 28;
pub const IB_CM_REJ_VENDOR_OPTION_NOT_SUPPORTED: i32 = 35;

/// Private data a connection's messages carry, by port space: the IB CM
/// message sizes less librdmacm's 36-byte header (`rdma_cma.h`'s table).
pub const TCP_CONNECT_PRIVATE_DATA: usize = 56;
pub const TCP_ACCEPT_PRIVATE_DATA: usize = 196;
pub const TCP_REJECT_PRIVATE_DATA: usize = 148;
pub const UDP_CONNECT_PRIVATE_DATA: usize = 180;
pub const UDP_ACCEPT_PRIVATE_DATA: usize = 136;
/// The IB CM's own sizes (`RDMA_PS_IB`: no librdmacm header).
pub const IB_REQ_PRIVATE_DATA: usize = 92;
pub const IB_REP_PRIVATE_DATA: usize = 196;
pub const IB_REJ_PRIVATE_DATA: usize = 148;
pub const IB_DREQ_PRIVATE_DATA: usize = 220;
pub const IB_SIDR_REQ_PRIVATE_DATA: usize = 216;
pub const IB_SIDR_REP_PRIVATE_DATA: usize = 136;
