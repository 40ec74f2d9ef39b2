//! rsockets, the `r*` functions (`crate::rsocket`): stream sockets over
//! this library's RC connections; datagram rsockets over UD.
//! (`rfcntl` is variadic in C; its one `int` argument comes third.)
core::arch::global_asm!(include_str!(concat!(env!("OUT_DIR"), "/symver_rsocket.s")));

use core::ffi::{c_int, c_void};

use libc::{fd_set, iovec, msghdr, nfds_t, off_t, pollfd, sockaddr, socklen_t, timeval};

use crate::addr::Addr;
use crate::guard;
use crate::rsocket as rs;

fn ssize(r: Result<usize, c_int>) -> isize {
    match r {
        Ok(n) => n as isize,
        Err(e) => {
            guard::set_errno(e);
            -1
        }
    }
}

/// # Safety
/// `buf` is NULL or `len` bytes.
unsafe fn bytes<'a>(buf: *const c_void, len: usize) -> Result<&'a [u8], c_int> {
    if len == 0 {
        return Ok(&[]);
    }
    if buf.is_null() {
        return Err(libc::EFAULT);
    }
    // SAFETY: the caller's contract.
    Ok(unsafe { core::slice::from_raw_parts(buf.cast(), len) })
}

/// # Safety
/// `buf` is NULL or `len` writable bytes.
unsafe fn bytes_mut<'a>(buf: *mut c_void, len: usize) -> Result<&'a mut [u8], c_int> {
    if len == 0 {
        return Ok(&mut []);
    }
    if buf.is_null() {
        return Err(libc::EFAULT);
    }
    // SAFETY: the caller's contract.
    Ok(unsafe { core::slice::from_raw_parts_mut(buf.cast(), len) })
}

/// A stream rsocket (`SOCK_STREAM`, AF_INET or AF_INET6).
#[no_mangle]
pub extern "C" fn rsocket(domain: c_int, ty: c_int, protocol: c_int) -> c_int {
    guard::value(|| rs::socket(domain, ty, protocol))
}

/// # Safety
/// `addr` is a socket address.
#[no_mangle]
pub unsafe extern "C" fn rbind(socket: c_int, addr: *const sockaddr, _addrlen: socklen_t) -> c_int {
    guard::int(|| rs::bind(socket, addr))
}

#[no_mangle]
pub extern "C" fn rlisten(socket: c_int, backlog: c_int) -> c_int {
    guard::int(|| rs::listen(socket, backlog))
}

/// # Safety
/// `addr`/`addrlen` NULL or the caller's buffer and its length.
#[no_mangle]
pub unsafe extern "C" fn raccept(
    socket: c_int,
    addr: *mut sockaddr,
    addrlen: *mut socklen_t,
) -> c_int {
    guard::value(|| rs::accept(socket, addr, addrlen))
}

/// # Safety
/// `addr` is a socket address.
#[no_mangle]
pub unsafe extern "C" fn rconnect(
    socket: c_int,
    addr: *const sockaddr,
    _addrlen: socklen_t,
) -> c_int {
    guard::int(|| rs::connect(socket, addr))
}

#[no_mangle]
pub extern "C" fn rshutdown(socket: c_int, how: c_int) -> c_int {
    guard::int(|| rs::shutdown(socket, how))
}

#[no_mangle]
pub extern "C" fn rclose(socket: c_int) -> c_int {
    guard::int(|| rs::close(socket))
}

/// # Safety
/// `buf` is `len` writable bytes.
#[no_mangle]
pub unsafe extern "C" fn rrecv(socket: c_int, buf: *mut c_void, len: usize, flags: c_int) -> isize {
    // SAFETY: the caller's contract.
    guard::call(-1, || {
        ssize(unsafe { bytes_mut(buf, len) }.and_then(|b| rs::recv(socket, b, flags)))
    })
}

/// # Safety
/// As [`rrecv`]; `src_addr`/`addrlen` NULL or the caller's buffer.
#[no_mangle]
pub unsafe extern "C" fn rrecvfrom(
    socket: c_int,
    buf: *mut c_void,
    len: usize,
    flags: c_int,
    src_addr: *mut sockaddr,
    addrlen: *mut socklen_t,
) -> isize {
    guard::call(-1, || {
        let mut from = None;
        // SAFETY: the caller's contract.
        let n = ssize(
            unsafe { bytes_mut(buf, len) }.and_then(|b| rs::recvfrom(socket, b, flags, &mut from)),
        );
        if n >= 0 && !src_addr.is_null() && !addrlen.is_null() {
            match from {
                // SAFETY: the caller's buffer and its length.
                Some(a) => unsafe { rs::copy_out(&a, src_addr, addrlen) },
                None => {
                    let _ = rs::name(socket, true, src_addr, addrlen);
                }
            }
        }
        n
    })
}

