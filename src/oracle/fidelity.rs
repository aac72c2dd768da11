//! What `oracle compare`'s agreement means: which inputs the records are replayed with
//! ([`Inputs`]; the live agent's stand-ins are [`live_view`]), the trivial policy beside every
//! figure (never move a task: [`Fidelity`]), and whether the figure tells kernel versions
//! apart ([`Discrimination`]).

use std::fmt::Write as _;

use serde::Serialize;

use crate::explain::{PolicyOverride, Question, Resolved, resolve_policy};
use crate::policy::pelt::RootHLoad;
use crate::policy::{
    Config, CpuSnapshot, CpuStates, Engine, PolicySpec, TaskState, Topology, TraceRecord,
    WAKE_EXEC, WAKE_FORK, WakeCtx,
};

/// Nice-0 load weight, the live agent's unit of load (`NICE_0_LOAD` in
/// src/live/placement.rs).
pub const NICE_0_LOAD: u64 = 1024;

/// The inputs `oracle compare` replays each record with.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, clap::ValueEnum, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Inputs {
    /// The state the kernel read, as recorded.
    #[default]
    Kernel,
    /// The state the live agent would have decided on, as far as a record tells it.
    Live,
}

impl Inputs {
    pub fn name(self) -> &'static str {
        match self {
            Inputs::Kernel => "kernel",
            Inputs::Live => "live",
        }
    }

    /// The record as a replay with these inputs decides on it; `topo` is the record's own.
    pub fn view(self, rec: TraceRecord, topo: &Topology) -> TraceRecord {
        match self {
            Inputs::Kernel => rec,
            Inputs::Live => live_view(rec, topo),
        }
    }
}

/// A kernel's record with every input the live agent computes otherwise replaced by the
/// agent's own value, where the record allows computing it (src/live/placement.rs:
/// `begin_batch()` and `place()`).  What the live scheduler's user gets is the engine on
/// these inputs, not on the kernel's.
///
/// Replaced (kernel's value → the agent's):
/// - CPU `load` and `util`: the cfs runqueue's PELT `load_avg` and `util_avg` → the state
///   estimator's (bpf/pelt.bpf.h, fed the recorded kernel's own events), where the record
///   carries it.  A record without it takes runnable tasks × 1024 for the load, i.e.
///   `(nr_running - nr_delayed) × 1024`, and the kernel's util;
/// - CPU `capacity`: `rq->cpu_capacity`, less what RT, IRQ and thermal pressure take → 0, the
///   topology's original capacity (BPF reads no `capacity_of()`);
/// - CPU `sched_idle_only`: the runqueue holds only SCHED_IDLE tasks → false (the agent
///   keeps no count of them);
/// - CPU `runnable` and `util_est` (read by the fork/exec slow path) → none: the estimator
///   keeps neither, and the slow path reads `util` in their place;
/// - wakee `load` and `util`: its PELT averages → the estimator's, where the record carries
///   them.  Without: its nice weight (`p->scx.weight` × 1024 / 100; a record has no nice
///   level, and every task counts as nice 0, 1024) and 0;
/// - wakee `is_per_cpu_kthread` → false (the agent learns it for wakers only; the engine
///   reads the waker's);
/// - waker `load`: `current`'s PELT `load_avg` → the estimator's, where the record carries
///   it, else 1024;
/// - waker `util` → 0, waker `allowed` → every CPU of the topology (the agent does not know
///   the waker's mask; the engine does not read it);
/// - LLC `has_idle_cores`: the kernel's `sd_llc_shared` hint, stale as it may be → derived
///   from the CPUs of the record (the agent syncs its hints with its snapshot before every
///   batch, `Engine::sync_idle_core_hints`);
/// - LLC `nr_idle_scan`: SIS_UTIL's depth as load balancing last stored it → none: the engine
///   estimates it from the CPUs' `util` at the wake-up, as it does in the agent (which cannot
///   read the kernel's).
///
/// The kernel's, because the agent's value comes from its history and no single record
/// holds it: `idle_stamp_ns` (the agent's is when its last task stopped on the CPU),
/// `avg_idle_ns` (its own average of the idle periods BPF reports),
///   `idle_exit_ns` (not recorded; SIS_PROP's `wake_avg_idle` of v5.14-v6.6 reads it),
///   `nr_delayed` (its own emulation of delayed dequeue), `idle`, `nr_running` and
///   `ttwu_pending` (BPF's reading, a batch later, with the agent's own corrections for its
///   CPU, its decisions in flight and CPUs freed after the wake-up was selected); the LLC's
///   `avg_scan_cost_ns` (the engine's emulated cost of its own past scans); the wakee's and
///   the waker's `recent_used_cpu`, `wakee_flips`, `last_wakee` and `wakee_flip_decay_ts`
///   (kept by the same rules, from the agent's own placements and in a table that forgets);
///   the wake-up's flags, context and CPUs, and the waker's `is_per_cpu_kthread` (the same
///   facts, from BPF).
///
/// CPU states that do not resolve on `topo` are left as they are, for the replay to report.
pub fn live_view(rec: TraceRecord, topo: &Topology) -> TraceRecord {
    with_stand_ins(rec, topo, &StandIn::ALL)
}

