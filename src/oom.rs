//! Running out of memory inside someone else's process.
//!
//! Rust's default answer to a failed allocation is to abort the process
//! ("memory allocation of N bytes failed"): unacceptable for a library that
//! lives in the host program. So:
//!
//! - The shim's own paths that can grow (the reports at close and at exit,
//!   the JSON writer) allocate fallibly (`try_reserve`) and, when memory
//!   runs out, write what they can and say "report truncated: out of
//!   memory".
//! - Every other allocation of the shim's Rust code (a small string, a
//!   table entry, std's own) goes through this allocator: the system's
//!   malloc, and when that fails a request of up to [`RESERVE_MAX`] bytes
//!   is served from a static reserve, so the forwarded call still happens
//!   and the report still runs. The reserve is `.bss`: address space the
//!   process had from the start, no memory until used. It is handed out
//!   once (a bump pointer; what is freed there is not reused), which
//!   bounds what an out-of-memory episode can take from it.
//!
//! An allocation asked for through [`fallibly`] is never served from the
//! reserve: it fails, the caller drops what it could not hold and the
//! report says it is truncated ([`dropped`] counts those).

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::{Cell, UnsafeCell};
use std::sync::atomic::{AtomicUsize, Ordering};

/// Bytes in the reserve.
const RESERVE: usize = 512 * 1024;
/// The largest request the reserve serves: a big buffer that cannot be had
/// must fail (and be asked for fallibly), not drain the reserve.
const RESERVE_MAX: usize = 64 * 1024;

#[repr(C, align(4096))]
struct Arena(UnsafeCell<[u8; RESERVE]>);

// SAFETY: each byte of the arena is handed out once, to one allocation,
// by an atomic bump pointer; no two owners ever share a byte.
unsafe impl Sync for Arena {}

static ARENA: Arena = Arena(UnsafeCell::new([0; RESERVE]));
/// Bytes of the arena handed out.
static USED: AtomicUsize = AtomicUsize::new(0);
/// Fallible requests refused: something a report left out.
static DROPPED: AtomicUsize = AtomicUsize::new(0);

thread_local! {
    /// Set while this thread asks for memory through [`fallibly`].
    static FALLIBLE: Cell<bool> = const { Cell::new(false) };
}

/// How many fallible requests have been refused so far: a report that
/// sees it change while it runs is truncated.
pub fn dropped() -> usize {
    DROPPED.load(Ordering::Relaxed)
}

/// Runs `reserve` (a `try_reserve`) without the reserve behind it: `None`,
/// counted in [`dropped`], when the system has no memory for it.
pub fn fallibly<T, E>(reserve: impl FnOnce() -> Result<T, E>) -> Option<T> {
    let r = quietly(reserve);
    if r.is_none() {
        DROPPED.fetch_add(1, Ordering::Relaxed);
    }
    r
}

/// [`fallibly`] for a request whose failure loses nothing (the caller
/// tries a smaller one): not counted.
pub fn quietly<T, E>(reserve: impl FnOnce() -> Result<T, E>) -> Option<T> {
    without_reserve(reserve).ok()
}

/// Runs `f` with the reserve out of its reach: a failed allocation in it
/// fails (`try_reserve` says so) instead of drawing on the reserve. For
/// code that has its own answer to running out, like the registry (which
/// then leaves the object untracked and counts it): it must not drain the
/// reserve that the reports need.
pub fn without_reserve<R>(f: impl FnOnce() -> R) -> R {
    let was = FALLIBLE.with(|flag| flag.replace(true));
    let r = f();
    FALLIBLE.with(|flag| flag.set(was));
    r
}

/// The reserve, unless the request is a fallible one.
fn fallback(layout: Layout) -> *mut u8 {
    // try_with: a thread being torn down has no flag; it gets the reserve.
    if FALLIBLE.try_with(Cell::get).unwrap_or(false) {
        return std::ptr::null_mut();
    }
    from_reserve(layout)
}

fn arena_start() -> usize {
    ARENA.0.get() as usize
}

fn in_arena(ptr: *mut u8) -> bool {
    let p = ptr as usize;
    p >= arena_start() && p < arena_start() + RESERVE
}

