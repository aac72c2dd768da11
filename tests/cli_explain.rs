//! `scx_wakelab explain` end to end: the shipped scenarios (one per seed, on the authors'
//! machines), the "try --preset ..." variants their descriptions suggest, bad input, a
//! sysfs topology, and trace replay.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use scx_wakelab::explain::synthetic::SyntheticTrace;
use scx_wakelab::policy::{Config, Topology, TraceRecord};

mod common;
use common::assert_one_line_error;

fn bin() -> Command {
    common::scx_wakelab("1")
}

fn scenario(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("scenarios")
        .join(name)
}

fn explain(args: &[&str]) -> Output {
    bin()
        .arg("explain")
        .args(args)
        .output()
        .expect("run scx_wakelab")
}

fn json(args: &[&str]) -> serde_json::Value {
    let mut a = args.to_vec();
    a.push("--json");
    let out = explain(&a);
    assert!(
        out.status.success(),
        "{args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).expect("JSON output")
}

fn rules(v: &serde_json::Value) -> Vec<String> {
    v["chain"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["rule"].as_str().unwrap().to_string())
        .collect()
}

fn tmp(name: &str) -> PathBuf {
    let d = Path::new(env!("CARGO_TARGET_TMPDIR")).join("cli_explain");
    std::fs::create_dir_all(&d).unwrap();
    d.join(name)
}

#[test]
fn every_shipped_scenario_meets_its_expectation() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("scenarios");
    let mut n = 0;
    for e in std::fs::read_dir(&dir).unwrap() {
        let p = e.unwrap().path();
        if p.extension().is_none_or(|x| x != "json") {
            continue;
        }
        let v = json(&[p.to_str().unwrap()]);
        assert_eq!(v["expect"]["checked"], true, "{}", p.display());
        assert_eq!(v["expect"]["met"], true, "{}: {}", p.display(), v["expect"]);
        // Text output: one line per rule, each with its text and the state it looked at.
        let out = explain(&[p.to_str().unwrap()]);
        assert!(out.status.success());
        let text = String::from_utf8(out.stdout).unwrap();
        let chain_lines = text
            .lines()
            .skip_while(|l| *l != "rule chain:")
            .skip(1)
            .take_while(|l| l.starts_with("  "))
            .count();
        assert_eq!(chain_lines, v["chain"].as_array().unwrap().len(), "{text}");
        assert!(text.contains("expect:   met"), "{text}");
        n += 1;
    }
    assert!(n >= 4, "ship at least one scenario per seed");
}

#[test]
fn seed_scenarios_flip_with_their_flag() {
    // Seed 1: Barry's in_task() requirement keeps qperf on node 0.
    let s = scenario("seed1-barry-qperf-softirq.json");
    let v = json(&[s.to_str().unwrap(), "--preset", "mainline+barry"]);
    assert_eq!(v["cpu"], 5);
    assert!(rules(&v).contains(&"sync_shortcut_blocked_irq_waker".into()));
    assert_eq!(
        v["expect"]["checked"], false,
        "CLI overrides disable the file's expectation"
    );
    let v = json(&[
        s.to_str().unwrap(),
        "--set",
        "sync_requires_task_waker=true",
    ]);
    assert_eq!(v["cpu"], 5);

    // Seed 2: v5.14 skips the pull.
    let s = scenario("seed2-rik-newidle-pending.json");
    let v = json(&[s.to_str().unwrap(), "--preset", "v5.14"]);
    assert!(v["pulled"].is_null());
    assert_eq!(rules(&v), ["newidle_skip_pending_wakeup"]);

    // Seed 3: the fix pulls the wakee to the waker's CPU.
    let s = scenario("seed3-xuewen-lat-ctx-delayed.json");
    let v = json(&[s.to_str().unwrap()]);
    assert_eq!(v["cpu"], 7);
    for fix in [
        vec!["--preset", "v6.16"],
        vec!["--set", "sync_excludes_delayed=true"],
    ] {
        let mut a = vec![s.to_str().unwrap()];
        a.extend(fix);
        let v = json(&a);
        assert_eq!(v["cpu"], 0);
        assert!(rules(&v).contains(&"wake_affine_idle_sync_waker_alone_excluding_delayed".into()));
    }

    // Seed 4: the search-target variant finds the idle core instead of the idle thread
    // next to a busy sibling.
    let s = scenario("seed4-mel-recent-used-smt.json");
    let v = json(&[s.to_str().unwrap(), "--set", "recent_used=search-target"]);
    assert_eq!(v["cpu"], 6);
    assert!(rules(&v).contains(&"sis_recent_used_becomes_target".into()));
    let s = scenario("seed4-vincent-smt4-recent-used.json");
    let v = json(&[s.to_str().unwrap(), "--set", "recent_used=search-target"]);
    assert_eq!(v["cpu"], 20);
    let s = scenario("seed4-hillf-mask-bug.json");
    let v = json(&[s.to_str().unwrap(), "--preset", "v6.5"]);
    assert_eq!(v["cpu"], 6);
    assert!(rules(&v).contains(&"sis_recent_used_miss".into()));
}

