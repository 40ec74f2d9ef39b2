//! XRC domains: `ibv_open_xrcd` / `ibv_close_xrcd`, with the kernel's
//! rules for the file that names a shared domain (`fd` -1: a new private
//! domain; otherwise the domain of the file's inode, created with
//! `O_CREAT`, refused with `O_EXCL` when it exists, `ENOENT` when it does
//! not and `O_CREAT` is missing). A domain in use by XRC SRQs or QPs is
//! not closed (`EBUSY`).

// The table entries' safety contract is the C API contract of the inline
// verb that calls them.
#![allow(clippy::missing_safety_doc)]

use core::ffi::c_int;
use std::collections::HashMap;
use std::sync::atomic::{AtomicUsize, Ordering};

use parking_lot::Mutex;
use verbs_abi::{ibv_context, ibv_xrcd, ibv_xrcd_init_attr, verbs_context};

use crate::child::Users;
use crate::registry::Kind;
use crate::{child, context, guard};

/// `ibv_xrcd_init_attr_mask`.
const ATTR_FD: u32 = 1;
const ATTR_OFLAGS: u32 = 1 << 1;
const ATTR_RESERVED: u32 = 1 << 2;

/// An XRC domain; `xrcd` first so `*mut ibv_xrcd` is its address.
#[repr(C)]
pub struct SimXrcd {
    pub xrcd: ibv_xrcd,
    /// The domain's identity: XRC SRQs and receive QPs opened through any
    /// `ibv_xrcd` of the same inode share it.
    pub domain: usize,
    inode: Option<Inode>,
    /// XRC SRQs and QPs using it.
    pub users: Users,
}

/// A file's (device, inode).
type Inode = (u64, u64);

/// Domains named by files, by inode: identity and open count.
static BY_INODE: Mutex<Option<HashMap<Inode, (usize, usize)>>> = Mutex::new(None);
static NEXT_DOMAIN: AtomicUsize = AtomicUsize::new(1);

pub(super) fn install(vctx: &mut verbs_context) {
    vctx.open_xrcd = Some(sim_open_xrcd);
    vctx.close_xrcd = Some(sim_close_xrcd);
}

/// A live XRC domain and its context.
pub fn get(x: *mut ibv_xrcd) -> Result<(&'static context::SimContext, &'static SimXrcd), c_int> {
    child::get(x.cast::<SimXrcd>(), Kind::Xrcd)
}

/// `verbs_context.open_xrcd` (the inline `ibv_open_xrcd`).
pub unsafe extern "C" fn sim_open_xrcd(
    ctx: *mut ibv_context,
    attr: *mut ibv_xrcd_init_attr,
) -> *mut ibv_xrcd {
    guard::ptr(|| {
        let sim = context::from_ibv(ctx)?;
        crate::profile::offered(sim.dev.profile().xrc)?;
        if attr.is_null() {
            return Err(libc::EINVAL);
        }
        // SAFETY: attr points at the caller's struct (plain data).
        let a = unsafe { attr.read() };
        if a.comp_mask >= ATTR_RESERVED {
            return Err(libc::EOPNOTSUPP);
        }
        if a.comp_mask & ATTR_FD == 0 || a.comp_mask & ATTR_OFLAGS == 0 {
            return Err(libc::EINVAL);
        }
        let inode = if a.fd == -1 {
            None
        } else {
            // SAFETY: fstat into a local.
            let mut stat: libc::stat = unsafe { core::mem::zeroed() };
            // SAFETY: as above; a bad fd fails with EBADF.
            if unsafe { libc::fstat(a.fd, &mut stat) } != 0 {
                return Err(libc::EBADF);
            }
            Some((stat.st_dev, stat.st_ino))
        };
        let domain = attach(inode, a.oflags)?;
        let r = child::create(sim, Kind::Xrcd, |_| {
            Ok(SimXrcd {
                xrcd: ibv_xrcd { context: sim.ibv() },
                domain,
                inode,
                users: Users::default(),
            })
        });
        if r.is_err() {
            detach(inode);
        }
        Ok(r?.cast())
    })
}

/// The domain of an inode (or a new private one), counting the open.
fn attach(inode: Option<Inode>, oflags: c_int) -> Result<usize, c_int> {
    let fresh = || NEXT_DOMAIN.fetch_add(1, Ordering::Relaxed);
    let Some(key) = inode else {
        return Ok(fresh());
    };
    let mut g = BY_INODE.lock();
    let map = g.get_or_insert_with(HashMap::new);
    match map.get_mut(&key) {
        Some(_) if oflags & libc::O_EXCL != 0 => Err(libc::EEXIST),
        Some((d, n)) => {
            *n += 1;
            Ok(*d)
        }
        None if oflags & libc::O_CREAT == 0 => Err(libc::ENOENT),
        None => {
            let d = fresh();
            map.insert(key, (d, 1));
            Ok(d)
        }
    }
}

fn detach(inode: Option<Inode>) {
    let Some(key) = inode else { return };
    let mut g = BY_INODE.lock();
    if let Some(map) = g.as_mut() {
        if let Some((_, n)) = map.get_mut(&key) {
            *n -= 1;
            if *n == 0 {
                map.remove(&key);
            }
        }
        if map.is_empty() {
            *g = None;
        }
    }
}

/// `verbs_context.close_xrcd` (the inline `ibv_close_xrcd`): `EBUSY`
/// while XRC SRQs or QPs use the domain.
pub unsafe extern "C" fn sim_close_xrcd(x: *mut ibv_xrcd) -> c_int {
    guard::errval(|| {
        child::destroy(x.cast::<SimXrcd>(), Kind::Xrcd, |d| {
            d.users.idle()?;
            detach(d.inode);
            Ok(())
        })
    })
}
