//! Multicast groups of an id: the group's GID and LID from its IP address
//! (RoCE: `ff0e::ffff:<IPv4>`; InfiniBand: IPoIB's `ff12:401b:ffff::`
//! form, LID `0xc000` plus the address's low bits), the QP attached to it,
//! and `MULTICAST_JOIN` with the group's address vector. The sim's
//! multicast delivers within one process only (its groups are a process's
//! table), so a group joined here reaches the QPs of this process.

use core::ffi::c_int;
use std::net::IpAddr;
use std::sync::Arc;

use rdmacm_abi::*;
use verbs_abi::{ibv_gid, ibv_qp};

use crate::addr::Addr;
use crate::cm::{Raw, Shared};
use crate::verbs::{ibv_attach_mcast, ibv_detach_mcast};

#[derive(Clone, Copy)]
pub struct Group {
    pub addr: Addr,
    pub gid: [u8; 16],
    pub lid: u16,
}

fn group_of(a: Addr, roce: bool) -> Result<Group, c_int> {
    let a = a.canonical();
    if !a.ip.is_multicast() {
        return Err(libc::EINVAL);
    }
    let mut gid = [0u8; 16];
    let low = match a.ip {
        IpAddr::V4(v4) => {
            if roce {
                // RoCE: ff0e::ffff:<IPv4>, as the kernel's CM makes it.
                gid = v4.to_ipv6_mapped().octets();
                gid[0] = 0xff;
                gid[1] = 0x0e;
            } else {
                gid[..4].copy_from_slice(&[0xff, 0x12, 0x40, 0x1b]);
                gid[4..6].copy_from_slice(&[0xff, 0xff]);
                gid[12..].copy_from_slice(&v4.octets());
            }
            u32::from(v4)
        }
        IpAddr::V6(v6) => {
            gid = v6.octets();
            u32::from_be_bytes([gid[12], gid[13], gid[14], gid[15]])
        }
    };
    Ok(Group {
        addr: a,
        gid,
        lid: if roce {
            0
        } else {
            0xc000 | (low & 0x3fff) as u16
        },
    })
}

/// `rdma_join_multicast`: attaches the id's QP (if any) and queues the join.
pub fn join(
    sh: &Arc<Shared>,
    id: *mut rdma_cm_id,
    a: Addr,
    context: *mut core::ffi::c_void,
) -> Result<(), c_int> {
    let mut st = sh.st.lock();
    let local = st.local.ok_or(libc::EINVAL)?;
    if st.qp_type != crate::verbs::QPT_UD {
        return Err(libc::EINVAL);
    }
    let g = group_of(a, local.is_roce())?;
    if st.groups.iter().any(|x| x.addr == g.addr) {
        return Err(libc::EADDRINUSE);
    }
    // SAFETY: the live id face.
    let qp = unsafe { (*id).qp };
    if !qp.is_null() {
        let gid = ibv_gid { raw: g.gid };
        // SAFETY: the id's UD QP.
        let r = unsafe { ibv_attach_mcast(qp, &gid, g.lid) };
        if r != 0 {
            return Err(r);
        }
    }
    st.groups.push(g);
    drop(st);
    // SAFETY: all-zero is a valid rdma_ud_param.
    let mut ud: Box<rdma_ud_param> = Box::new(unsafe { core::mem::zeroed() });
    ud.private_data = context.cast_const();
    ud.ah_attr = crate::cm::qp::ah_to(&local, g.lid, &g.gid, 0);
    ud.ah_attr.is_global = 1;
    ud.qp_num = 0x00ff_ffff;
    ud.qkey = RDMA_UDP_QKEY;
    sh.deliver(Raw::Join(Box::new(crate::cm::Carried(*ud))));
    Ok(())
}

/// `rdma_leave_multicast`.
pub fn leave(sh: &Arc<Shared>, id: *mut rdma_cm_id, a: Addr) -> Result<(), c_int> {
    let mut st = sh.st.lock();
    let a = a.canonical();
    let pos = st
        .groups
        .iter()
        .position(|g| g.addr == a)
        .ok_or(libc::EADDRNOTAVAIL)?;
    let g = st.groups.remove(pos);
    drop(st);
    // SAFETY: the live id face.
    detach(unsafe { (*id).qp }, &g);
    Ok(())
}

fn detach(qp: *mut ibv_qp, g: &Group) {
    if qp.is_null() {
        return;
    }
    let gid = ibv_gid { raw: g.gid };
    // SAFETY: the id's QP.
    unsafe { ibv_detach_mcast(qp, &gid, g.lid) };
}

/// Every group of a destroyed id.
pub fn leave_all(sh: &Arc<Shared>, qp: *mut ibv_qp) {
    let groups = std::mem::take(&mut sh.st.lock().groups);
    for g in &groups {
        detach(qp, g);
    }
}

/// `rdma_resolve_addr` to a multicast address: the source's port (or the
/// loopback's, under the address rule), resolved at once.
pub fn resolve(
    sh: &Arc<Shared>,
    id: *mut rdma_cm_id,
    src: Option<Addr>,
    dst: Addr,
) -> Result<(), c_int> {
    let src = src.map(Addr::canonical).filter(|s| !s.is_any());
    let ip = src.map_or(IpAddr::V4(std::net::Ipv4Addr::LOCALHOST), |s| s.ip);
    let local = crate::addr::resolve(ip).ok_or(libc::EADDRNOTAVAIL)?;
    let mut st = sh.st.lock();
    st.local = Some(local);
    st.phase = crate::cm::Phase::AddrResolved;
    drop(st);
    let s = src.unwrap_or(Addr {
        ip,
        port: 0,
        scope: 0,
    });
    crate::cm::connect::set_route_addrs(id, Some(s), Some(dst.canonical()));
    crate::cm::connect::set_local(id, &local);
    sh.deliver(Raw::Plain(RDMA_CM_EVENT_ADDR_RESOLVED, 0));
    Ok(())
}
