//! rsockets, the `r*` functions: not implemented in the sim's librdmacm.
//! Each fails at once with `ENOSYS` (-1; `riowrite`, which returns a
//! `size_t`, returns 0), so a program sees a missing feature, never a
//! socket that pretends to work. (`rfcntl` is variadic in C; its third
//! argument is never read here.)
core::arch::global_asm!(include_str!(concat!(env!("OUT_DIR"), "/symver_rsocket.s")));

use core::ffi::{c_int, c_void};

use libc::{fd_set, iovec, msghdr, nfds_t, off_t, pollfd, sockaddr, socklen_t, timeval};

use crate::guard;

/// Not implemented: `ENOSYS`.
#[no_mangle]
pub extern "C" fn rsocket(_domain: c_int, _ty: c_int, _protocol: c_int) -> c_int {
    guard::call(-1, || {
        guard::set_errno(libc::ENOSYS);
        -1
    })
}

/// Not implemented: `ENOSYS`.
#[no_mangle]
pub extern "C" fn rbind(_socket: c_int, _addr: *const sockaddr, _addrlen: socklen_t) -> c_int {
    guard::call(-1, || {
        guard::set_errno(libc::ENOSYS);
        -1
    })
}

/// Not implemented: `ENOSYS`.
#[no_mangle]
pub extern "C" fn rlisten(_socket: c_int, _backlog: c_int) -> c_int {
    guard::call(-1, || {
        guard::set_errno(libc::ENOSYS);
        -1
    })
}

/// Not implemented: `ENOSYS`.
#[no_mangle]
pub extern "C" fn raccept(_socket: c_int, _addr: *mut sockaddr, _addrlen: *mut socklen_t) -> c_int {
    guard::call(-1, || {
        guard::set_errno(libc::ENOSYS);
        -1
    })
}

/// Not implemented: `ENOSYS`.
#[no_mangle]
pub extern "C" fn rconnect(_socket: c_int, _addr: *const sockaddr, _addrlen: socklen_t) -> c_int {
    guard::call(-1, || {
        guard::set_errno(libc::ENOSYS);
        -1
    })
}

/// Not implemented: `ENOSYS`.
#[no_mangle]
pub extern "C" fn rshutdown(_socket: c_int, _how: c_int) -> c_int {
    guard::call(-1, || {
        guard::set_errno(libc::ENOSYS);
        -1
    })
}

/// Not implemented: `ENOSYS`.
#[no_mangle]
pub extern "C" fn rclose(_socket: c_int) -> c_int {
    guard::call(-1, || {
        guard::set_errno(libc::ENOSYS);
        -1
    })
}

/// Not implemented: `ENOSYS`.
#[no_mangle]
pub extern "C" fn rrecv(_socket: c_int, _buf: *mut c_void, _len: usize, _flags: c_int) -> isize {
    guard::call(-1, || {
        guard::set_errno(libc::ENOSYS);
        -1
    })
}

/// Not implemented: `ENOSYS`.
#[no_mangle]
pub extern "C" fn rrecvfrom(
    _socket: c_int,
    _buf: *mut c_void,
    _len: usize,
    _flags: c_int,
    _src_addr: *mut sockaddr,
    _addrlen: *mut socklen_t,
) -> isize {
    guard::call(-1, || {
        guard::set_errno(libc::ENOSYS);
        -1
    })
}

/// Not implemented: `ENOSYS`.
#[no_mangle]
pub extern "C" fn rrecvmsg(_socket: c_int, _msg: *mut msghdr, _flags: c_int) -> isize {
    guard::call(-1, || {
        guard::set_errno(libc::ENOSYS);
        -1
    })
}

/// Not implemented: `ENOSYS`.
#[no_mangle]
pub extern "C" fn rsend(_socket: c_int, _buf: *const c_void, _len: usize, _flags: c_int) -> isize {
    guard::call(-1, || {
        guard::set_errno(libc::ENOSYS);
        -1
    })
}

/// Not implemented: `ENOSYS`.
#[no_mangle]
pub extern "C" fn rsendto(
    _socket: c_int,
    _buf: *const c_void,
    _len: usize,
    _flags: c_int,
    _dest_addr: *const sockaddr,
    _addrlen: socklen_t,
) -> isize {
    guard::call(-1, || {
        guard::set_errno(libc::ENOSYS);
        -1
    })
}

/// Not implemented: `ENOSYS`.
#[no_mangle]
pub extern "C" fn rsendmsg(_socket: c_int, _msg: *const msghdr, _flags: c_int) -> isize {
    guard::call(-1, || {
        guard::set_errno(libc::ENOSYS);
        -1
    })
}

