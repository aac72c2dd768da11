/* SPDX-License-Identifier: GPL-2.0 */
/*
 * scx_wakelab oracle, part of bpf/oracle.bpf.c (included there, not built on
 * its own): newly-idle balances, for `oracle record --newidle`.
 *
 * One struct oracle_newidle per balance, on its own ring: at entry, what
 * the gates read (the pending wake-up, the root domain's overload flag,
 * avg_idle, each domain's max_newidle_lb_cost and whether its hot tasks may
 * move) and every CPU's state with its count of cold tasks; during it, the
 * domains load balancing ran in and the first task pulled; at exit, the
 * result. The programs are loaded only with --newidle, and the loader keeps
 * the hooks the kernel's BTF has: newidle_balance() to v6.9,
 * sched_balance_newidle() after, or pick_task_fair() with nothing queued
 * where that is inlined (7.2); load_balance() or sched_balance_rq() per
 * domain.
 */

volatile u64 nr_newidle, nr_newidle_ring_full;

struct {
	__uint(type, BPF_MAP_TYPE_RINGBUF);
	__uint(max_entries, ORACLE_NEWIDLE_RING_BYTES);
} newidle SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, u32);
	__type(value, struct oracle_newidle);
} newidle_scratch SEC(".maps");

/* Inside a newly-idle balance on this CPU: entry seen, exit not yet. */
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, u32);
	__type(value, u32);
} newidle_armed SEC(".maps");

/* The root domain's overload flag: an int to v6.8, a bool named overloaded since. */
struct root_domain___overload {
	int overload;
} __attribute__((preserve_access_index));

struct root_domain___overloaded {
	u8 overloaded;
} __attribute__((preserve_access_index));

static u8 rd_overloaded(struct rq *rq)
{
	struct root_domain___overloaded *now = (void *)BPF_CORE_READ(rq, rd);
	struct root_domain___overload *old = (void *)now;

	if (!now)
		return 2;
	if (bpf_core_field_exists(now->overloaded))
		return BPF_CORE_READ(now, overloaded) ? 1 : 0;
	if (bpf_core_field_exists(old->overload))
		return BPF_CORE_READ(old, overload) ? 1 : 0;
	return 2;
}

/* The scratch record of a balance in progress on this CPU, or NULL. */
static struct oracle_newidle *newidle_in_progress(void)
{
	u32 zero = 0, *on = bpf_map_lookup_elem(&newidle_armed, &zero);

	if (!on || !*on)
		return NULL;
	return bpf_map_lookup_elem(&newidle_scratch, &zero);
}

/*
 * How many of @cpu's fair tasks, the running one aside, task_hot() would let
 * go: last run at least sysctl_sched_migration_cost (its default) before the
 * rq's task clock as load_balance() will find it: the balancing CPU's clock,
 * @now (rq->clock, set by its schedule() just before), is ahead of a remote
 * rq's by the time since that rq's last update_rq_clock(), which the balance
 * makes up before detaching, so the remote task clock is advanced by as
 * much. detach_tasks() walks at most sysctl_sched_nr_migrate of
 * them; so does this. Read without the rq's lock: a list that changes under
 * us ends the walk early or miscounts one balance (accepted: the record says
 * what the balance could see, not a promise). A global function, so that the
 * verifier checks its loop once rather than at each CPU of the caller's (5.10
 * refuses the program otherwise: over a million instructions).
 */
__noinline int count_cold(u32 cpu, u64 now)
{
	struct rq *rq = per_cpu_addr(ksym_runqueues, cpu);
	void *head, *curr_se;
	struct list_head *pos;
	u32 k, cold = 0;
	u64 clock, rq_clock;

	if (!rq)
		return 0;
	head = (void *)rq + bpf_core_field_offset(struct rq, cfs_tasks);
	curr_se = (void *)BPF_CORE_READ(rq, curr) + bpf_core_field_offset(struct task_struct, se);
	clock = BPF_CORE_READ(rq, clock_task);
	rq_clock = BPF_CORE_READ(rq, clock);
	if ((s64)(now - rq_clock) > 0)
		clock += now - rq_clock;
	pos = BPF_CORE_READ(rq, cfs_tasks.next);
	for (k = 0; k < ORACLE_COLD_SCAN; k++) {
		struct sched_entity *se;

		if (!pos || (void *)pos == head)
			break;
		se = (void *)pos - bpf_core_field_offset(struct sched_entity, group_node);
		if ((void *)se != curr_se &&
		    (s64)(clock - BPF_CORE_READ(se, exec_start)) >= ORACLE_MIGRATION_COST_NS)
			cold++;
		pos = BPF_CORE_READ(pos, next);
	}
	return cold;
}

