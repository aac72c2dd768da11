//! Scenario files: what a single placement decision needs, written as JSON, and how it is
//! turned into engine inputs.  The inputs a scenario shares with decision-trace records
//! (topology, per-CPU state, wake-up, LLC state) are the policy's trace types, whose JSON
//! forms `crate::policy::trace` documents; this module adds what only a scenario has (the
//! newly-idle question, the expectation), reads a `sysfs` topology, and resolves a scenario
//! or a [`TraceRecord`] into engine inputs.
//!
//! ```json
//! {
//!   "description": "Seed 1: qperf woken by NET_RX on a node full of CPU hogs",
//!   "topology": {"shape": "2x1x32x1"},
//!   "policy": {"preset": "mainline", "set": {"sync_requires_task_waker": true}},
//!   "cpus": {"default": "idle", "overrides": {"32-63": {"base": "busy", "util": 1024}}},
//!   "task": {"pid": 100, "prev_cpu": 5, "load": 300},
//!   "wake": {"sync": true, "waker_cpu": 40, "waker_context": "softirq",
//!            "waker": {"pid": 2000, "prev_cpu": 40, "load": 1024}},
//!   "expect": {"cpu": 40, "rules": ["sync_shortcut_irq_waker"]}
//! }
//! ```
//!
//! - `topology`, `cpus`, `wake` and `llc_state`: as in a trace record
//!   (`crate::policy::trace`).  A `sysfs` topology is a tree read through scx_utils (see
//!   [`super::sysfs`]); a relative path is relative to the scenario file.
//! - `task` + `wake` for a wake-up (or fork) placement, or `newidle` for the newly-idle
//!   pull decision: `cpu`, and optionally `candidates`, and the kernel's other inputs
//!   `overloaded`, `max_newidle_lb_cost` (ns, innermost domain first) and `drawn_domains`
//!   (NI_RANDOM's draw).
//! - `llc_state` omitted: the idle-core hints are taken from the snapshot (true exactly
//!   where a whole idle core exists), the SIS_PROP scan cost starts at 0 and SIS_UTIL
//!   derives its depth from the CPUs' `util`.
//! - `expect`: what the file's own policy must decide (`cpu`, `rules` that must appear in
//!   the chain, `pull`, `pulled_pid`); `explain` checks it unless `--preset`/`--set`
//!   override the policy.
//!
//! A [`TraceRecord`] is the same inputs, fully explicit, plus the decision a live run
//! recorded; `explain --trace` replays it as the scenario [`Scenario::from`] makes of it.

use std::path::Path;

use serde::{Deserialize, Serialize};

use crate::policy::newidle::NewidleInputs;
use crate::policy::trace::{check_cpu, check_task};
use crate::policy::{
    Config, CpuSet, CpuSnapshot, CpuStates, LlcState, LlcStateInput, PolicySpec, PullCandidate,
    TaskState, Topology, TopologyInput, TraceRecord, WakeCtx, WakeInput,
};

/// The topology `t` names; a `sysfs` tree is read through [`super::sysfs`], a relative
/// path taken from `base_dir` (the scenario file's directory).
pub fn build_topology(t: &TopologyInput, base_dir: &Path) -> Result<Topology, String> {
    t.build(|dir| super::sysfs::topology_from_sysfs(&base_dir.join(dir)))
}

// ------------------------------------------------------------------------------------------
// What only a scenario has
// ------------------------------------------------------------------------------------------

/// A newly-idle pull decision: `cpu` just ran out of work.
#[serde_with::skip_serializing_none]
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct NewIdleInput {
    pub cpu: usize,
    /// Tasks waiting on other CPUs.  Omitted: one candidate per waiting slot of every CPU
    /// with two or more runnable tasks (pid = 1000 * cpu + k, load 1024).
    pub candidates: Option<Vec<PullCandidate>>,
    /// The root domain's overload flag.  Omitted: set when a CPU has two or more tasks.
    pub overloaded: Option<bool>,
    /// `sd->max_newidle_lb_cost` of the CPU's domains, innermost first, ns (at most one a
    /// domain).  Omitted or short: a domain costs nothing.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub max_newidle_lb_cost: Vec<u64>,
    /// NI_RANDOM's draw: the domains (indexes, innermost first) it lets balance.
    /// Omitted: no draw, every domain may.
    pub drawn_domains: Option<Vec<usize>>,
}

/// A newly-idle question's inputs besides the CPUs: [`NewidleInputs`] with owned costs.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct NewIdleGates {
    pub overloaded: Option<bool>,
    pub max_newidle_lb_cost: Vec<u64>,
    pub drawn: Option<u64>,
}

