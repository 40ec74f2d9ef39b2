//! Connection-manager mistakes diagnosed at the call, in the log (WARN)
//! and kept for the exit report:
//!
//! - `rdma_destroy_id` / `rdma_destroy_event_channel` with events fetched
//!   and not acked: librdmacm's destroy waits until each is acked, for ever
//!   if none comes. Each event is named with where it was fetched before
//!   the call is forwarded (or, for events another thread fetched and may
//!   be about to ack, once it stays blocked a second), and again every few
//!   seconds while the call stays blocked (a watchdog thread reads the list of blocked destroys;
//!   no lock is held across the forwarded call);
//! - a second `rdma_ack_cm_event` of an event (librdmacm frees it at the
//!   first: refused, as the verbs' use after destroy is);
//! - `rdma_destroy_id` of an id whose QP is alive (the QP leaks);
//! - `rdma_destroy_qp` of an id whose QP it destroyed already (librdmacm
//!   would pass NULL to `ibv_destroy_qp`: refused);
//! - `rdma_disconnect` of an id that never connected.

use std::fmt::Write as _;
use std::sync::atomic::Ordering;

use crate::cm::{event_name, with, Blocked, Finding, State, WATCHDOG};
use crate::log::Level;

/// The watchdog's period: a blocked destroy is said again this often.
const REPEAT_MS: u64 = 2000;

fn now_ms() -> u64 {
    crate::clock::now() / 1_000_000
}

fn note(s: &mut State, what: &'static str, text: String) {
    crate::log!(Level::Warn, "{text}");
    if s.findings.len() < 1000 {
        s.findings.push(Finding { what, text });
    }
}

/// The unacked events that `call` on `target` waits for (`by_id`: events
/// of that id, else of that channel), as one text.
fn unacked(s: &State, target: usize, by_id: bool) -> Option<String> {
    let mut list: Vec<(&usize, &crate::cm::Event)> = s
        .events
        .iter()
        .filter(|(_, e)| {
            if by_id {
                e.id == target
            } else {
                e.channel == target
            }
        })
        .collect();
    if list.is_empty() {
        return None;
    }
    list.sort_by_key(|(a, _)| **a);
    let mut t = String::new();
    for (i, (addr, e)) in list.iter().enumerate() {
        let _ = write!(
            t,
            "{}event {} (status {}) at {:#x} fetched at {} [thread {}]",
            if i == 0 { "" } else { "; " },
            event_name(e.kind),
            e.status,
            addr,
            crate::report::site(e.site),
            e.tid
        );
    }
    Some(t)
}

/// Before `rdma_destroy_id(id)` / `rdma_destroy_event_channel(channel)`:
/// with unacked events, the call is registered with the watchdog, and
/// warned about at once when this thread fetched every one of them (no
/// other thread is about to ack it: the call blocks until this thread,
/// which is waiting, acks). Events fetched by other threads may be acked
/// by them in a moment (rping's event thread acks after its handler ran):
/// those are said by the watchdog once the call stays blocked for
/// [`GRACE_MS`]. Returns the token for [`destroy_done`] (0: none).
pub fn before_destroy(call: &'static str, target: usize, by_id: bool) -> u64 {
    static NEXT: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(1);
    let me = crate::thread::tid();
    let token = with(|s| {
        let events = unacked(s, target, by_id)?;
        let mine = s
            .events
            .values()
            .filter(|e| {
                if by_id {
                    e.id == target
                } else {
                    e.channel == target
                }
            })
            .all(|e| e.tid == me);
        let now = now_ms();
        if mine {
            said_blocking(s, call, target, by_id, &events);
        }
        let token = NEXT.fetch_add(1, Ordering::Relaxed);
        s.blocked.push(Blocked {
            token,
            call,
            what: target,
            tid: me,
            since_ms: now,
            said_ms: if mine { now } else { 0 },
        });
        Some(token)
    });
    match token {
        Some(t) => {
            start_watchdog();
            t
        }
        None => 0,
    }
}

/// The first warning of a destroy that waits for unacked events.
fn said_blocking(s: &mut State, call: &'static str, target: usize, by_id: bool, events: &str) {
    let arg = if by_id { "id" } else { "channel" };
    note(
        s,
        "unacked-events",
        format!(
            "{call}({arg}={target:#x}) with events fetched and never acked: {events}; \
             librdmacm waits until every one is acked with rdma_ack_cm_event, so this \
             call blocks (for ever if none is acked)"
        ),
    );
}

/// How long a destroy waiting for events another thread fetched may
/// block before it is said.
const GRACE_MS: u64 = 1000;

/// The destroy registered with `token` returned.
pub fn destroy_done(token: u64) {
    if token != 0 {
        with(|s| s.blocked.retain(|b| b.token != token));
    }
}

