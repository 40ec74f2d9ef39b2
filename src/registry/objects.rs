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
//! - Memory per object: 64 (record) + 8 / load (index: 10.7 to 21.3 bytes as
//!   the load swings between 3/4 and 3/8 across doublings) = 75 to 86 bytes.
//! - A failed allocation never fails the program's call: the object is then
//!   simply not tracked (with one warning). Nor is an address that cannot
//!   be a key (not 8-aligned, or above 2^47), which no allocator hands out.
//!
//! The exports take a record out *before* forwarding a destroy and put it
//! back if the destroy fails (see `exports::resources`). That order means a
//! concurrent create that gets the same address from the allocator (after
//! the real destroy freed it) can never have its fresh record removed by the
//! destroying thread, with no generation counter needed.

use std::alloc::{alloc_zeroed, Layout};
use std::backtrace::Backtrace;
use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};

use parking_lot::Mutex;

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

/// An object as stored: an [`Obj`] without its address, which lives in the
/// index slot. 64 bytes, one cache line.
#[derive(Clone, Copy, Default)]
#[repr(C, align(64))]
struct Rec {
    ctx: usize,
    parent: usize,
    caller: usize,
    a: u64,
    b: u64,
    c: u64,
    tid: u32,
    x: u32,
    meta: u64,
}

const _: () = assert!(std::mem::size_of::<Rec>() == 64);

impl Rec {
    fn of(o: &Obj) -> Rec {
        Rec {
            ctx: o.ctx,
            parent: o.parent,
            caller: o.caller,
            a: o.a,
            b: o.b,
            c: o.c,
            tid: o.tid,
            x: o.x,
            meta: o.meta,
        }
    }

    fn obj(&self, addr: usize) -> Obj {
        let r = *self;
        Obj {
            addr,
            ctx: r.ctx,
            parent: r.parent,
            caller: r.caller,
            a: r.a,
            b: r.b,
            c: r.c,
            tid: r.tid,
            x: r.x,
            meta: r.meta,
        }
    }
}

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
/// Records per shard: 256 shards x 1M = 268M objects.
const MAX_RECS: u32 = (1 << IDX_BITS) - 1;

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
    chunks: Vec<Box<[Rec]>>,
    /// Head of the free list of slab slots (linked through `Rec::a`).
    free: u32,
    /// Slab slots handed out so far (the rest of the last chunk is unused).
    used: u32,
}

impl Table {
    const fn new() -> Table {
        Table {
            slots: Vec::new(),
            len: 0,
            chunks: Vec::new(),
            free: NO_FREE,
            used: 0,
        }
    }

    #[inline]
    fn rec(&self, i: u32) -> &Rec {
        let (c, o) = chunk_of(i);
        &self.chunks[c][o]
    }

    #[inline]
    fn rec_mut(&mut self, i: u32) -> &mut Rec {
        let (c, o) = chunk_of(i);
        &mut self.chunks[c][o]
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

    fn new_chunk(len: usize) -> Option<Box<[Rec]>> {
        let layout = Layout::array::<Rec>(len).ok()?;
        // SAFETY: the layout has a non-zero size.
        let p = unsafe { alloc_zeroed(layout) }.cast::<Rec>();
        if p.is_null() {
            return None;
        }
        // SAFETY: p is a fresh, zeroed allocation of `len` records with the
        // layout Box<[Rec]> frees with; all-zero bytes are a valid Rec (it
        // is integers only).
        Some(unsafe { Box::from_raw(std::ptr::slice_from_raw_parts_mut(p, len)) })
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
            self.chunks.try_reserve(1).ok()?;
            self.chunks.push(Self::new_chunk(FIRST_CHUNK << n)?);
        }
        self.used += 1;
        Some(self.used - 1)
    }

    fn free_rec(&mut self, i: u32) {
        self.rec_mut(i).a = self.free as u64;
        self.free = i;
    }

