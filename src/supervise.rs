//! `scx_wakelab --supervise`: run the scheduler in a child process and start
//! it again when it dies, for users who run it for long periods without
//! systemd (tools/systemd/scx_wakelab.service does the same with
//! Restart=on-failure).
//!
//! A child is restarted when it is killed (SIGKILL, OOM), exits with an
//! error (the kernel ejected it, a load failed) or hangs (it stops answering
//! `stats` on its socket, or its counters stop moving). It is not
//! restarted when it exits 0 (stopped on request, or the kernel unregistered
//! it, e.g. SysRq-S: someone wanted it gone) or 2 (bad arguments, which no
//! retry fixes). Restarts back off exponentially, and the supervisor gives up
//! with one line naming the last failure after N failures in a row (a child
//! that ran for STABLE_RUN was healthy: the count starts over) or N failures
//! within BUDGET_WINDOW, in a row or not (as systemd's StartLimitBurst), so
//! that a scheduler failing every few minutes is not restarted forever.
//!
//! The child is tied to the supervisor: it gets SIGTERM (a clean unload) when
//! the supervisor dies, however it dies, so a killed supervisor never leaves
//! an unsupervised scheduler behind.

use std::collections::VecDeque;
use std::ffi::OsString;
use std::os::unix::process::{CommandExt, ExitStatusExt};
use std::path::Path;
use std::process::{Child, Command, ExitStatus};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use anyhow::{Context, Result, anyhow, bail};
use log::{info, warn};

/// Set in the child's environment (to the supervisor's pid): the child runs
/// the scheduler itself instead of supervising again. Trusted only when it
/// names the child's actual parent (is_child).
pub const CHILD_ENV: &str = "SCX_WAKELAB_SUPERVISOR_PID";
/// Which start of the supervised scheduler a child is: 1, 2 after the first
/// restart, ... (read only in a child whose CHILD_ENV names its parent).
const START_ENV: &str = "SCX_WAKELAB_START";

/// A child that ran this long was healthy: its failure starts a new count.
const STABLE_RUN: Duration = Duration::from_secs(60);
/// Backoff ceiling, and so the longest --restart-delay (--help says so).
pub const MAX_DELAY: Duration = Duration::from_secs(30);
/// At most --restart-limit failures within this window, in a row or not.
const BUDGET_WINDOW: Duration = Duration::from_secs(600);
/// How long a child has to unload after SIGTERM before it is killed.
const STOP_GRACE: Duration = Duration::from_secs(20);
const POLL: Duration = Duration::from_millis(100);

/// How a running child is checked for a hang.
struct Liveness {
    /// No check before this much time after the start: loading (the BPF
    /// verifier) may take seconds, and the counters do not move meanwhile.
    grace: Duration,
    /// Between two checks.
    every: Duration,
    /// A check not answered within this is a miss.
    timeout: Duration,
    /// Misses in a row before the child is stopped.
    misses: u32,
    /// SIGTERM to SIGKILL for a hung child: shorter than STOP_GRACE, as a
    /// stuck scheduling thread will not carry out the clean unload anyway.
    kill_grace: Duration,
}

/// 6 misses 5 s apart: at least 25 s without progress before a child is
/// stopped. The BPF side rides out a stopped agent (stall fallbacks), so a
/// pause is not a hang: the VM suite SIGSTOPs the agent for "8 s" that a
/// loaded TCG guest stretched past the 10-15 s that 3 misses allowed.
const LIVENESS: Liveness = Liveness {
    grace: Duration::from_secs(15),
    every: Duration::from_secs(5),
    timeout: Duration::from_secs(5),
    misses: 6,
    kill_grace: Duration::from_secs(5),
};

pub struct Limits {
    /// Failures in a row, or within BUDGET_WINDOW, before giving up.
    pub max_failures: u32,
    /// Delay before the first restart; doubles each failure up to MAX_DELAY.
    pub first_delay: Duration,
}

