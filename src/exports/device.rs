//! The device API: list, name, GUID, index, open, close.
//!
//! Results and errno are the real library's. What the shim adds: NULL and
//! unknown pointers, a double free of a list and a double close of a
//! context are refused with a warning (rdma-core would crash on them), and
//! each call is logged at debug.

use std::ffi::{c_char, c_int};
use std::ptr;

use verbs_abi::{__be64, ibv_context, ibv_device};

use super::{refuse, Call, Dev, Ptr, Str};
use crate::guard::{boundary, set_errno, Errno};
use crate::real::RealFn;
use crate::registry::{self, devices};

type GetDeviceList = unsafe extern "C" fn(*mut c_int) -> *mut *mut ibv_device;
type FreeDeviceList = unsafe extern "C" fn(*mut *mut ibv_device);
type GetDeviceName = unsafe extern "C" fn(*mut ibv_device) -> *const c_char;
type GetDeviceGuid = unsafe extern "C" fn(*mut ibv_device) -> __be64;
type GetDeviceIndex = unsafe extern "C" fn(*mut ibv_device) -> c_int;
type OpenDevice = unsafe extern "C" fn(*mut ibv_device) -> *mut ibv_context;
type CloseDevice = unsafe extern "C" fn(*mut ibv_context) -> c_int;

static GET_DEVICE_LIST: RealFn<GetDeviceList> = RealFn::new(c"ibv_get_device_list");
static FREE_DEVICE_LIST: RealFn<FreeDeviceList> = RealFn::new(c"ibv_free_device_list");
static GET_DEVICE_NAME: RealFn<GetDeviceName> = RealFn::new(c"ibv_get_device_name");
static GET_DEVICE_GUID: RealFn<GetDeviceGuid> = RealFn::new(c"ibv_get_device_guid");
static GET_DEVICE_INDEX: RealFn<GetDeviceIndex> = RealFn::new(c"ibv_get_device_index");
static OPEN_DEVICE: RealFn<OpenDevice> = RealFn::new(c"ibv_open_device");
static CLOSE_DEVICE: RealFn<CloseDevice> = RealFn::new(c"ibv_close_device");

/// The devices of a list, for the log.
struct DevList<'a>(&'a [*mut ibv_device]);

impl std::fmt::Display for DevList<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        for (i, d) in self.0.iter().enumerate() {
            write!(f, "{}{}", if i > 0 { ", " } else { "" }, Dev(*d))?;
        }
        Ok(())
    }
}

/// Checks a device argument: NULL and pointers the real library never
/// handed out are refused with EINVAL instead of crashing in rdma-core.
#[inline(always)]
fn bad_device(func: &str, device: *mut ibv_device) -> bool {
    if !device.is_null() && devices::is_known(device) {
        return false;
    }
    refuse_device(func, device);
    true
}

#[cold]
#[inline(never)]
fn refuse_device(func: &str, device: *mut ibv_device) {
    if device.is_null() {
        refuse(format_args!("{func}(device=NULL)"), libc::EINVAL);
    } else {
        refuse(
            format_args!("{func}(device={device:p}): not a device from ibv_get_device_list"),
            libc::EINVAL,
        );
    }
}

/// Returns a NULL-terminated array of the RDMA devices on this machine and
/// stores their number in `*num_devices` when `num_devices` is not NULL.
/// Free it with `ibv_free_device_list()`. On failure returns NULL with errno
/// set (ENOSYS: no RDMA support in the kernel, or no real libibverbs).
#[no_mangle]
pub unsafe extern "C" fn ibv_get_device_list(num_devices: *mut c_int) -> *mut *mut ibv_device {
    let caller = crate::caller!();
    boundary("ibv_get_device_list", ptr::null_mut(), || {
        let real = match GET_DEVICE_LIST.get() {
            Ok(f) => f,
            Err(why) => {
                set_errno(why.errno());
                return ptr::null_mut();
            }
        };
        let call = Call::begin();
        // SAFETY: forwarded unchanged; num_devices may be NULL, as rdma-core allows.
        let list = unsafe { real(num_devices) };
        let errno = Errno::save();
        if !list.is_null() {
            let mut n = 0;
            // SAFETY: the real library returns a NULL-terminated array.
            while !unsafe { *list.add(n) }.is_null() {
                // SAFETY: n is before the terminating NULL.
                let dev = unsafe { *list.add(n) };
                devices::remember(dev);
                if call.logging() && devices::cached_guid(dev).is_none() {
                    if let Ok(guid) = GET_DEVICE_GUID.get() {
                        // SAFETY: dev is a device of the list just returned.
                        devices::cache_guid(dev, unsafe { guid(dev) });
                    }
                }
                n += 1;
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
                // SAFETY: the first n entries of the list are devices.
                let devs = unsafe { std::slice::from_raw_parts(list, n) };
                errno.restore();
                call.end(
                    format_args!("ibv_get_device_list(num_devices={})", Ptr(num_devices)),
                    format_args!("{} [{n} devices: {}]", Ptr(list), DevList(devs)),
                    false,
                );
            }
        } else {
            call.end(
                format_args!("ibv_get_device_list(num_devices={})", Ptr(num_devices)),
                format_args!("NULL"),
                true,
            );
        }
        errno.restore();
        list
    })
}

