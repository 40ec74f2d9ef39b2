//! Membership: process liveness, attaching and detaching (slots, ports).

use super::*;
use crate::fork_lock::{self, Tier};

/// A process's start time in clock ticks since boot, from `/proc/PID/stat`.
pub(super) fn start_time(pid: u32) -> Option<u64> {
    let s = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let rest = &s[s.rfind(')')? + 1..];
    rest.split_whitespace().nth(19)?.parse().ok()
}

pub(super) fn pid_alive(pid: u32, start: u64) -> bool {
    // SAFETY: signal 0 only checks for existence.
    let r = unsafe { libc::kill(pid as libc::pid_t, 0) };
    if r != 0 && crate::guard::errno() == libc::ESRCH {
        return false;
    }
    match start_time(pid) {
        Some(t) => t == start,
        // /proc not readable: trust kill().
        None => true,
    }
}

pub(super) fn slot_alive(seg: &Segment, slot: usize) -> bool {
    let p = seg.proc_(slot);
    let tok = p.token.load(Ordering::Acquire);
    tok != 0 && pid_alive(tok as u32, p.start.load(Ordering::Acquire))
}

/// This process's attachment.
pub(super) struct Attached {
    refs: usize,
    /// Devices whose ports this process registered.
    devices: Vec<usize>,
    slot: usize,
    token: u64,
    stop: Arc<AtomicBool>,
    thread: Option<std::thread::JoinHandle<()>>,
}

pub(super) static STATE: fork_lock::Mutex<Option<Attached>> = fork_lock::Mutex::new(None);
/// This process's slot and token, for the hot path (token 0: detached).
pub(super) static MY_TOKEN: AtomicU64 = AtomicU64::new(0);
pub(super) static MY_SLOT: AtomicU32 = AtomicU32::new(0);
pub(super) static ATFORK: std::sync::Once = std::sync::Once::new();

extern "C" fn child_after_fork() {
    // The child has no progress thread and must not answer for its
    // parent's slot: it is detached, and attaches anew on its next open.
    MY_TOKEN.store(0, Ordering::SeqCst);
    if let Some(mut g) = STATE.try_lock() {
        if let Some(a) = g.take() {
            core::mem::forget(a);
        }
    }
}

pub(super) fn ports_clear_owner(seg: &Segment, slot: usize) {
    for i in 0..MAX_PORTS {
        seg.port(i).owners[slot / 64].fetch_and(!(1u64 << (slot % 64)), Ordering::AcqRel);
    }
}

pub(super) fn port_in_use(p: &Port) -> bool {
    p.owners.iter().any(|o| o.load(Ordering::Acquire) != 0)
}

/// Registers the InfiniBand ports of a device this process opened;
/// returns (port, LID). Under the attach lock.
pub(super) fn register_ports(seg: &Segment, slot: usize, d: &SimDevice) -> Vec<(u32, u16)> {
    let mut out = Vec::new();
    if !d.is_ethernet() {
        for port in 1..=u32::from(d.phys_ports()) {
            let guid = d.port_guid(port);
            let natural = d.natural_lid(port);
            let bit = 1u64 << (slot % 64);
            let mut found = None;
            for i in 0..MAX_PORTS {
                let p = seg.port(i);
                if p.guid.load(Ordering::Acquire) == guid && port_in_use(p) {
                    found = Some(i);
                    break;
                }
            }
            let i = match found {
                Some(i) => i,
                None => {
                    let used: Vec<u16> = (0..MAX_PORTS)
                        .map(|i| seg.port(i))
                        .filter(|p| port_in_use(p))
                        .map(|p| p.lid.load(Ordering::Acquire) as u16)
                        .collect();
                    let lid = if used.contains(&natural) {
                        (1..0xc000u16)
                            .find(|l| !used.contains(l))
                            .unwrap_or(natural)
                    } else {
                        natural
                    };
                    let Some(i) = (0..MAX_PORTS).find(|&i| !port_in_use(seg.port(i))) else {
                        continue;
                    };
                    let p = seg.port(i);
                    p.guid.store(guid, Ordering::Release);
                    p.lid.store(u32::from(lid), Ordering::Release);
                    i
                }
            };
            let p = seg.port(i);
            p.owners[slot / 64].fetch_or(bit, Ordering::AcqRel);
            out.push((port, p.lid.load(Ordering::Acquire) as u16));
        }
    }
    out
}

/// Under the attach lock: reclaims the slots of dead processes (crashed or
/// killed), claims a free one and registers the ports.
#[allow(clippy::type_complexity)]
pub(super) fn claim(
    seg: &Segment,
    pid: u32,
    start: u64,
    dev: &SimDevice,
) -> Option<(usize, u64, Vec<(u32, u16)>)> {
    seg.reclaim_dead();
    let slot = (0..MAX_PROCS).find(|&i| seg.proc_(i).token.load(Ordering::Acquire) == 0)?;
    let gen = seg.hdr().next_gen.fetch_add(1, Ordering::AcqRel).max(1);
    let token = (u64::from(gen) << 32) | u64::from(pid);
    ports_clear_owner(seg, slot);
    seg.clear_counts(slot);
    seg.ring(slot).reset();
    seg.proc_(slot).start.store(start, Ordering::Release);
    seg.proc_(slot).token.store(token, Ordering::Release);
    let lids = register_ports(seg, slot, dev);
    limits::join(seg, slot, dev);
    Some((slot, token, lids))
}

