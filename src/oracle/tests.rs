//! `oracle compare`'s pure half on made-up samples: a sample becomes a trace line that
//! explain reads back, and the comparison counts agreement, races and the seeds' quantities.

use super::*;
use crate::explain::parse_json_object;
use crate::policy::{WAKE_SYNC, WAKE_TTWU};

fn shown(show: usize) -> CompareOptions {
    CompareOptions {
        show,
        ..CompareOptions::default()
    }
}

fn topo(nr: usize) -> Topology {
    Topology::from_shape(1, 1, nr, 1).unwrap()
}

/// A CPU running one task; the estimator (bpf/pelt.bpf.h) holds what the kernel does.
fn busy() -> SampleCpu {
    SampleCpu {
        load_avg: 1024,
        util_avg: 900,
        est_load_avg: 1024,
        est_util_avg: 900,
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
        est_load_avg: 0,
        est_util_avg: 0,
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

/// `task_h_load()` (5.10 fair.c :8196-8224): the root cfs_rq's h_load scales the task's load
/// over the cfs_rq's, and is recomputed only once a jiffy, so within the jiffy of its last
/// update a stale h_load scales.  Records without h_load keep the task's own load.
#[test]
fn task_loads_are_scaled_by_the_root_h_load_of_their_jiffy() {
    let t = topo(4);
    let trace = |s: &Sample| {
        s.to_trace(1, &t, &TopologyInput::from_topology(&t), "mainline", 250)
            .unwrap()
    };
    let mut s = sample();
    assert_eq!(
        trace(&s).task.load,
        300,
        "no h_load recorded: the task's own load"
    );
    // Wakee on CPU 2 (load 1024), h_load updated this jiffy at 512: 300 * 512 / 1025.
    s.cpus[2].h_load = Some((512, s.jiffies));
    // Waker on CPU 0, h_load from an earlier jiffy: recomputed as the current load.
    s.cpus[0].h_load = Some((100, s.jiffies - 1));
    s.wakee.est_load_avg = Some(300);
    let rec = trace(&s);
    assert_eq!(rec.task.load, 300 * 512 / 1025);
    assert_eq!(rec.wake.waker.unwrap().load, 500 * 1024 / 1025);
    // The estimator estimates the wakee's own average, not the scaled one: its error is
    // measured against the kernel's unscaled value.
    assert_eq!(rec.estimated.as_ref().unwrap().kernel_task_load, Some(300));
    let mut errs = fidelity::EstimateErrors::default();
    errs.add(&rec, &t);
    assert_eq!(
        errs.task_load.quantile(0.5),
        Some(0.1),
        "the lowest bucket: no error"
    );
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
    let c = compare_file(&file, &shown(5)).unwrap();
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
    let out = compare(std::slice::from_ref(&file), &CompareOptions::default()).unwrap();
    assert!(out.ends_with("agreement: 1 of 2 (50.0%)\n"), "{out}");
    // A preset that refuses the sync pull to a busy waker CPU... any valid override runs.
    let v5_10 = CompareOptions {
        policy: PolicyOverride {
            preset: Some("v5.10".into()),
            set: Vec::new(),
        },
        ..CompareOptions::default()
    };
    let out = compare(std::slice::from_ref(&file), &v5_10).unwrap();
    assert!(out.contains("preset v5.10"), "{out}");
    std::fs::remove_dir_all(&dir).unwrap();
}

fn write_records(name: &str, samples: &[Sample], t: &Topology) -> std::path::PathBuf {
    write_preset_records(name, samples, t, "mainline")
}

/// Writes `samples` as records of `preset` on `t`, in a directory of their own.
fn write_preset_records(
    name: &str,
    samples: &[Sample],
    t: &Topology,
    preset: &str,
) -> std::path::PathBuf {
    let ti = TopologyInput::from_topology(t);
    let dir = std::env::temp_dir().join(format!("oracle-{name}-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let file = dir.join("rec.jsonl");
    let text: String = samples
        .iter()
        .enumerate()
        .map(|(i, s)| {
            s.to_trace(i as u64, t, &ti, preset, 250)
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
    let c = compare_file(&file, &CompareOptions::default()).unwrap();
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
    // Only record 3 gets past the target and prev to the recent_used_cpu block: a hit.
    let examined = &s.recent_used_cpu_examined;
    assert_eq!(
        (examined.cases, examined.kernel, examined.engine),
        (1, 1, 1),
        "{c:?}"
    );
    // Every record gets past the target and prev (both busy in the sample); only record 3
    // lands on its recent CPU, on the kernel's side and the engine's.
    let past = &s.recent_used_cpu_past_target_and_prev;
    assert_eq!((past.cases, past.kernel, past.engine), (4, 1, 1), "{c:?}");
    assert_eq!(s.sync_beside_delayed_to_waker.cases, 0);
    let out = c.render();
    assert!(
        out.contains("race: a CPU changed during the kernel's decision in 2 of 4 records"),
        "{out}"
    );
    assert!(out.contains("seed 4: to recent_used_cpu"), "{out}");
    assert!(
        out.contains("seed 4: recent_used_cpu examined (engine's chain), hits"),
        "{out}"
    );
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
    let e = compare_file(&file, &CompareOptions::default()).unwrap_err();
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

fn with(kernel_cpu: i32, wake_flags: u32) -> Sample {
    Sample {
        chosen_cpu: kernel_cpu,
        wake_flags,
        ..sample()
    }
}

/// Never moving a task is the baseline beside each figure, and the classes split the
/// records: wake-ups the kernel kept on prev, wake-ups it moved, forks, execs.  On
/// sample() the engine pulls a wake-up to its lone waker's CPU 0 and places a fork or an
/// exec on CPU 3, the only idle one; prev is CPU 2.
#[test]
fn agreement_stands_beside_always_prev_per_class() {
    use crate::policy::{WAKE_EXEC, WAKE_FORK};
    let sync = WAKE_TTWU | WAKE_SYNC;
    let samples = [
        with(0, sync),      // moved; the engine agrees
        with(2, sync),      // kept on prev; the engine does not
        with(3, sync),      // moved elsewhere; neither
        with(3, WAKE_FORK), // a fork where the engine puts it
        with(2, WAKE_EXEC), // an exec the kernel left on prev
    ];
    let file = write_records("fidelity", &samples, &topo(4));
    let c = compare_file(&file, &CompareOptions::default()).unwrap();
    let f = &c.fidelity;
    let t = |records, engine, prev| fidelity::AgainstPrev {
        records,
        engine,
        prev,
    };
    assert_eq!(f.all, t(5, 2, 2), "{f:?}");
    assert_eq!(f.wakeups_kept_prev, t(1, 0, 1), "{f:?}");
    assert_eq!(f.wakeups_left_prev, t(2, 1, 0), "{f:?}");
    assert_eq!(f.forks, t(1, 1, 0), "{f:?}");
    assert_eq!(f.execs, t(1, 0, 1), "{f:?}");
    let out = c.render();
    for line in [
        ": preset mainline, kernel inputs: 2 of 5 agree (40.0%)\n",
        "\n  kernel inputs: all placements                5; engine agrees       2 (40.0%), \
         always prev       2 (40.0%)\n",
        "\n  kernel inputs: wake-ups that left prev       2; engine agrees       1 (50.0%), \
         always prev       0 (0.0%)\n",
        "\n  kernel inputs: execs                         1; engine agrees       0 (0.0%), \
         always prev       1 (100.0%)\n",
    ] {
        assert!(out.contains(line), "{line:?} not in\n{out}");
    }
    // Two files: the classes add up in the total block, and the last line stays as it was.
    let both = compare(&[file.clone(), file.clone()], &CompareOptions::default()).unwrap();
    assert!(
        both.contains(
            "all files:\n  kernel inputs: all placements               10; engine agrees       \
             4 (40.0%), always prev       4 (40.0%)\n"
        ),
        "{both}"
    );
    assert!(both.ends_with("\nagreement: 4 of 10 (40.0%)\n"), "{both}");
    std::fs::remove_dir_all(file.parent().unwrap()).unwrap();
}

/// A non-sync wake-up on 4 busy CPUs whose outcome is WA_WEIGHT's: the kernel's loads
/// (the waker's CPU 100, prev's 3000, the task 300) make the waker's CPU 0 the lighter
/// side; with the agent's (1024 for each CPU's one task and for the task) prev is.
fn weighed() -> Sample {
    let mut s = sample();
    s.wake_flags = WAKE_TTWU;
    s.cpus = vec![busy(), busy(), busy(), busy()];
    s.cpus[0].load_avg = 100;
    s.cpus[2].load_avg = 3000;
    s.chosen_cpu = 0;
    s
}

#[test]
fn live_inputs_decide_on_the_agents_loads() {
    let file = write_records("live", &[weighed()], &topo(4));
    let kernel = compare_file(&file, &shown(1)).unwrap();
    assert_eq!((kernel.total.records, kernel.total.agree), (1, 1));
    let live = CompareOptions {
        inputs: Inputs::Live,
        show: 1,
        ..CompareOptions::default()
    };
    let c = compare_file(&file, &live).unwrap();
    assert_eq!((c.total.records, c.total.agree), (1, 0), "{c:?}");
    assert_eq!(c.examples[0].1..=c.examples[0].2, 0..=2, "{c:?}");
    assert!(
        c.examples[0].3.contains("wake_affine_weight_prev_lighter"),
        "{c:?}"
    );
    let out = compare(std::slice::from_ref(&file), &live).unwrap();
    assert!(out.contains(", live inputs: 0 of 1 agree"), "{out}");
    assert!(
        out.contains("\n  live inputs: wake-ups that left prev       1; engine agrees       0"),
        "{out}"
    );
    assert!(out.ends_with("\nagreement: 0 of 1 (0.0%)\n"), "{out}");
    std::fs::remove_dir_all(file.parent().unwrap()).unwrap();
}

/// The WA_WEIGHT record with a value of its own in every field a stand-in replaces (and in
/// some it does not): CPU 1 runs three tasks, one a delayed sleeper, all SCHED_IDLE, at a
/// reduced capacity; the LLC's hints are set; the wakee is a per-CPU kthread with some
/// util; the waker may run on CPU 0 only.
fn with_every_stand_in_field(t: &Topology) -> TraceRecord {
    let mut s = weighed();
    s.cpus[1].nr_running = 3;
    s.cpus[1].nr_delayed = 1;
    s.cpus[1].nr_sched_idle = 3;
    s.cpus[1].capacity = 800;
    s.cpus[1].avg_idle = 123_456;
    s.cpus[1].runnable_avg = 1500;
    s.cpus[1].util_est = 950;
    s.cpus[1].idle_stamp = 42;
    // The LLC's state is read through its first CPU.
    s.cpus[0].llc.has_idle_cores = Some(true);
    s.cpus[0].llc.nr_idle_scan = Some(3);
    s.cpus[0].llc.avg_scan_cost = 777;
    s.wakee.flags = 0x0020_0000; // PF_KTHREAD
    s.wakee.nr_cpus_allowed = 1;
    s.wakee.util_avg = 50;
    s.waker.allowed = 0x1;
    // The estimator's own view of CPU 1 and of the wakee.
    s.cpus[1].est_load_avg = 2222;
    s.cpus[1].est_util_avg = 333;
    s.wakee.est_load_avg = Some(700);
    s.wakee.est_util_avg = Some(70);
    s.waker.est_load_avg = Some(640);
    s.to_trace(0, t, &TopologyInput::from_topology(t), "mainline", 250)
        .unwrap()
}

/// What live_view replaces, and what it leaves as the kernel recorded it.
#[test]
fn the_live_view_replaces_only_what_the_agent_computes_otherwise() {
    let t = topo(4);
    let rec = with_every_stand_in_field(&t);
    let kernel_cpus = rec.cpus.resolve(4).unwrap();
    assert!(kernel_cpus[1].sched_idle_only && rec.task.is_per_cpu_kthread);
    let live = fidelity::live_view(rec.clone(), &t);
    let cpus = live.cpus.resolve(4).unwrap();
    // The estimator's loads and utils (the kernel's are 100, 1024, 3000, 1024 and 900).
    assert_eq!(
        cpus.iter().map(|c| (c.load, c.util)).collect::<Vec<_>>(),
        [(1024, 900), (2222, 333), (1024, 900), (1024, 900)]
    );
    assert_eq!(cpus[1].capacity, 0);
    assert!(!cpus[1].sched_idle_only);
    assert_eq!(
        (kernel_cpus[1].runnable, kernel_cpus[1].util_est),
        (1500, 950)
    );
    assert_eq!((cpus[1].runnable, cpus[1].util_est), (0, 0));
    // The kernel's own: avg_idle, the idle stamp, the counts, the delayed sleeper.
    for (k, l) in kernel_cpus.iter().zip(&cpus) {
        assert_eq!(l.idle_stamp_ns, k.idle_stamp_ns);
        assert_eq!(
            (l.avg_idle_ns, l.nr_running, l.nr_delayed, l.idle),
            (k.avg_idle_ns, k.nr_running, k.nr_delayed, k.idle)
        );
    }
    let kernel_llc = &rec.llc_state.as_ref().unwrap()[0];
    assert_eq!(
        (kernel_llc.has_idle_cores, kernel_llc.nr_idle_scan),
        (Some(true), Some(3))
    );
    let llc = &live.llc_state.as_ref().unwrap()[0];
    assert_eq!((llc.has_idle_cores, llc.nr_idle_scan), (None, None));
    assert_eq!(llc.avg_scan_cost_ns, Some(777));
    assert_eq!(
        (live.task.load, live.task.util, live.task.is_per_cpu_kthread),
        (700, 70, false)
    );
    assert_eq!(live.task.recent_used_cpu, rec.task.recent_used_cpu);
    assert_eq!(live.task.wakee_flips, rec.task.wakee_flips);
    let (w, kw) = (live.wake.waker.unwrap(), rec.wake.waker.unwrap());
    assert_eq!((w.load, w.util, w.allowed), (640, 0, *t.possible()));
    assert_eq!(
        (w.last_wakee, w.wakee_flips),
        (kw.last_wakee, kw.wakee_flips)
    );
    // Nothing else of the record changes.
    let mut back = live.clone();
    back.cpus = rec.cpus.clone();
    back.llc_state = rec.llc_state.clone();
    back.task = rec.task;
    back.wake.waker = rec.wake.waker;
    assert_eq!(back, rec);
    // The kernel's inputs are the record itself.
    assert_eq!(Inputs::Kernel.view(rec.clone(), &t), rec);

    // A record without the estimator's values (an older recorder): runnable tasks x 1024,
    // the delayed sleeper counted in nr_running and not in the load, the kernel's util,
    // and the wakee at its nice weight with no util.
    let old = TraceRecord {
        estimated: None,
        ..rec.clone()
    };
    let live = fidelity::live_view(old, &t);
    assert_eq!(
        (live.cpus.resolve(4).unwrap().iter())
            .map(|c| (c.load, c.util))
            .collect::<Vec<_>>(),
        [(1024, 900), (2048, 900), (1024, 900), (1024, 900)]
    );
    assert_eq!((live.task.load, live.task.util), (1024, 0));
    assert_eq!(live.wake.waker.unwrap().load, 1024);
}

/// Each stand-in changes its own fields alone: the same record with every stand-in put in
/// one at a time is the live view, and with none is the record.
#[test]
fn each_stand_in_replaces_its_own_fields_only() {
    use fidelity::{StandIn, with_stand_ins};
    let t = topo(4);
    let rec = with_every_stand_in_field(&t);
    assert_eq!(with_stand_ins(rec.clone(), &t, &[]), rec);
    let mut one_by_one = rec.clone();
    for s in StandIn::ALL {
        let alone = with_stand_ins(rec.clone(), &t, &[s]);
        assert_ne!(alone, rec, "{s:?} changes nothing in this record");
        one_by_one = with_stand_ins(one_by_one, &t, &[s]);
    }
    assert_eq!(one_by_one, fidelity::live_view(rec.clone(), &t));
    // The CPU stand-ins share a pass over the CPUs, and leave each other's fields.
    let load = with_stand_ins(rec.clone(), &t, &[StandIn::CpuLoad]);
    let cpus = load.cpus.resolve(4).unwrap();
    assert_eq!(
        (cpus[1].load, cpus[1].capacity, cpus[1].sched_idle_only),
        (2222, 800, true)
    );
    let names: Vec<&str> = StandIn::ALL.iter().map(|s| s.name()).collect();
    let mut unique = names.clone();
    unique.dedup();
    assert_eq!(unique.len(), names.len());
}

/// `--stand-ins` on the WA_WEIGHT record: the CPUs' loads alone turn the kernel's choice
/// (the waker's CPU 0) into prev's; the wakee's nice-0 load alone does not, and every
/// stand-in but the CPUs' loads leaves the choice the kernel's.
#[test]
fn stand_ins_are_costed_alone_and_all_but_each() {
    let file = write_records("stand-ins", &[weighed()], &topo(4));
    let opts = CompareOptions {
        stand_ins: true,
        ..CompareOptions::default()
    };
    let c = compare_file(&file, &opts).unwrap();
    let rows = &c.stand_ins.as_ref().unwrap().rows;
    assert_eq!(rows.len(), fidelity::StandIn::ALL.len());
    let row = |name: &str| {
        let r = rows.iter().find(|r| r.stand_in.name() == name).unwrap();
        (
            r.alone.all.engine,
            r.all_but.all.engine,
            r.alone.all.records,
        )
    };
    assert_eq!(row("cpu_load"), (0, 1, 1));
    assert_eq!(row("wakee_load"), (1, 0, 1));
    let out = compare(std::slice::from_ref(&file), &opts).unwrap();
    assert!(
        out.contains(
            "\n  stand-in cpu_load: alone 0 of 1 (0.0%), left prev 0 of 1 (0.0%); all but it 1 \
             (100.0%), left prev 1 (100.0%)\n"
        ),
        "{out}"
    );
    // The replay itself is the kernel inputs'.
    assert!(out.ends_with("\nagreement: 1 of 1 (100.0%)\n"), "{out}");
    std::fs::remove_dir_all(file.parent().unwrap()).unwrap();
}

/// A non-sync wake-up across nodes (2 nodes of 2 CPUs, an LLC each): the waker on CPU 0,
/// prev (CPU 2) idle with the blocked load of 3000 PELT keeps for a while.  v5.11's
/// wake_affine_idle() keeps an idle prev (d8fcb81f): v6.1.y places the task on CPU 2;
/// v5.10.y has no such test, WA_WEIGHT finds the waker's CPU lighter, and its LLC has
/// nothing idle: CPU 0.
fn across_nodes(kernel_cpu: i32) -> Sample {
    let mut s = sample();
    s.wake_flags = WAKE_TTWU;
    s.wakee.recent_used_cpu = -1;
    s.cpus = vec![busy(), busy(), idle(), busy()];
    s.cpus[0].load_avg = 100;
    s.cpus[2].load_avg = 3000;
    s.chosen_cpu = kernel_cpu;
    s
}

#[test]
fn discrimination_counts_whose_cpu_the_kernel_took_where_presets_differ() {
    use crate::policy::WAKE_FORK;
    let t = Topology::from_shape(2, 1, 2, 1).unwrap();
    assert!(t.share_cache(0, 1) && !t.share_cache(0, 2));
    let samples = [
        across_nodes(2),
        across_nodes(2),
        across_nodes(0),
        across_nodes(3),
        with(3, WAKE_FORK), // the slow path: every preset places it alike
    ];
    let file = write_preset_records("discriminate", &samples, &t, "v6.1.y");
    let opts = CompareOptions {
        discriminate: true,
        ..CompareOptions::default()
    };
    let c = compare_file(&file, &opts).unwrap();
    let d = c.discrimination.as_ref().unwrap();
    let pair = |other: &str| d.pairs.iter().find(|p| p.other == other).unwrap();
    let old = pair("v5.10.y");
    assert_eq!(old.own, "v6.1.y");
    assert_eq!(
        (
            old.differ,
            old.own_matches,
            old.other_matches,
            old.same_policy
        ),
        (4, 2, 1, false),
        "{d:?}"
    );
    // The newer presets differ from v6.1.y only with delayed sleepers, which none has.
    for other in ["v6.12.y", "mainline"] {
        let p = pair(other);
        assert_eq!((p.differ, p.same_policy), (0, false), "{other}: {d:?}");
    }
    assert_eq!(d.pairs.len(), 3, "{d:?}");
    let out = c.render();
    assert!(
        out.contains(
            "\n  kernel inputs: preset v6.1.y against v5.10.y: 4 records decide differently; \
             the kernel's CPU is v6.1.y's in 2 (50.0%), v5.10.y's in 1, another in 1\n"
        ),
        "{out}"
    );
    // With the agent's loads prev (idle, no load) is the lighter side for v5.10.y too: the
    // two presets no longer differ on these records.
    let live = CompareOptions {
        inputs: Inputs::Live,
        ..opts.clone()
    };
    let c = compare_file(&file, &live).unwrap();
    let d = c.discrimination.as_ref().unwrap();
    let old = d.pairs.iter().find(|p| p.other == "v5.10.y").unwrap();
    assert_eq!(old.differ, 0, "{d:?}");
    assert!(
        c.render().contains(
            "\n  live inputs: preset v6.1.y against v5.10.y: 0 records decide differently"
        ),
        "{}",
        c.render()
    );
    // Two files: the pairs add up in the total block.
    let out = compare(&[file.clone(), file.clone()], &opts).unwrap();
    let total = out.split("all files:\n").nth(1).unwrap();
    assert!(
        total.contains("preset v6.1.y against v5.10.y: 8 records decide differently"),
        "{out}"
    );
    // Without --discriminate nothing is replayed twice and no pair is reported.
    let c = compare_file(&file, &CompareOptions::default()).unwrap();
    assert!(c.discrimination.is_none() && !c.render().contains(" against "));
    std::fs::remove_dir_all(file.parent().unwrap()).unwrap();
}

/// Presets that model the same behaviours cannot be told apart: said, not replayed.
#[test]
fn discrimination_names_presets_of_the_same_policy() {
    let t = Topology::from_shape(2, 1, 2, 1).unwrap();
    let file = write_preset_records("same", &[across_nodes(2)], &t, "mainline");
    let opts = CompareOptions {
        discriminate: true,
        ..CompareOptions::default()
    };
    let c = compare_file(&file, &opts).unwrap();
    let d = c.discrimination.as_ref().unwrap();
    let same: Vec<&str> = d
        .pairs
        .iter()
        .filter(|p| p.same_policy)
        .map(|p| p.other.as_str())
        .collect();
    assert_eq!(same, ["v6.12.y"], "{d:?}");
    assert!(
        c.render().contains(
            "preset mainline against v6.12.y: 0 records decide differently; the kernel's CPU \
             is mainline's in 0 (-), v6.12.y's in 0, another in 0 (the same policy)\n"
        ),
        "{}",
        c.render()
    );
    // --preset replays with another preset: the pairs are that preset's.
    let v5_10 = CompareOptions {
        policy: PolicyOverride {
            preset: Some("v5.10.y".into()),
            set: Vec::new(),
        },
        ..opts
    };
    let c = compare_file(&file, &v5_10).unwrap();
    let d = c.discrimination.as_ref().unwrap();
    assert!(d.pairs.iter().all(|p| p.own == "v5.10.y"), "{d:?}");
    assert_eq!(d.pairs.len(), 3, "{d:?}");
    std::fs::remove_dir_all(file.parent().unwrap()).unwrap();
}

/// The presets --discriminate replays with are those of the kernels the oracle records.
#[test]
fn the_discrimination_presets_are_the_recorded_kernels() {
    let recorded: Vec<&str> = [
        "5.10.0-32-amd64",
        "6.1.0-50-amd64",
        "6.12.95+deb12-amd64",
        "7.2.13+deb14-amd64",
    ]
    .iter()
    .map(|r| preset_for_release(r).0)
    .collect();
    assert_eq!(recorded, fidelity::DISCRIMINATION_PRESETS);
    for p in fidelity::DISCRIMINATION_PRESETS {
        assert!(crate::policy::PRESET_NAMES.contains(p), "{p}");
    }
}

/// `--inputs` takes kernel or live, kernel when not given.
#[test]
fn inputs_is_kernel_or_live() {
    use clap::{Args, Command, FromArgMatches};
    let parse = |extra: &[&str]| {
        let cmd = OracleArgs::augment_args(Command::new("oracle"));
        let argv = [&["oracle", "compare", "f.jsonl"][..], extra].concat();
        cmd.try_get_matches_from(argv)
            .map(|m| OracleArgs::from_arg_matches(&m).unwrap())
    };
    let inputs_of = |extra: &[&str]| match parse(extra).unwrap().command {
        OracleCommand::Compare {
            inputs,
            discriminate,
            ..
        } => (inputs, discriminate),
        c => panic!("{c:?}"),
    };
    assert_eq!(inputs_of(&[]), (Inputs::Kernel, false));
    assert_eq!(
        inputs_of(&["--inputs", "live", "--discriminate"]),
        (Inputs::Live, true)
    );
    let e = parse(&["--inputs", "estimator"]).unwrap_err().to_string();
    assert!(e.contains("estimator") && e.contains("--inputs"), "{e}");
    // Stand-ins are put in one by one over the kernel's inputs, not over the live ones.
    let e = run(parse(&["--inputs", "live", "--stand-ins"]).unwrap())
        .unwrap_err()
        .to_string();
    assert!(
        e.starts_with("--stand-ins replays the kernel's inputs"),
        "{e}"
    );
}

/// The estimator's error: relative to the kernel's value, or to 1024 below it; the
/// quantiles to a tenth of a percent; the wakee only where the estimator has seen it.
#[test]
fn the_estimators_error_is_reported_beside_the_kernels_values() {
    let mut e = fidelity::ErrorSpread::default();
    assert_eq!(e.quantile(0.5), None);
    for (est, kernel) in [(2000, 2000), (2020, 2000), (2100, 2000), (0, 100), (512, 0)] {
        e.add(est, kernel);
    }
    // Errors 0, 1%, 5%, 9.8% (100 of 1024), 50% (512 of 1024).
    assert_eq!(e.n, 5);
    assert_eq!(e.quantile(0.5), Some(5.1));
    assert_eq!(e.quantile(0.99), Some(50.1));

    let t = topo(4);
    let rec = with_every_stand_in_field(&t);
    let mut errs = fidelity::EstimateErrors::default();
    errs.add(&rec, &t);
    // Estimates 1024, 2222, 1024, 1024 against 100, 1024, 3000, 1024: 90.2% (of 1024),
    // 117% (beyond the scale), 65.9% (of 3000), 0.
    assert_eq!(errs.cpu_load.n, 4);
    assert_eq!(errs.cpu_load.quantile(0.5), Some(65.9));
    assert_eq!(errs.cpu_load.quantile(0.99), Some(100.0));
    // The wakee: 700 against 300, 400 of 1024.
    assert_eq!(errs.task_load.quantile(0.5), Some(39.1));
    let mut unseen = rec.clone();
    unseen.estimated.as_mut().unwrap().task_load = None;
    let mut errs = fidelity::EstimateErrors::default();
    errs.add(&unseen, &t);
    assert_eq!(errs.task_load.n, 0);
    let mut out = String::new();
    errs.render(&mut out);
    assert!(
        out.contains("    cpu load_avg             4   65.9%  100.0%\n"),
        "{out}"
    );
    assert!(
        out.contains("    wakee load_avg           0       -       -\n"),
        "{out}"
    );
}
