//! Table-driven tests pinning each function of the placement path.

use super::engine::{LlcState, RqWakeIdle, Step};
use super::idle_scan::{sis_prop_nr, sis_util_nr_idle_scan, update_avg};
use super::test_util::*;
use super::*;

// ------------------------------------------------------------------------------------------
// wake_affine_idle(): every branch, per version
// ------------------------------------------------------------------------------------------

#[derive(Clone, Copy)]
struct WaIdleCase {
    name: &'static str,
    preset: &'static str,
    overrides: &'static [&'static str],
    this: CpuSnapshot,
    prev: CpuSnapshot,
    /// prev in the waker's LLC (CPU 1) or in the other node (CPU 5)
    prev_cache_affine: bool,
    sync: bool,
    in_task: bool,
    /// "this", "prev" or "none"
    expect: &'static str,
    rules: &'static [&'static str],
}

fn snap_nr(nr: u32, delayed: u32) -> CpuSnapshot {
    CpuSnapshot {
        nr_running: nr,
        nr_delayed: delayed,
        load: 1024 * nr as u64,
        ..CpuSnapshot::default()
    }
}

/// Each named counter of `c` holds the value beside it; a mismatch names the counter.
fn assert_counted(c: &Counters, want: &[(&str, u64)]) {
    for &(name, value) in want {
        assert_eq!(c.get(name), Some(value), "{name}");
    }
}

#[test]
fn wake_affine_idle_branches_per_version() {
    let idle = CpuSnapshot::idle();
    let busy = snap_nr(1, 0);
    let busy2 = snap_nr(2, 0);
    let pending = CpuSnapshot {
        ttwu_pending: true,
        ..CpuSnapshot::idle()
    };
    let alone_plus_delayed = snap_nr(2, 1);
    let alone_plus_2_delayed = snap_nr(3, 2);
    // What a row leaves out: no overrides, a sync wake-up from task context, prev in the
    // waker's LLC.
    let base = WaIdleCase {
        name: "",
        preset: "mainline",
        overrides: &[],
        this: busy,
        prev: busy,
        prev_cache_affine: true,
        sync: true,
        in_task: true,
        expect: "none",
        rules: &[],
    };
    #[rustfmt::skip]
    let cases = [
        WaIdleCase { name: "waker idle, affine, prev idle: keep prev", preset: "v5.10", this: idle, prev: idle, sync: false, in_task: false,
            expect: "prev", rules: &["wake_affine_idle_both_idle_keep_prev"], ..base },
        WaIdleCase { name: "waker idle, affine, prev busy: pull", preset: "v5.10", this: idle, prev: busy, sync: false, in_task: false,
            expect: "this", rules: &["wake_affine_idle_waker_idle_cache_affine"], ..base },
        WaIdleCase { name: "waker idle but remote: no interrupt-driven cross-node pull", preset: "mainline",
            this: idle, prev: busy, prev_cache_affine: false, in_task: false,
            expect: "none", rules: &["wake_affine_idle_no_decision"], ..base },
        WaIdleCase { name: "waker idle but remote, prev idle", preset: "mainline", this: idle, prev: idle, prev_cache_affine: false, sync: false,
            expect: "prev", rules: &["wake_affine_idle_prev_idle"], ..base },
        WaIdleCase { name: "ttwu_pending makes the waker's CPU not idle", preset: "mainline", this: pending, prev: busy, sync: false,
            expect: "none", rules: &["wake_affine_idle_no_decision"], ..base },
        WaIdleCase { name: "v5.10 sync, waker alone: pull", preset: "v5.10", this: busy, prev: idle, prev_cache_affine: false,
            expect: "this", rules: &["wake_affine_idle_sync_waker_alone"], ..base },
        WaIdleCase { name: "v5.10 sync from softirq, hog alone: pull (seed 1's complaint)", preset: "v5.10",
            this: busy, prev: idle, prev_cache_affine: false, in_task: false,
            expect: "this", rules: &["wake_affine_idle_sync_waker_alone", "sync_shortcut_irq_waker"], ..base },
        WaIdleCase { name: "v6.15-like sync, 2 running: no shortcut, prev busy", preset: "v6.12", this: busy2, prev: busy,
            expect: "none", rules: &["wake_affine_idle_no_decision"], ..base },
        WaIdleCase { name: "not sync: no shortcut, prev idle", preset: "v6.12", this: busy, prev: idle, sync: false,
            expect: "prev", rules: &["wake_affine_idle_prev_idle"], ..base },
        WaIdleCase { name: "v6.12 sync, one delayed sleeper: shortcut blocked", preset: "v6.12", this: alone_plus_delayed, prev: busy,
            expect: "none", rules: &["sync_shortcut_blocked_by_delayed", "wake_affine_idle_no_decision"], ..base },
        WaIdleCase { name: "v6.12 sync, delayed sleeper, prev idle: keep prev", preset: "v6.12", this: alone_plus_delayed, prev: idle, prev_cache_affine: false,
            expect: "prev", rules: &["sync_shortcut_blocked_by_delayed", "wake_affine_idle_prev_idle"], ..base },
        WaIdleCase { name: "v6.16 sync, delayed sleeper discounted: pull", preset: "v6.16", this: alone_plus_delayed, prev: busy,
            expect: "this", rules: &["wake_affine_idle_sync_waker_alone_excluding_delayed"], ..base },
        WaIdleCase { name: "v6.16 sync, two delayed sleepers discounted: pull", preset: "v6.16",
            this: alone_plus_2_delayed, prev: busy, prev_cache_affine: false,
            expect: "this", rules: &["wake_affine_idle_sync_waker_alone_excluding_delayed"], ..base },
        WaIdleCase { name: "v6.16 on NO_DELAY_DEQUEUE: nr_delayed ignored", preset: "v6.16", overrides: &["delayed_dequeue=false"],
            this: alone_plus_delayed, prev: busy,
            expect: "none", rules: &["wake_affine_idle_no_decision"], ..base },
        WaIdleCase { name: "v6.16 sync alone, nothing delayed: plain shortcut", preset: "v6.16", this: busy, prev: busy,
            expect: "this", rules: &["wake_affine_idle_sync_waker_alone"], ..base },
        WaIdleCase { name: "Barry, task waker: pull", preset: "mainline+barry", this: busy, prev: busy, prev_cache_affine: false,
            expect: "this", rules: &["wake_affine_idle_sync_waker_alone"], ..base },
        WaIdleCase { name: "Barry, softirq waker, prev idle: stay", preset: "mainline+barry", this: busy, prev: idle, prev_cache_affine: false, in_task: false,
            expect: "prev", rules: &["sync_shortcut_blocked_irq_waker", "wake_affine_idle_prev_idle"], ..base },
        WaIdleCase { name: "Barry, hardirq waker, prev busy: no decision", preset: "mainline+barry", this: busy, prev: busy, in_task: false,
            expect: "none", rules: &["sync_shortcut_blocked_irq_waker", "wake_affine_idle_no_decision"], ..base },
        WaIdleCase { name: "Barry + v6.16: delayed discounted, irq still refused", preset: "mainline+barry",
            this: alone_plus_delayed, prev: busy, in_task: false,
            expect: "none", rules: &["sync_shortcut_blocked_irq_waker", "wake_affine_idle_no_decision"], ..base },
        // v5.10's wake_affine_idle() (fair.c 5.10, between `wake_wide()` and
        // `wake_affine_weight()`) ends `if (sync && nr_running == 1) return this_cpu;
        // return nr_cpumask_bits;`: an idle prev is only kept when the waker's CPU is idle
        // too.  d8fcb81f (v5.11) added `if (available_idle_cpu(prev_cpu)) return prev_cpu;`.
        WaIdleCase { name: "Barry flag on v5.10: blocked, and v5.10 has no idle-prev test", preset: "v5.10", overrides: &["sync_requires_task_waker=true"],
            this: busy, prev: idle, in_task: false,
            expect: "none", rules: &["sync_shortcut_blocked_irq_waker", "wake_affine_idle_no_decision"], ..base },
        WaIdleCase { name: "v5.10, prev idle in the other node: no decision, WA_WEIGHT decides", preset: "v5.10",
            this: busy2, prev: idle, prev_cache_affine: false, sync: false,
            expect: "none", rules: &["wake_affine_idle_no_decision"], ..base },
        WaIdleCase { name: "v5.12, prev idle in the other node: keep prev (d8fcb81f)", preset: "v5.12",
            this: busy2, prev: idle, prev_cache_affine: false, sync: false,
            expect: "prev", rules: &["wake_affine_idle_prev_idle"], ..base },
    ];
    // 2 nodes x 1 LLC x 4 cores: CPU 0 is the waker, 1 shares its LLC, 5 does not.
    let topo = shape(2, 1, 4, 1);
    for c in cases {
        let cfg = Config::from_preset_with(c.preset, c.overrides).unwrap();
        let prev = if c.prev_cache_affine { 1 } else { 5 };
        let mut cpus = all_busy(8);
        cpus[0] = c.this;
        cpus[prev] = c.prev;
        let mut llc = vec![LlcState::default(); topo.nr_llcs()];
        let mut rq = vec![RqWakeIdle::default(); topo.nr_cpus()];
        let mut st = Step::new(&topo, &cfg, &cpus, &mut llc, &mut rq);
        st.this_cpu = 0;
        st.in_task = c.in_task;
        let got = st.wake_affine_idle(0, prev, c.sync);
        let want = match c.expect {
            "this" => Some(0),
            "prev" => Some(prev),
            _ => None,
        };
        assert_eq!(got, want, "{}", c.name);
        assert_eq!(st.chain.names(), c.rules, "{}", c.name);
    }
}

