//! One shard's table: the slab of records, the open-addressing index over it,
//! and the per-context lists (linked through the records themselves).

use std::collections::HashMap;
use std::hash::{BuildHasherDefault, Hasher};

use super::chunk::{no_memory, out_of_memory, Slab};
use super::record::{Obj, Rec};

pub(super) const NO_FREE: u32 = u32::MAX;

#[inline]
pub(super) fn hash(addr: usize) -> u64 {
    crate::addr_table::mix(addr as u64)
}

/// An address's 16-bit tag: hash bits 40..56 (the 8 above pick the shard).
/// The index slot keeps it, so a probe reads a record only on a tag match
/// (1 in 65,536 for another address) and growth and deletion find an
/// entry's home from the slot alone.
#[inline]
fn tag(addr: usize) -> u32 {
    (hash(addr) >> 40) as u32 & 0xffff
}

/// Index slot layout (4 bytes): `tag << 16 | slab index + 1`; 0 = empty.
/// An entry's home is `tag & mask`, so the index has at most 65,536 slots.
const MAX_SLOTS: usize = 1 << 16;
/// Records per shard: 7/8 of the largest index (64 shards: 3.67M objects;
/// past that an object is untracked and counted, as when memory runs out).
const MAX_RECS: u32 = (MAX_SLOTS / 8 * 7) as u32;
/// List link sentinels (16 bits): no neighbour; not in any list.
const NIL: u16 = u16::MAX;
const UNLISTED: u16 = u16::MAX - 1;
const _: () = assert!(MAX_RECS < UNLISTED as u32);

/// The hash of a context address, for the per-shard list heads.
#[derive(Default)]
struct AddrHasher(u64);

impl Hasher for AddrHasher {
    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.0 = crate::addr_table::mix(self.0 ^ b as u64);
        }
    }

    fn write_usize(&mut self, n: usize) {
        self.0 = crate::addr_table::mix(n as u64);
    }

    fn finish(&self) -> u64 {
        // The product's high bits are the well-mixed ones; hashbrown wants
        // both ends.
        self.0 ^ self.0 >> 29
    }
}

type Heads = HashMap<usize, u16, BuildHasherDefault<AddrHasher>>;

/// Can `addr` be a key? (Others are not tracked; no allocator returns them.)
#[inline]
pub(super) fn keyable(addr: usize) -> bool {
    // One compare: rotated right by 3, an 8-aligned address below 2^47 is
    // below 2^44 (set low bits land on top), and 0 wraps to the maximum.
    (addr as u64).rotate_right(3).wrapping_sub(1) < (1 << 44) - 1
}

#[inline]
pub(super) fn slot_idx(s: u32) -> u32 {
    (s & 0xffff) - 1
}

/// One shard: slab of records plus the open-addressing index over it.
pub(super) struct Table {
    /// See [`MAX_SLOTS`]. Length is 0 or a power of two.
    slots: Vec<u32>,
    pub(super) len: usize,
    /// The records, by slab index.
    slab: Slab,
    /// Head of the free list of slab slots (linked through `Rec::a`).
    pub(super) free: u32,
    /// Slab slots handed out so far (`slab.len()`, the cap below which a
    /// slot's index fits a link).
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
    pub(super) hot: usize,
    hot_head: u16,
    /// The hot context's bit is known set in the shard's summary
    /// (`objects::CTX_BITS`): a list it starts need not look there again.
    /// Cleared when another context becomes hot; a summary that is
    /// recomputed (under this shard's lock) sets it again from the bits.
    pub(super) hot_noted: bool,
    /// `len` at which the index doubles: 7/8 of its slots (0 while it has
    /// none), kept so that an insert's load check is one compare.
    grow_at: u32,
}

impl Table {
    pub(super) const fn new() -> Table {
        Table {
            slots: Vec::new(),
            len: 0,
            slab: Slab::new(),
            free: NO_FREE,
            used: 0,
            inherited: 0,
            heads: None,
            hot: 0,
            hot_head: NIL,
            hot_noted: false,
            grow_at: 0,
        }
    }

