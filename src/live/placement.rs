//! Where the agent puts a task: the CFS engine (src/policy) fed with live
//! inputs.
//!
//! The engine wants the world as select_task_rq_fair() sees it on the
//! waker's CPU at wake-up time. We have BPF's per-CPU table, read when the
//! agent runs (slightly later), plus what ops.select_cpu() recorded on the
//! waker's CPU itself. The differences we accept, and why:
//! - the waker's CPU is described as it was at select time (runnable count,
//!   ttwu_pending, idle = nothing runnable), because fair.c's sync test is
//!   about that moment;
//! - a CPU running only the agent counts as idle, since CFS would not see a
//!   user-space scheduler at all, unless the agent polls after its batches
//!   (--agent-spin-us): then it is busy with one task, as with any thread
//!   that polls (rebuild() says why);
//! - a task placed earlier in the same batch makes its CPU busy for the rest
//!   of the batch, as the kernel's own enqueue would, and a decision BPF has
//!   not carried out yet (wl_shared.inflight) counts as a task queued there
//!   in later batches;
//! - a wake-up sent from select_cpu() (the handoff) may be read after the
//!   kernel queued it on its prev CPU, whose ttwu_pending is then its own:
//!   that decision does not see it, as fair.c, deciding before the queueing,
//!   does not;
//! - a CPU that is idle now but became free only after the wake-up was
//!   selected, or that waits for its own sync wakee (--newidle-wait-own-wakee),
//!   is described as busy: at select time the kernel saw the waker, or the
//!   wakee already queued there, on it. Without this, every CPU idle only
//!   because of the agent's round trip invites the wake-ups being placed
//!   meanwhile, and more of them migrate (the run that showed it is in
//!   docs/benchmarks/live-placement-notes.md);
//! - load and util, of CPUs, of the wakee and of the waker, are the state estimator's
//!   (bpf/estimator.bpf.c): PELT with the kernel's arithmetic and clock, fed
//!   by our tasks' events; a decision not carried out yet adds 1024 (a
//!   nice-0 task's whole load: BPF has not attached the task there), and a
//!   task placed earlier in the batch its own load, as the kernel's enqueue
//!   would attach it.
//!
//! State the kernel keeps for fair tasks only (recent_used_cpu, wakee flips,
//! avg_idle, delayed dequeue) is kept here, per CPU and per task; the task
//! table holds at most --task-table-size tasks, allocated whole at start, and
//! evicts the least recently seen when full.

use std::collections::HashMap;
use std::sync::mpsc::SyncSender;

use crate::live::protocol::{CpuReading, Sleep, Wakeup};
#[cfg(test)]
use scx_wakelab::policy::CpuSet;
use scx_wakelab::policy::pelt::RootHLoad;
use scx_wakelab::policy::{
    Config, CpuDesc, CpuSnapshot, DelayedDequeue, Engine, TaskState, Topology, TraceRecord,
    WAKE_SYNC, WakeCtx,
};

/// Nice-0 load weight, the unit of CpuSnapshot::load.
const NICE_0_LOAD: u64 = 1024;
/// Forget tasks not seen for this long (they exited, most likely).
const TASK_TTL_NS: u64 = 30_000_000_000;
/// How many tasks the per-task table holds by default (`--task-table-size`).
/// Allocated whole at start, so the locked heap never grows with the number
/// of pids a machine cycles through; a fork storm evicts instead.
pub const DEFAULT_TASK_TABLE: usize = 16_384;
/// The largest `--task-table-size`.  The table lives in rustland_core's fixed 64 MiB heap
/// (`scx_wakelab::heap`), with room for twice the bound ([`task_table`]), as a power of two
/// of hash buckets, each a pid, a [`StoredTask`] and a control byte: 65536 tasks take one
/// block of 16 MiB, the largest that heap may be planned for; twice as many took one of
/// 32 MiB, which it has no room for once anything else is allocated, and the 4194304 the
/// option once allowed a GB, so the scheduler aborted after creating its socket and trace.
pub const MAX_TASK_TABLE: usize = 65_536;

/// Hashes a pid with one multiplication (Fibonacci hashing): the per-task
/// table is read and written for every decision, and SipHash's defence
/// against chosen keys buys nothing for pids, which users cannot pick.
#[derive(Default, Clone, Copy)]
struct PidHasher(u64);

impl std::hash::Hasher for PidHasher {
    fn finish(&self) -> u64 {
        self.0
    }
    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.0 = (self.0 ^ b as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15);
        }
    }
    fn write_u32(&mut self, pid: u32) {
        self.0 = (pid as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15);
    }
}

type PidMap<V> = HashMap<u32, V, std::hash::BuildHasherDefault<PidHasher>>;

/// Why a task went where it went, beyond the engine's own rule chain.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Outcome {
    /// The engine decided (its Decision carries the rule chain).
    Engine,
    /// A still-delayed task woke: requeued where it sleeps, no placement
    /// (ttwu_runnable() in the kernel).
    DelayedRequeue,
}

pub struct Placement {
    pub cpu: usize,
    pub outcome: Outcome,
}

/// The policy topology of this machine, from sysfs through scx_utils.
pub fn topology_from_scx(topo: &scx_utils::Topology) -> anyhow::Result<Topology> {
    let nr = topo.all_cpus.keys().max().map_or(0, |m| m + 1);
    let mut descs = vec![
        CpuDesc {
            core: u32::MAX,
            llc: u32::MAX,
            node: 0,
            online: false,
            capacity: 1024
        };
        nr
    ];
    for cpu in topo.all_cpus.values() {
        descs[cpu.id] = CpuDesc {
            core: cpu.core_id as u32,
            llc: cpu.llc_id as u32,
            node: cpu.node_id as u32,
            online: true,
            capacity: cpu.cpu_capacity.clamp(1, 1024) as u32,
        };
    }
    // Offline holes: give them ids of their own so they share nothing.
    for (i, d) in descs.iter_mut().enumerate() {
        if !d.online {
            d.core = 1_000_000 + i as u32;
            d.llc = 1_000_000 + i as u32;
        }
    }
    Topology::from_cpus(&descs)
        .map_err(|e| anyhow::anyhow!("building the placement topology: {e:?}"))
}

/// The per-task state fair.c keeps in task_struct, as we keep it between
/// decisions: compact, because the agent's heap is rustland_core's fixed,
/// locked 64 MiB arena (the allowed mask and load come with every message).
#[derive(Clone, Copy, Debug)]
struct StoredTask {
    recent_used_cpu: Option<usize>,
    wakee_flips: u32,
    last_wakee: Option<u32>,
    wakee_flip_decay_ts: u64,
    seen_ns: u64,
}

