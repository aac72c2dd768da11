//! What other local users can reach of what root runs: the scheduler's Unix
//! socket, where `set` flips the placement policy of the whole machine and
//! `stats` reads its counters.
//!
//! - Who may connect: root, the scheduler's own uid and, if asked, the members
//!   of one group ([`Access`]). The socket file is never more than 0600 from
//!   the moment it exists, whatever the umask ([`bind_private`]), and is then
//!   given its mode and group (0660 and that group, with a group); each
//!   connection's credentials (SO_PEERCRED, SO_PEERGROUPS) are checked again
//!   ([`admits`]), which also covers a file whose mode someone loosened later.
//! - Which path may become the socket: nothing there, or a stale socket of
//!   ours (a killed instance's), which is removed. A symbolic link, another
//!   kind of file, another uid's socket or a socket something still answers
//!   on is refused and left as it is ([`check_socket_path`]), before anything
//!   is loaded and again when the socket is created. Missing directories above
//!   it are made, searchable, as scx's /var/run/scx/root needs
//!   ([`create_parent_dirs`]).
//! - The file just bound is inspected and given its mode and group through an
//!   O_PATH handle, so a link swapped in meanwhile is never followed
//!   ([`secure_socket_file`]); only that same file (device and inode) is
//!   removed on shutdown.
//!
//! Nothing here reads a request: the protocol and its bounds are the socket
//! server's (src/live/socket.rs).

use std::ffi::CString;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::{DirBuilderExt, FileTypeExt, MetadataExt};
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::Path;

use anyhow::{Context, Result, anyhow, bail};

/// An error in what the caller named (a path, a group): exit 2, not 1.
macro_rules! bail_input {
    ($($arg:tt)*) => {
        return Err(crate::exit::BadInput(format!($($arg)*)).into())
    };
}

/// Who may use the socket: root, the scheduler's own uid, and the members of
/// `group` when one is given.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Access {
    pub uid: u32,
    pub group: Option<u32>,
}

/// The credentials of a connected client, as the kernel recorded them when
/// it connected.
#[derive(Clone, Debug, Default)]
pub struct Peer {
    pub pid: i32,
    pub uid: u32,
    pub gid: u32,
    /// Supplementary groups; read only when a group is allowed.
    pub groups: Vec<u32>,
}

impl Access {
    /// The running uid, and the group named `group` (a name or a number).
    pub fn new(group: Option<&str>) -> Result<Access> {
        Ok(Access {
            uid: unsafe { libc::geteuid() },
            group: group.map(resolve_group).transpose()?,
        })
    }

    pub fn allows(&self, peer: &Peer) -> bool {
        peer.uid == 0
            || peer.uid == self.uid
            || self
                .group
                .is_some_and(|g| peer.gid == g || peer.groups.contains(&g))
    }

    /// The socket file's mode: no access for others in any case.
    fn mode(&self) -> u32 {
        if self.group.is_some() { 0o660 } else { 0o600 }
    }
}

/// The client's credentials, and whether `access` lets it in.
pub fn admits(access: &Access, stream: &UnixStream) -> std::io::Result<(Peer, bool)> {
    let peer = peer_of(stream, access.group.is_some())?;
    let allowed = access.allows(&peer);
    Ok((peer, allowed))
}

/// A group name or number to its gid.
fn resolve_group(name: &str) -> Result<u32> {
    if let Ok(gid) = name.parse::<u32>() {
        return Ok(gid);
    }
    let shown = crate::exit::quote(name);
    let cname = CString::new(name).map_err(|_| anyhow!("{shown} is not a group name"))?;
    let mut buf = vec![0u8; 1024];
    loop {
        let mut grp: libc::group = unsafe { std::mem::zeroed() };
        let mut found: *mut libc::group = std::ptr::null_mut();
        // SAFETY: every pointer refers to live memory of the size passed.
        let rc = unsafe {
            libc::getgrnam_r(
                cname.as_ptr(),
                &mut grp,
                buf.as_mut_ptr().cast(),
                buf.len(),
                &mut found,
            )
        };
        if rc == libc::ERANGE && buf.len() < (1 << 20) {
            buf.resize(buf.len() * 4, 0);
            continue;
        }
        if rc != 0 {
            bail!(
                "looking up the group {shown}: {}",
                std::io::Error::from_raw_os_error(rc)
            );
        }
        if found.is_null() {
            bail_input!("there is no group named {shown}");
        }
        return Ok(grp.gr_gid);
    }
}

