/* SPDX-License-Identifier: GPL-2.0 */
/*
 * scx_wakelab BPF, part of bpf/main.bpf.c: what BPF keeps about tasks and
 * CPUs.
 *
 * - struct task_ctx: one per task (task storage), what BPF remembers about
 *   a task between callbacks: the waker's context from ops.select_cpu(),
 *   the generation the task waits for, a decision recorded for it, its
 *   handoff slot, its parking and queue-hint marks, its run-time accounting.
 * - The per-CPU table the agent reads (wl_shared.cpu_state, bpf/intf.h):
 *   kept by the callbacks as tasks run and stop and CPUs go idle, its rq
 *   fields refreshed in each CPU's own ops.dispatch() and, for every CPU,
 *   before the agent is dispatched; runnable_add() keeps nr_runnable current
 *   in between.
 * - The state estimator's per-CPU averages (pelt_cpus, estimator.bpf.c).
 * - The queue hints: an upper bound of the tasks in each CPU's DSQ and in
 *   the fallback DSQ, so that the hot paths skip lookups of empty queues.
 * - The object's maps, in one place (see below why).
 *
 * Limits and accepted races: reads of other CPUs' rqs are unlocked and may
 * be stale a moment later, as fair.c's own remote reads are; a hint may
 * stay high after a task left its queue by a road no callback sees (that
 * costs lookups, never a lost task: 0 always means empty); nr_runnable may
 * read below zero for a moment after two racing decrements (the agent reads
 * it as 0, the next ops.dispatch() sets it exactly).
 */
#ifndef __WAKELAB_STATE_BPF_H
#define __WAKELAB_STATE_BPF_H

static u32 nr_cpu_ids;

/*
 * Everything BPF and the agent share besides the rings and the counters
 * (.bss, memory-mapped by the agent); bpf/intf.h gives each field its owner
 * and invariant.
 */
struct wl_shared wl_shared;

/* -------------------------------------------------------------------------
 * The maps of the whole object, declared together: the rings belong to
 * wakeups.bpf.c (wakeups) and decisions.bpf.c (decisions), the task
 * storage to this part, the heartbeat timer to main.bpf.c. Their order here
 * is their order in the object's .maps section and in the skeleton, which
 * splitting them up by part would change.
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
	/* Generation: bumped each time a wake-up of the task is sent to the agent. */
	u64 enq_cnt;
	/* When its wake-up was sent to the agent (0 once it runs, or if none was). */
	u64 enqueue_ns;
	/* When the task entered WL_FALLBACK_DSQ, bpf_ktime_get_ns() (fallback_starving()). */
	u64 fallback_ns;
	/* CLOCK_MONOTONIC stamps for the hop histograms (enum wl_hop). */
	u64 select_mono_ns;
	u64 applied_mono_ns;
	/* Wake-up context recorded by ops.select_cpu(), sent with the wake-up. */
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
	/* The waker's load average as the estimator holds it (task_h_load(current)). */
	u64 waker_load_avg;
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
	 * and carried out by apply_parked() once the task is found parked (the
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
	/*
	 * The state estimator's (estimator.bpf.c): its averages, whether they
	 * are seeded, and what they were when it last went to sleep (sent with
	 * its next wake-up, as the kernel reads them then).
	 */
	struct pelt_task pelt;
	u32 pelt_seeded;
	u64 sleep_load_avg;
	u64 sleep_util_avg;
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

/* The state estimator's averages per CPU (estimator.bpf.c). */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, WL_MAX_CPUS);
	__type(key, u32);
	__type(value, struct pelt_cpu);
} pelt_cpus SEC(".maps");

/* -------------------------------------------------------------------------
 * Tasks and CPUs.
 */
static struct task_ctx *lookup_task_ctx(const struct task_struct *p)
{
	return bpf_task_storage_get(&task_ctx_stor, (struct task_struct *)p, 0, 0);
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
 * @cpu's placement inputs changed (wl_shared.cpu_changed, intf.h): called
 * after the change, whose stores the atomic OR orders before the bit.
 */
static void note_cpu_changed(s32 cpu)
{
	struct wl_changed_word *w;

	if (cpu < 0 || cpu >= WL_MAX_CPUS)
		return;
	w = MEMBER_VPTR(wl_shared, .cpu_changed[cpu / 64]);
	if (w)
		__sync_fetch_and_or(&w->bits, 1ULL << (cpu & 63));
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
 * CPU's own DSQ and local DSQ. nr_runnable_with() takes the own DSQ's count
 * where the caller has just read it: one kfunc call less per CPU, which
 * refresh_all_cpu_states() makes for every CPU at each of the agent's turns.
 */
static u32 nr_runnable_with(s32 cpu, s32 curr_pid, u32 dsq_queued)
{
	u32 nr = dsq_queued + scx_bpf_dsq_nr_queued(SCX_DSQ_LOCAL_ON | cpu);

	if (curr_pid && curr_pid != agent_pid)
		nr++;
	return nr;
}

static u32 nr_runnable_on(s32 cpu, s32 curr_pid)
{
	return nr_runnable_with(cpu, curr_pid, cpu_dsq_nr_queued(cpu));
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
	u32 ttwu, queued, runnable;
	struct rq *rq;
	bool changed;

	if (!cs || !cpu_valid(cpu))
		return;
	rq = bpf_per_cpu_ptr(&runqueues, cpu);
	if (!rq)
		return;
	ttwu = rq->ttwu_pending;
	queued = cpu_dsq_nr_queued(cpu);
	runnable = nr_runnable_with(cpu, cs->curr_pid, queued);
	/* Only what the agent reads marks the CPU changed. */
	changed = cs->ttwu_pending != ttwu || cs->dsq_queued != queued ||
		  cs->nr_runnable != runnable;
	cs->nr_running = rq->nr_running;
	cs->scx_nr_running = rq->scx.nr_running;
	cs->ttwu_pending = ttwu;
	cs->dsq_queued = queued;
	cs->nr_runnable = runnable;
	cs->refreshed_ns = now;
	if (changed)
		note_cpu_changed(cpu);
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
	else
		return;
	note_cpu_changed(cpu);
}

/*
 * Time stamps written on one CPU and read on another are compared through
 * time_delta()/time_after(), never by plain u64 subtraction: scx_bpf_now()
 * is the rq clock cached while the rq lock is held, so a CPU may read a
 * "now" a little older than a stamp another CPU just wrote, and the
 * unsigned difference would then be ~2^64 ns.
 */

#endif /* __WAKELAB_STATE_BPF_H */