/// A block of the reserve, or null when it cannot hold one.
fn from_reserve(layout: Layout) -> *mut u8 {
    if layout.size() > RESERVE_MAX {
        return std::ptr::null_mut();
    }
    let base = arena_start();
    let mut used = USED.load(Ordering::Relaxed);
    loop {
        let start = (base + used).next_multiple_of(layout.align()) - base;
        let end = start + layout.size().max(1);
        if end > RESERVE {
            return std::ptr::null_mut();
        }
        match USED.compare_exchange_weak(used, end, Ordering::Relaxed, Ordering::Relaxed) {
            // The arena is zeroed and never reused: alloc_zeroed holds too.
            Ok(_) => return (base + start) as *mut u8,
            Err(now) => used = now,
        }
    }
}

/// The shim's allocator: the system's, with the reserve behind it.
pub struct Reserve;

// SAFETY: every block comes from System or from a part of the arena no
// other block has; each is freed by whoever gave it (the arena's never).
unsafe impl GlobalAlloc for Reserve {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        // SAFETY: the caller's layout contract is passed on.
        let p = unsafe { System.alloc(layout) };
        if !p.is_null() {
            return p;
        }
        fallback(layout)
    }

    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        // SAFETY: as above.
        let p = unsafe { System.alloc_zeroed(layout) };
        if !p.is_null() {
            return p;
        }
        fallback(layout)
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        if !in_arena(ptr) {
            // SAFETY: not the arena's, so System's, with this layout.
            unsafe { System.dealloc(ptr, layout) };
        }
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        if !in_arena(ptr) {
            // SAFETY: System's block, with the caller's contract.
            let p = unsafe { System.realloc(ptr, layout, new_size) };
            if !p.is_null() {
                return p;
            }
        }
        // SAFETY: new_size rounded up to the alignment does not overflow
        // (the caller's contract for realloc).
        let new = unsafe { Layout::from_size_align_unchecked(new_size, layout.align()) };
        let p = if in_arena(ptr) {
            // SAFETY: as for alloc.
            unsafe { self.alloc(new) }
        } else {
            fallback(new)
        };
        if !p.is_null() {
            // SAFETY: both blocks hold at least the smaller size; they are
            // distinct allocations.
            unsafe {
                std::ptr::copy_nonoverlapping(ptr, p, layout.size().min(new_size));
                self.dealloc(ptr, layout);
            }
        }
        p
    }
}

#[global_allocator]
static ALLOCATOR: Reserve = Reserve;

/// `s` as a new `String`, or `None` when there is no memory for it.
pub fn try_string(s: &str) -> Option<String> {
    let mut out = String::new();
    fallibly(|| out.try_reserve_exact(s.len()))?;
    out.push_str(s);
    Some(out)
}

/// Text built without ever aborting: each write reserves its room first,
/// and once a reservation fails the rest is dropped and the text is marked
/// truncated.
#[derive(Default)]
pub struct Text {
    pub text: String,
    pub truncated: bool,
}

impl std::fmt::Write for Text {
    fn write_str(&mut self, s: &str) -> std::fmt::Result {
        if self.truncated {
            return Ok(());
        }
        if fallibly(|| self.text.try_reserve(s.len())).is_none() {
            self.truncated = true;
            return Ok(());
        }
        self.text.push_str(s);
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_reserve_serves_small_requests_and_refuses_big_ones() {
        let small = Layout::from_size_align(100, 16).unwrap();
        let a = from_reserve(small);
        let b = from_reserve(small);
        assert!(!a.is_null() && !b.is_null() && a != b);
        assert_eq!(a as usize % 16, 0);
        assert!(in_arena(a) && in_arena(b));
        assert!((b as usize).abs_diff(a as usize) >= 100);
        let big = Layout::from_size_align(RESERVE_MAX + 1, 8).unwrap();
        assert!(from_reserve(big).is_null());
        // Realloc moves an arena block out, contents kept.
        // SAFETY: a is a live block of `small`; the new one is freed below.
        unsafe {
            a.write_bytes(7, 100);
            let c = Reserve.realloc(a, small, 200);
            assert!(!c.is_null());
            assert_eq!(*c.add(99), 7);
            Reserve.dealloc(c, Layout::from_size_align(200, 16).unwrap());
        }
    }

    #[test]
    fn text_stops_at_the_first_failure() {
        use std::fmt::Write as _;
        let mut t = Text::default();
        write!(t, "a{}", 1).unwrap();
        assert_eq!((t.text.as_str(), t.truncated), ("a1", false));
        assert_eq!(try_string("x").as_deref(), Some("x"));
    }
}
