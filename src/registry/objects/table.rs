//! One shard's table: the slab of records, the open-addressing index over it,
//! and the per-context lists.

use std::collections::HashMap;
use std::hash::{BuildHasherDefault, Hasher};

use super::chunk::{no_memory, out_of_memory, Chunk, Link};
use super::record::{Obj, Rec};

/// Records in a shard's first slab chunk (1 KiB); each next chunk is twice
/// the last, so a shard that holds a few objects costs a page, not more,
/// and a big one wastes at most half a chunk that was never touched.
const FIRST_CHUNK: usize = 16;
pub(super) const NO_FREE: u32 = u32::MAX;
pub(super) const HASH_MUL: u64 = 0x9E37_79B9_7F4A_7C15;

#[inline]
pub(super) fn hash(addr: usize) -> u64 {
    (addr as u64).wrapping_mul(HASH_MUL)
}

/// Index slot layout: `addr >> 3` (44 bits: user addresses are below 2^47
/// and objects are 8-aligned) above the slab index + 1 (20 bits); 0 = empty.
const IDX_BITS: u32 = 20;
/// Records per shard: 256 shards x 1M = 268M objects. (The two highest
/// 20-bit values are the list sentinels below.)
const MAX_RECS: u32 = (1 << IDX_BITS) - 3;
/// List link sentinels (20 bits): no neighbour; not in any list.
const NIL: u32 = (1 << IDX_BITS) - 1;
const UNLISTED: u32 = (1 << IDX_BITS) - 2;

/// The hash of a context address, for the per-shard list heads.
#[derive(Default)]
struct AddrHasher(u64);

impl Hasher for AddrHasher {
    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.0 = (self.0 ^ b as u64).wrapping_mul(HASH_MUL);
        }
    }

    fn write_usize(&mut self, n: usize) {
        self.0 = (n as u64).wrapping_mul(HASH_MUL);
    }

    fn finish(&self) -> u64 {
        // The product's high bits are the well-mixed ones; hashbrown wants
        // both ends.
        self.0 ^ self.0 >> 29
    }
}

type Heads = HashMap<usize, u32, BuildHasherDefault<AddrHasher>>;

/// Can `addr` be a key? (Others are not tracked; no allocator returns them.)
#[inline]
pub(super) fn keyable(addr: usize) -> bool {
    addr & 7 == 0 && addr != 0 && (addr as u64) < 1 << 47
}

/// Chunk and offset of slab slot `i`: chunk `k` holds slots
/// `FIRST_CHUNK * (2^k - 1) ..` (`FIRST_CHUNK << k` of them).
#[inline]
fn chunk_of(i: u32) -> (usize, usize) {
    let p = i as usize + FIRST_CHUNK;
    let log = (usize::BITS - 1 - p.leading_zeros()) as usize;
    let k = log - FIRST_CHUNK.trailing_zeros() as usize;
    (k, p - (1 << log))
}

#[inline]
fn slot_addr(s: u64) -> usize {
    ((s >> IDX_BITS) << 3) as usize
}

#[inline]
pub(super) fn slot_idx(s: u64) -> u32 {
    (s & IDX_MASK) as u32 - 1
}

const IDX_MASK: u64 = (1 << IDX_BITS) - 1;

/// One shard: slab of records plus the open-addressing index over it.
pub(super) struct Table {
    /// See [`IDX_BITS`]. Length is 0 or a power of two.
    slots: Vec<u64>,
    pub(super) len: usize,
    chunks: Vec<Chunk>,
    /// Head of the free list of slab slots (linked through `Rec::a`).
    pub(super) free: u32,
    /// Slab slots handed out so far (the rest of the last chunk is unused).
    pub(super) used: u32,
    /// Slab slots below this were handed out before the last `fork()` (in
    /// the child: the parent's records). They are never recycled, so a
    /// record is the child's own exactly when its slot is at or above it.
    pub(super) inherited: u32,
    /// First record of each context's list in this shard, but for `hot`.
    heads: Option<Heads>,
    /// The context used last (0: none) and the first record of its list
    /// (NIL: empty), kept out of `heads`: a thread creating and destroying
    /// on one context touches no hash table.
    hot: usize,
    hot_head: u32,
}

