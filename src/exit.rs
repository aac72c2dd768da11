//! The exit-code convention of every command (documented in `scx_wakelab --help`):
//! 0 success, 1 a runtime failure, 2 bad usage or bad input.
//!
//! `explain`, `sim` and both binaries use it.  An error is classified by a marker somewhere in its
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

/// The convention in one sentence, for every binary's `--help`.
pub const EXIT_CODES: &str = "Exit codes (every command): 0 success; 1 runtime failure (the kernel \
    refused or ejected the scheduler, no running instance to ask, an I/O error mid-run, a trace \
    that does not replay or an expectation not met); 2 bad usage or bad input (the command \
    line, a scenario, a trace, a topology); 101 an internal error (a bug: please report it).";

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

/// clap's error as one line. Its first line names the flag and the problem,
/// except when it ends in ':' and the indented lines below carry the names
/// ("the following required arguments were not provided:\n  --supervise").
pub fn one_line_usage_error(text: &str) -> String {
    let mut lines = text.lines();
    let mut out = lines
        .next()
        .unwrap_or("error: invalid arguments")
        .trim_end()
        .to_string();
    if out.ends_with(':') {
        let names: Vec<&str> = lines
            .take_while(|l| l.starts_with(char::is_whitespace) && !l.trim().is_empty())
            .map(str::trim)
            .collect();
        if !names.is_empty() {
            out = format!("{out} {}", names.join(", "));
        }
    }
    out
}

/// A panic's message and place, on one line.
fn panic_line(info: &std::panic::PanicHookInfo<'_>) -> String {
    let payload = info.payload();
    let msg = payload
        .downcast_ref::<&str>()
        .copied()
        .or_else(|| payload.downcast_ref::<String>().map(String::as_str))
        .unwrap_or("(no message)");
    let at = info
        .location()
        .map(|l| format!(" at {}:{}", l.file(), l.line()))
        .unwrap_or_default();
    format!(
        "error: internal error (a bug, please report it){at}: {}",
        msg.replace('\n', " ")
    )
}

/// Replaces the default panic hook, which with RUST_BACKTRACE set symbolises a backtrace
/// while holding the backtrace lock: in the scheduler binary's fixed heap (rustland_core's)
/// that runs out of memory, and the allocation-error handler then waits for the same lock
/// forever.  This hook
/// prints one line and takes no lock; the panic then unwinds as usual: on the main thread
/// the process exits 101 at once, on a helper thread its owner sees the thread fail (the
/// scheduling thread is not made to stop by a helper's bug).
pub fn install_panic_hook() {
    std::panic::set_hook(Box::new(|info| {
        use std::io::Write as _;
        let _ = writeln!(std::io::stderr(), "{}", panic_line(info));
    }));
}

/// Parses the command line; on an error, prints it as one line and returns the exit code
/// (0 for --help and --version, which clap reports as errors).
pub fn parse_args<T: clap::Parser>() -> Result<T, std::process::ExitCode> {
    T::try_parse().map_err(|e| {
        use clap::error::ErrorKind;
        if matches!(e.kind(), ErrorKind::DisplayHelp | ErrorKind::DisplayVersion) {
            let _ = e.print();
            return std::process::ExitCode::SUCCESS;
        }
        eprintln!("{}", one_line_usage_error(&e.to_string()));
        std::process::ExitCode::from(BAD_INPUT)
    })
}

/// Prints `r`'s error as one line and turns it into the exit code of its marker, else
/// `default`.
pub fn exit_with(r: anyhow::Result<()>, default: u8) -> std::process::ExitCode {
    match r {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: {e:#}");
            std::process::ExitCode::from(code_of(&e, default))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Mutex;

    /// The hook's line: one line with the message and the place, even for a message of
    /// several lines, and nothing that reads like the default hook's "panicked".
    #[test]
    fn panic_line_is_one_line_with_message_and_place() {
        static SEEN: Mutex<Vec<String>> = Mutex::new(Vec::new());
        let previous = std::panic::take_hook();
        std::panic::set_hook(Box::new(|info| {
            SEEN.lock().unwrap().push(panic_line(info));
        }));
        let r1 = std::panic::catch_unwind(|| panic!("bad {}\nsecond line", 7));
        let r2 = std::panic::catch_unwind(|| std::panic::panic_any(42u8));
        std::panic::set_hook(previous);
        assert!(r1.is_err() && r2.is_err());
        let seen = SEEN.lock().unwrap();
        assert_eq!(seen.len(), 2, "{seen:?}");
        assert!(
            seen[0].starts_with("error: internal error (a bug, please report it) at src/exit.rs:"),
            "{}",
            seen[0]
        );
        assert!(seen[0].ends_with(": bad 7 second line"), "{}", seen[0]);
        assert!(seen[1].ends_with(": (no message)"), "{}", seen[1]);
        assert!(
            seen.iter()
                .all(|l| !l.contains('\n') && !l.contains("panicked"))
        );
    }
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