#[test]
fn bad_input_is_one_line_naming_the_field() {
    let base = r#""topology": {"shape": "1x1x4x1"}"#;
    let cases: &[(&str, &str)] = &[
        (
            r#"{"topology": {"shape": "1x1x4x1"}, "task": {"pid": 1, "prev_cpu": "x"}, "wake": {"waker_cpu": 0}}"#,
            "task.prev_cpu: invalid type",
        ),
        (
            r#"{"topology": {"shape": "1x1x4x1"}, "task": {"pid": 1, "prev_cpu": 7}, "wake": {"waker_cpu": 0}}"#,
            "task.prev_cpu: CPU 7 is outside the topology",
        ),
        (
            r#"{"topology": {"shape": "1x1x4"}, "newidle": {"cpu": 0}}"#,
            "topology.shape: '1x1x4' is not NODESxLLCSxCORESxTHREADS",
        ),
        (
            r#"{"topology": {"shape": "1x1x4x1"}, "cpus": {"default": "idle", "overrides": {"2-9": "busy"}}, "newidle": {"cpu": 0}}"#,
            "cpus.overrides.\"2-9\": CPU 4 is outside the topology",
        ),
        (
            r#"{"topology": {"shape": "1x1x4x1"}, "policy": {"preset": "v6.12", "set": {"recent_used": "sometimes"}}, "newidle": {"cpu": 0}}"#,
            "policy.set.recent_used: bad value 'sometimes'",
        ),
        (
            r#"{"topology": {"shape": "1x1x4x1"}, "task": {"pid": 1, "prev_cpu": 1}, "wake": {"waker_cpu": 0, "sync": "yes"}}"#,
            "wake.sync: invalid type",
        ),
        (
            r#"{"topology": {"shape": "1x1x4x1"}, "newidle": {"cpu": 0}, "expect": {"rules": ["no_such_rule"]}}"#,
            "expect.rules[0]: unknown rule 'no_such_rule'",
        ),
        (
            r#"{"topology": {"shape": "1x1x4x1"}, "newidle": {"cpu": 0"#,
            "EOF while parsing",
        ),
        (r#"[1, 2]"#, "top level: expected a JSON object"),
    ];
    let _ = base;
    for (i, (text, needle)) in cases.iter().enumerate() {
        let p = tmp(&format!("bad{i}.json"));
        std::fs::write(&p, text).unwrap();
        let out = explain(&[p.to_str().unwrap()]);
        assert_one_line_error(&out, 2, needle);
        assert!(String::from_utf8_lossy(&out.stderr).contains(&format!("bad{i}.json")));
    }
    let out = explain(&["/nonexistent/scenario.json"]);
    assert_one_line_error(&out, 2, "cannot read /nonexistent/scenario.json");
    let s = scenario("seed1-barry-qperf-softirq.json");
    let out = explain(&[s.to_str().unwrap(), "--set", "wa_idle=perhaps"]);
    assert_one_line_error(&out, 2, "--set wa_idle=perhaps: bad value 'perhaps'");
    let out = explain(&[s.to_str().unwrap(), "--preset", "v4.19"]);
    assert_one_line_error(&out, 2, "v4.19");
    let out = explain(&[]);
    assert_one_line_error(&out, 2, "required arguments were not provided");
    // An expectation that fails is an error too.
    let p = tmp("unmet.json");
    std::fs::write(
        &p,
        r#"{"topology": {"shape": "1x1x4x1"}, "task": {"pid": 1, "prev_cpu": 1}, "wake": {"waker_cpu": 0}, "expect": {"cpu": 3}}"#,
    )
    .unwrap();
    let out = explain(&[p.to_str().unwrap()]);
    assert_one_line_error(&out, 1, "expectation not met: expected CPU 3, chose 1");
}

/// Writes a fake sysfs tree: `nodes` nodes of `cores` cores of `threads` threads, one L3
/// per node, the way Linux numbers an x86 box (first threads of every core, then the
/// second threads).
fn fake_sysfs(root: &Path, nodes: usize, cores: usize, threads: usize) {
    let sys = root.join("sys/devices/system");
    let _ = std::fs::remove_dir_all(root);
    let n = nodes * cores * threads;
    let w = |p: PathBuf, s: String| {
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        std::fs::write(p, s).unwrap();
    };
    w(sys.join("cpu/online"), format!("0-{}\n", n - 1));
    w(sys.join("cpu/possible"), format!("0-{}\n", n - 1));
    w(
        sys.join("cpu/smt/active"),
        format!("{}\n", u8::from(threads > 1)),
    );
    let per_thread = nodes * cores;
    for cpu in 0..n {
        let core_global = cpu % per_thread;
        let node = core_global / cores;
        let core = core_global % cores;
        let siblings: Vec<String> = (0..threads)
            .map(|t| (core_global + t * per_thread).to_string())
            .collect();
        let node_cpus: Vec<String> = (0..threads)
            .flat_map(|t| (0..cores).map(move |c| (node * cores + c + t * per_thread).to_string()))
            .collect();
        let c = sys.join(format!("cpu/cpu{cpu}"));
        w(c.join("topology/core_id"), format!("{core}\n"));
        w(c.join("topology/physical_package_id"), format!("{node}\n"));
        w(c.join("topology/cluster_id"), format!("{core}\n"));
        w(
            c.join("topology/thread_siblings_list"),
            format!("{}\n", siblings.join(",")),
        );
        w(
            c.join("cache/index2/shared_cpu_list"),
            format!("{}\n", siblings.join(",")),
        );
        w(c.join("cache/index2/id"), format!("{core_global}\n"));
        w(c.join("cache/index2/size"), "1024K\n".into());
        w(
            c.join("cache/index3/shared_cpu_list"),
            format!("{}\n", node_cpus.join(",")),
        );
        w(c.join("cache/index3/id"), format!("{node}\n"));
        w(c.join("cache/index3/size"), "32768K\n".into());
        w(
            sys.join(format!("node/node{node}/cpu{cpu}/online")),
            "1\n".into(),
        );
    }
    for node in 0..nodes {
        let d: Vec<String> = (0..nodes)
            .map(|o| if o == node { "10" } else { "21" }.to_string())
            .collect();
        w(
            sys.join(format!("node/node{node}/distance")),
            format!("{}\n", d.join(" ")),
        );
    }
}

#[test]
fn topology_from_a_sysfs_tree() {
    let root = tmp("sysfs-2x4x2");
    fake_sysfs(&root, 2, 4, 2);
    let p = tmp("sysfs.json");
    std::fs::write(
        &p,
        r#"{"topology": {"sysfs": "sysfs-2x4x2/sys"},
            "cpus": {"default": "busy", "overrides": {"9": "idle"}},
            "task": {"pid": 1, "prev_cpu": 1},
            "wake": {"waker_cpu": 1}}"#,
    )
    .unwrap();
    let v = json(&[p.to_str().unwrap()]);
    let t = &v["topology"];
    assert_eq!(
        (t["cpus"].as_u64(), t["nodes"].as_u64(), t["llcs"].as_u64()),
        (Some(16), Some(2), Some(2))
    );
    assert_eq!(t["smt"], true);
    // CPU 1's sibling is 9 (x86 numbering), idle: select_idle_sibling finds it.
    assert_eq!(v["cpu"], 9, "{}", v["chain"]);
    // A tree that is not there: one line.
    std::fs::write(
        &p,
        r#"{"topology": {"sysfs": "nowhere"}, "newidle": {"cpu": 0}}"#,
    )
    .unwrap();
    let out = explain(&[p.to_str().unwrap()]);
    assert_one_line_error(&out, 2, "topology.sysfs:");
}

