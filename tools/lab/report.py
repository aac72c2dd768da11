#!/usr/bin/env python3
"""report: render a benchmark-lab output directory as an mmtests-style comparison.

    python3 tools/lab/report.py OUTDIR [--baseline SETTING] [--readme README.md]
    python3 tools/lab/report.py OUTDIR --compress | --archive

reads what the lab runner wrote into OUTDIR
  meta.json          date, commit, command, kernel, clock, topology, host, settings, workloads;
                     optional: sections (markdown, appended) and notes (lines, under Notes)
  results.csv        setting,workload,param,rep,metric,unit,value (one measurement a row)
  checks.txt         `CHECK PASS|FAIL name detail` lines (optional)
  latency_hist.json  the agent's decision-latency histogram per setting (optional)
each also as NAME.gz (a run committed under docs/: --compress), and writes
  OUTDIR/report.md   per workload (and sweep parameter) Amean and Stddev per setting, the
                     difference to the baseline column in % with mmtests' significance marker,
                     ratios to EEVDF, the seed checks, the latency histogram and the run's facts
  OUTDIR/report.csv  the same numbers, one row per workload, param, metric and setting
                     (report.csv.gz where the run keeps it compressed)
  OUTDIR/plots/*.svg sweep line plots, per-workload migration bar charts, the latency CDF
With --readme, the README's section between `<!-- lab:begin -->` and `<!-- lab:end -->` is
regenerated from OUTDIR with a link to the full report (inserted at the end of its
`## Performance` section when the markers are not there yet); nothing else in the file changes.

The baseline column is --baseline, else the setting named `eevdf` (or of kind eevdf), else the
first setting; a workload's table holds the settings that ran it, based on the first of them
when the baseline did not. meta.json may list a workload once per sweep value (then `param`
is that value, not the sweep's name). As in mmtests' compare output, the primary metric's
difference is a gain: positive = better (by the workload's `better`); for counts it is the
plain change. `*` marks a difference whose mean +- 1.96 stddev bands do not overlap (none
possible with n < 2).

Standard library only. Exit status: 0 written; 1 unreadable or malformed input (one line on
stderr); 2 bad usage.
"""
import argparse
import csv
import html
import io
import json
import math
import os
import re
import shlex
import shutil
import sys
import traceback
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from mmstats import gain_pct, log2_buckets, mean_sd, percentile_le, significant  # noqa: E402
import lablib  # noqa: E402
import runlib  # noqa: E402

PROG = "report"
RESULT_FIELDS = ["setting", "workload", "param", "rep", "metric", "unit", "value"]
# Metrics the runner records besides the primary "value", in report order, with labels.
METRIC_LABEL = {
    "value": None,  # the workload's own metric: labelled by its unit
    "migrations": "task migrations",
    "cross_node_migrations": "cross-node migrations",
    "ctxt": "context switches",
    "run_delay_ns": "run delay",
    "remote_wakeups": "remote wakeups",
    "agent_cpu_s": "scheduler CPU time",
}
PLACEMENT = ("migrations", "cross_node_migrations", "remote_wakeups")
BEGIN, END = "<!-- lab:begin -->", "<!-- lab:end -->"
# Okabe-Ito: distinguishable with the common colour-vision deficiencies.
PALETTE = ["#000000", "#E69F00", "#56B4E9", "#009E73", "#D55E00", "#0072B2", "#CC79A7", "#F0E442"]
GUIDE = "`shared/reference/vm-and-benchmarks.md` §3 (developers' guide)"


class Fail(Exception):
    pass


# --------------------------------------------------------------------------- input

def read_text(path, required=True, what="not a lab output directory?"):
    """PATH's text, or that of PATH.gz (a run committed under docs/, lablib.stored)."""
    try:
        return lablib.read_text(path)
    except FileNotFoundError:
        if required:
            raise Fail(f"{path}: no such file ({what})")
        return None
    except (OSError, UnicodeDecodeError) as e:
        raise Fail(f"{path}: unreadable: {getattr(e, 'strerror', None) or e}")


def load_meta(path):
    try:
        meta = json.loads(read_text(path))
    except ValueError as e:
        raise Fail(f"{path}: not JSON: {e}")
    if not isinstance(meta, dict):
        raise Fail(f"{path}: expected an object")
    for key in ("settings", "workloads"):
        items = meta.get(key)
        if not isinstance(items, list) or not items:
            raise Fail(f"{path}: '{key}' must be a non-empty list")
        for i, it in enumerate(items):
            if not isinstance(it, dict) or not isinstance(it.get("name"), str) or not it["name"]:
                raise Fail(f"{path}: {key}[{i}] has no 'name'")
    names = [s["name"] for s in meta["settings"]]
    dup = sorted({n for n in names if names.count(n) > 1})
    if dup:
        raise Fail(f"{path}: settings listed twice: {', '.join(dup)}")
    first = {}
    for w in meta["workloads"]:
        if w.get("better", "lower") not in ("lower", "higher"):
            raise Fail(f"{path}: workload {w['name']}: 'better' must be lower or higher, not {w['better']!r}")
        # A workload may be listed once per sweep value; its unit and direction are one.
        f = first.setdefault(w["name"], w)
        for k in ("unit", "better"):
            if f.get(k) != w.get(k):
                raise Fail(f"{path}: workload {w['name']} listed with {k} {f.get(k)!r} and {w.get(k)!r}")
    return meta


def param_key(p):
    """Sort sweep parameters numerically when they are numbers ('' first)."""
    try:
        return (0, float(p), p)
    except ValueError:
        return (1 if p else -1, 0.0, p)


