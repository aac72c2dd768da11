//! Policy configuration: one independent flag per upstream patch behaviour, kernel presets,
//! `key=value` overrides and validation.  The command line is `crate::cli`.
//!
//! Composition rule: a preset first, then overrides in the order given, then
//! [`Config::validate`] once on the result.  [`Config::set`] only parses and range-checks a
//! single value, so an override sequence may pass through an inconsistent intermediate
//! state (e.g. switching `idle_scan` and `idle_candidate` one after the other).
//!
//! Combinations, decided and documented here:
//! - `idle_scan=single-pass` with `idle_candidate=false` is **rejected**: the single pass
//!   (9fe1f127) exists to keep the candidate; without it a failed core search would return
//!   nothing at all, worse than any kernel ever was.  Use `idle_scan=three-scan` to drop the
//!   candidate.
//! - `idle_scan=three-scan` with `idle_candidate=true` is **accepted**: it is Mel Gorman's
//!   Dec 2020 v2 patch 4 as posted (the candidate returned after the v5.10 core scan).
//! - `sync_excludes_delayed=true` with `delayed_dequeue=false` is **accepted** and a no-op:
//!   it is a v6.16 kernel booted with `NO_DELAY_DEQUEUE`.
//! - `recent_used=search-target` with either scan form is accepted (Mel's idea was written
//!   against the three-scan v5.10 code).
//! - `select_idle_smt_prev` with `three-scan` is accepted as an ablation (v5.10 plus the
//!   v5.13 prev-sibling check ahead of the three scans).
//! - `sis=util` with `three-scan` is accepted as an ablation (SIS_UTIL's depth applied to
//!   v5.10's `select_idle_cpu`).
//! - `wa_bias` without `wa_weight` is accepted (the kernel lets the sched_feats be toggled
//!   independently); it has no effect.
//! - Numeric parameters: `imbalance_pct_*` must be 100..=1000 and SIS_PROP's emulated scan
//!   cost per CPU must be at least 1 ns (a zero cost would make the depth formula divide by
//!   the +1 fudge alone and scan without limit).

use std::collections::BTreeMap;
use std::fmt;

use serde::{Deserialize, Serialize};

/// Seed 4: how `p->recent_used_cpu` is used and updated.  Variants are the reference's
/// table (§5): A, B/B0/B' (one behaviour), C, D.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum RecentUsedMode {
    /// No recent_used_cpu check and no writes (an ablation; no kernel).
    #[serde(rename = "off")]
    Off,
    /// Variant A, v5.10-v5.14: returned on a hit, replaced with prev only on a hit, and the
    /// waker records its own CPU in `select_task_rq_fair` when `want_affine`.
    #[serde(rename = "v5.10")]
    V510,
    /// Variant B', Mel's patch 3 as merged (89aafd67, v5.15) plus a7ba8948 (v5.16): prev
    /// always becomes the next recent CPU, written before the check; the waker-side write is
    /// gone.  Keeps the allowed-mask bug: the test reads `p->recent_used_cpu`, which now holds
    /// prev, so a recent CPU outside the mask can be returned (Hillf Danton's catch).
    /// Variants B0 (v2 as posted) and B (89aafd67 alone) behave identically.
    #[serde(rename = "prev")]
    Prev,
    /// Variant D, ae2ad293 (v6.5-rc2 and stable): as `prev`, but the mask test reads
    /// `recent_used_cpu` itself.
    #[serde(rename = "prev-fixed")]
    PrevFixed,
    /// Variant C, Mel's never-merged "search target" (11 Dec 2020): an idle cache-affine
    /// recent CPU becomes the scan target instead of being returned; prev is always written.
    #[serde(rename = "search-target")]
    SearchTarget,
}

/// The LLC scan after the cheap checks of `select_idle_sibling()`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum IdleScan {
    /// v5.10: `select_idle_core`, then `select_idle_cpu` (SIS-limited), then
    /// `select_idle_smt(target)`.
    #[serde(rename = "three-scan")]
    ThreeScan,
    /// v5.12+: one pass (9fe1f127, with 6cd56ef1 removing select_idle_smt) that searches
    /// idle cores when the LLC hints one exists and idle CPUs otherwise.
    #[serde(rename = "single-pass")]
    SinglePass,
}

/// The scan-depth limit of the idle-CPU search.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum SisMode {
    /// Scan the whole LLC.
    #[serde(rename = "none")]
    None,
    /// SIS_PROP (v5.10 formula): depth from the waker CPU's avg_idle over the LLC's
    /// avg_scan_cost.  Removed upstream in v6.7 (984ffb6a).
    #[serde(rename = "prop")]
    Prop,
    /// SIS_UTIL (70fb5ccf, v6.0): depth from the target LLC's utilisation.  The formula is
    /// a documented approximation (see `idle_scan::sis_util_nr_idle_scan`).
    #[serde(rename = "util")]
    Util,
}