// ------------------------------------------------------------------------------------------
// wake_affine_weight(): arithmetic incl. WA_BIAS
// ------------------------------------------------------------------------------------------

#[test]
fn wake_affine_weight_math() {
    use WeightOutcome::*;
    let base = WeightInputs {
        this_load: 0,
        prev_load: 0,
        this_capacity: 1024,
        prev_capacity: 1024,
        task_load: 0,
        waker_load: 0,
        sync: false,
        imbalance_pct: 117,
        wa_bias: true,
    };
    #[rustfmt::skip]
    let cases: &[(&str, WeightInputs, WeightOutcome)] = &[
        ("sync, waker heavier than its CPU",
            WeightInputs { this_load: 500, waker_load: 800, sync: true, ..base }, SyncWakerHeavier),
        ("sync, waker equal to its CPU: not heavier",
            WeightInputs { this_load: 800, waker_load: 800, prev_load: 0, task_load: 100, sync: true, ..base }, PrevLighter),
        ("prev twice as loaded, 117 bias: 2048*100 vs 1024*108 keeps prev",
            WeightInputs { this_load: 1024, prev_load: 2048, task_load: 1024, ..base }, PrevLighter),
        ("this empty: 1024*100 < 1024*108 pulls",
            WeightInputs { this_load: 0, prev_load: 2048, task_load: 1024, ..base }, ThisLighter),
        // WA_BIAS threshold with imbalance_pct 117 -> factor 108: this_eff = 100*100
        ("117: prev 193 -> 93*108=10044 > 10000",
            WeightInputs { task_load: 100, prev_load: 193, ..base }, ThisLighter),
        ("117: prev 192 -> 92*108=9936 < 10000",
            WeightInputs { task_load: 100, prev_load: 192, ..base }, PrevLighter),
        // SMT domain, imbalance_pct 110 -> factor 105
        ("110: prev 196 -> 96*105=10080 > 10000",
            WeightInputs { task_load: 100, prev_load: 196, imbalance_pct: 110, ..base }, ThisLighter),
        ("110: prev 195 -> 95*105=9975 < 10000",
            WeightInputs { task_load: 100, prev_load: 195, imbalance_pct: 110, ..base }, PrevLighter),
        // no bias: plain comparison
        ("no bias: prev 201 -> 101 > 100",
            WeightInputs { task_load: 100, prev_load: 201, wa_bias: false, ..base }, ThisLighter),
        ("no bias: equal loads keep prev",
            WeightInputs { task_load: 100, prev_load: 200, wa_bias: false, ..base }, PrevLighter),
        // sync breaks the tie towards the waker (prev_eff_load += 1)
        ("no sync tie keeps prev",
            WeightInputs { this_load: 1024, prev_load: 2048, task_load: 1024, wa_bias: false, ..base }, PrevLighter),
        ("sync discounts the waker and breaks the tie",
            WeightInputs { this_load: 1024, waker_load: 1024, prev_load: 2048, task_load: 1024, wa_bias: false, sync: true, ..base }, ThisLighter),
        // capacity scaling: this_eff *= capacity(prev), prev_eff *= capacity(this)
        ("half-capacity waker CPU: 100*1024 vs 200*512 is a tie",
            WeightInputs { task_load: 100, prev_load: 300, this_capacity: 512, wa_bias: false, ..base }, PrevLighter),
        ("half-capacity waker CPU: 100*1024 < 201*512",
            WeightInputs { task_load: 100, prev_load: 301, this_capacity: 512, wa_bias: false, ..base }, ThisLighter),
        ("prev lighter than the task: negative prev_eff keeps prev",
            WeightInputs { task_load: 1024, prev_load: 0, ..base }, PrevLighter),
    ];
    for (name, w, want) in cases {
        assert_eq!(wake_affine_weight_calc(w), *want, "{name}");
    }
}

#[test]
fn wake_affine_weight_uses_domain_imbalance_pct() {
    // 1 LLC x 2 cores x 2 threads: waker CPU 0, prev its SMT sibling 1 (SMT domain, 110),
    // or CPU 2 (LLC domain, 117).  Loads put the decision between the two thresholds:
    // this_eff = 100*100, prev_eff = 94*factor: 105 -> 9870 (keep), 108 -> 10152 (pull).
    let topo = shape(1, 1, 2, 2);
    for (prev, want_pull) in [(1usize, false), (2usize, true)] {
        let mut e = engine_with(&topo, "mainline", &["wa_idle=false"]);
        let mut cpus = all_busy(4);
        cpus[0].load = 0;
        cpus[prev].load = 194;
        let mut t = wakee(1, prev, 4);
        t.load = 100;
        let mut w = WakeCtx::ttwu(0, waker_task(2, 4), 0);
        let d = e.select_cpu(&cpus, &mut t, &mut w);
        assert_eq!(
            d.sis_target,
            Some(if want_pull { 0 } else { prev }),
            "prev {prev}: {:?}",
            d.chain
        );
        assert_eq!(d.counted.nr_wakeups_affine_attempts, 1);
        assert_eq!(d.counted.nr_wakeups_affine, want_pull as u64);
    }
}

#[test]
fn v5_10_idle_prev_falls_through_to_wa_weight_and_may_cross_nodes() {
    // 2 nodes x 4 CPUs.  The waker (CPU 0) runs two tasks with no load on its node; prev
    // (CPU 5, other node) is idle but still carries the wakee's blocked load plus more.  v5.10
    // asks WA_WEIGHT, which pulls across the node; v5.12 keeps the idle prev.
    let topo = shape(2, 1, 4, 1);
    for (preset, want, want_rule) in [
        ("v5.10", 0usize, "wake_affine_weight_this_lighter"),
        ("v5.12", 5usize, "wake_affine_idle_prev_idle"),
    ] {
        let mut e = engine_with(&topo, preset, &["sis=none"]);
        let mut cpus = all_busy(8);
        cpus[0] = snap_nr(2, 0);
        cpus[0].load = 0;
        cpus[5] = CpuSnapshot::idle();
        cpus[5].load = 900;
        let mut t = wakee(1, 5, 8);
        t.load = 100;
        let mut w = WakeCtx::ttwu(0, waker_task(2, 8), 0);
        let d = e.select_cpu(&cpus, &mut t, &mut w);
        assert_eq!(d.sis_target, Some(want), "{preset}: {:?}", d.chain);
        assert!(
            d.chain.names().contains(&want_rule),
            "{preset}: {:?}",
            d.chain
        );
    }
}

#[test]
fn affine_tally_counts_wa_idle_prev_before_39afe5d6() {
    // Waker's CPU and prev both idle and cache-affine: WA_IDLE keeps prev.  v5.10-v6.3
    // (`if (target == nr_cpumask_bits) return prev_cpu;` in wake_affine()) count that as an
    // affine wake-up; 39afe5d6 (v6.4, `if (target != this_cpu)`) does not.
    let topo = shape(1, 1, 4, 1);
    for (preset, overrides, want) in [
        ("v5.10", &[][..], 1u64),
        ("v6.0", &[][..], 1),
        ("v6.5", &[][..], 0),
        ("mainline", &["affine_tally_excludes_prev=false"][..], 1),
    ] {
        let mut e = engine_with(&topo, preset, overrides);
        let cpus = vec![CpuSnapshot::idle(); 4];
        let mut t = wakee(1, 1, 4);
        let mut w = WakeCtx::ttwu(0, waker_task(2, 4), 0);
        let d = e.select_cpu(&cpus, &mut t, &mut w);
        assert!(
            d.chain
                .names()
                .contains(&"wake_affine_idle_both_idle_keep_prev"),
            "{preset}: {:?}",
            d.chain
        );
        assert_eq!(d.sis_target, Some(1), "{preset}");
        assert_eq!(d.counted.nr_wakeups_affine_attempts, 1, "{preset}");
        assert_eq!(d.counted.nr_wakeups_affine, want, "{preset} {overrides:?}");
    }
}

