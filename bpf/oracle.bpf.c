/* SPDX-License-Identifier: GPL-2.0 */
/*
 * scx_wakelab oracle: record the fair class's own wake-up placements.
 *
 * fentry on select_task_rq_fair() copies what the function is about to read
 * (the task, current, every CPU's runqueue and LLC hints) into a per-CPU
 * scratch record; fexit adds the CPU it returned and submits the record to
 * a ring that `scx_wakelab oracle record` drains (src/oracle/ turns the
 * records into trace lines and replays them). No sched_ext is needed: this
 * runs beside whatever scheduler the kernel has, on any kernel with BTF and
 * fentry (5.5+).
 *
 * The signature differs by version, so there are two pairs of programs and
 * the loader keeps the pair that matches the kernel's BTF:
 *   v5.10:  (struct task_struct *p, int prev_cpu, int sd_flag, int wake_flags)
 *   v5.11+: (struct task_struct *p, int prev_cpu, int wake_flags)
 * (3aef1551 folded sd_flag into wake_flags as WF_TTWU/WF_FORK/WF_EXEC.)
 *
 * Field offsets are CO-RE relocations; fields that only some versions have
 * are read behind bpf_core_field_exists(). What this program reads races
 * with the other CPUs exactly as the kernel's own reads do: the record is
 * the state select_task_rq_fair() could have seen, read a moment apart from
 * what it did see (docs/oracle-notes.md measures the race). fexit reads
 * each CPU again and marks the ones that changed, so a replay can tell a
 * disagreement that may come from the race from one that cannot.
 *
 * Beside the kernel's load and utilisation averages, each record carries
 * the estimator's (bpf/pelt.bpf.h), the one the live scheduler decides on,
 * fed here by the fair class's own events: enqueue_task_fair() and
 * dequeue_task_fair() (fentry: bring the averages to now; fexit: take the
 * runqueue's new inputs), sched_switch, task_tick_fair(), task_dead_fair(),
 * migrate_task_rq_fair(), the reweight of a nice change and the
 * blocked-average update of load balancing (fexit of the call made just
 * before it under the rq lock; the loader picks the version's). The inputs
 * are the kernel's (cfs_rq->load.weight, cfs_rq->curr, se->on_rq): what is
 * measured is the arithmetic and the moments of update, not a count of
 * tasks.
 *
 * With `oracle record --newidle`, the newly-idle balance too (struct
 * oracle_newidle, its own ring; programs loaded only then): its entry and
 * exit, the load balancing it runs per domain, the tasks it pulls (last
 * section of this file).
 */
#include "vmlinux.h"
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>
#include <bpf/bpf_core_read.h>
#include "oracle.h"
#include "pelt.bpf.h"

char _license[] SEC("license") = "GPL";

/* Set by the loader: how many CPUs to describe (at most ORACLE_MAX_CPUS). */
const volatile u32 nr_cpus = 1;

/* Counters; `oracle record` reports the last two when it stops. */
volatile u64 nr_records, nr_ring_full, nr_exit_unpaired;

/* The kernel's HZ, from its config (0 where libbpf finds none), for `oracle record`. */
extern unsigned int CONFIG_HZ __kconfig __weak;
volatile u32 kernel_hz;

struct {
	__uint(type, BPF_MAP_TYPE_RINGBUF);
	__uint(max_entries, ORACLE_RING_BYTES);
} records SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, u32);
	__type(value, struct oracle_record);
} scratch SEC(".maps");

/* Entry seen, exit not yet: one flag per CPU (the call runs with IRQs off). */
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, u32);
	__type(value, u32);
} armed SEC(".maps");

/*
 * Kernel symbols, by address: the loader reads them from /proc/kallsyms. Not
 * typed ksyms: Debian's 5.10 BTF has no per-CPU variables, and only addresses
 * work the same on every version. 0 = not found. Per-CPU variables are
 * reached as the kernel does on x86: symbol + __per_cpu_offset[cpu].
 */
const volatile u64 ksym_per_cpu_offset;	/* __per_cpu_offset[] */
const volatile u64 ksym_runqueues;	/* per-CPU struct rq */
const volatile u64 ksym_sd_llc_shared;	/* per-CPU struct sched_domain_shared * */
const volatile u64 ksym_sd_llc;		/* per-CPU struct sched_domain * */
const volatile u64 ksym_preempt_count;	/* per-CPU int __preempt_count, or ... */
const volatile u64 ksym_pcpu_hot;	/* ... per-CPU struct pcpu_hot (v6.2-v6.14) */
const volatile u64 ksym_jiffies;	/* u64 jiffies_64 */