/// What the placer keeps of one CPU from batch to batch.
#[derive(Clone, Copy, Debug)]
struct CpuHistory {
    /// rq->avg_idle, and the idle period (BPF's last_idle_ns) it last took in.
    avg_idle_ns: u64,
    last_idle_sample: u64,
    /// The root cfs_rq's h_load, refreshed once a jiffy by our own decisions.
    h_load: RootHLoad,
}

impl Default for CpuHistory {
    fn default() -> Self {
        CpuHistory {
            // The kernel starts rq->avg_idle at 2 * sysctl_sched_migration_cost.
            avg_idle_ns: 1_000_000,
            last_idle_sample: 0,
            h_load: RootHLoad::default(),
        }
    }
}

pub struct Placer {
    engine: Engine,
    agent_pid: i32,
    /// The agent polls after each batch (--agent-spin-us > 0): its CPU is
    /// busy with it, not idle, in the snapshot (see rebuild()).
    agent_spins: bool,
    slice_ns: u64,
    tasks: PidMap<StoredTask>,
    snaps: Vec<CpuSnapshot>,
    /// What each CPU's past says (rq->avg_idle).
    history: Vec<CpuHistory>,
    delayed: DelayedDequeue,
    /// Since when nothing of ours has run on each CPU idle in the snapshot
    /// (cpu_state.free_since_ns; 0 = never, or not idle), for place() to
    /// find the CPUs freed after a wake-up was selected.
    freed: FreedSince,
    /// Scratch: those CPUs, for one decision.
    freed_after: Vec<usize>,
    /// CPUs that wait for their own sync wakee (own_wakee_until in BPF).
    awaits_own_wakee: Vec<bool>,
    /// The CPUs whose own_wakee_until was still ahead at a batch: the only
    /// ones whose wait can end without their reading changing.
    awaiting: Vec<usize>,
    in_awaiting: Vec<bool>,
    /// CPUs whose snapshot the next batch rebuilds: their reading changed,
    /// or a decision, a sleeper or a wake-up changed the snapshot after it
    /// was built. The others are as the last batch left them.
    stale: Vec<usize>,
    is_stale: Vec<bool>,
    /// Rebuild every CPU at the next batch (at first, and after a change
    /// of what every snapshot reads).
    rebuild_all: bool,
    /// The idle-core hint kept per change: whether each of the topology's
    /// cores (`Topology::cores`) is wholly idle, and how many are per LLC.
    core_idle: Vec<bool>,
    idle_cores: Vec<u32>,
    /// What each CPU adds to SIS_UTIL's sum over its LLC, which the engine
    /// keeps for us as CPUs change (`Engine::llc_util_sums_mut`), where it
    /// would add up a whole LLC on every decision that reaches the scan.
    util_counted: Vec<u64>,
    /// The last batch's clock: a batch's is never behind it.
    last_batch_ns: u64,
    /// Scratch: the snapshots place() changed for one decision, as read.
    as_selected: Vec<(usize, CpuSnapshot)>,
    last_sweep_ns: u64,
    /// Most entries `tasks` may hold; beyond it, the least recently seen go.
    task_cap: usize,
    /// Tasks dropped from a full table before their time (stats).
    pub task_evictions: u64,
    /// Trace mode: every engine decision with its inputs, to a writer
    /// thread; records the channel has no room for are dropped and counted.
    trace: Option<SyncSender<TraceRecord>>,
    pub trace_dropped: u64,
}

impl Placer {
    pub fn new(
        topo: Topology,
        config: Config,
        agent_pid: i32,
        slice_ns: u64,
        task_table_size: usize,
    ) -> anyhow::Result<Placer> {
        // At least a few, so that evicting an eighth frees one.
        let task_cap = task_table_size.max(8);
        let n = topo.nr_cpus();
        let delayed = DelayedDequeue::new(n, config.delayed_dequeue);
        let (nr_cores, nr_llcs) = (topo.nr_cores(), topo.nr_llcs());
        let mut engine = Engine::new(topo, config).map_err(|e| anyhow::anyhow!("{e}"))?;
        engine.llc_util_sums_mut();
        Ok(Placer {
            engine,
            agent_pid,
            agent_spins: false,
            slice_ns,
            tasks: task_table(task_cap),
            snaps: vec![CpuSnapshot::default(); n],
            history: vec![CpuHistory::default(); n],
            delayed,
            freed: FreedSince::new(n),
            freed_after: Vec::with_capacity(n),
            awaits_own_wakee: vec![false; n],
            awaiting: Vec::with_capacity(n),
            in_awaiting: vec![false; n],
            stale: Vec::with_capacity(n),
            is_stale: vec![false; n],
            rebuild_all: true,
            core_idle: vec![false; nr_cores],
            idle_cores: vec![0; nr_llcs],
            util_counted: vec![0; n],
            last_batch_ns: 0,
            as_selected: Vec::with_capacity(n + 1),
            last_sweep_ns: 0,
            task_cap,
            task_evictions: 0,
            trace: None,
            trace_dropped: 0,
        })
    }

    /// Record every decision's inputs, rule chain and result (`--trace`).
    pub fn set_trace(&mut self, tx: SyncSender<TraceRecord>) {
        self.trace = Some(tx);
    }

    pub fn nr_cpus(&self) -> usize {
        self.engine.topology().nr_cpus()
    }

    pub fn engine(&self) -> &Engine {
        &self.engine
    }

    /// Apply a runtime flag change (`scx_wakelab set`); validated by the engine.
    pub fn set(&mut self, key: &str, value: &str) -> Result<(), String> {
        self.engine.set(key, value).map_err(|e| e.to_string())?;
        self.delayed
            .set_enabled(self.engine.config().delayed_dequeue);
        self.rebuild_all = true;
        Ok(())
    }

    /// Whether BPF should send sleep events (delayed-dequeue emulation).
    pub fn wants_sleep_events(&self) -> bool {
        self.delayed.enabled()
    }

    /// Whether the agent polls for wake-ups after a batch (see `agent_spins`).
    pub fn set_agent_spins(&mut self, spins: bool) {
        self.agent_spins = spins;
        self.rebuild_all = true;
    }

    /// `cpu`'s snapshot is rebuilt at the next batch.
    fn mark_stale(&mut self, cpu: usize) {
        if let Some(s) = self.is_stale.get_mut(cpu)
            && !*s
        {
            *s = true;
            self.stale.push(cpu);
        }
    }