/// Every behaviour the engine can switch.  `Default` is `mainline`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct Config {
    /// Seed 1 (Barry Song, Apr 2021, never merged): the sync shortcut of
    /// `wake_affine_idle()` also requires `in_task()`.
    pub sync_requires_task_waker: bool,
    /// Seed 2 (Rik van Riel, e5e678e4, v5.14): the newly-idle pull bails out when a
    /// wake-up is pending on the CPU.
    pub newidle_skip_pending_wakeup: bool,
    /// Delayed dequeue (152e11f6, v6.12): sleepers with lag stay counted in `nr_running`.
    /// When off the engine ignores `CpuSnapshot::nr_delayed`.
    pub delayed_dequeue: bool,
    /// Seed 3 (Xuewen Yan, aa3ee4f0, v6.16 and 6.12.y): the sync shortcut tests
    /// `nr_running - nr_delayed == 1`.
    pub sync_excludes_delayed: bool,
    /// Seed 4, patch 3 and its variants.
    pub recent_used: RecentUsedMode,
    /// Three-scan (v5.10) or single pass (v5.12+).
    pub idle_scan: IdleScan,
    /// Seed 4, patch 4 (9fe1f127 as merged, v5.12): keep the first idle CPU seen by a
    /// failed idle-core search and return it.
    pub idle_candidate: bool,
    /// c722f35b (v5.13): with no idle core expected, try prev's SMT siblings before the LLC
    /// scan.
    pub select_idle_smt_prev: bool,
    /// 56498cfb (v5.15): the idle-CPU scan starts at target + 1 (the target was just
    /// tested).
    pub scan_skips_target: bool,
    /// Scan-depth limit.
    pub sis: SisMode,
    /// SIS_PROP emulation: cost in ns of examining one CPU in the idle-CPU scan (the kernel
    /// measures `cpu_clock()` around the loop; the emulation charges this per CPU).
    pub sis_prop_cost_per_cpu_ns: u64,
    /// SIS_PROP emulation: fixed cost in ns of one idle-CPU scan.
    pub sis_prop_cost_fixed_ns: u64,
    /// sched_feat WA_IDLE (default on).
    pub wa_idle: bool,
    /// sched_feat WA_WEIGHT (default on).
    pub wa_weight: bool,
    /// sched_feat WA_BIAS (default on).
    pub wa_bias: bool,
    /// `sd->imbalance_pct` of LLC and wider domains (117).
    pub imbalance_pct_llc: u32,
    /// `sd->imbalance_pct` of the SMT domain (110).
    pub imbalance_pct_smt: u32,
    /// 8b4e74cc (v5.17, also 5.10.y): per-CPU-kthread stacking needs `in_task()`.
    pub kthread_stacking_requires_task: bool,
}

impl Default for Config {
    fn default() -> Self {
        preset_v6_16()
    }
}

/// A configuration error, with enough context to fix it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ConfigError {
    UnknownPreset {
        name: String,
    },
    UnknownKey {
        key: String,
    },
    BadValue {
        key: String,
        value: String,
        expected: String,
    },
    /// A `--set` argument without `=`.
    BadSyntax {
        arg: String,
    },
    /// A combination that makes no sense.
    Conflict {
        reason: String,
    },
}

impl fmt::Display for ConfigError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ConfigError::UnknownPreset { name } => write!(
                f,
                "unknown preset '{name}'; known presets: {}",
                PRESETS
                    .iter()
                    .map(|p| p.name)
                    .collect::<Vec<_>>()
                    .join(", ")
            ),
            ConfigError::UnknownKey { key } => write!(
                f,
                "unknown policy flag '{key}'; known flags: {}",
                FLAGS.iter().map(|f| f.key).collect::<Vec<_>>().join(", ")
            ),
            ConfigError::BadValue {
                key,
                value,
                expected,
            } => {
                write!(f, "bad value '{value}' for '{key}': expected {expected}")
            }
            ConfigError::BadSyntax { arg } => {
                write!(f, "expected KEY=VALUE, got '{arg}'")
            }
            ConfigError::Conflict { reason } => write!(f, "inconsistent policy flags: {reason}"),
        }
    }
}

impl std::error::Error for ConfigError {}

/// Description of one flag: key, accepted values, what it reproduces and its status.
#[derive(Clone, Copy, Debug)]
pub struct FlagSpec {
    pub key: &'static str,
    /// Accepted values, e.g. "true|false" or "off|v5.10|prev|prev-fixed|search-target".
    pub values: &'static str,
    /// What the flag does and which patch it reproduces, with its upstream status.
    pub help: &'static str,
}

