//! The control path of the function tables: every object only an inline
//! verb makes (memory windows, XRCDs, device memory and its MRs, extended
//! CQs, QPs and SRQs, opened XRC QPs, WQs, RWQ tables, flows, flow actions,
//! thread and parent domains, counters) is recorded, with its parent, as
//! the exports record theirs: the same `create` / `destroy` paths (EBUSY
//! keeps the record, a destroy after close or a second destroy is refused).
//! Objects these make that an export destroys (a CQ, QP, SRQ, parent domain
//! or DM MR) are recorded under the export's kind, so `ibv_destroy_cq`,
//! `ibv_destroy_qp`, `ibv_destroy_srq`, `ibv_dealloc_pd` and `ibv_dereg_mr`
//! take them out. The queue makers (extended CQs, QPs, SRQs, XRCDs, flows)
//! are in `queues`; this module patches every entry and has the shared
//! create/destroy shapes.

use std::ffi::{c_int, c_uint};

use verbs_abi::{
    ibv_alloc_dm_attr, ibv_context, ibv_context_ops, ibv_counters, ibv_counters_init_attr,
    ibv_cq_ex, ibv_cq_init_attr_ex, ibv_dm, ibv_flow, ibv_flow_action, ibv_flow_action_esp_attr,
    ibv_flow_attr, ibv_mr, ibv_mw, ibv_mw_bind, ibv_parent_domain_init_attr, ibv_pd, ibv_qp,
    ibv_qp_init_attr_ex, ibv_qp_open_attr, ibv_rwq_ind_table, ibv_rwq_ind_table_init_attr, ibv_srq,
    ibv_srq_init_attr_ex, ibv_td, ibv_td_init_attr, ibv_wq, ibv_wq_init_attr, ibv_xrcd,
    ibv_xrcd_init_attr, verbs_context,
};

use super::super::create_destroy::{create, destroy, record, track, track_mr, Destroy};
use super::super::{alive, forward, verbs, Call};
use super::queues::*;
use super::{ctx_of, orig, patch, patch_vctx, slot, Entry, Slot};
use crate::addr::Addr;
use crate::guard::{export, Errno, ErrnoCode, Refused};
use crate::registry::objects::{self, Facts, Kind, MrVia};
use trace_format::verbs::Verb;

// `ibv_qp_init_attr_ex.comp_mask` and `ibv_srq_init_attr_ex.comp_mask` bits.
pub(super) const QP_INIT_ATTR_PD: u32 =
    verbs_abi::ibv_qp_init_attr_mask::IBV_QP_INIT_ATTR_PD as u32;
pub(super) const QP_INIT_ATTR_XRCD: u32 =
    verbs_abi::ibv_qp_init_attr_mask::IBV_QP_INIT_ATTR_XRCD as u32;
pub(super) const SRQ_INIT_ATTR_PD: u32 =
    verbs_abi::ibv_srq_init_attr_mask::IBV_SRQ_INIT_ATTR_PD as u32;
pub(super) const SRQ_INIT_ATTR_XRCD: u32 =
    verbs_abi::ibv_srq_init_attr_mask::IBV_SRQ_INIT_ATTR_XRCD as u32;

/// Wraps the entries of `ibv_context_ops` this module covers.
///
/// # Safety
/// `ops` is a live context's own table.
pub(super) unsafe fn patch_ops(e: &Entry, ops: *mut ibv_context_ops) {
    // SAFETY: the caller's contract; each wrapper has its entry's C signature.
    unsafe {
        patch(
            e,
            slot::AllocMw,
            addr_of_mut!((*ops).alloc_mw),
            alloc_mw as AllocMw,
        );
        patch(
            e,
            slot::BindMw,
            addr_of_mut!((*ops).bind_mw),
            bind_mw as BindMw,
        );
        patch(
            e,
            slot::DeallocMw,
            addr_of_mut!((*ops).dealloc_mw),
            dealloc_mw as Destroyer<ibv_mw>,
        );
    }
}

use std::ptr::addr_of_mut;

