//! The queue sizes the provider granted (`max_send_sge`, `max_recv_sge`,
//! `max_inline_data`, `max_send_wr`, `max_recv_wr`; an SRQ's `max_sge` and
//! `max_wr`), for the data-path checks and the trace's post events (a
//! chain is walked no further than its queue holds). Asked
//! once per queue with the real `ibv_query_qp` / `ibv_query_srq` at its
//! first checked post (whatever verb made it: `ibv_create_qp`, the table's
//! `create_qp_ex`, a provider's direct verb), then kept in a side record
//! found by the queue's address, and dropped when the queue is destroyed
//! ([`forget`]): a queue made later at the same address is asked again.
//!
//! The records live in a fixed, zeroed, open-addressed table: a post finds
//! its queue's caps with a hash and a load or two, without a lock or an
//! allocation (a lock here cost ~90 ns per post). No lock is held across
//! the query. A queue whose probe window is full is asked at each post
//! (correct, slower).

use std::ffi::c_int;
use std::mem::MaybeUninit;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};

use verbs_abi::{ibv_qp, ibv_qp_attr, ibv_qp_attr_mask, ibv_qp_init_attr, ibv_srq, ibv_srq_attr};

use crate::addr_table::{AddrTable, Keyed};
use crate::log::Level;
use crate::real::slots::{QueryQp, QuerySrq};

/// What a queue takes per work request, and how many it holds.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) struct Caps {
    pub send_sge: u32,
    /// A QP's receive queue, or an SRQ.
    pub recv_sge: u32,
    pub inline: u32,
    /// Work requests the send queue holds.
    pub send_wr: u32,
    /// Work requests the receive queue (or the SRQ) holds.
    pub recv_wr: u32,
}

impl Caps {
    /// What is kept: the caps in full (two words), and the clean post's
    /// word of them.
    fn words(self) -> [u64; 3] {
        let sat16 = |v: u32| v.min(0xffff) as u64;
        [
            self.fast().0,
            // SGE counts saturated at 16 bits (a queue granting more than
            // 65,535 SGEs does not exist), inline bytes in full.
            sat16(self.send_sge) | sat16(self.recv_sge) << 16 | (self.inline as u64) << 32,
            self.send_wr as u64 | (self.recv_wr as u64) << 32,
        ]
    }

    /// The clean post's word: each field saturated at its width (8 bits
    /// per SGE count, 16 for the inline bytes and each depth). A
    /// saturated field is a bound below the real one: the clean post
    /// hands a request above it to the full checks, which read the caps
    /// in full.
    fn fast(self) -> Packed {
        let sat = |v: u32, bits: u32| v.min((1 << bits) - 1) as u64;
        Packed(
            sat(self.send_sge, 8)
                | sat(self.recv_sge, 8) << 8
                | sat(self.inline, 16) << 16
                | sat(self.send_wr, 16) << 32
                | sat(self.recv_wr, 16) << 48,
        )
    }

    fn from_words(w0: u64, w1: u64) -> Caps {
        Caps {
            send_sge: (w0 & 0xffff) as u32,
            recv_sge: (w0 >> 16 & 0xffff) as u32,
            inline: (w0 >> 32) as u32,
            send_wr: w1 as u32,
            recv_wr: (w1 >> 32) as u32,
        }
    }
}

/// One queue's side record (32 bytes).
struct Side {
    /// The queue's address ([`AddrTable`]'s key).
    key: AtomicUsize,
    /// [`Caps::words`].
    words: [AtomicU64; 3],
}

impl Keyed for Side {
    fn key(&self) -> &AtomicUsize {
        &self.key
    }
}

/// Slots (a power of two) and the longest probe: 32 bytes each, zeroed
/// static memory (pages never touched cost nothing).
const SLOTS: usize = 1 << 14;
const PROBE: usize = 32;

