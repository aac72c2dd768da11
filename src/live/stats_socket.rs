//! The counters of a running scx_wakelab, served through scx_stats, as the
//! scx schedulers serve theirs: a `StatsServer` on its own Unix socket
//! (`--stats-socket`, by default scx's /var/run/scx/root/stats) answers
//! `stats_meta` with the descriptions `#[derive(Stats)]` builds from
//! stats.rs's one list, target `top` with the LiveMetrics the scheduling
//! thread publishes, and target `config` with the policy flags now.
//! `scx_wakelab stats [--json] [--monitor SECS]` and the scheduler's own
//! `--stats SECS` printer are its clients.
//!
//! The control socket (control.rs) runs beside it and keeps `set`, with its
//! limits on clients and requests, and a `stats` answer for --supervise's
//! liveness check.
//!
//! Clients do not talk to the scx_stats server directly: its listener reads
//! request lines of any length, with a thread per connection, on the fixed
//! heap of the scheduler's process, so one client sending a long line
//! without a newline could exhaust that heap and abort the scheduler. The
//! server listens on a private socket beside the public one (root only,
//! whatever --socket-group says), and a relay serves the public socket with
//! the control socket's bounds: its credential check, 8 clients at a time, a
//! request line of at most 4096 bytes within 5 s of its first byte, an
//! answer of at most 1 MiB.
//!
//! Who may read: the public socket is created with no access for others
//! whatever the umask, then set to 0600 (0660 and the group with
//! --socket-group) and verified, like the control socket, and the relay
//! checks each client's credentials as the control socket does. A path that
//! is not a stale socket of ours is refused, not replaced (the server itself
//! would remove whatever is there).

use std::io::{BufRead, BufReader, Read, Write};
use std::os::fd::AsRawFd;
use std::os::unix::fs::{DirBuilderExt, MetadataExt};
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use anyhow::{Context, Result, anyhow, bail};
use scx_stats::{StatsErrno, StatsRequest, StatsResponse, StatsServer, StatsServerData};
use scx_wakelab::policy::Config;
use serde_json::Value;

use super::control::{self, Access, SocketRole};
use super::stats::{LiveMetrics, stats_metas};

/// scx_stats' own default (StatsServer::new, StatsClient::new).
pub const DEFAULT_STATS_SOCKET: &str = "/var/run/scx/root/stats";

const STATS: SocketRole = SocketRole {
    what: "statistics socket",
    option: "--stats-socket",
    makes_dirs: true,
};

/// The scx_stats server's own socket, beside the public one, root only.
const INNER: SocketRole = SocketRole {
    what: "private statistics socket",
    option: "--stats-socket",
    // Made beside the public one, whose directories serve() creates first.
    makes_dirs: true,
};

/// How long a client may stay quiet between requests: a --monitor client
/// asks once per interval.
const IDLE_LIMIT: Duration = Duration::from_secs(120);

/// Longest answer a client reads: a `top` object is a few KiB.
const MAX_ANSWER: u64 = 1 << 20;
/// A server that does not take or answer a request within this is given up.
const CLIENT_TIMEOUT: Duration = Duration::from_secs(10);

/// Check, before anything is loaded, that `path` can become the statistics
/// socket: nothing there, or a socket of ours (whether it still answers is
/// asked when it is created, after the check for another scheduler).
pub fn check_stats_socket(path: &Path, access: &Access) -> Result<()> {
    control::check_socket_path(path, &control::sockaddr(path)?, access.uid, STATS, false)?;
    let inner = inner_path(path);
    control::check_socket_path(
        &inner,
        &control::sockaddr(&inner)?,
        access.uid,
        INNER,
        false,
    )
    .map(|_| ())
}

/// The running scx_stats server and its relay; stops both and removes their
/// socket files (if still ours) when dropped.
pub struct StatsSocket {
    server: Option<StatsServer<(), ()>>,
    relay: Option<std::thread::JoinHandle<()>>,
    stop: Arc<AtomicBool>,
    /// The public socket and the server's private one, each with the
    /// (dev, ino) of the file we created.
    files: [(PathBuf, (u64, u64)); 2],
}

impl Drop for StatsSocket {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(t) = self.relay.take() {
            let _ = t.join();
        }
        // StatsServer's drop stops its listener.
        drop(self.server.take());
        for (path, id) in &self.files {
            remove_if_ours(path, *id);
        }
    }
}

