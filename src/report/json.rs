//! The JSON document (`IBV_SHIM_REPORT`, schema in
//! `docs/leak-report.schema.json`): the report model's types
//! (`report_model::Report`, `Object`) serialized by serde_json, streamed.
//!
//! A million leaked objects make ~400 MB of JSON, so nothing is built
//! whole: the object list is a [`Serialize`] over the registry walk, each
//! object a [`report_model::Object`] that borrows its text (the creation
//! site and the context's device, resolved once each), written through a
//! bounded buffer that is allocated once, fallibly, and drained into the
//! file when full.

use std::borrow::Cow;
use std::cell::RefCell;
use std::collections::HashMap;
use std::ffi::OsString;
use std::io::{self, Write};
use std::os::unix::ffi::OsStringExt;

use serde::ser::{SerializeSeq, Serializer};
use serde::Serialize;

use crate::files::AtomicFile;
use crate::oom;
use crate::registry::contexts::ContextInfo;
use crate::registry::objects::{self, Facts, Kind, Obj};

use report_model::{self as model, Address, Detail, Found, Report, SCHEMA};

use super::inventory::{kind_of, Inventory};
use super::ser::{render_fields, JsonWriter};
use super::site::{frames, program, site, Site};
use super::suppress::{Suppressor, Why};
use super::text::qp_type;
use super::used::report_path;

/// Wall-clock seconds of a CLOCK_MONOTONIC_COARSE millisecond stamp.
pub(super) struct Clock {
    pub(super) offset_ms: f64,
}

impl Clock {
    pub(super) fn now() -> Clock {
        let mut ts = libc::timespec {
            tv_sec: 0,
            tv_nsec: 0,
        };
        // SAFETY: ts is a valid out-pointer.
        unsafe { libc::clock_gettime(libc::CLOCK_REALTIME, &mut ts) };
        let real = ts.tv_sec as f64 * 1000.0 + ts.tv_nsec as f64 / 1e6;
        Clock {
            offset_ms: real - objects::now_ms() as f64,
        }
    }

    /// Seconds, rounded to the stamps' millisecond.
    pub(super) fn wall(&self, mono_ms: u64) -> f64 {
        (mono_ms as f64 + self.offset_ms).round().max(0.0) / 1000.0
    }
}

/// The `fields` of a tracked object, from its kind's facts.
pub(super) fn detail(o: &Obj) -> Detail<'static> {
    let kind = o.kind();
    let id = |id| model::IdFields { id };
    match (kind, o.facts.of_kind(kind)) {
        (Kind::ImportedPd, Facts::Pd { handle }) => Detail::ImportedPd(model::PdFields { handle }),
        (_, Facts::Pd { handle }) => Detail::Pd(model::PdFields { handle }),
        (_, Facts::Mr(m)) => Detail::Mr(model::MrFields {
            addr: Address(m.addr),
            length: m.length,
            lkey: m.keys.lkey,
            rkey: m.keys.rkey,
            access: m.access,
            via: Cow::Borrowed(m.via.name()),
        }),
        (_, Facts::Cq { cqe, comp_vector }) => Detail::Cq(model::CqFields {
            cqe,
            comp_vector: comp_vector as i32,
        }),
        (_, Facts::CompChannel { fd }) => Detail::CompChannel(model::CompChannelFields { fd }),
        (
            _,
            Facts::Srq {
                max_wr,
                max_sge,
                srq_limit,
            },
        ) => Detail::Srq(model::SrqFields {
            max_wr,
            max_sge,
            srq_limit,
        }),
        (_, Facts::Qp(q)) => Detail::Qp(model::QpFields {
            qp_num: q.qp_num,
            qp_type: qp_type(q.qp_type),
            send_cq: Address::or_null(q.send_cq.get() as u64),
            recv_cq: Address::or_null(q.recv_cq.get() as u64),
            srq: Address::or_null(q.srq.get() as u64),
        }),
        (_, Facts::Ah(h)) => Detail::Ah(model::AhFields {
            dlid: h.dlid as u32,
            port_num: h.port_num as u32,
            sl: h.sl as u32,
            is_global: h.global,
            via: Cow::Borrowed(h.via.name()),
        }),
        (
            _,
            Facts::ImportedMr {
                handle,
                addr,
                length,
                keys,
            },
        ) => Detail::ImportedMr(model::ImportedMrFields {
            handle,
            addr: Address(addr),
            length,
            lkey: keys.lkey,
            rkey: keys.rkey,
        }),
        (_, Facts::Mw { mw_type, rkey }) => Detail::Mw(model::MwFields { mw_type, rkey }),
        (_, Facts::Dm { length }) => Detail::Dm(model::DmFields { length }),
        (_, Facts::ParentDomain { handle, .. }) => Detail::ParentDomain(id(handle)),
        (Kind::Xrcd, Facts::Id(n)) => Detail::Xrcd(id(n)),
        (Kind::Wq, Facts::Id(n)) => Detail::Wq(id(n)),
        (Kind::RwqIndTable, Facts::Id(n)) => Detail::RwqIndTable(id(n)),
        (Kind::Flow, Facts::Id(n)) => Detail::Flow(id(n)),
        (Kind::FlowAction, Facts::Id(n)) => Detail::FlowAction(id(n)),
        (Kind::Td, Facts::Id(n)) => Detail::Td(id(n)),
        (_, Facts::Id(n)) => Detail::Counters(id(n)),
        (_, Facts::None) => Detail::Counters(id(0)),
    }
}

