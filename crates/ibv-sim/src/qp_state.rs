//! The QP state machine as the kernel checks it (`ib_modify_qp_is_ok`):
//! which transitions exist, and for each transition and QP type which
//! attributes are required and which are optional. Anything else in the
//! mask makes `ibv_modify_qp` fail with `EINVAL`.

/// `ibv_qp_state`.
pub const RESET: i32 = verbs_abi::ibv_qp_state::IBV_QPS_RESET as i32;
pub const INIT: i32 = verbs_abi::ibv_qp_state::IBV_QPS_INIT as i32;
pub const RTR: i32 = verbs_abi::ibv_qp_state::IBV_QPS_RTR as i32;
pub const RTS: i32 = verbs_abi::ibv_qp_state::IBV_QPS_RTS as i32;
pub const SQD: i32 = verbs_abi::ibv_qp_state::IBV_QPS_SQD as i32;
pub const SQE: i32 = verbs_abi::ibv_qp_state::IBV_QPS_SQE as i32;
pub const ERR: i32 = verbs_abi::ibv_qp_state::IBV_QPS_ERR as i32;

/// `ibv_qp_type`.
pub const QPT_RC: i32 = verbs_abi::ibv_qp_type::IBV_QPT_RC as i32;
pub const QPT_UC: i32 = verbs_abi::ibv_qp_type::IBV_QPT_UC as i32;
pub const QPT_UD: i32 = verbs_abi::ibv_qp_type::IBV_QPT_UD as i32;
pub const QPT_RAW_PACKET: i32 = verbs_abi::ibv_qp_type::IBV_QPT_RAW_PACKET as i32;
pub const QPT_XRC_SEND: i32 = verbs_abi::ibv_qp_type::IBV_QPT_XRC_SEND as i32;
pub const QPT_XRC_RECV: i32 = verbs_abi::ibv_qp_type::IBV_QPT_XRC_RECV as i32;

/// `ibv_qp_attr_mask`.
pub mod mask {
    pub const STATE: u32 = verbs_abi::ibv_qp_attr_mask::IBV_QP_STATE as u32;
    pub const CUR_STATE: u32 = verbs_abi::ibv_qp_attr_mask::IBV_QP_CUR_STATE as u32;
    pub const EN_SQD_ASYNC_NOTIFY: u32 =
        verbs_abi::ibv_qp_attr_mask::IBV_QP_EN_SQD_ASYNC_NOTIFY as u32;
    pub const ACCESS_FLAGS: u32 = verbs_abi::ibv_qp_attr_mask::IBV_QP_ACCESS_FLAGS as u32;
    pub const PKEY_INDEX: u32 = verbs_abi::ibv_qp_attr_mask::IBV_QP_PKEY_INDEX as u32;
    pub const PORT: u32 = verbs_abi::ibv_qp_attr_mask::IBV_QP_PORT as u32;
    pub const QKEY: u32 = verbs_abi::ibv_qp_attr_mask::IBV_QP_QKEY as u32;
    pub const AV: u32 = verbs_abi::ibv_qp_attr_mask::IBV_QP_AV as u32;
    pub const PATH_MTU: u32 = verbs_abi::ibv_qp_attr_mask::IBV_QP_PATH_MTU as u32;
    pub const TIMEOUT: u32 = verbs_abi::ibv_qp_attr_mask::IBV_QP_TIMEOUT as u32;
    pub const RETRY_CNT: u32 = verbs_abi::ibv_qp_attr_mask::IBV_QP_RETRY_CNT as u32;
    pub const RNR_RETRY: u32 = verbs_abi::ibv_qp_attr_mask::IBV_QP_RNR_RETRY as u32;
    pub const RQ_PSN: u32 = verbs_abi::ibv_qp_attr_mask::IBV_QP_RQ_PSN as u32;
    pub const MAX_QP_RD_ATOMIC: u32 = verbs_abi::ibv_qp_attr_mask::IBV_QP_MAX_QP_RD_ATOMIC as u32;
    pub const ALT_PATH: u32 = verbs_abi::ibv_qp_attr_mask::IBV_QP_ALT_PATH as u32;
    pub const MIN_RNR_TIMER: u32 = verbs_abi::ibv_qp_attr_mask::IBV_QP_MIN_RNR_TIMER as u32;
    pub const SQ_PSN: u32 = verbs_abi::ibv_qp_attr_mask::IBV_QP_SQ_PSN as u32;
    pub const MAX_DEST_RD_ATOMIC: u32 =
        verbs_abi::ibv_qp_attr_mask::IBV_QP_MAX_DEST_RD_ATOMIC as u32;
    pub const PATH_MIG_STATE: u32 = verbs_abi::ibv_qp_attr_mask::IBV_QP_PATH_MIG_STATE as u32;
    pub const CAP: u32 = verbs_abi::ibv_qp_attr_mask::IBV_QP_CAP as u32;
    pub const DEST_QPN: u32 = verbs_abi::ibv_qp_attr_mask::IBV_QP_DEST_QPN as u32;
    pub const RATE_LIMIT: u32 = verbs_abi::ibv_qp_attr_mask::IBV_QP_RATE_LIMIT as u32;
    /// Every bit the kernel knows; higher bits are `EOPNOTSUPP`.
    pub const KNOWN: u32 = (RATE_LIMIT << 1) - 1;
}

