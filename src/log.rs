//! The shim's logger.
//!
//! A shim logs from inside other people's threads, signal-adjacent code and
//! exit paths, so each line is formatted into a stack buffer and emitted
//! with a single `write(2)`: no allocation, no lock, and lines from
//! different threads (or, with `O_APPEND`, processes) never interleave.
//! When a level is off the only cost is one relaxed atomic load.
//!
//! Lines go to `IBV_SHIM_LOG_FILE`, else to the shim's own duplicate of the
//! program's stderr, taken when the shim is loaded: a program that closes
//! fd 2 and opens a file (which gets fd 2) does not get the shim's lines
//! in it. Before each line the shim checks (one `fstat`) that its
//! descriptor still is the file it opened: daemons close every descriptor
//! and the numbers get reused. A log file lost that way is reopened by
//! path; a lost stderr is given up unless fd 2 still is the original.
//!
//! Debug and trace lines are written by a writer thread in batches
//! (`log_queue`); the other levels, and every line with
//! `IBV_SHIM_LOG_SYNC=1`, are written here, after the queued lines. A
//! timed call's debug line is queued as a binary entry (its words, no
//! text: [`entry`]) and formatted by the thread that writes it.
//!
//! Line format: `ibv-shim <secs>.<micros> <pid>:<tid> <LEVEL> <message>`.

use std::fmt::{self, Write as _};
use std::sync::atomic::{AtomicBool, AtomicI32, AtomicU64, AtomicU8, Ordering};

use crate::config;
use crate::files::Identity;

pub mod entry;

pub use crate::level::Level;

const UNSET: u8 = u8::MAX;
/// The gate every log site checks: the text log's level, raised to debug
/// while a recorder (the binary trace) is registered: a traced call is
/// timed and its text assembled on the debug path, and `call` sends it on.
static LEVEL: AtomicU8 = AtomicU8::new(UNSET);
/// The text log's own level (`IBV_SHIM_LOG`).
static TEXT: AtomicU8 = AtomicU8::new(UNSET);

/// Where lines go: the log file, or the shim's duplicate of stderr.
/// `UNOPENED` until the first line; `NOWHERE` when there is no such file.
const UNOPENED: i32 = -2;
const NOWHERE: i32 = -1;
static FD: AtomicI32 = AtomicI32::new(UNOPENED);
/// The identity of the file `FD` was opened on: a program that closes the
/// shim's descriptor (daemons close them all) may get the same number for a
/// file of its own, and the shim must never write into that.
static FD_DEV: AtomicU64 = AtomicU64::new(0);
static FD_INO: AtomicU64 = AtomicU64::new(0);
/// Set while one thread (re)opens the output; others wait for it, a
/// bounded time (no lock a `fork()` could leave held, and a signal handler
/// that interrupted the opener must not wait for ever).
static OPENING: AtomicBool = AtomicBool::new(false);

/// The shim's own duplicate of the program's stderr as it was when the
/// shim was loaded, and that file's identity. A program that closes fd 2
/// and opens a file of its own (which then gets fd 2) must not find the
/// shim's warnings in it.
const UNTRIED: i32 = -2;
static STDERR: AtomicI32 = AtomicI32::new(UNTRIED);
static STDERR_DEV: AtomicU64 = AtomicU64::new(0);
static STDERR_INO: AtomicU64 = AtomicU64::new(0);

/// At load (see `config`): keep a duplicate of stderr, unless logging is off.
pub fn at_load() {
    if config::get().log_level != Level::Off {
        keep_stderr();
    }
}

/// Duplicates fd 2 (close-on-exec, numbered out of the way of the low
/// numbers programs expect to get) and records which file it is.
fn keep_stderr() -> i32 {
    let Some(id) = Identity::of(libc::STDERR_FILENO) else {
        STDERR.store(NOWHERE, Ordering::Release);
        return NOWHERE;
    };
    // SAFETY: fcntl on fd 2, which is open; no pointers.
    let mut fd = unsafe { libc::fcntl(libc::STDERR_FILENO, libc::F_DUPFD_CLOEXEC, 100) };
    if fd < 0 {
        // RLIMIT_NOFILE below 100: any number will do.
        // SAFETY: as above.
        fd = unsafe { libc::fcntl(libc::STDERR_FILENO, libc::F_DUPFD_CLOEXEC, 3) };
    }
    if fd < 0 {
        STDERR.store(NOWHERE, Ordering::Release);
        return NOWHERE;
    }
    STDERR_DEV.store(id.dev, Ordering::Relaxed);
    STDERR_INO.store(id.ino, Ordering::Relaxed);
    STDERR.store(fd, Ordering::Release);
    fd
}

