/* SPDX-License-Identifier: GPL-2.0 */
/*
 * scx_wakelab: BPF component.
 *
 * The Rust agent decides where every woken task runs, re-implementing the
 * CFS wake-up placement path. This program is its hands and eyes:
 *
 * - ops.select_cpu() runs on the waker's CPU, in the waker's context. It
 *   records what fair.c's select_task_rq_fair() would look at — the wake
 *   flags, the waker's CPU, pid and PF_EXITING, and whether the waker runs in
 *   task, softirq or hardirq context — in task storage, and returns prev_cpu
 *   without deciding anything.
 * - ops.enqueue() sends the task and that context to the agent through a BPF
 *   ring buffer. The agent itself and per-CPU kthreads never wait for the
 *   agent: they are dispatched here. When the ring is full, or the agent has
 *   not run for too long, the task goes to a fallback queue that every CPU
 *   consumes, and the event is counted. Tasks that were already waiting for
 *   a stalled agent are moved there too (rescue_from_stalled_agent()).
 * - ops.dispatch() drains the agent's decisions from a user ring buffer and
 *   queues each task on the per-CPU queue of the CPU the agent chose, then
 *   kicks that CPU if it is idle. A decision for an older enqueue of the task
 *   (generation counter) is dropped; a CPU the task may not run on falls back
 *   to one it may, and is counted.
 * - The agent runs only when it has work: it is parked in its own queue and
 *   moved to a CPU when wake-ups wait for it (sleep reports alone wait for
 *   the next wake-up), preferably its last CPU; a heartbeat timer makes sure
 *   it runs at least every WL_HEARTBEAT_NS so the watchdog never sees it
 *   starve.
 * - A CPU about to go idle pulls a task waiting for a busier CPU of its LLC,
 *   then of its node, as fair.c's newly-idle balance does (not a cache-hot
 *   one, not while a wake-up is on its way to it if the policy says so).
 *   With --idle-balance, an idle CPU does the same, also from an overloaded
 *   node, when a busy CPU's tick sees tasks waiting behind its current one
 *   and kicks it (the idle balance).
 * - A per-CPU table (cpu_state[]) that the agent reads through the
 *   memory-mapped .bss: idle, rq->nr_running, rq->ttwu_pending, current
 *   pid/policy, idle periods.
 *
 * Nothing here is formally exact: the agent decides on state that may be
 * stale by the time its decision lands, exactly like any user-space
 * scheduler. What must be exact is that no task is ever lost: every path
 * that cannot honour a decision falls back to a queue some CPU consumes.
 */
#include <scx/common.bpf.h>
#include <bpf_experimental.h>
#include "intf.h"

char _license[] SEC("license") = "GPL";

UEI_DEFINE(uei);

/*
 * The agent's scheduling thread (agent_pid) waits in its own queue and runs
 * only when it has work. The agent's other threads (stats server, signal
 * handling) never go through the agent: the scheduling thread may be waiting
 * on them, and a task cannot wait for itself to place it.
 */
const volatile s32 agent_pid;
const volatile s32 agent_tgid;
/* Default time slice of tasks we dispatch (ns). */
const volatile u64 slice_ns = 5000000ULL;
/*
 * When the agent has not run for this long while tasks wait for it, new
 * tasks bypass it (fallback queue). Well below the watchdog's timeout, so the
 * watchdog is never what saves a task.
 */
const volatile u64 agent_stall_ns = 1000000000ULL;
/*
 * Test aid (--debug-break-verifier): when set, ops.enqueue() dereferences a
 * random number, which the verifier must reject. Lets the tests check how a
 * load failure is reported. When clear, the verifier never walks that branch
 * (.rodata is frozen at load, so the condition is a known constant).
 */
const volatile bool break_verifier;
/*
 * Test aid (--debug-ring-limit): the wakeup ring counts as full once this
 * many messages wait in it (0: only when it is really full). Lets a load the
 * VM can carry overflow it: filling the real 8192 entries takes thousands of
 * threads woken at once.
 */
const volatile u32 ring_limit;
/*
 * The agent hands its decisions over through the decisions ring (the
 * fallback transport) instead of the apply_decisions program: only then
 * does ops.dispatch() drain the ring.
 */
const volatile bool ring_transport;
/* Test aid: honour WL_APPLY_RECORD_ONLY (--debug-half-apply). */
const volatile bool debug_half_apply;
/* Send wake-ups from ops.select_cpu() with a handoff slot (--agent-handoff). */
const volatile bool handoff_on;

/* Heartbeat period: the agent runs at least this often. */
#define WL_HEARTBEAT_NS 100000000ULL

static u32 nr_cpu_ids;

/* -------------------------------------------------------------------------
 * State shared with the agent (.bss, memory-mapped by the agent).
 *
 * Counters are written by BPF only, with atomic adds where several CPUs may
 * race; the agent reads them racily for stats.
 */
struct wl_shared wl_shared;

/* Decisions of the agent that were carried out (wake-ups sent: wl_shared.nr_ring_wakeups). */
volatile u64 nr_agent_dispatches;
/* Sleep events sent (report_sleeps), and those the full ring dropped. */
volatile u64 nr_sleep_msgs, nr_sleep_msgs_dropped;
/* Dispatched here without the agent: the agent, per-CPU kthreads. */
volatile u64 nr_direct_dispatches;
/* The wakeup ring was full: the task went to the fallback queue. */
volatile u64 nr_ring_full_fallbacks;
/*
 * The agent had not run for agent_stall_ns, or the oldest message waiting
 * for it was older than that: the task bypassed it.
 */
volatile u64 nr_agent_stall_fallbacks;
/*
 * Tasks already queued to the agent when it stalled, sent to the fallback
 * queue without its decision (rescue_from_stalled_agent()).
 */
volatile u64 nr_stall_rescues;
/*
 * Of those, tasks rescued while the agent kept up: their decision was lost
 * on its way (a race between BPF and the agent). Should stay 0.
 */
volatile u64 nr_lost_decisions;
/* A decision for an older enqueue of the task (it was requeued meanwhile). */
volatile u64 nr_stale_decisions;
/* Fallback tasks taken before the CPU's own queue after waiting too long. */
volatile u64 nr_fallback_starving;
/* The chosen CPU was invalid or outside p->cpus_ptr: placed elsewhere. */
volatile u64 nr_bounced_decisions;
/* The task of a decision no longer exists. */
volatile u64 nr_decisions_task_gone;
/* The agent asked for "any CPU". */
volatile u64 nr_any_cpu_decisions;
/* Enqueues without a preceding ops.select_cpu() (pinned, requeue, ...). */
volatile u64 nr_enqueue_without_select;
/* Wake-up contexts seen in ops.select_cpu(). */
volatile u64 nr_select_task_ctx, nr_select_softirq_ctx, nr_select_hardirq_ctx;
/*
 * Newly-idle pulls (the sched_ext form of fair.c's newidle balance): a CPU
 * with nothing to run took a task queued for another CPU; skipped because a
 * wake-up was pending for it (seed 2); pulled although one was pending (flag
 * off); found nothing to pull; a cache-hot task left where it waits;
 * searched although a wake-up was pending (flag off), pull or not.
 */
volatile u64 nr_newidle_pulls, nr_newidle_skipped_pending,
	     nr_newidle_pull_despite_pending, nr_newidle_nothing,
	     nr_newidle_cache_hot, nr_newidle_search_despite_pending;
/*
 * Idle balance (idle_balance_kick()): idle CPUs kicked by a busy CPU's tick;
 * kicked CPUs that pulled a task, found nothing to pull, left a cache-hot
 * task where it waits.
 */
volatile u64 nr_idle_balance_kicks, nr_idle_balance_pulls,
	     nr_idle_balance_nothing, nr_idle_balance_cache_hot;
/* Newly-idle pulls left undone: the CPU's own sync wakee awaits the agent. */
volatile u64 nr_newidle_wait_own_wakee;
/*
 * An idle CPU woken for a wake-up that then waited for the agent did not
 * balance: that is no CPU going idle (wakelab_dispatch()).
 */
volatile u64 nr_newidle_skipped_parked;
/* Times the heartbeat had to wake the agent. */
volatile u64 nr_heartbeat_kicks;
/*
 * The agent's home CPU ran a task of ours when the agent had work: that
 * task was preempted so that the agent could run (wake_agent(), tick).
 */
volatile u64 nr_agent_preempt_kicks;
/*
 * Enqueues that are not wake-ups (slice expired, preempted, fork, property
 * change): kept on the task's CPU without asking the agent, as fair.c keeps
 * a task on its runqueue; select_task_rq() is not involved.
 */
volatile u64 nr_requeues_in_place;
/*
 * Decisions carried out (moved out of the parking queue): straight onto an
 * idle CPU's local queue, or into a busy CPU's queue (where a newly-idle CPU
 * may pull it from); apply_decisions runs, and the parking-queue visits
 * that found no decided task.
 */
volatile u64 nr_applied_to_idle, nr_applied_to_queue, nr_apply_runs, nr_apply_misses;
/*
 * The handoff (wl_shared.handoff): wake-ups sent from ops.select_cpu(),
 * decisions ops.enqueue() carried out itself, and wake-ups sent from
 * ops.enqueue() because their slot still held an uncollected decision.
 */
volatile u64 nr_handoff_msgs, nr_handoffs, nr_handoff_slot_busy;
/*
 * Decided tasks the heartbeat moved itself: their decision was recorded
 * before they were parked, or the agent stopped before carrying it out.
 */
volatile u64 nr_applied_late;
/*
 * Times a CPU going idle found the agent parked with work and kicked
 * itself to run it (a wake-up that raced with the agent parking).
 */
volatile u64 nr_idle_agent_kicks;
/*
 * The heartbeat found an idle CPU with tasks in its own queue, or tasks in
 * the fallback queue and an idle CPU, and kicked it: a wake-up lost to a
 * race this program did not foresee. Should stay 0; the heartbeat, not the
 * kernel's watchdog, is what catches it if not.
 */
volatile u64 nr_stranded_kicks;

/*
 * log2 histogram of the time from ops.enqueue() queuing a task to the agent
 * until the task starts running on the CPU the agent chose.
 */
volatile u64 enqueue_to_run_hist[WL_LAT_BUCKETS];

/* The hops BPF times (enum wl_hop; the agent's rows stay zero here). */
volatile u64 hop_hist[WL_NR_HOPS][WL_LAT_BUCKETS];

/*
 * The agent's own scheduling, reported apart from the workload's: times it
 * started running, and the part of those on another CPU than its last (each
 * a task migration that CFS, having no agent, would never make).
 */
volatile u64 nr_agent_runs, nr_agent_migrations;

/* --idle-balance: idle CPUs are kicked to pull (idle_balance_kick()). */
const volatile bool idle_balance_on;
/* --idle-balance-busy-us: see wakelab_tick(). */
const volatile u64 idle_balance_busy_ns = 2000000ULL;
/* Set by idle_balance_kick() for the idle CPU it kicks, cleared by its dispatch. */
volatile u32 idle_balance_req[WL_MAX_CPUS];
/*
 * wl_shared.own_wakee_until: until when a CPU expects its own wakee back. A sync waker about to sleep
 * woke a task that last ran on the waker's CPU; in the kernel that wakee
 * would be queued there at once (the sync shortcut or prev, the same CPU),
 * but ours waits for the agent, and the CPU goes idle meanwhile. Its
 * newly-idle pull would then take a task waiting elsewhere (in lat_ctx, the
 * next ring member queued behind the agent), and the wakee arrives to a CPU
 * that is busy again: two migrations the kernel never makes. So
 * newidle_balance() leaves the CPU idle until the decision is applied
 * (move_decided() clears the mark) or WL_OWN_WAKEE_WAIT_NS passes. The
 * bound covers the agent's round trip under QEMU TCG (p50 0.5-1 ms in the
 * lab); on real hardware the decision clears it long before. Off by default
 * (--newidle-wait-own-wakee): it cut newly-idle pulls in lat_ctx rings of 16
 * but lowered the affine rate of rings of 2, even after the agent began
 * describing such CPUs as busy (src/live/placement.rs); the runs are in
 * docs/benchmarks/bpf-heuristics-notes.md.
 */
