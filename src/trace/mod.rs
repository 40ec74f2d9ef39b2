//! Binary tracing: every verbs call the shim times becomes a record (its
//! used length, back to back) in a per-thread ring, written by the calling
//! thread with no lock and no system call (`ring`). The rings live in a
//! shared mapping of the trace file, so every complete record survives the
//! process however it ends (SIGKILL, a crash, `_exit`); a writer thread
//! copies records out of the rings to the end of the file to make room, a
//! ring in one or two pieces (`writer`); the
//! summary at exit counts per-verb figures from the file (`stats`). `ibv-shim trace`
//! decodes the file; its layout is the `trace-format` crate's.
//!
//! `IBV_SHIM_TRACE=FILE` turns it on (`config`). Tracing rides on the
//! debug log's gate: `at_load` registers [`call`] with the logger, whose
//! level gate then says "debug" (so a call is timed). Most exports hand
//! their call over as raw words ([`call_bin`]: a verb id from
//! `trace_format::verbs`, no text made on the calling thread, `capture`);
//! the rest as text through `log::call`. Times are `clock::now()`'s: TSC
//! ticks where the TSC is invariant (the file's header says how to turn
//! them into CLOCK_MONOTONIC ns), else CLOCK_MONOTONIC ns.

pub mod capture;
pub mod config;
mod ring;
mod stats;
mod writer;

use std::fmt;
use std::sync::atomic::{AtomicU8, Ordering};

/// Not asked for, or given up.
const OFF: u8 = 0;
/// Asked for; the file is made on the first record.
const UNOPENED: u8 = 1;
const ON: u8 = 2;
static STATE: AtomicU8 = AtomicU8::new(OFF);

/// At load: is tracing asked for? (Reads the options.) Registers with
/// the logger, whose debug path then sends each timed call here.
pub fn at_load() {
    for p in problems() {
        crate::log!(crate::log::Level::Warn, "{p}");
    }
    if config::get().file.is_some() {
        if config::get().tsc {
            crate::clock::use_tsc();
        }
        STATE.store(UNOPENED, Ordering::Release);
        crate::log::record_calls_with(call);
    }
}

/// Is tracing asked for? The logger's level gate includes debug while it is.
pub fn wanted() -> bool {
    STATE.load(Ordering::Relaxed) != OFF
}

/// Problems with the trace options, for the logger to print once.
pub fn problems() -> &'static [String] {
    &config::get().problems
}

/// Records a timed verbs call: `call` is `name(args)`, `result` what it
/// returned; `errno` matters when `failed`. Times are `clock::now()`'s.
pub fn call(
    start_ns: u64,
    end_ns: u64,
    call: fmt::Arguments<'_>,
    result: fmt::Arguments<'_>,
    failed: bool,
    errno: i32,
) {
    if !ready() {
        return;
    }
    let flags = if failed { trace_format::FLAG_FAILED } else { 0 };
    ring::record(
        start_ns,
        end_ns.saturating_sub(start_ns),
        flags,
        errno,
        call,
        result,
    );
}

/// Records a timed verbs call as a binary record: `verb`'s id and the
/// payload `encode` writes (`ring::record_bin`; `capture`'s encoders for
/// the verb's arguments and result); `errno` matters when `failed`. Times
/// are `clock::now()`'s.
#[inline(always)]
pub fn call_bin(
    start: u64,
    end: u64,
    verb: &trace_format::verbs::Verb,
    failed: bool,
    errno: i32,
    encode: impl FnOnce(*mut u8, usize) -> (usize, bool),
) {
    if !ready() {
        return;
    }
    let flags = trace_format::FLAG_BINARY | if failed { trace_format::FLAG_FAILED } else { 0 };
    ring::record_bin(
        start,
        end.saturating_sub(start),
        flags,
        errno,
        verb.id,
        encode,
    );
}

/// An untimed event for the trace (a post or a poll seen by another part
/// of the shim): `what` is `name(args)`, `result` its outcome. Costs one
/// relaxed load when tracing is off; check [`wanted`] before assembling
/// expensive arguments.
pub fn event(what: fmt::Arguments<'_>, result: fmt::Arguments<'_>, failed: bool, errno: i32) {
    if !ready() {
        return;
    }
    let mut flags = trace_format::FLAG_EVENT;
    if failed {
        flags |= trace_format::FLAG_FAILED;
    }
    ring::record(crate::clock::now(), 0, flags, errno, what, result);
}

/// [`event`] as a binary record: `verb`'s id, `args` and `result` (the
/// events' typed records, `exports::verbs`, are the callers).
///
/// # Safety
/// `args` holds one word per argument of `verb`, a verb of plain words
/// (`Shape::Words`: nothing read behind them).
pub unsafe fn event_bin(verb: &trace_format::verbs::Verb, args: &[u64], result: u64, failed: bool) {
    if !ready() {
        return;
    }
    let flags = trace_format::FLAG_EVENT
        | trace_format::FLAG_BINARY
        | if failed { trace_format::FLAG_FAILED } else { 0 };
    ring::record_bin(crate::clock::now(), 0, flags, 0, verb.id, |out, room| {
        // SAFETY: `out` has room for `room` bytes; the words are the
        // verb's (this function's contract).
        unsafe { capture::encode(verb, args, result, out, room) }
    });
}

/// Opens the trace on the first record.
#[inline(always)]
fn ready() -> bool {
    match STATE.load(Ordering::Acquire) {
        ON => true,
        OFF => false,
        _ => open(),
    }
}

#[cold]
fn open() -> bool {
    let ok = ring::open();
    // A lost race leaves the winner's state: ON either way, or OFF when
    // the file could not be made (said once, by `ring::open`).
    let _ = STATE.compare_exchange(
        UNOPENED,
        if ok { ON } else { OFF },
        Ordering::AcqRel,
        Ordering::Acquire,
    );
    if ok {
        writer::start();
    }
    STATE.load(Ordering::Acquire) == ON
}

/// At exit (before the exit report): copies out what the rings hold,
/// stops the writer, logs the per-verb summary (info) and any loss (warn).
pub fn at_exit() {
    if STATE.load(Ordering::Acquire) != ON {
        return;
    }
    writer::stop_and_drain();
    stats::summary();
}

/// After `fork()`, in the child: never write into the parent's file. A
/// trace named with `%p` gets a file of its own on the child's first
/// record; otherwise the child is not traced.
pub fn after_fork_in_child() {
    let was = STATE.load(Ordering::Relaxed);
    ring::after_fork_in_child();
    writer::after_fork_in_child();
    stats::after_fork_in_child();
    let own_file = config::get()
        .file
        .as_ref()
        .is_some_and(|t| t.as_encoded_bytes().windows(2).any(|w| w == b"%p"));
    STATE.store(
        if was != OFF && own_file {
            UNOPENED
        } else {
            OFF
        },
        Ordering::Release,
    );
}
