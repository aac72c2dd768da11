//! The kernel's newly-idle balances, as `oracle record --newidle FILE` writes them, and
//! `oracle newidle FILE...`'s account of them.
//!
//! A CPU about to go idle runs `newidle_balance()` (`sched_balance_newidle()` from v6.10):
//! since v5.14 it returns at once when a wake-up is already on its way to it (seed 2,
//! e5e678e4); otherwise it balances only with an overloaded root domain and enough
//! expected idle time (`avg_idle` against the domains' `max_newidle_lb_cost`), domain by
//! domain, innermost first, until a task arrives.  One record per call: the gates'
//! inputs on entry, every CPU's state, and what came of it (which domains it balanced,
//! which task it pulled from where, what it returned).  Beside the account, each record
//! is replayed through the engine's newly-idle balance (`Engine::newidle_balance`, with
//! the recorded kernel's preset, its gates' inputs, and candidates derived from the CPUs'
//! `nr_running`), against never pulling.  Where the kernel has NI_RANDOM, the draw is
//! the kernel's: a domain the replay reaches balances only if the kernel balanced it
//! there (a domain the kernel left for lack of time looks the same, and ends the same
//! way).  The replay without that input is reported beside it.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::policy::newidle::{NewidleInputs, entry_gate};
use crate::policy::{Config, CpuSnapshot, Engine, Topology, TopologyInput};

/// One newly-idle balance (`struct oracle_newidle` in bpf/oracle.h), as a JSON line.
#[serde_with::skip_serializing_none]
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct NewidleRecord {
    /// The writer's sequence number.
    pub seq: u64,
    pub topology: TopologyInput,
    /// The recorded kernel's release (`uname -r`).
    pub release: String,
    /// `bpf_ktime_get_ns()` on entry.
    pub now_ns: u64,
    /// The balancing CPU.
    pub cpu: usize,
    /// What the function returned: > 0 a fair task to run, 0 none, < 0 another class's.
    pub ret: i32,
    /// Its runqueue's `ttwu_pending` on entry: a wake-up on its way to it.
    pub ttwu_pending: bool,
    /// The root domain's overload flag on entry; absent where the kernel has none.
    pub overloaded: Option<bool>,
    /// Its runqueue's `avg_idle` on entry, ns.
    pub avg_idle: u64,
    /// `max_newidle_lb_cost` of its domains, innermost first, ns.
    pub max_newidle_lb_cost: Vec<u64>,
    /// The domains (indexes into `max_newidle_lb_cost`) where load balancing ran.
    pub balanced_domains: Vec<usize>,
    /// The domains where a cache-hot task may move too: periodic balancing there has
    /// failed more often than the domain's `cache_nice_tries`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub hot_escape_domains: Vec<usize>,
    /// The kernel has NI_RANDOM's draw (its `struct sched_domain` has `newidle_ratio`), so
    /// a domain the balance reached may have been skipped by chance; absent where unknown.
    pub ni_random: Option<bool>,
    /// Tasks moved to `cpu` during the call.
    pub nr_pulled: u32,
    /// The first of them and the CPU it came from.
    pub pulled: Option<PulledTask>,
    /// Every CPU on entry, by CPU.
    pub cpus: Vec<NewidleCpu>,
}

#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PulledTask {
    pub pid: i32,
    pub from: usize,
}

/// What a balance can read of one CPU on entry.
#[serde_with::skip_serializing_none]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct NewidleCpu {
    pub nr_running: u32,
    /// Delayed-dequeue sleepers among them (v6.12+).
    pub nr_delayed: u32,
    pub load_avg: u64,
    pub util_avg: u64,
    pub curr_is_idle: bool,
    pub ttwu_pending: bool,
    /// Its fair tasks, the running one aside, that `task_hot()` lets go: last run at least
    /// 500 us before the balance (of the first 32 on its list).  Absent where not recorded:
    /// none counts as hot.
    pub cold: Option<u32>,
}

impl NewidleCpu {
    /// As the engine reads a CPU: what the record has, the rest unset.
    fn snapshot(&self) -> CpuSnapshot {
        let mut s = CpuSnapshot::default();
        (s.idle, s.nr_running, s.ttwu_pending) =
            (self.curr_is_idle, self.nr_running, self.ttwu_pending);
        (s.nr_delayed, s.load) = (self.nr_delayed.min(self.nr_running), self.load_avg);
        s.util = super::util_u32(self.util_avg);
        s
    }

