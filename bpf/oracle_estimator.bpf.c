/* SPDX-License-Identifier: GPL-2.0 */
/*
 * scx_wakelab oracle, part of bpf/oracle.bpf.c (included there, not built on
 * its own): the estimator's attachment to the fair class.
 *
 * The estimator (bpf/pelt.bpf.h) is the code the live scheduler decides on.
 * Here it is fed by the fair class's own events instead of sched_ext's
 * callbacks, so that each wake-up record can carry its averages beside the
 * kernel's: enqueue and dequeue (fentry brings the averages to now, fexit
 * takes the runqueue's new inputs), sched_switch, the tick, migration, a
 * nice change, the blocked-average update of load balancing, and a task's
 * death. The inputs are the kernel's (cfs_rq->load.weight, cfs_rq->curr,
 * se->on_rq): what is measured is the arithmetic and the moments of update.
 */

/* The runqueue's inputs as the kernel holds them after an event. */
static void est_inputs(struct pelt_cpu *c, struct rq *rq)
{
	c->weight = BPF_CORE_READ(rq, cfs.load.weight) >> PELT_WEIGHT_SHIFT;
	c->running = BPF_CORE_READ(rq, cfs.curr) != NULL;
}

/*
 * The kernel's own moves of a task's averages into and out of a CPU's are
 * hooked where its BTF has the functions (the loader checks):
 * attach_entity_load_avg() and remove_entity_load_avg() (est_kernel_moves),
 * detach_entity_load_avg() (est_kernel_detach; inlined on 5.10). Without
 * them the moves are inferred from a task's enqueue, migration and death,
 * which misses the roads those do not show: on 6.12 a task can leave a CPU's
 * averages and be queued there again with no attach, and the inference
 * counts it twice (docs/oracle-notes.md).
 */
const volatile bool est_kernel_moves;
const volatile bool est_kernel_detach;

/* CPU cpu's slot, seeded from its runqueue the first time. */
static struct pelt_cpu *est_cpu(u32 cpu, struct rq *rq, u64 now)
{
	struct pelt_cpu *c;

	if (cpu >= ORACLE_MAX_CPUS || !rq)
		return NULL;
	c = bpf_map_lookup_elem(&est_cpus, &cpu);
	if (c && !c->avg.last_update_time) {
		pelt_seed(&c->avg, &rq->cfs.avg, now);
		est_inputs(c, rq);
	}
	return c;
}

/* p's slot; created (seeded from p's own averages) only at an enqueue on CPU cpu >= 0. */
static struct pelt_task *est_task(struct task_struct *p, u64 now, s32 cpu)
{
	s32 pid = BPF_CORE_READ(p, pid);
	struct pelt_task *t = bpf_map_lookup_elem(&est_tasks, &pid), fresh;

	if (t || cpu < 0 || !pid)
		return t;
	__builtin_memset(&fresh, 0, sizeof(fresh));
	pelt_task_seed(&fresh, p, cpu, now);
	bpf_map_update_elem(&est_tasks, &pid, &fresh, BPF_NOEXIST);
	return bpf_map_lookup_elem(&est_tasks, &pid);
}

/*
 * p's slot, for a task leaving its CPU (a migration, its death) that the
 * estimator has not seen queued: one that slept, or ran, since before the
 * recording began. Its CPU's slot was seeded from the kernel's averages,
 * which hold it (blocked or queued), so its own are seeded the same way, in
 * that CPU's: without them the CPU would keep the share the kernel takes
 * away (docs/oracle-notes.md). `queued` as the kernel has it: asleep or
 * being moved.
 */
static struct pelt_task *est_task_leaving(struct task_struct *p, u32 queued)
{
	s32 pid = BPF_CORE_READ(p, pid);
	struct pelt_task *t = bpf_map_lookup_elem(&est_tasks, &pid);
	u32 cpu;

