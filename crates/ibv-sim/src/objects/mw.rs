//! Memory windows' control path: `ibv_alloc_mw` / `ibv_dealloc_mw` and the
//! type 1 `ibv_bind_mw`, which posts its bind on the QP like the provider
//! (`crate::mw` holds the windows' state, binding and rkey checks).

use core::ffi::c_int;
use core::ptr::{addr_of, addr_of_mut};
use std::sync::atomic::Ordering;

use verbs_abi::{ibv_mw, ibv_mw_bind, ibv_pd, ibv_qp, raw, verbs_context};

use crate::abi::WR_BIND_MW;
use crate::datapath::{self, SendWr};
use crate::mr::{self, ZERO_BASED};
use crate::mw::{inc_rkey, BindReq, SimMw, TYPE_1, TYPE_2};
use crate::pd;
use crate::qp;
use crate::registry::{self, Kind};
use crate::{child, guard};

pub(super) fn install(vctx: &mut verbs_context) {
    let ops = &mut vctx.context.ops;
    ops.alloc_mw = Some(sim_alloc_mw);
    ops.dealloc_mw = Some(sim_dealloc_mw);
    ops.bind_mw = Some(sim_bind_mw);
}

/// `ibv_context_ops.alloc_mw` (the inline `ibv_alloc_mw`).
/// The type arrives as the int C passes (`raw::ibv_mw_type`), checked below.
pub unsafe extern "C" fn sim_alloc_mw(pd_ptr: *mut ibv_pd, ty: raw::ibv_mw_type) -> *mut ibv_mw {
    guard::ptr(|| alloc(pd_ptr, ty.0))
}

fn alloc(pd_ptr: *mut ibv_pd, ty: c_int) -> Result<*mut ibv_mw, c_int> {
    let (ctx, pd) = pd::get(pd_ptr)?;
    // A provider without windows (siw): rdma-core's placeholder.
    crate::profile::offered(ctx.dev.profile().mw)?;
    if ty != TYPE_1 && ty != TYPE_2 {
        return Err(libc::EINVAL);
    }
    let made = |st: &mut crate::context::CtxState| {
        if !registry::is_live(pd_ptr as usize, Kind::Pd) {
            return Err(libc::EINVAL);
        }
        ctx.dev.take(crate::device::Limit::Mw)?;
        pd.users.fetch_add(1, Ordering::Relaxed);
        let (shared, rkey) = crate::mw::open(ty, pd.base());
        let mw = ibv_mw {
            context: ctx.ibv(),
            pd: pd_ptr,
            rkey,
            handle: st.handle(),
            r#type: raw::ibv_mw_type(ty),
        };
        Ok(SimMw { mw, shared, pd })
    };
    let raw = child::create_known(ctx, Kind::Mw, made, |m| m.mw.handle)?;
    Ok(raw.cast())
}

/// A window's context and handle as the program's struct now says.
fn head(m: *mut SimMw) -> (*mut verbs_abi::ibv_context, u32) {
    // SAFETY: a live window (the registry said so); the fields the program
    // may have changed are read, not referenced.
    unsafe {
        (
            addr_of!((*m).mw.context).read(),
            addr_of!((*m).mw.handle).read(),
        )
    }
}

/// `ibv_context_ops.dealloc_mw` (the inline `ibv_dealloc_mw`).
pub unsafe extern "C" fn sim_dealloc_mw(mw: *mut ibv_mw) -> c_int {
    guard::errval(|| {
        // The kernel knows the window by its handle (ENOENT, as a destroy).
        child::get_known(mw.cast::<SimMw>(), Kind::Mw, head, libc::ENOENT)?;
        child::destroy(mw.cast::<SimMw>(), Kind::Mw, |m| {
            crate::mw::close(&m.shared);
            if let Ok(c) = crate::context::from_ibv(m.mw.context) {
                c.dev.give(crate::device::Limit::Mw);
            }
            // SAFETY: the window's PD is live: it counts the window as a user.
            unsafe { &*m.pd }.users.fetch_sub(1, Ordering::Relaxed);
            Ok(())
        })
    })
}

/// `ibv_context_ops.bind_mw` (the inline `ibv_bind_mw`, type 1): posts the
/// bind on `qp`; on success the window's rkey moves on, as the provider's.
pub unsafe extern "C" fn sim_bind_mw(
    qp_ptr: *mut ibv_qp,
    mw: *mut ibv_mw,
    bind: *mut ibv_mw_bind,
) -> c_int {
    guard::errval(|| {
        let (_, q) = qp::get(qp_ptr)?;
        let (_, m) = child::get(mw.cast::<SimMw>(), Kind::Mw)?;
        if bind.is_null() || m.shared.ty() != TYPE_1 {
            return Err(libc::EINVAL);
        }
        // SAFETY: bind points at the caller's ibv_mw_bind (plain data).
        let b = unsafe { bind.read() };
        let info = b.bind_info;
        if info.mw_access_flags & ZERO_BASED != 0 {
            return Err(libc::EINVAL);
        }
        if !info.mr.is_null() {
            let (_, r) = mr::get(info.mr)?;
            if r.mr.pd != m.mw.pd {
                return Err(libc::EPERM);
            }
        }
        // SAFETY: a live window: its rkey is read and, below, written only
        // by its owner's binds (as the provider writes it).
        let key = inc_rkey(unsafe { addr_of!((*mw).rkey).read() });
        let req = BindReq {
            mw: mw as usize,
            mr: info.mr as usize,
            addr: info.addr,
            len: info.length,
            access: info.mw_access_flags,
            ty: TYPE_1,
        };
        let w = bind_wr(b.wr_id, b.send_flags, key, req);
        datapath::post_one(&q.shared, w)?;
        // SAFETY: as above.
        unsafe { addr_of_mut!((*mw).rkey).write(key) };
        Ok(())
    })
}

fn bind_wr(wr_id: u64, flags: u32, rkey: u32, req: BindReq) -> SendWr {
    SendWr {
        wr_id,
        sge: Vec::new(),
        num_sge: 0,
        opcode: WR_BIND_MW,
        flags,
        imm: 0,
        remote_addr: 0,
        rkey,
        compare_add: 0,
        swap: 0,
        ah: core::ptr::null_mut(),
        remote_qpn: 0,
        remote_qkey: 0,
        xrc_srqn: 0,
        bind: Some(req),
    }
}
