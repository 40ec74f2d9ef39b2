//! Receive queues (of QPs and SRQs): the posted receive WQEs and the
//! messages parked until one is posted (the sender's RNR wait).
//!
//! The queue only holds parked messages; the data path parks them and
//! knows how to finish them ([`Parked`]), so QPs and SRQs, which own
//! queues, never name the data path above them.

use std::collections::VecDeque;

use verbs_abi::ibv_sge;

/// A posted receive.
pub struct RecvWqe {
    pub wr_id: u64,
    pub sge: Vec<ibv_sge>,
}

/// A message waiting for a receive WQE.
pub trait Parked: Send {
    /// The QP number the message is for (on an SRQ, one of its QPs).
    fn dst_qpn(&self) -> u32;
    /// Lands the message in `wqe` and completes its sender.
    fn land(self: Box<Self>, wqe: RecvWqe);
    /// Its QP was reset or destroyed: the sender learns that the message
    /// was never received.
    fn fail(self: Box<Self>);
    /// When its next RNR retry is due (the data path's clock, ns); 0 for
    /// a message that lands whenever a receive is posted.
    fn due(&self) -> u64 {
        0
    }
    /// A retry found no receive: schedules the next one after `now` and
    /// returns true, or false when no retry is left.
    fn retry(&mut self, _now: u64) -> bool {
        false
    }
    /// Who sent it (an address identifying the sending QP; 0: unknown).
    fn sender(&self) -> usize {
        0
    }
    /// Completes the sender with `status` (no receive took the message).
    fn refuse(self: Box<Self>, status: core::ffi::c_int);
}

/// A receive queue (of a QP or an SRQ) and the messages waiting on it.
pub struct RecvQueue {
    pub wqes: VecDeque<RecvWqe>,
    pub max_wr: u32,
    pub max_sge: u32,
    pub pending: VecDeque<Box<dyn Parked>>,
}

impl RecvQueue {
    pub fn new(max_wr: u32, max_sge: u32) -> Self {
        RecvQueue {
            wqes: VecDeque::new(),
            max_wr,
            max_sge,
            pending: VecDeque::new(),
        }
    }

    /// Takes the parked messages for QP `qpn` out of the queue, in order.
    pub fn take_pending_of(&mut self, qpn: u32) -> Vec<Box<dyn Parked>> {
        let (mine, rest): (Vec<_>, Vec<_>) =
            self.pending.drain(..).partition(|p| p.dst_qpn() == qpn);
        self.pending.extend(rest);
        mine
    }
}
