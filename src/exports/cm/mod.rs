//! librdmacm's exports the shim tracks (`crate::cm`): each is guard ->
//! forward (`cm::forward`: an `rdma_*` call librdmacm makes itself is only
//! forwarded) -> track -> record, its declaration's (`decl.rs`, the
//! `Rdmacm` section). The other declared `rdma_*` calls are generated
//! whole; rsockets and the getters are trampolines. Results and errno are
//! the real library's; the only calls refused are the two that would make
//! librdmacm touch freed memory (a second ack of an event, a second
//! `rdma_destroy_qp` of an id), as the verbs' use after destroy is.

use std::ffi::{c_char, c_int, c_void};
use std::mem::offset_of;

use rdmacm_abi::{rdma_addrinfo, rdma_cm_event, rdma_cm_id, rdma_conn_param, rdma_event_channel};
use verbs_abi::{ibv_context, ibv_pd, ibv_qp, ibv_qp_init_attr, ibv_qp_init_attr_ex};

use super::Call;
use crate::cm::{self, ListKind};
use crate::guard::{MinusOne, Refused};
use crate::real::slots::*;

mod diagnose;

/// The shape of every `rdma_*` export: when librdmacm is calling its own
/// export (`thread::cm_nested`) it only forwards; otherwise `check` may
/// refuse it, the forwarded call runs marked as inside librdmacm, and
/// `log` gets the result: the export's tracking and its record. No lock is
/// held while `forward` runs.
#[inline(always)]
pub fn forward<R>(
    check: impl FnOnce() -> Result<(), Refused>,
    forward: impl FnOnce() -> R,
    log: impl FnOnce(&Call, &R),
) -> Result<R, Refused> {
    super::forward_marked(
        crate::thread::cm_nested(),
        crate::thread::cm_inside,
        check,
        forward,
        log,
    )
}

/// Is this call librdmacm's own (nested in a forwarded `rdma_*` call)?
#[inline(always)]
pub fn nested() -> bool {
    crate::thread::cm_nested()
}

/// A word of a live id the program passed (`field`: its offset), read
/// without risking a fault: 0 when NULL or unreadable.
fn id_word(id: *mut rdma_cm_id, field: usize) -> usize {
    if id.is_null() {
        return 0;
    }
    super::read_word(id as usize + field).unwrap_or(0)
}

const QP: usize = offset_of!(rdma_cm_id, qp);
const CHANNEL: usize = offset_of!(rdma_cm_id, channel);

/// The verbs objects an id holds (read without risking a fault).
fn id_verbs(id: *mut rdma_cm_id) -> cm::IdVerbs {
    let w = |field| id_word(id, field);
    cm::IdVerbs {
        pd: w(offset_of!(rdma_cm_id, pd)),
        send_cq: w(offset_of!(rdma_cm_id, send_cq)),
        recv_cq: w(offset_of!(rdma_cm_id, recv_cq)),
        send_cq_channel: w(offset_of!(rdma_cm_id, send_cq_channel)),
        recv_cq_channel: w(offset_of!(rdma_cm_id, recv_cq_channel)),
        srq: w(offset_of!(rdma_cm_id, srq)),
    }
}

/// What a call that returned `rc` wrote through the out pointer `out`
/// (NULL when it failed or `out` is NULL).
///
/// # Safety
/// `out` is NULL or the out pointer of a call that wrote it when it
/// returned 0 (the C contract of `rdma_create_id` and the like).
unsafe fn written<T>(rc: c_int, out: *mut *mut T) -> *mut T {
    if rc != 0 || out.is_null() {
        return std::ptr::null_mut();
    }
    // SAFETY: the caller's contract.
    unsafe { *out }
}

