//! The events handed to programs: an `rdma_cm_event` first in an
//! [`EventBox`] that also holds its private data (the receiver always gets
//! the transport's full size, zero-padded) and the id it counts against
//! (`rdma_destroy_id` waits for its acknowledgement).

use core::ffi::c_int;
use std::collections::HashSet;
use std::sync::Arc;

use once_cell::sync::Lazy;
use parking_lot::Mutex;
use rdmacm_abi::*;

use crate::cm::Shared;

#[repr(C)]
pub struct EventBox {
    pub face: rdma_cm_event,
    pub private: [u8; 256],
    /// The id whose count of reported events this one is in.
    pub owner: Arc<Shared>,
}

/// Events handed out and not yet acknowledged.
static LIVE: Lazy<Mutex<HashSet<usize>>> = Lazy::new(|| Mutex::new(HashSet::new()));

/// A new event of `kind` with `status`, counted against `owner`. Returns
/// the box for the caller to fill in before [`hand_out`].
pub fn new(owner: Arc<Shared>, id: *mut rdma_cm_id, kind: u32, status: c_int) -> Box<EventBox> {
    // SAFETY: all-zero is a valid rdma_cm_event (null pointers, numbers).
    let mut face: rdma_cm_event = unsafe { core::mem::zeroed() };
    face.id = id;
    face.event = kind;
    face.status = status;
    Box::new(EventBox {
        face,
        private: [0; 256],
        owner,
    })
}

impl EventBox {
    /// Private data of `len` bytes (the transport's size) from `data`.
    pub fn set_private(&mut self, data: &[u8; 256], len: usize, ud: bool) {
        self.private = *data;
        let len = len.min(255);
        for b in &mut self.private[len..] {
            *b = 0;
        }
        let p = if len == 0 {
            core::ptr::null()
        } else {
            self.private.as_ptr().cast()
        };
        // (Writing a union's field needs no unsafe: both views are plain data.)
        if ud {
            self.face.param.ud.private_data = p;
            self.face.param.ud.private_data_len = len as u8;
        } else {
            self.face.param.conn.private_data = p;
            self.face.param.conn.private_data_len = len as u8;
        }
    }
}

/// Counts the event as reported and gives the program its pointer.
pub fn hand_out(ev: Box<EventBox>) -> *mut rdma_cm_event {
    // (Private data already points into the box, which does not move.)
    ev.owner.st.lock().reported += 1;
    let p = Box::into_raw(ev);
    LIVE.lock().insert(p as usize);
    p.cast()
}

/// `rdma_ack_cm_event`: frees the event and wakes a `rdma_destroy_id`
/// waiting for it. An event not handed out (or acknowledged already) is
/// refused with `EINVAL`.
pub fn ack(ev: *mut rdma_cm_event) -> Result<(), c_int> {
    if !LIVE.lock().remove(&(ev as usize)) {
        return Err(libc::EINVAL);
    }
    // SAFETY: made by Box::into_raw in hand_out, taken out of LIVE above.
    let b = unsafe { Box::from_raw(ev.cast::<EventBox>()) };
    let mut st = b.owner.st.lock();
    st.acked += 1;
    drop(st);
    b.owner.cond.notify_all();
    Ok(())
}