#[test]
fn trace_replay_counts_matches_and_fails_on_a_mismatch() {
    let topo = Topology::from_shape(2, 1, 4, 2).unwrap();
    let n = topo.nr_cpus();
    let cfg = Config::from_preset("v6.12").unwrap();
    let mut lines: Vec<String> = SyntheticTrace::new(topo, cfg)
        .unwrap()
        .take(30)
        .map(|r| r.to_json_line())
        .collect();
    let p = tmp("trace.jsonl");
    std::fs::write(&p, lines.join("\n") + "\n").unwrap();
    let out = explain(&["--trace", p.to_str().unwrap()]);
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{text} {}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        text.contains("30 record(s) replayed, 30 match, 0 differ"),
        "{text}"
    );
    let v = json(&["--trace", p.to_str().unwrap()]);
    assert_eq!(
        (v["records"].as_u64(), v["matched"].as_u64()),
        (Some(30), Some(30))
    );

    // A record whose decision differs (the live engine chose another CPU).
    let mut rec: TraceRecord = serde_json::from_str(&lines[10]).unwrap();
    rec.recorded_cpu = (rec.recorded_cpu + 1) % n;
    lines[10] = rec.to_json_line();
    std::fs::write(&p, lines.join("\n")).unwrap();
    let out = explain(&["--trace", p.to_str().unwrap()]);
    assert!(!out.status.success());
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        text.contains("29 match, 1 differ") && text.contains("line 11 (seq 10)"),
        "{text}"
    );
    assert_one_line_error(&out, 1, "1 of 30 records differ");

    // A malformed line.
    lines[4] = lines[4].replacen("\"task\":{", "\"task\":{\"bogus\":1,", 1);
    std::fs::write(&p, lines.join("\n")).unwrap();
    let out = explain(&["--trace", p.to_str().unwrap()]);
    assert_one_line_error(&out, 2, "trace.jsonl:5: task.bogus: unknown field `bogus`");
}

