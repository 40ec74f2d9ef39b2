//! Memory regions: registration with the kernel's checks, re-registration,
//! deregistration, and key lookup for the data path.

use core::ffi::{c_int, c_void};
use std::sync::atomic::{AtomicU32, AtomicU8, AtomicUsize, Ordering};
use std::sync::Arc;

use once_cell::sync::Lazy;
use parking_lot::Mutex;
use verbs_abi::{ibv_mr, ibv_pd};

use crate::context::{self, SimContext};
use crate::fork;
use crate::pd::{self, SimPd};
use crate::registry::{self, Entry, Kind, Sharded, OBJECTS};

/// MRs by key (lkey == rkey).
pub static KEYS: Lazy<Sharded<u32, Arc<MrShared>>> = Lazy::new(Sharded::new);

// `ibv_access_flags` bits.
crate::abi::values!(pub u32: ibv_access_flags {
    LOCAL_WRITE = IBV_ACCESS_LOCAL_WRITE,
    REMOTE_WRITE = IBV_ACCESS_REMOTE_WRITE,
    REMOTE_READ = IBV_ACCESS_REMOTE_READ,
    REMOTE_ATOMIC = IBV_ACCESS_REMOTE_ATOMIC,
    ZERO_BASED = IBV_ACCESS_ZERO_BASED,
    ON_DEMAND = IBV_ACCESS_ON_DEMAND,
    MW_BIND = IBV_ACCESS_MW_BIND,
});
/// `IBV_ACCESS_OPTIONAL_RANGE`: bits 20..29, which a device may ignore.
pub const OPTIONAL_RANGE: u32 = verbs_abi::IBV_ACCESS_OPTIONAL_RANGE;
/// The access that makes the kernel pin pages for writing
/// (`ib_access_writable`).
pub const WRITABLE: u32 = LOCAL_WRITE | REMOTE_WRITE | REMOTE_ATOMIC | MW_BIND;
/// What the kernel accepts: bits 0..9 (up to FLUSH_PERSISTENT) and the optional range.
pub const SUPPORTED: u32 = ((1 << 10) - 1) | OPTIONAL_RANGE;

// `ibv_rereg_mr` flags and results.
crate::abi::values!(pub c_int: ibv_rereg_mr_flags {
    REREG_CHANGE_TRANSLATION = IBV_REREG_MR_CHANGE_TRANSLATION,
    REREG_CHANGE_PD = IBV_REREG_MR_CHANGE_PD,
    REREG_CHANGE_ACCESS = IBV_REREG_MR_CHANGE_ACCESS,
    REREG_FLAGS_SUPPORTED = IBV_REREG_MR_FLAGS_SUPPORTED,
});
crate::abi::values!(pub c_int: ibv_rereg_mr_err_code {
    REREG_ERR_INPUT = IBV_REREG_MR_ERR_INPUT,
    REREG_ERR_CMD = IBV_REREG_MR_ERR_CMD,
});

/// What an MR covers; changes only through `ibv_rereg_mr`.
#[derive(Clone, Copy, Debug)]
pub struct MrInfo {
    /// Host address and length of the registered memory.
    pub addr: usize,
    pub len: usize,
    /// Address the MR starts at in work requests (== addr unless `_iova`).
    pub iova: u64,
    pub access: u32,
    /// Address of the SimPd.
    pub pd: usize,
    /// Pages this MR counts against the process's locked memory.
    pub pinned: usize,
}

impl MrInfo {
    /// Host address of `[va, va + len)` in the MR's iova space, if inside.
    pub fn host(&self, va: u64, len: u64) -> Option<usize> {
        let off = va.checked_sub(self.iova)?;
        let end = off.checked_add(len)?;
        if end > self.len as u64 {
            return None;
        }
        Some(self.addr + off as usize)
    }
}

/// The part of an MR the data path shares.
pub struct MrShared {
    pub key: u32,
    pub info: Mutex<MrInfo>,
    /// Data-path accesses in progress ([`Pinned`]).
    dma: AtomicU32,
    /// `LIVE`, `PAUSED` (a translation being changed) or `DEAD`.
    state: AtomicU8,
}

const LIVE: u8 = 0;
const PAUSED: u8 = 1;
const DEAD: u8 = 2;

impl MrShared {
    fn new(key: u32, info: MrInfo) -> MrShared {
        MrShared {
            key,
            info: Mutex::new(info),
            dma: AtomicU32::new(0),
            state: AtomicU8::new(LIVE),
        }
    }

