//! The QP async events the data path raises where the profile follows
//! the IB spec (`Profile::spec_qp_events`): communication established,
//! and the responder's errors that no completion reports.

use super::*;
use crate::abi::{WC_REM_ACCESS_ERR, WC_REM_INV_REQ_ERR};

impl QpShared {
    /// A request reached this QP in `state`: the first one in RTR raises
    /// `IBV_EVENT_COMM_EST`.
    pub fn arrived(&self, state: c_int) {
        if state == RTR
            && self.dev.profile().spec_qp_events
            && !self.comm_est.swap(true, Ordering::Relaxed)
        {
            self.async_q.push(AsyncEvent {
                event_type: async_kind::COMM_EST,
                element: self.addr,
            });
        }
    }

    /// This responder refused an RDMA or atomic request with `status`
    /// (the requester's completion status) and went to ERR.
    pub fn refused_event(&self, status: c_int) {
        if !self.dev.profile().spec_qp_events {
            return;
        }
        let event_type = match status {
            WC_REM_ACCESS_ERR => async_kind::QP_ACCESS_ERR,
            WC_REM_INV_REQ_ERR => async_kind::QP_REQ_ERR,
            _ => async_kind::QP_FATAL,
        };
        self.async_q.push(AsyncEvent {
            event_type,
            element: self.addr,
        });
    }
}
