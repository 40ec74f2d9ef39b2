//! Live verbs objects (PDs, MRs, CQs, ...) in a side table keyed by address.
//!
//! Built for the budget of issue 5: at most 96 bytes and 100 ns per tracked
//! object, flat from 1k to 1M live objects, and threads working on unrelated
//! contexts never meeting on a lock or a shared counter.
//!
//! - [`SHARDS`] shards, picked by a multiplicative hash of the address, each
//!   behind its own mutex on its own cache lines. Nothing global is written
//!   on the create/destroy path.
//! - In a shard, each object is one 64-byte record in a chunked slab (chunks
//!   never move, so growing copies nothing), recycled through a free list,
//!   and found through an open-addressing index of 8-byte slots that hold
//!   the key itself (`addr >> 3`, 44 bits) and the slab index (20 bits):
//!   linear probing, load at most 3/4, backward-shift deletion. A probe
//!   never reads a record, growth rehashes from the slots alone, and with no
//!   tombstones probe lengths never degrade.
//! - Each shard also keeps, per context, a doubly-linked list of that
//!   context's records in the shard (8-byte links stored after the
//!   records of each slab chunk; each record also packs its own key into
//!   the spare bits
//!   of its context, parent and caller fields, so a list walk yields whole
//!   objects). `ibv_close_device` walks only the closing context's lists:
//!   its cost is the context's own objects plus one visit per shard, not
//!   every object of the process.
//! - Memory per object: 64 (record) + 8 (link) + 8 / load (index: 10.7 to
//!   21.3 bytes as the load swings between 3/4 and 3/8 across doublings) =
//!   83 to 94 bytes.
//! - Every allocation is fallible (`try_reserve`, `alloc_zeroed` checked):
//!   out of memory never fails the program's call nor aborts it. The object
//!   is then not tracked, with one warning, and counted ([`untracked`]) so
//!   that a report can say it is incomplete. Nor is an address that cannot
//!   be a key (not 8-aligned, or above 2^47), which no allocator hands out.
//! - After `fork()` the child keeps every record it inherited (so that it
//!   still refuses a destroy of the parent's zombies), but each shard
//!   remembers where its inherited slab slots end: the child's reports
//!   ([`for_each`]) show only what the child created. Nothing is rewritten
//!   at fork time, so a large table costs the child no copied pages.
//!
//! The exports take a record out *before* forwarding a destroy and put it
//! back if the destroy fails (see `exports::resources`). That order means a
//! concurrent create that gets the same address from the allocator (after
//! the real destroy freed it) can never have its fresh record removed by the
//! destroying thread, with no generation counter needed.

use std::alloc::{alloc_zeroed, Layout};
use std::backtrace::Backtrace;
use std::collections::HashMap;
use std::hash::{BuildHasherDefault, Hasher};
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};

use super::lock::{self, mutex, Mutex};

/// Number of shards (a power of two). A thread's working set is a handful
/// of addresses; with 256 shards two threads seldom share a lock.
pub const SHARDS: usize = 256;
const SHARD_BITS: u32 = SHARDS.trailing_zeros();
/// Records in a shard's first slab chunk (1 KiB); each next chunk is twice
/// the last, so a shard that holds a few objects costs a page, not more,
/// and a big one wastes at most half a chunk that was never touched.
const FIRST_CHUNK: usize = 16;
const NO_FREE: u32 = u32::MAX;
const HASH_MUL: u64 = 0x9E37_79B9_7F4A_7C15;

/// What a tracked object is.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
#[repr(u8)]
pub enum Kind {
    Pd = 1,
    Mr = 2,
    Cq = 3,
    CompChannel = 4,
    Srq = 5,
    Qp = 6,
    Ah = 7,
    ImportedPd = 8,
    ImportedMr = 9,
}

impl Kind {
    /// Every kind, in report order.
    pub const ALL: [Kind; 9] = [
        Kind::Pd,
        Kind::Mr,
        Kind::Cq,
        Kind::CompChannel,
        Kind::Srq,
        Kind::Qp,
        Kind::Ah,
        Kind::ImportedPd,
        Kind::ImportedMr,
    ];

    /// The name used in reports and suppressions.
    pub fn name(self) -> &'static str {
        match self {
            Kind::Pd => "pd",
            Kind::Mr => "mr",
            Kind::Cq => "cq",
            Kind::CompChannel => "comp_channel",
            Kind::Srq => "srq",
            Kind::Qp => "qp",
            Kind::Ah => "ah",
            Kind::ImportedPd => "imported_pd",
            Kind::ImportedMr => "imported_mr",
        }
    }

    fn from_u8(v: u8) -> Option<Kind> {
        Kind::ALL.get((v as usize).wrapping_sub(1)).copied()
    }

    /// This kind as a bit of a [`Kinds`] set.
    pub const fn bit(self) -> Kinds {
        Kinds(1 << self as u16)
    }
}

