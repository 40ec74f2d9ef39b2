//! The binary trace file of ibv-shim: one file per process, written by the
//! shim through a shared file mapping (so every complete record survives
//! the process's death, however it dies) and read by `ibv-shim trace`.
//!
//! Layout (all integers little-endian, the machine's own order on x86_64):
//!
//! ```text
//! [0, HEADER_SIZE)               file header, then one RingMeta per ring
//! [HEADER_SIZE, rings_end)       rings: `rings` x `ring_bytes(slots)` bytes
//! [rings_end, drained_end)       records the shim's writer copied out of
//!                                the rings to make room (appended, in
//!                                order, back to back as they lay in the ring)
//! ```
//!
//! A ring is a byte ring of records back to back, each `record_len(text_len)`
//! bytes (its fields and used text, rounded up to 8: a device verb's record
//! is about 80 bytes). A record's position is its first byte's offset in
//! the ring's whole stream (the ring's offset is the position modulo the
//! ring's size); a record never wraps: where fewer than `RECORD_MAX` bytes
//! are left before the ring's end, the next record starts at the ring's
//! start (`ring_next`). A record is committed by its `seq` word, stored
//! last (release): its position plus one, so a record whose `seq` is 0 or
//! does not match where it lies is being written, or none (a stale record
//! of an earlier lap has an older position). Readers walk a ring from its
//! tail, record by record. A record is in the drained area or still in its
//! ring (or, after a crash between the copy and the tail update, in both:
//! readers deduplicate by ring and `seq`).

#![forbid(unsafe_code)]
#![deny(unsafe_op_in_unsafe_fn)]
#![deny(clippy::undocumented_unsafe_blocks)]

mod decl;
pub mod vendor;
pub mod verbs;

/// The first 8 bytes of a trace file.
pub const MAGIC: [u8; 8] = *b"IBVTRC01";
/// 2: binary call records (`FLAG_BINARY`) and the TSC clock. 3: a `Str`
/// result may be `verbs::SAME_AS_DEVICE_NAME`. 4: rings of records back
/// to back (`record_len` each) rather than 256-byte slots. A reader reads
/// its own version only (the layouts differ).
pub const VERSION: u32 = 4;
pub const HEADER_SIZE: usize = 8192;
/// The most bytes a record takes: its fields and TEXT_MAX bytes of text.
pub const RECORD_MAX: usize = 256;
/// A ring holds `slots` x RING_UNIT bytes (`IBV_SHIM_TRACE_SLOTS`).
pub const RING_UNIT: usize = 128;
/// Bytes of text a record holds: the call (`name(args)`), then the result.
pub const TEXT_MAX: usize = RECORD_MAX - SLOT_TEXT;
/// The header's fields (byte offsets).
pub mod header {
    pub const MAGIC: usize = 0;
    pub const VERSION: usize = 8;
    pub const PID: usize = 12;
    pub const RINGS: usize = 16;
    /// A ring's size in RING_UNIT bytes.
    pub const SLOTS: usize = 20;
    /// RING_UNIT.
    pub const SLOT_SIZE: usize = 24;
    /// 0 = drop (and count) when a ring is full, 1 = block.
    pub const POLICY: usize = 28;
    /// CLOCK_REALTIME and CLOCK_MONOTONIC, in ns, read together at start.
    pub const REALTIME_NS: usize = 32;
    pub const MONOTONIC_NS: usize = 40;
    /// Records lost with no ring to write to: every ring taken (more live
    /// threads than rings), or a signal handler's call in the middle of its
    /// thread's own record.
    pub const LOST_NO_RING: usize = 48;
    /// End of the drained area (a file offset); 0 = nothing drained yet.
    pub const DRAINED_END: usize = 56;
    /// The clock of records' times: 0 = CLOCK_MONOTONIC ns, 1 = TSC ticks
    /// (`CLOCK_TSC`), turned into CLOCK_MONOTONIC ns by the reader with
    /// the two calibration pairs below.
    pub const CLOCK: usize = 64;
    /// (TSC, CLOCK_MONOTONIC ns) read together when the trace started, and
    /// again later (updated by the shim as it runs: the longer apart, the
    /// more exact the rate).
    pub const TSC0: usize = 72;
    pub const MONO0: usize = 80;
    pub const TSC1: usize = 88;
    pub const MONO1: usize = 96;
    /// Where the per-ring metadata starts.
    pub const RINGS_META: usize = 256;
}
/// Per-ring metadata (byte offsets inside one `RING_META_SIZE` entry).
pub mod ring {
    /// Where the next record goes (a position: bytes of the ring's stream,
    /// gaps before a wrap included).
    pub const HEAD: usize = 0;
    /// The position up to which records are copied out to the drained area.
    pub const TAIL: usize = 8;
    /// Records dropped because the ring was full.
    pub const LOST: usize = 16;
    /// The thread that owns the ring now (0 = free).
    pub const OWNER: usize = 24;
    /// 1 while the owner writes a record (u32; the shim's own use).
    pub const BUSY: usize = 28;
    /// Where the records of the lap before the current one end (the
    /// head when a record last started a lap): the writer copies a ring
    /// out in two pieces around it.
    pub const WRAP: usize = 32;
    /// Bytes of the ring, from its start, whose file space is allocated
    /// (the shim's own use: it writes a record only there, and allocates
    /// more as the ring fills; readers find zeros past it).
    pub const ALLOC: usize = 40;
    /// The position up to which the ring's writer may write with no other
    /// check (the shim's own use).
    pub const LIMIT: usize = 48;
}
/// The owner word of a ring that threads share (`block` mode: threads
/// beyond the rings' number take turns on these, under the ring's busy
/// word); never a thread id.
pub const SHARED_OWNER: u32 = u32::MAX;
/// The most slots a ring has (`IBV_SHIM_TRACE_SLOTS`' limit): a header
/// that says more is damaged.
pub const SLOTS_MAX: usize = 1 << 20;
pub const RING_META_SIZE: usize = 64;
/// The most rings a header has room for.
pub const MAX_RINGS: usize = (HEADER_SIZE - header::RINGS_META) / RING_META_SIZE;