#[test]
fn wake_affine_features_off() {
    let topo = shape(1, 1, 4, 1);
    let mut e = engine_with(&topo, "mainline", &["wa_idle=false", "wa_weight=false"]);
    let mut cpus = all_busy(4);
    cpus[0].nr_running = 1;
    let mut t = wakee(1, 2, 4);
    let mut w = WakeCtx::sync(0, waker_task(2, 4), 0);
    let d = e.select_cpu(&cpus, &mut t, &mut w);
    assert_eq!(d.sis_target, Some(2));
    assert!(d.chain.contains(Rule::WakeAffineNoFeature));
    assert_eq!(d.counted.nr_wakeups_affine_attempts, 1);
    assert_eq!(d.counted.nr_wakeups_affine, 0);
}

// ------------------------------------------------------------------------------------------
// record_wakee() / wake_wide()
// ------------------------------------------------------------------------------------------

#[test]
fn wake_wide_table() {
    let t = |flips| TaskState {
        wakee_flips: flips,
        ..TaskState::new(1, 0, 8)
    };
    // (waker flips, wakee flips, llc size, wide?)
    let cases = [
        (0, 0, 4, false),
        (4, 4, 4, false), // slave >= factor but master < slave * factor
        (16, 4, 4, true), // master == slave * factor
        (4, 16, 4, true), // symmetric
        (15, 4, 4, false),
        (100, 3, 4, false), // slave below the LLC size
        (64, 8, 8, true),
        (63, 8, 8, false),
        (1, 1, 1, true), // one-CPU LLC: any flipping is "wide"
        (0, 0, 1, false),
    ];
    for (m, s, llc, want) in cases {
        assert_eq!(
            wake_wide(&t(m), &t(s), llc),
            want,
            "waker {m} wakee {s} llc {llc}"
        );
    }
}

#[test]
fn record_wakee_flips_and_decay() {
    const S: u64 = 1_000_000_000;
    let mut w = TaskState {
        wakee_flips: 10,
        last_wakee: Some(3),
        ..TaskState::new(1, 0, 8)
    };
    // (now, wakee, flips after, last_wakee after, decay_ts after)
    let steps = [
        (S / 2, 7, 11, 7, 0),            // new wakee: flip; no decay within HZ
        (S, 7, 11, 7, 0),                // exactly HZ later: time_after is strict, no decay
        (S + S / 2, 7, 5, 7, S + S / 2), // > HZ: halve once (11 >> 1), same wakee: no flip
        (2 * S, 8, 6, 8, S + S / 2),     // within HZ of the last decay: flip only
        (10 * S, 8, 3, 8, 10 * S),       // long gap: still halved only once
    ];
    for (now, wakee_pid, flips, last, ts) in steps {
        record_wakee(&mut w, wakee_pid, now);
        assert_eq!(
            (w.wakee_flips, w.last_wakee, w.wakee_flip_decay_ts),
            (flips, Some(last), ts),
            "at {now}"
        );
    }
}

#[test]
fn wake_wide_disables_affine_and_waker_state_is_updated() {
    let topo = shape(2, 1, 2, 1); // llc size 2
    let mut e = engine(&topo, "mainline");
    let mut cpus = all_busy(4);
    cpus[0].nr_running = 1;
    let mut t = TaskState {
        wakee_flips: 2,
        ..wakee(5, 3, 4)
    };
    let waker = TaskState {
        wakee_flips: 3,
        last_wakee: Some(4),
        ..waker_task(9, 4)
    };
    let mut w = WakeCtx::sync(0, waker, 0);
    let d = e.select_cpu(&cpus, &mut t, &mut w);
    // record_wakee first: flips 3 -> 4 (new wakee); then 4 >= 2*2 and 2 >= 2 -> wide.
    assert_eq!(w.waker.wakee_flips, 4);
    assert_eq!(w.waker.last_wakee, Some(5));
    assert!(!d.want_affine);
    assert_eq!(names(&d)[0], "wake_wide");
    assert_eq!(d.sis_target, Some(3));
    assert_eq!(d.counted.nr_wake_wide, 1);
    assert_eq!(d.counted.nr_wakeups_affine_attempts, 0);
}

// ------------------------------------------------------------------------------------------
// select_task_rq_fair(): affine domain walk, slow path, fallbacks
// ------------------------------------------------------------------------------------------

#[test]
fn affine_domain_is_the_first_level_spanning_prev() {
    let topo = shape(2, 2, 2, 2); // 16 CPUs: SMT, LLC, NODE, MACHINE
    let cases = [
        (1, "affine_domain_smt"),
        (2, "affine_domain_llc"),
        (5, "affine_domain_node"),
        (9, "affine_domain_machine"),
    ];
    for (prev, rule) in cases {
        let mut e = engine(&topo, "mainline");
        let cpus = all_busy(16);
        let mut t = wakee(1, prev, 16);
        let mut w = WakeCtx::ttwu(0, waker_task(2, 16), 0);
        let d = e.select_cpu(&cpus, &mut t, &mut w);
        assert_eq!(&names(&d)[..2], &["want_affine", rule], "prev {prev}");
    }
    // far NUMA: the machine level is not wake-affine, so a remote prev has no affine domain
    let mut far = topo.clone();
    far.set_numa_wake_affine(false);
    let mut e = engine(&far, "mainline");
    let mut t = wakee(1, 9, 16);
    let mut w = WakeCtx::sync(0, waker_task(2, 16), 0);
    let d = e.select_cpu(&all_busy(16), &mut t, &mut w);
    assert_eq!(&names(&d)[..2], &["want_affine", "no_affine_domain"]);
    assert_eq!(d.sis_target, Some(9));
    assert_eq!(d.counted.nr_wakeups_affine_attempts, 0);
}

#[test]
fn waker_on_prev_skips_wake_affine() {
    let topo = shape(1, 1, 4, 1);
    let mut e = engine(&topo, "mainline");
    let mut t = wakee(1, 2, 4);
    let mut w = WakeCtx::sync(2, waker_task(2, 4), 0);
    let d = e.select_cpu(&all_idle(4), &mut t, &mut w);
    assert_eq!(
        names(&d),
        [
            "want_affine",
            "affine_domain_llc",
            "waker_is_prev",
            "sis_target_idle"
        ]
    );
    assert_eq!(d.cpu, 2);
    assert_counted(
        &d.counted,
        &[
            ("nr_wakeups_affine_attempts", 0),
            ("nr_wakeups_local", 1),
            ("same_cpu", 1),
        ],
    );
}

#[test]
fn waker_cpu_not_allowed_and_exiting_waker() {
    let topo = shape(1, 1, 4, 1);
    let mut e = engine(&topo, "mainline");
    let mut t = wakee(1, 2, 4);
    t.allowed = CpuSet::from_cpus([1, 2, 3]);
    let mut cpus = all_busy(4);
    cpus[0].nr_running = 1;
    let mut w = WakeCtx::sync(0, waker_task(2, 4), 0);
    w.waker_exiting = true;
    let d = e.select_cpu(&cpus, &mut t, &mut w);
    assert!(!d.sync);
    assert_eq!(
        &names(&d)[..2],
        &["sync_ignored_waker_exiting", "waker_cpu_not_allowed"]
    );
    assert_eq!(
        d.counted.nr_wakeups_sync, 1,
        "schedstat counts WF_SYNC even when voided"
    );
}

#[test]
fn pinned_tasks_and_fallback() {
    let topo = shape(2, 1, 4, 1);
    let mut e = engine(&topo, "mainline");
    let mut t = wakee(1, 0, 8);
    t.allowed = CpuSet::single(6);
    let mut w = WakeCtx::sync(0, waker_task(2, 8), 0);
    let d = e.select_cpu(&all_idle(8), &mut t, &mut w);
    assert_eq!((d.cpu, d.path), (6, Path::SingleCpu));
    assert_eq!(names(&d), ["single_allowed_cpu"]);
    assert_eq!(w.waker.wakee_flips, 0, "the class hook never ran");
    // prev no longer allowed (affinity changed while asleep), everything idle: SIS returns
    // prev, select_fallback_rq() picks an allowed CPU of prev's node first.
    let mut t = wakee(1, 1, 8);
    t.allowed = CpuSet::from_cpus([3, 4, 7]);
    let mut w = WakeCtx::ttwu(5, waker_task(2, 8), 0);
    let d = e.select_cpu(&all_idle(8), &mut t, &mut w);
    assert_eq!(d.cpu, 3);
    assert_eq!(d.chain.last(), Some(Rule::FallbackNotAllowed));
    assert_eq!(d.counted.nr_fallback_not_allowed, 1);
    // offline prev
    let mut e = engine(&topo, "mainline");
    e.set_online(2, false).unwrap();
    let mut t = wakee(1, 2, 8);
    let d = e.select_cpu(
        &all_busy(8),
        &mut t,
        &mut WakeCtx::ttwu(2, waker_task(2, 8), 0),
    );
    assert!(e.topology().is_online(d.cpu));
    assert_ne!(d.cpu, 2);
}

