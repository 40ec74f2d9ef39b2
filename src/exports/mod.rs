//! Everything the shim exports. Each export reads as one line of a table:
//! guard (panic boundary, bad input) -> forward (the real function) ->
//! record (registry) -> log (at debug, one line with the time it took).
//!
//! The `///` comment on each export is its contract; cbindgen copies it into
//! `include/infiniband/verbs.h`.
//!
//! The exports are `unsafe extern "C"` because they take C's raw pointers;
//! their safety contract is the C API's, stated in each doc comment for the
//! C reader, so clippy's `# Safety` section rule does not apply here.
#![allow(clippy::missing_safety_doc)]

use std::ffi::CStr;
use std::fmt;

use verbs_abi::{ibv_context, ibv_device};

use trace_format::verbs::{Shape, Verb};

use crate::guard::{errno_name, Errno, Refused};
use crate::log::{self, Hex, Level};
use crate::registry::{contexts, devices, objects};

/// cbindgen:ignore
pub mod cm;
mod create_destroy;
pub mod device;
/// cbindgen:ignore
pub mod dl;
/// cbindgen:ignore
pub mod dlsym;
/// cbindgen:ignore
pub mod interpose;
/// cbindgen:ignore
pub mod private;
pub mod query;
pub mod resources;
/// cbindgen:ignore
pub mod verbs;

/// Every export written in Rust, by name: `verbs` checks each one's
/// signature against its declaration.
pub(crate) mod all {
    pub(crate) use super::cm::*;
    pub(crate) use super::device::*;
    pub(crate) use super::private::*;
    pub(crate) use super::query::*;
    pub(crate) use super::resources::memory::*;
    pub(crate) use super::resources::queues::*;
    pub(crate) use super::resources::remote::*;
}

/// The return address of the current export: the call site in the program
/// (the creation site in leak reports). Must be expanded directly in the
/// body of the `extern "C"` function; the shim is built with frame
/// pointers (see .cargo/config.toml).
/// Without frame pointers (build.rs sets `ibvshim_frame_pointers` only when
/// they are on) it is 0: rbp would be any register of the caller's.
#[macro_export]
macro_rules! caller {
    () => {{
        #[cfg(ibvshim_frame_pointers)]
        let ra: usize = {
            let ra: usize;
            // SAFETY: built with frame pointers (checked by build.rs), so
            // [rbp + 8] in this function's body is its return address; the
            // load reads our own stack frame.
            unsafe {
                core::arch::asm!("mov {}, [rbp + 8]", out(reg) ra, options(nostack, readonly, preserves_flags))
            };
            ra
        };
        #[cfg(not(ibvshim_frame_pointers))]
        let ra: usize = 0;
        ra
    }};
}

/// A call being timed for the debug log. Free when debug is off.
pub struct Call {
    start: Option<u64>,
}

impl Call {
    /// One relaxed load while the gate is shut (`gate`).
    #[inline(always)]
    pub fn begin() -> Call {
        if crate::gate::any() {
            return Call::begin_slow();
        }
        Call { start: None }
    }

    /// The first verbs call of the process, or logging at debug.
    #[cold]
    #[inline(never)]
    fn begin_slow() -> Call {
        crate::report::note_use();
        Call {
            start: log::enabled(Level::Debug).then(crate::clock::now),
        }
    }

    #[inline(always)]
    pub fn logging(&self) -> bool {
        self.start.is_some()
    }

    /// Logs / traces `verb(args) = result` from raw words (one per
    /// argument of `verb`, then an `RcCq` / `RcEventType` / `DevList`
    /// result's value; see `trace_format::verbs`): the calling thread
    /// formats nothing (the log's writer thread does, `log::entry`).
    /// Leaves errno as it found it. The verbs' typed records
    /// (`verbs`: `AllocPd::done`) are the callers.
    ///
    /// # Safety
    /// `args` holds `verb.raw_words()` words; a device word is NULL or a
    /// device of the real library's; an MR or QP result NULL or the object
    /// the real library just returned, a string result NULL or a C string
    /// of the real library's.
    #[inline(always)]
    pub unsafe fn done(&self, verb: &'static Verb, args: &[u64], result: u64, failed: bool) {
        if let Some(start) = self.start {
            // `verb` is the export's constant: the match is made when the
            // export is compiled. A one-device verb (the device getters)
            // has a record function of its own, the device in a register.
            match (verb.shape, args) {
                (Shape::OneDev, &[dev]) => Self::record_dev(start, verb, dev, result, failed),
                _ => Self::record(start, verb, args, result, failed),
            }
        }
    }

