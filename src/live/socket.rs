//! The scheduler's one socket: its counters served through scx_stats, as the
//! scx schedulers serve theirs, and `set`, which flips a policy flag without
//! unloading. `scx_wakelab stats [--json] [--monitor SECS]`, the scheduler's
//! own `--stats SECS` printer, `--supervise`'s liveness check and
//! `scx_wakelab set` are its clients, and so is any scx_stats client.
//!
//! The protocol is scx_stats': one JSON request a line, one answer a line,
//! any number of requests on one connection.
//!   `{"req":"stats","args":{"target":"top"}}`  -> the LiveMetrics
//!   `{"req":"stats","args":{"target":"config"}}` -> the policy flags now
//!   `{"req":"stats_meta","args":{}}`           -> every counter described
//!   `{"req":"set","args":{"key":K,"value":V}}` -> `{"key":K,"value":V,"was":OLD}`
//! Answers are `{"errno":0,"args":{"resp":...}}`; a refusal has a non-zero
//! errno and the reason as `resp`. The descriptions come from stats.rs's one
//! list of counters (`#[derive(Stats)]`).
//!
//! The requests are read here rather than by scx_stats' own StatsServer,
//! whose listener reads request lines of any length, with a thread for every
//! connection, on the scheduler's fixed heap: one client sending a long line
//! without a newline could exhaust that heap and abort the scheduler. So a
//! connection is served only within bounds: MAX_CLIENTS at a time, a request
//! line of at most MAX_REQUEST bytes whole within REQUEST_DEADLINE of its
//! first byte, a connection closed after IDLE_LIMIT without a request. A
//! client we will not serve (not allowed, busy, a request too long or too
//! slow) gets one error answer and is closed. Who may connect, and how the
//! socket file is made, is local_access.rs's.
//!
//! A `set` waits for the scheduling thread, which takes changes between
//! batches (agent.rs, apply_control); each change is logged with its time so
//! that benchmark phases can be matched to settings.
//!
//! The clients are as strict as the server: one deadline for a whole request
//! (connecting, sending and the answer), an answer of at most MAX_ANSWER
//! bytes, and nothing but the answer the request calls for is believed.

use std::collections::BTreeMap;
use std::io::{Read, Write};
use std::os::fd::AsRawFd;
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::mpsc;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use anyhow::{Context, Result, anyhow, bail};
use log::{info, warn};
use scx_stats::{StatsErrno, StatsMeta, StatsRequest, StatsResponse};
use scx_wakelab::exit::{quote, quote_path};
use scx_wakelab::local_access::{self, Access};
use scx_wakelab::policy::Config;
use serde::Deserialize;
use serde_json::Value;

use super::stats::{LiveMetrics, stats_metas};

/// scx_stats' own default (StatsServer::new, StatsClient::new): where scx
/// tools look for a running scheduler's statistics.
pub const DEFAULT_SOCKET: &str = "/var/run/scx/root/stats";

/// Longest request line the server reads, newline excluded. The longest real
/// request (`set` with a flag name and value) is well under 200 bytes; a
/// bound keeps a client from growing the agent's fixed heap.
pub const MAX_REQUEST: usize = 4096;
/// Connections served at once. One more gets a "busy" answer.
const MAX_CLIENTS: usize = 8;
/// A client has this long to send a whole request line, however it trickles
/// it in, so a slow client holds its own slot and only for a while.
const REQUEST_DEADLINE: Duration = Duration::from_secs(5);
/// How long a connection may stay quiet between requests: a --monitor
/// client asks once per interval.
const IDLE_LIMIT: Duration = Duration::from_secs(120);
/// An answer the client does not read within this time is dropped.
const WRITE_TIMEOUT: Duration = Duration::from_secs(2);
/// How long a `set` waits for the scheduling thread, which looks at the queue
/// at least every heartbeat (100 ms) while it runs.
const APPLY_WAIT: Duration = Duration::from_secs(5);
/// The server's threads are small: if the agent has locked its memory
/// (mlockall with MCL_FUTURE), each thread's whole stack is locked too.
const THREAD_STACK: usize = 256 * 1024;
/// At most one log line about refused peers per this interval, so that a
/// local user cannot flood the log.
const REFUSAL_LOG_EVERY: Duration = Duration::from_secs(10);
/// Longest answer a client reads: a `top` object is a few KiB.
pub const MAX_ANSWER: usize = 1 << 20;
/// A client's deadline for one whole request unless told otherwise
/// (`--timeout`).
pub const DEFAULT_CLIENT_TIMEOUT: Duration = Duration::from_secs(5);

