//! The JSON document (`IBV_SHIM_REPORT`, schema in
//! `docs/leak-report.schema.json`), streamed through a bounded buffer.

use std::collections::HashMap;
use std::ffi::OsString;
use std::io::Write as _;
use std::os::unix::ffi::OsStringExt;

use crate::oom;
use crate::registry::contexts::ContextInfo;
use crate::registry::objects::{self, Kind, Obj};
use crate::registry::objects::{AH_VIA, MR_VIA};

use report_model::{Address, Kind as ReportKind, SCHEMA};

use super::inventory::{kind_of, Inventory};
use super::site::{frames, program, site};
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

    pub(super) fn wall(&self, mono_ms: u64) -> f64 {
        (mono_ms as f64 + self.offset_ms) / 1000.0
    }
}

/// Appends `s` as a JSON string.
pub(super) fn json_str(out: &mut Vec<u8>, s: &str) {
    out.push(b'"');
    for c in s.chars() {
        match c {
            '"' => out.extend_from_slice(b"\\\""),
            '\\' => out.extend_from_slice(b"\\\\"),
            '\n' => out.extend_from_slice(b"\\n"),
            '\t' => out.extend_from_slice(b"\\t"),
            c if (c as u32) < 0x20 => {
                let _ = write!(out, "\\u{:04x}", c as u32);
            }
            c => {
                let mut b = [0; 4];
                out.extend_from_slice(c.encode_utf8(&mut b).as_bytes());
            }
        }
    }
    out.push(b'"');
}

pub(super) fn json_opt_str(out: &mut Vec<u8>, s: Option<&str>) {
    match s {
        Some(s) => json_str(out, s),
        None => out.extend_from_slice(b"null"),
    }
}

/// Appends a decimal integer (no formatting machinery: 1M objects).
pub(super) fn json_u64(out: &mut Vec<u8>, mut v: u64) {
    let mut b = [0u8; 20];
    let mut i = b.len();
    loop {
        i -= 1;
        b[i] = b'0' + (v % 10) as u8;
        v /= 10;
        if v == 0 {
            break;
        }
    }
    out.extend_from_slice(&b[i..]);
}

pub(super) fn json_i64(out: &mut Vec<u8>, v: i64) {
    if v < 0 {
        out.push(b'-');
    }
    json_u64(out, v.unsigned_abs());
}

/// Appends `"0x..."`, or null for 0 when `nullable`.
pub(super) fn json_hex(out: &mut Vec<u8>, v: u64, nullable: bool) {
    if v == 0 && nullable {
        out.extend_from_slice(b"null");
        return;
    }
    out.push(b'"');
    out.extend_from_slice(Address(v).format(&mut [0; 18]).as_bytes());
    out.push(b'"');
}

/// Seconds with millisecond precision (the stamps are milliseconds).
pub(super) fn json_secs(out: &mut Vec<u8>, secs: f64) {
    let ms = (secs * 1000.0).round().max(0.0) as u64;
    json_u64(out, ms / 1000);
    out.push(b'.');
    let frac = ms % 1000;
    out.extend_from_slice(&[
        b'0' + (frac / 100) as u8,
        b'0' + (frac / 10 % 10) as u8,
        b'0' + (frac % 10) as u8,
    ]);
}

/// `,"key":` (or without the comma when `first`).
pub(super) fn json_key(out: &mut Vec<u8>, key: &str, first: bool) {
    if !first {
        out.push(b',');
    }
    out.push(b'"');
    out.extend_from_slice(key.as_bytes());
    out.extend_from_slice(b"\":");
}

