//! The extended post API (`ibv_wr_start` ... `ibv_wr_complete`, perftest's
//! default), with the data-path checks or a trace. Its builders live in
//! each QP's `ibv_qp_ex`, not in the context's table: when `create_qp_ex`
//! returns a QP made with `IBV_QP_INIT_ATTR_SEND_OPS_FLAGS`, [`patch`]
//! saves the members it wraps in a lock-free per-QP side table and writes
//! the wrappers in their place.
//!
//! The builder of an operation (`ibv_wr_send`, `ibv_wr_rdma_read`, ...)
//! records the work request under construction (its opcode and `wr_id`)
//! and checks the QP's state; the data setters (`ibv_wr_set_sge`,
//! `_sge_list`, `_inline_data`, `_inline_data_list`) run the same checks
//! as `ibv_post_send` (`datapath`) on what they are given, so the site of
//! a report is the program's line that set the bad SGE. With a trace,
//! `ibv_wr_complete` puts a post event per request of its batch (an
//! aborted one is no post). Everything is forwarded unchanged.
//!
//! The state under construction is a few relaxed atomics per QP: between
//! `ibv_wr_start` and `ibv_wr_complete` a QP's builders are called from one
//! thread (`ibv_wr_post(3)`), so nothing is locked.

use std::ffi::{c_int, c_void};
use std::mem::size_of;
use std::ptr::{addr_of, addr_of_mut};
use std::sync::atomic::{AtomicBool, AtomicI32, AtomicU32, AtomicU64, AtomicUsize, Ordering::*};

use verbs_abi::ibv_wr_opcode as Op;
use verbs_abi::{ibv_data_buf, ibv_mw, ibv_mw_bind_info, ibv_qp, ibv_qp_ex, ibv_sge};

use super::datapath::{self, checked, Queue, Wr};
use super::wr_rules;
use super::{caps, completions, traced};
use crate::addr_table::{AddrTable, Keyed};
use crate::checks::{self, Check};
use crate::log::Level;
use crate::real::slots::QpToQpEx;

/// The `ibv_qp_ex` members wrapped, as indices into a QP's saved originals.
#[derive(Clone, Copy)]
#[repr(usize)]
enum F {
    Start,
    Complete,
    Abort,
    Send,
    SendImm,
    SendInv,
    SendTso,
    RdmaWrite,
    RdmaWriteImm,
    RdmaRead,
    AtomicCmpSwp,
    AtomicFetchAdd,
    AtomicWrite,
    BindMw,
    LocalInv,
    SetSge,
    SetSgeList,
    SetInlineData,
    SetInlineDataList,
}

const FNS: usize = F::SetInlineDataList as usize + 1;

/// No work request begun since `ibv_wr_start` (a setter then is the
/// provider's error to report, not checked here).
const NONE: c_int = -1;

/// One QP's saved originals and the work request under construction.
struct Qpx {
    /// The `ibv_qp_ex` address ([`AddrTable`]'s key).
    qp: AtomicUsize,
    /// The QP's `ibv_qp` address, by which a destroy names it (the same as
    /// `qp` for every provider built on rdma-core's `verbs_qp`).
    base: AtomicUsize,
    fns: [AtomicUsize; FNS],
    /// The opcode (`IBV_WR_*`) and `wr_id` of the last builder called.
    op: AtomicI32,
    wr_id: AtomicU64,
    /// With a trace: the `wr_id`s built since `ibv_wr_start`, whose post
    /// events `ibv_wr_complete` puts (an aborted batch is no post). A
    /// longer batch has the rest put at their builders.
    pending: [AtomicU64; PENDING],
    npending: AtomicU32,
}

const PENDING: usize = 16;

/// Distinct QP addresses a process can have wrapped. Zeroed static
/// memory: untouched pages cost nothing.
const QPS: usize = 4096;

