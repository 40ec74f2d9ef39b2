//! Leak reports: what is still allocated when a context closes and when the
//! process exits.
//!
//! - At `ibv_close_device`: the context's orphans as a tree (each PD, then
//!   its MRs, QPs, SRQs, AHs; CQs and channels at the top), with counts by
//!   kind and each object's creation site, logged at warn. They stay in the
//!   table as zombies: destroying one later is refused as a use after close.
//! - At exit (a library destructor, after the program's `atexit` handlers):
//!   contexts never closed with what they own, device lists never freed,
//!   and the zombies; the JSON document (`IBV_SHIM_REPORT`, schema in
//!   `docs/leak-report.schema.json`); the leak exit code
//!   (`IBV_SHIM_LEAK_EXITCODE`). Only a process that used verbs reports.
//! - Suppressions (`IBV_SHIM_SUPPRESS`): `leak:<kind>:<pattern>` lines; a
//!   suppressed object is still in the JSON (`"suppressed": true`) but is
//!   not a leak for `leaked` or the exit code. Built-in ones
//!   (`default_suppressions.txt`, off with `IBV_SHIM_DEFAULT_SUPPRESSIONS=0`)
//!   cover what a library keeps for the process's life on purpose, matched
//!   by the creating call's module only, and name it (`"kept_by"`).
//!
//! Creation sites are kept as bare return addresses and resolved with
//! `dladdr` only here, once per distinct address.

use std::collections::{BinaryHeap, HashMap};
use std::ffi::{c_void, CStr, OsString};
use std::fmt::{self, Write as _};
use std::io::Write as _;
use std::os::unix::ffi::OsStringExt;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

use once_cell::sync::Lazy;
use parking_lot::Mutex;
use verbs_abi::ibv_device;

use crate::config;
use crate::exports::resources::{AH_VIA, MR_VIA};
use crate::log::Level;
use crate::oom;
use crate::real::RealFn;
use crate::registry::contexts::{self, ContextInfo};
use crate::registry::devices::{self, LiveList};
use crate::registry::objects::{self, Kind, Obj, FLAG_BACKTRACE};

/// Objects listed one by one in a text report; the rest are counted (the
/// JSON report has them all).
const TEXT_LIMIT: usize = 100;

/// The JSON document's schema name (`docs/leak-report.schema.json`).
pub const SCHEMA: &str = "ibv-shim/leak-report/1";

// --- did this process use verbs? ---------------------------------------------------

static USED: AtomicBool = AtomicBool::new(false);

/// When this process (or forked child) first used verbs, in nanoseconds of
/// `CLOCK_REALTIME_COARSE`, the clock file modification times come from:
/// a report file modified since then was written by another process.
static SINCE: AtomicU64 = AtomicU64::new(0);

/// Marks this process as a verbs user (called by every export that
/// forwards a call): only such a process writes a report.
#[inline(always)]
pub fn note_use() {
    // Read first: after the first call this is a load of a line no one writes.
    if !USED.load(Ordering::Relaxed) && !USED.swap(true, Ordering::Relaxed) {
        first_use();
    }
}

/// After `fork()`, in the child: it has used nothing yet.
pub fn after_fork_in_child() {
    USED.store(false, Ordering::Relaxed);
}

fn coarse_now_ns() -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: ts is a valid out-pointer; the clock always exists on Linux.
    unsafe { libc::clock_gettime(libc::CLOCK_REALTIME_COARSE, &mut ts) };
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

/// The first verbs call of this process: note the time, and tell the
/// launcher (`IBV_SHIM_STATUS_DIR`) that this process uses verbs, so that
/// if it dies before writing its report the launcher can say so and name
/// it. No allocation: the marker is formatted on the stack.
#[cold]
#[inline(never)]
fn first_use() {
    let saved = crate::guard::Errno::save();
    SINCE.store(coarse_now_ns(), Ordering::Relaxed);
    if let Some(dir) = &config::get().status_dir {
        let mut text = [0u8; 4200];
        // SAFETY: getpid cannot fail.
        let pid = crate::log::Dec::new(unsafe { libc::getpid() } as u64);
        let mut len = pid.as_bytes().len();
        text[..len].copy_from_slice(pid.as_bytes());
        text[len] = b' ';
        len += 1;
        // SAFETY: the buffer has 4096 bytes free at `len`; readlink adds no NUL.
        let exe = unsafe {
            libc::readlink(
                c"/proc/self/exe".as_ptr(),
                text[len..].as_mut_ptr().cast(),
                4096,
            )
        };
        len += exe.max(0) as usize;
        text[len] = b'\n';
        write_status(dir.as_encoded_bytes(), b".started", &text[..len + 1]);
        catch_termination();
    }
    saved.restore();
}

/// Writes `<dir>/<pid><suffix>` holding `body`, allocation-free and
/// async-signal-safe (it also runs in a signal handler).
fn write_status(dir: &[u8], suffix: &[u8], body: &[u8]) {
    // SAFETY: getpid cannot fail.
    let pid = crate::log::Dec::new(unsafe { libc::getpid() } as u64);
    let mut path = [0u8; 4096];
    if dir.len() + 1 + pid.as_bytes().len() + suffix.len() >= path.len() {
        return;
    }
    let mut n = 0;
    for part in [dir, b"/", pid.as_bytes(), suffix] {
        path[n..n + part.len()].copy_from_slice(part);
        n += part.len();
    }
    // SAFETY: path is NUL-terminated (zeroed past `n`); O_NOFOLLOW refuses
    // a symlink planted at the name.
    let fd = unsafe {
        libc::open(
            path.as_ptr().cast(),
            libc::O_WRONLY | libc::O_CREAT | libc::O_TRUNC | libc::O_NOFOLLOW | libc::O_CLOEXEC,
            0o600 as libc::c_uint,
        )
    };
    if fd >= 0 {
        // SAFETY: fd is ours; body is valid for its length.
        unsafe {
            libc::write(fd, body.as_ptr().cast(), body.len());
            libc::close(fd);
        }
    }
}

/// The signals that end a process that has no handler for them, and that
/// a wrapper (`timeout`) or a user sends.
const TERMINATION: [libc::c_int; 3] = [libc::SIGTERM, libc::SIGINT, libc::SIGHUP];

/// Under the launcher only: for each of [`TERMINATION`] still at its
/// default action, a handler that notes the signal (`<pid>.signal`) and
/// dies of it as the default action would, so the launcher can say what
/// killed a process it did not start itself (`ibv-shim -- timeout 20
/// prog`). A disposition the program set is left alone, and a handler it
/// sets later replaces this one.
fn catch_termination() {
    for sig in TERMINATION {
        // SAFETY: sigaction is plain data; all-zero is a valid value; the
        // handler only calls async-signal-safe functions.
        unsafe {
            let mut old: libc::sigaction = std::mem::zeroed();
            if libc::sigaction(sig, std::ptr::null(), &mut old) != 0
                || old.sa_sigaction != libc::SIG_DFL
            {
                continue;
            }
            let mut new: libc::sigaction = std::mem::zeroed();
            new.sa_sigaction = on_termination as extern "C" fn(libc::c_int) as usize;
            new.sa_flags = libc::SA_RESTART;
            libc::sigemptyset(&mut new.sa_mask);
            libc::sigaction(sig, &new, std::ptr::null_mut());
        }
    }
}

extern "C" fn on_termination(sig: libc::c_int) {
    let saved = crate::guard::Errno::save();
    if let Some(dir) = &config::get().status_dir {
        let n = crate::log::Dec::new(sig as u64);
        let mut body = [b'\n'; 24];
        body[..n.as_bytes().len()].copy_from_slice(n.as_bytes());
        write_status(
            dir.as_encoded_bytes(),
            b".signal",
            &body[..n.as_bytes().len() + 1],
        );
    }
    // Die of it as if no handler had been set: the default action again,
    // and the signal (blocked while this handler runs) delivered as soon
    // as it returns.
    // SAFETY: signal and raise are async-signal-safe.
    unsafe {
        libc::signal(sig, libc::SIG_DFL);
        libc::raise(sig);
    }
    saved.restore();
}

