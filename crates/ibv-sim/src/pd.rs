//! Protection domains.

use core::ffi::c_int;
use std::sync::atomic::{AtomicU32, Ordering};

use verbs_abi::{ibv_context, ibv_pd};

use crate::context::{self, SimContext};
use crate::registry::{Entry, Kind, OBJECTS};

/// A protection domain; `pd` first so `*mut ibv_pd` is the object's address.
#[repr(C)]
pub struct SimPd {
    pub pd: ibv_pd,
    /// MRs, QPs, SRQs and AHs using this PD (changed under the context lock).
    pub users: AtomicU32,
    /// The protection domain keys and QPs are checked against: the PD
    /// itself, or the PD a parent domain wraps (`objects::domain`).
    pub base: usize,
    /// A parent domain's TD (0 otherwise), released with it.
    pub td: usize,
    /// What freeing it gives back (a parent domain: its PD and TD), run
    /// under the context lock.
    pub release: Option<fn(&SimPd)>,
}

impl SimPd {
    /// The protection domain the data path compares (see `base`).
    pub fn base(&self) -> usize {
        self.base
    }
}

/// A live PD and its context.
pub fn get(pd: *mut ibv_pd) -> Result<(&'static SimContext, &'static SimPd), c_int> {
    let ctx = context::owner_of(pd as usize, Kind::Pd)?;
    // SAFETY: the registry says a live SimPd is at this address.
    Ok((ctx, unsafe { &*(pd as *const SimPd) }))
}

/// `ibv_alloc_pd`.
pub fn alloc(ctx: *mut ibv_context) -> Result<*mut ibv_pd, c_int> {
    let sim = context::from_ibv(ctx)?;
    let mut st = sim.lock_open()?;
    let b = Box::new(SimPd {
        pd: ibv_pd {
            context: sim.ibv(),
            handle: st.handle(),
        },
        users: AtomicU32::new(0),
        base: 0,
        td: 0,
        release: None,
    });
    let raw = Box::into_raw(b);
    // SAFETY: raw is fresh; a plain PD is its own protection domain.
    unsafe { (*raw).base = raw as usize };
    st.children += 1;
    OBJECTS.insert(
        raw as usize,
        Entry {
            kind: Kind::Pd,
            ctx: sim.addr(),
        },
    );
    Ok(raw.cast())
}

/// `ibv_dealloc_pd`: `EBUSY` while MRs, QPs, SRQs or AHs use it.
pub fn dealloc(pd: *mut ibv_pd) -> Result<(), c_int> {
    let (ctx, p) = get(pd)?;
    let mut st = ctx.lock_open()?;
    if OBJECTS.get(pd as usize).map(|e| e.kind) != Some(Kind::Pd) {
        return Err(libc::EINVAL);
    }
    if p.users.load(Ordering::Relaxed) > 0 {
        return Err(libc::EBUSY);
    }
    OBJECTS.remove(pd as usize);
    st.children -= 1;
    if let Some(f) = p.release {
        f(p);
    }
    drop(st);
    // SAFETY: allocated by Box in `alloc`, just unregistered under the lock.
    drop(unsafe { Box::from_raw(pd as *mut SimPd) });
    Ok(())
}
