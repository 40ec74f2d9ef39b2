//! `IBVERBS_PRIVATE_34`: the internals rdma-core exports for its provider
//! plugins (`libmlx5`, `libefa`, ...), prototypes as in rdma-core 44's
//! `libibverbs/driver.h` and `cmd_ioctl.h`.
//!
//! Why the sim has them: programs and libraries that use a provider's
//! direct verbs (perftest, libfabric, UCX's IB transport, pyverbs) link to
//! `libmlx5.so.1` / `libefa.so.1`, which link to these symbols. Without them
//! the dynamic loader refuses to load the program at all.
//!
//! The sim never loads provider plugins. A plugin linked into a sim process
//! still runs its constructor (`verbs_register_driver_34`, ignored here) and
//! may call its entry points on the sim's objects: the direct-verbs entry
//! points check the device's `verbs_device_ops` first and fail, and any
//! kernel command that is still reached fails the way a kernel without the
//! command does: `EOPNOTSUPP` in the function's own convention (an errno
//! value for `int ibv_cmd_*`, -1 with errno for `ibv_cmd_poll_cq`, NULL with
//! errno for pointers), touching nothing it was given. The `ibv_cmd_*`
//! commands are in `private_cmd`.

// The `.symver` directives that give this module's functions their versions,
// and the one for the data object (build.rs only sees functions).
#[cfg(not(test))]
core::arch::global_asm!(include_str!(concat!(env!("OUT_DIR"), "/symver_private.s")));
#[cfg(not(test))]
core::arch::global_asm!(
    ".symver verbs_allow_disassociate_destroy, verbs_allow_disassociate_destroy@@IBVERBS_PRIVATE_34"
);

use core::ffi::{c_char, c_int, c_uint, c_void};
use core::sync::atomic::AtomicBool;

use verbs_abi::{ibv_comp_channel, ibv_context, ibv_cq, ibv_device};

use crate::{context, datapath, guard};

/// rdma-core's `bool verbs_allow_disassociate_destroy`: whether destroying
/// an object of a disassociated device may report success. Providers read
/// it on their destroy paths; the sim's devices never disassociate, so it
/// stays false. An `AtomicBool` has `bool`'s layout and lives in writable
/// data, as the C variable does.
#[no_mangle]
pub static verbs_allow_disassociate_destroy: AtomicBool = AtomicBool::new(false);

/// The failure of a kernel command the sim has no kernel for, as an errno value.
pub(super) fn no_kernel() -> c_int {
    guard::errval(|| Err(libc::EOPNOTSUPP))
}

/// The same, for functions returning a pointer (NULL with errno).
pub(super) fn no_kernel_ptr<T>() -> *mut T {
    guard::ptr(|| Err(libc::EOPNOTSUPP))
}

// ---- Provider registration and context plumbing ---------------------------

/// `void verbs_register_driver_34(const struct verbs_device_ops *ops)`: the
/// constructor of every provider plugin calls it. The sim keeps its own
/// devices and never hands one to a provider, so the registration is dropped.
#[no_mangle]
pub unsafe extern "C" fn verbs_register_driver_34(_ops: *const c_void) {}

/// `void __verbs_log(struct verbs_context *, uint32_t level, const char *fmt, ...)`:
/// provider debug output (`VERBS_LOG_LEVEL`). Dropped: stable Rust cannot
/// take the variadic arguments, and the caller does not need them read.
#[no_mangle]
pub unsafe extern "C" fn __verbs_log(_ctx: *mut c_void, _level: u32, _fmt: *const c_char) {}

/// `void *_verbs_init_and_alloc_context(struct ibv_device *, int cmd_fd,
/// size_t alloc_size, struct verbs_context *context_offset, uint32_t driver_id)`:
/// a provider's `alloc_context` allocating its context; NULL with errno.
#[no_mangle]
pub unsafe extern "C" fn _verbs_init_and_alloc_context(
    _device: *mut ibv_device,
    _cmd_fd: c_int,
    _alloc_size: usize,
    _context_offset: *mut c_void,
    _driver_id: u32,
) -> *mut c_void {
    no_kernel_ptr()
}

/// `void verbs_uninit_context(struct verbs_context *)`: the undo of the
/// above, for a context the sim never let a provider create. Nothing to do.
#[no_mangle]
pub unsafe extern "C" fn verbs_uninit_context(_vctx: *mut c_void) {}

