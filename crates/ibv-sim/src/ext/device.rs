//! `ibv_query_device_ex`, with rdma-core's contract for the size the
//! caller passes: the whole `attr_size` is zeroed first (a program built
//! against a newer `verbs.h` gets zeros, not stale bytes, in fields the sim
//! does not know), and a field is written only when it fits entirely.
//!
//! The extended fields describe what the sim does: completion timestamps
//! on a 1 GHz device clock (the extended CQ's `read_completion_ts`, the
//! clock `ibv_query_rt_values_ex` reads), on-demand paging (not implicit),
//! device memory, WQs and indirection tables, and zero for everything it
//! does not simulate (TSO, RSS hashing, packet pacing, raw packet, tag
//! matching, CQ moderation, PCI atomics).

use core::ffi::c_int;
use core::mem::{offset_of, size_of};

use verbs_abi::{ibv_context, ibv_device_attr, ibv_device_attr_ex, ibv_query_device_ex_input};

use crate::{context, guard};

/// `verbs_context.query_device_ex` (the inline `ibv_query_device_ex`).
pub unsafe extern "C" fn sim_query_device_ex(
    ctx: *mut ibv_context,
    input: *const ibv_query_device_ex_input,
    attr: *mut ibv_device_attr_ex,
    attr_size: usize,
) -> c_int {
    guard::errval(|| query(ctx, input, attr, attr_size))
}

fn query(
    ctx: *mut ibv_context,
    input: *const ibv_query_device_ex_input,
    attr: *mut ibv_device_attr_ex,
    attr_size: usize,
) -> Result<(), c_int> {
    let sim = context::from_ibv(ctx)?;
    // SAFETY: input, when given, points at the caller's input struct.
    if !input.is_null() && unsafe { (*input).comp_mask } != 0 {
        return Err(libc::EINVAL);
    }
    if attr.is_null() || attr_size < size_of::<ibv_device_attr>() {
        return Err(libc::EINVAL);
    }
    let full = sim.dev.device_attr_ex();
    let src = (&full as *const ibv_device_attr_ex).cast::<u8>();
    let dst = attr.cast::<u8>();
    // SAFETY: the caller provides attr_size writable bytes at attr.
    unsafe { core::ptr::write_bytes(dst, 0, attr_size) };
    // Each field, copied only when the caller's struct holds all of it.
    macro_rules! fields {
        ($($f:ident),* $(,)?) => {[$(
            (offset_of!(ibv_device_attr_ex, $f), core::mem::size_of_val(&full.$f)),
        )*]};
    }
    let list = fields!(
        orig_attr,
        comp_mask,
        odp_caps,
        completion_timestamp_mask,
        hca_core_clock,
        device_cap_flags_ex,
        tso_caps,
        rss_caps,
        max_wq_type_rq,
        packet_pacing_caps,
        raw_packet_caps,
        tm_caps,
        cq_mod_caps,
        max_dm_size,
        pci_atomic_caps,
        xrc_odp_caps,
        phys_port_cnt_ex,
    );
    for (off, size) in list {
        if off + size <= attr_size {
            // SAFETY: the field lies inside both structs (checked above).
            unsafe { core::ptr::copy_nonoverlapping(src.add(off), dst.add(off), size) };
        }
    }
    Ok(())
}
