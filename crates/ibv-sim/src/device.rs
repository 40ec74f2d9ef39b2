//! The simulated devices: built once from `IBV_SIM_DEVICES`, never freed
//! (rdma-core also keeps its device list for the life of the process), and
//! the attributes they report: device, port, GID table, P_Key table.

use core::cell::UnsafeCell;
use core::ffi::c_char;
use core::sync::atomic::{AtomicU16, AtomicU32, Ordering};

use once_cell::sync::OnceCell;
use verbs_abi::{
    ibv_atomic_cap, ibv_device, ibv_device_attr, ibv_device_attr_ex, ibv_mtu, ibv_node_type,
    ibv_port_attr, ibv_port_state, ibv_transport_type, IBV_LINK_LAYER_ETHERNET,
    IBV_LINK_LAYER_INFINIBAND,
};

use crate::config::{self, DeviceSpec, Family, GuidStyle};

// `ibv_gid_type` values.
crate::abi::values!(pub u32: ibv_gid_type {
    GID_TYPE_IB = IBV_GID_TYPE_IB,
    GID_TYPE_ROCE_V1 = IBV_GID_TYPE_ROCE_V1,
    GID_TYPE_ROCE_V2 = IBV_GID_TYPE_ROCE_V2,
});

/// Limits the same for every family; the rest are the profile's
/// (`crate::profile`).
pub mod limits {
    pub const NUM_COMP_VECTORS: i32 = 8;
    /// The extended QP builders' bounds (`ibv_wr_set_sge_list`, inline
    /// data): ConnectX-6's, for every family.
    pub const MAX_SGE: i32 = 30;
    pub const MAX_INLINE_DATA: u32 = 512;
    /// Device memory per allocation (`max_dm_size`), bytes.
    pub const MAX_DM_SIZE: u64 = 256 * 1024;
    /// Receive WQs, and RWQ indirection tables (of up to 1 << 8 entries).
    pub const MAX_WQ: u32 = 1 << 14;
    pub const MAX_RWQ_IND_TABLES: u32 = 64;
    pub const LOG_MAX_RWQ_IND_TABLE_SIZE: u32 = 8;
    /// Clock of completion timestamps, kHz (1 GHz: one tick per ns).
    pub const HCA_CORE_CLOCK_KHZ: u64 = 1_000_000;
}

// `ibv_device_cap_flags` bits the sim reports.
crate::abi::values!(u32: ibv_device_cap_flags {
    CAP_RESIZE_MAX_WR = IBV_DEVICE_RESIZE_MAX_WR,
    CAP_BAD_PKEY_CNTR = IBV_DEVICE_BAD_PKEY_CNTR,
    CAP_BAD_QKEY_CNTR = IBV_DEVICE_BAD_QKEY_CNTR,
    CAP_CHANGE_PHY_PORT = IBV_DEVICE_CHANGE_PHY_PORT,
    CAP_PORT_ACTIVE_EVENT = IBV_DEVICE_PORT_ACTIVE_EVENT,
    CAP_SYS_IMAGE_GUID = IBV_DEVICE_SYS_IMAGE_GUID,
    CAP_RC_RNR_NAK_GEN = IBV_DEVICE_RC_RNR_NAK_GEN,
    // Memory windows (`mw`): type 1, and type 2B (bound to a QP).
    CAP_MEM_WINDOW = IBV_DEVICE_MEM_WINDOW,
    CAP_MEM_WINDOW_TYPE_2B = IBV_DEVICE_MEM_WINDOW_TYPE_2B,
    // XRC domains, SRQs and QPs (`xrcd`, `xrc`).
    CAP_XRC = IBV_DEVICE_XRC,
});
// `IBV_DEVICE_SRQ_RESIZE`.
crate::abi::values!(pub u32: ibv_device_cap_flags {
    CAP_SRQ_RESIZE = IBV_DEVICE_SRQ_RESIZE,
    CAP_N_NOTIFY_CQ = IBV_DEVICE_N_NOTIFY_CQ,
});

