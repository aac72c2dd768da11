//! A driver for counting the agent's work per decision, the read of the CPU
//! states (`protocol::read_cpus`) plus `Placer::begin_batch` and
//! `Placer::place`, on the host (no BPF, no kernel): synthetic CPU states,
//! written into a .bss of the real layout, and wake-ups fed to a real
//! `Placer`, as `Agent::place` feeds it. `tools/bench/decision-cost` runs it
//! under callgrind, which counts only the calls of [`decide`]
//! (`--toggle-collect`), and divides by the decisions; docs/benchmarks/
//! decision-cost.md holds the numbers.
//!
//! `decision_rate` times the agent's work natively instead, from the wakeups
//! ring's records on (see [`agent_batch`]); `tools/bench/decision-rate` runs
//! it.
//!
//! All three run in `cargo test` with small defaults and check what a
//! measurement rests on; the tools run them bigger (400 batches for the
//! fingerprint):
//! - `decision_cost`: one workload on one machine, from the environment:
//!   `WAKELAB_COST_LOAD` (`pingpong` or `mixed`), `WAKELAB_COST_BATCH`
//!   (wake-ups a batch of the mixed load; unset: 1-4),
//!   `WAKELAB_COST_SHAPE` (`NODESxLLCSxCORESxTHREADS`), `WAKELAB_COST_PRESET`,
//!   `WAKELAB_COST_N` (wake-ups measured, after as many again unmeasured to
//!   warm up). It checks that every decision is an allowed CPU of the machine.
//! - `decision_fingerprint`: every workload on several machines and presets in
//!   trace mode, hashed: every decision's inputs as the engine saw them (the
//!   snapshot, the idle-core hints, task and waker), its rule chain and CPU,
//!   and the final counters. A change meant to make the agent cheaper must
//!   leave the printed hashes as they were: `fingerprint all` (five machines
//!   up to 256 CPUs, both loads, five presets) and `fingerprint scale all`
//!   (1024 CPUs, and the fixed batch sizes). It checks that each hash is the
//!   same on a second pass (no decision depends on anything but its inputs)
//!   and that trace mode, which copies the inputs, leaves every CPU as
//!   without it.
//! - `decision_rate`: one workload, chosen as for `decision_cost`; after
//!   `WAKELAB_COST_N` wake-ups of warm-up, batches timed until
//!   `WAKELAB_RATE_MS` of them is measured. It checks every decision as
//!   `decision_cost` does, and that the agent's counters saw every one.
//!
//! Workloads:
//! - `pingpong`: two tasks waking each other with sync wake-ups (a pipe),
//!   every batch a single wake-up (perf bench sched pipe, lat_ctx): the
//!   waker's CPU runs it, the agent polls on the last CPU, the rest are idle.
//!   The wakee's prev is wherever the placer put it last. Only the CPUs the
//!   two tasks run on change; an idle CPU keeps the util it went idle with,
//!   as the estimator publishes a CPU's averages at its own events.
//! - `mixed`: about two thirds of the CPUs busy with 1-3 tasks (some with a
//!   wake-up pending, decisions in flight or a CPU awaiting its own wakee),
//!   batches of 1-4 wake-ups of 200 tasks (or a fixed number, of different
//!   tasks), some pinned to a few CPUs, half sync, a quarter from softirq,
//!   and sleep reports that feed the delayed-dequeue emulation. A batch
//!   changes the CPUs the last batch's tasks went to, those its sleeps left
//!   and two more; `WAKELAB_COST_CHURN=all` draws every CPU anew each batch
//!   instead (the worst case for a reader that skips unchanged CPUs).

use std::hash::Hasher;
use std::sync::mpsc::sync_channel;
use std::time::{Duration, Instant};

use scx_wakelab::policy::rng::XorShift;
use scx_wakelab::policy::{Config, CpuSet, Topology, WakerContext};

