//! Protection domains and memory regions.

use std::ffi::{c_int, c_void};

use verbs_abi::{ibv_context, ibv_mr, ibv_pd};

use super::super::create_destroy::{mr_keys, on_context, record, track, track_mr, Destroy};
use super::super::{alive, forward, not_null};
use super::{MRS, PDS};
use crate::guard::{Errno, ErrnoCode, MinusOne};
use crate::real::slots::{
    AllocPd, DeallocPd, DeregMr, RegDmabufMr, RegMr, RegMrIova, RegMrIova2, ReregMr,
};
use crate::registry::objects::{self, Facts, Kind, MrVia};

// --- protection domains ---------------------------------------------------------

/// Allocates a protection domain on `context`. Returns NULL with errno set
/// on failure. Free it with `ibv_dealloc_pd()`.
#[no_mangle]
pub unsafe extern "C" fn ibv_alloc_pd(context: *mut ibv_context) -> *mut ibv_pd {
    let caller = crate::caller!();
    AllocPd::export(|| {
        on_context(AllocPd::NAME, context, caller)?;
        let track = |pd: *mut ibv_pd| {
            // SAFETY: a live PD just returned by the real library.
            let (o, handle) = unsafe { (record(Kind::Pd, pd, context, 0, caller), (*pd).handle) };
            track(o.with(Facts::Pd { handle }));
        };
        // SAFETY: the program's argument.
        unsafe { AllocPd::create(None, track, context) }
    })
}

/// Deallocates a protection domain. Returns 0 on success or an errno value:
/// EBUSY while MRs, QPs, SRQs or AHs still use it (the shim's log names
/// them); EINVAL, without calling the real library, for a PD of a closed
/// context or one destroyed already.
#[no_mangle]
pub unsafe extern "C" fn ibv_dealloc_pd(pd: *mut ibv_pd) -> c_int {
    const D: Destroy = Destroy::new(DeallocPd::VERB, Kind::Pd, PDS);
    // SAFETY: the program's argument.
    DeallocPd::export(|| unsafe { DeallocPd::destroy(&D, pd) })
}

// --- memory regions -------------------------------------------------------------

/// Registers `length` bytes at `addr` with `pd` for the given access
/// (`IBV_ACCESS_*`). Returns NULL with errno set on failure (EINVAL for a
/// PD of a closed context). Free it with `ibv_dereg_mr()`.
#[no_mangle]
pub unsafe extern "C" fn ibv_reg_mr(
    pd: *mut ibv_pd,
    addr: *mut c_void,
    length: usize,
    access: c_int,
) -> *mut ibv_mr {
    let caller = crate::caller!();
    RegMr::export(|| {
        not_null(RegMr::NAME, "pd", pd)?;
        let (via, parent) = (MrVia::RegMr, Some(("pd", pd as usize)));
        // SAFETY: the MR the real library just registered on `pd`.
        let track =
            |mr| unsafe { track_mr(mr, pd, addr as u64, length, access as u32, via, caller) };
        // SAFETY: the program's arguments.
        unsafe { RegMr::create(parent, track, pd, addr, length, access) }
    })
}

/// Like `ibv_reg_mr()`, with `iova` as the address the remote side uses.
#[no_mangle]
pub unsafe extern "C" fn ibv_reg_mr_iova(
    pd: *mut ibv_pd,
    addr: *mut c_void,
    length: usize,
    iova: u64,
    access: c_int,
) -> *mut ibv_mr {
    let caller = crate::caller!();
    RegMrIova::export(|| {
        not_null(RegMrIova::NAME, "pd", pd)?;
        let (via, parent) = (MrVia::RegMrIova, Some(("pd", pd as usize)));
        // SAFETY: the MR the real library just registered on `pd`.
        let track =
            |mr| unsafe { track_mr(mr, pd, addr as u64, length, access as u32, via, caller) };
        // SAFETY: the program's arguments.
        unsafe { RegMrIova::create(parent, track, pd, addr, length, iova, access) }
    })
}

/// Like `ibv_reg_mr_iova()`; what `ibv_reg_mr()` reaches from C when the
/// access flags are not a compile-time constant.
#[no_mangle]
pub unsafe extern "C" fn ibv_reg_mr_iova2(
    pd: *mut ibv_pd,
    addr: *mut c_void,
    length: usize,
    iova: u64,
    access: u32,
) -> *mut ibv_mr {
    let caller = crate::caller!();
    RegMrIova2::export(|| {
        not_null(RegMrIova2::NAME, "pd", pd)?;
        let (via, parent) = (MrVia::RegMrIova2, Some(("pd", pd as usize)));
        // SAFETY: the MR the real library just registered on `pd`.
        let track = |mr| unsafe { track_mr(mr, pd, addr as u64, length, access, via, caller) };
        // SAFETY: the program's arguments.
        unsafe { RegMrIova2::create(parent, track, pd, addr, length, iova, access) }
    })
}

