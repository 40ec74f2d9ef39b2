//! Exported verbs worth a line in the debug log that create nothing:
//! queries, QP and SRQ changes, completion and async events, multicast,
//! fork support. Each is guard -> forward -> log; nothing is tracked.
//!
//! The verbs that take an object refuse one whose context was closed (EINVAL
//! in the verb's convention, with a warning), as the destroy verbs do: the
//! real library would follow the object's pointer to the freed context. The
//! check is one shared atomic read while no context was closed with objects
//! on it.

use std::ffi::{c_int, c_uint};
use std::ptr::addr_of;

use verbs_abi::{
    _compat_ibv_port_attr, ibv_async_event, ibv_comp_channel, ibv_context, ibv_cq, ibv_device_attr,
    ibv_gid, ibv_qp, ibv_qp_attr, ibv_qp_init_attr, ibv_srq, ibv_srq_attr,
};

use super::{alive, context_checks, context_ok, forward, not_null, object_checks};
use crate::addr::Addr;
use crate::guard::{Errno, ErrnoCode, MinusOne};
use crate::real::slots::{
    AckAsyncEvent, AckCqEvents, AttachMcast, DetachMcast, ForkInit, GetAsyncEvent, GetCqEvent,
    ModifyQp, ModifySrq, QueryDevice, QueryGid, QueryPkey, QueryPort, QueryQp, QuerySrq,
};

/// Nothing to refuse beyond the NULL checks.
fn unchecked() -> Result<(), super::Refused> {
    Ok(())
}

/// Fills `device_attr` with the device's capabilities. Returns 0 on success
/// or an errno value.
#[no_mangle]
pub unsafe extern "C" fn ibv_query_device(
    context: *mut ibv_context,
    device_attr: *mut ibv_device_attr,
) -> c_int {
    let caller = crate::caller!();
    QueryDevice::export(|| {
        let check = context_checks(QueryDevice::NAME, context, caller)?;
        // SAFETY: the program's arguments.
        unsafe { QueryDevice::forward(check, context, device_attr) }
    })
}

/// Fills `port_attr` with the attributes of port `port_num` (from 1). This
/// is the exported symbol, which fills the old, shorter layout; C programs
/// reach it through rdma-core's `ibv_query_port` macro only for contexts
/// without the extended query. Returns 0 on success or an errno value.
#[no_mangle]
pub unsafe extern "C" fn ibv_query_port(
    context: *mut ibv_context,
    port_num: u8,
    port_attr: *mut _compat_ibv_port_attr,
) -> c_int {
    let caller = crate::caller!();
    QueryPort::export(|| {
        let check = context_checks(QueryPort::NAME, context, caller)?;
        // SAFETY: the program's arguments.
        unsafe { QueryPort::forward(check, context, port_num, port_attr) }
    })
}

/// Reads entry `index` of the GID table of port `port_num`. Returns 0, or
/// -1 with errno set.
#[no_mangle]
pub unsafe extern "C" fn ibv_query_gid(
    context: *mut ibv_context,
    port_num: u8,
    index: c_int,
    gid: *mut ibv_gid,
) -> c_int {
    let caller = crate::caller!();
    QueryGid::export(|| {
        let check = context_checks(QueryGid::NAME, context, caller)?;
        // SAFETY: the program's arguments.
        unsafe { QueryGid::forward(check, context, port_num, index, gid) }
    })
}

/// Reads entry `index` of the P_Key table of port `port_num`. Returns 0,
/// or -1 with errno set.
#[no_mangle]
pub unsafe extern "C" fn ibv_query_pkey(
    context: *mut ibv_context,
    port_num: u8,
    index: c_int,
    pkey: *mut u16,
) -> c_int {
    let caller = crate::caller!();
    QueryPkey::export(|| {
        let check = context_checks(QueryPkey::NAME, context, caller)?;
        // SAFETY: the program's arguments.
        unsafe { QueryPkey::forward(check, context, port_num, index, pkey) }
    })
}