    /// The part of a placement record's CPU that a newly-idle record keeps.
    pub fn of(c: &super::SampleCpu) -> Self {
        NewidleCpu {
            nr_running: c.nr_running,
            nr_delayed: c.nr_delayed,
            load_avg: c.load_avg,
            util_avg: c.util_avg,
            curr_is_idle: c.curr_is_idle,
            ttwu_pending: c.ttwu_pending,
            cold: None,
        }
    }
}

impl NewidleRecord {
    pub fn to_json_line(&self) -> String {
        serde_json::to_string(self).expect("newly-idle records serialise")
    }
}

/// Where a pulled task came from, seen from the balancing CPU.
fn origin(topo: &Topology, cpu: usize, from: usize) -> &'static str {
    if topo.share_core(cpu, from) {
        "its SMT sibling"
    } else if topo.share_cache(cpu, from) {
        "its LLC"
    } else if topo.share_node(cpu, from) {
        "its node, another LLC"
    } else {
        "another node"
    }
}

/// One file's account: what came of its balances.
#[derive(Clone, Debug, Default)]
pub struct NewidleTally {
    pub file: String,
    pub release: String,
    pub balances: u64,
    /// Entered with a wake-up pending; of those, how many had the other gates open (an
    /// overloaded root domain, `avg_idle` above the innermost domain's cost and, on v5.10,
    /// above `sysctl_sched_migration_cost`), so that v5.10 balances; and how many balanced
    /// (none on a kernel with seed 2's test).
    pub pending: u64,
    pub pending_gates_open: u64,
    pub pending_balanced: u64,
    pub not_overloaded: u64,
    pub balanced: u64,
    /// Balances by the innermost domain they balanced in.
    pub by_first_domain: BTreeMap<usize, u64>,
    pub pulled: u64,
    pub pulled_from: BTreeMap<&'static str, u64>,
    /// Returned a fair task without pulling one: a wake-up arrived meanwhile.
    pub arrived: u64,
    /// The engine's replay: the preset, and how often it pulled from the kernel's source
    /// CPU (or, like the kernel, pulled nothing), overall and where the kernel pulled;
    /// never pulling beside it.
    pub preset: &'static str,
    pub engine_agrees: u64,
    pub engine_pulls: u64,
    pub engine_agrees_on_pulls: u64,
    pub never_pull_agrees: u64,
    /// The engine without the kernel's NI_RANDOM draw (every domain may balance), where
    /// the kernel has one.
    pub undrawn_agrees: u64,
    pub drawn_balances: u64,
    /// Balances replayed, and how many of them pulled in the kernel: a record whose CPU
    /// has other domains than the topology gives (a kernel with cluster domains, say) has
    /// costs the engine cannot place, and is only counted.
    pub replayed: u64,
    pub replayed_pulls: u64,
}

/// Domain indexes as a mask, bit `i` for domain `i` (indexes past 63 have no bit).
fn domain_mask(domains: &[usize]) -> u64 {
    domains
        .iter()
        .filter(|&&d| d < 64)
        .fold(0, |m, &d| m | 1 << d)
}

impl NewidleTally {
    /// The gates other than seed 2's, as the record's kernel (`cfg`) has them.
    fn gates_open(r: &NewidleRecord, cfg: &Config) -> bool {
        r.overloaded == Some(true)
            && r.max_newidle_lb_cost
                .first()
                .is_some_and(|&c| entry_gate(cfg, true, r.avg_idle, c).is_none())
    }

