//! Topology from a sysfs tree, through scx_utils (the same reader the live agent uses).
//!
//! scx_utils reads `$SCX_SYSFS_PREFIX/sys/devices/system/...`, and reads the variable only
//! once per process (`ROOT_PREFIX` is a lazy static).  So a process can look at one tree
//! only: the first `sysfs` scenario sets the variable before scx_utils is touched, and a
//! later request for a different tree is an error rather than a silent read of the first
//! one.  The CLI runs one scenario per process, which is never a problem there.

use std::path::{Path, PathBuf};
use std::sync::Mutex;

use crate::policy::{CpuDesc, SCHED_CAPACITY_SCALE, Topology};

/// The prefix this process has handed to scx_utils, once it has.
static PREFIX_IN_USE: Mutex<Option<PathBuf>> = Mutex::new(None);

/// `dir` is either the `sys` directory of a tree or the directory holding `sys/`; returns
/// the prefix scx_utils wants (the directory holding `sys/`).
fn prefix_of(dir: &Path) -> Result<PathBuf, String> {
    if dir.join("devices/system/cpu").is_dir() {
        if let Some(parent) = dir.parent()
            && dir.file_name().is_some_and(|n| n == "sys")
        {
            return Ok(parent.to_path_buf());
        }
        return Err(format!(
            "{}: a sysfs tree must live in a directory named 'sys'",
            dir.display()
        ));
    }
    if dir.join("sys/devices/system/cpu").is_dir() {
        return Ok(dir.to_path_buf());
    }
    Err(format!(
        "{}: no devices/system/cpu or sys/devices/system/cpu under it",
        dir.display()
    ))
}

/// Reads the tree at `dir` with `scx_utils::Topology::new()` and converts it: CPU ids are
/// kept; CPUs absent from scx_utils' view (offline) are kept offline, each alone.
pub fn topology_from_sysfs(dir: &Path) -> Result<Topology, String> {
    let prefix = prefix_of(dir)?;
    let prefix = prefix.canonicalize().unwrap_or(prefix);
    {
        let mut in_use = PREFIX_IN_USE.lock().unwrap_or_else(|p| p.into_inner());
        match &*in_use {
            Some(p) if *p != prefix => {
                return Err(format!(
                    "this process already read the sysfs tree at {}; scx_utils reads \
                     SCX_SYSFS_PREFIX once per process, so run one sysfs scenario per process",
                    p.display()
                ));
            }
            Some(_) => {}
            None => {
                let wanted = prefix.to_string_lossy().to_string();
                if let Ok(v) = std::env::var("SCX_SYSFS_PREFIX")
                    && v != wanted
                {
                    return Err(format!(
                        "SCX_SYSFS_PREFIX is already set to '{v}'; unset it to read {wanted}"
                    ));
                }
                // SAFETY: set before scx_utils first reads it; the CLI is single-threaded
                // here, and the lock serialises callers inside this crate.
                unsafe { std::env::set_var("SCX_SYSFS_PREFIX", &wanted) };
                if *scx_utils::ROOT_PREFIX != wanted {
                    return Err(format!(
                        "scx_utils already read the real sysfs in this process; cannot switch \
                         to {wanted}"
                    ));
                }
                *in_use = Some(prefix.clone());
            }
        }
    }
    let t = scx_utils::Topology::new().map_err(|e| format!("scx_utils: {e:#}"))?;
    let max_id = t.all_cpus.keys().copied().max().ok_or("no online CPU")?;
    let descs: Vec<CpuDesc> = (0..=max_id)
        .map(|id| match t.all_cpus.get(&id) {
            Some(c) => CpuDesc {
                core: c.core_id as u32,
                llc: c.llc_id as u32,
                node: c.node_id as u32,
                online: true,
                capacity: (c.cpu_capacity as u32).clamp(1, SCHED_CAPACITY_SCALE),
            },
            // Offline: scx_utils skips it.  Give it a core and LLC of its own on node 0 so
            // it joins nobody's masks.
            None => CpuDesc {
                core: u32::MAX - id as u32,
                llc: u32::MAX - id as u32,
                node: 0,
                online: false,
                capacity: SCHED_CAPACITY_SCALE,
            },
        })
        .collect();
    Topology::from_cpus(&descs).map_err(|e| e.to_string())
}
