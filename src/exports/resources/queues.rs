//! Completion channels, CQs, SRQs and QPs.

use std::ffi::{c_int, c_void};
use std::ptr::addr_of;

use verbs_abi::{
    ibv_comp_channel, ibv_context, ibv_cq, ibv_pd, ibv_qp, ibv_qp_init_attr, ibv_srq,
    ibv_srq_init_attr,
};

use super::super::create_destroy::{context_of_pd, on_context, record, track, Destroy};
use super::super::{alive, forward, not_null};
use crate::addr::Addr;
use crate::guard::{Errno, ErrnoCode};
use crate::real::slots::{
    CreateCompChannel, CreateCq, CreateQp, CreateSrq, DestroyCompChannel, DestroyCq, DestroyQp,
    DestroySrq, ResizeCq,
};
use crate::registry::objects::{self, Facts, Kind, QpFacts};

// --- completion channels and CQs ---------------------------------------------------

/// Creates a completion event channel on `context`. Returns NULL with errno
/// set on failure. Free it with `ibv_destroy_comp_channel()`.
#[no_mangle]
pub unsafe extern "C" fn ibv_create_comp_channel(
    context: *mut ibv_context,
) -> *mut ibv_comp_channel {
    let caller = crate::caller!();
    CreateCompChannel::export(|| {
        on_context(CreateCompChannel::NAME, context, caller)?;
        let track = |ch: *mut ibv_comp_channel| {
            // SAFETY: the object the real library just returned (on a live parent).
            let o = unsafe { record(Kind::CompChannel, ch, context, 0, caller) };
            // SAFETY: a live channel just returned by the real library.
            let fd = unsafe { (*ch).fd };
            track(o.with(Facts::CompChannel { fd }));
        };
        // SAFETY: the program's arguments.
        unsafe { CreateCompChannel::create(None, track, context) }
    })
}

/// Destroys a completion channel. Returns 0 on success or an errno value
/// (EBUSY while CQs use it; EINVAL, without calling the real library, for a
/// channel of a closed context or one destroyed already).
#[no_mangle]
pub unsafe extern "C" fn ibv_destroy_comp_channel(channel: *mut ibv_comp_channel) -> c_int {
    const D: Destroy = Destroy::new(
        DestroyCompChannel::VERB,
        Kind::CompChannel,
        Kind::CompChannel.bit(),
    );
    // SAFETY: the program's argument.
    DestroyCompChannel::export(|| unsafe { DestroyCompChannel::destroy(&D, channel) })
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
    CreateCq::export(|| {
        on_context(CreateCq::NAME, context, caller)?;
        let track = |cq: *mut ibv_cq| {
            // SAFETY: the object the real library just returned (on a live parent).
            let o = unsafe { record(Kind::Cq, cq, context, channel as usize, caller) };
            // SAFETY: a live CQ just returned by the real library.
            let cqe = unsafe { (*cq).cqe };
            let comp_vector = comp_vector as u32;
            track(o.with(Facts::Cq { cqe, comp_vector }));
        };
        // SAFETY: the program's arguments.
        unsafe {
            CreateCq::create(
                Some(("channel", channel as usize)),
                track,
                context,
                cqe,
                cq_context,
                channel,
                comp_vector,
            )
        }
    })
}

