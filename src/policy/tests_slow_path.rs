//! Fork and exec placement (the slow path), per version.  Line numbers are those of
//! kernel/sched/fair.c in Debian's 5.10.223 and 7.2.13 sources; 6.1.176 and 6.12.95 follow
//! 7.2 in every step tested here.

use super::test_util::*;
use super::*;

fn fork_from(cpu: usize, n: usize) -> WakeCtx {
    WakeCtx {
        wake_flags: WAKE_FORK,
        ..WakeCtx::ttwu(cpu, waker_task(2, n), 0)
    }
}

/// An idle CPU that went idle through schedule() at `stamp`.
fn idle_at(stamp: u64) -> CpuSnapshot {
    CpuSnapshot {
        idle_stamp_ns: stamp,
        ..CpuSnapshot::idle()
    }
}

/// A fully busy local node sends the new task to the node with spare capacity, to its most
/// recently idled CPU (5.10 :9140 / 7.2 :12616 "the local group is busier"; :6126 / :8563
/// the latest idle stamp).
#[test]
fn fork_leaves_a_busy_node_for_the_most_recently_idled_cpu() {
    let topo = shape(2, 1, 4, 1);
    for preset in ["v5.10.y", "v6.1.y", "v6.12.y", "mainline"] {
        let mut e = engine(&topo, preset);
        let mut cpus = all_busy(8);
        cpus[5] = idle_at(100);
        cpus[6] = idle_at(300);
        cpus[7] = idle_at(200);
        let mut t = wakee(1, 1, 8);
        let mut w = fork_from(1, 8);
        let d = e.select_cpu(&cpus, &mut t, &mut w);
        assert_eq!((d.cpu, d.path), (6, Path::Slow), "{preset}");
        assert_eq!(
            names(&d),
            ["slow_path_idlest_group", "slow_path_idlest_idle"],
            "{preset}"
        );
        assert_eq!(d.counted.nr_fork_placements, 1);
        assert_eq!(d.counted.nr_wakeups, 0);
        assert_eq!(w.waker.wakee_flips, 0, "no record_wakee for a fork");
    }
}

/// An idle CPU whose stamp a wake-up cleared is passed over (the comparison is strict and
/// starts at 0): with no stamped idle CPU, the node's least-loaded busy CPU is where the
/// descent continues, and one level down, where every group is one CPU, the group
/// statistics find the idle CPU after all.
#[test]
fn an_idle_cpu_without_a_stamp_is_passed_over() {
    let topo = shape(2, 1, 4, 1);
    let mut e = engine(&topo, "mainline");
    let mut cpus = all_busy(8);
    cpus[4] = idle_at(0);
    for (c, load) in [(5, 900), (6, 300), (7, 700)] {
        cpus[c].load = load;
    }
    let mut t = wakee(1, 0, 8);
    let d = e.select_cpu(&cpus, &mut t, &mut fork_from(0, 8));
    assert_eq!(d.cpu, 4);
    assert_eq!(
        names(&d),
        [
            "slow_path_idlest_group",
            "slow_path_idlest_group",
            "slow_path_single_cpu_group"
        ],
        "node 1, then from its least-loaded CPU 6 to the idle CPU 4 at the LLC level"
    );
}

/// Both nodes have spare capacity: v5.10 keeps the task on its node while that node has an
/// idle CPU (5.10 :9202); from v5.18 the node with more idle CPUs wins once the local node
/// runs more than imb_numa_nr tasks (7.2 :12699, :12711).
#[test]
fn numa_spare_capacity_rule_per_version() {
    let topo = shape(2, 1, 4, 1);
    let mut cpus = all_idle(8);
    for (c, stamp) in [(1, 10), (4, 20), (5, 50), (6, 40), (7, 30)] {
        cpus[c] = idle_at(stamp);
    }
    cpus[0] = CpuSnapshot::busy(1);
    cpus[2] = CpuSnapshot::busy(1);
    cpus[3] = CpuSnapshot::busy(1);
    let run = |preset: &str| {
        let mut e = engine(&topo, preset);
        let d = e.select_cpu(&cpus, &mut wakee(1, 0, 8), &mut fork_from(0, 8));
        (d.cpu, names(&d))
    };
    let (cpu, chain) = run("v5.10.y");
    assert_eq!(cpu, 1, "v5.10: the local node's idle CPU");
    assert_eq!(chain.first(), Some(&"slow_path_numa_kept_local"));
    for preset in ["v6.1.y", "v6.12.y", "mainline"] {
        let (cpu, chain) = run(preset);
        assert_eq!(cpu, 5, "{preset}: node 1's most recently idled CPU");
        assert_eq!(chain.first(), Some(&"slow_path_idlest_group"), "{preset}");
    }
    // The flag alone makes the difference.
    let mut e = engine_with(&topo, "mainline", &["fork_numa_rule=local-idle"]);
    let d = e.select_cpu(&cpus, &mut wakee(1, 0, 8), &mut fork_from(0, 8));
    assert_eq!(d.cpu, 1);
}