fn start_watchdog() {
    if !WATCHDOG.swap(true, Ordering::AcqRel)
        && !crate::thread::spawn_quiet("ibvshim-cm-watch", watchdog)
    {
        WATCHDOG.store(false, Ordering::Release);
    }
}

fn watchdog() {
    loop {
        std::thread::sleep(std::time::Duration::from_millis(REPEAT_MS / 4));
        let now = now_ms();
        let lines: Vec<String> = with(|s| {
            let mut out = Vec::new();
            let due: Vec<Blocked> = s
                .blocked
                .iter()
                .filter(|b| {
                    if b.said_ms == 0 {
                        now.saturating_sub(b.since_ms) >= GRACE_MS
                    } else {
                        now.saturating_sub(b.said_ms) >= REPEAT_MS
                    }
                })
                .cloned()
                .collect();
            for b in due {
                let by_id = b.call != "rdma_destroy_event_channel";
                let events = unacked(s, b.what, by_id).unwrap_or_else(|| "none left".into());
                if b.said_ms == 0 {
                    said_blocking(s, b.call, b.what, by_id, &events);
                } else {
                    out.push(format!(
                        "{}({:#x}) [thread {}] still blocked after {} s, waiting for unacked events: {events}",
                        b.call,
                        b.what,
                        b.tid,
                        (now - b.since_ms) / 1000
                    ));
                }
                if let Some(x) = s.blocked.iter_mut().find(|x| x.token == b.token) {
                    x.said_ms = now;
                }
            }
            out
        });
        for l in lines {
            crate::log!(Level::Warn, "{l}");
        }
    }
}

/// `rdma_ack_cm_event(event)`: `false` when this is a second ack of an
/// event the shim saw acked (said, and the call refused); else the event
/// is no longer outstanding.
pub fn ack(event: usize, caller: usize) -> bool {
    with(|s| {
        if s.events.remove(&event).is_some() {
            s.acked.insert(event);
            return true;
        }
        if s.acked.contains(&event) {
            note(
                s,
                "double-ack",
                format!(
                    "double ack: rdma_ack_cm_event(event={event:#x}) at {}: this event was acked \
                     already, and librdmacm freed it then (a second ack is a use after free); \
                     not forwarded, errno=EINVAL",
                    crate::report::site(caller)
                ),
            );
            return false;
        }
        true
    })
}

/// Before `rdma_destroy_id(id)`: its QP still alive is a leak.
pub fn id_with_qp(id: usize, qp: usize, caller: usize) {
    if qp == 0 || crate::registry::objects::get(qp).is_none() {
        return;
    }
    with(|s| {
        let made = s.ids.get(&id).map(|i| i.site).unwrap_or(0);
        note(
            s,
            "id-before-qp",
            format!(
                "rdma_destroy_id(id={id:#x}) at {} while its QP {qp:#x} is alive: librdmacm \
                 does not destroy it, so the QP (and the CQs rdma_create_qp made for it) leak \
                 unless destroyed later; destroy the QP first (the id was made at {})",
                crate::report::site(caller),
                crate::report::site(made)
            ),
        );
    });
}

/// `rdma_destroy_qp(id)`: `false` when its QP was destroyed by an
/// earlier `rdma_destroy_qp` and none was made since (said; refused).
pub fn destroy_qp(id: usize, qp_now: usize, caller: usize) -> bool {
    with(|s| {
        if qp_now == 0 && s.qp_destroyed.contains(&id) {
            note(
                s,
                "qp-destroyed-twice",
                format!(
                    "QP destroyed twice: rdma_destroy_qp(id={id:#x}) at {}: rdma_destroy_qp \
                     already destroyed this id's QP (librdmacm would call ibv_destroy_qp(NULL)); \
                     not forwarded",
                    crate::report::site(caller)
                ),
            );
            return false;
        }
        s.qp_destroyed.insert(id);
        if let Some(i) = s.ids.get_mut(&id) {
            // librdmacm destroys the CQs and channels it made with the QP;
            // the PD (and memory registered on it) stays.
            i.qp = 0;
            i.verbs = crate::cm::IdVerbs {
                pd: i.verbs.pd,
                ..Default::default()
            };
        }
        true
    })
}

/// `rdma_disconnect(id)` of an id that never connected.
pub fn disconnect(id: usize, caller: usize) {
    with(|s| {
        let Some(i) = s.ids.get(&id) else { return };
        if i.connected {
            return;
        }
        let state = i.state;
        note(
            s,
            "disconnect-unconnected",
            format!(
                "rdma_disconnect(id={id:#x}) at {} of an id that is not connected (state {state}): \
                 it fails with EINVAL on some transports",
                crate::report::site(caller)
            ),
        );
    });
}