/// Resizes a CQ to at least `cqe` entries. Returns 0 on success or an errno
/// value (EINVAL, without calling the real library, for a CQ of a closed
/// context).
#[no_mangle]
pub unsafe extern "C" fn ibv_resize_cq(cq: *mut ibv_cq, cqe: c_int) -> c_int {
    ResizeCq::export(|| {
        not_null(ResizeCq::NAME, "cq", cq)?;
        let real = ResizeCq::get()?;
        forward(
            || alive(ResizeCq::NAME, "cq", cq as usize),
            // SAFETY: the program's arguments, to the real function.
            || unsafe { real.call(cq, cqe) },
            |call, &rc| {
                if rc == 0 {
                    let errno = Errno::save();
                    // SAFETY: the CQ was just resized, so it is live.
                    let actual = unsafe { (*cq).cqe };
                    objects::update(cq as usize, |o| {
                        if let Facts::Cq { cqe, .. } = &mut o.facts {
                            *cqe = actual;
                        }
                    });
                    errno.restore();
                }
                // SAFETY: the arguments and the result of the real call.
                unsafe { ResizeCq::done(call, cq, cqe, rc, false) };
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
    const D: Destroy = Destroy::new(DestroyCq::VERB, Kind::Cq, Kind::Cq.bit());
    let caller = crate::caller!();
    DestroyCq::export(|| {
        let pending = if crate::checks::inflight() {
            crate::exports::interpose::teardown::cq(cq, caller)
        } else {
            None
        };
        // SAFETY: the program's argument.
        let rc = unsafe { DestroyCq::destroy(&D, cq) };
        if let (Some(p), Ok(ErrnoCode(0))) = (pending, &rc) {
            p.report();
        }
        rc
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
    CreateSrq::export(|| {
        not_null(CreateSrq::NAME, "pd", pd)?;
        let track = |srq: *mut ibv_srq| {
            // SAFETY: the object the real library just returned (on a live parent).
            let mut o = unsafe { record(Kind::Srq, srq, context_of_pd(pd), pd as usize, caller) };
            if !srq_init_attr.is_null() {
                // SAFETY: the attributes the real library just accepted.
                o.facts = Facts::srq(unsafe { &(*srq_init_attr).attr });
            }
            track(o);
        };
        // SAFETY: the program's arguments.
        unsafe { CreateSrq::create(Some(("pd", pd as usize)), track, pd, srq_init_attr) }
    })
}

/// Destroys an SRQ. Returns 0 on success or an errno value (EBUSY while QPs
/// use it; EINVAL, without calling the real library, for an SRQ of a closed
/// context or one destroyed already).
#[no_mangle]
pub unsafe extern "C" fn ibv_destroy_srq(srq: *mut ibv_srq) -> c_int {
    const D: Destroy = Destroy::new(DestroySrq::VERB, Kind::Srq, Kind::Srq.bit());
    DestroySrq::export(|| {
        if crate::checks::inflight() {
            crate::exports::interpose::teardown::srq(srq);
        }
        // SAFETY: the program's argument.
        unsafe { DestroySrq::destroy(&D, srq) }
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
    CreateQp::export(|| {
        not_null(CreateQp::NAME, "pd", pd)?;
        let track = |qp: *mut ibv_qp| {
            // SAFETY: the object the real library just returned (on a live parent).
            let mut o = unsafe { record(Kind::Qp, qp, context_of_pd(pd), pd as usize, caller) };
            let mut facts = QpFacts {
                // SAFETY: a live QP just returned by the real library.
                qp_num: unsafe { (*qp).qp_num },
                ..QpFacts::default()
            };
            if !qp_init_attr.is_null() {
                // SAFETY: the attributes the real library just accepted;
                // qp_type is read as the int it is in C.
                unsafe {
                    let attr = &*qp_init_attr;
                    facts.send_cq = Addr::of(attr.send_cq);
                    facts.recv_cq = Addr::of(attr.recv_cq);
                    facts.srq = Addr::of(attr.srq);
                    facts.qp_type = addr_of!(attr.qp_type).cast::<c_int>().read() as u8;
                }
            }
            o.facts = Facts::Qp(facts);
            track(o);
        };
        // SAFETY: the program's arguments.
        unsafe { CreateQp::create(Some(("pd", pd as usize)), track, pd, qp_init_attr) }
    })
}

/// Destroys a QP. Returns 0 on success or an errno value (EINVAL, without
/// calling the real library, for a QP of a closed context or one destroyed
/// already).
#[no_mangle]
pub unsafe extern "C" fn ibv_destroy_qp(qp: *mut ibv_qp) -> c_int {
    const D: Destroy = Destroy::new(DestroyQp::VERB, Kind::Qp, Kind::Qp.bit());
    let caller = crate::caller!();
    DestroyQp::export(|| {
        if crate::checks::inflight() {
            crate::exports::interpose::teardown::qp(qp, caller);
        }
        // SAFETY: the program's argument.
        unsafe { DestroyQp::destroy(&D, qp) }
    })
}
