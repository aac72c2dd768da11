//! Inputs of a placement decision: per-CPU snapshot, task state, wake-up context.
//!
//! All of them are plain data with serde derives, so a scenario file (JSON) can hold them
//! verbatim and a decision trace can record them.  Fields that a scenario may omit carry a
//! serde default that describes an unremarkable CPU or task.

use serde::{Deserialize, Serialize};

use super::cpuset::CpuSet;

/// `WF_FORK` / `SCX_WAKE_FORK`: placement of a new task.
pub const WAKE_FORK: u32 = 0x04;
/// `WF_TTWU` / `SCX_WAKE_TTWU`: a wake-up (try_to_wake_up).
pub const WAKE_TTWU: u32 = 0x08;
/// `WF_SYNC` / `SCX_WAKE_SYNC`: the waker hints that it is about to sleep.
pub const WAKE_SYNC: u32 = 0x10;
/// `WF_EXEC`: placement at exec (balanced like fork; sched_ext never calls select_cpu for it).
pub const WAKE_EXEC: u32 = 0x02;

/// What the policy needs to know about one CPU at the moment of the decision.  The kernel
/// reads these racily from other CPUs' runqueues; a snapshot is the deterministic
/// equivalent.  Index = CPU id; a slice shorter than the topology reads as busy CPUs.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CpuSnapshot {
    /// `rq->curr == rq->idle`: the CPU is running its idle task.
    #[serde(default)]
    pub idle: bool,
    /// `rq->nr_running`: tasks on the runqueue, the running one included, *and* the emulated
    /// delayed-dequeue tasks (`nr_delayed`), exactly as the kernel counts them.
    #[serde(default)]
    pub nr_running: u32,
    /// Tasks counted in `nr_running` that are asleep but kept queued by delayed dequeue
    /// (`cfs_h_nr_delayed(rq) = h_nr_queued - h_nr_runnable`, v6.12+).  Ignored by the engine
    /// when the config's `delayed_dequeue` emulation is off.
    #[serde(default)]
    pub nr_delayed: u32,
    /// `rq->ttwu_pending`: a queued remote wake-up is on its way to this CPU (v5.8+).
    #[serde(default)]
    pub ttwu_pending: bool,
    /// A placement decision already sent a task to this CPU that has not arrived yet (the
    /// live agent's analogue of `ttwu_pending` for tasks it dispatched itself).  Read only by
    /// the newly-idle pull decision, and only with `newidle_skip_pending_wakeup`.
    #[serde(default)]
    pub wakeup_in_flight: bool,
    /// The runqueue runs only SCHED_IDLE tasks (`sched_idle_cpu()` when `nr_running > 0`).
    #[serde(default)]
    pub sched_idle_only: bool,
    /// `cpu_load(rq)`: the cfs runnable load average, in load-weight units (a nice-0 task
    /// that always runs contributes about 1024).
    #[serde(default)]
    pub load: u64,
    /// `cpu_util_cfs()`: cfs utilisation, 0..=capacity.  Feeds SIS_UTIL's `nr_idle_scan`.
    #[serde(default)]
    pub util: u32,
    /// `cfs_rq->avg.util_est` (`.enqueued` before v6.8): the utilisation its queued tasks
    /// are expected to have.  `cpu_util()` is the larger of this and `util`; read by the
    /// fork/exec slow path.
    #[serde(default)]
    pub util_est: u32,
    /// `cfs_rq->avg.runnable_avg`: like `util`, but accrued while tasks wait as well as while
    /// they run, so it exceeds `util` when they queue.  Read by the slow path's group
    /// classification; 0 (unknown) reads as `util`.
    #[serde(default)]
    pub runnable: u32,
    /// `capacity_of(cpu)`: capacity left for cfs after RT/IRQ/thermal pressure; 0 means "use
    /// the topology's original capacity".
    #[serde(default)]
    pub capacity: u32,
    /// `rq->avg_idle` in ns: the CPU's average idle period.  Feeds SIS_PROP (read on the
    /// waker's CPU).  The kernel starts it at 2 * sysctl_sched_migration_cost = 1 ms.
    #[serde(default = "default_avg_idle_ns")]
    pub avg_idle_ns: u64,
    /// When the CPU last left idle (`ttwu_do_wakeup()` finding `rq->idle_stamp` set), on the
    /// clock of [`WakeCtx::now_ns`]; 0 if unknown.  v5.14-v6.6's SIS_PROP restarts
    /// `rq->wake_avg_idle` there at `avg_idle / 2` and ages it per jiffy from that moment.
    #[serde(default)]
    pub idle_exit_ns: u64,
    /// `rq->idle_stamp`: when the CPU last went idle through schedule() (the newly-idle
    /// balance stamps it; a wake-up to the CPU clears it), on any clock common to all CPUs;
    /// 0 if unset.  The slow path prefers the most recently idled CPU.
    #[serde(default)]
    pub idle_stamp_ns: u64,
}

