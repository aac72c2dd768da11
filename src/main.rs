//! scx_wakelab: a sched_ext scheduler whose Rust agent places every woken
//! task the way CFS's wake-up path does, with upstream patch behaviours as
//! flags.
//!
//! This file is the command line and the dispatch of every command: `set` and
//! `stats`, clients of a running instance's socket (src/live/mod.rs);
//! `explain`, `sim` and `oracle compare`, handed to scx_wakelab-offline when it
//! can be trusted (src/offline.rs); `oracle record`, run here because it loads
//! BPF; and the scheduler itself. For the scheduler, bad input is refused with
//! one line before anything is loaded, in this order: the policy flags, root,
//! the socket and trace paths; then `--supervise` hands over to the supervisor
//! (src/supervise.rs), or the kernel's state is checked and
//! `live::run_scheduler()` loads and runs the scheduler. The live layer
//! (src/live/) and the supervisor are modules of this binary, not of the
//! library (src/lib.rs says why).

#[cfg(test)]
mod agent_bench;
mod live;
mod offline;
mod supervise;

use std::process::ExitCode;
use std::time::Duration;

use clap::Parser;
use log::info;
use scx_utils::libbpf_clap_opts::LibbpfOpts;
use scx_wakelab::exit;
use simplelog::{ColorChoice, ConfigBuilder, LevelFilter, TermLogger, TerminalMode};

// No doc comment here: `--help` opens with Cargo.toml's description (`about`)
// and ends with the exit codes (`after_help`, scx_wakelab::exit::EXIT_CODES).
#[derive(Debug, Parser)]
#[command(name = "scx_wakelab", version, about, long_about = None, args_conflicts_with_subcommands = true,
          after_help = exit::EXIT_CODES)]
struct Opts {
    #[command(subcommand)]
    command: Option<Command>,

    /// Time slice of the tasks we dispatch, in microseconds.
    #[arg(short = 's', long, default_value_t = 5000, value_parser = clap::value_parser!(u64).range(100..=1_000_000))]
    slice_us: u64,

    /// Schedule only tasks whose policy is SCHED_EXT; leave the rest to the
    /// fair class.
    #[arg(short = 'p', long)]
    partial: bool,

    /// Size of the kernel's debug dump on an error exit (0 = kernel default).
    #[arg(long, default_value_t = 0)]
    exit_dump_len: u32,

    /// Print statistics every SECS seconds (read from --socket, as
    /// `scx_wakelab stats --monitor SECS` reads them).
    #[arg(long, value_name = "SECS", value_parser = parse_interval)]
    stats: Option<f64>,

    /// The scheduler's socket: scx_stats for `scx_wakelab stats`, --stats
    /// and any scx_stats client, and `scx_wakelab set` (mode 0600, 0660
    /// with --socket-group; missing directories are created).
    #[arg(long, visible_alias = "stats-socket", value_name = "PATH", default_value = live::socket::DEFAULT_SOCKET)]
    socket: std::path::PathBuf,

    /// Record every placement decision (inputs, rule chain, CPU) as JSON
    /// lines in FILE, for `scx_wakelab explain --trace FILE` to replay.
    #[arg(long, value_name = "FILE")]
    trace: Option<std::path::PathBuf>,

    /// Let --trace replace an existing regular file (never a symbolic link,
    /// FIFO or device).
    #[arg(long, requires = "trace")]
    trace_overwrite: bool,

    /// Let members of GROUP (a name or a number) use --socket, besides root
    /// and the scheduler's own user.
    #[arg(long, value_name = "GROUP")]
    socket_group: Option<String>,

