//! The agent: loads our BPF component, receives every task that needs a
//! placement, decides its CPU and hands the decision back.
//!
//! One thread schedules. It must never block on anything a task it has not
//! placed yet could be holding, so it does no I/O after start-up: logging
//! and stats printing happen on other threads, which the BPF side dispatches
//! without asking the agent (bpf/main.bpf.c, is_agent_helper_thread()).

use std::cell::RefCell;
use std::collections::VecDeque;
use std::mem::{MaybeUninit, size_of};
use std::rc::Rc;
use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use anyhow::{Context, Result, anyhow};
use libbpf_rs::OpenObject;
use log::{info, warn};
use scx_utils::{
    UserExitInfo, compat, scx_ops_attach, scx_ops_load, scx_ops_open, uei_exited, uei_report,
};

use super::bpf_intf::wakeup_msg_kind_WL_MSG_SLEEP as WL_MSG_SLEEP;
use super::bpf_intf::{self, decision_msg, wakeup_msg};
use super::bpf_skel::*;
use super::control::ControlQueue;
use super::libbpf_log;
use super::placement::{Outcome, Placer};
use super::stats::{HOP_ENQUEUE_READ, HOP_READ_COMMIT, LiveMetrics};

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
    /// --newidle-wait-own-wakee: see own_wakee_until in bpf/main.bpf.c.
    pub newidle_wait_own_wakee: bool,
    pub open_opts: Option<libbpf_rs::libbpf_sys::bpf_object_open_opts>,
}

const WAKEUP_MSG_SIZE: usize = size_of::<wakeup_msg>();
const DECISION_MSG_SIZE: usize = size_of::<decision_msg>();
/// Messages taken from the ring per loop iteration: bounds the time between
/// two submissions of decisions, so early tasks are not held back by late
/// ones.
const BATCH: usize = 512;
/// How often the scheduling thread publishes counters for the stats thread.
const PUBLISH_EVERY: Duration = Duration::from_millis(100);

pub struct Agent<'a> {
    skel: BpfSkel<'a>,
    struct_ops: Option<libbpf_rs::Link>,
    wakeups: libbpf_rs::RingBuffer<'static>,
    decisions: libbpf_rs::UserRingBuffer,
    inbox: Rc<RefCell<Vec<wakeup_msg>>>,
    /// Decisions the user ring had no room for yet.
    backlog: VecDeque<decision_msg>,
    placer: Placer,
    metrics: Arc<Mutex<LiveMetrics>>,
    local: LiveMetrics,
    last_publish: Instant,
    control: ControlQueue,
}