use crate::live::agent::monotonic_ns;
use crate::live::bpf_intf as raw;
use crate::live::bpf_skel::types::bss;
use crate::live::placement::{Outcome, Placer};
use crate::live::protocol::as_bpf::{bytes_of, record, write_cpus, zeroed_bss};
use crate::live::protocol::{
    CpuReading, Decision, Message, Sleep, Waker, Wakeup, add_inflight, note_consumed,
    read_changed_cpus,
};
use crate::live::stats::{HOP_ENQUEUE_READ, HOP_READ_COMMIT, LiveMetrics};

const AGENT_PID: i32 = 1;
const SLICE_NS: u64 = 5_000_000;
/// Tasks of the mixed load.
const TASKS: usize = 200;

/// One batch as BPF leaves it for the agent: the CPU states (written into
/// the .bss before the agent reads them), when, the sleep reports and the
/// wake-ups read with them.
struct Batch {
    readings: Vec<CpuReading>,
    now_ns: u64,
    sleeps: Vec<Sleep>,
    wakeups: Vec<Wakeup>,
}

/// What the agent reads the CPUs from: the .bss BPF shares (the kernel maps
/// it; here a heap copy of the same type) and the readings it reads it into,
/// one per CPU and reused batch after batch, as `Agent::readings`.
struct Shared {
    bss: Box<bss>,
    readings: Vec<CpuReading>,
    /// The CPUs a batch read (`Agent::changed`).
    changed: Vec<usize>,
}

impl Shared {
    fn new(nr: usize) -> Self {
        Shared {
            bss: zeroed_bss(),
            readings: vec![CpuReading::default(); nr],
            changed: Vec::with_capacity(nr * 4),
        }
    }

    /// BPF's part, not measured: the CPU states of `b` into the .bss.
    fn publish(&mut self, b: &Batch) {
        write_cpus(&mut self.bss, &b.readings);
    }
}

/// What is measured: one batch, as `Agent::place` runs it, from the read of
/// the CPU states in the .bss (`read_cpus`) on. Never inlined, so that
/// callgrind can count exactly its calls (check `calls=` under it in the
/// callgrind file: one per measured batch).
#[inline(never)]
fn decide(p: &mut Placer, sh: &mut Shared, b: &Batch, out: &mut Vec<usize>) {
    batch(p, sh, b, out);
}

/// The batch itself, inlined into `decide` and into the uncounted warm-up
/// alike: a warm-up that called `decide`, or a function of its own the
/// compiler could merge with it, would be counted by callgrind too.
#[inline(always)]
fn batch(p: &mut Placer, sh: &mut Shared, b: &Batch, out: &mut Vec<usize>) {
    sh.changed.clear();
    read_changed_cpus(&mut sh.bss, &mut sh.readings, &mut sh.changed);
    p.begin_batch_changed(&sh.readings, &sh.changed, b.now_ns);
    for s in &b.sleeps {
        p.on_sleep(s);
    }
    for w in &b.wakeups {
        out.push(p.place(w).cpu);
    }
}

fn shape(s: &str) -> Topology {
    let d: Vec<usize> = s
        .split('x')
        .map(|v| v.parse().expect("shape: NODESxLLCSxCORESxTHREADS"))
        .collect();
    assert_eq!(d.len(), 4, "shape: NODESxLLCSxCORESxTHREADS");
    Topology::from_shape(d[0], d[1], d[2], d[3]).expect("shape")
}

fn wakeup(pid: u32, prev: usize, waker: Waker, allowed: CpuSet, at: u64) -> Wakeup {
    Wakeup {
        pid,
        task_cpu: prev,
        prev_cpu: prev,
        is_wakeup: true,
        waker: Some(waker),
        enq_cnt: 1,
        enqueue_ns: at,
        enqueue_mono_ns: at,
        weight: 100,
        est_load: 1024,
        est_util: 0,
        exec_runtime_ns: 0,
        allowed,
        handoff_seq: 0,
    }
}

/// A generator of batches that follows the placer's decisions (a wakee's
/// prev is where it was put), so that it must run in step with `decide`.
trait Load {
    fn next(&mut self) -> Batch;
    fn placed(&mut self, b: &Batch, cpus: &[usize]);
}

