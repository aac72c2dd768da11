//! The kernel oracle: the fair class's own wake-up placements, recorded on a real kernel,
//! replayed through the engine decision by decision.
//!
//! `scx_wakelab oracle record` ([`record`], BPF in bpf/oracle.bpf.c) writes one
//! [`TraceRecord`] per `select_task_rq_fair()` call: the state the kernel read and the CPU
//! it chose.  `scx_wakelab oracle compare` replays those records with the preset of the
//! recorded kernel and reports how often the engine picks the same CPU, beside how often
//! never moving the task would (overall, on the wake-ups the kernel kept on prev and on those
//! it moved, on forks and execs: [`fidelity`]), per rule, how often the kernel's decision
//! raced with a change of the CPUs it read, and the seeds' quantities (recent_used_cpu
//! hits, the sync shortcut, delayed sleepers).  `--inputs live` replays with the inputs the
//! live agent would have had ([`fidelity::live_view`]); `--discriminate` replays with other
//! kernels' presets too, to show whether the agreement tells versions apart.
//! `oracle record --newidle FILE` also records the kernel's newly-idle balances, which
//! `oracle newidle` counts ([`newidle`]).
//!
//! This file is the pure half: the record as plain numbers ([`Sample`]), its conversion
//! into a trace line, and the comparison; it reads no BPF and no system state.  Recording
//! (BPF, the ring, the trace file) is [`record`]'s, and the recording machine's topology
//! [`sysfs`]'s.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::path::PathBuf;

use serde::Serialize;

use crate::explain::{ChainStep, ExplainReport, PolicyOverride, Question};
use crate::policy::{
    CpuSet, CpuSnapshot, CpuStates, Estimated, LlcStateInput, PolicySpec, Rule, TaskState,
    Topology, TopologyInput, TraceRecord, WakeCtx, WakeInput, WakerContext,
};
pub use fidelity::{Discrimination, EstimateErrors, Fidelity, Inputs, StandInCosts};

/// Declares a struct of counts over records: the first field counts the records, each other
/// one the records where its condition held. `add` takes a record's conditions in field
/// order; `merge` sums another file's counts in. The replay's tallies are all of this kind.
macro_rules! record_counts {
    ($(#[$attr:meta])* $name:ident { $records:ident $(, $(#[$fattr:meta])* $hit:ident)+ $(,)? }) => {
        $(#[$attr])*
        #[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
        pub struct $name {
            pub $records: usize,
            $($(#[$fattr])* pub $hit: usize,)+
        }

        impl $name {
            fn add(&mut self, $($hit: bool),+) {
                self.$records += 1;
                $(self.$hit += $hit as usize;)+
            }

            fn merge(&mut self, o: &$name) {
                self.$records += o.$records;
                $(self.$hit += o.$hit;)+
            }
        }
    };
}

/// `scx_wakelab oracle`: record the kernel's own placements, or compare them with the engine.
#[derive(Debug, clap::Args)]
#[command(
    long_about = "Record the fair class's own wake-up placements on this kernel (BPF fentry/fexit \
                  on select_task_rq_fair; no sched_ext needed, root and a kernel with BTF are), \
                  and replay them through the engine to measure, decision by decision, how often \
                  it picks the CPU the kernel picked."
)]
pub struct OracleArgs {
    #[command(subcommand)]
    pub command: OracleCommand,
}

#[derive(Debug, clap::Subcommand)]
pub enum OracleCommand {
    /// Record every fair-class placement for a while, as explain --trace lines.
    Record {
        /// Where to write the records (JSON lines); `-` for standard output.
        #[arg(long, value_name = "FILE", default_value = "oracle.jsonl")]
        out: PathBuf,
        /// How long to record.
        #[arg(long, value_name = "N", default_value_t = 10, value_parser = clap::value_parser!(u64).range(1..=86_400))]
        seconds: u64,
        /// Replace FILE (and the --newidle file) if it exists.
        #[arg(long)]
        overwrite: bool,
        /// Also record the kernel's newly-idle balances, one JSON line each, into this
        /// file (`oracle newidle` reads it).
        #[arg(long, value_name = "FILE")]
        newidle: Option<PathBuf>,
    },
    /// What came of the newly-idle balances that `oracle record --newidle` recorded:
    /// how many a pending wake-up stopped, how many balanced, pulled, and from where.
    Newidle {
        /// Files written by `oracle record --newidle`.
        #[arg(required = true, value_name = "FILE")]
        files: Vec<PathBuf>,
    },
    /// Replay recorded placements through the engine and report the agreement.
    Compare {
        /// Files written by `oracle record` (one per workload).
        #[arg(required = true, value_name = "FILE")]
        files: Vec<PathBuf>,
        /// Replay with this preset instead of the recorded kernel's.
        #[arg(long, value_name = "PRESET")]
        preset: Option<String>,
        /// Flags to set on top (as scx_wakelab --set).
        #[arg(long = "set", value_name = "KEY=VALUE")]
        set: Vec<String>,
        /// Also list up to N disagreeing records per file (at most 1000).
        #[arg(long, value_name = "N", default_value_t = 0,
              value_parser = clap::value_parser!(u64).range(0..=MAX_SHOW))]
        show: u64,
        /// Replay with the kernel's recorded state, or with the state the live agent would
        /// have had.
        #[arg(long, value_enum, value_name = "INPUTS", default_value_t = Inputs::Kernel,
              long_help = "Replay with the state the kernel read (kernel), or with the state \
                           the live agent would have decided on, as far as a record tells it \
                           (live): the CPUs', the wakee's and the waker's load and util = \
                           the state estimator's, which `oracle record` runs beside the kernel \
                           (records without it: CPU load = its runnable tasks x 1024, a task's \
                           = a nice-0 weight, 1024, and no util), every \
                           CPU at its original capacity, no SCHED_IDLE-only CPU, no runnable \
                           or util_est average, the idle-core hints and SIS_UTIL's depth \
                           derived from the recorded CPUs; task loads are scaled by each \
                           CPU's h_load as the agent's own decisions refresh it. avg_idle, the \
                           idle stamps, the scan cost, delayed-dequeue counts and the tasks' \
                           wake-up history stay the kernel's: the agent's own come from its \
                           history, which a record does not hold.")]
        inputs: Inputs,
        /// Also replay every record with the presets of the kernels the oracle records
        /// (v5.10.y, v6.1.y, v6.12.y, mainline) and report, for each preset against the
        /// replay's, how often the kernel's CPU is either's where they decide differently.
        #[arg(long)]
        discriminate: bool,
        /// Also replay every wake-up with each of the live agent's stand-ins alone in place
        /// of the kernel's value, and with all of them but each, and report both agreements:
        /// what each stand-in costs. Replays with the kernel's inputs.
        #[arg(long)]
        stand_ins: bool,
    },
}