/// Not implemented: `ENOSYS`.
#[no_mangle]
pub extern "C" fn rread(_socket: c_int, _buf: *mut c_void, _count: usize) -> isize {
    guard::call(-1, || {
        guard::set_errno(libc::ENOSYS);
        -1
    })
}

/// Not implemented: `ENOSYS`.
#[no_mangle]
pub extern "C" fn rreadv(_socket: c_int, _iov: *const iovec, _iovcnt: c_int) -> isize {
    guard::call(-1, || {
        guard::set_errno(libc::ENOSYS);
        -1
    })
}

/// Not implemented: `ENOSYS`.
#[no_mangle]
pub extern "C" fn rwrite(_socket: c_int, _buf: *const c_void, _count: usize) -> isize {
    guard::call(-1, || {
        guard::set_errno(libc::ENOSYS);
        -1
    })
}

/// Not implemented: `ENOSYS`.
#[no_mangle]
pub extern "C" fn rwritev(_socket: c_int, _iov: *const iovec, _iovcnt: c_int) -> isize {
    guard::call(-1, || {
        guard::set_errno(libc::ENOSYS);
        -1
    })
}

/// Not implemented: `ENOSYS`.
#[no_mangle]
pub extern "C" fn rpoll(_fds: *mut pollfd, _nfds: nfds_t, _timeout: c_int) -> c_int {
    guard::call(-1, || {
        guard::set_errno(libc::ENOSYS);
        -1
    })
}

/// Not implemented: `ENOSYS`.
#[no_mangle]
pub extern "C" fn rselect(
    _nfds: c_int,
    _readfds: *mut fd_set,
    _writefds: *mut fd_set,
    _exceptfds: *mut fd_set,
    _timeout: *mut timeval,
) -> c_int {
    guard::call(-1, || {
        guard::set_errno(libc::ENOSYS);
        -1
    })
}

/// Not implemented: `ENOSYS`.
#[no_mangle]
pub extern "C" fn rgetpeername(
    _socket: c_int,
    _addr: *mut sockaddr,
    _addrlen: *mut socklen_t,
) -> c_int {
    guard::call(-1, || {
        guard::set_errno(libc::ENOSYS);
        -1
    })
}

/// Not implemented: `ENOSYS`.
#[no_mangle]
pub extern "C" fn rgetsockname(
    _socket: c_int,
    _addr: *mut sockaddr,
    _addrlen: *mut socklen_t,
) -> c_int {
    guard::call(-1, || {
        guard::set_errno(libc::ENOSYS);
        -1
    })
}

/// Not implemented: `ENOSYS`.
#[no_mangle]
pub extern "C" fn rsetsockopt(
    _socket: c_int,
    _level: c_int,
    _optname: c_int,
    _optval: *const c_void,
    _optlen: socklen_t,
) -> c_int {
    guard::call(-1, || {
        guard::set_errno(libc::ENOSYS);
        -1
    })
}

/// Not implemented: `ENOSYS`.
#[no_mangle]
pub extern "C" fn rgetsockopt(
    _socket: c_int,
    _level: c_int,
    _optname: c_int,
    _optval: *mut c_void,
    _optlen: *mut socklen_t,
) -> c_int {
    guard::call(-1, || {
        guard::set_errno(libc::ENOSYS);
        -1
    })
}

/// Not implemented: `ENOSYS`.
#[no_mangle]
pub extern "C" fn rfcntl(_socket: c_int, _cmd: c_int, _arg: c_int) -> c_int {
    guard::call(-1, || {
        guard::set_errno(libc::ENOSYS);
        -1
    })
}

/// Not implemented: `ENOSYS`.
#[no_mangle]
pub extern "C" fn riomap(
    _socket: c_int,
    _buf: *mut c_void,
    _len: usize,
    _prot: c_int,
    _flags: c_int,
    _offset: off_t,
) -> off_t {
    guard::call(-1, || {
        guard::set_errno(libc::ENOSYS);
        -1
    })
}

/// Not implemented: `ENOSYS`.
#[no_mangle]
pub extern "C" fn riounmap(_socket: c_int, _buf: *mut c_void, _len: usize) -> c_int {
    guard::call(-1, || {
        guard::set_errno(libc::ENOSYS);
        -1
    })
}

/// Not implemented: `ENOSYS`.
#[no_mangle]
pub extern "C" fn riowrite(
    _socket: c_int,
    _buf: *const c_void,
    _count: usize,
    _offset: off_t,
    _flags: c_int,
) -> usize {
    guard::call(0, || {
        guard::set_errno(libc::ENOSYS);
        0
    })
}