/// A `set` waiting for the scheduling thread.
pub struct ControlRequest {
    pub key: String,
    pub value: String,
    reply: mpsc::Sender<(Result<String, String>, Config)>,
}

impl ControlRequest {
    /// Answer with the old value (Ok) or the reason (Err), and the config now.
    pub fn respond(self, result: Result<String, String>, config: Config) {
        let _ = self.reply.send((result, config));
    }
}

/// `set`s for the scheduling thread, which takes them between batches.
/// `pending` lets a spinning agent notice one without taking the lock. The
/// server never queues more than MAX_CLIENTS requests.
#[derive(Clone, Default)]
pub struct ControlQueue {
    queue: Arc<Mutex<Vec<ControlRequest>>>,
    pending: Arc<AtomicBool>,
}

impl ControlQueue {
    /// The pending requests, if any and if the lock is free right now.
    pub fn try_take(&self) -> Option<Vec<ControlRequest>> {
        if !self.has_requests() {
            return None;
        }
        let mut q = self.queue.try_lock().ok()?;
        self.pending.store(false, Ordering::Relaxed);
        if q.is_empty() {
            None
        } else {
            Some(std::mem::take(&mut *q))
        }
    }

    /// Whether a request waits (no lock taken).
    pub fn has_requests(&self) -> bool {
        self.pending.load(Ordering::Relaxed)
    }

    fn push(&self, r: ControlRequest) {
        if let Ok(mut q) = self.queue.lock() {
            q.push(r);
            self.pending.store(true, Ordering::Relaxed);
        }
    }
}

/// What the server answers from: the metrics and config the scheduling
/// thread last published, and where `set`s go.
#[derive(Clone)]
pub struct Shared {
    pub metrics: Arc<Mutex<LiveMetrics>>,
    pub config: Arc<Mutex<Config>>,
    pub queue: ControlQueue,
}

/// Check, before anything is loaded, that `path` can become the socket:
/// nothing there, or a stale socket of ours; `serve` checks again.
pub fn check_socket(path: &Path, access: &Access) -> Result<()> {
    let addr = local_access::sockaddr(path)?;
    local_access::check_socket_path(path, &addr, access.uid).map(|_| ())
}

/// The running server; stops it and removes its socket file (if still ours)
/// when dropped.
pub struct SocketServer {
    stop: Arc<AtomicBool>,
    thread: Option<std::thread::JoinHandle<()>>,
    path: PathBuf,
    id: local_access::FileId,
}

impl Drop for SocketServer {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
        local_access::remove_if_ours(&self.path, self.id);
    }
}

/// Bind the socket at `path` (making its missing directories) and serve it
/// until the returned server is dropped. The path is taken over only when
/// nothing is there or a stale socket of ours is.
pub fn serve(path: &Path, access: &Access, shared: Shared) -> Result<SocketServer> {
    let p = quote_path(path);
    let addr = local_access::sockaddr(path)?;
    local_access::clear_stale(path, &addr, access.uid)?;
    local_access::create_parent_dirs(path)?;
    let listener =
        local_access::bind_private(&addr).with_context(|| format!("binding the socket {p}"))?;
    let id = match local_access::secure_socket_file(path, access) {
        Ok(id) => id,
        Err(e) => {
            let _ = std::fs::remove_file(path);
            return Err(e);
        }
    };
    listener.set_nonblocking(true)?;
    let metas: Arc<BTreeMap<String, StatsMeta>> = Arc::new(
        stats_metas()
            .into_iter()
            .map(|m| (m.name.clone(), m))
            .collect(),
    );
    let stop = Arc::new(AtomicBool::new(false));
    let (thread_stop, access) = (stop.clone(), *access);
    let spawned = std::thread::Builder::new()
        .name("wakelab-socket".into())
        .stack_size(THREAD_STACK)
        .spawn(move || {
            let conn_stop = thread_stop.clone();
            accept_loop(&listener, &thread_stop, &access, move |stream| {
                serve_client(stream, &shared, &metas, &conn_stop)
            });
        });
    match spawned {
        Ok(thread) => Ok(SocketServer {
            stop,
            thread: Some(thread),
            path: path.to_path_buf(),
            id,
        }),
        Err(e) => {
            local_access::remove_if_ours(path, id);
            Err(e).context("starting the socket thread")
        }
    }
}

