/* SPDX-License-Identifier: GPL-2.0 */
/*
 * scx_wakelab: the contract between the BPF component (bpf/main.bpf.c and
 * the parts it includes) and the Rust agent (src/live/, whose only user of
 * these definitions is src/live/protocol.rs). Both sides see this file: the
 * BPF program includes it, the agent gets it through bindgen.
 *
 * The life of a wake-up, on the default road (the handoff; the agent turns
 * it off with --agent-handoff=false, BPF's handoff_on):
 *   1. ops.select_cpu() runs on the waker's CPU. It records the wake-up's
 *      context and, for a ttwu wake-up of a task the agent places, claims a
 *      handoff slot (wl_shared.handoff, to WAITING) and sends a struct
 *      wakeup_msg with WL_MSG_HANDOFF and the slot's handoff_seq through the
 *      wakeups ring (BPF_MAP_TYPE_RINGBUF, BPF -> agent). It returns
 *      prev_cpu: the kernel then enqueues the task, on the wakee's CPU when
 *      it queues the wake-up there.
 *   2. The agent decides a CPU, and the task's ops.enqueue() runs: the two
 *      race on the slot, each with one compare-and-swap from WAITING.
 *      - The agent first (WAITING -> DECIDED, with the CPU): ops.enqueue()
 *        finds the decision, frees the slot and queues the task on that CPU
 *        itself. No further call, no parking.
 *      - ops.enqueue() first (WAITING -> PARKED): it parks the task in
 *        WL_PARK_DSQ, a queue no CPU consumes. The agent's compare-and-swap
 *        fails, and its decision (struct decision_msg) takes the apply road:
 *        the agent writes a batch of decisions into wl_shared.apply_slots and
 *        runs the SEC("syscall") program apply_decisions
 *        (bpf_prog_test_run), which records each one and moves each decided
 *        task from WL_PARK_DSQ onto its CPU. A decision that arrives before
 *        its task is parked stays recorded (wl_shared.decisions_pending)
 *        until the agent runs apply_decisions again or the heartbeat
 *        carries it out.
 *   3. The task runs on its CPU. An idle CPU was claimed (its bit cleared in
 *      the kernel's idle mask) and got the task in its local DSQ, and the
 *      insert or move itself wakes it; a busy CPU got it in its own DSQ and
 *      takes it from there in ops.dispatch(), unless a newly-idle CPU pulls
 *      it first.
 * The other roads:
 *   - No slot: the handoff is off, the wake-up is not a ttwu one,
 *     ops.select_cpu() did not run for it (a task allowed on one CPU), the
 *     slot still holds an older wake-up's decision nobody collected, or the
 *     agent or the ring could not take the message then. ops.enqueue() sends
 *     the wakeup_msg itself and parks the task (unless the fallback queue
 *     below takes it), and the decision takes the apply road.
 *   - A new task: ops.select_cpu() runs with SCX_WAKE_FORK (no slot), and
 *     the task's first ops.enqueue(), not a wake-up, takes the same road
 *     as a wake-up without a slot: the agent places it as fair.c's slow
 *     path does. Other enqueues that are not wake-ups stay on their CPU.
 *   - The decisions user ring (BPF_MAP_TYPE_USER_RINGBUF, agent -> BPF):
 *     the fallback transport, for kernels whose SYSCALL programs may not
 *     move tasks (--apply-path ring, or auto after such a refusal; BPF's
 *     ring_transport). The agent submits its decisions there instead of
 *     running apply_decisions, and every CPU's ops.dispatch() drains the
 *     ring and moves the decided tasks. The handoff works the same with
 *     either transport.
 *   - The fallback queue (WL_FALLBACK_DSQ), which every CPU consumes: a
 *     task goes there instead of to the agent when the wakeups ring is full
 *     or the agent has stalled or fallen more than agent_stall_ns behind;
 *     tasks already parked for such an agent are moved there too (the stall
 *     rescue).
 *   Whichever road, BPF checks that a decision is for the wake-up it was
 *   made for (the task's generation, enq_cnt, or the handoff slot's
 *   sequence number) and that the task may run on the CPU before acting on
 *   it: no decision can lose a task or make the kernel eject us.
 *
 * Everything else the two sides share is in struct wl_shared (one .bss
 * variable, memory-mapped by the agent: no syscall per read), each field
 * with its owner (the only side that writes it) and its invariant, and in
 * these BPF globals, which the agent reaches by name through the skeleton:
 *   - Settings (.rodata; owner: the agent, before load; frozen at load, so
 *     the verifier sees constants): agent_pid, agent_tgid, slice_ns,
 *     agent_stall_ns (BPF's default is kept), break_verifier, ring_limit,
 *     ring_transport, debug_half_apply, handoff_on (bpf/main.bpf.c);
 *     idle_balance_on, idle_balance_busy_ns, newidle_wait_own_wakee
 *     (bpf/balance.bpf.c).
 *   - Counters and histograms (.bss; owner BPF, atomic adds; the agent reads
 *     them racily for stats): bpf/counters.bpf.h.
 *   - The two rings, wakeups and decisions (bpf/state.bpf.h), and uei, the
 *     exit information BPF records for the agent when the scheduler exits
 *     (bpf/main.bpf.c).
 */
