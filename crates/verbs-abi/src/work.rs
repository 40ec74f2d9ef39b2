//! The data path: scatter/gather entries, work requests, completions, GRH.
//!
//! C declares several unions and structs here without a type name. cbindgen
//! can only emit named types, so each gets one (`ibv_send_wr_wr`, ...) while
//! the member keeps C's name, and C code such as `wr.wr.rdma.rkey` compiles
//! unchanged against the generated header. Two anonymous members cannot
//! keep their C spelling in Rust:
//!
//! - `ibv_wc` and `ibv_send_wr`'s `imm_data` / `invalidate(d)_rkey` union of
//!   two `u32` is a plain `imm_data` field (same bytes).
//! - `ibv_send_wr`'s trailing `bind_mw` / `tso` union is the member `anon`
//!   (`wr.anon.bind_mw.mw`).
//!
//! The C header has C's spelling: cbindgen.toml's trailer writes `struct
//! ibv_wc` and `struct ibv_send_wr` with their anonymous unions, and the
//! layout test holds them to these mirrors and to rdma-core's.
//!
//! Enum-typed fields must be read as `c_int`, never as the Rust enum (see
//! the `device` module docs). Numbers in `assert_layout!` come from a C
//! program compiled against rdma-core 44's `verbs.h` (x86_64).

use core::ffi::{c_int, c_uint, c_void};

use crate::{__be16, __be32, ibv_ah, ibv_gid, ibv_mw, ibv_mw_bind_info, raw};

/// Shift of `IBV_WC_IP_CSUM_OK` in `ibv_wc.wc_flags`.
pub const IBV_WC_IP_CSUM_OK_SHIFT: u32 = 2;

/// Bits of `ibv_wc.wc_flags`.
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ibv_wc_flags {
    IBV_WC_GRH = 1 << 0,
    IBV_WC_WITH_IMM = 1 << 1,
    IBV_WC_IP_CSUM_OK = 1 << 2,
    IBV_WC_WITH_INV = 1 << 3,
    IBV_WC_TM_SYNC_REQ = 1 << 4,
    IBV_WC_TM_MATCH = 1 << 5,
    IBV_WC_TM_DATA_VALID = 1 << 6,
}

/// One scatter/gather entry: a buffer inside a registered MR.
#[repr(C)]
#[derive(Clone, Copy)]
pub struct ibv_sge {
    pub addr: u64,
    pub length: u32,
    /// The `lkey` of the MR holding the buffer.
    pub lkey: u32,
}

/// `ibv_send_wr.wr.rdma`: the remote side of an RDMA read or write.
#[repr(C)]
#[derive(Clone, Copy)]
pub struct ibv_send_wr_rdma {
    pub remote_addr: u64,
    pub rkey: u32,
}

/// `ibv_send_wr.wr.atomic`: the operands of an atomic operation.
#[repr(C)]
#[derive(Clone, Copy)]
pub struct ibv_send_wr_atomic {
    pub remote_addr: u64,
    pub compare_add: u64,
    pub swap: u64,
    pub rkey: u32,
}

/// `ibv_send_wr.wr.ud`: the destination of a UD send.
#[repr(C)]
#[derive(Clone, Copy)]
pub struct ibv_send_wr_ud {
    pub ah: *mut ibv_ah,
    pub remote_qpn: u32,
    pub remote_qkey: u32,
}

/// `ibv_send_wr.wr`: opcode-specific arguments.
#[repr(C)]
#[derive(Clone, Copy)]
pub union ibv_send_wr_wr {
    pub rdma: ibv_send_wr_rdma,
    pub atomic: ibv_send_wr_atomic,
    pub ud: ibv_send_wr_ud,
}

/// `ibv_send_wr.qp_type.xrc`: the remote SRQ of an XRC send.
#[repr(C)]
#[derive(Clone, Copy)]
pub struct ibv_send_wr_xrc {
    pub remote_srqn: u32,
}

/// `ibv_send_wr.qp_type`: QP-type-specific arguments.
#[repr(C)]
#[derive(Clone, Copy)]
pub union ibv_send_wr_qp_type {
    pub xrc: ibv_send_wr_xrc,
}

/// `ibv_send_wr.bind_mw` in C: a type 2 memory window bind.
#[repr(C)]
#[derive(Clone, Copy)]
pub struct ibv_send_wr_bind_mw {
    pub mw: *mut ibv_mw,
    pub rkey: u32,
    pub bind_info: ibv_mw_bind_info,
}

/// `ibv_send_wr.tso` in C: the header of a TSO send.
#[repr(C)]
#[derive(Clone, Copy)]
pub struct ibv_send_wr_tso {
    pub hdr: *mut c_void,
    pub hdr_sz: u16,
    pub mss: u16,
}

/// C's anonymous trailing union of `ibv_send_wr` (`wr.anon.bind_mw`, `wr.anon.tso`).
#[repr(C)]
#[derive(Clone, Copy)]
pub union ibv_send_wr_anon {
    pub bind_mw: ibv_send_wr_bind_mw,
    pub tso: ibv_send_wr_tso,
}