/// A record's fields (byte offsets).
pub mod slot {
    pub const SEQ: usize = 0;
    pub const START_NS: usize = 8;
    pub const DUR_NS: usize = 16;
    pub const TID: usize = 24;
    pub const ERRNO: usize = 28;
    pub const RING: usize = 32;
    pub const FLAGS: usize = 34;
    /// Bytes of the text that are the call; the rest is the result.
    pub const CALL_LEN: usize = 36;
    pub const TEXT_LEN: usize = 38;
}
pub const SLOT_TEXT: usize = 40;

/// `flags`: the call failed (errno is meaningful).
pub const FLAG_FAILED: u16 = 1;
/// `flags`: an event (`trace::event`), not a timed verbs call.
pub const FLAG_EVENT: u16 = 2;
/// `flags`: the text was cut to fit the record.
pub const FLAG_TRUNCATED: u16 = 4;
/// `flags`: a binary call record: `CALL_LEN` is the verb's id in
/// `verbs::VERBS`, the text area its payload (see `verbs`).
pub const FLAG_BINARY: u16 = 8;
/// `header::CLOCK`: times are TSC ticks.
pub const CLOCK_TSC: u32 = 1;

/// TSC ticks to CLOCK_MONOTONIC ns, from two (tsc, ns) pairs read together.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct TscClock {
    pub tsc0: u64,
    pub mono0: u64,
    /// ns per tick.
    pub rate: f64,
}

impl TscClock {
    pub fn new(tsc0: u64, mono0: u64, tsc1: u64, mono1: u64) -> TscClock {
        let rate = if tsc1 > tsc0 && mono1 > mono0 {
            (mono1 - mono0) as f64 / (tsc1 - tsc0) as f64
        } else {
            1.0
        };
        TscClock { tsc0, mono0, rate }
    }
    pub fn ns(&self, tsc: u64) -> u64 {
        let d = tsc.wrapping_sub(self.tsc0) as i64 as f64 * self.rate;
        (self.mono0 as f64 + d).max(0.0) as u64
    }
    pub fn dur_ns(&self, ticks: u64) -> u64 {
        (ticks as f64 * self.rate) as u64
    }
}

/// The bytes a record takes in the drained area: its fields and text,
/// rounded up to 8.
#[inline]
pub fn record_len(text_len: usize) -> usize {
    (SLOT_TEXT + text_len.min(TEXT_MAX) + 7) & !7
}

/// A ring's size in bytes.
#[inline]
pub fn ring_bytes(slots: usize) -> usize {
    slots * RING_UNIT
}

