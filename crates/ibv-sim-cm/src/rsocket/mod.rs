//! rsockets: stream sockets over RDMA, the `r*` functions of librdmacm,
//! between processes that both use this library (its own wire format, not
//! real rsockets'). A socket's number is an eventfd's, so it is never
//! another open descriptor's. `conn`: the connection through the CM;
//! `data`: the data path; `poll`: `rpoll` / `rselect`; `dgram`: datagram
//! rsockets (`SOCK_DGRAM`, over UD).

mod api;
mod conn;
pub mod data;
mod dgram;
pub mod poll;

use core::ffi::c_int;
use std::collections::{HashMap, VecDeque};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::sync::Arc;

use once_cell::sync::Lazy;
use parking_lot::Mutex;
use rdmacm_abi::*;

use crate::addr::Addr;
use crate::guard::{check, errno};
use api::*;
use data::Data;

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum St {
    Idle,
    Bound,
    Listening,
    Resolving,
    Connecting,
    Connected,
    Closed,
}

pub struct Rs {
    fd: OwnedFd,
    pub nonblock: bool,
    pub st: St,
    pub ch: *mut rdma_event_channel,
    pub id: *mut rdma_cm_id,
    pub data: Option<Box<Data>>,
    /// A datagram socket's data path (once bound).
    dgram: Option<Box<dgram::Dgram>>,
    is_dgram: bool,
    /// `SO_ERROR`.
    pub err: c_int,
    pub peer_gone: bool,
    pub shut_wr: bool,
    pub backlog: VecDeque<*mut rdma_cm_id>,
    opts: HashMap<(c_int, c_int), Vec<u8>>,
}

// SAFETY: the raw pointers are this library's own CM and verbs objects,
// only used with the socket's lock held.
unsafe impl Send for Rs {}

static TABLE: Lazy<Mutex<HashMap<c_int, Arc<Mutex<Rs>>>>> =
    Lazy::new(|| Mutex::new(HashMap::new()));

impl Rs {
    fn new(ch: *mut rdma_event_channel, id: *mut rdma_cm_id) -> Result<Rs, c_int> {
        // SAFETY: plain system call.
        let fd = check(unsafe { libc::eventfd(0, libc::EFD_CLOEXEC) })?;
        Ok(Rs {
            // SAFETY: a new descriptor we own.
            fd: unsafe { OwnedFd::from_raw_fd(fd) },
            nonblock: false,
            st: St::Idle,
            ch,
            id,
            data: None,
            dgram: None,
            is_dgram: false,
            err: 0,
            peer_gone: false,
            shut_wr: false,
            backlog: VecDeque::new(),
            opts: HashMap::new(),
        })
    }

    pub fn ch_fd(&self) -> c_int {
        // SAFETY: our channel.
        unsafe { (*self.ch).fd }
    }

    /// Everything that arrived: CM events and completions.
    pub fn progress(&mut self) {
        if self.is_dgram {
            return dgram::progress(self);
        }
        match self.st {
            St::Listening => conn::take_requests(self),
            _ => conn::drive(self),
        }
        if let Some(d) = self.data.as_mut() {
            d.poll();
        }
    }

    /// The fds that turn readable when this socket may have moved on.
    pub fn wake_fds(&mut self) -> Vec<c_int> {
        let mut v = vec![self.ch_fd()];
        if self.is_dgram {
            dgram::wake_fds(self, &mut v);
        }
        if let Some(d) = self.data.as_mut() {
            d.arm();
            // SAFETY: our completion channel.
            v.push(unsafe { (*d.comp).fd });
        }
        v
    }

    /// `poll` events this socket has now.
    pub fn revents(&mut self, want: i16) -> i16 {
        self.progress();
        let mut r: i16 = 0;
        if self.is_dgram {
            r = dgram::revents(self);
        }
        match self.st {
            St::Listening if !self.backlog.is_empty() => r |= libc::POLLIN,
            St::Connected => {
                let d = self.data.as_ref().unwrap();
                if d.readable() || self.peer_gone {
                    r |= libc::POLLIN;
                }
                if d.writable() && !self.peer_gone {
                    r |= libc::POLLOUT;
                }
                if d.error != 0 {
                    r |= libc::POLLERR;
                }
                // As TCP: hung up once the peer is gone and nothing is left
                // to read (until then, only readable).
                if self.peer_gone && !d.has_data() {
                    r |= libc::POLLHUP;
                }
            }
            St::Closed if self.err != 0 => r |= libc::POLLOUT | libc::POLLERR,
            _ => {}
        }
        r & (want | libc::POLLERR | libc::POLLHUP)
    }
}

