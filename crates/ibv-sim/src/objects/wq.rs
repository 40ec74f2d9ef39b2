//! Receive work queues (`ibv_create_wq` / `ibv_modify_wq` /
//! `ibv_destroy_wq`, `ibv_post_wq_recv`) and RWQ indirection tables
//! (`ibv_create_rwq_ind_table` / `ibv_destroy_rwq_ind_table`) as
//! control-path objects: the kernel's checks and state machine, use counts
//! (a WQ in a table, the PD and CQ a WQ uses are `EBUSY`). No RSS QP is
//! simulated (`ibv_create_qp_ex` refuses `IBV_QP_INIT_ATTR_IND_TABLE`), so
//! receives posted to a WQ wait there and nothing lands in them.

use core::ffi::c_int;
use core::ptr::addr_of_mut;
use std::sync::atomic::{AtomicU32, Ordering};

use parking_lot::Mutex;
use verbs_abi::{
    ibv_context, ibv_recv_wr, ibv_rwq_ind_table, ibv_rwq_ind_table_init_attr, ibv_wq, ibv_wq_attr,
    ibv_wq_init_attr, verbs_context,
};

use crate::child::{self, Users};
use crate::cq::{self, SimCq};
use crate::device::limits;
use crate::pd::{self, SimPd};
use crate::registry::{self, Kind};
use crate::{context, guard};

/// `ibv_wq_state`.
const WQS_RESET: c_int = verbs_abi::ibv_wq_state::IBV_WQS_RESET as c_int;
const WQS_RDY: c_int = verbs_abi::ibv_wq_state::IBV_WQS_RDY as c_int;
const WQS_ERR: c_int = verbs_abi::ibv_wq_state::IBV_WQS_ERR as c_int;

/// `ibv_wq_init_attr_mask` and `ibv_wq_attr_mask`.
const WQ_INIT_FLAGS: u32 = 1;
const WQ_ATTR_STATE: u32 = 1;
const WQ_ATTR_CURR_STATE: u32 = 1 << 1;
const WQ_ATTR_FLAGS: u32 = 1 << 2;
/// `ibv_wq_flags` the kernel knows (CVLAN stripping ... PCI write end padding).
const WQ_FLAGS_KNOWN: u32 = (1 << 4) - 1;

/// A receive work queue; `wq` first so `*mut ibv_wq` is its address.
#[repr(C)]
pub struct SimWq {
    pub wq: ibv_wq,
    /// RWQ indirection tables using it.
    users: Users,
    max_wr: u32,
    max_sge: u32,
    /// The state (`wq.state` shows it to the program) and posted receives.
    st: Mutex<(c_int, u32)>,
    pd: *const SimPd,
    cq: *const SimCq,
}

/// An RWQ indirection table; `table` first so its pointer is its address.
#[repr(C)]
pub struct SimRwqIndTable {
    pub table: ibv_rwq_ind_table,
    wqs: Vec<*const SimWq>,
}

static NEXT_WQN: AtomicU32 = AtomicU32::new(0x10);

pub(super) fn install(vctx: &mut verbs_context) {
    vctx.create_wq = Some(sim_create_wq);
    vctx.modify_wq = Some(sim_modify_wq);
    vctx.destroy_wq = Some(sim_destroy_wq);
    vctx.create_rwq_ind_table = Some(sim_create_rwq_ind_table);
    vctx.destroy_rwq_ind_table = Some(sim_destroy_rwq_ind_table);
}

