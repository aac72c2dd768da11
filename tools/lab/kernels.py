"""The seeds' effects as the real kernels show them in the same VM, beside ours.

`tools/oracle/run --reps N --json FILE` records each kernel's own placements and newly-idle
balances (no sched_ext: the kernels as Debian ships them), one record per workload and rep,
and writes each run's seed counts. This module reads that file and sums it per rep over
the workloads, so that each seed's kernel effect has a spread as ours has:

- seed 1 (never merged), on the VM's own 7.2 (`sid`): the share of sync wake-ups from an
  interrupt that the kernel places on the waker's CPU, which the flag removes;
- seed 2, 5.10 (`bullseye`, before Rik van Riel's test) against 6.1 (`bookworm`): of the
  newly-idle balances entered with a wake-up pending and the other gates open, the share
  that went on to balance;
- seed 4, 5.10 against 6.1 (Mel Gorman's recent_used_cpu change, 89aafd67, v5.15), on the
  lab's own seed-4 workload (perf bench sched pipe, NCPU/4 pairs: sched-pipe-pairs): the
  hit rate of recent_used_cpu where the block examined it (hits over hits and misses, as
  the agent's sis_recent_used counters count them; which wake-ups were examined comes from
  the engine's chain on the kernel's records), and the share of the wake-ups past the target
  and prev placed on it, as ours is counted (older files: of all wake-ups).

Seed 3's kernel effect needs DELAY_DEQUEUE toggled under the lab's own workload and is the
lab run's (the eevdf-nodd setting), not this file's.
"""
import json
import math

SEED1_KERNEL, SEED2_KERNELS, SEED4_KERNELS = "sid", ("bullseye", "bookworm"), ("bullseye", "bookworm")
SEED4_WORKLOAD = "sched-pipe-pairs"
# Fewer cases than this over all reps carry no share worth comparing.
MIN_CASES = 20


def load(path):
    """The oracle's --json file as a dict; ValueError with one line if it is not one."""
    try:
        with open(path) as f:
            data = json.load(f)
    except OSError as e:
        raise ValueError(f"{path}: {e.strerror}")
    except json.JSONDecodeError as e:
        raise ValueError(f"{path}: not JSON ({e.msg}, line {e.lineno})")
    if not isinstance(data, dict) or not isinstance(data.get("kernels"), dict):
        raise ValueError(f"{path}: no kernels (made by tools/oracle/run --json?)")
    return data


def merge(parts):
    """The seeds' kernel effects of several recordings (each a --json file of its own
    kernels) as one: every recording's kernels, their commands joined; reps, secs and commit
    as one value where the recordings agree, else each with the kernels it holds.
    ValueError with one line where two recordings hold the same kernel."""
    if len(parts) == 1:
        return parts[0]
    out = {"command": "; ".join(p.get("command") or "(command not recorded)" for p in parts), "kernels": {}}
    for p in parts:
        for k, v in p["kernels"].items():
            if k in out["kernels"]:
                raise ValueError(f"kernel {k!r} is in two of the recordings: give each kernel once")
            out["kernels"][k] = v

    def agreed(values, holders):
        if all(v == values[0] for v in values):
            return values[0]
        return ", ".join(f"{v} ({', '.join(p['kernels'])})" for v, p in zip(values, holders))
    for key in ("reps", "secs", "commit"):
        out[key] = agreed([p.get(key) for p in parts], parts)
    # A workload's own seconds, from the recordings that give it some (the others may not
    # have run it at all).
    out["secs_for"] = {}
    for w in sorted({w for p in parts for w in (p.get("secs_for") or {})}):
        having = [p for p in parts if w in (p.get("secs_for") or {})]
        out["secs_for"][w] = agreed([p["secs_for"][w] for p in having], having)
    return out


def release(data, kernel):
    k = data["kernels"].get(kernel) or {}
    return k.get("release") or kernel


def per_rep(data, kernel, count, workload=None):
    """{rep: (numerator, denominator)} summed over the kernel's workloads (or one); count(run)
    gives a run's pair. A run whose recording failed counts for nothing. {} where the file
    has no such kernel or workload recorded."""
    out = {}
    for run in (data["kernels"].get(kernel) or {}).get("runs", []):
        if (workload and run["workload"] != workload) or run.get("record_rc", 0) != 0:
            continue
        n, d = count(run)
        a, b = out.get(run["rep"], (0, 0))
        out[run["rep"]] = (a + n, b + d)
    return out


def kernel_of_cases(key):
    """A run's (kernel, cases) of one seed line of `oracle compare`: the share of its cases
    the kernel placed as the seed describes."""
    def count(run):
        cases, kernel, _engine = run.get("seeds", {}).get(key, (0, 0, 0))
        return kernel, cases
    return count


def rates(pairs):
    """Per rep the share n/d, over the reps that have a denominator."""
    return [n / d for _, (n, d) in sorted(pairs.items()) if d]


def column(pairs, i):
    """Per rep (in rep order) the numerators (i = 0) or the denominators (i = 1)."""
    return [p[i] for _, p in sorted(pairs.items())]


def totals(pairs):
    return tuple(sum(p[i] for p in pairs.values()) for i in (0, 1))


def fisher_greater(a, n, b, m):
    """One-sided Fisher exact test: the probability, with the a + b successes dealt at
    random over the n + m trials, that the first side gets a or more of them."""
    k, total = a + b, n + m
    if not total or not k:
        return 1.0
    return sum(math.comb(n, x) * math.comb(m, k - x) for x in range(a, min(n, k) + 1)) / math.comb(total, k)


def seed1(data):
    """{"release", "reps": {rep: (pulled, cases)}} or None without the kernel."""
    reps = per_rep(data, SEED1_KERNEL, kernel_of_cases("1"))
    return {"release": release(data, SEED1_KERNEL), "reps": reps} if reps else None


def seed2(data):
    """{kernel: {"release", "reps": {rep: (balanced, entered with a wake-up pending and the
    other gates open)}}, "p": one-sided Fisher p that 5.10 balances more of them} or None."""
    out = {}
    for k in SEED2_KERNELS:
        reps = per_rep(data, k, lambda r: (r.get("newidle", {}).get("pending_balanced", 0),
                                           r.get("newidle", {}).get("pending_open", 0)))
        if not reps:
            return None
        out[k] = {"release": release(data, k), "reps": reps}
    (a, n), (b, m) = (totals(out[k]["reps"]) for k in SEED2_KERNELS)
    out["p"] = fisher_greater(a, n, b, m)
    return out


def seed4(data):
    """{kernel: {"release", "hit_rate": {rep: (hits, examined)}, "share": {rep: (placed on
    recent_used_cpu, wake-ups)}, "share_of": what those wake-ups are}} or None."""
    out = {}
    for k in SEED4_KERNELS:
        hit = per_rep(data, k, kernel_of_cases("4x"), SEED4_WORKLOAD)
        # The wake-ups past the target and prev, as the lab counts ours; a file from before
        # that line has only all wake-ups to divide by.
        past = per_rep(data, k, kernel_of_cases("4p"), SEED4_WORKLOAD)
        share = past if any(d for _, d in past.values()) else \
            per_rep(data, k, lambda r: (kernel_of_cases("4")(r)[0], r.get("wakeups", 0)), SEED4_WORKLOAD)
        if not hit:
            return None
        out[k] = {"release": release(data, k), "hit_rate": hit, "share": share,
                  "share_of": "wake-ups past the target and prev" if share is past else "all wake-ups"}
    return out