#[test]
fn bogus_ids_never_panic() {
    let topo = shape(1, 1, 4, 2);
    let mut e = engine(&topo, "v5.10");
    for (prev, waker_cpu, recent) in [
        (100, 0, Some(200)),
        (0, 100, Some(3)),
        (900, 900, None),
        (3, 2, Some(2000)),
    ] {
        let mut t = wakee(1, prev, 8);
        t.recent_used_cpu = recent;
        let mut w = WakeCtx::sync(waker_cpu, waker_task(2, 8), 0);
        let d = e.select_cpu(&all_busy(3), &mut t, &mut w); // short snapshot too
        assert!(d.cpu < 8 && t.allowed.contains(d.cpu), "{d:?}");
        let n = e.newidle_pull(
            prev,
            &all_busy(3),
            &[PullCandidate {
                pid: 1,
                src_cpu: 5000,
                allowed: CpuSet::new(),
                load: 0,
                cache_hot: false,
            }],
        );
        assert!(n.pulled.is_none());
    }
}

// ------------------------------------------------------------------------------------------
// select_idle_sibling(): order of the checks
// ------------------------------------------------------------------------------------------

#[test]
fn select_idle_sibling_order() {
    // 1 LLC x 4 cores x 2 threads; waker on CPU 2, wakee prev CPU 4.
    let topo = shape(1, 1, 4, 2);
    struct Case {
        name: &'static str,
        preset: &'static str,
        cpus: fn(&mut Vec<CpuSnapshot>),
        waker_kthread: bool,
        waker_ctx: WakerContext,
        waker_cpu: usize,
        sync: bool,
        recent: Option<usize>,
        want: usize,
        tail: &'static [&'static str],
    }
    #[rustfmt::skip]
    let cases = [
        Case { name: "target (prev) idle", preset: "mainline", cpus: |c| c[4] = CpuSnapshot::idle(),
            waker_kthread: false, waker_ctx: WakerContext::Task, waker_cpu: 2, sync: false, recent: Some(6), want: 4,
            tail: &["wake_affine_idle_prev_idle", "sis_target_idle"] },
        Case { name: "target runs only SCHED_IDLE tasks", preset: "mainline",
            cpus: |c| c[4] = CpuSnapshot { sched_idle_only: true, ..CpuSnapshot::busy(1) },
            waker_kthread: false, waker_ctx: WakerContext::Task, waker_cpu: 2, sync: false, recent: None, want: 4,
            tail: &["wake_affine_weight_prev_lighter", "sis_target_idle"] },
        Case { name: "sync pull to a busy waker CPU, prev idle and affine", preset: "mainline",
            cpus: |c| { c[2].nr_running = 1; c[4] = CpuSnapshot::idle(); },
            waker_kthread: false, waker_ctx: WakerContext::Task, waker_cpu: 2, sync: true, recent: None, want: 4,
            tail: &["wake_affine_idle_sync_waker_alone", "sis_prev_idle"] },
        Case { name: "per-CPU kthread on prev stacks (task context)", preset: "mainline",
            cpus: |c| c[7] = CpuSnapshot::idle(),
            waker_kthread: true, waker_ctx: WakerContext::Task, waker_cpu: 4, sync: false, recent: Some(7), want: 4,
            tail: &["waker_is_prev", "sis_per_cpu_kthread_stacking"] },
        Case { name: "per-CPU kthread from hardirq: 8b4e74cc refuses, recent wins", preset: "mainline",
            cpus: |c| c[7] = CpuSnapshot::idle(),
            waker_kthread: true, waker_ctx: WakerContext::Hardirq, waker_cpu: 4, sync: false, recent: Some(7), want: 7,
            tail: &["waker_is_prev", "sis_per_cpu_kthread_stacking_blocked_irq", "sis_recent_used_hit"] },
        Case { name: "per-CPU kthread from hardirq before 8b4e74cc: stacks", preset: "v5.15",
            cpus: |c| c[7] = CpuSnapshot::idle(),
            waker_kthread: true, waker_ctx: WakerContext::Hardirq, waker_cpu: 4, sync: false, recent: Some(7), want: 4,
            tail: &["waker_is_prev", "sis_per_cpu_kthread_stacking"] },
        Case { name: "recent used before the LLC scan", preset: "mainline",
            cpus: |c| { c[6] = CpuSnapshot::idle(); c[7] = CpuSnapshot::idle(); c[1] = CpuSnapshot::idle(); },
            waker_kthread: false, waker_ctx: WakerContext::Task, waker_cpu: 2, sync: false, recent: Some(1), want: 1,
            tail: &["wake_affine_weight_prev_lighter", "sis_recent_used_hit"] },
        Case { name: "LLC scan finds the idle core", preset: "mainline",
            cpus: |c| { c[6] = CpuSnapshot::idle(); c[7] = CpuSnapshot::idle(); },
            waker_kthread: false, waker_ctx: WakerContext::Task, waker_cpu: 2, sync: false, recent: Some(3), want: 6,
            tail: &["wake_affine_weight_prev_lighter", "sis_recent_used_miss", "sis_idle_core"] },
        Case { name: "nothing idle: target", preset: "mainline", cpus: |_| {},
            waker_kthread: false, waker_ctx: WakerContext::Task, waker_cpu: 2, sync: false, recent: None, want: 4,
            tail: &["wake_affine_weight_prev_lighter", "sis_fallback_target"] },
    ];
    for c in cases {
        let mut e = engine_with(&topo, c.preset, &["sis=none"]);
        let mut cpus = all_busy(8);
        (c.cpus)(&mut cpus);
        let mut t = wakee(1, 4, 8);
        t.recent_used_cpu = c.recent;
        let mut waker = waker_task(2, 8);
        waker.is_per_cpu_kthread = c.waker_kthread;
        let mut w = if c.sync {
            WakeCtx::sync(c.waker_cpu, waker, 0)
        } else {
            WakeCtx::ttwu(c.waker_cpu, waker, 0)
        };
        w.waker_context = c.waker_ctx;
        let d = e.select_cpu(&cpus, &mut t, &mut w);
        assert_eq!(d.cpu, c.want, "{}: {:?}", c.name, d.chain);
        let n = names(&d);
        assert!(
            n.ends_with(c.tail),
            "{}: chain {:?} should end with {:?}",
            c.name,
            n,
            c.tail
        );
        assert!(!d.chain.truncated());
    }
}

// ------------------------------------------------------------------------------------------
// recent_used_cpu: state updates per mode
// ------------------------------------------------------------------------------------------

#[test]
fn recent_used_state_updates_per_mode() {
    // 1 LLC x 8 cores (no SMT).  Waker on CPU 0, wakee prev = 2, recent = 5.
    // "hit": recent idle; "miss": recent busy; "early": prev (the target) idle, so
    // select_idle_sibling returns before the recent block.
    let topo = shape(1, 1, 8, 1);
    struct Case {
        mode: &'static str,
        scenario: &'static str,
        wide: bool,
        want_cpu: usize,
        want_task_recent: Option<usize>,
        want_waker_recent: Option<usize>,
        rule: Option<&'static str>,
    }
    let c = |mode, scenario, wide, want_cpu, task, waker, rule| Case {
        mode,
        scenario,
        wide,
        want_cpu,
        want_task_recent: task,
        want_waker_recent: waker,
        rule,
    };
    let waker_initial = Some(7);
    #[rustfmt::skip]
    let cases = [
        // variant A (v5.10): write prev only on a hit; the waker records its CPU (0)
        c("v5.10", "hit", false, 5, Some(2), Some(0), Some("sis_recent_used_hit")),
        c("v5.10", "miss", false, 2, Some(5), Some(0), Some("sis_recent_used_miss")),
        c("v5.10", "early", false, 2, Some(5), Some(0), None),
        c("v5.10", "hit", true, 5, Some(2), waker_initial, Some("sis_recent_used_hit")),
        // variant B' (prev): prev always written when the block is reached; no waker write
        c("prev", "hit", false, 5, Some(2), waker_initial, Some("sis_recent_used_hit")),
        c("prev", "miss", false, 2, Some(2), waker_initial, Some("sis_recent_used_miss")),
        c("prev", "early", false, 2, Some(5), waker_initial, None),
        // variant D (prev-fixed): same state updates
        c("prev-fixed", "hit", false, 5, Some(2), waker_initial, Some("sis_recent_used_hit")),
        c("prev-fixed", "miss", false, 2, Some(2), waker_initial, Some("sis_recent_used_miss")),
        // variant C (search-target): prev written, recent becomes the target (idle -> scan
        // from it finds it), nothing returned directly
        c("search-target", "hit", false, 5, Some(2), waker_initial, Some("sis_recent_used_becomes_target")),
        c("search-target", "miss", false, 2, Some(2), waker_initial, Some("sis_recent_used_miss")),
        // off: no check and no writes; the LLC scan from prev 2 reaches idle CPU 5 anyway
        c("off", "hit", false, 5, Some(5), waker_initial, None),
    ];
    for k in cases {
        let mut e = engine_with(
            &topo,
            "v5.12",
            &[&format!("recent_used={}", k.mode), "sis=none"],
        );
        let mut cpus = all_busy(8);
        match k.scenario {
            "hit" => cpus[5] = CpuSnapshot::idle(),
            "early" => cpus[2] = CpuSnapshot::idle(),
            _ => {}
        }
        let mut t = wakee(1, 2, 8);
        t.recent_used_cpu = Some(5);
        if k.wide {
            t.wakee_flips = 100;
        }
        let mut waker = waker_task(9, 8);
        waker.recent_used_cpu = waker_initial;
        if k.wide {
            waker.wakee_flips = 1000;
        }
        let mut w = WakeCtx::ttwu(0, waker, 0);
        let d = e.select_cpu(&cpus, &mut t, &mut w);
        let tag = format!("{} {} wide={}", k.mode, k.scenario, k.wide);
        assert_eq!(d.cpu, k.want_cpu, "{tag}: {:?}", d.chain);
        assert_eq!(
            t.recent_used_cpu, k.want_task_recent,
            "{tag}: wakee's recent_used_cpu"
        );
        assert_eq!(
            w.waker.recent_used_cpu, k.want_waker_recent,
            "{tag}: waker's recent_used_cpu"
        );
        if let Some(r) = k.rule {
            assert!(names(&d).contains(&r), "{tag}: {:?}", d.chain);
        }
    }
}