/// A set of kinds (what a destroy verb accepts).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Kinds(u16);

impl Kinds {
    pub const fn or(self, k: Kind) -> Kinds {
        Kinds(self.0 | k.bit().0)
    }

    pub fn contains(self, k: Kind) -> bool {
        self.0 & k.bit().0 != 0
    }
}

/// The record's context was closed: a destroy would touch freed memory.
pub const FLAG_ZOMBIE: u8 = 1;
/// A backtrace of the creation is in the side map.
pub const FLAG_BACKTRACE: u8 = 2;
/// Flagged a zombie by an `ibv_close_device` still under way: cleared when
/// that close is reported ([`finish_close`]) or undone ([`abort_close`]).
pub const FLAG_CLOSING: u8 = 4;

/// One tracked object, as the table hands it out. The meaning of `a`,
/// `b`, `c`, `x` and `sub` depends on the kind (see `exports::resources`,
/// which fills them, and `report`, which prints them).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Obj {
    /// The object's address (the key).
    pub addr: usize,
    /// `struct ibv_context *` it was created on.
    pub ctx: usize,
    /// The PD (MR, QP, SRQ, AH, imported MR) or completion channel (CQ).
    pub parent: usize,
    /// Return address of the creating call (the creation site).
    pub caller: usize,
    pub a: u64,
    pub b: u64,
    pub c: u64,
    /// Creating thread.
    pub tid: u32,
    pub x: u32,
    /// `time_ms:40 | kind:8 | flags:8 | sub:8`.
    meta: u64,
}

impl Obj {
    /// A record for a new object created now by this thread.
    #[inline]
    pub fn new(kind: Kind, addr: usize, ctx: usize, parent: usize, caller: usize, tid: i32) -> Obj {
        Obj {
            addr,
            ctx,
            parent,
            caller,
            tid: tid as u32,
            meta: (now_ms() & ((1 << 40) - 1)) | (kind as u64) << 40,
            ..Obj::default()
        }
    }

    pub fn kind(&self) -> Kind {
        Kind::from_u8((self.meta >> 40) as u8).unwrap_or(Kind::Pd)
    }

    /// Creation time, CLOCK_MONOTONIC_COARSE milliseconds (see [`now_ms`]).
    pub fn time_ms(&self) -> u64 {
        self.meta & ((1 << 40) - 1)
    }

    pub fn flags(&self) -> u8 {
        (self.meta >> 48) as u8
    }

    pub fn set_flag(&mut self, flag: u8) {
        self.meta |= (flag as u64) << 48;
    }

    pub fn is_zombie(&self) -> bool {
        self.flags() & FLAG_ZOMBIE != 0
    }

    /// A small kind-specific value (QP type, which verb made an MR or AH).
    pub fn sub(&self) -> u8 {
        (self.meta >> 56) as u8
    }

    pub fn set_sub(&mut self, v: u8) {
        self.meta = (self.meta & !(0xff << 56)) | (v as u64) << 56;
    }
}

/// An object as stored. 64 bytes, one cache line. User addresses are below
/// 2^47 and contexts and parents are 8-aligned, so `ctx >> 3`,
/// `parent >> 3` (44 bits each) and `caller` (47 bits) leave room for the
/// object's own key (`addr >> 3`, 44 bits: 20 + 20 + 4), which a list walk
/// needs and the index slot alone would not give.
#[derive(Clone, Copy, Default)]
#[repr(C, align(64))]
struct Rec {
    /// `ctx >> 3 | key[0..20] << 44`
    ctx_k: u64,
    /// `parent >> 3 | key[20..40] << 44`
    parent_k: u64,
    /// `caller | key[40..44] << 47`
    caller_k: u64,
    a: u64,
    b: u64,
    c: u64,
    tid: u32,
    x: u32,
    meta: u64,
}

const _: () = assert!(std::mem::size_of::<Rec>() == 64);

const LOW44: u64 = (1 << 44) - 1;
const LOW47: u64 = (1 << 47) - 1;

/// Can `o` be stored (see [`Rec`])? Always, for what a real library returns.
#[inline]
fn packable(o: &Obj) -> bool {
    let fits = |p: usize| p & 7 == 0 && (p as u64) < 1 << 47;
    fits(o.ctx) && fits(o.parent) && (o.caller as u64) < 1 << 47
}

