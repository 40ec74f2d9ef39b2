//! The leak report's model: one definition of the object kinds and of the
//! JSON document (schema `ibv-shim/leak-report/1`,
//! `docs/leak-report.schema.json`), written by the shim at exit and read
//! back by the launcher with these same types.
//!
//! The types borrow their text (`Cow`) so that the shim can stream a
//! million objects without copying a string per object.

#![forbid(unsafe_code)]
#![deny(unsafe_op_in_unsafe_fn)]
#![deny(clippy::undocumented_unsafe_blocks)]

use std::borrow::Cow;
use std::fmt;

use serde::de::{self, Deserializer, MapAccess, Visitor};
use serde::ser::{SerializeMap, SerializeStruct, Serializer};
use serde::{Deserialize, Serialize};

mod cm;
pub use cm::{CmDiagnosis, CmKind, CmObject, CmVerbs, ConnectionManager};

/// The document's `schema`.
pub const SCHEMA: &str = "ibv-shim/leak-report/1";

/// Reads a report document: its `schema` first, so that another schema's
/// document (or something that is no report at all) is refused by name,
/// then the whole document with the model's types.
pub fn parse(text: &str) -> Result<Report<'_>, String> {
    #[derive(Deserialize)]
    struct Head<'a> {
        #[serde(borrow, default)]
        schema: Option<Cow<'a, str>>,
    }
    let head: Head = serde_json::from_str(text).map_err(|e| e.to_string())?;
    match head.schema.as_deref() {
        Some(SCHEMA) => serde_json::from_str(text).map_err(|e| e.to_string()),
        Some(other) => Err(format!(
            "its schema {other:?} is not one this ibv-shim reads ({SCHEMA})"
        )),
        None => Err(format!(
            "it has no \"schema\": not an ibv-shim leak report ({SCHEMA})"
        )),
    }
}

/// What a reported object is.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Kind {
    /// A context never closed.
    Context,
    /// A list from `ibv_get_device_list` never freed.
    DeviceList,
    Pd,
    Mr,
    Cq,
    CompChannel,
    Srq,
    Qp,
    Ah,
    ImportedPd,
    ImportedMr,
    // Made only through the context's function tables (the inline verbs).
    Mw,
    Xrcd,
    Wq,
    RwqIndTable,
    Flow,
    FlowAction,
    Td,
    ParentDomain,
    Dm,
    Counters,
}

impl Kind {
    /// Every kind, in the order the reports count them.
    pub const ALL: [Kind; 21] = [
        Kind::Context,
        Kind::DeviceList,
        Kind::Pd,
        Kind::Mr,
        Kind::Cq,
        Kind::CompChannel,
        Kind::Srq,
        Kind::Qp,
        Kind::Ah,
        Kind::ImportedPd,
        Kind::ImportedMr,
        Kind::Mw,
        Kind::Xrcd,
        Kind::Wq,
        Kind::RwqIndTable,
        Kind::Flow,
        Kind::FlowAction,
        Kind::Td,
        Kind::ParentDomain,
        Kind::Dm,
        Kind::Counters,
    ];

    /// The kind's name in reports, suppression rules and the schema.
    pub const fn name(self) -> &'static str {
        match self {
            Kind::Context => "context",
            Kind::DeviceList => "device_list",
            Kind::Pd => "pd",
            Kind::Mr => "mr",
            Kind::Cq => "cq",
            Kind::CompChannel => "comp_channel",
            Kind::Srq => "srq",
            Kind::Qp => "qp",
            Kind::Ah => "ah",
            Kind::ImportedPd => "imported_pd",
            Kind::ImportedMr => "imported_mr",
            Kind::Mw => "mw",
            Kind::Xrcd => "xrcd",
            Kind::Wq => "wq",
            Kind::RwqIndTable => "rwq_ind_table",
            Kind::Flow => "flow",
            Kind::FlowAction => "flow_action",
            Kind::Td => "td",
            Kind::ParentDomain => "parent_domain",
            Kind::Dm => "dm",
            Kind::Counters => "counters",
        }
    }

    pub fn from_name(name: &str) -> Option<Kind> {
        Kind::ALL.into_iter().find(|k| k.name() == name)
    }

    /// Its place in [`Kind::ALL`].
    pub const fn index(self) -> usize {
        self as usize
    }
}

impl fmt::Display for Kind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl Serialize for Kind {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(self.name())
    }
}

impl<'de> Deserialize<'de> for Kind {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Kind, D::Error> {
        let name = Cow::<'de, str>::deserialize(d)?;
        Kind::from_name(&name).ok_or_else(|| de::Error::unknown_variant(&name, &Kind::NAMES))
    }
}

