//! Device memory: `ibv_alloc_dm` / `ibv_free_dm`, `ibv_memcpy_to_dm` /
//! `ibv_memcpy_from_dm` (the `ibv_dm`'s own entries), and `ibv_reg_dm_mr`,
//! an MR over a range of the device memory that the data path uses as any
//! other (zero-based, as the kernel requires). The memory is its own
//! anonymous mapping, so the MR's pages are nobody else's. DM with MRs on
//! it is not freed (`EBUSY`). As on mlx5 (whose DM the sim's mirrors),
//! copies move whole 32-bit words: an offset or length that is not a
//! multiple of 4 is `EINVAL` (after the range check's `EFAULT`), and an
//! MR on it may be empty (the kernel checks only that it fits).

use core::ffi::{c_int, c_uint, c_void};

use parking_lot::Mutex;
use verbs_abi::{ibv_alloc_dm_attr, ibv_context, ibv_dm, ibv_mr, ibv_pd, verbs_context};

use crate::mr::{self, LOCAL_WRITE, REMOTE_ATOMIC, REMOTE_READ, REMOTE_WRITE, ZERO_BASED};
use crate::registry::Kind;
use crate::{child, context, guard};

use crate::device::limits::MAX_DM_SIZE;

/// Access flags an MR on device memory may have (mlx5's, plus the
/// optional range the kernel ignores).
const DM_ACCESS: u32 =
    LOCAL_WRITE | REMOTE_WRITE | REMOTE_READ | REMOTE_ATOMIC | ZERO_BASED | mr::OPTIONAL_RANGE;

/// Device memory; `dm` first so `*mut ibv_dm` is its address.
#[repr(C)]
pub struct SimDm {
    pub dm: ibv_dm,
    base: usize,
    len: usize,
    /// The keys of the MRs registered on it: while one is still
    /// registered (`mr::by_key`; keys are never reused), it is in use.
    mrs: Mutex<Vec<u32>>,
}

impl SimDm {
    /// `EBUSY` while an MR on it is registered.
    fn idle(&self) -> Result<(), c_int> {
        let mut keys = self.mrs.lock();
        keys.retain(|k| mr::by_key(*k).is_some());
        if keys.is_empty() {
            Ok(())
        } else {
            Err(libc::EBUSY)
        }
    }
}

pub(super) fn install(vctx: &mut verbs_context) {
    vctx.alloc_dm = Some(sim_alloc_dm);
    vctx.free_dm = Some(sim_free_dm);
    vctx.reg_dm_mr = Some(sim_reg_dm_mr);
}

/// `verbs_context.alloc_dm` (the inline `ibv_alloc_dm`).
pub unsafe extern "C" fn sim_alloc_dm(
    ctx: *mut ibv_context,
    attr: *mut ibv_alloc_dm_attr,
) -> *mut ibv_dm {
    guard::ptr(|| {
        let sim = context::from_ibv(ctx)?;
        crate::profile::offered(sim.dev.profile().device_memory)?;
        if attr.is_null() {
            return Err(libc::EINVAL);
        }
        // SAFETY: attr points at the caller's struct (plain data).
        let a = unsafe { attr.read() };
        if a.comp_mask != 0 || a.length == 0 || a.length as u64 > MAX_DM_SIZE {
            return Err(libc::EINVAL);
        }
        // SAFETY: a fresh private anonymous mapping (zeroed, as device
        // memory a program must not assume anything of).
        let base = unsafe {
            libc::mmap(
                core::ptr::null_mut(),
                a.length,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
                -1,
                0,
            )
        };
        if base == libc::MAP_FAILED {
            return Err(libc::ENOMEM);
        }
        let r = child::create(sim, Kind::Dm, |st| {
            Ok(SimDm {
                dm: ibv_dm {
                    context: sim.ibv(),
                    memcpy_to_dm: Some(sim_memcpy_to_dm),
                    memcpy_from_dm: Some(sim_memcpy_from_dm),
                    comp_mask: 0,
                    handle: st.handle(),
                },
                base: base as usize,
                len: a.length,
                mrs: Mutex::new(Vec::new()),
            })
        });
        if r.is_err() {
            // SAFETY: the mapping made above, not handed out.
            unsafe { libc::munmap(base, a.length) };
        }
        Ok(r?.cast())
    })
}

