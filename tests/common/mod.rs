//! Helpers shared by the integration tests (`mod common;` in each test file),
//! one concern per module, all re-exported here (`common::X`):
//!
//! - `paths`: where things are: [`repo_dir`], [`target_dir`], [`shim_so`],
//!   [`sim_dir`], [`sim_lib`], [`dropin`], [`path_list`], [`TempDir`].
//! - `cc`: building C: [`cc`] (gcc `-Wall -Wextra -Werror`), [`cc_text`].
//! - `checked`: the `tests/c/wholeapi/` programs under the shim on the sim:
//!   [`wholeapi_program`], [`shim_run`].
//! - `testbed`: running the **real** rdma-core with devices but no
//!   hardware: [`Testbed`].
//! - `devns`: a private `/dev` with `/dev/infiniband/uverbsN` entries
//!   (the test bed's, and the sim's for UCX): [`DevNamespace`].
//! - `run`: running anything: [`run`] / [`run_unchecked`] (timeout, clear
//!   panics), [`describe`], [`assert_same_output`], [`preload_shim`].
//! - `logs`: reading the shim's log: [`LogLine`], [`read_logs`],
//!   [`log_lines_for`], [`debug_log_env`].
//! - `symbols`: shared objects: [`dynamic_symbols`], [`real_libibverbs`].
//! - `perftest`: perftest's two processes on the sim under the data-path
//!   checks: [`perftest_checked`].
//! - `vm`: the real kernel RDMA stack (rxe0 in a micro-VM), one per test
//!   binary: [`kernel_vm`], [`vm_sh`].
//! - `skip`: a missing dependency fails the test, naming it, unless its
//!   group is opted out by name: [`require`], [`opted_out`].
//!
//! Not every test file uses every helper.
#![allow(dead_code)]

mod cc;
mod checked;
mod devns;
mod fabric;
mod logs;
mod net;
mod paths;
mod perftest;
mod run;
mod skip;
mod symbols;
mod testbed;
mod vm;

// A test file uses what it needs of these.
#[allow(unused_imports)]
pub use cc::*;
#[allow(unused_imports)]
pub use checked::*;
#[allow(unused_imports)]
pub use devns::*;
#[allow(unused_imports)]
pub use fabric::*;
#[allow(unused_imports)]
pub use logs::*;
#[allow(unused_imports)]
pub use net::*;
#[allow(unused_imports)]
pub use paths::*;
#[allow(unused_imports)]
pub use perftest::*;
#[allow(unused_imports)]
pub use run::*;
#[allow(unused_imports)]
pub use skip::*;
#[allow(unused_imports)]
pub use symbols::*;
#[allow(unused_imports)]
pub use testbed::*;
#[allow(unused_imports)]
pub use vm::*;
