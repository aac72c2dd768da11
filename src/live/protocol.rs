//! The agent's half of the BPF contract (`bpf/intf.h` is the other half):
//! typed messages, the two rings, the fast-lane apply call and the variables
//! both sides share in `.bss` (`struct wl_shared`, and BPF's counters). This
//! is the only Rust file that reads or writes what the scheduler's BPF and
//! the agent share: the bindgen structs of intf.h, the rings' records, the
//! mapped `.bss`; the rest of the agent sees `Message`, `Decision` and
//! `CpuReading`. agent.rs owns the skeleton itself: it writes the load-time
//! settings (`.rodata`, read-only once loaded) and the struct_ops flags, and
//! hands the mapped `.bss` and the maps to the functions here. (The kernel
//! oracle's BPF has its own contract and reader: bpf/oracle.h,
//! src/oracle/record.rs.)
//!
//! Reads of `.bss` are volatile: BPF writes it concurrently from every CPU.
//! Which side owns each shared field, and its invariant, is written beside
//! the field in `bpf/intf.h`.

use std::cell::RefCell;
use std::mem::size_of;
use std::rc::Rc;
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};

use anyhow::{Context, Result, anyhow};
use scx_wakelab::policy::newidle::{RuleConfig, RuleCpuTopology};
use scx_wakelab::policy::{CpuSet, WakerContext};

use super::bpf_intf as raw;
use super::bpf_skel::types::{bss, wl_shared};
use super::stats::{
    HOP_ENQUEUE_READ, HOP_READ_COMMIT, HOPS, Hist, LAT_BUCKETS, LiveMetrics, with_counters,
};

/// Decisions one apply run carries out (`WL_APPLY_MAX`).
pub const APPLY_MAX: usize = raw::wakelab_consts_WL_APPLY_MAX as usize;
/// Entries of each ring (`WL_RING_ENTRIES`).
pub const RING_ENTRIES: usize = raw::wakelab_consts_WL_RING_ENTRIES as usize;

const WAKEUP_MSG_SIZE: usize = size_of::<raw::wakeup_msg>();
const DECISION_MSG_SIZE: usize = size_of::<raw::decision_msg>();

/// What ops.select_cpu() recorded on the waker's CPU.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Waker {
    pub cpu: usize,
    pub pid: u32,
    pub context: WakerContext,
    /// The waker had PF_EXITING set (fair.c ignores a sync hint then).
    pub exiting: bool,
    /// The waker is a per-CPU kthread.
    pub per_cpu_kthread: bool,
    /// Tasks runnable on the waker's CPU at that moment, and its
    /// rq->ttwu_pending: fair.c's sync test is about that moment.
    pub nr_runnable: u32,
    pub ttwu_pending: bool,
    /// SCX_WAKE_* as given to ops.select_cpu().
    pub wake_flags: u64,
    /// When ops.select_cpu() ran (rq clock).
    pub select_ns: u64,
    /// The waker's load average, the state estimator's (bpf/estimator.bpf.c).
    pub est_load: u64,
}

/// A task that needs a placement decision.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Wakeup {
    pub pid: u32,
    /// The task's CPU at enqueue time, and the prev_cpu of ops.select_cpu().
    pub task_cpu: usize,
    pub prev_cpu: usize,
    /// SCX_ENQ_WAKEUP was set: a wake-up, not a requeue.
    pub is_wakeup: bool,
    /// Set when ops.select_cpu() ran for this enqueue.
    pub waker: Option<Waker>,
    /// Generation: the decision echoes it, BPF drops stale ones.
    pub enq_cnt: u64,
    /// When ops.enqueue() queued it (rq clock), and the same on CLOCK_MONOTONIC.
    pub enqueue_ns: u64,
    pub enqueue_mono_ns: u64,
    /// p->scx.weight (100 = nice 0).
    pub weight: u64,
    /// The state estimator's load_avg and util_avg of the task as it went to sleep
    /// (bpf/estimator.bpf.c).
    pub est_load: u64,
    pub est_util: u32,
    /// ns run since the task last went to sleep.
    pub exec_runtime_ns: u64,
    /// CPUs the task may run on.
    pub allowed: CpuSet,
    /// Sent from ops.select_cpu() with this handoff slot (see `try_handoff`);
    /// 0 when sent from ops.enqueue().
    pub handoff_seq: u64,
}

/// A task went to sleep (sent while the agent asks for them).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Sleep {
    pub pid: u32,
    pub cpu: usize,
    /// ns it ran in the period that just ended.
    pub ran_ns: u64,
    /// When (rq clock).
    pub at_ns: u64,
}

// Messages live in one Vec the agent reuses batch after batch; boxing the
// wake-up would allocate once per wake-up instead.
#[allow(clippy::large_enum_variant)]
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Message {
    Wakeup(Wakeup),
    Sleep(Sleep),
}

impl Message {
    /// When BPF sent it (the rq clock, scx_bpf_now()): a wake-up when it was
    /// queued to the agent, a sleep when it was reported.
    pub fn at_ns(&self) -> u64 {
        match self {
            Message::Wakeup(w) => w.enqueue_ns,
            Message::Sleep(s) => s.at_ns,
        }
    }

    /// One record of the wakeups ring; None if it is too short to be one.
    pub fn parse(data: &[u8]) -> Option<Message> {
        if data.len() < WAKEUP_MSG_SIZE {
            return None;
        }
        // SAFETY: the record is a struct wakeup_msg written by BPF; it is
        // plain integers, read unaligned into our own copy.
        let m = unsafe { std::ptr::read_unaligned(data.as_ptr() as *const raw::wakeup_msg) };
        Some(Message::from_raw(&m))
    }