/// `void verbs_set_ops(struct verbs_context *, const struct verbs_context_ops *)`:
/// a provider filling its own context's tables. The sim's contexts keep
/// their own tables, so this writes nothing.
#[no_mangle]
pub unsafe extern "C" fn verbs_set_ops(_vctx: *mut c_void, _ops: *const c_void) {}

/// `void verbs_init_cq(struct ibv_cq *, struct ibv_context *, struct
/// ibv_comp_channel *, void *cq_context)`: initialises the common part of
/// a CQ the caller allocated, as rdma-core does, except that the sim's
/// channels count only the sim's own CQs (their `refcnt` is left alone).
#[no_mangle]
pub unsafe extern "C" fn verbs_init_cq(
    cq: *mut ibv_cq,
    context: *mut ibv_context,
    channel: *mut ibv_comp_channel,
    cq_context: *mut c_void,
) {
    guard::void(|| {
        if cq.is_null() {
            return;
        }
        // SAFETY: cq points at the caller's CQ memory, which it is initialising.
        unsafe {
            (*cq).context = context;
            (*cq).channel = channel;
            (*cq).cq_context = cq_context;
            (*cq).comp_events_completed = 0;
            (*cq).async_events_completed = 0;
            libc::pthread_mutex_init(&mut (*cq).mutex, core::ptr::null());
            libc::pthread_cond_init(&mut (*cq).cond, core::ptr::null());
        }
    })
}

/// `struct ibv_context *verbs_open_device(struct ibv_device *, void
/// *private_data)`: `ibv_open_device` is this with no private data. Provider
/// private data (`mlx5dv_open_device`'s) means nothing to the sim's devices.
#[no_mangle]
pub unsafe extern "C" fn verbs_open_device(
    device: *mut ibv_device,
    private_data: *mut c_void,
) -> *mut ibv_context {
    guard::ptr(|| {
        if !private_data.is_null() {
            return Err(libc::EOPNOTSUPP);
        }
        context::open(device, super::ops::install, &datapath::remote::RECEIVER)
    })
}

/// `int ibv_read_ibdev_sysfs_file(char *buf, size_t size, struct
/// verbs_sysfs_dev *, const char *fnfmt, ...)`: reads a file of a device the
/// provider matched in sysfs; the sim's devices were not matched that way.
/// -1 with errno, like a file that cannot be opened.
#[no_mangle]
pub unsafe extern "C" fn ibv_read_ibdev_sysfs_file(
    _buf: *mut c_char,
    _size: usize,
    _sysfs_dev: *mut c_void,
    _fnfmt: *const c_char,
) -> c_int {
    guard::minus_one(|| Err(libc::EOPNOTSUPP))
}

// ---- The ioctl command interface ------------------------------------------

/// Offset of `hdr.attrs` in `struct ibv_command_buffer` and the size of one
/// `struct ib_uverbs_attr` (x86_64, measured with gcc on rdma-core 44's layout).
const CMDB_ATTRS: usize = 56;
const UVERBS_ATTR_SIZE: usize = 16;

/// `unsigned int __ioctl_final_num_attrs(unsigned int num_attrs, struct
/// ibv_command_buffer *link)`: sizes the stack buffer of a command with
/// linked driver attributes (the attributes filled in each linked buffer
/// are added). Pure arithmetic, done as rdma-core does it.
#[no_mangle]
pub unsafe extern "C" fn __ioctl_final_num_attrs(num_attrs: c_uint, link: *mut c_void) -> c_uint {
    guard::call(num_attrs, || {
        let mut n = num_attrs;
        let mut cur = link.cast::<u8>();
        // A chain is a handful of stack buffers; the bound only stops a loop.
        for _ in 0..64 {
            if cur.is_null() {
                break;
            }
            // SAFETY: cur is a live ibv_command_buffer of the caller's chain:
            // `next` at 0, `next_attr` at 8, attributes from CMDB_ATTRS.
            let (next, next_attr) = unsafe {
                (
                    cur.cast::<*mut u8>().read(),
                    cur.add(8).cast::<*mut u8>().read(),
                )
            };
            let used = (next_attr as usize).saturating_sub(cur as usize + CMDB_ATTRS);
            n = n.wrapping_add((used / UVERBS_ATTR_SIZE) as c_uint);
            cur = next;
        }
        n
    })
}

/// `int execute_ioctl(struct ibv_context *, struct ibv_command_buffer *)`:
/// no uverbs character device answers.
#[no_mangle]
pub unsafe extern "C" fn execute_ioctl(_ctx: *mut ibv_context, _cmd: *mut c_void) -> c_int {
    no_kernel()
}
