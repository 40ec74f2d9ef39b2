//! `IBVSIM_1.0`: the sim's own exports, for a checker loaded in the same
//! process (the shim's `inflight` check finds them with `dlvsym`; real
//! libibverbs has no such names, so a checker on hardware finds none).
//!
//! - `int ibv_sim_keep_sent(int on)`: start (or stop) keeping what each
//!   send reads (`witness`); 1 when keeping now, 0 when not (off, or
//!   refused by `IBV_SIM_WITNESS=off`).
//! - `int ibv_sim_sent(struct ibv_qp *qp, uint64_t wr_id, uint64_t addr,
//!   uint64_t offset, void *out, size_t len)`: takes the oldest kept send
//!   of `qp` named `wr_id` with its first SGE at `addr` (and every older
//!   one), and copies `len` of the bytes it read, from `offset`, to `out`.
//!   0, or an errno value: `ENOENT` none kept, `ERANGE` it read fewer,
//!   `EINVAL` a NULL `out`, and the QP lookup's errors.

// The `.symver` directives that give this module's exports their version.
#[cfg(not(test))]
core::arch::global_asm!(include_str!(concat!(env!("OUT_DIR"), "/symver_witness.s")));

use core::ffi::{c_int, c_void};

use verbs_abi::ibv_qp;

use crate::{guard, qp, witness};

#[no_mangle]
pub unsafe extern "C" fn ibv_sim_keep_sent(on: c_int) -> c_int {
    guard::call(0, || c_int::from(witness::keep_sent(on != 0)))
}

#[no_mangle]
pub unsafe extern "C" fn ibv_sim_sent(
    qp: *mut ibv_qp,
    wr_id: u64,
    addr: u64,
    offset: u64,
    out: *mut c_void,
    len: usize,
) -> c_int {
    guard::call(libc::EIO, || {
        if out.is_null() && len > 0 {
            return libc::EINVAL;
        }
        let q = match qp::get_as(qp, libc::EINVAL) {
            Ok((_, q)) => q,
            Err(e) => return e,
        };
        let buf: &mut [u8] = if len == 0 {
            &mut []
        } else {
            // SAFETY: the caller passes `len` writable bytes at `out`
            // (checked non-NULL above).
            unsafe { core::slice::from_raw_parts_mut(out.cast::<u8>(), len) }
        };
        match q.shared.sent.take(wr_id, addr, offset, buf) {
            Ok(()) => 0,
            Err(e) => e,
        }
    })
}
