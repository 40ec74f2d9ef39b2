//! The device API: list, name, GUID, index, open, close.
//!
//! Results and errno are the real library's. What the shim adds: NULL and
//! unknown pointers, a double free of a list and a double close of a
//! context are refused with a warning (rdma-core would crash on them), and
//! each call is logged at debug.

use std::ffi::{c_char, c_int};

use verbs_abi::{__be64, ibv_context, ibv_device};

use super::{refuse, Call};
use crate::guard::{Errno, MinusOne, Refused};
use crate::real::slots::{
    CloseDevice, FreeDeviceList, GetDeviceGuid, GetDeviceIndex, GetDeviceList, GetDeviceName,
    OpenDevice,
};
use crate::registry::{self, devices};

/// Checks a device argument: NULL and pointers the real library never
/// handed out are refused with EINVAL instead of crashing in rdma-core.
#[inline(always)]
fn device_ok(func: &str, device: *mut ibv_device) -> Result<(), Refused> {
    if !device.is_null() && devices::is_known(device) {
        return Ok(());
    }
    Err(refuse_device(func, device))
}

#[cold]
#[inline(never)]
fn refuse_device(func: &str, device: *mut ibv_device) -> Refused {
    if device.is_null() {
        refuse(format_args!("{func}(device=NULL)"), libc::EINVAL)
    } else {
        refuse(
            format_args!("{func}(device={device:p}): not a device from ibv_get_device_list"),
            libc::EINVAL,
        )
    }
}

/// Returns a NULL-terminated array of the RDMA devices on this machine and
/// stores their number in `*num_devices` when `num_devices` is not NULL.
/// Free it with `ibv_free_device_list()`. On failure returns NULL with errno
/// set (ENOSYS: no RDMA support in the kernel, or no real libibverbs).
#[no_mangle]
pub unsafe extern "C" fn ibv_get_device_list(num_devices: *mut c_int) -> *mut *mut ibv_device {
    let caller = crate::caller!();
    GetDeviceList::export(|| {
        let real = GetDeviceList::get()?;
        let call = Call::begin();
        // num_devices may be NULL, as rdma-core allows.
        // SAFETY: the program's argument (may be NULL, as rdma-core allows).
        let list = unsafe { real.call(num_devices) };
        let errno = Errno::save();
        if !list.is_null() {
            let mut n = 0;
            let mut all_fast = true;
            // SAFETY: the real library returns a NULL-terminated array.
            while !unsafe { *list.add(n) }.is_null() {
                // SAFETY: n is before the terminating NULL.
                let dev = unsafe { *list.add(n) };
                // In the fast index: remembered already (the usual case
                // after the first list: one hash and one load).
                all_fast &= devices::is_known_fast(dev);
                n += 1;
            }
            // SAFETY: the first n entries of the list are devices.
            let devs = unsafe { std::slice::from_raw_parts(list, n) };
            if !all_fast {
                remember_all(devs);
            }
            if call.logging() {
                // SAFETY: devices of the list the real library just returned.
                unsafe { cache_guids(devs) };
            }
            // Out of memory: counted as untracked (see `devices`).
            devices::list_returned(devices::LiveList {
                list: list as usize,
                count: n,
                tid: super::tid(),
                caller,
                time_ms: registry::objects::now_ms(),
                inherited: false,
            });
            if let Some(h) = crate::real::handle() {
                // SAFETY: the real library's handle is never closed.
                unsafe { crate::forward::copy_objects(h) };
            }
            if call.logging() {
                errno.restore();
                // SAFETY: the list the real library just returned, of `n` devices.
                unsafe { log_list(&call, num_devices, list, n) };
            }
        } else {
            errno.restore();
            // SAFETY: the list the real library just returned, of `n` devices.
            unsafe { log_list(&call, num_devices, list, 0) };
        }
        errno.restore();
        Ok(list)
    })
}

