//! The discrete-event core: CPUs with FIFO runqueues, tasks that run bursts, block and
//! are woken, and the policy engine deciding every placement and newly-idle pull.
//!
//! Time is virtual (ns).  Events are ordered by (time, sequence number), so ties resolve
//! in the order they were scheduled and a run is a pure function of its [`SimSpec`].
//!
//! What is modelled, and how, in the order the kernel would meet it:
//!
//! - **Running.** A CPU runs its current task for the task's burst, or until a
//!   round-robin slice expires with others waiting.  No wake-up preemption (EEVDF would
//!   often let a freshly woken task preempt a long-running one; here it waits for the
//!   slice), which makes latencies behind CPU hogs pessimistic.
//! - **Waking** (`try_to_wake_up`), in the kernel's order: a wakee still queued by delayed
//!   dequeue is requeued in place (`ttwu_runnable`, no placement); a wakee still in
//!   schedule() on its CPU goes back to that CPU's wakelist (`WF_ON_CPU`, no placement);
//!   otherwise the engine places it (`select_task_rq`).  Delivery follows
//!   `ttwu_queue_cond()`: on the waker's CPU at once; to another LLC, or to a CPU with
//!   nothing running, through the wakelist: the task arrives `ipi_ns` later and the
//!   target shows `ttwu_pending` meanwhile; to a busy CPU of the same LLC at once.
//! - **Blocking, and EEVDF lag.** Each CPU keeps EEVDF's bookkeeping for its queued
//!   entities (running, waiting and delayed): vruntimes, their average V, and each task's
//!   remembered lag, placed back on wake-up (`place_entity()` with PLACE_LAG, the lag
//!   scaled by (n+1)/n and clamped to max(2·slice, 1 ms)).  Only the bookkeeping: the pick
//!   order stays FIFO/round-robin.  A task that blocks with negative lag (it ran ahead of
//!   V, e.g. during the tail of its run after waking someone onto its CPU) is, with
//!   delayed dequeue on, kept counted through `policy::DelayedDequeue` until V catches up
//!   with it (then its lag is clipped to 0, DELAY_ZERO), until its CPU runs out of other
//!   work, or until it is woken (requeued in place).  A CPU left with nothing runnable spends
//!   `switch_ns` in schedule(), then drops its delayed tasks (the pick dequeues them) and
//!   runs the newly-idle balance through `Engine::newidle_pull`; if that pulls nothing the
//!   CPU goes idle and `Engine::on_cpu_idle` updates the LLC's idle-core hint.
//! - **Balancing.** Besides newly-idle pulls, a periodic balance (every `tick_ns`) lets
//!   an idle CPU pull the longest-waiting task of a busy CPU, nearest domain first: the
//!   "load balancer moves it back" of Barry Song's report.  Cache-hotness refusals and
//!   group imbalance rules are not modelled.
//! - **Snapshots.** Per CPU: idle (nothing running and not in schedule()), nr_running
//!   (running + queued + delayed), nr_delayed, ttwu_pending, a PELT-like load (runnable
//!   tasks attached to the CPU, 32 ms half-life, blocked load decaying with its task) and
//!   util (running time, same half-life), and avg_idle (the kernel's `update_avg` of idle
//!   periods, capped at 1 ms).

use std::cmp::Ordering;
use std::collections::{BinaryHeap, VecDeque};
use std::rc::Rc;

use crate::policy::{
    Counters, CpuSet, CpuSnapshot, DelayedDequeue, Distance, Engine, PullCandidate, TaskState,
    Topology, WAKE_FORK, WAKE_SYNC, WAKE_TTWU, WakeCtx, WakerContext,
};

use super::spec::{HackbenchMode, ModelParams, SimSpec, Workload};
use crate::policy::pelt;
use crate::policy::rng::XorShift;

/// `2 * sysctl_sched_migration_cost`, the cap of `rq->avg_idle`.
const AVG_IDLE_MAX_NS: u64 = 1_000_000;
/// A burst that never ends (CPU hogs).
const FOREVER: u64 = u64::MAX / 4;
/// hackbench's cost per message, ns: a write and a read of 100 bytes; a unix socket's path
/// is longer than a pipe's.
const HACKBENCH_PIPE_NS: u64 = 1_500;
const HACKBENCH_SOCKET_NS: u64 = 3_000;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Run {
    Running,
    Queued,
    Blocked,
    /// Asleep but still counted on its CPU (delayed dequeue).
    Delayed,
    /// Woken through a wakelist; arrives at `Task::cpu` later.
    InFlight,
    Exited,
}

/// What a task does; each variant is one role of a workload.
#[derive(Clone, Debug)]
enum Script {
    /// Wait for a token, work, pass it to `next` with a sync wake-up from `ctx`.
    Ring {
        next: usize,
        work_ns: u64,
        /// Runs on after the wake-up (return from write, call read) before blocking.
        tail_ns: u64,
        ctx: WakerContext,
    },
    /// hackbench sender: one message per burst to each receiver in turn.
    Sender {
        receivers: Rc<[usize]>,
        next: usize,
        left: u64,
        cost_ns: u64,
    },
    /// hackbench receiver: one message per burst; frees a blocked writer.
    Receiver { left: u64, cost_ns: u64 },
    /// softirq-rr server: answer a request, the next one arrives from the network.
    RrServer { flow: usize, work_ns: u64 },
    /// Never blocks.
    Hog,
    /// newidle-burst client: `burst` back-to-back requests, then a pause.
    BurstClient {
        server: usize,
        think_ns: u64,
        burst: u32,
        left: u32,
        pause_ns: u64,
    },
    /// Runs `run_ns`, sleeps `sleep_ns` on a timer.
    Batch { run_ns: u64, sleep_ns: u64 },
}

struct Task {
    ps: TaskState,
    /// Background noise (per-CPU housekeeping): scheduled like any task, left out of
    /// every statistic.
    background: bool,
    cpu: usize,
    run: Run,
    /// Work left in the current burst, ns; 0 = the next stint starts a new burst.
    remaining: u64,
    /// Run time of the current burst so far.
    ran: u64,
    /// The current burst is the tail of a ring hop (after the wake-up, before blocking).
    in_tail: bool,
    /// EEVDF vruntime, meaningful while `on_rq`.
    v: f64,
    /// EEVDF lag remembered at dequeue (positive = owed service).
    vlag: f64,
    /// Counted in its CPU's EEVDF average (running, waiting or delayed).
    on_rq: bool,
    /// Wake-up tokens (a pipe's data, a request, a timer) not consumed yet.
    inbox: u32,
    /// Set at wake-up, cleared when the task runs: the latency proxy.
    woken_at: Option<u64>,
    script: Script,
    /// Writers blocked on this (receiver) task's full buffer.
    blocked_writers: VecDeque<usize>,
    load: f64,
    runnable: bool,
    last_pelt: u64,
}