impl Kind {
    /// The names of [`Kind::ALL`].
    pub const NAMES: [&'static str; 21] = {
        let mut names = [""; 21];
        let mut i = 0;
        while i < names.len() {
            names[i] = Kind::ALL[i].name();
            i += 1;
        }
        names
    };
}

/// A pointer as the program holds it: `"0x..."` (lowercase hex).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct Address(pub u64);

impl Address {
    /// `None` for a null pointer (an `addressOrNull` in the schema).
    pub fn or_null(v: u64) -> Option<Address> {
        (v != 0).then_some(Address(v))
    }
}

impl Address {
    /// `0x...` in `buf`, without allocating (a million objects have
    /// several addresses each).
    pub fn format(self, buf: &mut [u8; 18]) -> &str {
        const HEX: &[u8; 16] = b"0123456789abcdef";
        let mut i = buf.len();
        let mut v = self.0;
        loop {
            i -= 1;
            buf[i] = HEX[(v & 15) as usize];
            v >>= 4;
            if v == 0 {
                break;
            }
        }
        buf[i - 2..i].copy_from_slice(b"0x");
        // Only ASCII was written.
        std::str::from_utf8(&buf[i - 2..]).unwrap_or_default()
    }
}

/// The name of the newtype an [`Address`] is written as: a writer that
/// knows it may ask for the number (its inner value, not human-readable, is
/// the `u64`) and write the `"0x..."` itself; any other writes the text.
pub const ADDRESS: &str = "$ibv_shim::address";

impl Serialize for Address {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_newtype_struct(ADDRESS, &Bits(self.0))
    }
}

/// An address: its text, or in a compact form its number.
struct Bits(u64);

impl Serialize for Bits {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        match s.is_human_readable() {
            true => s.serialize_str(Address(self.0).format(&mut [0; 18])),
            false => s.serialize_u64(self.0),
        }
    }
}

impl<'de> Deserialize<'de> for Address {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Address, D::Error> {
        let text = Cow::<'de, str>::deserialize(d)?;
        text.strip_prefix("0x")
            .and_then(|h| u64::from_str_radix(h, 16).ok())
            .map(Address)
            .ok_or_else(|| de::Error::invalid_value(de::Unexpected::Str(&text), &"0x and hex"))
    }
}

/// Objects that are not suppressed, by kind (indexed by [`Kind::index`]);
/// in the JSON every kind is present.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Totals(pub [u64; 21]);

impl Totals {
    pub fn get(&self, kind: Kind) -> u64 {
        self.0[kind.index()]
    }
}

impl Serialize for Totals {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let mut map = s.serialize_map(Some(Kind::ALL.len()))?;
        for k in Kind::ALL {
            map.serialize_entry(k.name(), &self.get(k))?;
        }
        map.end()
    }
}

impl<'de> Deserialize<'de> for Totals {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Totals, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = Totals;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("counts by kind")
            }
            fn visit_map<A: MapAccess<'de>>(self, mut m: A) -> Result<Totals, A::Error> {
                let mut t = Totals::default();
                while let Some((k, n)) = m.next_entry::<Kind, u64>()? {
                    t.0[k.index()] = n;
                }
                Ok(t)
            }
        }
        d.deserialize_map(V)
    }
}

/// When the object was found left allocated.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Found {
    /// At `ibv_close_device` of its context (then a zombie).
    Close,
    /// At exit.
    Exit,
}

/// Where and when an object was created.
#[derive(Clone, Debug, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Created<'a> {
    /// Kernel thread id of the creating thread.
    pub thread: i32,
    /// Seconds since the Unix epoch (millisecond resolution).
    pub time: Option<f64>,
    #[serde(borrow)]
    pub module: Option<Cow<'a, str>>,
    #[serde(borrow)]
    pub symbol: Option<Cow<'a, str>>,
    /// From the symbol, else from the module's load address.
    pub offset: Option<u64>,
    /// From the module's debug information: the calling function, the
    /// source file and line of the call (absent in older reports).
    #[serde(borrow, default)]
    pub function: Option<Cow<'a, str>>,
    #[serde(borrow, default)]
    pub file: Option<Cow<'a, str>>,
    #[serde(default)]
    pub line: Option<u32>,
    /// The module's GNU build ID in hex: with `module` and `offset` it
    /// names a site that has no debug information.
    #[serde(borrow, default)]
    pub build_id: Option<Cow<'a, str>>,
    /// `symbol (file:line)` frames, with `IBV_SHIM_BACKTRACE`.
    #[serde(borrow)]
    pub backtrace: Option<Vec<Cow<'a, str>>>,
}

