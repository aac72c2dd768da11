//! The newly-idle balance: `newidle_balance()` (`sched_balance_newidle()` from v6.10), and
//! the part of `load_balance()` (`sched_balance_rq()`) that decides whether it pulls and
//! from which CPU.
//!
//! A CPU that has run out of work first asks whether a search can pay:
//! - since v5.14 (seed 2, e5e678e4), not while a wake-up is already on its way to it;
//! - not unless the root domain is overloaded (some CPU has had two tasks since the last
//!   balance at the top level cleared the flag);
//! - not unless its expected idle time, `rq->avg_idle`, exceeds a threshold: 500 us
//!   (`sysctl_sched_migration_cost`) in v5.10; the innermost domain's `max_newidle_lb_cost`
//!   since Vincent Guittot's "sched/fair: Remove sysctl_sched_migration_cost condition"
//!   (v5.16; 6.1's source reads it so).
//!
//! Then it walks its domains innermost first.  It stops at the first domain whose
//! `max_newidle_lb_cost` exceeds `avg_idle` (the kernel adds the time already spent in the
//! domains below; that time is not an input here, so it counts as nothing).  Where the
//! kernel has NI_RANDOM (Debian's 6.1.y and 6.12.y, and 7.x), a draw weighted by the
//! domain's past success may skip it; the draw is an input ([`NewidleInputs::drawn`]).
//!
//! In a domain it balances as `find_busiest_group()` and `calculate_imbalance()` do for an
//! idle CPU.  The domain's groups are its child's spans (single CPUs at the lowest level),
//! each classified by its task count against its CPUs (overloaded: more tasks than CPUs;
//! fully busy: as many; else spare capacity).  The busiest remote group is the busiest type,
//! then the highest average load (overloaded, fully busy) or the fewest idle CPUs, then the
//! most tasks (spare capacity).  Nothing moves when the local group is busier, or when the
//! busiest group is not overloaded and either holds a single task or has at most one idle
//! CPU fewer than the local group, unless a level that prefers siblings (every level with
//! a child) sees more than one task to even out.  A local group with spare capacity then
//! fills it from an overloaded group beyond the LLC, or evens out the tasks (a level that
//! prefers siblings, or single-CPU groups) or the idle CPUs, halved; across nodes a small
//! imbalance stays (`adjust_numa_imbalance()`, v5.10's or v5.18's, with
//! [`super::config::ForkNumaRule`], which the same change set made).  A busy local group
//! pulls only towards the domain's average load.  The source is the busiest group's CPU
//! with the most runnable tasks (by utilisation, when filling capacity), then the highest
//! load; it gives up a queued task if it has more than one, the first candidate there that
//! may run here and is not cache hot (`task_hot()`).
//!
//! Simplified: groups are classified by task count alone, without the utilisation and
//! runnable tests of `group_classify()` (the kernel's recorded balances have no runnable
//! average, and the utilisation test alone agreed less with them); how much load or
//! utilisation moves is not modelled beyond "a task", nor are misfit, asymmetric packing,
//! `sg_imbalanced()`, active balance, or the escape that moves a hot task after repeated
//! failures.

use super::config::{Config, ForkNumaRule};
use super::cpuset::CpuSet;
use super::engine::{PullCandidate, Pulled, Step};
use super::rules::Rule;
use super::slow_path::GroupType;
use super::topology::{DomainLevel, SCHED_CAPACITY_SCALE, Topology};

/// v5.10's threshold on `avg_idle`: `sysctl_sched_migration_cost`, 500 us by default.
pub const MIGRATION_COST_NS: u64 = 500_000;

/// What the live scheduler's copy of this decision (bpf/newidle_rule.h, run by BPF when a
/// CPU goes idle) reads of one CPU's place in the topology.  [`rule_topology`] computes it
/// from the same [`Topology`] the engine decides on, so that the two walk the same domains
/// and groups; tests/newidle_rule.rs holds the C to this file's decisions.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct RuleCpuTopology {
    pub online: bool,
    /// Bit [`rule_level`] of each of its domains ([`Topology::domains`]).
    pub levels: u32,
    /// The lowest online CPU of its core, its LLC and its node: CPUs with the same one share
    /// the domain, and a domain's groups are its child's.
    pub first: [u32; 3],
    pub imb_numa_nr: u32,
    pub capacity: u32,
}