use mask::*;

/// The QP types the table distinguishes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Ty {
    Ud,
    Uc,
    Rc,
    Raw,
    XrcIni,
    XrcTgt,
}

fn ty(qp_type: i32) -> Option<Ty> {
    Some(match qp_type {
        QPT_UD => Ty::Ud,
        QPT_UC => Ty::Uc,
        QPT_RC => Ty::Rc,
        QPT_RAW_PACKET => Ty::Raw,
        QPT_XRC_SEND => Ty::XrcIni,
        QPT_XRC_RECV => Ty::XrcTgt,
        _ => return None,
    })
}

/// (required, optional) attributes of a legal transition, or None.
fn rule(cur: i32, next: i32, t: Ty) -> Option<(u32, u32)> {
    // Attribute sets that recur below.
    const PKEY_PORT_ACCESS: u32 = PKEY_INDEX | PORT | ACCESS_FLAGS;
    const PKEY_PORT_QKEY: u32 = PKEY_INDEX | PORT | QKEY;
    const CONNECTED_RTR: u32 = AV | PATH_MTU | DEST_QPN | RQ_PSN;
    const RC_RTR: u32 = CONNECTED_RTR | MAX_DEST_RD_ATOMIC | MIN_RNR_TIMER;
    const RC_RTS: u32 = TIMEOUT | RETRY_CNT | RNR_RETRY | SQ_PSN | MAX_QP_RD_ATOMIC;
    const MIGRATE: u32 = CUR_STATE | ALT_PATH | ACCESS_FLAGS | PATH_MIG_STATE;

    let none = Some((0, 0));
    match (cur, next) {
        // From any state but RESET to ERR, and from anywhere to RESET.
        (_, RESET) => none,
        (c, ERR) if c != RESET => none,
        (RESET, INIT) => Some(match t {
            Ty::Ud => (PKEY_PORT_QKEY, 0),
            Ty::Raw => (PORT, 0),
            Ty::Uc | Ty::Rc | Ty::XrcIni | Ty::XrcTgt => (PKEY_PORT_ACCESS, 0),
        }),
        (INIT, INIT) => Some(match t {
            Ty::Ud => (0, PKEY_PORT_QKEY),
            Ty::Raw => (0, 0),
            Ty::Uc | Ty::Rc | Ty::XrcIni | Ty::XrcTgt => (0, PKEY_PORT_ACCESS),
        }),
        (INIT, RTR) => Some(match t {
            Ty::Ud => (0, PKEY_INDEX | QKEY),
            Ty::Raw => (0, 0),
            Ty::Uc | Ty::XrcIni => (CONNECTED_RTR, ALT_PATH | ACCESS_FLAGS | PKEY_INDEX),
            Ty::Rc | Ty::XrcTgt => (RC_RTR, ALT_PATH | ACCESS_FLAGS | PKEY_INDEX),
        }),
        (RTR, RTS) => Some(match t {
            Ty::Ud => (SQ_PSN, CUR_STATE | QKEY),
            Ty::Uc => (SQ_PSN, MIGRATE),
            Ty::Rc => (RC_RTS, MIGRATE | MIN_RNR_TIMER),
            Ty::XrcIni => (RC_RTS, MIGRATE),
            Ty::XrcTgt => (TIMEOUT | SQ_PSN, MIGRATE | MIN_RNR_TIMER),
            Ty::Raw => (0, RATE_LIMIT),
        }),
        (RTS, RTS) => Some(match t {
            Ty::Ud => (0, CUR_STATE | QKEY),
            Ty::Uc | Ty::XrcIni => (0, MIGRATE),
            Ty::Rc | Ty::XrcTgt => (0, MIGRATE | MIN_RNR_TIMER),
            Ty::Raw => (0, RATE_LIMIT),
        }),
        (RTS, SQD) => Some(match t {
            Ty::Raw => (0, 0),
            _ => (0, EN_SQD_ASYNC_NOTIFY),
        }),
        (SQD, RTS) => Some(match t {
            Ty::Ud => (0, CUR_STATE | QKEY),
            Ty::Uc | Ty::XrcIni => (0, MIGRATE),
            Ty::Rc | Ty::XrcTgt => (0, MIGRATE | MIN_RNR_TIMER),
            Ty::Raw => (0, 0),
        }),
        (SQD, SQD) => Some(match t {
            Ty::Ud => (0, PKEY_INDEX | QKEY),
            Ty::Uc => (
                0,
                AV | ALT_PATH | ACCESS_FLAGS | PKEY_INDEX | PATH_MIG_STATE,
            ),
            Ty::Rc => (
                0,
                PORT | AV
                    | TIMEOUT
                    | RETRY_CNT
                    | RNR_RETRY
                    | MAX_QP_RD_ATOMIC
                    | MAX_DEST_RD_ATOMIC
                    | ALT_PATH
                    | ACCESS_FLAGS
                    | PKEY_INDEX
                    | MIN_RNR_TIMER
                    | PATH_MIG_STATE,
            ),
            Ty::XrcIni => (
                0,
                PORT | AV
                    | TIMEOUT
                    | RETRY_CNT
                    | RNR_RETRY
                    | MAX_QP_RD_ATOMIC
                    | ALT_PATH
                    | ACCESS_FLAGS
                    | PKEY_INDEX
                    | PATH_MIG_STATE,
            ),
            Ty::XrcTgt => (
                0,
                PORT | AV
                    | TIMEOUT
                    | MAX_DEST_RD_ATOMIC
                    | ALT_PATH
                    | ACCESS_FLAGS
                    | PKEY_INDEX
                    | MIN_RNR_TIMER
                    | PATH_MIG_STATE,
            ),
            Ty::Raw => (0, 0),
        }),
        (SQE, RTS) => Some(match t {
            Ty::Ud => (0, CUR_STATE | QKEY),
            Ty::Uc => (0, CUR_STATE | ACCESS_FLAGS),
            _ => (0, 0),
        }),
        _ => None,
    }
}

