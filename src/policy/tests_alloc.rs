//! The decision path must not allocate.  A counting wrapper around the system allocator
//! (test builds of this crate only) counts allocations per thread, so concurrently running
//! tests do not disturb the measurement.
//!
//! It also keeps, per thread, the bytes a computation would hold in the scheduler
//! binary's fixed heap (`crate::heap`): each allocation as the block that heap's buddy
//! allocator gives it, and a reallocation as that allocator does it, the new block taken
//! before the old one is freed.  The input limits of the offline commands are checked
//! against it ([`peak_fixed_heap_bytes`]).

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;

use super::test_util::*;
use super::*;

struct CountingAlloc;

thread_local! {
    static ALLOCS: Cell<u64> = const { Cell::new(0) };
    /// Bytes held, in the fixed heap's blocks, and the most held since the last reset.
    static HELD: Cell<i64> = const { Cell::new(0) };
    static PEAK: Cell<i64> = const { Cell::new(0) };
}

/// The fixed heap's block for `size` bytes (as `crate::heap::block_of`, which `policy`
/// does not import).
fn block(size: usize) -> i64 {
    size.max(64).next_power_of_two() as i64
}

fn hold(delta: i64) {
    let _ = HELD.try_with(|h| {
        h.set(h.get() + delta);
        let _ = PEAK.try_with(|p| p.set(p.get().max(h.get())));
    });
}

unsafe impl GlobalAlloc for CountingAlloc {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        let _ = ALLOCS.try_with(|n| n.set(n.get() + 1));
        hold(block(layout.size()));
        unsafe { System.alloc(layout) }
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        hold(-block(layout.size()));
        unsafe { System.dealloc(ptr, layout) }
    }
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        let _ = ALLOCS.try_with(|n| n.set(n.get() + 1));
        hold(block(new_size));
        hold(-block(layout.size()));
        unsafe { System.realloc(ptr, layout, new_size) }
    }
}

#[global_allocator]
static COUNTING_ALLOC: CountingAlloc = CountingAlloc;

/// Runs `f` on this thread and returns what it returned and the most bytes it held at
/// once, counted as the fixed heap would hold them.  What `f` frees of what was allocated
/// before it lowers what it holds; its allocations on other threads are not seen.
pub(crate) fn peak_fixed_heap_bytes<R>(f: impl FnOnce() -> R) -> (R, u64) {
    let base = HELD.with(Cell::get);
    PEAK.with(|p| p.set(base));
    let r = f();
    let peak = PEAK.with(Cell::get);
    (r, (peak - base).max(0) as u64)
}

fn allocations() -> u64 {
    ALLOCS.with(|n| n.get())
}

#[test]
fn decisions_do_not_allocate() {
    let topo = shape(2, 2, 8, 2);
    let n = topo.nr_cpus();
    let mut r = XorShift::new(11);
    // Inputs are built before measuring; every preset, every path.
    let mut inputs = Vec::new();
    for i in 0..400u32 {
        let cpus: Vec<CpuSnapshot> = (0..n)
            .map(|_| {
                if r.chance(30) {
                    CpuSnapshot::idle()
                } else {
                    CpuSnapshot {
                        nr_delayed: r.below(2) as u32,
                        ..CpuSnapshot::busy(1 + r.below(3) as u32)
                    }
                }
            })
            .collect();
        let mut t = wakee(i, r.below(n as u64) as usize, n);
        t.recent_used_cpu = Some(r.below(n as u64) as usize);
        let flags = *r.pick(&[WAKE_TTWU, WAKE_TTWU | WAKE_SYNC, WAKE_FORK]);
        let mut w = WakeCtx {
            wake_flags: flags,
            ..WakeCtx::ttwu(r.below(n as u64) as usize, waker_task(9, n), i as u64)
        };
        w.waker_context = *r.pick(&[WakerContext::Task, WakerContext::Softirq]);
        inputs.push((cpus, t, w));
    }
    let cands = [PullCandidate {
        pid: 1,
        src_cpu: 3,
        allowed: CpuSet::new(),
        load: 1,
        cache_hot: false,
    }];
    let mut engines: Vec<Engine> = PRESET_NAMES.iter().map(|p| engine(&topo, p)).collect();
    engines.push(engine_with(
        &topo,
        "v5.10",
        &["recent_used=search-target", "idle_candidate=true"],
    ));
    let before = allocations();
    let mut sink = 0;
    for e in engines.iter_mut() {
        for (cpus, t, w) in &inputs {
            let (mut t, mut w) = (*t, *w);
            sink += e.select_cpu(cpus, &mut t, &mut w).cpu;
            sink += e.newidle_pull(t.prev_cpu, cpus, &cands).chain.len();
        }
    }
    assert_eq!(
        allocations() - before,
        0,
        "the decision path allocated (sink {sink})"
    );
    // sanity: the counter does see allocations
    let v: Vec<u8> = Vec::with_capacity(8);
    assert!(allocations() > before, "{}", v.capacity());
}
