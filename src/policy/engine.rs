//! The decision engine: `select_task_rq_fair()`'s wake-up path and the newly-idle pull.
//!
//! Layout follows fair.c: [`Engine::select_cpu`] is `select_task_rq()` plus
//! `select_task_rq_fair()` (record_wakee / wake_wide / want_affine, the affine domain walk,
//! `wake_affine()`, then `select_idle_sibling()` or the slow path); the LLC scans and the SIS
//! depth limits live in `idle_scan.rs`.  Every step pushes the [`Rule`] that fired onto the
//! decision's chain and bumps its counter, so a decision explains itself.
//!
//! Purity: no I/O, no clock, no threads, no globals, no allocation on the decision path.
//! The only state is what the kernel also keeps between wake-ups: per LLC the idle-core
//! hint, the scan-cost average and SIS_UTIL's stored depth when one is given
//! (`sd_llc_shared->has_idle_cores`, `sd->avg_scan_cost`, `sd_llc_shared->nr_idle_scan`:
//! [`LlcState`]), per CPU SIS_PROP's aged idle estimate (`rq->wake_avg_idle`,
//! `rq->wake_stamp`, v5.14-v6.6), and the counters; the same inputs on an engine in the
//! same state give the same decision.

use serde::{Deserialize, Serialize};

use super::config::{Config, ConfigError, RecentUsedMode};
use super::counters::Counters;
use super::cpuset::CpuSet;
use super::newidle::NewidleInputs;
use super::rules::{Rule, RuleChain};
use super::topology::{Distance, DomainLevel, Topology};
use super::types::{CpuSnapshot, TaskState, WAKE_EXEC, WAKE_FORK, WAKE_SYNC, WAKE_TTWU, WakeCtx};

/// Per-LLC state the kernel keeps in `sd_llc_shared` and the LLC sched domain.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct LlcState {
    /// `sd_llc_shared->has_idle_cores`: a cheap, possibly stale "an idle core may exist"
    /// hint.  Set when a CPU goes idle and its whole core is idle ([`Engine::on_cpu_idle`]),
    /// cleared by a core search that finds none.  Starts `true`: an unknown LLC is worth one
    /// search, which then corrects the hint, as a stale hint costs in the kernel.
    pub has_idle_cores: bool,
    /// `sd->avg_scan_cost` in ns (SIS_PROP): running average of idle-CPU scan cost,
    /// `avg += (sample - avg) / 8` (`update_avg()`).
    pub avg_scan_cost_ns: u64,
    /// `sd_llc_shared->nr_idle_scan` (SIS_UTIL) as the kernel last stored it, where it is
    /// known (a replay of a recorded kernel); `None` = derive it from the snapshot's
    /// utilisation at each wake-up.  The kernel refreshes it only at load balancing
    /// (`update_idle_cpu_scan()`), so its value can lag the utilisation the snapshot shows.
    pub nr_idle_scan: Option<u64>,
}

impl Default for LlcState {
    fn default() -> Self {
        LlcState {
            has_idle_cores: true,
            avg_scan_cost_ns: 0,
            nr_idle_scan: None,
        }
    }
}

/// Per-CPU state v5.14-v6.6 keep in `struct rq` for SIS_PROP (94aafc3e).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct RqWakeIdle {
    /// `rq->wake_avg_idle` in ns: the idle time this CPU still expects before it is busy.
    pub wake_avg_idle_ns: u64,
    /// `rq->wake_stamp` in jiffies: up to when it has been aged.
    pub wake_stamp: u64,
    /// The snapshot's `idle_exit_ns` it was restarted from; `None` before first use.
    pub restarted_at_ns: Option<u64>,
}

/// Debian's amd64 kernels are built with HZ=250: a jiffy is 4 ms.
pub(super) const JIFFY_NS: u64 = 4_000_000;

/// Which part of `select_task_rq()` produced the CPU.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Path {
    /// `nr_cpus_allowed == 1`: no class hook.
    SingleCpu,
    /// Wake-up fast path: wake_affine + select_idle_sibling.
    Fast,
    /// `find_idlest_cpu()` (fork/exec, or SD_BALANCE_WAKE domains, which are not modelled).
    Slow,
    /// No TTWU and no FORK/EXEC flag: prev.
    NotAWakeup,
}

/// The outcome of [`Engine::select_cpu`].
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
pub struct Decision {
    /// The CPU chosen: always online and allowed for the task when any allowed CPU is online.
    pub cpu: usize,
    /// Why, in order.
    pub chain: RuleChain,
    pub path: Path,
    pub prev_cpu: usize,
    pub waker_cpu: usize,
    /// The effective sync hint (`WF_SYNC` and the waker not exiting).
    pub sync: bool,
    pub want_affine: bool,
    /// The first wake-affine domain of the waker's CPU that spans prev.
    pub affine_domain: Option<DomainLevel>,
    /// The target handed to `select_idle_sibling()` (prev or the waker's CPU, as
    /// `wake_affine()` chose), when the fast path ran.
    pub sis_target: Option<usize>,
    /// The idle-CPU scan's depth budget `nr` as the kernel computes it (the loop examines at
    /// most `nr - 1` CPUs), when SIS_PROP or SIS_UTIL set one.
    pub sis_nr: Option<u64>,
    /// CPUs examined by the LLC scans for this decision.
    pub scanned: u32,
    /// The counts this decision added to the engine's totals.
    pub counted: Counters,
}

/// The part of a [`Decision`] that `select_task_rq()` fills in on its way, before the
/// chain and the counts are added.
pub(super) struct Route {
    path: Path,
    sync: bool,
    want_affine: bool,
    affine_domain: Option<DomainLevel>,
    sis_target: Option<usize>,
}