/// `verbs_context.create_wq` (the inline `ibv_create_wq`, which then sets
/// `wq_context`, the mutex and the condition variable).
pub unsafe extern "C" fn sim_create_wq(
    ctx: *mut ibv_context,
    attr: *mut ibv_wq_init_attr,
) -> *mut ibv_wq {
    guard::ptr(|| {
        let sim = context::from_ibv(ctx)?;
        crate::profile::offered(sim.dev.profile().wq)?;
        if attr.is_null() {
            return Err(libc::EINVAL);
        }
        // SAFETY: attr points at the caller's struct, whose enum-typed
        // field is a plain int (`verbs_abi::raw`): any contents are valid.
        let a = unsafe { attr.read() };
        if a.wq_type != verbs_abi::ibv_wq_type::IBV_WQT_RQ {
            return Err(libc::EINVAL);
        }
        if a.comp_mask & !WQ_INIT_FLAGS != 0 {
            return Err(libc::EINVAL);
        }
        if a.comp_mask & WQ_INIT_FLAGS != 0 && a.create_flags & !WQ_FLAGS_KNOWN != 0 {
            return Err(libc::EOPNOTSUPP);
        }
        if a.max_wr == 0
            || a.max_wr > crate::profile::CONNECTX6.max_qp_wr as u32
            || a.max_sge > crate::profile::CONNECTX6.max_sge as u32
        {
            return Err(libc::EINVAL);
        }
        let (pctx, p) = pd::get(a.pd)?;
        let (cctx, c) = cq::get(a.cq)?;
        if !core::ptr::eq(pctx, sim) || !core::ptr::eq(cctx, sim) {
            return Err(libc::EINVAL);
        }
        let w = child::create(sim, Kind::Wq, |st| {
            if !registry::is_live(a.pd as usize, Kind::Pd)
                || !registry::is_live(a.cq as usize, Kind::Cq)
            {
                return Err(libc::EINVAL);
            }
            p.users.fetch_add(1, Ordering::Relaxed);
            c.users.fetch_add(1, Ordering::Relaxed);
            // SAFETY: ibv_wq is plain data (pointers, integers, int-sized
            // enums whose 0 is RESET / RQ, pthread objects whose all-zero
            // state is their initialiser on glibc).
            let mut wq: ibv_wq = unsafe { core::mem::zeroed() };
            wq.context = sim.ibv();
            wq.pd = a.pd;
            wq.cq = a.cq;
            wq.wq_num = NEXT_WQN.fetch_add(1, Ordering::Relaxed) & 0x00ff_ffff;
            wq.handle = st.handle();
            wq.post_recv = Some(sim_post_wq_recv);
            Ok(SimWq {
                wq,
                users: Users::default(),
                max_wr: a.max_wr,
                max_sge: a.max_sge.max(1),
                st: Mutex::new((WQS_RESET, 0)),
                pd: p,
                cq: c,
            })
        })?;
        // SAFETY: as above: the granted sizes go back to the caller.
        unsafe {
            (*attr).max_wr = a.max_wr;
            (*attr).max_sge = a.max_sge.max(1);
        }
        Ok(w.cast())
    })
}

/// The kernel's WQ state machine: RESET -> RDY, RDY -> RDY / ERR, any -> RESET, ERR -> ERR.
fn transition_ok(cur: c_int, next: c_int) -> bool {
    matches!(
        (cur, next),
        (WQS_RESET, WQS_RDY) | (WQS_RDY, WQS_RDY | WQS_ERR) | (_, WQS_RESET) | (WQS_ERR, WQS_ERR)
    )
}

/// `verbs_context.modify_wq` (the inline `ibv_modify_wq`).
pub unsafe extern "C" fn sim_modify_wq(wq: *mut ibv_wq, attr: *mut ibv_wq_attr) -> c_int {
    guard::errval(|| {
        let (_, w) = child::get(wq.cast::<SimWq>(), Kind::Wq)?;
        if attr.is_null() {
            return Err(libc::EINVAL);
        }
        // SAFETY: attr points at the caller's struct; enums read as ints.
        let (mask, next, cur, flags_mask) = unsafe {
            (
                (*attr).attr_mask,
                core::ptr::addr_of!((*attr).wq_state).cast::<c_int>().read(),
                core::ptr::addr_of!((*attr).curr_wq_state)
                    .cast::<c_int>()
                    .read(),
                (*attr).flags_mask,
            )
        };
        if mask & !(WQ_ATTR_STATE | WQ_ATTR_CURR_STATE | WQ_ATTR_FLAGS) != 0 {
            return Err(libc::EINVAL);
        }
        if mask & WQ_ATTR_FLAGS != 0 && flags_mask & !WQ_FLAGS_KNOWN != 0 {
            return Err(libc::EOPNOTSUPP);
        }
        let mut g = w.st.lock();
        if mask & WQ_ATTR_CURR_STATE != 0 && cur != g.0 {
            return Err(libc::EINVAL);
        }
        if mask & WQ_ATTR_STATE != 0 {
            if !transition_ok(g.0, next) {
                return Err(libc::EINVAL);
            }
            g.0 = next;
            if next == WQS_RESET {
                g.1 = 0;
            }
            // SAFETY: a live WQ; its state field is an int-sized enum the
            // sim writes under the WQ's lock.
            unsafe { addr_of_mut!((*wq).state).cast::<c_int>().write(next) };
        }
        Ok(())
    })
}

