//! Loading the real librdmacm: the system's, or ibv-sim's when the sim's
//! directory is on the search path. Loaded on the first `rdma_*` call the
//! shim forwards (a process that never calls one loads nothing), once, with
//! the same re-entrancy rule as the verbs library (`real`): a call from the
//! loading thread itself fails instead of deadlocking.
//!
//! The shim is never the target: when `librdmacm.so.1` on the search path
//! is the shim (drop-in mode: `target/dropin/librdmacm.so.1` is the shim
//! under a second name, the same file as the drop-in `libibverbs.so.1`, so
//! the dynamic linker loads it once) the rest of `LD_LIBRARY_PATH` and the
//! system's directories are tried.
//!
//! A program that loads librdmacm itself (`dlopen`, then `dlsym` on that
//! handle) is answered with the shim's exports (`exports::dlsym`), and the
//! shim forwards through the program's own handle, borrowed: no reference
//! of the shim's keeps the library loaded, so the program's `dlclose`
//! unloads it as it would without the shim. When it is gone, every real
//! function resolved from it is forgotten ([`closed`]), and the next
//! forwarded call loads the library again.

use std::ffi::{c_char, c_void, CStr};
use std::fmt::Write as _;
use std::sync::atomic::{AtomicI32, AtomicPtr, AtomicU8, AtomicUsize, Ordering};

use super::{fallback_candidates, try_open, Tried, Wanted};
use crate::log::Level;

const UNLOADED: u8 = 0;
const LOADING: u8 = 1;
const READY: u8 = 2;
const FAILED: u8 = 3;

static STATE: AtomicU8 = AtomicU8::new(UNLOADED);
static LOADER_TID: AtomicI32 = AtomicI32::new(0);
static HANDLE: AtomicPtr<c_void> = AtomicPtr::new(std::ptr::null_mut());

/// Where distributions install librdmacm.
const SYSTEM_PATHS: &[&str] = &[
    "/usr/lib/x86_64-linux-gnu/librdmacm.so.1",
    "/lib/x86_64-linux-gnu/librdmacm.so.1",
    "/usr/lib64/librdmacm.so.1",
    "/usr/lib/librdmacm.so.1",
];

/// The real librdmacm, once loaded.
#[inline]
pub fn handle() -> Option<*mut c_void> {
    let h = HANDLE.load(Ordering::Acquire);
    if !h.is_null() {
        return Some(h);
    }
    load_slow()
}

/// Has the real librdmacm been loaded (the exit report asks)?
pub fn loaded() -> bool {
    STATE.load(Ordering::Acquire) == READY
}

/// The name the borrowed handle was loaded by (its link map's `l_name`),
/// for the probe after the program's `dlclose`; NULL when the shim's
/// handle is its own. A leaked copy (one per borrow: a handful in a
/// process's life), so no lock is needed to read it.
static BORROWED: AtomicPtr<c_char> = AtomicPtr::new(std::ptr::null_mut());

/// Forwards through `handle`, the program's own `dlopen` of librdmacm
/// (loaded from `name`), when the shim has loaded none yet. Returns
/// whether the shim now forwards through it (it does too when it already
/// did: the same object gives the same handle).
///
/// # Safety
/// `handle` is a live `dlopen` handle.
pub unsafe fn borrow(handle: *mut c_void, name: &CStr) -> bool {
    if STATE
        .compare_exchange(UNLOADED, LOADING, Ordering::AcqRel, Ordering::Acquire)
        .is_err()
    {
        return HANDLE.load(Ordering::Acquire) == handle;
    }
    // SAFETY: a live handle (the caller's contract); both strings are
    // NUL-terminated.
    let real =
        !unsafe { libc::dlvsym(handle, RDMACM.probe.as_ptr(), RDMACM.version.as_ptr()) }.is_null();
    if !real || (RDMACM.itself)(handle) {
        STATE.store(UNLOADED, Ordering::Release);
        return false;
    }
    BORROWED.store(name.to_owned().into_raw(), Ordering::Release);
    HANDLE.store(handle, Ordering::Release);
    STATE.store(READY, Ordering::Release);
    crate::log!(
        Level::Info,
        "librdmacm: forwarding to the program's own dlopen of {} ({})",
        name.to_string_lossy(),
        describe(handle)
    );
    true
}

/// Is `handle` the program's handle the shim borrowed?
pub fn is_borrowed(handle: *mut c_void) -> bool {
    !handle.is_null()
        && HANDLE.load(Ordering::Acquire) == handle
        && STATE.load(Ordering::Acquire) == READY
        && !BORROWED.load(Ordering::Acquire).is_null()
}

/// The program's `dlclose` of the borrowed handle returned: if the
/// library is gone, forget it and every declared function resolved from
/// it, and say so (the caller resets the trampolines: `forward::forget`).
pub fn closed() -> bool {
    let name = BORROWED.load(Ordering::Acquire);
    if name.is_null() {
        return false;
    }
    // SAFETY: set only from `CString::into_raw`, never freed.
    let name = unsafe { CStr::from_ptr(name) };
    let open = super::real_dlopen();
    // SAFETY: a NUL-terminated name; RTLD_NOLOAD only asks.
    let still = unsafe { open(name.as_ptr(), libc::RTLD_NOLOAD | libc::RTLD_LAZY) };
    if !still.is_null() {
        // Still loaded (the program opened it more than once, or another
        // library needs it): the handle stays good. Drop the probe's
        // reference.
        if let Some(close) = super::real_dlclose() {
            // SAFETY: the probe's own reference, just taken.
            unsafe { close(still) };
        }
        return false;
    }
    if STATE
        .compare_exchange(READY, LOADING, Ordering::AcqRel, Ordering::Acquire)
        .is_err()
    {
        return false;
    }
    HANDLE.store(std::ptr::null_mut(), Ordering::Release);
    BORROWED.store(std::ptr::null_mut(), Ordering::Release);
    forget_resolved();
    STATE.store(UNLOADED, Ordering::Release);
    crate::log!(
        Level::Info,
        "librdmacm: {} was unloaded by the program's dlclose; the next rdma_* call loads it again",
        name.to_string_lossy()
    );
    true
}

