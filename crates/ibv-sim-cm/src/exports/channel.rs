//! Event channels and events.
core::arch::global_asm!(include_str!(concat!(env!("OUT_DIR"), "/symver_channel.s")));

use core::ffi::{c_char, c_int};
use std::collections::{HashMap, HashSet};
use std::sync::Arc;

use once_cell::sync::Lazy;
use parking_lot::Mutex;
use rdmacm_abi::*;

use crate::channel::{Channel, ChannelBox};
use crate::guard;

/// Channels made by `rdma_create_event_channel`, by address.
static CHANNELS: Lazy<Mutex<HashMap<usize, Arc<Channel>>>> =
    Lazy::new(|| Mutex::new(HashMap::new()));
/// Addresses of destroyed channels (until reused).
static DESTROYED: Lazy<Mutex<HashSet<usize>>> = Lazy::new(|| Mutex::new(HashSet::new()));

/// Whether `ch` is (or is being) destroyed: looked up under the same lock
/// order as the destruction (DESTROYED, then CHANNELS).
fn is_destroyed(ch: *mut rdma_event_channel) -> bool {
    let dead = DESTROYED.lock();
    dead.contains(&(ch as usize)) && !CHANNELS.lock().contains_key(&(ch as usize))
}

/// A new channel with its C face (not registered: a synchronous id's own).
pub fn new_channel() -> Result<Box<ChannelBox>, c_int> {
    let inner = Arc::new(Channel::new()?);
    let fd = inner.fd();
    Ok(Box::new(ChannelBox {
        face: rdma_event_channel { fd },
        inner,
    }))
}

/// The channel behind a program's pointer.
pub fn lookup_channel(ch: *mut rdma_event_channel) -> Result<Arc<Channel>, c_int> {
    CHANNELS
        .lock()
        .get(&(ch as usize))
        .cloned()
        .ok_or(libc::EINVAL)
}

/// Opens an event channel whose `fd` the program may poll.
#[no_mangle]
pub extern "C" fn rdma_create_event_channel() -> *mut rdma_event_channel {
    guard::ptr(|| {
        crate::devices::all();
        let b = Box::into_raw(new_channel()?);
        // SAFETY: just made.
        let inner = unsafe { (*b).inner.clone() };
        DESTROYED.lock().remove(&(b as usize));
        CHANNELS.lock().insert(b as usize, inner);
        Ok(b.cast())
    })
}

/// Closes an event channel (its ids must be gone).
#[no_mangle]
pub extern "C" fn rdma_destroy_event_channel(channel: *mut rdma_event_channel) {
    guard::void(|| {
        // Marked destroyed before it leaves the table: a thread looking it
        // up meanwhile finds one or the other.
        let mut dead = DESTROYED.lock();
        dead.insert(channel as usize);
        let live = CHANNELS.lock().remove(&(channel as usize)).is_some();
        if !live {
            dead.remove(&(channel as usize));
        }
        drop(dead);
        if live {
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
        let ev = crate::id::process::get_event(&ch)?;
        // SAFETY: the caller's out pointer.
        unsafe { *event = ev };
        Ok(())
    })
}

/// Frees an event; `rdma_destroy_id` waits for this.
#[no_mangle]
pub extern "C" fn rdma_ack_cm_event(event: *mut rdma_cm_event) -> c_int {
    guard::int(|| crate::event::ack(event))
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
