/* SPDX-License-Identifier: GPL-2.0 */
/*
 * scx_wakelab BPF, part of bpf/main.bpf.c: a wake-up's way to the agent.
 *
 * - The wakeup messages (struct wakeup_msg) through the wakeups ring:
 *   fill_wakeup_msg(); sent from ops.select_cpu() with a handoff slot by
 *   default (send_from_select()), else from ops.enqueue(), which then parks
 *   the task (queue_to_agent()); sleep reports for the agent's
 *   delayed-dequeue emulation (report_sleep()).
 * - The fallback queue (WL_FALLBACK_DSQ), which every CPU consumes: a task
 *   goes there when the agent cannot be asked (ring full, agent stalled or
 *   too far behind: dispatch_fallback()); tasks already parked for such an
 *   agent are moved there (rescue_from_stalled_agent()); a fallback task
 *   that has waited there too long goes before the CPU's own queue
 *   (fallback_starving()), so that one only this CPU may run is not starved.
 *
 * Invariant: no task is lost on this way. A wake-up is either sent (and its
 * task parked or handed off), or its task is queued where some CPU will run
 * it; a parked task whose decision does not come within agent_stall_ns is
 * rescued (ops.dispatch() looks at most every WL_RESCUE_PERIOD_NS).
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
	/*
	 * A task the estimator has not seen yet starts from the kernel's own
	 * averages. (Read with a helper: a plain load would let the compiler
	 * share one instruction between the two pointers, which the verifier
	 * refuses.)
	 */
	if (tctx->pelt_seeded) {
		msg->est_load_avg = tctx->sleep_load_avg;
		msg->est_util_avg = tctx->sleep_util_avg;
	} else {
		msg->est_load_avg = BPF_CORE_READ(p, se.avg.load_avg);
		msg->est_util_avg = BPF_CORE_READ(p, se.avg.util_avg);
	}
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
		msg->waker_est_load_avg = tctx->waker_load_avg;
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
		msg->waker_est_load_avg = 0;
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
 * ring, no free slot) leaves the message to ops.enqueue(), as without the
 * handoff.
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
/* The road when the agent cannot be asked: the fallback queue every CPU consumes. */
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
 * ops.select_cpu() ran for a task just forked (SCX_WAKE_FORK) and its first
 * enqueue has not consumed the stash yet. (Exec never gets here: sched_ext
 * keeps an exec'ing task where it is.)
 */
static bool new_task_selected(const struct task_ctx *tctx)
{
	return tctx->select_valid && (tctx->wake_flags & SCX_WAKE_FORK);
}

/*
 * ops.enqueue() of a wake-up or a new task: take the handoff road if
 * ops.select_cpu() sent the message, else send it from here and park the
 * task, or queue it in the fallback queue when the agent cannot be asked.
 */
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
	bool selected = (tctx->select_valid && (enq_flags & SCX_ENQ_WAKEUP)) ||
			new_task_selected(tctx);

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

	/*
	 * Decisions the agent recorded before it stalled (a batch it did not
	 * get to carry out) are carried out first: the heartbeat would, but a
	 * rescue that came before it would void them.
	 */
	if (READ_ONCE(wl_shared.decisions_pending))
		apply_parked(true);

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
 * long as the agent keeps this CPU's queue busy, which in CI was long enough
 * for the kernel's watchdog to eject us ("runnable task stall"; see
 * docs/benchmarks/bpf-heuristics-notes.md). So a fallback task this CPU may
 * run, waiting longer than WL_FALLBACK_MAX_WAIT_NS, goes first. The queue
 * is in arrival order, so the first such task is the oldest, and it is the
 * one scx_bpf_dsq_move_to_local() then takes.
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
