//! Locating and loading the real libibverbs, and resolving its functions.
//!
//! Loading is lazy (on the first call that needs it), happens once, and is a
//! small state machine on an atomic: other threads wait for the loader, but
//! a call that re-enters from the loading thread itself (a constructor of
//! the real library calling back into verbs) gets `None` at once instead of
//! deadlocking. Each function is resolved with `dlvsym` at its exact
//! version on first use and cached in its own atomic slot, so a forwarded
//! call costs one atomic load and one indirect call. While fault rules are
//! armed every slot is marked (its top bit), which sends its calls to the
//! cold path and the fault check: no export loads a separate flag.
//!
//! The shim must never forward to itself: when `libibverbs.so.1` on the
//! search path is the shim (drop-in mode) it looks further, and when
//! `IBV_SHIM_LIBRARY` names the shim it refuses with a clear error.

use std::ffi::{c_void, CStr, CString};
use std::fmt::Write as _;
use std::marker::PhantomData;
use std::sync::atomic::{AtomicI32, AtomicPtr, AtomicU8, AtomicUsize, Ordering};

use once_cell::sync::OnceCell;

use crate::config;
use crate::log::Level;

include!(concat!(env!("OUT_DIR"), "/versions.rs"));

mod loader;
pub mod rdmacm;
pub mod slots;

pub(crate) use loader::*;

/// A real library the shim forwards to, with its own set of version
/// nodes (a declaration table names its library).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Library {
    /// `libibverbs.so.1`.
    Ibverbs,
    /// `librdmacm.so.1` (the system's, or ibv-sim's; `rdmacm`).
    Rdmacm,
}

impl Library {
    /// The default version of `name` in this library's ABI (read when the
    /// shim was built).
    fn version_of(self, name: &CStr) -> Option<&'static CStr> {
        match self {
            Library::Ibverbs => version_of(name),
            Library::Rdmacm => rdmacm_version_of(name),
        }
    }

    /// The loaded library.
    fn handle(self) -> Option<*mut c_void> {
        match self {
            Library::Ibverbs => handle(),
            Library::Rdmacm => rdmacm::handle(),
        }
    }
}

const UNLOADED: u8 = 0;
const LOADING: u8 = 1;
const READY: u8 = 2;
const FAILED: u8 = 3;

static STATE: AtomicU8 = AtomicU8::new(UNLOADED);
static LOADER_TID: AtomicI32 = AtomicI32::new(0);
static HANDLE: AtomicPtr<c_void> = AtomicPtr::new(std::ptr::null_mut());

/// The library the shim forwards to, once loaded.
#[inline]
pub fn handle() -> Option<*mut c_void> {
    let h = HANDLE.load(Ordering::Acquire);
    if !h.is_null() {
        return Some(h);
    }
    load_slow()
}

#[cold]
fn load_slow() -> Option<*mut c_void> {
    // SAFETY: gettid cannot fail.
    let me = unsafe { libc::gettid() };
    loop {
        match STATE.compare_exchange(UNLOADED, LOADING, Ordering::AcqRel, Ordering::Acquire) {
            Ok(_) => {
                LOADER_TID.store(me, Ordering::Relaxed);
                // A panic here must not leave STATE at LOADING: every other
                // thread would then spin in this loop for ever.
                let loaded = std::panic::catch_unwind(|| {
                    before_load();
                    load()
                })
                .unwrap_or(None);
                let h = loaded.unwrap_or(std::ptr::null_mut());
                HANDLE.store(h, Ordering::Release);
                STATE.store(if h.is_null() { FAILED } else { READY }, Ordering::Release);
                return loaded;
            }
            Err(READY) => return Some(HANDLE.load(Ordering::Acquire)),
            Err(FAILED) => return None,
            Err(_) if LOADER_TID.load(Ordering::Relaxed) == me => {
                crate::log!(
                    Level::Warn,
                    "re-entrant verbs call while the real library is loading; failing it"
                );
                return None;
            }
            // Another thread is loading: dlopen is quick, so yield until done.
            // SAFETY: sched_yield has no preconditions.
            Err(_) => unsafe {
                libc::sched_yield();
            },
        }
    }
}

/// What runs once, in the loading thread, around the first load of the
/// real library: before it, `lifecycle` registers its fork handlers (a
/// process that never calls verbs pays nothing); after it, `forward` copies
/// the library's data objects. Set by `lifecycle` when the shim is loaded,
/// so this module depends on neither; 0 = none.
static BEFORE_LOAD: AtomicUsize = AtomicUsize::new(0);
static AFTER_LOAD: AtomicUsize = AtomicUsize::new(0);