/// The id the real library just made: its channel, port space, QP and
/// what was made with the QP.
///
/// # Safety
/// `id` is NULL or an id librdmacm just returned.
unsafe fn made_id(id: *mut rdma_cm_id, site: usize, via: &'static str) {
    if id.is_null() {
        return;
    }
    // SAFETY: the caller's contract: a live id of librdmacm's.
    let (ch, ps, qp) = unsafe { ((*id).channel, (*id).ps, (*id).qp) };
    let verbs = if qp.is_null() {
        cm::IdVerbs::default()
    } else {
        id_verbs(id)
    };
    cm::id_made(id as usize, ch as usize, ps, qp as usize, verbs, site, via);
}

/// The id a create wrote through `out` when it returned `rc` (its
/// tracking, `via` the create, and the record's extra word).
fn made_through(
    out: *mut *mut rdma_cm_id,
    site: usize,
    via: &'static str,
) -> impl FnOnce(&c_int) -> (*mut rdma_cm_id,) {
    move |&rc| {
        // SAFETY: `out` is the program's out pointer, written on success.
        let made = unsafe { written(rc, out) };
        // SAFETY: an id librdmacm just returned (or NULL).
        unsafe { made_id(made, site, via) };
        (made,)
    }
}

/// A destroyed id leaves the tracking.
fn id_gone(id: *mut rdma_cm_id) {
    cm::with(|s| {
        s.ids.remove(&(id as usize));
        s.qp_destroyed.remove(&(id as usize));
    });
}

/// `rdma_create_event_channel(3)`.
#[no_mangle]
pub unsafe extern "C" fn rdma_create_event_channel() -> *mut rdma_event_channel {
    let caller = crate::caller!();
    let made = |&ch: &*mut rdma_event_channel| {
        if !ch.is_null() {
            // SAFETY: a channel librdmacm just returned.
            cm::channel_made(ch as usize, unsafe { (*ch).fd }, caller);
        }
    };
    // SAFETY: no arguments.
    RdmaCreateEventChannel::export(|| unsafe {
        RdmaCreateEventChannel::forward_then(|| Ok(()), made)
    })
}

/// `rdma_destroy_event_channel(3)`.
#[no_mangle]
pub unsafe extern "C" fn rdma_destroy_event_channel(channel: *mut rdma_event_channel) {
    RdmaDestroyEventChannel::export(|| {
        let token = if nested() {
            0
        } else {
            diagnose::before_destroy("rdma_destroy_event_channel", channel as usize, false)
        };
        let gone = |_: &()| {
            cm::with(|s| s.channels.remove(&(channel as usize)));
        };
        // SAFETY: the program's argument.
        let r = unsafe { RdmaDestroyEventChannel::forward_then(|| Ok(()), gone, channel) };
        diagnose::destroy_done(token);
        r
    })
}

/// `rdma_create_id(3)`.
#[no_mangle]
pub unsafe extern "C" fn rdma_create_id(
    channel: *mut rdma_event_channel,
    id: *mut *mut rdma_cm_id,
    context: *mut c_void,
    ps: u32,
) -> c_int {
    let caller = crate::caller!();
    // SAFETY: the program's arguments.
    RdmaCreateId::export(|| unsafe {
        RdmaCreateId::forward_with(
            || Ok(()),
            made_through(id, caller, "rdma_create_id"),
            channel,
            id,
            context,
            ps,
        )
    })
}

/// `rdma_destroy_id(3)`.
#[no_mangle]
pub unsafe extern "C" fn rdma_destroy_id(id: *mut rdma_cm_id) -> c_int {
    let caller = crate::caller!();
    RdmaDestroyId::export(|| {
        let token = if nested() {
            0
        } else {
            diagnose::id_with_qp(id as usize, id_word(id, QP), caller);
            diagnose::before_destroy("rdma_destroy_id", id as usize, true)
        };
        let gone = |&rc: &c_int| {
            if rc == 0 {
                id_gone(id);
            }
        };
        // SAFETY: the program's argument.
        let r = unsafe { RdmaDestroyId::forward_then(|| Ok(()), gone, id) };
        diagnose::destroy_done(token);
        r
    })
}

