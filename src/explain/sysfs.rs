//! Topology from a sysfs tree, through scx_utils (the same reader the live agent uses).
//!
//! scx_utils reads `$SCX_SYSFS_PREFIX/sys/devices/system/...`, and reads the variable only
//! once per process (`ROOT_PREFIX` is a lazy static).  So a process can look at one tree
//! only: the first `sysfs` scenario sets the variable before scx_utils is touched, and a
//! later request for a different tree is an error rather than a silent read of the first
//! one.  The CLI runs one scenario per process, which is never a problem there.

use std::path::{Path, PathBuf};
use std::sync::Mutex;

use crate::policy::{CpuDesc, MAX_CPUS, SCHED_CAPACITY_SCALE, Topology};

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

/// The largest file of a tree we let scx_utils read (it reads each whole).
const MAX_SYSFS_FILE: u64 = 64 << 10;

/// Checks what scx_utils assumes of the tree at `prefix` (the directory holding `sys/`)
/// and panics or exhausts the heap on when it does not hold: a prefix it can format into
/// a glob pattern and parse back (UTF-8, no glob metacharacters, not `/`), at least one
/// `cpuN` directory (its CPU-count static unwraps the last one), CPU numbers within the
/// policy's limit (it sizes every mask by the highest), and small files.
fn check_tree(prefix: &Path, dir: &Path) -> Result<(), String> {
    let d = dir.display();
    let Some(p) = prefix.to_str() else {
        return Err(format!("{d}: the path is not UTF-8"));
    };
    if prefix == Path::new("/") {
        return Err(format!(
            "{d}: this is the running machine's own sysfs; explain reads a saved copy of a \
             tree (a directory named 'sys'), so that a scenario replays the same anywhere"
        ));
    }
    if let Some(c) = p.chars().find(|c| "*?[]{}".contains(*c)) {
        return Err(format!(
            "{d}: scx_utils reads the tree through glob patterns; move it to a path \
             without '{c}'"
        ));
    }
    let cpu_dir = prefix.join("sys/devices/system/cpu");
    let mut nr = 0usize;
    let entries = std::fs::read_dir(&cpu_dir).map_err(|e| format!("{d}: {e}"))?;
    for entry in entries {
        let entry = entry.map_err(|e| format!("{d}: {e}"))?;
        let name = entry.file_name();
        let name = name.to_string_lossy();
        // The entries scx_utils' pattern cpu[0-9]* matches.
        let Some(num) = name
            .strip_prefix("cpu")
            .filter(|n| n.starts_with(|c: char| c.is_ascii_digit()))
        else {
            continue;
        };
        match num.parse::<usize>() {
            Ok(n) if n < MAX_CPUS => nr += 1,
            Ok(_) => {
                return Err(format!(
                    "{d}: devices/system/cpu/{name}: CPU numbers go up to {}",
                    MAX_CPUS - 1
                ));
            }
            Err(_) => {
                return Err(format!(
                    "{d}: devices/system/cpu/{name}: not a CPU directory (cpuN)"
                ));
            }
        }
        if nr > MAX_CPUS {
            return Err(format!("{d}: more than {MAX_CPUS} CPU directories"));
        }
    }
    if nr == 0 {
        return Err(format!("{d}: no cpuN directory under devices/system/cpu"));
    }
    check_files(&prefix.join("sys/devices/system"), dir, 0, &mut 0)
}

/// Every file scx_utils may read under `path` is small; the walk itself is bounded too (a
/// copied tree keeps sysfs' symbolic links, which may loop).
fn check_files(path: &Path, dir: &Path, depth: usize, seen: &mut usize) -> Result<(), String> {
    const MAX_DEPTH: usize = 8;
    const MAX_ENTRIES: usize = 200_000;
    if depth > MAX_DEPTH {
        return Ok(());
    }
    let Ok(entries) = std::fs::read_dir(path) else {
        return Ok(());
    };
    for entry in entries.flatten() {
        *seen += 1;
        if *seen > MAX_ENTRIES {
            return Err(format!(
                "{}: more than {MAX_ENTRIES} entries under sys/devices/system",
                dir.display()
            ));
        }
        let p = entry.path();
        let Ok(meta) = std::fs::metadata(&p) else {
            continue;
        };
        if meta.is_dir() {
            // Links to directories are what loops; scx_utils reaches what it needs
            // through the cpu and node directories themselves.
            if !entry.file_type().is_ok_and(|t| t.is_symlink()) {
                check_files(&p, dir, depth + 1, seen)?;
            }
        } else if meta.len() > MAX_SYSFS_FILE {
            return Err(format!(
                "{}: larger than the {} KiB a sysfs file may have",
                p.display(),
                MAX_SYSFS_FILE >> 10
            ));
        } else if !meta.is_file() {
            return Err(format!("{}: not a regular file", p.display()));
        } else {
            let name = entry.file_name();
            let name = name.to_string_lossy();
            if name == "online" || name.ends_with("_list") {
                let text =
                    std::fs::read_to_string(&p).map_err(|e| format!("{}: {e}", p.display()))?;
                check_cpulist(&text).map_err(|e| format!("{}: {e}", p.display()))?;
            }
        }
    }
    Ok(())
}

/// scx_utils expands a CPU list ("0-3,8") into a vector of every CPU in it, and computes
/// `max + 1`: a range up to a huge number exhausts the heap or overflows.
fn check_cpulist(text: &str) -> Result<(), String> {
    let text = text.trim_end_matches('\0').trim();
    if text.is_empty() {
        return Ok(());
    }
    for group in text.split(',') {
        let group = group.trim();
        let (lo, hi) = group.split_once('-').unwrap_or((group, group));
        for n in [lo, hi] {
            match n.trim().parse::<usize>() {
                Ok(c) if c < MAX_CPUS => {}
                Ok(c) => {
                    return Err(format!(
                        "CPU {c} in the CPU list; CPU numbers go up to {}",
                        MAX_CPUS - 1
                    ));
                }
                Err(_) => return Err(format!("'{group}' is not a CPU or a range of CPUs")),
            }
        }
    }
    Ok(())
}

/// Reads the tree at `dir` with `scx_utils::Topology::new()` and converts it: CPU ids are
/// kept; CPUs absent from scx_utils' view (offline) are kept offline, each alone.
pub fn topology_from_sysfs(dir: &Path) -> Result<Topology, String> {
    let prefix = prefix_of(dir)?;
    let prefix = prefix.canonicalize().unwrap_or(prefix);
    check_tree(&prefix, dir)?;
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