/// A task queued (waiting, not running) on another CPU that a newly-idle CPU could pull.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
pub struct PullCandidate {
    pub pid: u32,
    /// The CPU whose queue holds it.
    pub src_cpu: usize,
    /// The task's allowed CPUs (empty = all).
    #[serde(default)]
    pub allowed: CpuSet,
    #[serde(default)]
    pub load: u64,
    /// It ran within `sysctl_sched_migration_cost` (500 µs) of the balance: `task_hot()`
    /// keeps it where it waits.
    #[serde(default)]
    pub cache_hot: bool,
}

/// The task a newly-idle CPU pulls.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Pulled {
    pub pid: u32,
    pub src_cpu: usize,
}

/// The outcome of [`Engine::newidle_pull`].
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
pub struct NewIdleDecision {
    pub cpu: usize,
    pub pulled: Option<Pulled>,
    /// The domain the pull came from.
    pub domain: Option<DomainLevel>,
    pub chain: RuleChain,
    pub counted: Counters,
}

/// Snapshot used for CPU ids the caller's slice does not cover: a busy CPU, never chosen
/// as idle.
static MISSING_SNAPSHOT: CpuSnapshot = CpuSnapshot {
    nr_running: 1,
    ..CpuSnapshot::ZERO
};

/// The numbers `wake_affine_weight()` compares, gathered so the arithmetic can be tested
/// on its own.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct WeightInputs {
    /// `cpu_load(this_rq)`.
    pub this_load: u64,
    /// `cpu_load(prev_rq)`.
    pub prev_load: u64,
    /// `capacity_of(this_cpu)`.
    pub this_capacity: u64,
    /// `capacity_of(prev_cpu)`.
    pub prev_capacity: u64,
    /// `task_h_load(p)`.
    pub task_load: u64,
    /// `task_h_load(current)`.
    pub waker_load: u64,
    pub sync: bool,
    /// The affine domain's `imbalance_pct`.
    pub imbalance_pct: u32,
    pub wa_bias: bool,
}

/// What `wake_affine_weight()` decided.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum WeightOutcome {
    /// Sync and `task_h_load(current) > cpu_load(this)`: pull.
    SyncWakerHeavier,
    /// `this_eff_load < prev_eff_load`: pull.
    ThisLighter,
    /// No decision; `wake_affine()` keeps prev.
    PrevLighter,
}

/// `wake_affine_weight()`'s arithmetic (current fair.c, same since v4.16).
///
/// The waker's CPU wins if, after moving the task there, its load (scaled by prev's
/// capacity and by 100) is below prev's remaining load (scaled by this CPU's capacity and by
/// `100 + (imbalance_pct - 100) / 2`: WA_BIAS inflates prev's side, so it favours the
/// waker's CPU).  A sync wake-up discounts the waker, who is about to sleep, and breaks ties
/// towards the waker.
/// Computed in i128 so that no realistic load can overflow (the kernel uses s64).
pub fn wake_affine_weight_calc(w: &WeightInputs) -> WeightOutcome {
    let mut this_eff = w.this_load as i128;
    if w.sync {
        let current = w.waker_load as i128;
        // The waker carries more load than its CPU shows (its load is still ramping up or
        // the CPU's decayed faster): it is essentially alone there, pull.
        if current > this_eff {
            return WeightOutcome::SyncWakerHeavier;
        }
        this_eff -= current;
    }
    let task = w.task_load as i128;
    this_eff += task;
    if w.wa_bias {
        this_eff *= 100;
    }
    this_eff *= w.prev_capacity as i128;

    // prev still carries the task's (blocked) load; it leaves with the task.
    let mut prev_eff = w.prev_load as i128 - task;
    if w.wa_bias {
        prev_eff *= 100 + (w.imbalance_pct as i128 - 100) / 2;
    }
    prev_eff *= w.this_capacity as i128;
    if w.sync {
        prev_eff += 1;
    }
    if this_eff < prev_eff {
        WeightOutcome::ThisLighter
    } else {
        WeightOutcome::PrevLighter
    }
}

/// `record_wakee()` on the waker (`current`): halve the flip count at most once per second
/// ("tasks that have less than 1 wakeup per jiffy will not have built up many flips"), and
/// count a flip whenever the waker wakes a different task than last time.
pub fn record_wakee(waker: &mut TaskState, wakee_pid: u32, now_ns: u64) {
    const HZ_NS: u64 = 1_000_000_000;
    // time_after(jiffies, decay_ts + HZ)
    if now_ns > waker.wakee_flip_decay_ts.saturating_add(HZ_NS) {
        waker.wakee_flips >>= 1;
        waker.wakee_flip_decay_ts = now_ns;
    }
    if waker.last_wakee != Some(wakee_pid) {
        waker.last_wakee = Some(wakee_pid);
        waker.wakee_flips = waker.wakee_flips.saturating_add(1);
    }
}

/// `wake_wide()`: true (spread, don't pull) when the waker/wakee relation is one-to-many.
/// Both tasks must flip often: the smaller count at least the LLC size, the larger at least
/// LLC size times the smaller.  Then pulling every wakee onto the waker's LLC would
/// overload it, so the wake-up goes wide.
pub fn wake_wide(waker: &TaskState, wakee: &TaskState, llc_size: usize) -> bool {
    let factor = llc_size as u64;
    let (mut master, mut slave) = (waker.wakee_flips as u64, wakee.wakee_flips as u64);
    if master < slave {
        std::mem::swap(&mut master, &mut slave);
    }
    !(slave < factor || master < slave * factor)
}

