//! The verbs that create and destroy objects on a context: PD, MR,
//! completion channel, CQ, SRQ, QP, AH, and the imported PD, MR and device.
//!
//! Each create is guard -> forward -> record -> log; each destroy is
//! guard -> look up and take the record -> forward -> untrack (or put the
//! record back if the destroy failed) -> log. No lock is held while the real
//! function runs. Results and errno are the real library's, with these
//! exceptions, each logged at warn:
//!
//! - An object whose context was already closed (a zombie) is never passed
//!   to the real library, which would touch the freed context: the call
//!   fails with EINVAL in the verb's own convention (`ibv_dealloc_pd`
//!   returns `EINVAL`, a create returns NULL with errno EINVAL, ...).
//! - A second destroy of a pointer the shim saw destroyed is refused with
//!   EINVAL: rdma-core would read the freed object (its first word, the
//!   context pointer, is overwritten by malloc's free-list link) and crash.
//!   It is recognised by a bounded memory of recent destroys
//!   (`objects::bury`), confirmed by the pointer's first word not naming an
//!   open context, so an object at a reused address that the shim did not
//!   see created (an inline verb such as `ibv_create_cq_ex`) is still
//!   destroyed normally. A double destroy the memory has forgotten is a
//!   pointer the shim never saw, below.
//! - NULL, and pointers the shim never saw created, are forwarded unchanged.
//!
//! Only the default (`@@`) versions are exported here; rdma-core's
//! `IBVERBS_1.0` compat entry points stay forwarded by trampoline, and are
//! still tracked because they call the current verbs through the PLT, which
//! the preloaded shim interposes.

use std::ffi::{c_int, c_void};
use std::fmt;
use std::ptr::{self, addr_of};

use verbs_abi::{
    ibv_ah, ibv_ah_attr, ibv_comp_channel, ibv_context, ibv_cq, ibv_grh, ibv_mr, ibv_pd, ibv_qp,
    ibv_qp_init_attr, ibv_srq, ibv_srq_init_attr, ibv_wc,
};

use super::{inside, nested, tid, Call, Ptr, Rc};
use crate::config;
use crate::guard::{boundary, set_errno, Errno};
use crate::log::Level;
use crate::real::{RealFn, Unavailable};
use crate::registry::objects::{self, Kind, Kinds, Obj, Taken, FLAG_BACKTRACE};
use crate::registry::{contexts, devices};

type AllocPd = unsafe extern "C" fn(*mut ibv_context) -> *mut ibv_pd;
type DeallocPd = unsafe extern "C" fn(*mut ibv_pd) -> c_int;
type RegMr = unsafe extern "C" fn(*mut ibv_pd, *mut c_void, usize, c_int) -> *mut ibv_mr;
type RegMrIova = unsafe extern "C" fn(*mut ibv_pd, *mut c_void, usize, u64, c_int) -> *mut ibv_mr;
type RegMrIova2 = unsafe extern "C" fn(*mut ibv_pd, *mut c_void, usize, u64, u32) -> *mut ibv_mr;
type RegDmabufMr = unsafe extern "C" fn(*mut ibv_pd, u64, usize, u64, c_int, c_int) -> *mut ibv_mr;
type ReregMr =
    unsafe extern "C" fn(*mut ibv_mr, c_int, *mut ibv_pd, *mut c_void, usize, c_int) -> c_int;
type DeregMr = unsafe extern "C" fn(*mut ibv_mr) -> c_int;
type CreateCompChannel = unsafe extern "C" fn(*mut ibv_context) -> *mut ibv_comp_channel;
type DestroyCompChannel = unsafe extern "C" fn(*mut ibv_comp_channel) -> c_int;
type CreateCq = unsafe extern "C" fn(
    *mut ibv_context,
    c_int,
    *mut c_void,
    *mut ibv_comp_channel,
    c_int,
) -> *mut ibv_cq;
type ResizeCq = unsafe extern "C" fn(*mut ibv_cq, c_int) -> c_int;
type DestroyCq = unsafe extern "C" fn(*mut ibv_cq) -> c_int;
type CreateSrq = unsafe extern "C" fn(*mut ibv_pd, *mut ibv_srq_init_attr) -> *mut ibv_srq;
type DestroySrq = unsafe extern "C" fn(*mut ibv_srq) -> c_int;
type CreateQp = unsafe extern "C" fn(*mut ibv_pd, *mut ibv_qp_init_attr) -> *mut ibv_qp;
type DestroyQp = unsafe extern "C" fn(*mut ibv_qp) -> c_int;
type CreateAh = unsafe extern "C" fn(*mut ibv_pd, *mut ibv_ah_attr) -> *mut ibv_ah;
type CreateAhFromWc =
    unsafe extern "C" fn(*mut ibv_pd, *mut ibv_wc, *mut ibv_grh, u8) -> *mut ibv_ah;
type DestroyAh = unsafe extern "C" fn(*mut ibv_ah) -> c_int;
type ImportDevice = unsafe extern "C" fn(c_int) -> *mut ibv_context;
type ImportPd = unsafe extern "C" fn(*mut ibv_context, u32) -> *mut ibv_pd;
type UnimportPd = unsafe extern "C" fn(*mut ibv_pd);
type ImportMr = unsafe extern "C" fn(*mut ibv_pd, u32) -> *mut ibv_mr;
type UnimportMr = unsafe extern "C" fn(*mut ibv_mr);