    /// The engine's newly-idle decision on `r`'s CPUs and gates, the CPU it pulls from if
    /// any: with NI_RANDOM's draw the kernel's (the domains it balanced) and, where the
    /// kernel has the draw, without it too.
    fn engine_pulls_from(
        r: &NewidleRecord,
        topo: &Topology,
        cfg: &Config,
    ) -> Result<(Option<usize>, Option<Option<usize>>), String> {
        let mut cpus: Vec<CpuSnapshot> = r.cpus.iter().map(NewidleCpu::snapshot).collect();
        if cpus.len() != topo.nr_cpus() {
            return Err(format!(
                "{} CPUs described, the topology has {}",
                cpus.len(),
                topo.nr_cpus()
            ));
        }
        cpus[r.cpu].avg_idle_ns = r.avg_idle;
        let mut candidates = crate::explain::scenario::derived_candidates(&cpus, cfg)?;
        // A CPU's waiting tasks beyond its recorded cold ones are cache hot.
        let mut seen = vec![0u32; cpus.len()];
        for c in &mut candidates {
            let k = &mut seen[c.src_cpu];
            *k += 1;
            c.cache_hot = r.cpus[c.src_cpu].cold.is_some_and(|cold| *k > cold);
        }
        let mut engine = Engine::new(topo.clone(), *cfg).map_err(|e| e.to_string())?;
        let undrawn = NewidleInputs {
            overloaded: r.overloaded,
            max_lb_cost_ns: &r.max_newidle_lb_cost,
            hot_escape: domain_mask(&r.hot_escape_domains),
            drawn: None,
        };
        let mut pull = |inputs: &NewidleInputs| {
            engine
                .newidle_balance(r.cpu, &cpus, &candidates, inputs)
                .pulled
                .map(|p| p.src_cpu)
        };
        if r.ni_random != Some(true) {
            return Ok((pull(&undrawn), None));
        }
        let drawn = NewidleInputs {
            drawn: Some(domain_mask(&r.balanced_domains)),
            ..undrawn
        };
        Ok((pull(&drawn), Some(pull(&undrawn))))
    }

    fn add(&mut self, r: &NewidleRecord, topo: &Topology, cfg: &Config) -> Result<(), String> {
        let kernel = r.pulled.map(|p| p.from);
        if topo.domains(r.cpu).len() == r.max_newidle_lb_cost.len() {
            let (engine, undrawn) = Self::engine_pulls_from(r, topo, cfg)?;
            if let Some(undrawn) = undrawn {
                self.drawn_balances += 1;
                self.undrawn_agrees += (undrawn == kernel) as u64;
            }
            self.replayed += 1;
            self.replayed_pulls += kernel.is_some() as u64;
            self.engine_agrees += (engine == kernel) as u64;
            self.engine_pulls += engine.is_some() as u64;
            self.never_pull_agrees += kernel.is_none() as u64;
            self.engine_agrees_on_pulls += (kernel.is_some() && engine == kernel) as u64;
        }
        self.balances += 1;
        let balanced = !r.balanced_domains.is_empty();
        if r.ttwu_pending {
            self.pending += 1;
            self.pending_gates_open += Self::gates_open(r, cfg) as u64;
            self.pending_balanced += balanced as u64;
        }
        if r.overloaded == Some(false) {
            self.not_overloaded += 1;
        }
        if let Some(&d) = r.balanced_domains.iter().min() {
            self.balanced += 1;
            *self.by_first_domain.entry(d).or_default() += 1;
        }
        match r.pulled {
            Some(p) => {
                self.pulled += 1;
                *self
                    .pulled_from
                    .entry(origin(topo, r.cpu, p.from))
                    .or_default() += 1;
            }
            None if r.ret > 0 => self.arrived += 1,
            None => {}
        }
        Ok(())
    }