/// Every flag, in the order `describe()` lists them.
pub const FLAGS: &[FlagSpec] = &[
    FlagSpec {
        key: "sync_requires_task_waker",
        values: "true|false",
        help: "Seed 1, Barry Song, \"sched/fair: don't use waker's cpu if the waker of sync \
               wake-up is interrupt\" (2021-04-27): the sync shortcut of wake_affine_idle() \
               also requires in_task(). Never merged.",
    },
    FlagSpec {
        key: "newidle_skip_pending_wakeup",
        values: "true|false",
        help: "Seed 2, Rik van Riel, \"sched,fair: Skip newidle_balance if a wakeup is \
               pending\" (e5e678e4): a CPU going idle does not pull when ttwu_pending is set. \
               Merged in v5.14.",
    },
    FlagSpec {
        key: "delayed_dequeue",
        values: "true|false",
        help: "Delayed dequeue, \"sched/fair: Implement delayed dequeue\" (152e11f6): a task \
               that sleeps with lag stays counted in nr_running until the lag elapses \
               (sched_feat DELAY_DEQUEUE). Merged in v6.12.",
    },
    FlagSpec {
        key: "sync_excludes_delayed",
        values: "true|false",
        help: "Seed 3, Xuewen Yan, \"sched/fair: Fixup wake_up_sync() vs DELAYED_DEQUEUE\" \
               (aa3ee4f0): the sync shortcut tests nr_running - nr_delayed == 1. Merged in \
               v6.16, backported to 6.12.y. No effect without delayed_dequeue.",
    },
    FlagSpec {
        key: "recent_used",
        values: "off|v5.10|prev|prev-fixed|search-target",
        help: "Seed 4, Mel Gorman's patch 3 and its variants for p->recent_used_cpu: v5.10 = \
               return it on a hit and replace it with prev on a hit, the waker records its own \
               CPU (up to v5.14); prev = 89aafd67 + a7ba8948, prev always becomes the next \
               recent CPU, allowed-mask test wrongly reads prev (v5.15-v6.4); prev-fixed = \
               ae2ad293, mask test fixed (v6.5+); search-target = Mel's idle recent CPU as scan \
               target (never merged); off = no recent_used_cpu (ablation).",
    },
    FlagSpec {
        key: "idle_scan",
        values: "three-scan|single-pass",
        help: "LLC scan form: three-scan = v5.10 select_idle_core, select_idle_cpu, \
               select_idle_smt(target); single-pass = 9fe1f127 + 6cd56ef1, one pass over the \
               LLC (merged in v5.12).",
    },
    FlagSpec {
        key: "idle_candidate",
        values: "true|false",
        help: "Seed 4, Mel Gorman's patch 4: a failed idle-core search returns the first idle \
               CPU it saw. Merged in v5.12 as part of 9fe1f127 (required by single-pass); with \
               three-scan it is the Dec 2020 v2 patch as posted.",
    },
    FlagSpec {
        key: "select_idle_smt_prev",
        values: "true|false",
        help: "Rik van Riel, \"sched/fair: Bring back select_idle_smt(), but differently\" \
               (c722f35b): when no idle core is expected, check prev's SMT siblings before the \
               LLC scan. Merged in v5.13.",
    },
    FlagSpec {
        key: "scan_skips_target",
        values: "true|false",
        help: "Mel Gorman, \"sched/fair: Avoid a second scan of target in select_idle_cpu\" \
               (56498cfb): the scan starts at target + 1. Merged in v5.15.",
    },
    FlagSpec {
        key: "sis",
        values: "none|prop|util",
        help: "Idle-CPU scan depth: prop = SIS_PROP, v5.10 formula with emulated avg_idle and \
               avg_scan_cost (removed in v6.7); util = SIS_UTIL, nr_idle_scan from LLC \
               utilisation (70fb5ccf, v6.0; formula approximated, unverified); none = whole LLC.",
    },
    FlagSpec {
        key: "sis_prop_cost_per_cpu_ns",
        values: "integer >= 1 (ns)",
        help: "SIS_PROP emulation: scan cost charged per CPU examined, folded into the LLC's \
               avg_scan_cost like the kernel's cpu_clock() measurement.",
    },
    FlagSpec {
        key: "sis_prop_cost_fixed_ns",
        values: "integer >= 0 (ns)",
        help: "SIS_PROP emulation: fixed cost charged per idle-CPU scan.",
    },
    FlagSpec {
        key: "wa_idle",
        values: "true|false",
        help: "sched_feat WA_IDLE: wake_affine_idle(), decide from idleness and the sync hint. \
               Default on in every kernel.",
    },
    FlagSpec {
        key: "wa_weight",
        values: "true|false",
        help: "sched_feat WA_WEIGHT: wake_affine_weight(), compare capacity-scaled loads. \
               Default on in every kernel.",
    },
    FlagSpec {
        key: "wa_bias",
        values: "true|false",
        help: "sched_feat WA_BIAS: bias wake_affine_weight() towards prev by half the domain's \
               imbalance_pct margin. Default on in every kernel.",
    },
    FlagSpec {
        key: "imbalance_pct_llc",
        values: "integer 100..=1000",
        help: "sd->imbalance_pct of the LLC and wider domains (kernel: 117).",
    },
    FlagSpec {
        key: "imbalance_pct_smt",
        values: "integer 100..=1000",
        help: "sd->imbalance_pct of the SMT domain (kernel: 110).",
    },
    FlagSpec {
        key: "kthread_stacking_requires_task",
        values: "true|false",
        help: "8b4e74cc, \"sched/fair: Fix detection of per-CPU kthreads waking a task\": \
               per-CPU-kthread stacking in select_idle_sibling() needs in_task(). Merged in \
               v5.17, backported to 5.10.y.",
    },
];

