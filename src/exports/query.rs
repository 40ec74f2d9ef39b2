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

use super::{inside, nested, Call, Ptr, Rc};
use crate::guard::{boundary, set_errno, Errno};
use crate::real::{RealFn, Unavailable};

type QueryDevice = unsafe extern "C" fn(*mut ibv_context, *mut ibv_device_attr) -> c_int;
type QueryPort = unsafe extern "C" fn(*mut ibv_context, u8, *mut _compat_ibv_port_attr) -> c_int;
type QueryGid = unsafe extern "C" fn(*mut ibv_context, u8, c_int, *mut ibv_gid) -> c_int;
type QueryPkey = unsafe extern "C" fn(*mut ibv_context, u8, c_int, *mut u16) -> c_int;
type ModifyQp = unsafe extern "C" fn(*mut ibv_qp, *mut ibv_qp_attr, c_int) -> c_int;
type QueryQp =
    unsafe extern "C" fn(*mut ibv_qp, *mut ibv_qp_attr, c_int, *mut ibv_qp_init_attr) -> c_int;
type ModifySrq = unsafe extern "C" fn(*mut ibv_srq, *mut ibv_srq_attr, c_int) -> c_int;
type QuerySrq = unsafe extern "C" fn(*mut ibv_srq, *mut ibv_srq_attr) -> c_int;
type GetCqEvent =
    unsafe extern "C" fn(*mut ibv_comp_channel, *mut *mut ibv_cq, *mut *mut libc::c_void) -> c_int;
type AckCqEvents = unsafe extern "C" fn(*mut ibv_cq, c_uint);
type GetAsyncEvent = unsafe extern "C" fn(*mut ibv_context, *mut ibv_async_event) -> c_int;
type AckAsyncEvent = unsafe extern "C" fn(*mut ibv_async_event);
type Mcast = unsafe extern "C" fn(*mut ibv_qp, *const ibv_gid, u16) -> c_int;
type ForkInit = unsafe extern "C" fn() -> c_int;

static QUERY_DEVICE: RealFn<QueryDevice> = RealFn::new(c"ibv_query_device");
static QUERY_PORT: RealFn<QueryPort> = RealFn::new(c"ibv_query_port");
static QUERY_GID: RealFn<QueryGid> = RealFn::new(c"ibv_query_gid");
static QUERY_PKEY: RealFn<QueryPkey> = RealFn::new(c"ibv_query_pkey");
static MODIFY_QP: RealFn<ModifyQp> = RealFn::new(c"ibv_modify_qp");
static QUERY_QP: RealFn<QueryQp> = RealFn::new(c"ibv_query_qp");
static MODIFY_SRQ: RealFn<ModifySrq> = RealFn::new(c"ibv_modify_srq");
static QUERY_SRQ: RealFn<QuerySrq> = RealFn::new(c"ibv_query_srq");
static GET_CQ_EVENT: RealFn<GetCqEvent> = RealFn::new(c"ibv_get_cq_event");
static ACK_CQ_EVENTS: RealFn<AckCqEvents> = RealFn::new(c"ibv_ack_cq_events");
static GET_ASYNC_EVENT: RealFn<GetAsyncEvent> = RealFn::new(c"ibv_get_async_event");
static ACK_ASYNC_EVENT: RealFn<AckAsyncEvent> = RealFn::new(c"ibv_ack_async_event");
static ATTACH_MCAST: RealFn<Mcast> = RealFn::new(c"ibv_attach_mcast");
static DETACH_MCAST: RealFn<Mcast> = RealFn::new(c"ibv_detach_mcast");
static FORK_INIT: RealFn<ForkInit> = RealFn::new(c"ibv_fork_init");

/// The real function is missing: errno-value verbs return the errno.
fn unavailable_rc(why: Unavailable) -> c_int {
    set_errno(why.errno());
    why.errno()
}

/// The real function is missing: verbs that return -1 and set errno.
fn unavailable_minus1(why: Unavailable) -> c_int {
    set_errno(why.errno());
    -1
}

