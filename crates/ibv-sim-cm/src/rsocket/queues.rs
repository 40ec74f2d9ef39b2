//! What the data path of either kind of rsocket owns: a ring of receive
//! buffers and a pool of send slots, each registered on the id's PD, and a
//! CQ with its completion channel (non-blocking: `rpoll` polls its fd).
//! Posting a receive or a send, taking completions, arming the channel,
//! the QP's attributes; the stream (`data`) and datagram (`dgram`)
//! sockets say what a completion means.

use core::ffi::{c_int, c_uint};

use verbs_abi::*;

use crate::verbs::*;

/// A receive's `wr_id`: this bit and the buffer's index.
pub const KIND_RECV: u64 = 1 << 32;

/// How many completions one poll takes at the most.
const BATCH: usize = 16;

/// A completion, its enum fields read as integers.
#[derive(Clone, Copy, Default)]
pub struct Completion {
    pub id: u64,
    pub status: u32,
    pub opcode: u32,
    pub len: usize,
    /// The immediate data, in host order.
    pub imm: u32,
    pub flags: c_uint,
}

impl Completion {
    /// The buffer's or slot's index in `id`.
    pub fn index(&self) -> usize {
        (self.id & 0xffff_ffff) as usize
    }

    /// Whether it ends a receive.
    pub fn is_recv(&self) -> bool {
        self.id & KIND_RECV != 0
    }
}

/// The buffers, the CQ and the channel; the QP is the id's.
pub struct Queues {
    pub qp: *mut ibv_qp,
    pub cq: *mut ibv_cq,
    pub comp: *mut ibv_comp_channel,
    recv_mr: *mut ibv_mr,
    send_mr: *mut ibv_mr,
    recv_buf: Vec<u8>,
    pub send_buf: Vec<u8>,
    /// The size of one receive buffer or send slot.
    slot: usize,
    nrecv: usize,
    /// Send slots not in flight.
    pub free_slots: Vec<usize>,
    armed: bool,
}

impl Queues {
    /// `nrecv` receive buffers and `nsend` send slots of `slot` bytes,
    /// registered on `pd`, and a CQ deep enough for both with its channel.
    ///
    /// # Safety
    /// `ctx` and `pd` are live and of one device.
    pub unsafe fn new(
        ctx: *mut ibv_context,
        pd: *mut ibv_pd,
        slot: usize,
        nrecv: usize,
        nsend: usize,
    ) -> Result<Queues, c_int> {
        let mut q = Queues {
            qp: core::ptr::null_mut(),
            cq: core::ptr::null_mut(),
            comp: core::ptr::null_mut(),
            recv_mr: core::ptr::null_mut(),
            send_mr: core::ptr::null_mut(),
            recv_buf: vec![0u8; slot * nrecv],
            send_buf: vec![0u8; slot * nsend],
            slot,
            nrecv,
            free_slots: (0..nsend).collect(),
            armed: false,
        };
        let local_write = 1;
        // SAFETY: our buffers, which live as long as `q` (their heap blocks
        // do not move with it; deregistered in Drop); our context.
        unsafe {
            q.recv_mr = ibv_reg_mr(
                pd,
                q.recv_buf.as_mut_ptr().cast(),
                q.recv_buf.len(),
                local_write,
            );
            q.send_mr = ibv_reg_mr(
                pd,
                q.send_buf.as_mut_ptr().cast(),
                q.send_buf.len(),
                local_write,
            );
            q.comp = ibv_create_comp_channel(ctx);
            if !q.comp.is_null() {
                let depth = (nrecv + nsend + 4) as c_int;
                q.cq = ibv_create_cq(ctx, depth, core::ptr::null_mut(), q.comp, 0);
            }
        }
        if q.recv_mr.is_null() || q.send_mr.is_null() || q.cq.is_null() {
            return Err(crate::guard::errno().max(libc::ENOMEM));
        }
        // SAFETY: our channel's descriptor.
        unsafe {
            let fd = (*q.comp).fd;
            libc::fcntl(
                fd,
                libc::F_SETFL,
                libc::fcntl(fd, libc::F_GETFL) | libc::O_NONBLOCK,
            );
        }
        Ok(q)
    }

