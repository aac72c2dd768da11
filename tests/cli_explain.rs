//! `scx_wakelab explain` end to end: the shipped scenarios (one per seed, on the authors'
//! machines), the "try --preset ..." variants their descriptions suggest, bad input, a
//! sysfs topology, and trace replay.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use scx_wakelab::explain::TraceRecord;
use scx_wakelab::policy::{
    Config, CpuSnapshot, Engine, TaskState, Topology, WakeCtx, WakerContext,
};

fn bin() -> Command {
    Command::new(env!("CARGO_BIN_EXE_scx_wakelab"))
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

/// One line on stderr, non-zero exit, naming `needle`.
fn assert_one_line_error(out: &Output, needle: &str) {
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(err.trim_end().lines().count(), 1, "{err}");
    assert!(err.contains(needle), "expected '{needle}' in: {err}");
    assert!(!err.contains("panicked"), "{err}");
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
        assert_one_line_error(&out, needle);
        assert!(String::from_utf8_lossy(&out.stderr).contains(&format!("bad{i}.json")));
    }
    let out = explain(&["/nonexistent/scenario.json"]);
    assert_one_line_error(&out, "cannot read /nonexistent/scenario.json");
    let s = scenario("seed1-barry-qperf-softirq.json");
    let out = explain(&[s.to_str().unwrap(), "--set", "wa_idle=perhaps"]);
    assert_one_line_error(&out, "--set wa_idle=perhaps: bad value 'perhaps'");
    let out = explain(&[s.to_str().unwrap(), "--preset", "v4.19"]);
    assert_one_line_error(&out, "v4.19");
    let out = explain(&[]);
    assert_one_line_error(&out, "required arguments were not provided");
    // An expectation that fails is an error too.
    let p = tmp("unmet.json");
    std::fs::write(
        &p,
        r#"{"topology": {"shape": "1x1x4x1"}, "task": {"pid": 1, "prev_cpu": 1}, "wake": {"waker_cpu": 0}, "expect": {"cpu": 3}}"#,
    )
    .unwrap();
    let out = explain(&[p.to_str().unwrap()]);
    assert_one_line_error(&out, "expectation not met: expected CPU 3, chose 1");
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
    assert_one_line_error(&out, "topology.sysfs:");
}

#[test]
fn trace_replay_counts_matches_and_fails_on_a_mismatch() {
    let topo = Topology::from_shape(2, 1, 4, 2).unwrap();
    let cfg = Config::from_preset("v6.12").unwrap();
    let mut engine = Engine::new(topo.clone(), cfg).unwrap();
    let n = topo.nr_cpus();
    let mut lines = Vec::new();
    for i in 0..30u64 {
        let cpus: Vec<CpuSnapshot> = (0..n)
            .map(|c| match (c as u64 * 7 + i) % 4 {
                0 => CpuSnapshot::idle(),
                1 => CpuSnapshot {
                    nr_delayed: 1,
                    ..CpuSnapshot::busy(2)
                },
                _ => CpuSnapshot::busy(1),
            })
            .collect();
        let mut t = TaskState::new(40, (i as usize * 5) % n, n);
        t.recent_used_cpu = Some((i as usize + 3) % n);
        let mut w = WakeCtx::sync((i as usize * 3) % n, TaskState::new(41, 0, n), i * 10_000);
        if i % 3 == 0 {
            w.waker_context = WakerContext::Softirq;
        }
        let (t0, w0, llc0) = (t, w, engine.llc_states().to_vec());
        let d = engine.select_cpu(&cpus, &mut t, &mut w);
        let mut rec = TraceRecord::new(&topo, &cfg, &llc0, &cpus, &t0, &w0, &d);
        rec.seq = Some(i);
        lines.push(rec.to_json_line());
    }
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
    assert_one_line_error(&out, "1 of 30 records differ");

    // A malformed line.
    lines[4] = lines[4].replacen("\"task\":{", "\"task\":{\"bogus\":1,", 1);
    std::fs::write(&p, lines.join("\n")).unwrap();
    let out = explain(&["--trace", p.to_str().unwrap()]);
    assert_one_line_error(&out, "trace.jsonl:5: task.bogus: unknown field `bogus`");
}