impl NewIdleGates {
    pub fn inputs(&self) -> NewidleInputs<'_> {
        NewidleInputs {
            overloaded: self.overloaded,
            max_lb_cost_ns: &self.max_newidle_lb_cost,
            drawn: self.drawn,
            hot_escape: 0,
        }
    }
}

/// What the file's own policy must decide.
#[serde_with::skip_serializing_none]
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Expect {
    pub cpu: Option<usize>,
    /// Rule names that must all appear in the chain.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub rules: Vec<String>,
    /// Newly-idle: whether a task is pulled.
    pub pull: Option<bool>,
    /// Newly-idle: the pid pulled.
    pub pulled_pid: Option<u32>,
}

/// A scenario file; see the module documentation.
#[serde_with::skip_serializing_none]
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Scenario {
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub description: String,
    pub topology: TopologyInput,
    #[serde(default)]
    pub policy: PolicySpec,
    #[serde(default)]
    pub cpus: CpuStates,
    pub llc_state: Option<Vec<LlcStateInput>>,
    pub task: Option<TaskState>,
    pub wake: Option<WakeInput>,
    pub newidle: Option<NewIdleInput>,
    pub expect: Option<Expect>,
}

/// The scenario a trace record replays as: its inputs, asking its wake-up.
impl From<&TraceRecord> for Scenario {
    fn from(rec: &TraceRecord) -> Scenario {
        Scenario {
            description: String::new(),
            topology: rec.topology.clone(),
            policy: rec.policy.clone(),
            cpus: rec.cpus.clone(),
            llc_state: rec.llc_state.clone(),
            task: Some(rec.task),
            wake: Some(rec.wake.clone()),
            newidle: None,
            expect: None,
        }
    }
}

// ------------------------------------------------------------------------------------------
// Parsing and resolution
// ------------------------------------------------------------------------------------------

/// Parses JSON text into `T`; the error is one line naming the field.  A text over the
/// limits of [`crate::json_limits`] is refused before serde allocates anything for it.
pub fn parse_json<T: serde::de::DeserializeOwned>(text: &str) -> Result<T, String> {
    crate::json_limits::check(text)?;
    serde_json::from_str(text).map_err(|e| super::json_path::describe_error(text, &e))
}

/// As [`parse_json`] for the types that must be a JSON object (scenarios, trace
/// records): serde would also accept a struct written as an array, with a confusing
/// message.
pub fn parse_json_object<T: serde::de::DeserializeOwned>(text: &str) -> Result<T, String> {
    if !text.trim_start().starts_with('{') {
        return Err("top level: expected a JSON object ({ ... })".into());
    }
    parse_json(text)
}

/// What a scenario asks.  (Built once per scenario; the size difference of the variants
/// does not matter.)
#[derive(Clone, Debug)]
#[allow(clippy::large_enum_variant)]
pub enum Question {
    Wakeup {
        task: TaskState,
        wake: WakeCtx,
    },
    NewIdle {
        cpu: usize,
        candidates: Vec<PullCandidate>,
        gates: NewIdleGates,
    },
}

/// A scenario turned into engine inputs.
#[derive(Clone, Debug)]
pub struct Resolved {
    pub topo: Topology,
    pub config: Config,
    pub cpus: Vec<CpuSnapshot>,
    /// Per-LLC state to install before the decision.
    pub llc: Vec<LlcState>,
    /// True when the idle-core hints came from the snapshot, not the file.
    pub llc_from_snapshot: bool,
    pub question: Question,
}

/// Policy overrides from the command line: a preset replacing the file's, then `--set`
/// pairs applied after the file's own `set`.
#[derive(Clone, Debug, Default)]
pub struct PolicyOverride {
    pub preset: Option<String>,
    pub set: Vec<String>,
}

impl PolicyOverride {
    pub fn is_empty(&self) -> bool {
        self.preset.is_none() && self.set.is_empty()
    }
}

/// The file's policy with the command line's overrides on top, validated once.
pub fn resolve_policy(spec: &PolicySpec, cli: &PolicyOverride) -> Result<Config, String> {
    let preset = cli.preset.as_deref().unwrap_or(&spec.preset);
    let mut c = Config::from_preset(preset).map_err(|e| match cli.preset {
        Some(_) => format!("--preset: {e}"),
        None => format!("policy.preset: {e}"),
    })?;
    for (k, v) in &spec.set {
        c.set(k, &v.to_string())
            .map_err(|e| format!("policy.set.{k}: {e}"))?;
    }
    for kv in &cli.set {
        c.set_kv(kv).map_err(|e| format!("--set {kv}: {e}"))?;
    }
    c.validate().map_err(|e| format!("policy: {e}"))?;
    Ok(c)
}