/// SO_PEERCRED, and SO_PEERGROUPS when `with_groups`.
fn peer_of(stream: &UnixStream, with_groups: bool) -> std::io::Result<Peer> {
    let fd = stream.as_raw_fd();
    let mut cred: libc::ucred = unsafe { std::mem::zeroed() };
    let mut len = std::mem::size_of::<libc::ucred>() as libc::socklen_t;
    // SAFETY: cred is a ucred and len its size.
    let rc = unsafe {
        libc::getsockopt(
            fd,
            libc::SOL_SOCKET,
            libc::SO_PEERCRED,
            (&mut cred as *mut libc::ucred).cast(),
            &mut len,
        )
    };
    if rc != 0 {
        return Err(std::io::Error::last_os_error());
    }
    let mut peer = Peer {
        pid: cred.pid,
        uid: cred.uid,
        gid: cred.gid,
        groups: Vec::new(),
    };
    if with_groups {
        // NGROUPS_MAX is 65536; start small, the kernel says how much it needs.
        let mut groups = vec![0 as libc::gid_t; 64];
        loop {
            let mut len = std::mem::size_of_val(groups.as_slice()) as libc::socklen_t;
            // SAFETY: groups has len bytes.
            let rc = unsafe {
                libc::getsockopt(
                    fd,
                    libc::SOL_SOCKET,
                    libc::SO_PEERGROUPS,
                    groups.as_mut_ptr().cast(),
                    &mut len,
                )
            };
            let n = len as usize / std::mem::size_of::<libc::gid_t>();
            if rc == 0 {
                groups.truncate(n);
                peer.groups = groups;
                break;
            }
            let e = std::io::Error::last_os_error();
            if e.raw_os_error() == Some(libc::ERANGE) && n > groups.len() && n <= 65536 {
                groups.resize(n, 0);
                continue;
            }
            // An old kernel without SO_PEERGROUPS: the primary gid only.
            break;
        }
    }
    Ok(peer)
}

/// A socket path as a `sockaddr_un` and its used length.
pub type SockAddr = (libc::sockaddr_un, libc::socklen_t);

/// `path` as a sockaddr_un, or why it cannot be one.
pub fn sockaddr(path: &Path) -> Result<SockAddr> {
    let bytes = path.as_os_str().as_bytes();
    // SAFETY: sockaddr_un is plain data; all zeroes is a valid value.
    let mut addr: libc::sockaddr_un = unsafe { std::mem::zeroed() };
    addr.sun_family = libc::AF_UNIX as libc::sa_family_t;
    if bytes.is_empty() || bytes.contains(&0) {
        bail_input!(
            "{} is not a usable socket path",
            crate::exit::quote_path(path)
        );
    }
    if bytes.len() >= addr.sun_path.len() {
        bail_input!(
            "the socket path {} is too long ({} bytes; at most {})",
            crate::exit::quote_path(path),
            bytes.len(),
            addr.sun_path.len() - 1
        );
    }
    for (d, s) in addr.sun_path.iter_mut().zip(bytes) {
        *d = *s as libc::c_char;
    }
    let len = std::mem::offset_of!(libc::sockaddr_un, sun_path) + bytes.len() + 1;
    Ok((addr, len as libc::socklen_t))
}

