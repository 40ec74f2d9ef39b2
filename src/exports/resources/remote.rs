//! Address handles (to remote peers), and contexts, PDs and MRs imported
//! from another process.

use std::ffi::c_int;

use trace_format::verbs::{CREATE_AH, CREATE_AH_FROM_WC, IMPORT_DEVICE, IMPORT_MR, IMPORT_PD};
use verbs_abi::{ibv_ah, ibv_ah_attr, ibv_context, ibv_grh, ibv_mr, ibv_pd, ibv_wc};

use super::super::create_destroy::{
    context_of_pd, create, destroy, on_context, record, track, Destroy,
};
use super::super::{not_null, tid};
use super::{MRS, PDS};
use crate::guard::{export, Errno, ErrnoCode};
use crate::real::real_fns;
use crate::registry::objects::Kind;
use crate::registry::{contexts, devices};

real_fns! {
    CreateAh = fn ibv_create_ah(pd: *mut ibv_pd, attr: *mut ibv_ah_attr) -> *mut ibv_ah;
    CreateAhFromWc = fn ibv_create_ah_from_wc(pd: *mut ibv_pd, wc: *mut ibv_wc, grh: *mut ibv_grh, port_num: u8) -> *mut ibv_ah;
    DestroyAh = fn ibv_destroy_ah(ah: *mut ibv_ah) -> c_int;
    ImportDevice = fn ibv_import_device(cmd_fd: c_int) -> *mut ibv_context;
    ImportPd = fn ibv_import_pd(context: *mut ibv_context, pd_handle: u32) -> *mut ibv_pd;
    UnimportPd = fn ibv_unimport_pd(pd: *mut ibv_pd);
    ImportMr = fn ibv_import_mr(pd: *mut ibv_pd, mr_handle: u32) -> *mut ibv_mr;
    UnimportMr = fn ibv_unimport_mr(mr: *mut ibv_mr);
}

// --- address handles --------------------------------------------------------------

/// Creates an address handle on `pd` for the path in `attr`. Returns NULL
/// with errno set on failure. Free it with `ibv_destroy_ah()`.
#[no_mangle]
pub unsafe extern "C" fn ibv_create_ah(pd: *mut ibv_pd, attr: *mut ibv_ah_attr) -> *mut ibv_ah {
    let caller = crate::caller!();
    export("ibv_create_ah", || {
        not_null("ibv_create_ah", "pd", pd)?;
        let real = CreateAh::get()?;
        create(
            Some(("ibv_create_ah", "pd", pd as usize)),
            || real.call(pd, attr),
            |ah| {
                let mut o = record(Kind::Ah, ah, context_of_pd(pd), pd as usize, caller);
                if !attr.is_null() {
                    // SAFETY: the attributes the real library just accepted.
                    let attr = unsafe { &*attr };
                    o.a = attr.dlid as u64;
                    o.b = attr.port_num as u64;
                    o.c = attr.sl as u64 | (attr.is_global as u64) << 8;
                }
                track(o);
            },
            |call, ah| {
                call.done(
                    &CREATE_AH,
                    &[pd as u64, attr as u64],
                    ah as u64,
                    ah.is_null(),
                )
            },
        )
    })
}

/// Creates an address handle on `pd` that replies to the sender of the
/// completion `wc` (with its `grh` for global routes). Returns NULL with
/// errno set on failure. Free it with `ibv_destroy_ah()`.
#[no_mangle]
pub unsafe extern "C" fn ibv_create_ah_from_wc(
    pd: *mut ibv_pd,
    wc: *mut ibv_wc,
    grh: *mut ibv_grh,
    port_num: u8,
) -> *mut ibv_ah {
    let caller = crate::caller!();
    export("ibv_create_ah_from_wc", || {
        not_null("ibv_create_ah_from_wc", "pd", pd)?;
        let real = CreateAhFromWc::get()?;
        create(
            Some(("ibv_create_ah_from_wc", "pd", pd as usize)),
            || real.call(pd, wc, grh, port_num),
            |ah| {
                let mut o = record(Kind::Ah, ah, context_of_pd(pd), pd as usize, caller);
                if !wc.is_null() {
                    // SAFETY: the completion the real library just read.
                    let wc = unsafe { &*wc };
                    o.a = wc.slid as u64;
                    o.c = wc.sl as u64;
                }
                o.b = port_num as u64;
                o.set_sub(1);
                track(o);
            },
            |call, ah| {
                call.done(
                    &CREATE_AH_FROM_WC,
                    &[pd as u64, wc as u64, grh as u64, port_num as u64],
                    ah as u64,
                    ah.is_null(),
                )
            },
        )
    })
}