    pub fn render(&self, o: &mut String) {
        let b = self.balances;
        let _ = writeln!(
            o,
            "{}: {b} newly-idle balances ({})",
            self.file, self.release
        );
        let pct = |n: u64, of: u64| {
            if of == 0 {
                0.0
            } else {
                100.0 * n as f64 / of as f64
            }
        };
        // One outcome: its count and its share of all balances, then what follows it.
        let mut row = |label: &str, n: u64, rest: &str| {
            let _ = writeln!(o, "  {label:<36}{n:>8} ({:.1}%){rest}", pct(n, b));
        };
        row(
            "entered with a wake-up pending",
            self.pending,
            &format!(
                "; the other gates open {}, balanced {}",
                self.pending_gates_open, self.pending_balanced
            ),
        );
        row("root domain not overloaded", self.not_overloaded, "");
        // The lines under an outcome: a count per kind, labels padded to one column.
        fn under<K: std::fmt::Display>(m: &BTreeMap<K, u64>, label: &str) -> String {
            m.iter()
                .map(|(k, n)| format!("\n    {:<34}{n:>8}", format!("{label}{k}")))
                .collect()
        }
        row(
            "balanced in a domain",
            self.balanced,
            &under(&self.by_first_domain, "first in domain "),
        );
        row(
            "pulled a task",
            self.pulled,
            &under(&self.pulled_from, "from "),
        );
        row("a fair task arrived, none pulled", self.arrived, "");
        let _ = writeln!(
            o,
            "  engine ({}), whether and whence to pull: agrees {} of {} ({:.1}%), never pulling {} ({:.1}%); \
             where the kernel pulled {} of {} ({:.1}%); the engine pulled {} times",
            self.preset,
            self.engine_agrees,
            self.replayed,
            pct(self.engine_agrees, self.replayed),
            self.never_pull_agrees,
            pct(self.never_pull_agrees, self.replayed),
            self.engine_agrees_on_pulls,
            self.replayed_pulls,
            pct(self.engine_agrees_on_pulls, self.replayed_pulls),
            self.engine_pulls
        );
        if self.replayed < b {
            let _ = writeln!(
                o,
                "  not replayed: {} balances on a CPU whose domains are not the topology's",
                b - self.replayed
            );
        }
        if self.drawn_balances > 0 {
            let _ = writeln!(
                o,
                "  the same without the kernel's NI_RANDOM draw (every domain it reaches balances): agrees {} of {} ({:.1}%)",
                self.undrawn_agrees,
                self.drawn_balances,
                pct(self.undrawn_agrees, self.drawn_balances)
            );
        }
    }
}

/// Reads one file of newly-idle records as trace files are read
/// ([`crate::explain::for_each_json_line`]); errors name the file and line.
pub fn tally_file(path: &Path) -> anyhow::Result<NewidleTally> {
    let name = path.display().to_string();
    let file = crate::explain::open_input(path)
        .map_err(|e| crate::exit::BadInput(format!("cannot read {name}: {e}")))?;
    let mut reader = std::io::BufReader::with_capacity(1 << 16, file);
    let mut t = NewidleTally {
        file: name.clone(),
        ..NewidleTally::default()
    };
    let mut topo: Option<(TopologyInput, Topology)> = None;
    let mut cfg: Option<Config> = None;
    crate::explain::for_each_json_line(
        &mut reader,
        &name,
        "a record",
        |lineno, r: NewidleRecord| {
            let bad = |e: String| crate::exit::BadInput(format!("{name}:{lineno}: {e}"));
            if topo.as_ref().is_none_or(|(ti, _)| *ti != r.topology) {
                let built = r
                    .topology
                    .build(|_| Err("a newly-idle record names no sysfs tree".into()))
                    .map_err(bad)?;
                topo = Some((r.topology.clone(), built));
            }
            let (_, tp) = topo.as_ref().expect("built above");
            let n = tp.nr_cpus();
            if r.cpu >= n || r.pulled.is_some_and(|p| p.from >= n) {
                return Err(bad(format!("a CPU beyond the topology's {n}")).into());
            }
            if cfg.is_none() {
                t.release = r.release.clone();
                t.preset = super::preset_for_release(&r.release).0;
                cfg = Some(Config::from_preset(t.preset).map_err(|e| bad(e.to_string()))?);
            }
            t.add(&r, tp, cfg.as_ref().expect("set above"))
                .map_err(bad)?;
            Ok(())
        },
    )?;
    Ok(t)
}

