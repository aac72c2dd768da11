//! The placement policy's command line: `--preset`, one long option per flag and
//! `--set KEY=VALUE`.  clap stays out of `policy`, which parses no arguments.

use crate::policy::{Config, ConfigError, PRESET_NAMES};

/// Command-line selection of the policy: `--preset`, one long option per flag, and
/// repeatable `--set key=value`.  Applied in that order (preset, per-flag options, `--set`
/// in the order given), then validated.
#[derive(clap::Args, Clone, Debug, Default, PartialEq)]
#[command(about = None, long_about = None, next_help_heading = "Placement policy (CFS wake-up path)")]
pub struct PolicyArgs {
    /// Kernel preset to start from. v5.10, v5.12, v5.13, v5.14, v5.15, v6.0, v6.5, v6.12,
    /// v6.12.y, v6.16 (= mainline) and mainline+barry (mainline + Barry Song's unmerged
    /// in_task() patch).
    #[arg(long, value_name = "PRESET", default_value = "mainline",
          value_parser = clap::builder::PossibleValuesParser::new(PRESET_NAMES))]
    pub preset: String,

    /// Override one policy flag, KEY=VALUE; repeatable; applied after the preset and the
    /// per-flag options. Keys are the per-flag option names with '_' (or '-').
    #[arg(long = "set", value_name = "KEY=VALUE")]
    pub set: Vec<String>,

    /// Seed 1 (Barry Song, 2021, never merged): the sync-wakeup shortcut that pulls the
    /// wakee to the waker's CPU requires the waker to be a task, not a softirq/hardirq.
    #[arg(long, value_name = "BOOL")]
    pub sync_requires_task_waker: Option<bool>,

    /// Seed 2 (Rik van Riel, e5e678e4, merged v5.14): a CPU going idle does not pull work
    /// from other CPUs while a wake-up is pending for it (ttwu_pending).
    #[arg(long, value_name = "BOOL")]
    pub newidle_skip_pending_wakeup: Option<bool>,

    /// Delayed dequeue (152e11f6, merged v6.12): sleepers with lag stay counted in
    /// nr_running until the lag elapses.
    #[arg(long, value_name = "BOOL")]
    pub delayed_dequeue: Option<bool>,

    /// Seed 3 (Xuewen Yan, aa3ee4f0, merged v6.16 and 6.12.y): the sync shortcut counts
    /// runnable tasks only (nr_running - delayed == 1).
    #[arg(long, value_name = "BOOL")]
    pub sync_excludes_delayed: Option<bool>,

    /// Seed 4 (Mel Gorman) recent_used_cpu mode: v5.10 (variant A, up to v5.14); prev
    /// (89aafd67+a7ba8948, v5.15-v6.4, keeps the allowed-mask bug); prev-fixed (ae2ad293,
    /// v6.5+); search-target (Mel's never-merged variant C); off (ablation).
    #[arg(long, value_name = "MODE",
          value_parser = clap::builder::PossibleValuesParser::new(
              ["off", "v5.10", "prev", "prev-fixed", "search-target"]))]
    pub recent_used: Option<String>,

    /// LLC idle scan: three-scan (v5.10) or single-pass (9fe1f127 + 6cd56ef1, merged v5.12).
    #[arg(long, value_name = "FORM",
          value_parser = clap::builder::PossibleValuesParser::new(["three-scan", "single-pass"]))]
    pub idle_scan: Option<String>,

    /// Seed 4 patch 4 (Mel Gorman; merged v5.12 inside 9fe1f127): a failed idle-core
    /// search returns the first idle CPU it saw. Required by single-pass.
    #[arg(long, value_name = "BOOL")]
    pub idle_candidate: Option<bool>,

    /// c722f35b (Rik van Riel, merged v5.13): check prev's SMT siblings before the LLC scan
    /// when no idle core is expected.
    #[arg(long, value_name = "BOOL")]
    pub select_idle_smt_prev: Option<bool>,

    /// 56498cfb (Mel Gorman, merged v5.15): the idle-CPU scan starts after the target.
    #[arg(long, value_name = "BOOL")]
    pub scan_skips_target: Option<bool>,

    /// Idle-CPU scan depth: none, prop (SIS_PROP, v5.10 formula, removed v6.7) or util
    /// (SIS_UTIL, merged v6.0; approximated formula).
    #[arg(long, value_name = "MODE",
          value_parser = clap::builder::PossibleValuesParser::new(["none", "prop", "util"]))]
    pub sis: Option<String>,

    /// SIS_PROP emulation: ns charged per CPU examined (>= 1).
    #[arg(long, value_name = "NS")]
    pub sis_prop_cost_per_cpu_ns: Option<u64>,

    /// SIS_PROP emulation: ns charged per scan.
    #[arg(long, value_name = "NS")]
    pub sis_prop_cost_fixed_ns: Option<u64>,

    /// sched_feat WA_IDLE (on in every kernel).
    #[arg(long, value_name = "BOOL")]
    pub wa_idle: Option<bool>,

    /// sched_feat WA_WEIGHT (on in every kernel).
    #[arg(long, value_name = "BOOL")]
    pub wa_weight: Option<bool>,

    /// sched_feat WA_BIAS (on in every kernel).
    #[arg(long, value_name = "BOOL")]
    pub wa_bias: Option<bool>,

    /// imbalance_pct of LLC and wider domains (kernel 117).
    #[arg(long, value_name = "PCT")]
    pub imbalance_pct_llc: Option<u32>,

    /// imbalance_pct of the SMT domain (kernel 110).
    #[arg(long, value_name = "PCT")]
    pub imbalance_pct_smt: Option<u32>,

    /// 8b4e74cc (merged v5.17, in 5.10.y): per-CPU-kthread stacking needs in_task().
    #[arg(long, value_name = "BOOL")]
    pub kthread_stacking_requires_task: Option<bool>,
}

