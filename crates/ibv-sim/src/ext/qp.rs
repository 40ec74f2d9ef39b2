//! Extended QPs: `ibv_create_qp_ex` with `IBV_QP_INIT_ATTR_SEND_OPS_FLAGS`
//! and the `ibv_wr_*` post API (perftest's default path).
//!
//! Such a QP is an ordinary sim QP whose `ibv_qp` is followed by the rest of
//! `struct ibv_qp_ex` (the [`QpEx`] member of `SimQp`), so
//! `ibv_qp_to_qp_ex` is a cast and every other verb treats it as any QP.
//!
//! `ibv_wr_start` ... `ibv_wr_complete` / `ibv_wr_abort` is a per-QP
//! critical section (a lock, as the provider's, `ibv_wr_post(3)`). In it
//! the builders record the work requests, copying scatter lists and inline
//! data at the call (as hardware copies them into the WQE; the man page
//! lets the caller reuse an inline buffer at once). `ibv_wr_complete` checks
//! the whole batch the way `ibv_post_send` checks each request (scatter
//! entries, inline size, UD address handle), so a bad batch posts nothing
//! and returns the error, as the man page says; then it hands the batch as
//! one chain of `ibv_send_wr` to the context's `ops.post_send`, the function
//! `ibv_post_send` calls, so both APIs share one data path. A builder error
//! (a setter with no request, an unsupported operation) is returned the
//! same way. The builders themselves are in `builders`.

use core::ffi::{c_int, c_uint, c_void};
use core::ptr::addr_of_mut;
use std::sync::atomic::{AtomicBool, Ordering};

use parking_lot::lock_api::RawMutex as _;
use parking_lot::Mutex;
use verbs_abi::{
    ibv_ah, ibv_context, ibv_data_buf, ibv_mw, ibv_mw_bind_info, ibv_qp, ibv_qp_cap, ibv_qp_ex,
    ibv_qp_init_attr_ex, ibv_qp_init_attr_mask, ibv_send_wr, ibv_send_wr_bind_mw, ibv_sge,
};

use crate::abi::{
    SEND_FENCE, SEND_INLINE, SEND_IP_CSUM, SEND_SIGNALED, SEND_SOLICITED, WR_ATOMIC_CMP_AND_SWP,
    WR_ATOMIC_FETCH_AND_ADD, WR_ATOMIC_WRITE, WR_BIND_MW, WR_LOCAL_INV, WR_RDMA_READ,
    WR_RDMA_WRITE, WR_RDMA_WRITE_WITH_IMM, WR_SEND, WR_SEND_WITH_IMM, WR_SEND_WITH_INV,
};
use crate::qp::ex::{Batch, Data, ExState, Wr};
use crate::qp::{self};
use crate::qp_state::{QPT_RC, QPT_UC, QPT_UD};
use crate::registry::{self, Kind};
use crate::{context, guard};
use builders::*;

mod builders;

/// `IBV_QP_INIT_ATTR_PD`.
const INIT_PD: u32 = ibv_qp_init_attr_mask::IBV_QP_INIT_ATTR_PD as u32;
/// `IBV_QP_INIT_ATTR_SEND_OPS_FLAGS`.
const INIT_SEND_OPS_FLAGS: u32 = ibv_qp_init_attr_mask::IBV_QP_INIT_ATTR_SEND_OPS_FLAGS as u32;

/// `ibv_qp_create_send_ops_flags`.
const WITH_RDMA_WRITE: u64 = 1;
const WITH_RDMA_WRITE_WITH_IMM: u64 = 1 << 1;
const WITH_SEND: u64 = 1 << 2;
const WITH_SEND_WITH_IMM: u64 = 1 << 3;
const WITH_RDMA_READ: u64 = 1 << 4;
const WITH_ATOMIC_CMP_AND_SWP: u64 = 1 << 5;
const WITH_ATOMIC_FETCH_AND_ADD: u64 = 1 << 6;
const WITH_LOCAL_INV: u64 = 1 << 7;
const WITH_BIND_MW: u64 = 1 << 8;
const WITH_SEND_WITH_INV: u64 = 1 << 9;
const WITH_ATOMIC_WRITE: u64 = 1 << 12;

