//! The structs of `rdma_cma.h` and `sa.h`. Enum-typed members are `u32`
//! (C's enums are `int`-sized here), so any value a program stores reads
//! back as a number. Every figure in the assertions was printed by gcc
//! against rdma-core 44's headers (x86_64); `tests/rdmacm_layout.rs`
//! checks them again against whatever header is installed.

use core::ffi::{c_char, c_int, c_void};

use libc::{sockaddr, sockaddr_in, sockaddr_in6, sockaddr_storage, socklen_t};
use verbs_abi::{
    assert_layout, ibv_ah_attr, ibv_comp_channel, ibv_context, ibv_cq, ibv_gid, ibv_pd, ibv_qp,
    ibv_srq,
};

use crate::values::{rdma_cm_event_type, rdma_port_space};

/// `struct rdma_ib_addr`.
#[repr(C)]
#[derive(Clone, Copy)]
pub struct rdma_ib_addr {
    pub sgid: ibv_gid,
    pub dgid: ibv_gid,
    /// Network byte order.
    pub pkey: u16,
}

/// A socket address as any of the views `rdma_addr`'s unions give.
#[repr(C)]
#[derive(Clone, Copy)]
pub union rdma_sockaddr {
    pub addr: sockaddr,
    pub sin: sockaddr_in,
    pub sin6: sockaddr_in6,
    pub storage: sockaddr_storage,
}

/// `rdma_addr`'s third union, of one member.
#[repr(C)]
#[derive(Clone, Copy)]
pub union rdma_addr_ib {
    pub ibaddr: rdma_ib_addr,
}

/// `struct rdma_addr`: C's anonymous unions are named `src` and `dst`.
#[repr(C)]
#[derive(Clone, Copy)]
pub struct rdma_addr {
    pub src: rdma_sockaddr,
    pub dst: rdma_sockaddr,
    pub addr: rdma_addr_ib,
}

/// `struct ibv_sa_path_rec` (`<infiniband/sa.h>`).
#[repr(C)]
#[derive(Clone, Copy)]
pub struct ibv_sa_path_rec {
    pub dgid: ibv_gid,
    pub sgid: ibv_gid,
    pub dlid: u16,
    pub slid: u16,
    pub raw_traffic: c_int,
    pub flow_label: u32,
    pub hop_limit: u8,
    pub traffic_class: u8,
    pub reversible: c_int,
    pub numb_path: u8,
    pub pkey: u16,
    pub sl: u8,
    pub mtu_selector: u8,
    pub mtu: u8,
    pub rate_selector: u8,
    pub rate: u8,
    pub packet_life_time_selector: u8,
    pub packet_life_time: u8,
    pub preference: u8,
}

/// `struct ibv_path_record` (`<infiniband/sa.h>`), wire order.
#[repr(C)]
#[derive(Clone, Copy)]
pub struct ibv_path_record {
    pub service_id: u64,
    pub dgid: ibv_gid,
    pub sgid: ibv_gid,
    pub dlid: u16,
    pub slid: u16,
    pub flowlabel_hoplimit: u32,
    pub tclass: u8,
    pub reversible_numpath: u8,
    pub pkey: u16,
    pub qosclass_sl: u16,
    pub mtu: u8,
    pub rate: u8,
    pub packetlifetime: u8,
    pub preference: u8,
    pub reserved: [u8; 6],
}

/// `struct ibv_path_data`, what `RDMA_OPTION_IB_PATH` takes.
#[repr(C)]
#[derive(Clone, Copy)]
pub struct ibv_path_data {
    pub flags: u32,
    pub reserved: u32,
    pub path: ibv_path_record,
}

/// `struct rdma_route`.
#[repr(C)]
#[derive(Clone, Copy)]
pub struct rdma_route {
    pub addr: rdma_addr,
    pub path_rec: *mut ibv_sa_path_rec,
    pub num_paths: c_int,
}

/// `struct rdma_event_channel`.
#[repr(C)]
pub struct rdma_event_channel {
    pub fd: c_int,
}

