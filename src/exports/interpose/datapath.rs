//! The data path, with `IBV_SHIM_CHECK=datapath` or a trace only
//! (otherwise these entries are never written: the program's inline
//! `ibv_post_send` jumps straight to the provider). A trace gets an event
//! per posted WR and per completion (`ibv-shim trace --per-qp`). Each posted work request is checked against
//! the registry — every SGE's lkey a live MR of the QP's context and PD,
//! the SGE inside it, the MR's access allowing the operation (local write
//! for receives, READ targets and atomics), the QP's state allowing the
//! post, `num_sge` not negative nor above the queue's granted SGEs, an SGE
//! list where `num_sge` says there is one, inline data within the QP's
//! `max_inline_data`, the chain no longer than the queue holds — and then
//! forwarded unchanged, whatever was found. No SGE past the queue's
//! granted count is read (a provider refuses such a request before
//! reading its list, which may end at an unreadable page), and no chain
//! is walked past the queue's depth (a chain that loops back on itself
//! is walked no further than the provider walks it before failing it
//! with ENOMEM). Each violation is logged once per site (the program's call
//! of the inline verb) and rule, and counted for the JSON report
//! (`checks`). `IBV_SHIM_CHECK=datapath,abort` aborts at the first one, as
//! the sanitizers do. A chain that passes every rule is vouched for by
//! `clean` (loads only, no boundary); anything else takes the full path
//! here, which checks it again (the rules: `wr_rules`) and reports.

use std::collections::HashSet;
use std::ffi::c_int;
use std::fmt;

use verbs_abi::{
    ibv_context_ops, ibv_cq, ibv_qp, ibv_recv_wr, ibv_send_wr, ibv_sge, ibv_srq, ibv_wc,
};

use super::{
    caps, clean, completions, ctx_of, inflight, original, patch, slot, traced, wr_rules, Entry,
};
use crate::checks::{self, Check};
use crate::guard::{boundary, Errno};
use crate::log::Level;
use crate::registry::lock::{mutex, Mutex};

pub(super) type PostSend =
    unsafe extern "C" fn(*mut ibv_qp, *mut ibv_send_wr, *mut *mut ibv_send_wr) -> c_int;
pub(super) type PostRecv =
    unsafe extern "C" fn(*mut ibv_qp, *mut ibv_recv_wr, *mut *mut ibv_recv_wr) -> c_int;
pub(super) type PostSrqRecv =
    unsafe extern "C" fn(*mut ibv_srq, *mut ibv_recv_wr, *mut *mut ibv_recv_wr) -> c_int;
pub(super) type PollCq = unsafe extern "C" fn(*mut ibv_cq, c_int, *mut ibv_wc) -> c_int;
pub(super) type ReqNotifyCq = unsafe extern "C" fn(*mut ibv_cq, c_int) -> c_int;

/// Wraps the data-path entries of `ibv_context_ops`.
///
/// # Safety
/// `ops` is a live context's own table.
pub(super) unsafe fn patch_ops(e: &Entry, ops: *mut ibv_context_ops) {
    use std::ptr::addr_of_mut;
    // Work in flight has wrappers of its own: without it, the data path's
    // are as they were.
    let tracked = checks::inflight();
    // SAFETY: the caller's contract; each wrapper has its entry's C signature.
    unsafe {
        patch(
            e,
            slot::PostSend,
            addr_of_mut!((*ops).post_send),
            if tracked {
                post_send::<true> as PostSend
            } else {
                post_send::<false>
            },
        );
        patch(
            e,
            slot::PostRecv,
            addr_of_mut!((*ops).post_recv),
            if tracked {
                post_recv::<true> as PostRecv
            } else {
                post_recv::<false>
            },
        );
        patch(
            e,
            slot::PostSrqRecv,
            addr_of_mut!((*ops).post_srq_recv),
            if tracked {
                post_srq_recv::<true> as PostSrqRecv
            } else {
                post_srq_recv::<false>
            },
        );
        patch_poll(e, ops);
        patch(
            e,
            slot::ReqNotifyCq,
            addr_of_mut!((*ops).req_notify_cq),
            req_notify_cq as ReqNotifyCq,
        );
    }
}

