//! The trace file's mapping and the producer side of its rings.
//!
//! Each thread claims a ring (one CAS on its owner word, on its first
//! record) and is the only one to write records there, so a record is a
//! few stores into the shared mapping: the record's commit word cleared,
//! the fields and text written, the commit word set (release), the ring's
//! head advanced. Records lie back to back, each its used length (about
//! 80 bytes for a device verb, not a 256-byte slot): the writer copies a
//! ring out in at most two pieces, and a ring's lines are each written
//! once per lap. The writer thread only reads below the head and advances
//! the tail. A thread that exits hands its ring on. In `block` mode the
//! last SHARED_RINGS rings are no thread's: a thread that finds every
//! other ring taken writes to one of them, taking turns with the others
//! under the ring's busy word (a lock then), so no record is lost to the
//! number of threads.
//!
//! The mapping covers the whole file, but only file space that is
//! allocated is ever touched: the header at open, a ring as it fills
//! (`grow`: a CHUNK at a time, `fallocate`, before the first record
//! there), so a full disk is a record dropped and counted, never a
//! SIGBUS, and a large ring costs disk only as far as it is used.

use std::fmt;
use std::sync::atomic::{fence, AtomicU64, Ordering};

use trace_format::{header, ring as meta, slot, FLAG_TRUNCATED, RECORD_MAX, SLOT_TEXT, TEXT_MAX};

mod claim;
mod mapping;
mod shared;
mod space;

use claim::{my_ring, with_my_ring, Busy, GUEST};
pub use mapping::{fd_is_ours, mapping, open, path, store_clock, Mapping, FD};
use space::grow;

/// Rings threads share in `block` mode (the last ones).
pub const SHARED_RINGS: usize = 4;

/// Formats straight into a record's text, cutting what does not fit.
struct SlotText {
    at: *mut u8,
    len: usize,
    cut: bool,
}

impl fmt::Write for SlotText {
    fn write_str(&mut self, s: &str) -> fmt::Result {
        let n = s.len().min(TEXT_MAX - self.len);
        // SAFETY: len + n <= TEXT_MAX: inside the record's text.
        unsafe { std::ptr::copy_nonoverlapping(s.as_ptr(), self.at.add(self.len), n) };
        self.len += n;
        self.cut |= n < s.len();
        Ok(())
    }
}

/// Writes one record into this thread's ring.
pub fn record(
    start_ns: u64,
    dur_ns: u64,
    flags: u16,
    errno: i32,
    call: fmt::Arguments<'_>,
    result: fmt::Arguments<'_>,
) {
    let Some(m) = mapping() else { return };
    let written = with_my_ring(&m, |ring, tid| {
        // SAFETY: `with_my_ring` passes a ring of the file.
        unsafe { write(&m, ring, tid, start_ns, dur_ns, flags, errno, call, result) }
    });
    if !written {
        lost(&m);
    }
}

/// Writes one binary record into this thread's ring: `verb`'s id, and the
/// payload `encode` writes (see `capture`) at the pointer it gets, with
/// room for the length it gets; it returns the payload's length and
/// whether it was cut. Inlined into its callers (a call and an event): one
/// frame less.
#[inline(always)]
pub fn record_bin(
    start: u64,
    dur: u64,
    flags: u16,
    errno: i32,
    verb: u16,
    encode: impl FnOnce(*mut u8, usize) -> (usize, bool),
) {
    let Some(m) = mapping() else { return };
    // `with_my_ring` spelt out: its closure is not always inlined here.
    let Some((ring, tid)) = my_ring(&m) else {
        return lost(&m);
    };
    let Some(_busy) = Busy::enter(&m, ring, tid) else {
        return lost(&m);
    };
    let ring = ring & !(GUEST as usize);
    // SAFETY: `my_ring` gives a ring of the file (its GUEST bit cleared).
    unsafe {
        write_with(
            &m,
            ring,
            tid,
            start,
            dur,
            flags,
            errno,
            #[inline(always)]
            |at, flags| {
                // `at` is the record's text area, TEXT_MAX bytes.
                let (len, cut) = encode(at, TEXT_MAX);
                if cut {
                    *flags |= FLAG_TRUNCATED;
                }
                (verb, len as u16)
            },
        )
    };
}

