/* SPDX-License-Identifier: GPL-2.0 */
/*
 * scx_wakelab oracle: the contract between bpf/oracle.bpf.c, which records
 * the fair class's own wake-up placements, and src/oracle/, which turns each
 * record into a decision trace line (explain --trace) and replays it through
 * the engine. Both sides see this file: the BPF program includes it, Rust
 * gets it through bindgen (only src/oracle/record.rs touches the structs).
 *
 * One record per select_task_rq_fair() call (unless the ring is full:
 * nr_ring_full counts those): what the function was asked, the state it
 * read, captured on entry, and the CPU it returned, captured on exit, with
 * which CPUs' state changed in between. Owner of every field: BPF, which
 * fills a record in on entry and exit and then submits it; Rust only reads
 * records from the ring.
 */
#ifndef __WAKELAB_ORACLE_H
#define __WAKELAB_ORACLE_H

#ifndef __VMLINUX_H__
typedef unsigned char u8;
typedef unsigned int u32;
typedef int s32;
typedef unsigned long long u64;
#endif

enum oracle_consts {
	/* CPUs described per record; a larger machine is refused at load. */
	ORACLE_MAX_CPUS		= 64,
	/* Ring size in bytes (a power of two, a multiple of the page size). */
	ORACLE_RING_BYTES	= 64 << 20,
	/* The newly-idle balances' ring: far fewer than placements. */
	ORACLE_NEWIDLE_RING_BYTES = 16 << 20,
	/* A balancing CPU's domains described (SMT, MC, PKG, NUMA ...). */
	ORACLE_MAX_DOMAINS	= 6,
	/* Tasks of a runqueue looked at for cache hotness (sysctl_sched_nr_migrate). */
	ORACLE_COLD_SCAN	= 32,
	/* sysctl_sched_migration_cost's default: task_hot()'s threshold, ns. */
	ORACLE_MIGRATION_COST_NS = 500000,
};

/* A u32 field the running kernel does not have. */
#define ORACLE_UNKNOWN	0xffffffffU
/* An estimate the estimator does not have (a task it has not seen queued). */
#define ORACLE_NO_ESTIMATE	0xffffffffffffffffULL

/* The waker's context, as the engine's WakerContext. */
enum oracle_context {
	ORACLE_CTX_TASK		= 0,
	ORACLE_CTX_SOFTIRQ	= 1,
	ORACLE_CTX_HARDIRQ	= 2,
};

/* What select_task_rq_fair() could read of one CPU. */
struct oracle_cpu {
	u64 load_avg;		/* rq->cfs.avg.load_avg (cpu_load()) */
	u64 util_avg;		/* rq->cfs.avg.util_avg */
	u64 avg_idle;		/* rq->avg_idle, ns */
	u64 avg_scan_cost;	/* its sd_llc->avg_scan_cost (to v6.6), else 0 */
	u32 nr_running;		/* rq->nr_running, every class */
	u32 nr_delayed;		/* delayed-dequeue sleepers in it (v6.12+), else 0 */
	u32 nr_sched_idle;	/* SCHED_IDLE tasks among cfs's (sched_idle_cpu()) */
	u32 capacity;		/* rq->cpu_capacity */
	u64 util_est;		/* rq->cfs.avg.util_est(.enqueued before v6.8) */
	u64 runnable_avg;	/* rq->cfs.avg.runnable_avg */
	u64 idle_stamp;		/* rq->idle_stamp: when it last went idle, 0 = unset */
	/*
	 * rq->cfs.h_load and the jiffy it was computed at (last_h_load_update):
	 * task_h_load() scales a task's load by it. ORACLE_UNKNOWN in both
	 * without CONFIG_FAIR_GROUP_SCHED.
	 */
	u64 h_load;
	u64 last_h_load_update;
	u8 curr_is_idle;	/* rq->curr == rq->idle */
	u8 ttwu_pending;	/* rq->ttwu_pending */
	u8 has_idle_cores;	/* its sd_llc_shared->has_idle_cores; 2 = unknown */
	u8 pad;
	u32 nr_idle_scan;	/* its sd_llc_shared->nr_idle_scan (SIS_UTIL, v6.0+);
				 * ORACLE_UNKNOWN where the kernel has none */
	/* The estimator's (bpf/pelt.bpf.h) load_avg and util_avg of it. */
	u64 est_load_avg;
	u64 est_util_avg;
};

