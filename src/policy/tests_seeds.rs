//! The four seed threads reproduced at decision level, on the topologies their authors
//! used, with and without each flag.

use super::test_util::*;
use super::*;

// ------------------------------------------------------------------------------------------
// Seed 1 — Barry Song, "sched/fair: don't use waker's cpu if the waker of sync wake-up is
// interrupt" (2021-04-27, never merged).  2 NUMA nodes, CPUs 0-31 and 32-63; the NIC on
// node 1; `taskset -c 32-63 stress -c 32`; qperf tcp_lat.  NET_RX (softirq) on a node-1 CPU
// is the sync waker; the CPU's only task is a stress hog.
// ------------------------------------------------------------------------------------------

fn barry_machine() -> (Topology, Vec<CpuSnapshot>) {
    let topo = shape(2, 1, 32, 1);
    let mut cpus = all_idle(64);
    for c in cpus.iter_mut().skip(32) {
        // one stress hog per node-1 CPU
        *c = CpuSnapshot {
            util: 1024,
            ..CpuSnapshot::busy(1)
        };
    }
    (topo, cpus)
}

fn barry_wakeup(cpus: &[CpuSnapshot], preset: &str, overrides: &[&str]) -> (Decision, Engine) {
    let (topo, _) = barry_machine();
    let mut e = engine_with(&topo, preset, overrides);
    // qperf server last ran on node 0, CPU 5, and is asleep in recv().
    let mut qperf = wakee(100, 5, 64);
    qperf.load = 300;
    // current on CPU 40 is the hog the softirq interrupted.
    let hog = TaskState {
        load: 1024,
        ..TaskState::new(2000, 40, 64)
    };
    let mut w = WakeCtx::sync(40, hog, 1_000_000);
    w.waker_context = WakerContext::Softirq;
    let d = e.select_cpu(cpus, &mut qperf, &mut w);
    (d, e)
}

#[test]
fn seed1_barry_softirq_waker_on_loaded_node() {
    let (topo, cpus) = barry_machine();
    // Without the patch (every released kernel): the sync shortcut believes the waker is
    // alone (nr_running == 1 is the hog) and pulls qperf across nodes onto the hog's CPU;
    // node 1 has no idle CPU, so it stays there.  Load balancing later moves it back: the
    // 2.95 ms ping-pong.
    for preset in ["v5.10", "v6.12", "mainline"] {
        let (d, _) = barry_wakeup(&cpus, preset, &[]);
        assert_eq!(d.cpu, 40, "{preset}: {:?}", d.chain);
        assert_eq!(topo.distance(5, d.cpu), Distance::RemoteNode);
        let n = names(&d);
        assert!(n.contains(&"affine_domain_machine"), "{preset}: {n:?}");
        assert!(
            n.contains(&"wake_affine_idle_sync_waker_alone")
                && n.contains(&"sync_shortcut_irq_waker"),
            "{preset}: {n:?}"
        );
        assert_eq!(d.counted.sync_pull_by_irq_waker, 1);
        assert_eq!(d.counted.remote_node, 1);
        assert_eq!(d.counted.nr_wakeups_affine, 1);
    }
    // With the patch: the softirq is not a task about to sleep; no shortcut, and qperf
    // stays on node 0.  From v5.11 (d8fcb81f) WA_IDLE keeps the idle prev; v5.10 has no
    // such test and asks WA_WEIGHT, which keeps prev too: the hog's CPU is the heavier.
    for (preset, ov, keeper) in [
        ("mainline+barry", &[][..], "wake_affine_idle_prev_idle"),
        (
            "v5.10",
            &["sync_requires_task_waker=true"][..],
            "wake_affine_weight_prev_lighter",
        ),
    ] {
        let (d, _) = barry_wakeup(&cpus, preset, ov);
        assert_eq!(d.cpu, 5, "{preset}: {:?}", d.chain);
        let n = names(&d);
        assert!(
            n.contains(&"sync_shortcut_blocked_irq_waker") && n.contains(&keeper),
            "{n:?}"
        );
        assert!(n.ends_with(&["sis_target_idle"]));
        assert_eq!(d.counted.sync_pull_rejected_irq_waker, 1);
        assert_eq!((d.counted.same_cpu, d.counted.remote_node), (1, 0));
    }
    // Barry's control: `stress -c 96` puts 3 hogs on each node-1 CPU, nr_running == 3 breaks
    // the shortcut and qperf stays home even without the patch (14.7 us).
    let mut loaded = cpus.clone();
    for c in loaded.iter_mut().skip(32) {
        *c = CpuSnapshot {
            util: 1024,
            ..CpuSnapshot::busy(3)
        };
    }
    let (d, _) = barry_wakeup(&loaded, "mainline", &[]);
    assert_eq!(d.cpu, 5, "{:?}", d.chain);
    // And a genuine task-context sync waker is unaffected by the patch.
    let (topo, cpus) = barry_machine();
    let mut e = engine(&topo, "mainline+barry");
    let mut t = wakee(100, 5, 64);
    let d = e.select_cpu(
        &cpus,
        &mut t,
        &mut WakeCtx::sync(40, waker_task(3000, 64), 0),
    );
    assert_eq!(d.cpu, 40);
}

