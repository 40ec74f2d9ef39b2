//! Traces built byte by byte and read back: records, laps, the drained
//! area, damage.

use super::*;

/// Bytes a test record takes.
const REC: u64 = 48;

/// A file with one ring of 4 units (512 bytes), the records numbered
/// `drained` copied out, those numbered `in_ring` written in the ring
/// (record n at position `pos(n)`, wrapping as the shim does).
fn file(drained: &[u64], in_ring: &[u64], tail: u64) -> Vec<u8> {
    let slots = 4;
    let end = rings_end(1, slots);
    let rec = record_len(7);
    assert_eq!(rec as u64, REC);
    let mut b = vec![0u8; end + drained.len() * rec];
    b[..8].copy_from_slice(&MAGIC);
    b[header::VERSION..header::VERSION + 4].copy_from_slice(&VERSION.to_le_bytes());
    b[header::RINGS..header::RINGS + 4].copy_from_slice(&1u32.to_le_bytes());
    b[header::SLOTS..header::SLOTS + 4].copy_from_slice(&(slots as u32).to_le_bytes());
    b[header::SLOT_SIZE..header::SLOT_SIZE + 4].copy_from_slice(&(RING_UNIT as u32).to_le_bytes());
    let de = (end + drained.len() * rec) as u64;
    b[header::DRAINED_END..header::DRAINED_END + 8].copy_from_slice(&de.to_le_bytes());
    let meta = header::RINGS_META;
    b[meta + ring::TAIL..meta + ring::TAIL + 8].copy_from_slice(&pos(tail).to_le_bytes());
    let put = |b: &mut Vec<u8>, at: usize, n: u64| {
        let seq = pos(n);
        b[at..at + 8].copy_from_slice(&(seq + 1).to_le_bytes());
        b[at + slot::START_NS..at + slot::START_NS + 8].copy_from_slice(&n.to_le_bytes());
        let text = b"f(x=1)0";
        b[at + SLOT_TEXT..at + SLOT_TEXT + text.len()].copy_from_slice(text);
        b[at + slot::CALL_LEN..at + slot::CALL_LEN + 2].copy_from_slice(&6u16.to_le_bytes());
        b[at + slot::TEXT_LEN..at + slot::TEXT_LEN + 2].copy_from_slice(&7u16.to_le_bytes());
    };
    for (i, &n) in drained.iter().enumerate() {
        put(&mut b, end + i * rec, n);
    }
    for &n in in_ring {
        put(&mut b, HEADER_SIZE + (pos(n) % 512) as usize, n);
    }
    b
}

/// Record n's position in a 512-byte ring of REC-byte records.
fn pos(n: u64) -> u64 {
    let mut p = 0;
    for _ in 0..n {
        p = ring_next(p, 512) + REC;
    }
    ring_next(p, 512)
}

fn numbers(t: &Trace) -> Vec<u64> {
    t.records.iter().map(|r| r.start_ns).collect()
}

#[test]
fn drained_and_ring_records_are_merged_once_each() {
    // 0..=3 drained; 2 and 3 also still in the ring (a crash between
    // the copy and the tail update); 4 and 5 only in the ring.
    let t = decode(&file(&[0, 1, 2, 3], &[2, 3, 4, 5], 2)).unwrap();
    assert_eq!(numbers(&t), [0, 1, 2, 3, 4, 5]);
    assert_eq!(t.records[0].name(), "f");
    assert_eq!(t.records[0].call, "f(x=1)");
    assert_eq!(t.records[0].result, "0");
}

/// Records past the ring's end start again at its start: 6 records
/// fill the first lap (a RECORD_MAX no longer fits after them); the
/// first lap's last record, drained, is still there (stale).
#[test]
fn a_ring_is_read_across_its_wrap() {
    assert_eq!(pos(6), 512);
    let t = decode(&file(&[0, 1, 2, 3, 4, 5], &[5, 6, 7, 8], 6)).unwrap();
    assert_eq!(numbers(&t), [0, 1, 2, 3, 4, 5, 6, 7, 8]);
}

#[test]
fn uncommitted_and_misplaced_records_end_the_ring() {
    let mut b = file(&[], &[0, 1, 2], 0);
    // Record 1 being written: its commit word is cleared first.
    let at = HEADER_SIZE + pos(1) as usize;
    b[at..at + 8].copy_from_slice(&0u64.to_le_bytes());
    let t = decode(&b).unwrap();
    assert_eq!(numbers(&t), [0]);
    // A stale record of an earlier lap (its position 512 bytes back).
    let mut b = file(&[], &[0, 1, 2], 0);
    let at = HEADER_SIZE + pos(1) as usize;
    b[at..at + 8].copy_from_slice(&(pos(1) + 1 + 512).to_le_bytes());
    assert_eq!(numbers(&decode(&b).unwrap()), [0]);
    assert!(decode(b"not a trace").is_err());
}

/// A source of `size` bytes: `prefix`, then zeros (a sparse file),
/// counting the bytes read.
struct Sparse {
    prefix: Vec<u8>,
    size: u64,
    read: std::cell::Cell<u64>,
}

impl Source for Sparse {
    fn size(&self) -> u64 {
        self.size
    }
    fn read_at(&self, at: u64, buf: &mut [u8]) -> std::io::Result<usize> {
        let n = (buf.len() as u64).min(self.size.saturating_sub(at)) as usize;
        for (i, b) in buf[..n].iter_mut().enumerate() {
            *b = *self.prefix.get(at as usize + i).unwrap_or(&0);
        }
        self.read.set(self.read.get() + n as u64);
        Ok(n)
    }
}

/// A 20 GB file, mostly a hole: its records are read, and the walk
/// stops where the drained area holds no record (even when the header
/// says it runs to the end), reading a few windows, not the file.
#[test]
fn a_huge_sparse_file_is_read_a_window_at_a_time() {
    let b = file(&[0, 1], &[2], 2);
    for forged_end in [false, true] {
        let mut prefix = b.clone();
        let size = 20u64 << 30;
        if forged_end {
            prefix[header::DRAINED_END..header::DRAINED_END + 8]
                .copy_from_slice(&size.to_le_bytes());
        }
        let src = Sparse {
            prefix,
            size,
            read: std::cell::Cell::new(0),
        };
        let t = decode_from(&src).unwrap();
        assert_eq!(numbers(&t), [0, 1, 2]);
        assert_eq!(t.damaged_at.is_some(), forged_end);
        assert!(
            src.read.get() <= 4 * WINDOW as u64,
            "{} bytes read",
            src.read.get()
        );
    }
}

#[test]
fn a_header_claiming_huge_rings_is_damaged() {
    let mut b = file(&[0], &[], 1);
    b[header::SLOTS..header::SLOTS + 4].copy_from_slice(&u32::MAX.to_le_bytes());
    assert_eq!(
        decode(&b).unwrap_err().to_string(),
        "trace header is damaged"
    );
}

#[test]
fn an_older_format_is_refused_with_its_version() {
    let mut b = file(&[0], &[], 1);
    b[header::VERSION..header::VERSION + 4].copy_from_slice(&3u32.to_le_bytes());
    let e = decode(&b).unwrap_err().to_string();
    assert!(e.contains("version 3") && e.contains("older"), "{e}");
}
