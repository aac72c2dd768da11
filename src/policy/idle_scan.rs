//! The LLC scan of `select_idle_sibling()` and its depth limits (SIS_PROP, SIS_UTIL).
//!
//! Two forms, chosen by `Config::idle_scan`:
//!
//! - **three-scan (v5.10):** `select_idle_core()` (whole idle core, only while the LLC's
//!   `has_idle_cores` hint is set; idle CPUs seen on the way are thrown away unless
//!   `idle_candidate` is on, which is Mel Gorman's Dec 2020 v2 patch 4 as posted), then
//!   `select_idle_cpu()` (first idle CPU, SIS-limited), then `select_idle_smt(target)`.
//! - **single pass (v5.12+, 9fe1f127):** one walk of the LLC.  While an idle core is
//!   hinted it tests whole cores and remembers the first idle CPU it sees as the fallback
//!   candidate; otherwise it looks for any idle CPU under the SIS limit.  From v5.13
//!   (c722f35b) prev's SMT siblings are tried first when no idle core is hinted.
//!
//! Scan length is counted in `sis_scanned` / `Decision::scanned`: every CPU whose state is
//! examined, each SMT sibling of a core test included.

use super::config::{IdleScan, SisMode};
use super::counters::Counters;
use super::cpuset::{CpuSet, MAX_CPUS};
use super::engine::{JIFFY_NS, RqWakeIdle, Step};
use super::rules::Rule;
use super::topology::SCHED_CAPACITY_SCALE;

/// SIS_UTIL's `nr_idle_scan` for an LLC of `llc_weight` CPUs whose summed cfs utilisation
/// is `sum_util`, with the LLC domain's `imbalance_pct`.
///
/// `update_idle_cpu_scan()`'s arithmetic, checked against Debian's 7.2.13 fair.c: the
/// fraction of the LLC to scan falls quadratically with utilisation and reaches zero at
/// the "overloaded" threshold `100 / imbalance_pct` (≈85 % for 117):
///
/// ```text
///   x  = sum_util / llc_weight                         (average util per CPU, 0..1024)
///   y  = 1024 - min(1024, x² · pct² / (10000 · 1024))   (fraction to scan, scaled by 1024)
///   nr_idle_scan = y · llc_weight / 1024
/// ```
///
/// The kernel recomputes it during periodic load balancing of the LLC domain (not for
/// newly-idle balancing), so its value lags, and sums `cpu_util_cfs()`, which is the larger
/// of util_avg and util_est; the engine recomputes it from the snapshot's `util` at each
/// decision, which is the value the next periodic balance would store where util_est is
/// not the larger.
pub fn sis_util_nr_idle_scan(sum_util: u64, llc_weight: u64, imbalance_pct: u32) -> u64 {
    if llc_weight == 0 {
        return 0;
    }
    let scale = SCHED_CAPACITY_SCALE as u64;
    let x = sum_util / llc_weight;
    let pct = imbalance_pct as u64;
    let tmp = (x * x * pct * pct / (10_000 * scale)).min(scale);
    let y = scale - tmp;
    y * llc_weight / scale
}

/// SIS_PROP's depth: the waker CPU's expected idle time `avg_idle` against the average cost
/// of a scan, scaled by the LLC size; at least 4.  `avg_idle` is `rq->avg_idle / 512` up to
/// v5.13 ("due to large variance we need a large fuzz factor") and `rq->wake_avg_idle` from
/// v5.14 (see `Step::wake_avg_idle`).  The loop stops at `!--nr`, so it examines at most
/// `nr - 1` CPUs.
pub fn sis_prop_nr(avg_idle: u64, avg_scan_cost_ns: u64, llc_weight: u64) -> u64 {
    // The kernel's `avg_cost + 1` cannot reach zero there (the average is a few µs); here
    // the cost comes from a scenario or trace file, and u64::MAX + 1 would wrap to 0 and
    // divide by zero.  Saturating keeps the quotient meaningful: the depth falls to 4.
    let avg_cost = avg_scan_cost_ns.saturating_add(1);
    let span_avg = llc_weight.saturating_mul(avg_idle);
    if span_avg > 4u64.saturating_mul(avg_cost) {
        span_avg / avg_cost
    } else {
        4
    }
}