impl<'a> Agent<'a> {
    pub fn init(
        cfg: &AgentConfig,
        placer: Placer,
        open_object: &'a mut MaybeUninit<OpenObject>,
        metrics: Arc<Mutex<LiveMetrics>>,
        control: ControlQueue,
    ) -> Result<Self> {
        let builder = BpfSkelBuilder::default();
        // After the builder: libbpf-rs' ObjectBuilder::debug() would replace
        // our print callback. Verbosity is ours to apply (-v shows libbpf's
        // messages through `log`).
        libbpf_log::install();
        let open_opts = cfg.open_opts;
        let mut skel = scx_ops_open!(builder, open_object, wakelab_ops, open_opts)
            .context("opening the BPF component")?;

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

        let ops = skel.struct_ops.wakelab_ops_mut();
        // KEEP_BUILTIN_IDLE: we define ops.update_idle() for our table but
        // keep the kernel's idle masks. ALLOW_QUEUED_WAKEUP: remote wake-ups
        // go through the wakelist, so rq->ttwu_pending means something for
        // our tasks too (cfs-wakeup-placement.md, 11.5).
        // ENQ_LAST: without it the kernel keeps running a yielding agent
        // whose CPU has nothing else to do, and the agent spins instead of
        // parking in its queue (bpf/main.bpf.c, wakelab_enqueue()).
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
                let tail = libbpf_log::tail();
                return Err(match libbpf_log::verifier_reason(&tail) {
                    Some(reason) => anyhow!(
                        "loading the BPF component failed: the verifier said: {reason} (run with -v for the full log)"
                    ),
                    None => anyhow!("loading the BPF component failed: {e:#}"),
                });
            }
        };

        let link = scx_ops_attach!(skel, wakelab_ops)?;

        let inbox: Rc<RefCell<Vec<wakeup_msg>>> = Rc::new(RefCell::new(Vec::with_capacity(BATCH)));
        let sink = inbox.clone();
        let mut rbb = libbpf_rs::RingBufferBuilder::new();
        rbb.add(&skel.maps.wakeups, move |data: &[u8]| {
            if data.len() >= WAKEUP_MSG_SIZE {
                // SAFETY: the record is a struct wakeup_msg written by BPF;
                // read it unaligned into our own copy.
                let msg = unsafe { std::ptr::read_unaligned(data.as_ptr() as *const wakeup_msg) };
                sink.borrow_mut().push(msg);
            }
            0
        })?;
        let wakeups = rbb.build()?;
        let decisions = libbpf_rs::UserRingBuffer::new(&skel.maps.decisions)?;

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

        if let Some(bss) = skel.maps.bss_data.as_mut() {
            let topo = placer.engine().topology();
            for cpu in 0..topo.nr_cpus().min(bss.cpu_llc.len()) {
                if let Some(d) = topo.desc(cpu) {
                    bss.cpu_llc[cpu] = d.llc;
                    bss.cpu_node[cpu] = d.node;
                }
            }
        }
        push_policy_to_bpf(&mut skel, &placer);
        info!(
            "scx_wakelab loaded: {} CPUs, slice {} us, {} mode",
            placer.nr_cpus(),
            cfg.slice_ns / 1000,
            if cfg.partial { "partial" } else { "full" }
        );
        Ok(Agent {
            skel,
            struct_ops: Some(link),
            wakeups,
            decisions,
            inbox,
            backlog: VecDeque::with_capacity(bpf_intf::wakelab_consts_WL_RING_ENTRIES as usize),
            placer,
            metrics,
            local: LiveMetrics::default(),
            last_publish: Instant::now(),
            control,
        })
    }

    /// The scheduling loop. Returns when asked to stop or when the kernel
    /// unloads us; the exit info says whether to restart.
    pub fn run(&mut self, shutdown: &AtomicBool) -> Result<UserExitInfo> {
        while !shutdown.load(Ordering::Relaxed) && !uei_exited!(&self.skel, uei) {
            self.flush_backlog();
            if self.backlog.is_empty() {
                let n = self.wakeups.consume_raw_n(BATCH);
                if n < 0 {
                    warn!("consuming the wakeup ring failed: {n}");
                }
                self.place_inbox(monotonic_ns());
            }
            self.apply_control();
            self.publish(false);
            // Give the CPU back. BPF parks us in our own queue and runs us
            // again only when there is work (or at the heartbeat).
            std::thread::yield_now();
        }
        self.publish(true);
        // Detach first so that no task waits for a decision we will not make.
        self.struct_ops.take();
        uei_report!(&self.skel, uei)
    }

    /// Decide every message of the inbox, read at `read_ns` (CLOCK_MONOTONIC).
    fn place_inbox(&mut self, read_ns: u64) {
        let msgs = std::mem::take(&mut *self.inbox.borrow_mut());
        if msgs.is_empty() {
            self.inbox.replace(msgs);
            return;
        }
        let bss = self.skel.maps.bss_data.as_mut().expect("bss is mapped");
        bss.agent_consumed += msgs.len() as u64;
        // BPF wakes us for wake-ups only; sleep reports ride along.
        bss.agent_consumed_wakeups += msgs.iter().filter(|m| m.kind != WL_MSG_SLEEP).count() as u64;
        let now = msgs.iter().map(|m| m.enqueue_ns).max().unwrap_or(0);
        self.placer
            .begin_batch(&bss.cpu_state[..], &bss.own_wakee_until[..], now);
        let mut pushed = 0;
        for msg in &msgs {
            if msg.kind == WL_MSG_SLEEP {
                self.local.sleep_events += 1;
                self.placer.on_sleep(msg);
                continue;
            }
            self.local.record_hop(
                HOP_ENQUEUE_READ,
                read_ns.saturating_sub(msg.enqueue_mono_ns),
            );
            let placed = self.placer.place(msg);
            self.local.nr_decisions += 1;
            if placed.outcome == Outcome::DelayedRequeue {
                self.local.delayed_requeues += 1;
            }
            // In flight until BPF applies it: a newly-idle CPU with
            // decisions on their way skips its pull (seed 2).
            if let Some(slot) = bss.inflight.get_mut(placed.cpu) {
                // SAFETY: BPF decrements this u32 with atomic ops; ours
                // must be atomic too. The .bss mapping is 4-byte aligned.
                unsafe { AtomicU32::from_ptr(slot as *mut u32) }.fetch_add(1, Ordering::Relaxed);
            }
            self.backlog.push_back(decision_msg {
                pid: msg.pid,
                cpu: placed.cpu as i32,
                enq_cnt: msg.enq_cnt,
                slice_ns: 0,
                enqueue_ns: msg.enqueue_ns,
                committed_ns: 0,
            });
            pushed += 1;
        }
        // Handed over now: one clock read for the batch.
        let committed = monotonic_ns();
        let start = self.backlog.len() - pushed;
        for d in self.backlog.iter_mut().skip(start) {
            d.committed_ns = committed;
            self.local
                .record_hop(HOP_READ_COMMIT, committed.saturating_sub(read_ns));
        }
        let mut msgs = msgs;
        msgs.clear();
        self.inbox.replace(msgs);
        self.flush_backlog();
    }

    /// Submit queued decisions until the user ring is full.
    fn flush_backlog(&mut self) {
        while let Some(d) = self.backlog.front() {
            let Ok(mut sample) = self.decisions.reserve(DECISION_MSG_SIZE) else {
                self.local.decision_ring_full += 1;
                break;
            };
            let buf = sample.as_mut();
            // SAFETY: the sample is DECISION_MSG_SIZE bytes, reserved for us.
            unsafe { std::ptr::write_unaligned(buf.as_mut_ptr() as *mut decision_msg, *d) };
            if self.decisions.submit(sample).is_err() {
                self.local.decision_ring_full += 1;
                break;
            }
            self.backlog.pop_front();
        }
        if let Some(bss) = self.skel.maps.bss_data.as_mut() {
            bss.agent_backlog = self.backlog.len() as u64;
        }
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
        if !force && self.last_publish.elapsed() < PUBLISH_EVERY {
            return;
        }
        let Some(bss) = self.skel.maps.bss_data.as_ref() else {
            return;
        };
        self.local.absorb_bpf(bss);
        self.local.policy = *self.placer.engine().counters();
        self.local.trace_dropped = self.placer.trace_dropped;
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
            self.last_publish = Instant::now();
        }
    }
}

/// CLOCK_MONOTONIC now, ns: the clock of BPF's bpf_ktime_get_ns(), for hop times.
fn monotonic_ns() -> u64 {
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

/// The parts of the policy that BPF carries out itself.
fn push_policy_to_bpf(skel: &mut BpfSkel, placer: &Placer) {
    if let Some(bss) = skel.maps.bss_data.as_mut() {
        bss.report_sleeps = placer.wants_sleep_events() as u32;
    }
    if let Some(data) = skel.maps.data_data.as_mut() {
        data.newidle_skip_pending = placer.engine().config().newidle_skip_pending_wakeup as u32;
    }
}

impl Drop for Agent<'_> {
    fn drop(&mut self) {
        self.struct_ops.take();
        scx_rustland_core::ALLOCATOR.unlock_memory();
    }
}
