//! `scx_wakelab explain` and `sim` run in `scx_wakelab-offline` (the system allocator)
//! when that binary sits beside scx_wakelab and only root or its owner can change it;
//! otherwise in scx_wakelab itself.

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

/// One test at a time: a file being written while another thread forks can be held open
/// by the child until it execs, and exec() of it then fails (ETXTBSY).
static SERIAL: std::sync::Mutex<()> = std::sync::Mutex::new(());

const SIM: [&str; 5] = ["sim", "--workload", "hackbench", "--events", "2000"];

/// A directory holding a link to scx_wakelab and, with `sibling_mode`, a stand-in
/// scx_wakelab-offline that says it was run.
fn install(name: &str, sibling_mode: Option<u32>) -> PathBuf {
    let _one = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let d = Path::new(env!("CARGO_TARGET_TMPDIR")).join(format!("offline-{name}"));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    std::fs::set_permissions(&d, std::fs::Permissions::from_mode(0o755)).unwrap();
    let bin = d.join("scx_wakelab");
    if std::fs::hard_link(env!("CARGO_BIN_EXE_scx_wakelab"), &bin).is_err() {
        std::fs::copy(env!("CARGO_BIN_EXE_scx_wakelab"), &bin).unwrap();
    }
    if let Some(mode) = sibling_mode {
        let s = d.join("scx_wakelab-offline");
        std::fs::write(&s, "#!/bin/sh\necho \"handed over: $*\"\n").unwrap();
        std::fs::set_permissions(&s, std::fs::Permissions::from_mode(mode)).unwrap();
    }
    d
}

fn run(bin: &Path, args: &[&str]) -> Output {
    let _one = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    Command::new(bin)
        .args(args)
        .env("RUST_BACKTRACE", "0")
        .output()
        .unwrap()
}

#[test]
fn a_trusted_sibling_gets_the_command_and_its_arguments() {
    let d = install("trusted", Some(0o755));
    let out = run(&d.join("scx_wakelab"), &SIM);
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{out:?}");
    assert_eq!(
        text.trim(),
        "handed over: sim --workload hackbench --events 2000"
    );
    // Not the scheduler's own commands.
    let out = run(
        &d.join("scx_wakelab"),
        &["stats", "--socket", "/nonexistent.sock"],
    );
    assert!(!String::from_utf8_lossy(&out.stdout).contains("handed over"));
}

/// `scx_wakelab sim` in `dir` ran in scx_wakelab itself, not in a sibling.
fn runs_here(dir: &Path) {
    let out = run(&dir.join("scx_wakelab"), &SIM);
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{out:?}");
    assert!(!text.contains("handed over"), "{text}");
    assert!(text.contains("wakeups"), "{text}");
}

#[test]
fn a_sibling_others_can_write_is_not_run() {
    runs_here(&install("writable", Some(0o777)));
}

#[test]
fn without_a_sibling_the_command_runs_in_scx_wakelab() {
    runs_here(&install("alone", None));
}

#[test]
fn both_binaries_give_the_same_answers() {
    let offline = Path::new(env!("CARGO_BIN_EXE_scx_wakelab-offline"));
    let alone = install("same", None).join("scx_wakelab");
    let scenario = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/scenarios/seed1-barry-qperf-softirq.json"
    );
    for args in [
        &SIM[..],
        &["explain", scenario],
        &["sim", "--workload", "nope"],
    ] {
        let (a, b) = (run(offline, args), run(&alone, args));
        assert_eq!(a.status.code(), b.status.code(), "{args:?}");
        assert_eq!(a.stdout, b.stdout, "{args:?}");
        assert_eq!(a.stderr, b.stderr, "{args:?}");
    }
}
