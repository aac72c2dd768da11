//! scx_wakelab's pure layers, usable without a kernel: the CFS wake-up
//! placement engine (`policy`), `explain`, `sim`, the policy's command
//! line (`cli`), the exit-code convention every command follows
//! (`exit`), and who may reach the scheduler's socket (`local_access`). The live layer (BPF + agent) lives in the scheduler binary (src/live), because it links rustland_core,
//! whose global allocator is a fixed, locked 64 MiB heap; the offline
//! commands also run in `scx_wakelab-offline` (src/bin), which does not link
//! it and so uses the system allocator.

pub mod cli;
pub mod exit;
pub mod explain;
pub mod local_access;
pub mod oracle;
pub mod policy;
pub mod sim;
