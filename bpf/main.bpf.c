/* SPDX-License-Identifier: GPL-2.0 */
/*
 * scx_wakelab: BPF component, its entry points.
 *
 * The Rust agent decides where every woken task runs, re-implementing the
 * CFS wake-up placement path (select_task_rq_fair()). This program is its
 * hands and eyes: it tells the agent about each wake-up, carries out the
 * agent's decisions, and keeps every task running when the agent cannot
 * answer. bpf/intf.h is the contract between the two and tells the life of
 * a wake-up; docs/architecture.md follows one hop by hop, through the agent
 * too.
 *
 * The default road of a ttwu wake-up (the handoff, on unless
 * --agent-handoff=false):
 * - ops.select_cpu() runs on the waker's CPU. It records in task storage
 *   what select_task_rq_fair() would look at (the wake flags; the waker's
 *   CPU, pid and PF_EXITING; whether it runs in task, softirq or hardirq
 *   context; the runnable count and ttwu_pending of its CPU), sends the
 *   wake-up to the agent with a handoff slot, wakes the agent if need be,
 *   and returns prev_cpu: the placement is the agent's.
 * - ops.enqueue() follows (on the wakee's CPU when the kernel queues the
 *   wake-up there). If the agent's decision is in the slot by then, the task
 *   is queued on the decided CPU at once; if not, it is parked in
 *   WL_PARK_DSQ, which no CPU consumes, until the agent's apply_decisions
 *   run moves it onto the decided CPU.
 * - An idle decided CPU is claimed and gets the task in its local DSQ (the
 *   insert or move wakes it); a busy one gets it in its own DSQ, which it
 *   consumes in ops.dispatch() and a newly-idle CPU may pull from.
 * The other roads: a wake-up that cannot be sent from ops.select_cpu() is
 * sent from ops.enqueue(), and its task parked; with the ring transport the
 * decisions come through the decisions user ring, drained in ops.dispatch();
 * a task the agent cannot be asked about (ring full, agent stalled or too
 * far behind) goes to the fallback queue that every CPU consumes, and tasks
 * already parked for a stalled agent are rescued there. The agent's other
 * threads, per-CPU kthreads, reclaim threads and workqueue workers never
 * wait for the agent: they run on their CPU at once.
 *
 * The agent runs only when it has work: it waits in its own queue and is
 * dispatched first by a CPU it may run on when wake-ups wait for it (sleep
 * reports alone wait for the next wake-up). A heartbeat timer runs it at
 * least every WL_HEARTBEAT_NS, carries out decisions that arrived before
 * their task was parked, and wakes idle CPUs left with queued tasks.
 *
 * This file holds every entry point of the object: the sched_ext
 * callbacks, the apply_decisions program the agent runs, the heartbeat
 * timer's callback, and the ops table last. What they call lives in parts, one concern each,
 * included below in the order of their dependencies:
 *
 *   counters.bpf.h   the counters and histograms the agent reads for stats
 *   pelt.bpf.h       the state estimator's arithmetic (PELT, as the kernel's)
 *   state.bpf.h      task_ctx, the per-CPU table the agent reads, the queue
 *                    hints, the object's maps
 *   estimator.bpf.c  the estimator fed by our callbacks: each CPU's and
 *                    task's load and util averages for the agent
 *   agent.bpf.c      the agent as a task: who it is, when it has work, where
 *                    it runs, how it is woken, whether it keeps up
 *   balance.bpf.c    the newly-idle pull, the idle balance, the own-wakee wait
 *   decisions.bpf.c  a decision's way back: the handoff slot, the parking
 *                    queue, recording and carrying out decisions
 *   wakeups.bpf.c    a wake-up's way to the agent: the wakeup messages, the
 *                    fallback queue, the stall rescue
 *
 * Parts named *.bpf.h hold data and small helpers the others use; *.bpf.c
 * parts hold one concern's logic. They are not compiled on their own:
 * build.rs compiles bpf/main.bpf.c as one translation unit into one
 * skeleton, and scx_cargo reruns that build when any .c or .h file in bpf/
 * changes.
 *
 * Nothing here is formally exact: the agent decides on state that may be
 * stale by the time its decision lands, like any user-space scheduler. What
 * must be exact is that no task is ever lost: every path that cannot honour
 * a decision falls back to a queue some CPU consumes.
 */
#include <scx/common.bpf.h>
#include <bpf_experimental.h>
#include "intf.h"

char _license[] SEC("license") = "GPL";

UEI_DEFINE(uei);

/* -------------------------------------------------------------------------
 * Settings the agent writes before load (.rodata, frozen at load, so the
 * verifier sees constants). The balancing ones are in balance.bpf.c.
 */

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

