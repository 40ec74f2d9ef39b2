//! The extended verbs, by object family: `struct verbs_context` (the
//! function table the inline verbs and macros of `verbs.h` reach through
//! `verbs_get_ctx`), the extended attribute structs (`ibv_device_attr_ex`,
//! `ibv_cq_init_attr_ex`, `ibv_qp_init_attr_ex`, `ibv_srq_init_attr_ex`,
//! `ibv_values_ex`, ...) and the objects only those verbs create
//! (`ibv_cq_ex`, `ibv_qp_ex`, `ibv_wq`, `ibv_dm`, `ibv_td`, flows,
//! counters, ...). Everything is re-exported here and at the crate root.
//!
//! C nests a few anonymous structs; each gets a Rust name and the member
//! keeps C's spelling (`odp_caps.per_transport_caps.rc_odp_caps`).
//!
//! Enum-typed fields must be read as `c_int`, never as the Rust enum (see
//! the `device` module docs). Every number in `assert_layout!` comes from a
//! C program compiled with gcc against rdma-core 44's own `verbs.h`
//! (x86_64), printing `sizeof`, `_Alignof` and `offsetof`.

mod context;
mod cq;
mod device;
mod domain;
mod flow;
mod qp;
mod srq;
mod wq;

pub use context::*;
pub use cq::*;
pub use device::*;
pub use domain::*;
pub use flow::*;
pub use qp::*;
pub use srq::*;
pub use wq::*;
