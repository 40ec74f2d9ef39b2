//! The context's function tables. Half of the verbs API is `static inline`
//! in `verbs.h` and jumps through `ctx->ops` and the `verbs_context` in
//! front of the context, never touching an exported symbol: memory windows,
//! XRC domains, device memory, extended CQs and QPs, WQs, RWQ tables,
//! flows, thread and parent domains, counters, and the whole data path.
//! When a context is opened (`ibv_open_device`, `ibv_import_device`,
//! `verbs_open_device`), [`install`] saves the entries it wraps, per
//! context, in a lock-free side table, and writes the shim's wrappers in
//! their place. The wrappers record and call the saved originals; every
//! object the program gets is still the real library's own.
//!
//! - `objects`: the control path (create/destroy of every table-made kind).
//! - `datapath`: post/poll, only with `IBV_SHIM_CHECK=datapath`; otherwise
//!   those entries are left as the provider wrote them.
//! - `qpx`: an extended QP's `ibv_wr_*` builders, `excq`: an extended
//!   CQ's poll cursor (members of the object, not of the context's table).
//! - `keys`: the lkey index the checks use; `caps`: each queue's granted
//!   sizes; `completions`: error completions explained, `recent`: the
//!   posts they are matched to. None takes a lock on a clean post.
//! - `clean`: the checks of a post that passes them all (loads only).
//!
//! An entry the provider left NULL stays NULL (the inline verb then fails
//! with EOPNOTSUPP, as without the shim). Saved tables are never freed:
//! after `ibv_close_device` a wrapper reached through an orphan still finds
//! its original (and the exports' use-after-close checks refuse it first).

use std::marker::PhantomData;
use std::mem::{offset_of, size_of};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};

use verbs_abi::{
    ibv_context, ibv_counters, ibv_dm, ibv_flow, ibv_flow_action, ibv_mw, ibv_rwq_ind_table,
    ibv_td, ibv_wq, ibv_xrcd, verbs_context, VERBS_ABI_IS_EXTENDED,
};

use crate::addr::Addr;
use crate::addr_table::{AddrTable, Keyed};

use crate::guard::Refused;
use crate::log::Level;

mod caps;
mod clean;
mod completions;
mod datapath;
mod excq;
mod inflight;
mod keys;
mod objects;
mod qpx;
mod queues;
mod recent;
mod traced;
mod wr_rules;

/// An entry the shim wraps, typed as the shim calls its original (an enum
/// argument taken as the `c_int` it is in C): a context's saved table is
/// indexed by it, and [`original`] gives back an `F`.
pub(super) struct Slot<F> {
    index: usize,
    _f: PhantomData<F>,
}

impl<F> Clone for Slot<F> {
    fn clone(&self) -> Self {
        *self
    }
}
impl<F> Copy for Slot<F> {}

/// The slots (`slot::AllocMw`), each of its function type.
macro_rules! slots {
    ($($name:ident: $f:ty,)*) => {
        #[allow(non_camel_case_types, clippy::enum_variant_names)]
        #[repr(usize)]
        enum Index { $($name,)* }

        /// The entries the shim wraps.
        #[allow(non_upper_case_globals)]
        pub(super) mod slot {
            use super::*;
            $(pub(in super::super) const $name: Slot<$f> = Slot {
                index: Index::$name as usize,
                _f: PhantomData,
            };)*
        }

        const SLOTS: usize = [$(Index::$name),*].len();
    };
}

