//! One queue's outstanding work requests, in post order: a fixed ring of
//! entries sized by the queue's depth, each with the SGEs it was given
//! (up to the queue's granted SGEs, at most `MAX_SGES`) and, for a send's source, what
//! is kept of each SGE's bytes (`Evidence`: a copy of a short one, else
//! xxh3 fingerprints of its blocks). Made once per queue at its first tracked
//! post; nothing is allocated after that.

use std::sync::atomic::{AtomicBool, Ordering};

use verbs_abi::ibv_sge;

/// Entry flags.
pub(super) mod flag {
    /// Its completion is signalled (or the QP signals every send).
    pub const SIGNALED: u8 = 1;
    /// Completed, or never posted (the provider refused it).
    pub const DONE: u8 = 2;
    /// Its SGEs' bytes were fingerprinted at post (a send's source).
    pub const SOURCE: u8 = 4;
    /// The NIC writes its SGEs (a receive, a READ, an atomic's result).
    pub const WRITES: u8 = 8;
    /// Flushed: its QP went to ERR, and the device touches its buffers no
    /// more (its completion, a flush, is still due).
    pub const FLUSHED: u8 = 16;
}

/// One outstanding work request.
#[derive(Clone, Copy)]
pub(super) struct Entry {
    pub wr_id: u64,
    /// `IBV_WR_*`, or -1 for a receive.
    pub opcode: i32,
    pub flags: u8,
    /// SGEs kept (at most the ring's `per_wr`).
    pub nsge: u16,
    /// The program's call that posted it.
    pub site: usize,
    /// The memory window a bind binds (its address), or the rkey a local
    /// invalidation invalidates; 0 for other requests.
    pub obj: u64,
}

const NONE: Entry = Entry {
    wr_id: 0,
    opcode: -1,
    flags: flag::DONE,
    nsge: 0,
    site: 0,
    obj: 0,
};

/// What is kept of one SGE's bytes at the post: a copy (up to 64 bytes)
/// or the fingerprints of up to 8 blocks (`super::evidence`).
pub(super) type Evidence = [u64; 8];

/// The SGEs kept per work request at most (a request with more is
/// tracked, but not fingerprinted).
pub(super) const MAX_SGES: usize = 32;

/// A queue's outstanding work requests: positions `tail..head`.
pub(super) struct Ring {
    entries: Box<[Entry]>,
    sges: Box<[ibv_sge]>,
    evidence: Box<[Evidence]>,
    per_wr: usize,
    pub head: u64,
    pub tail: u64,
}

impl Ring {
    /// A ring for `depth` work requests of up to `sges` SGEs each.
    pub(super) fn new(depth: usize, sges: usize) -> Ring {
        let cap = depth.max(1).next_power_of_two();
        let per_wr = sges.clamp(1, MAX_SGES);
        let zero = ibv_sge {
            addr: 0,
            length: 0,
            lkey: 0,
        };
        Ring {
            entries: vec![NONE; cap].into_boxed_slice(),
            sges: vec![zero; cap * per_wr].into_boxed_slice(),
            evidence: vec![[0; 8]; cap * per_wr].into_boxed_slice(),
            per_wr,
            head: 0,
            tail: 0,
        }
    }

    pub(super) fn cap(&self) -> usize {
        self.entries.len()
    }

    pub(super) fn per_wr(&self) -> usize {
        self.per_wr
    }

    fn slot(&self, pos: u64) -> usize {
        (pos as usize) & (self.cap() - 1)
    }

    /// Adds `e` at the head; None when the ring is full (the provider
    /// refuses a post to a full queue: nothing is tracked for it).
    pub(super) fn push(&mut self, e: Entry) -> Option<u64> {
        if (self.head - self.tail) as usize >= self.cap() {
            return None;
        }
        let pos = self.head;
        let s = self.slot(pos);
        self.entries[s] = Entry { nsge: 0, ..e };
        self.head += 1;
        Some(pos)
    }

    pub(super) fn get(&self, pos: u64) -> &Entry {
        &self.entries[self.slot(pos)]
    }

    pub(super) fn get_mut(&mut self, pos: u64) -> &mut Entry {
        let s = self.slot(pos);
        &mut self.entries[s]
    }

    /// Entry `pos`'s kept SGEs.
    pub(super) fn sges(&self, pos: u64) -> &[ibv_sge] {
        let s = self.slot(pos) * self.per_wr;
        &self.sges[s..s + self.get(pos).nsge as usize]
    }

