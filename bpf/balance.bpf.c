/* SPDX-License-Identifier: GPL-2.0 */
/*
 * scx_wakelab BPF, part of bpf/main.bpf.c: balancing.
 *
 * The agent places wake-ups; what fair.c does between wake-ups, moving
 * queued tasks to idle CPUs, BPF does itself, because a round trip to the
 * agent would leave the CPU idle meanwhile:
 * - the newly-idle pull (newidle_balance()): a CPU with nothing to run
 *   decides whether and whence to pull by the engine's rule, which
 *   bpf/newidle_rule.h carries in C (the agent hands over its config and
 *   the topology: wl_shared.newidle_rule, cpu_topo), and takes a task
 *   waiting in that CPU's DSQ; seed 2's skip while a wake-up is on its way
 *   here is part of the rule;
 * - the idle balance (--idle-balance, off by default: idle_balance_kick(),
 *   idle_balance()): a busy CPU's tick kicks the nearest idle CPU, which
 *   takes from the busiest DSQ of its LLC, then its node, then any node
 *   (its own rule, not the engine's: the engine has no such balance);
 * - the own-wakee wait (--newidle-wait-own-wakee, off by default): a CPU
 *   leaves its newly-idle pull undone while its own sync wakee waits for the
 *   agent (the mark is set in wakeups.bpf.c when the wake-up is sent, and
 *   cleared in decisions.bpf.c when its decision is carried out).
 * Only tasks queued in a CPU's own DSQ are pulled (the agent's decisions for
 * busy CPUs, and requeues); a task parked for the agent's decision is the
 * agent's. Where the newly-idle pull differs from the engine's
 * (Engine::newidle_pull in src/policy/engine.rs) is listed in that
 * function's documentation.
 *
 * Accepted races: the busiest queue is chosen from hints and unlocked
 * counts, and the task may be gone when the pull tries it (the move fails,
 * nothing is lost); a kicked CPU may find nothing to pull.
 */

/* --idle-balance: idle CPUs are kicked to pull (idle_balance_kick()). */
const volatile bool idle_balance_on;
/* --idle-balance-busy-us: see wakelab_tick(). */
const volatile u64 idle_balance_busy_ns = 2000000ULL;
/* Set by idle_balance_kick() for the idle CPU it kicks, cleared by its dispatch. */
volatile u32 idle_balance_req[WL_MAX_CPUS];
/*
 * wl_shared.own_wakee_until: until when a CPU expects its own wakee back.
 * A sync waker about to sleep woke a task that last ran on the waker's CPU;
 * in the kernel that wakee would be queued there at once (the sync shortcut
 * or prev, the same CPU), but ours waits for the agent, and the CPU goes
 * idle meanwhile. Its newly-idle pull would then take a task waiting
 * elsewhere (in lat_ctx, the next ring member queued behind the agent), and
 * the wakee arrives to a CPU that is busy again: two migrations the kernel
 * never makes. So newidle_balance() leaves the CPU idle until the decision
 * is applied (note_decided_queued() clears the mark) or
 * WL_OWN_WAKEE_WAIT_NS passes: a bound for a decision that does not come,
 * chosen to cover the agent's round trip under QEMU TCG, the slowest
 * setting we run; on real hardware the decision clears the mark long
 * before. Off by default (--newidle-wait-own-wakee): in the runs that
 * decided it, what it saved on one workload it cost on another, also after
 * the agent began describing such CPUs as busy (src/live/placement.rs).
 * Those runs, and the round trip the bound was chosen from, are in
 * docs/benchmarks/bpf-heuristics-notes.md.
 */
const volatile bool newidle_wait_own_wakee;
#define WL_OWN_WAKEE_WAIT_NS	2000000ULL

static void set_own_wakee_until(s32 cpu, u64 until)
{
	volatile u64 *slot;

	if (cpu < 0 || cpu >= WL_MAX_CPUS)
		return;
	slot = MEMBER_VPTR(wl_shared, .own_wakee_until[cpu]);
	if (slot && *slot != until) {
		*slot = until;
		note_cpu_changed(cpu);
	}
}

/*
 * fair.c's sysctl_sched_migration_cost (500 us): a task that ran this
 * recently is cache hot, and load balancing leaves it where it is
 * (task_hot()).
 */
