//! `scx_wakelab --supervise` on the host (issues 5 and 14): a child that
//! cannot start is started again with backoff, a bounded number of times, and
//! the supervisor then gives up with one line; bad supervisor input is refused;
//! SIGHUP, an inherited supervisor pid and a killed supervisor do not leave
//! the scheduler unsupervised or orphaned. The VM suite (tests/vm/reliability.sh)
//! covers the restart of a scheduler that was running.

use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// A control socket bind() cannot create (/proc makes no files), though no
/// check can tell without creating it: the child fails before it could load
/// anything on any host (here, earlier still: the host kernel has no
/// sched_ext, or we are not root). A socket in a missing directory is bad
/// input now (exit 2), which is not restarted.
const UNBINDABLE: &str = "/proc/scx_wakelab-unbindable.sock";

mod common;

/// The line the supervisor writes at each start of the scheduler.
const STARTED: &str = "supervisor: scx_wakelab started";

/// `scx_wakelab --supervise` with a child that cannot start, and `extra`.
fn supervisor(extra: &[&str]) -> Command {
    let mut c = common::scx_wakelab("0");
    c.args(["--supervise", "--socket", UNBINDABLE]).args(extra);
    c
}

fn supervise(extra: &[&str]) -> (i32, String, Duration) {
    let started = Instant::now();
    let (rc, _out, err) = common::run(&mut supervisor(extra));
    (rc, err, started.elapsed())
}

/// How many lines of `err` contain `what`.
fn lines_with(err: &str, what: &str) -> usize {
    err.lines().filter(|l| l.contains(what)).count()
}

/// The supervisor gave up after `starts` starts: exit 1, and its last line
/// says how many times the scheduler failed in a row.
fn assert_gave_up(rc: i32, err: &str, starts: usize) {
    assert_eq!(rc, 1, "{err}");
    assert_eq!(lines_with(err, STARTED), starts, "{starts} starts: {err}");
    let failed = match starts {
        1 => "failed once (last: ".to_string(),
        n => format!("failed {n} times in a row (last: "),
    };
    assert!(
        last_line(err).starts_with(&format!("error: scx_wakelab {failed}")),
        "{err}"
    );
}

#[test]
fn gives_up_with_one_line_after_the_limit() {
    let (rc, err, took) = supervise(&["--restart-limit", "3", "--restart-delay", "0.1"]);
    assert_gave_up(rc, &err, 3);
    assert!(!err.contains("panicked"), "{err}");
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
    let last = last_line(&err);
    assert!(
        last.contains("(last: exited with status 1") && last.ends_with("giving up"),
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
    assert_gave_up(rc, &err, 1);
}

#[test]
fn supervisor_options_are_checked_before_any_start() {
    for (args, needle) in [
        (&["--restart-limit", "0"][..], "--restart-limit"),
        (&["--restart-delay", "never"][..], "--restart-delay"),
        (&["--set", "no_such_flag=1"][..], "no_such_flag"),
        // Paths too: judged once, not refused by a child among the supervisor's lines.
        (&["--trace", "/etc/passwd"][..], "already exists"),
        (
            &["--socket-group", "no-such-group-wakelab"][..],
            "no-such-group-wakelab",
        ),
    ] {
        let out = supervisor(args).output().expect("runs the binary");
        common::assert_one_line_error(&out, 2, needle);
    }
    for (args, needle) in [
        (
            &["--supervise", "--socket", "/etc/passwd"][..],
            "not a socket",
        ),
        (
            &["--supervise", "--socket", "/etc/passwd/s.sock"][..],
            "cannot create",
        ),
        // Supervisor options mean nothing without --supervise.
        (&["--restart-limit", "3"][..], "--supervise"),
    ] {
        let out = common::scx_wakelab("0")
            .args(args)
            .output()
            .expect("runs the binary");
        common::assert_one_line_error(&out, 2, needle);
    }
}

/// --help promises a wait "doubling up to 30 s": a first wait above that is
/// refused as bad input before anything starts, not silently kept.
#[test]
fn the_restart_delay_cap_is_enforced() {
    for delay in ["3600", "30.5"] {
        let started = Instant::now();
        // Bounded: a supervisor that accepted the delay would wait an hour.
        let (child, rx) = spawn_supervisor(&["--restart-delay", delay], &[]);
        let (rc, err) = finish(child, rx, Vec::new());
        let took = started.elapsed();
        assert_eq!(rc, 2, "{delay}: {err}");
        assert_eq!(err.trim_end().lines().count(), 1, "{delay}: {err}");
        assert!(
            err.starts_with(&format!(
                "error: invalid value '{delay}' for '--restart-delay"
            )) && err.contains("at most 30 seconds"),
            "{delay}: {err}"
        );
        assert!(took < Duration::from_secs(5), "nothing waited: {took:?}");
    }
}

/// Starts the supervisor with stderr piped and a thread forwarding its lines.
fn spawn_supervisor(
    extra: &[&str],
    env: &[(&str, &str)],
) -> (std::process::Child, std::sync::mpsc::Receiver<String>) {
    use std::io::BufRead;
    let mut child = supervisor(extra)
        .envs(env.iter().copied())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("runs the binary");
    let stderr = child.stderr.take().expect("piped");
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        for line in std::io::BufReader::new(stderr).lines() {
            let Ok(line) = line else { break };
            if tx.send(line).is_err() {
                break;
            }
        }
    });
    (child, rx)
}

