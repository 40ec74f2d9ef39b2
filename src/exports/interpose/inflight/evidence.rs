//! What is kept of a send source at its post, and how its bytes differ
//! at the completion: a copy of a short source (the exact count), xxh3
//! fingerprints of at most 8 blocks of a longer one (which blocks).

use super::ring;

/// A source of at most this many bytes is copied at the post (an exact
/// count of the bytes that differ); a longer one is fingerprinted per
/// block, `ring::Evidence`'s 8 of them.
pub(super) const COPIED: u32 = 64;

/// The block a source of `len` (more than `COPIED`) bytes is cut into:
/// at most 8 blocks, each a multiple of 64 bytes.
pub(super) fn block_len(len: u32) -> u32 {
    len.div_ceil(8).next_multiple_of(64)
}

/// What is kept of the `len` bytes at `addr` at the post: a copy of up to
/// `COPIED` bytes, else an xxh3 fingerprint per block of `block_len`.
///
/// # Safety
/// The bytes are readable (inside a live MR's virtual range).
pub(super) unsafe fn evidence(addr: u64, len: u32) -> ring::Evidence {
    let mut e = [0u64; 8];
    if len <= COPIED {
        // SAFETY: the caller's contract; `e` holds 64 bytes.
        unsafe {
            std::ptr::copy_nonoverlapping(addr as *const u8, e.as_mut_ptr().cast(), len as usize)
        };
        return e;
    }
    // SAFETY: the caller's contract.
    let bytes = unsafe { std::slice::from_raw_parts(addr as *const u8, len as usize) };
    for (h, block) in e.iter_mut().zip(bytes.chunks(block_len(len) as usize)) {
        *h = xxhash_rust::xxh3::xxh3_64(block);
    }
    e
}

/// How the bytes of a source differ from those at its post.
#[derive(Debug, PartialEq)]
pub(super) enum Diff {
    /// Compared with a copy: `n` bytes, the first at offset `first`.
    Exact { n: u32, first: u32 },
    /// Compared by ibv-sim with the bytes it read when it executed the
    /// request (`sim`): `n` bytes, the first at offset `first`.
    Executed { n: u32, first: u32 },
    /// Compared by fingerprints: `k` of the `of` blocks of `block` bytes,
    /// the first at offset `first` (at most `k * block` bytes).
    Blocks {
        k: u32,
        of: u32,
        block: u32,
        first: u32,
    },
}

impl std::fmt::Display for Diff {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match *self {
            Diff::Exact { n, first } => write!(
                f,
                "{n} byte(s) differ, the first at +{first} (exact: compared with a copy kept at the post)"
            ),
            Diff::Executed { n, first } => write!(
                f,
                "{n} byte(s) differ, the first at +{first} (exact: compared by ibv-sim with the \
                 bytes it read when it executed the request)"
            ),
            Diff::Blocks { k, of, block, first } => write!(
                f,
                "differences within {k} of its {of} blocks of {block} bytes, the first block at \
                 +{first} (at most {} bytes: blocks compared by fingerprint, no copy kept)",
                k * block
            ),
        }
    }
}

/// Do the `len` bytes at `addr` differ from what `kept` holds of them?
///
/// # Safety
/// The bytes are readable.
pub(super) unsafe fn differs(addr: u64, len: u32, kept: &ring::Evidence) -> Option<Diff> {
    // SAFETY: the caller's contract.
    let now = unsafe { std::slice::from_raw_parts(addr as *const u8, len as usize) };
    if len <= COPIED {
        let mut was = [0u8; 64];
        for (w, k) in was.chunks_exact_mut(8).zip(kept) {
            w.copy_from_slice(&k.to_ne_bytes());
        }
        if now == &was[..now.len()] {
            return None;
        }
        let (n, first) = count(now, &was)?;
        return Some(Diff::Exact { n, first });
    }
    let block = block_len(len);
    let blocks = now.chunks(block as usize);
    let of = blocks.len() as u32;
    let mut diff = blocks
        .zip(kept)
        .enumerate()
        .filter(|(_, (b, &h))| xxhash_rust::xxh3::xxh3_64(b) != h);
    let first = diff.next()?.0 as u32 * block;
    Some(Diff::Blocks {
        k: 1 + diff.count() as u32,
        of,
        block,
        first,
    })
}

/// How many bytes of `now` differ from `was` (compared over the shorter),
/// and the offset of the first; `None` when none do.
pub(super) fn count(now: &[u8], was: &[u8]) -> Option<(u32, u32)> {
    let mut diff = now.iter().zip(was).enumerate().filter(|(_, (a, b))| a != b);
    let first = diff.next()?.0 as u32;
    Some((1 + diff.count() as u32, first))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_short_source_is_compared_exactly() {
        let mut buf = [7u8; 64];
        // SAFETY: our own buffer.
        let kept = unsafe { evidence(buf.as_ptr() as u64, 40) };
        // SAFETY: as above.
        assert_eq!(unsafe { differs(buf.as_ptr() as u64, 40, &kept) }, None);
        buf[5] = 0;
        buf[30] = 1;
        buf[50] = 2; // past the source: not counted
                     // SAFETY: as above.
        let d = unsafe { differs(buf.as_ptr() as u64, 40, &kept) }.unwrap();
        assert_eq!(d, Diff::Exact { n: 2, first: 5 });
        assert!(d
            .to_string()
            .starts_with("2 byte(s) differ, the first at +5 (exact"));
    }

    #[test]
    fn a_long_source_is_compared_by_block() {
        let mut buf = vec![3u8; 4096];
        // SAFETY: our own buffer.
        let kept = unsafe { evidence(buf.as_ptr() as u64, 4096) };
        assert_eq!(block_len(4096), 512);
        // SAFETY: as above.
        assert_eq!(unsafe { differs(buf.as_ptr() as u64, 4096, &kept) }, None);
        buf[1000] = 0;
        buf[1001] = 0;
        buf[4095] = 0;
        // SAFETY: as above.
        let d = unsafe { differs(buf.as_ptr() as u64, 4096, &kept) }.unwrap();
        assert_eq!(
            d,
            Diff::Blocks {
                k: 2,
                of: 8,
                block: 512,
                first: 512
            }
        );
        assert!(d
            .to_string()
            .contains("within 2 of its 8 blocks of 512 bytes"));
        assert!(d.to_string().contains("at most 1024 bytes"));
        // An odd length: the last block is short, still compared.
        assert_eq!(block_len(65), 64);
        // SAFETY: as above.
        let kept = unsafe { evidence(buf.as_ptr() as u64, 65) };
        buf[64] = 9;
        // SAFETY: as above.
        let d = unsafe { differs(buf.as_ptr() as u64, 65, &kept) }.unwrap();
        assert_eq!(
            d,
            Diff::Blocks {
                k: 1,
                of: 2,
                block: 64,
                first: 64
            }
        );
    }
}