/// A record with no ring to go to.
#[cold]
fn lost(m: &Mapping) {
    // SAFETY: `header::LOST_NO_RING` is an 8-aligned header word.
    unsafe { m.word(header::LOST_NO_RING) }.fetch_add(1, Ordering::Relaxed);
}

/// Writes one text record.
///
/// # Safety
///
/// `ring` is below `config::RINGS` and this thread's to write now.
#[allow(clippy::too_many_arguments)]
#[inline(always)]
unsafe fn write(
    m: &Mapping,
    ring: usize,
    tid: u32,
    start_ns: u64,
    dur_ns: u64,
    flags: u16,
    errno: i32,
    call: fmt::Arguments<'_>,
    result: fmt::Arguments<'_>,
) {
    // SAFETY: `ring` as the caller's contract says; SlotText keeps to
    // the text area's TEXT_MAX bytes.
    unsafe {
        write_with(m, ring, tid, start_ns, dur_ns, flags, errno, |at, flags| {
            let mut text = SlotText {
                at,
                len: 0,
                cut: false,
            };
            let _ = fmt::write(&mut text, call);
            let call_len = text.len;
            let _ = fmt::write(&mut text, result);
            if text.cut {
                *flags |= FLAG_TRUNCATED;
            }
            (call_len as u16, text.len as u16)
        })
    };
}

/// Writes one record: `fill` writes the text area (at most TEXT_MAX bytes
/// at its pointer) and returns the CALL_LEN and TEXT_LEN fields (TEXT_LEN
/// at most TEXT_MAX).
///
/// # Safety
///
/// `ring` is below `config::RINGS` and this thread's to write now (its
/// owner's, or held under a shared ring's busy lock).
#[allow(clippy::too_many_arguments)]
#[inline(always)]
unsafe fn write_with(
    m: &Mapping,
    ring: usize,
    tid: u32,
    start_ns: u64,
    dur_ns: u64,
    flags: u16,
    errno: i32,
    fill: impl FnOnce(*mut u8, &mut u16) -> (u16, u16),
) {
    // SAFETY: `ring` is a ring of the file (the caller's contract) and
    // HEAD, LIMIT and LOST are its words.
    let (head_word, limit, lost) = unsafe {
        (
            m.ring_word(ring, meta::HEAD),
            m.ring_word(ring, meta::LIMIT),
            m.ring_word(ring, meta::LOST),
        )
    };
    // Only this thread moves the head.
    let head = head_word.load(Ordering::Relaxed);
    // `ring_next` without its division (the size is a power of two).
    let left = m.size as u64 - (head & (m.size as u64 - 1));
    let pos = if left < RECORD_MAX as u64 {
        head + left
    } else {
        head
    };
    // Room for the longest record (its length is known once written),
    // in the ring and in the file: below the ring's limit (`make_room`).
    if pos + RECORD_MAX as u64 > limit.load(Ordering::Relaxed)
        // SAFETY: `ring` as above.
        && !unsafe { make_room(m.base, m.size, ring, pos) }
    {
        lost.fetch_add(1, Ordering::Relaxed);
        return;
    }
    if pos & (m.size as u64 - 1) == 0 {
        // A new lap: where the last one's records end, for the writer
        // (published by the head's release below).
        // SAFETY: as for HEAD above.
        unsafe { m.ring_word(ring, meta::WRAP) }.store(head, Ordering::Relaxed);
    }
    let s = m.at(ring, pos);
    // SAFETY: RECORD_MAX bytes from `s` are this thread's until the head
    // passes them (the writer reads only below the head; a record never
    // wraps, see `ring_next`); every offset is aligned for its type
    // (positions are multiples of 8).
    let len = unsafe {
        let seq = &*s.add(slot::SEQ).cast::<AtomicU64>();
        // Uncommitted first: a crash halfway leaves no half-old record.
        seq.store(0, Ordering::Relaxed);
        fence(Ordering::Release);
        // The fields the text does not change first, then the text.
        s.add(slot::START_NS).cast::<u64>().write(start_ns);
        s.add(slot::DUR_NS).cast::<u64>().write(dur_ns);
        s.add(slot::TID).cast::<u32>().write(tid);
        s.add(slot::ERRNO).cast::<i32>().write(errno);
        s.add(slot::RING).cast::<u16>().write(ring as u16);
        // `fill` adds to the flags where they lie.
        let flags_at = s.add(slot::FLAGS).cast::<u16>();
        flags_at.write(flags);
        let (call_len, text_len) = fill(s.add(SLOT_TEXT), &mut *flags_at);
        s.add(slot::CALL_LEN).cast::<u16>().write(call_len);
        s.add(slot::TEXT_LEN).cast::<u16>().write(text_len);
        seq.store(pos + 1, Ordering::Release);
        // `record_len` without its bound: `fill` keeps to TEXT_MAX.
        debug_assert!(text_len as usize <= TEXT_MAX);
        ((SLOT_TEXT + text_len as usize + 7) & !7) as u64
    };
    head_word.store(pos + len, Ordering::Release);
    // Every half ring written: the writer copies the ring out now, on its
    // own core if there is one, rather than this thread when the ring is
    // full (one system call per half ring at most, none while the writer
    // is at work). A half-ring mark is crossed when its bit changes from
    // the old head to the new (a record and the gap before a lap are
    // shorter than half a ring).
    if ((head ^ (pos + len)) & (m.size / 2) as u64) != 0 {
        super::writer::wake();
    }
}

