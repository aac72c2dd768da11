//! The exit-code convention of every command (documented in `scx_wakelab --help`):
//! 0 success, 1 a runtime failure, 2 bad usage or bad input, 101 an internal error (a
//! panic, which [`install_panic_hook`] prints as one line).
//!
//! Both binaries and every command use it.  An error is classified by a marker somewhere
//! in its `anyhow` chain: [`Failed`] (exit 1) or [`BadInput`] (exit 2); an unmarked error
//! takes the command's default (bad input for the offline commands, whose only inputs are
//! the command line and the files it names; a runtime failure for the scheduler, `set`,
//! `stats` and `oracle record`).
//!
//! It also owns how an error reaches the terminal: one line ([`print_error`],
//! [`exit_with`], [`parse_args`] for clap's errors), control characters escaped and long
//! input clipped ([`clip`], [`quote`]), so that nothing a user or a peer supplied can split
//! or flood it.

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

/// Longest error line we print: an error quotes the input it refuses, and a
/// 100 KB key or a 300-digit number should not come back whole.
pub const MAX_LINE: usize = 1000;

/// Longest word of an error line we print whole.
const MAX_WORD: usize = 80;

/// `line` made short enough to read, and one line: control characters (a
/// newline in an echoed path, an escape sequence in a peer's message) are
/// escaped as [`escape`] does; each word (a run without spaces) longer than
/// MAX_WORD keeps its start and end around a count of what was left out (so
/// "unknown flag 'xxx...'" still says "unknown flag"); a line still longer
/// than MAX_LINE keeps its start and end the same way.
pub fn clip(line: &str) -> String {
    let line = escape(line);
    let words: Vec<String> = line.split(' ').map(|w| shorten(w, MAX_WORD)).collect();
    shorten(&words.join(" "), MAX_LINE)
}

/// `text` with every control character written as an escape (`\n`, `\t`,
/// `\u{1b}`), so that whatever a user or a peer supplied cannot split an
/// error or log line, nor move a terminal's cursor.
pub fn escape(text: &str) -> String {
    if !text.chars().any(char::is_control) {
        return text.to_string();
    }
    text.chars()
        .map(|c| {
            if c.is_control() {
                c.escape_default().to_string()
            } else {
                c.to_string()
            }
        })
        .collect()
}

/// User- or peer-supplied text (a key, a value, a name, a message) as an
/// error line shows it: in single quotes, control characters escaped.
pub fn quote(text: &str) -> String {
    format!("'{}'", escape(text))
}

/// A path as an error line shows it: escaped as [`escape`] does, bytes that
/// are not UTF-8 shown as U+FFFD.
pub fn quote_path(path: &std::path::Path) -> String {
    escape(&path.to_string_lossy())
}

/// `s` if it has at most `max` characters, else its first two thirds and last
/// third of `max`, the rest counted.
fn shorten(s: &str, max: usize) -> String {
    let n = s.chars().count();
    if n <= max {
        return s.to_string();
    }
    let (head, tail) = (max * 2 / 3, max / 3);
    let start: String = s.chars().take(head).collect();
    let end: String = s.chars().skip(n - tail).collect();
    format!("{start}...({} characters)...{end}", n - head - tail)
}

/// Prints `msg` as the one error line of a command: "error: " and at most
/// MAX_LINE characters of it.
pub fn print_error(msg: &dyn std::fmt::Display) {
    eprintln!("{}", clip(&format!("error: {msg}")));
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
    clip(&out)
}

/// clap's error `text` with each argument in `args` that holds a control character
/// (and the value after an option's '=') shown escaped: clap quotes a refused value as
/// it is, and a newline in it would end the error line in the middle of the quote.
fn escape_echoed_args(text: &str, args: &[String]) -> String {
    let mut raw: Vec<&str> = Vec::new();
    for a in args {
        raw.push(a);
        if let Some((_, v)) = a.strip_prefix("--").and_then(|o| o.split_once('=')) {
            raw.push(v);
        }
    }
    raw.retain(|a| a.chars().any(char::is_control));
    // clap's plain rendering drops escape sequences and most control characters
    // but keeps newlines and tabs: look for the value in that form too.
    let mut forms: Vec<String> = Vec::new();
    for a in raw {
        forms.push(a.to_string());
        forms.push(without_terminal_codes(a));
    }
    // Longest first, so that a value is not escaped inside its own option first.
    forms.sort_by_key(|a| std::cmp::Reverse(a.len()));
    forms.dedup();
    forms
        .into_iter()
        .filter(|f| f.chars().any(char::is_control))
        .fold(text.to_string(), |t, a| t.replace(&a, &escape(&a)))
}