/// True when this process is a supervisor's child: CHILD_ENV names our
/// parent. A value inherited from elsewhere (a shell that exported it, a
/// service manager's environment) names some other process, and trusting it
/// would silently turn `--supervise` off, so it is ignored with a warning.
///
/// Being a child, this also arms the parent-death signal again: the one set
/// before exec (tie_to_supervisor) is cleared when the binary has file
/// capabilities or is set-uid, and the scheduler must not outlive its
/// supervisor either way.
pub fn is_child() -> bool {
    let Some(value) = std::env::var_os(CHILD_ENV) else {
        return false;
    };
    let parent = unsafe { libc::getppid() };
    let named = value
        .to_str()
        .and_then(|s| s.trim().parse::<libc::pid_t>().ok());
    if named != Some(parent) {
        warn!(
            "ignoring {CHILD_ENV}={value:?} from the environment: it does not name this \
             process's parent (pid {parent}); supervising"
        );
        return false;
    }
    // SAFETY: prctl with integer arguments only.
    unsafe {
        libc::prctl(
            libc::PR_SET_PDEATHSIG,
            libc::SIGTERM as libc::c_ulong,
            0,
            0,
            0,
        )
    };
    if unsafe { libc::getppid() } != parent {
        // The supervisor died before the signal was armed: behave as if it
        // had arrived (no handler is installed yet, so this ends us).
        unsafe { libc::raise(libc::SIGTERM) };
    }
    true
}

/// Runs the current executable with our own arguments as a supervised child
/// until it stops for good; `socket` is the socket the child serves
/// (its --socket), asked for the liveness check. Returns the exit code to use.
pub fn run(limits: Limits, socket: &Path) -> Result<u8> {
    let exe = std::env::current_exe().context("finding our own executable")?;
    let args: Vec<OsString> = std::env::args_os().skip(1).collect();
    let stop = Arc::new(AtomicBool::new(false));
    let flag = stop.clone();
    ctrlc::set_handler(move || flag.store(true, Ordering::Relaxed))
        .context("installing the Ctrl-C/SIGTERM handler")?;
    // After ctrlc, which takes SIGHUP as a stop too.
    keep_running_on_sighup()?;

    let me = std::process::id();
    let mut starts = 0u32;
    let mut spawn = || {
        starts += 1;
        let mut cmd = Command::new(&exe);
        // Our own pid replaces whatever CHILD_ENV we inherited.
        cmd.args(&args)
            .env(CHILD_ENV, me.to_string())
            .env(START_ENV, starts.to_string());
        let parent = me as libc::pid_t;
        // SAFETY: tie_to_supervisor makes only async-signal-safe calls and
        // does not allocate, as the code between fork and exec must.
        unsafe { cmd.pre_exec(move || tie_to_supervisor(parent)) };
        cmd.spawn()
            .with_context(|| format!("starting {}", exe.display()))
    };
    supervise(&mut spawn, &limits, socket, &LIVENESS, &stop)
}

/// Where a supervised child writes its --trace: FILE for the first start,
/// FILE.2, FILE.3, ... for restarts, so that a restart neither finds the
/// previous run's trace in its way (refused without --trace-overwrite) nor
/// replaces the record of the run that failed. Call only when is_child().
pub fn trace_path_of_child(path: &Path) -> std::path::PathBuf {
    let start = std::env::var(START_ENV)
        .ok()
        .and_then(|s| s.parse::<u32>().ok())
        .unwrap_or(1);
    trace_path_of_start(path, start)
}

fn trace_path_of_start(path: &Path, start: u32) -> std::path::PathBuf {
    if start <= 1 {
        return path.to_path_buf();
    }
    let mut p = path.as_os_str().to_owned();
    p.push(format!(".{start}"));
    p.into()
}