fn unix_socket(flags: libc::c_int) -> std::io::Result<OwnedFd> {
    // SAFETY: plain syscall; a non-negative result is a new fd we own.
    let fd = unsafe { libc::socket(libc::AF_UNIX, libc::SOCK_STREAM | flags, 0) };
    if fd < 0 {
        return Err(std::io::Error::last_os_error());
    }
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

/// What a connection attempt says about the socket at a path.
#[derive(Debug)]
enum Probe {
    /// Something accepts connections there (or will: its backlog is full).
    Live,
    /// A socket file nobody listens on: what a killed instance leaves.
    Stale,
    Other(std::io::Error),
}

/// Connect without blocking: a live server with a full backlog must not
/// hang the scheduler's start.
fn probe(addr: &SockAddr) -> Probe {
    let fd = match unix_socket(libc::SOCK_NONBLOCK | libc::SOCK_CLOEXEC) {
        Ok(fd) => fd,
        Err(e) => return Probe::Other(e),
    };
    // SAFETY: addr is a sockaddr_un and addr.1 its used length.
    let rc = unsafe {
        libc::connect(
            fd.as_raw_fd(),
            (&addr.0 as *const libc::sockaddr_un).cast(),
            addr.1,
        )
    };
    if rc == 0 {
        return Probe::Live;
    }
    let e = std::io::Error::last_os_error();
    match e.raw_os_error() {
        Some(libc::EAGAIN) | Some(libc::EINPROGRESS) => Probe::Live,
        Some(libc::ECONNREFUSED) => Probe::Stale,
        _ => Probe::Other(e),
    }
}

/// Whether `path` may become our socket: nothing is there (false), or a
/// stale socket of ours that may be removed (true). Anything else is refused.
/// Missing parent directories are allowed: [`create_parent_dirs`] makes them,
/// as scx's /var/run/scx/root/ convention needs.
pub fn check_socket_path(path: &Path, addr: &SockAddr, uid: u32) -> Result<bool> {
    let p = crate::exit::quote_path(path);
    let md = match std::fs::symlink_metadata(path) {
        Ok(md) => md,
        // ENOTDIR: a parent is a file, which why_dirs_cannot_be_made names.
        Err(e)
            if e.kind() == std::io::ErrorKind::NotFound
                || e.raw_os_error() == Some(libc::ENOTDIR) =>
        {
            // Where bind() cannot create it: refused now, not after loading.
            if let Some(why) = why_dirs_cannot_be_made(path) {
                bail_input!("cannot create the socket {p}: {why}");
            }
            // Nor where its missing directories would be made in the kernel's own files:
            // there a directory is no directory but a kernel object (under
            // /sys/fs/cgroup, a cgroup).  Where the directory exists, bind() fails there
            // and makes nothing.
            if let Some(dir) = path
                .parent()
                .filter(|d| !d.as_os_str().is_empty() && !d.exists())
                && let Some((at, k)) = crate::kernel_fs::first_in_kernel_fs(dir)
            {
                bail_input!(
                    "the socket {p} needs directories made in the kernel's own files: {}; \
                     refusing to make them there",
                    k.describe(&at)
                );
            }
            return Ok(false);
        }
        Err(e) => bail_input!("cannot use {p} as the socket: {e}"),
    };
    let ft = md.file_type();
    if ft.is_symlink() {
        bail_input!("{p} is a symbolic link; refusing to replace it with the socket");
    }
    if !ft.is_socket() {
        bail_input!("{p} exists and is not a socket; refusing to replace it with the socket");
    }
    if md.uid() != uid {
        bail_input!(
            "{p} is a socket of uid {}, not ours (uid {uid}); refusing to replace it",
            md.uid()
        );
    }
    match probe(addr) {
        Probe::Live => bail!(
            "another scheduler is already running: something answers on the socket {p}; \
             stop it first, or give this one another --socket"
        ),
        Probe::Stale => Ok(true),
        Probe::Other(e) => {
            bail!("cannot tell whether {p} is in use ({e}); refusing to replace it")
        }
    }
}

/// Why the missing directories of `path` cannot be created: the path ends in
/// '/', or its nearest existing ancestor is not a directory.
fn why_dirs_cannot_be_made(path: &Path) -> Option<String> {
    if path.as_os_str().as_encoded_bytes().ends_with(b"/") {
        return Some("the path ends in '/'".to_string());
    }
    let mut dir = path.parent();
    while let Some(d) = dir {
        let d = if d.as_os_str().is_empty() {
            Path::new(".")
        } else {
            d
        };
        match std::fs::metadata(d) {
            Ok(md) if md.is_dir() => return None,
            Ok(_) => {
                return Some(format!("{} is not a directory", crate::exit::quote_path(d)));
            }
            // ENOTDIR: an ancestor further up is a file, named when reached.
            Err(e)
                if e.kind() == std::io::ErrorKind::NotFound
                    || e.raw_os_error() == Some(libc::ENOTDIR) =>
            {
                dir = d.parent()
            }
            Err(e) => return Some(format!("{}: {e}", crate::exit::quote_path(d))),
        }
    }
    None
}

/// Makes the missing directories above the socket, searchable as scx's
/// /var/run/scx/root is: the socket's own mode keeps others out.
pub fn create_parent_dirs(path: &Path) -> Result<()> {
    if let Some(dir) = path.parent()
        && !dir.as_os_str().is_empty()
        && !dir.exists()
    {
        std::fs::DirBuilder::new()
            .recursive(true)
            .mode(0o755)
            .create(dir)
            .with_context(|| format!("creating {} for the socket", crate::exit::quote_path(dir)))?;
    }
    Ok(())
}

/// Make way for our socket at `path`: nothing there, or a stale socket of
/// ours, which is removed. Anything else is left alone and refused.
pub fn clear_stale(path: &Path, addr: &SockAddr, uid: u32) -> Result<()> {
    if check_socket_path(path, addr, uid)? {
        std::fs::remove_file(path).with_context(|| {
            format!(
                "removing the stale socket {}",
                crate::exit::quote_path(path)
            )
        })?;
    }
    Ok(())
}

/// Bind and listen on `addr` with a socket file that is never more than
/// 0600: Linux creates the file with the socket inode's mode less the umask,
/// so the mode set here holds from the first instant whatever the umask.
pub fn bind_private(addr: &SockAddr) -> std::io::Result<UnixListener> {
    let fd = unix_socket(libc::SOCK_CLOEXEC)?;
    let raw = fd.as_raw_fd();
    // SAFETY: plain syscalls on our fd; addr as in probe().
    unsafe {
        if libc::fchmod(raw, 0o600) != 0 {
            return Err(std::io::Error::last_os_error());
        }
        if libc::bind(raw, (&addr.0 as *const libc::sockaddr_un).cast(), addr.1) != 0 {
            return Err(std::io::Error::last_os_error());
        }
        if libc::listen(raw, 128) != 0 {
            return Err(std::io::Error::last_os_error());
        }
    }
    Ok(UnixListener::from(fd))
}

fn fstat(fd: RawFd) -> std::io::Result<libc::stat> {
    let mut st: libc::stat = unsafe { std::mem::zeroed() };
    // SAFETY: st is a stat buffer.
    if unsafe { libc::fstat(fd, &mut st) } != 0 {
        return Err(std::io::Error::last_os_error());
    }
    Ok(st)
}

/// A file's identity: (device, inode).
pub type FileId = (u64, u64);

/// Give the socket file just bound at `path` its group and mode, explicitly
/// (the umask may have taken bits away) and verify them. Works on the file
/// through an O_PATH handle, so a symlink swapped in meanwhile is never
/// followed. Returns the file's identity, to remove only our own file on
/// shutdown ([`remove_if_ours`]).
pub fn secure_socket_file(path: &Path, access: &Access) -> Result<FileId> {
    let p = crate::exit::quote_path(path);
    let cpath = CString::new(path.as_os_str().as_bytes())?;
    // SAFETY: plain syscall; a non-negative result is a new fd we own.
    let raw = unsafe {
        libc::open(
            cpath.as_ptr(),
            libc::O_PATH | libc::O_NOFOLLOW | libc::O_CLOEXEC,
        )
    };
    if raw < 0 {
        bail!(
            "opening the socket {p} just created: {}",
            std::io::Error::last_os_error()
        );
    }
    let fd = unsafe { OwnedFd::from_raw_fd(raw) };
    let st = fstat(raw).with_context(|| format!("inspecting the socket {p}"))?;
    if st.st_mode & libc::S_IFMT != libc::S_IFSOCK || st.st_uid != access.uid {
        bail!("{p} was replaced while the socket was being created");
    }
    if let Some(gid) = access.group {
        // SAFETY: empty path with AT_EMPTY_PATH: the file fd refers to.
        if unsafe { libc::fchownat(raw, c"".as_ptr(), u32::MAX, gid, libc::AT_EMPTY_PATH) } != 0 {
            bail!(
                "giving the socket {p} to group {gid}: {}",
                std::io::Error::last_os_error()
            );
        }
    }
    let want = access.mode();
    if st.st_mode & 0o7777 != want {
        // chmod through /proc reaches the O_PATH fd's file, not the path.
        let via = format!("/proc/self/fd/{raw}");
        std::fs::set_permissions(&via, std::os::unix::fs::PermissionsExt::from_mode(want))
            .with_context(|| format!("setting the mode of the socket {p}"))?;
    }
    let st = fstat(raw).with_context(|| format!("inspecting the socket {p}"))?;
    if st.st_mode & 0o7777 != want || access.group.is_some_and(|g| st.st_gid != g) {
        bail!(
            "the socket {p} has mode {:o}, group {} after setting {want:o}",
            st.st_mode & 0o7777,
            st.st_gid
        );
    }
    drop(fd);
    Ok((st.st_dev, st.st_ino))
}

/// Removes `path` only if it is still the file `id`: a later instance may
/// have taken the path over.
pub fn remove_if_ours(path: &Path, id: FileId) {
    if let Ok(md) = std::fs::symlink_metadata(path)
        && (md.dev(), md.ino()) == id
    {
        let _ = std::fs::remove_file(path);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn temp_socket(tag: &str) -> std::path::PathBuf {
        std::env::temp_dir().join(format!("wakelab-acc-{}-{tag}.sock", std::process::id()))
    }

    fn root_only() -> Access {
        Access::new(None).unwrap()
    }

    #[test]
    fn unknown_group_is_a_clear_error() {
        let e = Access::new(Some("no-such-group-wakelab"))
            .unwrap_err()
            .to_string();
        assert!(e.contains("no group named 'no-such-group-wakelab'"), "{e}");
        assert_eq!(Access::new(Some("root")).unwrap().group, Some(0));
    }

    #[test]
    fn access_decision() {
        let a = Access {
            uid: 1000,
            group: None,
        };
        let peer = |uid, gid, groups: &[u32]| Peer {
            pid: 1,
            uid,
            gid,
            groups: groups.to_vec(),
        };
        assert!(a.allows(&peer(0, 0, &[])), "root");
        assert!(a.allows(&peer(1000, 1000, &[])), "our own uid");
        assert!(!a.allows(&peer(1001, 1000, &[1000])), "no group allowed");
        let g = Access {
            uid: 0,
            group: Some(42),
        };
        assert!(g.allows(&peer(1001, 42, &[])), "primary group");
        assert!(g.allows(&peer(1001, 7, &[3, 42])), "supplementary group");
        assert!(!g.allows(&peer(1001, 7, &[3, 43])), "other groups");
    }

    /// umask 000 is process-wide: it stays set only while the socket is
    /// created, and no other test depends on the umask being restrictive.
    #[test]
    fn a_bound_socket_is_born_0600_under_umask_000() {
        let bare = temp_socket("mode-bare");
        let old = unsafe { libc::umask(0) };
        let listener = bind_private(&sockaddr(&bare).unwrap());
        unsafe { libc::umask(old) };
        let _listener = listener.unwrap();
        let md = std::fs::symlink_metadata(&bare).unwrap();
        let _ = std::fs::remove_file(&bare);
        assert_eq!(md.mode() & 0o7777, 0o600, "born with mode 0600");
    }

    /// Where bind() cannot create the socket (a name ending in '/', a parent
    /// that is a file): refused as bad input before loading.
    #[test]
    fn a_socket_path_bind_cannot_create_is_refused() {
        let file = temp_socket("parent-file");
        std::fs::write(&file, "x").unwrap();
        let under_file = file.join("s.sock");
        let slash = std::path::PathBuf::from(format!("{}/", temp_socket("slash").display()));
        for p in [&under_file, &slash] {
            let e = check_socket_path(p, &sockaddr(p).unwrap(), root_only().uid).unwrap_err();
            assert_eq!(crate::exit::code_of(&e, 1), 2, "{e}");
            assert!(e.to_string().contains("cannot create the socket"), "{e}");
        }
        std::fs::remove_file(&file).unwrap();
    }

    /// Directories to make in /sys or /proc, by name or through a link: refused before
    /// anything is made.  A socket in a directory there that exists makes nothing (bind()
    /// fails there), and is left to fail so.
    #[test]
    fn a_socket_in_the_kernels_own_files_is_refused() {
        if !std::path::Path::new("/sys/kernel").is_dir() {
            return; // no sysfs here
        }
        let link = temp_socket("sys-link");
        let _ = std::fs::remove_file(&link);
        std::os::unix::fs::symlink("/sys/kernel", &link).unwrap();
        for (p, needle) in [
            (
                std::path::PathBuf::from("/sys/fs/cgroup/wakelab-no-such/s.sock"),
                "/sys is in the running machine's own sysfs",
            ),
            (
                std::path::PathBuf::from("/proc/wakelab-no-such/s.sock"),
                "own procfs",
            ),
            (
                link.join("no-such/s.sock"),
                "leads into the running machine's own sysfs",
            ),
        ] {
            let e = check_socket_path(&p, &sockaddr(&p).unwrap(), root_only().uid).unwrap_err();
            assert_eq!(crate::exit::code_of(&e, 1), 2, "{e}");
            let e = e.to_string();
            assert!(
                e.contains("needs directories made in the kernel's own files"),
                "{e}"
            );
            assert!(e.contains(needle), "{}: {e}", p.display());
        }
        assert!(!std::path::Path::new("/sys/fs/cgroup/wakelab-no-such").exists());
        let p = std::path::Path::new("/proc/wakelab.sock");
        assert!(!check_socket_path(p, &sockaddr(p).unwrap(), root_only().uid).unwrap());
        std::fs::remove_file(&link).unwrap();
    }

    #[test]
    fn a_stale_socket_of_ours_may_be_replaced_and_a_live_one_not() {
        let path = temp_socket("stale");
        drop(UnixListener::bind(&path).unwrap()); // the file stays
        let addr = sockaddr(&path).unwrap();
        assert!(check_socket_path(&path, &addr, root_only().uid).unwrap());
        clear_stale(&path, &addr, root_only().uid).unwrap();
        assert!(!path.exists());
        let listener = UnixListener::bind(&path).unwrap();
        let e = check_socket_path(&path, &addr, root_only().uid).unwrap_err();
        assert!(e.to_string().contains("already running"), "{e}");
        assert_eq!(crate::exit::code_of(&e, 1), 1, "{e}");
        drop(listener);
        std::fs::remove_file(&path).unwrap();
    }

    #[test]
    fn only_our_own_file_is_removed() {
        let path = temp_socket("ours");
        let listener = bind_private(&sockaddr(&path).unwrap()).unwrap();
        let id = secure_socket_file(&path, &root_only()).unwrap();
        drop(listener);
        // Made while the socket still exists, so it cannot reuse its inode.
        let other = temp_socket("other-file");
        std::fs::write(&other, "someone else's").unwrap();
        std::fs::rename(&other, &path).unwrap();
        remove_if_ours(&path, id);
        assert!(path.exists(), "another file at the path is left alone");
        std::fs::remove_file(&path).unwrap();
    }
}
