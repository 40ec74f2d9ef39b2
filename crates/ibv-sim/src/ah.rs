//! Address handles, and building address vectors from received completions.

use core::ffi::c_int;
use std::sync::atomic::Ordering;

use verbs_abi::{ibv_ah, ibv_ah_attr, ibv_context, ibv_grh, ibv_pd, ibv_wc};

use crate::context::{self, SimContext};
use crate::pd::{self, SimPd};
use crate::registry::{self, Entry, Kind, OBJECTS};

/// An address handle; `ah` first so `*mut ibv_ah` is the object's address.
#[repr(C)]
pub struct SimAh {
    pub ah: ibv_ah,
    pub attr: ibv_ah_attr,
    pd: *const SimPd,
}

/// A live AH and its context.
pub fn get(ah: *mut ibv_ah) -> Result<(&'static SimContext, &'static SimAh), c_int> {
    get_as(ah, libc::EINVAL)
}

/// As [`get`], with `unknown` the error for an object whose handle or
/// context the program changed (a destroy's `ENOENT`, as the kernel's).
pub fn get_as(
    ah: *mut ibv_ah,
    unknown: c_int,
) -> Result<(&'static SimContext, &'static SimAh), c_int> {
    let ctx = context::owner_of(ah as usize, Kind::Ah)?;
    // SAFETY: a live AH (the registry says so): its C fields are readable.
    let (named, handle) = unsafe { ((*ah).context, (*ah).handle) };
    context::known(ctx, ah as usize, named, handle).map_err(|_| unknown)?;
    // SAFETY: the registry says a live SimAh is at this address.
    Ok((ctx, unsafe { &*(ah as *const SimAh) }))
}

/// `ibv_create_ah`.
pub fn create(pd_ptr: *mut ibv_pd, attr: *const ibv_ah_attr) -> Result<*mut ibv_ah, c_int> {
    let (ctx, pd) = pd::get(pd_ptr)?;
    if attr.is_null() {
        return Err(libc::EINVAL);
    }
    // SAFETY: attr points at the caller's ibv_ah_attr (plain data).
    let a = unsafe { *attr };
    let dev = ctx.dev;
    if !ctx.dev.family.ud {
        // iWARP devices have no address handles.
        return Err(libc::EOPNOTSUPP);
    }
    if !dev.port_valid(u32::from(a.port_num)) {
        return Err(libc::EINVAL);
    }
    if dev.is_ethernet() && a.is_global == 0 {
        return Err(libc::EINVAL);
    }
    if a.is_global != 0 {
        match dev.gid(u32::from(a.port_num), u32::from(a.grh.sgid_index)) {
            Ok(Some(_)) => {}
            _ => return Err(libc::EINVAL),
        }
    }
    let mut st = ctx.lock_open()?;
    if !registry::is_live(pd_ptr as usize, Kind::Pd) {
        return Err(libc::EINVAL);
    }
    dev.take(crate::device::Limit::Ah)?;
    let raw = Box::into_raw(Box::new(SimAh {
        ah: ibv_ah {
            context: ctx.ibv(),
            pd: pd_ptr,
            handle: st.handle(),
        },
        attr: a,
        pd,
    }));
    pd.users.fetch_add(1, Ordering::Relaxed);
    st.children += 1;
    OBJECTS.insert(
        raw as usize,
        Entry {
            kind: Kind::Ah,
            ctx: ctx.addr(),
            // SAFETY: raw was just boxed here and is not shared yet.
            handle: unsafe { (*raw).ah.handle },
        },
    );
    Ok(raw.cast())
}

/// `ibv_destroy_ah`.
pub fn destroy(ah: *mut ibv_ah) -> Result<(), c_int> {
    let (ctx, a) = get_as(ah, libc::ENOENT)?;
    let mut st = ctx.lock_open()?;
    if !registry::is_live(ah as usize, Kind::Ah) {
        return Err(libc::EINVAL);
    }
    // SAFETY: the AH's PD is live (it counts this AH as a user).
    unsafe { &*a.pd }.users.fetch_sub(1, Ordering::Relaxed);
    OBJECTS.remove(ah as usize);
    ctx.dev.give(crate::device::Limit::Ah);
    st.children -= 1;
    drop(st);
    // SAFETY: allocated by Box in `create`, unregistered above.
    drop(unsafe { Box::from_raw(ah as *mut SimAh) });
    Ok(())
}

