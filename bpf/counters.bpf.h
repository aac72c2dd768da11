/* SPDX-License-Identifier: GPL-2.0 */
/*
 * scx_wakelab BPF, part of bpf/main.bpf.c: the counters and histograms.
 *
 * Every event counter of the BPF component, the enqueue-to-run histogram and
 * the per-hop histograms (enum wl_hop in bpf/intf.h), with the two helpers
 * that fill the histograms. Nothing here decides anything: the other parts
 * count what they do, and the agent reads the counts for `scx_wakelab
 * stats`.
 *
 * Owner: BPF, which writes them only with atomic adds (several CPUs may
 * count at once). The agent reads them racily, by name, through the
 * skeleton's memory-mapped .bss (read_counters() in src/live/protocol.rs);
 * src/live/stats.rs lists and describes each one, and a test there finds
 * them by parsing this file for lines that start with "volatile u64 ". A
 * counter that changes name or type changes the skeleton: the Rust side
 * must follow.
 *
 * A new counter goes at the end: that leaves the .bss offsets of the
 * others, and so the bytecode that uses them, as they were.
 */
#ifndef __WAKELAB_COUNTERS_BPF_H
#define __WAKELAB_COUNTERS_BPF_H

/* Decisions of the agent that were carried out (wake-ups sent: wl_shared.nr_ring_wakeups). */
volatile u64 nr_agent_dispatches;
/* Sleep events sent (report_sleeps), and those the full ring dropped. */
volatile u64 nr_sleep_msgs, nr_sleep_msgs_dropped;
/*
 * Dispatched without the agent: the agent itself, tasks that must never wait
 * for it (must_bypass_agent(), the agent's other threads, SCX_ENQ_LAST), and
 * tasks without task storage (to the fallback queue).
 */
volatile u64 nr_direct_dispatches;
/* The wakeup ring was full (or held ring_limit messages): the task went to the fallback queue. */
volatile u64 nr_ring_full_fallbacks;
/*
 * The agent had not run for agent_stall_ns, or the oldest message waiting
 * for it was older than that: the task bypassed it.
 */
volatile u64 nr_agent_stall_fallbacks;
/*
 * Tasks already queued to the agent when it stalled, sent to the fallback
 * queue without its decision (rescue_from_stalled_agent()).
 */
volatile u64 nr_stall_rescues;
/*
 * Of those, tasks rescued while the agent kept up: their decision was lost
 * on its way (a race between BPF and the agent). Should stay 0.
 */
volatile u64 nr_lost_decisions;
/* A decision for an older enqueue of the task (it was requeued meanwhile). */
volatile u64 nr_stale_decisions;
/* Fallback tasks taken before the CPU's own queue after waiting too long. */
volatile u64 nr_fallback_starving;
/* The chosen CPU was invalid, outside p->cpus_ptr, or barred by migration-disabled: placed elsewhere. */
volatile u64 nr_bounced_decisions;
/* The task of a decision no longer exists. */
volatile u64 nr_decisions_task_gone;
/* The agent asked for "any CPU". */
volatile u64 nr_any_cpu_decisions;
/* Wake-ups sent without ops.select_cpu()'s context (e.g. a task allowed on one CPU: the kernel skips it). */
volatile u64 nr_enqueue_without_select;
/* Wake-up contexts seen in ops.select_cpu(). */
volatile u64 nr_select_task_ctx, nr_select_softirq_ctx, nr_select_hardirq_ctx;
/*
 * Newly-idle pulls (the sched_ext form of fair.c's newidle balance): a CPU
 * with nothing to run took a task queued for another CPU; skipped because a
 * wake-up was pending for it (seed 2); pulled although one was pending (flag
 * off); found nothing to pull; a cache-hot task left where it waits;
 * searched although a wake-up was pending (flag off), pull or not; not
 * searched because no CPU had a task waiting (the root domain not
 * overloaded) or the CPU's idle periods are too short (avg_idle).
 */
volatile u64 nr_newidle_pulls, nr_newidle_skipped_pending,
	     nr_newidle_pull_despite_pending, nr_newidle_nothing,
	     nr_newidle_cache_hot, nr_newidle_search_despite_pending,
	     nr_newidle_skipped_not_overloaded, nr_newidle_skipped_short_idle;
/*
 * Idle balance (idle_balance_kick()): idle CPUs kicked by a busy CPU's tick;
 * kicked CPUs that pulled a task, found nothing to pull, left a cache-hot
 * task where it waits.
 */