    #[cold]
    #[inline(never)]
    fn record(start: u64, verb: &'static Verb, args: &[u64], result: u64, failed: bool) {
        Self::record_with(start, verb, args, result, failed, |out, room| {
            // SAFETY: `out` has room for `room` bytes; the export passes
            // one word per argument of `verb`, devices and C strings from
            // the real library where `verb` says so.
            unsafe { crate::trace::capture::encode(verb, args, result, out, room) }
        });
    }

    /// `record` for a `OneDev` verb.
    #[cold]
    #[inline(never)]
    fn record_dev(start: u64, verb: &'static Verb, dev: u64, result: u64, failed: bool) {
        Self::record_with(start, verb, &[dev], result, failed, |out, room| {
            // SAFETY: `out` has room for `room` bytes; `dev` is NULL or a
            // device, the result a C string from the real library where
            // `verb` says so.
            unsafe { crate::trace::capture::encode_dev(verb, dev, result, out, room) }
        });
    }

    /// The body of `record` and `record_dev` (inlined into each): the
    /// debug log's entry, and the trace's record made by `encode`. With
    /// both on, the call's words are encoded once, for the log, and the
    /// trace gets a copy of them (the encoders write the same bytes: see
    /// `capture`'s tests).
    #[inline(always)]
    fn record_with(
        start: u64,
        verb: &'static Verb,
        args: &[u64],
        result: u64,
        failed: bool,
        encode: impl FnOnce(*mut u8, usize) -> (usize, bool),
    ) {
        let errno = Errno::save();
        let end = crate::clock::now();
        if log::text_enabled(Level::Debug) {
            Self::log(start, end, verb, args, result, failed, errno.0);
        } else {
            crate::trace::call_bin(start, end, verb, failed, errno.0, encode);
        }
        errno.restore();
    }

    /// The debug line's entry, and the trace's record copied from its
    /// payload; out of `record`: its buffer would make every traced call's
    /// frame larger.
    #[inline(never)]
    fn log(start: u64, end: u64, verb: &Verb, args: &[u64], result: u64, failed: bool, errno: i32) {
        let cut = std::cell::Cell::new(false);
        log::entry::call(
            start,
            end,
            verb,
            failed,
            errno,
            |out, room| {
                // SAFETY: `out` has room for `room` bytes; the export passes
                // one word per argument of `verb`, devices and C strings from
                // the real library where `verb` says so. `encode` writes every
                // byte below the length it returns.
                let (len, was_cut) =
                    unsafe { crate::trace::capture::encode(verb, args, result, out, room) };
                cut.set(was_cut);
                len
            },
            |payload| {
                crate::trace::call_bin(start, end, verb, failed, errno, |at, room| {
                    let len = payload.len().min(room);
                    // SAFETY: `at` has room for `room` bytes, `len` is within
                    // both, and the log's buffer does not overlap the ring.
                    unsafe { std::ptr::copy_nonoverlapping(payload.as_ptr(), at, len) };
                    (len, cut.get())
                });
            },
        );
    }
}

pub use crate::thread::{inside, nested, tid};

/// The shape of every export that creates nothing: when the real library
/// is calling its own export (see [`nested`]) it only forwards; otherwise
/// `check` may refuse the call (a context or object known bad), then the
/// forwarded call runs, marked as inside the real library, and `log` gets
/// the result (a no-op unless debug logging is on). No lock is held while
/// `forward` runs.
#[inline(always)]
pub fn forward<R>(
    check: impl FnOnce() -> Result<(), Refused>,
    forward: impl FnOnce() -> R,
    log: impl FnOnce(&Call, &R),
) -> Result<R, Refused> {
    forward_marked(nested(), inside, check, forward, log)
}