/// `oracle newidle FILE...`: each file's account.
pub fn report(files: &[PathBuf]) -> anyhow::Result<String> {
    let mut o = String::new();
    for f in files {
        tally_file(f)?.render(&mut o);
    }
    Ok(o)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicUsize, Ordering};

    fn rec(cpu: usize, pending: bool, balanced: &[usize], pulled: Option<usize>) -> NewidleRecord {
        let topo = Topology::from_shape(2, 1, 2, 2).unwrap(); // 2 nodes, 2 cores x 2 threads each
        NewidleRecord {
            topology: TopologyInput::from_topology(&topo),
            release: "7.2.13".into(),
            cpu,
            ret: pulled.is_some() as i32,
            ttwu_pending: pending,
            overloaded: Some(true),
            avg_idle: 1_000_000,
            max_newidle_lb_cost: vec![1000, 2000, 3000],
            balanced_domains: balanced.to_vec(),
            nr_pulled: pulled.is_some() as u32,
            pulled: pulled.map(|from| PulledTask { pid: 7, from }),
            cpus: vec![NewidleCpu::default(); 8],
            ..NewidleRecord::default()
        }
    }

    fn tally(recs: &[NewidleRecord]) -> (NewidleTally, String) {
        let dir = std::env::temp_dir().join(format!("wakelab-newidle-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        static N: AtomicUsize = AtomicUsize::new(0);
        let path = dir.join(format!("t{}.jsonl", N.fetch_add(1, Ordering::Relaxed)));
        let text: String = recs.iter().map(|r| r.to_json_line() + "\n").collect();
        std::fs::write(&path, text).unwrap();
        let t = tally_file(&path).unwrap();
        let mut o = String::new();
        t.render(&mut o);
        std::fs::remove_file(&path).unwrap();
        (t, o)
    }

    #[test]
    fn balances_are_counted_by_outcome_and_origin() {
        let (t, text) = tally(&[
            rec(0, true, &[], None),      // seed 2's skip
            rec(0, true, &[0, 1], None),  // balanced although pending (v5.10)
            rec(0, false, &[1], Some(2)), // pulled within the LLC, in its second domain
            rec(0, false, &[0], Some(1)), // from its SMT sibling
            rec(0, false, &[0, 1, 2], Some(5)),
        ]);
        assert_eq!((t.balances, t.pending, t.pending_balanced), (5, 2, 1));
        assert_eq!(t.pending_gates_open, 2);
        assert_eq!((t.balanced, t.pulled), (4, 3));
        assert_eq!(t.by_first_domain.get(&0), Some(&3));
        assert_eq!(t.by_first_domain.get(&1), Some(&1));
        assert_eq!(t.pulled_from.get("its SMT sibling"), Some(&1));
        assert_eq!(t.pulled_from.get("its LLC"), Some(&1));
        assert_eq!(t.pulled_from.get("another node"), Some(&1));
        assert!(text.contains("5 newly-idle balances (7.2.13)"), "{text}");
        assert!(
            text.contains(
                "entered with a wake-up pending             2 (40.0%); the other gates open 2, \
                 balanced 1"
            ),
            "{text}"
        );
    }

    #[test]
    fn the_engine_replays_each_balance_beside_never_pulling() {
        // Nothing queued anywhere: the engine pulls nothing, agreeing where the kernel did not.
        let (t, _) = tally(&[rec(0, false, &[], None), rec(0, false, &[0], Some(1))]);
        assert_eq!(
            (t.preset, t.engine_agrees, t.never_pull_agrees),
            ("mainline", 1, 1)
        );
        assert_eq!((t.engine_pulls, t.engine_agrees_on_pulls), (0, 0));
        // CPU 2 (the balancing CPU's LLC) runs three: the engine pulls from it, as the
        // kernel did in the first record and not in the second.
        let busy = |mut r: NewidleRecord| {
            r.cpus[2].nr_running = 3;
            r
        };
        let (t, text) = tally(&[
            busy(rec(0, false, &[0], Some(2))),
            busy(rec(0, false, &[], None)),
        ]);
        assert_eq!(
            (t.engine_agrees, t.engine_pulls, t.engine_agrees_on_pulls),
            (1, 2, 1)
        );
        assert!(
            text.contains(
                "engine (mainline), whether and whence to pull: agrees 1 of 2 (50.0%), never \
                 pulling 1 (50.0%); where the kernel pulled 1 of 1 (100.0%); the engine pulled 2 times"
            ),
            "{text}"
        );
    }

    #[test]
    fn the_other_gates_are_the_recorded_kernels() {
        // The gates of the record's kernel, as the tally finds its preset.
        let open = |r: &NewidleRecord| {
            let preset = super::super::preset_for_release(&r.release).0;
            NewidleTally::gates_open(r, &Config::from_preset(preset).unwrap())
        };
        let mut r = rec(0, true, &[], None);
        r.avg_idle = 200_000; // above the innermost domain's cost, below 500 us
        assert!(open(&r));
        r.release = "5.10.0-32-amd64".into();
        assert!(!open(&r), "v5.10 wants 500 us of expected idle time");
        r.avg_idle = 600_000;
        assert!(open(&r));
        r.overloaded = Some(false);
        assert!(!open(&r));
        r.overloaded = Some(true);
        r.max_newidle_lb_cost = vec![700_000];
        assert!(!open(&r));
    }

    #[test]
    fn the_largest_numbers_are_counted_not_refused() {
        let mut r = rec(1, true, &[usize::MAX], Some(0));
        (r.now_ns, r.avg_idle, r.seq) = (u64::MAX, u64::MAX, u64::MAX);
        r.max_newidle_lb_cost = vec![u64::MAX; 64];
        (r.nr_pulled, r.ret) = (u32::MAX, i32::MIN);
        let (t, text) = tally(&[r]);
        assert_eq!((t.balances, t.pending_gates_open, t.balanced), (1, 1, 1));
        assert_eq!(t.by_first_domain.get(&usize::MAX), Some(&1));
        // 64 domains on a machine that has 3: counted, not replayed.
        assert_eq!(t.replayed, 0);
        assert!(
            text.contains("not replayed: 1 balances on a CPU whose domains are not the topology's"),
            "{text}"
        );
    }

    /// The recorded cold tasks decide which derived candidates are cache hot: CPU 2 runs
    /// three (two waiting), none of them cold, so the LLC pulls nothing; one cold is enough.
    #[test]
    fn recorded_cold_tasks_make_the_rest_hot() {
        let mut r = rec(0, false, &[1], None);
        r.cpus[2].nr_running = 3;
        r.cpus[2].cold = Some(0);
        let (t, _) = tally(&[r.clone()]);
        assert_eq!((t.engine_agrees, t.engine_pulls), (1, 0));
        r.cpus[2].cold = Some(1);
        r.pulled = Some(PulledTask { pid: 7, from: 2 });
        let (t, _) = tally(&[r.clone()]);
        assert_eq!((t.engine_agrees, t.engine_pulls), (1, 1));
        // Hot, but the LLC has failed often enough to move it.
        r.cpus[2].cold = Some(0);
        r.hot_escape_domains = vec![1];
        let (t, _) = tally(&[r]);
        assert_eq!((t.engine_agrees, t.engine_pulls), (1, 1));
    }

    /// NI_RANDOM: the kernel reached its LLC with CPU 2 running three and balanced nowhere;
    /// with the kernel's draw the replay skips the domains as the kernel did, without it
    /// the replay pulls.
    #[test]
    fn the_kernels_draw_is_an_input() {
        let mut r = rec(0, false, &[], None);
        r.cpus[2].nr_running = 3;
        r.ni_random = Some(true);
        let (t, text) = tally(&[r.clone()]);
        assert_eq!((t.engine_agrees, t.engine_pulls), (1, 0));
        assert_eq!((t.drawn_balances, t.undrawn_agrees), (1, 0));
        assert!(
            text.contains(
                "the same without the kernel's NI_RANDOM draw (every domain it reaches balances): \
                 agrees 0 of 1 (0.0%)"
            ),
            "{text}"
        );
        // Drawn in the LLC only: the replay pulls there, as the kernel did.
        r.balanced_domains = vec![1];
        r.pulled = Some(PulledTask { pid: 7, from: 2 });
        let (t, _) = tally(&[r.clone()]);
        assert_eq!((t.engine_agrees, t.engine_agrees_on_pulls), (1, 1));
        // A kernel without the draw: every domain it reaches may balance.
        r.ni_random = Some(false);
        r.balanced_domains = vec![];
        r.pulled = None;
        let (t, text) = tally(&[r]);
        assert_eq!(
            (t.engine_agrees, t.engine_pulls, t.drawn_balances),
            (0, 1, 0)
        );
        assert!(!text.contains("NI_RANDOM"), "{text}");
    }

    #[test]
    fn a_cpu_beyond_the_topology_is_refused() {
        let dir = std::env::temp_dir().join(format!("wakelab-newidle-bad-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("bad.jsonl");
        std::fs::write(&path, rec(0, false, &[0], Some(9)).to_json_line() + "\n").unwrap();
        let e = tally_file(&path).unwrap_err().to_string();
        assert!(
            e.contains("bad.jsonl:1: a CPU beyond the topology's 8"),
            "{e}"
        );
        std::fs::write(&path, "{\"seq\": 1}\n").unwrap();
        let e = tally_file(&path).unwrap_err().to_string();
        assert!(
            e.contains("bad.jsonl:1: top level: missing field `topology`"),
            "{e}"
        );
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