#ifndef __WAKELAB_INTF_H
#define __WAKELAB_INTF_H

#ifndef __VMLINUX_H__
typedef unsigned char u8;
typedef unsigned int u32;
typedef int s32;
typedef unsigned long long u64;
typedef long long s64;
#endif

enum wakelab_consts {
	/* Size of the per-CPU table and upper bound of CPU ids we handle. */
	WL_MAX_CPUS		= 1024,
	/*
	 * DSQ ids: 0 .. WL_MAX_CPUS-1 are the per-CPU queues (a task the agent
	 * placed on CPU n waits in DSQ n until CPU n, or a CPU that pulls it,
	 * consumes it); then the fallback queue any CPU consumes, then the
	 * queue that holds only the agent.
	 */
	WL_FALLBACK_DSQ		= WL_MAX_CPUS,
	WL_AGENT_DSQ		= WL_MAX_CPUS + 1,
	/*
	 * Tasks awaiting the agent's decision, in arrival order. No CPU
	 * consumes it: only a decision (or the stall rescue) moves a task out.
	 */
	WL_PARK_DSQ		= WL_MAX_CPUS + 2,
	/* Decisions one apply_decisions run takes (wl_shared.apply_slots). */
	WL_APPLY_MAX		= 512,
	/* Agent CPU: not pinned (wl_shared.agent_home_cpu). */
	WL_NO_HOME_CPU		= -1,
	/* Entries in each ring. */
	WL_RING_ENTRIES		= 8192,
	/* Buckets of the log2 latency histograms (bucket i: [2^i, 2^(i+1)) ns). */
	WL_LAT_BUCKETS		= 40,
	/* 64-bit words of the allowed-CPU mask carried in each wakeup_msg. */
	WL_MASK_WORDS		= WL_MAX_CPUS / 64,
	/* Placement the agent may ask for: any CPU (the fallback queue). */
	WL_CPU_ANY		= -1,
	/* Slots of wl_shared.handoff (a power of two). */
	WL_HANDOFF_SLOTS	= 1024,
};

/*
 * cpu_state.avg_idle_ns: where it starts and what one idle period adds at
 * most, the agent's figures for its own average (src/live/placement.rs).
 */
#define WL_AVG_IDLE_START_NS	1000000ULL
#define WL_AVG_IDLE_MAX_NS	8000000ULL

/*
 * A handoff slot's word: (seq << WL_HANDOFF_SEQ_SHIFT) | (cpu <<
 * WL_HANDOFF_CPU_SHIFT) | state, where seq is the wake-up's handoff sequence
 * number (wakeup_msg.handoff_seq, from 1; its low 46 bits) and cpu the
 * decided CPU (WL_HANDOFF_DECIDED only).
 */
#define WL_HANDOFF_SEQ_SHIFT	18
#define WL_HANDOFF_CPU_SHIFT	2
#define WL_HANDOFF_STATE_MASK	3

enum wl_handoff_state {
	/* Nobody's: ops.select_cpu() may claim it. */
	WL_HANDOFF_FREE		= 0,
	/* Claimed for wake-up seq: neither the decision nor the task is here yet. */
	WL_HANDOFF_WAITING	= 1,
	/*
	 * ops.enqueue() came first and parked the task: decide through
	 * apply_decisions. Nobody waits on the slot any more, and the next
	 * claim takes it as if it were FREE.
	 */
	WL_HANDOFF_PARKED	= 2,
	/* The agent came first: ops.enqueue() carries the decision out itself. */
	WL_HANDOFF_DECIDED	= 3,
};

