//! Extended CQs: each CQ made by `ibv_create_cq_ex` gets its `start_poll`
//! / `next_poll` wrapped (they live in the CQ, not in the context's table)
//! when the data-path checks, a trace or a `wc` fault rule is on, so that
//! a completion read through the poll cursor is treated as one from
//! `ibv_poll_cq` is: a `wc` rule can change its status (`cq_ex->status`),
//! an error is explained, and it is a trace event. The originals are kept
//! per CQ in a side table.

use std::collections::HashMap;
use std::ffi::c_int;
use std::ptr::addr_of_mut;

use verbs_abi::{ibv_cq_ex, ibv_poll_cq_attr};

use super::completions::{self, Failed};
use crate::addr::Addr;
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

/// After the cursor moved to a completion (`rc` 0) at the program's call
/// `site`: fault it, explain it if it failed, trace it.
fn seen(cq: *mut ibv_cq_ex, s: &Saved, site: usize) {
    // SAFETY: the cursor is on a completion: status, wr_id and the read_*
    // members are the provider's, valid until the next move; status is the
    // int-sized C enum, which the program reads after this returns.
    unsafe {
        let status_at = addr_of_mut!((*cq).status).cast::<c_int>();
        if let Some(injected) = crate::faults::completion_status(site) {
            status_at.write(injected as c_int);
        }
        let status = status_at.read();
        let qp_num = || match (*cq).read_qp_num {
            Some(f) if s.wc_flags & WITH_QP_NUM != 0 => f(cq),
            _ => 0,
        };
        if crate::checks::inflight() {
            let opcode = (*cq).read_opcode.map_or(0, |f| {
                std::mem::transmute::<
                    unsafe extern "C" fn(*mut ibv_cq_ex) -> verbs_abi::ibv_wc_opcode,
                    unsafe extern "C" fn(*mut ibv_cq_ex) -> c_int,
                >(f)(cq)
            });
            let qpn = (s.wc_flags & WITH_QP_NUM != 0).then(qp_num);
            super::inflight::completed(
                (*cq).context as usize,
                cq as usize,
                qpn,
                (*cq).wr_id,
                status,
                opcode,
            );
        }
        if status != 0 && crate::checks::datapath() {
            let e = Failed {
                qp_num: qp_num(),
                wr_id: (*cq).wr_id,
                status,
                vendor_err: (*cq).read_vendor_err.map_or(0, |f| f(cq)),
            };
            // An extended CQ is its CQ, at the same address (`ibv_cq_ex_to_cq`).
            completions::failed(Addr::of((*cq).context), Addr::new(cq as usize), &e);
        }
        if crate::trace::wanted() {
            // The opcode read as the int it is in C (a provider's value
            // outside the Rust enum must not be taken as one).
            let opcode = (*cq).read_opcode.map_or(0, |f| {
                std::mem::transmute::<
                    unsafe extern "C" fn(*mut ibv_cq_ex) -> verbs_abi::ibv_wc_opcode,
                    unsafe extern "C" fn(*mut ibv_cq_ex) -> c_int,
                >(f)(cq)
            });
            super::traced::completion(qp_num(), (*cq).wr_id, opcode, status);
        }
    }
}

/// After a poll of the cursor that returned `rc`.
fn checked(cq: *mut ibv_cq_ex, s: &Saved, rc: c_int, site: usize, verb: &'static str) {
    let errno = Errno::save();
    boundary(verb, (), || match rc {
        0 => seen(cq, s, site),
        libc::ENOENT if crate::checks::datapath() => {
            // SAFETY: a live CQ the program polls.
            completions::drained(Addr::of(unsafe { (*cq).context }))
        }
        _ => {}
    });
    errno.restore();
}

unsafe extern "C" fn start_poll(cq: *mut ibv_cq_ex, attr: *mut ibv_poll_cq_attr) -> c_int {
    let site = crate::caller!();
    let Some(s) = saved(cq) else {
        return libc::EINVAL;
    };
    // Inside: a provider's cursor may move with the CQ's own next_poll or
    // poll through the context's `poll_cq` (the sim does), which must not
    // see the completion a second time.
    // SAFETY: the provider's own member, with the program's arguments.
    let rc = crate::thread::inside(|| unsafe { (s.start)(cq, attr) });
    if !crate::thread::nested() {
        checked(cq, &s, rc, site, "ibv_start_poll");
    }
    rc
}

unsafe extern "C" fn next_poll(cq: *mut ibv_cq_ex) -> c_int {
    let site = crate::caller!();
    let Some(s) = saved(cq) else {
        return libc::EINVAL;
    };
    // SAFETY: the provider's own member, with the program's argument.
    let rc = crate::thread::inside(|| unsafe { (s.next)(cq) });
    if !crate::thread::nested() {
        checked(cq, &s, rc, site, "ibv_next_poll");
    }
    rc
}

/// `fork()`: this module's lock, held across the fork (`interpose::fork`).
pub(super) fn fork(step: crate::registry::lock::ForkStep) {
    step.apply(&SAVED);
}
