//! The shim's one hash and its one lock-free side table keyed by address.
//!
//! [`hash`] is Fibonacci hashing (multiply by 2^64 / phi, keep the top
//! bits): every table of the shim picks its slot with it. [`AddrTable`] is
//! a fixed, open-addressed table of entries found by a verbs object's
//! address (a context's saved function tables, an extended QP's builders,
//! a queue's caps): a lookup is a hash and a load or two, no lock, no
//! allocation; a fork or a signal handler can never find it locked.
//! Entries live in zeroed static memory (pages never touched cost nothing)
//! and are never freed, only reused: an entry keeps its key until it is
//! [`release`](AddrTable::release)d, so a probe chain stays whole.

use std::sync::atomic::{AtomicUsize, Ordering};

/// Fibonacci hashing's multiplier: 2^64 divided by the golden ratio.
const PHI: u64 = 0x9e37_79b9_7f4a_7c15;

/// `key` scrambled: the product's high bits are the well-mixed ones.
#[inline(always)]
pub const fn mix(key: u64) -> u64 {
    key.wrapping_mul(PHI)
}

/// The top `bits` bits of `key` scrambled: an index below `1 << bits`.
#[inline(always)]
pub const fn hash(key: u64, bits: u32) -> usize {
    (mix(key) >> (64 - bits)) as usize
}

/// An entry's key word: its object's address, or one of these.
pub mod key {
    /// Never used: the end of every probe chain through it.
    pub const EMPTY: usize = 0;
    /// Claimed, its value still being written: found by no lookup.
    pub const PENDING: usize = 1;
    /// Used and free again: reusable, but a probe chain goes on past it.
    pub const FREED: usize = 2;
}

/// An entry of an [`AddrTable`]: its key word, then what it keeps.
pub trait Keyed: 'static {
    fn key(&self) -> &AtomicUsize;
}

/// `N` entries (a power of two), each found within `PROBE` slots of the
/// home its key hashes to.
pub struct AddrTable<V: Keyed, const N: usize, const PROBE: usize> {
    slots: [V; N],
}

impl<V: Keyed, const N: usize, const PROBE: usize> AddrTable<V, N, PROBE> {
    /// A table of `slots`, every key [`key::EMPTY`].
    pub const fn new(slots: [V; N]) -> Self {
        assert!(N.is_power_of_two() && PROBE >= 1 && PROBE <= N);
        AddrTable { slots }
    }

    #[inline(always)]
    fn home(addr: usize) -> usize {
        hash(addr as u64, N.trailing_zeros())
    }

    /// The slot `addr`'s probe starts at (addresses that share it share a
    /// window).
    pub fn home_of(&self, addr: usize) -> usize {
        Self::home(addr)
    }

    /// The entries `addr` may be in, its home first.
    #[inline]
    fn window(&self, addr: usize) -> impl Iterator<Item = &V> {
        let h = Self::home(addr);
        (0..PROBE).map(move |i| &self.slots[(h + i) & (N - 1)])
    }

    /// The entry of `addr`: its home (one load: the common case), else the
    /// rest of its window.
    #[inline]
    pub fn find(&self, addr: usize) -> Option<&V> {
        let e = &self.slots[Self::home(addr)];
        if e.key().load(Ordering::Acquire) == addr {
            return Some(e);
        }
        self.find_further(addr)
    }

    #[inline(never)]
    fn find_further(&self, addr: usize) -> Option<&V> {
        for e in self.window(addr) {
            match e.key().load(Ordering::Acquire) {
                k if k == addr => return Some(e),
                key::EMPTY => return None,
                _ => {}
            }
        }
        None
    }

    /// The entry of `addr` if it has one, else a free one claimed for it,
    /// its key [`key::PENDING`] until [`publish`](Self::publish)ed (then
    /// `fresh` is true). None when its window is full.
    pub fn claim(&self, addr: usize) -> Option<(&V, bool)> {
        debug_assert!(addr > key::FREED);
        if let Some(e) = self.find(addr) {
            return Some((e, false));
        }
        for e in self.window(addr) {
            for free in [key::EMPTY, key::FREED] {
                if e.key()
                    .compare_exchange(free, key::PENDING, Ordering::Acquire, Ordering::Relaxed)
                    .is_ok()
                {
                    return Some((e, true));
                }
            }
        }
        None
    }

    /// Makes a claimed entry `addr`'s: lookups find it from now on, with
    /// what was written into it before (a release store).
    pub fn publish(&self, e: &V, addr: usize) {
        e.key().store(addr, Ordering::Release);
    }

    /// `addr` has no entry any more (every one it has: a racing claim may
    /// have made two); each is free for another address.
    pub fn release(&self, addr: usize) {
        for e in self.window(addr) {
            match e.key().load(Ordering::Acquire) {
                key::EMPTY => return,
                k if k == addr => {
                    let _ = e.key().compare_exchange(
                        k,
                        key::FREED,
                        Ordering::AcqRel,
                        Ordering::Relaxed,
                    );
                }
                _ => {}
            }
        }
    }

    /// Every entry that belongs to an address, for a search by something
    /// other than its key.
    pub fn live(&self) -> impl Iterator<Item = &V> {
        self.slots
            .iter()
            .filter(|e| e.key().load(Ordering::Acquire) > key::FREED)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    struct E {
        key: AtomicUsize,
        v: AtomicUsize,
    }
    impl Keyed for E {
        fn key(&self) -> &AtomicUsize {
            &self.key
        }
    }

    static T: AddrTable<E, 64, 4> = AddrTable::new(
        [const {
            E {
                key: AtomicUsize::new(0),
                v: AtomicUsize::new(0),
            }
        }; 64],
    );

    #[test]
    fn claimed_found_released_and_reused() {
        let a = 0x7f00_1234_5000;
        assert!(T.find(a).is_none());
        let (e, fresh) = T.claim(a).unwrap();
        assert!(fresh);
        assert!(T.find(a).is_none(), "pending: not found yet");
        e.v.store(7, Ordering::Relaxed);
        T.publish(e, a);
        assert_eq!(T.find(a).unwrap().v.load(Ordering::Relaxed), 7);
        assert!(!T.claim(a).unwrap().1, "claimed again: the same entry");
        // Addresses of the same home fill its window, then find no room.
        let same: Vec<usize> = (1..)
            .map(|j| a + j * 64)
            .filter(|&b| AddrTable::<E, 64, 4>::home(b) == AddrTable::<E, 64, 4>::home(a))
            .take(4)
            .collect();
        for &b in &same[..3] {
            let (e, _) = T.claim(b).unwrap();
            T.publish(e, b);
        }
        assert!(T.claim(same[3]).is_none());
        // A freed entry ends no chain and is reused.
        T.release(a);
        assert!(T.find(a).is_none());
        assert!(T.find(same[2]).is_some());
        let (e, _) = T.claim(same[3]).unwrap();
        T.publish(e, same[3]);
        assert!(T.find(same[3]).is_some());
        assert_eq!(T.live().count(), 4);
    }

    #[test]
    fn the_hash_spreads_aligned_addresses() {
        let homes: std::collections::BTreeSet<usize> = (0..256u64)
            .map(|i| hash(0x5555_0000_0000 + i * 4096, 10))
            .collect();
        assert!(homes.len() > 200, "{}", homes.len());
        assert!(homes.iter().all(|&h| h < 1024));
    }
}
