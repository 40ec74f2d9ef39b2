//! Completion channels and completion queues: create / resize / destroy,
//! completion events, polling and arming.

use core::cell::UnsafeCell;
use core::ffi::{c_int, c_void};
use core::mem::{offset_of, size_of};
use core::ptr::addr_of_mut;
use std::collections::VecDeque;
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;

use parking_lot::lock_api::RawMutex as _;
use parking_lot::Mutex;
use verbs_abi::{ibv_comp_channel, ibv_context, ibv_cq, ibv_cq_ex, ibv_wc};

use crate::abi::WC_WR_FLUSH_ERR;

use crate::context::{self, SimContext};
use crate::events::{async_kind, AsyncEvent, EventCounter, EventQueue};
use crate::registry::{self, Entry, Kind, OBJECTS};

/// A completion channel; `ch` first so `*mut ibv_comp_channel` is its address.
#[repr(C)]
pub struct SimChannel {
    pub ch: ibv_comp_channel,
    /// Completion events: addresses of the CQs that fired.
    pub q: Arc<EventQueue<usize>>,
}

/// How a CQ is armed (`ibv_req_notify_cq`).
#[derive(Clone, Copy, PartialEq, Eq)]
enum Arm {
    None,
    Next,
    Solicited,
}

struct CqQueue {
    entries: VecDeque<ibv_wc>,
    cap: usize,
    arm: Arm,
    overflow: bool,
}

/// The part of a CQ the data path shares (QPs hold it).
pub struct CqShared {
    /// Address of the `ibv_cq` (what events carry).
    pub addr: usize,
    q: Mutex<CqQueue>,
    pub comp_events: EventCounter,
    pub async_events: EventCounter,
    channel: Option<Arc<EventQueue<usize>>>,
    /// A forked child's data path refuses its parent's CQs.
    pub born: crate::fork::Born,
    async_q: Arc<EventQueue<AsyncEvent>>,
    /// `IBV_EVENT_CQ_ERR` for every completion lost to overflow (rxe's
    /// `rxe_cq_post`), not only the first.
    err_each_overflow: bool,
}

impl CqShared {
    /// Adds a completion. `solicited` marks a solicited (or error)
    /// completion for `ibv_req_notify_cq(cq, 1)`. A full CQ overflows:
    /// the completion is lost and `IBV_EVENT_CQ_ERR` is raised (once, or
    /// per lost completion where the profile says so); returns false then.
    pub fn push(&self, wc: ibv_wc, solicited: bool) -> bool {
        let mut q = self.q.lock();
        if q.entries.len() >= q.cap {
            if !q.overflow || self.err_each_overflow {
                q.overflow = true;
                drop(q);
                self.async_q.push(AsyncEvent {
                    event_type: async_kind::CQ_ERR,
                    element: self.addr,
                });
            }
            return false;
        }
        q.entries.push_back(wc);
        let fire = match q.arm {
            Arm::Next => true,
            Arm::Solicited => solicited,
            Arm::None => false,
        };
        if fire {
            q.arm = Arm::None;
        }
        drop(q);
        if fire {
            if let Some(ch) = &self.channel {
                ch.push(self.addr);
            }
        }
        true
    }

    /// Moves up to `max` completions to `out`, oldest first.
    ///
    /// # Safety
    ///
    /// `out` must be valid for writes of `max` `ibv_wc`s (it need not be
    /// initialised or aligned beyond `ibv_wc`'s alignment).
    pub unsafe fn poll(&self, out: *mut ibv_wc, max: usize) -> usize {
        let mut q = self.q.lock();
        let n = max.min(q.entries.len());
        for (i, wc) in q.entries.drain(..n).enumerate() {
            // SAFETY: the caller's contract: room for `max` >= n completions.
            unsafe { out.add(i).write(wc) };
        }
        n
    }

