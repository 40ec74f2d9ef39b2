//! Live verbs objects (PDs, MRs, CQs, ...) in a side table keyed by address.
//!
//! Built for the shim's budgets: at most 80 bytes and 100 ns per
//! tracked object, flat from 1k to 1M live objects, and threads working on
//! unrelated contexts never meeting on a lock or a shared counter.
//!
//! - [`SHARDS`] shards, picked by a multiplicative hash of the address, each
//!   behind its own mutex on its own cache lines. Nothing global is written
//!   on the create/destroy path.
//! - In a shard, each object is one 64-byte record in a slab (one anonymous
//!   mapping that doubles with `mremap`: nothing is copied, and its unused
//!   tail is never touched), recycled through a free list, and found through an open-addressing index of
//!   4-byte slots that hold a 16-bit hash tag and the slab index (16 bits):
//!   linear probing, load at most 7/8, backward-shift deletion. A probe
//!   reads a record only on a tag match (to compare the key the record
//!   packs), growth and deletion work from the tags alone, and with no
//!   tombstones probe lengths never degrade. The 16-bit indices cap a shard
//!   at 57,344 records (64 shards: 3.67M live objects; past that an object
//!   is untracked and counted, as when memory runs out).
//! - Each shard also keeps, per context, a doubly-linked list of that
//!   context's records in the shard, linked through 16-bit slab indices in
//!   the records themselves (each record packs its own key into the spare
//!   bits of its context, parent and caller fields, so a list walk yields
//!   whole objects). `ibv_close_device` walks only the closing context's
//!   lists: its cost is the context's own objects plus one visit per shard,
//!   not every object of the process.
//! - Memory per object: 64 (record) + 4 / load (index: 4.6 to 10.7 bytes as
//!   the load swings between 7/8 and 3/8 across doublings) + each shard's
//!   last page partly used (at most 256 KiB in all) = 69 to 75 bytes, and the
//!   shim's own fixed memory on top (about 0.5 MiB: 388 KiB of its file,
//!   184 of them code (see `hot_text.ld`), and its static tables).
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

mod chunk;
mod facts;
mod record;
mod table;

pub use facts::{AhFacts, AhVia, Facts, Keys, MrFacts, MrVia, QpFacts};
pub use record::{now_ms, Kind, Kinds, Obj, Stored, FLAG_BACKTRACE, FLAG_CLOSING, FLAG_ZOMBIE};

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};

use super::lock::{self, mutex, Mutex};
use chunk::out_of_memory;
use record::packable;
use table::{hash, keyable, slot_idx, Table, NO_FREE};

/// Number of shards (a power of two). A thread's working set is a handful
/// of addresses; with 64 shards two threads seldom share a lock. Not more:
/// each shard's slab is whole pages, its last one partly used: 256 shards
/// cost ~770 KiB more than 64 with 1k objects live, ~330 KiB at 100k.
pub const SHARDS: usize = 64;
const SHARD_BITS: u32 = SHARDS.trailing_zeros();

#[repr(align(128))]
struct Shard(Mutex<Table>);

static TABLE: [Shard; SHARDS] = [const { Shard(mutex(Table::new())) }; SHARDS];
// A shard's header stays within its two cache lines (fixed memory: 32 KiB).
const _: () = assert!(std::mem::size_of::<Shard>() <= 128);

/// Per shard, a 64-bit summary of the contexts that may have a list there
/// (bit `ctx_bit(ctx)`), read without the shard's lock: a close skips the
/// shards whose summary lacks its bit, so closing a clean context costs
/// 64 loads from 8 cache lines, whatever else is tracked. A bit is set
/// (under the lock) when a list is made; it is not cleared when a list
/// empties (a create/destroy loop would then write the shared word twice
/// per pair) but recomputed from the shard's lists, under the lock, by
/// each close that visits the shard. So a set bit may be stale (the close
/// then visits a shard for nothing), a clear one never is.
static CTX_BITS: [AtomicU64; SHARDS] = [const { AtomicU64::new(0) }; SHARDS];

