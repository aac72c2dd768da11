//! `scx_wakelab explain`: why would this task land there?
//!
//! Reads a scenario file (see [`scenario`] for the format: topology, per-CPU state, task,
//! wake-up context, policy), runs the policy engine once and prints the chosen CPU and the
//! chain of rules that chose it, one line per rule with the rule's text and the state that
//! rule looked at.  `--json` prints the same as one JSON object.  `--preset` and `--set`
//! override the file's policy (the preset replaces the file's, `--set` applies after the
//! file's own overrides), so one scenario answers "and on v5.10?" too.
//!
//! `explain --trace FILE.jsonl` replays a decision trace: every line is a [`TraceRecord`]
//! (the full inputs of one decision, by the live agent or recorded from the kernel by
//! `oracle record`, plus the CPU it chose); each is decided again by a fresh engine and
//! compared, the rule chain too where the record carries one.  Any mismatch is listed and
//! makes the command fail.
//!
//! `sim` and `oracle compare` use helpers from here: [`emit`] (output, a failed write one
//! line of error), [`open_input`] (an input file, a FIFO opened without blocking, a
//! directory refused) and [`for_each_replayed`] (the replay loop over trace lines), or
//! [`for_each_resolved`] under it where a replay decides on other inputs or more than once.
//!
//! Errors are one line and name the field: `seed1.json: task.prev_cpu: invalid type: string
//! "x", expected usize (line 9, column 23)`.

pub mod json_path;
pub mod scenario;
pub mod synthetic;
pub mod sysfs;

use crate::exit;

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::io::{BufRead, Read};
use std::path::{Path, PathBuf};

use serde::Serialize;

use scenario::build_topology;
pub use scenario::{
    Expect, NewIdleInput, PolicyOverride, Question, Resolved, Scenario, parse_json,
    parse_json_object, resolve_policy,
};

use crate::policy::{
    Config, CpuSnapshot, Decision, Distance, DomainLevel, Engine, LlcState, PRESET_NAMES,
    PullCandidate, Pulled, Rule, TaskState, Topology, TopologyInput, TraceRecord, WakeCtx,
    policy_spec_of,
};

/// Explain one placement decision from a scenario file, or replay a decision trace.
#[derive(Debug, Clone, clap::Args)]
#[command(
    long_about = "Explain one placement decision: read a scenario file (topology, per-CPU \
                  state, task, wake-up context, policy), run the policy engine and print the \
                  chosen CPU with the chain of rules that chose it, one line per rule with \
                  the state it looked at. Example scenarios: scenarios/*.json. With --trace, \
                  replay a JSON-lines decision trace and report how many records match (an incomplete \
                  last line, as a killed writer leaves, is skipped with a note). A scenario \
                  file and a trace line may have at most 2 MiB, 32 levels of nesting, 16384 \
                  elements in an array, 8192 members in an object, 65536 values in all and \
                  4096 CPU overrides; a newly-idle scenario may derive at most 16384 pull \
                  candidates from its CPUs' nr_running."
)]
pub struct ExplainArgs {
    /// Scenario file (JSON); see scenarios/ for examples.
    #[arg(
        value_name = "SCENARIO.json",
        required_unless_present = "trace",
        conflicts_with = "trace"
    )]
    pub scenario: Option<PathBuf>,

    /// Replay a decision trace: one TraceRecord per line (JSON lines); fails on any mismatch.
    #[arg(long, value_name = "FILE.jsonl")]
    pub trace: Option<PathBuf>,

    /// Print one JSON object instead of text.
    #[arg(long)]
    pub json: bool,

    /// Policy preset replacing the scenario's own.
    #[arg(long, value_name = "PRESET",
          value_parser = clap::builder::PossibleValuesParser::new(PRESET_NAMES))]
    pub preset: Option<String>,

    /// Override one policy flag, KEY=VALUE (repeatable), after the scenario's own policy.
    #[arg(long = "set", value_name = "KEY=VALUE")]
    pub set: Vec<String>,
}

/// The largest scenario file `explain` reads, and the longest line of a trace.  Both are
/// read whole and parsed into vectors, in a process whose heap is scx_rustland_core's fixed
/// arena (64 MiB for everything), so the limit must leave room for what a hostile file of
/// that size parses into.  A trace record of a 1024-CPU machine is a few hundred KiB.
pub const MAX_INPUT_BYTES: u64 = 2 << 20;

/// Writes a command's output; a failed write (a closed pipe, a full disk) is a runtime
/// failure with one line, not `println!`'s panic.
/// A command's long help on one line, each run of white space one space: what a test
/// reads to check that --help states what the code enforces.
#[cfg(test)]
pub(crate) fn long_help_of<A: clap::Args>(name: &'static str) -> String {
    A::augment_args(clap::Command::new(name))
        .render_long_help()
        .to_string()
        .split_whitespace()
        .collect::<Vec<_>>()
        .join(" ")
}

pub fn emit(text: &str) -> anyhow::Result<()> {
    use std::io::Write as _;
    let mut out = std::io::stdout().lock();
    out.write_all(text.as_bytes())
        .and_then(|()| out.flush())
        .map_err(|e| exit::Failed(format!("writing the output: {e}")).into())
}

/// Entry point of the subcommand.  Errors are bad input (exit 2) unless marked
/// [`exit::Failed`]: a trace that does not replay, an unmet expectation, an I/O error
/// mid-run.
pub fn run(args: ExplainArgs) -> anyhow::Result<()> {
    let cli = PolicyOverride {
        preset: args.preset.clone(),
        set: args.set.clone(),
    };
    if let Some(trace) = &args.trace {
        let summary = replay_trace_file(trace, &cli)?;
        if summary.skipped_at_end > 0 {
            eprintln!(
                "note: {}: the last line is incomplete (no newline, not valid JSON), as a \
                 killed or full-disk writer leaves it: skipped {} record at the end",
                trace.display(),
                summary.skipped_at_end
            );
        }
        if args.json {
            emit(&format!("{}\n", serde_json::to_string_pretty(&summary)?))?;
        } else {
            emit(&summary.render())?;
        }
        if summary.mismatched > 0 {
            return Err(exit::Failed(format!(
                "{}: {} of {} records differ from the replay",
                trace.display(),
                summary.mismatched,
                summary.records
            ))
            .into());
        }
        return Ok(());
    }
    let Some(path) = args.scenario.as_ref() else {
        return Err(exit::BadInput("give a scenario file or --trace FILE".into()).into());
    };
    let report = explain_file(path, &cli)?;
    if args.json {
        emit(&format!("{}\n", serde_json::to_string_pretty(&report)?))?;
    } else {
        emit(&report.render())?;
    }
    if let Some(e) = &report.expect
        && e.checked
        && !e.met
    {
        return Err(exit::Failed(format!(
            "{}: expectation not met: {}",
            path.display(),
            e.failures.join("; ")
        ))
        .into());
    }
    Ok(())
}