const volatile bool newidle_wait_own_wakee;
#define WL_OWN_WAKEE_WAIT_NS	2000000ULL

static void set_own_wakee_until(s32 cpu, u64 until)
{
	volatile u64 *slot;

	if (cpu < 0 || cpu >= WL_MAX_CPUS)
		return;
	slot = MEMBER_VPTR(wl_shared, .own_wakee_until[cpu]);
	if (slot && *slot != until)
		*slot = until;
}
static volatile u32 agent_needed;
/*
 * The agent waits in WL_AGENT_DSQ: set by ops.enqueue() before the insert
 * can be seen, cleared when it runs. Stands in for a DSQ lookup.
 */
static u32 agent_parked;

/* -------------------------------------------------------------------------
 * Maps.
 */
struct {
	__uint(type, BPF_MAP_TYPE_RINGBUF);
	__uint(max_entries, WL_RING_ENTRIES * sizeof(struct wakeup_msg));
} wakeups SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_USER_RINGBUF);
	__uint(max_entries, WL_RING_ENTRIES * sizeof(struct decision_msg));
} decisions SEC(".maps");

struct task_ctx {
	/* Generation: bumped each time the task is queued to the agent. */
	u64 enq_cnt;
	/* When the task was queued to the agent (0 when it was not). */
	u64 enqueue_ns;
	/* When the task entered WL_FALLBACK_DSQ, bpf_ktime_get_ns() (fallback_starving()). */
	u64 fallback_ns;
	/* CLOCK_MONOTONIC stamps for the hop histograms (enum wl_hop). */
	u64 select_mono_ns;
	u64 applied_mono_ns;
	/* Wake-up context recorded by ops.select_cpu(), used by ops.enqueue(). */
	u64 wake_flags;
	u64 select_ns;
	s32 prev_cpu;
	s32 waker_cpu;
	s32 waker_pid;
	u32 waker_context;
	u32 waker_flags;
	u32 select_valid;
	u32 waker_nr_runnable;
	u32 waker_ttwu_pending;
	/* Run-time accounting since the task last slept. */
	u64 start_ns;
	u64 exec_runtime;
	/* When the task last left a CPU: fair.c's exec_start for task_hot(). */
	u64 last_stop_ns;
	/*
	 * The generation (enq_cnt) the task waits in WL_PARK_DSQ for the agent
	 * to decide, 0 when it waits for none: only that decision or
	 * rescue_from_stalled_agent() gets it running. A generation, not a
	 * flag: whoever clears it compares and swaps, so that a CPU finishing
	 * its work for one generation late (the task ran, slept and was queued
	 * again meanwhile) cannot clear the next one's, whose decision would
	 * then be dropped as stale and the task left parked.
	 */
	u64 awaiting_gen;
	/*
	 * A decision for generation decided_gen, recorded by record_decision()
	 * and carried out by move_decided() once the task is found parked (the
	 * agent may read the message before ops.enqueue()'s insert into the
	 * parking queue has completed). Set and cleared with atomic exchanges:
	 * whoever clears it gives back the decision's wl_shared.inflight slot.
	 */
	u32 decision_pending;
	s32 decided_cpu;
	u64 decided_gen;
	u64 decided_slice_ns;
	u64 committed_ns;
	/* Parked in WL_PARK_DSQ with this CPU as its own, plus one (0: not parked). */
	u32 parked_on_plus1;
	/* Counted in queued_hint[] at this slot, plus one (0: not counted). */
	u32 hint_slot_plus1;
	/*
	 * The handoff slot ops.select_cpu() claimed for this wake-up and sent
	 * its message with (wl_shared.handoff), 0 if none: the enqueue that
	 * follows takes the slot's decision or parks the task.
	 */
	u64 handoff_seq;
};

struct {
	__uint(type, BPF_MAP_TYPE_TASK_STORAGE);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__type(key, int);
	__type(value, struct task_ctx);
} task_ctx_stor SEC(".maps");

struct heartbeat {
	struct bpf_timer timer;
};

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, u32);
	__type(value, struct heartbeat);
} heartbeat_timer SEC(".maps");

/* -------------------------------------------------------------------------
 * Helpers.
 */
static struct task_ctx *lookup_task_ctx(const struct task_struct *p)
{
	return bpf_task_storage_get(&task_ctx_stor, (struct task_struct *)p, 0, 0);
}

static bool is_agent(const struct task_struct *p)
{
	return agent_pid && p->pid == agent_pid;
}

static bool is_agent_helper_thread(const struct task_struct *p)
{
	return agent_tgid && p->tgid == agent_tgid && p->pid != agent_pid;
}

/*
 * Per-CPU kthreads (ksoftirqd/N, kworker/N, migration/N) and the reclaim
 * threads must never wait for user space: the agent may itself be waiting on
 * them (a page fault, an RCU callback). Nor must workqueue workers, bound or
 * not: sched_ext's own watchdog is a work item on an unbound worker, and
 * behind a storm's queue it "failed to check in for 5.076s", which ejected
 * us with every task still running fine.
 */
static bool must_bypass_agent(const struct task_struct *p)
{
	if ((p->flags & PF_KTHREAD) && p->nr_cpus_allowed == 1)
		return true;
	return p->flags & (PF_KSWAPD | PF_KCOMPACTD | PF_WQ_WORKER);
}

static struct cpu_state *cpu_state_of(s32 cpu)
{
	/* MEMBER_VPTR: a bounds check the verifier can follow. */
	return MEMBER_VPTR(wl_shared, .cpu_state[cpu]);
}

static bool cpu_valid(s32 cpu)
{
	return cpu >= 0 && cpu < nr_cpu_ids && cpu < WL_MAX_CPUS;
}

/*
 * How many tasks may wait in each CPU's DSQ (slot = the CPU) and in the
 * fallback DSQ (slot WL_HINT_FALLBACK): an upper bound kept without looking
 * the queues up. scx_bpf_dsq_nr_queued() and scx_bpf_dsq_move_to_local()
 * on a user DSQ hash its id, some hundreds of instructions, and the hot
 * paths would make about twenty such lookups per wake-up, most of them on
 * empty queues. A task counts from before its insert can be seen until it is
 * known to have left: it runs (wakelab_running()), is pulled (pull_from()),
 * is queued anew (hint_enter() gives back its old slot) or exits. A task
 * moved by a kfunc is counted right after the move, by whoever moved it,
 * and that one then wakes the CPU if it is idle (note_queued_on()), which
 * pairs with the idle CPU's own look at the hint in wakelab_update_idle(). A task
 * that leaves otherwise (dequeued into another class) only keeps the bound
 * high, which costs lookups; 0 always means empty, so a lookup may be
 * skipped then. (No ops.dequeue() for this: kernels differ in when they
 * call it, and a leave counted early would strand a task.)
 */
#define WL_HINT_FALLBACK	WL_MAX_CPUS
static u32 queued_hint[WL_MAX_CPUS + 1];
/*
 * The sum of the CPU slots of queued_hint (the fallback's left out), kept
 * beside them: 0 says that no CPU's DSQ holds a task, so that a newly-idle
 * CPU need not look at each (busiest_queue()), as fair.c's newidle balance
 * returns at once while the root domain is not overloaded.
 */
static u32 cpu_queued_hint_sum;

static void hint_drop(u32 slot)
{
	u32 *n = MEMBER_VPTR(queued_hint, [slot & (WL_MAX_CPUS * 2 - 1)]);

	if (slot <= WL_HINT_FALLBACK && n && READ_ONCE(*n)) {
		__sync_fetch_and_sub(n, 1);
		if (slot < WL_HINT_FALLBACK && READ_ONCE(cpu_queued_hint_sum))
			__sync_fetch_and_sub(&cpu_queued_hint_sum, 1);
	}
}

/* @tctx's task is about to be inserted into @slot's queue. */
static void hint_enter(struct task_ctx *tctx, u32 slot)
{
	u32 *n, was;

	if (slot > WL_HINT_FALLBACK)
		return;
	n = MEMBER_VPTR(queued_hint, [slot]);
	if (!n)
		return;
	__sync_fetch_and_add(n, 1);
	if (slot < WL_HINT_FALLBACK)
		__sync_fetch_and_add(&cpu_queued_hint_sum, 1);
	if (!tctx)
		return;		/* never known to leave: the bound stays up */
	was = __sync_lock_test_and_set(&tctx->hint_slot_plus1, slot + 1);
	if (was)
		hint_drop(was - 1);
}

/* @tctx's task left the queue it was counted in, if any. */
static void hint_leave(struct task_ctx *tctx)
{
	u32 was;

	if (!tctx)
		return;
	was = __sync_lock_test_and_set(&tctx->hint_slot_plus1, 0);
	if (was)
		hint_drop(was - 1);
}

static bool may_be_queued(u32 slot)
{
	u32 *n = MEMBER_VPTR(queued_hint, [slot & (WL_MAX_CPUS * 2 - 1)]);

	return slot > WL_HINT_FALLBACK || !n || READ_ONCE(*n);
}

/* Tasks in @cpu's own DSQ (0 without a lookup when none can be). */
static u32 cpu_dsq_nr_queued(s32 cpu)
{
	if (cpu < 0 || !may_be_queued(cpu))
		return 0;
	return scx_bpf_dsq_nr_queued(cpu);
}

/*
 * fair.c's rq->nr_running for our tasks on @cpu (see cpu_state.nr_runnable):
 * the current task unless it is idle or the agent, plus what waits in the
 * CPU's own DSQ and local DSQ.
 */
static u32 nr_runnable_on(s32 cpu, s32 curr_pid)
{
	u32 nr = cpu_dsq_nr_queued(cpu) +
		 scx_bpf_dsq_nr_queued(SCX_DSQ_LOCAL_ON | cpu);

	if (curr_pid && curr_pid != agent_pid)
		nr++;
	return nr;
}

/*
 * Copy the rq fields the placement rules read. Unlocked reads of another
 * CPU's rq: they may be stale a moment later, like fair.c's own reads of
 * remote rqs in select_idle_sibling(). Any error is contained to one
 * placement.
 */
static void refresh_cpu_state(s32 cpu, u64 now)
{
	struct cpu_state *cs = cpu_state_of(cpu);
	struct rq *rq;

	if (!cs || !cpu_valid(cpu))
		return;
	rq = bpf_per_cpu_ptr(&runqueues, cpu);
	if (!rq)
		return;
	cs->nr_running = rq->nr_running;
	cs->scx_nr_running = rq->scx.nr_running;
	cs->ttwu_pending = rq->ttwu_pending;
	cs->dsq_queued = cpu_dsq_nr_queued(cpu);
	cs->nr_runnable = nr_runnable_on(cpu, cs->curr_pid);
	cs->refreshed_ns = now;
}

static void refresh_all_cpu_states(u64 now)
{
	s32 cpu;

	bpf_for(cpu, 0, nr_cpu_ids) {
		if (cpu >= WL_MAX_CPUS)
			break;
		refresh_cpu_state(cpu, now);
	}
}

/*
 * floor(log2(v)) by halving (0 for 0 and 1), capped at the last bucket:
 * six steps instead of a loop, on every hop of every wake-up.
 */
static u32 log2_bucket(u64 v)
{
	u32 b = 0;

	if (v >> 32) { v >>= 32; b += 32; }
	if (v >> 16) { v >>= 16; b += 16; }
	if (v >> 8) { v >>= 8; b += 8; }
	if (v >> 4) { v >>= 4; b += 4; }
	if (v >> 2) { v >>= 2; b += 2; }
	if (v >> 1) b += 1;
	return b < WL_LAT_BUCKETS ? b : WL_LAT_BUCKETS - 1;
}

/*
 * cpu_state.nr_runnable between refreshes: BPF adds a task queued on a CPU
 * and takes away one that sleeps, from several CPUs at once (atomics). A
 * racing pair of decrements may wrap it below zero for a moment; the
 * agent reads such a value as 0, and the CPU's next ops.dispatch() sets it
 * exactly again.
 */