fn get(s: c_int) -> Result<Arc<Mutex<Rs>>, c_int> {
    TABLE.lock().get(&s).cloned().ok_or(libc::EBADF)
}

fn insert(rs: Rs) -> c_int {
    let n = rs.fd.as_raw_fd();
    TABLE.lock().insert(n, Arc::new(Mutex::new(rs)));
    n
}

/// Whether `s` is an rsocket (for `rpoll`).
pub fn lookup(s: c_int) -> Option<Arc<Mutex<Rs>>> {
    get(s).ok()
}

/// Waits up to `ms` (-1: for good) for `fd` to turn readable.
pub fn wait_fd(fd: c_int, ms: c_int) {
    let mut p = libc::pollfd {
        fd,
        events: libc::POLLIN,
        revents: 0,
    };
    // SAFETY: one valid pollfd.
    unsafe { libc::poll(&mut p, 1, ms) };
}

/// Blocks until `rs` may have moved on (its lock released meanwhile).
fn wait(cell: &Mutex<Rs>) {
    let fds = cell.lock().wake_fds();
    let mut p: Vec<libc::pollfd> = fds
        .iter()
        .map(|&fd| libc::pollfd {
            fd,
            events: libc::POLLIN,
            revents: 0,
        })
        .collect();
    // SAFETY: a valid array; a bounded wait, then the caller looks again.
    unsafe { libc::poll(p.as_mut_ptr(), p.len() as libc::nfds_t, 100) };
}

pub fn socket(domain: c_int, ty: c_int, _protocol: c_int) -> Result<c_int, c_int> {
    if domain != libc::AF_INET && domain != libc::AF_INET6 && domain != libc::AF_IB {
        return Err(libc::EAFNOSUPPORT);
    }
    let base = ty & !(libc::SOCK_NONBLOCK | libc::SOCK_CLOEXEC);
    let dgram = base == libc::SOCK_DGRAM;
    if base != libc::SOCK_STREAM && !dgram {
        return Err(libc::EPROTONOSUPPORT);
    }
    let ps = if dgram { dgram::PS } else { RDMA_PS_TCP };
    let ch = conn::new_channel()?;
    let mut id: *mut rdma_cm_id = core::ptr::null_mut();
    // SAFETY: our channel, an out pointer.
    if unsafe { rdma_create_id(ch, &mut id, core::ptr::null_mut(), ps) } != 0 {
        let e = errno();
        // SAFETY: the channel made above, with no id.
        unsafe { rdma_destroy_event_channel(ch) };
        return Err(e);
    }
    let mut rs = Rs::new(ch, id)?;
    rs.nonblock = ty & libc::SOCK_NONBLOCK != 0;
    rs.is_dgram = dgram;
    Ok(insert(rs))
}

pub fn bind(s: c_int, addr: *const libc::sockaddr) -> Result<(), c_int> {
    let cell = get(s)?;
    let mut rs = cell.lock();
    if rs.is_dgram {
        return dgram::bind(&mut rs, addr);
    }
    if rs.st != St::Idle {
        return Err(libc::EINVAL);
    }
    // SAFETY: the caller's address.
    if unsafe { rdma_bind_addr(rs.id, addr.cast_mut()) } != 0 {
        return Err(errno());
    }
    rs.st = St::Bound;
    Ok(())
}

pub fn listen(s: c_int, backlog: c_int) -> Result<(), c_int> {
    let cell = get(s)?;
    let mut rs = cell.lock();
    // SAFETY: the socket's live id.
    if unsafe { rdma_listen(rs.id, backlog) } != 0 {
        return Err(errno());
    }
    rs.st = St::Listening;
    Ok(())
}

pub fn accept(
    s: c_int,
    addr: *mut libc::sockaddr,
    len: *mut libc::socklen_t,
) -> Result<c_int, c_int> {
    let cell = get(s)?;
    loop {
        let mut rs = cell.lock();
        if rs.st != St::Listening {
            return Err(libc::EINVAL);
        }
        rs.progress();
        if let Some(id) = rs.backlog.pop_front() {
            let nonblock = rs.nonblock;
            drop(rs);
            let mut new = conn::accept(id)?;
            new.nonblock = nonblock;
            // SAFETY: the new id's peer address; the caller's buffer.
            unsafe { copy_addr(&raw const (*id).route.addr.dst.addr, addr, len) };
            return Ok(insert(new));
        }
        if rs.nonblock {
            return Err(libc::EAGAIN);
        }
        drop(rs);
        wait(&cell);
    }
}