static ALLOC_PD: RealFn<AllocPd> = RealFn::new(c"ibv_alloc_pd");
static DEALLOC_PD: RealFn<DeallocPd> = RealFn::new(c"ibv_dealloc_pd");
static REG_MR: RealFn<RegMr> = RealFn::new(c"ibv_reg_mr");
static REG_MR_IOVA: RealFn<RegMrIova> = RealFn::new(c"ibv_reg_mr_iova");
static REG_MR_IOVA2: RealFn<RegMrIova2> = RealFn::new(c"ibv_reg_mr_iova2");
static REG_DMABUF_MR: RealFn<RegDmabufMr> = RealFn::new(c"ibv_reg_dmabuf_mr");
static REREG_MR: RealFn<ReregMr> = RealFn::new(c"ibv_rereg_mr");
static DEREG_MR: RealFn<DeregMr> = RealFn::new(c"ibv_dereg_mr");
static CREATE_COMP_CHANNEL: RealFn<CreateCompChannel> = RealFn::new(c"ibv_create_comp_channel");
static DESTROY_COMP_CHANNEL: RealFn<DestroyCompChannel> = RealFn::new(c"ibv_destroy_comp_channel");
static CREATE_CQ: RealFn<CreateCq> = RealFn::new(c"ibv_create_cq");
static RESIZE_CQ: RealFn<ResizeCq> = RealFn::new(c"ibv_resize_cq");
static DESTROY_CQ: RealFn<DestroyCq> = RealFn::new(c"ibv_destroy_cq");
static CREATE_SRQ: RealFn<CreateSrq> = RealFn::new(c"ibv_create_srq");
static DESTROY_SRQ: RealFn<DestroySrq> = RealFn::new(c"ibv_destroy_srq");
static CREATE_QP: RealFn<CreateQp> = RealFn::new(c"ibv_create_qp");
static DESTROY_QP: RealFn<DestroyQp> = RealFn::new(c"ibv_destroy_qp");
static CREATE_AH: RealFn<CreateAh> = RealFn::new(c"ibv_create_ah");
static CREATE_AH_FROM_WC: RealFn<CreateAhFromWc> = RealFn::new(c"ibv_create_ah_from_wc");
static DESTROY_AH: RealFn<DestroyAh> = RealFn::new(c"ibv_destroy_ah");
static IMPORT_DEVICE: RealFn<ImportDevice> = RealFn::new(c"ibv_import_device");
static IMPORT_PD: RealFn<ImportPd> = RealFn::new(c"ibv_import_pd");
static UNIMPORT_PD: RealFn<UnimportPd> = RealFn::new(c"ibv_unimport_pd");
static IMPORT_MR: RealFn<ImportMr> = RealFn::new(c"ibv_import_mr");
static UNIMPORT_MR: RealFn<UnimportMr> = RealFn::new(c"ibv_unimport_mr");

/// `Obj::sub` of an MR: the verb that registered it.
pub const MR_VIA: [&str; 4] = [
    "ibv_reg_mr",
    "ibv_reg_mr_iova",
    "ibv_reg_mr_iova2",
    "ibv_reg_dmabuf_mr",
];
/// `Obj::sub` of an AH: the verb that created it.
pub const AH_VIA: [&str; 2] = ["ibv_create_ah", "ibv_create_ah_from_wc"];

const PDS: Kinds = Kind::Pd.bit().or(Kind::ImportedPd);
const MRS: Kinds = Kind::Mr.bit().or(Kind::ImportedMr);

/// A create failed for want of the real function.
fn unavailable<T>(why: Unavailable) -> *mut T {
    set_errno(why.errno());
    ptr::null_mut()
}

/// The context an object was created on: its first field, set by the real
/// library (every verbs object starts with `struct ibv_context *context`).
fn context_of<T>(obj: *mut T, fallback: *mut ibv_context) -> usize {
    // SAFETY: obj is a live object just returned by the real library.
    let ctx = unsafe { obj.cast::<*mut ibv_context>().read() };
    if ctx.is_null() {
        fallback as usize
    } else {
        ctx as usize
    }
}

/// The context of `pd`, read only after a create on it succeeded (so `pd`
/// was a live PD).
fn context_of_pd(pd: *mut ibv_pd) -> *mut ibv_context {
    // SAFETY: the real library just created an object on this PD.
    unsafe { (*pd).context }
}

/// The shape every create shares. `forward` calls the real verb; when the
/// real library is calling one of its own exports (see [`nested`]) that is
/// all. Otherwise a create on a parent of a closed context (`parent`: the
/// verb, the argument's name and the parent's address) is refused as a use
/// after close, and a non-NULL result is recorded by `record`; the call is
/// logged by `log`. No lock is held while `forward` runs.
fn create<T>(
    parent: Option<(&str, &str, usize)>,
    forward: impl FnOnce() -> *mut T,
    record: impl FnOnce(*mut T),
    log: impl FnOnce(&Call, *mut T),
) -> *mut T {
    if nested() {
        return forward();
    }
    if let Some((func, arg, addr)) = parent {
        if zombie(func, arg, addr) {
            return ptr::null_mut();
        }
    }
    let call = Call::begin();
    let obj = inside(forward);
    if !obj.is_null() {
        record(obj);
    }
    log(&call, obj);
    obj
}

/// Records a new object (and, with `IBV_SHIM_BACKTRACE=1`, how it was
/// reached). errno is left as it was.
#[inline]
fn track(mut obj: Obj) {
    let errno = Errno::save();
    if config::get().backtrace {
        obj.set_flag(FLAG_BACKTRACE);
        objects::store_backtrace(obj.addr, std::backtrace::Backtrace::force_capture());
    }
    objects::insert(obj);
    errno.restore();
}

/// Refuses a verb on an object the shim knows dead: its context was closed
/// (a use after close) or it was destroyed (see `exports::dead`).
#[inline]
fn zombie(func: &str, arg: &str, addr: usize) -> bool {
    super::dead(func, arg, addr)
}

use super::use_after_close;

/// A destroy verb, for the shared destroy path.
struct Destroy {
    func: &'static str,
    arg: &'static str,
    /// What it destroys, and what else it accepts (`ibv_dereg_mr` also
    /// takes an imported MR).
    kind: Kind,
    kinds: Kinds,
    /// Returns nothing (`ibv_unimport_*`).
    void: bool,
}

use super::read_word;