/// A named kernel configuration.
#[derive(Clone, Copy, Debug)]
pub struct Preset {
    pub name: &'static str,
    /// Which kernel and which patch set this is.
    pub doc: &'static str,
    build: fn() -> Config,
}

impl Preset {
    pub fn config(&self) -> Config {
        (self.build)()
    }
}

/// v5.10 (as v5.10.13, the reference's source).
fn preset_v5_10() -> Config {
    Config {
        sync_requires_task_waker: false,
        newidle_skip_pending_wakeup: false,
        delayed_dequeue: false,
        sync_excludes_delayed: false,
        recent_used: RecentUsedMode::V510,
        idle_scan: IdleScan::ThreeScan,
        idle_candidate: false,
        select_idle_smt_prev: false,
        scan_skips_target: false,
        sis: SisMode::Prop,
        sis_prop_cost_per_cpu_ns: 40,
        sis_prop_cost_fixed_ns: 100,
        wa_idle: true,
        wa_weight: true,
        wa_bias: true,
        imbalance_pct_llc: 117,
        imbalance_pct_smt: 110,
        kthread_stacking_requires_task: false,
    }
}

fn preset_v5_12() -> Config {
    Config {
        idle_scan: IdleScan::SinglePass,
        idle_candidate: true,
        ..preset_v5_10()
    }
}

fn preset_v5_13() -> Config {
    Config {
        select_idle_smt_prev: true,
        ..preset_v5_12()
    }
}

fn preset_v5_14() -> Config {
    Config {
        newidle_skip_pending_wakeup: true,
        ..preset_v5_13()
    }
}

fn preset_v5_15() -> Config {
    Config {
        recent_used: RecentUsedMode::Prev,
        scan_skips_target: true,
        ..preset_v5_14()
    }
}

fn preset_v6_0() -> Config {
    Config {
        sis: SisMode::Util,
        kthread_stacking_requires_task: true,
        ..preset_v5_15()
    }
}

fn preset_v6_5() -> Config {
    Config {
        recent_used: RecentUsedMode::PrevFixed,
        ..preset_v6_0()
    }
}

fn preset_v6_12() -> Config {
    Config {
        delayed_dequeue: true,
        ..preset_v6_5()
    }
}

fn preset_v6_12_y() -> Config {
    Config {
        sync_excludes_delayed: true,
        ..preset_v6_12()
    }
}

fn preset_v6_16() -> Config {
    Config {
        sync_excludes_delayed: true,
        ..preset_v6_12()
    }
}

fn preset_mainline_barry() -> Config {
    Config {
        sync_requires_task_waker: true,
        ..preset_v6_16()
    }
}

/// Every preset.  Cluster-aware scanning (v6.7) is not modelled, so v6.7+ presets behave as
/// their kernels do on machines without CONFIG_SCHED_CLUSTER groups.
pub const PRESETS: &[Preset] = &[
    Preset {
        name: "v5.10",
        doc: "Linux v5.10 (v5.10.13): three-scan select_idle_sibling with SIS_PROP, \
              recent_used_cpu variant A (waker records its CPU), per-CPU-kthread stacking from \
              any context; none of the seed patches.",
        build: preset_v5_10,
    },
    Preset {
        name: "v5.12",
        doc: "v5.10 + Mel Gorman's merged SIS rework: SIS_AVG_CPU removed, scan cost under \
              SIS_PROP, 6cd56ef1 (select_idle_smt removed) and 9fe1f127 (single pass with the \
              idle candidate, seed 4 patch 4).",
        build: preset_v5_12,
    },
    Preset {
        name: "v5.13",
        doc: "v5.12 + c722f35b (select_idle_smt(prev) before the LLC scan).",
        build: preset_v5_13,
    },
    Preset {
        name: "v5.14",
        doc: "v5.13 + e5e678e4 (seed 2: skip newidle balance when a wake-up is pending).",
        build: preset_v5_14,
    },
    Preset {
        name: "v5.15",
        doc: "v5.14 + 89aafd67 (seed 4 patch 3: prev becomes recent_used_cpu, with the \
              allowed-mask bug; a7ba8948 from v5.16/5.15.y behaves the same) + 56498cfb (scan \
              starts at target + 1). Per-CPU-kthread stacking still from any context.",
        build: preset_v5_15,
    },
    Preset {
        name: "v6.0",
        doc: "v5.15 + 8b4e74cc (v5.17: kthread stacking needs in_task()) + SIS_UTIL in place \
              of SIS_PROP (70fb5ccf).",
        build: preset_v6_0,
    },
    Preset {
        name: "v6.5",
        doc: "v6.0 + ae2ad293 (recent_used_cpu mask test fixed: variant D).",
        build: preset_v6_5,
    },
    Preset {
        name: "v6.12",
        doc: "v6.5 + delayed dequeue (152e11f6, DELAY_DEQUEUE on) as released in v6.12, \
              without the seed-3 fix; SIS_PROP gone since v6.7.",
        build: preset_v6_12,
    },
    Preset {
        name: "v6.12.y",
        doc: "v6.12 stable after July 2025: + aa3ee4f0 (seed 3 fix backported).",
        build: preset_v6_12_y,
    },
    Preset {
        name: "v6.16",
        doc: "v6.12 + aa3ee4f0 (seed 3: the sync shortcut excludes delayed tasks). Same as \
              mainline for every behaviour modelled here.",
        build: preset_v6_16,
    },
    Preset {
        name: "mainline",
        doc: "Current mainline; identical to v6.16 for every behaviour modelled here.",
        build: preset_v6_16,
    },
    Preset {
        name: "mainline+barry",
        doc: "mainline + seed 1 (Barry Song's never-merged in_task() requirement on the sync \
              shortcut).",
        build: preset_mainline_barry,
    },
];

