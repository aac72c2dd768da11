//! Trace files, written by the scheduler (`--trace`) and by `oracle record` (`--out`):
//! their paths are checked before anything is loaded, so that a bad one is one line of bad
//! input (exit 2), and opened so that a process running as root never writes through a
//! symbolic link, into a FIFO or a device, or over an earlier trace unless asked to.

use std::path::Path;

use anyhow::{Context, Result};

/// Whether an existing trace file may be replaced, and the option that says so (named in
/// the refusal): `--trace-overwrite` for the scheduler's trace, `--overwrite` for
/// `oracle record`'s.
#[derive(Clone, Copy, Debug)]
pub struct Overwrite {
    pub allowed: bool,
    pub flag: &'static str,
}

impl Overwrite {
    /// The scheduler's `--trace` file.
    pub fn trace(allowed: bool) -> Self {
        Overwrite {
            allowed,
            flag: "--trace-overwrite",
        }
    }
}

/// Why a trace path is refused; bad input (exit 2).
enum TraceRefusal {
    Link,
    Exists,
    NotRegular,
}

fn trace_refusal(path: &Path, why: TraceRefusal, overwrite: Overwrite) -> anyhow::Error {
    let p = path.display();
    crate::exit::BadInput(match why {
        TraceRefusal::Link => {
            format!("the trace file {p} is a symbolic link; refusing to write through it")
        }
        TraceRefusal::Exists => format!(
            "the trace file {p} already exists; remove it, name another, or pass {}",
            overwrite.flag
        ),
        TraceRefusal::NotRegular => {
            format!("the trace file {p} is not a regular file; refusing to write to it")
        }
    })
    .into()
}

/// Why a file cannot be created at `path`, which does not exist yet, or None
/// when it can: "new/" names a directory to be, never a file, and a missing
/// or non-directory parent has nowhere to put it. Such a trace path is
/// refused before loading, not at creation (the socket's path has its own
/// check, local_access::check_socket_path, which makes missing directories).
fn why_not_creatable(path: &Path) -> Option<String> {
    if path.as_os_str().as_encoded_bytes().ends_with(b"/") {
        return Some("the path ends in '/'".to_string());
    }
    let dir = match path.parent() {
        Some(d) if !d.as_os_str().is_empty() => d,
        _ => Path::new("."),
    };
    (!dir.is_dir()).then(|| format!("{} is not a directory", dir.display()))
}

/// open_trace_file's refusals, from the path alone; and a path in the running kernel's
/// /sys or /proc, which its opening would not refuse: a process running as root could
/// write a kernel setting (`/proc/sys/...`, `/sys/...`) with trace lines, and `oracle
/// record` would have loaded its BPF program before finding out that it cannot.
pub fn check_trace_path(path: &Path, overwrite: Overwrite) -> Result<()> {
    match std::fs::symlink_metadata(path) {
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => match why_not_creatable(path) {
            Some(why) => Err(crate::exit::BadInput(format!(
                "cannot create the trace file {}: {why}",
                path.display()
            ))
            .into()),
            None => refuse_kernel_fs(path),
        },
        Err(e) => Err(crate::exit::BadInput(format!(
            "cannot use the trace file {}: {e}",
            path.display()
        ))
        .into()),
        Ok(md) if md.is_symlink() => Err(trace_refusal(path, TraceRefusal::Link, overwrite)),
        Ok(_) if !overwrite.allowed => Err(trace_refusal(path, TraceRefusal::Exists, overwrite)),
        Ok(md) if !md.is_file() => Err(trace_refusal(path, TraceRefusal::NotRegular, overwrite)),
        Ok(_) => refuse_kernel_fs(path),
    }
}

/// Refuses a trace path that is, or whose directory or any directory above it is, in the
/// running kernel's /sys or /proc, by name, through a link or through a bind mount.
fn refuse_kernel_fs(path: &Path) -> Result<()> {
    match crate::kernel_fs::first_in_kernel_fs(path) {
        Some((at, k)) => Err(crate::exit::BadInput(format!(
            "the trace file {} would be written into the kernel's own files: {}; refusing \
             to write there",
            crate::exit::quote_path(path),
            k.describe(&at)
        ))
        .into()),
        None => Ok(()),
    }
}

