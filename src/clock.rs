//! The clock verbs calls are timed with: CLOCK_MONOTONIC ns, or, while
//! the binary trace is on and the TSC is invariant (constant and nonstop,
//! and the kernel's own clocksource), the TSC read with `rdtsc`: about 20
//! cycles instead of a vDSO `clock_gettime` (two per traced call). Ticks
//! become CLOCK_MONOTONIC ns by a rate measured against CLOCK_MONOTONIC:
//! the trace file's header keeps the (TSC, ns) pairs, so a reader converts
//! exactly as the shim does. A leaf module (the logger and the trace both
//! read it).

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

static TSC: AtomicBool = AtomicBool::new(false);
/// The first (TSC, ns) pair, read when the TSC was chosen, and the latest.
static TSC0: AtomicU64 = AtomicU64::new(0);
static MONO0: AtomicU64 = AtomicU64::new(0);
static TSC1: AtomicU64 = AtomicU64::new(0);
static MONO1: AtomicU64 = AtomicU64::new(0);
/// ns per tick (f64 bits), from the two pairs.
static RATE: AtomicU64 = AtomicU64::new(0);

/// The time now: TSC ticks when [`tsc`], else CLOCK_MONOTONIC ns.
#[inline(always)]
pub fn now() -> u64 {
    if TSC.load(Ordering::Relaxed) {
        rdtsc()
    } else {
        monotonic_ns()
    }
}

/// Are times TSC ticks?
pub fn tsc() -> bool {
    TSC.load(Ordering::Relaxed)
}

#[inline(always)]
pub(crate) fn rdtsc() -> u64 {
    #[cfg(target_arch = "x86_64")]
    // SAFETY: rdtsc has no preconditions (chosen only on x86_64 CPUs that
    // have an invariant TSC, see `use_tsc`).
    return unsafe { core::arch::x86_64::_rdtsc() };
    #[cfg(not(target_arch = "x86_64"))]
    monotonic_ns()
}

/// CLOCK_MONOTONIC in ns.
pub fn monotonic_ns() -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: ts is a valid out-pointer; CLOCK_MONOTONIC always exists.
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut ts) };
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

/// A duration measured with [`now`], in ns.
pub fn to_ns(d: u64) -> u64 {
    if !tsc() {
        return d;
    }
    (d as f64 * f64::from_bits(RATE.load(Ordering::Relaxed))) as u64
}

/// Switches to the TSC when it is invariant and the kernel's clocksource
/// (so CLOCK_MONOTONIC runs with it): at load, before any call is timed.
/// Measures the rate over 200 us to start with; [`calibrate`] refines it.
pub fn use_tsc() -> bool {
    if !invariant_tsc() {
        return false;
    }
    let (t0, m0) = pair();
    let (mut t1, mut m1) = (t0, m0);
    while m1.saturating_sub(m0) < 200_000 {
        (t1, m1) = pair();
    }
    TSC0.store(t0, Ordering::Relaxed);
    MONO0.store(m0, Ordering::Relaxed);
    store_pair(t1, m1);
    TSC.store(true, Ordering::Release);
    true
}

/// A fresh (TSC, ns) pair, for the rate over a longer span (the trace's
/// writer calls it as it drains): taken when the last one is over about
/// 2^22 ticks (1 to 2 ms) old.
pub fn calibrate() {
    if tsc() && rdtsc().wrapping_sub(TSC1.load(Ordering::Relaxed)) >= 1 << 22 {
        let (t, m) = pair();
        store_pair(t, m);
    }
}

/// (TSC0, MONO0, TSC1, MONO1) for the trace file's header.
pub fn pairs() -> [u64; 4] {
    [
        TSC0.load(Ordering::Relaxed),
        MONO0.load(Ordering::Relaxed),
        TSC1.load(Ordering::Relaxed),
        MONO1.load(Ordering::Relaxed),
    ]
}

fn store_pair(t: u64, m: u64) {
    let (t0, m0) = (TSC0.load(Ordering::Relaxed), MONO0.load(Ordering::Relaxed));
    if t <= t0 || m <= m0 {
        return;
    }
    TSC1.store(t, Ordering::Relaxed);
    MONO1.store(m, Ordering::Relaxed);
    let rate = (m - m0) as f64 / (t - t0) as f64;
    RATE.store(rate.to_bits(), Ordering::Relaxed);
}

/// The TSC and CLOCK_MONOTONIC read as close together as this thread
/// can: the TSC read on both sides, the tighter of a few tries kept.
pub(crate) fn pair() -> (u64, u64) {
    let mut best = (u64::MAX, 0, 0);
    for _ in 0..5 {
        let a = rdtsc();
        let m = monotonic_ns();
        let b = rdtsc();
        if b.wrapping_sub(a) < best.0 {
            best = (b.wrapping_sub(a), a + (b.wrapping_sub(a)) / 2, m);
        }
    }
    (best.1, best.2)
}

/// The TSC ticks at a constant rate in every C-state (CPUID
/// 0x80000007 EDX bit 8) and the kernel keeps time with it.
pub(crate) fn invariant_tsc() -> bool {
    #[cfg(target_arch = "x86_64")]
    {
        // The extended leaf is read only when the CPU says it has it.
        let max = core::arch::x86_64::__cpuid(0x8000_0000).eax;
        let invariant =
            max >= 0x8000_0007 && core::arch::x86_64::__cpuid(0x8000_0007).edx & (1 << 8) != 0;
        invariant && clocksource_is_tsc()
    }
    #[cfg(not(target_arch = "x86_64"))]
    false
}

/// Is the kernel's clocksource the TSC? Read with plain system calls into
/// a stack buffer: the registry asks at a process's first create, and
/// std's file code would map pages of the shim's text no verb uses.
#[cfg(target_arch = "x86_64")]
fn clocksource_is_tsc() -> bool {
    let path = c"/sys/devices/system/clocksource/clocksource0/current_clocksource";
    // SAFETY: a NUL-terminated path; the descriptor is closed below.
    let fd = unsafe { libc::open(path.as_ptr(), libc::O_RDONLY | libc::O_CLOEXEC) };
    if fd < 0 {
        return false;
    }
    let mut buf = [0u8; 16];
    // SAFETY: reads at most buf.len() bytes into buf, from our own fd.
    let n = unsafe { libc::read(fd, buf.as_mut_ptr().cast(), buf.len()) };
    // SAFETY: fd is ours and open.
    unsafe { libc::close(fd) };
    n >= 3 && buf[..n as usize].trim_ascii() == b"tsc"
}

#[cfg(test)]
mod tests {
    #[test]
    fn ticks_convert_to_monotonic_ns() {
        if !super::use_tsc() {
            return;
        }
        let (t0, m0) = super::pair();
        let mut m1 = m0;
        while m1 - m0 < 2_000_000 {
            m1 = super::monotonic_ns();
        }
        let t1 = super::now();
        let ns = super::to_ns(t1 - t0) as i64;
        // The 200 us calibration: within 1% over 2 ms.
        assert!(
            (ns - (m1 - m0) as i64).abs() < 20_000,
            "{ns} vs {}",
            m1 - m0
        );
    }
}
