//! `scx_wakelab oracle record`: load bpf/oracle.bpf.c beside whatever scheduler runs, and
//! write each fair-class placement it reports as a decision trace line
//! ([`Sample::to_trace`]).  The only Rust code that touches the oracle's raw records
//! (`bpf/oracle.h`, through bindgen).
//!
//! [`record`] in steps: find what this kernel and machine need (the hook's form, the
//! topology, the preset to replay with), load and attach the program, start the writer
//! thread, drain the ring until the time is up or Ctrl-C, then log the summary.  It runs
//! in the scheduler's binary (`scx_wakelab-offline` refuses it, see [`super::run`]), on
//! its fixed heap, which bounds what may wait for the writer.

use std::cell::{Cell, RefCell};
use std::io::Write;
use std::mem::MaybeUninit;
use std::path::Path;
use std::rc::Rc;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::SyncSender;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use anyhow::{Context, Result, anyhow, bail};
use libbpf_rs::OpenObject;
use libbpf_rs::skel::{OpenSkel, Skel, SkelBuilder};

use super::newidle::{NewidleCpu, NewidleRecord, PulledTask};
use super::{Sample, SampleCpu, SampleLlc, SampleTask, preset_for_release};
use crate::bpf_load;
use crate::policy::{Topology, TopologyInput};
use crate::trace_file::{Overwrite, check_trace_path, open_trace_file};

mod intf {
    #![allow(
        non_upper_case_globals,
        non_camel_case_types,
        non_snake_case,
        dead_code
    )]
    include!(concat!(env!("OUT_DIR"), "/oracle_intf.rs"));
}
mod skel {
    include!(concat!(env!("OUT_DIR"), "/oracle_skel.rs"));
}

const BTF_PATH: &str = "/sys/kernel/btf/vmlinux";
/// Records read from the ring at a time, and batches waiting for the writer thread: about
/// 2048 x 4 x 0.7 KiB = 6 MiB for 8 CPUs, well inside the scheduler's fixed heap.
const BATCH: usize = 2048;
const QUEUED_BATCHES: usize = 4;

/// Waits up to `ms` for the ring's epoll fd to have data; a signal ends the wait early.
fn wait_readable(epoll_fd: i32, ms: i32) -> Result<()> {
    let mut ev = libc::epoll_event { events: 0, u64: 0 };
    // SAFETY: one event into a local buffer of one.
    let r = unsafe { libc::epoll_wait(epoll_fd, &mut ev, 1, ms) };
    if r < 0 {
        let e = std::io::Error::last_os_error();
        if e.kind() != std::io::ErrorKind::Interrupted {
            return Err(e).context("waiting on the oracle's ring");
        }
    }
    Ok(())
}
const HOOK: &str = "select_task_rq_fair";

/// The call made under the rq lock just before load balancing updates a CPU's blocked fair
/// averages (update_blocked_averages(), renamed in v6.10): the other classes' averages,
/// `update_other_load_avgs(rq)` from v6.12, `update_rt_rq_load_avg(now, rq, running)` before.
/// The state estimator's only update of an idle CPU hooks it (bpf/oracle.bpf.c).
const BLOCKED_UPDATE: [&str; 2] = ["update_other_load_avgs", "update_rt_rq_load_avg"];

/// The kernel's moves of a task's averages into a CPU's and into its removed load, hooked
/// where its BTF has both, and out of a CPU's at once (inlined on 5.10): without them the
/// estimator infers the moves (bpf/oracle_estimator.bpf.c).
const MOVES: [&str; 2] = ["attach_entity_load_avg", "remove_entity_load_avg"];
const DETACH: &str = "detach_entity_load_avg";

/// v6.12+: a delayed-dequeue sleeper's last dequeue, at pick time, bypasses
/// dequeue_task_fair(); the estimator follows it here.
const DEQUEUE_ENTITIES: &str = "dequeue_entities";

/// The task reweight of a nice change: `reweight_task_fair(rq, p, lw)` from v6.10,
/// `reweight_task(p, prio)` before.
const REWEIGHT: [&str; 2] = ["reweight_task_fair", "reweight_task"];

