//! Process-wide lookup tables, sharded so that unrelated contexts (and
//! threads) rarely meet on a lock, and no lock is held for longer than a
//! hash map operation.
//!
//! - [`OBJECTS`]: every live object the sim handed out (context, PD, MR,
//!   CQ, channel, SRQ, QP, AH) by address, with its kind and owning
//!   context. Verbs validate their arguments here before dereferencing
//!   them, so a stale or foreign pointer is an `EINVAL`, not a crash.
//!
//! The tables of QPs by number and MRs by key are `qp::QPS` and `mr::KEYS`,
//! built on [`Sharded`]. The shards' locks are `fork_lock`'s: a forked
//! child finds them free.

use std::collections::HashMap;
use std::hash::{BuildHasherDefault, Hash, Hasher};

use once_cell::sync::Lazy;

use crate::fork_lock::{self, Mutex, Tier};

const SHARDS: usize = 64;

/// The tables' hash of their integer keys (QP numbers, memory keys,
/// addresses): a multiply and a fold, not the default SipHash, which
/// was a tenth of the progress thread's time placing the fragments of
/// RDMA WRITEs (two lookups per fragment). The keys are the sim's own
/// numbers and addresses, not chosen by an adversary; the fold brings
/// the product's high bits down, so the bits the shard choice fixed do
/// not fix the bucket.
#[derive(Default)]
pub struct KeyHasher(u64);

impl Hasher for KeyHasher {
    fn finish(&self) -> u64 {
        let h = self.0.wrapping_mul(0xD6E8_FEB8_6659_FD93);
        h ^ (h >> 32)
    }

    fn write(&mut self, bytes: &[u8]) {
        for b in bytes {
            self.0 = self.0.rotate_left(8) ^ u64::from(*b);
        }
    }

    fn write_u32(&mut self, n: u32) {
        self.0 = self.0.rotate_left(32) ^ u64::from(n);
    }

    fn write_u64(&mut self, n: u64) {
        self.0 = self.0.rotate_left(32) ^ n;
    }

    fn write_usize(&mut self, n: usize) {
        self.write_u64(n as u64);
    }
}

type Table<K, V> = HashMap<K, V, BuildHasherDefault<KeyHasher>>;

#[repr(align(64))]
struct Shard<K, V>(Mutex<Table<K, V>>);

/// A hash map split into independently locked shards.
pub struct Sharded<K, V> {
    shards: Box<[Shard<K, V>]>,
}

/// Keys that pick their own shard.
pub trait ShardKey: Eq + Hash + Copy {
    fn shard(self) -> usize;
}

impl ShardKey for usize {
    fn shard(self) -> usize {
        // Addresses: drop the allocation alignment, mix, take the top bits.
        ((self >> 4).wrapping_mul(0x9E37_79B9_7F4A_7C15) >> 58) % SHARDS
    }
}

impl ShardKey for u32 {
    fn shard(self) -> usize {
        (self as usize).wrapping_mul(0x9E37_79B9) % SHARDS
    }
}

impl<K: ShardKey, V: Clone> Sharded<K, V> {
    pub fn new() -> Self {
        let shards: Box<[Shard<K, V>]> = (0..SHARDS)
            .map(|_| Shard(Mutex::new(Table::default())))
            .collect();
        for s in shards.iter() {
            // SAFETY: the shards are boxed (they do not move with the
            // map) and unregistered when the map is dropped.
            unsafe { fork_lock::register(s.0.raw(), Tier::Table) };
        }
        Sharded { shards }
    }

    fn map(&self, k: K) -> &Mutex<Table<K, V>> {
        &self.shards[k.shard()].0
    }

    /// Inserts unless the key is taken; returns whether it was inserted.
    pub fn insert_new(&self, k: K, v: V) -> bool {
        let mut m = self.map(k).lock();
        if m.contains_key(&k) {
            return false;
        }
        m.insert(k, v);
        true
    }

    pub fn insert(&self, k: K, v: V) {
        self.map(k).lock().insert(k, v);
    }

    pub fn get(&self, k: K) -> Option<V> {
        self.map(k).lock().get(&k).cloned()
    }

    /// Removes a key. An emptied shard gives its table back, so that a
    /// program that destroyed everything leaves no allocation behind
    /// (hash tables hold interior pointers, which leak checkers report as
    /// "possibly lost").
    pub fn remove(&self, k: K) -> Option<V> {
        let mut m = self.map(k).lock();
        let v = m.remove(&k);
        if m.is_empty() {
            m.shrink_to_fit();
        }
        v
    }
}

impl<K, V> Drop for Sharded<K, V> {
    fn drop(&mut self) {
        for s in self.shards.iter() {
            // SAFETY: raw() only reads the lock's address here.
            fork_lock::unregister(unsafe { s.0.raw() });
        }
    }
}

impl<K: ShardKey, V: Clone> Default for Sharded<K, V> {
    fn default() -> Self {
        Self::new()
    }
}

/// Kinds of objects in [`OBJECTS`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    Context,
    Pd,
    Mr,
    Cq,
    Channel,
    Srq,
    Qp,
    Ah,
    /// The objects of `objects/` (those only the context's tables make).
    Mw,
    Xrcd,
    Dm,
    Td,
    Wq,
    RwqIndTable,
    Flow,
    FlowAction,
    Counters,
}

/// An entry of [`OBJECTS`]: what the object is and which context owns it
/// (the `SimContext` address; the context itself for `Kind::Context`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Entry {
    pub kind: Kind,
    pub ctx: usize,
    /// The `handle` the object's C struct was given (0: not checked), by
    /// which the kernel knows it (`context::known`).
    pub handle: u32,
}

pub static OBJECTS: Lazy<Sharded<usize, Entry>> = Lazy::new(Sharded::new);

/// The owning context of a live object of kind `kind` at `addr`.
pub fn owner(addr: usize, kind: Kind) -> Option<usize> {
    match OBJECTS.get(addr) {
        Some(e) if e.kind == kind => Some(e.ctx),
        _ => None,
    }
}

/// The handle a live object at `addr` was given (0: none checked).
pub fn handle(addr: usize) -> Option<u32> {
    OBJECTS.get(addr).map(|e| e.handle)
}

/// Whether `addr` is (still) a live object of kind `kind`.
pub fn is_live(addr: usize, kind: Kind) -> bool {
    owner(addr, kind).is_some()
}
