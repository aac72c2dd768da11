//! Counters of the live scheduler, and the --stats printer.
//!
//! The scheduling thread owns a LiveMetrics and copies it into a shared one
//! every 100 ms (agent.rs, publish); a separate thread prints deltas, so the
//! scheduling thread never writes to a terminal.

use std::fmt::Write as _;

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

/// Declares LiveMetrics from its counter names, once, with `delta`.
macro_rules! live_metrics {
    ($($(#[$doc:meta])* $field:ident),* $(,)?) => {
        #[derive(Clone, Debug, Default, Serialize, Deserialize)]
        #[serde(default)]
        pub struct LiveMetrics {
            $($(#[$doc])* pub $field: u64,)*
            /// log2 buckets (ns) of enqueue -> running on the chosen CPU.
            pub enqueue_to_run_hist: Vec<u64>,
            /// One log2 histogram (ns) per hop of HOPS, on CLOCK_MONOTONIC.
            pub hop_hist: Vec<Vec<u64>>,
            /// The placement engine's counters (schedstat names).
            pub policy: Counters,
        }

        impl LiveMetrics {
            /// Counter-wise difference, for per-interval stats.
            pub fn delta(&self, old: &LiveMetrics) -> LiveMetrics {
                LiveMetrics {
                    $($field: self.$field.saturating_sub(old.$field),)*
                    enqueue_to_run_hist: hist_delta(&self.enqueue_to_run_hist, &old.enqueue_to_run_hist),
                    hop_hist: self
                        .hop_hist
                        .iter()
                        .enumerate()
                        .map(|(i, h)| hist_delta(h, old.hop_hist.get(i).map_or(&[], |o| o.as_slice())))
                        .collect(),
                    policy: self.policy.diff(&old.policy),
                }
            }
        }
    };
}

live_metrics! {
    /// Placements the agent decided.
    nr_decisions,
    /// Still-delayed sleepers woken and requeued in place (no placement).
    delayed_requeues,
    /// Sleep events received (delayed-dequeue emulation).
    sleep_events,
    /// Times the decision ring had no room (decisions kept for later).
    decision_ring_full,
    /// Runtime flag changes applied.
    config_changes,
    /// Trace records lost because the writer fell behind (--trace).
    trace_dropped,
    /// Tasks forgotten early because the per-task table was full
    /// (--task-table-size).
    task_evictions,
    /// CPU time of the scheduling thread (the agent proper), ns.
    agent_cpu_ns,
    /// CPU time of the whole process (agent, stats, control, trace threads), ns.
    process_cpu_ns,
    /// The scheduling thread's voluntary and involuntary context switches
    /// (getrusage RUSAGE_THREAD): the agent's own, not the workload's.
    agent_voluntary_switches,
    agent_involuntary_switches,
    /// Time the scheduling thread spent polling for new wake-ups after a
    /// batch (--agent-spin-us), ns: part of agent_cpu_ns.
    agent_spin_ns,
    /// Fast-lane apply calls that moved nothing new (a retry for decisions
    /// whose task was not parked yet).
    apply_retries,
    // Copied from BPF's .bss (bpf/main.bpf.c documents each).
    nr_queued_to_agent,
    nr_sleep_msgs,
    nr_sleep_msgs_dropped,
    nr_agent_dispatches,
    nr_direct_dispatches,
    nr_ring_full_fallbacks,
    nr_agent_stall_fallbacks,
    nr_stall_rescues,
    nr_lost_decisions,
    nr_fallback_starving,
    nr_stale_decisions,
    nr_bounced_decisions,
    nr_decisions_task_gone,
    nr_enqueue_without_select,
    nr_select_task_ctx,
    nr_select_softirq_ctx,
    nr_select_hardirq_ctx,
    nr_heartbeat_kicks,
    nr_idle_agent_kicks,
    nr_stranded_kicks,
    nr_newidle_pulls,
    nr_newidle_skipped_pending,
    nr_newidle_pull_despite_pending,
    nr_newidle_nothing,
    nr_newidle_cache_hot,
    nr_newidle_search_despite_pending,
    nr_idle_balance_kicks,
    nr_idle_balance_pulls,
    nr_idle_balance_nothing,
    nr_idle_balance_cache_hot,
    nr_newidle_wait_own_wakee,
    nr_newidle_skipped_parked,
    nr_agent_runs,
    nr_agent_migrations,
    nr_agent_preempt_kicks,
    nr_requeues_in_place,
    nr_applied_to_idle,
    nr_applied_to_queue,
    nr_apply_runs,
    nr_apply_misses,
    nr_applied_late,
}

impl LiveMetrics {
    /// From the JSON a running instance sends (`stats`); unknown or missing
    /// fields are tolerated so that client and server versions may differ.
    pub fn from_json(v: &serde_json::Value) -> LiveMetrics {
        serde_json::from_value(v.clone()).unwrap_or_default()
    }

    /// Count one sample of an agent-timed hop.
    pub fn record_hop(&mut self, hop: usize, ns: u64) {
        if self.hop_hist.len() < HOPS.len() {
            self.hop_hist.resize(HOPS.len(), Vec::new());
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
            "bpf: queued {} applied {} (idle {} queue {}) requeued_in_place {} direct {} ring_full {} agent_stall {} rescued {} (lost {}) stale {} bounce {} gone {} | enqueue->run p50 {} p99 {} | agent cpu {:.1}% (spin {:.1}%, process {:.1}%)",
            self.nr_queued_to_agent,
            self.nr_agent_dispatches,
            self.nr_applied_to_idle,
            self.nr_applied_to_queue,
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

#[cfg(test)]
mod tests {
    use super::*;

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
        let mut a = LiveMetrics {
            nr_decisions: 10,
            config_changes: 4,
            enqueue_to_run_hist: vec![1, 5, 0],
            ..Default::default()
        };
        a.policy.nr_wakeups_affine = 7;
        let mut b = a.clone();
        b.nr_decisions = 25;
        b.config_changes = 4;
        b.policy.nr_wakeups_affine = 9;
        b.enqueue_to_run_hist = vec![3, 6, 2];
        let d = b.delta(&a);
        assert_eq!(d.nr_decisions, 15);
        assert_eq!(d.config_changes, 0);
        assert_eq!(d.policy.nr_wakeups_affine, 2);
        assert_eq!(d.enqueue_to_run_hist, vec![2, 1, 2]);
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