/// A domain level's bit in [`RuleCpuTopology::levels`] (`enum wl_domain_level`).
pub fn rule_level(level: DomainLevel) -> u32 {
    match level {
        DomainLevel::Smt => 0,
        DomainLevel::Llc => 1,
        DomainLevel::Node => 2,
        DomainLevel::Machine => 3,
    }
}

/// [`RuleCpuTopology`] of every CPU.
pub fn rule_topology(topo: &Topology) -> Vec<RuleCpuTopology> {
    let online = topo.online();
    let first = |mask: &CpuSet, cpu: usize| mask.and(online).first().unwrap_or(cpu) as u32;
    (0..topo.nr_cpus())
        .map(|cpu| RuleCpuTopology {
            online: topo.is_online(cpu),
            levels: topo
                .domains(cpu)
                .iter()
                .fold(0, |m, &l| m | 1 << rule_level(l)),
            first: [
                first(topo.smt_mask(cpu), cpu),
                first(topo.llc_mask(cpu), cpu),
                first(topo.node_mask(cpu), cpu),
            ],
            imb_numa_nr: topo.imb_numa_nr(cpu).min(u64::from(u32::MAX)) as u32,
            capacity: topo.capacity(cpu),
        })
        .collect()
}

/// The engine's configuration as bpf/newidle_rule.h reads it (`struct wl_newidle_rule`),
/// with the inputs the live scheduler lacks fixed as [`NewidleInputs::default`] leaves
/// them: no domain costs, no NI_RANDOM draw, no failed-balance escape.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct RuleConfig {
    pub skip_pending: bool,
    /// [`ForkNumaRule::ImbNumaNr`] (v5.18's `adjust_numa_imbalance()`), else v5.10's.
    pub numa_imb_nr: bool,
    pub imbalance_pct_smt: u32,
    pub imbalance_pct_llc: u32,
    pub is_numa: bool,
    /// What [`entry_gate`] asks of `avg_idle` with every domain costing nothing.
    pub avg_idle_min_ns: u64,
}

/// [`RuleConfig`] of `cfg` on `topo`.
pub fn rule_config(cfg: &Config, topo: &Topology) -> RuleConfig {
    RuleConfig {
        skip_pending: cfg.newidle_skip_pending_wakeup,
        numa_imb_nr: cfg.fork_numa_rule == ForkNumaRule::ImbNumaNr,
        imbalance_pct_smt: cfg.imbalance_pct_smt,
        imbalance_pct_llc: cfg.imbalance_pct_llc,
        is_numa: topo.is_numa(),
        avg_idle_min_ns: if cfg.newidle_gate_on_domain_cost {
            0
        } else {
            MIGRATION_COST_NS
        },
    }
}

/// What a newly-idle balance reads besides the CPUs' snapshots.  The default derives the
/// overload flag from the snapshots and leaves the cost and random gates open: what the
/// simulator and the live agent know.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct NewidleInputs<'a> {
    /// `rd->overload` (`rd->overloaded` since v6.9).  `None`: set when any online CPU has
    /// two or more tasks, as `add_nr_running()` sets it (the kernel clears it only at the
    /// top-level balance, so it can lag).
    pub overloaded: Option<bool>,
    /// `sd->max_newidle_lb_cost` of the CPU's domains, innermost first, ns; a domain past
    /// the end costs nothing.
    pub max_lb_cost_ns: &'a [u64],
    /// NI_RANDOM's draw: bit `i` set when domain `i` (innermost first) may balance.  `None`:
    /// no draw (v5.10, or a kernel without NI_RANDOM); every domain may.
    pub drawn: Option<u64>,
    /// Bit `i` set when domain `i` has failed periodic balancing more often than its
    /// `cache_nice_tries`: `can_migrate_task()` moves a cache-hot task there too.
    pub hot_escape: u64,
}