static void runnable_add(s32 cpu, s32 delta)
{
	struct cpu_state *cs = cpu_state_of(cpu);

	if (!cs)
		return;
	if (delta > 0)
		__sync_fetch_and_add(&cs->nr_runnable, delta);
	else if (READ_ONCE(cs->nr_runnable))
		__sync_fetch_and_sub(&cs->nr_runnable, -delta);
}

/* Count @from -> now (CLOCK_MONOTONIC) in hop @hop's histogram; 0 = no stamp. */
static void hop_record(u32 hop, u64 from, u64 now)
{
	u32 b;

	if (!from || hop >= WL_NR_HOPS)
		return;
	b = log2_bucket(time_delta(now, from));
	if (b < WL_LAT_BUCKETS)
		__sync_fetch_and_add(&hop_hist[hop][b], 1);
}

/*
 * Time stamps written on one CPU and read on another are compared through
 * time_delta()/time_after(), never by plain u64 subtraction: scx_bpf_now()
 * is the rq clock cached while the rq lock is held, so a CPU may read a
 * "now" a little older than a stamp another CPU just wrote, and the
 * unsigned difference would then be ~2^64 ns.
 */

/*
 * The agent has neither run nor consumed anything for agent_stall_ns. A
 * healthy agent runs at least every heartbeat, work or not; a busy one may
 * run for seconds without a new ops.running() (its slice is refilled while
 * it has work), so consuming counts as progress too.
 */
static u64 seen_consumed, last_progress_ns;

static bool agent_quiet(u64 now)
{
	u64 consumed = READ_ONCE(wl_shared.agent_consumed);
	u64 last = READ_ONCE(wl_shared.agent_last_run_ns);

	if (consumed != seen_consumed) {
		seen_consumed = consumed;
		last_progress_ns = now;
		return false;
	}
	if (time_after(last_progress_ns, last))
		last = last_progress_ns;
	return last && time_delta(now, last) > agent_stall_ns;
}

/*
 * Stalled: quiet while messages wait for it. agent_quiet() runs first either
 * way, so that its progress bookkeeping sees every change of agent_consumed.
 */
static bool agent_stalled(u64 now)
{
	bool quiet = agent_quiet(now);

	return READ_ONCE(wl_shared.nr_ring_msgs) != READ_ONCE(wl_shared.agent_consumed) && quiet;
}

/*
 * When each message in the ring was queued, by its sequence number (the
 * nr_ring_msgs it was counted as): the entry at agent_consumed is the oldest
 * message the agent has not read, so it says how far behind the agent is.
 * Approximate under races (a CPU may count its message a little before or
 * after another's), which is all a threshold of agent_stall_ns needs.
 */
static u64 ring_msg_ns[WL_RING_ENTRIES];

static void count_ring_msg(u64 now)
{
	u64 seq = __sync_fetch_and_add(&wl_shared.nr_ring_msgs, 1);
	u64 *ts = MEMBER_VPTR(ring_msg_ns, [seq % WL_RING_ENTRIES]);

	if (ts)
		*ts = now;
}

/* How long the oldest message not yet read by the agent has waited. */
static u64 agent_lag_ns(u64 now)
{
	u64 consumed = READ_ONCE(wl_shared.agent_consumed);
	u64 *ts;

	if (READ_ONCE(wl_shared.nr_ring_msgs) == consumed)
		return 0;
	ts = MEMBER_VPTR(ring_msg_ns, [consumed % WL_RING_ENTRIES]);
	if (!ts || !*ts)
		return 0;
	return time_delta(now, *ts);
}

/*
 * Work for the agent: tasks waiting for a placement, decisions it could not
 * submit yet, a heartbeat. Sleep reports alone are not worth a context
 * switch: they wait in the ring for the next wake-up (which the agent reads
 * after them, in order) or the heartbeat, unless they fill half the ring.
 */
static bool agent_has_work(void)
{
	if (agent_needed || READ_ONCE(wl_shared.agent_holding))
		return true;
	if (READ_ONCE(wl_shared.nr_ring_wakeups) != READ_ONCE(wl_shared.agent_consumed_wakeups))
		return true;
	return bpf_ringbuf_query(&wakeups, BPF_RB_AVAIL_DATA) >
	       WL_RING_ENTRIES * sizeof(struct wakeup_msg) / 2;
}

/* How long a kicked idle CPU has to pick the agent up before any CPU may. */
#define WL_AGENT_KICK_GRACE_NS	(200 * 1000ULL)

static u64 agent_kick_ns;

/* The agent's home CPU when it is pinned (the default), else -1. */
static s32 agent_home(void)
{
	return READ_ONCE(wl_shared.agent_home_cpu);
}

/* Where the agent runs next: its home CPU, or the CPU it last ran on. */
static s32 agent_target_cpu(void)
{
	s32 home = agent_home();

	return home >= 0 ? home : READ_ONCE(wl_shared.agent_cpu);
}

static void kick_agent_cpu(u64 flags)
{
	s32 cpu = agent_target_cpu();

	if (cpu_valid(cpu))
		scx_bpf_kick_cpu(cpu, flags);
}

/*
 * Get the agent onto its CPU soon. While it runs there is nothing to do: a
 * spinning agent sees the new message in the ring, and one about to park
 * finds the work in ops.dispatch() and runs on. An idle CPU is kicked. A
 * pinned agent's CPU that runs a task of ours is preempted, unless that
 * task is @sync_waker_cpu's sync waker, about to sleep and leave the CPU to
 * the agent (wakelab_tick() preempts it if it does not). An unpinned agent
 * runs at the next ops.dispatch() of any CPU, at worst at the heartbeat.
 */
static void wake_agent(s32 sync_waker_cpu)
{
	s32 cpu = agent_target_cpu();
	struct cpu_state *cs = cpu_state_of(cpu);

	if (!cs || !cpu_valid(cpu) || READ_ONCE(cs->curr_pid) == agent_pid)
		return;
	if (cs->idle) {
		agent_kick_ns = scx_bpf_now();
		scx_bpf_kick_cpu(cpu, SCX_KICK_IDLE);
	} else if (agent_home() >= 0 && cpu != sync_waker_cpu) {
		__sync_fetch_and_add(&nr_agent_preempt_kicks, 1);
		scx_bpf_kick_cpu(cpu, SCX_KICK_PREEMPT);
	}
}

/*
 * May the agent run on @cpu now? A pinned agent only on its home CPU (the
 * kernel would refuse to move it elsewhere anyway). An unpinned one on its
 * last CPU; elsewhere only when its last CPU will not take it soon: that
 * CPU runs another task, or it was kicked out of idle more than
 * WL_AGENT_KICK_GRACE_NS ago and still has not taken it. Every hop of the
 * agent is a task migration (and a cold cache for its placement state),
 * which a benchmark's migration count would charge to the placement policy.
 */
static bool agent_may_run_on(s32 cpu, u64 now)
{
	s32 last = READ_ONCE(wl_shared.agent_cpu);
	struct cpu_state *cs;

	if (agent_home() >= 0)
		return cpu == agent_home();
	if (!cpu_valid(last) || last == cpu)
		return true;
	cs = cpu_state_of(last);
	if (!cs || !cs->idle)
		return true;
	return time_delta(now, agent_kick_ns) > WL_AGENT_KICK_GRACE_NS;
}

static void dispatch_fallback(struct task_struct *p, u64 enq_flags)
{
	struct task_ctx *tctx = lookup_task_ctx(p);

	if (tctx)
		tctx->fallback_ns = bpf_ktime_get_ns();
	hint_enter(tctx, WL_HINT_FALLBACK);
	scx_bpf_dsq_insert(p, WL_FALLBACK_DSQ, slice_ns, enq_flags);
	scx_bpf_kick_cpu(scx_bpf_task_cpu(p), SCX_KICK_IDLE);
}

/*
 * A task now waits in @cpu's queue (its DSQ or local DSQ). If @cpu is the
 * agent's home and the agent runs there, ask it to stop spinning and yield;
 * if @cpu is idle, wake it. The idle test pairs with wakelab_update_idle(),
 * which looks at its queue after publishing "idle": either this side sees
 * the CPU idle and kicks it, or that side sees the task.
 */
static void note_queued_on(s32 cpu)
{
	struct cpu_state *cs = cpu_state_of(cpu);

	if (!cs || !cpu_valid(cpu))
		return;
	if (cpu == agent_home() && READ_ONCE(cs->curr_pid) == agent_pid) {
		if (!READ_ONCE(wl_shared.agent_yield_request))
			WRITE_ONCE(wl_shared.agent_yield_request, 1);
	} else if (READ_ONCE(cs->idle) && cpu != bpf_get_smp_processor_id()) {
		scx_bpf_kick_cpu(cpu, SCX_KICK_IDLE);
	}
}

/* -------------------------------------------------------------------------
 * Decisions: recorded when they arrive, carried out once the task is parked.
 */


/*
 * Parked tasks per CPU they were queued on (their prev): a CPU that is
 * woken by such a wake-up, to find nothing to run because the task waits
 * for the agent, is not a CPU going idle (park_done(), newidle_balance()).
 */
static u32 parked_on[WL_MAX_CPUS];

static void park_note(struct task_ctx *tctx, s32 cpu)
{
	u32 *n;

	if (cpu < 0 || cpu >= WL_MAX_CPUS)
		return;
	n = MEMBER_VPTR(parked_on, [cpu]);
	if (!n)
		return;
	__sync_fetch_and_add(n, 1);
	tctx->parked_on_plus1 = cpu + 1;
}

/* The task left the parking queue (moved, rescued, dequeued): once only. */
static void park_done(struct task_ctx *tctx)
{
	u32 was = __sync_lock_test_and_set(&tctx->parked_on_plus1, 0);
	u32 *n;

	if (!was || was > WL_MAX_CPUS)
		return;
	n = MEMBER_VPTR(parked_on, [was - 1]);
	if (n && READ_ONCE(*n))
		__sync_fetch_and_sub(n, 1);
}

/* Give back a decision's wl_shared.inflight slot: carried out, or void. */
static void inflight_done(s32 cpu)
{
	u32 *slot;

	if (cpu < 0 || cpu >= WL_MAX_CPUS)
		return;
	slot = MEMBER_VPTR(wl_shared, .inflight[cpu]);
	if (slot && READ_ONCE(*slot))
		__sync_fetch_and_sub(slot, 1);
}

/*
 * Forget @tctx's recorded decision, if it has one: carried out, or void
 * because the task was queued again, rescued or exits. Returns whether it
 * had one.
 */
static bool clear_decision(struct task_ctx *tctx)
{
	if (!__sync_lock_test_and_set(&tctx->decision_pending, 0))
		return false;
	__sync_fetch_and_sub(&wl_shared.decisions_pending, 1);
	inflight_done(tctx->decided_cpu);
	return true;
}

/*
 * The handoff (wl_shared.handoff in intf.h). Sequence numbers start at 1;
 * a slot's word keeps their low 46 bits, which do not wrap in practice.
 */
static u64 handoff_seq_next;

static u64 handoff_word(u64 seq, s32 cpu, u32 state)
{
	return (seq << WL_HANDOFF_SEQ_SHIFT) | ((u64)(u32)cpu << WL_HANDOFF_CPU_SHIFT) | state;
}

static bool handoff_is(u64 word, u64 seq, u32 state)
{
	return (word >> WL_HANDOFF_SEQ_SHIFT) == ((seq << WL_HANDOFF_SEQ_SHIFT) >> WL_HANDOFF_SEQ_SHIFT) &&
	       (word & WL_HANDOFF_STATE_MASK) == state;
}

static s32 handoff_cpu(u64 word)
{
	return (word >> WL_HANDOFF_CPU_SHIFT) & 0xffff;
}

static struct handoff_slot *handoff_slot_of(u64 seq)
{
	u32 i = seq & (WL_HANDOFF_SLOTS - 1);

	return MEMBER_VPTR(wl_shared, .handoff[i]);
}

/*
 * Claim a slot for a wake-up about to be sent from ops.select_cpu(): its
 * sequence number, or 0 when the slot still holds a decision nobody has
 * collected (then the wake-up is sent from ops.enqueue(), as without the
 * handoff).
 */