/// In the child, between fork and exec.
///
/// Its own session: a terminal's hangup or Ctrl-C reaches the supervisor
/// only, which decides (Ctrl-C: SIGTERM to the child; hangup: nothing), so a
/// scheduler started under nohup survives the terminal closing.
///
/// The parent-death signal: SIGTERM, the clean unload, when the supervisor
/// dies. The kernel sends it when the *thread* that forked exits; we fork
/// from the main thread, which lives as long as the supervisor. If the
/// supervisor died before the prctl, no signal will come: getppid() then
/// names a reaper instead, and the child gives up before exec.
fn tie_to_supervisor(supervisor: libc::pid_t) -> std::io::Result<()> {
    // SAFETY: setsid, prctl and getppid are async-signal-safe system calls.
    unsafe {
        if libc::setsid() < 0 {
            return Err(std::io::Error::last_os_error());
        }
        if libc::prctl(
            libc::PR_SET_PDEATHSIG,
            libc::SIGTERM as libc::c_ulong,
            0,
            0,
            0,
        ) != 0
        {
            return Err(std::io::Error::last_os_error());
        }
        if libc::getppid() != supervisor {
            return Err(std::io::Error::from_raw_os_error(libc::ESRCH));
        }
    }
    Ok(())
}

static SIGHUP_SEEN: AtomicBool = AtomicBool::new(false);

extern "C" fn on_sighup(_: libc::c_int) {
    SIGHUP_SEEN.store(true, Ordering::Relaxed);
}

/// SIGHUP is noted and otherwise ignored. It means "your terminal went away"
/// (nohup users expect the run to go on) or, from a service manager, "reload"
/// (systemd sends it only when asked to): neither is a request to stop, and
/// restarting the child for it would unload the scheduler for nothing. A
/// handler rather than SIG_IGN, so that the log says it came.
fn keep_running_on_sighup() -> Result<()> {
    // SAFETY: a zeroed sigaction is valid; the handler only stores an atomic.
    unsafe {
        let mut sa: libc::sigaction = std::mem::zeroed();
        sa.sa_sigaction = on_sighup as extern "C" fn(libc::c_int) as libc::sighandler_t;
        sa.sa_flags = libc::SA_RESTART;
        libc::sigemptyset(&mut sa.sa_mask);
        if libc::sigaction(libc::SIGHUP, &sa, std::ptr::null_mut()) != 0 {
            bail!(
                "installing the SIGHUP handler: {}",
                std::io::Error::last_os_error()
            );
        }
    }
    Ok(())
}

fn note_sighup() {
    if SIGHUP_SEEN.swap(false, Ordering::Relaxed) {
        info!("supervisor: SIGHUP ignored; Ctrl-C or SIGTERM stops scx_wakelab");
    }
}

/// The restart loop, with the child's start and the timings as parameters
/// (the unit tests run a fake child with short ones).
fn supervise(
    spawn: &mut dyn FnMut() -> Result<Child>,
    limits: &Limits,
    socket: &Path,
    live: &Liveness,
    stop: &AtomicBool,
) -> Result<u8> {
    let mut budget = Budget::new(limits.max_failures, BUDGET_WINDOW, STABLE_RUN);
    let mut delay = limits.first_delay;
    loop {
        let started = Instant::now();
        let mut child = spawn()?;
        info!("supervisor: scx_wakelab started (pid {})", child.id());

        let (status, hang) = match watch(&mut child, stop, socket, live)? {
            Watched::Exited(s) => (s, None),
            Watched::Hung(s, why) => (s, Some(why)),
            Watched::Stopped(s) => {
                info!(
                    "supervisor: stopped on request; scx_wakelab {}",
                    describe(s)
                );
                return Ok(code_of(s));
            }
        };
        let ran = started.elapsed();
        // A hung child's exit status is our SIGTERM's doing, not its verdict.
        if hang.is_none() {
            match status.code() {
                Some(0) => {
                    info!(
                        "supervisor: scx_wakelab exited cleanly after {:.1}s; not restarting",
                        ran.as_secs_f64()
                    );
                    return Ok(0);
                }
                Some(2) => {
                    bail!("scx_wakelab refused its arguments (exit status 2); not restarting")
                }
                _ => {}
            }
        }
        let failure = match hang {
            Some(why) => format!("{why}, then {}", describe(status)),
            None => describe(status),
        };
        if ran >= STABLE_RUN {
            delay = limits.first_delay;
        }
        let used = match budget.record(Instant::now(), ran) {
            Verdict::Restart { used } => used,
            Verdict::GiveUp(how) => bail!(
                "scx_wakelab failed {how} (last: {failure} after {:.1}s); giving up",
                ran.as_secs_f64()
            ),
        };
        warn!(
            "supervisor: scx_wakelab {failure} after {:.1}s; restart {used} of {} in {:.1}s",
            ran.as_secs_f64(),
            limits.max_failures - 1,
            delay.as_secs_f64()
        );
        if sleep_unless_stopped(delay, stop) {
            info!("supervisor: stopped on request while waiting to restart");
            return Ok(0);
        }
        delay = (delay * 2).min(MAX_DELAY);
    }
}