/// `verbs_context.free_dm` (the inline `ibv_free_dm`): `EBUSY` while MRs
/// are registered on it.
pub unsafe extern "C" fn sim_free_dm(dm: *mut ibv_dm) -> c_int {
    guard::errval(|| {
        let mut region = (0, 0);
        child::destroy(dm.cast::<SimDm>(), Kind::Dm, |d| {
            d.idle()?;
            region = (d.base, d.len);
            Ok(())
        })?;
        // SAFETY: the DM's own mapping; the DM is gone and had no MRs.
        unsafe { libc::munmap(region.0 as *mut c_void, region.1) };
        Ok(())
    })
}

/// The host range `[offset, offset + len)` of a live DM: `EFAULT` outside it.
fn range(dm: *mut ibv_dm, offset: u64, len: usize) -> Result<usize, c_int> {
    let (_, d) = child::get(dm.cast::<SimDm>(), Kind::Dm)?;
    let end = offset.checked_add(len as u64).ok_or(libc::EFAULT)?;
    if end > d.len as u64 {
        return Err(libc::EFAULT);
    }
    Ok(d.base + offset as usize)
}

/// [`range`] for a copy: whole 32-bit words only (mlx5's hardware limit).
fn copy_range(dm: *mut ibv_dm, offset: u64, len: usize) -> Result<usize, c_int> {
    let at = range(dm, offset, len)?;
    if !offset.is_multiple_of(4) || !len.is_multiple_of(4) {
        return Err(libc::EINVAL);
    }
    Ok(at)
}

/// `ibv_dm.memcpy_to_dm` (the inline `ibv_memcpy_to_dm`).
pub unsafe extern "C" fn sim_memcpy_to_dm(
    dm: *mut ibv_dm,
    offset: u64,
    host: *const c_void,
    len: usize,
) -> c_int {
    guard::errval(|| {
        let at = copy_range(dm, offset, len)?;
        if len > 0 {
            // SAFETY: the DM holds the range (checked); the caller's
            // buffer holds len bytes.
            unsafe { core::ptr::copy(host.cast::<u8>(), at as *mut u8, len) };
        }
        Ok(())
    })
}

/// `ibv_dm.memcpy_from_dm` (the inline `ibv_memcpy_from_dm`).
pub unsafe extern "C" fn sim_memcpy_from_dm(
    host: *mut c_void,
    dm: *mut ibv_dm,
    offset: u64,
    len: usize,
) -> c_int {
    guard::errval(|| {
        let at = copy_range(dm, offset, len)?;
        if len > 0 {
            // SAFETY: as in sim_memcpy_to_dm, the other way.
            unsafe { core::ptr::copy(at as *const u8, host.cast::<u8>(), len) };
        }
        Ok(())
    })
}

/// `verbs_context.reg_dm_mr` (the inline `ibv_reg_dm_mr`): zero-based only,
/// inside the DM, the DM and PD of one context.
pub unsafe extern "C" fn sim_reg_dm_mr(
    pd: *mut ibv_pd,
    dm: *mut ibv_dm,
    offset: u64,
    len: usize,
    access: c_uint,
) -> *mut ibv_mr {
    guard::ptr(|| {
        let (dctx, d) = child::get(dm.cast::<SimDm>(), Kind::Dm)?;
        let (pctx, _) = crate::pd::get(pd)?;
        if !core::ptr::eq(dctx, pctx) || access & !DM_ACCESS != 0 || access & ZERO_BASED == 0 {
            return Err(libc::EINVAL);
        }
        let host = range(dm, offset, len).map_err(|_| libc::EINVAL)?;
        let m = mr::reg_dm(pd, host as *mut c_void, len, access)?;
        // SAFETY: m was just registered and is not yet returned.
        d.mrs.lock().push(unsafe { (*m).lkey });
        Ok(m)
    })
}
