//! The queues the function tables make: extended CQs, QPs (also XRC, and
//! `ibv_open_qp`'s), extended SRQs, XRC domains, flows. Recorded as the
//! exports' kinds where an export destroys them (`objects` has the rest
//! and the patching).

use std::ffi::c_int;
use std::ptr::addr_of;

use verbs_abi::{
    ibv_context, ibv_cq_ex, ibv_cq_init_attr_ex, ibv_flow, ibv_flow_attr, ibv_qp,
    ibv_qp_init_attr_ex, ibv_qp_open_attr, ibv_srq, ibv_srq_init_attr_ex, ibv_xrcd,
    ibv_xrcd_init_attr,
};

use super::super::create_destroy::{create, record, track};
use super::super::{tid, verbs};
use super::objects::*;
use super::{ctx_of, orig, slot};
use crate::addr::Addr;
use crate::guard::Errno;
use crate::registry::objects::{Facts, Kind, Obj, QpFacts};

/// `IBV_QP_INIT_ATTR_SEND_OPS_FLAGS`: the QP has `ibv_wr_*` builders.
const QP_INIT_ATTR_SEND_OPS_FLAGS: u32 =
    verbs_abi::ibv_qp_init_attr_mask::IBV_QP_INIT_ATTR_SEND_OPS_FLAGS as u32;

/// An extended CQ is a CQ (`ibv_destroy_cq` takes it).
pub(super) unsafe extern "C" fn create_cq_ex(
    ctx: *mut ibv_context,
    attr: *mut ibv_cq_init_attr_ex,
) -> *mut ibv_cq_ex {
    let caller = crate::caller!();
    verbs::CreateCqEx::export(|| {
        let real: CreateCqEx = orig(ctx, slot::CreateCqEx, verbs::CreateCqEx::NAME)?;
        // SAFETY: NULL or the program's attributes, passed to the verb.
        let (channel, vector) =
            unsafe { read_attr(attr, (0, 0), |a| (a.channel as usize, a.comp_vector)) };
        made(
            verbs::CreateCqEx::VERB,
            verbs::CreateCqEx::done,
            ctx,
            channel,
            // SAFETY: the provider's own entry, with the inline verb's arguments.
            || unsafe { real(ctx, attr) },
            |cq| {
                // SAFETY: the object the real library just returned (on a live parent).
                let o = unsafe { record(Kind::Cq, cq, ctx, channel, caller) };
                // SAFETY: a live CQ just returned by the provider.
                let cqe = unsafe { (*cq).cqe };
                track(o.with(Facts::Cq {
                    cqe,
                    comp_vector: vector,
                }));
                // The cursor's completions: explained, faulted, traced.
                if crate::checks::datapath()
                    || crate::trace::wanted()
                    || crate::faults::completions_armed()
                {
                    // SAFETY: NULL or the program's attributes, passed to the verb.
                    let wc_flags = unsafe { read_attr(attr, 0, |a| a.wc_flags) };
                    // SAFETY: a live extended CQ just returned by the provider.
                    unsafe { super::excq::patch(cq, wc_flags) };
                }
            },
        )
    })
}

pub(super) unsafe extern "C" fn create_flow(
    qp: *mut ibv_qp,
    attr: *mut ibv_flow_attr,
) -> *mut ibv_flow {
    let caller = crate::caller!();
    verbs::CreateFlow::export(|| {
        // SAFETY: the inline verb read this QP's context to reach the table.
        let ctx = unsafe { ctx_of(qp) };
        let real: CreateFlow = orig(ctx, slot::CreateFlow, verbs::CreateFlow::NAME)?;
        made(
            verbs::CreateFlow::VERB,
            verbs::CreateFlow::done,
            ctx,
            qp as usize,
            // SAFETY: the provider's own entry, with the inline verb's arguments.
            || unsafe { real(qp, attr) },
            |flow| {
                // A flow's first member is not its context: record it by hand.
                // SAFETY: a live flow just returned by the provider.
                let handle = unsafe { (*flow).handle };
                let o = Obj::new(
                    Kind::Flow,
                    flow as usize,
                    ctx as usize,
                    qp as usize,
                    caller,
                    tid(),
                );
                track(o.with(Facts::Id(handle)));
            },
        )
    })
}

/// Records a QP made by `ibv_create_qp_ex` or `ibv_open_qp` on `parent`
/// (`facts` but its number, which is read from it).
///
/// # Safety
/// `qp` is the live QP the provider just returned.
unsafe fn track_qp(
    qp: *mut ibv_qp,
    ctx: *mut ibv_context,
    parent: usize,
    facts: QpFacts,
    caller: usize,
) {
    // SAFETY: the caller's contract.
    let o = unsafe { record(Kind::Qp, qp, ctx, parent, caller) };
    // SAFETY: the caller's contract.
    let qp_num = unsafe { (*qp).qp_num };
    track(o.with(Facts::Qp(QpFacts { qp_num, ..facts })));
}