/// The live agent's `task_h_load()`: each CPU's root `h_load` as the agent's own decisions
/// refresh it (src/live/placement.rs), carried from one record of a file to the next.  The
/// kernel's is refreshed by its own wake-ups and by load balancing, which the agent does
/// not see, so the two drift apart within a jiffy.
#[derive(Clone, Debug, Default)]
pub struct AgentHLoads {
    cpus: Vec<RootHLoad>,
}

impl AgentHLoads {
    /// Scales the wakee's load (on prev's root cfs_rq) and the waker's (on the waker's
    /// CPU's) of a live view, as the agent would at this wake-up.
    pub fn apply(&mut self, rec: &mut TraceRecord, topo: &Topology) {
        let nr = topo.nr_cpus();
        let Ok(cpus) = rec.cpus.resolve(nr) else {
            return;
        };
        if self.cpus.len() != nr {
            self.cpus = vec![RootHLoad::default(); nr];
        }
        let now = rec.wake.now_ns;
        let prev = rec.task.prev_cpu;
        if prev < nr {
            rec.task.load = self.cpus[prev].task_h_load(rec.task.load, cpus[prev].load, now);
        }
        let this = rec.wake.waker_cpu;
        if let Some(w) = rec.wake.waker.as_mut().filter(|_| this < nr) {
            w.load = self.cpus[this].task_h_load(w.load, cpus[this].load, now);
        }
    }
}

/// One of the live agent's stand-ins that [`live_view`] puts in place of the kernel's
/// value (its list above says why each is what it is).  `oracle compare --stand-ins`
/// replays with each alone and with all but each: what each costs, and what replacing it
/// by the kernel's value would win back.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum StandIn {
    /// CPU `load`: the estimator's, else runnable tasks x 1024.
    CpuLoad,
    /// CPU `util`: the estimator's, else the kernel's.
    CpuUtil,
    /// CPU `capacity`: the original capacity.
    CpuCapacity,
    /// CPU `sched_idle_only`: false.
    SchedIdleOnly,
    /// CPU `runnable` and `util_est`: none (0; the slow path then reads `util` for both).
    CpuRunnable,
    /// Wakee `load`: the estimator's, else its nice weight.
    WakeeLoad,
    /// Wakee `util`: the estimator's, else 0.
    WakeeUtil,
    /// Wakee `is_per_cpu_kthread`: false.
    WakeeKthread,
    /// Waker `load`, `util` and `allowed`: the estimator's load (else 1024), 0, every CPU.
    Waker,
    /// LLC `has_idle_cores`: derived from the record's CPUs.
    IdleCoreHints,
    /// LLC `nr_idle_scan`: estimated from the CPUs' util.
    IdleScanDepth,
}