#[inline]
fn ctx_bit(ctx: usize) -> u64 {
    1 << crate::addr_table::hash(ctx as u64, u64::BITS.trailing_zeros())
}

#[inline]
fn shard_index(addr: usize) -> usize {
    (hash(addr) >> (64 - SHARD_BITS)) as usize
}

/// `ctx` made a list in shard `i` (the caller holds its lock): its bit goes
/// into the summary, with one load when it is there already.
#[inline(always)]
fn note_list(i: usize, ctx: usize) {
    let bits = &CTX_BITS[i];
    if bits.load(Ordering::Relaxed) & ctx_bit(ctx) == 0 {
        bits.fetch_or(ctx_bit(ctx), Ordering::Release);
    }
}

/// Shard `i`'s exact summary, from its lists (the caller holds its lock).
fn resummarize(i: usize, t: &mut Table) {
    let bits = t.list_contexts().fold(0, |b, ctx| b | ctx_bit(ctx));
    t.hot_noted = bits & ctx_bit(t.hot) != 0;
    if CTX_BITS[i].load(Ordering::Relaxed) != bits {
        CTX_BITS[i].store(bits, Ordering::Release);
    }
}

/// Records flagged [`FLAG_ZOMBIE`]: while 0 (every well-behaved program),
/// the use-after-close checks on object verbs cost one shared read.
static ZOMBIES: AtomicUsize = AtomicUsize::new(0);

/// Objects the real library created that are not in the table because
/// memory ran out (see [`untracked`]).
static UNTRACKED: AtomicUsize = AtomicUsize::new(0);

/// The call stack of a creation: return addresses, innermost first,
/// symbolized only when a report is written.
pub type Frames = Box<[usize]>;

/// Backtraces of creations (`IBV_SHIM_BACKTRACE=1`, opt-in and slow).
static BACKTRACES: Mutex<Option<HashMap<usize, Frames>>> = mutex(None);

#[inline]
fn shard(addr: usize) -> &'static Mutex<Table> {
    &TABLE[shard_index(addr)].0
}

/// Records a new object; a stale record at the same address (an object
/// freed behind the shim's back) is replaced. Returns false when it could
/// not be tracked (out of memory). Inlined into each create export.
#[inline(always)]
pub fn insert(obj: Obj) -> bool {
    if !packable(&obj) {
        return false;
    }
    let i = shard_index(obj.addr);
    let mut stale = None;
    let ok = {
        let mut t = TABLE[i].0.lock();
        let (ok, new_list) = t.insert(&obj, &mut stale);
        if new_list {
            note_list(i, obj.ctx);
        }
        ok
    };
    if let Some(stale) = stale {
        replaced(obj.flags(), stale);
    }
    // A live object at this address is not the one destroyed there before.
    unbury(obj.addr);
    if !ok {
        not_tracked();
    }
    ok
}

/// `insert` replaced a stale record (an object freed behind the shim's
/// back) with one of `flags`. Takes values, not references: the new record
/// stays in registers on the fast path.
#[cold]
#[inline(never)]
fn replaced(flags: u8, stale: Obj) {
    if stale.is_zombie() {
        ZOMBIES.fetch_sub(1, Ordering::Relaxed);
    }
    if stale.flags() & FLAG_BACKTRACE != 0 && flags & FLAG_BACKTRACE == 0 {
        take_backtrace(stale.addr);
    }
}

#[cold]
#[inline(never)]
fn not_tracked() {
    UNTRACKED.fetch_add(1, Ordering::Relaxed);
    out_of_memory();
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

/// What [`take`] found (the record, when there is one, is in its `rec`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Taken {
    /// Removed from the table, still packed (a destroy that succeeds needs
    /// only its kind and flags); put it back with [`restore`] if the real
    /// destroy fails.
    Removed,
    /// Its context was closed: left in the table, not to be forwarded.
    Zombie,
    /// Tracked as another kind: left in the table.
    OtherKind,
    /// Not tracked.
    Unknown,
}