pub(super) unsafe extern "C" fn create_qp_ex(
    ctx: *mut ibv_context,
    attr: *mut ibv_qp_init_attr_ex,
) -> *mut ibv_qp {
    let caller = crate::caller!();
    verbs::CreateQpEx::export(|| {
        let real: CreateQpEx = orig(ctx, slot::CreateQpEx, verbs::CreateQpEx::NAME)?;
        let (mut parent, mut facts, mut send_ops) = (0, QpFacts::default(), None);
        if !attr.is_null() {
            // SAFETY: the program's attributes (the inline verb passes them
            // on); qp_type is read as the int it is in C.
            unsafe {
                let a = &*attr;
                parent = if a.comp_mask & QP_INIT_ATTR_PD != 0 {
                    a.pd as usize
                } else if a.comp_mask & QP_INIT_ATTR_XRCD != 0 {
                    a.xrcd as usize
                } else {
                    0
                };
                facts = QpFacts {
                    qp_type: addr_of!(a.qp_type).cast::<c_int>().read() as u8,
                    send_cq: Addr::of(a.send_cq),
                    recv_cq: Addr::of(a.recv_cq),
                    srq: Addr::of(a.srq),
                    qp_num: 0,
                };
                send_ops =
                    (a.comp_mask & QP_INIT_ATTR_SEND_OPS_FLAGS != 0).then_some(a.send_ops_flags);
            }
        }
        create(
            (parent != 0).then_some((verbs::CreateQpEx::NAME, "pd", parent)),
            // SAFETY: the provider's own entry, with the inline verb's arguments.
            || unsafe { real(ctx, attr) },
            |qp| {
                let errno = Errno::save();
                // SAFETY: the QP the provider just returned.
                unsafe { track_qp(qp, ctx, parent, facts, caller) };
                // Its `ibv_wr_*` builders: checked, traced.
                if let Some(ops) = send_ops {
                    if super::queues_watched() {
                        // SAFETY: a live QP just returned by the provider,
                        // made with these send ops.
                        unsafe { super::qpx::patch(qp, ops) };
                    }
                }
                errno.restore();
            },
            // SAFETY: the QP the provider just returned.
            |call, qp| unsafe { verbs::CreateQpEx::done(call, ctx, attr, qp, qp.is_null()) },
        )
    })
}

pub(super) unsafe extern "C" fn open_qp(
    ctx: *mut ibv_context,
    attr: *mut ibv_qp_open_attr,
) -> *mut ibv_qp {
    let caller = crate::caller!();
    verbs::OpenQp::export(|| {
        let real: OpenQp = orig(ctx, slot::OpenQp, verbs::OpenQp::NAME)?;
        let (xrcd, qp_type) = if attr.is_null() {
            (0, 0)
        } else {
            // SAFETY: the program's attributes; qp_type read as a C int.
            unsafe {
                (
                    (*attr).xrcd as usize,
                    addr_of!((*attr).qp_type).cast::<c_int>().read(),
                )
            }
        };
        made(
            verbs::OpenQp::VERB,
            verbs::OpenQp::done,
            ctx,
            xrcd,
            // SAFETY: the provider's own entry, with the inline verb's arguments.
            || unsafe { real(ctx, attr) },
            |qp| {
                let facts = QpFacts {
                    qp_type: qp_type as u8,
                    ..QpFacts::default()
                };
                // SAFETY: the QP the provider just returned.
                unsafe { track_qp(qp, ctx, xrcd, facts, caller) }
            },
        )
    })
}

pub(super) unsafe extern "C" fn create_srq_ex(
    ctx: *mut ibv_context,
    attr: *mut ibv_srq_init_attr_ex,
) -> *mut ibv_srq {
    let caller = crate::caller!();
    verbs::CreateSrqEx::export(|| {
        let real: CreateSrqEx = orig(ctx, slot::CreateSrqEx, verbs::CreateSrqEx::NAME)?;
        let parent = if attr.is_null() {
            0
        } else {
            // SAFETY: the program's attributes (the inline verb passes them on).
            unsafe {
                let a = &*attr;
                if a.comp_mask & SRQ_INIT_ATTR_PD != 0 {
                    a.pd as usize
                } else if a.comp_mask & SRQ_INIT_ATTR_XRCD != 0 {
                    a.xrcd as usize
                } else {
                    0
                }
            }
        };
        made(
            verbs::CreateSrqEx::VERB,
            verbs::CreateSrqEx::done,
            ctx,
            parent,
            // SAFETY: the provider's own entry, with the inline verb's arguments.
            || unsafe { real(ctx, attr) },
            |srq| {
                // SAFETY: the object the real library just returned (on a live parent).
                let mut o = unsafe { record(Kind::Srq, srq, ctx, parent, caller) };
                if !attr.is_null() {
                    // SAFETY: the attributes the provider just accepted.
                    o.facts = Facts::srq(unsafe { &(*attr).attr });
                }
                track(o);
            },
        )
    })
}

pub(super) unsafe extern "C" fn open_xrcd(
    ctx: *mut ibv_context,
    attr: *mut ibv_xrcd_init_attr,
) -> *mut ibv_xrcd {
    let caller = crate::caller!();
    verbs::OpenXrcd::export(|| {
        let real: OpenXrcd = orig(ctx, slot::OpenXrcd, verbs::OpenXrcd::NAME)?;
        // SAFETY: the provider's own entry, with the inline verb's arguments.
        made(
            verbs::OpenXrcd::VERB,
            verbs::OpenXrcd::done,
            ctx,
            0,
            || unsafe { real(ctx, attr) },
            // SAFETY: the object the provider just returned.
            |x| unsafe { track_simple(Kind::Xrcd, x, ctx, 0, caller, Facts::Id(0)) },
        )
    })
}