static TABLE: AddrTable<Qpx, QPS, QPS> = AddrTable::new(
    [const {
        Qpx {
            qp: AtomicUsize::new(0),
            base: AtomicUsize::new(0),
            fns: [const { AtomicUsize::new(0) }; FNS],
            op: AtomicI32::new(NONE),
            wr_id: AtomicU64::new(0),
            pending: [const { AtomicU64::new(0) }; PENDING],
            npending: AtomicU32::new(0),
        }
    }; QPS],
);

static FULL_WARNED: AtomicBool = AtomicBool::new(false);

impl Keyed for Qpx {
    fn key(&self) -> &AtomicUsize {
        &self.qp
    }
}

/// The entry of the extended QP `x`, if it was wrapped.
#[inline]
fn find(x: *mut ibv_qp_ex) -> Option<&'static Qpx> {
    TABLE.find(x as usize)
}

/// Set once a QP's `ibv_qp_ex` was not at its `ibv_qp`'s address (then a
/// destroy searches the table by `base`).
static OFFSET_SEEN: AtomicBool = AtomicBool::new(false);

/// The entry of `x`, claimed if new (a destroyed QP's entry is reused);
/// None when the table is full.
fn claim(x: *mut ibv_qp_ex) -> Option<&'static Qpx> {
    let (e, fresh) = TABLE.claim(x as usize)?;
    if fresh {
        // Its originals are saved before its wrappers are written.
        TABLE.publish(e, x as usize);
    }
    Some(e)
}

/// A QP (`ibv_qp` address `qp`) was destroyed: its entry is freed, so a
/// long-running program that makes and destroys QPs never fills the table.
pub(super) fn forget(qp: usize) {
    let e = match find(qp as *mut ibv_qp_ex) {
        Some(e) if e.base.load(Relaxed) == qp => Some(e),
        _ if OFFSET_SEEN.load(Relaxed) => TABLE.live().find(|e| e.base.load(Relaxed) == qp),
        _ => None,
    };
    if let Some(e) = e {
        for f in &e.fns {
            f.store(0, Relaxed);
        }
        e.op.store(NONE, Relaxed);
        e.npending.store(0, Relaxed);
        e.base.store(0, Relaxed);
        TABLE.release(e.qp.load(Acquire));
    }
}

impl Qpx {
    /// The saved original `f`, as the member's function type `T`.
    #[inline]
    fn orig<T: Copy>(&self, f: F) -> Option<T> {
        const { assert!(size_of::<T>() == size_of::<usize>()) };
        let a = self.fns[f as usize].load(Acquire);
        // SAFETY: non-zero only when `patch` stored it from the member of
        // slot `f`, whose type is `T` (each wrapper asks for its own).
        (a != 0).then(|| unsafe { std::mem::transmute_copy::<usize, T>(&a) })
    }
}

/// Saves `*field` in `e` and writes `wrapper` over it (a member the
/// provider left NULL stays NULL).
///
/// # Safety
/// `field` is a live, writable member of type `Option<T>`; `wrapper` has
/// its C signature.
unsafe fn wrap<T: Copy, W: Copy>(e: &Qpx, f: F, field: *mut Option<T>, wrapper: W) {
    const { assert!(size_of::<Option<T>>() == size_of::<usize>()) };
    const { assert!(size_of::<W>() == size_of::<usize>()) };
    // SAFETY: the caller's contract.
    let Some(cur) = (unsafe { field.read() }) else {
        e.fns[f as usize].store(0, Release);
        return;
    };
    // SAFETY: both are function pointers (pointer-sized, asserted).
    let (cur, ours) = unsafe {
        (
            std::mem::transmute_copy::<T, usize>(&cur),
            std::mem::transmute_copy::<W, usize>(&wrapper),
        )
    };
    if cur == ours {
        return;
    }
    e.fns[f as usize].store(cur, Release);
    // SAFETY: the caller's contract: the same C signature.
    unsafe { field.cast::<usize>().write(ours) };
}

/// `IBV_QP_EX_WITH_ATOMIC_WRITE`: the one builder newer than `ibv_qp_ex`
/// itself. A provider that accepted it has the member; an older one's
/// struct may end before it, so it is not touched otherwise.
const WITH_ATOMIC_WRITE: u64 =
    verbs_abi::ibv_qp_create_send_ops_flags::IBV_QP_EX_WITH_ATOMIC_WRITE as u64;

