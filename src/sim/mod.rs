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
    let footprint = check_footprint(spec, crate::heap::budget())?;
    run_within(spec, &footprint)
}

/// `spec`'s [`world::footprint`], or the line refusing it when that is more than `budget`.
pub fn check_footprint(
    spec: &SimSpec,
    budget: crate::heap::Budget,
) -> Result<world::Footprint, String> {
    let footprint = world::footprint(spec);
    let mib = |b: u64| b.div_ceil(1 << 20);
    if footprint.bytes > budget.bytes || footprint.largest_block > budget.largest_block {
        return Err(format!(
            "{}: this run would hold about {} MiB in blocks of up to {} MiB ({} CPUs, {} \
             tasks, up to {} wake-up latencies kept), more than {}, {}; shorten --seconds or \
             bound the run with --events",
            spec.workload.name(),
            mib(footprint.bytes),
            mib(footprint.largest_block),
            footprint.cpus,
            footprint.tasks,
            footprint.wakeups,
            budget.limit(),
            budget.whose
        ));
    }
    Ok(footprint)
}

/// Runs `spec` in the room `footprint` plans; a run that wakes tasks more often than it
/// planned for stops, with an error.
fn run_within(spec: &SimSpec, footprint: &world::Footprint) -> Result<SimReport, String> {
    let world = world::World::new(spec, footprint)?;
    let raw = world.run(spec.duration_ns, spec.max_events);
    if raw.over_footprint {
        return Err(format!(
            "{}: the run woke tasks more often than the {} wake-ups it set room aside for, \
             at {:.3} ms of simulated time; shorten --seconds or bound the run with --events",
            spec.workload.name(),
            footprint.wakeups,
            raw.now_ns as f64 / 1e6
        ));
    }
    Ok(SimReport::new(spec, raw))
}

/// Simulate a workload through the placement engine, per flag setting.
#[derive(Debug, Clone, clap::Args)]
#[command(
    long_about = "Run a deterministic discrete-event simulation of a synthetic \
    workload through the placement engine and report wake-ups, the wake-affine rate, \
    migrations (cross-LLC, cross-node), the recent_used_cpu hit rate, idle-core hits, \
    newly-idle pulls and a wake-to-run latency proxy. --compare adds columns (at most 64): \
    each FLAGSET is the base policy (--preset, --set) plus comma-separated KEY=VALUE flags \
    and/or one preset name, e.g. --compare sync_requires_task_waker=true --compare v5.10,recent_used=prev.\n\n\
    Workloads and their --param keys (defaults in parentheses):\n  \
    pipe-rings: rings (0 = one per CPU), ring_size (2), work_ns (2000), tail_ns (1000)\n  \
    hackbench: groups (2), fds (8), loops (20), mode (pipe|socket), capacity (16)\n  \
    softirq-rr: flows (1), work_ns (5000), rtt_ns (20000), hogs (true); default topology 2x1x32x1\n  \
    tbench-like: pairs (0 = one per two CPUs), client_ns (6000), server_ns (8000), tail_ns (2000), task_context (false)\n  \
    newidle-burst: pairs (0 = one per CPU), serve_ns, think_ns, burst, pause_ns, batch (0 = one per CPU), batch_run_ns, batch_sleep_ns\n\
    Model --param keys: slice_ns (750000), ipi_ns (2000), switch_ns (3000), tick_ns (1000000, 0 = off), \
    jitter_pct (20), noise_pct (2), noise_ns (30000).\n\
    Limits: times (*_ns) at most 10000000000 (10 s); counts, and the tasks a run creates, at \
    most 65536; what a run holds (its CPUs, its tasks, and the latency of every wake-up, \
    estimated before it starts) at most 1 GiB, or 32 MiB in blocks of at most 16 MiB where \
    scx_wakelab runs it on its own fixed heap, without scx_wakelab-offline beside it."
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

/// The most `--compare` settings of one `sim`: each is a run, one after the other, and a
/// column of the table; their reports are all held until the table is printed, and the
/// argument list could otherwise name a hundred thousand.
pub const MAX_COMPARE: usize = 64;