/// An object the shim knows dead: of a closed context, or destroyed (see
/// `exports::dead`); logs and sets errno.
#[inline]
fn zombie(func: &str, arg: &str, addr: usize) -> bool {
    super::dead(func, arg, addr)
}

/// Fills `device_attr` with the device's capabilities. Returns 0 on success
/// or an errno value.
#[no_mangle]
pub unsafe extern "C" fn ibv_query_device(
    context: *mut ibv_context,
    device_attr: *mut ibv_device_attr,
) -> c_int {
    let caller = crate::caller!();
    boundary("ibv_query_device", libc::EIO, || {
        if context.is_null() {
            return super::null_argument("ibv_query_device", "context", libc::EINVAL);
        }
        let real = match QUERY_DEVICE.get() {
            Ok(f) => f,
            Err(why) => return unavailable_rc(why),
        };
        if nested() {
            // SAFETY: forwarded unchanged.
            return unsafe { real(context, device_attr) };
        }
        if super::bad_context("ibv_query_device", context, caller) {
            return libc::EINVAL;
        }
        let call = Call::begin();
        // SAFETY: forwarded unchanged.
        let rc = inside(|| unsafe { real(context, device_attr) });
        call.end(
            format_args!(
                "ibv_query_device(context={}, device_attr={})",
                Ptr(context),
                Ptr(device_attr)
            ),
            format_args!("{}", Rc(rc)),
            false,
        );
        rc
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
    boundary("ibv_query_port", libc::EIO, || {
        if context.is_null() {
            return super::null_argument("ibv_query_port", "context", libc::EINVAL);
        }
        let real = match QUERY_PORT.get() {
            Ok(f) => f,
            Err(why) => return unavailable_rc(why),
        };
        if nested() {
            // SAFETY: forwarded unchanged.
            return unsafe { real(context, port_num, port_attr) };
        }
        if super::bad_context("ibv_query_port", context, caller) {
            return libc::EINVAL;
        }
        let call = Call::begin();
        // SAFETY: forwarded unchanged.
        let rc = inside(|| unsafe { real(context, port_num, port_attr) });
        call.end(
            format_args!(
                "ibv_query_port(context={}, port_num={port_num}, port_attr={})",
                Ptr(context),
                Ptr(port_attr)
            ),
            format_args!("{}", Rc(rc)),
            false,
        );
        rc
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
    boundary("ibv_query_gid", -1, || {
        if context.is_null() {
            return super::null_argument("ibv_query_gid", "context", -1);
        }
        let real = match QUERY_GID.get() {
            Ok(f) => f,
            Err(why) => return unavailable_minus1(why),
        };
        if nested() {
            // SAFETY: forwarded unchanged.
            return unsafe { real(context, port_num, index, gid) };
        }
        if super::bad_context("ibv_query_gid", context, caller) {
            return -1;
        }
        let call = Call::begin();
        // SAFETY: forwarded unchanged.
        let rc = inside(|| unsafe { real(context, port_num, index, gid) });
        call.end(
            format_args!(
                "ibv_query_gid(context={}, port_num={port_num}, index={index}, gid={})",
                Ptr(context),
                Ptr(gid)
            ),
            format_args!("{rc}"),
            rc != 0,
        );
        rc
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
    boundary("ibv_query_pkey", -1, || {
        if context.is_null() {
            return super::null_argument("ibv_query_pkey", "context", -1);
        }
        let real = match QUERY_PKEY.get() {
            Ok(f) => f,
            Err(why) => return unavailable_minus1(why),
        };
        if nested() {
            // SAFETY: forwarded unchanged.
            return unsafe { real(context, port_num, index, pkey) };
        }
        if super::bad_context("ibv_query_pkey", context, caller) {
            return -1;
        }
        let call = Call::begin();
        // SAFETY: forwarded unchanged.
        let rc = inside(|| unsafe { real(context, port_num, index, pkey) });
        call.end(
            format_args!(
                "ibv_query_pkey(context={}, port_num={port_num}, index={index}, pkey={})",
                Ptr(context),
                Ptr(pkey)
            ),
            format_args!("{rc}"),
            rc != 0,
        );
        rc
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
    boundary("ibv_modify_qp", libc::EIO, || {
        if qp.is_null() {
            return super::null_argument("ibv_modify_qp", "qp", libc::EINVAL);
        }
        let real = match MODIFY_QP.get() {
            Ok(f) => f,
            Err(why) => return unavailable_rc(why),
        };
        if nested() {
            // SAFETY: forwarded unchanged.
            return unsafe { real(qp, attr, attr_mask) };
        }
        if zombie("ibv_modify_qp", "qp", qp as usize) {
            return libc::EINVAL;
        }
        let call = Call::begin();
        // SAFETY: forwarded unchanged.
        let rc = inside(|| unsafe { real(qp, attr, attr_mask) });
        if call.logging() {
            let errno = Errno::save();
            let state = if attr.is_null() || attr_mask & 1 == 0 {
                -1
            } else {
                // SAFETY: the program's attributes; qp_state is read as the int it is in C.
                unsafe { addr_of!((*attr).qp_state).cast::<c_int>().read() }
            };
            errno.restore();
            call.end(
                format_args!(
                    "ibv_modify_qp(qp={}, attr={}, attr_mask={attr_mask:#x}, qp_state={state})",
                    Ptr(qp),
                    Ptr(attr)
                ),
                format_args!("{}", Rc(rc)),
                false,
            );
        }
        rc
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
    boundary("ibv_query_qp", libc::EIO, || {
        if qp.is_null() {
            return super::null_argument("ibv_query_qp", "qp", libc::EINVAL);
        }
        let real = match QUERY_QP.get() {
            Ok(f) => f,
            Err(why) => return unavailable_rc(why),
        };
        if nested() {
            // SAFETY: forwarded unchanged.
            return unsafe { real(qp, attr, attr_mask, init_attr) };
        }
        if zombie("ibv_query_qp", "qp", qp as usize) {
            return libc::EINVAL;
        }
        let call = Call::begin();
        // SAFETY: forwarded unchanged.
        let rc = inside(|| unsafe { real(qp, attr, attr_mask, init_attr) });
        call.end(
            format_args!(
                "ibv_query_qp(qp={}, attr={}, attr_mask={attr_mask:#x}, init_attr={})",
                Ptr(qp),
                Ptr(attr),
                Ptr(init_attr)
            ),
            format_args!("{}", Rc(rc)),
            false,
        );
        rc
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
    boundary("ibv_modify_srq", libc::EIO, || {
        if srq.is_null() {
            return super::null_argument("ibv_modify_srq", "srq", libc::EINVAL);
        }
        let real = match MODIFY_SRQ.get() {
            Ok(f) => f,
            Err(why) => return unavailable_rc(why),
        };
        if nested() {
            // SAFETY: forwarded unchanged.
            return unsafe { real(srq, srq_attr, srq_attr_mask) };
        }
        if zombie("ibv_modify_srq", "srq", srq as usize) {
            return libc::EINVAL;
        }
        let call = Call::begin();
        // SAFETY: forwarded unchanged.
        let rc = inside(|| unsafe { real(srq, srq_attr, srq_attr_mask) });
        call.end(
            format_args!(
                "ibv_modify_srq(srq={}, srq_attr={}, srq_attr_mask={srq_attr_mask:#x})",
                Ptr(srq),
                Ptr(srq_attr)
            ),
            format_args!("{}", Rc(rc)),
            false,
        );
        rc
    })
}

/// Reads an SRQ's attributes. Returns 0 on success or an errno value
/// (EINVAL, without calling the real library, for an SRQ of a closed
/// context).
#[no_mangle]
pub unsafe extern "C" fn ibv_query_srq(srq: *mut ibv_srq, srq_attr: *mut ibv_srq_attr) -> c_int {
    boundary("ibv_query_srq", libc::EIO, || {
        if srq.is_null() {
            return super::null_argument("ibv_query_srq", "srq", libc::EINVAL);
        }
        let real = match QUERY_SRQ.get() {
            Ok(f) => f,
            Err(why) => return unavailable_rc(why),
        };
        if nested() {
            // SAFETY: forwarded unchanged.
            return unsafe { real(srq, srq_attr) };
        }
        if zombie("ibv_query_srq", "srq", srq as usize) {
            return libc::EINVAL;
        }
        let call = Call::begin();
        // SAFETY: forwarded unchanged.
        let rc = inside(|| unsafe { real(srq, srq_attr) });
        call.end(
            format_args!(
                "ibv_query_srq(srq={}, srq_attr={})",
                Ptr(srq),
                Ptr(srq_attr)
            ),
            format_args!("{}", Rc(rc)),
            false,
        );
        rc
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
    boundary("ibv_get_cq_event", -1, || {
        if channel.is_null() {
            return super::null_argument("ibv_get_cq_event", "channel", -1);
        }
        let real = match GET_CQ_EVENT.get() {
            Ok(f) => f,
            Err(why) => return unavailable_minus1(why),
        };
        if nested() {
            // SAFETY: forwarded unchanged.
            return unsafe { real(channel, cq, cq_context) };
        }
        if zombie("ibv_get_cq_event", "channel", channel as usize) {
            return -1;
        }
        let call = Call::begin();
        // SAFETY: forwarded unchanged; it may block, holding no lock of the shim.
        let rc = inside(|| unsafe { real(channel, cq, cq_context) });
        let got = if rc == 0 && !cq.is_null() {
            // SAFETY: on success the real library stored the CQ there.
            unsafe { *cq }
        } else {
            std::ptr::null_mut()
        };
        call.end(
            format_args!("ibv_get_cq_event(channel={})", Ptr(channel)),
            format_args!("{rc} (cq={})", Ptr(got)),
            rc != 0,
        );
        rc
    })
}

/// Acknowledges `nevents` completion events of `cq` (every event must be
/// acknowledged before the CQ is destroyed).
#[no_mangle]
pub unsafe extern "C" fn ibv_ack_cq_events(cq: *mut ibv_cq, nevents: c_uint) {
    boundary("ibv_ack_cq_events", (), || {
        let real = match ACK_CQ_EVENTS.get() {
            Ok(f) => f,
            Err(why) => return set_errno(why.errno()),
        };
        if nested() {
            // SAFETY: forwarded unchanged.
            return unsafe { real(cq, nevents) };
        }
        if zombie("ibv_ack_cq_events", "cq", cq as usize) {
            return;
        }
        let call = Call::begin();
        // SAFETY: forwarded unchanged.
        inside(|| unsafe { real(cq, nevents) });
        call.end(
            format_args!("ibv_ack_cq_events(cq={}, nevents={nevents})", Ptr(cq)),
            format_args!("void"),
            false,
        );
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
    boundary("ibv_get_async_event", -1, || {
        if context.is_null() {
            return super::null_argument("ibv_get_async_event", "context", -1);
        }
        let real = match GET_ASYNC_EVENT.get() {
            Ok(f) => f,
            Err(why) => return unavailable_minus1(why),
        };
        if nested() {
            // SAFETY: forwarded unchanged.
            return unsafe { real(context, event) };
        }
        if super::bad_context("ibv_get_async_event", context, caller) {
            return -1;
        }
        let call = Call::begin();
        // SAFETY: forwarded unchanged; it may block, holding no lock of the shim.
        let rc = inside(|| unsafe { real(context, event) });
        if call.logging() {
            let kind = if rc == 0 && !event.is_null() {
                // SAFETY: filled by the real library; event_type is an int in C.
                unsafe { addr_of!((*event).event_type).cast::<c_int>().read() }
            } else {
                -1
            };
            call.end(
                format_args!(
                    "ibv_get_async_event(context={}, event={})",
                    Ptr(context),
                    Ptr(event)
                ),
                format_args!("{rc} (event_type={kind})"),
                rc != 0,
            );
        }
        rc
    })
}

/// Acknowledges an asynchronous event returned by `ibv_get_async_event()`.
#[no_mangle]
pub unsafe extern "C" fn ibv_ack_async_event(event: *mut ibv_async_event) {
    boundary("ibv_ack_async_event", (), || {
        let real = match ACK_ASYNC_EVENT.get() {
            Ok(f) => f,
            Err(why) => return set_errno(why.errno()),
        };
        if nested() {
            // SAFETY: forwarded unchanged.
            return unsafe { real(event) };
        }
        let call = Call::begin();
        // SAFETY: forwarded unchanged.
        inside(|| unsafe { real(event) });
        call.end(
            format_args!("ibv_ack_async_event(event={})", Ptr(event)),
            format_args!("void"),
            false,
        );
    })
}

/// The shared body of attach/detach multicast.
fn mcast(
    func: &'static str,
    real: &RealFn<Mcast>,
    qp: *mut ibv_qp,
    gid: *const ibv_gid,
    lid: u16,
) -> c_int {
    let real = match real.get() {
        Ok(f) => f,
        Err(why) => return unavailable_rc(why),
    };
    if nested() {
        // SAFETY: forwarded unchanged.
        return unsafe { real(qp, gid, lid) };
    }
    if zombie(func, "qp", qp as usize) {
        return libc::EINVAL;
    }
    let call = Call::begin();
    // SAFETY: forwarded unchanged.
    let rc = inside(|| unsafe { real(qp, gid, lid) });
    call.end(
        format_args!("{func}(qp={}, gid={}, lid={lid:#x})", Ptr(qp), Ptr(gid)),
        format_args!("{}", Rc(rc)),
        false,
    );
    rc
}

/// Attaches a UD QP to the multicast group `gid`/`lid`. Returns 0 on
/// success or an errno value.
#[no_mangle]
pub unsafe extern "C" fn ibv_attach_mcast(qp: *mut ibv_qp, gid: *const ibv_gid, lid: u16) -> c_int {
    boundary("ibv_attach_mcast", libc::EIO, || {
        if qp.is_null() {
            return super::null_argument("ibv_attach_mcast", "qp", libc::EINVAL);
        }
        mcast("ibv_attach_mcast", &ATTACH_MCAST, qp, gid, lid)
    })
}

/// Detaches a UD QP from the multicast group `gid`/`lid`. Returns 0 on
/// success or an errno value.
#[no_mangle]
pub unsafe extern "C" fn ibv_detach_mcast(qp: *mut ibv_qp, gid: *const ibv_gid, lid: u16) -> c_int {
    boundary("ibv_detach_mcast", libc::EIO, || {
        if qp.is_null() {
            return super::null_argument("ibv_detach_mcast", "qp", libc::EINVAL);
        }
        mcast("ibv_detach_mcast", &DETACH_MCAST, qp, gid, lid)
    })
}

/// Makes registered memory safe across `fork()` (call it before registering
/// any). Returns 0 on success or an errno value (EINVAL once an MR exists).
#[no_mangle]
pub unsafe extern "C" fn ibv_fork_init() -> c_int {
    boundary("ibv_fork_init", libc::EIO, || {
        let real = match FORK_INIT.get() {
            Ok(f) => f,
            Err(why) => return unavailable_rc(why),
        };
        if nested() {
            // SAFETY: forwarded unchanged.
            return unsafe { real() };
        }
        let call = Call::begin();
        // SAFETY: forwarded unchanged.
        let rc = inside(|| unsafe { real() });
        call.end(
            format_args!("ibv_fork_init()"),
            format_args!("{}", Rc(rc)),
            false,
        );
        rc
    })
}