/// `struct rdma_cm_id`.
#[repr(C)]
pub struct rdma_cm_id {
    pub verbs: *mut ibv_context,
    pub channel: *mut rdma_event_channel,
    pub context: *mut c_void,
    pub qp: *mut ibv_qp,
    pub route: rdma_route,
    pub ps: rdma_port_space,
    pub port_num: u8,
    pub event: *mut rdma_cm_event,
    pub send_cq_channel: *mut ibv_comp_channel,
    pub send_cq: *mut ibv_cq,
    pub recv_cq_channel: *mut ibv_comp_channel,
    pub recv_cq: *mut ibv_cq,
    pub srq: *mut ibv_srq,
    pub pd: *mut ibv_pd,
    /// An `ibv_qp_type` value.
    pub qp_type: u32,
}

/// `struct rdma_conn_param`.
#[repr(C)]
#[derive(Clone, Copy)]
pub struct rdma_conn_param {
    pub private_data: *const c_void,
    pub private_data_len: u8,
    pub responder_resources: u8,
    pub initiator_depth: u8,
    pub flow_control: u8,
    pub retry_count: u8,
    pub rnr_retry_count: u8,
    pub srq: u8,
    pub qp_num: u32,
}

/// `struct rdma_ud_param`.
#[repr(C)]
#[derive(Clone, Copy)]
pub struct rdma_ud_param {
    pub private_data: *const c_void,
    pub private_data_len: u8,
    pub ah_attr: ibv_ah_attr,
    pub qp_num: u32,
    pub qkey: u32,
}

/// `rdma_cm_event.param`.
#[repr(C)]
#[derive(Clone, Copy)]
pub union rdma_cm_event_param {
    pub conn: rdma_conn_param,
    pub ud: rdma_ud_param,
}

/// `struct rdma_cm_event`.
#[repr(C)]
pub struct rdma_cm_event {
    pub id: *mut rdma_cm_id,
    pub listen_id: *mut rdma_cm_id,
    pub event: rdma_cm_event_type,
    pub status: c_int,
    pub param: rdma_cm_event_param,
}

/// `struct rdma_addrinfo`.
#[repr(C)]
pub struct rdma_addrinfo {
    pub ai_flags: c_int,
    pub ai_family: c_int,
    pub ai_qp_type: c_int,
    pub ai_port_space: c_int,
    pub ai_src_len: socklen_t,
    pub ai_dst_len: socklen_t,
    pub ai_src_addr: *mut sockaddr,
    pub ai_dst_addr: *mut sockaddr,
    pub ai_src_canonname: *mut c_char,
    pub ai_dst_canonname: *mut c_char,
    pub ai_route_len: usize,
    pub ai_route: *mut c_void,
    pub ai_connect_len: usize,
    pub ai_connect: *mut c_void,
    pub ai_next: *mut rdma_addrinfo,
}

/// `struct rdma_cm_join_mc_attr_ex`.
#[repr(C)]
pub struct rdma_cm_join_mc_attr_ex {
    pub comp_mask: u32,
    pub join_flags: u32,
    pub addr: *mut sockaddr,
}

