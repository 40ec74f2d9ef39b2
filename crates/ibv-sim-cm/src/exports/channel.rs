//! Event channels and events.
core::arch::global_asm!(include_str!(concat!(env!("OUT_DIR"), "/symver_channel.s")));

use core::ffi::{c_char, c_int};
use rdmacm_abi::*;

use crate::cm::channel::{forget, is_destroyed, lookup_channel, new_channel, register, ChannelBox};
use crate::guard;

/// Opens an event channel whose `fd` the program may poll.
#[no_mangle]
pub extern "C" fn rdma_create_event_channel() -> *mut rdma_event_channel {
    guard::ptr(|| {
        crate::devices::all();
        let b = Box::into_raw(new_channel()?);
        // SAFETY: just made.
        register(b, unsafe { (*b).inner.clone() });
        Ok(b.cast())
    })
}

/// Closes an event channel (its ids must be gone).
#[no_mangle]
pub extern "C" fn rdma_destroy_event_channel(channel: *mut rdma_event_channel) {
    guard::void(|| {
        if forget(channel) {
            // SAFETY: made by Box::into_raw above, unregistered now.
            drop(unsafe { Box::from_raw(channel.cast::<ChannelBox>()) });
        }
    })
}

/// Takes the next event (blocks unless the fd is non-blocking: `EAGAIN`).
#[no_mangle]
pub extern "C" fn rdma_get_cm_event(
    channel: *mut rdma_event_channel,
    event: *mut *mut rdma_cm_event,
) -> c_int {
    guard::int(|| {
        if event.is_null() {
            return Err(libc::EINVAL);
        }
        let ch = match lookup_channel(channel) {
            Ok(ch) => ch,
            // Another thread destroyed it (an event thread racing its
            // program's teardown): wait for good, as in `read()` on the
            // kernel's file; the process is ending.
            Err(_) if is_destroyed(channel) => loop {
                std::thread::park();
            },
            Err(e) => return Err(e),
        };
        let ev = crate::cm::process::get_event(&ch)?;
        // SAFETY: the caller's out pointer.
        unsafe { *event = ev };
        Ok(())
    })
}

/// Frees an event; `rdma_destroy_id` waits for this.
#[no_mangle]
pub extern "C" fn rdma_ack_cm_event(event: *mut rdma_cm_event) -> c_int {
    guard::int(|| crate::cm::event::ack(event))
}

/// The event's name.
#[no_mangle]
pub extern "C" fn rdma_event_str(event: u32) -> *const c_char {
    guard::call(c"UNKNOWN EVENT".as_ptr(), || {
        EVENT_NAMES
            .get(event as usize)
            .map_or(c"UNKNOWN EVENT".as_ptr(), |n| n.as_ptr())
    })
}