/// Where a record written at position `pos` of a ring of `size` bytes
/// starts: `pos`, or the ring's next lap when fewer than RECORD_MAX bytes
/// are left before its end (a record never wraps). The shim, its writer
/// and readers all step with it.
#[inline]
pub fn ring_next(pos: u64, size: usize) -> u64 {
    let left = size as u64 - pos % size as u64;
    if left < RECORD_MAX as u64 {
        pos + left
    } else {
        pos
    }
}

/// The size of a trace file's header plus rings.
pub fn rings_end(rings: usize, slots: usize) -> usize {
    HEADER_SIZE + rings * ring_bytes(slots)
}

/// One decoded record.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Record {
    pub ring: u16,
    /// Position in its ring (bytes of the ring's stream, 0-based).
    pub seq: u64,
    /// CLOCK_MONOTONIC at the call's start, ns.
    pub start_ns: u64,
    pub dur_ns: u64,
    pub tid: u32,
    pub errno: i32,
    pub flags: u16,
    /// `name(args)`.
    pub call: String,
    pub result: String,
}

impl Record {
    /// The verb's name: the call text up to its `(`.
    pub fn name(&self) -> &str {
        self.call.split('(').next().unwrap_or("")
    }
    pub fn failed(&self) -> bool {
        self.flags & FLAG_FAILED != 0
    }
}

/// A decoded trace file.
#[derive(Clone, Debug, Default)]
pub struct Trace {
    pub pid: u32,
    pub rings: usize,
    pub slots: usize,
    pub block: bool,
    pub realtime_ns: u64,
    pub monotonic_ns: u64,
    /// Records the shim dropped: rings full, plus no ring free.
    pub lost_full: u64,
    pub lost_no_ring: u64,
    /// Records in time order (ties: by ring and position).
    pub records: Vec<Record>,
    /// Where the drained area stopped holding records before its recorded
    /// end (a file offset): the rest of it was not read.
    pub damaged_at: Option<u64>,
}

fn u16_at(b: &[u8], at: usize) -> u16 {
    u16::from_le_bytes([b[at], b[at + 1]])
}
fn u32_at(b: &[u8], at: usize) -> u32 {
    u32::from_le_bytes(b[at..at + 4].try_into().expect("4 bytes"))
}
fn u64_at(b: &[u8], at: usize) -> u64 {
    u64::from_le_bytes(b[at..at + 8].try_into().expect("8 bytes"))
}

/// Decodes one record (in a ring or the drained area), if it is
/// complete.
pub fn decode_slot(s: &[u8]) -> Option<Record> {
    if s.len() < SLOT_TEXT {
        return None;
    }
    let seq = u64_at(s, slot::SEQ);
    if seq == 0 {
        return None;
    }
    let call_len = u16_at(s, slot::CALL_LEN) as usize;
    let text_len = (u16_at(s, slot::TEXT_LEN) as usize)
        .min(TEXT_MAX)
        .min(s.len() - SLOT_TEXT);
    let text = &s[SLOT_TEXT..SLOT_TEXT + text_len];
    let flags = u16_at(s, slot::FLAGS);
    let (call, result) = if flags & FLAG_BINARY != 0 {
        match verbs::verb(call_len as u16) {
            Some(v) => (
                verbs::CallText(v, text).to_string(),
                verbs::ResultText(v, text).to_string(),
            ),
            None => (format!("verb#{call_len}()"), "?".to_string()),
        }
    } else {
        let call_len = call_len.min(text_len);
        (
            String::from_utf8_lossy(&text[..call_len]).into_owned(),
            String::from_utf8_lossy(&text[call_len..]).into_owned(),
        )
    };
    Some(Record {
        ring: u16_at(s, slot::RING),
        seq: seq - 1,
        start_ns: u64_at(s, slot::START_NS),
        dur_ns: u64_at(s, slot::DUR_NS),
        tid: u32_at(s, slot::TID),
        errno: u32_at(s, slot::ERRNO) as i32,
        flags,
        call,
        result,
    })
}

/// Why a file is not a trace.
#[derive(Debug, PartialEq, Eq)]
pub struct NotATrace(pub String);

