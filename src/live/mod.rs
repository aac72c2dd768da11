//! The live layer: the scheduler on a sched_ext kernel. It lives in the
//! scx_wakelab binary, not the library, because it runs on rustland_core's
//! fixed, locked heap (src/lib.rs).
//!
//! - agent.rs: the agent, which loads our BPF component (bpf/) and places
//!   every woken task from one pinned scheduling thread;
//! - protocol.rs: the agent's half of bpf/intf.h (typed messages, the two
//!   rings, the apply call, the shared .bss);
//! - placement.rs: the engine (src/policy) fed with live inputs;
//! - socket.rs and stats.rs: the one socket (scx_stats' counters, `set`) and
//!   the counters it serves;
//! - env_checks.rs: what must hold before loading.
//!
//! The agent's work per decision is measured outside this layer, by the test
//! driver src/agent_bench.rs.
//!
//! This file runs them: run_scheduler() loads, runs until Ctrl-C/SIGTERM or
//! until the kernel unloads us, reloads when the kernel asks (ACT_RESTART,
//! after CPU hotplug), and falls back from the fast lane to the decisions ring
//! when the kernel refuses the fast lane's program. Around the scheduling
//! thread it starts the threads that do what that thread must not (block, or
//! write to a file or a terminal): the socket server, the `--stats` printer,
//! the `--trace` writer. It also holds the clients of `scx_wakelab set` and
//! `stats`, and check_files(), which judges the socket and trace paths before
//! anything is loaded.

pub mod agent;
pub mod bpf_intf;
pub mod bpf_skel;
pub mod env_checks;
pub mod placement;
pub mod protocol;
pub mod socket;
pub mod stats;

use std::mem::MaybeUninit;
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use anyhow::{Context, Result};
use log::info;

use agent::{Agent, AgentConfig, ApplyPath};
use placement::{Placer, topology_from_scx};
use scx_wakelab::local_access::Access;
use scx_wakelab::policy::Config;
use scx_wakelab::trace_file::{Overwrite, check_trace_path, open_trace_file};
use socket::{Client, ControlQueue, Shared};
use stats::LiveMetrics;

/// Who besides root and our own uid may use the socket, and whether
/// `--trace` may replace an existing file. The defaults are the safe ones.
#[derive(Clone, Debug, Default)]
pub struct FileOptions {
    /// A group (name or number) whose members may use the socket.
    pub socket_group: Option<String>,
    /// Let `--trace` truncate an existing regular file.
    pub trace_overwrite: bool,
}