impl StandIn {
    pub const ALL: [StandIn; 11] = [
        StandIn::CpuLoad,
        StandIn::CpuUtil,
        StandIn::CpuCapacity,
        StandIn::SchedIdleOnly,
        StandIn::CpuRunnable,
        StandIn::WakeeLoad,
        StandIn::WakeeUtil,
        StandIn::WakeeKthread,
        StandIn::Waker,
        StandIn::IdleCoreHints,
        StandIn::IdleScanDepth,
    ];

    pub fn name(self) -> &'static str {
        match self {
            StandIn::CpuLoad => "cpu_load",
            StandIn::CpuUtil => "cpu_util",
            StandIn::CpuCapacity => "cpu_capacity",
            StandIn::SchedIdleOnly => "sched_idle_only",
            StandIn::WakeeLoad => "wakee_load",
            StandIn::WakeeUtil => "wakee_util",
            StandIn::WakeeKthread => "wakee_kthread",
            StandIn::Waker => "waker",
            StandIn::IdleCoreHints => "idle_core_hints",
            StandIn::IdleScanDepth => "idle_scan_depth",
            StandIn::CpuRunnable => "cpu_runnable",
        }
    }
}

/// `rec` with the stand-ins of `set` in place of the kernel's values, the rest as recorded.
/// CPU states that do not resolve on `topo` are left as they are, for the replay to report.
pub fn with_stand_ins(mut rec: TraceRecord, topo: &Topology, set: &[StandIn]) -> TraceRecord {
    let has = |s: StandIn| set.contains(&s);
    let nr = topo.nr_cpus();
    let est = rec
        .estimated
        .clone()
        .filter(|e| e.cpu_load.len() == nr && e.cpu_util.len() == nr);
    if (has(StandIn::CpuLoad)
        || has(StandIn::CpuUtil)
        || has(StandIn::CpuCapacity)
        || has(StandIn::SchedIdleOnly)
        || has(StandIn::CpuRunnable))
        && let Ok(cpus) = rec.cpus.resolve(nr)
    {
        let no_runnable = has(StandIn::CpuRunnable);
        let live: Vec<CpuSnapshot> = cpus
            .into_iter()
            .enumerate()
            .map(|(i, s)| CpuSnapshot {
                load: match &est {
                    _ if !has(StandIn::CpuLoad) => s.load,
                    Some(e) => e.cpu_load[i],
                    None => u64::from(s.nr_running.saturating_sub(s.nr_delayed)) * NICE_0_LOAD,
                },
                util: match &est {
                    Some(e) if has(StandIn::CpuUtil) => e.cpu_util[i],
                    _ => s.util,
                },
                capacity: if has(StandIn::CpuCapacity) {
                    0
                } else {
                    s.capacity
                },
                sched_idle_only: s.sched_idle_only && !has(StandIn::SchedIdleOnly),
                runnable: if no_runnable { 0 } else { s.runnable },
                util_est: if no_runnable { 0 } else { s.util_est },
                ..s
            })
            .collect();
        rec.cpus = CpuStates::from_snapshots(&live);
    }
    for llc in rec.llc_state.iter_mut().flatten() {
        if has(StandIn::IdleCoreHints) {
            llc.has_idle_cores = None;
        }
        if has(StandIn::IdleScanDepth) {
            llc.nr_idle_scan = None;
        }
    }
    let (task_load, task_util) = match &rec.estimated {
        Some(e) => (
            e.task_load.unwrap_or(rec.task.load),
            e.task_util.unwrap_or(rec.task.util),
        ),
        None => (NICE_0_LOAD, 0),
    };
    if has(StandIn::WakeeLoad) {
        rec.task.load = task_load;
    }
    if has(StandIn::WakeeUtil) {
        rec.task.util = task_util;
    }
    if has(StandIn::WakeeKthread) {
        rec.task.is_per_cpu_kthread = false;
    }
    let waker_load = rec
        .estimated
        .as_ref()
        .and_then(|e| e.waker_load)
        .unwrap_or(NICE_0_LOAD);
    if let Some(w) = rec.wake.waker.as_mut().filter(|_| has(StandIn::Waker)) {
        w.load = waker_load;
        w.util = 0;
        w.allowed = *topo.possible();
    }
    rec
}