    fn from_raw(m: &raw::wakeup_msg) -> Message {
        let cpu = |c: i32| c.max(0) as usize;
        if m.kind == raw::wakeup_msg_kind_WL_MSG_SLEEP {
            return Message::Sleep(Sleep {
                pid: m.pid as u32,
                cpu: cpu(m.task_cpu),
                ran_ns: m.exec_runtime,
                at_ns: m.enqueue_ns,
            });
        }
        let has = |flag: u32| m.flags & flag != 0;
        let selected = has(raw::wakeup_msg_flags_WL_MSG_SELECTED);
        let waker = selected.then(|| Waker {
            cpu: cpu(m.waker_cpu),
            pid: m.waker_pid as u32,
            context: match m.waker_context {
                raw::waker_context_WAKER_SOFTIRQ => WakerContext::Softirq,
                raw::waker_context_WAKER_HARDIRQ | raw::waker_context_WAKER_NMI => {
                    WakerContext::Hardirq
                }
                _ => WakerContext::Task,
            },
            exiting: has(raw::wakeup_msg_flags_WL_MSG_WAKER_EXITING),
            per_cpu_kthread: has(raw::wakeup_msg_flags_WL_MSG_WAKER_PCPU_KTHREAD),
            nr_runnable: m.waker_nr_runnable,
            est_load: m.waker_est_load_avg,
            ttwu_pending: m.waker_ttwu_pending != 0,
            wake_flags: m.wake_flags,
            select_ns: m.select_ns,
        });
        // Bits past the kernel's nr_cpu_ids may be whatever followed the
        // mask in memory: the placer keeps only the CPUs it knows.
        let allowed = if has(raw::wakeup_msg_flags_WL_MSG_ALL_CPUS) {
            CpuSet::first_n(scx_wakelab::policy::MAX_CPUS)
        } else {
            CpuSet::from_words(&m.cpus_allowed)
        };
        Message::Wakeup(Wakeup {
            pid: m.pid as u32,
            task_cpu: cpu(m.task_cpu),
            prev_cpu: cpu(m.prev_cpu),
            is_wakeup: has(raw::wakeup_msg_flags_WL_MSG_WAKEUP),
            waker,
            enq_cnt: m.enq_cnt,
            enqueue_ns: m.enqueue_ns,
            enqueue_mono_ns: m.enqueue_mono_ns,
            weight: m.weight,
            est_load: m.est_load_avg,
            est_util: util_u32(m.est_util_avg),
            exec_runtime_ns: m.exec_runtime,
            allowed,
            handoff_seq: if has(raw::wakeup_msg_flags_WL_MSG_HANDOFF) {
                m.handoff_seq
            } else {
                0
            },
        })
    }
}

/// Where the agent puts a task.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Decision {
    pub pid: u32,
    /// None: any CPU (the fallback queue).
    pub cpu: Option<usize>,
    pub enq_cnt: u64,
    pub enqueue_ns: u64,
    /// CLOCK_MONOTONIC when handed over (0 until then).
    pub committed_ns: u64,
}

impl Decision {
    pub fn for_wakeup(w: &Wakeup, cpu: usize) -> Decision {
        Decision {
            pid: w.pid,
            cpu: Some(cpu),
            enq_cnt: w.enq_cnt,
            enqueue_ns: w.enqueue_ns,
            committed_ns: 0,
        }
    }

    fn to_raw(self) -> raw::decision_msg {
        raw::decision_msg {
            pid: self.pid as i32,
            cpu: self
                .cpu
                .map_or(raw::wakelab_consts_WL_CPU_ANY, |c| c as i32),
            enq_cnt: self.enq_cnt,
            slice_ns: 0,
            enqueue_ns: self.enqueue_ns,
            committed_ns: self.committed_ns,
        }
    }
}

/// One CPU as BPF last described it (`struct cpu_state`), plus what the
/// shared per-CPU tables say of it.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct CpuReading {
    /// ops.update_idle() said idle.
    pub idle: bool,
    /// The task running there (0 = idle).
    pub curr_pid: i32,
    /// Our tasks there, running or queued (the agent not counted).
    pub nr_runnable: u32,
    pub ttwu_pending: bool,
    /// Tasks waiting in its DSQ.
    pub dsq_queued: u32,
    pub last_idle_ns: u64,
    /// When that idle period ended.
    pub last_idle_end_ns: u64,
    /// When the last task of ours stopped there (0 while one runs).
    pub free_since_ns: u64,
    /// Until when it waits for its own sync wakee (0: it does not).
    pub own_wakee_until_ns: u64,
    /// Decisions for it not carried out yet.
    pub inflight: u32,
    /// The state estimator's load_avg and util_avg of it (bpf/estimator.bpf.c).
    pub est_load_avg: u64,
    pub est_util_avg: u32,
}

/// A util average as the engine keeps it (0..=1024 in practice; saturated, not wrapped).
fn util_u32(v: u64) -> u32 {
    v.min(u64::from(u32::MAX)) as u32
}

macro_rules! vol {
    ($place:expr) => {
        // SAFETY: an aligned field of the mmap'ed .bss, written by BPF
        // concurrently; a volatile load of plain data.
        unsafe { std::ptr::read_volatile(&$place) }
    };
}

fn shared(b: &bss) -> &wl_shared {
    &b.wl_shared
}

/// Every CPU's reading, for the first `out.len()` CPUs (the tests' whole
/// read; the agent reads only what changed, `read_changed_cpus`).
#[cfg(test)]
pub fn read_cpus(b: &bss, out: &mut [CpuReading]) {
    let sh = shared(b);
    let nr = out.len().min(sh.cpu_state.len());
    for (cpu, r) in out.iter_mut().enumerate().take(nr) {
        *r = read_one(sh, cpu);
    }
}