fn remove_if_ours(path: &Path, id: (u64, u64)) {
    if let Ok(md) = std::fs::symlink_metadata(path)
        && (md.dev(), md.ino()) == id
    {
        let _ = std::fs::remove_file(path);
    }
}

/// The server's private socket for the public `path`: a hidden name beside it.
fn inner_path(path: &Path) -> PathBuf {
    let name = path
        .file_name()
        .map_or_else(|| "stats".into(), |n| n.to_string_lossy().into_owned());
    path.with_file_name(format!(".{name}.scx_wakelab-server"))
}

/// The scx_stats server's data: every struct's description, and what each
/// target answers with.
fn server_data(
    metrics: Arc<Mutex<LiveMetrics>>,
    config: Arc<Mutex<Config>>,
) -> StatsServerData<(), ()> {
    let data = stats_metas()
        .into_iter()
        .fold(StatsServerData::new(), |d, meta| d.add_meta(meta));
    data.add_stats(
        "top",
        Box::new(move |_args, _chan| {
            let m = metrics.lock().map(|m| m.clone()).unwrap_or_default();
            Ok(serde_json::to_value(m)?)
        }),
    )
    .add_stats(
        "config",
        Box::new(move |_args, _chan| {
            let c = config.lock().map(|c| *c).unwrap_or_default();
            Ok(serde_json::to_value(c)?)
        }),
    )
}

/// Start the scx_stats server on its private socket and the relay on `path`,
/// taking each path over only when nothing is there or a stale socket of ours
/// is.
pub fn serve(
    path: &Path,
    access: &Access,
    metrics: Arc<Mutex<LiveMetrics>>,
    config: Arc<Mutex<Config>>,
) -> Result<StatsSocket> {
    let p = path.display();
    let addr = control::sockaddr(path)?;
    control::clear_stale(path, &addr, access.uid, STATS)?;
    if let Some(dir) = path.parent()
        && !dir.as_os_str().is_empty()
        && !dir.exists()
    {
        // Searchable, as scx's /var/run/scx/root is: the socket's own mode
        // is what keeps others out.
        std::fs::DirBuilder::new()
            .recursive(true)
            .mode(0o755)
            .create(dir)
            .with_context(|| format!("creating {} for the {}", dir.display(), STATS.what))?;
    }
    let inner = inner_path(path);
    let root_only = Access::new(None)?;
    control::clear_stale(&inner, &control::sockaddr(&inner)?, root_only.uid, INNER)?;
    // launch() binds the socket itself, with mode 0777 less the umask, before
    // secure_socket_file can set it: a umask that keeps everyone else out
    // closes that window. It is the process's, but nothing else creates files
    // meanwhile (the other threads serve sockets that exist) and a stricter
    // umask could only make another file stricter.
    let old = unsafe { libc::umask(0o077) };
    let launched = StatsServer::new(server_data(metrics, config))
        .set_path(&inner)
        .launch();
    unsafe { libc::umask(old) };
    let server = launched.with_context(|| format!("starting the scx_stats server for {p}"))?;
    let inner_id = match control::secure_socket_file(&inner, &root_only, INNER) {
        Ok(id) => id,
        Err(e) => {
            drop(server);
            let _ = std::fs::remove_file(&inner);
            return Err(e);
        }
    };
    let public = control::bind_private(&addr)
        .with_context(|| format!("binding the {} {p}", STATS.what))
        .and_then(|l| {
            let id = control::secure_socket_file(path, access, STATS)?;
            l.set_nonblocking(true)?;
            Ok((l, id))
        });
    let (listener, id) = match public {
        Ok(x) => x,
        Err(e) => {
            drop(server);
            remove_if_ours(&inner, inner_id);
            let _ = std::fs::remove_file(path);
            return Err(e);
        }
    };
    let stop = Arc::new(AtomicBool::new(false));
    let (stop2, access2, inner2) = (stop.clone(), *access, inner.clone());
    let relay = std::thread::Builder::new()
        .name("wakelab-stats".into())
        .stack_size(control::THREAD_STACK)
        .spawn(move || {
            let relay_stop = stop2.clone();
            control::accept_loop(&listener, &stop2, &access2, STATS, move |client| {
                relay(client, &inner2, &relay_stop)
            });
        })
        .context("starting the statistics socket thread");
    let mut socket = StatsSocket {
        server: Some(server),
        relay: None,
        stop,
        files: [(path.to_path_buf(), id), (inner, inner_id)],
    };
    socket.relay = Some(relay?);
    Ok(socket)
}