/// Opens an input file (a scenario, a trace).  A named FIFO with no writer would block
/// the open forever, so it opens without blocking (such a FIFO then reads as empty) and
/// reads block again afterwards, as a pipe with a writer (`<(cmd)`) needs.  A directory is
/// refused here, so that it is bad input rather than a read error halfway through.
pub fn open_input(path: &Path) -> std::io::Result<std::fs::File> {
    use std::os::fd::AsRawFd as _;
    use std::os::unix::fs::OpenOptionsExt as _;
    let file = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NONBLOCK)
        .open(path)?;
    let fd = file.as_raw_fd();
    // SAFETY: fcntl on a descriptor we own; it changes only its status flags.
    let flags = unsafe { libc::fcntl(fd, libc::F_GETFL) };
    if flags < 0 || unsafe { libc::fcntl(fd, libc::F_SETFL, flags & !libc::O_NONBLOCK) } < 0 {
        return Err(std::io::Error::last_os_error());
    }
    if file.metadata()?.is_dir() {
        return Err(std::io::Error::from_raw_os_error(libc::EISDIR));
    }
    Ok(file)
}

/// Reads a file that is parsed whole, refusing one over [`MAX_INPUT_BYTES`] before
/// reading it (and, for a pipe or device whose size is unknown, after that many bytes).
pub fn read_bounded(path: &Path, what: &str) -> anyhow::Result<String> {
    let name = path.display();
    let file = open_input(path).map_err(|e| exit::BadInput(format!("cannot read {name}: {e}")))?;
    let too_big = || {
        exit::BadInput(format!(
            "{name}: larger than the {} MiB a {what} may have",
            MAX_INPUT_BYTES >> 20
        ))
    };
    if file.metadata().is_ok_and(|m| m.len() > MAX_INPUT_BYTES) {
        return Err(too_big().into());
    }
    let mut bytes = Vec::new();
    file.take(MAX_INPUT_BYTES + 1)
        .read_to_end(&mut bytes)
        .map_err(|e| exit::BadInput(format!("cannot read {name}: {e}")))?;
    if bytes.len() as u64 > MAX_INPUT_BYTES {
        return Err(too_big().into());
    }
    String::from_utf8(bytes).map_err(|e| {
        exit::BadInput(format!(
            "{name}: not UTF-8 text (byte {})",
            e.utf8_error().valid_up_to()
        ))
        .into()
    })
}

fn base_dir(path: &Path) -> PathBuf {
    path.parent()
        .filter(|p| !p.as_os_str().is_empty())
        .map_or_else(|| PathBuf::from("."), Path::to_path_buf)
}

/// Reads, resolves and explains a scenario file.  Errors are one line, prefixed by the
/// file name.
pub fn explain_file(path: &Path, cli: &PolicyOverride) -> anyhow::Result<ExplainReport> {
    let text = read_bounded(path, "scenario")?;
    let name = path.display();
    let scenario: Scenario =
        parse_json_object(&text).map_err(|e| anyhow::anyhow!("{name}: {e}"))?;
    let resolved = scenario
        .resolve(&base_dir(path), cli)
        .map_err(|e| anyhow::anyhow!("{name}: {e}"))?;
    let mut report = explain(&resolved);
    report.scenario = path.display().to_string();
    report.description = scenario.description.clone();
    report.topology.source = topology_source(&scenario.topology);
    report.policy.overridden_by_cli = !cli.is_empty();
    report.expect = scenario
        .expect
        .as_ref()
        .map(|e| check_expect(e, &report, cli.is_empty()))
        .transpose()
        .map_err(|e| anyhow::anyhow!("{name}: {e}"))?;
    Ok(report)
}

fn topology_source(t: &TopologyInput) -> String {
    if let Some(s) = t.shape {
        format!(
            "shape {}x{}x{}x{}",
            s.nodes, s.llcs_per_node, s.cores_per_llc, s.threads
        )
    } else if let Some(dir) = &t.sysfs {
        format!("sysfs {}", dir.display())
    } else {
        "explicit cpus".into()
    }
}

// ------------------------------------------------------------------------------------------
// The report
// ------------------------------------------------------------------------------------------

#[derive(Clone, Debug, Default, Serialize)]
pub struct PolicyReport {
    /// Presets this configuration equals exactly.
    pub matches: Vec<&'static str>,
    /// The nearest preset and the flags that differ from it.
    pub preset: String,
    pub diff: Vec<String>,
    pub overridden_by_cli: bool,
}

#[derive(Clone, Debug, Default, Serialize)]
pub struct TopologyReport {
    pub source: String,
    pub cpus: usize,
    pub online: usize,
    pub nodes: usize,
    pub llcs: usize,
    pub smt: bool,
    pub numa_wake_affine: bool,
}

/// One rule of the chain, with what it looked at.
#[derive(Clone, Debug, Serialize)]
pub struct ChainStep {
    pub rule: &'static str,
    pub text: &'static str,
    pub state: String,
}

#[derive(Clone, Debug, Serialize)]
pub struct ExpectReport {
    /// False when `--preset`/`--set` changed the policy the expectation was written for.
    pub checked: bool,
    pub met: bool,
    pub failures: Vec<String>,
}

/// What `explain` prints, as text or JSON.
#[serde_with::skip_serializing_none]
#[derive(Clone, Debug, Serialize)]
pub struct ExplainReport {
    pub scenario: String,
    #[serde(skip_serializing_if = "String::is_empty")]
    pub description: String,
    pub policy: PolicyReport,
    pub topology: TopologyReport,
    /// Whether the LLC idle-core hints came from the snapshot (no `llc_state` in the file).
    pub llc_hints_from_snapshot: bool,
    /// "wakeup" or "newidle".
    pub kind: &'static str,
    /// The chosen CPU (wake-up) or the CPU going idle (newly-idle).
    pub cpu: usize,
    /// Wake-up: where the task was and how far it moves.
    pub prev_cpu: Option<usize>,
    pub migration: Option<Distance>,
    /// Wake-up: the engine's decision record (path, sync, affine domain, SIS target...).
    pub decision: Option<Decision>,
    /// Newly-idle: the task pulled, if any.
    pub pulled: Option<Pulled>,
    pub chain: Vec<ChainStep>,
    /// The counters this decision bumped.
    pub counters: BTreeMap<&'static str, u64>,
    /// Wake-up: the wakee's and the waker's state after the decision (recent_used_cpu and
    /// wakee flips are updated by the placement path).
    pub task_after: Option<TaskState>,
    pub waker_after: Option<TaskState>,
    pub expect: Option<ExpectReport>,
}

fn policy_report(cfg: &Config) -> PolicyReport {
    let spec = policy_spec_of(cfg);
    PolicyReport {
        matches: cfg.matching_presets(),
        preset: spec.preset,
        diff: spec.set.iter().map(|(k, v)| format!("{k}={v}")).collect(),
        overridden_by_cli: false,
    }
}

fn topology_report(t: &Topology) -> TopologyReport {
    let mut nodes: Vec<u32> = t.cpu_descs().iter().map(|d| d.node).collect();
    nodes.sort_unstable();
    nodes.dedup();
    TopologyReport {
        source: String::new(),
        cpus: t.nr_cpus(),
        online: t.online().count(),
        nodes: nodes.len(),
        llcs: t.nr_llcs(),
        smt: t.smt_present(),
        numa_wake_affine: t.numa_wake_affine(),
    }
}

