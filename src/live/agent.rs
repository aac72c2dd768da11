//! The agent: loads our BPF component, receives every task that needs a
//! placement, decides its CPU and hands the decision back.
//!
//! One thread schedules. It must never block on anything a task it has not
//! placed yet could be holding, so after start-up it does no I/O but a
//! warning line when a ring read or an apply call fails: the socket, `set`'s
//! log lines, stats printing and the trace file are other threads', which the
//! BPF side dispatches without asking the agent (bpf/agent.bpf.c,
//! is_agent_helper_thread()). Between batches it takes `set`s from the socket
//! (apply_control) and publishes its counters for it (publish).
//!
//! The thread is pinned to one CPU, its home (`--agent-cpu`): it never
//! migrates, and BPF preempts that CPU's task when the agent has work. A
//! decision for a wake-up sent from ops.select_cpu() is offered at once to
//! that wake-up's ops.enqueue() through its handoff slot (`--agent-handoff`);
//! the others are handed over after the batch by the fast lane (one
//! `bpf_prog_test_run` of the apply_decisions program, which moves the tasks
//! onto their CPUs at once) or, on kernels that do not allow that, by the
//! decisions ring, drained in ops.dispatch(). Then it polls for new wake-ups
//! for up to `--agent-spin-us` before it yields the CPU.

use std::collections::VecDeque;
use std::mem::MaybeUninit;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use anyhow::{Context, Result, anyhow};
use libbpf_rs::OpenObject;
use log::{info, warn};
use scx_utils::{
    UserExitInfo, compat, scx_ops_attach, scx_ops_load, scx_ops_open, uei_exited, uei_report,
};
use scx_wakelab::bpf_load;
use scx_wakelab::exit::BadInput;
use scx_wakelab::policy::newidle;

use super::bpf_skel::*;
use super::placement::{Outcome, Placer};
use super::protocol::{self, APPLY_MAX, Decision, DecisionRing, Message, RING_ENTRIES, WakeupRing};
use super::socket::ControlQueue;
use super::stats::{HOP_ENQUEUE_READ, HOP_READ_COMMIT, LiveMetrics, PolicyCounters};

/// Where the scheduling thread runs (`--agent-cpu`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum AgentCpu {
    /// The highest-numbered CPU the process may use.
    Auto,
    Cpu(usize),
    /// Not pinned: any CPU whose dispatch finds the agent's work (it then
    /// migrates whenever its last CPU is busy).
    Any,
}

/// How decisions reach BPF (`--apply-path`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ApplyPath {
    /// The fast lane if the kernel allows it, else the ring.
    Auto,
    /// The apply_decisions SYSCALL program; fail if the kernel refuses it.
    Syscall,
    /// The decisions user ring, drained when the agent yields.
    Ring,
}

/// What the agent needs from the command line.
#[derive(Clone, Debug)]
pub struct AgentConfig {
    pub slice_ns: u64,
    pub partial: bool,
    pub exit_dump_len: u32,
    /// Test aid: load a program the verifier must reject.
    pub break_verifier: bool,
    /// Test aid: the wakeup ring counts as full at this many messages (0 = never early).
    pub ring_limit: u32,
    /// --idle-balance: busy CPUs kick idle ones to pull.
    pub idle_balance: bool,
    /// --idle-balance-busy-us: the busy CPU's current task must have run this long.
    pub idle_balance_busy_us: u64,
    /// --newidle-wait-own-wakee: see own_wakee_until in bpf/balance.bpf.c.
    pub newidle_wait_own_wakee: bool,
    /// --agent-cpu.
    pub agent_cpu: AgentCpu,
    /// --agent-spin-us: poll this long for new wake-ups after a batch.
    pub spin_us: u64,
    /// Wake-ups sent from ops.select_cpu() with a handoff slot (--agent-handoff).
    pub handoff: bool,
    /// --apply-path.
    pub apply_path: ApplyPath,
    /// --task-table-size: the per-task table's bound.
    pub task_table_size: usize,
    /// Test aid (--debug-half-apply): once, 2 s after load, carry out half a
    /// batch, record the other half without carrying it out, then stop
    /// (SIGSTOP) or kill (SIGKILL) this process.
    pub debug_half_apply: Option<i32>,
    pub open_opts: Option<libbpf_rs::libbpf_sys::bpf_object_open_opts>,
}

