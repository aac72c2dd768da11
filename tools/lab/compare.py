#!/usr/bin/env python3
"""tools/lab/compare.py BEFORE AFTER [--setting wakelab]: two lab output directories of the
same plan (tools/lab/run), one setting of ours compared across them, as markdown.

For each workload (sweeps: each parameter) it prints the setting's mean value and its ratio
to EEVDF in the same run, before and after, then the counts that say where the time went:
context switches (all, and the scheduler's own), migrations (the workload's and the
scheduler's own), and the agent's CPU time per 1000 decisions (after: also less the time it
spent polling for wake-ups, --agent-spin-us). Then the per-hop latency
histograms of the setting (latency_hist.json), p50 and p99 of each, over the whole run and,
where the lab recorded them per workload run, for each workload. Ratios are of means over
the reps of each run (results.csv; either file may be NAME.gz, as committed runs keep
them); a run's peers (scx_rustland, scx_bpfland) are listed for
reference from AFTER.
"""
import argparse
import json
import sys
from collections import defaultdict
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import lablib  # noqa: E402
import runlib  # noqa: E402


def means(rows):
    """{(setting, workload, param, metric): mean over reps}"""
    acc = defaultdict(list)
    for r in rows:
        acc[(r["setting"], r["workload"], r["param"], r["metric"])].append(r["value"])
    return {k: sum(v) / len(v) for k, v in acc.items()}


def fmt(v, digits=3):
    if v is None:
        return "—"
    if abs(v) >= 1000:
        return f"{v:.0f}"
    return f"{v:.{digits}g}"


def ratio(a, b):
    return a / b if a is not None and b else None


def load(outdir):
    d = Path(outdir)
    rows = lablib.read_results_csv(d / "results.csv")
    hist_file = lablib.stored(d / "latency_hist.json")
    hist = json.loads(lablib.read_text(hist_file)) if hist_file.exists() else {}
    return means(rows), hist.get("settings", {})


def workload_keys(m, setting):
    return sorted({(w, p) for (s, w, p, _) in m if s == setting},
                  key=lambda wp: (wp[0], float(wp[1]) if wp[1].replace(".", "").isdigit() else 0))


def tables(before, after, setting, peers):
    mb, hb = before
    ma, ha = after
    get = lambda m, s, w, p, k: m.get((s, w, p, k))
    L = ["| " + " | ".join(["workload", "before", "ratio", "after", "ratio"] + [f"{p} ratio" for p in peers]) + " |",
         "|---|---|---|---|---|" + "---|" * len(peers)]
    for w, p in workload_keys(ma, setting):
        name = f"{w} {p}".strip()
        vb, va = get(mb, setting, w, p, "value"), get(ma, setting, w, p, "value")
        eb, ea = get(mb, "eevdf", w, p, "value"), get(ma, "eevdf", w, p, "value")
        cells = [name, fmt(vb), fmt(ratio(vb, eb)), fmt(va), fmt(ratio(va, ea))]
        cells += [fmt(ratio(get(ma, peer, w, p, "value"), ea)) for peer in peers]
        L.append("| " + " | ".join(cells) + " |")
    L += ["", "| workload | ctxt / EEVDF before | after | scheduler's own ctxt before | after | "
          "task migrations before | after | scheduler's own migrations before | after | "
          "agent CPU ms per 1000 decisions before | after | after, less its spinning |", "|---" * 12 + "|"]
    for w, p in workload_keys(ma, setting):
        def per1000(m, less_spin=False):
            cpu, dec = get(m, setting, w, p, "agent_cpu_s"), get(m, setting, w, p, "wl:nr_decisions")
            spin = get(m, setting, w, p, "wl:agent_spin_ns") if less_spin else 0.0
            if cpu is None or not dec or spin is None:
                return None
            return max(0.0, cpu - spin / 1e9) * 1e6 / dec
        cells = [f"{w} {p}".strip(),
                 fmt(ratio(get(mb, setting, w, p, "ctxt"), get(mb, "eevdf", w, p, "ctxt"))),
                 fmt(ratio(get(ma, setting, w, p, "ctxt"), get(ma, "eevdf", w, p, "ctxt"))),
                 fmt(get(mb, setting, w, p, "sched_ctxt")), fmt(get(ma, setting, w, p, "sched_ctxt")),
                 fmt(get(mb, setting, w, p, "migrations")), fmt(get(ma, setting, w, p, "migrations")),
                 fmt(get(mb, setting, w, p, "sched_migrations")), fmt(get(ma, setting, w, p, "sched_migrations")),
                 fmt(per1000(mb)), fmt(per1000(ma)), fmt(per1000(ma, less_spin=True))]
        L.append("| " + " | ".join(cells) + " |")
    L += ["", "| hop | before p50 | p99 | samples | after p50 | p99 | samples |", "|---|---|---|---|---|---|---|"]
    for hop in lablib.HOPS:
        def cell(h):
            e = h.get(f"{setting} / hop {hop}")
            if not e:
                return ["—", "—", "0"]
            c = e["counts"]
            p50, p99 = lablib.hist_percentile_ns(c, 50), lablib.hist_percentile_ns(c, 99)
            us = lambda ns: "—" if ns is None else f"≤ {ns / 1000:g} µs"
            return [us(p50), us(p99), str(sum(c))]
        L.append("| " + " | ".join([hop] + cell(hb) + cell(ha)) + " |")
    for pct in (50, 99):
        rows = []
        for w, p in workload_keys(ma, setting):
            label = f"{setting} / {w} {p}".rstrip()

            def at(h, hop):
                e = h.get(f"{label} / hop {hop}")
                ns = lablib.hist_percentile_ns(e["counts"], pct) if e else None
                return "—" if ns is None else f"{ns / 1000:g}"
            if any(f"{label} / hop {hop}" in h for h in (hb, ha) for hop in lablib.HOPS):
                rows.append("| " + " | ".join([f"{w} {p}".strip()] +
                                              [f"{at(hb, hop)} → {at(ha, hop)}" for hop in lablib.HOPS]) + " |")
        if rows:
            L += ["", f"| workload: p{pct} before → after, ≤ µs | " + " | ".join(lablib.HOPS) + " |",
                  "|---" * (1 + len(lablib.HOPS)) + "|"] + rows
    return L


def main():
    ap = runlib.Parser(prog="tools/lab/compare.py", name="compare", description=__doc__,
                       formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("before")
    ap.add_argument("after")
    ap.add_argument("--setting", default="wakelab")
    ap.add_argument("--peers", default="scx_rustland,scx_bpfland")
    a = ap.parse_args()
    try:
        before, after = load(a.before), load(a.after)
    except (OSError, ValueError) as e:
        print(f"compare: {e}", file=sys.stderr)
        return 2
    if not any(s == a.setting for (s, _, _, _) in after[0]):
        print(f"compare: {a.after} has no setting {a.setting!r}", file=sys.stderr)
        return 2
    print("\n".join(tables(before, after, a.setting, [p for p in a.peers.split(",") if p])))
    return 0


if __name__ == "__main__":
    sys.exit(main())