/// Remembers the devices of a list and lets them take the getters' fast
/// path (out of line: after the first list, its devices are known).
#[cold]
#[inline(never)]
fn remember_all(devs: &[*mut ibv_device]) {
    let fast = resolve_getters();
    for &dev in devs {
        devices::remember(dev);
        if fast {
            devices::allow_fast(dev);
        }
    }
}

/// The log shows each device's GUID: read once per device (the real
/// getter reads sysfs; the caller restores errno).
///
/// # Safety
/// `devs` are devices of the list the real library just returned.
#[cold]
#[inline(never)]
unsafe fn cache_guids(devs: &[*mut ibv_device]) {
    let Ok(guid) = GetDeviceGuid::unhooked() else {
        return;
    };
    for &dev in devs {
        if devices::cached_guid(dev).is_none() {
            // SAFETY: a device of the list just returned.
            devices::cache_guid(dev, unsafe { guid.call(dev) });
        }
    }
}

/// The list's record: `num_devices`, the first devices (a longer list is
/// shown cut, marked `...`), then its length.
///
/// # Safety
/// `list` is the list the real library just returned, of `n` devices (NULL with none).
#[cold]
#[inline(never)]
unsafe fn log_list(call: &Call, num_devices: *mut c_int, list: *mut *mut ibv_device, n: usize) {
    let mut d = [std::ptr::null_mut(); 6];
    for (i, slot) in d.iter_mut().enumerate().take(n) {
        // SAFETY: i < n: a device of the list just returned.
        *slot = unsafe { *list.add(i) };
    }
    let [d0, d1, d2, d3, d4, d5] = d;
    // SAFETY: the devices of the list the real library just returned.
    unsafe {
        GetDeviceList::done(
            call,
            num_devices,
            d0,
            d1,
            d2,
            d3,
            d4,
            d5,
            n,
            list,
            list.is_null(),
        )
    };
}

/// Frees an array returned by `ibv_get_device_list()`. Devices that were
/// opened stay valid. NULL, a list freed already or a pointer that is not
/// such a list is refused with a warning (rdma-core would crash).
#[no_mangle]
pub unsafe extern "C" fn ibv_free_device_list(list: *mut *mut ibv_device) {
    FreeDeviceList::export(|| {
        if list.is_null() {
            return Err(refuse(
                format_args!("ibv_free_device_list(list=NULL)"),
                libc::EINVAL,
            ));
        }
        let real = FreeDeviceList::get()?;
        let errno = Errno::save();
        // While some list went untracked for want of memory, an unknown
        // list may be one of those: forwarded, not refused.
        if !devices::list_freed(list as usize) && !devices::untracked_lists() {
            return Err(refuse(
                format_args!("ibv_free_device_list(list={list:p}): double free, or not a list from ibv_get_device_list"),
                libc::EINVAL,
            ));
        }
        errno.restore();
        let call = Call::begin();
        // SAFETY: a live list from the real ibv_get_device_list, freed once.
        unsafe { real.call(list) };
        // SAFETY: the arguments and the result of the real call.
        unsafe { FreeDeviceList::done(&call, list, (), false) };
        Ok(())
    })
}

/// The fast path of the device getters: the gate shut (`gate`: logging
/// below debug, first use noted) and a device in the fast index (one hash,
/// one compare), which holds only devices of a list whose getters were all
/// resolved (see `resolve_getters`). Anything else takes the export's full
/// path, which refuses, resolves and logs.
#[inline(always)]
fn fast(device: *mut ibv_device) -> bool {
    !crate::gate::any() && devices::is_known_fast(device)
}

/// Resolves the real getters, so that the devices of a list can take
/// their fast path (`devices::allow_fast`); false when one is missing.
fn resolve_getters() -> bool {
    GetDeviceName::unhooked().is_ok()
        && GetDeviceGuid::unhooked().is_ok()
        && GetDeviceIndex::unhooked().is_ok()
}