static SIDES: AddrTable<Side, SLOTS, PROBE> = AddrTable::new(
    [const {
        Side {
            key: AtomicUsize::new(0),
            words: [const { AtomicU64::new(0) }; 3],
        }
    }; SLOTS],
);

static FULL_WARNED: AtomicBool = AtomicBool::new(false);

/// The caps kept for the queue at `addr`.
#[inline]
fn known(addr: usize) -> Option<Caps> {
    SIDES.find(addr).map(Side::caps)
}

/// The clean post's word of [`known`] (it reads the fields it needs from
/// one register: unpacked, the fields were spilled).
#[inline]
pub(super) fn known_packed(addr: usize) -> Option<Packed> {
    SIDES
        .find(addr)
        .map(|s| Packed(s.words[0].load(Ordering::Relaxed)))
}

impl Side {
    fn caps(&self) -> Caps {
        Caps::from_words(
            self.words[1].load(Ordering::Relaxed),
            self.words[2].load(Ordering::Relaxed),
        )
    }
}

/// [`Caps::fast`]: one word, each field saturated.
#[derive(Clone, Copy)]
pub(super) struct Packed(u64);

impl Packed {
    #[inline(always)]
    pub(super) fn send_sge(self) -> u32 {
        (self.0 & 0xff) as u32
    }
    #[inline(always)]
    pub(super) fn recv_sge(self) -> u32 {
        (self.0 >> 8 & 0xff) as u32
    }
    #[inline(always)]
    pub(super) fn inline(self) -> u32 {
        (self.0 >> 16 & 0xffff) as u32
    }
    #[inline(always)]
    pub(super) fn send_wr(self) -> u32 {
        (self.0 >> 32 & 0xffff) as u32
    }
    #[inline(always)]
    pub(super) fn recv_wr(self) -> u32 {
        (self.0 >> 48) as u32
    }
}

/// Keeps `c` for the queue at `addr` (unless another thread just did).
fn keep(addr: usize, c: Caps) -> Caps {
    match SIDES.claim(addr) {
        // Claimed pending, published by the release store of the address:
        // a reader that finds the address sees these caps.
        Some((s, true)) => {
            for (w, v) in s.words.iter().zip(c.words()) {
                w.store(v, Ordering::Relaxed);
            }
            SIDES.publish(s, addr);
        }
        Some((_, false)) => {}
        None => {
            if !FULL_WARNED.swap(true, Ordering::Relaxed) {
                crate::log!(
                    Level::Debug,
                    "data-path checks: queue {addr:#x}: no room to keep its caps; asked at each post"
                );
            }
        }
    }
    c
}

/// The queue at `addr` was destroyed: its caps are dropped, so that a
/// queue made at the same address is asked for its own.
pub(super) fn forget(addr: usize) {
    SIDES.release(addr);
}

/// A zeroed C attribute struct for the query to fill.
fn zeroed<T>() -> T {
    // SAFETY: only used for plain C structs of integers and pointers, for
    // which all-zero bytes are a valid value.
    unsafe { MaybeUninit::<T>::zeroed().assume_init() }
}

/// The QP's caps, or None when the query fails (nothing is then checked).
///
/// # Safety
/// `qp` is a live QP.
#[inline]
pub(super) unsafe fn of_qp(qp: *mut ibv_qp) -> Option<Caps> {
    // SAFETY: a live QP the program posts to.
    known(qp as usize).or_else(|| unsafe { ask_qp(qp) })
}

///
/// # Safety
/// `qp` is a live QP.
#[cold]
#[inline(never)]
unsafe fn ask_qp(qp: *mut ibv_qp) -> Option<Caps> {
    let real = QueryQp::unhooked().ok()?;
    let (mut attr, mut init) = (zeroed::<ibv_qp_attr>(), zeroed::<ibv_qp_init_attr>());
    let mask = ibv_qp_attr_mask::IBV_QP_CAP as c_int;
    // SAFETY: a live QP the program posts to, and our own buffers.
    if unsafe { real.call(qp, &mut attr, mask, &mut init) } != 0 {
        return None;
    }
    let cap = init.cap;
    Some(keep(
        qp as usize,
        Caps {
            send_sge: cap.max_send_sge,
            recv_sge: cap.max_recv_sge,
            inline: cap.max_inline_data,
            send_wr: cap.max_send_wr,
            recv_wr: cap.max_recv_wr,
        },
    ))
}

