//! One shard's table: the slab of records and the open-addressing index
//! over it (the per-context lists through the records: `lists`).

use super::chunk::{no_memory, Slab};
use super::record::{Obj, Rec};
use lists::Heads;

mod lists;
#[cfg(test)]
mod tests;

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

    /// Record `i` of the slab.
    ///
    /// # Safety
    ///
    /// `i` is an index the table holds: in an index slot (`slot_idx`), a
    /// list link, the free list, or returned by `alloc_rec` or `list_of`
    /// (only indices `Slab::push` handed out are ever put there).
    #[inline(always)]
    pub(super) unsafe fn rec(&self, i: u32) -> &Rec {
        // SAFETY: the caller's contract is `Slab::get`'s.
        unsafe { self.slab.get(i) }
    }

    /// Record `i` of the slab, to change.
    ///
    /// # Safety
    ///
    /// As for [`Table::rec`].
    #[inline(always)]
    pub(super) unsafe fn rec_mut(&mut self, i: u32) -> &mut Rec {
        // SAFETY: the caller's contract is `Slab::get_mut`'s.
        unsafe { self.slab.get_mut(i) }
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
            // SAFETY: a non-empty index slot's record.
            if s >> 16 == t && unsafe { self.rec(slot_idx(s)) }.is(addr) {
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
            // SAFETY: the free list's head.
            self.free = unsafe { self.rec(i) }.a as u32;
            return Some(i);
        }
        if self.used >= MAX_RECS {
            return None;
        }
        let i = self.slab.push()?;
        self.used += 1;
        Some(i)
    }

    /// Puts record `i` on the free list.
    ///
    /// # Safety
    ///
    /// `i` is a record of the table, as for [`Table::rec`], in no slot.
    unsafe fn free_rec(&mut self, i: u32) {
        // An inherited slot is never recycled (see `inherited`).
        if i < self.inherited {
            return;
        }
        // SAFETY: the caller's contract.
        unsafe { self.rec_mut(i) }.a = self.free as u64;
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
        // SAFETY: from `alloc_rec`.
        *unsafe { self.rec_mut(idx) } = Rec::of(obj, NIL, next);
        if next != NIL {
            // SAFETY: the list's old head.
            unsafe { self.rec_mut(next as u32) }.set_prev(idx as u16);
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
        // SAFETY: a non-empty index slot's record.
        unsafe { self.rec(slot_idx(self.slot(pos))) }
    }

    /// The object in index slot `pos` (non-empty).
    #[inline]
    pub(super) fn at(&self, pos: usize) -> Obj {
        // SAFETY: a non-empty index slot's record.
        unsafe { self.rec(slot_idx(self.slot(pos))) }.obj()
    }

    /// Rewrites the record in index slot `pos` (non-empty); its context
    /// must not change.
    #[inline]
    pub(super) fn set(&mut self, pos: usize, obj: &Obj) {
        let idx = slot_idx(self.slots[pos]);
        // SAFETY: a non-empty index slot's record.
        let r = unsafe { self.rec_mut(idx) };
        *r = Rec::of(obj, r.prev(), r.next());
    }

    /// Removes the entry in index slot `pos`, closing the gap by shifting
    /// back the entries of the probe run after it. True when that emptied
    /// a context's list in this shard.
    #[inline(always)]
    pub(super) fn remove_at(&mut self, pos: usize) -> bool {
        let idx = slot_idx(self.slot(pos));
        // SAFETY: a non-empty index slot's record.
        let emptied = unsafe { self.unlink(idx) };
        // SAFETY: as above; its slot is emptied below.
        unsafe { self.free_rec(idx) };
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