struct pcpu_hot___oracle {
	int preempt_count;
} __attribute__((preserve_access_index));

/*
 * cfs_rq counts, named per version (and mixed in stable kernels: 6.12.y has
 * h_nr_queued and h_nr_runnable beside idle_h_nr_running). Every one is read
 * behind its own bpf_core_field_exists().
 */
struct cfs_rq___counts {
	unsigned int h_nr_running;	/* to v6.13 */
	unsigned int h_nr_queued;	/* v6.14, and 6.12.y */
	unsigned int h_nr_runnable;	/* v6.14, and 6.12.y */
	unsigned int h_nr_delayed;	/* v6.12, v6.13 */
	unsigned int idle_h_nr_running;	/* to v6.13 */
	unsigned int h_nr_idle;		/* v6.14 */
} __attribute__((preserve_access_index));

struct sched_domain___sis_prop {
	u64 avg_scan_cost;		/* to v6.6 */
} __attribute__((preserve_access_index));

struct sched_domain_shared___sis_util {
	int nr_idle_scan;		/* v6.0+ (70fb5ccf) */
} __attribute__((preserve_access_index));

/*
 * util_est: a struct whose enqueued member is the CPU's value before v6.8,
 * the value itself (an unsigned int) after.
 */
struct util_est___old {
	unsigned int enqueued;
	unsigned int ewma;
} __attribute__((preserve_access_index));

struct sched_avg___ue_old {
	struct util_est___old util_est;
} __attribute__((preserve_access_index));

struct sched_avg___ue_new {
	unsigned int util_est;
} __attribute__((preserve_access_index));

struct cfs_rq___h_load {
	unsigned long h_load;
	u64 last_h_load_update;
} __attribute__((preserve_access_index));

/* The estimator's state: per CPU, and per task by pid (dropped when it dies). */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, ORACLE_MAX_CPUS);
	__type(key, u32);
	__type(value, struct pelt_cpu);
} est_cpus SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, 65536);
	__type(key, s32);
	__type(value, struct pelt_task);
} est_tasks SEC(".maps");

/* p->on_rq of a task being moved between runqueues (kernel/sched/sched.h) */
#define TASK_ON_RQ_MIGRATING	2

/* Wake flags: the v5.11+ values, which the engine uses too. */
#define WF_EXEC		0x02
#define WF_FORK		0x04
#define WF_TTWU		0x08
#define WF_SYNC		0x10
/* v5.10: WF_SYNC was 0x01, and the kind of placement came as sd_flag. */
#define WF_SYNC_510	0x01
#define SD_BALANCE_EXEC_510	0x02
#define SD_BALANCE_FORK_510	0x04
#define SD_BALANCE_WAKE_510	0x08

/* include/linux/preempt.h */
#define SOFTIRQ_OFFSET	0x100
#define HARDIRQ_MASK	0xf0000
#define NMI_MASK	0xf00000

static void *per_cpu_addr(u64 sym, u32 cpu)
{
	u64 off;

	if (!sym || !ksym_per_cpu_offset ||
	    bpf_probe_read_kernel(&off, sizeof(off), (void *)(ksym_per_cpu_offset + cpu * 8ULL)))
		return NULL;
	return (void *)(sym + off);
}

static int preempt_count_now(void)
{
	u32 cpu = bpf_get_smp_processor_id();
	struct pcpu_hot___oracle *hot;
	int *pc, v = 0;

	if ((pc = per_cpu_addr(ksym_preempt_count, cpu))) {
		bpf_probe_read_kernel(&v, sizeof(v), pc);
		return v;
	}
	if ((hot = per_cpu_addr(ksym_pcpu_hot, cpu)))
		return BPF_CORE_READ(hot, preempt_count);
	return 0;
}

static u32 context_now(void)
{
	int pc = preempt_count_now();

	if (pc & (HARDIRQ_MASK | NMI_MASK))
		return ORACLE_CTX_HARDIRQ;
	if (pc & SOFTIRQ_OFFSET)
		return ORACLE_CTX_SOFTIRQ;
	return ORACLE_CTX_TASK;
}

/* -------------------------------------------------------------------------
 * The estimator's attachment to the fair class (bpf/pelt.bpf.h).
 */