/// `rdma_get_cm_event(3)`.
#[no_mangle]
pub unsafe extern "C" fn rdma_get_cm_event(
    channel: *mut rdma_event_channel,
    event: *mut *mut rdma_cm_event,
) -> c_int {
    let caller = crate::caller!();
    RdmaGetCmEvent::export(|| {
        let real = RdmaGetCmEvent::get()?;
        forward(
            || Ok(()),
            // SAFETY: the program's arguments.
            || unsafe { real.call(channel, event) },
            |call, &rc| {
                let got = if rc == 0 && !event.is_null() {
                    // SAFETY: on success `*event` is the event (the C contract).
                    unsafe { *event }
                } else {
                    std::ptr::null_mut()
                };
                let (mut kind, mut cm_id) = (-1, std::ptr::null_mut());
                if !got.is_null() {
                    // SAFETY: an event librdmacm just returned.
                    let fetched = unsafe { (*got).event };
                    if let Some(r) = crate::faults::cm_event(fetched, caller) {
                        // SAFETY: that event, not yet seen by the program:
                        // a `cm_event` rule gives it the failure instead
                        // (librdmacm's ack does not look at the type).
                        unsafe {
                            (*got).event = r.with;
                            (*got).status = r.reason;
                        }
                    }
                    // SAFETY: as above.
                    let e = unsafe { &*got };
                    kind = e.event as c_int;
                    cm_id = e.id;
                    cm::event_fetched(got as usize, e, channel as usize, caller);
                    if e.event == rdmacm_abi::RDMA_CM_EVENT_CONNECT_REQUEST && !e.id.is_null() {
                        // SAFETY: the new id librdmacm just made.
                        cm::set_port_space(e.id as usize, unsafe { (*e.id).ps });
                    }
                }
                // SAFETY: the program's arguments and the real result.
                unsafe { RdmaGetCmEvent::done(call, channel, event, got, cm_id, kind, rc, rc != 0) }
            },
        )
        .map(MinusOne)
    })
}

/// `rdma_ack_cm_event(3)`: a second ack of an event refused (librdmacm
/// would free it twice).
#[no_mangle]
pub unsafe extern "C" fn rdma_ack_cm_event(event: *mut rdma_cm_event) -> c_int {
    let caller = crate::caller!();
    let check = || {
        if diagnose::ack(event as usize, caller) {
            Ok(())
        } else {
            crate::guard::set_errno(libc::EINVAL);
            Err(Refused(libc::EINVAL))
        }
    };
    // SAFETY: the program's argument.
    RdmaAckCmEvent::export(|| unsafe { RdmaAckCmEvent::forward(check, event) })
}

/// The QP an id has after a create that returned `rc`, as the id's
/// tracking and the record's extra word.
fn qp_made(id: *mut rdma_cm_id) -> impl FnOnce(&c_int) -> (*mut ibv_qp,) {
    move |&rc| {
        let qp = if rc == 0 { id_word(id, QP) } else { 0 };
        let verbs = if qp != 0 {
            id_verbs(id)
        } else {
            cm::IdVerbs::default()
        };
        cm::set_qp(id as usize, qp, verbs);
        (qp as *mut ibv_qp,)
    }
}

/// `rdma_create_qp(3)`.
#[no_mangle]
pub unsafe extern "C" fn rdma_create_qp(
    id: *mut rdma_cm_id,
    pd: *mut ibv_pd,
    qp_init_attr: *mut ibv_qp_init_attr,
) -> c_int {
    // SAFETY: the program's arguments.
    RdmaCreateQp::export(|| unsafe {
        RdmaCreateQp::forward_with(|| Ok(()), qp_made(id), id, pd, qp_init_attr)
    })
}

/// `rdma_create_qp_ex(3)`.
#[no_mangle]
pub unsafe extern "C" fn rdma_create_qp_ex(
    id: *mut rdma_cm_id,
    qp_init_attr: *mut ibv_qp_init_attr_ex,
) -> c_int {
    // SAFETY: the program's arguments.
    RdmaCreateQpEx::export(|| unsafe {
        RdmaCreateQpEx::forward_with(|| Ok(()), qp_made(id), id, qp_init_attr)
    })
}