/// Where this process writes its report: `IBV_SHIM_REPORT` with `%p` as
/// the pid. A name without `%p` is shared by every process of the program
/// (a forked child, a program run by another): when another process has
/// written its report there since this one started using verbs, this one
/// adds its pid to the name (`r.json` -> `r.<pid>.json`) and warns, rather
/// than replace that report.
fn report_path(template: &OsString) -> std::ffi::CString {
    let path = config::expand_pid(template);
    if template.as_encoded_bytes().windows(2).any(|w| w == b"%p") {
        return path;
    }
    // SAFETY: stat is plain data; all-zero is a valid value.
    let mut st: libc::stat = unsafe { std::mem::zeroed() };
    // SAFETY: path is NUL-terminated; st is a valid out-pointer.
    if unsafe { libc::lstat(path.as_ptr(), &mut st) } != 0
        || st.st_mode & libc::S_IFMT != libc::S_IFREG
    {
        return path;
    }
    let mtime = st.st_mtime as u64 * 1_000_000_000 + st.st_mtime_nsec as u64;
    if mtime < SINCE.load(Ordering::Relaxed) {
        // An old report, from before this process used verbs.
        return path;
    }
    let mine = config::expand_pid(&OsString::from_vec(with_pid(template.as_encoded_bytes())));
    crate::log!(
        Level::Warn,
        "IBV_SHIM_REPORT={}: another process wrote its report there while this one ran; \
         this process's report is {} (put %p in the name for one report per process)",
        template.to_string_lossy(),
        mine.to_string_lossy()
    );
    mine
}

/// `dir/r.json` -> `dir/r.%p.json`; `dir/r` -> `dir/r.%p`.
fn with_pid(path: &[u8]) -> Vec<u8> {
    let base = path.iter().rposition(|&b| b == b'/').map_or(0, |i| i + 1);
    let at = match path[base..].iter().rposition(|&b| b == b'.') {
        // Not a leading dot (a hidden file's name is not an extension).
        Some(dot) if dot > 0 => base + dot,
        _ => path.len(),
    };
    let mut out = Vec::with_capacity(path.len() + 3);
    out.extend_from_slice(&path[..at]);
    out.extend_from_slice(b".%p");
    out.extend_from_slice(&path[at..]);
    out
}

// --- creation sites -------------------------------------------------------------------

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

static SITES: Lazy<Mutex<HashMap<usize, Site>>> = Lazy::new(|| Mutex::new(HashMap::new()));

/// Initialises the report's lazy state up front (called before the fork
/// handlers are registered), so that a `fork()` can never catch one of them
/// half-initialised and leave the child waiting on it.
pub fn init() {
    Lazy::force(&SITES);
    Lazy::force(&SUPPRESSIONS);
    Lazy::force(&DEFAULTS);
}

/// `fork()` prepare: a report being written in another thread holds the
/// creation-site cache; the child must not inherit it locked.
pub fn fork_lock() {
    std::mem::forget(SITES.lock());
}

/// `fork()` parent and child: release what `fork_lock` took.
pub fn fork_unlock() {
    // SAFETY: fork_lock took the lock on this thread and forgot the guard.
    unsafe { SITES.force_unlock() };
}

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

fn resolve(caller: usize) -> Site {
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
fn module_path(name: &str) -> Option<String> {
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
fn program() -> String {
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
fn frames(obj: &Obj) -> Option<Vec<String>> {
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

// --- objects as text ------------------------------------------------------------------

fn qp_type(t: u8) -> String {
    match t {
        2 => "RC".into(),
        3 => "UC".into(),
        4 => "UD".into(),
        8 => "RAW_PACKET".into(),
        9 => "XRC_SEND".into(),
        10 => "XRC_RECV".into(),
        0xff => "DRIVER".into(),
        n => n.to_string(),
    }
}

/// Nonzero pointer as hex, or `NULL`.
struct P(u64);

impl fmt::Display for P {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.0 == 0 {
            f.write_str("NULL")
        } else {
            write!(f, "{:#x}", self.0)
        }
    }
}

/// An object's identifying fields, for the text reports.
struct Fields<'a>(&'a Obj);

impl fmt::Display for Fields<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let o = self.0;
        let (lkey, rkey) = (o.c as u32, (o.c >> 32) as u32);
        match o.kind() {
            Kind::Pd => write!(f, "handle={}", o.a),
            Kind::Mr => write!(
                f,
                "addr={:#x} length={} lkey={lkey:#x} rkey={rkey:#x} access={:#x} ({})",
                o.a,
                o.b,
                o.x,
                MR_VIA.get(o.sub() as usize).unwrap_or(&"?")
            ),
            Kind::Cq => {
                write!(f, "cqe={} comp_vector={}", o.x as i32, o.a)?;
                if o.parent != 0 {
                    write!(f, " channel={:#x}", o.parent)?;
                }
                Ok(())
            }
            Kind::CompChannel => write!(f, "fd={}", o.x as i32),
            Kind::Srq => write!(f, "max_wr={} max_sge={} srq_limit={}", o.x, o.a, o.b),
            Kind::Qp => write!(
                f,
                "qp_num={:#x} type={} send_cq={} recv_cq={} srq={}",
                o.x,
                qp_type(o.sub()),
                P(o.a),
                P(o.b),
                P(o.c)
            ),
            Kind::Ah => write!(
                f,
                "dlid={:#x} port_num={} sl={}{} ({})",
                o.a,
                o.b,
                o.c & 0xff,
                if o.c >> 8 & 1 != 0 { " global" } else { "" },
                AH_VIA.get(o.sub() as usize).unwrap_or(&"?")
            ),
            Kind::ImportedPd => write!(f, "handle={}", o.a),
            Kind::ImportedMr => {
                write!(
                    f,
                    "handle={} addr={:#x} length={} lkey={lkey:#x} rkey={rkey:#x}",
                    o.x, o.a, o.b
                )
            }
        }
    }
}

/// One object in a log line: kind, address, fields, creation site.
pub struct Brief<'a>(pub &'a Obj);

impl fmt::Display for Brief<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let o = self.0;
        write!(
            f,
            "{} {:#x} ({}) created by thread {} at {}",
            o.kind().name(),
            o.addr,
            Fields(o),
            o.tid,
            site(o.caller)
        )
    }
}

/// Kind names in report order.
const KINDS: [&str; 11] = [
    "context",
    "device_list",
    "pd",
    "mr",
    "cq",
    "comp_channel",
    "srq",
    "qp",
    "ah",
    "imported_pd",
    "imported_mr",
];

/// Counts by kind, shown as "1 pd, 2 mr".
#[derive(Clone, Copy, Default)]
struct Counts([usize; 11]);

impl Counts {
    fn add(&mut self, kind: &str) {
        if let Some(i) = KINDS.iter().position(|k| *k == kind) {
            self.0[i] += 1;
        }
    }

    fn add_obj(&mut self, o: &Obj) {
        // Kind discriminants are 1..=9, after "context" and "device_list".
        self.0[o.kind() as usize + 1] += 1;
    }

    fn total(&self) -> usize {
        self.0.iter().sum()
    }

    fn minus(&self, other: &Counts) -> Counts {
        let mut c = *self;
        c.0.iter_mut()
            .zip(other.0)
            .for_each(|(a, b)| *a = a.saturating_sub(b));
        c
    }

    fn get(&self, kind: &str) -> usize {
        KINDS
            .iter()
            .position(|k| *k == kind)
            .map_or(0, |i| self.0[i])
    }
}

impl fmt::Display for Counts {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut first = true;
        for (k, n) in KINDS.iter().zip(self.0).filter(|(_, n)| *n > 0) {
            write!(f, "{}{n} {k}", if first { "" } else { ", " })?;
            first = false;
        }
        Ok(())
    }
}

/// "1 object", "2 objects".
struct Plural(usize, &'static str, &'static str);

