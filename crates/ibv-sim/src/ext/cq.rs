//! Extended CQs: `ibv_create_cq_ex` and the poll cursor (`ibv_start_poll`,
//! `ibv_next_poll`, `ibv_end_poll`, `ibv_wc_read_*`).
//!
//! An extended CQ is an ordinary sim CQ whose `ibv_cq` is followed by the
//! rest of `struct ibv_cq_ex` (the [`CqEx`] member of `SimCq`), so
//! `ibv_cq_ex_to_cq` is the cast it is in C and `ibv_destroy_cq` destroys
//! it. The cursor takes one completion at a time from the context's
//! `ops.poll_cq`, the queue `ibv_poll_cq` reads.
//!
//! As on mlx5, a CQ is locked from a successful `start_poll` until
//! `end_poll` (not when created `IBV_CREATE_CQ_ATTR_SINGLE_THREADED`), and
//! only the readers of the fields asked for in `wc_flags` are installed
//! (`read_opcode`, `read_vendor_err` and `read_wc_flags` always are).
//! Timestamps are taken when the completion is polled: device time in ns
//! (`hca_core_clock` is 1 GHz, the clock `ibv_query_rt_values_ex` reads) and
//! wall-clock ns.

use core::ffi::{c_int, c_uint};
use core::ptr::{addr_of, addr_of_mut};
use std::sync::atomic::Ordering;

use parking_lot::lock_api::RawMutex as _;
use verbs_abi::{ibv_context, ibv_cq, ibv_cq_ex, ibv_cq_init_attr_ex, ibv_poll_cq_attr, ibv_wc};

use crate::cq::{self, CqEx};
use crate::{context, guard};

// `ibv_cq_init_attr_mask`.
crate::abi::values!(u32: ibv_cq_init_attr_mask {
    INIT_MASK_FLAGS = IBV_CQ_INIT_ATTR_MASK_FLAGS,
    INIT_MASK_PD = IBV_CQ_INIT_ATTR_MASK_PD,
});
/// `ibv_create_cq_attr_flags`.
const SINGLE_THREADED: u32 = 1;
// `ibv_create_cq_wc_flags`.
crate::abi::values!(pub u64: ibv_create_cq_wc_flags {
    WITH_BYTE_LEN = IBV_WC_EX_WITH_BYTE_LEN,
    WITH_IMM = IBV_WC_EX_WITH_IMM,
    WITH_QP_NUM = IBV_WC_EX_WITH_QP_NUM,
    WITH_SRC_QP = IBV_WC_EX_WITH_SRC_QP,
    WITH_SLID = IBV_WC_EX_WITH_SLID,
    WITH_SL = IBV_WC_EX_WITH_SL,
    WITH_DLID_PATH_BITS = IBV_WC_EX_WITH_DLID_PATH_BITS,
    WITH_COMPLETION_TIMESTAMP = IBV_WC_EX_WITH_COMPLETION_TIMESTAMP,
    WITH_COMPLETION_TIMESTAMP_WALLCLOCK = IBV_WC_EX_WITH_COMPLETION_TIMESTAMP_WALLCLOCK,
});
/// What the sim can report: the standard fields and both timestamps (no
/// CVLAN, flow tag or tag matching).
pub const SUPPORTED_WC_FLAGS: u64 = (WITH_COMPLETION_TIMESTAMP - 1)
    | WITH_COMPLETION_TIMESTAMP
    | WITH_COMPLETION_TIMESTAMP_WALLCLOCK;

/// `verbs_context.create_cq_ex` (the inline `ibv_create_cq_ex`).
pub unsafe extern "C" fn sim_create_cq_ex(
    ctx: *mut ibv_context,
    attr: *mut ibv_cq_init_attr_ex,
) -> *mut ibv_cq_ex {
    guard::ptr(|| create(ctx, attr))
}

