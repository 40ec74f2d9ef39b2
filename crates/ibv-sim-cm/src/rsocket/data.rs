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

use crate::verbs::*;

/// The size of one receive buffer or send slot, and how many of each.
pub const CHUNK: usize = 64 * 1024;
pub const NRECV: usize = 16;
pub const NSEND: usize = 16;

const IMM_FIN: u32 = 1;
const IMM_IOMAP: u32 = 2;
const KIND_RECV: u64 = 1 << 32;
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
    pub qp: *mut ibv_qp,
    pub cq: *mut ibv_cq,
    pub comp: *mut ibv_comp_channel,
    pd: *mut ibv_pd,
    recv_mr: *mut ibv_mr,
    send_mr: *mut ibv_mr,
    recv_buf: Vec<u8>,
    send_buf: Vec<u8>,
    free_slots: Vec<usize>,
    /// Received data not yet read: (buffer, start, end).
    ready: VecDeque<(usize, usize, usize)>,
    pub eof: bool,
    pub fin_sent: bool,
    /// A failed completion's status or a post's error.
    pub error: c_int,
    windows: Vec<Window>,
    pub mapped: Vec<Mapped>,
    armed: bool,
}

/// # Safety
/// `qp` is a live QP.
unsafe fn post_send(qp: *mut ibv_qp, wr: *mut ibv_send_wr) -> c_int {
    let mut bad: *mut ibv_send_wr = core::ptr::null_mut();
    // SAFETY: the provider's op on its own QP.
    unsafe {
        match (*(*qp).context).ops.post_send {
            Some(f) => f(qp, wr, &mut bad),
            None => libc::EOPNOTSUPP,
        }
    }
}

impl Data {
    /// Registers the buffers on `pd` (the id's device) and makes the CQ
    /// with its completion channel.
    ///
    /// # Safety
    /// `ctx` and `pd` are live and of one device.
    pub unsafe fn new(ctx: *mut ibv_context, pd: *mut ibv_pd) -> Result<Box<Data>, c_int> {
        let mut d = Box::new(Data {
            qp: core::ptr::null_mut(),
            cq: core::ptr::null_mut(),
            comp: core::ptr::null_mut(),
            pd,
            recv_mr: core::ptr::null_mut(),
            send_mr: core::ptr::null_mut(),
            recv_buf: vec![0u8; CHUNK * NRECV],
            send_buf: vec![0u8; CHUNK * NSEND],
            free_slots: (0..NSEND).collect(),
            ready: VecDeque::new(),
            eof: false,
            fin_sent: false,
            error: 0,
            windows: Vec::new(),
            mapped: Vec::new(),
            armed: false,
        });
        let local_write = 1;
        // SAFETY: our buffers, which live as long as `d` (deregistered in Drop).
        unsafe {
            d.recv_mr = ibv_reg_mr(
                pd,
                d.recv_buf.as_mut_ptr().cast(),
                d.recv_buf.len(),
                local_write,
            );
            d.send_mr = ibv_reg_mr(
                pd,
                d.send_buf.as_mut_ptr().cast(),
                d.send_buf.len(),
                local_write,
            );
            d.comp = ibv_create_comp_channel(ctx);
            if !d.comp.is_null() {
                let depth = (NRECV + NSEND + 4) as c_int;
                d.cq = ibv_create_cq(ctx, depth, core::ptr::null_mut(), d.comp, 0);
            }
        }
        if d.recv_mr.is_null() || d.send_mr.is_null() || d.cq.is_null() {
            return Err(crate::guard::errno().max(libc::ENOMEM));
        }
        // The completion channel's fd is polled by rpoll: non-blocking.
        // SAFETY: our channel's descriptor.
        unsafe {
            let fd = (*d.comp).fd;
            libc::fcntl(
                fd,
                libc::F_SETFL,
                libc::fcntl(fd, libc::F_GETFL) | libc::O_NONBLOCK,
            );
        }
        Ok(d)
    }