/// Scratch state of one decision: borrowed inputs, the per-LLC state, and what the
/// decision records.  Methods are the kernel functions, one each.
pub(super) struct Step<'a> {
    pub(super) topo: &'a Topology,
    pub(super) cfg: &'a Config,
    pub(super) cpus: &'a [CpuSnapshot],
    pub(super) llc: &'a mut [LlcState],
    pub(super) rq: &'a mut [RqWakeIdle],
    pub(super) chain: RuleChain,
    pub(super) cnt: Counters,
    pub(super) scanned: u32,
    pub(super) sis_nr: Option<u64>,
    /// `smp_processor_id()` of the waker.
    pub(super) this_cpu: usize,
    /// `in_task()` of the waker.
    pub(super) in_task: bool,
    /// The wake-up's time ([`WakeCtx::now_ns`]).
    pub(super) now_ns: u64,
    /// SIS_UTIL's sum over each LLC, kept by the driver ([`Engine::set_llc_util_sums`]).
    pub(super) llc_util: Option<&'a [u64]>,
}

impl<'a> Step<'a> {
    pub(super) fn new(
        topo: &'a Topology,
        cfg: &'a Config,
        cpus: &'a [CpuSnapshot],
        llc: &'a mut [LlcState],
        rq: &'a mut [RqWakeIdle],
    ) -> Self {
        Step {
            topo,
            cfg,
            cpus,
            llc,
            rq,
            chain: RuleChain::new(),
            cnt: Counters::default(),
            scanned: 0,
            sis_nr: None,
            this_cpu: usize::MAX,
            in_task: true,
            now_ns: 0,
            llc_util: None,
        }
    }

    #[inline]
    pub(super) fn push(&mut self, r: Rule) {
        self.chain.push(r);
    }

    #[inline]
    pub(super) fn snap(&self, cpu: usize) -> &CpuSnapshot {
        self.cpus.get(cpu).unwrap_or(&MISSING_SNAPSHOT)
    }

    #[inline]
    pub(super) fn valid(&self, cpu: usize) -> bool {
        cpu < self.topo.nr_cpus()
    }

    /// `available_idle_cpu()`; an offline or unknown CPU is never idle.
    #[inline]
    pub(super) fn available_idle(&self, cpu: usize) -> bool {
        self.topo.is_online(cpu) && self.snap(cpu).available_idle()
    }

    /// `sched_idle_cpu()`.
    #[inline]
    pub(super) fn sched_idle(&self, cpu: usize) -> bool {
        self.topo.is_online(cpu) && self.snap(cpu).sched_idle()
    }

    /// `available_idle_cpu(cpu) || sched_idle_cpu(cpu)`: good enough to run a wakee now.
    #[inline]
    pub(super) fn idle_or_sched_idle(&self, cpu: usize) -> bool {
        self.available_idle(cpu) || self.sched_idle(cpu)
    }

    /// Delayed-dequeue tasks counted on `cpu`, 0 when the emulation is off.
    #[inline]
    pub(super) fn nr_delayed(&self, cpu: usize) -> u32 {
        if self.cfg.delayed_dequeue {
            let s = self.snap(cpu);
            s.nr_delayed.min(s.nr_running)
        } else {
            0
        }
    }

    /// `capacity_of(cpu)`.
    #[inline]
    pub(super) fn capacity_of(&self, cpu: usize) -> u64 {
        match self.snap(cpu).capacity {
            0 => self.topo.capacity(cpu) as u64,
            c => c as u64,
        }
    }

    /// `sd->imbalance_pct` of a level.
    #[inline]
    pub(super) fn imbalance_pct(&self, level: DomainLevel) -> u32 {
        match level {
            DomainLevel::Smt => self.cfg.imbalance_pct_smt,
            _ => self.cfg.imbalance_pct_llc,
        }
    }

    // ------------------------------------------------------------------------------------
    // select_task_rq() and select_task_rq_fair()
    // ------------------------------------------------------------------------------------

    /// `select_task_rq()`: the class hook unless the task is pinned, then the allowed-CPU
    /// check with `select_fallback_rq()`, then `ttwu_stat()`'s accounting.
    fn select_task_rq(&mut self, task: &mut TaskState, wake: &mut WakeCtx, d: &mut Route) -> usize {
        let n = self.topo.nr_cpus();
        let allowed = task.allowed_or_all(n).and(self.topo.possible());
        let is_ttwu = wake.wake_flags & WAKE_TTWU != 0;
        self.this_cpu = wake.waker_cpu;
        self.in_task = wake.waker_context.in_task();
        self.now_ns = wake.now_ns;
        if is_ttwu {
            self.cnt.nr_wakeups += 1;
            if wake.wake_flags & WAKE_SYNC != 0 {
                self.cnt.nr_wakeups_sync += 1;
            }
        }

        let mut cpu = if allowed.is_single() {
            // p->nr_cpus_allowed == 1: core.c takes cpumask_any(p->cpus_ptr) and never asks
            // the class, so no record_wakee() and no recent_used_cpu update either.
            self.push(Rule::SingleAllowedCpu);
            d.path = Path::SingleCpu;
            allowed.first().unwrap_or(task.prev_cpu)
        } else {
            self.select_task_rq_fair(task, wake, &allowed, d)
        };

        // is_cpu_allowed() failing sends the kernel to select_fallback_rq(): first an
        // allowed online CPU of prev's node, then any allowed online CPU, then (cpuset
        // fallback) any online CPU.  Reached by the prev-mode mask bug, by search-target's
        // unchecked target, and by stale prev CPUs.
        if !(allowed.contains(cpu) && self.topo.is_online(cpu)) {
            let usable = allowed.and(self.topo.online());
            let prev = task.prev_cpu;
            let near = if self.valid(prev) {
                usable.and(self.topo.node_mask(prev)).first()
            } else {
                None
            };
            cpu = match near.or_else(|| usable.first()) {
                Some(c) => {
                    self.push(Rule::FallbackNotAllowed);
                    c
                }
                None => {
                    self.push(Rule::FallbackAnyOnline);
                    self.topo.online().first().unwrap_or(0)
                }
            };
            self.cnt.nr_fallback_not_allowed += 1;
        }

        if is_ttwu {
            self.account_wakeup(cpu, task.prev_cpu, wake.waker_cpu);
        }
        cpu
    }