fn create(ctx: *mut ibv_context, attr: *mut ibv_cq_init_attr_ex) -> Result<*mut ibv_cq_ex, c_int> {
    let sim = context::from_ibv(ctx)?;
    if attr.is_null() {
        return Err(libc::EINVAL);
    }
    // SAFETY: attr points at the caller's ibv_cq_init_attr_ex (plain data).
    let a = unsafe { attr.read() };
    if a.comp_mask & !(INIT_MASK_FLAGS | INIT_MASK_PD) != 0 {
        return Err(libc::EINVAL);
    }
    // As on mlx5: a parent domain of this context (a plain PD is EINVAL),
    // held (EBUSY) while the CQ lives. Its allocators are not called: the
    // sim's queues are not in the program's memory.
    let parent = if a.comp_mask & INIT_MASK_PD != 0 {
        let (pctx, p) = crate::pd::get(a.parent_domain).map_err(|_| libc::EINVAL)?;
        if !core::ptr::eq(pctx, sim) || !p.is_parent() {
            return Err(libc::EINVAL);
        }
        Some(p)
    } else {
        None
    };
    let flags = if a.comp_mask & INIT_MASK_FLAGS != 0 {
        a.flags
    } else {
        0
    };
    // IBV_CREATE_CQ_ATTR_IGNORE_OVERRUN would change the sim's overflow
    // semantics (the CQ_ERR event), so it is refused like an unknown flag.
    if flags & !SINGLE_THREADED != 0 || a.wc_flags & !SUPPORTED_WC_FLAGS != 0 {
        return Err(libc::EOPNOTSUPP);
    }
    // A provider without the extended CQ (siw): rdma-core's placeholder.
    crate::profile::offered(sim.dev.profile().cq_ex)?;
    // A device without a completion clock (rxe) refuses timestamps.
    if a.wc_flags & (WITH_COMPLETION_TIMESTAMP | WITH_COMPLETION_TIMESTAMP_WALLCLOCK) != 0 {
        crate::profile::offered(sim.dev.profile().timestamps)?;
    }
    let cqe = c_int::try_from(a.cqe).map_err(|_| libc::EINVAL)?;
    let vector = c_int::try_from(a.comp_vector).map_err(|_| libc::EINVAL)?;
    let cq = cq::create(ctx, cqe, a.cq_context, a.channel, vector)?;
    if let Some(p) = parent {
        let st = sim.lock();
        if !crate::registry::is_live(a.parent_domain as usize, crate::registry::Kind::Pd) {
            drop(st);
            let _ = cq::destroy(cq);
            return Err(libc::EINVAL);
        }
        p.users.fetch_add(1, Ordering::Relaxed);
        // SAFETY: just created, not yet seen by the program.
        let c = unsafe { cq::unchecked(cq) };
        c.parent_pd
            .store(a.parent_domain as usize, Ordering::Relaxed);
    }
    // SAFETY: just created, not yet seen by the program.
    let e = &unsafe { cq::unchecked(cq) }.ex;
    e.wc_flags.store(a.wc_flags, Ordering::Relaxed);
    e.locking
        .store(flags & SINGLE_THREADED == 0, Ordering::Relaxed);
    let x = cq.cast::<ibv_cq_ex>();
    let want = |bit: u64| a.wc_flags & bit != 0;
    // SAFETY: x is the new CQ, whose memory extends over all of ibv_cq_ex
    // (checked above); the entries are written before the program has it.
    // read_opcode is declared with the C enum as its return type, which is
    // an int in the ABI: the function returning c_int is stored in its place.
    unsafe {
        addr_of_mut!((*x).comp_mask).write(0);
        addr_of_mut!((*x).wr_id).write(0);
        addr_of_mut!((*x).start_poll).write(Some(start_poll));
        addr_of_mut!((*x).next_poll).write(Some(next_poll));
        addr_of_mut!((*x).end_poll).write(Some(end_poll));
        addr_of_mut!((*x).read_opcode)
            .cast::<Option<unsafe extern "C" fn(*mut ibv_cq_ex) -> c_int>>()
            .write(Some(read_opcode));
        addr_of_mut!((*x).read_vendor_err).write(Some(read_vendor_err));
        addr_of_mut!((*x).read_wc_flags).write(Some(read_wc_flags));
        if want(WITH_BYTE_LEN) {
            addr_of_mut!((*x).read_byte_len).write(Some(read_byte_len));
        }
        if want(WITH_IMM) {
            addr_of_mut!((*x).read_imm_data).write(Some(read_imm_data));
        }
        if want(WITH_QP_NUM) {
            addr_of_mut!((*x).read_qp_num).write(Some(read_qp_num));
        }
        if want(WITH_SRC_QP) {
            addr_of_mut!((*x).read_src_qp).write(Some(read_src_qp));
        }
        if want(WITH_SLID) {
            addr_of_mut!((*x).read_slid).write(Some(read_slid));
        }
        if want(WITH_SL) {
            addr_of_mut!((*x).read_sl).write(Some(read_sl));
        }
        if want(WITH_DLID_PATH_BITS) {
            addr_of_mut!((*x).read_dlid_path_bits).write(Some(read_dlid_path_bits));
        }
        if want(WITH_COMPLETION_TIMESTAMP) {
            addr_of_mut!((*x).read_completion_ts).write(Some(read_completion_ts));
        }
        if want(WITH_COMPLETION_TIMESTAMP_WALLCLOCK) {
            addr_of_mut!((*x).read_completion_wallclock_ns)
                .write(Some(read_completion_wallclock_ns));
        }
    }
    Ok(x)
}

