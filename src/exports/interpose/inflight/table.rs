//! The tracked queues: a QP's (or an SRQ's) outstanding work, found by
//! the queue's address when the program posts, and a QP's by its context
//! and number when a completion comes back; per CQ, the completions due
//! (signalled sends and receives posted and not yet polled).

use std::sync::atomic::{AtomicBool, AtomicI64, AtomicPtr, AtomicU64, AtomicUsize, Ordering};

use verbs_abi::ibv_qp;

use super::ring::{Locked, Ring};
use crate::addr_table::{mix, AddrTable, Keyed};

/// A QP's outstanding work (or an SRQ's, with only `rq` used).
pub(super) struct Tracker {
    pub qp: usize,
    pub ctx: usize,
    pub qp_num: u32,
    pub send_cq: usize,
    pub recv_cq: usize,
    /// The QP's SRQ (its receives are tracked there), 0 if none.
    pub srq: usize,
    /// `sq_sig_all`: every send is signalled.
    pub sig_all: bool,
    /// An SRQ's tracker (found by its address only).
    pub is_srq: bool,
    pub sq: Locked<Ring>,
    pub rq: Locked<Ring>,
    /// An extended QP's batch: where the open `ibv_wr_start` began
    /// (position + 1), and the request its setters fill (position + 1).
    pub batch: AtomicU64,
    pub building: AtomicU64,
    /// Where the buffers of the receives posted since `rq` was last empty
    /// lie: `[lo, hi)`, set under `rq`'s lock, read without it by other
    /// queues' posts (a first look before taking that lock).
    pub span_lo: AtomicU64,
    pub span_hi: AtomicU64,
    /// In `RECEIVERS`.
    listed: AtomicBool,
    sizes: (usize, usize, usize, usize),
}

impl Tracker {
    pub(super) fn new(send: (usize, usize), recv: (usize, usize)) -> Tracker {
        Tracker {
            qp: 0,
            ctx: 0,
            qp_num: 0,
            send_cq: 0,
            recv_cq: 0,
            srq: 0,
            sig_all: false,
            is_srq: false,
            sq: Locked::new(Ring::new(send.0, send.1)),
            rq: Locked::new(Ring::new(recv.0, recv.1)),
            batch: AtomicU64::new(0),
            building: AtomicU64::new(0),
            span_lo: AtomicU64::new(u64::MAX),
            span_hi: AtomicU64::new(0),
            listed: AtomicBool::new(false),
            sizes: (send.0, send.1, recv.0, recv.1),
        }
    }

    /// A receive's buffer `[addr, addr + len)` was posted (under `rq`'s lock).
    pub(super) fn widen(&self, addr: u64, len: u32) {
        self.span_lo.fetch_min(addr, Ordering::Relaxed);
        self.span_hi
            .fetch_max(addr.saturating_add(u64::from(len)), Ordering::Relaxed);
    }

    /// `rq` holds no receive any more (under its lock).
    pub(super) fn narrow(&self) {
        self.span_lo.store(u64::MAX, Ordering::Relaxed);
        self.span_hi.store(0, Ordering::Relaxed);
    }

    /// May a receive of this queue hold part of `[addr, end)`?
    pub(super) fn may_hold(&self, addr: u64, end: u64) -> bool {
        addr < self.span_hi.load(Ordering::Relaxed) && self.span_lo.load(Ordering::Relaxed) < end
    }

    /// Is this tracker big enough for a queue of these sizes?
    fn fits(&self, send: (usize, usize), recv: (usize, usize)) -> bool {
        let (a, b, c, d) = self.sizes;
        a >= send.0 && b >= send.1 && c >= recv.0 && d >= recv.1
    }
}

pub(super) struct Slot {
    key: AtomicUsize,
    t: AtomicPtr<Tracker>,
}

impl Keyed for Slot {
    fn key(&self) -> &AtomicUsize {
        &self.key
    }
}

const QUEUES: usize = 4096;

/// Trackers by queue address. A slot keeps its tracker when its queue
/// goes (reused, cleared, by the next queue that fits it), so a poll
/// racing a destroy never reads freed memory.
static BY_ADDR: AddrTable<Slot, QUEUES, 64> = AddrTable::new(
    [const {
        Slot {
            key: AtomicUsize::new(0),
            t: AtomicPtr::new(std::ptr::null_mut()),
        }
    }; QUEUES],
);

