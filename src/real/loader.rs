//! The dynamic loader as the shim uses it: glibc's own `dlopen` and
//! `dlclose` (the shim exports hooks of both), opening a candidate real
//! library and refusing a copy of the shim, the fallback search when the
//! search path's library is the shim, link maps.

use std::ffi::{c_char, c_int, c_void, CStr, CString};
use std::sync::atomic::{AtomicUsize, Ordering};

use crate::config;
use crate::log::Level;

type DlopenFn = unsafe extern "C" fn(*const c_char, c_int) -> *mut c_void;

/// glibc's own `dlopen`, bypassing the shim's hook (see `exports::dl`).
///
/// `dlsym(RTLD_NEXT)` finds the next `dlopen` after the shim in the load
/// order, which keeps a tool preloaded after the shim in the chain; but when
/// `libc.so.6` comes *before* the shim (a program that links libc directly
/// and gets libibverbs only through librdmacm, libfabric, MPI or UCX) there
/// is none after it. Then `dlvsym` at glibc's versions finds it: a versioned
/// lookup skips the shim's own unversioned `dlopen`, so it cannot return the
/// hook. Never panics: with no dlopen at all (not a glibc process) every
/// load fails with NULL instead.
pub fn real_dlopen() -> DlopenFn {
    static SLOT: AtomicUsize = AtomicUsize::new(0);
    let p = SLOT.load(Ordering::Relaxed);
    if p != 0 {
        // SAFETY: the slot only ever holds a dlopen with this signature.
        return unsafe { std::mem::transmute::<usize, DlopenFn>(p) };
    }
    let f = find_dlopen().unwrap_or(no_dlopen as DlopenFn);
    SLOT.store(f as usize, Ordering::Relaxed);
    f
}

/// glibc's `dlclose`, found as `dlopen` is (the shim exports its own).
pub type DlcloseFn = unsafe extern "C" fn(*mut c_void) -> c_int;

/// glibc's `dlclose` (one lookup, then cached).
pub fn real_dlclose() -> Option<DlcloseFn> {
    static SLOT: AtomicUsize = AtomicUsize::new(0);
    let p = SLOT.load(Ordering::Relaxed);
    if p != 0 {
        // SAFETY: the slot only ever holds a dlclose with this signature.
        return Some(unsafe { std::mem::transmute::<usize, DlcloseFn>(p) });
    }
    let found = find_glibc(c"dlclose")?;
    SLOT.store(found as usize, Ordering::Relaxed);
    // SAFETY: `found` is a definition of dlclose, which has this signature.
    Some(unsafe { std::mem::transmute::<*mut c_void, DlcloseFn>(found) })
}

/// glibc's definition of `name` (`dlopen`, `dlclose`): the next one after
/// the shim, else the versioned one, never the shim's own.
fn find_glibc(name: &std::ffi::CStr) -> Option<*mut c_void> {
    // SAFETY: a symbol lookup with a NUL-terminated name.
    let next = unsafe { libc::dlsym(libc::RTLD_NEXT, name.as_ptr()) };
    if !next.is_null() && !in_shim(next) {
        return Some(next);
    }
    glibc_versioned(name)
}

/// glibc's definition of `name` at its own versions, never the shim's
/// (whose hooks are unversioned). Through `dlvsym` only, which the shim
/// does not hook, so the `dlsym` hook can find glibc's `dlsym` with it.
pub(crate) fn glibc_versioned(name: &CStr) -> Option<*mut c_void> {
    // GLIBC_2.34: libc.so.6 since glibc 2.34; GLIBC_2.2.5: libdl before
    // (and the compat alias after) on x86_64.
    [c"GLIBC_2.34", c"GLIBC_2.2.5"]
        .iter()
        .map(|v| {
            // SAFETY: a symbol lookup with NUL-terminated strings.
            unsafe { libc::dlvsym(libc::RTLD_DEFAULT, name.as_ptr(), v.as_ptr()) }
        })
        .find(|p| !p.is_null() && !in_shim(*p))
}

fn find_dlopen() -> Option<DlopenFn> {
    let found = find_glibc(c"dlopen")?;
    // SAFETY: `found` is a definition of dlopen, which has this signature.
    Some(unsafe { std::mem::transmute::<*mut c_void, DlopenFn>(found) })
}

/// Is `addr` inside this copy of the shim? (The hook must never jump to
/// itself.) Compared by object, through a function that is not exported:
/// the address of an exported one may resolve to another object's.
pub(crate) fn in_shim(addr: *mut c_void) -> bool {
    let base = |a: *const c_void| {
        // SAFETY: all-zero is a valid Dl_info; dladdr only writes it.
        let mut info: libc::Dl_info = unsafe { std::mem::zeroed() };
        // SAFETY: dladdr accepts any address.
        (unsafe { libc::dladdr(a, &mut info) } != 0).then_some(info.dli_fbase)
    };
    let here = base(in_shim as *const c_void);
    here.is_some() && base(addr) == here
}

/// Stands in for a dlopen that could not be found: every load fails.
unsafe extern "C" fn no_dlopen(_: *const c_char, _: c_int) -> *mut c_void {
    crate::log!(
        Level::Error,
        "no dlopen found in this process (dlsym and dlvsym at GLIBC_2.34 and GLIBC_2.2.5 all failed); libraries cannot be loaded"
    );
    std::ptr::null_mut()
}