/// Messages taken from the ring per loop iteration: one apply run's worth,
/// which bounds the time between two hand-overs, so early tasks are not held
/// back by late ones.
const BATCH: usize = APPLY_MAX;
/// How often the scheduling thread publishes counters for the stats thread.
const PUBLISH_EVERY_NS: u64 = 100_000_000;
/// How long after handing a batch over the agent looks again for decisions
/// whose task was not parked yet (it read the message before ops.enqueue()'s
/// insert took effect), pausing between looks so that the enqueuing CPU can
/// finish; the heartbeat does the rest. A count of quick retries ran out
/// under an emulator that serialises CPUs before the other CPU ran at all,
/// and the task then waited for the heartbeat (100 ms): on hardware the
/// insert lands within microseconds, and the budget is seldom used.
const APPLY_RETRY_NS: u64 = 1_000_000;
/// PAUSEs between two such looks.
const APPLY_RETRY_PAUSES: u32 = 64;
/// Sleep reports a polling agent lets gather in the ring before it reads
/// them without a wake-up: half the ring, as BPF's agent_has_work().
const SLEEP_REPORTS_BATCH: u64 = protocol::RING_ENTRIES as u64 / 2;

/// How decisions reach BPF.
enum Transport {
    /// The apply_decisions program, run after each batch.
    FastLane,
    /// The decisions ring, and what it had no room for yet.
    Ring {
        ring: DecisionRing,
        backlog: VecDeque<Decision>,
    },
}

pub struct Agent<'a> {
    skel: BpfSkel<'a>,
    struct_ops: Option<libbpf_rs::Link>,
    wakeups: WakeupRing,
    transport: Transport,
    inbox: Vec<Message>,
    batch: Vec<Decision>,
    readings: Vec<protocol::CpuReading>,
    /// Scratch: the CPUs whose readings a batch refreshed.
    changed: Vec<usize>,
    placer: Placer,
    metrics: Arc<Mutex<LiveMetrics>>,
    local: LiveMetrics,
    /// When the counters were last published (CLOCK_MONOTONIC ns).
    last_publish_ns: u64,
    /// CLOCK_MONOTONIC as the scheduling loop last read it: read once in each
    /// step() (and at each commit), it serves the loop's other deadlines, so
    /// that a batch reads the clock about four times instead of seven.
    clock_ns: u64,
    control: ControlQueue,
    spin_ns: u64,
    /// Messages read from the ring so far, and the wake-ups among them
    /// (BPF's nr_ring_msgs and nr_ring_wakeups count those submitted): a
    /// spinning agent compares them, no syscall.
    consumed: u64,
    consumed_wakeups: u64,
    /// Until when wants_retry() looks again (CLOCK_MONOTONIC, ns).
    retry_until_ns: u64,
    /// --debug-half-apply: the signal, and when it may fire.
    half_apply: Option<(i32, Instant)>,
}

/// `--agent-cpu` judged before anything is created or loaded (a bad CPU is bad input,
/// exit 2), on the CPUs online now; each (re)load judges it again on its own topology,
/// which CPU hotplug may have changed.
pub fn check_agent_cpu(want: AgentCpu) -> Result<()> {
    if !matches!(want, AgentCpu::Cpu(_)) {
        return Ok(());
    }
    let topo = scx_utils::Topology::new().context("reading the CPU topology from sysfs")?;
    choose_home_cpu(want, &super::online_cpus(&topo)).map(|_| ())
}

/// The CPU the scheduling thread is pinned to, if any, among the online
/// CPUs this process may use.
fn choose_home_cpu(want: AgentCpu, online: &[usize]) -> Result<Option<usize>> {
    // SAFETY: sched_getaffinity writes only into the set we pass.
    let mut set: libc::cpu_set_t = unsafe { std::mem::zeroed() };
    if unsafe { libc::sched_getaffinity(0, size_of_cpuset(), &mut set) } != 0 {
        return Err(anyhow!(
            "reading the agent's CPU affinity: {}",
            std::io::Error::last_os_error()
        ));
    }
    // SAFETY: CPU_ISSET reads the set; cpu < CPU_SETSIZE is checked.
    let allowed =
        |cpu: usize| cpu < libc::CPU_SETSIZE as usize && unsafe { libc::CPU_ISSET(cpu, &set) };
    pick_home_cpu(want, online, allowed)
}