/// The identifying fields of each kind (the `fields` object).
#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(untagged)]
pub enum Detail<'a> {
    Context(ContextFields),
    DeviceList(DeviceListFields),
    Pd(PdFields),
    Mr(MrFields<'a>),
    Cq(CqFields),
    CompChannel(CompChannelFields),
    Srq(SrqFields),
    Qp(QpFields<'a>),
    Ah(AhFields<'a>),
    ImportedPd(PdFields),
    ImportedMr(ImportedMrFields),
    Mw(MwFields),
    Xrcd(IdFields),
    Wq(IdFields),
    RwqIndTable(IdFields),
    Flow(IdFields),
    FlowAction(IdFields),
    Td(IdFields),
    ParentDomain(IdFields),
    Dm(DmFields),
    Counters(IdFields),
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ContextFields {
    /// Made by `ibv_import_device`.
    pub imported: bool,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct DeviceListFields {
    pub count: u64,
}

/// A PD, or an imported PD.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PdFields {
    pub handle: u32,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct MrFields<'a> {
    pub addr: Address,
    pub length: u64,
    pub lkey: u32,
    pub rkey: u32,
    pub access: u32,
    /// The call that registered it (`ibv_reg_mr`, ...).
    #[serde(borrow)]
    pub via: Cow<'a, str>,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CqFields {
    pub cqe: i32,
    pub comp_vector: i32,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CompChannelFields {
    pub fd: i32,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SrqFields {
    pub max_wr: u32,
    pub max_sge: u32,
    pub srq_limit: u32,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct QpFields<'a> {
    pub qp_num: u32,
    /// `IBV_QPT_*` without the prefix, or the number of an unknown type.
    #[serde(borrow)]
    pub qp_type: Cow<'a, str>,
    pub send_cq: Option<Address>,
    pub recv_cq: Option<Address>,
    pub srq: Option<Address>,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AhFields<'a> {
    pub dlid: u32,
    pub port_num: u32,
    pub sl: u32,
    pub is_global: bool,
    /// `ibv_create_ah` or `ibv_create_ah_from_wc`.
    #[serde(borrow)]
    pub via: Cow<'a, str>,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ImportedMrFields {
    pub handle: u32,
    pub addr: Address,
    pub length: u64,
    pub lkey: u32,
    pub rkey: u32,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct MwFields {
    /// 1 or 2 (`IBV_MW_TYPE_*`).
    pub mw_type: u32,
    pub rkey: u32,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct DmFields {
    /// Bytes of device memory.
    pub length: u64,
}

/// The one number that names an object of the other table-made kinds: a
/// WQ's `wq_num`, an RWQ table's `ind_tbl_num`, an XRCD's, flow's or parent
/// domain's kernel handle; 0 for those without one (TDs, flow actions,
/// counters).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct IdFields {
    pub id: u32,
}

impl Detail<'_> {
    pub fn kind(&self) -> Kind {
        match self {
            Detail::Context(_) => Kind::Context,
            Detail::DeviceList(_) => Kind::DeviceList,
            Detail::Pd(_) => Kind::Pd,
            Detail::Mr(_) => Kind::Mr,
            Detail::Cq(_) => Kind::Cq,
            Detail::CompChannel(_) => Kind::CompChannel,
            Detail::Srq(_) => Kind::Srq,
            Detail::Qp(_) => Kind::Qp,
            Detail::Ah(_) => Kind::Ah,
            Detail::ImportedPd(_) => Kind::ImportedPd,
            Detail::ImportedMr(_) => Kind::ImportedMr,
            Detail::Mw(_) => Kind::Mw,
            Detail::Xrcd(_) => Kind::Xrcd,
            Detail::Wq(_) => Kind::Wq,
            Detail::RwqIndTable(_) => Kind::RwqIndTable,
            Detail::Flow(_) => Kind::Flow,
            Detail::FlowAction(_) => Kind::FlowAction,
            Detail::Td(_) => Kind::Td,
            Detail::ParentDomain(_) => Kind::ParentDomain,
            Detail::Dm(_) => Kind::Dm,
            Detail::Counters(_) => Kind::Counters,
        }
    }

    /// Reads the `fields` of an object of `kind`.
    pub fn from_fields(
        kind: Kind,
        v: serde_json::Value,
    ) -> Result<Detail<'static>, serde_json::Error> {
        Detail::read(kind, v)
    }

    fn read<E: de::Error>(kind: Kind, v: serde_json::Value) -> Result<Detail<'static>, E> {
        // The owned `Value` lends for any lifetime: read as `'static`.
        fn f<T: Deserialize<'static>>(v: serde_json::Value) -> Result<T, serde_json::Error> {
            T::deserialize(v)
        }
        Ok(match kind {
            Kind::Context => Detail::Context(f(v).map_err(E::custom)?),
            Kind::DeviceList => Detail::DeviceList(f(v).map_err(E::custom)?),
            Kind::Pd => Detail::Pd(f(v).map_err(E::custom)?),
            Kind::Mr => Detail::Mr(f(v).map_err(E::custom)?),
            Kind::Cq => Detail::Cq(f(v).map_err(E::custom)?),
            Kind::CompChannel => Detail::CompChannel(f(v).map_err(E::custom)?),
            Kind::Srq => Detail::Srq(f(v).map_err(E::custom)?),
            Kind::Qp => Detail::Qp(f(v).map_err(E::custom)?),
            Kind::Ah => Detail::Ah(f(v).map_err(E::custom)?),
            Kind::ImportedPd => Detail::ImportedPd(f(v).map_err(E::custom)?),
            Kind::ImportedMr => Detail::ImportedMr(f(v).map_err(E::custom)?),
            Kind::Mw => Detail::Mw(f(v).map_err(E::custom)?),
            Kind::Xrcd => Detail::Xrcd(f(v).map_err(E::custom)?),
            Kind::Wq => Detail::Wq(f(v).map_err(E::custom)?),
            Kind::RwqIndTable => Detail::RwqIndTable(f(v).map_err(E::custom)?),
            Kind::Flow => Detail::Flow(f(v).map_err(E::custom)?),
            Kind::FlowAction => Detail::FlowAction(f(v).map_err(E::custom)?),
            Kind::Td => Detail::Td(f(v).map_err(E::custom)?),
            Kind::ParentDomain => Detail::ParentDomain(f(v).map_err(E::custom)?),
            Kind::Dm => Detail::Dm(f(v).map_err(E::custom)?),
            Kind::Counters => Detail::Counters(f(v).map_err(E::custom)?),
        })
    }
}

/// One thing that was never freed. `kind` in the JSON is its detail's.
#[derive(Clone, Debug, PartialEq)]
pub struct Object<'a> {
    /// Its address (for a context or device list, its own).
    pub handle: Address,
    /// The context it was created on (`None` for a device list).
    pub context: Option<Address>,
    /// The context's device name, e.g. `mlx5_0`.
    pub device: Option<Cow<'a, str>>,
    /// The device's GUID, 16 hex digits.
    pub guid: Option<Cow<'a, str>>,
    /// Who made the device (driver family, else the GUID's OUI), e.g.
    /// `NVIDIA/Mellanox` (absent in older reports).
    pub vendor: Option<Cow<'a, str>>,
    /// The PD it sits on, or a CQ's completion channel.
    pub parent: Option<Address>,
    pub detail: Detail<'a>,
    pub created: Created<'a>,
    pub found: Found,
    pub suppressed: bool,
    /// The library that keeps it on purpose (a built-in suppression).
    pub kept_by: Option<Cow<'a, str>>,
}

impl Object<'_> {
    pub fn kind(&self) -> Kind {
        self.detail.kind()
    }
}