struct Cpu {
    curr: Option<usize>,
    queue: VecDeque<usize>,
    /// Bumped whenever the current stint changes; stale run-end events carry an old one.
    epoch: u64,
    /// When the current segment (burst piece) started.
    seg_start: u64,
    slice_end: u64,
    /// The task that blocked and the CPU is still in schedule() for.
    switching: Option<usize>,
    /// Wakelist arrivals in flight (`ttwu_pending` while > 0).
    pending: u32,
    idle_since: Option<u64>,
    avg_idle: u64,
    /// When it last left idle for a task (`CpuSnapshot::idle_exit_ns`).
    idle_exit: u64,
    load: f64,
    runnable_attached: u32,
    util: f64,
    last_pelt: u64,
    /// EEVDF: sum and number of the queued entities' vruntimes (V = vsum / nq), V when
    /// the queue emptied, and when the running task's vruntime was last advanced.
    vsum: f64,
    nq: u32,
    vbase: f64,
    v_last: u64,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Ev {
    RunEnd { cpu: usize, epoch: u64 },
    NewIdle { cpu: usize, epoch: u64 },
    Arrive { task: usize },
    Tick,
    Timer { task: usize },
    Packet { flow: usize },
}

struct Entry {
    time: u64,
    seq: u64,
    ev: Ev,
}

impl PartialEq for Entry {
    fn eq(&self, o: &Self) -> bool {
        (self.time, self.seq) == (o.time, o.seq)
    }
}
impl Eq for Entry {}
impl PartialOrd for Entry {
    fn partial_cmp(&self, o: &Self) -> Option<Ordering> {
        Some(self.cmp(o))
    }
}
impl Ord for Entry {
    // Min-heap on (time, seq).
    fn cmp(&self, o: &Self) -> Ordering {
        (o.time, o.seq).cmp(&(self.time, self.seq))
    }
}

/// Who wakes: the CPU, the context, and `current` there (a task or that CPU's idle task).
#[derive(Clone, Copy)]
struct Waker {
    cpu: usize,
    ctx: WakerContext,
    task: Option<usize>,
}

/// A softirq-rr flow: its server task and the CPU whose NIC queue raises its softirq.
struct Flow {
    server: usize,
    irq_cpu: usize,
    rtt_ns: u64,
}

/// Raw results; `super::report` turns them into a [`super::SimReport`].
#[derive(Clone, Debug, Default)]
pub struct Raw {
    pub now_ns: u64,
    pub events: u64,
    pub wakeups: u64,
    pub placed: u64,
    pub requeued_delayed: u64,
    pub wakelist_on_cpu: u64,
    /// Migrations by distance (index = Distance as ordered in `dist_index`).
    pub wake_migrations: [u64; 5],
    pub newidle_migrations: [u64; 5],
    pub tick_migrations: [u64; 5],
    pub tick_pulls: u64,
    pub latencies: Vec<u64>,
    pub work_units: u64,
    pub wake_counters: Counters,
    pub newidle_counters: Counters,
    pub tasks: usize,
    pub finished: bool,
    /// The run stopped because it woke tasks more often than its [`Footprint`] planned
    /// for (its latencies would have outgrown what was set aside for them).
    pub over_footprint: bool,
}

pub fn dist_index(d: Distance) -> usize {
    match d {
        Distance::SameCpu => 0,
        Distance::SmtSibling => 1,
        Distance::SameLlc => 2,
        Distance::SameNode => 3,
        Distance::RemoteNode => 4,
    }
}

/// What a run will hold, estimated from its parameters before anything is built, so that
/// a run too large for the heap it would run on is refused with one line instead of
/// aborting that process halfway (see `crate::heap`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Footprint {
    pub cpus: u64,
    /// The workload's tasks and one background task per CPU.
    pub tasks: u64,
    /// The wake-ups whose latency the run keeps, at most: room for that many is set aside,
    /// and a run that has more stops ([`Raw::over_footprint`]).
    pub wakeups: u64,
    /// Everything above, in blocks as the fixed heap's buddy allocator hands them out.
    pub bytes: u64,
    /// The largest of those blocks.
    pub largest_block: u64,
}

/// Bytes per CPU of the policy's own tables, which the world holds twice (its topology and
/// the engine's, each with three masks of 128 bytes and a description per CPU) besides the
/// engine's and delayed dequeue's per-CPU state.
const POLICY_BYTES_PER_CPU: u64 = 2048;

/// Bytes a run needs whatever its size: the report, the spec, the labels.
const RUN_BYTES: u64 = 64 << 10;

/// The estimate of what `spec` will hold (`spec` passed [`SimSpec::check_size`]).
///
/// The wake-ups: every one of them ends a burst of work that needs a CPU (a ring's hop, a
/// message, a request served), or is the one timer or packet such a burst arms.  So each
/// source of wake-ups (a ring, a pair, a flow, a batch task) has at most its own per cycle
/// of its bursts (and sleeps) over the run, and all of them together at most one per
/// shortest burst per CPU; a quarter more for the jitter, which can make a short run's
/// bursts shorter than their mean (never its mean shorter), and one more per task for the
/// bursts under way at the start.  Bounded by `--events` (a wake-up is handled within an
/// event, at most one per event) and, for hackbench, by the messages it sends.
pub fn footprint(spec: &SimSpec) -> Footprint {
    use std::mem::size_of;
    let shape = spec.shape;
    let cpus = [
        shape.nodes,
        shape.llcs_per_node,
        shape.cores_per_llc,
        shape.threads,
    ]
    .iter()
    .fold(1u64, |a, &b| a.saturating_mul(b as u64));
    let tasks = spec.nr_tasks(cpus).saturating_add(cpus);
    let d = spec.duration_ns;
    // Wake-ups of `sources` sources each waking `per_cycle` tasks in a cycle of
    // `cycle_ns`, and of every CPU ending a burst of `burst_ns` at most: a CPU runs one
    // burst at a time.
    let cycles = |n: u64, cycle_ns: u64| n.saturating_mul(d / cycle_ns.max(1) + 1);
    let bounded = |sources: u64, per_cycle: u64, cycle_ns: u64, burst_ns: u64| {
        cycles(sources, cycle_ns)
            .saturating_mul(per_cycle)
            .min(cycles(cpus, burst_ns))
    };
    let or_cpus = |n: usize, per: u64| {
        if n == 0 {
            (cpus / per).max(1)
        } else {
            n as u64
        }
    };
    let by_time = match &spec.workload {
        // A ring's token wakes one task per hop.
        Workload::PipeRings(w) => bounded(or_cpus(w.rings, 1), 1, w.work_ns, w.work_ns),
        // A pair wakes its server, then its client.
        Workload::TbenchLike(w) => bounded(
            or_cpus(w.pairs, 2),
            2,
            w.client_ns.saturating_add(w.server_ns),
            w.client_ns.min(w.server_ns),
        ),
        // Every message wakes its receiver, and may free one blocked writer.
        Workload::Hackbench(w) => {
            let cost = match w.mode {
                HackbenchMode::Pipe => HACKBENCH_PIPE_NS,
                HackbenchMode::Socket => HACKBENCH_SOCKET_NS,
            };
            let messages = (w.groups as u64)
                .saturating_mul(w.fds as u64)
                .saturating_mul(w.fds as u64)
                .saturating_mul(w.loops as u64);
            cycles(cpus, cost).min(messages.saturating_mul(2))
        }
        // A flow's packet wakes its server, which works, then the next arrives.
        Workload::SoftirqRr(w) => bounded(
            (w.flows as u64).max(1),
            1,
            w.work_ns.saturating_add(w.rtt_ns),
            w.work_ns,
        ),
        // A pair wakes its server, then its client, `burst` times, then the client's
        // timer after its pause; a batch task is woken by its timer once per run and sleep.
        Workload::NewidleBurst(w) => {
            let pairs = bounded(
                or_cpus(w.pairs, 1),
                2 * u64::from(w.burst) + 1,
                w.serve_ns
                    .saturating_add(w.think_ns)
                    .saturating_mul(u64::from(w.burst))
                    .saturating_add(w.pause_ns),
                w.serve_ns.min(w.think_ns),
            );
            let batch = bounded(
                or_cpus(w.batch, 1),
                1,
                w.batch_run_ns.saturating_add(w.batch_sleep_ns),
                w.batch_run_ns,
            );
            pairs.saturating_add(batch)
        }
    };
    let mut wakeups = by_time.saturating_add(by_time / 4).saturating_add(tasks);
    if spec.max_events > 0 {
        wakeups = wakeups.min(spec.max_events);
    }
    let block = crate::heap::block_of;
    let per_cpu = (size_of::<Cpu>()
        + 2 * size_of::<CpuSnapshot>()
        + size_of::<TaskState>()
        + size_of::<u32>()) as u64
        + crate::heap::FIXED_HEAP_LEAF
        + POLICY_BYTES_PER_CPU;
    // What grows with the tasks besides the tasks themselves, each in a vector that may
    // double and holds both blocks while it does: their places in the CPUs' queues, in a
    // receiver's blocked writers and in the events pending, and the candidates a newly-idle
    // balance collects from every queue.
    let queued = (3 * 2 * size_of::<usize>() + 3 * size_of::<Entry>()) as u64;
    let large = [
        block(tasks.saturating_mul(size_of::<Task>() as u64)),
        block(wakeups.saturating_mul(size_of::<u64>() as u64)),
        // The vector that doubles as it collects the candidates, and its old block.
        2 * block(tasks.saturating_mul(size_of::<PullCandidate>() as u64)),
        block(tasks.saturating_mul(size_of::<PullCandidate>() as u64)),
    ];
    let bytes = [
        cpus.saturating_mul(per_cpu),
        tasks.saturating_mul(queued),
        RUN_BYTES,
    ]
    .iter()
    .chain(&large)
    .fold(0u64, |a, &b| a.saturating_add(b));
    Footprint {
        cpus,
        tasks,
        wakeups,
        bytes,
        largest_block: large.into_iter().max().unwrap_or(0),
    }
}