/// `n` valid trace records (JSON lines without newlines) on a small machine.
fn trace_lines(n: usize) -> Vec<String> {
    let topo = Topology::from_shape(1, 2, 2, 2).unwrap();
    let cfg = Config::from_preset("mainline").unwrap();
    SyntheticTrace::new(topo, cfg)
        .unwrap()
        .take(n)
        .map(|r| r.to_json_line())
        .collect()
}

#[test]
fn trace_with_a_truncated_last_line_replays_the_rest_with_a_note() {
    let lines = trace_lines(12);
    let p = tmp("cut.jsonl");
    // What a writer killed mid-record leaves: no newline, half a JSON object.
    let cut = &lines[11][..lines[11].len() / 2];
    std::fs::write(&p, format!("{}\n{cut}", lines[..11].join("\n"))).unwrap();
    let out = explain(&["--trace", p.to_str().unwrap()]);
    let text = String::from_utf8_lossy(&out.stdout);
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{text}{err}");
    assert!(text.contains("11 record(s) replayed, 11 match"), "{text}");
    assert_eq!(err.trim_end().lines().count(), 1, "{err}");
    assert!(
        err.starts_with("note: ") && err.contains("skipped 1 record at the end"),
        "{err}"
    );
    let v = json(&["--trace", p.to_str().unwrap()]);
    assert_eq!(v["skipped_at_end"], 1);

    // The same cut line in the middle is an error naming it.
    std::fs::write(
        &p,
        format!("{}\n{cut}\n{}\n", lines[..5].join("\n"), lines[6]),
    )
    .unwrap();
    let out = explain(&["--trace", p.to_str().unwrap()]);
    assert_one_line_error(&out, 2, "cut.jsonl:6: ");
}

#[test]
fn empty_trace_is_an_error() {
    let lines = trace_lines(1);
    for (name, text) in [
        ("empty.jsonl", String::new()),
        ("blank.jsonl", "\n\n  \n".to_string()),
        ("only-cut.jsonl", lines[0][..40].to_string()),
    ] {
        let p = tmp(name);
        std::fs::write(&p, text).unwrap();
        let out = explain(&["--trace", p.to_str().unwrap()]);
        assert_one_line_error(&out, 2, "no complete record to replay");
    }
    let out = explain(&["--trace", "/nonexistent/trace.jsonl"]);
    assert_one_line_error(&out, 2, "cannot read /nonexistent/trace.jsonl");
}