/// `ibv_wq.post_recv` (the inline `ibv_post_wq_recv`): the provider's
/// checks (not in RESET, scatter entries, room); the receive then waits.
unsafe extern "C" fn sim_post_wq_recv(
    wq: *mut ibv_wq,
    wr: *mut ibv_recv_wr,
    bad: *mut *mut ibv_recv_wr,
) -> c_int {
    guard::call(libc::EIO, || {
        let Ok((_, w)) = child::get(wq.cast::<SimWq>(), Kind::Wq) else {
            return libc::EINVAL;
        };
        let mut cur = wr;
        let mut g = w.st.lock();
        while !cur.is_null() {
            // SAFETY: a work request of the program's list.
            let (n, next) = unsafe { ((*cur).num_sge, (*cur).next) };
            let e = if g.0 == WQS_RESET || n < 0 || n as u32 > w.max_sge {
                libc::EINVAL
            } else if g.1 >= w.max_wr {
                libc::ENOMEM
            } else {
                0
            };
            if e != 0 {
                if !bad.is_null() {
                    // SAFETY: bad points at the program's out pointer.
                    unsafe { *bad = cur };
                }
                return e;
            }
            g.1 += 1;
            cur = next;
        }
        0
    })
}

/// `verbs_context.destroy_wq` (the inline `ibv_destroy_wq`): `EBUSY` while
/// an indirection table uses it.
pub unsafe extern "C" fn sim_destroy_wq(wq: *mut ibv_wq) -> c_int {
    guard::errval(|| {
        child::destroy(wq.cast::<SimWq>(), Kind::Wq, |w| {
            w.users.idle()?;
            // SAFETY: the WQ's PD and CQ are live: each counts it as a user.
            unsafe {
                (*w.pd).users.fetch_sub(1, Ordering::Relaxed);
                (*w.cq).users.fetch_sub(1, Ordering::Relaxed);
            }
            Ok(())
        })
    })
}

/// `verbs_context.create_rwq_ind_table` (the inline `ibv_create_rwq_ind_table`):
/// `1 << log_ind_tbl_size` live WQs of this context.
pub unsafe extern "C" fn sim_create_rwq_ind_table(
    ctx: *mut ibv_context,
    attr: *mut ibv_rwq_ind_table_init_attr,
) -> *mut ibv_rwq_ind_table {
    guard::ptr(|| {
        let sim = context::from_ibv(ctx)?;
        crate::profile::offered(sim.dev.profile().wq)?;
        if attr.is_null() {
            return Err(libc::EINVAL);
        }
        // SAFETY: attr points at the caller's struct (plain data).
        let a = unsafe { attr.read() };
        if a.comp_mask != 0
            || a.ind_tbl.is_null()
            || a.log_ind_tbl_size > limits::LOG_MAX_RWQ_IND_TABLE_SIZE
        {
            return Err(libc::EINVAL);
        }
        let n = 1usize << a.log_ind_tbl_size;
        // SAFETY: the caller passes 1 << log_ind_tbl_size WQ pointers.
        let list = unsafe { core::slice::from_raw_parts(a.ind_tbl, n) };
        let t = child::create(sim, Kind::RwqIndTable, |st| {
            let mut wqs = Vec::with_capacity(n);
            for &wq in list {
                if registry::owner(wq as usize, Kind::Wq) != Some(sim.addr()) {
                    return Err(libc::EINVAL);
                }
                wqs.push(wq as *const SimWq);
            }
            for &w in &wqs {
                // SAFETY: live WQs of this context (checked just above, under its lock).
                unsafe { &*w }.users.take();
            }
            let handle = st.handle();
            Ok(SimRwqIndTable {
                table: ibv_rwq_ind_table {
                    context: sim.ibv(),
                    ind_tbl_handle: handle as c_int,
                    ind_tbl_num: handle as c_int,
                    comp_mask: 0,
                },
                wqs,
            })
        })?;
        Ok(t.cast())
    })
}

/// `verbs_context.destroy_rwq_ind_table`: gives its WQs back (no RSS QP
/// can use a table on the sim, so it is never busy).
pub unsafe extern "C" fn sim_destroy_rwq_ind_table(t: *mut ibv_rwq_ind_table) -> c_int {
    guard::errval(|| {
        child::destroy(t.cast::<SimRwqIndTable>(), Kind::RwqIndTable, |t| {
            for &w in &t.wqs {
                // SAFETY: the table's WQs are live: each counts it as a user.
                unsafe { &*w }.users.give();
            }
            Ok(())
        })
    })
}
