//! The exported C functions, by concern: `channel` (event channels and
//! events), `id` (ids, addresses, options), `conn` (connections, ECE,
//! multicast), `qp` (QPs, SRQs, endpoints), `info` (`rdma_getaddrinfo`,
//! devices), `rsocket` (the `r*` functions).

pub mod channel;
pub(crate) mod conn;
pub(crate) mod id;
pub(crate) mod info;
pub(crate) mod qp;
mod rsocket;
