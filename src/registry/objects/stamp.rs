//! A record's creation time, as cheap to take as the hardware allows.
//!
//! Where the TSC is invariant and the kernel's clocksource (so it runs with
//! CLOCK_MONOTONIC and agrees across CPUs), a stamp is `rdtsc >> 22`: one
//! instruction and a shift instead of a `clock_gettime` call and a division
//! per create; 2^22 ticks is about 1 ms, and 39 bits of it 2^61 ticks (18
//! years at 4 GHz). Elsewhere a stamp is CLOCK_MONOTONIC_COARSE ms (as
//! [`now_ms`](super::now_ms)). The choice is made once, at the first stamp,
//! and never changes, so every stamp of a process is in one unit.
//!
//! Reports convert a stamp with [`to_ms`]: a tick stamp goes to
//! CLOCK_MONOTONIC ms through two (TSC, ns) pairs, the one read at the
//! choice and one read at or after the stamp, so the conversion interpolates
//! and its error is the pairs' own (well under a ms), however the rate
//! drifts from its nominal value.

use std::sync::atomic::{AtomicU64, AtomicU8, Ordering};

const UNDECIDED: u8 = 0;
const COARSE: u8 = 1;
const TICKS: u8 = 2;
static MODE: AtomicU8 = AtomicU8::new(UNDECIDED);

/// A tick stamp's unit: 2^SHIFT TSC ticks.
const SHIFT: u32 = 22;
const LOW39: u64 = (1 << 39) - 1;

/// The (TSC, ns) pair read at the choice, and the latest one.
static T0: AtomicU64 = AtomicU64::new(0);
static M0: AtomicU64 = AtomicU64::new(0);
static T1: AtomicU64 = AtomicU64::new(0);
static M1: AtomicU64 = AtomicU64::new(0);

/// The creation stamp for a record made now (its low 39 bits are kept).
#[inline(always)]
pub fn now() -> u64 {
    if MODE.load(Ordering::Relaxed) == TICKS {
        return crate::clock::rdtsc() >> SHIFT;
    }
    slow()
}

#[cold]
#[inline(never)]
fn slow() -> u64 {
    if decide() == TICKS {
        crate::clock::rdtsc() >> SHIFT
    } else {
        super::now_ms()
    }
}

/// Picks the unit once. Threads racing here all pick the same one (the
/// test is deterministic); the pair each stores is as good as another's.
/// Leaves errno as it was (reads a sysfs file).
fn decide() -> u8 {
    let mode = MODE.load(Ordering::Acquire);
    if mode != UNDECIDED {
        return mode;
    }
    let errno = crate::guard::Errno::save();
    let mode = if crate::clock::invariant_tsc() {
        let (t, m) = crate::clock::pair();
        T0.store(t, Ordering::Relaxed);
        M0.store(m, Ordering::Relaxed);
        T1.store(t, Ordering::Relaxed);
        M1.store(m, Ordering::Relaxed);
        TICKS
    } else {
        COARSE
    };
    MODE.store(mode, Ordering::Release);
    errno.restore();
    mode
}

/// A stamp as CLOCK_MONOTONIC milliseconds (for a coarse stamp, itself).
/// Reads a fresh pair when the stamp is newer than the latest one, so at
/// most once per report for the objects it lists.
pub fn to_ms(stamp: u64) -> u64 {
    if MODE.load(Ordering::Acquire) != TICKS {
        return stamp;
    }
    // The middle of the stamp's span of ticks.
    let ticks = (stamp & LOW39) << SHIFT | 1 << (SHIFT - 1);
    if ticks > T1.load(Ordering::Relaxed) {
        let (t, m) = crate::clock::pair();
        if t > T1.load(Ordering::Relaxed) {
            T1.store(t, Ordering::Relaxed);
            M1.store(m, Ordering::Relaxed);
        }
    }
    let (t0, m0) = (T0.load(Ordering::Relaxed), M0.load(Ordering::Relaxed));
    let (t1, m1) = (T1.load(Ordering::Relaxed), M1.load(Ordering::Relaxed));
    // Nominal 1 GHz until the pairs are far enough apart to measure it.
    let rate = if t1 > t0 && m1 > m0 {
        (m1 - m0) as f64 / (t1 - t0) as f64
    } else {
        1.0
    };
    let ns = m0 as f64 + (ticks as f64 - t0 as f64) * rate;
    (ns.max(0.0) / 1e6) as u64
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_stamp_converts_to_the_monotonic_ms_it_was_taken_at() {
        let before = crate::clock::monotonic_ns() / 1_000_000;
        let s = now();
        let after = crate::clock::monotonic_ns() / 1_000_000;
        let ms = to_ms(s);
        // A tick stamp's span is about 1 ms (2^22 ticks at >= 2 GHz), its
        // middle within that of the truth and the pairs' error far below
        // it; a coarse stamp lags by up to a jiffy (10 ms at HZ=100).
        let slack = 10;
        assert!(
            ms + slack >= before && ms <= after + slack,
            "{before} <= {ms} <= {after} (+-{slack})"
        );
        if MODE.load(Ordering::Relaxed) != TICKS {
            return;
        }
        // Later stamps convert later, and not before their time.
        let t = std::time::Instant::now();
        while t.elapsed().as_millis() < 20 {}
        let s2 = now();
        let ms2 = to_ms(s2);
        assert!(ms2 >= ms + 17, "{ms} then {ms2}");
    }
}
