//! Contexts: `ibv_open_device` / `ibv_close_device`, the per-context state
//! and lock, the function tables the inline verbs of `verbs.h` call
//! through, and the query verbs.
//!
//! A context is a [`SimContext`]: rdma-core's `struct verbs_context` first
//! (so the `ibv_context` handed out is its last member and
//! `abi_compat == UINTPTR_MAX` marks it extended), the sim's own state
//! after it. Each context has its own lock; nothing is serialised across
//! contexts.

use core::ffi::{c_int, c_void};
use std::sync::Arc;

use parking_lot::{Mutex, MutexGuard};
use verbs_abi::{
    ibv_context, ibv_device, ibv_device_attr, ibv_gid_entry, ibv_port_attr, ibv_values_ex,
    verbs_context, VERBS_ABI_IS_EXTENDED,
};

use crate::device::{self, SimDevice};
use crate::events::{self, AsyncEvent, EventQueue};
use crate::guard;
use crate::registry::{self, Entry, Kind, OBJECTS};

/// Offset of the `ibv_context` inside a `SimContext` (and `verbs_context`).
pub const CONTEXT_OFFSET: usize = core::mem::offset_of!(verbs_context, context);

/// Mutable per-context state, under the context's lock.
pub struct CtxState {
    /// `ibv_close_device` was called; the context only lives on for orphans.
    pub closed: bool,
    /// Live objects created on this context.
    pub children: usize,
    next_handle: u32,
}

impl CtxState {
    /// A new object handle (unique within the context, like the kernel's).
    pub fn handle(&mut self) -> u32 {
        self.next_handle = self.next_handle.wrapping_add(1);
        self.next_handle
    }
}

/// A simulated device context.
#[repr(C)]
pub struct SimContext {
    /// Must be first: programs get `&vctx.context`.
    pub vctx: verbs_context,
    pub dev: &'static SimDevice,
    state: Mutex<CtxState>,
    /// Async events of the context (`async_fd`).
    pub async_q: Arc<EventQueue<AsyncEvent>>,
    /// The command fd (`cmd_fd`): an eventfd, so it is a real descriptor.
    cmd_fd: c_int,
}

// SAFETY: the raw pointers in verbs_context point at the context itself and
// at static device data; all mutable state is behind the mutex.
unsafe impl Sync for SimContext {}
// SAFETY: as above.
unsafe impl Send for SimContext {}

/// Contexts closed while children were still alive: kept (never freed) so
/// the orphans' `context` pointers stay readable, as the sim promises.
static ORPHANED: Mutex<Vec<usize>> = Mutex::new(Vec::new());

impl SimContext {
    pub fn lock(&self) -> MutexGuard<'_, CtxState> {
        self.state.lock()
    }

    /// Locks the context, failing with `EIO` once it was closed.
    pub fn lock_open(&self) -> Result<MutexGuard<'_, CtxState>, c_int> {
        let g = self.state.lock();
        if g.closed {
            return Err(libc::EIO);
        }
        Ok(g)
    }

    /// The `ibv_context *` programs hold.
    pub fn ibv(&self) -> *mut ibv_context {
        core::ptr::addr_of!(self.vctx.context) as *mut ibv_context
    }

    pub fn addr(&self) -> usize {
        self as *const SimContext as usize
    }

    /// Raises an async event on this context.
    pub fn raise(&self, event_type: i32, element: usize) {
        self.async_q.push(AsyncEvent {
            event_type,
            element,
        });
    }
}

/// The sim context behind an `ibv_context *`, if it is a live one.
pub fn from_ibv(ctx: *const ibv_context) -> Result<&'static SimContext, c_int> {
    if ctx.is_null() {
        return Err(libc::EINVAL);
    }
    let sim = (ctx as usize).wrapping_sub(CONTEXT_OFFSET);
    match OBJECTS.get(sim) {
        Some(Entry {
            kind: Kind::Context,
            ..
        }) => {
            // SAFETY: the registry says a SimContext lives at `sim`; contexts
            // are freed only after being removed from the registry.
            Ok(unsafe { &*(sim as *const SimContext) })
        }
        _ => Err(libc::EINVAL),
    }
}