/// What each stand-in does to the agreement of wake-ups replayed from the kernel's inputs:
/// with it alone in place, and with every stand-in but it (the live inputs, less one).
#[derive(Clone, Debug, Default, Serialize)]
pub struct StandInCosts {
    /// In [`StandIn::ALL`]'s order once the first record is in.
    pub rows: Vec<StandInCost>,
}

#[derive(Clone, Debug, Serialize)]
pub struct StandInCost {
    pub stand_in: StandIn,
    pub alone: Fidelity,
    pub all_but: Fidelity,
}

impl StandInCosts {
    /// Replays the wake-up `rec` (kernel inputs, on `topo`; `cli` on top) twice per
    /// stand-in.
    pub fn add(
        &mut self,
        rec: &TraceRecord,
        topo: &Topology,
        cli: &PolicyOverride,
    ) -> Result<(), String> {
        if self.rows.is_empty() {
            self.rows = StandIn::ALL
                .iter()
                .map(|&stand_in| StandInCost {
                    stand_in,
                    alone: Fidelity::default(),
                    all_but: Fidelity::default(),
                })
                .collect();
        }
        for row in &mut self.rows {
            let but: Vec<StandIn> = StandIn::ALL
                .into_iter()
                .filter(|&s| s != row.stand_in)
                .collect();
            for (set, tally) in [
                (std::slice::from_ref(&row.stand_in), &mut row.alone),
                (&but[..], &mut row.all_but),
            ] {
                let view = with_stand_ins(rec.clone(), topo, set);
                let (cpu, flags) = replayed_cpu(&view, topo, cli)?;
                tally.add(flags, rec.task.prev_cpu, rec.recorded_cpu, cpu);
            }
        }
        Ok(())
    }

    pub fn merge(&mut self, o: &StandInCosts) {
        if self.rows.is_empty() {
            self.rows = o.rows.clone();
            return;
        }
        for (a, b) in self.rows.iter_mut().zip(&o.rows) {
            a.alone.merge(&b.alone);
            a.all_but.merge(&b.all_but);
        }
    }

    /// One line a stand-in: `  stand-in cpu_load: alone 950 of 1000 (95.0%), left prev 60
    /// of 100 (60.0%); all but it 990 (99.0%), left prev 95 (95.0%)` (tools/oracle/run
    /// parses them).
    pub fn render(&self, o: &mut String) {
        for r in &self.rows {
            let (a, b) = (&r.alone, &r.all_but);
            let _ = writeln!(
                o,
                "  stand-in {}: alone {} of {} ({}), left prev {} of {} ({}); all but it {} ({}), \
                 left prev {} ({})",
                r.stand_in.name(),
                a.all.engine,
                a.all.records,
                share(a.all.engine, a.all.records),
                a.wakeups_left_prev.engine,
                a.wakeups_left_prev.records,
                share(a.wakeups_left_prev.engine, a.wakeups_left_prev.records),
                b.all.engine,
                share(b.all.engine, b.all.records),
                b.wakeups_left_prev.engine,
                share(b.wakeups_left_prev.engine, b.wakeups_left_prev.records),
            );
        }
    }
}

/// The CPU the engine picks for the wake-up record `rec` on `topo`, and the wake-up's flags.
fn replayed_cpu(
    rec: &TraceRecord,
    topo: &Topology,
    cli: &PolicyOverride,
) -> Result<(usize, u32), String> {
    let r = crate::explain::Scenario::from(rec).resolve_on(topo.clone(), cli)?;
    let Question::Wakeup { task, wake } = &r.question else {
        return Err("not a wake-up".into());
    };
    Ok((select_with(&r, r.config, task, wake)?, wake.wake_flags))
}