impl fmt::Display for Plural {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let Plural(n, one, many) = *self;
        write!(f, "{n} {}", if n == 1 { one } else { many })
    }
}

fn plural(n: usize, one: &'static str, many: &'static str) -> Plural {
    Plural(n, one, many)
}

fn is_pd(o: &Obj) -> bool {
    matches!(o.kind(), Kind::Pd | Kind::ImportedPd)
}

fn on_pd(o: &Obj) -> bool {
    matches!(
        o.kind(),
        Kind::Mr | Kind::Qp | Kind::Srq | Kind::Ah | Kind::ImportedMr
    )
}

/// Listing order: oldest first; a PD before what sits on it when both were
/// made in the same millisecond.
fn age(o: &Obj) -> (u64, Kind, usize) {
    (o.time_ms(), o.kind(), o.addr)
}

/// An object ordered by [`age`].
struct Aged(Obj);

impl PartialEq for Aged {
    fn eq(&self, other: &Self) -> bool {
        age(&self.0) == age(&other.0)
    }
}

impl Eq for Aged {}

impl PartialOrd for Aged {
    fn partial_cmp(&self, other: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}

impl Ord for Aged {
    fn cmp(&self, other: &Self) -> std::cmp::Ordering {
        age(&self.0).cmp(&age(&other.0))
    }
}

/// What a report gathers about one context's objects in a single pass, in
/// bounded memory however many there are: counts, and the [`TEXT_LIMIT`]
/// oldest unsuppressed objects to list.
#[derive(Default)]
struct Tally {
    loud: Counts,
    quiet: Quiet,
    /// A max-heap of the oldest seen so far.
    oldest: BinaryHeap<Aged>,
}

impl Tally {
    fn add(&mut self, o: &Obj, quiet: Option<Why>) {
        if let Some(why) = quiet {
            self.quiet.add(why);
            return;
        }
        self.loud.add_obj(o);
        if self.oldest.len() < TEXT_LIMIT {
            // Out of memory it is counted, not listed.
            if oom::fallibly(|| self.oldest.try_reserve(1)).is_some() {
                self.oldest.push(Aged(*o));
            }
        } else if self.oldest.peek().is_some_and(|top| age(o) < age(&top.0)) {
            self.oldest.pop();
            self.oldest.push(Aged(*o));
        }
    }
}

/// Appends the listed objects as a tree: each PD (listed, or fetched as the
/// parent of a listed object) followed by the listed objects on it, then
/// the rest, oldest first; then a line counting what was not listed.
fn tree(out: &mut oom::Text, tally: &Tally, indent: &str, sup: &mut Suppressor) {
    // The listed objects and, at most as many, the parents they hang under.
    let mut listed: Vec<Obj> = Vec::new();
    if oom::fallibly(|| listed.try_reserve_exact(2 * tally.oldest.len())).is_none() {
        out.truncated = true;
        return;
    }
    listed.extend(tally.oldest.iter().map(|a| a.0));
    let mut shown = Counts::default();
    listed.iter().for_each(|o| shown.add_obj(o));
    // Parents not listed themselves: fetch them so their children hang
    // under them (only if they belong to the same context, closed or not).
    for i in 0..listed.len() {
        let o = listed[i];
        if !on_pd(&o) || listed.iter().any(|p| p.addr == o.parent) {
            continue;
        }
        if let Some(p) = objects::get(o.parent)
            .filter(|p| is_pd(p) && p.ctx == o.ctx && p.is_zombie() == o.is_zombie())
        {
            if sup.obj(&p).is_none() {
                shown.add_obj(&p);
            }
            listed.push(p);
        }
    }
    listed.sort_by_key(age);
    let under = |o: &Obj| on_pd(o) && listed.iter().any(|p| is_pd(p) && p.addr == o.parent);
    let line = |out: &mut oom::Text, o: &Obj, depth: &str, sup: &mut Suppressor| {
        let _ = write!(out, "\n{indent}{depth}{}", Brief(o));
        if on_pd(o) && depth.is_empty() && o.parent != 0 {
            let _ = write!(out, " on pd {:#x}", o.parent);
        }
        let _ = write!(out, "{}", why_text(sup.obj(o)));
        if let Some(frames) = frames(o) {
            for fr in frames.iter().take(32) {
                let _ = write!(out, "\n{indent}{depth}      {fr}");
            }
        }
    };
    for o in listed.iter().filter(|o| !under(o)) {
        line(out, o, "", sup);
        if is_pd(o) {
            for c in listed.iter().filter(|c| under(c) && c.parent == o.addr) {
                line(out, c, "  ", sup);
            }
        }
    }
    let rest = tally.loud.minus(&shown);
    if rest.total() > 0 {
        let _ = write!(
            out,
            "\n{indent}... and {} more ({rest}); IBV_SHIM_REPORT=<file> lists them all",
            rest.total()
        );
    }
}

/// " on rxe0 (guid 0002c90300445566)".
struct DeviceText<'a>(Option<&'a ContextInfo>);

impl fmt::Display for DeviceText<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let info = self.0;
        match info.and_then(|i| i.device_name.as_deref()) {
            Some(name) => match info.and_then(|i| i.guid) {
                Some(g) => write!(f, " on {name} (guid {:016x})", u64::from_be(g)),
                None => write!(f, " on {name}"),
            },
            None => Ok(()),
        }
    }
}

fn device_text(info: Option<&ContextInfo>) -> DeviceText<'_> {
    DeviceText(info)
}

// --- suppressions --------------------------------------------------------------------

/// One `leak:<kind>:<pattern>` line.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Suppression {
    /// `None` for `*`.
    pub kind: Option<String>,
    pub pattern: String,
    /// For a built-in rule: the library that keeps such objects on purpose
    /// (the rule then matches the creation site's module only).
    pub owner: Option<&'static str>,
}

/// Why an object left allocated is not a leak.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Why {
    /// A rule of `IBV_SHIM_SUPPRESS`.
    User,
    /// A built-in rule: this library keeps it for the life of the process.
    Kept(&'static str),
}

/// The built-in rules (`leak:KIND:MODULE  LIBRARY  why`), shared with the
/// launcher's `--list-default-suppressions`.
pub const DEFAULT_SUPPRESSIONS: &str = include_str!("default_suppressions.txt");

/// The built-in rules, parsed; a malformed line is a bug caught by a test.
pub fn default_suppressions() -> Vec<Suppression> {
    DEFAULT_SUPPRESSIONS
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty() && !l.starts_with('#'))
        .filter_map(|l| {
            let mut words = l.split_whitespace();
            let (rule, owner) = (words.next()?, words.next()?);
            let (mut list, _) = parse_suppressions(rule);
            let mut s = list.pop()?;
            s.owner = Some(owner);
            Some(s)
        })
        .collect()
}

/// Parses a suppressions file; bad lines are returned as problems.
pub fn parse_suppressions(text: &str) -> (Vec<Suppression>, Vec<String>) {
    let (mut out, mut problems) = (Vec::new(), Vec::new());
    for (n, line) in text.lines().enumerate() {
        let line = line.trim();
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        let parsed = line
            .strip_prefix("leak:")
            .and_then(|rest| rest.split_once(':'));
        match parsed {
            Some((kind, pattern))
                if !pattern.is_empty() && (kind == "*" || KINDS.contains(&kind)) =>
            {
                out.push(Suppression {
                    kind: (kind != "*").then(|| kind.to_string()),
                    pattern: pattern.to_string(),
                    owner: None,
                })
            }
            _ => problems.push(format!(
                "line {}: {line:?} is not leak:<kind>:<pattern> with kind one of *, {}",
                n + 1,
                KINDS.join(", ")
            )),
        }
    }
    (out, problems)
}

