//! Multicast between processes, the receiving side: a UD send to a group
//! goes to each other process with a QP attached (`remote::send_ud`, by
//! `fabric::mcast_members`), whose progress engine hands it here to its
//! own attached QPs.

use std::sync::Arc;

use super::{land, take_wqe, Taken, WC_SEND};
use crate::fabric::wire::{flag, Wire};
use crate::fabric::Peer;
use crate::qp::{self, QpShared};
use crate::qp_state::QPT_UD;

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