/// Counts a connection's slot; gives it back however its thread ends.
struct Slot(Arc<AtomicUsize>);

impl Drop for Slot {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::Relaxed);
    }
}

/// Accept clients until `stop`: each one whose credentials `access` allows
/// gets a thread running `handle`, at most MAX_CLIENTS at a time; others get
/// one error answer, from this thread, without a read.
fn accept_loop<F>(listener: &UnixListener, stop: &AtomicBool, access: &Access, handle: F)
where
    F: Fn(UnixStream) -> Result<()> + Clone + Send + 'static,
{
    let active = Arc::new(AtomicUsize::new(0));
    let mut refused = 0u64;
    let mut last_refusal_log: Option<Instant> = None;
    while !stop.load(Ordering::Relaxed) {
        let mut pfd = libc::pollfd {
            fd: listener.as_raw_fd(),
            events: libc::POLLIN,
            revents: 0,
        };
        // SAFETY: one pollfd. 100 ms: how soon a stop is noticed.
        unsafe { libc::poll(&mut pfd, 1, 100) };
        let stream = match listener.accept() {
            Ok((s, _)) => s,
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => continue,
            Err(e) => {
                // E.g. out of fds: do not spin on it.
                warn!("socket: {e}");
                std::thread::sleep(Duration::from_millis(200));
                continue;
            }
        };
        let peer = match local_access::admits(access, &stream) {
            Ok((peer, true)) => peer,
            Ok((peer, false)) => {
                refuse(
                    &stream,
                    libc::EACCES,
                    &format!(
                        "permission denied: uid {} may not use this scx_wakelab's socket",
                        peer.uid
                    ),
                );
                refused += 1;
                if last_refusal_log.is_none_or(|t| t.elapsed() >= REFUSAL_LOG_EVERY) {
                    warn!(
                        "socket: refused uid {} (pid {}); {refused} refused so far",
                        peer.uid, peer.pid
                    );
                    last_refusal_log = Some(Instant::now());
                }
                continue;
            }
            Err(e) => {
                warn!("socket: reading a client's credentials: {e}");
                continue;
            }
        };
        if active.load(Ordering::Relaxed) >= MAX_CLIENTS {
            refuse(
                &stream,
                libc::EBUSY,
                &format!("busy: {MAX_CLIENTS} clients connected, try again"),
            );
            continue;
        }
        active.fetch_add(1, Ordering::Relaxed);
        let slot = Slot(active.clone());
        let handle = handle.clone();
        let spawned = std::thread::Builder::new()
            .name("wakelab-sock-conn".into())
            .stack_size(THREAD_STACK)
            .spawn(move || {
                let _slot = slot;
                if let Err(e) = handle(stream) {
                    warn!(
                        "socket: client pid {}: {}",
                        peer.pid,
                        scx_wakelab::exit::escape(&format!("{e:#}"))
                    );
                }
            });
        if let Err(e) = spawned {
            // The closure, its slot and the stream were dropped with the error.
            warn!("socket: cannot start a thread for a client: {e}");
        }
    }
}

/// An scx_stats answer line: `resp` with `errno`.
fn answer_line(errno: i32, resp: Value) -> String {
    let r = StatsResponse {
        errno,
        args: [("resp".to_string(), resp)].into_iter().collect(),
    };
    let mut line = serde_json::to_string(&r).unwrap_or_default();
    line.push('\n');
    line
}

/// One error answer to a client we will not serve, from the accept thread:
/// non-blocking, so that the client cannot stall it, and nothing is read.
fn refuse(stream: &UnixStream, errno: i32, why: &str) {
    let _ = stream.set_nonblocking(true);
    let _ = (&*stream).write_all(answer_line(errno, Value::from(why)).as_bytes());
}

/// What came in on a connection.
#[derive(Debug, PartialEq, Eq)]
enum Incoming {
    Line(Vec<u8>),
    /// More than the limit without a newline.
    TooLong,
    /// No full line within the deadline.
    TimedOut,
    /// Closed without sending anything (e.g. another instance's probe).
    Closed,
}