    /// Arms the CQ for its next (solicited) completion.
    /// `ibv_req_notify_cq`. A CQ armed for any completion stays so when
    /// armed again for solicited ones only (the IB spec; rxe keeps
    /// `IB_CQ_NEXT_COMP`): the less restrictive request wins until the
    /// event fires.
    pub fn arm(&self, solicited_only: bool) {
        let mut q = self.q.lock();
        q.arm = match (q.arm, solicited_only) {
            (Arm::Next, _) | (_, false) => Arm::Next,
            _ => Arm::Solicited,
        };
    }

    /// Drops the completions of one QP (done when the QP is reset or destroyed).
    pub fn remove_qp(&self, qp_num: u32) {
        self.q.lock().entries.retain(|wc| wc.qp_num != qp_num);
    }

    pub fn len(&self) -> usize {
        self.q.lock().entries.len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

impl CqShared {
    /// A queue nothing is ever pushed to, for a QP without that side
    /// (an XRC receive QP's send side): never registered, never polled.
    pub fn unused(async_q: Arc<EventQueue<AsyncEvent>>) -> Arc<CqShared> {
        Arc::new(CqShared {
            addr: 0,
            q: Mutex::new(CqQueue {
                entries: VecDeque::new(),
                cap: 0,
                arm: Arm::None,
                overflow: false,
            }),
            comp_events: EventCounter::default(),
            async_events: EventCounter::default(),
            channel: None,
            born: crate::fork::Born::now(),
            async_q,
            err_each_overflow: false,
        })
    }
}

/// A completion queue; `cq` first so `*mut ibv_cq` is the object's address.
#[repr(C)]
pub struct SimCq {
    pub cq: ibv_cq,
    /// Must follow `cq`: with it, an `ibv_cq_ex` (see `ext::cq`).
    pub ex: CqEx,
    pub shared: Arc<CqShared>,
    /// QPs using this CQ (changed under the context lock).
    pub users: AtomicU32,
    channel: *mut SimChannel,
    /// The parent domain it was made on (`ext::cq`; 0: none), which
    /// counts it as a user until it is destroyed.
    pub parent_pd: AtomicUsize,
}

/// A live CQ and its context.
pub fn get(cq: *mut ibv_cq) -> Result<(&'static SimContext, &'static SimCq), c_int> {
    get_as(cq, libc::EINVAL)
}

/// As [`get`], with `unknown` the error for an object whose handle or
/// context the program changed (a destroy's `ENOENT`, as the kernel's).
pub fn get_as(
    cq: *mut ibv_cq,
    unknown: c_int,
) -> Result<(&'static SimContext, &'static SimCq), c_int> {
    let ctx = context::owner_of(cq as usize, Kind::Cq)?;
    // SAFETY: a live CQ (the registry says so): its C fields are readable.
    let (named, handle) = unsafe { ((*cq).context, (*cq).handle) };
    context::known(ctx, cq as usize, named, handle).map_err(|_| unknown)?;
    // SAFETY: the registry says a live SimCq is at this address.
    Ok((ctx, unsafe { &*(cq as *const SimCq) }))
}

/// The CQ behind a pointer, unchecked (data path, event acknowledgement):
/// rdma-core does not check these either.
///
/// # Safety
/// `cq` must be a CQ created by the sim and not yet freed.
pub unsafe fn unchecked<'a>(cq: *mut ibv_cq) -> &'a SimCq {
    // SAFETY: guaranteed by the caller.
    unsafe { &*(cq as *const SimCq) }
}

/// `ibv_create_comp_channel`.
pub fn create_channel(ctx: *mut ibv_context) -> Result<*mut ibv_comp_channel, c_int> {
    let sim = context::from_ibv(ctx)?;
    let mut st = sim.lock_open()?;
    let q = Arc::new(EventQueue::new()?);
    let b = Box::new(SimChannel {
        ch: ibv_comp_channel {
            context: sim.ibv(),
            fd: q.fd(),
            refcnt: 0,
        },
        q,
    });
    let raw = Box::into_raw(b);
    st.children += 1;
    OBJECTS.insert(
        raw as usize,
        Entry {
            kind: Kind::Channel,
            ctx: sim.addr(),
            handle: 0,
        },
    );
    Ok(raw.cast())
}

/// `ibv_destroy_comp_channel`: `EBUSY` while CQs use it.
pub fn destroy_channel(ch: *mut ibv_comp_channel) -> Result<(), c_int> {
    let ctx = context::owner_of(ch as usize, Kind::Channel)?;
    let mut st = ctx.lock_open()?;
    if !registry::is_live(ch as usize, Kind::Channel) {
        return Err(libc::EINVAL);
    }
    // SAFETY: live channel (checked under the lock); refcnt is only
    // changed under this lock.
    if unsafe { (*ch).refcnt } > 0 {
        return Err(libc::EBUSY);
    }
    OBJECTS.remove(ch as usize);
    st.children -= 1;
    drop(st);
    // SAFETY: allocated by Box in create_channel, just unregistered.
    let b = unsafe { Box::from_raw(ch as *mut SimChannel) };
    b.q.close();
    Ok(())
}

/// `ibv_create_cq`.
pub fn create(
    ctx: *mut ibv_context,
    cqe: c_int,
    cq_context: *mut c_void,
    channel: *mut ibv_comp_channel,
    comp_vector: c_int,
) -> Result<*mut ibv_cq, c_int> {
    let sim = context::from_ibv(ctx)?;
    if !(1..=sim.dev.profile().max_cqe).contains(&cqe) {
        return Err(libc::EINVAL);
    }
    if !(0..sim.dev.num_comp_vectors()).contains(&comp_vector) {
        return Err(libc::EINVAL);
    }
    let mut st = sim.lock_open()?;
    let chan: Option<&SimChannel> = if channel.is_null() {
        None
    } else {
        match registry::OBJECTS.get(channel as usize) {
            Some(Entry {
                kind: Kind::Channel,
                ctx,
                ..
            }) if ctx == sim.addr() => {
                // SAFETY: a live channel of this context.
                Some(unsafe { &*(channel as *const SimChannel) })
            }
            _ => return Err(libc::EINVAL),
        }
    };
    sim.dev.take(crate::device::Limit::Cq)?;
    // Like mlx5 and rxe: a power of two entries, one kept free.
    let actual = ((cqe as u32) + 1).next_power_of_two() - 1;
    let raw: *mut SimCq = Box::into_raw(Box::new(SimCq {
        // SAFETY: ibv_cq is plain data; all-zero is valid (pthread
        // initialisers are all-zero on glibc).
        cq: unsafe { core::mem::zeroed() },
        ex: CqEx::new(),
        shared: Arc::new(CqShared {
            addr: 0,
            q: Mutex::new(CqQueue {
                entries: VecDeque::new(),
                cap: actual as usize,
                arm: Arm::None,
                overflow: false,
            }),
            comp_events: EventCounter::default(),
            async_events: EventCounter::default(),
            channel: chan.map(|c| c.q.clone()),
            born: crate::fork::Born::now(),
            async_q: sim.async_q.clone(),
            err_each_overflow: sim.dev.profile().cq_overflow_fails_qp,
        }),
        users: AtomicU32::new(0),
        channel: channel.cast(),
        parent_pd: AtomicUsize::new(0),
    }));
    // SAFETY: raw is fresh; set the fields that need its own address.
    unsafe {
        let c = &mut (*raw).cq;
        c.context = sim.ibv();
        c.channel = channel;
        c.cq_context = cq_context;
        c.handle = st.handle();
        c.cqe = actual as c_int;
        Arc::get_mut(&mut (*raw).shared).expect("fresh Arc").addr = raw as usize;
        if chan.is_some() {
            (*channel).refcnt += 1;
        }
    }
    st.children += 1;
    OBJECTS.insert(
        raw as usize,
        Entry {
            kind: Kind::Cq,
            ctx: sim.addr(),
            // SAFETY: raw was just boxed here and is not shared yet.
            handle: unsafe { (*raw).cq.handle },
        },
    );
    Ok(raw.cast())
}

/// `ibv_resize_cq`.
pub fn resize(cq: *mut ibv_cq, cqe: c_int) -> Result<(), c_int> {
    let (ctx, c) = get(cq)?;
    if !(1..=ctx.dev.profile().max_cqe).contains(&cqe) {
        return Err(libc::EINVAL);
    }
    let _st = ctx.lock_open()?;
    if !registry::is_live(cq as usize, Kind::Cq) {
        return Err(libc::EINVAL);
    }
    let actual = ((cqe as u32) + 1).next_power_of_two() - 1;
    let mut q = c.shared.q.lock();
    if q.entries.len() > actual as usize {
        return Err(libc::EINVAL);
    }
    q.cap = actual as usize;
    // SAFETY: live CQ; its cqe field is only written under the context lock.
    unsafe { (*cq).cqe = actual as c_int };
    Ok(())
}

/// `ibv_destroy_cq`: `EBUSY` while QPs use it; waits until every delivered
/// completion / async event of the CQ was acknowledged.
pub fn destroy(cq: *mut ibv_cq) -> Result<(), c_int> {
    let (ctx, c) = get_as(cq, libc::ENOENT)?;
    {
        let _st = ctx.lock_open()?;
        if !registry::is_live(cq as usize, Kind::Cq) {
            return Err(libc::EINVAL);
        }
        if c.users.load(Ordering::Relaxed) > 0 {
            return Err(libc::EBUSY);
        }
        OBJECTS.remove(cq as usize);
        ctx.dev.give(crate::device::Limit::Cq);
        let parent = c.parent_pd.load(Ordering::Relaxed);
        if parent != 0 {
            // SAFETY: the parent domain is live: it counts this CQ as a user.
            unsafe { &*(parent as *const crate::pd::SimPd) }
                .users
                .fetch_sub(1, Ordering::Relaxed);
        }
    }
    let addr = cq as usize;
    if let Some(ch) = &c.shared.channel {
        ch.purge(|a| *a == addr);
    }
    ctx.async_q
        .purge(|e| e.event_type == async_kind::CQ_ERR && e.element == addr);
    c.shared.comp_events.wait_settled();
    c.shared.async_events.wait_settled();
    let mut st = ctx.lock();
    if !c.channel.is_null() {
        // SAFETY: the channel is live: this CQ holds a reference on it.
        unsafe { (*c.channel).ch.refcnt -= 1 };
    }
    st.children -= 1;
    drop(st);
    // SAFETY: allocated by Box in `create`, unregistered above.
    drop(unsafe { Box::from_raw(cq as *mut SimCq) });
    Ok(())
}

/// `ibv_get_cq_event`.
pub fn get_event(
    ch: *mut ibv_comp_channel,
    cq_out: *mut *mut ibv_cq,
    ctx_out: *mut *mut c_void,
) -> Result<(), c_int> {
    context::owner_of(ch as usize, Kind::Channel)?;
    if cq_out.is_null() || ctx_out.is_null() {
        return Err(libc::EINVAL);
    }
    // SAFETY: live channel.
    let chan = unsafe { &*(ch as *const SimChannel) };
    let addr = chan.q.pop(|addr| {
        // SAFETY: the entry was not blanked, so the CQ has not passed the
        // purge in `destroy` and is still allocated.
        unsafe { &*(*addr as *const SimCq) }
            .shared
            .comp_events
            .delivered();
        *addr
    })?;
    let cq = addr as *mut ibv_cq;
    // SAFETY: the CQ cannot be freed before this event is acknowledged.
    unsafe {
        *cq_out = cq;
        *ctx_out = (*cq).cq_context;
    }
    Ok(())
}

/// `ibv_ack_cq_events`.
pub fn ack_events(cq: *mut ibv_cq, n: u32) {
    if cq.is_null() || n == 0 {
        return;
    }
    // SAFETY: the program acknowledges events of a CQ it got from
    // ibv_get_cq_event, which cannot be freed before the acknowledgement.
    let c = unsafe { unchecked(cq) };
    c.shared.comp_events.acked_with(u64::from(n), || {
        // SAFETY: as above; the field mirrors what rdma-core keeps, and is
        // written under the counter's lock.
        unsafe {
            let f = core::ptr::addr_of_mut!((*cq).comp_events_completed);
            f.write(f.read().wrapping_add(n));
        }
    });
}

/// A completion with every other field zero.
pub fn wc(wr_id: u64, status: c_int, opcode: c_int, qp_num: u32) -> ibv_wc {
    // SAFETY: ibv_wc is plain data; zero is IBV_WC_SUCCESS / IBV_WC_SEND.
    let mut w: ibv_wc = unsafe { core::mem::zeroed() };
    w.wr_id = wr_id;
    w.qp_num = qp_num;
    // SAFETY: the callers pass members of ibv_wc_status / ibv_wc_opcode.
    unsafe {
        addr_of_mut!(w.status).cast::<c_int>().write(status);
        addr_of_mut!(w.opcode).cast::<c_int>().write(opcode);
    }
    w
}

/// A flushed work request's completion.
pub fn flush_wc(wr_id: u64, opcode: c_int, qp_num: u32) -> ibv_wc {
    wc(wr_id, WC_WR_FLUSH_ERR, opcode, qp_num)
}

/// Size of `ibv_cq_ex`'s fields after the `ibv_cq` ones.
const C_TAIL: usize = size_of::<ibv_cq_ex>() - size_of::<ibv_cq>();

/// The part of a sim CQ after its `ibv_cq`: the rest of `ibv_cq_ex`, then
/// the cursor of `ext::cq` (which works it). Plain CQs carry it too, unused.
#[repr(C)]
pub struct CqEx {
    /// `ibv_cq_ex` from `comp_mask` on: the table and the `status` and
    /// `wr_id` the program reads, all written through `*mut ibv_cq_ex`.
    pub(crate) _c: UnsafeCell<[u64; C_TAIL / 8]>,
    /// The completion the cursor is on.
    pub(crate) cur: UnsafeCell<ibv_wc>,
    /// Device and wall-clock time (ns) at which `cur` was polled.
    pub(crate) ts: UnsafeCell<(u64, u64)>,
    /// `IBV_WC_EX_WITH_*` asked for at creation.
    pub(crate) wc_flags: AtomicU64,
    /// Serialises pollers between start_poll and end_poll.
    pub(crate) lock: parking_lot::RawMutex,
    pub(crate) locking: AtomicBool,
    pub(crate) held: AtomicBool,
}

// `ibv_cq_ex_to_cq` is a cast: the tail must start where `ibv_cq_ex` goes
// on after the `ibv_cq` fields.
const _: () = assert!(offset_of!(SimCq, ex) == offset_of!(ibv_cq_ex, comp_mask));
const _: () = assert!(offset_of!(ibv_cq_ex, comp_mask) == size_of::<ibv_cq>());
const _: () = assert!(C_TAIL.is_multiple_of(8));

impl CqEx {
    /// The tail of a new CQ (plain until `ext::cq` fills the table).
    pub fn new() -> CqEx {
        CqEx {
            _c: UnsafeCell::new([0; C_TAIL / 8]),
            // SAFETY: ibv_wc is plain data; zero is IBV_WC_SUCCESS / IBV_WC_SEND.
            cur: UnsafeCell::new(unsafe { core::mem::zeroed() }),
            ts: UnsafeCell::new((0, 0)),
            wc_flags: AtomicU64::new(0),
            lock: parking_lot::RawMutex::INIT,
            locking: AtomicBool::new(false),
            held: AtomicBool::new(false),
        }
    }
}

impl Default for CqEx {
    fn default() -> Self {
        CqEx::new()
    }
}
