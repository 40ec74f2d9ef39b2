//! Blind forwarding of every public symbol the shim does not instrument.
//!
//! The list is generated at build time from the real library's ABI (see
//! `crates/abi-build`): each function is an assembly trampoline
//! `jmp *slot(%rip)` exported at its exact version, whose slot starts at a
//! lazy stub that calls [`resolve_trampoline`]. That lets the shim stand in
//! for the whole of `libibverbs.so.1` (drop-in mode, programs that look
//! verbs up with `dlvsym`, provider plugins that need `IBVERBS_PRIVATE_*`)
//! without knowing those functions' signatures, for one indirect jump.

use std::ffi::{c_void, CStr};
#[cfg(not(test))]
use std::sync::atomic::{AtomicUsize, Ordering};

use crate::real::Library;

#[cfg(not(test))]
use crate::log::Level;

/// One trampoline's target: `name@version`; data objects are copied.
pub struct Forwarded {
    pub name: &'static CStr,
    pub version: &'static CStr,
    /// The library that defines it.
    pub library: Library,
    pub object: bool,
    pub size: usize,
}

include!(concat!(env!("OUT_DIR"), "/forwarded.rs"));

#[cfg(not(test))]
extern "C" {
    /// The trampolines' slots (defined in the generated assembly).
    static mut __ibvshim_slots: [usize; FORWARDED.len()];
}

/// Called by the lazy stub of trampoline `index` (with the caller's
/// argument registers saved at `regs`: rax, r9, r8, rcx, rdx, rsi, rdi):
/// returns the address to jump to. Referenced from the assembly as a `sym`
/// operand, so it is not exported.
///
/// Normally the target is cached in the slot, so later calls cost one
/// indirect jump. At `IBV_SHIM_LOG=trace` the slot keeps pointing at the
/// stub and every forwarded call is logged with its first three arguments
/// (the shim does not know these functions' signatures, so raw registers).
#[cfg(not(test))]
pub(crate) extern "C" fn resolve_trampoline(index: usize, regs: *const [usize; 7]) -> usize {
    // Loading the real library and dlvsym may change errno; the forwarded
    // call must see the program's errno (`unavailable` sets its own).
    let saved = crate::guard::Errno::save();
    let trace = crate::log::enabled(Level::Trace);
    let target = crate::guard::boundary("trampoline resolver", 0, || resolve(index, !trace));
    saved.restore();
    if trace {
        if let Some(f) = FORWARDED.get(index) {
            // SAFETY: the stub passes a pointer to the 7 registers it saved.
            let r = unsafe { &*regs };
            crate::log::line(
                Level::Trace,
                format_args!(
                    "{}({:#x}, {:#x}, {:#x}, ...) [forwarded]",
                    f.name.to_string_lossy(),
                    r[6],
                    r[5],
                    r[4]
                ),
            );
        }
    }
    if target != 0 {
        return target;
    }
    // Nothing to jump to. Without the signature the only safe answer is a
    // function that sets errno and returns 0 (NULL for the many verbs that
    // return pointers) — except the `*_str` helpers, whose callers print the
    // result unchecked: they get "unknown", as rdma-core answers for a value
    // it does not know.
    if FORWARDED
        .get(index)
        .is_some_and(|f| f.name.to_bytes().ends_with(b"_str"))
    {
        return unknown_str as *const () as usize;
    }
    unavailable as *const () as usize
}

#[cfg(not(test))]
fn resolve(index: usize, cache: bool) -> usize {
    let Some(f) = FORWARDED.get(index) else {
        return 0;
    };
    let h = match f.library {
        Library::Ibverbs => crate::real::handle(),
        Library::Rdmacm => crate::real::rdmacm::handle(),
    };
    let Some(h) = h else {
        return 0;
    };
    // SAFETY: h is a live handle; name and version are NUL-terminated.
    let p = unsafe { libc::dlvsym(h, f.name.as_ptr(), f.version.as_ptr()) } as usize;
    if p == 0 {
        crate::log!(
            Level::Error,
            "{}@{} is not in the real library; the call fails with ENOSYS",
            f.name.to_string_lossy(),
            f.version.to_string_lossy()
        );
        return 0;
    }
    if cache {
        // SAFETY: index is in bounds (checked by FORWARDED.get above); slots
        // are only ever written with a valid target, and an aligned usize
        // store is atomic on x86_64, so a racing trampoline sees the stub or
        // the target.
        unsafe {
            let slot = std::ptr::addr_of_mut!(__ibvshim_slots)
                .cast::<usize>()
                .add(index);
            // The lazy stub, kept for `forget`: the first resolve sees it.
            let _ = STUBS[index].compare_exchange(
                0,
                std::ptr::read_volatile(slot),
                Ordering::AcqRel,
                Ordering::Relaxed,
            );
            std::ptr::write_volatile(slot, p);
        }
    }
    p
}

