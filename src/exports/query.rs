//! Exported verbs worth a line in the debug log that create nothing:
//! queries, QP and SRQ changes, completion and async events, multicast,
//! fork support. Each is guard -> forward -> log; nothing is tracked.
//!
//! The verbs that take an object refuse one whose context was closed (EINVAL
//! in the verb's convention, with a warning), as the destroy verbs do: the
//! real library would follow the object's pointer to the freed context. The
//! check is one shared atomic read while no context was closed with objects
//! on it.

use std::ffi::{c_int, c_uint, c_void};
use std::ptr::addr_of;

use trace_format::verbs::{
    Verb, ACK_ASYNC_EVENT, ACK_CQ_EVENTS, FORK_INIT, GET_ASYNC_EVENT, GET_CQ_EVENT, MODIFY_QP,
    MODIFY_SRQ, QUERY_DEVICE, QUERY_GID, QUERY_PKEY, QUERY_PORT, QUERY_QP, QUERY_SRQ,
};
use verbs_abi::{
    _compat_ibv_port_attr, ibv_async_event, ibv_comp_channel, ibv_context, ibv_cq, ibv_device_attr,
    ibv_gid, ibv_qp, ibv_qp_attr, ibv_qp_init_attr, ibv_srq, ibv_srq_attr,
};

use super::{alive, context_ok, forward, not_null};
use crate::guard::{export, Errno, ErrnoCode, MinusOne};
use crate::real::real_fns;

