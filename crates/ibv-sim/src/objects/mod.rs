//! The objects that ride on the basic ones, one module per
//! family, each reached the way programs reach it: through the context's
//! function tables (`ibv_context_ops`, `verbs_context`), which the inline
//! verbs of `verbs.h` call.
//!
//! | module | objects | table entries |
//! | --- | --- | --- |
//! | `mw` | memory windows, binding, invalidation, rkey checks | `ops.alloc_mw` / `bind_mw` / `dealloc_mw` |
//! | `crate::xrcd` | XRC domains | `open_xrcd` / `close_xrcd` |
//! | `crate::xrc` | XRC SRQs, where XRC sends land (XRC QPs are `qp`'s) | `create_srq_ex`, `get_srq_num` |
//! | `dm` | device memory, `ibv_reg_dm_mr` | `alloc_dm` / `free_dm` / `reg_dm_mr` |
//! | `domain` | thread domains, parent domains | `alloc_td` / `dealloc_td` / `alloc_parent_domain` |
//! | `flow` | flow steering rules, flow actions (ESP) | `ibv_create_flow` / `ibv_destroy_flow`, `create` / `modify` / `destroy_flow_action(_esp)` |
//! | `odp` | on-demand paging: `ibv_advise_mr` | `advise_mr` |
//! | `counters` | flow counters | `create_counters` / `attach_counters_point_flow` / `read_counters` / `destroy_counters` |
//! | `wq` | receive WQs, RWQ indirection tables | `create_wq` / `modify_wq` / `destroy_wq`, `create_rwq_ind_table` / `destroy_rwq_ind_table` |
//!
//! XRC domains and SRQs (`crate::xrcd`, `crate::xrc`) and the windows'
//! state (`crate::mw`) live below the QPs and the data path, which use
//! them; the objects themselves are `crate::child`'s. The entries are `unsafe extern "C"`: their safety
//! contract is the C API contract of the inline verb that calls them.
#![allow(clippy::missing_safety_doc)]

pub mod counters;
pub mod dm;
pub mod domain;
pub mod flow;
pub mod mw;
pub mod odp;
pub mod wq;

use verbs_abi::verbs_context;

/// Fills this module's entries of a new context's tables
/// (`exports::ops::install` calls it).
pub fn install(vctx: &mut verbs_context) {
    mw::install(vctx);
    crate::xrcd::install(vctx);
    dm::install(vctx);
    domain::install(vctx);
    crate::xrc::install(vctx);
    wq::install(vctx);
    flow::install(vctx);
    counters::install(vctx);
    odp::install(vctx);
}