/// Moves a QP through its state machine or changes its attributes (the
/// `IBV_QP_*` bits of `attr_mask` say which). Returns 0 on success or an
/// errno value (EINVAL, without calling the real library, for a QP of a
/// closed context).
#[no_mangle]
pub unsafe extern "C" fn ibv_modify_qp(
    qp: *mut ibv_qp,
    attr: *mut ibv_qp_attr,
    attr_mask: c_int,
) -> c_int {
    let caller = crate::caller!();
    ModifyQp::export(|| {
        not_null(ModifyQp::NAME, "qp", qp)?;
        let real = ModifyQp::get()?;
        forward(
            || alive(ModifyQp::NAME, "qp", qp as usize),
            // SAFETY: the program's arguments, to the real function.
            || unsafe { real.call(qp, attr, attr_mask) },
            |call, rc| {
                let checking = crate::checks::datapath();
                if !call.logging() && !checking {
                    return;
                }
                let errno = Errno::save();
                let state = if attr.is_null() || attr_mask & 1 == 0 {
                    -1
                } else {
                    // SAFETY: the program's attributes; qp_state is read as the int it is in C.
                    unsafe { addr_of!((*attr).qp_state).cast::<c_int>().read() }
                };
                if checking && *rc == 0 && state >= 0 {
                    // The error-completion explainer hears of a flush the
                    // program asks for.
                    // SAFETY: a QP the program just modified successfully.
                    let (ctx, qp_num) = unsafe { (Addr::of((*qp).context), (*qp).qp_num) };
                    super::interpose::qp_state_set(ctx, qp_num, state);
                    if state == verbs_abi::ibv_qp_state::IBV_QPS_RESET as c_int
                        && crate::checks::inflight()
                    {
                        super::interpose::teardown::qp_reset(qp, caller);
                    }
                    if state == verbs_abi::ibv_qp_state::IBV_QPS_ERR as c_int
                        && crate::checks::inflight()
                    {
                        super::interpose::teardown::qp_error(qp);
                    }
                }
                errno.restore();
                if !call.logging() {
                    return;
                }
                // SAFETY: the arguments and the result of the real call.
                unsafe { ModifyQp::done(call, qp, attr, attr_mask, state, *rc, false) };
            },
        )
        .map(ErrnoCode)
    })
}

/// Reads a QP's attributes (those in `attr_mask`) and creation attributes.
/// Returns 0 on success or an errno value (EINVAL, without calling the real
/// library, for a QP of a closed context).
#[no_mangle]
pub unsafe extern "C" fn ibv_query_qp(
    qp: *mut ibv_qp,
    attr: *mut ibv_qp_attr,
    attr_mask: c_int,
    init_attr: *mut ibv_qp_init_attr,
) -> c_int {
    QueryQp::export(|| {
        let check = object_checks(QueryQp::NAME, "qp", qp)?;
        // SAFETY: the program's arguments.
        unsafe { QueryQp::forward(check, qp, attr, attr_mask, init_attr) }
    })
}

/// Changes an SRQ's attributes (`IBV_SRQ_MAX_WR`, `IBV_SRQ_LIMIT`). Returns
/// 0 on success or an errno value (EINVAL, without calling the real
/// library, for an SRQ of a closed context).
#[no_mangle]
pub unsafe extern "C" fn ibv_modify_srq(
    srq: *mut ibv_srq,
    srq_attr: *mut ibv_srq_attr,
    srq_attr_mask: c_int,
) -> c_int {
    ModifySrq::export(|| {
        let check = object_checks(ModifySrq::NAME, "srq", srq)?;
        // SAFETY: the program's arguments.
        unsafe { ModifySrq::forward(check, srq, srq_attr, srq_attr_mask) }
    })
}

/// Reads an SRQ's attributes. Returns 0 on success or an errno value
/// (EINVAL, without calling the real library, for an SRQ of a closed
/// context).
#[no_mangle]
pub unsafe extern "C" fn ibv_query_srq(srq: *mut ibv_srq, srq_attr: *mut ibv_srq_attr) -> c_int {
    QuerySrq::export(|| {
        let check = object_checks(QuerySrq::NAME, "srq", srq)?;
        // SAFETY: the program's arguments.
        unsafe { QuerySrq::forward(check, srq, srq_attr) }
    })
}