/*
 * The hops of one wake-up through the agent, each timed on one clock
 * (CLOCK_MONOTONIC: bpf_ktime_get_ns() in BPF, clock_gettime() in the agent;
 * scx_bpf_now() is the rq clock and is not comparable). Each hop has a log2
 * histogram (WL_LAT_BUCKETS): BPF owns the rows it measures (bss hop_hist),
 * the agent the rows it measures (its own metrics).
 */
enum wl_hop {
	WL_HOP_SELECT_ENQUEUE	= 0,	/* ops.select_cpu -> ops.enqueue (BPF) */
	WL_HOP_ENQUEUE_READ	= 1,	/* sent -> the agent reads it (agent) */
	WL_HOP_READ_COMMIT	= 2,	/* read -> decision handed to BPF (agent) */
	WL_HOP_COMMIT_APPLY	= 3,	/* handed over -> task queued on its CPU (BPF) */
	WL_HOP_APPLY_RUN	= 4,	/* queued on its CPU -> running (BPF) */
	WL_NR_HOPS		= 5,
};

/* Context the waker ran in when it called try_to_wake_up(). */
enum waker_context {
	WAKER_TASK		= 0,
	WAKER_SOFTIRQ		= 1,
	WAKER_HARDIRQ		= 2,
	WAKER_NMI		= 3,
};

/* wakeup_msg.kind */
enum wakeup_msg_kind {
	/* A task needs a placement decision. */
	WL_MSG_ENQUEUE		= 0,
	/*
	 * A task went to sleep (only while the agent sets report_sleeps, for
	 * its delayed-dequeue emulation). No decision is expected.
	 */
	WL_MSG_SLEEP		= 1,
};

/* wakeup_msg.flags */
enum wakeup_msg_flags {
	/* ops.select_cpu() ran for this enqueue: the waker fields are valid. */
	WL_MSG_SELECTED		= 1 << 0,
	/* The waker had PF_EXITING set (fair.c ignores SYNC then). */
	WL_MSG_WAKER_EXITING	= 1 << 1,
	/* The waker is a per-CPU kthread (PF_KTHREAD, one allowed CPU). */
	WL_MSG_WAKER_PCPU_KTHREAD = 1 << 2,
	/* SCX_ENQ_WAKEUP was set: this enqueue is a wake-up, not a requeue. */
	WL_MSG_WAKEUP		= 1 << 3,
	/* The task is a kernel thread. */
	WL_MSG_KTHREAD		= 1 << 4,
	/* The task may run on every CPU; cpus_allowed was not filled in. */
	WL_MSG_ALL_CPUS		= 1 << 5,
	/*
	 * Sent by ops.select_cpu(), before the task is enqueued, with a handoff
	 * slot (handoff_seq): see wl_shared.handoff.
	 */
	WL_MSG_HANDOFF		= 1 << 6,
};

struct wakeup_msg {
	u32 kind;		/* enum wakeup_msg_kind */
	s32 pid;
	s32 task_cpu;		/* scx_bpf_task_cpu(p) when the message was sent */
	s32 prev_cpu;		/* prev_cpu given to ops.select_cpu() */
	s32 waker_cpu;		/* CPU ops.select_cpu() ran on (the waker's) */
	s32 waker_pid;
	u32 waker_context;	/* enum waker_context */
	u32 flags;		/* enum wakeup_msg_flags */
	u32 nr_cpus_allowed;
	/*
	 * Tasks runnable on the waker's CPU when ops.select_cpu() ran (see
	 * cpu_state.nr_runnable), for fair.c's "sync && nr_running == 1" test,
	 * which is about the waker's CPU at wake-up time, not at decision time.
	 */
	u32 waker_nr_runnable;
	u32 waker_ttwu_pending;
	/* The waker's load average (the estimator's), which a sync wake-up weighs. */
	u64 waker_est_load_avg;
	u64 wake_flags;		/* SCX_WAKE_* as given to ops.select_cpu() */
	u64 enq_flags;		/* SCX_ENQ_* as given to ops.enqueue()
				 * (SCX_ENQ_WAKEUP alone when sent from
				 * ops.select_cpu()) */
	u64 enq_cnt;		/* generation: a decision must echo it */
	u64 select_ns;		/* when ops.select_cpu() ran */
	u64 enqueue_ns;		/* when it was sent: by ops.select_cpu() with
				 * WL_MSG_HANDOFF, else by ops.enqueue() */
	u64 enqueue_mono_ns;	/* the same moment on CLOCK_MONOTONIC (wl_hop) */
	u64 handoff_seq;	/* WL_MSG_HANDOFF: the wake-up's handoff slot */
	u64 weight;		/* p->scx.weight (100 = nice 0) */
	/*
	 * The state estimator's load_avg and util_avg of the task as it went
	 * to sleep (bpf/estimator.bpf.c): what select_task_rq_fair() reads.
	 */
	u64 est_load_avg;
	u64 est_util_avg;
	u64 exec_runtime;	/* ns run since the task last went to sleep
				 * (WL_MSG_SLEEP: ns run in the period that
				 * just ended) */
	char comm[16];
	/*
	 * p->cpus_ptr: bit n of word n/64 set if the task may run on CPU n;
	 * not filled in when WL_MSG_ALL_CPUS says it may run on every CPU.
	 */
	u64 cpus_allowed[WL_MASK_WORDS];
};