/// The tail of the sim CQ behind an `ibv_cq_ex *`.
///
/// # Safety
/// `cq` must be a live CQ created by `create` (the poll functions are
/// reached only through its own table).
unsafe fn tail<'a>(cq: *mut ibv_cq_ex) -> &'a CqEx {
    // SAFETY: guaranteed by the caller.
    unsafe { &cq::unchecked(cq.cast::<ibv_cq>()).ex }
}

fn now_ns(clock: libc::clockid_t) -> u64 {
    let mut t = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: plain system call into a local.
    unsafe { libc::clock_gettime(clock, &mut t) };
    (t.tv_sec as u64)
        .wrapping_mul(1_000_000_000)
        .wrapping_add(t.tv_nsec as u64)
}

/// Moves the cursor to the next completion: 0, `ENOENT` when the CQ is
/// empty, or the error `poll_cq` reported.
fn advance(cq: *mut ibv_cq_ex) -> c_int {
    let base = cq.cast::<ibv_cq>();
    // SAFETY: a live sim CQ; its context is a sim context (possibly closed,
    // whose tables stay readable).
    let (e, poll) = unsafe { (tail(cq), (*(*base).context).ops.poll_cq) };
    let Some(poll) = poll else {
        return libc::EOPNOTSUPP;
    };
    // SAFETY: the same function ibv_poll_cq calls, with room for one completion.
    let n = unsafe { poll(base, 1, e.cur.get()) };
    match n {
        1 => {
            let flags = e.wc_flags.load(Ordering::Relaxed);
            if flags & (WITH_COMPLETION_TIMESTAMP | WITH_COMPLETION_TIMESTAMP_WALLCLOCK) != 0 {
                let ts = (now_ns(libc::CLOCK_MONOTONIC), now_ns(libc::CLOCK_REALTIME));
                // SAFETY: the cursor belongs to the poller (lock or single thread).
                unsafe { e.ts.get().write(ts) };
            }
            // SAFETY: cur was just written by poll_cq; status is an int-sized
            // C enum; the fields are the program's to read after this call.
            unsafe {
                let w = e.cur.get();
                let status = addr_of!((*w).status).cast::<c_int>().read();
                addr_of_mut!((*cq).status).cast::<c_int>().write(status);
                addr_of_mut!((*cq).wr_id).write((*w).wr_id);
            }
            0
        }
        0 => libc::ENOENT,
        n if n < 0 => -n,
        _ => libc::EIO,
    }
}

fn release(e: &CqEx) {
    if e.held.swap(false, Ordering::Relaxed) {
        // SAFETY: `held` says this CQ's lock is locked (by start_poll).
        unsafe { e.lock.unlock() };
    }
}