#define WL_MIGRATION_COST_NS	500000ULL

/* How far CPU @other is from @cpu, nearest first, like fair.c's domain levels. */
enum pull_scope {
	PULL_SAME_LLC,		/* @cpu's LLC */
	PULL_SAME_NODE,		/* the other LLCs of @cpu's node */
	PULL_OTHER_NODES,	/* every other node */
};

static enum pull_scope cpu_scope(u32 cpu, u32 other)
{
	if (cpu >= WL_MAX_CPUS || other >= WL_MAX_CPUS)
		return PULL_OTHER_NODES;
	if (wl_shared.cpu_llc[other] == wl_shared.cpu_llc[cpu])
		return PULL_SAME_LLC;
	return wl_shared.cpu_node[other] == wl_shared.cpu_node[cpu] ?
	       PULL_SAME_NODE : PULL_OTHER_NODES;
}

/*
 * The idle balance's source: the CPU other than @cpu with the most tasks
 * waiting in its DSQ, within @scope of @cpu; -1 if none. Like fair.c's
 * busiest-queue search it only considers CPUs that have more to run than
 * one task (nr_running > 1): a task waiting in the DSQ of a CPU that runs
 * nothing else, or only the agent (which yields as soon as it has placed
 * its batch), gets that CPU in a moment; pulling it would only migrate it.
 */
static s32 busiest_queue(s32 cpu, enum pull_scope scope)
{
	u32 best = 0;
	s32 i, src = -1;

	if (cpu < 0 || cpu >= WL_MAX_CPUS || !READ_ONCE(cpu_queued_hint_sum))
		return -1;
	bpf_for(i, 0, nr_cpu_ids) {
		struct cpu_state *cs;
		u32 n;

		if (i == cpu || i >= WL_MAX_CPUS || cpu_scope(cpu, i) != scope)
			continue;
		n = cpu_dsq_nr_queued(i);
		cs = cpu_state_of(i);
		if (!n || !cs || nr_runnable_with(i, cs->curr_pid, n) < 2)
			continue;
		if (n > best) {
			best = n;
			src = i;
		}
	}
	return src;
}

/*
 * Move to @cpu the first task of @src's DSQ that may run on @cpu and is not
 * cache hot (fair.c's can_migrate_task() without its give-up-after-failures
 * escape; within an SMT core, @hot_ok, no task is hot). Returns true if a
 * task was moved. @newidle says which counter a cache-hot task counts in.
 */
static bool pull_from(s32 cpu, s32 src, u64 now, bool newidle, bool hot_ok)
{
	struct task_struct *p;

	bpf_for_each(scx_dsq, p, src, 0) {
		struct task_ctx *tctx = lookup_task_ctx(p);

		if (!bpf_cpumask_test_cpu(cpu, p->cpus_ptr))
			continue;
		if (!hot_ok && tctx && tctx->last_stop_ns &&
		    time_delta(now, tctx->last_stop_ns) < WL_MIGRATION_COST_NS) {
			if (newidle)
				__sync_fetch_and_add(&nr_newidle_cache_hot, 1);
			else
				__sync_fetch_and_add(&nr_idle_balance_cache_hot, 1);
			continue;
		}
		if (scx_bpf_dsq_move(BPF_FOR_EACH_ITER, p, SCX_DSQ_LOCAL, 0)) {
			hint_leave(tctx);
			runnable_add(src, -1);
			runnable_add(cpu, 1);
			return true;
		}
	}
	return false;
}

/*
 * A wake-up is on its way to @cpu: rq->ttwu_pending (a remote wake-up queued
 * on its wakelist) or a decision of the agent for it not applied yet.
 */
static bool wakeup_coming(s32 cpu)
{
	struct rq *rq = bpf_per_cpu_ptr(&runqueues, cpu);
	u32 *pending = MEMBER_VPTR(wl_shared, .inflight[cpu]);

	return (rq && rq->ttwu_pending) || (pending && READ_ONCE(*pending));
}