/// The highest-numbered allowed online CPU for `Auto`: benchmarks, and the
/// kernel's own idle scans (which start from the waker's or prev CPU and go
/// up), favour low-numbered CPUs, so the last one is the least wanted.
fn pick_home_cpu(
    want: AgentCpu,
    online: &[usize],
    allowed: impl Fn(usize) -> bool,
) -> Result<Option<usize>> {
    match want {
        AgentCpu::Any => Ok(None),
        AgentCpu::Cpu(cpu) => {
            if !online.contains(&cpu) {
                return Err(BadInput(format!(
                    "--agent-cpu {cpu}: not an online CPU (online: {})",
                    super::cpu_ranges(online)
                ))
                .into());
            }
            if !allowed(cpu) {
                return Err(BadInput(format!(
                    "--agent-cpu {cpu}: outside this process's CPU affinity"
                ))
                .into());
            }
            Ok(Some(cpu))
        }
        AgentCpu::Auto => online
            .iter()
            .rev()
            .copied()
            .find(|&c| allowed(c))
            .map(Some)
            .ok_or_else(|| anyhow!("no online CPU in this process's CPU affinity")),
    }
}

fn size_of_cpuset() -> usize {
    std::mem::size_of::<libc::cpu_set_t>()
}

/// Pin the calling thread to `cpu`.
fn pin_to(cpu: usize) -> Result<()> {
    // SAFETY: CPU_ZERO/CPU_SET write into our own set; sched_setaffinity reads it.
    let mut set: libc::cpu_set_t = unsafe { std::mem::zeroed() };
    unsafe {
        libc::CPU_ZERO(&mut set);
        libc::CPU_SET(cpu, &mut set);
    }
    if unsafe { libc::sched_setaffinity(0, size_of_cpuset(), &set) } != 0 {
        return Err(anyhow!(
            "pinning the agent to CPU {cpu}: {}",
            std::io::Error::last_os_error()
        ));
    }
    Ok(())
}

