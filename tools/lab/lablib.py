"""The lab's pieces that need no VM: the settings and workload catalogue, the plan the
guest runs, the parser of the guest's lines and the writers of OUTDIR (meta.json,
results.csv, latency_hist.json). tools/lab/run drives them; tools/lab/test_lab.py tests them.

Interface with tools/lab/report.py (fixed):
  meta.json        {"date","commit","command","kernel","clock","topology":{...},"host",
                    "settings":[{"name","kind":"eevdf|wakelab|peer","args"}],
                    "workloads":[{"name","unit","better":"lower|higher","param"}]}
  results.csv      setting,workload,param,rep,metric,unit,value
                   (metric "value" = the workload's primary metric; param '' if none)
  checks.txt       CHECK PASS|FAIL <name> <detail>
  latency_hist.json  scx_wakelab's enqueue->run histogram per setting
A run kept under docs/ holds the bulky ones gzip-compressed as NAME.gz (STORED_COMPRESSED);
read_text and write_text take either form of any of them.
"""
import csv
import errno
import gzip
import io
import json
import os
import re
import sys
import zlib
from pathlib import Path

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from mmstats import log2_buckets, percentile_le  # noqa: E402

# --------------------------------------------------------------------------- topology

# name -> wakelab-vm options (nodes, sockets, cores per socket, threads per core)
TOPOLOGIES = {
    "2x2x2": (2, 2, 2, 2),        # the default: 2 nodes = 2 sockets x 2 cores x 2 SMT threads
    "1socket-nosmt": (1, 1, 8, 1),  # one socket, one node, 8 cores without SMT
    "2llc-per-node": (2, 4, 1, 2),  # 2 nodes, each of 2 sockets (QEMU gives each socket its L3)
}


def parse_topology(text):
    """A TOPOLOGIES name, or NODES:SOCKETS:CORES:THREADS. -> dict."""
    if text in TOPOLOGIES:
        n, s, c, t = TOPOLOGIES[text]
    else:
        m = re.fullmatch(r"(\d+):(\d+):(\d+):(\d+)", text)
        if not m:
            raise ValueError(f"--topology {text!r}: one of {', '.join(TOPOLOGIES)} or NODES:SOCKETS:CORES:THREADS")
        n, s, c, t = (int(x) for x in m.groups())
    cpus = s * c * t
    if min(n, s, c, t) < 1 or cpus > 64 or cpus % n:
        raise ValueError(f"--topology {text!r}: {cpus} vCPUs cannot be split into {n} nodes")
    return {"name": text, "nodes": n, "sockets": s, "cores": c, "threads": t, "cpus": cpus}


