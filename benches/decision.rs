//! Cost of one placement decision, `Engine::select_cpu`, on synthetic machines of 8, 64 and
//! 256 CPUs.  Run with
//!
//! ```text
//! cargo bench --bench decision -- --warm-up-time 1 --measurement-time 3
//! ```
//!
//! Each benchmark cycles through 256 pre-built wake-ups (CPU snapshots, wakee, waker) so
//! that the measured loop does nothing but copy the small task/wake structs and decide;
//! building the inputs is outside the timing.  The engine is reused across iterations, so
//! its per-LLC state (idle-core hint, SIS_PROP scan cost) evolves as it would in the agent.
//!
//! Input mixes:
//! - `mixed`: a realistic busy machine: about a third of the CPUs idle (some with a wake-up
//!   pending), the rest running 1-4 tasks, some with delayed-dequeue sleepers, loads and
//!   utilisation spread out; half the wake-ups sync, a quarter from softirq context; tasks
//!   with a recent_used_cpu and modest wakee flips.
//! - `saturated`: no idle CPU at all, the worst case for `select_idle_sibling()` (every
//!   scan runs to its SIS limit, or over the whole LLC, and fails).

use std::hint::black_box;

use criterion::{BenchmarkId, Criterion, Throughput, criterion_group, criterion_main};
use scx_wakelab::policy::rng::{self, XorShift};
use scx_wakelab::policy::{
    Config, CpuSnapshot, Engine, TaskState, Topology, WAKE_SYNC, WAKE_TTWU, WakeCtx, WakerContext,
};

#[derive(Clone, Copy)]
enum Mix {
    Mixed,
    Saturated,
}

fn snapshot(r: &mut XorShift, mix: Mix) -> CpuSnapshot {
    if matches!(mix, Mix::Mixed) && r.chance(35) {
        return rng::idle_cpu(r, 10, 1_000_000);
    }
    let (nr_running, nr_delayed) = rng::busy_counts(r, 20);
    CpuSnapshot {
        nr_running,
        nr_delayed,
        load: 512 * nr_running as u64 + r.below(1024),
        util: 400 + r.below(625) as u32,
        avg_idle_ns: r.below(500_000),
        ..CpuSnapshot::default()
    }
}

/// 256 wake-ups on `topo`: (snapshots, wakee, wake context).
fn worlds(topo: &Topology, mix: Mix) -> Vec<(Vec<CpuSnapshot>, TaskState, WakeCtx)> {
    let n = topo.nr_cpus();
    let mut r = XorShift::new(42);
    (0..256u32)
        .map(|i| {
            let cpus: Vec<CpuSnapshot> = (0..n).map(|_| snapshot(&mut r, mix)).collect();
            let mut t = TaskState::new(i, r.below(n as u64) as usize, n);
            t.recent_used_cpu = Some(r.below(n as u64) as usize);
            t.wakee_flips = r.below(8) as u32;
            t.load = 200 + r.below(800);
            let mut waker = TaskState::new(10_000 + i, r.below(n as u64) as usize, n);
            waker.wakee_flips = r.below(8) as u32;
            waker.load = 200 + r.below(800);
            let mut w = WakeCtx::ttwu(r.below(n as u64) as usize, waker, i as u64 * 1000);
            if r.chance(50) {
                w.wake_flags = WAKE_TTWU | WAKE_SYNC;
            }
            if r.chance(25) {
                w.waker_context = WakerContext::Softirq;
            }
            (cpus, t, w)
        })
        .collect()
}

fn bench_select_cpu(c: &mut Criterion) {
    let machines = [
        ("8cpus_1x1x4x2", (1, 1, 4, 2)),
        ("64cpus_2x1x16x2", (2, 1, 16, 2)),
        ("256cpus_2x2x32x2", (2, 2, 32, 2)),
    ];
    let mut group = c.benchmark_group("select_cpu");
    group.throughput(Throughput::Elements(1));
    for (label, (nodes, llcs, cores, threads)) in machines {
        let topo = Topology::from_shape(nodes, llcs, cores, threads).expect("shape");
        for (preset, mix, mix_name) in [
            ("v5.10", Mix::Mixed, "mixed"),
            ("mainline", Mix::Mixed, "mixed"),
            ("mainline", Mix::Saturated, "saturated"),
        ] {
            let inputs = worlds(&topo, mix);
            let cfg = Config::from_preset(preset).expect("preset");
            let mut engine = Engine::new(topo.clone(), cfg).expect("engine");
            let id = BenchmarkId::new(format!("{label}/{preset}"), mix_name);
            let mut k = 0usize;
            group.bench_function(id, |b| {
                b.iter(|| {
                    let (cpus, t, w) = &inputs[k % inputs.len()];
                    k = k.wrapping_add(1);
                    let (mut t, mut w) = (*t, *w);
                    black_box(engine.select_cpu(black_box(cpus), &mut t, &mut w).cpu)
                })
            });
        }
    }
    group.finish();
}

criterion_group!(benches, bench_select_cpu);
criterion_main!(benches);