/// The CPU an engine configured as `config` picks for the wake-up of `task` resolved as
/// `r` (its topology, CPUs and LLC state), the wakee and waker state left as they were.
fn select_with(
    r: &Resolved,
    config: Config,
    task: &TaskState,
    wake: &WakeCtx,
) -> Result<usize, String> {
    let mut engine = Engine::new(r.topo.clone(), config).map_err(|e| format!("policy: {e}"))?;
    for (l, s) in r.llc.iter().enumerate() {
        engine.set_llc_state(l, *s);
    }
    let (mut t, mut w) = (*task, *wake);
    Ok(engine.select_cpu(&r.cpus, &mut t, &mut w).cpu)
}

/// `n` of `of` as a share, `-` of nothing.
pub(crate) fn share(n: usize, of: usize) -> String {
    if of == 0 {
        "-".to_string()
    } else {
        format!("{:.1}%", 100.0 * n as f64 / of as f64)
    }
}

record_counts! {
    /// A class of records: how many, on how many the engine's CPU is the kernel's, and on how
    /// many prev is (the policy that never moves a task, beside which the engine's figure is
    /// read).
    AgainstPrev { records, engine, prev }
}

/// The agreement where it says something: overall, on the wake-ups the kernel kept on prev
/// (which never moving a task gets right too) and on those it moved, and on forks and
/// execs (the slow path), each beside never moving the task.  The four classes partition
/// the records: a record is a fork if it has `WF_FORK`, else an exec if it has `WF_EXEC`,
/// else a wake-up.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct Fidelity {
    pub all: AgainstPrev,
    pub wakeups_kept_prev: AgainstPrev,
    pub wakeups_left_prev: AgainstPrev,
    pub forks: AgainstPrev,
    pub execs: AgainstPrev,
}

impl Fidelity {
    /// A record of `wake_flags` whose task last ran on `prev`, placed by the kernel on
    /// `kernel` and by the engine on `engine`.
    pub fn add(&mut self, wake_flags: u32, prev: usize, kernel: usize, engine: usize) {
        let (agree, kept) = (engine == kernel, kernel == prev);
        self.all.add(agree, kept);
        let class = if wake_flags & WAKE_FORK != 0 {
            &mut self.forks
        } else if wake_flags & WAKE_EXEC != 0 {
            &mut self.execs
        } else if kept {
            &mut self.wakeups_kept_prev
        } else {
            &mut self.wakeups_left_prev
        };
        class.add(agree, kept);
    }

    pub fn merge(&mut self, o: &Fidelity) {
        for (a, b) in self.classes_mut().into_iter().zip(o.classes()) {
            a.1.merge(b.1);
        }
    }

