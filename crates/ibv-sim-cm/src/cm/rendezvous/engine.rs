//! The rendezvous engine: one thread per process, started on first need,
//! that accepts connections on bound ids' sockets, reads every
//! connection's messages, notices peers that are gone (EOF), fires timers
//! (address errors after their timeout, time-wait's end), and turns all of
//! it into raw events queued on the ids' channels. It never touches an
//! id's C face.

use core::ffi::c_int;
use std::collections::HashMap;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::sync::{Arc, Weak};
use std::time::{Duration, Instant};

use once_cell::sync::Lazy;
use parking_lot::Mutex;

use super::wire::{self, Msg, Recv};
use crate::cm::{Phase, Raw, Shared};

enum Kind {
    /// A bound id's listening socket.
    Listener(Weak<Shared>),
    /// Accepted for a listener, no request read yet.
    Incoming(Weak<Shared>),
    /// An id's connection.
    Conn(Weak<Shared>),
}

struct Entry {
    fd: Arc<OwnedFd>,
    kind: Kind,
}

struct Timer {
    at: Instant,
    to: Weak<Shared>,
    raw: Raw,
}

struct Engine {
    wake: OwnedFd,
    added: Mutex<Vec<Entry>>,
    timers: Mutex<Vec<Timer>>,
}

static ENGINE: Lazy<Engine> = Lazy::new(|| {
    // SAFETY: plain system call.
    let fd = unsafe { libc::eventfd(0, libc::EFD_CLOEXEC | libc::EFD_NONBLOCK) };
    assert!(fd >= 0, "eventfd for the rendezvous engine");
    let e = Engine {
        // SAFETY: a new descriptor we own.
        wake: unsafe { OwnedFd::from_raw_fd(fd) },
        added: Mutex::new(Vec::new()),
        timers: Mutex::new(Vec::new()),
    };
    std::thread::Builder::new()
        .name("rdmacm-sim".into())
        .spawn(run)
        .expect("the rendezvous engine's thread");
    e
});

fn wake() {
    let one: u64 = 1;
    // SAFETY: writes 8 bytes to the engine's eventfd.
    unsafe { libc::write(ENGINE.wake.as_raw_fd(), (&raw const one).cast(), 8) };
}

fn add(fd: Arc<OwnedFd>, kind: Kind) {
    // SAFETY: our descriptor; the engine reads it without blocking.
    unsafe {
        let fl = libc::fcntl(fd.as_raw_fd(), libc::F_GETFL);
        libc::fcntl(fd.as_raw_fd(), libc::F_SETFL, fl | libc::O_NONBLOCK);
    }
    ENGINE.added.lock().push(Entry { fd, kind });
    wake();
}

/// Accept requests on a bound id's socket.
pub fn watch_listener(fd: Arc<OwnedFd>, id: &Arc<Shared>) {
    add(fd, Kind::Listener(Arc::downgrade(id)));
}

/// Read an id's connection.
pub fn watch_conn(fd: Arc<OwnedFd>, id: &Arc<Shared>) {
    add(fd, Kind::Conn(Arc::downgrade(id)));
}

/// Queues `raw` for `id` after `after`.
pub fn later(id: &Arc<Shared>, after: Duration, raw: Raw) {
    ENGINE.timers.lock().push(Timer {
        at: Instant::now() + after,
        to: Arc::downgrade(id),
        raw,
    });
    wake();
}

