//! Sending (the outbox) and the progress engine that executes what
//! arrives in this process's ring: from `ibv_poll_cq` and a background thread.

use core::ffi::c_int;

use verbs_abi::ibv_wc_status::{IBV_WC_RETRY_EXC_ERR, IBV_WC_SUCCESS};

use super::*;

/// The requester of a message received from another process.
pub struct Peer {
    pub dest: Dest,
    pub qpn: u32,
    pub seq: u64,
    /// RC: the requester waits for a response.
    pub reply: bool,
}

impl Peer {
    /// The sender of request `w`.
    pub fn of(w: &Wire) -> Peer {
        Peer {
            dest: Dest {
                slot: w.src_slot,
                token: w.src_token,
            },
            qpn: w.src_qpn,
            seq: w.seq,
            reply: w.flags & wire::flag::REPLY != 0,
        }
    }

    /// Answers the request with its completion status for the requester
    /// (RC only; UC and UD never hear back).
    pub fn reply(&self, status: c_int) {
        if !self.reply {
            return;
        }
        let mut w = Wire::zeroed();
        w.kind = if status == IBV_WC_SUCCESS as c_int {
            wire::kind::ACK
        } else if status == IBV_WC_RETRY_EXC_ERR as c_int {
            // The responder went away under the message: the requester's
            // retries run out.
            wire::kind::DROP
        } else {
            wire::kind::NAK
        };
        w.status = status;
        w.dst_qpn = self.qpn;
        w.seq = self.seq;
        send(self.dest, &mut w, &[]);
    }
}

/// Fragments waiting for a full ring, in order.
pub(super) static OUTBOX: crate::fork_lock::Mutex<VecDeque<(Dest, Wire, Vec<u8>)>> =
    crate::fork_lock::Mutex::new(VecDeque::new());

/// Sends a message (in fragments when longer than a slot) to `d`. Never
/// blocks: what does not fit in the ring waits in the outbox, which the
/// progress engine flushes.
pub fn send(d: Dest, wire: &mut Wire, payload: &[u8]) {
    let Some((seg, slot, token)) = me() else {
        return;
    };
    wire.src_slot = slot as u32;
    wire.src_token = token;
    wire.total = payload.len() as u32;
    // Under the outbox lock all of one process's fragments go out in
    // order, so a message's fragments reach each ring one after another.
    let mut o = OUTBOX.lock();
    let target = seg.ring(d.slot as usize);
    // Behind fragments already waiting for this ring, wait too (in order);
    // other destinations are not held up.
    let mut queued = o.iter().any(|(q, _, _)| *q == d);
    let mut off = 0usize;
    loop {
        let n = (payload.len() - off).min(CHUNK);
        wire.offset = off as u32;
        wire.len = n as u32;
        let chunk = &payload[off..off + n];
        if queued || !target.push(token, wire, chunk) {
            queued = true;
            o.push_back((d, *wire, chunk.to_vec()));
        }
        off += n;
        if off >= payload.len() {
            break;
        }
    }
}

pub(super) static NEXT_LIVENESS: AtomicU64 = AtomicU64::new(0);

/// Moves waiting fragments to their rings, each destination in order;
/// drops those for processes that are gone (a dead one's full ring would
/// otherwise hold them for ever).
pub(super) fn flush_outbox(seg: &Segment) -> bool {
    let mut o = OUTBOX.lock();
    if o.is_empty() {
        return false;
    }
    let mut did = false;
    let mut full: Vec<Dest> = Vec::new();
    let mut dead: Vec<Dest> = Vec::new();
    // Liveness costs a read of /proc: at most every 10 ms.
    let now = now_ns();
    let check = now >= NEXT_LIVENESS.load(Ordering::Relaxed);
    if check {
        NEXT_LIVENESS.store(now + 10_000_000, Ordering::Relaxed);
    }
    o.retain(|(d, w, data)| {
        if dead.contains(d) || seg.proc_(d.slot as usize).token.load(Ordering::Acquire) != d.token {
            return false;
        }
        if full.contains(d) {
            return true;
        }
        if seg.ring(d.slot as usize).push(w.src_token, w, data) {
            did = true;
            return false;
        }
        if !check || slot_alive(seg, d.slot as usize) {
            full.push(*d);
            true
        } else {
            dead.push(*d);
            false
        }
    });
    if o.is_empty() {
        o.shrink_to_fit();
    }
    did
}

/// The progress engine's state: fragments being reassembled.
pub(super) struct Engine {
    partial: HashMap<(u32, u32, bool), (Wire, Vec<u8>)>,
    next_deadline_check: u64,
    /// The ring's head slot claimed but unpublished since (position, ns).
    stall: Option<(u64, u64)>,
}

pub(super) static ENGINE: once_cell::sync::Lazy<crate::fork_lock::Mutex<Engine>> =
    once_cell::sync::Lazy::new(|| {
        crate::fork_lock::Mutex::new(Engine {
            partial: HashMap::new(),
            next_deadline_check: 0,
            stall: None,
        })
    });

/// Monotonic nanoseconds.
pub fn now_ns() -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: plain system call into a local.
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut ts) };
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

/// Messages handled per progress call at most (so one call stays short).
pub(super) const BUDGET: usize = 64;