/// Wraps only `poll_cq`: what completion faults (`wc` rules) need when the
/// data-path checks are off.
///
/// # Safety
/// As `patch_ops`.
pub(super) unsafe fn patch_poll(e: &Entry, ops: *mut ibv_context_ops) {
    // SAFETY: the caller's contract; the wrapper has the entry's signature.
    unsafe {
        patch(
            e,
            slot::PollCq,
            std::ptr::addr_of_mut!((*ops).poll_cq),
            if checks::inflight() {
                poll_cq::<true> as PollCq
            } else {
                poll_cq::<false>
            },
        )
    };
}

/// What a work request was posted to.
#[derive(Clone, Copy)]
pub(super) enum Queue {
    Send(*mut ibv_qp),
    Recv(*mut ibv_qp),
    Srq(*mut ibv_srq),
}

impl Queue {
    pub(super) fn verb(self) -> &'static str {
        match self {
            Queue::Send(_) => "ibv_post_send",
            Queue::Recv(_) => "ibv_post_recv",
            Queue::Srq(_) => "ibv_post_srq_recv",
        }
    }

    fn addr(self) -> usize {
        match self {
            Queue::Send(q) | Queue::Recv(q) => q as usize,
            Queue::Srq(s) => s as usize,
        }
    }

    /// The PD the queue's MRs must be on (a QP on a parent domain: the
    /// parent domain; see [`wr_rules::same_pd`]).
    ///
    /// # Safety
    /// The queue is live (the program posts to it).
    pub(super) unsafe fn pd(self) -> usize {
        // SAFETY: a live QP or SRQ the program is posting to.
        unsafe {
            match self {
                Queue::Send(q) | Queue::Recv(q) => (*q).pd as usize,
                Queue::Srq(s) => (*s).pd as usize,
            }
        }
    }
}

/// One work request as the log shows it.
pub(super) struct Wr {
    pub wr_id: u64,
    /// Send opcode (`IBV_WR_*`), or None for a receive.
    pub opcode: Option<c_int>,
    pub sges: *const ibv_sge,
    pub num_sge: c_int,
    /// How many of the SGEs may be read: `num_sge` up to the queue's
    /// granted SGEs (none of a NULL list).
    pub readable: usize,
    /// The `ibv_wr_*` verb that built it (`qpx`); None: the queue's post.
    pub via: Option<&'static str>,
}

/// The most SGEs of a work request read when its queue's caps are not
/// known (the query failed): no provider grants more.
const SGES_IF_UNKNOWN: u32 = 32;

/// Work requests a chain is walked for when its queue's depth is not
/// known (the query failed): above any provider's queue.
const DEPTH_IF_UNKNOWN: u32 = 1 << 20;

impl Wr {
    /// A work request of `num_sge` SGEs at `sges` posted to `q`.
    pub(super) fn new(
        q: Queue,
        wr_id: u64,
        opcode: Option<c_int>,
        sges: *const ibv_sge,
        num_sge: c_int,
        via: Option<&'static str>,
    ) -> Wr {
        let readable = if sges.is_null() || num_sge <= 0 {
            0
        } else {
            (num_sge as u32).min(max_sge(q).unwrap_or(SGES_IF_UNKNOWN)) as usize
        };
        Wr {
            wr_id,
            opcode,
            sges,
            num_sge,
            readable,
            via,
        }
    }

    /// A work request without SGEs (a builder, inline data).
    pub(super) fn bare(wr_id: u64, opcode: Option<c_int>, via: Option<&'static str>) -> Wr {
        Wr {
            wr_id,
            opcode,
            sges: std::ptr::null(),
            num_sge: 0,
            readable: 0,
            via,
        }
    }