    /// Most tasks whose wake-up state (recent_used_cpu, wakee flips) the
    /// agent keeps (at most 65536). The table is allocated whole at start,
    /// in locked memory; when more tasks wake within 30 s, the least recently
    /// seen are forgotten and counted (`stats`: task_evictions).
    #[arg(long, value_name = "N", default_value_t = live::placement::DEFAULT_TASK_TABLE as u64,
          value_parser = clap::value_parser!(u64).range(64..=live::placement::MAX_TASK_TABLE as u64))]
    task_table_size: u64,

    /// Run the scheduler in a child process and start it again, with
    /// backoff, when it fails (killed, ejected by the kernel, load error).
    /// Ctrl-C or SIGTERM stops the child cleanly and does not restart it;
    /// SIGHUP is ignored. The child gets SIGTERM if the supervisor dies, and
    /// is restarted if it stops answering `stats` on --socket.
    #[arg(long)]
    supervise: bool,

    /// With --supervise: give up after N failures in a row (a run of a
    /// minute or more starts the count over), or after N failures within 10
    /// minutes.
    #[arg(long, value_name = "N", default_value_t = 5, requires = "supervise",
          value_parser = clap::value_parser!(u32).range(1..=1000))]
    restart_limit: u32,

    /// With --supervise: wait SECS (at most 30) before the first restart,
    /// doubling up to 30 s for each further failure in a row.
    #[arg(long, value_name = "SECS", default_value_t = 1.0, requires = "supervise", value_parser = parse_restart_delay)]
    restart_delay: f64,

    /// Kick idle CPUs to pull tasks waiting behind a busy CPU's current
    /// task, from an overloaded node too (the analogue of fair.c's nohz idle
    /// balance; a CPU that is just going idle pulls in any case). Off by
    /// default, for the lmbench lat_ctx slowdown recorded in
    /// docs/benchmarks/bpf-heuristics-notes.md.
    #[arg(long)]
    idle_balance: bool,

    /// Idle balance: a busy CPU kicks an idle one only when its current task
    /// has run this long since it last woke, so is not about to give the CPU
    /// up to the task waiting behind it.
    #[arg(long, value_name = "US", default_value_t = 2000, requires = "idle_balance",
          value_parser = clap::value_parser!(u64).range(0..=1_000_000))]
    idle_balance_busy_us: u64,

    /// A CPU whose sync waker just woke a task that last ran there waits (up
    /// to 2 ms) for the agent to place that task instead of pulling another
    /// one when it goes idle; in the kernel the wakee would already be queued
    /// there. Off by default: in the runs recorded in
    /// docs/benchmarks/bpf-heuristics-notes.md, what it saved on one workload
    /// it cost on another.
    #[arg(long)]
    newidle_wait_own_wakee: bool,

    /// The CPU the agent's scheduling thread is pinned to: a CPU number,
    /// `auto` (the highest-numbered CPU this process may use: low-numbered
    /// CPUs are the ones benchmarks and the idle scans favour) or `any` (not
    /// pinned: it then runs wherever a CPU is free and migrates). Pinned, it
    /// never migrates, and a task of ours running on that CPU is preempted
    /// when the agent has work. For the placement engine that CPU is like any
    /// other: running only the agent, it is idle, unless the agent polls after
    /// its batches (--agent-spin-us above 0), when it is busy with one task, as
    /// with any thread that polls.
    #[arg(long, value_name = "CPU|auto|any", default_value = "auto", value_parser = parse_agent_cpu)]
    agent_cpu: live::agent::AgentCpu,

    /// After each batch of decisions the agent polls for new wake-ups for up
    /// to US microseconds before it yields its CPU (0: yield at once). A
    /// wake-up that arrives meanwhile is decided without waking the agent,
    /// which saves two context switches and an IPI. The default is meant to
    /// cover the gap between the wake-ups of a ping-pong pair (pipe, TCP
    /// request/response), so that such a pair does not wait for the agent to
    /// be woken; longer adds CPU time without saving switches, and an idle
    /// system pays it once per burst of wake-ups. The cost is up to US of the
    /// agent's CPU per batch (`stats`: agent cpu, spin);
    /// docs/benchmarks/fast-lane.md ("Polling") has the runs that chose it.
    #[arg(long, value_name = "US", default_value_t = 50,
          value_parser = clap::value_parser!(u64).range(0..=100_000))]
    agent_spin_us: u64,

    /// Send each wake-up to the agent from ops.select_cpu(), on the waker's
    /// CPU, instead of from ops.enqueue() on the wakee's: the agent often
    /// decides before the enqueue, which then queues the task where the
    /// agent said without a bpf() call and without waking the wakee's CPU
    /// twice (the handoff; bpf/intf.h, wl_shared.handoff). `false` keeps
    /// every decision on the --apply-path road.
    #[arg(long, value_name = "BOOL", default_value_t = true, action = clap::ArgAction::Set)]
    agent_handoff: bool,

    /// How the agent's decisions reach the kernel: `syscall` (the fast lane:
    /// one bpf() call per batch moves every decided task onto its CPU),
    /// `ring` (a ring buffer drained when the agent yields its CPU: the
    /// fallback for kernels whose SYSCALL programs may not move tasks) or
    /// `auto` (the fast lane if the kernel allows it). The log says which.
    #[arg(long, value_name = "auto|syscall|ring", default_value = "auto", value_parser = parse_apply_path)]
    apply_path: live::agent::ApplyPath,

    /// More logging (libbpf's messages, the verifier log on load failures).
    #[arg(short = 'v', long)]
    verbose: bool,

    /// Test aid: load a BPF program the verifier must reject.
    #[arg(long, hide = true)]
    debug_break_verifier: bool,

    /// Test aid: treat the wakeup ring as full once N messages wait in it,
    /// so that a load the VM can carry overflows it (tests/vm/reliability.sh).
    #[arg(long, hide = true, value_name = "N", default_value_t = 0,
          value_parser = clap::value_parser!(u32).range(0..=8192))]
    debug_ring_limit: u32,

    /// Test aid: 2 s after load, carry out half a batch of decisions, leave
    /// the other half recorded but not carried out, then stop (`stop`,
    /// SIGSTOP) or kill (`kill`, SIGKILL) this process
    /// (tests/vm/reliability.sh).
    #[arg(long, hide = true, value_name = "stop|kill", value_parser = parse_half_apply)]
    debug_half_apply: Option<i32>,

    #[clap(flatten)]
    policy: scx_wakelab::cli::PolicyArgs,

    #[clap(flatten, next_help_heading = "Libbpf Options")]
    libbpf: LibbpfOpts,
}

