//! `ibv-sim`: libibverbs in software.
//!
//! Built as `libibv_sim.so` with the SONAME `libibverbs.so.1` and rdma-core
//! 44's symbol versions, so that `LD_LIBRARY_PATH=target/sim` makes any
//! verbs program (and the real `ibv_devices` / `ibv_devinfo`) run on
//! simulated devices: contexts, PDs, MRs, CQs, completion channels, SRQs,
//! QPs with the kernel's state machine, AHs, async events, and a data path
//! between QPs of this and other processes (the `fabric`).
//!
//! Modules, one concern each:
//!
//! | module | concern |
//! | --- | --- |
//! | `abi` | the values of `verbs-abi`'s enums as the integers the sim compares |
//! | `config` | `IBV_SIM_DEVICES`, device families |
//! | `profile` | the real device a family stands for: attributes, limits, provider rules |
//! | `device` | the device table, device / port / GID / P_Key attributes |
//! | `sysfs` | the sysfs files of simulated devices (`ibv_read_sysfs_file`) |
//! | `recvq` | receive queues (of QPs and SRQs) and the messages parked on them |
//! | `registry` | live objects by address (`OBJECTS`), the sharded map the tables use |
//! | `context` | `struct verbs_context`, open / close, per-context state, fds |
//! | `events` | event queues on real fds (completion channels, async events) |
//! | `pd`, `mr`, `cq`, `srq`, `qp`, `ah` | one resource kind each; `mr::KEYS` (MRs by key) and `qp::QPS` (QPs by number) |
//! | `qp::modify`, `qp::mcast`, `qp::ex` | `ibv_modify_qp` and its checks; multicast attachment; the `ibv_qp_ex` tail and builder state |
//! | `qp_state` | the kernel's QP state machine and attribute masks |
//! | `datapath` | post / poll entry points |
//! | `datapath::recv` | delivery of messages to receive queues, RNR waits |
//! | `datapath::memory` | memory access through lkeys and rkeys |
//! | `datapath::execute` | executing a send work request (same process: directly) |
//! | `datapath::remote` | work requests to and from QPs of other processes |
//! | `datapath::mcast`, `fabric::mcast` | multicast sends to other processes; the fabric's groups (MGID -> member processes) |
//! | `fabric` | the shared-memory fabric between processes: the segment and its layout |
//! | `fabric::attach`, `fabric::qpn` | liveness, attach / detach, ports and LIDs; fabric-wide QP numbers |
//! | `fabric::progress`, `fabric::ring`, `fabric::wire` | sending and the progress engine (handing what arrives to the data path's `Receiver`); the rings; the message format |
//! | `ext` | the extended verbs: `ibv_create_qp_ex` + `ibv_wr_*`, `ibv_create_cq_ex` + poll cursor, `ibv_query_device_ex` |
//! | `child` | plain child objects of a context: created / destroyed under its lock, use counts, `EBUSY` |
//! | `xrcd`, `xrc` | XRC domains; XRC SRQs and where XRC sends land (below `qp` and `datapath`, which use them) |
//! | `mw` | memory windows' state: binding, invalidation, the responder's rkey check (below `datapath`) |
//! | `objects` | the objects only the context's tables make, their table entries, one module each: memory windows' control path, device memory, thread / parent domains |
//! | `fork` | `ibv_fork_init` state; a forked child refuses its parent's queues |
//! | `fork_lock` | the process-wide locks, which a forked child finds free |
//! | `witness` | what each send read at execution, kept for a checker in the process (`exports::witness`) |
//! | `strings` | `*_str` helpers, rate conversions |
//! | `exports` | the exported symbols, each behind the panic boundary; `exports::ops::install` fills a context's function tables |
//! | `exports::private`, `exports::private_cmd` | `IBVERBS_PRIVATE_34` for provider plugins; its `ibv_cmd_*` kernel commands (one table, `no_kernel_commands!`) |
//! | `guard` | that panic boundary, errno |
#![allow(non_camel_case_types)]
// Every unsafe operation sits in its own `unsafe` block with a `SAFETY:`
// line, also inside an `unsafe fn` (whose caller contract is its `# Safety`).
#![deny(unsafe_op_in_unsafe_fn)]
#![deny(clippy::undocumented_unsafe_blocks)]
// The internal verbs take the C API's raw pointers as they come and check
// them against `registry` before dereferencing them (each dereference has
// its `SAFETY:` note); marking them all `unsafe fn` would only move that.
#![allow(clippy::not_unsafe_ptr_arg_deref)]

pub mod abi;
pub mod ah;
pub mod child;
pub mod config;
pub mod context;
pub mod cq;
pub mod datapath;
pub mod device;
pub mod events;
pub mod exports;
pub mod ext;
pub mod fabric;
pub mod fork;
pub mod fork_lock;
pub mod guard;
pub mod mr;
pub mod mw;
pub mod objects;
pub mod pd;
pub mod profile;
pub mod qp;
pub mod qp_state;
pub mod recvq;
pub mod registry;
pub mod srq;
pub mod strings;
pub mod sysfs;
pub mod witness;
pub mod xrc;
pub mod xrcd;
