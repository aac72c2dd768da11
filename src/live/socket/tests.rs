//! The one socket against real Unix sockets in a temporary directory, with a fake
//! scheduling thread taking `set`s: the round trip of `set` and `stats`, the file's mode
//! and group, the server's bounds (request length and deadline, clients at a time), the
//! paths it refuses to take over, other users turned away (when run as root), and clients
//! that believe only a well-formed answer from a server that may be hostile or slow.

use super::*;
use std::io::{BufRead, BufReader};
use std::os::fd::FromRawFd;
use std::os::unix::fs::{MetadataExt, PermissionsExt};

fn temp_path(tag: &str) -> PathBuf {
    std::env::temp_dir().join(format!("wakelab-sock-{}-{tag}", std::process::id()))
}

fn root_only() -> Access {
    Access::new(None).unwrap()
}

fn shared() -> Shared {
    Shared {
        metrics: Arc::new(Mutex::new(crate::live::stats::sample())),
        config: Arc::new(Mutex::new(Config::from_preset("mainline").unwrap())),
        queue: ControlQueue::default(),
    }
}

/// A root-only server on a fresh temp socket named after `tag`, with no
/// scheduling thread behind it (enough for everything but `set`).
fn serve_root_only(tag: &str) -> (PathBuf, SocketServer) {
    let path = temp_path(tag);
    let server = serve(&path, &root_only(), shared()).unwrap();
    (path, server)
}

fn client(path: &Path) -> Client {
    Client::connect(path, Duration::from_secs(10)).unwrap()
}

/// The server at `path` still answers with its counters.
fn assert_serves_stats(path: &Path) {
    let (m, _) = client(path).snapshot().unwrap();
    assert_eq!(m.nr_decisions, 123);
}

fn read_answer(s: &UnixStream) -> String {
    let mut line = String::new();
    let _ = BufReader::new(s).read_line(&mut line);
    line.trim_end().to_string()
}

/// A fake scheduling thread: applies `set`s to its own config until `stop`.
fn fake_agent(queue: ControlQueue, stop: Arc<AtomicBool>) -> std::thread::JoinHandle<()> {
    std::thread::spawn(move || {
        let mut cfg = Config::from_preset("mainline").unwrap();
        while !stop.load(Ordering::Relaxed) {
            for r in queue.try_take().unwrap_or_default() {
                let old = cfg.get(&r.key).unwrap_or_default();
                let res = cfg
                    .set(&r.key, &r.value)
                    .map(|_| old)
                    .map_err(|e| e.to_string());
                r.respond(res, cfg);
            }
            std::thread::sleep(Duration::from_millis(5));
        }
    })
}