/// The restart budget: failures in a row (reset by a stable run) and
/// failures within a window, whichever runs out first.
struct Budget {
    max: u32,
    window: Duration,
    stable: Duration,
    in_a_row: u32,
    /// When the failures of the last `window` happened, oldest first; never
    /// more than `max` of them, as the budget runs out there.
    recent: VecDeque<Instant>,
}

#[derive(Debug, PartialEq)]
enum Verdict {
    /// Restart; `used` restarts of max - 1 are spent.
    Restart { used: u32 },
    /// Out of budget: how it failed ("3 times in a row").
    GiveUp(String),
}

impl Budget {
    fn new(max: u32, window: Duration, stable: Duration) -> Self {
        Budget {
            max,
            window,
            stable,
            in_a_row: 0,
            recent: VecDeque::new(),
        }
    }

    /// Counts a failure at `now` of a child that ran for `ran`.
    fn record(&mut self, now: Instant, ran: Duration) -> Verdict {
        if ran >= self.stable {
            self.in_a_row = 0;
        }
        self.in_a_row += 1;
        while self
            .recent
            .front()
            .is_some_and(|&t| now.saturating_duration_since(t) >= self.window)
        {
            self.recent.pop_front();
        }
        self.recent.push_back(now);
        let in_window = self.recent.len() as u32;
        if self.in_a_row >= self.max {
            Verdict::GiveUp(if self.in_a_row == 1 {
                "once".to_string()
            } else {
                format!("{} times in a row", self.in_a_row)
            })
        } else if in_window >= self.max {
            Verdict::GiveUp(format!("{in_window} times within {}", minutes(self.window)))
        } else {
            Verdict::Restart {
                used: self.in_a_row.max(in_window),
            }
        }
    }
}

fn minutes(d: Duration) -> String {
    match d.as_secs() {
        60 => "a minute".to_string(),
        s if s % 60 == 0 => format!("{} minutes", s / 60),
        _ => format!("{:.1}s", d.as_secs_f64()),
    }
}

enum Watched {
    Exited(ExitStatus),
    /// It stopped answering (why) and was stopped.
    Hung(ExitStatus, String),
    /// We were asked to stop and the child is gone.
    Stopped(ExitStatus),
}

fn watch(child: &mut Child, stop: &AtomicBool, socket: &Path, live: &Liveness) -> Result<Watched> {
    let mut probe = Probe::new(socket, live, Instant::now());
    loop {
        if let Some(s) = child.try_wait().context("waiting for scx_wakelab")? {
            // A child that exits while we are stopping was stopped on
            // request, not a failure.
            return Ok(if stop.load(Ordering::Relaxed) {
                Watched::Stopped(s)
            } else {
                Watched::Exited(s)
            });
        }
        if stop.load(Ordering::Relaxed) {
            return stop_child(child, STOP_GRACE).map(Watched::Stopped);
        }
        note_sighup();
        if let Some(why) = probe.tick(Instant::now()) {
            warn!(
                "supervisor: scx_wakelab (pid {}) {why}; stopping it",
                child.id()
            );
            let s = stop_child(child, live.kill_grace)?;
            return Ok(if stop.load(Ordering::Relaxed) {
                Watched::Stopped(s)
            } else {
                Watched::Hung(s, why)
            });
        }
        std::thread::sleep(POLL);
    }
}