    /// Refresh the per-CPU snapshot from BPF's readings, every CPU's
    /// (`readings` holds them all). See [`Placer::begin_batch_changed`].
    #[cfg(test)]
    pub fn begin_batch(&mut self, readings: &[CpuReading], now_ns: u64) {
        self.rebuild_all = true;
        self.begin_batch_changed(readings, &[], now_ns);
    }

    /// Refresh the per-CPU snapshot once per batch, where it changed: the
    /// CPUs in `changed`, whose readings are new, and those the last batch's
    /// decisions, sleepers and wake-ups changed; the rest are as the last
    /// batch left them, which is what rebuilding them would give. `readings`
    /// holds every CPU's latest reading (the caller keeps it from batch to
    /// batch). A decision for a CPU that is not carried out yet counts as a
    /// task queued there, as it would be on the kernel's runqueue.
    pub fn begin_batch_changed(&mut self, readings: &[CpuReading], changed: &[usize], now_ns: u64) {
        let now_ns = now_ns.max(self.last_batch_ns);
        self.last_batch_ns = now_ns;
        let nr = self.snaps.len().min(readings.len());
        // Sleepers whose lag ran out leave their CPUs' counts.
        let mut stale = std::mem::take(&mut self.stale);
        let is_stale = &mut self.is_stale;
        self.delayed.expire_each(now_ns, |cpu| {
            if !std::mem::replace(&mut is_stale[cpu], true) {
                stale.push(cpu);
            }
        });
        if std::mem::take(&mut self.rebuild_all) {
            stale.clear();
            stale.extend(0..nr);
        } else {
            for &cpu in changed {
                if cpu < nr && !std::mem::replace(&mut self.is_stale[cpu], true) {
                    stale.push(cpu);
                }
            }
        }
        // A wait for an own wakee ends with time, its reading unchanged.
        let mut i = 0;
        while i < self.awaiting.len() {
            let cpu = self.awaiting[i];
            let awaits = readings
                .get(cpu)
                .is_some_and(|r| r.own_wakee_until_ns > now_ns);
            self.awaits_own_wakee[cpu] = awaits;
            if awaits {
                i += 1;
            } else {
                self.in_awaiting[cpu] = false;
                self.awaiting.swap_remove(i);
            }
        }
        for &cpu in &stale {
            self.is_stale[cpu] = false;
            if cpu < nr {
                self.rebuild(cpu, &readings[cpu], now_ns);
            }
        }
        for &cpu in &stale {
            if let Some(c) = self.engine.topology().core_of(cpu) {
                self.update_core(c);
            }
        }
        stale.clear();
        self.stale = stale;
        self.engine.set_idle_core_hints(&self.idle_cores);
        self.sweep(now_ns);
    }

    /// `cpu`'s snapshot from its reading, with its delayed sleepers.
    fn rebuild(&mut self, cpu: usize, r: &CpuReading, now_ns: u64) {
        let CpuReading {
            idle,
            curr_pid: curr,
            ttwu_pending: ttwu,
            dsq_queued: queued,
            last_idle_ns: last_idle,
            last_idle_end_ns: idle_exit,
            free_since_ns: free_since,
            own_wakee_until_ns: own_until,
            est_load_avg: est_load,
            est_util_avg: est_util,
            ..
        } = *r;
        // The CPU the agent runs on, deciding this batch. If the agent
        // yields as soon as it is done, that CPU is idle for the engine,
        // as it would be without us. If it polls, it stays busy with the
        // agent, as with any thread that polls, and the engine treats it
        // so: otherwise a task whose last CPU that is keeps coming back
        // to it (idle, prev, cache-hot), and every one of its wake-ups
        // makes the agent switch out and in again, so that a run's
        // counts would hang on where its tasks happened to start
        // (docs/benchmarks/fast-lane-notes.md).
        let agent_here = curr == self.agent_pid;
        // Not yet in the estimator's averages: decisions BPF has not carried
        // out, and the agent itself when it polls.
        let unattached = r.inflight + u32::from(agent_here && self.agent_spins);
        let runnable = r.nr_runnable + unattached;
        let idle = (idle || agent_here || curr == 0) && runnable == 0;
        let awaits = own_until > now_ns;
        self.awaits_own_wakee[cpu] = awaits;
        if awaits && !std::mem::replace(&mut self.in_awaiting[cpu], true) {
            self.awaiting.push(cpu);
        }
        self.freed.set(cpu, if idle { free_since } else { 0 });
        let h = &mut self.history[cpu];
        if last_idle != h.last_idle_sample && last_idle > 0 {
            // update_avg(): avg += (sample - avg) / 8, as fair.c does
            // for rq->avg_idle, capped like sched_balance_newidle().
            h.last_idle_sample = last_idle;
            let avg = h.avg_idle_ns as i64;
            let next = avg + (last_idle.min(2 * 500_000 * 8) as i64 - avg) / 8;
            h.avg_idle_ns = next.max(0) as u64;
        }
        if idle {
            // A CPU with nothing runnable picked its delayed sleepers
            // and dequeued them.
            self.delayed.on_cpu_idle(cpu);
        }
        // Its share of its LLC's utilisation, as SIS_UTIL takes it.
        let topo = self.engine.topology();
        let counted = if topo.is_online(cpu) {
            u64::from(est_util).min(u64::from(topo.capacity(cpu)))
        } else {
            0
        };
        let llc = topo.llc_index(cpu);
        let was = std::mem::replace(&mut self.util_counted[cpu], counted);
        let sum = &mut self.engine.llc_util_sums_mut()[llc];
        *sum = *sum + counted - was;
        // Sleepers still delayed here count as the kernel's rq counts them.
        let delayed = self.delayed.nr_delayed(cpu);
        self.snaps[cpu] = CpuSnapshot {
            idle,
            nr_running: runnable + delayed,
            nr_delayed: delayed,
            ttwu_pending: ttwu,
            wakeup_in_flight: queued > 0 || r.inflight > 0,
            sched_idle_only: false,
            load: est_load + u64::from(unattached) * NICE_0_LOAD,
            util: est_util,
            // Stand-ins: the estimator keeps neither (the slow path reads them).
            util_est: 0,
            runnable: 0,
            capacity: 0,
            avg_idle_ns: self.history[cpu].avg_idle_ns,
            idle_exit_ns: idle_exit,
            // When our last task stopped here: the kernel's newly-idle stamp
            // (a CPU idle since we started has been idle longest of all).
            idle_stamp_ns: if idle { free_since.max(1) } else { 0 },
        };
    }