slots! {
    AllocMw: objects::AllocMw,
    BindMw: objects::BindMw,
    DeallocMw: objects::Destroyer<ibv_mw>,
    PollCq: datapath::PollCq,
    ReqNotifyCq: datapath::ReqNotifyCq,
    PostSrqRecv: datapath::PostSrqRecv,
    PostSend: datapath::PostSend,
    PostRecv: datapath::PostRecv,
    CreateCounters: objects::CreateCounters,
    DestroyCounters: objects::Destroyer<ibv_counters>,
    RegDmMr: objects::RegDmMr,
    AllocDm: objects::AllocDm,
    FreeDm: objects::Destroyer<ibv_dm>,
    DestroyFlowAction: objects::Destroyer<ibv_flow_action>,
    CreateFlowActionEsp: objects::CreateFlowActionEsp,
    AllocParentDomain: objects::AllocParentDomain,
    DeallocTd: objects::Destroyer<ibv_td>,
    AllocTd: objects::AllocTd,
    DestroyRwqIndTable: objects::Destroyer<ibv_rwq_ind_table>,
    CreateRwqIndTable: objects::CreateRwqIndTable,
    DestroyWq: objects::Destroyer<ibv_wq>,
    CreateWq: objects::CreateWq,
    CreateCqEx: objects::CreateCqEx,
    DestroyFlow: objects::Destroyer<ibv_flow>,
    CreateFlow: objects::CreateFlow,
    OpenQp: objects::OpenQp,
    CreateQpEx: objects::CreateQpEx,
    CreateSrqEx: objects::CreateSrqEx,
    OpenXrcd: objects::OpenXrcd,
    CloseXrcd: objects::Destroyer<ibv_xrcd>,
}

/// One context's saved originals.
struct Entry {
    /// The context's address ([`AddrTable`]'s key).
    ctx: AtomicUsize,
    fns: [AtomicUsize; SLOTS],
}

impl Keyed for Entry {
    fn key(&self) -> &AtomicUsize {
        &self.ctx
    }
}

/// Distinct context addresses a process can have interposed (a context
/// reopened at the same address reuses its entry). Zeroed static memory:
/// untouched pages cost nothing.
const CONTEXTS: usize = 1024;

static TABLE: AddrTable<Entry, CONTEXTS, CONTEXTS> = AddrTable::new(
    [const {
        Entry {
            ctx: AtomicUsize::new(0),
            fns: [const { AtomicUsize::new(0) }; SLOTS],
        }
    }; CONTEXTS],
);

static FULL_WARNED: AtomicBool = AtomicBool::new(false);

/// The entry of `ctx`, claimed if new; None when the table is full.
fn claim(ctx: usize) -> Option<&'static Entry> {
    let (e, fresh) = TABLE.claim(ctx)?;
    if fresh {
        // Its originals are saved before any wrapper that reads them is
        // written into the context's tables.
        TABLE.publish(e, ctx);
    }
    Some(e)
}

/// The original entry `slot` of the context `ctx`.
#[inline]
pub(super) fn original<F: Copy>(ctx: *mut ibv_context, slot: Slot<F>) -> Option<F> {
    const { assert!(size_of::<F>() == size_of::<usize>()) };
    let f = TABLE.find(ctx as usize)?.fns[slot.index].load(Ordering::Acquire);
    // SAFETY: `f` is non-zero only when `patch` stored it from the entry
    // this slot wraps, with a wrapper of the slot's type `F` (its contract:
    // the entry's C signature).
    (f != 0).then(|| unsafe { std::mem::transmute_copy::<usize, F>(&f) })
}

/// Saves `*field` in `e` and writes `wrapper` over it, unless the provider
/// left it NULL or it is the wrapper already (a context seen twice).
///
/// # Safety
/// `field` points to a live, writable function-pointer entry of the type
/// `Option<F>`; `W`, the slot's type, is an `unsafe extern "C" fn` with the
/// same arguments and result in the C ABI (enum arguments may be taken as
/// the `c_int` they are in C, so that no value C passes is invalid in Rust).
unsafe fn patch<F: Copy, W: Copy>(e: &Entry, slot: Slot<W>, field: *mut Option<F>, wrapper: W) {
    const { assert!(size_of::<Option<F>>() == size_of::<usize>()) };
    const { assert!(size_of::<W>() == size_of::<usize>()) };
    // SAFETY: the caller's contract.
    let Some(cur) = (unsafe { field.read() }) else {
        return;
    };
    // SAFETY: F and W are function pointers (asserted pointer-sized above).
    let (cur_addr, ours) = unsafe {
        (
            std::mem::transmute_copy::<F, usize>(&cur),
            std::mem::transmute_copy::<W, usize>(&wrapper),
        )
    };
    if cur_addr == ours {
        return;
    }
    e.fns[slot.index].store(cur_addr, Ordering::Release);
    // SAFETY: the caller's contract: the same C signature.
    unsafe { field.cast::<usize>().write(ours) };
}