impl Serialize for Object<'_> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        self.with(Rendered::default()).serialize(s)
    }
}

impl<'a> Object<'a> {
    /// The object with the parts it shares with others already rendered:
    /// see [`Rendered`].
    pub fn with<'r>(&'r self, parts: Rendered<'r>) -> WithRendered<'r, 'a> {
        WithRendered { o: self, parts }
    }
}

/// The name of a newtype struct whose string is JSON already written, a
/// run of `"key":value` fields to be copied as it is: only a writer that
/// knows this name may be given [`Rendered`] parts.
pub const RAW_FIELDS: &str = "$ibv_shim::raw_fields";

/// Parts of an object that many objects share (a million objects have a
/// few devices and creation sites), rendered once by the writer that
/// writes them all: each is the text that writer gives the part's own
/// fields ([`DevicePart`], [`SitePart`]) without the braces. `None`: the
/// values are written.
#[derive(Clone, Copy, Debug, Default)]
pub struct Rendered<'r> {
    pub device: Option<&'r str>,
    pub site: Option<&'r str>,
}

/// An object's `device`, `guid` and `vendor`.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct DevicePart<'r> {
    pub device: Option<&'r str>,
    pub guid: Option<&'r str>,
    pub vendor: Option<&'r str>,
}

/// Where an object was created, from `created`: `module` to `build_id`.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct SitePart<'r> {
    pub module: Option<&'r str>,
    pub symbol: Option<&'r str>,
    pub offset: Option<u64>,
    pub function: Option<&'r str>,
    pub file: Option<&'r str>,
    pub line: Option<u32>,
    pub build_id: Option<&'r str>,
}

impl DevicePart<'_> {
    fn fields<M: SerializeStruct>(&self, m: &mut M) -> Result<(), M::Error> {
        m.serialize_field("device", &self.device)?;
        m.serialize_field("guid", &self.guid)?;
        m.serialize_field("vendor", &self.vendor)
    }
}