/// Open the `--trace` file for writing: a new file, or with `overwrite` an
/// existing regular file, truncated. Never through a symlink (the scheduler
/// runs as root, and a link planted in a shared directory would make it
/// truncate any file), never a FIFO or device. Mode 0600 whatever the umask:
/// the trace names every task and its pid.
pub fn open_trace_file(path: &Path, overwrite: Overwrite) -> Result<std::fs::File> {
    // A refusal of the path the caller named is bad input: exit 2, not 1.
    macro_rules! bail_input {
        ($($arg:tt)*) => {
            return Err(crate::exit::BadInput(format!($($arg)*)).into())
        };
    }
    use std::os::unix::fs::{OpenOptionsExt, PermissionsExt};
    let p = path.display();
    let mut opts = std::fs::OpenOptions::new();
    opts.write(true).mode(0o600);
    if overwrite.allowed {
        // O_NONBLOCK: opening a FIFO without a reader fails (ENXIO) instead
        // of waiting for one; it changes nothing for a regular file.
        opts.create(true)
            .custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK | libc::O_CLOEXEC);
    } else {
        // O_EXCL does not follow a symlink either: a link is "existing".
        opts.create_new(true)
            .custom_flags(libc::O_NOFOLLOW | libc::O_CLOEXEC);
    }
    let file = match opts.open(path) {
        Ok(f) => f,
        Err(e) => {
            let is_link = std::fs::symlink_metadata(path).is_ok_and(|m| m.is_symlink());
            if is_link {
                return Err(trace_refusal(path, TraceRefusal::Link, overwrite));
            }
            match e.raw_os_error() {
                Some(libc::EEXIST) => {
                    return Err(trace_refusal(path, TraceRefusal::Exists, overwrite));
                }
                Some(libc::EISDIR) | Some(libc::ENXIO) => {
                    return Err(trace_refusal(path, TraceRefusal::NotRegular, overwrite));
                }
                Some(libc::ENOENT) | Some(libc::ENOTDIR) => {
                    bail_input!("cannot create the trace file {p}: {e}")
                }
                _ => return Err(e).with_context(|| format!("creating the trace file {p}")),
            }
        }
    };
    let md = file
        .metadata()
        .with_context(|| format!("inspecting the trace file {p}"))?;
    if !md.file_type().is_file() {
        return Err(trace_refusal(path, TraceRefusal::NotRegular, overwrite));
    }
    // Through the fd, not the path: it is the file just checked.
    file.set_permissions(std::fs::Permissions::from_mode(0o600))
        .with_context(|| format!("setting the mode of the trace file {p}"))?;
    if overwrite.allowed {
        file.set_len(0)
            .with_context(|| format!("truncating the trace file {p}"))?;
    }
    Ok(file)
}

#[cfg(test)]
mod tests {
    use std::os::unix::fs::{MetadataExt, PermissionsExt};
    use std::path::PathBuf;

    use super::open_trace_file;

    fn temp(tag: &str) -> PathBuf {
        let p = std::env::temp_dir().join(format!("wakelab-trace-{}-{tag}", std::process::id()));
        let _ = std::fs::remove_file(&p);
        p
    }

    /// The refusal's message; every refusal is bad input (exit 2).
    fn err(path: &std::path::Path, overwrite: bool) -> String {
        let e = open_trace_file(path, super::Overwrite::trace(overwrite)).unwrap_err();
        // The check before loading refuses it too, and says the same (but
        // for a missing directory, which it words without an errno).
        let early = super::check_trace_path(path, super::Overwrite::trace(overwrite)).unwrap_err();
        assert!(
            early.to_string() == e.to_string() || early.to_string().contains("is not a directory"),
            "{early} / {e}"
        );
        assert_eq!(crate::exit::code_of(&e, 1), crate::exit::BAD_INPUT, "{e:#}");
        e.to_string()
    }

    #[test]
    fn trace_file_is_new_and_0600() {
        let p = temp("new");
        super::check_trace_path(&p, super::Overwrite::trace(false)).unwrap();
        let f = open_trace_file(&p, super::Overwrite::trace(false)).unwrap();
        drop(f);
        let md = std::fs::symlink_metadata(&p).unwrap();
        assert!(md.is_file());
        assert_eq!(md.mode() & 0o7777, 0o600);
        // A second run does not clobber the first one's trace.
        let e = err(&p, false);
        assert!(
            e.contains("already exists") && e.contains("--trace-overwrite"),
            "{e}"
        );
        std::fs::remove_file(&p).unwrap();
    }