/// The newly-idle balance (`oracle record --newidle`), renamed in v6.10 (and in 6.1.y); where
/// the compiler inlined it (7.2), the idle path of its one caller, `pick_task_fair()`.  The
/// load balancing it runs per domain, renamed in v6.10.
const NEWIDLE: [&str; 3] = ["sched_balance_newidle", "newidle_balance", "pick_task_fair"];
const LOAD_BALANCE: [&str; 2] = ["sched_balance_rq", "load_balance"];

/// The hooks whose name differs by version, as this kernel's BTF has them.
#[derive(Clone, Copy, Debug, Default)]
struct VersionHooks {
    /// The kernel has both of [`MOVES`].
    moves: bool,
    /// The kernel has [`DETACH`].
    detach: bool,
    /// The kernel has [`DEQUEUE_ENTITIES`].
    dequeue_entities: bool,
    /// One of `BLOCKED_UPDATE`.
    blocked_update: Option<&'static str>,
    /// One of `REWEIGHT`.
    reweight: Option<&'static str>,
    /// One of `NEWIDLE`.
    newidle: Option<&'static str>,
    /// One of `LOAD_BALANCE`.
    load_balance: Option<&'static str>,
    /// NI_RANDOM's newly-idle draw is compiled in: `struct sched_domain` has the
    /// `newidle_ratio` it weighs by (Debian's 6.1.y and 6.12.y, and 7.x).
    ni_random: bool,
}

/// How many parameters the kernel's select_task_rq_fair() takes (3 from v5.11, 4 before),
/// and the hooks of this version.
fn hook_arity() -> Result<(usize, VersionHooks)> {
    use libbpf_rs::btf::types::{Func, FuncProto, Struct};
    use libbpf_rs::btf::{Btf, ReferencesType};
    let btf = Btf::from_vmlinux().context("reading the kernel's BTF")?;
    let has = |n: &&str| btf.type_by_name::<Func>(n).is_some();
    let hooks = VersionHooks {
        moves: MOVES.iter().all(has),
        detach: has(&DETACH),
        dequeue_entities: has(&DEQUEUE_ENTITIES),
        blocked_update: BLOCKED_UPDATE.into_iter().find(has),
        reweight: REWEIGHT.into_iter().find(has),
        newidle: NEWIDLE.into_iter().find(has),
        load_balance: LOAD_BALANCE.into_iter().find(has),
        ni_random: btf.type_by_name::<Struct>("sched_domain").is_some_and(|s| {
            (0..s.len()).any(|i| {
                s.get(i)
                    .and_then(|m| m.name)
                    .is_some_and(|n| n == "newidle_ratio")
            })
        }),
    };
    let func: Func = btf
        .type_by_name(HOOK)
        .ok_or_else(|| anyhow!("{HOOK} is not in this kernel's BTF: the oracle cannot attach"))?;
    let proto: FuncProto = btf
        .type_by_id(func.referenced_type_id())
        .ok_or_else(|| anyhow!("{HOOK}'s BTF has no prototype"))?;
    Ok((proto.len(), hooks))
}

/// An estimate, or `None` for ORACLE_NO_ESTIMATE (all ones; bindgen types the macro as
/// i32 -1, hence the cast).
fn estimate(v: u64) -> Option<u64> {
    (v != intf::ORACLE_NO_ESTIMATE as u64).then_some(v)
}

fn task_of(t: &intf::oracle_task) -> SampleTask {
    SampleTask {
        pid: t.pid,
        flags: t.flags,
        recent_used_cpu: t.recent_used_cpu,
        wakee_flips: t.wakee_flips,
        wakee_flip_decay_ts: t.wakee_flip_decay_ts,
        last_wakee_pid: t.last_wakee_pid,
        load_avg: t.load_avg,
        util_avg: t.util_avg,
        est_load_avg: estimate(t.est_load_avg),
        est_util_avg: estimate(t.est_util_avg),
        nr_cpus_allowed: t.nr_cpus_allowed,
        allowed: t.allowed,
    }
}