/// The gates a newly-idle balance meets before its first domain, seed 2's aside: the root
/// domain's overload flag, then `avg_idle` against the version's threshold (500 us in
/// v5.10, the innermost domain's `max_newidle_lb_cost` from v5.16) and against that
/// domain's own cost, which v5.10's walk checks first thing.  The rule that stops the
/// balance, or `None` when it goes on to balance.  The engine's balance and `oracle
/// newidle`'s account of recorded ones both ask this.
pub fn entry_gate(
    cfg: &Config,
    overloaded: bool,
    avg_idle_ns: u64,
    innermost_cost_ns: u64,
) -> Option<Rule> {
    if !overloaded {
        return Some(Rule::NewidleRootNotOverloaded);
    }
    let threshold = if cfg.newidle_gate_on_domain_cost {
        innermost_cost_ns
    } else {
        MIGRATION_COST_NS.max(innermost_cost_ns)
    };
    (avg_idle_ns < threshold).then_some(Rule::NewidleIdleTooShort)
}

/// The part of `struct sg_lb_stats` the decision reads.
#[derive(Clone, Copy, Debug)]
struct Group {
    cpus: CpuSet,
    weight: u32,
    /// `sum_nr_running`: tasks queued, the running ones and delayed sleepers included.
    nr_running: u32,
    /// `sum_h_nr_running`: tasks that can run (delayed sleepers left out).
    runnable: u32,
    idle_cpus: u32,
    /// Distinct cores among its CPUs.
    cores: u32,
    load: u64,
    capacity: u64,
    avg_load: u64,
    group_type: GroupType,
}

impl Group {
    /// `update_sd_pick_busiest()`: whether `self` is busier than `busiest`.  Among equals
    /// the first group seen stays.
    fn busier_than(&self, busiest: &Group) -> bool {
        if self.group_type != busiest.group_type {
            return self.group_type > busiest.group_type;
        }
        match self.group_type {
            GroupType::Overloaded | GroupType::FullyBusy => self.avg_load > busiest.avg_load,
            GroupType::HasSpare => {
                self.idle_cpus < busiest.idle_cpus
                    || (self.idle_cpus == busiest.idle_cpus && self.nr_running > busiest.nr_running)
            }
        }
    }
}

