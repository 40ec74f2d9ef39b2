//! The lkey index of the data-path checks: which tracked MR an SGE's lkey
//! names. The registry is keyed by address; this maps lkeys to MR
//! addresses and confirms each hit against the registry (so a
//! deregistered MR is never taken for live). Rebuilt from the registry on
//! a miss (a new MR, or a key that names none: the latter costs a scan of
//! the registry, paid only by a program that posts bad keys). Touched only
//! with `IBV_SHIM_CHECK=datapath`.

use std::cell::Cell;
use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};

use crate::registry::lock::{mutex, Mutex};
use crate::registry::objects::{self, Kind, Obj};

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

thread_local! {
    /// This thread's last answer (generation, context, lkey, MR): a post
    /// loop's next SGE with the same lkey costs no lock.
    static LAST: Cell<Option<(u64, usize, u32, Obj)>> = const { Cell::new(None) };
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
    matches!(o.kind(), Kind::Mr | Kind::ImportedMr) && o.c as u32 == lkey && !o.is_zombie()
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
        live.entry(o.c as u32).or_default().push(o.addr);
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
    if let Some((g, c, k, o)) = LAST.get() {
        if (g, c, k) == (generation, ctx, lkey) {
            return Key::Mr(o);
        }
    }
    let (hit, _) = probe(ctx, lkey);
    if let Some(Key::Mr(o)) = hit {
        LAST.set(Some((generation, ctx, lkey, o)));
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
    let lkey = mr.c as u32;
    if let Some(l) = ix.live.get_mut(&lkey) {
        l.retain(|&a| a != mr.addr);
    }
    ix.gone.insert(lkey, mr.addr);
    GENERATION.fetch_add(1, Ordering::Release);
}

/// `fork()`: this module's lock, held across the fork (`interpose::fork`).
pub(super) fn fork(step: crate::registry::lock::ForkStep) {
    step.apply(&INDEX);
}