#[test]
fn recent_used_requires_a_distinct_cache_affine_cpu() {
    // 2 LLCs of 4: recent in the other LLC is never used, and neither it nor a recent equal
    // to prev is an attempt (Mel's schedstat counts a miss only for an eligible CPU); a busy
    // recent in prev's LLC is.
    let topo = shape(1, 2, 4, 1);
    for (recent, want_miss) in [(5usize, false), (2, false), (3, true)] {
        let mut e = engine_with(&topo, "v6.5", &["sis=none"]);
        let mut cpus = all_busy(8);
        cpus[5] = CpuSnapshot::idle();
        let mut t = wakee(1, 2, 8);
        t.recent_used_cpu = Some(recent);
        let d = e.select_cpu(&cpus, &mut t, &mut WakeCtx::ttwu(0, waker_task(2, 8), 0));
        assert_eq!(d.cpu, 2, "recent {recent}: {:?}", d.chain);
        assert_eq!(d.counted.sis_recent_used_miss, want_miss as u64);
        assert_eq!(d.counted.sis_recent_used_hit, 0);
    }
}

// ------------------------------------------------------------------------------------------
// SIS_PROP / SIS_UTIL
// ------------------------------------------------------------------------------------------

/// LLC 0 with no idle core hinted and SIS_PROP's average scan cost at `ns`.
fn set_scan_cost(e: &mut Engine, ns: u64) {
    e.set_llc_state(
        0,
        LlcState {
            has_idle_cores: false,
            avg_scan_cost_ns: ns,
            ..LlcState::default()
        },
    );
}

/// LLC 0 with no idle core hinted and SIS_UTIL's depth as the kernel stored it.
fn set_stored_nr_idle_scan(e: &mut Engine, nr: u64) {
    e.set_llc_state(
        0,
        LlcState {
            has_idle_cores: false,
            nr_idle_scan: Some(nr),
            ..LlcState::default()
        },
    );
}

#[test]
fn sis_prop_formula() {
    // (avg_idle_ns, avg_scan_cost_ns, llc_weight, nr)
    // avg_idle as the version reads it: avg_idle / 512 (v5.10) or wake_avg_idle (v5.14).
    let cases = [
        (0, 0, 16, 4),        // nothing known: the floor of 4
        (10, 99, 16, 4),      // span_avg 160 <= 4*100
        (100, 9, 16, 160),    // 1600 / 10
        (100, 0, 16, 1600),   // 1600 / 1
        (25, 99, 16, 4),      // 400 is not > 400
        (26, 99, 16, 4),      // 416 / 100 = 4
        (1000, 49, 64, 1280), // 64000 / 50
    ];
    for (idle, cost, w, nr) in cases {
        assert_eq!(
            sis_prop_nr(idle, cost, w),
            nr,
            "avg_idle {idle} cost {cost} weight {w}"
        );
    }
    let mut a = 0;
    for (sample, want) in [(800, 100), (800, 187), (0, 164), (164, 164)] {
        update_avg(&mut a, sample);
        assert_eq!(a, want);
    }
}

/// `avg_scan_cost_ns` reaches the engine from scenario and trace files (`llc_state`), so
/// any u64 must work: the kernel's `avg_cost + 1` wrapped u64::MAX to 0 and divided by zero.
#[test]
fn sis_prop_nr_takes_any_scan_cost() {
    for (idle, cost, w, nr) in [
        (100, u64::MAX, 16, 4),
        (u64::MAX, u64::MAX, 1024, 4),
        (u64::MAX, u64::MAX - 1, u64::MAX, 4),
        (u64::MAX, 0, u64::MAX, u64::MAX),
        (0, u64::MAX, 0, 4),
    ] {
        assert_eq!(
            sis_prop_nr(idle, cost, w),
            nr,
            "avg_idle {idle} cost {cost} weight {w}"
        );
    }
}

#[test]
fn sis_prop_nr4_examines_at_most_three_cpus() {
    // One LLC of 16 CPUs, no SMT; the waker never idles (avg_idle 0), so nr = 4.
    let topo = shape(1, 1, 16, 1);
    for (idle_cpu, want_cpu, want_scanned, limited) in [
        (None, 0, 3, true),
        (Some(2), 2, 3, false),
        (Some(3), 0, 3, true),
        (Some(1), 1, 2, false),
    ] {
        let mut e = engine(&topo, "v5.10");
        let mut cpus = all_busy(16);
        if let Some(i) = idle_cpu {
            cpus[i] = CpuSnapshot::idle();
        }
        let mut t = wakee(1, 0, 16);
        let d = e.select_cpu(&cpus, &mut t, &mut WakeCtx::ttwu(0, waker_task(2, 16), 0));
        assert_eq!(d.sis_nr, Some(4));
        assert_eq!(
            (d.cpu, d.scanned),
            (want_cpu, want_scanned),
            "idle {idle_cpu:?}: {:?}",
            d.chain
        );
        assert_eq!(d.chain.contains(Rule::SisScanLimitReached), limited);
        // the cost average moves only after a scan that ran to its end
        let cost = e.llc_states()[0].avg_scan_cost_ns;
        if limited {
            assert_eq!(cost, 0);
        } else {
            let cfg = e.config();
            let sample =
                cfg.sis_prop_cost_fixed_ns + cfg.sis_prop_cost_per_cpu_ns * want_scanned as u64;
            assert_eq!(cost, sample / 8);
        }
    }
}

#[test]
fn wake_avg_idle_restarts_on_idle_exit_ages_per_jiffy_and_pays_for_scans() {
    // v5.14-v6.6 (94aafc3e).  core.c ttwu_do_wakeup(): `rq->wake_stamp = jiffies;
    // rq->wake_avg_idle = rq->avg_idle / 2;`.  fair.c select_idle_cpu(): `while
    // (this_rq->wake_stamp < now && this_rq->wake_avg_idle) { this_rq->wake_stamp++;
    // this_rq->wake_avg_idle >>= 1; }`, and after the scan `this_rq->wake_avg_idle -=
    // min(this_rq->wake_avg_idle, time);`.  HZ=250: a jiffy is 4 ms.
    let topo = shape(1, 1, 4, 1);
    let cfg = Config::from_preset("v5.14").unwrap();
    let mut llc = vec![LlcState::default(); 1];
    let mut rq = vec![RqWakeIdle::default(); 4];
    let mut cpus = all_busy(4);
    cpus[0].avg_idle_ns = 1_000_000;
    cpus[0].idle_exit_ns = 40_000_000; // jiffy 10
    let sample = cfg.sis_prop_cost_fixed_ns + 3 * cfg.sis_prop_cost_per_cpu_ns;
    {
        let mut st = Step::new(&topo, &cfg, &cpus, &mut llc, &mut rq);
        st.this_cpu = 0;
        st.now_ns = 43_000_000; // still jiffy 10
        assert_eq!(st.wake_avg_idle(0), 500_000);
        st.update_scan_cost(3);
        assert_eq!(st.wake_avg_idle(0), 500_000 - sample);
        st.now_ns = 52_000_000; // jiffy 13: three halvings
        assert_eq!(st.wake_avg_idle(0), (500_000 - sample) >> 3);
    }
    // The CPU idles and is woken again: the estimate restarts from the new avg_idle.
    cpus[0].avg_idle_ns = 600_000;
    cpus[0].idle_exit_ns = 60_000_000;
    let mut st = Step::new(&topo, &cfg, &cpus, &mut llc, &mut rq);
    st.this_cpu = 0;
    st.now_ns = 61_000_000;
    assert_eq!(st.wake_avg_idle(0), 300_000);
    // Up to v5.13 the scan pays nothing from it.
    let old = Config::from_preset("v5.13").unwrap();
    let mut rq_old = vec![RqWakeIdle::default(); 4];
    let mut st = Step::new(&topo, &old, &cpus, &mut llc, &mut rq_old);
    st.this_cpu = 0;
    st.update_scan_cost(3);
    assert_eq!(rq_old[0], RqWakeIdle::default());
}