/// A QP `create_qp_ex` just made with `send_ops` (its
/// `send_ops_flags`): wrap its builders. Called with no lock held, before
/// the QP is returned to the program.
///
/// # Safety
/// `qp` is a live QP just returned by the provider for those send ops.
pub(super) unsafe fn patch(qp: *mut ibv_qp, send_ops: u64) {
    let Ok(to_ex) = QpToQpEx::unhooked() else {
        return;
    };
    // SAFETY: the caller's contract: a live QP made with send ops.
    let x = unsafe { to_ex.call(qp) };
    if x.is_null() {
        return;
    }
    let Some(e) = claim(x) else {
        if !FULL_WARNED.swap(true, Relaxed) {
            crate::log!(
                Level::Warn,
                "qp {qp:p}: more than {QPS} extended QPs alive; the ibv_wr_* calls of this one \
                 are not checked"
            );
        }
        return;
    };
    e.op.store(NONE, Relaxed);
    e.base.store(qp as usize, Relaxed);
    if x.cast::<ibv_qp>() != qp {
        OFFSET_SEEN.store(true, Relaxed);
    }
    macro_rules! w {
        ($f:ident, $field:ident, $wrapper:expr) => {
            wrap(e, F::$f, addr_of_mut!((*x).$field), $wrapper)
        };
    }
    // SAFETY: a live extended QP just returned by the provider: its own
    // members, each given a wrapper of the member's signature.
    unsafe {
        w!(Start, wr_start, wr_start as Void);
        w!(Complete, wr_complete, wr_complete as Complete);
        w!(Abort, wr_abort, wr_abort as Void);
        w!(Send, wr_send, wr_send as Void);
        w!(
            SendImm,
            wr_send_imm,
            wr_send_imm as unsafe extern "C" fn(_, u32)
        );
        w!(
            SendInv,
            wr_send_inv,
            wr_send_inv as unsafe extern "C" fn(_, u32)
        );
        w!(SendTso, wr_send_tso, wr_send_tso as SendTso);
        w!(RdmaWrite, wr_rdma_write, wr_rdma_write as Rdma);
        w!(
            RdmaWriteImm,
            wr_rdma_write_imm,
            wr_rdma_write_imm as RdmaImm
        );
        w!(RdmaRead, wr_rdma_read, wr_rdma_read as Rdma);
        w!(AtomicCmpSwp, wr_atomic_cmp_swp, wr_atomic_cmp_swp as Cas);
        w!(
            AtomicFetchAdd,
            wr_atomic_fetch_add,
            wr_atomic_fetch_add as Faa
        );
        if send_ops & WITH_ATOMIC_WRITE != 0 {
            w!(AtomicWrite, wr_atomic_write, wr_atomic_write as AtomicWrite);
        } else {
            e.fns[F::AtomicWrite as usize].store(0, Release);
        }
        w!(BindMw, wr_bind_mw, wr_bind_mw as BindMw);
        w!(
            LocalInv,
            wr_local_inv,
            wr_local_inv as unsafe extern "C" fn(_, u32)
        );
        w!(SetSge, wr_set_sge, wr_set_sge as SetSge);
        w!(SetSgeList, wr_set_sge_list, wr_set_sge_list as SetSgeList);
        w!(
            SetInlineData,
            wr_set_inline_data,
            wr_set_inline_data as SetInline
        );
        w!(
            SetInlineDataList,
            wr_set_inline_data_list,
            wr_set_inline_data_list as SetInlineList
        );
    }
    crate::log!(Level::Debug, "qp {qp:p}: ibv_wr_* builders wrapped");
}