/// Does the provider's `verbs_context` reach the member at `offset`? The
/// inline verbs check the same (`verbs_get_ctx_op`): `sz` counts back from
/// the embedded context.
fn reaches(vctx: *const verbs_context, offset: usize) -> bool {
    // SAFETY: an extended context; `sz` sits right before `context`, which
    // every provider writes.
    let sz = unsafe { (*vctx).sz };
    sz >= size_of::<verbs_context>() - offset
}

/// A context the real library just handed out: wrap its tables. Called
/// with no lock held, before the context is returned to the program.
///
/// # Safety
/// `ctx` is NULL or a live context just returned by the real library.
pub unsafe fn install(ctx: *mut ibv_context) {
    if ctx.is_null() {
        return;
    }
    let Some(e) = claim(ctx as usize) else {
        if !FULL_WARNED.swap(true, Ordering::Relaxed) {
            crate::log!(
                Level::Warn,
                "context {ctx:p}: more than {CONTEXTS} contexts opened; objects made through its \
                 function tables (memory windows, XRCDs, ...) are not tracked"
            );
        }
        return;
    };
    let datapath = crate::checks::datapath();
    // SAFETY: a live context just returned by the real library; `ops` is
    // its own writable table, and each `patch` writes a wrapper of the
    // entry's own signature.
    unsafe {
        let ops = std::ptr::addr_of_mut!((*ctx).ops);
        objects::patch_ops(e, ops);
        // A trace wants the posts and completions too (`datapath`).
        if datapath || crate::trace::wanted() {
            datapath::patch_ops(e, ops);
        } else if crate::faults::completions_armed() {
            datapath::patch_poll(e, ops);
        }
        if (*ctx).abi_compat == VERBS_ABI_IS_EXTENDED {
            let vctx = ctx
                .cast::<u8>()
                .sub(offset_of!(verbs_context, context))
                .cast::<verbs_context>();
            objects::patch_vctx(e, vctx);
        }
    }
    crate::log!(
        Level::Debug,
        "context {ctx:p}: function tables interposed{}",
        if datapath {
            " (with data-path checks)"
        } else {
            ""
        }
    );
}

/// `patch` for a member of `verbs_context`, when the provider's struct
/// reaches it.
macro_rules! patch_vctx {
    ($e:expr, $vctx:expr, $slot:ident, $field:ident, $wrapper:expr) => {
        if $crate::exports::interpose::reaches(
            $vctx,
            ::std::mem::offset_of!(verbs_abi::verbs_context, $field),
        ) {
            $crate::exports::interpose::patch(
                $e,
                $crate::exports::interpose::slot::$slot,
                ::std::ptr::addr_of_mut!((*$vctx).$field),
                $wrapper,
            );
        }
    };
}
use patch_vctx;

/// The context an object's first word names (every verbs object but a
/// flow starts with `struct ibv_context *context`).
///
/// # Safety
/// `obj` is NULL or points to a verbs object.
#[inline]
unsafe fn ctx_of<T>(obj: *mut T) -> *mut ibv_context {
    if obj.is_null() {
        return std::ptr::null_mut();
    }
    // SAFETY: the caller's contract.
    unsafe { obj.cast::<*mut ibv_context>().read() }
}

/// The saved original of `slot` for `ctx`: refused with EINVAL when the
/// shim has none (a context it never interposed).
#[inline]
fn orig<F: Copy>(ctx: *mut ibv_context, slot: Slot<F>, func: &str) -> Result<F, Refused> {
    match original(ctx, slot) {
        Some(f) => Ok(f),
        None => Err(super::refuse(
            format_args!("{func}: context {ctx:p} has no saved function table"),
            libc::EINVAL,
        )),
    }
}

