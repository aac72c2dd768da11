//! `oracle compare`'s pure half on made-up samples: a sample becomes a trace line that
//! explain reads back, and the comparison counts agreement, races and the seeds' quantities.

use super::*;
use crate::explain::parse_json_object;
use crate::policy::{WAKE_SYNC, WAKE_TTWU};

fn topo(nr: usize) -> Topology {
    Topology::from_shape(1, 1, nr, 1).unwrap()
}

fn busy() -> SampleCpu {
    SampleCpu {
        load_avg: 1024,
        util_avg: 900,
        nr_running: 1,
        capacity: 1024,
        llc: SampleLlc {
            has_idle_cores: Some(false),
            ..SampleLlc::default()
        },
        ..SampleCpu::default()
    }
}

fn idle() -> SampleCpu {
    SampleCpu {
        curr_is_idle: true,
        avg_idle: 1_000_000,
        load_avg: 0,
        util_avg: 0,
        nr_running: 0,
        ..busy()
    }
}

/// A sync wake-up on 4 CPUs: the waker alone on CPU 0, prev (CPU 2) busy, CPU 3 idle.
fn sample() -> Sample {
    Sample {
        now_ns: 10_000_000_000,
        jiffies: 5_000,
        wakee: SampleTask {
            pid: 100,
            recent_used_cpu: 2,
            wakee_flips: 1,
            load_avg: 300,
            nr_cpus_allowed: 4,
            allowed: 0xf,
            ..SampleTask::default()
        },
        waker: SampleTask {
            pid: 200,
            recent_used_cpu: 0,
            wakee_flips: 1,
            wakee_flip_decay_ts: 4_750,
            last_wakee_pid: 100,
            load_avg: 500,
            nr_cpus_allowed: 4,
            allowed: 0xf,
            ..SampleTask::default()
        },
        prev_cpu: 2,
        this_cpu: 0,
        chosen_cpu: 0,
        wake_flags: WAKE_TTWU | WAKE_SYNC,
        context: 0,
        cpus: vec![busy(), busy(), busy(), idle()],
        changed_cpus: 0,
    }
}

#[test]
fn a_sample_becomes_a_trace_line_that_explain_reads() {
    let t = topo(4);
    let rec = sample()
        .to_trace(7, &t, &TopologyInput::from_topology(&t), "mainline", 250)
        .unwrap();
    assert_eq!(rec.seq, Some(7));
    assert_eq!(rec.recorded_cpu, 0);
    assert_eq!(rec.task.prev_cpu, 2);
    assert_eq!(rec.task.recent_used_cpu, Some(2));
    assert_eq!(rec.wake.waker_cpu, 0);
    let waker = rec.wake.waker.unwrap();
    assert_eq!(waker.last_wakee, Some(100));
    // 250 jiffies ago at HZ=250: one second back from now.
    assert_eq!(waker.wakee_flip_decay_ts, 9_000_000_000);
    let line = rec.to_json_line();
    let back: TraceRecord = parse_json_object(&line).unwrap();
    assert_eq!(back, rec);
}

#[test]
fn samples_that_cannot_be_replayed_say_why() {
    let t = topo(4);
    let ti = TopologyInput::from_topology(&t);
    let mut s = sample();
    s.chosen_cpu = 9;
    assert_eq!(
        s.to_trace(0, &t, &ti, "mainline", 250)
            .unwrap_err()
            .to_string(),
        "chosen CPU 9 is outside the topology"
    );
    let mut s = sample();
    s.cpus.pop();
    assert_eq!(
        s.to_trace(0, &t, &ti, "mainline", 250).unwrap_err(),
        SampleError::CpuCount {
            recorded: 3,
            topology: 4
        }
    );
}

