//! Shared receive queues.

use core::ffi::{c_int, c_void};
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::Arc;

use parking_lot::Mutex;
use verbs_abi::{ibv_pd, ibv_srq, ibv_srq_attr};

use crate::context::{self, SimContext};
use crate::events::{async_kind, AsyncEvent, EventCounter, EventQueue};
use crate::pd::{self, SimPd};
use crate::recvq::RecvQueue;
use crate::registry::{self, Entry, Kind, OBJECTS};

// `ibv_srq_attr_mask`.
crate::abi::values!(pub c_int: ibv_srq_attr_mask {
    SRQ_MAX_WR = IBV_SRQ_MAX_WR,
    SRQ_LIMIT = IBV_SRQ_LIMIT,
});

/// What the data path shares.
pub struct SrqShared {
    /// Address of the `ibv_srq` (what async events carry).
    pub addr: usize,
    pub rq: Mutex<SrqInner>,
    pub events: EventCounter,
    /// A forked child's data path refuses its parent's SRQs.
    pub born: crate::fork::Born,
    async_q: Arc<EventQueue<AsyncEvent>>,
}

pub struct SrqInner {
    pub rq: RecvQueue,
    /// Armed limit (0: not armed).
    pub limit: u32,
}

impl SrqShared {
    /// Called after a WQE was taken: fires `IBV_EVENT_SRQ_LIMIT_REACHED`
    /// once the queue drops below an armed limit, and disarms it.
    pub fn after_take(&self, inner: &mut SrqInner) {
        if inner.limit > 0 && (inner.rq.wqes.len() as u32) < inner.limit {
            inner.limit = 0;
            self.async_q.push(AsyncEvent {
                event_type: async_kind::SRQ_LIMIT_REACHED,
                element: self.addr,
            });
        }
    }
}

/// A shared receive queue; `srq` first so `*mut ibv_srq` is its address.
#[repr(C)]
pub struct SimSrq {
    pub srq: ibv_srq,
    pub shared: Arc<SrqShared>,
    /// QPs attached (changed under the context lock).
    pub users: AtomicU32,
    pd: *const SimPd,
    /// What destroying it gives back besides its PD (an XRC SRQ: its
    /// domain and CQ), run with its address under the context lock.
    pub release: Option<fn(usize)>,
}

/// A live SRQ and its context.
pub fn get(srq: *mut ibv_srq) -> Result<(&'static SimContext, &'static SimSrq), c_int> {
    get_as(srq, libc::EINVAL)
}

/// As [`get`], with `unknown` the error for an object whose handle or
/// context the program changed (a destroy's `ENOENT`, as the kernel's).
pub fn get_as(
    srq: *mut ibv_srq,
    unknown: c_int,
) -> Result<(&'static SimContext, &'static SimSrq), c_int> {
    let ctx = context::owner_of(srq as usize, Kind::Srq)?;
    // SAFETY: a live SRQ (the registry says so): its C fields are readable.
    let (named, handle) = unsafe { ((*srq).context, (*srq).handle) };
    context::known(ctx, srq as usize, named, handle).map_err(|_| unknown)?;
    // SAFETY: the registry says a live SimSrq is at this address.
    Ok((ctx, unsafe { &*(srq as *const SimSrq) }))
}

/// The SRQ behind a pointer, unchecked (data path).
///
/// # Safety
/// `srq` must be an SRQ created by the sim and not yet freed.
pub unsafe fn unchecked<'a>(srq: *mut ibv_srq) -> &'a SimSrq {
    // SAFETY: guaranteed by the caller.
    unsafe { &*(srq as *const SimSrq) }
}