    /// Doubles the index (rehashing from the keys in the slots alone).
    fn grow(&mut self) -> bool {
        let cap = (self.slots.len() * 2).max(16);
        let mut slots: Vec<u64> = Vec::new();
        if slots.try_reserve_exact(cap).is_err() {
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
    /// address. `Err` when memory ran out (the object is not tracked).
    fn insert(&mut self, obj: &Obj) -> Result<Option<Obj>, ()> {
        if let Some(pos) = self.find(obj.addr) {
            let old = self.at(pos);
            self.set(pos, obj);
            return Ok(Some(old));
        }
        if (self.len + 1) * 4 > self.slots.len() * 3 && !self.grow() {
            return Err(());
        }
        let idx = self.alloc_rec().ok_or(())?;
        *self.rec_mut(idx) = Rec::of(obj);
        let mask = self.slots.len() - 1;
        let mut i = self.home(obj.addr);
        while self.slots[i] != 0 {
            i = (i + 1) & mask;
        }
        self.slots[i] = (obj.addr as u64 >> 3) << IDX_BITS | (idx as u64 + 1);
        self.len += 1;
        Ok(None)
    }

    /// The object in index slot `pos` (non-empty).
    #[inline]
    fn at(&self, pos: usize) -> Obj {
        let s = self.slots[pos];
        self.rec(slot_idx(s)).obj(slot_addr(s))
    }

    /// Rewrites the record in index slot `pos` (non-empty).
    #[inline]
    fn set(&mut self, pos: usize, obj: &Obj) {
        let idx = slot_idx(self.slots[pos]);
        *self.rec_mut(idx) = Rec::of(obj);
    }

    /// Removes the entry in index slot `pos`, closing the gap by shifting
    /// back the entries of the probe run after it.
    fn remove_at(&mut self, pos: usize) -> Obj {
        let obj = self.at(pos);
        self.free_rec(slot_idx(self.slots[pos]));
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
        obj
    }

    /// Index slots in use.
    fn occupied(&self) -> impl Iterator<Item = usize> + '_ {
        (0..self.slots.len()).filter(|&p| self.slots[p] != 0)
    }

    /// The used slots' contents in slab order, so that the records behind
    /// them are then read sequentially (a scan of a million objects in
    /// index order would be a million cache misses).
    fn in_slab_order(&self, into: &mut Vec<u64>) {
        into.clear();
        into.extend(self.slots.iter().copied().filter(|&s| s != 0));
        into.sort_unstable_by_key(|&s| s & IDX_MASK);
    }
}

#[repr(align(128))]
struct Shard(Mutex<Table>);

static TABLE: [Shard; SHARDS] = [const { Shard(Mutex::new(Table::new())) }; SHARDS];

/// Records flagged [`FLAG_ZOMBIE`]: while 0 (every well-behaved program),
/// the use-after-close checks on object verbs cost one shared read.
static ZOMBIES: AtomicUsize = AtomicUsize::new(0);

/// Backtraces of creations (`IBV_SHIM_BACKTRACE=1`, opt-in and slow).
static BACKTRACES: Mutex<Option<HashMap<usize, Backtrace>>> = Mutex::new(None);

#[inline]
fn shard(addr: usize) -> &'static Mutex<Table> {
    &TABLE[(hash(addr) >> (64 - SHARD_BITS)) as usize].0
}

/// Records a new object; a stale record at the same address (an object
/// freed behind the shim's back) is replaced. Returns false when it could
/// not be tracked (out of memory).
#[inline]
pub fn insert(obj: Obj) -> bool {
    if !keyable(obj.addr) {
        return false;
    }
    let result = shard(obj.addr).lock().insert(&obj);
    match result {
        Ok(None) => true,
        Ok(Some(stale)) => {
            if stale.is_zombie() {
                ZOMBIES.fetch_sub(1, Ordering::Relaxed);
            }
            if stale.flags() & FLAG_BACKTRACE != 0 && obj.flags() & FLAG_BACKTRACE == 0 {
                take_backtrace(stale.addr);
            }
            true
        }
        Err(()) => {
            out_of_memory();
            false
        }
    }
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
        Taken::Removed(obj)
    }
}

