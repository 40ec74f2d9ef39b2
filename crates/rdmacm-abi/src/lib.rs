//! `#[repr(C)]` mirrors of the public types of rdma-core 44's librdmacm:
//! `<rdma/rdma_cma.h>` and the path records of `<infiniband/sa.h>`.
//!
//! No exports and no linking: the sim's librdmacm builds these objects, and
//! the shim's librdmacm audit only reads them. C's enums are plain integer
//! constants here (`values.rs`), never Rust enums, since their fields live in
//! program memory and may hold any value. Every layout is pinned by
//! compile-time assertions (`types.rs`) and checked against the real header
//! by `tests/rdmacm_layout.rs`, which also reads [`LAYOUT`].
#![allow(non_camel_case_types)]

pub mod types;
pub mod values;

pub use types::*;
pub use values::*;