struct decision_msg {
	s32 pid;
	s32 cpu;		/* target CPU, or WL_CPU_ANY */
	u64 enq_cnt;		/* echoed from wakeup_msg: stale ones are dropped */
	u64 slice_ns;		/* 0 = default slice */
	u64 enqueue_ns;		/* echoed from wakeup_msg; BPF does not read it
				 * (it times enqueue -> run from its own stamp) */
	u64 committed_ns;	/* CLOCK_MONOTONIC when the agent handed it over */
};

/*
 * The context of one apply_decisions run (bpf_prog_test_run's ctx_in): the
 * batch is wl_shared.apply_slots[0 .. nr).
 */
struct apply_args {
	u32 nr;
	u32 flags;		/* enum wl_apply_flags */
};

enum wl_apply_flags {
	/*
	 * Test aid (--debug-half-apply, honoured only when that option set
	 * debug_half_apply at load): record the decisions but move nothing,
	 * as if the agent stopped between the two halves of an apply run.
	 */
	WL_APPLY_RECORD_ONLY	= 1 << 0,
};

/*
 * One CPU's state as last seen by BPF. Written only by BPF, read racily by
 * the agent. Fields copied from struct rq are refreshed in that CPU's
 * ops.dispatch() and, for every CPU, right before the agent is dispatched,
 * so the agent decides on a snapshot at most one agent-run old.
 */
struct cpu_state {
	u64 idle_since_ns;	/* start of the current idle period, 0 if busy */
	u64 last_idle_ns;	/* length of the last finished idle period */
	u64 last_idle_end_ns;	/* when it ended (SIS_PROP's wake_avg_idle stamp) */
	/*
	 * rq->avg_idle's way with the idle periods: update_avg() of each, at
	 * most WL_AVG_IDLE_MAX_NS, from WL_AVG_IDLE_START_NS (as the agent
	 * keeps its own from last_idle_ns; this one misses none). The newly-idle
	 * rule's entry gate reads it.
	 */
	u64 avg_idle_ns;
	u64 refreshed_ns;	/* when the rq fields below were copied */
	/*
	 * When the last task of ours stopped here, 0 while one runs (the agent
	 * does not count: CFS would not see it). The agent places a wake-up
	 * as of its select time, and a CPU free only since after that moment
	 * was busy then.
	 */
	u64 free_since_ns;
	s32 curr_pid;		/* task running there (0 = idle) */
	u32 curr_policy;	/* its scheduling policy (SCHED_IDLE = 5) */
	u32 idle;		/* ops.update_idle() said idle */
	u32 nr_running;		/* rq->nr_running (all classes, the agent and
				 * tasks waiting for it included) */
	/*
	 * What fair.c's rq->nr_running means, for our tasks: the task running
	 * there unless it is the agent or idle, plus the tasks queued for that
	 * CPU (its DSQ and its local DSQ). The agent is invisible: it is not a
	 * task CFS would see.
	 */
	u32 nr_runnable;
	u32 scx_nr_running;	/* rq->scx.nr_running */
	u32 ttwu_pending;	/* rq->ttwu_pending: queued wake-up in flight */
	u32 dsq_queued;		/* tasks waiting in this CPU's DSQ */
	/*
	 * The state estimator's load_avg and util_avg of the CPU, as of its
	 * last update (bpf/estimator.bpf.c): cpu_load() and cpu_util_cfs()
	 * as the fair class would have them for our tasks.
	 */
	u64 est_load_avg;
	u64 est_util_avg;
};

