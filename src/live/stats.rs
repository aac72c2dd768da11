//! Counters of the live scheduler, each declared once with its description
//! (with_counters!), and their text form.
//!
//! The scheduling thread owns a LiveMetrics and copies it into a shared one
//! every 100 ms (agent.rs, publish); the socket (socket.rs) serves that copy
//! through scx_stats, described by the metadata `#[derive(Stats)]` builds
//! from the same list, to `scx_wakelab stats`, to `--stats`' printer and to
//! the supervisor's liveness check, so the scheduling thread never writes to
//! a terminal or a socket.

use std::fmt::Write as _;

use std::collections::BTreeMap;

use scx_stats::{
    Meta, StatsData, StatsField, StatsFieldAttrs, StatsKind, StatsMeta, StatsServerData,
    StatsStructAttrs,
};
use scx_stats_derive::Stats;
use serde::{Deserialize, Serialize};

use scx_wakelab::policy::Counters;

pub const LAT_BUCKETS: usize = 40;

/// The hops of a wake-up through the agent (bpf/intf.h, enum wl_hop), in order,
/// with the names `stats --json` and the lab use.
pub const HOPS: [&str; 5] = [
    "select_enqueue",
    "enqueue_read",
    "read_commit",
    "commit_apply",
    "apply_run",
];
/// The hops the agent times itself; BPF times the others.
pub const HOP_ENQUEUE_READ: usize = 1;
pub const HOP_READ_COMMIT: usize = 2;

/// log2 histogram bucket of `ns` (bucket i: [2^i, 2^(i+1)) ns), as BPF's log2_bucket().
pub fn log2_bucket(ns: u64) -> usize {
    ((63 - ns.max(1).leading_zeros()) as usize).min(LAT_BUCKETS - 1)
}

/// Percentile (0..100) of a log2 histogram, in ns (the bucket's upper bound).
pub fn hist_percentile_ns(hist: &[u64], pct: f64) -> Option<u64> {
    let total: u64 = hist.iter().sum();
    if total == 0 {
        return None;
    }
    let want = ((total as f64) * pct / 100.0).ceil().max(1.0) as u64;
    let mut seen = 0;
    for (i, n) in hist.iter().enumerate() {
        seen += n;
        if seen >= want {
            return Some(2u64 << i);
        }
    }
    None
}

fn hist_delta(new: &[u64], old: &[u64]) -> Vec<u64> {
    new.iter()
        .enumerate()
        .map(|(i, n)| n.saturating_sub(old.get(i).copied().unwrap_or(0)))
        .collect()
}