	if (t)
		return t;
	cpu = BPF_CORE_READ(p, se.cfs_rq, rq, cpu);
	if (cpu >= ORACLE_MAX_CPUS)
		return NULL;
	if ((t = est_task(p, 0, cpu)))
		t->queued = queued;
	return t;
}

static struct pelt_cpu *est_cpu_of_task(struct pelt_task *t)
{
	u32 cpu;

	if (t->cpu < 0)
		return NULL;
	cpu = t->cpu;
	return bpf_map_lookup_elem(&est_cpus, &cpu);
}

/*
 * Queued for us, not for the kernel: a delayed-dequeue sleeper (v6.12+)
 * that the kernel dequeued when it came to be picked, unseen where
 * est_dequeued_entities() is not loaded (dequeue_entities() not in the
 * kernel's BTF). It counted as queued up to that dequeue, whose moment its
 * own stamp still holds unless a migration has cleared it; then, up to when
 * it stopped running.
 */
static void est_missed_dequeue(struct pelt_task *t, struct task_struct *p)
{
	u64 last;

	if (!t->queued || BPF_CORE_READ(p, se.on_rq))
		return;
	last = BPF_CORE_READ(p, se.avg.last_update_time);
	pelt_task_update(t, last > t->avg.last_update_time ? last : t->stopped_ns);
	t->queued = 0;
	t->running = 0;
}

/*
 * sched_clock less bpf_ktime_get_ns(), as last seen at a switch (where the
 * rq clock was just read): sched_clock now, for est_migrate(), is
 * bpf_ktime_get_ns() plus this. Both count the same TSC; the difference only
 * moves with clock adjustments.
 */
volatile s64 sched_clock_offset;

/*
 * p moves to another CPU, as the kernel takes it out of its old CPU's
 * averages: a wake-up's task (asleep) joins the old CPU's removed load, a
 * balancing move's (queued, TASK_ON_RQ_MIGRATING, under the old rq's lock)
 * leaves them at once. Either way it is in no CPU's until its enqueue.
 */
SEC("fentry/migrate_task_rq_fair")
int BPF_PROG(est_migrate, struct task_struct *p, int new_cpu)
{
	bool moving = BPF_CORE_READ(p, on_rq) == TASK_ON_RQ_MIGRATING;
	struct pelt_task *t = est_task_leaving(p, moving);
	struct pelt_cpu *old;
	struct rq *rq;
	u64 now;

	if (!t)
		return 0;
	est_missed_dequeue(t, p);
	/* Where the kernel's own move is hooked, that hook moves the task. */
	if (moving ? est_kernel_detach : est_kernel_moves)
		return 0;
	if (!(old = est_cpu_of_task(t)))
		return 0;
	if (moving && (rq = per_cpu_addr(ksym_runqueues, t->cpu))) {
		now = pelt_clock(rq);
		pelt_cpu_update(old, now);
		pelt_task_update(t, now);
		pelt_task_detach(old, t);
	} else {
		pelt_task_leave_asleep(old, t, per_cpu_addr(ksym_runqueues, t->cpu),
				       bpf_ktime_get_ns() + sched_clock_offset);
	}
	return 0;
}

SEC("fentry/enqueue_task_fair")
int BPF_PROG(est_enqueue, struct rq *rq, struct task_struct *p, int flags)
{
	u64 now = pelt_clock(rq);
	u32 cpu = BPF_CORE_READ(rq, cpu);
	struct pelt_cpu *c = est_cpu(cpu, rq, now), *old;
	struct pelt_task *t = est_task(p, now, cpu);

	if (!c || !t)
		return 0;
	pelt_cpu_update(c, now);
	est_missed_dequeue(t, p);
	if (t->cpu == (s32)cpu) {
		pelt_task_update(t, now);
		return 0;
	}
	if (est_kernel_moves)
		return 0;
	/* Moved by a road the migration hook did not see: the old CPU's removed load. */
	if ((old = est_cpu_of_task(t)))
		pelt_task_remove(old, t);
	pelt_task_attach(c, cpu, t);
	return 0;
}