real_fns! {
    QueryDevice = fn ibv_query_device(context: *mut ibv_context, device_attr: *mut ibv_device_attr) -> c_int;
    QueryPort = fn ibv_query_port(context: *mut ibv_context, port_num: u8, port_attr: *mut _compat_ibv_port_attr) -> c_int;
    QueryGid = fn ibv_query_gid(context: *mut ibv_context, port_num: u8, index: c_int, gid: *mut ibv_gid) -> c_int;
    QueryPkey = fn ibv_query_pkey(context: *mut ibv_context, port_num: u8, index: c_int, pkey: *mut u16) -> c_int;
    ModifyQp = fn ibv_modify_qp(qp: *mut ibv_qp, attr: *mut ibv_qp_attr, attr_mask: c_int) -> c_int;
    QueryQp = fn ibv_query_qp(qp: *mut ibv_qp, attr: *mut ibv_qp_attr, attr_mask: c_int, init_attr: *mut ibv_qp_init_attr) -> c_int;
    ModifySrq = fn ibv_modify_srq(srq: *mut ibv_srq, srq_attr: *mut ibv_srq_attr, srq_attr_mask: c_int) -> c_int;
    QuerySrq = fn ibv_query_srq(srq: *mut ibv_srq, srq_attr: *mut ibv_srq_attr) -> c_int;
    GetCqEvent = fn ibv_get_cq_event(channel: *mut ibv_comp_channel, cq: *mut *mut ibv_cq, cq_context: *mut *mut c_void) -> c_int;
    AckCqEvents = fn ibv_ack_cq_events(cq: *mut ibv_cq, nevents: c_uint);
    GetAsyncEvent = fn ibv_get_async_event(context: *mut ibv_context, event: *mut ibv_async_event) -> c_int;
    AckAsyncEvent = fn ibv_ack_async_event(event: *mut ibv_async_event);
    AttachMcast = fn ibv_attach_mcast(qp: *mut ibv_qp, gid: *const ibv_gid, lid: u16) -> c_int;
    DetachMcast = fn ibv_detach_mcast(qp: *mut ibv_qp, gid: *const ibv_gid, lid: u16) -> c_int;
    ForkInit = fn ibv_fork_init() -> c_int;
}

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
    export("ibv_query_device", || {
        not_null("ibv_query_device", "context", context)?;
        let real = QueryDevice::get()?;
        forward(
            || context_ok("ibv_query_device", context, caller),
            || real.call(context, device_attr),
            |call, rc| {
                call.done(
                    &QUERY_DEVICE,
                    &[context as u64, device_attr as u64],
                    *rc as i64 as u64,
                    false,
                )
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
    export("ibv_query_port", || {
        not_null("ibv_query_port", "context", context)?;
        let real = QueryPort::get()?;
        forward(
            || context_ok("ibv_query_port", context, caller),
            || real.call(context, port_num, port_attr),
            |call, rc| {
                call.done(
                    &QUERY_PORT,
                    &[context as u64, port_num as u64, port_attr as u64],
                    *rc as i64 as u64,
                    false,
                )
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
    export("ibv_query_gid", || {
        not_null("ibv_query_gid", "context", context)?;
        let real = QueryGid::get()?;
        forward(
            || context_ok("ibv_query_gid", context, caller),
            || real.call(context, port_num, index, gid),
            |call, rc| {
                call.done(
                    &QUERY_GID,
                    &[
                        context as u64,
                        port_num as u64,
                        index as i64 as u64,
                        gid as u64,
                    ],
                    *rc as i64 as u64,
                    *rc != 0,
                )
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
    export("ibv_query_pkey", || {
        not_null("ibv_query_pkey", "context", context)?;
        let real = QueryPkey::get()?;
        forward(
            || context_ok("ibv_query_pkey", context, caller),
            || real.call(context, port_num, index, pkey),
            |call, rc| {
                call.done(
                    &QUERY_PKEY,
                    &[
                        context as u64,
                        port_num as u64,
                        index as i64 as u64,
                        pkey as u64,
                    ],
                    *rc as i64 as u64,
                    *rc != 0,
                )
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
    export("ibv_modify_qp", || {
        not_null("ibv_modify_qp", "qp", qp)?;
        let real = ModifyQp::get()?;
        forward(
            || alive("ibv_modify_qp", "qp", qp as usize),
            || real.call(qp, attr, attr_mask),
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
                    let (ctx, qp_num) = unsafe { ((*qp).context as usize, (*qp).qp_num) };
                    super::interpose::qp_state_set(ctx, qp_num, state);
                }
                errno.restore();
                if !call.logging() {
                    return;
                }
                call.done(
                    &MODIFY_QP,
                    &[
                        qp as u64,
                        attr as u64,
                        attr_mask as u32 as u64,
                        state as i64 as u64,
                    ],
                    *rc as i64 as u64,
                    false,
                );
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
    export("ibv_query_qp", || {
        not_null("ibv_query_qp", "qp", qp)?;
        let real = QueryQp::get()?;
        forward(
            || alive("ibv_query_qp", "qp", qp as usize),
            || real.call(qp, attr, attr_mask, init_attr),
            |call, rc| {
                call.done(
                    &QUERY_QP,
                    &[
                        qp as u64,
                        attr as u64,
                        attr_mask as u32 as u64,
                        init_attr as u64,
                    ],
                    *rc as i64 as u64,
                    false,
                )
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
    export("ibv_modify_srq", || {
        not_null("ibv_modify_srq", "srq", srq)?;
        let real = ModifySrq::get()?;
        forward(
            || alive("ibv_modify_srq", "srq", srq as usize),
            || real.call(srq, srq_attr, srq_attr_mask),
            |call, rc| {
                call.done(
                    &MODIFY_SRQ,
                    &[srq as u64, srq_attr as u64, srq_attr_mask as u32 as u64],
                    *rc as i64 as u64,
                    false,
                )
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
    export("ibv_query_srq", || {
        not_null("ibv_query_srq", "srq", srq)?;
        let real = QuerySrq::get()?;
        forward(
            || alive("ibv_query_srq", "srq", srq as usize),
            || real.call(srq, srq_attr),
            |call, rc| {
                call.done(
                    &QUERY_SRQ,
                    &[srq as u64, srq_attr as u64],
                    *rc as i64 as u64,
                    false,
                )
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
    export("ibv_get_cq_event", || {
        not_null("ibv_get_cq_event", "channel", channel)?;
        let real = GetCqEvent::get()?;
        forward(
            || alive("ibv_get_cq_event", "channel", channel as usize),
            // It may block, holding no lock of the shim.
            || real.call(channel, cq, cq_context),
            |call, rc| {
                let got = if *rc == 0 && !cq.is_null() {
                    // SAFETY: on success the real library stored the CQ there.
                    unsafe { *cq }
                } else {
                    std::ptr::null_mut()
                };
                call.done(
                    &GET_CQ_EVENT,
                    &[channel as u64, got as u64],
                    *rc as i64 as u64,
                    *rc != 0,
                )
            },
        )
        .map(MinusOne)
    })
}

/// Acknowledges `nevents` completion events of `cq` (every event must be
/// acknowledged before the CQ is destroyed).
#[no_mangle]
pub unsafe extern "C" fn ibv_ack_cq_events(cq: *mut ibv_cq, nevents: c_uint) {
    export("ibv_ack_cq_events", || {
        let real = AckCqEvents::get()?;
        forward(
            || alive("ibv_ack_cq_events", "cq", cq as usize),
            || real.call(cq, nevents),
            |call, ()| call.done(&ACK_CQ_EVENTS, &[cq as u64, nevents as u64], 0, false),
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
    export("ibv_get_async_event", || {
        not_null("ibv_get_async_event", "context", context)?;
        let real = GetAsyncEvent::get()?;
        forward(
            || context_ok("ibv_get_async_event", context, caller),
            // It may block, holding no lock of the shim.
            || real.call(context, event),
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
                call.done(
                    &GET_ASYNC_EVENT,
                    &[context as u64, event as u64, kind as i64 as u64],
                    *rc as i64 as u64,
                    *rc != 0,
                );
            },
        )
        .map(MinusOne)
    })
}

/// Acknowledges an asynchronous event returned by `ibv_get_async_event()`.
#[no_mangle]
pub unsafe extern "C" fn ibv_ack_async_event(event: *mut ibv_async_event) {
    export("ibv_ack_async_event", || {
        let real = AckAsyncEvent::get()?;
        forward(
            unchecked,
            || real.call(event),
            |call, ()| call.done(&ACK_ASYNC_EVENT, &[event as u64], 0, false),
        )
    })
}

/// The shared body of attach/detach multicast: `real` forwards.
fn mcast(
    verb: &'static Verb,
    qp: *mut ibv_qp,
    gid: *const ibv_gid,
    lid: u16,
    real: impl FnOnce() -> c_int,
) -> Result<ErrnoCode, super::Refused> {
    forward(
        || alive(verb.name, "qp", qp as usize),
        real,
        |call, &rc| {
            call.done(
                verb,
                &[qp as u64, gid as u64, lid as u64],
                rc as i64 as u64,
                false,
            )
        },
    )
    .map(ErrnoCode)
}

/// Attaches a UD QP to the multicast group `gid`/`lid`. Returns 0 on
/// success or an errno value.
#[no_mangle]
pub unsafe extern "C" fn ibv_attach_mcast(qp: *mut ibv_qp, gid: *const ibv_gid, lid: u16) -> c_int {
    export("ibv_attach_mcast", || {
        not_null("ibv_attach_mcast", "qp", qp)?;
        let real = AttachMcast::get()?;
        mcast(&trace_format::verbs::ATTACH_MCAST, qp, gid, lid, || {
            real.call(qp, gid, lid)
        })
    })
}

/// Detaches a UD QP from the multicast group `gid`/`lid`. Returns 0 on
/// success or an errno value.
#[no_mangle]
pub unsafe extern "C" fn ibv_detach_mcast(qp: *mut ibv_qp, gid: *const ibv_gid, lid: u16) -> c_int {
    export("ibv_detach_mcast", || {
        not_null("ibv_detach_mcast", "qp", qp)?;
        let real = DetachMcast::get()?;
        mcast(&trace_format::verbs::DETACH_MCAST, qp, gid, lid, || {
            real.call(qp, gid, lid)
        })
    })
}

/// Makes registered memory safe across `fork()` (call it before registering
/// any). Returns 0 on success or an errno value (EINVAL once an MR exists).
#[no_mangle]
pub unsafe extern "C" fn ibv_fork_init() -> c_int {
    export("ibv_fork_init", || {
        let real = ForkInit::get()?;
        forward(
            unchecked,
            || real.call(),
            |call, rc| call.done(&FORK_INIT, &[], *rc as i64 as u64, false),
        )
        .map(ErrnoCode)
    })
}