/// A destroy of a pointer the table does not hold. Returns true to refuse
/// it (a double destroy), false to forward it unchanged.
#[cold]
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
fn destroy(d: &Destroy, addr: usize, forward: impl FnOnce() -> c_int) -> c_int {
    if nested() {
        return forward();
    }
    let errno = Errno::save();
    let taken = if addr == 0 {
        Taken::Unknown
    } else {
        objects::take(addr, d.kinds)
    };
    match taken {
        Taken::Zombie(o) => {
            use_after_close(d.func, d.arg, &o);
            return libc::EINVAL;
        }
        Taken::Unknown if untracked(d, addr) => {
            set_errno(libc::EINVAL);
            return libc::EINVAL;
        }
        Taken::OtherKind(o) => crate::log!(
            Level::Warn,
            "{}({}={addr:#x}): that is a {}, not a {}; forwarding unchanged",
            d.func,
            d.arg,
            o.kind().name(),
            d.arg
        ),
        _ => {}
    }
    errno.restore();
    let call = Call::begin();
    let rc = inside(forward);
    let errno = Errno::save();
    match taken {
        Taken::Removed(o) if rc == 0 => {
            objects::bury(addr, o.kind());
            if o.flags() & FLAG_BACKTRACE != 0 {
                objects::take_backtrace(addr);
            }
        }
        Taken::Removed(o) => {
            objects::restore(o);
            if rc == libc::EBUSY && crate::log::enabled(Level::Warn) {
                busy(d, &o);
            }
        }
        Taken::Unknown if rc == 0 && addr != 0 => {
            objects::bury(addr, d.kind);
        }
        _ => {}
    }
    errno.restore();
    if d.void {
        call.end(
            format_args!("{}({}={})", d.func, d.arg, Ptr(addr as *const c_void)),
            format_args!("void"),
            false,
        );
    } else {
        call.end(
            format_args!("{}({}={})", d.func, d.arg, Ptr(addr as *const c_void)),
            format_args!("{}", Rc(rc)),
            false,
        );
    }
    rc
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
            "{}({}={:#x}) = EBUSY: still in use, by nothing the shim tracks (memory windows, or objects \
             made by inline verbs); it stays allocated",
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

// --- protection domains ---------------------------------------------------------

/// Allocates a protection domain on `context`. Returns NULL with errno set
/// on failure. Free it with `ibv_dealloc_pd()`.
#[no_mangle]
pub unsafe extern "C" fn ibv_alloc_pd(context: *mut ibv_context) -> *mut ibv_pd {
    let caller = crate::caller!();
    boundary("ibv_alloc_pd", ptr::null_mut(), || {
        if context.is_null() {
            return super::null_argument("ibv_alloc_pd", "context", ptr::null_mut());
        }
        if !nested() && super::bad_context("ibv_alloc_pd", context, caller) {
            return ptr::null_mut();
        }
        let real = match ALLOC_PD.get() {
            Ok(f) => f,
            Err(why) => return unavailable(why),
        };
        create(
            None,
            // SAFETY: forwarded unchanged.
            || unsafe { real(context) },
            |pd| {
                let mut o = Obj::new(
                    Kind::Pd,
                    pd as usize,
                    context_of(pd, context),
                    0,
                    caller,
                    tid(),
                );
                // SAFETY: a live PD just returned by the real library.
                o.a = unsafe { (*pd).handle } as u64;
                track(o);
            },
            |call, pd| {
                call.end(
                    format_args!("ibv_alloc_pd(context={})", Ptr(context)),
                    format_args!("{}", Ptr(pd)),
                    pd.is_null(),
                )
            },
        )
    })
}

/// Deallocates a protection domain. Returns 0 on success or an errno value:
/// EBUSY while MRs, QPs, SRQs or AHs still use it (the shim's log names
/// them); EINVAL, without calling the real library, for a PD of a closed
/// context or one destroyed already.
#[no_mangle]
pub unsafe extern "C" fn ibv_dealloc_pd(pd: *mut ibv_pd) -> c_int {
    boundary("ibv_dealloc_pd", libc::EIO, || {
        let real = match DEALLOC_PD.get() {
            Ok(f) => f,
            Err(why) => return unavailable_rc(why),
        };
        let d = Destroy {
            func: "ibv_dealloc_pd",
            arg: "pd",
            kind: Kind::Pd,
            kinds: PDS,
            void: false,
        };
        // SAFETY: forwarded unchanged.
        destroy(&d, pd as usize, || unsafe { real(pd) })
    })
}

fn unavailable_rc(why: Unavailable) -> c_int {
    set_errno(why.errno());
    why.errno()
}

// --- memory regions -------------------------------------------------------------

/// Records an MR registered on `pd` by the verb `MR_VIA[via]`.
fn track_mr(
    mr: *mut ibv_mr,
    pd: *mut ibv_pd,
    addr: u64,
    length: usize,
    access: u32,
    via: u8,
    caller: usize,
) {
    let mut o = Obj::new(
        Kind::Mr,
        mr as usize,
        context_of(mr, context_of_pd(pd)),
        pd as usize,
        caller,
        tid(),
    );
    o.a = addr;
    o.b = length as u64;
    // SAFETY: a live MR just returned by the real library.
    o.c = unsafe { (*mr).lkey as u64 | ((*mr).rkey as u64) << 32 };
    o.x = access;
    o.set_sub(via);
    track(o);
}

/// Registers `length` bytes at `addr` with `pd` for the given access
/// (`IBV_ACCESS_*`). Returns NULL with errno set on failure (EINVAL for a
/// PD of a closed context). Free it with `ibv_dereg_mr()`.
#[no_mangle]
pub unsafe extern "C" fn ibv_reg_mr(
    pd: *mut ibv_pd,
    addr: *mut c_void,
    length: usize,
    access: c_int,
) -> *mut ibv_mr {
    let caller = crate::caller!();
    boundary("ibv_reg_mr", ptr::null_mut(), || {
        if pd.is_null() {
            return super::null_argument("ibv_reg_mr", "pd", ptr::null_mut());
        }
        let real = match REG_MR.get() {
            Ok(f) => f,
            Err(why) => return unavailable(why),
        };
        create(
            Some(("ibv_reg_mr", "pd", pd as usize)),
            // SAFETY: forwarded unchanged.
            || unsafe { real(pd, addr, length, access) },
            |mr| {
                track_mr(mr, pd, addr as u64, length, access as u32, 0, caller);
            },
            |call, mr| {
                call.end(
                    format_args!(
                        "ibv_reg_mr(pd={}, addr={}, length={length}, access={access:#x})",
                        Ptr(pd),
                        Ptr(addr)
                    ),
                    format_args!("{}", MrResult(mr)),
                    mr.is_null(),
                )
            },
        )
    })
}

/// Like `ibv_reg_mr()`, with `iova` as the address the remote side uses.
#[no_mangle]
pub unsafe extern "C" fn ibv_reg_mr_iova(
    pd: *mut ibv_pd,
    addr: *mut c_void,
    length: usize,
    iova: u64,
    access: c_int,
) -> *mut ibv_mr {
    let caller = crate::caller!();
    boundary("ibv_reg_mr_iova", ptr::null_mut(), || {
        if pd.is_null() {
            return super::null_argument("ibv_reg_mr_iova", "pd", ptr::null_mut());
        }
        let real = match REG_MR_IOVA.get() {
            Ok(f) => f,
            Err(why) => return unavailable(why),
        };
        create(
            Some(("ibv_reg_mr_iova", "pd", pd as usize)),
            // SAFETY: forwarded unchanged.
            || unsafe { real(pd, addr, length, iova, access) },
            |mr| {
                track_mr(mr, pd, addr as u64, length, access as u32, 1, caller);
            },
            |call, mr| {
                call.end(
            format_args!(
                "ibv_reg_mr_iova(pd={}, addr={}, length={length}, iova={iova:#x}, access={access:#x})",
                Ptr(pd),
                Ptr(addr)
            ),
            format_args!("{}", MrResult(mr)),
            mr.is_null(),
                )
            },
        )
    })
}

/// Like `ibv_reg_mr_iova()`; what `ibv_reg_mr()` reaches from C when the
/// access flags are not a compile-time constant.
#[no_mangle]
pub unsafe extern "C" fn ibv_reg_mr_iova2(
    pd: *mut ibv_pd,
    addr: *mut c_void,
    length: usize,
    iova: u64,
    access: u32,
) -> *mut ibv_mr {
    let caller = crate::caller!();
    boundary("ibv_reg_mr_iova2", ptr::null_mut(), || {
        if pd.is_null() {
            return super::null_argument("ibv_reg_mr_iova2", "pd", ptr::null_mut());
        }
        let real = match REG_MR_IOVA2.get() {
            Ok(f) => f,
            Err(why) => return unavailable(why),
        };
        create(
            Some(("ibv_reg_mr_iova2", "pd", pd as usize)),
            // SAFETY: forwarded unchanged.
            || unsafe { real(pd, addr, length, iova, access) },
            |mr| {
                track_mr(mr, pd, addr as u64, length, access, 2, caller);
            },
            |call, mr| {
                call.end(
            format_args!(
                "ibv_reg_mr_iova2(pd={}, addr={}, length={length}, iova={iova:#x}, access={access:#x})",
                Ptr(pd),
                Ptr(addr)
            ),
            format_args!("{}", MrResult(mr)),
            mr.is_null(),
                )
            },
        )
    })
}

/// Registers `length` bytes at `offset` of the dma-buf `fd` with `pd`.
/// Returns NULL with errno set on failure (EOPNOTSUPP when the real library
/// predates it).
#[no_mangle]
pub unsafe extern "C" fn ibv_reg_dmabuf_mr(
    pd: *mut ibv_pd,
    offset: u64,
    length: usize,
    iova: u64,
    fd: c_int,
    access: c_int,
) -> *mut ibv_mr {
    let caller = crate::caller!();
    boundary("ibv_reg_dmabuf_mr", ptr::null_mut(), || {
        if pd.is_null() {
            return super::null_argument("ibv_reg_dmabuf_mr", "pd", ptr::null_mut());
        }
        let real = match REG_DMABUF_MR.get() {
            Ok(f) => f,
            Err(why) => return unavailable(why),
        };
        create(
            Some(("ibv_reg_dmabuf_mr", "pd", pd as usize)),
            // SAFETY: forwarded unchanged.
            || unsafe { real(pd, offset, length, iova, fd, access) },
            |mr| {
                track_mr(mr, pd, offset, length, access as u32, 3, caller);
            },
            |call, mr| {
                call.end(
            format_args!(
                "ibv_reg_dmabuf_mr(pd={}, offset={offset:#x}, length={length}, iova={iova:#x}, fd={fd}, \
                 access={access:#x})",
                Ptr(pd)
            ),
            format_args!("{}", MrResult(mr)),
            mr.is_null(),
                )
            },
        )
    })
}

/// Changes an MR's translation, PD or access (`IBV_REREG_MR_CHANGE_*` in
/// `flags`). Returns 0 or a negative `enum ibv_rereg_mr_err_code` with errno
/// set (`IBV_REREG_MR_ERR_INPUT` with EINVAL for an MR or PD of a closed
/// context).
#[no_mangle]
pub unsafe extern "C" fn ibv_rereg_mr(
    mr: *mut ibv_mr,
    flags: c_int,
    pd: *mut ibv_pd,
    addr: *mut c_void,
    length: usize,
    access: c_int,
) -> c_int {
    const ERR_INPUT: c_int = -1;
    const CHANGE_TRANSLATION: c_int = 1;
    const CHANGE_PD: c_int = 2;
    const CHANGE_ACCESS: c_int = 4;
    boundary("ibv_rereg_mr", ERR_INPUT, || {
        if mr.is_null() {
            return super::null_argument("ibv_rereg_mr", "mr", ERR_INPUT);
        }
        let real = match REREG_MR.get() {
            Ok(f) => f,
            Err(why) => {
                set_errno(why.errno());
                return ERR_INPUT;
            }
        };
        // SAFETY: forwarded unchanged.
        if nested() {
            return unsafe { real(mr, flags, pd, addr, length, access) };
        }
        if zombie("ibv_rereg_mr", "mr", mr as usize)
            || (flags & CHANGE_PD != 0 && zombie("ibv_rereg_mr", "pd", pd as usize))
        {
            return ERR_INPUT;
        }
        let call = Call::begin();
        // SAFETY: forwarded unchanged.
        let rc = inside(|| unsafe { real(mr, flags, pd, addr, length, access) });
        if rc == 0 {
            let errno = Errno::save();
            objects::update(mr as usize, |o| {
                if flags & CHANGE_PD != 0 {
                    o.parent = pd as usize;
                }
                if flags & CHANGE_TRANSLATION != 0 {
                    o.a = addr as u64;
                    o.b = length as u64;
                }
                if flags & CHANGE_ACCESS != 0 {
                    o.x = access as u32;
                }
                // SAFETY: the MR was just re-registered, so it is live.
                o.c = unsafe { (*mr).lkey as u64 | ((*mr).rkey as u64) << 32 };
            });
            errno.restore();
        }
        call.end(
            format_args!(
                "ibv_rereg_mr(mr={}, flags={flags:#x}, pd={}, addr={}, length={length}, access={access:#x})",
                Ptr(mr),
                Ptr(pd),
                Ptr(addr)
            ),
            format_args!("{rc}"),
            rc != 0,
        );
        rc
    })
}

/// Deregisters an MR. Returns 0 on success or an errno value (EBUSY while
/// memory windows are bound to it; EINVAL, without calling the real
/// library, for an MR of a closed context or one deregistered already).
#[no_mangle]
pub unsafe extern "C" fn ibv_dereg_mr(mr: *mut ibv_mr) -> c_int {
    boundary("ibv_dereg_mr", libc::EIO, || {
        let real = match DEREG_MR.get() {
            Ok(f) => f,
            Err(why) => return unavailable_rc(why),
        };
        let d = Destroy {
            func: "ibv_dereg_mr",
            arg: "mr",
            kind: Kind::Mr,
            kinds: MRS,
            void: false,
        };
        // SAFETY: forwarded unchanged.
        destroy(&d, mr as usize, || unsafe { real(mr) })
    })
}

/// An MR result for the log: address and keys.
struct MrResult(*mut ibv_mr);

impl fmt::Display for MrResult {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.0.is_null() {
            return f.write_str("NULL");
        }
        // SAFETY: a live MR just returned by the real library.
        let (lkey, rkey) = unsafe { ((*self.0).lkey, (*self.0).rkey) };
        write!(f, "{:p} (lkey={lkey:#x} rkey={rkey:#x})", self.0)
    }
}