/* After an enqueue or a dequeue: the task's and the runqueue's new inputs. */
static void est_after(struct rq *rq, struct task_struct *p)
{
	u64 now = pelt_clock(rq);
	struct pelt_cpu *c = est_cpu(BPF_CORE_READ(rq, cpu), rq, now);
	struct pelt_task *t = est_task(p, now, -1);

	if (c)
		est_inputs(c, rq);
	if (t) {
		/* A delayed-dequeue sleeper (v6.12+) stays queued, as the kernel counts it. */
		t->queued = BPF_CORE_READ(p, se.on_rq) != 0;
		if (!t->queued)
			t->running = 0;
		t->weight = BPF_CORE_READ(p, se.load.weight) >> PELT_WEIGHT_SHIFT;
	}
}

SEC("fexit/enqueue_task_fair")
int BPF_PROG(est_enqueued, struct rq *rq, struct task_struct *p, int flags)
{
	est_after(rq, p);
	return 0;
}

SEC("fentry/dequeue_task_fair")
int BPF_PROG(est_dequeue, struct rq *rq, struct task_struct *p, int flags)
{
	u64 now = pelt_clock(rq);
	u32 cpu = BPF_CORE_READ(rq, cpu);
	struct pelt_cpu *c = est_cpu(cpu, rq, now);
	struct pelt_task *t = est_task(p, now, -1);

	if (c)
		pelt_cpu_update(c, now);
	if (t && t->cpu == (s32)cpu)
		pelt_task_update(t, now);
	return 0;
}

SEC("fexit/dequeue_task_fair")
int BPF_PROG(est_dequeued, struct rq *rq, struct task_struct *p, int flags)
{
	est_after(rq, p);
	return 0;
}

/* The switch: prev stops running, next starts; the runqueue's curr changes. */
SEC("tp_btf/sched_switch")
int BPF_PROG(est_switch, bool preempt, struct task_struct *prev, struct task_struct *next)
{
	u32 cpu = bpf_get_smp_processor_id();
	struct rq *rq = per_cpu_addr(ksym_runqueues, cpu);
	u64 now = rq ? pelt_clock(rq) : 0;
	struct pelt_cpu *c = est_cpu(cpu, rq, now);
	struct pelt_task *t;

	if (!c)
		return 0;
	sched_clock_offset = (s64)(BPF_CORE_READ(rq, clock) - bpf_ktime_get_ns());
	pelt_cpu_update(c, now);
	if ((t = est_task(prev, now, -1))) {
		pelt_task_update(t, now);
		t->running = 0;
		t->stopped_ns = now;
	}
	if ((t = est_task(next, now, -1))) {
		pelt_task_update(t, now);
		t->running = t->queued && t->cpu == (s32)cpu;
	}
	est_inputs(c, rq);
	return 0;
}

/* entity_tick() brings the runqueue's and the running task's averages to now. */
SEC("fentry/task_tick_fair")
int BPF_PROG(est_tick, struct rq *rq, struct task_struct *curr, int queued)
{
	u64 now = pelt_clock(rq);
	struct pelt_cpu *c = est_cpu(BPF_CORE_READ(rq, cpu), rq, now);
	struct pelt_task *t = est_task(curr, now, -1);

	if (c)
		pelt_cpu_update(c, now);
	if (t)
		pelt_task_update(t, now);
	return 0;
}

/*
 * Load balancing brings a CPU's blocked averages to now, idle or not
 * (update_blocked_averages(), sched_balance_update_blocked_averages() from
 * v6.10): the only update an idle CPU gets. It often runs for another CPU
 * than the one it updates, or in softirq while a waker on another CPU
 * enqueues here, so the estimator's update must be made under that CPU's
 * rq lock, as the kernel's is: two writers of one slot without it lose one
 * change for good (docs/oracle-notes.md). So the hook is the call made
 * under that lock at the same clock just before the fair class's update:
 * the other classes' averages, update_other_load_avgs(rq) from v6.12,
 * update_rt_rq_load_avg(now, rq, running) before. The RT class calls the
 * latter at its own switches and ticks too, also under the lock: there it
 * is one more update of the same averages. The loader keeps the one the
 * kernel has.
 */
