//! Event channels: a queue of raw events per channel, and a real fd that is
//! readable while the queue holds any (an `EFD_SEMAPHORE` eventfd: each
//! queued event adds one, each `rdma_get_cm_event` reads one). Programs
//! poll the fd; `O_NONBLOCK` on it makes `rdma_get_cm_event` fail with
//! `EAGAIN`, as the kernel's `rdma_cm` file does.

use core::ffi::c_int;
use std::collections::VecDeque;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::sync::Arc;

use parking_lot::Mutex;
use rdmacm_abi::rdma_event_channel;

use crate::guard::{check, errno};
use std::collections::{HashMap, HashSet};

use crate::cm::{Raw, Shared};
use once_cell::sync::Lazy;

pub struct Channel {
    fd: OwnedFd,
    queue: Mutex<VecDeque<(Arc<Shared>, Raw)>>,
}

/// The C face of a channel and the channel behind it.
#[repr(C)]
pub struct ChannelBox {
    pub face: rdma_event_channel,
    pub inner: Arc<Channel>,
}

impl Channel {
    /// A channel with its eventfd (close-on-exec, blocking).
    pub fn new() -> Result<Channel, c_int> {
        // SAFETY: plain system call.
        let fd = check(unsafe { libc::eventfd(0, libc::EFD_CLOEXEC | libc::EFD_SEMAPHORE) })?;
        Ok(Channel {
            // SAFETY: a new descriptor we own.
            fd: unsafe { OwnedFd::from_raw_fd(fd) },
            queue: Mutex::new(VecDeque::new()),
        })
    }

    pub fn fd(&self) -> c_int {
        self.fd.as_raw_fd()
    }

    /// Queues `raw` for `to` and makes the fd readable.
    pub fn push(&self, to: Arc<Shared>, raw: Raw) {
        self.queue.lock().push_back((to, raw));
        let one: u64 = 1;
        // SAFETY: writes 8 bytes from `one` to our eventfd.
        unsafe { libc::write(self.fd(), (&raw const one).cast(), 8) };
    }

    /// Waits for (or, on a non-blocking fd, takes at once) one queued
    /// event. Counts left over by events moved to another channel
    /// (`rdma_migrate_id`) find the queue empty: the wait goes on.
    pub fn pop(&self) -> Result<(Arc<Shared>, Raw), c_int> {
        loop {
            let mut v: u64 = 0;
            // SAFETY: reads 8 bytes into `v` from our eventfd.
            let n = unsafe { libc::read(self.fd(), (&raw mut v).cast(), 8) };
            if n != 8 {
                return Err(if n < 0 { errno() } else { libc::EIO });
            }
            if let Some(e) = self.queue.lock().pop_front() {
                return Ok(e);
            }
        }
    }

    /// Takes out every queued event for `id` (its destruction or migration).
    pub fn take_for(&self, id: &Arc<Shared>) -> Vec<Raw> {
        let mut q = self.queue.lock();
        let mut out = Vec::new();
        let mut keep = VecDeque::with_capacity(q.len());
        for (to, raw) in q.drain(..) {
            if Arc::ptr_eq(&to, id) {
                out.push(raw);
            } else {
                keep.push_back((to, raw));
            }
        }
        *q = keep;
        out
    }
}

/// Channels made by `rdma_create_event_channel`, by address.
static CHANNELS: Lazy<Mutex<HashMap<usize, Arc<Channel>>>> =
    Lazy::new(|| Mutex::new(HashMap::new()));
/// Addresses of destroyed channels (until reused).
static DESTROYED: Lazy<Mutex<HashSet<usize>>> = Lazy::new(|| Mutex::new(HashSet::new()));

/// Whether `ch` is (or is being) destroyed: looked up under the same lock
/// order as the destruction (DESTROYED, then CHANNELS).
pub fn is_destroyed(ch: *mut rdma_event_channel) -> bool {
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

/// Registers a channel made for `rdma_create_event_channel`.
pub fn register(b: *mut ChannelBox, inner: Arc<Channel>) {
    DESTROYED.lock().remove(&(b as usize));
    CHANNELS.lock().insert(b as usize, inner);
}

/// Unregisters a channel being destroyed; whether it was one of ours.
/// Marked destroyed before it leaves the table: a thread looking it up
/// meanwhile finds one or the other.
pub fn forget(channel: *mut rdma_event_channel) -> bool {
    let mut dead = DESTROYED.lock();
    dead.insert(channel as usize);
    let live = CHANNELS.lock().remove(&(channel as usize)).is_some();
    if !live {
        dead.remove(&(channel as usize));
    }
    live
}