impl std::fmt::Display for NotATrace {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

/// Where a trace's bytes come from: a slice in memory, or a file read a
/// window at a time (a trace may be far larger than memory, or sparse:
/// nothing reads it whole).
pub trait Source {
    /// The bytes there are.
    fn size(&self) -> u64;
    /// Fills `buf` from offset `at`; returns how many bytes there were.
    fn read_at(&self, at: u64, buf: &mut [u8]) -> std::io::Result<usize>;
}

impl Source for [u8] {
    fn size(&self) -> u64 {
        self.len() as u64
    }
    fn read_at(&self, at: u64, buf: &mut [u8]) -> std::io::Result<usize> {
        let from = (at.min(self.len() as u64)) as usize;
        let n = buf.len().min(self.len() - from);
        buf[..n].copy_from_slice(&self[from..from + n]);
        Ok(n)
    }
}

impl Source for std::fs::File {
    fn size(&self) -> u64 {
        self.metadata().map(|m| m.len()).unwrap_or(0)
    }
    fn read_at(&self, at: u64, buf: &mut [u8]) -> std::io::Result<usize> {
        use std::os::unix::fs::FileExt;
        let mut got = 0;
        while got < buf.len() {
            match FileExt::read_at(self, &mut buf[got..], at + got as u64) {
                Ok(0) => break,
                Ok(n) => got += n,
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                Err(e) => return Err(e),
            }
        }
        Ok(got)
    }
}

/// The bytes the reader reads at once.
const WINDOW: usize = 1 << 20;

/// A window of WINDOW bytes over a source, moved as the reader walks (its
/// walks go forward, a ring's wrapping once): the reader's memory is this
/// window, whatever the file's size.
struct Window<'a, S: Source + ?Sized> {
    src: &'a S,
    size: u64,
    start: u64,
    buf: Vec<u8>,
    error: Option<std::io::Error>,
}

impl<'a, S: Source + ?Sized> Window<'a, S> {
    fn new(src: &'a S) -> Self {
        Window {
            src,
            size: src.size(),
            start: 0,
            buf: Vec::new(),
            error: None,
        }
    }

    /// Up to `len` (at most RECORD_MAX or the header) bytes at `at`, fewer
    /// at the source's end or after a read error (kept for the caller).
    fn get(&mut self, at: u64, len: usize) -> &[u8] {
        let end = (at + len as u64).min(self.size);
        if at < self.start || end > self.start + self.buf.len() as u64 {
            let want = (WINDOW.max(len) as u64).min(self.size.saturating_sub(at)) as usize;
            self.buf.resize(want, 0);
            match self.src.read_at(at, &mut self.buf) {
                Ok(n) => self.buf.truncate(n),
                Err(e) => {
                    self.buf.clear();
                    self.error.get_or_insert(e);
                }
            }
            self.start = at;
        }
        let from = (at.saturating_sub(self.start) as usize).min(self.buf.len());
        let to = (end.saturating_sub(self.start) as usize).clamp(from, self.buf.len());
        &self.buf[from..to]
    }
}

/// Decodes a whole trace file: the drained records, then what is still
/// in the rings; a record present in both counts once.
pub fn decode(b: &[u8]) -> Result<Trace, NotATrace> {
    decode_from(b)
}

