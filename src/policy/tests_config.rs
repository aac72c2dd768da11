//! The flag table and presets of `config`: every preset valid and as its kernel, every flag
//! readable and writable by name, errors that say what to fix.

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
    let c = Config::from_preset_with("v6.12", &["sync_excludes_delayed=true", "sis=prop"]).unwrap();
    assert!(c.sync_excludes_delayed);
    assert_eq!(c.sis, SisMode::Prop);
    assert!(c.delayed_dequeue);
    // intermediate inconsistency is fine, the end state is validated
    let c = Config::from_preset_with("v6.16", &["idle_candidate=false", "idle_scan=three-scan"])
        .unwrap();
    assert_eq!(c.idle_scan, IdleScan::ThreeScan);
    // dashes accepted in keys
    let c = Config::from_preset_with("v6.16", &["recent-used=search-target"]).unwrap();
    assert_eq!(c.recent_used, RecentUsedMode::SearchTarget);
}

#[test]
fn errors_are_clear() {
    let e = Config::from_preset("v4.19").unwrap_err();
    assert!(e.to_string().contains("unknown preset 'v4.19'") && e.to_string().contains("v5.10"));
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
    let spec: PolicySpec = serde_json::from_str(r#"{"set": {"recent_used": "nonsense"}}"#).unwrap();
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

#[test]
fn the_flag_table_is_complete() {
    for (i, f) in FLAGS.iter().enumerate() {
        assert!(FLAGS[..i].iter().all(|g| g.key != f.key), "{} twice", f.key);
        for (what, s) in [
            ("values", f.values),
            ("help", f.help),
            ("value_name", f.value_name),
            ("cli_help", f.cli_help),
            ("patch", f.patch),
            ("status", f.status),
        ] {
            assert!(!s.trim().is_empty(), "{}: empty {what}", f.key);
        }
        // a table cell is one line of markdown
        for cell in [f.patch, f.status] {
            assert!(!cell.contains(['|', '\n']), "{}: {cell:?}", f.key);
        }
        // integer flags declare their range's wording; the types' defaults are placeholders
        assert_ne!(f.values, "integer", "{}: no range declared", f.key);
        if let FlagKind::Choice(names) = f.kind {
            assert_eq!(f.values, names.join("|"), "{}", f.key);
        }
        // the range is what `set` accepts, at both ends and no further
        match (f.kind, f.range) {
            (FlagKind::U32 | FlagKind::U64, Some((lo, hi))) => {
                let mut c = Config::default();
                c.set(f.key, &lo.to_string()).unwrap();
                c.set(f.key, &hi.to_string()).unwrap();
                if lo > 0 {
                    assert!(c.set(f.key, &(lo - 1).to_string()).is_err(), "{}", f.key);
                }
                assert!(
                    c.set(f.key, &(hi as u128 + 1).to_string()).is_err(),
                    "{}",
                    f.key
                );
            }
            (FlagKind::Bool | FlagKind::Choice(_), None) => {}
            (kind, range) => panic!("{}: {kind:?} with range {range:?}", f.key),
        }
    }
}

#[test]
fn the_flag_table_has_a_row_per_flag() {
    let t = flag_table();
    let rows: Vec<&str> = t.lines().skip(2).collect();
    assert_eq!(rows.len(), FLAGS.len(), "{t}");
    for (row, f) in rows.iter().zip(FLAGS) {
        assert!(row.starts_with(&format!("| `{}`", f.key)), "{row}");
        assert_eq!(row.matches(" | ").count(), 2, "{row}");
    }
    assert!(t.contains("| `sis` = `none` / `prop` / `util` |"), "{t}");
}

#[test]
fn choice_values_parse_show_and_serialise_by_name() {
    assert_eq!(
        <RecentUsedMode as FlagType>::VALUES,
        "off|v5.10|prev|prev-fixed|search-target"
    );
    assert_eq!(<SisMode as FlagType>::EXPECTED, "none|prop|util");
    for n in RecentUsedMode::NAMES {
        let m = RecentUsedMode::parse(n).unwrap();
        assert_eq!(m.as_str(), *n);
        assert_eq!(serde_json::to_string(&m).unwrap(), format!("\"{n}\""));
    }
    assert_eq!(
        RecentUsedMode::parse(" C "),
        Some(RecentUsedMode::SearchTarget)
    );
    // aliases are for typing, not for files
    assert!(serde_json::from_str::<RecentUsedMode>("\"C\"").is_err());
    assert_eq!(IdleScan::parse("single-pass"), Some(IdleScan::SinglePass));
    assert_eq!(SisMode::parse("fast"), None);
}
