//! Fault injection (`IBV_SHIM_FAULTS`): make chosen verbs calls
//! fail without calling the real verb, so a program's error paths run and
//! the leak audit can say what their cleanup forgot.
//!
//! The hook is in a declared verb's `get()` (`real::slots`), which every instrumented export
//! calls before forwarding: while no rule is set it costs nothing (a real
//! function's cached slot is marked when rules are armed, see
//! `real::arm_faults`, and only a marked one takes the path to [`check`]). A call that fires a rule gets its errno back, which `get()` turns
//! into `real::Unavailable::Injected(errno)`, so the export returns its own
//! failure convention (NULL, -1, the errno value: `guard::CReturn`) with
//! that errno, and the real verb is not called. The grammar and the decision
//! are in [`rules`] (the `fault-rules` crate, shared with the
//! launcher).
//!
//! `IBV_SHIM_FAULT_COUNT=FILE` (set by `ibv-shim --fault-sweep`) appends one
//! line per injectable call, `PID VERB MODULE+0xOFFSET`, for the sweep to
//! plan its runs from.

pub use fault_rules as rules;

use std::collections::HashMap;
use std::ffi::{c_void, CStr, OsString};
use std::os::unix::ffi::OsStrExt;
use std::sync::atomic::{AtomicBool, AtomicPtr, AtomicUsize, Ordering};
use std::sync::OnceLock;

use once_cell::sync::Lazy;

use crate::guard::errno_name;
use crate::log::Level;
use crate::registry::lock::{mutex, Mutex};
use rules::{Rule, Target};

pub use rules::COMPLETIONS_WRAPPED;

/// A rule is set, or calls are being counted: the only thing an export
/// looks at when neither is.
static ARMED: AtomicBool = AtomicBool::new(false);
/// A `wc` rule is set.
static WC_ARMED: AtomicBool = AtomicBool::new(false);
/// A `cm_event` rule is set, or calls are being counted.
static CM_ARMED: AtomicBool = AtomicBool::new(false);

/// One injected failure, for the log and the JSON report.
#[derive(Clone, Debug)]
pub struct Injection {
    pub verb: &'static str,
    /// The call's number among those of this verb the rule matched.
    pub nth: u64,
    /// The errno given (verbs), or the status written (`wc`).
    pub errno: i32,
    pub status: Option<u32>,
    /// The event a `cm_event` rule replaced, and what with.
    pub replace: Option<rules::Replace>,
    pub rule: String,
    pub module: Option<String>,
    pub offset: u64,
}

/// The rules and the count file, set once as the shim is loaded and only
/// read afterwards (no lock to look at them).
struct Setup {
    rules: Vec<Rule>,
    /// `IBV_SHIM_FAULT_COUNT`'s descriptor, or -1.
    count_fd: i32,
}

static SETUP: OnceLock<Setup> = OnceLock::new();

