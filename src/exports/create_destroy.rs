//! The create and destroy paths every verb of `resources` shares.
//!
//! A create is guard -> forward -> record -> log; a destroy is guard ->
//! look up and take the record -> forward -> untrack (or put the record back
//! if the destroy failed) -> log. No lock is held while the real function
//! runs.

use std::ffi::c_int;
use std::fmt;

use trace_format::verbs::{Show, Verb};
use verbs_abi::{ibv_context, ibv_mr, ibv_pd};

use super::{alive, context_ok, inside, nested, not_null, read_word, tid, use_after_close, Call};
use crate::addr::Addr;
use crate::config;
use crate::guard::{set_errno, Errno, Refused};
use crate::log::Level;
use crate::registry::contexts;
use crate::registry::objects::{
    self, Facts, Keys, Kind, Kinds, MrFacts, MrVia, Obj, Taken, FLAG_BACKTRACE,
};

/// The first checks of a verb on a context: NULL refused, then (unless the
/// real library is calling its own export) a closed or unknown context.
#[inline(always)]
pub fn on_context(func: &str, context: *mut ibv_context, caller: usize) -> Result<(), Refused> {
    not_null(func, "context", context)?;
    if !nested() {
        context_ok(func, context, caller)?;
    }
    Ok(())
}

/// A new object's record: `kind` at `obj`, on the context the real library
/// wrote into it (else `context`), under `parent`, made at `caller`.
///
/// # Safety
/// `obj` is a live verbs object just returned by the real library.
#[inline]
pub unsafe fn record<T>(
    kind: Kind,
    obj: *mut T,
    context: *mut ibv_context,
    parent: usize,
    caller: usize,
) -> Obj {
    // SAFETY: the caller's contract.
    let ctx = unsafe { context_of(obj, context) };
    Obj::new(kind, obj as usize, ctx, parent, caller, tid())
}

/// The context an object was created on: its first field, set by the real
/// library (every verbs object starts with `struct ibv_context *context`).
///
/// # Safety
/// `obj` is a live verbs object just returned by the real library.
pub unsafe fn context_of<T>(obj: *mut T, fallback: *mut ibv_context) -> usize {
    // SAFETY: the caller's contract: its first word is readable.
    let ctx = unsafe { obj.cast::<*mut ibv_context>().read() };
    if ctx.is_null() {
        fallback as usize
    } else {
        ctx as usize
    }
}

/// The context of `pd`.
///
/// # Safety
/// `pd` is a live PD (a create on it just succeeded).
pub unsafe fn context_of_pd(pd: *mut ibv_pd) -> *mut ibv_context {
    // SAFETY: the caller's contract.
    unsafe { (*pd).context }
}

/// The shape every create shares. `forward` calls the real verb; when the
/// real library is calling one of its own exports (see [`nested`]) that is
/// all. Otherwise a create on a parent of a closed context (`parent`: the
/// verb, the argument's name and the parent's address) is refused as a use
/// after close, and a non-NULL result is recorded by `record`; the call is
/// logged by `log`. No lock is held while `forward` runs.
#[inline(always)]
pub fn create<T>(
    parent: Option<(&str, &str, usize)>,
    forward: impl FnOnce() -> *mut T,
    record: impl FnOnce(*mut T),
    log: impl FnOnce(&Call, *mut T),
) -> Result<*mut T, Refused> {
    if nested() {
        return Ok(forward());
    }
    if let Some((func, arg, addr)) = parent {
        alive(func, arg, addr)?;
    }
    let call = Call::begin();
    let obj = inside(forward);
    if !obj.is_null() {
        record(obj);
    }
    log(&call, obj);
    Ok(obj)
}

/// Records a new object (and, with `IBV_SHIM_BACKTRACE=1`, how it was
/// reached). errno is left as it was (the registry's paths that may touch
/// it, its lock's sleep and its growth, keep it themselves). Inlined into
/// each create: the record is packed from registers, not from a copy.
#[inline(always)]
pub fn track(mut obj: Obj) {
    if config::get().backtrace {
        obj.set_flag(FLAG_BACKTRACE);
        backtrace(obj.addr);
    }
    objects::insert(obj);
}

/// `IBV_SHIM_BACKTRACE=1`: the creation's call stack goes to the side map.
/// Takes the address alone, so that the record being built stays in
/// registers (a reference would put it in memory on the fast path too).
#[cold]
#[inline(never)]
fn backtrace(addr: usize) {
    let errno = Errno::save();
    if let Some(frames) = crate::report::capture_frames() {
        objects::store_backtrace(addr, frames);
    }
    errno.restore();
}

