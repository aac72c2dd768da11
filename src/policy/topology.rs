//! The policy's own CPU topology: CPU → SMT core, LLC, NUMA node, online, capacity.
//!
//! Two constructors: [`Topology::from_shape`] (`nodes x llcs_per_node x cores_per_llc x
//! threads`, for tests, scenarios and the simulator) and [`Topology::from_cpus`] (per-CPU
//! core/LLC/node ids, which the live layer fills from `scx_utils::Topology`; this module
//! stays free of scx_utils so it can be built and tested anywhere).
//!
//! Everything the decision path needs is precomputed here, once: the SMT sibling mask, the
//! LLC span, the node span of every CPU, the LLC size (`sd_llc_size`) and the dense LLC index
//! the engine keys its per-LLC state (`sd_llc_shared`) by.  Spans contain online CPUs only,
//! just as the kernel rebuilds its sched domains over the active CPUs.
//!
//! Sched domains are modelled as the levels SMT ⊂ LLC ⊂ NODE ⊂ MACHINE.  As in the kernel's
//! domain builder, a level whose span equals its child's is degenerate and dropped, so a
//! machine without SMT has no SMT domain and a node with one LLC has a single LLC domain.
//!
//! Not modelled: clusters (`CONFIG_SCHED_CLUSTER`, the v6.7 cluster-aware scan), asymmetric
//! capacity domains (`sd_asym_cpucapacity`, `select_idle_capacity`), NUMA distance tables
//! beyond "near" and "far".

use serde::{Deserialize, Serialize};

use super::cpuset::{CpuSet, MAX_CPUS};

/// Full capacity of a CPU (SCHED_CAPACITY_SCALE).
pub const SCHED_CAPACITY_SCALE: u32 = 1024;

/// One sched-domain level, innermost first.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum DomainLevel {
    /// SMT siblings of one core (SD_SHARE_CPUCAPACITY; imbalance_pct 110).
    Smt,
    /// CPUs sharing the last-level cache (the MC domain; `sd_llc`; imbalance_pct 117).
    Llc,
    /// One NUMA node (PKG/DIE level when a node holds several LLCs).
    Node,
    /// The whole machine (the NUMA level spanning every node).
    Machine,
}

impl DomainLevel {
    pub fn name(self) -> &'static str {
        match self {
            DomainLevel::Smt => "smt",
            DomainLevel::Llc => "llc",
            DomainLevel::Node => "node",
            DomainLevel::Machine => "machine",
        }
    }
}

/// Static description of one CPU, as given to [`Topology::from_cpus`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct CpuDesc {
    /// SMT core id; CPUs with equal `(node, core)` are siblings.
    pub core: u32,
    /// Last-level-cache id; CPUs with equal `llc` share a cache (`cpus_share_cache`).
    pub llc: u32,
    /// NUMA node id.
    pub node: u32,
    #[serde(default = "default_true")]
    pub online: bool,
    /// Original capacity (`arch_scale_cpu_capacity`), 1024 = the biggest CPU.
    #[serde(default = "default_capacity")]
    pub capacity: u32,
}

fn default_true() -> bool {
    true
}
fn default_capacity() -> u32 {
    SCHED_CAPACITY_SCALE
}

/// Why a topology could not be built.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum TopologyError {
    NoCpus,
    TooManyCpus(usize),
    NoOnlineCpu,
    ZeroDimension(&'static str),
    /// Two SMT siblings (same core id) sit in different LLCs or nodes.
    CoreSplitAcrossCaches {
        cpu: usize,
        core: u32,
    },
    /// One LLC id appears on two NUMA nodes.
    LlcSplitAcrossNodes {
        cpu: usize,
        llc: u32,
    },
    /// A [`TopologySpec`] that is not exactly one of `shape` or `cpus`.
    Spec(&'static str),
}

impl std::fmt::Display for TopologyError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            TopologyError::NoCpus => write!(f, "topology has no CPUs"),
            TopologyError::TooManyCpus(n) => {
                write!(
                    f,
                    "topology has {n} CPUs; the policy supports at most {MAX_CPUS}"
                )
            }
            TopologyError::NoOnlineCpu => write!(f, "topology has no online CPU"),
            TopologyError::ZeroDimension(d) => write!(f, "topology shape: {d} must be at least 1"),
            TopologyError::CoreSplitAcrossCaches { cpu, core } => write!(
                f,
                "cpu {cpu}: core {core} has siblings in a different LLC or node; SMT siblings \
                 must share their cache and node"
            ),
            TopologyError::Spec(why) => write!(f, "topology: {why}"),
            TopologyError::LlcSplitAcrossNodes { cpu, llc } => {
                write!(f, "cpu {cpu}: LLC {llc} spans two NUMA nodes")
            }
        }
    }
}