pub struct World {
    now: u64,
    seq: u64,
    heap: BinaryHeap<Entry>,
    topo: Topology,
    engine: Engine,
    model: ModelParams,
    rng: XorShift,
    cpus: Vec<Cpu>,
    tasks: Vec<Task>,
    /// `current` of an idle CPU, for interrupt wakers (record_wakee writes to it).
    idle_tasks: Vec<TaskState>,
    dd: DelayedDequeue,
    snaps: Vec<CpuSnapshot>,
    flows: Vec<Flow>,
    /// Tasks that end (hackbench); the run stops when all have exited.
    finite_tasks: usize,
    exited: usize,
    /// Messages a hackbench receiver buffers before its writers block.
    hackbench_capacity: u32,
    /// The most latencies the run keeps: what its [`Footprint`] set aside.
    latency_cap: usize,
    raw: Raw,
}

impl World {
    /// The world of `spec`, with room for what `footprint` (its [`footprint`]) plans.
    pub fn new(spec: &SimSpec, footprint: &Footprint) -> Result<World, String> {
        let s = spec.shape;
        let topo = Topology::from_shape(s.nodes, s.llcs_per_node, s.cores_per_llc, s.threads)
            .map_err(|e| format!("--topology: {e}"))?;
        let engine = Engine::new(topo.clone(), spec.config).map_err(|e| e.to_string())?;
        let n = topo.nr_cpus();
        let cpus = (0..n)
            .map(|_| Cpu {
                curr: None,
                queue: VecDeque::new(),
                epoch: 0,
                seg_start: 0,
                slice_end: 0,
                switching: None,
                pending: 0,
                idle_since: Some(0),
                avg_idle: AVG_IDLE_MAX_NS,
                idle_exit: 0,
                load: 0.0,
                runnable_attached: 0,
                util: 0.0,
                last_pelt: 0,
                vsum: 0.0,
                nq: 0,
                vbase: 0.0,
                v_last: 0,
            })
            .collect();
        let mut w = World {
            now: 0,
            seq: 0,
            heap: BinaryHeap::new(),
            topo,
            engine,
            model: spec.model,
            rng: XorShift::new(spec.seed),
            cpus,
            // Sized whole: in the fixed heap a vector that doubles holds its old and its
            // new block at once.
            tasks: Vec::with_capacity(footprint.tasks as usize),
            idle_tasks: (0..n)
                .map(|c| TaskState::new(1_000_000 + c as u32, c, n))
                .collect(),
            dd: DelayedDequeue::new(n, spec.config.delayed_dequeue),
            snaps: vec![CpuSnapshot::idle(); n],
            flows: Vec::new(),
            finite_tasks: 0,
            exited: 0,
            hackbench_capacity: u32::MAX,
            latency_cap: footprint.wakeups as usize,
            raw: Raw {
                latencies: Vec::with_capacity(footprint.wakeups as usize),
                ..Raw::default()
            },
        };
        w.build_workload(&spec.workload)?;
        w.raw.tasks = w.tasks.len();
        Ok(w)
    }

    // --------------------------------------------------------------------------------
    // Set-up
    // --------------------------------------------------------------------------------

    /// Adds a client holding its first request and the server it sends to, each script
    /// made knowing the other's task id; both runnable entries pushed.
    fn add_pair(
        &mut self,
        client: impl FnOnce(usize) -> Script,
        server: impl FnOnce(usize) -> Script,
        allowed: CpuSet,
        runnable: &mut Vec<bool>,
    ) {
        let c = self.tasks.len();
        self.add_task(client(c + 1), allowed, 1, false);
        self.add_task(server(c), allowed, 0, false);
        runnable.extend([true, false]);
    }

    fn add_task(&mut self, script: Script, allowed: CpuSet, tokens: u32, finite: bool) -> usize {
        let id = self.tasks.len();
        let n = self.topo.nr_cpus();
        let mut ps = TaskState::new(id as u32, 0, n);
        ps.allowed = allowed;
        self.tasks.push(Task {
            ps,
            background: false,
            cpu: 0,
            run: Run::Blocked,
            remaining: 0,
            ran: 0,
            in_tail: false,
            v: 0.0,
            vlag: 0.0,
            on_rq: false,
            inbox: tokens,
            woken_at: None,
            script,
            blocked_writers: VecDeque::new(),
            // A new task starts with a full load (post_init_entity_util_avg).
            load: 1024.0,
            runnable: false,
            last_pelt: 0,
        });
        if finite {
            self.finite_tasks += 1;
        }
        id
    }

