//! Where the agent puts a task, until the CFS engine (src/policy) drives it.
//!
//! The interim rule proves the transport on its own: prev CPU if idle, else
//! an idle CPU sharing prev's LLC (scanning from prev, like fair.c's
//! for_each_cpu_wrap), else prev. A CPU chosen earlier in the same batch
//! counts as busy, so a burst of wake-ups does not pile onto one idle CPU.

use super::bpf_intf::wakeup_msg;
use super::bpf_skel::types::cpu_state;

/// CPU topology as the agent needs it: per CPU its core, LLC and node, and
/// per LLC its CPUs.
#[derive(Clone, Debug)]
pub struct CpuTopology {
    pub core_of: Vec<usize>,
    pub llc_of: Vec<usize>,
    pub node_of: Vec<usize>,
    pub llc_cpus: Vec<Vec<usize>>,
}

impl CpuTopology {
    /// From (cpu, core, llc, node) rows; ids need not be dense.
    pub fn from_rows(rows: &[(usize, usize, usize, usize)]) -> CpuTopology {
        let nr = rows.iter().map(|r| r.0 + 1).max().unwrap_or(0);
        let mut t = CpuTopology {
            core_of: vec![usize::MAX; nr],
            llc_of: vec![usize::MAX; nr],
            node_of: vec![usize::MAX; nr],
            llc_cpus: Vec::new(),
        };
        for &(cpu, core, llc, node) in rows {
            t.core_of[cpu] = core;
            t.llc_of[cpu] = llc;
            t.node_of[cpu] = node;
            if t.llc_cpus.len() <= llc {
                t.llc_cpus.resize(llc + 1, Vec::new());
            }
            t.llc_cpus[llc].push(cpu);
        }
        for cpus in &mut t.llc_cpus {
            cpus.sort_unstable();
        }
        t
    }

    /// The machine's topology as scx_utils reads it from sysfs.
    pub fn from_scx(topo: &scx_utils::Topology) -> CpuTopology {
        let rows: Vec<_> = topo
            .all_cpus
            .values()
            .map(|c| (c.id, c.core_id, c.llc_id, c.node_id))
            .collect();
        CpuTopology::from_rows(&rows)
    }

    pub fn nr_cpus(&self) -> usize {
        self.llc_of.len()
    }

    pub fn is_online(&self, cpu: usize) -> bool {
        cpu < self.nr_cpus() && self.llc_of[cpu] != usize::MAX
    }

    /// How far a task moved, in the kernel's domain levels.
    pub fn distance(&self, from: usize, to: usize) -> Distance {
        if !self.is_online(from) || !self.is_online(to) {
            return Distance::RemoteNode;
        }
        if from == to {
            Distance::SameCpu
        } else if self.core_of[from] == self.core_of[to] {
            Distance::SmtSibling
        } else if self.llc_of[from] == self.llc_of[to] {
            Distance::SameLlc
        } else if self.node_of[from] == self.node_of[to] {
            Distance::SameNode
        } else {
            Distance::RemoteNode
        }
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Distance {
    SameCpu,
    SmtSibling,
    SameLlc,
    SameNode,
    RemoteNode,
}

/// Why the interim rule chose a CPU.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Reason {
    PrevIdle,
    LlcIdle,
    PrevBusy,
    FirstAllowed,
}

/// Racy read-only view of BPF's per-CPU table.
pub struct CpuView<'a> {
    states: &'a [cpu_state],
}

impl<'a> CpuView<'a> {
    pub fn new(states: &'a [cpu_state]) -> Self {
        CpuView { states }
    }

    /// Idle as the kernel's idle_cpu() sees it: nothing running, nothing
    /// queued, no wake-up on its way.
    pub fn is_idle(&self, cpu: usize) -> bool {
        let Some(s) = self.states.get(cpu) else { return false };
        // SAFETY: plain loads from the mmap'ed .bss that BPF updates
        // concurrently; volatile so each call sees the current value.
        unsafe {
            std::ptr::read_volatile(&s.idle) != 0
                && std::ptr::read_volatile(&s.ttwu_pending) == 0
                && std::ptr::read_volatile(&s.dsq_queued) == 0
        }
    }
}

fn allowed(msg: &wakeup_msg, cpu: usize) -> bool {
    msg.cpus_allowed
        .get(cpu / 64)
        .is_some_and(|w| w & (1u64 << (cpu % 64)) != 0)
}

pub struct Placer {
    topo: CpuTopology,
    /// CPUs handed a task in the current batch.
    claimed: Vec<bool>,
}

impl Placer {
    pub fn new(topo: CpuTopology) -> Placer {
        let n = topo.nr_cpus();
        Placer { topo, claimed: vec![false; n] }
    }

    pub fn nr_cpus(&self) -> usize {
        self.topo.nr_cpus()
    }

    pub fn topology(&self) -> &CpuTopology {
        &self.topo
    }

    pub fn begin_batch(&mut self) {
        self.claimed.iter_mut().for_each(|c| *c = false);
    }

    fn free_idle(&self, view: &CpuView, msg: &wakeup_msg, cpu: usize) -> bool {
        self.topo.is_online(cpu) && allowed(msg, cpu) && !self.claimed[cpu] && view.is_idle(cpu)
    }

