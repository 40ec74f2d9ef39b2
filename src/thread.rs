//! Per-thread state: the kernel thread id (for log lines and creation
//! records), whether this thread is inside a forwarded call, and inside
//! one of the shim's boundaries. A leaf module: the logger, the panic
//! boundary and the exports all use it.
//!
//! The state is one 16-byte block of initial-exec TLS, declared in
//! assembly: Rust's `thread_local!` in a shared library is general-dynamic,
//! a call to `__tls_get_addr` per access (about 20 instructions), while an
//! initial-exec access is a load of the block's offset from the GOT and an
//! `fs:`-relative access. The cost is 16 bytes of the static TLS surplus
//! glibc keeps for libraries loaded by `dlopen` (drop-in mode).

use core::arch::{asm, global_asm};

// The block: depth (u32, offset 0), boundaries (u32, 4), tid (i32, 8),
// connection-manager depth (u32, 12).
// Local symbol (no .globl): nothing outside the shim sees it.
global_asm!(
    ".pushsection .tbss,\"awT\",@nobits",
    ".p2align 4",
    "ibvshim_thread_state:",
    ".zero 16",
    ".popsection",
);

const DEPTH: usize = 0;
const BOUNDARIES: usize = 4;
const TID: usize = 8;
const CM_DEPTH: usize = 12;

/// The block's offset from this thread's `fs` base (the same for every
/// thread: initial-exec TLS). `nomem`: the GOT entry is a constant once
/// relocated, so an export loads it once however many fields it touches.
#[inline(always)]
fn block() -> usize {
    let off: usize;
    // SAFETY: reads the GOT entry the dynamic linker filled with the
    // block's TP offset; the entry never changes after relocation (before
    // any of the shim's code runs), so it is as good as a constant.
    unsafe {
        asm!(
            "mov {}, qword ptr [rip + ibvshim_thread_state@GOTTPOFF]",
            out(reg) off,
            options(pure, nomem, nostack, preserves_flags)
        )
    };
    off
}

// The field's offset goes into the instruction (`fs:[block + FIELD]`): no
// separate add per access.

#[inline(always)]
fn get<const FIELD: usize>() -> u32 {
    let v: u32;
    // SAFETY: `block() + FIELD` is inside this thread's 16-byte block.
    unsafe {
        asm!(
            "mov {v:e}, dword ptr fs:[{o} + {f}]",
            o = in(reg) block(),
            f = const FIELD,
            v = out(reg) v,
            options(nostack, preserves_flags, readonly)
        )
    };
    v
}

#[inline(always)]
fn set<const FIELD: usize>(v: u32) {
    // SAFETY: `block() + FIELD` is inside this thread's 16-byte block,
    // which only this thread writes.
    unsafe {
        asm!(
            "mov dword ptr fs:[{o} + {f}], {v:e}",
            o = in(reg) block(),
            f = const FIELD,
            v = in(reg) v,
            options(nostack, preserves_flags)
        )
    };
}

/// This thread's kernel thread id, read once per thread.
#[inline]
pub fn tid() -> i32 {
    match get::<TID>() as i32 {
        0 => {
            // SAFETY: gettid cannot fail.
            let tid = unsafe { libc::gettid() };
            set::<TID>(tid as u32);
            tid
        }
        tid => tid,
    }
}

/// Is this thread already inside a forwarded call? Then the real library
/// is calling one of its own exported verbs, which the preloaded shim
/// interposes (rdma-core's `ibv_reg_mr` calls `ibv_reg_mr_iova2`,
/// `ibv_create_ah_from_wc` calls `ibv_create_ah`, both through its PLT). The
/// outer export records and logs the object, so the inner one only forwards.
#[inline(always)]
pub fn nested() -> bool {
    get::<DEPTH>() != 0
}