/// Destroys an address handle. Returns 0 on success or an errno value
/// (EINVAL, without calling the real library, for an AH of a closed context
/// or one destroyed already).
#[no_mangle]
pub unsafe extern "C" fn ibv_destroy_ah(ah: *mut ibv_ah) -> c_int {
    export("ibv_destroy_ah", || {
        let real = DestroyAh::get()?;
        let d = Destroy::new("ibv_destroy_ah", "ah", Kind::Ah, Kind::Ah.bit());
        destroy(&d, ah, || real.call(ah)).map(ErrnoCode)
    })
}

// --- imported objects -----------------------------------------------------------------

/// Imports the context behind `cmd_fd` (another process's, shared through
/// a file descriptor). Returns NULL with errno set on failure (EOPNOTSUPP
/// when the real library predates it). Free it with `ibv_close_device()`.
#[no_mangle]
pub unsafe extern "C" fn ibv_import_device(cmd_fd: c_int) -> *mut ibv_context {
    let caller = crate::caller!();
    export("ibv_import_device", || {
        let real = ImportDevice::get()?;
        create(
            None,
            || real.call(cmd_fd),
            |ctx| {
                let errno = Errno::save();
                // SAFETY: a live context just returned by the real library.
                let device = unsafe { (*ctx).device };
                devices::remember(device);
                contexts::imported(ctx as usize, device as usize, tid(), caller);
                // SAFETY: the context the real import just returned.
                unsafe { crate::exports::interpose::install(ctx) };
                errno.restore();
            },
            |call, ctx| {
                call.done(
                    &IMPORT_DEVICE,
                    &[cmd_fd as i64 as u64],
                    ctx as u64,
                    ctx.is_null(),
                )
            },
        )
    })
}

/// Imports the PD with kernel handle `pd_handle` of an imported context.
/// Returns NULL with errno set on failure. Release it with
/// `ibv_unimport_pd()`.
#[no_mangle]
pub unsafe extern "C" fn ibv_import_pd(context: *mut ibv_context, pd_handle: u32) -> *mut ibv_pd {
    let caller = crate::caller!();
    export("ibv_import_pd", || {
        on_context("ibv_import_pd", context, caller)?;
        let real = ImportPd::get()?;
        create(
            None,
            || real.call(context, pd_handle),
            |pd| {
                let mut o = record(Kind::ImportedPd, pd, context, 0, caller);
                o.a = pd_handle as u64;
                track(o);
            },
            |call, pd| {
                call.done(
                    &IMPORT_PD,
                    &[context as u64, pd_handle as u64],
                    pd as u64,
                    pd.is_null(),
                )
            },
        )
    })
}

/// Releases an imported PD (the PD itself lives on in its owner). EINVAL,
/// without calling the real library, for a PD of a closed context.
#[no_mangle]
pub unsafe extern "C" fn ibv_unimport_pd(pd: *mut ibv_pd) {
    export("ibv_unimport_pd", || {
        let real = UnimportPd::get()?;
        let d = Destroy {
            void: true,
            ..Destroy::new("ibv_unimport_pd", "pd", Kind::ImportedPd, PDS)
        };
        destroy(&d, pd, || {
            real.call(pd);
            0
        })?;
        Ok(())
    })
}

/// Imports the MR with kernel handle `mr_handle` on an imported PD. Returns
/// NULL with errno set on failure. Release it with `ibv_unimport_mr()`.
#[no_mangle]
pub unsafe extern "C" fn ibv_import_mr(pd: *mut ibv_pd, mr_handle: u32) -> *mut ibv_mr {
    let caller = crate::caller!();
    export("ibv_import_mr", || {
        not_null("ibv_import_mr", "pd", pd)?;
        let real = ImportMr::get()?;
        create(
            Some(("ibv_import_mr", "pd", pd as usize)),
            || real.call(pd, mr_handle),
            |mr| {
                let mut o = record(Kind::ImportedMr, mr, context_of_pd(pd), pd as usize, caller);
                // SAFETY: a live MR just returned by the real library.
                unsafe {
                    o.a = (*mr).addr as u64;
                    o.b = (*mr).length as u64;
                    o.c = (*mr).lkey as u64 | ((*mr).rkey as u64) << 32;
                }
                o.x = mr_handle;
                track(o);
            },
            |call, mr| {
                call.done(
                    &IMPORT_MR,
                    &[pd as u64, u64::from(mr_handle)],
                    mr as u64,
                    mr.is_null(),
                )
            },
        )
    })
}

/// Releases an imported MR (the MR itself lives on in its owner). EINVAL,
/// without calling the real library, for an MR of a closed context.
#[no_mangle]
pub unsafe extern "C" fn ibv_unimport_mr(mr: *mut ibv_mr) {
    export("ibv_unimport_mr", || {
        let real = UnimportMr::get()?;
        let d = Destroy {
            void: true,
            ..Destroy::new("ibv_unimport_mr", "mr", Kind::ImportedMr, MRS)
        };
        destroy(&d, mr, || {
            real.call(mr);
            0
        })?;
        Ok(())
    })
}
