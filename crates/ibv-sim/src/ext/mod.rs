//! The extended verbs programs use by default, which `verbs.h` implements
//! as `static inline` functions jumping through tables the library fills:
//!
//! | module | what | table |
//! | --- | --- | --- |
//! | `qp` | `ibv_create_qp_ex` with `send_ops_flags`, the `ibv_wr_*` post API | `verbs_context.create_qp_ex`, `ibv_qp_ex` |
//! | `cq` | `ibv_create_cq_ex`, `ibv_start_poll` / `next_poll` / `end_poll`, `ibv_wc_read_*` | `verbs_context.create_cq_ex`, `ibv_cq_ex` |
//! | `device` | `ibv_query_device_ex` | `verbs_context.query_device_ex` |
//!
//! Both post and poll ride the plain data path: `ibv_wr_complete` hands a
//! chain of `ibv_send_wr` to the context's `ops.post_send`, and the poll
//! cursor takes completions from the context's `ops.poll_cq`, so the
//! extended API sees exactly what `ibv_post_send` / `ibv_poll_cq` see.
//!
//! The table entries are `unsafe extern "C"`: their safety contract is the
//! C API contract of the inline verb that calls them.
#![allow(clippy::missing_safety_doc)]

pub mod cq;
pub mod device;
pub mod qp;

use verbs_abi::verbs_context;

/// Fills the extended entries of a new context's `verbs_context`.
pub fn install(vctx: &mut verbs_context) {
    vctx.create_qp_ex = Some(qp::sim_create_qp_ex);
    vctx.create_cq_ex = Some(cq::sim_create_cq_ex);
    vctx.query_device_ex = Some(device::sim_query_device_ex);
}