/// A ring entry as the struct `T`, whose last member is `cpus[ORACLE_MAX_CPUS]`, of which
/// BPF sends only the `filled(&T)` it filled; `None` if it is not a whole one.
fn whole<T: Copy>(data: &[u8], filled: impl Fn(&T) -> usize) -> Option<T> {
    let full = std::mem::size_of::<T>();
    let per_cpu = std::mem::size_of::<intf::oracle_cpu>();
    let max = intf::oracle_consts_ORACLE_MAX_CPUS as usize;
    let head = full - per_cpu * max;
    if data.len() < head || data.len() > full {
        return None;
    }
    let mut bytes = vec![0u8; full];
    bytes[..data.len()].copy_from_slice(data);
    // SAFETY: `bytes` holds a whole `T` (zero-filled beyond what BPF sent), a plain C
    // struct of integers; it may be unaligned for it, hence read_unaligned.
    let r: T = unsafe { std::ptr::read_unaligned(bytes.as_ptr() as *const T) };
    (data.len() >= head + filled(&r).min(max) * per_cpu).then_some(r)
}

/// What a record says of one CPU.
fn cpu_of(c: &intf::oracle_cpu) -> SampleCpu {
    SampleCpu {
        load_avg: c.load_avg,
        util_avg: c.util_avg,
        est_load_avg: c.est_load_avg,
        est_util_avg: c.est_util_avg,
        avg_idle: c.avg_idle,
        nr_running: c.nr_running,
        nr_delayed: c.nr_delayed,
        nr_sched_idle: c.nr_sched_idle,
        util_est: c.util_est,
        runnable_avg: c.runnable_avg,
        idle_stamp: c.idle_stamp,
        h_load: (c.h_load != intf::ORACLE_UNKNOWN as u64)
            .then_some((c.h_load, c.last_h_load_update)),
        capacity: c.capacity,
        curr_is_idle: c.curr_is_idle != 0,
        ttwu_pending: c.ttwu_pending != 0,
        llc: SampleLlc {
            has_idle_cores: match c.has_idle_cores {
                0 => Some(false),
                1 => Some(true),
                _ => None,
            },
            avg_scan_cost: c.avg_scan_cost,
            nr_idle_scan: (c.nr_idle_scan != intf::ORACLE_UNKNOWN).then_some(c.nr_idle_scan),
        },
    }
}

/// One ring entry as a [`Sample`]; `None` if it is not a whole record.
fn parse(data: &[u8]) -> Option<Sample> {
    let r: intf::oracle_record = whole(data, |r: &intf::oracle_record| r.nr_cpus as usize)?;
    let n = (r.nr_cpus as usize).min(r.cpus.len());
    Some(Sample {
        now_ns: r.now_ns,
        jiffies: r.jiffies,
        wakee: task_of(&r.wakee),
        waker: task_of(&r.waker),
        prev_cpu: r.prev_cpu,
        this_cpu: r.this_cpu,
        chosen_cpu: r.chosen_cpu,
        wake_flags: r.wake_flags,
        context: r.context,
        cpus: r.cpus[..n].iter().map(cpu_of).collect(),
        changed_cpus: r.changed_cpus,
    })
}

/// The domains (indexes, innermost first) whose bits `mask` sets, of the first `n`.
fn domain_list(mask: u8, n: usize) -> Vec<usize> {
    (0..n.min(8)).filter(|i| mask & (1 << i) != 0).collect()
}

/// One newly-idle ring entry as a record (topology, release and sequence number are the
/// writer's); `None` if it is not a whole one.
fn parse_newidle(data: &[u8]) -> Option<NewidleRecord> {
    let r: intf::oracle_newidle = whole(data, |r: &intf::oracle_newidle| r.nr_cpus as usize)?;
    let n = (r.nr_cpus as usize).min(r.cpus.len());
    let domains = (r.nr_domains as usize).min(r.max_newidle_lb_cost.len());
    Some(NewidleRecord {
        now_ns: r.now_ns,
        cpu: r.cpu as usize,
        ret: r.ret,
        ttwu_pending: r.ttwu_pending != 0,
        overloaded: (r.overloaded < 2).then_some(r.overloaded == 1),
        avg_idle: r.avg_idle,
        max_newidle_lb_cost: r.max_newidle_lb_cost[..domains].to_vec(),
        balanced_domains: domain_list(
            r.balanced_domains,
            intf::oracle_consts_ORACLE_MAX_DOMAINS as usize,
        ),
        nr_pulled: r.nr_pulled,
        pulled: (r.nr_pulled > 0 && r.pulled_from >= 0).then_some(PulledTask {
            pid: r.pulled_pid,
            from: r.pulled_from as usize,
        }),
        hot_escape_domains: domain_list(r.hot_escape_domains, domains),
        cpus: r.cpus[..n]
            .iter()
            .zip(r.nr_cold)
            .map(|(c, cold)| NewidleCpu {
                cold: Some(u32::from(cold)),
                ..NewidleCpu::of(&cpu_of(c))
            })
            .collect(),
        ..NewidleRecord::default()
    })
}

