//! The running kernel's own trees, /sys and /proc: a path that leads into them is no saved
//! copy of a machine to read (explain's sysfs topologies) and no place to write a trace
//! (the scheduler's `--trace`, `oracle record --out`), whatever it is called.  A path gets
//! there by its own name, through a symbolic link in any of its components, or through a
//! bind mount, which keeps the tree's file system wherever it is mounted; each is caught.

use std::path::{Path, PathBuf};

/// Where a path led into /sys or /proc.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct KernelFs {
    /// "sysfs" or "procfs".
    pub what: &'static str,
    /// The path it resolves to, symbolic links followed.
    pub real: PathBuf,
    /// Found by the file system it is on rather than by where it resolves to.
    pub mounted: bool,
}

impl KernelFs {
    /// `path` (as the user gave it, or a component of it) told as the error line tells
    /// it: "/x/sys leads into the running machine's own sysfs (/sys)".
    pub fn describe(&self, path: &Path) -> String {
        let (p, what) = (crate::exit::quote_path(path), self.what);
        if self.mounted {
            format!("{p} is on the running machine's own {what}, mounted there")
        } else if self.real == path {
            format!("{p} is in the running machine's own {what}")
        } else {
            format!(
                "{p} leads into the running machine's own {what} ({})",
                crate::exit::quote_path(&self.real)
            )
        }
    }
}

/// Whether `path` is in /sys or /proc: by where it resolves to (with `follow`, symbolic
/// links in it are followed; without, its components are taken to be none) or by the file
/// system it is on.  A path that does not resolve is not.
pub fn kernel_fs_of(path: &Path, follow: bool) -> Option<KernelFs> {
    use std::os::unix::ffi::OsStrExt as _;
    let real = if follow {
        std::fs::canonicalize(path).ok()?
    } else {
        path.to_path_buf()
    };
    for (root, what) in [("/sys", "sysfs"), ("/proc", "procfs")] {
        if real.starts_with(root) {
            return Some(KernelFs {
                what,
                real,
                mounted: false,
            });
        }
    }
    let c = std::ffi::CString::new(real.as_os_str().as_bytes()).ok()?;
    // SAFETY: statfs fills the struct it is given, from a NUL-terminated path.
    let mut st: libc::statfs = unsafe { std::mem::zeroed() };
    if unsafe { libc::statfs(c.as_ptr(), &mut st) } != 0 {
        return None;
    }
    // The field's type and the constants' differ by architecture.
    #[allow(clippy::unnecessary_cast)]
    let what = match st.f_type as i64 {
        t if t == libc::SYSFS_MAGIC as i64 => "sysfs",
        t if t == libc::PROC_SUPER_MAGIC as i64 => "procfs",
        _ => return None,
    };
    Some(KernelFs {
        what,
        real,
        mounted: true,
    })
}

/// The first leading part of `path` (`/`, `/a`, `/a/b`... as written, each resolved with
/// whatever links it holds) that is in /sys or /proc, with where it led.
pub fn first_in_kernel_fs(path: &Path) -> Option<(PathBuf, KernelFs)> {
    let mut upto = PathBuf::new();
    for part in path.components() {
        upto.push(part);
        if let Some(k) = kernel_fs_of(&upto, true) {
            return Some((upto, k));
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_live_trees_are_found_by_name_link_and_file_system() {
        assert_eq!(first_in_kernel_fs(Path::new("/tmp/x/y")), None);
        assert_eq!(first_in_kernel_fs(Path::new("relative/path")), None);
        if !Path::new("/proc/self").exists() {
            return; // no procfs here
        }
        let (at, k) = first_in_kernel_fs(Path::new("/proc/sys/kernel/x")).unwrap();
        assert_eq!((at.as_path(), k.what), (Path::new("/proc"), "procfs"));
        assert_eq!(
            k.describe(&at),
            "/proc is in the running machine's own procfs"
        );
        // A link to it, under another name.
        let link = std::env::temp_dir().join(format!("wl-kfs-{}", std::process::id()));
        let _ = std::fs::remove_file(&link);
        std::os::unix::fs::symlink("/proc/self", &link).unwrap();
        let (at, k) = first_in_kernel_fs(&link.join("status")).unwrap();
        assert_eq!(at, link);
        assert!(
            k.describe(&at)
                .contains("leads into the running machine's own procfs (/proc/"),
            "{k:?}"
        );
        std::fs::remove_file(&link).unwrap();
    }
}