class Lab:
    """One output directory: meta, measurements, checks, latency histograms."""

    def __init__(self, outdir):
        self.outdir = outdir
        self.meta = load_meta(outdir / "meta.json")
        self.settings = [s["name"] for s in self.meta["settings"]]
        self.kind = {s["name"]: s.get("kind", "?") for s in self.meta["settings"]}
        self.workloads = {}
        for w in self.meta["workloads"]:
            self.workloads.setdefault(w["name"], w)
        self.values = {}   # (workload, param, metric) -> {setting: {rep: value}}
        self.units = {}    # (workload, param, metric) -> unit
        self.empty = 0     # rows with an empty value (a measurement that produced none)
        self.load_results(lablib.stored(outdir / "results.csv"))
        self.checks = self.load_checks(outdir / "checks.txt")
        self.hist_what = ""
        self.hist = self.load_hist(lablib.stored(outdir / "latency_hist.json"))

    def load_results(self, path):
        lines = read_text(path).splitlines()
        rows = csv.reader(lines)
        try:
            header = next(rows)
        except StopIteration:
            raise Fail(f"{path}: empty (expected the header {','.join(RESULT_FIELDS)})")
        if [h.strip() for h in header] != RESULT_FIELDS:
            raise Fail(f"{path}: header {','.join(header)!r}, expected {','.join(RESULT_FIELDS)}")
        seen = set()
        for row in rows:
            line = rows.line_num
            if not row or not "".join(row).strip():
                continue
            if len(row) != len(RESULT_FIELDS):
                raise Fail(f"{path} line {line}: {len(row)} fields, expected {len(RESULT_FIELDS)}")
            setting, workload, param, rep, metric, unit, value = (c.strip() for c in row)
            if setting not in self.kind:
                raise Fail(f"{path} line {line}: unknown setting {setting!r} "
                           f"(meta.json lists {', '.join(self.settings)})")
            if workload not in self.workloads:
                raise Fail(f"{path} line {line}: unknown workload {workload!r} "
                           f"(meta.json lists {', '.join(self.workloads)})")
            if not metric:
                raise Fail(f"{path} line {line}: empty metric")
            if not rep:
                raise Fail(f"{path} line {line}: empty rep")
            key = (workload, param, metric)
            if (key, setting, rep) in seen:
                where = " ".join(x for x in (setting, workload, param, metric) if x)
                raise Fail(f"{path} line {line}: {where} rep {rep} given twice")
            seen.add((key, setting, rep))
            if value == "":
                self.empty += 1
                continue
            try:
                v = float(value)
            except ValueError:
                raise Fail(f"{path} line {line}: value {value!r} is not a number")
            if not math.isfinite(v):
                raise Fail(f"{path} line {line}: value {value!r} is not finite")
            self.values.setdefault(key, {}).setdefault(setting, {})[rep] = v
            self.units.setdefault(key, unit)
        if not self.values:
            raise Fail(f"{path}: no measurements")
        # meta's "param" names the sweep ("groups") or, listed once per value, is the value
        self.param_name = {}
        for w in self.workloads:
            values = {k[1] for k in self.values if k[0] == w}
            values |= {str(x.get("param", "")) for x in self.meta["workloads"] if x["name"] == w} \
                if sum(1 for x in self.meta["workloads"] if x["name"] == w) > 1 else set()
            name = str(self.workloads[w].get("param") or "")
            self.param_name[w] = name if name and name not in values else ""

    def ran(self, workload):
        """Settings with any measurement of WORKLOAD, in meta order."""
        have = {s for k, per in self.values.items() if k[0] == workload for s in per}
        return [s for s in self.settings if s in have]

    @staticmethod
    def load_checks(path):
        text = read_text(path, required=False)
        if text is None:
            return None
        checks = []
        for n, line in enumerate(text.splitlines(), 1):
            if not line.strip() or line.startswith("#"):
                continue
            m = re.fullmatch(r"CHECK (PASS|FAIL) (\S+)(?: (.*))?", line.rstrip())
            if not m:
                raise Fail(f"{path} line {n}: not 'CHECK PASS|FAIL name detail': {line[:60]!r}")
            checks.append((m.group(1), m.group(2), m.group(3) or ""))
        return checks

    def load_hist(self, path):
        """{label: [(le_ns, count)]}, label = setting or 'setting / part'. Tolerant of shapes:
        {setting: buckets}, {setting: {"buckets": ...}}, {setting: {workload: buckets}},
        [{"setting": s, "buckets": ...}], a {"settings"|"histograms": ...} wrapper; buckets =
        [{"le_ns", "count"}], [[le_ns, count]] or the agent's log2 count list."""
        text = read_text(path, required=False)
        if text is None:
            return None
        try:
            data = json.loads(text)
        except ValueError as e:
            raise Fail(f"{path}: not JSON: {e}")
        self.hist_what = ""
        for wrapper in ("settings", "histograms"):
            if isinstance(data, dict) and isinstance(data.get(wrapper), (dict, list)):
                # {"what": ..., "unit": ..., "settings": {...}}: the rest describes the histograms
                self.hist_what = str(data.get("what") or "")
                data = data[wrapper]
                break
        out = {}
        if isinstance(data, list):
            for i, ent in enumerate(data):
                if not isinstance(ent, dict) or "setting" not in ent:
                    raise Fail(f"{path}: entry {i} has no 'setting'")
                label = str(ent["setting"])
                if ent.get("workload"):
                    label += f" / {ent['workload']}"
                self.hist_entry(path, out, label, bucket_field(ent))
        elif isinstance(data, dict):
            for name, v in data.items():
                self.hist_entry(path, out, name, v)
        else:
            raise Fail(f"{path}: expected an object or a list")
        # Label each histogram setting first, whatever the nesting ({workload: {setting: ...}} too).
        named = {}
        for label, buckets in out.items():
            parts = label.split(" / ")
            known = [p for p in parts if p in self.kind]
            if not known:
                raise Fail(f"{path}: unknown setting {parts[0]!r} (meta.json lists {', '.join(self.settings)})")
            named[" / ".join([known[0]] + [p for p in parts if p != known[0]])] = buckets
        order = {s: i for i, s in enumerate(self.settings)}
        return dict(sorted(named.items(), key=lambda kv: order[kv[0].split(" / ")[0]]))

    def hist_entry(self, path, out, label, v):
        buckets = parse_buckets(v)
        if buckets is not None:
            out[label] = buckets
        elif isinstance(v, dict):
            inner = bucket_field(v)
            if inner is not None:
                b = parse_buckets(inner)
                if b is None:
                    raise Fail(f"{path}: {label}: buckets not understood")
                out[label] = b
            else:
                for k, sub in v.items():
                    if isinstance(sub, (list, dict)):
                        self.hist_entry(path, out, f"{label} / {k}", sub)
        elif isinstance(v, list):
            raise Fail(f"{path}: {label}: buckets not understood")
        # scalars next to histograms (units, notes) are not histograms: skipped


def bucket_field(d):
    """The buckets of a histogram object: "buckets", "hist" or "counts" (log2 list)."""
    return next((d[k] for k in ("buckets", "hist", "counts") if k in d), None)


def parse_buckets(v):
    """[(le_ns, count)] ascending, or None when v is not a bucket list."""
    if not isinstance(v, list) or not v:
        return None
    if all(isinstance(x, (int, float)) and not isinstance(x, bool) for x in v):
        return log2_buckets(v)
    out = []
    for b in v:
        if isinstance(b, dict) and "count" in b:
            le = b.get("le_ns", b.get("le"))
        elif isinstance(b, (list, tuple)) and len(b) == 2:
            le, b = b[0], {"count": b[1]}
        else:
            return None
        le = math.inf if le in (None, "inf", "+Inf", "+inf") else le
        if not isinstance(le, (int, float)) or not isinstance(b["count"], (int, float)):
            return None
        out.append((le, b["count"]))
    return sorted(out, key=lambda x: x[0])


# --------------------------------------------------------------------------- numbers

def pick_baseline(lab, wanted):
    if wanted:
        if wanted not in lab.kind:
            raise Fail(f"--baseline {wanted}: not a setting of this run ({', '.join(lab.settings)})")
        return wanted
    return eevdf_of(lab) or lab.settings[0]


def eevdf_of(lab):
    if "eevdf" in lab.kind:
        return "eevdf"
    return next((s for s in lab.settings if lab.kind[s] == "eevdf"), None)


def metric_order(metric):
    names = list(METRIC_LABEL)
    if metric in METRIC_LABEL:
        return (names.index(metric), metric)
    return (len(names) + (1 if metric.startswith("wl:") else 0), metric)