/// Addresses of the kernel symbols bpf/oracle.bpf.c reads, from /proc/kallsyms.
#[derive(Default)]
struct Ksyms {
    per_cpu_offset: u64,
    runqueues: u64,
    sd_llc_shared: u64,
    sd_llc: u64,
    preempt_count: u64,
    pcpu_hot: u64,
    jiffies: u64,
}

fn ksyms() -> Result<Ksyms> {
    let text = std::fs::read_to_string("/proc/kallsyms").context("reading /proc/kallsyms")?;
    ksyms_from(&text)
}

/// The symbols of a /proc/kallsyms text; module symbols (a fourth field) are skipped.
fn ksyms_from(text: &str) -> Result<Ksyms> {
    let mut k = Ksyms::default();
    let mut zeros = 0usize;
    for line in text.lines() {
        let mut f = line.split_whitespace();
        let (Some(addr), Some(_), Some(name), None) = (f.next(), f.next(), f.next(), f.next())
        else {
            continue; // a module's symbol ("[module]" fourth field) or a malformed line
        };
        let slot = match name {
            "__per_cpu_offset" => &mut k.per_cpu_offset,
            "runqueues" => &mut k.runqueues,
            "sd_llc_shared" => &mut k.sd_llc_shared,
            "sd_llc" => &mut k.sd_llc,
            "__preempt_count" => &mut k.preempt_count,
            "pcpu_hot" => &mut k.pcpu_hot,
            "jiffies_64" => &mut k.jiffies,
            _ => continue,
        };
        let a = u64::from_str_radix(addr, 16).unwrap_or(0);
        zeros += (a == 0) as usize;
        *slot = a;
    }
    if k.per_cpu_offset == 0 || (zeros > 0 && k.runqueues == 0) {
        bail!(
            "/proc/kallsyms hides the kernel's addresses (kernel.kptr_restrict?): the oracle \
             needs those of __per_cpu_offset and runqueues"
        );
    }
    if k.runqueues == 0 {
        bail!("/proc/kallsyms has no runqueues: the oracle cannot read the runqueues");
    }
    Ok(k)
}

fn release() -> String {
    std::fs::read_to_string("/proc/sys/kernel/osrelease")
        .map(|s| s.trim().to_string())
        .unwrap_or_default()
}

/// What a recording on this kernel and machine needs, found before anything is loaded.
struct Target {
    /// How many parameters the hook takes (3 or 4).
    arity: usize,
    /// The hooks of this version.
    hooks: VersionHooks,
    /// Record newly-idle balances too (`--newidle`).
    newidle: bool,
    topo: Topology,
    release: String,
    /// The preset records are replayed with, and how sure that is.
    preset: &'static str,
    why: &'static str,
}

/// Records for `seconds` (or until Ctrl-C) into `out` (`-`: standard output), and the
/// newly-idle balances into `newidle` if given.
pub fn record(out: &Path, seconds: u64, overwrite: bool, newidle: Option<&Path>) -> Result<()> {
    bpf_load::check_root(unsafe { libc::geteuid() })?;
    let to_stdout = out.as_os_str() == "-";
    let overwrite = Overwrite {
        allowed: overwrite,
        flag: "--overwrite",
    };
    // The trace files' own checks, before anything is loaded.
    if !to_stdout {
        check_trace_path(out, overwrite)?;
    }
    if let Some(n) = newidle {
        if n.as_os_str() == "-" || n == out {
            return Err(crate::exit::BadInput(format!(
                "--newidle needs a file of its own, not {}",
                n.display()
            ))
            .into());
        }
        check_trace_path(n, overwrite)?;
    }
    let target = find_target(newidle.is_some())?;
    let mut open_object = MaybeUninit::uninit();
    let skel = load_and_attach(&mut open_object, &target)?;

    let sink: Box<dyn Write + Send> = if to_stdout {
        Box::new(std::io::stdout())
    } else {
        Box::new(open_trace_file(out, overwrite)?)
    };
    let newidle_sink: Option<Box<dyn Write + Send>> = match newidle {
        Some(n) => Some(Box::new(open_trace_file(n, overwrite)?)),
        None => None,
    };
    let (tx, writer) = spawn_writer(sink, newidle_sink, &target);
    let unreadable = drain(&skel, &target, seconds, tx)?;
    let w = match writer.join() {
        Ok(r) => r.with_context(|| match newidle {
            Some(n) => format!("writing {} or {}", out.display(), n.display()),
            None => format!("writing {}", out.display()),
        })?,
        Err(_) => bail!("the oracle's writer thread failed"),
    };
    log_summary(&skel, out, newidle, &w, unreadable);
    Ok(())
}