static u64 handoff_claim(void)
{
	u64 seq = __sync_fetch_and_add(&handoff_seq_next, 1) + 1;
	struct handoff_slot *slot = handoff_slot_of(seq);
	u64 old;

	if (!slot)
		return 0;
	old = READ_ONCE(slot->word);
	if ((old & WL_HANDOFF_STATE_MASK) == WL_HANDOFF_DECIDED ||
	    __sync_val_compare_and_swap(&slot->word, old,
					handoff_word(seq, 0, WL_HANDOFF_WAITING)) != old) {
		__sync_fetch_and_add(&nr_handoff_slot_busy, 1);
		return 0;
	}
	return seq;
}

/*
 * Give @seq's slot up if nobody has taken it; a decision already there is
 * dropped and its inflight count given back. Returns whether one was.
 */
static bool handoff_release(u64 seq)
{
	struct handoff_slot *slot = handoff_slot_of(seq);
	u64 got;

	if (!slot)
		return false;
	got = __sync_val_compare_and_swap(&slot->word, handoff_word(seq, 0, WL_HANDOFF_WAITING),
					  handoff_word(seq, 0, WL_HANDOFF_FREE));
	if (!handoff_is(got, seq, WL_HANDOFF_DECIDED))
		return false;
	WRITE_ONCE(slot->word, handoff_word(seq, 0, WL_HANDOFF_FREE));
	inflight_done(handoff_cpu(got));
	return true;
}

/*
 * The task is not enqueued as the wake-up its slot was claimed for (it is
 * requeued, or exits): give the slot up. Its decision, if the agent made
 * one, is stale.
 */
static void handoff_cancel(struct task_ctx *tctx)
{
	u64 seq = tctx->handoff_seq;

	if (!seq)
		return;
	tctx->handoff_seq = 0;
	if (handoff_release(seq))
		__sync_fetch_and_add(&nr_stale_decisions, 1);
}

/*
 * Record the agent's decision @d for its task. It is carried out by
 * apply_parked() once the task is found in the parking queue, which is
 * at once unless the agent was faster than ops.enqueue()'s insert. Returns
 * whether it was recorded: not if the task is gone, or was queued again or
 * rescued since (its generation moved on; a newer message is on its way, or
 * none is needed).
 *
 * A race we accept: if the task is queued again (or rescued) between the
 * generation test and the exchange below, the stale decision stays
 * recorded until apply_parked() sees that the task waits for another
 * generation, or the task's next enqueue clears it; meanwhile its CPU
 * counts one wake-up too many on its way.
 */
static bool record_decision(const struct decision_msg *d)
{
	struct task_struct *p;
	struct task_ctx *tctx;
	bool ok = false;

	p = bpf_task_from_pid(d->pid);
	if (!p) {
		inflight_done(d->cpu);
		__sync_fetch_and_add(&nr_decisions_task_gone, 1);
		return false;
	}
	tctx = lookup_task_ctx(p);
	if (!tctx || READ_ONCE(tctx->awaiting_gen) != d->enq_cnt) {
		inflight_done(d->cpu);
		__sync_fetch_and_add(&nr_stale_decisions, 1);
		goto out;
	}
	clear_decision(tctx);
	tctx->decided_cpu = d->cpu;
	tctx->decided_gen = d->enq_cnt;
	tctx->decided_slice_ns = d->slice_ns;
	tctx->committed_ns = d->committed_ns;
	if (!__sync_lock_test_and_set(&tctx->decision_pending, 1))
		__sync_fetch_and_add(&wl_shared.decisions_pending, 1);
	ok = true;
out:
	bpf_task_release(p);
	return ok;
}

/*
 * Where a task decided for @decided goes, checked for what the agent could
 * not know when it decided: the CPU may be gone or out of the task's
 * affinity by now, or the task migration-disabled on @prev. Such a decision
 * is bounced to @prev; a task that may not run on @prev either (its affinity
 * changed) goes to the fallback queue, as does WL_CPU_ANY. An idle CPU is
 * claimed and gets the task in its local DSQ, a busy one in its own queue.
 * One rule for both roads a decision takes (apply_parked() and
 * carry_out_handed()). *@cpu: the CPU the task is counted on.
 */
static u64 decided_dsq(struct task_struct *p, s32 decided, s32 prev, s32 *cpu)
{
	*cpu = prev;
	if (decided == WL_CPU_ANY) {
		__sync_fetch_and_add(&nr_any_cpu_decisions, 1);
		return WL_FALLBACK_DSQ;
	}
	if (cpu_valid(decided) && bpf_cpumask_test_cpu(decided, p->cpus_ptr) &&
	    !(p->migration_disabled && decided != prev))
		*cpu = decided;
	else
		__sync_fetch_and_add(&nr_bounced_decisions, 1);
	if (!bpf_cpumask_test_cpu(*cpu, p->cpus_ptr))
		return WL_FALLBACK_DSQ;
	if (scx_bpf_test_and_clear_cpu_idle(*cpu))
		return SCX_DSQ_LOCAL_ON | *cpu;
	return *cpu;
}

/*
 * The queue hint of a decided task queued on @dsq_id (decided_dsq()), set
 * while the task still waits for this decision. A local DSQ needs none.
 */
static void hint_decided(struct task_ctx *tctx, u64 dsq_id, s32 cpu, u64 now)
{
	if (dsq_id == WL_FALLBACK_DSQ) {
		tctx->fallback_ns = now;
		hint_enter(tctx, WL_HINT_FALLBACK);
	} else if (!(dsq_id & SCX_DSQ_LOCAL_ON)) {
		hint_enter(tctx, cpu);
	}
}

/*
 * A decided task was queued on @dsq_id for @cpu: count it on that CPU, close
 * its commit→apply hop, and make sure a CPU runs it (an idle CPU claimed by
 * decided_dsq() is woken by the insert or move itself).
 */
static void note_decided_queued(u64 dsq_id, s32 cpu, s32 prev, u64 committed, u64 now)
{
	if (dsq_id != WL_FALLBACK_DSQ)
		runnable_add(cpu, 1);
	hop_record(WL_HOP_COMMIT_APPLY, committed, now);
	/* Placed: its last CPU need not keep waiting for it. */
	if (newidle_wait_own_wakee)
		set_own_wakee_until(prev, 0);
	__sync_fetch_and_add(&nr_agent_dispatches, 1);
	if (dsq_id & SCX_DSQ_LOCAL_ON) {
		__sync_fetch_and_add(&nr_applied_to_idle, 1);
	} else if (dsq_id < WL_MAX_CPUS) {
		__sync_fetch_and_add(&nr_applied_to_queue, 1);
		note_queued_on(cpu);
	} else {
		scx_bpf_kick_cpu(prev, SCX_KICK_IDLE);
	}
}

/*
 * Carry out the recorded decisions of tasks in the parking queue, oldest
 * first, until none is left pending (or the queue ends). Called from the agent's apply_decisions run (the fast
 * lane), from ops.dispatch() after draining the decision ring (the
 * fallback) and from the heartbeat (decisions that arrived before their
 * task was parked).
 *
 * Where a task goes: an idle CPU (claimed in the kernel's idle mask) takes
 * it straight into its local queue, and the move itself reschedules it; a
 * busy CPU gets it in its own queue, where it waits behind the running task
 * and where a newly-idle CPU may pull it from, as from a fair runqueue.
 * BPF re-checks what the agent may not know (decided_dsq()): a CPU outside
 * the task's affinity (or a migration-disabled task) would make the kernel
 * eject us, so the task stays on its own CPU instead, or goes to the
 * fallback queue.
 */
static void apply_parked(bool late)
{
	struct task_struct *p;
	u64 now = bpf_ktime_get_ns();

	if (!READ_ONCE(wl_shared.decisions_pending))
		return;
	/*
	 * No counter in this loop: the iterator ends with the queue, and a
	 * count the verifier tracks would keep it from seeing the loop
	 * converge. The shared pending count, read from memory, says when to
	 * stop.
	 */
	bpf_for_each(scx_dsq, p, WL_PARK_DSQ, 0) {
		struct task_ctx *tctx = lookup_task_ctx(p);
		u64 dsq_id, gen, committed;
		s32 cpu, decided, prev;
		bool moved;

		if (!tctx || !READ_ONCE(tctx->decision_pending))
			continue;
		/*
		 * Claim the decision before acting on it: a concurrent
		 * apply_parked() (the agent's and the heartbeat's), a rescue
		 * or the task's next enqueue may want it too, and only the one
		 * that clears the flag carries it out or drops it.
		 */
		if (!__sync_lock_test_and_set(&tctx->decision_pending, 0))
			continue;
		__sync_fetch_and_sub(&wl_shared.decisions_pending, 1);
		gen = tctx->decided_gen;
		decided = tctx->decided_cpu;
		if (gen != READ_ONCE(tctx->awaiting_gen)) {
			inflight_done(decided);
			__sync_fetch_and_add(&nr_stale_decisions, 1);
			continue;
		}
		prev = scx_bpf_task_cpu(p);
		dsq_id = decided_dsq(p, decided, prev, &cpu);
		if (tctx->decided_slice_ns)
			scx_bpf_dsq_move_set_slice(BPF_FOR_EACH_ITER, tctx->decided_slice_ns);
		committed = tctx->committed_ns;
		park_done(tctx);
		tctx->applied_mono_ns = now;
		/*
		 * A failed move means the task left the parking queue since
		 * the iterator saw it (dequeued, or moved by a rescue): the
		 * decision is void, its next enqueue is a new generation.
		 */
		moved = scx_bpf_dsq_move(BPF_FOR_EACH_ITER, p, dsq_id, 0);
		inflight_done(decided);
		if (!moved) {
			tctx->applied_mono_ns = 0;
			continue;
		}
		/*
		 * From here the task may already run on its CPU, and even have
		 * slept and been queued to the agent again, before this CPU
		 * goes on: its state is touched only while it still waits for
		 * this generation. The queue hint goes in after the move, so
		 * that a task's slot is always the queue it is in;
		 * note_queued_on() then wakes an idle CPU that looked at the
		 * hint too early. A task that ran first skips it.
		 */
		if (__sync_bool_compare_and_swap(&tctx->awaiting_gen, gen, 0))
			hint_decided(tctx, dsq_id, cpu, now);
		note_decided_queued(dsq_id, cpu, prev, committed, now);
		if (late)
			__sync_fetch_and_add(&nr_applied_late, 1);
		if (!READ_ONCE(wl_shared.decisions_pending))
			break;
	}
	if (READ_ONCE(wl_shared.decisions_pending))
		__sync_fetch_and_add(&nr_apply_misses, 1);
}

/* -------------------------------------------------------------------------
 * Ops.
 */
/*
 * Fill @msg with @p's wake-up (or requeue) for the agent: @enq_flags as
 * ops.enqueue() got them, @selected when ops.select_cpu()'s stash in @tctx
 * is this wake-up's. Generation and time: tctx->enq_cnt and enqueue_ns.
 */