    /// Its SGEs, the `readable` ones.
    pub(super) fn sges(&self) -> impl Iterator<Item = ibv_sge> + '_ {
        (0..self.readable).map(move |i| {
            // SAFETY: the program's SGE list, read while its post is under
            // way, within the entries the provider itself reads (`i` below
            // `readable`).
            unsafe { *self.sges.add(i) }
        })
    }
}

/// The queue's caps, asked once (None: the query failed).
pub(super) fn caps_of(q: Queue) -> Option<caps::Caps> {
    match q {
        // SAFETY: a live QP the program posts to.
        Queue::Send(qp) | Queue::Recv(qp) => unsafe { caps::of_qp(qp) },
        // SAFETY: a live SRQ the program posts to.
        Queue::Srq(srq) => unsafe { caps::of_srq(srq) },
    }
}

/// The SGEs a work request to `q` may have.
fn max_sge(q: Queue) -> Option<u32> {
    caps_of(q).map(|c| match q {
        Queue::Send(_) => c.send_sge,
        Queue::Recv(_) | Queue::Srq(_) => c.recv_sge,
    })
}

/// How many work requests of a chain posted to `q` are walked: the
/// queue's depth (the provider fails the next with ENOMEM, the queue
/// being full), at least one.
pub(super) fn chain_limit(q: Queue) -> usize {
    caps_of(q)
        .map_or(DEPTH_IF_UNKNOWN, |c| match q {
            Queue::Send(_) => c.send_wr,
            Queue::Recv(_) | Queue::Srq(_) => c.recv_wr,
        })
        .max(1) as usize
}

impl fmt::Display for Wr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "wr_id={:#x}", self.wr_id)?;
        if let Some(op) = self.opcode {
            write!(f, " opcode={}", wr_opcode(op))?;
        }
        write!(f, " num_sge={}", self.num_sge)?;
        if self.sges.is_null() {
            write!(f, " sg_list=NULL")?;
        }
        for (i, s) in self.sges().take(8).enumerate() {
            write!(
                f,
                " sge[{i}]={{addr={:#x} length={} lkey={:#x}}}",
                s.addr, s.length, s.lkey
            )?;
        }
        Ok(())
    }
}

/// `IBV_WR_*` names.
pub(super) fn wr_opcode(op: c_int) -> &'static str {
    const NAMES: [&str; 12] = [
        "RDMA_WRITE",
        "RDMA_WRITE_WITH_IMM",
        "SEND",
        "SEND_WITH_IMM",
        "RDMA_READ",
        "ATOMIC_CMP_AND_SWP",
        "ATOMIC_FETCH_AND_ADD",
        "LOCAL_INV",
        "BIND_MW",
        "SEND_WITH_INV",
        "TSO",
        "DRIVER1",
    ];
    NAMES.get(op as usize).copied().unwrap_or("?")
}

/// (site, rule) pairs already reported.
static REPORTED: Mutex<Option<HashSet<(usize, u8)>>> = mutex(None);

/// A violation: counted; logged the first time at this site for this rule;
/// then, with `abort`, the end of the process.
#[cold]
#[inline(never)]
pub(super) fn violation(check: Check, q: Queue, wr: &Wr, site: usize, why: fmt::Arguments<'_>) {
    let label = if matches!(q, Queue::Srq(_)) {
        "srq"
    } else {
        "qp"
    };
    violation_on(
        check,
        (wr.via.unwrap_or(q.verb()), label, q.addr()),
        wr,
        site,
        why,
    )
}