impl std::error::Error for TopologyError {}

/// `nodes x llcs_per_node x cores_per_llc x threads`, see [`Topology::from_shape`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Shape {
    pub nodes: usize,
    pub llcs_per_node: usize,
    pub cores_per_llc: usize,
    pub threads: usize,
}

/// How a scenario file describes a topology: exactly one of `shape` or `cpus`, plus CPUs
/// to take offline and whether the NUMA level is wake-affine.
///
/// `{"shape": {"nodes": 2, "llcs_per_node": 1, "cores_per_llc": 32, "threads": 1}}` or
/// `{"cpus": [{"core": 0, "llc": 0, "node": 0}, ...], "offline": "3"}`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TopologySpec {
    #[serde(default)]
    pub shape: Option<Shape>,
    #[serde(default)]
    pub cpus: Option<Vec<CpuDesc>>,
    #[serde(default)]
    pub offline: CpuSet,
    #[serde(default = "default_true")]
    pub numa_wake_affine: bool,
}

impl TopologySpec {
    pub fn build(&self) -> Result<Topology, TopologyError> {
        let mut t = match (&self.shape, &self.cpus) {
            (Some(s), None) => {
                Topology::from_shape(s.nodes, s.llcs_per_node, s.cores_per_llc, s.threads)?
            }
            (None, Some(c)) => Topology::from_cpus(c)?,
            (Some(_), Some(_)) => {
                return Err(TopologyError::Spec("give either shape or cpus, not both"));
            }
            (None, None) => return Err(TopologyError::Spec("give shape or cpus")),
        };
        for c in self.offline.iter() {
            if c < t.nr_cpus() {
                t.set_online(c, false)?;
            }
        }
        t.set_numa_wake_affine(self.numa_wake_affine);
        Ok(t)
    }
}

/// One entry of [`Topology::cores`]: its LLC and where its CPUs are in `core_cpus`.
#[derive(Clone, Copy, Debug)]
struct CoreSpan {
    llc: u32,
    start: u32,
    end: u32,
}

/// The machine as the policy sees it.  Immutable after construction except through
/// [`Topology::set_online`], which recomputes the spans.
#[derive(Clone, Debug)]
pub struct Topology {
    desc: Vec<CpuDesc>,
    /// Dense LLC index per CPU (0..nr_llcs), keys the engine's per-LLC state.
    llc_index: Vec<u32>,
    nr_llcs: usize,
    smt_mask: Vec<CpuSet>,
    llc_mask: Vec<CpuSet>,
    node_mask: Vec<CpuSet>,
    /// `llc_mask[cpu].count()`, kept because every wake-up reads it (`sd_llc_size`).
    llc_size: Vec<u32>,
    online: CpuSet,
    /// CPUs `0..nr_cpus()`, online or not (`cpu_possible_mask`).
    possible: CpuSet,
    /// Every online core once (the online CPUs of one `smt_mask`), with its LLC; see
    /// [`Topology::cores`].
    cores: Vec<CoreSpan>,
    /// The CPUs of `cores`, core after core.
    core_cpus: Vec<u32>,
    /// Each CPU's index in `cores`, `u32::MAX` for an offline CPU.
    core_index: Vec<u32>,
    /// Per CPU, its non-degenerate domain levels innermost first.
    domains: Vec<([DomainLevel; 4], u8)>,
    smt_present: bool,
    /// Whether the NUMA (machine) level carries SD_WAKE_AFFINE.  The kernel clears
    /// SD_WAKE_AFFINE (and fork/exec balancing) on NUMA levels whose node distance exceeds
    /// `node_reclaim_distance` (30); a typical two-socket machine has distance 20-21, so the
    /// default is `true`, which is what lets seed 1's wakee be pulled across nodes.
    numa_wake_affine: bool,
}