static void fill_wakeup_msg(struct wakeup_msg *msg, struct task_struct *p,
			    struct task_ctx *tctx, u64 enq_flags, bool selected)
{
	msg->kind = WL_MSG_ENQUEUE;
	msg->enqueue_mono_ns = bpf_ktime_get_ns();
	msg->pid = p->pid;
	msg->task_cpu = scx_bpf_task_cpu(p);
	msg->nr_cpus_allowed = p->nr_cpus_allowed;
	msg->enq_flags = enq_flags;
	msg->enq_cnt = tctx->enq_cnt;
	msg->enqueue_ns = tctx->enqueue_ns;
	msg->weight = p->scx.weight;
	msg->exec_runtime = tctx->exec_runtime;
	msg->handoff_seq = 0;
	msg->flags = 0;
	if (enq_flags & SCX_ENQ_WAKEUP)
		msg->flags |= WL_MSG_WAKEUP;
	if (p->flags & PF_KTHREAD)
		msg->flags |= WL_MSG_KTHREAD;
	if (selected) {
		msg->flags |= WL_MSG_SELECTED | tctx->waker_flags;
		msg->prev_cpu = tctx->prev_cpu;
		msg->waker_cpu = tctx->waker_cpu;
		msg->waker_pid = tctx->waker_pid;
		msg->waker_context = tctx->waker_context;
		msg->wake_flags = tctx->wake_flags;
		msg->select_ns = tctx->select_ns;
		msg->waker_nr_runnable = tctx->waker_nr_runnable;
		msg->waker_ttwu_pending = tctx->waker_ttwu_pending;
	} else {
		__sync_fetch_and_add(&nr_enqueue_without_select, 1);
		msg->prev_cpu = msg->task_cpu;
		msg->waker_cpu = -1;
		msg->waker_pid = 0;
		msg->waker_context = WAKER_TASK;
		msg->wake_flags = 0;
		msg->select_ns = 0;
		msg->waker_nr_runnable = 0;
		msg->waker_ttwu_pending = 0;
	}
	__builtin_memcpy(msg->comm, p->comm, sizeof(msg->comm));
	/*
	 * A fixed-size read of the task's cpumask. If the kernel's NR_CPUS is
	 * smaller than WL_MAX_CPUS the tail bits are whatever follows the mask;
	 * they describe CPUs that do not exist and the agent ignores them.
	 * Most tasks may run anywhere: then the flag says so and the mask is
	 * not copied (all ones for the agent).
	 */
	if (p->nr_cpus_allowed >= nr_cpu_ids) {
		msg->flags |= WL_MSG_ALL_CPUS;
	} else if (bpf_probe_read_kernel(msg->cpus_allowed, sizeof(msg->cpus_allowed),
					 p->cpus_ptr)) {
		msg->flags |= WL_MSG_ALL_CPUS;
	}
}

/*
 * Send @p's wake-up to the agent now, from ops.select_cpu() on the waker's
 * CPU, with a handoff slot (wl_shared.handoff): the kernel sends the
 * wake-up on to the wakee's CPU only after this returns (an IPI, with
 * queued wake-ups), and a polling agent may have decided by the time
 * ops.enqueue() runs there, which then queues the task on the decided CPU
 * itself. What the agent sees is the same message ops.enqueue() would
 * send, a little earlier: closer to the moment fair.c decides, in
 * select_task_rq() on the waker's CPU. Anything in the way (not a
 * ttwu wake-up, a task the agent does not place, a stalled agent, a full
 * ring, no free slot) leaves the message to ops.enqueue(), as before.
 */
static void send_from_select(struct task_struct *p, struct task_ctx *tctx)
{
	struct wakeup_msg *msg;
	u64 now, seq;

	handoff_cancel(tctx);
	if (!handoff_on || !(tctx->wake_flags & SCX_WAKE_TTWU) || must_bypass_agent(p) ||
	    is_agent_helper_thread(p))
		return;
	now = scx_bpf_now();
	if (agent_stalled(now) || agent_lag_ns(now) > agent_stall_ns)
		return;
	if (ring_limit && READ_ONCE(wl_shared.nr_ring_msgs) -
			  READ_ONCE(wl_shared.agent_consumed) >= ring_limit)
		return;
	seq = handoff_claim();
	if (!seq)
		return;
	msg = bpf_ringbuf_reserve(&wakeups, sizeof(*msg), 0);
	if (!msg) {
		handoff_release(seq);
		return;
	}
	/* An older decision for this task is void now. */
	if (clear_decision(tctx))
		__sync_fetch_and_add(&nr_stale_decisions, 1);
	tctx->enq_cnt++;
	tctx->enqueue_ns = now;
	tctx->applied_mono_ns = 0;
	tctx->handoff_seq = seq;
	fill_wakeup_msg(msg, p, tctx, SCX_ENQ_WAKEUP, true);
	msg->flags |= WL_MSG_HANDOFF;
	msg->handoff_seq = seq;
	if (newidle_wait_own_wakee && (tctx->wake_flags & SCX_WAKE_SYNC) &&
	    tctx->waker_cpu == tctx->prev_cpu)
		set_own_wakee_until(tctx->prev_cpu, now + WL_OWN_WAKEE_WAIT_NS);
	WRITE_ONCE(tctx->awaiting_gen, tctx->enq_cnt);
	bpf_ringbuf_submit(msg, BPF_RB_NO_WAKEUP);
	count_ring_msg(now);
	__sync_fetch_and_add(&wl_shared.nr_ring_wakeups, 1);
	__sync_fetch_and_add(&nr_handoff_msgs, 1);
	wake_agent((tctx->wake_flags & SCX_WAKE_SYNC) ? tctx->waker_cpu : -1);
}

/*
 * The agent decided @p's wake-up before its enqueue (the handoff): queue it
 * on @decided from ops.enqueue() itself, by the rule apply_parked() follows
 * (decided_dsq()).
 */
static void carry_out_handed(struct task_struct *p, struct task_ctx *tctx, s32 decided,
			     u64 committed, u64 enq_flags)
{
	s32 prev = scx_bpf_task_cpu(p), cpu;
	u64 now = bpf_ktime_get_ns(), dsq_id;

	dsq_id = decided_dsq(p, decided, prev, &cpu);
	__sync_bool_compare_and_swap(&tctx->awaiting_gen, tctx->enq_cnt, 0);
	tctx->applied_mono_ns = now;
	inflight_done(decided);
	__sync_fetch_and_add(&nr_handoffs, 1);
	/* From ops.enqueue() the insert takes effect on return: hint first. */
	hint_decided(tctx, dsq_id, cpu, now);
	scx_bpf_dsq_insert(p, dsq_id, slice_ns, enq_flags);
	note_decided_queued(dsq_id, cpu, prev, committed, now);
}

/*
 * ops.enqueue() of a wake-up whose message ops.select_cpu() sent: take the
 * agent's decision if it is in the slot already, else park the task for
 * apply_decisions, as for any other wake-up.
 */
static void enqueue_handed(struct task_struct *p, struct task_ctx *tctx, u64 enq_flags)
{
	u64 seq = tctx->handoff_seq, got = 0;
	struct handoff_slot *slot = handoff_slot_of(seq);

	tctx->handoff_seq = 0;
	tctx->select_valid = 0;
	hop_record(WL_HOP_SELECT_ENQUEUE, tctx->select_mono_ns, bpf_ktime_get_ns());
	if (slot)
		got = __sync_val_compare_and_swap(&slot->word,
						  handoff_word(seq, 0, WL_HANDOFF_WAITING),
						  handoff_word(seq, 0, WL_HANDOFF_PARKED));
	if (slot && handoff_is(got, seq, WL_HANDOFF_DECIDED)) {
		u64 committed = READ_ONCE(slot->committed_ns);

		WRITE_ONCE(slot->word, handoff_word(seq, 0, WL_HANDOFF_FREE));
		carry_out_handed(p, tctx, handoff_cpu(got), committed, enq_flags);
		return;
	}
	/* Parked: only the agent's decision (apply_decisions) moves it on. */
	scx_bpf_dsq_insert(p, WL_PARK_DSQ, slice_ns, enq_flags);
	park_note(tctx, scx_bpf_task_cpu(p));
}

s32 BPF_STRUCT_OPS(wakelab_select_cpu, struct task_struct *p, s32 prev_cpu,
		   u64 wake_flags)
{
	struct task_struct *waker = bpf_get_current_task_btf();
	struct task_ctx *tctx;
	u32 waker_ctx = WAKER_TASK;

	if (is_agent(p))
		return prev_cpu;
	tctx = lookup_task_ctx(p);
	if (!tctx)
		return prev_cpu;

	/*
	 * The kernel's in_task() test, which seed 1 (Barry Song) adds to the
	 * sync shortcut: a wake-up from softirq or hardirq says nothing about
	 * the task that happens to run on this CPU.
	 */
	if (bpf_in_nmi()) {
		waker_ctx = WAKER_NMI;
	} else if (bpf_in_hardirq()) {
		waker_ctx = WAKER_HARDIRQ;
		__sync_fetch_and_add(&nr_select_hardirq_ctx, 1);
	} else if (bpf_in_serving_softirq()) {
		waker_ctx = WAKER_SOFTIRQ;
		__sync_fetch_and_add(&nr_select_softirq_ctx, 1);
	} else {
		__sync_fetch_and_add(&nr_select_task_ctx, 1);
	}

	tctx->wake_flags = wake_flags;
	tctx->select_ns = scx_bpf_now();
	tctx->select_mono_ns = bpf_ktime_get_ns();
	tctx->prev_cpu = prev_cpu;
	tctx->waker_cpu = bpf_get_smp_processor_id();
	tctx->waker_pid = waker->pid;
	tctx->waker_context = waker_ctx;
	tctx->waker_flags = 0;
	if (waker->flags & PF_EXITING)
		tctx->waker_flags |= WL_MSG_WAKER_EXITING;
	if ((waker->flags & PF_KTHREAD) && waker->nr_cpus_allowed == 1)
		tctx->waker_flags |= WL_MSG_WAKER_PCPU_KTHREAD;
	{
		s32 this_cpu = tctx->waker_cpu;
		struct rq *rq = bpf_per_cpu_ptr(&runqueues, this_cpu);

		/*
		 * The current task counts as runnable: the waker itself, or the
		 * task a softirq interrupted (pid 0 when it interrupted idle).
		 */
		tctx->waker_nr_runnable = nr_runnable_on(this_cpu, waker->pid);
		tctx->waker_ttwu_pending = rq ? rq->ttwu_pending : 0;
	}
	tctx->select_valid = 1;
	send_from_select(p, tctx);

	/* Decide nothing here: the agent decides. */
	return prev_cpu;
}

static void queue_to_agent(struct task_struct *p, struct task_ctx *tctx,
			   u64 enq_flags)
{
	struct wakeup_msg *msg;
	u64 now = scx_bpf_now();
	s32 msg_task_cpu;
	/*
	 * ops.select_cpu() ran for this wake-up: its stash is consumed (and
	 * cleared) by the enqueue that follows it, which with queued wake-ups
	 * runs later on the target CPU, where SCX_ENQ_CPU_SELECTED may be
	 * missing. A stale stash cannot survive an enqueue.
	 */
	bool selected = tctx->select_valid && (enq_flags & SCX_ENQ_WAKEUP);

	if (tctx->handoff_seq) {
		if (selected) {
			enqueue_handed(p, tctx, enq_flags);
			return;
		}
		handoff_cancel(tctx);
	}
	/* An older decision for this task is void now; it left the parking queue. */
	if (clear_decision(tctx))
		__sync_fetch_and_add(&nr_stale_decisions, 1);
	park_done(tctx);

	/*
	 * The agent has not run for long while tasks wait for it (stopped,
	 * starved, dying), or it is so far behind that this task would wait
	 * agent_stall_ns just to be read: don't make things worse, run the
	 * task without it.
	 */
	if (agent_stalled(now) || agent_lag_ns(now) > agent_stall_ns) {
		__sync_fetch_and_add(&nr_agent_stall_fallbacks, 1);
		tctx->select_valid = 0;
		dispatch_fallback(p, enq_flags);
		return;
	}

	msg = NULL;
	if (!ring_limit || READ_ONCE(wl_shared.nr_ring_msgs) -
			   READ_ONCE(wl_shared.agent_consumed) < ring_limit)
		msg = bpf_ringbuf_reserve(&wakeups, sizeof(*msg), 0);
	if (!msg) {
		__sync_fetch_and_add(&nr_ring_full_fallbacks, 1);
		tctx->select_valid = 0;
		dispatch_fallback(p, enq_flags);
		wake_agent(-1);
		return;
	}

	tctx->enq_cnt++;
	tctx->enqueue_ns = now;
	tctx->applied_mono_ns = 0;

	fill_wakeup_msg(msg, p, tctx, enq_flags, selected);
	tctx->select_valid = 0;
	if (selected)
		hop_record(WL_HOP_SELECT_ENQUEUE, tctx->select_mono_ns, msg->enqueue_mono_ns);
	if (newidle_wait_own_wakee && selected && (msg->wake_flags & SCX_WAKE_SYNC) &&
	    msg->waker_cpu == msg->prev_cpu)
		set_own_wakee_until(msg->prev_cpu, now + WL_OWN_WAKEE_WAIT_NS);
	WRITE_ONCE(tctx->awaiting_gen, tctx->enq_cnt);
	msg_task_cpu = msg->task_cpu;
	bpf_ringbuf_submit(msg, BPF_RB_NO_WAKEUP);
	count_ring_msg(now);
	__sync_fetch_and_add(&wl_shared.nr_ring_wakeups, 1);
	/*
	 * Park it: only the agent's decision moves it on. The insert takes
	 * effect when this callback returns, a moment after the agent may
	 * have read the message (record_decision() copes).
	 */
	scx_bpf_dsq_insert(p, WL_PARK_DSQ, slice_ns, enq_flags);
	park_note(tctx, msg_task_cpu);
	wake_agent(selected && (tctx->wake_flags & SCX_WAKE_SYNC) ? tctx->waker_cpu : -1);
}