/// As [`violation`], the call named by its verb and its object's
/// argument name and address (`("ibv_destroy_cq", "cq", addr)`).
#[cold]
#[inline(never)]
pub(super) fn violation_on(
    check: Check,
    (verb, label, addr): (&str, &str, usize),
    wr: &Wr,
    site: usize,
    why: fmt::Arguments<'_>,
) {
    checks::count(check);
    let first = REPORTED
        .lock()
        .get_or_insert_with(HashSet::new)
        .insert((site, check as u8));
    if first || checks::abort() {
        crate::log!(
            Level::Warn,
            "data-path check {}: {verb}({label}={addr:#x}) at {}: {wr}: {why}; forwarded unchanged",
            check.name(),
            crate::report::site(site)
        );
    }
    if checks::abort() {
        crate::log!(
            Level::Error,
            "IBV_SHIM_CHECK=abort: aborting at the first data-path violation"
        );
        // SAFETY: abort has no preconditions; asked for by the user.
        unsafe { libc::abort() };
    }
}

impl Wr {
    pub(super) fn summary(&self) -> completions::Posted {
        // SAFETY: the program's SGE list of `num_sge` entries, read while its post is under way.
        unsafe {
            completions::Posted::of(
                self.wr_id,
                self.opcode.unwrap_or(-1),
                if self.readable > 0 {
                    self.sges
                } else {
                    std::ptr::null()
                },
                self.num_sge,
            )
        }
    }
}

/// Runs the checks behind their own panic boundary, errno kept: whatever
/// happens in them, the post is forwarded as the program made it.
#[inline(always)]
pub(super) fn checked(name: &'static str, f: impl FnOnce()) {
    let errno = Errno::save();
    boundary(name, (), f);
    errno.restore();
}

/// The full checks of a send chain the clean path did not pass, out of
/// the wrapper's line (its frame stays small).
#[cold]
#[inline(never)]
fn sends_in_full(qp: *mut ibv_qp, wr: *mut ibv_send_wr, site: usize) {
    // SAFETY: the program's live QP and WR chain, posted now.
    checked("ibv_post_send", || unsafe {
        wr_rules::check_sends(qp, wr, site)
    });
}

/// As [`sends_in_full`], for a receive chain.
#[cold]
#[inline(never)]
fn recvs_in_full(verb: &'static str, q: Queue, wr: *mut ibv_recv_wr, site: usize) {
    // SAFETY: the program's live queue and WR chain, posted now.
    checked(verb, || unsafe { wr_rules::check_recvs(q, wr, site) });
}

/// The trace's post events of a send chain, out of the wrapper's line
/// (the checks' clean path keeps its registers).
///
/// # Safety
/// `qp` is a live QP and `wr` NULL or the head of the program's WR chain, posted to it now.
#[inline(never)]
unsafe fn trace_sends(qp: *mut ibv_qp, wr: *mut ibv_send_wr) {
    // SAFETY: the program's WR chain, read while its post is under way.
    checked("ibv_post_send", || unsafe {
        let limit = chain_limit(Queue::Send(qp));
        traced::posts(qp, wr, limit, "post_send", |w| (w.wr_id, w.next))
    });
}

/// As [`trace_sends`], for a receive chain.
#[inline(never)]
fn trace_recvs(qp: *mut ibv_qp, wr: *mut ibv_recv_wr) {
    // SAFETY: as above.
    checked("ibv_post_recv", || unsafe {
        let limit = chain_limit(Queue::Recv(qp));
        traced::posts(qp, wr, limit, "post_recv", |w| (w.wr_id, w.next))
    });
}

/// No saved entry (cannot happen for a context the shim patched): the
/// inline verb would have called NULL; ENOSYS, as a missing op.
#[cold]
fn missing() -> c_int {
    libc::ENOSYS
}

