//! The placement policy's command line: `--preset`, `--set KEY=VALUE` and one long option
//! per flag.  The per-flag options are built from the flag table (`policy::FLAGS`), so a
//! new flag needs nothing here; clap stays out of `policy`, which parses no arguments.

use std::fmt;
use std::sync::OnceLock;

use clap::builder::PossibleValuesParser;
use clap::{Arg, ArgAction, ArgMatches, Args, Command, FromArgMatches, value_parser};

use crate::policy::{Config, ConfigError, FLAGS, FlagKind, FlagSpec, PRESET_NAMES};

/// Command-line selection of the policy: `--preset`, one long option per flag, and
/// repeatable `--set key=value`.  Applied in that order (preset, per-flag options, `--set`
/// in the order given), then validated.  Flatten it into a clap `Parser`.
#[derive(Clone, Default, PartialEq)]
pub struct PolicyArgs {
    /// Kernel preset to start from; empty means `mainline`.
    pub preset: String,
    /// `--set` arguments, in the order given.
    pub set: Vec<String>,
    /// The per-flag options given, as `(key, value)` in [`FLAGS`] order.
    pub flags: Vec<(&'static str, String)>,
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
        for (k, v) in &self.flags {
            c.set(k, v)?;
        }
        for kv in &self.set {
            c.set_kv(kv)?;
        }
        c.validate()?;
        Ok(c)
    }
}

/// Lists every flag, given or not, as clap's derived `Debug` did when each flag was a field:
/// the scheduler logs its options at start.
impl fmt::Debug for PolicyArgs {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        struct Given<'a>(Option<&'a str>, bool);
        impl fmt::Debug for Given<'_> {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                match self {
                    Given(None, _) => f.write_str("None"),
                    Given(Some(v), true) => write!(f, "Some({v:?})"),
                    Given(Some(v), false) => write!(f, "Some({v})"),
                }
            }
        }
        let mut d = f.debug_struct("PolicyArgs");
        d.field("preset", &self.preset).field("set", &self.set);
        for spec in FLAGS {
            let v = self.flags.iter().find(|(k, _)| *k == spec.key);
            let quoted = matches!(spec.kind, FlagKind::Choice(_));
            d.field(spec.key, &Given(v.map(|(_, v)| v.as_str()), quoted));
        }
        d.finish()
    }
}

const HEADING: &str = "Placement policy (CFS wake-up path)";

/// `--sync-requires-task-waker` for `sync_requires_task_waker`.  Computed once: clap wants
/// `'static` option names.
fn long_names() -> &'static [String] {
    static LONG: OnceLock<Vec<String>> = OnceLock::new();
    LONG.get_or_init(|| FLAGS.iter().map(|f| f.key.replace('_', "-")).collect())
}