    /// Places every task as `fork()` would, from a launcher on CPU 0, each new task
    /// counted on its CPU so the next fork sees it; then tasks without input block and
    /// the others start running.
    fn place_and_start(&mut self, starts_runnable: &[bool]) {
        let n = self.topo.nr_cpus();
        let mut counted = vec![0u32; n];
        for t in 0..self.tasks.len() {
            self.snaps = (0..n)
                .map(|c| {
                    if counted[c] == 0 {
                        CpuSnapshot::idle()
                    } else {
                        CpuSnapshot::busy(counted[c])
                    }
                })
                .collect();
            let mut ps = self.tasks[t].ps;
            let mut w = WakeCtx {
                wake_flags: WAKE_FORK,
                ..WakeCtx::ttwu(0, self.idle_tasks[0], 0)
            };
            let d = self.engine.select_cpu(&self.snaps, &mut ps, &mut w);
            let task = &mut self.tasks[t];
            task.ps = ps;
            task.cpu = d.cpu;
            task.ps.prev_cpu = d.cpu;
            counted[d.cpu] += 1;
            // Attached to its CPU with a full load; blocked ones decay from there.
            self.cpus[d.cpu].load += task.load;
        }
        self.engine.reset_counters();
        for (t, &runnable) in starts_runnable.iter().enumerate() {
            if runnable {
                let c = self.tasks[t].cpu;
                self.enqueue(c, t);
            }
        }
        self.refresh_all_snapshots();
        self.engine.sync_idle_core_hints(&self.snaps);
    }

    // `runnable` gets one entry per task, pushed where the task is added.
    #[allow(clippy::same_item_push)]
    fn build_workload(&mut self, w: &Workload) -> Result<(), String> {
        let n = self.topo.nr_cpus();
        let all = CpuSet::first_n(n);
        let mut runnable = Vec::new();
        match w {
            Workload::PipeRings(w) => {
                let rings = if w.rings == 0 { n } else { w.rings };
                for r in 0..rings {
                    let first = self.tasks.len();
                    for k in 0..w.ring_size {
                        let next = first + (k + 1) % w.ring_size;
                        // The first process of each ring holds the token.
                        let tok = u32::from(k == 0);
                        self.add_task(
                            Script::Ring {
                                next,
                                work_ns: w.work_ns,
                                tail_ns: w.tail_ns,
                                ctx: WakerContext::Task,
                            },
                            all,
                            tok,
                            false,
                        );
                        runnable.push(k == 0);
                    }
                    let _ = r;
                }
            }
            Workload::TbenchLike(w) => {
                let pairs = if w.pairs == 0 {
                    (n / 2).max(1)
                } else {
                    w.pairs
                };
                let ctx = if w.task_context {
                    WakerContext::Task
                } else {
                    WakerContext::Softirq
                };
                let ring = |next, work_ns| Script::Ring {
                    next,
                    work_ns,
                    tail_ns: w.tail_ns,
                    ctx,
                };
                for _ in 0..pairs {
                    self.add_pair(
                        |server| ring(server, w.client_ns),
                        |client| ring(client, w.server_ns),
                        all,
                        &mut runnable,
                    );
                }
            }
            Workload::Hackbench(w) => {
                let (fds, loops) = (w.fds, w.loops);
                self.hackbench_capacity = w.capacity;
                let cost = match w.mode {
                    HackbenchMode::Pipe => HACKBENCH_PIPE_NS,
                    HackbenchMode::Socket => HACKBENCH_SOCKET_NS,
                };
                for _ in 0..w.groups {
                    let first = self.tasks.len();
                    let receivers: Rc<[usize]> = (first..first + fds).collect();
                    for _ in 0..fds {
                        self.add_task(
                            Script::Receiver {
                                left: (fds * loops) as u64,
                                cost_ns: cost,
                            },
                            all,
                            0,
                            true,
                        );
                        runnable.push(false);
                    }
                    for s in 0..fds {
                        self.add_task(
                            Script::Sender {
                                receivers: receivers.clone(),
                                // Senders start at different receivers, as their writes
                                // interleave in the real benchmark.
                                next: s % fds,
                                left: (fds * loops) as u64,
                                cost_ns: cost,
                            },
                            all,
                            0,
                            true,
                        );
                        runnable.push(true);
                    }
                }
            }
            Workload::SoftirqRr(w) => {
                let nodes = self.node_masks();
                if nodes.len() < 2 {
                    return Err(
                        "softirq-rr needs at least 2 NUMA nodes (the NIC's node and another)"
                            .into(),
                    );
                }
                let irq_node = *nodes.last().expect("2 nodes");
                let irq_cpus: Vec<usize> = irq_node.iter().collect();
                if w.hogs {
                    for _ in 0..irq_cpus.len() {
                        // taskset -c <irq node> stress -c <cpus of the node>
                        self.add_task(Script::Hog, irq_node, 0, false);
                        runnable.push(true);
                    }
                }
                for f in 0..w.flows {
                    let server = Script::RrServer {
                        flow: f,
                        work_ns: w.work_ns,
                    };
                    let s = self.add_task(server, all, 0, false);
                    runnable.push(false);
                    self.flows.push(Flow {
                        server: s,
                        irq_cpu: irq_cpus[f % irq_cpus.len()],
                        rtt_ns: w.rtt_ns,
                    });
                }
            }
            Workload::NewidleBurst(w) => {
                let pairs = if w.pairs == 0 { n } else { w.pairs };
                let batch = if w.batch == 0 { n } else { w.batch };
                for _ in 0..pairs {
                    self.add_pair(
                        |server| Script::BurstClient {
                            server,
                            think_ns: w.think_ns,
                            burst: w.burst,
                            left: w.burst,
                            pause_ns: w.pause_ns,
                        },
                        |client| Script::Ring {
                            next: client,
                            work_ns: w.serve_ns,
                            tail_ns: 0,
                            ctx: WakerContext::Task,
                        },
                        all,
                        &mut runnable,
                    );
                }
                for _ in 0..batch {
                    self.add_task(
                        Script::Batch {
                            run_ns: w.batch_run_ns,
                            sleep_ns: w.batch_sleep_ns,
                        },
                        all,
                        1,
                        false,
                    );
                    runnable.push(true);
                }
            }
        }
        if self.tasks.is_empty() {
            return Err("the workload has no tasks".into());
        }
        // Background noise: one pinned housekeeping task per CPU (think kworkers, timers,
        // monitoring) that keeps a CPU busy `noise_pct` percent of the time in bursts of
        // `noise_ns`, so that prev or the target is sometimes busy, as on a real machine,
        // and select_idle_sibling() gets past its first checks.
        let mut noise = Vec::new();
        if self.model.noise_pct > 0 {
            let run_ns = self.model.noise_ns;
            let sleep_ns =
                run_ns * (100 - self.model.noise_pct.min(99)) / self.model.noise_pct.min(99);
            for c in 0..n {
                let t = self.add_task(
                    Script::Batch { run_ns, sleep_ns },
                    CpuSet::single(c),
                    0,
                    false,
                );
                self.tasks[t].background = true;
                runnable.push(false);
                noise.push((t, sleep_ns));
            }
        }
        self.place_and_start(&runnable);
        let noise_ns = self.model.noise_ns;
        for (t, sleep_ns) in noise {
            // Random phases, so the CPUs' housekeeping does not run in lockstep.
            let at = 1 + self.rng.below(sleep_ns + noise_ns);
            self.schedule(at, Ev::Timer { task: t });
        }
        // Stagger the flows' first requests over one round trip.
        for f in 0..self.flows.len() {
            let at = self.flows[f].rtt_ns * (f as u64 + 1) / (self.flows.len() as u64 + 1);
            self.schedule(at, Ev::Packet { flow: f });
        }
        if self.model.tick_ns > 0 {
            self.schedule(self.model.tick_ns, Ev::Tick);
        }
        Ok(())
    }

