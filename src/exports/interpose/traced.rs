//! The data path's trace events (with `IBV_SHIM_TRACE`): one per posted
//! work request and one per completion polled, for `ibv-shim trace
//! --per-qp` to match by QP, direction and wr_id. Binary records (words,
//! formatted by the reader): nothing formatted on the data path.

use std::ffi::c_int;
use std::ptr::addr_of;

use super::super::verbs::{CompletionEvent, PostRecvEvent, PostSendEvent};
use verbs_abi::{ibv_qp, ibv_wc, ibv_wc_opcode};

/// A trace event per posted WR (`verb(qp_num=, wr_id=)`), for `ibv-shim
/// trace --per-qp` to match with its completion: for the first `limit`
/// of the chain at most (the queue's depth: the provider fails the next
/// with ENOMEM, so a chain that loops back on itself gets as many events
/// as the queue took, not one per lap).
///
/// # Safety
/// `wr` is NULL or the head of the program's live WR chain.
pub(super) unsafe fn posts<W>(
    qp: *mut ibv_qp,
    mut wr: *mut W,
    limit: usize,
    verb: &str,
    read: fn(&W) -> (u64, *mut W),
) {
    // SAFETY: a live QP the program is posting to.
    let qp_num = unsafe { (*qp).qp_num };
    for _ in 0..limit {
        if wr.is_null() {
            return;
        }
        // SAFETY: the caller's contract.
        let (wr_id, next) = read(unsafe { &*wr });
        post(qp_num, wr_id, verb);
        wr = next;
    }
}

/// One posted WR's event (also one built with the `ibv_wr_*` API, put at
/// its `ibv_wr_complete` as `post_send`).
pub(super) fn post(qp_num: u32, wr_id: u64, verb: &str) {
    if verb == "post_recv" {
        PostRecvEvent::put(qp_num, wr_id, (), false);
    } else {
        PostSendEvent::put(qp_num, wr_id, (), false);
    }
}

/// A trace event per completion polled.
pub(super) fn completions(done: &[ibv_wc]) {
    for wc in done {
        // SAFETY: the int-sized enums of a completion the provider wrote.
        let (status, opcode) = unsafe {
            (
                addr_of!(wc.status).cast::<c_int>().read(),
                addr_of!(wc.opcode).cast::<c_int>().read(),
            )
        };
        completion(wc.qp_num, wc.wr_id, opcode, status);
    }
}

/// One completion's event (also one read through an extended CQ's cursor).
pub(super) fn completion(qp_num: u32, wr_id: u64, opcode: c_int, status: c_int) {
    let recv = opcode & ibv_wc_opcode::IBV_WC_RECV as c_int != 0;
    CompletionEvent::put(qp_num, wr_id, recv, status, status != 0);
}
