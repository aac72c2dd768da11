//! Emulation of EEVDF delayed dequeue (152e11f6, v6.12) for the placement path.
//!
//! In the kernel a task that goes to sleep while it is not yet eligible (it has received
//! more than its share, i.e. it still owes lag) is not dequeued: it stays on the runqueue,
//! "competing until eligible", and keeps counting in `rq->nr_running` and in the cfs
//! `h_nr_queued`, while `h_nr_runnable` drops.  It leaves when its lag has elapsed and it is
//! picked, when the CPU has nothing else to run (the pick dequeues it at once), or when it is
//! woken (ttwu finds it still queued and simply requeues it in place, without calling
//! `select_task_rq`).  Seed 3 is about the side effect: those lingering sleepers make the
//! waker's CPU look busy to `wake_affine_idle()`'s `nr_running == 1` test.
//!
//! This helper keeps, per CPU, the set of delayed tasks and when their lag runs out.  It is
//! plain data driven by events, so the simulator (virtual time) and the live agent (wall
//! time from its own task tracking) can both drive it:
//!
//! - [`DelayedDequeue::on_sleep`] when a task blocks;
//! - [`DelayedDequeue::on_wake`] when it is woken: `Some(cpu)` means it was still delayed
//!   there and the wake-up is a requeue on `cpu`, no placement decision;
//! - [`DelayedDequeue::expire`] as time advances; [`DelayedDequeue::on_cpu_idle`] when a CPU
//!   runs out of runnable tasks;
//! - [`DelayedDequeue::nr_delayed`] / [`DelayedDequeue::apply_to`] to fill snapshots.
//!
//! The emulation is wall-clock based ("lag_ns until eligible"), which the kernel's virtual
//! time is not: the lag of an entity drains at a rate that depends on the competition on its
//! runqueue.  That is an accepted simplification; the seed-3 effect only needs sleepers to
//! stay counted for a while.  Sign convention: `lag_ns > 0` means "not yet eligible, stays
//! queued for that long" (positive lag, in this module's terms; the kernel's `se->vlag`
//! has the opposite sign).

use serde::{Deserialize, Serialize};

use super::types::CpuSnapshot;

/// One sleeper kept on a runqueue.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct DelayedTask {
    pub pid: u32,
    /// When the lag runs out and the task is finally dequeued.
    pub until_ns: u64,
}

/// Per-CPU delayed-dequeue bookkeeping.  Not on the decision path; it allocates per CPU as
/// sleepers arrive (vectors keep their capacity, so steady state does not allocate).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct DelayedDequeue {
    enabled: bool,
    per_cpu: Vec<Vec<DelayedTask>>,
    /// The tasks of `per_cpu`, all CPUs together: the live agent asks on every batch and
    /// every wake-up, and most of the time there are none, so the walks over every CPU's
    /// list are skipped then.  Every method that changes `per_cpu` keeps it.
    total: usize,
    /// The CPUs whose list may hold a task, each once (`listed`): the walks look at these
    /// only, so that their cost follows the sleepers, not the machine's size.  A list that
    /// empties stays here until the next [`DelayedDequeue::expire`] drops it.
    occupied: Vec<usize>,
    listed: Vec<bool>,
}

impl DelayedDequeue {
    /// `enabled` mirrors `Config::delayed_dequeue`; when false every sleeper is dequeued at
    /// once (NO_DELAY_DEQUEUE) and the counts stay zero.
    pub fn new(nr_cpus: usize, enabled: bool) -> Self {
        DelayedDequeue {
            enabled,
            per_cpu: vec![Vec::new(); nr_cpus],
            total: 0,
            occupied: Vec::with_capacity(nr_cpus),
            listed: vec![false; nr_cpus],
        }
    }

    pub fn enabled(&self) -> bool {
        self.enabled
    }

    /// Switches the emulation on or off (runtime `set delayed_dequeue=…`); switching off
    /// dequeues every delayed task, as flipping the sched_feat lets them drain.
    pub fn set_enabled(&mut self, on: bool) {
        self.enabled = on;
        if !on {
            self.per_cpu.iter_mut().for_each(Vec::clear);
            self.total = 0;
            self.occupied.clear();
            self.listed.iter_mut().for_each(|l| *l = false);
        }
    }