impl Step<'_> {
    pub(super) fn newidle(
        &mut self,
        cpu: usize,
        candidates: &[PullCandidate],
        inputs: &NewidleInputs,
    ) -> (Option<Pulled>, Option<DomainLevel>) {
        if !self.topo.is_online(cpu) {
            self.push(Rule::NewidleCpuOffline);
            return (None, None);
        }
        if self.runnable(cpu) > 0 {
            self.push(Rule::NewidleCpuHasWork);
            return (None, None);
        }
        self.cnt.newidle_balance += 1;
        let s = *self.snap(cpu);
        if self.cfg.newidle_skip_pending_wakeup {
            // e5e678e4: the wakee will be enqueued as soon as this CPU switches to idle;
            // searching other CPUs only adds latency and steals a task that now has to
            // share this CPU with the wakee.
            if s.ttwu_pending {
                self.push(Rule::NewidleSkipPendingWakeup);
                self.cnt.newidle_pull_skipped_pending += 1;
                return (None, None);
            }
            if s.wakeup_in_flight {
                self.push(Rule::NewidleSkipWakeupInFlight);
                self.cnt.newidle_pull_skipped_in_flight += 1;
                return (None, None);
            }
        }
        let overloaded = inputs.overloaded.unwrap_or_else(|| {
            self.topo
                .online()
                .iter()
                .any(|c| self.snap(c).nr_running >= 2)
        });
        // Nothing waits anywhere, or the idle period is expected to be shorter than a
        // search: do not delay the next wake-up with one.
        let cost = |i: usize| inputs.max_lb_cost_ns.get(i).copied().unwrap_or(0);
        if let Some(rule) = entry_gate(self.cfg, overloaded, s.avg_idle_ns, cost(0)) {
            self.push(rule);
            if rule == Rule::NewidleRootNotOverloaded {
                self.cnt.newidle_skipped_not_overloaded += 1;
            } else {
                self.cnt.newidle_skipped_short_idle += 1;
            }
            return (None, None);
        }
        let topo = self.topo;
        for (i, &level) in topo.domains(cpu).iter().enumerate() {
            if s.avg_idle_ns < cost(i) {
                self.push(Rule::NewidleIdleTooShort);
                self.cnt.newidle_skipped_short_idle += 1;
                return (None, None);
            }
            if inputs.drawn.is_some_and(|m| i >= 64 || m & (1 << i) == 0) {
                self.push(Rule::NewidleDomainNotDrawn);
                continue;
            }
            // task_hot() never holds a task within an SMT core (SD_SHARE_CPUCAPACITY).
            let hot_moves =
                level == DomainLevel::Smt || (i < 64 && inputs.hot_escape & (1 << i) != 0);
            if let Some(p) = self.balance_domain(cpu, level, candidates, hot_moves) {
                self.push(match level {
                    DomainLevel::Smt => Rule::NewidlePullDomainSmt,
                    DomainLevel::Llc => Rule::NewidlePullDomainLlc,
                    DomainLevel::Node => Rule::NewidlePullDomainNode,
                    DomainLevel::Machine => Rule::NewidlePullDomainMachine,
                });
                self.cnt.newidle_pulls += 1;
                if s.ttwu_pending || s.wakeup_in_flight {
                    self.push(Rule::NewidlePullDespitePending);
                    self.cnt.newidle_pull_despite_pending += 1;
                }
                return (Some(p), Some(level));
            }
        }
        self.push(Rule::NewidleNothingToPull);
        self.cnt.newidle_nothing_to_pull += 1;
        (None, None)
    }

    /// `load_balance(cpu, sd, CPU_NEWLY_IDLE)` in the domain at `level`, as far as whether
    /// and whence it pulls.
    fn balance_domain(
        &self,
        cpu: usize,
        level: DomainLevel,
        candidates: &[PullCandidate],
        hot_moves: bool,
    ) -> Option<Pulled> {
        let online = *self.topo.online();
        let span = self.topo.span(cpu, level).and(&online);
        let mut seen = CpuSet::new();
        let mut local: Option<Group> = None;
        let mut busiest: Option<Group> = None;
        let (mut total_load, mut total_capacity) = (0u64, 0u64);
        for member in span.iter() {
            if seen.contains(member) {
                continue;
            }
            let g = self.lb_group(cpu, level, member);
            seen = seen.or(&g.cpus);
            total_load = total_load.saturating_add(g.load);
            total_capacity += g.capacity;
            if g.cpus.contains(cpu) {
                local = Some(g);
            } else if g.runnable > 0 && busiest.is_none_or(|b| g.busier_than(&b)) {
                busiest = Some(g);
            }
        }
        let (Some(local), Some(busiest)) = (local, busiest) else {
            return None;
        };
        let sd_avg_load =
            total_load.saturating_mul(SCHED_CAPACITY_SCALE as u64) / total_capacity.max(1);
        // find_busiest_group()'s verdicts, then calculate_imbalance().
        if local.group_type > busiest.group_type {
            return None;
        }
        if local.group_type == GroupType::Overloaded
            && (local.avg_load >= busiest.avg_load
                || local.avg_load >= sd_avg_load
                || 100 * busiest.avg_load <= self.imbalance_pct(level) as u64 * local.avg_load)
        {
            return None;
        }
        // SD_PREFER_SIBLING: every level but NUMA sets it, so a level with a child spreads
        // tasks over its groups by count.
        let prefer_sibling = self.child_level(cpu, level).is_some();
        let siblings = sibling_imbalance(&busiest, &local);
        let spread = prefer_sibling && local.group_type == GroupType::HasSpare && siblings > 1;
        if !spread
            && busiest.group_type != GroupType::Overloaded
            && ((busiest.weight > 1 && local.idle_cpus <= busiest.idle_cpus + 1)
                || busiest.runnable == 1)
        {
            return None;
        }
        let numa = level == DomainLevel::Machine && self.topo.is_numa();
        let by_util = if local.group_type == GroupType::HasSpare {
            // Fill the spare capacity from an overloaded group beyond the LLC.
            if busiest.group_type > GroupType::FullyBusy
                && !matches!(level, DomainLevel::Smt | DomainLevel::Llc)
            {
                true
            } else {
                let mut imb = if busiest.weight == 1 || prefer_sibling {
                    siblings
                } else {
                    local.idle_cpus.saturating_sub(busiest.idle_cpus) as u64
                };
                match self.cfg.fork_numa_rule {
                    // v5.10: halved, then nothing across nodes while the busiest runs two.
                    ForkNumaRule::LocalIdle => {
                        imb >>= 1;
                        if numa && busiest.nr_running <= 2 {
                            imb = 0;
                        }
                    }
                    // v5.18+: adjust_numa_imbalance() with imb_numa_nr, then halved.
                    ForkNumaRule::ImbNumaNr => {
                        if numa
                            // dst_running = the local group's tasks and the one to come.
                            && u64::from(local.nr_running) < self.topo.imb_numa_nr(cpu)
                            && imb <= 2
                        {
                            imb = 0;
                        }
                        imb >>= 1;
                    }
                }
                if imb == 0 {
                    return None;
                }
                false
            }
        } else {
            // migrate_load: only towards the domain's average load.
            if local.avg_load >= busiest.avg_load || local.avg_load >= sd_avg_load {
                return None;
            }
            false
        };
        // find_busiest_queue(): for tasks, the most runnable tasks; for utilisation, the
        // busiest CPU with a task waiting; then the highest load.
        let src = busiest
            .cpus
            .iter()
            .filter(|&c| !by_util || self.snap(c).nr_running > 1)
            .max_by_key(|&c| {
                let s = self.snap(c);
                let first = if by_util {
                    s.util as u64
                } else {
                    self.runnable(c) as u64
                };
                (first, s.load, std::cmp::Reverse(c))
            })?;
        // load_balance() detaches only from a queue with a task besides the running one.
        if self.snap(src).nr_running < 2 || self.runnable(src) < 2 {
            return None;
        }
        let n = self.topo.nr_cpus();
        candidates
            .iter()
            .find(|c| {
                c.src_cpu == src && (hot_moves || !c.cache_hot) && c.allowed_or_all(n).contains(cpu)
            })
            .map(|c| Pulled {
                pid: c.pid,
                src_cpu: src,
            })
    }

    /// `update_sg_lb_stats()` of the group of `cpu`'s domain at `level` that holds `member`.
    fn lb_group(&self, cpu: usize, level: DomainLevel, member: usize) -> Group {
        let cpus = self.group_of(cpu, level, member);
        let mut g = Group {
            cpus,
            weight: cpus.count() as u32,
            nr_running: 0,
            runnable: 0,
            idle_cpus: 0,
            cores: 0,
            load: 0,
            capacity: 0,
            avg_load: 0,
            group_type: GroupType::HasSpare,
        };
        for c in cpus.iter() {
            let s = self.snap(c);
            g.nr_running += s.nr_running;
            g.runnable += self.runnable(c);
            g.load = g.load.saturating_add(s.load);
            g.capacity += self.capacity_of(c);
            if s.nr_running == 0 && !s.ttwu_pending {
                g.idle_cpus += 1;
            }
            // A core counts at its first CPU in the group.
            g.cores += (self.topo.smt_mask(c).and(&cpus).first() == Some(c)) as u32;
        }
        g.group_type = match g.nr_running.cmp(&g.weight) {
            std::cmp::Ordering::Greater => GroupType::Overloaded,
            std::cmp::Ordering::Equal => GroupType::FullyBusy,
            std::cmp::Ordering::Less => GroupType::HasSpare,
        };
        g.avg_load = g.load.saturating_mul(SCHED_CAPACITY_SCALE as u64) / g.capacity.max(1);
        g
    }
}

