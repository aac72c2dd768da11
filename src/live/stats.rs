//! Counters of the live scheduler, and the --stats printer.
//!
//! The scheduling thread owns a LiveMetrics and copies it into a shared one
//! every 100 ms (agent.rs, publish); a separate thread prints deltas, so the
//! scheduling thread never writes to a terminal.

use std::fmt::Write as _;

use serde::Serialize;

use super::bpf_intf::{
    wakeup_msg, wakeup_msg_flags_WL_MSG_SELECTED as WL_MSG_SELECTED, wakeup_msg_flags_WL_MSG_WAKEUP as WL_MSG_WAKEUP,
};
use super::bpf_skel::types::bss;
use super::placement::{CpuTopology, Distance, Reason};

pub const LAT_BUCKETS: usize = 40;

/// Declares LiveMetrics from its counter names, once, with `delta`.
macro_rules! live_metrics {
    ($($(#[$doc:meta])* $field:ident),* $(,)?) => {
        #[derive(Clone, Debug, Default, Serialize)]
        pub struct LiveMetrics {
            $($(#[$doc])* pub $field: u64,)*
            /// log2 buckets (ns) of enqueue -> running on the chosen CPU.
            pub enqueue_to_run_hist: Vec<u64>,
        }

        impl LiveMetrics {
            /// Counter-wise difference, for per-interval stats.
            pub fn delta(&self, old: &LiveMetrics) -> LiveMetrics {
                LiveMetrics {
                    $($field: self.$field.saturating_sub(old.$field),)*
                    enqueue_to_run_hist: self
                        .enqueue_to_run_hist
                        .iter()
                        .enumerate()
                        .map(|(i, n)| n.saturating_sub(old.enqueue_to_run_hist.get(i).copied().unwrap_or(0)))
                        .collect(),
                }
            }
        }
    };
}

live_metrics! {
    /// Placements the agent decided.
    nr_decisions,
    /// ... of which wake-ups (SCX_ENQ_WAKEUP), and with a select_cpu context.
    nr_wakeups,
    nr_wakeups_with_select,
    placed_prev_idle,
    placed_llc_idle,
    placed_prev_busy,
    placed_first_allowed,
    /// Placements away from prev (schedstat name), by distance.
    nr_wakeups_migrate,
    moved_smt,
    moved_llc,
    moved_node,
    moved_remote_node,
    /// Times the decision ring had no room (decisions kept for later).
    decision_ring_full,
    // Copied from BPF's .bss (bpf/main.bpf.c documents each).
    nr_queued_to_agent,
    nr_agent_dispatches,
    nr_direct_dispatches,
    nr_ring_full_fallbacks,
    nr_agent_stall_fallbacks,
    nr_stale_decisions,
    nr_cancelled_dispatches,
    nr_bounced_decisions,
    nr_decisions_task_gone,
    nr_enqueue_without_select,
    nr_select_task_ctx,
    nr_select_softirq_ctx,
    nr_select_hardirq_ctx,
    nr_heartbeat_kicks,
}

impl LiveMetrics {
    pub fn count_decision(&mut self, reason: Reason, msg: &wakeup_msg, cpu: i32, topo: &CpuTopology) {
        self.nr_decisions += 1;
        if msg.flags & WL_MSG_WAKEUP != 0 {
            self.nr_wakeups += 1;
        }
        if msg.flags & WL_MSG_SELECTED != 0 {
            self.nr_wakeups_with_select += 1;
        }
        match reason {
            Reason::PrevIdle => self.placed_prev_idle += 1,
            Reason::LlcIdle => self.placed_llc_idle += 1,
            Reason::PrevBusy => self.placed_prev_busy += 1,
            Reason::FirstAllowed => self.placed_first_allowed += 1,
        }
        let (from, to) = (msg.prev_cpu.max(0) as usize, cpu.max(0) as usize);
        let d = topo.distance(from, to);
        if d != Distance::SameCpu {
            self.nr_wakeups_migrate += 1;
        }
        match d {
            Distance::SameCpu => {}
            Distance::SmtSibling => self.moved_smt += 1,
            Distance::SameLlc => self.moved_llc += 1,
            Distance::SameNode => self.moved_node += 1,
            Distance::RemoteNode => self.moved_remote_node += 1,
        }
    }

    pub fn absorb_bpf(&mut self, b: &bss) {
        // SAFETY (for all reads): the .bss is mmap'ed and written by BPF
        // concurrently; volatile loads of aligned u64s.
        macro_rules! rd {
            ($f:ident) => {
                self.$f = unsafe { std::ptr::read_volatile(&b.$f) };
            };
        }
        rd!(nr_queued_to_agent);
        rd!(nr_agent_dispatches);
        rd!(nr_direct_dispatches);
        rd!(nr_ring_full_fallbacks);
        rd!(nr_agent_stall_fallbacks);
        rd!(nr_stale_decisions);
        rd!(nr_cancelled_dispatches);
        rd!(nr_bounced_decisions);
        rd!(nr_decisions_task_gone);
        rd!(nr_enqueue_without_select);
        rd!(nr_select_task_ctx);
        rd!(nr_select_softirq_ctx);
        rd!(nr_select_hardirq_ctx);
        rd!(nr_heartbeat_kicks);
        self.enqueue_to_run_hist.resize(LAT_BUCKETS, 0);
        for (i, v) in self.enqueue_to_run_hist.iter_mut().enumerate() {
            *v = unsafe { std::ptr::read_volatile(&b.enqueue_to_run_hist[i]) };
        }
    }

    /// Percentile (0..100) of the enqueue->run histogram, in ns (bucket
    /// upper bound), or None when empty.
    pub fn latency_percentile_ns(&self, pct: f64) -> Option<u64> {
        let total: u64 = self.enqueue_to_run_hist.iter().sum();
        if total == 0 {
            return None;
        }
        let want = ((total as f64) * pct / 100.0).ceil().max(1.0) as u64;
        let mut seen = 0;
        for (i, n) in self.enqueue_to_run_hist.iter().enumerate() {
            seen += n;
            if seen >= want {
                return Some(2u64 << i);
            }
        }
        None
    }

    /// One stats line block, scx style.
    pub fn format(&self, secs: f64) -> String {
        let mut s = String::new();
        let rate = |n: u64| if secs > 0.0 { n as f64 / secs } else { 0.0 };
        let pct = |n: u64, d: u64| if d > 0 { 100.0 * n as f64 / d as f64 } else { 0.0 };
        let lat = |p| {
            self.latency_percentile_ns(p)
                .map(|ns| format!("{:.0}us", ns as f64 / 1000.0))
                .unwrap_or_else(|| "-".into())
        };
        let _ = writeln!(
            s,
            "decisions {:>7} ({:.0}/s) wakeups {:>7} with_select {:>5.1}% | prev_idle {} llc_idle {} prev_busy {} other {}",
            self.nr_decisions,
            rate(self.nr_decisions),
            self.nr_wakeups,
            pct(self.nr_wakeups_with_select, self.nr_wakeups),
            self.placed_prev_idle,
            self.placed_llc_idle,
            self.placed_prev_busy,
            self.placed_first_allowed
        );
        let _ = writeln!(
            s,
            "nr_wakeups_migrate {} (smt {} llc {} node {} remote_node {}) | waker ctx task {} softirq {} hardirq {}",
            self.nr_wakeups_migrate,
            self.moved_smt,
            self.moved_llc,
            self.moved_node,
            self.moved_remote_node,
            self.nr_select_task_ctx,
            self.nr_select_softirq_ctx,
            self.nr_select_hardirq_ctx
        );
        let _ = write!(
            s,
            "bpf: queued {} agent_dispatch {} direct {} ring_full {} agent_stall {} stale {} cancel {} bounce {} gone {} | enqueue->run p50 {} p99 {}",
            self.nr_queued_to_agent,
            self.nr_agent_dispatches,
            self.nr_direct_dispatches,
            self.nr_ring_full_fallbacks,
            self.nr_agent_stall_fallbacks,
            self.nr_stale_decisions,
            self.nr_cancelled_dispatches,
            self.nr_bounced_decisions,
            self.nr_decisions_task_gone,
            lat(50.0),
            lat(99.0)
        );
        s
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn delta_subtracts_counters_and_histogram() {
        let mut a = LiveMetrics::default();
        a.nr_decisions = 10;
        a.moved_llc = 4;
        a.enqueue_to_run_hist = vec![1, 5, 0];
        let mut b = a.clone();
        b.nr_decisions = 25;
        b.moved_llc = 4;
        b.enqueue_to_run_hist = vec![3, 6, 2];
        let d = b.delta(&a);
        assert_eq!(d.nr_decisions, 15);
        assert_eq!(d.moved_llc, 0);
        assert_eq!(d.enqueue_to_run_hist, vec![2, 1, 2]);
    }

    #[test]
    fn percentiles_from_log2_buckets() {
        let mut m = LiveMetrics::default();
        m.enqueue_to_run_hist = vec![0; LAT_BUCKETS];
        assert_eq!(m.latency_percentile_ns(50.0), None);
        m.enqueue_to_run_hist[10] = 90; // [1024, 2048) ns
        m.enqueue_to_run_hist[20] = 10; // [1 Mi, 2 Mi) ns
        assert_eq!(m.latency_percentile_ns(50.0), Some(2048));
        assert_eq!(m.latency_percentile_ns(90.0), Some(2048));
        assert_eq!(m.latency_percentile_ns(99.0), Some(2 << 20));
    }
}