struct oracle_task {
	u64 load_avg;		/* p->se.avg.load_avg (task_h_load() without groups) */
	u64 util_avg;		/* p->se.avg.util_avg */
	u64 wakee_flip_decay_ts; /* jiffies */
	u64 allowed;		/* p->cpus_ptr, first 64 CPUs */
	s32 pid;
	s32 recent_used_cpu;	/* -1 where the kernel has none */
	u32 wakee_flips;
	s32 last_wakee_pid;	/* 0 = none */
	u32 nr_cpus_allowed;
	u32 flags;		/* p->flags (PF_KTHREAD, PF_EXITING) */
	u32 pad;
	/*
	 * The estimator's (bpf/pelt.bpf.h) load_avg and util_avg of it;
	 * ORACLE_NO_ESTIMATE for a task it has not seen queued (the live
	 * estimator would start from the kernel's averages, in load_avg and
	 * util_avg above).
	 */
	u64 est_load_avg;
	u64 est_util_avg;
};

struct oracle_record {
	u64 now_ns;		/* bpf_ktime_get_ns() on entry */
	u64 jiffies;		/* on entry */
	struct oracle_task wakee;
	struct oracle_task waker;	/* current on the waker's CPU */
	s32 prev_cpu;		/* the argument */
	s32 this_cpu;		/* smp_processor_id() */
	s32 chosen_cpu;		/* the return value */
	u32 wake_flags;		/* WF_EXEC/FORK/TTWU/SYNC as v5.11+ number them */
	u32 context;		/* enum oracle_context */
	u32 nr_cpus;		/* entries of cpus[] filled */
	/*
	 * The race: bit i is set when CPU i's nr_running, curr_is_idle or
	 * ttwu_pending read on exit differs from cpus[i] read on entry, so the
	 * kernel may have decided on state other than the record's.
	 */
	u64 changed_cpus;
	struct oracle_cpu cpus[ORACLE_MAX_CPUS];
};

/*
 * One newly-idle balance: newidle_balance() to v6.9, sched_balance_newidle()
 * from v6.10 (the loader keeps the name the kernel's BTF has). A second
 * ring, `newidle`, carries these; owner of every field BPF, as above.
 * Entry: the balancing CPU's gates and every CPU's state; exit: what the
 * function returned and which tasks moved to the CPU meanwhile (the
 * sched_migrate_task tracepoint, which detach_task() fires on the balancing
 * CPU) and in which of its domains load balancing ran.
 */
struct oracle_newidle {
	u64 now_ns;		/* bpf_ktime_get_ns() on entry */
	u64 avg_idle;		/* this rq's avg_idle, ns, on entry */
	/*
	 * max_newidle_lb_cost of this CPU's domains, innermost first (rq->sd,
	 * then each ->parent): the cost cut-offs against avg_idle. 0 past the
	 * last domain.
	 */
	u64 max_newidle_lb_cost[ORACLE_MAX_DOMAINS];
	u32 cpu;		/* the balancing CPU */
	s32 ret;		/* > 0: a fair task to run; 0: none; < 0: another class's */
	u8 ttwu_pending;	/* this rq's, on entry: seed 2's test (v5.14+) */
	u8 overloaded;		/* rd->overload(ed) on entry; 2 = unknown */
	u8 nr_domains;		/* entries of max_newidle_lb_cost[] filled */
	/*
	 * Bit i: load balancing ran in domain i (innermost = 0) during the
	 * call. The kernel stops at the first domain whose cost would exceed
	 * avg_idle, or (v6.1.y, v6.12.y, v7.x: NI_RANDOM) skips a domain at
	 * random; this says which it did.
	 */
	u8 balanced_domains;
	/*
	 * Bit i: domain i has failed periodic balancing more often than its
	 * cache_nice_tries (sd->nr_balance_failed > sd->cache_nice_tries), so
	 * can_migrate_task() moves a cache-hot task there too.
	 */
	u8 hot_escape_domains;
	u8 pad[3];
	u32 nr_pulled;		/* tasks moved to this CPU during the call */
	s32 pulled_pid;		/* the first of them; 0 = none */
	s32 pulled_from;	/* its CPU; -1 = none */
	u32 nr_cpus;		/* entries of cpus[] filled */
	/*
	 * Per CPU, its fair tasks other than the running one that task_hot()
	 * would let go: last run (se.exec_start) at least
	 * ORACLE_MIGRATION_COST_NS before the rq's clock_task. At most
	 * ORACLE_COLD_SCAN tasks of rq->cfs_tasks are looked at.
	 */
	u8 nr_cold[ORACLE_MAX_CPUS];
	struct oracle_cpu cpus[ORACLE_MAX_CPUS];
};

#endif /* __WAKELAB_ORACLE_H */