/// Registers `length` bytes at `offset` of the dma-buf `fd` with `pd`.
/// Returns NULL with errno set on failure (EOPNOTSUPP when the real library
/// predates it).
#[no_mangle]
pub unsafe extern "C" fn ibv_reg_dmabuf_mr(
    pd: *mut ibv_pd,
    offset: u64,
    length: usize,
    iova: u64,
    fd: c_int,
    access: c_int,
) -> *mut ibv_mr {
    let caller = crate::caller!();
    RegDmabufMr::export(|| {
        not_null(RegDmabufMr::NAME, "pd", pd)?;
        let (via, parent) = (MrVia::RegDmabufMr, Some(("pd", pd as usize)));
        // SAFETY: the MR the real library just registered on `pd`.
        let track = |mr| unsafe { track_mr(mr, pd, offset, length, access as u32, via, caller) };
        // SAFETY: the program's arguments.
        unsafe { RegDmabufMr::create(parent, track, pd, offset, length, iova, fd, access) }
    })
}

/// Changes an MR's translation, PD or access (`IBV_REREG_MR_CHANGE_*` in
/// `flags`). Returns 0 or a negative `enum ibv_rereg_mr_err_code` with errno
/// set (`IBV_REREG_MR_ERR_INPUT` with EINVAL for an MR or PD of a closed
/// context).
#[no_mangle]
pub unsafe extern "C" fn ibv_rereg_mr(
    mr: *mut ibv_mr,
    flags: c_int,
    pd: *mut ibv_pd,
    addr: *mut c_void,
    length: usize,
    access: c_int,
) -> c_int {
    use verbs_abi::ibv_rereg_mr_flags::*;
    const CHANGE_TRANSLATION: c_int = IBV_REREG_MR_CHANGE_TRANSLATION as c_int;
    const CHANGE_PD: c_int = IBV_REREG_MR_CHANGE_PD as c_int;
    const CHANGE_ACCESS: c_int = IBV_REREG_MR_CHANGE_ACCESS as c_int;
    let caller = crate::caller!();
    // Fails with IBV_REREG_MR_ERR_INPUT (-1).
    ReregMr::export(|| {
        let pending = if crate::checks::inflight() {
            crate::exports::interpose::teardown::mr(mr, ReregMr::NAME, caller)
        } else {
            None
        };
        not_null(ReregMr::NAME, "mr", mr)?;
        let real = ReregMr::get()?;
        let check = || {
            alive(ReregMr::NAME, "mr", mr as usize)?;
            if flags & CHANGE_PD != 0 {
                alive(ReregMr::NAME, "pd", pd as usize)?;
            }
            Ok(())
        };
        forward(
            check,
            // SAFETY: the program's arguments, to the real function.
            || unsafe { real.call(mr, flags, pd, addr, length, access) },
            |call, &rc| {
                if rc == 0 {
                    let errno = Errno::save();
                    // SAFETY: the MR was just re-registered, so it is live.
                    let keys = unsafe { mr_keys(mr) };
                    objects::update(mr as usize, |o| {
                        if flags & CHANGE_PD != 0 {
                            o.parent = pd as usize;
                        }
                        if let Facts::Mr(m) = &mut o.facts {
                            if flags & CHANGE_TRANSLATION != 0 {
                                m.addr = addr as u64;
                                m.length = length as u64;
                            }
                            if flags & CHANGE_ACCESS != 0 {
                                m.access = access as u32;
                            }
                            m.keys = keys;
                        }
                    });
                    if crate::checks::datapath() {
                        crate::exports::interpose::mr_reregistered();
                    }
                    errno.restore();
                }
                // SAFETY: plain words (the MR and PD only as addresses).
                unsafe { ReregMr::done(call, mr, flags, pd, addr, length, access, rc, rc != 0) };
            },
        )
        .inspect(|&rc| {
            if let (Some(p), 0) = (pending, rc) {
                p.report();
            }
        })
        .map(MinusOne)
    })
}

/// Deregisters an MR. Returns 0 on success or an errno value (EBUSY while
/// memory windows are bound to it; EINVAL, without calling the real
/// library, for an MR of a closed context or one deregistered already).
#[no_mangle]
pub unsafe extern "C" fn ibv_dereg_mr(mr: *mut ibv_mr) -> c_int {
    const D: Destroy = Destroy::new(DeregMr::VERB, Kind::Mr, MRS);
    let caller = crate::caller!();
    DeregMr::export(|| {
        let pending = if crate::checks::inflight() {
            crate::exports::interpose::teardown::mr(mr, DeregMr::NAME, caller)
        } else {
            None
        };
        // SAFETY: the program's argument.
        let rc = unsafe { DeregMr::destroy(&D, mr) };
        if let (Some(p), Ok(ErrnoCode(0))) = (pending, &rc) {
            p.report();
        }
        rc
    })
}
