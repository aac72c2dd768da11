//! What the command-line tests share: starting scx_wakelab and the bad-input
//! convention (one line on stderr, a known exit code, no panic).  Each test
//! file uses part of it.
#![allow(dead_code)]

use std::process::{Command, Output};

/// scx_wakelab with `RUST_BACKTRACE` set to `backtrace` ("1" is the setting
/// under which a panic used to hang, see main.rs's panic hook).
pub fn scx_wakelab(backtrace: &str) -> Command {
    let mut c = Command::new(env!("CARGO_BIN_EXE_scx_wakelab"));
    c.env("RUST_BACKTRACE", backtrace);
    c
}

/// Runs `cmd` to its end: its exit code (-1 when a signal ended it), stdout
/// and stderr.
pub fn run(cmd: &mut Command) -> (i32, String, String) {
    let out = cmd.output().expect("runs the binary");
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// Bad input or a failed check: one line on stderr, exit `code` (2 bad input,
/// 1 a runtime failure), naming `needle`, no panic or abort.
pub fn assert_one_line_error(out: &Output, code: i32, needle: &str) {
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(code), "{err}");
    assert_eq!(err.trim_end().lines().count(), 1, "{err}");
    assert!(err.contains(needle), "expected '{needle}' in: {err}");
    for bad in ["panicked", "memory allocation", "internal error"] {
        assert!(!err.contains(bad), "{err}");
    }
}

pub mod fake_sibling;