/// One CPU's placement inputs; `cpu` is below `WL_MAX_CPUS`.
#[inline]
fn read_one(sh: &wl_shared, cpu: usize) -> CpuReading {
    let cs = &sh.cpu_state[cpu];
    CpuReading {
        idle: vol!(cs.idle) != 0,
        curr_pid: vol!(cs.curr_pid),
        // BPF's racing decrements may wrap it below zero for a moment.
        nr_runnable: Some(vol!(cs.nr_runnable))
            .filter(|&n| n <= i32::MAX as u32)
            .unwrap_or(0),
        ttwu_pending: vol!(cs.ttwu_pending) != 0,
        dsq_queued: vol!(cs.dsq_queued),
        last_idle_ns: vol!(cs.last_idle_ns),
        last_idle_end_ns: vol!(cs.last_idle_end_ns),
        free_since_ns: vol!(cs.free_since_ns),
        own_wakee_until_ns: vol!(sh.own_wakee_until[cpu]),
        inflight: vol!(sh.inflight[cpu]),
        est_load_avg: vol!(cs.est_load_avg),
        est_util_avg: util_u32(vol!(cs.est_util_avg)),
    }
}

/// How often a slot written while it was read is read again at once; past
/// that its bit stays set for the next call.
const REREADS: usize = 2;

/// The CPUs whose inputs changed since the last call (`wl_shared.cpu_changed`,
/// intf.h), read into `out` and pushed onto `changed` (a CPU may appear
/// twice). Each word of bits is taken with an atomic exchange (acquire)
/// before the slots it names are read; a slot BPF wrote meanwhile has its
/// bit set again, and is read again. The other entries of `out` keep what an
/// earlier call read: the caller keeps `out` from call to call.
pub fn read_changed_cpus(b: &mut bss, out: &mut [CpuReading], changed: &mut Vec<usize>) {
    let nr = out.len().min(b.wl_shared.cpu_state.len());
    for w in 0..nr.div_ceil(64).min(b.wl_shared.cpu_changed.len()) {
        let word = changed_word(b, w);
        // A plain load first: most words are clear, and an exchange is a
        // locked instruction. A bit set just after it is read next time.
        if word.load(Ordering::Relaxed) == 0 {
            continue;
        }
        let mut bits = word.swap(0, Ordering::Acquire);
        for pass in 0..=REREADS {
            let taken = bits;
            while bits != 0 {
                let cpu = w * 64 + bits.trailing_zeros() as usize;
                bits &= bits - 1;
                if cpu < nr {
                    out[cpu] = read_one(shared(b), cpu);
                    changed.push(cpu);
                }
            }
            if pass == REREADS || word.load(Ordering::Relaxed) & taken == 0 {
                break;
            }
            bits = word.fetch_and(!taken, Ordering::Acquire) & taken;
        }
    }
}

/// Word `w` of `wl_shared.cpu_changed`, shared with BPF's atomic ORs. Not
/// tied to the borrow of `b`: the slots are read while the word is held, as
/// BPF writes both all along.
fn changed_word<'a>(b: &mut bss, w: usize) -> &'a AtomicU64 {
    let slot = std::ptr::addr_of_mut!(b.wl_shared.cpu_changed[w].bits);
    // SAFETY: BPF sets bits with atomic ORs, so the agent's accesses must be
    // atomic too; the .bss mapping keeps the u64 8-byte aligned and lives as
    // long as the skeleton, which outlives every reader.
    unsafe { AtomicU64::from_ptr(slot) }
}

/// Mark `cpu`'s inputs changed, after the agent changed one of them.
fn note_cpu_changed(b: &mut bss, cpu: usize) {
    if cpu / 64 < b.wl_shared.cpu_changed.len() {
        changed_word(b, cpu / 64).fetch_or(1 << (cpu % 64), Ordering::Release);
    }
}

/// Messages BPF has submitted to the wakeups ring so far.
pub fn ring_msgs(b: &bss) -> u64 {
    vol!(shared(b).nr_ring_msgs)
}

/// Wake-ups submitted to the wakeups ring so far (sleep reports not counted).
pub fn ring_wakeups(b: &bss) -> u64 {
    vol!(shared(b).nr_ring_wakeups)
}

/// The agent read `msgs` more messages, `wakeups` of them wake-ups, and holds their
/// decisions until it hands them over: `holding` of them in all (see `agent_holding` in
/// intf.h), published before the ring's progress so that BPF never sees the wake-ups
/// consumed and not held.
pub fn note_consumed(b: &mut bss, msgs: u64, wakeups: u64, holding: u64) {
    set_holding(b, holding);
    std::sync::atomic::compiler_fence(std::sync::atomic::Ordering::SeqCst);
    let sh = &mut b.wl_shared;
    sh.agent_consumed += msgs;
    sh.agent_consumed_wakeups += wakeups;
}

/// Wake-ups the agent holds whose decisions BPF does not have yet.
pub fn set_holding(b: &mut bss, n: u64) {
    // SAFETY: a plain u64 of the mapped .bss; volatile so that the store is neither
    // dropped nor moved across the fences around it.
    unsafe { std::ptr::write_volatile(&mut b.wl_shared.agent_holding, n) };
}

/// Decisions recorded in BPF and not carried out yet.
pub fn decisions_pending(b: &bss) -> u64 {
    vol!(shared(b).decisions_pending)
}