/// The `fields` object of a tracked object.
pub(super) fn json_fields(out: &mut Vec<u8>, o: &Obj) {
    // The registered range of an MR or an imported MR.
    let range = |out: &mut Vec<u8>, first: bool| {
        json_key(out, "addr", first);
        json_hex(out, o.a, false);
        json_key(out, "length", false);
        json_u64(out, o.b);
        json_key(out, "lkey", false);
        json_u64(out, o.c as u32 as u64);
        json_key(out, "rkey", false);
        json_u64(out, o.c >> 32);
    };
    out.push(b'{');
    match o.kind() {
        Kind::Pd | Kind::ImportedPd => {
            json_key(out, "handle", true);
            json_u64(out, o.a);
        }
        Kind::Mr => {
            range(out, true);
            json_key(out, "access", false);
            json_u64(out, o.x as u64);
            json_key(out, "via", false);
            json_str(out, MR_VIA.get(o.sub() as usize).unwrap_or(&"ibv_reg_mr"));
        }
        Kind::Cq => {
            json_key(out, "cqe", true);
            json_i64(out, o.x as i32 as i64);
            json_key(out, "comp_vector", false);
            json_i64(out, o.a as u32 as i32 as i64);
        }
        Kind::CompChannel => {
            json_key(out, "fd", true);
            json_i64(out, o.x as i32 as i64);
        }
        Kind::Srq => {
            json_key(out, "max_wr", true);
            json_u64(out, o.x as u64);
            json_key(out, "max_sge", false);
            json_u64(out, o.a);
            json_key(out, "srq_limit", false);
            json_u64(out, o.b);
        }
        Kind::Qp => {
            json_key(out, "qp_num", true);
            json_u64(out, o.x as u64);
            json_key(out, "qp_type", false);
            json_str(out, &qp_type(o.sub()));
            json_key(out, "send_cq", false);
            json_hex(out, o.a, true);
            json_key(out, "recv_cq", false);
            json_hex(out, o.b, true);
            json_key(out, "srq", false);
            json_hex(out, o.c, true);
        }
        Kind::Ah => {
            json_key(out, "dlid", true);
            json_u64(out, o.a);
            json_key(out, "port_num", false);
            json_u64(out, o.b);
            json_key(out, "sl", false);
            json_u64(out, o.c & 0xff);
            json_key(out, "is_global", false);
            out.extend_from_slice(if o.c >> 8 & 1 != 0 { b"true" } else { b"false" });
            json_key(out, "via", false);
            json_str(
                out,
                AH_VIA.get(o.sub() as usize).unwrap_or(&"ibv_create_ah"),
            );
        }
        Kind::ImportedMr => {
            json_key(out, "handle", true);
            json_u64(out, o.x as u64);
            range(out, false);
        }
        Kind::Mw => {
            json_key(out, "mw_type", true);
            json_u64(out, o.x as u64);
            json_key(out, "rkey", false);
            json_u64(out, o.a);
        }
        Kind::Dm => {
            json_key(out, "length", true);
            json_u64(out, o.a);
        }
        _ => {
            json_key(out, "id", true);
            json_u64(out, o.a);
        }
    }
    out.push(b'}');
}

/// `"module":..,"symbol":..,"offset":..` of a site, cached per address.
pub(super) fn json_site(cache: &mut HashMap<usize, Vec<u8>>, caller: usize) -> &[u8] {
    cache.entry(caller).or_insert_with(|| {
        let s = site(caller);
        let mut out = Vec::new();
        json_key(&mut out, "module", false);
        json_opt_str(&mut out, s.module.as_deref());
        json_key(&mut out, "symbol", false);
        json_opt_str(&mut out, s.symbol.as_deref());
        json_key(&mut out, "offset", false);
        match s.offset {
            Some(o) => json_u64(&mut out, o),
            None => out.extend_from_slice(b"null"),
        }
        out
    })
}

/// `"context":..,"device":..,"guid":..`.
pub(super) fn json_context(out: &mut Vec<u8>, ctx: usize, info: Option<&ContextInfo>) {
    json_key(out, "context", false);
    json_hex(out, ctx as u64, true);
    json_key(out, "device", false);
    json_opt_str(out, info.and_then(|i| i.device_name.as_deref()));
    json_key(out, "guid", false);
    match info.and_then(|i| i.guid) {
        Some(g) => json_str(out, &format!("{:016x}", u64::from_be(g))),
        None => out.extend_from_slice(b"null"),
    }
}

#[allow(clippy::too_many_arguments)]
pub(super) fn json_created(
    out: &mut Vec<u8>,
    sites: &mut HashMap<usize, Vec<u8>>,
    tid: i64,
    time: Option<f64>,
    caller: usize,
    frames: Option<Vec<String>>,
) {
    json_key(out, "created", false);
    out.push(b'{');
    json_key(out, "thread", true);
    json_i64(out, tid);
    json_key(out, "time", false);
    match time {
        Some(t) => json_secs(out, t),
        None => out.extend_from_slice(b"null"),
    }
    out.extend_from_slice(json_site(sites, caller));
    json_key(out, "backtrace", false);
    match frames {
        Some(frames) => {
            out.push(b'[');
            for (i, f) in frames.iter().enumerate() {
                if i > 0 {
                    out.push(b',');
                }
                json_str(out, f);
            }
            out.push(b']');
        }
        None => out.extend_from_slice(b"null"),
    }
    out.push(b'}');
}

