//! Device list, device identity, contexts and the query verbs.

// The `.symver` directives that give this module's exports their versions.
#[cfg(not(test))]
core::arch::global_asm!(include_str!(concat!(env!("OUT_DIR"), "/symver_device.s")));

use core::ffi::{c_char, c_int, c_uint};

use verbs_abi::{
    _compat_ibv_port_attr, ibv_context, ibv_device, ibv_device_attr, ibv_gid, ibv_gid_entry,
};

use crate::device::{self, lookup};
use crate::guard::{self, set_errno};
use crate::{context, datapath};

/// Size of rdma-core's old `struct _compat_ibv_port_attr` (no `port_cap_flags2`).
const COMPAT_PORT_ATTR_LEN: usize = 48;

#[no_mangle]
pub unsafe extern "C" fn ibv_get_device_list(num: *mut c_int) -> *mut *mut ibv_device {
    guard::call(core::ptr::null_mut(), || {
        if !num.is_null() {
            // SAFETY: num points at the caller's int.
            unsafe { *num = 0 };
        }
        crate::fork::init_from_env();
        let (devs, err) = match device::devices() {
            Ok(d) => (d, false),
            Err(device::BadConfig) => (&[][..], true),
        };
        // SAFETY: plain allocation, freed by ibv_free_device_list with free().
        let list = unsafe { libc::calloc(devs.len() + 1, core::mem::size_of::<*mut ibv_device>()) }
            .cast::<*mut ibv_device>();
        if list.is_null() {
            set_errno(libc::ENOMEM);
            return core::ptr::null_mut();
        }
        for (i, d) in devs.iter().enumerate() {
            // SAFETY: list has devs.len() + 1 slots.
            unsafe { *list.add(i) = d.as_ptr() };
        }
        if !num.is_null() {
            // SAFETY: as above.
            unsafe { *num = devs.len() as c_int };
        }
        if err {
            set_errno(libc::EINVAL);
        }
        list
    })
}

#[no_mangle]
pub unsafe extern "C" fn ibv_free_device_list(list: *mut *mut ibv_device) {
    guard::void(|| {
        // SAFETY: the list came from ibv_get_device_list (calloc).
        unsafe { libc::free(list.cast()) }
    })
}

#[no_mangle]
pub unsafe extern "C" fn ibv_get_device_name(dev: *mut ibv_device) -> *const c_char {
    guard::call(core::ptr::null(), || match lookup(dev) {
        // SAFETY: a device of the table; its name is NUL-terminated.
        Some(d) => unsafe { (*d.as_ptr()).name.as_ptr() },
        None => {
            set_errno(libc::EINVAL);
            core::ptr::null()
        }
    })
}

#[no_mangle]
pub unsafe extern "C" fn ibv_get_device_guid(dev: *mut ibv_device) -> u64 {
    guard::call(0, || match lookup(dev) {
        Some(d) => d.guid.to_be(),
        None => {
            set_errno(libc::EINVAL);
            0
        }
    })
}

#[no_mangle]
pub unsafe extern "C" fn ibv_get_device_index(dev: *mut ibv_device) -> c_int {
    guard::call(-1, || match lookup(dev) {
        Some(d) => d.index as c_int,
        None => {
            set_errno(libc::EINVAL);
            -1
        }
    })
}

#[no_mangle]
pub unsafe extern "C" fn ibv_open_device(dev: *mut ibv_device) -> *mut ibv_context {
    guard::ptr(|| context::open(dev, super::ops::install, &datapath::remote::RECEIVER))
}

#[no_mangle]
pub unsafe extern "C" fn ibv_close_device(ctx: *mut ibv_context) -> c_int {
    guard::minus_one(|| context::close(ctx))
}

#[no_mangle]
pub unsafe extern "C" fn ibv_query_device(
    ctx: *mut ibv_context,
    attr: *mut ibv_device_attr,
) -> c_int {
    guard::errval(|| context::query_device(ctx, attr))
}

#[no_mangle]
pub unsafe extern "C" fn ibv_query_port(
    ctx: *mut ibv_context,
    port: u8,
    attr: *mut _compat_ibv_port_attr,
) -> c_int {
    guard::errval(|| context::query_port(ctx, port, attr.cast(), COMPAT_PORT_ATTR_LEN))
}