/// Two tasks waking each other over a pipe; see the module comment.
struct PingPong {
    nr: usize,
    now: u64,
    /// (pid, cpu) of the task running now and of the one asleep.
    running: (u32, usize),
    asleep: (u32, usize),
    /// Each CPU's util average as the estimator would have it (0..=1024).
    util: Vec<u32>,
    free_since: Vec<u64>,
    allowed: CpuSet,
}

impl PingPong {
    fn new(nr: usize) -> Self {
        PingPong {
            nr,
            now: 1_000_000_000,
            running: (100, 1 % nr),
            asleep: (101, 2 % nr),
            util: vec![0; nr],
            free_since: vec![999_000_000; nr],
            allowed: CpuSet::first_n(nr),
        }
    }
}

impl Load for PingPong {
    fn next(&mut self) -> Batch {
        // A round trip of a pipe: write, wake, read, about 10 us of run.
        self.now += 10_000;
        let (waker_pid, waker_cpu) = self.running;
        let agent_cpu = self.nr - 1;
        let readings = (0..self.nr)
            .map(|c| {
                let mut r = CpuReading {
                    idle: true,
                    free_since_ns: self.free_since[c],
                    last_idle_ns: 50_000,
                    last_idle_end_ns: self.free_since[c],
                    est_util_avg: self.util[c],
                    // What ran here is still in its load, as blocked load.
                    est_load_avg: u64::from(self.util[c]),
                    ..Default::default()
                };
                if c == agent_cpu {
                    r.idle = false;
                    r.curr_pid = AGENT_PID;
                }
                if c == waker_cpu {
                    r.idle = false;
                    r.curr_pid = waker_pid as i32;
                    r.nr_runnable = 1;
                    r.free_since_ns = 0;
                    r.est_load_avg = 1024;
                }
                r
            })
            .collect();
        let waker = Waker {
            cpu: waker_cpu,
            pid: waker_pid,
            context: WakerContext::Task,
            exiting: false,
            per_cpu_kthread: false,
            nr_runnable: 1,
            ttwu_pending: false,
            wake_flags: 0x08 | 0x10,
            select_ns: self.now - 2_000,
            est_load: 1024,
        };
        let (pid, prev) = self.asleep;
        Batch {
            readings,
            now_ns: self.now,
            sleeps: Vec::new(),
            wakeups: vec![wakeup(pid, prev, waker, self.allowed, self.now)],
        }
    }

    fn placed(&mut self, b: &Batch, cpus: &[usize]) {
        let (waker, wakee) = (self.running, self.asleep);
        // 10 us of every ~12 us: the waker's CPU's util climbs. The estimator
        // publishes a CPU's averages at that CPU's own events only
        // (bpf/estimator.bpf.c): an idle CPU keeps what it published as it
        // went idle until something runs there again.
        let u = &mut self.util[waker.1];
        *u += (1024 - *u) / 32;
        // The waker sleeps on its pipe, the wakee runs where it was put.
        self.free_since[waker.1] = b.now_ns + 1_000;
        self.running = (wakee.0, cpus[0]);
        self.asleep = waker;
    }
}

/// A busy machine; see the module comment.
struct Mixed {
    nr: usize,
    /// Wake-ups a batch: None draws 1-4 (the fingerprint's mix), Some(n)
    /// exactly n, of n different tasks.
    per_batch: Option<usize>,
    /// Every CPU drawn anew each batch (`WAKELAB_COST_CHURN=all`), where
    /// the load otherwise changes only the CPUs something happened on.
    churn_all: bool,
    now: u64,
    r: XorShift,
    prev: Vec<usize>,
    /// Each CPU as BPF last published it (empty before the first batch).
    cpus: Vec<CpuReading>,
    /// CPUs the last batch's wake-ups were placed on.
    placed: Vec<usize>,
}

impl Mixed {
    fn new(nr: usize, per_batch: Option<usize>, churn_all: bool) -> Self {
        assert!(
            per_batch.is_none_or(|n| (1..=TASKS / 2).contains(&n)),
            "mixed: 1 to {} wake-ups a batch",
            TASKS / 2
        );
        let mut r = XorShift::new(7);
        let prev = (0..TASKS).map(|_| r.below(nr as u64) as usize).collect();
        Mixed {
            nr,
            per_batch,
            churn_all,
            now: 1_000_000_000,
            r,
            prev,
            cpus: Vec::new(),
            placed: Vec::new(),
        }
    }