    /// Host address of `[va, va + len)` in this MR, pinned against
    /// deregistration until the [`Pinned`] drops; `None` outside the MR or
    /// once it is deregistered. `check` judges the MR's current info
    /// first (PD, access).
    pub fn pin(
        self: &Arc<Self>,
        va: u64,
        len: u64,
        check: impl FnOnce(&MrInfo) -> bool,
    ) -> Option<Pinned> {
        loop {
            // Announce the access, then look: `quiesce` marks the state
            // first, then waits for the count (both SeqCst), so one of the
            // two sees the other.
            self.dma.fetch_add(1, Ordering::SeqCst);
            match self.state.load(Ordering::SeqCst) {
                LIVE => break,
                PAUSED => {
                    self.dma.fetch_sub(1, Ordering::SeqCst);
                    std::thread::yield_now();
                }
                _ => {
                    self.dma.fetch_sub(1, Ordering::SeqCst);
                    return None;
                }
            }
        }
        let mut pinned = Pinned {
            host: 0,
            mr: self.clone(),
        };
        let info = *self.info.lock();
        pinned.host = check(&info).then(|| info.host(va, len)).flatten()?;
        Some(pinned)
    }

    /// Stops new data-path accesses (`to`: `PAUSED` or `DEAD`) and waits
    /// for those in progress: once it returns, the device touches none of
    /// the memory, as after the kernel's deregistration.
    fn quiesce(&self, to: u8) {
        self.state.store(to, Ordering::SeqCst);
        while self.dma.load(Ordering::SeqCst) != 0 {
            std::thread::yield_now();
        }
    }

    fn resume(&self) {
        self.state.store(LIVE, Ordering::SeqCst);
    }
}

/// Registered memory the data path is reading or writing (`host`, in the
/// program's address space): the MR's deregistration, or a change of its
/// translation, waits until this drops. Held only for a copy, never
/// across a wait.
pub struct Pinned {
    pub host: usize,
    mr: Arc<MrShared>,
}

impl Drop for Pinned {
    fn drop(&mut self) {
        self.mr.dma.fetch_sub(1, Ordering::SeqCst);
    }
}

/// A memory region; `mr` first so `*mut ibv_mr` is the object's address.
#[repr(C)]
pub struct SimMr {
    pub mr: ibv_mr,
    pub shared: Arc<MrShared>,
}

static NEXT_KEY_INDEX: AtomicU32 = AtomicU32::new(0x100);

fn new_key(shared_for: impl Fn(u32) -> Arc<MrShared>) -> Arc<MrShared> {
    loop {
        // mlx5-style keys: a 24-bit index and an 8-bit tag.
        let i = NEXT_KEY_INDEX.fetch_add(1, Ordering::Relaxed) & 0x00ff_ffff;
        let key = (i << 8) | ((i.wrapping_mul(37) & 0xff) ^ 0x5a);
        if key == 0 {
            continue;
        }
        let s = shared_for(key);
        if KEYS.insert_new(key, s.clone()) {
            return s;
        }
    }
}

/// The kernel's `ib_check_mr_access`.
pub fn check_access(access: u32) -> Result<(), c_int> {
    if access & (REMOTE_WRITE | REMOTE_ATOMIC) != 0 && access & LOCAL_WRITE == 0 {
        return Err(libc::EINVAL);
    }
    if access & !SUPPORTED != 0 {
        return Err(libc::EINVAL);
    }
    // ON_DEMAND is accepted: the sim never pins pages (`objects::odp`).
    Ok(())
}

fn page_size() -> usize {
    // SAFETY: plain libc call.
    let p = unsafe { libc::sysconf(libc::_SC_PAGESIZE) };
    if p > 0 {
        p as usize
    } else {
        4096
    }
}

/// Pages the MRs of this process pin (the kernel's `mm->pinned_vm`, as far
/// as verbs add to it).
static PINNED_PAGES: AtomicUsize = AtomicUsize::new(0);

/// The pages `[addr, addr + len)` touches.
fn pages_spanned(addr: usize, len: usize) -> usize {
    if len == 0 {
        return 0;
    }
    let ps = page_size();
    let first = addr / ps;
    let last = addr.saturating_add(len - 1) / ps;
    last - first + 1
}

