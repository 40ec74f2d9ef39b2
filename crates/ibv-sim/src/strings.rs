//! The `*_str` helpers and the rate conversions (pure functions of the API).

use core::ffi::{c_char, c_int, CStr};

fn pick(table: &'static [&'static CStr], i: c_int) -> *const c_char {
    usize::try_from(i)
        .ok()
        .and_then(|i| table.get(i))
        .copied()
        .unwrap_or(c"unknown")
        .as_ptr()
}

/// `ibv_node_type_str`.
pub fn node_type(v: c_int) -> *const c_char {
    const T: &[&CStr] = &[
        c"unknown",
        c"InfiniBand channel adapter",
        c"InfiniBand switch",
        c"InfiniBand router",
        c"iWARP NIC",
        c"usNIC",
        c"usNIC UDP",
        c"unspecified",
    ];
    pick(T, v)
}

/// `ibv_port_state_str`.
pub fn port_state(v: c_int) -> *const c_char {
    const T: &[&CStr] = &[
        c"no state change (NOP)",
        c"down",
        c"init",
        c"armed",
        c"active",
        c"active defer",
    ];
    pick(T, v)
}

/// `ibv_event_type_str`.
pub fn event_type(v: c_int) -> *const c_char {
    const T: &[&CStr] = &[
        c"CQ error",
        c"local work queue catastrophic error",
        c"invalid request local work queue error",
        c"local access violation work queue error",
        c"communication established",
        c"send queue drained",
        c"path migrated",
        c"path migration request error",
        c"local catastrophic error",
        c"port active",
        c"port error",
        c"LID change",
        c"P_Key change",
        c"SM change",
        c"SRQ catastrophic error",
        c"SRQ limit reached",
        c"last WQE reached",
        c"client reregistration",
        c"GID table change",
        c"WQ fatal",
    ];
    pick(T, v)
}

/// `ibv_wc_status_str`.
pub fn wc_status(v: c_int) -> *const c_char {
    const T: &[&CStr] = &[
        c"success",
        c"local length error",
        c"local QP operation error",
        c"local EE context operation error",
        c"local protection error",
        c"Work Request Flushed Error",
        c"memory management operation error",
        c"bad response error",
        c"local access error",
        c"remote invalid request error",
        c"remote access error",
        c"remote operation error",
        c"transport retry counter exceeded",
        c"RNR retry counter exceeded",
        c"local RDD violation error",
        c"remote invalid RD request",
        c"aborted error",
        c"invalid EE context number",
        c"invalid EE context state",
        c"fatal error",
        c"response timeout error",
        c"general error",
        c"TM error",
        c"TM software rendezvous",
    ];
    pick(T, v)
}

/// (`ibv_rate` code, multiple of 2.5 Gb/s or -1, Mb/s).
const RATES: &[(c_int, c_int, c_int)] = &[
    (2, 1, 2500),
    (5, 2, 5000),
    (3, 4, 10000),
    (6, 8, 20000),
    (4, 12, 30000),
    (7, 16, 40000),
    (8, 24, 60000),
    (9, 32, 80000),
    (10, 48, 120000),
    (11, -1, 14062),
    (12, -1, 56250),
    (13, -1, 112500),
    (14, -1, 168750),
    (15, -1, 25781),
    (16, -1, 103125),
    (17, -1, 206250),
    (18, -1, 309375),
    (19, 11, 28125),
    (20, 20, 53125),
    (21, 160, 425000),
    (22, 240, 637500),
    (23, 320, 850000),
    (24, 480, 1275000),
];

/// `ibv_rate_to_mult`.
pub fn rate_to_mult(rate: c_int) -> c_int {
    RATES.iter().find(|r| r.0 == rate).map_or(-1, |r| r.1)
}

/// `mult_to_ibv_rate` (`IBV_RATE_MAX`, 0, when unknown).
pub fn mult_to_rate(mult: c_int) -> c_int {
    RATES
        .iter()
        .find(|r| r.1 == mult && mult > 0)
        .map_or(0, |r| r.0)
}

/// `ibv_rate_to_mbps`.
pub fn rate_to_mbps(rate: c_int) -> c_int {
    RATES.iter().find(|r| r.0 == rate).map_or(-1, |r| r.2)
}

/// `mbps_to_ibv_rate`.
pub fn mbps_to_rate(mbps: c_int) -> c_int {
    RATES.iter().find(|r| r.2 == mbps).map_or(0, |r| r.0)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn s(p: *const c_char) -> &'static str {
        // SAFETY: the tables hold static C strings.
        unsafe { CStr::from_ptr(p) }.to_str().unwrap()
    }

    #[test]
    fn strings() {
        assert_eq!(s(wc_status(0)), "success");
        assert_eq!(s(wc_status(5)), "Work Request Flushed Error");
        assert_eq!(s(wc_status(99)), "unknown");
        assert_eq!(s(node_type(1)), "InfiniBand channel adapter");
        assert_eq!(s(node_type(0)), "unknown");
        assert_eq!(s(node_type(-1)), "unknown");
        assert_eq!(s(port_state(4)), "active");
        assert_eq!(s(event_type(15)), "SRQ limit reached");
    }

    #[test]
    fn rates() {
        assert_eq!(rate_to_mult(3), 4);
        assert_eq!(mult_to_rate(4), 3);
        assert_eq!(rate_to_mbps(16), 103125);
        assert_eq!(mbps_to_rate(103125), 16);
        assert_eq!(rate_to_mult(16), -1);
        assert_eq!(mult_to_rate(7), 0);
    }
}