/// `update_avg()`: `avg += (sample - avg) / 8`, signed, truncating towards zero.
pub fn update_avg(avg: &mut u64, sample: u64) {
    let diff = sample as i128 - *avg as i128;
    *avg = (*avg as i128 + diff / 8).max(0) as u64;
}

impl Step<'_> {
    /// Everything after the recent_used_cpu block: the LLC scans, then `return target`.
    pub(super) fn scan_llc(&mut self, prev: usize, target: usize, allowed: &CpuSet) -> usize {
        let topo = self.topo;
        // sd = rcu_dereference(per_cpu(sd_llc, target)); if (!sd) return target;
        if !topo.is_online(target) || topo.llc_size(target) <= 1 {
            self.push(Rule::SisNoLlcDomain);
            return target;
        }
        self.cnt.sis_domain_search += 1;
        let cpus = topo.llc_mask(target).and(allowed).and(topo.online());
        let has_idle_cores = self.llc[topo.llc_index(target)].has_idle_cores;

        let found = match self.cfg.idle_scan {
            IdleScan::SinglePass => {
                let mut has_idle_core = false;
                if topo.smt_present() {
                    has_idle_core = has_idle_cores;
                    // c722f35b: with no idle core to hope for, an idle sibling of prev keeps
                    // the task next to its cache, before a possibly long LLC walk.
                    if !has_idle_core
                        && self.cfg.select_idle_smt_prev
                        && topo.share_cache(prev, target)
                        && let Some(i) = self.select_idle_smt_prev(prev, target, allowed)
                    {
                        return i;
                    }
                }
                self.select_idle_cpu_single_pass(target, cpus, has_idle_core)
            }
            IdleScan::ThreeScan => {
                // Ablation: v5.13's prev-sibling check ahead of the v5.10 scans.
                if self.cfg.select_idle_smt_prev
                    && topo.smt_present()
                    && !has_idle_cores
                    && topo.share_cache(prev, target)
                    && let Some(i) = self.select_idle_smt_prev(prev, target, allowed)
                {
                    return i;
                }
                match self.select_idle_core_three_scan(target, cpus, allowed) {
                    Some(i) => Some(i),
                    None => match self.select_idle_cpu_three_scan(target, cpus) {
                        Some(i) => Some(i),
                        None => self.select_idle_smt_target(target, allowed),
                    },
                }
            }
        };
        match found {
            Some(i) => i,
            None => {
                self.cnt.sis_failed += 1;
                self.push(Rule::SisFallbackTarget);
                target
            }
        }
    }

    #[inline]
    fn count_scanned(&mut self, n: u32) {
        self.scanned += n;
        self.cnt.sis_scanned += n as u64;
    }

    /// A scan found `c`: `rule` ends the chain and `hits` names the counter it bumps.
    fn scan_hit(
        &mut self,
        c: usize,
        rule: Rule,
        hits: fn(&mut Counters) -> &mut u64,
    ) -> Option<usize> {
        self.push(rule);
        *hits(&mut self.cnt) += 1;
        Some(c)
    }

    /// v5.13+ `select_idle_smt(p, prev)`: the first allowed SMT sibling of prev (in the
    /// target's LLC, other than prev) that is idle or SCHED_IDLE-only.
    fn select_idle_smt_prev(
        &mut self,
        prev: usize,
        target: usize,
        allowed: &CpuSet,
    ) -> Option<usize> {
        let c = self.first_idle_sibling(prev, target, allowed, Some(prev))?;
        self.scan_hit(c, Rule::SisSmtPrevSibling, |n| &mut n.sis_smt_prev_hit)
    }

    /// Both forms of `select_idle_smt()`: the first SMT sibling of `core` that is allowed,
    /// online and in the target's LLC (but `skip`), idle or SCHED_IDLE-only.
    fn first_idle_sibling(
        &mut self,
        core: usize,
        target: usize,
        allowed: &CpuSet,
        skip: Option<usize>,
    ) -> Option<usize> {
        let topo = self.topo;
        let sibs = topo
            .smt_mask(core)
            .and(allowed)
            .and(topo.llc_mask(target))
            .and(topo.online());
        self.first_idle_of(sibs, skip)
    }

    /// The first CPU of `cpus` (but `skip`) that is idle or SCHED_IDLE-only, each one
    /// examined counted as scanned.
    fn first_idle_of(&mut self, cpus: CpuSet, skip: Option<usize>) -> Option<usize> {
        for c in cpus.iter() {
            if Some(c) == skip {
                continue;
            }
            self.count_scanned(1);
            if self.idle_or_sched_idle(c) {
                return Some(c);
            }
        }
        None
    }

    /// v5.10 `select_idle_smt(p, sd, target)`: the first allowed SMT sibling of the target
    /// (the target included) that is idle or SCHED_IDLE-only.
    fn select_idle_smt_target(&mut self, target: usize, allowed: &CpuSet) -> Option<usize> {
        if !self.topo.smt_present() {
            return None;
        }
        let c = self.first_idle_sibling(target, target, allowed, None)?;
        self.scan_hit(c, Rule::SisSmtTargetSibling, |n| &mut n.sis_smt_target_hit)
    }

    /// v5.10 `select_idle_core(p, sd, target)`: a core whose every sibling is idle, walking
    /// the LLC ∩ allowed from the target; only while the LLC hints that an idle core exists,
    /// and a failed walk clears the hint.  With `idle_candidate` (Mel's v2 patch 4) the first
    /// allowed idle CPU seen is returned when no whole core is idle.
    fn select_idle_core_three_scan(
        &mut self,
        target: usize,
        cpus: CpuSet,
        allowed: &CpuSet,
    ) -> Option<usize> {
        let topo = self.topo;
        if !topo.smt_present() {
            return None;
        }
        let llc = topo.llc_index(target);
        if !self.llc[llc].has_idle_cores {
            return None;
        }
        let keep_candidate = self.cfg.idle_candidate;
        let mut cpus = cpus;
        let mut candidate = None;
        let (mut wrapped, mut from) = (false, target);
        while let Some(core) = cpus.next_wrap(from, target, &mut wrapped) {
            from = core + 1;
            let mut idle = true;
            for c in topo.smt_mask(core).and(topo.online()).iter() {
                self.count_scanned(1);
                if !self.available_idle(c) {
                    idle = false;
                    // v5.10 stops at the first busy sibling; patch 4 keeps looking for a
                    // candidate until it has one.
                    if !keep_candidate || candidate.is_some() {
                        break;
                    }
                    continue;
                }
                if keep_candidate && candidate.is_none() && allowed.contains(c) {
                    candidate = Some(c);
                }
            }
            if idle {
                return self.scan_hit(core, Rule::SisIdleCore, |n| &mut n.sis_idle_core_hit);
            }
            cpus.remove_all(topo.smt_mask(core));
        }
        self.llc[llc].has_idle_cores = false;
        let c = candidate?;
        self.scan_hit(c, Rule::SisIdleCandidate, |n| &mut n.sis_idle_candidate_hit)
    }

    /// The scan budget `nr` of the idle-CPU search, or `None` when the search is skipped.
    /// The bool says whether SIS_PROP is measuring this scan's cost.
    fn sis_budget(&mut self, target: usize, has_idle_core: bool) -> Option<(u64, bool)> {
        let topo = self.topo;
        match self.cfg.sis {
            SisMode::None => Some((u64::MAX, false)),
            SisMode::Util => {
                // nr_idle_scan + 1, "because !--nr is the condition to stop scan"; an
                // overloaded LLC is unlikely to have an idle CPU or core: don't scan at all
                // (before the loop, so even an idle-core search is skipped).
                // A stored depth comes from a trace: saturate rather than wrap.
                let nr = match self.llc[topo.llc_index(target)].nr_idle_scan {
                    Some(n) => n,
                    None => {
                        let span = topo.llc_mask(target).and(topo.online());
                        let sum = || {
                            span.iter()
                                .map(|c| (self.snap(c).util as u64).min(self.capacity_of(c)))
                                .sum::<u64>()
                        };
                        let sum_util = match self.llc_util {
                            Some(sums) => {
                                let kept = sums.get(topo.llc_index(target)).copied().unwrap_or(0);
                                debug_assert_eq!(kept, sum(), "the driver's LLC util sum");
                                kept
                            }
                            None => sum(),
                        };
                        sis_util_nr_idle_scan(
                            sum_util,
                            span.count() as u64,
                            self.cfg.imbalance_pct_llc,
                        )
                    }
                }
                .saturating_add(1);
                self.sis_nr = Some(nr);
                if nr == 1 {
                    self.push(Rule::SisUtilOverloaded);
                    self.cnt.sis_util_overloaded += 1;
                    return None;
                }
                Some((nr, false))
            }
            SisMode::Prop => {
                // Only the idle-CPU search is limited: an idle-core search, when hinted,
                // walks the whole LLC.
                if has_idle_core {
                    return Some((u64::MAX, false));
                }
                // this_sd = the waker's LLC domain, which holds avg_scan_cost.
                let this = self.this_cpu;
                if !topo.is_online(this) || topo.llc_size(this) <= 1 {
                    self.push(Rule::SisPropNoWakerLlc);
                    return None;
                }
                let cost = self.llc[topo.llc_index(this)].avg_scan_cost_ns;
                let avg_idle = if self.cfg.sis_prop_wake_avg_idle {
                    self.wake_avg_idle(this)
                } else {
                    self.snap(this).avg_idle_ns / 512
                };
                let nr = sis_prop_nr(avg_idle, cost, topo.llc_size(target) as u64);
                self.sis_nr = Some(nr);
                Some((nr, true))
            }
        }
    }

    /// One CPU of a SIS-limited idle-CPU search: `None` once the budget is spent (the
    /// kernel's `return -1`, which skips the scan-cost update), else whether `c` is idle.
    fn scan_cpu(&mut self, c: usize, nr: &mut u64, examined: &mut u64) -> Option<bool> {
        if self.sis_budget_spent(nr) {
            return None;
        }
        *examined += 1;
        self.count_scanned(1);
        Some(self.idle_or_sched_idle(c))
    }

    /// `rq->wake_avg_idle` of `cpu` as select_idle_cpu() reads it from v5.14 (94aafc3e).
    /// ttwu_do_wakeup() restarts it at `avg_idle / 2` when the CPU leaves idle; "if we're
    /// busy, the assumption that the last idle period predicts the future is flawed", so it
    /// halves for every jiffy since; each scan the CPU makes spends some of it
    /// ([`Self::update_scan_cost`]).
    pub(super) fn wake_avg_idle(&mut self, cpu: usize) -> u64 {
        let snap = *self.snap(cpu);
        let now = self.now_ns / JIFFY_NS;
        let Some(rq) = self.rq.get_mut(cpu) else {
            return 0;
        };
        if rq.restarted_at_ns != Some(snap.idle_exit_ns) {
            *rq = RqWakeIdle {
                wake_avg_idle_ns: snap.avg_idle_ns / 2,
                wake_stamp: snap.idle_exit_ns / JIFFY_NS,
                restarted_at_ns: Some(snap.idle_exit_ns),
            };
        }
        while rq.wake_stamp < now && rq.wake_avg_idle_ns != 0 {
            rq.wake_stamp += 1;
            rq.wake_avg_idle_ns >>= 1;
        }
        rq.wake_avg_idle_ns
    }

    /// Folds this scan's emulated cost into the waker LLC's `avg_scan_cost` and, from v5.14,
    /// takes it from the waker CPU's `wake_avg_idle`.
    pub(super) fn update_scan_cost(&mut self, examined: u64) {
        let topo = self.topo;
        let sample = self
            .cfg
            .sis_prop_cost_fixed_ns
            .saturating_add(self.cfg.sis_prop_cost_per_cpu_ns.saturating_mul(examined));
        let l = topo.llc_index(self.this_cpu);
        update_avg(&mut self.llc[l].avg_scan_cost_ns, sample);
        if self.cfg.sis_prop_wake_avg_idle
            && let Some(rq) = self.rq.get_mut(self.this_cpu)
        {
            rq.wake_avg_idle_ns -= rq.wake_avg_idle_ns.min(sample);
        }
    }

    fn scan_start(&self, target: usize) -> usize {
        // 56498cfb (v5.15): the target was just tested, start after it.
        let s = if self.cfg.scan_skips_target {
            target + 1
        } else {
            target
        };
        if s >= MAX_CPUS { 0 } else { s }
    }

    /// v5.10 `select_idle_cpu(p, sd, target)`: the first idle (or SCHED_IDLE-only) CPU of
    /// the LLC ∩ allowed, walking from the target, within the SIS budget.  Running out of
    /// budget returns without updating the scan cost, as the kernel's early `return -1` does.
    fn select_idle_cpu_three_scan(&mut self, target: usize, cpus: CpuSet) -> Option<usize> {
        let (mut nr, prop) = self.sis_budget(target, false)?;
        let mut examined = 0u64;
        let mut found = None;
        for c in cpus.iter_wrap(self.scan_start(target)) {
            if self.scan_cpu(c, &mut nr, &mut examined)? {
                found = Some(c);
                break;
            }
        }
        if prop {
            self.update_scan_cost(examined);
        }
        let c = found?;
        self.scan_hit(c, Rule::SisIdleCpu, |n| &mut n.sis_idle_cpu_hit)
    }

    /// The kernel's `if (!--nr) return -1;` step of the idle-CPU scan, shared by both scan
    /// forms: true (and recorded) when the SIS budget is used up before the next CPU.
    fn sis_budget_spent(&mut self, nr: &mut u64) -> bool {
        *nr -= 1;
        if *nr == 0 {
            self.push(Rule::SisScanLimitReached);
            self.cnt.sis_scan_limited += 1;
            return true;
        }
        false
    }

    /// v5.12+ `select_idle_cpu(p, sd, has_idle_core, target)`: the single pass.
    fn select_idle_cpu_single_pass(
        &mut self,
        target: usize,
        cpus: CpuSet,
        has_idle_core: bool,
    ) -> Option<usize> {
        let topo = self.topo;
        let (mut nr, prop) = self.sis_budget(target, has_idle_core)?;
        let start = self.scan_start(target);
        let mut cpus = cpus;
        let mut idle_cpu: Option<usize> = None;
        let mut examined = 0u64;
        let (mut wrapped, mut from) = (false, start);
        while let Some(cpu) = cpus.next_wrap(from, start, &mut wrapped) {
            from = cpu + 1;
            if has_idle_core {
                if let Some(core) = self.select_idle_core_single_pass(cpu, &mut cpus, &mut idle_cpu)
                {
                    return self.scan_hit(core, Rule::SisIdleCore, |n| &mut n.sis_idle_core_hit);
                }
            } else if self.scan_cpu(cpu, &mut nr, &mut examined)? {
                idle_cpu = Some(cpu);
                break;
            }
        }
        if has_idle_core {
            // The hint was wrong: clear it so the next wake-ups skip the core search.
            self.llc[topo.llc_index(target)].has_idle_cores = false;
        }
        if prop {
            self.update_scan_cost(examined);
        }
        let c = idle_cpu?;
        if has_idle_core {
            self.scan_hit(c, Rule::SisIdleCandidate, |n| &mut n.sis_idle_candidate_hit)
        } else {
            self.scan_hit(c, Rule::SisIdleCpu, |n| &mut n.sis_idle_cpu_hit)
        }
    }

    /// v5.12+ `select_idle_core(p, core, cpus, &idle_cpu)`: `core` if all its siblings are
    /// idle; otherwise remember the first idle (or SCHED_IDLE-only) allowed CPU seen as the
    /// candidate, drop the core's siblings from the walk and return `None`.
    fn select_idle_core_single_pass(
        &mut self,
        core: usize,
        cpus: &mut CpuSet,
        idle_cpu: &mut Option<usize>,
    ) -> Option<usize> {
        let topo = self.topo;
        let mut idle = true;
        for c in topo.smt_mask(core).and(topo.online()).iter() {
            self.count_scanned(1);
            if !self.available_idle(c) {
                idle = false;
                if idle_cpu.is_none() {
                    if self.sched_idle(c) && cpus.contains(c) {
                        *idle_cpu = Some(c);
                        break;
                    }
                    continue;
                }
                break;
            }
            if idle_cpu.is_none() && cpus.contains(c) {
                *idle_cpu = Some(c);
            }
        }
        if idle {
            return Some(core);
        }
        cpus.remove_all(topo.smt_mask(core));
        None
    }
}