def hackbench_groups(topo):
    """The group sweep, shaped by the CPU count (each group = 40 tasks): from a load of
    about 5 tasks per CPU up to about 20, as far as one VM run allows."""
    n = topo["cpus"]
    return sorted({1, max(1, n // 4), max(1, n // 2)})


# --------------------------------------------------------------------------- catalogue

# workload -> (unit of the primary metric, better, what it runs)
WORKLOADS = {
    "hackbench-process-pipes": ("s", "lower", "hackbench -p -g GROUPS -l LOOPS"),
    "hackbench-process-sockets": ("s", "lower", "hackbench -g GROUPS -l LOOPS"),
    "hackbench-thread-pipes": ("s", "lower", "hackbench -T -p -g GROUPS -l LOOPS"),
    "hackbench-thread-sockets": ("s", "lower", "hackbench -T -g GROUPS -l LOOPS"),
    "perf-sched-pipe": ("us", "lower", "perf bench sched pipe -l PIPE_LOOPS (usecs/op); PARAM N: N pairs "
                                       "at once, their mean"),
    "lat-ctx": ("us", "lower", "ENOUGH=N TIMING_O=0 LOOP_O=0 lat_ctx -P NCPU -W 0 -N 1 -s 0 PROCS "
                                  "(rings of LATCTX_PROCS, 16)"),
    "qperf-tcp-lat": ("us", "lower", "qperf & qperf -t SECS 127.0.0.1 tcp_lat"),
    "seed1-qperf": ("us", "lower", "qperf tcp_lat, server and client started on node 0; PARAM rps+hogs: "
                                   "lo's RPS onto the last node's CPUs and one spinning hog per CPU there"),
    "memcached": ("us", "lower", "memcached -t NCPU/2 & mcload -c CONNS -t SECS (value = p99 response "
                                 "time; p50_us/p95_us/p99_us/rps beside, cpu_s = total CPU time)"),
    "tbench": ("MB/s", "higher", "tbench_srv & tbench -t SECS -c client.txt NCLIENTS 127.0.0.1"),
}

# Setting -> (kind, arguments: the scheduler's, or an eevdf setting's sched features).
# Presets and single-flag flips of scx_wakelab: each flip changes one flag against the
# setting it is compared with.
SETTINGS = {
    "eevdf": ("eevdf", ""),
    "wakelab": ("wakelab", "--preset mainline"),
    "scx_rustland": ("peer", ""),
    "scx_bpfland": ("peer", ""),
    # seed 1 (Barry Song): mainline has no softirq-waker rule; the flag adds it. Both
    # with the idle balance, which pulls a wakee waiting behind a hog back to an idle
    # node as fair.c's periodic balance does: without it a pair pulled onto the hog
    # node stays there, and flag off moves too little for the flag to bring anything
    # down (the runs: checks-notes.md)
    "wakelab+ib": ("wakelab", "--preset mainline --idle-balance"),
    "wakelab+ib+seed1": ("wakelab", "--preset mainline --idle-balance --set sync_requires_task_waker=true"),
    # seed 2 (Rik van Riel): mainline skips the newly-idle pull when a wakeup is pending
    "wakelab-seed2": ("wakelab", "--preset mainline --set newidle_skip_pending_wakeup=false"),
    # seed 3 (Xuewen Yan / Tianchen Ding): v6.12 without delayed dequeue, with it, with the fix;
    # and the kernel's own effect: EEVDF with its DELAY_DEQUEUE feature off, beside eevdf (on
    # since v6.12). An eevdf setting's arguments are sched features for its block.
    "eevdf-nodd": ("eevdf", "NO_DELAY_DEQUEUE"),
    "v6.12-nodd": ("wakelab", "--preset v6.12 --set delayed_dequeue=false"),
    "v6.12": ("wakelab", "--preset v6.12"),
    "v6.12+seed3": ("wakelab", "--preset v6.12 --set sync_excludes_delayed=true"),
    # seed 4 (Mel Gorman): recent_used_cpu in its v5.10 form and in its 89aafd67 form;
    # delayed dequeue off as in the kernels of that change (with it on, most pipe
    # wakeups are requeues that never reach the placement engine)
    "ru-v5.10": ("wakelab", "--preset mainline --set delayed_dequeue=false --set recent_used=v5.10"),
    "ru-prev": ("wakelab", "--preset mainline --set delayed_dequeue=false --set recent_used=prev"),
}
PEERS = ["scx_rustland", "scx_bpfland"]
MAIN = ["eevdf", "wakelab", "scx_rustland", "scx_bpfland"]


def workload_name(item):
    """The workload of a --workloads item, WORKLOAD or WORKLOAD:PARAM."""
    return item.split(":", 1)[0]


def plan_for(profile, topo, settings=None, workloads=None):
    """[(setting, [(workload, param)])] in block order. profile: 'full' or 'quick'.
    settings/workloads (lists) restrict the plan. A workloads item WORKLOAD:PARAM runs that
    parameter (e.g. hackbench-process-pipes:4 = 4 groups) instead of the profile's, in each
    setting whose profile runs the workload: a single point of a sweep, or one outside it."""
    n = topo["cpus"]
    seed1 = [("seed1-qperf", "plain"), ("seed1-qperf", "rps+hogs")] if topo["nodes"] >= 2 else []
    mc = [("memcached", str(n))]
    # seed 2's counters also on hackbench: its many wakeups onto CPUs going idle make
    # the pending-wakeup case frequent (memcached alone gives too few: checks-notes.md)
    seed2 = mc + [("hackbench-process-pipes", str(hackbench_groups(topo)[-1]))]
    # seed 4 needs wakeups whose prev CPU is busy, or the recent-used CPU is never
    # consulted (one pipe pair settles on one CPU: prev idle, taken first), and idle CPUs
    # for it to hit: Mel measured one pair on a large machine, and with NCPU pairs every
    # recent CPU is busy and the direction is noise (the runs: checks-notes.md). NCPU/4
    # pairs keep half the CPUs idle.
    seed4 = [("perf-sched-pipe", str(max(1, n // 4)))]

    def seed_settings(seed4):
        """The seed flips, the same in both profiles but for seed 4's workloads."""
        return [("wakelab+ib", seed1), ("wakelab+ib+seed1", seed1), ("wakelab-seed2", seed2)] + \
            [(s, [("lat-ctx", "")]) for s in ("v6.12-nodd", "v6.12", "v6.12+seed3", "eevdf-nodd")] + \
            [("ru-v5.10", seed4), ("ru-prev", seed4)]

    if profile == "quick":
        # what the seed checks need, nothing else; seed 2's two settings side by side in
        # the middle, so that reversing the order in even reps gives each the same mean
        # place in the boot (first after boot, memcached's flag-on side looked worse:
        # checks-notes.md)
        plan = [("eevdf", [("lat-ctx", "")])] + seed_settings(seed4)
        at = [s for s, _ in plan].index("wakelab-seed2")
        plan.insert(at, ("wakelab", seed2))
    else:
        hb = [(f"hackbench-{k}-{t}", str(g)) for k in ("process", "thread") for t in ("pipes", "sockets")
              for g in hackbench_groups(topo)]
        general = hb + [("perf-sched-pipe", ""), ("lat-ctx", ""), ("qperf-tcp-lat", "")] + seed1 + mc + \
            [("tbench", str(max(1, n // 2)))]
        seed4 += [("perf-sched-pipe", ""), ("hackbench-process-pipes", str(hackbench_groups(topo)[-1])),
                  ("tbench", str(max(1, n // 2)))]
        plan = [(s, general) for s in MAIN] + seed_settings(seed4)
    if settings:
        plan = [(s, wl) for s, wl in plan if s in settings]
    if workloads:
        chosen = {}   # workload -> [params] or None (the profile's)
        for item in workloads:
            name, sep, param = item.partition(":")
            if sep:
                chosen.setdefault(name, [])
                if chosen[name] is not None:
                    chosen[name].append("" if param == "-" else param)
            else:
                chosen[name] = None

        def pick(wl):
            out = []
            for w, p in wl:
                if w not in chosen:
                    continue
                for q in ([p] if chosen[w] is None else chosen[w]):
                    if (w, q) not in out:
                        out.append((w, q))
            return out
        plan = [(s, pick(wl)) for s, wl in plan]
    return [(s, wl) for s, wl in plan if wl]


def setting_args(s, extra_args=None):
    """(kind, scheduler arguments) of setting `s`, scx_wakelab's with `extra_args` after its
    own: one place, so that the arguments meta.json records are those the guest ran."""
    kind, args = SETTINGS[s]
    if kind == "wakelab" and extra_args:
        args = (args + " " + extra_args).strip()
    return kind, args


def plan_text(plan, extra_args=None):
    """The plan file for guest.sh: NAME|KIND|ARGS|WORKLOAD:PARAM ... ('-' = no param)."""
    lines = []
    for s, wl in plan:
        kind, args = setting_args(s, extra_args)
        if "|" in args:
            raise ValueError(f"setting {s}: '|' in its arguments {args!r}")
        lines.append("|".join([s, kind, args, " ".join(f"{w}:{p or '-'}" for w, p in wl)]))
    return "\n".join(lines) + "\n"


# --------------------------------------------------------------------------- guest output

ANSI_RE = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]")
RES_RE = re.compile(r"LAB r=(\d+) s=(\S+) w=(\S+) p=(\S*) m=(\S+) u=(\S+) v=(\S*)")
WL_RE = re.compile(r"LABWL r=(\d+) s=(\S+) w=(\S+) p=(\S*) (\{.*\})")
HIST_RE = re.compile(r"LABHIST r=(\d+) s=(\S+) (\[[0-9,]*\])")
HOP_RE = re.compile(r"LABHOP r=(\d+) s=(\S+) (\[.*\])$")
WLHOP_RE = re.compile(r"LABWLHOP r=(\d+) s=(\S+) w=(\S+) p=(\S*) (\[.*\])$")
# scx_wakelab's hops of a wake-up through its agent, in order (src/live/stats.rs HOPS)
HOPS = ["select_enqueue", "enqueue_read", "read_commit", "commit_apply", "apply_run"]
LOG_RE = re.compile(r"LAB-LOG r=(\d+) s=(\S+) (.*)$")
META_RE = re.compile(r"LAB-META (\S+) ?(.*)$")
BAD_STATUS = ("load_failed", "crashed")


def _json_into(kept, key, text):
    """kept[key] = the JSON in text; a line cut short (unparsable) is dropped."""
    try:
        kept[key] = json.loads(text)
    except ValueError:
        pass


class Raw:
    """Everything the guest printed, parsed. feed() takes serial lines (noise is skipped)."""

    def __init__(self):
        self.reruns = []     # why the guest ran the plan again (WAKELAB-RERUN lines)
        self._clear()

    def restart(self, why):
        """The plan runs again in a new boot: forget what the dead guest printed."""
        self.reruns.append(why)
        self._clear()

    def _clear(self):
        self.rows = []       # dicts with the results.csv columns
        self.status = {}     # (setting, rep) -> ok | load_failed | crashed | exit_N
        self.hist = {}       # (setting, rep) -> [bucket counts]
        self.hops = {}       # (setting, rep) -> [[bucket counts] per hop of HOPS]
        self.wl_hops = {}    # (setting, rep, workload, param) -> the same, of one workload run
        self.block_metrics = {}  # (setting, rep) -> {metric: value} (load_s)
        self.logs = []       # (rep, setting, text)
        self.meta = {}       # key -> [values]
        self.lines = []      # the LAB lines themselves (raw.txt)
        self.ended = False
        self.guest_end_s = None

    def feed(self, line):
        line = ANSI_RE.sub("", line.rstrip("\r\n"))
        i = line.find("LAB")
        if i < 0:
            return
        line = line[i:]
        m = RES_RE.match(line)
        if m:
            self.lines.append(line)
            rep, s, w, p, metric, unit, v = m.groups()
            p = "" if p == "-" else p
            if metric == "status":
                self.status[(s, int(rep))] = v
                return
            if w == "block":   # per block, not per workload run (load_s): meta.json's blocks
                try:
                    self.block_metrics.setdefault((s, int(rep)), {})[metric] = float(v)
                except ValueError:
                    pass
                return
            try:
                val = float(v)
            except ValueError:
                self.logs.append((int(rep), s, f"{w} {p} {metric}={v!r} (not a number)"))
                return
            self.rows.append({"setting": s, "workload": w, "param": p, "rep": int(rep),
                              "metric": metric, "unit": unit, "value": val})
            return
        m = WL_RE.match(line)
        if m:
            self.lines.append(line)
            rep, s, w, p, js = m.groups()
            p = "" if p == "-" else p
            try:
                d = json.loads(js)
            except ValueError:
                self.logs.append((int(rep), s, f"{w} {p}: unparsable counters"))
                return
            for k, v in sorted(d.items()):
                if isinstance(v, (int, float)):
                    self.rows.append({"setting": s, "workload": w, "param": p, "rep": int(rep),
                                      "metric": f"wl:{k}", "unit": "count", "value": float(v)})
            return
        m = WLHOP_RE.match(line)
        if m:
            self.lines.append(line)
            rep, s, w, p, js = m.groups()
            _json_into(self.wl_hops, (s, int(rep), w, "" if p == "-" else p), js)
            return
        # LABHOP and LABHIST: "r=REP s=SETTING JSON", kept by (setting, rep).
        for regex, kept in ((HOP_RE, self.hops), (HIST_RE, self.hist)):
            m = regex.match(line)
            if m:
                self.lines.append(line)
                _json_into(kept, (m.group(2), int(m.group(1))), m.group(3))
                return
        m = LOG_RE.match(line)
        if m:
            self.lines.append(line)
            self.logs.append((int(m.group(1)), m.group(2), m.group(3)))
            return
        m = META_RE.match(line)
        if m:
            self.lines.append(line)
            self.meta.setdefault(m.group(1), []).append(m.group(2))
            return
        m = re.match(r"LAB-END at ([0-9.]+)", line)
        if m:
            self.lines.append(line)
            self.ended = True
            self.guest_end_s = float(m.group(1))
        elif line.startswith("LAB-BLOCK"):
            self.lines.append(line)

    def good_rows(self):
        """Rows of blocks whose scheduler loaded and stayed loaded: a block whose
        scheduler died measured partly under EEVDF."""
        return [r for r in self.rows if self.status.get((r["setting"], r["rep"])) not in BAD_STATUS]

    def first(self, key, default="?"):
        return (self.meta.get(key) or [default])[0]


# --------------------------------------------------------------------------- stored form

# The files of OUTDIR that a run committed under docs/ keeps gzip-compressed (NAME.gz): a line
# per measurement and rep, they would outweigh the prose that cites them many times over.
# meta.json (the command and the machine), checks.txt and the reports stay plain to read.
STORED_COMPRESSED = ("results.csv", "latency_hist.json", "report.csv")
GZ = ".gz"


def stored(path):
    """The file that holds PATH's text: PATH, else PATH.gz when only that exists (a
    missing file stays PATH, so that errors name the file a reader expects)."""
    path = Path(path)
    gz = path.with_name(path.name + GZ)
    return gz if not path.exists() and gz.exists() else path


def read_text(path, newline=None):
    """The text of PATH or PATH.gz (newline as open() takes it); a damaged compressed file
    is an OSError naming it."""
    p = stored(path)
    try:
        with (gzip.open(p, "rt", newline=newline) if p.name.endswith(GZ) else open(p, newline=newline)) as f:
            return f.read()
    except (EOFError, zlib.error) as e:
        raise OSError(errno.EINVAL, f"not a whole gzip file ({e})", str(p))


def compressed(data):
    """DATA (bytes) gzip-compressed without a file name or time stamp: the same data, the
    same bytes."""
    buf = io.BytesIO()
    with gzip.GzipFile(filename="", mode="wb", compresslevel=9, fileobj=buf, mtime=0) as f:
        f.write(data)
    return buf.getvalue()


def write_text(path, text):
    """Write TEXT where readers will look for PATH: into PATH.gz when the directory keeps
    that file compressed (PATH.gz and no PATH), else into PATH; so a run re-rendered where
    it is committed stays in the form it was committed in."""
    p = stored(path)
    if p.name.endswith(GZ):
        p.write_bytes(compressed(text.encode()))
    else:
        with open(p, "w", newline="") as f:
            f.write(text)


def compress_outdir(outdir):
    """Replace each STORED_COMPRESSED file of OUTDIR by NAME.gz; returns the names done.
    Files already compressed are left as they are."""
    done = []
    for name in STORED_COMPRESSED:
        plain = Path(outdir) / name
        if plain.is_file():
            plain.with_name(name + GZ).write_bytes(compressed(plain.read_bytes()))
            plain.unlink()
            done.append(name)
    return done


# --------------------------------------------------------------------------- writers

CSV_HEADER = ["setting", "workload", "param", "rep", "metric", "unit", "value"]


def fmt_value(v):
    return str(int(v)) if float(v).is_integer() and abs(v) < 1e15 else f"{v:.6g}"


def write_results_csv(path, rows):
    buf = io.StringIO()
    w = csv.writer(buf, lineterminator="\n")
    w.writerow(CSV_HEADER)
    for r in rows:
        w.writerow([r["setting"], r["workload"], r["param"], r["rep"], r["metric"], r["unit"],
                    fmt_value(r["value"])])
    write_text(path, buf.getvalue())


def read_results_csv(path):
    with io.StringIO(read_text(path, newline=""), newline="") as f:
        rd = csv.DictReader(f)
        if rd.fieldnames != CSV_HEADER:
            raise ValueError(f"{path}: header {rd.fieldnames}, want {CSV_HEADER}")
        return [dict(r, rep=int(r["rep"]), value=float(r["value"])) for r in rd]


def hist_percentile_ns(counts, pct):
    """Upper bound (2 << i ns) of the bucket holding the pct-th percentile of scx_wakelab's
    log2 histogram (the rule of LiveMetrics::latency_percentile_ns)."""
    return percentile_le(log2_buckets(counts), pct)


def latency_hist(raw, good_only=True):
    """{setting: summed histogram over its reps, with p50/p99}, cumulative per block
    (load to stop) as scx_wakelab counts it; and one entry 'SETTING / hop NAME' per hop of
    a wake-up through the agent (HOPS), where the run recorded them, and 'SETTING / WORKLOAD
    [PARAM] / hop NAME' of each workload's runs alone."""
    out = {}

    def add(label, rep, h):
        e = out.setdefault(label, {"reps": [], "counts": [0] * len(h)})
        if len(e["counts"]) < len(h):
            e["counts"] += [0] * (len(h) - len(e["counts"]))
        for i, n in enumerate(h):
            e["counts"][i] += n
        e["reps"].append(rep)

    for (s, rep), h in sorted(raw.hist.items()):
        if good_only and raw.status.get((s, rep)) in BAD_STATUS:
            continue
        add(s, rep, h)
    for (s, rep), rows in sorted(raw.hops.items()):
        if good_only and raw.status.get((s, rep)) in BAD_STATUS:
            continue
        for name, h in zip(HOPS, rows):
            if isinstance(h, list):
                add(f"{s} / hop {name}", rep, h)
    for (s, rep, w, p), rows in sorted(raw.wl_hops.items()):
        if good_only and raw.status.get((s, rep)) in BAD_STATUS:
            continue
        for name, h in zip(HOPS, rows):
            if isinstance(h, list):
                add(f"{s} / {w} {p}".rstrip() + f" / hop {name}", rep, h)
    for s, e in out.items():
        e["total"] = sum(e["counts"])
        e["p50_ns"] = hist_percentile_ns(e["counts"], 50)
        e["p90_ns"] = hist_percentile_ns(e["counts"], 90)
        e["p99_ns"] = hist_percentile_ns(e["counts"], 99)
    return {"what": "scx_wakelab decision latency: BPF enqueue to the task running on the CPU the agent "
                    "chose (enqueue_to_run_hist of `scx_wakelab stats --json`), summed over the reps of "
                    "each setting, load to stop",
            "unit": "ns", "bucket_lower_ns": "2**i", "bucket_upper_ns": "2**(i+1)",
            "settings": out}


def workloads_meta(plan, commands=None):
    """meta.json's workloads; commands: {workload: command text} where an option replaced
    the catalogue's (--lat-ctx-args)."""
    seen, out = set(), []
    for _, wl in plan:
        for w, p in wl:
            if (w, p) in seen:
                continue
            seen.add((w, p))
            unit, better, cmd = WORKLOADS[w]
            out.append({"name": w, "unit": unit, "better": better, "param": p,
                        "command": (commands or {}).get(w, cmd)})
    return out


def settings_meta(plan, extra_args=None):
    out = []
    for s, _ in plan:
        kind, args = setting_args(s, extra_args)
        out.append({"name": s, "kind": kind, "args": args})
    return out