type Void = unsafe extern "C" fn(*mut ibv_qp_ex);
type Complete = unsafe extern "C" fn(*mut ibv_qp_ex) -> c_int;
type SendTso = unsafe extern "C" fn(*mut ibv_qp_ex, *mut c_void, u16, u16);
type Rdma = unsafe extern "C" fn(*mut ibv_qp_ex, u32, u64);
type RdmaImm = unsafe extern "C" fn(*mut ibv_qp_ex, u32, u64, u32);
type Cas = unsafe extern "C" fn(*mut ibv_qp_ex, u32, u64, u64, u64);
type Faa = unsafe extern "C" fn(*mut ibv_qp_ex, u32, u64, u64);
type AtomicWrite = unsafe extern "C" fn(*mut ibv_qp_ex, u32, u64, *const c_void);
type BindMw = unsafe extern "C" fn(*mut ibv_qp_ex, *mut ibv_mw, u32, *const ibv_mw_bind_info);
type SetSge = unsafe extern "C" fn(*mut ibv_qp_ex, u32, u64, u32);
type SetSgeList = unsafe extern "C" fn(*mut ibv_qp_ex, usize, *const ibv_sge);
type SetInline = unsafe extern "C" fn(*mut ibv_qp_ex, *mut c_void, usize);
type SetInlineList = unsafe extern "C" fn(*mut ibv_qp_ex, usize, *const ibv_data_buf);

/// The QP's context and number.
///
/// # Safety
/// `x` is a live extended QP.
unsafe fn ids(x: *mut ibv_qp_ex) -> (usize, u32) {
    // SAFETY: the program's live extended QP (its inline verb just read it).
    unsafe { ((*x).qp_base.context as usize, (*x).qp_base.qp_num) }
}

/// Operations whose data comes from no setter: they are remembered for
/// the error explainer at their builder.
fn no_data(op: c_int) -> bool {
    [
        Op::IBV_WR_BIND_MW,
        Op::IBV_WR_LOCAL_INV,
        Op::IBV_WR_ATOMIC_WRITE,
    ]
    .iter()
    .any(|&o| o as c_int == op)
}

/// A builder was called: the work request `op` is under construction.
///
/// # Safety
/// `x` is a live extended QP whose builder is being called.
unsafe fn begun(e: &Qpx, x: *mut ibv_qp_ex, op: c_int, verb: &'static str, site: usize) {
    // SAFETY: the program set wr_id for this request before its builder.
    let wr_id = unsafe { addr_of!((*x).wr_id).read() };
    e.op.store(op, Relaxed);
    e.wr_id.store(wr_id, Relaxed);
    if checks::inflight() {
        checked(verb, || {
            // SAFETY: the program's live extended QP, its flags set before the builder.
            unsafe {
                let flags = addr_of!((*x).wr_flags).read();
                super::inflight::ex_begun(x.cast(), op, wr_id, flags, site)
            }
        });
    }
    if checks::datapath() {
        checked(verb, || {
            let wr = Wr::bare(wr_id, Some(op), Some(verb));
            wr_rules::check_state(Queue::Send(x.cast()), &wr, site);
            if no_data(op) {
                // SAFETY: the program's live extended QP (its inline verb just read it).
                let (ctx, qp_num) = unsafe { ids(x) };
                completions::posted(crate::addr::Addr::new(ctx), qp_num, &wr.summary(), site);
            }
        });
    }
    if crate::trace::wanted() {
        let n = e.npending.load(Relaxed) as usize;
        if n < PENDING {
            e.pending[n].store(wr_id, Relaxed);
            e.npending.store(n as u32 + 1, Relaxed);
        } else {
            checked(verb, || {
                // SAFETY: the program's live extended QP (its inline verb just read it).
                let (_, qp_num) = unsafe { ids(x) };
                traced::post(qp_num, wr_id, "post_send")
            });
        }
    }
}

/// The request under construction, if a builder began one.
fn current(e: &Qpx) -> Option<(c_int, u64)> {
    let op = e.op.load(Relaxed);
    (op != NONE).then(|| (op, e.wr_id.load(Relaxed)))
}

