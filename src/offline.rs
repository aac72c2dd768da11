//! Hands `explain` and `sim` to `scx_wakelab-offline`, the same commands in a binary that
//! does not link scx_rustland_core. Every allocation of this process comes from
//! rustland_core's global allocator, a fixed 64 MiB heap that it locks while the
//! scheduler runs; the offline commands have no reason to share that limit (a 256-CPU
//! `sim` keeps one latency sample per wake-up and outgrows it), and no binary can have
//! two global allocators.
//!
//! The sibling is trusted as this binary is: root often runs `scx_wakelab explain`, so a
//! file some other user could have written is never executed. Without a trustworthy
//! sibling (a copy of this binary alone, as the VM harness installs it) the command runs
//! here, with the fixed heap.

use std::ffi::OsString;
use std::os::unix::fs::MetadataExt;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};

pub const BINARY: &str = "scx_wakelab-offline";

/// Replaces this process with the sibling, given the same arguments; returns only when
/// there is no sibling to trust or it cannot be executed, having told the library that the
/// command runs here, on the fixed heap (the limits of `scx_wakelab::heap` then apply).
pub fn hand_over() {
    exec_sibling();
    scx_wakelab::heap::declare_fixed_heap();
}

fn exec_sibling() {
    let Some(path) = sibling() else { return };
    let euid = unsafe { libc::geteuid() };
    if trusted(&path, euid).is_err() {
        return;
    }
    let args: Vec<OsString> = std::env::args_os().skip(1).collect();
    // exec() returns only on failure; the command then runs here.
    let _ = std::process::Command::new(&path)
        .arg0("scx_wakelab")
        .args(args)
        .exec();
}

fn sibling() -> Option<PathBuf> {
    let exe = std::env::current_exe().ok()?;
    Some(exe.parent()?.join(BINARY))
}

/// `path` is a regular file that only `euid` or root can change, in a directory that only
/// they can change. Err says why not.
fn trusted(path: &Path, euid: u32) -> Result<(), String> {
    let owned_safely = |p: &Path, what: &str| -> Result<std::fs::Metadata, String> {
        let md = std::fs::metadata(p).map_err(|e| format!("{what} {}: {e}", p.display()))?;
        if md.uid() != 0 && md.uid() != euid {
            return Err(format!(
                "{what} {} belongs to uid {}",
                p.display(),
                md.uid()
            ));
        }
        if md.mode() & 0o022 != 0 {
            return Err(format!("{what} {} is writable by others", p.display()));
        }
        Ok(md)
    };
    // The file itself, symbolic links followed: what exec() would run.
    let md = owned_safely(path, "the file")?;
    if !md.is_file() {
        return Err(format!("{} is not a regular file", path.display()));
    }
    // Whoever can write its directory (or, for a link, the link's) can replace it.
    let real = std::fs::canonicalize(path).map_err(|e| e.to_string())?;
    for dir in [path.parent(), real.parent()].into_iter().flatten() {
        owned_safely(dir, "the directory")?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    fn dir(name: &str) -> PathBuf {
        let d = std::env::temp_dir().join(format!("wl-offline-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        std::fs::create_dir_all(&d).unwrap();
        std::fs::set_permissions(&d, std::fs::Permissions::from_mode(0o755)).unwrap();
        d
    }

    fn file(d: &Path, mode: u32) -> PathBuf {
        let p = d.join(BINARY);
        std::fs::write(&p, "#!/bin/sh\n").unwrap();
        std::fs::set_permissions(&p, std::fs::Permissions::from_mode(mode)).unwrap();
        p
    }

    #[test]
    fn only_a_file_others_cannot_change_is_trusted() {
        let euid = unsafe { libc::geteuid() };
        let d = dir("ok");
        let p = file(&d, 0o755);
        trusted(&p, euid).unwrap();
        // Another uid (not root) owning it: refused unless it is ours.
        if euid == 0 {
            std::os::unix::fs::chown(&p, Some(65534), None).unwrap();
            let e = trusted(&p, 0).unwrap_err();
            assert!(e.contains("belongs to uid 65534"), "{e}");
            std::os::unix::fs::chown(&p, Some(0), None).unwrap();
        }
        for mode in [0o775, 0o757] {
            std::fs::set_permissions(&p, std::fs::Permissions::from_mode(mode)).unwrap();
            let e = trusted(&p, euid).unwrap_err();
            assert!(e.contains("writable by others"), "{mode:o}: {e}");
        }
        std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o755)).unwrap();
        // A directory others can write: they could swap the file.
        std::fs::set_permissions(&d, std::fs::Permissions::from_mode(0o777)).unwrap();
        let e = trusted(&p, euid).unwrap_err();
        assert!(
            e.contains("the directory") && e.contains("writable by others"),
            "{e}"
        );
        std::fs::remove_dir_all(&d).unwrap();
    }

    #[test]
    fn a_directory_or_missing_file_is_not_trusted() {
        let euid = unsafe { libc::geteuid() };
        let d = dir("odd");
        assert!(trusted(&d.join(BINARY), euid).is_err());
        std::fs::create_dir(d.join(BINARY)).unwrap();
        std::fs::set_permissions(d.join(BINARY), std::fs::Permissions::from_mode(0o755)).unwrap();
        let e = trusted(&d.join(BINARY), euid).unwrap_err();
        assert!(e.contains("not a regular file"), "{e}");
        std::fs::remove_dir_all(&d).unwrap();
    }
}