/// Is `level` on? One relaxed load once the configuration has been read.
#[inline(always)]
pub fn enabled(level: Level) -> bool {
    let current = LEVEL.load(Ordering::Relaxed);
    if current == UNSET {
        return init_level() >= level as u8;
    }
    current >= level as u8
}

#[cold]
fn init_level() -> u8 {
    let cfg = config::get();
    let text = cfg.log_level as u8;
    let gate = if RECORDER.get().is_some() {
        text.max(Level::Debug as u8)
    } else {
        text
    };
    crate::log_queue::register(crate::log_queue::Hooks {
        write: write_batch,
        dropped: say_dropped,
        render: entry::render,
    });
    TEXT.store(text, Ordering::Relaxed);
    LEVEL.store(gate, Ordering::Relaxed);
    // The fast paths leave the gate only when a line (or a trace record)
    // may be written.
    if gate < Level::Debug as u8 {
        crate::gate::clear(crate::gate::LOG);
    }
    for p in &cfg.problems {
        line(Level::Warn, format_args!("{p}"));
    }
    gate
}

/// Where timed calls go besides the text log: the binary trace's entry
/// point (`trace::call`), registered at load when tracing is on (the
/// logger knows nothing else of the trace). Times are `clock::now()`'s.
pub type Recorder =
    fn(start: u64, end: u64, fmt::Arguments<'_>, fmt::Arguments<'_>, failed: bool, errno: i32);
static RECORDER: std::sync::OnceLock<Recorder> = std::sync::OnceLock::new();

/// Sends every timed call to `recorder` from now on: the gate opens at
/// debug (calls are timed and their text assembled), the text log keeps
/// its own level.
pub fn record_calls_with(recorder: Recorder) {
    let _ = RECORDER.set(recorder);
    if LEVEL.load(Ordering::Relaxed) != UNSET {
        LEVEL.fetch_max(Level::Debug as u8, Ordering::Relaxed);
    }
}

/// Is `level` on for the text log itself (not only for the trace)?
pub fn text_enabled(level: Level) -> bool {
    if TEXT.load(Ordering::Relaxed) == UNSET {
        init_level();
    }
    TEXT.load(Ordering::Relaxed) >= level as u8
}

/// CLOCK_MONOTONIC in ns (the clock calls are timed with).
pub fn monotonic_ns() -> u64 {
    clock_ns(libc::CLOCK_MONOTONIC)
}

/// A clock in ns.
pub fn clock_ns(clock: libc::clockid_t) -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: ts is a valid out-pointer; an unknown clock leaves it 0.
    unsafe { libc::clock_gettime(clock, &mut ts) };
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

/// The pid, read once (a system call per log line would double its cost);
/// reset in a forked child.
static PID: AtomicI32 = AtomicI32::new(0);

fn pid() -> i32 {
    match PID.load(Ordering::Relaxed) {
        0 => {
            // SAFETY: getpid cannot fail.
            let pid = unsafe { libc::getpid() };
            PID.store(pid, Ordering::Relaxed);
            pid
        }
        pid => pid,
    }
}

/// After `fork()`: the child has a new pid, and a child whose log file name
/// has `%p` opens its own file.
pub fn after_fork_in_child() {
    PID.store(0, Ordering::Relaxed);
    OPENING.store(false, Ordering::Relaxed);
    if config::get()
        .log_file
        .as_ref()
        .is_some_and(|t| t.as_encoded_bytes().windows(2).any(|w| w == b"%p"))
    {
        FD.store(UNOPENED, Ordering::Release);
    }
}

/// The descriptor to write a line to, if any. When logging is on this
/// costs one `fstat` per line: the check that the descriptor still is the
/// shim's file.
fn output() -> Option<i32> {
    let fd = FD.load(Ordering::Acquire);
    if still_ours(fd) {
        return Some(fd);
    }
    reopen(fd)
}

/// Is `fd` (the shim's output) still the file it was opened on? One
/// `fstat`: a program may have closed it and reused the number.
fn still_ours(fd: i32) -> bool {
    fd >= 0
        && Identity::of(fd)
            == Some(Identity {
                dev: FD_DEV.load(Ordering::Relaxed),
                ino: FD_INO.load(Ordering::Relaxed),
            })
}

