//! Reaching programs that load libibverbs by hand (NCCL and friends).
//!
//! Such a program does `dlopen("libibverbs.so.1")` and then `dlvsym(handle,
//! "ibv_reg_mr_iova2", "IBVERBS_1.8")`: a lookup on a handle ignores
//! `LD_PRELOAD`, so the shim would never see those calls. The shim therefore
//! exports `dlopen`, and when the name is `libibverbs.so` or
//! `libibverbs.so.<N>` (with or without a directory) it returns a handle to
//! the shim itself. The shim exports every public symbol of the real library
//! at its version (instrumented or forwarded by trampoline, see
//! `forward.rs`), so every lookup on that handle succeeds exactly as on the
//! real one. `librdmacm.so[.N]` is passed on unchanged: a program that
//! unloads the librdmacm it loaded by hand must see it gone (Open MPI at
//! `MPI_Finalize`), which a handle to the shim (never unloaded) would not
//! give. Its lookups are answered instead (`exports::dlsym`); the
//! `dlclose` hook here notices when the program's close unloads the
//! librdmacm the shim forwards through. Every other name goes straight to glibc's
//! `dlopen`, so provider plugins and everything else load normally.

use std::ffi::{c_char, c_int, c_void, CStr, CString};
use std::sync::atomic::{AtomicUsize, Ordering};

use once_cell::sync::OnceCell;

use crate::log::Level;

/// Is this the name of the verbs library?
fn is_libibverbs(name: &CStr) -> bool {
    is_named(name, b"libibverbs.so")
}

pub(super) fn is_named(name: &CStr, lib: &[u8]) -> bool {
    let bytes = name.to_bytes();
    let base = bytes.rsplit(|&b| b == b'/').next().unwrap_or(bytes);
    base == lib || (base.starts_with(lib) && base.get(lib.len()) == Some(&b'.'))
}

/// The name the dynamic linker knows the shim by (its `l_name`, from
/// `dladdr`): the `LD_PRELOAD` entry as given, or the path the search found
/// in drop-in mode. `dlopen` of exactly that name returns the loaded shim by
/// name match, before it looks at the file system, so it still works after
/// the program changed directory (a relative `LD_PRELOAD`), when the path
/// has spaces, and when the file on disk was replaced since (a rebuild, an
/// upgrade) — where opening the file again would load a second shim.
pub(super) fn own_path() -> Option<&'static CStr> {
    static PATH: OnceCell<Option<CString>> = OnceCell::new();
    PATH.get_or_init(|| {
        let here = crate::exports::device::ibvshim_version as *const c_void;
        // SAFETY: an all-zero Dl_info is valid; dladdr only writes it.
        let mut info: libc::Dl_info = unsafe { std::mem::zeroed() };
        // SAFETY: `here` is an address inside the shim; info is writable.
        if unsafe { libc::dladdr(here, &mut info) } == 0 || info.dli_fname.is_null() {
            return None;
        }
        // SAFETY: dladdr set dli_fname to the object's NUL-terminated name,
        // which lives as long as the object (the shim is never unloaded).
        let name = unsafe { CStr::from_ptr(info.dli_fname) };
        (!name.to_bytes().is_empty()).then(|| name.to_owned())
    })
    .as_deref()
}

/// glibc's `dlopen`, for the hook's tail jump.
static REAL_DLOPEN: AtomicUsize = AtomicUsize::new(0);