/// Preset names, for the command line's possible values.
pub const PRESET_NAMES: &[&str] = &[
    "v5.10",
    "v5.12",
    "v5.13",
    "v5.14",
    "v5.15",
    "v6.0",
    "v6.5",
    "v6.12",
    "v6.12.y",
    "v6.16",
    "mainline",
    "mainline+barry",
];

fn parse_bool(key: &str, v: &str) -> Result<bool, ConfigError> {
    match v.trim().to_ascii_lowercase().as_str() {
        "true" | "on" | "yes" | "1" => Ok(true),
        "false" | "off" | "no" | "0" => Ok(false),
        _ => Err(bad(key, v, "true|false (also on/off, yes/no, 1/0)")),
    }
}

fn parse_u64(key: &str, v: &str, min: u64, max: u64, expected: &str) -> Result<u64, ConfigError> {
    match v.trim().parse::<u64>() {
        Ok(n) if (min..=max).contains(&n) => Ok(n),
        _ => Err(bad(key, v, expected)),
    }
}

fn bad(key: &str, v: &str, expected: &str) -> ConfigError {
    ConfigError::BadValue {
        key: key.into(),
        value: v.into(),
        expected: expected.into(),
    }
}

impl RecentUsedMode {
    pub fn as_str(self) -> &'static str {
        match self {
            RecentUsedMode::Off => "off",
            RecentUsedMode::V510 => "v5.10",
            RecentUsedMode::Prev => "prev",
            RecentUsedMode::PrevFixed => "prev-fixed",
            RecentUsedMode::SearchTarget => "search-target",
        }
    }
    pub fn parse(v: &str) -> Option<Self> {
        Some(match v.trim() {
            "off" => RecentUsedMode::Off,
            "v5.10" | "a" | "A" => RecentUsedMode::V510,
            "prev" | "b" | "B" => RecentUsedMode::Prev,
            "prev-fixed" | "d" | "D" => RecentUsedMode::PrevFixed,
            "search-target" | "c" | "C" => RecentUsedMode::SearchTarget,
            _ => return None,
        })
    }
}

impl IdleScan {
    pub fn as_str(self) -> &'static str {
        match self {
            IdleScan::ThreeScan => "three-scan",
            IdleScan::SinglePass => "single-pass",
        }
    }
    pub fn parse(v: &str) -> Option<Self> {
        match v.trim() {
            "three-scan" => Some(IdleScan::ThreeScan),
            "single-pass" => Some(IdleScan::SinglePass),
            _ => None,
        }
    }
}

impl SisMode {
    pub fn as_str(self) -> &'static str {
        match self {
            SisMode::None => "none",
            SisMode::Prop => "prop",
            SisMode::Util => "util",
        }
    }
    pub fn parse(v: &str) -> Option<Self> {
        match v.trim() {
            "none" => Some(SisMode::None),
            "prop" => Some(SisMode::Prop),
            "util" => Some(SisMode::Util),
            _ => None,
        }
    }
}

impl Config {
    /// The named preset (see [`PRESETS`]).
    pub fn from_preset(name: &str) -> Result<Config, ConfigError> {
        PRESETS
            .iter()
            .find(|p| p.name == name.trim())
            .map(Preset::config)
            .ok_or_else(|| ConfigError::UnknownPreset { name: name.into() })
    }

    /// A preset followed by `key=value` overrides, validated once at the end.
    pub fn from_preset_with<S: AsRef<str>>(
        preset: &str,
        overrides: &[S],
    ) -> Result<Config, ConfigError> {
        let mut c = Config::from_preset(preset)?;
        for o in overrides {
            c.set_kv(o.as_ref())?;
        }
        c.validate()?;
        Ok(c)
    }

    /// Parses and applies one `key=value` string.
    pub fn set_kv(&mut self, kv: &str) -> Result<(), ConfigError> {
        let (k, v) = kv
            .split_once('=')
            .ok_or_else(|| ConfigError::BadSyntax { arg: kv.into() })?;
        self.set(k.trim(), v.trim())
    }

