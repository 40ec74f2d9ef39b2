//! What the program left of the connection manager at exit: ids never
//! destroyed (with their QP, under the id), channels never destroyed,
//! events never acked, lists never freed; and the problems diagnosed at
//! the calls. Suppression rules apply as to the verbs objects (by kind
//! name: `cm_id`, `event_channel`, `cm_event`, `addrinfo`,
//! `rdma_device_list`); the built-in ones name what librdmacm's rsockets
//! and libfabric's verbs provider make from their own code.

use std::borrow::Cow;
use std::fmt::Write as _;

use report_model::{Address, CmDiagnosis, CmKind, CmObject, ConnectionManager, Created};

use super::suppress::{Suppressor, Why};
use crate::cm::{event_name, port_space, with, ListKind};
use crate::log::Level;

/// Is this object suppressed (a rule of the user's, or a library's own:
/// the built-in rules name librdmacm's rsockets and libfabric's address
/// lists)?
fn why(sup: &mut Suppressor, kind: CmKind, site: usize) -> Option<Why> {
    sup.site(kind.name(), site)
}

/// The listing's lines and how many things leaked.
pub(super) fn listing(sup: &mut Suppressor) -> (Vec<String>, usize) {
    with(|s| {
        let mut lines = Vec::new();
        let mut n = 0;
        let mut ids: Vec<_> = s
            .ids
            .iter()
            .filter(|(_, i)| why(sup, CmKind::CmId, i.site).is_none())
            .collect();
        ids.sort_by_key(|(a, _)| **a);
        for (addr, i) in ids {
            n += 1;
            let mut l = format!(
                "  cm_id {addr:#x} (port space {}, state {}, channel {:#x}",
                port_space(i.ps),
                i.state,
                i.channel
            );
            if i.listener != 0 {
                let _ = write!(l, ", from listener {:#x}", i.listener);
            }
            let _ = write!(
                l,
                ") made by {} at {} [thread {}]",
                i.via,
                super::site(i.site),
                i.tid
            );
            lines.push(l);
            if i.qp != 0 {
                let alive = crate::registry::objects::get(i.qp).is_some();
                lines.push(format!(
                    "    qp {:#x} (rdma_create_qp){}",
                    i.qp,
                    if alive { ", alive" } else { "" }
                ));
            }
        }
        let mut chans: Vec<_> = s
            .channels
            .iter()
            .filter(|(_, c)| why(sup, CmKind::EventChannel, c.site).is_none())
            .collect();
        chans.sort_by_key(|(a, _)| **a);
        for (addr, c) in chans {
            n += 1;
            lines.push(format!(
                "  event channel {addr:#x} (fd {}) made by rdma_create_event_channel at {} [thread {}]",
                c.fd,
                super::site(c.site),
                c.tid
            ));
        }
        let mut events: Vec<_> = s
            .events
            .iter()
            .filter(|(_, e)| why(sup, CmKind::CmEvent, e.site).is_none())
            .collect();
        events.sort_by_key(|(a, _)| **a);
        for (addr, e) in events {
            n += 1;
            lines.push(format!(
                "  event {} (status {}) {addr:#x} of cm_id {:#x} fetched by rdma_get_cm_event at {} [thread {}], never acked",
                event_name(e.kind),
                e.status,
                e.id,
                super::site(e.site),
                e.tid
            ));
        }
        let mut lists: Vec<_> = s
            .lists
            .iter()
            .filter(|(_, l)| why(sup, list_kind(l.kind), l.site).is_none())
            .collect();
        lists.sort_by_key(|(a, _)| **a);
        for (addr, l) in lists {
            n += 1;
            let (what, by, free) = match l.kind {
                ListKind::AddrInfo => ("addrinfo list", "rdma_getaddrinfo", "rdma_freeaddrinfo"),
                ListKind::Devices => ("device list", "rdma_get_devices", "rdma_free_devices"),
            };
            lines.push(format!(
                "  {what} {addr:#x} from {by} at {} [thread {}], never passed to {free}",
                super::site(l.site),
                l.tid
            ));
        }
        (lines, n)
    })
}

/// The problems diagnosed at the calls (for the exit report).
pub(super) fn findings() -> Vec<(&'static str, String)> {
    with(|s| {
        s.findings
            .iter()
            .map(|f| (f.what, f.text.clone()))
            .collect()
    })
}