#[test]
fn sis_prop_v5_14_scans_deeper_than_v5_13_from_the_same_idle_history() {
    // One LLC of 16 CPUs, only CPU 15 idle; the waker (CPU 0) averages 1 ms idle and just
    // left idle; scans have cost 10 us on average.  v5.13: 16 * (1e6 / 512) = 31248 is not
    // above 4 * 10001, nr = 4.  v5.14: 16 * 5e5 / 10001 = 799, the whole LLC.
    let topo = shape(1, 1, 16, 1);
    let mut cpus = all_busy(16);
    cpus[0].avg_idle_ns = 1_000_000;
    cpus[0].idle_exit_ns = 1_000_000_000;
    cpus[15] = CpuSnapshot::idle();
    for (preset, want_nr, want_cpu) in [("v5.13", 4, 1usize), ("v5.14", 799, 15)] {
        let mut e = engine(&topo, preset);
        e.set_llc_state(
            0,
            LlcState {
                avg_scan_cost_ns: 10_000,
                ..LlcState::default()
            },
        );
        let mut t = wakee(1, 1, 16);
        let mut w = WakeCtx::ttwu(0, waker_task(2, 16), 1_001_000_000);
        let d = e.select_cpu(&cpus, &mut t, &mut w);
        assert_eq!(d.sis_nr, Some(want_nr), "{preset}: {:?}", d.chain);
        assert_eq!(d.cpu, want_cpu, "{preset}: {:?}", d.chain);
    }
}

#[test]
fn sis_prop_depth_follows_avg_idle_and_cost() {
    let topo = shape(1, 1, 16, 1);
    let mut e = engine(&topo, "v5.10");
    let mut cpus = all_busy(16);
    cpus[0].avg_idle_ns = 512 * 100; // waker idles a lot: nr = 16*100/1 = 1600
    cpus[12] = CpuSnapshot::idle();
    let mut t = wakee(1, 0, 16);
    let d = e.select_cpu(&cpus, &mut t, &mut WakeCtx::ttwu(0, waker_task(2, 16), 0));
    assert_eq!((d.cpu, d.sis_nr, d.scanned), (12, Some(1600), 13));
    // a high average scan cost shrinks the budget back to the floor
    set_scan_cost(&mut e, 10_000);
    let d = e.select_cpu(&cpus, &mut t, &mut WakeCtx::ttwu(0, waker_task(2, 16), 0));
    assert_eq!((d.cpu, d.sis_nr), (0, Some(4)));
}

#[test]
fn sis_util_formula_and_limits() {
    // (sum_util, llc_weight, pct, nr_idle_scan)
    let cases = [
        (0, 16, 117, 16),        // idle LLC: scan everything
        (16 * 1024, 16, 117, 0), // saturated: nothing
        (16 * 875, 16, 117, 0),  // ~85%: 875^2*117^2/(10000*1024) = 1023 -> y = 1 -> 0
        (16 * 512, 16, 117, 10), // 512^2*13689/10240000 = 350 -> y 674 -> 10
        (16 * 256, 16, 117, 14), // 87 -> 937 -> 14
        (8 * 512, 8, 117, 5),
        (0, 0, 117, 0),
    ];
    for (sum, w, pct, want) in cases {
        assert_eq!(
            sis_util_nr_idle_scan(sum, w, pct),
            want,
            "sum_util {sum} weight {w}"
        );
    }
    // Half-utilised LLC of 16: nr = 10 + 1 -> at most 10 CPUs examined
    let topo = shape(1, 1, 16, 1);
    let mut e = engine_with(&topo, "mainline", &["scan_skips_target=false"]);
    let mut cpus: Vec<CpuSnapshot> = (0..16)
        .map(|_| CpuSnapshot {
            util: 512,
            ..CpuSnapshot::busy(1)
        })
        .collect();
    let mut t = wakee(1, 0, 16);
    let d = e.select_cpu(&cpus, &mut t, &mut WakeCtx::ttwu(0, waker_task(2, 16), 0));
    assert_eq!((d.sis_nr, d.scanned), (Some(11), 10));
    assert!(d.chain.contains(Rule::SisScanLimitReached));
    // overloaded: no scan at all, even with an idle CPU present
    for c in cpus.iter_mut() {
        c.util = 1024;
    }
    cpus[9] = CpuSnapshot {
        util: 1024,
        ..CpuSnapshot::idle()
    };
    let d = e.select_cpu(&cpus, &mut t, &mut WakeCtx::ttwu(0, waker_task(2, 16), 0));
    assert_eq!((d.cpu, d.scanned, d.sis_nr), (0, 0, Some(1)));
    assert!(d.chain.contains(Rule::SisUtilOverloaded));
    assert_eq!(d.counted.sis_util_overloaded, 1);
}

/// The kernel stores `sd_llc_shared->nr_idle_scan` at load balancing and `select_idle_cpu()`
/// reads the stored value (v6.0+, 70fb5ccf): where a replay knows it, it rules over the
/// estimate from this wake-up's utilisation, in both directions.
#[test]
fn stored_nr_idle_scan_overrides_the_util_estimate() {
    let topo = shape(1, 1, 16, 1);
    let mut cpus: Vec<CpuSnapshot> = (0..16)
        .map(|_| CpuSnapshot {
            util: 1024,
            ..CpuSnapshot::busy(1)
        })
        .collect();
    cpus[9] = CpuSnapshot {
        util: 1024,
        ..CpuSnapshot::idle()
    };
    // The snapshot says overloaded; the stored depth (2, scan up to 2 CPUs + 1) says scan.
    let mut e = engine_with(&topo, "mainline", &["scan_skips_target=false"]);
    let mut t = wakee(1, 8, 16);
    set_stored_nr_idle_scan(&mut e, 2);
    let d = e.select_cpu(&cpus, &mut t, &mut WakeCtx::ttwu(8, waker_task(2, 16), 0));
    assert_eq!((d.cpu, d.sis_nr), (9, Some(3)), "{:?}", d.chain);
    // An idle LLC by the snapshot, overloaded by the stored value: no scan.
    let idle: Vec<CpuSnapshot> = (0..16).map(|_| CpuSnapshot::idle()).collect();
    let mut busy8 = idle.clone();
    busy8[8] = CpuSnapshot::busy(1);
    set_stored_nr_idle_scan(&mut e, 0);
    let mut t = wakee(1, 8, 16);
    let d = e.select_cpu(&busy8, &mut t, &mut WakeCtx::ttwu(8, waker_task(2, 16), 0));
    assert_eq!(
        (d.cpu, d.scanned, d.sis_nr),
        (8, 0, Some(1)),
        "{:?}",
        d.chain
    );
    assert!(d.chain.contains(Rule::SisUtilOverloaded));
    // A trace may carry any u64: the depth saturates instead of wrapping past zero.
    set_stored_nr_idle_scan(&mut e, u64::MAX);
    let mut t = wakee(1, 8, 16);
    let d = e.select_cpu(&busy8, &mut t, &mut WakeCtx::ttwu(8, waker_task(2, 16), 0));
    assert_eq!((d.cpu, d.sis_nr), (9, Some(u64::MAX)), "{:?}", d.chain);
}

#[test]
fn scan_skips_target_starts_after_it() {
    let topo = shape(1, 1, 8, 1);
    // target 3 busy; idle CPUs 2 and 6. From 3 the wrap visits 3,4,5,6 -> 6; from 4: 4,5,6.
    for (skip, want_scanned) in [(false, 4u32), (true, 3)] {
        let mut e = engine_with(
            &topo,
            "v6.16",
            &[&format!("scan_skips_target={skip}"), "sis=none"],
        );
        let mut cpus = all_busy(8);
        cpus[2] = CpuSnapshot::idle();
        cpus[6] = CpuSnapshot::idle();
        let mut t = wakee(1, 3, 8);
        let d = e.select_cpu(&cpus, &mut t, &mut WakeCtx::ttwu(3, waker_task(2, 8), 0));
        assert_eq!((d.cpu, d.scanned), (6, want_scanned), "skip={skip}");
    }
}