class Cell:
    def __init__(self, values):
        self.values = values
        self.n = len(values)
        self.mean, self.sd = mean_sd(values)


def compare(lab, baseline, eevdf):
    """[row]: row = dict workload, param, metric, unit, better, base, cells {setting: Cell} with
    .gain (vs base, %), .ratio (to base), .ratio_eevdf, .sig (vs base), .sig_eevdf. base is the
    baseline, or where the baseline did not run the workload, the first setting that did."""
    rows = []
    wl_order = list(lab.workloads)
    ran = {w: lab.ran(w) for w in lab.workloads}
    for key in sorted(lab.values, key=lambda k: (wl_order.index(k[0]), param_key(k[1]), metric_order(k[2]))):
        workload, param, metric = key
        base = baseline if baseline in ran[workload] else ran[workload][0]
        per = lab.values[key]
        better = lab.workloads[workload].get("better", "lower") if metric == "value" else None
        cells = {s: Cell([per[s][r] for r in sorted(per[s], key=param_key)]) if s in per else Cell([])
                 for s in lab.settings}
        for s, c in cells.items():
            for ref, suffix in ((base, ""), (eevdf, "_eevdf")):
                b = cells.get(ref) if ref else None
                ok = b is not None and c.mean is not None and b.mean is not None
                setattr(c, "ratio" + suffix, c.mean / b.mean if ok and b.mean else None)
                setattr(c, "sig" + suffix, ok and s != ref and
                        significant((c.n, c.mean, c.sd), (b.n, b.mean, b.sd)))
            c.gain = gain_pct(c.mean, cells[base].mean, better)
        rows.append({"workload": workload, "param": param, "metric": metric, "base": base,
                     "unit": lab.units[key], "better": better, "cells": cells})
    return rows


def param_label(lab, workload, param):
    pname = lab.param_name[workload]
    return f"{pname} {param}" if pname and param != "" else param


# --------------------------------------------------------------------------- clock

def clock_kind(clock):
    c = (clock or "").lower()
    if "icount" in c or "virtual" in c:
        return "icount"
    if any(k in c for k in ("host", "real", "native", "bare")):
        return "host"
    if c == "mt" or any(k in c for k in ("tcg", "multi", "thread")):
        return "mttcg"
    return "unknown"


CLOCK_NOTE = {
    "icount": ("**What this clock can show.** QEMU's virtual clock (`-icount shift=0,sleep=off`: one guest "
               "instruction = 1 ns) serialises all vCPUs on one host thread, so guest time advances with the "
               "instructions of every vCPU together; idle CPUs and parallel speed-up are not modelled. "
               "Timings here measure CPU work and placement (scheduler overhead, migrations, IPIs), **not "
               "parallel latency or throughput**, and are reproducible despite host load. Placement counts "
               "(migrations, cross-node moves, the scheduler's own counters) are the primary evidence and come "
               "first; timings are shown beside them as ratios within this run. See " + GUIDE + "."),
    "mttcg": ("**What this clock can show.** Multi-threaded TCG: the vCPU threads share the host's cores, so "
              "timings are dominated by emulation cost (IPIs, waking idle vCPUs): spreads of 5-33% on hackbench "
              "and up to 119% on latency tests, rankings can invert. Placement counts are the primary evidence "
              "and come first; timings only reveal large regressions. See " + GUIDE + "."),
    "host": ("**What this clock can show.** A real sched_ext host: timings are the primary evidence and come "
             "first; placement counts explain them. See " + GUIDE + "."),
    "unknown": ("**What this clock can show.** The clock mode is not one this renderer knows; treat timings with "
                "care and read the placement counts first. See " + GUIDE + "."),
}


def short_commit(c):
    """The measured source in a few words: the scheduler's source commit when the lab
    recorded one, else the commit's short sha."""
    if isinstance(c, dict):
        if c.get("scheduler_source"):
            return f"scheduler source {c['scheduler_source']}"
        if c.get("sha"):
            return f"commit {str(c['sha'])[:12]}"
    return f"commit {describe(c)}"


def short_topology(t):
    if isinstance(t, dict) and t.get("name"):
        return f"{t['name']}" + (f", {t['cpus']} CPUs" if t.get("cpus") else "")
    return describe(t)


def describe(v):
    """A meta value (string, number, dict, list) as one readable line."""
    if v is None or v == "" or v == {} or v == []:
        return "not recorded"
    if isinstance(v, dict):
        return "; ".join(f"{k} {describe(x)}" for k, x in v.items())
    if isinstance(v, list):
        return ", ".join(describe(x) for x in v)
    return str(v)


# --------------------------------------------------------------------------- SVG

def esc(s):
    return html.escape(str(s), quote=True)


def nice_ticks(lo, hi, n=5):
    if hi <= lo:
        hi = lo + 1
    raw = (hi - lo) / n
    mag = 10 ** math.floor(math.log10(raw))
    step = next(m * mag for m in (1, 2, 2.5, 5, 10) if m * mag >= raw)
    start = math.floor(lo / step) * step
    ticks = []
    t = start
    while t <= hi + step * 1e-9:
        ticks.append(round(t, 10))
        t += step
    if ticks[-1] < hi:
        ticks.append(round(t, 10))
    return ticks


def tick_text(t):
    if t == int(t) and abs(t) < 1e15:
        return f"{int(t)}"
    return f"{t:g}"


class Svg:
    """A plot area with axes; series are drawn by the callers inside <g class="series">."""

    def __init__(self, title, xlabel, ylabel, width=640, height=380, left=70, right=170):
        self.w, self.h = width, height
        self.l, self.r, self.t, self.b = left, width - right, 40, height - 55
        self.parts = [
            f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
            f'viewBox="0 0 {width} {height}" font-family="sans-serif" font-size="12">',
            f'<rect x="0" y="0" width="{width}" height="{height}" fill="white"/>',
            f'<text x="{width / 2:.1f}" y="22" text-anchor="middle" font-size="14" '
            f'font-weight="bold">{esc(title)}</text>',
            f'<text x="{(self.l + self.r) / 2:.1f}" y="{height - 12}" text-anchor="middle">{esc(xlabel)}</text>',
            f'<text x="16" y="{(self.t + self.b) / 2:.1f}" text-anchor="middle" '
            f'transform="rotate(-90 16 {(self.t + self.b) / 2:.1f})">{esc(ylabel)}</text>',
        ]
        self.legend_n = 0

    def yaxis(self, ymax):
        self.ticks = nice_ticks(0, ymax if ymax > 0 else 1)
        self.ymax = self.ticks[-1]
        for t in self.ticks:
            y = self.y(t)
            self.parts.append(f'<line x1="{self.l}" y1="{y:.1f}" x2="{self.r}" y2="{y:.1f}" stroke="#ddd"/>')
            self.parts.append(f'<text x="{self.l - 6}" y="{y + 4:.1f}" text-anchor="end">{tick_text(t)}</text>')
        self.parts.append(f'<line x1="{self.l}" y1="{self.t}" x2="{self.l}" y2="{self.b}" stroke="black"/>')
        self.parts.append(f'<line x1="{self.l}" y1="{self.b}" x2="{self.r}" y2="{self.b}" stroke="black"/>')

    def y(self, v):
        return self.b - (self.b - self.t) * (v / self.ymax if self.ymax else 0)

    def xtick(self, x, text):
        self.parts.append(f'<line x1="{x:.1f}" y1="{self.b}" x2="{x:.1f}" y2="{self.b + 4}" stroke="black"/>')
        self.parts.append(f'<text x="{x:.1f}" y="{self.b + 17}" text-anchor="middle">{esc(text)}</text>')

    def legend(self, name, look, swatch="line"):
        x, y = self.r + 15, self.t + 8 + 18 * self.legend_n
        self.legend_n += 1
        if swatch == "line":
            mark = (f'<line x1="{x}" y1="{y}" x2="{x + 18}" y2="{y}" stroke="{look.color}" '
                    f'stroke-width="2"{dash_attr(look)}/>' + marker_svg(look, x + 9, y))
        else:
            mark = (f'<rect x="{x}" y="{y - 6}" width="18" height="12" fill="{look.color}"'
                    + (f' stroke="black"{dash_attr(look)}' if look.dash else "") + "/>")
        return mark + f'<text x="{x + 24}" y="{y + 4}">{esc(name)}</text>'

    def text(self):
        return "\n".join(self.parts + ["</svg>"]) + "\n"