fn run() {
    let e = &*ENGINE;
    let mut entries: HashMap<c_int, Entry> = HashMap::new();
    loop {
        for en in e.added.lock().drain(..) {
            entries.insert(en.fd.as_raw_fd(), en);
        }
        entries.retain(|_, en| match &en.kind {
            Kind::Listener(w) | Kind::Incoming(w) | Kind::Conn(w) => w.strong_count() > 0,
        });
        let now = Instant::now();
        let mut due = Vec::new();
        let next = {
            let mut t = e.timers.lock();
            let mut i = 0;
            while i < t.len() {
                if t[i].at <= now {
                    due.push(t.swap_remove(i));
                } else {
                    i += 1;
                }
            }
            t.iter().map(|t| t.at).min()
        };
        for t in due {
            if let Some(id) = t.to.upgrade() {
                id.deliver(t.raw);
            }
        }
        let mut fds = vec![libc::pollfd {
            fd: e.wake.as_raw_fd(),
            events: libc::POLLIN,
            revents: 0,
        }];
        fds.extend(entries.keys().map(|&fd| libc::pollfd {
            fd,
            events: libc::POLLIN,
            revents: 0,
        }));
        let timeout = next.map_or(1000, |at| {
            at.saturating_duration_since(Instant::now())
                .as_millis()
                .min(1000) as c_int
                + 1
        });
        // SAFETY: a valid array of fds.len() pollfds.
        let n = unsafe { libc::poll(fds.as_mut_ptr(), fds.len() as libc::nfds_t, timeout) };
        if n <= 0 {
            continue;
        }
        if fds[0].revents != 0 {
            let mut v: u64 = 0;
            // SAFETY: reads 8 bytes from the engine's eventfd.
            unsafe { libc::read(e.wake.as_raw_fd(), (&raw mut v).cast(), 8) };
        }
        for p in &fds[1..] {
            if p.revents == 0 {
                continue;
            }
            let Some(en) = entries.get(&p.fd) else {
                continue;
            };
            let gone = match &en.kind {
                Kind::Listener(w) => {
                    accept_all(p.fd, w, e);
                    false
                }
                Kind::Incoming(w) => incoming(p.fd, w.clone(), &mut entries),
                Kind::Conn(w) => conn(p.fd, w),
            };
            if gone {
                entries.remove(&p.fd);
            }
        }
    }
}

fn accept_all(fd: c_int, listener: &Weak<Shared>, e: &Engine) {
    loop {
        // SAFETY: accepts on our listening socket.
        let c = unsafe {
            libc::accept4(
                fd,
                core::ptr::null_mut(),
                core::ptr::null_mut(),
                libc::SOCK_CLOEXEC | libc::SOCK_NONBLOCK,
            )
        };
        if c < 0 {
            return;
        }
        // SAFETY: a new descriptor we own.
        let c = unsafe { OwnedFd::from_raw_fd(c) };
        if !super::peer_is_me(c.as_raw_fd()) {
            continue;
        }
        e.added.lock().push(Entry {
            fd: Arc::new(c),
            kind: Kind::Incoming(listener.clone()),
        });
    }
}

/// The first record of an accepted connection: a request for the listener.
/// Returns whether the entry is done with (replaced or closed).
fn incoming(fd: c_int, listener: Weak<Shared>, entries: &mut HashMap<c_int, Entry>) -> bool {
    let m = match wire::recv(fd) {
        Recv::Empty => return false,
        Recv::Gone => return true,
        Recv::Msg(m) => m,
    };
    let Some(en) = entries.get(&fd) else {
        return true;
    };
    let sock = en.fd.clone();
    let Some(l) = listener.upgrade() else {
        return true;
    };
    let st = l.st.lock();
    let listening = st.phase == Phase::Listen && !st.destroyed;
    let (ch, sync, ps, qp_type) = (st.channel.clone(), st.sync, st.ps, st.qp_type);
    drop(st);
    let sidr = m.kind == wire::SIDR_REQ;
    if !listening || (m.kind != wire::REQ && !sidr) {
        let mut r = Msg::new(if sidr { wire::SIDR_REP } else { wire::REJ });
        r.status = if sidr {
            wire::SIDR_UNSUPPORTED
        } else {
            rdmacm_abi::IB_CM_REJ_INVALID_SERVICE_ID
        };
        let _ = r.send(&*sock);
        return true;
    }
    let new = Shared::new(ch, sync, ps, qp_type);
    {
        let mut st = new.st.lock();
        st.phase = Phase::Requested;
        st.conn = Some(sock.clone());
    }
    entries.insert(
        fd,
        Entry {
            fd: sock,
            kind: Kind::Conn(Arc::downgrade(&new)),
        },
    );
    l.deliver(Raw::Request(new, m));
    false
}

/// A connection's records, or its end. Returns whether it ended.
fn conn(fd: c_int, id: &Weak<Shared>) -> bool {
    let Some(id) = id.upgrade() else {
        return true;
    };
    loop {
        match wire::recv(fd) {
            Recv::Empty => return false,
            Recv::Msg(m) => id.deliver(Raw::Msg(m)),
            Recv::Gone => {
                id.deliver(Raw::Eof);
                return true;
            }
        }
    }
}