static void est_blocked(struct rq *rq)
{
	u64 now = pelt_clock(rq);
	struct pelt_cpu *c = est_cpu(BPF_CORE_READ(rq, cpu), rq, now);

	if (c)
		pelt_cpu_update(c, now);
}

SEC("fexit/update_other_load_avgs")
int BPF_PROG(est_blocked1, struct rq *rq)
{
	est_blocked(rq);
	return 0;
}

SEC("fexit/update_rt_rq_load_avg")
int BPF_PROG(est_blocked3, u64 now, struct rq *rq, int running)
{
	est_blocked(rq);
	return 0;
}

/*
 * A task's weight changed (set_user_nice()): its load and its CPU's follow
 * at once. reweight_task_fair(rq, p, lw) from v6.10, reweight_task(p, prio)
 * before; the loader keeps the one the kernel has. The kernel holds the
 * task's rq lock.
 */
static void est_reweighted(struct task_struct *p)
{
	s32 pid = BPF_CORE_READ(p, pid);
	struct pelt_task *t = bpf_map_lookup_elem(&est_tasks, &pid);
	u32 weight = BPF_CORE_READ(p, se.load.weight) >> PELT_WEIGHT_SHIFT;

	if (t && weight != t->weight)
		pelt_task_reweight(est_cpu_of_task(t), t, weight);
}

SEC("fexit/reweight_task_fair")
int BPF_PROG(est_reweight3, struct rq *rq, struct task_struct *p, const void *lw)
{
	est_reweighted(p);
	return 0;
}

SEC("fexit/reweight_task")
int BPF_PROG(est_reweight2, struct task_struct *p, int prio)
{
	est_reweighted(p);
	return 0;
}

/*
 * A dead task's averages leave its CPU's (task_dead_fair(), through
 * remove_entity_load_avg() where that is hooked), and its slot goes.
 */
SEC("fexit/task_dead_fair")
int BPF_PROG(est_dead, struct task_struct *p)
{
	s32 pid = BPF_CORE_READ(p, pid);
	struct pelt_task *t;
	struct pelt_cpu *old;

	if (!est_kernel_moves && (t = est_task_leaving(p, 0)) && (old = est_cpu_of_task(t)))
		pelt_task_remove(old, t);
	bpf_map_delete_elem(&est_tasks, &pid);
	return 0;
}

/* The task whose entity se is; NULL for a group's. */
static struct task_struct *est_task_of(struct sched_entity *se)
{
	if (BPF_CORE_READ(se, my_q))
		return NULL;
	return (void *)se - bpf_core_field_offset(struct task_struct, se);
}

/* cfs_rq's CPU when it is a CPU's root runqueue (*rqp set), else -1. */
static s32 est_root_cpu(struct cfs_rq *cfs_rq, struct rq **rqp)
{
	struct rq *rq = BPF_CORE_READ(cfs_rq, rq);

	if (!rq || (u64)cfs_rq != (u64)rq + bpf_core_field_offset(struct rq, cfs))
		return -1;
	*rqp = rq;
	return BPF_CORE_READ(rq, cpu);
}

/*
 * v6.12+: the kernel's dequeue of entities, here for the one road that
 * bypasses dequeue_task_fair(): a delayed-dequeue sleeper's last dequeue,
 * made when it comes to be picked (pick_next_entity()). Without it the
 * runqueue's weight input kept the sleeper until the next enqueue or switch,
 * and the task its queued state until its next event. Inside
 * dequeue_task_fair() it does what that hook's exit does, at the same clock.
 */