#define NI_FOR(i, lo, hi)	bpf_for(i, lo, hi)
#define NI_NR_CPUS		(nr_cpu_ids < WL_MAX_CPUS ? nr_cpu_ids : WL_MAX_CPUS)
#define NI_CONFIG		(&wl_shared.newidle_rule)
#define NI_SUBPROG		__noinline
#include "newidle_rule.h"

/*
 * bpf/newidle_rule.h's inputs: each CPU as the agent's snapshot describes it
 * (src/live/placement.rs), read live, so one decision may see a CPU change
 * between two reads, as fair.c's unlocked reads of remote runqueues may. A
 * decision of the agent's not yet carried out counts as a task on its CPU,
 * except on the CPU balancing: it is going idle, and such a decision is the
 * wake-up seed 2's skip waits for.
 */
static __always_inline bool ni_read(s32 cpu, struct ni_cpu *out)
{
	struct cpu_state *cs;
	struct wl_cpu_topo *t;
	struct rq *rq;
	u32 *inflight, flying, n;

	if (!cpu_valid(cpu))
		return false;
	cs = cpu_state_of(cpu);
	t = MEMBER_VPTR(wl_shared, .cpu_topo[cpu]);
	inflight = MEMBER_VPTR(wl_shared, .inflight[cpu]);
	rq = bpf_per_cpu_ptr(&runqueues, cpu);
	if (!cs || !t || !inflight || !rq)
		return false;
	flying = READ_ONCE(*inflight);
	n = cpu == bpf_get_smp_processor_id() ? 0 : nr_runnable_on(cpu, cs->curr_pid) + flying;
	out->load = cs->est_load_avg + (u64)flying * 1024;
	out->util = cs->est_util_avg;
	out->capacity = t->capacity;
	out->avg_idle_ns = cs->avg_idle_ns;
	out->online = t->online;
	out->nr_running = n;
	out->runnable = n;	/* BPF queues no delayed sleeper */
	out->ttwu_pending = rq->ttwu_pending;
	out->in_flight = flying > 0;
	out->levels = t->levels;
	out->first[0] = t->first[0];
	out->first[1] = t->first[1];
	out->first[2] = t->first[2];
	out->imb_numa_nr = t->imb_numa_nr;
	return true;
}

/*
 * @cpu has nothing to run: fair.c's newly-idle balance, by the engine's rule
 * (bpf/newidle_rule.h). Where the CPU it names has no task this CPU may take
 * (all cache hot, pinned elsewhere, or already in its local queue), the
 * balance goes on from the next domain, as load_balance() failing does.
 * Returns true if a task was pulled.
 */
static bool newidle_balance(s32 cpu, u64 now)
{
	struct ni_result res = { .src = -1 };
	u32 from = 0;
	u64 *own;
	s32 k;

	if (!READ_ONCE(wl_shared.newidle_pull))
		return false;
	own = newidle_wait_own_wakee ? MEMBER_VPTR(wl_shared, .own_wakee_until[cpu]) : NULL;
	if (own && *own && time_before(now, *own)) {
		__sync_fetch_and_add(&nr_newidle_wait_own_wakee, 1);
		return false;
	}
	bpf_for(k, 0, WL_DOM_NR) {
		ni_decide(cpu, from, &res);
		if (res.verdict != NI_PULL)
			break;
		if (pull_from(cpu, res.src, now, true, res.level == WL_DOM_SMT)) {
			__sync_fetch_and_add(&nr_newidle_pulls, 1);
			if (res.pending) {
				__sync_fetch_and_add(&nr_newidle_search_despite_pending, 1);
				__sync_fetch_and_add(&nr_newidle_pull_despite_pending, 1);
			}
			return true;
		}
		from = res.level + 1;
		res.verdict = NI_NOTHING;
	}
	switch (res.verdict) {
	case NI_SKIP_PENDING:
	case NI_SKIP_IN_FLIGHT:
		__sync_fetch_and_add(&nr_newidle_skipped_pending, 1);
		break;
	case NI_NOT_OVERLOADED:
		__sync_fetch_and_add(&nr_newidle_skipped_not_overloaded, 1);
		break;
	case NI_IDLE_TOO_SHORT:
		__sync_fetch_and_add(&nr_newidle_skipped_short_idle, 1);
		break;
	default:
		/* What seed 2 removes: a search while a wake-up is on its way. */
		if (res.pending)
			__sync_fetch_and_add(&nr_newidle_search_despite_pending, 1);
		__sync_fetch_and_add(&nr_newidle_nothing, 1);
	}
	return false;
}