/// Each trampoline's lazy stub, saved when its slot was first resolved.
#[cfg(not(test))]
static STUBS: [AtomicUsize; FORWARDED.len()] = [const { AtomicUsize::new(0) }; FORWARDED.len()];

/// The trampolines of `library`, unloaded, go back to their lazy stubs:
/// the next call resolves again.
pub fn forget(library: Library) {
    #[cfg(not(test))]
    for (i, f) in FORWARDED.iter().enumerate() {
        let stub = STUBS[i].load(Ordering::Acquire);
        if f.library != library || f.object || stub == 0 {
            continue;
        }
        // SAFETY: i is in bounds; an aligned usize store is atomic on x86_64,
        // and the stub is the value the slot started with.
        unsafe {
            let slot = std::ptr::addr_of_mut!(__ibvshim_slots)
                .cast::<usize>()
                .add(i);
            std::ptr::write_volatile(slot, stub);
        }
    }
    #[cfg(test)]
    let _ = library;
}

#[cfg(not(test))]
extern "C" fn unavailable() -> usize {
    crate::guard::set_errno(libc::ENOSYS);
    0
}

#[cfg(not(test))]
extern "C" fn unknown_str() -> *const std::ffi::c_char {
    c"unknown".as_ptr()
}

/// Keeps the shim's copies of the real library's exported data objects
/// (`verbs_allow_disassociate_destroy`, which mlx5 reads) in step with it.
///
/// Where the shim is in the global scope (preloaded, or the program's own
/// `libibverbs.so.1` in drop-in mode) the real library's references bind to
/// the shim's copy too, so there is one object and nothing to do. Where the
/// shim was dlopen()ed locally (a program that dlopens `libibverbs.so` in
/// drop-in mode), plugins bind to the shim's copy while the real library
/// writes its own: then copy after load and after each
/// `ibv_get_device_list` (when the real library sets them).
///
/// "The global scope" is asked of the main program's handle
/// (`dlopen(NULL)`), whose lookups search exactly the global scope. An
/// `RTLD_DEFAULT` lookup would not do: made from the shim, it also searches
/// the shim's own local scope, so it always finds the shim's copy. Which
/// objects need copying cannot change once the real library is loaded, so
/// the lookups run once and later calls only copy bytes.
///
/// # Safety
/// `handle` must be the live `dlopen` handle of the real library, the same
/// on every call.
pub unsafe fn copy_objects(handle: *mut c_void) {
    #[cfg(not(test))]
    {
        use once_cell::sync::OnceCell;
        /// (source, destination, size) of each object to copy.
        static COPIES: OnceCell<Vec<(usize, usize, usize)>> = OnceCell::new();
        let copies = COPIES.get_or_init(|| {
            let global_scope = main_program_handle();
            let mut copies = Vec::new();
            for (i, f) in FORWARDED.iter().enumerate().filter(|(_, f)| f.object) {
                // SAFETY: an object's slot holds the address of its storage,
                // `size` bytes (see abi-build).
                let ours = unsafe {
                    std::ptr::addr_of!(__ibvshim_slots)
                        .cast::<usize>()
                        .add(i)
                        .read()
                };
                if !global_scope.is_null() {
                    // SAFETY: a live handle; NUL-terminated strings.
                    let global =
                        unsafe { libc::dlvsym(global_scope, f.name.as_ptr(), f.version.as_ptr()) };
                    if global as usize == ours {
                        continue;
                    }
                }
                // SAFETY: a live handle; NUL-terminated strings.
                let src = unsafe { libc::dlvsym(handle, f.name.as_ptr(), f.version.as_ptr()) };
                if !src.is_null() && src as usize != ours {
                    copies.push((src as usize, ours, f.size));
                }
            }
            copies
        });
        for &(src, dst, size) in copies {
            // SAFETY: both are `size`-byte objects of the same definition.
            unsafe { std::ptr::copy_nonoverlapping(src as *const u8, dst as *mut u8, size) };
        }
    }
    #[cfg(test)]
    let _ = handle;
}

/// `dlopen(NULL)`: the main program, whose handle's lookups search the
/// global scope. NULL if glibc refuses (then the caller copies).
#[cfg(not(test))]
fn main_program_handle() -> *mut c_void {
    use std::sync::atomic::{AtomicPtr, Ordering};
    static MAIN: AtomicPtr<c_void> = AtomicPtr::new(std::ptr::null_mut());
    let h = MAIN.load(Ordering::Relaxed);
    if !h.is_null() {
        return h;
    }
    // SAFETY: dlopen(NULL) returns the main program's handle; it is never closed.
    let h = unsafe { crate::real::real_dlopen()(std::ptr::null(), libc::RTLD_NOW) };
    MAIN.store(h, Ordering::Relaxed);
    h
}