// ------------------------------------------------------------------------------------------
// Seed 2 — Rik van Riel, "sched,fair: Skip newidle_balance if a wakeup is pending" (v4,
// e5e678e4, v5.14).  A CPU going idle with a queued remote wake-up on its way.
// ------------------------------------------------------------------------------------------

#[test]
fn seed2_rik_newidle_skips_when_wakeup_pending() {
    let topo = shape(1, 1, 8, 2);
    let mut cpus = all_busy(16);
    // CPU 3 just ran out of work; a wakee was queued to it via the wakelist IPI.
    cpus[3] = CpuSnapshot {
        ttwu_pending: true,
        ..CpuSnapshot::default()
    };
    // CPU 9 has two tasks waiting behind the running one.
    cpus[9].nr_running = 3;
    let cands = [
        PullCandidate {
            pid: 91,
            src_cpu: 9,
            allowed: CpuSet::new(),
            load: 1024,
            cache_hot: false,
        },
        PullCandidate {
            pid: 92,
            src_cpu: 9,
            allowed: CpuSet::new(),
            load: 1024,
            cache_hot: false,
        },
    ];

    // Before e5e678e4 (v5.10): newidle balance pulls a task, which then has to share the CPU
    // with the wakee that arrives right after.
    let mut e = engine(&topo, "v5.10");
    let d = e.newidle_pull(3, &cpus, &cands);
    assert_eq!(
        d.pulled,
        Some(Pulled {
            pid: 91,
            src_cpu: 9
        })
    );
    assert_eq!(
        d.chain.names(),
        ["newidle_pull_domain_llc", "newidle_pull_despite_pending"]
    );
    assert_eq!(
        (
            d.counted.newidle_pulls,
            d.counted.newidle_pull_despite_pending
        ),
        (1, 1)
    );

    // With it (v5.14 and later, or the flag alone on v5.10): "There is a task waiting to run.
    // No need to search for one."
    for (preset, ov) in [
        ("v5.14", &[][..]),
        ("mainline", &[][..]),
        ("v5.10", &["newidle_skip_pending_wakeup=true"][..]),
    ] {
        let mut e = engine_with(&topo, preset, ov);
        let d = e.newidle_pull(3, &cpus, &cands);
        assert_eq!(d.pulled, None, "{preset}");
        assert_eq!(d.chain.names(), ["newidle_skip_pending_wakeup"]);
        assert_eq!(
            (
                d.counted.newidle_pull_skipped_pending,
                d.counted.newidle_pulls
            ),
            (1, 0)
        );
    }

    // No pending wake-up: the flag changes nothing.
    cpus[3].ttwu_pending = false;
    for preset in ["v5.10", "mainline"] {
        let mut e = engine(&topo, preset);
        assert_eq!(
            e.newidle_pull(3, &cpus, &cands).pulled,
            Some(Pulled {
                pid: 91,
                src_cpu: 9
            }),
            "{preset}"
        );
    }

    // The live agent's analogue: its own dispatch already in flight to CPU 3.
    cpus[3].wakeup_in_flight = true;
    let mut e = engine(&topo, "mainline");
    let d = e.newidle_pull(3, &cpus, &cands);
    assert_eq!(
        (d.pulled, d.chain.names()),
        (None, vec!["newidle_skip_wakeup_in_flight"])
    );
    let mut e = engine(&topo, "v5.10");
    assert!(e.newidle_pull(3, &cpus, &cands).pulled.is_some());
}