/// Waits for the next completion event on `channel` (blocking unless the
/// channel's fd is non-blocking) and returns its CQ and CQ context. Returns
/// 0, or -1 with errno set. Acknowledge it with `ibv_ack_cq_events()`.
#[no_mangle]
pub unsafe extern "C" fn ibv_get_cq_event(
    channel: *mut ibv_comp_channel,
    cq: *mut *mut ibv_cq,
    cq_context: *mut *mut libc::c_void,
) -> c_int {
    GetCqEvent::export(|| {
        not_null(GetCqEvent::NAME, "channel", channel)?;
        let real = GetCqEvent::get()?;
        forward(
            || alive(GetCqEvent::NAME, "channel", channel as usize),
            // It may block, holding no lock of the shim.
            // SAFETY: the program's arguments, to the real function.
            || unsafe { real.call(channel, cq, cq_context) },
            |call, rc| {
                let got = if *rc == 0 && !cq.is_null() {
                    // SAFETY: on success the real library stored the CQ there.
                    unsafe { *cq }
                } else {
                    std::ptr::null_mut()
                };
                // SAFETY: the arguments and the result of the real call.
                unsafe { GetCqEvent::done(call, channel, cq, cq_context, got, *rc, *rc != 0) }
            },
        )
        .map(MinusOne)
    })
}

/// Acknowledges `nevents` completion events of `cq` (every event must be
/// acknowledged before the CQ is destroyed).
#[no_mangle]
pub unsafe extern "C" fn ibv_ack_cq_events(cq: *mut ibv_cq, nevents: c_uint) {
    AckCqEvents::export(|| {
        let check = || alive(AckCqEvents::NAME, "cq", cq as usize);
        // SAFETY: the program's arguments.
        unsafe { AckCqEvents::forward(check, cq, nevents) }
    })
}

/// Waits for the next asynchronous event of `context` (blocking unless its
/// async fd is non-blocking). Returns 0, or -1 with errno set. Acknowledge
/// it with `ibv_ack_async_event()`.
#[no_mangle]
pub unsafe extern "C" fn ibv_get_async_event(
    context: *mut ibv_context,
    event: *mut ibv_async_event,
) -> c_int {
    let caller = crate::caller!();
    GetAsyncEvent::export(|| {
        not_null(GetAsyncEvent::NAME, "context", context)?;
        let real = GetAsyncEvent::get()?;
        forward(
            || context_ok(GetAsyncEvent::NAME, context, caller),
            // It may block, holding no lock of the shim.
            // SAFETY: the program's arguments, to the real function.
            || unsafe { real.call(context, event) },
            |call, rc| {
                if !call.logging() {
                    return;
                }
                let kind = if *rc == 0 && !event.is_null() {
                    // SAFETY: filled by the real library; event_type is an int in C.
                    unsafe { addr_of!((*event).event_type).cast::<c_int>().read() }
                } else {
                    -1
                };
                // SAFETY: the arguments and the result of the real call.
                unsafe { GetAsyncEvent::done(call, context, event, kind, *rc, *rc != 0) };
            },
        )
        .map(MinusOne)
    })
}

/// Acknowledges an asynchronous event returned by `ibv_get_async_event()`.
#[no_mangle]
pub unsafe extern "C" fn ibv_ack_async_event(event: *mut ibv_async_event) {
    // SAFETY: the program's argument.
    AckAsyncEvent::export(|| unsafe { AckAsyncEvent::forward(unchecked, event) })
}

/// Attaches a UD QP to the multicast group `gid`/`lid`. Returns 0 on
/// success or an errno value.
#[no_mangle]
pub unsafe extern "C" fn ibv_attach_mcast(qp: *mut ibv_qp, gid: *const ibv_gid, lid: u16) -> c_int {
    AttachMcast::export(|| {
        let check = object_checks(AttachMcast::NAME, "qp", qp)?;
        // SAFETY: the program's arguments.
        unsafe { AttachMcast::forward(check, qp, gid, lid) }
    })
}

/// Detaches a UD QP from the multicast group `gid`/`lid`. Returns 0 on
/// success or an errno value.
#[no_mangle]
pub unsafe extern "C" fn ibv_detach_mcast(qp: *mut ibv_qp, gid: *const ibv_gid, lid: u16) -> c_int {
    DetachMcast::export(|| {
        let check = object_checks(DetachMcast::NAME, "qp", qp)?;
        // SAFETY: the program's arguments.
        unsafe { DetachMcast::forward(check, qp, gid, lid) }
    })
}

/// Makes registered memory safe across `fork()` (call it before registering
/// any). Returns 0 on success or an errno value (EINVAL once an MR exists).
#[no_mangle]
pub unsafe extern "C" fn ibv_fork_init() -> c_int {
    // SAFETY: no arguments.
    ForkInit::export(|| unsafe { ForkInit::forward(unchecked) })
}
