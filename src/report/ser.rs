//! A serde `Serializer` that writes compact JSON for the exit report, made
//! for a million objects: struct field names (static identifiers, never
//! escaped) are copied whole, a string is scanned once and copied whole
//! when it needs no escape, integers are formatted without `fmt`. It
//! writes what serde_json would (the launcher and the tests read the
//! output back with serde_json and the report model), one object of the
//! top-level list a line. Only what the report model uses is supported;
//! anything else is an error, never a panic.
//!
//! This file: the writer and its escaping and number formatting;
//! `serializer`: the serde data model mapped onto it.

use std::fmt;
use std::io::{self, Write};

use serde::ser::{self, Serialize};

mod serializer;
#[cfg(test)]
mod tests;

fn plain(b: u8) -> bool {
    b >= 0x20 && b != b'"' && b != b'\\'
}

/// Whether `bytes` has a byte JSON must escape, eight at a time (the
/// classic "has a zero byte" tests; a false alarm would only take the
/// slow, exact path).
fn needs_escape(bytes: &[u8]) -> bool {
    const ONES: u64 = 0x0101_0101_0101_0101;
    const HIGH: u64 = 0x8080_8080_8080_8080;
    let below = |x: u64, n: u8| x.wrapping_sub(ONES * u64::from(n)) & !x & HIGH != 0;
    let has = |x: u64, b: u8| below(x ^ (ONES * u64::from(b)), 1);
    let mut chunks = bytes.chunks_exact(8);
    for c in &mut chunks {
        let Ok(eight) = <[u8; 8]>::try_from(c) else {
            return true;
        };
        let x = u64::from_le_bytes(eight);
        if below(x, 0x20) || has(x, b'"') || has(x, b'\\') {
            return true;
        }
    }
    chunks.remainder().iter().any(|&b| !plain(b))
}

/// `v` in milliseconds, when it is a whole number of them (the report's
/// times) between 1 s and 2^33 s: its shortest round-trip digits are then
/// those of `ms / 1000` (a double's step there is under 2e-6, so no shorter
/// decimal reads back as `v`), written without ryu.
fn whole_ms(v: f64) -> Option<u64> {
    if !(1.0..8_589_934_592.0).contains(&v) {
        return None;
    }
    let ms = (v * 1000.0).round();
    (ms / 1000.0 == v).then_some(ms as u64)
}

/// Why writing stopped: the file's error, or a type the report model
/// does not use.
#[derive(Debug)]
pub(super) enum Error {
    Io(io::Error),
    Unsupported(&'static str),
    Custom,
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Error::Io(e) => e.fmt(f),
            Error::Unsupported(what) => write!(f, "cannot write {what} as JSON"),
            Error::Custom => f.write_str("a value could not be written"),
        }
    }
}

impl std::error::Error for Error {}

impl ser::Error for Error {
    fn custom<T: fmt::Display>(_: T) -> Error {
        // Formatting the message would allocate: its kind is enough.
        Error::Custom
    }
}

impl From<io::Error> for Error {
    fn from(e: io::Error) -> Error {
        Error::Io(e)
    }
}

impl From<Error> for io::Error {
    fn from(e: Error) -> io::Error {
        match e {
            Error::Io(e) => e,
            other => io::Error::other(other.to_string()),
        }
    }
}

type Result<T = ()> = std::result::Result<T, Error>;

pub(super) struct JsonWriter<W> {
    out: W,
    /// Objects and lists open around what is written now.
    depth: usize,
    /// Writing a `RAW_FIELDS` newtype: its string is copied as it is.
    verbatim: bool,
    /// Writing an `ADDRESS` newtype: its number is written as `"0x..."`.
    hex: bool,
}

impl<W: Write> JsonWriter<W> {
    pub(super) fn new(out: W) -> Self {
        JsonWriter {
            out,
            depth: 0,
            verbatim: false,
            hex: false,
        }
    }

    fn raw(&mut self, b: &[u8]) -> Result {
        self.out.write_all(b).map_err(Error::Io)
    }

    /// `"0x..."` (lowercase, as `report_model::Address` writes it).
    fn hex(&mut self, mut v: u64) -> Result {
        const HEX: &[u8; 16] = b"0123456789abcdef";
        let mut b = [0u8; 20];
        let mut i = b.len() - 1;
        b[i] = b'"';
        loop {
            i -= 1;
            b[i] = HEX[(v & 15) as usize];
            v >>= 4;
            if v == 0 {
                break;
            }
        }
        i -= 3;
        b[i..i + 3].copy_from_slice(b"\"0x");
        self.raw(&b[i..])
    }

