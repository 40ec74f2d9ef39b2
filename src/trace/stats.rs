//! Per-verb figures for the summary the shim logs at exit (info), counted
//! then from the drained records in the file: nothing on the calling
//! thread or the copy-out (which runs on the calling thread when a ring is
//! full in block mode), and nothing at all unless the text log is at info.
//! `ibv-shim trace --stats` gives the full ones (percentiles) from the file.

use std::cell::UnsafeCell;
use std::sync::atomic::{AtomicBool, Ordering};

use trace_format::{record_len, slot, verbs, FLAG_BINARY, FLAG_EVENT, FLAG_FAILED, SLOT_TEXT};

use crate::log::Level;

const NAME_MAX: usize = 48;
/// Distinct verbs kept; any beyond are counted with the last one kept.
const VERBS_MAX: usize = 128;

#[derive(Clone, Copy)]
struct Stat {
    name: [u8; NAME_MAX],
    name_len: usize,
    calls: u64,
    errors: u64,
    total_ns: u64,
    max_ns: u64,
}

struct Table(UnsafeCell<([Option<Stat>; VERBS_MAX], usize)>);

// SAFETY: only touched under LOCK.
unsafe impl Sync for Table {}

static TABLE: Table = Table(UnsafeCell::new(([None; VERBS_MAX], 0)));
/// A spin flag rather than a mutex: a forked child resets it.
static LOCK: AtomicBool = AtomicBool::new(false);

fn with_table<R>(f: impl FnOnce(&mut [Option<Stat>; VERBS_MAX], &mut usize) -> R) -> Option<R> {
    for _ in 0..10_000 {
        if !LOCK.swap(true, Ordering::Acquire) {
            // SAFETY: LOCK is held: this thread alone touches the table.
            let t = unsafe { &mut *TABLE.0.get() };
            let r = f(&mut t.0, &mut t.1);
            LOCK.store(false, Ordering::Release);
            return Some(r);
        }
        std::thread::yield_now();
    }
    None
}

/// Counts the whole records at the start of `batch` (records cut to their
/// length, back to back, as the drained area holds them); returns the
/// bytes they take (a record cut by the end of `batch` is left).
fn add(batch: &[u8]) -> usize {
    with_table(|table, used| {
        let mut last = 0;
        // The verb id of the record before when it was binary: the same
        // verb again needs no name compare.
        let mut last_id = u32::MAX;
        let mut at = 0;
        while at + SLOT_TEXT <= batch.len() {
            let s = &batch[at..];
            let u16_at = |i: usize| u16::from_le_bytes([s[i], s[i + 1]]);
            let len = record_len(u16_at(slot::TEXT_LEN) as usize);
            if at + len > batch.len() {
                break;
            }
            at += len;
            let flags = u16_at(slot::FLAGS);
            if flags & FLAG_EVENT != 0 {
                continue;
            }
            let call_len = u16_at(slot::CALL_LEN) as usize;
            let dur = crate::clock::to_ns(u64::from_le_bytes(
                s[slot::DUR_NS..slot::DUR_NS + 8].try_into().expect("8"),
            ));
            let id = if flags & FLAG_BINARY != 0 {
                call_len as u32
            } else {
                u32::MAX - 1
            };
            if id == last_id {
                if let Some(e) = table[last].as_mut() {
                    e.calls += 1;
                    e.errors += u64::from(flags & FLAG_FAILED != 0);
                    e.total_ns += dur;
                    e.max_ns = e.max_ns.max(dur);
                }
                continue;
            }
            let name = if flags & FLAG_BINARY != 0 {
                verbs::verb(call_len as u16).map_or(&b"?"[..], |v| v.name.as_bytes())
            } else {
                let call = &s[SLOT_TEXT..(SLOT_TEXT + call_len).min(s.len())];
                &call[..call.iter().position(|&b| b == b'(').unwrap_or(call.len())]
            };
            let name = &name[..name.len().min(NAME_MAX)];
            let is = |e: &Option<Stat>| e.as_ref().is_some_and(|e| &e.name[..e.name_len] == name);
            // The same verb as the record before, most of the time.
            let i = if last < *used && is(&table[last]) {
                last
            } else {
                match table[..*used].iter().position(is) {
                    Some(i) => i,
                    None if *used < VERBS_MAX => {
                        let mut e = Stat {
                            name: [0; NAME_MAX],
                            name_len: name.len(),
                            calls: 0,
                            errors: 0,
                            total_ns: 0,
                            max_ns: 0,
                        };
                        e.name[..name.len()].copy_from_slice(name);
                        table[*used] = Some(e);
                        *used += 1;
                        *used - 1
                    }
                    None => VERBS_MAX - 1,
                }
            };
            last = i;
            last_id = if id == u32::MAX - 1 || i == VERBS_MAX - 1 {
                u32::MAX
            } else {
                id
            };
            if let Some(e) = table[i].as_mut() {
                e.calls += 1;
                e.errors += u64::from(flags & FLAG_FAILED != 0);
                e.total_ns += dur;
                e.max_ns = e.max_ns.max(dur);
            }
        }
        at
    })
    .unwrap_or(batch.len())
}

