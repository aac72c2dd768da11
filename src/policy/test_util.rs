//! Helpers shared by the policy's test modules: scenario builders and a tiny deterministic
//! random generator (xorshift64*, no crates).

use super::*;

/// xorshift64* (Vigna): small, fast, deterministic; good enough to explore input spaces.
pub struct XorShift(u64);

impl XorShift {
    pub fn new(seed: u64) -> Self {
        XorShift(seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1)
    }
    pub fn next_u64(&mut self) -> u64 {
        let mut x = self.0;
        x ^= x >> 12;
        x ^= x << 25;
        x ^= x >> 27;
        self.0 = x;
        x.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }
    /// Uniform in `0..n` (n > 0).
    pub fn below(&mut self, n: u64) -> u64 {
        self.next_u64() % n
    }
    pub fn chance(&mut self, percent: u64) -> bool {
        self.below(100) < percent
    }
    pub fn pick<'a, T>(&mut self, xs: &'a [T]) -> &'a T {
        &xs[self.below(xs.len() as u64) as usize]
    }
}

pub fn shape(nodes: usize, llcs: usize, cores: usize, threads: usize) -> Topology {
    Topology::from_shape(nodes, llcs, cores, threads).unwrap()
}

pub fn engine(topo: &Topology, preset: &str) -> Engine {
    Engine::new(topo.clone(), Config::from_preset(preset).unwrap()).unwrap()
}

pub fn engine_with(topo: &Topology, preset: &str, overrides: &[&str]) -> Engine {
    Engine::new(
        topo.clone(),
        Config::from_preset_with(preset, overrides).unwrap(),
    )
    .unwrap()
}

pub fn all_idle(n: usize) -> Vec<CpuSnapshot> {
    vec![CpuSnapshot::idle(); n]
}

pub fn all_busy(n: usize) -> Vec<CpuSnapshot> {
    vec![CpuSnapshot::busy(1); n]
}

/// A wakee that last ran on `prev`.
pub fn wakee(pid: u32, prev: usize, n: usize) -> TaskState {
    TaskState::new(pid, prev, n)
}

/// A task-context waker running on `cpu`.
pub fn waker_task(pid: u32, n: usize) -> TaskState {
    TaskState::new(pid, 0, n)
}

pub fn names(d: &Decision) -> Vec<&'static str> {
    d.chain.names()
}