    /// CPU `c` as BPF would publish it after an event there at `now`.
    fn draw_cpu(r: &mut XorShift, c: usize, now: u64) -> CpuReading {
        let util = r.below(1025) as u32;
        let mut s = CpuReading {
            idle: true,
            last_idle_ns: r.below(2_000_000),
            last_idle_end_ns: now.saturating_sub(r.below(10_000_000)),
            free_since_ns: now.saturating_sub(r.below(400_000)) + r.below(50_000),
            est_util_avg: util,
            est_load_avg: u64::from(util / 2),
            own_wakee_until_ns: if r.chance(5) { now + 100_000 } else { 0 },
            ttwu_pending: r.chance(5),
            inflight: r.chance(5) as u32,
            ..Default::default()
        };
        if r.chance(65) {
            s.idle = false;
            s.curr_pid = 5_000 + c as i32;
            s.nr_runnable = 1 + r.below(3) as u32;
            s.dsq_queued = s.nr_runnable - 1;
            s.free_since_ns = 0;
            s.est_load_avg = u64::from(s.nr_runnable) * 1024 - r.below(512);
        }
        s
    }
}

impl Load for Mixed {
    fn next(&mut self) -> Batch {
        let r = &mut self.r;
        self.now += 5_000 + r.below(200_000);
        let now = self.now;
        let sleeps: Vec<Sleep> = (0..r.below(3))
            .map(|_| Sleep {
                pid: r.below(TASKS as u64) as u32 + 10,
                cpu: r.below(self.nr as u64) as usize,
                ran_ns: r.below(2 * SLICE_NS),
                at_ns: now - r.below(5_000),
            })
            .collect();
        // What changed since the last batch: the CPUs its wake-ups went to
        // (their tasks run there now), those the sleeps left, and two more
        // (elsewhere tasks start, stop and tick); at first, or with
        // churn_all, every CPU.
        if self.cpus.is_empty() || self.churn_all {
            self.cpus = (0..self.nr).map(|c| Self::draw_cpu(r, c, now)).collect();
        } else {
            let others = [
                r.below(self.nr as u64) as usize,
                r.below(self.nr as u64) as usize,
            ];
            let changed = (self.placed.iter().copied())
                .chain(sleeps.iter().map(|s| s.cpu))
                .chain(others);
            for c in changed {
                self.cpus[c] = Self::draw_cpu(r, c, now);
            }
        }
        let readings = self.cpus.clone();
        let nr_wakeups = match self.per_batch {
            Some(n) => n as u64,
            None => 1 + r.below(4),
        };
        let mut woken = Vec::new();
        let wakeups = (0..nr_wakeups)
            .map(|_| {
                let mut i = r.below(TASKS as u64) as usize;
                if self.per_batch.is_some() {
                    // A task wakes once until it has run: not twice a batch.
                    while woken.contains(&i) {
                        i = r.below(TASKS as u64) as usize;
                    }
                    woken.push(i);
                }
                let waker_cpu = r.below(self.nr as u64) as usize;
                let waker = Waker {
                    cpu: waker_cpu,
                    pid: if r.chance(90) {
                        r.below(TASKS as u64) as u32 + 10
                    } else {
                        0
                    },
                    context: if r.chance(25) {
                        WakerContext::Softirq
                    } else {
                        WakerContext::Task
                    },
                    exiting: r.chance(2),
                    per_cpu_kthread: r.chance(5),
                    nr_runnable: r.below(3) as u32,
                    ttwu_pending: r.chance(5),
                    wake_flags: 0x08 | if r.chance(50) { 0x10 } else { 0 },
                    select_ns: now - r.below(300_000),
                    est_load: 1024,
                };
                let allowed = if r.chance(10) {
                    let lo = r.below(self.nr as u64) as usize;
                    CpuSet::from_cpus([lo, (lo + 1) % self.nr, (lo + 3) % self.nr])
                } else {
                    CpuSet::first_n(self.nr)
                };
                let mut w = wakeup(i as u32 + 10, self.prev[i], waker, allowed, now);
                if r.chance(3) {
                    // A pinned task's wake-up: no ops.select_cpu().
                    w.waker = None;
                }
                w
            })
            .collect();
        Batch {
            readings,
            now_ns: now,
            sleeps,
            wakeups,
        }
    }

