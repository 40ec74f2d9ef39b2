//! Process events the shim must get right: `fork()` and exit.
//!
//! - fork: registered with `pthread_atfork` when the real library is first
//!   loaded (a process that never calls verbs pays nothing). The prepare
//!   handler takes the registry's locks so the child never inherits a table
//!   mid-change; the parent releases them and the child resets them (each
//!   is one futex word: no trace of a thread waiting in the parent survives
//!   into the child, where that thread does not exist). The child keeps
//!   what it inherited, marked as such, so it still refuses what was dead
//!   in the parent, but reports only what it creates itself (and nothing,
//!   writing no JSON, if it never calls verbs), and reopens a `%p` log file.
//!   The log's queued lines are written out first (prepare), so the
//!   child's lines follow them.
//! - exit: the final report runs from a library destructor (`.fini_array`),
//!   which glibc calls after the program's own `atexit` handlers, so objects
//!   a program frees in its atexit cleanup are not reported as leaks; the
//!   log's queued lines are written out before it. The
//!   exiting thread's signals are held back meanwhile, so a handler that
//!   calls `exit()` again cannot end the process halfway through the report.

use std::sync::Once;

static REGISTER: Once = Once::new();

/// Called once, by the thread that loads the real library.
pub fn on_first_load() {
    REGISTER.call_once(|| {
        // A panic in the shim is reported through the log and turned into
        // the call's error by `guard::boundary`; the default hook would
        // print to the host program's stderr. This std is the shim's own
        // copy, so a Rust host program's hook is not affected.
        std::panic::set_hook(Box::new(|info| {
            crate::log!(crate::log::Level::Error, "panic in the shim: {info}");
        }));
        // Everything lazily initialised that a fork handler or a child's
        // exit report touches is initialised now, before the handlers exist,
        // so a fork never catches an initialisation half done.
        crate::config::get();
        crate::report::init();
        crate::cm::init();
        // SAFETY: the handlers are plain extern "C" functions that live as
        // long as the process (the shim is linked -z nodelete).
        unsafe { libc::pthread_atfork(Some(prepare), Some(parent), Some(child)) };
    });
}

use crate::registry::lock::ForkStep;

extern "C" fn prepare() {
    // The queued log lines first, so that the child's lines follow them.
    crate::log_queue::flush();
    // Lock order: registry, then the site cache (a report looks sites up
    // while it walks a registry shard).
    crate::registry::fork_prepare();
    // The connection manager's table before the report's: a diagnosis
    // resolves creation sites under it.
    crate::cm::fork(crate::registry::lock::ForkStep::Prepare);
    crate::report::fork_lock();
    crate::faults::fork_lock();
    crate::exports::interpose::fork(ForkStep::Prepare);
}

extern "C" fn parent() {
    crate::registry::fork_parent();
    crate::report::fork_unlock(false);
    crate::faults::fork_unlock(false);
    crate::cm::fork(crate::registry::lock::ForkStep::Parent);
    crate::exports::interpose::fork(ForkStep::Parent);
}

extern "C" fn child() {
    crate::registry::fork_child();
    crate::report::fork_unlock(true);
    crate::faults::fork_unlock(true);
    crate::cm::fork(crate::registry::lock::ForkStep::Child);
    crate::exports::interpose::fork(ForkStep::Child);
    crate::thread::after_fork_in_child();
    crate::report::after_fork_in_child();
    crate::real::after_fork_in_child();
    crate::real::rdmacm::after_fork_in_child();
    crate::log::after_fork_in_child();
    crate::log_queue::after_fork_in_child();
    crate::trace::after_fork_in_child();
}