/// `ibv_init_ah_from_wc`: the address vector that answers a received message.
pub fn init_from_wc(
    ctx: *mut ibv_context,
    port: u8,
    wc: *const ibv_wc,
    grh: *const ibv_grh,
    out: *mut ibv_ah_attr,
) -> Result<(), c_int> {
    let sim = context::from_ibv(ctx)?;
    if wc.is_null() || out.is_null() {
        return Err(libc::EINVAL);
    }
    if !sim.dev.port_valid(u32::from(port)) {
        return Err(libc::EINVAL);
    }
    // SAFETY: wc points at the caller's completion; only integer fields are read.
    let (slid, sl, path_bits, flags) =
        unsafe { ((*wc).slid, (*wc).sl, (*wc).dlid_path_bits, (*wc).wc_flags) };
    // SAFETY: plain data; all-zero is valid.
    let mut a: ibv_ah_attr = unsafe { core::mem::zeroed() };
    a.port_num = port;
    a.dlid = slid;
    a.sl = sl;
    a.src_path_bits = path_bits;
    if flags & crate::abi::WC_GRH != 0 {
        if grh.is_null() {
            return Err(libc::EINVAL);
        }
        // SAFETY: grh points at the 40-byte GRH the caller received.
        let g = unsafe { *grh };
        // SAFETY: as above: the same 40 bytes, as bytes.
        let raw = unsafe { *(grh as *const [u8; 40]) };
        let flow = u32::from_be(g.version_tclass_flow);
        // RoCE v2 over IPv4 (rdma-core's get_grh_header_version): an IPv4
        // header with a valid checksum in the last 20 bytes.
        let ip4 = &raw[20..];
        let v4 =
            sim.dev.is_ethernet() && flow >> 28 != 6 && ip4[0] == 0x45 && ipv4_checksum(ip4) == 0;
        // rdma-core: the hop limit is the IPv4 TTL, 0xff for a GRH.
        let (sgid, dgid, tclass, flow_label, hop_limit) = if v4 {
            let mapped = |a: &[u8]| {
                let mut m = [0u8; 16];
                m[10] = 0xff;
                m[11] = 0xff;
                m[12..].copy_from_slice(a);
                m
            };
            (
                mapped(&ip4[12..16]),
                mapped(&ip4[16..20]),
                ip4[1],
                0,
                ip4[8],
            )
        } else {
            // SAFETY: reading the raw bytes of GID unions.
            let (s, d) = unsafe { (g.sgid.raw, g.dgid.raw) };
            (s, d, ((flow >> 20) & 0xff) as u8, flow & 0xfffff, 0xff)
        };
        let index = (0..sim.dev.gid_slots())
            .find(|&i| matches!(sim.dev.gid(u32::from(port), i), Ok(Some((raw, _))) if raw == dgid))
            .ok_or(libc::ENOENT)?;
        a.is_global = 1;
        a.grh.dgid.raw = sgid;
        a.grh.sgid_index = index as u8;
        a.grh.flow_label = flow_label;
        a.grh.hop_limit = hop_limit;
        a.grh.traffic_class = tclass;
    } else if sim.dev.is_ethernet() {
        return Err(libc::EINVAL);
    }
    // SAFETY: out points at the caller's ibv_ah_attr.
    unsafe { out.write(a) };
    Ok(())
}

/// The IPv4 header checksum of `h` (its checksum field zero).
/// The 40 bytes a UD receive over RoCE v2 with IPv4 GIDs finds before
/// its payload (Annex 17, as rxe writes them): 20 zero bytes, then the
/// IPv4 header (TOS the traffic class, TTL the hop limit, UDP, a valid
/// checksum, the GIDs' addresses); `None` unless both GIDs are
/// IPv4-mapped and the source one is RoCE v2.
pub(crate) fn ipv4_grh(
    source: Option<([u8; 16], u32)>,
    dgid: &[u8; 16],
    tclass: u8,
    hop_limit: u8,
    payload: usize,
) -> Option<[u8; 40]> {
    const MAPPED: [u8; 12] = [0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff];
    let (sgid, ty) = source?;
    if ty != crate::device::GID_TYPE_ROCE_V2 || sgid[..12] != MAPPED || dgid[..12] != MAPPED {
        return None;
    }
    let mut g = [0u8; 40];
    let h = &mut g[20..];
    h[0] = 0x45;
    h[1] = tclass;
    // IPv4 + UDP + BTH + DETH + payload + ICRC.
    let total = (20 + 8 + 12 + 8 + payload + 4).min(0xffff) as u16;
    h[2..4].copy_from_slice(&total.to_be_bytes());
    h[6] = 0x40; // don't fragment
    h[8] = hop_limit;
    h[9] = 17; // UDP
    h[12..16].copy_from_slice(&sgid[12..]);
    h[16..20].copy_from_slice(&dgid[12..]);
    let sum = ipv4_checksum(h);
    h[10..12].copy_from_slice(&sum.to_be_bytes());
    Some(g)
}

pub(crate) fn ipv4_checksum(h: &[u8]) -> u16 {
    let mut sum: u32 = h
        .chunks(2)
        .map(|c| u32::from(u16::from_be_bytes([c[0], *c.get(1).unwrap_or(&0)])))
        .sum();
    while sum > 0xffff {
        sum = (sum & 0xffff) + (sum >> 16);
    }
    !(sum as u16)
}