/// A trace line or scenario over the documented limit is refused before it is parsed (the
/// whole process has a fixed 64 MiB heap).
#[test]
fn huge_inputs_are_refused_with_one_line() {
    let limit = scx_wakelab::explain::MAX_INPUT_BYTES as usize;
    // A 100 MB scenario whose description is the bulk.
    let p = tmp("huge.json");
    {
        use std::io::Write;
        let mut f = std::io::BufWriter::new(std::fs::File::create(&p).unwrap());
        write!(f, r#"{{"description": ""#).unwrap();
        let chunk = vec![b'x'; 1 << 20];
        for _ in 0..100 {
            f.write_all(&chunk).unwrap();
        }
        write!(
            f,
            r#"", "topology": {{"shape": "1x1x4x1"}}, "newidle": {{"cpu": 0}}}}"#
        )
        .unwrap();
    }
    let out = explain(&[p.to_str().unwrap()]);
    assert_one_line_error(&out, 2, "MiB a scenario may have");
    std::fs::remove_file(&p).unwrap();

    // A trace whose second line is over the limit, with no newline at all.
    let lines = trace_lines(2);
    let p = tmp("huge.jsonl");
    std::fs::write(&p, format!("{}\n{}", lines[0], "7".repeat(limit + 10))).unwrap();
    let out = explain(&["--trace", p.to_str().unwrap()]);
    assert_one_line_error(&out, 2, "huge.jsonl:2: longer than");
    std::fs::remove_file(&p).unwrap();

    // A scenario from a device that never ends.
    let out = explain(&["/dev/zero"]);
    assert_one_line_error(&out, 2, "MiB a scenario may have");
}

/// scx_utils' topology reader panics or exhausts the heap on these; each is one line.
#[test]
fn unusable_sysfs_trees_are_one_line_errors() {
    let dir = tmp("trees");
    let empty = dir.join("empty/sys/devices/system/cpu");
    std::fs::create_dir_all(&empty).unwrap();
    std::fs::write(empty.join("online"), "0-3\n").unwrap();
    let huge = dir.join("huge/sys/devices/system/cpu");
    std::fs::create_dir_all(huge.join("cpu0")).unwrap();
    std::fs::write(huge.join("online"), "0-18446744073709551615\n").unwrap();
    let far = dir.join("far/sys/devices/system/cpu");
    std::fs::create_dir_all(far.join("cpu4096")).unwrap();
    let bare = dir.join("bare");
    std::fs::create_dir_all(&bare).unwrap();
    let cases = [
        ("/".to_string(), "running machine's own sysfs"),
        ("/sys".to_string(), "running machine's own sysfs"),
        (dir.join("empty").display().to_string(), "no cpuN directory"),
        (
            dir.join("huge/sys").display().to_string(),
            "CPU numbers go up to 1023",
        ),
        (
            dir.join("far").display().to_string(),
            "cpu4096: CPU numbers go up to 1023",
        ),
        (bare.display().to_string(), "no devices/system/cpu"),
    ];
    for (i, (tree, needle)) in cases.iter().enumerate() {
        let p = tmp(&format!("tree{i}.json"));
        std::fs::write(
            &p,
            format!(r#"{{"topology": {{"sysfs": "{tree}"}}, "newidle": {{"cpu": 0}}}}"#),
        )
        .unwrap();
        let out = explain(&[p.to_str().unwrap()]);
        assert_one_line_error(&out, 2, needle);
        assert_one_line_error(&out, 2, "topology.sysfs: ");
    }
    // A trace record naming a tree goes through the same check.
    let mut rec: serde_json::Value = serde_json::from_str(&trace_lines(1)[0]).unwrap();
    rec["topology"] = serde_json::json!({"sysfs": "/"});
    let p = tmp("sysfs-trace.jsonl");
    std::fs::write(&p, format!("{rec}\n")).unwrap();
    let out = explain(&["--trace", p.to_str().unwrap()]);
    assert_one_line_error(&out, 2, "sysfs-trace.jsonl:1: topology.sysfs: /: ");
}

/// Numbers at the edges of their types in a scenario: answered, or one line; never a
/// panic.
#[test]
fn extreme_numbers_in_a_scenario_do_not_panic() {
    let max = u64::MAX;
    let cases = [
        format!(
            r#"{{"topology": {{"shape": "1x1x8x1"}}, "policy": {{"preset": "v5.10"}},
                "llc_state": [{{"llc": 0, "avg_scan_cost_ns": {max}}}],
                "cpus": {{"default": {{"base": "busy", "avg_idle_ns": {max}, "load": {max}}}}},
                "task": {{"pid": 1, "prev_cpu": 1, "load": {max}}},
                "wake": {{"waker_cpu": 0, "sync": true}}}}"#
        ),
        r#"{"topology": {"shape": "1x1x8x1"}, "policy": {"preset": "v5.10"},
                "llc_state": [{"llc": 0, "avg_scan_cost_ns": 0}],
                "cpus": {"default": {"base": "busy", "avg_idle_ns": 0, "util": 4294967295, "capacity": 0}},
                "task": {"pid": 0, "prev_cpu": 7, "load": 0},
                "wake": {"waker_cpu": 7}}"#
            .to_string(),
    ];
    for (i, text) in cases.iter().enumerate() {
        let p = tmp(&format!("extreme{i}.json"));
        std::fs::write(&p, text).unwrap();
        let out = explain(&[p.to_str().unwrap()]);
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(
            matches!(out.status.code(), Some(0 | 2)),
            "case {i}: {:?} {err}",
            out.status
        );
        assert!(err.trim_end().lines().count() <= 1, "case {i}: {err}");
        for bad in ["panicked", "memory allocation", "internal error"] {
            assert!(!err.contains(bad), "case {i}: {err}");
        }
    }
    // Out-of-range numbers are named.
    let p = tmp("extreme-neg.json");
    std::fs::write(
        &p,
        r#"{"topology": {"shape": "1x1x4x1"}, "task": {"pid": 1, "prev_cpu": -1}, "wake": {"waker_cpu": 0}}"#,
    )
    .unwrap();
    assert_one_line_error(&explain(&[p.to_str().unwrap()]), 2, "task.prev_cpu: ");
    std::fs::write(
        &p,
        r#"{"topology": {"shape": "1x1x4x1"}, "task": {"pid": 1, "prev_cpu": 1e999}, "wake": {"waker_cpu": 0}}"#,
    )
    .unwrap();
    assert_one_line_error(&explain(&[p.to_str().unwrap()]), 2, "extreme-neg.json: ");
}

