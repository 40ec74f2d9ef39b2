//! Addresses: socket addresses as the program passes them, and the rule
//! that maps an IP address to a sim device's port.
//!
//! The rule (the sim has no IP stack of its own):
//! - an address that is the IPv4 of a RoCE port's IPv4-mapped GID
//!   (`10.<device+1>.<port>.1`), or the IPv6 address equal to one of a
//!   port's GIDs (its link-local GID, or an InfiniBand port's GID), is that
//!   port;
//! - loopback (127.0.0.0/8, ::1) and the host's own addresses are the
//!   first RoCE (Ethernet) port in device order, as Soft-RoCE bound to the
//!   host's interface would be; with no RoCE port, the first InfiniBand
//!   port (standing for IPoIB on it);
//! - any other address resolves to nothing (`RDMA_CM_EVENT_ADDR_ERROR`).

use core::ffi::c_int;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

use libc::{sockaddr, sockaddr_in, sockaddr_in6, sockaddr_storage, AF_IB, AF_INET, AF_INET6};

use crate::devices;
use crate::verbs::LINK_LAYER_ETHERNET;

/// A resolved local port: where an id's QP lives and what its peer needs.
#[derive(Clone, Copy, Debug)]
pub struct Local {
    /// Index into [`devices::all`].
    pub dev: usize,
    pub port: u8,
    pub gid_index: u8,
    pub gid: [u8; 16],
    pub lid: u16,
    pub link_layer: u8,
    pub active_mtu: u32,
}

impl Local {
    pub fn device(&self) -> &'static devices::Device {
        &devices::all()[self.dev]
    }

    pub fn is_roce(&self) -> bool {
        self.link_layer == LINK_LAYER_ETHERNET
    }
}

/// A socket address of the families librdmacm takes.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub struct Addr {
    pub ip: IpAddr,
    pub port: u16,
    /// IPv6 scope and flow, kept for the program's view.
    pub scope: u32,
}

impl Addr {
    pub fn any(family: c_int) -> Addr {
        Addr {
            ip: if family == AF_INET6 {
                IpAddr::V6(Ipv6Addr::UNSPECIFIED)
            } else {
                IpAddr::V4(Ipv4Addr::UNSPECIFIED)
            },
            port: 0,
            scope: 0,
        }
    }

    /// Reads a `sockaddr` of family AF_INET or AF_INET6.
    ///
    /// # Safety
    /// `sa` is NULL or points at a socket address of its family's size.
    pub unsafe fn read(sa: *const sockaddr) -> Result<Addr, c_int> {
        if sa.is_null() {
            return Err(libc::EINVAL);
        }
        // SAFETY: the caller's address; its family says how much to read.
        match c_int::from(unsafe { (*sa).sa_family }) {
            AF_INET => {
                // SAFETY: as above.
                let s = unsafe { sa.cast::<sockaddr_in>().read_unaligned() };
                Ok(Addr {
                    ip: IpAddr::V4(Ipv4Addr::from(u32::from_be(s.sin_addr.s_addr))),
                    port: u16::from_be(s.sin_port),
                    scope: 0,
                })
            }
            AF_INET6 => {
                // SAFETY: as above.
                let s = unsafe { sa.cast::<sockaddr_in6>().read_unaligned() };
                Ok(Addr {
                    ip: IpAddr::V6(Ipv6Addr::from(s.sin6_addr.s6_addr)),
                    port: u16::from_be(s.sin6_port),
                    scope: s.sin6_scope_id,
                })
            }
            AF_IB => Err(libc::EAFNOSUPPORT),
            _ => Err(libc::EAFNOSUPPORT),
        }
    }

    /// As a `sockaddr_storage`.
    pub fn storage(&self) -> sockaddr_storage {
        // SAFETY: all-zero is a valid sockaddr_storage.
        let mut st: sockaddr_storage = unsafe { core::mem::zeroed() };
        match self.ip {
            IpAddr::V4(v4) => {
                // SAFETY: sockaddr_storage is larger than and aligned for sockaddr_in.
                let s = unsafe { &mut *(&raw mut st).cast::<sockaddr_in>() };
                s.sin_family = AF_INET as u16;
                s.sin_port = self.port.to_be();
                s.sin_addr.s_addr = u32::from(v4).to_be();
            }
            IpAddr::V6(v6) => {
                // SAFETY: as above, for sockaddr_in6.
                let s = unsafe { &mut *(&raw mut st).cast::<sockaddr_in6>() };
                s.sin6_family = AF_INET6 as u16;
                s.sin6_port = self.port.to_be();
                s.sin6_addr.s6_addr = v6.octets();
                s.sin6_scope_id = self.scope;
            }
        }
        st
    }

    pub fn bytes(&self) -> [u8; 128] {
        let st = self.storage();
        // SAFETY: sockaddr_storage is 128 plain bytes.
        unsafe { core::mem::transmute::<sockaddr_storage, [u8; 128]>(st) }
    }

