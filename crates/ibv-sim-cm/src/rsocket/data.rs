//! An rsocket's data path over its RC QP: a ring of receive buffers, a
//! pool of send slots, and three kinds of message (a SEND of data; a SEND
//! with immediate 1, the end of the stream; with immediate 2, an `riomap`
//! of the peer's). No credits: the QP's `rnr_retry` is 7, so a sender
//! whose peer has no receive posted waits in the RC transport, as a full
//! TCP window makes a sender wait; a full send queue makes `rsend` block
//! (or fail with `EAGAIN`). `riowrite` is an RDMA WRITE into the peer's
//! mapped memory, which the peer's process takes without calling verbs.

use core::ffi::c_int;
use std::collections::VecDeque;

use verbs_abi::*;

use super::queues::{self, Completion, Queues};
use crate::verbs::*;

/// The size of one receive buffer or send slot, and how many of each.
pub const CHUNK: usize = 64 * 1024;
pub const NRECV: usize = 16;
pub const NSEND: usize = 16;

const IMM_FIN: u32 = 1;
const IMM_IOMAP: u32 = 2;
const KIND_SEND: u64 = 2 << 32;

// ibv_wc_opcode / ibv_wr_opcode values, ibv_wc_flags, ibv_send_flags.
const WC_RECV: u32 = 128;
const WC_WITH_IMM: c_uint = 2;
const WR_RDMA_WRITE: u32 = 0;
const WR_SEND: u32 = 2;
const WR_SEND_WITH_IMM: u32 = 3;
const SEND_SIGNALED: c_uint = 2;

use core::ffi::c_uint;

/// A region of this socket's peer mapped for `riowrite`.
#[derive(Clone, Copy)]
struct Window {
    offset: u64,
    addr: u64,
    rkey: u32,
    len: u64,
}

/// A local region mapped with `riomap`.
pub struct Mapped {
    pub mr: *mut ibv_mr,
    pub addr: usize,
}

/// The verbs objects and buffers of one connected rsocket.
pub struct Data {
    /// The buffers, the CQ and its channel, the id's QP.
    pub q: Queues,
    pd: *mut ibv_pd,
    /// Received data not yet read: (buffer, start, end).
    ready: VecDeque<(usize, usize, usize)>,
    pub eof: bool,
    pub fin_sent: bool,
    /// A failed completion's status or a post's error.
    pub error: c_int,
    windows: Vec<Window>,
    pub mapped: Vec<Mapped>,
}

impl Data {
    /// Registers the buffers on `pd` (the id's device) and makes the CQ
    /// with its completion channel.
    ///
    /// # Safety
    /// `ctx` and `pd` are live and of one device.
    pub unsafe fn new(ctx: *mut ibv_context, pd: *mut ibv_pd) -> Result<Box<Data>, c_int> {
        Ok(Box::new(Data {
            // SAFETY: the caller's contract.
            q: unsafe { Queues::new(ctx, pd, CHUNK, NRECV, NSEND)? },
            pd,
            ready: VecDeque::new(),
            eof: false,
            fin_sent: false,
            error: 0,
            windows: Vec::new(),
            mapped: Vec::new(),
        }))
    }

    /// The QP's attributes for `rdma_create_qp` (room for a FIN and an
    /// `riomap` message past the data slots).
    pub fn qp_attr(&self) -> ibv_qp_init_attr {
        self.q.qp_attr(QPT_RC, (NSEND + 2) as u32)
    }

    /// Takes every completion there is. Returns whether any came.
    pub fn poll(&mut self) -> bool {
        queues::drain(self, |d| &mut d.q, Data::completed)
    }

    fn completed(&mut self, c: &Completion) {
        let (id, i, imm, flags) = (c.id, c.index(), c.imm, c.flags);
        let len = c.len.min(CHUNK);
        if c.status != 0 {
            // A flush after the peer went away is the end, not an error.
            if self.error == 0 && !self.eof {
                self.error = libc::ECONNRESET;
            }
            if id & KIND_SEND != 0 && i < NSEND {
                self.q.free_slots.push(i);
            }
            return;
        }
        if c.opcode == WC_RECV && c.is_recv() && i < NRECV {
            if flags & WC_WITH_IMM != 0 && imm == IMM_FIN {
                self.eof = true;
                let _ = self.q.post_recv(i);
            } else if flags & WC_WITH_IMM != 0 && imm == IMM_IOMAP {
                let b = self.q.received(i, 28);
                let u = |r: core::ops::Range<usize>| {
                    u64::from_le_bytes(b[r].try_into().unwrap_or([0; 8]))
                };
                self.windows.push(Window {
                    offset: u(0..8),
                    addr: u(8..16),
                    rkey: u32::from_le_bytes(b[16..20].try_into().unwrap_or([0; 4])),
                    len: u(20..28),
                });
                let _ = self.q.post_recv(i);
            } else if len == 0 {
                let _ = self.q.post_recv(i);
            } else {
                self.ready.push_back((i, 0, len));
            }
        } else if id & KIND_SEND != 0 && i < NSEND {
            self.q.free_slots.push(i);
        }
    }