/// Wraps the entries of `verbs_context` this module covers.
///
/// # Safety
/// `vctx` is a live extended context's own `verbs_context`.
pub(super) unsafe fn patch_vctx(e: &Entry, vctx: *mut verbs_context) {
    // SAFETY: the caller's contract; each wrapper has its entry's C signature.
    unsafe {
        patch_vctx!(
            e,
            vctx,
            CreateCounters,
            create_counters,
            create_counters as CreateCounters
        );
        patch_vctx!(
            e,
            vctx,
            DestroyCounters,
            destroy_counters,
            destroy_counters as Destroyer<ibv_counters>
        );
        patch_vctx!(e, vctx, RegDmMr, reg_dm_mr, reg_dm_mr as RegDmMr);
        patch_vctx!(e, vctx, AllocDm, alloc_dm, alloc_dm as AllocDm);
        patch_vctx!(e, vctx, FreeDm, free_dm, free_dm as Destroyer<ibv_dm>);
        patch_vctx!(
            e,
            vctx,
            DestroyFlowAction,
            destroy_flow_action,
            destroy_flow_action as Destroyer<ibv_flow_action>
        );
        patch_vctx!(
            e,
            vctx,
            CreateFlowActionEsp,
            create_flow_action_esp,
            create_flow_action_esp as CreateFlowActionEsp
        );
        patch_vctx!(
            e,
            vctx,
            AllocParentDomain,
            alloc_parent_domain,
            alloc_parent_domain as AllocParentDomain
        );
        patch_vctx!(
            e,
            vctx,
            DeallocTd,
            dealloc_td,
            dealloc_td as Destroyer<ibv_td>
        );
        patch_vctx!(e, vctx, AllocTd, alloc_td, alloc_td as AllocTd);
        patch_vctx!(
            e,
            vctx,
            DestroyRwqIndTable,
            destroy_rwq_ind_table,
            destroy_rwq_ind_table as Destroyer<ibv_rwq_ind_table>
        );
        patch_vctx!(
            e,
            vctx,
            CreateRwqIndTable,
            create_rwq_ind_table,
            create_rwq_ind_table as CreateRwqIndTable
        );
        patch_vctx!(
            e,
            vctx,
            DestroyWq,
            destroy_wq,
            destroy_wq as Destroyer<ibv_wq>
        );
        patch_vctx!(e, vctx, CreateWq, create_wq, create_wq as CreateWq);
        patch_vctx!(
            e,
            vctx,
            CreateCqEx,
            create_cq_ex,
            create_cq_ex as CreateCqEx
        );
        patch_vctx!(
            e,
            vctx,
            DestroyFlow,
            ibv_destroy_flow,
            destroy_flow as Destroyer<ibv_flow>
        );
        patch_vctx!(
            e,
            vctx,
            CreateFlow,
            ibv_create_flow,
            create_flow as CreateFlow
        );
        patch_vctx!(e, vctx, OpenQp, open_qp, open_qp as OpenQp);
        patch_vctx!(
            e,
            vctx,
            CreateQpEx,
            create_qp_ex,
            create_qp_ex as CreateQpEx
        );
        patch_vctx!(
            e,
            vctx,
            CreateSrqEx,
            create_srq_ex,
            create_srq_ex as CreateSrqEx
        );
        patch_vctx!(e, vctx, OpenXrcd, open_xrcd, open_xrcd as OpenXrcd);
        patch_vctx!(
            e,
            vctx,
            CloseXrcd,
            close_xrcd,
            close_xrcd as Destroyer<ibv_xrcd>
        );
    }
}

// The entries' C signatures (enums as the `c_int` they are in C).
pub(super) type AllocMw = unsafe extern "C" fn(*mut ibv_pd, c_int) -> *mut ibv_mw;
pub(super) type BindMw = unsafe extern "C" fn(*mut ibv_qp, *mut ibv_mw, *mut ibv_mw_bind) -> c_int;
pub(super) type Destroyer<T> = unsafe extern "C" fn(*mut T) -> c_int;
pub(super) type CreateCounters =
    unsafe extern "C" fn(*mut ibv_context, *mut ibv_counters_init_attr) -> *mut ibv_counters;
pub(super) type RegDmMr =
    unsafe extern "C" fn(*mut ibv_pd, *mut ibv_dm, u64, usize, c_uint) -> *mut ibv_mr;
pub(super) type AllocDm =
    unsafe extern "C" fn(*mut ibv_context, *mut ibv_alloc_dm_attr) -> *mut ibv_dm;
pub(super) type CreateFlowActionEsp =
    unsafe extern "C" fn(*mut ibv_context, *mut ibv_flow_action_esp_attr) -> *mut ibv_flow_action;
pub(super) type AllocParentDomain =
    unsafe extern "C" fn(*mut ibv_context, *mut ibv_parent_domain_init_attr) -> *mut ibv_pd;
