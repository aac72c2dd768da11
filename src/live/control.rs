//! Talking to a running scx_wakelab: flip a policy flag without unloading
//! (`scx_wakelab set KEY=VALUE`) and read its counters (`scx_wakelab stats`).
//!
//! A Unix socket served by a helper thread (which BPF dispatches without the
//! agent, so a request never waits for the agent to place its own server).
//! One request per connection, one line each way:
//!   `set KEY=VALUE`  ->  `ok KEY=VALUE (was OLD)` | `error MESSAGE`
//!   `stats`          ->  one JSON object: {"metrics": ..., "config": ...}
//! The scheduling thread picks changes up between batches (agent.rs,
//! apply_control); the server logs each change with its time so that
//! benchmark phases can be matched to settings.

use std::io::{BufRead, BufReader, Write};
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc;
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use anyhow::{Context, Result, anyhow, bail};
use log::{info, warn};
use scx_wakelab::policy::Config;

use super::stats::LiveMetrics;

pub const DEFAULT_SOCKET: &str = "/run/scx_wakelab.sock";

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

/// Requests from the control socket for the scheduling thread, which takes
/// them between batches. `pending` lets a spinning agent notice one without
/// taking the lock.
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

/// State the server reads: the latest metrics and config.
pub struct Shared {
    pub metrics: Arc<Mutex<LiveMetrics>>,
    pub config: Arc<Mutex<Config>>,
}

/// Bind the socket and serve it on a thread until `shutdown`.
pub fn spawn_server(
    path: &Path,
    queue: ControlQueue,
    shared: Shared,
    shutdown: Arc<AtomicBool>,
) -> Result<std::thread::JoinHandle<()>> {
    if path.exists() {
        // A socket nobody answers on is a leftover of a killed instance.
        if UnixStream::connect(path).is_ok() {
            bail!("{} is in use by another scx_wakelab", path.display());
        }
        std::fs::remove_file(path).with_context(|| format!("removing stale {}", path.display()))?;
    }
    let listener = UnixListener::bind(path)
        .with_context(|| format!("binding the control socket {}", path.display()))?;
    listener.set_nonblocking(true)?;
    let path = path.to_path_buf();
    Ok(std::thread::spawn(move || {
        while !shutdown.load(Ordering::Relaxed) {
            match listener.accept() {
                Ok((stream, _)) => {
                    if let Err(e) = serve(stream, &queue, &shared, &shutdown) {
                        warn!("control request failed: {e:#}");
                    }
                }
                Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {
                    std::thread::sleep(Duration::from_millis(50));
                }
                Err(e) => {
                    warn!("control socket: {e}");
                    std::thread::sleep(Duration::from_millis(200));
                }
            }
        }
        let _ = std::fs::remove_file(&path);
    }))
}

fn serve(
    stream: UnixStream,
    queue: &ControlQueue,
    shared: &Shared,
    shutdown: &AtomicBool,
) -> Result<()> {
    stream.set_nonblocking(false)?;
    stream.set_read_timeout(Some(Duration::from_secs(5)))?;
    let mut line = String::new();
    BufReader::new(&stream).read_line(&mut line)?;
    let mut out = &stream;
    let line = line.trim();
    if line == "stats" {
        let metrics = shared.metrics.lock().map(|m| m.clone()).unwrap_or_default();
        let config = shared.config.lock().map(|c| *c).unwrap_or_default();
        let v = serde_json::json!({ "metrics": metrics, "config": config });
        writeln!(out, "{v}")?;
        return Ok(());
    }
    let Some(kv) = line.strip_prefix("set ") else {
        writeln!(
            out,
            "error unknown request '{line}' (expected 'set KEY=VALUE' or 'stats')"
        )?;
        return Ok(());
    };
    let Some((key, value)) = kv.split_once('=') else {
        writeln!(out, "error expected KEY=VALUE, got '{kv}'")?;
        return Ok(());
    };
    let (tx, rx) = mpsc::channel();
    queue.push(ControlRequest {
        key: key.trim().to_string(),
        value: value.trim().to_string(),
        reply: tx,
    });
    // The agent runs at least every heartbeat (100 ms); give it a while.
    let answer = loop {
        match rx.recv_timeout(Duration::from_millis(100)) {
            Ok(a) => break Some(a),
            Err(mpsc::RecvTimeoutError::Timeout) if !shutdown.load(Ordering::Relaxed) => continue,
            Err(_) => break None,
        }
    };
    match answer {
        Some((Ok(old), config)) => {
            let now = SystemTime::now()
                .duration_since(UNIX_EPOCH)
                .unwrap_or_default();
            info!(
                "config change at {:.3} (unix time): {key}={value} (was {old})",
                now.as_secs_f64()
            );
            if let Ok(mut c) = shared.config.lock() {
                *c = config;
            }
            writeln!(out, "ok {key}={value} (was {old})")?;
        }
        Some((Err(e), _)) => writeln!(out, "error {e}")?,
        None => writeln!(out, "error the scheduler is shutting down")?,
    }
    Ok(())
}

