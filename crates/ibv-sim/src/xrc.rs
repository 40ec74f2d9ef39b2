//! XRC SRQs (`ibv_create_srq_ex` with `IBV_SRQT_XRC`, `ibv_get_srq_num`)
//! and where an XRC send lands. An XRC SRQ is an ordinary sim SRQ (posted
//! to with `ibv_post_srq_recv`, destroyed with `ibv_destroy_srq`) with an
//! XRC domain, its own CQ and a number. An XRC send QP's message names the
//! remote SRQ (`wr.qp_type.xrc.remote_srqn`); the XRC receive QP it
//! reaches delivers it into that SRQ when the SRQ is of the receive QP's
//! domain (else the requester sees `IBV_WC_REM_INV_REQ_ERR`), completes it
//! on the SRQ's CQ with the receive QP's number, and scatters it through
//! the SRQ's PD.

// The table entries' safety contract is the C API contract of the inline
// verb that calls them.
#![allow(clippy::missing_safety_doc)]

use core::ffi::{c_int, c_void};
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::Arc;

use once_cell::sync::Lazy;
use verbs_abi::{ibv_srq, ibv_srq_attr, verbs_context};

use crate::cq::{self, CqShared, SimCq};
use crate::registry::Sharded;
use crate::srq::{self, SrqShared};
use crate::xrcd::{self, SimXrcd};
use crate::{context, guard};

/// An XRC SRQ's part the data path uses.
pub struct XrcSrq {
    pub srq: Arc<SrqShared>,
    pub cq: Arc<CqShared>,
    /// The SRQ's protection domain (`SimPd::base`): receive buffers' lkeys.
    pub pd: usize,
    pub domain: usize,
    num: u32,
    xrcd: *const SimXrcd,
    cq_obj: *const SimCq,
}

// SAFETY: the raw pointers name the SRQ's XRC domain and CQ, which outlive
// it (each counts it as a user); they are only used to give those counts
// back, under the context lock.
unsafe impl Send for XrcSrq {}
// SAFETY: as above.
unsafe impl Sync for XrcSrq {}

/// XRC SRQs by number, and numbers by SRQ address.
static BY_NUM: Lazy<Sharded<u32, Arc<XrcSrq>>> = Lazy::new(Sharded::new);
static BY_ADDR: Lazy<Sharded<usize, u32>> = Lazy::new(Sharded::new);
static NEXT_NUM: AtomicU32 = AtomicU32::new(1);

pub(super) fn install(vctx: &mut verbs_context) {
    vctx.get_srq_num = Some(sim_get_srq_num);
}

/// `ibv_create_srq_ex` with `IBV_SRQT_XRC` (from `exports::ops`): the SRQ,
/// then its XRC part; `xrcd` and `cq` must be this context's.
pub fn create_srq(
    ctx: &context::SimContext,
    pd_ptr: *mut verbs_abi::ibv_pd,
    xrcd_ptr: *mut verbs_abi::ibv_xrcd,
    cq_ptr: *mut verbs_abi::ibv_cq,
    srq_context: *mut c_void,
    attr: &mut ibv_srq_attr,
) -> Result<*mut ibv_srq, c_int> {
    let (xctx, x) = xrcd::get(xrcd_ptr)?;
    let (cctx, c) = cq::get(cq_ptr)?;
    let (pctx, p) = crate::pd::get(pd_ptr)?;
    if [xctx, cctx, pctx].iter().any(|o| !core::ptr::eq(*o, ctx)) {
        return Err(libc::EINVAL);
    }
    let s = srq::create(pd_ptr, srq_context, attr)?;
    let num = loop {
        let n = NEXT_NUM.fetch_add(1, Ordering::Relaxed) & 0x00ff_ffff;
        if n != 0 && BY_NUM.get(n).is_none() {
            break n;
        }
    };
    let _st = ctx.lock();
    // SAFETY: s was just created and is not yet returned to the program.
    let shared = unsafe { srq::unchecked(s) }.shared.clone();
    x.users.take();
    c.users.fetch_add(1, Ordering::Relaxed);
    BY_NUM.insert(
        num,
        Arc::new(XrcSrq {
            srq: shared,
            cq: c.shared.clone(),
            pd: p.base(),
            domain: x.domain,
            num,
            xrcd: x,
            cq_obj: c,
        }),
    );
    BY_ADDR.insert(s as usize, num);
    // SAFETY: as above; written before the program has the SRQ.
    unsafe { (*s.cast::<srq::SimSrq>()).release = Some(srq_gone) };
    Ok(s)
}

/// An XRC SRQ's `SimSrq::release` (`srq::destroy` runs it under the
/// context lock): gives its domain and CQ back.
fn srq_gone(srq: usize) {
    let Some(num) = BY_ADDR.remove(srq) else {
        return;
    };
    if let Some(x) = BY_NUM.remove(num) {
        // SAFETY: the domain and CQ are live: each counts this SRQ as a user.
        unsafe {
            (*x.xrcd).users.give();
            (*x.cq_obj).users.fetch_sub(1, Ordering::Relaxed);
        }
    }
}

/// `verbs_context.get_srq_num` (the inline `ibv_get_srq_num`): the number
/// of an XRC SRQ; `EINVAL` for another SRQ.
pub unsafe extern "C" fn sim_get_srq_num(s: *mut ibv_srq, out: *mut u32) -> c_int {
    guard::errval(|| {
        srq::get(s)?;
        let num = BY_ADDR.get(s as usize).ok_or(libc::EINVAL)?;
        if out.is_null() {
            return Err(libc::EINVAL);
        }
        // SAFETY: out points at the caller's u32.
        unsafe { out.write(num) };
        Ok(())
    })
}

/// The XRC SRQ numbered `num` if it is of XRC domain `domain`.
pub fn target(domain: usize, num: u32) -> Option<Arc<XrcSrq>> {
    BY_NUM
        .get(num)
        .filter(|x| x.domain == domain && x.num == num && domain != 0)
}