/// The most disagreeing records `oracle compare --show` lists per file.  Each is kept with
/// the engine's chain as text until the file is done, up to about 2 KiB in the fixed heap
/// (`crate::heap`): a thousand take 2 MiB, where any number of them once could, one per
/// record of a trace of any length.
pub const MAX_SHOW: u64 = 1000;

/// The preset that models a kernel release (`uname -r`), with how sure that is.
pub fn preset_for_release(release: &str) -> (&'static str, &'static str) {
    let mut parts = release.split(|c: char| !c.is_ascii_digit());
    let major: u32 = parts.next().and_then(|s| s.parse().ok()).unwrap_or(0);
    let minor: u32 = parts.next().and_then(|s| s.parse().ok()).unwrap_or(0);
    match (major, minor) {
        (5, 10) => ("v5.10.y", "stable 5.10.y"),
        (5, 11..=12) => ("v5.12", "nearest preset"),
        (5, 13) => ("v5.13", "exact"),
        (5, 14) => ("v5.14", "exact"),
        (5, 15..) => ("v5.15", "nearest preset"),
        (6, 0) => ("v6.0", "exact"),
        (6, 1) => ("v6.1.y", "stable 6.1.y"),
        (6, 2..=4) => ("v6.1.y", "nearest preset"),
        (6, 5..=11) => ("v6.5", "nearest preset"),
        (6, 12..=15) => ("v6.12.y", "stable 6.12.y"),
        (6, _) | (7.., _) => ("mainline", "mainline"),
        _ => ("v5.10", "older than any preset: v5.10"),
    }
}

/// One CPU as `select_task_rq_fair()` could read it (`struct oracle_cpu`).
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct SampleCpu {
    /// `rq->cfs.avg.load_avg`, what `cpu_load()` returns without groups.
    pub load_avg: u64,
    /// `rq->cfs.avg.util_avg`, which SIS_UTIL's depth and capacity checks read.
    pub util_avg: u64,
    /// The state estimator's `load_avg` and `util_avg` of it (bpf/pelt.bpf.h).
    pub est_load_avg: u64,
    pub est_util_avg: u64,
    /// `rq->avg_idle` in ns (SIS_PROP before v5.14).
    pub avg_idle: u64,
    /// `rq->nr_running`, every class, delayed sleepers included.
    pub nr_running: u32,
    /// Delayed-dequeue sleepers among them (v6.12+), else 0.
    pub nr_delayed: u32,
    /// SCHED_IDLE tasks among cfs's (`sched_idle_cpu()`).
    pub nr_sched_idle: u32,
    /// `rq->cfs.avg.util_est` (`.enqueued` before v6.8) and `rq->cfs.avg.runnable_avg`,
    /// which the fork/exec slow path reads.
    pub util_est: u64,
    pub runnable_avg: u64,
    /// `rq->idle_stamp` in ns of the rq clock: when the CPU last went idle, 0 if unset.
    pub idle_stamp: u64,
    /// The root cfs_rq's `h_load` and the jiffy it was last computed at, which
    /// `task_h_load()` reads; `None` without CONFIG_FAIR_GROUP_SCHED.
    pub h_load: Option<(u64, u64)>,
    /// `rq->cpu_capacity`.
    pub capacity: u32,
    /// `rq->curr == rq->idle`.
    pub curr_is_idle: bool,
    /// `rq->ttwu_pending`: wake-ups queued to this CPU's wake list.
    pub ttwu_pending: bool,
    /// What its LLC's shared state held, as read through this CPU.
    pub llc: SampleLlc,
}