    fn node_masks(&self) -> Vec<CpuSet> {
        let mut out: Vec<CpuSet> = Vec::new();
        for c in self.topo.online().iter() {
            let m = *self.topo.node_mask(c);
            if !out.contains(&m) {
                out.push(m);
            }
        }
        out
    }

    // --------------------------------------------------------------------------------
    // Event loop
    // --------------------------------------------------------------------------------

    fn schedule(&mut self, at: u64, ev: Ev) {
        self.seq += 1;
        self.heap.push(Entry {
            time: at,
            seq: self.seq,
            ev,
        });
    }

    /// Runs until `duration_ns` of simulated time, `max_events` events, or every finite
    /// task has exited.
    pub fn run(mut self, duration_ns: u64, max_events: u64) -> Raw {
        while let Some(e) = self.heap.pop() {
            if e.time > duration_ns || (max_events > 0 && self.raw.events >= max_events) {
                self.now = self.now.max(e.time.min(duration_ns));
                break;
            }
            self.now = e.time;
            self.raw.events += 1;
            match e.ev {
                Ev::RunEnd { cpu, epoch } => self.run_end(cpu, epoch),
                Ev::NewIdle { cpu, epoch } => self.newidle(cpu, epoch),
                Ev::Arrive { task } => self.arrive(task),
                Ev::Tick => self.tick(),
                Ev::Timer { task } => self.timer(task),
                Ev::Packet { flow } => self.packet(flow),
            }
            if self.finite_tasks > 0 && self.exited == self.finite_tasks {
                self.raw.finished = true;
                break;
            }
            if self.raw.over_footprint {
                break;
            }
        }
        self.raw.now_ns = self.now;
        self.raw
    }

    // --------------------------------------------------------------------------------
    // PELT-like signals
    // --------------------------------------------------------------------------------

    fn pelt_task(&mut self, t: usize) {
        let now = self.now;
        let task = &mut self.tasks[t];
        let d = pelt::decay(now - task.last_pelt);
        task.load = task.load * d
            + if task.runnable {
                1024.0 * (1.0 - d)
            } else {
                0.0
            };
        task.last_pelt = now;
    }

    /// The CPU's load is the sum of its attached tasks' loads; since every task's signal
    /// decays at the same rate, the sum evolves as one signal driven by the number of
    /// runnable attached tasks, and migrations move a task's own load across.
    fn pelt_cpu(&mut self, c: usize) {
        let now = self.now;
        let cpu = &mut self.cpus[c];
        let d = pelt::decay(now - cpu.last_pelt);
        cpu.load = cpu.load * d + 1024.0 * cpu.runnable_attached as f64 * (1.0 - d);
        cpu.util = cpu.util * d
            + if cpu.curr.is_some() {
                1024.0 * (1.0 - d)
            } else {
                0.0
            };
        cpu.last_pelt = now;
    }

    fn set_runnable(&mut self, t: usize, on: bool) {
        if self.tasks[t].runnable == on {
            return;
        }
        let c = self.tasks[t].cpu;
        self.pelt_task(t);
        self.pelt_cpu(c);
        self.tasks[t].runnable = on;
        if on {
            self.cpus[c].runnable_attached += 1;
        } else {
            self.cpus[c].runnable_attached -= 1;
        }
    }

    fn migrate(&mut self, t: usize, to: usize) {
        let from = self.tasks[t].cpu;
        if from == to {
            return;
        }
        // A queued task keeps its lag across the move (detach, then place on `to`).
        let queued = self.tasks[t].on_rq;
        if queued {
            self.eevdf_dequeue(from, t);
        }
        self.pelt_task(t);
        self.pelt_cpu(from);
        self.pelt_cpu(to);
        let (load, runnable) = (self.tasks[t].load, self.tasks[t].runnable);
        let f = &mut self.cpus[from];
        f.load = (f.load - load).max(0.0);
        if runnable {
            f.runnable_attached -= 1;
        }
        let d = &mut self.cpus[to];
        d.load += load;
        if runnable {
            d.runnable_attached += 1;
        }
        self.tasks[t].cpu = to;
        if queued {
            self.eevdf_enqueue(to, t);
        }
    }

    // --------------------------------------------------------------------------------
    // EEVDF bookkeeping (lag and eligibility only; the pick order stays FIFO)
    // --------------------------------------------------------------------------------

    /// `avg_vruntime()`: V of `c`'s queued entities.
    fn v_avg(&self, c: usize) -> f64 {
        let cpu = &self.cpus[c];
        if cpu.nq > 0 {
            cpu.vsum / cpu.nq as f64
        } else {
            cpu.vbase
        }
    }

    /// The lag limit of `update_entity_lag()`: max(2·slice, TICK_NSEC) (HZ=1000).
    fn lag_limit(&self) -> f64 {
        (2 * self.model.slice_ns).max(1_000_000) as f64
    }

    /// Brings `c` up to now: PELT, the running task's vruntime, and delayed tasks that
    /// have become eligible (V caught up with them) leave: in the kernel the next pick
    /// finds them eligible and completes their dequeue, clipping their lag to 0.
    fn touch(&mut self, c: usize) {
        self.pelt_cpu(c);
        let dt = (self.now - self.cpus[c].v_last) as f64;
        self.cpus[c].v_last = self.now;
        if let Some(t) = self.cpus[c].curr
            && self.tasks[t].on_rq
        {
            self.tasks[t].v += dt;
            self.cpus[c].vsum += dt;
        }
        if self.dd.nr_delayed(c) == 0 {
            return;
        }
        loop {
            let v = self.v_avg(c);
            let eligible = self
                .dd
                .tasks(c)
                .iter()
                .map(|d| d.pid as usize)
                .find(|&t| self.tasks[t].v <= v);
            let Some(t) = eligible else {
                break;
            };
            self.dd.remove(t as u32);
            self.eevdf_dequeue(c, t);
            self.tasks[t].vlag = self.tasks[t].vlag.min(0.0);
            self.tasks[t].run = Run::Blocked;
            self.set_runnable(t, false);
        }
    }

    /// `place_entity()`: `t` joins `c`'s queue at V minus its remembered lag, the lag
    /// scaled by (n+1)/n so that adding it leaves its lag intact; on an empty queue at V.
    fn eevdf_enqueue(&mut self, c: usize, t: usize) {
        if self.tasks[t].on_rq {
            return;
        }
        let v_avg = self.v_avg(c);
        let nq = self.cpus[c].nq as f64;
        let lag = if nq > 0.0 {
            self.tasks[t].vlag * (nq + 1.0) / nq
        } else {
            0.0
        };
        let v = v_avg - lag;
        let task = &mut self.tasks[t];
        task.v = v;
        task.on_rq = true;
        let cpu = &mut self.cpus[c];
        cpu.vsum += v;
        cpu.nq += 1;
    }

