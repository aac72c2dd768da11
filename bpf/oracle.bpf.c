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
 * fed here by the fair class's own events (oracle_estimator.bpf.c).
 *
 * With `oracle record --newidle`, the newly-idle balance too (struct
 * oracle_newidle, its own ring; programs loaded only then): its entry and
 * exit, the load balancing it runs per domain, the tasks it pulls.
 *
 * This file owns the wake-up record and the helpers both halves share; it
 * includes the estimator's attachment (oracle_estimator.bpf.c) and the
 * newly-idle recording (oracle_newidle.bpf.c), which are not built alone.
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

#include "oracle_estimator.bpf.c"

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

#include "oracle_newidle.bpf.c"