/// `sibling_imbalance()` (v6.6+; before it, the same for groups of as many cores): the
/// tasks to even out between the busiest and the local group, in proportion to their
/// cores; 0 when the busiest runs nothing.
fn sibling_imbalance(busiest: &Group, local: &Group) -> u64 {
    let (b, l) = (u64::from(busiest.nr_running), u64::from(local.nr_running));
    if b == 0 {
        return 0;
    }
    let (cb, cl) = (
        u64::from(busiest.cores.max(1)),
        u64::from(local.cores.max(1)),
    );
    if cb == cl {
        return b.saturating_sub(l);
    }
    let imb = (cl * b).saturating_sub(cb * l);
    let imb = (2 * imb + cl + cb) / (cl + cb);
    if imb <= 1 && l == 0 && b > 1 { 2 } else { imb }
}

#[cfg(test)]
mod tests {
    use super::super::test_util::{engine, shape};
    use super::super::{CpuSet, CpuSnapshot, DomainLevel, PullCandidate};
    use super::*;

    fn cand(pid: u32, src_cpu: usize) -> PullCandidate {
        PullCandidate {
            pid,
            src_cpu,
            allowed: CpuSet::new(),
            load: 1024,
            cache_hot: false,
        }
    }

    /// 2 nodes x 2 cores x 2 threads: CPU 0's domains are SMT {0,1}, LLC {0-3} (groups
    /// {0,1} and {2,3}) and the machine (groups {0-3} and {4-7}).  CPU 0 goes idle with a
    /// long expected idle time; the rest run one task each.
    fn machine() -> (Topology, Vec<CpuSnapshot>) {
        let topo = shape(2, 1, 2, 2);
        let mut cpus = vec![CpuSnapshot::busy(1); 8];
        cpus[0] = CpuSnapshot {
            avg_idle_ns: 2_000_000,
            ..CpuSnapshot::idle()
        };
        (topo, cpus)
    }