impl PolicyArgs {
    /// Preset, then per-flag options, then `--set` in order; then validation.
    pub fn to_config(&self) -> Result<Config, ConfigError> {
        let preset = if self.preset.is_empty() {
            "mainline"
        } else {
            self.preset.as_str()
        };
        let mut c = Config::from_preset(preset)?;
        let opts: [(&str, Option<String>); 18] = [
            (
                "sync_requires_task_waker",
                self.sync_requires_task_waker.map(|b| b.to_string()),
            ),
            (
                "newidle_skip_pending_wakeup",
                self.newidle_skip_pending_wakeup.map(|b| b.to_string()),
            ),
            (
                "delayed_dequeue",
                self.delayed_dequeue.map(|b| b.to_string()),
            ),
            (
                "sync_excludes_delayed",
                self.sync_excludes_delayed.map(|b| b.to_string()),
            ),
            ("recent_used", self.recent_used.clone()),
            ("idle_scan", self.idle_scan.clone()),
            ("idle_candidate", self.idle_candidate.map(|b| b.to_string())),
            (
                "select_idle_smt_prev",
                self.select_idle_smt_prev.map(|b| b.to_string()),
            ),
            (
                "scan_skips_target",
                self.scan_skips_target.map(|b| b.to_string()),
            ),
            ("sis", self.sis.clone()),
            (
                "sis_prop_cost_per_cpu_ns",
                self.sis_prop_cost_per_cpu_ns.map(|n| n.to_string()),
            ),
            (
                "sis_prop_cost_fixed_ns",
                self.sis_prop_cost_fixed_ns.map(|n| n.to_string()),
            ),
            ("wa_idle", self.wa_idle.map(|b| b.to_string())),
            ("wa_weight", self.wa_weight.map(|b| b.to_string())),
            ("wa_bias", self.wa_bias.map(|b| b.to_string())),
            (
                "imbalance_pct_llc",
                self.imbalance_pct_llc.map(|n| n.to_string()),
            ),
            (
                "imbalance_pct_smt",
                self.imbalance_pct_smt.map(|n| n.to_string()),
            ),
            (
                "kthread_stacking_requires_task",
                self.kthread_stacking_requires_task.map(|b| b.to_string()),
            ),
        ];
        for (k, v) in opts {
            if let Some(v) = v {
                c.set(k, &v)?;
            }
        }
        for kv in &self.set {
            c.set_kv(kv)?;
        }
        c.validate()?;
        Ok(c)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::policy::{FLAGS, PRESETS, RecentUsedMode, SisMode};
    use clap::Parser;

    #[derive(Parser, Debug)]
    struct Cli {
        #[command(flatten)]
        policy: PolicyArgs,
    }

    #[test]
    fn clap_args_compose() {
        let cli = Cli::try_parse_from([
            "x",
            "--preset",
            "v6.12",
            "--sync-excludes-delayed",
            "true",
            "--set",
            "sis=prop",
            "--recent-used",
            "search-target",
        ])
        .unwrap();
        let c = cli.policy.to_config().unwrap();
        assert!(c.sync_excludes_delayed && c.sis == SisMode::Prop);
        assert_eq!(c.recent_used, RecentUsedMode::SearchTarget);
        // --set wins over the per-flag option
        let cli =
            Cli::try_parse_from(["x", "--wa-idle", "false", "--set", "wa_idle=true"]).unwrap();
        assert!(cli.policy.to_config().unwrap().wa_idle);
        assert!(Cli::try_parse_from(["x", "--preset", "v9.9"]).is_err());
        assert!(Cli::try_parse_from(["x", "--sis", "fast"]).is_err());
        let cli = Cli::try_parse_from(["x"]).unwrap();
        assert_eq!(cli.policy.to_config().unwrap(), Config::default());
        let cli = Cli::try_parse_from(["x", "--idle-candidate", "false"]).unwrap();
        assert!(cli.policy.to_config().is_err());
        // help renders and names the patch status
        use clap::CommandFactory;
        let help = Cli::command().render_long_help().to_string();
        assert!(
            help.contains("never merged") && help.contains("merged v5.14"),
            "{help}"
        );
    }

    /// Every flag has its option, and every option given at a preset's value, or every flag
    /// given through `--set`, leaves that preset unchanged.
    #[test]
    fn every_flag_is_an_option() {
        for p in PRESETS {
            let base = p.config();
            let mut argv = vec!["x".to_string(), "--preset".into(), p.name.into()];
            for f in FLAGS {
                argv.push(format!("--{}", f.key.replace('_', "-")));
                argv.push(base.get(f.key).unwrap());
            }
            let cli = Cli::try_parse_from(&argv).unwrap_or_else(|e| panic!("{}: {e}", p.name));
            assert_eq!(cli.policy.to_config().unwrap(), base, "{}", p.name);
            let args = PolicyArgs {
                preset: p.name.into(),
                set: FLAGS
                    .iter()
                    .map(|f| format!("{}={}", f.key, base.get(f.key).unwrap()))
                    .collect(),
                ..Default::default()
            };
            assert_eq!(args.to_config().unwrap(), base, "{}", p.name);
        }
    }
}
