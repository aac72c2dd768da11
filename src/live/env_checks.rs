//! Checks of the environment before loading, each with an error a user can
//! act on. The kernel would refuse most of these too, but with an errno
//! (EPERM, ENOENT, EBUSY) that does not say what to do.

use std::fs;
use std::path::Path;

use anyhow::{Result, bail};

/// The command that runs scx_wakelab in the project's VM, for hosts whose
/// kernel lacks sched_ext.
pub const VM_HINT: &str = "tools/vm/wakelab-vm run -- scx_wakelab";

/// What /sys/kernel/sched_ext says about the running kernel.
#[derive(Debug, PartialEq, Eq)]
pub enum SchedExtState {
    /// No /sys/kernel/sched_ext: the kernel lacks CONFIG_SCHED_CLASS_EXT.
    Missing,
    /// No BPF scheduler loaded.
    Disabled,
    /// A scheduler is loaded (or loading/unloading); its ops name if known.
    Busy { state: String, ops: String },
}

/// Reads the sched_ext state below `sysfs_root` (normally "/sys").
pub fn sched_ext_state(sysfs_root: &Path) -> SchedExtState {
    let dir = sysfs_root.join("kernel/sched_ext");
    if !dir.is_dir() {
        return SchedExtState::Missing;
    }
    let state = fs::read_to_string(dir.join("state"))
        .map(|s| s.trim().to_string())
        .unwrap_or_default();
    if state == "disabled" {
        return SchedExtState::Disabled;
    }
    let ops = fs::read_to_string(dir.join("root/ops"))
        .map(|s| s.trim().to_string())
        .unwrap_or_else(|_| "unknown".to_string());
    SchedExtState::Busy { state, ops }
}

/// Everything that must hold before we try to load: root
/// ([`scx_wakelab::bpf_load::check_root`]), a sched_ext kernel, and no other
/// sched_ext scheduler.
pub fn check_can_load(sysfs_root: &Path, euid: u32) -> Result<()> {
    match sched_ext_state(sysfs_root) {
        SchedExtState::Missing => bail!(
            "this kernel has no sched_ext (CONFIG_SCHED_CLASS_EXT is not set); \
             run scx_wakelab in the VM instead: {VM_HINT}"
        ),
        SchedExtState::Busy { state, ops } => bail!(
            "another sched_ext scheduler is already running ({ops}, state {state}); \
             stop it first"
        ),
        SchedExtState::Disabled => {}
    }
    scx_wakelab::bpf_load::check_root(euid)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fake_sysfs(state: Option<&str>, ops: Option<&str>) -> tempdir::Dir {
        let d = tempdir::Dir::new();
        if let Some(state) = state {
            let se = d.path().join("kernel/sched_ext");
            fs::create_dir_all(se.join("root")).unwrap();
            fs::write(se.join("state"), format!("{state}\n")).unwrap();
            if let Some(ops) = ops {
                fs::write(se.join("root/ops"), format!("{ops}\n")).unwrap();
            }
        }
        d
    }

    #[test]
    fn kernel_without_sched_ext_points_to_the_vm() {
        let d = fake_sysfs(None, None);
        let e = check_can_load(d.path(), 0).unwrap_err().to_string();
        assert!(e.contains("CONFIG_SCHED_CLASS_EXT"), "{e}");
        assert!(e.contains(VM_HINT), "{e}");
    }

    #[test]
    fn another_scheduler_is_named() {
        let d = fake_sysfs(Some("enabled"), Some("bpfland_1.1.4"));
        let e = check_can_load(d.path(), 0).unwrap_err().to_string();
        assert!(e.contains("already running"), "{e}");
        assert!(e.contains("bpfland_1.1.4"), "{e}");
    }

    #[test]
    fn not_root_is_refused() {
        let d = fake_sysfs(Some("disabled"), None);
        let e = check_can_load(d.path(), 1000).unwrap_err().to_string();
        assert!(e.contains("must run as root"), "{e}");
    }

    #[test]
    fn root_on_an_idle_sched_ext_kernel_may_load() {
        let d = fake_sysfs(Some("disabled"), None);
        check_can_load(d.path(), 0).unwrap();
    }

    /// A throwaway directory, removed on drop (no extra crate for this).
    mod tempdir {
        use std::path::{Path, PathBuf};
        use std::sync::atomic::{AtomicU32, Ordering};

        pub struct Dir(PathBuf);
        impl Dir {
            pub fn new() -> Dir {
                static N: AtomicU32 = AtomicU32::new(0);
                let p = std::env::temp_dir().join(format!(
                    "wakelab-test-{}-{}",
                    std::process::id(),
                    N.fetch_add(1, Ordering::Relaxed)
                ));
                std::fs::create_dir_all(&p).unwrap();
                Dir(p)
            }
            pub fn path(&self) -> &Path {
                &self.0
            }
        }
        impl Drop for Dir {
            fn drop(&mut self) {
                let _ = std::fs::remove_dir_all(&self.0);
            }
        }
    }
}