impl Topology {
    /// A symmetric machine: `nodes x llcs_per_node x cores_per_llc x threads`.
    ///
    /// CPU ids are assigned with SMT siblings adjacent: CPU `i` is thread `i % threads` of
    /// core `i / threads`, cores fill an LLC, LLCs fill a node.  (x86 firmware usually
    /// enumerates the first thread of every core before the second ones; use
    /// [`Topology::from_cpus`] to reproduce that numbering.)
    pub fn from_shape(
        nodes: usize,
        llcs_per_node: usize,
        cores_per_llc: usize,
        threads: usize,
    ) -> Result<Topology, TopologyError> {
        for (v, name) in [
            (nodes, "nodes"),
            (llcs_per_node, "llcs_per_node"),
            (cores_per_llc, "cores_per_llc"),
            (threads, "threads"),
        ] {
            if v == 0 {
                return Err(TopologyError::ZeroDimension(name));
            }
        }
        let n = nodes
            .checked_mul(llcs_per_node)
            .and_then(|x| x.checked_mul(cores_per_llc))
            .and_then(|x| x.checked_mul(threads))
            .unwrap_or(usize::MAX);
        if n > MAX_CPUS {
            return Err(TopologyError::TooManyCpus(n));
        }
        let mut desc = Vec::with_capacity(n);
        for cpu in 0..n {
            let core = cpu / threads;
            let llc = core / cores_per_llc;
            let node = llc / llcs_per_node;
            desc.push(CpuDesc {
                core: core as u32,
                llc: llc as u32,
                node: node as u32,
                online: true,
                capacity: SCHED_CAPACITY_SCALE,
            });
        }
        Topology::from_cpus(&desc)
    }

    /// Builds the topology from per-CPU descriptions; index = CPU id.  Core ids are scoped
    /// by node (two nodes may both have a "core 0"), LLC ids are global.
    pub fn from_cpus(cpus: &[CpuDesc]) -> Result<Topology, TopologyError> {
        let n = cpus.len();
        if n == 0 {
            return Err(TopologyError::NoCpus);
        }
        if n > MAX_CPUS {
            return Err(TopologyError::TooManyCpus(n));
        }
        for (i, a) in cpus.iter().enumerate() {
            for b in cpus.iter().take(i) {
                if a.node == b.node && a.core == b.core && a.llc != b.llc {
                    return Err(TopologyError::CoreSplitAcrossCaches {
                        cpu: i,
                        core: a.core,
                    });
                }
                if a.llc == b.llc && a.node != b.node {
                    return Err(TopologyError::LlcSplitAcrossNodes { cpu: i, llc: a.llc });
                }
            }
        }
        let mut llc_ids: Vec<u32> = cpus.iter().map(|c| c.llc).collect();
        llc_ids.sort_unstable();
        llc_ids.dedup();
        let llc_index = cpus
            .iter()
            .map(|c| llc_ids.binary_search(&c.llc).unwrap() as u32)
            .collect();
        let mut t = Topology {
            desc: cpus.to_vec(),
            llc_index,
            nr_llcs: llc_ids.len(),
            smt_mask: vec![CpuSet::new(); n],
            llc_mask: vec![CpuSet::new(); n],
            node_mask: vec![CpuSet::new(); n],
            llc_size: vec![1; n],
            online: CpuSet::new(),
            possible: CpuSet::first_n(n),
            cores: Vec::new(),
            core_cpus: Vec::new(),
            core_index: vec![u32::MAX; n],
            domains: vec![([DomainLevel::Machine; 4], 0); n],
            smt_present: false,
            numa_wake_affine: true,
        };
        t.rebuild()?;
        Ok(t)
    }

    /// Marks a CPU online or offline and rebuilds the spans (CPU hotplug).
    pub fn set_online(&mut self, cpu: usize, online: bool) -> Result<(), TopologyError> {
        let Some(d) = self.desc.get_mut(cpu) else {
            return Ok(());
        };
        let was = d.online;
        d.online = online;
        if let Err(e) = self.rebuild() {
            // Refuse to take the last CPU offline; leave the topology as it was.
            self.desc[cpu].online = was;
            self.rebuild()?;
            return Err(e);
        }
        Ok(())
    }

    /// Sets whether the NUMA level is wake-affine (see the field's comment).
    pub fn set_numa_wake_affine(&mut self, on: bool) {
        self.numa_wake_affine = on;
    }

