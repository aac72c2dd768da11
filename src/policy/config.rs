//! Policy configuration: one independent flag per upstream patch behaviour, kernel presets,
//! `key=value` overrides and validation.
//!
//! Every flag is declared once, in the `flags!` table below: its name, type, value in
//! each preset, help, and the option it becomes on the command line.  `Config`, `set`,
//! `get`, [`FLAGS`] and the presets' contents are generated from it, and `crate::cli`
//! builds the command line from [`FLAGS`], so this layer needs no argument parser.
//! Adding a flag means: one declaration here, its rule in the engine, its tests.
//!
//! Composition rule: a preset first, then overrides in the order given, then
//! [`Config::validate`] once on the result.  [`Config::set`] only parses and range-checks a
//! single value, so an override sequence may pass through an inconsistent intermediate
//! state (e.g. switching the scan form and the idle candidate one after the other).
//!
//! Combinations, decided and documented here:
//! - The single pass without the idle candidate is **rejected** ([`Config::validate`] says
//!   which values): the single pass (9fe1f127) exists to keep the candidate; without it a
//!   failed core search would return nothing at all, worse than any kernel ever was.  The
//!   three scans drop the candidate.
//! - The three scans with the idle candidate are **accepted**: it is Mel Gorman's Dec 2020
//!   v2 patch 4 as posted (the candidate returned after the v5.10 core scan).
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
use std::ops::RangeInclusive;

use serde::{Deserialize, Serialize};

/// What a flag's value is, so that a front end (`crate::cli`) can offer and check it
/// without knowing the flag.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FlagKind {
    Bool,
    U32,
    U64,
    /// One of these names.
    Choice(&'static [&'static str]),
}

/// A type a flag can have: how its value is read from a string and written back.
pub trait FlagType: Copy + fmt::Display {
    const KIND: FlagKind;
    /// Accepted values, as [`FlagSpec::values`] shows them (integer flags declare their own).
    const VALUES: &'static str;
    /// What a bad value's error says was expected (integer flags declare their own).
    const EXPECTED: &'static str;
    /// Integers: every value the type holds, inclusive (integer flags may declare fewer);
    /// `None` for the others.
    const RANGE: Option<(u64, u64)>;
    /// The value `v` denotes (surrounding blanks ignored), if it is one and, for integers,
    /// within `range`.
    fn parse_flag(v: &str, range: RangeInclusive<u64>) -> Option<Self>;
    /// The value as `parse_flag` reads it back.
    fn show_flag(self) -> String {
        self.to_string()
    }
}

impl FlagType for bool {
    const KIND: FlagKind = FlagKind::Bool;
    const VALUES: &'static str = "true|false";
    const EXPECTED: &'static str = "true|false (also on/off, yes/no, 1/0)";
    const RANGE: Option<(u64, u64)> = None;
    fn parse_flag(v: &str, _: RangeInclusive<u64>) -> Option<Self> {
        match v.trim().to_ascii_lowercase().as_str() {
            "true" | "on" | "yes" | "1" => Some(true),
            "false" | "off" | "no" | "0" => Some(false),
            _ => None,
        }
    }
}

impl FlagType for u64 {
    const KIND: FlagKind = FlagKind::U64;
    const VALUES: &'static str = "integer";
    const EXPECTED: &'static str = "an integer";
    const RANGE: Option<(u64, u64)> = Some((0, u64::MAX));
    fn parse_flag(v: &str, range: RangeInclusive<u64>) -> Option<Self> {
        v.trim().parse::<u64>().ok().filter(|n| range.contains(n))
    }
}

impl FlagType for u32 {
    const KIND: FlagKind = FlagKind::U32;
    const VALUES: &'static str = "integer";
    const EXPECTED: &'static str = "an integer";
    const RANGE: Option<(u64, u64)> = Some((0, u32::MAX as u64));
    fn parse_flag(v: &str, range: RangeInclusive<u64>) -> Option<Self> {
        u64::parse_flag(v, range).and_then(|n| u32::try_from(n).ok())
    }
}

