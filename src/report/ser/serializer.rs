//! The serde `Serializer` impl of `JsonWriter`: each serde data model
//! item mapped to the writer's JSON, objects and lists through `Compound`
//! (its separators, one top-level element a line), `RAW_FIELDS` copied
//! whole; what the report model does not use is an error.

use std::io::Write;

use serde::ser::{self, Serialize};

use super::{whole_ms, Error, JsonWriter, Result};

use report_model::{ADDRESS, RAW_FIELDS};

/// An object or list being written.
pub(in crate::report) struct Compound<'a, W> {
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

impl<W: Write> JsonWriter<W> {
    /// Opens an object or list with `b`.
    fn open(&mut self, b: &'static [u8]) -> Result<Compound<'_, W>> {
        self.depth += 1;
        self.raw(b)?;
        Ok(Compound {
            w: self,
            first: true,
        })
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
