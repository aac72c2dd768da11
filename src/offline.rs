//! Hands `explain`, `sim` and `oracle compare` to `scx_wakelab-offline`, the same commands
//! in a binary that does not link scx_rustland_core (`oracle record` stays: it loads BPF,
//! and the offline binary refuses it). Every allocation of this process comes from
//! rustland_core's global allocator, a fixed 64 MiB heap that it locks while the
//! scheduler runs; the offline commands have no reason to share that limit (a 256-CPU
//! `sim` keeps one latency sample per wake-up and outgrows it), and no binary can have
//! two global allocators.
//!
//! The sibling is trusted as this binary is: root often runs `scx_wakelab explain`, so a
//! file some other user could have written, or could have put in its place, is never
//! executed. Without a trustworthy sibling (a copy of this binary alone, as the VM harness
//! installs it) the command runs here, with the fixed heap.
//!
//! What runs is what was checked. A check of a path followed by an exec of the same path
//! would let anyone who can change the path in between (swap a symbolic link, rename a
//! directory on the way) choose what root runs. So the sibling is reached by opening one
//! directory at a time from `/`, each checked through its own descriptor, is opened itself
//! without following a link, checked through that descriptor, and that descriptor is
//! executed: a name changed after the check no longer matters.
//!
//! A sibling that is a symbolic link is refused, not resolved: resolving one safely means
//! walking and checking every link of a chain and every directory each one names, all of
//! it to support an install layout nobody needs (the two binaries are built and installed
//! side by side). A directory on the way that is a link is refused too; our own path has
//! none, as the kernel reports it (/proc/self/exe) with links resolved.

use std::ffi::{CStr, CString, OsStr, OsString};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::os::unix::ffi::{OsStrExt, OsStringExt};
use std::path::{Component, Path, PathBuf};

use scx_wakelab::exit::quote_path;

pub const BINARY: &str = "scx_wakelab-offline";

/// The sibling's argv[0]: its usage and errors name the command users typed.
const ARG0: &str = "scx_wakelab";

/// Replaces this process with the sibling, given the same arguments; returns only when
/// there is no sibling to trust or it cannot be executed, having told the library that the
/// command runs here, on the fixed heap (the limits of `scx_wakelab::heap` then apply).
pub fn hand_over() {
    exec_sibling();
    scx_wakelab::heap::declare_fixed_heap();
}

fn exec_sibling() {
    let Ok(exe) = std::env::current_exe() else {
        return;
    };
    let Some(dir) = exe.parent() else { return };
    // SAFETY: geteuid has no preconditions and cannot fail.
    let euid = unsafe { libc::geteuid() };
    let sibling = match open_trusted(dir, BINARY, euid) {
        Ok(fd) => fd,
        // A copy of this binary alone: nothing to say.
        Err(NotTrusted::Absent) => return,
        // Debug, not a warning: the command still runs, and its one error line (if any)
        // must stay the only line on stderr. (No offline command turns debug output on
        // today: --verbose is the scheduler's own option.)
        Err(NotTrusted::Refused(why)) => {
            log::debug!("running here, not in {BINARY}: {why}");
            return;
        }
    };
    let args: Vec<OsString> = std::env::args_os().skip(1).collect();
    let e = exec(&sibling, &args);
    // An exec that fails returns: the command then runs here.
    log::debug!("running here, not in {BINARY}: cannot execute it: {e}");
}

/// Why there is no sibling to hand over to.
#[derive(Debug, PartialEq)]
enum NotTrusted {
    /// `dir` has no entry of that name: this binary is installed alone.
    Absent,
    /// Something is there, or on the way there, that others could have written or
    /// swapped; the text says what.
    Refused(String),
}

