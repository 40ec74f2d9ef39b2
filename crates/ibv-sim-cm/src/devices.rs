//! The devices librdmacm works on: every verbs device, opened once on first
//! need and kept open for the life of the process with its ports' facts,
//! and the device list they came from (as rdma-core's librdmacm keeps its
//! list and a context per device), and a PD per
//! device made on first use for ids whose program gives none. These are
//! librdmacm's own objects, not the program's (the shim's default
//! suppressions name them).

use core::ffi::c_int;

use once_cell::sync::OnceCell;
use parking_lot::Mutex;
use verbs_abi::{ibv_context, ibv_gid, ibv_pd, ibv_port_attr};

use crate::verbs::*;

pub struct Port {
    pub num: u8,
    pub link_layer: u8,
    pub lid: u16,
    /// `ibv_mtu` value.
    pub active_mtu: u32,
    /// Non-empty GID table entries: (index, GID).
    pub gids: Vec<(u8, [u8; 16])>,
}

pub struct Device {
    /// The open context (`*mut ibv_context`).
    pub ctx: usize,
    pub ports: Vec<Port>,
    pd: Mutex<usize>,
}

static DEVICES: OnceCell<Vec<Device>> = OnceCell::new();

/// Every device, opened on first call. Devices that fail to open are left out.
pub fn all() -> &'static [Device] {
    DEVICES.get_or_init(open_all)
}

fn open_all() -> Vec<Device> {
    let mut n: c_int = 0;
    // SAFETY: public verbs call; the list is freed below.
    let list = unsafe { ibv_get_device_list(&mut n) };
    if list.is_null() {
        return Vec::new();
    }
    let mut out = Vec::new();
    for i in 0..n.max(0) as usize {
        // SAFETY: i < n entries of the list.
        let dev = unsafe { *list.add(i) };
        // SAFETY: a device of the list.
        let ctx = unsafe { ibv_open_device(dev) };
        if ctx.is_null() {
            continue;
        }
        out.push(Device {
            ctx: ctx as usize,
            ports: ports(ctx),
            pd: Mutex::new(0),
        });
    }
    // The list stays too, as librdmacm keeps its own for the process's life.
    out
}

fn ports(ctx: *mut ibv_context) -> Vec<Port> {
    let mut attr = core::mem::MaybeUninit::<verbs_abi::ibv_device_attr>::zeroed();
    // SAFETY: an open context, a writable attribute block.
    if unsafe { ibv_query_device(ctx, attr.as_mut_ptr()) } != 0 {
        return Vec::new();
    }
    // SAFETY: a u8 field of the block the query filled.
    let nports = unsafe { (&raw const (*attr.as_ptr()).phys_port_cnt).read() };
    let mut out = Vec::new();
    for num in 1..=nports {
        let mut pa = core::mem::MaybeUninit::<ibv_port_attr>::zeroed();
        // SAFETY: as above.
        if unsafe { ibv_query_port(ctx, num, pa.as_mut_ptr()) } != 0 {
            continue;
        }
        let p = pa.as_ptr();
        // SAFETY: fields of the filled block, enum-typed ones read as the integers C stored.
        let (active_mtu, gid_tbl_len, link_layer, lid) = unsafe {
            (
                (&raw const (*p).active_mtu).cast::<u32>().read(),
                (&raw const (*p).gid_tbl_len).read(),
                (&raw const (*p).link_layer).read(),
                (&raw const (*p).lid).read(),
            )
        };
        let mut gids = Vec::new();
        for index in 0..gid_tbl_len.clamp(0, 256) {
            // SAFETY: all-zero is a valid GID.
            let mut g: ibv_gid = unsafe { core::mem::zeroed() };
            // SAFETY: as above.
            if unsafe { ibv_query_gid(ctx, num, index, &mut g) } != 0 {
                continue;
            }
            // SAFETY: the raw view of a GID.
            let raw = unsafe { g.raw };
            if raw != [0u8; 16] {
                gids.push((index as u8, raw));
            }
        }
        out.push(Port {
            num,
            link_layer,
            lid,
            active_mtu,
            gids,
        });
    }
    out
}

impl Device {
    pub fn context(&self) -> *mut ibv_context {
        self.ctx as *mut ibv_context
    }

    /// The device's own PD, made on first use.
    pub fn pd(&self) -> Result<*mut ibv_pd, c_int> {
        let mut pd = self.pd.lock();
        if *pd == 0 {
            // SAFETY: our open context.
            let p = unsafe { ibv_alloc_pd(self.context()) };
            if p.is_null() {
                return Err(crate::guard::errno());
            }
            *pd = p as usize;
        }
        Ok(*pd as *mut ibv_pd)
    }
}

/// The device of an open context this library opened.
pub fn by_context(ctx: *mut ibv_context) -> Option<(usize, &'static Device)> {
    all()
        .iter()
        .enumerate()
        .find(|(_, d)| d.ctx == ctx as usize)
}
