/* SPDX-License-Identifier: GPL-2.0 */
/*
 * scx_wakelab BPF, part of bpf/main.bpf.c: a decision's way back to its task.
 *
 * The agent's decision for a wake-up reaches the task by one of these
 * roads (bpf/intf.h, "The life of a wake-up"):
 * - the handoff (wl_shared.handoff): the wake-up was sent from
 *   ops.select_cpu() with a slot, and the agent wrote its decision there
 *   before the task's ops.enqueue(), which carries it out itself
 *   (enqueue_handed(), carry_out_handed()); handoff_claim(),
 *   handoff_release() and handoff_cancel() keep the slots;
 * - the parking queue: a task whose decision has not arrived waits in
 *   WL_PARK_DSQ (park_note(), park_done()), the decision is recorded when it
 *   comes (record_decision(): from apply_decisions, or from the decisions
 *   ring through drain_decision()), and apply_parked() moves the task onto
 *   its CPU.
 * Both roads end in decided_dsq(), the one rule for where a decided task
 * goes (what the agent could not know is checked again here: the CPU, the
 * task's affinity, whether it is migration-disabled, whether the CPU is
 * idle), and in note_decided_queued().
 *
 * Invariants: a decision is carried out at most once, and only for the
 * wake-up it was made for (its generation, enq_cnt, or its handoff slot's
 * sequence number); whoever clears task_ctx.decision_pending, or frees a
 * DECIDED slot, gives back the decision's wl_shared.inflight count.
 * Accepted race: see record_decision().
 */

/* -------------------------------------------------------------------------
 * Parking, and the bookkeeping of a recorded decision.
 */

/*
 * Parked tasks per CPU they were queued on (their prev): a CPU that is
 * woken by such a wake-up, to find nothing to run because the task waits
 * for the agent, is not a CPU going idle, and wakelab_dispatch() skips its
 * newly-idle pull then.
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
	if (slot && READ_ONCE(*slot)) {
		__sync_fetch_and_sub(slot, 1);
		note_cpu_changed(cpu);
	}
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

/* -------------------------------------------------------------------------
 * The handoff slots (wl_shared.handoff in intf.h). Sequence numbers start
 * at 1; a slot's word keeps their low 46 bits, which do not wrap in
 * practice.
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

/* -------------------------------------------------------------------------
 * Recording a decision, and carrying one out by either road.
 */

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

/* -------------------------------------------------------------------------
 * The parking road.
 */

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
 * The handoff road: ops.enqueue() finds the decision in the slot.
 */

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

/* -------------------------------------------------------------------------
 * The decisions ring (the fallback transport).
 */

/*
 * The fallback transport: one record of the decisions user ring, drained in
 * ops.dispatch() by whichever CPU dispatches next (the agent's own, as the
 * agent yields). Recorded here, carried out by apply_parked() after the
 * drain.
 */
static long drain_decision(struct bpf_dynptr *dynptr, void *context)
{
	const struct decision_msg *d = bpf_dynptr_data(dynptr, 0, sizeof(*d));

	if (d)
		record_decision(d);
	return 0;
}