/// One more decision on its way to `cpu`.
pub fn add_inflight(b: &mut bss, cpu: usize) {
    if let Some(slot) = b.wl_shared.inflight.get_mut(cpu) {
        // SAFETY: BPF subtracts from this u32 with atomic operations, so
        // ours must be atomic too; the .bss mapping keeps it 4-byte aligned.
        unsafe { AtomicU32::from_ptr(slot as *mut u32) }.fetch_add(1, Ordering::Relaxed);
        note_cpu_changed(b, cpu);
    }
}

/// A handoff slot's word (intf.h: `wl_shared.handoff`).
fn handoff_word(seq: u64, cpu: usize, state: u32) -> u64 {
    (seq << raw::WL_HANDOFF_SEQ_SHIFT) | ((cpu as u64) << raw::WL_HANDOFF_CPU_SHIFT) | state as u64
}

/// Hand the decision for wake-up `seq` (a WL_MSG_HANDOFF message) to its
/// ops.enqueue() through the handoff slot, `committed_ns` stamped: true if
/// the enqueue has not run yet and will carry it out, false if the task is
/// parked already (or the slot went to another wake-up), when the decision
/// goes to apply_decisions as any other. The caller has counted the
/// decision in `inflight` (add_inflight); a slot taken holds that count.
pub fn try_handoff(b: &mut bss, seq: u64, cpu: usize, committed_ns: u64) -> bool {
    let n = b.wl_shared.handoff.len();
    if seq == 0 || cpu >= raw::wakelab_consts_WL_MAX_CPUS as usize {
        return false;
    }
    let slot = &mut b.wl_shared.handoff[seq as usize & (n - 1)];
    // SAFETY: a plain u64 of the mapped .bss, read by BPF only once the
    // compare-and-swap below has published the slot as DECIDED.
    unsafe { std::ptr::write_volatile(&mut slot.committed_ns, committed_ns) };
    let waiting = handoff_word(seq, 0, raw::wl_handoff_state_WL_HANDOFF_WAITING);
    let decided = handoff_word(seq, cpu, raw::wl_handoff_state_WL_HANDOFF_DECIDED);
    // SAFETY: BPF changes this word only with atomic operations, so ours is
    // atomic too; the .bss mapping keeps it 8-byte aligned. SeqCst orders
    // the committed_ns store before it.
    unsafe { AtomicU64::from_ptr(&mut slot.word as *mut u64) }
        .compare_exchange(waiting, decided, Ordering::SeqCst, Ordering::Relaxed)
        .is_ok()
}

/// A task waits for the agent's own CPU.
pub fn yield_requested(b: &bss) -> bool {
    vol!(shared(b).agent_yield_request) != 0
}

/// A task waits for the agent's own CPU: take the request (clearing it).
pub fn take_yield_request(b: &mut bss) -> bool {
    let slot = &mut b.wl_shared.agent_yield_request;
    if vol!(*slot) == 0 {
        return false;
    }
    // SAFETY: a plain store to the mmap'ed .bss; BPF only ever sets it.
    unsafe { std::ptr::write_volatile(slot as *mut u32, 0) };
    true
}

/// Set once before attach: each CPU's LLC and node, its place in the sched domains as the
/// newly-idle rule reads it (bpf/newidle_rule.h), and the agent's home CPU.
pub fn set_topology(
    b: &mut bss,
    llc_node: &[(u32, u32)],
    rule: &[RuleCpuTopology],
    home_cpu: Option<usize>,
) {
    let sh = &mut b.wl_shared;
    for (cpu, &(llc, node)) in llc_node.iter().enumerate().take(sh.cpu_llc.len()) {
        sh.cpu_llc[cpu] = llc;
        sh.cpu_node[cpu] = node;
    }
    for (slot, t) in sh.cpu_topo.iter_mut().zip(rule) {
        slot.online = t.online as u32;
        slot.levels = t.levels;
        slot.first = t.first;
        slot.imb_numa_nr = t.imb_numa_nr;
        slot.capacity = t.capacity;
    }
    sh.agent_home_cpu = home_cpu.map_or(raw::wakelab_consts_WL_NO_HOME_CPU, |c| c as i32);
}

/// The parts of the policy BPF carries out itself: sleep reports, and the newly-idle pull
/// with the rule it follows.
pub fn set_policy(b: &mut bss, report_sleeps: bool, newidle_pull: bool, rule: &RuleConfig) {
    let sh = &mut b.wl_shared;
    sh.report_sleeps = report_sleeps as u32;
    sh.newidle_pull = newidle_pull as u32;
    let r = &mut sh.newidle_rule;
    r.skip_pending = rule.skip_pending as u32;
    r.numa_imb_nr = rule.numa_imb_nr as u32;
    r.imbalance_pct_smt = rule.imbalance_pct_smt;
    r.imbalance_pct_llc = rule.imbalance_pct_llc;
    r.is_numa = rule.is_numa as u32;
    r.avg_idle_min_ns = rule.avg_idle_min_ns;
}

/// BPF's counters and histograms into `m` (bpf/counters.bpf.h documents each).
pub fn read_counters(b: &bss, m: &mut LiveMetrics) {
    // Every counter stats.rs lists under `bpf`, by the same name in .bss.
    macro_rules! rd {
        (agent: { $($a:ident : $ad:tt,)* } bpf: { $($f:ident : $fd:tt,)* }) => {
            $( m.$f = vol!(b.$f); )*
        };
    }
    with_counters!(rd);
    // Kept once, in the ring's progress counters (intf.h).
    m.nr_queued_to_agent = ring_wakeups(b);
    m.enqueue_to_run_hist.resize(LAT_BUCKETS, 0);
    for (i, v) in m.enqueue_to_run_hist.iter_mut().enumerate() {
        *v = vol!(b.enqueue_to_run_hist[i]);
    }
    m.hop_hist.resize(HOPS.len(), Hist::default());
    for (hop, row) in m.hop_hist.iter_mut().enumerate() {
        row.resize(LAT_BUCKETS, 0);
        if hop == HOP_ENQUEUE_READ || hop == HOP_READ_COMMIT {
            continue; // the agent's own rows
        }
        for (i, v) in row.iter_mut().enumerate() {
            *v = vol!(b.hop_hist[hop][i]);
        }
    }
}