/// Sets the hooks run before and after the real library is first loaded
/// (`after` gets the handle, which is never closed). Returns whether a load
/// has already started (then the caller runs them itself).
pub fn set_load_hooks(before: fn(), after: fn(*mut c_void)) -> bool {
    BEFORE_LOAD.store(before as usize, Ordering::Release);
    AFTER_LOAD.store(after as usize, Ordering::Release);
    STATE.load(Ordering::Acquire) != UNLOADED
}

fn before_load() {
    let p = BEFORE_LOAD.load(Ordering::Acquire);
    if p != 0 {
        // SAFETY: the slot only ever holds a `fn()` (set_load_hooks).
        let hook = unsafe { std::mem::transmute::<usize, fn()>(p) };
        hook();
    }
}

fn after_load(h: *mut c_void) {
    let p = AFTER_LOAD.load(Ordering::Acquire);
    if p != 0 {
        // SAFETY: the slot only ever holds a `fn(*mut c_void)` (set_load_hooks).
        let hook = unsafe { std::mem::transmute::<usize, fn(*mut c_void)>(p) };
        hook(h);
    }
}

/// After `fork()` in the child: a load that another thread had under way
/// will never finish there, so start over.
pub fn after_fork_in_child() {
    if STATE.load(Ordering::Relaxed) == LOADING {
        STATE.store(UNLOADED, Ordering::Relaxed);
    }
}

/// The verbs library.
const VERBS: Wanted = Wanted {
    file: "libibverbs.so.1",
    probe: c"ibv_get_device_list",
    version: c"IBVERBS_1.1",
    what: "a verbs library",
    itself: is_shim,
};

/// A verbs library the program itself dlopen()ed by path before the shim
/// loaded one: the library to forward to (unless `IBV_SHIM_LIBRARY` says
/// otherwise), so the program gets the rdma-core it asked for.
static REQUESTED: OnceCell<CString> = OnceCell::new();

/// Called by the `dlopen` hook for a verbs library named by path.
pub fn program_asked_for(path: &CStr) {
    if STATE.load(Ordering::Acquire) == UNLOADED {
        let _ = REQUESTED.set(path.to_owned());
    }
}

fn load() -> Option<*mut c_void> {
    let cfg = config::get();
    let mut tried = String::new();
    let requested = if cfg.library.is_none() {
        REQUESTED
            .get()
            .and_then(|path| match try_open(path, &VERBS) {
                Tried::Loaded(h) => Some(h),
                Tried::Itself => None,
                Tried::Failed(why) => {
                    let _ = write!(
                        tried,
                        "{} (the program's dlopen): {why}; ",
                        path.to_string_lossy()
                    );
                    None
                }
            })
    } else {
        None
    };
    let result = if requested.is_some() {
        requested
    } else if let Some(path) = &cfg.library {
        match try_open(path, &VERBS) {
            Tried::Loaded(h) => Some(h),
            Tried::Itself => {
                let _ = write!(
                    tried,
                    "IBV_SHIM_LIBRARY={} is this shim itself: refusing to forward to itself",
                    path.to_string_lossy()
                );
                None
            }
            Tried::Failed(why) => {
                let _ = write!(tried, "IBV_SHIM_LIBRARY={}: {why}", path.to_string_lossy());
                None
            }
        }
    } else {
        match try_open(c"libibverbs.so.1", &VERBS) {
            Tried::Loaded(h) => Some(h),
            first => {
                match first {
                    Tried::Itself => {
                        let _ = write!(tried, "libibverbs.so.1 on the library search path is this shim itself (drop-in mode)");
                        crate::log!(Level::Info, "libibverbs.so.1 on the search path is the shim itself; looking further");
                    }
                    Tried::Failed(why) => {
                        let _ = write!(tried, "libibverbs.so.1: {why}");
                    }
                    Tried::Loaded(_) => unreachable!(),
                }
                let mut found = None;
                let then =
                    std::iter::once(BUILD_REAL_LIBRARY).chain(SYSTEM_LIBRARY_PATHS.iter().copied());
                for c in fallback_candidates(VERBS.file, then) {
                    match try_open(&c, &VERBS) {
                        Tried::Loaded(h) => {
                            found = Some(h);
                            break;
                        }
                        Tried::Itself => {
                            let _ = write!(tried, "; {}: the shim itself", c.to_string_lossy());
                        }
                        Tried::Failed(why) => {
                            let _ = write!(tried, "; {}: {why}", c.to_string_lossy());
                        }
                    }
                }
                found
            }
        }
    };
    match result {
        Some(h) => {
            if crate::log::enabled(Level::Info) {
                crate::log!(Level::Info, "forwarding to {}", describe(h));
            }
            after_load(h);
            Some(h)
        }
        None => {
            crate::log!(
                Level::Error,
                "cannot load the real libibverbs, so every verbs call fails (ENOSYS). Tried: {tried}"
            );
            None
        }
    }
}

