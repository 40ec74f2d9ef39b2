//! Extended CQs under the data-path checks: each CQ made by
//! `ibv_create_cq_ex` gets its `start_poll` / `next_poll` wrapped (they
//! live in the CQ, not in the context's table), so that an error
//! completion read through the poll cursor is explained as one from
//! `ibv_poll_cq` is. The originals are kept per CQ in a side table.

use std::collections::HashMap;
use std::ffi::c_int;
use std::ptr::{addr_of, addr_of_mut};

use verbs_abi::{ibv_cq_ex, ibv_poll_cq_attr};

use super::completions::{self, Failed};
use crate::guard::{boundary, Errno};
use crate::registry::lock::{mutex, Mutex};

type StartPoll = unsafe extern "C" fn(*mut ibv_cq_ex, *mut ibv_poll_cq_attr) -> c_int;
type NextPoll = unsafe extern "C" fn(*mut ibv_cq_ex) -> c_int;

/// `IBV_WC_EX_WITH_QP_NUM`: the CQ can say which QP a completion is of.
const WITH_QP_NUM: u64 = verbs_abi::ibv_create_cq_wc_flags::IBV_WC_EX_WITH_QP_NUM as u64;

#[derive(Clone, Copy)]
struct Saved {
    start: StartPoll,
    next: NextPoll,
    wc_flags: u64,
}

/// Per CQ address (a CQ made again at the same address replaces it).
static SAVED: Mutex<Option<HashMap<usize, Saved>>> = mutex(None);

/// Wraps the poll cursor of `cq`, made on a context whose table is
/// interposed, asked for `wc_flags`.
///
/// # Safety
/// `cq` is a live extended CQ just returned by the provider.
pub(super) unsafe fn patch(cq: *mut ibv_cq_ex, wc_flags: u64) {
    // SAFETY: the caller's contract: the CQ's own members.
    let (start, next) = unsafe { ((*cq).start_poll, (*cq).next_poll) };
    let (Some(start), Some(next)) = (start, next) else {
        return;
    };
    if start as usize == start_poll as StartPoll as usize {
        return;
    }
    SAVED.lock().get_or_insert_with(HashMap::new).insert(
        cq as usize,
        Saved {
            start,
            next,
            wc_flags,
        },
    );
    // SAFETY: as above; the wrappers have the members' signatures.
    unsafe {
        addr_of_mut!((*cq).start_poll).write(Some(start_poll));
        addr_of_mut!((*cq).next_poll).write(Some(next_poll));
    }
}

fn saved(cq: *mut ibv_cq_ex) -> Option<Saved> {
    SAVED.lock().as_ref()?.get(&(cq as usize)).copied()
}

/// After the cursor moved to a completion (`rc` 0): explain it if it failed.
fn seen(cq: *mut ibv_cq_ex, s: &Saved) {
    // SAFETY: the cursor is on a completion: status, wr_id and the read_*
    // members are the provider's, valid until the next move.
    unsafe {
        let status = addr_of!((*cq).status).cast::<c_int>().read();
        if status == 0 {
            return;
        }
        let vendor_err = (*cq).read_vendor_err.map_or(0, |f| f(cq));
        let qp_num = match (*cq).read_qp_num {
            Some(f) if s.wc_flags & WITH_QP_NUM != 0 => f(cq),
            _ => 0,
        };
        let e = Failed {
            qp_num,
            wr_id: (*cq).wr_id,
            status,
            vendor_err,
        };
        completions::failed((*cq).context as usize, cq as usize, &e);
    }
}

fn checked(cq: *mut ibv_cq_ex, s: &Saved) {
    let errno = Errno::save();
    boundary("ibv_start_poll", (), || seen(cq, s));
    errno.restore();
}

unsafe extern "C" fn start_poll(cq: *mut ibv_cq_ex, attr: *mut ibv_poll_cq_attr) -> c_int {
    let Some(s) = saved(cq) else {
        return libc::EINVAL;
    };
    // Inside: a provider's start_poll may move the cursor with the CQ's own
    // next_poll, which must not see the completion a second time.
    // SAFETY: the provider's own member, with the program's arguments.
    let rc = crate::thread::inside(|| unsafe { (s.start)(cq, attr) });
    if rc == 0 {
        checked(cq, &s);
    }
    rc
}

unsafe extern "C" fn next_poll(cq: *mut ibv_cq_ex) -> c_int {
    let Some(s) = saved(cq) else {
        return libc::EINVAL;
    };
    // SAFETY: the provider's own member, with the program's argument.
    let rc = unsafe { (s.next)(cq) };
    if rc == 0 && !crate::thread::nested() {
        checked(cq, &s);
    }
    rc
}

/// `fork()`: this module's lock, held across the fork (`interpose::fork`).
pub(super) fn fork(step: crate::registry::lock::ForkStep) {
    step.apply(&SAVED);
}
