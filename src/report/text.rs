//! The reports as text for the log: objects, counts, the tree of a
//! context's objects, and why an object is not a leak.

use std::borrow::Cow;
use std::fmt::{self, Write as _};

use crate::log::Level;
use crate::oom;
use crate::registry::contexts::ContextInfo;
use crate::registry::objects::{self, Facts, Kind, Obj};

use report_model::Kind as ReportKind;

use super::inventory::{age, Counts, How, Inventory, Quiet, Tally};
use super::site::{frames, site};
use super::suppress::{Suppressor, Why};

pub(super) fn qp_type(t: u8) -> Cow<'static, str> {
    match t {
        2 => "RC".into(),
        3 => "UC".into(),
        4 => "UD".into(),
        8 => "RAW_PACKET".into(),
        9 => "XRC_SEND".into(),
        10 => "XRC_RECV".into(),
        0xff => "DRIVER".into(),
        n => n.to_string().into(),
    }
}

/// Nonzero pointer as hex, or `NULL`.
pub(super) struct P(u64);

impl fmt::Display for P {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.0 == 0 {
            f.write_str("NULL")
        } else {
            write!(f, "{:#x}", self.0)
        }
    }
}

/// An object's identifying fields, for the text reports.
pub(super) struct Fields<'a>(&'a Obj);

impl fmt::Display for Fields<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let o = self.0;
        match o.facts.of_kind(o.kind()) {
            Facts::Pd { handle } => write!(f, "handle={handle}"),
            Facts::Mr(m) => write!(
                f,
                "addr={:#x} length={} lkey={:#x} rkey={:#x} access={:#x} ({})",
                m.addr,
                m.length,
                m.keys.lkey,
                m.keys.rkey,
                m.access,
                m.via.name()
            ),
            Facts::Cq { cqe, comp_vector } => {
                write!(f, "cqe={cqe} comp_vector={comp_vector}")?;
                if o.parent != 0 {
                    write!(f, " channel={:#x}", o.parent)?;
                }
                Ok(())
            }
            Facts::CompChannel { fd } => write!(f, "fd={fd}"),
            Facts::Srq {
                max_wr,
                max_sge,
                srq_limit,
            } => write!(f, "max_wr={max_wr} max_sge={max_sge} srq_limit={srq_limit}"),
            Facts::Qp(q) => write!(
                f,
                "qp_num={:#x} type={} send_cq={} recv_cq={} srq={}",
                q.qp_num,
                qp_type(q.qp_type),
                P(q.send_cq.get() as u64),
                P(q.recv_cq.get() as u64),
                P(q.srq.get() as u64)
            ),
            Facts::Ah(h) => write!(
                f,
                "dlid={:#x} port_num={} sl={}{} ({})",
                h.dlid,
                h.port_num,
                h.sl,
                if h.global { " global" } else { "" },
                h.via.name()
            ),
            Facts::ImportedMr {
                handle,
                addr,
                length,
                keys,
            } => write!(
                f,
                "handle={handle} addr={addr:#x} length={length} lkey={:#x} rkey={:#x}",
                keys.lkey, keys.rkey
            ),
            Facts::Mw { mw_type, rkey } => write!(f, "type={mw_type} rkey={rkey:#x}"),
            Facts::Dm { length } => write!(f, "length={length}"),
            Facts::ParentDomain { handle: id, .. } | Facts::Id(id) => write!(f, "id={id}"),
            Facts::None => write!(f, "id=0"),
        }
    }
}

/// One object in a log line: kind, address, fields, creation site.
pub struct Brief<'a>(pub &'a Obj);

impl fmt::Display for Brief<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let o = self.0;
        write!(
            f,
            "{} {:#x} ({}) created by thread {} at {}",
            o.kind().name(),
            o.addr,
            Fields(o),
            o.tid,
            site(o.caller)
        )
    }
}

impl fmt::Display for Counts {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut first = true;
        for (k, n) in ReportKind::ALL.iter().zip(self.0).filter(|(_, n)| *n > 0) {
            write!(f, "{}{n} {k}", if first { "" } else { ", " })?;
            first = false;
        }
        Ok(())
    }
}

