//! One newly-idle rule: the live scheduler's pull (bpf/newidle_rule.h, run by BPF) and the
//! engine's (`Engine::newidle_pull`, src/policy/newidle.rs) decide the same on the same
//! inputs.  The C is built for the host (tests/c/newidle_rule_host.c, with the compiler in
//! `CC`, else `cc`, else clang-19) and fed random machines, loads and presets; each case's
//! verdict, and the CPU and domain of a pull, must be the engine's.

use std::fmt::Write as _;
use std::path::PathBuf;
use std::process::{Command, Stdio};

use scx_wakelab::policy::newidle::{rule_config, rule_level, rule_topology};
use scx_wakelab::policy::rng::XorShift;
use scx_wakelab::policy::{
    Config, CpuDesc, CpuSnapshot, Engine, PRESET_NAMES, PullCandidate, Rule, Topology,
};

/// The host build of the rule, or why there is none.
fn build_host_rule() -> PathBuf {
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR"));
    let src = root.join("tests/c/newidle_rule_host.c");
    let out = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("newidle_rule_host");
    let compilers: Vec<String> = std::env::var("CC")
        .into_iter()
        .chain(["cc".to_string(), "clang-19".to_string()])
        .collect();
    let mut errors = String::new();
    for cc in &compilers {
        match Command::new(cc)
            .args(["-Wall", "-Werror", "-O2", "-o"])
            .arg(&out)
            .arg(&src)
            .output()
        {
            Ok(o) if o.status.success() => return out,
            Ok(o) => {
                let _ = write!(errors, "{cc}: {}", String::from_utf8_lossy(&o.stderr));
            }
            Err(e) => {
                let _ = writeln!(errors, "{cc}: {e}");
            }
        }
    }
    panic!("could not build {}:\n{errors}", src.display());
}

/// The engine's verdict in the harness's words.
fn engine_verdict(d: &scx_wakelab::policy::NewIdleDecision) -> String {
    if let (Some(p), Some(level)) = (d.pulled, d.domain) {
        return format!("pull {} {}", p.src_cpu, rule_level(level));
    }
    let last = d
        .chain
        .iter()
        .filter(|r| *r != Rule::NewidleDomainNotDrawn)
        .last();
    match last {
        Some(Rule::NewidleCpuOffline) => "cpu-offline",
        Some(Rule::NewidleCpuHasWork) => "cpu-has-work",
        Some(Rule::NewidleSkipPendingWakeup) => "skip-pending",
        Some(Rule::NewidleSkipWakeupInFlight) => "skip-in-flight",
        Some(Rule::NewidleRootNotOverloaded) => "not-overloaded",
        Some(Rule::NewidleIdleTooShort) => "idle-too-short",
        Some(Rule::NewidleNothingToPull) => "nothing",
        other => panic!("unexpected end of the engine's chain: {other:?} in {d:?}"),
    }
    .to_string()
}

struct Case {
    text: String,
    engine: String,
    what: String,
}

/// One random case on `topo` with `cfg`: every CPU's load, queue and hints.
fn random_case(rng: &mut XorShift, topo: &Topology, cfg: &Config) -> Case {
    let n = topo.nr_cpus();
    let cpu = rng.below(n as u64) as usize;
    // Mostly idle machines with a few queues, sometimes crowded ones.
    let crowd = 1 + rng.below(4);
    let rt = rule_topology(topo);
    let rc = rule_config(cfg, topo);
    let mut snaps = Vec::with_capacity(n);
    let mut cands = Vec::new();
    let mut text = format!(
        "case {n} {cpu} {} {} {} {} {} {}\n",
        rc.skip_pending as u32,
        rc.numa_imb_nr as u32,
        rc.imbalance_pct_smt,
        rc.imbalance_pct_llc,
        rc.is_numa as u32,
        rc.avg_idle_min_ns
    );
    for (c, t) in rt.iter().enumerate() {
        let mut nr = match rng.below(8) {
            0..=2 => 0,
            3..=5 => 1,
            _ => 1 + rng.below(crowd + 1) as u32,
        };
        if c == cpu && rng.below(8) != 0 {
            nr = 0;
        }
        // Delayed sleepers count only where the preset has delayed dequeue (the engine
        // ignores the snapshot's count otherwise).
        let delayed = if cfg.delayed_dequeue && nr > 0 && rng.below(6) == 0 {
            1
        } else {
            0
        };
        let runnable = nr - delayed;
        let waiting = runnable.saturating_sub(1);
        let hot = if waiting > 0 {
            rng.below(u64::from(waiting) + 1) as u32
        } else {
            0
        };
        let cold = waiting - hot;
        let s = CpuSnapshot {
            idle: nr == 0,
            nr_running: nr,
            nr_delayed: delayed,
            ttwu_pending: rng.below(10) == 0,
            wakeup_in_flight: rng.below(10) == 0,
            load: u64::from(nr) * 1024 + rng.below(300),
            util: (u64::from(runnable.min(1)) * 600 + rng.below(400)) as u32,
            avg_idle_ns: rng.below(1_500_000),
            ..CpuSnapshot::ZERO
        };
        for k in 0..waiting {
            cands.push(PullCandidate {
                pid: (1000 * c as u32) + k,
                src_cpu: c,
                allowed: Default::default(),
                load: 1024,
                cache_hot: k < hot,
            });
        }
        let _ = writeln!(
            text,
            "{} {} {} {} {} {} {} {} {} {} {} {} {} {} {} {}",
            t.online as u32,
            s.nr_running,
            runnable,
            s.ttwu_pending as u32,
            s.wakeup_in_flight as u32,
            t.levels,
            t.first[0],
            t.first[1],
            t.first[2],
            t.imb_numa_nr,
            s.load,
            s.util,
            t.capacity,
            s.avg_idle_ns,
            cold,
            hot
        );
        snaps.push(s);
    }
    let mut engine = Engine::new(topo.clone(), *cfg).expect("engine");
    let d = engine.newidle_pull(cpu, &snaps, &cands);
    let what = format!(
        "cpu {cpu}; (nr_running, delayed) {:?}; chain {:?}",
        snaps
            .iter()
            .map(|s| (s.nr_running, s.nr_delayed))
            .collect::<Vec<_>>(),
        d.chain.names()
    );
    Case {
        text,
        engine: engine_verdict(&d),
        what,
    }
}

