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

/// A message (the part of it not yet in the destination's ring) waiting
/// for room there: one entry per message, not per fragment.
pub(super) struct Queued {
    wire: Wire,
    /// The bytes from offset `base` to the end of the message.
    data: Bytes,
    base: usize,
    /// How much of `data` is in the ring already.
    pos: usize,
}

/// The waiting bytes of a message.
enum Bytes {
    Owned(Vec<u8>),
    /// Still in the sender's memory (address, length): see [`send_in_place`].
    InPlace(usize, usize),
}

impl Bytes {
    fn get(&self) -> &[u8] {
        match self {
            Bytes::Owned(v) => v,
            // SAFETY: `send_in_place`'s contract: readable until
            // `settle_outbox` turns it into a copy, which the data path
            // does before the memory can be given back to the program.
            Bytes::InPlace(a, n) => unsafe { core::slice::from_raw_parts(*a as *const u8, *n) },
        }
    }
}

/// Messages waiting for a full ring: a queue per destination, in order
/// (a flush looks at each destination once, not at every message: a
/// busy peer can have a hundred 64 KiB writes waiting).
pub(super) static OUTBOX: crate::fork_lock::Mutex<Vec<(Dest, VecDeque<Queued>)>> =
    crate::fork_lock::Mutex::new(Vec::new());

/// Pushes the fragments of `payload` (the bytes of `wire`'s message from
/// offset `base`, `wire.total` bytes in all) into `ring` from `payload[*at..]`
/// while it has room; false when it fills first (`*at`: how far it got).
fn push_fragments(
    ring: Ring,
    token: u64,
    wire: &mut Wire,
    payload: &[u8],
    base: usize,
    at: &mut usize,
) -> bool {
    loop {
        let n = (payload.len() - *at).min(CHUNK);
        wire.offset = (base + *at) as u32;
        wire.len = n as u32;
        if !ring.push(token, wire, &payload[*at..*at + n]) {
            return false;
        }
        *at += n;
        if *at >= payload.len() {
            return true;
        }
    }
}

/// Sends a message (in fragments when longer than a slot) to `d`. Never
/// blocks: what does not fit in the ring waits in the outbox (copied),
/// which the progress engine flushes.
pub fn send(d: Dest, wire: &mut Wire, payload: &[u8]) {
    send_from(d, wire, payload, false)
}

/// [`send`] for a payload that may wait in the outbox where it is,
/// uncopied: a posted RC request's buffer, which the program leaves alone
/// until the request completes (and it cannot complete successfully
/// before all of it is in the ring). A 64 KiB WRITE to a busy peer is
/// then copied once, into the ring, not twice.
///
/// # Safety
/// `payload` must stay readable and unchanged until [`settle_outbox`]
/// has run: the caller runs it before the memory can go back to the
/// program (an error or flush completion, the QP reset or destroyed,
/// the MR deregistered).
pub unsafe fn send_in_place(d: Dest, wire: &mut Wire, payload: &[u8]) {
    send_from(d, wire, payload, true)
}

/// Copies every message waiting in the outbox in place (see
/// [`send_in_place`]): afterwards the outbox reads no program memory.
pub fn settle_outbox() {
    let mut o = OUTBOX.lock();
    for (_, list) in o.iter_mut() {
        for q in list.iter_mut() {
            if let Bytes::InPlace(..) = q.data {
                q.data = Bytes::Owned(q.data.get().to_vec());
            }
        }
    }
}

