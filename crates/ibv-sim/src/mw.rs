//! Memory windows: `ibv_alloc_mw` / `ibv_dealloc_mw`, binding (type 1
//! through `ibv_bind_mw`, type 2 through a posted `IBV_WR_BIND_MW` or
//! `ibv_wr_bind_mw`), invalidation (`IBV_WR_LOCAL_INV`, and a received
//! `IBV_WR_SEND_WITH_INV`), and the responder's check of an rkey that names
//! a window.
//!
//! A window's rkey is an index of 24 bits and a tag of 8 (as mlx5's): a
//! type 1 bind moves the tag on (`ibv_inc_rkey`, written to `mw->rkey` as
//! the provider does); a type 2 bind carries the new rkey, whose index must
//! be the window's. Window indexes start at `0x80_0000`, above the MRs'
//! (`mr::KEYS` counts from `0x100`), so an rkey names one or the other.
//!
//! The bind itself runs when the work request executes, with the checks
//! the HCA makes (`IBV_WC_MW_BIND_ERR`): the MR allows `IBV_ACCESS_MW_BIND`
//! and holds the range, both are of the QP's PD, remote write / atomic need
//! the MR's local write, a type 2 window is free and is bound to the QP
//! that bound it (type 2B). A READ / WRITE / atomic through the window's
//! rkey must then fall inside the window, with its access, while the MR
//! is still registered; otherwise `IBV_WC_REM_ACCESS_ERR`.

use core::ffi::c_int;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::Arc;

use once_cell::sync::Lazy;
use parking_lot::Mutex;
use verbs_abi::ibv_mw;

use crate::abi::{
    WC_BIND_MW, WC_LOCAL_INV, WC_LOC_PROT_ERR, WC_MW_BIND_ERR, WC_REM_ACCESS_ERR, WC_SUCCESS,
};
use crate::mr::{self, MrShared, LOCAL_WRITE, REMOTE_ATOMIC, REMOTE_WRITE};
use crate::pd::SimPd;
use crate::qp::QpShared;
use crate::registry::{self, Kind, Sharded};

/// `ibv_mw_type`.
pub const TYPE_1: c_int = 1;
pub const TYPE_2: c_int = 2;
/// `IBV_ACCESS_MW_BIND`: an MR windows may be bound to.
pub const MW_BIND: u32 = 1 << 4;

/// What a window is bound to.
struct Binding {
    key: u32,
    mr: Arc<MrShared>,
    addr: u64,
    len: u64,
    access: u32,
    /// Type 2: the QP that bound it (only it may be accessed through it).
    qpn: u32,
}

/// The part of a window the data path shares.
pub struct MwShared {
    index: u32,
    ty: c_int,
    /// The protection domain (`SimPd::base`).
    pd: usize,
    bound: Mutex<Option<Binding>>,
}

/// A memory window; `mw` first so `*mut ibv_mw` is its address.
#[repr(C)]
pub struct SimMw {
    pub mw: ibv_mw,
    pub shared: Arc<MwShared>,
    /// The PD it was allocated on (a parent domain, perhaps).
    pub pd: *const SimPd,
}

/// Windows by rkey index.
static WINDOWS: Lazy<Sharded<u32, Arc<MwShared>>> = Lazy::new(Sharded::new);
static NEXT_INDEX: AtomicU32 = AtomicU32::new(0);

/// rdma-core's `ibv_inc_rkey`: the next tag, same index.
pub fn inc_rkey(rkey: u32) -> u32 {
    (rkey & 0xffff_ff00) | (rkey.wrapping_add(1) & 0xff)
}

/// A new window of type `ty` in protection domain `pd` (`SimPd::base`),
/// findable by its rkey's index from now on; its first rkey.
pub fn open(ty: c_int, pd: usize) -> (Arc<MwShared>, u32) {
    let index = 0x80_0000 | (NEXT_INDEX.fetch_add(1, Ordering::Relaxed) & 0x7f_ffff);
    let w = Arc::new(MwShared {
        index,
        ty,
        pd,
        bound: Mutex::new(None),
    });
    WINDOWS.insert(index, w.clone());
    (w, (index << 8) | (index.wrapping_mul(37) & 0xff))
}

/// The window is gone: its rkeys name nothing any more.
pub fn close(w: &MwShared) {
    WINDOWS.remove(w.index);
}

impl MwShared {
    pub fn ty(&self) -> c_int {
        self.ty
    }
}

/// A bind request as posted (`ibv_send_wr.bind_mw` or `ibv_bind_mw`).
#[derive(Clone, Copy)]
pub struct BindReq {
    pub mw: usize,
    pub mr: usize,
    pub addr: u64,
    pub len: u64,
    pub access: u32,
    /// The API it came through: `ibv_bind_mw` binds type 1 windows only,
    /// `IBV_WR_BIND_MW` type 2 only.
    pub ty: c_int,
}