/// A record at `pos` would pass the ring's limit (`meta::LIMIT`, kept by
/// its writer: how far it may write with no other check, the lesser of
/// the tail's lap end and the file space allocated): allocates file space
/// (`grow`), waits for the tail in `block` mode (`writer::room`), and sets
/// the limit anew; `false` to drop the record.
///
/// # Safety
///
/// `ring` is below `config::RINGS` and this thread's to write now.
#[cold]
#[inline(never)]
unsafe fn make_room(base: *mut u8, size: usize, ring: usize, pos: u64) -> bool {
    let m = Mapping { base, size };
    let need = pos + RECORD_MAX as u64;
    // SAFETY: `ring` is a ring of the file (the caller's contract);
    // ALLOC, TAIL and LIMIT are its words.
    let (alloc, tail, limit) = unsafe {
        (
            m.ring_word(ring, meta::ALLOC),
            m.ring_word(ring, meta::TAIL),
            m.ring_word(ring, meta::LIMIT),
        )
    };
    let off = pos & (size as u64 - 1);
    if off + RECORD_MAX as u64 > alloc.load(Ordering::Relaxed)
        // SAFETY: `ring` as above.
        && !unsafe { grow(base, size, ring, off) }
    {
        return false;
    }
    if need - tail.load(Ordering::Acquire) > size as u64
        // SAFETY: `ring` as above.
        && !unsafe { room(base, size, ring, pos) }
    {
        return false;
    }
    // A ring allocated short of its end is in its first lap (see `grow`):
    // its positions are offsets.
    let allocated = alloc.load(Ordering::Relaxed);
    let by_file = if allocated >= size as u64 {
        u64::MAX
    } else {
        allocated
    };
    let by_tail = tail.load(Ordering::Acquire) + size as u64;
    limit.store(by_tail.min(by_file), Ordering::Relaxed);
    true
}

/// `writer::room`, the mapping passed in registers (a `&Mapping` would
/// make every record put it in memory).
///
/// # Safety
///
/// `ring` is below `config::RINGS`.
#[cold]
#[inline(never)]
unsafe fn room(base: *mut u8, size: usize, ring: usize, pos: u64) -> bool {
    // SAFETY: `ring` as the caller's contract says.
    unsafe { super::writer::room(&Mapping { base, size }, ring, pos) }
}

/// In a forked child: the parent's rings are no thread's of this one,
/// and its mapping and descriptor are dropped (the child's copies; the
/// parent's file is untouched).
pub fn after_fork_in_child() {
    claim::forked();
    mapping::drop_in_child();
}