/* The runqueue's inputs as the kernel holds them after an event. */
static void est_inputs(struct pelt_cpu *c, struct rq *rq)
{
	c->weight = BPF_CORE_READ(rq, cfs.load.weight) >> PELT_WEIGHT_SHIFT;
	c->running = BPF_CORE_READ(rq, cfs.curr) != NULL;
}

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
 * that the kernel dequeued when it came to be picked, which no hook here
 * sees. It counted as queued up to that dequeue, whose moment its own stamp
 * still holds unless a migration has cleared it; then, up to when it
 * stopped running.
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

/* A dead task's averages leave its CPU's (task_dead_fair()), and its slot goes. */
SEC("fentry/task_dead_fair")
int BPF_PROG(est_dead, struct task_struct *p)
{
	s32 pid = BPF_CORE_READ(p, pid);
	struct pelt_task *t = est_task_leaving(p, 0);
	struct pelt_cpu *old;

	if (!t)
		return 0;
	if ((old = est_cpu_of_task(t)))
		pelt_task_remove(old, t);
	bpf_map_delete_elem(&est_tasks, &pid);
	return 0;
}

/* The estimator's averages of p, if it has seen p queued. */
static void read_task_est(struct task_struct *p, struct oracle_task *o)
{
	s32 pid = BPF_CORE_READ(p, pid);
	struct pelt_task *t = bpf_map_lookup_elem(&est_tasks, &pid);

	if (t) {
		o->est_load_avg = t->avg.load_avg;
		o->est_util_avg = t->avg.util_avg;
	} else {
		o->est_load_avg = ORACLE_NO_ESTIMATE;
		o->est_util_avg = ORACLE_NO_ESTIMATE;
	}
}

static void read_task(struct task_struct *p, struct oracle_task *t)
{
	struct task_struct *last;
	const struct cpumask *mask;

	t->pid = BPF_CORE_READ(p, pid);
	t->flags = BPF_CORE_READ(p, flags);
	t->recent_used_cpu = BPF_CORE_READ(p, recent_used_cpu);
	t->wakee_flips = BPF_CORE_READ(p, wakee_flips);
	t->wakee_flip_decay_ts = BPF_CORE_READ(p, wakee_flip_decay_ts);
	last = BPF_CORE_READ(p, last_wakee);
	t->last_wakee_pid = last ? BPF_CORE_READ(last, pid) : 0;
	t->load_avg = BPF_CORE_READ(p, se.avg.load_avg);
	t->util_avg = BPF_CORE_READ(p, se.avg.util_avg);
	t->nr_cpus_allowed = BPF_CORE_READ(p, nr_cpus_allowed);
	mask = BPF_CORE_READ(p, cpus_ptr);
	t->allowed = mask ? BPF_CORE_READ(mask, bits[0]) : 0;
	read_task_est(p, t);
}

/* cfs's delayed sleepers and SCHED_IDLE tasks, named per version. */
static void read_cfs_counts(struct rq *rq, struct oracle_cpu *c)
{
	struct cfs_rq___counts *q = (void *)&rq->cfs;
	u32 queued = 0;

	if (bpf_core_field_exists(q->h_nr_delayed)) {
		c->nr_delayed = BPF_CORE_READ(q, h_nr_delayed);
	} else if (bpf_core_field_exists(q->h_nr_runnable)) {
		if (bpf_core_field_exists(q->h_nr_queued))
			queued = BPF_CORE_READ(q, h_nr_queued);
		else if (bpf_core_field_exists(q->h_nr_running))
			queued = BPF_CORE_READ(q, h_nr_running);
		c->nr_delayed = queued - BPF_CORE_READ(q, h_nr_runnable);
	}
	if (bpf_core_field_exists(q->h_nr_idle))
		c->nr_sched_idle = BPF_CORE_READ(q, h_nr_idle);
	else if (bpf_core_field_exists(q->idle_h_nr_running))
		c->nr_sched_idle = BPF_CORE_READ(q, idle_h_nr_running);
}