    /// Bytes ready to read (or the end of the stream).
    pub fn readable(&self) -> bool {
        !self.ready.is_empty() || self.eof || self.error != 0
    }

    /// Received bytes not yet read.
    pub fn has_data(&self) -> bool {
        !self.ready.is_empty()
    }

    /// No send in flight.
    pub fn idle(&self) -> bool {
        self.q.free_slots.len() == NSEND
    }

    pub fn writable(&self) -> bool {
        !self.q.free_slots.is_empty() || self.error != 0
    }

    /// Copies out what is ready, up to `out.len()`.
    pub fn read_into(&mut self, out: &mut [u8]) -> usize {
        let mut n = 0;
        while n < out.len() {
            let Some(&(i, start, end)) = self.ready.front() else {
                break;
            };
            let take = (end - start).min(out.len() - n);
            out[n..n + take].copy_from_slice(&self.q.received(i, end)[start..start + take]);
            n += take;
            if start + take == end {
                self.ready.pop_front();
                let _ = self.q.post_recv(i);
            } else {
                self.ready.front_mut().unwrap().1 += take;
            }
        }
        n
    }

    /// Sends up to one slot of `data` (a SEND, or an RDMA WRITE to
    /// `remote` when given); `Ok(0)` when no slot is free.
    pub fn write_from(
        &mut self,
        data: &[u8],
        remote: Option<(u64, u32)>,
        imm: Option<u32>,
    ) -> Result<usize, c_int> {
        if self.error != 0 {
            return Err(self.error);
        }
        let Some(slot) = self.q.free_slots.pop() else {
            return Ok(0);
        };
        let n = data.len().min(CHUNK);
        self.q.send_buf[slot * CHUNK..slot * CHUNK + n].copy_from_slice(&data[..n]);
        let mut sge = self.q.send_sge(slot, n);
        let mut wr = core::mem::MaybeUninit::<ibv_send_wr>::zeroed();
        let p = wr.as_mut_ptr();
        let opcode = match (remote, imm) {
            (Some(_), _) => WR_RDMA_WRITE,
            (None, Some(_)) => WR_SEND_WITH_IMM,
            (None, None) => WR_SEND,
        };
        // SAFETY: fields of the zeroed request, the opcode as its integer.
        unsafe {
            (*p).wr_id = KIND_SEND | slot as u64;
            (*p).sg_list = &mut sge;
            (*p).num_sge = 1;
            (&raw mut (*p).opcode).cast::<u32>().write(opcode);
            (*p).send_flags = SEND_SIGNALED;
            (*p).imm_data = imm.unwrap_or(0).to_be();
            if let Some((addr, rkey)) = remote {
                (*p).wr.rdma.remote_addr = addr;
                (*p).wr.rdma.rkey = rkey;
            }
        }
        // SAFETY: the request and its SGE outlive the call.
        let r = unsafe { self.q.post_send(p) };
        if r != 0 {
            self.q.free_slots.push(slot);
            return Err(r);
        }
        Ok(n.max(usize::from(imm.is_some())))
    }

    /// Where `offset` of the peer's mapped memory is, for `len` bytes.
    pub fn window(&self, offset: u64, len: usize) -> Option<(u64, u32)> {
        self.windows.iter().rev().find_map(|w| {
            (offset >= w.offset && offset + len as u64 <= w.offset + w.len)
                .then(|| (w.addr + (offset - w.offset), w.rkey))
        })
    }

    /// Maps `[addr, addr+len)` for the peer's RDMA writes at `offset`.
    pub fn map(&mut self, addr: usize, len: usize, offset: u64) -> Result<Option<Vec<u8>>, c_int> {
        let access = 1 | 2; // local write, remote write
                            // SAFETY: the program's buffer (riomap's contract: it stays until riounmap).
        let mr = unsafe { ibv_reg_mr(self.pd, addr as *mut _, len, access) };
        if mr.is_null() {
            return Err(crate::guard::errno());
        }
        self.mapped.push(Mapped { mr, addr });
        let mut msg = Vec::with_capacity(28);
        msg.extend_from_slice(&offset.to_le_bytes());
        msg.extend_from_slice(&(addr as u64).to_le_bytes());
        // SAFETY: the MR just made.
        msg.extend_from_slice(&unsafe { (*mr).rkey }.to_le_bytes());
        msg.extend_from_slice(&(len as u64).to_le_bytes());
        Ok(Some(msg))
    }

    pub const FIN: u32 = IMM_FIN;
    pub const IOMAP: u32 = IMM_IOMAP;
}

impl Drop for Data {
    fn drop(&mut self) {
        // The mapped regions first, then the queues (their own Drop).
        for m in self.mapped.drain(..) {
            // SAFETY: an MR `map` made, deregistered once.
            unsafe { ibv_dereg_mr(m.mr) };
        }
    }
}