impl<'a> Agent<'a> {
    /// Load and attach. With `fast_lane` the apply_decisions program is
    /// loaded too; a kernel whose verifier refuses it fails the load, and
    /// the caller may try again without it.
    pub fn init(
        cfg: &AgentConfig,
        placer: Placer,
        open_object: &'a mut MaybeUninit<OpenObject>,
        metrics: Arc<Mutex<LiveMetrics>>,
        control: ControlQueue,
        fast_lane: bool,
    ) -> Result<Self> {
        let builder = BpfSkelBuilder::default();
        // After the builder: libbpf-rs' ObjectBuilder::debug() would replace
        // our print callback. Verbosity is ours to apply (-v shows libbpf's
        // messages through `log`).
        bpf_load::install();
        let open_opts = cfg.open_opts;
        let mut skel = scx_ops_open!(builder, open_object, wakelab_ops, open_opts)
            .context("opening the BPF component")?;

        let online: Vec<usize> = (0..placer.nr_cpus())
            .filter(|&c| placer.engine().topology().is_online(c))
            .collect();
        let home = choose_home_cpu(cfg.agent_cpu, &online)?;

        let rodata = skel
            .maps
            .rodata_data
            .as_mut()
            .ok_or_else(|| anyhow!("BPF .rodata is not mapped"))?;
        // The scheduling thread is this thread; the rest of the process
        // (stats, signal handling) are its helpers.
        rodata.agent_pid = unsafe { libc::gettid() };
        rodata.agent_tgid = std::process::id() as i32;
        rodata.slice_ns = cfg.slice_ns;
        rodata.break_verifier = cfg.break_verifier;
        rodata.ring_limit = cfg.ring_limit;
        rodata.idle_balance_on = cfg.idle_balance;
        rodata.idle_balance_busy_ns = cfg.idle_balance_busy_us * 1000;
        rodata.newidle_wait_own_wakee = cfg.newidle_wait_own_wakee;
        rodata.ring_transport = !fast_lane;
        rodata.debug_half_apply = cfg.debug_half_apply.is_some();
        rodata.handoff_on = cfg.handoff;
        if !fast_lane {
            skel.progs.apply_decisions.set_autoload(false);
        }

        let ops = skel.struct_ops.wakelab_ops_mut();
        // KEEP_BUILTIN_IDLE: we define ops.update_idle() for our table but
        // keep the kernel's idle masks (apply_parked() claims idle CPUs in
        // them). ALLOW_QUEUED_WAKEUP: remote wake-ups go through the
        // wakelist, so rq->ttwu_pending means something for our tasks too
        // (cfs-wakeup-placement.md, 11.5). ENQ_LAST: without it the kernel
        // keeps running a yielding agent whose CPU has nothing else to do,
        // and the agent spins instead of parking in its queue
        // (bpf/main.bpf.c, wakelab_enqueue()).
        ops.flags = *compat::SCX_OPS_KEEP_BUILTIN_IDLE
            | *compat::SCX_OPS_ALLOW_QUEUED_WAKEUP
            | *compat::SCX_OPS_ENQ_LAST;
        if cfg.partial {
            ops.flags |= *compat::SCX_OPS_SWITCH_PARTIAL;
        }
        ops.exit_dump_len = cfg.exit_dump_len;

        let mut skel = match scx_ops_load!(skel, wakelab_ops, uei) {
            Ok(skel) => skel,
            Err(e) => {
                let tail = bpf_load::tail();
                return Err(match bpf_load::verifier_reason(&tail) {
                    Some(reason) => anyhow!(
                        "loading the BPF component failed: the verifier said: {reason} (run with -v for the full log)"
                    ),
                    None => anyhow!("loading the BPF component failed: {e:#}"),
                });
            }
        };

        // Before attach: BPF reads these from its first callback on.
        {
            let bss = skel
                .maps
                .bss_data
                .as_mut()
                .ok_or_else(|| anyhow!("BPF .bss is not mapped"))?;
            let topo = placer.engine().topology();
            let llc_node: Vec<(u32, u32)> = (0..topo.nr_cpus())
                .map(|c| topo.desc(c).map_or((0, 0), |d| (d.llc, d.node)))
                .collect();
            protocol::set_topology(bss, &llc_node, &newidle::rule_topology(topo), home);
        }
        push_policy_to_bpf(&mut skel, &placer);

        // Pinned before the scheduler takes over, so that the kernel never
        // has to move the agent once it is ours.
        if let Some(cpu) = home {
            pin_to(cpu)?;
        }

        let link = scx_ops_attach!(skel, wakelab_ops)?;

        let wakeups = WakeupRing::new(&skel.maps.wakeups)?;
        let transport = if fast_lane {
            Transport::FastLane
        } else {
            Transport::Ring {
                ring: DecisionRing::new(&skel.maps.decisions)?,
                backlog: VecDeque::with_capacity(RING_ENTRIES),
            }
        };

        // A page fault in the scheduling thread can deadlock the machine:
        // the task that would resolve it may be waiting for us. Lock all
        // memory (rustland_core's allocator is our global allocator: its
        // 64 MiB heap is static, so it is locked too).
        scx_rustland_core::ALLOCATOR.lock_memory();

        if cfg.partial {
            // In partial mode only SCHED_EXT tasks are ours; the agent must
            // be one of them or it would spin under the fair class.
            let param = libc::sched_param { sched_priority: 0 };
            const SCHED_EXT: i32 = 7;
            if unsafe { libc::sched_setscheduler(0, SCHED_EXT, &param) } != 0 {
                return Err(anyhow!(
                    "switching the agent to SCHED_EXT failed: {}",
                    std::io::Error::last_os_error()
                ));
            }
        }

        info!(
            "scx_wakelab loaded: {} CPUs, slice {} us, {} mode; decisions by {}; agent on {}, spinning up to {} us after a batch",
            placer.nr_cpus(),
            cfg.slice_ns / 1000,
            if cfg.partial { "partial" } else { "full" },
            if fast_lane {
                "the fast lane (apply_decisions SYSCALL program)"
            } else {
                "the decisions ring (fallback)"
            },
            home.map_or("any CPU (not pinned)".to_string(), |c| format!("CPU {c}")),
            cfg.spin_us
        );
        Ok(Agent {
            skel,
            struct_ops: Some(link),
            wakeups,
            transport,
            inbox: Vec::with_capacity(BATCH),
            batch: Vec::with_capacity(BATCH),
            readings: vec![protocol::CpuReading::default(); placer.nr_cpus()],
            changed: Vec::with_capacity(placer.nr_cpus() * 4),
            placer,
            metrics,
            local: LiveMetrics::default(),
            last_publish_ns: 0,
            clock_ns: 0,
            control,
            spin_ns: cfg.spin_us * 1000,
            consumed: 0,
            consumed_wakeups: 0,
            retry_until_ns: 0,
            half_apply: cfg
                .debug_half_apply
                .map(|sig| (sig, Instant::now() + Duration::from_secs(2))),
        })
    }

