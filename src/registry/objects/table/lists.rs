//! A shard's per-context lists: each context's records linked through
//! the records themselves (16-bit links), the last used context's head
//! kept apart (`hot`), the others' in a small hash map.

use std::collections::HashMap;
use std::hash::{BuildHasherDefault, Hasher};

use super::{Table, NIL, UNLISTED};
use crate::registry::objects::chunk::{no_memory, out_of_memory};

/// The hash of a context address, for the per-shard list heads.
#[derive(Default)]
pub(super) struct AddrHasher(u64);

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

pub(super) type Heads = HashMap<usize, u16, BuildHasherDefault<AddrHasher>>;

impl Table {
    /// The first record of `ctx`'s list in this shard (NIL: none).
    #[inline]
    pub(super) fn head_of(&self, ctx: usize) -> u16 {
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
    pub(super) fn reserve_head(&mut self, ctx: usize) -> Result<(), ()> {
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
    pub(super) fn make_hot(&mut self, ctx: usize) {
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
    ///
    /// # Safety
    ///
    /// `i` is a record of the table, as for [`Table::rec`].
    pub(in crate::registry::objects) unsafe fn unlist(&mut self, i: u32) -> bool {
        // SAFETY: `i` is a record of the table (the caller's contract).
        let emptied = unsafe { self.unlink(i) };
        // SAFETY: as above.
        unsafe { self.rec_mut(i) }.set_prev(UNLISTED);
        emptied
    }

    /// [`Table::unlist`] without the mark, for a record about to be freed.
    ///
    /// # Safety
    ///
    /// `i` is a record of the table, as for [`Table::rec`].
    #[inline(always)]
    pub(super) unsafe fn unlink(&mut self, i: u32) -> bool {
        // SAFETY: the caller's contract.
        let r = unsafe { self.rec(i) };
        let (prev, next) = (r.prev(), r.next());
        if prev == UNLISTED {
            return false;
        }
        if next != NIL {
            // SAFETY: a list link.
            unsafe { self.rec_mut(next as u32) }.set_prev(prev);
        }
        if prev != NIL {
            // SAFETY: a list link.
            unsafe { self.rec_mut(prev as u32) }.set_next(next);
        } else if self.hot_head == i as u16 {
            // The head of the hot list: no context to decode.
            self.hot_head = next;
        } else {
            // SAFETY: the caller's contract.
            let ctx = unsafe { self.rec(i) }.ctx();
            self.unlink_cold_head(ctx, next);
        }
        prev == NIL && next == NIL
    }

    /// The head of a list other than the hot one moves to `next`.
    #[cold]
    #[inline(never)]
    pub(super) fn unlink_cold_head(&mut self, ctx: usize, next: u16) {
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
    pub(in crate::registry::objects) fn list_of(&self, ctx: usize) -> Vec<u32> {
        let mut out = Vec::new();
        let mut i = self.head_of(ctx);
        while i != NIL {
            if out.try_reserve(1).is_err() {
                out_of_memory();
                break;
            }
            out.push(i as u32);
            // SAFETY: a list head or link.
            i = unsafe { self.rec(i as u32) }.next();
        }
        out
    }

    /// The contexts with a list in this shard.
    pub(in crate::registry::objects) fn list_contexts(&self) -> impl Iterator<Item = usize> + '_ {
        let hot = (self.hot != 0 && self.hot_head != NIL).then_some(self.hot);
        hot.into_iter()
            .chain(self.heads.iter().flat_map(|h| h.keys().copied()))
    }
}