/// Returns the name of `device` (e.g. `mlx5_0`), unique within this machine,
/// or NULL with errno EINVAL for NULL or an unknown device.
#[no_mangle]
pub unsafe extern "C" fn ibv_get_device_name(device: *mut ibv_device) -> *const c_char {
    // The real getter reads a field of the device and changes nothing, so
    // it runs as a tail call, outside any boundary: there is nothing for a
    // panic boundary to catch, and nothing half done should a signal
    // handler call exit() in it.
    if fast(device) {
        // SAFETY: resolved before the device entered the fast index, a
        // device the real library handed out.
        return unsafe { GetDeviceName::resolved().call(device) };
    }
    get_device_name(device)
}

#[cold]
#[inline(never)]
fn get_device_name(device: *mut ibv_device) -> *const c_char {
    GetDeviceName::export(|| {
        device_ok(GetDeviceName::NAME, device)?;
        let real = GetDeviceName::get()?;
        let call = Call::begin();
        // SAFETY: a device the real library handed out (`device_ok`).
        let name = unsafe { real.call(device) };
        // SAFETY: the arguments and the result of the real call.
        unsafe { GetDeviceName::done(&call, device, name, name.is_null()) };
        Ok(name)
    })
}

/// Returns the GUID of `device` in network byte order (its top 24 bits are
/// the vendor's IEEE OUI). On failure returns 0 with errno set (EMFILE: too
/// many open files; EINVAL: NULL or unknown device).
#[no_mangle]
pub unsafe extern "C" fn ibv_get_device_guid(device: *mut ibv_device) -> __be64 {
    // The real call reads sysfs (it allocates and opens a file): marked as
    // inside a boundary, for an exit() from a signal handler in it.
    if fast(device) {
        // SAFETY: resolved before the device entered the fast index.
        let real = unsafe { GetDeviceGuid::resolved() };
        crate::thread::enter_boundary();
        // SAFETY: a device the real library handed out (the fast index's).
        let guid = unsafe { real.call(device) };
        crate::thread::leave_boundary();
        return guid;
    }
    get_device_guid(device)
}

#[cold]
#[inline(never)]
fn get_device_guid(device: *mut ibv_device) -> __be64 {
    GetDeviceGuid::export(|| {
        device_ok(GetDeviceGuid::NAME, device)?;
        let real = GetDeviceGuid::get()?;
        let call = Call::begin();
        // SAFETY: a device the real library handed out (`device_ok`).
        let guid = unsafe { real.call(device) };
        if call.logging() {
            let errno = Errno::save();
            if guid != 0 {
                devices::cache_guid(device, guid);
            }
            errno.restore();
            // SAFETY: the arguments and the result of the real call.
            unsafe { GetDeviceGuid::done(&call, device, guid, guid == 0) };
        }
        Ok(guid)
    })
}

/// Returns the kernel index of `device`, or -1 when it is not known (the
/// real library only learns it over netlink). -1 with errno EINVAL for NULL
/// or an unknown device.
#[no_mangle]
pub unsafe extern "C" fn ibv_get_device_index(device: *mut ibv_device) -> c_int {
    // A field read, as `ibv_get_device_name`: a tail call.
    if fast(device) {
        // SAFETY: resolved before the device entered the fast index, a
        // device the real library handed out.
        return unsafe { GetDeviceIndex::resolved().call(device) };
    }
    get_device_index(device)
}

#[cold]
#[inline(never)]
fn get_device_index(device: *mut ibv_device) -> c_int {
    GetDeviceIndex::export(|| {
        device_ok(GetDeviceIndex::NAME, device)?;
        let real = GetDeviceIndex::get()?;
        let call = Call::begin();
        // SAFETY: a device the real library handed out (`device_ok`).
        let index = unsafe { real.call(device) };
        // SAFETY: the arguments and the result of the real call.
        unsafe { GetDeviceIndex::done(&call, device, index, false) };
        Ok(MinusOne(index))
    })
}

