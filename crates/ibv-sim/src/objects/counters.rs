//! Flow counters (`ibv_create_counters` / `ibv_attach_counters_point_flow`
//! / `ibv_read_counters` / `ibv_destroy_counters`) as control-path objects
//! with mlx5's rules: counters are described before a flow is created with
//! them (`IBV_FLOW_SPEC_ACTION_COUNT`), never onto an existing flow
//! (`EOPNOTSUPP`), not once a flow uses them (`EBUSY`); counters a flow
//! uses are not destroyed (`EBUSY`). Nothing is steered on the sim, so
//! every counter reads 0.

use core::ffi::c_int;

use parking_lot::Mutex;
use verbs_abi::{
    ibv_context, ibv_counter_attach_attr, ibv_counters, ibv_counters_init_attr, ibv_flow,
    verbs_context,
};

use crate::child::{self, Users};
use crate::registry::Kind;
use crate::{context, guard};

/// `ibv_counter_description` values and `ibv_read_counters_flags`.
const COUNTER_PACKETS: c_int = verbs_abi::ibv_counter_description::IBV_COUNTER_PACKETS as c_int;
const COUNTER_BYTES: c_int = verbs_abi::ibv_counter_description::IBV_COUNTER_BYTES as c_int;
const READ_PREFER_CACHED: u32 = 1;
/// Counter slots per set.
const MAX_INDEX: u32 = 64;

/// A set of counters; `counters` first so its pointer is its address.
#[repr(C)]
pub struct SimCounters {
    pub counters: ibv_counters,
    /// Flows counting into it.
    pub(super) flows: Users,
    /// The counters described, by index (0: none; else the description + 1).
    slots: Mutex<Vec<c_int>>,
}

pub(super) fn install(vctx: &mut verbs_context) {
    vctx.create_counters = Some(sim_create_counters);
    vctx.attach_counters_point_flow = Some(sim_attach_counters_point_flow);
    vctx.read_counters = Some(sim_read_counters);
    vctx.destroy_counters = Some(sim_destroy_counters);
}

/// `verbs_context.create_counters` (the inline `ibv_create_counters`).
pub unsafe extern "C" fn sim_create_counters(
    ctx: *mut ibv_context,
    attr: *mut ibv_counters_init_attr,
) -> *mut ibv_counters {
    guard::ptr(|| {
        let sim = context::from_ibv(ctx)?;
        // SAFETY: attr, when given, points at the caller's struct.
        if attr.is_null() || unsafe { (*attr).comp_mask } != 0 {
            return Err(libc::EINVAL);
        }
        let c = child::create(sim, Kind::Counters, |_| {
            Ok(SimCounters {
                counters: ibv_counters { context: sim.ibv() },
                flows: Users::default(),
                slots: Mutex::new(Vec::new()),
            })
        })?;
        Ok(c.cast())
    })
}

/// `verbs_context.attach_counters_point_flow`.
pub unsafe extern "C" fn sim_attach_counters_point_flow(
    counters: *mut ibv_counters,
    attr: *mut ibv_counter_attach_attr,
    flow: *mut ibv_flow,
) -> c_int {
    guard::errval(|| {
        let (_, c) = child::get(counters.cast::<SimCounters>(), Kind::Counters)?;
        if attr.is_null() {
            return Err(libc::EINVAL);
        }
        // SAFETY: attr points at the caller's struct; the enum read as an int.
        let (desc, index, mask) = unsafe {
            (
                core::ptr::addr_of!((*attr).counter_desc)
                    .cast::<c_int>()
                    .read(),
                (*attr).index,
                (*attr).comp_mask,
            )
        };
        if mask != 0 || index >= MAX_INDEX {
            return Err(libc::EINVAL);
        }
        if desc != COUNTER_PACKETS && desc != COUNTER_BYTES {
            return Err(libc::EOPNOTSUPP);
        }
        // Only onto the flow about to be created with these counters.
        if !flow.is_null() {
            return Err(libc::EOPNOTSUPP);
        }
        c.flows.idle()?;
        let mut slots = c.slots.lock();
        let i = index as usize;
        if slots.len() <= i {
            slots.resize(i + 1, 0);
        }
        slots[i] = desc + 1;
        Ok(())
    })
}

/// `verbs_context.read_counters` (the inline `ibv_read_counters`): one
/// value per described slot below `n`, zero: nothing is steered.
pub unsafe extern "C" fn sim_read_counters(
    counters: *mut ibv_counters,
    values: *mut u64,
    n: u32,
    flags: u32,
) -> c_int {
    guard::errval(|| {
        let (_, c) = child::get(counters.cast::<SimCounters>(), Kind::Counters)?;
        if flags & !READ_PREFER_CACHED != 0 || (n > 0 && values.is_null()) {
            return Err(libc::EINVAL);
        }
        let slots = c.slots.lock();
        if (n as usize) < slots.len() {
            return Err(libc::EINVAL);
        }
        // SAFETY: the caller passes n writable counters.
        unsafe { core::ptr::write_bytes(values, 0, n as usize) };
        Ok(())
    })
}

/// `verbs_context.destroy_counters`: `EBUSY` while a flow counts into them.
pub unsafe extern "C" fn sim_destroy_counters(counters: *mut ibv_counters) -> c_int {
    guard::errval(|| {
        child::destroy(counters.cast::<SimCounters>(), Kind::Counters, |c| {
            c.flows.idle()
        })
    })
}