/// Whether this process holds `CAP_IPC_LOCK` in its effective set (the
/// kernel's `capable(CAP_IPC_LOCK)`): it may lock memory past its limit.
fn can_lock_past_limit() -> bool {
    #[repr(C)]
    struct Header {
        version: u32,
        pid: c_int,
    }
    #[repr(C)]
    #[derive(Clone, Copy, Default)]
    struct Data {
        effective: u32,
        permitted: u32,
        inheritable: u32,
    }
    const VERSION_3: u32 = 0x2008_0522;
    const CAP_IPC_LOCK: u32 = 14;
    let mut h = Header {
        version: VERSION_3,
        pid: 0,
    };
    let mut d = [Data::default(); 2];
    // SAFETY: capget writes two Data entries (version 3) for this process.
    let r = unsafe { libc::syscall(libc::SYS_capget, &mut h as *mut Header, d.as_mut_ptr()) };
    r == 0 && d[0].effective & (1 << CAP_IPC_LOCK) != 0
}

/// `RLIMIT_MEMLOCK` in pages (soft limit; infinity: no limit).
fn memlock_limit_pages() -> usize {
    let mut rl = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: getrlimit writes the struct.
    if unsafe { libc::getrlimit(libc::RLIMIT_MEMLOCK, &mut rl) } != 0
        || rl.rlim_cur == libc::RLIM_INFINITY
    {
        return usize::MAX;
    }
    (rl.rlim_cur / page_size() as u64) as usize
}

/// `ib_umem_get`'s accounting: counts the range's pages as pinned, or
/// `ENOMEM` when that would pass `RLIMIT_MEMLOCK` in a process without
/// `CAP_IPC_LOCK`. Returns the pages counted, for [`unpin`].
pub fn pin(addr: usize, len: usize) -> Result<usize, c_int> {
    let n = pages_spanned(addr, len);
    if n == 0 {
        return Ok(0);
    }
    let now = PINNED_PAGES
        .fetch_add(n, Ordering::Relaxed)
        .saturating_add(n);
    if now > memlock_limit_pages() && !can_lock_past_limit() {
        PINNED_PAGES.fetch_sub(n, Ordering::Relaxed);
        return Err(libc::ENOMEM);
    }
    Ok(n)
}

/// Undoes [`pin`].
pub fn unpin(pages: usize) {
    if pages != 0 {
        PINNED_PAGES.fetch_sub(pages, Ordering::Relaxed);
    }
}

/// What pinning the pages for writing says, as `ib_umem_get` pins them
/// (`FOLL_WRITE`): each page faulted in writable (`MADV_POPULATE_WRITE`,
/// Linux 5.14 and later; the data is not changed), `EFAULT` where a write
/// would fault. A kernel without it, or a mapping it refuses (`EINVAL`),
/// is judged by [`check_writable`]. Cost: one call, whatever the
/// process's mappings.
pub fn pin_writable(addr: usize, len: usize) -> Result<(), c_int> {
    const MADV_POPULATE_WRITE: c_int = 23;
    if len == 0 {
        return Ok(());
    }
    let ps = page_size();
    let start = addr - addr % ps;
    let end = addr
        .checked_add(len)
        .and_then(|e| e.checked_next_multiple_of(ps))
        .ok_or(libc::EFAULT)?;
    loop {
        // SAFETY: populating page tables changes no byte of the range;
        // an unmapped or unwritable page is an error return, not a fault.
        let r = unsafe { libc::madvise(start as *mut c_void, end - start, MADV_POPULATE_WRITE) };
        if r == 0 {
            return Ok(());
        }
        match std::io::Error::last_os_error().raw_os_error() {
            Some(libc::EINTR) => continue,
            Some(libc::EINVAL) => return check_writable(addr, len),
            _ => return Err(libc::EFAULT),
        }
    }
}

/// What pinning the pages for writing says: `EFAULT` unless every page of
/// the range lies in a writable mapping (`/proc/self/maps`). The kernel
/// pins with `FOLL_WRITE` for [`WRITABLE`] access; without this check a
/// later RDMA WRITE into a read-only page would fault in the progress
/// engine and kill the program.
pub fn check_writable(addr: usize, len: usize) -> Result<(), c_int> {
    if len == 0 {
        return Ok(());
    }
    let end = addr.checked_add(len).ok_or(libc::EINVAL)?;
    let maps = std::fs::read("/proc/self/maps").map_err(|_| libc::EFAULT)?;
    let mut cur = addr;
    for line in maps.split(|&b| b == b'\n') {
        let Some((lo, hi, writable)) = parse_maps_line(line) else {
            continue;
        };
        if hi <= cur {
            continue;
        }
        if lo > cur || !writable {
            return Err(libc::EFAULT);
        }
        cur = hi;
        if cur >= end {
            return Ok(());
        }
    }
    Err(libc::EFAULT)
}

