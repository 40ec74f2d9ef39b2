//! The exported symbols: every public function of rdma-core 44's
//! `libibverbs.so.1` (at its version, see `build.rs`), the private
//! `ibv_query_gid_type` that `ibv_devinfo` imports, the rest of
//! `IBVERBS_PRIVATE_34` for provider plugins (`private`), and the functions the
//! inline verbs of `verbs.h` reach through the context's tables (`ops`),
//! and the sim's own `IBVSIM_1.0` for a checker in the process (`witness`).
//!
//! Each export is a thin shell: it runs the verb through `crate::guard`,
//! the panic boundary, so a panic turns into the verb's error return and
//! never unwinds into C.
//!
//! The exports are `unsafe extern "C"`: their safety contract is the C API
//! contract of the verb of the same name (pointers a program passes point
//! at what `verbs.h` says they point at).
#![allow(clippy::missing_safety_doc)]

pub mod compat;
pub mod device;
pub mod events;
pub mod ext;
pub mod misc;
pub mod ops;
pub mod private;
pub mod private_cmd;
pub mod resources;
pub mod unsupported;
pub mod witness;