/// The context owning a live object of `kind` at `addr`.
pub fn owner_of(addr: usize, kind: Kind) -> Result<&'static SimContext, c_int> {
    if addr == 0 {
        return Err(libc::EINVAL);
    }
    let ctx = registry::owner(addr, kind).ok_or(libc::EINVAL)?;
    // SAFETY: an object's context outlives it (a context with live
    // children is never freed, only marked closed).
    Ok(unsafe { &*(ctx as *const SimContext) })
}

/// The kernel knows an object by the `handle` its struct carries, in the
/// context the struct names: one whose `context` or `handle` the program
/// changed is unknown there, and every verb on it fails (EINVAL) instead
/// of acting on the object the pointer still points at. `addr` is a live
/// object of `ctx` (its owner in the registry); an object registered
/// without a handle (0) is checked for its context only.
pub fn known(
    ctx: &SimContext,
    addr: usize,
    named: *mut ibv_context,
    handle: u32,
) -> Result<(), c_int> {
    if !core::ptr::eq(named, ctx.ibv()) {
        return Err(libc::EINVAL);
    }
    match registry::handle(addr) {
        Some(0) => Ok(()),
        Some(h) if h == handle => Ok(()),
        _ => Err(libc::EINVAL),
    }
}

/// `ibv_open_device`. `tables` fills the context's function tables and
/// `rx` takes what arrives from the fabric (the callers pass
/// `exports::ops::install` and the data path's, which live above this module).
pub fn open(
    dev: *mut ibv_device,
    tables: fn(&mut verbs_context),
    rx: &'static crate::fabric::Receiver,
) -> Result<*mut ibv_context, c_int> {
    let sim_dev = device::lookup(dev).ok_or(libc::EINVAL)?;
    crate::fork::watch();
    if let Err(msg) = crate::fabric::attach(sim_dev, rx) {
        eprintln!("libibverbs (ibv-sim): {msg}");
        return Err(libc::EPROTO);
    }
    let detach = |e: c_int| {
        crate::fabric::detach();
        e
    };
    let async_q = Arc::new(EventQueue::new().map_err(detach)?);
    let cmd_fd = events::new_eventfd().map_err(detach)?;
    // SAFETY: verbs_context is plain data (function pointers as Options,
    // raw pointers, integers, a pthread mutex whose all-zero state is
    // PTHREAD_MUTEX_INITIALIZER on glibc): all-zero is a valid value.
    let mut vctx: verbs_context = unsafe { core::mem::zeroed() };
    vctx.sz = core::mem::size_of::<verbs_context>();
    tables(&mut vctx);
    let c = &mut vctx.context;
    c.device = dev;
    c.cmd_fd = cmd_fd;
    c.async_fd = async_q.fd();
    c.num_comp_vectors = sim_dev.num_comp_vectors();
    c.abi_compat = VERBS_ABI_IS_EXTENDED;
    let sim = Box::new(SimContext {
        vctx,
        dev: sim_dev,
        state: Mutex::new(CtxState {
            closed: false,
            children: 0,
            next_handle: 0,
        }),
        async_q,
        cmd_fd,
    });
    let raw = Box::into_raw(sim);
    OBJECTS.insert(
        raw as usize,
        Entry {
            kind: Kind::Context,
            ctx: raw as usize,
            handle: 0,
        },
    );
    // SAFETY: raw was just allocated and is valid.
    Ok(unsafe { (*raw).ibv() })
}

/// `ibv_close_device`: closes the fds; frees the context unless children
/// are still alive, in which case it stays allocated (closed) so they can
/// still be read, never freed, like rdma-core's orphans.
pub fn close(ctx: *mut ibv_context) -> Result<(), c_int> {
    let sim = from_ibv(ctx)?;
    let mut st = sim.lock();
    if st.closed {
        return Err(libc::EINVAL);
    }
    st.closed = true;
    sim.async_q.close();
    // SAFETY: closing the context's own cmd fd, once (guarded by `closed`).
    unsafe { libc::close(sim.cmd_fd) };
    let orphans = st.children > 0;
    drop(st);
    crate::fabric::detach();
    if orphans {
        ORPHANED.lock().push(sim.addr());
    } else {
        OBJECTS.remove(sim.addr());
        // SAFETY: the context came from Box::into_raw in `open`, has no
        // children and was just removed from the registry.
        drop(unsafe { Box::from_raw(sim as *const SimContext as *mut SimContext) });
    }
    Ok(())
}

