//! Creation sites: return addresses resolved with `dladdr` (once per
//! distinct address), and the frames of a recorded backtrace.

use std::collections::HashMap;
use std::ffi::{c_void, CStr};
use std::fmt::{self, Write as _};

use crate::registry::lock::{mutex, Mutex};
use once_cell::sync::Lazy;

use crate::oom;
use crate::registry::objects::{self, Obj, FLAG_BACKTRACE};

/// Where an object was created: the module, and symbol + offset of the
/// return address (offset from the module's load address when no dynamic
/// symbol covers it, as `addr2line -e MODULE` wants).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Site {
    pub module: Option<String>,
    pub symbol: Option<String>,
    pub offset: Option<u64>,
}

impl fmt::Display for Site {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match (&self.symbol, self.offset, &self.module) {
            (Some(s), Some(o), Some(m)) => write!(f, "{s}+{o:#x} in {m}"),
            (None, Some(o), Some(m)) => write!(f, "{m}+{o:#x}"),
            (_, _, Some(m)) => f.write_str(m),
            _ => f.write_str("an unknown site"),
        }
    }
}

// The registry's fork-resettable lock: a fork() while another thread
// resolves a site must not leave the child waiting on this one.
pub(super) static SITES: Lazy<Mutex<HashMap<usize, Site>>> = Lazy::new(|| mutex(HashMap::new()));

/// The creation site of a return address (cached).
pub fn site(caller: usize) -> Site {
    if caller == 0 {
        return Site::default();
    }
    if let Some(s) = SITES.lock().get(&caller) {
        return s.clone();
    }
    let s = resolve(caller);
    // Out of memory the site is resolved again next time, not cached.
    let mut sites = SITES.lock();
    if oom::fallibly(|| sites.try_reserve(1)).is_some() {
        sites.insert(caller, s.clone());
    }
    s
}

pub(super) fn resolve(caller: usize) -> Site {
    // SAFETY: Dl_info is plain data; all-zero is a valid value.
    let mut info: libc::Dl_info = unsafe { std::mem::zeroed() };
    // Look up the call instruction (ra - 1): a call that ends a function
    // returns past its end, into the next symbol.
    // SAFETY: dladdr only reads the loader's tables; any address is allowed.
    if unsafe { libc::dladdr((caller - 1) as *const c_void, &mut info) } == 0 {
        return Site {
            module: None,
            symbol: None,
            offset: Some(caller as u64),
        };
    }
    let module = (!info.dli_fname.is_null())
        .then(|| {
            // SAFETY: dladdr filled it with a C string owned by the loader.
            let name = unsafe { CStr::from_ptr(info.dli_fname) }.to_string_lossy();
            module_path(&name)
        })
        .flatten();
    if !info.dli_sname.is_null() && !info.dli_saddr.is_null() {
        // SAFETY: as above.
        let symbol = oom::try_string(&unsafe { CStr::from_ptr(info.dli_sname) }.to_string_lossy());
        Site {
            module,
            symbol,
            offset: Some((caller - info.dli_saddr as usize) as u64),
        }
    } else {
        Site {
            module,
            symbol: None,
            offset: Some((caller - info.dli_fbase as usize) as u64),
        }
    }
}

/// The loader names the main program by `argv[0]` (maybe relative, maybe
/// empty); reports want a full path. `None` out of memory.
pub(super) fn module_path(name: &str) -> Option<String> {
    if name.starts_with('/') {
        return oom::try_string(name);
    }
    let exe = program();
    if name.is_empty() || name.rsplit('/').next() == exe.rsplit('/').next() {
        Some(exe)
    } else {
        oom::try_string(name)
    }
}

/// `/proc/self/exe` (empty when unknown or out of memory).
pub(super) fn program() -> String {
    let mut buf = [0u8; 4096];
    // SAFETY: the buffer is valid for its length; readlink adds no NUL.
    let n = unsafe {
        libc::readlink(
            c"/proc/self/exe".as_ptr(),
            buf.as_mut_ptr().cast(),
            buf.len(),
        )
    };
    let path = &buf[..n.max(0) as usize];
    oom::try_string(&String::from_utf8_lossy(path)).unwrap_or_default()
}

/// Frames of a recorded backtrace, from the program's call down (the
/// shim's own frames removed), as `symbol (file:line)` strings.
pub(super) fn frames(obj: &Obj) -> Option<Vec<String>> {
    if obj.flags() & FLAG_BACKTRACE == 0 {
        return None;
    }
    let text = objects::with_backtrace(obj.addr, |bt| bt.to_string())?;
    let mut out: Vec<String> = Vec::new();
    for line in text.lines() {
        let t = line.trim();
        if let Some((n, sym)) = t.split_once(": ") {
            if !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit()) {
                out.push(sym.to_string());
                continue;
            }
        }
        if let (Some(loc), Some(last)) = (t.strip_prefix("at "), out.last_mut()) {
            let _ = write!(last, " ({loc})");
        }
    }
    let ours = |f: &str| {
        [
            "ibv_shim::",
            "std::",
            "core::",
            "alloc::",
            "<alloc::",
            "<core::",
            "<std::",
            "__rust",
        ]
        .iter()
        .any(|p| f.starts_with(p) || f.contains("ibv_shim::"))
    };
    let mut start = out.iter().position(|f| !ours(f)).unwrap_or(out.len());
    // Then the export itself (`ibv_alloc_pd`, ...).
    if out.get(start).is_some_and(|f| f.starts_with("ibv_")) {
        start += 1;
    }
    Some(out.split_off(start.min(out.len())))
}