/*
 * The newly-idle decision BPF takes from the agent (bpf/newidle_rule.h, the
 * engine's src/policy/newidle.rs in C): levels of sched domains, as bits,
 * innermost first ...
 */
enum wl_domain_level {
	WL_DOM_SMT,
	WL_DOM_LLC,
	WL_DOM_NODE,
	WL_DOM_MACHINE,
	WL_DOM_NR,
};

/* ... one CPU's place among them ... */
struct wl_cpu_topo {
	u32 online;
	u32 levels;		/* bit WL_DOM_*: it has a domain at that level */
	u32 first[3];		/* the lowest online CPU of its core, LLC, node */
	u32 imb_numa_nr;	/* sd->imb_numa_nr of its NUMA domain */
	u32 capacity;		/* capacity_of(), 1024 = full */
	u32 pad;
};

/* ... and the engine's configuration as the rule reads it. */
struct wl_newidle_rule {
	u32 skip_pending;	/* seed 2: not while a wake-up is on its way */
	u32 numa_imb_nr;	/* adjust_numa_imbalance(): 0 v5.10's, 1 v5.18's */
	u32 imbalance_pct_smt;
	u32 imbalance_pct_llc;
	u32 is_numa;
	u32 pad;
	u64 avg_idle_min_ns;	/* the entry gate on rq->avg_idle */
};

/*
 * What BPF and the agent share besides the rings. One .bss variable
 * (wl_shared, declared in bpf/state.bpf.h), memory-mapped by the agent.
 * "Owner" is the only side that writes a field; the other reads it racily
 * unless noted.
 */
