//! The queue sizes the provider granted (`max_send_sge`, `max_recv_sge`,
//! `max_inline_data`; an SRQ's `max_sge`), for the data-path checks. Asked
//! once per queue with the real `ibv_query_qp` / `ibv_query_srq` at its
//! first checked post (whatever verb made it: `ibv_create_qp`, the table's
//! `create_qp_ex`, a provider's direct verb), then kept. No lock is held
//! across the query.

use std::collections::HashMap;
use std::ffi::c_int;
use std::mem::MaybeUninit;

use verbs_abi::{ibv_qp, ibv_qp_attr, ibv_qp_attr_mask, ibv_qp_init_attr, ibv_srq, ibv_srq_attr};

use crate::real::real_fns;
use crate::registry::lock::{mutex, Mutex};

real_fns! {
    QueryQp = fn ibv_query_qp(qp: *mut ibv_qp, attr: *mut ibv_qp_attr, attr_mask: c_int, init_attr: *mut ibv_qp_init_attr) -> c_int;
    QuerySrq = fn ibv_query_srq(srq: *mut ibv_srq, srq_attr: *mut ibv_srq_attr) -> c_int;
}

/// What a queue takes per work request.
#[derive(Clone, Copy, Debug)]
pub(super) struct Caps {
    pub send_sge: u32,
    /// A QP's receive queue, or an SRQ.
    pub recv_sge: u32,
    pub inline: u32,
}

/// By (queue address, handle, QP number): a queue freed and another made
/// at the same address is asked again (its handle or number differs).
type Key = (usize, u32, u32);

static CAPS: Mutex<Option<HashMap<Key, Caps>>> = mutex(None);

fn known(k: Key) -> Option<Caps> {
    CAPS.lock().as_ref().and_then(|m| m.get(&k)).copied()
}

fn keep(k: Key, c: Caps) -> Caps {
    CAPS.lock().get_or_insert_with(HashMap::new).insert(k, c);
    c
}

/// A zeroed C attribute struct for the query to fill.
fn zeroed<T>() -> T {
    // SAFETY: only used for plain C structs of integers and pointers, for
    // which all-zero bytes are a valid value.
    unsafe { MaybeUninit::<T>::zeroed().assume_init() }
}

/// The QP's caps, or None when the query fails (nothing is then checked).
pub(super) fn of_qp(qp: *mut ibv_qp) -> Option<Caps> {
    // SAFETY: a live QP the program is posting to.
    let k = unsafe { (qp as usize, (*qp).handle, (*qp).qp_num) };
    if let Some(c) = known(k) {
        return Some(c);
    }
    let real = QueryQp::unhooked().ok()?;
    let (mut attr, mut init) = (zeroed::<ibv_qp_attr>(), zeroed::<ibv_qp_init_attr>());
    let mask = ibv_qp_attr_mask::IBV_QP_CAP as c_int;
    if real.call(qp, &mut attr, mask, &mut init) != 0 {
        return None;
    }
    let cap = init.cap;
    Some(keep(
        k,
        Caps {
            send_sge: cap.max_send_sge,
            recv_sge: cap.max_recv_sge,
            inline: cap.max_inline_data,
        },
    ))
}

/// The SRQ's caps (`max_sge` as `recv_sge`), or None when the query fails.
pub(super) fn of_srq(srq: *mut ibv_srq) -> Option<Caps> {
    // SAFETY: a live SRQ the program is posting to.
    let k = unsafe { (srq as usize, (*srq).handle, u32::MAX) };
    if let Some(c) = known(k) {
        return Some(c);
    }
    let real = QuerySrq::unhooked().ok()?;
    let mut attr = zeroed::<ibv_srq_attr>();
    if real.call(srq, &mut attr) != 0 {
        return None;
    }
    Some(keep(
        k,
        Caps {
            send_sge: 0,
            recv_sge: attr.max_sge,
            inline: 0,
        },
    ))
}

/// `fork()`: this module's lock, held across the fork (`interpose::fork`).
pub(super) fn fork(step: crate::registry::lock::ForkStep) {
    step.apply(&CAPS);
}
