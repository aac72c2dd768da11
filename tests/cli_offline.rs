//! `scx_wakelab explain`, `sim` and `oracle compare` run in `scx_wakelab-offline` (the system allocator)
//! when that binary sits beside scx_wakelab and only root or its owner can change it and
//! every directory above it; otherwise in scx_wakelab itself.

mod common;

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::sync::OnceLock;

use common::fake_sibling::{self, Role};

/// One test at a time: a file being written while another thread forks can be held open
/// by the child until it execs, and exec() of it then fails (ETXTBSY).
static SERIAL: std::sync::Mutex<()> = std::sync::Mutex::new(());

const SIM: [&str; 5] = ["sim", "--workload", "hackbench", "--events", "2000"];

/// The stand-in sibling, built once for every test binary that asks (atomically renamed
/// into place: concurrent builds of the same tree share it).
fn trusted_sibling() -> &'static Path {
    static BUILT: OnceLock<PathBuf> = OnceLock::new();
    BUILT.get_or_init(|| {
        let out = Path::new(env!("CARGO_TARGET_TMPDIR")).join("fake-trusted-sibling");
        let building = out.with_extension(std::process::id().to_string());
        fake_sibling::build(&building, Role::Trusted);
        std::fs::rename(&building, &out).unwrap();
        out
    })
}

/// A directory holding a link to scx_wakelab (and what a test adds), removed when
/// dropped. Under the temporary directory, not the target directory: scx_wakelab trusts
/// a sibling only when every directory above it is root's or ours and not writable by
/// others (a sticky one such as /tmp passes), which holds for a fresh directory there and
/// not for every checkout's.
struct Installed(PathBuf);

impl Drop for Installed {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

impl std::ops::Deref for Installed {
    type Target = Path;
    fn deref(&self) -> &Path {
        &self.0
    }
}

/// scx_wakelab in a directory of its own and, with `sibling_mode`, a copy of the
/// stand-in scx_wakelab-offline that says it was run.
fn install(name: &str, sibling_mode: Option<u32>) -> Installed {
    let trusted = trusted_sibling();
    let _one = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let d = std::env::temp_dir().join(format!("wl-cli-offline-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    std::fs::set_permissions(&d, std::fs::Permissions::from_mode(0o755)).unwrap();
    let bin = d.join("scx_wakelab");
    if std::fs::hard_link(env!("CARGO_BIN_EXE_scx_wakelab"), &bin).is_err() {
        std::fs::copy(env!("CARGO_BIN_EXE_scx_wakelab"), &bin).unwrap();
    }
    if let Some(mode) = sibling_mode {
        let s = d.join("scx_wakelab-offline");
        std::fs::copy(trusted, &s).unwrap();
        std::fs::set_permissions(&s, std::fs::Permissions::from_mode(mode)).unwrap();
    }
    Installed(d)
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
    // argv[0] is the command users typed, so the sibling's messages name it.
    assert_eq!(
        text.trim(),
        "handed over: scx_wakelab sim --workload hackbench --events 2000"
    );
    // Not the scheduler's own commands.
    let out = run(
        &d.join("scx_wakelab"),
        &["stats", "--socket", "/nonexistent.sock"],
    );
    assert!(!String::from_utf8_lossy(&out.stdout).contains("handed over"));
}

/// `scx_wakelab sim` in `dir` ran in scx_wakelab itself, not in a sibling.
fn runs_here(dir: &Installed) {
    let out = run(&dir.join("scx_wakelab"), &SIM);
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{out:?}");
    assert!(!text.contains("handed over"), "{text}");
    assert!(text.contains("wakeups"), "{text}");
    // Nothing on stderr: a refused sibling is not worth a line there.
    assert!(out.stderr.is_empty(), "{out:?}");
}

#[test]
fn a_sibling_others_can_write_is_not_run() {
    runs_here(&install("writable", Some(0o777)));
    runs_here(&install("group-writable", Some(0o775)));
}

#[test]
fn a_sibling_in_a_directory_others_can_write_is_not_run() {
    let d = install("shared-dir", Some(0o755));
    std::fs::set_permissions(&*d, std::fs::Permissions::from_mode(0o777)).unwrap();
    runs_here(&d);
}

#[test]
fn a_sibling_that_is_a_symbolic_link_is_not_run() {
    // The link's target would be trusted in its place: the link itself is refused.
    let d = install("link", None);
    {
        let _one = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
        std::fs::copy(trusted_sibling(), d.join("real")).unwrap();
    }
    std::os::unix::fs::symlink(d.join("real"), d.join("scx_wakelab-offline")).unwrap();
    runs_here(&d);
}

#[test]
fn a_script_sibling_is_not_run() {
    // Trusted but a script: the descriptor exec'd is close-on-exec, so its interpreter
    // could not read it; the exec fails and the command runs here.
    let d = install("script", None);
    let s = d.join("scx_wakelab-offline");
    {
        let _one = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
        std::fs::write(&s, "#!/bin/sh\necho \"handed over: $*\"\n").unwrap();
    }
    std::fs::set_permissions(&s, std::fs::Permissions::from_mode(0o755)).unwrap();
    runs_here(&d);
}

#[test]
fn without_a_sibling_the_command_runs_in_scx_wakelab() {
    runs_here(&install("alone", None));
}

#[test]
fn both_binaries_give_the_same_answers() {
    let offline = Path::new(env!("CARGO_BIN_EXE_scx_wakelab-offline"));
    let dir = install("same", None);
    let alone = dir.join("scx_wakelab");
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