    /// Task `pid` blocks on `cpu` at `now_ns` with `lag_ns` left before it is eligible.
    /// Returns whether the task stays queued (delayed).  If the CPU has no other runnable
    /// task, its next pick finds only sleepers and dequeues them: the driver then calls
    /// [`DelayedDequeue::on_cpu_idle`] as the CPU schedules.
    pub fn on_sleep(&mut self, cpu: usize, pid: u32, lag_ns: i64, now_ns: u64) -> bool {
        if !self.enabled || lag_ns <= 0 || cpu >= self.per_cpu.len() {
            return false;
        }
        self.remove(pid);
        if !std::mem::replace(&mut self.listed[cpu], true) {
            self.occupied.push(cpu);
        }
        self.per_cpu[cpu].push(DelayedTask {
            pid,
            until_ns: now_ns.saturating_add(lag_ns as u64),
        });
        self.total += 1;
        true
    }

    /// Task `pid` is woken.  If it was still delayed, it is requeued in place: returns the
    /// CPU it stays on (the caller skips the placement decision, as `ttwu_runnable()` does).
    #[inline]
    pub fn on_wake(&mut self, pid: u32) -> Option<usize> {
        self.remove(pid)
    }

    /// Forgets `pid` wherever it is delayed (exit, or the caller migrated it); returns the
    /// CPU it was on.
    #[inline]
    pub fn remove(&mut self, pid: u32) -> Option<usize> {
        if self.total == 0 {
            return None;
        }
        for &cpu in &self.occupied {
            let list = &mut self.per_cpu[cpu];
            if let Some(i) = list.iter().position(|t| t.pid == pid) {
                list.swap_remove(i);
                self.total -= 1;
                return Some(cpu);
            }
        }
        None
    }

    /// Dequeues every task whose lag has elapsed by `now_ns`; returns how many left.
    #[inline]
    pub fn expire(&mut self, now_ns: u64) -> usize {
        self.expire_each(now_ns, |_| {})
    }

    /// [`DelayedDequeue::expire`], calling `left_from(cpu)` for each CPU whose count fell
    /// (for drivers that rebuild only the CPUs that changed).
    #[inline]
    pub fn expire_each(&mut self, now_ns: u64, mut left_from: impl FnMut(usize)) -> usize {
        if self.total == 0 {
            return 0;
        }
        let mut n = 0;
        let (per_cpu, listed) = (&mut self.per_cpu, &mut self.listed);
        self.occupied.retain(|&cpu| {
            let list = &mut per_cpu[cpu];
            let before = list.len();
            list.retain(|t| t.until_ns > now_ns);
            if list.len() < before {
                n += before - list.len();
                left_from(cpu);
            }
            listed[cpu] = !list.is_empty();
            listed[cpu]
        });
        self.total -= n;
        n
    }

    /// `cpu` has no runnable task left and schedules: every delayed task there is picked
    /// and dequeued.  Returns how many left.
    #[inline]
    pub fn on_cpu_idle(&mut self, cpu: usize) -> usize {
        if self.total == 0 {
            return 0;
        }
        let n = self.per_cpu.get_mut(cpu).map_or(0, |l| {
            let n = l.len();
            l.clear();
            n
        });
        self.total -= n;
        n
    }

    /// Delayed tasks on `cpu` (`cfs_h_nr_delayed()`).
    pub fn nr_delayed(&self, cpu: usize) -> u32 {
        self.per_cpu.get(cpu).map_or(0, |l| l.len() as u32)
    }

    /// Where `pid` is delayed, if it is.
    pub fn delayed_on(&self, pid: u32) -> Option<usize> {
        if self.total == 0 {
            return None;
        }
        (self.occupied.iter().copied()).find(|&cpu| self.per_cpu[cpu].iter().any(|t| t.pid == pid))
    }

    /// The delayed tasks of `cpu`.
    pub fn tasks(&self, cpu: usize) -> &[DelayedTask] {
        self.per_cpu.get(cpu).map_or(&[], |l| l.as_slice())
    }