/// Waits (up to 10 s) for the supervisor to end; its code and all its lines.
fn finish(
    mut child: std::process::Child,
    rx: std::sync::mpsc::Receiver<String>,
    mut lines: Vec<String>,
) -> (i32, String) {
    let deadline = Instant::now() + Duration::from_secs(10);
    let status = loop {
        if let Some(s) = child.try_wait().expect("waits") {
            break s;
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            panic!("supervisor still running after 10 s: {}", lines.join("\n"));
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    // The forwarding thread ends at EOF, when the last child is gone too.
    while let Ok(l) = rx.recv_timeout(Duration::from_secs(5)) {
        lines.push(l);
    }
    (status.code().unwrap_or(-1), lines.join("\n"))
}

/// A supervisor pid inherited from elsewhere (here: a live process that is
/// not our parent) used to make the scheduler skip supervision silently.
#[test]
fn an_inherited_supervisor_pid_does_not_disable_supervision() {
    let not_our_parent = std::os::unix::process::parent_id().to_string();
    for bogus in [not_our_parent.as_str(), "not-a-pid"] {
        let (child, rx) = spawn_supervisor(
            &["--restart-limit", "2", "--restart-delay", "0.1"],
            &[("SCX_WAKELAB_SUPERVISOR_PID", bogus)],
        );
        let (rc, err) = finish(child, rx, Vec::new());
        assert!(
            err.lines()
                .next()
                .is_some_and(|l| l.contains("ignoring SCX_WAKELAB_SUPERVISOR_PID")),
            "{bogus}: warned first: {err}"
        );
        // Only the supervisor warns: each child trusts the pid it was given,
        // its actual parent, and runs the scheduler instead of supervising.
        assert_eq!(
            lines_with(&err, "ignoring SCX_WAKELAB_SUPERVISOR_PID"),
            1,
            "{bogus}: {err}"
        );
        assert_gave_up(rc, &err, 2);
    }
}

/// Under nohup, or when the terminal goes away, SIGHUP must not stop the
/// supervisor: it notes it and goes on restarting.
#[test]
fn sighup_does_not_stop_the_supervisor() {
    let (child, rx) = spawn_supervisor(&["--restart-limit", "3", "--restart-delay", "0.5"], &[]);
    let mut lines = Vec::new();
    let deadline = Instant::now() + Duration::from_secs(10);
    while !lines.iter().any(|l: &String| l.contains(STARTED)) {
        let l = rx
            .recv_timeout(deadline.saturating_duration_since(Instant::now()))
            .unwrap_or_else(|_| panic!("no start within 10 s: {lines:?}"));
        lines.push(l);
    }
    assert_eq!(
        unsafe { libc::kill(child.id() as libc::pid_t, libc::SIGHUP) },
        0
    );
    let (rc, err) = finish(child, rx, lines);
    assert!(!err.contains("stopped on request"), "{err}");
    assert!(err.contains("SIGHUP ignored"), "{err}");
    // It went on to give up, not stopped.
    assert_gave_up(rc, &err, 3);
}

/// State and parent pid of a process from /proc/PID/stat; None once it is
/// gone (reaped).
fn proc_state(pid: i32) -> Option<(char, i32)> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // "pid (comm) S ppid ...": comm may hold spaces and ')'.
    let rest = &stat[stat.rfind(')')? + 2..];
    let mut f = rest.split_whitespace();
    let state = f.next()?.chars().next()?;
    let ppid = f.next()?.parse().ok()?;
    Some((state, ppid))
}

fn children_of(parent: i32) -> Vec<i32> {
    std::fs::read_dir("/proc")
        .into_iter()
        .flatten()
        .flatten()
        .filter_map(|e| e.file_name().to_str()?.parse::<i32>().ok())
        .filter(|&pid| proc_state(pid).is_some_and(|(_, ppid)| ppid == parent))
        .collect()
}

/// A pipe whose buffer is already full: whoever writes to its write end
/// blocks until the test reads (it never does) or the writer is killed.
fn full_pipe() -> (OwnedFd, OwnedFd) {
    let mut fds = [0; 2];
    assert_eq!(unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) }, 0);
    let (r, w) = unsafe { (OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1])) };
    let flags = unsafe { libc::fcntl(w.as_raw_fd(), libc::F_GETFL) };
    unsafe { libc::fcntl(w.as_raw_fd(), libc::F_SETFL, flags | libc::O_NONBLOCK) };
    let chunk = [b'x'; 4096];
    while unsafe { libc::write(w.as_raw_fd(), chunk.as_ptr().cast(), chunk.len()) } > 0 {}
    // Blocking again: the supervisor and its child must wait, not fail.
    unsafe { libc::fcntl(w.as_raw_fd(), libc::F_SETFL, flags) };
    (r, w)
}