// On-demand paging capabilities (`objects::odp`).
crate::abi::values!(u64: ibv_odp_general_caps {
    ODP_SUPPORT = IBV_ODP_SUPPORT,
});
crate::abi::values!(u32: ibv_odp_transport_cap_bits {
    ODP_SEND = IBV_ODP_SUPPORT_SEND,
    ODP_RECV = IBV_ODP_SUPPORT_RECV,
    ODP_WRITE = IBV_ODP_SUPPORT_WRITE,
    ODP_READ = IBV_ODP_SUPPORT_READ,
    ODP_ATOMIC = IBV_ODP_SUPPORT_ATOMIC,
    ODP_SRQ_RECV = IBV_ODP_SUPPORT_SRQ_RECV,
});

/// The `ibv_device` handed to programs; its address is stable for the process.
pub struct DeviceCell(UnsafeCell<ibv_device>);

// SAFETY: the sim writes the ibv_device only while building the table,
// before any pointer to it escapes; afterwards it is only read (programs
// treat it as read-only, as with rdma-core).
unsafe impl Sync for DeviceCell {}
// SAFETY: as above; the cell holds plain data.
unsafe impl Send for DeviceCell {}

/// One simulated device.
pub struct SimDevice {
    /// Position in the list; `ibv_get_device_index` and `uverbsN`.
    pub index: usize,
    pub name: String,
    pub family: &'static Family,
    /// Node GUID, host byte order.
    pub guid: u64,
    /// MAC address of the Ethernet ports (Ethernet link layer only).
    pub mac: [u8; 6],
    /// LID of port 1 (InfiniBand); port p has `first_lid + p - 1`.
    pub first_lid: u16,
    /// LIDs the fabric assigned to the ports (0: not attached yet).
    lids: [AtomicU16; 4],
    cell: Box<DeviceCell>,
    /// Live objects of each [`Limit`] kind on this device (this process's).
    counts: [AtomicU32; Limit::COUNT],
}

/// The object kinds whose number the device bounds (`max_pd`, `max_cq`,
/// `max_mr`, `max_mw`, `max_ah`, `max_qp`, `max_srq` of its attributes).
#[derive(Clone, Copy, Debug)]
pub enum Limit {
    Pd,
    Cq,
    Mr,
    Mw,
    Ah,
    Qp,
    Srq,
}

impl Limit {
    pub const COUNT: usize = 7;
}

/// The fabric's machine-wide counts (`fabric::limits`), handed down at the
/// first attach: the kernel counts a device's objects across processes.
pub trait SharedLimits: Sync {
    /// Counts one more of `l` on `dev`; false when the device's total
    /// would pass `max` (nothing counted then). True when not attached.
    fn take(&self, dev: &SimDevice, l: Limit, max: u32) -> bool;
    fn give(&self, dev: &SimDevice, l: Limit);
}

static SHARED: std::sync::OnceLock<&'static dyn SharedLimits> = std::sync::OnceLock::new();

/// Installs the fabric's counts (once; later calls change nothing).
pub fn set_shared_limits(s: &'static dyn SharedLimits) {
    let _ = SHARED.set(s);
}

impl SimDevice {
    /// The `ibv_device` pointer programs see.
    pub fn as_ptr(&self) -> *mut ibv_device {
        self.cell.0.get()
    }

    pub fn phys_ports(&self) -> u8 {
        self.family.phys_ports
    }

    pub fn port_valid(&self, port: u32) -> bool {
        port >= 1 && port <= u32::from(self.phys_ports())
    }

    pub fn is_ethernet(&self) -> bool {
        self.family.link_layer == IBV_LINK_LAYER_ETHERNET
    }

    pub fn is_iwarp(&self) -> bool {
        self.family.transport == config::TRANSPORT_IWARP
    }

    /// `/sys/class/infiniband/NAME`.
    pub fn ibdev_path(&self) -> String {
        format!("/sys/class/infiniband/{}", self.name)
    }

