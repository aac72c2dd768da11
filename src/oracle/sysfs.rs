//! The recording machine's topology, read from sysfs without scx_utils, whose reader needs
//! files that kernels before v5.16 do not have (`topology/cluster_id`): the oracle records
//! v5.10 too.  Only what the engine's [`Topology`] holds is read: each CPU's core, last-level
//! cache and node, and whether it is online.

use std::path::Path;

use crate::policy::{CpuDesc, CpuSet, Topology};

fn read(path: &Path) -> Option<String> {
    std::fs::read_to_string(path).ok()
}

fn read_num(path: &Path) -> Option<u32> {
    read(path)?.trim().parse().ok()
}

/// The shared_cpu_list of `cpu`'s last level of data or unified cache, if sysfs has one.
fn llc_cpus(cpu_dir: &Path) -> Option<CpuSet> {
    let mut best: Option<(u32, CpuSet)> = None;
    for e in std::fs::read_dir(cpu_dir.join("cache")).ok()?.flatten() {
        let d = e.path();
        if !e.file_name().to_string_lossy().starts_with("index") {
            continue;
        }
        if read(&d.join("type")).is_some_and(|t| t.trim() == "Instruction") {
            continue;
        }
        let (Some(level), Some(list)) =
            (read_num(&d.join("level")), read(&d.join("shared_cpu_list")))
        else {
            continue;
        };
        let Ok(cpus) = CpuSet::parse_cpulist(&list) else {
            continue;
        };
        if best.as_ref().is_none_or(|(l, _)| level > *l) {
            best = Some((level, cpus));
        }
    }
    best.map(|(_, c)| c)
}

/// The topology under `root` (normally `/sys/devices/system`).
pub fn topology_from_sys(root: &Path) -> Result<Topology, String> {
    let cpu_root = root.join("cpu");
    let present = read(&cpu_root.join("present"))
        .ok_or_else(|| format!("cannot read {}", cpu_root.join("present").display()))?;
    let present = CpuSet::parse_cpulist(&present)?;
    let online = read(&cpu_root.join("online"))
        .map(|s| CpuSet::parse_cpulist(&s))
        .transpose()?
        .unwrap_or(present);
    let nr = present.iter().last().map_or(0, |m| m + 1);
    let mut node_of = vec![0u32; nr];
    if let Ok(nodes) = std::fs::read_dir(root.join("node")) {
        for e in nodes.flatten() {
            let name = e.file_name().to_string_lossy().to_string();
            let Some(id) = name
                .strip_prefix("node")
                .and_then(|n| n.parse::<u32>().ok())
            else {
                continue;
            };
            if let Some(list) = read(&e.path().join("cpulist")) {
                for c in CpuSet::parse_cpulist(&list)?.iter() {
                    if c < nr {
                        node_of[c] = id;
                    }
                }
            }
        }
    }
    let mut descs = Vec::with_capacity(nr);
    for (cpu, &node) in node_of.iter().enumerate() {
        let dir = cpu_root.join(format!("cpu{cpu}"));
        let is_online = online.contains(cpu);
        let topo = dir.join("topology");
        let ids = (
            read_num(&topo.join("physical_package_id")),
            read_num(&topo.join("core_id")),
        );
        let (true, (Some(pkg), Some(core))) = (is_online, ids) else {
            // Offline, or no topology: a CPU of its own.
            descs.push(CpuDesc {
                core: (1 << 30) + cpu as u32,
                llc: (1 << 30) + cpu as u32,
                node,
                online: false,
                capacity: 1024,
            });
            continue;
        };
        let llc = llc_cpus(&dir)
            .and_then(|c| c.iter().next())
            .map_or((1 << 29) + pkg, |c| c as u32);
        descs.push(CpuDesc {
            // core_id is unique within a package only.
            core: (pkg << 16) | core,
            llc,
            node,
            online: true,
            capacity: read_num(&dir.join("cpu_capacity")).unwrap_or(1024),
        });
    }
    Topology::from_cpus(&descs).map_err(|e| e.to_string())
}