/// `ibv_create_srq` (and the basic case of `ibv_create_srq_ex`);
/// writes the granted sizes back into `attr`.
pub fn create(
    pd_ptr: *mut ibv_pd,
    srq_context: *mut c_void,
    attr: &mut ibv_srq_attr,
) -> Result<*mut ibv_srq, c_int> {
    let (ctx, pd) = pd::get(pd_ptr)?;
    let pr = ctx.dev.profile();
    crate::profile::offered(pr.srq)?;
    if attr.max_wr == 0 || attr.max_wr > pr.max_srq_wr as u32 {
        return Err(libc::EINVAL);
    }
    if attr.max_sge > pr.max_srq_sge as u32 {
        return Err(libc::EINVAL);
    }
    let mut st = ctx.lock_open()?;
    if !registry::is_live(pd_ptr as usize, Kind::Pd) {
        return Err(libc::EINVAL);
    }
    ctx.dev.take(crate::device::Limit::Srq)?;
    let raw = Box::into_raw(Box::new(SimSrq {
        // SAFETY: ibv_srq is plain data; all-zero is valid.
        srq: unsafe { core::mem::zeroed() },
        shared: Arc::new(SrqShared {
            addr: 0,
            rq: Mutex::new(SrqInner {
                rq: RecvQueue::new(attr.max_wr, attr.max_sge.max(1)),
                limit: 0,
            }),
            events: EventCounter::default(),
            born: crate::fork::Born::now(),
            async_q: ctx.async_q.clone(),
        }),
        users: AtomicU32::new(0),
        pd,
        release: None,
    }));
    // SAFETY: raw is fresh.
    unsafe {
        let s = &mut (*raw).srq;
        s.context = ctx.ibv();
        s.srq_context = srq_context;
        s.pd = pd_ptr;
        s.handle = st.handle();
        Arc::get_mut(&mut (*raw).shared).expect("fresh Arc").addr = raw as usize;
    }
    attr.max_sge = attr.max_sge.max(1);
    pd.users.fetch_add(1, Ordering::Relaxed);
    st.children += 1;
    OBJECTS.insert(
        raw as usize,
        Entry {
            kind: Kind::Srq,
            ctx: ctx.addr(),
            // SAFETY: raw was just boxed here and is not shared yet.
            handle: unsafe { (*raw).srq.handle },
        },
    );
    Ok(raw.cast())
}

/// `ibv_modify_srq`.
pub fn modify(srq: *mut ibv_srq, attr: *mut ibv_srq_attr, mask: c_int) -> Result<(), c_int> {
    let (ctx, s) = get(srq)?;
    if attr.is_null() || mask & !(SRQ_MAX_WR | SRQ_LIMIT) != 0 {
        return Err(libc::EINVAL);
    }
    // SAFETY: attr points at the caller's struct.
    let a = unsafe { *attr };
    let _st = ctx.lock_open()?;
    let mut inner = s.shared.rq.lock();
    if mask & SRQ_MAX_WR != 0 {
        if ctx.dev.device_cap_flags() & crate::device::CAP_SRQ_RESIZE == 0 {
            return Err(libc::EINVAL);
        }
        if a.max_wr == 0
            || a.max_wr > ctx.dev.profile().max_srq_wr as u32
            || (a.max_wr as usize) < inner.rq.wqes.len()
        {
            return Err(libc::EINVAL);
        }
    }
    if mask & SRQ_LIMIT != 0 {
        let max = if mask & SRQ_MAX_WR != 0 {
            a.max_wr
        } else {
            inner.rq.max_wr
        };
        if a.srq_limit > max {
            return Err(libc::EINVAL);
        }
    }
    if mask & SRQ_MAX_WR != 0 {
        inner.rq.max_wr = a.max_wr;
    }
    if mask & SRQ_LIMIT != 0 {
        // Arms (or with 0 disarms) the limit; it fires when a later receive
        // takes the queue below it.
        inner.limit = a.srq_limit;
    }
    Ok(())
}

/// `ibv_query_srq`.
pub fn query(srq: *mut ibv_srq, attr: *mut ibv_srq_attr) -> Result<(), c_int> {
    let (_ctx, s) = get(srq)?;
    if attr.is_null() {
        return Err(libc::EINVAL);
    }
    let inner = s.shared.rq.lock();
    let a = ibv_srq_attr {
        max_wr: inner.rq.max_wr,
        max_sge: inner.rq.max_sge,
        srq_limit: inner.limit,
    };
    // SAFETY: attr points at the caller's struct.
    unsafe { attr.write(a) };
    Ok(())
}

/// `ibv_destroy_srq`: `EBUSY` while QPs use it.
pub fn destroy(srq: *mut ibv_srq) -> Result<(), c_int> {
    let (ctx, s) = get_as(srq, libc::ENOENT)?;
    {
        let _st = ctx.lock_open()?;
        if !registry::is_live(srq as usize, Kind::Srq) {
            return Err(libc::EINVAL);
        }
        if s.users.load(Ordering::Relaxed) > 0 {
            return Err(libc::EBUSY);
        }
        OBJECTS.remove(srq as usize);
    }
    let addr = srq as usize;
    ctx.async_q
        .purge(|e| e.element == addr && e.event_type == async_kind::SRQ_LIMIT_REACHED);
    s.shared.events.wait_settled();
    let mut st = ctx.lock();
    // SAFETY: the SRQ's PD is live (it counts this SRQ as a user).
    unsafe { &*s.pd }.users.fetch_sub(1, Ordering::Relaxed);
    match s.release {
        Some(f) => f(addr),
        // A plain SRQ (XRC SRQs are the XRC domain's, uncounted).
        None => ctx.dev.give(crate::device::Limit::Srq),
    }
    st.children -= 1;
    drop(st);
    // SAFETY: allocated by Box in `create`, unregistered above.
    drop(unsafe { Box::from_raw(srq as *mut SimSrq) });
    Ok(())
}