/// Every counter of `scx_wakelab stats`, once, with its description: the
/// agent's own, then those BPF keeps in its `.bss` (bpf/counters.bpf.h declares
/// each as `volatile u64 NAME`; protocol.rs copies them by this list). Calls
/// `$then! { agent: { NAME: "desc", ... } bpf: { NAME: "desc", ... } }`, so
/// that each user of the list (the struct below, protocol::read_counters)
/// takes what it needs. A new counter is one line here.
macro_rules! with_counters {
    ($then:ident) => {
        $then! {
            agent: {
                nr_decisions: "Placements the agent decided.",
                delayed_requeues: "Still-delayed sleepers woken and requeued in place (no placement).",
                sleep_events: "Sleep events received (delayed-dequeue emulation).",
                decision_ring_full: "Times the decision ring had no room (decisions kept for later).",
                config_changes: "Runtime flag changes applied (scx_wakelab set).",
                trace_dropped: "Trace records lost because the writer fell behind (--trace).",
                task_evictions: "Tasks forgotten early because the per-task table was full (--task-table-size).",
                agent_cpu_ns: "CPU time of the scheduling thread (the agent proper), ns.",
                process_cpu_ns: "CPU time of the whole process (agent, stats, control, trace threads), ns.",
                agent_voluntary_switches: "The scheduling thread's voluntary context switches (getrusage RUSAGE_THREAD): the agent's own, not the workload's.",
                agent_involuntary_switches: "The scheduling thread's involuntary context switches (getrusage RUSAGE_THREAD).",
                agent_spin_ns: "Time the scheduling thread spent polling for new wake-ups after a batch (--agent-spin-us), ns: part of agent_cpu_ns.",
                apply_retries: "Fast-lane apply calls that moved nothing new (a retry for decisions whose task was not parked yet).",
                nr_queued_to_agent: "BPF: wake-ups sent to the agent (wl_shared.nr_ring_wakeups, read by protocol::read_counters).",
            }
            bpf: {
                nr_sleep_msgs: "BPF: sleep events sent to the agent (delayed-dequeue emulation).",
                nr_sleep_msgs_dropped: "BPF: sleep events the full ring dropped.",
                nr_agent_dispatches: "BPF: decisions of the agent that were applied.",
                nr_direct_dispatches: "BPF: tasks dispatched without the agent (the agent itself, per-CPU kthreads).",
                nr_ring_full_fallbacks: "BPF: the wakeup ring was full: the task went to the fallback queue.",
                nr_agent_stall_fallbacks: "BPF: the agent had not run for agent_stall_ns, or its oldest message was older: the task bypassed it.",
                nr_stall_rescues: "BPF: tasks already queued to a stalled agent, sent to the fallback queue without its decision.",
                nr_lost_decisions: "BPF: of the rescues, tasks rescued while the agent kept up: their decision was lost on its way. Should stay 0.",
                nr_fallback_starving: "BPF: fallback tasks taken before the CPU's own queue after waiting too long.",
                nr_stale_decisions: "BPF: decisions for an older enqueue of the task (it was requeued meanwhile).",
                nr_bounced_decisions: "BPF: the chosen CPU was invalid or outside the task's allowed CPUs: placed elsewhere.",
                nr_decisions_task_gone: "BPF: the task of a decision no longer existed.",
                nr_any_cpu_decisions: "BPF: the agent asked for any CPU.",
                nr_enqueue_without_select: "BPF: enqueues without a preceding ops.select_cpu() (pinned, requeue, ...).",
                nr_select_task_ctx: "BPF: wake-ups whose waker ran in task context (ops.select_cpu()).",
                nr_select_softirq_ctx: "BPF: wake-ups whose waker ran in softirq context.",
                nr_select_hardirq_ctx: "BPF: wake-ups whose waker ran in hardirq context.",
                nr_heartbeat_kicks: "BPF: times the heartbeat had to wake the agent.",
                nr_idle_agent_kicks: "BPF: a CPU going idle found the agent parked with work and kicked itself to run it.",
                nr_stranded_kicks: "BPF: the heartbeat kicked an idle CPU with tasks waiting (a lost wake-up). Should stay 0.",
                nr_newidle_pulls: "BPF: newly-idle pulls: a CPU with nothing to run took a task queued for another CPU.",
                nr_newidle_skipped_pending: "BPF: newly-idle pulls skipped because a wake-up was pending for the CPU (seed 2).",
                nr_newidle_pull_despite_pending: "BPF: newly-idle pulls made although a wake-up was pending (seed 2 flag off).",
                nr_newidle_nothing: "BPF: newly-idle searches that found nothing to pull.",
                nr_newidle_cache_hot: "BPF: newly-idle searches that left a cache-hot task where it waits.",
                nr_newidle_search_despite_pending: "BPF: newly-idle searches although a wake-up was pending (seed 2 flag off), pull or not.",
                nr_newidle_skipped_not_overloaded: "BPF: newly-idle balances not searched: no CPU had a task waiting (the root domain's overload flag).",
                nr_newidle_skipped_short_idle: "BPF: newly-idle balances not searched: the CPU's avg_idle is below the preset's threshold.",
                nr_idle_balance_kicks: "BPF: idle CPUs kicked by a busy CPU's tick to pull (--idle-balance).",
                nr_idle_balance_pulls: "BPF: kicked idle CPUs that pulled a task.",
                nr_idle_balance_nothing: "BPF: kicked idle CPUs that found nothing to pull.",
                nr_idle_balance_cache_hot: "BPF: kicked idle CPUs that left a cache-hot task where it waits.",
                nr_newidle_wait_own_wakee: "BPF: newly-idle pulls left undone: the CPU's own sync wakee awaits the agent.",
                nr_newidle_skipped_parked: "BPF: idle CPUs woken for a wake-up that then waited for the agent, not balancing.",
                nr_agent_runs: "BPF: times the agent started running.",
                nr_agent_migrations: "BPF: agent runs on another CPU than its last (migrations CFS would not make).",
                nr_agent_preempt_kicks: "BPF: tasks of ours preempted on the agent's CPU so that the agent could run.",
                nr_requeues_in_place: "BPF: enqueues that are not wake-ups or new tasks (slice end, preemption, a property change), kept on their CPU without the agent.",
                nr_applied_to_idle: "BPF: decisions carried out straight onto an idle CPU.",
                nr_applied_to_queue: "BPF: decisions carried out into a busy CPU's queue.",
                nr_apply_runs: "BPF: runs of apply_decisions (the fast lane).",
                nr_apply_misses: "BPF: parking-queue visits that found no decided task.",
                nr_applied_late: "BPF: decided tasks moved without the agent, by the heartbeat or a stall rescue (decision recorded before they were parked, or the agent stopped).",
                nr_handoff_msgs: "BPF: wake-ups sent to the agent from ops.select_cpu(), with a handoff slot.",
                nr_handoffs: "BPF: decisions the agent made before their task's enqueue, carried out by ops.enqueue() with no apply run.",
                nr_handoff_slot_busy: "BPF: wake-ups sent from ops.enqueue() because their handoff slot still held an uncollected decision.",
            }
        }
    };
}
pub(crate) use with_counters;