    /// `ttwu_stat()` plus the project's distance and idle-placement counts.
    fn account_wakeup(&mut self, cpu: usize, prev: usize, waker_cpu: usize) {
        if cpu != prev {
            self.cnt.nr_wakeups_migrate += 1;
        }
        if cpu == waker_cpu {
            self.cnt.nr_wakeups_local += 1;
        } else {
            self.cnt.nr_wakeups_remote += 1;
        }
        if self.idle_or_sched_idle(cpu) {
            self.cnt.nr_wakeups_idle += 1;
        }
        let dist = if self.valid(prev) {
            self.topo.distance(prev, cpu)
        } else {
            Distance::RemoteNode
        };
        match dist {
            Distance::SameCpu => self.cnt.same_cpu += 1,
            Distance::SmtSibling => self.cnt.smt_sibling += 1,
            Distance::SameLlc => self.cnt.same_llc += 1,
            Distance::SameNode => self.cnt.same_node += 1,
            Distance::RemoteNode => self.cnt.remote_node += 1,
        }
    }

    /// Whether a level carries the balance flag of this placement.  SD_BALANCE_WAKE is set
    /// only on asymmetric-capacity domains (not modelled), so a wake-up never takes the slow
    /// path; SD_BALANCE_FORK/EXEC are on every level except far NUMA ones.
    pub(super) fn level_balances(&self, level: DomainLevel, flags: u32) -> bool {
        if flags & WAKE_TTWU != 0 {
            false
        } else if flags & (WAKE_FORK | WAKE_EXEC) != 0 {
            self.topo.wake_affine_level(level)
        } else {
            false
        }
    }

    /// `select_task_rq_fair()`.
    fn select_task_rq_fair(
        &mut self,
        task: &mut TaskState,
        wake: &mut WakeCtx,
        allowed: &CpuSet,
        d: &mut Route,
    ) -> usize {
        let this = wake.waker_cpu;
        let prev = task.prev_cpu;
        let flags = wake.wake_flags;
        let is_ttwu = flags & WAKE_TTWU != 0;
        let sync = wake.sync_hint();
        d.sync = sync;
        if flags & WAKE_SYNC != 0 && wake.waker_exiting {
            self.push(Rule::SyncIgnoredWakerExiting);
        }

        let mut want_affine = false;
        if is_ttwu {
            record_wakee(&mut wake.waker, task.pid, wake.now_ns);
            let llc_size = if self.valid(this) {
                self.topo.llc_size(this)
            } else {
                1
            };
            if wake_wide(&wake.waker, task, llc_size) {
                self.push(Rule::WakeWide);
                self.cnt.nr_wake_wide += 1;
            } else if !allowed.contains(this) {
                self.push(Rule::WakerCpuNotAllowed);
            } else {
                want_affine = true;
                self.push(Rule::WantAffine);
                self.cnt.nr_want_affine += 1;
            }
        }
        d.want_affine = want_affine;

        // for_each_domain(cpu, tmp): the first wake-affine domain that also spans prev
        // ends the walk; wake_affine() then picks between the waker's CPU and prev.  Below
        // it, domains with the placement's balance flag become the slow-path domain.
        let mut new_cpu = prev;
        let mut slow_sd: Option<DomainLevel> = None;
        let mut affine: Option<DomainLevel> = None;
        let topo = self.topo;
        if self.valid(this) {
            for &level in topo.domains(this) {
                if want_affine
                    && self.topo.wake_affine_level(level)
                    && self.topo.span(this, level).contains(prev)
                {
                    affine = Some(level);
                    self.push(match level {
                        DomainLevel::Smt => Rule::AffineDomainSmt,
                        DomainLevel::Llc => Rule::AffineDomainLlc,
                        DomainLevel::Node => Rule::AffineDomainNode,
                        DomainLevel::Machine => Rule::AffineDomainMachine,
                    });
                    if this != prev {
                        new_cpu = self.wake_affine(level, task, wake, this, prev, sync);
                    } else {
                        self.push(Rule::WakerIsPrev);
                    }
                    slow_sd = None;
                    break;
                }
                if self.level_balances(level, flags) {
                    slow_sd = Some(level);
                } else if !want_affine {
                    break;
                }
            }
        }
        if want_affine && affine.is_none() {
            self.push(Rule::NoAffineDomain);
        }
        d.affine_domain = affine;

        if let Some(level) = slow_sd {
            d.path = Path::Slow;
            return self.find_idlest_cpu(level, task, allowed, flags);
        }
        if !is_ttwu {
            d.path = Path::NotAWakeup;
            self.push(Rule::NotAWakeup);
            return prev;
        }
        d.path = Path::Fast;
        d.sis_target = Some(new_cpu);
        let cpu = self.select_idle_sibling(task, wake, prev, new_cpu, allowed);
        // v5.10 only (variant A): the waker records its own CPU as *its* recent CPU, so the
        // next time it is woken it may come back here.  89aafd67 (v5.15) removed this.
        if want_affine && self.cfg.recent_used == RecentUsedMode::V510 {
            wake.waker.recent_used_cpu = Some(this);
        }
        cpu
    }