SEC("fexit/dequeue_entities")
int BPF_PROG(est_dequeued_entities, struct rq *rq, struct sched_entity *se, int flags, int ret)
{
	struct task_struct *p = est_task_of(se);
	u64 now = pelt_clock(rq);
	s32 cpu = BPF_CORE_READ(rq, cpu), pid;
	struct pelt_cpu *c = est_cpu(cpu, rq, now);
	struct pelt_task *t;

	if (c) {
		pelt_cpu_update(c, now);
		est_inputs(c, rq);
	}
	if (!p)
		return 0;
	pid = BPF_CORE_READ(p, pid);
	t = bpf_map_lookup_elem(&est_tasks, &pid);
	/* Dequeued now, as the kernel's own averages of it say: queued up to here. */
	if (!t || !t->queued || BPF_CORE_READ(p, se.on_rq))
		return 0;
	if (t->cpu == cpu)
		pelt_task_update(t, now);
	t->queued = 0;
	t->running = 0;
	return 0;
}

/*
 * The kernel added se's averages to its CPU's, brought to now (an enqueue
 * after a migration or at a task's first, a class or group change): the
 * task's join ours. One we hold on another CPU leaves that one's first; one
 * we already hold here stays as it is.
 */
SEC("fexit/attach_entity_load_avg")
int BPF_PROG(est_attached, struct cfs_rq *cfs_rq, struct sched_entity *se)
{
	struct task_struct *p = est_task_of(se);
	struct rq *rq = NULL;
	s32 cpu = est_root_cpu(cfs_rq, &rq), pid;
	struct pelt_cpu *c, *old;
	struct pelt_task *t;
	u64 now;

	if (!p || cpu < 0 || !rq)
		return 0;
	now = pelt_clock(rq);
	if (!(c = est_cpu(cpu, rq, now)))
		return 0;
	pid = BPF_CORE_READ(p, pid);
	t = bpf_map_lookup_elem(&est_tasks, &pid);
	if (!t && (t = est_task(p, now, cpu)))
		t->cpu = -1;	/* seeded after the kernel's attach: in no CPU's of ours yet */
	if (!t || t->cpu == cpu)
		return 0;
	if ((old = est_cpu_of_task(t)))
		pelt_task_remove(old, t);
	pelt_cpu_update(c, now);
	pelt_task_attach(c, cpu, t);
	return 0;
}

/*
 * The kernel takes a queued se's averages out of its CPU's at once (a
 * balancing move, a class or group change); both are up to date.
 */
SEC("fentry/detach_entity_load_avg")
int BPF_PROG(est_detached, struct cfs_rq *cfs_rq, struct sched_entity *se)
{
	struct task_struct *p = est_task_of(se);
	struct rq *rq = NULL;
	s32 cpu = est_root_cpu(cfs_rq, &rq);
	struct pelt_cpu *c;
	struct pelt_task *t;
	u64 now;

	if (!p || cpu < 0 || !rq || !(t = est_task_leaving(p, 0)) || t->cpu != cpu ||
	    !(c = est_cpu_of_task(t)))
		return 0;
	now = pelt_clock(rq);
	pelt_cpu_update(c, now);
	pelt_task_update(t, now);
	pelt_task_detach(c, t);
	return 0;
}

/*
 * The kernel put an asleep se's averages in its CPU's removed load (a
 * wake-up elsewhere, its death): ours too, then migrate_se_pelt_lag() as
 * pelt_task_leave_asleep() applies it. (fexit: an fentry program on this
 * function was seen not to run on 6.12.)
 */
SEC("fexit/remove_entity_load_avg")
int BPF_PROG(est_removed, struct sched_entity *se)
{
	struct task_struct *p = est_task_of(se);
	struct pelt_task *t;
	struct pelt_cpu *old;

	if (!p || !(t = est_task_leaving(p, 0)))
		return 0;
	est_missed_dequeue(t, p);
	if ((old = est_cpu_of_task(t)))
		pelt_task_leave_asleep(old, t, per_cpu_addr(ksym_runqueues, t->cpu),
				       bpf_ktime_get_ns() + sched_clock_offset);
	return 0;
}