/*
 * A CPU that stays idle never reaches ops.dispatch(), so newidle_balance()
 * alone leaves a task waiting behind a busy CPU's current task for up to a
 * slice while other CPUs idle, and again after every wake-up that queues it
 * there. fair.c's answer is the nohz idle balance: a busy CPU whose tick
 * sees more than one task on its rq (nohz_balancer_kick(), nr_running >= 2)
 * kicks an idle CPU to balance on behalf of the idle ones. Ours, in small:
 * from ops.tick(), kick the nearest idle CPU that expects no wake-up; its
 * ops.dispatch() then runs idle_balance(). One CPU per tick, and the tick is
 * the rate limit (fair.c's nohz.next_balance keeps it to about one balance
 * per jiffy too).
 *
 * Off by default (--idle-balance): it slowed a context-switch benchmark far
 * more than its few pulls explain, for reasons not yet understood; what it
 * buys is fair.c's back-and-forth in the seed-1 scenario. The runs are in
 * docs/benchmarks/bpf-heuristics-notes.md.
 */
static void idle_balance_kick(u32 busy)
{
	u32 best_dist = PULL_OTHER_NODES + 1;
	s32 i, target = -1;
	volatile u32 *req;

	if (busy >= WL_MAX_CPUS)
		return;
	bpf_for(i, 0, nr_cpu_ids) {
		struct cpu_state *cs;
		u32 dist;

		if (i == busy || i >= WL_MAX_CPUS)
			continue;
		cs = cpu_state_of(i);
		if (!cs || !cs->idle || wakeup_coming(i))
			continue;
		dist = cpu_scope(busy, i);
		if (dist < best_dist) {
			best_dist = dist;
			target = i;
		}
	}
	if (target < 0 || target >= WL_MAX_CPUS)
		return;
	req = MEMBER_VPTR(idle_balance_req, [target]);
	if (!req)
		return;
	*req = 1;
	__sync_fetch_and_add(&nr_idle_balance_kicks, 1);
	scx_bpf_kick_cpu(target, SCX_KICK_IDLE);
}

/*
 * More tasks on @node's CPUs than it has CPUs: fair.c's group_overloaded.
 * Only then does the NUMA level of load balance move a task between nodes
 * at once; below, adjust_numa_imbalance() lets a few tasks run on the
 * "wrong" node rather than split a communicating pair.
 */
static bool node_is_overloaded(u32 node)
{
	u32 nr = 0, cpus = 0;
	s32 i;

	bpf_for(i, 0, nr_cpu_ids) {
		struct cpu_state *cs;

		if (i >= WL_MAX_CPUS)
			break;
		cs = cpu_state_of(i);
		if (!cs || wl_shared.cpu_node[i] != node)
			continue;
		cpus++;
		nr += nr_runnable_on(i, cs->curr_pid);
	}
	return nr > cpus;
}

/*
 * @cpu was kicked by idle_balance_kick(): pull from the busiest queue of
 * its LLC, then its node, then of another node if that node is overloaded
 * (fair.c's load balance climbs to the NUMA domain too). Nothing if a
 * wake-up is on its way here by now: that task is this CPU's work.
 */
static bool idle_balance(s32 cpu, u64 now)
{
	s32 src;

	if (wakeup_coming(cpu))
		return false;
	src = busiest_queue(cpu, PULL_SAME_LLC);
	if (src < 0)
		src = busiest_queue(cpu, PULL_SAME_NODE);
	if (src < 0) {
		src = busiest_queue(cpu, PULL_OTHER_NODES);
		if (src >= 0 && !node_is_overloaded(wl_shared.cpu_node[src & (WL_MAX_CPUS - 1)]))
			src = -1;
	}
	if (src >= 0 && pull_from(cpu, src, now, false, false)) {
		__sync_fetch_and_add(&nr_idle_balance_pulls, 1);
		return true;
	}
	__sync_fetch_and_add(&nr_idle_balance_nothing, 1);
	return false;
}