    /// Leaves `c`'s queue remembering its lag (`update_entity_lag()`, clamped).
    fn eevdf_dequeue(&mut self, c: usize, t: usize) {
        if !self.tasks[t].on_rq {
            return;
        }
        let v_avg = self.v_avg(c);
        let limit = self.lag_limit();
        let task = &mut self.tasks[t];
        task.vlag = (v_avg - task.v).clamp(-limit, limit);
        task.on_rq = false;
        let v = task.v;
        let cpu = &mut self.cpus[c];
        cpu.vsum -= v;
        cpu.nq -= 1;
        if cpu.nq == 0 {
            cpu.vsum = 0.0;
            cpu.vbase = v_avg;
        }
    }

    // --------------------------------------------------------------------------------
    // Snapshots
    // --------------------------------------------------------------------------------

    fn snapshot_of(&mut self, c: usize) -> CpuSnapshot {
        self.touch(c);
        let delayed = self.dd.nr_delayed(c);
        let cpu = &self.cpus[c];
        let runnable = u32::from(cpu.curr.is_some()) + cpu.queue.len() as u32;
        CpuSnapshot {
            idle: cpu.curr.is_none() && cpu.switching.is_none(),
            nr_running: runnable + delayed,
            nr_delayed: delayed,
            ttwu_pending: cpu.pending > 0,
            wakeup_in_flight: false,
            sched_idle_only: false,
            load: cpu.load.round() as u64,
            util: (cpu.util.round() as u32).min(1024),
            util_est: 0,
            runnable: 0,
            capacity: 0,
            avg_idle_ns: cpu.avg_idle,
            idle_exit_ns: cpu.idle_exit,
            // The simulator's clock starts at 0; a CPU idle since boot gets a stamp of 1 ns
            // rather than "unset".
            idle_stamp_ns: cpu.idle_since.map_or(0, |t| t.max(1)),
        }
    }

    fn refresh_all_snapshots(&mut self) {
        for c in 0..self.cpus.len() {
            self.snaps[c] = self.snapshot_of(c);
        }
    }

    fn task_load(&mut self, t: usize) -> u64 {
        self.pelt_task(t);
        self.tasks[t].load.round() as u64
    }

    // --------------------------------------------------------------------------------
    // Running and blocking
    // --------------------------------------------------------------------------------

    /// `t` gets CPU `c` now (it was queued there, or `c` was idle).
    fn start(&mut self, c: usize, t: usize) {
        self.touch(c);
        let now = self.now;
        if let Some(since) = self.cpus[c].idle_since.take() {
            // ttwu_do_wakeup(): fold the idle period into avg_idle, capped.
            let cpu = &mut self.cpus[c];
            crate::policy::idle_scan::update_avg(&mut cpu.avg_idle, now - since);
            cpu.avg_idle = cpu.avg_idle.min(AVG_IDLE_MAX_NS);
            cpu.idle_exit = now;
        }
        if let Some(w) = self.tasks[t].woken_at.take()
            && !self.tasks[t].background
        {
            if self.raw.latencies.len() < self.latency_cap {
                self.raw.latencies.push(now - w);
            } else {
                self.raw.over_footprint = true;
            }
        }
        {
            let cpu = &mut self.cpus[c];
            cpu.curr = Some(t);
            cpu.switching = None;
            cpu.epoch += 1;
            cpu.slice_end = now + self.model.slice_ns;
        }
        let task = &mut self.tasks[t];
        task.run = Run::Running;
        if task.remaining == 0 {
            self.begin_burst(t);
        }
        self.schedule_segment(c);
    }

    /// Schedules the end of the current task's next piece of work on `c`.
    fn schedule_segment(&mut self, c: usize) {
        let t = self.cpus[c].curr.expect("running");
        let now = self.now;
        let end = (now + self.tasks[t].remaining.min(FOREVER)).min(self.cpus[c].slice_end);
        let cpu = &mut self.cpus[c];
        cpu.epoch += 1;
        cpu.seg_start = now;
        let epoch = cpu.epoch;
        self.schedule(end, Ev::RunEnd { cpu: c, epoch });
    }

    /// `t`, running on `c`, goes to the tail of `c`'s queue and `c` picks the next task.
    fn round_robin(&mut self, c: usize, t: usize) {
        self.touch(c);
        self.cpus[c].curr = None;
        self.tasks[t].run = Run::Queued;
        self.cpus[c].queue.push_back(t);
        self.pick_next(c);
    }

    fn run_end(&mut self, c: usize, epoch: u64) {
        if self.cpus[c].epoch != epoch {
            return;
        }
        let Some(t) = self.cpus[c].curr else {
            return;
        };
        let elapsed = self.now - self.cpus[c].seg_start;
        {
            let task = &mut self.tasks[t];
            task.remaining = task.remaining.saturating_sub(elapsed);
            task.ran += elapsed;
        }
        if self.tasks[t].remaining > 0 {
            // The slice ran out: round-robin if anyone waits, else a fresh slice.
            if !self.cpus[c].queue.is_empty() {
                self.round_robin(c, t);
            } else {
                self.cpus[c].slice_end = self.now + self.model.slice_ns;
                self.schedule_segment(c);
            }
            return;
        }
        match self.burst_done(t) {
            After::Continue => {
                if self.now >= self.cpus[c].slice_end && !self.cpus[c].queue.is_empty() {
                    self.round_robin(c, t);
                } else {
                    if self.now >= self.cpus[c].slice_end {
                        self.cpus[c].slice_end = self.now + self.model.slice_ns;
                    }
                    self.schedule_segment(c);
                }
            }
            After::Block => self.block(c, t),
            After::Exit => {
                self.touch(c);
                self.cpus[c].curr = None;
                self.eevdf_dequeue(c, t);
                self.set_runnable(t, false);
                self.tasks[t].run = Run::Exited;
                self.exited += 1;
                self.cpu_vacated(c);
            }
        }
    }

    fn block(&mut self, c: usize, t: usize) {
        self.touch(c);
        self.cpus[c].curr = None;
        // dequeue_entity(DEQUEUE_SLEEP): a task behind V (lag >= 0) leaves; one ahead of
        // V is not eligible and, under DELAY_DEQUEUE, stays queued "competing until
        // eligible".  V advances at 1/nq of wall time while the others run, which gives
        // DelayedDequeue its wall-clock estimate; the real exit is `touch()` seeing V
        // catch up.
        let lag = self.v_avg(c) - self.tasks[t].v;
        let estimate_ns = (-lag * self.cpus[c].nq.max(1) as f64).ceil();
        if lag < 0.0 && self.dd.on_sleep(c, t as u32, estimate_ns as i64, self.now) {
            self.tasks[t].run = Run::Delayed;
        } else {
            self.eevdf_dequeue(c, t);
            self.tasks[t].run = Run::Blocked;
            self.set_runnable(t, false);
        }
        self.tasks[t].ran = 0;
        if self.cpus[c].queue.is_empty() {
            self.cpus[c].switching = Some(t);
        }
        self.cpu_vacated(c);
    }

