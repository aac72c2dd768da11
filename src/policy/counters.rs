//! Event counters, named after the kernel's schedstats where one exists.
//!
//! `nr_wakeups*` follow `struct sched_statistics` (ttwu_stat() and wake_affine()); the
//! `sis_*` names follow the "SIS Search / Domain Search / Scanned / Failures / Recent Used
//! Hit/Miss" schedstats Mel Gorman used while developing seed 4 (a debugging patch that was
//! never merged, so those are this project's definitions, written down at each field).
//! The rest are this project's own and say so.
//!
//! A plain struct of `u64`s: `Default`, serde, `add` and `diff`, `fields()` for printing, and
//! `DESCRIPTIONS` (the doc comments) for `scx_wakelab stats`.
//! Every decision returns the counts it made (`Decision::counted`) and the engine keeps the
//! running totals.

use serde::{Deserialize, Serialize};

macro_rules! counters {
    ($( $(#[doc = $doc:literal])* $field:ident, )*) => {
        const COUNTER_NAMES: &[&str] = &[ $( stringify!($field), )* ];
        const COUNTER_DESCRIPTIONS: &[&str] = &[ $( concat!($($doc),*), )* ];
        /// Number of counters in [`Counters`].
        pub const NR_COUNTERS: usize = COUNTER_NAMES.len();

        /// Event counts; see the module documentation and each field.
        #[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
        #[serde(default)]
        pub struct Counters {
            $( $(#[doc = $doc])* pub $field: u64, )*
        }

        impl Counters {
            /// Field names in declaration order.
            pub const FIELD_NAMES: &'static [&'static str] = COUNTER_NAMES;
            /// Each field's doc comment, its lines joined (each starts with a
            /// space), in declaration order: what `stats` describes it with.
            pub const DESCRIPTIONS: &'static [&'static str] = COUNTER_DESCRIPTIONS;

            /// `self += other`, field by field.
            pub fn add(&mut self, other: &Counters) {
                $( self.$field = self.$field.wrapping_add(other.$field); )*
            }

            /// `self - earlier`, field by field (saturating at 0), for interval rates.
            pub fn diff(&self, earlier: &Counters) -> Counters {
                Counters { $( $field: self.$field.saturating_sub(earlier.$field), )* }
            }

            /// `(name, value)` for every field, in declaration order.
            pub fn fields(&self) -> [(&'static str, u64); NR_COUNTERS] {
                [ $( (stringify!($field), self.$field), )* ]
            }

            /// The value of the named field.
            pub fn get(&self, name: &str) -> Option<u64> {
                match name { $( stringify!($field) => Some(self.$field), )* _ => None }
            }
        }
    };
}

counters! {
    // ---- schedstats of ttwu_stat() / wake_affine() ----
    /// Wake-ups placed (`WF_TTWU`); schedstat `nr_wakeups`.
    nr_wakeups,
    /// Wake-ups with `WF_SYNC` set (counted even when PF_EXITING voids the hint, as the
    /// kernel does); `nr_wakeups_sync`.
    nr_wakeups_sync,
    /// `wake_affine()` chose the waker's CPU (before 39afe5d6, v6.4: also WA_IDLE keeping
    /// prev); `nr_wakeups_affine`.
    nr_wakeups_affine,
    /// `wake_affine()` ran; `nr_wakeups_affine_attempts`.
    nr_wakeups_affine_attempts,
    /// The chosen CPU differs from prev (`WF_MIGRATED`); `nr_wakeups_migrate`.
    nr_wakeups_migrate,
    /// The chosen CPU is the waker's CPU; `nr_wakeups_local`.
    nr_wakeups_local,
    /// The chosen CPU is not the waker's CPU; `nr_wakeups_remote`.
    nr_wakeups_remote,
    /// Project definition: the chosen CPU was available-idle or SCHED_IDLE-only when
    /// chosen (the kernel's `nr_wakeups_idle` field exists but is no longer incremented).
    nr_wakeups_idle,

    // ---- select_task_rq_fair() path, project definitions ----
    /// `wake_wide()` said spread.
    nr_wake_wide,
    /// `want_affine` was true.
    nr_want_affine,
    /// Fork/exec placements (slow path).
    nr_fork_placements,
    /// `find_idlest_cpu` (the simplified slow path) ran.
    nr_slow_path,
    /// `select_fallback_rq()` replaced a CPU that was not allowed or offline.
    nr_fallback_not_allowed,

    // ---- select_idle_sibling(), Mel Gorman's SIS schedstats ----
    /// Calls of `select_idle_sibling()` ("SIS Search").
    sis_search,
    /// Calls that reached the LLC scan ("SIS Domain Search").
    sis_domain_search,
    /// CPUs whose state the LLC scans examined ("SIS Scanned"); each SMT sibling tested in a
    /// core scan counts once.
    sis_scanned,
    /// LLC scans that found nothing ("SIS Failures").
    sis_failed,
    /// The target was idle.
    sis_target_hit,
    /// Prev was cache-affine and idle.
    sis_prev_hit,
    /// Per-CPU kthread stacking returned prev.
    sis_kthread_stack_hit,
    /// recent_used_cpu returned ("SIS Recent Used Hit").
    sis_recent_used_hit,
    /// recent_used_cpu was eligible (not prev, not target, shares the target's cache) but
    /// busy or not allowed ("SIS Recent Used Miss"; hit rate = hit / (hit + miss)).
    sis_recent_used_miss,
    /// search-target mode: recent_used_cpu became the scan target.
    sis_recent_used_target,
    /// prev mode returned a recent_used_cpu outside the allowed mask (Hillf Danton's catch).
    sis_recent_used_mask_bug,
    /// The LLC scan returned a whole idle core.
    sis_idle_core_hit,
    /// The LLC scan returned the idle candidate remembered during the core search.
    sis_idle_candidate_hit,
    /// The LLC scan returned an idle CPU (idle-CPU scan).
    sis_idle_cpu_hit,
    /// `select_idle_smt(prev)` (v5.13) returned a sibling of prev.
    sis_smt_prev_hit,
    /// v5.10 `select_idle_smt(target)` returned a sibling of the target.
    sis_smt_target_hit,
    /// SIS_PROP / SIS_UTIL ran out of scan depth.
    sis_scan_limited,
    /// SIS_UTIL skipped the scan because the LLC was overloaded (nr_idle_scan == 0).
    sis_util_overloaded,

    // ---- seed effects ----
    /// Seed 1: the sync shortcut was refused because the waker was not in task context.
    sync_pull_rejected_irq_waker,
    /// Seed 1's complaint: the sync shortcut pulled for a softirq/hardirq waker.
    sync_pull_by_irq_waker,
    /// Seed 3: the sync shortcut failed only because of delayed-dequeue tasks (fix off).
    sync_shortcut_blocked_by_delayed,
    /// Seed 3 fix: the sync shortcut succeeded only because delayed tasks were discounted.
    sync_shortcut_delayed_excluded,

    // ---- newly-idle pull, seed 2 ----
    /// Newly-idle balance attempts (`newidle_pull` calls on a CPU with nothing to run).
    newidle_balance,
    /// Tasks pulled.
    newidle_pulls,
    /// Seed 2: skipped because `ttwu_pending` was set.
    newidle_pull_skipped_pending,
    /// Seed 2 analogue: skipped because a placement was already in flight to this CPU.
    newidle_pull_skipped_in_flight,
    /// Pulled although a wake-up was pending (what seed 2 prevents).
    newidle_pull_despite_pending,
    /// Nothing eligible to pull.
    newidle_nothing_to_pull,
    /// Not searched: the root domain was not overloaded.
    newidle_skipped_not_overloaded,
    /// Not searched, or stopped: `avg_idle` below the search's cost.
    newidle_skipped_short_idle,

    // ---- placement distance from prev (wake-ups only) ----
    /// Stayed on prev.
    same_cpu,
    /// Moved to an SMT sibling of prev.
    smt_sibling,
    /// Moved within prev's LLC.
    same_llc,
    /// Moved to another LLC of prev's node.
    same_node,
    /// Moved to another NUMA node.
    remote_node,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn add_diff_fields() {
        let a = Counters {
            nr_wakeups: 5,
            sis_scanned: 7,
            ..Default::default()
        };
        let mut b = a;
        b.add(&a);
        assert_eq!(b.nr_wakeups, 10);
        let d = b.diff(&a);
        assert_eq!(d, a);
        assert_eq!(a.diff(&b).nr_wakeups, 0);
        assert_eq!(b.get("sis_scanned"), Some(14));
        assert_eq!(b.get("nope"), None);
        assert_eq!(b.fields().len(), Counters::FIELD_NAMES.len());
        assert_eq!(Counters::DESCRIPTIONS.len(), Counters::FIELD_NAMES.len());
        assert!(Counters::DESCRIPTIONS[0].contains("schedstat `nr_wakeups`"));
        assert!(Counters::DESCRIPTIONS.iter().all(|d| !d.trim().is_empty()));
        let j = serde_json::to_string(&b).unwrap();
        let back: Counters = serde_json::from_str(&j).unwrap();
        assert_eq!(back, b);
        let partial: Counters = serde_json::from_str(r#"{"nr_wakeups": 3}"#).unwrap();
        assert_eq!(partial.nr_wakeups, 3);
    }
}
