//! Completion channels, CQs, SRQs and QPs.

use std::ffi::{c_int, c_void};
use std::ptr::addr_of;

use trace_format::verbs::{CREATE_COMP_CHANNEL, CREATE_CQ, CREATE_QP, CREATE_SRQ, RESIZE_CQ};
use verbs_abi::{
    ibv_comp_channel, ibv_context, ibv_cq, ibv_pd, ibv_qp, ibv_qp_init_attr, ibv_srq,
    ibv_srq_init_attr,
};

use super::super::create_destroy::{
    context_of_pd, create, destroy, on_context, record, track, Destroy,
};
use super::super::{alive, forward, not_null};
use crate::guard::{export, Errno, ErrnoCode};
use crate::real::real_fns;
use crate::registry::objects::{self, Kind};

real_fns! {
    CreateCompChannel = fn ibv_create_comp_channel(context: *mut ibv_context) -> *mut ibv_comp_channel;
    DestroyCompChannel = fn ibv_destroy_comp_channel(channel: *mut ibv_comp_channel) -> c_int;
    CreateCq = fn ibv_create_cq(context: *mut ibv_context, cqe: c_int, cq_context: *mut c_void, channel: *mut ibv_comp_channel, comp_vector: c_int) -> *mut ibv_cq;
    ResizeCq = fn ibv_resize_cq(cq: *mut ibv_cq, cqe: c_int) -> c_int;
    DestroyCq = fn ibv_destroy_cq(cq: *mut ibv_cq) -> c_int;
    CreateSrq = fn ibv_create_srq(pd: *mut ibv_pd, srq_init_attr: *mut ibv_srq_init_attr) -> *mut ibv_srq;
    DestroySrq = fn ibv_destroy_srq(srq: *mut ibv_srq) -> c_int;
    CreateQp = fn ibv_create_qp(pd: *mut ibv_pd, qp_init_attr: *mut ibv_qp_init_attr) -> *mut ibv_qp;
    DestroyQp = fn ibv_destroy_qp(qp: *mut ibv_qp) -> c_int;
}

// --- completion channels and CQs ---------------------------------------------------

/// Creates a completion event channel on `context`. Returns NULL with errno
/// set on failure. Free it with `ibv_destroy_comp_channel()`.
#[no_mangle]
pub unsafe extern "C" fn ibv_create_comp_channel(
    context: *mut ibv_context,
) -> *mut ibv_comp_channel {
    let caller = crate::caller!();
    export("ibv_create_comp_channel", || {
        on_context("ibv_create_comp_channel", context, caller)?;
        let real = CreateCompChannel::get()?;
        create(
            None,
            || real.call(context),
            |ch| {
                let mut o = record(Kind::CompChannel, ch, context, 0, caller);
                // SAFETY: a live channel just returned by the real library.
                o.x = unsafe { (*ch).fd } as u32;
                track(o);
            },
            |call, ch| {
                call.done(
                    &CREATE_COMP_CHANNEL,
                    &[context as u64],
                    ch as u64,
                    ch.is_null(),
                )
            },
        )
    })
}

/// Destroys a completion channel. Returns 0 on success or an errno value
/// (EBUSY while CQs use it; EINVAL, without calling the real library, for a
/// channel of a closed context or one destroyed already).
#[no_mangle]
pub unsafe extern "C" fn ibv_destroy_comp_channel(channel: *mut ibv_comp_channel) -> c_int {
    export("ibv_destroy_comp_channel", || {
        let real = DestroyCompChannel::get()?;
        let d = Destroy::new(
            "ibv_destroy_comp_channel",
            "channel",
            Kind::CompChannel,
            Kind::CompChannel.bit(),
        );
        destroy(&d, channel, || real.call(channel)).map(ErrnoCode)
    })
}

/// Creates a CQ of at least `cqe` entries on `context`, reporting to
/// `channel` (may be NULL). Returns NULL with errno set on failure. Free it
/// with `ibv_destroy_cq()`.
#[no_mangle]
pub unsafe extern "C" fn ibv_create_cq(
    context: *mut ibv_context,
    cqe: c_int,
    cq_context: *mut c_void,
    channel: *mut ibv_comp_channel,
    comp_vector: c_int,
) -> *mut ibv_cq {
    let caller = crate::caller!();
    export("ibv_create_cq", || {
        on_context("ibv_create_cq", context, caller)?;
        let real = CreateCq::get()?;
        create(
            Some(("ibv_create_cq", "channel", channel as usize)),
            || real.call(context, cqe, cq_context, channel, comp_vector),
            |cq| {
                let mut o = record(Kind::Cq, cq, context, channel as usize, caller);
                // SAFETY: a live CQ just returned by the real library.
                o.x = unsafe { (*cq).cqe } as u32;
                o.a = comp_vector as u32 as u64;
                track(o);
            },
            |call, cq| {
                call.done(
                    &CREATE_CQ,
                    &[
                        context as u64,
                        cqe as i64 as u64,
                        cq_context as u64,
                        channel as u64,
                        comp_vector as i64 as u64,
                    ],
                    cq as u64,
                    cq.is_null(),
                )
            },
        )
    })
}

