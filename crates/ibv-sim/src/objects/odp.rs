//! On-demand paging: the sim never pins pages (every access goes to the
//! program's memory when it happens), so an MR registered with
//! `IBV_ACCESS_ON_DEMAND` is an ordinary MR, the devices report ODP for
//! every transport (`device::SimDevice::device_attr_ex`), and
//! `ibv_advise_mr` (prefetching) only checks its request, as mlx5 does
//! before it faults the pages in. Implicit ODP (an MR over the whole
//! address space) is not simulated and not reported.

use core::ffi::c_int;

use verbs_abi::{ibv_pd, ibv_sge, verbs_context, IBV_ADVISE_MR_FLAG_FLUSH};

use crate::mr::{self, ON_DEMAND};
use crate::{guard, pd};

/// `ibv_advise_mr_advice` values: PREFETCH, PREFETCH_WRITE, PREFETCH_NO_FAULT.
const MAX_ADVICE: c_int = 2;

/// The table entry's type, with the advice as the `int` it is in the C
/// ABI (an unknown value must not become a Rust enum).
type AdviseMr = unsafe extern "C" fn(*mut ibv_pd, c_int, u32, *mut ibv_sge, u32) -> c_int;

pub(super) fn install(vctx: &mut verbs_context) {
    // SAFETY: the entry's declared type differs only in the advice, an
    // enum the C ABI passes as int; the entry is written in place.
    unsafe {
        core::ptr::addr_of_mut!(vctx.advise_mr)
            .cast::<Option<AdviseMr>>()
            .write(Some(sim_advise_mr));
    }
}

/// `verbs_context.advise_mr` (the inline `ibv_advise_mr`): unknown advice
/// or flags `EOPNOTSUPP`; no SGE, or an SGE that is not inside an ODP MR
/// of the PD (the PD a parent domain wraps), `EINVAL`; else 0.
pub unsafe extern "C" fn sim_advise_mr(
    pd_ptr: *mut ibv_pd,
    advice: c_int,
    flags: u32,
    sg_list: *mut ibv_sge,
    num_sge: u32,
) -> c_int {
    guard::errval(|| {
        let (ctx, p) = pd::get(pd_ptr)?;
        crate::profile::offered(ctx.dev.profile().odp)?;
        if !(0..=MAX_ADVICE).contains(&advice) || flags & !IBV_ADVISE_MR_FLAG_FLUSH != 0 {
            return Err(libc::EOPNOTSUPP);
        }
        if sg_list.is_null() || num_sge == 0 {
            return Err(libc::EINVAL);
        }
        // SAFETY: the program passes num_sge readable entries.
        let list = unsafe { core::slice::from_raw_parts(sg_list, num_sge as usize) };
        for e in list {
            let m = mr::by_key(e.lkey).ok_or(libc::EINVAL)?;
            let info = *m.info.lock();
            if info.pd != p.base()
                || info.access & ON_DEMAND == 0
                || info.host(e.addr, u64::from(e.length)).is_none()
            {
                return Err(libc::EINVAL);
            }
        }
        Ok(())
    })
}
