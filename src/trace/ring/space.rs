//! The trace file's space for a ring as it fills: allocated a CHUNK at a
//! time (`fallocate`, or zeros written), its pages faulted in
//! (`MADV_POPULATE_WRITE`), and at a full disk a record dropped and the
//! trace stopped for space, never a SIGBUS.

use std::sync::atomic::Ordering;

use trace_format::{ring as meta, HEADER_SIZE, RECORD_MAX};

use super::Mapping;
use crate::trace::writer;

/// How much of a ring's file space `grow` allocates at a time: the
/// default ring (1 MiB) whole at its first record, as its pages were
/// faulted in before; a larger one as it fills.
const CHUNK: u64 = 1 << 20;
const PAGE: u64 = 4096;

/// Allocates `len` bytes of the file from `at` (`fallocate`; where the
/// file system has none, zeros written there: only space no record uses
/// yet). Fails with the file system's error, ENOSPC when it is full.
pub(super) fn reserve(fd: i32, at: u64, len: u64) -> std::io::Result<()> {
    // SAFETY: the trace file's own descriptor; only allocates.
    if unsafe { libc::fallocate(fd, 0, at as libc::off_t, len as libc::off_t) } == 0 {
        return Ok(());
    }
    let e = std::io::Error::last_os_error();
    if !matches!(e.raw_os_error(), Some(libc::EOPNOTSUPP | libc::ENOSYS)) {
        return Err(e);
    }
    static ZEROS: [u8; 64 << 10] = [0; 64 << 10];
    let mut done = 0;
    while done < len {
        let n = (len - done).min(ZEROS.len() as u64) as usize;
        // SAFETY: writes `n` bytes of a static buffer to our own file, in
        // a range no record lies in yet.
        let w = unsafe { libc::pwrite(fd, ZEROS.as_ptr().cast(), n, (at + done) as libc::off_t) };
        if w <= 0 {
            let e = std::io::Error::last_os_error();
            if w < 0 && e.kind() == std::io::ErrorKind::Interrupted {
                continue;
            }
            return Err(if w == 0 {
                std::io::Error::from_raw_os_error(libc::ENOSPC)
            } else {
                e
            });
        }
        done += w as u64;
    }
    Ok(())
}

/// Room in the file for a record at offset `off` of `ring`: allocates the
/// ring's file space past what it has, a CHUNK (at least up to the
/// record), or at a full disk just the record's pages; `false` when not
/// even those can be had (the record is dropped and counted, and the
/// trace says once that it stopped for space). Only the ring's writer
/// calls it (its owner, or the holder of a shared ring's lock).
///
/// # Safety
///
/// `ring` is below `config::RINGS`.
#[cold]
#[inline(never)]
pub(super) unsafe fn grow(base: *mut u8, size: usize, ring: usize, off: u64) -> bool {
    let m = Mapping { base, size };
    // SAFETY: `ring` is a ring of the file (the caller's contract);
    // `meta::ALLOC` is one of its words.
    let alloc = unsafe { m.ring_word(ring, meta::ALLOC) };
    let have = alloc.load(Ordering::Relaxed);
    let need = off + RECORD_MAX as u64;
    if need <= have {
        return true;
    }
    if writer::out_of_space() {
        return false;
    }
    let errno = crate::errno::Errno::save();
    let grown = grow_to(&m, ring, have, need);
    if let Some(to) = grown {
        alloc.store(to, Ordering::Relaxed);
    }
    errno.restore();
    grown.is_some()
}

fn grow_to(m: &Mapping, ring: usize, have: u64, need: u64) -> Option<u64> {
    let size = m.size as u64;
    let fd = writer::descriptor()?;
    let ring_at = (HEADER_SIZE + ring * m.size) as u64;
    // Past `size - RECORD_MAX` the whole ring: a ring whose next record
    // may start its next lap is allocated to its end (so a ring in its
    // second lap is allocated whole).
    let whole = |to: u64| {
        if to > size - RECORD_MAX as u64 {
            size
        } else {
            to
        }
    };
    let least = whole(need.next_multiple_of(PAGE).min(size));
    let want = whole((have + CHUNK).max(least).min(size));
    let to = match reserve(fd, ring_at + have, want - have) {
        Ok(()) => want,
        Err(_) if least < want && reserve(fd, ring_at + have, least - have).is_ok() => least,
        Err(e) => {
            writer::no_space(&e);
            return None;
        }
    };
    populate(m, ring, have, to);
    Some(to)
}

/// Faults in the pages of `[from, to)` of the ring, allocated just now: a
/// first write to each page of a shared file mapping is a page fault (a
/// few microseconds), which would otherwise land on every 16th record.
/// Where the advice is not known (Linux before 5.14) or fails, nothing:
/// the records fault the pages in themselves (never a page of unallocated
/// space: a full disk would make that SIGBUS).
fn populate(m: &Mapping, ring: usize, from: u64, to: u64) {
    const MADV_POPULATE_WRITE: i32 = 23;
    let ring_start = m.at(ring, 0) as usize;
    // Whole pages: a page holding any allocated byte is allocated whole.
    let start = (ring_start + from as usize) & !(PAGE as usize - 1);
    let end = (ring_start + to as usize).next_multiple_of(PAGE as usize);
    // SAFETY: pages of the live mapping, inside the file's allocated
    // space; the advice only faults them in.
    unsafe { libc::madvise(start as *mut libc::c_void, end - start, MADV_POPULATE_WRITE) };
}