/// `start-end perms ...` of a `/proc/self/maps` line: the range and
/// whether it is writable.
fn parse_maps_line(line: &[u8]) -> Option<(usize, usize, bool)> {
    let text = core::str::from_utf8(line).ok()?;
    let mut f = text.split(' ');
    let (lo, hi) = f.next()?.split_once('-')?;
    let perms = f.next()?;
    Some((
        usize::from_str_radix(lo, 16).ok()?,
        usize::from_str_radix(hi, 16).ok()?,
        perms.as_bytes().get(1) == Some(&b'w'),
    ))
}

/// What pinning the pages would say: `EINVAL` for an empty or wrapping
/// range, `EFAULT` when any page is not mapped.
pub fn check_range(addr: usize, len: usize) -> Result<(), c_int> {
    if len == 0 {
        return Err(libc::EINVAL);
    }
    let end = addr.checked_add(len).ok_or(libc::EINVAL)?;
    if addr == 0 {
        return Err(libc::EFAULT);
    }
    let ps = page_size();
    let start = addr & !(ps - 1);
    let end = end.checked_add(ps - 1).ok_or(libc::EINVAL)? & !(ps - 1);
    // msync(MS_ASYNC) does nothing but fails with ENOMEM on unmapped pages.
    // SAFETY: msync only inspects the mappings of the range.
    let r = unsafe { libc::msync(start as *mut c_void, end - start, libc::MS_ASYNC) };
    if r != 0 {
        return Err(libc::EFAULT);
    }
    Ok(())
}

/// A live MR and its context.
pub fn get(mr: *mut ibv_mr) -> Result<(&'static SimContext, &'static SimMr), c_int> {
    get_as(mr, libc::EINVAL)
}

/// As [`get`], with `unknown` the error for an object whose handle or
/// context the program changed (a destroy's `ENOENT`, as the kernel's).
pub fn get_as(
    mr: *mut ibv_mr,
    unknown: c_int,
) -> Result<(&'static SimContext, &'static SimMr), c_int> {
    let ctx = context::owner_of(mr as usize, Kind::Mr)?;
    // SAFETY: a live MR (the registry says so): its C fields are readable.
    let (named, handle) = unsafe { ((*mr).context, (*mr).handle) };
    context::known(ctx, mr as usize, named, handle).map_err(|_| unknown)?;
    // SAFETY: the registry says a live SimMr is at this address.
    Ok((ctx, unsafe { &*(mr as *const SimMr) }))
}

/// `ibv_reg_mr` / `_iova` / `_iova2`.
pub fn reg(
    pd_ptr: *mut ibv_pd,
    addr: *mut c_void,
    len: usize,
    iova: u64,
    access: u32,
) -> Result<*mut ibv_mr, c_int> {
    let (ctx, pd) = pd::get(pd_ptr)?;
    // rdma-core marks fork protection "too late" on every registration attempt.
    fork::dontfork_range(addr, len)?;
    let zero_based = access & ZERO_BASED != 0;
    let page_mask = (page_size() - 1) as u64;
    if !zero_based && (addr as u64 & page_mask) != (iova & page_mask) {
        return Err(libc::EINVAL);
    }
    check_access(access)?;
    // The kernel refuses on-demand paging on a device without it
    // (EINVAL, measured on Linux 6.1's rxe).
    if access & ON_DEMAND != 0 && !ctx.dev.profile().odp {
        return Err(libc::EINVAL);
    }
    // Implicit ODP (the whole address space): not simulated, as on an
    // mlx5 without IBV_ODP_SUPPORT_IMPLICIT.
    if access & ON_DEMAND != 0 && addr.is_null() && len == usize::MAX {
        return Err(libc::EOPNOTSUPP);
    }
    check_range(addr as usize, len)?;
    // On-demand paging pins nothing; anything else counts its pages
    // against the locked-memory limit, then must be writable where the
    // access needs it.
    let pinned = if access & ON_DEMAND != 0 {
        0
    } else {
        pin(addr as usize, len)?
    };
    if access & WRITABLE != 0 {
        let writable = if access & ON_DEMAND != 0 {
            check_writable(addr as usize, len)
        } else {
            pin_writable(addr as usize, len)
        };
        if let Err(e) = writable {
            unpin(pinned);
            return Err(e);
        }
    }
    let iova = if zero_based { 0 } else { iova };
    let info = MrInfo {
        addr: addr as usize,
        len,
        iova,
        access,
        pd: pd.base(),
        pinned,
    };
    insert(ctx, pd, pd_ptr, info).inspect_err(|_| unpin(pinned))
}

