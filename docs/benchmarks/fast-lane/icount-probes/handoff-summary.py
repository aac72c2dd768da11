#!/usr/bin/env python3
"""Per-workload deltas of the scheduler's counters in a handoff.sh output.

handoff.sh prints `STATS <workload> <stats --json>` after each workload of a load
(cumulative since that load started) and a `HANDOFF <setting> ...` line when the
load ends; this prints, per setting and workload, each named counter's growth.

  handoff-summary.py handoff-543bd54.out nr_decisions,nr_handoffs,nr_apply_runs
"""
import json
import sys


def loads(path):
    """[(setting, [(workload, metrics), ...]), ...] in the order of the file."""
    out, stats = [], []
    for line in open(path, errors="replace"):
        if line.startswith("STATS "):
            _, workload, doc = line.split(" ", 2)
            try:
                metrics = json.loads(doc)["metrics"]
                # The engine's counters (policy.*) by their own names beside BPF's.
                metrics.update(metrics.pop("policy", {}))
                stats.append((workload, metrics))
            except (ValueError, KeyError):
                continue
        elif line.startswith("HANDOFF "):
            out.append((line.split()[1], stats))
            stats = []
    return out


def main():
    path, names = sys.argv[1], sys.argv[2].split(",")
    for setting, stats in loads(path):
        before = {}
        for workload, metrics in stats:
            cells = [f"{n}={metrics.get(n, 0) - before.get(n, 0)}" for n in names]
            print(setting, workload, " ".join(cells))
            before = metrics


if __name__ == "__main__":
    main()
