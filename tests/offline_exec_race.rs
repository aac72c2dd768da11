//! The offline hand-over under a swapping attacker: `scx_wakelab explain` is started over
//! and over while, as fast as a thread can, names on the way to `scx_wakelab-offline` are
//! exchanged between a trusted stand-in sibling and an impostor. What must hold, judged by
//! exit codes, output and marker files alone (never by how fast anything ran):
//!   - the impostor never runs (no marker, no exit IMPOSTOR_EXIT, no "impostor ran");
//!   - every run either ran the trusted stand-in or ran the command in-process;
//!   - at least MIN_SWAPS exchanges happened in each arrangement while the runs went on.
//!
//! A scx_wakelab that checks a path and then executes that path again loses this race
//! within a few hundred runs in each arrangement; one that executes the descriptor it
//! checked cannot lose it.

mod common;

use std::ffi::CString;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

use common::fake_sibling::{self, IMPOSTOR_EXIT, IMPOSTOR_MARKERS, Role};

/// Exchanges each arrangement must see while its runs go on.
const MIN_SWAPS: u64 = 10_000;
/// Runs of each arrangement at least, however fast the exchanges come.
const MIN_RUNS: u64 = 300;
/// Runs of each arrangement at most: bounds the test should the exchanging thread get
/// almost no CPU (the swap count then fails it, rather than the test running on).
const MAX_RUNS: u64 = 3_000;

/// One way to put an impostor in reach: scx_wakelab is started as `launch`, while the
/// two names of `pair` are exchanged (renameat2 RENAME_EXCHANGE: each name always exists).
struct Arrangement {
    name: &'static str,
    launch: PathBuf,
    pair: (CString, CString),
    swaps: AtomicU64,
}

#[derive(Default, Debug)]
struct Tally {
    sibling: u64,
    in_process: u64,
    impostor: u64,
    /// Runs that ended any other way, and the first few of them.
    other: u64,
    other_examples: Vec<String>,
}

impl Tally {
    fn unexpected(&mut self, what: String) {
        self.other += 1;
        if self.other_examples.len() < 5 {
            self.other_examples.push(what);
        }
    }
}

/// The test's tree, removed when dropped.
struct Tree(PathBuf);

