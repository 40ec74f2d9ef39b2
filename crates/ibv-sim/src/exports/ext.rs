//! The exported function of the extended post API (`crate::ext`).

// The `.symver` directives that give this module's exports their versions.
#[cfg(not(test))]
core::arch::global_asm!(include_str!(concat!(env!("OUT_DIR"), "/symver_ext.s")));

use verbs_abi::{ibv_qp, ibv_qp_ex};

use crate::guard;

/// The `ibv_qp_ex` of a QP created with `IBV_QP_INIT_ATTR_SEND_OPS_FLAGS`;
/// NULL for any other QP (as rdma-core).
#[no_mangle]
pub unsafe extern "C" fn ibv_qp_to_qp_ex(qp: *mut ibv_qp) -> *mut ibv_qp_ex {
    guard::call(core::ptr::null_mut(), || crate::ext::qp::to_qp_ex(qp))
}