/* -------------------------------------------------------------------------
 * The parts (see above).
 */
#include "counters.bpf.h"
#include "pelt.bpf.h"
#include "state.bpf.h"
#include "estimator.bpf.c"
#include "agent.bpf.c"
#include "balance.bpf.c"
#include "decisions.bpf.c"
#include "wakeups.bpf.c"

/* -------------------------------------------------------------------------
 * Entry points. Keep them in this order: clang emits the static functions
 * and variables of the parts in the order these first use them, so moving
 * one reorders .text and the static part of .bss. The object would work the
 * same, but a refactor could no longer be shown to leave the bytecode as it
 * was (compare `llvm-objdump -d` before and after).
 */
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
	tctx->waker_load_avg = est_load_of(waker);
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

/*
 * Not a wake-up nor a new task: the task's slice ended, it was preempted,
 * or a property of it changed. fair.c keeps such a task on its runqueue and
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

	/*
	 * A new task's first enqueue is a placement too: wake_up_new_task()
	 * asks select_task_rq() with WF_FORK, which ops.select_cpu() stashed,
	 * and the agent answers as fair.c's slow path would.
	 */
	if (!(enq_flags & SCX_ENQ_WAKEUP) && !new_task_selected(tctx))
		requeue_in_place(p, tctx, enq_flags);
	else
		queue_to_agent(p, tctx, enq_flags);
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
 * CPU soon; in the kernel a tick rarely falls into that window, but an
 * emulated CPU (QEMU TCG) stretches it, and pulling such wakees away breaks
 * up the pairs that wake-affine brought together (the migration counts are
 * in docs/benchmarks/bpf-heuristics-notes.md).
 */
void BPF_STRUCT_OPS(wakelab_tick, struct task_struct *p)
{
	s32 cpu = scx_bpf_task_cpu(p);
	struct task_ctx *tctx;
	u64 ran;

	if (is_agent(p))
		return;
	est_bring_to_now(p, false);
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
		if (!is_agent(p))
			cs->free_since_ns = 0;
		note_cpu_changed(cpu);
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
	est_running(p, cpu);
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


void BPF_STRUCT_OPS(wakelab_stopping, struct task_struct *p, bool runnable)
{
	struct cpu_state *cs;
	struct task_ctx *tctx;
	u64 now;

	if (is_agent(p))
		return;
	now = scx_bpf_now();
	est_bring_to_now(p, true);
	/*
	 * A sleeper leaves the CPU's runnable count now, not at the next
	 * refresh: the agent may decide many wake-ups before that.
	 */
	if (!runnable)
		runnable_add(scx_bpf_task_cpu(p), -1);
	cs = cpu_state_of(scx_bpf_task_cpu(p));
	if (cs) {
		cs->free_since_ns = now;
		note_cpu_changed(scx_bpf_task_cpu(p));
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
	if (!is_agent(p))
		est_runnable(p);
}

void BPF_STRUCT_OPS(wakelab_quiescent, struct task_struct *p, u64 deq_flags)
{
	if (!is_agent(p))
		est_quiescent(p);
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
	est_cpu_to_now(cpu);
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
		note_cpu_changed(cpu);
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
			s64 avg = cs->avg_idle_ns ? cs->avg_idle_ns : WL_AVG_IDLE_START_NS;
			u64 idle = now - cs->idle_since_ns;

			cs->last_idle_ns = idle;
			cs->last_idle_end_ns = now;
			/* update_avg(), as fair.c keeps rq->avg_idle */
			if (idle > WL_AVG_IDLE_MAX_NS)
				idle = WL_AVG_IDLE_MAX_NS;
			avg += ((s64)idle - avg) / 8;
			cs->avg_idle_ns = avg > 0 ? avg : 1;
		}
		cs->idle = 0;
		cs->idle_since_ns = 0;
		note_cpu_changed(cpu);
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


void BPF_STRUCT_OPS(wakelab_set_weight, struct task_struct *p, u32 weight)
{
	if (!is_agent(p))
		est_set_weight(p);
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
	       .quiescent		= (void *)wakelab_quiescent,
	       .running			= (void *)wakelab_running,
	       .stopping		= (void *)wakelab_stopping,
	       .update_idle		= (void *)wakelab_update_idle,
	       .tick			= (void *)wakelab_tick,
	       .set_weight		= (void *)wakelab_set_weight,
	       .enable			= (void *)wakelab_enable,
	       .init_task		= (void *)wakelab_init_task,
	       .exit_task		= (void *)wakelab_exit_task,
	       .init			= (void *)wakelab_init,
	       .exit			= (void *)wakelab_exit,
	       /* Agent stalls must be caught by our own fallback first. */
	       .timeout_ms		= 5000,
	       .name			= "wakelab");