/// Puts back a record [`take`] removed, after the real destroy failed.
pub fn restore(obj: Obj) {
    let mut t = shard(obj.addr).lock();
    // The object still exists, so nobody can have recorded its address since.
    if t.find(obj.addr).is_none() && t.insert(&obj).is_err() {
        drop(t);
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
            let mut obj = t.at(pos);
            f(&mut obj);
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
/// only while it is scanned).
pub fn collect(mut pred: impl FnMut(&Obj) -> bool) -> Vec<Obj> {
    let mut out = Vec::new();
    for s in &TABLE {
        let t = s.0.lock();
        out.extend(t.occupied().map(|p| t.at(p)).filter(|o| pred(o)));
    }
    out
}

/// Calls `f` with every tracked object, one shard at a time: the shard's
/// objects are copied out (in slab order) and its lock released before `f`
/// sees them, so `f` may use the table. Memory: one shard's objects.
pub fn for_each(mut f: impl FnMut(&Obj)) {
    let (mut slots, mut buf) = (Vec::new(), Vec::new());
    for s in &TABLE {
        {
            let t = s.0.lock();
            t.in_slab_order(&mut slots);
            buf.clear();
            buf.extend(slots.iter().map(|&s| t.rec(slot_idx(s)).obj(slot_addr(s))));
        }
        buf.iter().for_each(&mut f);
    }
}

/// Number of tracked objects (a full scan of the shard headers).
pub fn count() -> usize {
    TABLE.iter().map(|s| s.0.lock().len).sum()
}

/// Applies `change` to the flags of every record of `ctx` for which `pick`
/// holds, a shard at a time; shows each changed object (as it was before
/// the change) to `f` with no lock held. Returns how many changed.
fn reflag(
    ctx: usize,
    pick: impl Fn(u8) -> bool,
    change: impl Fn(u8) -> u8,
    mut f: impl FnMut(&Obj),
) -> usize {
    let (mut slots, mut buf) = (Vec::new(), Vec::new());
    let mut n = 0;
    for s in &TABLE {
        {
            let mut t = s.0.lock();
            t.in_slab_order(&mut slots);
            buf.clear();
            for &slot in &slots {
                let r = t.rec_mut(slot_idx(slot));
                let flags = (r.meta >> 48) as u8;
                if r.ctx == ctx && pick(flags) {
                    buf.push(r.obj(slot_addr(slot)));
                    r.meta = (r.meta & !(0xffu64 << 48)) | (change(flags) as u64) << 48;
                }
            }
        }
        n += buf.len();
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
        |_| {},
    );
    ZOMBIES.fetch_sub(n, Ordering::Relaxed);
}

/// After the real close succeeded: shows each object [`begin_close`]
/// flagged to `f` (a shard at a time, with no lock held, like
/// [`for_each`]); they stay tracked as zombies. Returns how many.
pub fn finish_close(ctx: usize, f: impl FnMut(&Obj)) -> usize {
    reflag(ctx, |fl| fl & FLAG_CLOSING != 0, |fl| fl & !FLAG_CLOSING, f)
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
    BACKTRACES
        .lock()
        .get_or_insert_with(HashMap::new)
        .insert(addr, bt);
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
        std::mem::forget(s.0.lock());
    }
    std::mem::forget(BACKTRACES.lock());
}

pub(super) fn fork_unlock(child: bool) {
    for s in &TABLE {
        // SAFETY: fork_lock took every shard lock on this thread and forgot the guards.
        unsafe { s.0.force_unlock() };
    }
    // SAFETY: as above.
    unsafe { BACKTRACES.force_unlock() };
    if child {
        // The child reports only what it creates itself.
        for s in &TABLE {
            *s.0.lock() = Table::new();
        }
        *BACKTRACES.lock() = None;
        ZOMBIES.store(0, Ordering::Relaxed);
        for g in &GRAVEYARD {
            g.store(0, Ordering::Relaxed);
        }
    }
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
                let got = t.find(addr).map(|p| t.remove_at(p));
                assert_eq!(got, model.remove(&addr), "round {round}");
            } else {
                let mut o = obj(addr);
                o.a = round;
                let stale = t.insert(&o).unwrap();
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
            assert!(o < t.chunks[c].len());
        }
        assert_eq!(t.chunks.len(), 6);
        assert_eq!(t.chunks.iter().map(|c| c.len()).sum::<usize>(), 1008);
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
