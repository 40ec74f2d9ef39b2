//! Flow steering rules (`ibv_create_flow` / `ibv_destroy_flow`) and flow
//! actions (`ibv_create_flow_action_esp` / `ibv_modify_flow_action_esp` /
//! `ibv_destroy_flow_action`) as control-path objects with the kernel's
//! checks: a rule is for a UD QP (no raw packet QPs on the sim) of its
//! context on a valid port, with known flags and well-formed specs; the
//! actions and counters its specs name are in use until it goes (`EBUSY`),
//! and so is its QP. Nothing is steered on the sim.

use core::ffi::{c_int, c_void};
use std::sync::atomic::Ordering;

use verbs_abi::{
    ibv_context, ibv_flow, ibv_flow_action, ibv_flow_action_esp_attr, ibv_flow_attr, ibv_qp,
    verbs_context,
};

use super::counters::SimCounters;
use crate::child::{self, Users};
use crate::qp::{self, SimQp};
use crate::qp_state::QPT_UD;
use crate::registry::{self, Kind};
use crate::{context, guard};

/// `ibv_flow_flags` and `ibv_flow_spec_type` values the kernel knows.
const FLOW_FLAGS: u32 = (1 << 1) | (1 << 2);
const SPEC_INNER: u32 = 0x100;
const SPEC_ACTION_HANDLE: u32 = 0x1002;
const SPEC_ACTION_COUNT: u32 = 0x1003;
const SPECS_KNOWN: [u32; 14] = [
    0x20, 0x30, 0x31, 0x32, 0x34, 0x40, 0x41, 0x50, 0x51, 0x60, 0x1000, 0x1001, 0x1002, 0x1003,
];
/// The kernel's limit on specs per rule (`IB_FLOW_SPEC_SUPPORT_LAYERS`).
const MAX_SPECS: u8 = 10;
/// `ibv_flow_action_esp_keymat` / `_replay` and the attribute mask.
const ESP_KEYMAT_AES_GCM: c_int = 0;
const ESP_REPLAY_BMP: c_int = 1;
const ESP_MASK_ESN: u32 = 1;

/// A steering rule; `flow` first so `*mut ibv_flow` is its address.
#[repr(C)]
pub struct SimFlow {
    pub flow: ibv_flow,
    qp: *const SimQp,
    actions: Vec<*const SimFlowAction>,
    counters: Vec<*const SimCounters>,
}

/// A flow action; `action` first so its pointer is its address.
#[repr(C)]
pub struct SimFlowAction {
    pub action: ibv_flow_action,
    /// Rules using it.
    flows: Users,
}

pub(super) fn install(vctx: &mut verbs_context) {
    vctx.ibv_create_flow = Some(sim_create_flow);
    vctx.ibv_destroy_flow = Some(sim_destroy_flow);
    vctx.create_flow_action_esp = Some(sim_create_flow_action_esp);
    vctx.modify_flow_action_esp = Some(sim_modify_flow_action_esp);
    vctx.destroy_flow_action = Some(sim_destroy_flow_action);
}

/// The specs after a rule's header: (type, address) each, `EINVAL` when
/// one is unknown or has a size that cannot hold its header.
fn specs(attr: *const ibv_flow_attr, n: u8) -> Result<Vec<(u32, *const u8)>, c_int> {
    let mut at = attr
        .cast::<u8>()
        .wrapping_add(core::mem::size_of::<ibv_flow_attr>());
    let mut out = Vec::with_capacity(usize::from(n));
    for _ in 0..n {
        // SAFETY: the caller's rule holds num_of_specs specs after its
        // header, each starting with its type (u32) and size (u16).
        let (ty, size) = unsafe {
            (
                at.cast::<u32>().read_unaligned(),
                at.add(4).cast::<u16>().read_unaligned(),
            )
        };
        if !SPECS_KNOWN.contains(&(ty & !SPEC_INNER)) || usize::from(size) < 8 {
            return Err(libc::EINVAL);
        }
        out.push((ty, at));
        at = at.wrapping_add(usize::from(size));
    }
    Ok(out)
}