/// The shape [`forward`] and the connection manager's `cm::forward`
/// share: `nested` (the real library calling its own export) only
/// forwards; else `check`, the call run through `mark` (which marks it as
/// inside the real library), then `log`.
#[inline(always)]
pub fn forward_marked<R, F: FnOnce() -> R>(
    nested: bool,
    mark: impl FnOnce(F) -> R,
    check: impl FnOnce() -> Result<(), Refused>,
    forward: F,
    log: impl FnOnce(&Call, &R),
) -> Result<R, Refused> {
    if nested {
        return Ok(forward());
    }
    check()?;
    let call = Call::begin();
    let r = mark(forward);
    log(&call, &r);
    Ok(r)
}

/// The checks of a verb `func` on `context`: NULL refused now, and, when
/// the call is forwarded, a closed or unknown context ([`context_ok`]).
#[inline(always)]
pub fn context_checks(
    func: &'static str,
    context: *mut ibv_context,
    caller: usize,
) -> Result<impl FnOnce() -> Result<(), Refused>, Refused> {
    not_null(func, "context", context)?;
    Ok(move || context_ok(func, context, caller))
}

/// The checks of a verb `func` on the object `obj` (its argument `arg`):
/// NULL refused now, and, when the call is forwarded, an object known dead
/// ([`alive`]).
#[inline(always)]
pub fn object_checks<T>(
    func: &'static str,
    arg: &'static str,
    obj: *mut T,
) -> Result<impl FnOnce() -> Result<(), Refused>, Refused> {
    not_null(func, arg, obj)?;
    Ok(move || alive(func, arg, obj as usize))
}

/// A NULL object argument to a verb that would dereference it (rdma-core
/// crashes) is refused with a warning and errno EINVAL.
#[inline(always)]
pub fn not_null<T>(func: &str, arg: &str, p: *const T) -> Result<(), Refused> {
    if p.is_null() {
        return Err(null_argument(func, arg));
    }
    Ok(())
}

#[cold]
#[inline(never)]
fn null_argument(func: &str, arg: &str) -> Refused {
    refuse(format_args!("{func}({arg}=NULL)"), libc::EINVAL)
}

/// Logs a refused call (bad input) at warn and sets errno.
pub fn refuse(what: fmt::Arguments<'_>, errno: i32) -> Refused {
    crate::log!(
        Level::Warn,
        "{what} (not forwarded; errno={})",
        errno_name(errno)
    );
    crate::guard::set_errno(errno);
    Refused(errno)
}

/// The first word at `addr`, read without risking a fault (the pointer may
/// be freed or garbage): None when it is not readable.
pub fn read_word(addr: usize) -> Option<usize> {
    let mut word = 0usize;
    let local = libc::iovec {
        iov_base: std::ptr::addr_of_mut!(word).cast(),
        iov_len: 8,
    };
    let remote = libc::iovec {
        iov_base: addr as *mut libc::c_void,
        iov_len: 8,
    };
    // SAFETY: reads 8 bytes of our own address space into `word`; the
    // kernel checks the remote range and fails with EFAULT instead of faulting.
    let n = unsafe { libc::process_vm_readv(libc::getpid(), &local, 1, &remote, 1, 0) };
    (n == 8).then_some(word)
}

/// Checks the context argument of a verb (not NULL: the callers refuse
/// that first). An open context passes with a few loads and no lock. A
/// closed one, or one that is not a context at all, is refused: true, with
/// a warning and errno EINVAL (the real library would crash on it). A
/// context the shim never saw opened but whose `device` field is a device
/// the real library handed out (opened by `mlx5dv_open_device` or another
/// path the shim does not see) is adopted: tracked from now on, logged at
/// info, and forwarded.
#[inline]
pub fn context_ok(func: &str, ctx: *mut ibv_context, caller: usize) -> Result<(), Refused> {
    if contexts::is_open_fast(ctx as usize) || !check_context(func, ctx, caller) {
        return Ok(());
    }
    Err(Refused(libc::EINVAL))
}

