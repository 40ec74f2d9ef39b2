//! Reading a trace file: a record decoded from its bytes, the rings
//! walked from their tails and the drained area read through a window
//! of the file (a crash's duplicates counted once), into a `Trace`.

use crate::*;

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
pub(crate) const WINDOW: usize = 1 << 20;

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