/*
 * Not a wake-up: the task's slice ended, it was preempted, it was just
 * forked (onto its parent's CPU, which ops.select_cpu() returned), or a
 * property of it changed. fair.c keeps such a task on its runqueue and
 * select_task_rq() is not involved, so neither is the agent, whose answer
 * would be the task's CPU: it is queued there at once.
 */
static void requeue_in_place(struct task_struct *p, struct task_ctx *tctx,
			     u64 enq_flags)
{
	s32 cpu = scx_bpf_task_cpu(p);

	/* Parked and requeued (a property change): it runs without a decision. */
	handoff_cancel(tctx);
	WRITE_ONCE(tctx->awaiting_gen, 0);
	if (clear_decision(tctx))
		__sync_fetch_and_add(&nr_stale_decisions, 1);
	park_done(tctx);
	tctx->select_valid = 0;
	__sync_fetch_and_add(&nr_requeues_in_place, 1);
	if (!cpu_valid(cpu) || !bpf_cpumask_test_cpu(cpu, p->cpus_ptr)) {
		dispatch_fallback(p, enq_flags);
		return;
	}
	hint_enter(tctx, cpu);
	scx_bpf_dsq_insert(p, cpu, slice_ns, enq_flags);
	note_queued_on(cpu);
}

void BPF_STRUCT_OPS(wakelab_enqueue, struct task_struct *p, u64 enq_flags)
{
	struct task_ctx *tctx;

	if (break_verifier) {
		u64 *bogus = (u64 *)(long)bpf_get_prandom_u32();

		if (*bogus == 42)
			return;
	}

	/* The agent waits in its own queue until it has work (ops.dispatch). */
	if (is_agent(p)) {
		WRITE_ONCE(agent_parked, 1);
		scx_bpf_dsq_insert(p, WL_AGENT_DSQ, slice_ns, enq_flags);
		__sync_fetch_and_add(&nr_direct_dispatches, 1);
		return;
	}

	/*
	 * SCX_ENQ_LAST: the task's slice ended and nothing else wants its CPU.
	 * We ask for these enqueues (SCX_OPS_ENQ_LAST) only so that the agent's
	 * sched_yield() parks it in its queue instead of spinning; everyone else
	 * simply runs on, as the kernel would have done without the flag.
	 */
	if ((enq_flags & SCX_ENQ_LAST) || must_bypass_agent(p) ||
	    is_agent_helper_thread(p)) {
		scx_bpf_dsq_insert(p, SCX_DSQ_LOCAL, slice_ns, enq_flags);
		__sync_fetch_and_add(&nr_direct_dispatches, 1);
		if (enq_flags & SCX_ENQ_WAKEUP)
			runnable_add(scx_bpf_task_cpu(p), 1);
		note_queued_on(scx_bpf_task_cpu(p));
		return;
	}

	tctx = lookup_task_ctx(p);
	if (!tctx) {
		/* No storage (allocation failed at init_task): never lose it. */
		dispatch_fallback(p, enq_flags);
		__sync_fetch_and_add(&nr_direct_dispatches, 1);
		return;
	}

	if (!(enq_flags & SCX_ENQ_WAKEUP))
		requeue_in_place(p, tctx, enq_flags);
	else
		queue_to_agent(p, tctx, enq_flags);
}

/*
 * The fallback transport: one record of the decisions user ring, drained in
 * ops.dispatch() of the agent's CPU when the agent yields. Recorded here,
 * carried out by apply_parked() after the drain.
 */
static long drain_decision(struct bpf_dynptr *dynptr, void *context)
{
	const struct decision_msg *d = bpf_dynptr_data(dynptr, 0, sizeof(*d));

	if (d)
		record_decision(d);
	return 0;
}

/*
 * The fast lane: the agent runs this after each batch of decisions, which
 * it wrote into wl_shared.apply_slots, and the tasks are on their CPUs
 * when bpf_prog_test_run() returns. It refreshes no CPU's state: a
 * spinning agent decides on what BPF's callbacks keep up to date
 * (runnable_add(), ops.running/stopping/update_idle), and each CPU's own
 * ops.dispatch() sets it exactly; reading every CPU's rq and queues here
 * cost more than the rest of the run.
 */
SEC("syscall")
int apply_decisions(struct apply_args *args)
{
	u32 nr = args->nr, i;

	bpf_for(i, 0, nr) {
		struct decision_msg *d;

		if (i >= WL_APPLY_MAX)
			break;
		d = MEMBER_VPTR(wl_shared, .apply_slots[i]);
		if (d)
			record_decision(d);
	}
	if (debug_half_apply && (args->flags & WL_APPLY_RECORD_ONLY))
		return 0;
	/* A sleepable program: the queue iterator needs an RCU section. */
	bpf_rcu_read_lock();
	apply_parked(false);
	bpf_rcu_read_unlock();
	__sync_fetch_and_add(&nr_apply_runs, 1);
	return 0;
}

/*
 * fair.c's sysctl_sched_migration_cost (500 us): a task that ran this
 * recently is cache hot, and load balancing leaves it where it is
 * (task_hot()).
 */
#define WL_MIGRATION_COST_NS	500000ULL

/* How far CPU @other is from @cpu, nearest first, like fair.c's domain levels. */
enum pull_scope {
	PULL_SAME_LLC,		/* @cpu's LLC */
	PULL_SAME_NODE,		/* the other LLCs of @cpu's node */
	PULL_OTHER_NODES,	/* every other node */
};

static enum pull_scope cpu_scope(u32 cpu, u32 other)
{
	if (cpu >= WL_MAX_CPUS || other >= WL_MAX_CPUS)
		return PULL_OTHER_NODES;
	if (wl_shared.cpu_llc[other] == wl_shared.cpu_llc[cpu])
		return PULL_SAME_LLC;
	return wl_shared.cpu_node[other] == wl_shared.cpu_node[cpu] ?
	       PULL_SAME_NODE : PULL_OTHER_NODES;
}

/*
 * The CPU other than @cpu with the most tasks waiting in its DSQ, within
 * @scope of @cpu; -1 if none. Like fair.c's
 * busiest-queue search it only considers CPUs that have more to run than
 * one task (nr_running > 1): a task waiting in the DSQ of a CPU that runs
 * nothing else, or only the agent (which yields as soon as it has placed
 * its batch), gets that CPU in a moment; pulling it would only migrate it.
 */
static s32 busiest_queue(s32 cpu, enum pull_scope scope)
{
	u32 best = 0;
	s32 i, src = -1;

	if (cpu < 0 || cpu >= WL_MAX_CPUS || !READ_ONCE(cpu_queued_hint_sum))
		return -1;
	bpf_for(i, 0, nr_cpu_ids) {
		struct cpu_state *cs;
		u32 n;

		if (i == cpu || i >= WL_MAX_CPUS || cpu_scope(cpu, i) != scope)
			continue;
		n = cpu_dsq_nr_queued(i);
		cs = cpu_state_of(i);
		if (!n || !cs || nr_runnable_on(i, cs->curr_pid) < 2)
			continue;
		if (n > best) {
			best = n;
			src = i;
		}
	}
	return src;
}

/*
 * Move to @cpu the first task of @src's DSQ that may run on @cpu and is not
 * cache hot (fair.c's can_migrate_task() without its give-up-after-failures
 * escape). Returns true if a task was moved. @newidle says which counter a
 * cache-hot task counts in.
 */
static bool pull_from(s32 cpu, s32 src, u64 now, bool newidle)
{
	struct task_struct *p;

	bpf_for_each(scx_dsq, p, src, 0) {
		struct task_ctx *tctx = lookup_task_ctx(p);

		if (!bpf_cpumask_test_cpu(cpu, p->cpus_ptr))
			continue;
		if (tctx && tctx->last_stop_ns &&
		    time_delta(now, tctx->last_stop_ns) < WL_MIGRATION_COST_NS) {
			if (newidle)
				__sync_fetch_and_add(&nr_newidle_cache_hot, 1);
			else
				__sync_fetch_and_add(&nr_idle_balance_cache_hot, 1);
			continue;
		}
		if (scx_bpf_dsq_move(BPF_FOR_EACH_ITER, p, SCX_DSQ_LOCAL, 0)) {
			hint_leave(tctx);
			runnable_add(src, -1);
			runnable_add(cpu, 1);
			return true;
		}
	}
	return false;
}

/*
 * A wake-up is on its way to @cpu: rq->ttwu_pending (a remote wake-up queued
 * on its wakelist) or a decision of the agent for it not applied yet.
 */
static bool wakeup_coming(s32 cpu)
{
	struct rq *rq = bpf_per_cpu_ptr(&runqueues, cpu);
	u32 *pending = MEMBER_VPTR(wl_shared, .inflight[cpu]);

	return (rq && rq->ttwu_pending) || (pending && READ_ONCE(*pending));
}

/*
 * @cpu has nothing to run: the analogue of fair.c's newidle balance. Pull a
 * task queued for the busiest CPU of our LLC, else of our node, unless a
 * wake-up is already on its way here and the agent's config says to skip
 * then (seed 2: "There is a task waiting to run. No need to search for
 * one."). Returns true if a task was pulled. Where this differs from the
 * engine's rule (Engine::newidle_pull, used by sim and explain) is listed
 * in one place, that function's documentation.
 */
static bool newidle_balance(s32 cpu, u64 now)
{
	bool wakeup_pending = wakeup_coming(cpu);
	u64 *own;
	s32 src;

	if (!READ_ONCE(wl_shared.newidle_pull))
		return false;
	own = newidle_wait_own_wakee ? MEMBER_VPTR(wl_shared, .own_wakee_until[cpu]) : NULL;
	if (own && *own && time_before(now, *own)) {
		__sync_fetch_and_add(&nr_newidle_wait_own_wakee, 1);
		return false;
	}
	if (wakeup_pending) {
		if (READ_ONCE(wl_shared.newidle_skip_pending)) {
			__sync_fetch_and_add(&nr_newidle_skipped_pending, 1);
			return false;
		}
		/* What seed 2 removes: looking at all, whether or not a
		 * task is then found. */
		__sync_fetch_and_add(&nr_newidle_search_despite_pending, 1);
	}
	src = busiest_queue(cpu, PULL_SAME_LLC);
	if (src < 0)
		src = busiest_queue(cpu, PULL_SAME_NODE);
	if (src >= 0 && pull_from(cpu, src, now, true)) {
		__sync_fetch_and_add(&nr_newidle_pulls, 1);
		if (wakeup_pending)
			__sync_fetch_and_add(&nr_newidle_pull_despite_pending, 1);
		return true;
	}
	__sync_fetch_and_add(&nr_newidle_nothing, 1);
	return false;
}

/*
 * A CPU that stays idle never reaches ops.dispatch(), so newidle_balance()
 * alone leaves a task waiting behind a busy CPU's current task for up to a
 * slice while other CPUs idle, and again after every wake-up that queues it
 * there. fair.c's answer is the nohz idle balance: a busy CPU whose tick
 * sees more than one task on its rq (nohz_balancer_kick(), nr_running >= 2)
 * kicks an idle CPU to balance on behalf of the idle ones. Ours, in small:
 * from ops.tick(), kick the nearest idle CPU that expects no wake-up; its
 * ops.dispatch() then runs idle_balance(). One CPU per tick, and the tick is
 * the rate limit (fair.c's nohz.next_balance keeps it to about one balance
 * per jiffy too).
 *
 * Off by default (--idle-balance): under QEMU TCG it made lmbench
 * `lat_ctx -P 8` about twice as slow after only a few dozen pulls per run,
 * for reasons not yet understood; what it buys is fair.c's back-and-forth
 * in the seed-1 scenario. The runs are in
 * docs/benchmarks/bpf-heuristics-notes.md.
 */
