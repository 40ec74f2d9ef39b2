//! A process's inbound ring in the fabric segment: a bounded
//! multi-producer queue of fixed-size slots (each slot carries its own
//! sequence number, so a producer claims a slot with one CAS and publishes
//! it with one store; no lock a dead process could hold), drained by the
//! owning process alone. A sleeping consumer is woken through a futex in
//! the shared segment.

use core::sync::atomic::{AtomicU32, AtomicU64, Ordering};

use super::wire::Wire;

/// Slots per ring (2 MiB a ring, as with 256 of 8 KiB: a 64 KiB RDMA
/// WRITE in 5 fragments instead of 9 halves the responder's per-fragment
/// checks, which were a quarter of its time in `ib_write_bw`).
pub const SLOTS: usize = 128;
/// Bytes per slot, header included.
pub const SLOT_SIZE: usize = 16384;
/// Payload bytes a slot carries.
pub const CHUNK: usize = SLOT_SIZE - 16 - core::mem::size_of::<Wire>();

/// The ring's control words, on a page of their own.
#[repr(C, align(64))]
pub struct RingHdr {
    enq: AtomicU64,
    _p0: [u8; 56],
    deq: AtomicU64,
    _p1: [u8; 56],
    /// The consumer is (about to be) asleep on `wake`.
    sleeping: AtomicU32,
    /// The futex word producers bump to wake the consumer.
    wake: AtomicU32,
    _reserved: AtomicU64,
}

#[repr(C)]
pub struct Slot {
    seq: AtomicU64,
    /// The token of the producer that claimed the slot (0 once consumed):
    /// lets the consumer skip a slot whose producer died before publishing.
    claimer: AtomicU64,
    pub wire: Wire,
    pub data: [u8; CHUNK],
}

const _: () = assert!(core::mem::size_of::<Slot>() == SLOT_SIZE);
const _: () = assert!(core::mem::size_of::<RingHdr>() <= RING_HDR);

/// Bytes of the ring's header page.
pub const RING_HDR: usize = 4096;
/// Bytes of one whole ring.
pub const RING_BYTES: usize = RING_HDR + SLOTS * SLOT_SIZE;

/// A ring at an address inside the mapped segment.
#[derive(Clone, Copy)]
pub struct Ring {
    base: usize,
}

impl Ring {
    /// # Safety
    /// `base` must point at `RING_BYTES` mapped bytes that stay mapped
    /// while the ring is used.
    pub unsafe fn at(base: usize) -> Ring {
        Ring { base }
    }

    fn hdr(&self) -> &RingHdr {
        // SAFETY: `at`'s contract; RingHdr is all atomics (any bit pattern is valid).
        unsafe { &*(self.base as *const RingHdr) }
    }

    fn slot(&self, pos: u64) -> *mut Slot {
        (self.base + RING_HDR + (pos as usize % SLOTS) * SLOT_SIZE) as *mut Slot
    }

    fn claimer(&self, pos: u64) -> &AtomicU64 {
        // SAFETY: inside the ring (see `at`); the word is only accessed atomically.
        unsafe { &*core::ptr::addr_of!((*self.slot(pos)).claimer) }
    }

    fn seq(&self, pos: u64) -> &AtomicU64 {
        // SAFETY: inside the ring (see `at`); the word is only accessed atomically.
        unsafe { &*core::ptr::addr_of!((*self.slot(pos)).seq) }
    }

    /// Empties the ring for a new owner (under the segment's attach lock,
    /// when no live process uses it).
    pub fn reset(&self) {
        let h = self.hdr();
        h.enq.store(0, Ordering::Relaxed);
        h.deq.store(0, Ordering::Relaxed);
        h.sleeping.store(0, Ordering::Relaxed);
        for i in 0..SLOTS as u64 {
            self.claimer(i).store(0, Ordering::Relaxed);
            self.seq(i).store(i, Ordering::Release);
        }
    }

