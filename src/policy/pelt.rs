//! PELT's geometric decay, shared by the live agent's utilisation estimate
//! (src/live/placement.rs) and the simulator's load and util (src/sim/world.rs): a
//! signal halves every 32 ms (y^32 = 0.5 with 1 ms periods, kernel/sched/pelt.c).

/// PELT's half-life.
pub const HALF_LIFE_NS: f64 = 32_000_000.0;

/// How much of a PELT signal is left after `dt_ns`.
pub fn decay(dt_ns: u64) -> f64 {
    if dt_ns == 0 {
        1.0
    } else {
        (-(dt_ns as f64) / HALF_LIFE_NS).exp2()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn halves_every_half_life() {
        assert_eq!(decay(0), 1.0);
        assert!((decay(32_000_000) - 0.5).abs() < 1e-12);
        assert!((decay(64_000_000) - 0.25).abs() < 1e-12);
        assert!(decay(1_000_000) > 0.978 && decay(1_000_000) < 0.979);
    }
}