/// The failures fault rules injected, for the report's `faults`.
fn faults(injected: &[crate::faults::Injection]) -> Vec<model::Fault<'_>> {
    injected
        .iter()
        .map(|f| model::Fault {
            verb: Cow::Borrowed(f.verb),
            nth: f.nth,
            errno: match (f.status, f.replace) {
                (None, None) => Some(Cow::Borrowed(crate::guard::errno_name(f.errno))),
                _ => None,
            },
            event: f.replace.map(|r| model::CmEventFault {
                fetched: Cow::Borrowed(crate::faults::rules::cm_event::event_name(r.event)),
                given: Cow::Borrowed(crate::faults::rules::cm_event::event_name(r.with)),
                status: r.reason,
            }),
            status: f
                .status
                .and_then(|s| crate::faults::rules::WC_STATUSES.get(s as usize))
                .map(|s| Cow::Borrowed(*s)),
            rule: Cow::Borrowed(&f.rule),
            module: f.module.as_deref().map(Cow::Borrowed),
            offset: f.offset,
        })
        .collect()
}

/// With the data-path checks on: the violations found, by check.
fn checks() -> Option<std::collections::BTreeMap<String, u64>> {
    crate::checks::datapath().then(|| {
        crate::checks::counts()
            .into_iter()
            .filter(|(check, _)| !check.inflight_only() || crate::checks::inflight())
            .map(|(check, n)| (check.name().to_string(), n))
            .collect()
    })
}

/// A context as its objects show it: device name and GUID text, and the
/// three as JSON (rendered once: see `model::Rendered`).
#[derive(Default)]
struct Device {
    name: Option<String>,
    guid: Option<String>,
    vendor: Option<&'static str>,
    json: Option<String>,
}

impl Device {
    fn of(info: Option<&ContextInfo>) -> Device {
        let mut d = Device {
            name: info.and_then(|i| i.device_name.as_deref().and_then(oom::try_string)),
            guid: info
                .and_then(|i| i.guid)
                .and_then(|g| oom::try_string(&format!("{:016x}", u64::from_be(g)))),
            vendor: info.and_then(|i| super::vendor::vendor(i.device_name.as_deref()?, i.guid)),
            json: None,
        };
        let part = d.part();
        let text = [part.device, part.guid, part.vendor];
        d.json = render_fields(&part, room(&text));
        d
    }

    fn part(&self) -> model::DevicePart<'_> {
        model::DevicePart {
            device: self.name.as_deref(),
            guid: self.guid.as_deref(),
            vendor: self.vendor,
        }
    }
}

/// A creation site, and its fields as JSON (rendered once).
struct SiteText {
    site: Site,
    json: Option<String>,
}

impl SiteText {
    fn of(caller: usize) -> SiteText {
        let site = site(caller);
        let part = SiteText::part(&site);
        let text = [
            part.module,
            part.symbol,
            part.function,
            part.file,
            part.build_id,
        ];
        let json = render_fields(&part, room(&text));
        SiteText { site, json }
    }

