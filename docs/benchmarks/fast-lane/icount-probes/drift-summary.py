#!/usr/bin/env python3
"""Per-run table of drift.sh's output: time, context switches, and the scheduler's counters
as differences between consecutive `stats --json` snapshots of one load (so each row is
that run's own; the first row of a load includes the warm-up). Each hop column is "mean
us/ms spent in hops over 1 ms". Usage: drift-summary.py drift.out"""
import json
import sys

KEYS = ("nr_decisions", "nr_agent_runs", "nr_apply_runs", "nr_apply_misses", "apply_retries",
        "nr_applied_to_idle", "nr_applied_to_queue", "sleep_events", "delayed_requeues",
        "nr_newidle_pulls", "nr_agent_preempt_kicks", "nr_heartbeat_kicks", "nr_stranded_kicks",
        "nr_idle_agent_kicks", "nr_agent_stall_fallbacks")
HOPS = ("select_enqueue", "enqueue_read", "read_commit", "commit_apply", "apply_run")


def mean_and_tail(hist):
    """Mean (us, each log2 bucket [2^i, 2^(i+1)) ns taken at 1.5 * 2^i) and the summed
    time of the hops over 1 ms (ms): a few stalls of milliseconds hide under a p50."""
    n = sum(hist)
    mean = sum(c * 1.5 * 2 ** i for i, c in enumerate(hist)) / n / 1000 if n else 0
    tail = sum(c * 1.5 * 2 ** i for i, c in enumerate(hist) if i >= 20) / 1e6
    return f"{mean:.1f}/{tail:.0f}"


def buckets(h):
    return h.get("buckets", h) if isinstance(h, dict) else h


def main(path):
    runs, prev, cur, buf = [], {}, None, []
    for line in open(path, errors="replace"):
        line = line.rstrip("\r\n")
        if line.startswith("RUN "):
            f = dict(kv.split("=", 1) for kv in line.split()[2:] if "=" in kv)
            runs.append({"tag": line.split()[1], **f})
        elif line.startswith("STATS-BEGIN "):
            cur, buf = line.split()[1], []
        elif line.startswith("STATS-END "):
            js = json.loads("".join(buf))
            js = js.get("metrics", js)
            load = cur.split("-")[0]
            before = prev.get(load)
            row = next(r for r in runs if r["tag"] == cur)
            for k in KEYS:
                row[k] = js.get(k, 0) - (before.get(k, 0) if before else 0)
            row["agent_cpu_ms"] = (js.get("agent_cpu_ns", 0) - (before.get("agent_cpu_ns", 0) if before else 0)) / 1e6
            row["spin_ms"] = (js.get("agent_spin_ns", 0) - (before.get("agent_spin_ns", 0) if before else 0)) / 1e6
            for name, h in zip(HOPS, js.get("hop_hist", [])):
                hb = buckets(h)
                ob = buckets(before["hop_hist"][HOPS.index(name)]) if before else [0] * len(hb)
                row[name] = mean_and_tail([a - b for a, b in zip(hb, ob)])
            prev[load] = js
            cur = None
        elif cur is not None:
            buf.append(line)
    cols = ["tag", "usecs_op", "ctxt", "agent_ticks", "agent_cpu_ms", "spin_ms"] + list(KEYS) + list(HOPS)
    print("\t".join(cols))
    for r in runs:
        print("\t".join(str(r.get(c, "")) for c in cols))


if __name__ == "__main__":
    main(sys.argv[1])