/// Counts every record of the drained area `[from, to)` of the file `fd`.
fn add_file(fd: i32, from: u64, to: u64) {
    let mut buf = vec![0u8; 64 * 1024];
    let (mut at, mut have) = (from, 0usize);
    while at + (have as u64) < to {
        let want = (buf.len() - have).min((to - at) as usize - have);
        // SAFETY: reads at most `want` bytes into the buffer's free part.
        let n = unsafe {
            libc::pread(
                fd,
                buf[have..].as_mut_ptr().cast(),
                want,
                (at + have as u64) as libc::off_t,
            )
        };
        if n <= 0 {
            return;
        }
        have += n as usize;
        let used = add(&buf[..have]);
        if used == 0 && have == buf.len() {
            return; // not a record: a damaged file
        }
        buf.copy_within(used..have, 0);
        have -= used;
        at += used as u64;
    }
}

fn us(ns: u64) -> String {
    format!("{}.{}us", ns / 1000, ns % 1000 / 100)
}

/// The exit summary: one info line per verb, and the records lost (warn,
/// always: a trace with holes must say so).
pub fn summary() {
    if let Some(m) = super::ring::mapping() {
        let (full, no_ring) = super::writer::lost(&m);
        if full + no_ring > 0 {
            let block = super::config::get().block;
            // In block mode threads past the rings share some: a record
            // finds no ring only in a signal handler's call or when a
            // shared ring stays taken for the blocking limit.
            let why = if block {
                "a call from a signal handler in the middle of a record, or a shared ring held \
                 too long"
                    .to_string()
            } else {
                format!(
                    "more than {} threads at once, or a call from a signal handler in the middle \
                     of a record",
                    super::config::RINGS
                )
            };
            crate::log!(
                Level::Warn,
                "trace: {} records lost ({full} to full rings or a full disk (IBV_SHIM_TRACE_FULL={}), \
                 {no_ring} with no ring to write to ({why}))",
                full + no_ring,
                if block { "block" } else { "drop" },
            );
        }
    }
    if !crate::log::text_enabled(Level::Info) {
        return;
    }
    if let (Some(m), Some(fd)) = (super::ring::mapping(), super::writer::descriptor()) {
        let from = (trace_format::HEADER_SIZE + super::config::RINGS * m.size) as u64;
        add_file(
            fd,
            from,
            // SAFETY: `header::DRAINED_END` is an 8-aligned header word.
            unsafe { m.word(trace_format::header::DRAINED_END) }.load(Ordering::Relaxed),
        );
    }
    let lines = with_table(|table, used| {
        table[..*used]
            .iter()
            .flatten()
            .map(|e| {
                format!(
                    "trace: {}: {} calls, {} failed, mean {}, max {}, total {}",
                    String::from_utf8_lossy(&e.name[..e.name_len]),
                    e.calls,
                    e.errors,
                    us(e.total_ns / e.calls.max(1)),
                    us(e.max_ns),
                    us(e.total_ns)
                )
            })
            .collect::<Vec<_>>()
    });
    for l in lines.into_iter().flatten() {
        crate::log::line(Level::Info, format_args!("{l}"));
    }
}

/// In a forked child: the parent's figures are not the child's.
pub fn after_fork_in_child() {
    LOCK.store(false, Ordering::Relaxed);
    // SAFETY: the child has one thread, this one.
    let t = unsafe { &mut *TABLE.0.get() };
    t.1 = 0;
}
