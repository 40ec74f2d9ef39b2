//! Address handles (to remote peers), and contexts, PDs and MRs imported
//! from another process.

use std::ffi::c_int;

use verbs_abi::{ibv_ah, ibv_ah_attr, ibv_context, ibv_grh, ibv_mr, ibv_pd, ibv_wc};

use super::super::create_destroy::{
    context_of_pd, create, destroy, mr_keys, on_context, record, track, Destroy,
};
use super::super::{not_null, tid};
use super::{MRS, PDS};
use crate::guard::{export, Errno, ErrnoCode};
use crate::real::slots::{
    CreateAh, CreateAhFromWc, DestroyAh, ImportDevice, ImportMr, ImportPd, UnimportMr, UnimportPd,
};
use crate::registry::objects::{AhFacts, AhVia, Facts, Kind};
use crate::registry::{contexts, devices};

// --- address handles --------------------------------------------------------------

/// Creates an address handle on `pd` for the path in `attr`. Returns NULL
/// with errno set on failure. Free it with `ibv_destroy_ah()`.
#[no_mangle]
pub unsafe extern "C" fn ibv_create_ah(pd: *mut ibv_pd, attr: *mut ibv_ah_attr) -> *mut ibv_ah {
    let caller = crate::caller!();
    export(CreateAh::NAME, || {
        not_null(CreateAh::NAME, "pd", pd)?;
        let real = CreateAh::get()?;
        create(
            Some((CreateAh::NAME, "pd", pd as usize)),
            // SAFETY: the program's arguments, to the real function.
            || unsafe { real.call(pd, attr) },
            |ah| {
                // SAFETY: the object the real library just returned (on a live parent).
                let mut o = unsafe { record(Kind::Ah, ah, context_of_pd(pd), pd as usize, caller) };
                if !attr.is_null() {
                    // SAFETY: the attributes the real library just accepted.
                    let attr = unsafe { &*attr };
                    o.facts = Facts::Ah(AhFacts {
                        dlid: attr.dlid,
                        port_num: attr.port_num,
                        sl: attr.sl,
                        global: attr.is_global != 0,
                        via: AhVia::CreateAh,
                    });
                }
                track(o);
            },
            |call, ah| {
                // SAFETY: the arguments and the result of the real call.
                unsafe { CreateAh::done(call, pd, attr, ah, ah.is_null()) }
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
    export(CreateAhFromWc::NAME, || {
        not_null(CreateAhFromWc::NAME, "pd", pd)?;
        let real = CreateAhFromWc::get()?;
        create(
            Some((CreateAhFromWc::NAME, "pd", pd as usize)),
            // SAFETY: the program's arguments, to the real function.
            || unsafe { real.call(pd, wc, grh, port_num) },
            |ah| {
                // SAFETY: the object the real library just returned (on a live parent).
                let o = unsafe { record(Kind::Ah, ah, context_of_pd(pd), pd as usize, caller) };
                let mut facts = AhFacts {
                    port_num,
                    via: AhVia::CreateAhFromWc,
                    ..AhFacts::default()
                };
                if !wc.is_null() {
                    // SAFETY: the completion the real library just read.
                    let wc = unsafe { &*wc };
                    (facts.dlid, facts.sl) = (wc.slid, wc.sl);
                }
                track(o.with(Facts::Ah(facts)));
            },
            |call, ah| {
                // SAFETY: the arguments and the result of the real call.
                unsafe { CreateAhFromWc::done(call, pd, wc, grh, port_num, ah, ah.is_null()) }
            },
        )
    })
}

/// Destroys an address handle. Returns 0 on success or an errno value
/// (EINVAL, without calling the real library, for an AH of a closed context
/// or one destroyed already).
#[no_mangle]
pub unsafe extern "C" fn ibv_destroy_ah(ah: *mut ibv_ah) -> c_int {
    export(DestroyAh::NAME, || {
        const D: Destroy = Destroy::new(DestroyAh::VERB, Kind::Ah, Kind::Ah.bit());
        let real = DestroyAh::get()?;
        // SAFETY: the program's argument, to the real function.
        destroy(&D, ah, || unsafe { real.call(ah) }).map(ErrnoCode)
    })
}

// --- imported objects -----------------------------------------------------------------

/// Imports the context behind `cmd_fd` (another process's, shared through
/// a file descriptor). Returns NULL with errno set on failure (EOPNOTSUPP
/// when the real library predates it). Free it with `ibv_close_device()`.
#[no_mangle]
pub unsafe extern "C" fn ibv_import_device(cmd_fd: c_int) -> *mut ibv_context {
    let caller = crate::caller!();
    export(ImportDevice::NAME, || {
        let real = ImportDevice::get()?;
        create(
            None,
            // SAFETY: the program's arguments, to the real function.
            || unsafe { real.call(cmd_fd) },
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
                // SAFETY: the arguments and the result of the real call.
                unsafe { ImportDevice::done(call, cmd_fd, ctx, ctx.is_null()) }
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
    export(ImportPd::NAME, || {
        on_context(ImportPd::NAME, context, caller)?;
        let real = ImportPd::get()?;
        create(
            None,
            // SAFETY: the program's arguments, to the real function.
            || unsafe { real.call(context, pd_handle) },
            |pd| {
                // SAFETY: the object the real library just returned (on a live parent).
                let o = unsafe { record(Kind::ImportedPd, pd, context, 0, caller) };
                track(o.with(Facts::Pd { handle: pd_handle }));
            },
            |call, pd| {
                // SAFETY: the arguments and the result of the real call.
                unsafe { ImportPd::done(call, context, pd_handle, pd, pd.is_null()) }
            },
        )
    })
}

/// Releases an imported PD (the PD itself lives on in its owner). EINVAL,
/// without calling the real library, for a PD of a closed context.
#[no_mangle]
pub unsafe extern "C" fn ibv_unimport_pd(pd: *mut ibv_pd) {
    export(UnimportPd::NAME, || {
        // A `void` destroy: `Destroy::new` sees it in the verb.
        const D: Destroy = Destroy::new(UnimportPd::VERB, Kind::ImportedPd, PDS);
        let real = UnimportPd::get()?;
        destroy(&D, pd, || {
            // SAFETY: the program's argument, to the real function.
            unsafe { real.call(pd) };
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
    export(ImportMr::NAME, || {
        not_null(ImportMr::NAME, "pd", pd)?;
        let real = ImportMr::get()?;
        create(
            Some((ImportMr::NAME, "pd", pd as usize)),
            // SAFETY: the program's arguments, to the real function.
            || unsafe { real.call(pd, mr_handle) },
            |mr| {
                // SAFETY: the object the real library just returned (on a live parent).
                let o =
                    unsafe { record(Kind::ImportedMr, mr, context_of_pd(pd), pd as usize, caller) };
                // SAFETY: a live MR just returned by the real library.
                let facts = unsafe {
                    Facts::ImportedMr {
                        handle: mr_handle,
                        addr: (*mr).addr as u64,
                        length: (*mr).length as u64,
                        keys: mr_keys(mr),
                    }
                };
                track(o.with(facts));
            },
            |call, mr| {
                // SAFETY: the arguments and the result of the real call.
                unsafe { ImportMr::done(call, pd, mr_handle, mr, mr.is_null()) }
            },
        )
    })
}

/// Releases an imported MR (the MR itself lives on in its owner). EINVAL,
/// without calling the real library, for an MR of a closed context.
#[no_mangle]
pub unsafe extern "C" fn ibv_unimport_mr(mr: *mut ibv_mr) {
    export(UnimportMr::NAME, || {
        // A `void` destroy: `Destroy::new` sees it in the verb.
        const D: Destroy = Destroy::new(UnimportMr::VERB, Kind::ImportedMr, MRS);
        let real = UnimportMr::get()?;
        destroy(&D, mr, || {
            // SAFETY: the program's argument, to the real function.
            unsafe { real.call(mr) };
            0
        })?;
        Ok(())
    })
}
