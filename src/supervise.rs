//! `scx_wakelab --supervise`: run the scheduler in a child process and start
//! it again when it dies, for users who run it for long periods without
//! systemd (tools/systemd/scx_wakelab.service does the same with
//! Restart=on-failure).
//!
//! A child is restarted when it is killed (SIGKILL, OOM) or exits with an
//! error (the kernel ejected it, a load failed). It is not restarted when it
//! exits 0 (stopped on request, or the kernel unregistered it, e.g. SysRq-S:
//! someone wanted it gone) or 2 (bad arguments, which no retry fixes).
//! Restarts back off exponentially, and the supervisor gives up after a
//! number of failures in a row, with one line naming the last failure. A
//! child that ran for STABLE_RUN counts as healthy: the count starts over.

use std::os::unix::process::ExitStatusExt;
use std::process::{Child, Command, ExitStatus};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};
use log::{info, warn};

/// Set in the child's environment (to the supervisor's pid): the child runs
/// the scheduler itself instead of supervising again.
pub const CHILD_ENV: &str = "SCX_WAKELAB_SUPERVISOR_PID";

/// A child that ran this long was healthy: its failure starts a new count.
const STABLE_RUN: Duration = Duration::from_secs(60);
/// Backoff ceiling.
const MAX_DELAY: Duration = Duration::from_secs(30);
/// How long a child has to unload after SIGTERM before it is killed.
const STOP_GRACE: Duration = Duration::from_secs(20);
const POLL: Duration = Duration::from_millis(100);

pub struct Limits {
    /// Failures in a row before giving up.
    pub max_failures: u32,
    /// Delay before the first restart; doubles each failure up to MAX_DELAY.
    pub first_delay: Duration,
}

/// True when this process is a supervisor's child.
pub fn is_child() -> bool {
    std::env::var_os(CHILD_ENV).is_some()
}

/// Runs the current executable with our own arguments as a supervised child
/// until it stops for good. Returns the exit code to use.
pub fn run(limits: Limits) -> Result<u8> {
    let exe = std::env::current_exe().context("finding our own executable")?;
    let args: Vec<_> = std::env::args_os().skip(1).collect();
    let stop = Arc::new(AtomicBool::new(false));
    let flag = stop.clone();
    ctrlc::set_handler(move || flag.store(true, Ordering::Relaxed))
        .context("installing the Ctrl-C/SIGTERM handler")?;

    let mut failures = 0u32;
    let mut delay = limits.first_delay;
    loop {
        let started = Instant::now();
        let mut child = Command::new(&exe)
            .args(&args)
            .env(CHILD_ENV, std::process::id().to_string())
            .spawn()
            .with_context(|| format!("starting {}", exe.display()))?;
        info!("supervisor: scx_wakelab started (pid {})", child.id());

        let status = match wait_or_stop(&mut child, &stop)? {
            Waited::Exited(s) => s,
            Waited::Stopped(s) => {
                info!(
                    "supervisor: stopped on request; scx_wakelab {}",
                    describe(s)
                );
                return Ok(code_of(s));
            }
        };
        let ran = started.elapsed();
        match status.code() {
            Some(0) => {
                info!(
                    "supervisor: scx_wakelab exited cleanly after {:.1}s; not restarting",
                    ran.as_secs_f64()
                );
                return Ok(0);
            }
            Some(2) => bail!("scx_wakelab refused its arguments (exit status 2); not restarting"),
            _ => {}
        }
        if ran >= STABLE_RUN {
            failures = 0;
            delay = limits.first_delay;
        }
        failures += 1;
        if failures >= limits.max_failures {
            bail!(
                "scx_wakelab failed {} (last: {} after {:.1}s); giving up",
                if failures == 1 {
                    "once".to_string()
                } else {
                    format!("{failures} times in a row")
                },
                describe(status),
                ran.as_secs_f64()
            );
        }
        warn!(
            "supervisor: scx_wakelab {} after {:.1}s; restart {} of {} in {:.1}s",
            describe(status),
            ran.as_secs_f64(),
            failures,
            limits.max_failures - 1,
            delay.as_secs_f64()
        );
        if sleep_unless_stopped(delay, &stop) {
            info!("supervisor: stopped on request while waiting to restart");
            return Ok(0);
        }
        delay = (delay * 2).min(MAX_DELAY);
    }
}

enum Waited {
    Exited(ExitStatus),
    /// We were asked to stop and the child is gone.
    Stopped(ExitStatus),
}

fn wait_or_stop(child: &mut Child, stop: &AtomicBool) -> Result<Waited> {
    loop {
        if let Some(s) = child.try_wait().context("waiting for scx_wakelab")? {
            // A child that exits because the same Ctrl-C reached it too was
            // stopped on request, not a failure.
            return Ok(if stop.load(Ordering::Relaxed) {
                Waited::Stopped(s)
            } else {
                Waited::Exited(s)
            });
        }
        if stop.load(Ordering::Relaxed) {
            return stop_child(child).map(Waited::Stopped);
        }
        std::thread::sleep(POLL);
    }
}

/// SIGTERM, the same clean unload as Ctrl-C; SIGKILL if it does not go.
fn stop_child(child: &mut Child) -> Result<ExitStatus> {
    unsafe { libc::kill(child.id() as libc::pid_t, libc::SIGTERM) };
    let deadline = Instant::now() + STOP_GRACE;
    while Instant::now() < deadline {
        if let Some(s) = child.try_wait()? {
            return Ok(s);
        }
        std::thread::sleep(POLL);
    }
    warn!(
        "supervisor: scx_wakelab did not stop within {}s of SIGTERM; killing it",
        STOP_GRACE.as_secs()
    );
    child.kill()?;
    Ok(child.wait()?)
}

fn sleep_unless_stopped(d: Duration, stop: &AtomicBool) -> bool {
    let end = Instant::now() + d;
    while Instant::now() < end {
        if stop.load(Ordering::Relaxed) {
            return true;
        }
        std::thread::sleep(POLL.min(end.saturating_duration_since(Instant::now())));
    }
    stop.load(Ordering::Relaxed)
}

fn describe(s: ExitStatus) -> String {
    match (s.code(), s.signal()) {
        (Some(c), _) => format!("exited with status {c}"),
        (None, Some(sig)) => format!("was killed by signal {sig} ({})", signal_name(sig)),
        _ => format!("ended ({s})"),
    }
}

fn signal_name(sig: i32) -> &'static str {
    match sig {
        libc::SIGKILL => "SIGKILL",
        libc::SIGTERM => "SIGTERM",
        libc::SIGINT => "SIGINT",
        libc::SIGSEGV => "SIGSEGV",
        libc::SIGABRT => "SIGABRT",
        libc::SIGBUS => "SIGBUS",
        _ => "signal",
    }
}

/// The supervisor's own exit code for a child that ended on request: the
/// child's code, or 128+signal as a shell reports it.
fn code_of(s: ExitStatus) -> u8 {
    match (s.code(), s.signal()) {
        (Some(c), _) => c.clamp(0, 255) as u8,
        (None, Some(sig)) => (128 + sig).clamp(0, 255) as u8,
        _ => 1,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn statuses_are_described_as_a_shell_would() {
        let killed = ExitStatus::from_raw(libc::SIGKILL);
        assert_eq!(describe(killed), "was killed by signal 9 (SIGKILL)");
        assert_eq!(code_of(killed), 137);
        let failed = ExitStatus::from_raw(1 << 8);
        assert_eq!(describe(failed), "exited with status 1");
        assert_eq!(code_of(failed), 1);
    }
}