/// What `wr_flags` may carry (`IBV_SEND_INLINE` aside: whether data is
/// inline is the setter's choice, not the flag's, `ibv_wr_post(3)`).
const WR_FLAGS: c_uint = SEND_FENCE | SEND_SIGNALED | SEND_SOLICITED | SEND_IP_CSUM;

/// `verbs_context.create_qp_ex`: with send ops, an extended QP; otherwise
/// the plain sim QP of `qp::create_ex`.
pub unsafe extern "C" fn sim_create_qp_ex(
    ctx: *mut ibv_context,
    attr: *mut ibv_qp_init_attr_ex,
) -> *mut ibv_qp {
    guard::ptr(|| {
        if attr.is_null() {
            return Err(libc::EINVAL);
        }
        // SAFETY: attr points at the caller's ibv_qp_init_attr_ex.
        let mask = unsafe { (*attr).comp_mask };
        let sim = context::from_ibv(ctx)?;
        // A provider without `create_qp_ex` (siw) has only what
        // libibverbs turns into `ibv_create_qp` (a PD and nothing else).
        if mask & !INIT_PD != 0 {
            crate::profile::offered(sim.dev.profile().qp_ex)?;
        }
        if mask & INIT_SEND_OPS_FLAGS == 0 {
            return qp::create_ex(ctx, attr);
        }
        // SAFETY: as above; its enum-typed fields are plain ints
        // (`verbs_abi::raw`), so any contents are a valid value.
        let mut plain = unsafe { attr.read() };
        let (qp_type, send_ops) = (plain.qp_type, plain.send_ops_flags);
        let send = WITH_SEND | WITH_SEND_WITH_IMM;
        let write = WITH_RDMA_WRITE | WITH_RDMA_WRITE_WITH_IMM;
        let atomics = if sim.dev.family.atomics {
            WITH_ATOMIC_CMP_AND_SWP | WITH_ATOMIC_FETCH_AND_ADD
        } else {
            0
        };
        // What the provider takes and its kernel then fails.
        let unexecutable = sim.dev.profile().quirks.unexecutable_ops;
        let (rc_extra, uc_extra) = if unexecutable {
            (WITH_ATOMIC_WRITE, WITH_SEND_WITH_INV)
        } else {
            (0, 0)
        };
        let allowed = match qp_type.0 {
            QPT_RC => {
                send | write
                    | WITH_RDMA_READ
                    | atomics
                    | WITH_LOCAL_INV
                    | WITH_BIND_MW
                    | WITH_SEND_WITH_INV
                    | rc_extra
            }
            QPT_UC => send | write | uc_extra,
            // As RC but for memory windows (see `datapath::check_send`).
            crate::qp_state::QPT_XRC_SEND => {
                send | write | WITH_RDMA_READ | atomics | WITH_SEND_WITH_INV
            }
            QPT_UD => send,
            _ => 0,
        };
        // TSO and atomic write are not simulated.
        if send_ops & !allowed != 0 {
            return Err(libc::EOPNOTSUPP);
        }
        // An unknown type is refused as `qp::create` does.
        if qp_type.get().is_none() {
            return Err(libc::EINVAL);
        }
        plain.comp_mask &= !INIT_SEND_OPS_FLAGS;
        let q = qp::create_ex(ctx, &mut plain)?;
        // SAFETY: as above: the granted capacities go back to the caller.
        unsafe { (*attr).cap = plain.cap };
        install(q, plain.cap, qp_type.0 == QPT_UD);
        Ok(q)
    })
}

