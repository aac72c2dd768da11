//! The reasons a decision carries: [`Rule`] (one step of the kernel path that fired or
//! mattered) and [`RuleChain`] (the ordered, fixed-capacity list of them).
//!
//! Every rule has a stable snake_case name (used in JSON traces, counters and tests; never
//! rename one, add a new one instead) and a one-line human text for `explain`.

use std::fmt;

use serde::de::{self, Deserializer, SeqAccess};
use serde::ser::SerializeSeq;
use serde::{Deserialize, Serialize, Serializer};

macro_rules! rules {
    ($( $(#[$m:meta])* $variant:ident => $name:literal, $text:literal; )*) => {
        /// One step of the placement path.  See [`Rule::name`] and [`Rule::text`].
        #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
        pub enum Rule {
            $( $(#[$m])* #[doc = $text] $variant, )*
        }

        impl Rule {
            /// Every rule, in declaration order.
            pub const ALL: &'static [Rule] = &[ $( Rule::$variant, )* ];

            /// Stable snake_case name.
            pub const fn name(self) -> &'static str {
                match self { $( Rule::$variant => $name, )* }
            }

            /// One-line explanation for humans.
            pub const fn text(self) -> &'static str {
                match self { $( Rule::$variant => $text, )* }
            }

            /// The rule with this name.
            pub fn from_name(name: &str) -> Option<Rule> {
                match name { $( $name => Some(Rule::$variant), )* _ => None }
            }
        }
    };
}

rules! {
    // ---- entry, select_task_rq() / select_task_rq_fair() ----
    SingleAllowedCpu => "single_allowed_cpu",
        "the task may run on one CPU only; select_task_rq() takes it without asking the class";
    NotAWakeup => "not_a_wakeup",
        "neither TTWU nor FORK/EXEC in the wake flags: the task stays on prev";
    SyncIgnoredWakerExiting => "sync_ignored_waker_exiting",
        "WF_SYNC ignored: the waker is exiting (PF_EXITING)";
    WakeWide => "wake_wide",
        "wake_wide(): waker and wakee flip between many partners; spread instead of pulling";
    WakerCpuNotAllowed => "waker_cpu_not_allowed",
        "the waker's CPU is not in the task's allowed mask, so no affine wake-up";
    WantAffine => "want_affine",
        "want_affine: the wakee may be pulled towards the waker's CPU";
    AffineDomainSmt => "affine_domain_smt",
        "first wake-affine domain spanning prev is the SMT core (imbalance_pct 110)";
    AffineDomainLlc => "affine_domain_llc",
        "first wake-affine domain spanning prev is the LLC";
    AffineDomainNode => "affine_domain_node",
        "first wake-affine domain spanning prev is the NUMA node";
    AffineDomainMachine => "affine_domain_machine",
        "first wake-affine domain spanning prev is the whole machine (near NUMA)";
    NoAffineDomain => "no_affine_domain",
        "no wake-affine domain of the waker's CPU spans prev; fast path on prev";
    WakerIsPrev => "waker_is_prev",
        "the waker runs on prev; wake_affine() has nothing to choose";

    // ---- wake_affine_idle() ----
    WaIdleBothIdleKeepPrev => "wake_affine_idle_both_idle_keep_prev",
        "WA_IDLE: waker's CPU idle (interrupt wake-up) and cache-affine, prev idle too: keep prev";
    WaIdleWakerIdleCacheAffine => "wake_affine_idle_waker_idle_cache_affine",
        "WA_IDLE: waker's CPU idle (interrupt wake-up) and cache-affine with prev: pull to it";
    WaIdleSyncWakerAlone => "wake_affine_idle_sync_waker_alone",
        "WA_IDLE: sync wake-up and the waker is alone on its CPU (nr_running == 1): pull";
    WaIdleSyncWakerAloneExcludingDelayed => "wake_affine_idle_sync_waker_alone_excluding_delayed",
        "WA_IDLE: sync wake-up, waker alone once delayed-dequeue tasks are discounted (v6.16 fix): pull";
    SyncShortcutBlockedIrqWaker => "sync_shortcut_blocked_irq_waker",
        "seed 1 (Barry Song, unmerged): the sync waker is an interrupt, not a task; no sync pull";
    SyncShortcutBlockedByDelayed => "sync_shortcut_blocked_by_delayed",
        "seed 3: delayed-dequeue tasks on the waker's CPU make nr_running != 1; sync pull missed";
    SyncShortcutIrqWaker => "sync_shortcut_irq_waker",
        "the sync pull was granted to an interrupt waker (the case seed 1 objects to)";
    WaIdlePrevIdle => "wake_affine_idle_prev_idle",
        "WA_IDLE: prev is idle: keep prev";
    WaIdleNoDecision => "wake_affine_idle_no_decision",
        "WA_IDLE: nothing idle and no sync shortcut; no decision";

    // ---- wake_affine_weight() ----
    WaWeightSyncWakerHeavier => "wake_affine_weight_sync_waker_heavier",
        "WA_WEIGHT: sync, and the waker's own load exceeds its CPU's load: pull";
    WaWeightThisLighter => "wake_affine_weight_this_lighter",
        "WA_WEIGHT: the waker's CPU is lighter than prev after the WA_BIAS margin: pull";
    WaWeightPrevLighter => "wake_affine_weight_prev_lighter",
        "WA_WEIGHT: prev is not heavier than the waker's CPU plus the WA_BIAS margin: keep prev";
    WakeAffineNoFeature => "wake_affine_no_feature",
        "WA_IDLE and WA_WEIGHT both off: wake_affine() keeps prev";

    // ---- select_idle_sibling() ----
    SisTargetIdle => "sis_target_idle",
        "select_idle_sibling: the target is idle (or runs only SCHED_IDLE tasks)";
    SisPrevIdle => "sis_prev_idle",
        "select_idle_sibling: prev is cache-affine with the target and idle";
    SisKthreadStacking => "sis_per_cpu_kthread_stacking",
        "select_idle_sibling: a per-CPU kthread woke the task on prev with at most one task there; stack";
    SisKthreadStackingBlockedIrq => "sis_per_cpu_kthread_stacking_blocked_irq",
        "per-CPU kthread stacking refused: the wake-up comes from interrupt context (8b4e74cc)";
    SisRecentUsedHit => "sis_recent_used_hit",
        "select_idle_sibling: the task's recent_used_cpu is cache-affine and idle";
    SisRecentUsedMaskBug => "sis_recent_used_mask_tested_prev",
        "recent_used_cpu accepted although not allowed: the mask test read prev (89aafd67 bug, fixed in v6.5)";
    SisRecentUsedMiss => "sis_recent_used_miss",
        "select_idle_sibling: recent_used_cpu shares the target's cache but is busy or not allowed";
    SisRecentUsedBecomesTarget => "sis_recent_used_becomes_target",
        "search-target (Mel's unmerged variant): the idle recent_used_cpu becomes the scan target";
    SisNoLlcDomain => "sis_no_llc_domain",
        "the target has no LLC domain (offline or alone); return the target";
    SisSmtPrevSibling => "sis_smt_prev_sibling",
        "select_idle_smt(prev) (v5.13): no idle core expected, an idle SMT sibling of prev";
    SisIdleCore => "sis_idle_core",
        "LLC scan: a whole idle core";
    SisIdleCandidate => "sis_idle_candidate",
        "LLC scan: no idle core, the first idle CPU seen during the core search (9fe1f127)";
    SisIdleCpu => "sis_idle_cpu",
        "LLC scan: an idle CPU";
    SisSmtTargetSibling => "sis_smt_target_sibling",
        "v5.10 select_idle_smt(target): an idle SMT sibling of the target";
    SisUtilOverloaded => "sis_util_overloaded",
        "SIS_UTIL: nr_idle_scan is 0, the LLC is overloaded; skip the idle-CPU scan";
    SisScanLimitReached => "sis_scan_limit_reached",
        "SIS_PROP/SIS_UTIL scan depth exhausted before an idle CPU was found";
    SisPropNoWakerLlc => "sis_prop_no_waker_llc",
        "SIS_PROP: the waker's CPU has no LLC domain to keep scan statistics in; idle-CPU scan skipped";
    SisFallbackTarget => "sis_fallback_target",
        "select_idle_sibling: nothing better, return the target";

    // ---- slow path ----
    SlowPathIdlestIdle => "slow_path_idlest_idle",
        "find_idlest_group_cpu: the most recently idled allowed CPU of the chosen group";
    SlowPathIdlestLeastLoaded => "slow_path_idlest_least_loaded",
        "find_idlest_group_cpu: no idle CPU with an idle stamp in the group; its least-loaded CPU";
    SlowPathIdlestGroup => "slow_path_idlest_group",
        "find_idlest_group: another group of the domain is idler than the local one; descend into it";
    SlowPathNumaKeptLocal => "slow_path_numa_kept_local",
        "find_idlest_group: the local node has spare capacity and the allowed NUMA imbalance keeps the task there";
    SlowPathSingleCpuGroup => "slow_path_single_cpu_group",
        "find_idlest_group_cpu: the chosen group is one CPU";
    SlowPathSchedIdleCpu => "slow_path_sched_idle_cpu",
        "find_idlest_group_cpu: a CPU running only SCHED_IDLE tasks";
    SlowPathLocalGroupKept => "slow_path_local_group_kept",
        "find_idlest_cpu: no domain found a group idler than the local one; the placing CPU";
    SlowPathNoAllowedCpu => "slow_path_no_allowed_cpu",
        "find_idlest_cpu: the balancing domain holds no allowed CPU; keep prev";

    // ---- select_task_rq() epilogue ----
    FallbackNotAllowed => "fallback_not_allowed",
        "the chosen CPU is not allowed or offline; select_fallback_rq() picks an allowed online CPU";
    FallbackAnyOnline => "fallback_any_online",
        "no allowed CPU is online; select_fallback_rq() widens the mask to any online CPU";

    // ---- newly-idle pull ----
    NewidleCpuOffline => "newidle_cpu_offline",
        "newly-idle: the CPU is offline or unknown; no balancing";
    NewidleCpuHasWork => "newidle_cpu_has_work",
        "newly-idle: the CPU still has runnable tasks; newidle balance does not run";
    NewidleSkipPendingWakeup => "newidle_skip_pending_wakeup",
        "seed 2 (e5e678e4, v5.14): a wake-up is pending on this CPU (ttwu_pending); don't pull";
    NewidleSkipWakeupInFlight => "newidle_skip_wakeup_in_flight",
        "seed 2 analogue: a placement already sent a task to this CPU; don't pull";
    NewidleRootNotOverloaded => "newidle_root_not_overloaded",
        "newly-idle: the root domain is not overloaded (no CPU has had a task waiting); don't search";
    NewidleIdleTooShort => "newidle_idle_too_short",
        "newly-idle: avg_idle is below the search's cost (the domain's max_newidle_lb_cost, or 500 us in v5.10); stop";
    NewidleDomainNotDrawn => "newidle_domain_not_drawn",
        "newly-idle: NI_RANDOM's draw skips this domain (weighted by its past success)";
    NewidlePullDomainSmt => "newidle_pull_domain_smt",
        "newly-idle pull from an SMT sibling";
    NewidlePullDomainLlc => "newidle_pull_domain_llc",
        "newly-idle pull from within the LLC";
    NewidlePullDomainNode => "newidle_pull_domain_node",
        "newly-idle pull from within the NUMA node";
    NewidlePullDomainMachine => "newidle_pull_domain_machine",
        "newly-idle pull from another node";
    NewidlePullDespitePending => "newidle_pull_despite_pending",
        "pulled although a wake-up was pending here: the pulled and the woken task will compete";
    NewidleNothingToPull => "newidle_nothing_to_pull",
        "newly-idle: no queued task that may run here on a CPU with more than one runnable task";
}

impl fmt::Display for Rule {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl Serialize for Rule {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(self.name())
    }
}

impl<'de> Deserialize<'de> for Rule {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let s = <std::borrow::Cow<'de, str>>::deserialize(d)?;
        Rule::from_name(&s).ok_or_else(|| de::Error::custom(format!("unknown rule '{s}'")))
    }
}

/// Capacity of a [`RuleChain`]; the longest kernel path pushes about a dozen rules.
pub const RULE_CHAIN_CAP: usize = 20;

/// The ordered reasons of one decision: a fixed array plus a length, so recording the chain
/// never allocates.  A push beyond the capacity is dropped and marks the chain truncated
/// (a bug indicator; tests assert it never happens).
#[derive(Clone, Copy, PartialEq, Eq)]
pub struct RuleChain {
    rules: [Rule; RULE_CHAIN_CAP],
    len: u8,
    truncated: bool,
}

impl Default for RuleChain {
    fn default() -> Self {
        Self::new()
    }
}

impl RuleChain {
    pub const fn new() -> Self {
        RuleChain {
            rules: [Rule::NotAWakeup; RULE_CHAIN_CAP],
            len: 0,
            truncated: false,
        }
    }

    #[inline]
    pub fn push(&mut self, r: Rule) {
        if (self.len as usize) < RULE_CHAIN_CAP {
            self.rules[self.len as usize] = r;
            self.len += 1;
        } else {
            self.truncated = true;
        }
    }

    #[inline]
    pub fn as_slice(&self) -> &[Rule] {
        &self.rules[..self.len as usize]
    }

    #[inline]
    pub fn len(&self) -> usize {
        self.len as usize
    }

    #[inline]
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    #[inline]
    pub fn contains(&self, r: Rule) -> bool {
        self.as_slice().contains(&r)
    }

    #[inline]
    pub fn last(&self) -> Option<Rule> {
        self.as_slice().last().copied()
    }

    pub fn truncated(&self) -> bool {
        self.truncated
    }

    pub fn iter(&self) -> impl Iterator<Item = Rule> + '_ {
        self.as_slice().iter().copied()
    }

    /// The rule names, for tests and logs.
    pub fn names(&self) -> Vec<&'static str> {
        self.iter().map(Rule::name).collect()
    }
}

