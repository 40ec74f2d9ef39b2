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

use std::ffi::{c_void, CStr, CString};
use std::fmt::Write as _;
use std::sync::atomic::{AtomicI32, AtomicPtr, AtomicU8, Ordering};

use crate::config;
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

enum Tried {
    Loaded(*mut c_void),
    Itself,
    Failed(String),
}

fn try_open(path: &CStr) -> Tried {
    if path.to_bytes().contains(&b'/') {
        if let Err(e) = crate::files::check_loadable(path) {
            return Tried::Failed(format!("{e} before dlopen"));
        }
    }
    // SAFETY: path is NUL-terminated; flags are valid.
    let h = unsafe { super::real_dlopen()(path.as_ptr(), libc::RTLD_NOW | libc::RTLD_LOCAL) };
    if h.is_null() {
        return Tried::Failed(format!("dlopen: {}", super::dlerror()));
    }
    if super::object_is_shim(h) {
        return Tried::Itself;
    }
    // SAFETY: h is live; both strings are NUL-terminated.
    if unsafe { libc::dlvsym(h, c"rdma_create_id".as_ptr(), c"RDMACM_1.0".as_ptr()) }.is_null() {
        // SAFETY: h came from dlopen and nothing of it is referenced yet.
        unsafe { libc::dlclose(h) };
        return Tried::Failed("not librdmacm: it has no rdma_create_id@RDMACM_1.0".into());
    }
    Tried::Loaded(h)
}

/// The files to try after the search path's `librdmacm.so.1` was the shim.
fn fallback_candidates() -> Vec<CString> {
    let mut out: Vec<CString> = Vec::new();
    let mut push = |p: String| {
        if let Ok(c) = CString::new(p) {
            if !out.contains(&c) {
                out.push(c);
            }
        }
    };
    if !config::get().secure {
        if let Some(dirs) = std::env::var_os("LD_LIBRARY_PATH") {
            for d in std::env::split_paths(&dirs) {
                let f = d.join("librdmacm.so.1");
                if f.is_file() {
                    push(f.to_string_lossy().into_owned());
                }
            }
        }
    }
    for p in SYSTEM_PATHS {
        push(p.to_string());
    }
    out
}

fn load() -> Option<*mut c_void> {
    let mut tried = String::new();
    let found = match try_open(c"librdmacm.so.1") {
        Tried::Loaded(h) => Some(h),
        first => {
            match first {
                Tried::Itself => tried.push_str("librdmacm.so.1 on the search path is this shim"),
                Tried::Failed(why) => {
                    let _ = write!(tried, "librdmacm.so.1: {why}");
                }
                Tried::Loaded(_) => unreachable!(),
            }
            fallback_candidates()
                .into_iter()
                .find_map(|c| match try_open(&c) {
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
    super::loaded_from(h, c"rdma_create_id", c"RDMACM_1.0")
}
