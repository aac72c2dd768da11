//! `scx_wakelab sim` end to end: the comparison table, JSON, and bad input.

use std::process::Output;

mod common;

fn sim(args: &[&str]) -> Output {
    common::scx_wakelab("1")
        .arg("sim")
        .args(args)
        .output()
        .expect("run scx_wakelab")
}

#[test]
fn compare_prints_one_column_per_setting() {
    let out = sim(&[
        "--workload",
        "softirq-rr",
        "--topology",
        "2x1x8x1",
        "--seconds",
        "0.01",
        "--compare",
        "sync_requires_task_waker=true",
        "--compare",
        "v5.10",
    ]);
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{text}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let header = text.lines().nth(1).unwrap();
    for col in ["base", "sync_requires_task_waker=true", "v5.10"] {
        assert!(header.contains(col), "{header}");
    }
    for row in [
        "affine rate",
        "all cross-LLC / cross-node",
        "recent-used hits / reached",
        "idle-core hits",
        "pulls / skipped pending",
        "latency mean / p99 (us)",
    ] {
        assert!(
            text.lines().any(|l| l.trim_start().starts_with(row)),
            "no row {row}: {text}"
        );
    }
}

#[test]
fn json_is_an_array_of_reports_and_runs_repeat() {
    let args = [
        "--workload",
        "pipe-rings",
        "--param",
        "rings=2",
        "--events",
        "5000",
        "--seed",
        "7",
        "--json",
        "--compare",
        "delayed_dequeue=false",
    ];
    let out = sim(&args);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let a = v.as_array().unwrap();
    assert_eq!(a.len(), 2);
    assert_eq!(a[0]["events"], 5000);
    assert_eq!(a[1]["label"], "delayed_dequeue=false");
    assert_eq!(a[0]["params"][0], serde_json::json!(["rings", "2"]));
    assert_eq!(sim(&args).stdout, out.stdout, "same seed, same output");
}

/// Bad input: `sim --workload WORKLOAD EXTRA...` is one line on stderr, exit 2, naming
/// `needle`, no panic or abort.
fn assert_refused(workload: &str, extra: &[&str], needle: &str) {
    let mut args = vec!["--workload", workload];
    args.extend_from_slice(extra);
    common::assert_one_line_error(&sim(&args), 2, needle);
}

#[test]
fn bad_input_is_one_line() {
    assert_refused("netperf", &[], "netperf");
    assert_refused(
        "softirq-rr",
        &["--topology", "1x1x4x1"],
        "at least 2 NUMA nodes",
    );
    let cases: &[(&[&str], &str)] = &[
        (&["--topology", "2x2"], "--topology: '2x2' is not"),
        (&["--topology", "0x1x1x1"], "nodes must be at least 1"),
        (&["--param", "rings"], "--param: expected KEY=VALUE"),
        (
            &["--param", "groups=2"],
            "unknown key 'groups' for pipe-rings",
        ),
        (&["--param", "ring_size=1"], "at least 2 processes"),
        (
            &["--compare", "fast"],
            "'fast' is neither KEY=VALUE nor a preset",
        ),
        (&["--compare", "sis=quick"], "bad value 'quick'"),
        (
            &["--set", "idle_candidate=false"],
            "requires idle_candidate=true",
        ),
        (&["--seconds", "0"], "--seconds: 0 is outside"),
    ];
    for (extra, needle) in cases {
        assert_refused("pipe-rings", extra, needle);
    }
}

/// `--topology` takes a shape; a path (what a user of `explain`'s sysfs topologies might
/// try) is one line naming the expected form, never a read of that path.
#[test]
fn topology_paths_are_refused_with_one_line() {
    let dir = std::env::temp_dir().join(format!("wakelab-sim-empty-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    for t in ["/", "/sys", dir.to_str().unwrap()] {
        assert_refused(
            "pipe-rings",
            &["--topology", t],
            "is not NODESxLLCSxCORESxTHREADS",
        );
    }
    std::fs::remove_dir(&dir).unwrap();
}

/// Every numeric option and --param at 0, at its type's maximum, negative and NaN: a
/// run or one line with exit 2, within the test's time; never a panic or an abort.
#[test]
fn extreme_numbers_are_answered_or_refused() {
    let max = u64::MAX.to_string();
    let big = (u64::MAX / 2).to_string();
    let cases: &[(&[&str], &str)] = &[
        (&["--seconds", "NaN"], "--seconds: NaN is outside"),
        (&["--seconds", "inf"], "--seconds: inf is outside"),
        (&["--seconds", "0"], "--seconds: 0 is outside"),
        (&["--seconds=-1"], "--seconds: -1 is outside"),
        (&["--seconds", "1e300"], "is outside (0, 3600]"),
        (&["--events=-1"], "--events"),
        (&["--events", "NaN"], "--events"),
        (&["--seed=-1"], "--seed"),
        (&["--topology", "1x1x1025x1"], "at most 1024"),
        (
            &["--topology", "18446744073709551615x2x2x2"],
            "the policy supports at most 1024",
        ),
        (
            &["--param", "rings=100000000"],
            "rings=100000000: at most 65536",
        ),
        (&["--param", "ring_size=100000"], "at most 65536"),
        (
            &["--param", "rings=65536", "--param", "ring_size=65536"],
            "a simulation may have at most 65536",
        ),
        (&["--param", "rings=-1"], "expected a whole number"),
        (&["--param", "work_ns=NaN"], "expected a whole number"),
        (&["--param", "work_ns=0"], "must be at least 1"),
    ];
    for (extra, needle) in cases {
        assert_refused("pipe-rings", extra, needle);
    }
    // Times at the type's maximum, for the workload and the model.
    for (workload, key) in [
        ("pipe-rings", "work_ns"),
        ("pipe-rings", "tail_ns"),
        ("tbench-like", "server_ns"),
        ("newidle-burst", "pause_ns"),
        ("softirq-rr", "rtt_ns"),
        ("pipe-rings", "slice_ns"),
        ("pipe-rings", "ipi_ns"),
        ("pipe-rings", "switch_ns"),
        ("pipe-rings", "tick_ns"),
        ("pipe-rings", "noise_ns"),
    ] {
        for v in [&max, &big] {
            let kv = format!("{key}={v}");
            assert_refused(workload, &["--param", &kv], "at most 10000000000 (10 s)");
        }
    }
    // The largest accepted values run.
    for extra in [
        &[
            "--param",
            "work_ns=10000000000",
            "--param",
            "tick_ns=10000000000",
        ][..],
        &["--param", "noise_ns=10000000000", "--param", "noise_pct=50"][..],
        &[
            "--param",
            "slice_ns=10000000000",
            "--param",
            "jitter_pct=100",
        ][..],
        &["--seed", &max, "--events", &max][..],
        &["--seed", "0", "--events", "0"][..],
    ] {
        let mut args = vec!["--workload", "pipe-rings", "--seconds", "0.002"];
        args.extend_from_slice(extra);
        let out = sim(&args);
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(0), "{args:?}: {err}");
        assert!(err.is_empty(), "{args:?}: {err}");
    }
}