/// The exit report's connection-manager part, in the log. Returns whether
/// anything leaked.
pub(super) fn at_exit(sup: &mut Suppressor) -> bool {
    if !crate::cm::USED.load(std::sync::atomic::Ordering::Relaxed) {
        return false;
    }
    let (lines, n) = listing(sup);
    let found = findings();
    if n > 0 {
        crate::log!(
            Level::Warn,
            "connection manager at exit: {n} {} never freed:",
            if n == 1 { "thing was" } else { "things were" }
        );
        for l in &lines {
            crate::log!(Level::Warn, "{l}");
        }
    }
    if !found.is_empty() {
        crate::log!(
            Level::Warn,
            "connection manager: {} problem{} diagnosed at the call:",
            found.len(),
            if found.len() == 1 { "" } else { "s" }
        );
        for (what, text) in &found {
            crate::log!(Level::Warn, "  [{what}] {text}");
        }
    }
    n > 0
}

fn list_kind(k: ListKind) -> CmKind {
    match k {
        ListKind::AddrInfo => CmKind::Addrinfo,
        ListKind::Devices => CmKind::RdmaDeviceList,
    }
}

/// A creation site as the report's `created`.
fn created(site: usize, tid: i32, at: f64) -> Created<'static> {
    let s = super::site(site);
    Created {
        thread: tid,
        time: Some(at),
        module: s.module.map(Cow::Owned),
        symbol: s.symbol.map(Cow::Owned),
        offset: s.offset,
        function: s.function.map(Cow::Owned),
        file: s.file.map(Cow::Owned),
        line: s.line,
        build_id: s.build_id.map(Cow::Owned),
        backtrace: None,
    }
}

fn addr(a: usize) -> Option<Address> {
    Address::or_null(a as u64)
}

/// The report's `connection_manager` (None when the program made no
/// connection-manager object), and whether it holds a leak.
pub(super) fn json_section(sup: &mut Suppressor) -> (Option<ConnectionManager<'static>>, bool) {
    if !crate::cm::USED.load(std::sync::atomic::Ordering::Relaxed) {
        return (None, false);
    }
    let plain = |kind, handle: usize, via: &str, created| CmObject {
        kind,
        handle: Address(handle as u64),
        channel: None,
        id: None,
        listener: None,
        qp: None,
        port_space: None,
        state: None,
        event: None,
        status: None,
        fd: None,
        via: Cow::Owned(via.to_string()),
        created,
        suppressed: false,
        kept_by: None,
    };
    let mut objects = with(|s| {
        let mut out = Vec::new();
        for (&a, i) in s
            .ids
            .iter()
            .filter(|(_, i)| why(sup, CmKind::CmId, i.site).is_none())
        {
            let mut o = plain(CmKind::CmId, a, i.via, created(i.site, i.tid, i.at));
            o.channel = addr(i.channel);
            o.listener = addr(i.listener);
            o.qp = addr(i.qp);
            o.port_space = Some(Cow::Borrowed(port_space(i.ps)));
            o.state = Some(Cow::Borrowed(i.state));
            out.push((o, i.site));
        }
        for (&a, c) in s.channels.iter() {
            let mut o = plain(
                CmKind::EventChannel,
                a,
                "rdma_create_event_channel",
                created(c.site, c.tid, c.at),
            );
            o.fd = Some(c.fd);
            out.push((o, c.site));
        }
        for (&a, e) in s.events.iter() {
            let mut o = plain(
                CmKind::CmEvent,
                a,
                "rdma_get_cm_event",
                created(e.site, e.tid, e.at),
            );
            o.channel = addr(e.channel);
            o.id = addr(e.id);
            o.event = Some(Cow::Borrowed(event_name(e.kind)));
            o.status = Some(e.status);
            out.push((o, e.site));
        }
        for (&a, l) in s.lists.iter() {
            let (kind, via) = match l.kind {
                ListKind::AddrInfo => (CmKind::Addrinfo, "rdma_getaddrinfo"),
                ListKind::Devices => (CmKind::RdmaDeviceList, "rdma_get_devices"),
            };
            out.push((plain(kind, a, via, created(l.site, l.tid, l.at)), l.site));
        }
        out
    });
    for (o, site) in &mut objects {
        match why(sup, o.kind, *site) {
            Some(Why::User) => o.suppressed = true,
            Some(Why::Kept(owner)) => {
                o.suppressed = true;
                o.kept_by = Some(Cow::Borrowed(owner));
            }
            None => {}
        }
    }
    let mut objects: Vec<CmObject<'static>> = objects.into_iter().map(|(o, _)| o).collect();
    objects.sort_by_key(|o| (o.kind, o.handle.0));
    let diagnoses = findings()
        .into_iter()
        .map(|(check, text)| CmDiagnosis {
            check: Cow::Borrowed(check),
            text: Cow::Owned(text),
        })
        .collect();
    let leaked = objects.iter().any(|o| !o.suppressed);
    (Some(ConnectionManager { objects, diagnoses }), leaked)
}
