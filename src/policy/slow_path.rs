//! The slow path of `select_task_rq_fair()`: where a forked or exec'ing task starts.
//!
//! `find_idlest_cpu()` (`sched_balance_find_dst_cpu()` from v6.10) descends the balancing
//! domains from the widest one that carries the placement's flag (SD_BALANCE_FORK or
//! SD_BALANCE_EXEC).  At each level `find_idlest_group()` (`sched_balance_find_dst_group()`)
//! sums every group's load, utilisation, runnable average, running tasks and idle CPUs
//! (`update_sg_wakeup_stats()`), classifies each group as the load balancer does
//! (`group_classify()`: has spare capacity, fully busy, overloaded), picks the idlest
//! remote group (`update_pick_idlest()`) and keeps the local group unless the remote one is
//! clearly better.  Inside the chosen group `find_idlest_group_cpu()` takes the most recently
//! idled CPU, or else the least-loaded one, and the descent continues from there.
//!
//! Read in Debian's 5.10.223, 6.1.176, 6.12.95 and 7.2.13 sources (kernel/sched/fair.c and
//! topology.c).  The versions differ, on symmetric machines, only where the local group of a
//! NUMA domain has spare capacity ([`ForkNumaRule`]).  Not modelled: asymmetric capacity
//! (misfit groups), core scheduling cookies, `sg_imbalanced()` (a load balancer's verdict
//! about pinned tasks), NUMA balancing's preferred node (a new task has none) and cpuidle
//! exit latencies (a VM or a machine without a cpuidle driver has none; with one, the
//! shallowest state wins before the idle stamp is asked).

use super::config::ForkNumaRule;
use super::cpuset::CpuSet;
use super::engine::Step;
use super::rules::Rule;
use super::topology::{DomainLevel, SCHED_CAPACITY_SCALE};
use super::types::{TaskState, WAKE_EXEC, WAKE_FORK};

/// `enum group_type`, the values the wake-up path and the newly-idle balance can meet, in the
/// kernel's order: a lower value is a less busy group.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub(super) enum GroupType {
    HasSpare,
    FullyBusy,
    Overloaded,
}

/// `struct sg_lb_stats` as `update_sg_wakeup_stats()` fills it.
#[derive(Clone, Copy, Debug)]
struct GroupStats {
    load: u64,
    util: u64,
    runnable: u64,
    sum_nr_running: u64,
    idle_cpus: u64,
    capacity: u64,
    weight: u64,
    group_type: GroupType,
    avg_load: u64,
}

impl GroupStats {
    /// `idlest_sgs` before any group is seen: busier than anything real.
    const NONE: GroupStats = GroupStats {
        load: 0,
        util: 0,
        runnable: 0,
        sum_nr_running: 0,
        idle_cpus: 0,
        capacity: 0,
        weight: 0,
        group_type: GroupType::Overloaded,
        avg_load: u32::MAX as u64,
    };

    /// `group_is_overloaded()`: more tasks than CPUs, and the utilisation or the runnable
    /// average says they do not fit.
    fn is_overloaded(&self, pct: u64) -> bool {
        self.sum_nr_running > self.weight
            && (self.capacity * 100 < self.util * pct || self.capacity * pct < self.runnable * 100)
    }

    /// `group_has_capacity()`: fewer tasks than CPUs, or utilisation clearly below capacity
    /// while the runnable average does not say the tasks wait.
    fn has_capacity(&self, pct: u64) -> bool {
        if self.sum_nr_running < self.weight {
            return true;
        }
        if self.capacity * pct < self.runnable * 100 {
            return false;
        }
        self.capacity * 100 > self.util * pct
    }

    /// `group_classify()` without the types only the load balancer sets.
    fn classify(&mut self, pct: u64) {
        self.group_type = if self.is_overloaded(pct) {
            GroupType::Overloaded
        } else if !self.has_capacity(pct) {
            GroupType::FullyBusy
        } else {
            GroupType::HasSpare
        };
        // avg_load only means something for a group without spare capacity.
        if self.group_type != GroupType::HasSpare && self.capacity > 0 {
            self.avg_load = self.load.saturating_mul(SCHED_CAPACITY_SCALE as u64) / self.capacity;
        }
    }

    /// `update_pick_idlest()`: whether `self` is idler than `idlest`.  Among equals the first
    /// group seen stays.
    fn idler_than(&self, idlest: &GroupStats) -> bool {
        if self.group_type != idlest.group_type {
            return self.group_type < idlest.group_type;
        }
        match self.group_type {
            GroupType::Overloaded | GroupType::FullyBusy => self.avg_load < idlest.avg_load,
            // The most idle CPUs; among as many, the lowest utilisation.
            GroupType::HasSpare => {
                self.idle_cpus > idlest.idle_cpus
                    || (self.idle_cpus == idlest.idle_cpus && self.util < idlest.util)
            }
        }
    }
}