    fn rebuild(&mut self) -> Result<(), TopologyError> {
        let n = self.desc.len();
        self.online = CpuSet::from_cpus((0..n).filter(|&c| self.desc[c].online));
        if self.online.is_empty() {
            return Err(TopologyError::NoOnlineCpu);
        }
        for c in 0..n {
            let d = self.desc[c];
            let mut smt = CpuSet::new();
            let mut llc = CpuSet::new();
            let mut node = CpuSet::new();
            for o in self.online.iter() {
                let e = self.desc[o];
                if e.node == d.node && e.core == d.core {
                    smt.set(o);
                }
                if e.llc == d.llc {
                    llc.set(o);
                }
                if e.node == d.node {
                    node.set(o);
                }
            }
            // An offline CPU still "belongs" to its own masks so that sibling/cache tests on
            // it answer sensibly; it never appears in anyone else's span.
            smt.set(c);
            llc.set(c);
            node.set(c);
            self.smt_mask[c] = smt;
            self.llc_size[c] = llc.count() as u32;
            self.llc_mask[c] = llc;
            self.node_mask[c] = node;
        }
        // A core is listed at its lowest online CPU (an online CPU's smt_mask holds online
        // CPUs only).
        self.cores.clear();
        self.core_cpus.clear();
        self.core_index.iter_mut().for_each(|i| *i = u32::MAX);
        for c in self.online.iter() {
            if self.smt_mask[c].first() == Some(c) {
                let start = self.core_cpus.len() as u32;
                for s in self.smt_mask[c].iter() {
                    self.core_index[s] = self.cores.len() as u32;
                }
                self.core_cpus
                    .extend(self.smt_mask[c].iter().map(|s| s as u32));
                self.cores.push(CoreSpan {
                    llc: self.llc_index[c],
                    start,
                    end: self.core_cpus.len() as u32,
                });
            }
        }
        self.smt_present = (0..n).any(|c| self.online.contains(c) && self.smt_mask[c].count() > 1);
        for c in 0..n {
            let spans = [
                (DomainLevel::Smt, self.smt_mask[c]),
                (DomainLevel::Llc, self.llc_mask[c]),
                (DomainLevel::Node, self.node_mask[c]),
                (DomainLevel::Machine, self.online.or(&CpuSet::single(c))),
            ];
            let mut levels = [DomainLevel::Machine; 4];
            let mut nr = 0u8;
            let mut child: Option<CpuSet> = None;
            for (level, span) in spans {
                // A single-CPU span is no domain at all; a span equal to the child's is
                // degenerate and collapses into it (sd_degenerate / sd_parent_degenerate).
                if span.count() <= 1 || child == Some(span) {
                    continue;
                }
                levels[nr as usize] = level;
                nr += 1;
                child = Some(span);
            }
            self.domains[c] = (levels, nr);
        }
        Ok(())
    }

    /// Number of CPU ids (online or not).
    #[inline]
    pub fn nr_cpus(&self) -> usize {
        self.desc.len()
    }

    /// Number of distinct LLCs.
    #[inline]
    pub fn nr_llcs(&self) -> usize {
        self.nr_llcs
    }

    #[inline]
    pub fn desc(&self, cpu: usize) -> Option<&CpuDesc> {
        self.desc.get(cpu)
    }

    #[inline]
    pub fn cpu_descs(&self) -> &[CpuDesc] {
        &self.desc
    }

    #[inline]
    pub fn is_online(&self, cpu: usize) -> bool {
        self.online.contains(cpu)
    }

    /// All online CPUs (`cpu_active_mask`).
    #[inline]
    pub fn online(&self) -> &CpuSet {
        &self.online
    }

    /// CPUs `0..nr_cpus()`, online or not (`cpu_possible_mask`).
    #[inline]
    pub fn possible(&self) -> &CpuSet {
        &self.possible
    }

