//! What travels between processes: one header per ring slot, followed by
//! up to a slot's worth of payload. A message longer than that is sent as
//! consecutive fragments (`offset`, `len` of `total`).

/// Message kinds: requests (to a QP's owner) and responses (back to the
/// requester's QP).
pub mod kind {
    pub const SEND: u32 = 1;
    pub const WRITE: u32 = 2;
    pub const WRITE_IMM: u32 = 3;
    pub const READ: u32 = 4;
    pub const CMP_SWAP: u32 = 5;
    pub const FETCH_ADD: u32 = 6;
    /// Unreliable datagram (no response).
    pub const UD: u32 = 7;
    /// Responses.
    pub const ACK: u32 = 16;
    /// A NAK carrying the requester's completion status.
    pub const NAK: u32 = 17;
    pub const READ_RESP: u32 = 18;
    pub const ATOMIC_RESP: u32 = 19;
    /// The responder dropped the request silently (no such QP, not
    /// connected to us, wrong state): the requester's retries run out.
    pub const DROP: u32 = 20;
    /// The responder's QP cannot receive yet (RESET / INIT): the request
    /// waits there for RTR, the requester's retries bound how long.
    pub const NOT_READY: u32 = 21;

    pub fn is_response(k: u32) -> bool {
        k >= ACK
    }
}

/// `Wire::flags` bits.
pub mod flag {
    pub const SOLICITED: u32 = 1;
    pub const IMM: u32 = 1 << 1;
    /// RC: the requester retries RNR forever (`rnr_retry` 7): park the
    /// message until a receive is posted.
    pub const RNR_WAIT: u32 = 1 << 2;
    pub const GRH_VALID: u32 = 1 << 3;
    /// RC: the requester expects a response.
    pub const REPLY: u32 = 1 << 4;
    /// Send with invalidate: `rkey` is the responder's rkey to invalidate.
    pub const INV: u32 = 1 << 5;
    /// RC, `rnr_retry` below 7: the requester's RNR retries, in the 3 bits
    /// from here (a responder whose profile times RNR retries uses them).
    pub const RNR_RETRY_SHIFT: u32 = 8;
}

/// The header of a message fragment.
#[repr(C)]
#[derive(Clone, Copy)]
pub struct Wire {
    pub kind: u32,
    pub flags: u32,
    /// The sender's process slot and token (where responses go).
    pub src_slot: u32,
    pub qp_type: i32,
    pub src_token: u64,
    pub src_qpn: u32,
    pub dst_qpn: u32,
    /// The requester's sequence number of the work request (echoed).
    pub seq: u64,
    pub total: u32,
    pub offset: u32,
    pub len: u32,
    pub imm: u32,
    pub remote_addr: u64,
    pub rkey: u32,
    /// NAK: the completion status; ACK: the byte count.
    pub status: i32,
    pub compare_add: u64,
    pub swap: u64,
    pub dlid: u16,
    pub slid: u16,
    pub sl: u8,
    pub is_global: u8,
    pub _pad: [u8; 2],
    pub qkey: u32,
    pub dgid: [u8; 16],
    /// UD: the 40 bytes that precede the payload in the receive buffer.
    pub grh: [u8; 40],
}

impl Wire {
    pub fn zeroed() -> Wire {
        // SAFETY: all-integer plain data; zero is valid.
        unsafe { core::mem::zeroed() }
    }
}