/// `verbs_context.ibv_create_flow` (the inline `ibv_create_flow`).
pub unsafe extern "C" fn sim_create_flow(
    qp_ptr: *mut ibv_qp,
    attr: *mut ibv_flow_attr,
) -> *mut ibv_flow {
    guard::ptr(|| {
        let (ctx, q) = qp::get(qp_ptr)?;
        if attr.is_null() {
            return Err(libc::EINVAL);
        }
        // SAFETY: attr points at the caller's rule header, whose
        // enum-typed field is a plain int (`verbs_abi::raw`).
        let a = unsafe { attr.read() };
        if a.r#type.get().is_none() {
            return Err(libc::EINVAL);
        }
        if a.comp_mask != 0 || a.flags & !FLOW_FLAGS != 0 || a.num_of_specs > MAX_SPECS {
            return Err(libc::EINVAL);
        }
        if q.shared.qp_type != QPT_UD || !ctx.dev.port_valid(u32::from(a.port)) {
            return Err(libc::EINVAL);
        }
        let list = specs(attr, a.num_of_specs)?;
        let f = child::create(ctx, Kind::Flow, |st| {
            let mut actions = Vec::new();
            let mut counters = Vec::new();
            for (ty, at) in list {
                // SAFETY: both spec kinds hold a pointer at offset 8.
                let p = unsafe { at.add(8).cast::<*const c_void>().read_unaligned() } as usize;
                match ty {
                    SPEC_ACTION_HANDLE
                        if registry::owner(p, Kind::FlowAction) == Some(ctx.addr()) =>
                    {
                        actions.push(p as *const SimFlowAction)
                    }
                    SPEC_ACTION_COUNT if registry::owner(p, Kind::Counters) == Some(ctx.addr()) => {
                        counters.push(p as *const SimCounters)
                    }
                    SPEC_ACTION_HANDLE | SPEC_ACTION_COUNT => return Err(libc::EINVAL),
                    _ => {}
                }
            }
            if !registry::is_live(qp_ptr as usize, Kind::Qp) {
                return Err(libc::EINVAL);
            }
            // SAFETY: live objects of this context (checked under its lock).
            unsafe {
                actions.iter().for_each(|a| (**a).flows.take());
                counters.iter().for_each(|c| (**c).flows.take());
            }
            q.users.fetch_add(1, Ordering::Relaxed);
            Ok(SimFlow {
                flow: ibv_flow {
                    comp_mask: 0,
                    context: ctx.ibv(),
                    handle: st.handle(),
                },
                qp: q,
                actions,
                counters,
            })
        })?;
        Ok(f.cast())
    })
}

/// `verbs_context.ibv_destroy_flow`: gives back its QP, actions and counters.
pub unsafe extern "C" fn sim_destroy_flow(flow: *mut ibv_flow) -> c_int {
    guard::errval(|| {
        child::destroy(flow.cast::<SimFlow>(), Kind::Flow, |f| {
            // SAFETY: the rule's QP, actions and counters are live: each
            // counts it as a user.
            unsafe {
                (*f.qp).users.fetch_sub(1, Ordering::Relaxed);
                f.actions.iter().for_each(|a| (**a).flows.give());
                f.counters.iter().for_each(|c| (**c).flows.give());
            }
            Ok(())
        })
    })
}

/// The kernel's checks of ESP attributes.
fn check_esp(attr: *const ibv_flow_action_esp_attr) -> Result<(), c_int> {
    if attr.is_null() {
        return Err(libc::EINVAL);
    }
    // SAFETY: attr points at the caller's struct (plain data).
    let a = unsafe { attr.read() };
    if a.comp_mask & !ESP_MASK_ESN != 0 || a.esp_attr.is_null() {
        return Err(libc::EINVAL);
    }
    if a.keymat_proto != ESP_KEYMAT_AES_GCM || !(0..=ESP_REPLAY_BMP).contains(&a.replay_proto) {
        return Err(libc::EOPNOTSUPP);
    }
    if (a.keymat_len > 0 && a.keymat_ptr.is_null()) || (a.replay_len > 0 && a.replay_ptr.is_null())
    {
        return Err(libc::EINVAL);
    }
    Ok(())
}

/// `verbs_context.create_flow_action_esp` (the inline `ibv_create_flow_action_esp`).
pub unsafe extern "C" fn sim_create_flow_action_esp(
    ctx: *mut ibv_context,
    attr: *mut ibv_flow_action_esp_attr,
) -> *mut ibv_flow_action {
    guard::ptr(|| {
        let sim = context::from_ibv(ctx)?;
        check_esp(attr)?;
        let a = child::create(sim, Kind::FlowAction, |_| {
            Ok(SimFlowAction {
                action: ibv_flow_action { context: sim.ibv() },
                flows: Users::default(),
            })
        })?;
        Ok(a.cast())
    })
}

/// `verbs_context.modify_flow_action_esp`.
pub unsafe extern "C" fn sim_modify_flow_action_esp(
    action: *mut ibv_flow_action,
    attr: *mut ibv_flow_action_esp_attr,
) -> c_int {
    guard::errval(|| {
        child::get(action.cast::<SimFlowAction>(), Kind::FlowAction)?;
        check_esp(attr)
    })
}

/// `verbs_context.destroy_flow_action`: `EBUSY` while a rule uses it.
pub unsafe extern "C" fn sim_destroy_flow_action(action: *mut ibv_flow_action) -> c_int {
    guard::errval(|| {
        child::destroy(action.cast::<SimFlowAction>(), Kind::FlowAction, |a| {
            a.flows.idle()
        })
    })
}