    fn part(s: &Site) -> model::SitePart<'_> {
        model::SitePart {
            module: s.module.as_deref(),
            symbol: s.symbol.as_deref(),
            offset: s.offset,
            function: s.function.as_deref(),
            file: s.file.as_deref(),
            line: s.line,
            build_id: s.build_id.as_deref(),
        }
    }
}

/// Bytes enough for the JSON of a part with these strings: each byte may
/// take an escape of six, and the names, numbers and nulls fit in 256.
fn room(text: &[Option<&str>]) -> usize {
    256 + text.iter().flatten().map(|t| 6 * t.len()).sum::<usize>()
}

/// Values resolved once per distinct key, the last key remembered
/// (neighbours in the table mostly share their site and context); out of
/// memory a value is resolved each time instead of kept.
struct Interned<K, V> {
    index: HashMap<K, usize>,
    values: Vec<V>,
    last: Option<(K, usize)>,
    spare: Option<V>,
}

impl<K: std::hash::Hash + Eq + Copy, V> Interned<K, V> {
    fn new() -> Self {
        Interned {
            index: HashMap::new(),
            values: Vec::new(),
            last: None,
            spare: None,
        }
    }

    fn get(&mut self, key: K, make: impl FnOnce() -> V) -> &V {
        let i = match self.last {
            Some((k, i)) if k == key => i,
            _ => match self.index.get(&key) {
                Some(&i) => i,
                None => {
                    let room = oom::fallibly(|| self.index.try_reserve(1))
                        .and_then(|()| oom::fallibly(|| self.values.try_reserve(1)));
                    if room.is_none() {
                        return self.spare.insert(make());
                    }
                    self.values.push(make());
                    self.index.insert(key, self.values.len() - 1);
                    self.values.len() - 1
                }
            },
        };
        self.last = Some((key, i));
        &self.values[i]
    }
}

/// What each object borrows while it is written.
struct Lookups<'i> {
    inv: &'i Inventory<'i>,
    sup: &'i mut Suppressor,
    clock: Clock,
    sites: Interned<usize, SiteText>,
    devices: Interned<(usize, bool), Device>,
}

/// Everything but the `fields` of an object, borrowed.
struct Common<'a> {
    kind: model::Kind,
    handle: usize,
    context: usize,
    device: &'a Device,
    parent: usize,
    tid: i32,
    time_ms: u64,
    site: &'a SiteText,
    found: Found,
    quiet: Option<Why>,
}

impl Common<'_> {
    fn object<'a>(
        &'a self,
        clock: &Clock,
        detail: Detail<'a>,
        backtrace: Option<Vec<Cow<'a, str>>>,
    ) -> model::Object<'a> {
        debug_assert_eq!(detail.kind(), self.kind);
        let site = &self.site.site;
        model::Object {
            handle: Address(self.handle as u64),
            context: Address::or_null(self.context as u64),
            device: self.device.name.as_deref().map(Cow::Borrowed),
            guid: self.device.guid.as_deref().map(Cow::Borrowed),
            vendor: self.device.vendor.map(Cow::Borrowed),
            parent: Address::or_null(self.parent as u64),
            detail,
            created: model::Created {
                thread: self.tid,
                time: Some(clock.wall(self.time_ms)),
                module: site.module.as_deref().map(Cow::Borrowed),
                symbol: site.symbol.as_deref().map(Cow::Borrowed),
                offset: site.offset,
                function: site.function.as_deref().map(Cow::Borrowed),
                file: site.file.as_deref().map(Cow::Borrowed),
                line: site.line,
                build_id: site.build_id.as_deref().map(Cow::Borrowed),
                backtrace,
            },
            found: self.found,
            suppressed: self.quiet.is_some(),
            kept_by: match self.quiet {
                Some(Why::Kept(owner)) => Some(Cow::Borrowed(owner)),
                _ => None,
            },
        }
    }

    /// The parts rendered once for all objects of this device and site.
    fn rendered(&self) -> model::Rendered<'_> {
        model::Rendered {
            device: self.device.json.as_deref(),
            site: self.site.json.as_deref(),
        }
    }
}

/// The `objects` array: a walk of the inventory and the registry,
/// serialized as it goes.
struct Listing<'i>(RefCell<Lookups<'i>>);