/// The SRQ's caps (`max_sge` as `recv_sge`), or None when the query fails.
///
/// # Safety
/// `srq` is a live SRQ.
#[inline]
pub(super) unsafe fn of_srq(srq: *mut ibv_srq) -> Option<Caps> {
    // SAFETY: a live SRQ the program posts to.
    known(srq as usize).or_else(|| unsafe { ask_srq(srq) })
}

///
/// # Safety
/// `srq` is a live SRQ.
#[cold]
#[inline(never)]
unsafe fn ask_srq(srq: *mut ibv_srq) -> Option<Caps> {
    let real = QuerySrq::unhooked().ok()?;
    let mut attr = zeroed::<ibv_srq_attr>();
    // SAFETY: a live SRQ the program posts to, and our own buffer.
    if unsafe { real.call(srq, &mut attr) } != 0 {
        return None;
    }
    Some(keep(
        srq as usize,
        Caps {
            send_sge: 0,
            recv_sge: attr.max_sge,
            inline: 0,
            send_wr: 0,
            recv_wr: attr.max_wr,
        },
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kept_found_forgotten_and_kept_anew() {
        let c = |n| Caps {
            send_sge: n,
            recv_sge: n + 1,
            inline: 1 << 20,
            send_wr: n + 2,
            recv_wr: n + 3,
        };
        let addr = 0x7f00_dead_b000;
        assert_eq!(known(addr), None);
        keep(addr, c(2));
        assert_eq!(known(addr), Some(c(2)));
        forget(addr);
        assert_eq!(known(addr), None);
        keep(addr, c(4));
        assert_eq!(known(addr), Some(c(4)));
        // Addresses with the same home share its window: each finds its
        // own; past the window's room they are not kept (asked each time).
        let others: Vec<usize> = (1..)
            .map(|j| addr + j * 64)
            .filter(|&a| SIDES.home_of(a) == SIDES.home_of(addr))
            .take(PROBE + 8)
            .collect();
        for (i, &a) in others.iter().enumerate() {
            keep(a, c(i as u32));
        }
        assert_eq!(known(addr), Some(c(4)));
        assert_eq!(known(others[0]), Some(c(0)));
        assert_eq!(known(others[PROBE - 2]), Some(c(PROBE as u32 - 2)));
        assert_eq!(known(others[PROBE + 7]), None);
        forget(addr);
        assert_eq!(known(addr), None);
        // Its slot is free again, for the next queue of the window.
        keep(others[PROBE + 7], c(9));
        assert_eq!(known(others[PROBE + 7]), Some(c(9)));
        // Kept in full; the clean post's word saturated.
        let big = 0x7f00_0bad_c000;
        assert_ne!(SIDES.home_of(big), SIDES.home_of(addr));
        keep(big, c(70_000));
        let kept = known(big).unwrap();
        assert_eq!((kept.send_sge, kept.recv_wr), (0xffff, 70_003));
        let fast = known_packed(big).unwrap();
        assert_eq!(
            (fast.send_sge(), fast.recv_sge(), fast.inline()),
            (0xff, 0xff, 0xffff)
        );
        assert_eq!((fast.send_wr(), fast.recv_wr()), (0xffff, 0xffff));
        let small = c(3).fast();
        assert_eq!(
            (small.send_sge(), small.recv_sge(), small.inline()),
            (3, 4, 0xffff)
        );
        assert_eq!((small.send_wr(), small.recv_wr()), (5, 6));
    }
}