    fn placed(&mut self, b: &Batch, cpus: &[usize]) {
        for (w, &c) in b.wakeups.iter().zip(cpus) {
            self.prev[(w.pid - 10) as usize] = c;
        }
        self.placed.clear();
        self.placed.extend_from_slice(cpus);
    }
}

/// `per_batch`: wake-ups a batch, when fixed (ping-pong's is always 1).
fn load(name: &str, nr: usize, per_batch: Option<usize>) -> Box<dyn Load> {
    match name {
        "pingpong" => {
            assert!(
                per_batch.is_none_or(|n| n == 1),
                "pingpong: one wake-up a batch"
            );
            Box::new(PingPong::new(nr))
        }
        "mixed" => Box::new(Mixed::new(nr, per_batch, churn_all_from_env())),
        other => panic!("unknown load {other}: pingpong or mixed"),
    }
}

fn placer(topo: Topology, preset: &str) -> Placer {
    let mut p = Placer::new(
        topo,
        Config::from_preset(preset).expect("preset"),
        AGENT_PID,
        SLICE_NS,
        crate::live::placement::DEFAULT_TASK_TABLE,
    )
    .expect("placer");
    // --agent-spin-us defaults to 50: the agent polls after a batch.
    p.set_agent_spins(true);
    p
}

fn env(key: &str, default: &str) -> String {
    std::env::var(key).unwrap_or_else(|_| default.to_string())
}

/// One measurement as the WAKELAB_COST_* variables choose it: the load, the
/// machine, the preset, `n` wake-ups, and what runs it.
struct Measured {
    run: Run,
    p: Placer,
    sh: Shared,
    work: Box<dyn Load>,
}

/// What a measured run is, as its result line names it.
struct Run {
    load_name: String,
    preset: String,
    /// Wake-ups measured (decision_cost) or warmed up with (decision_rate).
    n: usize,
    per_batch: Option<usize>,
    nr: usize,
    online: CpuSet,
}

impl Run {
    fn label(&self) -> String {
        format!(
            "load={} batch={} cpus={} preset={}",
            self.load_name,
            batch_label(&self.load_name, self.per_batch),
            self.nr,
            self.preset
        )
    }
}

/// Every decision of batch `b` is an online CPU its task may run on.
fn assert_allowed(load_name: &str, online: &CpuSet, b: &Batch, out: &[usize]) {
    for (w, &c) in b.wakeups.iter().zip(out) {
        assert!(
            online.contains(c) && w.allowed.contains(c),
            "{load_name}: pid {} placed on CPU {c}, not an allowed online CPU",
            w.pid
        );
    }
}

fn measured_from_env() -> Measured {
    let load_name = env("WAKELAB_COST_LOAD", "pingpong");
    let topo = shape(&env("WAKELAB_COST_SHAPE", "2x1x2x2"));
    let preset = env("WAKELAB_COST_PRESET", "mainline");
    let n: usize = env("WAKELAB_COST_N", "200")
        .parse()
        .expect("WAKELAB_COST_N");
    let per_batch = per_batch_from_env();
    let nr = topo.nr_cpus();
    let online = *topo.online();
    let p = placer(topo, &preset);
    let work = load(&load_name, nr, per_batch);
    Measured {
        run: Run {
            load_name,
            preset,
            n,
            per_batch,
            nr,
            online,
        },
        p,
        sh: Shared::new(nr),
        work,
    }
}

