//! The exported C functions, by concern: `channel` (event channels and
//! events), `id` (ids, addresses, options), `conn` (connections, ECE,
//! multicast), `qp` (QPs, SRQs, endpoints), `info` (`rdma_getaddrinfo`,
//! devices), `rsocket` (the `r*` functions).

pub mod channel;
mod conn;
mod id;
mod info;
mod qp;
mod rsocket;
