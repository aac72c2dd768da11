//! What a run reports, and the side-by-side table of `--compare`.

use std::fmt::Write as _;

use serde::Serialize;

use crate::policy::Counters;

use super::spec::SimSpec;
use super::world::Raw;

/// Migrations by how far they moved.  `cross_llc` is another LLC of the same node;
/// `cross_node` another node (so on one-LLC-per-node machines every LLC change is
/// `cross_node`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
pub struct MigrationCounts {
    /// Moves to any other CPU.
    pub total: u64,
    pub smt_sibling: u64,
    pub same_llc: u64,
    pub cross_llc: u64,
    pub cross_node: u64,
}

impl MigrationCounts {
    fn from_raw(d: &[u64; 5]) -> Self {
        MigrationCounts {
            total: d[1] + d[2] + d[3] + d[4],
            smt_sibling: d[1],
            same_llc: d[2],
            cross_llc: d[3],
            cross_node: d[4],
        }
    }
}

#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize)]
pub struct Migrations {
    /// Wake-up placements on another CPU than prev (`nr_wakeups_migrate`).
    pub wakeup: MigrationCounts,
    /// Tasks pulled by newly-idle balancing.
    pub newidle_pull: MigrationCounts,
    /// Tasks pulled by the periodic balance.
    pub tick_pull: MigrationCounts,
    /// All of the above.
    pub cross_llc: u64,
    pub cross_node: u64,
}

#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize)]
pub struct NewIdleStats {
    /// Newly-idle balance attempts (a CPU ran out of work).
    pub balance: u64,
    pub pulls: u64,
    /// Seed 2: skipped because a wake-up was pending.
    pub skipped_pending: u64,
    /// Pulled although a wake-up was pending (what seed 2 prevents).
    pub pulled_despite_pending: u64,
    pub nothing_to_pull: u64,
}

/// Wake-to-run latency (the time from try_to_wake_up to running), in microseconds.
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize)]
pub struct Latency {
    pub samples: u64,
    pub mean_us: f64,
    pub p50_us: f64,
    pub p99_us: f64,
    pub max_us: f64,
}

/// What the recent_used_cpu block of select_idle_sibling() did over a run.
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize)]
pub struct RecentUsedStats {
    /// recent_used_cpu returned (search-target mode: made the scan target).
    pub hits: u64,
    /// select_idle_sibling() calls that got past the target, prev and kthread checks to
    /// the block.
    pub reached: u64,
    /// Misses as the policy counts them: recent_used_cpu was a distinct CPU (not prev,
    /// not the target) but not usable.
    pub misses: u64,
    /// `hits / reached`: Mel Gorman's "SIS Recent Used Hit" ratio, where every pass
    /// through the block that does not return counts as a miss.  None with
    /// `recent_used=off`.
    pub hit_rate: Option<f64>,
    /// `hits / (hits + misses)` with the policy's distinct-CPU misses.
    pub distinct_hit_rate: Option<f64>,
}

impl RecentUsedStats {
    /// From the placement counters summed over a run; `off`: the policy has no block.
    fn of(c: &Counters, off: bool) -> RecentUsedStats {
        let hits = c.sis_recent_used_hit + c.sis_recent_used_target;
        let reached = c
            .sis_search
            .saturating_sub(c.sis_target_hit + c.sis_prev_hit + c.sis_kthread_stack_hit);
        RecentUsedStats {
            hits,
            reached,
            misses: c.sis_recent_used_miss,
            hit_rate: if off { None } else { ratio(hits, reached) },
            distinct_hit_rate: ratio(hits, hits + c.sis_recent_used_miss),
        }
    }
}

/// One run's results.
#[derive(Clone, Debug, Serialize)]
pub struct SimReport {
    pub label: String,
    /// The policy, as its nearest preset plus differing flags.
    pub policy: String,
    pub workload: String,
    pub params: Vec<(String, String)>,
    pub topology: String,
    pub seed: u64,
    pub sim_ms: f64,
    pub events: u64,
    pub tasks: usize,
    /// A finite workload (hackbench) completed before the time limit.
    pub finished: bool,
    /// Workload progress: ring hops, messages read, requests served.
    pub work_units: u64,
    pub work_per_ms: f64,
    /// Every wake-up, however it was handled.
    pub wakeups: u64,
    /// Wake-ups placed by the engine (`select_task_rq`).
    pub placed: u64,
    /// Wake-ups of tasks still queued by delayed dequeue, requeued in place.
    pub requeued_delayed: u64,
    /// Wake-ups of tasks still in schedule() on their CPU, sent back to it.
    pub wakelist_on_cpu: u64,
    pub affine: u64,
    pub affine_attempts: u64,
    /// `nr_wakeups_affine / nr_wakeups_affine_attempts`.
    pub affine_rate: Option<f64>,
    /// `nr_wakeups_local / placed`.
    pub local_rate: Option<f64>,
    pub migrations: Migrations,
    /// The recent_used_cpu block of select_idle_sibling().
    pub recent_used: RecentUsedStats,
    pub idle_core_hits: u64,
    pub newidle: NewIdleStats,
    pub latency: Latency,
    /// The placement counters summed over every engine-placed wake-up.
    pub wake_counters: Counters,
    /// The counters of every newly-idle decision.
    pub newidle_counters: Counters,
}