/// Opens a context on `device` for creating and querying resources. Free it
/// with `ibv_close_device()`. Returns NULL with errno set on failure
/// (EINVAL for NULL or an unknown device).
#[no_mangle]
pub unsafe extern "C" fn ibv_open_device(device: *mut ibv_device) -> *mut ibv_context {
    let caller = crate::caller!();
    OpenDevice::export(|| {
        device_ok(OpenDevice::NAME, device)?;
        let real = OpenDevice::get()?;
        let call = Call::begin();
        // Inside: the real open goes through verbs_open_device, which the
        // shim also exports (see `exports::private`); this export records it.
        // SAFETY: a device the real library handed out (`device_ok`).
        let ctx = super::inside(|| unsafe { real.call(device) });
        let errno = Errno::save();
        if !ctx.is_null() {
            registry::contexts::opened(ctx as usize, device as usize, super::tid(), caller);
            // SAFETY: the context the real open just returned.
            unsafe { super::interpose::install(ctx) };
        }
        errno.restore();
        // SAFETY: the arguments and the result of the real call.
        unsafe { OpenDevice::done(&call, device, ctx, ctx.is_null()) };
        Ok(ctx)
    })
}

/// Closes a context. Returns 0 on success, -1 with errno set on failure.
/// It does not free what was created on the context: the shim reports those
/// orphans (see docs/leak-audit.md). NULL, a context closed already or
/// one the shim never saw opened is refused with -1 and errno EINVAL.
#[no_mangle]
pub unsafe extern "C" fn ibv_close_device(context: *mut ibv_context) -> c_int {
    let caller = crate::caller!();
    CloseDevice::export(|| {
        if context.is_null() {
            return Err(refuse(
                format_args!("ibv_close_device(context=NULL)"),
                libc::EINVAL,
            ));
        }
        let errno = Errno::save();
        match registry::contexts::get(context as usize) {
            Some(c) if c.open => {}
            Some(_) => {
                return Err(refuse(
                    format_args!("ibv_close_device(context={context:p}): double close"),
                    libc::EINVAL,
                ));
            }
            // A context opened where the shim does not see it is adopted
            // (see `exports::context_ok`); garbage is refused.
            None => super::context_ok(CloseDevice::NAME, context, caller)?,
        }
        let real = CloseDevice::get()?;
        // SAFETY: an open context; its device field is valid until close.
        let device = unsafe { (*context).device };
        // The leak reports name the device; it may be freed by the close.
        crate::report::context_closing(context as usize);
        // Marked closed, with its objects, before the real close (see
        // `registry::begin_close`): a close racing with this one is refused
        // instead of forwarded twice.
        if registry::begin_close(context as usize) != registry::Closing::Proceed {
            return Err(refuse(
                format_args!("ibv_close_device(context={context:p}): double close"),
                libc::EINVAL,
            ));
        }
        errno.restore();
        let call = Call::begin();
        // SAFETY: an open context from the real library, closed once.
        let rc = unsafe { real.call(context) };
        let errno = Errno::save();
        if rc == 0 {
            crate::report::context_closed(context as usize);
        } else {
            registry::abort_close(context as usize);
        }
        errno.restore();
        // SAFETY: the arguments and the result of the real call.
        unsafe { CloseDevice::done(&call, context, device, rc, rc != 0) };
        if rc == 0 {
            // The close's own line too: a program that leaves by `_exit`
            // right after the close would lose it (nothing else is queued).
            crate::log_queue::flush();
        }
        Ok(MinusOne(rc))
    })
}

/// The shim's version string. Also how the shim recognises a copy of itself
/// when looking for the real library.
#[no_mangle]
pub extern "C" fn ibvshim_version() -> *const c_char {
    c"ibv-shim 0.1.0".as_ptr()
}
