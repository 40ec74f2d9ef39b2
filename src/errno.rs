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

/// The symbolic names of Linux's errno values, 1 (`EPERM`) to 133
/// (`EHWPOISON`), by value (41 and 58 are unused): every value a fault
/// rule may give has its name.
const NAMES: [&str; 133] = [
    "EPERM",
    "ENOENT",
    "ESRCH",
    "EINTR",
    "EIO",
    "ENXIO",
    "E2BIG",
    "ENOEXEC",
    "EBADF",
    "ECHILD",
    "EAGAIN",
    "ENOMEM",
    "EACCES",
    "EFAULT",
    "ENOTBLK",
    "EBUSY",
    "EEXIST",
    "EXDEV",
    "ENODEV",
    "ENOTDIR",
    "EISDIR",
    "EINVAL",
    "ENFILE",
    "EMFILE",
    "ENOTTY",
    "ETXTBSY",
    "EFBIG",
    "ENOSPC",
    "ESPIPE",
    "EROFS",
    "EMLINK",
    "EPIPE",
    "EDOM",
    "ERANGE",
    "EDEADLK",
    "ENAMETOOLONG",
    "ENOLCK",
    "ENOSYS",
    "ENOTEMPTY",
    "ELOOP",
    "E?",
    "ENOMSG",
    "EIDRM",
    "ECHRNG",
    "EL2NSYNC",
    "EL3HLT",
    "EL3RST",
    "ELNRNG",
    "EUNATCH",
    "ENOCSI",
    "EL2HLT",
    "EBADE",
    "EBADR",
    "EXFULL",
    "ENOANO",
    "EBADRQC",
    "EBADSLT",
    "E?",
    "EBFONT",
    "ENOSTR",
    "ENODATA",
    "ETIME",
    "ENOSR",
    "ENONET",
    "ENOPKG",
    "EREMOTE",
    "ENOLINK",
    "EADV",
    "ESRMNT",
    "ECOMM",
    "EPROTO",
    "EMULTIHOP",
    "EDOTDOT",
    "EBADMSG",
    "EOVERFLOW",
    "ENOTUNIQ",
    "EBADFD",
    "EREMCHG",
    "ELIBACC",
    "ELIBBAD",
    "ELIBSCN",
    "ELIBMAX",
    "ELIBEXEC",
    "EILSEQ",
    "ERESTART",
    "ESTRPIPE",
    "EUSERS",
    "ENOTSOCK",
    "EDESTADDRREQ",
    "EMSGSIZE",
    "EPROTOTYPE",
    "ENOPROTOOPT",
    "EPROTONOSUPPORT",
    "ESOCKTNOSUPPORT",
    "EOPNOTSUPP",
    "EPFNOSUPPORT",
    "EAFNOSUPPORT",
    "EADDRINUSE",
    "EADDRNOTAVAIL",
    "ENETDOWN",
    "ENETUNREACH",
    "ENETRESET",
    "ECONNABORTED",
    "ECONNRESET",
    "ENOBUFS",
    "EISCONN",
    "ENOTCONN",
    "ESHUTDOWN",
    "ETOOMANYREFS",
    "ETIMEDOUT",
    "ECONNREFUSED",
    "EHOSTDOWN",
    "EHOSTUNREACH",
    "EALREADY",
    "EINPROGRESS",
    "ESTALE",
    "EUCLEAN",
    "ENOTNAM",
    "ENAVAIL",
    "EISNAM",
    "EREMOTEIO",
    "EDQUOT",
    "ENOMEDIUM",
    "EMEDIUMTYPE",
    "ECANCELED",
    "ENOKEY",
    "EKEYEXPIRED",
    "EKEYREVOKED",
    "EKEYREJECTED",
    "EOWNERDEAD",
    "ENOTRECOVERABLE",
    "ERFKILL",
    "EHWPOISON",
];

/// The symbolic name of an errno value, for the log.
pub fn errno_name(e: i32) -> &'static str {
    match usize::try_from(e) {
        Ok(i @ 1..=133) => NAMES[i - 1],
        _ => "E?",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Each name is the value libc gives it; every value a fault rule may
    /// use is named.
    #[test]
    fn names_are_the_kernel_s_values() {
        for (name, value) in [
            ("EPERM", libc::EPERM),
            ("EAGAIN", libc::EAGAIN),
            ("EDEADLK", libc::EDEADLK),
            ("ENETDOWN", libc::ENETDOWN),
            ("EOPNOTSUPP", libc::EOPNOTSUPP),
            ("ECANCELED", libc::ECANCELED),
            ("EHWPOISON", libc::EHWPOISON),
        ] {
            assert_eq!(errno_name(value), name);
        }
        let unnamed: Vec<i32> = (1..=133).filter(|&e| errno_name(e) == "E?").collect();
        assert_eq!(unnamed, [41, 58], "unused on Linux");
        assert_eq!(errno_name(0), "E?");
        assert_eq!(errno_name(134), "E?");
        assert_eq!(errno_name(-1), "E?");
    }
}