    /// Whether core `c` is wholly idle now, and its LLC's count with it
    /// (the kernel's has_idle_cores: every online sibling idle).
    fn update_core(&mut self, c: usize) {
        let (llc, cpus) = self.engine.topology().core(c);
        let all = cpus.iter().all(|&cpu| {
            self.snaps
                .get(cpu as usize)
                .is_some_and(CpuSnapshot::available_idle)
        });
        if all != self.core_idle[c] {
            self.core_idle[c] = all;
            if all {
                self.idle_cores[llc] += 1;
            } else {
                self.idle_cores[llc] -= 1;
            }
        }
    }

    /// A task went to sleep after running `ran_ns`: with delayed dequeue it
    /// stays counted on its CPU while its lag lasts. EEVDF's lag is the
    /// service the task is still owed; a task that sleeps before using its
    /// slice is owed about the rest of it (an approximation: we have no
    /// virtual time).
    pub fn on_sleep(&mut self, msg: &Sleep) {
        let lag = self.slice_ns as i64 - msg.ran_ns as i64;
        let cpu = msg.cpu;
        // Delayed elsewhere still (its wake-up was not seen), it leaves that
        // CPU's count first, as on_sleep() would take it out there.
        if self.delayed.enabled()
            && lag > 0
            && cpu < self.snaps.len()
            && let Some(was) = self.delayed.remove(msg.pid)
        {
            self.mark_stale(was);
        }
        if self.delayed.on_sleep(cpu, msg.pid, lag, msg.at_ns) && cpu < self.snaps.len() {
            self.snaps[cpu].nr_delayed += 1;
            self.snaps[cpu].nr_running += 1;
            self.mark_stale(cpu);
        }
    }

    /// `task_h_load()` of a task with `load` whose CPU is `cpu`: scaled by that CPU's
    /// h_load of this jiffy, as our own decisions refresh it.
    fn task_h_load(&mut self, cpu: usize, load: u64, now: u64) -> u64 {
        match (self.history.get_mut(cpu), self.snaps.get(cpu)) {
            (Some(h), Some(s)) => h.h_load.task_h_load(load, s.load, now),
            _ => load,
        }
    }

    /// Decide where the task of `msg` runs.
    pub fn place(&mut self, msg: &Wakeup) -> Placement {
        let nr = self.nr_cpus();
        let pid = msg.pid;
        let sel = msg.waker.as_ref();
        let now = match sel {
            Some(w) if w.select_ns != 0 => w.select_ns,
            _ => msg.enqueue_ns,
        };
        let prev = msg.prev_cpu.min(nr.saturating_sub(1));

        if msg.is_wakeup
            && let Some(cpu) = self.delayed.on_wake(pid)
        {
            // ttwu_runnable() requeues a delayed task where it sleeps. The
            // kernel never leaves a task queued on a CPU outside its mask
            // (an affinity change moves it off, delayed or not:
            // move_queued_task()), so a task no longer allowed there wakes
            // as any other, and its CPU stops counting it.
            if msg.allowed.contains(cpu) {
                self.take_slot(cpu, msg.est_load);
                return Placement {
                    cpu,
                    outcome: Outcome::DelayedRequeue,
                };
            }
            if let Some(s) = self.snaps.get_mut(cpu)
                && s.nr_delayed > 0
            {
                s.nr_delayed -= 1;
                s.nr_running = s.nr_running.saturating_sub(1);
            }
            self.mark_stale(cpu);
        }

        let mut task = self.task_state(pid, prev);
        task.prev_cpu = prev;
        task.allowed = msg.allowed.and(self.engine.topology().possible());
        task.load = self.task_h_load(prev, msg.est_load, now);
        task.util = msg.est_util;

        let selected = sel.is_some();
        let waker_cpu = sel.map_or(prev, |w| w.cpu.min(nr - 1));
        let waker_pid = sel.map_or(0, |w| w.pid);
        let mut waker = self.task_state(waker_pid, waker_cpu);
        waker.is_per_cpu_kthread = sel.is_some_and(|w| w.per_cpu_kthread);
        if let Some(w) = sel {
            waker.load = self.task_h_load(waker_cpu, w.est_load, now);
        }
        let mut wake = WakeCtx {
            // Without a select_cpu (a pinned task's wake-up) the engine sees
            // no wake-up and keeps the task where it is.
            wake_flags: sel.map_or(0, |w| w.wake_flags as u32),
            waker_cpu,
            waker_context: sel.map(|w| w.context).unwrap_or_default(),
            waker_exiting: sel.is_some_and(|w| w.exiting),
            waker,
            now_ns: now,
        };

        // Describe the CPUs as select_cpu() saw them, for this decision only;
        // `as_selected` keeps what the snapshot said, to put back afterwards.
        let mut as_selected = std::mem::take(&mut self.as_selected);
        if selected {
            // CPUs idle now that were not when the wake-up was selected: freed
            // since (`freed`), or waiting for their own wakee.
            // Their load needs no correction: what ran there is still in its
            // averages, as blocked load.
            self.freed_after.clear();
            self.freed.after(now, &mut self.freed_after);
            let awaiting =
                (self.awaiting.iter().copied()).filter(|&cpu| self.awaits_own_wakee[cpu]);
            for cpu in self.freed_after.iter().copied().chain(awaiting) {
                // Not twice: the first change leaves it busy.
                if cpu != waker_cpu && self.snaps[cpu].idle {
                    as_selected.push((cpu, self.snaps[cpu]));
                    let s = &mut self.snaps[cpu];
                    s.idle = false;
                    s.nr_running = s.nr_running.max(1);
                }
            }
            // Sent from select_cpu() (the handoff), the wake-up may be read
            // after the kernel queued it on the wakee's CPU, whose
            // rq->ttwu_pending is then this wake-up's own: fair.c decides
            // before queueing it and never sees it.
            if msg.handoff_seq != 0 && prev != waker_cpu && self.snaps[prev].ttwu_pending {
                as_selected.push((prev, self.snaps[prev]));
                self.snaps[prev].ttwu_pending = false;
            }
            // The waker's CPU, from what select_cpu() recorded there.
            if let (Some(s), Some(w)) = (self.snaps.get_mut(waker_cpu), sel) {
                as_selected.push((waker_cpu, *s));
                s.nr_running = w.nr_runnable + s.nr_delayed;
                s.idle = w.nr_runnable == 0;
                s.ttwu_pending = w.ttwu_pending;
            }
        }
        // Trace mode copies the inputs before the engine updates them.
        let before = self
            .trace
            .as_ref()
            .map(|_| (task, wake, self.engine.llc_states().to_vec()));
        let d = self.engine.select_cpu(&self.snaps, &mut task, &mut wake);
        if let (Some(tx), Some((t0, w0, llc0))) = (&self.trace, before) {
            let rec = TraceRecord::new(
                self.engine.topology(),
                self.engine.config(),
                &llc0,
                &self.snaps,
                &t0,
                &w0,
                &d,
            );
            if tx.try_send(rec).is_err() {
                self.trace_dropped += 1;
            }
        }
        // Last change first: a CPU changed twice (idle since after select time,
        // and prev with its own queued wake-up) gets back what was read.
        for &(cpu, snap) in as_selected.iter().rev() {
            self.snaps[cpu] = snap;
        }
        as_selected.clear();
        self.as_selected = as_selected;
        // Its CPU waited for this wakee (BPF's own_wakee_until condition);
        // once it is placed, the CPU is busy only if it got it.
        if selected && wake.wake_flags & WAKE_SYNC != 0 && waker_cpu == prev {
            self.awaits_own_wakee[prev] = false;
        }

        if selected && waker_pid != 0 {
            self.store(&wake.waker, now);
        }
        self.store(&task, now);
        self.take_slot(d.cpu, task.load);
        Placement {
            cpu: d.cpu,
            outcome: Outcome::Engine,
        }
    }