#[test]
fn decision_cost() {
    let Measured {
        run,
        mut p,
        mut sh,
        mut work,
    } = measured_from_env();
    let mut out = Vec::with_capacity(64);
    let mut fnv = Fnv::default();
    let (mut decisions, mut batches) = (0usize, 0usize);
    // Warm up with as many wake-ups as are measured: the task table filled,
    // the utilisation averages settled, the generator's tasks spread.
    for measured in [false, true] {
        let mut done = 0;
        while done < run.n {
            let b = work.next();
            out.clear();
            sh.publish(&b);
            if measured {
                decide(&mut p, &mut sh, &b, &mut out);
                batches += 1;
            } else {
                batch(&mut p, &mut sh, &b, &mut out);
            }
            assert_allowed(&run.load_name, &run.online, &b, &out);
            work.placed(&b, &out);
            done += out.len();
            for &c in &out {
                fnv.write_u64(c as u64);
            }
        }
        if measured {
            decisions = done;
        }
    }
    println!(
        "decision_cost {} batches={batches} decisions={decisions} cpus_hash={:016x}",
        run.label(),
        fnv.finish()
    );
}

/// `WAKELAB_COST_CHURN=all`: the mixed load draws every CPU anew each batch
/// (unset or `events`: only the CPUs something happened on).
fn churn_all_from_env() -> bool {
    match env("WAKELAB_COST_CHURN", "events").as_str() {
        "all" => true,
        "events" | "" => false,
        other => panic!("WAKELAB_COST_CHURN: events or all, not {other}"),
    }
}

/// `WAKELAB_COST_BATCH`: wake-ups a batch of the mixed load (unset or
/// empty: 1-4, drawn).
fn per_batch_from_env() -> Option<usize> {
    let v = env("WAKELAB_COST_BATCH", "");
    (!v.is_empty()).then(|| v.parse().expect("WAKELAB_COST_BATCH: a number"))
}

/// Wake-ups a batch, as the tables print it.
fn batch_label(load_name: &str, per_batch: Option<usize>) -> String {
    match (load_name, per_batch) {
        (_, Some(n)) => n.to_string(),
        ("pingpong", None) => "1".to_string(),
        (_, None) => "1-4".to_string(),
    }
}

/// What the agent keeps from batch to batch (`Agent::inbox`, `batch`,
/// `local`): reused, so that no batch allocates.
#[derive(Default)]
struct AgentKeeps {
    inbox: Vec<Message>,
    decisions: Vec<Decision>,
    local: LiveMetrics,
}

/// What `decision_rate` times: the agent's work for one batch from the
/// wakeups ring's records to the decisions ready to hand over, as
/// `Agent::step` and `Agent::place` do it: each record parsed as the ring's
/// callback parses it, the read counted in the .bss, the sleep reports, the
/// CPU states read and `begin_batch`, and for each wake-up `place`, its
/// in-flight count in the .bss, its hop time and its `Decision`, with the
/// agent's two clock reads. Not here: libbpf's walk of the ring to each
/// record and the hand-over (the apply_decisions syscall or the decisions
/// ring), which need a kernel. No wake-up carries a handoff slot: every
/// decision takes the apply road. Sleeps are reported before the CPU
/// states are read, as the agent does (`decide` does it after, which the
/// fingerprint keeps).
#[inline(never)]
fn agent_batch(p: &mut Placer, sh: &mut Shared, records: &[raw::wakeup_msg], k: &mut AgentKeeps) {
    k.inbox.clear();
    for r in records {
        if let Some(m) = Message::parse(bytes_of(r)) {
            k.inbox.push(m);
        }
    }
    let read_ns = monotonic_ns();
    k.decisions.clear();
    let wakeups = k
        .inbox
        .iter()
        .filter(|m| matches!(m, Message::Wakeup(_)))
        .count() as u64;
    note_consumed(&mut sh.bss, k.inbox.len() as u64, wakeups, wakeups);
    let now = k.inbox.iter().map(Message::at_ns).max().unwrap_or(0);
    for m in &k.inbox {
        if let Message::Sleep(s) = m {
            k.local.sleep_events += 1;
            p.on_sleep(s);
        }
    }
    if wakeups > 0 {
        sh.changed.clear();
        read_changed_cpus(&mut sh.bss, &mut sh.readings, &mut sh.changed);
        p.begin_batch_changed(&sh.readings, &sh.changed, now);
    }
    for m in &k.inbox {
        let Message::Wakeup(w) = m else {
            continue;
        };
        k.local
            .record_hop(HOP_ENQUEUE_READ, read_ns.saturating_sub(w.enqueue_mono_ns));
        let placed = p.place(w);
        k.local.nr_decisions += 1;
        if placed.outcome == Outcome::DelayedRequeue {
            k.local.delayed_requeues += 1;
        }
        add_inflight(&mut sh.bss, placed.cpu);
        k.decisions.push(Decision::for_wakeup(w, placed.cpu));
    }
    let committed = monotonic_ns();
    for d in &mut k.decisions {
        d.committed_ns = committed;
        k.local
            .record_hop(HOP_READ_COMMIT, committed.saturating_sub(read_ns));
    }
}