/// `set` and `stats` on one socket, through our client and through
/// scx_stats' own: the counters, the config a `set` changed, the
/// descriptions, the file removed at the end.
#[test]
fn set_and_stats_round_trip_on_one_socket() {
    let dir = temp_path("dir");
    let path = dir.join("scx").join("stats");
    let sh = shared();
    let (metrics, config, queue) = (sh.metrics.clone(), sh.config.clone(), sh.queue.clone());
    let server = serve(&path, &root_only(), sh).unwrap();
    let md = std::fs::symlink_metadata(&path).unwrap();
    assert_eq!(md.mode() & 0o7777, 0o600, "no access for others");
    let stop = Arc::new(AtomicBool::new(false));
    let agent = fake_agent(queue, stop.clone());

    let mut c = client(&path);
    let a = c.set("sync_requires_task_waker", "true").unwrap();
    assert_eq!(
        (a.key.as_str(), a.value.as_str(), a.was.as_str()),
        ("sync_requires_task_waker", "true", "false")
    );
    assert!(config.lock().unwrap().sync_requires_task_waker);
    for (key, value) in [("no_such_flag", "1"), ("recent_used", "sideways")] {
        let e = c.set(key, value).unwrap_err().to_string();
        assert!(e.contains("refused the request") && e.contains(key), "{e}");
    }

    let (m, v) = c.snapshot().unwrap();
    assert_eq!(m.nr_decisions, 123);
    assert_eq!(m.policy.nr_wakeups_affine, 5);
    let line = v.to_string();
    for want in [
        "{\"config\":{",
        "\"sync_requires_task_waker\":true",
        "\"nr_decisions\":123",
        "\"nr_queued_to_agent\":7",
        "\"enqueue_to_run_hist\":[0,2,1]",
        "\"hop_hist\":[[],[],[0,",
    ] {
        assert!(line.contains(want), "{want} not in {line}");
    }
    // The same connection serves again, with what was published since.
    metrics.lock().unwrap().nr_decisions = 130;
    assert_eq!(c.snapshot().unwrap().0.delta(&m).nr_decisions, 7);
    let e = c.stats("nope").unwrap_err().to_string();
    assert!(e.contains("unknown stats target 'nope'"), "{e}");
    let e = c
        .call(&StatsRequest::new("frobnicate", vec![]))
        .unwrap_err()
        .to_string();
    assert!(e.contains("unknown request 'frobnicate'"), "{e}");

    // scx_stats' own client reads the same socket: counters and metadata.
    let mut sc = scx_stats::StatsClient::new()
        .set_path(&path)
        .connect(Some(10_000))
        .unwrap();
    let top: Value = sc
        .request("stats", vec![("target".into(), "top".into())])
        .unwrap();
    assert_eq!(top["nr_decisions"], 130);
    let meta: Value = sc.request("stats_meta", vec![]).unwrap();
    assert_eq!(meta["LiveMetrics"]["top"], "true");
    assert!(meta["LiveMetrics"]["fields"]["nr_decisions"]["desc"].is_string());
    assert!(meta["PolicyCounters"]["fields"]["nr_wakeups"]["desc"].is_string());

    stop.store(true, Ordering::Relaxed);
    agent.join().unwrap();
    drop((c, sc));
    drop(server);
    assert!(!path.exists(), "socket removed on shutdown");
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn no_server_is_a_clear_error() {
    let e = Client::connect(&temp_path("none"), Duration::from_secs(1))
        .err()
        .unwrap()
        .to_string();
    assert!(e.contains("no running scx_wakelab"), "{e}");
}

/// umask 000 is process-wide: it stays set only while the socket is
/// created, and no other test depends on the umask being restrictive.
#[test]
fn socket_is_0600_under_umask_000_and_0660_for_a_group() {
    let path = temp_path("umask");
    let old = unsafe { libc::umask(0) };
    let server = serve(&path, &root_only(), shared());
    unsafe { libc::umask(old) };
    let server = server.unwrap();
    let md = std::fs::symlink_metadata(&path).unwrap();
    assert_eq!(md.mode() & 0o7777, 0o600);
    assert_eq!(md.uid(), unsafe { libc::geteuid() });
    drop(server);

    let path = temp_path("group");
    let server = serve(&path, &Access::new(Some("65534")).unwrap(), shared()).unwrap();
    let md = std::fs::symlink_metadata(&path).unwrap();
    assert_eq!(md.mode() & 0o7777, 0o660);
    assert_eq!(md.gid(), 65534);
    drop(server);
}

/// A megabyte without a newline: one error answer, the connection closed
/// after at most MAX_REQUEST + one read, and the next client is served.
#[test]
fn overlong_request_is_refused_and_server_keeps_serving() {
    let (path, server) = serve_root_only("long");
    let s = UnixStream::connect(&path).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(30))).unwrap();
    let mut w = s.try_clone().unwrap();
    // The writer fails with EPIPE once the server closes: expected.
    let writer = std::thread::spawn(move || {
        let junk = vec![b'x'; 1 << 20];
        w.write_all(&junk).is_err()
    });
    let answer = read_answer(&s);
    assert!(
        answer.contains("request longer than 4096 bytes") && answer.contains("\"errno\":22"),
        "{answer}"
    );
    assert!(writer.join().unwrap(), "the server stopped reading");
    assert_serves_stats(&path);
    drop(server);
}

