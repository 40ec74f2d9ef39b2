//! errno: saved and restored around the shim's own work, and named for the
//! log. A leaf module, so the logger and the panic boundary can both use it.

/// errno, saved so the shim's own work (logging, bookkeeping) never
/// clobbers what the real call left for the program.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Errno(pub i32);

impl Errno {
    #[inline]
    pub fn save() -> Errno {
        // SAFETY: __errno_location always returns this thread's errno slot.
        Errno(unsafe { *libc::__errno_location() })
    }

    #[inline]
    pub fn restore(self) {
        set_errno(self.0);
    }
}

#[inline]
pub fn set_errno(value: i32) {
    // SAFETY: __errno_location always returns this thread's errno slot.
    unsafe { *libc::__errno_location() = value };
}

/// The symbolic name of an errno value, for the log.
pub fn errno_name(e: i32) -> &'static str {
    match e {
        libc::EPERM => "EPERM",
        libc::ENOENT => "ENOENT",
        libc::ESRCH => "ESRCH",
        libc::EINTR => "EINTR",
        libc::EIO => "EIO",
        libc::ENXIO => "ENXIO",
        libc::EBADF => "EBADF",
        libc::EAGAIN => "EAGAIN",
        libc::ENOMEM => "ENOMEM",
        libc::EACCES => "EACCES",
        libc::EFAULT => "EFAULT",
        libc::EBUSY => "EBUSY",
        libc::EEXIST => "EEXIST",
        libc::ENODEV => "ENODEV",
        libc::EINVAL => "EINVAL",
        libc::ENFILE => "ENFILE",
        libc::EMFILE => "EMFILE",
        libc::ENOSPC => "ENOSPC",
        libc::ERANGE => "ERANGE",
        libc::ENOSYS => "ENOSYS",
        libc::EOPNOTSUPP => "EOPNOTSUPP",
        libc::EPROTONOSUPPORT => "EPROTONOSUPPORT",
        libc::ETIMEDOUT => "ETIMEDOUT",
        libc::EOVERFLOW => "EOVERFLOW",
        _ => "E?",
    }
}