    fn inputs(costs: &[u64]) -> NewidleInputs<'_> {
        NewidleInputs {
            overloaded: Some(true),
            max_lb_cost_ns: costs,
            drawn: None,
            hot_escape: 0,
        }
    }

    use super::super::Topology;

    /// newidle_balance() in v5.10 (`avg_idle < sysctl_sched_migration_cost ||
    /// !rd->overload`: goto out) and sched_balance_newidle() in 6.1.176 (`!rd->overload ||
    /// avg_idle < sd->max_newidle_lb_cost`), then per domain `avg_idle < curr_cost +
    /// sd->max_newidle_lb_cost`: break.
    #[test]
    fn the_gates_are_each_versions() {
        let (topo, mut cpus) = machine();
        cpus[5].nr_running = 3;
        let c = [cand(50, 5)];
        let pull = |preset: &str, cpus: &[CpuSnapshot], i: &NewidleInputs| {
            let d = engine(&topo, preset).newidle_balance(0, cpus, &c, i);
            (d.pulled.map(|p| p.src_cpu), d.chain.names())
        };
        assert_eq!(pull("v5.10", &cpus, &inputs(&[])).0, Some(5));
        // Not overloaded: no search at all.
        let quiet = NewidleInputs {
            overloaded: Some(false),
            ..inputs(&[])
        };
        assert_eq!(
            pull("mainline", &cpus, &quiet),
            (None, vec!["newidle_root_not_overloaded"])
        );
        // Derived from the CPUs when not given: CPU 5's queue sets it.
        let derived = NewidleInputs {
            overloaded: None,
            ..inputs(&[])
        };
        assert_eq!(pull("mainline", &cpus, &derived).0, Some(5));
        // 300 us of expected idle time: below v5.10's 500 us, above a cheap domain's cost.
        cpus[0].avg_idle_ns = 300_000;
        let cheap = inputs(&[10_000, 20_000, 30_000]);
        assert_eq!(
            pull("v5.10", &cpus, &cheap),
            (None, vec!["newidle_idle_too_short"])
        );
        assert_eq!(pull("v6.0", &cpus, &cheap).0, Some(5));
        // The machine level costs more than the idle time: the walk stops before it.
        let dear = inputs(&[10_000, 20_000, 400_000]);
        assert_eq!(
            pull("mainline", &cpus, &dear),
            (None, vec!["newidle_idle_too_short"])
        );
        // NI_RANDOM's draw skips the level it does not let through, and only that one.
        let drawn = NewidleInputs {
            drawn: Some(0b011),
            ..cheap
        };
        assert_eq!(
            pull("mainline", &cpus, &drawn).1,
            ["newidle_domain_not_drawn", "newidle_nothing_to_pull"]
        );
        let drawn = NewidleInputs {
            drawn: Some(0b100),
            ..cheap
        };
        assert_eq!(
            pull("mainline", &cpus, &drawn).1,
            [
                "newidle_domain_not_drawn",
                "newidle_domain_not_drawn",
                "newidle_pull_domain_machine"
            ]
        );
    }

    /// find_busiest_group() for an idle CPU (7.2.13, 6.1.176): `if (busiest->group_type !=
    /// group_overloaded) { ... if (busiest->group_weight > 1 && local->idle_cpus <=
    /// (busiest->idle_cpus + 1)) goto out_balanced; if (busiest->sum_h_nr_running == 1)
    /// goto out_balanced; }`, then find_busiest_queue() and `if (busiest->nr_running > 1)`.
    #[test]
    fn the_busiest_group_decides() {
        let (topo, mut cpus) = machine();
        let c = [cand(20, 2), cand(21, 3), cand(50, 5), cand(60, 6)];
        let pull = |cpus: &[CpuSnapshot]| {
            let mut e = engine(&topo, "mainline");
            let d = e.newidle_balance(0, cpus, &c, &inputs(&[]));
            (d.pulled.map(|p| (p.pid, p.src_cpu)), d.domain)
        };
        // Every CPU runs one: no queue holds a second task, nothing moves anywhere.
        assert_eq!(pull(&cpus), (None, None));
        // Core {2,3} holds three tasks on two CPUs: overloaded, so the LLC pulls from its
        // busiest CPU although the local core has an idle CPU to spare.
        cpus[2].nr_running = 2;
        cpus[3].nr_running = 1;
        assert_eq!(pull(&cpus), (Some((20, 2)), Some(DomainLevel::Llc)));
        // Core {2,3} with two tasks on one CPU and one idle CPU: not overloaded, and the
        // local core ({0 idle, 1 busy}) has no more idle CPUs than it, plus one: balanced.
        // The machine level then sees node 1 overloaded (five tasks on four CPUs).
        cpus[3] = CpuSnapshot::idle();
        cpus[5].nr_running = 2;
        assert_eq!(pull(&cpus), (Some((50, 5)), Some(DomainLevel::Machine)));
        // With one task fewer over there, node 1 has four tasks on four CPUs: not
        // overloaded, and node 0's two idle CPUs are not more than node 1's one plus one.
        cpus[6] = CpuSnapshot::idle();
        assert_eq!(pull(&cpus), (None, None));
        // Node 0 idle but for CPU 0's going idle: four idle CPUs against one, so node 1
        // gives up a task from its busiest CPU.
        cpus[1] = CpuSnapshot::idle();
        cpus[2] = CpuSnapshot::idle();
        assert_eq!(pull(&cpus), (Some((50, 5)), Some(DomainLevel::Machine)));
        // The only queued task is cache hot: it stays, and nothing else is eligible.
        let mut hot = c;
        hot[2].cache_hot = true;
        let mut e = engine(&topo, "mainline");
        let d = e.newidle_balance(0, &cpus, &hot, &inputs(&[]));
        assert_eq!(d.pulled, None);
        assert_eq!(d.chain.names(), ["newidle_nothing_to_pull"]);
    }

    /// calculate_imbalance() across nodes (7.2.13 and 5.10.223): a node with spare capacity
    /// keeps a pair of communicating tasks (adjust_numa_imbalance(): v5.10 while the busiest
    /// node runs two; v5.18+ while the local node, with one more, runs no more than
    /// imb_numa_nr and the imbalance is at most 2); a third task is worth pulling.
    #[test]
    fn a_node_keeps_a_pair_but_not_three() {
        let topo = shape(2, 1, 2, 2);
        let mut cpus = vec![CpuSnapshot::idle(); 8];
        cpus[0].avg_idle_ns = 2_000_000;
        cpus[4] = CpuSnapshot::busy(2);
        let c = [cand(40, 4)];
        for preset in ["v5.10", "mainline"] {
            let mut e = engine(&topo, preset);
            let d = e.newidle_balance(0, &cpus, &c, &inputs(&[]));
            assert_eq!(d.pulled, None, "{preset}");
        }
        cpus[4] = CpuSnapshot::busy(3);
        for preset in ["v5.10", "mainline"] {
            let mut e = engine(&topo, preset);
            let d = e.newidle_balance(0, &cpus, &c, &inputs(&[]));
            assert_eq!(d.pulled.map(|p| p.src_cpu), Some(4), "{preset}");
            assert_eq!(d.domain, Some(DomainLevel::Machine));
        }
    }

    #[test]
    fn siblings_are_evened_by_cores() {
        let g = |nr_running: u32, cores: u32| Group {
            cpus: CpuSet::new(),
            weight: 2 * cores,
            nr_running,
            runnable: nr_running,
            idle_cpus: 0,
            cores,
            load: 0,
            capacity: 0,
            avg_load: 0,
            group_type: GroupType::HasSpare,
        };
        assert_eq!(sibling_imbalance(&g(0, 2), &g(0, 2)), 0);
        assert_eq!(sibling_imbalance(&g(5, 2), &g(1, 2)), 4);
        assert_eq!(sibling_imbalance(&g(1, 2), &g(3, 2)), 0);
        // 4 tasks on 2 cores against none on 1: (2*(1*4 - 2*0) + 3) / 3 = 3.
        assert_eq!(sibling_imbalance(&g(4, 2), &g(0, 1)), 3);
        // 2 on 4 cores against none on 1: (2*2 + 5) / 5 = 1, raised to 2 for an empty group.
        assert_eq!(sibling_imbalance(&g(2, 4), &g(0, 1)), 2);
    }

    /// can_migrate_task() and task_hot() (7.2.13, 5.10.223): a task that ran within
    /// sysctl_sched_migration_cost stays, except within an SMT core (`if (env->sd->flags &
    /// SD_SHARE_CPUCAPACITY) return 0;`) and where the domain has failed more often than its
    /// cache_nice_tries.
    #[test]
    fn a_hot_task_moves_only_within_its_core_or_after_failures() {
        let (topo, mut cpus) = machine();
        let hot = |pid, src| PullCandidate {
            cache_hot: true,
            ..cand(pid, src)
        };
        // CPU 1 (CPU 0's sibling) runs two: its waiting task moves although hot.
        cpus[1].nr_running = 2;
        let mut e = engine(&topo, "mainline");
        let d = e.newidle_balance(0, &cpus, &[hot(10, 1)], &inputs(&[]));
        assert_eq!(
            (d.pulled.map(|p| p.src_cpu), d.domain),
            (Some(1), Some(DomainLevel::Smt))
        );
        // CPU 2 (the other core) instead: hot, it stays.
        cpus[1].nr_running = 1;
        cpus[2].nr_running = 3;
        let d = e.newidle_balance(0, &cpus, &[hot(20, 2)], &inputs(&[]));
        assert_eq!(d.pulled, None);
        // The LLC level has failed often enough: it moves.
        let escape = NewidleInputs {
            hot_escape: 0b010,
            ..inputs(&[])
        };
        let d = e.newidle_balance(0, &cpus, &[hot(20, 2)], &escape);
        assert_eq!(d.pulled.map(|p| p.src_cpu), Some(2));
        // A cold task behind the hot one on the same CPU moves without any escape.
        let d = e.newidle_balance(0, &cpus, &[hot(20, 2), cand(21, 2)], &inputs(&[]));
        assert_eq!(d.pulled.map(|p| p.pid), Some(21));
    }
}