static void idle_balance_kick(u32 busy)
{
	u32 best_dist = PULL_OTHER_NODES + 1;
	s32 i, target = -1;
	volatile u32 *req;

	if (busy >= WL_MAX_CPUS)
		return;
	bpf_for(i, 0, nr_cpu_ids) {
		struct cpu_state *cs;
		u32 dist;

		if (i == busy || i >= WL_MAX_CPUS)
			continue;
		cs = cpu_state_of(i);
		if (!cs || !cs->idle || wakeup_coming(i))
			continue;
		dist = cpu_scope(busy, i);
		if (dist < best_dist) {
			best_dist = dist;
			target = i;
		}
	}
	if (target < 0 || target >= WL_MAX_CPUS)
		return;
	req = MEMBER_VPTR(idle_balance_req, [target]);
	if (!req)
		return;
	*req = 1;
	__sync_fetch_and_add(&nr_idle_balance_kicks, 1);
	scx_bpf_kick_cpu(target, SCX_KICK_IDLE);
}

/*
 * More tasks on @node's CPUs than it has CPUs: fair.c's group_overloaded.
 * Only then does the NUMA level of load balance move a task between nodes
 * at once; below, adjust_numa_imbalance() lets a few tasks run on the
 * "wrong" node rather than split a communicating pair.
 */
static bool node_is_overloaded(u32 node)
{
	u32 nr = 0, cpus = 0;
	s32 i;

	bpf_for(i, 0, nr_cpu_ids) {
		struct cpu_state *cs;

		if (i >= WL_MAX_CPUS)
			break;
		cs = cpu_state_of(i);
		if (!cs || wl_shared.cpu_node[i] != node)
			continue;
		cpus++;
		nr += nr_runnable_on(i, cs->curr_pid);
	}
	return nr > cpus;
}

/*
 * @cpu was kicked by idle_balance_kick(): pull from the busiest queue of
 * its LLC, then its node, then of another node if that node is overloaded
 * (fair.c's load balance climbs to the NUMA domain too). Nothing if a
 * wake-up is on its way here by now: that task is this CPU's work.
 */
static bool idle_balance(s32 cpu, u64 now)
{
	s32 src;

	if (wakeup_coming(cpu))
		return false;
	src = busiest_queue(cpu, PULL_SAME_LLC);
	if (src < 0)
		src = busiest_queue(cpu, PULL_SAME_NODE);
	if (src < 0) {
		src = busiest_queue(cpu, PULL_OTHER_NODES);
		if (src >= 0 && !node_is_overloaded(wl_shared.cpu_node[src & (WL_MAX_CPUS - 1)]))
			src = -1;
	}
	if (src >= 0 && pull_from(cpu, src, now, false)) {
		__sync_fetch_and_add(&nr_idle_balance_pulls, 1);
		return true;
	}
	__sync_fetch_and_add(&nr_idle_balance_nothing, 1);
	return false;
}

/*
 * The agent stalled (stopped with SIGSTOP, starved, stuck in a page fault)
 * or fell more than agent_stall_ns behind (a storm under a slow CPU) while
 * tasks it had been sent were waiting for its decision. New tasks bypass it
 * (queue_to_agent()), but these would wait until the watchdog ejects us
 * ("runnable task stall", or "watchdog failed to check in" when the task is
 * the watchdog's own kworker): move them from the parking queue to the
 * fallback queue. So are tasks parked for that long for any other reason
 * (a decision lost on its way). They stop waiting for their generation, so
 * a decision the agent makes for them later is dropped as stale. One CPU
 * sweeps at a time, at most every WL_RESCUE_PERIOD_NS, and only while the
 * agent is quiet or behind, so a healthy agent costs nothing here.
 */
#define WL_RESCUE_PERIOD_NS 100000000ULL
static u64 last_rescue_ns;

/* How long the oldest parked task has waited (the queue is in arrival order). */
static u64 oldest_parked_wait(u64 now)
{
	struct task_struct *p;
	u64 wait = 0;

	bpf_for_each(scx_dsq, p, WL_PARK_DSQ, 0) {
		struct task_ctx *tctx = lookup_task_ctx(p);

		if (tctx && tctx->enqueue_ns)
			wait = time_delta(now, tctx->enqueue_ns);
		break;
	}
	return wait;
}

static void rescue_from_stalled_agent(u64 now)
{
	struct task_struct *p;
	u64 last = last_rescue_ns;
	bool quiet, keeping_up;

	if (time_delta(now, last) < WL_RESCUE_PERIOD_NS)
		return;
	quiet = agent_quiet(now);
	keeping_up = !quiet && agent_lag_ns(now) <= agent_stall_ns;
	/* Also a parked task whose decision never came, whatever the reason. */
	if ((keeping_up && oldest_parked_wait(now) <= agent_stall_ns) ||
	    !__sync_bool_compare_and_swap(&last_rescue_ns, last, now))
		return;

	bpf_for_each(scx_dsq, p, WL_PARK_DSQ, 0) {
		struct task_ctx *tctx = lookup_task_ctx(p);
		u64 gen;

		/*
		 * A live agent that is behind keeps the tasks it will soon
		 * read; the queue is in arrival order, so the rest are newer.
		 */
		if (!quiet && tctx && time_delta(now, tctx->enqueue_ns) <= agent_stall_ns)
			break;
		/*
		 * It stops waiting before it moves, so that a decision for it
		 * arriving now is dropped; and only for the generation it
		 * waits for, so that a rescue racing with an apply_parked()
		 * that moved it first cannot void its next wake-up.
		 */
		gen = 0;
		if (tctx) {
			gen = READ_ONCE(tctx->awaiting_gen);
			if (gen)
				__sync_val_compare_and_swap(&tctx->awaiting_gen, gen, 0);
			if (READ_ONCE(tctx->decided_gen) == gen)
				clear_decision(tctx);
			park_done(tctx);
			tctx->fallback_ns = bpf_ktime_get_ns();
		}
		if (scx_bpf_dsq_move(BPF_FOR_EACH_ITER, p, WL_FALLBACK_DSQ, 0)) {
			hint_enter(tctx, WL_HINT_FALLBACK);
			scx_bpf_kick_cpu(scx_bpf_task_cpu(p), SCX_KICK_IDLE);
			__sync_fetch_and_add(&nr_stall_rescues, 1);
			if (keeping_up)
				__sync_fetch_and_add(&nr_lost_decisions, 1);
		}
	}
}

/*
 * The fallback queue is shared, and a CPU takes from it only when its own
 * queue is empty. A task there that only this CPU may run (an affinity of
 * one CPU: stress-ng's affinity stressor, a rescued per-CPU task) waits as
 * long as the agent keeps this CPU's queue busy: 6.7 s in one CI run, and
 * the kernel's watchdog ejected us ("runnable task stall"). So a fallback
 * task this CPU may run, waiting longer than WL_FALLBACK_MAX_WAIT_NS, goes
 * first. The queue is in arrival order, so the first such task is the
 * oldest, and it is the one scx_bpf_dsq_move_to_local() then takes.
 */
#define WL_FALLBACK_MAX_WAIT_NS 20000000ULL

static bool fallback_starving(s32 cpu)
{
	struct task_struct *p;
	bool starving = false;
	u64 now;

	/* The common case, nothing in the fallback queue, reads no clock. */
	if (!may_be_queued(WL_HINT_FALLBACK))
		return false;
	now = bpf_ktime_get_ns();
	bpf_for_each(scx_dsq, p, WL_FALLBACK_DSQ, 0) {
		struct task_ctx *tctx;

		if (!bpf_cpumask_test_cpu(cpu, p->cpus_ptr))
			continue;
		tctx = lookup_task_ctx(p);
		starving = tctx && tctx->fallback_ns &&
			   time_delta(now, tctx->fallback_ns) > WL_FALLBACK_MAX_WAIT_NS;
		break;
	}
	return starving;
}

void BPF_STRUCT_OPS(wakelab_dispatch, s32 cpu, struct task_struct *prev)
{
	u64 now = scx_bpf_now();
	volatile u32 *req;

	refresh_cpu_state(cpu, now);

	if (ring_transport &&
	    bpf_user_ringbuf_drain(&decisions, drain_decision, NULL, BPF_RB_NO_WAKEUP) > 0)
		apply_parked(false);
	rescue_from_stalled_agent(now);

	/*
	 * The agent goes first: every task it has not placed yet is waiting
	 * for it (on this CPU only if its last CPU will not take it soon).
	 * Give it a fresh snapshot of every CPU just before it runs. Not when
	 * it is @prev, yielding: then it is in no queue yet, a task waiting
	 * here runs first, and the agent's turn comes after (if @prev still
	 * has work and nothing waits, it runs on, below).
	 */
	if (!(prev && is_agent(prev)) && agent_has_work() && agent_may_run_on(cpu, now)) {
		refresh_all_cpu_states(now);
		if (READ_ONCE(agent_parked) && scx_bpf_dsq_move_to_local(WL_AGENT_DSQ, 0)) {
			agent_needed = 0;
			return;
		}
	}

	if (fallback_starving(cpu) &&
	    scx_bpf_dsq_move_to_local(WL_FALLBACK_DSQ, 0)) {
		__sync_fetch_and_add(&nr_fallback_starving, 1);
		return;
	}
	if (may_be_queued(cpu) && scx_bpf_dsq_move_to_local(cpu, 0))
		return;
	if (may_be_queued(WL_HINT_FALLBACK) && scx_bpf_dsq_move_to_local(WL_FALLBACK_DSQ, 0))
		return;

	/*
	 * Nothing else wants this CPU: let the previous task run on, but the
	 * agent only while it has work, or it would spin.
	 */
	if (prev && (prev->scx.flags & SCX_TASK_QUEUED) &&
	    (!is_agent(prev) || agent_has_work())) {
		scx_bpf_task_set_slice(prev, slice_ns);
		return;
	}

	/*
	 * The CPU is about to go idle, or is idle and was kicked to balance:
	 * one or the other, so that each pull is counted once.
	 */
	req = MEMBER_VPTR(idle_balance_req, [cpu]);
	if (req && *req) {
		*req = 0;
		idle_balance(cpu, now);
		return;
	}
	/*
	 * An idle CPU (no @prev of ours) woken by a wake-up that now waits
	 * for the agent is not going idle: the kernel would have queued that
	 * task here, or sent it elsewhere without waking this CPU. Either way
	 * it would not balance.
	 */
	if (!prev && READ_ONCE(parked_on[cpu & (WL_MAX_CPUS - 1)])) {
		__sync_fetch_and_add(&nr_newidle_skipped_parked, 1);
		return;
	}
	newidle_balance(cpu, now);
}

/*
 * @p runs on a CPU whose tick fired: see idle_balance_kick(). fair.c's test
 * is nr_running >= 2: @p plus what waits in our DSQ. Ours adds that @p has
 * run idle_balance_busy_ns since it last woke, i.e. will not give the CPU up
 * in a moment. A sync wakee queued behind a waker about to sleep gets the
 * CPU soon; in the kernel a tick rarely falls into that window, but QEMU TCG
 * stretches it many times, and pulling such wakees away breaks up every pair
 * that wake-affine brought together (lmbench lat_ctx: twice the migrations).
 */
