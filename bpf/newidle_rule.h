/* SPDX-License-Identifier: GPL-2.0 */
/*
 * scx_wakelab: the newly-idle balance's decision, in C, for BPF's live pull
 * (bpf/balance.bpf.c) and for the test that holds it to the engine's
 * (tests/newidle_rule.rs feeds this and Engine::newidle_pull the same
 * inputs). It is src/policy/newidle.rs as far as whether and whence to pull,
 * with the inputs the live scheduler has: no NI_RANDOM draw, no domain costs
 * (every domain costs nothing; avg_idle meets only v5.10's 500 us), no
 * failed-balance escape for cache-hot tasks. Read that file for the kernel
 * lines each step follows; the comments here say only where C differs.
 *
 * Plain C: no BPF helper and no map. It reads the contract's types
 * (bpf/intf.h: the levels, struct wl_newidle_rule). The includer defines,
 * before including:
 *   NI_FOR(i, lo, hi)   a loop (bpf_for in BPF, a for loop on the host);
 *   NI_NR_CPUS          how many CPUs to look at;
 *   NI_CONFIG           a pointer to the struct wl_newidle_rule to follow;
 *   NI_SUBPROG          what the two functions with a loop over the CPUs
 *                       are declared as (one domain's balance, one group's
 *                       statistics): in BPF global functions, each verified
 *                       once instead of at each call, on the host static.
 * and, before or after, ni_read(cpu, out), which fills struct ni_cpu for
 * @cpu and returns false where it has none.
 * Every CPU's inputs are read through ni_read() when needed, not copied: a
 * BPF program has no room for a copy of 1,024 CPUs. The cost is
 * O(span x groups) reads per domain.
 */
#ifndef __WAKELAB_NEWIDLE_RULE_H
#define __WAKELAB_NEWIDLE_RULE_H

/* How a newly-idle balance ends (the engine's rule that ends its chain). */
enum ni_verdict {
	NI_PULL,		/* from ni_result.src, at ni_result.level */
	NI_CPU_OFFLINE,
	NI_CPU_HAS_WORK,
	NI_SKIP_PENDING,	/* seed 2: rq->ttwu_pending */
	NI_SKIP_IN_FLIGHT,	/* seed 2: a decision of the agent's on its way */
	NI_NOT_OVERLOADED,
	NI_IDLE_TOO_SHORT,
	NI_NOTHING,
};

/* A CPU as the rule reads it: the engine's CpuSnapshot and topology. */
struct ni_cpu {
	u64 load;		/* cpu_load() */
	u64 util;		/* cpu_util_cfs() */
	u64 capacity;		/* capacity_of() */
	u64 avg_idle_ns;	/* rq->avg_idle */
	u32 online;
	u32 nr_running;		/* tasks there, delayed sleepers included */
	u32 runnable;		/* ... left out */
	u32 ttwu_pending;
	u32 in_flight;		/* a wake-up decided for it, not yet queued */
	u32 levels;		/* bit WL_DOM_*: a domain at that level */
	/* The lowest online CPU of its core, LLC and node: the group keys. */
	u32 first[3];
	u32 imb_numa_nr;	/* sd->imb_numa_nr of its NUMA domain */
};

struct ni_result {
	s32 src;		/* the CPU to pull from, -1 none */
	u32 level;		/* the domain it was found at */
	u32 verdict;		/* enum ni_verdict */
	u32 pending;		/* a wake-up was on its way (the flag is off) */
};

static __always_inline bool ni_read(s32 cpu, struct ni_cpu *out);

enum ni_group_type { NI_HAS_SPARE, NI_FULLY_BUSY, NI_OVERLOADED };

struct ni_group {
	u64 load, capacity, avg_load;
	u32 key, weight, nr_running, runnable, idle_cpus, cores, type, pad;
};

/* The key of @c's domain at @level: CPUs with the same key share it. */
static __always_inline u32 ni_key(const struct ni_cpu *c, u32 level)
{
	/* A switch, not c->first[level]: the verifier refuses a stack read at an offset it cannot bound. */
	switch (level) {
	case WL_DOM_SMT:
		return c->first[0];
	case WL_DOM_LLC:
		return c->first[1];
	case WL_DOM_NODE:
		return c->first[2];
	default:
		return 0;
	}
}

/*
 * The level below @level among @levels, or WL_DOM_NR. Unrolled: from a
 * level it cannot bound, the verifier would follow a loop down too far.
 */
static __always_inline u32 ni_child(u32 levels, u32 level)
{
	if (level > WL_DOM_NODE && (levels & (1u << WL_DOM_NODE)))
		return WL_DOM_NODE;
	if (level > WL_DOM_LLC && (levels & (1u << WL_DOM_LLC)))
		return WL_DOM_LLC;
	if (level > WL_DOM_SMT && (levels & (1u << WL_DOM_SMT)))
		return WL_DOM_SMT;
	return WL_DOM_NR;
}