/// Reads one line (newline excluded) of at most `max` bytes within
/// `deadline`, never buffering more than `max` + one read; `stop`, when
/// given, ends the wait early (as a time-out).
fn read_line_within(
    stream: &UnixStream,
    max: usize,
    deadline: Instant,
    stop: Option<&AtomicBool>,
) -> std::io::Result<Incoming> {
    let mut line: Vec<u8> = Vec::new();
    let mut chunk = [0u8; 512];
    loop {
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() || stop.is_some_and(|s| s.load(Ordering::Relaxed)) {
            return Ok(Incoming::TimedOut);
        }
        // Wake at least every 100 ms to look at `stop`.
        let wait = if stop.is_some() {
            left.min(Duration::from_millis(100))
        } else {
            left
        };
        stream.set_read_timeout(Some(wait))?;
        let want = chunk.len().min(max + 1 - line.len());
        let n = match (&*stream).read(&mut chunk[..want]) {
            Ok(n) => n,
            Err(e)
                if matches!(
                    e.kind(),
                    std::io::ErrorKind::Interrupted
                        | std::io::ErrorKind::WouldBlock
                        | std::io::ErrorKind::TimedOut
                ) =>
            {
                continue;
            }
            Err(e) => return Err(e),
        };
        if n == 0 {
            // A peer that shut down its side after a line without newline.
            if line.is_empty() {
                return Ok(Incoming::Closed);
            }
            return Ok(Incoming::Line(line));
        }
        if let Some(pos) = chunk[..n].iter().position(|&b| b == b'\n') {
            line.extend_from_slice(&chunk[..pos]);
            return Ok(Incoming::Line(line));
        }
        line.extend_from_slice(&chunk[..n]);
        if line.len() > max {
            return Ok(Incoming::TooLong);
        }
    }
}