    /// Every online core once, as (dense LLC index, its online CPUs ascending): the
    /// online CPUs of one [`Topology::smt_mask`], listed in the order of their lowest CPU.
    /// A walk over the machine's cores without a mask operation per CPU.
    pub fn cores(&self) -> impl Iterator<Item = (usize, &[u32])> + '_ {
        (0..self.cores.len()).map(|i| self.core(i))
    }

    /// How many cores [`Topology::cores`] lists.
    pub fn nr_cores(&self) -> usize {
        self.cores.len()
    }

    /// Core `i` of [`Topology::cores`]: (dense LLC index, its online CPUs ascending).
    pub fn core(&self, i: usize) -> (usize, &[u32]) {
        let c = &self.cores[i];
        (
            c.llc as usize,
            &self.core_cpus[c.start as usize..c.end as usize],
        )
    }

    /// The index in [`Topology::cores`] of `cpu`'s core; None for an offline CPU.
    pub fn core_of(&self, cpu: usize) -> Option<usize> {
        self.core_index
            .get(cpu)
            .filter(|&&i| i != u32::MAX)
            .map(|&i| i as usize)
    }

    /// SMT siblings of `cpu`, itself included (`cpu_smt_mask`).
    #[inline]
    pub fn smt_mask(&self, cpu: usize) -> &CpuSet {
        &self.smt_mask[cpu]
    }

    /// The LLC span of `cpu` (`sched_domain_span(sd_llc)`).
    #[inline]
    pub fn llc_mask(&self, cpu: usize) -> &CpuSet {
        &self.llc_mask[cpu]
    }

    /// The NUMA node span of `cpu`.
    #[inline]
    pub fn node_mask(&self, cpu: usize) -> &CpuSet {
        &self.node_mask[cpu]
    }

    /// Dense index of `cpu`'s LLC, `0..nr_llcs()`.
    #[inline]
    pub fn llc_index(&self, cpu: usize) -> usize {
        self.llc_index[cpu] as usize
    }

    /// `sd_llc_size`: CPUs in `cpu`'s LLC (online ones, at least 1).
    #[inline]
    pub fn llc_size(&self, cpu: usize) -> usize {
        self.llc_size[cpu] as usize
    }

    /// `cpus_share_cache(a, b)`: same LLC.  False for ids outside the topology.
    #[inline]
    pub fn share_cache(&self, a: usize, b: usize) -> bool {
        a < self.desc.len() && b < self.desc.len() && self.llc_index[a] == self.llc_index[b]
    }

    /// Same SMT core.
    #[inline]
    pub fn share_core(&self, a: usize, b: usize) -> bool {
        a < self.desc.len() && b < self.desc.len() && self.smt_mask[a].contains(b)
    }

    /// Same NUMA node.
    #[inline]
    pub fn share_node(&self, a: usize, b: usize) -> bool {
        a < self.desc.len() && b < self.desc.len() && self.desc[a].node == self.desc[b].node
    }

    /// `sched_smt_active()`: some online core has more than one online thread.
    #[inline]
    pub fn smt_present(&self) -> bool {
        self.smt_present
    }

    /// Original capacity of `cpu` (1024 = full).
    #[inline]
    pub fn capacity(&self, cpu: usize) -> u32 {
        self.desc
            .get(cpu)
            .map_or(SCHED_CAPACITY_SCALE, |d| d.capacity)
    }

    #[inline]
    pub fn numa_wake_affine(&self) -> bool {
        self.numa_wake_affine
    }

    /// `cpu`'s non-degenerate domain levels, innermost first (`for_each_domain`).
    #[inline]
    pub fn domains(&self, cpu: usize) -> &[DomainLevel] {
        let (levels, nr) = &self.domains[cpu];
        &levels[..*nr as usize]
    }

    /// The span of `cpu`'s domain at `level` (online CPUs, plus `cpu` itself).
    #[inline]
    pub fn span(&self, cpu: usize, level: DomainLevel) -> CpuSet {
        match level {
            DomainLevel::Smt => self.smt_mask[cpu],
            DomainLevel::Llc => self.llc_mask[cpu],
            DomainLevel::Node => self.node_mask[cpu],
            DomainLevel::Machine => {
                let mut s = self.online;
                s.set(cpu);
                s
            }
        }
    }

    /// Whether `level` carries SD_WAKE_AFFINE.  Every level below NUMA does; the machine
    /// level does when it is a NUMA level with a near distance (see `numa_wake_affine`).
    /// A single-node machine's "machine" level is not NUMA and is always wake-affine.
    #[inline]
    pub fn wake_affine_level(&self, level: DomainLevel) -> bool {
        match level {
            DomainLevel::Machine => self.numa_wake_affine || !self.is_numa(),
            _ => true,
        }
    }

    /// `sd->imb_numa_nr` of the NUMA domain above `cpu`, as `build_sched_domains()` (6.1)
    /// or `adjust_numa_imbalance()`'s setup (later) computes it: the domain above the LLC
    /// (the node here) allows one task per LLC it holds, or, with a single LLC, an eighth
    /// of its CPUs (at least one); one NUMA level scales it by nothing.
    pub fn imb_numa_nr(&self, cpu: usize) -> u64 {
        let node = self.node_mask(cpu).count() as u64;
        let llc = self.llc_size(cpu).max(1) as u64;
        let nr_llcs = node / llc;
        let imb = if nr_llcs <= 1 { node >> 3 } else { nr_llcs };
        imb.max(1)
    }

    /// More than one NUMA node is online.
    pub fn is_numa(&self) -> bool {
        match self.online.first() {
            Some(f) => !self.online.is_subset_of(&self.node_mask[f]),
            None => false,
        }
    }

    /// The smallest level that contains both CPUs, for migration-distance accounting.
    pub fn distance(&self, a: usize, b: usize) -> Distance {
        if a == b {
            Distance::SameCpu
        } else if self.share_core(a, b) {
            Distance::SmtSibling
        } else if self.share_cache(a, b) {
            Distance::SameLlc
        } else if self.share_node(a, b) {
            Distance::SameNode
        } else {
            Distance::RemoteNode
        }
    }
}

