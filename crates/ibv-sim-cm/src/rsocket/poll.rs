//! `rpoll` and `rselect` over rsockets and ordinary descriptors alike: an
//! rsocket's readiness is computed from its state (after taking what
//! arrived), and the wait is a `poll(2)` on the ordinary descriptors and
//! each rsocket's event-channel and completion-channel fds.

use core::ffi::c_int;
use std::time::{Duration, Instant};

/// `rpoll`.
///
/// # Safety
/// `fds` points at `nfds` pollfds.
pub unsafe fn rpoll(fds: *mut libc::pollfd, nfds: usize, timeout: c_int) -> Result<c_int, c_int> {
    if fds.is_null() && nfds > 0 {
        return Err(libc::EFAULT);
    }
    let deadline = (timeout >= 0).then(|| Instant::now() + Duration::from_millis(timeout as u64));
    // SAFETY: the caller's contract.
    let fds = if nfds == 0 {
        &mut [][..]
    } else {
        unsafe { core::slice::from_raw_parts_mut(fds, nfds) }
    };
    loop {
        let mut ready = 0;
        let mut wait: Vec<libc::pollfd> = Vec::new();
        let mut plain: Vec<usize> = Vec::new();
        for (i, p) in fds.iter_mut().enumerate() {
            p.revents = 0;
            match super::lookup(p.fd) {
                Some(cell) => {
                    let mut rs = cell.lock();
                    p.revents = rs.revents(p.events);
                    if p.revents == 0 {
                        for fd in rs.wake_fds() {
                            wait.push(libc::pollfd {
                                fd,
                                events: libc::POLLIN,
                                revents: 0,
                            });
                        }
                        // Armed: anything that came meanwhile shows now.
                        p.revents = rs.revents(p.events);
                    }
                }
                None => {
                    plain.push(i);
                    wait.push(libc::pollfd {
                        fd: p.fd,
                        events: p.events,
                        revents: 0,
                    });
                }
            }
            if p.revents != 0 {
                ready += 1;
            }
        }
        if !plain.is_empty() {
            let mut now: Vec<libc::pollfd> = plain
                .iter()
                .map(|&i| libc::pollfd {
                    fd: fds[i].fd,
                    events: fds[i].events,
                    revents: 0,
                })
                .collect();
            // SAFETY: a valid array, no wait.
            unsafe { libc::poll(now.as_mut_ptr(), now.len() as libc::nfds_t, 0) };
            for (k, &i) in plain.iter().enumerate() {
                fds[i].revents = now[k].revents;
                if now[k].revents != 0 {
                    ready += 1;
                }
            }
        }
        if ready > 0 {
            return Ok(ready);
        }
        let left = match deadline {
            None => 1000,
            Some(d) => {
                let l = d.saturating_duration_since(Instant::now());
                if l.is_zero() {
                    return Ok(0);
                }
                l.as_millis().min(1000) as c_int
            }
        };
        // SAFETY: a valid array.
        let r = unsafe { libc::poll(wait.as_mut_ptr(), wait.len() as libc::nfds_t, left.max(1)) };
        if r < 0 && crate::guard::errno() == libc::EINTR {
            return Err(libc::EINTR);
        }
    }
}

/// `rselect`, by way of `rpoll`.
///
/// # Safety
/// The sets are NULL or valid `fd_set`s for `nfds`; `timeout` NULL or valid.
pub unsafe fn rselect(
    nfds: c_int,
    r: *mut libc::fd_set,
    w: *mut libc::fd_set,
    e: *mut libc::fd_set,
    timeout: *mut libc::timeval,
) -> Result<c_int, c_int> {
    if !(0..=libc::FD_SETSIZE as c_int).contains(&nfds) {
        return Err(libc::EINVAL);
    }
    let mut fds = Vec::new();
    for fd in 0..nfds {
        let mut events = 0;
        // SAFETY: the caller's sets, fd below FD_SETSIZE.
        unsafe {
            if !r.is_null() && libc::FD_ISSET(fd, r) {
                events |= libc::POLLIN;
            }
            if !w.is_null() && libc::FD_ISSET(fd, w) {
                events |= libc::POLLOUT;
            }
            if !e.is_null() && libc::FD_ISSET(fd, e) {
                events |= libc::POLLPRI;
            }
        }
        if events != 0 {
            fds.push(libc::pollfd {
                fd,
                events,
                revents: 0,
            });
        }
    }
    // SAFETY: the caller's timeval.
    let ms =
        unsafe { timeout.as_ref() }.map_or(-1, |t| (t.tv_sec * 1000 + t.tv_usec / 1000) as c_int);
    // SAFETY: our own array.
    unsafe { rpoll(fds.as_mut_ptr(), fds.len(), ms) }?;
    let mut n = 0;
    // SAFETY: the caller's sets.
    unsafe {
        for set in [r, w, e] {
            if !set.is_null() {
                libc::FD_ZERO(set);
            }
        }
        for p in &fds {
            let mut hit = false;
            if !r.is_null() && p.revents & (libc::POLLIN | libc::POLLHUP | libc::POLLERR) != 0 {
                libc::FD_SET(p.fd, r);
                hit = true;
            }
            if !w.is_null() && p.revents & (libc::POLLOUT | libc::POLLERR) != 0 {
                libc::FD_SET(p.fd, w);
                hit = true;
            }
            if !e.is_null() && p.revents & libc::POLLPRI != 0 {
                libc::FD_SET(p.fd, e);
                hit = true;
            }
            n += c_int::from(hit);
        }
    }
    Ok(n)
}