/// Whether `s` has something to read (or was closed) within `limit`; false
/// as well once `stop` is set (looked at every 100 ms).
fn readable_within(s: &UnixStream, limit: Duration, stop: &AtomicBool) -> bool {
    let until = Instant::now() + limit;
    while !stop.load(Ordering::Relaxed) && Instant::now() < until {
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

/// One connection: each request answered in turn, until the client closes,
/// stays quiet for IDLE_LIMIT, or breaks a bound (answered, then closed).
/// The timer of a request starts at its first byte.
fn serve_client(
    stream: UnixStream,
    shared: &Shared,
    metas: &BTreeMap<String, StatsMeta>,
    stop: &AtomicBool,
) -> Result<()> {
    stream.set_nonblocking(false)?;
    stream.set_write_timeout(Some(WRITE_TIMEOUT))?;
    let send = |line: String| (&stream).write_all(line.as_bytes());
    while !stop.load(Ordering::Relaxed) {
        if !readable_within(&stream, IDLE_LIMIT, stop) {
            return Ok(());
        }
        let deadline = Instant::now() + REQUEST_DEADLINE;
        let line = match read_line_within(&stream, MAX_REQUEST, deadline, Some(stop))? {
            Incoming::Line(l) => l,
            Incoming::Closed => return Ok(()),
            Incoming::TooLong => {
                let why = format!("request longer than {MAX_REQUEST} bytes");
                send(answer_line(libc::EINVAL, Value::from(why)))?;
                return Ok(());
            }
            Incoming::TimedOut => {
                let why = format!(
                    "no complete request line within {} s",
                    REQUEST_DEADLINE.as_secs()
                );
                send(answer_line(libc::ETIMEDOUT, Value::from(why)))?;
                return Ok(());
            }
        };
        let (errno, resp) = match answer(&line, shared, metas, stop) {
            Ok(v) => (0, v),
            Err((errno, why)) => (errno, Value::from(why)),
        };
        send(answer_line(errno, resp))?;
    }
    Ok(())
}

/// The answer to one request line, or its errno and why.
fn answer(
    line: &[u8],
    shared: &Shared,
    metas: &BTreeMap<String, StatsMeta>,
    stop: &AtomicBool,
) -> Result<Value, (i32, String)> {
    let inval = |why: String| (libc::EINVAL, why);
    let text = std::str::from_utf8(line).map_err(|_| inval("request is not UTF-8".into()))?;
    let req: StatsRequest = serde_json::from_str(text.trim_end())
        .map_err(|e| inval(format!("request is not an scx_stats request: {e}")))?;
    match req.req.as_str() {
        "stats" => match req.args.get("target").map_or("top", String::as_str) {
            "top" => {
                let m = shared.metrics.lock().map(|m| m.clone()).unwrap_or_default();
                serde_json::to_value(m).map_err(|e| inval(e.to_string()))
            }
            "config" => {
                let c = shared.config.lock().map(|c| *c).unwrap_or_default();
                serde_json::to_value(c).map_err(|e| inval(e.to_string()))
            }
            other => Err(inval(format!(
                "unknown stats target {} (top, config)",
                quote(other)
            ))),
        },
        "stats_meta" => serde_json::to_value(metas).map_err(|e| inval(e.to_string())),
        "set" => {
            let (Some(key), Some(value)) = (req.args.get("key"), req.args.get("value")) else {
                return Err(inval("set needs args key and value".into()));
            };
            set(key, value, shared, stop).map_err(inval)
        }
        other => Err(inval(format!(
            "unknown request {} (stats, stats_meta, set)",
            quote(other)
        ))),
    }
}

/// Hands `key=value` to the scheduling thread and waits for its verdict.
fn set(key: &str, value: &str, shared: &Shared, stop: &AtomicBool) -> Result<Value, String> {
    let (tx, rx) = mpsc::channel();
    shared.queue.push(ControlRequest {
        key: key.to_string(),
        value: value.to_string(),
        reply: tx,
    });
    let asked = Instant::now();
    let verdict = loop {
        match rx.recv_timeout(Duration::from_millis(100)) {
            Ok(v) => break v,
            Err(mpsc::RecvTimeoutError::Timeout)
                if !stop.load(Ordering::Relaxed) && asked.elapsed() < APPLY_WAIT =>
            {
                continue;
            }
            Err(mpsc::RecvTimeoutError::Timeout) if !stop.load(Ordering::Relaxed) => {
                return Err(format!(
                    "the scheduling thread did not take the change within {} s; it may still apply it",
                    APPLY_WAIT.as_secs()
                ));
            }
            Err(_) => return Err("the scheduler is shutting down".to_string()),
        }
    };
    let (old, config) = (verdict.0?, verdict.1);
    let now = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap_or_default();
    info!(
        "config change at {:.3} (unix time): {}={} (was {old})",
        now.as_secs_f64(),
        scx_wakelab::exit::escape(key),
        scx_wakelab::exit::escape(value)
    );
    if let Ok(mut c) = shared.config.lock() {
        *c = config;
    }
    Ok(serde_json::json!({ "key": key, "value": value, "was": old }))
}

// ------------------------------------------------------------------------------------------
// Clients
// ------------------------------------------------------------------------------------------

/// An answer as the protocol has it, and nothing else.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Answer {
    errno: i32,
    args: AnswerArgs,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct AnswerArgs {
    resp: Value,
}

/// `set`'s answer.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SetAnswer {
    pub key: String,
    pub value: String,
    pub was: String,
}

/// A connection to a running scheduler's socket, kept for successive
/// requests (--monitor, --stats, the supervisor's checks). Each request has
/// one deadline for sending it and reading its whole answer, so a server that
/// is not scx_wakelab's, or one that dribbles, can neither hang nor bloat
/// the client.
pub struct Client {
    stream: UnixStream,
    path: PathBuf,
    timeout: Duration,
}

impl Client {
    /// Connects within `timeout`. No socket there, or no right to it, is one
    /// line saying what to do.
    pub fn connect(path: &Path, timeout: Duration) -> Result<Client> {
        let p = quote_path(path);
        let deadline = Instant::now() + timeout;
        let stream = loop {
            match UnixStream::connect(path) {
                Ok(s) => break s,
                // A full backlog: a live server that has not accepted yet.
                Err(e) if e.raw_os_error() == Some(libc::EAGAIN) && Instant::now() < deadline => {
                    std::thread::sleep(Duration::from_millis(20));
                }
                Err(e) if e.kind() == std::io::ErrorKind::PermissionDenied => bail!(
                    "permission denied on the socket {p}: it is for root, the scheduler's user and its --socket-group"
                ),
                Err(e) => bail!(
                    "no running scx_wakelab answers on {p} ({e}); start one first, or pass --socket"
                ),
            }
        };
        Ok(Client {
            stream,
            path: path.to_path_buf(),
            timeout,
        })
    }

    /// Sends `req` and returns its answer's `resp`; a refusal, a late or
    /// malformed answer is an error.
    pub fn call(&mut self, req: &StatsRequest) -> Result<Value> {
        let p = quote_path(&self.path);
        let deadline = Instant::now() + self.timeout;
        let late = || {
            anyhow!(
                "no answer on {p} within {:.1} s (--timeout)",
                self.timeout.as_secs_f64()
            )
        };
        let mut line = serde_json::to_string(req)?;
        line.push('\n');
        let left = deadline.saturating_duration_since(Instant::now());
        self.stream
            .set_write_timeout(Some(left.max(Duration::from_millis(1))))?;
        match (&self.stream).write_all(line.as_bytes()) {
            Ok(()) => {}
            Err(e)
                if matches!(
                    e.kind(),
                    std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
                ) =>
            {
                return Err(late());
            }
            Err(e) => return Err(e).with_context(|| format!("sending a request on {p}")),
        }
        let answer = match read_line_within(&self.stream, MAX_ANSWER, deadline, None)
            .with_context(|| format!("reading the answer on {p}"))?
        {
            Incoming::Line(l) => l,
            Incoming::Closed => {
                bail!("the scheduler closed the connection on {p} without answering")
            }
            Incoming::TooLong => {
                bail!("the answer on {p} is longer than {MAX_ANSWER} bytes: not an scx_wakelab")
            }
            Incoming::TimedOut => return Err(late()),
        };
        let not_ours = |why: String| anyhow!("the answer on {p} is not an scx_wakelab's ({why})");
        let text = std::str::from_utf8(&answer).map_err(|_| not_ours("not UTF-8".into()))?;
        // Before serde: a MAX_ANSWER line of small objects once parsed into more than this
        // binary's fixed heap holds, and aborted `stats`.
        scx_wakelab::json_limits::check(text).map_err(not_ours)?;
        let a: Answer = serde_json::from_str(text).map_err(|e| not_ours(e.to_string()))?;
        if a.errno != 0 {
            let why = match &a.args.resp {
                Value::String(s) => quote(s),
                other => quote(&other.to_string()),
            };
            bail!(
                "the scheduler on {p} refused the request: {} ({why})",
                StatsErrno(a.errno)
            );
        }
        Ok(a.args.resp)
    }

    /// scx_stats' `stats` request for `target`: its answer, which must be an
    /// object.
    pub fn stats(&mut self, target: &str) -> Result<Value> {
        let req = StatsRequest::new("stats", vec![("target".into(), target.into())]);
        let v = self.call(&req)?;
        if !v.is_object() {
            bail!(
                "the answer on {} to '{target}' is not an object: not an scx_wakelab's",
                quote_path(&self.path)
            );
        }
        Ok(v)
    }

    /// The counters, and `stats --json`'s object {"config","metrics"}.
    /// Counters a different version does not send count as zero; counters
    /// of the wrong type are refused.
    pub fn snapshot(&mut self) -> Result<(LiveMetrics, Value)> {
        let metrics = self.stats("top")?;
        let m = LiveMetrics::from_json(&metrics).map_err(|e| {
            anyhow!(
                "the counters on {} are not an scx_wakelab's ({e})",
                quote_path(&self.path)
            )
        })?;
        let config = self.stats("config")?;
        Ok((
            m,
            serde_json::json!({ "config": config, "metrics": metrics }),
        ))
    }

    /// `set key=value`: the old value, once the scheduler has applied it.
    pub fn set(&mut self, key: &str, value: &str) -> Result<SetAnswer> {
        let req = StatsRequest::new(
            "set",
            vec![("key".into(), key.into()), ("value".into(), value.into())],
        );
        let v = self.call(&req)?;
        let p = quote_path(&self.path);
        let a: SetAnswer = serde_json::from_value(v)
            .map_err(|e| anyhow!("the answer on {p} to set is not an scx_wakelab's ({e})"))?;
        if a.key != key || a.value != value {
            bail!(
                "the answer on {p} is about {}={}, not the change asked for",
                quote(&a.key),
                quote(&a.value)
            );
        }
        Ok(a)
    }
}

#[cfg(test)]
mod tests;