    /// The QP's attributes for `rdma_create_qp`: both queues on our CQ,
    /// one SGE a request.
    pub fn qp_attr(&self, qp_type: u32, max_send_wr: u32) -> ibv_qp_init_attr {
        // SAFETY: zeroed is valid for every field but qp_type, set below
        // through its integer.
        let mut a: core::mem::MaybeUninit<ibv_qp_init_attr> = core::mem::MaybeUninit::zeroed();
        let p = a.as_mut_ptr();
        // SAFETY: fields of the zeroed block.
        unsafe {
            (*p).send_cq = self.cq;
            (*p).recv_cq = self.cq;
            (*p).cap.max_send_wr = max_send_wr;
            (*p).cap.max_recv_wr = self.nrecv as u32;
            (*p).cap.max_send_sge = 1;
            (*p).cap.max_recv_sge = 1;
            (&raw mut (*p).qp_type).cast::<u32>().write(qp_type);
            a.assume_init()
        }
    }

    /// Posts every receive buffer (the QP made).
    pub fn post_all_recvs(&mut self) -> Result<(), c_int> {
        (0..self.nrecv).try_for_each(|i| self.post_recv(i))
    }

    /// Posts receive buffer `i` (below `nrecv`) again.
    pub fn post_recv(&mut self, i: usize) -> Result<(), c_int> {
        let mut sge = ibv_sge {
            addr: self.recv_buf[i * self.slot..].as_ptr() as u64,
            length: self.slot as u32,
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

    /// The first `len` bytes of receive buffer `i` (below `nrecv`; `len`
    /// at most a slot).
    pub fn received(&self, i: usize, len: usize) -> &[u8] {
        &self.recv_buf[i * self.slot..i * self.slot + len]
    }

    /// The gather entry of the first `len` bytes of send slot `slot`.
    pub fn send_sge(&self, slot: usize, len: usize) -> ibv_sge {
        ibv_sge {
            addr: self.send_buf[slot * self.slot..].as_ptr() as u64,
            length: len as u32,
            // SAFETY: our MR.
            lkey: unsafe { (*self.send_mr).lkey },
        }
    }

    /// Posts a send request on the QP.
    ///
    /// # Safety
    /// `wr` is a valid request chain whose SGEs stay valid for the call.
    pub unsafe fn post_send(&self, wr: *mut ibv_send_wr) -> c_int {
        let mut bad: *mut ibv_send_wr = core::ptr::null_mut();
        // SAFETY: the provider's op on our QP; the request is the caller's.
        unsafe {
            match (*(*self.qp).context).ops.post_send {
                Some(f) => f(self.qp, wr, &mut bad),
                None => libc::EOPNOTSUPP,
            }
        }
    }

    /// Takes up to `BATCH` completions there are; how many.
    fn poll(&mut self, out: &mut [Completion; BATCH]) -> usize {
        let mut wc = [core::mem::MaybeUninit::<ibv_wc>::zeroed(); BATCH];
        // SAFETY: the provider's op on our CQ, into BATCH slots.
        let n = unsafe {
            match (*(*self.cq).context).ops.poll_cq {
                Some(f) => f(self.cq, BATCH as c_int, wc.as_mut_ptr().cast()),
                None => -1,
            }
        };
        let n = n.max(0) as usize;
        for (w, c) in wc[..n].iter().zip(out.iter_mut()) {
            let p = w.as_ptr();
            // SAFETY: fields the provider filled, enum ones read as integers.
            *c = unsafe {
                Completion {
                    id: (*p).wr_id,
                    status: (&raw const (*p).status).cast::<u32>().read(),
                    opcode: (&raw const (*p).opcode).cast::<u32>().read(),
                    len: (*p).byte_len as usize,
                    imm: u32::from_be((*p).imm_data),
                    flags: (*p).wc_flags,
                }
            };
        }
        n
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

    /// The channel's descriptor, for `rpoll`.
    pub fn fd(&self) -> c_int {
        // SAFETY: our completion channel, made in `new`.
        unsafe { (*self.comp).fd }
    }
}

/// Takes every completion there is on `owner`'s queues, handing each to
/// `each` with `owner`; whether any came.
pub fn drain<T>(
    owner: &mut T,
    queues: fn(&mut T) -> &mut Queues,
    mut each: impl FnMut(&mut T, &Completion),
) -> bool {
    let mut wc = [Completion::default(); BATCH];
    let mut any = false;
    loop {
        let n = queues(owner).poll(&mut wc);
        if n == 0 {
            return any;
        }
        any = true;
        for c in &wc[..n] {
            each(owner, c);
        }
    }
}

impl Drop for Queues {
    fn drop(&mut self) {
        // SAFETY: our own objects, each made once in `new` (the QP is the
        // id's, destroyed before this).
        unsafe {
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