/// The real functions resolved from librdmacm (`RealFn`'s two words), to
/// be forgotten when it is unloaded. More than librdmacm has functions.
const RESOLVED_MAX: usize = 256;
static RESOLVED: [(AtomicUsize, AtomicUsize); RESOLVED_MAX] =
    [const { (AtomicUsize::new(0), AtomicUsize::new(0)) }; RESOLVED_MAX];
static RESOLVED_LEN: AtomicUsize = AtomicUsize::new(0);

/// A real function of librdmacm was resolved into `slot` and `plain`.
pub fn resolved(slot: &'static AtomicUsize, plain: &'static AtomicUsize) {
    let (s, p) = (
        slot as *const AtomicUsize as usize,
        plain as *const _ as usize,
    );
    let n = RESOLVED_LEN.load(Ordering::Acquire).min(RESOLVED_MAX);
    if RESOLVED[..n]
        .iter()
        .any(|(a, _)| a.load(Ordering::Relaxed) == s)
    {
        return;
    }
    let i = RESOLVED_LEN.fetch_add(1, Ordering::AcqRel);
    if let Some((a, b)) = RESOLVED.get(i) {
        b.store(p, Ordering::Relaxed);
        a.store(s, Ordering::Release);
    }
}

/// Every resolved real function of librdmacm back to "not resolved".
fn forget_resolved() {
    let n = RESOLVED_LEN.load(Ordering::Acquire).min(RESOLVED_MAX);
    for (a, b) in &RESOLVED[..n] {
        for w in [a, b] {
            let p = w.load(Ordering::Acquire);
            if p != 0 {
                // SAFETY: only ever set from a `&'static AtomicUsize`
                // (`resolved`).
                unsafe { &*(p as *const AtomicUsize) }.store(0, Ordering::SeqCst);
            }
        }
    }
}

/// After `fork()` in the child: a load under way in another thread will
/// never finish there.
pub fn after_fork_in_child() {
    if STATE.load(Ordering::Relaxed) == LOADING {
        STATE.store(UNLOADED, Ordering::Relaxed);
    }
}

#[cold]
fn load_slow() -> Option<*mut c_void> {
    // SAFETY: gettid cannot fail.
    let me = unsafe { libc::gettid() };
    loop {
        match STATE.compare_exchange(UNLOADED, LOADING, Ordering::AcqRel, Ordering::Acquire) {
            Ok(_) => {
                LOADER_TID.store(me, Ordering::Relaxed);
                let loaded = std::panic::catch_unwind(load).unwrap_or(None);
                let h = loaded.unwrap_or(std::ptr::null_mut());
                HANDLE.store(h, Ordering::Release);
                STATE.store(if h.is_null() { FAILED } else { READY }, Ordering::Release);
                return loaded;
            }
            Err(READY) => return Some(HANDLE.load(Ordering::Acquire)),
            Err(FAILED) => return None,
            Err(_) if LOADER_TID.load(Ordering::Relaxed) == me => return None,
            // SAFETY: sched_yield has no preconditions.
            Err(_) => unsafe {
                libc::sched_yield();
            },
        }
    }
}

/// librdmacm.
const RDMACM: Wanted = Wanted {
    file: "librdmacm.so.1",
    probe: c"rdma_create_id",
    version: c"RDMACM_1.0",
    what: "librdmacm",
    // SAFETY: called with a handle dlopen just returned.
    itself: |h| unsafe { super::object_is_shim(h) },
};

fn load() -> Option<*mut c_void> {
    let mut tried = String::new();
    let found = match try_open(c"librdmacm.so.1", &RDMACM) {
        Tried::Loaded(h) => Some(h),
        first => {
            match first {
                Tried::Itself => tried.push_str("librdmacm.so.1 on the search path is this shim"),
                Tried::Failed(why) => {
                    let _ = write!(tried, "librdmacm.so.1: {why}");
                }
                Tried::Loaded(_) => unreachable!(),
            }
            fallback_candidates(RDMACM.file, SYSTEM_PATHS.iter().copied())
                .into_iter()
                .find_map(|c| match try_open(&c, &RDMACM) {
                    Tried::Loaded(h) => Some(h),
                    Tried::Itself => {
                        let _ = write!(tried, "; {}: the shim itself", c.to_string_lossy());
                        None
                    }
                    Tried::Failed(why) => {
                        let _ = write!(tried, "; {}: {why}", c.to_string_lossy());
                        None
                    }
                })
        }
    };
    match found {
        Some(h) => {
            crate::log!(Level::Info, "librdmacm: forwarding to {}", describe(h));
            Some(h)
        }
        None => {
            crate::log!(
                Level::Error,
                "cannot load the real librdmacm, so every rdma_* call fails (ENOSYS). Tried: {tried}"
            );
            None
        }
    }
}

/// The file a handle was loaded from.
fn describe(h: *mut c_void) -> String {
    super::loaded_from(h, RDMACM.probe, RDMACM.version)
}