/// Applies a `--compare` FLAGSET to `base`: comma-separated `KEY=VALUE` flags, and at most
/// one `preset=P` or bare preset name (which replaces the base preset, keeping the base's
/// `--set` overrides under the FLAGSET's own).  A second preset is refused rather than
/// taken over the first: each column is one setting, and two presets are two columns.
pub fn apply_flagset(
    base_preset: &str,
    base_set: &[String],
    flagset: &str,
) -> Result<Config, String> {
    use crate::exit::quote;
    let mut preset = base_preset.to_string();
    let mut named: Option<&str> = None;
    let mut sets: Vec<String> = Vec::new();
    for item in flagset.split(',').map(str::trim).filter(|s| !s.is_empty()) {
        if item == "base" {
            continue;
        }
        let p = match item.split_once('=') {
            Some(("preset", p)) => p.trim(),
            Some(_) => {
                sets.push(item.to_string());
                continue;
            }
            None if PRESET_NAMES.contains(&item) => item,
            None => {
                return Err(format!(
                    "--compare {}: {} is neither KEY=VALUE nor a preset ({})",
                    quote(flagset),
                    quote(item),
                    PRESET_NAMES.join(", ")
                ));
            }
        };
        if let Some(first) = named {
            return Err(format!(
                "--compare {}: names two presets, {} and {}; a setting has one (give each \
                 its own --compare)",
                quote(flagset),
                quote(first),
                quote(p)
            ));
        }
        named = Some(p);
        preset = p.to_string();
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
    if a.compare.len() > MAX_COMPARE {
        return Err(format!(
            "--compare: {} settings; at most {MAX_COMPARE} beside the base (each is a run, and \
             a column of the table)",
            a.compare.len()
        ));
    }
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::heap::{Budget, FIXED_HEAP_BUDGET, FIXED_HEAP_LARGEST_BLOCK};
    use crate::policy::tests_alloc::peak_fixed_heap_bytes;

    fn spec(workload: &str, shape: &str, us: u64, params: &[&str]) -> SimSpec {
        let mut s = SimSpec::new(Workload::by_name(workload).unwrap());
        s.shape = crate::policy::parse_shape(shape).unwrap();
        s.duration_ns = us * 1_000;
        for p in params {
            s.set_param(p).unwrap();
        }
        s
    }

    const FIXED: Budget = Budget {
        bytes: FIXED_HEAP_BUDGET,
        largest_block: FIXED_HEAP_LARGEST_BLOCK,
        whose: "the fixed heap",
    };

    /// The estimate covers what a run holds (in the fixed heap's blocks), and the wake-ups
    /// it keeps, for every workload, the widest jitter and the shortest bursts.
    #[test]
    fn the_footprint_covers_what_a_run_holds() {
        let specs = [
            spec("pipe-rings", "2x1x2x2", 5000, &["jitter_pct=100"]),
            spec(
                "pipe-rings",
                "1x1x16x1",
                20,
                &["work_ns=1", "tail_ns=0", "ring_size=3"],
            ),
            spec("hackbench", "1x1x16x1", 1000, &["groups=32", "fds=16"]),
            spec(
                "hackbench",
                "1x1x4x1",
                50_000,
                &["groups=1", "fds=4", "loops=10"],
            ),
            spec(
                "tbench-like",
                "2x2x4x2",
                1000,
                &["jitter_pct=100", "client_ns=1"],
            ),
            spec(
                "softirq-rr",
                "2x1x8x1",
                1000,
                &["flows=8", "rtt_ns=1", "jitter_pct=100"],
            ),
            spec(
                "newidle-burst",
                "1x1x8x1",
                2000,
                &["jitter_pct=100", "think_ns=1"],
            ),
            spec(
                "newidle-burst",
                "1x1x8x1",
                2000,
                &["pause_ns=1", "burst=1", "batch_run_ns=1"],
            ),
            spec(
                "softirq-rr",
                "2x1x2x1",
                100,
                &["flows=64", "work_ns=1", "rtt_ns=1", "hogs=false"],
            ),
        ];
        let mut table = String::new();
        for s in &specs {
            let fp = world::footprint(s);
            let (r, peak) = peak_fixed_heap_bytes(|| run_within(s, &fp));
            let r = r.unwrap_or_else(|e| panic!("{}: {e}", s.workload.name()));
            let params: Vec<String> = s
                .workload
                .params()
                .iter()
                .map(|(k, v)| format!("{k}={v}"))
                .collect();
            table.push_str(&format!(
                "| {} {} | {} | {} | {} | {} | {} | {} |\n",
                s.workload.name(),
                params.join(" "),
                fp.cpus,
                s.duration_ns / 1000,
                fp.wakeups,
                r.latency.samples,
                fp.bytes >> 10,
                peak >> 10
            ));
            assert!(
                r.latency.samples <= fp.wakeups,
                "{}: {} samples, {fp:?}",
                s.workload.name(),
                r.latency.samples
            );
            assert!(
                peak <= fp.bytes,
                "{}: held {peak} bytes, estimated {fp:?}",
                s.workload.name()
            );
        }
        // docs/benchmarks/large-inputs.md: cargo test --lib footprint_covers -- --nocapture
        eprintln!(
            "| workload | CPUs | us | wake-ups estimated | kept | KiB estimated | KiB held |\n\
             |---|---|---|---|---|---|---|\n{table}"
        );
    }

    #[test]
    fn a_run_over_its_budget_is_refused_at_the_limit() {
        let s = spec("pipe-rings", "1x1x64x1", 200_000, &[]);
        let fp = check_footprint(&s, heap_of(u64::MAX)).unwrap();
        // At the limit accepted, one byte less refused, with one line naming both.
        assert_eq!(check_footprint(&s, heap_of(fp.bytes)).unwrap(), fp);
        let e = check_footprint(&s, heap_of(fp.bytes - 1)).unwrap_err();
        assert!(
            e.starts_with("pipe-rings: this run would hold about"),
            "{e}"
        );
        assert!(
            e.contains("64 CPUs") && e.contains("--seconds") && !e.contains('\n'),
            "{e}"
        );
        // A run of 0.2 s on 64 CPUs does not fit the fixed heap; on the system allocator
        // it does, and an hour of it does not.
        assert!(check_footprint(&s, FIXED).is_err());
        check_footprint(&s, crate::heap::budget()).unwrap();
        let hour = spec("pipe-rings", "2x1x2x2", 3_600_000_000, &[]);
        let e = check_footprint(&hour, crate::heap::budget()).unwrap_err();
        assert!(
            e.contains("more than 1024 MiB, what the offline commands allow"),
            "{e}"
        );
        // --events bounds the wake-ups, and so the run.
        let bounded = SimSpec {
            max_events: 1_000_000,
            ..hour
        };
        check_footprint(&bounded, crate::heap::budget()).unwrap();
        // As many tasks as a run may have do not fit the fixed heap either.
        let many = spec("hackbench", "2x1x2x2", 1000, &["groups=2048", "fds=16"]);
        many.check_size().unwrap();
        let e = check_footprint(&many, FIXED).unwrap_err();
        assert!(
            e.contains("65544 tasks") && e.contains("the fixed heap"),
            "{e}"
        );
    }

    /// --help states the budgets the code enforces.
    #[test]
    fn help_states_the_budgets() {
        let help = crate::explain::long_help_of::<SimArgs>("sim");
        for said in [
            format!("at most {} GiB", crate::heap::SYSTEM_HEAP_BUDGET >> 30),
            format!("or {} where scx_wakelab runs it", FIXED.limit()),
            format!("--compare adds columns (at most {MAX_COMPARE})"),
        ] {
            assert!(help.contains(&said), "--help lacks {said:?}: {help}");
        }
    }

    #[test]
    fn compare_settings_are_bounded() {
        use clap::{Args, Command, FromArgMatches};
        let args = |n: usize| {
            let mut argv = vec!["sim", "--workload", "pipe-rings"];
            argv.extend(std::iter::repeat_n(["--compare", "v5.10"], n).flatten());
            let m = SimArgs::augment_args(Command::new("sim"))
                .try_get_matches_from(argv)
                .unwrap();
            SimArgs::from_arg_matches(&m).unwrap()
        };
        assert_eq!(
            specs_from_args(&args(MAX_COMPARE)).unwrap().len(),
            MAX_COMPARE + 1
        );
        let e = specs_from_args(&args(MAX_COMPARE + 1)).unwrap_err();
        assert!(e.starts_with("--compare: 65 settings; at most 64"), "{e}");
    }

    #[test]
    fn a_flagset_names_one_preset_at_most() {
        let c = apply_flagset("mainline", &[], "v5.10,recent_used=prev").unwrap();
        assert_eq!(
            c,
            Config::from_preset_with("v5.10", &["recent_used=prev"]).unwrap()
        );
        for two in [
            "v5.10,v6.1.y",
            "preset=v5.10,v6.1.y",
            "v5.10,preset=v5.10",
            "preset=v5.15,wa_idle=false,preset=v6.12",
        ] {
            let e = apply_flagset("mainline", &[], two).unwrap_err();
            assert!(e.contains("names two presets"), "{two}: {e}");
            assert!(e.starts_with(&format!("--compare '{two}': ")), "{e}");
        }
        let e = apply_flagset("mainline", &[], "v5.10,v6.1.y").unwrap_err();
        assert!(e.contains("'v5.10' and 'v6.1.y'"), "{e}");
    }

    fn heap_of(bytes: u64) -> Budget {
        Budget {
            bytes,
            largest_block: bytes,
            whose: "a test's budget",
        }
    }

    /// A run that wakes tasks more often than it planned for stops with one line, instead
    /// of growing past what was set aside.
    #[test]
    fn a_run_past_its_planned_wake_ups_stops() {
        let s = spec("pipe-rings", "2x1x2x2", 5000, &[]);
        let fp = world::Footprint {
            wakeups: 100,
            ..world::footprint(&s)
        };
        let e = run_within(&s, &fp).unwrap_err();
        assert!(
            e.starts_with("pipe-rings: the run woke tasks more often than the 100 wake-ups"),
            "{e}"
        );
    }
}