/// `*` matches any run of characters; everything else is literal.
pub fn glob(pattern: &str, text: &str) -> bool {
    let (p, t) = (pattern.as_bytes(), text.as_bytes());
    let (mut pi, mut ti) = (0, 0);
    let mut star: Option<(usize, usize)> = None;
    while ti < t.len() {
        if pi < p.len() && p[pi] == b'*' {
            star = Some((pi, ti));
            pi += 1;
        } else if pi < p.len() && p[pi] == t[ti] {
            pi += 1;
            ti += 1;
        } else if let Some((sp, st)) = star {
            pi = sp + 1;
            ti = st + 1;
            star = Some((sp, st + 1));
        } else {
            return false;
        }
    }
    p[pi..].iter().all(|&c| c == b'*')
}

impl Suppression {
    /// Does it cover an object of `kind` created at `site` (or, with a
    /// backtrace, any frame of it)? The pattern is matched against the
    /// module's path, its file name, and the symbol.
    pub fn matches(&self, kind: &str, site: &Site, frames: &[String]) -> bool {
        if self.kind.as_deref().is_some_and(|k| k != kind) {
            return false;
        }
        let m = |s: &str| glob(&self.pattern, s);
        if let Some(module) = &site.module {
            if m(module) || m(module.rsplit('/').next().unwrap_or(module)) {
                return true;
            }
        }
        if self.owner.is_some() {
            // A library's own objects are those its own code created.
            return false;
        }
        if site.symbol.as_deref().is_some_and(m) {
            return true;
        }
        frames.iter().any(|f| m(f.split(" (").next().unwrap_or(f)))
    }
}

static SUPPRESSIONS: Lazy<Vec<Suppression>> = Lazy::new(|| {
    let Some(path) = &config::get().suppress else {
        return Vec::new();
    };
    match crate::files::read_small(path, crate::files::SUPPRESS_LIMIT) {
        Ok(bytes) => {
            let (list, problems) = parse_suppressions(&String::from_utf8_lossy(&bytes));
            for p in problems {
                crate::log!(
                    Level::Warn,
                    "IBV_SHIM_SUPPRESS={}: {p}; ignored",
                    path.to_string_lossy()
                );
            }
            list
        }
        Err(e) => {
            crate::log!(
                Level::Warn,
                "IBV_SHIM_SUPPRESS={}: {e}; no suppressions",
                path.to_string_lossy()
            );
            Vec::new()
        }
    }
});

/// The built-in rules in force (none with `IBV_SHIM_DEFAULT_SUPPRESSIONS=0`).
static DEFAULTS: Lazy<Vec<Suppression>> = Lazy::new(|| {
    if config::get().default_suppressions {
        default_suppressions()
    } else {
        Vec::new()
    }
});

/// Decides suppression, once per kind and creation site (objects with a
/// backtrace are matched one by one against the user's rules).
struct Suppressor {
    cache: HashMap<(&'static str, usize), Option<Why>>,
}

impl Suppressor {
    fn new() -> Suppressor {
        Suppressor {
            cache: HashMap::new(),
        }
    }

    fn site(&mut self, kind: &'static str, caller: usize) -> Option<Why> {
        // The usual case (no rules of the user's, none of the built-in
        // ones for this kind) costs no lookup per object: a report may
        // walk a million of them.
        if SUPPRESSIONS.is_empty()
            && !DEFAULTS
                .iter()
                .any(|x| x.kind.as_deref().map_or(true, |k| k == kind))
        {
            return None;
        }
        if let Some(why) = self.cache.get(&(kind, caller)) {
            return *why;
        }
        let s = site(caller);
        // The user's rules first: they name the reason themselves.
        let why = if SUPPRESSIONS.iter().any(|x| x.matches(kind, &s, &[])) {
            Some(Why::User)
        } else {
            DEFAULTS
                .iter()
                .find(|x| x.matches(kind, &s, &[]))
                .and_then(|x| x.owner.map(Why::Kept))
        };
        // Out of memory it is decided again next time, not cached.
        if oom::quietly(|| self.cache.try_reserve(1)).is_some() {
            self.cache.insert((kind, caller), why);
        }
        why
    }

    fn obj(&mut self, o: &Obj) -> Option<Why> {
        if SUPPRESSIONS.is_empty() && DEFAULTS.is_empty() {
            return None;
        }
        match frames(o) {
            Some(frames) => {
                let s = site(o.caller);
                if SUPPRESSIONS
                    .iter()
                    .any(|x| x.matches(o.kind().name(), &s, &frames))
                {
                    return Some(Why::User);
                }
                self.site(o.kind().name(), o.caller)
            }
            None => self.site(o.kind().name(), o.caller),
        }
    }
}

/// Objects left allocated that are not leaks, by why.
#[derive(Clone, Default)]
struct Quiet {
    user: usize,
    /// By library, in the order first seen.
    kept: Vec<(&'static str, usize)>,
}

impl Quiet {
    fn add(&mut self, why: Why) {
        match why {
            Why::User => self.user += 1,
            Why::Kept(owner) => match self.kept.iter_mut().find(|(o, _)| *o == owner) {
                Some((_, n)) => *n += 1,
                None => {
                    if oom::fallibly(|| self.kept.try_reserve(1)).is_some() {
                        self.kept.push((owner, 1));
                    }
                }
            },
        }
    }

    fn total(&self) -> usize {
        self.user + self.kept.iter().map(|(_, n)| n).sum::<usize>()
    }
}

/// "2 suppressed by IBV_SHIM_SUPPRESS, 3 kept by librdmacm (suppressed by
/// default)"; `{:#}` says "2 more suppressed ...".
impl fmt::Display for Quiet {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let more = if f.alternate() { " more" } else { "" };
        let mut sep = "";
        if self.user > 0 {
            write!(f, "{}{more} suppressed by IBV_SHIM_SUPPRESS", self.user)?;
            sep = ", ";
        }
        for (owner, n) in &self.kept {
            write!(f, "{sep}{n}{more} kept by {owner} (suppressed by default)")?;
            sep = ", ";
        }
        Ok(())
    }
}

/// "; not leaks: 3 kept by librdmacm (suppressed by default)", or nothing.
struct NotLeaks<'a>(&'a Quiet);

impl fmt::Display for NotLeaks<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.0.total() {
            0 => Ok(()),
            _ => write!(f, "; not leaks: {}", self.0),
        }
    }
}

/// " (suppressed)" or " (kept by librdmacm, suppressed by default)".
struct WhyText(Option<Why>);

impl fmt::Display for WhyText {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.0 {
            None => Ok(()),
            Some(Why::User) => f.write_str(" (suppressed)"),
            Some(Why::Kept(owner)) => write!(f, " (kept by {owner}, suppressed by default)"),
        }
    }
}

fn why_text(why: Option<Why>) -> WhyText {
    WhyText(why)
}

// --- the report at close --------------------------------------------------------------------

type GetDeviceGuid = unsafe extern "C" fn(*mut ibv_device) -> u64;
static GET_DEVICE_GUID: RealFn<GetDeviceGuid> = RealFn::new(c"ibv_get_device_guid");

/// The GUID of a device, from the real library (for the reports).
fn guid_of(device: *mut ibv_device) -> Option<u64> {
    let f = GET_DEVICE_GUID.get().ok()?;
    // SAFETY: device belongs to a context that is still open.
    Some(unsafe { f(device) }).filter(|&g| g != 0)
}

/// Before `ibv_close_device(ctx)` is forwarded: remember the device's name
/// and GUID for the reports (the device may be gone after the close).
pub fn context_closing(ctx: usize) {
    contexts::describe_device(ctx, guid_of);
}