impl Step<'_> {
    /// `find_idlest_cpu(sd, p, cpu, prev_cpu, sd_flag)`: `level` is the widest domain of the
    /// placing CPU that carries the flag.
    pub(super) fn find_idlest_cpu(
        &mut self,
        level: DomainLevel,
        task: &TaskState,
        allowed: &CpuSet,
        flags: u32,
    ) -> usize {
        self.cnt.nr_slow_path += 1;
        if flags & (WAKE_FORK | WAKE_EXEC) != 0 {
            self.cnt.nr_fork_placements += 1;
        }
        let this = self.this_cpu;
        let online = *self.topo.online();
        if self
            .topo
            .span(this, level)
            .and(allowed)
            .and(&online)
            .is_empty()
        {
            self.push(Rule::SlowPathNoAllowedCpu);
            return task.prev_cpu;
        }
        // An exec'ing task is the one running on its CPU: the group statistics leave it out.
        let running_on = (flags & WAKE_EXEC != 0).then_some(task.prev_cpu);

        let mut cpu = this;
        let mut new_cpu = this;
        let mut sd = Some(level);
        let mut last = Rule::SlowPathLocalGroupKept;
        while let Some(l) = sd {
            if !self.level_balances(l, flags) {
                sd = self.child_level(cpu, l);
                continue;
            }
            let Some(group) = self.find_idlest_group(l, task, cpu, allowed, running_on) else {
                sd = self.child_level(cpu, l);
                continue;
            };
            let (c, why) = self.find_idlest_group_cpu(&group, allowed, cpu);
            new_cpu = c;
            last = why;
            if new_cpu == cpu {
                sd = self.child_level(cpu, l);
                continue;
            }
            // Go on below the level just balanced, among the new CPU's domains.
            let weight = self.topo.span(cpu, l).and(&online).count();
            cpu = new_cpu;
            sd = None;
            for &t in self.topo.domains(cpu) {
                if weight <= self.topo.span(cpu, t).and(&online).count() {
                    break;
                }
                if self.level_balances(t, flags) {
                    sd = Some(t);
                }
            }
        }
        self.push(last);
        new_cpu
    }

    /// `sd->child` of `cpu`'s domain at `level`: the level below it among `cpu`'s domains.
    pub(super) fn child_level(&self, cpu: usize, level: DomainLevel) -> Option<DomainLevel> {
        let d = self.topo.domains(cpu);
        let i = d.iter().position(|&l| l == level)?;
        i.checked_sub(1).map(|j| d[j])
    }

    /// The sched group of `cpu`'s domain at `level` that holds `member`: the span of the
    /// level below (the kernel builds a domain's groups from its child's spans), or the CPU
    /// alone at the lowest level.
    pub(super) fn group_of(&self, cpu: usize, level: DomainLevel, member: usize) -> CpuSet {
        let online = self.topo.online();
        match self.child_level(cpu, level) {
            Some(child) => self.topo.span(member, child).and(online),
            None => CpuSet::from_cpus([member]),
        }
    }

    /// `update_sg_wakeup_stats()` of `group` for `task`.
    fn group_stats(
        &self,
        level: DomainLevel,
        group: &CpuSet,
        allowed: &CpuSet,
        task: &TaskState,
        running_on: Option<usize>,
    ) -> GroupStats {
        let mut s = GroupStats {
            weight: group.count() as u64,
            group_type: GroupType::HasSpare,
            avg_load: 0,
            ..GroupStats::NONE
        };
        for i in group.iter() {
            s.capacity += self.capacity_of(i);
        }
        // v7.x sums the allowed CPUs only; earlier kernels every CPU of the group.  They
        // differ for a task pinned to part of a group, which a fork rarely is.
        for i in group.and(allowed).iter() {
            let snap = self.snap(i);
            let local = running_on == Some(i);
            let (task_load, task_util) = if local {
                (task.load, task.util as u64)
            } else {
                (0, 0)
            };
            // Loads are u64 in a scenario: saturate where the kernel's unsigned long would wrap.
            s.load = s.load.saturating_add(snap.load.saturating_sub(task_load));
            // cpu_util_without(): the larger of util_avg and util_est, within capacity.
            let util = (snap.util as u64).saturating_sub(task_util);
            let util_est = (snap.util_est as u64).saturating_sub(task_util);
            s.util += util.max(util_est).min(self.topo.capacity(i) as u64);
            // The runnable average is never below util_avg; a snapshot without one (0)
            // reads as its util_avg.
            s.runnable += (snap.runnable.max(snap.util) as u64).saturating_sub(task_util);
            let nr = (snap.nr_running as u64).saturating_sub(local as u64);
            s.sum_nr_running += nr;
            // idle_cpu_without(): the idle task runs (or the exec'ing task, which is leaving
            // for good), nothing else is queued and no wake-up is on its way.
            if nr == 0 && self.topo.is_online(i) && (snap.idle || local) && !snap.ttwu_pending {
                s.idle_cpus += 1;
            }
        }
        s.classify(self.imbalance_pct(level) as u64);
        s
    }

    /// `find_idlest_group(sd, p, this_cpu)`: the group to move to, or `None` to stay in the
    /// local group and look one level down.
    fn find_idlest_group(
        &mut self,
        level: DomainLevel,
        task: &TaskState,
        this: usize,
        allowed: &CpuSet,
        running_on: Option<usize>,
    ) -> Option<CpuSet> {
        let span = self.topo.span(this, level).and(self.topo.online());
        let mut seen = CpuSet::new();
        let mut local: Option<GroupStats> = None;
        let mut idlest: Option<(CpuSet, GroupStats)> = None;
        // The groups in the kernel's list order: the local one first, then as met walking
        // the span from the placing CPU.
        for first in span.iter_wrap(this) {
            if seen.contains(first) {
                continue;
            }
            let group = self.group_of(this, level, first);
            seen = seen.or(&group);
            if group.and(allowed).is_empty() {
                continue;
            }
            let sgs = self.group_stats(level, &group, allowed, task, running_on);
            if group.contains(this) {
                local = Some(sgs);
            } else if sgs.idler_than(idlest.as_ref().map_or(&GroupStats::NONE, |i| &i.1)) {
                idlest = Some((group, sgs));
            }
        }
        let (idlest, idl) = idlest?;
        let Some(loc) = local else {
            // The local group holds no allowed CPU.
            self.push(Rule::SlowPathIdlestGroup);
            return Some(idlest);
        };
        if loc.group_type != idl.group_type {
            return (loc.group_type > idl.group_type).then(|| {
                self.push(Rule::SlowPathIdlestGroup);
                idlest
            });
        }
        let pct = self.imbalance_pct(level) as u64;
        let numa = level == DomainLevel::Machine && self.topo.is_numa();
        match loc.group_type {
            GroupType::Overloaded | GroupType::FullyBusy => {
                // A nice-0 task's load times the domain's margin.
                let imbalance = SCHED_CAPACITY_SCALE as u64 * (pct - 100) / 100;
                // Across nodes, the remote group must stay lighter with the margin added.
                if numa && idl.avg_load.saturating_add(imbalance) >= loc.avg_load {
                    return None;
                }
                if idl.avg_load >= loc.avg_load.saturating_add(imbalance) {
                    return None;
                }
                if u128::from(loc.avg_load) * 100 <= u128::from(pct) * u128::from(idl.avg_load) {
                    return None;
                }
            }
            GroupType::HasSpare => {
                if numa && self.numa_keeps_local(this, allowed, &loc, &idl) {
                    self.push(Rule::SlowPathNumaKeptLocal);
                    return None;
                }
                // The most idle CPUs wins; utilisation would be steadier, but idle CPUs are
                // what a new task can run on.
                if loc.idle_cpus >= idl.idle_cpus {
                    return None;
                }
            }
        }
        self.push(Rule::SlowPathIdlestGroup);
        Some(idlest)
    }

    /// Whether a NUMA domain whose local group has spare capacity keeps the task on its
    /// node: close to its parent (the wake-up source) and its memory.  Periodic balancing
    /// moves it later if it has to.
    fn numa_keeps_local(
        &self,
        this: usize,
        allowed: &CpuSet,
        loc: &GroupStats,
        idl: &GroupStats,
    ) -> bool {
        match self.cfg.fork_numa_rule {
            // v5.10: any idle CPU on the local node keeps the task there.
            ForkNumaRule::LocalIdle => loc.idle_cpus > 0,
            // By v6.1 (Mel Gorman's imb_numa_nr): an imbalance of at most 2 idle CPUs is
            // allowed while the local node, with the new task, runs no more tasks than
            // imb_numa_nr (or the task's allowed CPUs there, if fewer).
            ForkNumaRule::ImbNumaNr => {
                let local_allowed = self.topo.node_mask(this).and(allowed).count() as u64;
                let imb_numa_nr = self.topo.imb_numa_nr(this).min(local_allowed);
                let imbalance = loc.idle_cpus.abs_diff(idl.idle_cpus);
                let dst_running = loc.sum_nr_running + 1;
                let allowed_imbalance = if dst_running > imb_numa_nr {
                    imbalance
                } else if imbalance <= 2 {
                    0
                } else {
                    imbalance
                };
                allowed_imbalance == 0
            }
        }
    }

    /// `find_idlest_group_cpu(group, p, this_cpu)`: a CPU running only SCHED_IDLE tasks, else
    /// the most recently idled idle CPU (the warmest cache), else the least-loaded CPU.  An
    /// idle CPU without an idle stamp (it was woken since it last went idle through
    /// schedule(), or never was) is passed over, as the kernel's strict comparison does.
    fn find_idlest_group_cpu(
        &self,
        group: &CpuSet,
        allowed: &CpuSet,
        this: usize,
    ) -> (usize, Rule) {
        if group.count() == 1 {
            let only = group.first().unwrap_or(this);
            return (only, Rule::SlowPathSingleCpuGroup);
        }
        let mut latest_stamp = 0u64;
        let mut shallowest: Option<usize> = None;
        let mut min_load = u64::MAX;
        let mut least_loaded = this;
        for i in group.and(allowed).iter() {
            if self.sched_idle(i) {
                return (i, Rule::SlowPathSchedIdleCpu);
            }
            if self.available_idle(i) {
                let stamp = self.snap(i).idle_stamp_ns;
                if stamp > latest_stamp {
                    latest_stamp = stamp;
                    shallowest = Some(i);
                }
            } else if shallowest.is_none() {
                let load = self.snap(i).load;
                if load < min_load {
                    min_load = load;
                    least_loaded = i;
                }
            }
        }
        match shallowest {
            Some(c) => (c, Rule::SlowPathIdlestIdle),
            None => (least_loaded, Rule::SlowPathIdlestLeastLoaded),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn group(nr: u64, weight: u64, util: u64, runnable: u64) -> GroupStats {
        let mut s = GroupStats {
            load: 1024 * nr,
            util,
            runnable,
            sum_nr_running: nr,
            capacity: 1024 * weight,
            weight,
            avg_load: 0,
            ..GroupStats::NONE
        };
        s.classify(117);
        s
    }

    /// group_classify(): 5.10 :8572-8612, 7.2 :11757-11800.
    #[test]
    fn groups_classify_as_the_load_balancer_does() {
        // Fewer tasks than CPUs: spare capacity whatever the averages say.
        assert_eq!(group(3, 4, 4096, 8000).group_type, GroupType::HasSpare);
        // As many tasks as CPUs, utilisation near capacity: fully busy, not overloaded.
        let g = group(4, 4, 3900, 3900);
        assert_eq!(g.group_type, GroupType::FullyBusy);
        assert_eq!(g.avg_load, 1024, "avg_load = load scaled by capacity");
        // As many tasks as CPUs, utilisation well below capacity: spare.
        assert_eq!(group(4, 4, 2000, 2000).group_type, GroupType::HasSpare);
        // ... unless the runnable average says they wait (capacity * 117 < runnable * 100).
        assert_eq!(group(4, 4, 2000, 4900).group_type, GroupType::FullyBusy);
        // More tasks than CPUs, and they wait: overloaded.
        assert_eq!(group(6, 4, 2000, 4900).group_type, GroupType::Overloaded);
        // More tasks than CPUs that neither fill the CPUs nor wait: spare capacity.
        assert_eq!(group(6, 4, 1000, 1000).group_type, GroupType::HasSpare);
    }

    /// update_pick_idlest(): the lower type, then the lower avg_load or the more idle CPUs
    /// and lower utilisation; among equals the first group seen stays.
    #[test]
    fn the_idlest_group_is_picked_as_the_kernel_does() {
        let spare = |idle, util| GroupStats {
            idle_cpus: idle,
            util,
            group_type: GroupType::HasSpare,
            ..GroupStats::NONE
        };
        assert!(spare(1, 900).idler_than(&GroupStats::NONE));
        assert!(spare(2, 900).idler_than(&spare(1, 0)));
        assert!(spare(1, 100).idler_than(&spare(1, 200)));
        assert!(
            !spare(1, 200).idler_than(&spare(1, 200)),
            "a tie keeps the first"
        );
        let busy = |avg_load| GroupStats {
            avg_load,
            group_type: GroupType::FullyBusy,
            ..GroupStats::NONE
        };
        assert!(busy(500).idler_than(&busy(600)));
        assert!(!busy(600).idler_than(&busy(600)));
        assert!(!busy(1).idler_than(&spare(0, 1024)), "spare beats busy");
    }
}
