//! What the program left of the connection manager at exit: ids never
//! destroyed (with their QP, under the id), channels never destroyed,
//! events never acked, lists never freed; and the problems diagnosed at
//! the calls. Suppression rules apply as to the verbs objects (by kind
//! name: `cm_id`, `event_channel`, `cm_event`, `addrinfo`,
//! `rdma_device_list`); the built-in ones name what librdmacm's rsockets
//! and libfabric's verbs provider make from their own code.

use std::borrow::Cow;
use std::collections::HashMap;
use std::fmt::Write as _;

use report_model::{Address, CmDiagnosis, CmKind, CmObject, CmVerbs, ConnectionManager, Created};

use super::suppress::{Suppressor, Why};
use crate::cm::{event_name, port_space, with, Id, ListKind};
use crate::log::Level;
use crate::registry::objects::{self, Kind};

/// A verbs object named under an id: its role, address, creation site and,
/// for a PD another listed id claimed first, that id.
struct Under {
    role: &'static str,
    addr: usize,
    site: usize,
    shared_with: usize,
}

/// The live verbs objects that belong with each of `ids` (sorted by
/// address): what librdmacm made with the id's QP, the QP's PD and the MRs
/// on it. A PD several ids share is listed with its MRs under the first,
/// and under the others as shared with it.
fn verbs_under(ids: &[(usize, &Id)]) -> HashMap<usize, Vec<Under>> {
    let mut mrs: HashMap<usize, Vec<(usize, usize)>> = HashMap::new();
    objects::for_each(|o| {
        if o.kind() == Kind::Mr {
            mrs.entry(o.parent).or_default().push((o.addr, o.caller));
        }
    });
    let mut claimed: HashMap<usize, usize> = HashMap::new();
    let mut out = HashMap::new();
    for &(id, i) in ids {
        let mut under = Vec::new();
        for (role, addr) in i.verbs.made() {
            if let Some(o) = (addr != 0).then(|| objects::get(addr)).flatten() {
                under.push(Under {
                    role,
                    addr,
                    site: o.caller,
                    shared_with: 0,
                });
            }
        }
        let pd = i.verbs.pd;
        if let Some(o) = (pd != 0).then(|| objects::get(pd)).flatten() {
            let first = *claimed.entry(pd).or_insert(id);
            under.push(Under {
                role: "pd",
                addr: pd,
                site: o.caller,
                shared_with: if first == id { 0 } else { first },
            });
            if first == id {
                let mut on_pd = mrs.get(&pd).cloned().unwrap_or_default();
                on_pd.sort_unstable();
                under.extend(on_pd.into_iter().map(|(addr, site)| Under {
                    role: "mr",
                    addr,
                    site,
                    shared_with: 0,
                }));
            }
        }
        out.insert(id, under);
    }
    out
}

/// An object under an id, as a listing line.
fn under_line(u: &Under) -> String {
    match u.role {
        "pd" if u.shared_with != 0 => format!(
            "    pd {:#x} (its QP's), shared with cm_id {:#x}: memory on it is listed there",
            u.addr, u.shared_with
        ),
        "pd" => format!(
            "    pd {:#x} (its QP's) made at {}, alive",
            u.addr,
            super::site(u.site)
        ),
        "mr" => format!(
            "      mr {:#x} on that pd (rdma_reg_msgs, rdma_reg_read, rdma_reg_write or ibv_reg_mr) at {}, alive",
            u.addr,
            super::site(u.site)
        ),
        role => format!("    {role} {:#x} (made by librdmacm with the QP), alive", u.addr),
    }
}

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
            .map(|(a, i)| (*a, i))
            .collect();
        ids.sort_by_key(|(a, _)| *a);
        let mut under = verbs_under(&ids);
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
            lines.extend(
                under
                    .remove(&addr)
                    .unwrap_or_default()
                    .iter()
                    .map(under_line),
            );
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
        verbs: Vec::new(),
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
        let mut ids: Vec<_> = s
            .ids
            .iter()
            .filter(|(_, i)| why(sup, CmKind::CmId, i.site).is_none())
            .map(|(a, i)| (*a, i))
            .collect();
        ids.sort_by_key(|(a, _)| *a);
        let mut under = verbs_under(&ids);
        for (a, i) in ids {
            let mut o = plain(CmKind::CmId, a, i.via, created(i.site, i.tid, i.at));
            o.channel = addr(i.channel);
            o.listener = addr(i.listener);
            o.qp = addr(i.qp);
            o.verbs = under
                .remove(&a)
                .unwrap_or_default()
                .into_iter()
                .map(|u| CmVerbs {
                    role: Cow::Borrowed(u.role),
                    handle: Address(u.addr as u64),
                    shared_with: addr(u.shared_with),
                })
                .collect();
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
