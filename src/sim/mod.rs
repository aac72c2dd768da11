//! `scx_wakelab sim`: a deterministic discrete-event simulator driven by the policy engine.
//!
//! Synthetic workloads (lat_ctx-like pipe rings, hackbench, Barry Song's softirq-woken
//! qperf, tbench-like pairs, a memcache-like burst workload for the newly-idle pull) run
//! on a chosen topology; every wake-up placement is `Engine::select_cpu`, every newly-idle
//! pull `Engine::newidle_pull`, every CPU going idle `Engine::on_cpu_idle`, delayed dequeue
//! is `policy::DelayedDequeue`.  The report gives per setting: wake-ups, the wake-affine
//! rate, migrations (cross-LLC, cross-node), the recent_used_cpu hit rate, idle-core hits,
//! newly-idle pulls and skips, and a latency proxy (wake-to-run time).  `--compare` runs
//! several flag settings on the same seed side by side.
//!
//! Pure and deterministic: virtual time, one xorshift generator (`policy::rng`) seeded by
//! `--seed`, no wall clock, no threads.  It prints through `explain::emit`, its one use of
//! `explain`.  The model and its simplifications are documented
//! in [`world`]; the workloads in [`spec::Workload`].
//!
//! From tests: build a [`SimSpec`] (e.g. `SimSpec::new(Workload::by_name("softirq-rr")?)`),
//! set `config`, `shape`, `duration_ns`, and call [`run_workload`].

pub mod report;
pub mod spec;
pub mod world;

use anyhow::bail;

pub use report::{Latency, MigrationCounts, Migrations, NewIdleStats, SimReport, render_table};
pub use spec::{
    HackbenchMode, MAX_COUNT, MAX_PARAM_NS, MAX_TASKS, MODEL_PARAMS, ModelParams, SimSpec,
    WORKLOAD_NAMES, Workload,
};

use crate::policy::{Config, PRESET_NAMES};

/// The longest simulated time, ns (as `--seconds`' limit): the model adds times to the
/// clock in u64 nanoseconds.
pub const MAX_DURATION_NS: u64 = 3_600_000_000_000;

/// Runs one simulation.  Panics only on an invalid spec (see [`try_run_workload`]).
pub fn run_workload(spec: &SimSpec) -> SimReport {
    try_run_workload(spec).unwrap_or_else(|e| panic!("invalid simulation spec: {e}"))
}

/// Runs one simulation; an invalid spec (bad topology, a workload that cannot run on it)
/// is an error.
pub fn try_run_workload(spec: &SimSpec) -> Result<SimReport, String> {
    spec.config.validate().map_err(|e| e.to_string())?;
    spec.check_size()?;
    if spec.duration_ns > MAX_DURATION_NS {
        return Err(format!(
            "duration {} ns: at most {MAX_DURATION_NS} (3600 s)",
            spec.duration_ns
        ));
    }
    let world = world::World::new(spec)?;
    let raw = world.run(spec.duration_ns, spec.max_events);
    Ok(SimReport::new(spec, raw))
}

/// Simulate a workload through the placement engine, per flag setting.
#[derive(Debug, Clone, clap::Args)]
#[command(
    long_about = "Run a deterministic discrete-event simulation of a synthetic \
    workload through the placement engine and report wake-ups, the wake-affine rate, \
    migrations (cross-LLC, cross-node), the recent_used_cpu hit rate, idle-core hits, \
    newly-idle pulls and a wake-to-run latency proxy. --compare adds columns: each FLAGSET \
    is the base policy (--preset, --set) plus comma-separated KEY=VALUE flags and/or a \
    preset name, e.g. --compare sync_requires_task_waker=true --compare v5.10,recent_used=prev.\n\n\
    Workloads and their --param keys (defaults in parentheses):\n  \
    pipe-rings: rings (0 = one per CPU), ring_size (2), work_ns (2000), tail_ns (1000)\n  \
    hackbench: groups (2), fds (8), loops (20), mode (pipe|socket), capacity (16)\n  \
    softirq-rr: flows (1), work_ns (5000), rtt_ns (20000), hogs (true); default topology 2x1x32x1\n  \
    tbench-like: pairs (0 = one per two CPUs), client_ns (6000), server_ns (8000), tail_ns (2000), task_context (false)\n  \
    newidle-burst: pairs (0 = one per CPU), serve_ns, think_ns, burst, pause_ns, batch (0 = one per CPU), batch_run_ns, batch_sleep_ns\n\
    Model --param keys: slice_ns (750000), ipi_ns (2000), switch_ns (3000), tick_ns (1000000, 0 = off), \
    jitter_pct (20), noise_pct (2), noise_ns (30000).\n\
    Limits: times (*_ns) at most 10000000000 (10 s); counts, and the tasks a run creates, at \
    most 65536."
)]
pub struct SimArgs {
    /// The workload to simulate.
    #[arg(long, value_name = "WORKLOAD",
          value_parser = clap::builder::PossibleValuesParser::new(WORKLOAD_NAMES))]
    pub workload: String,

    /// Machine shape NODESxLLCSxCORESxTHREADS (default 2x1x2x2; softirq-rr 2x1x32x1).
    #[arg(long, value_name = "NxLxCxT")]
    pub topology: Option<String>,

    /// Policy preset of the base setting.
    #[arg(long, value_name = "PRESET", default_value = "mainline",
          value_parser = clap::builder::PossibleValuesParser::new(PRESET_NAMES))]
    pub preset: String,

    /// Override one policy flag of the base setting, KEY=VALUE (repeatable).
    #[arg(long = "set", value_name = "KEY=VALUE")]
    pub set: Vec<String>,

    /// Another setting to run on the same seed, shown side by side (repeatable).
    #[arg(long, value_name = "FLAGSET")]
    pub compare: Vec<String>,

    /// Simulated seconds to run (default 0.05).
    #[arg(long, value_name = "SECS")]
    pub seconds: Option<f64>,

    /// Stop after this many events as well.
    #[arg(long, value_name = "N")]
    pub events: Option<u64>,

    /// Seed of the simulation's random generator.
    #[arg(long, default_value_t = 1)]
    pub seed: u64,

    /// Workload or model parameter KEY=VALUE (repeatable); see the list above.
    #[arg(long = "param", value_name = "KEY=VALUE")]
    pub param: Vec<String>,

    /// Print the reports as a JSON array.
    #[arg(long)]
    pub json: bool,
}