#[test]
fn compare_counts_agreement_per_kind_and_rule() {
    let t = topo(4);
    let ti = TopologyInput::from_topology(&t);
    let dir = std::env::temp_dir().join(format!("oracle-test-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let file = dir.join("rec.jsonl");
    // The engine pulls the sync wakee to its waker's CPU (the waker is alone there): the
    // first record agrees; the second says the kernel chose CPU 3, which the engine did not.
    let a = sample();
    let mut b = sample();
    b.chosen_cpu = 3;
    let text = [a, b]
        .iter()
        .enumerate()
        .map(|(i, s)| {
            s.to_trace(i as u64, &t, &ti, "mainline", 250)
                .unwrap()
                .to_json_line()
        })
        .collect::<Vec<_>>()
        .join("\n")
        + "\n";
    std::fs::write(&file, text).unwrap();
    let c = compare_file(&file, &PolicyOverride::default(), 5).unwrap();
    assert_eq!((c.total.records, c.total.agree), (2, 1));
    assert_eq!(c.preset, "mainline");
    assert_eq!(c.by_kind["wake-up, sync"].records, 2);
    assert_eq!(c.disagreements.values().sum::<usize>(), 1);
    assert!(
        c.disagreements
            .keys()
            .next()
            .unwrap()
            .ends_with("kernel: another CPU"),
        "{:?}",
        c.disagreements
    );
    assert_eq!(c.examples.len(), 1);
    let out = compare(std::slice::from_ref(&file), None, Vec::new(), 0).unwrap();
    assert!(out.ends_with("agreement: 1 of 2 (50.0%)\n"), "{out}");
    // A preset that refuses the sync pull to a busy waker CPU... any valid override runs.
    let out = compare(
        std::slice::from_ref(&file),
        Some("v5.10".into()),
        Vec::new(),
        0,
    )
    .unwrap();
    assert!(out.contains("preset v5.10"), "{out}");
    std::fs::remove_dir_all(&dir).unwrap();
}

fn write_records(name: &str, samples: &[Sample], t: &Topology) -> std::path::PathBuf {
    let ti = TopologyInput::from_topology(t);
    let dir = std::env::temp_dir().join(format!("oracle-{name}-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let file = dir.join("rec.jsonl");
    let text: String = samples
        .iter()
        .enumerate()
        .map(|(i, s)| {
            s.to_trace(i as u64, t, &ti, "mainline", 250)
                .unwrap()
                .to_json_line()
                + "\n"
        })
        .collect();
    std::fs::write(&file, text).unwrap();
    file
}

/// The race split and the seeds' quantities come from the records' own fields: which CPUs
/// changed during the call, the waker's context, the wakee's recent_used_cpu.
#[test]
fn compare_splits_the_race_and_counts_the_seed_cases() {
    let t = topo(4);
    // 1: the sync pull to the lone waker, nothing changed meanwhile (agrees).
    let stable = sample();
    // 2: the same from a softirq; say the kernel kept prev, while CPU 3 changed.
    let mut irq = sample();
    irq.context = 1;
    irq.chosen_cpu = 2;
    irq.changed_cpus = 1 << 3;
    // 3: recent_used_cpu is CPU 3 (idle, neither prev nor the waker's): both take it.
    let mut recent = sample();
    recent.wakee.recent_used_cpu = 3;
    recent.chosen_cpu = 3;
    // 4: the kernel went to CPU 3, which changed during its decision; the engine pulls.
    let mut raced = sample();
    raced.chosen_cpu = 3;
    raced.changed_cpus = 1 << 3;
    let file = write_records("race", &[stable, irq, recent, raced], &t);
    let c = compare_file(&file, &PolicyOverride::default(), 0).unwrap();
    let r = &c.race;
    assert_eq!(r.measured, 4);
    assert_eq!((r.changed.records, r.stable.records), (2, 2));
    // Record 2 disagrees on CPUs that did not change (0 and 2), record 4 on one that did.
    assert_eq!((r.changed.agree, r.stable.agree), (0, 2), "{c:?}");
    assert_eq!(r.disagree_on_changed_cpu, 1, "{c:?}");
    let s = &c.seeds;
    let one = &s.sync_from_interrupt_to_waker;
    assert_eq!((one.cases, one.kernel), (1, 0));
    // Seed 1 was never merged: mainline pulls an interrupt's sync wakee as any other.
    assert_eq!(one.engine, 1, "{c:?}");
    let four = &s.recent_used_cpu_taken;
    assert_eq!((four.cases, four.kernel, four.engine), (1, 1, 1), "{c:?}");
    assert_eq!(s.sync_beside_delayed_to_waker.cases, 0);
    let out = c.render();
    assert!(
        out.contains("race: a CPU changed during the kernel's decision in 2 of 4 records"),
        "{out}"
    );
    assert!(out.contains("seed 4: to recent_used_cpu"), "{out}");
    std::fs::remove_dir_all(file.parent().unwrap()).unwrap();
}

/// Records written before the race was measured say nothing about it.
#[test]
fn records_without_the_race_field_leave_it_unmeasured() {
    let t = topo(4);
    let mut rec = sample()
        .to_trace(0, &t, &TopologyInput::from_topology(&t), "mainline", 250)
        .unwrap();
    rec.changed_cpus = None;
    assert!(!rec.to_json_line().contains("changed_cpus"));
    let mut r = RaceTally::default();
    r.add(&rec, 0, true);
    assert_eq!(r.measured, 0);
    let mut o = String::new();
    r.render(&mut o);
    assert!(o.is_empty());
}

#[test]
fn presets_follow_the_release() {
    assert_eq!(preset_for_release("5.10.0-35-amd64").0, "v5.10.y");
    assert_eq!(preset_for_release("6.1.0-40-amd64").0, "v6.1.y");
    assert_eq!(preset_for_release("6.12.48+deb12-amd64").0, "v6.12.y");
    assert_eq!(preset_for_release("7.2.13+deb14-amd64").0, "mainline");
    assert_eq!(preset_for_release("garbage").0, "v5.10");
}

/// A v5.10-style sysfs tree (no cluster_id): 2 packages x 2 cores x 2 threads, the
/// threads of a core numbered 4 apart, one LLC and one node per package, CPU 7 offline.
#[test]
fn topology_from_a_sysfs_tree_without_cluster_ids() {
    let root = std::env::temp_dir().join(format!("oracle-sysfs-{}", std::process::id()));
    let w = |p: &str, s: &str| {
        let f = root.join(p);
        std::fs::create_dir_all(f.parent().unwrap()).unwrap();
        std::fs::write(f, s).unwrap();
    };
    w("cpu/present", "0-7\n");
    w("cpu/online", "0-6\n");
    w("node/node0/cpulist", "0-1,4-5\n");
    w("node/node1/cpulist", "2-3,6-7\n");
    for cpu in 0..8usize {
        let pkg = (cpu % 4) / 2;
        let core = cpu % 2;
        let d = format!("cpu/cpu{cpu}");
        w(
            &format!("{d}/topology/physical_package_id"),
            &format!("{pkg}\n"),
        );
        w(&format!("{d}/topology/core_id"), &format!("{core}\n"));
        let llc = if pkg == 0 { "0-1,4-5" } else { "2-3,6-7" };
        w(&format!("{d}/cache/index0/level"), "1\n");
        w(&format!("{d}/cache/index0/type"), "Data\n");
        w(
            &format!("{d}/cache/index0/shared_cpu_list"),
            &format!("{cpu}\n"),
        );
        w(&format!("{d}/cache/index3/level"), "3\n");
        w(&format!("{d}/cache/index3/type"), "Unified\n");
        w(
            &format!("{d}/cache/index3/shared_cpu_list"),
            &format!("{llc}\n"),
        );
    }
    let t = sysfs::topology_from_sys(&root).unwrap();
    std::fs::remove_dir_all(&root).unwrap();
    assert_eq!(t.nr_cpus(), 8);
    assert!(t.is_online(6) && !t.is_online(7));
    assert!(t.share_cache(0, 5) && !t.share_cache(0, 2));
    assert_eq!(t.nr_llcs(), 3, "two LLCs and the offline CPU alone");
    use crate::policy::Distance;
    assert_eq!(t.distance(0, 4), Distance::SmtSibling);
    assert_eq!(t.distance(0, 2), Distance::RemoteNode);
    // sysfs lists are read with CpuSet's parser.
    let l = crate::policy::CpuSet::parse_cpulist("0-2,5").unwrap();
    assert_eq!(l.iter().collect::<Vec<_>>(), vec![0, 1, 2, 5]);
    assert!(crate::policy::CpuSet::parse_cpulist("3-1").is_err());
}

/// `--show` lists at most MAX_SHOW records per file: one more is bad usage.
#[test]
fn show_is_bounded() {
    use clap::{Args, Command, FromArgMatches};
    let parse = |n: u64| {
        let cmd = OracleArgs::augment_args(Command::new("oracle"));
        let n = n.to_string();
        cmd.try_get_matches_from(["oracle", "compare", "f.jsonl", "--show", n.as_str()])
            .map(|m| OracleArgs::from_arg_matches(&m).unwrap())
    };
    match parse(MAX_SHOW).unwrap().command {
        OracleCommand::Compare { show, .. } => assert_eq!(show, MAX_SHOW),
        c => panic!("{c:?}"),
    }
    let e = parse(MAX_SHOW + 1).unwrap_err().to_string();
    assert!(e.contains("1001") && e.contains("--show"), "{e}");
}

/// A record whose changed CPUs the recorded machine does not have is refused, not tallied
/// in the race split.
#[test]
fn changed_cpus_outside_the_topology_are_refused() {
    let t = topo(4);
    let file = write_records("changed", &[sample()], &t);
    let text = std::fs::read_to_string(&file).unwrap();
    let mut rec: TraceRecord = parse_json_object(text.trim_end()).unwrap();
    rec.changed_cpus = Some(vec![3, 4]);
    std::fs::write(&file, rec.to_json_line() + "\n").unwrap();
    let e = compare_file(&file, &PolicyOverride::default(), 0).unwrap_err();
    assert!(
        e.to_string()
            .ends_with("rec.jsonl:1: changed_cpus[1]: CPU 4 is outside the topology (CPUs 0-3)"),
        "{e}"
    );
    assert_eq!(
        crate::exit::code_of(&e, crate::exit::RUNTIME),
        crate::exit::BAD_INPUT
    );
    std::fs::remove_dir_all(file.parent().unwrap()).unwrap();
}