/// Without a subcommand, scx_wakelab loads and runs the scheduler.
#[derive(Debug, clap::Subcommand)]
enum Command {
    /// Change a placement flag of the running scheduler, without unloading
    /// it: scx_wakelab set KEY=VALUE [KEY=VALUE...] (keys as in --set).
    Set {
        #[arg(required = true, value_name = "KEY=VALUE")]
        changes: Vec<String>,
        /// Socket of the running instance (its --socket).
        #[arg(long, visible_alias = "stats-socket", value_name = "PATH", default_value = live::socket::DEFAULT_SOCKET)]
        socket: std::path::PathBuf,
        /// Give up on a request not answered within SECS seconds.
        #[arg(long, value_name = "SECS", default_value = "5", value_parser = parse_interval)]
        timeout: f64,
    },
    /// Print the counters of the running scheduler (once, or every SECS
    /// seconds with --monitor), read through scx_stats from its socket;
    /// --describe says what each counter counts.
    Stats {
        /// JSON instead of the stats block.
        #[arg(long)]
        json: bool,
        /// Print the counters of each interval of SECS seconds until Ctrl-C.
        #[arg(long, value_name = "SECS", value_parser = parse_interval)]
        monitor: Option<f64>,
        /// Describe every counter (no running scheduler needed).
        #[arg(long, conflicts_with_all = ["json", "monitor", "socket", "timeout"])]
        describe: bool,
        /// Socket of the running instance (its --socket).
        #[arg(long, visible_alias = "stats-socket", value_name = "PATH", default_value = live::socket::DEFAULT_SOCKET)]
        socket: std::path::PathBuf,
        /// Give up on a request not answered within SECS seconds (each
        /// interval's, with --monitor).
        #[arg(long, value_name = "SECS", default_value = "5", value_parser = parse_interval)]
        timeout: f64,
    },
    // No doc comments here: they would replace the long help of ExplainArgs and SimArgs
    // (the scenario format, the workloads' --param keys, the input limits) with one line.
    Explain(scx_wakelab::explain::ExplainArgs),
    Sim(scx_wakelab::sim::SimArgs),
    Oracle(scx_wakelab::oracle::OracleArgs),
}

fn parse_agent_cpu(s: &str) -> Result<live::agent::AgentCpu, String> {
    use live::agent::AgentCpu;
    match s {
        "auto" => Ok(AgentCpu::Auto),
        "any" => Ok(AgentCpu::Any),
        _ => match s.parse::<usize>() {
            Ok(c) if c < scx_wakelab::policy::MAX_CPUS => Ok(AgentCpu::Cpu(c)),
            Ok(c) => Err(format!(
                "CPU {c} is beyond the {} CPUs scx_wakelab supports",
                scx_wakelab::policy::MAX_CPUS
            )),
            Err(_) => Err(format!(
                "{} is not a CPU number, 'auto' or 'any'",
                exit::quote(s)
            )),
        },
    }
}

fn parse_half_apply(s: &str) -> Result<i32, String> {
    match s {
        "stop" => Ok(libc::SIGSTOP),
        "kill" => Ok(libc::SIGKILL),
        _ => Err(format!("{} is not 'stop' or 'kill'", exit::quote(s))),
    }
}