class Look(tuple):
    """How a setting is drawn: (colour, dash pattern or "", marker "circle" or "square")."""
    __slots__ = ()

    def __new__(cls, color, dash, marker):
        return super().__new__(cls, (color, dash, marker))

    color = property(lambda self: self[0])
    dash = property(lambda self: self[1])
    marker = property(lambda self: self[2])


# Beyond the palette's eight colours (the lab has twelve settings) the colours come round
# again, dashed and with square markers, so that no two settings of a report look alike.
DASHES = [("", "circle"), ("6 3", "square"), ("2 2", "circle")]


def colors_of(settings):
    """One look per setting, the same in every plot of a report, no two alike."""
    return {s: Look(PALETTE[i % len(PALETTE)], *DASHES[(i // len(PALETTE)) % len(DASHES)])
            for i, s in enumerate(settings)}


def marker_svg(look, x, y):
    if look.marker == "square":
        return f'<rect x="{x - 3:.1f}" y="{y - 3:.1f}" width="6" height="6" fill="{look.color}"/>'
    return f'<circle cx="{x:.1f}" cy="{y:.1f}" r="3" fill="{look.color}"/>'


def dash_attr(look):
    return f' stroke-dasharray="{look.dash}"' if look.dash else ""


def x_ticks(xs, log_x):
    """Tick positions: every x when few, else decades (log) or round numbers (linear)."""
    if len(xs) <= 10:
        return xs
    lo, hi = xs[0], xs[-1]
    if log_x:
        decades = [10.0 ** k for k in range(math.ceil(math.log10(lo)), math.floor(math.log10(hi)) + 1)]
        if len(decades) >= 2:
            return decades
        return xs[::math.ceil(len(xs) / 8)]
    return [t for t in nice_ticks(lo, hi, 8) if lo <= t <= hi]


def svg_lines(title, xlabel, ylabel, series, colors, log_x=False, yfrac=False):
    """series: {name: [(x, y, sd or None)]}, drawn in the order and colours of colors {name: colour};
    one <g class="series"> per name with data."""
    pts = [p for s in series.values() for p in s]
    xs = [p[0] for p in pts]
    xf = (lambda v: math.log2(v)) if log_x else (lambda v: v)
    x0, x1 = min(map(xf, xs)), max(map(xf, xs))
    if x1 == x0:
        x0, x1 = x0 - 1, x1 + 1
    svg = Svg(title, xlabel, ylabel)
    svg.yaxis(1.0 if yfrac else max(p[1] + (p[2] or 0) for p in pts) * 1.05)
    X = lambda v: svg.l + 10 + (svg.r - svg.l - 20) * (xf(v) - x0) / (x1 - x0)
    for v in x_ticks(sorted(set(xs)), log_x):
        svg.xtick(X(v), fmt_latency(v) if log_x else tick_text(v))
    for s, c in colors.items():
        if s not in series:
            continue
        ps = sorted(series[s])
        g = [f'<g class="series" data-setting="{esc(s)}">']
        g.append('<polyline fill="none" stroke="{}" stroke-width="2"{} points="{}"/>'.format(
            c.color, dash_attr(c), " ".join(f"{X(x):.1f},{svg.y(y):.1f}" for x, y, _ in ps)))
        for x, y, sd in ps:
            if sd:
                g.append(f'<line x1="{X(x):.1f}" y1="{svg.y(y - sd):.1f}" x2="{X(x):.1f}" '
                         f'y2="{svg.y(y + sd):.1f}" stroke="{c.color}"/>')
            g.append(marker_svg(c, X(x), svg.y(y)))
        g.append(svg.legend(s, c))
        g.append("</g>")
        svg.parts.extend(g)
    return svg.text()


def svg_bars(title, ylabel, groups, series, colors):
    """groups: [label]; series: {setting: [(total, sd, part) or None per group]}: a bar per
    setting in each group, its lower `part` (cross-node moves) drawn darker."""
    present = [s for s in colors if s in series]
    vals = [v for s in present for v in series[s] if v]
    width = max(640, 170 + 70 + len(groups) * (len(present) * 18 + 24))
    svg = Svg(title, "", ylabel, width=width)
    svg.yaxis(max((v[0] + (v[1] or 0)) for v in vals) * 1.05 if vals else 1)
    gw = (svg.r - svg.l) / max(1, len(groups))
    bw = min(40, (gw - 16) / max(1, len(present)))
    for gi, label in enumerate(groups):
        svg.xtick(svg.l + gw * (gi + 0.5), label)
    for si, s in enumerate(present):
        c = colors[s]
        g = [f'<g class="series" data-setting="{esc(s)}">']
        for gi, v in enumerate(series[s]):
            x = svg.l + gw * gi + (gw - bw * len(present)) / 2 + bw * si
            if v is None:
                g.append(f'<text x="{x + bw / 2:.1f}" y="{svg.b - 4}" text-anchor="middle" '
                         f'font-size="10">n/a</text>')
                continue
            total, sd, part = v
            outline = f' stroke="black"{dash_attr(c)}' if c.dash else ""
            g.append(f'<rect x="{x:.1f}" y="{svg.y(total):.1f}" width="{bw - 2:.1f}" '
                     f'height="{svg.b - svg.y(total):.1f}" fill="{c.color}" fill-opacity="0.55"{outline}/>')
            if part is not None:
                g.append(f'<rect x="{x:.1f}" y="{svg.y(part):.1f}" width="{bw - 2:.1f}" '
                         f'height="{svg.b - svg.y(part):.1f}" fill="{c.color}"/>')
            xm = x + (bw - 2) / 2
            if sd:
                g.append(f'<line x1="{xm:.1f}" y1="{svg.y(max(0, total - sd)):.1f}" x2="{xm:.1f}" '
                         f'y2="{svg.y(total + sd):.1f}" stroke="black"/>')
            top = svg.y(total + (sd or 0))
            g.append(f'<text x="{xm:.1f}" y="{top - 3:.1f}" font-size="10" '
                     f'text-anchor="middle">{total:.0f}</text>')
        g.append(svg.legend(s, c, swatch="rect"))
        g.append("</g>")
        svg.parts.extend(g)
    return svg.text()


def fmt_latency(ns):
    if ns == math.inf:
        return "inf"
    for div, unit in ((1e9, "s"), (1e6, "ms"), (1e3, "µs")):
        if ns >= div:
            return f"{ns / div:g} {unit}"
    return f"{ns:g} ns"


def slug(s):
    return re.sub(r"[^A-Za-z0-9_.-]+", "-", s).strip("-") or "x"


# --------------------------------------------------------------------------- output

def write_plots(lab, rows, plots_dir):
    """Writes the SVGs; returns [(caption, file name)]."""
    plots_dir.mkdir(parents=True, exist_ok=True)
    made = []
    colors = colors_of(lab.settings)
    for workload in lab.workloads:
        wrows = [r for r in rows if r["workload"] == workload]
        params = sorted({r["param"] for r in wrows}, key=param_key)
        pname = lab.param_name[workload] or "parameter"
        prim = [r for r in wrows if r["metric"] == "value"]
        numeric = all(param_key(p)[0] == 0 for p in params)
        if len(prim) > 1 and numeric:
            series = {s: [(float(r["param"]), r["cells"][s].mean, r["cells"][s].sd)
                          for r in prim if r["cells"][s].mean is not None] for s in lab.settings}
            series = {s: v for s, v in series.items() if v}
            if series:
                unit = prim[0]["unit"]
                name = f"sweep-{slug(workload)}.svg"
                (plots_dir / name).write_text(svg_lines(
                    f"{workload}: {unit} vs {pname} ({prim[0]['better']} is better)", pname,
                    f"Amean {unit}", series, colors))
                made.append((f"{workload}: mean ± stddev vs {pname}", name))
        migr = {r["param"]: r for r in wrows if r["metric"] == "migrations"}
        cross = {r["param"]: r for r in wrows if r["metric"] == "cross_node_migrations"}
        if migr:
            groups = [p for p in params if p in migr]
            series = {}
            for s in lab.settings:
                vals = []
                for p in groups:
                    c = migr[p]["cells"][s]
                    x = cross[p]["cells"][s].mean if p in cross else None
                    vals.append(None if c.mean is None else (c.mean, c.sd, x))
                if any(vals):
                    series[s] = vals
            name = f"migrations-{slug(workload)}.svg"
            labels = [param_label(lab, workload, p) or workload for p in groups]
            (plots_dir / name).write_text(svg_bars(
                f"{workload}: task migrations per run (dark part: cross-node)", "migrations (Amean ± sd)",
                labels, series, colors))
            made.append((f"{workload}: task migrations per setting (darker part: cross-node)", name))
    if lab.hist:
        series = {}
        for label, buckets in lab.hist.items():
            total = sum(c for _, c in buckets)
            if not total:
                continue
            cum, pts = 0, []
            for le, c in buckets:
                cum += c
                if le != math.inf and le > 0:
                    pts.append((le, cum / total, None))
            series[label] = pts
        # Only the span where some setting's curve rises: from the last bucket before any
        # decision to the first that holds them all.
        pts = [p for v in series.values() for p in v]
        lo = max([p[0] for p in pts if p[1] == 0] or [0])
        lo = min([lo] + [v[0][0] for v in series.values() if v and v[0][1] > 0])
        hi = max(min([p[0] for p in v if p[1] >= 1] or [v[-1][0]]) for v in series.values() if v) if pts else 0
        series = {k: [p for p in v if lo <= p[0] <= hi] for k, v in series.items()}
        series = {k: v for k, v in series.items() if v}
        if series:
            (plots_dir / "latency.svg").write_text(svg_lines(
                "agent decision latency: cumulative fraction", "latency (bucket upper bound, log scale)",
                "fraction of decisions", series,
                {label: colors[label.split(" / ")[0]] for label in lab.hist}, log_x=True, yfrac=True))
            made.append(("decision latency, cumulative distribution per setting", "latency.svg"))
    return made


def write_csv(path, rows, baseline, eevdf):
    """report.csv, or report.csv.gz where the run keeps it compressed (lablib.write_text)."""
    f = io.StringIO()
    w = csv.writer(f, lineterminator="\n")
    w.writerow(["workload", "param", "metric", "unit", "better", "setting", "n", "amean", "stddev",
                "baseline", "delta_pct", "ratio_to_baseline", "significant",
                "ratio_to_eevdf", "significant_vs_eevdf", "values"])
    for r in rows:
        baseline = r["base"]
        for s, c in r["cells"].items():
            g = lambda v, spec: "" if v is None else format(v, spec)
            w.writerow([r["workload"], r["param"], r["metric"], r["unit"], r["better"] or "", s, c.n,
                        g(c.mean, ".6g"), g(c.sd, ".6g"), baseline, g(c.gain, ".2f"), g(c.ratio, ".4f"),
                        "" if s == baseline or c.n < 2 or r["cells"][baseline].n < 2
                        else ("yes" if c.sig else "no"),
                        g(c.ratio_eevdf, ".4f") if eevdf else "",
                        "" if not eevdf or s == eevdf or c.n < 2 or r["cells"][eevdf].n < 2
                        else ("yes" if c.sig_eevdf else "no"),
                        ";".join(f"{v:g}" for v in c.values)])
    lablib.write_text(path, f.getvalue())


def mm_block(wrows, columns):
    """mmtests compare layout: Amean/Stddev lines per metric and param, a column per setting
    with the % difference to the row's base and * around it when significant."""
    names = [r["metric"] + (f" {r['param']}" if r["param"] != "" else "") for r in wrows]
    col, lab_w = 24, 7 + max(27, max(len(n) + 1 for n in names))
    L = [" " * lab_w + "".join(f"{s[:col - 2]:>{col}}" for s in columns)]
    for r, name in zip(wrows, names):
        dec = 1 if r["unit"] == "count" else 4
        baseline = r["base"]
        am, sd = f"{'Amean':<7}{name:<{lab_w - 7}}", f"{'Stddev':<7}{name:<{lab_w - 7}}"
        for s in columns:
            c = r["cells"][s]
            if c.mean is None:
                am += f"{'—':>{col}}"
                sd += f"{'—':>{col}}"
                continue
            mark = "*" if c.sig else " "
            pct = "" if c.gain is None else f"({c.gain:6.2f}%)" if s == baseline else f"{c.gain:8.2f}%"
            am += f"{c.mean:>13.{dec}f} {mark}{pct:>9}{mark}" if pct else f"{c.mean:>13.{dec}f}{'':>11}"
            sd += f"{c.sd:>13.{dec}f}{'':>11}"
        L += [am, sd]
    return L


def block_legend(lab, workload, wrows):
    w = lab.workloads[workload]
    metrics = []
    for r in wrows:
        if r["metric"] not in metrics:
            metrics.append(r["metric"])
    parts = [f"`value` = {w.get('unit') or 'the workload metric'} ({w.get('better', 'lower')} is better)"
             if m == "value" else f"`{m}` = {METRIC_LABEL.get(m) or m}" for m in metrics]
    if lab.param_name[workload]:
        parts.append(f"the number after a metric is {lab.param_name[workload]}")
    elif any(r["param"] for r in wrows):
        parts.append("the word after a metric is the run's parameter")
    return "; ".join(parts) + "."


def ordered_metric_groups(rows, host_timing_first):
    timing = [r for r in rows if r["metric"] == "value"]
    place = [r for r in rows if r["metric"] in PLACEMENT]
    other = [r for r in rows if r["metric"] != "value" and r["metric"] not in PLACEMENT]
    return (timing + place + other) if host_timing_first else (place + timing + other)


def ratio_table(lab, rows, metric, eevdf, header):
    others = [s for s in lab.settings if s != eevdf]
    L = [f"| workload | unit | " + " | ".join(others) + " |", "|---|---|" + "---|" * len(others)]
    for r in rows:
        if r["metric"] != metric:
            continue
        label = r["workload"] + (f" ({param_label(lab, r['workload'], r['param'])})" if r["param"] else "")
        cells = []
        for s in others:
            c = r["cells"][s]
            cells.append("—" if c.ratio_eevdf is None else f"{c.ratio_eevdf:.2f}{'*' if c.sig_eevdf else ''}")
        L.append(f"| {label} | {r['unit']} | " + " | ".join(cells) + " |")
    return L if len(L) > 2 else []


def hist_table(lab):
    L = ["| setting | samples | p50 | p99 |", "|---|---|---|---|"]
    for label, buckets in lab.hist.items():
        total = sum(c for _, c in buckets)
        p50, p99 = percentile_le(buckets, 50), percentile_le(buckets, 99)
        f = lambda v: "—" if v is None else "above the last bucket" if v == math.inf else f"≤ {fmt_latency(v)}"
        L.append(f"| {label} | {total:g} | {f(p50)} | {f(p99)} |")
    return L


def checks_lines(checks):
    if checks is None:
        return ["No `checks.txt` in this output directory: the run recorded no seed checks."]
    if not checks:
        return ["`checks.txt` lists no checks."]
    npass = sum(1 for st, _, _ in checks if st == "PASS")
    L = [f"**{npass} of {len(checks)} checks passed.**" + ("" if npass == len(checks) else
         " Failed: " + ", ".join(f"`{n}`" for st, n, _ in checks if st != "PASS") + "."), "",
         "| | check | detail |", "|---|---|---|"]
    for st, name, detail in checks:
        L.append(f"| {'PASS' if st == 'PASS' else '**FAIL**'} | `{name}` | {detail.replace('|', '/')} |")
    return L


def write_md(path, lab, rows, baseline, eevdf, plots):
    m = lab.meta
    kind = clock_kind(m.get("clock"))
    host_first = kind == "host"
    L = [f"# Benchmark lab report: {m.get('date') or 'undated'}", "",
         "Generated by `tools/lab/report.py` from this directory's `meta.json`, `results.csv`, "
         "`checks.txt` and `latency_hist.json`; numbers per setting and rep are in `results.csv`, "
         "the summary below also in `report.csv`.", "", CLOCK_NOTE[kind], "",
         "## Seed checks", ""]
    command = m.get("command")
    if isinstance(command, list):   # an argv rather than a shell line
        command = shlex.join(str(c) for c in command)
    L += checks_lines(lab.checks) + [""]
    effects = lab.outdir / "seed-effects.md"
    if effects.is_file():
        L += [f"## {EFFECTS}", "",
              "Each seed's effect as the real kernels show it in the same VM (seeds 1, 2 and 4 from "
              "`tools/oracle/run --json`, the kernels' own placements and newly-idle balances: "
              "`kernels.json`; seed 3 from EEVDF with and without DELAY_DEQUEUE in this run), beside "
              "ours, per rep: the figures the seed checks above decide on.", "",
              effects.read_text().rstrip("\n"), ""]
    L += ["## Command", "", "```sh", str(command or "(not recorded)"), "```", ""]
    if m.get("vm_command"):
        L += ["which ran one VM:", "", "```sh", describe(m["vm_command"]), "```", ""]
    L += ["## Setup", ""]
    clock = describe(m.get("clock")) + (f" — {m['clock_detail']}" if m.get("clock_detail") else "")
    for k, v in (("Date", m.get("date")), ("Commit", m.get("commit")), ("Kernel", m.get("kernel")),
                 ("Clock", clock), ("Topology", m.get("topology")), ("Host", m.get("host")),
                 ("Profile", m.get("profile")), ("Repetitions", m.get("reps")), ("Sizes", m.get("sizes"))):
        if v not in (None, "") or k in ("Date", "Commit", "Kernel", "Clock", "Topology", "Host"):
            L.append(f"- **{k}:** {describe(v)}")
    fx = m.get("kernel_effects")
    if fx:
        L.append(f"- **The seeds' kernel effects:** `{describe(fx.get('command') or '(command not recorded)')}`, "
                 f"{short_commit({'sha': fx['commit']}) if fx.get('commit') else 'commit not recorded'}, "
                 f"{describe(fx.get('reps'))} reps of {describe(fx.get('secs'))} s"
                 + "".join(f", {w} {n} s" for w, n in (fx.get("secs_for") or {}).items())
                 + " (`kernels.json`)")
    failed = m.get("failed_blocks") or []
    if m.get("guest_finished") is False:
        L.append(f"- **The guest did not finish** ({describe(m.get('vm_outcome'))}): the tables hold what "
                 "it printed before it stopped.")
    for why in m.get("vm_reruns") or []:
        L.append(f"- **The plan ran twice:** {describe(why)}. The tables hold the second run only.")
    if failed:
        L.append("- **Blocks left out of the means:** " + "; ".join(
            describe(b) if not isinstance(b, dict) else
            f"{b.get('setting', '?')} rep {b.get('rep', '?')}: {b.get('status', '?')}" for b in failed))
    L.append("- **Settings:**")
    for s in m["settings"]:
        args = s.get("args")
        args = " ".join(args) if isinstance(args, list) else (args or "")
        L.append(f"  - `{s['name']}` ({s.get('kind', '?')})" + (f": `{args}`" if args else ""))
    L.append("- **Workloads:**")
    for name, w in lab.workloads.items():
        params = sorted({k[1] for k in lab.values if k[0] == name and k[1] != ""}, key=param_key)
        extra = (f", {lab.param_name[name] or 'parameter'} {', '.join(params)}" if params else "")
        cmd = f": `{w['command']}`" if w.get("command") else ""
        L.append(f"  - `{name}` ({w.get('unit', '?')}, {w.get('better', 'lower')} is better{extra}){cmd}")
    L += ["", "## Results per workload", "",
          f"Amean and sample Stddev over the reps per setting, in mmtests' compare layout, for the settings "
          f"that ran the workload. Baseline column: **{baseline}** (where it did not run a workload, the "
          "first setting that did, named above the table). For the workload's own metric the % is the gain over the baseline as mmtests "
          "prints it (positive = better); for counts it is the plain change (positive = more). `*` around "
          "it marks a significant difference: the bands mean ± 1.96·stddev of the setting and the baseline "
          "do not overlap (none possible with fewer than 2 values). `—` = no value recorded for that "
          "setting (a missing cell). "
          + ("Timings come first (real host)." if host_first else
             "Placement counts come first: they are the evidence under this clock.")]
    if lab.empty:
        L.append(f"{lab.empty} row(s) of `results.csv` carried no value (a measurement that produced none); "
                 "they are left out of the means.")
    L.append("")
    for workload in lab.workloads:
        allrows = ordered_metric_groups([r for r in rows if r["workload"] == workload], host_first)
        if not allrows:
            L += [f"### {workload}", "", "No measurements recorded.", ""]
            continue
        columns = lab.ran(workload)
        wrows = [r for r in allrows if not r["metric"].startswith("wl:")]
        counters = [r for r in allrows if r["metric"].startswith("wl:")
                    and any(r["cells"][s].mean for s in columns)]
        ns = sorted({r["cells"][s].n for r in (wrows or allrows) for s in columns} - {0})
        notes = [block_legend(lab, workload, wrows or allrows), f"Reps per cell: {', '.join(map(str, ns))}."]
        if allrows[0]["base"] != baseline:
            notes.append(f"**Baseline here: {allrows[0]['base']}** ({baseline} did not run this workload).")
        absent = [s for s in lab.settings if s not in columns]
        if absent:
            notes.append(f"Not run: {', '.join(absent)}.")
        L += [f"### {workload}", "", " ".join(notes), ""]
        if wrows:
            L += ["```"] + mm_block(wrows, columns) + ["```", ""]
        if counters:
            have = [s for s in columns if any(r["cells"][s].mean is not None for r in counters)]
            L += [f"<details><summary>scx_wakelab counters over the run ({len(counters)} not zero)</summary>",
                  "", "```"] + mm_block(counters, have) + ["```", "", "</details>", ""]
    L += ["## Ratios to EEVDF", ""]
    if eevdf is None:
        L += ["This run has no EEVDF setting (kind `eevdf`), so there are no ratios to it.", ""]
    else:
        L += [f"Mean of each setting / mean of `{eevdf}`; `*` = significant against `{eevdf}` by the rule "
              "above. Below 1 means fewer migrations, or less time for a lower-is-better metric.", ""]
        tables = [(ratio_table(lab, rows, "migrations", eevdf, "task migrations"), "Task migrations"),
                  (ratio_table(lab, rows, "cross_node_migrations", eevdf, "cross-node migrations"),
                   "Cross-node migrations"),
                  (ratio_table(lab, rows, "value", eevdf, "workload metric"), "Workload metric")]
        if host_first:
            tables = tables[2:] + tables[:2]
        for t, title in tables:
            if t:
                L += [f"{title}:", ""] + t + [""]
    L += ["## Decision latency", ""]
    if not lab.hist:
        L += ["No `latency_hist.json` in this output directory.", ""]
    else:
        L += [(f"{lab.hist_what.rstrip('.')}. " if lab.hist_what else
               "The agent's decision latency per setting, from its histogram. ")
              + "A percentile is the upper bound of the bucket that holds it, in this run's clock.", ""]
        L += hist_table(lab) + [""]
        if any(f == "latency.svg" for _, f in plots):
            L += ["![decision latency](plots/latency.svg)", ""]
    L += ["## Plots", ""]
    for caption, f in plots:
        if f != "latency.svg":
            L += [f"![{caption}](plots/{f})", ""]
    if not plots:
        L += ["No sweep or migration data to plot.", ""]
    # Written by hand for this run (tools/lab/run --section, --note), kept in meta.json so
    # that re-rendering keeps them
    for text in m.get("sections") or []:
        L += [str(text).rstrip("\n"), ""]
    if m.get("notes"):
        L += ["## Notes", ""] + [f"- {describe(n)}" for n in m["notes"]] + [""]
    Path(path).write_text("\n".join(L) + "\n")


# --------------------------------------------------------------------------- README

def readme_section(lab, rows, eevdf, readme, outdir):
    m = lab.meta
    link = os.path.relpath(outdir / "report.md", Path(readme).resolve().parent)
    kind = clock_kind(m.get("clock"))
    L = [BEGIN, "<!-- generated by tools/lab/report.py --readme from the lab results; "
         "edit the results, not this section -->", "",
         f"Lab results of {m.get('date') or 'an undated run'} ({short_commit(m.get('commit'))}; "
         f"clock {describe(m.get('clock'))}; topology {short_topology(m.get('topology'))}). "
         f"Full report with plots: [{link}]({link}).", ""]
    if lab.checks is not None:
        npass = sum(1 for st, _, _ in lab.checks if st == "PASS")
        # "open": a direction the lab reports but does not gate on (detail says why)
        is_open = [n for st, n, d in lab.checks if st != "PASS" and d.startswith("[open")]
        failed = [n for st, n, d in lab.checks if st != "PASS" and n not in is_open]
        L += [f"Seed checks: {npass} of {len(lab.checks)} passed"
              + (f"; failed: {', '.join(failed)}" if failed else "")
              + (f"; open (reported, not gating): {', '.join(is_open)}" if is_open else "") + ".", ""]
    if eevdf is None:
        L += ["(This run has no EEVDF setting, so there are no ratios to it.)"]
    else:
        L += [f"Ratio of each setting's mean to EEVDF's (`*` = significant by the mmtests rule: the "
              "mean ± 1.96·stddev bands do not overlap; a numeric sweep is summarised by the geometric "
              "mean of its ratios, `*` when every point is significant), "
              + ("timings first: a real sched_ext host." if kind == "host" else
                 "placement counts first: in the VM they are the evidence, timings only ratios within the run."), ""]
        # The columns: settings run on everything EEVDF ran (the main comparison); seed flips
        # run on a few workloads only and speak through the checks and the full report.
        theirs = {(r["workload"], r["param"]) for r in rows if r["cells"][eevdf].mean is not None}
        others = [s for s in lab.settings if s != eevdf and
                  theirs <= {(r["workload"], r["param"]) for r in rows if r["cells"][s].mean is not None}]
        others = others or [s for s in lab.settings if s != eevdf]
        L += ["| workload | metric | " + " | ".join(others) + " |", "|---|---|" + "---|" * len(others)]
        metrics = ["migrations", "value"] if kind != "host" else ["value", "migrations"]
        for metric in metrics:
            for workload in lab.workloads:
                wr = [r for r in rows if r["workload"] == workload and r["metric"] == metric
                      and r["cells"][eevdf].mean is not None]
                if not wr:
                    continue
                params = [r["param"] for r in wr]
                sweep = len(wr) > 1 and all(param_key(p)[0] == 0 for p in params)
                groups = [(f"{workload} ({lab.param_name[workload] or 'parameter'} {', '.join(params)}, "
                           "geometric mean)", wr)] if sweep else \
                    [(workload + (f" ({param_label(lab, workload, r['param'])})" if r["param"] else ""), [r])
                     for r in wr]
                what = "migrations" if metric == "migrations" else f"{wr[0]['unit']}, {wr[0]['better']} is better"
                for label, group in groups:
                    cells = []
                    for s in others:
                        rs = [r["cells"][s].ratio_eevdf for r in group]
                        if any(x is None or x <= 0 for x in rs):
                            cells.append("—")
                            continue
                        gm = math.exp(sum(math.log(x) for x in rs) / len(rs))
                        sig = all(r["cells"][s].sig_eevdf for r in group)
                        cells.append(f"{gm:.2f}{'*' if sig else ''}")
                    L.append(f"| {label} | {what} | " + " | ".join(cells) + " |")
    L += ["", END]
    return "\n".join(L)


def update_readme(readme, section):
    path = Path(readme)
    text = read_text(path, what="--readme names the README to update")
    nb, ne = text.count(BEGIN), text.count(END)
    if nb == 1 and ne == 1 and text.index(BEGIN) < text.index(END):
        a, b = text.index(BEGIN), text.index(END) + len(END)
        new = text[:a] + section + text[b:]
    elif nb == 0 and ne == 0:
        m = re.search(r"^## Performance[ \t]*$", text, re.M)
        if not m:
            raise Fail(f"{readme}: no {BEGIN} ... {END} markers and no '## Performance' section to put them in")
        nxt = re.search(r"^## ", text[m.end():], re.M)
        cut = m.end() + nxt.start() if nxt else len(text)
        head = text[:cut].rstrip("\n")
        new = head + "\n\n" + section + "\n" + ("\n" + text[cut:] if nxt else "")
    else:
        raise Fail(f"{readme}: expected one {BEGIN} followed by one {END}, found {nb} and {ne}")
    if new != text:
        path.write_text(new)
    return new != text


# --------------------------------------------------------------------------- archive

# The sections of report.md an archived run keeps: what was checked, how, on what, and the
# headline ratios; the per-workload tables and plots stay with the newest run only.
EFFECTS = "The seeds on the real kernels beside ours"
SUMMARY_SECTIONS = ("Seed checks", EFFECTS, "Command", "Setup", "Ratios to EEVDF", "Decision latency")
ARCHIVE_KEEPS = {"summary.md", "meta.json", "checks.txt", "kernels.json", "seed-effects.md"}


def summary_of(report_md):
    """The report's title and its SUMMARY_SECTIONS, in order, as markdown."""
    out, keep = [], True
    for line in report_md.splitlines():
        if line.startswith("## "):
            keep = line[3:].strip() in SUMMARY_SECTIONS
        elif line.startswith("# "):
            keep = True
        if keep:
            out.append(line)
    return "\n".join(out).rstrip() + "\n"


def archive(outdir):
    report = outdir / "report.md"
    summary = outdir / "summary.md"
    if not summary.exists():
        if not report.exists():
            raise Fail(f"{outdir}: no report.md to summarise (render it first)")
        text = summary_of(report.read_text())
        if not any(f"## {s}" in text for s in SUMMARY_SECTIONS):
            raise Fail(f"{report}: none of the sections {', '.join(SUMMARY_SECTIONS)} found")
        summary.write_text(text)
    removed = 0
    for p in sorted(outdir.iterdir()):
        if p.name in ARCHIVE_KEEPS:
            continue
        if p.is_dir():
            shutil.rmtree(p)
        else:
            p.unlink()
        removed += 1
    return f"{outdir}: kept {', '.join(sorted(ARCHIVE_KEEPS))}; removed {removed} other entries"


# --------------------------------------------------------------------------- main

def main(argv):
    ap = runlib.Parser(prog="tools/lab/report.py", name=PROG, description=__doc__,
                       formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("outdir", help="the lab's output directory")
    ap.add_argument("--baseline", metavar="SETTING",
                    help="the column differences are taken against (default: eevdf if present, else the first)")
    ap.add_argument("--readme", metavar="README.md",
                    help=f"regenerate the section between {BEGIN} and {END} of this file")
    ap.add_argument("--compress", action="store_true",
                    help="before committing a run under docs/: gzip its bulky files (" +
                         ", ".join(lablib.STORED_COMPRESSED) + ") in place, without names or time "
                         "stamps; every reader takes NAME.gz for NAME, and rendering again keeps them so")
    ap.add_argument("--archive", action="store_true",
                    help="reduce an older run to its summary once a newer full run is committed: "
                         "write summary.md (" + ", ".join(s.lower() for s in SUMMARY_SECTIONS) +
                         " of its report.md) and delete everything but " + ", ".join(sorted(ARCHIVE_KEEPS)))
    a = ap.parse_args(argv)
    outdir = Path(a.outdir)
    if not outdir.is_dir():
        raise Fail(f"{outdir}: not a directory")
    if a.archive:
        print(f"{PROG}: {archive(outdir)}", file=sys.stderr)
        return 0
    if a.compress:
        try:
            done = lablib.compress_outdir(outdir)
        except OSError as e:
            raise Fail(f"compressing in {outdir}: {e.strerror or e}")
        print(f"{PROG}: {outdir}: " + (f"compressed {', '.join(done)}" if done else "nothing left to compress"),
              file=sys.stderr)
        return 0
    lab = Lab(outdir)
    baseline = pick_baseline(lab, a.baseline)
    eevdf = eevdf_of(lab)
    rows = compare(lab, baseline, eevdf)
    try:
        plots = write_plots(lab, rows, outdir / "plots")
        write_csv(outdir / "report.csv", rows, baseline, eevdf)
        write_md(outdir / "report.md", lab, rows, baseline, eevdf, plots)
    except OSError as e:
        raise Fail(f"writing into {outdir}: {e.strerror}: {e.filename}")
    msg = f"wrote {outdir / 'report.md'}, {lablib.stored(outdir / 'report.csv').name} and {len(plots)} plot(s)"
    if a.readme:
        changed = update_readme(a.readme, readme_section(lab, rows, eevdf, a.readme, outdir.resolve()))
        msg += f"; {a.readme} {'updated' if changed else 'unchanged'}"
    print(f"{PROG}: {msg}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    try:
        sys.exit(main(sys.argv[1:]))
    except Fail as e:
        print(f"{PROG}: {e}", file=sys.stderr)
        sys.exit(1)
    except KeyboardInterrupt:
        sys.exit(130)
    except Exception as e:  # a renderer bug or an input shape not foreseen: still one line
        where = traceback.extract_tb(e.__traceback__)[-1]
        print(f"{PROG}: internal error {type(e).__name__}: {e} (report.py line {where.lineno}, "
              f"{where.name})", file=sys.stderr)
        sys.exit(1)
