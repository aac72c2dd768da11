//! `scx_wakelab sim` end to end: the comparison table, JSON, and bad input.

use std::process::{Command, Output};

fn sim(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_scx_wakelab"))
        .arg("sim")
        .args(args)
        .output()
        .expect("run scx_wakelab")
}

fn assert_one_line_error(out: &Output, needle: &str) {
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(err.trim_end().lines().count(), 1, "{err}");
    assert!(err.contains(needle), "expected '{needle}' in: {err}");
    assert!(!err.contains("panicked"), "{err}");
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

#[test]
fn bad_input_is_one_line() {
    let w = ["--workload", "pipe-rings"];
    let cases: &[(&[&str], &str)] = &[
        (&["--workload", "netperf"], "netperf"),
        (
            &["--workload", "pipe-rings", "--topology", "2x2"],
            "--topology: '2x2' is not",
        ),
        (
            &["--workload", "pipe-rings", "--topology", "0x1x1x1"],
            "nodes must be at least 1",
        ),
        (
            &["--workload", "pipe-rings", "--param", "rings"],
            "--param: expected KEY=VALUE",
        ),
        (
            &["--workload", "pipe-rings", "--param", "groups=2"],
            "unknown key 'groups' for pipe-rings",
        ),
        (
            &["--workload", "pipe-rings", "--param", "ring_size=1"],
            "at least 2 processes",
        ),
        (
            &["--workload", "pipe-rings", "--compare", "fast"],
            "'fast' is neither KEY=VALUE nor a preset",
        ),
        (
            &["--workload", "pipe-rings", "--compare", "sis=quick"],
            "bad value 'quick'",
        ),
        (
            &["--workload", "pipe-rings", "--set", "idle_candidate=false"],
            "requires idle_candidate=true",
        ),
        (
            &["--workload", "pipe-rings", "--seconds", "0"],
            "--seconds: 0 is outside",
        ),
        (
            &["--workload", "softirq-rr", "--topology", "1x1x4x1"],
            "at least 2 NUMA nodes",
        ),
    ];
    let _ = w;
    for (args, needle) in cases {
        assert_one_line_error(&sim(args), needle);
    }
}
