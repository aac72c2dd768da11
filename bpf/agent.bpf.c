/* SPDX-License-Identifier: GPL-2.0 */
/*
 * scx_wakelab BPF, part of bpf/main.bpf.c: the agent as a task.
 *
 * The agent's scheduling thread is a task of ours too, and every wake-up
 * waits for it, so when and where it runs is part of every wake-up's
 * latency. This part owns:
 * - who the agent is (is_agent()), and who must never wait for it: its own
 *   other threads (is_agent_helper_thread()), per-CPU kthreads, reclaim
 *   threads, workqueue workers (must_bypass_agent());
 * - whether it has work (agent_has_work()): wake-ups it has not read,
 *   decisions it holds, a heartbeat, a ring half full; it waits in
 *   WL_AGENT_DSQ otherwise (agent_parked, agent_needed);
 * - where it runs (agent_may_run_on(): its home CPU when pinned, the
 *   default) and how it is woken (wake_agent(), kick_agent_cpu());
 *   note_queued_on() asks it to yield when a task is queued on its CPU, and
 *   wakes any other idle CPU a task is queued on;
 * - whether it keeps up (agent_quiet(), agent_stalled(), agent_lag_ns(),
 *   from the ring's progress that count_ring_msg() keeps), which decides
 *   when wake-ups bypass it (wakeups.bpf.c).
 *
 * Accepted races: the idle test in wake_agent() and note_queued_on() pairs
 * with wakelab_update_idle() (either side sees the other); the lag is
 * approximate under races (see ring_msg_ns), which a threshold of
 * agent_stall_ns tolerates.
 */

static volatile u32 agent_needed;
/*
 * The agent waits in WL_AGENT_DSQ: set by ops.enqueue() before the insert
 * can be seen, cleared when it runs. Stands in for a DSQ lookup.
 */
static u32 agent_parked;

static bool is_agent(const struct task_struct *p)
{
	return agent_pid && p->pid == agent_pid;
}

static bool is_agent_helper_thread(const struct task_struct *p)
{
	return agent_tgid && p->tgid == agent_tgid && p->pid != agent_pid;
}

/*
 * Per-CPU kthreads (ksoftirqd/N, kworker/N, migration/N) and the reclaim
 * threads must never wait for user space: the agent may itself be waiting on
 * them (a page fault, an RCU callback). Nor must workqueue workers, bound or
 * not: sched_ext's own watchdog is a work item on an unbound worker, and
 * behind a storm's queue it failed to check in in time, which ejected us
 * with every task still running fine (the run is in
 * docs/benchmarks/bpf-heuristics-notes.md).
 */
static bool must_bypass_agent(const struct task_struct *p)
{
	if ((p->flags & PF_KTHREAD) && p->nr_cpus_allowed == 1)
		return true;
	return p->flags & (PF_KSWAPD | PF_KCOMPACTD | PF_WQ_WORKER);
}

/*
 * The agent has neither run nor consumed anything for agent_stall_ns. A
 * healthy agent runs at least every heartbeat, work or not; a busy one may
 * run for seconds without a new ops.running() (its slice is refilled while
 * it has work), so consuming counts as progress too.
 */
static u64 seen_consumed, last_progress_ns;

static bool agent_quiet(u64 now)
{
	u64 consumed = READ_ONCE(wl_shared.agent_consumed);
	u64 last = READ_ONCE(wl_shared.agent_last_run_ns);

	if (consumed != seen_consumed) {
		seen_consumed = consumed;
		last_progress_ns = now;
		return false;
	}
	if (time_after(last_progress_ns, last))
		last = last_progress_ns;
	return last && time_delta(now, last) > agent_stall_ns;
}

/*
 * Stalled: quiet while messages wait for it. agent_quiet() runs first either
 * way, so that its progress bookkeeping sees every change of agent_consumed.
 */
static bool agent_stalled(u64 now)
{
	bool quiet = agent_quiet(now);

	return READ_ONCE(wl_shared.nr_ring_msgs) != READ_ONCE(wl_shared.agent_consumed) && quiet;
}

/*
 * When each message in the ring was queued, by its sequence number (the
 * nr_ring_msgs it was counted as): the entry at agent_consumed is the oldest
 * message the agent has not read, so it says how far behind the agent is.
 * Approximate under races (a CPU may count its message a little before or
 * after another's), which is all a threshold of agent_stall_ns needs.
 */
static u64 ring_msg_ns[WL_RING_ENTRIES];

static void count_ring_msg(u64 now)
{
	u64 seq = __sync_fetch_and_add(&wl_shared.nr_ring_msgs, 1);
	u64 *ts = MEMBER_VPTR(ring_msg_ns, [seq % WL_RING_ENTRIES]);

	if (ts)
		*ts = now;
}

/* How long the oldest message not yet read by the agent has waited. */
static u64 agent_lag_ns(u64 now)
{
	u64 consumed = READ_ONCE(wl_shared.agent_consumed);
	u64 *ts;

	if (READ_ONCE(wl_shared.nr_ring_msgs) == consumed)
		return 0;
	ts = MEMBER_VPTR(ring_msg_ns, [consumed % WL_RING_ENTRIES]);
	if (!ts || !*ts)
		return 0;
	return time_delta(now, *ts);
}