/// Runs the engine on resolved inputs and explains the result.
pub fn explain(r: &Resolved) -> ExplainReport {
    let mut engine = Engine::new(r.topo.clone(), r.config).expect("resolved config is valid");
    for (i, s) in r.llc.iter().enumerate() {
        engine.set_llc_state(i, *s);
    }
    let mut report = ExplainReport {
        scenario: String::new(),
        description: String::new(),
        policy: policy_report(&r.config),
        topology: topology_report(&r.topo),
        llc_hints_from_snapshot: r.llc_from_snapshot,
        kind: "wakeup",
        cpu: 0,
        prev_cpu: None,
        migration: None,
        decision: None,
        pulled: None,
        chain: Vec::new(),
        counters: BTreeMap::new(),
        task_after: None,
        waker_after: None,
        expect: None,
    };
    match &r.question {
        Question::Wakeup { task, wake } => {
            let (mut t, mut w) = (*task, *wake);
            let d = engine.select_cpu(&r.cpus, &mut t, &mut w);
            let ctx = WakeView {
                topo: &r.topo,
                cfg: &r.config,
                cpus: &r.cpus,
                llc: &r.llc,
                task,
                wake,
                waker_after: &w.waker,
                d: &d,
            };
            report.chain = chain_steps(d.chain.iter(), |rule| ctx.state_of(rule));
            report.cpu = d.cpu;
            report.prev_cpu = Some(task.prev_cpu);
            report.migration = Some(r.topo.distance(task.prev_cpu, d.cpu));
            report.counters = nonzero(&d.counted);
            report.task_after = Some(t);
            report.waker_after = Some(w.waker);
            report.decision = Some(d);
        }
        Question::NewIdle {
            cpu,
            candidates,
            gates,
        } => {
            let d = engine.newidle_balance(*cpu, &r.cpus, candidates, &gates.inputs());
            report.kind = "newidle";
            report.cpu = *cpu;
            report.pulled = d.pulled;
            let view = NewIdleView {
                topo: &r.topo,
                cfg: &r.config,
                cpus: &r.cpus,
                cpu: *cpu,
                candidates,
                gates,
                pulled: d.pulled,
            };
            report.chain = chain_steps(d.chain.iter(), |rule| view.state_of(rule));
            report.counters = nonzero(&d.counted);
        }
    }
    report
}

/// The rule chain as `explain` prints it: each rule with its text and, from
/// `state_of`, the state it looked at.
fn chain_steps(
    rules: impl Iterator<Item = Rule>,
    state_of: impl Fn(Rule) -> String,
) -> Vec<ChainStep> {
    rules
        .map(|rule| ChainStep {
            rule: rule.name(),
            text: rule.text(),
            state: state_of(rule),
        })
        .collect()
}

fn nonzero(c: &crate::policy::Counters) -> BTreeMap<&'static str, u64> {
    c.fields().into_iter().filter(|(_, v)| *v != 0).collect()
}

fn check_expect(e: &Expect, r: &ExplainReport, enforce: bool) -> Result<ExpectReport, String> {
    let mut failures = Vec::new();
    for (i, name) in e.rules.iter().enumerate() {
        if Rule::from_name(name).is_none() {
            return Err(format!("expect.rules[{i}]: unknown rule '{name}'"));
        }
        if !r.chain.iter().any(|s| s.rule == name) {
            failures.push(format!("rule {name} not in the chain"));
        }
    }
    if r.kind == "wakeup" {
        if e.pull.is_some() || e.pulled_pid.is_some() {
            return Err("expect: pull/pulled_pid apply to newidle scenarios".into());
        }
        if let Some(c) = e.cpu
            && c != r.cpu
        {
            failures.push(format!("expected CPU {c}, chose {}", r.cpu));
        }
    } else {
        if e.cpu.is_some() {
            return Err("expect.cpu: applies to wake-up scenarios (use pull/pulled_pid)".into());
        }
        if let Some(p) = e.pull
            && p != r.pulled.is_some()
        {
            failures.push(format!(
                "expected {}, {}",
                if p { "a pull" } else { "no pull" },
                if r.pulled.is_some() {
                    "pulled"
                } else {
                    "did not pull"
                }
            ));
        }
        if let Some(pid) = e.pulled_pid
            && r.pulled.map(|p| p.pid) != Some(pid)
        {
            failures.push(format!(
                "expected pid {pid} pulled, got {:?}",
                r.pulled.map(|p| p.pid)
            ));
        }
    }
    Ok(ExpectReport {
        checked: enforce,
        met: failures.is_empty(),
        failures,
    })
}

// ------------------------------------------------------------------------------------------
// What each rule looked at
// ------------------------------------------------------------------------------------------

/// A CPU's state in a few words: `cpu 40 [nr_running=1 load=1024 util=1024]`.
fn cpu_state(topo: &Topology, cpus: &[CpuSnapshot], cfg: &Config, c: usize) -> String {
    if c >= topo.nr_cpus() {
        return format!("cpu {c} [outside the topology]");
    }
    let s = cpus.get(c).copied().unwrap_or_default();
    let mut parts: Vec<String> = Vec::new();
    if !topo.is_online(c) {
        parts.push("offline".into());
    }
    if s.available_idle() {
        parts.push("idle".into());
    } else {
        if s.idle {
            parts.push("idle task".into());
        }
        parts.push(format!("nr_running={}", s.nr_running));
        if s.nr_delayed > 0 {
            let note = if cfg.delayed_dequeue {
                ""
            } else {
                " (ignored)"
            };
            parts.push(format!("delayed={}{note}", s.nr_delayed));
        }
        if s.sched_idle_only {
            parts.push("sched_idle_only".into());
        }
    }
    if s.ttwu_pending {
        parts.push("ttwu_pending".into());
    }
    if s.wakeup_in_flight {
        parts.push("wakeup_in_flight".into());
    }
    if s.load > 0 {
        parts.push(format!("load={}", s.load));
    }
    if s.util > 0 {
        parts.push(format!("util={}", s.util));
    }
    if s.capacity > 0 {
        parts.push(format!("capacity={}", s.capacity));
    }
    format!("cpu {c} [{}]", parts.join(" "))
}

struct WakeView<'a> {
    topo: &'a Topology,
    cfg: &'a Config,
    cpus: &'a [CpuSnapshot],
    llc: &'a [LlcState],
    /// The wakee and the wake context before the decision.
    task: &'a TaskState,
    wake: &'a WakeCtx,
    waker_after: &'a TaskState,
    d: &'a Decision,
}

