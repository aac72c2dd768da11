/* SPDX-License-Identifier: GPL-2.0 */
/*
 * bpf/newidle_rule.h built for the host, for tests/newidle_rule.rs: the same
 * C that BPF's newly-idle pull runs, fed cases on stdin, one verdict a line on
 * stdout. A case is a line
 *   case NR_CPUS CPU SKIP_PENDING NUMA_IMB_NR PCT_SMT PCT_LLC IS_NUMA AVG_IDLE_MIN_NS
 * then a line per CPU
 *   ONLINE NR_RUNNING RUNNABLE TTWU_PENDING IN_FLIGHT LEVELS FIRST_CORE FIRST_LLC
 *   FIRST_NODE IMB_NUMA_NR LOAD UTIL CAPACITY AVG_IDLE_NS COLD HOT
 * where COLD and HOT count the tasks waiting there that may move, and that
 * only an SMT sibling may take (task_hot()). Answers "pull SRC LEVEL" or the
 * verdict's name, taking a task as bpf/balance.bpf.c's newidle_balance() does:
 * where the CPU named has none this one may take, on from the next domain.
 */
#include <stdbool.h>
#include <stdio.h>
#include <string.h>

#include "../../bpf/intf.h"

#ifndef __always_inline
#define __always_inline	inline __attribute__((always_inline))
#endif
#define NI_FOR(i, lo, hi)	for ((i) = (lo); (i) < (hi); (i)++)
#define NI_NR_CPUS	nr_cpus
#define NI_CONFIG	(&config)
#define NI_SUBPROG	static

static struct wl_newidle_rule config;
static int nr_cpus;

#include "../../bpf/newidle_rule.h"

static struct ni_cpu cpus[WL_MAX_CPUS];
static unsigned cold[WL_MAX_CPUS], hot[WL_MAX_CPUS];

static __always_inline bool ni_read(s32 cpu, struct ni_cpu *out)
{
	if (cpu < 0 || cpu >= nr_cpus)
		return false;
	*out = cpus[cpu];
	return true;
}

static const char *const names[] = {
	[NI_PULL] = "pull", [NI_CPU_OFFLINE] = "cpu-offline", [NI_CPU_HAS_WORK] = "cpu-has-work",
	[NI_SKIP_PENDING] = "skip-pending", [NI_SKIP_IN_FLIGHT] = "skip-in-flight",
	[NI_NOT_OVERLOADED] = "not-overloaded", [NI_IDLE_TOO_SHORT] = "idle-too-short",
	[NI_NOTHING] = "nothing",
};

int main(void)
{
	int cpu, i;
	unsigned skip, imb, smt, llc, numa;
	unsigned long long min_idle;

	while (scanf(" case %d %d %u %u %u %u %u %llu", &nr_cpus, &cpu, &skip, &imb, &smt, &llc,
		     &numa, &min_idle) == 8) {
		struct ni_result res;
		u32 from = 0, tries;

		if (nr_cpus < 1 || nr_cpus > WL_MAX_CPUS)
			return 2;
		config = (struct wl_newidle_rule){ .skip_pending = skip, .numa_imb_nr = imb,
						   .imbalance_pct_smt = smt, .imbalance_pct_llc = llc,
						   .is_numa = numa, .avg_idle_min_ns = min_idle };
		for (i = 0; i < nr_cpus; i++) {
			struct ni_cpu *c = &cpus[i];

			if (scanf("%u %u %u %u %u %u %u %u %u %u %llu %llu %llu %llu %u %u", &c->online,
				  &c->nr_running, &c->runnable, &c->ttwu_pending, &c->in_flight,
				  &c->levels, &c->first[0], &c->first[1], &c->first[2], &c->imb_numa_nr,
				  &c->load, &c->util, &c->capacity, &c->avg_idle_ns, &cold[i],
				  &hot[i]) != 16)
				return 2;
		}
		for (tries = 0; tries < WL_DOM_NR; tries++) {
			ni_decide(cpu, from, &res);
			if (res.verdict != NI_PULL)
				break;
			if (cold[res.src] || (hot[res.src] && res.level == WL_DOM_SMT))
				break;
			from = res.level + 1;
			res.verdict = NI_NOTHING;
		}
		if (res.verdict == NI_PULL)
			printf("pull %d %u\n", res.src, res.level);
		else
			printf("%s\n", names[res.verdict]);
	}
	return 0;
}