/// An MR was deregistered through the shim (with the data-path checks on).
pub fn mr_deregistered(mr: &crate::registry::objects::Obj) {
    keys::deregistered(mr);
}

/// An MR was re-registered through the shim (with the data-path checks
/// on): the checks forget what they cached of it.
pub fn mr_reregistered() {
    keys::reregistered();
}

/// Does the shim keep anything per QP or SRQ (caps for the checks, the
/// `ibv_wr_*` builders it wrapped for the checks or a trace)?
pub fn queues_watched() -> bool {
    crate::checks::datapath() || crate::trace::wanted()
}

/// A QP or SRQ was destroyed (see [`queues_watched`]): its caps
/// and its saved `ibv_wr_*` builders go.
pub fn queue_destroyed(addr: usize) {
    caps::forget(addr);
    qpx::forget(addr);
}

/// A QP of context `ctx` was destroyed through the shim (with the
/// data-path checks on): the completions flushed after it are the
/// program's own doing.
pub fn qp_destroyed(ctx: Addr<ibv_context>, qp_num: u32) {
    completions::destroyed(ctx, qp_num);
}

/// `ibv_modify_qp` moved QP `qp_num` of `ctx` to `state` (`IBV_QPS_*`;
/// with the data-path checks on): to ERR, the completions flushed after
/// it are the program's own doing; to RESET or INIT, the QP starts again.
pub fn qp_state_set(ctx: Addr<ibv_context>, qp_num: u32, state: std::ffi::c_int) {
    use std::ffi::c_int;
    use verbs_abi::ibv_qp_state::{IBV_QPS_ERR, IBV_QPS_INIT, IBV_QPS_RESET};
    if state == IBV_QPS_ERR as c_int {
        completions::moved_to_err(ctx, qp_num);
    } else if state == IBV_QPS_RESET as c_int || state == IBV_QPS_INIT as c_int {
        completions::qp_reset(ctx, qp_num);
    }
}

/// `fork()`: the data-path checks' locks (taken after the registry's, as
/// their users take them), so that a child never inherits one held by a
/// thread that does not exist there.
pub fn fork(step: crate::registry::lock::ForkStep) {
    keys::fork(step);
    datapath::fork(step);
    completions::fork(step);
    excq::fork(step);
}

/// Work in flight (`IBV_SHIM_CHECK=inflight`): the teardown verbs' checks,
/// before each is forwarded (`site` the program's call); an MR's and a
/// CQ's are reported once the call succeeds (`Pending::report`).
pub mod teardown {
    use verbs_abi::{ibv_cq, ibv_mr, ibv_qp, ibv_srq};

    /// `ibv_destroy_qp(qp)`.
    pub fn qp(qp: *mut ibv_qp, site: usize) {
        super::inflight::qp_destroying(qp, site)
    }

    /// `ibv_modify_qp` moved `qp` to RESET.
    pub fn qp_reset(qp: *mut ibv_qp, site: usize) {
        super::inflight::qp_reset(qp, site)
    }

    /// `ibv_modify_qp` moved `qp` to ERR.
    pub fn qp_error(qp: *mut ibv_qp) {
        super::inflight::qp_error(qp)
    }

    /// `ibv_destroy_srq(srq)`.
    pub fn srq(srq: *mut ibv_srq) {
        super::inflight::srq_destroying(srq)
    }

    /// A finding of `cq` or `mr`, reported once the call succeeds.
    pub(crate) use super::inflight::Pending;

    /// `ibv_destroy_cq(cq)`.
    pub(crate) fn cq(cq: *mut ibv_cq, site: usize) -> Option<Pending> {
        super::inflight::cq_destroying(cq, site)
    }

    /// `ibv_dereg_mr` / `ibv_rereg_mr` (`verb`) of `mr`.
    pub(crate) fn mr(mr: *mut ibv_mr, verb: &'static str, site: usize) -> Option<Pending> {
        super::inflight::mr_going(mr, verb, site)
    }
}

/// At exit: what the error-completion explainer still has to say.
pub fn at_exit() {
    completions::at_exit();
}