    /// Decimal, two digits a division (keys and offsets have 5 to 10).
    fn uint(&mut self, mut v: u64) -> Result {
        const PAIRS: &[u8; 200] = b"0001020304050607080910111213141516171819\
            2021222324252627282930313233343536373839\
            4041424344454647484950515253545556575859\
            6061626364656667686970717273747576777879\
            8081828384858687888990919293949596979899";
        let mut b = [0u8; 20];
        let mut i = b.len();
        while v >= 100 {
            let p = (v % 100) as usize * 2;
            v /= 100;
            i -= 2;
            b[i..i + 2].copy_from_slice(&PAIRS[p..p + 2]);
        }
        if v >= 10 {
            let p = v as usize * 2;
            i -= 2;
            b[i..i + 2].copy_from_slice(&PAIRS[p..p + 2]);
        } else {
            i -= 1;
            b[i] = b'0' + v as u8;
        }
        self.raw(&b[i..])
    }

    fn int(&mut self, v: i64) -> Result {
        if v < 0 {
            self.raw(b"-")?;
        }
        self.uint(v.unsigned_abs())
    }

    /// Milliseconds as seconds, as ryu writes them: `s.f` with the
    /// fraction's trailing zeros dropped (one digit at least).
    fn seconds(&mut self, ms: u64) -> Result {
        self.uint(ms / 1000)?;
        let f = ms % 1000;
        let digit = |d: u64| b'0' + (d % 10) as u8;
        let digits = [b'.', digit(f / 100), digit(f / 10), digit(f)];
        let keep = match (f % 100, f % 10) {
            (0, _) => 2,
            (_, 0) => 3,
            _ => 4,
        };
        self.raw(&digits[..keep])
    }

    /// A JSON string: one scan, then one copy unless something needs an
    /// escape.
    fn string(&mut self, s: &str) -> Result {
        if self.verbatim {
            return self.raw(s.as_bytes());
        }
        self.raw(b"\"")?;
        let bytes = s.as_bytes();
        if !needs_escape(bytes) {
            self.raw(bytes)?;
        } else {
            let mut start = 0;
            for (i, &b) in bytes.iter().enumerate() {
                if plain(b) {
                    continue;
                }
                self.raw(&bytes[start..i])?;
                let mut esc = [b'\\', b'u', b'0', b'0', 0, 0];
                let esc: &[u8] = match b {
                    b'"' => b"\\\"",
                    b'\\' => b"\\\\",
                    b'\n' => b"\\n",
                    b'\t' => b"\\t",
                    b'\r' => b"\\r",
                    _ => {
                        const HEX: &[u8; 16] = b"0123456789abcdef";
                        esc[4] = HEX[(b >> 4) as usize];
                        esc[5] = HEX[(b & 15) as usize];
                        &esc
                    }
                };
                self.raw(esc)?;
                start = i + 1;
            }
            self.raw(&bytes[start..])?;
        }
        self.raw(b"\"")
    }
}

/// `v`'s fields as this writer writes them, without the braces: the text
/// of a `RAW_FIELDS` part. `None` when `room` bytes cannot be had or are
/// not enough (the fields are then written each time).
pub(super) fn render_fields<T: Serialize>(v: &T, room: usize) -> Option<String> {
    let mut buf = Vec::new();
    crate::oom::fallibly(|| buf.try_reserve_exact(room))?;
    v.serialize(&mut JsonWriter::new(Fixed(&mut buf))).ok()?;
    // `{...}`: the fields are what is inside.
    if buf.first() != Some(&b'{') || buf.pop() != Some(b'}') {
        return None;
    }
    buf.remove(0);
    String::from_utf8(buf).ok()
}

/// A buffer that refuses what does not fit rather than grow.
struct Fixed<'b>(&'b mut Vec<u8>);

impl Write for Fixed<'_> {
    fn write(&mut self, b: &[u8]) -> io::Result<usize> {
        if self.0.capacity() - self.0.len() < b.len() {
            return Err(io::ErrorKind::WriteZero.into());
        }
        self.0.extend_from_slice(b);
        Ok(b.len())
    }
    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}
