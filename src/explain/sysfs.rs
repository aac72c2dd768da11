//! Topology from a sysfs tree, through scx_utils (the same reader the live agent uses).
//!
//! scx_utils reads `$SCX_SYSFS_PREFIX/sys/devices/system/...`, and reads the variable only
//! once per process (`ROOT_PREFIX` is a lazy static).  So a process can look at one tree
//! only: the first `sysfs` scenario sets the variable before scx_utils is touched, and a
//! later request for a different tree is an error rather than a silent read of the first
//! one.  The CLI runs one scenario per process, which is never a problem there.
//!
//! The tree must be a saved copy, so that a scenario replays the same anywhere: a path
//! that is, or leads into, the running machine's own /sys or /proc is refused, whichever
//! component of it or link inside the tree leads there (a copy made with `cp -a` keeps
//! sysfs' links, and a link or a bind mount can name the live tree under another name).

use std::path::{Path, PathBuf};
use std::sync::Mutex;

use crate::exit::quote_path;
use crate::kernel_fs::{KernelFs, first_in_kernel_fs, kernel_fs_of};
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

/// Checks that the tree at `prefix` (the directory holding `sys/`) is not the live one,
/// and what scx_utils assumes of it and panics or exhausts the heap on when it does not
/// hold: a prefix it can format into a glob pattern and parse back (UTF-8, no glob
/// metacharacters), at least one `cpuN` directory (its CPU-count static unwraps the last
/// one), CPU numbers within the policy's limit (it sizes every mask by the highest), and
/// small files.
fn check_tree(prefix: &Path, dir: &Path) -> Result<(), String> {
    let d = dir.display();
    let Some(p) = prefix.to_str() else {
        return Err(format!("{d}: the path is not UTF-8"));
    };
    // Every component of the tree's own path down to the directory the walk below starts
    // from (the path as given was checked first of all); the walk checks what is under it.
    refuse_live_components(&prefix.join("sys/devices/system"), dir)?;
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
        // A copied tree keeps sysfs' links: one that leads back into the running machine's
        // own trees (cpu0 -> /sys/devices/system/cpu/cpu0), or a bind mount of them, would
        // make scx_utils read this machine instead of the copy.
        let link = entry.file_type().is_ok_and(|t| t.is_symlink());
        if let Some(k) = kernel_fs_of(&p, link) {
            return Err(refusal(&k, &p, dir));
        }
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

/// The line refusing a tree whose `path` (the tree's directory, a component of it or an
/// entry in it) is the running machine's own, as `k` says.
fn refusal(k: &KernelFs, path: &Path, dir: &Path) -> String {
    format!(
        "{}: {}; explain reads a saved copy of a tree (a directory named 'sys'), so that a \
         scenario replays the same anywhere",
        quote_path(dir),
        k.describe(path)
    )
}

/// Refuses `path` if it, or the path up to any of its components, is in the running
/// machine's /sys or /proc, whichever component is a symbolic link: a copy whose `sys`,
/// `devices` or `cpu` links into /sys is the live tree under another name.
fn refuse_live_components(path: &Path, dir: &Path) -> Result<(), String> {
    match first_in_kernel_fs(path) {
        Some((at, k)) => Err(refusal(&k, &at, dir)),
        None => Ok(()),
    }
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
    refuse_live_components(dir, dir)?;
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

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::symlink;

    /// A minimal tree of two CPUs under `root/sys`, CPU 1 linked from node0 as sysfs does.
    fn tree(name: &str) -> PathBuf {
        let root = std::env::temp_dir().join(format!("wl-sysfs-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&root);
        let cpu = root.join("sys/devices/system/cpu");
        for c in 0..2 {
            let t = cpu.join(format!("cpu{c}/topology"));
            std::fs::create_dir_all(&t).unwrap();
            std::fs::write(t.join("core_id"), format!("{c}\n")).unwrap();
        }
        std::fs::write(cpu.join("online"), "0-1\n").unwrap();
        let node = root.join("sys/devices/system/node/node0");
        std::fs::create_dir_all(&node).unwrap();
        symlink("../../cpu/cpu1", node.join("cpu1")).unwrap();
        root
    }

    fn refusal(root: &Path) -> String {
        let e = topology_from_sysfs(root).unwrap_err();
        assert!(!e.contains('\n'), "{e}");
        e
    }

    #[test]
    fn a_copy_with_links_of_its_own_passes() {
        let root = tree("own");
        refuse_live_components(&root, &root).unwrap();
        check_tree(&root, &root).unwrap();
        std::fs::remove_dir_all(&root).unwrap();
    }

    #[test]
    fn a_copy_that_leads_into_the_live_trees_is_refused() {
        if !Path::new("/sys/devices/system/cpu/cpu0").is_dir() {
            return; // no sysfs here to lead into
        }
        // `sys` itself: the live tree under another name.
        let root = std::env::temp_dir().join(format!("wl-sysfs-sys-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&root);
        std::fs::create_dir_all(&root).unwrap();
        symlink("/sys", root.join("sys")).unwrap();
        let e = refusal(&root);
        assert!(
            e.contains("sys leads into the running machine's own sysfs (/sys)"),
            "{e}"
        );
        std::fs::remove_dir_all(&root).unwrap();
        // A component further down, given as the `sys` directory itself.
        let root = tree("devices");
        std::fs::remove_dir_all(root.join("sys/devices")).unwrap();
        symlink("/sys/devices", root.join("sys/devices")).unwrap();
        let e = refusal(&root.join("sys"));
        assert!(
            e.contains("devices leads into the running machine's own sysfs"),
            "{e}"
        );
        std::fs::remove_dir_all(&root).unwrap();
        // A link inside the copy, to a directory or a file, to sysfs or procfs.
        for (name, at, to, what) in [
            ("cpu0", "cpu/cpu0", "/sys/devices/system/cpu/cpu0", "sysfs"),
            (
                "online",
                "cpu/online",
                "/sys/devices/system/cpu/online",
                "sysfs",
            ),
            (
                "proc",
                "cpu/cpu1/topology/core_id",
                "/proc/self/stat",
                "procfs",
            ),
        ] {
            let root = tree(name);
            let p = root.join("sys/devices/system").join(at);
            if p.is_dir() {
                std::fs::remove_dir_all(&p).unwrap();
            } else {
                std::fs::remove_file(&p).unwrap();
            }
            symlink(to, &p).unwrap();
            let e = refusal(&root);
            assert!(
                e.contains(&format!("{at} leads into the running machine's own {what}")),
                "{name}: {e}"
            );
            std::fs::remove_dir_all(&root).unwrap();
        }
        // The live trees themselves, by any name.
        for (dir, needle) in [
            ("/", "/: /sys is in the running machine's own sysfs;"),
            ("/sys", "/sys: /sys is in the running machine's own sysfs"),
            (
                "/sys/devices/system/cpu/..",
                "is in the running machine's own sysfs",
            ),
            // Its first component already: /proc.
            (
                "/proc/self/root/sys",
                "/proc is in the running machine's own procfs",
            ),
        ] {
            let e = refusal(Path::new(dir));
            assert!(e.contains(needle), "{dir}: {e}");
        }
    }
}