volatile u64 nr_idle_balance_kicks, nr_idle_balance_pulls,
	     nr_idle_balance_nothing, nr_idle_balance_cache_hot;
/* Newly-idle pulls left undone: the CPU's own sync wakee awaits the agent. */
volatile u64 nr_newidle_wait_own_wakee;
/*
 * An idle CPU woken for a wake-up that then waited for the agent did not
 * balance: that is no CPU going idle (wakelab_dispatch()).
 */
volatile u64 nr_newidle_skipped_parked;
/* Times the heartbeat had to wake the agent. */
volatile u64 nr_heartbeat_kicks;
/*
 * The agent's home CPU ran a task of ours when the agent had work: that
 * task was preempted so that the agent could run (wake_agent(), tick).
 */
volatile u64 nr_agent_preempt_kicks;
/*
 * Enqueues that are neither wake-ups nor new tasks (slice expired,
 * preempted, property change): kept on the task's CPU without asking the
 * agent, as fair.c keeps a task on its runqueue; select_task_rq() is not
 * involved.
 */
volatile u64 nr_requeues_in_place;
/*
 * Decisions carried out (by apply_parked() from the parking queue, or by
 * ops.enqueue() for a handoff): straight onto an idle CPU's local queue, or
 * into a busy CPU's queue (where a newly-idle CPU may pull it from);
 * apply_decisions runs, and apply_parked() passes that left decisions
 * undone (their task not parked yet).
 */
volatile u64 nr_applied_to_idle, nr_applied_to_queue, nr_apply_runs, nr_apply_misses;
/*
 * The handoff (wl_shared.handoff): wake-ups sent from ops.select_cpu(),
 * decisions ops.enqueue() carried out itself, and wake-ups sent from
 * ops.enqueue() because their slot still held an uncollected decision.
 */
volatile u64 nr_handoff_msgs, nr_handoffs, nr_handoff_slot_busy;
/*
 * Decided tasks moved without the agent, by the heartbeat or a stall
 * rescue: their decision was recorded before they were parked, or the
 * agent stopped before carrying it out.
 */
volatile u64 nr_applied_late;
/*
 * Times a CPU going idle found the agent parked with work and kicked
 * itself to run it (a wake-up that raced with the agent parking).
 */
volatile u64 nr_idle_agent_kicks;
/*
 * The heartbeat found an idle CPU with tasks in its own queue, or tasks in
 * the fallback queue and an idle CPU, and kicked it: a wake-up lost to a
 * race this program did not foresee. Should stay 0; the heartbeat, not the
 * kernel's watchdog, is what catches it if not.
 */
volatile u64 nr_stranded_kicks;

/*
 * log2 histogram of the time from a wake-up's message to the agent (sent by
 * ops.select_cpu() with the handoff, else by ops.enqueue()) until the task
 * starts running.
 */
volatile u64 enqueue_to_run_hist[WL_LAT_BUCKETS];

/* The hops BPF times (enum wl_hop; the agent's rows stay zero here). */
volatile u64 hop_hist[WL_NR_HOPS][WL_LAT_BUCKETS];

/*
 * The agent's own scheduling, reported apart from the workload's: times it
 * started running, and the part of those on another CPU than its last (each
 * a task migration that CFS, having no agent, would never make).
 */
volatile u64 nr_agent_runs, nr_agent_migrations;

/*
 * floor(log2(v)) by halving (0 for 0 and 1), capped at the last bucket:
 * six steps instead of a loop, on every hop of every wake-up.
 */
static u32 log2_bucket(u64 v)
{
	u32 b = 0;

	if (v >> 32) { v >>= 32; b += 32; }
	if (v >> 16) { v >>= 16; b += 16; }
	if (v >> 8) { v >>= 8; b += 8; }
	if (v >> 4) { v >>= 4; b += 4; }
	if (v >> 2) { v >>= 2; b += 2; }
	if (v >> 1) b += 1;
	return b < WL_LAT_BUCKETS ? b : WL_LAT_BUCKETS - 1;
}

/* Count @from -> now (CLOCK_MONOTONIC) in hop @hop's histogram; 0 = no stamp. */
static void hop_record(u32 hop, u64 from, u64 now)
{
	u32 b;

	if (!from || hop >= WL_NR_HOPS)
		return;
	b = log2_bucket(time_delta(now, from));
	if (b < WL_LAT_BUCKETS)
		__sync_fetch_and_add(&hop_hist[hop][b], 1);
}

#endif /* __WAKELAB_COUNTERS_BPF_H */