/// Called after a context closed successfully: reports its orphans, which
/// stay tracked as zombies.
pub fn context_closed(ctx: usize) {
    let talk = crate::log::enabled(Level::Info) || crate::log::enabled(Level::Warn);
    let dropped = oom::dropped();
    let mut sup = Suppressor::new();
    let mut tally = Tally::default();
    let n = objects::finish_close(ctx, |o| {
        if talk {
            tally.add(o, sup.obj(o));
        }
    });
    if n == 0 {
        return;
    }
    contexts::entomb(ctx);
    if !talk {
        return;
    }
    let info = contexts::get(ctx);
    let loud = tally.loud;
    if loud.total() == 0 {
        crate::log!(
            Level::Info,
            "ibv_close_device({ctx:#x}){}: {} left allocated, none a leak: {}",
            device_text(info.as_ref()),
            plural(tally.quiet.total(), "object", "objects"),
            tally.quiet
        );
        return;
    }
    // The headline needs no memory; the tree under it may not fit.
    crate::log!(
        Level::Warn,
        "leak: ibv_close_device({ctx:#x}){}: {} created on this context {} never destroyed ({loud}). \
         They stay allocated and unusable; destroying them now fails with EINVAL:",
        device_text(info.as_ref()),
        plural(loud.total(), "object", "objects"),
        if loud.total() == 1 { "was" } else { "were" },
    );
    let mut text = oom::Text::default();
    tree(&mut text, &tally, "  ", &mut sup);
    if tally.quiet.total() > 0 {
        let _ = write!(text, "\n  ({:#}, not shown)", tally.quiet);
    }
    log_lines(&text);
    say_if_truncated(dropped);
}

/// Logs text made of `\n`-led lines, one log line each.
fn log_lines(text: &oom::Text) {
    crate::log::block(
        Level::Warn,
        text.text.strip_prefix('\n').unwrap_or(&text.text),
    );
}

/// After a report: if memory ran out while it was made, it says so (the
/// log line needs no memory).
fn say_if_truncated(dropped_before: usize) {
    if oom::dropped() != dropped_before {
        crate::log!(Level::Warn, "report truncated: out of memory");
    }
}

// --- the report at exit ----------------------------------------------------------------------

/// Wall-clock seconds of a CLOCK_MONOTONIC_COARSE millisecond stamp.
struct Clock {
    offset_ms: f64,
}

impl Clock {
    fn now() -> Clock {
        let mut ts = libc::timespec {
            tv_sec: 0,
            tv_nsec: 0,
        };
        // SAFETY: ts is a valid out-pointer.
        unsafe { libc::clock_gettime(libc::CLOCK_REALTIME, &mut ts) };
        let real = ts.tv_sec as f64 * 1000.0 + ts.tv_nsec as f64 / 1e6;
        Clock {
            offset_ms: real - objects::now_ms() as f64,
        }
    }

    fn wall(&self, mono_ms: u64) -> f64 {
        (mono_ms as f64 + self.offset_ms) / 1000.0
    }
}

/// How the exit report heads one context's objects.
#[derive(Clone, Copy, PartialEq, Eq)]
enum How {
    /// Never closed.
    Open,
    /// Closed with these objects still allocated (zombies).
    Closed,
    /// Not opened by this process (a parent's, inherited across fork).
    Foreign,
}

/// One context's objects at exit.
struct Group<'a> {
    ctx: usize,
    info: Option<&'a ContextInfo>,
    how: How,
    tally: Tally,
}

/// What the exit report covers, gathered in one pass over the table.
struct Inventory<'a> {
    /// Contexts never closed (and why not a leak, if not).
    open: Vec<(usize, &'a ContextInfo, Option<Why>)>,
    /// Device lists never freed (and why not a leak, if not).
    lists: Vec<(LiveList, Option<Why>)>,
    /// Objects by (context, zombie): open contexts in opening order, then
    /// zombies by closed context, then contexts this process never opened.
    groups: Vec<Group<'a>>,
    index: HashMap<(usize, bool), usize>,
    loud: Counts,
    quiet: Quiet,
    /// [`oom::dropped`] before the inventory was taken.
    dropped: usize,
}

impl<'a> Inventory<'a> {
    fn take(
        all: &'a [(usize, ContextInfo)],
        zombies: &'a [(usize, ContextInfo)],
        sup: &mut Suppressor,
    ) -> Self {
        let mut inv = Inventory {
            open: Vec::new(),
            lists: Vec::new(),
            groups: Vec::new(),
            index: HashMap::new(),
            loud: Counts::default(),
            quiet: Quiet::default(),
            dropped: oom::dropped(),
        };
        // Out of memory, what cannot be held is counted but not listed
        // (the report then says it is truncated).
        for (ctx, c) in all.iter().filter(|(_, c)| c.open) {
            let quiet = sup.site("context", c.caller);
            inv.count("context", quiet);
            if oom::fallibly(|| inv.open.try_reserve(1)).is_some() {
                inv.open.push((*ctx, c, quiet));
            }
            inv.group(*ctx, false, Some(c), How::Open);
        }
        for l in devices::live_lists() {
            let quiet = sup.site("device_list", l.caller);
            inv.count("device_list", quiet);
            if oom::fallibly(|| inv.lists.try_reserve(1)).is_some() {
                inv.lists.push((l, quiet));
            }
        }
        for (ctx, c) in zombies.iter().rev() {
            // The last context closed at an address owns its zombies.
            if !inv.index.contains_key(&(*ctx, true)) {
                inv.group(*ctx, true, Some(c), How::Closed);
            }
        }
        objects::for_each(|o| {
            let quiet = sup.obj(o);
            inv.count(o.kind().name(), quiet);
            let key = (o.ctx, o.is_zombie());
            let i = match inv.index.get(&key) {
                Some(&i) => Some(i),
                None => inv.group(
                    o.ctx,
                    o.is_zombie(),
                    None,
                    if o.is_zombie() {
                        How::Closed
                    } else {
                        How::Foreign
                    },
                ),
            };
            if let Some(i) = i {
                inv.groups[i].tally.add(o, quiet);
            }
        });
        inv
    }

    fn count(&mut self, kind: &str, quiet: Option<Why>) {
        if let Some(why) = quiet {
            self.quiet.add(why);
        } else {
            self.loud.add(kind);
        }
    }

    fn group(
        &mut self,
        ctx: usize,
        zombie: bool,
        info: Option<&'a ContextInfo>,
        how: How,
    ) -> Option<usize> {
        oom::fallibly(|| self.groups.try_reserve(1))?;
        oom::fallibly(|| self.index.try_reserve(1))?;
        self.groups.push(Group {
            ctx,
            info,
            how,
            tally: Tally::default(),
        });
        self.index.insert((ctx, zombie), self.groups.len() - 1);
        Some(self.groups.len() - 1)
    }

    /// The context an object is reported under.
    fn info_of(&self, o: &Obj) -> Option<&'a ContextInfo> {
        self.index
            .get(&(o.ctx, o.is_zombie()))
            .and_then(|&i| self.groups[i].info)
    }
}

/// Said instead of the exit report when the process exits from a signal
/// handler that interrupted a verbs call (see `lifecycle`). Allocates
/// nothing: the heap may be halfway through a change, so the line is left
/// out when the log file is not open yet.
pub fn skipped_at_exit() {
    if USED.load(Ordering::Relaxed) && crate::log::writable_without_allocating() {
        crate::log!(
            Level::Warn,
            "no leak report at exit: the process exited from a signal handler that \
             interrupted a verbs call, whose state (and the heap's) may be half changed"
        );
    }
}