/*
 * Work for the agent: tasks waiting for a placement, decisions it could not
 * submit yet, a heartbeat. Sleep reports alone are not worth a context
 * switch: they wait in the ring for the next wake-up (which the agent reads
 * after them, in order) or the heartbeat, unless they fill half the ring.
 */
static bool agent_has_work(void)
{
	if (agent_needed || READ_ONCE(wl_shared.agent_holding))
		return true;
	if (READ_ONCE(wl_shared.nr_ring_wakeups) != READ_ONCE(wl_shared.agent_consumed_wakeups))
		return true;
	return bpf_ringbuf_query(&wakeups, BPF_RB_AVAIL_DATA) >
	       WL_RING_ENTRIES * sizeof(struct wakeup_msg) / 2;
}

/* How long a kicked idle CPU has to pick the agent up before any CPU may. */
#define WL_AGENT_KICK_GRACE_NS	(200 * 1000ULL)

static u64 agent_kick_ns;

/* The agent's home CPU when it is pinned (the default), else -1. */
static s32 agent_home(void)
{
	return READ_ONCE(wl_shared.agent_home_cpu);
}

/* Where the agent runs next: its home CPU, or the CPU it last ran on. */
static s32 agent_target_cpu(void)
{
	s32 home = agent_home();

	return home >= 0 ? home : READ_ONCE(wl_shared.agent_cpu);
}

static void kick_agent_cpu(u64 flags)
{
	s32 cpu = agent_target_cpu();

	if (cpu_valid(cpu))
		scx_bpf_kick_cpu(cpu, flags);
}

/*
 * Get the agent onto its CPU soon. While it runs there is nothing to do: a
 * spinning agent sees the new message in the ring, and one about to park
 * finds the work in ops.dispatch() and runs on. An idle CPU is kicked. A
 * pinned agent's CPU that runs a task of ours is preempted, unless that
 * task is @sync_waker_cpu's sync waker, about to sleep and leave the CPU to
 * the agent (wakelab_tick() preempts it if it does not). An unpinned agent
 * runs at the next ops.dispatch() of any CPU, at worst at the heartbeat.
 */
static void wake_agent(s32 sync_waker_cpu)
{
	s32 cpu = agent_target_cpu();
	struct cpu_state *cs = cpu_state_of(cpu);

	if (!cs || !cpu_valid(cpu) || READ_ONCE(cs->curr_pid) == agent_pid)
		return;
	if (cs->idle) {
		agent_kick_ns = scx_bpf_now();
		scx_bpf_kick_cpu(cpu, SCX_KICK_IDLE);
	} else if (agent_home() >= 0 && cpu != sync_waker_cpu) {
		__sync_fetch_and_add(&nr_agent_preempt_kicks, 1);
		scx_bpf_kick_cpu(cpu, SCX_KICK_PREEMPT);
	}
}

/*
 * May the agent run on @cpu now? A pinned agent only on its home CPU (the
 * kernel would refuse to move it elsewhere anyway). An unpinned one on its
 * last CPU; elsewhere only when its last CPU will not take it soon: that
 * CPU runs another task, or it was kicked out of idle more than
 * WL_AGENT_KICK_GRACE_NS ago and still has not taken it. Every hop of the
 * agent is a task migration (and a cold cache for its placement state),
 * which a benchmark's migration count would charge to the placement policy.
 */
static bool agent_may_run_on(s32 cpu, u64 now)
{
	s32 last = READ_ONCE(wl_shared.agent_cpu);
	struct cpu_state *cs;

	if (agent_home() >= 0)
		return cpu == agent_home();
	if (!cpu_valid(last) || last == cpu)
		return true;
	cs = cpu_state_of(last);
	if (!cs || !cs->idle)
		return true;
	return time_delta(now, agent_kick_ns) > WL_AGENT_KICK_GRACE_NS;
}

/*
 * A task now waits in @cpu's queue (its DSQ or local DSQ). If @cpu is the
 * agent's home and the agent runs there, ask it to stop spinning and yield;
 * if @cpu is idle, wake it. The idle test pairs with wakelab_update_idle(),
 * which looks at its queue after publishing "idle": either this side sees
 * the CPU idle and kicks it, or that side sees the task.
 */
static void note_queued_on(s32 cpu)
{
	struct cpu_state *cs = cpu_state_of(cpu);

	if (!cs || !cpu_valid(cpu))
		return;
	if (cpu == agent_home() && READ_ONCE(cs->curr_pid) == agent_pid) {
		if (!READ_ONCE(wl_shared.agent_yield_request))
			WRITE_ONCE(wl_shared.agent_yield_request, 1);
	} else if (READ_ONCE(cs->idle) && cpu != bpf_get_smp_processor_id()) {
		scx_bpf_kick_cpu(cpu, SCX_KICK_IDLE);
	}
}