/// The kernel's hook, the machine's topology and the preset to replay with; an error if
/// the oracle cannot record here (or cannot record newly-idle balances, asked to).
fn find_target(newidle: bool) -> Result<Target> {
    if !Path::new(BTF_PATH).exists() {
        bail!("this kernel has no BTF ({BTF_PATH} is missing): the oracle cannot attach");
    }
    let (arity, hooks) = hook_arity()?;
    if newidle && hooks.newidle.is_none() {
        bail!(
            "this kernel's BTF has none of {}: --newidle cannot record here",
            NEWIDLE.join(", ")
        );
    }
    if arity != 3 && arity != 4 {
        bail!(
            "{HOOK} takes {arity} parameters here; the oracle knows the 3- and 4-parameter forms"
        );
    }
    let topo = super::sysfs::topology_from_sys(Path::new("/sys/devices/system"))
        .map_err(|e| anyhow!("reading the CPU topology: {e}"))?;
    let nr = topo.nr_cpus();
    if nr > intf::oracle_consts_ORACLE_MAX_CPUS as usize {
        bail!(
            "{nr} CPUs: the oracle describes at most {} per record",
            intf::oracle_consts_ORACLE_MAX_CPUS
        );
    }
    let release = release();
    let (preset, why) = preset_for_release(&release);
    Ok(Target {
        arity,
        hooks,
        newidle,
        topo,
        release,
        preset,
        why,
    })
}

/// Opens bpf/oracle.bpf.c with the kernel's addresses filled in and the programs of the
/// hook's form chosen, loads it and attaches it.
fn load_and_attach<'obj>(
    open_object: &'obj mut MaybeUninit<OpenObject>,
    target: &Target,
) -> Result<skel::OracleSkel<'obj>> {
    bpf_load::install();
    let mut open = skel::OracleSkelBuilder::default()
        .open(open_object)
        .context("opening the oracle's BPF object")?;
    let k = ksyms()?;
    if let Some(r) = open.maps.rodata_data.as_deref_mut() {
        r.nr_cpus = target.topo.nr_cpus() as u32;
        r.ksym_per_cpu_offset = k.per_cpu_offset;
        r.ksym_runqueues = k.runqueues;
        r.ksym_sd_llc_shared = k.sd_llc_shared;
        r.ksym_sd_llc = k.sd_llc;
        r.ksym_preempt_count = k.preempt_count;
        r.ksym_pcpu_hot = k.pcpu_hot;
        r.ksym_jiffies = k.jiffies;
        r.est_kernel_moves = target.hooks.moves;
        r.est_kernel_detach = target.hooks.detach;
    }
    let three = target.arity == 3;
    open.progs.oracle_enter3.set_autoload(three);
    open.progs.oracle_exit3.set_autoload(three);
    open.progs.oracle_enter4.set_autoload(!three);
    open.progs.oracle_exit4.set_autoload(!three);
    let progs = &mut open.progs;
    keep_the_one_found(
        [&mut progs.est_reweight3, &mut progs.est_reweight2],
        REWEIGHT,
        target.hooks.reweight,
        "the estimator misses nice changes",
    );
    progs.est_attached.set_autoload(target.hooks.moves);
    progs.est_removed.set_autoload(target.hooks.moves);
    progs.est_detached.set_autoload(target.hooks.detach);
    progs
        .est_dequeued_entities
        .set_autoload(target.hooks.dequeue_entities);
    if !target.hooks.moves {
        log::warn!(
            "oracle: no {} in this kernel's BTF: the estimator infers where a task's \
             averages join and leave a CPU's",
            MOVES.join(" and ")
        );
    }
    keep_the_one_found(
        [&mut progs.est_blocked1, &mut progs.est_blocked3],
        BLOCKED_UPDATE,
        target.hooks.blocked_update,
        "the estimator leaves idle CPUs' blocked load undecayed",
    );
    // The newly-idle balance's programs only when asked for (find_target() made sure the
    // kernel has the hook): each balance reads every CPU.
    let newidle = target.hooks.newidle.filter(|_| target.newidle);
    for (i, name) in NEWIDLE.into_iter().enumerate() {
        let on = newidle == Some(name);
        let (enter, exit) = match i {
            0 => (&mut progs.newidle_enter_new, &mut progs.newidle_exit_new),
            1 => (&mut progs.newidle_enter_old, &mut progs.newidle_exit_old),
            _ => (&mut progs.newidle_enter_pick, &mut progs.newidle_exit_pick),
        };
        enter.set_autoload(on);
        exit.set_autoload(on);
    }
    progs.newidle_pull.set_autoload(newidle.is_some());
    if newidle.is_some() {
        keep_the_one_found(
            [&mut progs.newidle_lb_new, &mut progs.newidle_lb_old],
            LOAD_BALANCE,
            target.hooks.load_balance,
            "newly-idle records do not say which domains were balanced",
        );
    } else {
        progs.newidle_lb_new.set_autoload(false);
        progs.newidle_lb_old.set_autoload(false);
    }
    let mut skel = open.load().map_err(load_error)?;
    skel.attach()
        .with_context(|| format!("attaching to {HOOK} (fentry/fexit)"))?;
    Ok(skel)
}