pub(crate) fn default_avg_idle_ns() -> u64 {
    1_000_000
}

impl Default for CpuSnapshot {
    fn default() -> Self {
        CpuSnapshot {
            avg_idle_ns: default_avg_idle_ns(),
            ..CpuSnapshot::ZERO
        }
    }
}

impl CpuSnapshot {
    /// Every field zero or false (a busy CPU with nothing known; not `Default`, whose
    /// `avg_idle_ns` is the kernel's initial value).
    pub const ZERO: CpuSnapshot = CpuSnapshot {
        idle: false,
        nr_running: 0,
        nr_delayed: 0,
        ttwu_pending: false,
        wakeup_in_flight: false,
        sched_idle_only: false,
        load: 0,
        util: 0,
        util_est: 0,
        runnable: 0,
        capacity: 0,
        avg_idle_ns: 0,
        idle_exit_ns: 0,
        idle_stamp_ns: 0,
    };

    /// An idle CPU: idle task running, nothing queued, idle since it last went through
    /// schedule() at the start of time (an idle stamp of 1 ns, so that the slow path, which
    /// passes over an idle CPU without a stamp, sees it as a kernel's idle CPU almost always
    /// is; among several such CPUs the first wins).
    pub fn idle() -> Self {
        CpuSnapshot {
            idle: true,
            idle_stamp_ns: 1,
            ..Default::default()
        }
    }

    /// A CPU running `nr` runnable tasks with a load of about 1024 each.
    pub fn busy(nr: u32) -> Self {
        CpuSnapshot {
            idle: false,
            nr_running: nr,
            load: 1024 * nr as u64,
            util: 1024,
            avg_idle_ns: 0,
            ..Default::default()
        }
    }

    /// The kernel's `idle_cpu()` / `available_idle_cpu()` (with `vcpu_is_preempted()` false):
    /// the idle task is current, nothing is queued and no remote wake-up is pending.
    #[inline]
    pub fn available_idle(&self) -> bool {
        self.idle && self.nr_running == 0 && !self.ttwu_pending
    }

    /// `sched_idle_cpu()`: the runqueue holds only SCHED_IDLE tasks, and at least one.
    #[inline]
    pub fn sched_idle(&self) -> bool {
        self.sched_idle_only && self.nr_running > 0
    }
}

/// The per-task state the placement path reads and writes.  The kernel keeps it in
/// `task_struct`; under sched_ext it is absent (§11.8 of the reference) and the agent keeps
/// it per task.  The engine updates `recent_used_cpu` of the wakee and `wakee_flips`,
/// `last_wakee`, `wakee_flip_decay_ts` (and, in the v5.10 mode, `recent_used_cpu`) of the
/// waker, as the kernel does.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TaskState {
    pub pid: u32,
    /// `task_cpu(p)` at wake-up: the CPU it last ran on.  For a fork, the parent's CPU.
    pub prev_cpu: usize,
    /// `p->recent_used_cpu`; `None` until the first write (the kernel inherits the parent's
    /// value at fork; a scenario may give it explicitly).
    #[serde(default)]
    pub recent_used_cpu: Option<usize>,
    /// `p->wakee_flips`: how often this task, as a waker, switched to a different wakee
    /// (halved once per second).  Read by `wake_wide()` for both waker and wakee.
    #[serde(default)]
    pub wakee_flips: u32,
    /// `p->last_wakee`: pid of the last task this task woke.
    #[serde(default)]
    pub last_wakee: Option<u32>,
    /// `p->wakee_flip_decay_ts` in ns (the kernel uses jiffies; HZ is taken as 1 s).
    #[serde(default)]
    pub wakee_flip_decay_ts: u64,
    /// `p->cpus_ptr`.  An empty set in a scenario means "every CPU" (see
    /// [`TaskState::allowed_or_all`]).
    #[serde(default)]
    pub allowed: CpuSet,
    /// `task_h_load(p)`: the task's load contribution, load-weight units.
    #[serde(default)]
    pub load: u64,
    /// `task_util_est(p)`.  Read only by the asymmetric-capacity fit, which this policy does
    /// not emulate (symmetric capacity: every CPU fits); kept so traces carry it.
    #[serde(default)]
    pub util: u32,
    /// `is_per_cpu_kthread(p)`: a kernel thread bound to one CPU (kworker, ksoftirqd).
    #[serde(default)]
    pub is_per_cpu_kthread: bool,
}