    /// Queues one message from the producer `token`, `data` at most CHUNK
    /// bytes; false when the ring is full.
    pub fn push(&self, token: u64, wire: &Wire, data: &[u8]) -> bool {
        debug_assert!(data.len() <= CHUNK);
        let h = self.hdr();
        let mut pos = h.enq.load(Ordering::Relaxed);
        loop {
            let seq = self.seq(pos).load(Ordering::Acquire);
            let diff = seq.wrapping_sub(pos) as i64;
            if diff == 0 {
                match h.enq.compare_exchange_weak(
                    pos,
                    pos + 1,
                    Ordering::Relaxed,
                    Ordering::Relaxed,
                ) {
                    Ok(_) => break,
                    Err(p) => pos = p,
                }
            } else if diff < 0 {
                return false;
            } else {
                // Another producer took `pos`: enq has moved past it. If
                // it has not, the slot holds a number from before a reset
                // of the ring (a producer that published into the new
                // ring, see below): refuse, never spin on it.
                let p = h.enq.load(Ordering::Relaxed);
                if p == pos {
                    return false;
                }
                pos = p;
            }
        }
        self.claimer(pos).store(token, Ordering::Release);
        let s = self.slot(pos);
        // At most a slot's CHUNK bytes (callers cut messages into CHUNKs;
        // the debug assertion above says when one did not).
        let len = data.len().min(CHUNK);
        // SAFETY: the CAS above gave this producer slot `pos` until it
        // publishes it; the consumer does not read it before then; `len`
        // bytes fit its `data`.
        unsafe {
            core::ptr::addr_of_mut!((*s).wire).write(*wire);
            core::ptr::copy_nonoverlapping(
                data.as_ptr(),
                core::ptr::addr_of_mut!((*s).data).cast::<u8>(),
                len,
            );
        }
        // Published only if the slot is still the one claimed: the ring's
        // owner may have died meanwhile and a new one reset the ring
        // (`reset`, seq = index); a plain store would plant this old
        // lap's sequence number in the new ring and stall it for ever.
        // The message is then lost, as its receiver is gone.
        if self
            .seq(pos)
            .compare_exchange(pos, pos + 1, Ordering::Release, Ordering::Relaxed)
            .is_err()
        {
            return true;
        }
        if h.sleeping.load(Ordering::SeqCst) != 0 {
            h.wake.fetch_add(1, Ordering::SeqCst);
            futex_wake(&h.wake);
        }
        true
    }

    pub fn is_empty(&self) -> bool {
        let pos = self.hdr().deq.load(Ordering::Relaxed);
        self.seq(pos).load(Ordering::Acquire) != pos + 1
    }

    /// Hands the oldest message to `f` and frees its slot. Only the
    /// ring's owner calls this, one thread at a time (the engine lock).
    pub fn pop<R>(&self, f: impl FnOnce(&Wire, &[u8]) -> R) -> Option<R> {
        let h = self.hdr();
        let pos = h.deq.load(Ordering::Relaxed);
        if self.seq(pos).load(Ordering::Acquire) != pos + 1 {
            return None;
        }
        let s = self.slot(pos);
        // SAFETY: the slot was published (seq == pos + 1) and is ours until
        // we hand it back below; the length was bounded by the producer and
        // is clamped again here.
        let r = unsafe {
            let wire = &*core::ptr::addr_of!((*s).wire);
            let n = (wire.len as usize).min(CHUNK);
            let data = core::slice::from_raw_parts(core::ptr::addr_of!((*s).data).cast::<u8>(), n);
            f(wire, data)
        };
        self.claimer(pos).store(0, Ordering::Relaxed);
        self.seq(pos).store(pos + SLOTS as u64, Ordering::Release);
        h.deq.store(pos + 1, Ordering::Relaxed);
        Some(r)
    }

    /// The oldest slot when it was claimed but not published: its
    /// position and its producer's token (0: not known yet).
    pub fn stalled_head(&self) -> Option<(u64, u64)> {
        let h = self.hdr();
        let pos = h.deq.load(Ordering::Relaxed);
        if h.enq.load(Ordering::Acquire) <= pos || self.seq(pos).load(Ordering::Acquire) == pos + 1
        {
            return None;
        }
        Some((pos, self.claimer(pos).load(Ordering::Acquire)))
    }