/// Picks the file name the hook passes on: the shim's own path for the
/// verbs library's names, otherwise the caller's unchanged. An
/// `RTLD_NOLOAD` probe ("is libibverbs loaded?") is passed on unchanged so
/// its answer stays the true one. A path the program names (a private
/// rdma-core under /opt, say) becomes the library the shim forwards to,
/// when it has not loaded one yet.
///
/// # Safety
/// Called by the hook below with `dlopen`'s own arguments: `filename` is
/// NULL or a C string.
unsafe extern "C" fn dlopen_target(filename: *const c_char, flags: c_int) -> *const c_char {
    REAL_DLOPEN.store(crate::real::real_dlopen() as usize, Ordering::Relaxed);
    let saved = crate::guard::Errno::save();
    let redirect = crate::guard::boundary("dlopen", None, || {
        if filename.is_null() {
            return None;
        }
        // SAFETY: this function's contract (dlopen's): a C string.
        let name = unsafe { CStr::from_ptr(filename) };
        if !is_libibverbs(name) || flags & libc::RTLD_NOLOAD != 0 {
            return None;
        }
        if name.to_bytes().contains(&b'/') {
            crate::real::program_asked_for(name);
        }
        let me = own_path()?;
        crate::log!(
            Level::Debug,
            "dlopen({:?}) = the shim ({}): verbs looked up on this handle are instrumented",
            name.to_string_lossy(),
            me.to_string_lossy()
        );
        Some(me.as_ptr())
    });
    saved.restore();
    redirect.unwrap_or(filename)
}

/// `dlopen(3)`, except that the verbs library's names give the shim itself
/// (see the module documentation).
///
/// Written as a naked function that ends in a tail jump to glibc's dlopen:
/// glibc finds the caller's object from the return address (for its RPATH,
/// RUNPATH and namespace), so the return address must stay the program's.
///
/// # Safety
/// As `dlopen(3)`.
#[unsafe(naked)]
#[no_mangle]
pub unsafe extern "C" fn dlopen(filename: *const c_char, flags: c_int) -> *mut c_void {
    // On entry rsp is 8 mod 16; the push realigns it for the call. rdi and
    // rsi (the flags) are passed on to `dlopen_target` as they came.
    core::arch::naked_asm!(
        "push rsi",
        "call {target}",
        "pop rsi",
        "mov rdi, rax",
        "jmp qword ptr [rip + {real}]",
        target = sym dlopen_target,
        real = sym REAL_DLOPEN,
    )
}

/// `dlclose(3)`, passed on to glibc's. In a process that used verbs, the
/// modules loaded before the call are noted first, and those the call
/// unloaded are kept (path, address range, build ID) for the leak report:
/// an object a library made before it was unloaded (librdmacm under
/// Open MPI's libfabric component, closed at `MPI_Finalize`) keeps its
/// creation site, and the built-in suppressions still match it.
///
/// # Safety
/// As `dlclose(3)`.
#[no_mangle]
pub unsafe extern "C" fn dlclose(handle: *mut c_void) -> c_int {
    let Some(real) = crate::real::real_dlclose() else {
        // No glibc dlclose found: the handle stays open, which is what a
        // failed dlclose leaves.
        return -1;
    };
    let borrowed = crate::real::rdmacm::is_borrowed(handle);
    if !borrowed && !crate::report::used_verbs() {
        // SAFETY: the caller's contract is dlclose's.
        return unsafe { real(handle) };
    }
    let saved = crate::guard::Errno::save();
    let before = if crate::report::used_verbs() {
        crate::guard::boundary("dlclose", None, crate::report::loaded_modules)
    } else {
        None
    };
    saved.restore();
    // SAFETY: the caller's contract is dlclose's.
    let closed = unsafe { real(handle) };
    let saved = crate::guard::Errno::save();
    if let Some(before) = before {
        crate::guard::boundary("dlclose", (), || crate::report::note_departed(before));
    }
    if borrowed {
        // The librdmacm the shim forwards through may be gone.
        crate::guard::boundary("dlclose", (), || {
            if crate::real::rdmacm::closed() {
                crate::forward::forget(crate::real::Library::Rdmacm);
            }
        });
    }
    saved.restore();
    closed
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn verbs_library_names() {
        assert!(is_libibverbs(c"libibverbs.so.1"));
        assert!(is_libibverbs(c"libibverbs.so"));
        assert!(is_libibverbs(
            c"/usr/lib/x86_64-linux-gnu/libibverbs.so.1.14.44.0"
        ));
        assert!(!is_libibverbs(c"libmlx5-rdmav34.so"));
        assert!(!is_libibverbs(c"libibverbs-extra.so"));
        assert!(!is_libibverbs(c"/opt/libibverbs.so.1/libfoo.so"));
        assert!(!is_libibverbs(c"librdmacm.so.1"));
    }
}