impl Drop for Tree {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

fn mkdir(p: &Path, mode: u32) {
    std::fs::create_dir(p).unwrap();
    std::fs::set_permissions(p, std::fs::Permissions::from_mode(mode)).unwrap();
}

fn copy(from: &Path, to: &Path, mode: u32) {
    std::fs::copy(from, to).unwrap();
    std::fs::set_permissions(to, std::fs::Permissions::from_mode(mode)).unwrap();
}

/// scx_wakelab in `dir`, the real built binary (a hard link where the file system allows).
fn place_scx_wakelab(dir: &Path) {
    let bin = dir.join("scx_wakelab");
    if std::fs::hard_link(env!("CARGO_BIN_EXE_scx_wakelab"), &bin).is_err() {
        std::fs::copy(env!("CARGO_BIN_EXE_scx_wakelab"), &bin).unwrap();
    }
}

fn c_path(p: &Path) -> CString {
    CString::new(p.as_os_str().as_bytes()).unwrap()
}

fn exchange(pair: &(CString, CString)) {
    // SAFETY: both paths are NUL-terminated strings that outlive the call.
    let r = unsafe {
        libc::syscall(
            libc::SYS_renameat2,
            libc::AT_FDCWD,
            pair.0.as_ptr(),
            libc::AT_FDCWD,
            pair.1.as_ptr(),
            libc::RENAME_EXCHANGE,
        )
    };
    assert_eq!(
        r,
        0,
        "renameat2(RENAME_EXCHANGE) {:?} {:?}: {}",
        pair.0,
        pair.1,
        std::io::Error::last_os_error()
    );
}

/// The three arrangements under `root`, with the stand-ins built there.
fn arrange(root: &Path) -> Vec<Arrangement> {
    let trusted = root.join("trusted-sibling");
    let impostor = root.join("impostor-build");
    fake_sibling::build(&trusted, Role::Trusted);
    fake_sibling::build(&impostor, Role::Impostor);
    let mut all = Vec::new();

    // 1. An ancestor others can write. root/shared (mode 0777) holds the install
    // directory `wl` (ours, 0755: scx_wakelab and the trusted sibling); anyone can
    // rename entries of root/shared, so the attacker exchanges `wl` with a directory
    // of theirs holding the same scx_wakelab and, beside it, the impostor. A check that
    // looks only at the sibling and its own directory passes on `wl` and then executes
    // whatever `wl` is by then.
    let shared = root.join("shared");
    mkdir(&shared, 0o777);
    let (wl, theirs) = (shared.join("wl"), shared.join("theirs"));
    mkdir(&wl, 0o755);
    mkdir(&theirs, 0o777);
    for d in [&wl, &theirs] {
        place_scx_wakelab(d);
    }
    copy(&trusted, &wl.join("scx_wakelab-offline"), 0o755);
    copy(&impostor, &theirs.join("scx_wakelab-offline"), 0o777);
    all.push(Arrangement {
        name: "ancestor renamed",
        launch: wl.join("scx_wakelab"),
        pair: (c_path(&wl), c_path(&theirs)),
        swaps: AtomicU64::new(0),
    });

    // 2. A link through a directory others can write. The install directory (ours)
    // has scx_wakelab-offline as a link to root/open/offline, a link in a directory of
    // mode 0777 that the attacker points at the trusted file during a check and at
    // their impostor otherwise (by exchanging it with their own link `spare`).
    let linked = root.join("linked");
    let open = root.join("open");
    mkdir(&linked, 0o755);
    mkdir(&open, 0o777);
    place_scx_wakelab(&linked);
    copy(&trusted, &linked.join("real-sibling"), 0o755);
    copy(&impostor, &open.join("impostor"), 0o777);
    std::os::unix::fs::symlink(open.join("offline"), linked.join("scx_wakelab-offline")).unwrap();
    std::os::unix::fs::symlink(linked.join("real-sibling"), open.join("offline")).unwrap();
    std::os::unix::fs::symlink(open.join("impostor"), open.join("spare")).unwrap();
    all.push(Arrangement {
        name: "link chain",
        launch: linked.join("scx_wakelab"),
        pair: (c_path(&open.join("offline")), c_path(&open.join("spare"))),
        swaps: AtomicU64::new(0),
    });

    // 3. The sibling's own entry, in a trusted directory, exchanged between the trusted
    // file and a link to an impostor anyone could have written. Whoever can do this
    // owns the directory, so this is no other user's attack; it shows that the file
    // that passed the check is the file that runs even when its name changes right
    // after, and that the trusted sibling still runs when it is the one found.
    let own = root.join("own");
    mkdir(&own, 0o755);
    place_scx_wakelab(&own);
    copy(&trusted, &own.join("scx_wakelab-offline"), 0o755);
    copy(&impostor, &own.join("impostor"), 0o777);
    std::os::unix::fs::symlink(own.join("impostor"), own.join("spare")).unwrap();
    all.push(Arrangement {
        name: "own entry",
        launch: own.join("scx_wakelab"),
        pair: (
            c_path(&own.join("scx_wakelab-offline")),
            c_path(&own.join("spare")),
        ),
        swaps: AtomicU64::new(0),
    });
    all
}

/// Runs `scx_wakelab explain MISSING` as `launch` once and says how it ended.
fn run_once(launch: &Path, missing: &Path, markers: &Path, tally: &mut Tally) {
    let out = Command::new(launch)
        .arg("explain")
        .arg(missing)
        .env("RUST_BACKTRACE", "0")
        .env(IMPOSTOR_MARKERS, markers)
        .output();
    let out = match out {
        Ok(out) => out,
        Err(e) => {
            tally.unexpected(format!("cannot start {}: {e}", launch.display()));
            return;
        }
    };
    let (stdout, stderr) = (
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr),
    );
    let code = out.status.code();
    if code == Some(IMPOSTOR_EXIT) || stderr.contains("impostor ran") {
        tally.impostor += 1;
    } else if code == Some(0)
        && stdout.starts_with(&format!(
            "handed over: scx_wakelab explain {}",
            missing.display()
        ))
    {
        tally.sibling += 1;
    } else if code == Some(2)
        && stdout.is_empty()
        && stderr.lines().count() == 1
        && stderr.starts_with("error: cannot read ")
    {
        tally.in_process += 1;
    } else {
        tally.unexpected(format!(
            "{:?}: stdout {stdout:?}, stderr {stderr:?}",
            out.status
        ));
    }
}