/* The group of @c (CPU @id) in a domain whose child is @child: its key. */
static __always_inline u32 ni_group_key(const struct ni_cpu *c, u32 id, u32 child)
{
	return child < WL_DOM_NR ? ni_key(c, child) : id;
}

/*
 * update_sg_lb_stats(): the group @key of @cpu's domain at @level. @c is
 * room to read CPUs into (the BPF stack has none to spare). Its own
 * function in BPF: inline, its loop inside the caller's would be too
 * many paths for the verifier. It reads @cpu again for the domain's keys:
 * a BPF function takes five arguments at most.
 */
NI_SUBPROG int ni_group_stats(s32 cpu, u32 level, u32 key, struct ni_group *g, struct ni_cpu *c)
{
	u32 span_key, child;

	if (!g || !c || level >= WL_DOM_NR || !ni_read(cpu, c))
		return 0;
	span_key = ni_key(c, level);
	child = ni_child(c->levels, level);
	s32 i;

	__builtin_memset(g, 0, sizeof(*g));
	g->key = key;
	NI_FOR(i, 0, NI_NR_CPUS) {
		if (!ni_read(i, c) || !c->online || ni_key(c, level) != span_key ||
		    ni_group_key(c, i, child) != key)
			continue;
		g->weight++;
		g->nr_running += c->nr_running;
		g->runnable += c->runnable;
		g->load += c->load;
		g->capacity += c->capacity;
		if (!c->nr_running && !c->ttwu_pending)
			g->idle_cpus++;
		/* A core counts at its first CPU; a single-CPU group is one core. */
		if (child >= WL_DOM_NR || c->first[WL_DOM_SMT] == (u32)i)
			g->cores++;
	}
	g->type = g->nr_running > g->weight ? NI_OVERLOADED :
		  g->nr_running == g->weight ? NI_FULLY_BUSY : NI_HAS_SPARE;
	g->avg_load = g->load * 1024 / (g->capacity ? g->capacity : 1);
	return 0;
}

/* update_sd_pick_busiest(): whether @g is busier than @b; among equals the first stays. */
static __always_inline bool ni_busier(const struct ni_group *g, const struct ni_group *b)
{
	if (g->type != b->type)
		return g->type > b->type;
	if (g->type != NI_HAS_SPARE)
		return g->avg_load > b->avg_load;
	return g->idle_cpus < b->idle_cpus ||
	       (g->idle_cpus == b->idle_cpus && g->nr_running > b->nr_running);
}

/* sibling_imbalance(). */
static __always_inline u64 ni_sibling_imbalance(const struct ni_group *b, const struct ni_group *l)
{
	u64 nb = b->nr_running, nl = l->nr_running, cb, cl, imb;

	if (!nb)
		return 0;
	cb = b->cores ? b->cores : 1;
	cl = l->cores ? l->cores : 1;
	if (cb == cl)
		return nb > nl ? nb - nl : 0;
	imb = cl * nb > cb * nl ? cl * nb - cb * nl : 0;
	imb = (2 * imb + cl + cb) / (cl + cb);
	return imb <= 1 && nl == 0 && nb > 1 ? 2 : imb;
}

/*
 * load_balance(@cpu, sd at @level, CPU_NEWLY_IDLE) as far as whence it pulls:
 * the CPU, or -1.
 */