/// How far a placement moved a task from its previous CPU.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Distance {
    SameCpu,
    SmtSibling,
    SameLlc,
    SameNode,
    RemoteNode,
}

#[cfg(test)]
mod tests {
    use super::*;

    /// An online CPU of full capacity on `core`, `llc` and `node`.
    fn desc(core: u32, llc: u32, node: u32) -> CpuDesc {
        CpuDesc {
            core,
            llc,
            node,
            online: true,
            capacity: 1024,
        }
    }

    #[test]
    fn shape_numbering_and_masks() {
        let t = Topology::from_shape(2, 2, 2, 2).unwrap();
        assert_eq!(t.nr_cpus(), 16);
        assert_eq!(t.nr_llcs(), 4);
        assert_eq!(t.smt_mask(5).to_cpulist(), "4-5");
        assert_eq!(t.llc_mask(5).to_cpulist(), "4-7");
        assert_eq!(t.node_mask(5).to_cpulist(), "0-7");
        assert_eq!(t.llc_size(9), 4);
        assert!(t.smt_present());
        assert_eq!(
            t.domains(0),
            &[
                DomainLevel::Smt,
                DomainLevel::Llc,
                DomainLevel::Node,
                DomainLevel::Machine
            ]
        );
        assert_eq!(t.distance(4, 5), Distance::SmtSibling);
        assert_eq!(t.distance(4, 6), Distance::SameLlc);
        assert_eq!(t.distance(4, 0), Distance::SameNode);
        assert_eq!(t.distance(4, 8), Distance::RemoteNode);
        assert!(t.is_numa());
    }

    #[test]
    fn degenerate_levels_collapse() {
        // no SMT, one LLC per node: LLC and NODE spans coincide → LLC, MACHINE.
        let t = Topology::from_shape(2, 1, 4, 1).unwrap();
        assert!(!t.smt_present());
        assert_eq!(t.domains(0), &[DomainLevel::Llc, DomainLevel::Machine]);
        // single node, single LLC, SMT: SMT, LLC.
        let t = Topology::from_shape(1, 1, 4, 2).unwrap();
        assert_eq!(t.domains(3), &[DomainLevel::Smt, DomainLevel::Llc]);
        // one CPU: no domain at all.
        let t = Topology::from_shape(1, 1, 1, 1).unwrap();
        assert!(t.domains(0).is_empty());
    }

    #[test]
    fn from_cpus_x86_numbering_and_hotplug() {
        // 4 cores x 2 threads, x86 style: siblings are c and c+4.
        let descs: Vec<CpuDesc> = (0..8).map(|c| desc(c % 4, 0, 0)).collect();
        let mut t = Topology::from_cpus(&descs).unwrap();
        assert_eq!(t.smt_mask(1).to_cpulist(), "1,5");
        t.set_online(5, false).unwrap();
        assert_eq!(t.smt_mask(1).to_cpulist(), "1");
        assert_eq!(t.llc_mask(0).to_cpulist(), "0-4,6-7");
        assert!(!t.is_online(5));
        assert_eq!(t.llc_size(0), 7);
    }