pub(super) type AllocTd =
    unsafe extern "C" fn(*mut ibv_context, *mut ibv_td_init_attr) -> *mut ibv_td;
pub(super) type CreateRwqIndTable = unsafe extern "C" fn(
    *mut ibv_context,
    *mut ibv_rwq_ind_table_init_attr,
) -> *mut ibv_rwq_ind_table;
pub(super) type CreateWq =
    unsafe extern "C" fn(*mut ibv_context, *mut ibv_wq_init_attr) -> *mut ibv_wq;
pub(super) type CreateCqEx =
    unsafe extern "C" fn(*mut ibv_context, *mut ibv_cq_init_attr_ex) -> *mut ibv_cq_ex;
pub(super) type CreateFlow = unsafe extern "C" fn(*mut ibv_qp, *mut ibv_flow_attr) -> *mut ibv_flow;
pub(super) type OpenQp =
    unsafe extern "C" fn(*mut ibv_context, *mut ibv_qp_open_attr) -> *mut ibv_qp;
pub(super) type CreateQpEx =
    unsafe extern "C" fn(*mut ibv_context, *mut ibv_qp_init_attr_ex) -> *mut ibv_qp;
pub(super) type CreateSrqEx =
    unsafe extern "C" fn(*mut ibv_context, *mut ibv_srq_init_attr_ex) -> *mut ibv_srq;
pub(super) type OpenXrcd =
    unsafe extern "C" fn(*mut ibv_context, *mut ibv_xrcd_init_attr) -> *mut ibv_xrcd;

/// A table create's record (`verbs::AllocMw::done`, ...): the context,
/// the parent's (or the attributes') address, the object.
pub(super) type MadeDone<T> = unsafe fn(&Call, *mut ibv_context, usize, *mut T, bool);

/// The shape of every create here: refused on a parent of a closed context
/// (`parent`: its address, 0 for none; named as `verb`'s second argument),
/// else forwarded and, when it made something, recorded by `rec`; logged
/// at debug by `done`.
#[inline(always)]
pub(super) fn made<T>(
    verb: &'static Verb,
    done: MadeDone<T>,
    ctx: *mut ibv_context,
    parent: usize,
    forward: impl FnOnce() -> *mut T,
    rec: impl FnOnce(*mut T),
) -> Result<*mut T, Refused> {
    create(
        (parent != 0).then_some((verb.name, verb.args[1].0, parent)),
        forward,
        |obj| {
            let errno = Errno::save();
            rec(obj);
            errno.restore();
        },
        // SAFETY: plain words (the objects only as addresses).
        |call, obj| unsafe { done(call, ctx, parent, obj, obj.is_null()) },
    )
}

/// Reads the program's attribute struct (the inline verb hands it on
/// unchanged), or `default` for NULL.
///
/// # Safety
/// `attr` is NULL or the program's attribute struct, passed to the verb being called.
pub(super) unsafe fn read_attr<A, R>(attr: *const A, default: R, f: impl FnOnce(&A) -> R) -> R {
    if attr.is_null() {
        return default;
    }
    // SAFETY: a non-NULL attribute struct the program passed to the verb.
    f(unsafe { &*attr })
}

/// Records a table-made object of `kind` with its `facts`.
///
/// # Safety
/// `obj` is the live object the provider just returned.
pub(super) unsafe fn track_simple<T>(
    kind: Kind,
    obj: *mut T,
    ctx: *mut ibv_context,
    parent: usize,
    caller: usize,
    facts: Facts,
) {
    // SAFETY: the caller's contract.
    track(unsafe { record(kind, obj, ctx, parent, caller) }.with(facts));
}

/// The shared destroy of a table-made object whose first word is its context.
#[inline(always)]
fn unmade<T>(d: &Destroy, slot: Slot<Destroyer<T>>, obj: *mut T, ctx: *mut ibv_context) -> c_int {
    export(d.func, || {
        let real: Destroyer<T> = orig(ctx, slot, d.func)?;
        // SAFETY: the provider's own entry, with the inline verb's argument.
        destroy(d, obj, || unsafe { real(obj) }).map(ErrnoCode)
    })
}