/// A destroy verb, for the shared destroy path. Handed by value to the
/// cold paths, so that the fast path never builds one in memory.
#[derive(Clone, Copy)]
pub struct Destroy {
    /// The verb, whose one argument is the object (`ibv_dealloc_pd(pd)`);
    /// its record when logged.
    pub verb: &'static Verb,
    pub func: &'static str,
    pub arg: &'static str,
    /// What it destroys, and what else it accepts (`ibv_dereg_mr` also
    /// takes an imported MR).
    pub kind: Kind,
    pub kinds: Kinds,
    /// Returns nothing (`ibv_unimport_*`).
    pub void: bool,
}

impl Destroy {
    /// The destroy verb `verb` (made as a constant: its shape is checked
    /// when the shim is compiled).
    pub const fn new(verb: &'static Verb, kind: Kind, kinds: Kinds) -> Destroy {
        assert!(
            verb.raw_words() == 1 && matches!(verb.args[0].1, Show::Ptr),
            "a destroy verb takes the object alone"
        );
        assert!(matches!(verb.result, Show::Rc | Show::Void));
        Destroy {
            verb,
            func: verb.name,
            arg: verb.args[0].0,
            kind,
            kinds,
            void: matches!(verb.result, Show::Void),
        }
    }
}

/// A destroy the table did not simply take: a zombie, a pointer it does
/// not hold (NULL included) or one of another kind. Returns true to refuse
/// it (errno set), false to forward it unchanged (errno as it was: the
/// checks read memory, which may set it).
#[cold]
#[inline(never)]
fn not_taken(d: Destroy, addr: usize, taken: Taken, rec: &objects::Stored) -> bool {
    match taken {
        Taken::Zombie => {
            use_after_close(d.func, d.arg, &rec.obj());
            true
        }
        Taken::Unknown => {
            let errno = Errno::save();
            if untracked(&d, addr) {
                set_errno(libc::EINVAL);
                return true;
            }
            errno.restore();
            false
        }
        Taken::OtherKind => {
            crate::log!(
                Level::Warn,
                "{}({}={addr:#x}): that is a {}, not a {}; forwarding unchanged",
                d.func,
                d.arg,
                rec.kind().name(),
                d.arg
            );
            false
        }
        Taken::Removed => false,
    }
}

/// A destroy of a pointer the table does not hold. Returns true to refuse
/// it (a double destroy), false to forward it unchanged.
fn untracked(d: &Destroy, addr: usize) -> bool {
    if addr == 0 {
        crate::log!(
            Level::Warn,
            "{}({}=NULL): forwarding unchanged",
            d.func,
            d.arg
        );
        return false;
    }
    if let Some(kind) = objects::buried(addr) {
        match read_word(addr) {
            // Reused for an object created behind the shim's back.
            Some(ctx) if contexts::is_open(ctx) => {}
            _ => {
                crate::log!(
                    Level::Warn,
                    "double destroy: {}({}={addr:#x}): this {} was already destroyed; not forwarded \
                     (the real library would read freed memory); returning EINVAL",
                    d.func,
                    d.arg,
                    kind.name()
                );
                return true;
            }
        }
    }
    crate::log!(
        Level::Warn,
        "{}({}={addr:#x}): not a {} the shim saw created (made by an inline verb, or destroyed long \
         ago); forwarding unchanged",
        d.func,
        d.arg,
        d.arg
    );
    false
}

/// The destroy path shared by every destroy verb: `forward` calls the real
/// function and returns its result (0 or an errno value; 0 for void verbs).
/// A use after close or a double destroy is refused with EINVAL.
///
/// errno: the fast path (a tracked object destroyed) touches nothing that
/// sets it (the registry's lock and growth keep it themselves), so it is
/// saved only on the paths that may change it.
#[inline(always)]
pub fn destroy<T>(
    d: &Destroy,
    obj: *mut T,
    forward: impl FnOnce() -> c_int,
) -> Result<c_int, Refused> {
    let addr = obj as usize;
    if nested() {
        return Ok(forward());
    }
    let mut rec = objects::Stored::EMPTY;
    let taken = objects::take(addr, d.kinds, &mut rec);
    if taken != Taken::Removed && not_taken(*d, addr, taken, &rec) {
        return Err(Refused(libc::EINVAL));
    }
    let call = Call::begin();
    let rc = inside(forward);
    match taken {
        Taken::Removed if rc == 0 => {
            objects::bury_taken(addr, &rec);
            // Tested here, not in the cold function: an MR, QP or SRQ with
            // the checks and trace off costs no call and no errno save.
            if rec.flags() & FLAG_BACKTRACE != 0
                || (rec.kind_in(WATCHED) && super::interpose::queues_watched())
            {
                destroyed_extras(addr, &rec);
            }
        }
        Taken::Removed => failed(*d, &rec, rc),
        Taken::Unknown if rc == 0 && addr != 0 => {
            objects::bury(addr, d.kind);
            if matches!(d.kind, Kind::Qp | Kind::Srq) && super::interpose::queues_watched() {
                let errno = Errno::save();
                super::interpose::queue_destroyed(addr);
                errno.restore();
            }
        }
        _ => {}
    }
    // Tested first: the log's arguments would be assembled even with
    // logging off (they escape into the out-of-line logger).
    if !call.logging() {
        return Ok(rc);
    }
    destroy_logged(*d, &call, addr, rc);
    Ok(rc)
}

