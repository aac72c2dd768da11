//! What the two commands that load BPF share, the scheduler (src/live, in the binary) and
//! `oracle record`: the root check that comes first, and libbpf's messages, kept so that a
//! failed load can say why.
//!
//! The verifier explains a rejected program in libbpf's log, at warning
//! level, hundreds of lines long. We keep the tail in memory, forward all of
//! it to `log` (visible with -v), and on a load failure name the line that
//! states the reason.

use std::collections::VecDeque;
use std::sync::Mutex;

use anyhow::{Result, bail};
use libbpf_rs::PrintLevel;

/// Loading BPF needs root; checked first, before any path or kernel state, so that a
/// non-root user hears the one thing to change.
pub fn check_root(euid: u32) -> Result<()> {
    if euid != 0 {
        bail!(
            "scx_wakelab must run as root: loading a BPF scheduler needs CAP_BPF, CAP_PERFMON and CAP_SYS_ADMIN"
        );
    }
    Ok(())
}

const KEEP_LINES: usize = 400;

static TAIL: Mutex<VecDeque<String>> = Mutex::new(VecDeque::new());

fn on_print(level: PrintLevel, msg: String) {
    let msg = msg.trim_end();
    match level {
        PrintLevel::Warn => log::debug!("libbpf: {msg}"),
        _ => log::trace!("libbpf: {msg}"),
    }
    // One message can hold a whole verifier log: keep it line by line.
    if let Ok(mut tail) = TAIL.lock() {
        for line in msg.lines() {
            if tail.len() == KEEP_LINES {
                tail.pop_front();
            }
            tail.push_back(line.to_string());
        }
    }
}

/// Route libbpf's output through us (all levels, so the verifier log is kept).
pub fn install() {
    libbpf_rs::set_print(Some((PrintLevel::Debug, on_print)));
}

/// The kept lines, oldest first.
pub fn tail() -> Vec<String> {
    TAIL.lock()
        .map(|t| t.iter().cloned().collect())
        .unwrap_or_default()
}

/// The verifier's reason in a rejection log: the last line before the
/// "processed N insns" summary that is not an instruction dump or a register
/// state line. None if the log holds no verifier output.
pub fn verifier_reason(lines: &[String]) -> Option<String> {
    let end = lines
        .iter()
        .rposition(|l| l.contains("processed ") && l.contains(" insns"))?;
    lines[..end]
        .iter()
        .rev()
        .map(|l| l.trim())
        .find(|l| {
            !l.is_empty()
                && !l.starts_with(|c: char| c.is_ascii_digit())
                && !l.starts_with(';')
                && !is_register_state(l)
                && !l.contains("PROG LOAD LOG")
        })
        .map(|l| l.to_string())
}

/// "R1=ctx()" or "R0_w=scalar()": a register state line, not a reason.
fn is_register_state(line: &str) -> bool {
    let Some(rest) = line.strip_prefix('R') else {
        return false;
    };
    let digits = rest.chars().take_while(|c| c.is_ascii_digit()).count();
    digits > 0 && matches!(rest[digits..].chars().next(), Some('=') | Some('_'))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn finds_the_reason_in_a_verifier_log() {
        let log: Vec<String> = [
            "libbpf: prog 'wakelab_enqueue': BPF program load failed: Permission denied",
            "libbpf: prog 'wakelab_enqueue': -- BEGIN PROG LOAD LOG --",
            "0: R1=ctx() R10=fp0",
            "; int x = *p; @ main.bpf.c:12",
            "3: (79) r0 = *(u64 *)(r1 +0)",
            "R1 invalid mem access 'scalar'",
            "processed 4 insns (limit 1000000) max_states_per_insn 0",
            "-- END PROG LOAD LOG --",
        ]
        .iter()
        .map(|s| s.to_string())
        .collect();
        // "R1 invalid mem access" starts with R but is the reason: register
        // *state* lines look like "R1=..." so only those are skipped.
        assert_eq!(
            verifier_reason(&log).as_deref(),
            Some("R1 invalid mem access 'scalar'")
        );
    }

    #[test]
    fn no_verifier_output_no_reason() {
        let log = vec!["libbpf: failed to open object".to_string()];
        assert_eq!(verifier_reason(&log), None);
    }
}