    /// The scheduling loop. Returns when asked to stop or when the kernel
    /// unloads us; the exit info says whether to restart.
    pub fn run(&mut self, shutdown: &AtomicBool) -> Result<UserExitInfo> {
        let mut spin_until = 0;
        while !shutdown.load(Ordering::Relaxed) && !uei_exited!(&self.skel, uei) {
            let placed = self.step()?;
            self.apply_control();
            self.publish(false);
            if placed {
                spin_until = self.clock_ns + self.spin_ns;
            }
            // A task waits for this CPU: give it up now.
            if self.take_yield_request() {
                std::thread::yield_now();
                continue;
            }
            if self.wants_retry() || self.spin_for_work(spin_until) {
                continue;
            }
            // Give the CPU back. BPF parks us in our own queue and runs us
            // again only when there is work (or at the heartbeat).
            std::thread::yield_now();
        }
        self.publish(true);
        // Detach first so that no task waits for a decision we will not make.
        self.struct_ops.take();
        uei_report!(&self.skel, uei)
    }

    /// Read what waits in the ring, decide, hand the decisions over.
    /// Returns whether anything was decided.
    fn step(&mut self) -> Result<bool> {
        if let Transport::Ring { .. } = self.transport {
            self.flush_backlog();
            if self.backlog_len() > 0 {
                return Ok(false);
            }
        }
        let mut inbox = std::mem::take(&mut self.inbox);
        let read = self.wakeups.consume(BATCH, &mut inbox);
        let read_ns = monotonic_ns();
        self.clock_ns = read_ns;
        if let Err(e) = read {
            warn!("{e:#}");
        }
        // Handed-off decisions count too: the wake-ups that follow a pair's
        // handed one are as close as any others.
        let placed = self.place(&inbox, read_ns) > 0;
        self.hand_over()?;
        self.inbox = inbox;
        Ok(placed)
    }

