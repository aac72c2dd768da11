//! # policy: CFS wake-up placement, version by version, every seed patch a flag
//!
//! A pure re-implementation of the fair class's wake-up placement path
//! (`select_task_rq_fair()` → `wake_affine()` → `select_idle_sibling()`), plus the
//! newly-idle pull decision, with each upstream patch behaviour of the four seed threads an
//! independent flag and presets naming real kernels.  No BPF, no I/O, no threads, no global
//! state, no allocation on the decision path; deterministic.  The kernel semantics are in
//! `shared/reference/cfs-wakeup-placement.md`; each heuristic below carries fair.c's
//! reasoning and the commit it reproduces.
//!
//! ## API summary
//!
//! ```text
//! Topology::from_shape(nodes, llcs_per_node, cores_per_llc, threads) -> Result<Topology, TopologyError>
//! Topology::from_cpus(&[CpuDesc { core, llc, node, online, capacity }])
//! TopologySpec { shape | cpus, offline, numa_wake_affine }.build()   // serde, for scenario files
//!     smt_mask / llc_mask / node_mask / llc_size / share_cache / domains / distance ...
//! CpuSet            fixed 1024-bit mask: set/contains/and/or/iter/iter_wrap (for_each_cpu_wrap)
//!
//! CpuSnapshot { idle, nr_running, nr_delayed, ttwu_pending, wakeup_in_flight,
//!               sched_idle_only, load, util, util_est, runnable, capacity, avg_idle_ns,
//!               idle_exit_ns, idle_stamp_ns }
//!                                                                     // slice indexed by CPU
//! TaskState   { pid, prev_cpu, recent_used_cpu, wakee_flips, last_wakee,
//!               wakee_flip_decay_ts, allowed, load, util, is_per_cpu_kthread }
//! WakeCtx     { wake_flags (WAKE_SYNC|WAKE_TTWU|WAKE_FORK), waker_cpu,
//!               waker_context: Task|Softirq|Hardirq, waker_exiting, waker: TaskState, now_ns }
//!
//! Config::from_preset("v6.12")?; cfg.set("sync_excludes_delayed", "true")?; cfg.validate()?;
//! Config::from_preset_with("v5.10", &["recent_used=search-target"])?;
//! cfg.describe(); cfg.get(key); FLAGS; PRESETS; PolicySpec (serde); the CLI is crate::cli::PolicyArgs
//!
//! let mut engine = Engine::new(topology, config)?;
//! let d: Decision = engine.select_cpu(&snapshots, &mut wakee, &mut wake_ctx);
//!     d.cpu, d.chain (RuleChain of Rule, each .name() snake_case + .text()),
//!     d.path, d.sync, d.want_affine, d.affine_domain, d.sis_target, d.sis_nr, d.scanned,
//!     d.counted (Counters delta)
//! let n: NewIdleDecision = engine.newidle_pull(cpu, &snapshots, &[PullCandidate { .. }]);
//! engine.counters() / reset_counters(); Counters::{add, diff, fields}
//! engine.set(key, value)  (runtime, validated); engine.on_cpu_idle(cpu, &snaps)  (idle-core hint)
//!
//! DelayedDequeue::new(nr_cpus, enabled): on_sleep(cpu, pid, lag_ns, now) / on_wake(pid)
//!     / expire(now) / on_cpu_idle(cpu) / nr_delayed(cpu) / apply_to(&mut snaps)
//!
//! TraceRecord::new(&topo, &cfg, &llc_states, &snaps, &wakee, &wake_ctx, &d).to_json_line()
//!     one decision's inputs and outcome, as the agent, the oracle and explain --trace share
//!     them; TopologyInput::build(read_sysfs), CpuStates::resolve(nr), WakeInput::to_ctx(nr)
//! rng::XorShift::new(seed): below/chance/pick/jitter; rng::{idle_cpu, busy_counts}
//!     deterministic draws for whatever drives the engine (the simulator, tests, benchmarks)
//! ```
//!
//! Driving the engine over time (simulator, live agent): keep one `TaskState` per task and
//! copy the waker's back from `WakeCtx::waker` after each call; feed `DelayedDequeue` from
//! sleep/wake events when `Config::delayed_dequeue` is on and fill the snapshots from it;
//! call `Engine::on_cpu_idle` when a CPU goes idle (or `sync_idle_core_hints` before a
//! decision if idle transitions are not modelled) so the LLC's idle-core hint behaves like
//! the kernel's; the SIS_PROP scan-cost average lives in the engine and needs nothing.
//!
//! Conventions: CPU ids are `usize` indices into the topology and the snapshot slice; ids
//! outside the topology are tolerated (never idle, never chosen) and never panic.  The
//! chosen CPU is always online and allowed when the task has an allowed online CPU
//! (`select_fallback_rq()` emulation).  All input and output types are serde
//! (de)serialisable for scenario files and decision traces.
//!
//! ## Flags (declared once, in `config`'s `flags!` table; `config::FLAGS` has the full help texts)
//!
//! Rendered from `FLAGS` by `flag_table()`, as is README.md's; `tests/flag_tables.rs` checks
//! both, and `WAKELAB_UPDATE_FLAG_TABLES=1 cargo test --test flag_tables` rewrites them.
//!
//! | flag (`--set KEY=VALUE` or `--KEY VALUE`) | patch | status |
//! |---|---|---|
//! | `sync_requires_task_waker` | seed 1, Barry Song 2021: a sync wake-up pulls to the waker's CPU only when the waker is a task, not an interrupt | never merged |
//! | `newidle_skip_pending_wakeup` | seed 2, Rik van Riel 2021 (e5e678e4): skip the newly-idle pull while a wake-up is pending | v5.14 |
//! | `newidle_gate_on_domain_cost` | the newly-idle balance needs avg_idle above the innermost domain's `max_newidle_lb_cost`, not above 500 us | v5.16 |
//! | `delayed_dequeue` | delayed dequeue (152e11f6): sleepers with lag stay counted on their CPU | v6.12 |
//! | `sync_excludes_delayed` | seed 3, Xuewen Yan 2025 (aa3ee4f0): the sync check counts runnable tasks only | v6.16, 6.12.y |
//! | `recent_used` = `off` / `v5.10` / `prev` / `prev-fixed` / `search-target` | seed 4, Mel Gorman Dec 2020 patch 3: `off` no recent CPU (an ablation); `v5.10` the v5.10 behaviour; `prev` 89aafd67 + a7ba8948 (keeps Hillf's mask-test bug); `prev-fixed` ae2ad293; `search-target` Mel's never-merged idea | off: no kernel / v5.10: ≤v5.14 / prev: v5.15 / prev-fixed: v6.5, 6.1.y / search-target: never |
//! | `idle_scan` = `three-scan` / `single-pass` | 9fe1f127 + 6cd56ef1: one pass over the LLC instead of v5.10's three scans (idle core, idle CPU, the target's SMT siblings) | three-scan: ≤v5.11 / single-pass: v5.12 |
//! | `idle_candidate` | seed 4 patch 4 (merged inside 9fe1f127): a failed idle-core search returns the first idle CPU it saw | v5.12 |
//! | `select_idle_smt_prev` | c722f35b: prev's SMT siblings before the LLC scan | v5.13 |
//! | `scan_skips_target` | 56498cfb: the idle-CPU scan starts after the target | v5.15 |
//! | `sis` = `none` / `prop` / `util` | `none` the whole LLC; `prop` SIS_PROP (idle estimate per `sis_prop_wake_avg_idle`); `util` SIS_UTIL (70fb5ccf; depth computed at each decision, see `--help`) | none: no kernel / prop: ≤v6.6 / util: v6.0+ |
//! | `sis_prop_wake_avg_idle` | 94aafc3e: SIS_PROP reads the aged `rq->wake_avg_idle` instead of `avg_idle / 512` | v5.14 |
//! | `sis_prop_cost_per_cpu_ns` | SIS_PROP emulation: the scan cost charged per CPU examined (the kernel measures it) | emulation |
//! | `sis_prop_cost_fixed_ns` | SIS_PROP emulation: the scan cost charged per scan | emulation |
//! | `wa_idle` | sched_feat WA_IDLE: `wake_affine_idle()` | always |
//! | `wa_weight` | sched_feat WA_WEIGHT: `wake_affine_weight()` | always |
//! | `wa_bias` | sched_feat WA_BIAS: `wake_affine_weight()` favours the waker's CPU | always |
//! | `wa_idle_prev_idle` | d8fcb81f: `wake_affine_idle()` keeps an idle prev before WA_WEIGHT is asked | v5.11 |
//! | `affine_tally_excludes_prev` | 39afe5d6: `nr_wakeups_affine` no longer counts WA_IDLE keeping prev (counter only) | v6.4, 5.15.y, 6.1.y |
//! | `fork_numa_rule` = `local-idle` / `imb-numa-nr` | fork/exec slow path: how a NUMA domain with spare local capacity keeps a new task on its node | local-idle: ≤v5.10 / imb-numa-nr: v5.18+ |
//! | `imbalance_pct_llc` | domain parameter: `imbalance_pct` of the LLC and wider domains | always 117 |
//! | `imbalance_pct_smt` | domain parameter: `imbalance_pct` of the SMT domain | always 110 |
//! | `kthread_stacking_requires_task` | 8b4e74cc: per-CPU-kthread stacking in `select_idle_sibling()` needs `in_task()` | v5.17, 5.10.y |
//!
//! ## Not modelled
//! Asymmetric capacity (`select_idle_capacity`, `asym_fits_cpu`), clusters (v6.7), EAS,
//! `WF_CURRENT_CPU`, core scheduling cookies and the full `load_balance()` behind the
//! newly-idle pull (simplified and documented at its function).  SIS_UTIL's depth is the
//! kernel's formula, computed at each decision rather than at the kernel's periodic
//! balance (see `idle_scan::sis_util_nr_idle_scan`).