// --- completion channels and CQs ---------------------------------------------------

/// Creates a completion event channel on `context`. Returns NULL with errno
/// set on failure. Free it with `ibv_destroy_comp_channel()`.
#[no_mangle]
pub unsafe extern "C" fn ibv_create_comp_channel(
    context: *mut ibv_context,
) -> *mut ibv_comp_channel {
    let caller = crate::caller!();
    boundary("ibv_create_comp_channel", ptr::null_mut(), || {
        if context.is_null() {
            return super::null_argument("ibv_create_comp_channel", "context", ptr::null_mut());
        }
        if !nested() && super::bad_context("ibv_create_comp_channel", context, caller) {
            return ptr::null_mut();
        }
        let real = match CREATE_COMP_CHANNEL.get() {
            Ok(f) => f,
            Err(why) => return unavailable(why),
        };
        create(
            None,
            // SAFETY: forwarded unchanged.
            || unsafe { real(context) },
            |ch| {
                let mut o = Obj::new(
                    Kind::CompChannel,
                    ch as usize,
                    context_of(ch, context),
                    0,
                    caller,
                    tid(),
                );
                // SAFETY: a live channel just returned by the real library.
                o.x = unsafe { (*ch).fd } as u32;
                track(o);
            },
            |call, ch| {
                call.end(
                    format_args!("ibv_create_comp_channel(context={})", Ptr(context)),
                    format_args!("{}", Ptr(ch)),
                    ch.is_null(),
                )
            },
        )
    })
}