/// A setter gave the request `n` SGEs at `sges`: the checks of a posted
/// work request's SGEs.
fn sges(
    e: &Qpx,
    x: *mut ibv_qp_ex,
    sges: *const ibv_sge,
    n: usize,
    verb: &'static str,
    site: usize,
) {
    let Some((op, wr_id)) = current(e) else {
        return;
    };
    let num_sge = n.min(c_int::MAX as usize) as c_int;
    let wr = Wr::new(
        Queue::Send(x.cast()),
        wr_id,
        Some(op),
        sges,
        num_sge,
        Some(verb),
    );
    // READ targets and atomics write into the local buffer.
    let write = [
        Op::IBV_WR_RDMA_READ,
        Op::IBV_WR_ATOMIC_CMP_AND_SWP,
        Op::IBV_WR_ATOMIC_FETCH_AND_ADD,
    ]
    .iter()
    .any(|&o| o as c_int == op);
    // SAFETY: the program's live extended QP (its inline verb just read it).
    let (ctx, qp_num) = unsafe { ids(x) };
    wr_rules::check_wr(Queue::Send(x.cast()), ctx, &wr, write, false, site);
    completions::posted(crate::addr::Addr::new(ctx), qp_num, &wr.summary(), site);
    if checks::inflight() && !sges.is_null() {
        // SAFETY: the setter's SGEs, read during its call.
        unsafe { super::inflight::ex_sges(x.cast(), sges, n) };
    }
}

/// A setter gave the request `bytes` of inline data: within the QP's
/// `max_inline_data`? (Inline data is copied, not lkey-checked.)
fn inline(e: &Qpx, x: *mut ibv_qp_ex, bytes: u64, verb: &'static str, site: usize) {
    let Some((op, wr_id)) = current(e) else {
        return;
    };
    let wr = Wr::bare(wr_id, Some(op), Some(verb));
    let qp = x.cast::<ibv_qp>();
    // SAFETY: a live QP the program posts to.
    if let Some(c) = unsafe { caps::of_qp(qp) } {
        if bytes > c.inline as u64 {
            datapath::violation(
                Check::InlineSize,
                Queue::Send(qp),
                &wr,
                site,
                format_args!(
                    "{bytes} bytes of inline data, above the QP's max_inline_data {}",
                    c.inline
                ),
            );
        }
    }
    // SAFETY: the program's live extended QP (its inline verb just read it).
    let (ctx, qp_num) = unsafe { ids(x) };
    completions::posted(crate::addr::Addr::new(ctx), qp_num, &wr.summary(), site);
}

/// No saved member (cannot happen for a QP `patch` wrapped).
#[cold]
fn gone(x: *mut ibv_qp_ex) {
    let errno = crate::guard::Errno::save();
    crate::log!(
        Level::Warn,
        "qp {x:p}: an ibv_wr_* call on an extended QP the shim has no saved builders for; \
         not forwarded"
    );
    errno.restore();
}

/// A builder: records the request, then forwards.
macro_rules! builder {
    ($name:ident, $slot:ident, $op:ident, $verb:literal, ($($a:ident: $t:ty),*)) => {
        builder!($name, $slot, $op, $verb, ($($a: $t),*) => None);
    };
    // `$window`: what the request names of a memory window (a bind its
    // window's address, a local invalidation its rkey), for work in flight.
    ($name:ident, $slot:ident, $op:ident, $verb:literal, ($($a:ident: $t:ty),*) => $window:expr) => {
        unsafe extern "C" fn $name(x: *mut ibv_qp_ex $(, $a: $t)*) {
            let site = crate::caller!();
            let Some(e) = find(x) else {
                return gone(x);
            };
            // SAFETY: the program's live extended QP, its builder being called.
            unsafe { begun(e, x, Op::$op as c_int, $verb, site) };
            let window: Option<u64> = $window;
            if let Some(w) = window.filter(|_| checks::inflight()) {
                checked($verb, || super::inflight::ex_window(x.cast(), w));
            }
            if let Some(f) = e.orig::<unsafe extern "C" fn(*mut ibv_qp_ex $(, $t)*)>(F::$slot) {
                // SAFETY: the provider's own member, with the program's arguments.
                unsafe { f(x $(, $a)*) }
            }
        }
    };
}