fn parse_apply_path(s: &str) -> Result<live::agent::ApplyPath, String> {
    use live::agent::ApplyPath;
    match s {
        "auto" => Ok(ApplyPath::Auto),
        "syscall" => Ok(ApplyPath::Syscall),
        "ring" => Ok(ApplyPath::Ring),
        _ => Err(format!(
            "{} is not 'auto', 'syscall' or 'ring'",
            exit::quote(s)
        )),
    }
}

fn parse_interval(s: &str) -> Result<f64, String> {
    let v: f64 = s
        .parse()
        .map_err(|_| format!("{} is not a number of seconds", exit::quote(s)))?;
    if !(0.1..=3600.0).contains(&v) {
        return Err(format!("{v} is outside 0.1..=3600 seconds"));
    }
    Ok(v)
}

/// --restart-delay: an interval, and at most the longest wait between
/// restarts, as --help promises (a larger one is likelier minutes typed
/// for seconds).
fn parse_restart_delay(s: &str) -> Result<f64, String> {
    let v = parse_interval(s)?;
    let max = supervise::MAX_DELAY.as_secs();
    if v > max as f64 {
        return Err(format!(
            "the wait between restarts is at most {max} seconds"
        ));
    }
    Ok(v)
}

fn init_logging(verbose: bool) {
    let cfg = ConfigBuilder::new()
        .set_time_level(LevelFilter::Error)
        .set_location_level(LevelFilter::Off)
        .set_target_level(LevelFilter::Off)
        .set_thread_level(LevelFilter::Off)
        .build();
    let level = if verbose {
        LevelFilter::Debug
    } else {
        LevelFilter::Info
    };
    let _ = TermLogger::init(level, cfg, TerminalMode::Stderr, ColorChoice::Auto);
}

/// `set`'s KEY=VALUE pairs checked here, so that a typo is bad input (exit 2) whether
/// or not an instance is running.  The running instance still checks the combination.
fn check_set_changes(changes: &[String]) -> Result<(), String> {
    for kv in changes {
        scx_wakelab::policy::Config::default()
            .set_kv(kv)
            .map_err(|e| format!("{kv}: {e}"))?;
    }
    Ok(())
}