    /// Each class with its label in the report.
    pub fn classes(&self) -> [(&'static str, &AgainstPrev); 5] {
        [
            ("all placements", &self.all),
            ("wake-ups kept on prev", &self.wakeups_kept_prev),
            ("wake-ups that left prev", &self.wakeups_left_prev),
            ("forks", &self.forks),
            ("execs", &self.execs),
        ]
    }

    fn classes_mut(&mut self) -> [(&'static str, &mut AgainstPrev); 5] {
        [
            ("all placements", &mut self.all),
            ("wake-ups kept on prev", &mut self.wakeups_kept_prev),
            ("wake-ups that left prev", &mut self.wakeups_left_prev),
            ("forks", &mut self.forks),
            ("execs", &mut self.execs),
        ]
    }

    /// One line a class: `  kernel inputs: wake-ups that left prev    1682; engine agrees
    /// 1634 (97.1%), always prev       0 (-)` (tools/oracle/run parses them).
    pub fn render(&self, inputs: Inputs, o: &mut String) {
        for (label, t) in self.classes() {
            let _ = writeln!(
                o,
                "  {} inputs: {label:<23} {:>7}; engine agrees {:>7} ({}), always prev {:>7} ({})",
                inputs.name(),
                t.records,
                t.engine,
                share(t.engine, t.records),
                t.prev,
                share(t.prev, t.records)
            );
        }
    }
}

/// The presets `--discriminate` replays each record with besides the replay's own: those
/// of the kernels tools/oracle/run records (`preset_for_release()` of Debian's 5.10, 6.1,
/// 6.12 and 7.x).  Every preset would replay a record up to thirteen times instead of
/// three, mostly as kernels no record comes from, and make a report of pairs no one reads.
pub const DISCRIMINATION_PRESETS: &[&str] = &["v5.10.y", "v6.1.y", "v6.12.y", "mainline"];

/// The replay's preset against another, on the same records: where the two decide
/// differently, whose CPU the kernel's is.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct PresetPair {
    /// The replay's preset (the records', or `--preset`).
    pub own: String,
    pub other: String,
    /// The two configurations are the same (the presets differ in nothing the engine
    /// models): no record can tell them apart, and none is replayed twice for it.
    pub same_policy: bool,
    /// Records on which the two chose different CPUs.
    pub differ: usize,
    /// Of them, those where the kernel's CPU is the replay's preset's, and the other's; the
    /// rest went to a third CPU.
    pub own_matches: usize,
    pub other_matches: usize,
}

/// Version discrimination: every record replayed again with each of
/// [`DISCRIMINATION_PRESETS`] (the record's and `--set`'s flags on top, as on the replay's
/// own), one [`PresetPair`] per pair met.  A figure of agreement that barely moves from one
/// kernel's preset to another's says little about versions; this says how often, where the
/// versions' policies decide differently, the recorded kernel's own is the one it followed.
/// Holds at most one pair per preset a record names and preset of the list, whatever the
/// number of records.
#[derive(Clone, Debug, Default, Serialize)]
pub struct Discrimination {
    pub pairs: Vec<PresetPair>,
    /// The other presets for the policy of the last record: records of one recording share
    /// their policy.
    #[serde(skip)]
    others: Option<OtherPresets>,
}

/// The presets a record of `policy` is replayed with besides its own.
#[derive(Clone, Debug)]
struct OtherPresets {
    policy: PolicySpec,
    replays: Vec<OtherPreset>,
}

#[derive(Clone, Copy, Debug)]
struct OtherPreset {
    /// Its index in [`Discrimination::pairs`].
    pair: usize,
    /// Its configuration, `None` where it is the replay's own (nothing to replay).
    config: Option<Config>,
}

impl Discrimination {
    /// Replays `inputs` (the record `rec`, resolved, which the replay's preset placed on
    /// `own_cpu`) with each other preset and counts the disagreements.  Errors are a preset
    /// that the record's or the command line's flags do not apply to.
    pub fn add(
        &mut self,
        rec: &TraceRecord,
        inputs: &Resolved,
        own_cpu: usize,
        cli: &PolicyOverride,
    ) -> Result<(), String> {
        let Question::Wakeup { task, wake } = &inputs.question else {
            return Ok(());
        };
        if self.others.as_ref().is_none_or(|o| o.policy != rec.policy) {
            let replays = self.others_for(rec, inputs.config, cli)?;
            self.others = Some(OtherPresets {
                policy: rec.policy.clone(),
                replays,
            });
        }
        let Some(others) = &self.others else {
            return Ok(());
        };
        for &OtherPreset { pair, config } in &others.replays {
            let Some(config) = config else {
                continue;
            };
            let other_cpu = select_with(inputs, config, task, wake)?;
            if other_cpu != own_cpu {
                let p = &mut self.pairs[pair];
                p.differ += 1;
                p.own_matches += (rec.recorded_cpu == own_cpu) as usize;
                p.other_matches += (rec.recorded_cpu == other_cpu) as usize;
            }
        }
        Ok(())
    }

