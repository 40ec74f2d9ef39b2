//! The bytes each send read from the program's memory when the sim
//! executed it, kept for a checker in the process (the shim's `inflight`
//! check) that asks, at the send's completion, how the program's source
//! now differs from what went out. Hardware leaves such a checker a
//! fingerprint of the bytes at the post; the sim, which does the read
//! itself, can give the bytes.
//!
//! Off until `ibv_sim_keep_sent(1)`, and `IBV_SIM_WITNESS=off` refuses
//! that. While on, every source is read when the request is posted (the
//! read in place of a later fabric send becomes a gathered copy), so the
//! kept bytes are those at the post and those that went out.
//!
//! Bounded: a QP keeps the sources of its last `2 * max_send_wr` sends
//! (one still outstanding is among its last `max_send_wr`), the process
//! at most `CAP` bytes in all (past it a send is not kept). A QP's
//! records go at RESET and with the QP.

use core::ffi::c_int;
use std::collections::VecDeque;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};

use parking_lot::Mutex;
use verbs_abi::ibv_sge;

/// The most bytes kept across the process.
const CAP: usize = 256 << 20;

static KEEPING: AtomicBool = AtomicBool::new(false);
static BYTES: AtomicUsize = AtomicUsize::new(0);

/// Whether sources are being kept (`ibv_sim_keep_sent`).
#[inline]
pub fn keeping() -> bool {
    KEEPING.load(Ordering::Relaxed)
}

/// Starts (or stops) keeping; whether it is on now. `IBV_SIM_WITNESS=off`
/// keeps it off (so a fingerprinting checker can be measured on the sim).
pub fn keep_sent(on: bool) -> bool {
    let allowed = std::env::var_os("IBV_SIM_WITNESS").is_none_or(|v| v != "off");
    let on = on && allowed;
    KEEPING.store(on, Ordering::Relaxed);
    on
}

struct Record {
    wr_id: u64,
    /// The address of the request's first SGE: with `wr_id`, what a
    /// checker names the request by.
    addr: u64,
    bytes: Box<[u8]>,
}

/// One QP's kept sources, oldest first.
#[derive(Default)]
pub struct Sent {
    q: Mutex<VecDeque<Record>>,
}

impl Sent {
    /// Keeps `bytes`, what the send `wr_id` over `sges` read, on a QP
    /// whose send queue has `depth` entries.
    pub fn keep(&self, depth: u32, wr_id: u64, sges: &[ibv_sge], bytes: &[u8]) {
        let Some(first) = sges.first() else {
            return;
        };
        if bytes.is_empty() {
            return;
        }
        let mut q = self.q.lock();
        let most = (2 * depth.max(1)) as usize;
        while q.len() >= most {
            if let Some(old) = q.pop_front() {
                BYTES.fetch_sub(old.bytes.len(), Ordering::Relaxed);
            }
        }
        if BYTES.fetch_add(bytes.len(), Ordering::Relaxed) + bytes.len() > CAP {
            BYTES.fetch_sub(bytes.len(), Ordering::Relaxed);
            return;
        }
        q.push_back(Record {
            wr_id,
            addr: first.addr,
            bytes: bytes.into(),
        });
    }

    /// Takes the oldest kept send named `wr_id` and `addr` (every older
    /// one goes too: its completion came before) and copies its bytes at
    /// `offset` into `out`. `ENOENT`: none kept; `ERANGE`: it read fewer.
    pub fn take(&self, wr_id: u64, addr: u64, offset: u64, out: &mut [u8]) -> Result<(), c_int> {
        let mut q = self.q.lock();
        let at = q
            .iter()
            .position(|r| r.wr_id == wr_id && r.addr == addr)
            .ok_or(libc::ENOENT)?;
        let mut gone = 0;
        let mut found = None;
        for r in q.drain(..=at) {
            gone += r.bytes.len();
            found = Some(r);
        }
        BYTES.fetch_sub(gone, Ordering::Relaxed);
        let r = found.ok_or(libc::ENOENT)?;
        let from = usize::try_from(offset).map_err(|_| libc::ERANGE)?;
        let src = from
            .checked_add(out.len())
            .and_then(|end| r.bytes.get(from..end))
            .ok_or(libc::ERANGE)?;
        out.copy_from_slice(src);
        Ok(())
    }

    /// Forgets every kept send (RESET).
    pub fn clear(&self) {
        let mut q = self.q.lock();
        let gone: usize = q.iter().map(|r| r.bytes.len()).sum();
        q.clear();
        BYTES.fetch_sub(gone, Ordering::Relaxed);
    }
}

impl Drop for Sent {
    fn drop(&mut self) {
        self.clear();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sge(addr: u64, length: u32) -> ibv_sge {
        ibv_sge {
            addr,
            length,
            lkey: 1,
        }
    }

    #[test]
    fn the_oldest_match_is_taken_with_everything_before_it() {
        let s = Sent::default();
        s.keep(4, 1, &[sge(0x1000, 4)], b"aaaa");
        s.keep(4, 2, &[sge(0x2000, 4)], b"bbbb");
        s.keep(4, 1, &[sge(0x1000, 4)], b"cccc");
        let mut out = [0u8; 2];
        assert_eq!(s.take(2, 0x2000, 1, &mut out), Ok(()));
        assert_eq!(&out, b"bb");
        // The first (wr 1) went with it: the next wr 1 is the third.
        assert_eq!(s.take(1, 0x1000, 0, &mut out), Ok(()));
        assert_eq!(&out, b"cc");
        assert_eq!(s.take(1, 0x1000, 0, &mut out), Err(libc::ENOENT));
    }

    #[test]
    fn a_queue_keeps_twice_its_depth_and_a_short_read_is_erange() {
        let s = Sent::default();
        for i in 0..10u64 {
            s.keep(2, i, &[sge(0x1000, 1)], &[i as u8]);
        }
        let mut out = [0u8; 1];
        assert_eq!(s.take(5, 0x1000, 0, &mut out), Err(libc::ENOENT));
        assert_eq!(s.take(6, 0x1000, 0, &mut out), Ok(()));
        assert_eq!(out, [6]);
        let mut two = [0u8; 2];
        assert_eq!(s.take(7, 0x1000, 0, &mut two), Err(libc::ERANGE));
        // Unnamed or empty sends are not kept.
        s.keep(2, 9, &[], b"x");
        s.keep(2, 9, &[sge(0x1000, 0)], b"");
        assert_eq!(s.take(9, 0x1000, 0, &mut out), Ok(()));
        assert_eq!(out, [9]);
        assert_eq!(s.take(9, 0x1000, 0, &mut out), Err(libc::ENOENT));
    }
}