/// Declares LiveMetrics from with_counters!'s list, with `delta`.
macro_rules! live_metrics {
    (agent: { $($a:ident : $ad:tt,)* } bpf: { $($b:ident : $bd:tt,)* }) => {
        /// Counters of the live scheduler; the scx_stats `top` struct. Field
        /// order is that of `exit stats json`.
        #[derive(Clone, Debug, Default, Serialize, Deserialize, Stats)]
        #[stat(top, desc = "scx_wakelab: counters since the scheduler started")]
        #[serde(default)]
        pub struct LiveMetrics {
            $( #[doc = $ad] #[stat(desc = $ad)] pub $a: u64, )*
            $( #[doc = $bd] #[stat(desc = $bd)] pub $b: u64, )*
            /// log2 buckets (ns) of enqueue -> running on the chosen CPU.
            #[stat(desc = "log2 histogram (bucket i: [2^i, 2^(i+1)) ns) of the time from BPF's ops.enqueue() to the task running on the CPU the agent chose.")]
            pub enqueue_to_run_hist: Vec<u64>,
            /// One log2 histogram (ns) per hop of HOPS, on CLOCK_MONOTONIC.
            #[stat(desc = "One log2 histogram (ns) per hop of a wake-up, in order: select_enqueue, enqueue_read, read_commit, commit_apply, apply_run.")]
            pub hop_hist: Vec<Hist>,
            /// The placement engine's counters (schedstat names).
            #[stat(desc = "The placement engine's counters (schedstat names where the kernel has one).")]
            pub policy: PolicyCounters,
        }

        impl LiveMetrics {
            /// The names of the counters BPF keeps, in list order.
            #[cfg(test)]
            pub const BPF_COUNTERS: &'static [&'static str] = &[$(stringify!($b)),*];

            /// Counter-wise difference, for per-interval stats.
            pub fn delta(&self, old: &LiveMetrics) -> LiveMetrics {
                LiveMetrics {
                    $($a: self.$a.saturating_sub(old.$a),)*
                    $($b: self.$b.saturating_sub(old.$b),)*
                    enqueue_to_run_hist: hist_delta(&self.enqueue_to_run_hist, &old.enqueue_to_run_hist),
                    hop_hist: self
                        .hop_hist
                        .iter()
                        .enumerate()
                        .map(|(i, h)| Hist(hist_delta(h, old.hop_hist.get(i).map_or(&[], |o| o.as_slice()))))
                        .collect(),
                    policy: PolicyCounters(self.policy.diff(&old.policy)),
                }
            }
        }
    };
}

with_counters!(live_metrics);

/// A log2 histogram, serialized as a plain array of counts (bucket i:
/// [2^i, 2^(i+1)) ns). A struct of its own only for scx_stats, whose
/// metadata has no array of arrays (hop_hist).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(transparent)]
pub struct Hist(pub Vec<u64>);

impl std::ops::Deref for Hist {
    type Target = Vec<u64>;
    fn deref(&self) -> &Vec<u64> {
        &self.0
    }
}

impl std::ops::DerefMut for Hist {
    fn deref_mut(&mut self) -> &mut Vec<u64> {
        &mut self.0
    }
}

impl Meta for Hist {
    fn meta() -> StatsMeta {
        StatsMeta {
            name: "Hist".into(),
            attrs: StatsStructAttrs {
                desc: Some(
                    "A log2 histogram, sent as a plain array of u64: element i counts samples in [2^i, 2^(i+1)) ns".into(),
                ),
                ..Default::default()
            },
            fields: BTreeMap::new(),
        }
    }
}

/// The engine's Counters (the policy layer knows nothing of scx_stats),
/// serialized as they are, described by their doc comments.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(transparent)]
pub struct PolicyCounters(pub Counters);

impl std::ops::Deref for PolicyCounters {
    type Target = Counters;
    fn deref(&self) -> &Counters {
        &self.0
    }
}

impl std::ops::DerefMut for PolicyCounters {
    fn deref_mut(&mut self) -> &mut Counters {
        &mut self.0
    }
}

impl Meta for PolicyCounters {
    fn meta() -> StatsMeta {
        let fields = Counters::FIELD_NAMES
            .iter()
            .zip(Counters::DESCRIPTIONS)
            .map(|(name, desc)| {
                let field = StatsField {
                    data: StatsData::Datum(StatsKind::U64),
                    attrs: StatsFieldAttrs {
                        desc: Some(desc.trim().to_string()),
                        ..Default::default()
                    },
                };
                (name.to_string(), field)
            })
            .collect();
        StatsMeta {
            name: "PolicyCounters".into(),
            attrs: StatsStructAttrs {
                desc: Some("The placement engine's counters".into()),
                ..Default::default()
            },
            fields,
        }
    }
}

/// Every struct `stats` sends, described: for the scx_stats server's
/// `stats_meta` and `scx_wakelab stats --describe`.
pub fn stats_metas() -> Vec<StatsMeta> {
    vec![LiveMetrics::meta(), Hist::meta(), PolicyCounters::meta()]
}

/// `scx_wakelab stats --describe`: every counter with its description, as
/// scx_stats lays them out.
pub fn describe() -> anyhow::Result<()> {
    let data = stats_metas()
        .into_iter()
        .fold(StatsServerData::<(), ()>::new(), |d, m| d.add_meta(m));
    let mut text = Vec::new();
    // From each struct no other one lists as an array (scx_stats visits those).
    data.describe_meta(&mut text, Some(&["LiveMetrics", "PolicyCounters"]))?;
    match std::io::Write::write_all(&mut std::io::stdout().lock(), &text) {
        // `| head` is a reader's choice, not a failure.
        Err(e) if e.kind() != std::io::ErrorKind::BrokenPipe => Err(e.into()),
        _ => Ok(()),
    }
}

/// Whether `got` has the JSON kind `want` has, recursively for the keys both objects
/// have: serde would also read a struct written as an array, and a client must not.
fn same_shape(want: &serde_json::Value, got: &serde_json::Value, at: &str) -> Result<(), String> {
    use serde_json::Value::{Array, Object};
    match (want, got) {
        (Object(w), Object(g)) => {
            for (k, gv) in g {
                if let Some(wv) = w.get(k) {
                    same_shape(wv, gv, k)?;
                }
            }
            Ok(())
        }
        (Object(_), _) => Err(format!("{at} is not an object")),
        (Array(_), Array(_)) => Ok(()),
        (Array(_), _) => Err(format!("{at} is not an array")),
        _ => Ok(()),
    }
}

impl LiveMetrics {
    /// From the JSON a running instance sends (`stats`): an object whose
    /// counters are numbers. Unknown or missing fields are tolerated so that
    /// client and server versions may differ; anything else is refused, not
    /// read as zeros.
    pub fn from_json(v: &serde_json::Value) -> Result<LiveMetrics, String> {
        let shape = serde_json::to_value(LiveMetrics::default()).map_err(|e| e.to_string())?;
        same_shape(&shape, v, "counters")?;
        serde_json::from_value(v.clone()).map_err(|e| e.to_string())
    }

    /// Count one sample of an agent-timed hop.
    pub fn record_hop(&mut self, hop: usize, ns: u64) {
        if self.hop_hist.len() < HOPS.len() {
            self.hop_hist.resize(HOPS.len(), Hist::default());
        }
        let row = &mut self.hop_hist[hop];
        if row.len() < LAT_BUCKETS {
            row.resize(LAT_BUCKETS, 0);
        }
        row[log2_bucket(ns)] += 1;
    }

    /// Percentile (0..100) of the enqueue->run histogram, in ns (bucket
    /// upper bound), or None when empty.
    pub fn latency_percentile_ns(&self, pct: f64) -> Option<u64> {
        hist_percentile_ns(&self.enqueue_to_run_hist, pct)
    }

    /// One stats line block, scx style.
    pub fn format(&self, secs: f64) -> String {
        let mut s = String::new();
        let rate = |n: u64| if secs > 0.0 { n as f64 / secs } else { 0.0 };
        let pct = |n: u64, d: u64| {
            if d > 0 {
                100.0 * n as f64 / d as f64
            } else {
                0.0
            }
        };
        let lat = |p| {
            self.latency_percentile_ns(p)
                .map(|ns| format!("{:.0}us", ns as f64 / 1000.0))
                .unwrap_or_else(|| "-".into())
        };
        // Of one CPU, over the interval.
        let cpu_pct = |ns: u64| {
            if secs > 0.0 {
                100.0 * ns as f64 / 1e9 / secs
            } else {
                0.0
            }
        };
        let p = &self.policy;
        let _ = writeln!(
            s,
            "decisions {:>7} ({:.0}/s) | nr_wakeups {} sync {} affine {}/{} ({:.1}%) migrate {} local {} remote {} | delayed_requeue {}",
            self.nr_decisions,
            rate(self.nr_decisions),
            p.nr_wakeups,
            p.nr_wakeups_sync,
            p.nr_wakeups_affine,
            p.nr_wakeups_affine_attempts,
            pct(p.nr_wakeups_affine, p.nr_wakeups_affine_attempts),
            p.nr_wakeups_migrate,
            p.nr_wakeups_local,
            p.nr_wakeups_remote,
            self.delayed_requeues
        );
        let _ = writeln!(
            s,
            "moved: same_cpu {} smt {} llc {} node {} remote_node {} | sis: search {} scanned {} recent_used hit {} miss {} idle_core {} candidate {} smt_prev {}",
            p.same_cpu,
            p.smt_sibling,
            p.same_llc,
            p.same_node,
            p.remote_node,
            p.sis_search,
            p.sis_scanned,
            p.sis_recent_used_hit,
            p.sis_recent_used_miss,
            p.sis_idle_core_hit,
            p.sis_idle_candidate_hit,
            p.sis_smt_prev_hit
        );
        let _ = writeln!(
            s,
            "seeds: sync_pull_rejected_irq_waker {} sync_pull_by_irq_waker {} sync_blocked_by_delayed {} sync_delayed_excluded {} newidle pulls {} skipped_pending {} despite_pending {} cache_hot {} wait_own_wakee {} | idle balance kicks {} pulls {} | waker ctx task {} softirq {} hardirq {}",
            p.sync_pull_rejected_irq_waker,
            p.sync_pull_by_irq_waker,
            p.sync_shortcut_blocked_by_delayed,
            p.sync_shortcut_delayed_excluded,
            self.nr_newidle_pulls,
            self.nr_newidle_skipped_pending,
            self.nr_newidle_pull_despite_pending,
            self.nr_newidle_cache_hot,
            self.nr_newidle_wait_own_wakee,
            self.nr_idle_balance_kicks,
            self.nr_idle_balance_pulls,
            self.nr_select_task_ctx,
            self.nr_select_softirq_ctx,
            self.nr_select_hardirq_ctx
        );
        let _ = write!(
            s,
            "bpf: queued {} applied {} (idle {} queue {}; handed off {} of {}) requeued_in_place {} direct {} ring_full {} agent_stall {} rescued {} (lost {}) stale {} bounce {} gone {} | enqueue->run p50 {} p99 {} | agent cpu {:.1}% (spin {:.1}%, process {:.1}%)",
            self.nr_queued_to_agent,
            self.nr_agent_dispatches,
            self.nr_applied_to_idle,
            self.nr_applied_to_queue,
            self.nr_handoffs,
            self.nr_handoff_msgs,
            self.nr_requeues_in_place,
            self.nr_direct_dispatches,
            self.nr_ring_full_fallbacks,
            self.nr_agent_stall_fallbacks,
            self.nr_stall_rescues,
            self.nr_lost_decisions,
            self.nr_stale_decisions,
            self.nr_bounced_decisions,
            self.nr_decisions_task_gone,
            lat(50.0),
            lat(99.0),
            cpu_pct(self.agent_cpu_ns),
            cpu_pct(self.agent_spin_ns),
            cpu_pct(self.process_cpu_ns)
        );
        let us = |h: &[u64], p| {
            hist_percentile_ns(h, p)
                .map(|ns| format!("{:.0}", ns as f64 / 1000.0))
                .unwrap_or_else(|| "-".into())
        };
        let hops: Vec<String> = HOPS
            .iter()
            .zip(&self.hop_hist)
            .map(|(name, h)| format!("{name} {}/{}", us(h, 50.0), us(h, 99.0)))
            .collect();
        if !hops.is_empty() {
            let _ = write!(s, "\nhops p50/p99 us: {}", hops.join(" "));
        }
        let _ = write!(
            s,
            "\nagent: runs {} migrations {} preempt_kicks {} switches voluntary {} involuntary {} | cpu per 1000 decisions {}",
            self.nr_agent_runs,
            self.nr_agent_migrations,
            self.nr_agent_preempt_kicks,
            self.agent_voluntary_switches,
            self.agent_involuntary_switches,
            if self.nr_decisions > 0 {
                format!(
                    "{:.1}ms",
                    self.agent_cpu_ns as f64 / 1e6 * 1000.0 / self.nr_decisions as f64
                )
            } else {
                "-".into()
            }
        );
        if self.task_evictions > 0 {
            let _ = write!(s, " | task_evictions {}", self.task_evictions);
        }
        s
    }
}

/// Published metrics with a value in each kind of field (a counter, a histogram, the
/// engine's nested counters, a hop), for the tests of their JSON, their deltas and the
/// stats socket.
#[cfg(test)]
pub(crate) fn sample() -> LiveMetrics {
    let mut m = LiveMetrics {
        nr_decisions: 123,
        nr_lost_decisions: 4,
        nr_queued_to_agent: 7,
        enqueue_to_run_hist: vec![0, 2, 1],
        ..Default::default()
    };
    m.policy.nr_wakeups_affine = 5;
    m.record_hop(HOP_READ_COMMIT, 4096);
    m
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The `volatile u64` globals of bpf/counters.bpf.h (the writable .bss ones,
    /// not `const volatile` settings), arrays without their brackets.
    fn bpf_bss_u64s() -> Vec<String> {
        let src = include_str!(concat!(env!("CARGO_MANIFEST_DIR"), "/bpf/counters.bpf.h"));
        let mut names = Vec::new();
        let mut rest = src;
        while let Some(at) = rest.find("\nvolatile u64 ") {
            let decl = &rest[at + "\nvolatile u64 ".len()..];
            let end = decl.find(';').expect("a declaration ends with ';'");
            for name in decl[..end].split(',') {
                let name = name.trim();
                let name = name.split('[').next().unwrap().trim();
                names.push(name.to_string());
            }
            rest = &decl[end..];
        }
        names
    }

    /// Every BPF counter is read into the stats, described, and nothing in
    /// the `bpf` list is missing from BPF (the skeleton would not build, but
    /// say which).
    #[test]
    fn every_bpf_counter_is_listed_and_described() {
        let bpf = bpf_bss_u64s();
        assert!(bpf.len() > 30, "parsed {bpf:?}");
        let meta = LiveMetrics::meta();
        for name in &bpf {
            let field = meta
                .fields
                .get(name)
                .unwrap_or_else(|| panic!("BPF's {name} is not in stats.rs's with_counters! list"));
            assert!(
                field.attrs.desc.as_ref().is_some_and(|d| d.len() > 10),
                "{name} has no description"
            );
        }
        for name in LiveMetrics::BPF_COUNTERS {
            assert!(
                bpf.iter().any(|b| b == name),
                "{name} is listed under bpf but bpf/counters.bpf.h has no volatile u64 {name}"
            );
        }
    }

    /// The JSON keys are the described fields, each described, and the
    /// engine's counters too: one description per counter, all in one place.
    #[test]
    fn every_field_is_described() {
        let v = serde_json::to_value(LiveMetrics::default()).unwrap();
        let keys: Vec<&String> = v.as_object().unwrap().keys().collect();
        let meta = LiveMetrics::meta();
        assert_eq!(
            keys,
            meta.fields.keys().collect::<Vec<_>>(),
            "JSON keys and described fields differ"
        );
        assert_eq!(meta.attrs.top.as_deref(), Some("true"));
        let policy = PolicyCounters::meta();
        assert_eq!(policy.fields.len(), Counters::FIELD_NAMES.len());
        for m in [&meta, &policy] {
            for (name, f) in &m.fields {
                let d = f.attrs.desc.as_deref().unwrap_or("");
                assert!(
                    d.len() > 10 && !d.starts_with(' '),
                    "{}.{name}: {d:?}",
                    m.name
                );
            }
        }
        // The server accepts the metadata (nested structs all known).
        let data = stats_metas()
            .into_iter()
            .fold(StatsServerData::<(), ()>::new(), |d, m| d.add_meta(m));
        let mut text = Vec::new();
        data.describe_meta(&mut text, Some(&["LiveMetrics", "PolicyCounters"]))
            .unwrap();
        let text = String::from_utf8(text).unwrap();
        assert!(text.contains("nr_lost_decisions"), "{text}");
        assert!(text.contains("[PolicyCounters]"), "{text}");
    }

    /// The shape the lab's and tests' scripts parse (`"name":123`, compact,
    /// histograms as arrays, the engine's counters nested under "policy").
    #[test]
    fn json_keeps_its_shape() {
        let m = sample();
        let j = serde_json::to_string(&m).unwrap();
        assert!(
            j.starts_with("{\"nr_decisions\":123,\"delayed_requeues\":0,"),
            "{j}"
        );
        for want in [
            "\"nr_lost_decisions\":4,",
            "\"enqueue_to_run_hist\":[0,2,1],",
            "\"hop_hist\":[[],[],[0,0,0,0,0,0,0,0,0,0,0,0,1,",
            "\"policy\":{\"nr_wakeups\":0,",
            "\"nr_wakeups_affine\":5,",
        ] {
            assert!(j.contains(want), "{want} not in {j}");
        }
        let back = LiveMetrics::from_json(&serde_json::from_str(&j).unwrap()).unwrap();
        assert!(LiveMetrics::from_json(&serde_json::json!([1, 2])).is_err());
        assert!(LiveMetrics::from_json(&serde_json::json!({"nr_decisions": "many"})).is_err());
        assert!(LiveMetrics::from_json(&serde_json::json!({"policy": [1, 2]})).is_err());
        assert_eq!(back.hop_hist, m.hop_hist);
        assert_eq!(back.policy, m.policy);
    }

    #[test]
    fn cpu_time_is_shown_as_a_share_of_one_cpu() {
        let m = LiveMetrics {
            agent_cpu_ns: 500_000_000,
            process_cpu_ns: 600_000_000,
            ..LiveMetrics::default()
        };
        let text = m.format(2.0);
        assert!(
            text.contains("agent cpu 25.0% (spin 0.0%, process 30.0%)"),
            "{text}"
        );
        // and per interval: the delta of two snapshots
        let later = LiveMetrics {
            agent_cpu_ns: 700_000_000,
            ..m.clone()
        };
        assert_eq!(later.delta(&m).agent_cpu_ns, 200_000_000);
    }

    #[test]
    fn delta_subtracts_counters_and_histogram() {
        let a = sample();
        let mut b = a.clone();
        b.nr_decisions = 138;
        b.policy.nr_wakeups_affine = 7;
        b.enqueue_to_run_hist = vec![3, 6, 2];
        let d = b.delta(&a);
        assert_eq!(d.nr_decisions, 15);
        assert_eq!(d.nr_lost_decisions, 0);
        assert_eq!(d.policy.nr_wakeups_affine, 2);
        assert_eq!(d.enqueue_to_run_hist, vec![3, 4, 1]);
    }

    #[test]
    fn percentiles_from_log2_buckets() {
        let mut m = LiveMetrics {
            enqueue_to_run_hist: vec![0; LAT_BUCKETS],
            ..Default::default()
        };
        assert_eq!(m.latency_percentile_ns(50.0), None);
        m.enqueue_to_run_hist[10] = 90; // [1024, 2048) ns
        m.enqueue_to_run_hist[20] = 10; // [1 Mi, 2 Mi) ns
        assert_eq!(m.latency_percentile_ns(50.0), Some(2048));
        assert_eq!(m.latency_percentile_ns(90.0), Some(2048));
        assert_eq!(m.latency_percentile_ns(99.0), Some(2 << 20));
    }
}