fn send_from(d: Dest, wire: &mut Wire, payload: &[u8], in_place: bool) {
    let Some((seg, slot, token)) = me() else {
        return;
    };
    wire.src_slot = slot as u32;
    wire.src_token = token;
    wire.total = payload.len() as u32;
    // Under the outbox lock all of one process's fragments go out in
    // order, so a message's fragments reach each ring one after another.
    let mut o = OUTBOX.lock();
    // Behind messages already waiting for this ring, wait too (in order);
    // other destinations are not held up.
    let mut at = 0usize;
    let waiting = o.iter().position(|(q, _)| *q == d);
    if waiting.is_none()
        && push_fragments(seg.ring(d.slot as usize), token, wire, payload, 0, &mut at)
    {
        return;
    }
    let rest = &payload[at..];
    let q = Queued {
        wire: *wire,
        data: if in_place {
            Bytes::InPlace(rest.as_ptr() as usize, rest.len())
        } else {
            Bytes::Owned(rest.to_vec())
        },
        base: at,
        pos: 0,
    };
    match waiting {
        Some(i) => o[i].1.push_back(q),
        None => o.push((d, VecDeque::from([q]))),
    }
}

pub(super) static NEXT_LIVENESS: AtomicU64 = AtomicU64::new(0);

/// Moves waiting messages to their rings, each destination in order;
/// drops those for processes that are gone (a dead one's full ring would
/// otherwise hold them for ever).
pub(super) fn flush_outbox(seg: &Segment) -> bool {
    let mut o = OUTBOX.lock();
    if o.is_empty() {
        return false;
    }
    let mut did = false;
    // Liveness costs a read of /proc: at most every 10 ms.
    let now = now_ns();
    let check = now >= NEXT_LIVENESS.load(Ordering::Relaxed);
    if check {
        NEXT_LIVENESS.store(now + 10_000_000, Ordering::Relaxed);
    }
    o.retain_mut(|(d, list)| {
        if seg.proc_(d.slot as usize).token.load(Ordering::Acquire) != d.token {
            return false;
        }
        let ring = seg.ring(d.slot as usize);
        while let Some(q) = list.front_mut() {
            // The receiver may leave while we push (and a new process
            // take its slot): look again before each message.
            if seg.proc_(d.slot as usize).token.load(Ordering::Acquire) != d.token {
                return false;
            }
            let pos = q.pos;
            let token = q.wire.src_token;
            let sent = push_fragments(ring, token, &mut q.wire, q.data.get(), q.base, &mut q.pos);
            did |= sent || q.pos > pos;
            if !sent {
                // Full: a dead process's ring stays full for ever.
                return !check || slot_alive(seg, d.slot as usize);
            }
            list.pop_front();
        }
        false
    });
    if o.is_empty() {
        o.shrink_to_fit();
    }
    did
}

/// A message arriving in fragments.
enum Partial {
    /// Reassembled here, handed over whole at its last fragment.
    Kept(Wire, Vec<u8>),
    /// Placed fragment by fragment by the layer above (an RDMA WRITE
    /// into its memory: no copy kept here); the first failure, if any.
    Placed(Wire, Result<(), c_int>),
}

/// The progress engine's state: fragments being reassembled.
pub(super) struct Engine {
    partial: HashMap<(u32, u32, bool), Partial>,
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
        if w.offset == 0 {
            // A new message from this sender: whatever was half-built is
            // stale. A request the layer above can place as it comes (an
            // RDMA WRITE) is not reassembled: one copy instead of two.
            let placed = !key.2
                && RECEIVER
                    .get()
                    .is_some_and(|r| (r.place)(w, data, true).is_ok());
            let e = if placed {
                Partial::Placed(*w, Ok(()))
            } else {
                let mut buf = match self.partial.remove(&key) {
                    Some(Partial::Kept(_, b)) => b,
                    _ => Vec::new(),
                };
                buf.clear();
                buf.resize(w.total as usize, 0);
                Partial::Kept(*w, buf)
            };
            self.partial.insert(key, e);
            if placed {
                return self.finish(key, w);
            }
        }
        let e = self
            .partial
            .entry(key)
            .or_insert_with(|| Partial::Kept(*w, vec![0; w.total as usize]));
        let off = w.offset as usize;
        match e {
            Partial::Kept(_, buf) => {
                let end = off + data.len();
                if end <= buf.len() {
                    buf[off..end].copy_from_slice(data);
                }
            }
            Partial::Placed(_, st) => {
                if st.is_ok() {
                    if let Some(r) = RECEIVER.get() {
                        *st = (r.place)(w, data, false);
                    }
                }
            }
        }
        self.finish(key, w);
    }

    /// Hands over the message of `key` when `w` was its last fragment.
    fn finish(&mut self, key: (u32, u32, bool), w: &Wire) {
        if (w.offset as usize).saturating_add(w.len as usize) < w.total as usize {
            return;
        }
        match self.partial.remove(&key) {
            Some(Partial::Kept(head, buf)) => dispatch(&head, &buf),
            Some(Partial::Placed(head, st)) => {
                if let Some(r) = RECEIVER.get() {
                    (r.placed)(&head, st);
                }
            }
            None => {}
        }
        if self.partial.is_empty() {
            self.partial.shrink_to_fit();
        }
    }
}

