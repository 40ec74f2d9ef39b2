//! A serde `Serializer` that writes compact JSON for the exit report, made
//! for a million objects: struct field names (static identifiers, never
//! escaped) are copied whole, a string is scanned once and copied whole
//! when it needs no escape, integers are formatted without `fmt`. It
//! writes what serde_json would (the launcher and the tests read the
//! output back with serde_json and the report model), one object of the
//! top-level list a line. Only what the report model uses is supported;
//! anything else is an error, never a panic.

use std::fmt;
use std::io::{self, Write};

use serde::ser::{self, Serialize};

use report_model::{ADDRESS, RAW_FIELDS};

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

    fn open(&mut self, b: &'static [u8]) -> Result<Compound<'_, W>> {
        self.depth += 1;
        self.raw(b)?;
        Ok(Compound {
            w: self,
            first: true,
        })
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

/// An object or list being written.
pub(super) struct Compound<'a, W> {
    w: &'a mut JsonWriter<W>,
    first: bool,
}

impl<W: Write> Compound<'_, W> {
    /// The separator before the next element; the document's own list
    /// (depth 1 inside the top object) has one element a line.
    fn element(&mut self) -> Result {
        let top = self.w.depth == 2;
        let sep: &[u8] = match (self.first, top) {
            (true, false) => b"",
            (false, false) => b",",
            (true, true) => b"\n",
            (false, true) => b",\n",
        };
        self.first = false;
        self.w.raw(sep)
    }

    fn field<T: ?Sized + Serialize>(&mut self, key: &'static str, value: &T) -> Result {
        if key == RAW_FIELDS {
            // Fields rendered before (by this writer): copied whole.
            self.w.raw(if self.first { b"" } else { b"," })?;
            self.first = false;
            return value.serialize(&mut *self.w);
        }
        // Field names are Rust identifiers: nothing to escape.
        debug_assert!(key.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_'));
        self.w.raw(if self.first { b"\"" } else { b",\"" })?;
        self.first = false;
        self.w.raw(key.as_bytes())?;
        self.w.raw(b"\":")?;
        value.serialize(&mut *self.w)
    }

    fn close(self, b: &'static [u8], list: bool) -> Result {
        let top = list && self.w.depth == 2 && !self.first;
        self.w.depth -= 1;
        self.w.raw(if top { b"\n" } else { b"" })?;
        self.w.raw(b)
    }
}

impl<'a, W: Write> ser::Serializer for &'a mut JsonWriter<W> {
    type Ok = ();
    type Error = Error;
    type SerializeSeq = Compound<'a, W>;
    type SerializeTuple = Compound<'a, W>;
    type SerializeTupleStruct = Compound<'a, W>;
    type SerializeTupleVariant = ser::Impossible<(), Error>;
    type SerializeMap = Compound<'a, W>;
    type SerializeStruct = Compound<'a, W>;
    type SerializeStructVariant = ser::Impossible<(), Error>;

    /// Only inside an `ADDRESS`: what asks is then an address, which gives
    /// its number.
    fn is_human_readable(&self) -> bool {
        !self.hex
    }
    fn serialize_bool(self, v: bool) -> Result {
        self.raw(if v { b"true" } else { b"false" })
    }
    fn serialize_i8(self, v: i8) -> Result {
        self.int(v.into())
    }
    fn serialize_i16(self, v: i16) -> Result {
        self.int(v.into())
    }
    fn serialize_i32(self, v: i32) -> Result {
        self.int(v.into())
    }
    fn serialize_i64(self, v: i64) -> Result {
        self.int(v)
    }
    fn serialize_u8(self, v: u8) -> Result {
        self.uint(v.into())
    }
    fn serialize_u16(self, v: u16) -> Result {
        self.uint(v.into())
    }
    fn serialize_u32(self, v: u32) -> Result {
        self.uint(v.into())
    }
    fn serialize_u64(self, v: u64) -> Result {
        match self.hex {
            true => self.hex(v),
            false => self.uint(v),
        }
    }
    fn serialize_f32(self, v: f32) -> Result {
        self.serialize_f64(v.into())
    }
    fn serialize_f64(self, v: f64) -> Result {
        if let Some(ms) = whole_ms(v) {
            return self.seconds(ms);
        }
        // As serde_json: shortest round-trip digits, null when not finite.
        match v.is_finite() {
            true => {
                let mut b = ryu::Buffer::new();
                self.raw(b.format_finite(v).as_bytes())
            }
            false => self.raw(b"null"),
        }
    }
    fn serialize_char(self, v: char) -> Result {
        self.string(v.encode_utf8(&mut [0; 4]))
    }
    fn serialize_str(self, v: &str) -> Result {
        self.string(v)
    }
    fn serialize_bytes(self, _: &[u8]) -> Result {
        Err(Error::Unsupported("bytes"))
    }
    fn serialize_none(self) -> Result {
        self.raw(b"null")
    }
    fn serialize_some<T: ?Sized + Serialize>(self, v: &T) -> Result {
        v.serialize(self)
    }
    fn serialize_unit(self) -> Result {
        self.raw(b"null")
    }
    fn serialize_unit_struct(self, _: &'static str) -> Result {
        self.raw(b"null")
    }
    fn serialize_unit_variant(self, _: &'static str, _: u32, variant: &'static str) -> Result {
        self.string(variant)
    }
    fn serialize_newtype_struct<T: ?Sized + Serialize>(self, name: &'static str, v: &T) -> Result {
        if name == ADDRESS {
            // Its number, written here: no text to format and check.
            self.hex = true;
            let done = v.serialize(&mut *self);
            self.hex = false;
            return done;
        }
        if name != RAW_FIELDS {
            return v.serialize(self);
        }
        self.verbatim = true;
        let done = v.serialize(&mut *self);
        self.verbatim = false;
        done
    }
    fn serialize_newtype_variant<T: ?Sized + Serialize>(
        self,
        _: &'static str,
        _: u32,
        _: &'static str,
        _: &T,
    ) -> Result {
        Err(Error::Unsupported("an enum variant with data"))
    }
    fn serialize_seq(self, _: Option<usize>) -> Result<Compound<'a, W>> {
        self.open(b"[")
    }
    fn serialize_tuple(self, _: usize) -> Result<Compound<'a, W>> {
        self.open(b"[")
    }
    fn serialize_tuple_struct(self, _: &'static str, _: usize) -> Result<Compound<'a, W>> {
        self.open(b"[")
    }
    fn serialize_tuple_variant(
        self,
        _: &'static str,
        _: u32,
        _: &'static str,
        _: usize,
    ) -> Result<Self::SerializeTupleVariant> {
        Err(Error::Unsupported("an enum variant with data"))
    }
    fn serialize_map(self, _: Option<usize>) -> Result<Compound<'a, W>> {
        self.open(b"{")
    }
    fn serialize_struct(self, _: &'static str, _: usize) -> Result<Compound<'a, W>> {
        self.open(b"{")
    }
    fn serialize_struct_variant(
        self,
        _: &'static str,
        _: u32,
        _: &'static str,
        _: usize,
    ) -> Result<Self::SerializeStructVariant> {
        Err(Error::Unsupported("an enum variant with data"))
    }
}