// ------------------------------------------------------------------------------------------
// Seed 3 — Xuewen Yan, "sched/fair: Fixup wake_up_sync() vs DELAYED_DEQUEUE" (aa3ee4f0,
// v6.16).  Tianchen Ding's reproduction: `lat_ctx -P $(nproc) 96`, many parallel pipe
// rings; under DELAY_DEQUEUE the ring tasks that just slept linger on their CPUs, the
// waker never looks alone, WA_IDLE fails "due to sched_delay noise" and migrations explode.
// ------------------------------------------------------------------------------------------

/// 2 nodes x 1 LLC x 8 cores x 2 threads (32 CPUs).  Every CPU runs one ring (one
/// runnable token holder); with delayed dequeue on, the two ring members that passed the
/// token most recently still sit delayed on the CPU.  Returns the snapshots.
fn pipe_rings(delayed_dequeue: bool) -> Vec<CpuSnapshot> {
    let n = 32;
    let mut dd = DelayedDequeue::new(n, delayed_dequeue);
    let now = 10_000_000;
    for cpu in 0..n {
        for k in 0..2u32 {
            // each sleeper still owes a little lag (not yet eligible)
            dd.on_sleep(
                cpu,
                (cpu as u32) * 100 + k,
                200_000 + k as i64 * 50_000,
                now - 10_000,
            );
        }
    }
    dd.expire(now); // nothing has elapsed yet
    let mut cpus: Vec<CpuSnapshot> = (0..n)
        .map(|_| CpuSnapshot {
            util: 700,
            ..CpuSnapshot::busy(1)
        })
        .collect();
    dd.apply_to(&mut cpus);
    for c in cpus.iter_mut() {
        // delayed entities stay enqueued, so their load still counts on the CPU
        c.load = 1024 * c.nr_running as u64;
    }
    cpus
}

fn ring_wakeups(cpus: &[CpuSnapshot], preset: &str, overrides: &[&str]) -> Counters {
    let topo = shape(2, 1, 8, 2);
    let mut e = engine_with(&topo, preset, overrides);
    for ring in 0..16usize {
        // The token holder on CPU `waker` writes to the pipe (sync) and will block on its
        // read; the next ring member last ran on a busy CPU of the same LLC.
        let waker_cpu = ring;
        let prev = (ring + 3) % 16;
        let mut next = wakee(10_000 + ring as u32, prev, 32);
        next.load = 512;
        let holder = TaskState {
            load: 512,
            ..waker_task(20_000 + ring as u32, 32)
        };
        let d = e.select_cpu(cpus, &mut next, &mut WakeCtx::sync(waker_cpu, holder, 0));
        assert!(
            d.chain.contains(Rule::AffineDomainLlc),
            "{preset} ring {ring}: {:?}",
            d.chain
        );
    }
    *e.counters()
}