    /// `wake_affine()`: WA_IDLE, then WA_WEIGHT if undecided.  Returns the waker's CPU only
    /// if one of them chose it; every other outcome keeps prev.
    fn wake_affine(
        &mut self,
        level: DomainLevel,
        task: &TaskState,
        wake: &WakeCtx,
        this: usize,
        prev: usize,
        sync: bool,
    ) -> usize {
        let mut target = None;
        if self.cfg.wa_idle {
            target = self.wake_affine_idle(this, prev, sync);
        }
        if self.cfg.wa_weight && target.is_none() {
            target = self.wake_affine_weight(level, task, wake, (this, prev, sync));
        }
        if !self.cfg.wa_idle && !self.cfg.wa_weight {
            self.push(Rule::WakeAffineNoFeature);
        }
        self.cnt.nr_wakeups_affine_attempts += 1;
        let Some(cpu) = target else {
            return prev;
        };
        // Before 39afe5d6 (v6.4) the exit test was `target == nr_cpumask_bits`, so WA_IDLE
        // choosing prev was tallied as an affine wake-up too.  The CPU is the same.
        if cpu == this || !self.cfg.affine_tally_excludes_prev {
            self.cnt.nr_wakeups_affine += 1;
        }
        cpu
    }

    /// `wake_affine_idle()`, per version:
    /// - v5.10..v6.15: `sync && nr_running(this) == 1` pulls;
    /// - v6.16 (seed 3, `sync_excludes_delayed`): `nr_running - nr_delayed == 1`;
    /// - seed 1 (`sync_requires_task_waker`): additionally `in_task()`.
    pub(super) fn wake_affine_idle(
        &mut self,
        this: usize,
        prev: usize,
        sync: bool,
    ) -> Option<usize> {
        // If this_cpu is idle, the wake-up comes from interrupt context.  Only allow the
        // move if the cache is shared: otherwise an interrupt-heavy workload could drag
        // every task onto the node that owns the IRQ.  If prev is idle and cache-affine
        // too, stay: the interrupt's cache-hot data is no more valuable than prev's, and
        // cpufreq prefers higher utilisation on one CPU.
        if self.available_idle(this) && self.topo.share_cache(this, prev) {
            if self.available_idle(prev) {
                self.push(Rule::WaIdleBothIdleKeepPrev);
                return Some(prev);
            }
            self.push(Rule::WaIdleWakerIdleCacheAffine);
            return Some(this);
        }

        // A sync waker alone on its CPU is about to sleep, so the wakee will get the CPU
        // soon and share its cache.  Seed 3: delayed-dequeue sleepers still sit in
        // nr_running and defeat the "alone" test; the v6.16 fix counts runnable tasks only.
        // Seed 1: when the "waker" is a softirq, nr_running == 1 describes whatever task it
        // interrupted (in Barry Song's case a CPU hog), which will not sleep, so only a
        // task-context waker may claim the shortcut.
        if sync {
            let nr = self.snap(this).nr_running;
            let delayed = self.nr_delayed(this);
            let counted = if self.cfg.sync_excludes_delayed {
                nr - delayed
            } else {
                nr
            };
            if counted == 1 {
                if self.cfg.sync_requires_task_waker && !self.in_task {
                    self.push(Rule::SyncShortcutBlockedIrqWaker);
                    self.cnt.sync_pull_rejected_irq_waker += 1;
                } else {
                    if nr != 1 {
                        self.push(Rule::WaIdleSyncWakerAloneExcludingDelayed);
                        self.cnt.sync_shortcut_delayed_excluded += 1;
                    } else {
                        self.push(Rule::WaIdleSyncWakerAlone);
                    }
                    if !self.in_task {
                        self.push(Rule::SyncShortcutIrqWaker);
                        self.cnt.sync_pull_by_irq_waker += 1;
                    }
                    return Some(this);
                }
            } else if delayed > 0 && nr - delayed == 1 {
                // Only reachable with the fix off: the waker would have been alone.
                self.push(Rule::SyncShortcutBlockedByDelayed);
                self.cnt.sync_shortcut_blocked_by_delayed += 1;
            }
        }

        // d8fcb81f (v5.11): an idle prev ends the question here.  v5.10 has no such test and
        // leaves the choice to WA_WEIGHT, which may pull the task to a busier node.
        if self.cfg.wa_idle_prev_idle && self.available_idle(prev) {
            self.push(Rule::WaIdlePrevIdle);
            return Some(prev);
        }
        self.push(Rule::WaIdleNoDecision);
        None
    }

    /// `wake_affine_weight()`: see [`wake_affine_weight_calc`].  `(this, prev, sync)` as
    /// [`Self::wake_affine`] got them.
    fn wake_affine_weight(
        &mut self,
        level: DomainLevel,
        task: &TaskState,
        wake: &WakeCtx,
        (this, prev, sync): (usize, usize, bool),
    ) -> Option<usize> {
        let w = WeightInputs {
            this_load: self.snap(this).load,
            prev_load: self.snap(prev).load,
            this_capacity: self.capacity_of(this),
            prev_capacity: self.capacity_of(prev),
            task_load: task.load,
            waker_load: wake.waker.load,
            sync,
            imbalance_pct: self.imbalance_pct(level),
            wa_bias: self.cfg.wa_bias,
        };
        match wake_affine_weight_calc(&w) {
            WeightOutcome::SyncWakerHeavier => {
                self.push(Rule::WaWeightSyncWakerHeavier);
                Some(this)
            }
            WeightOutcome::ThisLighter => {
                self.push(Rule::WaWeightThisLighter);
                Some(this)
            }
            WeightOutcome::PrevLighter => {
                self.push(Rule::WaWeightPrevLighter);
                None
            }
        }
    }