/// "1 object", "2 objects".
pub(super) struct Plural(usize, &'static str, &'static str);

impl fmt::Display for Plural {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let Plural(n, one, many) = *self;
        write!(f, "{n} {}", if n == 1 { one } else { many })
    }
}

pub(super) fn plural(n: usize, one: &'static str, many: &'static str) -> Plural {
    Plural(n, one, many)
}

pub(super) fn is_pd(o: &Obj) -> bool {
    matches!(o.kind(), Kind::Pd | Kind::ImportedPd)
}

pub(super) fn on_pd(o: &Obj) -> bool {
    matches!(
        o.kind(),
        Kind::Mr
            | Kind::Qp
            | Kind::Srq
            | Kind::Ah
            | Kind::ImportedMr
            | Kind::Mw
            | Kind::Wq
            | Kind::ParentDomain
    )
}

/// Appends the listed objects as a tree: each PD (listed, or fetched as the
/// parent of a listed object) followed by the listed objects on it, then
/// the rest, oldest first; then a line counting what was not listed.
pub(super) fn tree(out: &mut oom::Text, tally: &Tally, indent: &str, sup: &mut Suppressor) {
    // The listed objects and, at most as many, the parents they hang under.
    let mut listed: Vec<Obj> = Vec::new();
    if oom::fallibly(|| listed.try_reserve_exact(2 * tally.oldest.len())).is_none() {
        out.truncated = true;
        return;
    }
    listed.extend(tally.oldest.iter().map(|a| a.0));
    let mut shown = Counts::default();
    listed.iter().for_each(|o| shown.add_obj(o));
    // Parents not listed themselves: fetch them so their children hang
    // under them (only if they belong to the same context, closed or not).
    for i in 0..listed.len() {
        let o = listed[i];
        if !on_pd(&o) || listed.iter().any(|p| p.addr == o.parent) {
            continue;
        }
        if let Some(p) = objects::get(o.parent)
            .filter(|p| is_pd(p) && p.ctx == o.ctx && p.is_zombie() == o.is_zombie())
        {
            if sup.obj(&p).is_none() {
                shown.add_obj(&p);
            }
            listed.push(p);
        }
    }
    listed.sort_by_key(age);
    let under = |o: &Obj| on_pd(o) && listed.iter().any(|p| is_pd(p) && p.addr == o.parent);
    let line = |out: &mut oom::Text, o: &Obj, depth: &str, sup: &mut Suppressor| {
        let _ = write!(out, "\n{indent}{depth}{}", Brief(o));
        if on_pd(o) && depth.is_empty() && o.parent != 0 {
            let _ = write!(out, " on pd {:#x}", o.parent);
        }
        let _ = write!(out, "{}", why_text(sup.obj(o)));
        if let Some(frames) = frames(o) {
            for fr in frames.iter().take(32) {
                let _ = write!(out, "\n{indent}{depth}      {fr}");
            }
        }
    };
    for o in listed.iter().filter(|o| !under(o)) {
        line(out, o, "", sup);
        if is_pd(o) {
            for c in listed.iter().filter(|c| under(c) && c.parent == o.addr) {
                line(out, c, "  ", sup);
            }
        }
    }
    let rest = tally.loud.minus(&shown);
    if rest.total() > 0 {
        let _ = write!(
            out,
            "\n{indent}... and {} more ({rest}); IBV_SHIM_REPORT=<file> lists them all",
            rest.total()
        );
    }
}

/// " on mlx5_0 (guid 0c42a10300123456) [NVIDIA/Mellanox]".
pub(super) struct DeviceText<'a>(Option<&'a ContextInfo>);

impl fmt::Display for DeviceText<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let info = self.0;
        let Some(name) = info.and_then(|i| i.device_name.as_deref()) else {
            return Ok(());
        };
        let guid = info.and_then(|i| i.guid);
        match guid {
            Some(g) => write!(f, " on {name} (guid {:016x})", u64::from_be(g))?,
            None => write!(f, " on {name}")?,
        }
        match super::vendor::vendor(name, guid) {
            Some(v) => write!(f, " [{v}]"),
            None => Ok(()),
        }
    }
}