impl WakeView<'_> {
    fn cpu(&self, c: usize) -> String {
        cpu_state(self.topo, self.cpus, self.cfg, c)
    }

    fn cpus_of(&self, set: impl Iterator<Item = usize>) -> String {
        set.map(|c| self.cpu(c)).collect::<Vec<_>>().join(", ")
    }

    fn allowed(&self) -> String {
        let n = self.topo.nr_cpus();
        let a = self.task.allowed_or_all(n);
        if a.is_subset_of(&crate::policy::CpuSet::first_n(n)) && a.count() == n {
            "all CPUs".into()
        } else {
            a.to_cpulist()
        }
    }

    fn llc_size(&self, c: usize) -> usize {
        if c < self.topo.nr_cpus() {
            self.topo.llc_size(c)
        } else {
            1
        }
    }

    fn context(&self) -> String {
        format!("sync={} waker {:?}", self.d.sync, self.wake.waker_context).to_lowercase()
    }

    fn sync_counts(&self) -> String {
        let this = self.wake.waker_cpu;
        let s = self.cpus.get(this).copied().unwrap_or_default();
        let delayed = if self.cfg.delayed_dequeue {
            s.nr_delayed.min(s.nr_running)
        } else {
            0
        };
        let counted = if self.cfg.sync_excludes_delayed {
            format!(
                "counted nr_running - delayed = {} - {} = {}",
                s.nr_running,
                delayed,
                s.nr_running - delayed
            )
        } else {
            format!("counted nr_running = {} (delayed {delayed})", s.nr_running)
        };
        format!("{}; waker {}; {counted}", self.context(), self.cpu(this))
    }

    fn state_of(&self, rule: Rule) -> String {
        let this = self.wake.waker_cpu;
        let prev = self.task.prev_cpu;
        let target = self.d.sis_target.unwrap_or(prev);
        let cpu = self.d.cpu;
        match rule {
            Rule::SingleAllowedCpu => format!("allowed {}", self.allowed()),
            Rule::NotAWakeup => format!("wake_flags {:#x}", self.wake.wake_flags),
            Rule::SyncIgnoredWakerExiting => "waker has PF_EXITING".into(),
            Rule::WakeWide | Rule::WantAffine => format!(
                "waker flips {} (after record_wakee), wakee flips {}, LLC size {} of waker cpu \
                 {this}",
                self.waker_after.wakee_flips,
                self.task.wakee_flips,
                self.llc_size(this)
            ),
            Rule::WakerCpuNotAllowed => {
                format!("waker cpu {this}, allowed {}", self.allowed())
            }
            Rule::AffineDomainSmt
            | Rule::AffineDomainLlc
            | Rule::AffineDomainNode
            | Rule::AffineDomainMachine => {
                let level = match rule {
                    Rule::AffineDomainSmt => DomainLevel::Smt,
                    Rule::AffineDomainLlc => DomainLevel::Llc,
                    Rule::AffineDomainNode => DomainLevel::Node,
                    _ => DomainLevel::Machine,
                };
                format!(
                    "domain {} of waker cpu {this} spans {} and holds prev {prev}",
                    level.name(),
                    self.topo.span(this, level).to_cpulist()
                )
            }
            Rule::NoAffineDomain => format!(
                "waker cpu {this}, prev {prev}, NUMA level wake-affine: {}",
                self.topo.numa_wake_affine()
            ),
            Rule::WakerIsPrev => format!("waker cpu {this} = prev"),
            Rule::WaIdleBothIdleKeepPrev | Rule::WaIdleWakerIdleCacheAffine => format!(
                "waker {}; prev {}; share an LLC: {}",
                self.cpu(this),
                self.cpu(prev),
                self.topo.share_cache(this, prev)
            ),
            Rule::WaIdleSyncWakerAlone
            | Rule::WaIdleSyncWakerAloneExcludingDelayed
            | Rule::SyncShortcutBlockedIrqWaker
            | Rule::SyncShortcutBlockedByDelayed
            | Rule::SyncShortcutIrqWaker => self.sync_counts(),
            Rule::WaIdlePrevIdle => format!("prev {}", self.cpu(prev)),
            Rule::WaIdleNoDecision => format!(
                "{}; waker {}; prev {}",
                self.context(),
                self.cpu(this),
                self.cpu(prev)
            ),
            Rule::WaWeightSyncWakerHeavier
            | Rule::WaWeightThisLighter
            | Rule::WaWeightPrevLighter => {
                let snap = |c: usize| self.cpus.get(c).copied().unwrap_or_default();
                let cap = |c: usize| match snap(c).capacity {
                    0 => self.topo.capacity(c),
                    x => x,
                };
                let pct = match self.d.affine_domain {
                    Some(DomainLevel::Smt) => self.cfg.imbalance_pct_smt,
                    _ => self.cfg.imbalance_pct_llc,
                };
                format!(
                    "this load {} (capacity {}), prev load {} (capacity {}), task load {}, waker \
                     load {}, sync {}, imbalance_pct {pct}, wa_bias {}",
                    snap(this).load,
                    cap(this),
                    snap(prev).load,
                    cap(prev),
                    self.task.load,
                    self.wake.waker.load,
                    self.d.sync,
                    self.cfg.wa_bias
                )
            }
            Rule::WakeAffineNoFeature => "wa_idle=false wa_weight=false".into(),
            Rule::SisTargetIdle => format!("target {}", self.cpu(target)),
            Rule::SisPrevIdle => format!(
                "prev {}; shares an LLC with target {target}",
                self.cpu(prev)
            ),
            Rule::SisKthreadStacking | Rule::SisKthreadStackingBlockedIrq => format!(
                "waker is a per-CPU kthread on cpu {this} = prev; waker context {:?}; {}",
                self.wake.waker_context,
                self.cpu(this)
            )
            .to_lowercase(),
            Rule::SisRecentUsedHit
            | Rule::SisRecentUsedMiss
            | Rule::SisRecentUsedBecomesTarget
            | Rule::SisRecentUsedMaskBug => match self.task.recent_used_cpu {
                Some(r) => format!(
                    "recent_used_cpu {} ({} mode); prev {prev}, target {target}; same LLC as \
                     target: {}; allowed: {}",
                    self.cpu(r),
                    self.cfg.recent_used.as_str(),
                    self.topo.share_cache(r, target),
                    self.task.allowed_or_all(self.topo.nr_cpus()).contains(r)
                ),
                None => "no recent_used_cpu".into(),
            },
            Rule::SisNoLlcDomain => format!(
                "target {target}: LLC of {} CPU(s), online {}",
                self.llc_size(target),
                self.topo.is_online(target)
            ),
            Rule::SisSmtPrevSibling => format!(
                "prev {prev}'s siblings: {}",
                self.cpus_of(self.topo.smt_mask(prev).iter().filter(|&c| c != prev))
            ),
            Rule::SisIdleCore => format!(
                "core {}; LLC idle-core hint was {}; scanned {}",
                self.cpus_of(self.topo.smt_mask(cpu).iter()),
                self.llc_hint(target),
                self.d.scanned
            ),
            Rule::SisIdleCandidate | Rule::SisIdleCpu => format!(
                "{}; scanned {}{}",
                self.cpu(cpu),
                self.d.scanned,
                self.sis_nr()
            ),
            Rule::SisSmtTargetSibling => format!(
                "target {target}'s core: {}",
                self.cpus_of(self.topo.smt_mask(target).iter())
            ),
            Rule::SisUtilOverloaded => {
                let span = self.topo.llc_mask(target).and(self.topo.online());
                let sum: u64 = span
                    .iter()
                    .map(|c| self.cpus.get(c).map_or(0, |s| s.util as u64))
                    .sum();
                format!(
                    "LLC of target {target}: util {sum} over {} CPUs{}",
                    span.count(),
                    self.sis_nr()
                )
            }
            Rule::SisScanLimitReached => {
                let cost = if this < self.topo.nr_cpus() {
                    self.llc
                        .get(self.topo.llc_index(this))
                        .map_or(0, |l| l.avg_scan_cost_ns)
                } else {
                    0
                };
                format!(
                    "sis {}; scanned {}{}; waker avg_idle {} ns, avg_scan_cost {cost} ns before",
                    self.cfg.sis.as_str(),
                    self.d.scanned,
                    self.sis_nr(),
                    self.cpus.get(this).map_or(0, |s| s.avg_idle_ns)
                )
            }
            Rule::SisPropNoWakerLlc => {
                format!("waker cpu {this}: LLC of {} CPU(s)", self.llc_size(this))
            }
            Rule::SisFallbackTarget => format!(
                "scanned {}{}, nothing idle; target {}",
                self.d.scanned,
                self.sis_nr(),
                self.cpu(target)
            ),
            Rule::SlowPathIdlestIdle | Rule::SlowPathIdlestLeastLoaded => self.cpu(cpu),
            Rule::SlowPathNoAllowedCpu => format!("allowed {}", self.allowed()),
            Rule::FallbackNotAllowed | Rule::FallbackAnyOnline => format!(
                "allowed {}, online {}; now {}",
                self.allowed(),
                self.topo.online().to_cpulist(),
                self.cpu(cpu)
            ),
            // Newly-idle rules never appear in a wake-up chain.
            _ => String::new(),
        }
    }

    fn sis_nr(&self) -> String {
        match self.d.sis_nr {
            Some(nr) => format!(", SIS depth nr={nr}"),
            None => String::new(),
        }
    }

    fn llc_hint(&self, c: usize) -> String {
        if c >= self.topo.nr_cpus() {
            return "unknown".into();
        }
        self.llc
            .get(self.topo.llc_index(c))
            .map_or("unknown".into(), |l| l.has_idle_cores.to_string())
    }
}