/// The JSON writer's buffer and the length at which it is written out:
/// ~1 MiB (a million objects make ~400 MB), less when memory is short.
/// Each object fits in the room kept past the mark.
pub(super) fn json_buffer() -> (Vec<u8>, usize) {
    let mut out = Vec::new();
    for flush in [1 << 20, 64 << 10, 8 << 10] {
        let room = flush + flush / 4;
        if oom::quietly(|| out.try_reserve_exact(room)).is_some() {
            return (out, flush);
        }
    }
    // Nothing to spare: one object at a time, on the shim's reserve.
    (out, 0)
}

/// Writes the JSON document (see `docs/leak-report.schema.json`) to a
/// temporary file renamed into place, so a reader never sees half of it.
pub(super) fn write_json(
    template: &OsString,
    inv: &Inventory,
    sup: &mut Suppressor,
) -> std::io::Result<()> {
    let path = std::path::PathBuf::from(OsString::from_vec(report_path(template).into_bytes()));
    // Written beside and renamed into place, so a reader never sees half of
    // it and nothing is written through a link (see `files`).
    let mut file = crate::files::AtomicFile::create(path.as_os_str())?;
    let clock = Clock::now();
    // Formatted straight into one large buffer, written when full: a
    // million objects make ~400 MB.
    let (mut out, flush) = json_buffer();

    out.extend_from_slice(b"{\"schema\":");
    json_str(&mut out, SCHEMA);
    json_key(&mut out, "pid", false);
    json_u64(&mut out, std::process::id() as u64);
    json_key(&mut out, "program", false);
    json_str(&mut out, &program());
    json_key(&mut out, "leaked", false);
    out.extend_from_slice(if inv.loud.total() > 0 {
        b"true"
    } else {
        b"false"
    });
    json_key(&mut out, "totals", false);
    out.push(b'{');
    for (i, kind) in ReportKind::ALL.iter().enumerate() {
        json_key(&mut out, kind.name(), i == 0);
        json_u64(&mut out, inv.loud.0[kind.index()] as u64);
    }
    out.extend_from_slice(b"},\"objects\":[");

    let mut sites: HashMap<usize, Vec<u8>> = HashMap::new();
    let mut first = true;
    let mut start = |out: &mut Vec<u8>, kind: &str, handle: usize| {
        out.extend_from_slice(if first {
            b"\n{\"kind\":\""
        } else {
            b",\n{\"kind\":\""
        });
        first = false;
        // Kind names need no escaping.
        out.extend_from_slice(kind.as_bytes());
        out.push(b'"');
        json_key(out, "handle", false);
        json_hex(out, handle as u64, false);
    };
    let end = |out: &mut Vec<u8>, found: &str, quiet: Option<Why>| {
        out.extend_from_slice(b",\"found\":\"");
        out.extend_from_slice(found.as_bytes());
        out.extend_from_slice(if quiet.is_some() {
            b"\",\"suppressed\":true,\"kept_by\":"
        } else {
            b"\",\"suppressed\":false,\"kept_by\":"
        });
        match quiet {
            Some(Why::Kept(owner)) => json_str(out, owner),
            _ => out.extend_from_slice(b"null"),
        }
        out.push(b'}');
    };
    for (ctx, c, quiet) in &inv.open {
        start(&mut out, ReportKind::Context.name(), *ctx);
        json_context(&mut out, *ctx, Some(c));
        out.extend_from_slice(b",\"parent\":null,\"fields\":");
        out.extend_from_slice(if c.imported {
            b"{\"imported\":true}"
        } else {
            b"{\"imported\":false}"
        });
        json_created(
            &mut out,
            &mut sites,
            c.tid as i64,
            Some(clock.wall(c.time_ms)),
            c.caller,
            None,
        );
        end(&mut out, "exit", *quiet);
    }
    for (l, quiet) in &inv.lists {
        start(&mut out, ReportKind::DeviceList.name(), l.list);
        json_context(&mut out, 0, None);
        out.extend_from_slice(b",\"parent\":null,\"fields\":{\"count\":");
        json_u64(&mut out, l.count as u64);
        out.push(b'}');
        json_created(
            &mut out,
            &mut sites,
            l.tid as i64,
            Some(clock.wall(l.time_ms)),
            l.caller,
            None,
        );
        end(&mut out, "exit", *quiet);
    }
    // `"context":..,"device":..,"guid":..` per context (and zombie-ness);
    // neighbours in the table mostly share one, so keep the last at hand.
    let mut contexts: HashMap<(usize, bool), Vec<u8>> = HashMap::new();
    let (mut last_ctx, mut ctx_json) = (None, Vec::new());
    let mut failed = Ok(());
    objects::for_each(|o| {
        if failed.is_err() {
            return;
        }
        start(&mut out, kind_of(o).name(), o.addr);
        let key = (o.ctx, o.is_zombie());
        if last_ctx != Some(key) {
            last_ctx = Some(key);
            ctx_json = contexts
                .entry(key)
                .or_insert_with(|| {
                    let mut v = Vec::new();
                    json_context(&mut v, o.ctx, inv.info_of(o));
                    v
                })
                .clone();
        }
        out.extend_from_slice(&ctx_json);
        json_key(&mut out, "parent", false);
        json_hex(&mut out, o.parent as u64, true);
        json_key(&mut out, "fields", false);
        json_fields(&mut out, o);
        json_created(
            &mut out,
            &mut sites,
            o.tid as i64,
            Some(clock.wall(o.time_ms())),
            o.caller,
            frames(o),
        );
        end(
            &mut out,
            if o.is_zombie() { "close" } else { "exit" },
            sup.obj(o),
        );
        if out.len() >= flush {
            failed = file.write_all(&out);
            out.clear();
        }
    });
    failed?;
    out.extend_from_slice(b"\n]");
    json_faults(&mut out);
    out.extend_from_slice(b",\"truncated\":");
    // Also when the registry could not record something: the list is short.
    match oom::dropped() != inv.dropped || crate::registry::objects::untracked() > 0 {
        true => json_str(&mut out, "out of memory"),
        false => out.extend_from_slice(b"null"),
    }
    if crate::checks::datapath() {
        json_key(&mut out, "checks", false);
        for (i, (check, n)) in crate::checks::counts().into_iter().enumerate() {
            out.push(if i == 0 { b'{' } else { b',' });
            json_str(&mut out, check.name());
            out.push(b':');
            json_u64(&mut out, n);
        }
        out.push(b'}');
    }
    out.extend_from_slice(b"}\n");
    file.write_all(&out)?;
    file.commit()
}