    // ------------------------------------------------------------------------------------
    // select_idle_sibling()
    // ------------------------------------------------------------------------------------

    /// `select_idle_sibling(p, prev, target)`: cheap checks in order (target, prev,
    /// per-CPU-kthread stacking, recent_used_cpu), then the LLC scan.  Asymmetric capacity
    /// (`asym_fits_cpu`, `select_idle_capacity`) and cluster groups (v6.7) are not modelled:
    /// every CPU fits and there are no clusters.
    fn select_idle_sibling(
        &mut self,
        task: &mut TaskState,
        wake: &WakeCtx,
        prev: usize,
        target: usize,
        allowed: &CpuSet,
    ) -> usize {
        self.cnt.sis_search += 1;

        if self.idle_or_sched_idle(target) {
            self.push(Rule::SisTargetIdle);
            self.cnt.sis_target_hit += 1;
            return target;
        }

        // If the previous CPU is cache affine and idle, don't be stupid: it keeps the
        // task's cache and costs no migration.
        if prev != target && self.topo.share_cache(prev, target) && self.idle_or_sched_idle(prev) {
            self.push(Rule::SisPrevIdle);
            self.cnt.sis_prev_hit += 1;
            return prev;
        }

        // A per-CPU kthread (e.g. a kworker completing IO) woke the task on the CPU it is
        // running on, and the task last ran here: the kthread will sleep soon, so stack the
        // wakee on it rather than migrate.  8b4e74cc (v5.17) requires in_task(): from an
        // interrupt that preempted the kthread, "current" says nothing about sleeping soon.
        if wake.waker.is_per_cpu_kthread
            && prev == self.this_cpu
            && self.snap(self.this_cpu).nr_running <= 1
        {
            if self.cfg.kthread_stacking_requires_task && !self.in_task {
                self.push(Rule::SisKthreadStackingBlockedIrq);
            } else {
                self.push(Rule::SisKthreadStacking);
                self.cnt.sis_kthread_stack_hit += 1;
                return prev;
            }
        }

        let target = match self.recent_used_cpu(task, prev, target, allowed) {
            RecentOutcome::Return(cpu) => return cpu,
            RecentOutcome::Continue(t) => t,
        };

        self.scan_llc(prev, target, allowed)
    }

    /// The `recent_used_cpu` block, per mode (reference §5, variants A, B', C, D).
    fn recent_used_cpu(
        &mut self,
        task: &mut TaskState,
        prev: usize,
        target: usize,
        allowed: &CpuSet,
    ) -> RecentOutcome {
        let mode = self.cfg.recent_used;
        if mode == RecentUsedMode::Off {
            return RecentOutcome::Continue(target);
        }
        let recent = task.recent_used_cpu;
        // Variants B', C, D: "prev is a potential candidate for the next wake", written on
        // every wake-up that gets this far, hit or miss (89aafd67).  Variant A writes it on a
        // hit only, below.
        if mode != RecentUsedMode::V510 {
            task.recent_used_cpu = Some(prev);
        }
        let Some(recent) = recent else {
            return RecentOutcome::Continue(target);
        };
        // "Eligible" as Mel Gorman's recent_used schedstat patch counts it (Mar 2020, "Track
        // efficiency of task recent_used_cpu"): another CPU than prev and target that shares
        // the target's cache.  Only an eligible CPU is an attempt, a hit or a miss; one in
        // another LLC is never examined, so counting it as a miss would lower the hit rate
        // that 89aafd67's changelog reports (57.14% -> 85.32% on perf bench pipe).
        let eligible = recent != prev && recent != target && self.topo.share_cache(recent, target);
        let usable = eligible && self.idle_or_sched_idle(recent);

        match mode {
            RecentUsedMode::Off => return RecentOutcome::Continue(target),
            RecentUsedMode::SearchTarget => {
                // Mel's variant C: an idle recent CPU is a good place to *start* looking, not
                // necessarily the answer: the scan still prefers a whole idle core (the SMT
                // failure mode of returning it directly) and checks cpus_ptr.
                if usable {
                    self.push(Rule::SisRecentUsedBecomesTarget);
                    self.cnt.sis_recent_used_target += 1;
                    return RecentOutcome::Continue(recent);
                }
            }
            RecentUsedMode::V510 | RecentUsedMode::Prev | RecentUsedMode::PrevFixed => {
                // The mask test reads p->recent_used_cpu.  In variant A that is `recent`;
                // after 89aafd67 wrote prev into it first, it is prev (the bug Hillf Danton
                // spotted, fixed by ae2ad293 in v6.5 to test `recent`).
                let mask_cpu = if mode == RecentUsedMode::Prev {
                    prev
                } else {
                    recent
                };
                if usable && allowed.contains(mask_cpu) {
                    if mode == RecentUsedMode::V510 {
                        // Replace it with prev as prev is a candidate for the next wake.
                        task.recent_used_cpu = Some(prev);
                    }
                    self.push(Rule::SisRecentUsedHit);
                    self.cnt.sis_recent_used_hit += 1;
                    if !allowed.contains(recent) {
                        self.push(Rule::SisRecentUsedMaskBug);
                        self.cnt.sis_recent_used_mask_bug += 1;
                    }
                    return RecentOutcome::Return(recent);
                }
            }
        }
        // Every mode that examined an eligible CPU and did not use it: a miss.
        if eligible {
            self.push(Rule::SisRecentUsedMiss);
            self.cnt.sis_recent_used_miss += 1;
        }
        RecentOutcome::Continue(target)
    }
}