/// Load, run until Ctrl-C/SIGTERM or until the kernel unloads us, and
/// restart when the kernel asks (ACT_RESTART, e.g. after CPU hotplug, with
/// the topology read anew and the policy flags as they were last set).
/// The caller has judged the paths with check_files(); creating them
/// refuses the same paths again, with the same errors.
pub fn run_scheduler(
    cfg: AgentConfig,
    policy: Config,
    stats_interval: Option<f64>,
    socket: &Path,
    trace: Option<&Path>,
    files: &FileOptions,
) -> Result<()> {
    env_checks::check_can_load(Path::new("/sys"), unsafe { libc::geteuid() })?;
    let access = Access::new(files.socket_group.as_deref())?;

    let shutdown = Arc::new(AtomicBool::new(false));
    let flag = shutdown.clone();
    ctrlc::set_handler(move || flag.store(true, Ordering::Relaxed))
        .context("installing the Ctrl-C/SIGTERM handler")?;

    info!(
        "placement policy: {}",
        policy.describe().replace('\n', "; ")
    );
    let metrics = Arc::new(Mutex::new(LiveMetrics::default()));
    let config = Arc::new(Mutex::new(policy));
    let queue = ControlQueue::default();
    // Threads are started before the agent locks its memory. The socket
    // first: a socket that cannot be bound (another instance's, say) leaves
    // no trace file behind, and a trace file that cannot be made drops the
    // server, which removes its socket.
    let server = socket::serve(
        socket,
        &access,
        Shared {
            metrics: metrics.clone(),
            config: config.clone(),
            queue: queue.clone(),
        },
    )?;
    let tracer = trace
        .map(|p| spawn_trace_writer(p, files.trace_overwrite))
        .transpose()?;
    let printer = stats_interval
        .map(|secs| spawn_stats_printer(secs, socket.to_path_buf(), shutdown.clone()));

    let started = Instant::now();
    // The fast lane unless asked otherwise or the kernel refuses it; a
    // refusal is remembered across restarts.
    let mut fast_lane = cfg.apply_path != ApplyPath::Ring;
    let result = loop {
        let topo = scx_utils::Topology::new().context("reading the CPU topology from sysfs")?;
        // Logged at each (re)load: after CPU hotplug this is the new topology.
        let online = online_cpus(&topo);
        info!(
            "topology: {} CPUs online ({})",
            online.len(),
            cpu_ranges(&online)
        );
        let policy = config.lock().map(|c| *c).unwrap_or_default();
        let make_placer = || -> Result<Placer> {
            let mut placer = Placer::new(
                topology_from_scx(&topo)?,
                policy,
                unsafe { libc::gettid() },
                cfg.slice_ns,
                cfg.task_table_size,
            )?;
            placer.set_agent_spins(cfg.spin_us > 0);
            if let Some((tx, _)) = &tracer {
                placer.set_trace(tx.clone());
            }
            Ok(placer)
        };
        let mut open_object = MaybeUninit::uninit();
        let mut fallback_object = MaybeUninit::uninit();
        let first = Agent::init(
            &cfg,
            make_placer()?,
            &mut open_object,
            metrics.clone(),
            queue.clone(),
            fast_lane,
        );
        let mut agent = match first {
            Ok(agent) => agent,
            Err(e) if fast_lane && cfg.apply_path == ApplyPath::Auto => {
                // Perhaps only the fast lane's program was refused: try
                // without it, and report the first error only if that works.
                let agent = Agent::init(
                    &cfg,
                    make_placer()?,
                    &mut fallback_object,
                    metrics.clone(),
                    queue.clone(),
                    false,
                )?;
                log::warn!(
                    "the fast lane is not available on this kernel ({e:#}): decisions go through the decisions ring"
                );
                fast_lane = false;
                agent
            }
            Err(e) => return Err(e),
        };
        let exit = agent.run(&shutdown);
        drop(agent);
        match exit {
            Ok(uei) if uei.should_restart() => {
                info!("the kernel asked for a restart (e.g. CPU hotplug): reloading");
                continue;
            }
            other => break other,
        }
    };

    shutdown.store(true, Ordering::Relaxed);
    if let Some(h) = printer {
        let _ = h.join();
    }
    drop(server);
    if let Some((tx, writer)) = tracer {
        drop(tx);
        match writer.join() {
            Ok(Ok(n)) => info!("trace: {n} decisions written"),
            Ok(Err(e)) => log::warn!("trace: {e:#}"),
            Err(_) => log::warn!("trace writer failed"),
        }
    }
    let total = metrics.lock().map(|m| m.clone()).unwrap_or_default();
    info!(
        "exit report after {:.1}s:\n{}",
        started.elapsed().as_secs_f64(),
        total.format(started.elapsed().as_secs_f64())
    );
    // The same totals for scripts and tests, on one line.
    info!(
        "exit stats json: {}",
        serde_json::to_string(&total).unwrap_or_default()
    );
    result.map(|_| ())
}

/// The online CPUs of `topo`, in order.
pub(crate) fn online_cpus(topo: &scx_utils::Topology) -> Vec<usize> {
    let mut online: Vec<usize> = topo.all_cpus.keys().copied().collect();
    online.sort_unstable();
    online
}

/// "0-2,4-7" for [0, 1, 2, 4, 5, 6, 7].
pub(crate) fn cpu_ranges(cpus: &[usize]) -> String {
    let mut out: Vec<String> = Vec::new();
    let mut i = 0;
    while i < cpus.len() {
        let mut j = i;
        while j + 1 < cpus.len() && cpus[j + 1] == cpus[j] + 1 {
            j += 1;
        }
        out.push(if i == j {
            cpus[i].to_string()
        } else {
            format!("{}-{}", cpus[i], cpus[j])
        });
        i = j + 1;
    }
    out.join(",")
}

/// `--stats SECS`: every SECS, the counters of the interval, read as any
/// client reads them, through scx_stats on our socket at `path` (as the scx
/// schedulers' --stats does).
fn spawn_stats_printer(
    secs: f64,
    path: std::path::PathBuf,
    shutdown: Arc<AtomicBool>,
) -> std::thread::JoinHandle<()> {
    std::thread::spawn(move || {
        let period = Duration::from_secs_f64(secs);
        let mut conn: Option<Client> = None;
        let mut prev = LiveMetrics::default();
        let mut prev_at = Instant::now();
        let mut last = Instant::now();
        let mut failing = false;
        while !shutdown.load(Ordering::Relaxed) {
            std::thread::sleep(Duration::from_millis(50).min(period));
            if last.elapsed() < period {
                continue;
            }
            last = Instant::now();
            let got = match conn.as_mut() {
                Some(c) => c.snapshot(),
                None => Client::connect(&path, socket::DEFAULT_CLIENT_TIMEOUT).and_then(|mut c| {
                    let s = c.snapshot();
                    conn = Some(c);
                    s
                }),
            };
            match got {
                Ok((now, _)) => {
                    let el = prev_at.elapsed().as_secs_f64();
                    info!("[stats]\n{}", now.delta(&prev).format(el));
                    prev = now;
                    prev_at = Instant::now();
                    failing = false;
                }
                Err(e) => {
                    // Once per failure run; reconnect at the next interval.
                    if !failing {
                        log::warn!("--stats: {e:#}");
                    }
                    failing = true;
                    conn = None;
                }
            }
        }
    })
}