/// Gives a new QP its builder state and fills its `ibv_qp_ex` table.
fn install(q: *mut ibv_qp, cap: ibv_qp_cap, ud: bool) {
    let st = Box::into_raw(Box::new(ExState {
        region: parking_lot::RawMutex::INIT,
        held: AtomicBool::new(false),
        batch: Mutex::new(Batch::default()),
        cap,
        ud,
    }));
    // SAFETY: q was just created by the sim and not yet returned.
    unsafe { qp::unchecked(q) }
        .ex
        .state
        .store(st, Ordering::Release);
    let x = q.cast::<ibv_qp_ex>();
    // SAFETY: x is the new QP, whose memory extends over all of ibv_qp_ex
    // (checked above); written before the program has the QP.
    unsafe {
        addr_of_mut!((*x).comp_mask).write(0);
        addr_of_mut!((*x).wr_id).write(0);
        addr_of_mut!((*x).wr_flags).write(0);
        addr_of_mut!((*x).wr_atomic_cmp_swp).write(Some(wr_atomic_cmp_swp));
        addr_of_mut!((*x).wr_atomic_fetch_add).write(Some(wr_atomic_fetch_add));
        addr_of_mut!((*x).wr_bind_mw).write(Some(wr_bind_mw));
        addr_of_mut!((*x).wr_local_inv).write(Some(wr_local_inv));
        addr_of_mut!((*x).wr_rdma_read).write(Some(wr_rdma_read));
        addr_of_mut!((*x).wr_rdma_write).write(Some(wr_rdma_write));
        addr_of_mut!((*x).wr_rdma_write_imm).write(Some(wr_rdma_write_imm));
        addr_of_mut!((*x).wr_send).write(Some(wr_send));
        addr_of_mut!((*x).wr_send_imm).write(Some(wr_send_imm));
        addr_of_mut!((*x).wr_send_inv).write(Some(wr_send_inv));
        addr_of_mut!((*x).wr_send_tso).write(Some(wr_send_tso));
        addr_of_mut!((*x).wr_set_ud_addr).write(Some(wr_set_ud_addr));
        addr_of_mut!((*x).wr_set_xrc_srqn).write(Some(wr_set_xrc_srqn));
        addr_of_mut!((*x).wr_set_inline_data).write(Some(wr_set_inline_data));
        addr_of_mut!((*x).wr_set_inline_data_list).write(Some(wr_set_inline_data_list));
        addr_of_mut!((*x).wr_set_sge).write(Some(wr_set_sge));
        addr_of_mut!((*x).wr_set_sge_list).write(Some(wr_set_sge_list));
        addr_of_mut!((*x).wr_start).write(Some(wr_start));
        addr_of_mut!((*x).wr_complete).write(Some(wr_complete));
        addr_of_mut!((*x).wr_abort).write(Some(wr_abort));
        addr_of_mut!((*x).wr_atomic_write).write(Some(wr_atomic_write));
    }
}

/// `ibv_qp_to_qp_ex`: the extended QP of a QP created with send ops, else NULL.
pub fn to_qp_ex(q: *mut ibv_qp) -> *mut ibv_qp_ex {
    match qp::get(q) {
        Ok((_, s)) if !s.ex.state.load(Ordering::Acquire).is_null() => q.cast(),
        _ => core::ptr::null_mut(),
    }
}

/// The builder state of the QP behind `x`.
fn state<'a>(x: *mut ibv_qp_ex) -> Option<&'a ExState> {
    // SAFETY: the builders are reached only through the table of a live
    // extended QP; its state lives as long as the QP.
    let q = unsafe { qp::unchecked(x.cast::<ibv_qp>()) };
    // A forked child's builders do nothing and wr_complete is EINVAL: its
    // parent's QP is not its own (`fork`).
    q.shared.born.here().ok()?;
    let p = q.ex.state.load(Ordering::Acquire);
    // SAFETY: non-null: the Box installed by `install`.
    (!p.is_null()).then(|| unsafe { &*p })
}

/// Runs `f` on the QP's batch, behind the panic boundary.
fn with_batch(x: *mut ibv_qp_ex, f: impl FnOnce(&mut Batch)) {
    guard::void(|| {
        if let Some(st) = state(x) {
            f(&mut st.batch.lock());
        }
    })
}

