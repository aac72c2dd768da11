//! Helpers shared by the policy's test modules: scenario builders, and the deterministic
//! random generator the property tests draw from.

use super::*;

pub use super::rng::{self, XorShift};

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
