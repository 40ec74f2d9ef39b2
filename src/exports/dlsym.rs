//! Reaching programs that load librdmacm by hand (`dlopen`, then `dlsym`
//! on that handle). A lookup on a handle ignores `LD_PRELOAD`, and the
//! library itself must stay the real one (a program that `dlclose`s it
//! must see it gone: Open MPI at `MPI_Finalize`). So the shim exports
//! `dlsym`: a lookup on a handle of librdmacm (not the shim's own) of a
//! name the shim exports gets the shim's export, which forwards through
//! that same handle, borrowed (`real::rdmacm`). Everything else goes to
//! glibc's `dlsym` unchanged. Kept out of `dl` so that this code, run only
//! for such lookups, is not laid out with the start-up code
//! (`hot_text.ld`).

use std::ffi::{c_char, c_void, CStr};
use std::sync::atomic::{AtomicUsize, Ordering};

use once_cell::sync::OnceCell;

use super::dl::{is_named, own_path};
use crate::log::Level;

/// glibc's `dlsym`, for the hook's tail jump: the versioned definition, so
/// never the shim's own unversioned export.
static REAL_DLSYM: AtomicUsize = AtomicUsize::new(0);

fn real_dlsym() -> usize {
    let p = REAL_DLSYM.load(Ordering::Relaxed);
    if p != 0 {
        return p;
    }
    let found = crate::real::glibc_versioned(c"dlsym")
        .map_or(no_dlsym as *const () as usize, |p| p as usize);
    REAL_DLSYM.store(found, Ordering::Relaxed);
    found
}

/// Stands in for a dlsym that could not be found: every lookup fails.
unsafe extern "C" fn no_dlsym(_: *mut c_void, _: *const c_char) -> *mut c_void {
    std::ptr::null_mut()
}

/// A lookup through glibc's `dlsym` (for the hook's own questions).
///
/// # Safety
/// `handle` is a live handle; `name` a C string.
unsafe fn lookup(handle: *mut c_void, name: *const c_char) -> *mut c_void {
    type DlsymFn = unsafe extern "C" fn(*mut c_void, *const c_char) -> *mut c_void;
    // SAFETY: REAL_DLSYM holds glibc's dlsym (or `no_dlsym`), both of this
    // signature; the caller's contract gives the arguments.
    unsafe { std::mem::transmute::<usize, DlsymFn>(real_dlsym())(handle, name) }
}

/// The shim's own handle (a reference that changes nothing: it is never
/// unloaded).
fn own_handle() -> *mut c_void {
    static HANDLE: OnceCell<usize> = OnceCell::new();
    *HANDLE.get_or_init(|| {
        let Some(path) = own_path() else { return 0 };
        // SAFETY: a NUL-terminated name; RTLD_NOLOAD only finds the loaded shim.
        (unsafe { crate::real::real_dlopen()(path.as_ptr(), libc::RTLD_NOLOAD | libc::RTLD_LAZY) })
            as usize
    }) as *mut c_void
}

/// The loaded object's name (`l_name`) of a handle.
///
/// # Safety
/// `handle` is a live `dlopen` handle.
unsafe fn object_name(handle: *mut c_void) -> Option<&'static CStr> {
    // SAFETY: the caller's contract.
    let name = unsafe { crate::real::link_map(handle) }?.l_name;
    // SAFETY: l_name is a NUL-terminated string living as long as the
    // object (used only while the program's handle is live).
    (!name.is_null()).then(|| unsafe { CStr::from_ptr(name) })
}

/// The hook's decision: the shim's export to answer with, or NULL to
/// pass the lookup on to glibc unchanged.
///
/// # Safety
/// Called by the hook with `dlsym`'s own arguments and its caller's return
/// address.
unsafe extern "C" fn dlsym_target(
    handle: *mut c_void,
    name: *const c_char,
    caller: *const c_void,
) -> *mut c_void {
    real_dlsym();
    // RTLD_DEFAULT and RTLD_NEXT (their answers depend on the caller).
    if handle.is_null() || handle as isize == -1 || name.is_null() {
        return std::ptr::null_mut();
    }
    let saved = crate::guard::Errno::save();
    let answer = crate::guard::boundary("dlsym", None, || {
        // SAFETY: the program's live handle (dlsym's contract).
        let object = unsafe { object_name(handle) }?;
        if !is_named(object, b"librdmacm.so") || crate::real::in_shim(caller.cast_mut()) {
            return None;
        }
        // SAFETY: as above.
        if unsafe { crate::real::object_is_shim(handle) } {
            return None;
        }
        // SAFETY: a live handle and the program's C string.
        let real = unsafe { lookup(handle, name) };
        let me = own_handle();
        if real.is_null() || me.is_null() {
            return None;
        }
        // SAFETY: the shim's live handle and the program's C string.
        let ours = unsafe { lookup(me, name) };
        if ours.is_null() || ours == real || !crate::real::in_shim(ours) {
            return None;
        }
        // SAFETY: the program's live handle (dlsym's contract).
        if !unsafe { crate::real::rdmacm::borrow(handle, object) } {
            // The shim forwards to another librdmacm than the one the
            // program holds: leave the program's lookups to it.
            return None;
        }
        // SAFETY: the program's C string.
        let n = unsafe { CStr::from_ptr(name) };
        crate::log!(
            Level::Debug,
            "dlsym({}, {:?}) = the shim's export",
            object.to_string_lossy(),
            n.to_string_lossy()
        );
        Some(ours)
    });
    saved.restore();
    answer.unwrap_or(std::ptr::null_mut())
}

/// `dlsym(3)`, except that a lookup on a handle of librdmacm of a name the
/// shim exports gets the shim's export (see the module documentation).
///
/// Naked, ending in a tail jump to glibc's `dlsym` when it does not
/// answer: `RTLD_NEXT` is relative to the caller's object, found from the
/// return address, which must stay the program's.
///
/// # Safety
/// As `dlsym(3)`.
#[unsafe(naked)]
#[no_mangle]
pub unsafe extern "C" fn dlsym(handle: *mut c_void, symbol: *const c_char) -> *mut c_void {
    // On entry rsp is 8 mod 16; two pushes and 8 bytes realign it for the
    // call. The caller's return address is then at rsp+24.
    core::arch::naked_asm!(
        // RTLD_DEFAULT and RTLD_NEXT go straight on, once glibc's dlsym is
        // known (most lookups of a process: only this page is touched).
        "cmp qword ptr [rip + {real}], 0",
        "je 1f",
        "test rdi, rdi",
        "jz 2f",
        "cmp rdi, -1",
        "je 2f",
        "1:",
        "push rdi",
        "push rsi",
        "sub rsp, 8",
        "mov rdx, [rsp + 24]",
        "call {target}",
        "add rsp, 8",
        "pop rsi",
        "pop rdi",
        "test rax, rax",
        "jz 2f",
        "ret",
        "2:",
        "jmp qword ptr [rip + {real}]",
        target = sym dlsym_target,
        real = sym REAL_DLSYM,
    )
}