/// `rdma_destroy_qp(3)`: a second destroy of an id's QP refused
/// (librdmacm would destroy it twice).
#[no_mangle]
pub unsafe extern "C" fn rdma_destroy_qp(id: *mut rdma_cm_id) {
    let caller = crate::caller!();
    let check = || {
        if diagnose::destroy_qp(id as usize, id_word(id, QP), caller) {
            Ok(())
        } else {
            Err(Refused(libc::EINVAL))
        }
    };
    // SAFETY: the program's argument.
    RdmaDestroyQp::export(|| unsafe { RdmaDestroyQp::forward(check, id) })
}

/// `rdma_create_ep(3)`.
#[no_mangle]
pub unsafe extern "C" fn rdma_create_ep(
    id: *mut *mut rdma_cm_id,
    res: *mut rdma_addrinfo,
    pd: *mut ibv_pd,
    qp_init_attr: *mut ibv_qp_init_attr,
) -> c_int {
    let caller = crate::caller!();
    // SAFETY: the program's arguments.
    RdmaCreateEp::export(|| unsafe {
        RdmaCreateEp::forward_with(
            || Ok(()),
            made_through(id, caller, "rdma_create_ep"),
            id,
            res,
            pd,
            qp_init_attr,
        )
    })
}

/// `rdma_destroy_ep(3)`: the id's QP, SRQ and CQs, then the id.
#[no_mangle]
pub unsafe extern "C" fn rdma_destroy_ep(id: *mut rdma_cm_id) {
    RdmaDestroyEp::export(|| {
        let token = if nested() {
            0
        } else {
            diagnose::before_destroy("rdma_destroy_ep", id as usize, true)
        };
        // SAFETY: the program's argument.
        let r = unsafe { RdmaDestroyEp::forward_then(|| Ok(()), |_| id_gone(id), id) };
        diagnose::destroy_done(token);
        r
    })
}

/// `rdma_get_request(3)`: a synchronous listener's next connection.
#[no_mangle]
pub unsafe extern "C" fn rdma_get_request(
    listen: *mut rdma_cm_id,
    id: *mut *mut rdma_cm_id,
) -> c_int {
    let caller = crate::caller!();
    let made = move |rc: &c_int| {
        let (made,) = made_through(id, caller, "rdma_get_request")(rc);
        if !made.is_null() {
            cm::with(|s| {
                if let Some(i) = s.ids.get_mut(&(made as usize)) {
                    i.listener = listen as usize;
                    i.state = "CONNECT_REQUEST";
                }
            });
        }
        (made,)
    };
    // SAFETY: the program's arguments.
    RdmaGetRequest::export(|| unsafe { RdmaGetRequest::forward_with(|| Ok(()), made, listen, id) })
}

/// `rdma_migrate_id(3)`.
#[no_mangle]
pub unsafe extern "C" fn rdma_migrate_id(
    id: *mut rdma_cm_id,
    channel: *mut rdma_event_channel,
) -> c_int {
    let moved = |&rc: &c_int| {
        if rc == 0 {
            cm::migrated(id as usize, id_word(id, CHANNEL));
        }
    };
    // SAFETY: the program's arguments.
    RdmaMigrateId::export(|| unsafe { RdmaMigrateId::forward_then(|| Ok(()), moved, id, channel) })
}

/// `rdma_listen(3)`.
#[no_mangle]
pub unsafe extern "C" fn rdma_listen(id: *mut rdma_cm_id, backlog: c_int) -> c_int {
    let listening = |&rc: &c_int| {
        if rc == 0 {
            cm::set_state(id as usize, "LISTENING", None);
        }
    };
    // SAFETY: the program's arguments.
    RdmaListen::export(|| unsafe { RdmaListen::forward_then(|| Ok(()), listening, id, backlog) })
}