/// An MR on device memory (`objects::dm`, which checked that the range
/// lies in the DM): zero-based, and it may be empty, as the kernel allows.
pub fn reg_dm(
    pd_ptr: *mut ibv_pd,
    addr: *mut c_void,
    len: usize,
    access: u32,
) -> Result<*mut ibv_mr, c_int> {
    let (ctx, pd) = pd::get(pd_ptr)?;
    check_access(access)?;
    let info = MrInfo {
        addr: addr as usize,
        len,
        iova: 0,
        access,
        pd: pd.base(),
        pinned: 0,
    };
    insert(ctx, pd, pd_ptr, info)
}

/// Registers a checked MR of `pd` (under the context lock).
fn insert(
    ctx: &'static SimContext,
    pd: &'static SimPd,
    pd_ptr: *mut ibv_pd,
    info: MrInfo,
) -> Result<*mut ibv_mr, c_int> {
    let mut st = ctx.lock_open()?;
    if !registry::is_live(pd_ptr as usize, Kind::Pd) {
        return Err(libc::EINVAL);
    }
    ctx.dev.take(crate::device::Limit::Mr)?;
    let shared = new_key(|key| Arc::new(MrShared::new(key, info)));
    let b = Box::new(SimMr {
        mr: ibv_mr {
            context: ctx.ibv(),
            pd: pd_ptr,
            addr: info.addr as *mut c_void,
            length: info.len,
            handle: st.handle(),
            lkey: shared.key,
            rkey: shared.key,
        },
        shared,
    });
    let raw = Box::into_raw(b);
    pd.users.fetch_add(1, Ordering::Relaxed);
    st.children += 1;
    OBJECTS.insert(
        raw as usize,
        Entry {
            kind: Kind::Mr,
            ctx: ctx.addr(),
            // SAFETY: raw was just boxed here and is not shared yet.
            handle: unsafe { (*raw).mr.handle },
        },
    );
    Ok(raw.cast())
}