pub(super) enum RecentOutcome {
    Return(usize),
    Continue(usize),
}

/// The policy engine.  See the module documentation of `policy` for the API summary.
#[derive(Clone, Debug)]
pub struct Engine {
    topo: Topology,
    config: Config,
    llc: Vec<LlcState>,
    rq: Vec<RqWakeIdle>,
    counters: Counters,
    /// Each LLC's utilisation sum as SIS_UTIL takes it, when the driver keeps it.
    llc_util: Option<Vec<u64>>,
}

impl Engine {
    /// An engine for `topo` with `config` (validated).
    pub fn new(topo: Topology, config: Config) -> Result<Engine, ConfigError> {
        config.validate()?;
        let llc = vec![LlcState::default(); topo.nr_llcs()];
        let rq = vec![RqWakeIdle::default(); topo.nr_cpus()];
        Ok(Engine {
            topo,
            config,
            llc,
            rq,
            counters: Counters::default(),
            llc_util: None,
        })
    }

    pub fn topology(&self) -> &Topology {
        &self.topo
    }

    pub fn config(&self) -> &Config {
        &self.config
    }

    /// Replaces the configuration (validated first; on error nothing changes).  Per-LLC
    /// state and counters are kept.
    pub fn set_config(&mut self, config: Config) -> Result<(), ConfigError> {
        config.validate()?;
        self.config = config;
        Ok(())
    }

    /// Runtime `set key=value`: applied to a copy and validated, so a rejected value
    /// leaves the engine unchanged.
    pub fn set(&mut self, key: &str, value: &str) -> Result<(), ConfigError> {
        let mut c = self.config;
        c.set(key, value)?;
        self.set_config(c)
    }

    /// CPU hotplug: marks `cpu` online/offline.
    pub fn set_online(
        &mut self,
        cpu: usize,
        online: bool,
    ) -> Result<(), super::topology::TopologyError> {
        self.topo.set_online(cpu, online)
    }

    /// Running totals since creation or the last [`Engine::reset_counters`].
    pub fn counters(&self) -> &Counters {
        &self.counters
    }

    /// Zeroes the totals and returns the old ones.
    pub fn reset_counters(&mut self) -> Counters {
        std::mem::take(&mut self.counters)
    }

    /// Per-LLC state, indexed by `Topology::llc_index`.
    pub fn llc_states(&self) -> &[LlcState] {
        &self.llc
    }

    /// Overrides one LLC's state (scenarios that start from a given hint or scan cost).
    pub fn set_llc_state(&mut self, llc_index: usize, state: LlcState) {
        if let Some(s) = self.llc.get_mut(llc_index) {
            *s = state;
        }
    }

    /// `__update_idle_core()`: `cpu` just went idle; if its whole core is idle now, hint
    /// its LLC that an idle core exists.  Drivers that model idle transitions call this.
    pub fn on_cpu_idle(&mut self, cpu: usize, cpus: &[CpuSnapshot]) {
        if cpu >= self.topo.nr_cpus() || !self.topo.smt_present() {
            return;
        }
        let snap = |c: usize| cpus.get(c).unwrap_or(&MISSING_SNAPSHOT);
        if self
            .topo
            .smt_mask(cpu)
            .iter()
            .all(|c| snap(c).available_idle())
        {
            let l = self.topo.llc_index(cpu);
            self.llc[l].has_idle_cores = true;
        }
    }

    /// Sets every LLC's idle-core hint to what the snapshot says (an idle core exists or
    /// not), for drivers that do not model idle transitions.
    pub fn sync_idle_core_hints(&mut self, cpus: &[CpuSnapshot]) {
        for s in self.llc.iter_mut() {
            s.has_idle_cores = false;
        }
        // Core by core, as the kernel's hint means it (every online sibling idle); the
        // live agent runs this before every batch, so it walks the topology's list of
        // cores instead of testing a CPU mask per CPU.
        let idle = |c: u32| {
            cpus.get(c as usize)
                .is_some_and(CpuSnapshot::available_idle)
        };
        for (l, core) in self.topo.cores() {
            if !self.llc[l].has_idle_cores && core.iter().all(|&c| idle(c)) {
                self.llc[l].has_idle_cores = true;
            }
        }
    }

    /// Sets every LLC's idle-core hint from how many wholly idle cores the driver counts
    /// there (index: the LLC's), the same hint as [`Engine::sync_idle_core_hints`] for a
    /// driver that keeps the count as CPUs change instead of walking every core.
    pub fn set_idle_core_hints(&mut self, idle_cores_per_llc: &[u32]) {
        for (l, s) in self.llc.iter_mut().enumerate() {
            s.has_idle_cores = idle_cores_per_llc.get(l).is_some_and(|&n| n > 0);
        }
    }

    /// Each LLC's sum of `min(util, capacity)` over its online CPUs (index: the LLC's), which
    /// SIS_UTIL otherwise adds up on every decision that reaches the scan, for a driver that
    /// keeps it as CPUs change: zeros at the first call, then as the driver leaves them. The
    /// sums must be those of the snapshot the next [`Engine::select_cpu`] calls get, until
    /// they are changed again or cleared.
    pub fn llc_util_sums_mut(&mut self) -> &mut [u64] {
        let n = self.llc.len();
        self.llc_util.get_or_insert_with(|| vec![0; n])
    }

