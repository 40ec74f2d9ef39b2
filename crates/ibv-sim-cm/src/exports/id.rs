//! Ids, their addresses and options.
core::arch::global_asm!(include_str!(concat!(env!("OUT_DIR"), "/symver_id.s")));

use core::ffi::{c_int, c_void};

use libc::sockaddr;
use rdmacm_abi::*;

use crate::addr::Addr;
use crate::cm::{self as id, connect, process};
use crate::guard;

/// Makes an id; a NULL channel makes a synchronous id.
///
/// # Safety
/// `id` is writable; `channel` is NULL or from `rdma_create_event_channel`.
#[no_mangle]
pub unsafe extern "C" fn rdma_create_id(
    channel: *mut rdma_event_channel,
    id: *mut *mut rdma_cm_id,
    context: *mut c_void,
    ps: u32,
) -> c_int {
    // SAFETY: the caller's contract.
    guard::int(|| unsafe { id::create(channel, id, context, ps) })
}

/// Destroys an id once its events are acknowledged.
///
/// # Safety
/// `id` is not used afterwards.
#[no_mangle]
pub unsafe extern "C" fn rdma_destroy_id(id: *mut rdma_cm_id) -> c_int {
    // SAFETY: the caller's contract.
    guard::int(|| unsafe { id::destroy(id) })
}

/// Binds an id to a local address (port 0: one is chosen).
///
/// # Safety
/// `addr` points at a socket address of its family.
#[no_mangle]
pub unsafe extern "C" fn rdma_bind_addr(id: *mut rdma_cm_id, addr: *mut sockaddr) -> c_int {
    guard::int(|| {
        let sh = id::lookup(id)?;
        // SAFETY: the caller's contract.
        let a = unsafe { Addr::read(addr) }?;
        connect::bind(&sh, id, a)
    })
}

/// Resolves a destination address to a local device and port.
///
/// # Safety
/// `src` is NULL or a socket address; `dst` a socket address.
#[no_mangle]
pub unsafe extern "C" fn rdma_resolve_addr(
    id: *mut rdma_cm_id,
    src: *mut sockaddr,
    dst: *mut sockaddr,
    timeout_ms: c_int,
) -> c_int {
    guard::int(|| {
        let sh = id::lookup(id)?;
        // SAFETY: the caller's contract.
        let src = if src.is_null() {
            None
        } else {
            Some(unsafe { Addr::read(src) }?)
        };
        // SAFETY: as above.
        let dst = unsafe { Addr::read(dst) }?;
        let local_mc = dst.canonical().ip.is_multicast();
        if local_mc {
            crate::cm::mcast::resolve(&sh, id, src, dst)?;
        } else {
            connect::resolve_addr(&sh, id, src, dst, timeout_ms)?;
        }
        process::complete(&sh, id)
    })
}

/// Resolves the route of an id whose address is resolved.
#[no_mangle]
pub extern "C" fn rdma_resolve_route(id: *mut rdma_cm_id, _timeout_ms: c_int) -> c_int {
    guard::int(|| {
        let sh = id::lookup(id)?;
        connect::resolve_route(&sh, id)?;
        process::complete(&sh, id)
    })
}

/// Listens for requests on a bound id.
#[no_mangle]
pub extern "C" fn rdma_listen(id: *mut rdma_cm_id, _backlog: c_int) -> c_int {
    guard::int(|| {
        let sh = id::lookup(id)?;
        connect::listen(&sh, id)
    })
}

/// A synchronous listener's next request, as a new id.
///
/// # Safety
/// `id` is writable.
#[no_mangle]
pub unsafe extern "C" fn rdma_get_request(
    listen: *mut rdma_cm_id,
    id: *mut *mut rdma_cm_id,
) -> c_int {
    guard::int(|| {
        let sh = id::lookup(listen)?;
        if id.is_null() || !sh.st.lock().sync {
            return Err(libc::EINVAL);
        }
        process::complete(&sh, listen)?;
        // SAFETY: the listener's live face and the event complete() left there.
        let ev = unsafe { (*listen).event };
        // SAFETY: a live event.
        if unsafe { (*ev).event } != RDMA_CM_EVENT_CONNECT_REQUEST {
            return Err(libc::EINVAL);
        }
        // SAFETY: as above.
        let new = unsafe { (*ev).id };
        // SAFETY: the new id's face and the listener's.
        unsafe {
            (*new).event = ev;
            (*listen).event = core::ptr::null_mut();
        }
        crate::exports::qp::ep_qp(&sh, new)?;
        // SAFETY: the caller's out pointer.
        unsafe { *id = new };
        Ok(())
    })
}