    /// What was kept of entry `pos`'s SGEs' bytes.
    pub(super) fn evidence(&self, pos: u64) -> &[Evidence] {
        let s = self.slot(pos) * self.per_wr;
        &self.evidence[s..s + self.get(pos).nsge as usize]
    }

    /// Keeps `sge` (and what was kept of its bytes) for entry `pos`, if
    /// there is room.
    pub(super) fn add_sge(&mut self, pos: u64, sge: ibv_sge, kept: Evidence) -> bool {
        let n = self.get(pos).nsge as usize;
        if n >= self.per_wr {
            return false;
        }
        let s = self.slot(pos) * self.per_wr + n;
        self.sges[s] = sge;
        self.evidence[s] = kept;
        self.get_mut(pos).nsge += 1;
        true
    }

    /// The outstanding positions, oldest first.
    pub(super) fn live(&self) -> impl Iterator<Item = u64> + '_ {
        (self.tail..self.head).filter(|&p| self.get(p).flags & flag::DONE == 0)
    }

    /// Moves the tail past the done entries.
    pub(super) fn advance(&mut self) {
        while self.tail < self.head && self.get(self.tail).flags & flag::DONE != 0 {
            self.tail += 1;
        }
    }

    /// Entries `from..to` never reached the queue: done, and the head
    /// back where it was when they are the newest.
    pub(super) fn cancel(&mut self, from: u64, to: u64) {
        for p in from.max(self.tail)..to.min(self.head) {
            self.get_mut(p).flags |= flag::DONE;
        }
        if self.head == to {
            while self.head > self.tail && self.get(self.head - 1).flags & flag::DONE != 0 {
                self.head -= 1;
            }
        }
        self.advance();
    }

    /// Everything forgotten (a QP reset or destroyed).
    pub(super) fn clear(&mut self) {
        self.tail = self.head;
    }
}

/// A spin lock that gives up: the ring's users never hold it across a
/// call into the provider, and a child of `fork()` that inherited it held
/// must not hang (it then skips the tracking).
pub(super) struct Locked<T> {
    busy: AtomicBool,
    value: std::cell::UnsafeCell<T>,
}

// SAFETY: the value is reached only through `with`, under `busy`.
unsafe impl<T: Send> Sync for Locked<T> {}

impl<T> Locked<T> {
    pub(super) fn new(value: T) -> Self {
        Locked {
            busy: AtomicBool::new(false),
            value: std::cell::UnsafeCell::new(value),
        }
    }

    /// `f` on the value, or None if the lock stayed taken for ~a million
    /// tries.
    pub(super) fn with<R>(&self, f: impl FnOnce(&mut T) -> R) -> Option<R> {
        let mut tries = 0u32;
        while self
            .busy
            .compare_exchange_weak(false, true, Ordering::Acquire, Ordering::Relaxed)
            .is_err()
        {
            tries += 1;
            if tries > 1 << 20 {
                return None;
            }
            std::hint::spin_loop();
        }
        struct Release<'a>(&'a AtomicBool);
        impl Drop for Release<'_> {
            fn drop(&mut self) {
                self.0.store(false, Ordering::Release);
            }
        }
        let _release = Release(&self.busy);
        // SAFETY: `busy` is ours until `_release` drops.
        Some(f(unsafe { &mut *self.value.get() }))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn e(wr_id: u64) -> Entry {
        Entry {
            wr_id,
            opcode: 2,
            flags: 0,
            nsge: 0,
            site: 0,
            obj: 0,
        }
    }

    #[test]
    fn a_ring_holds_its_depth_and_cancels_its_newest() {
        let mut r = Ring::new(3, 2);
        assert_eq!(r.cap(), 4);
        for i in 0..4 {
            assert_eq!(r.push(e(i)), Some(i));
        }
        assert_eq!(r.push(e(9)), None, "full");
        r.cancel(2, 4);
        assert_eq!(r.head, 2);
        assert_eq!(r.live().collect::<Vec<_>>(), [0, 1]);
        r.get_mut(0).flags |= flag::DONE;
        r.advance();
        assert_eq!(r.tail, 1);
        let s = ibv_sge {
            addr: 1,
            length: 2,
            lkey: 3,
        };
        assert!(r.add_sge(1, s, [7; 8]) && r.add_sge(1, s, [8; 8]) && !r.add_sge(1, s, [9; 8]));
        assert_eq!(r.evidence(1), [[7; 8], [8; 8]]);
    }
}