/// Can a line be written without allocating? Yes when the output is open
/// already, or is stderr; opening a log file expands its name on the heap.
pub fn writable_without_allocating() -> bool {
    if config::get().log_file.is_none() {
        return true;
    }
    let fd = FD.load(Ordering::Acquire);
    still_ours(fd)
}

/// Opens the output: on first use, for a `%p` file after fork, and when
/// the program closed the descriptor (or closed it and reused the number).
/// A stale descriptor is never closed: its number may be the program's now.
#[cold]
fn reopen(seen: i32) -> Option<i32> {
    let mut tries = 0;
    while OPENING.swap(true, Ordering::Acquire) {
        tries += 1;
        if tries > 1000 {
            return None;
        }
        // SAFETY: sched_yield has no preconditions.
        unsafe { libc::sched_yield() };
    }
    let mut problem = None;
    let now = FD.load(Ordering::Acquire);
    let fd = if now != seen {
        // Another thread reopened it meanwhile.
        now
    } else if seen == NOWHERE {
        NOWHERE
    } else {
        let opened = config::get().log_file.as_ref().and_then(|template| {
            let path = config::expand_pid(template);
            crate::files::open_log(&path)
                .map_err(|e| {
                    problem = Some(format!(
                        "IBV_SHIM_LOG_FILE={}: {e}; logging to stderr",
                        path.to_string_lossy()
                    ))
                })
                .ok()
        });
        let (fd, id) = opened.unwrap_or_else(stderr);
        FD_DEV.store(id.dev, Ordering::Relaxed);
        FD_INO.store(id.ino, Ordering::Relaxed);
        FD.store(fd, Ordering::Release);
        fd
    };
    OPENING.store(false, Ordering::Release);
    // A warning: the lines still go somewhere (stderr).
    if let Some(p) = problem {
        line(Level::Warn, format_args!("{p}"));
    }
    (fd >= 0).then_some(fd)
}

/// The shim's duplicate of the original stderr while it still is that
/// file (made again from fd 2 if the program closed the duplicate but fd 2
/// still is the original); `NOWHERE` otherwise.
fn stderr() -> (i32, Identity) {
    let mut fd = STDERR.load(Ordering::Acquire);
    if fd == UNTRIED {
        fd = keep_stderr();
    }
    let id = Identity {
        dev: STDERR_DEV.load(Ordering::Relaxed),
        ino: STDERR_INO.load(Ordering::Relaxed),
    };
    if fd == NOWHERE {
        return (NOWHERE, id);
    }
    if Identity::of(fd) == Some(id) {
        return (fd, id);
    }
    if Identity::of(libc::STDERR_FILENO) == Some(id) {
        let again = keep_stderr();
        if again >= 0 {
            return (again, id);
        }
    }
    STDERR.store(NOWHERE, Ordering::Release);
    (NOWHERE, id)
}

/// A fixed-size line buffer on the stack; output past its end is cut.
///
/// The buffer is left uninitialised (zeroing 1 KiB per line cost more than
/// formatting the prefix): only `buf[..len]` is ever read.
pub struct LineBuf {
    buf: std::mem::MaybeUninit<[u8; LINE_MAX]>,
    len: usize,
    truncated: bool,
}

const LINE_MAX: usize = 1024;

impl LineBuf {
    pub fn new() -> Self {
        LineBuf {
            buf: std::mem::MaybeUninit::uninit(),
            len: 0,
            truncated: false,
        }
    }

    pub fn as_bytes(&self) -> &[u8] {
        // SAFETY: the first `len` bytes were written by `append`.
        unsafe { std::slice::from_raw_parts(self.buf.as_ptr().cast::<u8>(), self.len) }
    }

    /// Appends what fits, keeping `reserve` bytes free at the end.
    fn append(&mut self, bytes: &[u8], reserve: usize) {
        let room = LINE_MAX - reserve - self.len;
        let n = bytes.len().min(room);
        // SAFETY: len + n <= LINE_MAX, so the copy stays inside the buffer.
        unsafe {
            std::ptr::copy_nonoverlapping(
                bytes.as_ptr(),
                self.buf.as_mut_ptr().cast::<u8>().add(self.len),
                n,
            )
        };
        self.len += n;
        self.truncated |= n < bytes.len();
    }