/// Copies `a` out as `recvfrom(2)` does.
///
/// # Safety
/// `dst`/`len` NULL or the caller's buffer and length.
pub unsafe fn copy_out(a: &Addr, dst: *mut libc::sockaddr, len: *mut libc::socklen_t) {
    let st = a.storage();
    // SAFETY: a socket address of its family; the caller's contract.
    unsafe { copy_addr((&raw const st).cast(), dst, len) }
}

/// Copies a socket address out, as `accept(2)` and `getpeername(2)` do.
///
/// # Safety
/// `src` is a socket address; `dst`/`len` NULL or the caller's buffer and length.
unsafe fn copy_addr(
    src: *const libc::sockaddr,
    dst: *mut libc::sockaddr,
    len: *mut libc::socklen_t,
) {
    if dst.is_null() || len.is_null() {
        return;
    }
    // SAFETY: the caller's contract.
    unsafe {
        let family = c_int::from((*src).sa_family);
        let have = crate::addr::len_of(family) as usize;
        let n = have.min(*len as usize);
        core::ptr::copy_nonoverlapping(src.cast::<u8>(), dst.cast::<u8>(), n);
        *len = have as libc::socklen_t;
    }
}

pub fn connect(s: c_int, addr: *const libc::sockaddr) -> Result<(), c_int> {
    let cell = get(s)?;
    {
        let mut rs = cell.lock();
        if rs.is_dgram {
            return dgram::connect(&mut rs, addr);
        }
        match rs.st {
            St::Idle | St::Bound => {}
            St::Connected => return Err(libc::EISCONN),
            St::Resolving | St::Connecting => return Err(libc::EALREADY),
            _ => return Err(libc::EINVAL),
        }
        // SAFETY: the caller's address.
        if unsafe { rdma_resolve_addr(rs.id, core::ptr::null_mut(), addr.cast_mut(), 2000) } != 0 {
            return Err(errno());
        }
        rs.st = St::Resolving;
    }
    loop {
        let mut rs = cell.lock();
        rs.progress();
        match rs.st {
            St::Connected => return Ok(()),
            St::Closed => return Err(std::mem::take(&mut rs.err).max(libc::ECONNREFUSED)),
            _ if rs.nonblock => return Err(libc::EINPROGRESS),
            _ => {}
        }
        drop(rs);
        wait(&cell);
    }
}

/// `rsend`: everything (blocking) or what fits now (non-blocking).
pub fn send(s: c_int, buf: &[u8], flags: c_int) -> Result<usize, c_int> {
    sendto(s, buf, flags, None)
}

/// `rsendto`: a datagram socket's `to` (or its `rconnect` destination);
/// a stream socket's connection whatever `to` says.
pub fn sendto(s: c_int, buf: &[u8], flags: c_int, to: Option<Addr>) -> Result<usize, c_int> {
    let cell = get(s)?;
    if cell.lock().is_dgram {
        return dgram::send_to(&cell, buf, flags, to);
    }
    let mut sent = 0;
    loop {
        let mut rs = cell.lock();
        if rs.st != St::Connected {
            return Err(if rs.st == St::Closed {
                libc::EPIPE
            } else {
                libc::ENOTCONN
            });
        }
        if rs.shut_wr || rs.peer_gone {
            return Err(libc::EPIPE);
        }
        rs.progress();
        let nonblock = rs.nonblock || flags & libc::MSG_DONTWAIT != 0;
        let d = rs.data.as_mut().unwrap();
        while sent < buf.len() {
            let n = d.write_from(&buf[sent..], None, None)?;
            if n == 0 {
                break;
            }
            sent += n;
        }
        if sent == buf.len() || (sent > 0 && nonblock) {
            return Ok(sent);
        }
        if nonblock {
            return Err(libc::EAGAIN);
        }
        drop(rs);
        wait(&cell);
    }
}

/// `rrecv`: what is there (at least a byte, unless the stream ended);
/// `MSG_WAITALL` waits for all of `buf`.
pub fn recv(s: c_int, buf: &mut [u8], flags: c_int) -> Result<usize, c_int> {
    recvfrom(s, buf, flags, &mut None)
}