    /// `/sys/class/infiniband_verbs/uverbsN`.
    pub fn dev_path(&self) -> String {
        format!("/sys/class/infiniband_verbs/uverbs{}", self.index)
    }

    /// The real device this one stands for.
    pub fn profile(&self) -> &'static crate::profile::Profile {
        self.family.profile
    }

    /// Completion vectors: the profile's (rxe: one per CPU, as
    /// `num_possible_cpus()`), else `limits::NUM_COMP_VECTORS`.
    pub fn num_comp_vectors(&self) -> i32 {
        if self.profile().comp_vector_per_cpu {
            // SAFETY: plain libc call.
            let n = unsafe { libc::sysconf(libc::_SC_NPROCESSORS_CONF) };
            return i32::try_from(n).unwrap_or(1).max(1);
        }
        limits::NUM_COMP_VECTORS
    }

    /// Counts one more object of kind `l`, or refuses it (the profile's
    /// `limit_errno`) when the device already holds what it advertises:
    /// this process's objects, and with the fabric attached every
    /// process's on this device (`SharedLimits`), as the kernel counts.
    pub fn take(&self, l: Limit) -> Result<(), core::ffi::c_int> {
        let pr = self.profile();
        let max = match l {
            Limit::Pd => pr.max_pd,
            Limit::Cq => pr.max_cq,
            Limit::Mr => pr.max_mr,
            // Offered and advertised as 0 (mlx4): not counted.
            Limit::Mw if pr.max_mw == 0 && pr.mw => i32::MAX,
            Limit::Mw => pr.max_mw,
            Limit::Ah if self.family.ud => pr.max_ah,
            Limit::Ah => 0,
            Limit::Qp => pr.max_qp,
            Limit::Srq => pr.max_srq,
        };
        let max = max.max(0) as u32;
        let c = &self.counts[l as usize];
        if c.fetch_add(1, Ordering::Relaxed) >= max {
            c.fetch_sub(1, Ordering::Relaxed);
            return Err(pr.limit_errno);
        }
        if let Some(s) = SHARED.get() {
            if !s.take(self, l, max) {
                c.fetch_sub(1, Ordering::Relaxed);
                return Err(pr.limit_errno);
            }
        }
        Ok(())
    }

    /// An object of kind `l` is gone.
    pub fn give(&self, l: Limit) {
        self.counts[l as usize].fetch_sub(1, Ordering::Relaxed);
        if let Some(s) = SHARED.get() {
            s.give(self, l);
        }
    }

    /// This process's live objects of each `Limit` kind, in kind order.
    pub fn local_counts(&self) -> [u32; Limit::COUNT] {
        core::array::from_fn(|k| self.counts[k].load(Ordering::Relaxed))
    }

    pub fn device_cap_flags(&self) -> u32 {
        if let Some(f) = self.profile().cap_flags {
            return f;
        }
        let mut f = CAP_RESIZE_MAX_WR
            | CAP_BAD_PKEY_CNTR
            | CAP_BAD_QKEY_CNTR
            | CAP_CHANGE_PHY_PORT
            | CAP_PORT_ACTIVE_EVENT
            | CAP_SYS_IMAGE_GUID
            | CAP_RC_RNR_NAK_GEN
            | CAP_N_NOTIFY_CQ
            | CAP_MEM_WINDOW
            | CAP_MEM_WINDOW_TYPE_2B
            | CAP_XRC;
        if self.family.srq_resize {
            f |= CAP_SRQ_RESIZE;
        }
        f
    }

    /// `ibv_query_device`.
    pub fn device_attr(&self) -> ibv_device_attr {
        let pr = self.profile();
        // SAFETY: ibv_device_attr is plain data (integers, arrays and a
        // C-like enum whose 0 is IBV_ATOMIC_NONE); all-zero is valid.
        let mut a: ibv_device_attr = unsafe { core::mem::zeroed() };
        copy_cstr(&mut a.fw_ver, pr.fw_ver.unwrap_or(self.family.fw_ver));
        a.node_guid = self.guid.to_be();
        a.sys_image_guid = self.guid.to_be();
        a.max_mr_size = u64::MAX;
        a.page_size_cap = pr.page_size_cap;
        a.vendor_id = self.family.vendor_id;
        a.vendor_part_id = self.family.vendor_part_id;
        a.hw_ver = self.family.hw_ver;
        a.max_qp = pr.max_qp;
        a.max_qp_wr = pr.max_qp_wr;
        a.device_cap_flags = self.device_cap_flags();
        a.max_sge = pr.max_sge;
        a.max_sge_rd = pr.max_sge_rd;
        a.max_cq = pr.max_cq;
        a.max_cqe = pr.max_cqe;
        a.max_mr = pr.max_mr;
        a.max_pd = pr.max_pd;
        a.max_qp_rd_atom = pr.max_qp_rd_atom;
        a.max_res_rd_atom = pr.max_res_rd_atom;
        a.max_qp_init_rd_atom = pr.max_qp_init_rd_atom;
        a.atomic_cap = if self.family.atomics {
            ibv_atomic_cap::IBV_ATOMIC_HCA.into()
        } else {
            ibv_atomic_cap::IBV_ATOMIC_NONE.into()
        };
        a.max_mw = pr.max_mw;
        a.max_mcast_grp = if self.family.ud { pr.max_mcast_grp } else { 0 };
        a.max_mcast_qp_attach = if self.family.ud {
            pr.max_mcast_qp_attach
        } else {
            0
        };
        a.max_total_mcast_qp_attach = match pr.max_total_mcast_qp_attach {
            Some(n) if self.family.ud => n,
            _ => a.max_mcast_grp.saturating_mul(a.max_mcast_qp_attach),
        };
        a.max_ah = if self.family.ud { pr.max_ah } else { 0 };
        a.max_srq = pr.max_srq;
        a.max_srq_wr = pr.max_srq_wr;
        a.max_srq_sge = pr.max_srq_sge;
        a.max_pkeys = pr.max_pkeys.unwrap_or(self.pkey_tbl_len());
        a.local_ca_ack_delay = pr.local_ca_ack_delay;
        a.phys_port_cnt = self.phys_ports();
        a
    }

    /// `ibv_query_device_ex`.
    pub fn device_attr_ex(&self) -> ibv_device_attr_ex {
        let pr = self.profile();
        // SAFETY: plain data; all-zero is valid (see device_attr).
        let mut a: ibv_device_attr_ex = unsafe { core::mem::zeroed() };
        a.orig_attr = self.device_attr();
        a.device_cap_flags_ex = u64::from(self.device_cap_flags());
        a.phys_port_cnt_ex = u32::from(self.phys_ports());
        if pr.timestamps {
            a.completion_timestamp_mask = (1u64 << 63) - 1;
            a.hca_core_clock = limits::HCA_CORE_CLOCK_KHZ;
        }
        if pr.device_memory {
            a.max_dm_size = limits::MAX_DM_SIZE;
        }
        if pr.odp {
            // On-demand paging on every transport (`objects::odp`), not implicit.
            let odp = ODP_SEND | ODP_RECV | ODP_WRITE | ODP_READ | ODP_ATOMIC | ODP_SRQ_RECV;
            a.odp_caps.general_caps = ODP_SUPPORT;
            a.odp_caps.per_transport_caps.rc_odp_caps = odp;
            a.odp_caps.per_transport_caps.uc_odp_caps =
                ODP_SEND | ODP_RECV | ODP_WRITE | ODP_SRQ_RECV;
            a.odp_caps.per_transport_caps.ud_odp_caps = ODP_SEND | ODP_RECV | ODP_SRQ_RECV;
            a.xrc_odp_caps = odp;
        }
        if pr.wq {
            // WQs and indirection tables exist as objects; no QP type does RSS.
            a.max_wq_type_rq = limits::MAX_WQ;
            a.rss_caps.max_rwq_indirection_tables = limits::MAX_RWQ_IND_TABLES;
            a.rss_caps.max_rwq_indirection_table_size = 1 << limits::LOG_MAX_RWQ_IND_TABLE_SIZE;
        }
        a
    }

    pub fn pkey_tbl_len(&self) -> u16 {
        if self.family.link_layer == IBV_LINK_LAYER_INFINIBAND {
            128
        } else {
            1
        }
    }

    pub fn gid_tbl_len(&self) -> i32 {
        if self.family.link_layer == IBV_LINK_LAYER_INFINIBAND {
            8
        } else if self.is_iwarp() {
            1
        } else {
            // RoCE: room for the link-local and IPv4 GIDs (v1 and v2).
            self.profile().gid_tbl_len
        }
    }

    /// The GID entries past which every one is empty (the table's
    /// searches stop there).
    pub fn gid_slots(&self) -> u32 {
        if !self.is_ethernet() || self.is_iwarp() {
            1
        } else if self.profile().roce_v2_only {
            2
        } else {
            4
        }
    }

    /// LID of a port (0 on Ethernet): the one the fabric assigned, which
    /// is the natural one unless another port of the fabric holds it.
    pub fn lid(&self, port: u32) -> u16 {
        if self.is_ethernet() {
            return 0;
        }
        match self.lids.get(port as usize - 1) {
            Some(l) if l.load(Ordering::Relaxed) != 0 => l.load(Ordering::Relaxed),
            _ => self.natural_lid(port),
        }
    }

    /// The LID a port asks the fabric for: by position in the device list.
    pub fn natural_lid(&self, port: u32) -> u16 {
        self.first_lid + (port as u16) - 1
    }

    /// Records the LID the fabric assigned to `port`.
    pub fn set_lid(&self, port: u32, lid: u16) {
        if let Some(l) = self.lids.get(port as usize - 1) {
            l.store(lid, Ordering::Relaxed);
        }
    }

    /// `ibv_query_port`, or None for a port that does not exist.
    pub fn port_attr(&self, port: u32) -> Option<ibv_port_attr> {
        if !self.port_valid(port) {
            return None;
        }
        let mut p: ibv_port_attr = zeroed_with(|p: *mut ibv_port_attr| {
            // SAFETY: p points at the zeroed value being built; these are
            // its enum fields, for which zero is not a valid value.
            unsafe {
                core::ptr::addr_of_mut!((*p).state).write(ibv_port_state::IBV_PORT_ACTIVE.into());
                core::ptr::addr_of_mut!((*p).max_mtu).write(ibv_mtu::IBV_MTU_4096.into());
                core::ptr::addr_of_mut!((*p).active_mtu).write(ibv_mtu::IBV_MTU_4096.into());
            }
        });
        p.gid_tbl_len = self.gid_tbl_len();
        p.max_msg_sz = self.profile().max_msg_sz;
        p.pkey_tbl_len = self.pkey_tbl_len();
        p.phys_state = 5; // LinkUp
        p.link_layer = self.family.link_layer;
        if self.is_ethernet() {
            // 1500-byte Ethernet MTU.
            p.active_mtu = ibv_mtu::IBV_MTU_1024.into();
            p.port_cap_flags = self.profile().roce_port_cap_flags;
            p.flags = self.profile().roce_port_flags;
            p.active_width = self.profile().active_width;
            p.active_speed = self.profile().active_speed;
            p.max_vl_num = 1;
        } else {
            p.active_mtu = ibv_mtu::IBV_MTU_4096.into();
            p.port_cap_flags = 0x2659_e848;
            p.lid = self.lid(port);
            p.sm_lid = 1;
            p.lmc = 0;
            p.max_vl_num = 4; // VL0-7
            p.subnet_timeout = 18;
            p.active_width = 2; // 4X
            p.active_speed = 32; // EDR
        }
        Some(p)
    }

    /// Port GUID, host byte order.
    pub fn port_guid(&self, port: u32) -> u64 {
        self.guid.wrapping_add(u64::from(port) - 1)
    }

    /// The IPv4 address of the Ethernet device behind `port` (10.<idx>.<port>.1).
    pub fn ipv4(&self, port: u32) -> [u8; 4] {
        [10, (self.index as u8).wrapping_add(1), port as u8, 1]
    }

    /// GID table entry: `Err(EINVAL)` for a bad port or index, `Ok(None)`
    /// for an empty entry, else the GID and its `ibv_gid_type`.
    pub fn gid(&self, port: u32, index: u32) -> Result<Option<([u8; 16], u32)>, i32> {
        if !self.port_valid(port) || index >= self.gid_tbl_len() as u32 {
            return Err(libc::EINVAL);
        }
        let mut g = [0u8; 16];
        if self.is_iwarp() {
            // iWARP devices report the MAC, zero padded.
            g[..6].copy_from_slice(&self.mac);
            return Ok(Some((g, GID_TYPE_IB)));
        }
        if !self.is_ethernet() {
            if index != 0 {
                return Ok(None);
            }
            g[0] = 0xfe;
            g[1] = 0x80;
            g[8..].copy_from_slice(&self.port_guid(port).to_be_bytes());
            return Ok(Some((g, GID_TYPE_IB)));
        }
        if self.profile().roce_v2_only {
            // RoCE v2 only: 0 link-local, 1 IPv4-mapped.
            match index {
                0 => {
                    g[0] = 0xfe;
                    g[1] = 0x80;
                    g[8..].copy_from_slice(&eui64(&self.mac));
                }
                1 => {
                    g[10] = 0xff;
                    g[11] = 0xff;
                    g[12..].copy_from_slice(&self.ipv4(port));
                }
                _ => return Ok(None),
            }
            return Ok(Some((g, GID_TYPE_ROCE_V2)));
        }
        // RoCE: 0/1 link-local (v1/v2), 2/3 IPv4-mapped (v1/v2).
        let ty = if index.is_multiple_of(2) {
            GID_TYPE_ROCE_V1
        } else {
            GID_TYPE_ROCE_V2
        };
        match index {
            0 | 1 => {
                g[0] = 0xfe;
                g[1] = 0x80;
                g[8..].copy_from_slice(&eui64(&self.mac));
            }
            2 | 3 => {
                g[10] = 0xff;
                g[11] = 0xff;
                g[12..].copy_from_slice(&self.ipv4(port));
            }
            _ => return Ok(None),
        }
        Ok(Some((g, ty)))
    }

    /// P_Key table entry, host byte order; None for a bad port or index.
    pub fn pkey(&self, port: u32, index: u32) -> Option<u16> {
        if !self.port_valid(port) || index >= u32::from(self.pkey_tbl_len()) {
            return None;
        }
        Some(if index == 0 { 0xffff } else { 0 })
    }
}