    /// Appends bytes the shim produced itself (ASCII): no UTF-8 check.
    /// Keeps 4 bytes for "...\n".
    pub fn push(&mut self, bytes: &[u8]) {
        self.append(bytes, 4);
    }

    /// Ends the line: `...` when it was cut, and the newline.
    pub fn finish(&mut self) {
        if self.truncated {
            self.append(b"...", 0);
        }
        self.append(b"\n", 0);
    }
}

/// A number in decimal, formatted on the stack without core::fmt.
pub struct Dec {
    buf: [u8; 20],
    start: usize,
}

impl Dec {
    pub fn new(n: u64) -> Dec {
        Dec::padded(n, 1)
    }

    /// At least `width` digits, zero-padded (width <= 20). Two digits per
    /// division: every log line has six numbers or more.
    pub fn padded(mut n: u64, width: usize) -> Dec {
        const PAIRS: &[u8; 200] = b"0001020304050607080910111213141516171819\
              2021222324252627282930313233343536373839\
              4041424344454647484950515253545556575859\
              6061626364656667686970717273747576777879\
              8081828384858687888990919293949596979899";
        // Zeros already: padding only moves the start.
        let mut d = Dec {
            buf: [b'0'; 20],
            start: 20,
        };
        while n >= 100 {
            let r = (n % 100) as usize * 2;
            n /= 100;
            d.start -= 2;
            d.buf[d.start..d.start + 2].copy_from_slice(&PAIRS[r..r + 2]);
        }
        if n >= 10 {
            let r = n as usize * 2;
            d.start -= 2;
            d.buf[d.start..d.start + 2].copy_from_slice(&PAIRS[r..r + 2]);
        } else {
            d.start -= 1;
            d.buf[d.start] = b'0' + n as u8;
        }
        d.start = d.start.min(20 - width.clamp(1, 20));
        d
    }

    pub fn as_bytes(&self) -> &[u8] {
        &self.buf[self.start..]
    }

    pub fn as_str(&self) -> &str {
        // SAFETY: only ASCII digits are ever written.
        unsafe { std::str::from_utf8_unchecked(self.as_bytes()) }
    }
}

/// A number in lower-case hex (`0x` prefix optional, zero-padded to `width`).
pub struct Hex {
    buf: [u8; 18],
    start: usize,
}

impl Hex {
    pub fn new(mut n: u64, width: usize, prefix: bool) -> Hex {
        let mut h = Hex {
            buf: [b'0'; 18],
            start: 18,
        };
        // The digit count first (no per-digit bound check): this runs for
        // every pointer of every logged or traced call.
        let digits = ((64 - n.leading_zeros() as usize).div_ceil(4)).max(width.clamp(1, 16));
        h.start = 18 - digits;
        for b in h.buf[h.start..].iter_mut().rev() {
            *b = b"0123456789abcdef"[(n & 15) as usize];
            n >>= 4;
        }
        if prefix {
            h.start -= 2;
            h.buf[h.start] = b'0';
            h.buf[h.start + 1] = b'x';
        }
        h
    }

    pub fn as_str(&self) -> &str {
        // SAFETY: only ASCII hex digits and 'x' are ever written.
        unsafe { std::str::from_utf8_unchecked(&self.buf[self.start..]) }
    }
}

impl Default for LineBuf {
    fn default() -> Self {
        Self::new()
    }
}

impl fmt::Write for LineBuf {
    fn write_str(&mut self, s: &str) -> fmt::Result {
        // Keep 4 bytes for "...\n".
        self.push(s.as_bytes());
        Ok(())
    }
}

fn now() -> (i64, i64) {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: ts is a valid out-pointer; CLOCK_REALTIME always exists.
    unsafe { libc::clock_gettime(libc::CLOCK_REALTIME, &mut ts) };
    (ts.tv_sec, ts.tv_nsec / 1000)
}

/// Writes one line at `level` (the caller has checked `enabled`). errno is
/// left as it was.
pub fn line(level: Level, args: fmt::Arguments<'_>) {
    // The gate may be at debug for the trace alone: info and debug lines
    // are then checked against the text log's own level (warnings and
    // errors keep going out as they always did).
    if level >= Level::Info && !text_enabled(level) {
        return;
    }
    let saved = crate::errno::Errno::save();
    let mut b = LineBuf::new();
    let (secs, micros) = now();
    prefix(
        &mut b,
        secs as u64,
        micros as u64,
        crate::thread::tid(),
        level,
    );
    let _ = b.write_fmt(args);
    b.finish();
    // Debug and trace lines go to the writer thread; the rest (and every
    // line in synchronous mode) are written here, after what is queued.
    open_here();
    if level < Level::Debug || !crate::log_queue::push(b.as_bytes()) {
        crate::log_queue::flush();
        write_out(b.as_bytes());
    }
    saved.restore();
}