/// Runs a forwarded call with this thread marked as inside the real library.
#[inline(always)]
pub fn inside<R>(f: impl FnOnce() -> R) -> R {
    inc::<DEPTH>();
    let r = f();
    dec::<DEPTH>();
    r
}

/// Is this thread inside a forwarded `rdma_*` call? Then librdmacm is
/// calling one of its own exports (`rdma_create_ep` its `rdma_create_id`,
/// a synchronous id's `rdma_get_cm_event`): the outer export tracks. Kept
/// apart from [`nested`]: the verbs calls librdmacm makes (the QP of
/// `rdma_create_qp`, its moves to RTR and RTS) are tracked as verbs calls.
#[inline(always)]
pub fn cm_nested() -> bool {
    get::<CM_DEPTH>() != 0
}

/// Runs a forwarded `rdma_*` call with this thread marked as inside
/// librdmacm.
#[inline(always)]
pub fn cm_inside<R>(f: impl FnOnce() -> R) -> R {
    inc::<CM_DEPTH>();
    let r = f();
    dec::<CM_DEPTH>();
    r
}

/// `field += 1` in one instruction (an export's boundary or depth is one
/// GOT load and one `inc`).
#[inline(always)]
fn inc<const FIELD: usize>() {
    // SAFETY: `block() + FIELD` is inside this thread's 16-byte block,
    // which only this thread writes.
    unsafe {
        asm!("inc dword ptr fs:[{o} + {f}]", o = in(reg) block(), f = const FIELD, options(nostack))
    };
}

/// `field -= 1` in one instruction.
#[inline(always)]
fn dec<const FIELD: usize>() {
    // SAFETY: as in `inc`.
    unsafe {
        asm!("dec dword ptr fs:[{o} + {f}]", o = in(reg) block(), f = const FIELD, options(nostack))
    };
}

/// Enters one of the shim's boundaries (see `guard::boundary`).
#[inline(always)]
pub fn enter_boundary() {
    inc::<BOUNDARIES>();
}

/// Leaves what [`enter_boundary`] entered.
#[inline(always)]
pub fn leave_boundary() {
    dec::<BOUNDARIES>();
}

/// Is this thread inside one of the shim's boundaries?
pub fn inside_boundary() -> bool {
    get::<BOUNDARIES>() != 0
}

/// After `fork()`, in the child: its one thread has a new id.
pub fn after_fork_in_child() {
    set::<TID>(0);
}

/// Starts one of the shim's helper threads (the log's and the trace's
/// writers) with every signal blocked, so that the program's signals go
/// to the program's threads; the calling thread's mask is restored at
/// once. `false`: no thread (no memory, no threads left).
pub fn spawn_quiet(name: &str, f: fn()) -> bool {
    // SAFETY: plain sigset_t values; pthread_sigmask changes this thread's
    // mask only, and it is restored right after the spawn (the new thread
    // inherits the blocked mask).
    let old = unsafe {
        let mut all: libc::sigset_t = std::mem::zeroed();
        libc::sigfillset(&mut all);
        let mut old: libc::sigset_t = std::mem::zeroed();
        libc::pthread_sigmask(libc::SIG_BLOCK, &all, &mut old);
        old
    };
    let spawned = std::thread::Builder::new()
        .name(name.into())
        .stack_size(64 * 1024)
        .spawn(f);
    // SAFETY: restores the mask saved above.
    unsafe { libc::pthread_sigmask(libc::SIG_SETMASK, &old, std::ptr::null_mut()) };
    spawned.is_ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_thread_has_its_own_state() {
        assert!(!nested());
        inside(|| {
            assert!(nested());
            inside(|| assert!(nested()));
            assert!(nested());
            std::thread::spawn(|| assert!(!nested())).join().unwrap();
        });
        assert!(!nested());
        let here = tid();
        let there = std::thread::spawn(tid).join().unwrap();
        assert_ne!(here, there);
        // SAFETY: gettid cannot fail.
        assert_eq!(here, unsafe { libc::gettid() });
    }
}