/// `rrecvfrom`: a datagram and its sender, or a stream socket's bytes
/// (`from` left alone: the caller asks the connection's peer).
pub fn recvfrom(
    s: c_int,
    buf: &mut [u8],
    flags: c_int,
    from: &mut Option<Addr>,
) -> Result<usize, c_int> {
    let cell = get(s)?;
    if cell.lock().is_dgram {
        return dgram::recv_from(&cell, buf, flags, from);
    }
    let mut got = 0;
    loop {
        let mut rs = cell.lock();
        if rs.st != St::Connected {
            return Err(libc::ENOTCONN);
        }
        rs.progress();
        let nonblock = rs.nonblock || flags & libc::MSG_DONTWAIT != 0;
        let peer_gone = rs.peer_gone;
        let d = rs.data.as_mut().unwrap();
        got += d.read_into(&mut buf[got..]);
        let ended = d.eof || peer_gone;
        if got == buf.len() || (got > 0 && (flags & libc::MSG_WAITALL == 0 || ended)) {
            return Ok(got);
        }
        if ended {
            return Ok(got);
        }
        if d.error != 0 {
            return Err(d.error);
        }
        if nonblock {
            return if got > 0 { Ok(got) } else { Err(libc::EAGAIN) };
        }
        drop(rs);
        wait(&cell);
    }
}

/// Sends the end of the stream (once), waiting for a free slot.
fn send_fin(cell: &Mutex<Rs>) {
    for _ in 0..100 {
        let mut rs = cell.lock();
        if rs.st != St::Connected || rs.shut_wr || rs.peer_gone {
            return;
        }
        rs.progress();
        let d = rs.data.as_mut().unwrap();
        match d.write_from(&[], None, Some(Data::FIN)) {
            Ok(0) => {}
            _ => {
                d.fin_sent = true;
                rs.shut_wr = true;
                return;
            }
        }
        drop(rs);
        wait(cell);
    }
}

/// Waits (bounded) until every posted send has completed.
fn drain_sends(cell: &Mutex<Rs>) {
    for _ in 0..50 {
        let mut rs = cell.lock();
        rs.progress();
        let done = rs.data.as_ref().is_none_or(|d| d.idle() || d.error != 0);
        if done {
            return;
        }
        drop(rs);
        wait(cell);
    }
}

pub fn shutdown(s: c_int, how: c_int) -> Result<(), c_int> {
    let cell = get(s)?;
    if cell.lock().st != St::Connected {
        return Err(libc::ENOTCONN);
    }
    if how == libc::SHUT_WR || how == libc::SHUT_RDWR {
        send_fin(&cell);
        drain_sends(&cell);
    }
    if how == libc::SHUT_RDWR {
        let rs = cell.lock();
        // SAFETY: the socket's live id.
        unsafe { rdma_disconnect(rs.id) };
    }
    Ok(())
}

pub fn close(s: c_int) -> Result<(), c_int> {
    let cell = get(s)?;
    if cell.lock().st == St::Connected {
        send_fin(&cell);
        drain_sends(&cell);
        let rs = cell.lock();
        // SAFETY: the socket's live id.
        unsafe { rdma_disconnect(rs.id) };
    }
    TABLE.lock().remove(&s);
    let mut rs = cell.lock();
    for id in rs.backlog.drain(..).collect::<Vec<_>>() {
        // SAFETY: a request's id, refused and destroyed.
        unsafe {
            rdma_reject(id, core::ptr::null(), 0);
            rdma_destroy_id(id);
        }
    }
    // The QP before the CQ it uses (Data's drop), the id, then its channel.
    // SAFETY: our id, then its channel (no other id on it); every event
    // was acknowledged as it came.
    unsafe {
        rdma_destroy_qp(rs.id);
        rs.data = None;
        rs.dgram = None;
        rdma_destroy_id(rs.id);
        rdma_destroy_event_channel(rs.ch);
    }
    Ok(())
}

/// `rsetsockopt`: the options rsocket programs set (`SOL_SOCKET`,
/// `IPPROTO_TCP`, `SOL_RDMA`) are kept and read back; the sim's buffers
/// are of a fixed size whatever they ask.
pub fn setsockopt(s: c_int, level: c_int, name: c_int, val: &[u8]) -> Result<(), c_int> {
    const SOL_RDMA: c_int = 0x10000;
    let cell = get(s)?;
    if ![
        libc::SOL_SOCKET,
        libc::IPPROTO_TCP,
        libc::IPPROTO_IPV6,
        SOL_RDMA,
    ]
    .contains(&level)
    {
        return Err(libc::ENOPROTOOPT);
    }
    cell.lock().opts.insert((level, name), val.to_vec());
    Ok(())
}