    /// The QP's attributes for `rdma_create_qp`.
    pub fn qp_attr(&self) -> ibv_qp_init_attr {
        // SAFETY: zeroed is valid for every field but qp_type, set below
        // through its integer.
        let mut a: core::mem::MaybeUninit<ibv_qp_init_attr> = core::mem::MaybeUninit::zeroed();
        let p = a.as_mut_ptr();
        // SAFETY: fields of the zeroed block.
        unsafe {
            (*p).send_cq = self.cq;
            (*p).recv_cq = self.cq;
            (*p).cap.max_send_wr = (NSEND + 2) as u32;
            (*p).cap.max_recv_wr = NRECV as u32;
            (*p).cap.max_send_sge = 1;
            (*p).cap.max_recv_sge = 1;
            (&raw mut (*p).qp_type).cast::<u32>().write(QPT_RC);
            a.assume_init()
        }
    }

    /// Posts every receive buffer (before the connection is made).
    pub fn post_all_recvs(&mut self) -> Result<(), c_int> {
        for i in 0..NRECV {
            self.post_recv(i)?;
        }
        Ok(())
    }

    fn post_recv(&mut self, i: usize) -> Result<(), c_int> {
        let mut sge = ibv_sge {
            addr: self.recv_buf[i * CHUNK..].as_ptr() as u64,
            length: CHUNK as u32,
            // SAFETY: our MR.
            lkey: unsafe { (*self.recv_mr).lkey },
        };
        let mut wr = ibv_recv_wr {
            wr_id: KIND_RECV | i as u64,
            next: core::ptr::null_mut(),
            sg_list: &mut sge,
            num_sge: 1,
        };
        let mut bad: *mut ibv_recv_wr = core::ptr::null_mut();
        // SAFETY: the provider's op on our QP; `wr` and `sge` outlive the call.
        let r = unsafe {
            match (*(*self.qp).context).ops.post_recv {
                Some(f) => f(self.qp, &mut wr, &mut bad),
                None => libc::EOPNOTSUPP,
            }
        };
        if r != 0 {
            return Err(r);
        }
        Ok(())
    }

    /// Takes every completion there is. Returns whether any came.
    pub fn poll(&mut self) -> bool {
        let mut wc = [core::mem::MaybeUninit::<ibv_wc>::zeroed(); 16];
        let mut any = false;
        loop {
            // SAFETY: the provider's op on our CQ, into 16 slots.
            let n = unsafe {
                match (*(*self.cq).context).ops.poll_cq {
                    Some(f) => f(self.cq, 16, wc.as_mut_ptr().cast()),
                    None => -1,
                }
            };
            if n <= 0 {
                return any;
            }
            any = true;
            for w in &wc[..n as usize] {
                let p = w.as_ptr();
                // SAFETY: fields the provider filled, enum ones read as integers.
                let (id, status, opcode, len, imm, flags) = unsafe {
                    (
                        (*p).wr_id,
                        (&raw const (*p).status).cast::<u32>().read(),
                        (&raw const (*p).opcode).cast::<u32>().read(),
                        (*p).byte_len as usize,
                        u32::from_be((*p).imm_data),
                        (*p).wc_flags,
                    )
                };
                self.completed(id, status, opcode, len.min(CHUNK), imm, flags);
            }
        }
    }