/// As the shim is loaded: reads the options before the program can change
/// directory (later calls to `config::get` see the same values), opens the
/// log, and hooks [`on_first_load`] into the real library's loader (`real`
/// depends on neither this module nor `forward`). A load that came first
/// (a verbs call from an earlier constructor) gets the handlers now.
// Only referenced from `.init_array`, which test builds leave out.
#[cfg_attr(test, allow(dead_code))]
extern "C" fn at_load() {
    crate::guard::boundary("start-up", (), || {
        crate::config::load();
        crate::trace::at_load();
        crate::log::at_load();
        crate::faults::init();
        if crate::real::set_load_hooks(on_first_load, after_load) {
            on_first_load();
            if let Some(h) = crate::real::handle() {
                after_load(h);
            }
        }
    });
}

#[cfg(not(test))]
#[used]
#[link_section = ".init_array"]
static INIT: extern "C" fn() = at_load;

/// After the real library is loaded: the shim's copies of its exported
/// data objects (see `forward::copy_objects`).
fn after_load(h: *mut std::ffi::c_void) {
    // SAFETY: `real` passes the handle it just loaded, never closed.
    unsafe { crate::forward::copy_objects(h) };
}

// Only referenced from `.fini_array`, which test builds leave out.
#[cfg_attr(test, allow(dead_code))]
extern "C" fn at_exit() {
    let _held = HeldSignals::block();
    if crate::guard::inside_boundary() {
        // exit() from a signal handler that interrupted a verbs call: the
        // report would allocate and lock what the interrupted call may hold
        // (seen: glibc aborting in malloc). One line, no allocation.
        if crate::log::writable_without_allocating() {
            crate::log_queue::at_exit();
        }
        crate::report::skipped_at_exit();
        return;
    }
    // The queued debug lines before the report; from here every line is
    // written on its own thread.
    crate::log_queue::at_exit();
    crate::guard::boundary("trace at exit", (), crate::trace::at_exit);
    crate::guard::boundary("exit report", (), || {
        crate::exports::interpose::at_exit();
        crate::report::at_exit();
    });
}

/// The exiting thread's asynchronous signals, held back while the exit
/// report is written and delivered as soon as it is done.
///
/// Programs call `exit()` from signal handlers, also while they are already
/// exiting: qperf's SIGURG handler prints the other side's error and calls
/// `exit(1)`. glibc's nested `exit` finds the exit handlers (the shim's
/// destructor among them) already taken by the outer one and ends the
/// process with `_exit`, in the middle of the report: the JSON temporary
/// is never renamed into place. Held back, the signal reaches the same
/// handler a few milliseconds later, and the process ends as it would have.
/// Faults (SIGSEGV, ...) are never held: one raised while blocked kills the
/// process outright instead of reaching its handler.
struct HeldSignals(libc::sigset_t);

impl HeldSignals {
    fn block() -> HeldSignals {
        // SAFETY: sigset_t is plain data filled in by sigfillset/sigdelset
        // before use; pthread_sigmask only changes this thread's mask (glibc
        // never blocks its own internal signals) and writes the old one.
        unsafe {
            let mut set: libc::sigset_t = std::mem::zeroed();
            libc::sigfillset(&mut set);
            for sig in [
                libc::SIGSEGV,
                libc::SIGBUS,
                libc::SIGFPE,
                libc::SIGILL,
                libc::SIGTRAP,
                libc::SIGSYS,
            ] {
                libc::sigdelset(&mut set, sig);
            }
            let mut old: libc::sigset_t = std::mem::zeroed();
            libc::pthread_sigmask(libc::SIG_BLOCK, &set, &mut old);
            HeldSignals(old)
        }
    }
}

impl Drop for HeldSignals {
    fn drop(&mut self) {
        // SAFETY: restores the mask saved by `block`; a signal that arrived
        // meanwhile is delivered on return, to the program's own handler.
        unsafe { libc::pthread_sigmask(libc::SIG_SETMASK, &self.0, std::ptr::null_mut()) };
    }
}

#[cfg(not(test))]
#[used]
#[link_section = ".fini_array"]
static FINI: extern "C" fn() = at_exit;