#[no_mangle]
pub unsafe extern "C" fn ibv_query_gid(
    ctx: *mut ibv_context,
    port: u8,
    index: c_int,
    gid: *mut ibv_gid,
) -> c_int {
    guard::minus_one(|| {
        if gid.is_null() || index < 0 {
            return Err(libc::EINVAL);
        }
        match context::gid_entry(ctx, u32::from(port), index as u32) {
            // SAFETY: gid points at the caller's ibv_gid.
            Ok(e) => unsafe { gid.write(e.gid) },
            // SAFETY: as above; an empty entry reads as the zero GID.
            Err(libc::ENODATA) => unsafe { gid.write(ibv_gid { raw: [0; 16] }) },
            Err(e) => return Err(e),
        }
        Ok(())
    })
}

#[no_mangle]
pub unsafe extern "C" fn _ibv_query_gid_ex(
    ctx: *mut ibv_context,
    port: u32,
    index: u32,
    entry: *mut ibv_gid_entry,
    flags: u32,
    entry_size: usize,
) -> c_int {
    guard::errval(|| {
        if entry.is_null() || flags != 0 || entry_size < core::mem::size_of::<ibv_gid_entry>() {
            return Err(libc::EINVAL);
        }
        let e = context::gid_entry(ctx, port, index)?;
        // SAFETY: entry points at the caller's ibv_gid_entry.
        unsafe { entry.write(e) };
        Ok(())
    })
}

#[no_mangle]
pub unsafe extern "C" fn _ibv_query_gid_table(
    ctx: *mut ibv_context,
    entries: *mut ibv_gid_entry,
    max_entries: usize,
    flags: u32,
    entry_size: usize,
) -> isize {
    guard::call(-(libc::EIO as isize), || {
        if flags != 0 || entry_size < core::mem::size_of::<ibv_gid_entry>() {
            return -(libc::EINVAL as isize);
        }
        let v = match context::gid_table(ctx) {
            Ok(v) => v,
            Err(e) => return -(e as isize),
        };
        if v.len() > max_entries || (entries.is_null() && !v.is_empty()) {
            return -(libc::EINVAL as isize);
        }
        for (i, e) in v.iter().enumerate() {
            // SAFETY: the caller provides max_entries entries of entry_size bytes.
            unsafe {
                entries
                    .cast::<u8>()
                    .add(i * entry_size)
                    .cast::<ibv_gid_entry>()
                    .write_unaligned(*e)
            };
        }
        v.len() as isize
    })
}

#[no_mangle]
pub unsafe extern "C" fn ibv_query_gid_type(
    ctx: *mut ibv_context,
    port: u8,
    index: c_uint,
    ty: *mut c_int,
) -> c_int {
    guard::minus_one(|| {
        if ty.is_null() {
            return Err(libc::EINVAL);
        }
        // ibv_gid_type_sysfs: 0 IB / RoCE v1, 1 RoCE v2.
        let v = match context::gid_entry(ctx, u32::from(port), index) {
            Ok(e) => c_int::from(e.gid_type == device::GID_TYPE_ROCE_V2),
            Err(libc::ENODATA) => 0,
            Err(e) => return Err(e),
        };
        // SAFETY: ty points at the caller's enum.
        unsafe { ty.write(v) };
        Ok(())
    })
}

#[no_mangle]
pub unsafe extern "C" fn ibv_query_pkey(
    ctx: *mut ibv_context,
    port: u8,
    index: c_int,
    pkey: *mut u16,
) -> c_int {
    guard::minus_one(|| {
        let sim = context::from_ibv(ctx)?;
        if pkey.is_null() {
            return Err(libc::EINVAL);
        }
        let v = u32::try_from(index)
            .ok()
            .and_then(|i| sim.dev.pkey(u32::from(port), i))
            .ok_or(libc::ENOENT)?;
        // SAFETY: pkey points at the caller's __be16.
        unsafe { pkey.write(v.to_be()) };
        Ok(())
    })
}

#[no_mangle]
pub unsafe extern "C" fn ibv_get_pkey_index(ctx: *mut ibv_context, port: u8, pkey: u16) -> c_int {
    guard::call(-1, || {
        let sim = match context::from_ibv(ctx) {
            Ok(s) => s,
            Err(e) => {
                set_errno(e);
                return -1;
            }
        };
        for i in 0.. {
            match sim.dev.pkey(u32::from(port), i) {
                Some(v) if v.to_be() == pkey => return i as c_int,
                Some(_) => {}
                None => break,
            }
        }
        set_errno(libc::ENOENT);
        -1
    })
}