/// Frees an array returned by `ibv_get_device_list()`. Devices that were
/// opened stay valid. NULL, a list freed already or a pointer that is not
/// such a list is refused with a warning (rdma-core would crash).
#[no_mangle]
pub unsafe extern "C" fn ibv_free_device_list(list: *mut *mut ibv_device) {
    boundary("ibv_free_device_list", (), || {
        if list.is_null() {
            return refuse(
                format_args!("ibv_free_device_list(list=NULL)"),
                libc::EINVAL,
            );
        }
        let real = match FREE_DEVICE_LIST.get() {
            Ok(f) => f,
            Err(why) => return set_errno(why.errno()),
        };
        let errno = Errno::save();
        // While some list went untracked for want of memory, an unknown
        // list may be one of those: forwarded, not refused.
        if !devices::list_freed(list as usize) && !devices::untracked_lists() {
            refuse(
                format_args!("ibv_free_device_list(list={list:p}): double free, or not a list from ibv_get_device_list"),
                libc::EINVAL,
            );
            return;
        }
        errno.restore();
        let call = Call::begin();
        // SAFETY: a live list from the real ibv_get_device_list, freed once.
        unsafe { real(list) };
        call.end(
            format_args!("ibv_free_device_list(list={})", Ptr(list)),
            format_args!("void"),
            false,
        );
    })
}

/// Returns the name of `device` (e.g. `mlx5_0`), unique within this machine,
/// or NULL with errno EINVAL for NULL or an unknown device.
#[no_mangle]
pub unsafe extern "C" fn ibv_get_device_name(device: *mut ibv_device) -> *const c_char {
    boundary("ibv_get_device_name", ptr::null(), || {
        if bad_device("ibv_get_device_name", device) {
            return ptr::null();
        }
        let real = match GET_DEVICE_NAME.get() {
            Ok(f) => f,
            Err(why) => {
                set_errno(why.errno());
                return ptr::null();
            }
        };
        let call = Call::begin();
        // SAFETY: device is one the real library handed out.
        let name = unsafe { real(device) };
        if call.logging() {
            call.end(
                format_args!("ibv_get_device_name(device={})", Dev(device)),
                format_args!("{}", Str(name)),
                name.is_null(),
            );
        }
        name
    })
}

/// Returns the GUID of `device` in network byte order (its top 24 bits are
/// the vendor's IEEE OUI). On failure returns 0 with errno set (EMFILE: too
/// many open files; EINVAL: NULL or unknown device).
#[no_mangle]
pub unsafe extern "C" fn ibv_get_device_guid(device: *mut ibv_device) -> __be64 {
    boundary("ibv_get_device_guid", 0, || {
        if bad_device("ibv_get_device_guid", device) {
            return 0;
        }
        let real = match GET_DEVICE_GUID.get() {
            Ok(f) => f,
            Err(why) => {
                set_errno(why.errno());
                return 0;
            }
        };
        let call = Call::begin();
        // SAFETY: device is one the real library handed out.
        let guid = unsafe { real(device) };
        if call.logging() {
            let errno = Errno::save();
            if guid != 0 {
                devices::cache_guid(device, guid);
            }
            errno.restore();
            call.end(
                format_args!("ibv_get_device_guid(device={})", Dev(device)),
                format_args!(
                    "{}",
                    crate::log::Hex::new(u64::from_be(guid), 16, false).as_str()
                ),
                guid == 0,
            );
        }
        guid
    })
}