impl Scenario {
    /// Engine inputs; `base_dir` resolves relative paths (the scenario file's directory).
    pub fn resolve(&self, base_dir: &Path, cli: &PolicyOverride) -> Result<Resolved, String> {
        let topo = build_topology(&self.topology, base_dir)?;
        self.resolve_on(topo, cli)
    }

    /// As [`Scenario::resolve`], on a topology already built from `self.topology` (trace
    /// replay reuses one topology across records).
    pub fn resolve_on(&self, topo: Topology, cli: &PolicyOverride) -> Result<Resolved, String> {
        let n = topo.nr_cpus();
        let config = resolve_policy(&self.policy, cli)?;
        let cpus = self.cpus.resolve(n)?;

        let question = match (&self.task, &self.wake, &self.newidle) {
            (Some(t), Some(w), None) => {
                check_task("task", t, n)?;
                Question::Wakeup {
                    task: *t,
                    wake: w.to_ctx(n)?,
                }
            }
            (None, None, Some(ni)) => {
                check_cpu("newidle.cpu", ni.cpu, n)?;
                let candidates = match &ni.candidates {
                    Some(c) => {
                        for (i, p) in c.iter().enumerate() {
                            check_cpu(&format!("newidle.candidates[{i}].src_cpu"), p.src_cpu, n)?;
                        }
                        c.clone()
                    }
                    None => derived_candidates(&cpus, &config)?,
                };
                let domains = topo.domains(ni.cpu).len();
                if ni.max_newidle_lb_cost.len() > domains {
                    return Err(format!(
                        "newidle.max_newidle_lb_cost: {} values for CPU {}'s {domains} domain(s)",
                        ni.max_newidle_lb_cost.len(),
                        ni.cpu
                    ));
                }
                let drawn = match &ni.drawn_domains {
                    None => None,
                    Some(d) => Some(d.iter().enumerate().try_fold(0u64, |m, (i, &d)| {
                        if d < domains {
                            Ok(m | 1 << d)
                        } else {
                            Err(format!(
                                "newidle.drawn_domains[{i}]: domain {d}, beyond CPU {}'s {domains}",
                                ni.cpu
                            ))
                        }
                    })?),
                };
                Question::NewIdle {
                    cpu: ni.cpu,
                    candidates,
                    gates: NewIdleGates {
                        overloaded: ni.overloaded,
                        max_newidle_lb_cost: ni.max_newidle_lb_cost.clone(),
                        drawn,
                    },
                }
            }
            (None, Some(_), None) => {
                return Err("task: missing (a wake-up scenario needs task and wake)".into());
            }
            (Some(_), None, None) => {
                return Err("wake: missing (a wake-up scenario needs task and wake)".into());
            }
            (None, None, None) => {
                return Err("give task and wake (a wake-up) or newidle (a newly-idle pull)".into());
            }
            _ => return Err("newidle: give either newidle or task and wake, not both".into()),
        };

        // Idle-core hints: from the snapshot unless the file says otherwise, so a one-off
        // scenario sees the hint the kernel would have if idle transitions had been tracked.
        let mut probe =
            crate::policy::Engine::new(topo.clone(), config).map_err(|e| format!("policy: {e}"))?;
        probe.sync_idle_core_hints(&cpus);
        let mut llc = probe.llc_states().to_vec();
        let llc_from_snapshot = self.llc_state.is_none();
        if let Some(list) = &self.llc_state {
            for (i, l) in list.iter().enumerate() {
                let Some(slot) = llc.get_mut(l.llc) else {
                    return Err(format!(
                        "llc_state[{i}].llc: LLC {} does not exist (the topology has {})",
                        l.llc,
                        topo.nr_llcs()
                    ));
                };
                if let Some(h) = l.has_idle_cores {
                    slot.has_idle_cores = h;
                }
                if let Some(c) = l.avg_scan_cost_ns {
                    slot.avg_scan_cost_ns = c;
                }
                if l.nr_idle_scan.is_some() {
                    slot.nr_idle_scan = l.nr_idle_scan;
                }
            }
        }
        Ok(Resolved {
            topo,
            config,
            cpus,
            llc,
            llc_from_snapshot,
            question,
        })
    }
}

/// The most pull candidates a newly-idle scenario may derive from its CPUs' `nr_running`:
/// as many as `newidle.candidates` may list ([`crate::json_limits::MAX_ARRAY_LEN`]).  Each
/// is 160 bytes, and `nr_running` is any u32: four billion waiting tasks on one CPU once
/// grew a vector past 6 GB on the system allocator, for 20 s and more.
pub const MAX_DERIVED_CANDIDATES: u64 = crate::json_limits::MAX_ARRAY_LEN as u64;

