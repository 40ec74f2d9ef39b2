//! Creation sites: return addresses resolved with `dladdr` (once per
//! distinct address), and the frames of a recorded backtrace.
//!
//! A module unloaded before the report (`dlclose`: Open MPI closes its
//! libfabric component, and with it librdmacm, at `MPI_Finalize`) takes
//! its addresses with it, and `dladdr` no longer names them. The
//! `dlclose` hook therefore notes every module a `dlclose` took away
//! (path, address range, build ID, copied while it was still mapped), and a
//! site `dladdr` cannot place is looked up there: it keeps its module,
//! offset and build ID, so the module's suppressions still match it.

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
///
/// Resolved further from the module's debug information when it has some
/// (function, file, line), else named by the module's GNU build ID, as
/// LeakSanitizer does: `module+0xoffset (BuildId: ...)`.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Site {
    pub module: Option<String>,
    pub symbol: Option<String>,
    pub offset: Option<u64>,
    /// From the debug information: the function (the outermost of those
    /// inlined at the call), the source file and line of the call.
    pub function: Option<String>,
    pub file: Option<String>,
    pub line: Option<u32>,
    /// The module's `NT_GNU_BUILD_ID`, in hex.
    pub build_id: Option<String>,
}

impl fmt::Display for Site {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let Some(m) = &self.module else {
            return f.write_str("an unknown site");
        };
        match (&self.symbol, &self.function, self.offset) {
            (Some(s), _, Some(o)) => write!(f, "{s}+{o:#x}")?,
            (None, Some(func), _) if self.line.is_some() => f.write_str(func)?,
            (_, _, Some(o)) => write!(f, "{m}+{o:#x}")?,
            _ => f.write_str(m)?,
        }
        match (&self.file, self.line) {
            (Some(file), Some(line)) => write!(f, " ({file}:{line}) in {m}"),
            _ => match (&self.symbol, &self.build_id) {
                (Some(_), Some(id)) => write!(f, " in {m} (BuildId: {id})"),
                (Some(_), None) => write!(f, " in {m}"),
                (None, Some(id)) => write!(f, " (BuildId: {id})"),
                (None, None) => Ok(()),
            },
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

/// How many distinct addresses are resolved from debug information; past
/// that (a program with that many creation sites), `dladdr` only: the
/// report's cost stays bounded.
const DEBUG_INFO_SITES: usize = 4096;

/// Memory that must be free before debug information is read (its parser
/// allocates as it goes, and a failed allocation there would abort):
/// without it a site keeps `dladdr`'s text.
const DEBUG_INFO_HEADROOM: usize = 64 << 20;

pub(super) fn resolve(caller: usize) -> Site {
    let mut s = resolve_dladdr(caller);
    if s.module.is_none() || s.build_id.is_some() {
        // Unknown, or in a module no longer loaded (no DWARF to read).
        return s;
    }
    s.build_id = build_id(caller);
    static RESOLVED: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
    let headroom = || {
        let mut probe: Vec<u8> = Vec::new();
        oom::quietly(|| probe.try_reserve_exact(DEBUG_INFO_HEADROOM)).is_some()
    };
    if RESOLVED.fetch_add(1, std::sync::atomic::Ordering::Relaxed) < DEBUG_INFO_SITES && headroom()
    {
        debug_info(caller, &mut s);
    }
    s
}

/// Function, file and line of the call instruction, from the module's
/// DWARF (the `backtrace` crate's gimli reader, which keeps the parsed
/// units of a few modules cached).
fn debug_info(caller: usize, s: &mut Site) {
    // `backtrace::resolve` takes the return address and looks up the call
    // itself (ra - 1). It names the inlined frames innermost first: keep
    // the last, the function the program wrote (a call through an inline
    // wrapper such as verbs.h's `ibv_reg_mr` is named at the caller's
    // line, not the header's).
    backtrace::resolve(caller as *mut c_void, |sym| {
        let (Some(file), Some(line)) = (sym.filename(), sym.lineno()) else {
            return;
        };
        s.file = oom::try_string(&file.to_string_lossy());
        s.line = Some(line);
        s.function = sym.name().and_then(|n| oom::try_string(&format!("{n:#}")));
    });
}

/// The `NT_GNU_BUILD_ID` of the loaded module that holds `addr`, read from
/// its note segments in memory.
fn build_id(addr: usize) -> Option<String> {
    struct Search {
        addr: usize,
        id: Option<String>,
    }
    unsafe extern "C" fn each(
        info: *mut libc::dl_phdr_info,
        _: libc::size_t,
        data: *mut c_void,
    ) -> libc::c_int {
        // SAFETY: dl_iterate_phdr passes a valid info and our `data`.
        let (info, search) = unsafe { (&*info, &mut *data.cast::<Search>()) };
        if info.dlpi_phdr.is_null() {
            return 0;
        }
        // SAFETY: the loader's program headers, dlpi_phnum of them.
        let phdrs = unsafe { std::slice::from_raw_parts(info.dlpi_phdr, info.dlpi_phnum as usize) };
        let base = info.dlpi_addr as usize;
        let holds = phdrs.iter().any(|p| {
            let start = base.wrapping_add(p.p_vaddr as usize);
            p.p_type == libc::PT_LOAD && (start..start + p.p_memsz as usize).contains(&search.addr)
        });
        if !holds {
            return 0;
        }
        for p in phdrs.iter().filter(|p| p.p_type == libc::PT_NOTE) {
            let start = base.wrapping_add(p.p_vaddr as usize) as *const u8;
            // SAFETY: a PT_NOTE segment lies inside a loaded, readable
            // PT_LOAD segment of this module, p_memsz bytes long.
            let notes = unsafe { std::slice::from_raw_parts(start, p.p_memsz as usize) };
            if let Some(id) = gnu_build_id(notes) {
                search.id = oom::try_string(&id);
                break;
            }
        }
        1
    }
    let mut search = Search { addr, id: None };
    // SAFETY: `each` only reads what the loader hands it; `search` outlives
    // the call.
    unsafe { libc::dl_iterate_phdr(Some(each), (&mut search as *mut Search).cast()) };
    search.id
}

/// The build ID in a note segment: notes of (namesz, descsz, type), name
/// and description each padded to 4 bytes; the one named "GNU" of type 3.
pub(super) fn gnu_build_id(mut notes: &[u8]) -> Option<String> {
    const NT_GNU_BUILD_ID: u32 = 3;
    let word = |b: &[u8], at: usize| {
        b.get(at..at + 4)
            .map(|w| u32::from_ne_bytes([w[0], w[1], w[2], w[3]]) as usize)
    };
    let pad = |n: usize| n.div_ceil(4) * 4;
    while notes.len() >= 12 {
        let (namesz, descsz, kind) = (word(notes, 0)?, word(notes, 4)?, word(notes, 8)?);
        let name = notes.get(12..12 + namesz)?;
        let desc_at = 12 + pad(namesz);
        let desc = notes.get(desc_at..desc_at + descsz)?;
        if kind as u32 == NT_GNU_BUILD_ID && name == b"GNU\0" {
            let mut hex = String::new();
            oom::fallibly(|| hex.try_reserve_exact(2 * desc.len()))?;
            desc.iter().for_each(|b| {
                let _ = write!(hex, "{b:02x}");
            });
            return Some(hex);
        }
        notes = notes.get(desc_at + pad(descsz)..)?;
    }
    None
}

fn resolve_dladdr(caller: usize) -> Site {
    // SAFETY: Dl_info is plain data; all-zero is a valid value.
    let mut info: libc::Dl_info = unsafe { std::mem::zeroed() };
    // Look up the call instruction (ra - 1): a call that ends a function
    // returns past its end, into the next symbol.
    // SAFETY: dladdr only reads the loader's tables; any address is allowed.
    if unsafe { libc::dladdr((caller - 1) as *const c_void, &mut info) } == 0 {
        return departed_site(caller).unwrap_or(Site {
            offset: Some(caller as u64),
            ..Site::default()
        });
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
            ..Site::default()
        }
    } else {
        Site {
            module,
            offset: Some((caller - info.dli_fbase as usize) as u64),
            ..Site::default()
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

/// How many frames a creation's backtrace keeps.
const MAX_FRAMES: usize = 64;

/// The current call stack as return addresses (`IBV_SHIM_BACKTRACE=1`, at
/// a creation): walked, not symbolized; `None` out of memory.
pub fn capture_frames() -> Option<objects::Frames> {
    let mut ips: Vec<usize> = Vec::new();
    oom::without_reserve(|| ips.try_reserve_exact(MAX_FRAMES)).ok()?;
    backtrace::trace(|frame| {
        ips.push(frame.ip() as usize);
        ips.len() < MAX_FRAMES
    });
    Some(ips.into_boxed_slice())
}

/// Frames of a recorded backtrace, from the program's call down (the
/// shim's own frames, the export among them, left out), as `symbol
/// (file:line)` strings, one per function (inlined ones too), resolved
/// from each return address; `module+0xoffset` where nothing names it.
pub(super) fn frames(obj: &Obj) -> Option<Vec<String>> {
    if obj.flags() & FLAG_BACKTRACE == 0 {
        return None;
    }
    let ips = objects::with_backtrace(obj.addr, |f| {
        oom::fallibly(|| {
            let mut v: Vec<usize> = Vec::new();
            v.try_reserve_exact(f.len()).map(|()| {
                v.extend_from_slice(f);
                v
            })
        })
    })??;
    // The shim's own module: every frame in it is the shim's.
    let ours = module_base(frames as *const () as usize);
    let program = ips
        .iter()
        .position(|&ip| module_base(ip) != ours)
        .unwrap_or(ips.len());
    let mut out: Vec<String> = Vec::new();
    for &ip in &ips[program..] {
        let before = out.len();
        backtrace::resolve(ip as *mut c_void, |sym| {
            let name = sym.name().map(|n| format!("{n:#}"));
            let text = match (name, sym.filename(), sym.lineno()) {
                (Some(n), Some(file), Some(line)) => match sym.colno() {
                    Some(col) => format!("{n} ({}:{line}:{col})", file.display()),
                    None => format!("{n} ({}:{line})", file.display()),
                },
                (Some(n), _, _) => n,
                (None, _, _) => return,
            };
            if oom::fallibly(|| out.try_reserve(1)).is_some() {
                out.push(text);
            }
        });
        if out.len() == before {
            // No module at all: the end of the stack (a zero return address).
            let s = resolve_dladdr(ip);
            if s.module.is_some() && oom::fallibly(|| out.try_reserve(1)).is_some() {
                out.push(s.to_string());
            }
        }
    }
    Some(out)
}

/// The load address of the module holding `addr` (0 when none).
fn module_base(addr: usize) -> usize {
    // SAFETY: Dl_info is plain data; all-zero is a valid value.
    let mut info: libc::Dl_info = unsafe { std::mem::zeroed() };
    // SAFETY: dladdr only reads the loader's tables; any address is allowed.
    match unsafe { libc::dladdr(addr as *const c_void, &mut info) } {
        0 => 0,
        _ => info.dli_fbase as usize,
    }
}

/// A loaded module as a `dlclose` may take it away: its path, load base,
/// the span of its `PT_LOAD` segments and its build ID.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Module {
    path: String,
    base: usize,
    span: (usize, usize),
    build_id: Option<String>,
}

/// The modules unloaded so far, oldest first; at most [`MAX_DEPARTED`].
pub(super) static DEPARTED: Lazy<Mutex<Vec<Module>>> = Lazy::new(|| mutex(Vec::new()));

/// Modules a process unloads are few (plugins); past this many the oldest
/// stay and later ones are not noted (their sites are then unknown).
const MAX_DEPARTED: usize = 256;

/// The modules loaded now (those with a path: not the program itself,
/// whose addresses never go, nor the vDSO). `None` out of memory.
pub fn loaded_modules() -> Option<Vec<Module>> {
    struct Walk {
        out: Vec<Module>,
        failed: bool,
    }
    unsafe extern "C" fn each(
        info: *mut libc::dl_phdr_info,
        _: libc::size_t,
        data: *mut c_void,
    ) -> libc::c_int {
        // SAFETY: dl_iterate_phdr passes a valid info and our `data`.
        let (info, walk) = unsafe { (&*info, &mut *data.cast::<Walk>()) };
        if info.dlpi_phdr.is_null() || info.dlpi_name.is_null() {
            return 0;
        }
        // SAFETY: the loader's NUL-terminated name of the module.
        let name = unsafe { CStr::from_ptr(info.dlpi_name) }.to_string_lossy();
        if name.is_empty() {
            return 0;
        }
        // SAFETY: the loader's program headers, dlpi_phnum of them.
        let phdrs = unsafe { std::slice::from_raw_parts(info.dlpi_phdr, info.dlpi_phnum as usize) };
        let base = info.dlpi_addr as usize;
        let mut span = (usize::MAX, 0usize);
        for p in phdrs.iter().filter(|p| p.p_type == libc::PT_LOAD) {
            let start = base.wrapping_add(p.p_vaddr as usize);
            span = (span.0.min(start), span.1.max(start + p.p_memsz as usize));
        }
        if span.0 >= span.1 {
            return 0;
        }
        let mut id = None;
        for p in phdrs.iter().filter(|p| p.p_type == libc::PT_NOTE) {
            let start = base.wrapping_add(p.p_vaddr as usize) as *const u8;
            // SAFETY: a PT_NOTE segment lies inside a loaded, readable
            // PT_LOAD segment of this module, p_memsz bytes long.
            let notes = unsafe { std::slice::from_raw_parts(start, p.p_memsz as usize) };
            if let Some(found) = gnu_build_id(notes) {
                id = Some(found);
                break;
            }
        }
        match (
            oom::try_string(&name),
            oom::fallibly(|| walk.out.try_reserve(1)),
        ) {
            (Some(path), Some(())) => walk.out.push(Module {
                path,
                base,
                span,
                build_id: id,
            }),
            _ => walk.failed = true,
        }
        0
    }
    let mut walk = Walk {
        out: Vec::new(),
        failed: false,
    };
    // SAFETY: `each` only reads what the loader hands it; `walk` outlives
    // the call.
    unsafe { libc::dl_iterate_phdr(Some(each), (&mut walk as *mut Walk).cast()) };
    (!walk.failed).then_some(walk.out)
}

/// After a `dlclose`: notes the modules of `before` that are gone.
pub fn note_departed(before: Vec<Module>) {
    let Some(now) = loaded_modules() else {
        return;
    };
    let mut departed = DEPARTED.lock();
    for m in before {
        let still = now
            .iter()
            .any(|n| n.base == m.base && n.span == m.span && n.path == m.path);
        if still || departed.len() >= MAX_DEPARTED {
            continue;
        }
        // A module at the same place again (loaded, unloaded, loaded) is
        // noted once, the latest.
        departed.retain(|d| d.span != m.span);
        if oom::fallibly(|| departed.try_reserve(1)).is_some() {
            departed.push(m);
        }
    }
}

/// The site of `caller` in a module unloaded since: its path, the offset
/// from its load base (as `dladdr` gives without a symbol) and its build ID.
fn departed_site(caller: usize) -> Option<Site> {
    let departed = DEPARTED.lock();
    let m = departed
        .iter()
        .rev()
        .find(|m| (m.span.0..m.span.1).contains(&(caller - 1)))?;
    Some(Site {
        module: module_path(&m.path),
        offset: Some((caller - m.base) as u64),
        build_id: m.build_id.clone(),
        ..Site::default()
    })
}
