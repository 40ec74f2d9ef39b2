//! Address handles (to remote peers), and contexts, PDs and MRs imported
//! from another process.

use std::ffi::c_int;

use verbs_abi::{ibv_ah, ibv_ah_attr, ibv_context, ibv_grh, ibv_mr, ibv_pd, ibv_wc};

use super::super::create_destroy::{context_of_pd, mr_keys, on_context, record, track, Destroy};
use super::super::{not_null, tid};
use super::{MRS, PDS};
use crate::guard::Errno;
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
    CreateAh::export(|| {
        not_null(CreateAh::NAME, "pd", pd)?;
        let track = |ah: *mut ibv_ah| {
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
        };
        // SAFETY: the program's arguments.
        unsafe { CreateAh::create(Some(("pd", pd as usize)), track, pd, attr) }
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
    CreateAhFromWc::export(|| {
        not_null(CreateAhFromWc::NAME, "pd", pd)?;
        let track = |ah: *mut ibv_ah| {
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
        };
        // SAFETY: the program's arguments.
        unsafe { CreateAhFromWc::create(Some(("pd", pd as usize)), track, pd, wc, grh, port_num) }
    })
}

/// Destroys an address handle. Returns 0 on success or an errno value
/// (EINVAL, without calling the real library, for an AH of a closed context
/// or one destroyed already).
#[no_mangle]
pub unsafe extern "C" fn ibv_destroy_ah(ah: *mut ibv_ah) -> c_int {
    const D: Destroy = Destroy::new(DestroyAh::VERB, Kind::Ah, Kind::Ah.bit());
    // SAFETY: the program's argument.
    DestroyAh::export(|| unsafe { DestroyAh::destroy(&D, ah) })
}

// --- imported objects -----------------------------------------------------------------

/// Imports the context behind `cmd_fd` (another process's, shared through
/// a file descriptor). Returns NULL with errno set on failure (EOPNOTSUPP
/// when the real library predates it). Free it with `ibv_close_device()`.
#[no_mangle]
pub unsafe extern "C" fn ibv_import_device(cmd_fd: c_int) -> *mut ibv_context {
    let caller = crate::caller!();
    ImportDevice::export(|| {
        let track = |ctx: *mut ibv_context| {
            let errno = Errno::save();
            // SAFETY: a live context just returned by the real library.
            let device = unsafe { (*ctx).device };
            devices::remember(device);
            contexts::imported(ctx as usize, device as usize, tid(), caller);
            // SAFETY: the context the real import just returned.
            unsafe { crate::exports::interpose::install(ctx) };
            errno.restore();
        };
        // SAFETY: the program's arguments.
        unsafe { ImportDevice::create(None, track, cmd_fd) }
    })
}

/// Imports the PD with kernel handle `pd_handle` of an imported context.
/// Returns NULL with errno set on failure. Release it with
/// `ibv_unimport_pd()`.
#[no_mangle]
pub unsafe extern "C" fn ibv_import_pd(context: *mut ibv_context, pd_handle: u32) -> *mut ibv_pd {
    let caller = crate::caller!();
    ImportPd::export(|| {
        on_context(ImportPd::NAME, context, caller)?;
        let track = |pd: *mut ibv_pd| {
            // SAFETY: the object the real library just returned (on a live parent).
            let o = unsafe { record(Kind::ImportedPd, pd, context, 0, caller) };
            track(o.with(Facts::Pd { handle: pd_handle }));
        };
        // SAFETY: the program's arguments.
        unsafe { ImportPd::create(None, track, context, pd_handle) }
    })
}

/// Releases an imported PD (the PD itself lives on in its owner). EINVAL,
/// without calling the real library, for a PD of a closed context.
#[no_mangle]
pub unsafe extern "C" fn ibv_unimport_pd(pd: *mut ibv_pd) {
    // A `void` destroy: `Destroy::new` sees it in the verb.
    const D: Destroy = Destroy::new(UnimportPd::VERB, Kind::ImportedPd, PDS);
    // SAFETY: the program's argument.
    UnimportPd::export(|| unsafe { UnimportPd::destroy(&D, pd) })
}

/// Imports the MR with kernel handle `mr_handle` on an imported PD. Returns
/// NULL with errno set on failure. Release it with `ibv_unimport_mr()`.
#[no_mangle]
pub unsafe extern "C" fn ibv_import_mr(pd: *mut ibv_pd, mr_handle: u32) -> *mut ibv_mr {
    let caller = crate::caller!();
    ImportMr::export(|| {
        not_null(ImportMr::NAME, "pd", pd)?;
        let track = |mr: *mut ibv_mr| {
            // SAFETY: the object the real library just returned (on a live parent).
            let o = unsafe { record(Kind::ImportedMr, mr, context_of_pd(pd), pd as usize, caller) };
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
        };
        // SAFETY: the program's arguments.
        unsafe { ImportMr::create(Some(("pd", pd as usize)), track, pd, mr_handle) }
    })
}

/// Releases an imported MR (the MR itself lives on in its owner). EINVAL,
/// without calling the real library, for an MR of a closed context.
#[no_mangle]
pub unsafe extern "C" fn ibv_unimport_mr(mr: *mut ibv_mr) {
    // A `void` destroy: `Destroy::new` sees it in the verb.
    const D: Destroy = Destroy::new(UnimportMr::VERB, Kind::ImportedMr, MRS);
    // SAFETY: the program's argument.
    UnimportMr::export(|| unsafe { UnimportMr::destroy(&D, mr) })
}