/// A zero-filled `T` whose fields for which zero is invalid (C enums
/// without a 0 member) `init` sets.
pub fn zeroed_with<T>(init: impl FnOnce(*mut T)) -> T {
    let mut m = core::mem::MaybeUninit::<T>::zeroed();
    init(m.as_mut_ptr());
    // SAFETY: every field is zero (valid for integers, arrays, pointers,
    // Option<fn>) or was set by `init`, as the callers ensure.
    unsafe { m.assume_init() }
}

/// The modified EUI-64 of a MAC address (U/L bit flipped, ff:fe inserted).
pub fn eui64(mac: &[u8; 6]) -> [u8; 8] {
    [
        mac[0] ^ 2,
        mac[1],
        mac[2],
        0xff,
        0xfe,
        mac[3],
        mac[4],
        mac[5],
    ]
}

/// Copies `s` into a C char array, NUL-terminated, truncating.
pub fn copy_cstr(dst: &mut [c_char], s: &str) {
    let n = s.len().min(dst.len().saturating_sub(1));
    for (d, b) in dst.iter_mut().zip(s.bytes().take(n)) {
        *d = b as c_char;
    }
    if let Some(d) = dst.get_mut(n) {
        *d = 0;
    }
}

fn node_type(v: i32) -> ibv_node_type {
    match v {
        config::NODE_RNIC => ibv_node_type::IBV_NODE_RNIC,
        _ => ibv_node_type::IBV_NODE_CA,
    }
}

