//! The exit-code convention of every command (documented in `scx_wakelab --help`):
//! 0 success, 1 a runtime failure, 2 bad usage or bad input.
//!
//! It lives with `explain` because the library has no better home for it yet; `sim` and
//! the binary use it too.  An error is classified by a marker somewhere in its
//! `anyhow` chain: [`Failed`] (exit 1) or [`BadInput`] (exit 2); an unmarked error takes
//! the command's default (bad input for the offline commands, whose only inputs are the
//! command line and the files it names; a runtime failure for the scheduler).

use std::fmt;

/// Success.
pub const OK: u8 = 0;
/// A runtime failure: the kernel refused or ejected the scheduler, an I/O error mid-run, a
/// check that ran and did not pass (a trace that does not replay, an unmet expectation).
pub const RUNTIME: u8 = 1;
/// Bad usage or bad input: the command line, a scenario, a trace, a topology.
pub const BAD_INPUT: u8 = 2;

/// Marks an error as a runtime failure (exit 1).
#[derive(Debug)]
pub struct Failed(pub String);

/// Marks an error as bad input (exit 2).
#[derive(Debug)]
pub struct BadInput(pub String);

impl fmt::Display for Failed {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl fmt::Display for BadInput {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for Failed {}
impl std::error::Error for BadInput {}

/// The exit code of `e`: its marker's, else `default`.
pub fn code_of(e: &anyhow::Error, default: u8) -> u8 {
    for cause in e.chain() {
        if cause.is::<Failed>() {
            return RUNTIME;
        }
        if cause.is::<BadInput>() {
            return BAD_INPUT;
        }
    }
    default
}

#[cfg(test)]
mod tests {
    use super::*;
    use anyhow::Context;

    #[test]
    fn markers_decide_and_survive_context() {
        let plain = anyhow::anyhow!("x");
        assert_eq!(code_of(&plain, BAD_INPUT), BAD_INPUT);
        assert_eq!(code_of(&plain, RUNTIME), RUNTIME);
        let failed: anyhow::Result<()> = Err(Failed("mismatch".into()).into());
        let failed = failed.context("trace t.jsonl").unwrap_err();
        assert_eq!(code_of(&failed, BAD_INPUT), RUNTIME);
        assert_eq!(format!("{failed:#}"), "trace t.jsonl: mismatch");
        let bad: anyhow::Error = BadInput("no such file".into()).into();
        assert_eq!(code_of(&bad, RUNTIME), BAD_INPUT);
    }
}