/// # Safety
/// `msg` is a valid msghdr whose iovecs are writable.
#[no_mangle]
pub unsafe extern "C" fn rrecvmsg(socket: c_int, msg: *mut msghdr, flags: c_int) -> isize {
    // SAFETY: the caller's contract.
    guard::call(-1, || unsafe {
        match msg.as_ref() {
            Some(m) => rreadv_flags(socket, m.msg_iov, m.msg_iovlen as c_int, flags),
            None => ssize(Err(libc::EFAULT)),
        }
    })
}

/// # Safety
/// `buf` is `len` bytes.
#[no_mangle]
pub unsafe extern "C" fn rsend(
    socket: c_int,
    buf: *const c_void,
    len: usize,
    flags: c_int,
) -> isize {
    // SAFETY: the caller's contract.
    guard::call(-1, || {
        ssize(unsafe { bytes(buf, len) }.and_then(|b| rs::send(socket, b, flags)))
    })
}

/// # Safety
/// As [`rsend`]; `dest_addr` NULL or a socket address (a stream socket
/// sends on its connection whatever it says).
#[no_mangle]
pub unsafe extern "C" fn rsendto(
    socket: c_int,
    buf: *const c_void,
    len: usize,
    flags: c_int,
    dest_addr: *const sockaddr,
    _addrlen: socklen_t,
) -> isize {
    guard::call(-1, || {
        // SAFETY: the caller's address, when given.
        let to = match (!dest_addr.is_null()).then(|| unsafe { Addr::read(dest_addr) }) {
            Some(Ok(a)) => Some(a),
            Some(Err(e)) => return ssize(Err(e)),
            None => None,
        };
        // SAFETY: the caller's contract.
        ssize(unsafe { bytes(buf, len) }.and_then(|b| rs::sendto(socket, b, flags, to)))
    })
}

/// # Safety
/// `msg` is a valid msghdr.
#[no_mangle]
pub unsafe extern "C" fn rsendmsg(socket: c_int, msg: *const msghdr, flags: c_int) -> isize {
    // SAFETY: the caller's contract.
    guard::call(-1, || unsafe {
        match msg.as_ref() {
            Some(m) => rwritev_flags(socket, m.msg_iov, m.msg_iovlen as c_int, flags),
            None => ssize(Err(libc::EFAULT)),
        }
    })
}

/// # Safety
/// `buf` is `count` writable bytes.
#[no_mangle]
pub unsafe extern "C" fn rread(socket: c_int, buf: *mut c_void, count: usize) -> isize {
    // SAFETY: the caller's contract.
    unsafe { rrecv(socket, buf, count, 0) }
}

/// # Safety
/// `iov` is `iovcnt` valid iovecs.
unsafe fn rreadv_flags(socket: c_int, iov: *const iovec, iovcnt: c_int, flags: c_int) -> isize {
    let mut total: isize = 0;
    for i in 0..iovcnt.max(0) as usize {
        // SAFETY: the caller's contract.
        let v = unsafe { *iov.add(i) };
        // SAFETY: an iovec of the caller's.
        let n = unsafe {
            rrecv(
                socket,
                v.iov_base,
                v.iov_len,
                flags | if total > 0 { libc::MSG_DONTWAIT } else { 0 },
            )
        };
        if n < 0 {
            return if total > 0 { total } else { n };
        }
        total += n;
        if (n as usize) < v.iov_len {
            break;
        }
    }
    total
}

/// # Safety
/// `iov` is `iovcnt` valid iovecs.
#[no_mangle]
pub unsafe extern "C" fn rreadv(socket: c_int, iov: *const iovec, iovcnt: c_int) -> isize {
    // SAFETY: the caller's contract.
    guard::call(-1, || unsafe { rreadv_flags(socket, iov, iovcnt, 0) })
}

/// # Safety
/// `buf` is `count` bytes.
#[no_mangle]
pub unsafe extern "C" fn rwrite(socket: c_int, buf: *const c_void, count: usize) -> isize {
    // SAFETY: the caller's contract.
    unsafe { rsend(socket, buf, count, 0) }
}

/// # Safety
/// `iov` is `iovcnt` valid iovecs.
unsafe fn rwritev_flags(socket: c_int, iov: *const iovec, iovcnt: c_int, flags: c_int) -> isize {
    let mut total: isize = 0;
    for i in 0..iovcnt.max(0) as usize {
        // SAFETY: the caller's contract.
        let v = unsafe { *iov.add(i) };
        // SAFETY: an iovec of the caller's.
        let n = unsafe { rsend(socket, v.iov_base, v.iov_len, flags) };
        if n < 0 {
            return if total > 0 { total } else { n };
        }
        total += n;
    }
    total
}