    fn task_state(&self, pid: u32, prev: usize) -> TaskState {
        let mut t = TaskState::with_allowed(pid, prev, *self.engine.topology().possible());
        if let Some(s) = self.tasks.get(&pid) {
            t.recent_used_cpu = s.recent_used_cpu;
            t.wakee_flips = s.wakee_flips;
            t.last_wakee = s.last_wakee;
            t.wakee_flip_decay_ts = s.wakee_flip_decay_ts;
        }
        t
    }

    fn store(&mut self, t: &TaskState, now: u64) {
        if self.tasks.len() >= self.task_cap && !self.tasks.contains_key(&t.pid) {
            self.evict(now);
        }
        self.tasks.insert(
            t.pid,
            StoredTask {
                recent_used_cpu: t.recent_used_cpu,
                wakee_flips: t.wakee_flips,
                last_wakee: t.last_wakee,
                wakee_flip_decay_ts: t.wakee_flip_decay_ts,
                seen_ns: now,
            },
        );
    }

    /// The CPU got a task whose load is `load`: busy for the rest of the batch, its
    /// load attached as the kernel's enqueue would.
    fn take_slot(&mut self, cpu: usize, load: u64) {
        if let Some(s) = self.snaps.get_mut(cpu) {
            s.idle = false;
            s.nr_running += 1;
            s.load += load;
            s.wakeup_in_flight = true;
            self.mark_stale(cpu);
        }
    }

    /// The table is full: drop the least recently seen tasks until an
    /// eighth of it is free again, by halving the age kept (each pass one
    /// scan; a full table is rare, a fork storm's worth of new pids). What
    /// an evicted task loses is what a new task starts without: its
    /// recent_used_cpu and wakee flips.
    fn evict(&mut self, now: u64) {
        let keep = self.task_cap - self.task_cap / 8;
        let before = self.tasks.len();
        let mut age = TASK_TTL_NS;
        while self.tasks.len() > keep && age > 1_000 {
            age /= 2;
            self.tasks
                .retain(|_, t| now.saturating_sub(t.seen_ns) < age);
        }
        // All seen within a microsecond: keep any `keep` of them.
        let mut left = keep;
        self.tasks.retain(|_, _| {
            let k = left > 0;
            left = left.saturating_sub(1);
            k
        });
        self.task_evictions += (before - self.tasks.len()) as u64;
    }

    fn sweep(&mut self, now: u64) {
        if now.saturating_sub(self.last_sweep_ns) < TASK_TTL_NS / 3 {
            return;
        }
        self.last_sweep_ns = now;
        self.tasks
            .retain(|_, t| now.saturating_sub(t.seen_ns) < TASK_TTL_NS);
    }
}

/// Each CPU's time stamp, as a tree of maxima over the CPUs: a CPU's change
/// and the search for the CPUs stamped after a time cost the tree's depth
/// per CPU found, not a walk over every CPU (a machine's idle CPUs may be
/// most of a thousand).
struct FreedSince {
    /// Leaves from `leaves` on, each inner node the larger of its two.
    t: Vec<u64>,
    leaves: usize,
}

impl FreedSince {
    fn new(nr_cpus: usize) -> Self {
        let leaves = nr_cpus.next_power_of_two().max(1);
        FreedSince {
            t: vec![0; 2 * leaves],
            leaves,
        }
    }

    fn set(&mut self, cpu: usize, stamp: u64) {
        let mut i = self.leaves + cpu;
        if self.t[i] == stamp {
            return;
        }
        self.t[i] = stamp;
        while i > 1 {
            i /= 2;
            let m = self.t[2 * i].max(self.t[2 * i + 1]);
            if self.t[i] == m {
                break;
            }
            self.t[i] = m;
        }
    }

    /// The CPUs stamped after `at`, lowest first, onto `out`.
    fn after(&self, at: u64, out: &mut Vec<usize>) {
        self.below(1, at, out);
    }

    fn below(&self, i: usize, at: u64, out: &mut Vec<usize>) {
        if self.t[i] <= at {
            return;
        }
        if i >= self.leaves {
            out.push(i - self.leaves);
        } else {
            self.below(2 * i, at, out);
            self.below(2 * i + 1, at, out);
        }
    }
}