/// The liveness check of one child: its counters (`stats`, target `top`) on
/// its socket every `every`, each on a thread of its own so that a child
/// that accepts and never answers delays neither the next check nor a stop
/// request. The socket is served by a thread of its own in the child, which
/// answers even when the scheduling thread is stuck; the counters in the
/// answer are published by the scheduling thread at least every heartbeat
/// (100 ms), so an answer identical to the previous one is a miss too.
struct Probe<'a> {
    socket: &'a Path,
    live: &'a Liveness,
    next: Instant,
    in_flight: Option<(Instant, mpsc::Receiver<Result<serde_json::Value>>)>,
    last_answer: Option<serde_json::Value>,
    misses: u32,
}

impl<'a> Probe<'a> {
    fn new(socket: &'a Path, live: &'a Liveness, started: Instant) -> Self {
        Probe {
            socket,
            live,
            next: started + live.grace,
            in_flight: None,
            last_answer: None,
            misses: 0,
        }
    }

    /// Collects the check in flight, starts the next one when due; Some(why)
    /// once `misses` checks in a row failed.
    fn tick(&mut self, now: Instant) -> Option<String> {
        if let Some((sent, rx)) = &self.in_flight {
            let result = match rx.try_recv() {
                Ok(r) => Some(r),
                Err(mpsc::TryRecvError::Empty)
                    if now.saturating_duration_since(*sent) < self.live.timeout =>
                {
                    None
                }
                // Left behind: its thread ends at the client's own timeout.
                Err(mpsc::TryRecvError::Empty) => Some(Err(anyhow!(
                    "no answer within {:.1}s",
                    self.live.timeout.as_secs_f64()
                ))),
                Err(mpsc::TryRecvError::Disconnected) => {
                    Some(Err(anyhow!("the check ended without a result")))
                }
            };
            if let Some(r) = result {
                self.in_flight = None;
                match self.judge(r) {
                    Ok(()) => self.misses = 0,
                    Err(problem) => {
                        self.misses += 1;
                        if self.misses >= self.live.misses {
                            return Some(format!(
                                "stopped responding on {}: {} checks {}s apart failed (last: {problem})",
                                self.socket.display(),
                                self.misses,
                                self.live.every.as_secs_f64()
                            ));
                        }
                    }
                }
            }
        }
        if self.in_flight.is_none() && now >= self.next {
            self.next = now + self.live.every;
            let (tx, rx) = mpsc::channel();
            let path = self.socket.to_path_buf();
            let timeout = self.live.timeout;
            let spawned = std::thread::Builder::new()
                .name("liveness".into())
                .spawn(move || {
                    let counters = crate::live::socket::Client::connect(&path, timeout)
                        .and_then(|mut c| c.stats("top"));
                    let _ = tx.send(counters);
                });
            // No thread, no check: not the child's fault.
            if spawned.is_ok() {
                self.in_flight = Some((now, rx));
            }
        }
        None
    }

    fn judge(&mut self, r: Result<serde_json::Value>) -> Result<(), String> {
        let answer = r.map_err(|e| format!("{e:#}"))?;
        if self.last_answer.as_ref() == Some(&answer) {
            return Err("its counters did not change: the scheduling thread is stuck".to_string());
        }
        self.last_answer = Some(answer);
        Ok(())
    }
}