/// The wakeups ring (BPF -> agent), read through its memory mapping.
pub struct WakeupRing {
    ring: libbpf_rs::RingBuffer<'static>,
    inbox: Rc<RefCell<Vec<Message>>>,
}

impl WakeupRing {
    pub fn new(map: &libbpf_rs::MapMut) -> Result<WakeupRing> {
        let inbox: Rc<RefCell<Vec<Message>>> = Rc::new(RefCell::new(Vec::with_capacity(APPLY_MAX)));
        let sink = inbox.clone();
        let mut rbb = libbpf_rs::RingBufferBuilder::new();
        rbb.add(map, move |data: &[u8]| {
            if let Some(msg) = Message::parse(data) {
                sink.borrow_mut().push(msg);
            }
            0
        })?;
        Ok(WakeupRing {
            ring: rbb.build()?,
            inbox,
        })
    }

    /// Read up to `max` messages into `out` (emptied first); no syscall.
    pub fn consume(&mut self, max: usize, out: &mut Vec<Message>) -> Result<()> {
        out.clear();
        std::mem::swap(&mut *self.inbox.borrow_mut(), out);
        let n = self.ring.consume_raw_n(max);
        std::mem::swap(&mut *self.inbox.borrow_mut(), out);
        if n < 0 {
            return Err(anyhow!("consuming the wakeup ring failed: {n}"));
        }
        Ok(())
    }
}

/// The fallback transport: the decisions user ring (agent -> BPF), drained
/// by BPF when the agent yields.
pub struct DecisionRing(libbpf_rs::UserRingBuffer);

impl DecisionRing {
    pub fn new(map: &libbpf_rs::MapMut) -> Result<DecisionRing> {
        Ok(DecisionRing(libbpf_rs::UserRingBuffer::new(map)?))
    }

    /// Hand one decision over; false when the ring has no room.
    pub fn submit(&mut self, d: &Decision) -> bool {
        let Ok(mut sample) = self.0.reserve(DECISION_MSG_SIZE) else {
            return false;
        };
        let buf = sample.as_mut();
        // SAFETY: the sample is DECISION_MSG_SIZE bytes, reserved for us.
        unsafe {
            std::ptr::write_unaligned(buf.as_mut_ptr() as *mut raw::decision_msg, d.to_raw())
        };
        self.0.submit(sample).is_ok()
    }
}

/// The fast lane: write `batch` (at most APPLY_MAX) into the shared slots
/// and run the apply_decisions program, which moves each decided task onto
/// its CPU before it returns.
pub fn apply(prog: &libbpf_rs::ProgramMut, b: &mut bss, batch: &[Decision]) -> Result<()> {
    apply_with(prog, b, batch, 0)
}

/// Test aid (--debug-half-apply): record `batch` in BPF, move nothing.
pub fn record_only(prog: &libbpf_rs::ProgramMut, b: &mut bss, batch: &[Decision]) -> Result<()> {
    apply_with(prog, b, batch, raw::wl_apply_flags_WL_APPLY_RECORD_ONLY)
}

fn apply_with(
    prog: &libbpf_rs::ProgramMut,
    b: &mut bss,
    batch: &[Decision],
    flags: u32,
) -> Result<()> {
    let n = batch.len().min(APPLY_MAX);
    for (slot, d) in b.wl_shared.apply_slots.iter_mut().zip(&batch[..n]) {
        let r = d.to_raw();
        // The skeleton's copy of struct decision_msg (the same C type).
        *slot = super::bpf_skel::types::decision_msg {
            pid: r.pid,
            cpu: r.cpu,
            enq_cnt: r.enq_cnt,
            slice_ns: r.slice_ns,
            enqueue_ns: r.enqueue_ns,
            committed_ns: r.committed_ns,
        };
    }
    let mut args = raw::apply_args {
        nr: n as u32,
        flags,
    };
    // SAFETY: apply_args is plain integers; viewed as its bytes for ctx_in
    // (the kernel copies them in, and back out).
    let ctx = unsafe {
        std::slice::from_raw_parts_mut(
            &mut args as *mut raw::apply_args as *mut u8,
            size_of::<raw::apply_args>(),
        )
    };
    let input = libbpf_rs::ProgramInput {
        context_in: Some(ctx),
        ..Default::default()
    };
    prog.test_run(input).context("running apply_decisions")?;
    Ok(())
}

/// BPF's half, played on the host for tests and benchmarks that run without a
/// kernel: a `.bss` as mapped at load, the CPU states BPF keeps in it, and
/// the wakeups ring's records as bpf/wakeups.bpf.c fills them. The agent's
/// own readers (`read_cpus`, `Message::parse`) then read them as they read
/// BPF's.
#[cfg(test)]
pub mod as_bpf {
    use super::*;

    /// A .bss as mapped at load: all zero. On the heap: its per-CPU arrays
    /// make it too big for a test thread's stack.
    pub fn zeroed_bss() -> Box<bss> {
        // SAFETY: the .bss is plain integers (and one pointer BPF alone
        // uses), and BPF sees it zeroed at load.
        unsafe { Box::<bss>::new_zeroed().assume_init() }
    }

