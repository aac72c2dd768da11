/* SPDX-License-Identifier: GPL-2.0 */
/*
 * scx_wakelab BPF, part of bpf/main.bpf.c: the state estimator
 * (bpf/pelt.bpf.h) fed by our tasks' sched_ext events, so that the agent
 * decides on the load and util averages the fair class would have.
 *
 * Each callback brings the averages it touches to the runqueue's PELT clock:
 * - ops.runnable(): the task is queued where it is (the CPU ops.select_cpu()
 *   left it on, prev); its averages join that CPU's if they were elsewhere
 *   (the kernel's removed load at the old CPU, and its decay for an idle
 *   one), and its weight joins the CPU's queued weight;
 * - ops.running(): a task that the agent's decision moved while queued
 *   leaves the old CPU's averages at once and joins the new one's (the
 *   kernel's detach and attach); it runs, so util grows;
 * - ops.stopping(), ops.tick(): brought to now; util stops at the stop;
 * - ops.quiescent(): it leaves the queued weight; its averages at that
 *   moment are what the kernel would read at its next wake-up
 *   (select_task_rq_fair() does not bring them to now), sent with it;
 * - ops.update_idle(): an idle CPU's blocked averages, as the kernel's idle
 *   balancing updates them;
 * - ops.set_weight(): a nice change reweighs the task's load and its CPU's
 *   at once, as reweight_entity() does.
 * The agent's own thread is not a task CFS would see: none of this counts it.
 *
 * Each CPU's averages are published in its cpu_state (est_load_avg,
 * est_util_avg) after every update; the agent reads them with the rest of
 * the table. Writers: a CPU's slot is written under its rq lock by that
 * runqueue's callbacks, except by ops.running() of a task the agent moved,
 * which detaches it from the old CPU's slot without that CPU's lock, and by
 * ops.update_idle(); a lost update there is a stale reading for a while,
 * not a lost task.
 */

/*
 * sched_clock less bpf_ktime_get_ns(), as last seen where the rq clock was
 * just read (ops.update_idle()): sched_clock now, for est_runnable().
 * Both count the same TSC; the difference only moves with clock adjustments.
 */
static volatile s64 est_sched_clock_offset;

/* The CPU's averages, and its rq's PELT clock in *now; NULL if out of range. */
static struct pelt_cpu *est_slot(s32 cpu, u64 *now)
{
	struct pelt_cpu *c;
	struct rq *rq;
	u32 key = cpu;

	if (cpu < 0 || cpu >= WL_MAX_CPUS)
		return NULL;
	c = bpf_map_lookup_elem(&pelt_cpus, &key);
	rq = bpf_per_cpu_ptr(&runqueues, cpu);
	if (!c || !rq)
		return NULL;
	*now = pelt_clock(rq);
	/* First seen: from the fair class's own averages of it, which our tasks left. */
	if (!c->avg.last_update_time)
		pelt_seed(&c->avg, &rq->cfs.avg, *now);
	return c;
}

static void est_publish(s32 cpu, struct pelt_cpu *c)
{
	struct cpu_state *cs = cpu_state_of(cpu);

	if (cs && (cs->est_load_avg != c->avg.load_avg || cs->est_util_avg != c->avg.util_avg)) {
		WRITE_ONCE(cs->est_load_avg, c->avg.load_avg);
		WRITE_ONCE(cs->est_util_avg, c->avg.util_avg);
		note_cpu_changed(cpu);
	}
}

/*
 * A task's weight as PELT counts it (1024 = nice 0), from p->scx.weight
 * (100 = nice 0): under sched_ext a nice change sets that, and leaves
 * p->se.load as it was (set_load_weight() hands it to the class).
 */
static u32 est_weight(const struct task_struct *p)
{
	return (p->scx.weight * 1024 + 50) / 100;
}

/* The task's averages; seeded from the kernel's the first time. */
static struct pelt_task *est_task_of(struct task_struct *p, struct task_ctx *tctx, u64 now)
{
	struct pelt_task *t = &tctx->pelt;

	if (!tctx->pelt_seeded) {
		/* In no CPU's averages (-1): our slots hold nothing the fair class did. */
		pelt_task_seed(t, p, -1, now);
		t->weight = est_weight(p);
		tctx->sleep_load_avg = t->avg.load_avg;
		tctx->sleep_util_avg = t->avg.util_avg;
		tctx->pelt_seeded = 1;
	}
	return t;
}

static void est_runnable(struct task_struct *p)
{
	s32 cpu = scx_bpf_task_cpu(p), from;
	struct task_ctx *tctx = lookup_task_ctx(p);
	struct pelt_cpu *c, *old;
	struct pelt_task *t;
	u64 now, old_now;

	if (!tctx || !(c = est_slot(cpu, &now)))
		return;
	t = est_task_of(p, tctx, now);
	pelt_cpu_update(c, now);
	if (t->cpu == cpu) {
		pelt_task_update(t, now);
	} else {
		from = t->cpu;
		if (from >= 0 && (old = est_slot(from, &old_now)))
			pelt_task_leave_asleep(old, t, bpf_per_cpu_ptr(&runqueues, from),
					       bpf_ktime_get_ns() + est_sched_clock_offset);
		pelt_task_attach(c, cpu, t);
	}
	t->queued = 1;
	c->weight += t->weight;
	est_publish(cpu, c);
}