/// The input limit the errors cite is the one --help documents.
#[test]
fn help_documents_the_input_limit() {
    let out = bin().args(["explain", "--help"]).output().unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    let flat = text.split_whitespace().collect::<Vec<_>>().join(" ");
    let mib = scx_wakelab::explain::MAX_INPUT_BYTES >> 20;
    assert!(
        flat.contains(&format!("trace line may have at most {mib} MiB")),
        "{text}"
    );
}

/// A FIFO nobody writes to and a directory, as a scenario or a trace: one line and exit
/// 2, at once.  (Opening the FIFO used to block forever; a directory given as a trace was
/// a read error, exit 1.)
#[test]
fn fifos_and_directories_are_bad_input_at_once() {
    let dir = tmp("fifo-dir");
    std::fs::create_dir_all(&dir).unwrap();
    let fifo = dir.join("input.fifo");
    let _ = std::fs::remove_file(&fifo);
    let c = std::ffi::CString::new(fifo.to_str().unwrap()).unwrap();
    assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0);
    let (f, d) = (fifo.to_str().unwrap(), dir.to_str().unwrap());
    for (args, needle) in [
        (vec![f], "JSON object"),
        (vec!["--trace", f], "no complete record"),
        (vec![d], "Is a directory"),
        (vec!["--trace", d], "Is a directory"),
    ] {
        let mut child = bin()
            .arg("explain")
            .args(&args)
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        let start = std::time::Instant::now();
        while child.try_wait().unwrap().is_none() {
            if start.elapsed() > std::time::Duration::from_secs(10) {
                let _ = child.kill();
                panic!("explain {args:?} still running after 10 s");
            }
            std::thread::sleep(std::time::Duration::from_millis(20));
        }
        let out = child.wait_with_output().unwrap();
        assert_one_line_error(&out, 2, needle);
    }
}