impl Table {
    pub(super) const fn new() -> Table {
        Table {
            slots: Vec::new(),
            len: 0,
            chunks: Vec::new(),
            free: NO_FREE,
            used: 0,
            inherited: 0,
            heads: None,
            hot: 0,
            hot_head: NIL,
        }
    }

    /// The first record of `ctx`'s list in this shard (NIL: none).
    #[inline]
    fn head_of(&self, ctx: usize) -> u32 {
        if ctx == self.hot && ctx != 0 {
            return self.hot_head;
        }
        self.heads
            .as_ref()
            .and_then(|h| h.get(&ctx))
            .copied()
            .unwrap_or(NIL)
    }

    /// Does the shard have no list at all?
    #[inline]
    pub(super) fn no_lists(&self) -> bool {
        self.heads.as_ref().map_or(true, |h| h.is_empty()) && self.hot_head == NIL
    }

    #[inline]
    fn link(&self, i: u32) -> &Link {
        let (c, o) = chunk_of(i);
        &self.chunks[c].links()[o]
    }

    #[inline]
    fn link_mut(&mut self, i: u32) -> &mut Link {
        let (c, o) = chunk_of(i);
        &mut self.chunks[c].links_mut()[o]
    }

    /// Makes room for `ctx`'s list head, so that [`Table::list`] cannot
    /// fail: nothing for the hot context, else room in `heads` for the hot
    /// one it displaces.
    #[inline]
    fn reserve_head(&mut self, ctx: usize) -> Result<(), ()> {
        if ctx == self.hot {
            return Ok(());
        }
        let heads = self.heads.get_or_insert_with(Heads::default);
        // Room for one more whatever the key.
        if heads.len() < heads.capacity() {
            return Ok(());
        }
        if no_memory() {
            return Err(());
        }
        crate::oom::without_reserve(|| heads.try_reserve(1)).map_err(|_| ())
    }

    /// Makes `ctx` the hot context: the previous one goes back to `heads`
    /// (for which [`Table::reserve_head`] made room), `ctx` comes out.
    #[cold]
    fn make_hot(&mut self, ctx: usize) {
        let heads = self.heads.get_or_insert_with(Heads::default);
        let head = heads.remove(&ctx).unwrap_or(NIL);
        if self.hot != 0 && self.hot_head != NIL {
            heads.insert(self.hot, self.hot_head);
        }
        self.hot = ctx;
        self.hot_head = head;
    }

    /// Puts record `i` at the head of `ctx`'s list. [`Table::reserve_head`]
    /// must have made room. True when that list is new.
    #[inline]
    fn list(&mut self, i: u32, ctx: usize) -> bool {
        if ctx != self.hot {
            self.make_hot(ctx);
        }
        let next = self.hot_head;
        self.hot_head = i;
        *self.link_mut(i) = Link { prev: NIL, next };
        if next != NIL {
            self.link_mut(next).prev = i;
        }
        next == NIL
    }

    /// Takes record `i` out of its context's list (if it is in one).
    #[inline(always)]
    pub(super) fn unlist(&mut self, i: u32) {
        let Link { prev, next } = *self.link(i);
        if prev == UNLISTED {
            return;
        }
        if next != NIL {
            self.link_mut(next).prev = prev;
        }
        if prev != NIL {
            self.link_mut(prev).next = next;
        } else {
            let ctx = self.rec(i).ctx();
            if ctx == self.hot {
                self.hot_head = next;
            } else if let Some(heads) = self.heads.as_mut() {
                // Never allocates: the hot context stays as it is.
                if next == NIL {
                    heads.remove(&ctx);
                } else if let Some(h) = heads.get_mut(&ctx) {
                    *h = next;
                }
            }
        }
        self.link_mut(i).prev = UNLISTED;
    }