    /// For records of `rec`'s policy, replayed with `own` (`cli` applied): each other preset,
    /// its pair made where it is new.
    fn others_for(
        &mut self,
        rec: &TraceRecord,
        own: Config,
        cli: &PolicyOverride,
    ) -> Result<Vec<OtherPreset>, String> {
        let own_name = cli.preset.as_deref().unwrap_or(&rec.policy.preset).trim();
        let mut v = Vec::new();
        for &other in DISCRIMINATION_PRESETS.iter().filter(|&&p| p != own_name) {
            let with_other = PolicyOverride {
                preset: Some(other.to_string()),
                set: cli.set.clone(),
            };
            let config = resolve_policy(&rec.policy, &with_other)
                .map_err(|e| format!("--discriminate with preset {other}: {e}"))?;
            let pair = self.pair_index(own_name, other);
            let same = config == own;
            self.pairs[pair].same_policy = same;
            v.push(OtherPreset {
                pair,
                config: (!same).then_some(config),
            });
        }
        Ok(v)
    }

    fn pair_index(&mut self, own: &str, other: &str) -> usize {
        match self
            .pairs
            .iter()
            .position(|p| p.own == own && p.other == other)
        {
            Some(i) => i,
            None => {
                self.pairs.push(PresetPair {
                    own: own.to_string(),
                    other: other.to_string(),
                    ..PresetPair::default()
                });
                self.pairs.len() - 1
            }
        }
    }

    pub fn merge(&mut self, o: &Discrimination) {
        for p in &o.pairs {
            let i = self.pair_index(&p.own, &p.other);
            let q = &mut self.pairs[i];
            q.same_policy = p.same_policy;
            q.differ += p.differ;
            q.own_matches += p.own_matches;
            q.other_matches += p.other_matches;
        }
    }

    /// One line a pair, in the order of the presets' names: `  kernel inputs: preset v6.1.y
    /// against v5.10.y: 595 records decide differently; the kernel's CPU is v6.1.y's in 594
    /// (99.8%), v5.10.y's in 1, another in 0` (tools/oracle/run parses them).
    pub fn render(&self, inputs: Inputs, o: &mut String) {
        let mut pairs: Vec<&PresetPair> = self.pairs.iter().collect();
        pairs.sort_by(|a, b| (&a.own, &a.other).cmp(&(&b.own, &b.other)));
        for p in pairs {
            let _ = writeln!(
                o,
                "  {} inputs: preset {} against {}: {} records decide differently; the kernel's \
                 CPU is {}'s in {} ({}), {}'s in {}, another in {}{}",
                inputs.name(),
                p.own,
                p.other,
                p.differ,
                p.own,
                p.own_matches,
                share(p.own_matches, p.differ),
                p.other,
                p.other_matches,
                p.differ - p.own_matches - p.other_matches,
                if p.same_policy {
                    " (the same policy)"
                } else {
                    ""
                }
            );
        }
    }
}

/// How far the state estimator's averages (bpf/pelt.bpf.h) are from the kernel's, over the
/// records that carry both.  An error is relative to the kernel's value, or to 1024 where
/// the kernel's is smaller: one nice-0 task's whole load, one CPU's whole util (relative
/// error near 0 says nothing: an idle CPU's load of 3 against 1 is 200%).
#[derive(Clone, Debug, Default, Serialize)]
pub struct EstimateErrors {
    /// Every CPU of every record.
    pub cpu_load: ErrorSpread,
    pub cpu_util: ErrorSpread,
    /// The wakee of every record whose task the estimator had seen queued.
    pub task_load: ErrorSpread,
    pub task_util: ErrorSpread,
}

impl EstimateErrors {
    /// `rec`'s estimates against its kernel values (`rec` as recorded, before any view).
    pub fn add(&mut self, rec: &TraceRecord, topo: &Topology) {
        let nr = topo.nr_cpus();
        let Some(e) = rec
            .estimated
            .as_ref()
            .filter(|e| e.cpu_load.len() == nr && e.cpu_util.len() == nr)
        else {
            return;
        };
        let Ok(cpus) = rec.cpus.resolve(nr) else {
            return;
        };
        for (i, s) in cpus.iter().enumerate() {
            self.cpu_load.add(e.cpu_load[i], s.load);
            self.cpu_util
                .add(u64::from(e.cpu_util[i]), u64::from(s.util));
        }
        if let Some(l) = e.task_load {
            self.task_load
                .add(l, e.kernel_task_load.unwrap_or(rec.task.load));
        }
        if let Some(u) = e.task_util {
            self.task_util.add(u64::from(u), u64::from(rec.task.util));
        }
    }