static void read_llc(u32 cpu, struct oracle_cpu *c)
{
	struct sched_domain_shared *sds = NULL;
	struct sched_domain *sd = NULL;
	void *pp;

	c->has_idle_cores = 2;
	c->nr_idle_scan = ORACLE_UNKNOWN;
	pp = per_cpu_addr(ksym_sd_llc_shared, cpu);
	if (pp && !bpf_probe_read_kernel(&sds, sizeof(sds), pp) && sds) {
		struct sched_domain_shared___sis_util *su = (void *)sds;

		c->has_idle_cores = BPF_CORE_READ(sds, has_idle_cores) ? 1 : 0;
		if (bpf_core_field_exists(su->nr_idle_scan))
			c->nr_idle_scan = BPF_CORE_READ(su, nr_idle_scan);
	}
	pp = per_cpu_addr(ksym_sd_llc, cpu);
	if (pp && !bpf_probe_read_kernel(&sd, sizeof(sd), pp) && sd) {
		struct sched_domain___sis_prop *sp = (void *)sd;

		if (bpf_core_field_exists(sp->avg_scan_cost))
			c->avg_scan_cost = BPF_CORE_READ(sp, avg_scan_cost);
	}
}

/* The fields of a CPU that other CPUs' wake-ups and switches change under us. */
static void read_volatile(struct rq *rq, struct oracle_cpu *c)
{
	c->nr_running = BPF_CORE_READ(rq, nr_running);
	c->ttwu_pending = BPF_CORE_READ(rq, ttwu_pending) ? 1 : 0;
	c->curr_is_idle = BPF_CORE_READ(rq, curr) == BPF_CORE_READ(rq, idle);
}

static void read_cpu(u32 cpu, struct oracle_cpu *c)
{
	struct rq *rq = per_cpu_addr(ksym_runqueues, cpu);
	struct pelt_cpu *est;

	__builtin_memset(c, 0, sizeof(*c));
	if (!rq)
		return;
	read_volatile(rq, c);
	c->capacity = BPF_CORE_READ(rq, cpu_capacity);
	c->avg_idle = BPF_CORE_READ(rq, avg_idle);
	c->load_avg = BPF_CORE_READ(rq, cfs.avg.load_avg);
	c->util_avg = BPF_CORE_READ(rq, cfs.avg.util_avg);
	c->runnable_avg = BPF_CORE_READ(rq, cfs.avg.runnable_avg);
	c->idle_stamp = BPF_CORE_READ(rq, idle_stamp);
	{
		struct cfs_rq___h_load *h = (void *)&rq->cfs;

		if (bpf_core_field_exists(h->h_load)) {
			c->h_load = BPF_CORE_READ(h, h_load);
			c->last_h_load_update = BPF_CORE_READ(h, last_h_load_update);
		} else {
			c->h_load = ORACLE_UNKNOWN;
			c->last_h_load_update = ORACLE_UNKNOWN;
		}
	}
	{
		struct sched_avg___ue_old *o = (void *)&rq->cfs.avg;
		struct sched_avg___ue_new *n = (void *)&rq->cfs.avg;

		if (bpf_core_field_exists(o->util_est.enqueued))
			c->util_est = BPF_CORE_READ(o, util_est.enqueued);
		else
			c->util_est = BPF_CORE_READ(n, util_est);
	}
	if (cpu < ORACLE_MAX_CPUS && (est = bpf_map_lookup_elem(&est_cpus, &cpu)) &&
	    est->avg.last_update_time) {
		c->est_load_avg = est->avg.load_avg;
		c->est_util_avg = est->avg.util_avg;
	} else {
		c->est_load_avg = c->load_avg;
		c->est_util_avg = c->util_avg;
	}
	read_cfs_counts(rq, c);
	read_llc(cpu, c);
}

static __always_inline int enter(struct task_struct *p, int prev_cpu, u32 wake_flags)
{
	u32 zero = 0, i, n = nr_cpus;
	struct oracle_record *r = bpf_map_lookup_elem(&scratch, &zero);
	u32 *on = bpf_map_lookup_elem(&armed, &zero);

	if (!r || !on)
		return 0;
	kernel_hz = CONFIG_HZ;
	r->now_ns = bpf_ktime_get_ns();
	if (!ksym_jiffies ||
	    bpf_probe_read_kernel(&r->jiffies, sizeof(r->jiffies), (void *)ksym_jiffies))
		r->jiffies = 0;
	r->prev_cpu = prev_cpu;
	r->this_cpu = bpf_get_smp_processor_id();
	r->chosen_cpu = -1;
	r->wake_flags = wake_flags;
	r->context = context_now();
	read_task(p, &r->wakee);
	read_task((struct task_struct *)bpf_get_current_task(), &r->waker);
	if (n > ORACLE_MAX_CPUS)
		n = ORACLE_MAX_CPUS;
	r->nr_cpus = n;
	r->changed_cpus = 0;
	for (i = 0; i < ORACLE_MAX_CPUS; i++) {
		if (i >= n)
			break;
		read_cpu(i, &r->cpus[i]);
	}
	*on = 1;
	return 0;
}