/// A request of exactly MAX_REQUEST bytes is still read as a request, and
/// a line that is not JSON is answered, not fatal to the connection.
#[test]
fn request_at_the_limit_is_read_and_garbage_answered() {
    let (path, server) = serve_root_only("limit");
    let mut s = UnixStream::connect(&path).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(30))).unwrap();
    let mut reader = BufReader::new(s.try_clone().unwrap());
    for req in [
        "y".repeat(MAX_REQUEST),
        "[1,2".to_string(),
        "\u{1b}]0;x".to_string(),
    ] {
        s.write_all(format!("{req}\n").as_bytes()).unwrap();
        let mut l = String::new();
        reader.read_line(&mut l).unwrap();
        assert!(
            l.contains("not an scx_stats request") && l.contains("\"errno\":22"),
            "{l}"
        );
    }
    s.write_all(b"{\"req\":\"stats\",\"args\":{\"target\":\"top\"}}\n")
        .unwrap();
    let mut l = String::new();
    reader.read_line(&mut l).unwrap();
    assert!(l.starts_with("{\"errno\":0,"), "{l}");
    drop(server);
}

/// A silent client and one trickling a byte a second do not keep a third
/// from being served; the trickler is told off and closed at the request
/// deadline (the limit is generous: only the order of events is judged).
#[test]
fn slow_clients_do_not_block_others() {
    let (path, server) = serve_root_only("slow");
    let _silent = UnixStream::connect(&path).unwrap();
    let trickle = UnixStream::connect(&path).unwrap();
    let mut w = trickle.try_clone().unwrap();
    let trickler = std::thread::spawn(move || {
        for _ in 0..(REQUEST_DEADLINE.as_secs() * 4) {
            if w.write_all(b"s").is_err() {
                break;
            }
            std::thread::sleep(Duration::from_secs(1));
        }
    });
    assert_serves_stats(&path);
    trickle
        .set_read_timeout(Some(REQUEST_DEADLINE * 6))
        .unwrap();
    let answer = read_answer(&trickle);
    assert!(
        answer.contains("no complete request line within 5 s"),
        "{answer}"
    );
    drop(trickle);
    trickler.join().unwrap();
    drop(server);
}

#[test]
fn too_many_clients_get_busy() {
    let (path, server) = serve_root_only("busy");
    let held: Vec<UnixStream> = (0..MAX_CLIENTS)
        .map(|_| UnixStream::connect(&path).unwrap())
        .collect();
    // Once the accept thread has taken all of them, the next one is told
    // "busy" (a fixed sleep for that is too short on a loaded host).
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        match Client::connect(&path, Duration::from_secs(10)).and_then(|mut c| c.snapshot()) {
            Err(e) if e.to_string().contains("busy:") => break,
            other => {
                assert!(Instant::now() < deadline, "never busy: {:?}", other.err());
                std::thread::sleep(Duration::from_millis(50));
            }
        }
    }
    drop(held);
    // The slots come back as their threads see the clients go.
    let deadline = Instant::now() + Duration::from_secs(30);
    while let Err(e) =
        Client::connect(&path, Duration::from_secs(10)).and_then(|mut c| c.snapshot())
    {
        assert!(e.to_string().contains("busy:"), "{e}");
        assert!(Instant::now() < deadline, "slots not given back: {e}");
        std::thread::sleep(Duration::from_millis(50));
    }
    drop(server);
}

/// The refusal's message, the same before loading and at creation, bad
/// input (exit 2) unless the path is in use (exit 1).
fn refusal(path: &Path) -> String {
    let early = check_socket(path, &root_only()).unwrap_err().to_string();
    let e = serve(path, &root_only(), shared()).err().unwrap();
    assert_eq!(early, e.to_string());
    let msg = e.to_string();
    let runtime = msg.contains("already running") || msg.contains("cannot tell");
    let want = if runtime { 1 } else { 2 };
    assert_eq!(scx_wakelab::exit::code_of(&e, 1), want, "{msg}");
    msg
}

