//! Multicast between processes: a UD send to a group goes to each other
//! process with a QP attached (`fabric::mcast_members`), whose progress
//! engine hands it to its own attached QPs.

use std::sync::Arc;

use verbs_abi::ibv_ah_attr;

use super::{land, remote, take_wqe, SendWr, Taken, GRH_LEN, WC_SEND};
use crate::fabric::wire::{flag, Wire};
use crate::fabric::{self, Peer};
use crate::qp::{self, QpShared};
use crate::qp_state::QPT_UD;

/// A UD send to a multicast group: one message to each other process with
/// a QP attached to it (its own QPs are the caller's).
pub(super) fn send_ud(
    s: &QpShared,
    w: &SendWr,
    ah: &ibv_ah_attr,
    qkey: u32,
    slid: u16,
    grh: Option<[u8; GRH_LEN]>,
    payload: &[u8],
) {
    // SAFETY: reading the raw bytes of a GID union.
    let dgid = unsafe { ah.grh.dgid.raw };
    for d in fabric::mcast_members(&dgid) {
        fabric::send(d, &mut remote::ud_wire(s, w, ah, qkey, slid, grh), payload);
    }
}

/// A datagram another process sent to a multicast group: to each of this
/// process's QPs attached to it.
pub(super) fn deliver(w: &Wire, data: &[u8]) {
    let peer = Peer::of(w);
    let members: Vec<Arc<QpShared>> = qp::MCAST.lock().get(&w.dgid).cloned().unwrap_or_default();
    for dst in members {
        let g = dst.st.lock();
        let ok = dst.qp_type == QPT_UD && qp::can_receive(g.state) && g.attrs.qkey == w.qkey;
        drop(g);
        if !ok {
            continue;
        }
        let mut m = super::responder::message(w, &peer, data.to_vec(), None, WC_SEND);
        m.grh = Some(w.grh);
        m.grh_valid = w.flags & flag::GRH_VALID != 0;
        if let Taken::Wqe(wqe, m) = take_wqe(&dst, m, false) {
            land(&dst, wqe, &m);
        }
    }
}