/// Destroys a completion channel. Returns 0 on success or an errno value
/// (EBUSY while CQs use it; EINVAL, without calling the real library, for a
/// channel of a closed context or one destroyed already).
#[no_mangle]
pub unsafe extern "C" fn ibv_destroy_comp_channel(channel: *mut ibv_comp_channel) -> c_int {
    boundary("ibv_destroy_comp_channel", libc::EIO, || {
        let real = match DESTROY_COMP_CHANNEL.get() {
            Ok(f) => f,
            Err(why) => return unavailable_rc(why),
        };
        let d = Destroy {
            func: "ibv_destroy_comp_channel",
            arg: "channel",
            kind: Kind::CompChannel,
            kinds: Kind::CompChannel.bit(),
            void: false,
        };
        // SAFETY: forwarded unchanged.
        destroy(&d, channel as usize, || unsafe { real(channel) })
    })
}

/// Creates a CQ of at least `cqe` entries on `context`, reporting to
/// `channel` (may be NULL). Returns NULL with errno set on failure. Free it
/// with `ibv_destroy_cq()`.
#[no_mangle]
pub unsafe extern "C" fn ibv_create_cq(
    context: *mut ibv_context,
    cqe: c_int,
    cq_context: *mut c_void,
    channel: *mut ibv_comp_channel,
    comp_vector: c_int,
) -> *mut ibv_cq {
    let caller = crate::caller!();
    boundary("ibv_create_cq", ptr::null_mut(), || {
        if context.is_null() {
            return super::null_argument("ibv_create_cq", "context", ptr::null_mut());
        }
        if !nested() && super::bad_context("ibv_create_cq", context, caller) {
            return ptr::null_mut();
        }
        let real = match CREATE_CQ.get() {
            Ok(f) => f,
            Err(why) => return unavailable(why),
        };
        create(
            Some(("ibv_create_cq", "channel", channel as usize)),
            // SAFETY: forwarded unchanged.
            || unsafe { real(context, cqe, cq_context, channel, comp_vector) },
            |cq| {
                let mut o = Obj::new(
                    Kind::Cq,
                    cq as usize,
                    context_of(cq, context),
                    channel as usize,
                    caller,
                    tid(),
                );
                // SAFETY: a live CQ just returned by the real library.
                o.x = unsafe { (*cq).cqe } as u32;
                o.a = comp_vector as u32 as u64;
                track(o);
            },
            |call, cq| {
                call.end(
            format_args!(
                "ibv_create_cq(context={}, cqe={cqe}, cq_context={}, channel={}, comp_vector={comp_vector})",
                Ptr(context),
                Ptr(cq_context),
                Ptr(channel)
            ),
            format_args!("{}", Ptr(cq)),
            cq.is_null(),
                )
            },
        )
    })
}