/// Starts a new work request of `opcode` with the QP's `wr_id` / `wr_flags`.
fn op(x: *mut ibv_qp_ex, opcode: c_int, fill: impl FnOnce(&mut Wr)) {
    // SAFETY: x is a live extended QP; the program set these fields.
    let (wr_id, flags) = unsafe { ((*x).wr_id, (*x).wr_flags) };
    with_batch(x, |b| {
        let mut w = Wr {
            wr_id,
            flags,
            opcode,
            imm: 0,
            remote_addr: 0,
            rkey: 0,
            compare_add: 0,
            swap: 0,
            ah: 0,
            remote_qpn: 0,
            remote_qkey: 0,
            data: Data::None,
            inline_sge: ibv_sge {
                addr: 0,
                length: 0,
                lkey: 0,
            },
            bind: None,
            xrc_srqn: 0,
        };
        fill(&mut w);
        b.wrs.push(w);
    })
}

/// Changes the work request being built (`EINVAL` when there is none).
fn set(x: *mut ibv_qp_ex, f: impl FnOnce(&mut Wr) -> Result<(), c_int>) {
    with_batch(x, |b| {
        let r = match b.wrs.last_mut() {
            Some(w) => f(w),
            None => Err(libc::EINVAL),
        };
        if let Err(e) = r {
            if b.err == 0 {
                b.err = e;
            }
        }
    })
}

/// Records an error for `ibv_wr_complete`.
fn fail(x: *mut ibv_qp_ex, e: c_int) {
    with_batch(x, |b| {
        if b.err == 0 {
            b.err = e;
        }
    })
}

unsafe extern "C" fn wr_start(x: *mut ibv_qp_ex) {
    guard::void(|| {
        if let Some(st) = state(x) {
            st.region.lock();
            st.held.store(true, Ordering::Relaxed);
            st.batch.lock().reset();
        }
    })
}

/// Leaves the critical section (once, whatever the program calls twice).
fn leave(st: &ExState) {
    if st.held.swap(false, Ordering::Relaxed) {
        // SAFETY: `held` says wr_start locked the region.
        unsafe { st.region.unlock() };
    }
}

unsafe extern "C" fn wr_abort(x: *mut ibv_qp_ex) {
    guard::void(|| {
        if let Some(st) = state(x) {
            st.batch.lock().reset();
            leave(st);
        }
    })
}

unsafe extern "C" fn wr_complete(x: *mut ibv_qp_ex) -> c_int {
    guard::call(libc::EIO, || {
        let Some(st) = state(x) else {
            return libc::EINVAL;
        };
        let mut b = st.batch.lock();
        // Posted inside the section, so batches reach the queue in order.
        let r = if b.err != 0 {
            b.err
        } else if let Err(e) = check(st, &b.wrs) {
            e
        } else if b.wrs.is_empty() {
            0
        } else if !sends(x) {
            // A QP not yet in RTS: the providers' wr_complete is EINVAL
            // (mlx5 installs an error completer until RTS), whatever
            // their ibv_post_send answers.
            libc::EINVAL
        } else {
            post(x.cast(), &mut b)
        };
        b.reset();
        drop(b);
        leave(st);
        r
    })
}

/// The checks `ibv_post_send` makes on each request that can fail it, made
/// on the whole batch first so that a bad batch posts nothing.
/// Whether the QP's send queue takes work requests (RTS, or the error
/// states that flush them).
fn sends(x: *mut ibv_qp_ex) -> bool {
    // SAFETY: as in `bounds`.
    let q = unsafe { qp::unchecked(x.cast::<ibv_qp>()) };
    let state = q.shared.st.lock().state;
    matches!(
        state,
        crate::qp_state::RTS | crate::qp_state::ERR | crate::qp_state::SQE
    )
}