#[test]
fn paths_that_are_not_a_stale_socket_of_ours_are_refused_and_kept() {
    // A regular file: refused and kept as it was.
    let file = temp_path("file");
    std::fs::write(&file, "precious").unwrap();
    assert!(refusal(&file).contains("is not a socket"));
    assert_eq!(std::fs::read_to_string(&file).unwrap(), "precious");
    // Beneath a regular file: no directory can be made there.
    assert!(refusal(&file.join("stats")).contains("not a directory"));
    std::fs::remove_file(&file).unwrap();

    // A symlink, even to a stale socket: refused, link and target kept.
    let target = temp_path("link-target");
    drop(UnixListener::bind(&target).unwrap());
    let link = temp_path("link");
    std::os::unix::fs::symlink(&target, &link).unwrap();
    assert!(refusal(&link).contains("symbolic link"));
    assert!(std::fs::symlink_metadata(&link).unwrap().is_symlink());
    assert!(std::fs::symlink_metadata(&target).is_ok());
    std::fs::remove_file(&link).unwrap();
    std::fs::remove_file(&target).unwrap();

    // A directory.
    let dir = temp_path("dir-refused");
    std::fs::create_dir(&dir).unwrap();
    assert!(refusal(&dir).contains("is not a socket"));
    std::fs::remove_dir(&dir).unwrap();

    // A live one: refused, still answering.
    let (live, server) = serve_root_only("live");
    assert!(refusal(&live).contains("already running"));
    assert_serves_stats(&live);
    drop(server);

    // A stale socket of another uid: refused, kept.
    let other = temp_path("other");
    drop(UnixListener::bind(&other).unwrap());
    std::os::unix::fs::chown(&other, Some(65534), None).unwrap();
    assert!(refusal(&other).contains("not ours"));
    assert!(std::fs::symlink_metadata(&other).is_ok());
    std::fs::remove_file(&other).unwrap();

    // Too long for a sockaddr_un.
    assert!(refusal(&std::env::temp_dir().join("x".repeat(200))).contains("too long"));

    // A stale one of ours is replaced.
    let stale = temp_path("stale");
    drop(UnixListener::bind(&stale).unwrap());
    check_socket(&stale, &root_only()).unwrap();
    let server = serve(&stale, &root_only(), shared()).unwrap();
    assert_serves_stats(&stale);
    drop(server);
}

/// A fake server on a temp socket that reads one request line and answers
/// with `answer`, then holds the connection for a while.
fn fake_server(tag: &str, answer: Vec<u8>) -> (PathBuf, std::thread::JoinHandle<()>) {
    let path = temp_path(tag);
    let _ = std::fs::remove_file(&path);
    let listener = UnixListener::bind(&path).unwrap();
    let server = std::thread::spawn(move || {
        let (mut s, _) = listener.accept().unwrap();
        let mut l = String::new();
        let _ = BufReader::new(&s).read_line(&mut l);
        let _ = s.write_all(&answer);
        std::thread::sleep(Duration::from_millis(300));
    });
    (path, server)
}