/// Resizes a CQ to at least `cqe` entries. Returns 0 on success or an errno
/// value (EINVAL, without calling the real library, for a CQ of a closed
/// context).
#[no_mangle]
pub unsafe extern "C" fn ibv_resize_cq(cq: *mut ibv_cq, cqe: c_int) -> c_int {
    boundary("ibv_resize_cq", libc::EIO, || {
        if cq.is_null() {
            return super::null_argument("ibv_resize_cq", "cq", libc::EINVAL);
        }
        let real = match RESIZE_CQ.get() {
            Ok(f) => f,
            Err(why) => return unavailable_rc(why),
        };
        // SAFETY: forwarded unchanged.
        if nested() {
            return unsafe { real(cq, cqe) };
        }
        if zombie("ibv_resize_cq", "cq", cq as usize) {
            return libc::EINVAL;
        }
        let call = Call::begin();
        // SAFETY: forwarded unchanged.
        let rc = inside(|| unsafe { real(cq, cqe) });
        if rc == 0 {
            let errno = Errno::save();
            // SAFETY: the CQ was just resized, so it is live.
            let actual = unsafe { (*cq).cqe } as u32;
            objects::update(cq as usize, |o| o.x = actual);
            errno.restore();
        }
        call.end(
            format_args!("ibv_resize_cq(cq={}, cqe={cqe})", Ptr(cq)),
            format_args!("{}", Rc(rc)),
            false,
        );
        rc
    })
}

/// Destroys a CQ. Returns 0 on success or an errno value (EBUSY while QPs
/// use it; EINVAL, without calling the real library, for a CQ of a closed
/// context or one destroyed already).
#[no_mangle]
pub unsafe extern "C" fn ibv_destroy_cq(cq: *mut ibv_cq) -> c_int {
    boundary("ibv_destroy_cq", libc::EIO, || {
        let real = match DESTROY_CQ.get() {
            Ok(f) => f,
            Err(why) => return unavailable_rc(why),
        };
        let d = Destroy {
            func: "ibv_destroy_cq",
            arg: "cq",
            kind: Kind::Cq,
            kinds: Kind::Cq.bit(),
            void: false,
        };
        // SAFETY: forwarded unchanged.
        destroy(&d, cq as usize, || unsafe { real(cq) })
    })
}

// --- shared receive queues and queue pairs --------------------------------------------

/// Creates an SRQ on `pd`; `srq_init_attr->attr` is updated with the actual
/// sizes. Returns NULL with errno set on failure. Free it with
/// `ibv_destroy_srq()`.
#[no_mangle]
pub unsafe extern "C" fn ibv_create_srq(
    pd: *mut ibv_pd,
    srq_init_attr: *mut ibv_srq_init_attr,
) -> *mut ibv_srq {
    let caller = crate::caller!();
    boundary("ibv_create_srq", ptr::null_mut(), || {
        if pd.is_null() {
            return super::null_argument("ibv_create_srq", "pd", ptr::null_mut());
        }
        let real = match CREATE_SRQ.get() {
            Ok(f) => f,
            Err(why) => return unavailable(why),
        };
        create(
            Some(("ibv_create_srq", "pd", pd as usize)),
            // SAFETY: forwarded unchanged.
            || unsafe { real(pd, srq_init_attr) },
            |srq| {
                let mut o = Obj::new(
                    Kind::Srq,
                    srq as usize,
                    context_of(srq, context_of_pd(pd)),
                    pd as usize,
                    caller,
                    tid(),
                );
                if !srq_init_attr.is_null() {
                    // SAFETY: the attributes the real library just accepted.
                    let attr = unsafe { (*srq_init_attr).attr };
                    o.x = attr.max_wr;
                    o.a = attr.max_sge as u64;
                    o.b = attr.srq_limit as u64;
                }
                track(o);
            },
            |call, srq| {
                call.end(
                    format_args!(
                        "ibv_create_srq(pd={}, srq_init_attr={})",
                        Ptr(pd),
                        Ptr(srq_init_attr)
                    ),
                    format_args!("{}", Ptr(srq)),
                    srq.is_null(),
                )
            },
        )
    })
}

/// Destroys an SRQ. Returns 0 on success or an errno value (EBUSY while QPs
/// use it; EINVAL, without calling the real library, for an SRQ of a closed
/// context or one destroyed already).
#[no_mangle]
pub unsafe extern "C" fn ibv_destroy_srq(srq: *mut ibv_srq) -> c_int {
    boundary("ibv_destroy_srq", libc::EIO, || {
        let real = match DESTROY_SRQ.get() {
            Ok(f) => f,
            Err(why) => return unavailable_rc(why),
        };
        let d = Destroy {
            func: "ibv_destroy_srq",
            arg: "srq",
            kind: Kind::Srq,
            kinds: Kind::Srq.bit(),
            void: false,
        };
        // SAFETY: forwarded unchanged.
        destroy(&d, srq as usize, || unsafe { real(srq) })
    })
}

/// Creates a QP on `pd`; `qp_init_attr->cap` is updated with the actual
/// capacities. Returns NULL with errno set on failure. Free it with
/// `ibv_destroy_qp()`.
#[no_mangle]
pub unsafe extern "C" fn ibv_create_qp(
    pd: *mut ibv_pd,
    qp_init_attr: *mut ibv_qp_init_attr,
) -> *mut ibv_qp {
    let caller = crate::caller!();
    boundary("ibv_create_qp", ptr::null_mut(), || {
        if pd.is_null() {
            return super::null_argument("ibv_create_qp", "pd", ptr::null_mut());
        }
        let real = match CREATE_QP.get() {
            Ok(f) => f,
            Err(why) => return unavailable(why),
        };
        create(
            Some(("ibv_create_qp", "pd", pd as usize)),
            // SAFETY: forwarded unchanged.
            || unsafe { real(pd, qp_init_attr) },
            |qp| {
                let mut o = Obj::new(
                    Kind::Qp,
                    qp as usize,
                    context_of(qp, context_of_pd(pd)),
                    pd as usize,
                    caller,
                    tid(),
                );
                // SAFETY: a live QP just returned by the real library.
                o.x = unsafe { (*qp).qp_num };
                if !qp_init_attr.is_null() {
                    // SAFETY: the attributes the real library just accepted;
                    // qp_type is read as the int it is in C.
                    unsafe {
                        let attr = &*qp_init_attr;
                        o.a = attr.send_cq as u64;
                        o.b = attr.recv_cq as u64;
                        o.c = attr.srq as u64;
                        o.set_sub(addr_of!(attr.qp_type).cast::<c_int>().read() as u8);
                    }
                }
                track(o);
            },
            |call, qp| {
                call.end(
                    format_args!(
                        "ibv_create_qp(pd={}, qp_init_attr={})",
                        Ptr(pd),
                        Ptr(qp_init_attr)
                    ),
                    format_args!("{}", QpResult(qp)),
                    qp.is_null(),
                )
            },
        )
    })
}