impl SitePart<'_> {
    fn fields<M: SerializeStruct>(&self, m: &mut M) -> Result<(), M::Error> {
        m.serialize_field("module", &self.module)?;
        m.serialize_field("symbol", &self.symbol)?;
        m.serialize_field("offset", &self.offset)?;
        m.serialize_field("function", &self.function)?;
        m.serialize_field("file", &self.file)?;
        m.serialize_field("line", &self.line)?;
        m.serialize_field("build_id", &self.build_id)
    }
}

impl Serialize for DevicePart<'_> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let mut m = s.serialize_struct("DevicePart", 3)?;
        self.fields(&mut m)?;
        m.end()
    }
}

impl Serialize for SitePart<'_> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let mut m = s.serialize_struct("SitePart", 7)?;
        self.fields(&mut m)?;
        m.end()
    }
}

/// Rendered text, written as it is by a writer that knows [`RAW_FIELDS`].
struct RawFields<'r>(&'r str);

impl Serialize for RawFields<'_> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_newtype_struct(RAW_FIELDS, self.0)
    }
}

/// One part: its rendered text in one field, or its fields.
fn part<M: SerializeStruct>(
    m: &mut M,
    rendered: Option<&str>,
    fields: impl FnOnce(&mut M) -> Result<(), M::Error>,
) -> Result<(), M::Error> {
    match rendered {
        Some(text) => m.serialize_field(RAW_FIELDS, &RawFields(text)),
        None => fields(m),
    }
}

impl<'a> Created<'a> {
    /// Its `module` to `build_id`.
    pub fn site(&self) -> SitePart<'_> {
        SitePart {
            module: self.module.as_deref(),
            symbol: self.symbol.as_deref(),
            offset: self.offset,
            function: self.function.as_deref(),
            file: self.file.as_deref(),
            line: self.line,
            build_id: self.build_id.as_deref(),
        }
    }

    fn serialize_with<S: Serializer>(&self, s: S, site: Option<&str>) -> Result<S::Ok, S::Error> {
        let mut c = s.serialize_struct("Created", 10)?;
        c.serialize_field("thread", &self.thread)?;
        c.serialize_field("time", &self.time)?;
        part(&mut c, site, |c| self.site().fields(c))?;
        c.serialize_field("backtrace", &self.backtrace)?;
        c.end()
    }
}

impl Serialize for Created<'_> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        self.serialize_with(s, None)
    }
}

struct CreatedWith<'r, 'a> {
    c: &'r Created<'a>,
    site: Option<&'r str>,
}

impl Serialize for CreatedWith<'_, '_> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        self.c.serialize_with(s, self.site)
    }
}

impl Object<'_> {
    /// Its `device`, `guid` and `vendor`.
    pub fn device_part(&self) -> DevicePart<'_> {
        DevicePart {
            device: self.device.as_deref(),
            guid: self.guid.as_deref(),
            vendor: self.vendor.as_deref(),
        }
    }
}

/// An object and its parts rendered before ([`Object::with`]).
pub struct WithRendered<'r, 'a> {
    o: &'r Object<'a>,
    parts: Rendered<'r>,
}

impl Serialize for WithRendered<'_, '_> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let (me, parts) = (self.o, self.parts);
        let mut o = s.serialize_struct("Object", 12)?;
        o.serialize_field("kind", &me.kind())?;
        o.serialize_field("handle", &me.handle)?;
        o.serialize_field("context", &me.context)?;
        part(&mut o, parts.device, |o| me.device_part().fields(o))?;
        o.serialize_field("parent", &me.parent)?;
        o.serialize_field("fields", &me.detail)?;
        let created = CreatedWith {
            c: &me.created,
            site: parts.site,
        };
        o.serialize_field("created", &created)?;
        o.serialize_field("found", &me.found)?;
        o.serialize_field("suppressed", &me.suppressed)?;
        o.serialize_field("kept_by", &me.kept_by)?;
        o.end()
    }
}

/// An object as it is in the JSON, before its `fields` are read by kind.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawObject<'a> {
    kind: Kind,
    handle: Address,
    context: Option<Address>,
    #[serde(borrow)]
    device: Option<Cow<'a, str>>,
    #[serde(borrow)]
    guid: Option<Cow<'a, str>>,
    #[serde(borrow, default)]
    vendor: Option<Cow<'a, str>>,
    parent: Option<Address>,
    fields: serde_json::Value,
    #[serde(borrow)]
    created: Created<'a>,
    found: Found,
    suppressed: bool,
    #[serde(borrow, default)]
    kept_by: Option<Cow<'a, str>>,
}

