//! Protection domains.

use core::ffi::c_int;
use std::sync::atomic::{AtomicU32, Ordering};

use verbs_abi::{ibv_context, ibv_pd};

use crate::child::Users;
use crate::context::{self, SimContext};
use crate::registry::{Entry, Kind, OBJECTS};

/// A protection domain; `pd` first so `*mut ibv_pd` is the object's address.
#[repr(C)]
pub struct SimPd {
    pub pd: ibv_pd,
    /// MRs, QPs, SRQs and AHs using this PD (changed under the context lock).
    pub users: AtomicU32,
    /// Non-zero: this is the `pd` of a [`ParentPd`]. (In the padding: a
    /// PD stays 24 bytes, which a leak_audit test relies on.)
    parent: u32,
}

/// A parent domain (`objects::domain`): a PD usable wherever a PD is,
/// whose keys and QPs belong to the PD it wraps.
#[repr(C)]
pub struct ParentPd {
    pub pd: SimPd,
    pub base: *const SimPd,
    /// Its thread domain's use count (NULL without one).
    pub td: *const Users,
}

impl SimPd {
    /// Whether this is a parent domain's PD.
    pub fn is_parent(&self) -> bool {
        self.parent != 0
    }

    /// The protection domain the data path compares: the PD itself, or
    /// the one a parent domain wraps.
    pub fn base(&self) -> usize {
        if self.parent == 0 {
            return self as *const SimPd as usize;
        }
        // SAFETY: `parent` is set only on the SimPd a ParentPd starts with.
        unsafe { &*(self as *const SimPd).cast::<ParentPd>() }.base as usize
    }
}

impl ParentPd {
    /// A parent domain of `base` (and `td`), as `objects::domain` builds it.
    pub fn new(pd: ibv_pd, base: &SimPd, td: *const Users) -> ParentPd {
        ParentPd {
            pd: SimPd {
                pd,
                users: AtomicU32::new(0),
                parent: 1,
            },
            base,
            td,
        }
    }
}

/// A live PD and its context.
pub fn get(pd: *mut ibv_pd) -> Result<(&'static SimContext, &'static SimPd), c_int> {
    get_as(pd, libc::EINVAL)
}

/// As [`get`], with `unknown` the error for an object whose handle or
/// context the program changed (a destroy's `ENOENT`, as the kernel's).
pub fn get_as(
    pd: *mut ibv_pd,
    unknown: c_int,
) -> Result<(&'static SimContext, &'static SimPd), c_int> {
    let ctx = context::owner_of(pd as usize, Kind::Pd)?;
    // SAFETY: a live PD (the registry says so): its C fields are readable.
    let (named, handle) = unsafe { ((*pd).context, (*pd).handle) };
    context::known(ctx, pd as usize, named, handle).map_err(|_| unknown)?;
    // SAFETY: the registry says a live SimPd is at this address.
    Ok((ctx, unsafe { &*(pd as *const SimPd) }))
}

/// `ibv_alloc_pd`.
pub fn alloc(ctx: *mut ibv_context) -> Result<*mut ibv_pd, c_int> {
    let sim = context::from_ibv(ctx)?;
    let mut st = sim.lock_open()?;
    sim.dev.take(crate::device::Limit::Pd)?;
    let b = Box::new(SimPd {
        pd: ibv_pd {
            context: sim.ibv(),
            handle: st.handle(),
        },
        users: AtomicU32::new(0),
        parent: 0,
    });
    let raw = Box::into_raw(b);
    st.children += 1;
    OBJECTS.insert(
        raw as usize,
        Entry {
            kind: Kind::Pd,
            ctx: sim.addr(),
            // SAFETY: raw was just boxed here and is not shared yet.
            handle: unsafe { (*raw).pd.handle },
        },
    );
    Ok(raw.cast())
}

/// `ibv_dealloc_pd`: `EBUSY` while MRs, QPs, SRQs or AHs use it.
pub fn dealloc(pd: *mut ibv_pd) -> Result<(), c_int> {
    let (ctx, p) = get_as(pd, libc::ENOENT)?;
    let mut st = ctx.lock_open()?;
    if OBJECTS.get(pd as usize).map(|e| e.kind) != Some(Kind::Pd) {
        return Err(libc::EINVAL);
    }
    if p.users.load(Ordering::Relaxed) > 0 {
        return Err(libc::EBUSY);
    }
    OBJECTS.remove(pd as usize);
    st.children -= 1;
    if p.parent == 0 {
        ctx.dev.give(crate::device::Limit::Pd);
        drop(st);
        // SAFETY: allocated by Box in `alloc`, just unregistered under the lock.
        drop(unsafe { Box::from_raw(pd as *mut SimPd) });
        return Ok(());
    }
    // SAFETY: a parent domain, boxed by `child::create`, just unregistered;
    // its PD and TD are live: each counts it as a user.
    let parent = unsafe { Box::from_raw(pd as *mut ParentPd) };
    // SAFETY: as above: the PD and TD it counted itself a user of are live.
    unsafe {
        (*parent.base).users.fetch_sub(1, Ordering::Relaxed);
        if let Some(td) = parent.td.as_ref() {
            td.give();
        }
    }
    drop(st);
    drop(parent);
    Ok(())
}