impl fmt::Debug for RuleChain {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_list().entries(self.iter().map(Rule::name)).finish()
    }
}

impl fmt::Display for RuleChain {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, r) in self.iter().enumerate() {
            if i > 0 {
                f.write_str(" -> ")?;
            }
            f.write_str(r.name())?;
        }
        Ok(())
    }
}

impl Serialize for RuleChain {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let mut seq = s.serialize_seq(Some(self.len()))?;
        for r in self.iter() {
            seq.serialize_element(&r)?;
        }
        seq.end()
    }
}

super::deserialize_by_visitor!(RuleChain, "an array of rule names", deserialize_seq, {
    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<RuleChain, A::Error> {
        let mut c = RuleChain::new();
        while let Some(r) = seq.next_element::<Rule>()? {
            if c.len() == RULE_CHAIN_CAP {
                return Err(de::Error::custom("rule chain longer than its capacity"));
            }
            c.push(r);
        }
        Ok(c)
    }
});

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_unique_snake_case_and_round_trip() {
        let mut seen = std::collections::HashSet::new();
        for &r in Rule::ALL {
            let n = r.name();
            assert!(seen.insert(n), "duplicate rule name {n}");
            assert!(
                n.chars()
                    .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_')
            );
            assert_eq!(Rule::from_name(n), Some(r));
            assert!(!r.text().is_empty() && !r.text().contains('\n'));
        }
    }

    #[test]
    fn chain_serialises_as_names_and_truncates_safely() {
        let mut c = RuleChain::new();
        c.push(Rule::WantAffine);
        c.push(Rule::SisTargetIdle);
        let j = serde_json::to_string(&c).unwrap();
        assert_eq!(j, r#"["want_affine","sis_target_idle"]"#);
        let back: RuleChain = serde_json::from_str(&j).unwrap();
        assert_eq!(back, c);
        for _ in 0..RULE_CHAIN_CAP {
            c.push(Rule::SisIdleCpu);
        }
        assert_eq!(c.len(), RULE_CHAIN_CAP);
        assert!(c.truncated());
        assert!(serde_json::from_str::<RuleChain>(r#"["no_such_rule"]"#).is_err());
    }
}