    /// `cores()`, `llc_size()` and `possible()` are kept beside the masks they summarise:
    /// after every hotplug step they still say what the masks say.
    #[test]
    fn kept_summaries_follow_the_masks_through_hotplug() {
        let check = |t: &Topology| {
            let mut listed = CpuSet::new();
            for (i, (llc, cpus)) in t.cores().enumerate() {
                let first = cpus[0] as usize;
                let want: Vec<u32> = t.smt_mask(first).iter().map(|c| c as u32).collect();
                assert_eq!(cpus, want.as_slice());
                assert_eq!(llc, t.llc_index(first));
                for &c in cpus {
                    assert!(t.is_online(c as usize) && !listed.contains(c as usize));
                    assert_eq!(t.core_of(c as usize), Some(i));
                    listed.set(c as usize);
                }
            }
            assert_eq!(&listed, t.online());
            assert_eq!(t.nr_cores(), t.cores().count());
            for c in 0..t.nr_cpus() {
                assert_eq!(t.core_of(c).is_some(), t.is_online(c), "CPU {c}");
            }
            for c in 0..t.nr_cpus() {
                assert_eq!(t.llc_size(c), t.llc_mask(c).count());
            }
            assert_eq!(t.possible(), &CpuSet::first_n(t.nr_cpus()));
        };
        // x86 numbering: siblings c and c+4, two LLCs.
        let descs: Vec<CpuDesc> = (0..8).map(|c| desc(c % 4, c % 4 / 2, 0)).collect();
        let mut t = Topology::from_cpus(&descs).unwrap();
        check(&t);
        assert_eq!(t.cores().count(), 4);
        for (cpu, online) in [(4, false), (0, false), (2, false), (0, true), (6, false)] {
            t.set_online(cpu, online).unwrap();
            check(&t);
        }
        assert_eq!(
            t.cores().map(|(_, c)| c.to_vec()).collect::<Vec<_>>(),
            vec![vec![0], vec![1, 5], vec![3, 7]]
        );
        check(&Topology::from_shape(2, 2, 3, 2).unwrap());
    }

    #[test]
    fn spec_from_json() {
        let spec: TopologySpec = serde_json::from_str(
            r#"{"shape": {"nodes": 2, "llcs_per_node": 1, "cores_per_llc": 2, "threads": 2}, "offline": "7"}"#,
        )
        .unwrap();
        let t = spec.build().unwrap();
        assert_eq!(
            (t.nr_cpus(), t.online().count(), t.numa_wake_affine()),
            (8, 7, true)
        );
        let spec: TopologySpec = serde_json::from_str(
            r#"{"cpus": [{"core": 0, "llc": 0, "node": 0}, {"core": 0, "llc": 0, "node": 0}], "numa_wake_affine": false}"#,
        )
        .unwrap();
        let t = spec.build().unwrap();
        assert_eq!(t.smt_mask(0).count(), 2);
        assert!(!t.numa_wake_affine());
        let none: TopologySpec = serde_json::from_str("{}").unwrap();
        assert!(
            none.build()
                .unwrap_err()
                .to_string()
                .contains("shape or cpus")
        );
        assert!(serde_json::from_str::<TopologySpec>(r#"{"shape": {"nodes": 1}}"#).is_err());
    }

    #[test]
    fn rejects_inconsistent_descriptions() {
        let bad = [desc(0, 0, 0), desc(0, 1, 0)];
        assert!(matches!(
            Topology::from_cpus(&bad),
            Err(TopologyError::CoreSplitAcrossCaches { .. })
        ));
        let bad = [desc(0, 0, 0), desc(1, 0, 1)];
        assert!(matches!(
            Topology::from_cpus(&bad),
            Err(TopologyError::LlcSplitAcrossNodes { .. })
        ));
        assert_eq!(
            Topology::from_shape(0, 1, 1, 1).unwrap_err(),
            TopologyError::ZeroDimension("nodes")
        );
        assert!(matches!(
            Topology::from_shape(2, 2, 64, 8),
            Err(TopologyError::TooManyCpus(2048))
        ));
        let off = [CpuDesc {
            online: false,
            ..desc(0, 0, 0)
        }];
        assert_eq!(
            Topology::from_cpus(&off).unwrap_err(),
            TopologyError::NoOnlineCpu
        );
    }
}