    /// The current task left `c`: run the next one, or spend `switch_ns` in schedule()
    /// before the newly-idle balance.
    fn cpu_vacated(&mut self, c: usize) {
        if !self.cpus[c].queue.is_empty() {
            self.pick_next(c);
            return;
        }
        let cpu = &mut self.cpus[c];
        cpu.epoch += 1;
        let epoch = cpu.epoch;
        if cpu.switching.is_none() {
            // Exits and the like: mark the CPU as in schedule() too.
            cpu.switching = Some(usize::MAX);
        }
        let at = self.now + self.model.switch_ns;
        self.schedule(at, Ev::NewIdle { cpu: c, epoch });
    }

    fn pick_next(&mut self, c: usize) {
        let t = self.cpus[c].queue.pop_front().expect("queue not empty");
        self.start(c, t);
    }

    /// The end of schedule() on a CPU that had nothing runnable: pick what arrived
    /// meanwhile, or run the newly-idle balance.
    fn newidle(&mut self, c: usize, epoch: u64) {
        if self.cpus[c].epoch != epoch || self.cpus[c].curr.is_some() {
            return;
        }
        self.cpus[c].switching = None;
        if !self.cpus[c].queue.is_empty() {
            self.pick_next(c);
            return;
        }
        // The pick finds only delayed tasks (or none): they are dequeued now, keeping
        // their negative lag.
        self.touch(c);
        let delayed: Vec<u32> = self.dd.tasks(c).iter().map(|d| d.pid).collect();
        self.dd.on_cpu_idle(c);
        for pid in delayed {
            let t = pid as usize;
            self.eevdf_dequeue(c, t);
            self.tasks[t].run = Run::Blocked;
            self.set_runnable(t, false);
        }
        self.refresh_all_snapshots();
        let mut cands = Vec::new();
        for (o, cpu) in self.cpus.iter().enumerate() {
            if o == c {
                continue;
            }
            for &t in &cpu.queue {
                let task = &self.tasks[t];
                cands.push(PullCandidate {
                    pid: t as u32,
                    src_cpu: o,
                    allowed: task.ps.allowed,
                    load: task.load.round() as u64,
                    // The simulator keeps no per-task run history; its
                    // workloads are too coarse for a 500 us cache-hot window.
                    cache_hot: false,
                });
            }
        }
        let d = self.engine.newidle_pull(c, &self.snaps, &cands);
        self.raw.newidle_counters.add(&d.counted);
        if let Some(p) = d.pulled {
            let t = p.pid as usize;
            let q = &mut self.cpus[p.src_cpu].queue;
            if let Some(pos) = q.iter().position(|&x| x == t) {
                q.remove(pos);
            }
            self.raw.newidle_migrations[dist_index(self.topo.distance(p.src_cpu, c))] += 1;
            self.migrate(t, c);
            self.start(c, t);
            return;
        }
        self.cpus[c].idle_since = Some(self.now);
        self.snaps[c] = self.snapshot_of(c);
        self.engine.on_cpu_idle(c, &self.snaps);
    }

    // --------------------------------------------------------------------------------
    // Waking
    // --------------------------------------------------------------------------------

    /// Makes `t` runnable on `c` now: run it if `c` has nothing to do, else queue it.
    fn enqueue(&mut self, c: usize, t: usize) {
        self.touch(c);
        self.eevdf_enqueue(c, t);
        self.set_runnable(t, true);
        self.tasks[t].run = Run::Queued;
        if self.cpus[c].curr.is_none() && self.cpus[c].switching.is_none() {
            self.start(c, t);
        } else {
            self.cpus[c].queue.push_back(t);
        }
    }

    fn arrive(&mut self, t: usize) {
        let c = self.tasks[t].cpu;
        self.cpus[c].pending -= 1;
        self.enqueue(c, t);
    }

    /// Delivers a token to `t` and wakes it if it sleeps.
    fn deliver(&mut self, t: usize, waker: Waker, sync: bool) {
        self.tasks[t].inbox += 1;
        if matches!(self.tasks[t].run, Run::Blocked | Run::Delayed) {
            self.wake(t, waker, sync);
        }
    }

    fn wake(&mut self, t: usize, waker: Waker, sync: bool) {
        let counted = !self.tasks[t].background;
        if counted {
            self.raw.wakeups += 1;
        }
        self.tasks[t].woken_at = Some(self.now);
        // ttwu_runnable(): still queued by delayed dequeue (not yet eligible), requeue it
        // where it is, keeping its vruntime.
        let home = self.tasks[t].cpu;
        self.touch(home);
        if let Some(c) = self.dd.on_wake(t as u32) {
            self.raw.requeued_delayed += u64::from(counted);
            self.tasks[t].run = Run::Queued;
            if self.cpus[c].curr.is_none() && self.cpus[c].switching.is_none() {
                self.start(c, t);
            } else {
                self.cpus[c].queue.push_back(t);
            }
            return;
        }
        let prev = self.tasks[t].cpu;
        // WF_ON_CPU: the wakee is still in schedule() on prev with nothing else there;
        // queue it on prev's wakelist instead of spinning on p->on_cpu.
        if self.cpus[prev].switching == Some(t) && prev != waker.cpu {
            self.raw.wakelist_on_cpu += u64::from(counted);
            self.send_wakelist(t, prev);
            return;
        }
        self.refresh_all_snapshots();
        let mut ps = self.tasks[t].ps;
        ps.prev_cpu = prev;
        ps.load = self.task_load(t);
        let mut current = match waker.task {
            Some(w) => {
                let mut s = self.tasks[w].ps;
                s.load = self.task_load(w);
                s
            }
            None => self.idle_tasks[waker.cpu],
        };
        current.prev_cpu = waker.cpu;
        let mut ctx = WakeCtx {
            wake_flags: WAKE_TTWU | if sync { WAKE_SYNC } else { 0 },
            waker_cpu: waker.cpu,
            waker_context: waker.ctx,
            waker_exiting: false,
            waker: current,
            now_ns: self.now,
        };
        let d = self.engine.select_cpu(&self.snaps, &mut ps, &mut ctx);
        if counted {
            self.raw.placed += 1;
            self.raw.wake_counters.add(&d.counted);
        }
        self.tasks[t].ps = ps;
        match waker.task {
            Some(w) => self.tasks[w].ps = ctx.waker,
            None => self.idle_tasks[waker.cpu] = ctx.waker,
        }
        let to = d.cpu;
        if to != prev {
            if counted {
                self.raw.wake_migrations[dist_index(self.topo.distance(prev, to))] += 1;
            }
            self.migrate(t, to);
        }
        // ttwu_queue_cond(): the wakelist for another LLC or a CPU with nothing running.
        let target_empty = self.cpus[to].curr.is_none() && self.cpus[to].queue.is_empty();
        if to != waker.cpu && (!self.topo.share_cache(waker.cpu, to) || target_empty) {
            self.send_wakelist(t, to);
        } else {
            self.enqueue(to, t);
        }
    }