/// Takes the record of `addr` out of the table ahead of a destroy, unless
/// it is a zombie or not one of `kinds`; the record found is copied into
/// `rec` (once: the caller's buffer is where the destroy reads it).
/// Inlined into each destroy export: no frame of its own.
#[inline(always)]
pub fn take(addr: usize, kinds: Kinds, rec: &mut Stored) -> Taken {
    if !keyable(addr) {
        return Taken::Unknown;
    }
    let mut t = shard(addr).lock();
    let Some(pos) = t.find(addr) else {
        return Taken::Unknown;
    };
    *rec = Stored(*t.rec_at(pos));
    if rec.flags() & FLAG_ZOMBIE != 0 {
        Taken::Zombie
    } else if !kinds.contains_raw(rec.raw_kind()) {
        Taken::OtherKind
    } else {
        // An emptied list leaves its summary bit set (see `CTX_BITS`).
        t.remove_at(pos);
        Taken::Removed
    }
}

/// Puts back a record [`take`] removed, after the real destroy failed.
pub fn restore(obj: Obj) {
    let i = shard_index(obj.addr);
    let mut t = TABLE[i].0.lock();
    // The object still exists, so nobody can have recorded its address since.
    let (ok, new_list) = match t.find(obj.addr) {
        Some(_) => (true, false),
        None => t.insert(&obj, &mut None),
    };
    if new_list {
        note_list(i, obj.ctx);
    }
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
            // SAFETY: the contents of the table's own non-empty slots.
            buf.extend(slots.iter().map(|&s| unsafe { t.rec(slot_idx(s)) }.obj()));
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
                // SAFETY: from `list_of`.
                let r = unsafe { t.rec_mut(i) };
                let flags = r.flags();
                if pick(flags) {
                    let obj = r.obj();
                    r.set_flags(change(flags));
                    if unlist {
                        // SAFETY: from `list_of`.
                        unsafe { t.unlist(i) };
                    }
                    n += 1;
                    // Shown to `f` when there is memory to copy it out.
                    if buf.try_reserve(1).is_ok() {
                        buf.push(obj);
                    }
                }
            }
            // Drops the bits of lists emptied since (or by this walk).
            resummarize(si, &mut t);
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
/// SRQs, AHs, MWs, WQs and parent domains of a PD, the QPs of a CQ or SRQ,
/// the CQs of a channel, the parent domains of a TD, the QPs of an XRCD,
/// the flows of a QP.
pub fn holders(obj: &Obj) -> Vec<Obj> {
    let kind = obj.kind();
    collect(|o| match kind {
        Kind::Pd | Kind::ImportedPd => {
            o.parent == obj.addr
                && matches!(
                    o.kind(),
                    Kind::Mr
                        | Kind::Qp
                        | Kind::Srq
                        | Kind::Ah
                        | Kind::ImportedMr
                        | Kind::Mw
                        | Kind::Wq
                        | Kind::ParentDomain
                )
        }
        // Objects only the context's tables make (see `exports::interpose`).
        Kind::Td => matches!(o.facts, Facts::ParentDomain { td, .. } if td.get() == obj.addr),
        Kind::Xrcd => o.kind() == Kind::Qp && o.parent == obj.addr,
        Kind::ParentDomain => o.parent == obj.addr,
        Kind::Cq => o
            .facts
            .qp()
            .is_some_and(|q| q.send_cq.get() == obj.addr || q.recv_cq.get() == obj.addr),
        Kind::Srq => o.facts.qp().is_some_and(|q| q.srq.get() == obj.addr),
        Kind::Qp => o.kind() == Kind::Flow && o.parent == obj.addr,
        Kind::CompChannel => o.kind() == Kind::Cq && o.parent == obj.addr,
        _ => false,
    })
}

// --- backtraces (IBV_SHIM_BACKTRACE=1) --------------------------------------

/// Keeps the backtrace of the creation of `addr`.
pub fn store_backtrace(addr: usize, bt: Frames) {
    let mut map = BACKTRACES.lock();
    let map = map.get_or_insert_with(HashMap::new);
    // Out of memory: the object is reported with its caller only.
    if crate::oom::without_reserve(|| map.try_reserve(1)).is_ok() {
        map.insert(addr, bt);
    }
}