#[cold]
#[inline(never)]
fn check_context(func: &str, ctx: *mut ibv_context, caller: usize) -> bool {
    let errno = Errno::save();
    let addr = ctx as usize;
    match contexts::get(addr).map(|c| c.open) {
        Some(true) => false,
        Some(false) => {
            refuse(
                format_args!(
                    "use after close: {func}(context={ctx:p}): ibv_close_device already closed this \
                     context (the real library would touch freed memory)"
                ),
                libc::EINVAL,
            );
            true
        }
        None => match read_word(addr) {
            // `device` is the first field of struct ibv_context.
            Some(dev) if dev != 0 && devices::is_known(dev as *const ibv_device) => {
                contexts::opened(addr, dev, tid(), caller);
                crate::log!(
                    Level::Info,
                    "{func}(context={ctx:p}): a context of {} the shim did not see opened (a provider's \
                     own open, e.g. mlx5dv_open_device): tracked from now on",
                    Dev(dev as *const ibv_device)
                );
                errno.restore();
                false
            }
            _ => {
                refuse(
                    format_args!(
                        "{func}(context={ctx:p}): not a context the real library handed out"
                    ),
                    libc::EINVAL,
                );
                true
            }
        },
    }
}

/// Checks an object argument (a PD, CQ, QP, ...): refused, with a warning
/// and errno EINVAL, when the shim knows it dead: its context was closed
/// (a zombie), or it was destroyed through the shim and nothing lives at
/// its address now. Objects the shim never saw (made by inline verbs) pass.
/// One shared load, and one load of the destroyed-address memory, while no
/// context was closed with objects on it.
#[inline]
pub fn alive(func: &str, arg: &str, addr: usize) -> Result<(), Refused> {
    if let Some(o) = objects::zombie(addr) {
        return Err(use_after_close(func, arg, &o));
    }
    match objects::buried(addr) {
        Some(kind) if destroyed(func, arg, addr, kind) => Err(Refused(libc::EINVAL)),
        _ => Ok(()),
    }
}

#[cold]
pub fn use_after_close(func: &str, arg: &str, o: &objects::Obj) -> Refused {
    crate::log!(
        Level::Warn,
        "use after close: {func}({arg}={:#x}): this {} was created on context {:#x}, which ibv_close_device \
         already closed; not forwarded (the real library would touch freed memory); errno=EINVAL",
        o.addr,
        o.kind().name(),
        o.ctx
    );
    crate::guard::set_errno(libc::EINVAL);
    Refused(libc::EINVAL)
}

/// `addr` was destroyed through the shim: refuse it unless an object lives
/// there again (tracked, or made behind the shim's back: its first word,
/// the context, is an open context).
#[cold]
#[inline(never)]
fn destroyed(func: &str, arg: &str, addr: usize, kind: objects::Kind) -> bool {
    if objects::get(addr).is_some() {
        return false;
    }
    if matches!(read_word(addr), Some(ctx) if contexts::is_open(ctx)) {
        return false;
    }
    refuse(
        format_args!(
            "use after destroy: {func}({arg}={addr:#x}): this {} was already destroyed \
             (the real library would read freed memory)",
            kind.name()
        ),
        libc::EINVAL,
    );
    true
}

/// A device as the log shows it: address, name, and GUID as `ibv_devices`
/// prints it (when known).
pub struct Dev(pub *const ibv_device);

impl fmt::Display for Dev {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.0.is_null() {
            return f.write_str("NULL");
        }
        f.write_str(Hex::new(self.0 as u64, 1, true).as_str())?;
        if devices::is_known(self.0) {
            // SAFETY: a known device is a live struct ibv_device from the
            // real library; name is a NUL-terminated char[64] in it.
            let name = unsafe { CStr::from_ptr((*self.0).name.as_ptr()) };
            f.write_str(" ")?;
            f.write_str(&name.to_string_lossy())?;
            let guid = devices::cached_guid(self.0);
            if let Some(guid) = guid {
                f.write_str("/")?;
                f.write_str(Hex::new(u64::from_be(guid), 16, false).as_str())?;
            }
            // Only when the line is written: a match on the name.
            if let Some(v) = crate::report::vendor(&name.to_string_lossy(), guid) {
                write!(f, " [{v}]")?;
            }
        }
        Ok(())
    }
}

/// A pointer for the log (`NULL` or hex).
pub struct Ptr<T>(pub *const T);

impl<T> fmt::Display for Ptr<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.0.is_null() {
            f.write_str("NULL")
        } else {
            f.write_str(Hex::new(self.0 as u64, 1, true).as_str())
        }
    }
}
