//! A timed call's debug line as a binary entry, so that the calling
//! thread queues the call's words — the payload `trace::capture::encode`
//! made, strings and device names copied at call time — with its verb id,
//! times, tid, errno and failed flag; the thread that drains the queue
//! (the writer thread, or a program thread flushing it) formats the line.
//! The text is the one `ibv-shim trace` decodes from the same payload
//! (`trace_format::verbs`), and the time stamp is the call's end, not the
//! time the line was formatted.
//!
//! With `IBV_SHIM_LOG_SYNC=1` (or no writer thread) the calling thread
//! formats and writes the line itself, the same text.

use std::fmt::Write as _;
use std::mem::MaybeUninit;

use trace_format::verbs::{self, CallText, ResultText, Verb};

use super::{prefix, Dec, Level, LineBuf};

/// start u64, end u64 (`clock::now()`'s), tid i32, errno i32, verb id
/// u16, failed u8; then the payload.
const HEAD: usize = 32;

/// Room for a payload after the head: a trace record's (the log shows
/// what the trace keeps, the same text).
const PAYLOAD_MAX: usize = trace_format::TEXT_MAX;
const _: () = assert!(HEAD + PAYLOAD_MAX <= crate::log_queue::ENTRY_MAX);

/// Sends the debug line of `verb`'s call to the log: `payload` writes
/// the call's encoded words (`trace::capture::encode`) at the pointer it
/// gets, which has room for the length it gets (a trace record's room),
/// and returns their length, every byte below it written. The caller
/// checked that the text log is at debug, and keeps errno. `also` sees
/// the payload before the entry is queued (the trace copies it).
pub fn call(
    start: u64,
    end: u64,
    verb: &Verb,
    failed: bool,
    errno: i32,
    payload: impl FnOnce(*mut u8, usize) -> usize,
    also: impl FnOnce(&[u8]),
) {
    let tid = crate::thread::tid();
    // The head and the payload in one buffer: one copy into the queue.
    // Not zeroed (a third of the calling thread's cost): every byte of the
    // head is written here, and of the payload up to its length.
    let mut buf = MaybeUninit::<[u8; HEAD + PAYLOAD_MAX]>::uninit();
    let e = buf.as_mut_ptr().cast::<u8>();
    // SAFETY: the head's fields, inside the buffer's first HEAD bytes.
    unsafe {
        e.cast::<u64>().write_unaligned(start);
        e.add(8).cast::<u64>().write_unaligned(end);
        e.add(16).cast::<i32>().write_unaligned(tid);
        e.add(20).cast::<i32>().write_unaligned(errno);
        e.add(24).cast::<u16>().write_unaligned(verb.id);
        e.add(26).write(failed as u8);
        e.add(27).write_bytes(0, HEAD - 27);
    }
    // SAFETY: PAYLOAD_MAX bytes follow the head.
    let len = HEAD + payload(unsafe { e.add(HEAD) }, PAYLOAD_MAX).min(PAYLOAD_MAX);
    // SAFETY: the head and the payload's `len - HEAD` bytes are written.
    let e = unsafe { std::slice::from_raw_parts(e.cast_const(), len) };
    // The trace's copy of the payload, when it is on too.
    also(&e[HEAD..]);
    super::open_here();
    if !crate::log_queue::push_binary(e) {
        // Synchronous: formatted and written here, after what is queued.
        crate::log_queue::flush();
        if let Some(e) = Entry::read(e) {
            let mut b = LineBuf::new();
            e.format(&mut b);
            super::write_out(b.as_bytes());
        }
    }
}

/// `log_queue`'s render hook: the line of a queued entry at `out`.
pub fn render(entry: &[u8], out: &mut [u8]) -> usize {
    let Some(e) = Entry::read(entry) else {
        return 0;
    };
    let mut b = LineBuf::new();
    e.format(&mut b);
    let line = b.as_bytes();
    let n = line.len().min(out.len());
    out[..n].copy_from_slice(&line[..n]);
    n
}

struct Entry<'a> {
    start: u64,
    end: u64,
    tid: i32,
    errno: i32,
    verb: u16,
    failed: bool,
    payload: &'a [u8],
}

impl<'a> Entry<'a> {
    fn read(e: &'a [u8]) -> Option<Entry<'a>> {
        let head = e.get(..HEAD)?;
        let u64_at = |at: usize| u64::from_ne_bytes(head[at..at + 8].try_into().unwrap_or([0; 8]));
        let i32_at = |at: usize| i32::from_ne_bytes(head[at..at + 4].try_into().unwrap_or([0; 4]));
        Some(Entry {
            start: u64_at(0),
            end: u64_at(8),
            tid: i32_at(16),
            errno: i32_at(20),
            verb: u16::from_ne_bytes([head[24], head[25]]),
            failed: head[26] != 0,
            payload: &e[HEAD..],
        })
    }

    /// `<prefix> call = result [errno=E] [1.2us]`, stamped with the call's
    /// end.
    fn format(&self, b: &mut LineBuf) {
        // The real-time clock now, less the time since the call ended:
        // the call's own time, however long the line waited.
        let ago = crate::clock::to_ns(crate::clock::now().saturating_sub(self.end));
        let at = super::clock_ns(libc::CLOCK_REALTIME).saturating_sub(ago);
        prefix(
            b,
            at / 1_000_000_000,
            at % 1_000_000_000 / 1000,
            self.tid,
            Level::Debug,
        );
        match verbs::verb(self.verb) {
            Some(v) => {
                let p = self.payload;
                let _ = write!(b, "{} = {}", CallText(v, p), ResultText(v, p));
            }
            None => {
                let _ = write!(b, "verb#{}() = ?", self.verb);
            }
        }
        if self.failed {
            b.push(b" errno=");
            b.push(crate::errno::errno_name(self.errno).as_bytes());
        }
        // Microseconds with one decimal, by hand (float formatting costs
        // more than the rest of the line).
        let took = crate::clock::to_ns(self.end.saturating_sub(self.start));
        b.push(b" [");
        b.push(Dec::new(took / 1000).as_bytes());
        b.push(b".");
        b.push(Dec::new(took % 1000 / 100).as_bytes());
        b.push(b"us]");
        b.finish();
    }
}