builder!(wr_send, Send, IBV_WR_SEND, "ibv_wr_send", ());
builder!(wr_send_imm, SendImm, IBV_WR_SEND_WITH_IMM, "ibv_wr_send_imm", (imm: u32));
builder!(wr_send_inv, SendInv, IBV_WR_SEND_WITH_INV, "ibv_wr_send_inv", (rkey: u32));
builder!(wr_send_tso, SendTso, IBV_WR_TSO, "ibv_wr_send_tso", (hdr: *mut c_void, hdr_sz: u16, mss: u16));
builder!(wr_rdma_write, RdmaWrite, IBV_WR_RDMA_WRITE, "ibv_wr_rdma_write", (rkey: u32, raddr: u64));
builder!(
    wr_rdma_write_imm,
    RdmaWriteImm,
    IBV_WR_RDMA_WRITE_WITH_IMM,
    "ibv_wr_rdma_write_imm",
    (rkey: u32, raddr: u64, imm: u32)
);
builder!(wr_rdma_read, RdmaRead, IBV_WR_RDMA_READ, "ibv_wr_rdma_read", (rkey: u32, raddr: u64));
builder!(
    wr_atomic_cmp_swp,
    AtomicCmpSwp,
    IBV_WR_ATOMIC_CMP_AND_SWP,
    "ibv_wr_atomic_cmp_swp",
    (rkey: u32, raddr: u64, compare: u64, swap: u64)
);
builder!(
    wr_atomic_fetch_add,
    AtomicFetchAdd,
    IBV_WR_ATOMIC_FETCH_AND_ADD,
    "ibv_wr_atomic_fetch_add",
    (rkey: u32, raddr: u64, add: u64)
);
builder!(
    wr_atomic_write,
    AtomicWrite,
    IBV_WR_ATOMIC_WRITE,
    "ibv_wr_atomic_write",
    (rkey: u32, raddr: u64, data: *const c_void)
);
builder!(
    wr_bind_mw,
    BindMw,
    IBV_WR_BIND_MW,
    "ibv_wr_bind_mw",
    (mw: *mut ibv_mw, rkey: u32, info: *const ibv_mw_bind_info) => Some(mw as u64)
);
builder!(
    wr_local_inv,
    LocalInv,
    IBV_WR_LOCAL_INV,
    "ibv_wr_local_inv",
    (rkey: u32) => Some(u64::from(rkey))
);

unsafe extern "C" fn wr_set_sge(x: *mut ibv_qp_ex, lkey: u32, addr: u64, length: u32) {
    let site = crate::caller!();
    let Some(e) = find(x) else {
        return gone(x);
    };
    if checks::datapath() {
        let s = ibv_sge { addr, length, lkey };
        checked("ibv_wr_set_sge", || {
            sges(e, x, &s, 1, "ibv_wr_set_sge", site)
        });
    }
    if let Some(f) = e.orig::<SetSge>(F::SetSge) {
        // SAFETY: the provider's own member, with the program's arguments.
        unsafe { f(x, lkey, addr, length) }
    }
}

unsafe extern "C" fn wr_set_sge_list(x: *mut ibv_qp_ex, num_sge: usize, list: *const ibv_sge) {
    let site = crate::caller!();
    let Some(e) = find(x) else {
        return gone(x);
    };
    if checks::datapath() {
        let verb = "ibv_wr_set_sge_list";
        checked(verb, || sges(e, x, list, num_sge, verb, site));
    }
    if let Some(f) = e.orig::<SetSgeList>(F::SetSgeList) {
        // SAFETY: the provider's own member, with the program's arguments.
        unsafe { f(x, num_sge, list) }
    }
}

unsafe extern "C" fn wr_set_inline_data(x: *mut ibv_qp_ex, addr: *mut c_void, length: usize) {
    let site = crate::caller!();
    let Some(e) = find(x) else {
        return gone(x);
    };
    if checks::datapath() {
        let verb = "ibv_wr_set_inline_data";
        checked(verb, || inline(e, x, length as u64, verb, site));
    }
    if let Some(f) = e.orig::<SetInline>(F::SetInlineData) {
        // SAFETY: the provider's own member, with the program's arguments.
        unsafe { f(x, addr, length) }
    }
}