/// The file `name` in `dir` (an absolute path without `.`, `..` or links, as
/// /proc/self/exe gives it), opened without being followed if it is a link (O_PATH: a
/// FIFO does not block, nothing is read), when that file and every directory from `/` to
/// it pass the checks of [`check_directory`] and [`check_file`], made on what was opened.
fn open_trusted(dir: &Path, name: &str, euid: u32) -> Result<OwnedFd, NotTrusted> {
    let refused = NotTrusted::Refused;
    if !dir.is_absolute() {
        return Err(refused(format!(
            "{} is not an absolute path",
            quote_path(dir)
        )));
    }
    let mut walked = PathBuf::from("/");
    let mut at = open_no_follow(None, OsStr::new("/")).map_err(|e| refused(e.to_string()))?;
    let mut last = status(&at).map_err(|e| refused(e.to_string()))?;
    for component in dir.components() {
        let part = match component {
            Component::RootDir => continue,
            Component::Normal(part) => part,
            _ => {
                return Err(refused(format!("{} is not a plain path", quote_path(dir))));
            }
        };
        // `walked` is an ancestor of the sibling's directory: it may be shared (sticky).
        check_directory(&last, &walked, euid, Sticky::Allowed).map_err(refused)?;
        walked.push(part);
        at = open_no_follow(Some(&at), part)
            .map_err(|e| refused(format!("{}: {e}", quote_path(&walked))))?;
        last = status(&at).map_err(|e| refused(format!("{}: {e}", quote_path(&walked))))?;
    }
    check_directory(&last, &walked, euid, Sticky::Refused).map_err(refused)?;
    let path = walked.join(name);
    let file = match open_no_follow(Some(&at), OsStr::new(name)) {
        Ok(fd) => fd,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Err(NotTrusted::Absent),
        Err(e) => return Err(refused(format!("{}: {e}", quote_path(&path)))),
    };
    let st = status(&file).map_err(|e| refused(format!("{}: {e}", quote_path(&path))))?;
    check_file(&st, &path, euid).map_err(refused)?;
    Ok(file)
}

/// Whether a directory others can write is acceptable when its sticky bit is set.
#[derive(Clone, Copy, PartialEq)]
enum Sticky {
    /// An ancestor: in a sticky directory (/tmp) others cannot rename or remove an entry
    /// they do not own, and the entry we take from it is itself checked to be ours or
    /// root's, so they cannot swap the next directory on the way.
    Allowed,
    /// The sibling's own directory: there others could still create the name while it
    /// does not exist, as a hard link to any program root owns (where
    /// fs.protected_hardlinks is off). Such a directory is no place to install into.
    Refused,
}

/// `st` (the directory `path`) belongs to root or `euid`, and no one else can add,
/// remove or rename its entries. The group and other write bits also carry an access
/// ACL's mask, so a directory an ACL lets others write is refused too.
fn check_directory(st: &libc::stat, path: &Path, euid: u32, sticky: Sticky) -> Result<(), String> {
    let shown = quote_path(path);
    if st.st_mode & libc::S_IFMT != libc::S_IFDIR {
        return Err(format!("{shown} is not a directory"));
    }
    owned_by_us_or_root(st, &shown, euid)?;
    let shared = st.st_mode & 0o022 != 0;
    let sticky_ok = sticky == Sticky::Allowed && st.st_mode & libc::S_ISVTX != 0;
    if shared && !sticky_ok {
        return Err(format!("the directory {shown} is writable by others"));
    }
    Ok(())
}

/// `st` (the file at `path`) is a regular file of root or `euid` that no one else can
/// write.
fn check_file(st: &libc::stat, path: &Path, euid: u32) -> Result<(), String> {
    let shown = quote_path(path);
    match st.st_mode & libc::S_IFMT {
        libc::S_IFREG => {}
        libc::S_IFLNK => return Err(format!("{shown} is a symbolic link")),
        _ => return Err(format!("{shown} is not a regular file")),
    }
    owned_by_us_or_root(st, &shown, euid)?;
    if st.st_mode & 0o022 != 0 {
        return Err(format!("{shown} is writable by others"));
    }
    Ok(())
}

fn owned_by_us_or_root(st: &libc::stat, shown: &str, euid: u32) -> Result<(), String> {
    if st.st_uid != 0 && st.st_uid != euid {
        return Err(format!("{shown} belongs to uid {}", st.st_uid));
    }
    Ok(())
}