    pub fn place(&mut self, msg: &wakeup_msg, view: &CpuView) -> (i32, Reason) {
        let prev = msg.prev_cpu.max(0) as usize;
        let (cpu, reason) = if self.free_idle(view, msg, prev) {
            (prev, Reason::PrevIdle)
        } else if let Some(c) = self.idle_in_llc(view, msg, prev) {
            (c, Reason::LlcIdle)
        } else if self.topo.is_online(prev) && allowed(msg, prev) {
            (prev, Reason::PrevBusy)
        } else {
            match (0..self.nr_cpus()).find(|&c| self.topo.is_online(c) && allowed(msg, c)) {
                Some(c) => (c, Reason::FirstAllowed),
                // Nothing we know is allowed: BPF keeps it on its own CPU.
                None => (prev, Reason::FirstAllowed),
            }
        };
        if cpu < self.claimed.len() {
            self.claimed[cpu] = true;
        }
        (cpu as i32, reason)
    }

    fn idle_in_llc(&self, view: &CpuView, msg: &wakeup_msg, prev: usize) -> Option<usize> {
        let llc = *self.topo.llc_of.get(prev)?;
        let cpus = self.topo.llc_cpus.get(llc)?;
        let start = cpus.iter().position(|&c| c == prev).unwrap_or(0);
        (0..cpus.len())
            .map(|i| cpus[(start + i) % cpus.len()])
            .find(|&c| c != prev && self.free_idle(view, msg, c))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// 2 nodes x 1 LLC x 2 cores x 2 threads: cpus 0-3 node 0, 4-7 node 1.
    fn topo8() -> CpuTopology {
        let rows: Vec<_> = (0..8).map(|c| (c, c / 2, c / 4, c / 4)).collect();
        CpuTopology::from_rows(&rows)
    }

    fn msg(prev: i32, allowed: &[usize]) -> wakeup_msg {
        // SAFETY: wakeup_msg is plain integers; all-zero is a valid value.
        let mut m: wakeup_msg = unsafe { std::mem::zeroed() };
        m.prev_cpu = prev;
        for &c in allowed {
            m.cpus_allowed[c / 64] |= 1 << (c % 64);
        }
        m
    }

    fn states(idle: &[usize]) -> Vec<cpu_state> {
        (0..8)
            .map(|c| {
                let mut s = cpu_state::default();
                s.idle = idle.contains(&c) as u32;
                s
            })
            .collect()
    }

    #[test]
    fn prev_idle_wins() {
        let mut p = Placer::new(topo8());
        let st = states(&[2, 5]);
        assert_eq!(p.place(&msg(5, &[0, 1, 2, 3, 4, 5, 6, 7]), &CpuView::new(&st)), (5, Reason::PrevIdle));
    }

    #[test]
    fn idle_cpu_in_prev_llc_scanning_from_prev() {
        let mut p = Placer::new(topo8());
        let st = states(&[1, 2, 6]);
        // prev 4 busy; LLC {4..7}: 6 is idle. CPUs 1, 2 are idle but remote.
        assert_eq!(p.place(&msg(4, &[0, 1, 2, 3, 4, 5, 6, 7]), &CpuView::new(&st)), (6, Reason::LlcIdle));
        // The wrap starts at prev: from 3, the scan order is 0, 1, 2.
        let mut p = Placer::new(topo8());
        assert_eq!(p.place(&msg(3, &[0, 1, 2, 3]), &CpuView::new(&st)), (1, Reason::LlcIdle));
    }

    #[test]
    fn burst_does_not_pile_on_one_idle_cpu() {
        let mut p = Placer::new(topo8());
        let st = states(&[6]);
        let all = [0, 1, 2, 3, 4, 5, 6, 7];
        p.begin_batch();
        assert_eq!(p.place(&msg(4, &all), &CpuView::new(&st)).0, 6);
        assert_eq!(p.place(&msg(4, &all), &CpuView::new(&st)), (4, Reason::PrevBusy));
        p.begin_batch();
        assert_eq!(p.place(&msg(4, &all), &CpuView::new(&st)).0, 6);
    }

    #[test]
    fn never_leaves_the_allowed_set() {
        let mut p = Placer::new(topo8());
        let st = states(&[0, 1, 2, 3, 4, 5, 6, 7]);
        // prev 1 not allowed (affinity changed), only cpu 7 is.
        assert_eq!(p.place(&msg(1, &[7]), &CpuView::new(&st)), (7, Reason::FirstAllowed));
        let mut busy = states(&[]);
        busy[7].idle = 0;
        assert_eq!(p.place(&msg(1, &[7]), &CpuView::new(&busy)), (7, Reason::FirstAllowed));
    }

    #[test]
    fn pending_wakeup_or_queued_task_is_not_idle() {
        let mut st = states(&[2]);
        st[2].ttwu_pending = 1;
        assert!(!CpuView::new(&st).is_idle(2));
        let mut st = states(&[2]);
        st[2].dsq_queued = 1;
        assert!(!CpuView::new(&st).is_idle(2));
    }

    #[test]
    fn distances_follow_the_domains() {
        let t = topo8();
        assert_eq!(t.distance(0, 0), Distance::SameCpu);
        assert_eq!(t.distance(0, 1), Distance::SmtSibling);
        assert_eq!(t.distance(0, 3), Distance::SameLlc);
        assert_eq!(t.distance(0, 5), Distance::RemoteNode);
    }
}