    /// The first record of `ctx`'s list in this shard (NIL: none).
    #[inline]
    fn head_of(&self, ctx: usize) -> u16 {
        if ctx == self.hot && ctx != 0 {
            return self.hot_head;
        }
        self.heads
            .as_ref()
            .and_then(|h| h.get(&ctx))
            .copied()
            .unwrap_or(NIL)
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
        // errno is left as it was (the fast path does not save it).
        let errno = crate::errno::Errno::save();
        let r = crate::oom::without_reserve(|| heads.try_reserve(1)).map_err(|_| ());
        errno.restore();
        r
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
        self.hot_noted = false;
    }

    /// Takes record `i` out of its context's list (if it is in one), and
    /// marks it unlisted (it stays in the table). True when that emptied
    /// the list.
    pub(super) fn unlist(&mut self, i: u32) -> bool {
        let emptied = self.unlink(i);
        self.rec_mut(i).set_prev(UNLISTED);
        emptied
    }

    /// [`Table::unlist`] without the mark, for a record about to be freed.
    #[inline(always)]
    fn unlink(&mut self, i: u32) -> bool {
        let r = self.rec(i);
        let (prev, next) = (r.prev(), r.next());
        if prev == UNLISTED {
            return false;
        }
        if next != NIL {
            self.rec_mut(next as u32).set_prev(prev);
        }
        if prev != NIL {
            self.rec_mut(prev as u32).set_next(next);
        } else if self.hot_head == i as u16 {
            // The head of the hot list: no context to decode.
            self.hot_head = next;
        } else {
            self.unlink_cold_head(self.rec(i).ctx(), next);
        }
        prev == NIL && next == NIL
    }