/// # Safety
/// `iov` is `iovcnt` valid iovecs.
#[no_mangle]
pub unsafe extern "C" fn rwritev(socket: c_int, iov: *const iovec, iovcnt: c_int) -> isize {
    // SAFETY: the caller's contract.
    guard::call(-1, || unsafe { rwritev_flags(socket, iov, iovcnt, 0) })
}

/// # Safety
/// `fds` is `nfds` pollfds.
#[no_mangle]
pub unsafe extern "C" fn rpoll(fds: *mut pollfd, nfds: nfds_t, timeout: c_int) -> c_int {
    // SAFETY: the caller's contract.
    guard::value(|| unsafe { rs::poll::rpoll(fds, nfds as usize, timeout) })
}

/// # Safety
/// The sets NULL or valid for `nfds`; `timeout` NULL or valid.
#[no_mangle]
pub unsafe extern "C" fn rselect(
    nfds: c_int,
    readfds: *mut fd_set,
    writefds: *mut fd_set,
    exceptfds: *mut fd_set,
    timeout: *mut timeval,
) -> c_int {
    // SAFETY: the caller's contract.
    guard::value(|| unsafe { rs::poll::rselect(nfds, readfds, writefds, exceptfds, timeout) })
}

/// # Safety
/// `addr`/`addrlen` the caller's buffer and its length.
#[no_mangle]
pub unsafe extern "C" fn rgetpeername(
    socket: c_int,
    addr: *mut sockaddr,
    addrlen: *mut socklen_t,
) -> c_int {
    guard::int(|| rs::name(socket, true, addr, addrlen))
}

/// # Safety
/// As [`rgetpeername`].
#[no_mangle]
pub unsafe extern "C" fn rgetsockname(
    socket: c_int,
    addr: *mut sockaddr,
    addrlen: *mut socklen_t,
) -> c_int {
    guard::int(|| rs::name(socket, false, addr, addrlen))
}

/// # Safety
/// `optval` is `optlen` bytes.
#[no_mangle]
pub unsafe extern "C" fn rsetsockopt(
    socket: c_int,
    level: c_int,
    optname: c_int,
    optval: *const c_void,
    optlen: socklen_t,
) -> c_int {
    // SAFETY: the caller's contract.
    guard::int(|| {
        rs::setsockopt(socket, level, optname, unsafe {
            bytes(optval, optlen as usize)
        }?)
    })
}

/// # Safety
/// `optval`/`optlen` the caller's buffer and its length.
#[no_mangle]
pub unsafe extern "C" fn rgetsockopt(
    socket: c_int,
    level: c_int,
    optname: c_int,
    optval: *mut c_void,
    optlen: *mut socklen_t,
) -> c_int {
    guard::int(|| {
        if optval.is_null() || optlen.is_null() {
            return Err(libc::EFAULT);
        }
        let v = rs::getsockopt(socket, level, optname)?;
        // SAFETY: the caller's buffer of *optlen bytes.
        unsafe {
            let n = v.len().min(*optlen as usize);
            core::ptr::copy_nonoverlapping(v.as_ptr(), optval.cast::<u8>(), n);
            *optlen = n as socklen_t;
        }
        Ok(())
    })
}

/// `F_GETFL` and `F_SETFL` (`O_NONBLOCK`).
#[no_mangle]
pub extern "C" fn rfcntl(socket: c_int, cmd: c_int, arg: c_int) -> c_int {
    guard::value(|| rs::fcntl(socket, cmd, arg))
}

/// # Safety
/// `buf` is `len` bytes that stay valid until `riounmap`.
#[no_mangle]
pub unsafe extern "C" fn riomap(
    socket: c_int,
    buf: *mut c_void,
    len: usize,
    _prot: c_int,
    _flags: c_int,
    offset: off_t,
) -> off_t {
    guard::call(-1, || match rs::iomap(socket, buf as usize, len, offset) {
        Ok(o) => o,
        Err(e) => {
            guard::set_errno(e);
            -1
        }
    })
}

#[no_mangle]
pub extern "C" fn riounmap(socket: c_int, buf: *mut c_void, _len: usize) -> c_int {
    guard::int(|| rs::iounmap(socket, buf as usize))
}

/// Returns the bytes written, or `(size_t)-1` with errno.
///
/// # Safety
/// `buf` is `count` bytes.
#[no_mangle]
pub unsafe extern "C" fn riowrite(
    socket: c_int,
    buf: *const c_void,
    count: usize,
    offset: off_t,
    flags: c_int,
) -> usize {
    guard::call(0, || {
        // SAFETY: the caller's contract.
        match unsafe { bytes(buf, count) }
            .and_then(|b| rs::iowrite(socket, b, offset.max(0) as u64, flags))
        {
            Ok(n) => n,
            Err(e) => {
                guard::set_errno(e);
                usize::MAX
            }
        }
    })
}