/// `ibv_rereg_mr`: 0, or a negative `ibv_rereg_mr_err_code` with errno.
pub fn rereg(
    mr_ptr: *mut ibv_mr,
    flags: c_int,
    new_pd: *mut ibv_pd,
    addr: *mut c_void,
    len: usize,
    access: c_int,
) -> Result<(), (c_int, c_int)> {
    let input = |e| (REREG_ERR_INPUT, e);
    let cmd = |e| (REREG_ERR_CMD, e);
    let (ctx, mr) = get(mr_ptr).map_err(input)?;
    // As in `dereg`: the old range may be unmapped next.
    crate::fabric::settle_outbox();
    if flags & !REREG_FLAGS_SUPPORTED != 0 {
        return Err(input(libc::EINVAL));
    }
    if flags & REREG_CHANGE_TRANSLATION != 0 && (len == 0 || addr.is_null()) {
        return Err(input(libc::EINVAL));
    }
    if access != 0 && flags & REREG_CHANGE_ACCESS == 0 {
        return Err(input(libc::EINVAL));
    }
    // A provider without the verb (rdma-core's placeholder answers).
    if ctx.dev.profile().quirks.no_rereg_mr {
        return Err(cmd(libc::EOPNOTSUPP));
    }
    if flags & REREG_CHANGE_TRANSLATION != 0 {
        fork::dontfork_range(addr, len).map_err(|e| (-2, e))?;
    }
    // The kernel's checks.
    if flags == 0 {
        return Err(cmd(libc::EINVAL));
    }
    let access = access as u32;
    if flags & REREG_CHANGE_ACCESS != 0 {
        check_access(access).map_err(cmd)?;
    }
    if flags & REREG_CHANGE_TRANSLATION != 0 {
        check_range(addr as usize, len).map_err(cmd)?;
    }
    let info_now = *mr.shared.info.lock();
    let new_access = if flags & REREG_CHANGE_ACCESS != 0 {
        access
    } else {
        info_now.access
    };
    let (new_addr, new_len) = if flags & REREG_CHANGE_TRANSLATION != 0 {
        (addr as usize, len)
    } else {
        (info_now.addr, info_now.len)
    };
    // A new translation is pinned anew (the old one is released when
    // the change is made); new write access needs writable pages.
    let new_pinned = if flags & REREG_CHANGE_TRANSLATION != 0 && new_access & ON_DEMAND == 0 {
        Some(pin(new_addr, new_len).map_err(cmd)?)
    } else {
        None
    };
    if new_access & WRITABLE != 0 {
        let writable = if new_access & ON_DEMAND != 0 {
            check_writable(new_addr, new_len)
        } else {
            pin_writable(new_addr, new_len)
        };
        if let Err(e) = writable {
            unpin(new_pinned.unwrap_or(0));
            return Err(cmd(e));
        }
    }
    let undo = |e| {
        unpin(new_pinned.unwrap_or(0));
        e
    };
    let new_sim_pd: Option<&SimPd> = if flags & REREG_CHANGE_PD != 0 {
        let (pctx, p) = pd::get(new_pd).map_err(cmd).map_err(undo)?;
        if !core::ptr::eq(pctx, ctx) {
            return Err(undo(cmd(libc::EINVAL)));
        }
        Some(p)
    } else {
        None
    };
    let _st = ctx.lock_open().map_err(cmd).map_err(undo)?;
    if !registry::is_live(mr_ptr as usize, Kind::Mr) {
        return Err(undo(cmd(libc::EINVAL)));
    }
    if let Some(p) = new_sim_pd {
        if !registry::is_live(new_pd as usize, Kind::Pd) {
            return Err(undo(cmd(libc::EINVAL)));
        }
        let mut info = mr.shared.info.lock();
        // SAFETY: the old PD (the one the MR was made on, perhaps a
        // parent domain) is live: it has this MR as a user.
        let old = unsafe { &*(mr.mr.pd as *const SimPd) };
        old.users.fetch_sub(1, Ordering::Relaxed);
        p.users.fetch_add(1, Ordering::Relaxed);
        info.pd = p.base();
    }
    // The old translation may be unmapped once this returns: wait for
    // the accesses in progress, and hold new ones until the change is made.
    let paused = flags & REREG_CHANGE_TRANSLATION != 0;
    if paused {
        mr.shared.quiesce(PAUSED);
    }
    let mut info = mr.shared.info.lock();
    if flags & REREG_CHANGE_ACCESS != 0 {
        info.access = access;
    }
    if flags & REREG_CHANGE_TRANSLATION != 0 {
        info.addr = addr as usize;
        info.len = len;
        info.iova = addr as u64;
    }
    if let Some(n) = new_pinned {
        unpin(core::mem::replace(&mut info.pinned, n));
    }
    drop(info);
    if paused {
        mr.shared.resume();
    }
    let m = mr_ptr;
    // SAFETY: m is a live SimMr; its C fields are only written here, under
    // the context lock (as rdma-core does after a successful rereg).
    unsafe {
        if flags & REREG_CHANGE_PD != 0 {
            (*m).pd = new_pd;
        }
        if flags & REREG_CHANGE_TRANSLATION != 0 {
            (*m).addr = addr;
            (*m).length = len;
        }
    }
    Ok(())
}

/// `ibv_dereg_mr`.
pub fn dereg(mr_ptr: *mut ibv_mr) -> Result<(), c_int> {
    let (ctx, mr) = get_as(mr_ptr, libc::ENOENT)?;
    // The outbox may still read a posted request's buffer in this MR (a
    // program that deregisters before the completion): copy it now.
    crate::fabric::settle_outbox();
    let mut st = ctx.lock_open()?;
    if !registry::is_live(mr_ptr as usize, Kind::Mr) {
        return Err(libc::EINVAL);
    }
    let info = *mr.shared.info.lock();
    // SAFETY: the MR's PD (perhaps a parent domain) is live: it counts
    // this MR as a user.
    unsafe { &*(mr.mr.pd as *const SimPd) }
        .users
        .fetch_sub(1, Ordering::Relaxed);
    KEYS.remove(mr.shared.key);
    OBJECTS.remove(mr_ptr as usize);
    ctx.dev.give(crate::device::Limit::Mr);
    st.children -= 1;
    drop(st);
    mr.shared.quiesce(DEAD);
    unpin(info.pinned);
    fork::dofork_range(info.addr as *mut c_void, info.len);
    // SAFETY: allocated by Box in `reg`, just unregistered under the lock.
    drop(unsafe { Box::from_raw(mr_ptr as *mut SimMr) });
    Ok(())
}

/// The MR behind `key`, for the data path.
pub fn by_key(key: u32) -> Option<Arc<MrShared>> {
    KEYS.get(key)
}