/// QP addresses by (context, QP number).
static BY_QPN: AddrTable<Num, QUEUES, 64> = AddrTable::new(
    [const {
        Num {
            key: AtomicUsize::new(0),
            qp: AtomicUsize::new(0),
        }
    }; QUEUES],
);

pub(super) struct Num {
    key: AtomicUsize,
    qp: AtomicUsize,
}

impl Keyed for Num {
    fn key(&self) -> &AtomicUsize {
        &self.key
    }
}

fn qpn_key(ctx: usize, qp_num: u32) -> usize {
    ((mix(ctx as u64) ^ qp_num as u64) as usize).max(3)
}

/// The in-flight state of the queue at `addr`, if it has one.
pub(super) fn find(addr: usize) -> Option<&'static Tracker> {
    let p = BY_ADDR.find(addr)?.t.load(Ordering::Acquire);
    // SAFETY: trackers are never freed (see BY_ADDR).
    unsafe { p.as_ref() }.filter(|t| t.qp == addr)
}

/// The in-flight state of QP `qp_num` of `ctx`.
pub(super) fn by_qpn(ctx: usize, qp_num: u32) -> Option<&'static Tracker> {
    let qp = BY_QPN
        .find(qpn_key(ctx, qp_num))?
        .qp
        .load(Ordering::Acquire);
    find(qp).filter(|t| t.ctx == ctx && t.qp_num == qp_num)
}

/// Every tracked queue.
pub(super) fn all() -> impl Iterator<Item = &'static Tracker> {
    BY_ADDR.live().filter_map(|s| {
        // SAFETY: trackers are never freed.
        unsafe { s.t.load(Ordering::Acquire).as_ref() }.filter(|t| t.qp != 0)
    })
}

/// A tracker for the queue at `addr` of these sizes (send depth and SGEs,
/// receive depth and SGEs), made by `init`. None when the table has no
/// room for it (the queue is then not tracked).
pub(super) fn make(
    addr: usize,
    send: (usize, usize),
    recv: (usize, usize),
    init: impl FnOnce(&mut Tracker),
) -> Option<&'static Tracker> {
    let (slot, fresh) = BY_ADDR.claim(addr)?;
    if !fresh {
        return find(addr);
    }
    let old = slot.t.load(Ordering::Acquire);
    // SAFETY: trackers are never freed; this slot's is not in use (its
    // queue is gone: the slot was free).
    let reuse = unsafe { old.as_mut() }.filter(|t| t.fits(send, recv));
    let t: &'static mut Tracker = match reuse {
        Some(t) => {
            t.sq.with(Ring::clear);
            t.rq.with(Ring::clear);
            t.batch.store(0, Ordering::Relaxed);
            t.building.store(0, Ordering::Relaxed);
            t.narrow();
            t
        }
        None => Box::leak(Box::new(Tracker::new(send, recv))),
    };
    init(t);
    t.qp = addr;
    slot.t.store(t, Ordering::Release);
    BY_ADDR.publish(slot, addr);
    if !t.is_srq {
        let k = qpn_key(t.ctx, t.qp_num);
        if let Some((n, _)) = BY_QPN.claim(k) {
            n.qp.store(addr, Ordering::Release);
            BY_QPN.publish(n, k);
        }
    }
    Some(t)
}

/// The queues that have posted receives, for a post to look at the
/// others' (a receive buffer is the device's until its completion,
/// whichever queue it was posted to). Up to `RECEIVERS.len()` are listed;
/// a queue that finds no room is not looked at by the others.
static RECEIVERS: [AtomicPtr<Tracker>; 256] = [const { AtomicPtr::new(std::ptr::null_mut()) }; 256];
/// One past the highest slot of `RECEIVERS` ever used.
static RECEIVERS_TOP: AtomicUsize = AtomicUsize::new(0);

/// `t` posts receives: listed, once.
pub(super) fn list(t: &'static Tracker) {
    if t.listed.load(Ordering::Relaxed) || t.listed.swap(true, Ordering::AcqRel) {
        return;
    }
    let me = t as *const Tracker as *mut Tracker;
    for (i, s) in RECEIVERS.iter().enumerate() {
        if s.compare_exchange(
            std::ptr::null_mut(),
            me,
            Ordering::AcqRel,
            Ordering::Relaxed,
        )
        .is_ok()
        {
            RECEIVERS_TOP.fetch_max(i + 1, Ordering::AcqRel);
            return;
        }
    }
}