    /// Frees the oldest slot without reading it: its producer died
    /// between claiming and publishing it (the caller checked), so it
    /// will never be published.
    pub fn skip_head(&self, pos: u64) {
        let h = self.hdr();
        if h.deq.load(Ordering::Relaxed) != pos || self.seq(pos).load(Ordering::Acquire) != pos {
            return;
        }
        self.claimer(pos).store(0, Ordering::Relaxed);
        self.seq(pos).store(pos + SLOTS as u64, Ordering::Release);
        h.deq.store(pos + 1, Ordering::Relaxed);
    }

    /// Wakes the consumer (to make it look at a stop flag).
    pub fn kick(&self) {
        let h = self.hdr();
        h.wake.fetch_add(1, Ordering::SeqCst);
        futex_wake(&h.wake);
    }

    /// Sleeps until a producer wakes us or `timeout_ns` passes.
    pub fn wait(&self, timeout_ns: u64) {
        let h = self.hdr();
        let w = h.wake.load(Ordering::SeqCst);
        h.sleeping.store(1, Ordering::SeqCst);
        if self.is_empty() {
            futex_wait(&h.wake, w, timeout_ns);
        }
        h.sleeping.store(0, Ordering::SeqCst);
    }
}

/// Wakes a waiter of another process (the ring is shared memory: not a
/// private futex).
pub(super) fn futex_wake(word: &AtomicU32) {
    ::fork_lock::futex::wake_shared(word, 1);
}

/// Sleeps while `word` is `expected`, at most `timeout_ns`.
pub(super) fn futex_wait(word: &AtomicU32, expected: u32, timeout_ns: u64) {
    ::fork_lock::futex::wait_shared(
        word,
        expected,
        Some(std::time::Duration::from_nanos(timeout_ns)),
    );
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ring() -> (Vec<u64>, Ring) {
        let mut mem = vec![0u64; RING_BYTES / 8];
        // SAFETY: RING_BYTES of zeroed, 8-aligned memory that outlives the ring.
        let r = unsafe { Ring::at(mem.as_mut_ptr() as usize) };
        r.reset();
        (mem, r)
    }

    fn msg(n: u32) -> Wire {
        let mut w = Wire::zeroed();
        w.seq = u64::from(n);
        w.len = 4;
        w
    }

    #[test]
    fn messages_come_out_in_order_and_a_full_ring_refuses() {
        let (_m, r) = ring();
        for i in 0..SLOTS as u32 {
            assert!(r.push(7, &msg(i), &i.to_le_bytes()));
        }
        assert!(!r.push(7, &msg(0), &[]));
        for i in 0..SLOTS as u32 {
            let got = r.pop(|w, d| (w.seq, d.to_vec())).unwrap();
            assert_eq!(got, (u64::from(i), i.to_le_bytes().to_vec()));
        }
        assert!(r.pop(|_, _| ()).is_none() && r.is_empty());
    }

    #[test]
    fn a_slot_left_with_an_old_laps_number_is_refused_not_spun_on() {
        let (_m, r) = ring();
        // A producer of the ring's previous owner published slot 0 after
        // the new owner's reset (the qperf test's server hung on this).
        r.seq(0).store(SLOTS as u64 * 5 + 1, Ordering::Release);
        assert!(!r.push(7, &msg(1), &[]));
        assert!(r.pop(|_, _| ()).is_none());
    }

    #[test]
    fn a_slot_claimed_by_a_producer_that_died_can_be_skipped() {
        let (_m, r) = ring();
        assert!(r.push(7, &msg(1), &[1, 0, 0, 0]));
        // A producer (token 9) claims the next slot and dies before publishing.
        let pos = r.hdr().enq.fetch_add(1, Ordering::AcqRel);
        r.claimer(pos).store(9, Ordering::Release);
        assert!(r.push(7, &msg(3), &[3, 0, 0, 0]));
        assert_eq!(r.pop(|w, _| w.seq), Some(1));
        assert_eq!(r.pop(|w, _| w.seq), None, "stalled behind the dead claim");
        assert_eq!(r.stalled_head(), Some((pos, 9)));
        r.skip_head(pos);
        assert_eq!(r.pop(|w, _| w.seq), Some(3));
        assert_eq!(r.stalled_head(), None);
        // The skipped slot is usable again on the next lap.
        for i in 0..SLOTS as u32 {
            assert!(r.push(7, &msg(i), &[]));
        }
    }
}