/// One client of the public socket: each request line, once it is whole and
/// within bounds, goes to the scx_stats server and its one-line answer back.
/// A client asks, then waits for the answer (as scx_stats' clients do):
/// bytes it sends after a newline before the answer are dropped.
fn relay(client: UnixStream, inner: &Path, stop: &AtomicBool) -> Result<()> {
    client.set_nonblocking(false)?;
    client.set_write_timeout(Some(control::WRITE_TIMEOUT))?;
    let server = UnixStream::connect(inner)
        .with_context(|| format!("connecting to the scx_stats server on {}", inner.display()))?;
    server.set_read_timeout(Some(CLIENT_TIMEOUT))?;
    server.set_write_timeout(Some(CLIENT_TIMEOUT))?;
    let mut answers = BufReader::new(server.try_clone()?);
    let refuse = |why: &str| -> Result<()> {
        let errno = libc::EINVAL;
        let v = serde_json::json!({ "errno": errno, "args": { "resp": why } });
        (&client).write_all(format!("{v}\n").as_bytes())?;
        Ok(())
    };
    while !stop.load(Ordering::Relaxed) {
        if !readable_within(&client, IDLE_LIMIT, stop) {
            return Ok(());
        }
        let line = match control::read_request(
            &client,
            control::MAX_REQUEST,
            control::REQUEST_DEADLINE,
        )? {
            control::Incoming::Line(l) => l,
            control::Incoming::Nothing => return Ok(()),
            control::Incoming::TooLong => {
                return refuse(&format!(
                    "request longer than {} bytes",
                    control::MAX_REQUEST
                ));
            }
            control::Incoming::TimedOut => {
                return refuse(&format!(
                    "no complete request line within {} s",
                    control::REQUEST_DEADLINE.as_secs()
                ));
            }
        };
        (&server).write_all(format!("{}\n", line.trim_end()).as_bytes())?;
        let mut answer = Vec::new();
        Read::take(&mut answers, MAX_ANSWER).read_until(b'\n', &mut answer)?;
        if !answer.ends_with(b"\n") {
            bail!("the scx_stats server's answer was cut or longer than {MAX_ANSWER} bytes");
        }
        (&client).write_all(&answer)?;
    }
    Ok(())
}

/// Whether `s` has something to read (or was closed) within `limit`; false
/// as well once `stop` is set (looked at every 100 ms).
fn readable_within(s: &UnixStream, limit: Duration, stop: &AtomicBool) -> bool {
    let until = std::time::Instant::now() + limit;
    while !stop.load(Ordering::Relaxed) && std::time::Instant::now() < until {
        let mut pfd = libc::pollfd {
            fd: s.as_raw_fd(),
            events: libc::POLLIN,
            revents: 0,
        };
        // SAFETY: one pollfd.
        if unsafe { libc::poll(&mut pfd, 1, 100) } > 0 {
            return true;
        }
    }
    false
}

/// A client connection to a statistics socket, kept for successive
/// requests (--monitor, --stats). Every answer is read with a bound on its
/// length and time, so a server that is not scx_wakelab's cannot hang or
/// bloat the client.
pub struct StatsConn {
    path: PathBuf,
    reader: BufReader<UnixStream>,
}

impl StatsConn {
    pub fn connect(path: &Path) -> Result<StatsConn> {
        let s = control::connect(path, STATS, "serves statistics", CLIENT_TIMEOUT)?;
        Ok(StatsConn {
            path: path.to_path_buf(),
            reader: BufReader::new(s),
        })
    }