/// SIGTERM, the same clean unload as Ctrl-C; SIGKILL if it does not go
/// within `grace`.
fn stop_child(child: &mut Child, grace: Duration) -> Result<ExitStatus> {
    unsafe { libc::kill(child.id() as libc::pid_t, libc::SIGTERM) };
    let deadline = Instant::now() + grace;
    while Instant::now() < deadline {
        if let Some(s) = child.try_wait()? {
            return Ok(s);
        }
        std::thread::sleep(POLL);
    }
    warn!(
        "supervisor: scx_wakelab did not stop within {:.0}s of SIGTERM; killing it",
        grace.as_secs_f64()
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
        note_sighup();
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
        libc::SIGHUP => "SIGHUP",
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
    fn restarts_trace_to_numbered_files() {
        let p = Path::new("/var/tmp/run.jsonl");
        assert_eq!(trace_path_of_start(p, 1), p);
        assert_eq!(trace_path_of_start(p, 2), Path::new("/var/tmp/run.jsonl.2"));
        assert_eq!(
            trace_path_of_start(p, 11),
            Path::new("/var/tmp/run.jsonl.11")
        );
    }

    #[test]
    fn statuses_are_described_as_a_shell_would() {
        let killed = ExitStatus::from_raw(libc::SIGKILL);
        assert_eq!(describe(killed), "was killed by signal 9 (SIGKILL)");
        assert_eq!(code_of(killed), 137);
        let failed = ExitStatus::from_raw(1 << 8);
        assert_eq!(describe(failed), "exited with status 1");
        assert_eq!(code_of(failed), 1);
    }

    const MIN: Duration = Duration::from_secs(60);

    /// The old count only: failures a few minutes apart, each after a stable
    /// run, restarted forever. The window stops them.
    #[test]
    fn failures_minutes_apart_still_run_out_of_budget() {
        let t0 = Instant::now();
        let mut b = Budget::new(3, 10 * MIN, MIN);
        assert_eq!(b.record(t0, 2 * MIN), Verdict::Restart { used: 1 });
        assert_eq!(
            b.record(t0 + 3 * MIN, 2 * MIN),
            Verdict::Restart { used: 2 }
        );
        assert_eq!(
            b.record(t0 + 6 * MIN, 2 * MIN),
            Verdict::GiveUp("3 times within 10 minutes".to_string())
        );
    }

    #[test]
    fn failures_older_than_the_window_are_forgiven() {
        let t0 = Instant::now();
        let mut b = Budget::new(3, 10 * MIN, MIN);
        for i in 0..20u32 {
            // One failure every 6 minutes: never 3 within 10.
            let v = b.record(t0 + 6 * MIN * i, 2 * MIN);
            assert!(matches!(v, Verdict::Restart { .. }), "failure {i}: {v:?}");
        }
        assert!(b.recent.len() <= 2);
    }

    #[test]
    fn quick_failures_in_a_row_give_up_first() {
        let t0 = Instant::now();
        let mut b = Budget::new(3, 10 * MIN, MIN);
        let quick = Duration::from_millis(100);
        assert_eq!(b.record(t0, quick), Verdict::Restart { used: 1 });
        assert_eq!(b.record(t0 + quick, quick), Verdict::Restart { used: 2 });
        assert_eq!(
            b.record(t0 + 2 * quick, quick),
            Verdict::GiveUp("3 times in a row".to_string())
        );
        let mut once = Budget::new(1, 10 * MIN, MIN);
        assert_eq!(once.record(t0, quick), Verdict::GiveUp("once".to_string()));
    }

    #[test]
    fn failures_in_a_row_spanning_more_than_the_window_still_give_up() {
        // Runs of 50 s and waits of 30 s: 5 in a row take over 6 minutes;
        // with a window of 3 minutes only the count in a row catches them.
        let t0 = Instant::now();
        let mut b = Budget::new(5, 3 * MIN, MIN);
        let ran = Duration::from_secs(50);
        let mut last = None;
        for i in 0..5u32 {
            last = Some(b.record(t0 + Duration::from_secs(80) * i, ran));
        }
        assert_eq!(last, Some(Verdict::GiveUp("5 times in a row".to_string())));
    }

    fn quick_liveness() -> Liveness {
        Liveness {
            grace: Duration::from_millis(200),
            every: Duration::from_millis(200),
            timeout: Duration::from_millis(500),
            misses: 3,
            kill_grace: Duration::from_millis(500),
        }
    }

    /// `supervise` with `max_failures`, a 50 ms first restart delay and
    /// quick liveness checks, never asked to stop.
    fn supervise_quickly(
        spawn: &mut dyn FnMut() -> Result<Child>,
        max_failures: u32,
        socket: &Path,
    ) -> Result<u8> {
        let limits = Limits {
            max_failures,
            first_delay: Duration::from_millis(50),
        };
        supervise(
            spawn,
            &limits,
            socket,
            &quick_liveness(),
            &AtomicBool::new(false),
        )
    }

    fn temp_socket(tag: &str) -> std::path::PathBuf {
        std::env::temp_dir().join(format!("wakelab-sup-{}-{tag}.sock", std::process::id()))
    }

    /// A child that runs but serves no socket (a hung scheduler whose socket
    /// thread is gone) is stopped and counted as a failure, and the budget
    /// then gives up.
    #[test]
    fn a_child_that_never_answers_is_stopped_and_counted() {
        let socket = temp_socket("silent");
        let _ = std::fs::remove_file(&socket);
        let mut pids = Vec::new();
        let mut spawn = || {
            let c = Command::new("sleep").arg("30").spawn()?;
            pids.push(c.id());
            Ok(c)
        };
        let started = Instant::now();
        let err = supervise_quickly(&mut spawn, 2, &socket).expect_err("gives up");
        let msg = format!("{err:#}");
        assert!(
            msg.starts_with("scx_wakelab failed 2 times in a row (last: stopped responding on ")
                && msg.contains(": 3 checks 0.2s apart failed (last: ")
                && msg.contains("then was killed by signal 15 (SIGTERM)")
                && msg.ends_with("giving up"),
            "{msg}"
        );
        assert_eq!(pids.len(), 2, "restarted once");
        // Two rounds of grace + 3 checks, well under sleep's 30 s.
        assert!(
            started.elapsed() < Duration::from_secs(10),
            "{:?}",
            started.elapsed()
        );
        for pid in pids {
            assert_ne!(
                unsafe { libc::kill(pid as libc::pid_t, 0) },
                0,
                "pid {pid} was reaped"
            );
        }
    }

    /// A fake scheduler's socket answering `stats` with `answer(n)` (the
    /// counters) for the n-th request, until the test ends.
    fn serve(socket: &Path, answer: fn(u32) -> String) {
        use std::io::{BufRead, BufReader, Write};
        let _ = std::fs::remove_file(socket);
        let listener = std::os::unix::net::UnixListener::bind(socket).unwrap();
        std::thread::spawn(move || {
            for (n, s) in listener.incoming().enumerate() {
                let Ok(mut s) = s else { continue };
                let mut line = String::new();
                let _ = BufReader::new(&s).read_line(&mut line);
                let reply = if line.contains("\"req\":\"stats\"") {
                    format!("{{\"errno\":0,\"args\":{{\"resp\":{}}}}}", answer(n as u32))
                } else {
                    "{\"errno\":22,\"args\":{\"resp\":\"unknown request\"}}".to_string()
                };
                let _ = writeln!(s, "{reply}");
            }
        });
    }

    /// Counters that move: the child is left alone, and its clean exit ends
    /// the supervision.
    #[test]
    fn a_child_whose_counters_move_is_left_alone() {
        let socket = temp_socket("alive");
        serve(&socket, |n| format!("{{\"nr_decisions\":{n}}}"));
        let mut starts = 0;
        let mut spawn = || {
            starts += 1;
            Ok(Command::new("sleep").arg("2").spawn()?)
        };
        // 2 s: grace then about 9 checks, three times the misses allowed.
        let code = supervise_quickly(&mut spawn, 2, &socket).unwrap();
        assert_eq!(code, 0);
        assert_eq!(starts, 1);
        let _ = std::fs::remove_file(&socket);
    }

    /// The socket thread answers but the counters are frozen: the
    /// scheduling thread is stuck, which is a hang too.
    #[test]
    fn frozen_counters_are_a_hang() {
        let socket = temp_socket("frozen");
        serve(&socket, |_| "{\"nr_decisions\":7}".to_string());
        let mut spawn = || Ok(Command::new("sleep").arg("30").spawn()?);
        let err = supervise_quickly(&mut spawn, 1, &socket).expect_err("gives up");
        let msg = format!("{err:#}");
        assert!(
            msg.starts_with("scx_wakelab failed once (last: stopped responding on ")
                && msg.contains("its counters did not change"),
            "{msg}"
        );
        let _ = std::fs::remove_file(&socket);
    }
}