/// `name` opened relative to `dir` (or the current directory, for an absolute name) as
/// an O_PATH descriptor: a link is opened as itself, not followed.
fn open_no_follow(dir: Option<&OwnedFd>, name: &OsStr) -> std::io::Result<OwnedFd> {
    let name = CString::new(name.as_bytes())
        .map_err(|_| std::io::Error::from(std::io::ErrorKind::InvalidInput))?;
    let at = dir.map_or(libc::AT_FDCWD, |d| d.as_raw_fd());
    // SAFETY: `name` is a NUL-terminated string that outlives the call; `at` is
    // AT_FDCWD or a descriptor `dir` keeps open.
    let fd = unsafe {
        libc::openat(
            at,
            name.as_ptr(),
            libc::O_PATH | libc::O_NOFOLLOW | libc::O_CLOEXEC,
        )
    };
    if fd < 0 {
        return Err(std::io::Error::last_os_error());
    }
    // SAFETY: openat returned a new descriptor that nothing else owns.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

/// fstat of what `fd` refers to (for an O_PATH descriptor of a link: the link).
fn status(fd: &OwnedFd) -> std::io::Result<libc::stat> {
    // SAFETY: an all-zero stat is a valid value of this plain C struct.
    let mut st: libc::stat = unsafe { std::mem::zeroed() };
    // SAFETY: `fd` is open for the call and `st` is a writable stat.
    if unsafe { libc::fstat(fd.as_raw_fd(), &mut st) } != 0 {
        return Err(std::io::Error::last_os_error());
    }
    Ok(st)
}

/// Executes the file open as `program` (execveat with AT_EMPTY_PATH: the descriptor,
/// not a name) with argv[0] ARG0, then `args`, and this process's environment. Returns
/// only on failure: then this process goes on as before. `program` is close-on-exec,
/// so a script cannot be run this way (its interpreter would need the descriptor);
/// the sibling is a binary.
fn exec(program: &OwnedFd, args: &[OsString]) -> std::io::Error {
    let to_c = |bytes: Vec<u8>| CString::new(bytes).ok();
    let argv: Option<Vec<CString>> = std::iter::once(ARG0.as_bytes().to_vec())
        .chain(args.iter().map(|a| a.as_bytes().to_vec()))
        .map(to_c)
        .collect();
    let envp: Option<Vec<CString>> = std::env::vars_os()
        .map(|(key, value)| {
            let mut entry = key.into_vec();
            entry.push(b'=');
            entry.extend_from_slice(value.as_bytes());
            to_c(entry)
        })
        .collect();
    // Arguments and the environment come from the kernel as C strings: a NUL inside
    // one cannot happen.
    let (Some(argv), Some(envp)) = (argv, envp) else {
        return std::io::Error::from(std::io::ErrorKind::InvalidInput);
    };
    let pointers = |strings: &[CString]| -> Vec<*const libc::c_char> {
        strings
            .iter()
            .map(|s| s.as_ptr())
            .chain(std::iter::once(std::ptr::null()))
            .collect()
    };
    let (argv_ptrs, envp_ptrs) = (pointers(&argv), pointers(&envp));
    const EMPTY: &CStr = c"";
    // The sibling starts as std's Command would start it: SIGPIPE (which the Rust
    // runtime ignores) back to its default, no signal blocked.
    // SAFETY: SIG_DFL is a valid disposition; the previous one is restored below if
    // the exec fails.
    let sigpipe = unsafe { libc::signal(libc::SIGPIPE, libc::SIG_DFL) };
    // SAFETY: an all-zero sigset_t is a valid value (sigemptyset then initialises it).
    let (mut none, mut previous_mask): (libc::sigset_t, libc::sigset_t) =
        unsafe { (std::mem::zeroed(), std::mem::zeroed()) };
    // SAFETY: both sets are valid, writable sigset_t values.
    unsafe {
        libc::sigemptyset(&mut none);
        libc::pthread_sigmask(libc::SIG_SETMASK, &none, &mut previous_mask);
    }
    // SAFETY: `program` is an open descriptor; the path is an empty C string, as
    // AT_EMPTY_PATH requires; argv and envp are NULL-terminated arrays of pointers to
    // NUL-terminated strings, all of which (`argv`, `envp` and their pointer vectors)
    // outlive the call.
    unsafe {
        libc::syscall(
            libc::SYS_execveat,
            program.as_raw_fd(),
            EMPTY.as_ptr(),
            argv_ptrs.as_ptr(),
            envp_ptrs.as_ptr(),
            libc::AT_EMPTY_PATH,
        );
    }
    let e = std::io::Error::last_os_error();
    // SAFETY: restores the disposition and mask saved above, both valid.
    unsafe {
        libc::pthread_sigmask(libc::SIG_SETMASK, &previous_mask, std::ptr::null_mut());
        libc::signal(libc::SIGPIPE, sigpipe);
    }
    e
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    fn euid() -> u32 {
        // SAFETY: geteuid has no preconditions and cannot fail.
        unsafe { libc::geteuid() }
    }

    fn set_mode(p: &Path, mode: u32) {
        std::fs::set_permissions(p, std::fs::Permissions::from_mode(mode)).unwrap();
    }

    /// A test's own directory, removed with all in it when the test ends.
    struct Scratch(PathBuf);

    impl std::ops::Deref for Scratch {
        type Target = Path;
        fn deref(&self) -> &Path {
            &self.0
        }
    }

    impl Drop for Scratch {
        fn drop(&mut self) {
            let gone = std::fs::remove_dir_all(&self.0);
            // A failed test is already unwinding: a second panic would abort the run.
            if !std::thread::panicking() {
                gone.unwrap();
            }
        }
    }

    /// A fresh directory of ours, mode 0755, under the temporary directory (which is
    /// sticky, so as an ancestor it passes).
    fn dir(name: &str) -> Scratch {
        let d = std::env::temp_dir().join(format!("wl-offline-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        std::fs::create_dir_all(&d).unwrap();
        set_mode(&d, 0o755);
        Scratch(d)
    }

    /// A regular file `name` in `d` with `mode`.
    fn file(d: &Path, name: &str, mode: u32) -> PathBuf {
        let p = d.join(name);
        std::fs::write(&p, "not run by these tests\n").unwrap();
        set_mode(&p, mode);
        p
    }

    fn refused(dir: &Path) -> String {
        match open_trusted(dir, BINARY, euid()) {
            Err(NotTrusted::Refused(why)) => why,
            other => panic!("expected a refusal in {}, got {other:?}", dir.display()),
        }
    }

    /// The binary in `dir` is refused, the reason ending with `tail`.
    fn assert_refused(dir: &Path, tail: &str) {
        let e = refused(dir);
        assert!(e.ends_with(tail), "{}: {e}", dir.display());
    }

    /// Gives `p` to a uid that is neither root nor ours; false when we cannot (not root).
    fn give_away(p: &Path) -> bool {
        euid() == 0 && std::os::unix::fs::lchown(p, Some(65534), None).is_ok()
    }

    #[test]
    fn the_opened_file_is_what_was_checked() {
        let d = dir("ok");
        file(&d, BINARY, 0o755);
        let fd = open_trusted(&d, BINARY, euid()).unwrap();
        let checked = status(&fd).unwrap();
        // Whatever is put at the name afterwards, the descriptor is still the file that
        // passed: that file, not the name, is what gets executed.
        file(&d, "impostor", 0o777);
        std::fs::rename(d.join("impostor"), d.join(BINARY)).unwrap();
        let after = status(&fd).unwrap();
        assert_eq!(
            (after.st_dev, after.st_ino),
            (checked.st_dev, checked.st_ino)
        );
        assert_eq!(after.st_mode & 0o777, 0o755);
    }

    #[test]
    fn a_file_others_can_write_or_own_is_refused() {
        let d = dir("modes");
        let p = file(&d, BINARY, 0o755);
        for mode in [0o775, 0o757, 0o777, 0o4777] {
            set_mode(&p, mode);
            let e = refused(&d);
            assert!(e.contains("is writable by others"), "{mode:o}: {e}");
            assert!(!e.contains("directory"), "{mode:o}: {e}");
        }
        // Not executable by anyone is no reason to refuse it here: the exec fails and
        // the command runs in this process.
        set_mode(&p, 0o644);
        open_trusted(&d, BINARY, euid()).unwrap();
        set_mode(&p, 0o755);
        if give_away(&p) {
            assert_refused(&d, &format!("{BINARY} belongs to uid 65534"));
        }
    }

    #[test]
    fn links_to_a_good_file_are_refused() {
        let d = dir("links");
        file(&d, "real", 0o755);
        // A link, a chain of links, a link with a relative target, a dangling link, a
        // link to a directory: each refused as a link, never followed.
        for (target, via) in [
            (d.join("real"), None),
            (d.join("hop"), Some(d.join("real"))),
            (PathBuf::from("real"), None),
            (d.join("nowhere"), None),
            (d.to_path_buf(), None),
        ] {
            let _ = std::fs::remove_file(d.join("hop"));
            let _ = std::fs::remove_file(d.join(BINARY));
            if let Some(end) = via {
                std::os::unix::fs::symlink(end, d.join("hop")).unwrap();
            }
            std::os::unix::fs::symlink(&target, d.join(BINARY)).unwrap();
            let e = refused(&d);
            assert!(e.ends_with("is a symbolic link"), "{target:?}: {e}");
        }
    }

    #[test]
    fn a_directory_fifo_or_socket_is_refused_and_missing_is_absent() {
        let d = dir("kinds");
        assert_eq!(
            open_trusted(&d, BINARY, euid()).unwrap_err(),
            NotTrusted::Absent
        );
        std::fs::create_dir(d.join(BINARY)).unwrap();
        set_mode(&d.join(BINARY), 0o755);
        assert_refused(&d, "is not a regular file");
        std::fs::remove_dir(d.join(BINARY)).unwrap();
        // A FIFO: O_PATH does not open it for reading, so this returns (no writer).
        let fifo = CString::new(d.join(BINARY).as_os_str().as_bytes()).unwrap();
        // SAFETY: `fifo` is a NUL-terminated path.
        assert_eq!(unsafe { libc::mkfifo(fifo.as_ptr(), 0o755) }, 0);
        assert_refused(&d, "is not a regular file");
        std::fs::remove_file(d.join(BINARY)).unwrap();
        let _socket = std::os::unix::net::UnixListener::bind(d.join(BINARY)).unwrap();
        assert_refused(&d, "is not a regular file");
    }

    #[test]
    fn every_directory_on_the_way_is_checked() {
        let top = dir("dirs");
        let inner = top.join("a/b");
        std::fs::create_dir_all(&inner).unwrap();
        set_mode(&top.join("a"), 0o755);
        set_mode(&inner, 0o755);
        file(&inner, BINARY, 0o755);
        open_trusted(&inner, BINARY, euid()).unwrap();
        // The sibling's own directory, writable by its group, by others, or by others
        // but sticky: someone else could have put the file there.
        for mode in [0o775, 0o757, 0o1777] {
            set_mode(&inner, mode);
            let e = refused(&inner);
            assert!(
                e.contains("the directory") && e.contains("a/b is writable by others"),
                "{mode:o}: {e}"
            );
        }
        set_mode(&inner, 0o755);
        // An ancestor others can write: they could rename a/b away and put their own
        // directory there between a check and an exec.
        set_mode(&top.join("a"), 0o777);
        assert_refused(&inner, "/a is writable by others");
        // Sticky, it is as /tmp is: others cannot rename what is not theirs.
        set_mode(&top.join("a"), 0o1777);
        open_trusted(&inner, BINARY, euid()).unwrap();
        set_mode(&top.join("a"), 0o755);
        // An ancestor someone else owns: they can change it however they like.
        if give_away(&top.join("a")) {
            assert_refused(&inner, "/a belongs to uid 65534");
        }
    }

    #[test]
    fn a_directory_on_the_way_that_is_a_link_is_refused() {
        let top = dir("dirlink");
        std::fs::create_dir(top.join("real")).unwrap();
        set_mode(&top.join("real"), 0o755);
        file(&top.join("real"), BINARY, 0o755);
        std::os::unix::fs::symlink(top.join("real"), top.join("link")).unwrap();
        assert_refused(&top.join("link"), "link is not a directory");
        // Not a path the kernel gives for our own binary, and refused as such.
        for odd in ["relative/dir", "/tmp/../tmp"] {
            let e = refused(Path::new(odd));
            assert!(e.contains("path"), "{odd}: {e}");
        }
    }
}