    /// Reads back [`Addr::bytes`] (from a peer's message: checked).
    pub fn from_bytes(b: &[u8; 128]) -> Option<Addr> {
        // SAFETY: any 128 bytes are a sockaddr_storage; read() checks the family.
        let st: sockaddr_storage =
            unsafe { core::mem::transmute::<[u8; 128], sockaddr_storage>(*b) };
        // SAFETY: st is 128 bytes, enough for either family.
        unsafe { Addr::read((&raw const st).cast()) }.ok()
    }

    pub fn family(&self) -> c_int {
        if self.ip.is_ipv4() {
            AF_INET
        } else {
            AF_INET6
        }
    }

    pub fn is_any(&self) -> bool {
        self.ip.is_unspecified()
    }

    /// A name for the rendezvous directory: family, address, port.
    pub fn key(&self) -> String {
        let a = if self.is_any() {
            "any".to_string()
        } else {
            match self.ip {
                IpAddr::V4(v) => format!("{:08x}", u32::from(v)),
                IpAddr::V6(v) => format!("{:032x}", u128::from(v)),
            }
        };
        format!(
            "{}-{a}-{}",
            if self.ip.is_ipv4() { 4 } else { 6 },
            self.port
        )
    }

    /// The same IP with another port.
    pub fn with_port(mut self, port: u16) -> Addr {
        self.port = port;
        self
    }

    /// An IPv4-mapped IPv6 address as IPv4.
    pub fn canonical(mut self) -> Addr {
        if let IpAddr::V6(v6) = self.ip {
            if let Some(v4) = v6.to_ipv4_mapped() {
                self.ip = IpAddr::V4(v4);
            }
        }
        self
    }
}

/// The host's own addresses (`getifaddrs`).
fn host_addresses() -> Vec<IpAddr> {
    let mut out = Vec::new();
    let mut head: *mut libc::ifaddrs = core::ptr::null_mut();
    // SAFETY: getifaddrs fills `head`, freed below.
    if unsafe { libc::getifaddrs(&mut head) } != 0 {
        return out;
    }
    let mut p = head;
    while !p.is_null() {
        // SAFETY: a node of getifaddrs' list.
        let ifa = unsafe { &*p };
        if !ifa.ifa_addr.is_null() {
            // SAFETY: getifaddrs' address, sized for its family.
            if let Ok(a) = unsafe { Addr::read(ifa.ifa_addr) } {
                out.push(a.ip);
            }
        }
        p = ifa.ifa_next;
    }
    // SAFETY: the list getifaddrs made.
    unsafe { libc::freeifaddrs(head) };
    out
}

fn local_of(dev: usize, p: &devices::Port, gid_index: u8, gid: [u8; 16]) -> Local {
    Local {
        dev,
        port: p.num,
        gid_index,
        gid,
        lid: p.lid,
        link_layer: p.link_layer,
        active_mtu: p.active_mtu,
    }
}

/// The GID a connection uses on a port: on RoCE the last IPv4-mapped entry
/// (RoCE v2 where the table has both versions), else entry 0.
fn default_gid(p: &devices::Port) -> Option<(u8, [u8; 16])> {
    if p.link_layer == LINK_LAYER_ETHERNET {
        if let Some(g) = p.gids.iter().rev().find(|(_, g)| is_v4_mapped(g)) {
            return Some(*g);
        }
    }
    p.gids.first().copied()
}

fn is_v4_mapped(g: &[u8; 16]) -> bool {
    g[..10] == [0; 10] && g[10] == 0xff && g[11] == 0xff
}

/// The port `ip` names under the rule above.
pub fn resolve(ip: IpAddr) -> Option<Local> {
    let ip = match ip {
        IpAddr::V6(v6) => v6.to_ipv4_mapped().map(IpAddr::V4).unwrap_or(ip),
        v4 => v4,
    };
    let devs = devices::all();
    let wanted: [u8; 16] = match ip {
        IpAddr::V4(v4) => v4.to_ipv6_mapped().octets(),
        IpAddr::V6(v6) => v6.octets(),
    };
    for (i, d) in devs.iter().enumerate() {
        for p in &d.ports {
            // RoCE v2 entries come after v1 ones: take the last match.
            if let Some((idx, g)) = p.gids.iter().rev().find(|(_, g)| *g == wanted) {
                return Some(local_of(i, p, *idx, *g));
            }
        }
    }
    if !(ip.is_loopback() || host_addresses().contains(&ip)) {
        return None;
    }
    let first = |eth: bool| {
        devs.iter().enumerate().find_map(|(i, d)| {
            d.ports
                .iter()
                .filter(|p| (p.link_layer == LINK_LAYER_ETHERNET) == eth)
                .find_map(|p| default_gid(p).map(|(idx, g)| local_of(i, p, idx, g)))
        })
    };
    first(true).or_else(|| first(false))
}

/// 32 random bits (PSNs, source ports).
pub fn random_u32() -> u32 {
    let mut v: u32 = 0;
    // SAFETY: fills the 4 bytes of `v`.
    unsafe { libc::getrandom((&raw mut v).cast(), 4, 0) };
    v
}

/// A `sockaddr` of `storage`'s family's length.
pub fn len_of(family: c_int) -> libc::socklen_t {
    if family == AF_INET6 {
        core::mem::size_of::<sockaddr_in6>() as libc::socklen_t
    } else {
        core::mem::size_of::<sockaddr_in>() as libc::socklen_t
    }
}
