//! Bad input to the scheduler command gets one line and a non-zero exit,
//! never a panic (issue 2). These run on any host: argument errors are caught
//! before anything touches the kernel.

mod common;

fn run(args: &[&str]) -> (i32, String, String) {
    common::run(common::scx_wakelab("0").args(args))
}

fn assert_one_line_error(args: &[&str], code: i32, needle: &str) {
    let (rc, _out, err) = run(args);
    assert_eq!(rc, code, "{args:?}: exit {rc}, stderr {err:?}");
    assert_eq!(
        err.trim_end().lines().count(),
        1,
        "{args:?}: not one line: {err:?}"
    );
    assert!(err.contains(needle), "{args:?}: {err:?} lacks {needle:?}");
    assert!(!err.contains("panicked"), "{args:?}: {err:?}");
}

#[test]
fn invalid_option_values_are_one_line_errors() {
    // Each option with values it refuses (as `--option=VALUE`); the error names it.
    for (option, values) in [
        ("--slice-us", &["abc", "0", "99999999"][..]),
        ("--stats", &["0", "soon"]),
        ("--exit-dump-len", &["-5"]),
        ("--preset", &["v4.19"]),
        ("--agent-cpu", &["last", "-1", "99999999"]),
        ("--agent-spin-us", &["-5", "100001", "fast"]),
        ("--apply-path", &["ipc"]),
        ("--debug-half-apply", &["pause"]),
        (
            "--task-table-size",
            &["63", "65537", "4194305", "-1", "many"],
        ),
    ] {
        for v in values {
            assert_one_line_error(&[&format!("{option}={v}")], 2, option);
        }
    }
    // A negative number where an option wants a value is an unknown argument.
    assert_one_line_error(&["--stats", "-1"], 2, "-1");
    assert_one_line_error(&["--no-such-flag"], 2, "--no-such-flag");
    assert_one_line_error(&["--trace-overwrite"], 2, "--trace");
}