impl Rec {
    #[inline]
    fn of(o: &Obj) -> Rec {
        let key = o.addr as u64 >> 3;
        Rec {
            ctx_k: (o.ctx as u64 >> 3) | (key & 0xf_ffff) << 44,
            parent_k: (o.parent as u64 >> 3) | (key >> 20 & 0xf_ffff) << 44,
            caller_k: o.caller as u64 | (key >> 40) << 47,
            a: o.a,
            b: o.b,
            c: o.c,
            tid: o.tid,
            x: o.x,
            meta: o.meta,
        }
    }

    #[inline]
    fn ctx(&self) -> usize {
        ((self.ctx_k & LOW44) << 3) as usize
    }

    #[inline]
    fn addr(&self) -> usize {
        let key = self.ctx_k >> 44 | (self.parent_k >> 44) << 20 | (self.caller_k >> 47) << 40;
        (key << 3) as usize
    }

    #[inline]
    fn obj(&self) -> Obj {
        let r = *self;
        Obj {
            addr: r.addr(),
            ctx: r.ctx(),
            parent: ((r.parent_k & LOW44) << 3) as usize,
            caller: (r.caller_k & LOW47) as usize,
            a: r.a,
            b: r.b,
            c: r.c,
            tid: r.tid,
            x: r.x,
            meta: r.meta,
        }
    }
}

/// `Obj::sub` of an MR: the verb that registered it.
pub const MR_VIA: [&str; 4] = [
    "ibv_reg_mr",
    "ibv_reg_mr_iova",
    "ibv_reg_mr_iova2",
    "ibv_reg_dmabuf_mr",
];
/// `Obj::sub` of an AH: the verb that created it.
pub const AH_VIA: [&str; 2] = ["ibv_create_ah", "ibv_create_ah_from_wc"];

/// Milliseconds of CLOCK_MONOTONIC_COARSE: a few ns through the vDSO, and
/// immune to wall-clock jumps. Reports convert it to wall-clock time.
#[inline]
pub fn now_ms() -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: ts is a valid out-pointer; the clock always exists on Linux.
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC_COARSE, &mut ts) };
    ts.tv_sec as u64 * 1000 + ts.tv_nsec as u64 / 1_000_000
}