NI_SUBPROG s32 ni_balance_domain(s32 cpu, u32 level)
{
	const struct wl_newidle_rule *cfg = NI_CONFIG;
	struct ni_group local, busiest, g;
	struct ni_cpu c;
	u32 span_key, child, local_key, imb_numa_nr;
	u64 total_load = 0, total_capacity = 0, sd_avg_load, siblings, imb, best_first = 0, best_load = 0;
	bool have_busiest = false, prefer_sibling, spread, numa, by_util = false, found = false;
	s32 i, src = -1;

	if (!ni_read(cpu, &c) || level >= WL_DOM_NR)
		return -1;
	span_key = ni_key(&c, level);
	child = ni_child(c.levels, level);
	local_key = ni_group_key(&c, cpu, child);
	imb_numa_nr = c.imb_numa_nr;
	__builtin_memset(&local, 0, sizeof(local));
	__builtin_memset(&busiest, 0, sizeof(busiest));
	NI_FOR(i, 0, NI_NR_CPUS) {
		/* Each group once, at its first CPU (its key). */
		if (!ni_read(i, &c) || !c.online || ni_key(&c, level) != span_key ||
		    ni_group_key(&c, i, child) != (u32)i)
			continue;
		ni_group_stats(cpu, level, i, &g, &c);
		total_load += g.load;
		total_capacity += g.capacity;
		if (g.key == local_key) {
			local = g;
			found = true;
		} else if (g.runnable > 0 && (!have_busiest || ni_busier(&g, &busiest))) {
			busiest = g;
			have_busiest = true;
		}
	}
	if (!found || !have_busiest)
		return -1;
	sd_avg_load = total_load * 1024 / (total_capacity ? total_capacity : 1);
	if (local.type > busiest.type)
		return -1;
	if (local.type == NI_OVERLOADED &&
	    (local.avg_load >= busiest.avg_load || local.avg_load >= sd_avg_load ||
	     100 * busiest.avg_load <= (u64)(level == WL_DOM_SMT ? cfg->imbalance_pct_smt :
					     cfg->imbalance_pct_llc) * local.avg_load))
		return -1;
	prefer_sibling = child < WL_DOM_NR;
	siblings = ni_sibling_imbalance(&busiest, &local);
	spread = prefer_sibling && local.type == NI_HAS_SPARE && siblings > 1;
	if (!spread && busiest.type != NI_OVERLOADED &&
	    ((busiest.weight > 1 && local.idle_cpus <= busiest.idle_cpus + 1) ||
	     busiest.runnable == 1))
		return -1;
	numa = level == WL_DOM_MACHINE && cfg->is_numa;
	if (local.type == NI_HAS_SPARE) {
		if (busiest.type > NI_FULLY_BUSY && level != WL_DOM_SMT && level != WL_DOM_LLC) {
			by_util = true;
		} else {
			if (busiest.weight == 1 || prefer_sibling)
				imb = siblings;
			else
				imb = local.idle_cpus > busiest.idle_cpus ?
				      local.idle_cpus - busiest.idle_cpus : 0;
			if (!cfg->numa_imb_nr) {
				imb >>= 1;
				if (numa && busiest.nr_running <= 2)
					imb = 0;
			} else {
				if (numa && local.nr_running < imb_numa_nr && imb <= 2)
					imb = 0;
				imb >>= 1;
			}
			if (!imb)
				return -1;
		}
	} else if (local.avg_load >= busiest.avg_load || local.avg_load >= sd_avg_load) {
		return -1;
	}
	/* find_busiest_queue(): ties go to the lower CPU. */
	NI_FOR(i, 0, NI_NR_CPUS) {
		u64 first;

		if (!ni_read(i, &c) || !c.online || ni_key(&c, level) != span_key ||
		    ni_group_key(&c, i, child) != busiest.key)
			continue;
		if (by_util && c.nr_running <= 1)
			continue;
		first = by_util ? c.util : c.runnable;
		if (src < 0 || first > best_first || (first == best_first && c.load > best_load)) {
			src = i;
			best_first = first;
			best_load = c.load;
		}
	}
	if (src < 0 || !ni_read(src, &c) || c.nr_running < 2 || c.runnable < 2)
		return -1;
	return src;
}

/*
 * The newly-idle balance of @cpu from its domain @from_level outwards (0 at
 * first; past the level of a pull that found no task to move, to go on as
 * the kernel does). @res says where to pull from, or why not.
 */
static __always_inline void ni_decide(s32 cpu, u32 from_level, struct ni_result *res)
{
	const struct wl_newidle_rule *cfg = NI_CONFIG;
	struct ni_cpu c;
	bool overloaded = false;
	u32 l, levels;
	u64 avg_idle;
	s32 i;

	res->src = -1;
	res->level = 0;
	res->pending = 0;
	if (!ni_read(cpu, &c) || !c.online) {
		res->verdict = NI_CPU_OFFLINE;
		return;
	}
	if (c.runnable > 0) {
		res->verdict = NI_CPU_HAS_WORK;
		return;
	}
	if (cfg->skip_pending && c.ttwu_pending) {
		res->verdict = NI_SKIP_PENDING;
		return;
	}
	if (cfg->skip_pending && c.in_flight) {
		res->verdict = NI_SKIP_IN_FLIGHT;
		return;
	}
	res->pending = c.ttwu_pending || c.in_flight;
	levels = c.levels;
	avg_idle = c.avg_idle_ns;
	NI_FOR(i, 0, NI_NR_CPUS) {
		if (ni_read(i, &c) && c.online && c.nr_running >= 2) {
			overloaded = true;
			break;
		}
	}
	if (!overloaded) {
		res->verdict = NI_NOT_OVERLOADED;
		return;
	}
	if (avg_idle < cfg->avg_idle_min_ns) {
		res->verdict = NI_IDLE_TOO_SHORT;
		return;
	}
	for (l = from_level; l < WL_DOM_NR; l++) {
		s32 src;

		if (!(levels & (1u << l)))
			continue;
		src = ni_balance_domain(cpu, l);
		if (src >= 0) {
			res->src = src;
			res->level = l;
			res->verdict = NI_PULL;
			return;
		}
	}
	res->verdict = NI_NOTHING;
}

#endif /* __WAKELAB_NEWIDLE_RULE_H */