/// An LLC's state that `select_idle_sibling()` reads: `sd_llc_shared` and `sd_llc`.  Each
/// is `None` (or 0) where the kernel could not be read or has no such field.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct SampleLlc {
    /// `has_idle_cores`, the hint that an idle core may exist.
    pub has_idle_cores: Option<bool>,
    /// SIS_PROP's `avg_scan_cost` in ns (to v6.6).
    pub avg_scan_cost: u64,
    /// SIS_UTIL's stored scan depth, `nr_idle_scan` (v6.0+).
    pub nr_idle_scan: Option<u32>,
}

impl SampleLlc {
    fn to_input(self, llc: usize) -> LlcStateInput {
        LlcStateInput {
            llc,
            has_idle_cores: self.has_idle_cores,
            avg_scan_cost_ns: Some(self.avg_scan_cost),
            nr_idle_scan: self.nr_idle_scan.map(u64::from),
        }
    }
}

/// A task as recorded (`struct oracle_task`).
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct SampleTask {
    pub pid: i32,
    pub flags: u32,
    pub recent_used_cpu: i32,
    pub wakee_flips: u32,
    pub wakee_flip_decay_ts: u64,
    pub last_wakee_pid: i32,
    pub load_avg: u64,
    pub util_avg: u64,
    /// The state estimator's `load_avg` and `util_avg` of it (bpf/pelt.bpf.h); `None` for
    /// a task it has not seen queued.
    pub est_load_avg: Option<u64>,
    pub est_util_avg: Option<u64>,
    pub nr_cpus_allowed: u32,
    pub allowed: u64,
}

/// One recorded placement (`struct oracle_record`), as plain numbers.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Sample {
    pub now_ns: u64,
    pub jiffies: u64,
    pub wakee: SampleTask,
    pub waker: SampleTask,
    pub prev_cpu: i32,
    pub this_cpu: i32,
    pub chosen_cpu: i32,
    pub wake_flags: u32,
    /// 0 task, 1 softirq, 2 hardirq.
    pub context: u32,
    pub cpus: Vec<SampleCpu>,
    /// Bit i: CPU i's runqueue changed while the kernel decided (read again on exit).
    pub changed_cpus: u64,
}

const PF_EXITING: u32 = 0x0000_0004;
const PF_KTHREAD: u32 = 0x0020_0000;

/// Why a sample cannot become a trace record.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum SampleError {
    CpuOutside { what: &'static str, cpu: i32 },
    CpuCount { recorded: usize, topology: usize },
}

impl std::fmt::Display for SampleError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            SampleError::CpuOutside { what, cpu } => {
                write!(f, "{what} CPU {cpu} is outside the topology")
            }
            SampleError::CpuCount { recorded, topology } => write!(
                f,
                "the record describes {recorded} CPUs, the topology has {topology}"
            ),
        }
    }
}

impl Sample {
    /// `task_h_load(p)` of a task of the root task group whose CPU is `cpu`: its load
    /// scaled by the root cfs_rq's `h_load` over the cfs_rq's load.  `h_load` is recomputed
    /// (as the cfs_rq's load) at most once a jiffy, so within the jiffy of its last update
    /// the stored, older value scales.  The +1 keeps an empty cfs_rq from dividing by 0.
    fn task_h_load(&self, load_avg: u64, cpu: usize) -> u64 {
        let Some(c) = self.cpus.get(cpu) else {
            return load_avg;
        };
        let Some((h_load, at)) = c.h_load else {
            return load_avg;
        };
        let h = if at == self.jiffies {
            h_load
        } else {
            c.load_avg
        };
        crate::policy::pelt::task_h_load(load_avg, h, c.load_avg)
    }

    fn task_state(&self, t: &SampleTask, cpu: usize, nr: usize, hz: u64) -> TaskState {
        let mut allowed = CpuSet::new();
        for c in 0..nr.min(64) {
            if t.allowed & (1u64 << c) != 0 {
                allowed.set(c);
            }
        }
        // The engine keeps wakee_flip_decay_ts in ns and decays after one second; the
        // kernel keeps jiffies and decays after HZ of them.  Same distance back from now.
        let jiffy_ns = 1_000_000_000 / hz.max(1);
        let ago = self.jiffies.saturating_sub(t.wakee_flip_decay_ts);
        TaskState {
            pid: t.pid.max(0) as u32,
            prev_cpu: cpu,
            recent_used_cpu: usize::try_from(t.recent_used_cpu).ok().filter(|&c| c < nr),
            wakee_flips: t.wakee_flips,
            last_wakee: (t.last_wakee_pid > 0).then_some(t.last_wakee_pid as u32),
            wakee_flip_decay_ts: self.now_ns.saturating_sub(ago.saturating_mul(jiffy_ns)),
            allowed,
            load: self.task_h_load(t.load_avg, cpu),
            util: util_u32(t.util_avg),
            is_per_cpu_kthread: t.flags & PF_KTHREAD != 0 && t.nr_cpus_allowed == 1,
        }
    }