    /// scx_stats' `stats` request for `target`: the answer's `resp`.
    pub fn request(&mut self, target: &str) -> Result<Value> {
        let p = self.path.display();
        let req = StatsRequest::new("stats", vec![("target".into(), target.into())]);
        let mut line = serde_json::to_string(&req)?;
        line.push('\n');
        self.reader
            .get_ref()
            .write_all(line.as_bytes())
            .with_context(|| format!("sending a request on {p}"))?;
        let mut answer = String::new();
        Read::take(&mut self.reader, MAX_ANSWER)
            .read_line(&mut answer)
            .with_context(|| format!("reading the answer on {p}"))?;
        if answer.is_empty() {
            bail!("the scheduler closed the connection on {p} without answering");
        }
        if !answer.ends_with('\n') && answer.len() as u64 >= MAX_ANSWER {
            bail!("the answer on {p} is longer than {MAX_ANSWER} bytes: not an scx_wakelab");
        }
        let mut resp: StatsResponse = serde_json::from_str(answer.trim_end())
            .map_err(|e| anyhow!("the answer on {p} is not JSON of an scx_stats server ({e})"))?;
        let body = resp.args.remove("resp").unwrap_or(Value::Null);
        if resp.errno != 0 {
            let why = body
                .as_str()
                .map_or_else(|| body.to_string(), str::to_string);
            bail!(
                "the server on {p} refused '{target}': {} ({why})",
                StatsErrno(resp.errno)
            );
        }
        Ok(body)
    }