/// The table's destroys: each named as its verb (`verbs::DeallocMw`) and
/// its entry (`slot::DeallocMw`).
macro_rules! destroyers {
    ($($name:ident($ty:ty) = $verb:ident, $kind:ident;)*) => {$(
        unsafe extern "C" fn $name(obj: *mut $ty) -> c_int {
            const D: Destroy = Destroy::new(verbs::$verb::VERB, Kind::$kind, Kind::$kind.bit());
            // SAFETY: the inline verb read this object's context to reach the table.
            let ctx = unsafe { ctx_of(obj) };
            unmade(&D, slot::$verb, obj, ctx)
        }
    )*};
}

destroyers! {
    destroy_counters(ibv_counters) = DestroyCounters, Counters;
    free_dm(ibv_dm) = FreeDm, Dm;
    destroy_flow_action(ibv_flow_action) = DestroyFlowAction, FlowAction;
    dealloc_td(ibv_td) = DeallocTd, Td;
    destroy_rwq_ind_table(ibv_rwq_ind_table) = DestroyRwqIndTable, RwqIndTable;
    destroy_wq(ibv_wq) = DestroyWq, Wq;
    close_xrcd(ibv_xrcd) = CloseXrcd, Xrcd;
}

/// `ibv_dealloc_mw`: with work in flight checked, the window's own
/// outstanding binds and invalidations are looked for first.
unsafe extern "C" fn dealloc_mw(mw: *mut ibv_mw) -> c_int {
    let site = crate::caller!();
    const D: Destroy = Destroy::new(verbs::DeallocMw::VERB, Kind::Mw, Kind::Mw.bit());
    if crate::checks::inflight() {
        super::datapath::checked(verbs::DeallocMw::NAME, || {
            super::inflight::mw_going(mw, site)
        });
    }
    // SAFETY: the inline verb read this object's context to reach the table.
    let ctx = unsafe { ctx_of(mw) };
    unmade(&D, slot::DeallocMw, mw, ctx)
}

/// `ibv_destroy_flow`: a flow's context is its second member.
unsafe extern "C" fn destroy_flow(flow: *mut ibv_flow) -> c_int {
    let ctx = if flow.is_null() {
        std::ptr::null_mut()
    } else {
        // SAFETY: the inline verb read this flow's context to reach the table.
        unsafe { (*flow).context }
    };
    const D: Destroy = Destroy::new(verbs::DestroyFlow::VERB, Kind::Flow, Kind::Flow.bit());
    unmade(&D, slot::DestroyFlow, flow, ctx)
}

unsafe extern "C" fn alloc_mw(pd: *mut ibv_pd, mw_type: c_int) -> *mut ibv_mw {
    let caller = crate::caller!();
    verbs::AllocMw::export(|| {
        // SAFETY: the inline verb read this PD's context to reach the table.
        let ctx = unsafe { ctx_of(pd) };
        let real: AllocMw = orig(ctx, slot::AllocMw, verbs::AllocMw::NAME)?;
        made(
            verbs::AllocMw::VERB,
            verbs::AllocMw::done,
            ctx,
            pd as usize,
            // SAFETY: the provider's own entry, with the inline verb's arguments.
            || unsafe { real(pd, mw_type) },
            |mw| {
                // SAFETY: the object the real library just returned (on a live parent).
                let o = unsafe { record(Kind::Mw, mw, ctx, pd as usize, caller) };
                // SAFETY: a live MW just returned by the provider.
                let rkey = unsafe { (*mw).rkey };
                let mw_type = mw_type as u32;
                track(o.with(Facts::Mw { mw_type, rkey }));
            },
        )
    })
}

/// `ibv_bind_mw` (type 1): forwarded; the MW's record follows its new rkey.
unsafe extern "C" fn bind_mw(qp: *mut ibv_qp, mw: *mut ibv_mw, bind: *mut ibv_mw_bind) -> c_int {
    let site = crate::caller!();
    verbs::BindMw::export(|| {
        // SAFETY: the inline verb read this QP's context to reach the table.
        let ctx = unsafe { ctx_of(qp) };
        let real: BindMw = orig(ctx, slot::BindMw, verbs::BindMw::NAME)?;
        let added = std::cell::Cell::new(super::inflight::Added::NONE);
        forward(
            || {
                alive(verbs::BindMw::NAME, "qp", qp as usize)?;
                alive(verbs::BindMw::NAME, "mw", mw as usize)?;
                if crate::checks::inflight() {
                    super::datapath::checked(verbs::BindMw::NAME, || {
                        // SAFETY: a live QP (just checked) and the program's bind.
                        added.set(unsafe { super::inflight::bind_posting(qp, mw, bind, site) })
                    });
                }
                Ok(())
            },
            // SAFETY: the provider's own entry, with the inline verb's arguments.
            || unsafe { real(qp, mw, bind) },
            |call, &rc| {
                super::inflight::bind_posted(qp, added.get(), rc);
                if rc == 0 && !mw.is_null() {
                    let errno = Errno::save();
                    // SAFETY: the MW was just bound, so it is live.
                    let now = unsafe { (*mw).rkey };
                    objects::update(mw as usize, |o| {
                        if let Facts::Mw { rkey, .. } = &mut o.facts {
                            *rkey = now;
                        }
                    });
                    errno.restore();
                }
                // SAFETY: plain words (the objects only as addresses).
                unsafe { verbs::BindMw::done(call, qp, mw, rc, false) };
            },
        )
        .map(ErrnoCode)
    })
}