    /// The decision trace line this sample replays as: `topo` is the recording machine's,
    /// `preset` the policy to replay with, `hz` the kernel's tick rate.
    pub fn to_trace(
        &self,
        seq: u64,
        topo: &Topology,
        topo_input: &TopologyInput,
        preset: &str,
        hz: u64,
    ) -> Result<TraceRecord, SampleError> {
        let nr = topo.nr_cpus();
        if self.cpus.len() != nr {
            return Err(SampleError::CpuCount {
                recorded: self.cpus.len(),
                topology: nr,
            });
        }
        let cpu_of = |what: &'static str, cpu: i32| -> Result<usize, SampleError> {
            usize::try_from(cpu)
                .ok()
                .filter(|&c| c < nr)
                .ok_or(SampleError::CpuOutside { what, cpu })
        };
        let prev = cpu_of("prev", self.prev_cpu)?;
        let this = cpu_of("waker", self.this_cpu)?;
        let chosen = cpu_of("chosen", self.chosen_cpu)?;
        let snaps: Vec<CpuSnapshot> = self
            .cpus
            .iter()
            .map(|c| CpuSnapshot {
                idle: c.curr_is_idle,
                nr_running: c.nr_running,
                nr_delayed: c.nr_delayed.min(c.nr_running),
                ttwu_pending: c.ttwu_pending,
                wakeup_in_flight: false,
                sched_idle_only: c.nr_running > 0 && c.nr_sched_idle == c.nr_running,
                load: c.load_avg,
                util: util_u32(c.util_avg),
                util_est: util_u32(c.util_est),
                runnable: util_u32(c.runnable_avg),
                capacity: c.capacity,
                avg_idle_ns: c.avg_idle,
                idle_exit_ns: 0,
                idle_stamp_ns: c.idle_stamp,
            })
            .collect();
        // One hint per LLC: the kernel's sd_llc_shared is shared by its CPUs.  The scan
        // cost is not: it lives in each CPU's own sd_llc, and SIS_PROP reads the waker's
        // (this_sd), so the waker's LLC takes the waker's.
        let mut llc_state: Vec<LlcStateInput> = Vec::new();
        for l in 0..topo.nr_llcs() {
            let from = if topo.llc_index(this) == l {
                Some(this)
            } else {
                (0..nr).find(|&c| topo.llc_index(c) == l)
            };
            if let Some(c) = from.map(|c| self.cpus[c]) {
                llc_state.push(c.llc.to_input(l));
            }
        }
        let waker = self.task_state(&self.waker, this, nr, hz);
        let ctx = WakeCtx {
            wake_flags: self.wake_flags,
            waker_cpu: this,
            waker_context: match self.context {
                1 => WakerContext::Softirq,
                2 => WakerContext::Hardirq,
                _ => WakerContext::Task,
            },
            waker_exiting: self.waker.flags & PF_EXITING != 0,
            waker,
            now_ns: self.now_ns,
        };
        Ok(TraceRecord {
            seq: Some(seq),
            topology: topo_input.clone(),
            policy: PolicySpec {
                preset: preset.to_string(),
                ..PolicySpec::default()
            },
            cpus: CpuStates::from_snapshots(&snaps),
            llc_state: Some(llc_state),
            task: self.task_state(&self.wakee, prev, nr, hz),
            wake: WakeInput::from_ctx(&ctx),
            recorded_cpu: chosen,
            recorded_chain: Vec::new(),
            changed_cpus: Some(
                (0..nr.min(64))
                    .filter(|&c| self.changed_cpus & (1u64 << c) != 0)
                    .collect(),
            ),
            estimated: Some(Estimated {
                cpu_load: self.cpus.iter().map(|c| c.est_load_avg).collect(),
                cpu_util: self.cpus.iter().map(|c| util_u32(c.est_util_avg)).collect(),
                task_load: self.wakee.est_load_avg,
                task_util: self.wakee.est_util_avg.map(util_u32),
                waker_load: self.waker.est_load_avg,
                kernel_task_load: Some(self.wakee.load_avg),
            }),
        })
    }
}

/// A util average as the engine keeps it: saturated at `u32::MAX`, not wrapped.
fn util_u32(v: u64) -> u32 {
    v.min(u32::MAX as u64) as u32
}