/// `s` without ANSI escape sequences (ESC, '[', parameters, a final letter) and
/// control characters other than newline, tab and carriage return.
fn without_terminal_codes(s: &str) -> String {
    let mut out = String::new();
    let mut chars = s.chars().peekable();
    while let Some(c) = chars.next() {
        if c == '\u{1b}' {
            if chars.peek() == Some(&'[') {
                chars.next();
                for p in chars.by_ref() {
                    if ('@'..='~').contains(&p) {
                        break;
                    }
                }
            }
            continue;
        }
        if c.is_control() && !matches!(c, '\n' | '\t' | '\r') {
            continue;
        }
        out.push(c);
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
    clip(&format!(
        "error: internal error (a bug, please report it){at}: {}",
        msg.replace('\n', " ")
    ))
}

/// Replaces the default panic hook, which with RUST_BACKTRACE set symbolises a backtrace
/// while holding the backtrace lock: in the scheduler binary's fixed heap (rustland_core's)
/// that runs out of memory, and the allocation-error handler then waits for the same lock
/// forever. This hook prints one line and takes no lock; the panic then unwinds as usual:
/// on the main thread the process exits 101 at once, on a helper thread its owner sees the
/// thread fail (the scheduling thread is not made to stop by a helper's bug).
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
        let args: Vec<String> = std::env::args_os()
            .map(|a| a.to_string_lossy().into_owned())
            .collect();
        eprintln!(
            "{}",
            one_line_usage_error(&escape_echoed_args(&e.to_string(), &args))
        );
        std::process::ExitCode::from(BAD_INPUT)
    })
}

/// Prints `r`'s error as one line and turns it into the exit code of its marker, else
/// `default`.
pub fn exit_with(r: anyhow::Result<()>, default: u8) -> std::process::ExitCode {
    match r {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(e) => {
            print_error(&format_args!("{e:#}"));
            std::process::ExitCode::from(code_of(&e, default))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Mutex;

    #[test]
    fn long_words_and_lines_are_clipped_with_a_count() {
        assert_eq!(clip("short words stay"), "short words stay");
        let word = "é".repeat(MAX_WORD);
        assert_eq!(clip(&word), word);
        // A long quoted input: the words around it stay whole.
        let c = clip(&format!(
            "error: unknown flag '{}'; known: a, b",
            "x".repeat(12345)
        ));
        assert!(c.starts_with("error: unknown flag 'xxx"), "{c}");
        assert!(c.ends_with("xxx'; known: a, b"), "{c}");
        assert!(c.contains("...(12269 characters)..."), "{c}");
        // Many words: the line itself is cut.
        let c = clip(&"word ".repeat(1000));
        assert!(c.chars().count() < MAX_LINE + 40, "{}", c.len());
        assert!(c.contains("characters)..."), "{c}");
        let usage = one_line_usage_error(&format!("error: invalid value '{}'", "9".repeat(5000)));
        assert!(usage.chars().count() < MAX_WORD + 60, "{usage}");
    }

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
    fn control_characters_never_split_a_line() {
        assert_eq!(escape("plain text"), "plain text");
        assert_eq!(escape("a\nb\tc\u{1b}[2J"), "a\\nb\\tc\\u{1b}[2J");
        assert_eq!(quote("x\ry"), "'x\\ry'");
        let p = std::path::Path::new("/tmp/evil\nname");
        assert_eq!(quote_path(p), "/tmp/evil\\nname");
        let line = clip("error: bad key 'k\nERROR: forged'\r");
        assert!(!line.contains('\n') && !line.contains('\r'), "{line}");
        assert!(line.contains("k\\nERROR: forged"), "{line}");
    }

    #[test]
    fn a_refused_argument_with_a_newline_stays_on_the_line() {
        // clap drops the escape sequence and keeps the newline.
        let code = ["p".to_string(), "f\n\u{1b}[1mrob\u{7}".to_string()];
        let shown = escape_echoed_args("unrecognized subcommand 'f\nrob'\n", &code);
        assert_eq!(
            one_line_usage_error(&shown),
            "unrecognized subcommand 'f\\nrob'"
        );
        let args = [
            "prog".to_string(),
            "--timeout=5\n".to_string(),
            "a\tb".to_string(),
        ];
        let text =
            "error: invalid value '5\n' for '--timeout <SECS>': '5\\n' is not a number\n\nFor more";
        let line = one_line_usage_error(&escape_echoed_args(text, &args));
        assert_eq!(
            line,
            "error: invalid value '5\\n' for '--timeout <SECS>': '5\\n' is not a number"
        );
    }

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