/// A supervisor killed with SIGKILL cannot stop its child; the parent-death
/// signal must. On the host the child cannot load, so it is held alive
/// another way: its stderr is a full pipe, and it blocks writing its error
/// line (as the supervisor blocks writing "started") until a signal ends it.
#[test]
fn the_child_dies_with_a_killed_supervisor() {
    let (_read_end, write_end) = full_pipe();
    let mut sup = supervisor(&["--restart-delay", "0.1"])
        .stdout(Stdio::null())
        .stderr(Stdio::from(write_end))
        .spawn()
        .expect("runs the binary");
    let sup_pid = sup.id() as i32;
    let deadline = Instant::now() + Duration::from_secs(5);
    let child = loop {
        if let Some(&c) = children_of(sup_pid).first() {
            break c;
        }
        if Instant::now() > deadline {
            let _ = sup.kill();
            panic!("the supervisor started no child within 5 s");
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    // Let the child get as far as its blocked write: alive, not yet exiting.
    std::thread::sleep(Duration::from_millis(300));
    assert!(
        proc_state(child).is_some_and(|(s, _)| s != 'Z'),
        "child {child} still running before the kill"
    );
    sup.kill().expect("SIGKILL to the supervisor");
    sup.wait().expect("reaps the supervisor");
    let deadline = Instant::now() + Duration::from_secs(5);
    let gone = loop {
        // A zombie has exited; whether its new parent reaps it is not ours.
        match proc_state(child) {
            None | Some(('Z', _)) => break true,
            Some(_) if Instant::now() > deadline => break false,
            Some(_) => std::thread::sleep(Duration::from_millis(20)),
        }
    };
    if !gone {
        unsafe { libc::kill(child, libc::SIGKILL) };
    }
    assert!(
        gone,
        "child {child} outlived its SIGKILLed supervisor by 5 s: {:?}",
        proc_state(child)
    );
}

/// The last line the supervisor wrote: its verdict.
fn last_line(err: &str) -> &str {
    err.trim_end().lines().last().unwrap_or_default()
}