/// `impl Deserialize for $ty` through a unit visitor: `expecting` says what the input
/// should be, the visitor's `visit_*` methods are given as they are, and `$call` is the
/// `Deserializer` method to drive it (`deserialize_any`, `deserialize_seq`).  Types with a
/// JSON form of more than one shape (a cpulist string or an array) share this frame.
macro_rules! deserialize_by_visitor {
    ($ty:ty, $expecting:expr, $call:ident, { $($methods:tt)* }) => {
        impl<'de> serde::Deserialize<'de> for $ty {
            fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
                struct V;
                impl<'de> serde::de::Visitor<'de> for V {
                    type Value = $ty;
                    fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                        f.write_str($expecting)
                    }
                    $($methods)*
                }
                d.$call(V)
            }
        }
    };
}
pub(crate) use deserialize_by_visitor;

pub mod config;
pub mod counters;
pub mod cpuset;
pub mod delayed;
pub mod engine;
pub mod idle_scan;
pub mod newidle;
pub mod pelt;
pub mod rng;
pub mod rules;
pub mod slow_path;
pub mod topology;
pub mod trace;
pub mod types;

pub use config::{
    Config, ConfigError, FLAGS, FlagKind, FlagSpec, FlagType, FlagValue, IdleScan, PRESET_NAMES,
    PRESETS, PolicySpec, Preset, RecentUsedMode, SisMode, flag_table,
};
pub use counters::Counters;
pub use cpuset::{CpuSet, MAX_CPUS};
pub use delayed::{DelayedDequeue, DelayedTask};
pub use engine::{
    Decision, Engine, LlcState, NewIdleDecision, Path, PullCandidate, Pulled, WeightInputs,
    WeightOutcome, record_wakee, wake_affine_weight_calc, wake_wide,
};
pub use rules::{Rule, RuleChain};
pub use topology::{
    CpuDesc, Distance, DomainLevel, SCHED_CAPACITY_SCALE, Shape, Topology, TopologyError,
    TopologySpec,
};
pub use trace::{
    CpuBase, CpuState, CpuStateMap, CpuStateValue, CpuStates, DEFAULT_WAKER_PID, Estimated,
    LlcStateInput, MAX_OVERRIDES, TopologyInput, TraceRecord, WakeInput, WakeKind, parse_shape,
    policy_spec_of,
};
pub use types::{
    CpuSnapshot, TaskState, WAKE_EXEC, WAKE_FORK, WAKE_SYNC, WAKE_TTWU, WakeCtx, WakerContext,
};

#[cfg(test)]
mod test_util;
#[cfg(test)]
pub(crate) mod tests_alloc;
#[cfg(test)]
mod tests_config;
#[cfg(test)]
mod tests_engine;
#[cfg(test)]
mod tests_props;
#[cfg(test)]
mod tests_seeds;
#[cfg(test)]
mod tests_slow_path;