unsafe extern "C" fn wr_set_inline_data_list(
    x: *mut ibv_qp_ex,
    num_buf: usize,
    list: *const ibv_data_buf,
) {
    let site = crate::caller!();
    let Some(e) = find(x) else {
        return gone(x);
    };
    if checks::datapath() && !list.is_null() {
        let verb = "ibv_wr_set_inline_data_list";
        checked(verb, || {
            // Read no further than the provider does: it stops at the
            // buffer that takes the data past the QP's max_inline_data.
            // SAFETY: a live QP the program posts to.
            let limit = unsafe { caps::of_qp(x.cast()) }.map_or(u64::MAX, |c| c.inline as u64);
            let mut bytes = 0u64;
            for i in 0..num_buf {
                // SAFETY: the program's list of `num_buf` buffers, read
                // during its call.
                let length = unsafe { (*list.add(i)).length } as u64;
                bytes = bytes.saturating_add(length);
                if bytes > limit {
                    break;
                }
            }
            inline(e, x, bytes, verb, site)
        });
    }
    if let Some(f) = e.orig::<SetInlineList>(F::SetInlineDataList) {
        // SAFETY: the provider's own member, with the program's arguments.
        unsafe { f(x, num_buf, list) }
    }
}

unsafe extern "C" fn wr_start(x: *mut ibv_qp_ex) {
    let Some(e) = find(x) else {
        return gone(x);
    };
    if let Some(f) = e.orig::<Void>(F::Start) {
        // SAFETY: the provider's own member, with the program's argument.
        unsafe { f(x) }
    }
    // After the provider's start: a thread waiting there (its lock, for
    // threads that share the QP) must not reset another's batch.
    e.op.store(NONE, Relaxed);
    e.npending.store(0, Relaxed);
    if checks::inflight() {
        checked("ibv_wr_start", || super::inflight::ex_start(x.cast()));
    }
}

unsafe extern "C" fn wr_abort(x: *mut ibv_qp_ex) {
    let Some(e) = find(x) else {
        return gone(x);
    };
    e.op.store(NONE, Relaxed);
    e.npending.store(0, Relaxed);
    if checks::inflight() {
        checked("ibv_wr_abort", || super::inflight::ex_cancel(x.cast()));
    }
    if let Some(f) = e.orig::<Void>(F::Abort) {
        // SAFETY: the provider's own member, with the program's argument.
        unsafe { f(x) }
    }
}

unsafe extern "C" fn wr_complete(x: *mut ibv_qp_ex) -> c_int {
    let Some(e) = find(x) else {
        gone(x);
        return libc::EINVAL;
    };
    e.op.store(NONE, Relaxed);
    let n = e.npending.swap(0, Relaxed) as usize;
    if n > 0 && crate::trace::wanted() {
        // Before the call, as `ibv_post_send`'s: the completion may follow
        // at once.
        checked("ibv_wr_complete", || {
            // SAFETY: the program's live extended QP (its inline verb just read it).
            let qp_num = unsafe { ids(x) }.1;
            for p in &e.pending[..n.min(PENDING)] {
                traced::post(qp_num, p.load(Relaxed), "post_send");
            }
        });
    }
    let Some(f) = e.orig::<Complete>(F::Complete) else {
        return libc::EOPNOTSUPP;
    };
    // Inside: a provider may post the batch through its context's
    // `post_send` (the sim does), which must not check or trace the
    // requests a second time.
    // SAFETY: the provider's own member, with the program's argument.
    let rc = crate::thread::inside(|| unsafe { f(x) });
    if checks::inflight() {
        checked("ibv_wr_complete", || match rc {
            0 => super::inflight::ex_done(x.cast()),
            _ => super::inflight::ex_cancel(x.cast()),
        });
    }
    rc
}