/// The median cost of the two clock reads that time each batch in
/// `decision_rate`, which its time includes.
fn clock_pair_ns() -> u64 {
    let mut v: Vec<u64> = (0..1001)
        .map(|_| {
            let t = Instant::now();
            t.elapsed().as_nanos() as u64
        })
        .collect();
    v.sort_unstable();
    v[v.len() / 2]
}

/// The agent's decisions a second on this host, natively: `agent_batch`
/// timed batch by batch, fed by the loads of `decision_cost` (the same
/// variables choose them) through the .bss and ring records the host's
/// stand-in for BPF writes, untimed. `WAKELAB_COST_N` wake-ups warm up,
/// then batches are timed until `WAKELAB_RATE_MS` of them is measured.
/// `tools/bench/decision-rate` runs it in a release build.
#[test]
fn decision_rate() {
    let mut m = measured_from_env();
    let (warm_up, nr) = (m.run.n, m.run.nr);
    let target = Duration::from_millis(
        env("WAKELAB_RATE_MS", "20")
            .parse()
            .expect("WAKELAB_RATE_MS"),
    );
    let mut keeps = AgentKeeps::default();
    let mut records = Vec::new();
    let mut out = Vec::new();
    let (mut timed, mut done, mut batches, mut decisions) = (Duration::ZERO, 0, 0, 0);
    while done < warm_up || timed < target {
        let b = m.work.next();
        // BPF's part: the CPU states and the messages, as it leaves them.
        m.sh.publish(&b);
        records.clear();
        records.extend(b.sleeps.iter().map(|s| record(&Message::Sleep(*s), nr)));
        records.extend(
            b.wakeups
                .iter()
                .map(|w| record(&Message::Wakeup(w.clone()), nr)),
        );
        let t = Instant::now();
        agent_batch(&mut m.p, &mut m.sh, &records, &mut keeps);
        let spent = t.elapsed();
        out.clear();
        out.extend(keeps.decisions.iter().map(|d| d.cpu.expect("a CPU")));
        assert_eq!(out.len(), b.wakeups.len());
        assert_allowed(&m.run.load_name, &m.run.online, &b, &out);
        m.work.placed(&b, &out);
        if done >= warm_up {
            timed += spent;
            batches += 1;
            decisions += out.len();
        }
        done += out.len();
    }
    assert_eq!(keeps.local.nr_decisions, done as u64);
    let ns = timed.as_nanos() as u64;
    println!(
        "decision_rate {} batches={batches} decisions={decisions} ns={ns} ns_per_decision={} decisions_per_s={} clock_pair_ns={}",
        m.run.label(),
        ns / decisions as u64,
        decisions as u128 * 1_000_000_000 / ns.max(1) as u128,
        clock_pair_ns()
    );
}

/// One workload's run of `batches` batches: the hash of its CPUs alone, and
/// with trace mode, the hash of everything (see the module comment).
fn fingerprint_one(preset: &str, w: &Workload, batches: usize, traced: bool) -> (u64, u64) {
    let &(shape_name, load_name, per_batch) = w;
    let mut topo = shape(shape_name);
    if shape_name == "1x1x4x2" {
        // A hole: CPU 3 offline (its sibling 2 left alone).
        topo.set_online(3, false).expect("offline");
    }
    let nr = topo.nr_cpus();
    let mut p = placer(topo, preset);
    let (tx, rx) = sync_channel(64);
    if traced {
        p.set_trace(tx);
    }
    let mut sh = Shared::new(nr);
    let mut work = load(load_name, nr, per_batch);
    let (mut cpus, mut h) = (Fnv::default(), Fnv::default());
    let mut out = Vec::new();
    for _ in 0..batches {
        let b = work.next();
        out.clear();
        sh.publish(&b);
        decide(&mut p, &mut sh, &b, &mut out);
        work.placed(&b, &out);
        for &c in &out {
            cpus.write_u64(c as u64);
            h.write_u64(c as u64);
        }
        while let Ok(rec) = rx.try_recv() {
            h.write(serde_json::to_string(&rec).unwrap().as_bytes());
        }
    }
    assert_eq!(p.trace_dropped, 0);
    h.write(format!("{:?}", p.engine().counters()).as_bytes());
    h.write(format!("{:?}", p.engine().llc_states()).as_bytes());
    (cpus.finish(), h.finish())
}