    /// SIS_UTIL adds the utilisation up itself again.
    pub fn clear_llc_util_sums(&mut self) {
        self.llc_util = None;
    }

    /// Places a waking (or forked) task: `select_task_rq()` with `select_task_rq_fair()`.
    ///
    /// `cpus` is the per-CPU snapshot, indexed by CPU id.  `task` is the wakee; its
    /// `recent_used_cpu` is updated as the configured kernel would.  `wake.waker` is
    /// `current`; `record_wakee()` (and in the v5.10 mode the waker-side `recent_used_cpu`
    /// write) update it.  Allocation-free.
    pub fn select_cpu(
        &mut self,
        cpus: &[CpuSnapshot],
        task: &mut TaskState,
        wake: &mut WakeCtx,
    ) -> Decision {
        let (prev_cpu, waker_cpu) = (task.prev_cpu, wake.waker_cpu);
        let mut route = Route {
            path: Path::Fast,
            sync: false,
            want_affine: false,
            affine_domain: None,
            sis_target: None,
        };
        let mut st = Step::new(&self.topo, &self.config, cpus, &mut self.llc, &mut self.rq);
        st.llc_util = self.llc_util.as_deref();
        let cpu = st.select_task_rq(task, wake, &mut route);
        self.counters.add(&st.cnt);
        // Built once, from the step's own chain and counts: the decision path runs for
        // every wake-up, and these are most of the Decision's bytes.
        Decision {
            cpu,
            chain: st.chain,
            path: route.path,
            prev_cpu,
            waker_cpu,
            sync: route.sync,
            want_affine: route.want_affine,
            affine_domain: route.affine_domain,
            sis_target: route.sis_target,
            sis_nr: st.sis_nr,
            scanned: st.scanned,
            counted: st.cnt,
        }
    }

    /// The newly-idle balance (`newidle_balance()` / `sched_balance_newidle()`): `cpu` has
    /// run out of work; does it pull one of `candidates`, tasks queued (not running) on
    /// other CPUs, and from where?  The gates and the per-domain decision are in
    /// [`super::newidle`]; this form derives the root domain's overload flag from `cpus` and
    /// leaves the cost and random gates open ([`NewidleInputs::default`]).
    ///
    /// With `newidle_skip_pending_wakeup` (seed 2) it does not even look when a wake-up is
    /// already on its way (`ttwu_pending`, or `wakeup_in_flight` for the live agent's own
    /// dispatches): "There is a task waiting to run. No need to search for one."  Without it,
    /// it pulls anyway and the pulled and the woken task then compete for the CPU.
    ///
    /// # The live pull: the same rule in C, with the live scheduler's inputs
    /// BPF's `newidle_balance()` (bpf/balance.bpf.c) decides within ops.dispatch() by
    /// bpf/newidle_rule.h, this rule in C (tests/newidle_rule.rs feeds both the same
    /// inputs and asserts the same verdict, CPU and domain).  The agent hands BPF the
    /// config and each CPU's domains ([`super::newidle::rule_config`],
    /// [`super::newidle::rule_topology`]).  What the live scheduler gives the rule is not
    /// always what this form gets:
    /// - *CPU state*: read live by BPF as the agent's snapshot describes a CPU (its task
    ///   and queue, a decision in flight counting as a task), without delayed sleepers
    ///   (BPF queues none), and `avg_idle` as BPF keeps it, from every idle period.
    /// - *Tasks*: only those waiting in a CPU's own DSQ (a task parked for the agent is in
    ///   no CPU's queue yet, and one already in a local DSQ stays); a task is cache hot
    ///   when it stopped within 500 us, by BPF's stamp.
    /// - *Own wakee*: `--newidle-wait-own-wakee` (live only) keeps a CPU that just woke a
    ///   sync wakee from balancing; the engine has no such input.
    pub fn newidle_pull(
        &mut self,
        cpu: usize,
        cpus: &[CpuSnapshot],
        candidates: &[PullCandidate],
    ) -> NewIdleDecision {
        self.newidle_balance(cpu, cpus, candidates, &NewidleInputs::default())
    }

    /// [`Engine::newidle_pull`] with the kernel's other inputs given: the overload flag,
    /// the domains' `max_newidle_lb_cost` and NI_RANDOM's draw (as `oracle newidle` replays
    /// a recorded balance).
    pub fn newidle_balance(
        &mut self,
        cpu: usize,
        cpus: &[CpuSnapshot],
        candidates: &[PullCandidate],
        inputs: &NewidleInputs,
    ) -> NewIdleDecision {
        let mut st = Step::new(&self.topo, &self.config, cpus, &mut self.llc, &mut self.rq);
        let (pulled, domain) = st.newidle(cpu, candidates, inputs);
        let d = NewIdleDecision {
            cpu,
            pulled,
            domain,
            chain: st.chain,
            counted: st.cnt,
        };
        self.counters.add(&d.counted);
        d
    }
}

impl Step<'_> {
    pub(super) fn runnable(&self, cpu: usize) -> u32 {
        self.snap(cpu).nr_running - self.nr_delayed(cpu)
    }
}

impl PullCandidate {
    pub(super) fn allowed_or_all(&self, nr_cpus: usize) -> CpuSet {
        if self.allowed.is_empty() {
            CpuSet::first_n(nr_cpus)
        } else {
            self.allowed
        }
    }
}