#[test]
fn seed3_xuewen_delayed_tasks_block_sync_pull() {
    let delayed = pipe_rings(true);
    assert!(
        delayed
            .iter()
            .all(|c| c.nr_running == 3 && c.nr_delayed == 2)
    );

    // DELAY_DEQUEUE (v6.12 as released): the waker is never "alone", WA_IDLE has no answer,
    // WA_WEIGHT sees the lingering load and keeps prev: no ring wake-up is affine.
    let c = ring_wakeups(&delayed, "v6.12", &[]);
    assert_eq!(c.nr_wakeups_affine, 0);
    assert_eq!(c.sync_shortcut_blocked_by_delayed, 16);
    assert_eq!(c.nr_wakeups_local, 0);

    // DELAY_DEQUEUE + aa3ee4f0 (v6.16, 6.12.y, or the flag on v6.12): runnable tasks only;
    // every ring wake-up is pulled to the waker's CPU.
    for (preset, ov) in [
        ("v6.16", &[][..]),
        ("v6.12.y", &[][..]),
        ("v6.12", &["sync_excludes_delayed=true"][..]),
    ] {
        let c = ring_wakeups(&delayed, preset, ov);
        assert_eq!(c.nr_wakeups_affine, 16, "{preset}");
        assert_eq!(c.sync_shortcut_delayed_excluded, 16, "{preset}");
        assert_eq!(c.nr_wakeups_local, 16, "{preset}");
        assert_eq!(c.sync_shortcut_blocked_by_delayed, 0, "{preset}");
    }

    // NO_DELAY_DEQUEUE: sleepers leave at once, the plain nr_running == 1 test passes.
    let plain = pipe_rings(false);
    assert!(plain.iter().all(|c| c.nr_running == 1 && c.nr_delayed == 0));
    let c = ring_wakeups(&plain, "v6.12", &["delayed_dequeue=false"]);
    assert_eq!(c.nr_wakeups_affine, 16);
    assert_eq!(c.sync_shortcut_delayed_excluded, 0);
}

// ------------------------------------------------------------------------------------------
// Seed 4 — Mel Gorman, "Reduce scanning of runqueues in select_idle_sibling" v2 (Dec 2020).
// His failure mode: "with SMT, recent_used_cpu can be an idle CPU whose sibling is busy,
// which select_idle_core() would have avoided".  2-socket CascadeLake, 20 cores x 2 threads
// per socket (80 CPUs).
// ------------------------------------------------------------------------------------------

fn mel_machine() -> (Topology, Vec<CpuSnapshot>) {
    let topo = shape(2, 1, 20, 2); // socket 0 = CPUs 0-39, siblings (2k, 2k+1)
    let mut cpus: Vec<CpuSnapshot> = (0..80)
        .map(|_| CpuSnapshot {
            util: 600,
            ..CpuSnapshot::busy(1)
        })
        .collect();
    // recent_used_cpu 5 is idle but its sibling 4 is busy
    cpus[5] = CpuSnapshot::idle();
    // core 3 (CPUs 6, 7) is entirely idle
    cpus[6] = CpuSnapshot::idle();
    cpus[7] = CpuSnapshot::idle();
    (topo, cpus)
}

fn mel_wakeup(preset: &str, overrides: &[&str]) -> (Decision, TaskState) {
    let (topo, cpus) = mel_machine();
    let mut e = engine_with(&topo, preset, overrides);
    let mut t = wakee(1, 0, 80);
    t.recent_used_cpu = Some(5);
    // the waker runs on prev (CPU 0), so the target is prev and it is busy
    let d = e.select_cpu(&cpus, &mut t, &mut WakeCtx::ttwu(0, waker_task(2, 80), 0));
    (d, t)
}

