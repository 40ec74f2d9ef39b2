//! `rdma_getaddrinfo` and the device list.
core::arch::global_asm!(include_str!(concat!(env!("OUT_DIR"), "/symver_info.s")));

use core::ffi::{c_char, c_int};
use std::collections::HashSet;

use once_cell::sync::Lazy;
use parking_lot::Mutex;
use rdmacm_abi::*;
use verbs_abi::ibv_context;

use crate::addr::{len_of, Addr};
use crate::guard;
use crate::verbs::{QPT_RC, QPT_UD};

/// Results handed out and not yet freed.
static INFOS: Lazy<Mutex<HashSet<usize>>> = Lazy::new(|| Mutex::new(HashSet::new()));

fn sockaddr_box(a: &Addr) -> (*mut libc::sockaddr, libc::socklen_t) {
    let st = Box::new(a.storage());
    (Box::into_raw(st).cast(), len_of(a.family()))
}

/// The IP address `node` names (numeric, or through the resolver).
fn lookup(
    node: *const c_char,
    service: *const c_char,
    numeric: bool,
    passive: bool,
    family: c_int,
) -> Result<Addr, c_int> {
    // SAFETY: all-zero is a valid addrinfo hint.
    let mut hints: libc::addrinfo = unsafe { core::mem::zeroed() };
    hints.ai_family = if family == libc::AF_INET || family == libc::AF_INET6 {
        family
    } else {
        libc::AF_UNSPEC
    };
    hints.ai_socktype = libc::SOCK_STREAM;
    hints.ai_flags = (if numeric { libc::AI_NUMERICHOST } else { 0 })
        | (if passive { libc::AI_PASSIVE } else { 0 });
    let mut res: *mut libc::addrinfo = core::ptr::null_mut();
    // SAFETY: NUL-terminated strings or NULL (the caller's), hints, an out pointer.
    let r = unsafe { libc::getaddrinfo(node, service, &hints, &mut res) };
    if r != 0 || res.is_null() {
        return Err(if r == libc::EAI_SYSTEM {
            guard::errno()
        } else {
            libc::ENODEV
        });
    }
    let mut p = res;
    let mut found = Err(libc::ENODEV);
    while !p.is_null() {
        // SAFETY: a node of getaddrinfo's list.
        let ai = unsafe { &*p };
        // SAFETY: its address, sized for its family.
        if let Ok(a) = unsafe { Addr::read(ai.ai_addr) } {
            found = Ok(a);
            break;
        }
        p = ai.ai_next;
    }
    // SAFETY: the list getaddrinfo made.
    unsafe { libc::freeaddrinfo(res) };
    found
}