#[derive(Default)]
struct State {
    /// Calls each rule matched, per verb.
    counts: HashMap<(usize, &'static str), u64>,
    injected: Vec<Injection>,
    /// Return address -> module and offset (`dladdr` scans symbol tables).
    sites: HashMap<usize, (Option<String>, u64)>,
}

// The registry's fork-resettable lock (see `lifecycle`). Never held
// across `dladdr` (the loader's lock) or a write.
static STATE: Lazy<Mutex<State>> = Lazy::new(|| mutex(State::default()));

/// Reads `IBV_SHIM_FAULTS` and `IBV_SHIM_FAULT_COUNT` as the shim is
/// loaded. A wrong rule is logged at ERROR naming it, and then no rule of
/// the variable applies: the program runs without injected faults.
pub fn init() {
    Lazy::force(&STATE);
    let var = |n: &str| std::env::var_os(n).filter(|v| !v.is_empty());
    let (spec, count) = (var("IBV_SHIM_FAULTS"), var("IBV_SHIM_FAULT_COUNT"));
    if (spec.is_some() || count.is_some()) && crate::config::get().secure {
        crate::log!(
            Level::Warn,
            "IBV_SHIM_FAULTS and IBV_SHIM_FAULT_COUNT ignored: secure-execution mode (uid != euid)"
        );
        return;
    }
    let mut setup = Setup {
        rules: Vec::new(),
        count_fd: -1,
    };
    if let Some(spec) = spec {
        match rules::parse(&spec.to_string_lossy()) {
            Ok(rules) => {
                WC_ARMED.store(
                    rules.iter().any(|r| r.target == Target::Completion),
                    Ordering::Relaxed,
                );
                crate::log!(
                    Level::Info,
                    "fault injection: {} rule{} from IBV_SHIM_FAULTS={:?}",
                    rules.len(),
                    if rules.len() == 1 { "" } else { "s" },
                    spec
                );
                setup.rules = rules;
            }
            Err(why) => crate::log!(
                Level::Error,
                "IBV_SHIM_FAULTS: {why}; no fault is injected in this process"
            ),
        }
    }
    if let Some(path) = count {
        setup.count_fd = open_count(&path);
    }
    let armed = !setup.rules.is_empty() || setup.count_fd >= 0;
    CM_ARMED.store(
        setup.count_fd >= 0 || setup.rules.iter().any(|r| r.target == Target::CmEvent),
        Ordering::Relaxed,
    );
    if SETUP.set(setup).is_ok() {
        ARMED.store(armed, Ordering::Relaxed);
        if armed {
            // The device getters' fast path skips the slots' hook: an
            // open gate sends every call through it.
            crate::gate::set(crate::gate::FAULTS);
            // A resolved real function's fast path skips it too.
            mark_resolved();
        }
    }
}

fn open_count(path: &OsString) -> i32 {
    let path = crate::config::expand_pid(path);
    // SAFETY: path is a NUL-terminated string; the flags refuse links and
    // keep the descriptor out of the program's children.
    let fd = unsafe {
        libc::open(
            path.as_ptr(),
            libc::O_WRONLY | libc::O_CREAT | libc::O_APPEND | libc::O_CLOEXEC | libc::O_NOFOLLOW,
            0o600,
        )
    };
    if fd < 0 {
        crate::log!(
            Level::Error,
            "IBV_SHIM_FAULT_COUNT={:?}: cannot open it ({}); calls are not counted",
            path,
            errno_name(crate::guard::Errno::save().0)
        );
    }
    fd
}

/// Every real function's slot resolved so far (`real::RealFn`), for
/// [`mark_resolved`]. There are fewer real functions than this; one past
/// it would simply not be marked.
const RESOLVED_MAX: usize = 1024;
static RESOLVED: [AtomicPtr<AtomicUsize>; RESOLVED_MAX] =
    [const { AtomicPtr::new(std::ptr::null_mut()) }; RESOLVED_MAX];
static RESOLVED_LEN: AtomicUsize = AtomicUsize::new(0);
/// Rules are armed: slots resolved from now on are marked at once.
static MARK_ALL: AtomicBool = AtomicBool::new(false);
/// The bit a marked slot carries (a resolved address is below 2^47, so
/// never has it): `real::RealFn`'s fast path refuses a marked slot.
pub const HOOKED: usize = 1 << 63;

/// A real function's slot was just resolved (cold, once per slot but for
/// threads racing on its first call: a repeated entry is harmless): noted,
/// and marked if rules are armed. SeqCst with [`mark_resolved`]: a slot
/// resolved while rules are armed is marked by one or the other.
pub fn resolved(slot: &'static AtomicUsize) {
    let i = RESOLVED_LEN.fetch_add(1, Ordering::SeqCst);
    if let Some(r) = RESOLVED.get(i) {
        r.store(std::ptr::from_ref(slot).cast_mut(), Ordering::SeqCst);
    }
    if MARK_ALL.load(Ordering::SeqCst) {
        slot.fetch_or(HOOKED, Ordering::SeqCst);
    }
}

/// Rules are armed (once, at load): every slot, resolved already (by a
/// verbs call from a constructor that ran before the shim's) or later,
/// sends its calls through [`check`].
fn mark_resolved() {
    MARK_ALL.store(true, Ordering::SeqCst);
    let n = RESOLVED_LEN.load(Ordering::SeqCst).min(RESOLVED_MAX);
    for r in &RESOLVED[..n] {
        let slot = r.load(Ordering::SeqCst);
        if !slot.is_null() {
            // SAFETY: only ever set from a `&'static` slot (`resolved`).
            unsafe { &*slot }.fetch_or(HOOKED, Ordering::SeqCst);
        }
    }
}

/// The hook in a declared verb's `get()` (`real::slots`): `Err(errno)` makes the export fail
/// with that errno without calling the real verb (as
/// `real::Unavailable::Injected`). `injectable` is false for a `void` verb
/// (a constant where it is inlined).
#[inline(always)]
pub fn check(verb: &'static str, injectable: bool) -> Result<(), i32> {
    if injectable && ARMED.load(Ordering::Relaxed) {
        return decide(verb);
    }
    Ok(())
}

#[cold]
#[inline(never)]
fn decide(verb: &'static str) -> Result<(), i32> {
    // The real library calling its own export is not the program's call
    // (librdmacm calling its own rdma_* exports neither).
    if crate::thread::nested() || (verb.starts_with("rdma_") && crate::thread::cm_nested()) {
        return Ok(());
    }
    let errno = crate::guard::Errno::save();
    match fire(verb, program_caller) {
        None => {
            errno.restore();
            Ok(())
        }
        Some(injection) => Err(injection.errno),
    }
}

/// Has a failure been injected? An injected call is a verbs call: the
/// process gets its exit report even if no other call reached the real
/// library.
pub fn any_injected() -> bool {
    INJECTED.load(Ordering::Relaxed)
}

static INJECTED: AtomicBool = AtomicBool::new(false);

/// Counts a call of `verb` (`wc`: a completion) made at the return
/// address `ra()` against each rule that covers it, and returns the first
/// rule's injection that fires, recorded and logged. The call site is only
/// looked up when a rule covers the verb or calls are counted.
fn fire(verb: &'static str, ra: impl FnOnce() -> usize) -> Option<Injection> {
    let setup = SETUP.get()?;
    let counting = setup.count_fd >= 0 && verb != "wc";
    let covers = |r: &&Rule| r.covers(verb);
    if !counting && !setup.rules.iter().any(|r| covers(&r)) {
        return None;
    }
    let ra = ra();
    let needs_site = counting || setup.rules.iter().filter(covers).any(|r| r.site.is_some());
    let mut site = needs_site.then(|| site_of(ra));
    if counting {
        let (module, offset) = site.as_ref().map_or((None, 0), |(m, o)| (m.as_deref(), *o));
        let line = format!(
            "{} {verb} {}+{offset:#x}\n",
            std::process::id(),
            rules::basename(module.unwrap_or("?"))
        );
        // SAFETY: writes our own buffer to our own descriptor.
        unsafe { libc::write(setup.count_fd, line.as_ptr().cast(), line.len()) };
    }
    let (i, nth) = count(setup, verb, &site, |r| r.covers(verb))?;
    let (module, offset) = site.take().unwrap_or_else(|| site_of(ra));
    let rule = &setup.rules[i];
    Some(made(Injection {
        verb,
        nth,
        errno: rule.errno,
        status: rule.status,
        replace: rule.replace,
        rule: rule.text.clone(),
        module,
        offset,
    }))
}

/// Counts a call (`key`: its verb, or `cm_event`) against each rule that
/// `applies` to it here (at `site`, when a rule names one): the first rule
/// that fires, and its count.
fn count(
    setup: &Setup,
    key: &'static str,
    site: &Option<(Option<String>, u64)>,
    applies: impl Fn(&Rule) -> bool,
) -> Option<(usize, u64)> {
    let mut fired = None;
    let mut state = STATE.lock();
    for (i, rule) in setup.rules.iter().enumerate() {
        let here = match (&rule.site, site) {
            (None, _) => true,
            (Some(_), Some((m, o))) => rule.at_site(m.as_deref().unwrap_or("?"), *o),
            (Some(_), None) => false,
        };
        if !applies(rule) || !here {
            continue;
        }
        let n = state.counts.entry((i, key)).or_insert(0);
        *n += 1;
        if fired.is_none() && rule.fires(*n, key) {
            fired = Some((i, *n));
        }
    }
    fired
}

/// An injection made: kept for the report, and logged.
fn made(injection: Injection) -> Injection {
    STATE.lock().injected.push(injection.clone());
    INJECTED.store(true, Ordering::Relaxed);
    logged(&injection);
    injection
}

/// [`module_offset`], cached.
fn site_of(ra: usize) -> (Option<String>, u64) {
    if let Some(s) = STATE.lock().sites.get(&ra) {
        return s.clone();
    }
    let s = module_offset(ra);
    STATE.lock().sites.insert(ra, s.clone());
    s
}

fn logged(i: &Injection) {
    let what = match (i.status, i.replace) {
        (_, Some(r)) => format!(
            "event {} replaced by {} (status {})",
            rules::cm_event::event_name(r.event),
            rules::cm_event::event_name(r.with),
            r.reason
        ),
        (Some(s), None) => format!(
            "completion status {}",
            rules::WC_STATUSES.get(s as usize).unwrap_or(&"?")
        ),
        (None, None) => format!(
            "failed with errno={}, the real verb not called",
            errno_name(i.errno)
        ),
    };
    crate::log!(
        Level::Warn,
        "fault injected: {} call {} from {}+{:#x} (rule {:?}): {what}",
        i.verb,
        i.nth,
        i.module.as_deref().unwrap_or("?"),
        i.offset,
        i.rule
    );
}

/// For the `poll_cq` wrapper (`wholeapi`): called once per completion the
/// real poll returned, from the program's call at `caller`; `Some(status)`
/// is the `enum ibv_wc_status` to write into that completion. One relaxed
/// load when no `wc` rule is set.
#[inline(always)]
pub fn completion_status(caller: usize) -> Option<u32> {
    if WC_ARMED.load(Ordering::Relaxed) {
        return completion_decide(caller);
    }
    None
}

#[cold]
#[inline(never)]
fn completion_decide(caller: usize) -> Option<u32> {
    let errno = crate::guard::Errno::save();
    let status = fire("wc", || caller).and_then(|i| i.status);
    errno.restore();
    status
}

/// For `rdma_get_cm_event`'s export: an event of type `kind` the real
/// call returned to the program's call at `caller`; `Some` is the event
/// to give instead (a `cm_event` rule fired). With `IBV_SHIM_FAULT_COUNT`
/// each replacement a sweep tries for this event is a line of its own
/// (`cm_event::sweep_points`). One relaxed load when neither is set.
#[inline(always)]
pub fn cm_event(kind: u32, caller: usize) -> Option<rules::Replace> {
    if CM_ARMED.load(Ordering::Relaxed) {
        return cm_event_decide(kind, caller);
    }
    None
}

#[cold]
#[inline(never)]
fn cm_event_decide(kind: u32, caller: usize) -> Option<rules::Replace> {
    let errno = crate::guard::Errno::save();
    let setup = SETUP.get()?;
    if setup.count_fd >= 0 {
        let (module, offset) = site_of(caller);
        for point in rules::cm_event::sweep_points(kind) {
            let line = format!(
                "{} {point} {}+{offset:#x}\n",
                std::process::id(),
                rules::basename(module.as_deref().unwrap_or("?"))
            );
            // SAFETY: writes our own buffer to our own descriptor.
            unsafe { libc::write(setup.count_fd, line.as_ptr().cast(), line.len()) };
        }
    }
    // Only the rules about this event type count it.
    let fired = setup
        .rules
        .iter()
        .any(|r| r.replace.is_some_and(|x| x.event == kind))
        .then(|| fire_cm(setup, kind, caller))
        .flatten();
    errno.restore();
    fired
}

/// [`fire`] for the `cm_event` rules about events of type `kind`.
fn fire_cm(setup: &Setup, kind: u32, caller: usize) -> Option<rules::Replace> {
    let about = |r: &Rule| r.replace.is_some_and(|x| x.event == kind);
    let site = setup
        .rules
        .iter()
        .any(|r| about(r) && r.site.is_some())
        .then(|| site_of(caller));
    let (i, nth) = count(setup, "cm_event", &site, about)?;
    let (module, offset) = site.unwrap_or_else(|| site_of(caller));
    let rule = &setup.rules[i];
    made(Injection {
        verb: "rdma_get_cm_event",
        nth,
        errno: 0,
        status: None,
        replace: rule.replace,
        rule: rule.text.clone(),
        module,
        offset,
    })
    .replace
}

/// Is a `wc` rule set? Then contexts get the `poll_cq` wrapper even
/// without the data-path checks.
pub fn completions_armed() -> bool {
    WC_ARMED.load(Ordering::Relaxed)
}

/// The failures injected so far, in order (for the JSON report).
pub fn injected() -> Vec<Injection> {
    STATE.lock().injected.clone()
}

/// `fork()` prepare: the child must not inherit the state locked.
pub fn fork_lock() {
    crate::registry::lock::fork_hold(&STATE);
}

/// `fork()`: the parent releases what `fork_lock` took, the child resets it.
pub fn fork_unlock(child: bool) {
    match child {
        true => crate::registry::lock::fork_reset(&STATE),
        false => crate::registry::lock::fork_release(&STATE),
    }
}

/// The module holding `ra` (its path; the program's own from
/// `/proc/self/exe`) and `ra`'s offset from the module's load address, the
/// same under ASLR.
fn module_offset(ra: usize) -> (Option<String>, u64) {
    if ra == 0 {
        return (None, 0);
    }
    // SAFETY: Dl_info is plain data; all-zero is a valid value.
    let mut info: libc::Dl_info = unsafe { std::mem::zeroed() };
    // SAFETY: dladdr only reads the loader's tables; any address is allowed.
    // ra - 1 is the call instruction (a call that ends a function returns
    // past its end).
    if unsafe { libc::dladdr((ra - 1) as *const c_void, &mut info) } == 0 {
        return (None, ra as u64);
    }
    let name = match info.dli_fname.is_null() {
        true => String::new(),
        // SAFETY: dladdr filled it with a C string owned by the loader.
        false => unsafe { CStr::from_ptr(info.dli_fname) }
            .to_string_lossy()
            .into_owned(),
    };
    let module = match name.starts_with('/') {
        true => name,
        // The loader names the main program by argv[0], maybe empty.
        false => std::fs::read_link("/proc/self/exe")
            .map(|p| String::from_utf8_lossy(p.as_os_str().as_bytes()).into_owned())
            .unwrap_or(name),
    };
    (Some(module), (ra - info.dli_fbase as usize) as u64)
}

/// The addresses the shim itself is mapped at (its `PT_LOAD` segments),
/// found once.
fn own_range() -> (usize, usize) {
    static RANGE: OnceLock<(usize, usize)> = OnceLock::new();
    *RANGE.get_or_init(|| {
        // (load address to find, lowest, highest)
        let mut r = (
            module_base(own_range as fn() -> (usize, usize) as usize),
            usize::MAX,
            0usize,
        );
        extern "C" fn each(
            info: *mut libc::dl_phdr_info,
            _size: usize,
            data: *mut c_void,
        ) -> libc::c_int {
            // SAFETY: `data` is the tuple passed below; `info` and its
            // program headers are the loader's, valid during the callback.
            unsafe {
                let r = &mut *(data as *mut (usize, usize, usize));
                let info = &*info;
                if info.dlpi_addr as usize != r.0 {
                    return 0;
                }
                for i in 0..info.dlpi_phnum as usize {
                    let ph = &*info.dlpi_phdr.add(i);
                    if ph.p_type == libc::PT_LOAD {
                        let start = r.0 + ph.p_vaddr as usize;
                        r.1 = r.1.min(start);
                        r.2 = r.2.max(start + ph.p_memsz as usize);
                    }
                }
            }
            1
        }
        // SAFETY: the callback only reads the loader's data and writes `r`.
        unsafe { libc::dl_iterate_phdr(Some(each), std::ptr::addr_of_mut!(r).cast()) };
        (r.1, r.2)
    })
}

/// The load address of the module holding `addr` (0: none).
fn module_base(addr: usize) -> usize {
    // SAFETY: as in `module_offset`.
    let mut info: libc::Dl_info = unsafe { std::mem::zeroed() };
    // SAFETY: as in `module_offset`.
    match unsafe { libc::dladdr(addr as *const c_void, &mut info) } {
        0 => 0,
        _ => info.dli_fbase as usize,
    }
}

/// The program's call into the shim: the first return address up the frame
/// chain that is outside the shim (the export's own, wherever inlining put
/// this function). Every frame read lies between this function's frame and
/// the top of this thread's stack, so it is mapped.
#[inline(never)]
fn program_caller() -> usize {
    #[cfg(ibvshim_frame_pointers)]
    {
        let (lo, hi) = own_range();
        let top = stack_top();
        let mut fp: usize;
        // SAFETY: reads this function's frame pointer register (built with
        // frame pointers, checked by build.rs).
        unsafe {
            core::arch::asm!("mov {}, rbp", out(reg) fp, options(nomem, nostack, preserves_flags))
        };
        for _ in 0..32 {
            if !fp.is_multiple_of(8) || fp.checked_add(16).is_none_or(|end| end > top) {
                return 0;
            }
            // SAFETY: fp is aligned and between this frame and the stack's
            // top (checked above): live stack memory of this thread.
            let (next, ra) = unsafe { (*(fp as *const usize), *((fp + 8) as *const usize)) };
            if ra != 0 && !(lo..hi).contains(&(ra - 1)) {
                return ra;
            }
            // The stack grows down: a caller's frame is above.
            if next <= fp {
                return 0;
            }
            fp = next;
        }
        0
    }
    #[cfg(not(ibvshim_frame_pointers))]
    0
}

/// The highest address of this thread's stack (0 if unknown: no frame is
/// then read).
#[cfg(ibvshim_frame_pointers)]
fn stack_top() -> usize {
    thread_local! {
        static TOP: std::cell::Cell<usize> = const { std::cell::Cell::new(0) };
    }
    let top = TOP.with(|t| t.get());
    if top != 0 {
        return top;
    }
    // SAFETY: pthread_attr_t is plain data, initialised by
    // pthread_getattr_np before it is read, destroyed after.
    let top = unsafe {
        let mut attr: libc::pthread_attr_t = std::mem::zeroed();
        if libc::pthread_getattr_np(libc::pthread_self(), &mut attr) != 0 {
            return 0;
        }
        let (mut addr, mut size) = (std::ptr::null_mut(), 0usize);
        let ok = libc::pthread_attr_getstack(&attr, &mut addr, &mut size) == 0;
        libc::pthread_attr_destroy(&mut attr);
        if ok {
            addr as usize + size
        } else {
            0
        }
    };
    TOP.with(|t| t.set(top));
    top
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The decisions with rules set as at load (one set per process: the
    /// only test here that sets them).
    #[test]
    fn verbs_and_completions_fail_where_the_rules_say() {
        let rule = |t: &str| rules::parse_rule(t).unwrap();
        let set = SETUP.set(Setup {
            rules: vec![
                rule("wc:every=2:status=IBV_WC_RETRY_EXC_ERR"),
                rule("ibv_alloc_pd:nth=2:errno=EAGAIN"),
                rule("ibv_create_cq:after=0:errno=EIO"),
            ],
            count_fd: -1,
        });
        assert!(set.is_ok());
        WC_ARMED.store(true, Ordering::Relaxed);
        let wc: Vec<_> = (0..4).map(|_| completion_status(0)).collect();
        assert_eq!(wc, [None, Some(12), None, Some(12)]);
        let pd: Vec<_> = (0..3).map(|_| decide("ibv_alloc_pd")).collect();
        assert_eq!(pd, [Ok(()), Err(libc::EAGAIN), Ok(())]);
        // Not covered by a rule: never counted, never failed.
        assert_eq!(decide("ibv_reg_mr"), Ok(()));
        let done = injected();
        let seen: Vec<_> = done.iter().map(|i| (i.verb, i.nth, i.status)).collect();
        assert_eq!(
            seen,
            [
                ("wc", 2, Some(12)),
                ("wc", 4, Some(12)),
                ("ibv_alloc_pd", 2, None)
            ]
        );
        assert!(any_injected());
        // The real library calling its own export is never failed.
        crate::thread::inside(|| assert_eq!(decide("ibv_create_cq"), Ok(())));
        assert_eq!(decide("ibv_create_cq"), Err(libc::EIO));
    }
}