/// The kinds whose destroy the data-path checks or the trace may want to
/// hear of (see `destroyed_extras`), when one of them is on
/// (`interpose::queues_watched`).
const WATCHED: Kinds = Kind::Mr.bit().or(Kind::Qp).or(Kind::Srq);

/// What else a tracked object's successful destroy forgets: its lkey for
/// the data-path checks, its queue's caps and builders, its backtrace.
/// Leaves errno as it was.
#[cold]
#[inline(never)]
fn destroyed_extras(addr: usize, o: &objects::Stored) {
    let errno = Errno::save();
    // The data-path checks name a deregistered MR's lkey as such.
    if o.kind() == Kind::Mr && crate::checks::datapath() {
        super::interpose::mr_deregistered(&o.obj());
    }
    if matches!(o.kind(), Kind::Qp | Kind::Srq) && super::interpose::queues_watched() {
        super::interpose::queue_destroyed(addr);
    }
    if o.kind() == Kind::Qp && crate::checks::datapath() {
        let qp = o.obj();
        if let Some(facts) = qp.facts.qp() {
            super::interpose::qp_destroyed(Addr::new(qp.ctx), facts.qp_num);
        }
    }
    if o.flags() & FLAG_BACKTRACE != 0 {
        objects::take_backtrace(addr);
    }
    errno.restore();
}

/// The real destroy failed: the record goes back, and an EBUSY names what
/// still holds the object. Leaves errno as it was.
#[cold]
#[inline(never)]
fn failed(d: Destroy, o: &objects::Stored, rc: c_int) {
    let errno = Errno::save();
    let o = o.obj();
    objects::restore(o);
    if rc == libc::EBUSY && crate::log::enabled(Level::Warn) {
        busy(&d, &o);
    }
    errno.restore();
}

/// The debug log's line (or trace record) of a destroy.
#[cold]
#[inline(never)]
fn destroy_logged(d: Destroy, call: &Call, addr: usize, rc: c_int) {
    let result = if d.void { 0 } else { rc as i64 as u64 };
    // SAFETY: the one word `Destroy::new` checked the verb for, a pointer
    // shown as an address.
    unsafe { call.done(d.verb, &[addr as u64], result, false) };
}

/// After EBUSY: names the tracked objects that still hold `o`.
#[cold]
fn busy(d: &Destroy, o: &Obj) {
    let holders = objects::holders(o);
    let mut names = String::new();
    for h in holders.iter().take(10) {
        use fmt::Write as _;
        let _ = write!(
            names,
            "{}{}",
            if names.is_empty() { "" } else { "; " },
            crate::report::Brief(h)
        );
    }
    if holders.len() > 10 {
        names.push_str(&format!("; and {} more", holders.len() - 10));
    }
    if holders.is_empty() {
        crate::log!(
            Level::Warn,
            "{}({}={:#x}) = EBUSY: still in use, by nothing the shim tracks (objects it did not see \
             created); it stays allocated",
            d.func,
            d.arg,
            o.addr
        );
    } else {
        crate::log!(
            Level::Warn,
            "{}({}={:#x}) = EBUSY: still held by {} object{}: {names}; destroy {} first, then retry",
            d.func,
            d.arg,
            o.addr,
            holders.len(),
            if holders.len() == 1 { "" } else { "s" },
            if holders.len() == 1 { "it" } else { "them" }
        );
    }
}

/// Records an MR registered on `pd` by the verb `via` (what a registering
/// export's create tracks). Inlined into each, called from a closure that
/// borrows the export's arguments, as `track` is: the record is packed
/// from registers, with no frame of its own (a closure owning copies of
/// them cost the MR pair 30 instructions).
///
/// # Safety
/// `mr` is the MR the real library just registered on the live `pd`.
#[inline(always)]
pub unsafe fn track_mr(
    mr: *mut ibv_mr,
    pd: *mut ibv_pd,
    addr: u64,
    length: usize,
    access: u32,
    via: MrVia,
    caller: usize,
) {
    // SAFETY: the caller's contract.
    let o = unsafe { record(Kind::Mr, mr, context_of_pd(pd), pd as usize, caller) };
    // SAFETY: the caller's contract.
    let keys = unsafe { mr_keys(mr) };
    track(o.with(Facts::Mr(MrFacts {
        addr,
        length: length as u64,
        keys,
        access,
        via,
    })));
}

/// An MR's keys.
///
/// # Safety
/// `mr` is a live MR.
#[inline(always)]
pub unsafe fn mr_keys(mr: *mut ibv_mr) -> Keys {
    // SAFETY: the caller's contract.
    unsafe {
        Keys {
            lkey: (*mr).lkey,
            rkey: (*mr).rkey,
        }
    }
}