/// A send work request (`ibv_post_send`); `next` chains a list.
#[repr(C)]
#[derive(Clone, Copy)]
pub struct ibv_send_wr {
    pub wr_id: u64,
    pub next: *mut ibv_send_wr,
    pub sg_list: *mut ibv_sge,
    pub num_sge: c_int,
    /// Read as `c_int` (see the `device` module docs).
    pub opcode: raw::ibv_wr_opcode,
    /// Bits of `ibv_send_flags`.
    pub send_flags: c_uint,
    /// Immediate data in network byte order; for `*_INV` opcodes, the rkey to invalidate (C's `invalidate_rkey`).
    pub imm_data: __be32,
    pub wr: ibv_send_wr_wr,
    pub qp_type: ibv_send_wr_qp_type,
    /// C's anonymous union: `bind_mw` or `tso`.
    pub anon: ibv_send_wr_anon,
}

/// A receive work request (`ibv_post_recv`, `ibv_post_srq_recv`); `next` chains a list.
#[repr(C)]
#[derive(Clone, Copy)]
pub struct ibv_recv_wr {
    pub wr_id: u64,
    pub next: *mut ibv_recv_wr,
    pub sg_list: *mut ibv_sge,
    pub num_sge: c_int,
}

/// A work completion, filled by `ibv_poll_cq`.
#[repr(C)]
#[derive(Clone, Copy)]
pub struct ibv_wc {
    pub wr_id: u64,
    /// Read as `c_int` (see the `device` module docs).
    pub status: raw::ibv_wc_status,
    /// Read as `c_int` (see the `device` module docs).
    pub opcode: raw::ibv_wc_opcode,
    pub vendor_err: u32,
    pub byte_len: u32,
    /// With `IBV_WC_WITH_IMM`: immediate data, network byte order; with `IBV_WC_WITH_INV`: the invalidated rkey (C's `invalidated_rkey`).
    pub imm_data: __be32,
    pub qp_num: u32,
    pub src_qp: u32,
    /// Bits of `ibv_wc_flags`.
    pub wc_flags: c_uint,
    pub pkey_index: u16,
    pub slid: u16,
    pub sl: u8,
    pub dlid_path_bits: u8,
}

/// The global routing header that precedes UD receives (first 40 bytes of the buffer).
#[repr(C)]
#[derive(Clone, Copy)]
pub struct ibv_grh {
    /// Version, traffic class and flow label, network byte order.
    pub version_tclass_flow: __be32,
    /// Payload length, network byte order.
    pub paylen: __be16,
    pub next_hdr: u8,
    pub hop_limit: u8,
    pub sgid: ibv_gid,
    pub dgid: ibv_gid,
}

crate::assert_layout!(ibv_sge, 16, 8; addr => 0, length => 8, lkey => 12);
crate::assert_layout!(ibv_send_wr_rdma, 16, 8; remote_addr => 0, rkey => 8);
crate::assert_layout!(ibv_send_wr_atomic, 32, 8;
    remote_addr => 0, compare_add => 8, swap => 16, rkey => 24);
crate::assert_layout!(ibv_send_wr_ud, 16, 8; ah => 0, remote_qpn => 8, remote_qkey => 12);
crate::assert_layout!(ibv_send_wr_wr, 32, 8; rdma => 0, atomic => 0, ud => 0);
crate::assert_layout!(ibv_send_wr_xrc, 4, 4; remote_srqn => 0);
crate::assert_layout!(ibv_send_wr_qp_type, 4, 4; xrc => 0);
crate::assert_layout!(ibv_send_wr_bind_mw, 48, 8; mw => 0, rkey => 8, bind_info => 16);
crate::assert_layout!(ibv_send_wr_tso, 16, 8; hdr => 0, hdr_sz => 8, mss => 10);
crate::assert_layout!(ibv_send_wr_anon, 48, 8; bind_mw => 0, tso => 0);
crate::assert_layout!(ibv_send_wr, 128, 8;
    wr_id => 0, next => 8, sg_list => 16, num_sge => 24, opcode => 28, send_flags => 32,
    imm_data => 36, wr => 40, qp_type => 72, anon => 80);
crate::assert_layout!(ibv_recv_wr, 32, 8; wr_id => 0, next => 8, sg_list => 16, num_sge => 24);
crate::assert_layout!(ibv_wc, 48, 8;
    wr_id => 0, status => 8, opcode => 12, vendor_err => 16, byte_len => 20, imm_data => 24,
    qp_num => 28, src_qp => 32, wc_flags => 36, pkey_index => 40, slid => 42, sl => 44,
    dlid_path_bits => 45);
crate::assert_layout!(ibv_grh, 40, 8;
    version_tclass_flow => 0, paylen => 4, next_hdr => 6, hop_limit => 7, sgid => 8,
    dgid => 24);