/// `ibv_query_device`.
pub fn query_device(ctx: *mut ibv_context, out: *mut ibv_device_attr) -> Result<(), c_int> {
    let sim = from_ibv(ctx)?;
    if out.is_null() {
        return Err(libc::EINVAL);
    }
    let a = sim.dev.device_attr();
    // SAFETY: out is non-null and points at the caller's ibv_device_attr.
    unsafe { out.write(a) };
    Ok(())
}

/// `ibv_query_port`: fills `len` bytes of the port attributes.
pub fn query_port(
    ctx: *mut ibv_context,
    port: u8,
    out: *mut c_void,
    len: usize,
) -> Result<(), c_int> {
    let sim = from_ibv(ctx)?;
    if out.is_null() {
        return Err(libc::EINVAL);
    }
    let p = sim.dev.port_attr(u32::from(port)).ok_or(libc::EINVAL)?;
    let n = len.min(core::mem::size_of::<ibv_port_attr>());
    // SAFETY: the caller provides len writable bytes at out.
    unsafe {
        core::ptr::copy_nonoverlapping((&p as *const ibv_port_attr).cast::<u8>(), out.cast(), n)
    };
    Ok(())
}

/// One GID table entry (`_ibv_query_gid_ex`): `ENODATA` when empty.
pub fn gid_entry(ctx: *mut ibv_context, port: u32, index: u32) -> Result<ibv_gid_entry, c_int> {
    let sim = from_ibv(ctx)?;
    match sim.dev.gid(port, index)? {
        Some((raw, ty)) => {
            // SAFETY: ibv_gid_entry is plain data; all-zero is valid.
            let mut e: ibv_gid_entry = unsafe { core::mem::zeroed() };
            e.gid.raw = raw;
            e.gid_index = index;
            e.port_num = port;
            e.gid_type = ty;
            e.ndev_ifindex = if sim.dev.is_ethernet() {
                2 + sim.dev.index as u32
            } else {
                0
            };
            Ok(e)
        }
        None => Err(libc::ENODATA),
    }
}

/// All non-empty GID entries of every port (`_ibv_query_gid_table`).
pub fn gid_table(ctx: *mut ibv_context) -> Result<Vec<ibv_gid_entry>, c_int> {
    let sim = from_ibv(ctx)?;
    let mut v = Vec::new();
    for port in 1..=u32::from(sim.dev.phys_ports()) {
        for i in 0..sim.dev.gid_slots() {
            match gid_entry(ctx, port, i) {
                Ok(e) => v.push(e),
                Err(libc::ENODATA) => {}
                Err(e) => return Err(e),
            }
        }
    }
    Ok(v)
}

/// `ibv_query_rt_values_ex`: the device clock (ns, the monotonic clock).
pub fn query_rt_values(ctx: *mut ibv_context, values: *mut ibv_values_ex) -> Result<(), c_int> {
    from_ibv(ctx)?;
    if values.is_null() {
        return Err(libc::EINVAL);
    }
    // SAFETY: values points at the caller's struct.
    let v = unsafe { &mut *values };
    const RAW_CLOCK: u32 = verbs_abi::ibv_values_mask::IBV_VALUES_MASK_RAW_CLOCK as u32;
    if v.comp_mask & !RAW_CLOCK != 0 {
        return Err(libc::EINVAL);
    }
    if v.comp_mask & RAW_CLOCK != 0 {
        let mut ts = libc::timespec {
            tv_sec: 0,
            tv_nsec: 0,
        };
        // SAFETY: plain system call into a local.
        unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut ts) };
        v.raw_clock = ts;
    }
    Ok(())
}

/// Sets errno and returns its value (for verbs returning an errno value).
pub fn fail(e: c_int) -> c_int {
    guard::set_errno(e);
    e
}
