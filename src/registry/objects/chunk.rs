//! A shard's slab of records (one growing mapping), and allocation failure
//! (the once-only warning, and the failure the unit tests inject).

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
    let errno = crate::errno::Errno::save();
    out_of_memory_warning();
    errno.restore();
}

fn out_of_memory_warning() {
    static WARNED: std::sync::Once = std::sync::Once::new();
    WARNED.call_once(|| {
        crate::log!(
            crate::log::Level::Warn,
            "out of memory for the leak audit's table: some objects are not tracked"
        );
    });
}

/// A shard's slab: its records by index, in one anonymous mapping that
/// doubles with `mremap` (the kernel moves the pages: nothing is copied, and
/// no second copy exists even for a moment). Pages are touched only as
/// records are used, so the slab's unused tail costs address space, not
/// memory. One buffer keeps a context's records, which its list links
/// newest first, at descending addresses, so that a close's walk streams
/// through memory (with 1 KiB chunks scattered over the heap it ran 3x
/// slower at 1M).
pub(super) struct Slab {
    ptr: std::ptr::NonNull<Rec>,
    /// Records mapped.
    cap: usize,
    /// Records handed out.
    len: usize,
}

// SAFETY: a Slab owns its mapping exclusively (like a Vec); it is only
// reached through the shard's mutex.
unsafe impl Send for Slab {}

/// Records in a slab's first mapping: one page.
const FIRST: usize = 4096 / std::mem::size_of::<Rec>();

impl Slab {
    pub(super) const fn new() -> Slab {
        Slab {
            ptr: std::ptr::NonNull::dangling(),
            cap: 0,
            len: 0,
        }
    }

    /// Appends a zeroed record; its index. None when out of memory.
    pub(super) fn push(&mut self) -> Option<u32> {
        if self.len == self.cap && !self.grow() {
            return None;
        }
        self.len += 1;
        Some(self.len as u32 - 1)
    }

    /// errno is left as it was (the registry's fast path does not save it).
    #[cold]
    fn grow(&mut self) -> bool {
        let errno = crate::errno::Errno::save();
        let grown = self.remap();
        errno.restore();
        grown
    }

    fn remap(&mut self) -> bool {
        let size = std::mem::size_of::<Rec>();
        let cap = (self.cap * 2).max(FIRST);
        if no_memory() {
            return false;
        }
        let p = if self.cap == 0 {
            // SAFETY: a fresh private anonymous mapping; no memory of ours
            // is touched.
            unsafe {
                libc::mmap(
                    std::ptr::null_mut(),
                    cap * size,
                    libc::PROT_READ | libc::PROT_WRITE,
                    libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
                    -1,
                    0,
                )
            }
        } else {
            // SAFETY: our own mapping of `self.cap * size` bytes; on success
            // the old address is no longer used (the pointer is replaced).
            unsafe {
                libc::mremap(
                    self.ptr.as_ptr().cast(),
                    self.cap * size,
                    cap * size,
                    libc::MREMAP_MAYMOVE,
                )
            }
        };
        if p == libc::MAP_FAILED {
            return false;
        }
        match std::ptr::NonNull::new(p.cast::<Rec>()) {
            Some(ptr) => {
                self.ptr = ptr;
                self.cap = cap;
                true
            }
            None => false,
        }
    }

    /// Record `i`, with no bounds check (the hot paths).
    ///
    /// # Safety
    ///
    /// `i` was handed out by [`Slab::push`] (so it is below `len`).
    #[inline(always)]
    pub(super) unsafe fn get(&self, i: u32) -> &Rec {
        debug_assert!((i as usize) < self.len);
        // SAFETY: `i` is below len (the caller's contract), so inside the
        // mapping (page-aligned, so 64-byte aligned); zeroed or written
        // bytes are a valid Rec (integers only).
        unsafe { &*self.ptr.as_ptr().add(i as usize) }
    }

    /// Record `i`, to change, with no bounds check.
    ///
    /// # Safety
    ///
    /// As for [`Slab::get`].
    #[inline(always)]
    pub(super) unsafe fn get_mut(&mut self, i: u32) -> &mut Rec {
        debug_assert!((i as usize) < self.len);
        // SAFETY: as in get(); &mut self makes the access exclusive.
        unsafe { &mut *self.ptr.as_ptr().add(i as usize) }
    }
}

impl Drop for Slab {
    fn drop(&mut self) {
        if self.cap > 0 {
            // SAFETY: our own mapping, not used after this.
            unsafe {
                libc::munmap(
                    self.ptr.as_ptr().cast(),
                    self.cap * std::mem::size_of::<Rec>(),
                )
            };
        }
    }
}
