//! Stand-ins for `scx_wakelab-offline` that say whether they ran. They are binaries, not
//! scripts: scx_wakelab executes the descriptor it checked, close-on-exec, and a script's
//! interpreter could not open it (that exec fails and the command runs in-process, so a
//! script stand-in would never show that it was run, trusted or not).

use std::io::Write as _;
use std::path::Path;
use std::process::{Command, Stdio};

/// What the stand-in does.
#[derive(Clone, Copy, Debug)]
pub enum Role {
    /// Prints "handed over:" and its whole argv on stdout, exits 0.
    Trusted,
    /// Leaves a file in the directory named by IMPOSTOR_MARKERS (when set), prints
    /// "impostor ran" on stderr and exits IMPOSTOR_EXIT.
    Impostor,
}

/// The environment variable naming the directory where an impostor leaves its marker.
pub const IMPOSTOR_MARKERS: &str = "WAKELAB_TEST_IMPOSTOR_MARKERS";

/// The impostor's exit code: neither success nor any code of scx_wakelab's convention.
pub const IMPOSTOR_EXIT: i32 = 77;

const SOURCE: &str = r#"
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

int main(int argc, char **argv) {
#ifdef IMPOSTOR
    const char *dir = getenv("WAKELAB_TEST_IMPOSTOR_MARKERS");
    if (dir) {
        char path[4096];
        snprintf(path, sizeof path, "%s/impostor-%ld", dir, (long)getpid());
        int fd = open(path, O_CREAT | O_WRONLY | O_CLOEXEC, 0644);
        if (fd >= 0)
            close(fd);
    }
    fputs("impostor ran\n", stderr);
    return 77;
#else
    fputs("handed over:", stdout);
    for (int i = 0; i < argc; i++)
        printf(" %s", argv[i]);
    putchar('\n');
    return 0;
#endif
}
"#;

/// Compiles the stand-in for `role` into `out` (mode 0755) with the C compiler ($CC, else
/// cc: building scx_wakelab needs one already).
pub fn build(out: &Path, role: Role) {
    let cc = std::env::var_os("CC").unwrap_or_else(|| "cc".into());
    let mut cmd = Command::new(&cc);
    cmd.args(["-O1", "-x", "c", "-", "-o"]).arg(out);
    if matches!(role, Role::Impostor) {
        cmd.arg("-DIMPOSTOR");
    }
    let mut child = cmd
        .stdin(Stdio::piped())
        .spawn()
        .unwrap_or_else(|e| panic!("cannot run the C compiler {cc:?} for a stand-in sibling: {e}"));
    child
        .stdin
        .take()
        .unwrap()
        .write_all(SOURCE.as_bytes())
        .unwrap();
    let status = child.wait().unwrap();
    assert!(
        status.success(),
        "{cc:?} failed to build a stand-in sibling"
    );
    use std::os::unix::fs::PermissionsExt as _;
    std::fs::set_permissions(out, std::fs::Permissions::from_mode(0o755)).unwrap();
}