pub fn getsockopt(s: c_int, level: c_int, name: c_int) -> Result<Vec<u8>, c_int> {
    let cell = get(s)?;
    let mut rs = cell.lock();
    if level == libc::SOL_SOCKET && name == libc::SO_ERROR {
        rs.progress();
        let e = std::mem::take(&mut rs.err);
        return Ok(e.to_ne_bytes().to_vec());
    }
    if let Some(v) = rs.opts.get(&(level, name)) {
        return Ok(v.clone());
    }
    let def: c_int = match (level, name) {
        (libc::SOL_SOCKET, libc::SO_SNDBUF) => (data::CHUNK * data::NSEND) as c_int,
        (libc::SOL_SOCKET, libc::SO_RCVBUF) => (data::CHUNK * data::NRECV) as c_int,
        _ => 0,
    };
    Ok(def.to_ne_bytes().to_vec())
}

pub fn fcntl(s: c_int, cmd: c_int, arg: c_int) -> Result<c_int, c_int> {
    let cell = get(s)?;
    let mut rs = cell.lock();
    match cmd {
        libc::F_GETFL => Ok(libc::O_RDWR | if rs.nonblock { libc::O_NONBLOCK } else { 0 }),
        libc::F_SETFL => {
            rs.nonblock = arg & libc::O_NONBLOCK != 0;
            Ok(0)
        }
        _ => Err(libc::ENOSYS),
    }
}

/// `rgetsockname` (`peer` false) and `rgetpeername`.
pub fn name(
    s: c_int,
    peer: bool,
    addr: *mut libc::sockaddr,
    len: *mut libc::socklen_t,
) -> Result<(), c_int> {
    let cell = get(s)?;
    let rs = cell.lock();
    // SAFETY: our id's addresses; the caller's buffer.
    unsafe {
        let src = if peer {
            &raw const (*rs.id).route.addr.dst.addr
        } else {
            &raw const (*rs.id).route.addr.src.addr
        };
        copy_addr(src, addr, len);
    }
    Ok(())
}

/// `riomap`: the peer may write `[buf, buf+len)` at `offset` with
/// `riowrite`. Returns the offset (`-1` asks for 0).
pub fn iomap(s: c_int, buf: usize, len: usize, offset: i64) -> Result<i64, c_int> {
    let cell = get(s)?;
    let off = if offset < 0 { 0 } else { offset as u64 };
    let msg = {
        let mut rs = cell.lock();
        if rs.st != St::Connected {
            return Err(libc::ENOTCONN);
        }
        rs.data.as_mut().unwrap().map(buf, len, off)?
    };
    let Some(msg) = msg else {
        return Ok(off as i64);
    };
    for _ in 0..100 {
        let mut rs = cell.lock();
        rs.progress();
        if rs
            .data
            .as_mut()
            .unwrap()
            .write_from(&msg, None, Some(Data::IOMAP))?
            > 0
        {
            return Ok(off as i64);
        }
        drop(rs);
        wait(&cell);
    }
    Err(libc::ENOBUFS)
}

pub fn iounmap(s: c_int, buf: usize) -> Result<(), c_int> {
    let cell = get(s)?;
    let mut rs = cell.lock();
    let d = rs.data.as_mut().ok_or(libc::ENOTCONN)?;
    let i = d
        .mapped
        .iter()
        .position(|m| m.addr == buf)
        .ok_or(libc::EINVAL)?;
    let m = d.mapped.remove(i);
    // SAFETY: the MR riomap made.
    unsafe { crate::verbs::ibv_dereg_mr(m.mr) };
    Ok(())
}

/// `riowrite`: RDMA WRITEs of `buf` into the peer's memory mapped at `offset`.
pub fn iowrite(s: c_int, buf: &[u8], offset: u64, flags: c_int) -> Result<usize, c_int> {
    let cell = get(s)?;
    let mut done = 0;
    loop {
        let mut rs = cell.lock();
        if rs.st != St::Connected {
            return Err(libc::ENOTCONN);
        }
        rs.progress();
        let nonblock = rs.nonblock || flags & libc::MSG_DONTWAIT != 0;
        let d = rs.data.as_mut().unwrap();
        while done < buf.len() {
            let n = (buf.len() - done).min(data::CHUNK);
            let Some(remote) = d.window(offset + done as u64, n) else {
                return Err(libc::EINVAL);
            };
            let w = d.write_from(&buf[done..done + n], Some(remote), None)?;
            if w == 0 {
                break;
            }
            done += w;
        }
        if done == buf.len() || (done > 0 && nonblock) {
            return Ok(done);
        }
        if nonblock {
            return Err(libc::EAGAIN);
        }
        drop(rs);
        wait(&cell);
    }
}