    /// The records of `ctx`'s list in this shard.
    pub(super) fn list_of(&self, ctx: usize) -> Vec<u32> {
        let mut out = Vec::new();
        let mut i = self.head_of(ctx);
        while i != NIL {
            if out.try_reserve(1).is_err() {
                out_of_memory();
                break;
            }
            out.push(i);
            i = self.link(i).next;
        }
        out
    }

    #[inline]
    pub(super) fn rec(&self, i: u32) -> &Rec {
        let (c, o) = chunk_of(i);
        &self.chunks[c].recs()[o]
    }

    #[inline]
    pub(super) fn rec_mut(&mut self, i: u32) -> &mut Rec {
        let (c, o) = chunk_of(i);
        &mut self.chunks[c].recs_mut()[o]
    }

    /// Home slot of `addr` (hash bits well below the top ones, which pick the shard).
    #[inline]
    fn home(&self, addr: usize) -> usize {
        (hash(addr) >> 26) as usize & (self.slots.len() - 1)
    }

    /// Index slot holding `addr`.
    #[inline]
    pub(super) fn find(&self, addr: usize) -> Option<usize> {
        if self.slots.is_empty() {
            return None;
        }
        let mask = self.slots.len() - 1;
        let key = addr as u64 >> 3;
        let mut i = self.home(addr);
        loop {
            let s = self.slots[i];
            if s == 0 {
                return None;
            }
            if s >> IDX_BITS == key {
                return Some(i);
            }
            i = (i + 1) & mask;
        }
    }

    fn alloc_rec(&mut self) -> Option<u32> {
        if self.free != NO_FREE {
            let i = self.free;
            self.free = self.rec(i).a as u32;
            return Some(i);
        }
        if self.used >= MAX_RECS {
            return None;
        }
        let n = self.chunks.len();
        if self.used as usize == FIRST_CHUNK * ((1 << n) - 1) {
            // The registry's growth never draws on the emergency reserve:
            // out of memory, the object goes untracked (and counted).
            let chunk = crate::oom::without_reserve(|| {
                self.chunks.try_reserve(1).ok()?;
                Chunk::new(FIRST_CHUNK << n)
            })?;
            self.chunks.push(chunk);
        }
        self.used += 1;
        Some(self.used - 1)
    }

    fn free_rec(&mut self, i: u32) {
        // An inherited slot is never recycled (see `inherited`).
        if i < self.inherited {
            return;
        }
        self.rec_mut(i).a = self.free as u64;
        self.free = i;
    }

    /// Doubles the index (rehashing from the keys in the slots alone).
    fn grow(&mut self) -> bool {
        let cap = (self.slots.len() * 2).max(16);
        let mut slots: Vec<u64> = Vec::new();
        if no_memory() || crate::oom::without_reserve(|| slots.try_reserve_exact(cap)).is_err() {
            return false;
        }
        slots.resize(cap, 0);
        let mask = cap - 1;
        for &s in self.slots.iter().filter(|&&s| s != 0) {
            let mut i = (hash(slot_addr(s)) >> 26) as usize & mask;
            while slots[i] != 0 {
                i = (i + 1) & mask;
            }
            slots[i] = s;
        }
        self.slots = slots;
        true
    }

    /// Inserts `obj`, replacing (and returning) a stale record at the same
    /// address. False when memory ran out (the object is not tracked; a
    /// stale record is still returned, and gone).
    /// The third value is true when the object started its context's list
    /// in this shard.
    pub(super) fn insert(&mut self, obj: &Obj) -> (Option<Obj>, bool, bool) {
        // A stale record goes and the object comes as new: it may be on
        // another context's list, or inherited.
        let stale = self.find(obj.addr).map(|pos| {
            let old = self.at(pos);
            self.remove_at(pos);
            old
        });
        if self.reserve_head(obj.ctx).is_err()
            || ((self.len + 1) * 4 > self.slots.len() * 3 && !self.grow())
        {
            return (stale, false, false);
        }
        let Some(idx) = self.alloc_rec() else {
            return (stale, false, false);
        };
        *self.rec_mut(idx) = Rec::of(obj);
        let new_list = self.list(idx, obj.ctx);
        let mask = self.slots.len() - 1;
        let mut i = self.home(obj.addr);
        while self.slots[i] != 0 {
            i = (i + 1) & mask;
        }
        self.slots[i] = (obj.addr as u64 >> 3) << IDX_BITS | (idx as u64 + 1);
        self.len += 1;
        (stale, true, new_list)
    }