impl Engine {
    /// Takes one fragment; hands whole messages to the data path.
    fn feed(&mut self, w: &Wire, data: &[u8]) {
        let whole = w.offset == 0 && w.len == w.total;
        if whole {
            return dispatch(w, data);
        }
        let key = (w.src_slot, w.src_qpn, wire::kind::is_response(w.kind));
        let e = self
            .partial
            .entry(key)
            .or_insert_with(|| (*w, vec![0; w.total as usize]));
        if w.offset == 0 {
            // A new message from this sender: whatever was half-built is stale.
            e.0 = *w;
            e.1.clear();
            e.1.resize(w.total as usize, 0);
        }
        let off = w.offset as usize;
        let end = off + data.len();
        if end <= e.1.len() {
            e.1[off..end].copy_from_slice(data);
        }
        if end >= w.total as usize {
            if let Some((head, buf)) = self.partial.remove(&key) {
                dispatch(&head, &buf);
            }
            if self.partial.is_empty() {
                self.partial.shrink_to_fit();
            }
        }
    }
}

/// What the layer above the fabric (the data path) does with what
/// arrives. Given to [`attach`], so the fabric never names that layer.
pub struct Receiver {
    /// A request from another process; `replayed` when it is one that
    /// arrived early and is delivered now (see [`replay`]).
    pub request: fn(&Wire, &[u8], bool),
    /// A response to a request of ours.
    pub response: fn(&Wire, &[u8]),
    /// Runs every millisecond or so: the deadlines of requests of ours.
    pub tick: fn(),
    /// Whether a request of ours waits for its response.
    pub busy: fn() -> bool,
}

/// Set by the first [`attach`]; every caller passes the same one.
pub(super) static RECEIVER: once_cell::sync::OnceCell<&'static Receiver> =
    once_cell::sync::OnceCell::new();

fn busy() -> bool {
    RECEIVER.get().is_some_and(|r| (r.busy)())
}

/// Delivers again a request that arrived before its QP could receive it
/// (kept by the layer above, which got it through its [`Receiver`]).
pub fn replay(w: &Wire, data: &[u8]) {
    if let Some(r) = RECEIVER.get() {
        (r.request)(w, data, true);
    }
}

pub(super) fn dispatch(w: &Wire, data: &[u8]) {
    let Some(r) = RECEIVER.get() else { return };
    if wire::kind::is_response(w.kind) {
        (r.response)(w, data);
    } else {
        (r.request)(w, data, false);
    }
}

pub(super) fn run_engine(seg: &Segment, slot: usize, e: &mut Engine) -> bool {
    let mut did = flush_outbox(seg);
    let ring = seg.ring(slot);
    for _ in 0..BUDGET {
        if ring.pop(|w, d| e.feed(w, d)).is_none() {
            break;
        }
        did = true;
    }
    let now = now_ns();
    if now >= e.next_deadline_check {
        e.next_deadline_check = now + 1_000_000;
        if let Some(r) = RECEIVER.get() {
            (r.tick)();
        }
        unstall(seg, ring, e, now);
    }
    did
}

/// A producer killed between claiming a slot of our ring and publishing
/// it would stall the ring for ever: once the head has been stuck for
/// 100 ms and its claimer is known dead, skip the slot.
pub(super) fn unstall(seg: &Segment, ring: Ring, e: &mut Engine, now: u64) {
    let Some((pos, claimer)) = ring.stalled_head() else {
        e.stall = None;
        return;
    };
    match e.stall {
        Some((p, since)) if p == pos => {
            if now.saturating_sub(since) < 100_000_000 || claimer == 0 {
                return;
            }
            let slot =
                (0..MAX_PROCS).find(|&i| seg.proc_(i).token.load(Ordering::Acquire) == claimer);
            if slot.is_none_or(|i| !slot_alive(seg, i)) {
                ring.skip_head(pos);
                e.stall = None;
            }
        }
        _ => e.stall = Some((pos, now)),
    }
}

/// Runs the progress engine once from a program thread (`ibv_poll_cq`):
/// skipped when another thread is already at it.
pub fn poll_progress() {
    let Some((seg, slot, _)) = me() else { return };
    let ring = seg.ring(slot);
    if ring.is_empty() && !busy() && OUTBOX.lock().is_empty() {
        return;
    }
    if let Some(mut e) = ENGINE.try_lock() {
        if MY_TOKEN.load(Ordering::Acquire) != 0 {
            run_engine(seg, slot, &mut e);
        }
    }
}

/// How long the progress thread keeps looking at its ring after the last
/// message before it sleeps: a peer in a request loop (the passive side of
/// `ib_read_lat`, `ib_write_bw`) is answered at once instead of after a
/// futex wake-up each time (tens of microseconds on a loaded machine).
const SPIN_NS: u64 = 1_000_000;

pub(super) fn progress_thread(stop: Arc<AtomicBool>) {
    let mut last_active = 0u64;
    while !stop.load(Ordering::SeqCst) {
        let Some((seg, slot, _)) = me() else { return };
        let did = {
            let mut e = ENGINE.lock();
            run_engine(seg, slot, &mut e)
        };
        let now = now_ns();
        if did {
            last_active = now;
            continue;
        }
        if now.saturating_sub(last_active) < SPIN_NS {
            // Busy: look again without sleeping, yielding the CPU to any
            // other runnable thread.
            std::thread::yield_now();
            continue;
        }
        let ring = seg.ring(slot);
        let busy = busy() || !OUTBOX.lock().is_empty();
        ring.wait(if busy { 1_000_000 } else { 100_000_000 });
    }
}