/// Moves an id (and its queued events) to another channel; NULL makes it
/// synchronous.
#[no_mangle]
pub extern "C" fn rdma_migrate_id(id: *mut rdma_cm_id, channel: *mut rdma_event_channel) -> c_int {
    guard::int(|| {
        let sh = id::lookup(id)?;
        let (new, own, face_ch) = if channel.is_null() {
            let b = crate::cm::channel::new_channel()?;
            let inner = b.inner.clone();
            let p = (&raw const b.face).cast_mut();
            (inner, Some(b), p)
        } else {
            (crate::cm::channel::lookup_channel(channel)?, None, channel)
        };
        // A synchronous id's last event is its own to acknowledge.
        // SAFETY: the live id face.
        let ev = unsafe { (*id).event };
        if sh.st.lock().sync && !ev.is_null() {
            crate::cm::event::ack(ev)?;
            // SAFETY: as above.
            unsafe { (*id).event = core::ptr::null_mut() };
        }
        let mut st = sh.st.lock();
        while st.reported != st.acked {
            sh.cond.wait(&mut st);
        }
        let old = std::mem::replace(&mut st.channel, new.clone());
        st.sync = channel.is_null();
        let prev_own = std::mem::replace(&mut st.own_channel, own);
        drop(st);
        for raw in old.take_for(&sh) {
            new.push(sh.clone(), raw);
        }
        drop(prev_own);
        // SAFETY: the live id face.
        unsafe { (*id).channel = face_ch };
        Ok(())
    })
}

/// `RDMA_OPTION_ID` (TOS, REUSEADDR, AFONLY, ACK_TIMEOUT) and
/// `RDMA_OPTION_IB` (PATH).
///
/// # Safety
/// `optval` points at `optlen` readable bytes.
#[no_mangle]
pub unsafe extern "C" fn rdma_set_option(
    id: *mut rdma_cm_id,
    level: c_int,
    optname: c_int,
    optval: *mut c_void,
    optlen: usize,
) -> c_int {
    guard::int(|| {
        let sh = id::lookup(id)?;
        if optval.is_null() {
            return Err(libc::EINVAL);
        }
        let mut st = sh.st.lock();
        // SAFETY: the caller's contract; each read is of the length checked.
        unsafe {
            match (level, optname) {
                (RDMA_OPTION_ID, RDMA_OPTION_ID_TOS) if optlen == 1 => {
                    st.tos = *optval.cast::<u8>()
                }
                (RDMA_OPTION_ID, RDMA_OPTION_ID_REUSEADDR) if optlen == 4 => {
                    st.reuseaddr = optval.cast::<c_int>().read_unaligned() != 0
                }
                (RDMA_OPTION_ID, RDMA_OPTION_ID_AFONLY) if optlen == 4 => {
                    st.afonly = optval.cast::<c_int>().read_unaligned() != 0
                }
                (RDMA_OPTION_ID, RDMA_OPTION_ID_ACK_TIMEOUT) if optlen == 1 => {
                    st.ack_timeout = Some(*optval.cast::<u8>())
                }
                (RDMA_OPTION_IB, RDMA_OPTION_IB_PATH)
                    if optlen >= core::mem::size_of::<ibv_path_data>()
                        && optlen.is_multiple_of(core::mem::size_of::<ibv_path_data>()) =>
                {
                    let pd = optval.cast::<ibv_path_data>().read_unaligned();
                    // SAFETY: all-zero is a valid path record.
                    let mut p: Box<ibv_sa_path_rec> = Box::new(core::mem::zeroed());
                    p.dgid = pd.path.dgid;
                    p.sgid = pd.path.sgid;
                    p.dlid = pd.path.dlid;
                    p.slid = pd.path.slid;
                    p.pkey = pd.path.pkey;
                    p.mtu = pd.path.mtu & 0x3f;
                    p.numb_path = 1;
                    st.path = Some(p);
                }
                (RDMA_OPTION_ID | RDMA_OPTION_IB, _) => return Err(libc::EINVAL),
                _ => return Err(libc::ENOSYS),
            }
        }
        Ok(())
    })
}

fn port_of(a: Option<Addr>) -> u16 {
    a.map_or(0, |a| a.port.to_be())
}

/// The id's local port, network byte order.
#[no_mangle]
pub extern "C" fn rdma_get_src_port(id: *mut rdma_cm_id) -> u16 {
    guard::call(0, || {
        id::lookup(id).map_or(0, |_| port_of(connect::src_of(id)))
    })
}

/// The id's remote port, network byte order.
#[no_mangle]
pub extern "C" fn rdma_get_dst_port(id: *mut rdma_cm_id) -> u16 {
    guard::call(0, || {
        id::lookup(id).map_or(0, |_| port_of(connect::dst_of(id)))
    })
}

/// `IBV_EVENT_COMM_EST` on an accepted id: established without the RTU.
#[no_mangle]
pub extern "C" fn rdma_notify(id: *mut rdma_cm_id, event: c_int) -> c_int {
    guard::int(|| {
        let sh = id::lookup(id)?;
        const COMM_EST: c_int = 4;
        if event != COMM_EST {
            return Err(libc::EINVAL);
        }
        if sh.st.lock().phase == id::Phase::Accepted {
            sh.deliver(id::Raw::Msg(crate::cm::rendezvous::wire::Msg::new(
                crate::cm::rendezvous::wire::RTU,
            )));
        }
        Ok(())
    })
}