pub(super) fn device_text(info: Option<&ContextInfo>) -> DeviceText<'_> {
    DeviceText(info)
}

/// "2 suppressed by IBV_SHIM_SUPPRESS, 3 kept by librdmacm (suppressed by
/// default)"; `{:#}` says "2 more suppressed ...".
impl fmt::Display for Quiet {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let more = if f.alternate() { " more" } else { "" };
        let mut sep = "";
        if self.user > 0 {
            write!(f, "{}{more} suppressed by IBV_SHIM_SUPPRESS", self.user)?;
            sep = ", ";
        }
        for (owner, n) in &self.kept {
            write!(f, "{sep}{n}{more} kept by {owner} (suppressed by default)")?;
            sep = ", ";
        }
        Ok(())
    }
}

/// "; not leaks: 3 kept by librdmacm (suppressed by default)", or nothing.
pub(super) struct NotLeaks<'a>(pub(super) &'a Quiet);

impl fmt::Display for NotLeaks<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.0.total() {
            0 => Ok(()),
            _ => write!(f, "; not leaks: {}", self.0),
        }
    }
}

/// " (suppressed)" or " (kept by librdmacm, suppressed by default)".
pub(super) struct WhyText(Option<Why>);

impl fmt::Display for WhyText {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.0 {
            None => Ok(()),
            Some(Why::User) => f.write_str(" (suppressed)"),
            Some(Why::Kept(owner)) => write!(f, " (kept by {owner}, suppressed by default)"),
        }
    }
}

pub(super) fn why_text(why: Option<Why>) -> WhyText {
    WhyText(why)
}

/// Logs text made of `\n`-led lines, one log line each.
pub(super) fn log_lines(text: &oom::Text) {
    crate::log::block(
        Level::Warn,
        text.text.strip_prefix('\n').unwrap_or(&text.text),
    );
}

/// After a report: if memory ran out while it was made, it says so (the
/// log line needs no memory).
pub(super) fn say_if_truncated(dropped_before: usize) {
    if oom::dropped() != dropped_before {
        crate::log!(Level::Warn, "report truncated: out of memory");
    }
}

/// The exit report's listing under its headline: each context with what
/// it still owns, then the device lists never freed.
pub(super) fn exit_listing(inv: &Inventory, sup: &mut Suppressor) -> oom::Text {
    let mut text = oom::Text::default();
    for g in &inv.groups {
        let owned = g.tally.loud;
        let ctx = g.ctx;
        match (g.how, g.info) {
            (How::Open, Some(c)) => {
                let quiet = inv
                    .open
                    .iter()
                    .find(|(k, _, _)| *k == ctx)
                    .and_then(|(_, _, q)| *q);
                if quiet.is_some() && owned.total() == 0 {
                    continue;
                }
                let _ = write!(
                    text,
                    "\n  context {ctx:#x}{} opened by thread {} at {} was never closed{}",
                    device_text(g.info),
                    c.tid,
                    site(c.caller),
                    why_text(quiet)
                );
                if owned.total() > 0 {
                    let _ = write!(
                        text,
                        "; it still owns {} ({owned}):",
                        plural(owned.total(), "object", "objects")
                    );
                }
            }
            (How::Closed, _) if owned.total() > 0 => {
                let _ = write!(
                    text,
                    "\n  context {ctx:#x}{} was closed with {} still allocated ({owned}), reported at close:",
                    device_text(g.info),
                    plural(owned.total(), "object", "objects"),
                );
            }
            (How::Foreign, _) if owned.total() > 0 => {
                let _ = write!(
                    text,
                    "\n  context {ctx:#x} (not opened by this process) has {} never destroyed ({owned}):",
                    plural(owned.total(), "object", "objects"),
                );
            }
            _ => continue,
        }
        tree(&mut text, &g.tally, "    ", sup);
    }
    for (l, _) in inv.lists.iter().filter(|(_, quiet)| quiet.is_none()) {
        let _ = write!(
            text,
            "\n  device list {:#x} ({}) from ibv_get_device_list by thread {} at {} was never freed",
            l.list,
            plural(l.count, "device", "devices"),
            l.tid,
            site(l.caller)
        );
    }
    text
}