    /// Sets one flag from strings (CLI `--set`, runtime `set` command).  Checks the value's
    /// syntax and range only; call [`Config::validate`] after the last override.
    pub fn set(&mut self, key: &str, value: &str) -> Result<(), ConfigError> {
        let key = key.trim().replace('-', "_");
        let k = key.as_str();
        let v = value;
        match k {
            "sync_requires_task_waker" => self.sync_requires_task_waker = parse_bool(k, v)?,
            "newidle_skip_pending_wakeup" => self.newidle_skip_pending_wakeup = parse_bool(k, v)?,
            "delayed_dequeue" => self.delayed_dequeue = parse_bool(k, v)?,
            "sync_excludes_delayed" => self.sync_excludes_delayed = parse_bool(k, v)?,
            "recent_used" => {
                self.recent_used = RecentUsedMode::parse(v)
                    .ok_or_else(|| bad(k, v, "off|v5.10|prev|prev-fixed|search-target"))?
            }
            "idle_scan" => {
                self.idle_scan =
                    IdleScan::parse(v).ok_or_else(|| bad(k, v, "three-scan|single-pass"))?
            }
            "idle_candidate" => self.idle_candidate = parse_bool(k, v)?,
            "select_idle_smt_prev" => self.select_idle_smt_prev = parse_bool(k, v)?,
            "scan_skips_target" => self.scan_skips_target = parse_bool(k, v)?,
            "sis" => self.sis = SisMode::parse(v).ok_or_else(|| bad(k, v, "none|prop|util"))?,
            "sis_prop_cost_per_cpu_ns" => {
                self.sis_prop_cost_per_cpu_ns = parse_u64(
                    k,
                    v,
                    1,
                    1_000_000_000,
                    "an integer number of ns, at least 1",
                )?
            }
            "sis_prop_cost_fixed_ns" => {
                self.sis_prop_cost_fixed_ns =
                    parse_u64(k, v, 0, 1_000_000_000, "an integer number of ns, 0 or more")?
            }
            "wa_idle" => self.wa_idle = parse_bool(k, v)?,
            "wa_weight" => self.wa_weight = parse_bool(k, v)?,
            "wa_bias" => self.wa_bias = parse_bool(k, v)?,
            "imbalance_pct_llc" => {
                self.imbalance_pct_llc =
                    parse_u64(k, v, 100, 1000, "an integer percentage 100..=1000")? as u32
            }
            "imbalance_pct_smt" => {
                self.imbalance_pct_smt =
                    parse_u64(k, v, 100, 1000, "an integer percentage 100..=1000")? as u32
            }
            "kthread_stacking_requires_task" => {
                self.kthread_stacking_requires_task = parse_bool(k, v)?
            }
            _ => return Err(ConfigError::UnknownKey { key: key.clone() }),
        }
        Ok(())
    }

    /// The current value of a flag, formatted so that `set(key, &get(key))` is a no-op.
    pub fn get(&self, key: &str) -> Option<String> {
        let key = key.trim().replace('-', "_");
        Some(match key.as_str() {
            "sync_requires_task_waker" => self.sync_requires_task_waker.to_string(),
            "newidle_skip_pending_wakeup" => self.newidle_skip_pending_wakeup.to_string(),
            "delayed_dequeue" => self.delayed_dequeue.to_string(),
            "sync_excludes_delayed" => self.sync_excludes_delayed.to_string(),
            "recent_used" => self.recent_used.as_str().to_string(),
            "idle_scan" => self.idle_scan.as_str().to_string(),
            "idle_candidate" => self.idle_candidate.to_string(),
            "select_idle_smt_prev" => self.select_idle_smt_prev.to_string(),
            "scan_skips_target" => self.scan_skips_target.to_string(),
            "sis" => self.sis.as_str().to_string(),
            "sis_prop_cost_per_cpu_ns" => self.sis_prop_cost_per_cpu_ns.to_string(),
            "sis_prop_cost_fixed_ns" => self.sis_prop_cost_fixed_ns.to_string(),
            "wa_idle" => self.wa_idle.to_string(),
            "wa_weight" => self.wa_weight.to_string(),
            "wa_bias" => self.wa_bias.to_string(),
            "imbalance_pct_llc" => self.imbalance_pct_llc.to_string(),
            "imbalance_pct_smt" => self.imbalance_pct_smt.to_string(),
            "kthread_stacking_requires_task" => self.kthread_stacking_requires_task.to_string(),
            _ => return None,
        })
    }

    /// Rejects combinations that make no sense (see the module documentation).
    pub fn validate(&self) -> Result<(), ConfigError> {
        if self.idle_scan == IdleScan::SinglePass && !self.idle_candidate {
            return Err(ConfigError::Conflict {
                reason: "idle_scan=single-pass requires idle_candidate=true: the merged single \
                         pass (9fe1f127) is defined by returning the idle candidate; use \
                         idle_scan=three-scan to study the scan without it"
                    .into(),
            });
        }
        if self.sis_prop_cost_per_cpu_ns == 0 {
            return Err(ConfigError::Conflict {
                reason: "sis_prop_cost_per_cpu_ns must be at least 1 ns".into(),
            });
        }
        for (k, v) in [
            ("imbalance_pct_llc", self.imbalance_pct_llc),
            ("imbalance_pct_smt", self.imbalance_pct_smt),
        ] {
            if !(100..=1000).contains(&v) {
                return Err(ConfigError::Conflict {
                    reason: format!("{k}={v} is outside 100..=1000"),
                });
            }
        }
        Ok(())
    }