    /// The head of a list other than the hot one moves to `next`.
    #[cold]
    #[inline(never)]
    fn unlink_cold_head(&mut self, ctx: usize, next: u16) {
        if let Some(heads) = self.heads.as_mut() {
            // Never allocates: the hot context stays as it is.
            if next == NIL {
                heads.remove(&ctx);
            } else if let Some(h) = heads.get_mut(&ctx) {
                *h = next;
            }
        }
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
            out.push(i as u32);
            i = self.rec(i as u32).next();
        }
        out
    }

    #[inline(always)]
    pub(super) fn rec(&self, i: u32) -> &Rec {
        self.slab.get(i)
    }

    #[inline(always)]
    pub(super) fn rec_mut(&mut self, i: u32) -> &mut Rec {
        self.slab.get_mut(i)
    }

    /// Index slot `pos`, which the caller masked with `slots.len() - 1`
    /// (or got from a probe): no bounds check on the hot paths.
    #[inline(always)]
    fn slot(&self, pos: usize) -> u32 {
        debug_assert!(pos < self.slots.len());
        // SAFETY: every `pos` here is masked by `slots.len() - 1` (a power
        // of two) or comes from a probe that was.
        unsafe { *self.slots.get_unchecked(pos) }
    }

    #[inline(always)]
    fn set_slot(&mut self, pos: usize, v: u32) {
        debug_assert!(pos < self.slots.len());
        // SAFETY: as in `slot`.
        unsafe { *self.slots.get_unchecked_mut(pos) = v }
    }

    /// Where `addr` is in the index (`Ok`), or the empty slot that ends its
    /// probe run (`Err`; the index must not be empty).
    #[inline(always)]
    fn probe(&self, addr: usize) -> Result<usize, usize> {
        let mask = self.slots.len() - 1;
        let t = tag(addr);
        let mut i = t as usize & mask;
        loop {
            let s = self.slot(i);
            if s == 0 {
                return Err(i);
            }
            if s >> 16 == t && self.rec(slot_idx(s)).is(addr) {
                return Ok(i);
            }
            i = (i + 1) & mask;
        }
    }

    /// Index slot holding `addr`.
    #[inline]
    pub(super) fn find(&self, addr: usize) -> Option<usize> {
        if self.slots.is_empty() {
            return None;
        }
        self.probe(addr).ok()
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
        let i = self.slab.push()?;
        self.used += 1;
        Some(i)
    }

    fn free_rec(&mut self, i: u32) {
        // An inherited slot is never recycled (see `inherited`).
        if i < self.inherited {
            return;
        }
        self.rec_mut(i).a = self.free as u64;
        self.free = i;
    }

    /// Doubles the index (rehashing from the tags in the slots alone).
    /// errno is left as it was (the fast path does not save it).
    #[cold]
    fn grow(&mut self) -> bool {
        let errno = crate::errno::Errno::save();
        let grown = self.regrow();
        errno.restore();
        grown
    }

    fn regrow(&mut self) -> bool {
        let cap = (self.slots.len() * 2).max(16);
        let mut slots: Vec<u32> = Vec::new();
        if cap > MAX_SLOTS
            || no_memory()
            || crate::oom::without_reserve(|| slots.try_reserve_exact(cap)).is_err()
        {
            return false;
        }
        slots.resize(cap, 0);
        let mask = cap - 1;
        for &s in self.slots.iter().filter(|&&s| s != 0) {
            let mut i = (s >> 16) as usize & mask;
            while slots[i] != 0 {
                i = (i + 1) & mask;
            }
            slots[i] = s;
        }
        self.slots = slots;
        self.grow_at = (cap / 8 * 7) as u32;
        true
    }

    /// Inserts `obj`, replacing a stale record at the same address (put in
    /// `stale`: written only then, as the copy is not free). False when
    /// memory ran out (the object is not tracked; a stale record is still
    /// given, and gone). The second value is true when the object started
    /// its context's list in this shard and the shard's summary may lack
    /// its bit (see `hot_noted`): the caller must note it.
    #[inline(always)]
    pub(super) fn insert(&mut self, obj: &Obj, stale: &mut Option<Obj>) -> (bool, bool) {
        // One probe finds a stale record or the free slot that ends the run.
        let mut pos = match self.slots.is_empty() {
            true => None,
            false => match self.probe(obj.addr) {
                Ok(pos) => {
                    // A stale record goes and the object comes as new: it may
                    // be on another context's list, or inherited.
                    *stale = Some(self.at(pos));
                    self.remove_at(pos);
                    None
                }
                Err(empty) => Some(empty),
            },
        };
        if self.reserve_head(obj.ctx).is_err() {
            return (false, false);
        }
        // Load at most 7/8: probing reads 4-byte slots, 16 to a cache line.
        if self.len >= self.grow_at as usize {
            if !self.grow() {
                return (false, false);
            }
            pos = None;
        }
        let Some(idx) = self.alloc_rec() else {
            return (false, false);
        };
        let pos = pos.unwrap_or_else(|| self.probe(obj.addr).unwrap_or_else(|e| e));
        // At the head of its context's list.
        if obj.ctx != self.hot {
            self.make_hot(obj.ctx);
        }
        let next = self.hot_head;
        self.hot_head = idx as u16;
        *self.rec_mut(idx) = Rec::of(obj, NIL, next);
        if next != NIL {
            self.rec_mut(next as u32).set_prev(idx as u16);
        }
        self.set_slot(pos, tag(obj.addr) << 16 | (idx + 1));
        self.len += 1;
        // The caller notes the list in the summary (under this lock).
        let note = next == NIL && !self.hot_noted;
        self.hot_noted = true;
        (true, note)
    }

    /// The record in index slot `pos` (non-empty).
    #[inline(always)]
    pub(super) fn rec_at(&self, pos: usize) -> &Rec {
        self.rec(slot_idx(self.slot(pos)))
    }

    /// The contexts with a list in this shard.
    pub(super) fn list_contexts(&self) -> impl Iterator<Item = usize> + '_ {
        let hot = (self.hot != 0 && self.hot_head != NIL).then_some(self.hot);
        hot.into_iter()
            .chain(self.heads.iter().flat_map(|h| h.keys().copied()))
    }

    /// The object in index slot `pos` (non-empty).
    #[inline]
    pub(super) fn at(&self, pos: usize) -> Obj {
        self.rec(slot_idx(self.slot(pos))).obj()
    }

    /// Rewrites the record in index slot `pos` (non-empty); its context
    /// must not change.
    #[inline]
    pub(super) fn set(&mut self, pos: usize, obj: &Obj) {
        let idx = slot_idx(self.slots[pos]);
        let r = self.rec_mut(idx);
        *r = Rec::of(obj, r.prev(), r.next());
    }

    /// Removes the entry in index slot `pos`, closing the gap by shifting
    /// back the entries of the probe run after it. True when that emptied
    /// a context's list in this shard.
    #[inline(always)]
    pub(super) fn remove_at(&mut self, pos: usize) -> bool {
        let idx = slot_idx(self.slot(pos));
        let emptied = self.unlink(idx);
        self.free_rec(idx);
        let mask = self.slots.len() - 1;
        let mut hole = pos;
        let mut j = pos;
        loop {
            j = (j + 1) & mask;
            let s = self.slot(j);
            if s == 0 {
                break;
            }
            let home = (s >> 16) as usize & mask;
            // The entry may fill the hole unless its home lies in (hole, j].
            if (j.wrapping_sub(home) & mask) >= (j.wrapping_sub(hole) & mask) {
                self.set_slot(hole, s);
                hole = j;
            }
        }
        self.set_slot(hole, 0);
        self.len -= 1;
        emptied
    }

    /// Index slots in use.
    pub(super) fn occupied(&self) -> impl Iterator<Item = usize> + '_ {
        (0..self.slots.len()).filter(|&p| self.slots[p] != 0)
    }

    /// The used slots' contents in slab order, so that the records behind
    /// them are then read sequentially (a scan of a million objects in
    /// index order would be a million cache misses); only this process's
    /// own records unless `inherited`. False when out of memory.
    pub(super) fn in_slab_order(&self, into: &mut Vec<u32>, inherited: bool) -> bool {
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
        into.sort_unstable_by_key(|&s| s & 0xffff);
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
                let o = obj(addr).with(super::super::Facts::Mr(super::super::MrFacts {
                    addr: round,
                    ..Default::default()
                }));
                let mut stale = None;
                let (ok, _) = t.insert(&o, &mut stale);
                assert!(ok);
                assert_eq!(stale, model.insert(addr, o), "round {round}");
            }
            assert_eq!(t.len, model.len());
        }
        for (addr, o) in &model {
            assert_eq!(t.find(*addr).map(|p| t.at(p)), Some(*o));
        }
        assert_eq!(t.occupied().count(), model.len());
        assert!(t.len * 8 <= t.slots.len() * 7);
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
                assert!(t.insert(&o, &mut None).0);
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
            assert!(t.insert(&obj(base + i * 8), &mut None).0);
        }
        NO_MEMORY.with(|f| f.set(true));
        let mut failed = 0;
        for i in 100..10_000 {
            if !t.insert(&obj(base + i * 8), &mut None).0 {
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
        assert!(t.insert(&obj(base + 20_000 * 8), &mut None).0);
    }

    #[test]
    fn slab_grows_up_to_its_limit() {
        let mut t = Table::new();
        for i in 0..1000u32 {
            assert_eq!(t.alloc_rec(), Some(i));
        }
        assert_eq!(t.used, 1000);
        t.used = MAX_RECS;
        assert_eq!(t.alloc_rec(), None, "past the shard's limit");
    }

    /// A full shard refuses (untracked) instead of overflowing its 16-bit
    /// indices, and keeps what it has.
    #[test]
    fn a_full_shard_refuses_more() {
        let mut t = Table::new();
        let base = 0x6800_0000_0000usize;
        let mut n = 0;
        while t.insert(&obj(base + n * 8), &mut None).0 {
            n += 1;
        }
        assert_eq!(n, MAX_RECS as usize);
        assert_eq!(t.len, n);
        assert_eq!(t.list_of(0x1000).len(), n);
        for i in (0..n).step_by(997) {
            assert_eq!(
                t.find(base + i * 8).map(|p| t.at(p).addr),
                Some(base + i * 8)
            );
        }
    }

    #[test]
    fn odd_addresses_are_not_keys() {
        assert!(keyable(0x5555_0000_1230));
        assert!(!keyable(0));
        assert!(!keyable(0x5555_0000_1234));
        assert!(!keyable(1 << 47));
        assert!(!insert(obj(0x1001)));
        let mut rec = crate::registry::objects::Stored::EMPTY;
        assert_eq!(take(0x1001, Kind::Mr.bit(), &mut rec), Taken::Unknown);
    }
}