    fn send_wakelist(&mut self, t: usize, c: usize) {
        self.tasks[t].run = Run::InFlight;
        self.cpus[c].pending += 1;
        self.schedule(self.now + self.model.ipi_ns, Ev::Arrive { task: t });
    }

    fn waker_on(&self, c: usize, ctx: WakerContext) -> Waker {
        let task = self.cpus[c].curr.or(match self.cpus[c].switching {
            Some(s) if s != usize::MAX => Some(s),
            _ => None,
        });
        Waker { cpu: c, ctx, task }
    }

    fn timer(&mut self, t: usize) {
        // The timer fires on the CPU it was armed on, in hard interrupt context.
        let c = self.tasks[t].cpu;
        let w = self.waker_on(c, WakerContext::Hardirq);
        self.deliver(t, w, false);
    }

    fn packet(&mut self, f: usize) {
        // NET_RX on the flow's IRQ CPU: sock_def_readable() wakes the server with a sync
        // wake-up from softirq context; `current` is whatever that CPU was running.
        let (server, irq) = (self.flows[f].server, self.flows[f].irq_cpu);
        let w = self.waker_on(irq, WakerContext::Softirq);
        self.deliver(server, w, true);
    }

    // --------------------------------------------------------------------------------
    // Periodic balance
    // --------------------------------------------------------------------------------

    fn tick(&mut self) {
        let n = self.cpus.len();
        for src in 0..n {
            let Some(&t) = self.cpus[src].queue.front() else {
                continue;
            };
            let allowed = self.tasks[t].ps.allowed_or_all(n);
            let mut dst = None;
            for &level in self.topo.domains(src) {
                let span = self.topo.span(src, level).and(&allowed);
                dst = span.iter_wrap(src).find(|&c| {
                    let cpu = &self.cpus[c];
                    c != src
                        && cpu.curr.is_none()
                        && cpu.switching.is_none()
                        && cpu.queue.is_empty()
                        && cpu.pending == 0
                });
                if dst.is_some() {
                    break;
                }
            }
            if let Some(dst) = dst {
                self.cpus[src].queue.pop_front();
                self.raw.tick_pulls += 1;
                self.raw.tick_migrations[dist_index(self.topo.distance(src, dst))] += 1;
                self.migrate(t, dst);
                self.start(dst, t);
            }
        }
        let next = self.now + self.model.tick_ns;
        self.schedule(next, Ev::Tick);
    }

    // --------------------------------------------------------------------------------
    // Workload behaviour
    // --------------------------------------------------------------------------------

    /// A burst starts: consume the token that woke the task and size the work.
    fn begin_burst(&mut self, t: usize) {
        let jitter = self.model.jitter_pct;
        let task = &mut self.tasks[t];
        let base = match &task.script {
            Script::Ring { work_ns, .. } => *work_ns,
            Script::Sender { cost_ns, .. } => *cost_ns,
            Script::Receiver { cost_ns, .. } => *cost_ns,
            Script::RrServer { work_ns, .. } => *work_ns,
            Script::Hog => FOREVER,
            Script::BurstClient { think_ns, .. } => *think_ns,
            Script::Batch { run_ns, .. } => *run_ns,
        };
        if task.inbox > 0 {
            task.inbox -= 1;
        }
        task.remaining = if base == FOREVER {
            FOREVER
        } else {
            self.rng.jitter(base, jitter)
        };
        task.ran = 0;
    }

    /// After a burst: perform its effects and say what the task does next.
    fn burst_done(&mut self, t: usize) -> After {
        let c = self.tasks[t].cpu;
        let me = Waker {
            cpu: c,
            ctx: WakerContext::Task,
            task: Some(t),
        };
        let script = self.tasks[t].script.clone();
        match script {
            Script::Ring {
                next, ctx, tail_ns, ..
            } => {
                if self.tasks[t].in_tail {
                    // The tail is over: read() finds the pipe empty (or not).
                    self.tasks[t].in_tail = false;
                    return self.wait_input(t);
                }
                self.raw.work_units += 1;
                self.deliver(next, Waker { ctx, ..me }, true);
                if tail_ns > 0 {
                    // Back from write(), on to read(): the waker runs on a little while
                    // its wakee may already sit on this CPU.
                    let tail = self.rng.jitter(tail_ns, self.model.jitter_pct);
                    let task = &mut self.tasks[t];
                    task.in_tail = true;
                    task.remaining = tail;
                    return After::Continue;
                }
                self.wait_input(t)
            }
            Script::Sender {
                receivers,
                next,
                left,
                ..
            } => {
                let r = receivers[next];
                self.deliver(r, me, true);
                let left = left - 1;
                let next = (next + 1) % receivers.len();
                if let Script::Sender {
                    next: n, left: l, ..
                } = &mut self.tasks[t].script
                {
                    *n = next;
                    *l = left;
                }
                if left == 0 {
                    return After::Exit;
                }
                let r = receivers[next];
                if self.tasks[r].inbox >= self.hackbench_capacity {
                    // pipe_write() on a full pipe sleeps until a reader makes room.
                    self.tasks[r].blocked_writers.push_back(t);
                    return After::Block;
                }
                self.start_next_burst(t)
            }
            Script::Receiver { left, .. } => {
                self.raw.work_units += 1;
                let left = left - 1;
                if let Script::Receiver { left: l, .. } = &mut self.tasks[t].script {
                    *l = left;
                }
                if let Some(w) = self.tasks[t].blocked_writers.pop_front() {
                    self.deliver(w, me, true);
                }
                if left == 0 {
                    return After::Exit;
                }
                self.wait_input(t)
            }
            Script::RrServer { flow, .. } => {
                self.raw.work_units += 1;
                let rtt = self.flows[flow].rtt_ns;
                let rtt = self.rng.jitter(rtt, self.model.jitter_pct);
                self.schedule(self.now + rtt, Ev::Packet { flow });
                self.wait_input(t)
            }
            Script::Hog => After::Continue,
            Script::BurstClient {
                server,
                burst,
                left,
                pause_ns,
                ..
            } => {
                if left > 0 {
                    if let Script::BurstClient { left: l, .. } = &mut self.tasks[t].script {
                        *l = left - 1;
                    }
                    self.raw.work_units += 1;
                    self.deliver(server, me, true);
                } else {
                    if let Script::BurstClient { left: l, .. } = &mut self.tasks[t].script {
                        *l = burst;
                    }
                    let p = self.rng.jitter(pause_ns, self.model.jitter_pct);
                    self.schedule(self.now + p, Ev::Timer { task: t });
                }
                self.wait_input(t)
            }
            Script::Batch { sleep_ns, .. } => {
                let p = self.rng.jitter(sleep_ns, self.model.jitter_pct);
                self.schedule(self.now + p, Ev::Timer { task: t });
                self.wait_input(t)
            }
        }
    }

    /// Continue with the next token if one is waiting, else block.
    fn wait_input(&mut self, t: usize) -> After {
        if self.tasks[t].inbox > 0 {
            self.start_next_burst(t)
        } else {
            After::Block
        }
    }

    fn start_next_burst(&mut self, t: usize) -> After {
        self.begin_burst(t);
        After::Continue
    }
}

enum After {
    Continue,
    Block,
    Exit,
}