impl<'de: 'a, 'a> Deserialize<'de> for Object<'a> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Object<'a>, D::Error> {
        let r = RawObject::deserialize(d)?;
        Ok(Object {
            handle: r.handle,
            context: r.context,
            device: r.device,
            guid: r.guid,
            vendor: r.vendor,
            parent: r.parent,
            detail: Detail::read(r.kind, r.fields)?,
            created: r.created,
            found: r.found,
            suppressed: r.suppressed,
            kept_by: r.kept_by,
        })
    }
}

/// One process's report. `O` is the object list and `T` the truncation
/// note: owned values when read; when the shim writes, a walk of its table
/// streamed to the file, and a note decided only after that walk.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Report<'a, O = Vec<Object<'a>>, T = Option<Cow<'a, str>>> {
    #[serde(borrow)]
    pub schema: Cow<'a, str>,
    pub pid: u32,
    /// The executable (`/proc/self/exe`).
    #[serde(borrow)]
    pub program: Cow<'a, str>,
    /// The launcher run that started the process (`IBV_SHIM_RUN`, which
    /// the launcher sets): a launcher summarises only its own run's
    /// reports, whatever else shares their directory. Absent without it.
    #[serde(borrow, default, skip_serializing_if = "Option::is_none")]
    pub run: Option<Cow<'a, str>>,
    /// An object is not suppressed: what `IBV_SHIM_LEAK_EXITCODE` acts on.
    pub leaked: bool,
    pub totals: Totals,
    pub objects: O,
    /// The failures fault rules injected (`IBV_SHIM_FAULTS`), in order;
    /// absent when there were none.
    #[serde(borrow, default, skip_serializing_if = "Vec::is_empty")]
    pub faults: Vec<Fault<'a>>,
    /// Why the report is incomplete (`out of memory`), if it is.
    #[serde(default)]
    pub truncated: T,
    /// With `IBV_SHIM_CHECK=datapath`: the violations found, by check
    /// (`dead_lkey`, `out_of_range`, ...; with `inflight` also
    /// `send_modified`, `recv_reused`, `teardown_mr`, `teardown_mw`,
    /// `teardown_qp`, `teardown_cq`, `cq_overrun`); absent otherwise.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub checks: Option<std::collections::BTreeMap<String, u64>>,
    /// What the program left of the connection manager (librdmacm), and
    /// the mistakes diagnosed at its calls; absent when it made no
    /// connection-manager object.
    #[serde(borrow, default, skip_serializing_if = "Option::is_none")]
    pub connection_manager: Option<ConnectionManager<'a>>,
}

/// One injected failure: which call of which verb, from where, how.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Fault<'a> {
    /// The verb, or `wc` for a completion.
    #[serde(borrow)]
    pub verb: Cow<'a, str>,
    /// The call's number among the verb's calls the rule counted (from 1).
    pub nth: u64,
    /// The errno the call failed with (a verb).
    #[serde(borrow, default)]
    pub errno: Option<Cow<'a, str>>,
    /// The status written (a completion).
    #[serde(borrow, default)]
    pub status: Option<Cow<'a, str>>,
    /// A `cm_event` rule's replacement: the event fetched, the failure
    /// event given instead and its `status`.
    #[serde(borrow, default, skip_serializing_if = "Option::is_none")]
    pub event: Option<CmEventFault<'a>>,
    /// The rule, as written.
    #[serde(borrow)]
    pub rule: Cow<'a, str>,
    /// The module of the call site, and the return address's offset in it.
    #[serde(borrow, default)]
    pub module: Option<Cow<'a, str>>,
    pub offset: u64,
}

