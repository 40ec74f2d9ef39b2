//! The exact comparison on ibv-sim: the sim, which executes each send
//! itself, keeps the bytes it read (`IBVSIM_1.0`'s `ibv_sim_keep_sent`,
//! `ibv_sim_sent`); where a long source's fingerprints differ at its
//! completion, those bytes give the exact count. Real libibverbs has no
//! such names: on hardware nothing here is found and nothing changes.
//!
//! The kept bytes are trusted only when they fingerprint as the source
//! did at the post (`evidence`): a record of another post of the same
//! wr_id and buffer is passed over, and none left falls back to blocks.

use std::ffi::{c_int, c_void, CStr};
use std::sync::atomic::{AtomicU8, AtomicUsize, Ordering};

use verbs_abi::{ibv_qp, ibv_sge};

use super::evidence::{count, evidence, Diff};
use super::ring;

type KeepSent = unsafe extern "C" fn(c_int) -> c_int;
type Sent = unsafe extern "C" fn(*mut ibv_qp, u64, u64, u64, *mut c_void, usize) -> c_int;

const UNKNOWN: u8 = 0;
const ABSENT: u8 = 1;
const KEEPING: u8 = 2;

static STATE: AtomicU8 = AtomicU8::new(UNKNOWN);
static SENT: AtomicUsize = AtomicUsize::new(0);

/// Records of other posts of the same request passed over at most.
const TRIES: usize = 64;

fn lookup(h: *mut c_void, name: &CStr) -> usize {
    // SAFETY: a live handle (never closed) and NUL-terminated strings.
    unsafe { libc::dlvsym(h, name.as_ptr(), c"IBVSIM_1.0".as_ptr()) as usize }
}

/// Asks the library forwarded to (if it is ibv-sim) to keep what sends
/// read; once per process, at the first tracked queue (before its first
/// post is forwarded).
pub(super) fn start() {
    if STATE.load(Ordering::Acquire) != UNKNOWN {
        return;
    }
    let saved = crate::errno::Errno::save();
    let mut state = ABSENT;
    if let Some(h) = crate::real::handle() {
        let (keep, sent) = (lookup(h, c"ibv_sim_keep_sent"), lookup(h, c"ibv_sim_sent"));
        if keep != 0 && sent != 0 {
            // SAFETY: `ibv_sim_keep_sent`'s C signature is `KeepSent`.
            let keep: KeepSent = unsafe { std::mem::transmute::<usize, KeepSent>(keep) };
            // SAFETY: takes an int, no pointers.
            if unsafe { keep(1) } == 1 {
                SENT.store(sent, Ordering::Release);
                state = KEEPING;
            }
        }
    }
    STATE.store(state, Ordering::Release);
    saved.restore();
}

/// How the `s.length` bytes of `s`, at `offset` in the source of the send
/// `wr_id` on `qp` whose first SGE is at `first`, differ from what the
/// sim read when it executed it; `None` when the sim kept no record of it
/// that fingerprints as `kept` did at the post.
///
/// # Safety
/// The bytes of `s` are readable (inside a live MR's range).
pub(super) unsafe fn exact(
    qp: *mut ibv_qp,
    wr_id: u64,
    first: u64,
    offset: u64,
    s: &ibv_sge,
    kept: &ring::Evidence,
) -> Option<Diff> {
    let f = SENT.load(Ordering::Acquire);
    if f == 0 {
        return None;
    }
    // SAFETY: only an `ibv_sim_sent` address is stored, of C signature `Sent`.
    let sent: Sent = unsafe { std::mem::transmute::<usize, Sent>(f) };
    let len = s.length as usize;
    let mut was = Vec::new();
    crate::oom::fallibly(|| was.try_reserve_exact(len))?;
    was.resize(len, 0);
    let saved = crate::errno::Errno::save();
    let mut trusted = false;
    for _ in 0..TRIES {
        // SAFETY: `was` holds `len` writable bytes; the sim checks `qp`.
        let rc = unsafe { sent(qp, wr_id, first, offset, was.as_mut_ptr().cast(), len) };
        // SAFETY: our own buffer of `s.length` bytes.
        if rc != 0 || unsafe { evidence(was.as_ptr() as u64, s.length) } == *kept {
            trusted = rc == 0;
            break;
        }
    }
    saved.restore();
    if !trusted {
        return None;
    }
    // SAFETY: the caller's contract.
    let now = unsafe { std::slice::from_raw_parts(s.addr as *const u8, len) };
    let (n, first) = count(now, &was)?;
    Some(Diff::Executed { n, first })
}