    /// The counters (missing or unknown fields tolerated: client and server
    /// versions may differ) and `stats --json`'s object, {"config","metrics"}.
    pub fn snapshot(&mut self) -> Result<(LiveMetrics, Value)> {
        let metrics = self.request("top")?;
        let config = self.request("config")?;
        let m = LiveMetrics::from_json(&metrics);
        Ok((
            m,
            serde_json::json!({ "config": config, "metrics": metrics }),
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn temp_path(tag: &str) -> PathBuf {
        std::env::temp_dir().join(format!("wakelab-stats-{}-{tag}", std::process::id()))
    }

    fn shared() -> (Arc<Mutex<LiveMetrics>>, Arc<Mutex<Config>>) {
        (
            Arc::new(Mutex::new(crate::live::stats::sample())),
            Arc::new(Mutex::new(Config::from_preset("mainline").unwrap())),
        )
    }

    fn root_only() -> Access {
        Access::new(None).unwrap()
    }

    /// A scheduler's server (metrics and config behind it, no BPF) and a
    /// client on a temp socket: the counters, the JSON shape the lab's
    /// scripts parse, the descriptions, the mode, the file removed at the end.
    #[test]
    fn serves_counters_and_descriptions_on_a_private_socket() {
        let dir = temp_path("dir");
        let path = dir.join("scx").join("stats");
        let (metrics, config) = shared();
        let sock = serve(&path, &root_only(), metrics.clone(), config).unwrap();
        let md = std::fs::symlink_metadata(&path).unwrap();
        assert_eq!(md.mode() & 0o7777, 0o600, "no access for others");

        let mut c = StatsConn::connect(&path).unwrap();
        let (m, v) = c.snapshot().unwrap();
        assert_eq!(m.nr_decisions, 123);
        assert_eq!(m.policy.nr_wakeups_affine, 5);
        let line = v.to_string();
        for want in [
            "{\"config\":{",
            "\"nr_decisions\":123",
            "\"nr_queued_to_agent\":7",
            "\"nr_wakeups_affine\":5",
            "\"enqueue_to_run_hist\":[0,2,1]",
            "\"hop_hist\":[[],[],[0,",
            "\"recent_used\":",
        ] {
            assert!(line.contains(want), "{want} not in {line}");
        }
        // The same connection serves again, with what was published since.
        metrics.lock().unwrap().nr_decisions = 130;
        assert_eq!(c.snapshot().unwrap().0.delta(&m).nr_decisions, 7);

        // Every field described, as scx_stats' clients ask for it.
        let raw = {
            let s = c.reader.get_ref();
            (&*s)
                .write_all(b"{\"req\":\"stats_meta\",\"args\":{}}\n")
                .unwrap();
            let mut l = String::new();
            c.reader.read_line(&mut l).unwrap();
            l
        };
        let meta: Value = serde_json::from_str(&raw).unwrap();
        let top = &meta["args"]["resp"]["LiveMetrics"];
        assert_eq!(top["top"], "true");
        assert!(top["fields"]["nr_decisions"]["desc"].is_string(), "{top}");
        assert!(meta["args"]["resp"]["PolicyCounters"]["fields"]["nr_wakeups"]["desc"].is_string());

        let e = c.request("nope").unwrap_err().to_string();
        assert!(e.contains("refused 'nope'"), "{e}");

        // The server's own socket beside it: root's alone.
        let inner = std::fs::symlink_metadata(inner_path(&path)).unwrap();
        assert_eq!(inner.mode() & 0o7777, 0o600);

        drop(c);
        drop(sock);
        assert!(!path.exists(), "socket removed on shutdown");
        assert!(
            !inner_path(&path).exists(),
            "the server's socket removed too"
        );
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn a_group_may_read_and_nobody_else() {
        let path = temp_path("group");
        let (metrics, config) = shared();
        let sock = serve(&path, &Access::new(Some("65534")).unwrap(), metrics, config).unwrap();
        let md = std::fs::symlink_metadata(&path).unwrap();
        assert_eq!(md.mode() & 0o7777, 0o660);
        assert_eq!(md.gid(), 65534);
        drop(sock);
    }

    /// A well-formed scx_stats request: a malformed one would be answered
    /// with an error's Debug form, and with RUST_BACKTRACE set in the test's
    /// environment that symbolizes a backtrace on the fixed heap
    /// (main() turns library backtraces off for the scheduler itself).
    const STATS_META_REQUEST: &[u8] = b"{\"req\":\"stats_meta\",\"args\":{}}\n";

    /// Another user cannot even connect (the mode; scx_stats checks no
    /// credentials); the group's members can.
    #[test]
    fn other_users_cannot_connect() {
        if unsafe { libc::geteuid() } != 0 {
            return; // setuid() to another user needs root
        }
        let path = temp_path("nobody");
        let (metrics, config) = shared();
        let sock = serve(&path, &root_only(), metrics.clone(), config.clone()).unwrap();
        assert_eq!(
            control::tests::ask_as_nobody(&path, STATS_META_REQUEST),
            "connect: EACCES"
        );
        drop(sock);
        let sock = serve(&path, &Access::new(Some("65534")).unwrap(), metrics, config).unwrap();
        assert_ne!(
            control::tests::ask_as_nobody(&path, STATS_META_REQUEST),
            "connect: EACCES"
        );
        drop(sock);
    }

    /// umask 000 is process-wide; no other test depends on it being strict.
    #[test]
    fn socket_is_private_under_umask_000() {
        let path = temp_path("umask");
        let (metrics, config) = shared();
        let old = unsafe { libc::umask(0) };
        let sock = serve(&path, &root_only(), metrics, config);
        unsafe { libc::umask(old) };
        let sock = sock.unwrap();
        let md = std::fs::symlink_metadata(&path).unwrap();
        assert_eq!(md.mode() & 0o7777, 0o600);
        drop(sock);
    }

    #[test]
    fn paths_that_are_not_a_stale_socket_of_ours_are_refused_and_kept() {
        let (metrics, config) = shared();
        let file = temp_path("file");
        std::fs::write(&file, "precious").unwrap();
        for e in [
            check_stats_socket(&file, &root_only()).unwrap_err(),
            serve(&file, &root_only(), metrics.clone(), config.clone())
                .err()
                .unwrap(),
        ] {
            assert!(e.to_string().contains("is not a socket"), "{e}");
            assert_eq!(scx_wakelab::exit::code_of(&e, 1), 2);
        }
        assert_eq!(std::fs::read_to_string(&file).unwrap(), "precious");
        std::fs::remove_file(&file).unwrap();

        let link = temp_path("link");
        std::os::unix::fs::symlink("/nonexistent", &link).unwrap();
        let e = check_stats_socket(&link, &root_only()).unwrap_err();
        assert!(e.to_string().contains("symbolic link"), "{e}");
        std::fs::remove_file(&link).unwrap();

        // Beneath a regular file: no directory can be made there.
        let under = temp_path("under-file");
        std::fs::write(&under, "x").unwrap();
        let e = check_stats_socket(&under.join("stats"), &root_only()).unwrap_err();
        assert!(e.to_string().contains("ot a directory"), "{e}");
        std::fs::remove_file(&under).unwrap();

        // A live one (another scheduler's): refused at start, not before
        // loading, where the check for another scheduler speaks first.
        let live = temp_path("live");
        let sock = serve(&live, &root_only(), metrics.clone(), config.clone()).unwrap();
        check_stats_socket(&live, &root_only()).unwrap();
        let e = serve(&live, &root_only(), metrics.clone(), config.clone())
            .err()
            .unwrap();
        assert!(e.to_string().contains("already running"), "{e}");
        assert!(StatsConn::connect(&live).unwrap().snapshot().is_ok());
        drop(sock);

        // A stale one of ours is replaced.
        let stale = temp_path("stale");
        drop(std::os::unix::net::UnixListener::bind(&stale).unwrap());
        let sock = serve(&stale, &root_only(), metrics, config).unwrap();
        assert!(StatsConn::connect(&stale).unwrap().snapshot().is_ok());
        drop(sock);
    }

    /// What a client says of servers that are not scx_wakelab's, and of none.
    #[test]
    fn client_errors_are_one_clear_line() {
        let none = temp_path("none");
        let e = StatsConn::connect(&none).err().unwrap().to_string();
        assert!(e.contains("no running scx_wakelab"), "{e}");

        let cases: [(&str, &[u8], &str); 4] = [
            ("closes", b"", "without answering"),
            ("hello", b"hello there\n", "not JSON"),
            (
                "errno",
                b"{\"errno\":13,\"args\":{\"resp\":\"go away\"}}\n",
                "go away",
            ),
            ("deep", &[b'['; 100_000], "not JSON"),
        ];
        for (tag, answer, want) in cases {
            let path = temp_path(tag);
            let listener = std::os::unix::net::UnixListener::bind(&path).unwrap();
            let answer = answer.to_vec();
            let server = std::thread::spawn(move || {
                let (mut s, _) = listener.accept().unwrap();
                let mut l = String::new();
                BufReader::new(&s).read_line(&mut l).unwrap();
                let mut answer = answer;
                if tag == "deep" {
                    answer.push(b'\n');
                }
                s.write_all(&answer).unwrap();
            });
            let e = StatsConn::connect(&path)
                .unwrap()
                .snapshot()
                .unwrap_err()
                .to_string();
            assert!(e.contains(want), "{tag}: {e}");
            server.join().unwrap();
            std::fs::remove_file(&path).unwrap();
        }

        // A flood without a newline: read up to the bound, then refused.
        let path = temp_path("flood");
        let listener = std::os::unix::net::UnixListener::bind(&path).unwrap();
        let server = std::thread::spawn(move || {
            let (mut s, _) = listener.accept().unwrap();
            let _ = s.write_all(&vec![b'{'; 2 << 20]);
        });
        let e = StatsConn::connect(&path)
            .unwrap()
            .request("top")
            .unwrap_err()
            .to_string();
        assert!(e.contains("longer than"), "{e}");
        server.join().unwrap();
        std::fs::remove_file(&path).unwrap();
    }

    /// A client that sends a long line without a newline, or drips one,
    /// is answered with an scx_stats error and cut off; the server behind
    /// the relay never sees it and keeps answering others.
    #[test]
    fn the_relay_bounds_requests() {
        let path = temp_path("relay");
        let (metrics, config) = shared();
        let sock = serve(&path, &root_only(), metrics, config).unwrap();

        let mut flood = UnixStream::connect(&path).unwrap();
        flood
            .set_read_timeout(Some(Duration::from_secs(10)))
            .unwrap();
        // Far more than the bound, in pieces: the relay stops reading at
        // 4096 bytes and answers, so later writes may fail; that is fine.
        for _ in 0..64 {
            if flood.write_all(&[b'x'; 4096]).is_err() {
                break;
            }
        }
        let mut answer = String::new();
        BufReader::new(&flood).read_line(&mut answer).unwrap();
        assert!(
            answer.contains("request longer than 4096 bytes"),
            "{answer}"
        );
        assert!(answer.contains("\"errno\":22"), "{answer}");

        let mut drip = UnixStream::connect(&path).unwrap();
        drip.set_read_timeout(Some(Duration::from_secs(15)))
            .unwrap();
        drip.write_all(b"{").unwrap();
        let t0 = std::time::Instant::now();
        let mut answer = String::new();
        BufReader::new(&drip).read_line(&mut answer).unwrap();
        assert!(answer.contains("no complete request line"), "{answer}");
        assert!(t0.elapsed() < Duration::from_secs(8), "{:?}", t0.elapsed());

        let mut c = StatsConn::connect(&path).unwrap();
        assert_eq!(c.snapshot().unwrap().0.nr_decisions, 123);
        drop(c);
        drop(sock);
    }
}
