//! Thread domains (`ibv_alloc_td` / `ibv_dealloc_td`) and parent domains
//! (`ibv_alloc_parent_domain`): a parent domain is a PD (`pd::ParentPd`,
//! registered as one, freed by `ibv_dealloc_pd`) usable wherever a PD is;
//! the keys and QPs made on it belong to the PD it wraps (`SimPd::base`).
//! The PD and TD it uses cannot be freed before it (`EBUSY`).

use core::ffi::c_int;
use std::sync::atomic::Ordering;

use verbs_abi::{
    ibv_context, ibv_parent_domain_init_attr, ibv_pd, ibv_td, ibv_td_init_attr, verbs_context,
};

use crate::child::Users;
use crate::pd::{self, ParentPd};
use crate::registry::{self, Kind};
use crate::{child, context, guard};

/// `ibv_parent_domain_init_attr_mask`.
const PD_ATTR_ALLOCATORS: u32 = 1;
const PD_ATTR_PD_CONTEXT: u32 = 1 << 1;

/// A thread domain; `td` first so `*mut ibv_td` is its address.
#[repr(C)]
pub struct SimTd {
    pub td: ibv_td,
    /// Parent domains using it.
    users: Users,
}

pub(super) fn install(vctx: &mut verbs_context) {
    vctx.alloc_td = Some(sim_alloc_td);
    vctx.dealloc_td = Some(sim_dealloc_td);
    vctx.alloc_parent_domain = Some(sim_alloc_parent_domain);
}

/// `verbs_context.alloc_td` (the inline `ibv_alloc_td`).
pub unsafe extern "C" fn sim_alloc_td(
    ctx: *mut ibv_context,
    attr: *mut ibv_td_init_attr,
) -> *mut ibv_td {
    guard::ptr(|| {
        let sim = context::from_ibv(ctx)?;
        crate::profile::offered(sim.dev.profile().domains)?;
        // SAFETY: attr, when given, points at the caller's struct.
        if attr.is_null() || unsafe { (*attr).comp_mask } != 0 {
            return Err(libc::EINVAL);
        }
        let td = child::create(sim, Kind::Td, |_| {
            Ok(SimTd {
                td: ibv_td { context: sim.ibv() },
                users: Users::default(),
            })
        })?;
        Ok(td.cast())
    })
}

/// `verbs_context.dealloc_td` (the inline `ibv_dealloc_td`): `EBUSY`
/// while a parent domain uses it.
pub unsafe extern "C" fn sim_dealloc_td(td: *mut ibv_td) -> c_int {
    guard::errval(|| child::destroy(td.cast::<SimTd>(), Kind::Td, |t| t.users.idle()))
}

/// `verbs_context.alloc_parent_domain` (the inline `ibv_alloc_parent_domain`).
pub unsafe extern "C" fn sim_alloc_parent_domain(
    ctx: *mut ibv_context,
    attr: *mut ibv_parent_domain_init_attr,
) -> *mut ibv_pd {
    guard::ptr(|| {
        let sim = context::from_ibv(ctx)?;
        crate::profile::offered(sim.dev.profile().domains)?;
        if attr.is_null() {
            return Err(libc::EINVAL);
        }
        // SAFETY: attr points at the caller's struct (plain data).
        let a = unsafe { attr.read() };
        if a.comp_mask & !(PD_ATTR_ALLOCATORS | PD_ATTR_PD_CONTEXT) != 0 {
            return Err(libc::EINVAL);
        }
        if a.comp_mask & PD_ATTR_ALLOCATORS != 0 && (a.alloc.is_none() || a.free.is_none()) {
            return Err(libc::EINVAL);
        }
        let (pctx, base) = pd::get(a.pd)?;
        // A parent domain wraps a protection domain, not another parent.
        if !core::ptr::eq(pctx, sim) || base.base() != a.pd as usize {
            return Err(libc::EINVAL);
        }
        let td = if a.td.is_null() {
            None
        } else {
            Some(child::get(a.td.cast::<SimTd>(), Kind::Td)?)
        };
        if td.is_some_and(|(tctx, _)| !core::ptr::eq(tctx, sim)) {
            return Err(libc::EINVAL);
        }
        let p = child::create(sim, Kind::Pd, |st| {
            if !registry::is_live(a.pd as usize, Kind::Pd)
                || (td.is_some() && !registry::is_live(a.td as usize, Kind::Td))
            {
                return Err(libc::EINVAL);
            }
            base.users.fetch_add(1, Ordering::Relaxed);
            if let Some((_, t)) = td {
                t.users.take();
            }
            let pd = ibv_pd {
                context: sim.ibv(),
                handle: st.handle(),
            };
            Ok(ParentPd::new(
                pd,
                base,
                td.map_or(core::ptr::null(), |(_, t)| &t.users),
            ))
        })?;
        Ok(p.cast())
    })
}
