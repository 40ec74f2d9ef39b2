//! The lkey index of the data-path checks: which tracked MR an SGE's lkey
//! names. The registry is keyed by address; this maps lkeys to MR
//! addresses and confirms each hit against the registry (so a
//! deregistered MR is never taken for live). Rebuilt from the registry on
//! a miss (a new MR, or a key that names none: the latter costs a scan of
//! the registry, paid only by a program that posts bad keys). Touched only
//! with `IBV_SHIM_CHECK=datapath`.

use std::collections::HashMap;
use std::sync::atomic::{fence, AtomicU32, AtomicU64, Ordering};

use crate::registry::lock::{mutex, Mutex};
use crate::registry::objects::{self, Keys, Kind, Obj};

/// The MRs of each lkey (several: lkeys are per device), and the MRs seen
/// before that are gone (to say "deregistered").
struct Index {
    live: HashMap<u32, Vec<usize>>,
    gone: HashMap<u32, usize>,
}

static INDEX: Mutex<Option<Index>> = mutex(None);

/// Bumped whenever an MR goes (deregistered) or the index is rebuilt: a
/// thread's cached answer is good only for the generation it was read in.
static GENERATION: AtomicU64 = AtomicU64::new(1);

/// What a clean post needs of an MR.
#[derive(Clone, Copy)]
pub(super) struct Facts {
    pub pd: usize,
    pub start: u64,
    pub len: u64,
    /// SGE addresses are virtual addresses inside `[start, start + len)`
    /// (not an iova, a dma-buf or device-memory offset, nor an imported MR).
    pub ranged: bool,
    /// Registered with local write (or imported: not known, not checked).
    pub writable: bool,
}

const ACCESS_LOCAL_WRITE: u32 = verbs_abi::ibv_access_flags::IBV_ACCESS_LOCAL_WRITE as u32;

impl Facts {
    pub(super) fn of(mr: &Obj) -> Facts {
        let (start, len, ranged, writable) = match mr.facts {
            objects::Facts::Mr(m) => (
                m.addr,
                m.length,
                m.via.virtual_range(),
                m.access & ACCESS_LOCAL_WRITE != 0,
            ),
            // Imported: not known, not checked.
            objects::Facts::ImportedMr { addr, length, .. } => (addr, length, false, true),
            _ => (0, 0, false, true),
        };
        Facts {
            pd: mr.parent,
            start,
            len,
            ranged,
            writable,
        }
    }

    /// Does `[addr, addr + length)` lie inside the MR? (No overflow.)
    #[inline]
    pub(super) fn covers(&self, addr: u64, length: u32) -> bool {
        !self.ranged
            || (addr >= self.start
                && addr - self.start <= self.len
                && self.len - (addr - self.start) >= length as u64)
    }
}

/// One slot of the cache: a seqlock (odd while a writer fills it). A
/// cache line each (a shift, not a multiply, finds it).
#[repr(align(64))]
struct Cached {
    seq: AtomicU32,
    lkey: AtomicU32,
    ctx: AtomicU64,
    generation: AtomicU64,
    pd: AtomicU64,
    start: AtomicU64,
    len: AtomicU64,
    /// bit 0: ranged; bit 1: writable.
    flags: AtomicU32,
}

const CACHED: usize = 256;

static CACHE: [Cached; CACHED] = [const {
    Cached {
        seq: AtomicU32::new(0),
        lkey: AtomicU32::new(0),
        ctx: AtomicU64::new(0),
        generation: AtomicU64::new(0),
        pd: AtomicU64::new(0),
        start: AtomicU64::new(0),
        len: AtomicU64::new(0),
        flags: AtomicU32::new(0),
    }
}; CACHED];

#[inline]
fn cache_slot(ctx: usize, lkey: u32) -> &'static Cached {
    let key = lkey as u64 ^ (ctx as u64).rotate_left(32);
    &CACHE[crate::addr_table::hash(key, CACHED.trailing_zeros())]
}

/// Does an SGE of `length` bytes at `addr`, posted on `ctx` to a queue on
/// `pd`, pass against the cached facts of the live MR `lkey` names (in
/// this generation of the index): the MR on that PD, the range inside it,
/// local write allowed if `write`? False: not cached, or it does not pass
/// (the full check says which).
#[inline(always)]
pub(super) fn passes(
    ctx: usize,
    lkey: u32,
    pd: usize,
    addr: u64,
    length: u32,
    write: bool,
) -> bool {
    let generation = GENERATION.load(Ordering::Acquire);
    let c = cache_slot(ctx, lkey);
    let seq = c.seq.load(Ordering::Acquire);
    if seq & 1 != 0
        || c.lkey.load(Ordering::Relaxed) != lkey
        || c.ctx.load(Ordering::Relaxed) != ctx as u64
        || c.generation.load(Ordering::Relaxed) != generation
        || c.pd.load(Ordering::Relaxed) != pd as u64
    {
        return false;
    }
    let flags = c.flags.load(Ordering::Relaxed);
    let f = Facts {
        pd,
        start: c.start.load(Ordering::Relaxed),
        len: c.len.load(Ordering::Relaxed),
        ranged: flags & 1 != 0,
        writable: flags & 2 != 0,
    };
    let ok = f.covers(addr, length) && (f.writable || !write);
    // Whatever was read above counts only if no writer came in between.
    fence(Ordering::Acquire);
    ok && c.seq.load(Ordering::Relaxed) == seq
}