/// `scx_wakelab set KEY=VALUE...`: each change in turn, on one connection;
/// stops at the first the scheduler refuses. `timeout` bounds each request.
pub fn client_set(changes: &[String], socket: &Path, timeout: Duration) -> Result<()> {
    let mut conn = Client::connect(socket, timeout)?;
    for kv in changes {
        let Some((key, value)) = kv.split_once('=') else {
            anyhow::bail!("expected KEY=VALUE, got {}", scx_wakelab::exit::quote(kv));
        };
        let (key, value) = (key.trim(), value.trim());
        let a = conn
            .set(key, value)
            .with_context(|| scx_wakelab::exit::quote(kv))?;
        println!("ok {}={} (was {})", a.key, a.value, a.was);
    }
    Ok(())
}

/// `scx_wakelab stats [--json] [--monitor SECS]`, through scx_stats on
/// `socket`, on one connection; with --monitor, made again once when a
/// request on it fails (e.g. the scheduler restarted), before giving up.
/// `timeout` bounds each request.
pub fn client_stats(
    json: bool,
    monitor: Option<f64>,
    socket: &Path,
    timeout: Duration,
) -> Result<()> {
    let mut conn = Client::connect(socket, timeout)?;
    let (mut prev, v) = conn.snapshot()?;
    let Some(secs) = monitor else {
        if json {
            println!("{v}");
        } else {
            println!("{}", prev.format(0.0));
        }
        return Ok(());
    };
    loop {
        std::thread::sleep(Duration::from_secs_f64(secs));
        let (now, v) = match conn.snapshot() {
            Ok(got) => got,
            Err(_) => {
                conn = Client::connect(socket, timeout)?;
                conn.snapshot()?
            }
        };
        let d = now.delta(&prev);
        if json {
            println!(
                "{}",
                serde_json::json!({ "interval_s": secs, "metrics": d, "config": v["config"] })
            );
        } else {
            println!("{}\n", d.format(secs));
        }
        prev = now;
    }
}

/// The socket path, the socket group and the trace path, checked without
/// creating or removing anything, so that a bad one is refused (one line,
/// exit 2) before anything is loaded. The files are checked again as they
/// are created.
pub fn check_files(socket: &Path, trace: Option<&Path>, files: &FileOptions) -> Result<()> {
    let access = Access::new(files.socket_group.as_deref())?;
    socket::check_socket(socket, &access)?;
    if let Some(t) = trace {
        check_trace_path(t, Overwrite::trace(files.trace_overwrite))?;
    }
    Ok(())
}

/// The trace file's writer thread: JSON lines, one decision each, readable
/// by `scx_wakelab explain --trace FILE`. The scheduling thread hands records
/// over through a bounded channel and never waits for the disk.
fn spawn_trace_writer(
    path: &Path,
    overwrite: bool,
) -> Result<(
    std::sync::mpsc::SyncSender<scx_wakelab::policy::TraceRecord>,
    std::thread::JoinHandle<Result<u64>>,
)> {
    use std::io::Write;
    let file = open_trace_file(path, Overwrite::trace(overwrite))?;
    // Bounded small: the channel's slots come out of the agent's fixed
    // 64 MiB heap (rustland_core's allocator), and each record is ~1 KiB
    // plus what it points to.
    let (tx, rx) = std::sync::mpsc::sync_channel::<scx_wakelab::policy::TraceRecord>(2048);
    let h = std::thread::spawn(move || -> Result<u64> {
        let mut out = std::io::BufWriter::new(file);
        let mut n = 0;
        for rec in rx {
            writeln!(out, "{}", rec.to_json_line())?;
            n += 1;
        }
        out.flush()?;
        Ok(n)
    });
    Ok((tx, h))
}

#[cfg(test)]
mod tests {
    #[test]
    fn cpu_ranges_are_compact() {
        assert_eq!(super::cpu_ranges(&[0, 1, 2, 4, 5, 6, 7]), "0-2,4-7");
        assert_eq!(super::cpu_ranges(&[3]), "3");
        assert_eq!(super::cpu_ranges(&[0, 2]), "0,2");
        assert_eq!(super::cpu_ranges(&[]), "");
    }
}