/// Of two programs for one hook whose kernel function is `names[i]` by version, loads the
/// one for the name this kernel's BTF has (`found`); with neither, warns what is lost.
fn keep_the_one_found(
    progs: [&mut libbpf_rs::OpenProgramMut<'_>; 2],
    names: [&str; 2],
    found: Option<&str>,
    without: &str,
) {
    for (prog, name) in progs.into_iter().zip(names) {
        prog.set_autoload(found == Some(name));
    }
    if found.is_none() {
        log::warn!(
            "oracle: no {} in this kernel's BTF: {without}",
            names.join(" or ")
        );
    }
}

/// Why the kernel refused the program, in one line: the verifier's reason, or the line
/// of libbpf's log that says it.
fn load_error(e: libbpf_rs::Error) -> anyhow::Error {
    if e.kind() == libbpf_rs::ErrorKind::PermissionDenied {
        return anyhow!(
            "the kernel does not let this process load BPF (EPERM): the oracle needs root \
             with CAP_BPF and CAP_PERFMON, and no lockdown or seccomp policy against BPF"
        );
    }
    let lines = bpf_load::tail();
    match bpf_load::verifier_reason(&lines) {
        Some(r) => anyhow!("the kernel refused the oracle's BPF program: {r}"),
        // libbpf's last line only says the skeleton failed; the one before says why.
        None => match lines
            .iter()
            .rev()
            .map(|l| l.trim())
            .find(|l| !l.is_empty() && !l.contains("failed to load BPF skeleton"))
        {
            Some(l) => anyhow!(
                "loading the oracle's BPF program failed: {e} ({})",
                l.trim()
            ),
            None => anyhow!("loading the oracle's BPF program failed: {e}"),
        },
    }
}

/// What the drain hands the writer: placements and newly-idle balances, with the kernel's
/// tick rate.
#[derive(Default)]
struct Batch {
    hz: u64,
    placements: Vec<Sample>,
    newidle: Vec<NewidleRecord>,
}

type Batches = SyncSender<Batch>;

/// One ring entry, of either ring.
enum Entry {
    Placement(Sample),
    Newidle(NewidleRecord),
}

/// What the writer wrote, and how many placements could not become a record.
#[derive(Default)]
struct Written {
    placements: u64,
    refused: u64,
    newidle: u64,
}

/// The writer thread: turns samples into trace lines and writes them to `sink`, and the
/// newly-idle balances to `newidle_sink`.  Records become JSON lines here, not where the
/// ring is drained, so that a slow disk or the conversion does not leave the ring to
/// fill.  A full queue stalls the drain: records are then lost in BPF, and counted there.
fn spawn_writer(
    sink: Box<dyn Write + Send>,
    newidle_sink: Option<Box<dyn Write + Send>>,
    target: &Target,
) -> (Batches, JoinHandle<std::io::Result<Written>>) {
    let (tx, rx) = std::sync::mpsc::sync_channel::<Batch>(QUEUED_BATCHES);
    let topo = target.topo.clone();
    let ti = TopologyInput::from_topology(&topo);
    let preset = target.preset.to_string();
    let release = target.release.clone();
    let ni_random = target.hooks.ni_random;
    let writer = std::thread::spawn(move || -> std::io::Result<Written> {
        let mut w = std::io::BufWriter::with_capacity(1 << 20, sink);
        let mut nw = newidle_sink.map(|s| std::io::BufWriter::with_capacity(1 << 18, s));
        let mut done = Written::default();
        for batch in rx {
            for s in &batch.placements {
                match s.to_trace(done.placements, &topo, &ti, &preset, batch.hz) {
                    Ok(rec) => {
                        let mut line = rec.to_json_line();
                        line.push('\n');
                        w.write_all(line.as_bytes())?;
                        done.placements += 1;
                    }
                    Err(_) => done.refused += 1,
                }
            }
            if let Some(nw) = nw.as_mut() {
                for mut r in batch.newidle {
                    r.seq = done.newidle;
                    r.topology = ti.clone();
                    r.release = release.clone();
                    r.ni_random = Some(ni_random);
                    let mut line = r.to_json_line();
                    line.push('\n');
                    nw.write_all(line.as_bytes())?;
                    done.newidle += 1;
                }
            }
        }
        w.flush()?;
        if let Some(nw) = nw.as_mut() {
            nw.flush()?;
        }
        Ok(done)
    });
    (tx, writer)
}

/// Drains the oracle's ring into `tx` for `seconds`, or until Ctrl-C/SIGTERM or the
/// writer stops, then once more; returns how many ring entries were not whole records.
/// Dropping `tx` on return ends the writer.
fn drain(skel: &skel::OracleSkel<'_>, target: &Target, seconds: u64, tx: Batches) -> Result<u64> {
    let inbox: Rc<RefCell<Batch>> = Default::default();
    let unreadable = Rc::new(Cell::new(0u64));
    let mut rbb = libbpf_rs::RingBufferBuilder::new();
    // Each ring's entries parsed into their list of the inbox; what is no whole record
    // counted as unreadable.
    let mut tap = |map, parse: fn(&[u8]) -> Option<Entry>| -> Result<()> {
        let (sink_in, bad) = (inbox.clone(), unreadable.clone());
        rbb.add(map, move |data: &[u8]| {
            match parse(data) {
                Some(Entry::Placement(s)) => sink_in.borrow_mut().placements.push(s),
                Some(Entry::Newidle(r)) => sink_in.borrow_mut().newidle.push(r),
                None => bad.set(bad.get() + 1),
            }
            0
        })?;
        Ok(())
    };
    tap(&skel.maps.records, |d| parse(d).map(Entry::Placement))?;
    if target.newidle {
        tap(&skel.maps.newidle, |d| parse_newidle(d).map(Entry::Newidle))?;
    }
    let ring = rbb.build()?;
    let stop = Arc::new(AtomicBool::new(false));
    let flag = stop.clone();
    ctrlc::set_handler(move || flag.store(true, Ordering::Relaxed))
        .context("installing the Ctrl-C/SIGTERM handler")?;
    let (arity, rel, nr) = (target.arity, &target.release, target.topo.nr_cpus());
    let (preset, why) = (target.preset, target.why);
    log::info!(
        "oracle: recording {HOOK} ({arity} parameters) on {rel}, {nr} CPUs, for {seconds}s; \
         replay preset {preset} ({why})"
    );
    let end = Instant::now() + Duration::from_secs(seconds);
    let mut hz = 0u64;
    let mut last = false;
    'record: loop {
        if !last {
            wait_readable(ring.epoll_fd(), 100)?;
        }
        // At most BATCH records per read: the scheduler's heap is fixed, so what waits
        // for the writer is bounded (BATCH x the channel's capacity); beyond that the
        // ring fills and BPF counts what it loses.
        loop {
            let n = ring.consume_raw_n(BATCH);
            if n < 0 {
                bail!("reading the oracle's ring failed: {n}");
            }
            let mut batch = std::mem::take(&mut *inbox.borrow_mut());
            let empty = batch.placements.is_empty() && batch.newidle.is_empty();
            if !batch.placements.is_empty() && hz == 0 {
                hz = kernel_hz(skel);
            }
            batch.hz = hz;
            if !empty && tx.send(batch).is_err() {
                break 'record; // the writer stopped: its error is reported by its join
            }
            if (n as usize) < BATCH {
                break;
            }
        }
        if last {
            break;
        }
        last = Instant::now() >= end || stop.load(Ordering::Relaxed);
    }
    Ok(unreadable.get())
}