struct NewIdleView<'a> {
    topo: &'a Topology,
    cfg: &'a Config,
    cpus: &'a [CpuSnapshot],
    cpu: usize,
    candidates: &'a [PullCandidate],
    gates: &'a scenario::NewIdleGates,
    pulled: Option<Pulled>,
}

impl NewIdleView<'_> {
    fn state_of(&self, rule: Rule) -> String {
        let me = cpu_state(self.topo, self.cpus, self.cfg, self.cpu);
        match rule {
            Rule::NewidleCpuOffline | Rule::NewidleCpuHasWork => me,
            Rule::NewidleSkipPendingWakeup | Rule::NewidleSkipWakeupInFlight => {
                format!("{me}; {} candidate(s) not examined", self.candidates.len())
            }
            Rule::NewidlePullDomainSmt
            | Rule::NewidlePullDomainLlc
            | Rule::NewidlePullDomainNode
            | Rule::NewidlePullDomainMachine => match self.pulled {
                Some(p) => format!(
                    "pid {} from {}",
                    p.pid,
                    cpu_state(self.topo, self.cpus, self.cfg, p.src_cpu)
                ),
                None => String::new(),
            },
            Rule::NewidlePullDespitePending => me,
            Rule::NewidleNothingToPull => {
                format!("{} candidate(s), none eligible", self.candidates.len())
            }
            Rule::NewidleRootNotOverloaded => match self.gates.overloaded {
                Some(_) => "rd->overload as given".into(),
                None => "no CPU has two or more tasks".into(),
            },
            Rule::NewidleIdleTooShort => {
                let avg_idle = self.cpus.get(self.cpu).map_or(0, |s| s.avg_idle_ns);
                let costs = &self.gates.max_newidle_lb_cost;
                format!(
                    "cpu {} avg_idle={avg_idle} ns; max_newidle_lb_cost {}",
                    self.cpu,
                    if costs.is_empty() {
                        "not given (0)".to_string()
                    } else {
                        format!("{costs:?} ns")
                    }
                )
            }
            _ => String::new(),
        }
    }
}

// ------------------------------------------------------------------------------------------
// Text output
// ------------------------------------------------------------------------------------------

impl ExplainReport {
    /// The human-readable form.
    pub fn render(&self) -> String {
        let mut o = String::new();
        let _ = writeln!(o, "scenario: {}", self.scenario);
        if !self.description.is_empty() {
            let _ = writeln!(o, "          {}", self.description);
        }
        let p = &self.policy;
        let name = if p.matches.is_empty() {
            format!("{} + {}", p.preset, p.diff.join(", "))
        } else {
            p.matches.join(" = ")
        };
        let _ = writeln!(
            o,
            "policy:   {name}{}",
            if p.overridden_by_cli {
                " (from the command line)"
            } else {
                ""
            }
        );
        let t = &self.topology;
        let _ = writeln!(
            o,
            "topology: {} CPUs ({} online), {} node(s), {} LLC(s), SMT {}, NUMA wake-affine {} \
             ({})",
            t.cpus,
            t.online,
            t.nodes,
            t.llcs,
            if t.smt { "on" } else { "off" },
            t.numa_wake_affine,
            t.source
        );
        let _ = writeln!(
            o,
            "LLC idle-core hints: {}",
            if self.llc_hints_from_snapshot {
                "from the snapshot"
            } else {
                "from the scenario"
            }
        );
        match (self.kind, &self.decision) {
            ("wakeup", Some(d)) => {
                let _ = writeln!(
                    o,
                    "decision: CPU {} (from prev {}: {}; waker cpu {}); path {}{}",
                    self.cpu,
                    d.prev_cpu,
                    serde_json::to_value(self.migration.unwrap_or(Distance::SameCpu))
                        .ok()
                        .and_then(|v| v.as_str().map(str::to_string))
                        .unwrap_or_default(),
                    d.waker_cpu,
                    serde_json::to_value(d.path)
                        .ok()
                        .and_then(|v| v.as_str().map(str::to_string))
                        .unwrap_or_default(),
                    d.affine_domain
                        .map(|l| format!(", affine domain {}", l.name()))
                        .unwrap_or_default()
                );
            }
            _ => {
                let _ = match self.pulled {
                    Some(p) => writeln!(
                        o,
                        "decision: CPU {} pulls pid {} from CPU {}",
                        self.cpu, p.pid, p.src_cpu
                    ),
                    None => writeln!(o, "decision: CPU {} pulls nothing", self.cpu),
                };
            }
        }
        let _ = writeln!(o, "rule chain:");
        let w = self.chain.iter().map(|s| s.rule.len()).max().unwrap_or(0);
        for (i, s) in self.chain.iter().enumerate() {
            let _ = writeln!(o, "  {:2}. {:w$}  {}  | {}", i + 1, s.rule, s.text, s.state);
        }
        if let (Some(before), Some(after)) = (self.prev_cpu, &self.task_after) {
            let _ = before;
            let _ = writeln!(
                o,
                "after:    wakee recent_used_cpu {}, waker wakee_flips {}",
                after
                    .recent_used_cpu
                    .map_or("none".into(), |c| c.to_string()),
                self.waker_after.map_or(0, |w| w.wakee_flips)
            );
        }
        let counters: Vec<String> = self
            .counters
            .iter()
            .map(|(k, v)| format!("{k}={v}"))
            .collect();
        let _ = writeln!(o, "counters: {}", counters.join(" "));
        if let Some(e) = &self.expect {
            let _ = writeln!(
                o,
                "expect:   {}",
                match (e.checked, e.met) {
                    (false, _) => "not checked (policy overridden on the command line)".into(),
                    (true, true) => "met".into(),
                    (true, false) => format!("NOT met: {}", e.failures.join("; ")),
                }
            );
        }
        o
    }
}