/// [`decode`] from any source, reading it a window at a time: memory is
/// the window and the records found, not the file's size (a sparse file
/// of 20 GB, a header that claims more than there is).
pub fn decode_from<S: Source + ?Sized>(src: &S) -> Result<Trace, NotATrace> {
    let mut w = Window::new(src);
    let head = w.get(0, HEADER_SIZE).to_vec();
    if let Some(e) = w.error.take() {
        return Err(NotATrace(format!("cannot read it: {e}")));
    }
    let b = &head[..];
    if b.len() < HEADER_SIZE || b[..8] != MAGIC {
        return Err(NotATrace("not an ibv-shim trace file".into()));
    }
    let version = u32_at(b, header::VERSION);
    if version != VERSION {
        return Err(NotATrace(format!(
            "trace format version {version}, {}; this reader reads version {VERSION} only \
             (decode the file with the ibv-shim that wrote it)",
            if version < VERSION {
                "written by an older ibv-shim"
            } else {
                "written by a newer ibv-shim"
            }
        )));
    }
    let rings = u32_at(b, header::RINGS) as usize;
    let slots = u32_at(b, header::SLOTS) as usize;
    let size = ring_bytes(slots);
    if rings > MAX_RINGS
        || slots > SLOTS_MAX
        || u32_at(b, header::SLOT_SIZE) as usize != RING_UNIT
        || size < RECORD_MAX
        || !size.is_multiple_of(8)
    {
        return Err(NotATrace("trace header is damaged".into()));
    }
    let mut t = Trace {
        pid: u32_at(b, header::PID),
        rings,
        slots,
        block: u32_at(b, header::POLICY) == 1,
        realtime_ns: u64_at(b, header::REALTIME_NS),
        monotonic_ns: u64_at(b, header::MONOTONIC_NS),
        lost_no_ring: u64_at(b, header::LOST_NO_RING),
        ..Trace::default()
    };
    let len = w.size;
    let end = rings_end(rings, slots) as u64;
    let drained_end = u64_at(b, header::DRAINED_END).min(len);
    let mut seen = std::collections::HashSet::new();
    let mut push = |t: &mut Trace, r: Record| {
        if seen.insert((r.ring, r.seq)) {
            t.records.push(r);
        }
    };
    // The drained area holds committed records back to back: a record
    // with no commit word is no record (a hole, zeros, damage), and the
    // walk ends there rather than stepping through the rest.
    let mut at = end;
    while at + SLOT_TEXT as u64 <= drained_end {
        let rec = w.get(at, RECORD_MAX.min((drained_end - at) as usize));
        if rec.len() < SLOT_TEXT || u64_at(rec, slot::SEQ) == 0 {
            t.damaged_at = Some(at);
            break;
        }
        let len = record_len(u16_at(rec, slot::TEXT_LEN) as usize);
        if let Some(r) = decode_slot(&rec[..len.min(rec.len())]) {
            push(&mut t, r);
        }
        at += len as u64;
    }
    for ring_i in 0..rings {
        let meta = header::RINGS_META + ring_i * RING_META_SIZE;
        t.lost_full += u64_at(b, meta + ring::LOST);
        let start = (HEADER_SIZE + ring_i * size) as u64;
        if start + size as u64 > len {
            break;
        }
        // From the tail (below it, drained already and seen above), record
        // by record while each is committed where it lies: past the head
        // too (a crash between a commit and the head's update).
        let tail = u64_at(b, meta + ring::TAIL);
        let mut pos = tail;
        loop {
            pos = ring_next(pos, size);
            // The shim writes a record only where a whole RECORD_MAX fits
            // before the tail's lap ends.
            if pos + RECORD_MAX as u64 > tail.saturating_add(size as u64) {
                break;
            }
            let at = (pos % size as u64) as usize;
            let rec = w.get(start + at as u64, RECORD_MAX.min(size - at));
            if rec.len() < SLOT_TEXT || u64_at(rec, slot::SEQ) != pos + 1 {
                break;
            }
            let len = record_len(u16_at(rec, slot::TEXT_LEN) as usize);
            match decode_slot(&rec[..len.min(rec.len())]) {
                Some(r) if r.ring as usize == ring_i => push(&mut t, r),
                _ => break,
            }
            pos += len as u64;
        }
    }
    if let Some(e) = w.error.take() {
        return Err(NotATrace(format!("cannot read it: {e}")));
    }
    if u32_at(b, header::CLOCK) == CLOCK_TSC {
        let c = TscClock::new(
            u64_at(b, header::TSC0),
            u64_at(b, header::MONO0),
            u64_at(b, header::TSC1),
            u64_at(b, header::MONO1),
        );
        for r in &mut t.records {
            r.start_ns = c.ns(r.start_ns);
            r.dur_ns = c.dur_ns(r.dur_ns);
        }
    }
    t.records.sort_by_key(|r| (r.start_ns, r.ring, r.seq));
    Ok(t)
}

/// Errno names for the decoder's text (the common ones; others by number).
pub fn errno_name(e: i32) -> String {
    let name = match e {
        1 => "EPERM",
        2 => "ENOENT",
        3 => "ESRCH",
        4 => "EINTR",
        5 => "EIO",
        6 => "ENXIO",
        9 => "EBADF",
        11 => "EAGAIN",
        12 => "ENOMEM",
        13 => "EACCES",
        14 => "EFAULT",
        16 => "EBUSY",
        17 => "EEXIST",
        19 => "ENODEV",
        22 => "EINVAL",
        23 => "ENFILE",
        24 => "EMFILE",
        28 => "ENOSPC",
        34 => "ERANGE",
        38 => "ENOSYS",
        61 => "ENODATA",
        75 => "EOVERFLOW",
        93 => "EPROTONOSUPPORT",
        95 => "EOPNOTSUPP",
        110 => "ETIMEDOUT",
        _ => return e.to_string(),
    };
    name.to_string()
}

#[cfg(test)]
mod tests {
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
        b[header::SLOT_SIZE..header::SLOT_SIZE + 4]
            .copy_from_slice(&(RING_UNIT as u32).to_le_bytes());
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
}
