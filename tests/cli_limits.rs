//! The offline commands' input limits end to end, on both heaps: in `scx_wakelab-offline`
//! (the system allocator: scx_wakelab hands the command over to it) and in a lone copy of
//! scx_wakelab (its fixed 64 MiB heap, src/heap.rs).  At each limit the input is taken;
//! one past it, it is refused with one line and exit 2, the same on both heaps.

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::sync::{Mutex, OnceLock};

use scx_wakelab::json_limits::{MAX_ARRAY_LEN, MAX_DEPTH, MAX_OBJECT_MEMBERS, MAX_VALUES};
use scx_wakelab::policy::MAX_OVERRIDES;

mod common;
use common::assert_one_line_error;
#[path = "common/limit_docs.rs"]
mod limit_docs;
use limit_docs::{NEWIDLE, WAKE, list, newidle_candidates, with};

/// One command at a time: a file being written while another thread forks can be held
/// open by the child until it execs, and exec() of it then fails (ETXTBSY).
static SERIAL: Mutex<()> = Mutex::new(());

fn dir() -> &'static Path {
    static DIR: OnceLock<PathBuf> = OnceLock::new();
    DIR.get_or_init(|| {
        let d = Path::new(env!("CARGO_TARGET_TMPDIR"))
            .join(format!("cli-limits-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        std::fs::create_dir_all(&d).unwrap();
        std::fs::set_permissions(&d, std::fs::Permissions::from_mode(0o755)).unwrap();
        d
    })
}

/// scx_wakelab with no scx_wakelab-offline beside it: the command runs on its fixed heap.
fn alone() -> PathBuf {
    let bin = dir().join("scx_wakelab");
    if !bin.exists() {
        std::fs::copy(env!("CARGO_BIN_EXE_scx_wakelab"), &bin).unwrap();
    }
    bin
}

/// `args` run by both: (which, output).
fn both(args: &[&str]) -> [(&'static str, Output); 2] {
    let _one = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let alone = alone();
    let run = |bin: &Path| {
        Command::new(bin)
            .args(args)
            .env("RUST_BACKTRACE", "0")
            .output()
            .unwrap()
    };
    [
        ("offline", run(Path::new(env!("CARGO_BIN_EXE_scx_wakelab")))),
        ("fixed heap", run(&alone)),
    ]
}

fn file(name: &str, text: &str) -> String {
    let p = dir().join(name);
    std::fs::write(&p, text).unwrap();
    p.to_str().unwrap().to_string()
}

/// `explain` takes `doc`, on both heaps.
fn takes(name: &str, doc: &str) {
    let f = file(&format!("{name}.json"), doc);
    for (heap, out) in both(&["explain", &f]) {
        assert!(
            out.status.success(),
            "{name}, {heap}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
}

/// `explain` refuses `doc` with one line naming `needle` and exit 2, on both heaps.
fn refuses(name: &str, doc: &str, needle: &str) {
    let f = file(&format!("{name}.json"), doc);
    for (_heap, out) in both(&["explain", &f]) {
        assert_one_line_error(&out, 2, needle);
    }
}

/// `explain` takes `grown(limit)` and refuses `grown(limit + 1)` with one line naming
/// `needle`, on both heaps.
fn at_and_past(name: &str, limit: usize, grown: impl Fn(usize) -> String, needle: &str) {
    takes(&format!("{name}-at"), &grown(limit));
    refuses(&format!("{name}-past"), &grown(limit + 1), needle);
}

#[test]
fn nesting() {
    // The flag value sits 3 levels down (the file, policy, set).
    let nested = |n: usize| format!("{}{}", "[".repeat(n - 3), "]".repeat(n - 3));
    refuses(
        "depth-at",
        &with(WAKE, "true", &nested(MAX_DEPTH)),
        "policy.set: data did not match any variant",
    );
    refuses(
        "depth-past",
        &with(WAKE, "true", &nested(MAX_DEPTH + 1)),
        "nested deeper than 32 arrays and objects",
    );
}

#[test]
fn array_length() {
    let candidates = |n: usize| newidle_candidates(n, r#"{"pid": 9, "src_cpu": 1}"#);
    at_and_past(
        "array",
        MAX_ARRAY_LEN,
        candidates,
        "newidle.candidates: an array of more than 16384 elements",
    );
}

#[test]
fn object_size() {
    // The same flag, set again and again: a valid policy.
    let set = |n: usize| {
        let members = vec![r#""wa_idle": true"#; n].join(",");
        with(WAKE, r#"{"wa_bias": true}"#, &format!("{{{members}}}"))
    };
    at_and_past(
        "object",
        MAX_OBJECT_MEMBERS,
        set,
        "policy.set: an object of more than 8192 members",
    );
}

#[test]
fn values_in_a_document() {
    // Candidates (3 values each, and the array) and LLC states (2 each, and the array)
    // filling the document to the limit; the rest of it has 10 values.
    let doc = |extra: bool| {
        let candidates = list(MAX_ARRAY_LEN, r#"{"pid": 9, "src_cpu": 1}"#);
        let llcs = (MAX_VALUES - 10 - 1 - 3 * MAX_ARRAY_LEN - 1) / 2;
        let mut text = with(
            NEWIDLE,
            r#"{"cpu": 0}"#,
            &format!(
                r#"{{"cpu": 0, "candidates": {candidates}}}, "llc_state": {}"#,
                list(llcs, r#"{"llc": 0}"#)
            ),
        );
        if extra {
            text = with(&text, r#""pid": 9"#, r#""pid": 9, "load": 0"#);
        }
        text
    };
    takes("values-at", &doc(false));
    refuses(
        "values-past",
        &doc(true),
        "more than 65536 values in the document",
    );
}

#[test]
fn cpu_overrides() {
    let overrides = |n: usize| {
        let members = vec![r#""0-3": {"nr_running": 2}"#; n].join(",");
        with(WAKE, r#"{"5": "idle"}"#, &format!("{{{members}}}"))
    };
    at_and_past(
        "overrides",
        MAX_OVERRIDES,
        overrides,
        "more than 4096 CPU overrides",
    );
}

#[test]
fn pull_candidates_derived_from_nr_running() {
    // CPU 1's runnable tasks but the one running wait to be pulled.
    let derived = |nr_running: usize| {
        with(
            NEWIDLE,
            r#""busy:3""#,
            &format!(r#"{{"nr_running": {nr_running}}}"#),
        )
    };
    // The busy CPUs 2 and 3 have nobody waiting.
    at_and_past(
        "derived",
        MAX_ARRAY_LEN + 1,
        derived,
        "16385 waiting tasks to consider pulling; at most 16384",
    );
    // Four billion: once 20 s and 15 GB on the system allocator, an abort on the fixed heap.
    refuses(
        "derived-huge",
        &derived(u32::MAX as usize),
        "4294967294 waiting tasks",
    );
}

#[test]
fn simulations_too_large_for_the_heap() {
    // An hour of the default workload: refused on both heaps, before it starts.
    for (_heap, out) in both(&["sim", "--workload", "pipe-rings", "--seconds", "3600"]) {
        assert_one_line_error(&out, 2, "shorten --seconds or bound the run with --events");
    }
    // As many tasks as a simulation may have: only the fixed heap cannot hold them.
    let [(_, offline), (_, fixed)] = both(&[
        "sim",
        "--workload",
        "hackbench",
        "--param",
        "groups=2048",
        "--param",
        "fds=16",
        "--events",
        "10",
    ]);
    assert!(
        offline.status.success(),
        "{}",
        String::from_utf8_lossy(&offline.stderr)
    );
    assert_one_line_error(&fixed, 2, "65544 tasks");
    assert_one_line_error(&fixed, 2, "own fixed 64 MiB heap");
}