pub(crate) fn dlerror() -> String {
    // SAFETY: dlerror returns NULL or a valid C string owned by libdl.
    let e = unsafe { libc::dlerror() };
    if e.is_null() {
        "unknown error".into()
    } else {
        // SAFETY: checked non-NULL just above.
        unsafe { CStr::from_ptr(e) }.to_string_lossy().into_owned()
    }
}

/// Is this handle a copy of the shim (this one or another)?
pub(crate) fn is_shim(handle: *mut c_void) -> bool {
    // SAFETY: handle is a live dlopen handle; the name is NUL-terminated.
    !unsafe { libc::dlsym(handle, c"ibvshim_version".as_ptr()) }.is_null()
}

/// Is the object of this handle itself a copy of the shim? Unlike
/// [`is_shim`] (a lookup on a handle also searches its dependencies) this
/// asks about the object alone: a librdmacm whose `libibverbs.so.1` is the
/// drop-in shim is not the shim.
///
/// # Safety
/// `handle` is a live `dlopen` handle.
pub(crate) unsafe fn object_is_shim(handle: *mut c_void) -> bool {
    // SAFETY: the caller's contract.
    let Some(map) = (unsafe { link_map(handle) }) else {
        return is_shim(handle);
    };
    // The object's dynamic section: an export of the shim may resolve to
    // another object's, its own dynamic section cannot.
    // SAFETY: a symbol lookup on a live handle with a NUL-terminated name.
    !unsafe { libc::dlsym(handle, c"ibvshim_version".as_ptr()) }.is_null()
        && in_shim(map.l_ld.cast_mut())
}

/// The head of glibc's `struct link_map` (`<link.h>`).
#[repr(C)]
pub(crate) struct LinkMap {
    pub l_addr: usize,
    /// The name the object was loaded by (a C string; empty for the
    /// program).
    pub l_name: *const c_char,
    /// Its dynamic section.
    pub l_ld: *const c_void,
}

/// The loaded object of a handle (`RTLD_DI_LINKMAP`).
///
/// # Safety
/// `handle` is a live `dlopen` handle; the link map is used only while
/// its object stays loaded.
pub(crate) unsafe fn link_map(handle: *mut c_void) -> Option<&'static LinkMap> {
    let mut map: *const LinkMap = std::ptr::null();
    // SAFETY: a live handle (the caller's contract); RTLD_DI_LINKMAP writes
    // a `struct link_map *`.
    let ok = unsafe {
        libc::dlinfo(
            handle,
            libc::RTLD_DI_LINKMAP,
            std::ptr::addr_of_mut!(map).cast(),
        )
    } == 0;
    // SAFETY: glibc's link map of a loaded object, whose head is as
    // declared; it lives while the object is loaded.
    (ok && !map.is_null()).then(|| unsafe { &*map })
}

/// What a load attempt of a real library gave.
pub(crate) enum Tried {
    Loaded(*mut c_void),
    /// The file is a copy of the shim (never closed: its code may already
    /// be referenced).
    Itself,
    Failed(String),
}

/// The library a load looks for: a function it must define at a version,
/// and how a copy of the shim is known.
pub(crate) struct Wanted {
    /// Its file name (`libibverbs.so.1`), searched for by the fallbacks.
    pub file: &'static str,
    pub probe: &'static CStr,
    pub version: &'static CStr,
    /// What it is, for "not ...: it has no probe@version".
    pub what: &'static str,
    /// Is this freshly opened handle the shim?
    pub itself: fn(*mut c_void) -> bool,
}

/// Opens `path` as the library `w` describes.
pub(crate) fn try_open(path: &CStr, w: &Wanted) -> Tried {
    // dlopen would block for ever on a FIFO and read a device.
    if path.to_bytes().contains(&b'/') {
        if let Err(e) = crate::files::check_loadable(path) {
            return Tried::Failed(format!("{e} before dlopen"));
        }
    }
    // SAFETY: path is NUL-terminated; flags are valid.
    let h = unsafe { real_dlopen()(path.as_ptr(), libc::RTLD_NOW | libc::RTLD_LOCAL) };
    if h.is_null() {
        return Tried::Failed(format!("dlopen: {}", dlerror()));
    }
    if (w.itself)(h) {
        return Tried::Itself;
    }
    // SAFETY: h is live; both strings are NUL-terminated.
    if unsafe { libc::dlvsym(h, w.probe.as_ptr(), w.version.as_ptr()) }.is_null() {
        // SAFETY: h came from dlopen and nothing of it is referenced yet.
        unsafe { libc::dlclose(h) };
        return Tried::Failed(format!(
            "not {}: it has no {}@{}",
            w.what,
            w.probe.to_string_lossy(),
            w.version.to_string_lossy()
        ));
    }
    Tried::Loaded(h)
}

/// Where to look for `file` when the search path's is the shim: the rest
/// of `LD_LIBRARY_PATH` (not in a secure-execution process), then `then`.
pub(crate) fn fallback_candidates<'a>(
    file: &str,
    then: impl IntoIterator<Item = &'a str>,
) -> Vec<CString> {
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
                let f = d.join(file);
                if f.is_file() {
                    push(f.to_string_lossy().into_owned());
                }
            }
        }
    }
    for p in then {
        push(p.to_string());
    }
    out
}