/// Destroys a QP. Returns 0 on success or an errno value (EINVAL, without
/// calling the real library, for a QP of a closed context or one destroyed
/// already).
#[no_mangle]
pub unsafe extern "C" fn ibv_destroy_qp(qp: *mut ibv_qp) -> c_int {
    boundary("ibv_destroy_qp", libc::EIO, || {
        let real = match DESTROY_QP.get() {
            Ok(f) => f,
            Err(why) => return unavailable_rc(why),
        };
        let d = Destroy {
            func: "ibv_destroy_qp",
            arg: "qp",
            kind: Kind::Qp,
            kinds: Kind::Qp.bit(),
            void: false,
        };
        // SAFETY: forwarded unchanged.
        destroy(&d, qp as usize, || unsafe { real(qp) })
    })
}

/// A QP result for the log: address and number.
struct QpResult(*mut ibv_qp);

impl fmt::Display for QpResult {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.0.is_null() {
            return f.write_str("NULL");
        }
        // SAFETY: a live QP just returned by the real library.
        write!(f, "{:p} (qp_num={:#x})", self.0, unsafe {
            (*self.0).qp_num
        })
    }
}

// --- address handles --------------------------------------------------------------

/// Creates an address handle on `pd` for the path in `attr`. Returns NULL
/// with errno set on failure. Free it with `ibv_destroy_ah()`.
#[no_mangle]
pub unsafe extern "C" fn ibv_create_ah(pd: *mut ibv_pd, attr: *mut ibv_ah_attr) -> *mut ibv_ah {
    let caller = crate::caller!();
    boundary("ibv_create_ah", ptr::null_mut(), || {
        if pd.is_null() {
            return super::null_argument("ibv_create_ah", "pd", ptr::null_mut());
        }
        let real = match CREATE_AH.get() {
            Ok(f) => f,
            Err(why) => return unavailable(why),
        };
        create(
            Some(("ibv_create_ah", "pd", pd as usize)),
            // SAFETY: forwarded unchanged.
            || unsafe { real(pd, attr) },
            |ah| {
                let mut o = Obj::new(
                    Kind::Ah,
                    ah as usize,
                    context_of(ah, context_of_pd(pd)),
                    pd as usize,
                    caller,
                    tid(),
                );
                if !attr.is_null() {
                    // SAFETY: the attributes the real library just accepted.
                    let attr = unsafe { &*attr };
                    o.a = attr.dlid as u64;
                    o.b = attr.port_num as u64;
                    o.c = attr.sl as u64 | (attr.is_global as u64) << 8;
                }
                track(o);
            },
            |call, ah| {
                call.end(
                    format_args!("ibv_create_ah(pd={}, attr={})", Ptr(pd), Ptr(attr)),
                    format_args!("{}", Ptr(ah)),
                    ah.is_null(),
                )
            },
        )
    })
}

/// Creates an address handle on `pd` that replies to the sender of the
/// completion `wc` (with its `grh` for global routes). Returns NULL with
/// errno set on failure. Free it with `ibv_destroy_ah()`.
#[no_mangle]
pub unsafe extern "C" fn ibv_create_ah_from_wc(
    pd: *mut ibv_pd,
    wc: *mut ibv_wc,
    grh: *mut ibv_grh,
    port_num: u8,
) -> *mut ibv_ah {
    let caller = crate::caller!();
    boundary("ibv_create_ah_from_wc", ptr::null_mut(), || {
        if pd.is_null() {
            return super::null_argument("ibv_create_ah_from_wc", "pd", ptr::null_mut());
        }
        let real = match CREATE_AH_FROM_WC.get() {
            Ok(f) => f,
            Err(why) => return unavailable(why),
        };
        create(
            Some(("ibv_create_ah_from_wc", "pd", pd as usize)),
            // SAFETY: forwarded unchanged.
            || unsafe { real(pd, wc, grh, port_num) },
            |ah| {
                let mut o = Obj::new(
                    Kind::Ah,
                    ah as usize,
                    context_of(ah, context_of_pd(pd)),
                    pd as usize,
                    caller,
                    tid(),
                );
                if !wc.is_null() {
                    // SAFETY: the completion the real library just read.
                    let wc = unsafe { &*wc };
                    o.a = wc.slid as u64;
                    o.c = wc.sl as u64;
                }
                o.b = port_num as u64;
                o.set_sub(1);
                track(o);
            },
            |call, ah| {
                call.end(
                    format_args!(
                        "ibv_create_ah_from_wc(pd={}, wc={}, grh={}, port_num={port_num})",
                        Ptr(pd),
                        Ptr(wc),
                        Ptr(grh)
                    ),
                    format_args!("{}", Ptr(ah)),
                    ah.is_null(),
                )
            },
        )
    })
}

/// Destroys an address handle. Returns 0 on success or an errno value
/// (EINVAL, without calling the real library, for an AH of a closed context
/// or one destroyed already).
#[no_mangle]
pub unsafe extern "C" fn ibv_destroy_ah(ah: *mut ibv_ah) -> c_int {
    boundary("ibv_destroy_ah", libc::EIO, || {
        let real = match DESTROY_AH.get() {
            Ok(f) => f,
            Err(why) => return unavailable_rc(why),
        };
        let d = Destroy {
            func: "ibv_destroy_ah",
            arg: "ah",
            kind: Kind::Ah,
            kinds: Kind::Ah.bit(),
            void: false,
        };
        // SAFETY: forwarded unchanged.
        destroy(&d, ah as usize, || unsafe { real(ah) })
    })
}

