//! Slab chunks: fixed-size zeroed allocations of records; allocation
//! failure (the once-only warning, and the failure the unit tests inject).

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

/// Records per slab chunk: 16 records, 1 KiB. Fixed-size chunks make a
/// slab index's chunk a shift and its offset a mask, and waste at most one
/// partly used chunk per shard (256 shards: at most 256 KiB in all, about
/// 1.3 bytes an object at 100,000 live; 4 KiB chunks cost 5).
pub(super) const CHUNK: usize = 16;
pub(super) const CHUNK_SHIFT: u32 = CHUNK.trailing_zeros();

/// A slab chunk: [`CHUNK`] records in one zeroed allocation.
pub(super) struct Chunk(Box<[Rec; CHUNK]>);

impl Chunk {
    /// None when out of memory.
    pub(super) fn new() -> Option<Chunk> {
        let layout = Layout::new::<[Rec; CHUNK]>();
        if no_memory() {
            return None;
        }
        // SAFETY: the layout has a non-zero size.
        let ptr = unsafe { alloc_zeroed(layout) }.cast::<[Rec; CHUNK]>();
        if ptr.is_null() {
            return None;
        }
        // SAFETY: a fresh allocation of this very layout (the global
        // allocator's, which Box frees with), and all-zero bytes are a valid
        // Rec (integers only).
        Some(Chunk(unsafe { Box::from_raw(ptr) }))
    }

    #[inline(always)]
    pub(super) fn recs(&self) -> &[Rec; CHUNK] {
        &self.0
    }

    #[inline(always)]
    pub(super) fn recs_mut(&mut self) -> &mut [Rec; CHUNK] {
        &mut self.0
    }
}