/// The exit report (see the module docs); then the JSON document and the
/// leak exit code.
pub fn at_exit() {
    if !USED.load(Ordering::Relaxed) {
        return;
    }
    // Read the device names while the open contexts still are.
    for (ctx, c) in contexts::all() {
        if c.open {
            contexts::describe_device(ctx, guid_of);
        }
    }
    let all = contexts::all();
    let zombies = contexts::zombies();
    let mut sup = Suppressor::new();
    let inv = Inventory::take(&all, &zombies, &mut sup);
    let leaked = inv.loud.total() > 0;

    if leaked && crate::log::enabled(Level::Warn) {
        let loud = inv.loud;
        crate::log!(
            Level::Warn,
            "leak report at exit: {} never freed ({loud}){}:",
            plural(loud.total(), "thing was", "things were"),
            NotLeaks(&inv.quiet)
        );
        let mut text = oom::Text::default();
        for g in &inv.groups {
            let owned = g.tally.loud;
            let ctx = g.ctx;
            match (g.how, g.info) {
                (How::Open, Some(c)) => {
                    let quiet = inv
                        .open
                        .iter()
                        .find(|(k, _, _)| *k == ctx)
                        .and_then(|(_, _, q)| *q);
                    if quiet.is_some() && owned.total() == 0 {
                        continue;
                    }
                    let _ = write!(
                        text,
                        "\n  context {ctx:#x}{} opened by thread {} at {} was never closed{}",
                        device_text(g.info),
                        c.tid,
                        site(c.caller),
                        why_text(quiet)
                    );
                    if owned.total() > 0 {
                        let _ = write!(
                            text,
                            "; it still owns {} ({owned}):",
                            plural(owned.total(), "object", "objects")
                        );
                    }
                }
                (How::Closed, _) if owned.total() > 0 => {
                    let _ = write!(
                        text,
                        "\n  context {ctx:#x}{} was closed with {} still allocated ({owned}), reported at close:",
                        device_text(g.info),
                        plural(owned.total(), "object", "objects"),
                    );
                }
                (How::Foreign, _) if owned.total() > 0 => {
                    let _ = write!(
                        text,
                        "\n  context {ctx:#x} (not opened by this process) has {} never destroyed ({owned}):",
                        plural(owned.total(), "object", "objects"),
                    );
                }
                _ => continue,
            }
            tree(&mut text, &g.tally, "    ", &mut sup);
        }
        for (l, _) in inv.lists.iter().filter(|(_, quiet)| quiet.is_none()) {
            let _ = write!(
                text,
                "\n  device list {:#x} ({}) from ibv_get_device_list by thread {} at {} was never freed",
                l.list,
                plural(l.count, "device", "devices"),
                l.tid,
                site(l.caller)
            );
        }
        log_lines(&text);
    } else if inv.quiet.total() > 0 {
        crate::log!(
            Level::Info,
            "exit: {} left allocated, none a leak: {}",
            plural(inv.quiet.total(), "thing", "things"),
            inv.quiet
        );
    }

    if let Some(path) = &config::get().report {
        if let Err(e) = write_json(path, &inv, &mut sup) {
            crate::log!(
                Level::Error,
                "IBV_SHIM_REPORT={}: cannot write the report: {e}",
                path.to_string_lossy()
            );
        }
    }

    say_if_truncated(inv.dropped);

    if let (true, Some(code)) = (leaked, config::get().leak_exitcode) {
        // Destructors run before stdio is flushed at exit, and _exit skips
        // the flush: flush the program's output first.
        // SAFETY: fflush(NULL) flushes every stream; _exit never returns.
        unsafe {
            libc::fflush(std::ptr::null_mut());
            libc::_exit(code);
        }
    }
}

// --- the JSON document ---------------------------------------------------------------------

/// Appends `s` as a JSON string.
fn json_str(out: &mut Vec<u8>, s: &str) {
    out.push(b'"');
    for c in s.chars() {
        match c {
            '"' => out.extend_from_slice(b"\\\""),
            '\\' => out.extend_from_slice(b"\\\\"),
            '\n' => out.extend_from_slice(b"\\n"),
            '\t' => out.extend_from_slice(b"\\t"),
            c if (c as u32) < 0x20 => {
                let _ = write!(out, "\\u{:04x}", c as u32);
            }
            c => {
                let mut b = [0; 4];
                out.extend_from_slice(c.encode_utf8(&mut b).as_bytes());
            }
        }
    }
    out.push(b'"');
}

fn json_opt_str(out: &mut Vec<u8>, s: Option<&str>) {
    match s {
        Some(s) => json_str(out, s),
        None => out.extend_from_slice(b"null"),
    }
}

/// Appends a decimal integer (no formatting machinery: 1M objects).
fn json_u64(out: &mut Vec<u8>, mut v: u64) {
    let mut b = [0u8; 20];
    let mut i = b.len();
    loop {
        i -= 1;
        b[i] = b'0' + (v % 10) as u8;
        v /= 10;
        if v == 0 {
            break;
        }
    }
    out.extend_from_slice(&b[i..]);
}

fn json_i64(out: &mut Vec<u8>, v: i64) {
    if v < 0 {
        out.push(b'-');
    }
    json_u64(out, v.unsigned_abs());
}

/// Appends `"0x..."`, or null for 0 when `nullable`.
fn json_hex(out: &mut Vec<u8>, v: u64, nullable: bool) {
    if v == 0 && nullable {
        out.extend_from_slice(b"null");
        return;
    }
    const HEX: &[u8; 16] = b"0123456789abcdef";
    let mut b = [0u8; 16];
    let mut i = b.len();
    let mut v = v;
    loop {
        i -= 1;
        b[i] = HEX[(v & 15) as usize];
        v >>= 4;
        if v == 0 {
            break;
        }
    }
    out.extend_from_slice(b"\"0x");
    out.extend_from_slice(&b[i..]);
    out.push(b'"');
}

/// Seconds with millisecond precision (the stamps are milliseconds).
fn json_secs(out: &mut Vec<u8>, secs: f64) {
    let ms = (secs * 1000.0).round().max(0.0) as u64;
    json_u64(out, ms / 1000);
    out.push(b'.');
    let frac = ms % 1000;
    out.extend_from_slice(&[
        b'0' + (frac / 100) as u8,
        b'0' + (frac / 10 % 10) as u8,
        b'0' + (frac % 10) as u8,
    ]);
}

/// `,"key":` (or without the comma when `first`).
fn json_key(out: &mut Vec<u8>, key: &str, first: bool) {
    if !first {
        out.push(b',');
    }
    out.push(b'"');
    out.extend_from_slice(key.as_bytes());
    out.extend_from_slice(b"\":");
}

/// The `fields` object of a tracked object.
fn json_fields(out: &mut Vec<u8>, o: &Obj) {
    let (lkey, rkey) = (o.c as u32 as u64, o.c >> 32);
    out.push(b'{');
    match o.kind() {
        Kind::Pd | Kind::ImportedPd => {
            json_key(out, "handle", true);
            json_u64(out, o.a);
        }
        Kind::Mr => {
            json_key(out, "addr", true);
            json_hex(out, o.a, false);
            json_key(out, "length", false);
            json_u64(out, o.b);
            json_key(out, "lkey", false);
            json_u64(out, lkey);
            json_key(out, "rkey", false);
            json_u64(out, rkey);
            json_key(out, "access", false);
            json_u64(out, o.x as u64);
            json_key(out, "via", false);
            json_str(out, MR_VIA.get(o.sub() as usize).unwrap_or(&"ibv_reg_mr"));
        }
        Kind::Cq => {
            json_key(out, "cqe", true);
            json_i64(out, o.x as i32 as i64);
            json_key(out, "comp_vector", false);
            json_i64(out, o.a as u32 as i32 as i64);
        }
        Kind::CompChannel => {
            json_key(out, "fd", true);
            json_i64(out, o.x as i32 as i64);
        }
        Kind::Srq => {
            json_key(out, "max_wr", true);
            json_u64(out, o.x as u64);
            json_key(out, "max_sge", false);
            json_u64(out, o.a);
            json_key(out, "srq_limit", false);
            json_u64(out, o.b);
        }
        Kind::Qp => {
            json_key(out, "qp_num", true);
            json_u64(out, o.x as u64);
            json_key(out, "qp_type", false);
            json_str(out, &qp_type(o.sub()));
            json_key(out, "send_cq", false);
            json_hex(out, o.a, true);
            json_key(out, "recv_cq", false);
            json_hex(out, o.b, true);
            json_key(out, "srq", false);
            json_hex(out, o.c, true);
        }
        Kind::Ah => {
            json_key(out, "dlid", true);
            json_u64(out, o.a);
            json_key(out, "port_num", false);
            json_u64(out, o.b);
            json_key(out, "sl", false);
            json_u64(out, o.c & 0xff);
            json_key(out, "is_global", false);
            out.extend_from_slice(if o.c >> 8 & 1 != 0 { b"true" } else { b"false" });
            json_key(out, "via", false);
            json_str(
                out,
                AH_VIA.get(o.sub() as usize).unwrap_or(&"ibv_create_ah"),
            );
        }
        Kind::ImportedMr => {
            json_key(out, "handle", true);
            json_u64(out, o.x as u64);
            json_key(out, "addr", false);
            json_hex(out, o.a, false);
            json_key(out, "length", false);
            json_u64(out, o.b);
            json_key(out, "lkey", false);
            json_u64(out, lkey);
            json_key(out, "rkey", false);
            json_u64(out, rkey);
        }
    }
    out.push(b'}');
}