/// Caches `mr`, found live for `lkey` on `ctx` in `generation` (a slot
/// another thread is filling is left to it).
fn cache(generation: u64, ctx: usize, lkey: u32, mr: &Obj) {
    let c = cache_slot(ctx, lkey);
    let seq = c.seq.load(Ordering::Relaxed);
    if seq & 1 != 0
        || c.seq
            .compare_exchange(
                seq,
                seq.wrapping_add(1),
                Ordering::Acquire,
                Ordering::Relaxed,
            )
            .is_err()
    {
        return;
    }
    fence(Ordering::Release);
    let f = Facts::of(mr);
    c.lkey.store(lkey, Ordering::Relaxed);
    c.ctx.store(ctx as u64, Ordering::Relaxed);
    c.generation.store(generation, Ordering::Relaxed);
    c.pd.store(f.pd as u64, Ordering::Relaxed);
    c.start.store(f.start, Ordering::Relaxed);
    c.len.store(f.len, Ordering::Relaxed);
    c.flags.store(
        f.ranged as u32 | (f.writable as u32) << 1,
        Ordering::Relaxed,
    );
    c.seq.store(seq.wrapping_add(2), Ordering::Release);
}

/// What an lkey names, for an SGE posted on context `ctx`.
pub(super) enum Key {
    /// A live MR of this context.
    Mr(Obj),
    /// A live MR, of another context only.
    OtherContext(Obj),
    /// No live MR; the MR at this address had it and was deregistered.
    Gone(usize),
    /// No MR the shim saw registered.
    Unknown,
}

/// Is `o` a live MR (or imported MR) with `lkey`?
fn names(o: &Obj, lkey: u32) -> bool {
    o.facts.mr_range().is_some_and(|(_, _, k)| k.lkey == lkey) && !o.is_zombie()
}

/// Looks `lkey` up in the index; `None` when the index has no live MR for it.
fn probe(ctx: usize, lkey: u32) -> (Option<Key>, usize) {
    let mut cands = [0usize; 4];
    let (n, gone) = {
        let g = INDEX.lock();
        let Some(ix) = g.as_ref() else {
            return (None, 0);
        };
        let list = ix.live.get(&lkey).map(Vec::as_slice).unwrap_or(&[]);
        let n = list.len().min(cands.len());
        cands[..n].copy_from_slice(&list[..n]);
        (n, ix.gone.get(&lkey).copied().unwrap_or(0))
    };
    let mut other = None;
    for &addr in &cands[..n] {
        match objects::get(addr) {
            Some(o) if names(&o, lkey) && o.ctx == ctx => return (Some(Key::Mr(o)), gone),
            Some(o) if names(&o, lkey) => other = Some(o),
            _ => {}
        }
    }
    (other.map(Key::OtherContext), gone)
}

/// Rebuilds the index from the registry (inherited MRs included: a
/// `fork()` child may post on its parent's); MRs no longer there move to
/// `gone`.
fn rebuild() {
    let mut live: HashMap<u32, Vec<usize>> = HashMap::new();
    for o in objects::collect(|o| matches!(o.kind(), Kind::Mr | Kind::ImportedMr) && !o.is_zombie())
    {
        if let Some((_, _, keys)) = o.facts.mr_range() {
            live.entry(keys.lkey).or_default().push(o.addr);
        }
    }
    let mut g = INDEX.lock();
    let old = g.take();
    let mut gone = HashMap::new();
    if let Some(old) = old {
        gone = old.gone;
        for (lkey, addrs) in old.live {
            for a in addrs {
                if !live.get(&lkey).is_some_and(|l| l.contains(&a)) {
                    gone.insert(lkey, a);
                }
            }
        }
    }
    for k in live.keys() {
        gone.remove(k);
    }
    *g = Some(Index { live, gone });
    GENERATION.fetch_add(1, Ordering::Release);
}

/// What `lkey` names for an SGE posted on `ctx`.
pub(super) fn lookup(ctx: usize, lkey: u32) -> Key {
    let generation = GENERATION.load(Ordering::Acquire);
    let (hit, _) = probe(ctx, lkey);
    if let Some(Key::Mr(o)) = hit {
        cache(generation, ctx, lkey, &o);
        return Key::Mr(o);
    }
    // A miss: a new MR since the last rebuild, or a bad key.
    rebuild();
    match probe(ctx, lkey) {
        (Some(k), _) => k,
        (None, 0) => Key::Unknown,
        (None, gone) => Key::Gone(gone),
    }
}

/// An MR was deregistered: its lkey names it as gone until a new MR takes
/// the key.
pub(super) fn deregistered(mr: &Obj) {
    let mut g = INDEX.lock();
    let ix = g.get_or_insert_with(|| Index {
        live: HashMap::new(),
        gone: HashMap::new(),
    });
    let Some((_, _, Keys { lkey, .. })) = mr.facts.mr_range() else {
        return;
    };
    if let Some(l) = ix.live.get_mut(&lkey) {
        l.retain(|&a| a != mr.addr);
    }
    ix.gone.insert(lkey, mr.addr);
    GENERATION.fetch_add(1, Ordering::Release);
}

/// An MR was re-registered (`ibv_rereg_mr`: its PD, range, access or
/// keys may have changed): every cached fact is stale. The index itself
/// needs nothing: its lookups compare the registry's current lkey.
pub(super) fn reregistered() {
    GENERATION.fetch_add(1, Ordering::Release);
}

/// `fork()`: this module's lock, held across the fork (`interpose::fork`);
/// in the child, a cache slot a thread of the parent was filling is
/// released (emptied).
pub(super) fn fork(step: crate::registry::lock::ForkStep) {
    step.apply(&INDEX);
    if matches!(step, crate::registry::lock::ForkStep::Child) {
        for c in &CACHE {
            let seq = c.seq.load(Ordering::Relaxed);
            if seq & 1 != 0 {
                c.generation.store(0, Ordering::Relaxed);
                c.seq.store(seq.wrapping_add(1), Ordering::Relaxed);
            }
        }
    }
}