/// A per-task table for at most `cap` entries that never reallocates:
/// removals leave tombstones, and the table clears them by rehashing in
/// place only while it is at most half full; fuller, it grows. Room for
/// twice the bound keeps it at most half full.
fn task_table(cap: usize) -> PidMap<StoredTask> {
    PidMap::with_capacity_and_hasher(2 * cap, Default::default())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::live::protocol::Waker;
    use scx_wakelab::policy::WakerContext;

    const WAKER_TASK: WakerContext = WakerContext::Task;
    const WAKER_SOFTIRQ: WakerContext = WakerContext::Softirq;

    fn msg(
        pid: u32,
        prev: usize,
        waker_cpu: usize,
        sync: bool,
        ctx: WakerContext,
        waker_runnable: u32,
    ) -> Wakeup {
        let mut allowed = CpuSet::new();
        for c in 0..8 {
            allowed.set(c);
        }
        Wakeup {
            pid,
            task_cpu: prev,
            prev_cpu: prev,
            is_wakeup: true,
            waker: Some(Waker {
                cpu: waker_cpu,
                pid: 1000,
                context: ctx,
                exiting: false,
                per_cpu_kthread: false,
                nr_runnable: waker_runnable,
                ttwu_pending: false,
                wake_flags: 0x08 | if sync { 0x10 } else { 0 },
                select_ns: 1_000_000_000,
                est_load: 1024,
            }),
            enq_cnt: 1,
            enqueue_ns: 0,
            enqueue_mono_ns: 0,
            weight: 100,
            est_load: NICE_0_LOAD,
            est_util: 0,
            exec_runtime_ns: 0,
            allowed,
            handoff_seq: 0,
        }
    }

    fn states(busy: &[usize]) -> Vec<CpuReading> {
        (0..8)
            .map(|c| CpuReading {
                idle: !busy.contains(&c),
                curr_pid: if busy.contains(&c) {
                    4000 + c as i32
                } else {
                    0
                },
                nr_runnable: busy.contains(&c) as u32,
                est_load_avg: if busy.contains(&c) { NICE_0_LOAD } else { 0 },
                ..Default::default()
            })
            .collect()
    }

    fn placer(preset: &str) -> Placer {
        placer_with_table(preset, DEFAULT_TASK_TABLE)
    }

    fn placer_with_table(preset: &str, tasks: usize) -> Placer {
        let topo = Topology::from_shape(2, 1, 2, 2).unwrap();
        Placer::new(
            topo,
            Config::from_preset(preset).unwrap(),
            1,
            5_000_000,
            tasks,
        )
        .unwrap()
    }

    /// Seed 1 live: a sync wake-up from softirq on a node-1 CPU whose only
    /// task is a hog pulls the wakee across nodes unless the flag is on.
    #[test]
    fn softirq_sync_waker_on_hog_cpu_pulls_only_without_barry() {
        let busy: Vec<usize> = (4..8).collect(); // hogs on node 1
        for (preset, want_node1) in [("mainline", true), ("mainline+barry", false)] {
            let mut p = placer(preset);
            p.begin_batch(&states(&busy), 1_000_000_000);
            let m = msg(10, 1, 5, true, WAKER_SOFTIRQ, 1);
            let cpu = p.place(&m).cpu;
            assert_eq!(cpu >= 4, want_node1, "{preset}: placed on {cpu}");
        }
    }

    /// The largest table is one block of the fixed heap it is allocated in, no larger
    /// than anything may plan for there; twice as many tasks would not be.
    #[test]
    fn the_largest_task_table_fits_the_fixed_heap() {
        let bytes = |cap: usize| {
            // hashbrown keeps 7 in 8 buckets usable; a control byte per bucket.
            let buckets = task_table(cap).capacity() / 7 * 8;
            (buckets * (std::mem::size_of::<(u32, StoredTask)>() + 1)) as u64
        };
        let largest = scx_wakelab::heap::FIXED_HEAP_LARGEST_BLOCK;
        assert!(
            bytes(MAX_TASK_TABLE) <= largest,
            "{}",
            bytes(MAX_TASK_TABLE)
        );
        assert!(bytes(2 * MAX_TASK_TABLE) > largest);
        assert!(bytes(DEFAULT_TASK_TABLE) <= largest / 4);
    }

    /// A fork storm: far more pids than the table holds. The table stays
    /// within its bound without growing its allocation, the evictions are
    /// counted, and the newest tasks keep their state.
    #[test]
    fn the_task_table_stays_bounded_and_keeps_the_newest() {
        let mut p = placer_with_table("mainline", 64);
        let capacity = p.tasks.capacity();
        for i in 0..1000u32 {
            p.begin_batch(&states(&[]), 1_000_000_000 + u64::from(i) * 1000);
            p.place(&msg(10 + i, (i % 8) as usize, 6, false, WAKER_TASK, 1));
            assert!(p.tasks.len() <= 64, "{} tasks after {i}", p.tasks.len());
        }
        // capacity() is entries plus room left, which tombstones lower
        // until the next in-place rehash; a reallocation would double it.
        assert!(
            p.tasks.capacity() <= capacity,
            "the table grew: {} > {capacity}",
            p.tasks.capacity()
        );
        assert!(
            p.task_evictions >= 1000 - 64,
            "{} evictions",
            p.task_evictions
        );
        assert!(
            p.tasks.contains_key(&(10 + 999)),
            "the newest task was evicted"
        );
    }

    #[test]
    fn a_cpu_running_only_the_agent_is_idle() {
        let mut st = states(&[]);
        st[3].idle = false;
        st[3].curr_pid = 1; // the agent
        let mut p = placer("mainline");
        p.begin_batch(&st, 1);
        assert!(p.snaps[3].available_idle());
    }

    #[test]
    fn placements_in_one_batch_make_the_cpu_busy() {
        let mut p = placer("mainline");
        p.begin_batch(&states(&[]), 1);
        // Wakers on CPU 6 (node 1); both wakees last ran on idle CPU 2.
        let m = msg(10, 2, 6, false, WAKER_TASK, 1);
        assert_eq!(p.place(&m).cpu, 2);
        let mut m2 = msg(11, 2, 6, false, WAKER_TASK, 1);
        m2.waker.as_mut().unwrap().pid = 1001;
        let second = p.place(&m2).cpu;
        assert_ne!(
            second, 2,
            "second task must not stack on the CPU just given away"
        );
    }

    /// A CPU whose task stopped after the wake-up was selected was busy at
    /// select time: the wake-up does not go there. One free since before
    /// select time is idle, and takes it.
    #[test]
    fn a_cpu_free_only_since_after_select_time_was_busy() {
        let select = 1_000_000_000;
        for (free_since, want_prev) in [(select + 500_000, false), (select - 500_000, true)] {
            let mut st = states(&[6]);
            st[2].free_since_ns = free_since;
            let mut p = placer("mainline");
            p.begin_batch(&st, select + 1_000_000);
            // Non-sync wake-up from CPU 6 of a task that last ran on CPU 2.
            let cpu = p.place(&msg(10, 2, 6, false, WAKER_TASK, 1)).cpu;
            assert_eq!(
                cpu == 2,
                want_prev,
                "free since {free_since}: placed on {cpu}"
            );
            // The snapshot itself is left as read, for the next wake-up.
            assert!(p.snaps[2].available_idle() || cpu == 2);
        }
    }

    /// A CPU waiting for its own sync wakee looks busy to other wake-ups
    /// until that wakee is placed.
    #[test]
    fn a_cpu_awaiting_its_own_wakee_looks_busy_until_it_is_placed() {
        let select = 1_000_000_000;
        let mut st = states(&[6]);
        st[2].own_wakee_until_ns = select + 2_000_000;
        let mut p = placer("mainline");
        p.begin_batch(&st, select);
        assert_ne!(p.place(&msg(10, 2, 6, false, WAKER_TASK, 1)).cpu, 2);
        // Its own wakee: a sync wake-up on CPU 2 of a task that ran there.
        let mut own_wakee = msg(11, 2, 2, true, WAKER_TASK, 1);
        own_wakee.waker.as_mut().unwrap().pid = 1001;
        let got = p.place(&own_wakee).cpu;
        // Placed elsewhere, CPU 2 is free again for the next one.
        if got != 2 {
            let mut m = msg(12, 2, 6, false, WAKER_TASK, 1);
            m.waker.as_mut().unwrap().pid = 1002;
            assert_eq!(p.place(&m).cpu, 2);
        }
        assert!(!p.awaits_own_wakee[2]);
    }

    /// SIS_UTIL reads utilisation, not whether a CPU is busy this instant:
    /// an LLC whose CPUs mostly run now but were mostly idle is searched;
    /// one that was busy all along is not.
    #[test]
    fn sis_util_reads_the_average_not_the_instant() {
        // Node 0's LLC is CPUs 0-3: 0, 1 and 2 run now, 3 is idle. A task on
        // CPU 0 wakes one that last ran on CPU 1.
        let now = 1_500_000_000;
        let states_util = |util: u32| {
            let mut st = states(&[0, 1, 2]);
            for c in [0, 1, 2] {
                st[c].est_util_avg = util;
            }
            st
        };
        // The estimator's util of a CPU busy 10% and 100% of the time.
        for (util, want_search) in [(102u32, true), (1024, false)] {
            let mut p = placer("v6.12");
            p.begin_batch(&states_util(util), now);
            let mut m = msg(10, 1, 0, false, WAKER_TASK, 1);
            m.waker.as_mut().unwrap().select_ns = now;
            let cpu = p.place(&m).cpu;
            let overloaded = p.engine().counters().sis_util_overloaded;
            assert_eq!(
                (cpu == 3, overloaded == 0),
                (want_search, want_search),
                "util {util} (snapshot {}): placed on {cpu}, overloaded {overloaded}",
                p.snaps[1].util
            );
        }
    }

    #[test]
    fn delayed_sleeper_is_requeued_where_it_sleeps() {
        let mut p = placer("v6.12");
        assert!(p.wants_sleep_events());
        p.begin_batch(&states(&[3]), 1);
        let sleep = Sleep {
            pid: 20,
            cpu: 3,
            ran_ns: 100_000, // ran 0.1 ms of a 5 ms slice: lag left
            at_ns: 2,
        };
        p.on_sleep(&sleep);
        assert_eq!(p.snaps[3].nr_delayed, 1);
        let r = p.place(&msg(20, 3, 0, false, WAKER_TASK, 1));
        assert_eq!((r.cpu, r.outcome), (3, Outcome::DelayedRequeue));
        // Delayed on a CPU its mask no longer allows: placed as any wake-up,
        // on an allowed CPU, and that CPU no longer counts it.
        p.on_sleep(&sleep);
        let delayed = p.snaps[3].nr_delayed;
        let mut m = msg(20, 3, 0, false, WAKER_TASK, 1);
        m.allowed = CpuSet::new();
        m.allowed.set(1);
        let r = p.place(&m);
        assert_eq!((r.cpu, r.outcome), (1, Outcome::Engine));
        assert_eq!(p.snaps[3].nr_delayed, delayed - 1);
        // Without the emulation the engine decides.
        let mut p = placer("v6.16");
        p.set("delayed_dequeue", "false").unwrap();
        assert!(!p.wants_sleep_events());
    }

    /// A wake-up without ops.select_cpu() (a pinned task's: core.c does not
    /// ask the class) is no placement: the task stays on its CPU.
    #[test]
    fn wakeup_without_select_stays_on_its_cpu() {
        let mut p = placer("mainline");
        p.begin_batch(&states(&[5]), 1);
        let mut m = msg(30, 5, 0, false, WAKER_TASK, 0);
        m.waker = None;
        assert_eq!(p.place(&m).cpu, 5);
    }

    /// A decision for a CPU not carried out yet makes it busy in the next
    /// batch's snapshot, as the task queued there would on the kernel's
    /// runqueue; carried out and running, it is busy as itself.
    #[test]
    fn a_decision_on_its_way_makes_its_cpu_busy() {
        let mut p = placer("mainline");
        let mut st = states(&[6]);
        st[2].inflight = 1;
        p.begin_batch(&st, 1_000_000_000);
        assert!(!p.snaps[2].available_idle());
        assert_eq!(p.snaps[2].nr_running, 1);
        // A non-sync wake-up from CPU 6 of a task that last ran on CPU 2
        // does not stack on it.
        assert_ne!(p.place(&msg(10, 2, 6, false, WAKER_TASK, 1)).cpu, 2);
        st[2].inflight = 0;
        p.begin_batch(&st, 1_000_000_001);
        assert!(p.snaps[2].available_idle());
    }

    /// A wake-up sent from select_cpu() (the handoff) may be read after the
    /// kernel queued it on the wakee's CPU: that CPU's ttwu_pending is the
    /// wake-up's own, which fair.c never sees, and the idle prev keeps it.
    /// Sent from the enqueue, a pending wake-up there is another one.
    #[test]
    fn a_handoff_wakeup_ignores_its_own_queued_wakeup_on_prev() {
        for (handoff_seq, want_prev) in [(5, true), (0, false)] {
            let mut p = placer("mainline");
            let mut st = states(&[6]);
            st[2].ttwu_pending = true;
            p.begin_batch(&st, 1_000_000_000);
            let mut m = msg(10, 2, 6, false, WAKER_TASK, 1);
            m.handoff_seq = handoff_seq;
            let cpu = p.place(&m).cpu;
            assert_eq!(
                cpu == 2,
                want_prev,
                "handoff_seq {handoff_seq}: placed on {cpu}"
            );
            // Only for that decision: the snapshot still says what BPF read.
            assert!(p.snaps[2].ttwu_pending);
        }
    }

    /// A handoff wake-up whose prev is both free only since after select time
    /// and holding its own queued wake-up: both changes are for that decision
    /// only, and the snapshot is what was read afterwards.
    #[test]
    fn a_cpu_changed_twice_for_one_decision_is_restored_as_read() {
        let select = 1_000_000_000;
        let mut st = states(&[6]);
        st[2].ttwu_pending = true;
        st[2].free_since_ns = select + 500_000;
        let mut p = placer("mainline");
        p.begin_batch(&st, select + 1_000_000);
        let before = p.snaps[2];
        let mut m = msg(10, 2, 6, false, WAKER_TASK, 1);
        m.handoff_seq = 5;
        let cpu = p.place(&m).cpu;
        assert_ne!(cpu, 2, "busy at select time");
        assert_eq!(p.snaps[2], before);
    }

    /// The agent's CPU (agent pid 1 here, running on CPU 7): idle for the
    /// engine if the agent yields after a batch, busy with the agent if it
    /// polls, so that a task that last ran there moves to an idle CPU.
    #[test]
    fn the_agents_cpu_is_busy_only_while_the_agent_polls() {
        for (spins, want_prev) in [(false, true), (true, false)] {
            let mut p = placer("mainline");
            p.set_agent_spins(spins);
            let mut st = states(&[]);
            st[7].idle = false;
            st[7].curr_pid = 1;
            p.begin_batch(&st, 1_000_000_000);
            assert_eq!(p.snaps[7].available_idle(), !spins);
            // A non-sync wake-up from CPU 6 of a task that last ran on CPU 7.
            let cpu = p.place(&msg(10, 7, 6, false, WAKER_TASK, 1)).cpu;
            assert_eq!(cpu == 7, want_prev, "agent spins: {spins}, placed on {cpu}");
        }
    }

    /// Rebuilding only the CPUs whose readings changed, and those the last
    /// batch changed, gives what rebuilding every CPU gives: the same
    /// snapshots, idle-core hints, waits and decisions, batch after batch,
    /// with sleepers delayed, waits that end with time and flags flipped.
    #[test]
    fn rebuilding_what_changed_equals_rebuilding_everything() {
        use scx_wakelab::policy::rng::XorShift;
        for (preset, seed) in [("mainline", 1), ("v6.12", 2), ("v5.10", 3), ("v6.12", 4)] {
            let (mut part, mut whole) = (placer(preset), placer(preset));
            let mut r = XorShift::new(seed);
            let mut st = states(&[1, 4]);
            let mut now = 1_000_000_000u64;
            for batch in 0..3000 {
                now += r.below(300_000);
                let mut changed = Vec::new();
                if batch == 0 {
                    changed.extend(0..8);
                }
                for _ in 0..r.below(4) {
                    let c = r.below(8) as usize;
                    let busy = r.chance(50);
                    st[c] = CpuReading {
                        idle: !busy,
                        curr_pid: if busy {
                            4000 + c as i32
                        } else if r.chance(10) {
                            1
                        } else {
                            0
                        },
                        nr_runnable: if busy { 1 + r.below(2) as u32 } else { 0 },
                        ttwu_pending: r.chance(10),
                        dsq_queued: r.below(2) as u32,
                        last_idle_ns: r.below(3_000_000),
                        last_idle_end_ns: now - r.below(1_000_000),
                        free_since_ns: if busy {
                            0
                        } else {
                            now - r.below(400_000) + r.below(200_000)
                        },
                        own_wakee_until_ns: if r.chance(20) {
                            now + r.below(600_000)
                        } else {
                            0
                        },
                        inflight: r.chance(10) as u32,
                        est_load_avg: r.below(3000),
                        est_util_avg: r.below(1025) as u32,
                    };
                    changed.push(c);
                }
                if r.chance(2) {
                    let spins = r.chance(50);
                    part.set_agent_spins(spins);
                    whole.set_agent_spins(spins);
                }
                if preset != "v5.10" && r.chance(1) {
                    let on = if r.chance(50) { "true" } else { "false" };
                    part.set("delayed_dequeue", on).unwrap();
                    whole.set("delayed_dequeue", on).unwrap();
                }
                part.begin_batch_changed(&st, &changed, now);
                whole.begin_batch(&st, now);
                for _ in 0..r.below(3) {
                    let s = Sleep {
                        pid: 10 + r.below(12) as u32,
                        cpu: r.below(8) as usize,
                        ran_ns: r.below(10_000_000),
                        at_ns: now,
                    };
                    part.on_sleep(&s);
                    whole.on_sleep(&s);
                }
                assert_eq!(part.snaps, whole.snaps, "{preset} batch {batch}: snapshots");
                assert_eq!(
                    part.awaits_own_wakee, whole.awaits_own_wakee,
                    "{preset} batch {batch}"
                );
                assert_eq!(
                    part.engine().llc_states(),
                    whole.engine().llc_states(),
                    "{preset} batch {batch}: idle-core hints"
                );
                for _ in 0..1 + r.below(3) {
                    let mut m = msg(
                        10 + r.below(12) as u32,
                        r.below(8) as usize,
                        r.below(8) as usize,
                        r.chance(50),
                        if r.chance(25) {
                            WAKER_SOFTIRQ
                        } else {
                            WAKER_TASK
                        },
                        r.below(3) as u32,
                    );
                    if let Some(w) = m.waker.as_mut() {
                        w.select_ns = now - r.below(300_000);
                        w.pid = 10 + r.below(12) as u32;
                    }
                    m.handoff_seq = r.chance(20) as u64;
                    let (a, b) = (part.place(&m), whole.place(&m));
                    assert_eq!(
                        (a.cpu, a.outcome),
                        (b.cpu, b.outcome),
                        "{preset} batch {batch}"
                    );
                }
                assert_eq!(
                    part.snaps, whole.snaps,
                    "{preset} batch {batch}: after placing"
                );
            }
            assert_eq!(part.engine().counters(), whole.engine().counters());
        }
    }

    /// A new task (SCX_WAKE_FORK, its first enqueue, not a wake-up) is placed
    /// by the slow path: away from its parent's busy node, onto the most
    /// recently idled CPU of the idle one.
    #[test]
    fn a_new_task_takes_the_slow_path() {
        let mut p = placer("mainline");
        let mut cpus = states(&[0, 1, 2, 3]);
        for (c, since) in [(4, 500), (5, 900), (6, 700), (7, 0)] {
            cpus[c].free_since_ns = since;
        }
        p.begin_batch(&cpus, 1_000_000_000);
        let mut m = msg(10, 1, 1, false, WAKER_TASK, 1);
        m.is_wakeup = false;
        if let Some(w) = m.waker.as_mut() {
            w.wake_flags = 0x04;
        }
        assert_eq!(p.place(&m).cpu, 5);
        let c = p.engine().counters();
        assert_eq!((c.nr_fork_placements, c.nr_wakeups), (1, 0));
    }
}