// ------------------------------------------------------------------------------------------
// three-scan vs single pass, idle candidate, select_idle_smt
// ------------------------------------------------------------------------------------------

/// 1 LLC x 4 cores x 2 threads.  Every core has a busy sibling; CPU 3 (core 1) is the only
/// idle CPU.  The LLC's idle-core hint is stale (set).
fn no_idle_core_one_idle_cpu() -> Vec<CpuSnapshot> {
    let mut cpus = all_busy(8);
    cpus[3] = CpuSnapshot::idle();
    cpus
}

#[test]
fn three_scan_vs_single_pass_idle_candidate() {
    let topo = shape(1, 1, 4, 2);
    // (preset, overrides, rule, scanned, hint after)
    let cases: [(&str, &[&str], &str, u32); 3] = [
        // v5.10: the core scan breaks at each core's first busy sibling (4 CPUs), discards
        // everything, then select_idle_cpu walks 0,1,2,3 (4 CPUs).
        ("v5.10", &["sis=none"], "sis_idle_cpu", 8),
        // Mel's v2 patch 4 on v5.10: the core scan keeps CPU 3 as candidate: core 0 (2),
        // core 1 (2), then cores 2 and 3 stop at their first busy sibling (1 each).
        (
            "v5.10",
            &["sis=none", "idle_candidate=true"],
            "sis_idle_candidate",
            6,
        ),
        // 9fe1f127 single pass: same walk, candidate returned.
        ("v5.12", &["sis=none"], "sis_idle_candidate", 6),
    ];
    for (preset, ov, rule, scanned) in cases {
        let mut e = engine_with(&topo, preset, ov);
        assert!(e.llc_states()[0].has_idle_cores);
        let mut t = wakee(1, 0, 8);
        let d = e.select_cpu(
            &no_idle_core_one_idle_cpu(),
            &mut t,
            &mut WakeCtx::ttwu(0, waker_task(2, 8), 0),
        );
        assert_eq!(d.cpu, 3, "{preset} {ov:?}: {:?}", d.chain);
        assert_eq!(
            d.chain.last().map(Rule::name),
            Some(rule),
            "{preset} {ov:?}"
        );
        assert_eq!(d.scanned, scanned, "{preset} {ov:?}");
        assert!(
            !e.llc_states()[0].has_idle_cores,
            "{preset}: failed core search clears the hint"
        );
        // with the hint cleared, the next wake-up goes straight to the idle-CPU search
        let d = e.select_cpu(
            &no_idle_core_one_idle_cpu(),
            &mut t,
            &mut WakeCtx::ttwu(0, waker_task(2, 8), 0),
        );
        assert_eq!(d.cpu, 3);
        assert!(
            !d.chain.contains(Rule::SisIdleCandidate),
            "{preset}: {:?}",
            d.chain
        );
    }
}

#[test]
fn whole_idle_core_preferred_by_both_forms() {
    let topo = shape(1, 1, 4, 2);
    for (preset, ov) in [
        ("v5.10", &["sis=none"][..]),
        ("v5.12", &["sis=none"][..]),
        ("mainline", &[][..]),
    ] {
        let mut e = engine_with(&topo, preset, ov);
        let mut cpus = no_idle_core_one_idle_cpu();
        cpus[6] = CpuSnapshot::idle();
        cpus[7] = CpuSnapshot::idle();
        let mut t = wakee(1, 0, 8);
        let d = e.select_cpu(&cpus, &mut t, &mut WakeCtx::ttwu(0, waker_task(2, 8), 0));
        assert_eq!(d.cpu, 6, "{preset}: {:?}", d.chain);
        assert_eq!(d.chain.last(), Some(Rule::SisIdleCore));
        assert!(
            e.llc_states()[0].has_idle_cores,
            "a successful core search keeps the hint"
        );
    }
}

#[test]
fn v5_10_select_idle_smt_target_is_the_third_scan() {
    // 1 LLC x 4 cores x 2 threads, v5.10 with SIS_PROP's floor budget (nr = 4: at most 3
    // CPUs) and no idle core hinted.  Target (= prev = waker CPU) is 3; its sibling 2 is the
    // only idle CPU.  The wrap from 3 examines 3, 4, 5 and runs out of budget before it gets
    // round to 2, so the third scan, select_idle_smt(target), finds it.
    let topo = shape(1, 1, 4, 2);
    let mut e = engine(&topo, "v5.10");
    set_scan_cost(&mut e, 0);
    let mut cpus = all_busy(8);
    cpus[2] = CpuSnapshot::idle();
    let mut t = wakee(1, 3, 8);
    let d = e.select_cpu(&cpus, &mut t, &mut WakeCtx::ttwu(3, waker_task(2, 8), 0));
    assert_eq!(d.cpu, 2, "{:?}", d.chain);
    let n = names(&d);
    assert_eq!(
        n[n.len() - 2..],
        ["sis_scan_limit_reached", "sis_smt_target_sibling"]
    );
    assert_eq!(d.counted.sis_smt_target_hit, 1);
    // The single pass has no such third scan (6cd56ef1 removed it): the wake-up stays on
    // the busy target.
    let mut e = engine(&topo, "v5.12");
    set_scan_cost(&mut e, 0);
    let d = e.select_cpu(&cpus, &mut t, &mut WakeCtx::ttwu(3, waker_task(2, 8), 0));
    assert_eq!(
        (d.cpu, d.chain.last()),
        (3, Some(Rule::SisFallbackTarget)),
        "{:?}",
        d.chain
    );
}

#[test]
fn select_idle_smt_prev_v5_13() {
    // 1 LLC x 4 cores x 2 threads.  Sync pull to the waker's CPU 2 (alone, busy); prev 0
    // busy with its sibling 1 idle; CPU 3 idle as well; no whole idle core.
    let topo = shape(1, 1, 4, 2);
    let mut cpus = all_busy(8);
    cpus[2].nr_running = 1;
    cpus[1] = CpuSnapshot::idle();
    cpus[3] = CpuSnapshot::idle();
    // (preset, want, last rule)
    for (preset, want, rule) in [
        ("v5.12", 3, Rule::SisIdleCpu),
        ("v5.13", 1, Rule::SisSmtPrevSibling),
        ("mainline", 1, Rule::SisSmtPrevSibling),
    ] {
        let mut e = engine_with(&topo, preset, &["sis=none"]);
        e.sync_idle_core_hints(&cpus);
        assert!(!e.llc_states()[0].has_idle_cores);
        let mut t = wakee(1, 0, 8);
        let d = e.select_cpu(&cpus, &mut t, &mut WakeCtx::sync(2, waker_task(2, 8), 0));
        assert_eq!(d.sis_target, Some(2), "{preset}");
        assert_eq!(
            (d.cpu, d.chain.last()),
            (want, Some(rule)),
            "{preset}: {:?}",
            d.chain
        );
    }
    // with an idle core hinted, select_idle_smt(prev) is skipped for the core search
    let mut e = engine_with(&topo, "mainline", &["sis=none"]);
    let mut cpus2 = cpus.clone();
    cpus2[6] = CpuSnapshot::idle();
    cpus2[7] = CpuSnapshot::idle();
    e.sync_idle_core_hints(&cpus2);
    let mut t = wakee(1, 0, 8);
    let d = e.select_cpu(&cpus2, &mut t, &mut WakeCtx::sync(2, waker_task(2, 8), 0));
    assert_eq!((d.cpu, d.chain.last()), (6, Some(Rule::SisIdleCore)));
}

#[test]
fn idle_core_hint_tracking() {
    let topo = shape(1, 2, 2, 2);
    let mut e = engine(&topo, "mainline");
    let mut cpus = all_busy(8);
    e.sync_idle_core_hints(&cpus);
    assert!(e.llc_states().iter().all(|l| !l.has_idle_cores));
    cpus[4] = CpuSnapshot::idle();
    e.on_cpu_idle(4, &cpus);
    assert!(!e.llc_states()[1].has_idle_cores, "sibling 5 still busy");
    cpus[5] = CpuSnapshot::idle();
    e.on_cpu_idle(5, &cpus);
    assert!(e.llc_states()[1].has_idle_cores && !e.llc_states()[0].has_idle_cores);
}

// ------------------------------------------------------------------------------------------
// counters and decision bookkeeping
// ------------------------------------------------------------------------------------------