    /// Every flag with its current value and its description.
    pub fn flags(&self) -> Vec<(&'static FlagSpec, String)> {
        FLAGS
            .iter()
            .map(|f| (f, self.get(f.key).unwrap_or_default()))
            .collect()
    }

    /// Human-readable listing, one flag per line: `key = value  (values) help`.
    pub fn describe(&self) -> String {
        let width = FLAGS.iter().map(|f| f.key.len()).max().unwrap_or(0);
        let mut out = String::new();
        for (f, v) in self.flags() {
            out.push_str(&format!(
                "{:width$} = {:14} [{}]\n    {}\n",
                f.key, v, f.values, f.help
            ));
        }
        out
    }

    /// Names of the presets this config equals exactly (possibly several aliases).
    pub fn matching_presets(&self) -> Vec<&'static str> {
        PRESETS
            .iter()
            .filter(|p| p.config() == *self)
            .map(|p| p.name)
            .collect()
    }

    /// The flags whose value differs from `base`, as `key=value` strings.
    pub fn diff_from(&self, base: &Config) -> Vec<String> {
        FLAGS
            .iter()
            .filter_map(|f| {
                let (a, b) = (self.get(f.key)?, base.get(f.key)?);
                (a != b).then(|| format!("{}={a}", f.key))
            })
            .collect()
    }
}

/// A value in a scenario file's `set` map: `true`, `117` or `"search-target"`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum FlagValue {
    Bool(bool),
    Int(u64),
    Str(String),
}

impl fmt::Display for FlagValue {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            FlagValue::Bool(b) => write!(f, "{b}"),
            FlagValue::Int(n) => write!(f, "{n}"),
            FlagValue::Str(s) => f.write_str(s),
        }
    }
}

/// How a scenario file names its policy: a preset plus overrides.
/// `{"preset": "v6.12", "set": {"sync_excludes_delayed": true}}`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PolicySpec {
    #[serde(default = "default_preset_name")]
    pub preset: String,
    #[serde(default)]
    pub set: BTreeMap<String, FlagValue>,
}

fn default_preset_name() -> String {
    "mainline".into()
}

impl Default for PolicySpec {
    fn default() -> Self {
        PolicySpec {
            preset: default_preset_name(),
            set: BTreeMap::new(),
        }
    }
}