/// `"module":..,"symbol":..,"offset":..` of a site, cached per address.
fn json_site(cache: &mut HashMap<usize, Vec<u8>>, caller: usize) -> &[u8] {
    cache.entry(caller).or_insert_with(|| {
        let s = site(caller);
        let mut out = Vec::new();
        json_key(&mut out, "module", false);
        json_opt_str(&mut out, s.module.as_deref());
        json_key(&mut out, "symbol", false);
        json_opt_str(&mut out, s.symbol.as_deref());
        json_key(&mut out, "offset", false);
        match s.offset {
            Some(o) => json_u64(&mut out, o),
            None => out.extend_from_slice(b"null"),
        }
        out
    })
}

/// `"context":..,"device":..,"guid":..`.
fn json_context(out: &mut Vec<u8>, ctx: usize, info: Option<&ContextInfo>) {
    json_key(out, "context", false);
    json_hex(out, ctx as u64, true);
    json_key(out, "device", false);
    json_opt_str(out, info.and_then(|i| i.device_name.as_deref()));
    json_key(out, "guid", false);
    match info.and_then(|i| i.guid) {
        Some(g) => json_str(out, &format!("{:016x}", u64::from_be(g))),
        None => out.extend_from_slice(b"null"),
    }
}

#[allow(clippy::too_many_arguments)]
fn json_created(
    out: &mut Vec<u8>,
    sites: &mut HashMap<usize, Vec<u8>>,
    tid: i64,
    time: Option<f64>,
    caller: usize,
    frames: Option<Vec<String>>,
) {
    json_key(out, "created", false);
    out.push(b'{');
    json_key(out, "thread", true);
    json_i64(out, tid);
    json_key(out, "time", false);
    match time {
        Some(t) => json_secs(out, t),
        None => out.extend_from_slice(b"null"),
    }
    out.extend_from_slice(json_site(sites, caller));
    json_key(out, "backtrace", false);
    match frames {
        Some(frames) => {
            out.push(b'[');
            for (i, f) in frames.iter().enumerate() {
                if i > 0 {
                    out.push(b',');
                }
                json_str(out, f);
            }
            out.push(b']');
        }
        None => out.extend_from_slice(b"null"),
    }
    out.push(b'}');
}

/// The JSON writer's buffer and the length at which it is written out:
/// ~1 MiB (a million objects make ~400 MB), less when memory is short.
/// Each object fits in the room kept past the mark.
fn json_buffer() -> (Vec<u8>, usize) {
    let mut out = Vec::new();
    for flush in [1 << 20, 64 << 10, 8 << 10] {
        let room = flush + flush / 4;
        if oom::quietly(|| out.try_reserve_exact(room)).is_some() {
            return (out, flush);
        }
    }
    // Nothing to spare: one object at a time, on the shim's reserve.
    (out, 0)
}