/// What kind of placement a record is, for the per-kind rows.
fn kind_of(wake_flags: u32) -> &'static str {
    use crate::policy::{WAKE_EXEC, WAKE_FORK, WAKE_SYNC, WAKE_TTWU};
    if wake_flags & WAKE_FORK != 0 {
        "fork"
    } else if wake_flags & WAKE_EXEC != 0 {
        "exec"
    } else if wake_flags & WAKE_TTWU != 0 && wake_flags & WAKE_SYNC != 0 {
        "wake-up, sync"
    } else if wake_flags & WAKE_TTWU != 0 {
        "wake-up"
    } else {
        "other"
    }
}

/// Where the kernel's CPU lies relative to the engine's inputs.
fn relation(cpu: usize, rec: &TraceRecord) -> &'static str {
    if cpu == rec.task.prev_cpu {
        "prev"
    } else if cpu == rec.wake.waker_cpu {
        "waker's CPU"
    } else {
        "another CPU"
    }
}

record_counts! {
    /// A seed's quantity on the recorded placements: how many records are cases of it, and in
    /// how many of them the kernel, and the engine replaying them, did what the seed is about.
    SeedRate { cases, kernel, engine }
}

/// The seeds' own quantities, as the recorded kernel shows them and as the engine gives them
/// on the same records.  Each is read from the chosen CPU alone (the kernel has no rule
/// chain), so a case counts only where that CPU says which path was taken: prev and the
/// waker's CPU are different CPUs.  Seed 2 (the newly-idle pull) happens outside
/// `select_task_rq_fair()` and is not recorded here.
#[derive(Clone, Debug, Default, Serialize)]
pub struct SeedRates {
    /// Seed 1 (Barry Song): sync wake-ups from softirq or hardirq, placed on the waker's CPU.
    pub sync_from_interrupt_to_waker: SeedRate,
    /// Seed 3 (Xuewen Yan): sync wake-ups by a task whose CPU holds delayed-dequeue
    /// sleepers, placed on the waker's CPU.
    pub sync_beside_delayed_to_waker: SeedRate,
    /// Seed 4 (Mel Gorman): wake-ups whose `recent_used_cpu` is neither prev nor the waker's
    /// CPU, placed on it.
    pub recent_used_cpu_taken: SeedRate,
    /// Seed 4 as the live agent's `sis_recent_used_hit` / `_miss` counters count it (the
    /// attempts Mel's patch is about, hits over hits and misses): the wake-ups whose
    /// `recent_used_cpu` the block examined, which only the engine's chain on the same
    /// records can tell (the kernel keeps no count of them); the kernel's hit is its CPU being
    /// that `recent_used_cpu`.
    pub recent_used_cpu_examined: SeedRate,
    /// Seed 4 as the lab's share counts it: the wake-ups that got past the target, prev and
    /// per-CPU kthread checks (by the engine's chain on the same records), placed on a
    /// `recent_used_cpu` that is not prev.
    pub recent_used_cpu_past_target_and_prev: SeedRate,
}

impl SeedRates {
    fn add(&mut self, rec: &TraceRecord, engine_cpu: usize, chain: &[ChainStep]) {
        use crate::policy::{WAKE_SYNC, WAKE_TTWU};
        let has = |r: Rule| chain.iter().any(|s| s.rule == r.name());
        if let Some(r) = rec.task.recent_used_cpu
            && (has(Rule::SisRecentUsedHit) || has(Rule::SisRecentUsedMiss))
        {
            self.recent_used_cpu_examined
                .add(rec.recorded_cpu == r, has(Rule::SisRecentUsedHit));
        }
        let flags = rec.wake.wake_flags.unwrap_or(0);
        let (prev, waker) = (rec.task.prev_cpu, rec.wake.waker_cpu);
        let kept_early = [
            Rule::SisTargetIdle,
            Rule::SisPrevIdle,
            Rule::SisKthreadStacking,
        ];
        if flags & WAKE_TTWU != 0 && !kept_early.into_iter().any(has) {
            let on_recent = rec
                .task
                .recent_used_cpu
                .is_some_and(|r| r != prev && r == rec.recorded_cpu);
            self.recent_used_cpu_past_target_and_prev
                .add(on_recent, has(Rule::SisRecentUsedHit));
        }
        if flags & WAKE_TTWU == 0 || prev == waker {
            return;
        }
        let kernel = rec.recorded_cpu;
        if flags & WAKE_SYNC != 0 {
            if rec.wake.waker_context != WakerContext::Task {
                self.sync_from_interrupt_to_waker
                    .add(kernel == waker, engine_cpu == waker);
            } else if waker_has_delayed(rec) {
                self.sync_beside_delayed_to_waker
                    .add(kernel == waker, engine_cpu == waker);
            }
        }
        if let Some(r) = rec.task.recent_used_cpu
            && r != prev
            && r != waker
        {
            self.recent_used_cpu_taken.add(kernel == r, engine_cpu == r);
        }
    }