/// `SUMMARY: ibv-shim: 3 objects leaked (1 context, 1 pd, 1 mr) in 1
/// context.`: the exit report's last line, as sanitizers end theirs.
pub(super) fn summary_line<'a>(inv: &'a Inventory<'a>) -> Summary<'a> {
    Summary(inv)
}

pub(super) struct Summary<'a>(&'a Inventory<'a>);

impl fmt::Display for Summary<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let inv = self.0;
        // A context counts when it leaked itself or owns a leaked object.
        let loud_open = |ctx: usize| {
            inv.open
                .iter()
                .any(|(c, _, quiet)| *c == ctx && quiet.is_none())
        };
        let contexts = inv
            .groups
            .iter()
            .filter(|g| g.tally.loud.total() > 0 || (g.how == How::Open && loud_open(g.ctx)))
            .count();
        write!(
            f,
            "SUMMARY: ibv-shim: {} leaked ({}) in {}",
            plural(inv.loud.total(), "object", "objects"),
            inv.loud,
            plural(contexts, "context", "contexts")
        )?;
        if inv.quiet.total() > 0 {
            write!(f, "; {} suppressed", inv.quiet.total())?;
        }
        f.write_str(".")
    }
}

#[cfg(test)]
mod tests {
    use super::super::inventory::TEXT_LIMIT;
    use super::super::suppress::Suppressor;
    use super::*;

    #[test]
    fn the_listing_keeps_the_oldest_and_hangs_children_under_their_pd() {
        let mut objs = Vec::new();
        let pd = Obj::new(Kind::Pd, 0x100, 1, 0, 0, 1);
        let cq = Obj::new(Kind::Cq, 0x300, 1, 0, 0, 1);
        let stray = Obj::new(Kind::Qp, 0x400, 1, 0x999, 0, 1);
        objs.extend([cq, stray, pd]);
        for i in 0..300 {
            objs.push(Obj::new(Kind::Mr, 0x1000 + i * 16, 1, 0x100, 0, 1));
        }
        let mut tally = Tally::default();
        let mut sup = Suppressor::new();
        objs.iter().for_each(|o| tally.add(o, None));
        tally.add(&Obj::new(Kind::Ah, 0x500, 1, 0x100, 0, 1), Some(Why::User));
        assert_eq!(tally.loud.total(), 303);
        assert_eq!(tally.quiet.total(), 1);
        assert_eq!(tally.oldest.len(), TEXT_LIMIT);
        let mut t = oom::Text::default();
        tree(&mut t, &tally, "  ", &mut sup);
        let text = t.text;
        let lines: Vec<&str> = text.lines().skip(1).collect();
        assert!(lines[0].starts_with("  pd 0x100 "), "{text}");
        assert!(lines[1].starts_with("    mr 0x1000 "), "{text}");
        // Made in the same millisecond: by kind, so the PD and 99 MRs.
        assert_eq!(
            lines.iter().filter(|l| l.starts_with("    mr ")).count(),
            TEXT_LIMIT - 1,
            "{text}"
        );
        assert_eq!(
            *lines.last().unwrap(),
            "  ... and 203 more (201 mr, 1 cq, 1 qp); IBV_SHIM_REPORT=<file> lists them all"
        );
        // A small set is listed whole, strays marked with their PD.
        let mut tally = Tally::default();
        [cq, stray, pd, objs[3]]
            .iter()
            .for_each(|o| tally.add(o, None));
        let mut t = oom::Text::default();
        tree(&mut t, &tally, "", &mut sup);
        let text = t.text;
        let lines: Vec<&str> = text
            .lines()
            .skip(1)
            .map(|l| l.split(" (").next().unwrap())
            .collect();
        assert_eq!(
            lines,
            ["pd 0x100", "  mr 0x1000", "cq 0x300", "qp 0x400"],
            "{text}"
        );
        assert!(text.contains("on pd 0x999"), "{text}");
    }
}