/// A machine's shape, a load and its wake-ups a batch (None: the load's own).
type Workload = (&'static str, &'static str, Option<usize>);

/// Each of `presets` on each of `workloads`, each checked (see the module
/// comment) and its hash printed; returns the hash of them all. A workload
/// of n wake-ups a batch runs `batches / n` batches: about as many decisions
/// as the others, each traced with every CPU's state.
fn fingerprint_set(name: &str, presets: &[&str], workloads: &[Workload], batches: usize) -> u64 {
    let mut all = Fnv::default();
    for &preset in presets {
        for w in workloads {
            let batches = w.2.map_or(batches, |n| (batches / n).max(1));
            let (cpus, h) = fingerprint_one(preset, w, batches, true);
            let (shape_name, load_name, per_batch) = w;
            let what = match per_batch {
                None => format!("{preset} {shape_name} {load_name}"),
                Some(n) => format!("{preset} {shape_name} {load_name}/{n}"),
            };
            assert_eq!(
                fingerprint_one(preset, w, batches, true),
                (cpus, h),
                "{what}: a second pass decided otherwise"
            );
            assert_eq!(
                fingerprint_one(preset, w, batches, false).0,
                cpus,
                "{what}: trace mode changed a decision"
            );
            println!("fingerprint {name}{what} {h:016x}");
            all.write_u64(h);
        }
    }
    all.finish()
}

#[test]
fn decision_fingerprint() {
    let batches: usize = env("WAKELAB_FINGERPRINT_BATCHES", "40")
        .parse()
        .expect("WAKELAB_FINGERPRINT_BATCHES");
    let mut first = Vec::new();
    for shape_name in ["2x1x2x2", "1x1x4x2", "2x1x16x2", "2x2x32x2", "1x2x3x1"] {
        for load_name in ["pingpong", "mixed"] {
            first.push((shape_name, load_name, None));
        }
    }
    // The set the hash has covered from the start: its line stays
    // comparable with every run recorded before the scale set came.
    let presets = ["mainline", "v5.10", "v5.13", "v5.14", "v6.12"];
    println!(
        "fingerprint all {:016x}",
        fingerprint_set("", &presets, &first, batches)
    );
    // The machine of WL_MAX_CPUS CPUs and the fixed batch sizes the cost
    // is measured at, hashed apart; on the two presets whose idle scans
    // differ most (SIS_UTIL, SIS_PROP), as every 1024-CPU decision traced
    // is slow to hash.
    let mut scale = vec![("4x2x64x2", "pingpong", None), ("4x2x64x2", "mixed", None)];
    for shape_name in ["2x1x16x2", "4x2x64x2"] {
        for n in [1, 4, 32] {
            scale.push((shape_name, "mixed", Some(n)));
        }
    }
    println!(
        "fingerprint scale all {:016x}",
        fingerprint_set("scale ", &presets[..2], &scale, batches)
    );
}

/// FNV-1a, 64 bits: stable across Rust releases, unlike std's hasher.
struct Fnv(u64);

impl Default for Fnv {
    fn default() -> Self {
        Fnv(0xcbf2_9ce4_8422_2325)
    }
}

impl Hasher for Fnv {
    fn finish(&self) -> u64 {
        self.0
    }
    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.0 = (self.0 ^ b as u64).wrapping_mul(0x0000_0100_0000_01b3);
        }
    }
}