    /// The object in index slot `pos` (non-empty).
    #[inline]
    pub(super) fn at(&self, pos: usize) -> Obj {
        let s = self.slots[pos];
        self.rec(slot_idx(s)).obj()
    }

    /// Rewrites the record in index slot `pos` (non-empty); its context
    /// must not change.
    #[inline]
    pub(super) fn set(&mut self, pos: usize, obj: &Obj) {
        let idx = slot_idx(self.slots[pos]);
        *self.rec_mut(idx) = Rec::of(obj);
    }

    /// Removes the entry in index slot `pos`, closing the gap by shifting
    /// back the entries of the probe run after it.
    #[inline(always)]
    pub(super) fn remove_at(&mut self, pos: usize) {
        let idx = slot_idx(self.slots[pos]);
        self.unlist(idx);
        self.free_rec(idx);
        let mask = self.slots.len() - 1;
        let mut hole = pos;
        let mut j = pos;
        loop {
            j = (j + 1) & mask;
            let s = self.slots[j];
            if s == 0 {
                break;
            }
            let home = self.home(slot_addr(s));
            // The entry may fill the hole unless its home lies in (hole, j].
            if (j.wrapping_sub(home) & mask) >= (j.wrapping_sub(hole) & mask) {
                self.slots[hole] = s;
                hole = j;
            }
        }
        self.slots[hole] = 0;
        self.len -= 1;
    }