/// Resolves `node`/`service` to one `rdma_addrinfo` (`RAI_PASSIVE`: a
/// source address to bind; else a destination).
///
/// # Safety
/// `node`, `service` NULL or NUL-terminated; `hints` NULL or valid; `res` writable.
#[no_mangle]
pub unsafe extern "C" fn rdma_getaddrinfo(
    node: *const c_char,
    service: *const c_char,
    hints: *const rdma_addrinfo,
    res: *mut *mut rdma_addrinfo,
) -> c_int {
    guard::value(|| {
        if res.is_null() {
            return Err(libc::EINVAL);
        }
        // SAFETY: the caller's contract.
        let h = unsafe { hints.as_ref() };
        // Neither node nor service: the hints' own addresses.
        let hinted = |sa: *mut libc::sockaddr| -> Result<Option<Addr>, c_int> {
            // SAFETY: a hint's socket address, of its family's size.
            if sa.is_null() {
                Ok(None)
            } else {
                unsafe { Addr::read(sa) }.map(Some)
            }
        };
        let (hint_src, hint_dst) = match h {
            Some(h) => (hinted(h.ai_src_addr)?, hinted(h.ai_dst_addr)?),
            None => (None, None),
        };
        if node.is_null() && service.is_null() && hint_src.is_none() && hint_dst.is_none() {
            return Err(libc::EINVAL);
        }
        let flags = h.map_or(0, |h| h.ai_flags);
        let passive = flags & RAI_PASSIVE != 0;
        let family = h.map_or(0, |h| h.ai_family);
        let mut qp_type = h.map_or(0, |h| h.ai_qp_type);
        let mut ps = h.map_or(0, |h| h.ai_port_space);
        if ps == 0 {
            ps = if qp_type == QPT_UD as c_int {
                RDMA_PS_UDP as c_int
            } else {
                RDMA_PS_TCP as c_int
            };
        }
        if qp_type == 0 {
            qp_type = if ps == RDMA_PS_UDP as c_int {
                QPT_UD as c_int
            } else {
                QPT_RC as c_int
            };
        }
        let a = if node.is_null() && service.is_null() {
            if passive { hint_src } else { hint_dst }
                .or(hint_src)
                .ok_or(libc::EINVAL)?
        } else {
            lookup(node, service, flags & RAI_NUMERICHOST != 0, passive, family)?
        };
        // SAFETY: all-zero is a valid rdma_addrinfo.
        let mut ai: Box<rdma_addrinfo> = Box::new(unsafe { core::mem::zeroed() });
        ai.ai_flags = flags;
        ai.ai_family = a.family();
        ai.ai_qp_type = qp_type;
        ai.ai_port_space = ps;
        if passive {
            (ai.ai_src_addr, ai.ai_src_len) = sockaddr_box(&a);
        } else {
            (ai.ai_dst_addr, ai.ai_dst_len) = sockaddr_box(&a);
            if let Some(s) = hint_src {
                (ai.ai_src_addr, ai.ai_src_len) = sockaddr_box(&s);
            }
        }
        let p = Box::into_raw(ai);
        INFOS.lock().insert(p as usize);
        // SAFETY: the caller's out pointer.
        unsafe { *res = p };
        Ok(0)
    })
}

/// Frees a `rdma_getaddrinfo` result.
#[no_mangle]
pub extern "C" fn rdma_freeaddrinfo(res: *mut rdma_addrinfo) {
    guard::void(|| {
        let mut p = res;
        while !p.is_null() && INFOS.lock().remove(&(p as usize)) {
            // SAFETY: made by Box::into_raw above, unregistered now.
            let ai = unsafe { Box::from_raw(p) };
            for sa in [ai.ai_src_addr, ai.ai_dst_addr] {
                if !sa.is_null() {
                    // SAFETY: made by sockaddr_box.
                    drop(unsafe { Box::from_raw(sa.cast::<libc::sockaddr_storage>()) });
                }
            }
            p = ai.ai_next;
        }
    })
}

/// The open contexts librdmacm keeps, NULL-terminated (free with
/// [`rdma_free_devices`]).
///
/// # Safety
/// `num_devices` is NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn rdma_get_devices(num_devices: *mut c_int) -> *mut *mut ibv_context {
    guard::ptr(|| {
        let devs = crate::devices::all();
        // SAFETY: plain allocation of n + 1 pointers.
        let list = unsafe { libc::calloc(devs.len() + 1, core::mem::size_of::<usize>()) }
            .cast::<*mut ibv_context>();
        if list.is_null() {
            return Err(libc::ENOMEM);
        }
        for (i, d) in devs.iter().enumerate() {
            // SAFETY: i < n + 1 slots.
            unsafe { *list.add(i) = d.context() };
        }
        if !num_devices.is_null() {
            // SAFETY: the caller's contract.
            unsafe { *num_devices = devs.len() as c_int };
        }
        Ok(list)
    })
}

/// Frees the list of [`rdma_get_devices`] (the contexts stay open).
///
/// # Safety
/// `list` is NULL or from `rdma_get_devices`.
#[no_mangle]
pub unsafe extern "C" fn rdma_free_devices(list: *mut *mut ibv_context) {
    // SAFETY: the caller's contract: calloc'ed by rdma_get_devices.
    guard::void(|| unsafe { libc::free(list.cast()) })
}
