//! A small deterministic random generator, xorshift64*: the same seed always gives the same
//! draws (no wall clock, no OS entropy).  The engine never draws; this is for whatever
//! drives it: the simulator (its only source of randomness, seeded by `--seed`), the
//! policy's property tests, the decision benchmark and the agent's decision-cost driver.
//! The property tests and the decision benchmark draw machine states through the CPU
//! helpers below ([`idle_cpu`], [`busy_counts`]), so both describe an idle or a busy CPU
//! the same way.

use super::CpuSnapshot;

/// xorshift64* (Vigna): small, fast and good enough to jitter service times.
#[derive(Clone, Debug)]
pub struct XorShift(u64);

impl XorShift {
    pub fn new(seed: u64) -> Self {
        // Spread small seeds over the state space; the state must never be zero.
        XorShift(seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1)
    }

    pub fn next_u64(&mut self) -> u64 {
        let mut x = self.0;
        x ^= x >> 12;
        x ^= x << 25;
        x ^= x >> 27;
        self.0 = x;
        x.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }

    /// Uniform in `0..n`; 0 when `n` is 0.
    pub fn below(&mut self, n: u64) -> u64 {
        if n == 0 { 0 } else { self.next_u64() % n }
    }

    /// True with probability `percent`/100.
    pub fn chance(&mut self, percent: u64) -> bool {
        self.below(100) < percent
    }

    /// A uniformly chosen element of a non-empty slice.
    pub fn pick<'a, T>(&mut self, xs: &'a [T]) -> &'a T {
        &xs[self.below(xs.len() as u64) as usize]
    }

    /// `base` ± `pct` percent, uniformly; at least 1.
    pub fn jitter(&mut self, base: u64, pct: u64) -> u64 {
        if pct == 0 || base == 0 {
            return base.max(1);
        }
        let span = base * pct.min(100) / 100;
        (base - span + self.below(2 * span + 1)).max(1)
    }
}

/// An idle CPU: a wake-up pending on it `pending_pct` percent of the time (0 draws
/// nothing), a little blocked load and utilisation, and an average idle time below
/// `max_avg_idle_ns`.
pub fn idle_cpu(r: &mut XorShift, pending_pct: u64, max_avg_idle_ns: u64) -> CpuSnapshot {
    CpuSnapshot {
        ttwu_pending: pending_pct > 0 && r.chance(pending_pct),
        load: r.below(300),
        util: r.below(200) as u32,
        avg_idle_ns: r.below(max_avg_idle_ns),
        ..CpuSnapshot::idle()
    }
}

/// A busy CPU's `(nr_running, nr_delayed)`: 1 to 4 tasks, of which `delayed_pct` percent
/// of the time fewer than all are delayed-dequeue sleepers.
pub fn busy_counts(r: &mut XorShift, delayed_pct: u64) -> (u32, u32) {
    let nr = 1 + r.below(4) as u32;
    let delayed = if r.chance(delayed_pct) {
        r.below(nr as u64) as u32
    } else {
        0
    };
    (nr, delayed)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn deterministic_and_bounded() {
        let (mut a, mut b) = (XorShift::new(7), XorShift::new(7));
        for _ in 0..100 {
            assert_eq!(a.next_u64(), b.next_u64());
        }
        let mut r = XorShift::new(1);
        for _ in 0..1000 {
            let j = r.jitter(1000, 20);
            assert!((800..=1200).contains(&j));
            assert!(r.below(3) < 3);
        }
        assert_eq!(r.jitter(5, 0), 5);
        assert_eq!(r.below(0), 0);
    }
}
