//! The shim's logger.
//!
//! A shim logs from inside other people's threads, signal-adjacent code and
//! exit paths, so each line is formatted into a stack buffer and emitted
//! with a single `write(2)`: no allocation, no lock, and lines from
//! different threads (or, with `O_APPEND`, processes) never interleave.
//! When a level is off the only cost is one relaxed atomic load.
//!
//! Line format: `ibv-shim <secs>.<micros> <pid>:<tid> <LEVEL> <message>`.

use std::fmt::{self, Write as _};
use std::sync::atomic::{AtomicI32, AtomicU8, Ordering};

use crate::config;

/// Log levels, most severe first.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
#[repr(u8)]
pub enum Level {
    Off = 0,
    Error = 1,
    Warn = 2,
    Info = 3,
    Debug = 4,
    Trace = 5,
}

impl Level {
    pub fn parse(s: &str) -> Option<Level> {
        Some(match s.trim().to_ascii_lowercase().as_str() {
            "off" | "none" | "0" => Level::Off,
            "error" => Level::Error,
            "warn" | "warning" => Level::Warn,
            "info" => Level::Info,
            "debug" => Level::Debug,
            "trace" | "all" => Level::Trace,
            _ => return None,
        })
    }

    fn name(self) -> &'static str {
        match self {
            Level::Off => "OFF",
            Level::Error => "ERROR",
            Level::Warn => "WARN",
            Level::Info => "INFO",
            Level::Debug => "DEBUG",
            Level::Trace => "TRACE",
        }
    }
}

const UNSET: u8 = u8::MAX;
static LEVEL: AtomicU8 = AtomicU8::new(UNSET);

/// The log's file descriptor; `UNOPENED` until the first line is written.
const UNOPENED: i32 = -2;
static FD: AtomicI32 = AtomicI32::new(UNOPENED);

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
    LEVEL.store(cfg.log_level as u8, Ordering::Relaxed);
    for p in &cfg.problems {
        line(Level::Warn, format_args!("{p}"));
    }
    cfg.log_level as u8
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
    if config::get()
        .log_file
        .as_ref()
        .is_some_and(|t| t.as_encoded_bytes().windows(2).any(|w| w == b"%p"))
    {
        FD.store(UNOPENED, Ordering::Relaxed);
    }
}

#[cold]
fn open_log() -> i32 {
    let fd = match &config::get().log_file {
        None => libc::STDERR_FILENO,
        Some(template) => {
            let path = config::expand_pid(template);
            // SAFETY: path is a valid NUL-terminated string; the flags and
            // mode are plain integers.
            let fd = unsafe {
                libc::open(
                    path.as_ptr(),
                    libc::O_WRONLY | libc::O_CREAT | libc::O_APPEND | libc::O_CLOEXEC,
                    0o644 as libc::c_uint,
                )
            };
            if fd < 0 {
                libc::STDERR_FILENO
            } else {
                fd
            }
        }
    };
    // Two threads may race to open; the loser closes its descriptor.
    match FD.compare_exchange(UNOPENED, fd, Ordering::AcqRel, Ordering::Acquire) {
        Ok(_) => fd,
        Err(winner) => {
            if fd != libc::STDERR_FILENO {
                // SAFETY: fd is ours, just opened, and never published.
                unsafe { libc::close(fd) };
            }
            winner
        }
    }
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
    fn push(&mut self, bytes: &[u8]) {
        self.append(bytes, 4);
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

    /// At least `width` digits, zero-padded (width <= 20).
    pub fn padded(mut n: u64, width: usize) -> Dec {
        let mut d = Dec {
            buf: [b'0'; 20],
            start: 20,
        };
        while n > 0 || d.start > 20 - width.clamp(1, 20) {
            d.start -= 1;
            d.buf[d.start] = b'0' + (n % 10) as u8;
            n /= 10;
        }
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
        while n > 0 || h.start > 18 - width.clamp(1, 16) {
            h.start -= 1;
            h.buf[h.start] = b"0123456789abcdef"[(n & 15) as usize];
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
    let saved = crate::guard::Errno::save();
    let mut b = LineBuf::new();
    let (secs, micros) = now();
    let (pid, tid) = (pid(), crate::exports::tid());
    // The prefix by hand: core::fmt's padded integers cost more than the
    // rest of a typical line.
    b.push(b"ibv-shim ");
    b.push(Dec::new(secs as u64).as_bytes());
    b.push(b".");
    b.push(Dec::padded(micros as u64, 6).as_bytes());
    b.push(b" ");
    b.push(Dec::new(pid as u64).as_bytes());
    b.push(b":");
    b.push(Dec::new(tid as u64).as_bytes());
    b.push(b" ");
    b.push(level.name().as_bytes());
    b.push(b" ");
    let _ = b.write_fmt(args);
    if b.truncated {
        b.append(b"...", 0);
    }
    b.append(b"\n", 0);
    let mut fd = FD.load(Ordering::Relaxed);
    if fd == UNOPENED {
        fd = open_log();
    }
    // SAFETY: the buffer is valid for len bytes; a failed or short write of
    // a log line is not worth failing the program's call over.
    unsafe { libc::write(fd, b.as_bytes().as_ptr().cast(), b.len) };
    saved.restore();
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