// ------------------------------------------------------------------------------------------
// Trace replay
// ------------------------------------------------------------------------------------------

/// One record whose replay differs.
#[serde_with::skip_serializing_none]
#[derive(Clone, Debug, Serialize)]
pub struct Mismatch {
    pub line: usize,
    pub seq: Option<u64>,
    pub recorded_cpu: usize,
    pub replayed_cpu: usize,
    pub recorded_chain: Vec<String>,
    pub replayed_chain: Vec<String>,
}

/// The outcome of `explain --trace`.
#[derive(Clone, Debug, Serialize)]
pub struct ReplaySummary {
    pub trace: String,
    pub records: usize,
    pub matched: usize,
    pub mismatched: usize,
    /// Records cut short at the end of the file (an incomplete last line), not replayed.
    pub skipped_at_end: usize,
    /// The first mismatches (at most 50).
    pub mismatches: Vec<Mismatch>,
    pub overridden_by_cli: bool,
}

impl ReplaySummary {
    pub fn render(&self) -> String {
        let mut o = format!(
            "trace {}: {} record(s) replayed, {} match, {} differ{}\n",
            self.trace,
            self.records,
            self.matched,
            self.mismatched,
            if self.overridden_by_cli {
                " (policy overridden on the command line)"
            } else {
                ""
            }
        );
        for m in &self.mismatches {
            let _ = writeln!(
                o,
                "  line {}{}: recorded CPU {} [{}], replayed CPU {} [{}]",
                m.line,
                m.seq.map(|s| format!(" (seq {s})")).unwrap_or_default(),
                m.recorded_cpu,
                m.recorded_chain.join(" -> "),
                m.replayed_cpu,
                m.replayed_chain.join(" -> ")
            );
        }
        o
    }
}

/// Replays a trace file, streaming it line by line: memory stays bounded by one line
/// ([`MAX_INPUT_BYTES`]) whatever the file's size.  Errors are one line naming the line and
/// the field.
pub fn replay_trace_file(path: &Path, cli: &PolicyOverride) -> anyhow::Result<ReplaySummary> {
    let file = open_input(path)
        .map_err(|e| exit::BadInput(format!("cannot read {}: {e}", path.display())))?;
    replay_trace_reader(
        std::io::BufReader::with_capacity(1 << 16, file),
        &path.display().to_string(),
        &base_dir(path),
        cli,
    )
}

/// Replays JSON-lines `text` (blank lines are skipped).
pub fn replay_trace(
    text: &str,
    name: &str,
    base_dir: &Path,
    cli: &PolicyOverride,
) -> anyhow::Result<ReplaySummary> {
    replay_trace_reader(text.as_bytes(), name, base_dir, cli)
}

/// Reads the next line (without its newline) into `buf`, at most [`MAX_INPUT_BYTES`] of
/// it.  Returns `None` at the end, else whether the line ended with a newline.
pub(crate) fn next_line<R: BufRead>(r: &mut R, buf: &mut Vec<u8>) -> std::io::Result<Option<bool>> {
    buf.clear();
    let n = r
        .by_ref()
        .take(MAX_INPUT_BYTES + 1)
        .read_until(b'\n', buf)?;
    if n == 0 {
        return Ok(None);
    }
    let complete = buf.last() == Some(&b'\n');
    if complete {
        buf.pop();
    }
    Ok(Some(complete))
}

/// Replays a JSON-lines trace from `r`.  A last line without its newline that does not
/// parse is what a writer killed mid-record (or a full disk) leaves: it is skipped and
/// counted in `skipped_at_end`, and the records before it replay.  A trace with no
/// complete record is an error, as is a malformed line anywhere else.
pub fn replay_trace_reader<R: BufRead>(
    r: R,
    name: &str,
    base_dir: &Path,
    cli: &PolicyOverride,
) -> anyhow::Result<ReplaySummary> {
    let mut s = ReplaySummary {
        trace: name.to_string(),
        records: 0,
        matched: 0,
        mismatched: 0,
        skipped_at_end: 0,
        mismatches: Vec::new(),
        overridden_by_cli: !cli.is_empty(),
    };
    s.skipped_at_end = for_each_replayed(r, name, base_dir, cli, |lineno, rec, report| {
        let replayed_chain: Vec<String> = report.chain.iter().map(|c| c.rule.to_string()).collect();
        let same = report.cpu == rec.recorded_cpu
            && (rec.recorded_chain.is_empty() || rec.recorded_chain == replayed_chain);
        s.records += 1;
        if same {
            s.matched += 1;
        } else {
            s.mismatched += 1;
            if s.mismatches.len() < 50 {
                s.mismatches.push(Mismatch {
                    line: lineno,
                    seq: rec.seq,
                    recorded_cpu: rec.recorded_cpu,
                    replayed_cpu: report.cpu,
                    recorded_chain: rec.recorded_chain.clone(),
                    replayed_chain,
                });
            }
        }
    })?;
    Ok(s)
}

/// Replays every record of a JSON-lines trace through the engine and hands each, with the
/// engine's report, to `each(line, record, report)`.  Returns how many records were cut
/// short at the end (0 or 1).  Errors as [`replay_trace_reader`].
pub fn for_each_replayed<R: BufRead>(
    r: R,
    name: &str,
    base_dir: &Path,
    cli: &PolicyOverride,
    mut each: impl FnMut(usize, &TraceRecord, &ExplainReport),
) -> anyhow::Result<usize> {
    for_each_resolved(
        r,
        name,
        base_dir,
        cli,
        |rec, _| rec,
        |lineno, rec, inputs| {
            each(lineno, rec, &explain(inputs));
            Ok(())
        },
    )
}

/// Every record of a JSON-lines file of `T`s, in order, to `each(line number, record)`,
/// read as every trace file is: a line at most [`MAX_INPUT_BYTES`] long (`what` names its
/// record in that error), UTF-8, a JSON object within the JSON limits; blank lines
/// skipped.  A last line without its newline that does not parse is what a writer killed
/// mid-record (or a full disk) leaves: it is left out, and the return value says so (1,
/// else 0).  A malformed line anywhere else is an error naming `name` and the line; an
/// error from `each` ends the loop with it.
pub(crate) fn for_each_json_line<R: BufRead, T: serde::de::DeserializeOwned>(
    r: &mut R,
    name: &str,
    what: &str,
    mut each: impl FnMut(usize, T) -> anyhow::Result<()>,
) -> anyhow::Result<usize> {
    let mut buf = Vec::new();
    let mut lineno = 0usize;
    loop {
        let complete = match next_line(r, &mut buf) {
            Ok(Some(c)) => c,
            Ok(None) => return Ok(0),
            Err(e) => {
                return Err(
                    exit::Failed(format!("{name}: read error after line {lineno}: {e}")).into(),
                );
            }
        };
        lineno += 1;
        if buf.len() as u64 > MAX_INPUT_BYTES {
            return Err(exit::BadInput(format!(
                "{name}:{lineno}: longer than the {} MiB {what} may have",
                MAX_INPUT_BYTES >> 20
            ))
            .into());
        }
        let parsed = std::str::from_utf8(&buf)
            .map_err(|e| format!("not UTF-8 text (byte {})", e.valid_up_to()))
            .and_then(|line| {
                if line.trim().is_empty() {
                    Ok(None)
                } else {
                    parse_json_object::<T>(line).map(Some)
                }
            });
        match parsed {
            Ok(Some(rec)) => each(lineno, rec)?,
            Ok(None) => {}
            // Only the very last line may be cut short.
            Err(_) if !complete => return Ok(1),
            Err(e) => return Err(exit::BadInput(format!("{name}:{lineno}: {e}")).into()),
        }
    }
}