    fn merge(&mut self, o: &SeedRates) {
        self.sync_from_interrupt_to_waker
            .merge(&o.sync_from_interrupt_to_waker);
        self.sync_beside_delayed_to_waker
            .merge(&o.sync_beside_delayed_to_waker);
        self.recent_used_cpu_taken.merge(&o.recent_used_cpu_taken);
        self.recent_used_cpu_examined
            .merge(&o.recent_used_cpu_examined);
        self.recent_used_cpu_past_target_and_prev
            .merge(&o.recent_used_cpu_past_target_and_prev);
    }

    fn render(&self, o: &mut String) {
        let _ = writeln!(o, "  seeds (cases; kernel, engine on the same records):");
        for (name, r) in [
            (
                "seed 1: sync from an interrupt, to the waker's CPU",
                &self.sync_from_interrupt_to_waker,
            ),
            (
                "seed 3: sync beside delayed tasks, to the waker's CPU",
                &self.sync_beside_delayed_to_waker,
            ),
            (
                "seed 4: to recent_used_cpu (not prev, not waker's)",
                &self.recent_used_cpu_taken,
            ),
            (
                "seed 4: recent_used_cpu examined (engine's chain), hits",
                &self.recent_used_cpu_examined,
            ),
            (
                "seed 4: past the target and prev (engine's chain), hits",
                &self.recent_used_cpu_past_target_and_prev,
            ),
        ] {
            let share = |n| fidelity::share(n, r.cases);
            let _ = writeln!(
                o,
                "    {name:<54} {:>7}; kernel {:>7} ({}), engine {:>7} ({})",
                r.cases,
                r.kernel,
                share(r.kernel),
                r.engine,
                share(r.engine)
            );
        }
    }
}

/// Whether the waker's CPU held delayed-dequeue sleepers when the record was taken.
fn waker_has_delayed(rec: &TraceRecord) -> bool {
    let CpuStates::List(v) = &rec.cpus else {
        return false;
    };
    // That one CPU's state, as resolve() would give it, without building every CPU's.
    v.get(rec.wake.waker_cpu)
        .is_some_and(|s| s.0.apply(CpuSnapshot::default()).nr_delayed > 0)
}

/// The race between the recorder's reads and the kernel's: records in which some CPU's
/// runqueue changed while the kernel decided, and the disagreements among them.
#[derive(Clone, Debug, Default, Serialize)]
pub struct RaceTally {
    /// Records that carry the measurement at all.
    pub measured: usize,
    pub changed: Tally,
    pub stable: Tally,
    /// Disagreements where the kernel's or the engine's CPU is one that changed.
    pub disagree_on_changed_cpu: usize,
}

impl RaceTally {
    fn add(&mut self, rec: &TraceRecord, engine_cpu: usize, same: bool) {
        let Some(changed) = &rec.changed_cpus else {
            return;
        };
        self.measured += 1;
        if changed.is_empty() {
            self.stable.add(same);
            return;
        }
        self.changed.add(same);
        if !same && (changed.contains(&rec.recorded_cpu) || changed.contains(&engine_cpu)) {
            self.disagree_on_changed_cpu += 1;
        }
    }

    fn merge(&mut self, o: &RaceTally) {
        self.measured += o.measured;
        self.changed.merge(&o.changed);
        self.stable.merge(&o.stable);
        self.disagree_on_changed_cpu += o.disagree_on_changed_cpu;
    }

    fn render(&self, o: &mut String) {
        if self.measured == 0 {
            return;
        }
        let dis = |t: &Tally| t.records - t.agree;
        let _ = writeln!(
            o,
            "  race: a CPU changed during the kernel's decision in {} of {} records; agreement \
             {:.1}% there, {:.1}% in the other {}; of {} disagreements, {} on a CPU that changed",
            self.changed.records,
            self.measured,
            self.changed.pct(),
            self.stable.pct(),
            self.stable.records,
            dis(&self.changed) + dis(&self.stable),
            self.disagree_on_changed_cpu
        );
    }
}

record_counts! {
    /// Records, and those where the engine chose the kernel's CPU.
    Tally { records, agree }
}

impl Tally {
    fn pct(&self) -> f64 {
        if self.records == 0 {
            0.0
        } else {
            100.0 * self.agree as f64 / self.records as f64
        }
    }
}

