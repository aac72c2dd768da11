//! `scx_wakelab --supervise` on the host (issue 5): a child that cannot start
//! is started again with backoff, a bounded number of times, and the
//! supervisor then gives up with one line. The VM suite (tests/vm/reliability.sh)
//! covers the restart of a scheduler that was running.

use std::process::Command;
use std::time::{Duration, Instant};

/// A control socket in a directory that does not exist: the child fails
/// before it could load anything on any host (here, earlier still: the host
/// kernel has no sched_ext, or we are not root).
const UNBINDABLE: &str = "/nonexistent-wakelab-dir/scx_wakelab.sock";

fn supervise(extra: &[&str]) -> (i32, String, Duration) {
    let started = Instant::now();
    let out = Command::new(env!("CARGO_BIN_EXE_scx_wakelab"))
        .args(["--supervise", "--socket", UNBINDABLE])
        .args(extra)
        .env("RUST_BACKTRACE", "0")
        .output()
        .expect("runs the binary");
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stderr).into_owned(),
        started.elapsed(),
    )
}

#[test]
fn gives_up_with_one_line_after_the_limit() {
    let (rc, err, took) = supervise(&["--restart-limit", "3", "--restart-delay", "0.1"]);
    assert_eq!(rc, 1, "{err}");
    assert!(!err.contains("panicked"), "{err}");
    let starts = err
        .lines()
        .filter(|l| l.contains("supervisor: scx_wakelab started"))
        .count();
    assert_eq!(starts, 3, "three starts, no more: {err}");
    let child_errors = err
        .lines()
        .filter(|l| l.starts_with("error: ") && !l.contains("giving up"))
        .count();
    assert_eq!(child_errors, 3, "each child said why it failed: {err}");
    // Backoff doubles: 0.1 s then 0.2 s between the three starts.
    let restarts: Vec<_> = err
        .lines()
        .filter(|l| l.contains("supervisor: scx_wakelab exited with status 1"))
        .collect();
    assert_eq!(restarts.len(), 2, "{err}");
    assert!(
        restarts[0].contains("restart 1 of 2 in 0.1s")
            && restarts[1].contains("restart 2 of 2 in 0.2s"),
        "{err}"
    );
    let last = err.trim_end().lines().last().unwrap_or_default();
    assert!(
        last.starts_with("error: scx_wakelab failed 3 times in a row (last: exited with status 1")
            && last.ends_with("giving up"),
        "{err}"
    );
    assert!(
        took >= Duration::from_millis(300),
        "backoff was waited: {took:?}"
    );
    assert!(took < Duration::from_secs(20), "{took:?}");
}

#[test]
fn a_limit_of_one_means_no_restart() {
    let (rc, err, _) = supervise(&["--restart-limit", "1"]);
    assert_eq!(rc, 1, "{err}");
    assert_eq!(
        err.lines()
            .filter(|l| l.contains("supervisor: scx_wakelab started"))
            .count(),
        1,
        "{err}"
    );
    assert!(
        err.trim_end()
            .lines()
            .last()
            .unwrap_or_default()
            .contains("scx_wakelab failed once (last: "),
        "{err}"
    );
}

#[test]
fn supervisor_options_are_checked_before_any_start() {
    for (args, needle) in [
        (&["--restart-limit", "0"][..], "--restart-limit"),
        (&["--restart-delay", "never"][..], "--restart-delay"),
        (&["--set", "no_such_flag=1"][..], "no_such_flag"),
    ] {
        let (rc, err, _) = supervise(args);
        assert_eq!(rc, 2, "{args:?}: {err}");
        assert_eq!(err.trim_end().lines().count(), 1, "{args:?}: {err}");
        assert!(err.contains(needle), "{args:?}: {err}");
    }
    // Supervisor options mean nothing without --supervise.
    let out = Command::new(env!("CARGO_BIN_EXE_scx_wakelab"))
        .args(["--restart-limit", "3"])
        .output()
        .expect("runs the binary");
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(
        err.contains("--supervise") && err.trim_end().lines().count() == 1,
        "{err}"
    );
}