/// The loop under [`for_each_replayed`]: every record of a JSON-lines trace, read and
/// checked, handed to `view` with its topology, and resolved into engine inputs, to
/// `each(line, record as viewed, inputs)`.  `view` is where a replay may decide on other
/// inputs than the record's (`oracle compare --inputs live`); the checks on the record's
/// CPUs apply to what it returns.  Returns what [`for_each_replayed`] does; an error from
/// `each` ends the loop with it.
pub fn for_each_resolved<R: BufRead>(
    mut r: R,
    name: &str,
    base_dir: &Path,
    cli: &PolicyOverride,
    mut view: impl FnMut(TraceRecord, &Topology) -> TraceRecord,
    mut each: impl FnMut(usize, &TraceRecord, &Resolved) -> anyhow::Result<()>,
) -> anyhow::Result<usize> {
    let bad = |msg: String| -> anyhow::Error { exit::BadInput(msg).into() };
    let mut records = 0usize;
    // Records of one run share their topology; build it once per distinct description.
    let mut last_topo: Option<(TopologyInput, Topology)> = None;
    let skipped_at_end = for_each_json_line(
        &mut r,
        name,
        "a trace record",
        |lineno, rec: TraceRecord| {
            let topo = match &last_topo {
                Some((input, t)) if *input == rec.topology => t.clone(),
                _ => {
                    let t = build_topology(&rec.topology, base_dir)
                        .map_err(|e| bad(format!("{name}:{lineno}: {e}")))?;
                    last_topo = Some((rec.topology.clone(), t.clone()));
                    t
                }
            };
            let rec = view(rec, &topo);
            for (j, r) in rec.recorded_chain.iter().enumerate() {
                if Rule::from_name(r).is_none() {
                    return Err(bad(format!(
                        "{name}:{lineno}: recorded_chain[{j}]: unknown rule '{r}'"
                    )));
                }
            }
            let resolved = Scenario::from(&rec)
                .resolve_on(topo, cli)
                .map_err(|e| bad(format!("{name}:{lineno}: {e}")))?;
            if rec.recorded_cpu >= resolved.topo.nr_cpus() {
                return Err(bad(format!(
                    "{name}:{lineno}: recorded_cpu: CPU {} is outside the topology",
                    rec.recorded_cpu
                )));
            }
            // The oracle's race tally looks these CPUs up beside the recorded and the replayed
            // CPU: one the recorded machine does not have is a record of some other machine.
            for (j, &c) in rec.changed_cpus.iter().flatten().enumerate() {
                crate::policy::trace::check_cpu(
                    &format!("changed_cpus[{j}]"),
                    c,
                    resolved.topo.nr_cpus(),
                )
                .map_err(|e| bad(format!("{name}:{lineno}: {e}")))?;
            }
            // The state estimator's values describe the record's CPUs, one each.
            if let Some(e) = &rec.estimated {
                let nr = resolved.topo.nr_cpus();
                for (field, len) in [
                    ("cpu_load", e.cpu_load.len()),
                    ("cpu_util", e.cpu_util.len()),
                ] {
                    if len != nr {
                        return Err(bad(format!(
                            "{name}:{lineno}: estimated.{field}: {len} values for a topology of \
                         {nr} CPUs"
                        )));
                    }
                }
            }
            records += 1;
            each(lineno, &rec, &resolved)
        },
    )?;
    if records == 0 {
        return Err(bad(format!(
            "{name}: no complete record to replay (an empty trace{})",
            if skipped_at_end > 0 {
                ", or one whose only line is incomplete"
            } else {
                ""
            }
        )));
    }
    Ok(skipped_at_end)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn barry() -> Scenario {
        parse_json(
            r#"{
              "topology": {"shape": "2x1x32x1"},
              "policy": {"preset": "mainline"},
              "cpus": {"default": "idle", "overrides": {"32-63": {"base": "busy", "util": 1024}}},
              "task": {"pid": 100, "prev_cpu": 5, "load": 300},
              "wake": {"sync": true, "waker_cpu": 40, "waker_context": "softirq",
                       "waker": {"pid": 2000, "prev_cpu": 40, "load": 1024}},
              "expect": {"cpu": 40, "rules": ["sync_shortcut_irq_waker"]}
            }"#,
        )
        .unwrap()
    }

    #[test]
    fn explains_seed1_with_state_per_rule() {
        let s = barry();
        let r = explain(
            &s.resolve(Path::new("."), &PolicyOverride::default())
                .unwrap(),
        );
        assert_eq!(r.cpu, 40);
        assert_eq!(r.migration, Some(Distance::RemoteNode));
        let alone = r
            .chain
            .iter()
            .find(|c| c.rule == "wake_affine_idle_sync_waker_alone")
            .unwrap();
        assert!(alone.state.contains("waker softirq"), "{}", alone.state);
        assert!(
            alone
                .state
                .contains("counted nr_running - delayed = 1 - 0 = 1"),
            "{}",
            alone.state
        );
        assert!(r.chain.iter().all(|c| !c.state.is_empty()), "{:?}", r.chain);
        let text = r.render();
        assert!(text.contains("decision: CPU 40"), "{text}");
        let e = check_expect(s.expect.as_ref().unwrap(), &r, true).unwrap();
        assert!(e.met);

        let cli = PolicyOverride {
            preset: Some("mainline+barry".into()),
            set: vec![],
        };
        let r = explain(&s.resolve(Path::new("."), &cli).unwrap());
        assert_eq!(r.cpu, 5);
        assert!(
            r.chain
                .iter()
                .any(|c| c.rule == "sync_shortcut_blocked_irq_waker")
        );
    }

    /// --help states the limits the code enforces.
    #[test]
    fn help_states_the_input_limits() {
        use crate::json_limits::{MAX_ARRAY_LEN, MAX_DEPTH, MAX_OBJECT_MEMBERS, MAX_VALUES};
        let help = long_help_of::<ExplainArgs>("explain");
        for said in [
            format!("at most {} MiB", MAX_INPUT_BYTES >> 20),
            format!("{MAX_DEPTH} levels of nesting"),
            format!("{MAX_ARRAY_LEN} elements in an array"),
            format!("{MAX_OBJECT_MEMBERS} members in an object"),
            format!("{MAX_VALUES} values in all"),
            format!("{} CPU overrides", crate::policy::MAX_OVERRIDES),
            format!(
                "at most {} pull candidates",
                scenario::MAX_DERIVED_CANDIDATES
            ),
        ] {
            assert!(help.contains(&said), "--help lacks {said:?}: {help}");
        }
    }

    #[test]
    fn errors_name_the_field() {
        let bad = |text: &str| -> String {
            match parse_json::<Scenario>(text) {
                Err(e) => e,
                Ok(s) => s
                    .resolve(Path::new("."), &PolicyOverride::default())
                    .map(|_| String::from("no error"))
                    .unwrap_or_else(|e| e),
            }
        };
        let base = r#""topology": {"shape": "1x1x4x1"}"#;
        let e = bad(&format!(
            r#"{{{base}, "task": {{"pid": 1, "prev_cpu": "x"}}, "wake": {{"waker_cpu": 0}}}}"#
        ));
        assert!(
            e.starts_with("task.prev_cpu: invalid type: string \"x\""),
            "{e}"
        );
        let e = bad(&format!(
            r#"{{{base}, "task": {{"pid": 1, "prev_cpu": 9}}, "wake": {{"waker_cpu": 0}}}}"#
        ));
        assert_eq!(e, "task.prev_cpu: CPU 9 is outside the topology (CPUs 0-3)");
        let e = bad(&format!(
            r#"{{{base}, "task": {{"pid": 1, "prev_cpu": 1}}}}"#
        ));
        assert!(e.starts_with("wake: missing"), "{e}");
        let e = bad(&format!(
            r#"{{{base}, "policy": {{"preset": "v4.19"}}, "newidle": {{"cpu": 1}}}}"#
        ));
        assert!(
            e.starts_with("policy.preset: unknown preset 'v4.19'"),
            "{e}"
        );
        let e = bad(&format!(
            r#"{{{base}, "policy": {{"set": {{"sis": "fast"}}}}, "newidle": {{"cpu": 1}}}}"#
        ));
        assert!(e.starts_with("policy.set.sis: bad value 'fast'"), "{e}");
        let e = bad(&format!(
            r#"{{{base}, "newidle": {{"cpu": 1}}, "wakee": 3}}"#
        ));
        assert!(e.starts_with("wakee: unknown field `wakee`"), "{e}");
        let e = bad(&format!(
            r#"{{{base}, "task": {{"pid": 1, "prev_cpu": 1}}, "wake": {{"waker_cpu": 0, "waker_context": "nmi"}}}}"#
        ));
        assert!(
            e.starts_with("wake.waker_context: unknown variant `nmi`"),
            "{e}"
        );
        let e = bad(r#"{"topology": {}, "newidle": {"cpu": 0}}"#);
        assert_eq!(e, "topology: give exactly one of shape, cpus or sysfs");
        let e = bad(&format!(
            r#"{{{base}, "llc_state": [{{"llc": 3}}], "newidle": {{"cpu": 0}}}}"#
        ));
        assert!(
            e.starts_with("llc_state[0].llc: LLC 3 does not exist"),
            "{e}"
        );
    }

    #[test]
    fn newidle_scenario_and_derived_candidates() {
        let s: Scenario = parse_json(
            r#"{"topology": {"shape": "1x1x8x2"}, "policy": {"preset": "v5.10"},
                "cpus": {"default": "busy", "overrides": {"3": {"nr_running": 0, "ttwu_pending": true, "avg_idle_ns": 1000000}, "9": "busy:3"}},
                "newidle": {"cpu": 3}}"#,
        )
        .unwrap();
        let r = explain(
            &s.resolve(Path::new("."), &PolicyOverride::default())
                .unwrap(),
        );
        assert_eq!(r.kind, "newidle");
        assert_eq!(r.pulled.map(|p| (p.pid, p.src_cpu)), Some((9001, 9)));
        let cli = PolicyOverride {
            preset: None,
            set: vec!["newidle_skip_pending_wakeup=true".into()],
        };
        let r = explain(&s.resolve(Path::new("."), &cli).unwrap());
        assert_eq!(r.pulled, None);
        assert_eq!(r.chain[0].rule, "newidle_skip_pending_wakeup");
    }

    #[test]
    fn trace_records_round_trip_and_replay() {
        let topo = Topology::from_shape(1, 2, 2, 2).unwrap();
        let cfg = Config::from_preset_with("v5.15", &["recent_used=search-target"]).unwrap();
        let n = topo.nr_cpus();
        let mut lines: Vec<String> = synthetic::SyntheticTrace::new(topo, cfg)
            .unwrap()
            .take(40)
            .map(|r| r.to_json_line())
            .collect();
        let replay =
            |text: &str| replay_trace(text, "t.jsonl", Path::new("."), &PolicyOverride::default());
        let text = lines.join("\n");
        let s = replay(&text).unwrap();
        assert_eq!(
            (s.records, s.matched, s.mismatched),
            (40, 40, 0),
            "{}",
            s.render()
        );

        // A tampered record is reported with its line.
        let mut rec: TraceRecord = parse_json(&lines[3]).unwrap();
        rec.recorded_cpu = (rec.recorded_cpu + 1) % n;
        lines[3] = rec.to_json_line();
        let s = replay(&lines.join("\n")).unwrap();
        assert_eq!((s.matched, s.mismatched), (39, 1));
        assert_eq!(s.mismatches[0].line, 4);
        // A malformed line names the line and the field.
        lines[5] = lines[5].replacen("\"recorded_cpu\":", "\"recorded_cpu\":\"x\",\"was\":", 1);
        let e = replay(&lines.join("\n")).unwrap_err().to_string();
        assert!(
            e.starts_with("t.jsonl:6: recorded_cpu: invalid type"),
            "{e}"
        );

        // A last line cut short (no newline, not JSON) is skipped and counted; the same
        // line with its newline, or anywhere else, is an error.
        let good = &lines[..5];
        let cut = &lines[5][..lines[5].len() / 2];
        let text = format!("{}\n{cut}", good.join("\n"));
        let s = replay(&text).unwrap();
        assert_eq!((s.records, s.skipped_at_end), (5, 1), "{}", s.render());
        let e = replay(&format!("{text}\n")).unwrap_err();
        assert!(e.to_string().starts_with("t.jsonl:6: "), "{e}");
        assert_eq!(exit::code_of(&e, exit::RUNTIME), exit::BAD_INPUT);
        // CPUs that changed during the recorded decision are CPUs of the recorded machine.
        let mut outside: TraceRecord = parse_json(&lines[0]).unwrap();
        outside.changed_cpus = Some(vec![1, n]);
        let e = replay(&outside.to_json_line()).unwrap_err();
        assert_eq!(
            e.to_string(),
            format!("t.jsonl:1: changed_cpus[1]: CPU {n} is outside the topology (CPUs 0-7)")
        );
        assert_eq!(exit::code_of(&e, exit::RUNTIME), exit::BAD_INPUT);
        outside.changed_cpus = Some(vec![0, n - 1]);
        replay(&outside.to_json_line()).unwrap();
        // A complete last record without its newline replays.
        let s = replay(&good.join("\n")).unwrap();
        assert_eq!((s.records, s.skipped_at_end), (5, 0));
        // Nothing complete to replay is an error.
        for text in ["", "\n\n", cut] {
            let e = replay(text).unwrap_err();
            assert!(
                e.to_string().starts_with("t.jsonl: no complete record"),
                "{text:?}: {e}"
            );
        }
    }
}