/// The comparison of one file.
#[derive(Clone, Debug, Default, Serialize)]
pub struct FileComparison {
    pub file: String,
    pub preset: String,
    pub inputs: Inputs,
    pub total: Tally,
    /// The agreement beside never moving the task, overall and per class of records.
    pub fidelity: Fidelity,
    /// With `--discriminate`: the replay's preset against the other kernels'.
    pub discrimination: Option<Discrimination>,
    /// With `--stand-ins`: what each of the live agent's stand-ins costs.
    pub stand_ins: Option<StandInCosts>,
    /// Per kind of placement.
    pub by_kind: BTreeMap<String, Tally>,
    /// Per rule that ended the engine's chain.
    pub by_rule: BTreeMap<String, Tally>,
    /// Disagreements: the engine's chain, and where the kernel went instead.
    pub disagreements: BTreeMap<String, usize>,
    /// Up to `show` disagreeing records: line, kernel CPU, engine CPU, engine chain.
    pub examples: Vec<(usize, usize, usize, String)>,
    pub skipped_at_end: usize,
    pub race: RaceTally,
    pub seeds: SeedRates,
    /// The state estimator's averages against the kernel's (records that carry them).
    pub estimates: EstimateErrors,
}

fn chain_text(report: &ExplainReport) -> String {
    report
        .chain
        .iter()
        .map(|c| c.rule.to_string())
        .collect::<Vec<_>>()
        .join(" > ")
}

/// What `oracle compare` replays with and reports.
#[derive(Clone, Debug, Default)]
pub struct CompareOptions {
    /// `--preset` and `--set`.
    pub policy: PolicyOverride,
    pub inputs: Inputs,
    /// Disagreeing records to list per file (`--show`, at most [`MAX_SHOW`]).
    pub show: usize,
    pub discriminate: bool,
    /// `--stand-ins` (with kernel inputs).
    pub stand_ins: bool,
}

/// Replays `file` and tallies the engine's agreement with the recorded kernel.
pub fn compare_file(
    file: &std::path::Path,
    opts: &CompareOptions,
) -> anyhow::Result<FileComparison> {
    let cli = &opts.policy;
    let mut c = FileComparison {
        file: file.display().to_string(),
        inputs: opts.inputs,
        discrimination: opts.discriminate.then(Discrimination::default),
        stand_ins: opts.stand_ins.then(StandInCosts::default),
        ..FileComparison::default()
    };
    let reader = crate::explain::open_input(file)
        .map_err(|e| crate::exit::BadInput(format!("cannot read {}: {e}", file.display())))?;
    let name = file.display().to_string();
    let base = file.parent().map(|p| p.to_path_buf()).unwrap_or_default();
    let mut estimates = EstimateErrors::default();
    let mut h_loads = fidelity::AgentHLoads::default();
    c.skipped_at_end = crate::explain::for_each_resolved(
        std::io::BufReader::with_capacity(1 << 16, reader),
        &name,
        &base,
        cli,
        |rec, topo| {
            // The estimates against the record's own values, before a view replaces them.
            estimates.add(&rec, topo);
            let mut view = opts.inputs.view(rec, topo);
            if opts.inputs == Inputs::Live {
                h_loads.apply(&mut view, topo);
            }
            view
        },
        |line, rec, inputs| {
            let report = &crate::explain::explain(inputs);
            if c.preset.is_empty() {
                c.preset = cli
                    .preset
                    .clone()
                    .unwrap_or_else(|| rec.policy.preset.clone());
            }
            let same = report.cpu == rec.recorded_cpu;
            let flags = match &inputs.question {
                Question::Wakeup { wake, .. } => wake.wake_flags,
                Question::NewIdle { .. } => 0,
            };
            c.total.add(same);
            c.fidelity
                .add(flags, rec.task.prev_cpu, rec.recorded_cpu, report.cpu);
            if let Some(d) = c.discrimination.as_mut() {
                d.add(rec, inputs, report.cpu, cli)
                    .map_err(|e| crate::exit::BadInput(format!("{name}:{line}: {e}")))?;
            }
            if let Some(s) = c.stand_ins.as_mut() {
                s.add(rec, &inputs.topo, cli)
                    .map_err(|e| crate::exit::BadInput(format!("{name}:{line}: {e}")))?;
            }
            c.race.add(rec, report.cpu, same);
            c.seeds.add(rec, report.cpu, &report.chain);
            c.by_kind
                .entry(kind_of(flags).into())
                .or_default()
                .add(same);
            let last = report
                .chain
                .last()
                .map(|s| s.rule.to_string())
                .unwrap_or_else(|| "(no rule)".into());
            c.by_rule.entry(last).or_default().add(same);
            if !same {
                let key = format!(
                    "engine {} [{}]; kernel: {}",
                    relation(report.cpu, rec),
                    chain_text(report),
                    relation(rec.recorded_cpu, rec)
                );
                *c.disagreements.entry(key).or_default() += 1;
                if c.examples.len() < opts.show {
                    c.examples
                        .push((line, rec.recorded_cpu, report.cpu, chain_text(report)));
                }
            }
            Ok(())
        },
    )?;
    c.estimates = estimates;
    Ok(c)
}