    fn completed(
        &mut self,
        id: u64,
        status: u32,
        opcode: u32,
        len: usize,
        imm: u32,
        flags: c_uint,
    ) {
        let i = (id & 0xffff_ffff) as usize;
        if status != 0 {
            // A flush after the peer went away is the end, not an error.
            if self.error == 0 && !self.eof {
                self.error = libc::ECONNRESET;
            }
            if id & KIND_SEND != 0 && i < NSEND {
                self.free_slots.push(i);
            }
            return;
        }
        if opcode == WC_RECV && id & KIND_RECV != 0 && i < NRECV {
            if flags & WC_WITH_IMM != 0 && imm == IMM_FIN {
                self.eof = true;
                let _ = self.post_recv(i);
            } else if flags & WC_WITH_IMM != 0 && imm == IMM_IOMAP {
                let b = &self.recv_buf[i * CHUNK..i * CHUNK + 28];
                let u = |r: core::ops::Range<usize>| {
                    u64::from_le_bytes(b[r].try_into().unwrap_or([0; 8]))
                };
                self.windows.push(Window {
                    offset: u(0..8),
                    addr: u(8..16),
                    rkey: u32::from_le_bytes(b[16..20].try_into().unwrap_or([0; 4])),
                    len: u(20..28),
                });
                let _ = self.post_recv(i);
            } else if len == 0 {
                let _ = self.post_recv(i);
            } else {
                self.ready.push_back((i, 0, len));
            }
        } else if id & KIND_SEND != 0 && i < NSEND {
            self.free_slots.push(i);
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
        self.free_slots.len() == NSEND
    }

    pub fn writable(&self) -> bool {
        !self.free_slots.is_empty() || self.error != 0
    }

    /// Copies out what is ready, up to `out.len()`.
    pub fn read_into(&mut self, out: &mut [u8]) -> usize {
        let mut n = 0;
        while n < out.len() {
            let Some(&(i, start, end)) = self.ready.front() else {
                break;
            };
            let take = (end - start).min(out.len() - n);
            let base = i * CHUNK + start;
            out[n..n + take].copy_from_slice(&self.recv_buf[base..base + take]);
            n += take;
            if start + take == end {
                self.ready.pop_front();
                let _ = self.post_recv(i);
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
        let Some(slot) = self.free_slots.pop() else {
            return Ok(0);
        };
        let n = data.len().min(CHUNK);
        self.send_buf[slot * CHUNK..slot * CHUNK + n].copy_from_slice(&data[..n]);
        let mut sge = ibv_sge {
            addr: self.send_buf[slot * CHUNK..].as_ptr() as u64,
            length: n as u32,
            // SAFETY: our MR.
            lkey: unsafe { (*self.send_mr).lkey },
        };
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
        // SAFETY: our QP; the request and its SGE outlive the call.
        let r = unsafe { post_send(self.qp, p) };
        if r != 0 {
            self.free_slots.push(slot);
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

    /// Arms the CQ's notification, so the channel's fd turns readable at
    /// the next completion; takes the events already there.
    pub fn arm(&mut self) {
        let mut cq: *mut ibv_cq = core::ptr::null_mut();
        let mut ctx: *mut core::ffi::c_void = core::ptr::null_mut();
        // SAFETY: our channel, non-blocking: takes what is there.
        while unsafe { ibv_get_cq_event(self.comp, &mut cq, &mut ctx) } == 0 {
            // SAFETY: the event's CQ is ours.
            unsafe { ibv_ack_cq_events(cq, 1) };
            self.armed = false;
        }
        if !self.armed {
            // SAFETY: the provider's op on our CQ.
            unsafe {
                if let Some(f) = (*(*self.cq).context).ops.req_notify_cq {
                    f(self.cq, 0);
                }
            }
            self.armed = true;
        }
    }

    pub const FIN: u32 = IMM_FIN;
    pub const IOMAP: u32 = IMM_IOMAP;
}

impl Drop for Data {
    fn drop(&mut self) {
        // SAFETY: our own objects, each made once in `new` (the QP is the id's).
        unsafe {
            for m in self.mapped.drain(..) {
                ibv_dereg_mr(m.mr);
            }
            if !self.recv_mr.is_null() {
                ibv_dereg_mr(self.recv_mr);
            }
            if !self.send_mr.is_null() {
                ibv_dereg_mr(self.send_mr);
            }
            if !self.cq.is_null() {
                ibv_destroy_cq(self.cq);
            }
            if !self.comp.is_null() {
                ibv_destroy_comp_channel(self.comp);
            }
        }
    }
}