unsafe extern "C" fn create_counters(
    ctx: *mut ibv_context,
    attr: *mut ibv_counters_init_attr,
) -> *mut ibv_counters {
    let caller = crate::caller!();
    verbs::CreateCounters::export(|| {
        let real: CreateCounters = orig(ctx, slot::CreateCounters, verbs::CreateCounters::NAME)?;
        // SAFETY: the provider's own entry, with the inline verb's arguments.
        made(
            verbs::CreateCounters::VERB,
            verbs::CreateCounters::done,
            ctx,
            0,
            || unsafe { real(ctx, attr) },
            // SAFETY: the object the provider just returned.
            |c| unsafe { track_simple(Kind::Counters, c, ctx, 0, caller, Facts::Id(0)) },
        )
    })
}

unsafe extern "C" fn reg_dm_mr(
    pd: *mut ibv_pd,
    dm: *mut ibv_dm,
    offset: u64,
    length: usize,
    access: c_uint,
) -> *mut ibv_mr {
    let caller = crate::caller!();
    verbs::RegDmMr::export(|| {
        // SAFETY: the inline verb read this PD's context to reach the table.
        let ctx = unsafe { ctx_of(pd) };
        let real: RegDmMr = orig(ctx, slot::RegDmMr, verbs::RegDmMr::NAME)?;
        alive(verbs::RegDmMr::NAME, "dm", dm as usize)?;
        made(
            verbs::RegDmMr::VERB,
            verbs::RegDmMr::done,
            ctx,
            pd as usize,
            // SAFETY: the provider's own entry, with the inline verb's arguments.
            || unsafe { real(pd, dm, offset, length, access) },
            // SAFETY: the MR the provider just registered on the live `pd`.
            |mr| unsafe { track_mr(mr, pd, offset, length, access, MrVia::RegDmMr, caller) },
        )
    })
}

unsafe extern "C" fn alloc_dm(ctx: *mut ibv_context, attr: *mut ibv_alloc_dm_attr) -> *mut ibv_dm {
    let caller = crate::caller!();
    verbs::AllocDm::export(|| {
        let real: AllocDm = orig(ctx, slot::AllocDm, verbs::AllocDm::NAME)?;
        // SAFETY: the provider's own entry, with the inline verb's arguments.
        made(
            verbs::AllocDm::VERB,
            verbs::AllocDm::done,
            ctx,
            0,
            || unsafe { real(ctx, attr) },
            |dm| {
                // SAFETY: NULL or the program's attributes, passed to the verb.
                let length = unsafe { read_attr(attr, 0, |a| a.length) };
                // SAFETY: the object the provider just returned.
                unsafe {
                    track_simple(
                        Kind::Dm,
                        dm,
                        ctx,
                        0,
                        caller,
                        Facts::Dm {
                            length: length as u64,
                        },
                    )
                }
            },
        )
    })
}

unsafe extern "C" fn create_flow_action_esp(
    ctx: *mut ibv_context,
    attr: *mut ibv_flow_action_esp_attr,
) -> *mut ibv_flow_action {
    let caller = crate::caller!();
    verbs::CreateFlowActionEsp::export(|| {
        let real: CreateFlowActionEsp = orig(
            ctx,
            slot::CreateFlowActionEsp,
            verbs::CreateFlowActionEsp::NAME,
        )?;
        // SAFETY: the provider's own entry, with the inline verb's arguments.
        made(
            verbs::CreateFlowActionEsp::VERB,
            verbs::CreateFlowActionEsp::done,
            ctx,
            0,
            || unsafe { real(ctx, attr) },
            // SAFETY: the object the provider just returned.
            |a| unsafe { track_simple(Kind::FlowAction, a, ctx, 0, caller, Facts::Id(0)) },
        )
    })
}