/// What a client says of servers that are not scx_wakelab's: one line, and
/// nothing believed that the request did not call for.
#[test]
fn clients_believe_only_a_well_formed_answer() {
    let cases: &[(&str, &[u8], &str)] = &[
        ("closes", b"", "without answering"),
        ("hello", b"hello there\n", "not an scx_wakelab's"),
        ("bare-json", b"{\"metrics\":{}}\n", "not an scx_wakelab's"),
        (
            "extra-field",
            b"{\"errno\":0,\"args\":{\"resp\":{}},\"x\":1}\n",
            "not an scx_wakelab's",
        ),
        (
            "errno",
            b"{\"errno\":13,\"args\":{\"resp\":\"go away\"}}\n",
            "'go away'",
        ),
        (
            "errno-newline",
            b"{\"errno\":1,\"args\":{\"resp\":\"a\\nb\"}}\n",
            "'a\\nb'",
        ),
        (
            "not-an-object",
            b"{\"errno\":0,\"args\":{\"resp\":[1,2,3]}}\n",
            "not an object",
        ),
        (
            "a-number",
            b"{\"errno\":0,\"args\":{\"resp\":42}}\n",
            "not an object",
        ),
        (
            "wrong-type",
            b"{\"errno\":0,\"args\":{\"resp\":{\"nr_decisions\":\"x\"}}}\n",
            "not an scx_wakelab's",
        ),
        ("deep", &[b'['; 100_000], "not an scx_wakelab's"),
        ("flood", &[b'{'; 2 << 20], "longer than"),
        // Within MAX_ANSWER, but more small objects than this binary's fixed heap holds
        // once parsed: refused from the text.
        ("many-objects", b"", "more than 65536 values"),
    ];
    for &(tag, answer, want) in cases {
        let mut answer = answer.to_vec();
        if tag == "many-objects" {
            let objects = format!("[{}]", vec![r#"{"a":0}"#; 15_000].join(","));
            let arrays = vec![objects; 8].join(",");
            answer = format!("{{\"errno\":0,\"args\":{{\"resp\":[{arrays}]}}}}\n").into_bytes();
            assert!(answer.len() < MAX_ANSWER);
        }
        if tag == "deep" {
            answer.push(b'\n');
        }
        let (path, server) = fake_server(tag, answer);
        let e = Client::connect(&path, Duration::from_secs(10))
            .unwrap()
            .snapshot()
            .unwrap_err()
            .to_string();
        assert!(e.contains(want) && !e.contains('\n'), "{tag}: {e}");
        server.join().unwrap();
        std::fs::remove_file(&path).unwrap();
    }

    // `set`: an answer about another change, or of another shape, is refused.
    for (tag, resp, want) in [
        (
            "set-other-key",
            "{\"key\":\"wa_idle\",\"value\":\"true\",\"was\":\"false\"}",
            "not the change asked for",
        ),
        (
            "set-shape",
            "{\"ok\":true}",
            "to set is not an scx_wakelab's",
        ),
        ("set-string", "\"ok\"", "to set is not an scx_wakelab's"),
    ] {
        let line = format!("{{\"errno\":0,\"args\":{{\"resp\":{resp}}}}}\n");
        let (path, server) = fake_server(tag, line.into_bytes());
        let e = Client::connect(&path, Duration::from_secs(10))
            .unwrap()
            .set("wa_weight", "false")
            .unwrap_err()
            .to_string();
        assert!(e.contains(want), "{tag}: {e}");
        server.join().unwrap();
        std::fs::remove_file(&path).unwrap();
    }
}

/// A server that sends a byte every half second never completes an answer
/// within the client's deadline: the request fails at the deadline (with a
/// generous margin: only that it ends is judged), however often bytes come.
#[test]
fn a_dribbling_server_cannot_hold_a_client() {
    let path = temp_path("dribble");
    let listener = UnixListener::bind(&path).unwrap();
    let stop = Arc::new(AtomicBool::new(false));
    let stop2 = stop.clone();
    let server = std::thread::spawn(move || {
        let (mut s, _) = listener.accept().unwrap();
        while !stop2.load(Ordering::Relaxed) {
            if s.write_all(b" ").is_err() {
                break;
            }
            std::thread::sleep(Duration::from_millis(500));
        }
    });
    let started = Instant::now();
    let e = Client::connect(&path, Duration::from_secs(2))
        .unwrap()
        .snapshot()
        .unwrap_err()
        .to_string();
    assert!(e.contains("no answer") && e.contains("within 2.0 s"), "{e}");
    assert!(
        started.elapsed() < Duration::from_secs(60),
        "{:?}",
        started.elapsed()
    );
    stop.store(true, Ordering::Relaxed);
    server.join().unwrap();
    std::fs::remove_file(&path).unwrap();
}

/// Connect as uid/gid 65534 in a forked child, send `request` (one line),
/// and return the first line of the answer, or "connect: ERRNO". The
/// child only makes syscalls (no allocation, no locks): the parent is
/// multi-threaded. It waits at most 10 s for an answer, so a server that
/// says nothing fails the test instead of hanging it.
fn ask_as_nobody(path: &Path, request: &[u8]) -> String {
    let addr = local_access::sockaddr(path).unwrap();
    let mut pipe = [0; 2];
    assert_eq!(unsafe { libc::pipe(pipe.as_mut_ptr()) }, 0);
    let pid = unsafe { libc::fork() };
    assert!(pid >= 0);
    if pid == 0 {
        // SAFETY: child of fork: syscalls only, then _exit.
        unsafe {
            libc::close(pipe[0]);
            let out = pipe[1];
            if libc::setgroups(0, std::ptr::null()) != 0
                || libc::setgid(65534) != 0
                || libc::setuid(65534) != 0
            {
                libc::_exit(2);
            }
            let fd = libc::socket(libc::AF_UNIX, libc::SOCK_STREAM, 0);
            if libc::connect(fd, (&addr.0 as *const libc::sockaddr_un).cast(), addr.1) != 0 {
                let errno = *libc::__errno_location();
                let msg: &[u8] = if errno == libc::EACCES {
                    b"connect: EACCES"
                } else {
                    b"connect: other"
                };
                libc::write(out, msg.as_ptr().cast(), msg.len());
                libc::_exit(0);
            }
            let limit = libc::timeval {
                tv_sec: 10,
                tv_usec: 0,
            };
            libc::setsockopt(
                fd,
                libc::SOL_SOCKET,
                libc::SO_RCVTIMEO,
                (&limit as *const libc::timeval).cast(),
                size_of::<libc::timeval>() as libc::socklen_t,
            );
            libc::write(fd, request.as_ptr().cast(), request.len());
            let mut buf = [0u8; 512];
            let mut got = 0;
            while got < buf.len() {
                let n = libc::read(fd, buf[got..].as_mut_ptr().cast(), buf.len() - got);
                if n <= 0 {
                    break;
                }
                got += n as usize;
                if buf[..got].contains(&b'\n') {
                    break;
                }
            }
            libc::write(out, buf.as_ptr().cast(), got);
            libc::_exit(0);
        }
    }
    unsafe { libc::close(pipe[1]) };
    let mut answer = String::new();
    let mut f = unsafe { std::fs::File::from_raw_fd(pipe[0]) };
    f.read_to_string(&mut answer).unwrap();
    let mut status = 0;
    unsafe { libc::waitpid(pid, &mut status, 0) };
    assert!(
        libc::WIFEXITED(status) && libc::WEXITSTATUS(status) == 0,
        "child status {status}"
    );
    answer.trim_end().to_string()
}

#[test]
fn other_users_are_refused() {
    if unsafe { libc::geteuid() } != 0 {
        // setuid() to another user needs root; the decision itself is
        // covered by local_access's access_decision.
        return;
    }
    const TOP: &[u8] = b"{\"req\":\"stats\",\"args\":{\"target\":\"top\"}}\n";
    let (path, server) = serve_root_only("peer");
    // The file's mode keeps them out...
    assert_eq!(ask_as_nobody(&path, TOP), "connect: EACCES");
    // ...and, were it loosened, the credential check does.
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o666)).unwrap();
    let answer = ask_as_nobody(&path, TOP);
    assert!(
        answer.contains("permission denied: uid 65534 may not use this scx_wakelab's socket")
            && answer.contains(&format!("\"errno\":{}", libc::EACCES)),
        "{answer}"
    );
    // Root is still served.
    assert_serves_stats(&path);
    drop(server);

    // A member of the allowed group is served.
    let path = temp_path("peer-group");
    let server = serve(&path, &Access::new(Some("65534")).unwrap(), shared()).unwrap();
    let answer = ask_as_nobody(&path, TOP);
    assert!(answer.starts_with("{\"errno\":0,"), "{answer}");
    drop(server);
}