    /// Every CPU's state as BPF would have left it for `readings` to be
    /// what `read_cpus` reads, each CPU that differs from what was there
    /// marked changed as BPF marks it; the fields no reading carries are
    /// left alone.
    pub fn write_cpus(b: &mut bss, readings: &[CpuReading]) {
        let sh = &mut b.wl_shared;
        for (cpu, r) in readings.iter().enumerate().take(sh.cpu_state.len()) {
            if read_one(sh, cpu) == *r {
                continue;
            }
            sh.cpu_changed[cpu / 64].bits |= 1 << (cpu % 64);
            let cs = &mut sh.cpu_state[cpu];
            cs.idle = r.idle as u32;
            cs.curr_pid = r.curr_pid;
            cs.nr_runnable = r.nr_runnable;
            cs.ttwu_pending = r.ttwu_pending as u32;
            cs.dsq_queued = r.dsq_queued;
            cs.last_idle_ns = r.last_idle_ns;
            cs.last_idle_end_ns = r.last_idle_end_ns;
            cs.free_since_ns = r.free_since_ns;
            sh.own_wakee_until[cpu] = r.own_wakee_until_ns;
            sh.inflight[cpu] = r.inflight;
            cs.est_load_avg = r.est_load_avg;
            cs.est_util_avg = u64::from(r.est_util_avg);
        }
    }

    /// The ring record BPF sends for `m` on a machine of `nr_cpu_ids` CPUs:
    /// a task allowed on all of them carries WL_MSG_ALL_CPUS instead of its
    /// mask, and a wake-up without ops.select_cpu() no waker, as there.
    pub fn record(m: &Message, nr_cpu_ids: usize) -> raw::wakeup_msg {
        // SAFETY: all-zero is a valid wakeup_msg (BPF reserves it unzeroed,
        // but fills every field the agent reads).
        let mut r: raw::wakeup_msg = unsafe { std::mem::zeroed() };
        match m {
            Message::Sleep(s) => {
                r.kind = raw::wakeup_msg_kind_WL_MSG_SLEEP;
                r.pid = s.pid as i32;
                r.task_cpu = s.cpu as i32;
                r.exec_runtime = s.ran_ns;
                r.enqueue_ns = s.at_ns;
            }
            Message::Wakeup(w) => {
                r.kind = raw::wakeup_msg_kind_WL_MSG_ENQUEUE;
                r.pid = w.pid as i32;
                r.task_cpu = w.task_cpu as i32;
                r.prev_cpu = w.prev_cpu as i32;
                r.enq_cnt = w.enq_cnt;
                r.enqueue_ns = w.enqueue_ns;
                r.enqueue_mono_ns = w.enqueue_mono_ns;
                r.weight = w.weight;
                r.est_load_avg = w.est_load;
                r.est_util_avg = u64::from(w.est_util);
                r.exec_runtime = w.exec_runtime_ns;
                if w.is_wakeup {
                    r.flags |= raw::wakeup_msg_flags_WL_MSG_WAKEUP;
                }
                if w.handoff_seq != 0 {
                    r.flags |= raw::wakeup_msg_flags_WL_MSG_HANDOFF;
                    r.handoff_seq = w.handoff_seq;
                }
                r.waker_cpu = -1;
                if let Some(k) = &w.waker {
                    r.flags |= raw::wakeup_msg_flags_WL_MSG_SELECTED;
                    if k.exiting {
                        r.flags |= raw::wakeup_msg_flags_WL_MSG_WAKER_EXITING;
                    }
                    if k.per_cpu_kthread {
                        r.flags |= raw::wakeup_msg_flags_WL_MSG_WAKER_PCPU_KTHREAD;
                    }
                    r.waker_cpu = k.cpu as i32;
                    r.waker_pid = k.pid as i32;
                    r.waker_context = match k.context {
                        WakerContext::Task => raw::waker_context_WAKER_TASK,
                        WakerContext::Softirq => raw::waker_context_WAKER_SOFTIRQ,
                        WakerContext::Hardirq => raw::waker_context_WAKER_HARDIRQ,
                    };
                    r.waker_nr_runnable = k.nr_runnable;
                    r.waker_est_load_avg = k.est_load;
                    r.waker_ttwu_pending = k.ttwu_pending as u32;
                    r.wake_flags = k.wake_flags;
                    r.select_ns = k.select_ns;
                }
                r.nr_cpus_allowed = w.allowed.count() as u32;
                if CpuSet::first_n(nr_cpu_ids).is_subset_of(&w.allowed) {
                    r.flags |= raw::wakeup_msg_flags_WL_MSG_ALL_CPUS;
                } else {
                    for cpu in w.allowed.iter() {
                        r.cpus_allowed[cpu / 64] |= 1 << (cpu % 64);
                    }
                }
            }
        }
        r
    }