#[test]
fn seed4_mel_recent_used_idle_but_sibling_busy() {
    // Returning recent_used_cpu directly lands the wakee next to a busy sibling, in every
    // merged variant (A: v5.10, B': prev, D: prev-fixed).
    for (preset, ov) in [
        ("v5.10", &[][..]),
        ("v5.15", &[][..]),
        ("mainline", &[][..]),
        ("mainline", &["recent_used=v5.10"][..]),
    ] {
        let (d, t) = mel_wakeup(preset, ov);
        assert_eq!(d.cpu, 5, "{preset} {ov:?}: {:?}", d.chain);
        assert_eq!(d.chain.last(), Some(Rule::SisRecentUsedHit));
        assert_eq!(t.recent_used_cpu, Some(0));
        assert_eq!(d.counted.sis_recent_used_hit, 1);
    }
    // Mel's never-merged search-target variant: the idle recent CPU only seeds the scan,
    // which still prefers a whole idle core.
    for (preset, ov) in [
        ("mainline", &["recent_used=search-target"][..]),
        ("v5.10", &["recent_used=search-target", "sis=none"][..]),
        ("v5.12", &["recent_used=search-target"][..]),
    ] {
        let (d, t) = mel_wakeup(preset, ov);
        assert_eq!(d.cpu, 6, "{preset} {ov:?}: {:?}", d.chain);
        assert!(d.chain.contains(Rule::SisRecentUsedBecomesTarget));
        assert_eq!(d.chain.last(), Some(Rule::SisIdleCore));
        assert_eq!(
            t.recent_used_cpu,
            Some(0),
            "prev always becomes the next recent CPU"
        );
        assert_eq!(d.counted.sis_recent_used_target, 1);
    }
    // With recent_used off the plain scan from prev finds the idle core too (no shortcut).
    let (d, _) = mel_wakeup("mainline", &["recent_used=off"]);
    assert_eq!(d.cpu, 6);
    // When no idle core exists, search-target still ends on the idle recent CPU (the scan
    // starts next to it and it is the only idle CPU).
    let (topo, mut cpus) = mel_machine();
    cpus[6] = CpuSnapshot {
        util: 600,
        ..CpuSnapshot::busy(1)
    };
    cpus[7] = CpuSnapshot {
        util: 600,
        ..CpuSnapshot::busy(1)
    };
    let mut e = engine_with(&topo, "mainline", &["recent_used=search-target"]);
    e.sync_idle_core_hints(&cpus);
    let mut t = wakee(1, 0, 80);
    t.recent_used_cpu = Some(5);
    let d = e.select_cpu(&cpus, &mut t, &mut WakeCtx::ttwu(0, waker_task(2, 80), 0));
    assert_eq!(d.cpu, 5, "{:?}", d.chain);
}

/// Hillf Danton's catch on patch 3: after `p->recent_used_cpu = prev`, the allowed-mask
/// test `cpumask_test_cpu(p->recent_used_cpu, p->cpus_ptr)` tests prev, not the CPU about to
/// be returned.  Mel: "this is indeed wrong".  Kept in 89aafd67 (v5.15), fixed by ae2ad293
/// (v6.5).
#[test]
fn seed4_hillf_prev_mode_tests_the_wrong_cpu_against_the_mask() {
    let (topo, cpus) = mel_machine();
    let allowed_without_recent = CpuSet::first_n(80).and_not(&CpuSet::single(5));
    let wake = |preset: &str| {
        let mut e = engine(&topo, preset);
        let mut t = wakee(1, 0, 80);
        t.recent_used_cpu = Some(5); // affinity changed since: 5 is no longer allowed
        t.allowed = allowed_without_recent;
        let d = e.select_cpu(&cpus, &mut t, &mut WakeCtx::ttwu(0, waker_task(2, 80), 0));
        (d, t)
    };
    // v5.15 (prev mode): the bogus test passes, select_idle_sibling returns CPU 5, and only
    // select_task_rq()'s is_cpu_allowed() check saves the day via select_fallback_rq().
    let (d, t) = wake("v5.15");
    let n = names(&d);
    assert!(
        n.ends_with(&[
            "sis_recent_used_hit",
            "sis_recent_used_mask_tested_prev",
            "fallback_not_allowed"
        ]),
        "{n:?}"
    );
    assert_eq!(d.counted.sis_recent_used_mask_bug, 1);
    assert_ne!(d.cpu, 5);
    assert!(t.allowed.contains(d.cpu));
    // v6.5+ (prev-fixed): the recent CPU is rejected and the scan finds the idle core.
    let (d, _) = wake("v6.5");
    assert_eq!(d.cpu, 6, "{:?}", d.chain);
    assert!(d.chain.contains(Rule::SisRecentUsedMiss));
    assert_eq!(d.counted.sis_recent_used_mask_bug, 0);
    // v5.10 (variant A) tested the right CPU all along.
    let (d, _) = wake("v5.10");
    assert!(!d.chain.contains(Rule::SisRecentUsedHit));
}