/// Client: send one request, return the one-line answer.
pub fn request(path: &Path, req: &str) -> Result<String> {
    let mut s = UnixStream::connect(path).map_err(|e| {
        anyhow!(
            "no running scx_wakelab answers on {} ({e}); start one first, or pass --socket",
            path.display()
        )
    })?;
    s.set_read_timeout(Some(Duration::from_secs(10)))?;
    writeln!(s, "{req}")?;
    let mut line = String::new();
    BufReader::new(&s)
        .read_line(&mut line)
        .context("reading the answer")?;
    if line.is_empty() {
        bail!("the scheduler closed the connection without answering");
    }
    Ok(line.trim_end().to_string())
}

pub fn socket_path(p: &Option<PathBuf>) -> PathBuf {
    p.clone().unwrap_or_else(|| PathBuf::from(DEFAULT_SOCKET))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn temp_socket(tag: &str) -> PathBuf {
        std::env::temp_dir().join(format!("wakelab-ctl-{}-{tag}.sock", std::process::id()))
    }

    /// The whole round trip with a fake scheduling thread applying changes.
    #[test]
    fn set_and_stats_round_trip() {
        let path = temp_socket("rt");
        let queue = ControlQueue::default();
        let config = Arc::new(Mutex::new(Config::from_preset("mainline").unwrap()));
        let shutdown = Arc::new(AtomicBool::new(false));
        let server = spawn_server(
            &path,
            queue.clone(),
            Shared {
                metrics: Arc::new(Mutex::new(LiveMetrics::default())),
                config: config.clone(),
            },
            shutdown.clone(),
        )
        .unwrap();
        // The "agent": applies requests to its own config.
        let agent_stop = Arc::new(AtomicBool::new(false));
        let stop = agent_stop.clone();
        let agent = std::thread::spawn(move || {
            let mut cfg = Config::from_preset("mainline").unwrap();
            while !stop.load(Ordering::Relaxed) {
                if let Some(reqs) = queue.try_take() {
                    for r in reqs {
                        let old = cfg.get(&r.key).unwrap_or_default();
                        let res = cfg
                            .set(&r.key, &r.value)
                            .map(|_| old)
                            .map_err(|e| e.to_string());
                        r.respond(res, cfg);
                    }
                }
                std::thread::sleep(Duration::from_millis(5));
            }
        });

        let ok = request(&path, "set sync_requires_task_waker=true").unwrap();
        assert_eq!(ok, "ok sync_requires_task_waker=true (was false)");
        assert!(config.lock().unwrap().sync_requires_task_waker);
        let bad = request(&path, "set no_such_flag=1").unwrap();
        assert!(
            bad.starts_with("error ") && bad.contains("no_such_flag"),
            "{bad}"
        );
        let bad = request(&path, "set recent_used=sideways").unwrap();
        assert!(bad.starts_with("error "), "{bad}");
        let stats: serde_json::Value =
            serde_json::from_str(&request(&path, "stats").unwrap()).unwrap();
        assert_eq!(
            stats["config"]["sync_requires_task_waker"],
            serde_json::json!(true)
        );
        assert!(stats["metrics"]["policy"]["nr_wakeups"].is_u64());

        agent_stop.store(true, Ordering::Relaxed);
        shutdown.store(true, Ordering::Relaxed);
        agent.join().unwrap();
        server.join().unwrap();
        assert!(!path.exists(), "socket removed on shutdown");
    }

    #[test]
    fn no_server_is_a_clear_error() {
        let e = request(&temp_socket("none"), "stats")
            .unwrap_err()
            .to_string();
        assert!(e.contains("no running scx_wakelab"), "{e}");
    }
}