#[test]
fn wakeup_counters_and_distance() {
    let topo = shape(2, 2, 2, 2);
    let mut e = engine(&topo, "mainline");
    // prev 9 (node 1) idle, plain wake-up from CPU 0: stays on prev, remote wake-up.
    let mut cpus = all_busy(16);
    cpus[9] = CpuSnapshot::idle();
    let mut t = wakee(1, 9, 16);
    let mut w = WakeCtx::ttwu(0, waker_task(2, 16), 0);
    w.wake_flags |= WAKE_SYNC;
    w.waker_exiting = true; // WF_SYNC counted, but voided: no sync pull
    let d = e.select_cpu(&cpus, &mut t, &mut w);
    assert_eq!(d.cpu, 9);
    assert_counted(
        &d.counted,
        &[
            ("nr_wakeups", 1),
            ("nr_wakeups_sync", 1),
            ("nr_wakeups_remote", 1),
            ("nr_wakeups_local", 0),
            ("nr_wakeups_migrate", 0),
            ("nr_wakeups_idle", 1),
            ("same_cpu", 1),
            ("nr_wakeups_affine_attempts", 1),
            ("nr_wakeups_affine", 0),
            ("sis_search", 1),
            ("sis_target_hit", 1),
        ],
    );
    // now the sync pull across nodes: waker alone on 0, prev busy
    cpus[9] = CpuSnapshot::busy(1);
    cpus[0] = CpuSnapshot::busy(1);
    let d = e.select_cpu(&cpus, &mut t, &mut WakeCtx::sync(0, waker_task(2, 16), 0));
    assert_eq!(d.cpu, 0);
    assert_counted(
        &d.counted,
        &[
            ("nr_wakeups_affine", 1),
            ("nr_wakeups_local", 1),
            ("nr_wakeups_migrate", 1),
            ("remote_node", 1),
        ],
    );
    let total = *e.counters();
    assert_eq!(total.nr_wakeups, 2);
    let before = e.reset_counters();
    assert_eq!(before, total);
    assert_eq!(e.counters().nr_wakeups, 0);
}

#[test]
fn decision_serialises() {
    let topo = shape(1, 1, 4, 1);
    let mut e = engine(&topo, "mainline");
    let mut t = wakee(1, 2, 4);
    let d = e.select_cpu(
        &all_idle(4),
        &mut t,
        &mut WakeCtx::ttwu(0, waker_task(2, 4), 0),
    );
    let j = serde_json::to_string(&d).unwrap();
    assert!(j.contains(r#""chain":["want_affine","affine_domain_llc","wake_affine_idle_both_idle_keep_prev","sis_target_idle"]"#), "{j}");
    let back: Decision = serde_json::from_str(&j).unwrap();
    assert_eq!(back, d);
    // inputs round-trip too
    let w = WakeCtx::sync(0, waker_task(2, 4), 5);
    let back: WakeCtx = serde_json::from_str(&serde_json::to_string(&w).unwrap()).unwrap();
    assert_eq!(back, w);
    let s: CpuSnapshot = serde_json::from_str(r#"{"idle": true}"#).unwrap();
    assert!(s.available_idle() && s.avg_idle_ns == 1_000_000);
    assert!(serde_json::from_str::<CpuSnapshot>(r#"{"idel": true}"#).is_err());
    let t: TaskState =
        serde_json::from_str(r#"{"pid": 3, "prev_cpu": 1, "allowed": "0-1"}"#).unwrap();
    assert_eq!(t.allowed.count(), 2);
}

#[test]
fn runtime_set_is_validated() {
    let topo = shape(1, 1, 4, 1);
    let mut e = engine(&topo, "mainline");
    e.set("sync_requires_task_waker", "on").unwrap();
    assert!(e.config().sync_requires_task_waker);
    let before = *e.config();
    assert!(e.set("idle_candidate", "false").is_err());
    assert!(e.set("nope", "1").is_err());
    assert_eq!(*e.config(), before);
}

// ------------------------------------------------------------------------------------------
// newly-idle pull
// ------------------------------------------------------------------------------------------

fn pulled(pid: u32, src_cpu: usize) -> Option<Pulled> {
    Some(Pulled { pid, src_cpu })
}

#[test]
fn newidle_pull_rules() {
    let topo = shape(2, 1, 2, 2); // 8 CPUs, node 0 = 0-3
    let cand = |pid, src| PullCandidate {
        pid,
        src_cpu: src,
        allowed: CpuSet::new(),
        load: 1024,
        cache_hot: false,
    };
    let mut e = engine(&topo, "v5.10");
    let mut cpus = all_busy(8);
    cpus[0] = CpuSnapshot::idle();
    cpus[2].nr_running = 3;
    cpus[5].nr_running = 4;
    // prefers the nearest domain holding a candidate (LLC 0-3) over a busier remote CPU
    let d = e.newidle_pull(0, &cpus, &[cand(50, 5), cand(20, 2)]);
    assert_eq!(d.pulled, pulled(20, 2));
    assert_eq!(d.domain, Some(DomainLevel::Llc));
    // a candidate on a CPU with a single task is running, not queued: not pullable
    cpus[2].nr_running = 1;
    let d = e.newidle_pull(0, &cpus, &[cand(20, 2), cand(50, 5)]);
    assert_eq!(d.pulled, pulled(50, 5));
    assert_eq!(d.chain.names(), ["newidle_pull_domain_machine"]);
    // cache hot (task_hot()): it stays where it waits
    let hot = PullCandidate {
        cache_hot: true,
        ..cand(50, 5)
    };
    let d = e.newidle_pull(0, &cpus, &[hot]);
    assert_eq!(
        (d.pulled, d.chain.names()),
        (None, vec!["newidle_nothing_to_pull"])
    );
    // not allowed here
    let pinned = PullCandidate {
        allowed: CpuSet::from_cpus([4, 5]),
        ..cand(50, 5)
    };
    let d = e.newidle_pull(0, &cpus, &[pinned]);
    assert_eq!(
        (d.pulled, d.chain.names()),
        (None, vec!["newidle_nothing_to_pull"])
    );
    // the CPU still has work
    let d = e.newidle_pull(1, &cpus, &[cand(50, 5)]);
    assert_eq!(d.chain.names(), ["newidle_cpu_has_work"]);
    assert_eq!(d.counted.newidle_balance, 0);
    // with delayed dequeue, a CPU whose only tasks are delayed sleepers is going idle
    let mut e = engine(&topo, "v6.12");
    cpus[1] = CpuSnapshot {
        nr_running: 2,
        nr_delayed: 2,
        ..CpuSnapshot::default()
    };
    let d = e.newidle_pull(1, &cpus, &[cand(50, 5)]);
    assert!(d.pulled.is_some());
}

/// `sync_idle_core_hints` walks `Topology::cores()`; it must say what the mask definition
/// says (an online idle CPU whose whole `smt_mask` is idle), with offline CPUs, x86
/// numbering and snapshot slices shorter or longer than the machine.
#[test]
fn idle_core_hints_match_the_mask_definition() {
    let x86: Vec<CpuDesc> = (0..16)
        .map(|c| CpuDesc {
            core: c % 8,
            llc: c % 8 / 4,
            node: 0,
            online: true,
            capacity: 1024,
        })
        .collect();
    let mut topos = vec![
        Topology::from_cpus(&x86).unwrap(),
        shape(2, 2, 3, 2),
        shape(1, 2, 4, 1),
    ];
    let mut holes = Topology::from_cpus(&x86).unwrap();
    for c in [1, 9, 4] {
        holes.set_online(c, false).unwrap();
    }
    topos.push(holes);
    let mut r = super::rng::XorShift::new(3);
    for topo in &topos {
        let n = topo.nr_cpus();
        let mut e = engine(topo, "mainline");
        for round in 0..300 {
            let len = match round % 3 {
                0 => n,
                1 => n - 1 - r.below(3) as usize,
                _ => n + 2,
            };
            let cpus: Vec<CpuSnapshot> = (0..len)
                .map(|_| {
                    if r.chance(60) {
                        CpuSnapshot {
                            ttwu_pending: r.chance(10),
                            ..CpuSnapshot::idle()
                        }
                    } else {
                        CpuSnapshot::busy(1)
                    }
                })
                .collect();
            let mut idle = CpuSet::new();
            for (c, s) in cpus.iter().enumerate() {
                if s.available_idle() {
                    idle.set(c);
                }
            }
            let idle = idle.and(topo.online());
            let mut want = vec![false; topo.nr_llcs()];
            for c in idle.iter() {
                if topo.smt_mask(c).is_subset_of(&idle) {
                    want[topo.llc_index(c)] = true;
                }
            }
            e.sync_idle_core_hints(&cpus);
            let got: Vec<bool> = e.llc_states().iter().map(|l| l.has_idle_cores).collect();
            assert_eq!(got, want, "{n} CPUs, round {round}");
        }
    }
}