    #[test]
    fn existing_file_is_kept_unless_overwrite() {
        let p = temp("existing");
        std::fs::write(&p, "earlier trace").unwrap();
        std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o644)).unwrap();
        let e = err(&p, false);
        assert!(e.contains("already exists"), "{e}");
        assert_eq!(std::fs::read_to_string(&p).unwrap(), "earlier trace");
        // Asked to: truncated, and no longer readable by others.
        super::check_trace_path(&p, super::Overwrite::trace(true)).unwrap();
        drop(open_trace_file(&p, super::Overwrite::trace(true)).unwrap());
        let md = std::fs::metadata(&p).unwrap();
        assert_eq!(md.len(), 0);
        assert_eq!(md.mode() & 0o7777, 0o600);
        std::fs::remove_file(&p).unwrap();
    }

    #[test]
    fn symlinks_are_refused_even_with_overwrite() {
        let target = temp("link-target");
        std::fs::write(&target, "not a trace").unwrap();
        let link = temp("link");
        std::os::unix::fs::symlink(&target, &link).unwrap();
        for overwrite in [false, true] {
            let e = err(&link, overwrite);
            assert!(e.contains("symbolic link"), "overwrite={overwrite}: {e}");
        }
        assert_eq!(std::fs::read_to_string(&target).unwrap(), "not a trace");
        // A dangling link would have been created through: refused too.
        let dangling = temp("dangling");
        let nowhere = temp("nowhere");
        std::os::unix::fs::symlink(&nowhere, &dangling).unwrap();
        for overwrite in [false, true] {
            let e = err(&dangling, overwrite);
            assert!(e.contains("symbolic link"), "overwrite={overwrite}: {e}");
        }
        assert!(!nowhere.exists());
        for p in [&link, &target, &dangling] {
            std::fs::remove_file(p).unwrap();
        }
    }

    /// "dir/new/" passed the check (its parent exists) and failed only at
    /// creation, after the scheduler had loaded.
    #[test]
    fn a_path_ending_in_a_slash_is_refused_before_loading() {
        let dir = temp("slash");
        let p = PathBuf::from(format!("{}/", dir.display()));
        for overwrite in [false, true] {
            let e = super::check_trace_path(&p, super::Overwrite::trace(overwrite)).unwrap_err();
            assert_eq!(crate::exit::code_of(&e, 1), crate::exit::BAD_INPUT);
            assert!(e.to_string().contains("ends in '/'"), "{e}");
        }
        assert!(!dir.exists());
    }

    /// /sys and /proc, by name or through a link: refused before anything is loaded,
    /// existing file or new, with --overwrite or without.
    #[test]
    fn the_kernels_own_files_are_refused() {
        if !std::path::Path::new("/proc/self").exists() {
            return; // no procfs here
        }
        let link = temp("proc-link");
        std::os::unix::fs::symlink("/proc/self", &link).unwrap();
        for (path, overwrite, needle) in [
            (
                PathBuf::from("/proc/sys/kernel/core_pattern"),
                true,
                "/proc is in the running",
            ),
            (
                PathBuf::from("/proc/self/new-trace"),
                false,
                "/proc is in the running",
            ),
            (
                PathBuf::from("/sys/kernel/new-trace"),
                false,
                "/sys is in the running",
            ),
            (PathBuf::from("/sys/kernel/profiling"), true, "own sysfs"),
            (
                link.join("new-trace"),
                false,
                "leads into the running machine's own procfs",
            ),
        ] {
            if !path.parent().unwrap().is_dir() {
                continue;
            }
            let e = super::check_trace_path(&path, super::Overwrite::trace(overwrite)).unwrap_err();
            assert_eq!(crate::exit::code_of(&e, 1), crate::exit::BAD_INPUT, "{e:#}");
            let e = e.to_string();
            assert!(
                e.contains("would be written into the kernel's own files") && e.contains(needle),
                "{}: {e}",
                path.display()
            );
        }
        std::fs::remove_file(&link).unwrap();
    }

    #[test]
    fn non_regular_files_are_refused_with_overwrite() {
        let dir = temp("dir");
        std::fs::create_dir(&dir).unwrap();
        let e = err(&dir, true);
        assert!(e.contains("not a regular file"), "{e}");
        std::fs::remove_dir(&dir).unwrap();

        // A FIFO without a reader: refused at once, not waited on.
        let fifo = temp("fifo");
        let c = std::ffi::CString::new(fifo.as_os_str().as_encoded_bytes()).unwrap();
        assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0);
        let e = err(&fifo, true);
        assert!(e.contains("not a regular file"), "{e}");
        std::fs::remove_file(&fifo).unwrap();

        let e = err(std::path::Path::new("/dev/null"), true);
        assert!(e.contains("not a regular file"), "{e}");

        let e = err(&temp("no-such-dir").join("trace"), false);
        assert!(e.contains("No such file or directory"), "{e}");
    }
}