/// Applies a `--compare` FLAGSET to `base`: comma-separated `KEY=VALUE` flags, `preset=P`
/// or a bare preset name (which replaces the base preset, keeping the base's `--set`
/// overrides under the FLAGSET's own).
pub fn apply_flagset(
    base_preset: &str,
    base_set: &[String],
    flagset: &str,
) -> Result<Config, String> {
    let mut preset = base_preset.to_string();
    let mut sets: Vec<String> = Vec::new();
    for item in flagset.split(',').map(str::trim).filter(|s| !s.is_empty()) {
        if item == "base" {
            continue;
        }
        match item.split_once('=') {
            Some(("preset", p)) => preset = p.trim().to_string(),
            Some(_) => sets.push(item.to_string()),
            None if PRESET_NAMES.contains(&item) => preset = item.to_string(),
            None => {
                return Err(format!(
                    "--compare {flagset}: '{item}' is neither KEY=VALUE nor a preset ({})",
                    PRESET_NAMES.join(", ")
                ));
            }
        }
    }
    let all: Vec<String> = base_set.iter().cloned().chain(sets).collect();
    Config::from_preset_with(&preset, &all).map_err(|e| format!("--compare {flagset}: {e}"))
}

/// Builds the specs of a `sim` command line: the base setting first, then one per
/// `--compare`.
pub fn specs_from_args(a: &SimArgs) -> Result<Vec<SimSpec>, String> {
    let mut workload = Workload::by_name(&a.workload)
        .ok_or_else(|| format!("--workload: unknown workload '{}'", a.workload))?;
    let shape = match &a.topology {
        Some(t) => crate::policy::parse_shape(t).map_err(|e| format!("--topology: {e}"))?,
        None => workload.default_shape(),
    };
    let config = Config::from_preset_with(&a.preset, &a.set).map_err(|e| e.to_string())?;
    let duration_ns = match a.seconds {
        Some(s) if s.is_finite() && s > 0.0 && s <= 3600.0 => (s * 1e9) as u64,
        Some(s) => return Err(format!("--seconds: {s} is outside (0, 3600]")),
        None => 50_000_000,
    };
    let mut base = SimSpec {
        label: "base".into(),
        workload: workload.clone(),
        shape,
        config,
        seed: a.seed,
        duration_ns,
        max_events: a.events.unwrap_or(0),
        model: ModelParams::default(),
    };
    for p in &a.param {
        base.set_param(p)?;
    }
    workload = base.workload.clone();
    let _ = workload;
    let mut specs = vec![base.clone()];
    for f in &a.compare {
        let config = apply_flagset(&a.preset, &a.set, f)?;
        specs.push(SimSpec {
            label: f.clone(),
            config,
            ..base.clone()
        });
    }
    Ok(specs)
}

/// Entry point of the subcommand.
pub fn run(a: SimArgs) -> anyhow::Result<()> {
    let specs = specs_from_args(&a).map_err(anyhow::Error::msg)?;
    let mut reports = Vec::new();
    for s in &specs {
        match try_run_workload(s) {
            Ok(r) => reports.push(r),
            Err(e) => bail!("{e}"),
        }
    }
    if a.json {
        crate::explain::emit(&format!("{}\n", serde_json::to_string_pretty(&reports)?))
    } else {
        crate::explain::emit(&render_table(&reports))
    }
}