/*
 * Which CPUs changed while the kernel decided: read each one's volatile
 * fields again and compare with the entry's. A CPU that changed and changed
 * back in between goes unseen, so this counts the race from below.
 */
static u64 changed_since_entry(struct oracle_record *r)
{
	struct oracle_cpu now;
	u64 mask = 0;
	u32 i;

	for (i = 0; i < ORACLE_MAX_CPUS; i++) {
		struct oracle_cpu *was;
		struct rq *rq;

		if (i >= r->nr_cpus)
			break;
		rq = per_cpu_addr(ksym_runqueues, i);
		if (!rq)
			continue;
		was = &r->cpus[i];
		read_volatile(rq, &now);
		if (now.nr_running != was->nr_running || now.ttwu_pending != was->ttwu_pending ||
		    now.curr_is_idle != was->curr_is_idle)
			mask |= 1ULL << i;
	}
	return mask;
}

/*
 * Sends record r (a struct whose last member is cpus[ORACLE_MAX_CPUS]) with
 * only the CPUs it describes: 8 CPUs make a placement record of ~0.6 KiB,
 * not 3.6. Counts it in *sent, or in *lost when the ring is full.
 */
#define SUBMIT(ring, r, sent, lost)						\
	do {									\
		u64 __size = sizeof(*(r)) - sizeof((r)->cpus) +			\
			     (r)->nr_cpus * sizeof((r)->cpus[0]);		\
		if (__size > sizeof(*(r)))					\
			__size = sizeof(*(r));					\
		if (bpf_ringbuf_output(ring, r, __size, 0))			\
			__sync_fetch_and_add(lost, 1);				\
		else								\
			__sync_fetch_and_add(sent, 1);				\
	} while (0)

static __always_inline int leave(int chosen)
{
	u32 zero = 0;
	struct oracle_record *r = bpf_map_lookup_elem(&scratch, &zero);
	u32 *on = bpf_map_lookup_elem(&armed, &zero);

	if (!r || !on)
		return 0;
	if (!*on) {
		__sync_fetch_and_add(&nr_exit_unpaired, 1);
		return 0;
	}
	*on = 0;
	r->chosen_cpu = chosen;
	r->changed_cpus = changed_since_entry(r);
	SUBMIT(&records, r, &nr_records, &nr_ring_full);
	return 0;
}

static u32 flags_510(int sd_flag, int wake_flags)
{
	u32 f = 0;

	if (sd_flag & SD_BALANCE_WAKE_510)
		f |= WF_TTWU;
	if (sd_flag & SD_BALANCE_FORK_510)
		f |= WF_FORK;
	if (sd_flag & SD_BALANCE_EXEC_510)
		f |= WF_EXEC;
	if (wake_flags & WF_SYNC_510)
		f |= WF_SYNC;
	return f;
}

SEC("fentry/select_task_rq_fair")
int BPF_PROG(oracle_enter3, struct task_struct *p, int prev_cpu, int wake_flags)
{
	return enter(p, prev_cpu, wake_flags & (WF_EXEC | WF_FORK | WF_TTWU | WF_SYNC));
}

SEC("fexit/select_task_rq_fair")
int BPF_PROG(oracle_exit3, struct task_struct *p, int prev_cpu, int wake_flags, int ret)
{
	return leave(ret);
}

SEC("fentry/select_task_rq_fair")
int BPF_PROG(oracle_enter4, struct task_struct *p, int prev_cpu, int sd_flag, int wake_flags)
{
	return enter(p, prev_cpu, flags_510(sd_flag, wake_flags));
}

SEC("fexit/select_task_rq_fair")
int BPF_PROG(oracle_exit4, struct task_struct *p, int prev_cpu, int sd_flag, int wake_flags,
	     int ret)
{
	return leave(ret);
}

/* -------------------------------------------------------------------------
 * Newly-idle balances (struct oracle_newidle): entry and exit of the
 * function, the load balancing it runs per domain, the tasks it pulls.
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