fn main() -> ExitCode {
    // Library errors never capture a backtrace: scx_stats answers a bad
    // request with its error's Debug form, and with RUST_BACKTRACE set that
    // would symbolize a backtrace on the scheduler's fixed 64 MiB heap, which
    // the debug info alone can exhaust (the scheduler then aborts). Our own
    // errors print one line, never a backtrace. Set before any thread starts.
    // SAFETY: no other thread exists yet to read the environment.
    unsafe { std::env::set_var("RUST_LIB_BACKTRACE", "0") };
    exit::install_panic_hook();
    let opts = match exit::parse_args::<Opts>() {
        Ok(o) => o,
        Err(code) => return code,
    };
    init_logging(opts.verbose);
    if let Some(cmd) = opts.command {
        return match cmd {
            Command::Set {
                changes,
                socket,
                timeout,
            } => match check_set_changes(&changes) {
                Err(e) => {
                    exit::print_error(&e);
                    ExitCode::from(exit::BAD_INPUT)
                }
                Ok(()) => exit::exit_with(
                    live::client_set(&changes, &socket, Duration::from_secs_f64(timeout)),
                    exit::RUNTIME,
                ),
            },
            Command::Stats { describe: true, .. } => {
                exit::exit_with(live::stats::describe(), exit::RUNTIME)
            }
            Command::Stats {
                json,
                monitor,
                socket,
                timeout,
                ..
            } => exit::exit_with(
                live::client_stats(json, monitor, &socket, Duration::from_secs_f64(timeout)),
                exit::RUNTIME,
            ),
            // Their only inputs are the command line and the files it names. They run in
            // scx_wakelab-offline when it is installed beside us (the system allocator, not
            // rustland_core's fixed heap); here only when it is not.
            Command::Explain(a) => {
                offline::hand_over();
                exit::exit_with(scx_wakelab::explain::run(a), exit::BAD_INPUT)
            }
            Command::Sim(a) => {
                offline::hand_over();
                exit::exit_with(scx_wakelab::sim::run(a), exit::BAD_INPUT)
            }
            Command::Oracle(scx_wakelab::oracle::OracleArgs {
                command:
                    scx_wakelab::oracle::OracleCommand::Record {
                        out,
                        seconds,
                        overwrite,
                        newidle,
                    },
            }) => exit::exit_with(
                scx_wakelab::oracle::record::record(&out, seconds, overwrite, newidle.as_deref()),
                exit::RUNTIME,
            ),
            Command::Oracle(a) => {
                offline::hand_over();
                exit::exit_with(scx_wakelab::oracle::run(a), exit::BAD_INPUT)
            }
        };
    }
    // Bad policy flags are argument errors too: one line, before anything else.
    let policy = match opts.policy.to_config() {
        Ok(c) => c,
        Err(e) => {
            exit::print_error(&e);
            return ExitCode::from(exit::BAD_INPUT);
        }
    };
    // Root first: a non-root user hears the one thing to change, not a
    // complaint about a socket path root owns, and a supervisor does not
    // restart children that can only fail.
    if let Err(e) = scx_wakelab::bpf_load::check_root(unsafe { libc::geteuid() }) {
        return exit::exit_with(Err(e), exit::RUNTIME);
    }
    let supervised_child = opts.supervise && supervise::is_child();
    let trace = match opts.trace.as_deref() {
        Some(p) if supervised_child => Some(supervise::trace_path_of_child(p)),
        p => p.map(std::path::Path::to_path_buf),
    };
    // Bad --socket, --socket-group or --trace paths: one line, exit 2, on
    // any host (they need no sched_ext to be judged), and before a
    // supervisor starts any child.
    let files = live::FileOptions {
        socket_group: opts.socket_group.clone(),
        trace_overwrite: opts.trace_overwrite,
    };
    if let Err(e) = live::check_files(&opts.socket, trace.as_deref(), &files) {
        return exit::exit_with(Err(e), exit::RUNTIME);
    }
    // A CPU that is not online here is refused before a supervisor would restart on it.
    if let Err(e) = live::agent::check_agent_cpu(opts.agent_cpu) {
        return exit::exit_with(Err(e), exit::RUNTIME);
    }
    if opts.supervise && !supervised_child {
        let limits = supervise::Limits {
            max_failures: opts.restart_limit,
            first_delay: std::time::Duration::from_secs_f64(opts.restart_delay),
        };
        return match supervise::run(limits, &opts.socket) {
            Ok(code) => ExitCode::from(code),
            Err(e) => exit::exit_with(Err(e), exit::RUNTIME),
        };
    }
    // Before anything is logged: "another scheduler is running" and the
    // like are one line too.
    if let Err(e) =
        live::env_checks::check_can_load(std::path::Path::new("/sys"), unsafe { libc::geteuid() })
    {
        return exit::exit_with(Err(e), exit::RUNTIME);
    }
    info!(
        "scx_wakelab {} options: {:?}",
        env!("CARGO_PKG_VERSION"),
        opts
    );

    let cfg = live::agent::AgentConfig {
        slice_ns: opts.slice_us * 1000,
        partial: opts.partial,
        exit_dump_len: opts.exit_dump_len,
        break_verifier: opts.debug_break_verifier,
        ring_limit: opts.debug_ring_limit,
        idle_balance: opts.idle_balance,
        idle_balance_busy_us: opts.idle_balance_busy_us,
        newidle_wait_own_wakee: opts.newidle_wait_own_wakee,
        agent_cpu: opts.agent_cpu,
        spin_us: opts.agent_spin_us,
        handoff: opts.agent_handoff,
        apply_path: opts.apply_path,
        debug_half_apply: opts.debug_half_apply,
        task_table_size: opts.task_table_size as usize,
        open_opts: opts.libbpf.clone().into_bpf_open_opts(),
    };
    // An error marked scx_wakelab::exit::BadInput (a bad --trace or --socket
    // path) exits 2, anything else 1.
    exit::exit_with(
        live::run_scheduler(
            cfg,
            policy,
            opts.stats,
            &opts.socket,
            trace.as_deref(),
            &files,
        ),
        exit::RUNTIME,
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn set_changes_are_checked_before_asking_the_instance() {
        assert!(check_set_changes(&["wa_idle=false".into(), "recent_used=prev".into()]).is_ok());
        for bad in ["wa_idle", "no_such_flag=1", "recent_used=sideways"] {
            let e = check_set_changes(&[bad.into()]).unwrap_err();
            assert!(e.starts_with(&format!("{bad}: ")), "{e}");
        }
    }

    #[test]
    fn help_documents_the_exit_codes() {
        use clap::CommandFactory;
        let help = Opts::command().render_long_help().to_string();
        for code in ["0 success", "1 runtime failure", "2 bad usage or bad input"] {
            assert!(help.contains(code), "--help lacks {code:?}");
        }
    }
}