/// The file a handle was loaded from.
fn describe(h: *mut c_void) -> String {
    loaded_from(h, VERBS.probe, VERBS.version)
}

/// The file a handle was loaded from, found by one of its symbols
/// (`name` at `version`).
pub(crate) fn loaded_from(h: *mut c_void, name: &CStr, version: &CStr) -> String {
    // SAFETY: h is a live handle; the names are NUL-terminated.
    let sym = unsafe { libc::dlvsym(h, name.as_ptr(), version.as_ptr()) };
    // SAFETY: an all-zero Dl_info is valid; dladdr only writes it.
    let mut info: libc::Dl_info = unsafe { std::mem::zeroed() };
    // SAFETY: sym is an address in h (or NULL, which dladdr rejects).
    if !sym.is_null() && unsafe { libc::dladdr(sym, &mut info) } != 0 && !info.dli_fname.is_null() {
        // SAFETY: dladdr filled dli_fname with a valid C string.
        return unsafe { CStr::from_ptr(info.dli_fname) }
            .to_string_lossy()
            .into_owned();
    }
    "(unknown file)".into()
}

/// Why a real function cannot be called.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Unavailable {
    /// The real library could not be loaded: fail with ENOSYS.
    NotLoaded,
    /// The real library lacks this function (older rdma-core): EOPNOTSUPP.
    Missing,
    /// A fault rule (`IBV_SHIM_FAULTS`) fails this call with this errno.
    Injected(i32),
}

impl Unavailable {
    pub fn errno(self) -> i32 {
        match self {
            Unavailable::NotLoaded => libc::ENOSYS,
            Unavailable::Missing => libc::EOPNOTSUPP,
            Unavailable::Injected(e) => e,
        }
    }
}

const MISSING: usize = 1;
/// A resolved slot's top bit while fault rules are armed (`faults` sets
/// it): the fast path (one signed compare) then fails, and the cold path
/// asks `faults` first. So an export pays no separate "armed?" load when
/// none is set.
const HOOKED: usize = crate::faults::HOOKED;

/// A function of the real library, resolved at its exact version on first
/// use. `F` is the function pointer type.
pub struct RealFn<F> {
    library: Library,
    name: &'static CStr,
    slot: AtomicUsize,
    /// The address as resolved, never marked [`HOOKED`]: for
    /// [`resolved`](Self::resolved), whose callers (the device getters'
    /// tail calls) may have checked the gate just before rules were armed.
    plain: AtomicUsize,
    _f: PhantomData<F>,
}

impl<F: Copy> RealFn<F> {
    /// The function `name` of `library`, as `F`.
    ///
    /// # Safety
    /// `F` is an `unsafe extern "C" fn` type of the C signature of `name`
    /// (`get` makes an `F` of the address the library gives the name).
    pub const unsafe fn new(library: Library, name: &'static CStr) -> Self {
        assert!(std::mem::size_of::<F>() == std::mem::size_of::<usize>());
        RealFn {
            library,
            name,
            slot: AtomicUsize::new(0),
            plain: AtomicUsize::new(0),
            _f: PhantomData,
        }
    }

    /// The real function, or why it cannot be called; `hook` is the fault
    /// check (`faults::check` for this verb, handed in by its slot),
    /// which the fast path (resolved, no rule armed) skips: one load and
    /// one compare.
    #[inline(always)]
    pub fn get_hooked(
        &'static self,
        hook: impl FnOnce() -> Result<(), i32>,
    ) -> Result<F, Unavailable> {
        let p = self.slot.load(Ordering::Acquire);
        if p as isize > MISSING as isize {
            // SAFETY: as in `get`.
            return Ok(unsafe { std::mem::transmute_copy::<usize, F>(&p) });
        }
        self.slow_hooked(p, hook)
    }

    #[cold]
    #[inline(never)]
    fn slow_hooked(
        &'static self,
        p: usize,
        hook: impl FnOnce() -> Result<(), i32>,
    ) -> Result<F, Unavailable> {
        hook().map_err(Unavailable::Injected)?;
        self.slow(p)
    }