unsafe extern "C" fn post_send<const TRACK: bool>(
    qp: *mut ibv_qp,
    wr: *mut ibv_send_wr,
    bad_wr: *mut *mut ibv_send_wr,
) -> c_int {
    let site = crate::caller!();
    // SAFETY: the inline verb read this QP's context to reach the table.
    let ctx = unsafe { ctx_of(qp) };
    let Some(real) = original(ctx, slot::PostSend) else {
        return missing();
    };
    // Nested: a provider's `ibv_wr_complete` posting its batch through its
    // own table (`qpx` checked and traced each WR as it was built).
    let outer = !crate::thread::nested();
    // The clean chain: loads only, no boundary; anything else, the full path.
    // SAFETY: the program's live QP and WR chain, posted now.
    if outer && checks::datapath() && !unsafe { clean::sends(qp, wr, site) } {
        sends_in_full(qp, wr, site);
    }
    if outer && crate::trace::wanted() {
        // SAFETY: the program's live QP and WR chain, posted now.
        unsafe { trace_sends(qp, wr) };
    }
    if TRACK && outer {
        return track_sends(real, qp, wr, bad_wr, site);
    }
    // SAFETY: the provider's own entry, with the program's arguments.
    unsafe { real(qp, wr, bad_wr) }
}

/// A send chain's post with its work tracked until its completions.
#[cold]
#[inline(never)]
fn track_sends(
    real: PostSend,
    qp: *mut ibv_qp,
    wr: *mut ibv_send_wr,
    bad_wr: *mut *mut ibv_send_wr,
    site: usize,
) -> c_int {
    let mut added = inflight::Added::NONE;
    checked("ibv_post_send", || {
        // SAFETY: the program's live QP and WR chain, posted now.
        added = unsafe { inflight::sends(qp, wr, site) }
    });
    // SAFETY: the provider's own entry, with the program's arguments.
    let rc = unsafe { real(qp, wr, bad_wr) };
    if rc != 0 {
        checked("ibv_post_send", || {
            // SAFETY: the chain the program posted and its bad_wr.
            unsafe { inflight::posted(Queue::Send(qp), added, rc, wr, bad_wr, |w| (*w).next) }
        });
    }
    rc
}

/// As [`track_sends`], for a receive chain (to a QP or an SRQ).
#[cold]
#[inline(never)]
fn track_recvs<Q>(
    real: unsafe extern "C" fn(*mut Q, *mut ibv_recv_wr, *mut *mut ibv_recv_wr) -> c_int,
    q: Queue,
    to: *mut Q,
    wr: *mut ibv_recv_wr,
    bad_wr: *mut *mut ibv_recv_wr,
    site: usize,
) -> c_int {
    let mut added = inflight::Added::NONE;
    // SAFETY: the program's live queue and WR chain, posted now.
    checked(q.verb(), || added = unsafe { inflight::recvs(q, wr, site) });
    // SAFETY: the provider's own entry, with the program's arguments.
    let rc = unsafe { real(to, wr, bad_wr) };
    if rc != 0 {
        checked(q.verb(), || {
            // SAFETY: the chain the program posted and its bad_wr.
            unsafe { inflight::posted(q, added, rc, wr, bad_wr, |w| (*w).next) }
        });
    }
    rc
}

unsafe extern "C" fn post_recv<const TRACK: bool>(
    qp: *mut ibv_qp,
    wr: *mut ibv_recv_wr,
    bad_wr: *mut *mut ibv_recv_wr,
) -> c_int {
    let site = crate::caller!();
    // SAFETY: the inline verb read this QP's context to reach the table.
    let ctx = unsafe { ctx_of(qp) };
    let Some(real) = original(ctx, slot::PostRecv) else {
        return missing();
    };
    if checks::datapath() && !clean::recvs(qp, wr, site) {
        recvs_in_full("ibv_post_recv", Queue::Recv(qp), wr, site);
    }
    if crate::trace::wanted() {
        trace_recvs(qp, wr);
    }
    if TRACK {
        return track_recvs(real, Queue::Recv(qp), qp, wr, bad_wr, site);
    }
    // SAFETY: the provider's own entry, with the program's arguments.
    unsafe { real(qp, wr, bad_wr) }
}