struct wl_shared {
	/*
	 * Owner BPF (each CPU for itself, and for all right before the agent
	 * is dispatched; an apply_decisions run refreshes none): each CPU as
	 * last seen.
	 */
	struct cpu_state cpu_state[WL_MAX_CPUS];
	/*
	 * Ring progress. nr_ring_msgs (owner BPF) counts messages submitted to
	 * the wakeups ring, nr_ring_wakeups the WL_MSG_ENQUEUE part of them;
	 * agent_consumed (owner agent) those it has read, and
	 * agent_consumed_wakeups the WL_MSG_ENQUEUE part of them. Invariant:
	 * nr_ring_msgs - agent_consumed messages wait in the ring, so a spinning
	 * agent needs no syscall to see new work; it polls for wake-ups
	 * (nr_ring_wakeups != agent_consumed_wakeups) and leaves sleep reports
	 * in the ring for the next wake-up's batch, as BPF does not wake it for
	 * them either (agent_has_work()).
	 */
	u64 nr_ring_msgs;
	u64 nr_ring_wakeups;
	u64 agent_consumed;
	u64 agent_consumed_wakeups;
	/*
	 * Owner agent: wake-ups it has read and not yet handed over as
	 * decisions (a batch being decided, or decisions the ring transport
	 * could not submit yet). Invariant: raised before agent_consumed
	 * advances past them, lowered only once BPF has their decisions, so
	 * that between the two the agent counts as having work: preempted
	 * mid-batch, it is run again at once instead of being parked with the
	 * batch's tasks waiting for it.
	 */
	u64 agent_holding;
	/*
	 * Owner BPF (atomic adds): decisions recorded and not yet carried out
	 * or dropped; each task_ctx.decision_pending 0 -> 1 exchange adds one,
	 * each 1 -> 0 takes one away. Non-zero after an apply run means the
	 * agent read a message before its task was parked: it runs apply
	 * again (the heartbeat does too).
	 */
	u64 decisions_pending;
	/* Owner BPF: when the agent last started running (rq clock), and where. */
	u64 agent_last_run_ns;
	s32 agent_cpu;
	/*
	 * Owner agent, set once before attach: the CPU its scheduling thread is
	 * pinned to, or WL_NO_HOME_CPU. BPF runs the agent only there and
	 * preempts that CPU's task when the agent has work.
	 */
	s32 agent_home_cpu;
	/*
	 * Owner BPF: something waits for the agent's own CPU (a task queued
	 * there while the agent runs). The agent stops spinning and yields;
	 * it clears the flag (its only write) when it yields.
	 */
	u32 agent_yield_request;
	/* Owner agent: send WL_MSG_SLEEP events (delayed-dequeue emulation). */
	u32 report_sleeps;
	/*
	 * Owner agent, from its engine config: newly-idle pull at all, and the
	 * rule it follows (seed 2's skip while a wake-up is pending among it).
	 * BPF decides and pulls itself: a round trip to the agent would leave
	 * the CPU idle. Written whenever the config changes; BPF reads a field
	 * at a time, so a decision may mix an old and a new config once.
	 */
	u32 newidle_pull;
	struct wl_newidle_rule newidle_rule;
	/* Owner agent, set once before attach: each CPU's LLC and node ... */
	u32 cpu_llc[WL_MAX_CPUS];
	u32 cpu_node[WL_MAX_CPUS];
	/* ... and its place in the sched domains, for the newly-idle rule. */
	struct wl_cpu_topo cpu_topo[WL_MAX_CPUS];
	/*
	 * Shared, atomic adds only: decisions for each CPU not yet carried out.
	 * The agent adds one per decision; BPF subtracts it when the task is
	 * moved to that CPU or the decision is dropped (stale, task gone,
	 * rescued). With rq->ttwu_pending, "a wake-up is on its way here".
	 */
	u32 inflight[WL_MAX_CPUS];
	/*
	 * Owner BPF: until when (rq clock) a CPU waits for its own sync wakee
	 * (--newidle-wait-own-wakee; see bpf/balance.bpf.c).
	 */
	u64 own_wakee_until[WL_MAX_CPUS];
	/*
	 * Which CPUs' placement inputs changed since the agent last read them,
	 * so that it reads and rebuilds only those: bit cpu % 64 of word
	 * cpu / 64, each word alone on its cache line. The inputs are the
	 * fields of cpu_state[cpu] the agent reads (src/live/protocol.rs,
	 * read_one()), inflight[cpu] and own_wakee_until[cpu].
	 * Set by whoever changes one of them, BPF on any CPU (note_cpu_changed())
	 * or the agent (its inflight adds), with an atomic OR after the change:
	 * a full barrier, so the OR releases the change. Cleared only by the
	 * agent, with an atomic exchange of the word to 0 (acquire) before it
	 * reads the slots whose bits it took. A change made while the agent
	 * reads sets the bit again: the agent reads that slot once more at
	 * once (twice at most) or at its next batch.
	 * Invariant: once a change's OR is done, the agent reads that slot
	 * again before it decides on it; a slot whose bit is clear was read
	 * after its last completed change.
	 */
	struct wl_changed_word {
		u64 bits;
		u64 pad[7];
	} cpu_changed[WL_MAX_CPUS / 64];
	/*
	 * Owner agent between apply runs, read by BPF during one: the batch of
	 * decisions apply_decisions carries out (struct apply_args.nr of them).
	 */
	struct decision_msg apply_slots[WL_APPLY_MAX];
	/*
	 * The handoff: a decision that reaches ops.enqueue() through memory,
	 * with no apply run. A wake-up whose ops.select_cpu() can send its
	 * message at once (WL_MSG_HANDOFF) claims the slot handoff_seq %
	 * WL_HANDOFF_SLOTS, to WAITING from any state but DECIDED (BPF,
	 * handoff_claim(): a DECIDED slot holds a decision nobody has collected
	 * yet; a PARKED one is done with).
	 * Then the agent and the task's ops.enqueue() race, each with one
	 * compare-and-swap from WAITING: the agent to DECIDED with its CPU
	 * (committed_ns written first), ops.enqueue() to PARKED. Whoever
	 * loses takes the other road: the agent hands the decision over as
	 * any other (apply_decisions, or the decisions ring); ops.enqueue()
	 * finds DECIDED, sets the slot FREE and queues the task on the
	 * decided CPU itself. The kernel's ops.select_cpu() runs on the
	 * waker's CPU before the wake-up is sent on to the wakee's, so a
	 * polling agent often decides before the enqueue and the wakee's CPU
	 * is not woken twice.
	 * Invariant: a DECIDED slot holds one wl_shared.inflight count for
	 * its CPU, given back by whoever frees it (the enqueue, or
	 * handoff_cancel() when the task is not enqueued as this wake-up).
	 */
	struct handoff_slot {
		u64 word;
		u64 committed_ns;
	} handoff[WL_HANDOFF_SLOTS];
};

#endif /* __WAKELAB_INTF_H */