    /// The real function, or why it cannot be called, with no fault check
    /// (the shim's own calls).
    #[inline(always)]
    pub fn get(&'static self) -> Result<F, Unavailable> {
        let p = self.slot.load(Ordering::Acquire);
        if p as isize > MISSING as isize {
            // SAFETY: the slot only holds the address dlvsym returned for
            // this symbol, whose C signature is F (`new`'s contract).
            return Ok(unsafe { std::mem::transmute_copy::<usize, F>(&p) });
        }
        self.slow(p)
    }

    /// Not resolved yet, missing, or fault rules armed (`HOOKED`).
    #[cold]
    #[inline(never)]
    fn slow(&'static self, p: usize) -> Result<F, Unavailable> {
        if p & HOOKED != 0 {
            let p = p & !HOOKED;
            // SAFETY: as in `get` (the address, marked).
            return Ok(unsafe { std::mem::transmute_copy::<usize, F>(&p) });
        }
        if p == MISSING {
            // Looked up once already, and warned about then.
            return Err(Unavailable::Missing);
        }
        self.resolve()
    }

    /// The real function, resolved before.
    ///
    /// # Safety
    /// `get` must have returned it (once resolved, an address never
    /// changes).
    #[inline(always)]
    pub unsafe fn resolved(&self) -> F {
        let p = self.plain.load(Ordering::Relaxed);
        debug_assert!(p > MISSING);
        // SAFETY: resolved (the caller's contract), so as in `get`.
        unsafe { std::mem::transmute_copy::<usize, F>(&p) }
    }

    #[cold]
    fn resolve(&'static self) -> Result<F, Unavailable> {
        // Loading the library and dlvsym may leave errno changed (a failed
        // stat or dlopen of a candidate): the program's errno must reach the
        // real call untouched. The error paths set errno themselves.
        let saved = crate::errno::Errno::save();
        let r = self.resolve_inner();
        saved.restore();
        r
    }

    fn resolve_inner(&'static self) -> Result<F, Unavailable> {
        let h = self.library.handle().ok_or(Unavailable::NotLoaded)?;
        let version = self
            .library
            .version_of(self.name)
            .ok_or(Unavailable::Missing)?;
        // SAFETY: h is a live handle; both strings are NUL-terminated.
        let p = unsafe { libc::dlvsym(h, self.name.as_ptr(), version.as_ptr()) } as usize;
        if p == 0 {
            self.slot.store(MISSING, Ordering::Release);
            crate::log!(
                Level::Warn,
                "{}@{} is missing from the real library; the call fails with EOPNOTSUPP",
                self.name.to_string_lossy(),
                version.to_string_lossy()
            );
            return Err(Unavailable::Missing);
        }
        self.store_resolved(p);
        // SAFETY: as in `get`.
        Ok(unsafe { std::mem::transmute_copy::<usize, F>(&p) })
    }

    /// Caches `p`, marked [`HOOKED`] if fault rules are armed, now or
    /// later (`faults::resolved`).
    fn store_resolved(&'static self, p: usize) {
        store_resolved(self.library, &self.slot, &self.plain, p);
    }

    pub fn name(&self) -> &'static str {
        self.name.to_str().unwrap_or("?")
    }
}

/// [`RealFn::store_resolved`], once for every `F` (it does not depend on
/// it): the words cached, noted for fault rules and, for librdmacm, for
/// forgetting them when it is unloaded.
#[inline(never)]
fn store_resolved(
    library: Library,
    slot: &'static AtomicUsize,
    plain: &'static AtomicUsize,
    p: usize,
) {
    plain.store(p, Ordering::Release);
    slot.store(p, Ordering::SeqCst);
    crate::faults::resolved(slot);
    if library == Library::Rdmacm {
        rdmacm::resolved(slot, plain);
    }
}

/// The GUID of a device, from the real library (for the reports, which
/// call nothing of the real library themselves).
///
/// # Safety
/// `device` is the device of a context that is still open.
pub(crate) unsafe fn device_guid(device: *mut verbs_abi::ibv_device) -> Option<u64> {
    let f = slots::GetDeviceGuid::unhooked().ok()?;
    // SAFETY: the caller's contract.
    Some(unsafe { f.call(device) }).filter(|&g| g != 0)
}

impl From<Unavailable> for crate::guard::Refused {
    #[inline]
    fn from(why: Unavailable) -> Self {
        crate::guard::Refused(why.errno())
    }
}