/// What the layer above the fabric (the data path) does with what
/// arrives. Given to [`attach`], so the fabric never names that layer.
pub struct Receiver {
    /// A request from another process; `replayed` when it is one that
    /// arrived early and is delivered now (see [`replay`]).
    pub request: fn(&Wire, &[u8], bool),
    /// A fragment of a request that arrives in several (`first`: the one
    /// at offset 0): `Ok` when the layer above placed its bytes itself, so
    /// the engine keeps none of them. Asked at the first fragment; an
    /// `Err` there has the message reassembled and given to `request`
    /// (which answers it as usual), an `Err` later is the message's
    /// outcome, given to `placed` at its end.
    pub place: fn(&Wire, &[u8], bool) -> Result<(), c_int>,
    /// The end of a message whose fragments went to `place`: the header
    /// of its first fragment and the first failure, if any.
    pub placed: fn(&Wire, Result<(), c_int>),
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
    // A program thread is polling: the progress thread leaves the engine
    // to it (see `progress_thread`). A plain increment (a lost one between
    // two polling threads changes nothing: any change is the signal).
    POLLS.store(
        POLLS.load(Ordering::Relaxed).wrapping_add(1),
        Ordering::Relaxed,
    );
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

/// Program threads' calls of [`poll_progress`] and [`armed`], counted:
/// see `progress_thread`.
static POLLS: AtomicU64 = AtomicU64::new(0);
static ARMS: AtomicU64 = AtomicU64::new(0);
/// The progress thread's nap: the futex word [`armed`] bumps to end it,
/// and whether it is napping.
static NAP_WORD: AtomicU32 = AtomicU32::new(0);
static NAPPING: AtomicBool = AtomicBool::new(false);
/// How long the progress thread naps while program threads poll: the
/// most a message waits if they stop polling to wait for something else
/// than a completion event.
const NAP_NS: u64 = 100_000;

/// A CQ was armed (`ibv_req_notify_cq`): a program thread is about to wait
/// for a completion event, which the engine must produce. A napping
/// progress thread wakes up (one system call, only while it naps).
pub fn armed() {
    ARMS.fetch_add(1, Ordering::SeqCst);
    if NAPPING.load(Ordering::SeqCst) {
        NAP_WORD.fetch_add(1, Ordering::SeqCst);
        ring::futex_wake(&NAP_WORD);
    }
}

pub(super) fn progress_thread(stop: Arc<AtomicBool>) {
    let mut last_active = 0u64;
    let mut seen = (POLLS.load(Ordering::Relaxed), ARMS.load(Ordering::SeqCst));
    while !stop.load(Ordering::SeqCst) {
        // Program threads polled since the last look, and none armed a CQ
        // to wait for an event: they run the engine themselves (ACKs,
        // WRITEs, what the outbox waits to send). Out of their way, and
        // unannounced, so that peers do not pay a futex wake per message
        // for a thread that would find nothing to do, nor does a third
        // busy thread share the cores with the two of a transfer.
        let now_seen = (POLLS.load(Ordering::Relaxed), ARMS.load(Ordering::SeqCst));
        let polled_only = now_seen.0 != seen.0 && now_seen.1 == seen.1;
        seen = now_seen;
        if polled_only {
            let w = NAP_WORD.load(Ordering::SeqCst);
            NAPPING.store(true, Ordering::SeqCst);
            // An arm after the look above ends the nap: it either shows
            // here or sees NAPPING and moves the word.
            if ARMS.load(Ordering::SeqCst) == seen.1 {
                ring::futex_wait(&NAP_WORD, w, NAP_NS);
            }
            NAPPING.store(false, Ordering::SeqCst);
            continue;
        }
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

#[cfg(test)]
mod tests {
    use super::*;

    /// What the test receiver was given: (callback, offset or total, bytes).
    static SEEN: std::sync::Mutex<Vec<(&'static str, u32, Vec<u8>)>> =
        std::sync::Mutex::new(Vec::new());

    fn note(what: &'static str, at: u32, data: &[u8]) {
        SEEN.lock().unwrap().push((what, at, data.to_vec()));
    }

    /// Places WRITEs (refusing a first fragment whose `rkey` is 13, or a
    /// later one whose `imm` is 13), keeps nothing else.
    static RX: Receiver = Receiver {
        request: |w, d, _| note("request", w.total, d),
        place: |w, d, first| {
            if w.kind != wire::kind::WRITE || (first && w.rkey == 13) {
                return Err(1);
            }
            if !first && w.imm == 13 {
                return Err(7);
            }
            note("place", w.offset, d);
            Ok(())
        },
        placed: |w, st| note("placed", w.total, &[st.err().unwrap_or(0) as u8]),
        response: |w, d| note("response", w.total, d),
        tick: || {},
        busy: || false,
    };

    /// Feeds one message in fragments of `chunk` bytes (the sender's
    /// way), returns what the receiver saw.
    fn feed(
        e: &mut Engine,
        kind: u32,
        rkey: u32,
        imm: u32,
        msg: &[u8],
        chunk: usize,
    ) -> Vec<(&'static str, u32, Vec<u8>)> {
        SEEN.lock().unwrap().clear();
        let mut w = Wire::zeroed();
        w.kind = kind;
        w.rkey = rkey;
        w.imm = imm;
        w.src_qpn = 5;
        w.total = msg.len() as u32;
        for (i, c) in msg.chunks(chunk).enumerate() {
            w.offset = (i * chunk) as u32;
            w.len = c.len() as u32;
            e.feed(&w, c);
        }
        std::mem::take(&mut *SEEN.lock().unwrap())
    }

    #[test]
    fn fragmented_writes_are_placed_as_they_come_and_the_rest_reassembled() {
        assert!(RECEIVER.set(&RX).is_ok());
        let mut e = Engine {
            partial: HashMap::new(),
            next_deadline_check: 0,
            stall: None,
        };
        let msg: Vec<u8> = (0..10u8).collect();
        // A WRITE: every fragment placed as it arrives, nothing kept.
        let got = feed(&mut e, wire::kind::WRITE, 1, 0, &msg, 4);
        let want = vec![
            ("place", 0, msg[0..4].to_vec()),
            ("place", 4, msg[4..8].to_vec()),
            ("place", 8, msg[8..10].to_vec()),
            ("placed", 10, vec![0]),
        ];
        assert_eq!(got, want);
        assert!(e.partial.is_empty());
        // A later fragment refused: the rest is not placed, the failure is the outcome.
        let got = feed(&mut e, wire::kind::WRITE, 1, 13, &msg, 4);
        assert_eq!(
            got,
            vec![("place", 0, msg[0..4].to_vec()), ("placed", 10, vec![7])]
        );
        // A first fragment refused, or another kind: reassembled, handed over whole.
        for (kind, rkey) in [(wire::kind::WRITE, 13), (wire::kind::SEND, 1)] {
            let got = feed(&mut e, kind, rkey, 0, &msg, 4);
            assert_eq!(got, vec![("request", 10, msg.clone())]);
        }
        // Unfragmented: handed over as it is.
        let got = feed(&mut e, wire::kind::WRITE, 1, 0, &msg, 64);
        assert_eq!(got, vec![("request", 10, msg.clone())]);
        assert!(e.partial.is_empty());
    }
}
