//! Event queues behind real file descriptors.
//!
//! A completion channel and a context's async event stream are each an
//! `eventfd` in semaphore mode plus a queue: one token per queued event, so
//! the fd is readable exactly when an event is waiting, and `poll`,
//! `epoll`, `O_NONBLOCK` (`EAGAIN`) and blocking reads behave as they do on
//! the kernel's event files. Entries of a destroyed object are blanked
//! (their token is consumed and skipped) rather than removed, so tokens and
//! entries always stay paired.

use core::ffi::c_int;
use std::collections::VecDeque;

use parking_lot::{Condvar, Mutex};

use crate::guard::errno;

/// Creates the eventfd used for event files (`cmd_fd` too).
pub fn new_eventfd() -> Result<c_int, c_int> {
    // SAFETY: plain system call.
    let fd = unsafe { libc::eventfd(0, libc::EFD_CLOEXEC | libc::EFD_SEMAPHORE) };
    if fd < 0 {
        Err(errno())
    } else {
        Ok(fd)
    }
}

struct Inner<T> {
    q: VecDeque<Option<T>>,
    closed: bool,
}

/// A queue of events readable through an fd.
pub struct EventQueue<T> {
    fd: c_int,
    inner: Mutex<Inner<T>>,
}

impl<T> EventQueue<T> {
    pub fn new() -> Result<Self, c_int> {
        Ok(EventQueue {
            fd: new_eventfd()?,
            inner: Mutex::new(Inner {
                q: VecDeque::new(),
                closed: false,
            }),
        })
    }

    pub fn fd(&self) -> c_int {
        self.fd
    }

    /// Queues an event and makes the fd readable (no-op once closed).
    pub fn push(&self, ev: T) {
        let mut g = self.inner.lock();
        if g.closed {
            return;
        }
        g.q.push_back(Some(ev));
        let one: u64 = 1;
        // SAFETY: fd is our open eventfd (not closed: checked under the lock).
        unsafe { libc::write(self.fd, (&one as *const u64).cast(), 8) };
    }

    /// Waits for the next event (or fails like `read(2)` on the fd: `EAGAIN`
    /// when non-blocking, `EINTR`, ...). `deliver` runs under the queue lock,
    /// so that an object whose entries are being blanked cannot vanish
    /// between dequeue and bookkeeping.
    pub fn pop<R>(&self, deliver: impl Fn(&T) -> R) -> Result<R, c_int> {
        loop {
            let mut token: u64 = 0;
            // SAFETY: reading 8 bytes into a u64 from our eventfd.
            let n = unsafe { libc::read(self.fd, (&mut token as *mut u64).cast(), 8) };
            if n != 8 {
                return Err(if n < 0 { errno() } else { libc::EIO });
            }
            let mut g = self.inner.lock();
            match g.q.pop_front() {
                Some(Some(ev)) => return Ok(deliver(&ev)),
                // A blanked entry, or (never expected) a token without one.
                Some(None) | None => continue,
            }
        }
    }

    /// Blanks every queued event for which `pred` holds.
    pub fn purge(&self, pred: impl Fn(&T) -> bool) {
        let mut g = self.inner.lock();
        for e in g.q.iter_mut() {
            if e.as_ref().is_some_and(&pred) {
                *e = None;
            }
        }
    }

    /// Closes the fd; later pushes are dropped.
    pub fn close(&self) {
        let mut g = self.inner.lock();
        if !g.closed {
            g.closed = true;
            g.q.clear();
            // SAFETY: closing our own fd exactly once (guarded by `closed`).
            unsafe { libc::close(self.fd) };
        }
    }
}

impl<T> Drop for EventQueue<T> {
    fn drop(&mut self) {
        self.close();
    }
}

/// Delivered / acknowledged event counts of one object. Destroying the
/// object waits until every delivered event was acknowledged, as rdma-core
/// does.
#[derive(Default)]
pub struct EventCounter {
    m: Mutex<(u64, u64)>,
    cv: Condvar,
}

impl EventCounter {
    pub fn delivered(&self) {
        self.m.lock().0 += 1;
    }

    pub fn acked(&self, n: u64) {
        self.acked_with(n, || {});
    }

    /// Acknowledges `n` events, running `f` under the counter's lock.
    pub fn acked_with(&self, n: u64, f: impl FnOnce()) {
        let mut g = self.m.lock();
        g.1 += n;
        f();
        self.cv.notify_all();
    }

    /// Blocks until acknowledgements caught up with deliveries.
    pub fn wait_settled(&self) {
        let mut g = self.m.lock();
        while g.1 < g.0 {
            self.cv.wait(&mut g);
        }
    }
}

/// Async event kinds the sim raises (values of `ibv_event_type`).
pub mod async_kind {
    crate::abi::values!(pub i32: ibv_event_type {
        CQ_ERR = IBV_EVENT_CQ_ERR,
        QP_FATAL = IBV_EVENT_QP_FATAL,
        QP_REQ_ERR = IBV_EVENT_QP_REQ_ERR,
        QP_ACCESS_ERR = IBV_EVENT_QP_ACCESS_ERR,
        SQ_DRAINED = IBV_EVENT_SQ_DRAINED,
        COMM_EST = IBV_EVENT_COMM_EST,
        SRQ_LIMIT_REACHED = IBV_EVENT_SRQ_LIMIT_REACHED,
        QP_LAST_WQE_REACHED = IBV_EVENT_QP_LAST_WQE_REACHED,
    });
}

/// One async event: its `ibv_event_type` and the element (object address
/// or port number).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct AsyncEvent {
    pub event_type: i32,
    pub element: usize,
}
