//! scx_wakelab's library: everything but the scheduler's live layer.
//!
//! - `policy`: the CFS wake-up placement engine, pure Rust (no BPF, no I/O), with the
//!   decision-trace record every other layer writes or reads (`policy::trace`) and the
//!   deterministic generator whatever drives the engine draws from (`policy::rng`).
//! - `explain` and `sim`: the engine driven without a kernel, from scenario files and
//!   traces, and in a simulator.
//! - `oracle`: the kernel's own placements, recorded (`oracle::record` loads its BPF
//!   tracing program) and compared with the engine's.
//! - What more than one command shares: the policy's command line (`cli`), the exit-code
//!   convention and the one error line (`exit`), the heap the offline commands run on
//!   (`heap`) and the limits on a JSON document that follow from it (`json_limits`), the
//!   root check and libbpf's log for the commands that load BPF (`bpf_load`), the running
//!   kernel's /sys and /proc, which no path given as a saved copy or a file to write may
//!   lead into (`kernel_fs`), safe trace files (`trace_file`), and who may reach the
//!   scheduler's socket and how its file is made (`local_access`).
//!
//! The imports point one way, never back: `policy`, `exit`, `bpf_load` and `heap` import
//! none of the others (policy's allocation tests read `heap`'s arena model); `cli` imports
//! `policy`; `json_limits` imports `heap`; `kernel_fs` imports `exit`; `trace_file` and
//! `local_access` import `exit` and `kernel_fs`; `explain` imports `policy`, `exit`,
//! `json_limits` and `kernel_fs`; `sim` imports `policy`, `exit`, `heap` and `explain` (its
//! output helper); `oracle` imports `policy`, `explain`, `exit`, `heap`, `bpf_load` and
//! `trace_file`.
//! docs/architecture.md has the whole table, the binary's modules included.
//!
//! The live layer (BPF + agent) lives in the scheduler binary (src/live), because it links
//! rustland_core, whose global allocator is a fixed, locked 64 MiB heap; the offline
//! commands also run in `scx_wakelab-offline` (src/bin), which does not link it and so uses
//! the system allocator.

pub mod bpf_load;
pub mod cli;
pub mod exit;
pub mod explain;
pub mod heap;
pub mod json_limits;
pub mod kernel_fs;
pub mod local_access;
pub mod oracle;
pub mod policy;
pub mod sim;
pub mod trace_file;