static __always_inline int newidle_enter(struct rq *rq)
{
	u32 zero = 0, i, n = nr_cpus;
	struct oracle_newidle *r = bpf_map_lookup_elem(&newidle_scratch, &zero);
	u64 now;
	u32 *on = bpf_map_lookup_elem(&newidle_armed, &zero);
	struct sched_domain *sd;

	if (!r || !on)
		return 0;
	r->now_ns = bpf_ktime_get_ns();
	r->cpu = BPF_CORE_READ(rq, cpu);
	r->avg_idle = BPF_CORE_READ(rq, avg_idle);
	r->ttwu_pending = BPF_CORE_READ(rq, ttwu_pending) ? 1 : 0;
	r->overloaded = rd_overloaded(rq);
	now = BPF_CORE_READ(rq, clock);
	r->ret = 0;
	r->balanced_domains = 0;
	r->hot_escape_domains = 0;
	r->nr_pulled = 0;
	r->pulled_pid = 0;
	r->pulled_from = -1;
	sd = BPF_CORE_READ(rq, sd);
	r->nr_domains = 0;
	for (i = 0; i < ORACLE_MAX_DOMAINS; i++) {
		r->max_newidle_lb_cost[i] = 0;
		if (!sd)
			continue;
		r->max_newidle_lb_cost[i] = BPF_CORE_READ(sd, max_newidle_lb_cost);
		if (BPF_CORE_READ(sd, nr_balance_failed) > BPF_CORE_READ(sd, cache_nice_tries))
			r->hot_escape_domains |= 1 << i;
		r->nr_domains = i + 1;
		sd = BPF_CORE_READ(sd, parent);
	}
	if (n > ORACLE_MAX_CPUS)
		n = ORACLE_MAX_CPUS;
	r->nr_cpus = n;
	for (i = 0; i < ORACLE_MAX_CPUS; i++) {
		if (i >= n)
			break;
		read_cpu(i, &r->cpus[i]);
		/* Only a CPU with a task waiting has one to give. */
		r->nr_cold[i] = r->cpus[i].nr_running > 1 ? count_cold(i, now) : 0;
	}
	*on = 1;
	return 0;
}

/* The exit of a balance this CPU entered; any other exit is not one. */
static __always_inline int newidle_leave(int ret)
{
	u32 zero = 0, *on = bpf_map_lookup_elem(&newidle_armed, &zero);
	struct oracle_newidle *r = bpf_map_lookup_elem(&newidle_scratch, &zero);

	if (!r || !on || !*on)
		return 0;
	*on = 0;
	r->ret = ret;
	SUBMIT(&newidle, r, &nr_newidle, &nr_newidle_ring_full);
	return 0;
}

/* The balance under either of its names: newidle_balance() to v6.9, sched_balance_newidle() after. */
#define NEWIDLE_HOOKS(fn, name)							\
	SEC("fentry/" #fn)							\
	int BPF_PROG(newidle_enter_##name, struct rq *rq, struct rq_flags *rf)	\
	{									\
		return newidle_enter(rq);					\
	}									\
	SEC("fexit/" #fn)							\
	int BPF_PROG(newidle_exit_##name, struct rq *rq, struct rq_flags *rf, int ret) \
	{									\
		return newidle_leave(ret);					\
	}

NEWIDLE_HOOKS(newidle_balance, old)
NEWIDLE_HOOKS(sched_balance_newidle, new)

/*
 * Where sched_balance_newidle() is inlined (7.2 has it only inside
 * pick_task_fair()): the balance is what pick_task_fair() does when the
 * fair class has nothing queued, so its entry with an empty cfs_rq is the
 * balance's entry, and its result the balance's (NULL: none, RETRY_TASK:
 * another class's, a task: a fair one).
 */
struct cfs_rq___queued {
	unsigned int nr_queued;		/* v6.14+ */
	unsigned int nr_running;	/* before */
} __attribute__((preserve_access_index));

static bool cfs_empty(struct rq *rq)
{
	struct cfs_rq___queued *q = (void *)&rq->cfs;

	if (bpf_core_field_exists(q->nr_queued))
		return !BPF_CORE_READ(q, nr_queued);
	return !BPF_CORE_READ(q, nr_running);
}

SEC("fentry/pick_task_fair")
int BPF_PROG(newidle_enter_pick, struct rq *rq)
{
	if (!cfs_empty(rq))
		return 0;
	return newidle_enter(rq);
}

SEC("fexit/pick_task_fair")
int BPF_PROG(newidle_exit_pick, struct rq *rq, struct rq_flags *rf, struct task_struct *p)
{
	if (!p)
		return newidle_leave(0);
	return newidle_leave((long)p == -1 ? -1 : 1);
}

/* Load balancing in domain sd, during a newly-idle balance: which of its domains. */
static __always_inline int newidle_balanced(struct rq *rq, struct sched_domain *sd)
{
	struct oracle_newidle *r = newidle_in_progress();
	struct sched_domain *d;
	u32 i;

	if (!r)
		return 0;
	d = BPF_CORE_READ(rq, sd);
	for (i = 0; i < ORACLE_MAX_DOMAINS && d; i++) {
		if (d == sd) {
			r->balanced_domains |= 1 << i;
			break;
		}
		d = BPF_CORE_READ(d, parent);
	}
	return 0;
}

SEC("fentry/load_balance")
int BPF_PROG(newidle_lb_old, int this_cpu, struct rq *rq, struct sched_domain *sd)
{
	return newidle_balanced(rq, sd);
}

SEC("fentry/sched_balance_rq")
int BPF_PROG(newidle_lb_new, int this_cpu, struct rq *rq, struct sched_domain *sd)
{
	return newidle_balanced(rq, sd);
}

/* A task moved to the balancing CPU by its own balance (detach_task() runs there). */
SEC("tp_btf/sched_migrate_task")
int BPF_PROG(newidle_pull, struct task_struct *p, int dest_cpu)
{
	struct oracle_newidle *r = newidle_in_progress();

	if (!r || dest_cpu != r->cpu)
		return 0;
	if (!r->nr_pulled++) {
		r->pulled_pid = BPF_CORE_READ(p, pid);
		r->pulled_from = BPF_CORE_READ(p, se.cfs_rq, rq, cpu);
	}
	return 0;
}
