//! Slab chunks: one zeroed allocation of records followed by their list
//! links; allocation failure (the once-only warning, and the failure the
//! unit tests inject).

use std::alloc::{alloc_zeroed, Layout};

use super::record::Rec;

#[cfg(test)]
thread_local! {
    /// Unit tests: every registry allocation of this thread fails.
    pub(super) static NO_MEMORY: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
}

/// Fault injection for the unit tests (always false in the library).
#[inline(always)]
pub(super) fn no_memory() -> bool {
    #[cfg(test)]
    return NO_MEMORY.with(|f| f.get());
    #[cfg(not(test))]
    false
}

#[cold]
pub(super) fn out_of_memory() {
    static WARNED: std::sync::Once = std::sync::Once::new();
    WARNED.call_once(|| {
        crate::log!(
            crate::log::Level::Warn,
            "out of memory for the leak audit's table: some objects are not tracked"
        );
    });
}

/// A record's place in its context's list: slab indices of its
/// neighbours, `NIL` at the ends, `prev` `UNLISTED` when in no list (the
/// table's sentinels).
#[derive(Clone, Copy, Default)]
#[repr(C)]
pub(super) struct Link {
    pub(super) prev: u32,
    pub(super) next: u32,
}

const _: () = assert!(std::mem::size_of::<Link>() == 8);

/// Types a chunk may be made of by zeroing memory: integers only.
/// A slab chunk: `len` records, then their `len` links, in one zeroed
/// allocation (one allocation per chunk, as before the links existed, so
/// the heap does not fragment between records and links).
pub(super) struct Chunk {
    ptr: std::ptr::NonNull<u8>,
    pub(super) len: usize,
}

// SAFETY: a Chunk owns its allocation exclusively (like a Box<[u8]>); it is
// only reached through the shard's mutex.
unsafe impl Send for Chunk {}

impl Chunk {
    fn layout(len: usize) -> Option<Layout> {
        let (layout, _) = Layout::array::<Rec>(len)
            .ok()?
            .extend(Layout::array::<Link>(len).ok()?)
            .ok()?;
        Some(layout)
    }

    /// None when out of memory.
    pub(super) fn new(len: usize) -> Option<Chunk> {
        let layout = Self::layout(len)?;
        if no_memory() {
            return None;
        }
        // SAFETY: the layout has a non-zero size (len > 0).
        let ptr = std::ptr::NonNull::new(unsafe { alloc_zeroed(layout) })?;
        Some(Chunk { ptr, len })
    }

    pub(super) fn recs(&self) -> &[Rec] {
        // SAFETY: the allocation starts with `len` records (64-aligned, as
        // the layout says); all-zero bytes are a valid Rec (integers only).
        unsafe { std::slice::from_raw_parts(self.ptr.as_ptr().cast::<Rec>(), self.len) }
    }

    pub(super) fn recs_mut(&mut self) -> &mut [Rec] {
        // SAFETY: as in recs(); &mut self makes the access exclusive.
        unsafe { std::slice::from_raw_parts_mut(self.ptr.as_ptr().cast::<Rec>(), self.len) }
    }

    pub(super) fn links(&self) -> &[Link] {
        // SAFETY: the `len` links follow the records (64 * len bytes in,
        // 4-aligned); all-zero bytes are a valid Link (integers only).
        unsafe {
            std::slice::from_raw_parts(
                self.ptr.as_ptr().add(64 * self.len).cast::<Link>(),
                self.len,
            )
        }
    }

    pub(super) fn links_mut(&mut self) -> &mut [Link] {
        // SAFETY: as in links(); &mut self makes the access exclusive.
        unsafe {
            std::slice::from_raw_parts_mut(
                self.ptr.as_ptr().add(64 * self.len).cast::<Link>(),
                self.len,
            )
        }
    }
}

impl Drop for Chunk {
    fn drop(&mut self) {
        if let Some(layout) = Self::layout(self.len) {
            // SAFETY: allocated in Chunk::new with this very layout.
            unsafe { std::alloc::dealloc(self.ptr.as_ptr(), layout) };
        }
    }
}