/// Writes the JSON document (see `docs/leak-report.schema.json`) to a
/// temporary file renamed into place, so a reader never sees half of it.
fn write_json(template: &OsString, inv: &Inventory, sup: &mut Suppressor) -> std::io::Result<()> {
    let path = std::path::PathBuf::from(OsString::from_vec(report_path(template).into_bytes()));
    // Written beside and renamed into place, so a reader never sees half of
    // it and nothing is written through a link (see `files`).
    let mut file = crate::files::AtomicFile::create(path.as_os_str())?;
    let clock = Clock::now();
    // Formatted straight into one large buffer, written when full: a
    // million objects make ~400 MB.
    let (mut out, flush) = json_buffer();

    out.extend_from_slice(b"{\"schema\":");
    json_str(&mut out, SCHEMA);
    json_key(&mut out, "pid", false);
    json_u64(&mut out, std::process::id() as u64);
    json_key(&mut out, "program", false);
    json_str(&mut out, &program());
    json_key(&mut out, "leaked", false);
    out.extend_from_slice(if inv.loud.total() > 0 {
        b"true"
    } else {
        b"false"
    });
    json_key(&mut out, "totals", false);
    out.push(b'{');
    for (i, name) in KINDS.iter().enumerate() {
        json_key(&mut out, name, i == 0);
        json_u64(&mut out, inv.loud.get(name) as u64);
    }
    out.extend_from_slice(b"},\"objects\":[");

    let mut sites: HashMap<usize, Vec<u8>> = HashMap::new();
    let mut first = true;
    let mut start = |out: &mut Vec<u8>, kind: &str, handle: usize| {
        out.extend_from_slice(if first {
            b"\n{\"kind\":\""
        } else {
            b",\n{\"kind\":\""
        });
        first = false;
        // Kind names need no escaping.
        out.extend_from_slice(kind.as_bytes());
        out.push(b'"');
        json_key(out, "handle", false);
        json_hex(out, handle as u64, false);
    };
    let end = |out: &mut Vec<u8>, found: &str, quiet: Option<Why>| {
        out.extend_from_slice(b",\"found\":\"");
        out.extend_from_slice(found.as_bytes());
        out.extend_from_slice(if quiet.is_some() {
            b"\",\"suppressed\":true,\"kept_by\":"
        } else {
            b"\",\"suppressed\":false,\"kept_by\":"
        });
        match quiet {
            Some(Why::Kept(owner)) => json_str(out, owner),
            _ => out.extend_from_slice(b"null"),
        }
        out.push(b'}');
    };
    for (ctx, c, quiet) in &inv.open {
        start(&mut out, "context", *ctx);
        json_context(&mut out, *ctx, Some(c));
        out.extend_from_slice(b",\"parent\":null,\"fields\":");
        out.extend_from_slice(if c.imported {
            b"{\"imported\":true}"
        } else {
            b"{\"imported\":false}"
        });
        json_created(
            &mut out,
            &mut sites,
            c.tid as i64,
            Some(clock.wall(c.time_ms)),
            c.caller,
            None,
        );
        end(&mut out, "exit", *quiet);
    }
    for (l, quiet) in &inv.lists {
        start(&mut out, "device_list", l.list);
        json_context(&mut out, 0, None);
        out.extend_from_slice(b",\"parent\":null,\"fields\":{\"count\":");
        json_u64(&mut out, l.count as u64);
        out.push(b'}');
        json_created(
            &mut out,
            &mut sites,
            l.tid as i64,
            Some(clock.wall(l.time_ms)),
            l.caller,
            None,
        );
        end(&mut out, "exit", *quiet);
    }
    // `"context":..,"device":..,"guid":..` per context (and zombie-ness);
    // neighbours in the table mostly share one, so keep the last at hand.
    let mut contexts: HashMap<(usize, bool), Vec<u8>> = HashMap::new();
    let (mut last_ctx, mut ctx_json) = (None, Vec::new());
    let mut failed = Ok(());
    objects::for_each(|o| {
        if failed.is_err() {
            return;
        }
        start(&mut out, o.kind().name(), o.addr);
        let key = (o.ctx, o.is_zombie());
        if last_ctx != Some(key) {
            last_ctx = Some(key);
            ctx_json = contexts
                .entry(key)
                .or_insert_with(|| {
                    let mut v = Vec::new();
                    json_context(&mut v, o.ctx, inv.info_of(o));
                    v
                })
                .clone();
        }
        out.extend_from_slice(&ctx_json);
        json_key(&mut out, "parent", false);
        json_hex(&mut out, o.parent as u64, true);
        json_key(&mut out, "fields", false);
        json_fields(&mut out, o);
        json_created(
            &mut out,
            &mut sites,
            o.tid as i64,
            Some(clock.wall(o.time_ms())),
            o.caller,
            frames(o),
        );
        end(
            &mut out,
            if o.is_zombie() { "close" } else { "exit" },
            sup.obj(o),
        );
        if out.len() >= flush {
            failed = file.write_all(&out);
            out.clear();
        }
    });
    failed?;
    out.extend_from_slice(b"\n],\"truncated\":");
    match oom::dropped() != inv.dropped {
        true => json_str(&mut out, "out of memory"),
        false => out.extend_from_slice(b"null"),
    }
    out.extend_from_slice(b"}\n");
    file.write_all(&out)?;
    file.commit()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn globs() {
        assert!(glob("*", ""));
        assert!(glob("libfoo*", "libfoo.so.1"));
        assert!(glob("*/libfoo.so*", "/usr/lib/libfoo.so.1"));
        assert!(glob("leak_*_pd", "leak_the_pd"));
        assert!(!glob("leak_*_pd", "leak_the_pdx"));
        assert!(glob("a*b*c", "aXbYbZc"));
        assert!(!glob("abc", "abcd"));
    }

    #[test]
    fn suppression_lines() {
        let (s, bad) =
            parse_suppressions("# comment\n\nleak:mr:libfoo*\nleak:*:main\nleak:bogus:x\nnope\n");
        assert_eq!(s.len(), 2);
        assert_eq!(s[0].kind.as_deref(), Some("mr"));
        assert_eq!(s[1].kind, None);
        assert_eq!(bad.len(), 2);
        let site = Site {
            module: Some("/usr/lib/libfoo.so.1".into()),
            symbol: Some("init".into()),
            offset: Some(4),
        };
        assert!(s[0].matches("mr", &site, &[]));
        assert!(!s[0].matches("pd", &site, &[]));
        assert!(s[1].matches(
            "qp",
            &Site {
                symbol: Some("main".into()),
                ..Site::default()
            },
            &[]
        ));
        assert!(s[1].matches("qp", &Site::default(), &["main (x.c:3)".into()]));
    }

    #[test]
    fn the_default_rules_parse_and_match_only_their_library_s_own_calls() {
        let d = default_suppressions();
        let rules = DEFAULT_SUPPRESSIONS
            .lines()
            .filter(|l| !l.trim().is_empty() && !l.starts_with('#'))
            .count();
        assert_eq!(d.len(), rules, "a built-in rule did not parse");
        assert!(d.iter().all(|s| s.owner == Some("librdmacm")));
        let rdmacm = Site {
            module: Some("/lib/x86_64-linux-gnu/librdmacm.so.1".into()),
            symbol: None,
            offset: Some(0x5c43),
        };
        let program = Site {
            module: Some("/tmp/rping".into()),
            symbol: Some("librdmacm.so.1".into()),
            offset: Some(1),
        };
        for kind in ["context", "device_list", "pd"] {
            assert!(d.iter().any(|s| s.matches(kind, &rdmacm, &[])), "{kind}");
            // The program's own objects, whatever its symbols are called.
            assert!(!d.iter().any(|s| s.matches(kind, &program, &[])), "{kind}");
        }
        for kind in ["mr", "cq", "qp", "comp_channel"] {
            assert!(!d.iter().any(|s| s.matches(kind, &rdmacm, &[])), "{kind}");
        }
        let mut q = Quiet::default();
        q.add(Why::Kept("librdmacm"));
        q.add(Why::User);
        q.add(Why::Kept("librdmacm"));
        assert_eq!(
            q.to_string(),
            "1 suppressed by IBV_SHIM_SUPPRESS, 2 kept by librdmacm (suppressed by default)"
        );
    }

    #[test]
    fn a_shared_report_name_gets_the_pid_before_its_extension() {
        let w = |p: &str| String::from_utf8(with_pid(p.as_bytes())).unwrap();
        assert_eq!(w("/t/r.json"), "/t/r.%p.json");
        assert_eq!(w("/t/report"), "/t/report.%p");
        assert_eq!(w("/t.d/report"), "/t.d/report.%p");
        assert_eq!(w("/t/.hidden"), "/t/.hidden.%p");
        assert_eq!(w("r.x.json"), "r.x.%p.json");
    }

    #[test]
    fn json_numbers() {
        let mut v = Vec::new();
        json_u64(&mut v, 0);
        v.push(b' ');
        json_u64(&mut v, 18446744073709551615);
        v.push(b' ');
        json_i64(&mut v, -42);
        v.push(b' ');
        json_hex(&mut v, 0x7f00_1234, false);
        v.push(b' ');
        json_hex(&mut v, 0, true);
        v.push(b' ');
        json_secs(&mut v, 1732900000.1234);
        v.push(b' ');
        json_str(&mut v, "a\"b\\c\n\u{1}é");
        assert_eq!(
            String::from_utf8(v).unwrap(),
            "0 18446744073709551615 -42 \"0x7f001234\" null 1732900000.123 \"a\\\"b\\\\c\\n\\u0001é\""
        );
    }

    #[test]
    fn counts_are_in_report_order() {
        let mut c = Counts::default();
        ["mr", "pd", "mr", "context"]
            .into_iter()
            .for_each(|k| c.add(k));
        assert_eq!(c.to_string(), "1 context, 1 pd, 2 mr");
        let mr = Obj::new(Kind::Mr, 16, 0, 0, 0, 1);
        let mut d = Counts::default();
        d.add_obj(&mr);
        assert_eq!(d.get("mr"), 1);
        assert_eq!(d.to_string(), "1 mr");
    }

    #[test]
    fn the_listing_keeps_the_oldest_and_hangs_children_under_their_pd() {
        let mut objs = Vec::new();
        let pd = Obj::new(Kind::Pd, 0x100, 1, 0, 0, 1);
        let cq = Obj::new(Kind::Cq, 0x300, 1, 0, 0, 1);
        let stray = Obj::new(Kind::Qp, 0x400, 1, 0x999, 0, 1);
        objs.extend([cq, stray, pd]);
        for i in 0..300 {
            objs.push(Obj::new(Kind::Mr, 0x1000 + i * 16, 1, 0x100, 0, 1));
        }
        let mut tally = Tally::default();
        let mut sup = Suppressor::new();
        objs.iter().for_each(|o| tally.add(o, None));
        tally.add(&Obj::new(Kind::Ah, 0x500, 1, 0x100, 0, 1), Some(Why::User));
        assert_eq!(tally.loud.total(), 303);
        assert_eq!(tally.quiet.total(), 1);
        assert_eq!(tally.oldest.len(), TEXT_LIMIT);
        let mut t = oom::Text::default();
        tree(&mut t, &tally, "  ", &mut sup);
        let text = t.text;
        let lines: Vec<&str> = text.lines().skip(1).collect();
        assert!(lines[0].starts_with("  pd 0x100 "), "{text}");
        assert!(lines[1].starts_with("    mr 0x1000 "), "{text}");
        // Made in the same millisecond: by kind, so the PD and 99 MRs.
        assert_eq!(
            lines.iter().filter(|l| l.starts_with("    mr ")).count(),
            TEXT_LIMIT - 1,
            "{text}"
        );
        assert_eq!(
            *lines.last().unwrap(),
            "  ... and 203 more (201 mr, 1 cq, 1 qp); IBV_SHIM_REPORT=<file> lists them all"
        );
        // A small set is listed whole, strays marked with their PD.
        let mut tally = Tally::default();
        [cq, stray, pd, objs[3]]
            .iter()
            .for_each(|o| tally.add(o, None));
        let mut t = oom::Text::default();
        tree(&mut t, &tally, "", &mut sup);
        let text = t.text;
        let lines: Vec<&str> = text
            .lines()
            .skip(1)
            .map(|l| l.split(" (").next().unwrap())
            .collect();
        assert_eq!(
            lines,
            ["pd 0x100", "  mr 0x1000", "cq 0x300", "qp 0x400"],
            "{text}"
        );
        assert!(text.contains("on pd 0x999"), "{text}");
    }
}
