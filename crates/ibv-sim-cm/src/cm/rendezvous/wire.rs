//! The messages two ids exchange over their connection, one per
//! `SOCK_SEQPACKET` record: the IB CM's REQ / REP / RTU / REJ / DREQ /
//! DREP and SIDR REQ / REP, carrying what the kernel's CM would (QP
//! number, starting PSN, the port's GID and LID, the negotiated RDMA
//! depths, private data, ECE). Both ends are this library; a record of the
//! wrong size ends the connection, and every field is a plain integer, so
//! any bytes a peer sends read as some message.

use core::ffi::c_int;
use std::os::fd::AsRawFd;

use crate::guard::errno;

pub const REQ: u32 = 1;
pub const REP: u32 = 2;
pub const RTU: u32 = 3;
pub const REJ: u32 = 4;
pub const DREQ: u32 = 5;
pub const DREP: u32 = 6;
pub const SIDR_REQ: u32 = 7;
pub const SIDR_REP: u32 = 8;

/// `IB_SIDR_SUCCESS`, `_UNSUPPORTED` (no listener), `_REJECT`.
pub const SIDR_SUCCESS: c_int = 0;
pub const SIDR_UNSUPPORTED: c_int = 1;
pub const SIDR_REJECT: c_int = 2;

#[repr(C)]
#[derive(Clone, Copy)]
pub struct Msg {
    pub kind: u32,
    /// REJ: the reason; SIDR REP: the status.
    pub status: c_int,
    pub ps: u32,
    pub qp_type: u32,
    pub qpn: u32,
    pub psn: u32,
    pub qkey: u32,
    /// `ibv_mtu` of the sender's port.
    pub mtu: u32,
    pub lid: u16,
    pub port: u8,
    pub link_layer: u8,
    pub gid: [u8; 16],
    pub responder_resources: u8,
    pub initiator_depth: u8,
    pub flow_control: u8,
    pub retry_count: u8,
    pub rnr_retry_count: u8,
    pub srq: u8,
    pub private_data_len: u8,
    pub has_ece: u8,
    pub ece_vendor: u32,
    pub ece_options: u32,
    /// The sender's and the receiver's socket addresses (`sockaddr_storage`).
    pub src: [u8; 128],
    pub dst: [u8; 128],
    pub private_data: [u8; 256],
}

impl Msg {
    pub fn new(kind: u32) -> Box<Msg> {
        // SAFETY: every field is an integer or an array of them.
        let mut m: Box<Msg> = Box::new(unsafe { core::mem::zeroed() });
        m.kind = kind;
        m
    }

    /// Copies `len` bytes of the program's private data (at most 255).
    ///
    /// # Safety
    /// `data` is NULL (with `len` 0) or points at `len` readable bytes.
    pub unsafe fn set_private(&mut self, data: *const u8, len: u8) {
        self.private_data = [0; 256];
        if !data.is_null() && len > 0 {
            // SAFETY: the caller's contract.
            let s = unsafe { core::slice::from_raw_parts(data, usize::from(len)) };
            self.private_data[..s.len()].copy_from_slice(s);
            self.private_data_len = len;
        } else {
            self.private_data_len = 0;
        }
    }

    /// Sends the record on `fd` (never raising SIGPIPE).
    pub fn send(&self, fd: &impl AsRawFd) -> Result<(), c_int> {
        let n = core::mem::size_of::<Msg>();
        // SAFETY: sends the n bytes of `self`.
        let r = unsafe {
            libc::send(
                fd.as_raw_fd(),
                (self as *const Msg).cast(),
                n,
                libc::MSG_NOSIGNAL,
            )
        };
        if r == n as isize {
            Ok(())
        } else if r < 0 {
            Err(errno())
        } else {
            Err(libc::EIO)
        }
    }
}

/// What one non-blocking receive gave.
pub enum Recv {
    Msg(Box<Msg>),
    /// Nothing more for now.
    Empty,
    /// The peer closed, or sent something that is not a record.
    Gone,
}

/// Receives one record from `fd` without blocking.
pub fn recv(fd: c_int) -> Recv {
    let n = core::mem::size_of::<Msg>();
    let mut m = Msg::new(0);
    // SAFETY: receives at most n bytes into the boxed message.
    let r = unsafe {
        libc::recv(
            fd,
            (&raw mut *m).cast(),
            n,
            libc::MSG_DONTWAIT | libc::MSG_TRUNC,
        )
    };
    if r < 0 {
        let e = errno();
        return if e == libc::EAGAIN || e == libc::EINTR {
            Recv::Empty
        } else {
            Recv::Gone
        };
    }
    if r as usize != n {
        return Recv::Gone;
    }
    Recv::Msg(m)
}