    pub fn merge(&mut self, o: &EstimateErrors) {
        self.cpu_load.merge(&o.cpu_load);
        self.cpu_util.merge(&o.cpu_util);
        self.task_load.merge(&o.task_load);
        self.task_util.merge(&o.task_util);
    }

    pub fn render(&self, o: &mut String) {
        if self.cpu_load.n == 0 {
            return;
        }
        let _ = writeln!(
            o,
            "  estimator's error from the kernel's averages (relative to the kernel's value, \
             or to 1024 where it is smaller): field, values, p50, p99"
        );
        for (name, e) in [
            ("cpu load_avg", &self.cpu_load),
            ("cpu util_avg", &self.cpu_util),
            ("wakee load_avg", &self.task_load),
            ("wakee util_avg", &self.task_util),
        ] {
            let pct = |q| match e.quantile(q) {
                Some(v) => format!("{v:.1}%"),
                None => "-".into(),
            };
            let _ = writeln!(
                o,
                "    {name:<16} {:>9} {:>7} {:>7}",
                e.n,
                pct(0.5),
                pct(0.99)
            );
        }
    }
}

/// Relative errors in 0.1% steps up to 100%, and how many were beyond.
#[derive(Clone, Debug, Default)]
pub struct ErrorSpread {
    pub n: u64,
    /// Entry k counts errors in [k, k+1) tenths of a percent; the last, 100% and more.
    tenths: Vec<u64>,
}

const ERROR_STEPS: usize = 1001;

impl ErrorSpread {
    pub fn add(&mut self, estimate: u64, kernel: u64) {
        if self.tenths.is_empty() {
            self.tenths = vec![0; ERROR_STEPS];
        }
        let err = estimate.abs_diff(kernel) as f64 / kernel.max(1024) as f64;
        let k = ((err * 1000.0) as usize).min(ERROR_STEPS - 1);
        self.tenths[k] += 1;
        self.n += 1;
    }

    pub fn merge(&mut self, o: &ErrorSpread) {
        if o.n == 0 {
            return;
        }
        if self.tenths.is_empty() {
            self.tenths = vec![0; ERROR_STEPS];
        }
        for (a, b) in self.tenths.iter_mut().zip(&o.tenths) {
            *a += b;
        }
        self.n += o.n;
    }

    /// The `q` quantile in percent, to the step's upper edge (100 = 100% or more).
    pub fn quantile(&self, q: f64) -> Option<f64> {
        if self.n == 0 {
            return None;
        }
        let want = ((self.n as f64) * q).ceil().max(1.0) as u64;
        let mut seen = 0;
        for (k, c) in self.tenths.iter().enumerate() {
            seen += c;
            if seen >= want {
                return Some(((k + 1) as f64 / 10.0).min(100.0));
            }
        }
        Some(100.0)
    }
}

impl Serialize for ErrorSpread {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        use serde::ser::SerializeStruct;
        let mut st = s.serialize_struct("ErrorSpread", 3)?;
        st.serialize_field("n", &self.n)?;
        st.serialize_field("p50_pct", &self.quantile(0.5))?;
        st.serialize_field("p99_pct", &self.quantile(0.99))?;
        st.end()
    }
}