/// An event `rdma_get_cm_event` returned, replaced by a fault rule.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct CmEventFault<'a> {
    /// The event librdmacm returned (`ESTABLISHED`).
    #[serde(borrow)]
    pub fetched: Cow<'a, str>,
    /// The event the program got instead (`REJECTED`).
    #[serde(borrow)]
    pub given: Cow<'a, str>,
    /// The given event's `status` (a reject reason, a negative errno).
    pub status: i32,
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample() -> Report<'static> {
        let created = |module: &'static str| Created {
            thread: 42,
            time: Some(1732900000.125),
            module: Some(module.into()),
            symbol: Some("main".into()),
            offset: Some(0x1c),
            function: Some("main".into()),
            file: Some("/src/prog.c".into()),
            line: Some(12),
            build_id: Some("8d2a".into()),
            backtrace: None,
        };
        let on_ctx = |handle: u64, parent: u64, detail: Detail<'static>| Object {
            handle: Address(handle),
            context: Some(Address(0x5000)),
            device: Some("rxe0".into()),
            guid: Some("0002c90300445566".into()),
            vendor: Some("NVIDIA/Mellanox".into()),
            parent: Address::or_null(parent),
            detail,
            created: created("/bin/prog"),
            found: Found::Exit,
            suppressed: false,
            kept_by: None,
        };
        let mut objects = vec![
            on_ctx(
                0x5000,
                0,
                Detail::Context(ContextFields { imported: false }),
            ),
            Object {
                context: None,
                device: None,
                guid: None,
                vendor: None,
                suppressed: true,
                kept_by: Some("librdmacm".into()),
                created: Created {
                    time: None,
                    ..created("/lib/librdmacm.so.1")
                },
                ..on_ctx(0x6000, 0, Detail::DeviceList(DeviceListFields { count: 2 }))
            },
            on_ctx(0x100, 0, Detail::Pd(PdFields { handle: 3 })),
            on_ctx(0x110, 0, Detail::ImportedPd(PdFields { handle: 4 })),
            on_ctx(
                0x200,
                0x100,
                Detail::Mr(MrFields {
                    addr: Address(0x7f00_0000_1000),
                    length: 4096,
                    lkey: 1,
                    rkey: 2,
                    access: 7,
                    via: "ibv_reg_mr".into(),
                }),
            ),
            on_ctx(
                0x210,
                0x110,
                Detail::ImportedMr(ImportedMrFields {
                    handle: 9,
                    addr: Address(0x1000),
                    length: 1,
                    lkey: 5,
                    rkey: 6,
                }),
            ),
            on_ctx(
                0x300,
                0x400,
                Detail::Cq(CqFields {
                    cqe: -1,
                    comp_vector: 0,
                }),
            ),
            on_ctx(0x400, 0, Detail::CompChannel(CompChannelFields { fd: 7 })),
            on_ctx(
                0x500,
                0x100,
                Detail::Srq(SrqFields {
                    max_wr: 16,
                    max_sge: 1,
                    srq_limit: 0,
                }),
            ),
            on_ctx(
                0x600,
                0x100,
                Detail::Qp(QpFields {
                    qp_num: 0x11,
                    qp_type: "RC".into(),
                    send_cq: Some(Address(0x300)),
                    recv_cq: None,
                    srq: None,
                }),
            ),
            on_ctx(
                0x700,
                0x100,
                Detail::Ah(AhFields {
                    dlid: 1,
                    port_num: 1,
                    sl: 0,
                    is_global: true,
                    via: "ibv_create_ah".into(),
                }),
            ),
        ];
        objects.push(on_ctx(
            0x800,
            0x100,
            Detail::Mw(MwFields {
                mw_type: 2,
                rkey: 9,
            }),
        ));
        objects.push(on_ctx(0x900, 0, Detail::Dm(DmFields { length: 4096 })));
        for (i, d) in [
            Detail::Xrcd(IdFields { id: 1 }),
            Detail::Wq(IdFields { id: 2 }),
            Detail::RwqIndTable(IdFields { id: 3 }),
            Detail::Flow(IdFields { id: 4 }),
            Detail::FlowAction(IdFields { id: 0 }),
            Detail::Td(IdFields { id: 0 }),
            Detail::ParentDomain(IdFields { id: 5 }),
            Detail::Counters(IdFields { id: 0 }),
        ]
        .into_iter()
        .enumerate()
        {
            objects.push(on_ctx(0xa00 + 16 * i as u64, 0, d));
        }
        objects[4].found = Found::Close;
        objects[4].created.backtrace = Some(vec!["main (prog.c:3)".into()]);
        let mut totals = Totals::default();
        objects
            .iter()
            .filter(|o| !o.suppressed)
            .for_each(|o| totals.0[o.kind().index()] += 1);
        let cm_created = objects[0].created.clone();
        Report {
            schema: SCHEMA.into(),
            pid: 1234,
            program: "/bin/prog".into(),
            run: Some("ibv-shim.77.0badcafe".into()),
            leaked: true,
            totals,
            objects,
            faults: vec![
                Fault {
                    verb: "ibv_reg_mr".into(),
                    nth: 3,
                    errno: Some("ENOMEM".into()),
                    status: None,
                    event: None,
                    rule: "ibv_reg_mr:nth=3:errno=ENOMEM".into(),
                    module: Some("/bin/prog".into()),
                    offset: 0x1234,
                },
                Fault {
                    verb: "rdma_get_cm_event".into(),
                    nth: 1,
                    errno: None,
                    status: None,
                    event: Some(CmEventFault {
                        fetched: "ESTABLISHED".into(),
                        given: "REJECTED".into(),
                        status: 28,
                    }),
                    rule: "cm_event:as=REJECTED:nth=1".into(),
                    module: Some("/bin/prog".into()),
                    offset: 0x1369,
                },
            ],
            truncated: None,
            checks: Some([("dead_lkey".to_string(), 1)].into()),
            connection_manager: Some(ConnectionManager {
                objects: vec![CmObject {
                    kind: CmKind::CmId,
                    handle: Address(0x5600_0000_1000),
                    channel: Some(Address(0x5600_0000_0800)),
                    id: None,
                    listener: None,
                    qp: Some(Address(0x5600_0000_2000)),
                    verbs: vec![
                        CmVerbs {
                            role: "send_cq".into(),
                            handle: Address(0x5600_0000_3000),
                            shared_with: None,
                        },
                        CmVerbs {
                            role: "pd".into(),
                            handle: Address(0x5600_0000_4000),
                            shared_with: Some(Address(0x5600_0000_5000)),
                        },
                    ],
                    port_space: Some("TCP".into()),
                    state: Some("ESTABLISHED".into()),
                    event: None,
                    status: None,
                    fd: None,
                    via: "rdma_create_id".into(),
                    created: cm_created,
                    suppressed: false,
                    kept_by: None,
                }],
                diagnoses: vec![CmDiagnosis {
                    check: "double-ack".into(),
                    text: "double ack: rdma_ack_cm_event(event=0x1)".into(),
                }],
            }),
        }
    }

    #[test]
    fn a_report_reads_back_as_written() {
        let r = sample();
        // Every kind is covered.
        let kinds: Vec<Kind> = r.objects.iter().map(Object::kind).collect();
        assert!(Kind::ALL.iter().all(|k| kinds.contains(k)), "{kinds:?}");
        let text = serde_json::to_string(&r).unwrap();
        let back: Report = serde_json::from_str(&text).unwrap();
        assert_eq!(back, r);
        assert_eq!(serde_json::to_string(&back).unwrap(), text);
        // The JSON is as the schema names it.
        let v: serde_json::Value = serde_json::from_str(&text).unwrap();
        assert_eq!(v["objects"][4]["kind"], "mr");
        assert_eq!(v["objects"][4]["fields"]["addr"], "0x7f0000001000");
        assert_eq!(v["objects"][4]["parent"], "0x100");
        assert_eq!(v["objects"][0]["parent"], serde_json::Value::Null);
        assert_eq!(v["totals"]["device_list"], 0);
        assert_eq!(v["totals"]["pd"], 1);
    }

    #[test]
    fn fields_that_do_not_fit_the_kind_are_refused() {
        let r = sample();
        let mut v = serde_json::to_value(&r).unwrap();
        v["objects"][2]["kind"] = "cq".into();
        let read =
            |v: &serde_json::Value| serde_json::from_str::<Report>(&v.to_string()).map(|_| ());
        assert!(read(&v).is_err());
        v["objects"][2]["kind"] = "rocket".into();
        assert!(read(&v).is_err());
        v["objects"][2]["kind"] = "pd".into();
        assert!(read(&v).is_ok());
    }

    #[test]
    fn another_schema_is_refused_by_name() {
        let text = serde_json::to_string(&sample()).unwrap();
        assert_eq!(parse(&text).unwrap(), sample());
        let other = text.replacen(SCHEMA, "ibv-shim/leak-report/9", 1);
        assert_eq!(
            parse(&other).unwrap_err(),
            "its schema \"ibv-shim/leak-report/9\" is not one this ibv-shim reads (ibv-shim/leak-report/1)"
        );
        let none = text.replacen(&format!("\"schema\":\"{SCHEMA}\","), "", 1);
        assert!(parse(&none).unwrap_err().contains("has no \"schema\""));
        assert!(parse("[1]").is_err());
        // Written only when set.
        let mut r = sample();
        r.run = None;
        assert!(!serde_json::to_string(&r).unwrap().contains("\"run\""));
    }

    /// The schema's kinds, its `totals` and its `fields.<kind>`
    /// definitions are exactly [`Kind::ALL`].
    #[test]
    fn the_schema_s_kinds_are_the_model_s() {
        let path = concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/../../docs/leak-report.schema.json"
        );
        let schema: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap();
        let mut ours: Vec<&str> = Kind::ALL.iter().map(|k| k.name()).collect();
        ours.sort();
        let sorted = |v: &serde_json::Value| {
            let mut names: Vec<String> = v
                .as_array()
                .unwrap()
                .iter()
                .map(|n| n.as_str().unwrap().to_string())
                .collect();
            names.sort();
            names
        };
        assert_eq!(sorted(&schema["$defs"]["kind"]["enum"]), ours);
        assert_eq!(sorted(&schema["properties"]["totals"]["required"]), ours);
        let mut fields: Vec<&str> = schema["$defs"]
            .as_object()
            .unwrap()
            .keys()
            .filter_map(|k| k.strip_prefix("fields."))
            .collect();
        fields.sort();
        assert_eq!(fields, ours);
        for k in Kind::ALL {
            assert_eq!(Kind::from_name(k.name()), Some(k));
        }
    }
}
