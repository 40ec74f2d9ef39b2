//! The verbs that create and destroy objects on a context: PD, MR,
//! completion channel, CQ, SRQ, QP, AH, and the imported PD, MR and device.
//!
//! Each create is guard -> forward -> record -> log; each destroy is
//! guard -> look up and take the record -> forward -> untrack (or put the
//! record back if the destroy failed) -> log. No lock is held while the real
//! function runs. Results and errno are the real library's, with these
//! exceptions, each logged at warn:
//!
//! - An object whose context was already closed (a zombie) is never passed
//!   to the real library, which would touch the freed context: the call
//!   fails with EINVAL in the verb's own convention (`ibv_dealloc_pd`
//!   returns `EINVAL`, a create returns NULL with errno EINVAL, ...).
//! - A second destroy of a pointer the shim saw destroyed is refused with
//!   EINVAL: rdma-core would read the freed object (its first word, the
//!   context pointer, is overwritten by malloc's free-list link) and crash.
//!   It is recognised by a bounded memory of recent destroys
//!   (`objects::bury`), confirmed by the pointer's first word not naming an
//!   open context, so an object at a reused address that the shim did not
//!   see created (an inline verb such as `ibv_create_cq_ex`) is still
//!   destroyed normally. A double destroy the memory has forgotten is a
//!   pointer the shim never saw, below.
//! - NULL, and pointers the shim never saw created, are forwarded unchanged.
//!
//! Only the default (`@@`) versions are exported here; rdma-core's
//! `IBVERBS_1.0` compat entry points stay forwarded by trampoline, and are
//! still tracked because they call the current verbs through the PLT, which
//! the preloaded shim interposes.

use crate::registry::objects::{Kind, Kinds};

// cbindgen keeps declaration order, and rustfmt sorts these by name: the
// names keep the header's order (PD and MR, queues, AH and imports).
pub mod memory;
pub mod queues;
pub mod remote;

pub(crate) const PDS: Kinds = Kind::Pd.bit().or(Kind::ImportedPd).or(Kind::ParentDomain);
pub(crate) const MRS: Kinds = Kind::Mr.bit().or(Kind::ImportedMr);