/// One candidate per waiting task of every CPU with two or more runnable tasks; refused,
/// before any is made, when that is more than [`MAX_DERIVED_CANDIDATES`].
pub(crate) fn derived_candidates(
    cpus: &[CpuSnapshot],
    cfg: &Config,
) -> Result<Vec<PullCandidate>, String> {
    let runnable = |s: &CpuSnapshot| {
        let delayed = if cfg.delayed_dequeue {
            s.nr_delayed.min(s.nr_running)
        } else {
            0
        };
        s.nr_running - delayed
    };
    let waiting: u64 = cpus
        .iter()
        .map(|s| u64::from(runnable(s).saturating_sub(1)))
        .sum();
    if waiting > MAX_DERIVED_CANDIDATES {
        return Err(format!(
            "newidle: the CPUs' nr_running make {waiting} waiting tasks to consider pulling; \
             at most {MAX_DERIVED_CANDIDATES} (lower nr_running, or list newidle.candidates)"
        ));
    }
    let mut v = Vec::with_capacity(waiting as usize);
    for (c, s) in cpus.iter().enumerate() {
        for k in 1..runnable(s) {
            v.push(PullCandidate {
                pid: 1000 * c as u32 + k,
                src_cpu: c,
                allowed: CpuSet::new(),
                load: 1024,
                cache_hot: false,
            });
        }
    }
    Ok(v)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn derived_candidates_are_counted_before_they_are_made() {
        let newidle = |nr_running: u64| {
            parse_json::<Scenario>(&format!(
                r#"{{"topology": {{"shape": "1x1x2x1"}}, "newidle": {{"cpu": 0}},
                    "cpus": ["idle", {{"nr_running": {nr_running}, "nr_delayed": 5}}]}}"#
            ))
            .unwrap()
            .resolve(Path::new("."), &PolicyOverride::default())
        };
        // Delayed tasks are not pulled (delayed dequeue is on in mainline).
        let at = MAX_DERIVED_CANDIDATES + 1 + 5;
        match newidle(at).unwrap().question {
            Question::NewIdle { candidates, .. } => {
                assert_eq!(candidates.len() as u64, MAX_DERIVED_CANDIDATES)
            }
            q => panic!("{q:?}"),
        }
        let e = newidle(at + 1).unwrap_err();
        assert!(
            e.starts_with("newidle: the CPUs' nr_running make 16385 waiting tasks"),
            "{e}"
        );
        let e = newidle(u32::MAX as u64).unwrap_err();
        assert!(e.contains("4294967289 waiting tasks"), "{e}");
    }

    #[test]
    fn shapes_and_states_parse() {
        let t: TopologyInput = parse_json(r#"{"shape": "1x1x2x2"}"#).unwrap();
        assert_eq!(build_topology(&t, Path::new(".")).unwrap().nr_cpus(), 4);
        let t: TopologyInput = parse_json(
            r#"{"shape": {"nodes": 1, "llcs_per_node": 1, "cores_per_llc": 2, "threads": 1}}"#,
        )
        .unwrap();
        assert_eq!(build_topology(&t, Path::new(".")).unwrap().nr_cpus(), 2);
        let e = parse_json::<TopologyInput>(r#"{"shape": "2y2"}"#).unwrap_err();
        assert!(e.starts_with("shape: '2y2' is not NODESx"), "{e}");

        let s: CpuStates = parse_json(
            r#"{"default": "idle", "overrides": {"1-2": "busy:2", "2": {"ttwu_pending": true}}}"#,
        )
        .unwrap();
        let snaps = s.resolve(4).unwrap();
        assert!(snaps[0].available_idle());
        assert_eq!(snaps[1].nr_running, 2);
        assert!(
            snaps[2].ttwu_pending && snaps[2].nr_running == 2,
            "later overrides win"
        );
        let e = s.resolve(2).unwrap_err();
        assert!(
            e.contains(r#"cpus.overrides."1-2": CPU 2 is outside"#),
            "{e}"
        );
        let e = parse_json::<CpuStates>(r#"{"default": "sleepy"}"#).unwrap_err();
        assert!(e.starts_with("default: 'sleepy' is not a CPU state"), "{e}");
        let e = parse_json::<CpuStates>(r#"[{"idle": true, "nr_runing": 1}]"#).unwrap_err();
        assert!(e.starts_with("[0].nr_runing: unknown field"), "{e}");
        let l: CpuStates = parse_json(r#"["idle", {"base": "busy", "load": 7}]"#).unwrap();
        let snaps = l.resolve(2).unwrap();
        assert_eq!((snaps[1].nr_running, snaps[1].load), (1, 7));
        assert!(l.resolve(3).unwrap_err().starts_with("cpus: 2 entries"));
    }
}