fn ratio(a: u64, b: u64) -> Option<f64> {
    (b > 0).then(|| a as f64 / b as f64)
}

fn percentile(sorted: &[u64], p: f64) -> u64 {
    if sorted.is_empty() {
        return 0;
    }
    let i = ((sorted.len() as f64 - 1.0) * p).round() as usize;
    sorted[i.min(sorted.len() - 1)]
}

impl SimReport {
    pub(crate) fn new(spec: &SimSpec, mut raw: Raw) -> SimReport {
        let c = raw.wake_counters;
        let ni = raw.newidle_counters;
        let wake = MigrationCounts::from_raw(&raw.wake_migrations);
        let newidle = MigrationCounts::from_raw(&raw.newidle_migrations);
        let tick = MigrationCounts::from_raw(&raw.tick_migrations);
        raw.latencies.sort_unstable();
        let l = &raw.latencies;
        let us = |ns: u64| ns as f64 / 1000.0;
        let latency = Latency {
            samples: l.len() as u64,
            mean_us: if l.is_empty() {
                0.0
            } else {
                l.iter().map(|&x| x as f64).sum::<f64>() / l.len() as f64 / 1000.0
            },
            p50_us: us(percentile(l, 0.50)),
            p99_us: us(percentile(l, 0.99)),
            max_us: us(l.last().copied().unwrap_or(0)),
        };
        let spec_policy = crate::policy::policy_spec_of(&spec.config);
        let mut policy = spec_policy.preset.clone();
        for (k, v) in &spec_policy.set {
            let _ = write!(policy, " {k}={v}");
        }
        let s = spec.shape;
        let sim_ms = raw.now_ns as f64 / 1e6;
        SimReport {
            label: spec.label.clone(),
            policy,
            workload: spec.workload.name().into(),
            params: spec
                .workload
                .params()
                .into_iter()
                .map(|(k, v)| (k.to_string(), v))
                .collect(),
            topology: format!(
                "{}x{}x{}x{} ({} CPUs)",
                s.nodes,
                s.llcs_per_node,
                s.cores_per_llc,
                s.threads,
                s.nodes * s.llcs_per_node * s.cores_per_llc * s.threads
            ),
            seed: spec.seed,
            sim_ms,
            events: raw.events,
            tasks: raw.tasks,
            finished: raw.finished,
            work_units: raw.work_units,
            work_per_ms: if sim_ms > 0.0 {
                raw.work_units as f64 / sim_ms
            } else {
                0.0
            },
            wakeups: raw.wakeups,
            placed: raw.placed,
            requeued_delayed: raw.requeued_delayed,
            wakelist_on_cpu: raw.wakelist_on_cpu,
            affine: c.nr_wakeups_affine,
            affine_attempts: c.nr_wakeups_affine_attempts,
            affine_rate: ratio(c.nr_wakeups_affine, c.nr_wakeups_affine_attempts),
            local_rate: ratio(c.nr_wakeups_local, raw.placed),
            migrations: Migrations {
                wakeup: wake,
                newidle_pull: newidle,
                tick_pull: tick,
                cross_llc: wake.cross_llc + newidle.cross_llc + tick.cross_llc,
                cross_node: wake.cross_node + newidle.cross_node + tick.cross_node,
            },
            recent_used: RecentUsedStats::of(
                &c,
                spec.config.recent_used == crate::policy::RecentUsedMode::Off,
            ),
            idle_core_hits: c.sis_idle_core_hit,
            newidle: NewIdleStats {
                balance: ni.newidle_balance,
                pulls: ni.newidle_pulls,
                skipped_pending: ni.newidle_pull_skipped_pending,
                pulled_despite_pending: ni.newidle_pull_despite_pending,
                nothing_to_pull: ni.newidle_nothing_to_pull,
            },
            latency,
            wake_counters: c,
            newidle_counters: ni,
        }
    }
}

/// A rate beside the counts it is made of: "45.0% (9/20)".
fn rate_of(rate: Option<f64>, n: u64, of: u64) -> String {
    format!("{} ({n}/{of})", pct(rate))
}

fn pct(r: Option<f64>) -> String {
    r.map_or("-".into(), |x| format!("{:.2}%", x * 100.0))
}