/// Executes a bind or a local invalidation posted on `s`: the completion's
/// opcode and status.
pub fn execute_local(s: &QpShared, bind_req: Option<&BindReq>, rkey: u32) -> (c_int, c_int) {
    match bind_req {
        Some(b) => (WC_BIND_MW, bind(s, b, rkey)),
        None => {
            let st = if invalidate(s.pd, rkey) {
                WC_SUCCESS
            } else {
                WC_LOC_PROT_ERR
            };
            (WC_LOCAL_INV, st)
        }
    }
}

/// The HCA's bind: `IBV_WC_MW_BIND_ERR` unless every check passes.
fn bind(s: &QpShared, b: &BindReq, key: u32) -> c_int {
    let ok = || -> Option<()> {
        if !registry::is_live(b.mw, Kind::Mw) {
            return None;
        }
        // SAFETY: a live window (checked just above).
        let m = unsafe { &*(b.mw as *const SimMw) };
        let w = &m.shared;
        // rxe: a type 2 bind takes only the key (the low 8 bits) of the
        // rkey it is given; the window keeps its index.
        let key = if w.ty == TYPE_2 && s.dev.profile().mw_key_byte_only {
            (w.index << 8) | (key & 0xff)
        } else {
            key
        };
        if w.ty != b.ty || w.pd != s.pd || key >> 8 != w.index {
            return None;
        }
        let mut bound = w.bound.lock();
        if b.mr == 0 {
            // Type 1 only: a zero-length bind unbinds.
            if w.ty != TYPE_1 || b.len != 0 {
                return None;
            }
            *bound = None;
            return Some(());
        }
        if w.ty == TYPE_2 && bound.is_some() {
            return None;
        }
        if !registry::is_live(b.mr, Kind::Mr) {
            return None;
        }
        // SAFETY: a live MR (checked just above).
        let r = unsafe { &*(b.mr as *const mr::SimMr) };
        let info = *r.shared.info.lock();
        if info.pd != w.pd || info.access & MW_BIND == 0 {
            return None;
        }
        if b.access & (REMOTE_WRITE | REMOTE_ATOMIC) != 0 && info.access & LOCAL_WRITE == 0 {
            return None;
        }
        info.host(b.addr, b.len)?;
        *bound = Some(Binding {
            key,
            mr: r.shared.clone(),
            addr: b.addr,
            len: b.len,
            access: b.access,
            qpn: s.qp_num,
        });
        Some(())
    };
    if ok().is_some() {
        WC_SUCCESS
    } else {
        WC_MW_BIND_ERR
    }
}

/// Invalidates the type 2 window of protection domain `pd` bound with
/// `rkey`; whether there was one.
pub(crate) fn invalidate(pd: usize, rkey: u32) -> bool {
    let Some(w) = WINDOWS.get(rkey >> 8) else {
        return false;
    };
    let mut bound = w.bound.lock();
    match &*bound {
        Some(b) if w.ty == TYPE_2 && w.pd == pd && b.key == rkey => {
            *bound = None;
            true
        }
        _ => false,
    }
}

/// Whether `rkey` names a window rather than an MR.
pub(crate) fn is_window_key(rkey: u32) -> bool {
    rkey >> 31 == 1
}

/// Host address of `[addr, addr + len)` through the window named by
/// `rkey`, as the responder `dst` checks it.
pub(crate) fn remote(
    dst: &QpShared,
    pd: usize,
    rkey: u32,
    addr: u64,
    len: u64,
    need: u32,
) -> Result<mr::Pinned, c_int> {
    let w = WINDOWS.get(rkey >> 8).ok_or(WC_REM_ACCESS_ERR)?;
    let bound = w.bound.lock();
    let b = bound.as_ref().ok_or(WC_REM_ACCESS_ERR)?;
    if w.pd != pd || b.key != rkey || b.access & need == 0 {
        return Err(WC_REM_ACCESS_ERR);
    }
    if w.ty == TYPE_2 && b.qpn != dst.qp_num {
        return Err(WC_REM_ACCESS_ERR);
    }
    let end = addr.checked_add(len).ok_or(WC_REM_ACCESS_ERR)?;
    if addr < b.addr || end > b.addr + b.len {
        return Err(WC_REM_ACCESS_ERR);
    }
    // The MR must still be registered (a deregistered MR's windows are dead).
    match mr::by_key(b.mr.key) {
        Some(m) if Arc::ptr_eq(&m, &b.mr) => {}
        _ => return Err(WC_REM_ACCESS_ERR),
    }
    b.mr.pin(addr, len, |_| true).ok_or(WC_REM_ACCESS_ERR)
}
