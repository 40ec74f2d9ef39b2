//! Objects that are plain children of a context (memory windows, XRC
//! domains, device memory, thread domains, ...): each is a `Box`
//! registered in `registry::OBJECTS` under its kind and context, made and
//! freed under the context's lock; a parent counts its users ([`Users`])
//! and is not destroyed while in use (`EBUSY`, as the kernel's `uverbs`).

use core::ffi::c_int;
use std::sync::atomic::{AtomicU32, Ordering};

use crate::context::{self, CtxState, SimContext};
use crate::registry::{self, Entry, Kind, OBJECTS};

/// A live object of `kind` at `p` and its context.
pub(crate) fn get<T>(p: *mut T, kind: Kind) -> Result<(&'static SimContext, &'static T), c_int> {
    let ctx = context::owner_of(p as usize, kind)?;
    // SAFETY: the registry says a live object of this kind (whose Rust
    // type is T for every caller of this kind) is at this address.
    Ok((ctx, unsafe { &*p }))
}

/// As [`get`], for an object whose C struct carries its context and the
/// kernel's `handle` (read by `head`): one whose context or handle the
/// program changed is `unknown` (EINVAL for most verbs, ENOENT for a
/// destroy), as the kernel, which knows objects by handle, refuses it.
pub(crate) fn get_known<T>(
    p: *mut T,
    kind: Kind,
    head: impl FnOnce(*mut T) -> (*mut verbs_abi::ibv_context, u32),
    unknown: c_int,
) -> Result<(&'static SimContext, &'static T), c_int> {
    let ctx = context::owner_of(p as usize, kind)?;
    let (named, handle) = head(p);
    context::known(ctx, p as usize, named, handle).map_err(|_| unknown)?;
    // SAFETY: as in `get`.
    Ok((ctx, unsafe { &*p }))
}

/// Creates an object under the context's lock: `make` checks and builds it
/// (taking its parents' use counts last, once nothing can fail), then it
/// is boxed and registered.
pub(crate) fn create<T>(
    ctx: &SimContext,
    kind: Kind,
    make: impl FnOnce(&mut CtxState) -> Result<T, c_int>,
) -> Result<*mut T, c_int> {
    create_known(ctx, kind, make, |_| 0)
}

/// As [`create`], the object registered with its handle (`handle_of`), so
/// that [`get_known`] can check it.
pub(crate) fn create_known<T>(
    ctx: &SimContext,
    kind: Kind,
    make: impl FnOnce(&mut CtxState) -> Result<T, c_int>,
    handle_of: impl FnOnce(&T) -> u32,
) -> Result<*mut T, c_int> {
    let mut st = ctx.lock_open()?;
    let obj = make(&mut st)?;
    let handle = handle_of(&obj);
    let raw = Box::into_raw(Box::new(obj));
    st.children += 1;
    OBJECTS.insert(
        raw as usize,
        Entry {
            kind,
            ctx: ctx.addr(),
            handle,
        },
    );
    Ok(raw)
}

/// Destroys an object under its context's lock: `release` refuses
/// (`EBUSY` while in use) or gives back its parents' use counts.
pub(crate) fn destroy<T>(
    p: *mut T,
    kind: Kind,
    release: impl FnOnce(&T) -> Result<(), c_int>,
) -> Result<(), c_int> {
    let ctx = context::owner_of(p as usize, kind)?;
    let mut st = ctx.lock_open()?;
    // Checked again under the lock: a racing destroy got there first.
    if !registry::is_live(p as usize, kind) {
        return Err(libc::EINVAL);
    }
    // SAFETY: live under the context's lock, so not freed meanwhile.
    release(unsafe { &*p })?;
    OBJECTS.remove(p as usize);
    st.children -= 1;
    drop(st);
    // SAFETY: allocated by Box in `create`, just unregistered under the lock.
    drop(unsafe { Box::from_raw(p) });
    Ok(())
}

/// A parent's count of the objects using it.
#[derive(Default)]
pub struct Users(AtomicU32);

impl Users {
    pub fn take(&self) {
        self.0.fetch_add(1, Ordering::Relaxed);
    }

    pub fn give(&self) {
        self.0.fetch_sub(1, Ordering::Relaxed);
    }

    /// `EBUSY` while anything uses the parent.
    pub fn idle(&self) -> Result<(), c_int> {
        if self.0.load(Ordering::Relaxed) > 0 {
            Err(libc::EBUSY)
        } else {
            Ok(())
        }
    }
}