/// `,"faults":[...]`: the failures fault rules injected (none: absent).
fn json_faults(out: &mut Vec<u8>) {
    let faults = crate::faults::injected();
    if faults.is_empty() {
        return;
    }
    out.extend_from_slice(b",\"faults\":[");
    for (i, f) in faults.iter().enumerate() {
        out.extend_from_slice(if i == 0 { b"\n{" } else { b",\n{" });
        json_key(out, "verb", true);
        json_str(out, f.verb);
        json_key(out, "nth", false);
        json_u64(out, f.nth);
        json_key(out, "errno", false);
        match f.status {
            None => json_str(out, crate::guard::errno_name(f.errno)),
            Some(_) => out.extend_from_slice(b"null"),
        }
        json_key(out, "status", false);
        match f
            .status
            .and_then(|s| crate::faults::rules::WC_STATUSES.get(s as usize))
        {
            Some(s) => json_str(out, s),
            None => out.extend_from_slice(b"null"),
        }
        json_key(out, "rule", false);
        json_str(out, &f.rule);
        json_key(out, "module", false);
        match &f.module {
            Some(m) => json_str(out, m),
            None => out.extend_from_slice(b"null"),
        }
        json_key(out, "offset", false);
        json_u64(out, f.offset);
        out.push(b'}');
    }
    out.extend_from_slice(b"\n]");
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The `fields` written for each kind are the report model's for it
    /// (which refuses a missing or an extra field).
    #[test]
    fn the_fields_of_each_kind_read_as_the_model_s() {
        for kind in Kind::ALL {
            let mut o = Obj::new(kind, 0x100, 0x10, 0x20, 0, 1);
            (o.a, o.b, o.c, o.x) = (3, 4, 0x1_0000_0105, 6);
            let mut v = Vec::new();
            json_fields(&mut v, &o);
            let fields: serde_json::Value = serde_json::from_slice(&v).unwrap();
            let detail = report_model::Detail::from_fields(kind_of(&o), fields)
                .unwrap_or_else(|e| panic!("{}: {e}", kind.name()));
            assert_eq!(detail.kind().name(), kind.name());
        }
    }

    #[test]
    fn json_numbers() {
        let mut v = Vec::new();
        json_u64(&mut v, 0);
        v.push(b' ');
        json_u64(&mut v, 18446744073709551615);
        v.push(b' ');
        json_i64(&mut v, -42);
        v.push(b' ');
        json_hex(&mut v, 0x7f00_1234, false);
        v.push(b' ');
        json_hex(&mut v, 0, true);
        v.push(b' ');
        json_secs(&mut v, 1732900000.1234);
        v.push(b' ');
        json_str(&mut v, "a\"b\\c\n\u{1}é");
        assert_eq!(
            String::from_utf8(v).unwrap(),
            "0 18446744073709551615 -42 \"0x7f001234\" null 1732900000.123 \"a\\\"b\\\\c\\n\\u0001é\""
        );
    }
}