/// The layout the C test compares: (struct, size, align, [(member, offset)]).
/// Members are named as C spells them (`dst_addr` for `dst`).
pub type Layout = (&'static str, usize, usize, &'static [(&'static str, usize)]);

macro_rules! layouts {
    ($($t:ident, $size:expr, $align:expr; $($c:ident = $r:ident $(. $rr:ident)* => $off:expr),* ;)*) => {
        $(
            assert_layout!($t, $size, $align);
            const _: () = { $(assert!(core::mem::offset_of!($t, $r $(. $rr)*) == $off);)* };
        )*
        /// Every mirrored struct, as [`Layout`] rows.
        pub const LAYOUT: &[Layout] = &[
            $((stringify!($t), $size, $align, &[$((stringify!($c), $off)),*]),)*
        ];
    };
}

layouts! {
    rdma_ib_addr, 40, 8; sgid = sgid => 0, dgid = dgid => 16, pkey = pkey => 32;
    rdma_addr, 296, 8; src_addr = src => 0, dst_addr = dst => 128, addr = addr => 256;
    rdma_route, 312, 8; addr = addr => 0, path_rec = path_rec => 296, num_paths = num_paths => 304;
    rdma_event_channel, 4, 4; fd = fd => 0;
    rdma_cm_id, 416, 8; verbs = verbs => 0, channel = channel => 8, context = context => 16,
        qp = qp => 24, route = route => 32, ps = ps => 344, port_num = port_num => 348,
        event = event => 352, send_cq_channel = send_cq_channel => 360, send_cq = send_cq => 368,
        recv_cq_channel = recv_cq_channel => 376, recv_cq = recv_cq => 384, srq = srq => 392,
        pd = pd => 400, qp_type = qp_type => 408;
    rdma_conn_param, 24, 8; private_data = private_data => 0, private_data_len = private_data_len => 8,
        responder_resources = responder_resources => 9, initiator_depth = initiator_depth => 10,
        flow_control = flow_control => 11, retry_count = retry_count => 12,
        rnr_retry_count = rnr_retry_count => 13, srq = srq => 14, qp_num = qp_num => 16;
    rdma_ud_param, 56, 8; private_data = private_data => 0, private_data_len = private_data_len => 8,
        ah_attr = ah_attr => 16, qp_num = qp_num => 48, qkey = qkey => 52;
    rdma_cm_event, 80, 8; id = id => 0, listen_id = listen_id => 8, event = event => 16,
        status = status => 20, param = param => 24;
    rdma_addrinfo, 96, 8; ai_flags = ai_flags => 0, ai_family = ai_family => 4,
        ai_qp_type = ai_qp_type => 8, ai_port_space = ai_port_space => 12,
        ai_src_len = ai_src_len => 16, ai_dst_len = ai_dst_len => 20,
        ai_src_addr = ai_src_addr => 24, ai_dst_addr = ai_dst_addr => 32,
        ai_src_canonname = ai_src_canonname => 40, ai_dst_canonname = ai_dst_canonname => 48,
        ai_route_len = ai_route_len => 56, ai_route = ai_route => 64,
        ai_connect_len = ai_connect_len => 72, ai_connect = ai_connect => 80, ai_next = ai_next => 88;
    rdma_cm_join_mc_attr_ex, 16, 8; comp_mask = comp_mask => 0, join_flags = join_flags => 4,
        addr = addr => 8;
    ibv_sa_path_rec, 64, 8; dgid = dgid => 0, sgid = sgid => 16, dlid = dlid => 32, slid = slid => 34,
        raw_traffic = raw_traffic => 36, flow_label = flow_label => 40, hop_limit = hop_limit => 44,
        traffic_class = traffic_class => 45, reversible = reversible => 48, numb_path = numb_path => 52,
        pkey = pkey => 54, sl = sl => 56, mtu_selector = mtu_selector => 57, mtu = mtu => 58,
        rate_selector = rate_selector => 59, rate = rate => 60,
        packet_life_time_selector = packet_life_time_selector => 61,
        packet_life_time = packet_life_time => 62, preference = preference => 63;
    ibv_path_record, 64, 8; service_id = service_id => 0, dgid = dgid => 8, sgid = sgid => 24,
        dlid = dlid => 40, slid = slid => 42, flowlabel_hoplimit = flowlabel_hoplimit => 44,
        tclass = tclass => 48, reversible_numpath = reversible_numpath => 49, pkey = pkey => 50,
        qosclass_sl = qosclass_sl => 52, mtu = mtu => 54, rate = rate => 55,
        packetlifetime = packetlifetime => 56, preference = preference => 57, reserved = reserved => 58;
    ibv_path_data, 72, 8; flags = flags => 0, reserved = reserved => 4, path = path => 8;
}