fn unlist(t: &Tracker) {
    if !t.listed.swap(false, Ordering::AcqRel) {
        return;
    }
    let me = t as *const Tracker as *mut Tracker;
    for s in &RECEIVERS[..RECEIVERS_TOP.load(Ordering::Acquire)] {
        if s.compare_exchange(
            me,
            std::ptr::null_mut(),
            Ordering::AcqRel,
            Ordering::Relaxed,
        )
        .is_ok()
        {
            return;
        }
    }
}

/// The listed queues other than the one at `own` (their trackers are
/// never freed; one may be being reused for another queue meanwhile).
pub(super) fn receivers_but(own: usize) -> impl Iterator<Item = &'static Tracker> {
    RECEIVERS[..RECEIVERS_TOP.load(Ordering::Acquire)]
        .iter()
        .filter_map(move |s| {
            // SAFETY: trackers are never freed.
            unsafe { s.load(Ordering::Acquire).as_ref() }.filter(|t| t.qp != own && t.qp != 0)
        })
}

/// The queue at `addr` is gone: its tracker is emptied, its slots free.
pub(super) fn forget(addr: usize) {
    if let Some(t) = find(addr) {
        t.sq.with(Ring::clear);
        t.rq.with(|r| {
            r.clear();
            t.narrow();
        });
        unlist(t);
        let k = qpn_key(t.ctx, t.qp_num);
        if BY_QPN
            .find(k)
            .is_some_and(|n| n.qp.load(Ordering::Acquire) == addr)
        {
            BY_QPN.release(k);
        }
    }
    BY_ADDR.release(addr);
}

/// Completions due on a CQ.
pub(super) struct Due {
    key: AtomicUsize,
    /// Due from live queues.
    pub n: AtomicI64,
    /// Due from destroyed queues (their signalled sends never polled).
    pub orphan: AtomicI64,
}

impl Keyed for Due {
    fn key(&self) -> &AtomicUsize {
        &self.key
    }
}

static DUE: AddrTable<Due, 1024, 64> = AddrTable::new(
    [const {
        Due {
            key: AtomicUsize::new(0),
            n: AtomicI64::new(0),
            orphan: AtomicI64::new(0),
        }
    }; 1024],
);

/// CQ `cq`'s count (made at 0 on first use; None if the table is full).
pub(super) fn due(cq: usize) -> Option<&'static Due> {
    if cq == 0 {
        return None;
    }
    if let Some(d) = DUE.find(cq) {
        return Some(d);
    }
    let (d, fresh) = DUE.claim(cq)?;
    if fresh {
        d.n.store(0, Ordering::Relaxed);
        d.orphan.store(0, Ordering::Relaxed);
        DUE.publish(d, cq);
    }
    Some(d)
}

fn take(a: &AtomicI64, k: i64) -> i64 {
    let was = a
        .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |n| {
            Some((n - k).max(0))
        })
        .unwrap_or(0);
    k - (was - (was - k).max(0))
}

/// `k` completions polled from `cq`: off its live queues' count, the rest
/// (not below 0) off the destroyed ones'.
pub(super) fn settle(cq: usize, k: i64) {
    if let Some(d) = DUE.find(cq) {
        let left = take(&d.n, k);
        if left > 0 {
            take(&d.orphan, left);
        }
    }
}

/// `k` completions due from live queues of `cq` will never come (their
/// queue was reset or destroyed).
pub(super) fn settle_live(cq: usize, k: i64) {
    if let Some(d) = DUE.find(cq) {
        take(&d.n, k);
    }
}

/// The CQ is gone.
pub(super) fn cq_gone(cq: usize) {
    DUE.release(cq);
}

/// The send and receive CQ, SRQ and number of a live QP.
///
/// # Safety
/// `qp` is a live QP.
pub(super) unsafe fn qp_facts(qp: *mut ibv_qp) -> (usize, usize, usize, usize, u32) {
    // SAFETY: the caller's contract.
    unsafe {
        (
            (*qp).context as usize,
            (*qp).send_cq as usize,
            (*qp).recv_cq as usize,
            (*qp).srq as usize,
            (*qp).qp_num,
        )
    }
}