/// Forgets (and returns) the backtrace of `addr`.
pub fn take_backtrace(addr: usize) -> Option<Frames> {
    BACKTRACES.lock().as_mut()?.remove(&addr)
}

/// Runs `f` with the backtrace of `addr`, if one was recorded.
pub fn with_backtrace<R>(addr: usize, f: impl FnOnce(&Frames) -> R) -> Option<R> {
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

/// [`bury`] for the record a destroy took: its kind as stored.
#[inline(always)]
pub fn bury_taken(addr: usize, rec: &Stored) {
    grave(addr).store(
        (addr as u64) << 8 | rec.raw_kind() as u64,
        Ordering::Relaxed,
    );
}

/// Forgets a destroy of `addr` (a key: below 2^47): an object lives there
/// again.
#[inline]
fn unbury(addr: usize) {
    let g = grave(addr);
    if g.load(Ordering::Relaxed) >> 8 == addr as u64 {
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

    /// A destroy that empties a context's list leaves the shard's summary
    /// bit set; a later create on the context and a close must still meet.
    #[test]
    fn a_close_finds_objects_after_a_list_emptied_and_refilled() {
        let ctx = 0x7e00_0000_1000usize;
        let a = 0x7e00_0001_0000usize;
        let i = shard_index(a);
        let b = (1..)
            .map(|k| a + k * 64)
            .find(|&x| shard_index(x) == i)
            .unwrap();
        assert!(insert(Obj::new(Kind::Pd, a, ctx, 0, 0, 1)));
        let mut rec = Stored::EMPTY;
        assert_eq!(take(a, Kind::Pd.bit(), &mut rec), Taken::Removed);
        assert_eq!(rec.obj().addr, a);
        assert!(insert(Obj::new(Kind::Pd, b, ctx, 0, 0, 1)));
        assert_eq!(begin_close(ctx), 1);
        let mut seen = Vec::new();
        assert_eq!(finish_close(ctx, |o| seen.push(o.addr)), 1);
        assert_eq!(seen, [b]);
        // The close recomputed the shard's summary: `ctx` has no list left.
        assert_eq!(reflag(ctx, |_| true, |f| f, false, |_| {}), 0);
        assert_eq!(take(b, Kind::Pd.bit(), &mut rec), Taken::Zombie);
    }

    /// A close that finds a shard's list of its context empty clears the
    /// shard's summary bit; the shard must then note the bit again when the
    /// context starts a new list there (the table remembers the hot
    /// context's bit as noted, and the close must make it forget).
    #[test]
    fn a_close_finds_objects_made_after_a_close_cleared_the_summary() {
        let ctx = 0x7e10_0000_1000usize;
        let a = 0x7e10_0001_0000usize;
        let i = shard_index(a);
        let b = (1..)
            .map(|k| a + k * 64)
            .find(|&x| shard_index(x) == i)
            .unwrap();
        let mut rec = Stored::EMPTY;
        assert!(insert(Obj::new(Kind::Pd, a, ctx, 0, 0, 1)));
        assert_eq!(take(a, Kind::Pd.bit(), &mut rec), Taken::Removed);
        // Nothing left: the close visits the shard and clears the bit.
        assert_eq!(begin_close(ctx), 0);
        assert_eq!(finish_close(ctx, |_| {}), 0);
        // A new context at the same address (or the same one, reopened).
        assert!(insert(Obj::new(Kind::Pd, b, ctx, 0, 0, 1)));
        assert_eq!(begin_close(ctx), 1, "the close must find the new object");
        assert_eq!(finish_close(ctx, |_| {}), 1);
        assert_eq!(take(b, Kind::Pd.bit(), &mut rec), Taken::Zombie);
    }

    #[test]
    fn graveyard_remembers_the_last_destroy() {
        bury(0x7f00_dead_bee0, Kind::Cq);
        assert_eq!(buried(0x7f00_dead_bee0), Some(Kind::Cq));
        assert_eq!(buried(0x7f00_dead_bef0), None);
    }
}
