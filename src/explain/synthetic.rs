//! Valid decision traces without a kernel, for tests and for measuring `explain --trace`
//! on large inputs (`examples/synthetic_trace.rs`, docs/benchmarks/large-inputs.md).
//! Each record is a decision the engine really made on a varied machine state (idle,
//! busy and delayed-dequeue CPUs, sync wake-ups from tasks and from softirq, tasks
//! allowed on three CPUs only), so a replay decides every record again and must match.

use crate::policy::{
    Config, CpuSet, CpuSnapshot, Engine, TaskState, Topology, TraceRecord, WakeCtx, WakerContext,
};

/// An endless sequence of trace records on one machine and policy.
pub struct SyntheticTrace {
    topo: Topology,
    cfg: Config,
    engine: Engine,
    seq: u64,
}

impl SyntheticTrace {
    pub fn new(topo: Topology, cfg: Config) -> Result<Self, crate::policy::ConfigError> {
        let engine = Engine::new(topo.clone(), cfg)?;
        Ok(SyntheticTrace {
            topo,
            cfg,
            engine,
            seq: 0,
        })
    }
}

impl Iterator for SyntheticTrace {
    type Item = TraceRecord;

    fn next(&mut self) -> Option<TraceRecord> {
        let (i, n) = (self.seq, self.topo.nr_cpus());
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
        let mut task = TaskState::new(40, (i as usize * 5) % n, n);
        task.recent_used_cpu = Some((i as usize + 3) % n);
        let mut wake = WakeCtx::sync((i as usize * 3) % n, TaskState::new(41, 0, n), i * 10_000);
        if i % 3 == 0 {
            wake.waker_context = WakerContext::Softirq;
        }
        if i % 7 == 0 {
            task.allowed = CpuSet::from_cpus([1 % n, 2 % n, n - 1]);
        }
        let (task0, wake0, llc0) = (task, wake, self.engine.llc_states().to_vec());
        let d = self.engine.select_cpu(&cpus, &mut task, &mut wake);
        let mut rec = TraceRecord::new(&self.topo, &self.cfg, &llc0, &cpus, &task0, &wake0, &d);
        rec.seq = Some(i);
        self.seq += 1;
        Some(rec)
    }
}