/// With two LLCs per node imb_numa_nr is 2 (one per LLC): a lightly loaded local node keeps
/// a small imbalance of idle CPUs, in every version.
#[test]
fn a_small_numa_imbalance_is_allowed() {
    let topo = shape(2, 2, 2, 1);
    let mut cpus: Vec<CpuSnapshot> = (0..8).map(|c| idle_at(10 + c as u64)).collect();
    cpus[0] = CpuSnapshot::busy(1);
    for preset in ["v5.10.y", "mainline"] {
        let mut e = engine(&topo, preset);
        let d = e.select_cpu(&cpus, &mut wakee(1, 0, 8), &mut fork_from(0, 8));
        assert!(d.cpu < 4, "{preset}: stays on node 0, got {}", d.cpu);
        assert_eq!(names(&d)[0], "slow_path_numa_kept_local", "{preset}");
    }
}

/// Groups without spare capacity compare their capacity-scaled load: a fully busy local
/// node stays unless the other node is lighter by more than the imbalance margin, and across
/// NUMA the margin is added to the remote side (7.2 :12632-12651).
#[test]
fn busy_nodes_compare_load_with_a_margin() {
    let topo = shape(2, 1, 4, 1);
    let mut e = engine(&topo, "mainline");
    let base = all_busy(8);
    let run = |e: &mut Engine, remote_load: u64| {
        let mut cpus = base.clone();
        for c in &mut cpus[4..] {
            c.load = remote_load;
        }
        e.select_cpu(&cpus, &mut wakee(1, 0, 8), &mut fork_from(0, 8))
            .cpu
    };
    // Local avg_load 1024; margin 1024 * 17 / 100 = 174.  Remote at 1000: not lighter
    // enough, stay on node 0.
    assert!(run(&mut e, 1000) < 4);
    // Remote at 600: 600 + 174 < 1024 and 100 * 1024 > 117 * 600: go.
    assert!(run(&mut e, 600) >= 4);
}

/// An exec'ing task is the one running on its CPU: without it that CPU is idle, so a node
/// where it is the only task still counts as having an idle CPU.
#[test]
fn exec_leaves_its_own_task_out() {
    let topo = shape(2, 1, 4, 1);
    let mut e = engine(&topo, "v5.10.y");
    let mut cpus = all_busy(8);
    cpus[0].load = 1024;
    for (c, s) in cpus.iter_mut().enumerate().skip(4) {
        *s = idle_at(1 + c as u64);
    }
    let mut t = wakee(1, 0, 8);
    t.load = 1024;
    let mut w = WakeCtx {
        wake_flags: WAKE_EXEC,
        ..fork_from(0, 8)
    };
    let d = e.select_cpu(&cpus, &mut t, &mut w);
    assert_eq!(
        d.cpu, 0,
        "v5.10: CPU 0 is idle without the exec'ing task, so node 0 has an idle CPU"
    );
    // With a second task on CPU 0, node 0 has no idle CPU and the task leaves.
    cpus[0] = CpuSnapshot::busy(2);
    let d = e.select_cpu(&cpus, &mut t, &mut w);
    assert!(d.cpu >= 4, "got {}", d.cpu);
}

#[test]
fn pinned_fork_and_no_flags() {
    let topo = shape(2, 1, 4, 1);
    let mut e = engine(&topo, "mainline");
    let cpus = all_busy(8);
    let mut t = TaskState::with_allowed(1, 0, CpuSet::from_cpus([2]));
    let d = e.select_cpu(&cpus, &mut t, &mut fork_from(0, 8));
    assert_eq!(d.cpu, 2, "the only allowed CPU");
    // no flags at all: prev, not a wake-up
    let mut w0 = WakeCtx {
        wake_flags: 0,
        ..fork_from(1, 8)
    };
    let d = e.select_cpu(&cpus, &mut wakee(1, 1, 8), &mut w0);
    assert_eq!((d.cpu, d.path), (1, Path::NotAWakeup));
}