// --- imported objects -----------------------------------------------------------------

/// Imports the context behind `cmd_fd` (another process's, shared through
/// a file descriptor). Returns NULL with errno set on failure (EOPNOTSUPP
/// when the real library predates it). Free it with `ibv_close_device()`.
#[no_mangle]
pub unsafe extern "C" fn ibv_import_device(cmd_fd: c_int) -> *mut ibv_context {
    let caller = crate::caller!();
    boundary("ibv_import_device", ptr::null_mut(), || {
        let real = match IMPORT_DEVICE.get() {
            Ok(f) => f,
            Err(why) => return unavailable(why),
        };
        create(
            None,
            // SAFETY: forwarded unchanged.
            || unsafe { real(cmd_fd) },
            |ctx| {
                let errno = Errno::save();
                // SAFETY: a live context just returned by the real library.
                let device = unsafe { (*ctx).device };
                devices::remember(device);
                contexts::imported(ctx as usize, device as usize, tid(), caller);
                errno.restore();
            },
            |call, ctx| {
                call.end(
                    format_args!("ibv_import_device(cmd_fd={cmd_fd})"),
                    format_args!("{}", Ptr(ctx)),
                    ctx.is_null(),
                )
            },
        )
    })
}

/// Imports the PD with kernel handle `pd_handle` of an imported context.
/// Returns NULL with errno set on failure. Release it with
/// `ibv_unimport_pd()`.
#[no_mangle]
pub unsafe extern "C" fn ibv_import_pd(context: *mut ibv_context, pd_handle: u32) -> *mut ibv_pd {
    let caller = crate::caller!();
    boundary("ibv_import_pd", ptr::null_mut(), || {
        if context.is_null() {
            return super::null_argument("ibv_import_pd", "context", ptr::null_mut());
        }
        if !nested() && super::bad_context("ibv_import_pd", context, caller) {
            return ptr::null_mut();
        }
        let real = match IMPORT_PD.get() {
            Ok(f) => f,
            Err(why) => return unavailable(why),
        };
        create(
            None,
            // SAFETY: forwarded unchanged.
            || unsafe { real(context, pd_handle) },
            |pd| {
                let mut o = Obj::new(
                    Kind::ImportedPd,
                    pd as usize,
                    context_of(pd, context),
                    0,
                    caller,
                    tid(),
                );
                o.a = pd_handle as u64;
                track(o);
            },
            |call, pd| {
                call.end(
                    format_args!(
                        "ibv_import_pd(context={}, pd_handle={pd_handle})",
                        Ptr(context)
                    ),
                    format_args!("{}", Ptr(pd)),
                    pd.is_null(),
                )
            },
        )
    })
}

/// Releases an imported PD (the PD itself lives on in its owner). EINVAL,
/// without calling the real library, for a PD of a closed context.
#[no_mangle]
pub unsafe extern "C" fn ibv_unimport_pd(pd: *mut ibv_pd) {
    boundary("ibv_unimport_pd", (), || {
        let real = match UNIMPORT_PD.get() {
            Ok(f) => f,
            Err(why) => return set_errno(why.errno()),
        };
        let d = Destroy {
            func: "ibv_unimport_pd",
            arg: "pd",
            kind: Kind::ImportedPd,
            kinds: PDS,
            void: true,
        };
        destroy(&d, pd as usize, || {
            // SAFETY: forwarded unchanged.
            unsafe { real(pd) };
            0
        });
    })
}

/// Imports the MR with kernel handle `mr_handle` on an imported PD. Returns
/// NULL with errno set on failure. Release it with `ibv_unimport_mr()`.
#[no_mangle]
pub unsafe extern "C" fn ibv_import_mr(pd: *mut ibv_pd, mr_handle: u32) -> *mut ibv_mr {
    let caller = crate::caller!();
    boundary("ibv_import_mr", ptr::null_mut(), || {
        if pd.is_null() {
            return super::null_argument("ibv_import_mr", "pd", ptr::null_mut());
        }
        let real = match IMPORT_MR.get() {
            Ok(f) => f,
            Err(why) => return unavailable(why),
        };
        create(
            Some(("ibv_import_mr", "pd", pd as usize)),
            // SAFETY: forwarded unchanged.
            || unsafe { real(pd, mr_handle) },
            |mr| {
                let mut o = Obj::new(
                    Kind::ImportedMr,
                    mr as usize,
                    context_of(mr, context_of_pd(pd)),
                    pd as usize,
                    caller,
                    tid(),
                );
                // SAFETY: a live MR just returned by the real library.
                unsafe {
                    o.a = (*mr).addr as u64;
                    o.b = (*mr).length as u64;
                    o.c = (*mr).lkey as u64 | ((*mr).rkey as u64) << 32;
                }
                o.x = mr_handle;
                track(o);
            },
            |call, mr| {
                call.end(
                    format_args!("ibv_import_mr(pd={}, mr_handle={mr_handle})", Ptr(pd)),
                    format_args!("{}", MrResult(mr)),
                    mr.is_null(),
                )
            },
        )
    })
}

/// Releases an imported MR (the MR itself lives on in its owner). EINVAL,
/// without calling the real library, for an MR of a closed context.
#[no_mangle]
pub unsafe extern "C" fn ibv_unimport_mr(mr: *mut ibv_mr) {
    boundary("ibv_unimport_mr", (), || {
        let real = match UNIMPORT_MR.get() {
            Ok(f) => f,
            Err(why) => return set_errno(why.errno()),
        };
        let d = Destroy {
            func: "ibv_unimport_mr",
            arg: "mr",
            kind: Kind::ImportedMr,
            kinds: MRS,
            void: true,
        };
        destroy(&d, mr as usize, || {
            // SAFETY: forwarded unchanged.
            unsafe { real(mr) };
            0
        });
    })
}