impl Serialize for Listing<'_> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let mut seq = s.serialize_seq(None)?;
        let l = &mut *self.0.borrow_mut();
        let no_device = Device::default();
        for (ctx, c, quiet) in &l.inv.open {
            let device = Device::of(Some(c));
            let site = l.sites.get(c.caller, || SiteText::of(c.caller));
            let common = Common {
                kind: model::Kind::Context,
                handle: *ctx,
                context: *ctx,
                device: &device,
                parent: 0,
                tid: c.tid,
                time_ms: c.time_ms,
                site,
                found: Found::Exit,
                quiet: *quiet,
            };
            let detail = Detail::Context(model::ContextFields {
                imported: c.imported,
            });
            seq.serialize_element(
                &common
                    .object(&l.clock, detail, None)
                    .with(common.rendered()),
            )?;
        }
        for (list, quiet) in &l.inv.lists {
            let site = l.sites.get(list.caller, || SiteText::of(list.caller));
            let common = Common {
                kind: model::Kind::DeviceList,
                handle: list.list,
                context: 0,
                device: &no_device,
                parent: 0,
                tid: list.tid,
                time_ms: list.time_ms,
                site,
                found: Found::Exit,
                quiet: *quiet,
            };
            let detail = Detail::DeviceList(model::DeviceListFields {
                count: list.count as u64,
            });
            seq.serialize_element(
                &common
                    .object(&l.clock, detail, None)
                    .with(common.rendered()),
            )?;
        }
        let mut failed = None;
        objects::for_each(|o| {
            if failed.is_some() {
                return;
            }
            let key = (o.ctx, o.is_zombie());
            let device = l.devices.get(key, || Device::of(l.inv.info_of(o)));
            let site = l.sites.get(o.caller, || SiteText::of(o.caller));
            let common = Common {
                kind: kind_of(o),
                handle: o.addr,
                context: o.ctx,
                device,
                parent: o.parent,
                tid: o.tid as i32,
                time_ms: o.time_ms(),
                site,
                found: if o.is_zombie() {
                    Found::Close
                } else {
                    Found::Exit
                },
                quiet: l.sup.obj(o),
            };
            let frames = frames(o);
            let backtrace = frames
                .as_ref()
                .map(|f| f.iter().map(|f| Cow::Borrowed(f.as_str())).collect());
            let object = common.object(&l.clock, detail(o), backtrace);
            if let Err(e) = seq.serialize_element(&object.with(common.rendered())) {
                failed = Some(e);
            }
        });
        match failed {
            Some(e) => Err(e),
            None => seq.end(),
        }
    }
}

/// `truncated`, decided when it is written, after the object list: also
/// when the registry could not record something (the list is short).
struct Truncation {
    dropped_before: usize,
}

impl Serialize for Truncation {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        match oom::dropped() != self.dropped_before || objects::untracked() > 0 {
            true => s.serialize_some("out of memory"),
            false => s.serialize_none(),
        }
    }
}

/// The file behind a buffer allocated once: writes that fit are copied
/// (no allocation: the buffer never grows), the buffer is drained into the
/// file when the next would not fit, and a piece larger than the whole
/// buffer goes straight through.
struct Bounded<'f> {
    file: &'f mut AtomicFile,
    buf: Vec<u8>,
}

impl Bounded<'_> {
    fn drain(&mut self) -> io::Result<()> {
        self.file.write_all(&self.buf)?;
        self.buf.clear();
        Ok(())
    }

    #[cold]
    fn write_past_the_end(&mut self, b: &[u8]) -> io::Result<()> {
        self.drain()?;
        if self.buf.capacity() < b.len() {
            return self.file.write_all(b);
        }
        self.buf.extend_from_slice(b);
        Ok(())
    }
}

impl Write for Bounded<'_> {
    fn write(&mut self, b: &[u8]) -> io::Result<usize> {
        self.write_all(b).map(|()| b.len())
    }

    // serde_json writes every piece, a few bytes each, with `write_all`:
    // the common case is one comparison and a copy.
    #[inline]
    fn write_all(&mut self, b: &[u8]) -> io::Result<()> {
        if self.buf.capacity() - self.buf.len() >= b.len() {
            self.buf.extend_from_slice(b);
            return Ok(());
        }
        self.write_past_the_end(b)
    }

    fn flush(&mut self) -> io::Result<()> {
        self.drain()
    }
}