/// `ib_modify_qp_is_ok`: may a QP of `qp_type` go from `cur` to `next`
/// with the attributes in `attr_mask`?
pub fn modify_is_ok(cur: i32, next: i32, qp_type: i32, attr_mask: u32) -> bool {
    let Some(t) = ty(qp_type) else { return false };
    if !(RESET..=ERR).contains(&cur) || !(RESET..=ERR).contains(&next) {
        return false;
    }
    if attr_mask & CUR_STATE != 0 && !matches!(cur, RTR | RTS | SQD | SQE) {
        return false;
    }
    let Some((req, opt)) = rule(cur, next, t) else {
        return false;
    };
    if attr_mask & req != req {
        return false;
    }
    attr_mask & !(req | opt | STATE) == 0
}

/// Name of a state, for messages.
pub fn name(state: i32) -> &'static str {
    match state {
        RESET => "RESET",
        INIT => "INIT",
        RTR => "RTR",
        RTS => "RTS",
        SQD => "SQD",
        SQE => "SQE",
        ERR => "ERR",
        _ => "UNKNOWN",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const RC_INIT: u32 = STATE | PKEY_INDEX | PORT | ACCESS_FLAGS;
    const RC_RTR: u32 =
        STATE | AV | PATH_MTU | DEST_QPN | RQ_PSN | MAX_DEST_RD_ATOMIC | MIN_RNR_TIMER;
    const RC_RTS: u32 = STATE | TIMEOUT | RETRY_CNT | RNR_RETRY | SQ_PSN | MAX_QP_RD_ATOMIC;

    #[test]
    fn rc_happy_path() {
        assert!(modify_is_ok(RESET, INIT, QPT_RC, RC_INIT));
        assert!(modify_is_ok(INIT, RTR, QPT_RC, RC_RTR));
        assert!(modify_is_ok(RTR, RTS, QPT_RC, RC_RTS));
        assert!(modify_is_ok(RTS, ERR, QPT_RC, STATE));
        assert!(modify_is_ok(ERR, RESET, QPT_RC, STATE));
    }

    #[test]
    fn illegal_transitions_and_masks() {
        assert!(!modify_is_ok(RESET, RTR, QPT_RC, RC_RTR));
        assert!(!modify_is_ok(RESET, RTS, QPT_RC, RC_RTS));
        assert!(!modify_is_ok(RESET, ERR, QPT_RC, STATE));
        assert!(!modify_is_ok(INIT, RTS, QPT_RC, RC_RTS));
        // Missing a required attribute.
        assert!(!modify_is_ok(
            RESET,
            INIT,
            QPT_RC,
            STATE | PKEY_INDEX | PORT
        ));
        // An attribute that is not allowed on this transition.
        assert!(!modify_is_ok(RESET, INIT, QPT_RC, RC_INIT | QKEY));
        assert!(!modify_is_ok(RESET, INIT, QPT_RC, RC_INIT | CUR_STATE));
        // UD has other rules.
        assert!(modify_is_ok(
            RESET,
            INIT,
            QPT_UD,
            STATE | PKEY_INDEX | PORT | QKEY
        ));
        assert!(!modify_is_ok(RESET, INIT, QPT_UD, RC_INIT));
        assert!(modify_is_ok(INIT, RTR, QPT_UD, STATE));
        assert!(modify_is_ok(RTR, RTS, QPT_UD, STATE | SQ_PSN));
        assert!(!modify_is_ok(RTR, RTR, QPT_RC, 0));
        assert!(modify_is_ok(RTS, RTS, QPT_RC, MIN_RNR_TIMER));
    }
}