impl<W: Write> ser::SerializeSeq for Compound<'_, W> {
    type Ok = ();
    type Error = Error;
    fn serialize_element<T: ?Sized + Serialize>(&mut self, v: &T) -> Result {
        self.element()?;
        v.serialize(&mut *self.w)
    }
    fn end(self) -> Result {
        self.close(b"]", true)
    }
}

impl<W: Write> ser::SerializeTuple for Compound<'_, W> {
    type Ok = ();
    type Error = Error;
    fn serialize_element<T: ?Sized + Serialize>(&mut self, v: &T) -> Result {
        ser::SerializeSeq::serialize_element(self, v)
    }
    fn end(self) -> Result {
        ser::SerializeSeq::end(self)
    }
}

impl<W: Write> ser::SerializeTupleStruct for Compound<'_, W> {
    type Ok = ();
    type Error = Error;
    fn serialize_field<T: ?Sized + Serialize>(&mut self, v: &T) -> Result {
        ser::SerializeSeq::serialize_element(self, v)
    }
    fn end(self) -> Result {
        ser::SerializeSeq::end(self)
    }
}

impl<W: Write> ser::SerializeMap for Compound<'_, W> {
    type Ok = ();
    type Error = Error;
    fn serialize_key<T: ?Sized + Serialize>(&mut self, key: &T) -> Result {
        // Keys are strings (kind names); written as any string is.
        self.w.raw(if self.first { b"" } else { b"," })?;
        self.first = false;
        key.serialize(&mut *self.w)?;
        self.w.raw(b":")
    }
    fn serialize_value<T: ?Sized + Serialize>(&mut self, v: &T) -> Result {
        v.serialize(&mut *self.w)
    }
    fn end(self) -> Result {
        self.close(b"}", false)
    }
}

