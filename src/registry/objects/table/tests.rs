//! The shard table against a model, its lists, and its limits (memory,
//! slab size, a full shard).

use std::collections::HashMap;

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
            // SAFETY: from `list_of`.
            let addr = unsafe { t.rec(i) }.addr();
            let pos = t.find(addr).expect("a listed record is in the index");
            assert_eq!(slot_idx(t.slots[pos]), i);
            // SAFETY: from `list_of`.
            assert_eq!(unsafe { t.rec(i) }.ctx(), c);
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