/// Returns the kernel index of `device`, or -1 when it is not known (the
/// real library only learns it over netlink). -1 with errno EINVAL for NULL
/// or an unknown device.
#[no_mangle]
pub unsafe extern "C" fn ibv_get_device_index(device: *mut ibv_device) -> c_int {
    boundary("ibv_get_device_index", -1, || {
        if bad_device("ibv_get_device_index", device) {
            return -1;
        }
        let real = match GET_DEVICE_INDEX.get() {
            Ok(f) => f,
            Err(why) => {
                set_errno(why.errno());
                return -1;
            }
        };
        let call = Call::begin();
        // SAFETY: device is one the real library handed out.
        let index = unsafe { real(device) };
        if call.logging() {
            call.end(
                format_args!("ibv_get_device_index(device={})", Dev(device)),
                format_args!("{index}"),
                false,
            );
        }
        index
    })
}

/// Opens a context on `device` for creating and querying resources. Free it
/// with `ibv_close_device()`. Returns NULL with errno set on failure
/// (EINVAL for NULL or an unknown device).
#[no_mangle]
pub unsafe extern "C" fn ibv_open_device(device: *mut ibv_device) -> *mut ibv_context {
    let caller = crate::caller!();
    boundary("ibv_open_device", ptr::null_mut(), || {
        if bad_device("ibv_open_device", device) {
            return ptr::null_mut();
        }
        let real = match OPEN_DEVICE.get() {
            Ok(f) => f,
            Err(why) => {
                set_errno(why.errno());
                return ptr::null_mut();
            }
        };
        let call = Call::begin();
        // SAFETY: device is one the real library handed out. Inside: the
        // real open goes through verbs_open_device, which the shim also
        // exports (see `exports::private`); this export records it.
        let ctx = super::inside(|| unsafe { real(device) });
        let errno = Errno::save();
        if !ctx.is_null() {
            registry::contexts::opened(ctx as usize, device as usize, super::tid(), caller);
        }
        errno.restore();
        call.end(
            format_args!("ibv_open_device(device={})", Dev(device)),
            format_args!("{}", Ptr(ctx)),
            ctx.is_null(),
        );
        ctx
    })
}

/// Closes a context. Returns 0 on success, -1 with errno set on failure.
/// It does not free what was created on the context: the shim reports those
/// orphans (see the README's leak audit). NULL, a context closed already or
/// one the shim never saw opened is refused with -1 and errno EINVAL.
#[no_mangle]
pub unsafe extern "C" fn ibv_close_device(context: *mut ibv_context) -> c_int {
    let caller = crate::caller!();
    boundary("ibv_close_device", -1, || {
        if context.is_null() {
            refuse(format_args!("ibv_close_device(context=NULL)"), libc::EINVAL);
            return -1;
        }
        let errno = Errno::save();
        match registry::contexts::get(context as usize) {
            Some(c) if c.open => {}
            Some(_) => {
                refuse(
                    format_args!("ibv_close_device(context={context:p}): double close"),
                    libc::EINVAL,
                );
                return -1;
            }
            // A context opened where the shim does not see it is adopted
            // (see `exports::bad_context`); garbage is refused.
            None if super::bad_context("ibv_close_device", context, caller) => return -1,
            None => {}
        }
        let real = match CLOSE_DEVICE.get() {
            Ok(f) => f,
            Err(why) => {
                set_errno(why.errno());
                return -1;
            }
        };
        // SAFETY: an open context; its device field is valid until close.
        let device = unsafe { (*context).device };
        // The leak reports name the device; it may be freed by the close.
        crate::report::context_closing(context as usize);
        // Marked closed, with its objects, before the real close (see
        // `registry::begin_close`): a close racing with this one is refused
        // instead of forwarded twice.
        if registry::begin_close(context as usize) != registry::Closing::Proceed {
            refuse(
                format_args!("ibv_close_device(context={context:p}): double close"),
                libc::EINVAL,
            );
            return -1;
        }
        errno.restore();
        let call = Call::begin();
        // SAFETY: an open context from the real library, closed once.
        let rc = unsafe { real(context) };
        let errno = Errno::save();
        if rc == 0 {
            crate::report::context_closed(context as usize);
        } else {
            registry::abort_close(context as usize);
        }
        errno.restore();
        call.end(
            format_args!(
                "ibv_close_device(context={} on {})",
                Ptr(context),
                Dev(device)
            ),
            format_args!("{rc}"),
            rc != 0,
        );
        rc
    })
}

/// The shim's version string. Also how the shim recognises a copy of itself
/// when looking for the real library.
#[no_mangle]
pub extern "C" fn ibvshim_version() -> *const c_char {
    c"ibv-shim 0.1.0".as_ptr()
}
