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

use super::{alive, context_ok, forward, not_null};
use crate::addr::Addr;
use crate::guard::{export, Errno, ErrnoCode, MinusOne};
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
    export(QueryDevice::NAME, || {
        not_null(QueryDevice::NAME, "context", context)?;
        let real = QueryDevice::get()?;
        forward(
            || context_ok(QueryDevice::NAME, context, caller),
            // SAFETY: the program's arguments, to the real function.
            || unsafe { real.call(context, device_attr) },
            |call, rc| {
                // SAFETY: the arguments and the result of the real call.
                unsafe { QueryDevice::done(call, context, device_attr, *rc, false) }
            },
        )
        .map(ErrnoCode)
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
    export(QueryPort::NAME, || {
        not_null(QueryPort::NAME, "context", context)?;
        let real = QueryPort::get()?;
        forward(
            || context_ok(QueryPort::NAME, context, caller),
            // SAFETY: the program's arguments, to the real function.
            || unsafe { real.call(context, port_num, port_attr) },
            |call, rc| {
                // SAFETY: the arguments and the result of the real call.
                unsafe { QueryPort::done(call, context, port_num, port_attr, *rc, false) }
            },
        )
        .map(ErrnoCode)
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
    export(QueryGid::NAME, || {
        not_null(QueryGid::NAME, "context", context)?;
        let real = QueryGid::get()?;
        forward(
            || context_ok(QueryGid::NAME, context, caller),
            // SAFETY: the program's arguments, to the real function.
            || unsafe { real.call(context, port_num, index, gid) },
            |call, rc| {
                // SAFETY: the arguments and the result of the real call.
                unsafe { QueryGid::done(call, context, port_num, index, gid, *rc, *rc != 0) }
            },
        )
        .map(MinusOne)
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
    export(QueryPkey::NAME, || {
        not_null(QueryPkey::NAME, "context", context)?;
        let real = QueryPkey::get()?;
        forward(
            || context_ok(QueryPkey::NAME, context, caller),
            // SAFETY: the program's arguments, to the real function.
            || unsafe { real.call(context, port_num, index, pkey) },
            |call, rc| {
                // SAFETY: the arguments and the result of the real call.
                unsafe { QueryPkey::done(call, context, port_num, index, pkey, *rc, *rc != 0) }
            },
        )
        .map(MinusOne)
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
    export(ModifyQp::NAME, || {
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
    export(QueryQp::NAME, || {
        not_null(QueryQp::NAME, "qp", qp)?;
        let real = QueryQp::get()?;
        forward(
            || alive(QueryQp::NAME, "qp", qp as usize),
            // SAFETY: the program's arguments, to the real function.
            || unsafe { real.call(qp, attr, attr_mask, init_attr) },
            |call, rc| {
                // SAFETY: the arguments and the result of the real call.
                unsafe { QueryQp::done(call, qp, attr, attr_mask, init_attr, *rc, false) }
            },
        )
        .map(ErrnoCode)
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
    export(ModifySrq::NAME, || {
        not_null(ModifySrq::NAME, "srq", srq)?;
        let real = ModifySrq::get()?;
        forward(
            || alive(ModifySrq::NAME, "srq", srq as usize),
            // SAFETY: the program's arguments, to the real function.
            || unsafe { real.call(srq, srq_attr, srq_attr_mask) },
            |call, rc| {
                // SAFETY: the arguments and the result of the real call.
                unsafe { ModifySrq::done(call, srq, srq_attr, srq_attr_mask, *rc, false) }
            },
        )
        .map(ErrnoCode)
    })
}

/// Reads an SRQ's attributes. Returns 0 on success or an errno value
/// (EINVAL, without calling the real library, for an SRQ of a closed
/// context).
#[no_mangle]
pub unsafe extern "C" fn ibv_query_srq(srq: *mut ibv_srq, srq_attr: *mut ibv_srq_attr) -> c_int {
    export(QuerySrq::NAME, || {
        not_null(QuerySrq::NAME, "srq", srq)?;
        let real = QuerySrq::get()?;
        forward(
            || alive(QuerySrq::NAME, "srq", srq as usize),
            // SAFETY: the program's arguments, to the real function.
            || unsafe { real.call(srq, srq_attr) },
            |call, rc| {
                // SAFETY: the arguments and the result of the real call.
                unsafe { QuerySrq::done(call, srq, srq_attr, *rc, false) }
            },
        )
        .map(ErrnoCode)
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
    export(GetCqEvent::NAME, || {
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
    export(AckCqEvents::NAME, || {
        let real = AckCqEvents::get()?;
        forward(
            || alive(AckCqEvents::NAME, "cq", cq as usize),
            // SAFETY: the program's arguments, to the real function.
            || unsafe { real.call(cq, nevents) },
            // SAFETY: plain words.
            |call, ()| unsafe { AckCqEvents::done(call, cq, nevents, (), false) },
        )
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
    export(GetAsyncEvent::NAME, || {
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
    export(AckAsyncEvent::NAME, || {
        let real = AckAsyncEvent::get()?;
        forward(
            unchecked,
            // SAFETY: the program's arguments, to the real function.
            || unsafe { real.call(event) },
            // SAFETY: plain words.
            |call, ()| unsafe { AckAsyncEvent::done(call, event, (), false) },
        )
    })
}

/// A multicast verb's record (`AttachMcast::done`, `DetachMcast::done`).
type McastDone = unsafe fn(&super::Call, *mut ibv_qp, *const ibv_gid, u16, c_int, bool);

/// The shared body of attach/detach multicast (`name`): `real` forwards,
/// `done` records.
fn mcast(
    name: &'static str,
    qp: *mut ibv_qp,
    gid: *const ibv_gid,
    lid: u16,
    real: impl FnOnce() -> c_int,
    done: McastDone,
) -> Result<ErrnoCode, super::Refused> {
    forward(
        || alive(name, "qp", qp as usize),
        real,
        // SAFETY: plain words.
        |call, &rc| unsafe { done(call, qp, gid, lid, rc, false) },
    )
    .map(ErrnoCode)
}

/// Attaches a UD QP to the multicast group `gid`/`lid`. Returns 0 on
/// success or an errno value.
#[no_mangle]
pub unsafe extern "C" fn ibv_attach_mcast(qp: *mut ibv_qp, gid: *const ibv_gid, lid: u16) -> c_int {
    export(AttachMcast::NAME, || {
        not_null(AttachMcast::NAME, "qp", qp)?;
        let real = AttachMcast::get()?;
        mcast(
            AttachMcast::NAME,
            qp,
            gid,
            lid,
            // SAFETY: the program's arguments, to the real function.
            || unsafe { real.call(qp, gid, lid) },
            AttachMcast::done,
        )
    })
}

/// Detaches a UD QP from the multicast group `gid`/`lid`. Returns 0 on
/// success or an errno value.
#[no_mangle]
pub unsafe extern "C" fn ibv_detach_mcast(qp: *mut ibv_qp, gid: *const ibv_gid, lid: u16) -> c_int {
    export(DetachMcast::NAME, || {
        not_null(DetachMcast::NAME, "qp", qp)?;
        let real = DetachMcast::get()?;
        mcast(
            DetachMcast::NAME,
            qp,
            gid,
            lid,
            // SAFETY: the program's arguments, to the real function.
            || unsafe { real.call(qp, gid, lid) },
            DetachMcast::done,
        )
    })
}

/// Makes registered memory safe across `fork()` (call it before registering
/// any). Returns 0 on success or an errno value (EINVAL once an MR exists).
#[no_mangle]
pub unsafe extern "C" fn ibv_fork_init() -> c_int {
    export(ForkInit::NAME, || {
        let real = ForkInit::get()?;
        forward(
            unchecked,
            // SAFETY: the program's arguments, to the real function.
            || unsafe { real.call() },
            // SAFETY: plain words.
            |call, rc| unsafe { ForkInit::done(call, *rc, false) },
        )
        .map(ErrnoCode)
    })
}