    /// A record as the ring hands it to its callback: its bytes.
    pub fn bytes_of(m: &raw::wakeup_msg) -> &[u8] {
        // SAFETY: wakeup_msg is plain integers; viewed as its bytes for as
        // long as it is borrowed.
        unsafe {
            std::slice::from_raw_parts(m as *const raw::wakeup_msg as *const u8, WAKEUP_MSG_SIZE)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::as_bpf::{bytes_of, record, write_cpus, zeroed_bss};
    use super::*;

    /// A record of `kind` for `pid` on `task_cpu`, every other field zero.
    fn msg(kind: u32, pid: i32, task_cpu: i32) -> raw::wakeup_msg {
        // SAFETY: all-zero is a valid wakeup_msg.
        let mut m: raw::wakeup_msg = unsafe { std::mem::zeroed() };
        m.kind = kind;
        m.pid = pid;
        m.task_cpu = task_cpu;
        m
    }

    fn parse_wakeup(m: &raw::wakeup_msg) -> Wakeup {
        match Message::parse(bytes_of(m)) {
            Some(Message::Wakeup(w)) => w,
            other => panic!("not a wake-up: {other:?}"),
        }
    }

    #[test]
    fn a_selected_wakeup_carries_its_waker() {
        let mut m = msg(raw::wakeup_msg_kind_WL_MSG_ENQUEUE, 42, 3);
        m.prev_cpu = 3;
        m.waker_cpu = 5;
        m.waker_pid = 7;
        m.waker_context = raw::waker_context_WAKER_SOFTIRQ;
        m.flags = raw::wakeup_msg_flags_WL_MSG_SELECTED | raw::wakeup_msg_flags_WL_MSG_WAKEUP;
        m.wake_flags = 0x18;
        m.cpus_allowed[0] = 0b1010;
        let w = parse_wakeup(&m);
        assert_eq!((w.pid, w.prev_cpu, w.is_wakeup), (42, 3, true));
        let waker = w.waker.expect("selected");
        assert_eq!(
            (waker.cpu, waker.pid, waker.context),
            (5, 7, WakerContext::Softirq)
        );
        assert_eq!(w.allowed.iter().collect::<Vec<_>>(), vec![1, 3]);
    }

    #[test]
    fn all_cpus_needs_no_mask_and_unselected_has_no_waker() {
        let mut m = msg(raw::wakeup_msg_kind_WL_MSG_ENQUEUE, 9, 0);
        m.flags = raw::wakeup_msg_flags_WL_MSG_ALL_CPUS;
        let w = parse_wakeup(&m);
        assert!(w.waker.is_none());
        assert!(!w.is_wakeup);
        assert!(w.allowed.contains(0) && w.allowed.contains(1023));
    }

    #[test]
    fn sleeps_and_short_records() {
        let mut m = msg(raw::wakeup_msg_kind_WL_MSG_SLEEP, 11, 2);
        m.exec_runtime = 5000;
        m.enqueue_ns = 77;
        assert_eq!(
            Message::parse(bytes_of(&m)),
            Some(Message::Sleep(Sleep {
                pid: 11,
                cpu: 2,
                ran_ns: 5000,
                at_ns: 77
            }))
        );
        // A negative CPU from BPF becomes 0, never a huge index.
        m.task_cpu = -1;
        let Some(Message::Sleep(s)) = Message::parse(bytes_of(&m)) else {
            panic!()
        };
        assert_eq!(s.cpu, 0);
        assert_eq!(Message::parse(&bytes_of(&m)[..10]), None);
    }

    fn slot_word(b: &bss, seq: u64) -> u64 {
        b.wl_shared.handoff[seq as usize % b.wl_shared.handoff.len()].word
    }

    fn set_slot(b: &mut bss, seq: u64, state: u32) {
        let n = b.wl_shared.handoff.len();
        b.wl_shared.handoff[seq as usize % n].word = handoff_word(seq, 0, state);
    }

    #[test]
    fn a_handoff_message_carries_its_slot_and_others_none() {
        let mut m = msg(raw::wakeup_msg_kind_WL_MSG_ENQUEUE, 5, 1);
        m.handoff_seq = 77;
        assert_eq!(parse_wakeup(&m).handoff_seq, 0, "no WL_MSG_HANDOFF flag");
        m.flags = raw::wakeup_msg_flags_WL_MSG_HANDOFF;
        assert_eq!(parse_wakeup(&m).handoff_seq, 77);
    }

    #[test]
    fn the_agent_takes_a_waiting_slot_for_its_wakeup_only() {
        let mut b = zeroed_bss();
        let waiting = raw::wl_handoff_state_WL_HANDOFF_WAITING;
        set_slot(&mut b, 3, waiting);
        assert!(try_handoff(&mut b, 3, 6, 1234));
        let w = slot_word(&b, 3);
        assert_eq!(
            w & raw::WL_HANDOFF_STATE_MASK as u64,
            raw::wl_handoff_state_WL_HANDOFF_DECIDED as u64
        );
        assert_eq!((w >> raw::WL_HANDOFF_CPU_SHIFT) & 0xffff, 6);
        assert_eq!(w >> raw::WL_HANDOFF_SEQ_SHIFT, 3);
        assert_eq!(b.wl_shared.handoff[3].committed_ns, 1234);
        // Decided once: a second decision for it does not overwrite the first.
        assert!(!try_handoff(&mut b, 3, 1, 1));
        assert_eq!(slot_word(&b, 3), w);
    }

    #[test]
    fn a_parked_task_or_a_reused_slot_makes_the_agent_apply_instead() {
        let mut b = zeroed_bss();
        let n = b.wl_shared.handoff.len() as u64;
        set_slot(&mut b, 9, raw::wl_handoff_state_WL_HANDOFF_PARKED);
        let parked = slot_word(&b, 9);
        assert!(!try_handoff(&mut b, 9, 2, 1));
        assert_eq!(slot_word(&b, 9), parked, "the enqueue's PARKED stays");
        // The slot went to a later wake-up: its WAITING is not ours.
        set_slot(&mut b, 10 + n, raw::wl_handoff_state_WL_HANDOFF_WAITING);
        let later = slot_word(&b, 10);
        assert!(!try_handoff(&mut b, 10, 2, 1));
        assert_eq!(slot_word(&b, 10), later);
        // A free slot (never claimed, or given up) is not taken either.
        assert!(!try_handoff(&mut b, 11, 2, 1));
        assert_eq!(slot_word(&b, 11), 0);
        // No slot, or a CPU the word cannot hold.
        assert!(!try_handoff(&mut b, 0, 2, 1));
        set_slot(&mut b, 12, raw::wl_handoff_state_WL_HANDOFF_WAITING);
        assert!(!try_handoff(
            &mut b,
            12,
            raw::wakelab_consts_WL_MAX_CPUS as usize,
            1
        ));
    }

    #[test]
    fn decisions_for_any_cpu_use_the_sentinel() {
        let d = Decision {
            pid: 1,
            cpu: None,
            enq_cnt: 4,
            enqueue_ns: 5,
            committed_ns: 6,
        };
        assert_eq!(d.to_raw().cpu, raw::wakelab_consts_WL_CPU_ANY);
        let d = Decision { cpu: Some(3), ..d };
        assert_eq!((d.to_raw().cpu, d.to_raw().enq_cnt), (3, 4));
    }

    /// The agent reads only the CPUs marked changed, each once, and leaves
    /// the others' readings as an earlier read left them; its own inflight
    /// add marks that CPU; nothing marked, nothing is read.
    #[test]
    fn only_the_cpus_marked_changed_are_read() {
        let mut b = zeroed_bss();
        let nr = 130; // three words of bits, the last partly used
        let mut readings = vec![CpuReading::default(); nr];
        for c in [0, 63, 64, 129] {
            readings[c].curr_pid = 1000 + c as i32;
        }
        write_cpus(&mut b, &readings);
        let (mut out, mut changed) = (vec![CpuReading::default(); nr], Vec::new());
        read_changed_cpus(&mut b, &mut out, &mut changed);
        assert_eq!(
            (out.clone(), changed.clone()),
            (readings.clone(), vec![0, 63, 64, 129])
        );
        // Read: the bits are clear.
        changed.clear();
        read_changed_cpus(&mut b, &mut out, &mut changed);
        assert!(changed.is_empty());
        // A CPU rewritten with what it holds is no change; another is.
        readings[5].est_util_avg = 300;
        write_cpus(&mut b, &readings);
        add_inflight(&mut b, 100);
        out[0].curr_pid = -1; // what the agent kept of CPU 0, not read again
        read_changed_cpus(&mut b, &mut out, &mut changed);
        assert_eq!(changed, vec![5, 100]);
        assert_eq!(
            (out[5].est_util_avg, out[100].inflight, out[0].curr_pid),
            (300, 1, -1)
        );
        // A CPU beyond what the agent reads is left marked, not read.
        let mut short = vec![CpuReading::default(); 64];
        readings[100].inflight = 1; // as the agent's add left it
        readings[70].idle = true;
        write_cpus(&mut b, &readings);
        changed.clear();
        read_changed_cpus(&mut b, &mut short, &mut changed);
        assert!(changed.is_empty());
        read_changed_cpus(&mut b, &mut out, &mut changed);
        assert_eq!(changed, vec![70]);
    }

    /// The benchmarks read what the host's stand-in for BPF wrote, through
    /// the agent's readers: they measure the real reads only if the stand-in
    /// writes exactly what the readers give back.
    #[test]
    fn the_hosts_bpf_writes_what_the_agent_reads() {
        let readings: Vec<CpuReading> = (0..5u32)
            .map(|c| CpuReading {
                idle: c % 2 == 0,
                curr_pid: c as i32 * 7,
                nr_runnable: c,
                ttwu_pending: c == 3,
                dsq_queued: c + 1,
                last_idle_ns: 10 + c as u64,
                last_idle_end_ns: 20 + c as u64,
                free_since_ns: 30 + c as u64,
                own_wakee_until_ns: 60 + c as u64,
                inflight: 2 * c,
                est_load_avg: 70 + c as u64,
                est_util_avg: 80 + c,
            })
            .collect();
        let mut b = zeroed_bss();
        write_cpus(&mut b, &readings);
        let mut back = vec![CpuReading::default(); readings.len()];
        read_cpus(&b, &mut back);
        assert_eq!(back, readings);

        let waker = Waker {
            cpu: 2,
            pid: 9,
            context: WakerContext::Hardirq,
            exiting: true,
            per_cpu_kthread: true,
            nr_runnable: 3,
            ttwu_pending: true,
            wake_flags: 0x18,
            select_ns: 1_000,
            est_load: 700,
        };
        let pinned = Wakeup {
            pid: 42,
            task_cpu: 1,
            prev_cpu: 3,
            is_wakeup: true,
            waker: Some(waker),
            enq_cnt: 5,
            enqueue_ns: 1_100,
            enqueue_mono_ns: 1_200,
            weight: 100,
            est_load: 512,
            est_util: 300,
            exec_runtime_ns: 300,
            allowed: CpuSet::from_cpus([1, 3, 70]),
            handoff_seq: 8,
        };
        let sleep = Message::Sleep(Sleep {
            pid: 4,
            cpu: 2,
            ran_ns: 9,
            at_ns: 10,
        });
        for m in [Message::Wakeup(pinned.clone()), sleep] {
            assert_eq!(Message::parse(bytes_of(&record(&m, 128))), Some(m));
        }
        // A task allowed everywhere travels as WL_MSG_ALL_CPUS: the agent
        // reads every CPU there may be, which the placer narrows to its own.
        let free = Wakeup {
            waker: None,
            allowed: CpuSet::first_n(128),
            ..pinned
        };
        let m = record(&Message::Wakeup(free.clone()), 128);
        assert_ne!(m.flags & raw::wakeup_msg_flags_WL_MSG_ALL_CPUS, 0);
        assert_eq!(
            parse_wakeup(&m),
            Wakeup {
                allowed: CpuSet::first_n(scx_wakelab::policy::MAX_CPUS),
                ..free
            }
        );
    }
}
