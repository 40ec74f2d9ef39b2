//! Protection domains and memory regions.

use std::ffi::{c_int, c_void};

use trace_format::verbs::{ALLOC_PD, REG_DMABUF_MR, REG_MR, REG_MR_IOVA, REG_MR_IOVA2, REREG_MR};
use verbs_abi::{ibv_context, ibv_mr, ibv_pd};

use super::super::create_destroy::{create, destroy, on_context, record, track, track_mr, Destroy};
use super::super::{alive, forward, not_null};
use super::{MRS, PDS};
use crate::guard::{export, Errno, ErrnoCode, MinusOne};
use crate::real::real_fns;
use crate::registry::objects::{self, Kind};

real_fns! {
    AllocPd = fn ibv_alloc_pd(context: *mut ibv_context) -> *mut ibv_pd;
    DeallocPd = fn ibv_dealloc_pd(pd: *mut ibv_pd) -> c_int;
    RegMr = fn ibv_reg_mr(pd: *mut ibv_pd, addr: *mut c_void, length: usize, access: c_int) -> *mut ibv_mr;
    RegMrIova = fn ibv_reg_mr_iova(pd: *mut ibv_pd, addr: *mut c_void, length: usize, iova: u64, access: c_int) -> *mut ibv_mr;
    RegMrIova2 = fn ibv_reg_mr_iova2(pd: *mut ibv_pd, addr: *mut c_void, length: usize, iova: u64, access: u32) -> *mut ibv_mr;
    RegDmabufMr = fn ibv_reg_dmabuf_mr(pd: *mut ibv_pd, offset: u64, length: usize, iova: u64, fd: c_int, access: c_int) -> *mut ibv_mr;
    ReregMr = fn ibv_rereg_mr(mr: *mut ibv_mr, flags: c_int, pd: *mut ibv_pd, addr: *mut c_void, length: usize, access: c_int) -> c_int;
    DeregMr = fn ibv_dereg_mr(mr: *mut ibv_mr) -> c_int;
}

// --- protection domains ---------------------------------------------------------

/// Allocates a protection domain on `context`. Returns NULL with errno set
/// on failure. Free it with `ibv_dealloc_pd()`.
#[no_mangle]
pub unsafe extern "C" fn ibv_alloc_pd(context: *mut ibv_context) -> *mut ibv_pd {
    let caller = crate::caller!();
    export("ibv_alloc_pd", || {
        on_context("ibv_alloc_pd", context, caller)?;
        let real = AllocPd::get()?;
        create(
            None,
            || real.call(context),
            |pd| {
                let mut o = record(Kind::Pd, pd, context, 0, caller);
                // SAFETY: a live PD just returned by the real library.
                o.a = unsafe { (*pd).handle } as u64;
                track(o);
            },
            |call, pd| call.done(&ALLOC_PD, &[context as u64], pd as u64, pd.is_null()),
        )
    })
}

