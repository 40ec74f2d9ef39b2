//! The part of a QP after its `ibv_qp`, for extended QPs: the rest of
//! `struct ibv_qp_ex` and the state of the `ibv_wr_*` builders. The
//! builders themselves are in `ext::qp`, above this module.

use core::cell::UnsafeCell;
use core::ffi::{c_int, c_uint};
use core::mem::{offset_of, size_of};
use std::sync::atomic::{AtomicBool, AtomicPtr};

use parking_lot::Mutex;
use verbs_abi::{ibv_qp, ibv_qp_cap, ibv_qp_ex, ibv_send_wr, ibv_sge};

use super::SimQp;

/// Size of `ibv_qp_ex`'s fields after the `ibv_qp` ones.
const C_TAIL: usize = size_of::<ibv_qp_ex>() - size_of::<ibv_qp>();

/// The part of a sim QP after its `ibv_qp`: the rest of `ibv_qp_ex`, then
/// the builder state. All-zero is a valid value (a plain QP: no state), as
/// `qp::create` allocates QPs zeroed.
#[repr(C)]
pub struct QpEx {
    /// `ibv_qp_ex` from `comp_mask` on: `wr_id`, `wr_flags` and the table,
    /// read and written through `*mut ibv_qp_ex`.
    pub(crate) _c: UnsafeCell<[u64; C_TAIL / 8]>,
    /// The builder state of a QP created with send ops; NULL otherwise.
    pub(crate) state: AtomicPtr<ExState>,
}

// `ibv_qp_to_qp_ex` is a cast: the tail must start where `ibv_qp_ex` goes
// on after the `ibv_qp` fields.
const _: () = assert!(offset_of!(SimQp, ex) == offset_of!(ibv_qp_ex, comp_mask));
const _: () = assert!(offset_of!(ibv_qp_ex, comp_mask) == size_of::<ibv_qp>());
const _: () = assert!(C_TAIL.is_multiple_of(8));

impl Drop for QpEx {
    fn drop(&mut self) {
        let p = *self.state.get_mut();
        if !p.is_null() {
            // SAFETY: set once from Box::into_raw in `ext::qp::install`; the QP is
            // being freed, so nothing else refers to it.
            drop(unsafe { Box::from_raw(p) });
        }
    }
}

pub(crate) struct ExState {
    /// The critical section from `wr_start` to `wr_complete` / `wr_abort`.
    pub(crate) region: parking_lot::RawMutex,
    pub(crate) held: AtomicBool,
    pub(crate) batch: Mutex<Batch>,
    /// What the QP was granted, for checking a batch before posting it.
    pub(crate) cap: ibv_qp_cap,
    pub(crate) ud: bool,
}

/// The work requests built since `ibv_wr_start`. The vectors keep their
/// capacity from batch to batch: a steady stream of posts allocates nothing
/// but inline copies and scatter lists of more than one entry.
#[derive(Default)]
pub(crate) struct Batch {
    pub(crate) wrs: Vec<Wr>,
    /// The `ibv_send_wr` chain handed to `post_send`.
    pub(crate) chain: Vec<ibv_send_wr>,
    /// The first builder error, returned by `ibv_wr_complete`.
    pub(crate) err: c_int,
}

impl Batch {
    pub(crate) fn reset(&mut self) {
        self.wrs.clear();
        self.chain.clear();
        self.err = 0;
    }
}

/// A request's data, as its last setter gave it.
pub(crate) enum Data {
    None,
    Sge(ibv_sge),
    List(Vec<ibv_sge>),
    /// Copied at `wr_set_inline_data*`.
    Inline(Vec<u8>),
}

/// One recorded work request.
pub(crate) struct Wr {
    pub(crate) wr_id: u64,
    pub(crate) flags: c_uint,
    pub(crate) opcode: c_int,
    pub(crate) imm: u32,
    pub(crate) remote_addr: u64,
    pub(crate) rkey: u32,
    pub(crate) compare_add: u64,
    pub(crate) swap: u64,
    /// UD destination (`ibv_ah *` as an address).
    pub(crate) ah: usize,
    pub(crate) remote_qpn: u32,
    pub(crate) remote_qkey: u32,
    pub(crate) data: Data,
    /// The one scatter entry that points at inline data (the data path
    /// reads inline entries by address).
    pub(crate) inline_sge: ibv_sge,
    /// `ibv_wr_bind_mw`: the window and what to bind it to.
    pub(crate) bind: Option<(*mut verbs_abi::ibv_mw, verbs_abi::ibv_mw_bind_info)>,
}