fn check(st: &ExState, wrs: &[Wr]) -> Result<(), c_int> {
    for w in wrs {
        let ok = match &w.data {
            Data::Inline(d) => d.len() <= st.cap.max_inline_data as usize,
            Data::List(v) => v.len() <= st.cap.max_send_sge.max(1) as usize,
            Data::None | Data::Sge(_) => true,
        };
        if !ok || (st.ud && !registry::is_live(w.ah, Kind::Ah)) {
            return Err(libc::EINVAL);
        }
    }
    Ok(())
}

/// Posts the batch through the context's `post_send` as one chain.
fn post(q: *mut ibv_qp, b: &mut Batch) -> c_int {
    let Batch { wrs, chain, .. } = b;
    chain.clear();
    for w in wrs.iter_mut() {
        let Wr {
            data, inline_sge, ..
        } = w;
        let (list, n, inline): (*mut ibv_sge, usize, bool) = match data {
            Data::None => (core::ptr::null_mut(), 0, false),
            Data::Sge(e) => (e, 1, false),
            Data::List(v) if v.is_empty() => (core::ptr::null_mut(), 0, false),
            Data::List(v) => (v.as_mut_ptr(), v.len(), false),
            Data::Inline(d) if d.is_empty() => (core::ptr::null_mut(), 0, true),
            Data::Inline(d) => {
                *inline_sge = ibv_sge {
                    addr: d.as_ptr() as u64,
                    length: d.len() as u32,
                    lkey: 0,
                };
                (inline_sge, 1, true)
            }
        };
        // SAFETY: ibv_send_wr is plain data; zero is IBV_WR_RDMA_WRITE.
        let mut r: ibv_send_wr = unsafe { core::mem::zeroed() };
        r.wr_id = w.wr_id;
        r.sg_list = list;
        r.num_sge = n as c_int;
        r.send_flags = (w.flags & WR_FLAGS) | if inline { SEND_INLINE } else { 0 };
        r.imm_data = w.imm;
        r.qp_type.xrc.remote_srqn = w.xrc_srqn;
        // SAFETY: the opcode is an int-sized C enum, written as an int
        // from the ibv_wr_opcode values above; the union members are
        // plain data, each written for the opcodes that read it.
        unsafe {
            addr_of_mut!(r.opcode).cast::<c_int>().write(w.opcode);
            match w.opcode {
                WR_ATOMIC_CMP_AND_SWP | WR_ATOMIC_FETCH_AND_ADD => {
                    r.wr.atomic.remote_addr = w.remote_addr;
                    r.wr.atomic.rkey = w.rkey;
                    r.wr.atomic.compare_add = w.compare_add;
                    r.wr.atomic.swap = w.swap;
                }
                WR_BIND_MW => {
                    if let Some((mw, info)) = w.bind {
                        r.anon.bind_mw = ibv_send_wr_bind_mw {
                            mw,
                            rkey: w.rkey,
                            bind_info: info,
                        };
                    }
                }
                _ if w.ah != 0 => {
                    r.wr.ud.ah = w.ah as *mut ibv_ah;
                    r.wr.ud.remote_qpn = w.remote_qpn;
                    r.wr.ud.remote_qkey = w.remote_qkey;
                }
                _ => {
                    r.wr.rdma.remote_addr = w.remote_addr;
                    r.wr.rdma.rkey = w.rkey;
                }
            }
        }
        chain.push(r);
    }
    let n = chain.len();
    let base = chain.as_mut_ptr();
    for (i, r) in chain.iter_mut().enumerate().take(n.saturating_sub(1)) {
        // SAFETY: i + 1 < n: an element of the same (no longer resized) vector.
        r.next = unsafe { base.add(i + 1) };
    }
    // SAFETY: q is a live sim QP; its context's tables are the sim's.
    let post = unsafe { (*(*q).context).ops.post_send };
    let Some(post) = post else {
        return libc::EOPNOTSUPP;
    };
    let mut bad: *mut ibv_send_wr = core::ptr::null_mut();
    // SAFETY: the same function ibv_post_send calls, with a chain whose
    // scatter lists and inline copies (in `wrs`) outlive the call.
    unsafe { post(q, base, &mut bad) }
}
