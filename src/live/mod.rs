//! The live layer: our BPF component, its rings and per-CPU table, and the
//! agent loop that places every task on a sched_ext kernel.

pub mod agent;
pub mod bpf_intf;
pub mod bpf_skel;
pub mod control;
pub mod env_checks;
pub mod libbpf_log;
pub mod oracle;
pub mod placement;
#[cfg(test)]
mod placement_cost;
pub mod protocol;
pub mod stats;
pub mod stats_socket;

use std::mem::MaybeUninit;
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use anyhow::{Context, Result};
use log::info;

use agent::{Agent, AgentConfig, ApplyPath};
use control::{ControlQueue, Shared};
use placement::{Placer, topology_from_scx};
use scx_wakelab::policy::Config;
use stats::LiveMetrics;
use stats_socket::StatsConn;

/// Who besides root and our own uid may use the control socket, and whether
/// `--trace` may replace an existing file. The defaults are the safe ones.
#[derive(Clone, Debug, Default)]
pub struct FileOptions {
    /// A group (name or number) whose members may use the control socket.
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
    stats_socket: &Path,
    trace: Option<&Path>,
    files: &FileOptions,
) -> Result<()> {
    env_checks::check_can_load(Path::new("/sys"), unsafe { libc::geteuid() })?;
    let access = control::Access::new(files.socket_group.as_deref())?;

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
    // Threads are started before the agent locks its memory.
    let server = control::spawn_server(
        socket,
        queue.clone(),
        Shared {
            metrics: metrics.clone(),
            config: config.clone(),
        },
        shutdown.clone(),
        access,
    )?;
    // On an error from here to the agent's start: stop the server first, it
    // removes its socket, which would otherwise be left for the next start.
    let stop_server = |server: std::thread::JoinHandle<()>, e| {
        shutdown.store(true, Ordering::Relaxed);
        let _ = server.join();
        Err(e)
    };

    let tracer = match trace
        .map(|p| spawn_trace_writer(p, files.trace_overwrite))
        .transpose()
    {
        Ok(t) => t,
        Err(e) => return stop_server(server, e),
    };
    // The counters' reading side: scx_stats' server (stats_socket.rs).
    let stats_server =
        match stats_socket::serve(stats_socket, &access, metrics.clone(), config.clone()) {
            Ok(s) => s,
            Err(e) => {
                if let Some((tx, writer)) = tracer {
                    drop(tx);
                    let _ = writer.join();
                }
                return stop_server(server, e);
            }
        };
    let printer = stats_interval
        .map(|secs| spawn_stats_printer(secs, stats_socket.to_path_buf(), shutdown.clone()));

    let started = Instant::now();
    // The fast lane unless asked otherwise or the kernel refuses it; a
    // refusal is remembered across restarts.
    let mut fast_lane = cfg.apply_path != ApplyPath::Ring;
    let result = loop {
        let topo = scx_utils::Topology::new().context("reading the CPU topology from sysfs")?;
        // Logged at each (re)load: after CPU hotplug this is the new topology.
        let mut online: Vec<usize> = topo.all_cpus.keys().copied().collect();
        online.sort_unstable();
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
    drop(stats_server);
    let _ = server.join();
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

/// "0-2,4-7" for [0, 1, 2, 4, 5, 6, 7].
fn cpu_ranges(cpus: &[usize]) -> String {
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
/// client reads them, from the scx_stats server on `path` (as the scx
/// schedulers' --stats does).
fn spawn_stats_printer(
    secs: f64,
    path: std::path::PathBuf,
    shutdown: Arc<AtomicBool>,
) -> std::thread::JoinHandle<()> {
    std::thread::spawn(move || {
        let period = Duration::from_secs_f64(secs);
        let mut conn: Option<StatsConn> = None;
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
                None => StatsConn::connect(&path).and_then(|mut c| {
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

/// `scx_wakelab set KEY=VALUE...`: each change in turn; stops at the first
/// the scheduler refuses.
pub fn client_set(changes: &[String], socket: &Path) -> Result<()> {
    for kv in changes {
        if !kv.contains('=') {
            anyhow::bail!("expected KEY=VALUE, got '{kv}'");
        }
        let answer = control::request(socket, &format!("set {kv}"))?;
        match answer.strip_prefix("error ") {
            Some(e) => anyhow::bail!("{kv}: {e}"),
            None => println!("{answer}"),
        }
    }
    Ok(())
}

/// `scx_wakelab stats [--json] [--monitor SECS]`, from the scx_stats server
/// on `socket`, on one connection; with --monitor, made again once when a
/// request on it fails (e.g. the scheduler restarted), before giving up.
pub fn client_stats(json: bool, monitor: Option<f64>, socket: &Path) -> Result<()> {
    let mut conn = StatsConn::connect(socket)?;
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
                conn = StatsConn::connect(socket)?;
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

/// The socket paths, the socket group and the trace path, checked without
/// creating or removing anything, so that a bad one is refused (one line,
/// exit 2) before anything is loaded. The files are checked again as they
/// are created.
pub fn check_files(
    socket: &Path,
    stats_socket: &Path,
    trace: Option<&Path>,
    files: &FileOptions,
) -> Result<()> {
    let access = control::Access::new(files.socket_group.as_deref())?;
    control::check_socket(socket, &access)?;
    stats_socket::check_stats_socket(stats_socket, &access)?;
    if let Some(t) = trace {
        check_trace_path(t, Overwrite::trace(files.trace_overwrite))?;
    }
    Ok(())
}

/// Whether an existing trace file may be replaced, and the option that says so (named in
/// the refusal): `--trace-overwrite` for the scheduler's trace, `--overwrite` for
/// `oracle record`'s.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Overwrite {
    pub allowed: bool,
    pub flag: &'static str,
}

impl Overwrite {
    /// The scheduler's `--trace` file.
    pub(crate) fn trace(allowed: bool) -> Self {
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
    scx_wakelab::exit::BadInput(match why {
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
/// or non-directory parent has nowhere to put it. Shared by --trace and
/// --socket, so both refuse such paths before loading, not at creation.
pub(crate) fn why_not_creatable(path: &Path) -> Option<String> {
    if path.as_os_str().as_encoded_bytes().ends_with(b"/") {
        return Some("the path ends in '/'".to_string());
    }
    let dir = match path.parent() {
        Some(d) if !d.as_os_str().is_empty() => d,
        _ => Path::new("."),
    };
    (!dir.is_dir()).then(|| format!("{} is not a directory", dir.display()))
}

/// open_trace_file's refusals, from the path alone.
pub(crate) fn check_trace_path(path: &Path, overwrite: Overwrite) -> Result<()> {
    match std::fs::symlink_metadata(path) {
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => match why_not_creatable(path) {
            Some(why) => Err(scx_wakelab::exit::BadInput(format!(
                "cannot create the trace file {}: {why}",
                path.display()
            ))
            .into()),
            None => Ok(()),
        },
        Err(e) => Err(scx_wakelab::exit::BadInput(format!(
            "cannot use the trace file {}: {e}",
            path.display()
        ))
        .into()),
        Ok(md) if md.is_symlink() => Err(trace_refusal(path, TraceRefusal::Link, overwrite)),
        Ok(_) if !overwrite.allowed => Err(trace_refusal(path, TraceRefusal::Exists, overwrite)),
        Ok(md) if !md.is_file() => Err(trace_refusal(path, TraceRefusal::NotRegular, overwrite)),
        Ok(_) => Ok(()),
    }
}

/// Open the `--trace` file for writing: a new file, or with `overwrite` an
/// existing regular file, truncated. Never through a symlink (the scheduler
/// runs as root, and a link planted in a shared directory would make it
/// truncate any file), never a FIFO or device. Mode 0600 whatever the umask:
/// the trace names every task and its pid.
pub(crate) fn open_trace_file(path: &Path, overwrite: Overwrite) -> Result<std::fs::File> {
    // A refusal of the path the caller named is bad input: exit 2, not 1.
    macro_rules! bail_input {
        ($($arg:tt)*) => {
            return Err(scx_wakelab::exit::BadInput(format!($($arg)*)).into())
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
        assert_eq!(
            scx_wakelab::exit::code_of(&e, 1),
            scx_wakelab::exit::BAD_INPUT,
            "{e:#}"
        );
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
            assert_eq!(
                scx_wakelab::exit::code_of(&e, 1),
                scx_wakelab::exit::BAD_INPUT
            );
            assert!(e.to_string().contains("ends in '/'"), "{e}");
        }
        assert!(!dir.exists());
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

    #[test]
    fn cpu_ranges_are_compact() {
        assert_eq!(super::cpu_ranges(&[0, 1, 2, 4, 5, 6, 7]), "0-2,4-7");
        assert_eq!(super::cpu_ranges(&[3]), "3");
        assert_eq!(super::cpu_ranges(&[0, 2]), "0,2");
        assert_eq!(super::cpu_ranges(&[]), "");
    }
}