    /// Index slots in use.
    pub(super) fn occupied(&self) -> impl Iterator<Item = usize> + '_ {
        (0..self.slots.len()).filter(|&p| self.slots[p] != 0)
    }

    /// The used slots' contents in slab order, so that the records behind
    /// them are then read sequentially (a scan of a million objects in
    /// index order would be a million cache misses); only this process's
    /// own records unless `inherited`. False when out of memory.
    pub(super) fn in_slab_order(&self, into: &mut Vec<u64>, inherited: bool) -> bool {
        into.clear();
        if into.try_reserve(self.len).is_err() {
            return false;
        }
        let own = if inherited { 0 } else { self.inherited };
        into.extend(
            self.slots
                .iter()
                .copied()
                .filter(|&s| s != 0 && slot_idx(s) >= own),
        );
        into.sort_unstable_by_key(|&s| s & IDX_MASK);
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::registry::objects::chunk::NO_MEMORY;
    use crate::registry::objects::record::Kind;
    use crate::registry::objects::{get, insert, take, untracked, Taken};

    fn obj(addr: usize) -> Obj {
        Obj::new(Kind::Mr, addr, 0x1000, 0x2000, 0, 1)
    }

    /// The table against a std HashMap model, through growth and heavy
    /// deletion (backward shift is where open addressing goes wrong).
    #[test]
    fn table_matches_a_model() {
        let mut t = Table::new();
        let mut model: HashMap<usize, Obj> = HashMap::new();
        let mut seed = 0x1234_5678_9abc_def0u64;
        let mut rnd = move || {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            seed
        };
        for round in 0..200_000 {
            // Few distinct, clustered addresses: long probe runs, many collisions.
            let addr = 0x5555_0000_0000 + (rnd() % 5000) as usize * 16;
            if rnd() % 3 == 0 {
                let got = t.find(addr).map(|p| {
                    let o = t.at(p);
                    t.remove_at(p);
                    o
                });
                assert_eq!(got, model.remove(&addr), "round {round}");
            } else {
                let mut o = obj(addr);
                o.a = round;
                let (stale, ok, _) = t.insert(&o);
                assert!(ok);
                assert_eq!(stale, model.insert(addr, o), "round {round}");
            }
            assert_eq!(t.len, model.len());
        }
        for (addr, o) in &model {
            assert_eq!(t.find(*addr).map(|p| t.at(p)), Some(*o));
        }
        assert_eq!(t.occupied().count(), model.len());
        assert!(t.len * 4 <= t.slots.len() * 3);
    }

    /// Every record in exactly the list of its context, through inserts,
    /// stale replacements (with a change of context) and removals.
    #[test]
    fn lists_match_the_records() {
        let mut t = Table::new();
        let mut seed = 0x9e37_79b9_7f4a_7c15u64;
        let mut rnd = move || {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            seed
        };
        let ctxs = [0x1000usize, 0x2000, 0x3000];
        for _ in 0..50_000 {
            let addr = 0x7f00_0000_0000 + (rnd() % 3000) as usize * 8;
            if rnd() % 3 == 0 {
                if let Some(p) = t.find(addr) {
                    t.remove_at(p);
                }
            } else {
                let mut o = obj(addr);
                o.ctx = ctxs[(rnd() % 3) as usize];
                assert!(t.insert(&o).1);
            }
        }
        let mut listed = 0;
        for &c in &ctxs {
            for i in t.list_of(c) {
                let addr = t.rec(i).addr();
                let pos = t.find(addr).expect("a listed record is in the index");
                assert_eq!(slot_idx(t.slots[pos]), i);
                assert_eq!(t.rec(i).ctx(), c);
                listed += 1;
            }
        }
        assert_eq!(listed, t.len);
    }

    /// With every allocation failing, inserts that need memory fail cleanly
    /// (counted, never a panic or an abort), the rest of the table is
    /// intact, and tracking resumes when memory is back.
    #[test]
    fn out_of_memory_leaves_objects_untracked_and_counted() {
        let mut t = Table::new();
        let base = 0x6600_0000_0000usize;
        for i in 0..100 {
            assert!(t.insert(&obj(base + i * 8)).1);
        }
        NO_MEMORY.with(|f| f.set(true));
        let mut failed = 0;
        for i in 100..10_000 {
            if !t.insert(&obj(base + i * 8)).1 {
                failed += 1;
            }
        }
        assert!(failed > 0, "some insert needed memory");
        for i in 0..100 {
            assert!(t.find(base + i * 8).is_some(), "an earlier record was lost");
        }
        assert_eq!(t.occupied().count(), t.len);
        assert_eq!(
            t.list_of(0x1000).len(),
            t.len,
            "every record on its context's list"
        );
        // Through the public entry point: a new context needs a list head.
        let before = untracked();
        let mut o = obj(0x6700_0000_0000);
        o.ctx = 0x7777_0000_0000;
        assert!(!insert(o));
        assert_eq!(untracked(), before + 1);
        assert_eq!(get(o.addr), None);
        NO_MEMORY.with(|f| f.set(false));
        assert!(insert(o));
        assert_eq!(get(o.addr).map(|g| g.ctx), Some(o.ctx));
        assert!(t.insert(&obj(base + 20_000 * 8)).1);
    }

    #[test]
    fn slab_chunks_double() {
        assert_eq!(chunk_of(0), (0, 0));
        assert_eq!(chunk_of(15), (0, 15));
        assert_eq!(chunk_of(16), (1, 0));
        assert_eq!(chunk_of(47), (1, 31));
        assert_eq!(chunk_of(48), (2, 0));
        let mut t = Table::new();
        for i in 0..1000u32 {
            assert_eq!(t.alloc_rec(), Some(i));
            let (c, o) = chunk_of(i);
            assert!(o < t.chunks[c].len);
        }
        assert_eq!(t.chunks.len(), 6);
        assert_eq!(t.chunks.iter().map(|c| c.len).sum::<usize>(), 1008);
    }

    #[test]
    fn odd_addresses_are_not_keys() {
        assert!(keyable(0x5555_0000_1230));
        assert!(!keyable(0));
        assert!(!keyable(0x5555_0000_1234));
        assert!(!keyable(1 << 47));
        assert!(!insert(obj(0x1001)));
        assert_eq!(take(0x1001, Kind::Mr.bit()), Taken::Unknown);
    }
}