void BPF_STRUCT_OPS(wakelab_tick, struct task_struct *p)
{
	s32 cpu = scx_bpf_task_cpu(p);
	struct task_ctx *tctx;
	u64 ran;

	if (is_agent(p))
		return;
	/*
	 * The agent's home CPU runs a task while the agent has work: that
	 * task's sync wake-up promised to sleep (wake_agent() let it be) and
	 * has not. Preempt it now; the tick bounds the agent's wait.
	 */
	if (cpu == agent_home() && agent_has_work()) {
		__sync_fetch_and_add(&nr_agent_preempt_kicks, 1);
		scx_bpf_kick_cpu(cpu, SCX_KICK_PREEMPT);
	}
	if (!idle_balance_on || !cpu_dsq_nr_queued(cpu))
		return;
	tctx = lookup_task_ctx(p);
	if (!tctx || !tctx->start_ns)
		return;
	ran = tctx->exec_runtime + time_delta(scx_bpf_now(), tctx->start_ns);
	if (ran < idle_balance_busy_ns)
		return;
	idle_balance_kick(cpu);
}

void BPF_STRUCT_OPS(wakelab_running, struct task_struct *p)
{
	s32 cpu = scx_bpf_task_cpu(p);
	struct cpu_state *cs = cpu_state_of(cpu);
	struct task_ctx *tctx;
	u64 now = scx_bpf_now();

	if (cs) {
		cs->curr_pid = p->pid;
		cs->curr_policy = p->policy;
	}
	if (is_agent(p)) {
		/* Running, it looks at the ring before it parks again. */
		agent_needed = 0;
		WRITE_ONCE(agent_parked, 0);
		wl_shared.agent_last_run_ns = now;
		__sync_fetch_and_add(&nr_agent_runs, 1);
		if (wl_shared.agent_cpu >= 0 && wl_shared.agent_cpu != cpu)
			__sync_fetch_and_add(&nr_agent_migrations, 1);
		wl_shared.agent_cpu = cpu;
		return;
	}
	if (cs) {
		cs->free_since_ns = 0;
		cs->run_start_ns = now;
	}
	tctx = lookup_task_ctx(p);
	if (!tctx)
		return;
	hint_leave(tctx);
	WRITE_ONCE(tctx->awaiting_gen, 0);
	tctx->start_ns = now;
	if (tctx->enqueue_ns) {
		u32 b = log2_bucket(time_delta(now, tctx->enqueue_ns));

		if (b < WL_LAT_BUCKETS)
			__sync_fetch_and_add(&enqueue_to_run_hist[b], 1);
		tctx->enqueue_ns = 0;
	}
	if (tctx->applied_mono_ns) {
		hop_record(WL_HOP_APPLY_RUN, tctx->applied_mono_ns, bpf_ktime_get_ns());
		tctx->applied_mono_ns = 0;
	}
}

/*
 * Tell the agent that @p goes to sleep after running @ran ns, for its
 * delayed-dequeue emulation: in v6.12+ a sleeper with positive lag stays
 * queued on its CPU, counted in rq->nr_running (seed 3).
 */
static void report_sleep(struct task_struct *p, u64 ran, u64 now)
{
	struct wakeup_msg *msg;

	msg = bpf_ringbuf_reserve(&wakeups, sizeof(*msg), 0);
	if (!msg) {
		__sync_fetch_and_add(&nr_sleep_msgs_dropped, 1);
		return;
	}
	__builtin_memset(msg, 0, sizeof(*msg));
	msg->kind = WL_MSG_SLEEP;
	msg->pid = p->pid;
	msg->task_cpu = scx_bpf_task_cpu(p);
	msg->weight = p->scx.weight;
	msg->exec_runtime = ran;
	msg->enqueue_ns = now;
	bpf_ringbuf_submit(msg, BPF_RB_NO_WAKEUP);
	count_ring_msg(now);
	__sync_fetch_and_add(&nr_sleep_msgs, 1);
}

void BPF_STRUCT_OPS(wakelab_stopping, struct task_struct *p, bool runnable)
{
	struct cpu_state *cs;
	struct task_ctx *tctx;
	u64 now;

	if (is_agent(p))
		return;
	now = scx_bpf_now();
	/*
	 * A sleeper leaves the CPU's runnable count now, not at the next
	 * refresh: the agent may decide many wake-ups before that.
	 */
	if (!runnable)
		runnable_add(scx_bpf_task_cpu(p), -1);
	cs = cpu_state_of(scx_bpf_task_cpu(p));
	if (cs) {
		cs->free_since_ns = now;
		if (cs->run_start_ns) {
			cs->busy_ns += time_delta(now, cs->run_start_ns);
			cs->run_start_ns = 0;
		}
	}
	tctx = lookup_task_ctx(p);
	if (!tctx || !tctx->start_ns)
		return;
	tctx->exec_runtime += now - tctx->start_ns;
	tctx->last_stop_ns = now;
	if (!runnable && READ_ONCE(wl_shared.report_sleeps) && !must_bypass_agent(p) &&
	    !is_agent_helper_thread(p))
		report_sleep(p, tctx->exec_runtime, now);
}

void BPF_STRUCT_OPS(wakelab_runnable, struct task_struct *p, u64 enq_flags)
{
	struct task_ctx *tctx = lookup_task_ctx(p);

	/* A new wake-up: the "ran since last sleep" clock restarts. */
	if (tctx)
		tctx->exec_runtime = 0;
}

/*
 * Idle transitions, with SCX_OPS_KEEP_BUILTIN_IDLE so the kernel's own idle
 * masks stay valid. The periods feed the agent's rq->avg_idle emulation
 * (SIS_PROP).
 */
void BPF_STRUCT_OPS(wakelab_update_idle, s32 cpu, bool idle)
{
	struct cpu_state *cs = cpu_state_of(cpu);
	u64 now = scx_bpf_now();

	if (!cs)
		return;
	if (idle) {
		cs->idle_since_ns = now;
		cs->curr_pid = 0;
		cs->curr_policy = 0;
		/*
		 * wake_agent() kicks the agent's CPU only if it reads it idle,
		 * and that CPU may be on its way to idle, having just parked
		 * the agent because its ops.dispatch() found no work. A wake-up
		 * queued in between would wait for the agent until some other
		 * CPU dispatches, at worst until the heartbeat. So publish
		 * "idle" with a full barrier (xchg), pairing with the atomic add
		 * to wl_shared.nr_ring_wakeups that precedes wake_agent()'s read, and
		 * then look for work: either wake_agent() sees this CPU idle and
		 * kicks it, or this CPU sees the work and kicks itself.
		 */
		__sync_lock_test_and_set(&cs->idle, 1);
		cs->nr_runnable = 0;
		if (READ_ONCE(agent_parked) && agent_has_work() &&
		    agent_may_run_on(cpu, now)) {
			__sync_fetch_and_add(&nr_idle_agent_kicks, 1);
			scx_bpf_kick_cpu(cpu, SCX_KICK_IDLE);
		} else if (cpu_dsq_nr_queued(cpu)) {
			/* A decision queued here raced with going idle (note_queued_on()). */
			scx_bpf_kick_cpu(cpu, SCX_KICK_IDLE);
		}
	} else {
		if (cs->idle_since_ns) {
			cs->last_idle_ns = now - cs->idle_since_ns;
			cs->last_idle_end_ns = now;
		}
		cs->idle = 0;
		cs->idle_since_ns = 0;
	}
}

/*
 * A safety net under the hints and the idle/queue pairings: with exact
 * lookups (a few per heartbeat), wake every idle CPU that has tasks in its
 * own queue, and one idle CPU if the fallback queue holds tasks.
 */
static void kick_stranded(void)
{
	bool fallback = scx_bpf_dsq_nr_queued(WL_FALLBACK_DSQ) > 0;
	s32 cpu;

	bpf_for(cpu, 0, nr_cpu_ids) {
		struct cpu_state *cs = cpu_state_of(cpu);

		if (!cs || !READ_ONCE(cs->idle))
			continue;
		if (fallback || scx_bpf_dsq_nr_queued(cpu) > 0) {
			fallback = false;
			__sync_fetch_and_add(&nr_stranded_kicks, 1);
			scx_bpf_kick_cpu(cpu, SCX_KICK_IDLE);
		}
	}
}

static int heartbeat_fn(void *map, int *key, struct bpf_timer *timer)
{
	u64 now = scx_bpf_now();

	/* Decisions that arrived before their task was parked, still undone. */
	if (READ_ONCE(wl_shared.decisions_pending))
		apply_parked(true);
	kick_stranded();
	/*
	 * Without this the agent could starve: if every CPU stays busy with
	 * tasks that never reach ops.dispatch() for a while, nothing would
	 * move it to a CPU.
	 */
	if (agent_has_work() ||
	    time_delta(now, READ_ONCE(wl_shared.agent_last_run_ns)) >= WL_HEARTBEAT_NS) {
		agent_needed = 1;
		__sync_fetch_and_add(&nr_heartbeat_kicks, 1);
		kick_agent_cpu(SCX_KICK_IDLE);
	}
	bpf_timer_start(timer, WL_HEARTBEAT_NS, 0);
	return 0;
}

s32 BPF_STRUCT_OPS(wakelab_init_task, struct task_struct *p,
		   struct scx_init_task_args *args)
{
	if (!bpf_task_storage_get(&task_ctx_stor, p, 0,
				  BPF_LOCAL_STORAGE_GET_F_CREATE))
		return -ENOMEM;
	return 0;
}

/* A task leaving us (exit, or another class) takes no decision with it. */
void BPF_STRUCT_OPS(wakelab_exit_task, struct task_struct *p,
		    struct scx_exit_task_args *args)
{
	struct task_ctx *tctx = lookup_task_ctx(p);

	if (tctx) {
		handoff_cancel(tctx);
		clear_decision(tctx);
		park_done(tctx);
		hint_leave(tctx);
	}
}


void BPF_STRUCT_OPS(wakelab_enable, struct task_struct *p)
{
	scx_bpf_task_set_slice(p, slice_ns);
}

s32 BPF_STRUCT_OPS_SLEEPABLE(wakelab_init)
{
	struct bpf_timer *timer;
	u32 key = 0;
	s32 cpu;
	int err;

	nr_cpu_ids = scx_bpf_nr_cpu_ids();
	if (nr_cpu_ids > WL_MAX_CPUS) {
		scx_bpf_error("%u CPUs: more than WL_MAX_CPUS (%d)", nr_cpu_ids,
			      WL_MAX_CPUS);
		return -E2BIG;
	}

	bpf_for(cpu, 0, nr_cpu_ids) {
		err = scx_bpf_create_dsq(cpu, -1);
		if (err) {
			scx_bpf_error("failed to create DSQ %d: %d", cpu, err);
			return err;
		}
	}
	err = scx_bpf_create_dsq(WL_FALLBACK_DSQ, -1);
	if (err)
		return err;
	err = scx_bpf_create_dsq(WL_AGENT_DSQ, -1);
	if (err)
		return err;
	err = scx_bpf_create_dsq(WL_PARK_DSQ, -1);
	if (err)
		return err;

	wl_shared.agent_last_run_ns = scx_bpf_now();
	wl_shared.agent_cpu = -1;

	timer = bpf_map_lookup_elem(&heartbeat_timer, &key);
	if (!timer)
		return -ESRCH;
	bpf_timer_init(timer, &heartbeat_timer, CLOCK_MONOTONIC);
	bpf_timer_set_callback(timer, heartbeat_fn);
	return bpf_timer_start(timer, WL_HEARTBEAT_NS, 0);
}

void BPF_STRUCT_OPS(wakelab_exit, struct scx_exit_info *ei)
{
	UEI_RECORD(uei, ei);
}

SCX_OPS_DEFINE(wakelab_ops,
	       .select_cpu		= (void *)wakelab_select_cpu,
	       .enqueue			= (void *)wakelab_enqueue,
	       .dispatch		= (void *)wakelab_dispatch,
	       .runnable		= (void *)wakelab_runnable,
	       .running			= (void *)wakelab_running,
	       .stopping		= (void *)wakelab_stopping,
	       .update_idle		= (void *)wakelab_update_idle,
	       .tick			= (void *)wakelab_tick,
	       .enable			= (void *)wakelab_enable,
	       .init_task		= (void *)wakelab_init_task,
	       .exit_task		= (void *)wakelab_exit_task,
	       .init			= (void *)wakelab_init,
	       .exit			= (void *)wakelab_exit,
	       /* Agent stalls must be caught by our own fallback first. */
	       .timeout_ms		= 5000,
	       .name			= "wakelab");
