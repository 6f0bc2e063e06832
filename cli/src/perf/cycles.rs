//! The latency loops' time stamps: the CPU's cycle counter, as perftest's `get_cycles()`
//! (`rdtsc` on x86-64, the virtual counter `cntvct_el0` on aarch64), turned into nanoseconds
//! once the loop is over.
//!
//! Why not [`Instant`] per iteration: a stamp sits between seeing a completion and ringing
//! the next doorbell, and on rxe how quickly that doorbell follows decides how the kernel
//! runs the next request. Its send task is still finishing the completion for about a
//! microsecond; a doorbell in that window only marks it to run again, one after it makes the
//! kernel queue the task and wake a worker. `Instant::now()` (musl's `clock_gettime` through
//! the vDSO) was long enough under qemu to push most doorbells out of that window. In one VM
//! boot, client pinned to one vCPU and rxe's work to the other, read-lat at perftest's
//! settings went from 33.4 µs (median of 8) to 19.8 with these stamps, perftest's 19.9; with
//! the scheduler free to place both, the gap narrowed less (docs/performance.md, "The
//! rxe send-task race").
//!
//! Conversion: the counter's rate is taken over the loop itself (the counter and [`Instant`]
//! read at its start and end), so the stamps' differences add up to the loop's real duration
//! whatever the rate; only a rate that changes during the loop would skew single samples.
//! perftest instead reads the rate from `/proc/cpuinfo` and a 0.2 s sampling at start-up.
//!
//! The only unsafe code of the CLI: the two counter reads.

use std::time::Instant;

/// A counter read at the start of a measured loop, with the clock time it stood for.
pub(super) struct CycleClock {
    start: Instant,
    c0: u64,
}

impl CycleClock {
    pub(super) fn start() -> CycleClock {
        CycleClock {
            start: Instant::now(),
            c0: counter(),
        }
    }

    /// The raw counter: a stamp for [`Self::into_nanos`].
    #[inline(always)]
    pub(super) fn stamp(&self) -> u64 {
        counter()
    }

    /// Turns `stamps` (taken with [`Self::stamp`]) into nanoseconds since the start, at the
    /// counter rate seen from the start to now.
    pub(super) fn into_nanos(self, stamps: &mut [u64]) {
        let ns = self.start.elapsed().as_nanos() as f64;
        let cycles = counter().wrapping_sub(self.c0);
        scale(stamps, self.c0, cycles, ns);
    }
}

/// `stamps[i] = (stamps[i] - c0) * ns / cycles`; with no counter progress (a counter that
/// did not move), every stamp becomes 0 rather than a division by zero.
fn scale(stamps: &mut [u64], c0: u64, cycles: u64, ns: f64) {
    let per_cycle = if cycles == 0 { 0.0 } else { ns / cycles as f64 };
    for s in stamps {
        *s = (s.wrapping_sub(c0) as f64 * per_cycle) as u64;
    }
}

#[cfg(target_arch = "x86_64")]
#[inline(always)]
#[allow(unsafe_code)]
fn counter() -> u64 {
    // SAFETY: `rdtsc` reads the time-stamp counter into registers: no memory is touched and
    // there is no precondition (Linux lets user space run it; the intrinsic is `unsafe` only
    // because every `core::arch` intrinsic is).
    unsafe { core::arch::x86_64::_rdtsc() }
}

#[cfg(target_arch = "aarch64")]
#[inline(always)]
#[allow(unsafe_code)]
fn counter() -> u64 {
    let v: u64;
    // SAFETY: reads the virtual count register into a register: no memory, no stack, no
    // flags. Linux enables EL0 access to it (CNTKCTL_EL1.EL0VCTEN: the vDSO reads it too).
    // The `isb` keeps the read from being taken early, as the kernel's own reads do.
    unsafe {
        core::arch::asm!("isb", "mrs {v}, cntvct_el0", v = out(reg) v,
            options(nomem, nostack, preserves_flags));
    }
    v
}

#[cfg(not(any(target_arch = "x86_64", target_arch = "aarch64")))]
fn counter() -> u64 {
    static BASE: std::sync::OnceLock<Instant> = std::sync::OnceLock::new();
    BASE.get_or_init(Instant::now).elapsed().as_nanos() as u64
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stamps_scale_to_the_loops_duration() {
        // 1000 counter ticks stood for 250 ns: a tick is 0.25 ns.
        let mut s = [1000, 1400, 2000];
        scale(&mut s, 1000, 1000, 250.0);
        assert_eq!(s, [0, 100, 250]);
        // A counter that did not move: zeros, not a panic or NaN casts.
        let mut s = [5, 5];
        scale(&mut s, 5, 0, 1e6);
        assert_eq!(s, [0, 0]);
    }

    #[test]
    fn the_counter_moves_forward() {
        let c = CycleClock::start();
        let a = c.stamp();
        std::thread::sleep(std::time::Duration::from_millis(2));
        let b = c.stamp();
        assert!(b > a, "the counter advanced over 2 ms: {a} -> {b}");
        let mut s = [a, b];
        c.into_nanos(&mut s);
        assert!(
            s[1] > s[0],
            "converted stamps keep their order: {} -> {}",
            s[0],
            s[1]
        );
    }
}