/// Deallocates a protection domain. Returns 0 on success or an errno value:
/// EBUSY while MRs, QPs, SRQs or AHs still use it (the shim's log names
/// them); EINVAL, without calling the real library, for a PD of a closed
/// context or one destroyed already.
#[no_mangle]
pub unsafe extern "C" fn ibv_dealloc_pd(pd: *mut ibv_pd) -> c_int {
    export("ibv_dealloc_pd", || {
        let real = DeallocPd::get()?;
        let d = Destroy::new("ibv_dealloc_pd", "pd", Kind::Pd, PDS);
        destroy(&d, pd, || real.call(pd)).map(ErrnoCode)
    })
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
    export("ibv_reg_mr", || {
        not_null("ibv_reg_mr", "pd", pd)?;
        let real = RegMr::get()?;
        create(
            Some(("ibv_reg_mr", "pd", pd as usize)),
            || real.call(pd, addr, length, access),
            |mr| track_mr(mr, pd, addr as u64, length, access as u32, 0, caller),
            |call, mr| {
                call.done(
                    &REG_MR,
                    &[pd as u64, addr as u64, length as u64, access as u32 as u64],
                    mr as u64,
                    mr.is_null(),
                )
            },
        )
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
    export("ibv_reg_mr_iova", || {
        not_null("ibv_reg_mr_iova", "pd", pd)?;
        let real = RegMrIova::get()?;
        create(
            Some(("ibv_reg_mr_iova", "pd", pd as usize)),
            || real.call(pd, addr, length, iova, access),
            |mr| track_mr(mr, pd, addr as u64, length, access as u32, 1, caller),
            |call, mr| {
                call.done(
                    &REG_MR_IOVA,
                    &[
                        pd as u64,
                        addr as u64,
                        length as u64,
                        iova,
                        access as u32 as u64,
                    ],
                    mr as u64,
                    mr.is_null(),
                )
            },
        )
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
    export("ibv_reg_mr_iova2", || {
        not_null("ibv_reg_mr_iova2", "pd", pd)?;
        let real = RegMrIova2::get()?;
        create(
            Some(("ibv_reg_mr_iova2", "pd", pd as usize)),
            || real.call(pd, addr, length, iova, access),
            |mr| track_mr(mr, pd, addr as u64, length, access, 2, caller),
            |call, mr| {
                call.done(
                    &REG_MR_IOVA2,
                    &[
                        pd as u64,
                        addr as u64,
                        length as u64,
                        iova,
                        u64::from(access),
                    ],
                    mr as u64,
                    mr.is_null(),
                )
            },
        )
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
    export("ibv_reg_dmabuf_mr", || {
        not_null("ibv_reg_dmabuf_mr", "pd", pd)?;
        let real = RegDmabufMr::get()?;
        create(
            Some(("ibv_reg_dmabuf_mr", "pd", pd as usize)),
            || real.call(pd, offset, length, iova, fd, access),
            |mr| track_mr(mr, pd, offset, length, access as u32, 3, caller),
            |call, mr| {
                call.done(
                    &REG_DMABUF_MR,
                    &[
                        pd as u64,
                        offset,
                        length as u64,
                        iova,
                        fd as i64 as u64,
                        access as u32 as u64,
                    ],
                    mr as u64,
                    mr.is_null(),
                )
            },
        )
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
    // Fails with IBV_REREG_MR_ERR_INPUT (-1).
    export("ibv_rereg_mr", || {
        not_null("ibv_rereg_mr", "mr", mr)?;
        let real = ReregMr::get()?;
        let check = || {
            alive("ibv_rereg_mr", "mr", mr as usize)?;
            if flags & CHANGE_PD != 0 {
                alive("ibv_rereg_mr", "pd", pd as usize)?;
            }
            Ok(())
        };
        forward(
            check,
            || real.call(mr, flags, pd, addr, length, access),
            |call, &rc| {
                if rc == 0 {
                    let errno = Errno::save();
                    objects::update(mr as usize, |o| {
                        if flags & CHANGE_PD != 0 {
                            o.parent = pd as usize;
                        }
                        if flags & CHANGE_TRANSLATION != 0 {
                            o.a = addr as u64;
                            o.b = length as u64;
                        }
                        if flags & CHANGE_ACCESS != 0 {
                            o.x = access as u32;
                        }
                        // SAFETY: the MR was just re-registered, so it is live.
                        o.c = unsafe { (*mr).lkey as u64 | ((*mr).rkey as u64) << 32 };
                    });
                    if crate::checks::datapath() {
                        crate::exports::interpose::mr_reregistered();
                    }
                    errno.restore();
                }
                call.done(
                    &REREG_MR,
                    &[
                        mr as u64,
                        flags as u32 as u64,
                        pd as u64,
                        addr as u64,
                        length as u64,
                        access as u32 as u64,
                    ],
                    rc as i64 as u64,
                    rc != 0,
                );
            },
        )
        .map(MinusOne)
    })
}

/// Deregisters an MR. Returns 0 on success or an errno value (EBUSY while
/// memory windows are bound to it; EINVAL, without calling the real
/// library, for an MR of a closed context or one deregistered already).
#[no_mangle]
pub unsafe extern "C" fn ibv_dereg_mr(mr: *mut ibv_mr) -> c_int {
    export("ibv_dereg_mr", || {
        let real = DeregMr::get()?;
        let d = Destroy::new("ibv_dereg_mr", "mr", Kind::Mr, MRS);
        destroy(&d, mr, || real.call(mr)).map(ErrnoCode)
    })
}