#[test]
fn a_swapping_attacker_never_gets_the_impostor_run() {
    // Under the temporary directory: its ancestors are root's (and /tmp sticky), so the
    // trusted stand-in is trusted when nothing is being swapped.
    let root = std::env::temp_dir().join(format!("wl-offline-race-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&root);
    mkdir(&root, 0o755);
    let tree = Tree(root.clone());
    let markers = root.join("markers");
    mkdir(&markers, 0o755);
    let missing = root.join("missing.json");
    let arrangements = Arc::new(arrange(&root));

    // Before any swapping, the trusted stand-in runs where nothing stands between it
    // and scx_wakelab: the runs below could run it, and only the impostor must not.
    for a in arrangements.iter() {
        let mut calm = Tally::default();
        run_once(&a.launch, &missing, &markers, &mut calm);
        assert_eq!((calm.impostor, calm.other), (0, 0), "{}: {calm:?}", a.name);
        if a.name == "own entry" {
            assert_eq!(calm.sibling, 1, "{}: {calm:?}", a.name);
        }
    }

    // Each exchange works here (and the tree is as it was): a file system without
    // RENAME_EXCHANGE fails the test now, not after the runs.
    for a in arrangements.iter() {
        exchange(&a.pair);
        exchange(&a.pair);
    }
    let stop = Arc::new(AtomicBool::new(false));
    let swapper = {
        let (arrangements, stop) = (Arc::clone(&arrangements), Arc::clone(&stop));
        std::thread::spawn(move || {
            while !stop.load(Ordering::Relaxed) {
                for a in arrangements.iter() {
                    exchange(&a.pair);
                    a.swaps.fetch_add(1, Ordering::Relaxed);
                }
            }
        })
    };
    // Runs start once exchanges do (a count, not a wait of some length).
    while arrangements[0].swaps.load(Ordering::Relaxed) == 0 {
        std::thread::yield_now();
    }
    let at_start: Vec<u64> = arrangements
        .iter()
        .map(|a| a.swaps.load(Ordering::Relaxed))
        .collect();
    let mut tallies: Vec<Tally> = arrangements.iter().map(|_| Tally::default()).collect();
    let mut runs = 0;
    let swaps_so_far = |i: usize| arrangements[i].swaps.load(Ordering::Relaxed) - at_start[i];
    while runs < MAX_RUNS {
        for (a, tally) in arrangements.iter().zip(tallies.iter_mut()) {
            run_once(&a.launch, &missing, &markers, tally);
        }
        runs += 1;
        if runs >= MIN_RUNS && (0..arrangements.len()).all(|i| swaps_so_far(i) >= MIN_SWAPS) {
            break;
        }
    }
    let swaps: Vec<u64> = (0..arrangements.len()).map(swaps_so_far).collect();
    stop.store(true, Ordering::Relaxed);
    swapper.join().unwrap();

    let left: Vec<_> = std::fs::read_dir(&markers)
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .collect();
    let mut report = String::new();
    for ((a, t), s) in arrangements.iter().zip(&tallies).zip(&swaps) {
        report += &format!(
            "{}: {runs} runs, {s} swaps: {} ran the sibling, {} in-process, {} the impostor, {} otherwise\n",
            a.name, t.sibling, t.in_process, t.impostor, t.other
        );
    }
    println!("{report}");
    for ((a, t), s) in arrangements.iter().zip(&tallies).zip(&swaps) {
        assert_eq!(t.impostor, 0, "{}: the impostor ran\n{report}", a.name);
        assert_eq!(
            t.other, 0,
            "{}: runs that were neither the sibling nor in-process: {:?}\n{report}",
            a.name, t.other_examples
        );
        assert!(
            *s >= MIN_SWAPS,
            "{}: only {s} swaps during the runs\n{report}",
            a.name
        );
    }
    assert!(left.is_empty(), "impostor markers: {left:?}\n{report}");
    drop(tree);
}