/// The kernel's CONFIG_HZ, which BPF sets before its first record; 0 where libbpf found
/// no config, so then the usual 250 with a warning.
fn kernel_hz(skel: &skel::OracleSkel<'_>) -> u64 {
    let hz = skel
        .maps
        .bss_data
        .as_deref()
        .map_or(0, |b| b.kernel_hz as u64);
    if hz == 0 {
        log::warn!("oracle: the kernel's CONFIG_HZ is unknown; assuming 250");
        return 250;
    }
    hz
}

/// The recording's last lines: what was written where, and what was lost on the way
/// (`unreadable`: ring entries that were no record, and samples no trace line could be
/// made of).
fn log_summary(
    skel: &skel::OracleSkel<'_>,
    out: &Path,
    newidle: Option<&Path>,
    w: &Written,
    unreadable: u64,
) {
    let bss = skel.maps.bss_data.as_deref();
    let full = bss.map_or(0, |b| b.nr_ring_full);
    let unpaired = bss.map_or(0, |b| b.nr_exit_unpaired);
    if let Some(n) = newidle {
        log::info!(
            "oracle: {} newly-idle balances written to {}; {} lost to a full ring",
            w.newidle,
            n.display(),
            bss.map_or(0, |b| b.nr_newidle_ring_full)
        );
    }
    log::info!(
        "oracle: {} placements written to {}; {} lost to a full ring, {} unreadable, {} exits \
         without their entry",
        w.placements,
        if out.as_os_str() == "-" {
            "standard output".to_string()
        } else {
            out.display().to_string()
        },
        full,
        unreadable + w.refused,
        unpaired
    );
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kallsyms_addresses_are_read_and_hidden_ones_refused() {
        let text = "ffffffff82a0e2c0 R __per_cpu_offset\n\
                    0000000000034d40 D runqueues\n\
                    0000000000020018 D __preempt_count\n\
                    ffffffffc0000000 t runqueues\t[fake_module]\n\
                    ffffffff83c05a00 D jiffies_64\n";
        let k = ksyms_from(text).unwrap();
        assert_eq!(k.per_cpu_offset, 0xffffffff82a0e2c0);
        assert_eq!(k.runqueues, 0x34d40);
        assert_eq!(k.preempt_count, 0x20018);
        assert_eq!((k.sd_llc, k.pcpu_hot), (0, 0));
        let hidden = "0000000000000000 R __per_cpu_offset\n0000000000000000 D runqueues\n";
        let e = ksyms_from(hidden).err().unwrap().to_string();
        assert!(e.contains("kptr_restrict"), "{e}");
        let e = ksyms_from("ffffffff82a0e2c0 R __per_cpu_offset\n")
            .err()
            .unwrap()
            .to_string();
        assert!(e.contains("no runqueues"), "{e}");
    }

    #[test]
    fn a_short_or_oversized_ring_entry_is_not_a_record() {
        assert!(parse(&[0u8; 8]).is_none());
        let full = std::mem::size_of::<intf::oracle_record>();
        assert!(parse(&vec![0u8; full + 1]).is_none());
        // A whole record describing no CPU parses.
        let s = parse(&vec![0u8; full]).unwrap();
        assert!(s.cpus.is_empty());
    }
}