    /// For drivers whose snapshot counts runnable tasks only: sets `nr_delayed` of every
    /// CPU and adds it to `nr_running`, so the snapshot counts like the kernel's rq.
    #[inline]
    pub fn apply_to(&self, cpus: &mut [CpuSnapshot]) {
        if self.total == 0 {
            for s in cpus.iter_mut() {
                s.nr_delayed = 0;
            }
            return;
        }
        for (cpu, s) in cpus.iter_mut().enumerate() {
            let d = self.nr_delayed(cpu);
            s.nr_delayed = d;
            s.nr_running += d;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sleeper_with_lag_stays_counted_until_it_elapses() {
        let mut dd = DelayedDequeue::new(4, true);
        assert!(dd.on_sleep(1, 10, 500, 1_000));
        assert!(dd.on_sleep(1, 11, 2_000, 1_000));
        assert!(!dd.on_sleep(1, 12, 0, 1_000), "no lag: dequeued at once");
        assert!(!dd.on_sleep(1, 13, -5, 1_000), "eligible: dequeued at once");
        assert!(dd.on_sleep(2, 14, 500, 1_000));
        assert_eq!(
            dd.on_cpu_idle(2),
            1,
            "alone on its CPU: picked and dequeued"
        );
        assert_eq!(dd.nr_delayed(1), 2);
        assert_eq!(dd.expire(1_499), 0);
        assert_eq!(dd.expire(1_500), 1);
        assert_eq!(dd.nr_delayed(1), 1);
        assert_eq!(dd.delayed_on(11), Some(1));
        assert_eq!(
            dd.on_wake(11),
            Some(1),
            "woken while delayed: requeued in place"
        );
        assert_eq!(dd.on_wake(11), None);
        assert_eq!(dd.nr_delayed(1), 0);
    }

    #[test]
    fn idle_cpu_drains_and_disabled_never_delays() {
        let mut dd = DelayedDequeue::new(2, true);
        dd.on_sleep(0, 1, 100, 0);
        dd.on_sleep(0, 2, 100, 0);
        assert_eq!(dd.on_cpu_idle(0), 2);
        assert_eq!(dd.nr_delayed(0), 0);
        let mut off = DelayedDequeue::new(2, false);
        assert!(!off.on_sleep(0, 1, 100, 0));
        assert_eq!(off.nr_delayed(0), 0);
        dd.on_sleep(1, 3, 100, 0);
        dd.set_enabled(false);
        assert_eq!(dd.nr_delayed(1), 0);
    }

    /// `total` is what the lists hold after any sequence of events.
    #[test]
    fn the_total_follows_every_change() {
        let mut r = crate::policy::rng::XorShift::new(11);
        let mut dd = DelayedDequeue::new(4, true);
        for step in 0..5_000u64 {
            let pid = r.below(12) as u32;
            let cpu = r.below(5) as usize; // 4 is out of range on purpose
            match r.below(8) {
                0..=2 => {
                    dd.on_sleep(cpu, pid, r.below(3_000) as i64 - 500, step);
                }
                3 => {
                    dd.on_wake(pid);
                }
                4 => {
                    dd.expire(step.saturating_sub(r.below(2_000)));
                }
                5 => {
                    dd.on_cpu_idle(cpu);
                }
                6 if r.chance(5) => dd.set_enabled(!dd.enabled()),
                _ => {
                    dd.remove(pid);
                }
            }
            let held: usize = (0..5).map(|c| dd.tasks(c).len()).sum();
            assert_eq!(dd.total, held, "step {step}");
            // Every CPU holding a sleeper is walked, and none twice.
            for c in 0..4 {
                let times = dd.occupied.iter().filter(|&&o| o == c).count();
                assert_eq!(times, dd.listed[c] as usize, "step {step}, CPU {c}");
                assert!(
                    dd.tasks(c).is_empty() || dd.listed[c],
                    "step {step}, CPU {c}"
                );
            }
            let mut snaps = vec![CpuSnapshot::busy(1); 4];
            snaps[2].nr_delayed = 9;
            dd.apply_to(&mut snaps);
            for (c, s) in snaps.iter().enumerate() {
                assert_eq!(s.nr_delayed, dd.nr_delayed(c));
                assert_eq!(s.nr_running, 1 + dd.nr_delayed(c));
            }
        }
    }

    #[test]
    fn apply_to_counts_like_the_kernel() {
        let mut dd = DelayedDequeue::new(2, true);
        dd.on_sleep(0, 1, 100, 0);
        let mut snap = [CpuSnapshot::busy(1), CpuSnapshot::busy(1)];
        dd.apply_to(&mut snap);
        assert_eq!((snap[0].nr_running, snap[0].nr_delayed), (2, 1));
        assert_eq!((snap[1].nr_running, snap[1].nr_delayed), (1, 0));
    }
}