unsafe extern "C" fn alloc_parent_domain(
    ctx: *mut ibv_context,
    attr: *mut ibv_parent_domain_init_attr,
) -> *mut ibv_pd {
    let caller = crate::caller!();
    verbs::AllocParentDomain::export(|| {
        let real: AllocParentDomain =
            orig(ctx, slot::AllocParentDomain, verbs::AllocParentDomain::NAME)?;
        // SAFETY: NULL or the program's attributes, passed to the verb.
        let pd = unsafe { read_attr(attr, 0, |a| a.pd as usize) };
        made(
            verbs::AllocParentDomain::VERB,
            verbs::AllocParentDomain::done,
            ctx,
            pd,
            // SAFETY: the provider's own entry, with the inline verb's arguments.
            || unsafe { real(ctx, attr) },
            |p| {
                // SAFETY: the object the real library just returned (on a live parent).
                let o = unsafe { record(Kind::ParentDomain, p, ctx, pd, caller) };
                // SAFETY: a live PD just returned by the provider.
                let handle = unsafe { (*p).handle };
                // Its TD: what keeps `ibv_dealloc_td` busy (`objects::holders`).
                // SAFETY: NULL or the program's attributes, passed to the verb.
                let td = Addr::of(unsafe { read_attr(attr, std::ptr::null_mut(), |a| a.td) });
                track(o.with(Facts::ParentDomain { handle, td }));
            },
        )
    })
}

unsafe extern "C" fn alloc_td(ctx: *mut ibv_context, attr: *mut ibv_td_init_attr) -> *mut ibv_td {
    let caller = crate::caller!();
    verbs::AllocTd::export(|| {
        let real: AllocTd = orig(ctx, slot::AllocTd, verbs::AllocTd::NAME)?;
        // SAFETY: the provider's own entry, with the inline verb's arguments.
        made(
            verbs::AllocTd::VERB,
            verbs::AllocTd::done,
            ctx,
            0,
            || unsafe { real(ctx, attr) },
            // SAFETY: the object the provider just returned.
            |td| unsafe { track_simple(Kind::Td, td, ctx, 0, caller, Facts::Id(0)) },
        )
    })
}

unsafe extern "C" fn create_rwq_ind_table(
    ctx: *mut ibv_context,
    attr: *mut ibv_rwq_ind_table_init_attr,
) -> *mut ibv_rwq_ind_table {
    let caller = crate::caller!();
    verbs::CreateRwqIndTable::export(|| {
        let real: CreateRwqIndTable =
            orig(ctx, slot::CreateRwqIndTable, verbs::CreateRwqIndTable::NAME)?;
        // SAFETY: the provider's own entry, with the inline verb's arguments.
        made(
            verbs::CreateRwqIndTable::VERB,
            verbs::CreateRwqIndTable::done,
            ctx,
            0,
            || unsafe { real(ctx, attr) },
            |t| {
                // SAFETY: a live table just returned by the provider.
                let num = unsafe { (*t).ind_tbl_num } as u32;
                // SAFETY: the object the provider just returned.
                unsafe { track_simple(Kind::RwqIndTable, t, ctx, 0, caller, Facts::Id(num)) }
            },
        )
    })
}

unsafe extern "C" fn create_wq(ctx: *mut ibv_context, attr: *mut ibv_wq_init_attr) -> *mut ibv_wq {
    let caller = crate::caller!();
    verbs::CreateWq::export(|| {
        let real: CreateWq = orig(ctx, slot::CreateWq, verbs::CreateWq::NAME)?;
        // SAFETY: NULL or the program's attributes, passed to the verb.
        let pd = unsafe { read_attr(attr, 0, |a| a.pd as usize) };
        made(
            verbs::CreateWq::VERB,
            verbs::CreateWq::done,
            ctx,
            pd,
            // SAFETY: the provider's own entry, with the inline verb's arguments.
            || unsafe { real(ctx, attr) },
            |wq| {
                // SAFETY: a live WQ just returned by the provider.
                let num = unsafe { (*wq).wq_num };
                // SAFETY: the object the provider just returned.
                unsafe { track_simple(Kind::Wq, wq, ctx, pd, caller, Facts::Id(num)) }
            },
        )
    })
}