/// clap's derive shows a one-paragraph doc comment without its final period; the flag
/// table keeps whole sentences, so `--help` reads as it did when the options were derived.
fn help_text(s: &'static str) -> &'static str {
    match s.strip_suffix('.') {
        Some(t) if !s.ends_with("..") => t,
        _ => s,
    }
}

fn flag_arg(f: &'static FlagSpec, long: &'static str) -> Arg {
    let arg = Arg::new(f.key)
        .long(long)
        .value_name(f.value_name)
        .help(help_text(f.cli_help))
        .action(ArgAction::Set);
    match f.kind {
        FlagKind::Bool => arg.value_parser(value_parser!(bool)),
        FlagKind::U32 => arg.value_parser(value_parser!(u32)),
        FlagKind::U64 => arg.value_parser(value_parser!(u64)),
        FlagKind::Choice(names) => arg.value_parser(PossibleValuesParser::new(names)),
    }
}

/// The value given for flag `f`, as `Config::set` reads it.
fn given(m: &ArgMatches, f: &FlagSpec) -> Option<String> {
    match f.kind {
        FlagKind::Bool => m.get_one::<bool>(f.key).map(ToString::to_string),
        FlagKind::U32 => m.get_one::<u32>(f.key).map(ToString::to_string),
        FlagKind::U64 => m.get_one::<u64>(f.key).map(ToString::to_string),
        FlagKind::Choice(_) => m.get_one::<String>(f.key).cloned(),
    }
}

impl Args for PolicyArgs {
    fn augment_args(cmd: Command) -> Command {
        let cmd = cmd
            .next_help_heading(HEADING)
            .arg(
                Arg::new("preset")
                    .long("preset")
                    .value_name("PRESET")
                    .default_value("mainline")
                    .value_parser(PossibleValuesParser::new(PRESET_NAMES))
                    .action(ArgAction::Set)
                    .help(
                        "Kernel preset to start from: a kernel release, or a stable series \
                         (.y) with its backports, as listed below; v6.16 is mainline, and \
                         mainline+barry is mainline with Barry Song's unmerged in_task() patch",
                    ),
            )
            .arg(
                Arg::new("set")
                    .long("set")
                    .value_name("KEY=VALUE")
                    .action(ArgAction::Append)
                    .value_parser(value_parser!(String))
                    .help(
                        "Override one policy flag, KEY=VALUE; repeatable; applied after the \
                         preset and the per-flag options. Keys are the per-flag option names \
                         with '_' (or '-')",
                    ),
            );
        FLAGS
            .iter()
            .zip(long_names())
            .fold(cmd, |cmd, (f, long)| cmd.arg(flag_arg(f, long)))
    }

    fn augment_args_for_update(cmd: Command) -> Command {
        Self::augment_args(cmd)
    }
}

impl FromArgMatches for PolicyArgs {
    fn from_arg_matches(m: &ArgMatches) -> Result<Self, clap::Error> {
        let mut a = PolicyArgs::default();
        a.update_from_arg_matches(m)?;
        Ok(a)
    }

    fn update_from_arg_matches(&mut self, m: &ArgMatches) -> Result<(), clap::Error> {
        if let Some(p) = m.get_one::<String>("preset") {
            self.preset = p.clone();
        }
        if let Some(s) = m.get_many::<String>("set") {
            self.set = s.cloned().collect();
        }
        for f in FLAGS {
            if let Some(v) = given(m, f) {
                self.flags.retain(|(k, _)| *k != f.key);
                self.flags.push((f.key, v));
            }
        }
        // Keep FLAGS order, whatever order updates came in.
        self.flags
            .sort_by_key(|(k, _)| FLAGS.iter().position(|f| f.key == *k));
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::policy::{PRESETS, RecentUsedMode, SisMode};
    use clap::{CommandFactory, Parser};

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
            for (f, long) in FLAGS.iter().zip(long_names()) {
                argv.push(format!("--{long}"));
                argv.push(base.get(f.key).unwrap());
            }
            let cli = Cli::try_parse_from(&argv).unwrap_or_else(|e| panic!("{}: {e}", p.name));
            assert_eq!(cli.policy.flags.len(), FLAGS.len());
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

    #[test]
    fn per_flag_options_apply_in_table_order_and_debug_lists_every_flag() {
        let cli = Cli::try_parse_from([
            "x",
            "--sis",
            "none",
            "--wa-bias",
            "false",
            "--wa-idle",
            "false",
        ])
        .unwrap();
        let keys: Vec<_> = cli.policy.flags.iter().map(|(k, _)| *k).collect();
        assert_eq!(keys, ["sis", "wa_idle", "wa_bias"]);
        let d = format!("{:?}", cli.policy);
        assert!(d.contains(r#"sis: Some("none")"#), "{d}");
        assert!(d.contains("wa_idle: Some(false)"), "{d}");
        assert!(d.contains("recent_used: None"), "{d}");
        assert!(
            d.starts_with(r#"PolicyArgs { preset: "mainline", set: [], "#),
            "{d}"
        );
    }
}