/// Resizes a CQ to at least `cqe` entries. Returns 0 on success or an errno
/// value (EINVAL, without calling the real library, for a CQ of a closed
/// context).
#[no_mangle]
pub unsafe extern "C" fn ibv_resize_cq(cq: *mut ibv_cq, cqe: c_int) -> c_int {
    export("ibv_resize_cq", || {
        not_null("ibv_resize_cq", "cq", cq)?;
        let real = ResizeCq::get()?;
        forward(
            || alive("ibv_resize_cq", "cq", cq as usize),
            || real.call(cq, cqe),
            |call, &rc| {
                if rc == 0 {
                    let errno = Errno::save();
                    // SAFETY: the CQ was just resized, so it is live.
                    let actual = unsafe { (*cq).cqe } as u32;
                    objects::update(cq as usize, |o| o.x = actual);
                    errno.restore();
                }
                call.done(
                    &RESIZE_CQ,
                    &[cq as u64, cqe as i64 as u64],
                    rc as i64 as u64,
                    false,
                );
            },
        )
        .map(ErrnoCode)
    })
}

/// Destroys a CQ. Returns 0 on success or an errno value (EBUSY while QPs
/// use it; EINVAL, without calling the real library, for a CQ of a closed
/// context or one destroyed already).
#[no_mangle]
pub unsafe extern "C" fn ibv_destroy_cq(cq: *mut ibv_cq) -> c_int {
    export("ibv_destroy_cq", || {
        let real = DestroyCq::get()?;
        let d = Destroy::new("ibv_destroy_cq", "cq", Kind::Cq, Kind::Cq.bit());
        destroy(&d, cq, || real.call(cq)).map(ErrnoCode)
    })
}

// --- shared receive queues and queue pairs --------------------------------------------

/// Creates an SRQ on `pd`; `srq_init_attr->attr` is updated with the actual
/// sizes. Returns NULL with errno set on failure. Free it with
/// `ibv_destroy_srq()`.
#[no_mangle]
pub unsafe extern "C" fn ibv_create_srq(
    pd: *mut ibv_pd,
    srq_init_attr: *mut ibv_srq_init_attr,
) -> *mut ibv_srq {
    let caller = crate::caller!();
    export("ibv_create_srq", || {
        not_null("ibv_create_srq", "pd", pd)?;
        let real = CreateSrq::get()?;
        create(
            Some(("ibv_create_srq", "pd", pd as usize)),
            || real.call(pd, srq_init_attr),
            |srq| {
                let mut o = record(Kind::Srq, srq, context_of_pd(pd), pd as usize, caller);
                if !srq_init_attr.is_null() {
                    // SAFETY: the attributes the real library just accepted.
                    let attr = unsafe { (*srq_init_attr).attr };
                    o.x = attr.max_wr;
                    o.a = attr.max_sge as u64;
                    o.b = attr.srq_limit as u64;
                }
                track(o);
            },
            |call, srq| {
                call.done(
                    &CREATE_SRQ,
                    &[pd as u64, srq_init_attr as u64],
                    srq as u64,
                    srq.is_null(),
                )
            },
        )
    })
}

/// Destroys an SRQ. Returns 0 on success or an errno value (EBUSY while QPs
/// use it; EINVAL, without calling the real library, for an SRQ of a closed
/// context or one destroyed already).
#[no_mangle]
pub unsafe extern "C" fn ibv_destroy_srq(srq: *mut ibv_srq) -> c_int {
    export("ibv_destroy_srq", || {
        let real = DestroySrq::get()?;
        let d = Destroy::new("ibv_destroy_srq", "srq", Kind::Srq, Kind::Srq.bit());
        destroy(&d, srq, || real.call(srq)).map(ErrnoCode)
    })
}

/// Creates a QP on `pd`; `qp_init_attr->cap` is updated with the actual
/// capacities. Returns NULL with errno set on failure. Free it with
/// `ibv_destroy_qp()`.
#[no_mangle]
pub unsafe extern "C" fn ibv_create_qp(
    pd: *mut ibv_pd,
    qp_init_attr: *mut ibv_qp_init_attr,
) -> *mut ibv_qp {
    let caller = crate::caller!();
    export("ibv_create_qp", || {
        not_null("ibv_create_qp", "pd", pd)?;
        let real = CreateQp::get()?;
        create(
            Some(("ibv_create_qp", "pd", pd as usize)),
            || real.call(pd, qp_init_attr),
            |qp| {
                let mut o = record(Kind::Qp, qp, context_of_pd(pd), pd as usize, caller);
                // SAFETY: a live QP just returned by the real library.
                o.x = unsafe { (*qp).qp_num };
                if !qp_init_attr.is_null() {
                    // SAFETY: the attributes the real library just accepted;
                    // qp_type is read as the int it is in C.
                    unsafe {
                        let attr = &*qp_init_attr;
                        o.a = attr.send_cq as u64;
                        o.b = attr.recv_cq as u64;
                        o.c = attr.srq as u64;
                        o.set_sub(addr_of!(attr.qp_type).cast::<c_int>().read() as u8);
                    }
                }
                track(o);
            },
            |call, qp| {
                call.done(
                    &CREATE_QP,
                    &[pd as u64, qp_init_attr as u64],
                    qp as u64,
                    qp.is_null(),
                )
            },
        )
    })
}

/// Destroys a QP. Returns 0 on success or an errno value (EINVAL, without
/// calling the real library, for a QP of a closed context or one destroyed
/// already).
#[no_mangle]
pub unsafe extern "C" fn ibv_destroy_qp(qp: *mut ibv_qp) -> c_int {
    export("ibv_destroy_qp", || {
        let real = DestroyQp::get()?;
        let d = Destroy::new("ibv_destroy_qp", "qp", Kind::Qp, Kind::Qp.bit());
        destroy(&d, qp, || real.call(qp)).map(ErrnoCode)
    })
}