fn transport_type(v: i32) -> ibv_transport_type {
    match v {
        config::TRANSPORT_IWARP => ibv_transport_type::IBV_TRANSPORT_IWARP,
        _ => ibv_transport_type::IBV_TRANSPORT_IB,
    }
}

fn build(specs: Vec<DeviceSpec>) -> Vec<SimDevice> {
    let mut next_lid: u16 = 1;
    specs
        .into_iter()
        .enumerate()
        .map(|(index, spec)| {
            let fam = spec.family;
            let mac = [
                (fam.oui >> 16) as u8,
                (fam.oui >> 8) as u8,
                fam.oui as u8,
                0x12,
                0x34,
                0x56u8.wrapping_add(index as u8),
            ];
            let default_guid = match fam.guid_style {
                GuidStyle::Oui => {
                    (u64::from(fam.oui) << 40) | (0x03 << 32) | (0x0012_3456 + 0x100 * index as u64)
                }
                GuidStyle::Mac => u64::from_be_bytes(eui64(&mac)),
            };
            let guid = spec.guid.unwrap_or(default_guid);
            let mut d: ibv_device = zeroed_with(|d: *mut ibv_device| {
                // SAFETY: d points at the zeroed value being built; these are
                // its enum fields, for which zero is not a valid value.
                unsafe {
                    core::ptr::addr_of_mut!((*d).node_type).write(node_type(fam.node_type).into());
                    core::ptr::addr_of_mut!((*d).transport_type)
                        .write(transport_type(fam.transport).into());
                }
            });
            copy_cstr(&mut d.name, &spec.name);
            copy_cstr(&mut d.dev_name, &format!("uverbs{index}"));
            let dev = SimDevice {
                index,
                name: spec.name,
                family: fam,
                guid,
                mac,
                first_lid: next_lid,
                lids: Default::default(),
                cell: Box::new(DeviceCell(UnsafeCell::new(d))),
                counts: Default::default(),
            };
            // SAFETY: the cell was just created and no pointer to it has escaped.
            let raw = unsafe { &mut *dev.cell.0.get() };
            copy_cstr(&mut raw.dev_path, &dev.dev_path());
            copy_cstr(&mut raw.ibdev_path, &dev.ibdev_path());
            if fam.link_layer == IBV_LINK_LAYER_INFINIBAND {
                next_lid += u16::from(fam.phys_ports);
            }
            dev
        })
        .collect()
}

static DEVICES: OnceCell<Result<Vec<SimDevice>, String>> = OnceCell::new();

/// `IBV_SIM_DEVICES` was malformed (the message went to stderr once).
#[derive(Debug, Clone, Copy)]
pub struct BadConfig;

/// The device table, built on first use; `Err` if `IBV_SIM_DEVICES` is malformed.
pub fn devices() -> Result<&'static [SimDevice], BadConfig> {
    let r = DEVICES.get_or_init(|| match config::devices_from_env() {
        Ok(specs) => Ok(build(specs)),
        Err(msg) => {
            eprintln!(
                "libibverbs (ibv-sim): invalid {}: {msg}; no devices are listed",
                config::ENV_DEVICES
            );
            Err(msg)
        }
    });
    match r {
        Ok(v) => Ok(v.as_slice()),
        Err(_) => Err(BadConfig),
    }
}

/// The simulated device behind an `ibv_device` pointer, if it is one.
pub fn lookup(dev: *const ibv_device) -> Option<&'static SimDevice> {
    if dev.is_null() {
        return None;
    }
    devices()
        .ok()?
        .iter()
        .find(|d| core::ptr::eq(d.as_ptr(), dev))
}