impl TaskState {
    /// A task that may run anywhere among `nr_cpus`, last ran on `prev_cpu`.
    pub fn new(pid: u32, prev_cpu: usize, nr_cpus: usize) -> Self {
        Self::with_allowed(pid, prev_cpu, CpuSet::first_n(nr_cpus))
    }

    /// A task that may run on `allowed`, last ran on `prev_cpu`.
    #[inline]
    pub fn with_allowed(pid: u32, prev_cpu: usize, allowed: CpuSet) -> Self {
        TaskState {
            pid,
            prev_cpu,
            recent_used_cpu: None,
            wakee_flips: 0,
            last_wakee: None,
            wakee_flip_decay_ts: 0,
            allowed,
            load: 1024,
            util: 0,
            is_per_cpu_kthread: false,
        }
    }

    /// `allowed`, or all CPUs below `nr_cpus` when `allowed` is empty.
    #[inline]
    pub fn allowed_or_all(&self, nr_cpus: usize) -> CpuSet {
        if self.allowed.is_empty() {
            CpuSet::first_n(nr_cpus)
        } else {
            self.allowed
        }
    }
}

/// The context the waker runs in when it calls try_to_wake_up (`in_task()` et al.).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum WakerContext {
    /// Process context: `in_task()` is true.
    #[default]
    Task,
    /// Serving a softirq (e.g. NET_RX delivering a packet): `in_task()` is false.
    Softirq,
    /// Hard interrupt context (e.g. an hrtimer): `in_task()` is false.
    Hardirq,
}

impl WakerContext {
    #[inline]
    pub fn in_task(self) -> bool {
        self == WakerContext::Task
    }
}

/// One wake-up (or fork placement) request.
///
/// `waker` is the state of `current` on the waker's CPU: the waking task, or the task that
/// was interrupted when the waker is a softirq/hardirq (the kernel's `record_wakee()` writes
/// to `current` in either case).  The engine updates it in place; the caller copies it back
/// into its own per-task table.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct WakeCtx {
    /// `WAKE_TTWU`, `WAKE_SYNC`, `WAKE_FORK` bits (the `SCX_WAKE_*` values).
    pub wake_flags: u32,
    /// `smp_processor_id()` of the waker.
    pub waker_cpu: usize,
    #[serde(default)]
    pub waker_context: WakerContext,
    /// `current->flags & PF_EXITING`: an exiting waker's SYNC hint is ignored.
    #[serde(default)]
    pub waker_exiting: bool,
    /// `current`.  Its `load` is `task_h_load(current)` for `wake_affine_weight()`.
    pub waker: TaskState,
    /// Monotonic time in ns (the jiffies clock of `record_wakee()`).
    #[serde(default)]
    pub now_ns: u64,
}

impl WakeCtx {
    /// A plain (non-sync) wake-up from task context.
    pub fn ttwu(waker_cpu: usize, waker: TaskState, now_ns: u64) -> Self {
        WakeCtx {
            wake_flags: WAKE_TTWU,
            waker_cpu,
            waker_context: WakerContext::Task,
            waker_exiting: false,
            waker,
            now_ns,
        }
    }

    /// A sync wake-up (`WF_SYNC | WF_TTWU`) from task context.
    pub fn sync(waker_cpu: usize, waker: TaskState, now_ns: u64) -> Self {
        WakeCtx {
            wake_flags: WAKE_TTWU | WAKE_SYNC,
            ..Self::ttwu(waker_cpu, waker, now_ns)
        }
    }

    /// `int sync = (wake_flags & WF_SYNC) && !(current->flags & PF_EXITING);`
    #[inline]
    pub fn sync_hint(&self) -> bool {
        self.wake_flags & WAKE_SYNC != 0 && !self.waker_exiting
    }
}