/// The writer's buffer: 1 MiB, less when memory is short, none when there
/// is nothing to spare (each piece then goes straight to the file).
fn json_buffer() -> Vec<u8> {
    let mut out = Vec::new();
    for size in [1 << 20, 64 << 10, 8 << 10] {
        if oom::quietly(|| out.try_reserve_exact(size)).is_some() {
            break;
        }
    }
    out
}

/// Writes the JSON document (see `docs/leak-report.schema.json`) to a
/// temporary file renamed into place, so a reader never sees half of it.
#[inline(never)] // its own frame in profiles (bench: callgrind --toggle-collect)
pub(super) fn write_json(
    template: &OsString,
    inv: &Inventory,
    sup: &mut Suppressor,
) -> io::Result<()> {
    let path = std::path::PathBuf::from(OsString::from_vec(report_path(template).into_bytes()));
    // Written beside and renamed into place, so a reader never sees half of
    // it and nothing is written through a link (see `files`).
    let mut file = AtomicFile::create(path.as_os_str())?;
    let mut totals = model::Totals::default();
    for kind in model::Kind::ALL {
        totals.0[kind.index()] = inv.loud.0[kind.index()] as u64;
    }
    let injected = crate::faults::injected();
    let (connection_manager, cm_leaked) = super::cm::json_section(sup);
    let doc = Report {
        schema: Cow::Borrowed(SCHEMA),
        pid: std::process::id(),
        program: Cow::Owned(program()),
        run: crate::config::get().run.as_deref().map(Cow::Borrowed),
        leaked: inv.loud.total() > 0 || cm_leaked,
        totals,
        objects: Listing(RefCell::new(Lookups {
            inv,
            sup,
            clock: Clock::now(),
            sites: Interned::new(),
            devices: Interned::new(),
        })),
        faults: faults(&injected),
        truncated: Truncation {
            dropped_before: inv.dropped,
        },
        checks: checks(),
        connection_manager,
    };
    let mut out = Bounded {
        file: &mut file,
        buf: json_buffer(),
    };
    doc.serialize(&mut JsonWriter::new(&mut out))?;
    out.write_all(b"\n")?;
    out.flush()?;
    file.commit()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The `fields` written for each kind are the report model's for it
    /// (which refuses a missing or an extra field), and read back equal.
    #[test]
    fn the_fields_of_each_kind_read_as_the_model_s() {
        for kind in Kind::ALL {
            // Words of every field non-zero, as each kind's facts.
            let words = objects::Facts::Mr(objects::MrFacts {
                addr: 3,
                length: 4,
                keys: objects::Keys {
                    lkey: 0x105,
                    rkey: 1,
                },
                access: 6,
                via: objects::MrVia::RegMrIova,
            });
            let o = Obj::new(kind, 0x100, 0x10, 0x20, 0, 1).with(words.of_kind(kind));
            let written = detail(&o);
            let fields = serde_json::to_value(&written).unwrap();
            let back = Detail::from_fields(kind_of(&o), fields)
                .unwrap_or_else(|e| panic!("{}: {e}", kind.name()));
            assert_eq!(back, written);
            assert_eq!(back.kind().name(), kind.name());
        }
    }

    /// A buffer smaller than a piece, or none at all, still writes it all.
    #[test]
    fn the_bounded_writer_never_grows_its_buffer() {
        let dir = std::env::temp_dir().join(format!("ibv-shim-json-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("out");
        for cap in [0, 4, 1 << 10] {
            let mut file = AtomicFile::create(path.as_os_str()).unwrap();
            let mut out = Bounded {
                file: &mut file,
                buf: Vec::with_capacity(cap),
            };
            let cap = out.buf.capacity();
            for piece in ["ab", "cdefgh", "i"] {
                out.write_all(piece.as_bytes()).unwrap();
                assert_eq!(out.buf.capacity(), cap);
            }
            out.flush().unwrap();
            file.commit().unwrap();
            assert_eq!(std::fs::read_to_string(&path).unwrap(), "abcdefghi");
        }
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