#[test]
fn bpf_and_the_engine_pull_alike() {
    let host = build_host_rule();
    // Symmetric shapes; with CPUs offline (groups of unequal weight and cores); numbered as
    // x86 firmware does (every core's first thread, then the second ones).
    let mut topos: Vec<Topology> = [
        (2, 1, 2, 2),
        (1, 1, 4, 2),
        (2, 2, 2, 2),
        (1, 1, 8, 1),
        (4, 1, 2, 2),
        (2, 1, 3, 1),
    ]
    .iter()
    .map(|&(n, l, c, t)| Topology::from_shape(n, l, c, t).expect("shape"))
    .collect();
    for (shape, offline) in [
        ((2, 1, 2, 2), vec![3]),
        ((2, 2, 2, 2), vec![1, 6, 7]),
        // A node of one SMT core beside one of four cores: groups of unequal cores.
        ((2, 1, 4, 2), vec![2, 3, 4, 5, 6, 7]),
    ] {
        let (n, l, c, t) = shape;
        let mut topo = Topology::from_shape(n, l, c, t).expect("shape");
        for cpu in offline {
            topo.set_online(cpu, false).expect("offline");
        }
        topos.push(topo);
    }
    let x86: Vec<CpuDesc> = (0..16u32)
        .map(|i| CpuDesc {
            core: i % 8,
            llc: (i % 8) / 4,
            node: (i % 8) / 4,
            online: true,
            capacity: 1024,
        })
        .collect();
    topos.push(Topology::from_cpus(&x86).expect("x86 numbering"));
    let mut rng = XorShift::new(0x5eed_2026);
    let mut cases = Vec::new();
    for topo in &topos {
        for preset in PRESET_NAMES {
            for k in 0..60 {
                let mut cfg = Config::from_preset(preset).expect("preset");
                // Every flag the rule reads, both ways, beside the preset's own values.
                if k % 3 == 1 {
                    cfg.set(
                        "newidle_skip_pending_wakeup",
                        if k % 2 == 0 { "true" } else { "false" },
                    )
                    .unwrap();
                    cfg.set(
                        "newidle_gate_on_domain_cost",
                        if k % 4 < 2 { "true" } else { "false" },
                    )
                    .unwrap();
                }
                if k % 5 == 2 {
                    let rule = if cfg.fork_numa_rule
                        == scx_wakelab::policy::config::ForkNumaRule::ImbNumaNr
                    {
                        "local-idle"
                    } else {
                        "imb-numa-nr"
                    };
                    cfg.set("fork_numa_rule", rule).unwrap();
                }
                cases.push(random_case(&mut rng, topo, &cfg));
            }
        }
    }
    // Through a file, not a pipe both ways: the answers would fill their pipe while the
    // cases still wait to be written.
    let input: String = cases.iter().map(|c| c.text.as_str()).collect();
    let cases_file = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("newidle_rule_cases");
    std::fs::write(&cases_file, input).expect("write the cases");
    let out = Command::new(&host)
        .stdin(std::fs::File::open(&cases_file).expect("open the cases"))
        .stderr(Stdio::inherit())
        .output()
        .expect("run the host build of the rule");
    assert!(
        out.status.success(),
        "the host rule failed: {:?}",
        out.status
    );
    let answers: Vec<String> = String::from_utf8(out.stdout)
        .unwrap()
        .lines()
        .map(str::to_string)
        .collect();
    assert_eq!(answers.len(), cases.len(), "one answer per case");
    let mut seen = std::collections::BTreeMap::<String, usize>::new();
    for (c, bpf) in cases.iter().zip(&answers) {
        assert_eq!(
            &c.engine, bpf,
            "engine and BPF disagree on\n{}{}",
            c.text, c.what
        );
        let kind = bpf.split_whitespace().next().unwrap().to_string();
        let kind = if kind == "pull" {
            format!("pull at level {}", bpf.rsplit(' ').next().unwrap())
        } else {
            kind
        };
        *seen.entry(kind).or_default() += 1;
    }
    // The cases reach every verdict, and pulls at every level the shapes have: a rule
    // that never pulled would agree with an engine that never pulled.
    for v in [
        "cpu-has-work",
        "skip-pending",
        "skip-in-flight",
        "not-overloaded",
        "idle-too-short",
        "nothing",
        "pull at level 0",
        "pull at level 1",
        "pull at level 2",
        "pull at level 3",
    ] {
        assert!(
            seen.get(v).copied().unwrap_or(0) >= 5,
            "too few cases end in {v}: {seen:?}"
        );
    }
}
