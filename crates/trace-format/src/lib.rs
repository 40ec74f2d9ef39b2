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
//!
//! This file: the layout (offsets, sizes, flags, the clock); `reader`:
//! decoding a file; `verbs`: the verbs' record encodings.

#![forbid(unsafe_code)]
#![deny(unsafe_op_in_unsafe_fn)]
#![deny(clippy::undocumented_unsafe_blocks)]

mod decl;
mod reader;
#[cfg(test)]
mod tests;
pub mod vendor;
pub mod verbs;

pub use reader::*;

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