/*
 * A task the estimator has seen: its averages and its CPU's, both brought to
 * the CPU's clock. NULL if it is in no CPU's averages.
 */
static struct pelt_cpu *est_seen_to_now(struct task_struct *p, struct task_ctx **tctxp,
					struct pelt_task **tp)
{
	struct task_ctx *tctx = lookup_task_ctx(p);
	struct pelt_cpu *c;
	u64 now;

	if (!tctx || !tctx->pelt_seeded || !(c = est_slot(tctx->pelt.cpu, &now)))
		return NULL;
	pelt_cpu_update(c, now);
	pelt_task_update(&tctx->pelt, now);
	*tctxp = tctx;
	*tp = &tctx->pelt;
	return c;
}

static void est_quiescent(struct task_struct *p)
{
	struct task_ctx *tctx;
	struct pelt_task *t;
	struct pelt_cpu *c = est_seen_to_now(p, &tctx, &t);

	if (!c || !t->queued)
		return;
	pelt_sub(&c->weight, t->weight);
	if (t->running)
		c->running = 0;
	t->queued = 0;
	t->running = 0;
	tctx->sleep_load_avg = t->avg.load_avg;
	tctx->sleep_util_avg = t->avg.util_avg;
	est_publish(t->cpu, c);
}

static void est_running(struct task_struct *p, s32 cpu)
{
	struct task_ctx *tctx = lookup_task_ctx(p);
	struct pelt_cpu *c, *old;
	struct pelt_task *t;
	u64 now, old_now;
	s32 from;

	if (!tctx || !(c = est_slot(cpu, &now)))
		return;
	t = est_task_of(p, tctx, now);
	/* Running without ops.runnable() (it was queued before we loaded): from now. */
	if (!t->queued)
		est_runnable(p);
	from = t->cpu;
	if (from != cpu) {
		if (from >= 0 && (old = est_slot(from, &old_now))) {
			pelt_cpu_update(old, old_now);
			pelt_task_update(t, old_now);
			pelt_task_detach(old, t);
			pelt_sub(&old->weight, t->weight);
			est_publish(from, old);
		}
		pelt_cpu_update(c, now);
		pelt_task_attach(c, cpu, t);
		c->weight += t->weight;
	} else {
		pelt_cpu_update(c, now);
		pelt_task_update(t, now);
	}
	t->running = 1;
	c->running = 1;
	est_publish(cpu, c);
}

/*
 * A task's load average as the estimator last updated it, the kernel's own
 * for a task it has not seen (sync wake-ups weigh the waker's:
 * task_h_load(current)).
 */
static u64 est_load_of(struct task_struct *p)
{
	struct task_ctx *tctx = lookup_task_ctx(p);

	if (tctx && tctx->pelt_seeded)
		return tctx->pelt.avg.load_avg;
	return BPF_CORE_READ(p, se.avg.load_avg);
}

/* The stop, the tick: brought to now; after a stop, nothing of ours runs there. */
static void est_bring_to_now(struct task_struct *p, bool stops)
{
	struct task_ctx *tctx;
	struct pelt_task *t;
	struct pelt_cpu *c = est_seen_to_now(p, &tctx, &t);

	if (!c)
		return;
	if (stops) {
		t->running = 0;
		c->running = 0;
	}
	est_publish(t->cpu, c);
}

/* A nice change (ops.set_weight()): its load and its CPU's follow at once. */
static void est_set_weight(struct task_struct *p)
{
	struct task_ctx *tctx = lookup_task_ctx(p);
	struct pelt_cpu *c = NULL;
	struct pelt_task *t;
	u32 weight = est_weight(p), old;
	u64 now;

	if (!tctx || !tctx->pelt_seeded)
		return;
	t = &tctx->pelt;
	old = t->weight;
	if (weight == old)
		return;
	if (t->cpu >= 0 && (c = est_slot(t->cpu, &now)))
		pelt_cpu_update(c, now);
	pelt_task_reweight(c, t, weight);
	if (c && t->queued) {
		pelt_sub(&c->weight, old);
		c->weight += weight;
	}
	if (c)
		est_publish(t->cpu, c);
}

static void est_cpu_to_now(s32 cpu)
{
	struct pelt_cpu *c;
	struct rq *rq;
	u64 now;

	if (!(c = est_slot(cpu, &now)))
		return;
	pelt_cpu_update(c, now);
	est_publish(cpu, c);
	/* sched_clock now, for est_runnable(): the rq clock was just read. */
	rq = bpf_per_cpu_ptr(&runqueues, cpu);
	if (rq)
		est_sched_clock_offset = (s64)(rq->clock - bpf_ktime_get_ns());
}