    /// Decide every message of `msgs`, read at `read_ns` (CLOCK_MONOTONIC):
    /// handed off at once where the task's enqueue has not run yet, the rest
    /// into self.batch. Returns the number of wake-ups decided.
    fn place(&mut self, msgs: &[Message], read_ns: u64) -> u64 {
        self.batch.clear();
        if msgs.is_empty() {
            return 0;
        }
        let wakeups = msgs
            .iter()
            .filter(|m| matches!(m, Message::Wakeup(_)))
            .count() as u64;
        // Held from now until hand_over(): BPF runs a preempted agent on while it holds
        // wake-ups, whose tasks wait for nothing else.
        let held = wakeups + self.backlog_len() as u64;
        let bss = self.skel.maps.bss_data.as_mut().expect("bss is mapped");
        protocol::note_consumed(bss, msgs.len() as u64, wakeups, held);
        self.consumed += msgs.len() as u64;
        self.consumed_wakeups += wakeups;
        let now = msgs.iter().map(Message::at_ns).max().unwrap_or(0);
        // Sleep reports (delayed-dequeue emulation) first: they happened
        // before the CPU states read next, and a CPU idle there has dequeued
        // its delayed sleepers (Placer::rebuild()). A task's own wake-up cannot
        // precede its sleep in one batch: it sleeps only after running,
        // which its decision, not made yet, would allow.
        for msg in msgs {
            if let Message::Sleep(s) = msg {
                self.local.sleep_events += 1;
                self.placer.on_sleep(s);
            }
        }
        if wakeups > 0 {
            // Only the CPUs BPF marked changed since the last batch are read and
            // rebuilt; `readings` keeps the others' last reading.
            self.changed.clear();
            protocol::read_changed_cpus(bss, &mut self.readings, &mut self.changed);
            self.placer
                .begin_batch_changed(&self.readings, &self.changed, now);
        }
        for msg in msgs {
            let Message::Wakeup(w) = msg else {
                continue;
            };
            self.local
                .record_hop(HOP_ENQUEUE_READ, read_ns.saturating_sub(w.enqueue_mono_ns));
            let placed = self.placer.place(w);
            self.local.nr_decisions += 1;
            if placed.outcome == Outcome::DelayedRequeue {
                self.local.delayed_requeues += 1;
            }
            // On its way until BPF carries it out: a newly-idle CPU with
            // decisions coming skips its pull (seed 2), and the next batch
            // counts the task as queued there.
            protocol::add_inflight(bss, placed.cpu);
            // Sent before its enqueue: if that has not run yet, it takes the
            // decision from memory, and nothing needs applying.
            if w.handoff_seq != 0 {
                let committed = monotonic_ns();
                self.clock_ns = committed;
                if protocol::try_handoff(bss, w.handoff_seq, placed.cpu, committed) {
                    self.local
                        .record_hop(HOP_READ_COMMIT, committed.saturating_sub(read_ns));
                    continue;
                }
            }
            self.batch.push(Decision::for_wakeup(w, placed.cpu));
        }
        // Handed over now: one clock read for the batch.
        if self.batch.is_empty() {
            return wakeups;
        }
        let committed = monotonic_ns();
        self.clock_ns = committed;
        for d in &mut self.batch {
            d.committed_ns = committed;
            self.local
                .record_hop(HOP_READ_COMMIT, committed.saturating_sub(read_ns));
        }
        wakeups
    }

    /// Hand self.batch to BPF.
    fn hand_over(&mut self) -> Result<()> {
        match &mut self.transport {
            Transport::FastLane => {
                let bss = self.skel.maps.bss_data.as_mut().expect("bss is mapped");
                if !self.batch.is_empty() {
                    if let Some((sig, at)) = self.half_apply
                        && self.batch.len() >= 2
                        && Instant::now() >= at
                    {
                        let (first, second) = self.batch.split_at(self.batch.len() / 2);
                        protocol::apply(&self.skel.progs.apply_decisions, bss, first)?;
                        protocol::record_only(&self.skel.progs.apply_decisions, bss, second)?;
                        // SAFETY: raise() only signals this process.
                        unsafe { libc::raise(sig) };
                        self.half_apply = None;
                    }
                    protocol::apply(&self.skel.progs.apply_decisions, bss, &self.batch)?;
                    self.retry_until_ns = self.clock_ns + APPLY_RETRY_NS;
                }
                // Every decision read is BPF's now, applied or handed off (or
                // none was read): BPF must not keep a yielding agent running
                // for decisions it already has (agent_has_work()).
                protocol::set_holding(bss, 0);
            }
            Transport::Ring { backlog, .. } => backlog.extend(self.batch.drain(..)),
        }
        self.flush_backlog();
        Ok(())
    }

    /// Fast lane: decisions whose task was not parked yet when the apply
    /// run looked (the agent read the message first). Look again, pausing
    /// between looks, for up to APPLY_RETRY_NS after the batch; the
    /// heartbeat does the rest. Returns whether it looked.
    fn wants_retry(&mut self) -> bool {
        if !matches!(self.transport, Transport::FastLane) {
            return false;
        }
        let bss = self.skel.maps.bss_data.as_mut().expect("bss is mapped");
        if protocol::decisions_pending(bss) == 0 || monotonic_ns() >= self.retry_until_ns {
            return false;
        }
        for _ in 0..APPLY_RETRY_PAUSES {
            std::hint::spin_loop();
        }
        self.local.apply_retries += 1;
        if let Err(e) = protocol::apply(&self.skel.progs.apply_decisions, bss, &[]) {
            warn!("{e:#}");
        }
        true
    }

