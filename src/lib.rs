//! scx_wakelab's pure layers, usable without a kernel: the CFS wake-up
//! placement engine (`policy`). The live layer (BPF + agent) lives in the
//! binary (src/live), because it links rustland_core's global allocator.

pub mod explain;
pub mod policy;
pub mod sim;