/// The `--compare` table: one column per setting, one row per metric.
pub fn render_table(reports: &[SimReport]) -> String {
    let Some(first) = reports.first() else {
        return String::new();
    };
    let mut o = String::new();
    let params: Vec<String> = first
        .params
        .iter()
        .map(|(k, v)| format!("{k}={v}"))
        .collect();
    let _ = writeln!(
        o,
        "workload {} ({}) on {}, seed {}, {:.1} ms simulated{}",
        first.workload,
        params.join(" "),
        first.topology,
        first.seed,
        first.sim_ms,
        if first.finished { " (finished)" } else { "" }
    );
    type Row = (&'static str, Box<dyn Fn(&SimReport) -> String>);
    let rows: Vec<Row> = vec![
        ("policy", Box::new(|r: &SimReport| r.policy.clone())),
        ("events", Box::new(|r: &SimReport| r.events.to_string())),
        (
            "work units / ms",
            Box::new(|r: &SimReport| format!("{:.1}", r.work_per_ms)),
        ),
        ("wakeups", Box::new(|r: &SimReport| r.wakeups.to_string())),
        (
            "  placed by the engine",
            Box::new(|r: &SimReport| r.placed.to_string()),
        ),
        (
            "  requeued (delayed)",
            Box::new(|r: &SimReport| r.requeued_delayed.to_string()),
        ),
        (
            "  back to prev (on cpu)",
            Box::new(|r: &SimReport| r.wakelist_on_cpu.to_string()),
        ),
        (
            "affine rate",
            Box::new(|r: &SimReport| rate_of(r.affine_rate, r.affine, r.affine_attempts)),
        ),
        ("local rate", Box::new(|r: &SimReport| pct(r.local_rate))),
        (
            "wake-up migrations",
            Box::new(|r: &SimReport| r.migrations.wakeup.total.to_string()),
        ),
        (
            "  cross-LLC / cross-node",
            Box::new(|r: &SimReport| {
                format!(
                    "{} / {}",
                    r.migrations.wakeup.cross_llc, r.migrations.wakeup.cross_node
                )
            }),
        ),
        (
            "pulls newidle / tick",
            Box::new(|r: &SimReport| {
                format!(
                    "{} / {}",
                    r.migrations.newidle_pull.total, r.migrations.tick_pull.total
                )
            }),
        ),
        (
            "all cross-LLC / cross-node",
            Box::new(|r: &SimReport| {
                format!("{} / {}", r.migrations.cross_llc, r.migrations.cross_node)
            }),
        ),
        (
            "recent-used hits / reached",
            Box::new(|r: &SimReport| {
                rate_of(
                    r.recent_used.hit_rate,
                    r.recent_used.hits,
                    r.recent_used.reached,
                )
            }),
        ),
        (
            "  hits / (hits + distinct misses)",
            Box::new(|r: &SimReport| {
                rate_of(
                    r.recent_used.distinct_hit_rate,
                    r.recent_used.hits,
                    r.recent_used.hits + r.recent_used.misses,
                )
            }),
        ),
        (
            "idle-core hits",
            Box::new(|r: &SimReport| r.idle_core_hits.to_string()),
        ),
        (
            "newidle balance",
            Box::new(|r: &SimReport| r.newidle.balance.to_string()),
        ),
        (
            "  pulls / skipped pending",
            Box::new(|r: &SimReport| {
                format!("{} / {}", r.newidle.pulls, r.newidle.skipped_pending)
            }),
        ),
        (
            "  pulled despite pending",
            Box::new(|r: &SimReport| r.newidle.pulled_despite_pending.to_string()),
        ),
        (
            "latency mean / p99 (us)",
            Box::new(|r: &SimReport| format!("{:.1} / {:.1}", r.latency.mean_us, r.latency.p99_us)),
        ),
    ];
    let mut cells: Vec<Vec<String>> = Vec::new();
    let mut header = vec![String::from("")];
    header.extend(reports.iter().map(|r| r.label.clone()));
    cells.push(header);
    for (name, f) in &rows {
        let mut row = vec![name.to_string()];
        row.extend(reports.iter().map(f));
        cells.push(row);
    }
    let cols = cells[0].len();
    let widths: Vec<usize> = (0..cols)
        .map(|i| {
            cells
                .iter()
                .map(|r| r[i].chars().count())
                .max()
                .unwrap_or(0)
        })
        .collect();
    for (ri, row) in cells.iter().enumerate() {
        let mut line = String::new();
        for (i, cell) in row.iter().enumerate() {
            if i == 0 {
                let _ = write!(line, "{:<w$}", cell, w = widths[0]);
            } else {
                let _ = write!(line, " | {:>w$}", cell, w = widths[i]);
            }
        }
        let _ = writeln!(o, "{}", line.trim_end());
        if ri == 0 {
            let total: usize = widths.iter().sum::<usize>() + 3 * (cols - 1);
            let _ = writeln!(o, "{}", "-".repeat(total));
        }
    }
    o
}
