//! rdma-core's private entry points (`IBVERBS_PRIVATE_34`, for the provider
//! plugins) that the shim must see: `verbs_open_device`, through which a
//! provider's own open (`mlx5dv_open_device`) makes a context without
//! passing through `ibv_open_device`. Recording it there keeps such a
//! context open in the registry across a close and a reopen at the same
//! address, which the first-use adoption of `exports::bad_context` cannot
//! tell from a use after close. Not in the C header: it is not a verb.

use std::ffi::c_void;

use verbs_abi::{ibv_context, ibv_device};

use super::{inside, nested, tid, Call};
use crate::guard::Errno;
use crate::real::slots::VerbsOpenDevice;
use crate::registry::{contexts, devices};

/// rdma-core's private open (`ibv_open_device` and the providers' direct
/// opens call it). Forwarded unchanged; a context it returns is tracked.
#[no_mangle]
pub unsafe extern "C" fn verbs_open_device(
    device: *mut ibv_device,
    private_data: *mut c_void,
) -> *mut ibv_context {
    let caller = crate::caller!();
    VerbsOpenDevice::export(|| {
        let real = VerbsOpenDevice::get()?;
        // Inside the shim's ibv_open_device: that export records it.
        if nested() {
            // SAFETY: the caller's own arguments, forwarded unchanged.
            return Ok(unsafe { real.call(device, private_data) });
        }
        let call = Call::begin();
        // SAFETY: the caller's own arguments, forwarded unchanged.
        let ctx = inside(|| unsafe { real.call(device, private_data) });
        let errno = Errno::save();
        if !ctx.is_null() {
            devices::remember(device);
            contexts::opened(ctx as usize, device as usize, tid(), caller);
            // SAFETY: the context the real open just returned.
            unsafe { super::interpose::install(ctx) };
        }
        errno.restore();
        // SAFETY: the arguments and the result of the real call.
        unsafe { VerbsOpenDevice::done(&call, device, private_data, ctx, ctx.is_null()) };
        Ok(ctx)
    })
}