/// An `--agent-cpu` that is not online is refused before the trace file or the socket
/// exists, and before a supervisor would start a child on it.
#[test]
fn an_agent_cpu_not_online_is_refused_before_anything_is_made() {
    let cpu = scx_wakelab::policy::MAX_CPUS - 1;
    if std::path::Path::new(&format!("/sys/devices/system/cpu/cpu{cpu}/online")).exists() {
        // A machine with that many CPUs: the CPU may well be online. Nothing to refuse.
        return;
    }
    let dir = std::env::temp_dir().join(format!("wakelab-agent-cpu-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let (sock, trace) = (dir.join("s.sock"), dir.join("t.jsonl"));
    let cpu_arg = cpu.to_string();
    for supervise in [false, true] {
        let mut args = vec![
            "--agent-cpu",
            &cpu_arg,
            "--socket",
            sock.to_str().unwrap(),
            "--trace",
            trace.to_str().unwrap(),
        ];
        if supervise {
            args.push("--supervise");
        }
        assert_one_line_error(&args, 2, &format!("--agent-cpu {cpu}: not an online CPU"));
        assert!(!sock.exists() && !trace.exists(), "{args:?}");
    }
    // Past the CPUs the policy holds, the value itself is refused.
    assert_one_line_error(&["--agent-cpu", "4096"], 2, "beyond the 1024 CPUs");
    std::fs::remove_dir_all(&dir).unwrap();
}

/// The socket's group and the trace and socket paths are judged before
/// anything loads, so these are one line and exit 2 on any host.
#[test]
fn bad_socket_and_trace_paths_are_one_line_errors() {
    let dir = std::env::temp_dir().join(format!("wakelab-paths-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let sock = dir.join("s.sock");
    let sock = sock.to_str().unwrap();
    assert_one_line_error(
        &["--socket", sock, "--socket-group", "no-such-group-wakelab"],
        2,
        "no-such-group-wakelab",
    );
    let link = dir.join("trace-link");
    let _ = std::fs::remove_file(&link);
    std::os::unix::fs::symlink("/etc/passwd", &link).unwrap();
    let link = link.to_str().unwrap();
    assert_one_line_error(&["--socket", sock, "--trace", link], 2, "trace-link");
    assert_one_line_error(
        &["--socket", sock, "--trace", link, "--trace-overwrite"],
        2,
        "trace-link",
    );
    let file = dir.join("not-a-socket");
    std::fs::write(&file, "keep me").unwrap();
    assert_one_line_error(&["--socket", file.to_str().unwrap()], 2, "not-a-socket");
    assert_eq!(std::fs::read_to_string(&file).unwrap(), "keep me");
    // Paths that only creating them would refuse, after loading: refused first.
    let slash = format!("{}/", dir.join("new-dir").display());
    assert_one_line_error(&["--socket", sock, "--trace", &slash], 2, "ends in '/'");
    // Beneath a regular file, no directory for the socket can be made.
    let under_file = dir.join("not-a-socket/s.sock");
    assert_one_line_error(
        &["--socket", under_file.to_str().unwrap()],
        2,
        "cannot create the socket",
    );
    // A newline in the path is echoed escaped, on one line.
    let newline = dir.join("a\nb");
    std::fs::write(&newline, "").unwrap();
    assert_one_line_error(&["--socket", newline.to_str().unwrap()], 2, "a\\nb");
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn invalid_policy_flags_are_one_line_errors() {
    assert_one_line_error(&["--set", "no_such_flag=1"], 2, "no_such_flag");
    assert_one_line_error(&["--set", "recent_used=sideways"], 2, "recent_used");
    assert_one_line_error(&["--set", "missing_equals"], 2, "missing_equals");
}

#[test]
fn set_and_stats_without_a_running_instance_say_so() {
    let sock = std::env::temp_dir().join(format!("wakelab-none-{}.sock", std::process::id()));
    let sock = sock.to_str().unwrap();
    assert_one_line_error(
        &["set", "--socket", sock, "wa_idle=false"],
        1,
        "no running scx_wakelab",
    );
    assert_one_line_error(&["stats", "--socket", sock], 1, "no running scx_wakelab");
    // A malformed or unknown flag is bad input whether or not an instance runs.
    assert_one_line_error(&["set", "--socket", sock, "wa_idle"], 2, "KEY=VALUE");
    assert_one_line_error(
        &["set", "--socket", sock, "no_such_flag=1"],
        2,
        "no_such_flag",
    );
    assert_one_line_error(
        &[
            "set",
            "--socket",
            sock,
            "wa_idle=false",
            "recent_used=sideways",
        ],
        2,
        "recent_used",
    );
}

/// On a host without sched_ext (ours, and CI's) the scheduler refuses with
/// a pointer to the VM; where sched_ext exists this is covered by the
/// env_checks unit tests with a fake sysfs and by the VM suites.
#[test]
fn kernel_without_sched_ext_points_to_the_vm() {
    if std::path::Path::new("/sys/kernel/sched_ext").exists() {
        return;
    }
    let (rc, _out, err) = run(&[]);
    assert_eq!(rc, 1, "{err}");
    let last = err.trim_end().lines().last().unwrap_or_default();
    assert!(
        last.starts_with("error: ") && last.contains("CONFIG_SCHED_CLASS_EXT"),
        "{err}"
    );
    assert!(last.contains("tools/vm/wakelab-vm run"), "{err}");
    assert!(!err.contains("panicked"), "{err}");
}

/// Scripts rely on one convention for every command; --help states it.
#[test]
fn help_states_the_exit_codes() {
    let (rc, out, _err) = run(&["--help"]);
    assert_eq!(rc, 0);
    let flat = out.split_whitespace().collect::<Vec<_>>().join(" ");
    for part in [
        "Exit codes (every command): 0 success; 1 runtime failure",
        "2 bad usage or bad input",
    ] {
        assert!(flat.contains(part), "--help lacks {part:?}: {out}");
    }
}
