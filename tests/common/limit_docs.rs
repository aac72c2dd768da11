//! The documents the input-limit tests grow to each limit, and the two helpers that
//! grow them: shared by `src/json_limits.rs`'s heap tests and `tests/cli_limits.rs`,
//! so that the heap measured in-process and the commands run end to end see the same
//! shapes.
#![allow(dead_code)]

/// A wake-up scenario with a `set` object and a CPU override to replace.
pub const WAKE: &str = r#"{"topology": {"shape": "1x1x4x2"},
    "policy": {"preset": "mainline", "set": {"wa_bias": true}},
    "cpus": {"default": "busy", "overrides": {"5": "idle"}},
    "task": {"pid": 100, "prev_cpu": 1}, "wake": {"waker_cpu": 2}}"#;

/// A newly-idle scenario: CPU 0 idle, CPU 1 with three runnable tasks.
pub const NEWIDLE: &str = r#"{"topology": {"shape": "1x1x4x1"},
    "cpus": ["idle", "busy:3", "busy", "busy"], "newidle": {"cpu": 0}}"#;

/// `base` with `from` replaced by `to` (which must occur in it).
pub fn with(base: &str, from: &str, to: &str) -> String {
    assert!(base.contains(from), "{from}");
    base.replacen(from, to, 1)
}

/// A JSON array of `n` copies of `item`.
pub fn list(n: usize, item: &str) -> String {
    format!("[{}]", vec![item; n].join(","))
}

/// NEWIDLE with `n` pull candidates, each `candidate`.
pub fn newidle_candidates(n: usize, candidate: &str) -> String {
    with(
        NEWIDLE,
        r#"{"cpu": 0}"#,
        &format!(r#"{{"cpu": 0, "candidates": {}}}"#, list(n, candidate)),
    )
}
