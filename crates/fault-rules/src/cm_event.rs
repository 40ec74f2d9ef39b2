//! `cm_event` rules: an event `rdma_get_cm_event` returns replaced by a
//! failure event, as a broken network or a refusing peer would give it.
//!
//! ```text
//! cm_event:as=EVENT[:event=EVENT][:reason=N]:WHEN
//! ```
//!
//! `as=` is the failure given (`ADDR_ERROR`, `ROUTE_ERROR`, `UNREACHABLE`,
//! `REJECTED`, `CONNECT_ERROR`, `DISCONNECTED`); `event=` the event it
//! replaces (default: the one that failure stands in for, [`natural`]);
//! `reason=` the event's `status` (default: 28, a consumer's reject, for
//! `REJECTED`; 0 for `DISCONNECTED`; -ETIMEDOUT otherwise). Calls are
//! counted among the events of that type.

/// `enum rdma_cm_event_type` by value (`rdma_cma.h`).
pub const CM_EVENTS: &[&str] = &[
    "ADDR_RESOLVED",
    "ADDR_ERROR",
    "ROUTE_RESOLVED",
    "ROUTE_ERROR",
    "CONNECT_REQUEST",
    "CONNECT_RESPONSE",
    "CONNECT_ERROR",
    "UNREACHABLE",
    "REJECTED",
    "ESTABLISHED",
    "DISCONNECTED",
    "DEVICE_REMOVAL",
    "MULTICAST_JOIN",
    "MULTICAST_ERROR",
    "ADDR_CHANGE",
    "TIMEWAIT_EXIT",
];

/// The failure events a rule may give.
pub const FAILURES: &[&str] = &[
    "ADDR_ERROR",
    "ROUTE_ERROR",
    "UNREACHABLE",
    "REJECTED",
    "CONNECT_ERROR",
    "DISCONNECTED",
];

/// What a `cm_event` rule does.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Replace {
    /// The event type replaced.
    pub event: u32,
    /// The event type given instead.
    pub with: u32,
    /// The `status` the given event carries.
    pub reason: i32,
}

/// An event type's name (`RDMA_CM_EVENT_` left off).
pub fn event_name(kind: u32) -> &'static str {
    CM_EVENTS.get(kind as usize).copied().unwrap_or("UNKNOWN")
}

/// An event type by name (with or without `RDMA_CM_EVENT_`) or number.
pub fn event_kind(v: &str) -> Option<u32> {
    let bare = v.strip_prefix("RDMA_CM_EVENT_").unwrap_or(v);
    CM_EVENTS
        .iter()
        .position(|n| n.eq_ignore_ascii_case(bare))
        .map(|i| i as u32)
        .or_else(|| {
            v.parse::<u32>()
                .ok()
                .filter(|&n| n < CM_EVENTS.len() as u32)
        })
}

/// The event a failure stands in for: an address's or a route's
/// resolution, else the connection's establishment.
pub fn natural(with: u32) -> u32 {
    match event_name(with) {
        "ADDR_ERROR" => 0,
        "ROUTE_ERROR" => 2,
        _ => 9,
    }
}

/// The `status` a failure carries unless the rule says.
pub fn default_reason(with: u32) -> i32 {
    match event_name(with) {
        "REJECTED" => 28,
        "DISCONNECTED" => 0,
        _ => -libc::ETIMEDOUT,
    }
}

/// The replacements a sweep tries for an event the program fetched, as
/// the rules' prefixes (`cm_event:event=E:as=F`): an address or a route
/// that does not resolve; a connection rejected, or ended at once.
pub fn sweep_points(kind: u32) -> &'static [&'static str] {
    match event_name(kind) {
        "ADDR_RESOLVED" => &["cm_event:event=ADDR_RESOLVED:as=ADDR_ERROR"],
        "ROUTE_RESOLVED" => &["cm_event:event=ROUTE_RESOLVED:as=ROUTE_ERROR"],
        "ESTABLISHED" => &[
            "cm_event:event=ESTABLISHED:as=REJECTED",
            "cm_event:event=ESTABLISHED:as=DISCONNECTED",
        ],
        _ => &[],
    }
}

/// A `cm_event` rule's keys made into its replacement.
pub fn replace(
    event: Option<&str>,
    with: Option<&str>,
    reason: Option<&str>,
) -> Result<Replace, String> {
    let with = with.ok_or("a cm_event rule needs as= (e.g. as=REJECTED)")?;
    let with = event_kind(with)
        .filter(|&k| FAILURES.contains(&event_name(k)))
        .ok_or_else(|| {
            format!(
                "as={with:?} is not a failure event ({})",
                FAILURES.join(", ")
            )
        })?;
    let event = match event {
        None => natural(with),
        Some(e) => event_kind(e).ok_or_else(|| {
            format!(
                "event={e:?} is not an rdma_cm event ({})",
                CM_EVENTS.join(", ")
            )
        })?,
    };
    if event == with {
        return Err(format!("event= and as= are both {}", event_name(with)));
    }
    let reason = match reason {
        None => default_reason(with),
        Some(r) => r
            .parse::<i32>()
            .map_err(|_| format!("reason={r:?} is not a number (the event's status)"))?,
    };
    Ok(Replace {
        event,
        with,
        reason,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_and_numbers() {
        assert_eq!(event_kind("ESTABLISHED"), Some(9));
        assert_eq!(event_kind("RDMA_CM_EVENT_REJECTED"), Some(8));
        assert_eq!(event_kind("8"), Some(8));
        assert_eq!(event_kind("NOPE"), None);
        assert_eq!(event_name(15), "TIMEWAIT_EXIT");
    }

    #[test]
    fn defaults_and_refusals() {
        let r = replace(None, Some("REJECTED"), None).unwrap();
        assert_eq!((r.event, r.with, r.reason), (9, 8, 28));
        let r = replace(None, Some("ADDR_ERROR"), None).unwrap();
        assert_eq!((r.event, r.reason), (0, -libc::ETIMEDOUT));
        let r = replace(Some("ROUTE_RESOLVED"), Some("UNREACHABLE"), Some("-113")).unwrap();
        assert_eq!((r.event, r.with, r.reason), (2, 7, -113));
        assert!(replace(None, None, None).is_err());
        assert!(replace(None, Some("ESTABLISHED"), None).is_err());
        assert!(replace(Some("DISCONNECTED"), Some("DISCONNECTED"), None).is_err());
        assert!(replace(None, Some("REJECTED"), Some("x")).is_err());
    }
}