impl FileComparison {
    pub fn render(&self) -> String {
        let mut o = String::new();
        let _ = writeln!(
            o,
            "{}: preset {}, {} inputs: {} of {} agree ({:.1}%){}",
            self.file,
            self.preset,
            self.inputs.name(),
            self.total.agree,
            self.total.records,
            self.total.pct(),
            if self.skipped_at_end > 0 {
                " (an incomplete last line skipped)"
            } else {
                ""
            }
        );
        self.fidelity.render(self.inputs, &mut o);
        if let Some(d) = &self.discrimination {
            d.render(self.inputs, &mut o);
        }
        if let Some(s) = &self.stand_ins {
            s.render(&mut o);
        }
        for (title, rows) in [
            ("per kind", &self.by_kind),
            (
                "per deciding rule (the last of the engine's chain)",
                &self.by_rule,
            ),
        ] {
            let _ = writeln!(o, "  {title}: records, agree, share");
            for (k, t) in rows {
                let _ = writeln!(
                    o,
                    "    {k:<44} {:>7} {:>7} {:>6.1}%",
                    t.records,
                    t.agree,
                    t.pct()
                );
            }
        }
        if !self.disagreements.is_empty() {
            let _ = writeln!(
                o,
                "  disagreements, by the engine's chain and the kernel's CPU:"
            );
            let mut v: Vec<_> = self.disagreements.iter().collect();
            v.sort_by(|a, b| b.1.cmp(a.1).then(a.0.cmp(b.0)));
            for (k, n) in v.iter().take(12) {
                let _ = writeln!(o, "    {n:>7}  {k}");
            }
            if v.len() > 12 {
                let _ = writeln!(o, "    ({} more kinds)", v.len() - 12);
            }
        }
        self.race.render(&mut o);
        self.seeds.render(&mut o);
        self.estimates.render(&mut o);
        for (line, kernel, engine, chain) in &self.examples {
            let _ = writeln!(
                o,
                "  line {line}: kernel CPU {kernel}, engine CPU {engine} [{chain}]"
            );
        }
        o
    }
}

/// `oracle compare`: every file, then the total line, as one text.
pub fn compare(files: &[PathBuf], opts: &CompareOptions) -> anyhow::Result<String> {
    let mut out = String::new();
    compare_into(files, opts, |text| {
        out.push_str(text);
        Ok(())
    })?;
    Ok(out)
}

/// `oracle compare`, each file's part handed to `emit` once that file is done, so that
/// what is held does not grow with the number of files (a file may be named any number of
/// times).
pub fn compare_into(
    files: &[PathBuf],
    opts: &CompareOptions,
    mut emit: impl FnMut(&str) -> anyhow::Result<()>,
) -> anyhow::Result<()> {
    let mut total = Tally::default();
    let (mut race, mut seeds) = (RaceTally::default(), SeedRates::default());
    let mut fidelity = Fidelity::default();
    let mut discrimination = Discrimination::default();
    let mut stand_ins = StandInCosts::default();
    let mut estimates = EstimateErrors::default();
    for f in files {
        let c = compare_file(f, opts)?;
        total.merge(&c.total);
        race.merge(&c.race);
        seeds.merge(&c.seeds);
        estimates.merge(&c.estimates);
        fidelity.merge(&c.fidelity);
        if let Some(d) = &c.discrimination {
            discrimination.merge(d);
        }
        if let Some(s) = &c.stand_ins {
            stand_ins.merge(s);
        }
        emit(&c.render())?;
    }
    let mut out = String::new();
    if files.len() > 1 {
        out.push_str("all files:\n");
        fidelity.render(opts.inputs, &mut out);
        if opts.discriminate {
            discrimination.render(opts.inputs, &mut out);
        }
        stand_ins.render(&mut out);
        race.render(&mut out);
        seeds.render(&mut out);
        estimates.render(&mut out);
    }
    let _ = writeln!(
        out,
        "agreement: {} of {} ({:.1}%)",
        total.agree,
        total.records,
        total.pct()
    );
    emit(&out)
}

/// `oracle compare` (and, in a binary without BPF, the refusal of `oracle record`).
pub fn run(args: OracleArgs) -> anyhow::Result<()> {
    match args.command {
        OracleCommand::Compare {
            files,
            preset,
            set,
            show,
            inputs,
            discriminate,
            stand_ins,
        } => {
            if stand_ins && inputs == Inputs::Live {
                return Err(crate::exit::BadInput(
                    "--stand-ins replays the kernel's inputs with each stand-in in turn: \
                     leave out --inputs live"
                        .into(),
                )
                .into());
            }
            let opts = CompareOptions {
                policy: PolicyOverride { preset, set },
                inputs,
                show: show as usize,
                discriminate,
                stand_ins,
            };
            compare_into(&files, &opts, crate::explain::emit)
        }
        OracleCommand::Newidle { files } => crate::explain::emit(&newidle::report(&files)?),
        OracleCommand::Record { .. } => Err(crate::exit::BadInput(
            "oracle record loads BPF: run it with scx_wakelab, not scx_wakelab-offline".into(),
        )
        .into()),
    }
}

pub mod fidelity;
pub mod newidle;
pub mod record;
pub mod sysfs;

#[cfg(test)]
mod tests;