/// `ibv_cq_ex.start_poll`.
unsafe extern "C" fn start_poll(cq: *mut ibv_cq_ex, attr: *mut ibv_poll_cq_attr) -> c_int {
    guard::call(libc::EIO, || {
        // SAFETY: attr, when given, points at the caller's struct.
        if !attr.is_null() && unsafe { (*attr).comp_mask } != 0 {
            return libc::EINVAL;
        }
        // SAFETY: reached through this CQ's own table.
        if let Err(e) = unsafe { cq::unchecked(cq.cast::<ibv_cq>()) }
            .shared
            .born
            .here()
        {
            // A forked child's poll of its parent's CQ (`fork`).
            return e;
        }
        // SAFETY: as above.
        let e = unsafe { tail(cq) };
        if e.locking.load(Ordering::Relaxed) {
            e.lock.lock();
            e.held.store(true, Ordering::Relaxed);
        }
        let r = advance(cq);
        // Per verbs.h, end_poll must not follow a failed start_poll.
        if r != 0 {
            release(e);
        }
        r
    })
}

/// `ibv_cq_ex.next_poll`.
unsafe extern "C" fn next_poll(cq: *mut ibv_cq_ex) -> c_int {
    guard::call(libc::EIO, || advance(cq))
}

/// `ibv_cq_ex.end_poll`.
unsafe extern "C" fn end_poll(cq: *mut ibv_cq_ex) {
    // SAFETY: reached through this CQ's own table.
    guard::void(|| release(unsafe { tail(cq) }))
}

// The readers copy one field of the cursor: nothing in them can panic, so
// they carry no boundary. Each is reached only through the CQ's own table.

/// The cursor's completion.
///
/// # Safety
/// As [`tail`].
unsafe fn cur<'a>(cq: *mut ibv_cq_ex) -> &'a ibv_wc {
    // SAFETY: guaranteed by the caller; the cursor is the poller's.
    unsafe { &*tail(cq).cur.get() }
}

unsafe extern "C" fn read_opcode(cq: *mut ibv_cq_ex) -> c_int {
    // SAFETY: see above; the opcode is an int-sized C enum.
    unsafe { addr_of!(cur(cq).opcode).cast::<c_int>().read() }
}

unsafe extern "C" fn read_vendor_err(cq: *mut ibv_cq_ex) -> u32 {
    // SAFETY: see above.
    unsafe { cur(cq).vendor_err }
}

unsafe extern "C" fn read_byte_len(cq: *mut ibv_cq_ex) -> u32 {
    // SAFETY: see above.
    unsafe { cur(cq).byte_len }
}

unsafe extern "C" fn read_imm_data(cq: *mut ibv_cq_ex) -> u32 {
    // SAFETY: see above.
    unsafe { cur(cq).imm_data }
}

unsafe extern "C" fn read_qp_num(cq: *mut ibv_cq_ex) -> u32 {
    // SAFETY: see above.
    unsafe { cur(cq).qp_num }
}

unsafe extern "C" fn read_src_qp(cq: *mut ibv_cq_ex) -> u32 {
    // SAFETY: see above.
    unsafe { cur(cq).src_qp }
}

unsafe extern "C" fn read_wc_flags(cq: *mut ibv_cq_ex) -> c_uint {
    // SAFETY: see above.
    unsafe { cur(cq).wc_flags }
}

unsafe extern "C" fn read_slid(cq: *mut ibv_cq_ex) -> u32 {
    // SAFETY: see above.
    u32::from(unsafe { cur(cq).slid })
}

unsafe extern "C" fn read_sl(cq: *mut ibv_cq_ex) -> u8 {
    // SAFETY: see above.
    unsafe { cur(cq).sl }
}

unsafe extern "C" fn read_dlid_path_bits(cq: *mut ibv_cq_ex) -> u8 {
    // SAFETY: see above.
    unsafe { cur(cq).dlid_path_bits }
}

unsafe extern "C" fn read_completion_ts(cq: *mut ibv_cq_ex) -> u64 {
    // SAFETY: see above.
    unsafe { (*tail(cq).ts.get()).0 }
}

unsafe extern "C" fn read_completion_wallclock_ns(cq: *mut ibv_cq_ex) -> u64 {
    // SAFETY: see above.
    unsafe { (*tail(cq).ts.get()).1 }
}