/// `s` without its first byte, at compile time: `choice!` joins names as `|a|b|c`.
const fn after_first_byte(s: &'static str) -> &'static str {
    match s.as_bytes().split_first() {
        Some((_, rest)) => match std::str::from_utf8(rest) {
            Ok(t) => t,
            Err(_) => panic!("choice names are ASCII"),
        },
        None => s,
    }
}

/// A flag type with named values: `Variant = "name" | "alias"...`.  Generates the enum
/// (serde uses the names, not the aliases), `NAMES`, `as_str`, `parse` and its
/// [`FlagType`].
macro_rules! choice {
    ($(#[$m:meta])* pub enum $name:ident {
        $( $(#[$vm:meta])* $variant:ident = $text:literal $(| $alias:literal)*, )*
    }) => {
        $(#[$m])*
        #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
        pub enum $name {
            $( $(#[$vm])* #[serde(rename = $text)] $variant, )*
        }

        impl $name {
            /// Every value's name, in declaration order.
            pub const NAMES: &'static [&'static str] = &[ $( $text, )* ];

            pub fn as_str(self) -> &'static str {
                match self { $( $name::$variant => $text, )* }
            }

            /// The value named `v` or one of its aliases, surrounding blanks ignored.
            pub fn parse(v: &str) -> Option<Self> {
                match v.trim() { $( $text $(| $alias)* => Some($name::$variant), )* _ => None }
            }
        }

        impl FlagType for $name {
            const KIND: FlagKind = FlagKind::Choice(Self::NAMES);
            const VALUES: &'static str = after_first_byte(concat!($( "|", $text, )*));
            const EXPECTED: &'static str = Self::VALUES;
            const RANGE: Option<(u64, u64)> = None;
            fn parse_flag(v: &str, _: RangeInclusive<u64>) -> Option<Self> {
                Self::parse(v)
            }
        }

        impl fmt::Display for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str(self.as_str())
            }
        }
    };
}

choice! {
    /// Seed 4: how `p->recent_used_cpu` is used and updated.  Variants are the reference's
    /// table (§5): A, B/B0/B' (one behaviour), C, D.
    pub enum RecentUsedMode {
        /// No recent_used_cpu check and no writes (an ablation; no kernel).
        Off = "off",
        /// Variant A, v5.10-v5.14: returned on a hit, replaced with prev only on a hit, and the
        /// waker records its own CPU in `select_task_rq_fair` when `want_affine`.
        V510 = "v5.10" | "a" | "A",
        /// Variant B', Mel's patch 3 as merged (89aafd67, v5.15) plus a7ba8948 (v5.16): prev
        /// always becomes the next recent CPU, written before the check; the waker-side write is
        /// gone.  Keeps the allowed-mask bug: the test reads `p->recent_used_cpu`, which now holds
        /// prev, so a recent CPU outside the mask can be returned (Hillf Danton's catch).
        /// Variants B0 (v2 as posted) and B (89aafd67 alone) behave identically.
        Prev = "prev" | "b" | "B",
        /// Variant D, ae2ad293 (v6.5-rc2 and stable): as `prev`, but the mask test reads
        /// `recent_used_cpu` itself.
        PrevFixed = "prev-fixed" | "d" | "D",
        /// Variant C, Mel's never-merged "search target" (11 Dec 2020): an idle cache-affine
        /// recent CPU becomes the scan target instead of being returned; prev is always written.
        SearchTarget = "search-target" | "c" | "C",
    }
}

choice! {
    /// The LLC scan after the cheap checks of `select_idle_sibling()`.
    pub enum IdleScan {
        /// v5.10: `select_idle_core`, then `select_idle_cpu` (SIS-limited), then
        /// `select_idle_smt(target)`.
        ThreeScan = "three-scan",
        /// v5.12+: one pass (9fe1f127, with 6cd56ef1 removing select_idle_smt) that searches
        /// idle cores when the LLC hints one exists and idle CPUs otherwise.
        SinglePass = "single-pass",
    }
}

choice! {
    /// The scan-depth limit of the idle-CPU search.
    pub enum SisMode {
        /// Scan the whole LLC.
        None = "none",
        /// SIS_PROP: depth from the waker CPU's idle estimate (`avg_idle / 512`, or the aged
        /// `wake_avg_idle` from v5.14) over the LLC's avg_scan_cost.  Removed in v6.7
        /// (984ffb6a).
        Prop = "prop",
        /// SIS_UTIL (70fb5ccf, v6.0): depth from the target LLC's utilisation, computed at each
        /// decision (see `sis_util_nr_idle_scan` in the idle-scan module).
        Util = "util",
    }
}

choice! {
    /// Fork and exec placement (`find_idlest_group()`): whether a NUMA domain whose local
    /// node has spare capacity keeps the new task there.
    pub enum ForkNumaRule {
        /// v5.10: while the local node has an idle CPU.
        LocalIdle = "local-idle",
        /// v5.18+ (Mel Gorman, `sd->imb_numa_nr`): while the idle-CPU difference between the
        /// nodes is at most 2 and the local node, with the new task, runs no more than
        /// imb_numa_nr tasks (one per LLC of the node, or an eighth of a single-LLC node's
        /// CPUs); otherwise the node with more idle CPUs.  v5.11-v5.17 had a rule between
        /// the two (a quarter of the domain's CPUs), not modelled.
        ImbNumaNr = "imb-numa-nr",
    }
}

/// `declared_or!(x; d)` is `x`, `declared_or!(; d)` is `d`: a flag's optional clause or
/// its type's default.
macro_rules! declared_or {
    (; $default:expr) => {
        $default
    };
    ($declared:expr; $default:expr) => {
        $declared
    };
}

/// The flag table.  One entry per flag:
///
/// ```text
/// /// Notes for the `Config` field's rustdoc, after the help (optional).
/// key: Type {
///     V5_10: value, Preset: value, ...;   // its value in v5.10, and in each preset (and
///                                         // the presets built on it) that changes it
///     range: MIN..=MAX, "values", "expected";   // integers: accepted range and wording
///     help: "what it reproduces, the patch and its upstream status";
///     cli: "VALUE_NAME", "the --key option's help";
///     table: "patch", "status";   // its row in the flag tables (see `flag_table`)
/// }
/// ```
///
/// Generates the `Config` struct (field docs from the help), [`FLAGS`], `Config::set` and
/// `Config::get`, and the preset builders used by [`Preset::config`].  The flag tables of
/// README.md and of the policy's module documentation are [`flag_table`]'s rendering of
/// [`FLAGS`]; `tests/flag_tables.rs` fails when either differs, and
/// `WAKELAB_UPDATE_FLAG_TABLES=1 cargo test --test flag_tables` rewrites them.
macro_rules! flags {
    ($(
        $(#[$note:meta])*
        $key:ident: $ty:ty {
            V5_10: $base:expr $(, $preset:ident: $val:expr)* ;
            $( range: $min:literal ..= $max:literal, $values:literal, $expected:literal; )?
            help: $help:literal;
            cli: $value_name:literal, $cli_help:literal;
            table: $patch:literal, $status:literal;
        }
    )*) => {
        /// Every behaviour the engine can switch.  `Default` is `mainline`.
        #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
        #[serde(default, deny_unknown_fields)]
        pub struct Config {
            $( #[doc = $help] #[doc = ""] $(#[$note])* pub $key: $ty, )*
        }

        /// Every flag, in the order `describe()` and `--help` list them.
        pub const FLAGS: &[FlagSpec] = &[ $(
            FlagSpec {
                key: stringify!($key),
                values: declared_or!($($values)?; <$ty as FlagType>::VALUES),
                help: $help,
                kind: <$ty as FlagType>::KIND,
                value_name: $value_name,
                cli_help: $cli_help,
                range: declared_or!($(Some(($min, $max)))?; <$ty as FlagType>::RANGE),
                patch: $patch,
                status: $status,
            },
        )* ];

        impl Config {
            /// Every flag at its v5.10 value.
            fn preset_base() -> Config {
                Config { $( $key: $base, )* }
            }

            /// The changes preset `p` makes to the preset it is built on.
            fn preset_changes(&mut self, p: PresetId) {
                $( $( if p == PresetId::$preset { self.$key = $val; } )* )*
            }

            /// Sets one flag from strings (CLI `--set`, runtime `set` command).  Checks the
            /// value's syntax and range only; call [`Config::validate`] after the last override.
            pub fn set(&mut self, key: &str, value: &str) -> Result<(), ConfigError> {
                let key = key.trim().replace('-', "_");
                let (k, v) = (key.as_str(), value);
                match k {
                    $( stringify!($key) => {
                        self.$key = FlagType::parse_flag(v, declared_or!($($min..=$max)?; 0..=u64::MAX))
                            .ok_or_else(|| bad(k, v, declared_or!($($expected)?; <$ty as FlagType>::EXPECTED)))?
                    } )*
                    _ => return Err(ConfigError::UnknownKey { key: key.clone() }),
                }
                Ok(())
            }

            /// The current value of a flag, formatted so that `set(key, &get(key))` is a no-op.
            pub fn get(&self, key: &str) -> Option<String> {
                let key = key.trim().replace('-', "_");
                match key.as_str() {
                    $( stringify!($key) => Some(FlagType::show_flag(self.$key)), )*
                    _ => None,
                }
            }
        }
    };
}

flags! {
    sync_requires_task_waker: bool {
        V5_10: false, MainlineBarry: true;
        help: "Seed 1, Barry Song, \"sched/fair: don't use waker's cpu if the waker of sync \
               wake-up is interrupt\" (2021-04-27): the sync shortcut of wake_affine_idle() \
               also requires in_task(). Never merged.";
        cli: "BOOL", "Seed 1 (Barry Song, 2021, never merged): the sync-wakeup shortcut that \
                      pulls the wakee to the waker's CPU requires the waker to be a task, not a \
                      softirq/hardirq.";
        table: "seed 1, Barry Song 2021: a sync wake-up pulls to the waker's CPU only when \
                the waker is a task, not an interrupt",
               "never merged";
    }
    newidle_skip_pending_wakeup: bool {
        V5_10: false, V5_14: true;
        help: "Seed 2, Rik van Riel, \"sched,fair: Skip newidle_balance if a wakeup is \
               pending\" (e5e678e4): a CPU going idle does not pull when ttwu_pending is set. \
               Merged in v5.14.";
        cli: "BOOL", "Seed 2 (Rik van Riel, e5e678e4, merged v5.14): a CPU going idle does not \
                      pull work from other CPUs while a wake-up is pending for it \
                      (ttwu_pending).";
        table: "seed 2, Rik van Riel 2021 (e5e678e4): skip the newly-idle pull while a \
                wake-up is pending",
               "v5.14";
    }
    newidle_gate_on_domain_cost: bool {
        V5_10: false, V6_0: true;
        help: "Vincent Guittot, \"sched/fair: Remove sysctl_sched_migration_cost condition\" \
               (merged v5.16): a CPU going idle searches for a task only when its avg_idle \
               exceeds the innermost domain's max_newidle_lb_cost; before it, when avg_idle \
               exceeds sysctl_sched_migration_cost (500 us).";
        cli: "BOOL", "(merged v5.16) the newly-idle balance is gated by the innermost domain's \
                      max_newidle_lb_cost instead of 500 us of avg_idle.";
        table: "the newly-idle balance needs avg_idle above the innermost domain's \
                `max_newidle_lb_cost`, not above 500 us",
               "v5.16";
    }
    /// When off the engine ignores `CpuSnapshot::nr_delayed`.
    delayed_dequeue: bool {
        V5_10: false, V6_12: true;
        help: "Delayed dequeue, \"sched/fair: Implement delayed dequeue\" (152e11f6): a task \
               that sleeps with lag stays counted in nr_running until the lag elapses \
               (sched_feat DELAY_DEQUEUE). Merged in v6.12.";
        cli: "BOOL", "Delayed dequeue (152e11f6, merged v6.12): sleepers with lag stay counted \
                      in nr_running until the lag elapses.";
        table: "delayed dequeue (152e11f6): sleepers with lag stay counted on their CPU",
               "v6.12";
    }
    sync_excludes_delayed: bool {
        V5_10: false, V6_12Y: true, V6_16: true;
        help: "Seed 3, Xuewen Yan, \"sched/fair: Fixup wake_up_sync() vs DELAYED_DEQUEUE\" \
               (aa3ee4f0): the sync shortcut tests nr_running - nr_delayed == 1. Merged in \
               v6.16, backported to 6.12.y. No effect without delayed_dequeue.";
        cli: "BOOL", "Seed 3 (Xuewen Yan, aa3ee4f0, merged v6.16 and 6.12.y): the sync shortcut \
                      counts runnable tasks only (nr_running - delayed == 1).";
        table: "seed 3, Xuewen Yan 2025 (aa3ee4f0): the sync check counts runnable tasks \
                only",
               "v6.16, 6.12.y";
    }
    recent_used: RecentUsedMode {
        V5_10: RecentUsedMode::V510, V5_15: RecentUsedMode::Prev,
        V6_1Y: RecentUsedMode::PrevFixed, V6_5: RecentUsedMode::PrevFixed;
        help: "Seed 4, Mel Gorman's patch 3 and its variants for p->recent_used_cpu: v5.10 = \
               return it on a hit and replace it with prev on a hit, the waker records its own \
               CPU (up to v5.14); prev = 89aafd67 + a7ba8948, prev always becomes the next \
               recent CPU, allowed-mask test wrongly reads prev (v5.15-v6.4); prev-fixed = \
               ae2ad293, mask test fixed (v6.5+); search-target = Mel's idle recent CPU as scan \
               target (never merged); off = no recent_used_cpu (ablation).";
        cli: "MODE", "Seed 4 (Mel Gorman) recent_used_cpu mode: v5.10 (variant A, up to v5.14); \
                      prev (89aafd67+a7ba8948, v5.15-v6.4, keeps the allowed-mask bug); \
                      prev-fixed (ae2ad293, v6.5+); search-target (Mel's never-merged variant \
                      C); off (ablation).";
        table: "seed 4, Mel Gorman Dec 2020 patch 3: `off` no recent CPU (an ablation); \
                `v5.10` the v5.10 behaviour; `prev` 89aafd67 + a7ba8948 (keeps Hillf's \
                mask-test bug); `prev-fixed` ae2ad293; `search-target` Mel's never-merged idea",
               "off: no kernel / v5.10: ≤v5.14 / prev: v5.15 / prev-fixed: v6.5, 6.1.y / \
                search-target: never";
    }
    idle_scan: IdleScan {
        V5_10: IdleScan::ThreeScan, V5_12: IdleScan::SinglePass;
        help: "LLC scan form: three-scan = v5.10 select_idle_core, select_idle_cpu, \
               select_idle_smt(target); single-pass = 9fe1f127 + 6cd56ef1, one pass over the \
               LLC (merged in v5.12).";
        cli: "FORM", "LLC idle scan: three-scan (v5.10) or single-pass (9fe1f127 + 6cd56ef1, \
                      merged v5.12).";
        table: "9fe1f127 + 6cd56ef1: one pass over the LLC instead of v5.10's three scans \
                (idle core, idle CPU, the target's SMT siblings)",
               "three-scan: ≤v5.11 / single-pass: v5.12";
    }
    idle_candidate: bool {
        V5_10: false, V5_12: true;
        help: "Seed 4, Mel Gorman's patch 4: a failed idle-core search returns the first idle \
               CPU it saw. Merged in v5.12 as part of 9fe1f127 (required by single-pass); with \
               three-scan it is the Dec 2020 v2 patch as posted.";
        cli: "BOOL", "Seed 4 patch 4 (Mel Gorman; merged v5.12 inside 9fe1f127): a failed \
                      idle-core search returns the first idle CPU it saw. Required by \
                      single-pass.";
        table: "seed 4 patch 4 (merged inside 9fe1f127): a failed idle-core search returns \
                the first idle CPU it saw",
               "v5.12";
    }
    select_idle_smt_prev: bool {
        V5_10: false, V5_13: true;
        help: "Rik van Riel, \"sched/fair: Bring back select_idle_smt(), but differently\" \
               (c722f35b): when no idle core is expected, check prev's SMT siblings before the \
               LLC scan. Merged in v5.13.";
        cli: "BOOL", "c722f35b (Rik van Riel, merged v5.13): check prev's SMT siblings before \
                      the LLC scan when no idle core is expected.";
        table: "c722f35b: prev's SMT siblings before the LLC scan",
               "v5.13";
    }
    scan_skips_target: bool {
        V5_10: false, V5_15: true;
        help: "Mel Gorman, \"sched/fair: Avoid a second scan of target in select_idle_cpu\" \
               (56498cfb): the scan starts at target + 1. Merged in v5.15.";
        cli: "BOOL", "56498cfb (Mel Gorman, merged v5.15): the idle-CPU scan starts after the \
                      target.";
        table: "56498cfb: the idle-CPU scan starts after the target",
               "v5.15";
    }
    sis: SisMode {
        V5_10: SisMode::Prop, V6_0: SisMode::Util;
        help: "Idle-CPU scan depth: prop = SIS_PROP with emulated avg_idle and avg_scan_cost, \
               its idle estimate per sis_prop_wake_avg_idle (removed in v6.7); util = SIS_UTIL, nr_idle_scan from LLC \
               utilisation (70fb5ccf, v6.0; computed at each decision, where the kernel stores it at \
               periodic balancing); none = whole LLC.";
        cli: "MODE", "Idle-CPU scan depth: none, prop (SIS_PROP, removed v6.7) or \
                      util (SIS_UTIL, merged v6.0).";
        table: "`none` the whole LLC; `prop` SIS_PROP (idle estimate per \
                `sis_prop_wake_avg_idle`); `util` SIS_UTIL (70fb5ccf; depth computed at each \
                decision, see `--help`)",
               "none: no kernel / prop: ≤v6.6 / util: v6.0+";
    }
    sis_prop_wake_avg_idle: bool {
        V5_10: false, V5_14: true;
        help: "94aafc3e (Peter Zijlstra, \"sched/fair: Age the average idle time\", in tip \
               after v5.13-rc7, merged v5.14): SIS_PROP sizes the scan from the waker CPU's \
               rq->wake_avg_idle, without the / 512 fuzz factor: avg_idle / 2 when the CPU \
               last left idle, halved for every jiffy since, less the scan cost of each \
               wake-up it made. Before it (v5.10-v5.13): avg_idle / 512.";
        cli: "BOOL", "94aafc3e (merged v5.14): SIS_PROP reads the aged rq->wake_avg_idle.";
        table: "94aafc3e: SIS_PROP reads the aged `rq->wake_avg_idle` instead of \
                `avg_idle / 512`",
               "v5.14";
    }
    /// The kernel measures `cpu_clock()` around the loop; the emulation charges this per CPU.
    sis_prop_cost_per_cpu_ns: u64 {
        V5_10: 40;
        range: 1..=1_000_000_000, "integer >= 1 (ns)", "an integer number of ns, at least 1";
        help: "SIS_PROP emulation: scan cost charged per CPU examined, folded into the LLC's \
               avg_scan_cost like the kernel's cpu_clock() measurement.";
        cli: "NS", "SIS_PROP emulation: ns charged per CPU examined (>= 1).";
        table: "SIS_PROP emulation: the scan cost charged per CPU examined (the kernel \
                measures it)",
               "emulation";
    }
    sis_prop_cost_fixed_ns: u64 {
        V5_10: 100;
        range: 0..=1_000_000_000, "integer >= 0 (ns)", "an integer number of ns, 0 or more";
        help: "SIS_PROP emulation: fixed cost charged per idle-CPU scan.";
        cli: "NS", "SIS_PROP emulation: ns charged per scan.";
        table: "SIS_PROP emulation: the scan cost charged per scan",
               "emulation";
    }
    wa_idle: bool {
        V5_10: true;
        help: "sched_feat WA_IDLE: wake_affine_idle(), decide from idleness and the sync hint. \
               Default on in every kernel.";
        cli: "BOOL", "sched_feat WA_IDLE (on in every kernel).";
        table: "sched_feat WA_IDLE: `wake_affine_idle()`",
               "always";
    }
    wa_weight: bool {
        V5_10: true;
        help: "sched_feat WA_WEIGHT: wake_affine_weight(), compare capacity-scaled loads. \
               Default on in every kernel.";
        cli: "BOOL", "sched_feat WA_WEIGHT (on in every kernel).";
        table: "sched_feat WA_WEIGHT: `wake_affine_weight()`",
               "always";
    }
    wa_bias: bool {
        V5_10: true;
        help: "sched_feat WA_BIAS: wake_affine_weight() weighs prev's load by half the domain's \
               imbalance_pct margin more (108 against 100 at imbalance_pct 117), which favours \
               the waker's CPU. Default on in every kernel.";
        cli: "BOOL", "sched_feat WA_BIAS (on in every kernel).";
        table: "sched_feat WA_BIAS: `wake_affine_weight()` favours the waker's CPU",
               "always";
    }
    wa_idle_prev_idle: bool {
        V5_10: false, V5_12: true;
        help: "d8fcb81f (Julia Lawall, \"sched/fair: Check for idle core in wake_affine\", merged \
               v5.11): wake_affine_idle() keeps the task on an idle prev before WA_WEIGHT is \
               asked. Without it (v5.10) an undecided WA_IDLE falls through to WA_WEIGHT, which \
               can pull the task across nodes.";
        cli: "BOOL", "d8fcb81f (merged v5.11): wake_affine_idle() keeps an idle prev.";
        table: "d8fcb81f: `wake_affine_idle()` keeps an idle prev before WA_WEIGHT is asked",
               "v5.11";
    }
    affine_tally_excludes_prev: bool {
        V5_10: false, V6_1Y: true, V6_5: true;
        help: "39afe5d6 (Libo Chen, \"sched/fair: Fix inaccurate tally of ttwu_move_affine\", \
               merged v6.4, backported to 5.15.y and 6.1.y): nr_wakeups_affine counts only \
               wake-ups that chose the waker's CPU. Before it, WA_IDLE choosing prev was counted \
               too. Changes the counter only, never the CPU chosen.";
        cli: "BOOL", "39afe5d6 (merged v6.4): nr_wakeups_affine excludes WA_IDLE's prev.";
        table: "39afe5d6: `nr_wakeups_affine` no longer counts WA_IDLE keeping prev (counter \
                only)",
               "v6.4, 5.15.y, 6.1.y";
    }
    fork_numa_rule: ForkNumaRule {
        V5_10: ForkNumaRule::LocalIdle, V6_0: ForkNumaRule::ImbNumaNr;
        help: "Fork/exec placement across NUMA nodes, when the local node has spare capacity: \
               local-idle = v5.10, stay while the local node has an idle CPU; imb-numa-nr = \
               v5.18+ (sd->imb_numa_nr), stay while the nodes' idle CPUs differ by at most 2 \
               and the local node runs few tasks, else go to the node with more idle CPUs. \
               Presets v5.12-v5.15 keep local-idle (their kernels' in-between rule is not \
               modelled). The same change set sets the newly-idle balance's allowed NUMA \
               imbalance (adjust_numa_imbalance()): local-idle = v5.10's, while the busiest \
               node runs two; imb-numa-nr = while the local node runs few.";
        cli: "RULE", "Fork/exec across NUMA nodes: local-idle (v5.10) or imb-numa-nr \
                      (v5.18+).";
        table: "fork/exec slow path: how a NUMA domain with spare local capacity keeps a new \
                task on its node",
               "local-idle: ≤v5.10 / imb-numa-nr: v5.18+";
    }
    imbalance_pct_llc: u32 {
        V5_10: 117;
        range: 100..=1000, "integer 100..=1000", "an integer percentage 100..=1000";
        help: "sd->imbalance_pct of the LLC and wider domains (kernel: 117).";
        cli: "PCT", "imbalance_pct of LLC and wider domains (kernel 117).";
        table: "domain parameter: `imbalance_pct` of the LLC and wider domains",
               "always 117";
    }
    imbalance_pct_smt: u32 {
        V5_10: 110;
        range: 100..=1000, "integer 100..=1000", "an integer percentage 100..=1000";
        help: "sd->imbalance_pct of the SMT domain (kernel: 110).";
        cli: "PCT", "imbalance_pct of the SMT domain (kernel 110).";
        table: "domain parameter: `imbalance_pct` of the SMT domain",
               "always 110";
    }
    kthread_stacking_requires_task: bool {
        V5_10: false, V5_10Y: true, V6_0: true;
        help: "8b4e74cc, \"sched/fair: Fix detection of per-CPU kthreads waking a task\": \
               per-CPU-kthread stacking in select_idle_sibling() needs in_task(). Merged in \
               v5.17, backported to 5.10.y.";
        cli: "BOOL", "8b4e74cc (merged v5.17, in 5.10.y): per-CPU-kthread stacking needs \
                      in_task().";
        table: "8b4e74cc: per-CPU-kthread stacking in `select_idle_sibling()` needs \
                `in_task()`",
               "v5.17, 5.10.y";
    }
}

/// The preset table: `Id = "name" [after Parent]: "doc";`.  A preset is its parent plus the
/// changes the flag table lists under its id; the first preset has every flag at its
/// `V5_10` value.  Generates [`PRESETS`] and [`PRESET_NAMES`].
macro_rules! presets {
    ($(#[$m:meta])* $( $id:ident = $name:literal $(after $parent:ident)?: $doc:literal; )*) => {
        #[derive(Clone, Copy, Debug, PartialEq, Eq)]
        enum PresetId { $( $id, )* }

        impl PresetId {
            fn config(self) -> Config {
                let mut c = match self {
                    $( PresetId::$id => declared_or!($(PresetId::$parent.config())?; Config::preset_base()), )*
                };
                c.preset_changes(self);
                c
            }
        }

        $(#[$m])*
        pub const PRESETS: &[Preset] = &[ $( Preset { name: $name, doc: $doc, id: PresetId::$id }, )* ];

        /// Preset names, for the command line's possible values.
        pub const PRESET_NAMES: &[&str] = &[ $( $name, )* ];
    };
}

presets! {
    /// Every preset.  Cluster-aware scanning (v6.7) is not modelled, so v6.7+ presets behave as
    /// their kernels do on machines without CONFIG_SCHED_CLUSTER groups.
    V5_10 = "v5.10":
        "Linux v5.10 (v5.10.13): three-scan select_idle_sibling with SIS_PROP, \
         recent_used_cpu variant A (waker records its CPU), per-CPU-kthread stacking from \
         any context; none of the seed patches.";
    V5_10Y = "v5.10.y" after V5_10:
        "Linux 5.10 stable as Debian bullseye ships it (5.10.223): v5.10 + 8b4e74cc \
         (kthread stacking needs in_task(), backported to 5.10.y).";
    V5_12 = "v5.12" after V5_10:
        "v5.10 + d8fcb81f (v5.11: wake_affine_idle() keeps an idle prev) + Mel Gorman's \
         merged SIS rework: SIS_AVG_CPU removed, scan cost under SIS_PROP, 6cd56ef1 \
         (select_idle_smt removed) and 9fe1f127 (single pass with the idle candidate, seed 4 \
         patch 4).";
    V5_13 = "v5.13" after V5_12:
        "v5.12 + c722f35b (select_idle_smt(prev) before the LLC scan).";
    V5_14 = "v5.14" after V5_13:
        "v5.13 + e5e678e4 (seed 2: skip newidle balance when a wake-up is pending) + \
         94aafc3e (SIS_PROP reads the aged wake_avg_idle).";
    V5_15 = "v5.15" after V5_14:
        "v5.14 + 89aafd67 (seed 4 patch 3: prev becomes recent_used_cpu, with the \
         allowed-mask bug; a7ba8948 from v5.16/5.15.y behaves the same) + 56498cfb (scan \
         starts at target + 1). Per-CPU-kthread stacking still from any context.";
    V6_0 = "v6.0" after V5_15:
        "v5.15 + 8b4e74cc (v5.17: kthread stacking needs in_task()) + SIS_UTIL in place \
         of SIS_PROP (70fb5ccf).";
    V6_1Y = "v6.1.y" after V6_0:
        "Linux 6.1 stable as Debian bookworm ships it (6.1.176): v6.0 + ae2ad293 \
         (recent_used_cpu mask test fixed) and 39afe5d6 (affine tally), both backported to \
         6.1.y.";
    V6_5 = "v6.5" after V6_0:
        "v6.0 + 39afe5d6 (v6.4: nr_wakeups_affine no longer counts WA_IDLE's prev) + \
         ae2ad293 (recent_used_cpu mask test fixed: variant D).";
    V6_12 = "v6.12" after V6_5:
        "v6.5 + delayed dequeue (152e11f6, DELAY_DEQUEUE on) as released in v6.12, \
         without the seed-3 fix; SIS_PROP gone since v6.7.";
    V6_12Y = "v6.12.y" after V6_12:
        "v6.12 stable after July 2025: + aa3ee4f0 (seed 3 fix backported).";
    V6_16 = "v6.16" after V6_12:
        "v6.12 + aa3ee4f0 (seed 3: the sync shortcut excludes delayed tasks). Same as \
         mainline for every behaviour modelled here.";
    Mainline = "mainline" after V6_16:
        "Current mainline; identical to v6.16 for every behaviour modelled here.";
    MainlineBarry = "mainline+barry" after Mainline:
        "mainline + seed 1 (Barry Song's never-merged in_task() requirement on the sync \
         shortcut).";
}

impl Default for Config {
    fn default() -> Self {
        PresetId::Mainline.config()
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

/// Description of one flag: key, accepted values, what it reproduces and its status, and
/// how the command line offers it.
#[derive(Clone, Copy, Debug)]
pub struct FlagSpec {
    pub key: &'static str,
    /// Accepted values, e.g. "true|false" or "off|v5.10|prev|prev-fixed|search-target".
    pub values: &'static str,
    /// What the flag does and which patch it reproduces, with its upstream status.
    pub help: &'static str,
    pub kind: FlagKind,
    /// The placeholder of the `--key VALUE` option, e.g. "BOOL".
    pub value_name: &'static str,
    /// The `--key` option's help, shorter than `help`.
    pub cli_help: &'static str,
    /// Integers: the values `Config::set` accepts, inclusive; `None` for the others.
    pub range: Option<(u64, u64)>,
    /// The flag tables' "patch" cell: the patch it reproduces, with its commit.
    pub patch: &'static str,
    /// The flag tables' "status" cell: the kernels that have it.
    pub status: &'static str,
}

/// The header of the flag tables.
const FLAG_TABLE_HEAD: &str =
    "| flag (`--set KEY=VALUE` or `--KEY VALUE`) | patch | status |\n|---|---|---|\n";

/// The flag table of README.md and of the policy's module documentation, in markdown: one
/// row per flag of [`FLAGS`], in their order, a choice flag with its values.
pub fn flag_table() -> String {
    let mut t = String::from(FLAG_TABLE_HEAD);
    for f in FLAGS {
        let mut flag = format!("`{}`", f.key);
        if let FlagKind::Choice(names) = f.kind {
            let values: Vec<String> = names.iter().map(|n| format!("`{n}`")).collect();
            flag = format!("{flag} = {}", values.join(" / "));
        }
        t.push_str(&format!("| {flag} | {} | {} |\n", f.patch, f.status));
    }
    t
}

/// A named kernel configuration.
#[derive(Clone, Copy, Debug)]
pub struct Preset {
    pub name: &'static str,
    /// Which kernel and which patch set this is.
    pub doc: &'static str,
    id: PresetId,
}

impl Preset {
    pub fn config(&self) -> Config {
        self.id.config()
    }
}

fn bad(key: &str, v: &str, expected: &str) -> ConfigError {
    ConfigError::BadValue {
        key: key.into(),
        value: v.into(),
        expected: expected.into(),
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
