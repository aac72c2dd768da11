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

/// `task_h_load(p)` of a task of the root task group: its load scaled by the root cfs_rq's
/// `h_load` over the cfs_rq's load (the +1 keeps an empty cfs_rq from dividing by 0).
pub fn task_h_load(task_load: u64, h_load: u64, cfs_load: u64) -> u64 {
    (u128::from(task_load) * u128::from(h_load) / (u128::from(cfs_load) + 1)) as u64
}

/// The jiffy `task_h_load()` recomputes `h_load` at most once in, at HZ=250 (Debian's).
pub const H_LOAD_JIFFY_NS: u64 = 4_000_000;

/// One CPU's root `h_load` as `update_cfs_rq_h_load()` keeps it: set to the cfs_rq's load
/// by the first `task_h_load()` of a jiffy and kept for the rest of it, so later tasks of
/// that jiffy are scaled by a stale value.  For whoever sees only its own calls (the live
/// agent; a replay of its inputs): the kernel also calls it from load balancing.
#[derive(Clone, Copy, Debug, Default)]
pub struct RootHLoad {
    h_load: u64,
    jiffy: Option<u64>,
}

impl RootHLoad {
    /// `task_h_load()` of a task with `task_load` on this CPU, whose cfs_rq load is
    /// `cfs_load`, at `now_ns`.
    pub fn task_h_load(&mut self, task_load: u64, cfs_load: u64, now_ns: u64) -> u64 {
        let jiffy = now_ns / H_LOAD_JIFFY_NS;
        if self.jiffy != Some(jiffy) {
            self.h_load = cfs_load;
            self.jiffy = Some(jiffy);
        }
        task_h_load(task_load, self.h_load, cfs_load)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn h_load_is_recomputed_once_a_jiffy() {
        let mut h = RootHLoad::default();
        // First call of the jiffy: h_load = the current load, so the task keeps about its
        // own load.
        assert_eq!(h.task_h_load(300, 1024, 1_000_000), 300 * 1024 / 1025);
        // Same jiffy, the cfs_rq's load has doubled: the stale h_load halves the task's.
        assert_eq!(h.task_h_load(300, 2048, 3_000_000), 300 * 1024 / 2049);
        // Next jiffy: recomputed.
        assert_eq!(h.task_h_load(300, 2048, 4_000_000), 300 * 2048 / 2049);
    }

    #[test]
    fn halves_every_half_life() {
        assert_eq!(decay(0), 1.0);
        assert!((decay(32_000_000) - 0.5).abs() < 1e-12);
        assert!((decay(64_000_000) - 0.25).abs() < 1e-12);
        assert!(decay(1_000_000) > 0.978 && decay(1_000_000) < 0.979);
    }
}