impl PolicySpec {
    pub fn to_config(&self) -> Result<Config, ConfigError> {
        let mut c = Config::from_preset(&self.preset)?;
        for (k, v) in &self.set {
            c.set(k, &v.to_string())?;
        }
        c.validate()?;
        Ok(c)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_preset_is_valid_and_listed() {
        assert_eq!(PRESET_NAMES.len(), PRESETS.len());
        for (p, n) in PRESETS.iter().zip(PRESET_NAMES) {
            assert_eq!(p.name, *n);
            p.config()
                .validate()
                .unwrap_or_else(|e| panic!("{}: {e}", p.name));
            assert_eq!(Config::from_preset(p.name).unwrap(), p.config());
        }
        assert_eq!(Config::default(), Config::from_preset("mainline").unwrap());
        assert_eq!(
            Config::from_preset("v6.16").unwrap(),
            Config::from_preset("mainline").unwrap()
        );
    }

    #[test]
    fn preset_contents_name_their_patches() {
        let c = |n| Config::from_preset(n).unwrap();
        assert_eq!(c("v5.10").recent_used, RecentUsedMode::V510);
        assert_eq!(c("v5.10").idle_scan, IdleScan::ThreeScan);
        assert_eq!(c("v5.10").sis, SisMode::Prop);
        assert!(!c("v5.10").newidle_skip_pending_wakeup);
        assert!(c("v5.14").newidle_skip_pending_wakeup);
        assert_eq!(c("v5.15").recent_used, RecentUsedMode::Prev);
        assert!(c("v5.13").select_idle_smt_prev && !c("v5.12").select_idle_smt_prev);
        assert_eq!(c("v6.5").recent_used, RecentUsedMode::PrevFixed);
        assert_eq!(c("v6.12").sis, SisMode::Util);
        assert!(c("v6.12").delayed_dequeue && !c("v6.12").sync_excludes_delayed);
        assert!(c("v6.12.y").sync_excludes_delayed);
        assert!(c("v6.16").sync_excludes_delayed && !c("v6.16").sync_requires_task_waker);
        assert!(c("mainline+barry").sync_requires_task_waker);
        assert_eq!(
            c("mainline+barry").diff_from(&c("mainline")),
            vec!["sync_requires_task_waker=true"]
        );
        for n in PRESET_NAMES {
            for f in FLAGS {
                assert!(
                    c(n).get(f.key).is_some(),
                    "{n}: flag {} has no getter",
                    f.key
                );
            }
        }
    }

    #[test]
    fn set_get_round_trip_for_every_flag() {
        for p in PRESETS {
            let base = p.config();
            for f in FLAGS {
                let mut c = base;
                let v = c.get(f.key).unwrap();
                c.set(f.key, &v).unwrap();
                assert_eq!(c, base, "{}: {}={v} changed the config", p.name, f.key);
            }
        }
    }

    #[test]
    fn overrides_compose_after_the_preset() {
        let c =
            Config::from_preset_with("v6.12", &["sync_excludes_delayed=true", "sis=prop"]).unwrap();
        assert!(c.sync_excludes_delayed);
        assert_eq!(c.sis, SisMode::Prop);
        assert!(c.delayed_dequeue);
        // intermediate inconsistency is fine, the end state is validated
        let c =
            Config::from_preset_with("v6.16", &["idle_candidate=false", "idle_scan=three-scan"])
                .unwrap();
        assert_eq!(c.idle_scan, IdleScan::ThreeScan);
        // dashes accepted in keys
        let c = Config::from_preset_with("v6.16", &["recent-used=search-target"]).unwrap();
        assert_eq!(c.recent_used, RecentUsedMode::SearchTarget);
    }

    #[test]
    fn errors_are_clear() {
        let e = Config::from_preset("v4.19").unwrap_err();
        assert!(
            e.to_string().contains("unknown preset 'v4.19'") && e.to_string().contains("v5.10")
        );
        let e = Config::from_preset_with("mainline", &["nope=1"]).unwrap_err();
        assert!(e.to_string().contains("unknown policy flag 'nope'"));
        let e = Config::from_preset_with("mainline", &["sis=fast"]).unwrap_err();
        assert!(e.to_string().contains("none|prop|util"), "{e}");
        let e = Config::from_preset_with("mainline", &["wa_idle=maybe"]).unwrap_err();
        assert!(matches!(e, ConfigError::BadValue { .. }));
        let e = Config::from_preset_with("mainline", &["sis_prop_cost_per_cpu_ns=0"]).unwrap_err();
        assert!(e.to_string().contains("at least 1"), "{e}");
        let e = Config::from_preset_with("mainline", &["sis_prop_cost_per_cpu_ns=-3"]).unwrap_err();
        assert!(matches!(e, ConfigError::BadValue { .. }));
        let e = Config::from_preset_with("mainline", &["imbalance_pct_llc=90"]).unwrap_err();
        assert!(matches!(e, ConfigError::BadValue { .. }));
        let e = Config::from_preset_with("mainline", &["wa_idle"]).unwrap_err();
        assert!(matches!(e, ConfigError::BadSyntax { .. }));
        let e = Config::from_preset_with("mainline", &["idle_candidate=false"]).unwrap_err();
        assert!(
            e.to_string().contains("requires idle_candidate=true"),
            "{e}"
        );
        // serde-built configs are validated too
        let c: Config = serde_json::from_str(r#"{"sis_prop_cost_per_cpu_ns": 0}"#).unwrap();
        assert!(c.validate().is_err());
    }

    #[test]
    fn accepted_combinations() {
        Config::from_preset_with("v6.16", &["delayed_dequeue=false"]).unwrap();
        Config::from_preset_with("v5.10", &["idle_candidate=true"]).unwrap();
        Config::from_preset_with("v5.10", &["recent_used=search-target"]).unwrap();
        Config::from_preset_with("v5.10", &["select_idle_smt_prev=true", "sis=util"]).unwrap();
        Config::from_preset_with("v5.10", &["wa_weight=false"]).unwrap();
    }

    #[test]
    fn serde_and_spec() {
        let c = Config::from_preset("v5.15").unwrap();
        let j = serde_json::to_string(&c).unwrap();
        assert!(j.contains(r#""recent_used":"prev""#), "{j}");
        assert!(j.contains(r#""idle_scan":"single-pass""#), "{j}");
        let back: Config = serde_json::from_str(&j).unwrap();
        assert_eq!(back, c);
        assert!(serde_json::from_str::<Config>(r#"{"bogus": 1}"#).is_err());
        let spec: PolicySpec = serde_json::from_str(
            r#"{"preset": "v6.12", "set": {"sync_excludes_delayed": true, "sis": "prop", "imbalance_pct_llc": 125}}"#,
        )
        .unwrap();
        let c = spec.to_config().unwrap();
        assert!(c.sync_excludes_delayed && c.sis == SisMode::Prop && c.imbalance_pct_llc == 125);
        let spec: PolicySpec =
            serde_json::from_str(r#"{"set": {"recent_used": "nonsense"}}"#).unwrap();
        assert!(
            spec.to_config()
                .unwrap_err()
                .to_string()
                .contains("recent_used")
        );
    }

    #[test]
    fn describe_lists_every_flag() {
        let d = Config::from_preset("mainline+barry").unwrap().describe();
        for f in FLAGS {
            assert!(d.contains(f.key), "{}", f.key);
        }
        assert!(d.contains("sync_requires_task_waker       = true"), "{d}");
        assert!(d.contains("Never merged"));
    }
}