#[inline]
fn hash(addr: usize) -> u64 {
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

/// A record's place in its context's list: slab indices of its
/// neighbours, [`NIL`] at the ends, `prev` [`UNLISTED`] when in no list.
#[derive(Clone, Copy, Default)]
#[repr(C)]
struct Link {
    prev: u32,
    next: u32,
}

const _: () = assert!(std::mem::size_of::<Link>() == 8);

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
fn keyable(addr: usize) -> bool {
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
fn slot_idx(s: u64) -> u32 {
    (s & IDX_MASK) as u32 - 1
}

const IDX_MASK: u64 = (1 << IDX_BITS) - 1;

/// One shard: slab of records plus the open-addressing index over it.
struct Table {
    /// See [`IDX_BITS`]. Length is 0 or a power of two.
    slots: Vec<u64>,
    len: usize,
    chunks: Vec<Chunk>,
    /// Head of the free list of slab slots (linked through `Rec::a`).
    free: u32,
    /// Slab slots handed out so far (the rest of the last chunk is unused).
    used: u32,
    /// Slab slots below this were handed out before the last `fork()` (in
    /// the child: the parent's records). They are never recycled, so a
    /// record is the child's own exactly when its slot is at or above it.
    inherited: u32,
    /// First record of each context's list in this shard, but for `hot`.
    heads: Option<Heads>,
    /// The context used last (0: none) and the first record of its list
    /// (NIL: empty), kept out of `heads`: a thread creating and destroying
    /// on one context touches no hash table.
    hot: usize,
    hot_head: u32,
}

impl Table {
    const fn new() -> Table {
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
    fn no_lists(&self) -> bool {
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
    fn unlist(&mut self, i: u32) {
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
    fn list_of(&self, ctx: usize) -> Vec<u32> {
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
    fn rec(&self, i: u32) -> &Rec {
        let (c, o) = chunk_of(i);
        &self.chunks[c].recs()[o]
    }

    #[inline]
    fn rec_mut(&mut self, i: u32) -> &mut Rec {
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
    fn find(&self, addr: usize) -> Option<usize> {
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
    fn insert(&mut self, obj: &Obj) -> (Option<Obj>, bool, bool) {
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
    fn at(&self, pos: usize) -> Obj {
        let s = self.slots[pos];
        self.rec(slot_idx(s)).obj()
    }

    /// Rewrites the record in index slot `pos` (non-empty); its context
    /// must not change.
    #[inline]
    fn set(&mut self, pos: usize, obj: &Obj) {
        let idx = slot_idx(self.slots[pos]);
        *self.rec_mut(idx) = Rec::of(obj);
    }

    /// Removes the entry in index slot `pos`, closing the gap by shifting
    /// back the entries of the probe run after it.
    #[inline(always)]
    fn remove_at(&mut self, pos: usize) {
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
    fn occupied(&self) -> impl Iterator<Item = usize> + '_ {
        (0..self.slots.len()).filter(|&p| self.slots[p] != 0)
    }

    /// The used slots' contents in slab order, so that the records behind
    /// them are then read sequentially (a scan of a million objects in
    /// index order would be a million cache misses); only this process's
    /// own records unless `inherited`. False when out of memory.
    fn in_slab_order(&self, into: &mut Vec<u64>, inherited: bool) -> bool {
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
thread_local! {
    /// Unit tests: every registry allocation of this thread fails.
    static NO_MEMORY: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
}

/// Fault injection for the unit tests (always false in the library).
#[inline(always)]
fn no_memory() -> bool {
    #[cfg(test)]
    return NO_MEMORY.with(|f| f.get());
    #[cfg(not(test))]
    false
}

/// Types a chunk may be made of by zeroing memory: integers only.
/// A slab chunk: `len` records, then their `len` links, in one zeroed
/// allocation (one allocation per chunk, as before the links existed, so
/// the heap does not fragment between records and links).
struct Chunk {
    ptr: std::ptr::NonNull<u8>,
    len: usize,
}

// SAFETY: a Chunk owns its allocation exclusively (like a Box<[u8]>); it is
// only reached through the shard's mutex.
unsafe impl Send for Chunk {}

impl Chunk {
    fn layout(len: usize) -> Option<Layout> {
        let (layout, _) = Layout::array::<Rec>(len)
            .ok()?
            .extend(Layout::array::<Link>(len).ok()?)
            .ok()?;
        Some(layout)
    }

    /// None when out of memory.
    fn new(len: usize) -> Option<Chunk> {
        let layout = Self::layout(len)?;
        if no_memory() {
            return None;
        }
        // SAFETY: the layout has a non-zero size (len > 0).
        let ptr = std::ptr::NonNull::new(unsafe { alloc_zeroed(layout) })?;
        Some(Chunk { ptr, len })
    }

    fn recs(&self) -> &[Rec] {
        // SAFETY: the allocation starts with `len` records (64-aligned, as
        // the layout says); all-zero bytes are a valid Rec (integers only).
        unsafe { std::slice::from_raw_parts(self.ptr.as_ptr().cast::<Rec>(), self.len) }
    }

    fn recs_mut(&mut self) -> &mut [Rec] {
        // SAFETY: as in recs(); &mut self makes the access exclusive.
        unsafe { std::slice::from_raw_parts_mut(self.ptr.as_ptr().cast::<Rec>(), self.len) }
    }

    fn links(&self) -> &[Link] {
        // SAFETY: the `len` links follow the records (64 * len bytes in,
        // 4-aligned); all-zero bytes are a valid Link (integers only).
        unsafe {
            std::slice::from_raw_parts(
                self.ptr.as_ptr().add(64 * self.len).cast::<Link>(),
                self.len,
            )
        }
    }

    fn links_mut(&mut self) -> &mut [Link] {
        // SAFETY: as in links(); &mut self makes the access exclusive.
        unsafe {
            std::slice::from_raw_parts_mut(
                self.ptr.as_ptr().add(64 * self.len).cast::<Link>(),
                self.len,
            )
        }
    }
}

impl Drop for Chunk {
    fn drop(&mut self) {
        if let Some(layout) = Self::layout(self.len) {
            // SAFETY: allocated in Chunk::new with this very layout.
            unsafe { std::alloc::dealloc(self.ptr.as_ptr(), layout) };
        }
    }
}

#[repr(align(128))]
struct Shard(Mutex<Table>);

static TABLE: [Shard; SHARDS] = [const { Shard(mutex(Table::new())) }; SHARDS];

/// Per shard, a 64-bit summary of the contexts that have a list there (bit
/// `ctx_bit(ctx)`; set when a list is made, cleared when the shard has no
/// list left), changed only under the shard's lock and read without it: a
/// close skips the shards whose summary lacks its bit, so closing a clean
/// context costs 256 loads from 32 cache lines, whatever else is tracked.
static CTX_BITS: [AtomicU64; SHARDS] = [const { AtomicU64::new(0) }; SHARDS];

#[inline]
fn ctx_bit(ctx: usize) -> u64 {
    1 << ((ctx as u64).wrapping_mul(HASH_MUL) >> 58)
}

#[inline]
fn shard_index(addr: usize) -> usize {
    (hash(addr) >> (64 - SHARD_BITS)) as usize
}

/// Keeps shard `i`'s summary right after a change to its lists (the
/// caller holds its lock): `ctx` may have got a new list (`new_list`), or
/// lists may have gone. No lookup: a bit is set when a list is made and
/// all are cleared only when the shard has no list left.
#[inline]
fn summarize(i: usize, t: &Table, ctx: usize, new_list: bool) {
    let bits = &CTX_BITS[i];
    if t.no_lists() {
        if bits.load(Ordering::Relaxed) != 0 {
            bits.store(0, Ordering::Release);
        }
    } else if new_list && bits.load(Ordering::Relaxed) & ctx_bit(ctx) == 0 {
        bits.fetch_or(ctx_bit(ctx), Ordering::Release);
    }
}

/// Records flagged [`FLAG_ZOMBIE`]: while 0 (every well-behaved program),
/// the use-after-close checks on object verbs cost one shared read.
static ZOMBIES: AtomicUsize = AtomicUsize::new(0);

/// Objects the real library created that are not in the table because
/// memory ran out (see [`untracked`]).
static UNTRACKED: AtomicUsize = AtomicUsize::new(0);

/// Backtraces of creations (`IBV_SHIM_BACKTRACE=1`, opt-in and slow).
static BACKTRACES: Mutex<Option<HashMap<usize, Backtrace>>> = mutex(None);

#[inline]
fn shard(addr: usize) -> &'static Mutex<Table> {
    &TABLE[shard_index(addr)].0
}

/// Records a new object; a stale record at the same address (an object
/// freed behind the shim's back) is replaced. Returns false when it could
/// not be tracked (out of memory).
#[inline]
pub fn insert(obj: Obj) -> bool {
    if !keyable(obj.addr) || !packable(&obj) {
        return false;
    }
    let i = shard_index(obj.addr);
    let (stale, ok) = {
        let mut t = TABLE[i].0.lock();
        let (stale, ok, new_list) = t.insert(&obj);
        summarize(i, &t, obj.ctx, new_list);
        (stale, ok)
    };
    if let Some(stale) = stale {
        if stale.is_zombie() {
            ZOMBIES.fetch_sub(1, Ordering::Relaxed);
        }
        if stale.flags() & FLAG_BACKTRACE != 0 && obj.flags() & FLAG_BACKTRACE == 0 {
            take_backtrace(stale.addr);
        }
    }
    // A live object at this address is not the one destroyed there before.
    unbury(obj.addr);
    if !ok {
        UNTRACKED.fetch_add(1, Ordering::Relaxed);
        out_of_memory();
    }
    ok
}

/// How many objects (and contexts, device lists) the real library handed
/// out that the shim could not track for want of memory: when not 0, the
/// reports are incomplete.
pub fn untracked() -> usize {
    UNTRACKED.load(Ordering::Relaxed)
}

/// A context or device list the registry could not record for want of
/// memory: counted with the objects in [`untracked`].
#[cold]
pub fn note_untracked() {
    UNTRACKED.fetch_add(1, Ordering::Relaxed);
    out_of_memory();
}

#[cold]
fn out_of_memory() {
    static WARNED: std::sync::Once = std::sync::Once::new();
    WARNED.call_once(|| {
        crate::log!(
            crate::log::Level::Warn,
            "out of memory for the leak audit's table: some objects are not tracked"
        );
    });
}

/// What [`take`] found.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Taken {
    /// Removed from the table; put it back with [`restore`] if the real
    /// destroy fails.
    Removed(Obj),
    /// Its context was closed: left in the table, not to be forwarded.
    Zombie(Obj),
    /// Tracked as another kind: left in the table.
    OtherKind(Obj),
    /// Not tracked.
    Unknown,
}

/// Takes the record of `addr` out of the table ahead of a destroy, unless
/// it is a zombie or not one of `kinds`.
#[inline]
pub fn take(addr: usize, kinds: Kinds) -> Taken {
    if !keyable(addr) {
        return Taken::Unknown;
    }
    let mut t = shard(addr).lock();
    let Some(pos) = t.find(addr) else {
        return Taken::Unknown;
    };
    let obj = t.at(pos);
    if obj.is_zombie() {
        Taken::Zombie(obj)
    } else if !kinds.contains(obj.kind()) {
        Taken::OtherKind(obj)
    } else {
        t.remove_at(pos);
        summarize(shard_index(addr), &t, obj.ctx, false);
        Taken::Removed(obj)
    }
}

/// Puts back a record [`take`] removed, after the real destroy failed.
pub fn restore(obj: Obj) {
    let i = shard_index(obj.addr);
    let mut t = TABLE[i].0.lock();
    // The object still exists, so nobody can have recorded its address since.
    let (ok, new_list) = match t.find(obj.addr) {
        Some(_) => (true, false),
        None => {
            let (_, ok, new_list) = t.insert(&obj);
            (ok, new_list)
        }
    };
    summarize(i, &t, obj.ctx, new_list);
    if !ok {
        drop(t);
        UNTRACKED.fetch_add(1, Ordering::Relaxed);
        out_of_memory();
    }
}

/// The record of `addr`, if tracked.
pub fn get(addr: usize) -> Option<Obj> {
    if !keyable(addr) {
        return None;
    }
    let t = shard(addr).lock();
    t.find(addr).map(|pos| t.at(pos))
}

/// Changes the record of `addr` in place (resize, re-registration).
pub fn update(addr: usize, f: impl FnOnce(&mut Obj)) -> bool {
    if !keyable(addr) {
        return false;
    }
    let mut t = shard(addr).lock();
    match t.find(addr) {
        Some(pos) => {
            let old = t.at(pos);
            let mut obj = old;
            f(&mut obj);
            // The context is what the record's list says: it stays.
            obj.ctx = old.ctx;
            if !packable(&obj) {
                obj.parent = old.parent;
            }
            t.set(pos, &obj);
            true
        }
        None => false,
    }
}

/// The record of `addr` if it is a zombie (its context was closed). One
/// shared atomic read while no zombie exists.
#[inline]
pub fn zombie(addr: usize) -> Option<Obj> {
    if ZOMBIES.load(Ordering::Relaxed) == 0 || addr == 0 {
        return None;
    }
    get(addr).filter(Obj::is_zombie)
}

/// Every record matching `pred`, shard by shard (each shard's lock is held
/// only while it is scanned); stops early, with what it has, when memory
/// runs out.
pub fn collect(mut pred: impl FnMut(&Obj) -> bool) -> Vec<Obj> {
    let mut out = Vec::new();
    for s in &TABLE {
        let t = s.0.lock();
        for o in t.occupied().map(|p| t.at(p)).filter(|o| pred(o)) {
            if out.try_reserve(1).is_err() {
                out_of_memory();
                return out;
            }
            out.push(o);
        }
    }
    out
}

/// Calls `f` with every object this process tracks (not those inherited
/// across `fork()`), one shard at a time: the shard's objects are copied
/// out (in slab order) and its lock released before `f` sees them, so `f`
/// may use the table. Memory: one shard's objects (a shard that cannot be
/// copied for want of memory is skipped, and counted in [`untracked`]).
pub fn for_each(mut f: impl FnMut(&Obj)) {
    let (mut slots, mut buf) = (Vec::new(), Vec::<Obj>::new());
    for s in &TABLE {
        {
            let t = s.0.lock();
            buf.clear();
            if !t.in_slab_order(&mut slots, false) || buf.try_reserve(slots.len()).is_err() {
                UNTRACKED.fetch_add(t.len, Ordering::Relaxed);
                drop(t);
                out_of_memory();
                continue;
            }
            buf.extend(slots.iter().map(|&s| t.rec(slot_idx(s)).obj()));
        }
        buf.iter().for_each(&mut f);
    }
}

/// Number of tracked objects (a full scan of the shard headers).
pub fn count() -> usize {
    TABLE.iter().map(|s| s.0.lock().len).sum()
}

/// Applies `change` to the flags of every record on `ctx`'s lists for which
/// `pick` holds, a shard at a time; shows each changed object (as it was
/// before the change) to `f` with no lock held, and takes it off its list
/// when `unlist`. Returns how many changed. Costs the context's own objects
/// plus one visit per shard.
fn reflag(
    ctx: usize,
    pick: impl Fn(u8) -> bool,
    change: impl Fn(u8) -> u8,
    unlist: bool,
    mut f: impl FnMut(&Obj),
) -> usize {
    let mut buf: Vec<Obj> = Vec::new();
    let mut n = 0;
    let bit = ctx_bit(ctx);
    for (si, s) in TABLE.iter().enumerate() {
        if CTX_BITS[si].load(Ordering::Acquire) & bit == 0 {
            continue;
        }
        buf.clear();
        {
            let mut t = s.0.lock();
            for i in t.list_of(ctx) {
                let r = t.rec_mut(i);
                let flags = (r.meta >> 48) as u8;
                if pick(flags) {
                    let obj = r.obj();
                    r.meta = (r.meta & !(0xffu64 << 48)) | (change(flags) as u64) << 48;
                    if unlist {
                        t.unlist(i);
                    }
                    n += 1;
                    // Shown to `f` when there is memory to copy it out.
                    if buf.try_reserve(1).is_ok() {
                        buf.push(obj);
                    }
                }
            }
            if unlist {
                summarize(si, &t, ctx, false);
            }
        }
        buf.iter().for_each(&mut f);
    }
    n
}

/// Before the real `ibv_close_device(ctx)`: flags the context's live objects
/// as zombies, so that nothing reaches a context being freed, and as
/// closing. Flagging before the close (not after) means a new context that
/// the allocator puts at the same address once the close has freed it never
/// has its objects flagged. Returns how many were flagged.
pub fn begin_close(ctx: usize) -> usize {
    let n = reflag(
        ctx,
        |fl| fl & FLAG_ZOMBIE == 0,
        |fl| fl | FLAG_ZOMBIE | FLAG_CLOSING,
        false,
        |_| {},
    );
    ZOMBIES.fetch_add(n, Ordering::Relaxed);
    n
}

/// The real close failed: the objects [`begin_close`] flagged are live again.
pub fn abort_close(ctx: usize) {
    let n = reflag(
        ctx,
        |fl| fl & FLAG_CLOSING != 0,
        |fl| fl & !(FLAG_ZOMBIE | FLAG_CLOSING),
        false,
        |_| {},
    );
    ZOMBIES.fetch_sub(n, Ordering::Relaxed);
}

/// After the real close succeeded: shows each object [`begin_close`]
/// flagged to `f` (a shard at a time, with no lock held, like
/// [`for_each`]); they stay tracked as zombies, off the context's lists (a
/// new context at the same address starts with empty lists). Returns how
/// many.
pub fn finish_close(ctx: usize, f: impl FnMut(&Obj)) -> usize {
    reflag(
        ctx,
        |fl| fl & FLAG_CLOSING != 0,
        |fl| fl & !FLAG_CLOSING,
        true,
        f,
    )
}

/// The tracked objects that keep `obj` from being destroyed: the MRs, QPs,
/// SRQs and AHs of a PD, the QPs of a CQ or SRQ, the CQs of a channel.
pub fn holders(obj: &Obj) -> Vec<Obj> {
    let (addr, kind) = (obj.addr as u64, obj.kind());
    collect(|o| match kind {
        Kind::Pd | Kind::ImportedPd => {
            o.parent == obj.addr
                && matches!(
                    o.kind(),
                    Kind::Mr | Kind::Qp | Kind::Srq | Kind::Ah | Kind::ImportedMr
                )
        }
        Kind::Cq => o.kind() == Kind::Qp && (o.a == addr || o.b == addr),
        Kind::Srq => o.kind() == Kind::Qp && o.c == addr,
        Kind::CompChannel => o.kind() == Kind::Cq && o.parent == obj.addr,
        _ => false,
    })
}

// --- backtraces (IBV_SHIM_BACKTRACE=1) --------------------------------------

/// Keeps the backtrace of the creation of `addr`.
pub fn store_backtrace(addr: usize, bt: Backtrace) {
    let mut map = BACKTRACES.lock();
    let map = map.get_or_insert_with(HashMap::new);
    // Out of memory: the object is reported with its caller only.
    if crate::oom::without_reserve(|| map.try_reserve(1)).is_ok() {
        map.insert(addr, bt);
    }
}

/// Forgets (and returns) the backtrace of `addr`.
pub fn take_backtrace(addr: usize) -> Option<Backtrace> {
    BACKTRACES.lock().as_mut()?.remove(&addr)
}

/// Runs `f` with the backtrace of `addr`, if one was recorded.
pub fn with_backtrace<R>(addr: usize, f: impl FnOnce(&Backtrace) -> R) -> Option<R> {
    BACKTRACES.lock().as_ref()?.get(&addr).map(f)
}

// --- recently destroyed addresses ---------------------------------------------

/// Direct-mapped memory of addresses destroyed through the shim, so that a
/// second destroy of the same pointer can be told from a pointer the shim
/// never saw. Bounded (32 KiB); an old entry is simply overwritten.
const GRAVES: usize = 4096;
static GRAVEYARD: [AtomicU64; GRAVES] = [const { AtomicU64::new(0) }; GRAVES];

#[inline]
fn grave(addr: usize) -> &'static AtomicU64 {
    &GRAVEYARD[(hash(addr) >> 52) as usize % GRAVES]
}

/// Remembers that `addr` (a `kind`) was destroyed.
#[inline]
pub fn bury(addr: usize, kind: Kind) {
    grave(addr).store((addr as u64) << 8 | kind as u64, Ordering::Relaxed);
}

/// Forgets a destroy of `addr`: an object lives there again.
#[inline]
fn unbury(addr: usize) {
    let g = grave(addr);
    if g.load(Ordering::Relaxed) >> 8 == (addr as u64) & ((1 << 56) - 1) {
        g.store(0, Ordering::Relaxed);
    }
}

/// The kind `addr` had when it was last destroyed through the shim, if the
/// graveyard still remembers it.
pub fn buried(addr: usize) -> Option<Kind> {
    let g = grave(addr).load(Ordering::Relaxed);
    (g != 0 && g >> 8 == (addr as u64) & ((1 << 56) - 1))
        .then(|| Kind::from_u8(g as u8))
        .flatten()
}

// --- fork ----------------------------------------------------------------------

pub(super) fn fork_lock() {
    for s in &TABLE {
        lock::fork_hold(&s.0);
    }
    lock::fork_hold(&BACKTRACES);
}

pub(super) fn fork_unlock(child: bool) {
    if !child {
        for s in &TABLE {
            lock::fork_release(&s.0);
        }
        lock::fork_release(&BACKTRACES);
        return;
    }
    // The child keeps what it inherited (zombies and the graveyard
    // included: a destroy it must refuse in the parent it must refuse
    // here), but reports only what it creates itself.
    for s in &TABLE {
        lock::fork_reset(&s.0);
        let mut t = s.0.lock();
        t.inherited = t.used;
        t.free = NO_FREE;
    }
    lock::fork_reset(&BACKTRACES);
}

#[cfg(test)]
mod tests {
    use super::*;

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
    fn records_keep_every_field() {
        for (addr, ctx, parent, caller) in [
            (
                0x7fff_ffff_fff8,
                0x7fff_ffff_fff0,
                0x7fff_0000_0008,
                0x7fff_ffff_ffff,
            ),
            (0x8, 0x10, 0, 1),
            (
                0x5555_1234_5678,
                0x5555_8765_4320,
                0x5555_0000_1000,
                0x5555_dead_beef,
            ),
        ] {
            let mut o = Obj::new(Kind::Qp, addr, ctx, parent, caller, 77);
            o.a = u64::MAX;
            o.b = 1;
            o.c = 2;
            o.x = u32::MAX;
            o.set_flag(FLAG_ZOMBIE);
            assert!(packable(&o));
            let r = Rec::of(&o);
            assert_eq!(r.obj(), o);
            assert_eq!((r.addr(), r.ctx()), (addr, ctx));
        }
        let odd = Obj::new(Kind::Pd, 0x1000, 0x1001, 0, 0, 1);
        assert!(!packable(&odd) && !insert(odd));
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

    #[test]
    fn meta_fields_round_trip() {
        let mut o = Obj::new(Kind::Qp, 1, 2, 3, 4, 99);
        o.set_sub(0xff);
        o.set_flag(FLAG_ZOMBIE);
        assert_eq!(o.kind(), Kind::Qp);
        assert_eq!(o.sub(), 0xff);
        assert!(o.is_zombie());
        assert_eq!(o.tid, 99);
        assert!(o.time_ms() > 0);
        assert_eq!(Kind::from_u8(0), None);
        assert_eq!(Kind::from_u8(9), Some(Kind::ImportedMr));
    }

    #[test]
    fn graveyard_remembers_the_last_destroy() {
        bury(0x7f00_dead_bee0, Kind::Cq);
        assert_eq!(buried(0x7f00_dead_bee0), Some(Kind::Cq));
        assert_eq!(buried(0x7f00_dead_bef0), None);
    }

    #[test]
    fn kinds_sets() {
        let k = Kind::Mr.bit().or(Kind::ImportedMr);
        assert!(k.contains(Kind::ImportedMr));
        assert!(!k.contains(Kind::Pd));
    }
}