unsafe extern "C" fn post_srq_recv<const TRACK: bool>(
    srq: *mut ibv_srq,
    wr: *mut ibv_recv_wr,
    bad_wr: *mut *mut ibv_recv_wr,
) -> c_int {
    let site = crate::caller!();
    // SAFETY: the inline verb read this SRQ's context to reach the table.
    let ctx = unsafe { ctx_of(srq) };
    let Some(real) = original(ctx, slot::PostSrqRecv) else {
        return missing();
    };
    // SAFETY: the program's live SRQ and WR chain, posted now.
    if checks::datapath() && !unsafe { clean::srq_recvs(srq, wr, site) } {
        recvs_in_full("ibv_post_srq_recv", Queue::Srq(srq), wr, site);
    }
    if TRACK {
        return track_recvs(real, Queue::Srq(srq), srq, wr, bad_wr, site);
    }
    // SAFETY: the provider's own entry, with the program's arguments.
    unsafe { real(srq, wr, bad_wr) }
}

unsafe extern "C" fn poll_cq<const TRACK: bool>(
    cq: *mut ibv_cq,
    num_entries: c_int,
    wc: *mut ibv_wc,
) -> c_int {
    let site = crate::caller!();
    // SAFETY: the inline verb read this CQ's context to reach the table.
    let ctx = unsafe { ctx_of(cq) };
    let Some(real) = original(ctx, slot::PollCq) else {
        return -1;
    };
    // SAFETY: the provider's own entry, with the program's arguments.
    let n = unsafe { real(cq, num_entries, wc) };
    // Nested: a provider's extended-CQ cursor polling through its own
    // table (`excq` sees those completions itself).
    if n > 0 && !wc.is_null() && !crate::thread::nested() {
        if crate::faults::completions_armed() {
            // SAFETY: the provider just wrote `n` completions there; the
            // program's array, which it reads after this returns.
            let done = unsafe { std::slice::from_raw_parts_mut(wc, n as usize) };
            checked("ibv_poll_cq", || inject_completions(done, site));
        }
        if checks::datapath() {
            // SAFETY: the provider just wrote `n` completions there.
            let done = unsafe { std::slice::from_raw_parts(wc, n as usize) };
            let drained = n < num_entries;
            // The success path: a scan, no boundary, errno untouched.
            if completions::worth_a_look(done, drained) {
                checked("ibv_poll_cq", || {
                    completions::polled(crate::addr::Addr::of(ctx), cq, done, drained)
                });
            }
            if TRACK {
                checked("ibv_poll_cq", || inflight::polled(ctx as usize, cq, done));
            }
        }
        if crate::trace::wanted() {
            // SAFETY: the provider just wrote `n` completions there.
            let done = unsafe { std::slice::from_raw_parts(wc, n as usize) };
            checked("ibv_poll_cq", || traced::completions(done));
        }
    }
    n
}

/// Completion faults: each completion a `wc` rule picks gets the rule's
/// status (as a failed completion of the same work request would: wr_id
/// and qp_num kept, vendor_err 0).
#[cold]
#[inline(never)]
fn inject_completions(done: &mut [ibv_wc], site: usize) {
    for wc in done {
        if let Some(status) = crate::faults::completion_status(site) {
            // SAFETY: `status` is the int-sized enum ibv_wc_status in C;
            // the value comes from a checked rule.
            unsafe {
                std::ptr::addr_of_mut!(wc.status)
                    .cast::<c_int>()
                    .write(status as c_int)
            };
            wc.vendor_err = 0;
        }
    }
}

unsafe extern "C" fn req_notify_cq(cq: *mut ibv_cq, solicited_only: c_int) -> c_int {
    // SAFETY: the inline verb read this CQ's context to reach the table.
    let ctx = unsafe { ctx_of(cq) };
    let Some(real) = original(ctx, slot::ReqNotifyCq) else {
        return missing();
    };
    // Forwarded as is: wrapped so that a trace can see the arming.
    // SAFETY: the provider's own entry, with the program's arguments.
    unsafe { real(cq, solicited_only) }
}

/// `fork()`: this module's lock, held across the fork (`interpose::fork`).
pub(super) fn fork(step: crate::registry::lock::ForkStep) {
    step.apply(&REPORTED);
}