/// `ibv-shim <secs>.<micros> <pid>:<tid> <LEVEL> `, by hand: core::fmt's
/// padded integers cost more than the rest of a typical line.
pub fn prefix(b: &mut LineBuf, secs: u64, micros: u64, tid: i32, level: Level) {
    b.push(b"ibv-shim ");
    b.push(Dec::new(secs).as_bytes());
    b.push(b".");
    b.push(Dec::padded(micros, 6).as_bytes());
    b.push(b" ");
    b.push(Dec::new(pid() as u64).as_bytes());
    b.push(b":");
    b.push(Dec::new(tid as u64).as_bytes());
    b.push(b" ");
    b.push(level.name().as_bytes());
    b.push(b" ");
}

/// Opens the log on first use, on a program thread: never on the writer's
/// (see `log_queue::REOPEN`).
#[inline(always)]
pub fn open_here() {
    if FD.load(Ordering::Relaxed) == UNOPENED {
        let _ = output();
    }
}

/// The writer thread's batch (`may_open` false) or a program thread's
/// flush of the queue: `false` when the log is gone and this thread may
/// not reopen it (the lines stay queued).
fn write_batch(bytes: &[u8], may_open: bool) -> bool {
    if may_open {
        write_out(bytes);
        return true;
    }
    let fd = FD.load(Ordering::Acquire);
    let ours = still_ours(fd);
    if ours {
        write_all(fd, bytes);
    }
    ours
}

/// Writes whole lines to the output, after one check that it still is the
/// shim's file (reopening it when not).
pub fn write_out(bytes: &[u8]) {
    let Some(fd) = output() else { return };
    write_all(fd, bytes);
}

fn write_all(fd: i32, mut bytes: &[u8]) {
    while !bytes.is_empty() {
        // SAFETY: the slice is valid for its length. A failed write of log
        // lines is not worth failing the program's call over; a short one
        // (a pipe, a signal) is continued.
        let n = unsafe { libc::write(fd, bytes.as_ptr().cast(), bytes.len()) };
        if n <= 0 {
            return;
        }
        bytes = &bytes[n as usize..];
    }
}

fn say_dropped(n: u64) {
    line(
        Level::Warn,
        format_args!(
            "{n} debug and trace lines dropped: the log's queue stayed full (a slow log file?)"
        ),
    );
}

/// Writes a multi-line block (a report) with one `write(2)` per line.
pub fn block(level: Level, text: &str) {
    for l in text.lines() {
        line(level, format_args!("{l}"));
    }
}

/// `log!(Level::Warn, "format {}", args)`: formats only when the level is on.
#[macro_export]
macro_rules! log {
    ($level:expr, $($arg:tt)*) => {
        if $crate::log::enabled($level) {
            $crate::log::line($level, format_args!($($arg)*));
        }
    };
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn long_lines_are_cut_not_overflowed() {
        let mut b = LineBuf::new();
        let long = "x".repeat(5000);
        write!(b, "{long}").unwrap();
        assert!(b.truncated);
        assert_eq!(b.as_bytes().len(), 1020);
    }

    #[test]
    fn numbers_format_like_core_fmt() {
        for n in [0u64, 7, 10, 999_999, 123_456_789, u64::MAX] {
            assert_eq!(Dec::new(n).as_str(), n.to_string());
            assert_eq!(
                Dec::padded(n % 1_000_000, 6).as_str(),
                format!("{:06}", n % 1_000_000)
            );
            assert_eq!(Hex::new(n, 16, false).as_str(), format!("{n:016x}"));
            assert_eq!(Hex::new(n, 1, true).as_str(), format!("{n:#x}"));
        }
    }

    #[test]
    fn levels_parse() {
        assert_eq!(Level::parse("DEBUG"), Some(Level::Debug));
        assert_eq!(Level::parse("off"), Some(Level::Off));
        assert_eq!(Level::parse("loud"), None);
        assert!(Level::Trace > Level::Debug);
    }
}