impl<W: Write> ser::SerializeStruct for Compound<'_, W> {
    type Ok = ();
    type Error = Error;
    fn serialize_field<T: ?Sized + Serialize>(&mut self, key: &'static str, v: &T) -> Result {
        self.field(key, v)
    }
    fn end(self) -> Result {
        self.close(b"}", false)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn both<T: Serialize>(v: &T) -> (String, String) {
        let mut ours = Vec::new();
        v.serialize(&mut JsonWriter::new(&mut ours)).unwrap();
        (
            String::from_utf8(ours).unwrap(),
            serde_json::to_string(v).unwrap(),
        )
    }

    /// Below the top level, the output is serde_json's, byte for byte.
    #[test]
    fn writes_what_serde_json_writes() {
        let v = serde_json::json!({
            "s": "a\"b\\c\n\r\t\u{1}\u{1f}é€",
            "n": [0, 1, -1, u64::MAX, i64::MIN, 1.5, 1796102249.959, 0.1, null, true, false],
            "o": {"k": {"e": [], "f": {}}},
        });
        let nested = serde_json::json!([v.clone()]);
        let (ours, theirs) = both(&nested);
        assert_eq!(ours, theirs);
        let doc = serde_json::json!({ "objects": [v.clone(), v.clone()], "empty": [] });
        let (ours, theirs) = both(&doc);
        // The top object's lists: one element a line.
        assert_eq!(ours.replace('\n', ""), theirs);
        assert_eq!(ours.matches('\n').count(), 3, "{ours}");
        let back: serde_json::Value = serde_json::from_str(&ours).unwrap();
        assert_eq!(back, doc);
        // Addresses: ours writes the number, serde_json the model's text.
        use report_model::Address;
        let addrs = [0, 1, 0xf, 0x10, 0x7f00_0000_1000, u64::MAX].map(Address);
        let (ours, theirs) = both(&[[(addrs, Some(Address(0x5000)), None::<Address>)]]);
        assert_eq!(ours.replace('\n', ""), theirs);
        assert!(ours.contains("\"0xffffffffffffffff\""), "{ours}");
        // A report read back with the model writes as serde_json writes it.
        let (ours, theirs) = both(&report_model::Found::Close);
        assert_eq!(ours, theirs);
    }

    /// An object written with its device and site rendered before reads
    /// exactly as serde_json writes it whole, escapes included.
    #[test]
    fn rendered_parts_write_what_serde_json_writes() {
        use report_model::{Address, Created, Detail, Found, Object, PdFields, Rendered};
        let object = Object {
            handle: Address(0x10),
            context: Some(Address(0x20)),
            device: Some("mlx5_\"0\u{1}".into()),
            guid: None,
            vendor: Some("NVIDIA/Mellanox".into()),
            parent: None,
            detail: Detail::Pd(PdFields { handle: 3 }),
            created: Created {
                thread: 7,
                time: Some(1796102249.959),
                module: Some("/bin/a b\\c".into()),
                symbol: None,
                offset: Some(0x1c),
                function: Some("main".into()),
                file: None,
                line: Some(12),
                build_id: Some("8d2a".into()),
                backtrace: Some(vec!["main (a.c:3)".into()]),
            },
            found: Found::Exit,
            suppressed: false,
            kept_by: None,
        };
        let device = render_fields(&object.device_part(), 1024).unwrap();
        let site = render_fields(&object.created.site(), 1024).unwrap();
        assert!(device.starts_with("\"device\":"), "{device}");
        for parts in [
            Rendered::default(),
            Rendered {
                device: Some(&device),
                site: None,
            },
            Rendered {
                device: Some(&device),
                site: Some(&site),
            },
        ] {
            let mut ours = Vec::new();
            let with = object.with(parts);
            with.serialize(&mut JsonWriter::new(&mut ours)).unwrap();
            let ours = String::from_utf8(ours).unwrap();
            assert_eq!(ours, serde_json::to_string(&object).unwrap(), "{parts:?}");
        }
        // Too little room: not rendered (the fields are written instead).
        assert_eq!(render_fields(&object.device_part(), 8), None);
    }

    #[test]
    fn integers_are_written_as_serde_json_writes_them() {
        let mut v: Vec<u64> = (0..1000).collect();
        v.extend((0..64).flat_map(|s| [1u64 << s, (1u64 << s) - 1, (1u64 << s) + 1]));
        v.extend([99_999, 100_000, 207_287, 4_294_967_295, u64::MAX]);
        let (ours, theirs) = both(&[[v]]);
        assert_eq!(ours.replace('\n', ""), theirs);
        let i: Vec<i64> = [0, -1, -10, -99, -100, i64::MIN, i64::MAX].into();
        let (ours, theirs) = both(&[[i]]);
        assert_eq!(ours.replace('\n', ""), theirs);
    }

    /// Times (whole milliseconds) are written as ryu writes them.
    #[test]
    fn times_are_written_as_serde_json_writes_them() {
        let mut x = 0x9e37_79b9_7f4a_7c15u64;
        let mut v = vec![
            1.0,
            1.5,
            1.25,
            1.125,
            10.0,
            1796102249.959,
            1796108709.21,
            1796108709.0,
        ];
        v.extend([
            8_589_934_591.999,
            8_589_934_592.0,
            0.5,
            0.001,
            0.0,
            -1.5,
            1e300,
        ]);
        for _ in 0..200_000 {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            let ms = x % 9_000_000_000_000;
            v.push(ms as f64 / 1000.0);
            v.push(f64::from_bits(x >> 2));
        }
        let (ours, theirs) = both(&[[v]]);
        assert_eq!(ours.replace('\n', ""), theirs);
    }

    #[test]
    fn the_escape_scan_finds_every_byte_that_needs_one() {
        for len in 0..20 {
            for at in 0..len {
                for b in 0u8..=255 {
                    let mut v = vec![b'a'; len];
                    v[at] = b;
                    assert_eq!(needs_escape(&v), !plain(b), "{v:?}");
                }
            }
        }
    }

    #[test]
    fn what_the_model_does_not_use_is_an_error() {
        #[derive(serde::Serialize)]
        enum E {
            V(u8),
        }
        let mut out = Vec::new();
        assert!(E::V(1).serialize(&mut JsonWriter::new(&mut out)).is_err());
    }
}