/// Joins the fabric (the first open context) or counts one more user;
/// registers the ports of `dev` (a process uses the ports it opens).
/// What arrives goes to `rx`.
pub fn attach(dev: &'static SimDevice, rx: &'static Receiver) -> Result<(), String> {
    // Set before any message can arrive; callers all pass the same one.
    let _ = RECEIVER.set(rx);
    static LOCKS: std::sync::Once = std::sync::Once::new();
    LOCKS.call_once(|| {
        // SAFETY: statics; a forked child finds them free.
        unsafe {
            fork_lock::register(STATE.raw(), Tier::Attach);
            fork_lock::register(ENGINE.raw(), Tier::Engine);
            fork_lock::register(OUTBOX.raw(), Tier::Outbox);
        }
    });
    let mut st = STATE.lock();
    if let Some(a) = st.as_mut() {
        if !a.devices.contains(&dev.index) {
            let Some(seg) = current() else {
                return Err("the fabric segment is gone".into());
            };
            let slot = a.slot;
            let join = || {
                limits::join(seg, slot, dev);
                register_ports(seg, slot, dev)
            };
            match seg.locked(join) {
                Ok(lids) => lids.into_iter().for_each(|(p, l)| dev.set_lid(p, l)),
                Err(LockError::Stale) => return Err(format!("{} was removed", seg.path_str())),
                Err(LockError::Other(e)) => return Err(e),
            }
            a.devices.push(dev.index);
        }
        a.refs += 1;
        return Ok(());
    }
    // SAFETY: getpid cannot fail.
    let pid = unsafe { libc::getpid() } as u32;
    let start = start_time(pid).unwrap_or(0);
    let mut tries = 0;
    let (seg, claimed) = loop {
        let seg = segment()?;
        match seg.locked(|| claim(seg, pid, start, dev)) {
            Ok(c) => break (seg, c),
            Err(LockError::Stale) if tries < 10 => {
                tries += 1;
                forget_stale(seg);
            }
            Err(LockError::Stale) => return Err(format!("{} keeps vanishing", seg.path_str())),
            Err(LockError::Other(e)) => return Err(e),
        }
    };
    let Some((slot, token, lids)) = claimed else {
        return Err(format!(
            "the fabric {} has no free process slot ({MAX_PROCS} processes use it)",
            seg.path_str()
        ));
    };
    for (port, lid) in lids {
        dev.set_lid(port, lid);
    }
    // Whatever a forked parent left queued was not ours to send.
    OUTBOX.lock().clear();
    MY_SLOT.store(slot as u32, Ordering::SeqCst);
    MY_TOKEN.store(token, Ordering::SeqCst);
    ATFORK.call_once(|| {
        // SAFETY: registering a plain extern "C" handler.
        unsafe { libc::pthread_atfork(None, None, Some(child_after_fork)) };
    });
    let stop = Arc::new(AtomicBool::new(false));
    let stop2 = stop.clone();
    let thread = std::thread::Builder::new()
        .name("ibv-sim-fabric".into())
        .spawn(move || progress_thread(stop2))
        .ok();
    *st = Some(Attached {
        refs: 1,
        devices: vec![dev.index],
        slot,
        token,
        stop,
        thread,
    });
    Ok(())
}

/// At exit (registered when the segment is first mapped): a process that
/// ends with a context still open (every librdmacm, UCX or MPI program
/// does) gives its slot back as [`detach`] would, and the last one out
/// removes the segment's file, so that a fabric leaves nothing behind its
/// processes. A process killed outright cannot: the next one to attach
/// reclaims its slot. Only atomics and system calls on the segment: no
/// lock of this process is taken (its other threads still run, and any
/// of them may hold one).
pub(super) extern "C" fn at_exit() {
    let Some(seg) = current() else { return };
    let token = MY_TOKEN.swap(0, Ordering::SeqCst);
    let slot = MY_SLOT.load(Ordering::SeqCst) as usize;
    let _ = seg.locked(|| {
        if token != 0 && seg.proc_(slot).token.load(Ordering::Acquire) == token {
            ports_clear_owner(seg, slot);
            seg.clear_counts(slot);
            seg.proc_(slot).token.store(0, Ordering::Release);
        }
        if seg.reclaim_dead() {
            // SAFETY: unlinking our own fabric file by path, under its
            // lock, the path checked to still name this mapping's file.
            unsafe { libc::unlink(seg.path.as_ptr()) };
        }
    });
}

/// One context fewer; the last one gives the slot back.
pub fn detach() {
    let mut st = STATE.lock();
    let Some(a) = st.as_mut() else { return };
    a.refs -= 1;
    if a.refs > 0 {
        return;
    }
    let a = st.take().expect("attached");
    drop(st);
    a.stop.store(true, Ordering::SeqCst);
    let Some(seg) = current() else { return };
    seg.ring(a.slot).kick();
    if let Some(t) = a.thread {
        let _ = t.join();
    }
    let _e = ENGINE.lock();
    let mut o = OUTBOX.lock();
    o.clear();
    MY_TOKEN.store(0, Ordering::SeqCst);
    limits::leave_all();
    drop(o);
    let _ = seg.locked(|| {
        if seg.proc_(a.slot).token.load(Ordering::Acquire) == a.token {
            ports_clear_owner(seg, a.slot);
            seg.clear_counts(a.slot);
            seg.proc_(a.slot).token.store(0, Ordering::Release);
        }
        if seg.reclaim_dead() {
            // The last one out removes the file: nothing of a fabric
            // outlives its processes (others see the inode change).
            // SAFETY: unlinking our own fabric file by path.
            unsafe { libc::unlink(seg.path.as_ptr()) };
        }
    });
}