    fn backlog_len(&self) -> usize {
        match &self.transport {
            Transport::Ring { backlog, .. } => backlog.len(),
            Transport::FastLane => 0,
        }
    }

    /// Ring transport: submit queued decisions until the ring is full.
    fn flush_backlog(&mut self) {
        let Transport::Ring { ring, backlog } = &mut self.transport else {
            return;
        };
        while let Some(d) = backlog.front() {
            if !ring.submit(d) {
                self.local.decision_ring_full += 1;
                break;
            }
            backlog.pop_front();
        }
        let n = backlog.len() as u64;
        if let Some(bss) = self.skel.maps.bss_data.as_mut() {
            protocol::set_holding(bss, n);
        }
    }

    fn take_yield_request(&mut self) -> bool {
        let bss = self.skel.maps.bss_data.as_mut().expect("bss is mapped");
        protocol::take_yield_request(bss)
    }

    /// Poll for new messages until `until` (CLOCK_MONOTONIC): true when one
    /// came, false when the time ran out or a task wants this CPU. The ring
    /// is compared through memory only; `spin_loop()` is x86's PAUSE, which
    /// also hands an emulator's turn to the next vCPU (QEMU TCG).
    fn spin_for_work(&mut self, until: u64) -> bool {
        // A clock read of its own: since the step's, the agent may have made
        // an apply call or been preempted, which is not polling.
        let start = monotonic_ns();
        if start >= until {
            return false;
        }
        let bss = self.skel.maps.bss_data.as_ref().expect("bss is mapped");
        let mut got = false;
        let mut now = start;
        let mut i: u32 = 0;
        loop {
            // A wake-up, or sleep reports filling half the ring: sleep
            // reports alone wait for the next wake-up's batch.
            if protocol::ring_wakeups(bss) != self.consumed_wakeups
                || protocol::ring_msgs(bss) - self.consumed > SLEEP_REPORTS_BATCH
            {
                got = true;
                break;
            }
            // The first lap too: under load a lap can be long (QEMU's round
            // robin runs every other vCPU's turn in it), and the window must
            // not run on for 64 of them.
            if i.is_multiple_of(64) {
                if protocol::yield_requested(bss) || self.control.has_requests() {
                    break;
                }
                now = monotonic_ns();
                if now >= until {
                    break;
                }
            }
            i = i.wrapping_add(1);
            std::hint::spin_loop();
        }
        // The clock is read every 64 polls only: read it once more, or a
        // spin that ended in a wake-up would count as short as its last read.
        if got {
            now = monotonic_ns();
        }
        self.clock_ns = now;
        self.local.agent_spin_ns += now.max(start) - start;
        got
    }

    /// Runtime flag changes from `scx_wakelab set`, applied between batches.
    /// try_lock: the control thread never holds the queue for long, and a
    /// busy queue is simply looked at next time.
    fn apply_control(&mut self) {
        let Some(requests) = self.control.try_take() else {
            return;
        };
        for req in requests {
            let old = self
                .placer
                .engine()
                .config()
                .get(&req.key)
                .unwrap_or_default();
            let reply = match self.placer.set(&req.key, &req.value) {
                Ok(()) => {
                    self.local.config_changes += 1;
                    Ok(old)
                }
                Err(e) => Err(e),
            };
            req.respond(reply, *self.placer.engine().config());
        }
        push_policy_to_bpf(&mut self.skel, &self.placer);
    }

    /// Copy counters for the stats thread. try_lock: the scheduling thread
    /// never waits for a reader.
    fn publish(&mut self, force: bool) {
        if !force && self.clock_ns.saturating_sub(self.last_publish_ns) < PUBLISH_EVERY_NS {
            return;
        }
        let Some(bss) = self.skel.maps.bss_data.as_ref() else {
            return;
        };
        protocol::read_counters(bss, &mut self.local);
        self.local.policy = PolicyCounters(*self.placer.engine().counters());
        self.local.trace_dropped = self.placer.trace_dropped;
        self.local.task_evictions = self.placer.task_evictions;
        // publish() runs on the scheduling thread: its clock is the agent's.
        self.local.agent_cpu_ns = cpu_clock_ns(libc::CLOCK_THREAD_CPUTIME_ID);
        self.local.process_cpu_ns = cpu_clock_ns(libc::CLOCK_PROCESS_CPUTIME_ID);
        (
            self.local.agent_voluntary_switches,
            self.local.agent_involuntary_switches,
        ) = thread_switches();
        let guard = if force {
            self.metrics.lock().ok()
        } else {
            self.metrics.try_lock().ok()
        };
        if let Some(mut m) = guard {
            *m = self.local.clone();
            self.last_publish_ns = self.clock_ns;
        }
    }
}