/// A synchronous id (no channel of the program's: librdmacm waits for its
/// events itself) is connected when connect or accept returns 0.
fn connected_if_sync(id: *mut rdma_cm_id) -> impl FnOnce(&c_int) {
    move |&rc| {
        let sync = rc == 0
            && cm::with(|s| {
                s.ids
                    .get(&(id as usize))
                    .is_some_and(|i| !s.channels.contains_key(&i.channel))
            });
        if sync {
            cm::set_state(id as usize, "ESTABLISHED", Some(true));
        }
    }
}

/// `rdma_connect(3)`.
#[no_mangle]
pub unsafe extern "C" fn rdma_connect(
    id: *mut rdma_cm_id,
    conn_param: *mut rdma_conn_param,
) -> c_int {
    // SAFETY: the program's arguments.
    RdmaConnect::export(|| unsafe {
        RdmaConnect::forward_then(|| Ok(()), connected_if_sync(id), id, conn_param)
    })
}

/// `rdma_accept(3)`.
#[no_mangle]
pub unsafe extern "C" fn rdma_accept(
    id: *mut rdma_cm_id,
    conn_param: *mut rdma_conn_param,
) -> c_int {
    // SAFETY: the program's arguments.
    RdmaAccept::export(|| unsafe {
        RdmaAccept::forward_then(|| Ok(()), connected_if_sync(id), id, conn_param)
    })
}

/// `rdma_disconnect(3)`: one of an id that is not connected is said.
#[no_mangle]
pub unsafe extern "C" fn rdma_disconnect(id: *mut rdma_cm_id) -> c_int {
    let caller = crate::caller!();
    let check = || {
        diagnose::disconnect(id as usize, caller);
        Ok(())
    };
    // SAFETY: the program's argument.
    RdmaDisconnect::export(|| unsafe { RdmaDisconnect::forward(check, id) })
}

/// `rdma_getaddrinfo(3)`.
#[no_mangle]
pub unsafe extern "C" fn rdma_getaddrinfo(
    node: *const c_char,
    service: *const c_char,
    hints: *const rdma_addrinfo,
    res: *mut *mut rdma_addrinfo,
) -> c_int {
    let caller = crate::caller!();
    let made = move |&rc: &c_int| {
        // SAFETY: `res` is the program's out pointer, written on success.
        let list = unsafe { written(rc, res) };
        if !list.is_null() {
            cm::list_made(list as usize, ListKind::AddrInfo, caller);
        }
        (list,)
    };
    // SAFETY: the program's arguments.
    RdmaGetaddrinfo::export(|| unsafe {
        RdmaGetaddrinfo::forward_with(|| Ok(()), made, node, service, hints, res)
    })
}

/// `rdma_freeaddrinfo(3)`.
#[no_mangle]
pub unsafe extern "C" fn rdma_freeaddrinfo(res: *mut rdma_addrinfo) {
    let freed = |_: &()| cm::list_freed(res as usize);
    // SAFETY: the program's argument.
    RdmaFreeaddrinfo::export(|| unsafe { RdmaFreeaddrinfo::forward_then(|| Ok(()), freed, res) })
}

/// `rdma_get_devices(3)`.
#[no_mangle]
pub unsafe extern "C" fn rdma_get_devices(num_devices: *mut c_int) -> *mut *mut ibv_context {
    let caller = crate::caller!();
    let made = |&list: &*mut *mut ibv_context| {
        if !list.is_null() {
            cm::list_made(list as usize, ListKind::Devices, caller);
        }
    };
    // SAFETY: the program's argument.
    RdmaGetDevices::export(|| unsafe { RdmaGetDevices::forward_then(|| Ok(()), made, num_devices) })
}

/// `rdma_free_devices(3)`.
#[no_mangle]
pub unsafe extern "C" fn rdma_free_devices(list: *mut *mut ibv_context) {
    let freed = |_: &()| cm::list_freed(list as usize);
    // SAFETY: the program's argument.
    RdmaFreeDevices::export(|| unsafe { RdmaFreeDevices::forward_then(|| Ok(()), freed, list) })
}
