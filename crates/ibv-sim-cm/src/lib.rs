//! `ibv-sim-cm`: librdmacm for ibv-sim, the RDMA connection manager in user
//! space.
//!
//! Built as `libibv_sim_cm.so` with the SONAME `librdmacm.so.1` and rdma-core
//! 44's symbol versions (`RDMACM_1.0` to `1.3`), installed beside the sim's
//! `libibverbs.so.1`. It uses verbs only through the public verbs API
//! (`DT_NEEDED libibverbs.so.1`), as the real librdmacm does, and stands in
//! for the kernel's `rdma_cm` with a rendezvous of Unix sockets between
//! the fabric's processes.
//!
//! | module | concern |
//! | --- | --- |
//! | `exports` | the C functions, each behind `guard` |
//! | `guard` | the panic boundary and errno |
//! | `verbs` | the verbs functions used, and verbs.h's inline ones written out |
//! | `devices` | the device contexts (and PDs) librdmacm keeps for the process |
//! | `addr` | socket addresses, and the rule mapping an IP address to a port |
//! | `cm` | the connection manager: ids and their state (`cm`), `channel` (event channels: a queue and a pollable eventfd), `event` (the events handed out), `connect` (the calls), `process` (raw events into events), `qp` (the id's QP: INIT/RTR/RTS/ERR, `rdma_init_qp_attr`), `mcast`, `rendezvous` (the per-fabric socket directory; `engine` its thread, `wire` the CM's messages) |
//! | `rsocket` | rsockets: stream sockets over RC connections (`conn`, `data`, `poll`), on the public librdmacm API (`api`) |

mod addr;
mod cm;
mod devices;
mod exports;
mod guard;
mod rsocket;
mod verbs;