/// CLOCK_MONOTONIC now, ns: the clock of BPF's bpf_ktime_get_ns(), for hop times.
pub(crate) fn monotonic_ns() -> u64 {
    cpu_clock_ns(libc::CLOCK_MONOTONIC)
}

/// The calling thread's (voluntary, involuntary) context switches so far.
fn thread_switches() -> (u64, u64) {
    // SAFETY: getrusage writes only to the struct we pass.
    let mut ru: libc::rusage = unsafe { std::mem::zeroed() };
    if unsafe { libc::getrusage(libc::RUSAGE_THREAD, &mut ru) } != 0 {
        return (0, 0);
    }
    (ru.ru_nvcsw as u64, ru.ru_nivcsw as u64)
}

/// Time consumed so far on `clock` (a CPU-time clock, or CLOCK_MONOTONIC), ns.
fn cpu_clock_ns(clock: libc::clockid_t) -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: clock_gettime writes only to the timespec we pass.
    if unsafe { libc::clock_gettime(clock, &mut ts) } != 0 {
        return 0;
    }
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

/// BPF's newly-idle pull (bpf/balance.bpf.c, newidle_balance()) is always on:
/// fair.c balances every CPU that goes idle, and no preset or flag turns that
/// off. It decides by the engine's rule (bpf/newidle_rule.h), whose config
/// (seed 2's flag among it) travels with every change of the engine's.
const NEWIDLE_PULL: bool = true;

/// The parts of the policy that BPF carries out itself.
fn push_policy_to_bpf(skel: &mut BpfSkel, placer: &Placer) {
    if let Some(bss) = skel.maps.bss_data.as_mut() {
        let engine = placer.engine();
        protocol::set_policy(
            bss,
            placer.wants_sleep_events(),
            NEWIDLE_PULL,
            &newidle::rule_config(engine.config(), engine.topology()),
        );
    }
}

impl Drop for Agent<'_> {
    fn drop(&mut self) {
        self.struct_ops.take();
        scx_rustland_core::ALLOCATOR.unlock_memory();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn home_cpu_is_the_last_allowed_online_cpu_or_the_one_asked_for() {
        let online = [0, 1, 2, 3, 5];
        let all = |_| true;
        let not_5 = |c| c != 5;
        assert_eq!(
            pick_home_cpu(AgentCpu::Auto, &online, all).unwrap(),
            Some(5)
        );
        assert_eq!(
            pick_home_cpu(AgentCpu::Auto, &online, not_5).unwrap(),
            Some(3)
        );
        assert_eq!(
            pick_home_cpu(AgentCpu::Cpu(0), &online, all).unwrap(),
            Some(0)
        );
        assert_eq!(pick_home_cpu(AgentCpu::Any, &online, all).unwrap(), None);
        let e = pick_home_cpu(AgentCpu::Cpu(4), &online, all)
            .unwrap_err()
            .to_string();
        assert_eq!(e, "--agent-cpu 4: not an online CPU (online: 0-3,5)");
        let e = pick_home_cpu(AgentCpu::Cpu(5), &online, not_5)
            .unwrap_err()
            .to_string();
        assert!(e.contains("outside this process's CPU affinity"), "{e}");
        assert!(pick_home_cpu(AgentCpu::Auto, &online, |_| false).is_err());
        // and the real process: some CPU of those it may use
        let here: Vec<usize> =
            (0..std::thread::available_parallelism().map_or(1, |n| n.get())).collect();
        assert!(choose_home_cpu(AgentCpu::Auto, &here).is_ok());
    }
}
