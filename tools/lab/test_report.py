#!/usr/bin/env python3
"""Tests of tools/lab/report.py over synthetic lab output directories made here.

    python3 tools/lab/test_report.py        # ends with "N passed, N failed" (tools/test counts it)

The renderer runs as a subprocess, as a user would run it, so exit status and stderr are
what is tested. Standard library only.
"""
import csv
import gzip
import json
import re
import shutil
import subprocess
import sys
import tempfile
import unittest
import xml.etree.ElementTree as ET
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent.parent
REPORT = HERE / "report.py"
sys.path.insert(0, str(HERE))
import mmstats  # noqa: E402
import report  # noqa: E402

SETTINGS = [{"name": "eevdf", "kind": "eevdf", "args": ""},
            {"name": "wakelab", "kind": "wakelab", "args": "--preset mainline"},
            {"name": "rustland", "kind": "peer", "args": ""}]
WORKLOADS = [{"name": "hackbench-pipe", "unit": "s", "better": "lower", "param": "groups"},
             {"name": "tbench", "unit": "MB/s", "better": "higher", "param": ""}]


def make_outdir(root, rows, settings=SETTINGS, workloads=WORKLOADS, checks=None, hist=None, **meta):
    """rows: (setting, workload, param, metric, unit, [values by rep])."""
    d = Path(root)
    d.mkdir(parents=True, exist_ok=True)
    m = {"date": "2026-12-02 15:00 UTC", "commit": "abc123def456 (test)", "command": "tools/lab/run --quick",
         "kernel": "7.2.13+deb14-amd64", "clock": "icount",
         "topology": {"nodes": 2, "cores_per_node": 2, "threads_per_core": 2}, "host": "test host",
         "settings": settings, "workloads": workloads}
    m.update(meta)
    (d / "meta.json").write_text(json.dumps(m))
    with open(d / "results.csv", "w", newline="") as f:
        w = csv.writer(f, lineterminator="\n")
        w.writerow(["setting", "workload", "param", "rep", "metric", "unit", "value"])
        for setting, workload, param, metric, unit, values in rows:
            for rep, v in enumerate(values, 1):
                w.writerow([setting, workload, param, rep, metric, unit, v])
    if checks is not None:
        (d / "checks.txt").write_text("".join(line + "\n" for line in checks))
    if hist is not None:
        (d / "latency_hist.json").write_text(json.dumps(hist))
    return d


def run(*args):
    p = subprocess.run([sys.executable, str(REPORT), *map(str, args)], capture_output=True, text=True)
    return p.returncode, p.stdout, p.stderr


def report_csv(d):
    with open(Path(d) / "report.csv") as f:
        return {(r["workload"], r["param"], r["metric"], r["setting"]): r for r in csv.DictReader(f)}


def amean_line(md, metric, param=""):
    """The Amean line of METRIC (and PARAM) in the mmtests block of the report."""
    name = metric + (f" {param}" if param else "")
    for line in md.splitlines():
        if re.match(rf"Amean\s+{re.escape(name)}\s", line):
            return line
    raise AssertionError(f"no Amean line for {name!r}")


class Base(unittest.TestCase):
    def setUp(self):
        self.tmp = Path(tempfile.mkdtemp(prefix="test-report-"))

    def tearDown(self):
        shutil.rmtree(self.tmp, ignore_errors=True)

    def render(self, d, *extra):
        rc, out, err = run(d, *extra)
        self.assertEqual(rc, 0, err)
        return (Path(d) / "report.md").read_text(), report_csv(d)

    def assert_one_line_error(self, args, *fragments):
        rc, out, err = run(*args)
        self.assertEqual(rc, 1, f"exit status, stderr {err!r}")
        self.assertNotIn("Traceback", err)
        lines = err.strip().splitlines()
        self.assertEqual(len(lines), 1, err)
        self.assertTrue(lines[0].startswith("report: "), lines[0])
        for frag in fragments:
            self.assertIn(frag, lines[0])


class Statistics(Base):
    def test_significant_difference_is_marked(self):
        d = make_outdir(self.tmp / "o", [
            ("eevdf", "tbench", "", "value", "MB/s", [100.0, 101.0, 99.0]),
            ("wakelab", "tbench", "", "value", "MB/s", [150.0, 151.0, 149.0]),
            ("rustland", "tbench", "", "value", "MB/s", [100.5, 101.5, 99.5])])
        md, rows = self.render(d)
        wl, rl = rows[("tbench", "", "value", "wakelab")], rows[("tbench", "", "value", "rustland")]
        self.assertEqual(wl["significant"], "yes")
        self.assertEqual(rl["significant"], "no")  # 0.5 apart, bands of ±1.96 overlap
        line = amean_line(md, "value")
        self.assertIn("*   50.00%*", line)          # higher is better: +50% is a gain
        self.assertIn("    0.50% ", line)           # rustland: no marker
        self.assertEqual(line.count("*"), 2)

    def test_marker_follows_the_band_rule_at_its_edge(self):
        # means 10 and 10 + d, both sd 1: significant iff d > 1.96 * 2
        for d_mean, want in ((3.9, "no"), (4.0, "yes")):
            sd_vals = lambda m: [m - 1, m, m + 1]          # sample sd exactly 1
            out = make_outdir(self.tmp / f"e{d_mean}", [
                ("eevdf", "tbench", "", "value", "MB/s", sd_vals(10.0)),
                ("wakelab", "tbench", "", "value", "MB/s", sd_vals(10.0 + d_mean))])
            _, rows = self.render(out)
            self.assertEqual(rows[("tbench", "", "value", "wakelab")]["significant"], want, d_mean)

    def test_fewer_than_two_values_never_marked(self):
        d = make_outdir(self.tmp / "o", [
            ("eevdf", "tbench", "", "value", "MB/s", [100.0]),
            ("wakelab", "tbench", "", "value", "MB/s", [500.0]),
            ("eevdf", "tbench", "", "migrations", "count", [10, 10]),
            ("wakelab", "tbench", "", "migrations", "count", [900])])
        md, rows = self.render(d)
        for metric in ("value", "migrations"):
            self.assertEqual(rows[("tbench", "", metric, "wakelab")]["significant"], "")
            self.assertNotIn("*", amean_line(md, metric))
        self.assertAlmostEqual(float(rows[("tbench", "", "value", "wakelab")]["delta_pct"]), 400.0)

    def test_delta_pct_sign_follows_better_and_counts_show_plain_change(self):
        d = make_outdir(self.tmp / "o", [
            ("eevdf", "hackbench-pipe", "4", "value", "s", [1.0, 1.0]),
            ("wakelab", "hackbench-pipe", "4", "value", "s", [1.2, 1.2]),
            ("eevdf", "tbench", "", "value", "MB/s", [100.0, 100.0]),
            ("wakelab", "tbench", "", "value", "MB/s", [120.0, 120.0]),
            ("eevdf", "tbench", "", "migrations", "count", [50, 50]),
            ("wakelab", "tbench", "", "migrations", "count", [60, 60])])
        md, rows = self.render(d)
        hb = rows[("hackbench-pipe", "4", "value", "wakelab")]
        tb = rows[("tbench", "", "value", "wakelab")]
        mg = rows[("tbench", "", "migrations", "wakelab")]
        self.assertAlmostEqual(float(hb["delta_pct"]), -20.0)   # slower: a loss
        self.assertAlmostEqual(float(tb["delta_pct"]), 20.0)    # more throughput: a gain
        self.assertAlmostEqual(float(mg["delta_pct"]), 20.0)    # 20% more migrations
        self.assertAlmostEqual(float(hb["ratio_to_eevdf"]), 1.2)
        self.assertAlmostEqual(float(tb["ratio_to_eevdf"]), 1.2)
        # zero spread on both sides and different means: the bands cannot overlap
        self.assertEqual(hb["significant"], "yes")
        self.assertIn("(  0.00%)", amean_line(md, "value", "4"))
        self.assertNotIn("-0.00", md)

    def test_baseline_option_changes_delta_but_not_ratio_to_eevdf(self):
        d = make_outdir(self.tmp / "o", [
            ("eevdf", "tbench", "", "value", "MB/s", [100.0, 100.0]),
            ("wakelab", "tbench", "", "value", "MB/s", [200.0, 200.0]),
            ("rustland", "tbench", "", "value", "MB/s", [50.0, 50.0])])
        _, rows = self.render(d, "--baseline", "wakelab")
        rl = rows[("tbench", "", "value", "rustland")]
        self.assertEqual(rl["baseline"], "wakelab")
        self.assertAlmostEqual(float(rl["delta_pct"]), -75.0)
        self.assertAlmostEqual(float(rl["ratio_to_baseline"]), 0.25)
        self.assertAlmostEqual(float(rl["ratio_to_eevdf"]), 0.5)

    def test_default_baseline_without_eevdf_is_the_first_setting(self):
        settings = [{"name": "a", "kind": "wakelab"}, {"name": "b", "kind": "peer"}]
        d = make_outdir(self.tmp / "o", [("a", "tbench", "", "value", "MB/s", [10, 10]),
                                         ("b", "tbench", "", "value", "MB/s", [20, 20])], settings=settings)
        md, rows = self.render(d)
        self.assertEqual(rows[("tbench", "", "value", "b")]["baseline"], "a")
        self.assertEqual(rows[("tbench", "", "value", "b")]["ratio_to_eevdf"], "")
        self.assertIn("no EEVDF setting", md)

    def test_missing_cell_shown_as_missing(self):
        d = make_outdir(self.tmp / "o", [
            ("eevdf", "tbench", "", "value", "MB/s", [100.0, 100.0]),
            ("wakelab", "tbench", "", "value", "MB/s", [120.0, 120.0]),
            ("eevdf", "tbench", "", "migrations", "count", [5, 6]),
            ("rustland", "tbench", "", "migrations", "count", [7, 8])])   # rustland: no value
        md, rows = self.render(d)
        rl = rows[("tbench", "", "value", "rustland")]
        self.assertEqual((rl["n"], rl["amean"], rl["ratio_to_eevdf"]), ("0", "", ""))
        cells = amean_line(md, "value").split()
        self.assertEqual(cells[-1], "—")                 # the rustland column
        self.assertEqual(amean_line(md, "migrations").split()[-3], "—")   # wakelab's migrations
        self.assertRegex(md, r"\| tbench \| MB/s \| 1\.20\* \| — \|")

    def test_settings_that_did_not_run_a_workload_and_the_fallback_baseline(self):
        d = make_outdir(self.tmp / "o", [
            ("eevdf", "tbench", "", "value", "MB/s", [100.0, 100.0]),
            ("wakelab", "tbench", "", "value", "MB/s", [120.0, 120.0]),
            # eevdf did not run hackbench: wakelab is the base there
            ("wakelab", "hackbench-pipe", "4", "value", "s", [2.0, 2.0]),
            ("rustland", "hackbench-pipe", "4", "value", "s", [1.0, 1.0])])
        md, rows = self.render(d)
        tb = md.split("### tbench")[1]
        self.assertIn("Not run: rustland.", tb)
        self.assertNotIn("rustland", tb.split("```")[1])      # no empty column for it
        hb = md.split("### hackbench-pipe")[1].split("###")[0]
        self.assertIn("**Baseline here: wakelab** (eevdf did not run this workload)", hb)
        self.assertIn("Not run: eevdf.", hb)
        r = rows[("hackbench-pipe", "4", "value", "rustland")]
        self.assertEqual(r["baseline"], "wakelab")
        self.assertAlmostEqual(float(r["delta_pct"]), 50.0)
        self.assertEqual(r["ratio_to_eevdf"], "")

    def test_mmstats_rules(self):
        self.assertEqual(mmstats.mean_sd([]), (None, None))
        self.assertEqual(mmstats.mean_sd([3.0]), (3.0, 0.0))
        m, sd = mmstats.mean_sd([1.0, 2.0, 3.0])
        self.assertEqual((m, sd), (2.0, 1.0))
        self.assertFalse(mmstats.significant((1, 1.0, 0.0), (5, 9.0, 0.1)))
        self.assertTrue(mmstats.significant((2, 1.0, 0.0), (2, 1.1, 0.0)))
        self.assertFalse(mmstats.significant((2, 1.0, 0.0), (2, 1.0, 0.0)))
        self.assertEqual(mmstats.gain_pct(None, 1.0, "lower"), None)
        self.assertEqual(mmstats.gain_pct(1.0, 0.0, "lower"), None)
        self.assertEqual(mmstats.percentile_le([(1, 0), (2, 0)], 50), None)
        self.assertEqual(mmstats.percentile_le(mmstats.log2_buckets([0, 4, 0, 1]), 50), 4)


class Layout(Base):
    def test_placement_first_in_vm_timings_first_on_a_host(self):
        rows = [("eevdf", "tbench", "", m, u, [1, 2]) for m, u in (("value", "MB/s"), ("migrations", "count"))]
        for clock, first in (("icount", "migrations"), ("host", "value")):
            d = make_outdir(self.tmp / clock, rows, clock=clock)
            md, _ = self.render(d)
            block = md.split("### tbench")[1]
            order = [m for m in ("value", "migrations") if f"Amean  {m}" in block]
            self.assertEqual(len(order), 2)
            self.assertEqual(sorted(order, key=lambda m: block.index(f"Amean  {m}"))[0], first, clock)
            self.assertIn("What this clock can show", md)
        vm_md = (self.tmp / "icount/report.md").read_text()
        self.assertIn("serialises all vCPUs", vm_md)
        self.assertIn("Placement counts", vm_md)
        self.assertIn("timings are the primary evidence", (self.tmp / "host/report.md").read_text())

    def test_run_facts_and_checks_are_shown(self):
        d = make_outdir(self.tmp / "o", [("eevdf", "tbench", "", "value", "MB/s", [1, 2])],
                        checks=["CHECK PASS seed1_xnode wakelab 9 vs eevdf 60 cross-node moves",
                                "CHECK FAIL seed3_affine affine rate 40% not below 35%"],
                        command="tools/lab/run --reps 3 --topology 2x2x2")
        md, _ = self.render(d)
        for text in ("tools/lab/run --reps 3 --topology 2x2x2", "7.2.13+deb14-amd64", "abc123def456",
                     "nodes 2; cores_per_node 2; threads_per_core 2", "test host", "2026-12-02 15:00 UTC",
                     "**1 of 2 checks passed.**", "Failed: `seed3_affine`", "| **FAIL** | `seed3_affine` |"):
            self.assertIn(text, md)

    def test_the_seeds_kernel_effects_follow_the_checks_and_stay_archived(self):
        d = make_outdir(self.tmp / "o", [("eevdf", "tbench", "", "value", "MB/s", [1, 2])],
                        checks=["CHECK PASS seed4_x against the kernel in this VM: ok"],
                        kernel_effects={"command": "tools/oracle/run --reps 3 --json k.json",
                                        "commit": "0123456789abcdef", "reps": 3, "secs": 6,
                                        "secs_for": {"sched-pipe-pairs": 40}})
        table = "| seed | quantity | the kernel's, per rep | ours, per rep |\n|---|---|---|---|\n| 4 | q | k | o |\n"
        (Path(d) / "seed-effects.md").write_text(table)
        (Path(d) / "kernels.json").write_text("{}\n")
        md, _ = self.render(d)
        at = md.index("## The seeds on the real kernels beside ours")
        self.assertLess(md.index("## Seed checks"), at)
        self.assertLess(at, md.index("## Command"))
        self.assertIn(table, md)
        self.assertIn("- **The seeds' kernel effects:** `tools/oracle/run --reps 3 --json k.json`, commit "
                      "0123456789ab, 3 reps of 6 s, sched-pipe-pairs 40 s (`kernels.json`)", md)
        rc, out, err = run(d, "--archive")
        self.assertEqual(rc, 0, err)
        self.assertIn("## The seeds on the real kernels beside ours", (Path(d) / "summary.md").read_text())
        self.assertEqual(sorted(p.name for p in Path(d).iterdir()),
                         ["checks.txt", "kernels.json", "meta.json", "seed-effects.md", "summary.md"])

    def test_sections_and_notes_close_the_report(self):
        d = make_outdir(self.tmp / "o", [("eevdf", "tbench", "", "value", "MB/s", [1, 2])],
                        sections=["## Why it stands there\n\nBecause.\n"], notes=["first", "second"])
        md, _ = self.render(d)
        self.assertIn("\n## Why it stands there\n\nBecause.\n\n## Notes\n\n- first\n- second\n", md)
        self.assertTrue(md.rstrip().endswith("- second"))
        md, _ = self.render(make_outdir(self.tmp / "p", [("eevdf", "tbench", "", "value", "MB/s", [1, 2])]))
        self.assertNotIn("## Notes", md)

    def test_latency_percentiles_and_shapes(self):
        buckets = [{"le_ns": 1000, "count": 50}, {"le_ns": 2000, "count": 49}, {"le_ns": 4000, "count": 1}]
        shapes = {
            "by_setting": {"wakelab": buckets},
            "list": [{"setting": "wakelab", "buckets": buckets}],
            "wrapped": {"settings": {"wakelab": {"buckets": [[b["le_ns"], b["count"]] for b in buckets]}}},
        }
        for name, hist in shapes.items():
            d = make_outdir(self.tmp / name, [("eevdf", "tbench", "", "value", "MB/s", [1, 2])], hist=hist)
            md, _ = self.render(d)
            self.assertIn("| wakelab | 100 | ≤ 1 µs | ≤ 2 µs |", md, name)
            self.assertTrue((d / "plots/latency.svg").is_file(), name)
        # the agent's own log2 list: bucket i holds values up to 2 << i ns
        d = make_outdir(self.tmp / "log2", [("eevdf", "tbench", "", "value", "MB/s", [1, 2])],
                        hist={"wakelab": [0, 0, 0, 0, 0, 0, 0, 0, 0, 10]})
        md, _ = self.render(d)
        self.assertIn("| wakelab | 10 | ≤ 1.024 µs | ≤ 1.024 µs |", md)


class RunnerShapes(Base):
    """The shapes tools/lab/run writes: a workload listed once per sweep value (param = the
    value), clock "mt", scx_wakelab counters as wl:* metrics, the histogram wrapped with a
    description and log2 "counts" per setting."""

    def test_runner_output(self):
        workloads = [{"name": "hackbench-process-pipes", "unit": "s", "better": "lower", "param": g,
                      "command": "hackbench -p -g GROUPS -l LOOPS"} for g in ("1", "2", "4")]
        workloads += [{"name": "seed1-qperf", "unit": "us", "better": "lower", "param": p, "command": "qperf"}
                      for p in ("plain", "rps+hogs")]
        rows = []
        for s, f in (("eevdf", 1.0), ("wakelab", 0.8), ("rustland", 0.9)):
            for g in ("1", "2", "4"):
                rows.append((s, "hackbench-process-pipes", g, "value", "s", [f * int(g), f * int(g) + 0.01]))
        for s, plain, hogs in (("eevdf", 10, 60), ("wakelab", 9, 50), ("rustland", 11, 70)):
            rows.append((s, "seed1-qperf", "plain", "cross_node_migrations", "count", [plain, plain + 1]))
            rows.append((s, "seed1-qperf", "rps+hogs", "cross_node_migrations", "count", [hogs, hogs + 2]))
            rows.append((s, "seed1-qperf", "plain", "migrations", "count", [plain * 2, plain * 2]))
            rows.append((s, "seed1-qperf", "rps+hogs", "migrations", "count", [hogs * 2, hogs * 2]))
        rows.append(("wakelab", "seed1-qperf", "plain", "wl:sync_pull_by_irq_waker", "count", [40, 42]))
        rows.append(("wakelab", "seed1-qperf", "plain", "wl:ring_full_fallbacks", "count", [0, 0]))
        hist = {"what": "scx_wakelab decision latency: BPF enqueue to the task running", "unit": "ns",
                "bucket_upper_ns": "2**(i+1)",
                "settings": {"wakelab": {"reps": [1, 2], "counts": [0, 0, 0, 0, 0, 0, 0, 0, 0, 6, 4],
                                         "total": 10, "p50_ns": 1024, "p99_ns": 2048}}}
        d = make_outdir(self.tmp / "o", rows, workloads=workloads, hist=hist, clock="mt",
                        clock_detail="QEMU multi-threaded TCG", profile="quick", reps=2,
                        failed_blocks=[{"setting": "rustland", "rep": 3, "status": "crashed"}])
        md, csvrows = self.render(d)
        self.assertIn("Multi-threaded TCG", md)
        self.assertIn("mt — QEMU multi-threaded TCG", md)
        self.assertIn("rustland rep 3: crashed", md)
        self.assertIn("`hackbench-process-pipes` (s, lower is better, parameter 1, 2, 4)", md)
        self.assertIn("| wakelab | 10 | ≤ 1.024 µs | ≤ 2.048 µs |", md)
        self.assertIn("scx_wakelab decision latency: BPF enqueue to the task running.", md)
        self.assertIn("Amean  value 4 ", md)
        self.assertIn("Amean  cross_node_migrations rps+hogs ", md)
        counters = md.split("<details>")[1]
        self.assertIn("wl:sync_pull_by_irq_waker plain", counters)
        self.assertNotIn("wl:ring_full_fallbacks", md)            # zero everywhere: left out
        self.assertNotIn("wl:", md.split("<details>")[0].split("### seed1-qperf")[1])
        self.assertTrue((d / "plots/sweep-hackbench-process-pipes.svg").is_file())
        self.assertFalse((d / "plots/sweep-seed1-qperf.svg").exists())   # categorical: bars only
        bars = ET.parse(d / "plots/migrations-seed1-qperf.svg").getroot()
        labels = [t.text for t in bars.iter() if t.tag.endswith("text")]
        self.assertIn("plain", labels)
        self.assertIn("rps+hogs", labels)
        self.assertAlmostEqual(float(csvrows[("seed1-qperf", "rps+hogs", "cross_node_migrations", "wakelab")]
                                     ["ratio_to_eevdf"]), 51 / 61, places=4)


class Plots(Base):
    def sweep_dir(self):
        rows = []
        for groups, base in (("1", 1.0), ("2", 1.5), ("4", 2.4), ("8", 4.5)):
            for s, f in (("eevdf", 1.0), ("wakelab", 0.8), ("rustland", 0.9)):
                rows.append((s, "hackbench-pipe", groups, "value", "s", [base * f, base * f * 1.02]))
                rows.append((s, "hackbench-pipe", groups, "migrations", "count", [int(100 * base * f), 90]))
                rows.append((s, "hackbench-pipe", groups, "cross_node_migrations", "count", [10, 12]))
        return make_outdir(self.tmp / "o", rows, hist={"wakelab": [{"le_ns": 1000, "count": 5}],
                                                      "rustland": [{"le_ns": 2000, "count": 5}]})

    def series(self, path):
        root = ET.parse(path).getroot()      # raises on malformed XML
        self.assertTrue(root.tag.endswith("svg"))
        return [g for g in root.iter() if g.tag.endswith("}g") and g.get("class") == "series"]

    def test_svgs_are_well_formed_with_one_series_per_setting(self):
        d = self.sweep_dir()
        md, _ = self.render(d)
        names = sorted(p.name for p in (d / "plots").iterdir())
        self.assertEqual(names, ["latency.svg", "migrations-hackbench-pipe.svg", "sweep-hackbench-pipe.svg"])
        for n in names:
            self.assertIn(f"(plots/{n})", md)
        sweep = self.series(d / "plots/sweep-hackbench-pipe.svg")
        self.assertEqual([g.get("data-setting") for g in sweep], ["eevdf", "wakelab", "rustland"])
        for g in sweep:
            line = [e for e in g if e.tag.endswith("polyline")]
            self.assertEqual(len(line), 1)
            self.assertEqual(len(line[0].get("points").split()), 4)   # one point per groups value
        bars = self.series(d / "plots/migrations-hackbench-pipe.svg")
        self.assertEqual([g.get("data-setting") for g in bars], ["eevdf", "wakelab", "rustland"])
        for g in bars:   # per groups value: the migrations bar and its cross-node part
            self.assertEqual(len([e for e in g if e.tag.endswith("rect")]), 2 * 4 + 1)   # + legend swatch
        lat = self.series(d / "plots/latency.svg")
        self.assertEqual([g.get("data-setting") for g in lat], ["wakelab", "rustland"])
        # a setting keeps its colour from plot to plot
        line_colour = lambda g: next(e for e in g if e.tag.endswith("polyline")).get("stroke")
        bar_colour = lambda g: next(e for e in g if e.tag.endswith("rect")).get("fill")
        self.assertEqual(line_colour(sweep[1]), bar_colour(bars[1]))
        self.assertEqual(line_colour(sweep[1]), line_colour(lat[0]))
        self.assertEqual(len({line_colour(g) for g in sweep}), 3)

    def test_sweep_points_are_placed_by_value(self):
        d = self.sweep_dir()
        self.render(d)
        g = self.series(d / "plots/sweep-hackbench-pipe.svg")[0]
        pts = [tuple(map(float, p.split(","))) for p in
               next(e for e in g if e.tag.endswith("polyline")).get("points").split()]
        xs, ys = [p[0] for p in pts], [p[1] for p in pts]
        self.assertEqual(xs, sorted(xs))                 # groups ascending left to right
        self.assertEqual(ys, sorted(ys, reverse=True))   # larger time = higher up = smaller y
        # x linear in groups: the gap 4 -> 8 is four times the gap 1 -> 2
        self.assertAlmostEqual((xs[3] - xs[2]) / (xs[1] - xs[0]), 4.0, places=1)


class BadInput(Base):
    def good_rows(self):
        return [("eevdf", "tbench", "", "value", "MB/s", [1, 2]), ("wakelab", "tbench", "", "value", "MB/s", [1, 2])]

    def test_missing_files(self):
        self.assert_one_line_error([self.tmp / "nope"], "not a directory")
        d = make_outdir(self.tmp / "o", self.good_rows())
        (d / "results.csv").unlink()
        self.assert_one_line_error([d], "results.csv", "no such file")
        d = make_outdir(self.tmp / "p", self.good_rows())
        (d / "meta.json").unlink()
        self.assert_one_line_error([d], "meta.json", "no such file")

    def append(self, d, text, name="results.csv"):
        with open(d / name, "a") as f:
            f.write(text)

    def test_bad_csv_rows(self):
        cases = [("wakelab,tbench,,3,value,MB/s\n", "line 6", "6 fields"),
                 ("wakelab,tbench,,3,value,MB/s,fast\n", "line 6", "not a number"),
                 ("wakelab,tbench,,2,value,MB/s,3\n", "line 6", "given twice"),
                 ("scx_nope,tbench,,1,value,MB/s,3\n", "line 6", "unknown setting 'scx_nope'"),
                 ("wakelab,lat_ctx,,1,value,us,3\n", "line 6", "unknown workload 'lat_ctx'")]
        for i, (row, *frags) in enumerate(cases):
            d = make_outdir(self.tmp / f"c{i}", self.good_rows())
            self.append(d, row)
            self.assert_one_line_error([d], "results.csv", *frags)
        d = make_outdir(self.tmp / "hdr", self.good_rows())
        (d / "results.csv").write_text("setting,workload,value\n")
        self.assert_one_line_error([d], "header")

    def test_bad_meta_checks_hist_and_options(self):
        d = make_outdir(self.tmp / "m", self.good_rows())
        (d / "meta.json").write_text("{not json")
        self.assert_one_line_error([d], "meta.json", "not JSON")
        d = make_outdir(self.tmp / "s", self.good_rows(), settings=[])
        self.assert_one_line_error([d], "'settings' must be a non-empty list")
        d = make_outdir(self.tmp / "c", self.good_rows(), checks=["CHECK MAYBE x y"])
        self.assert_one_line_error([d], "checks.txt line 1")
        d = make_outdir(self.tmp / "h", self.good_rows(), hist={"scx_nope": [{"le_ns": 1, "count": 1}]})
        self.assert_one_line_error([d], "latency_hist.json", "unknown setting 'scx_nope'")
        d = make_outdir(self.tmp / "b", self.good_rows())
        self.assert_one_line_error([d, "--baseline", "bpfland"], "--baseline bpfland")
        self.assert_one_line_error([d, "--readme", self.tmp / "missing.md"], "missing.md")
        rc, _, err = run()
        self.assertEqual(rc, 2)
        self.assertEqual(len(err.strip().splitlines()), 1, err)

    def test_empty_value_is_a_missing_measurement_not_an_error(self):
        d = make_outdir(self.tmp / "e", self.good_rows())
        self.append(d, "wakelab,tbench,,3,value,MB/s,\n")
        md, rows = self.render(d)
        self.assertEqual(rows[("tbench", "", "value", "wakelab")]["n"], "2")
        self.assertIn("1 row(s) of `results.csv` carried no value", md)


class Archive(Base):
    def test_archive_keeps_the_summary_and_drops_the_bulk(self):
        d = make_outdir(self.tmp / "run", [
            ("eevdf", "tbench", "", "value", "MB/s", [100.0, 101.0, 99.0]),
            ("wakelab", "tbench", "", "value", "MB/s", [150.0, 151.0, 149.0])],
            checks=["CHECK PASS seed1 ok"])
        self.render(d)
        (Path(d) / "raw.txt").write_text("WAKELAB-START\n")
        full = (Path(d) / "report.md").read_text()
        rc, out, err = run(d, "--archive")
        self.assertEqual(rc, 0, err)
        self.assertEqual(sorted(p.name for p in Path(d).iterdir()),
                         ["checks.txt", "meta.json", "summary.md"])
        summary = (Path(d) / "summary.md").read_text()
        self.assertIn("## Seed checks", summary)
        self.assertIn("## Command", summary)
        self.assertNotIn("## Results per workload", summary)
        self.assertNotIn("## Plots", summary)
        self.assertLess(len(summary), len(full))
        # again: nothing left to remove, the summary stays
        rc, out, err = run(d, "--archive")
        self.assertEqual(rc, 0, err)
        self.assertEqual((Path(d) / "summary.md").read_text(), summary)

    def test_archive_without_a_report_is_one_line(self):
        d = self.tmp / "empty"
        d.mkdir()
        self.assert_one_line_error([d, "--archive"], "no report.md")


class Compressed(Base):
    """A run committed under docs/ keeps results.csv, latency_hist.json and report.csv as
    NAME.gz (--compress); rendering it gives the same report and keeps that form."""

    def outdir(self, name):
        return make_outdir(self.tmp / name, [
            ("eevdf", "tbench", "", "value", "MB/s", [100.0, 101.0, 99.0]),
            ("wakelab", "tbench", "", "value", "MB/s", [150.0, 151.0, 149.0]),
            ("eevdf", "hackbench-pipe", "8", "migrations", "count", [10, 12])],
            checks=["CHECK PASS seed1 ok"], hist={"wakelab": [{"le_ns": 1000, "count": 5}]})

    def files(self, d):
        return sorted(str(p.relative_to(d)) for p in Path(d).rglob("*") if p.is_file())

    def test_a_compressed_run_renders_as_the_plain_one_and_stays_compressed(self):
        plain, packed = self.outdir("plain"), self.outdir("packed")
        self.render(plain)
        self.render(packed)
        rc, _, err = run(packed, "--compress")
        self.assertEqual(rc, 0, err)
        self.assertIn("compressed results.csv, latency_hist.json, report.csv", err)
        self.assertEqual(self.files(packed), [f + ".gz" if f in ("latency_hist.json", "report.csv", "results.csv")
                                              else f for f in self.files(plain)])
        packed_csv = (packed / "report.csv.gz").read_bytes()
        md, _ = self.render(plain)
        rc, _, err = run(packed)
        self.assertEqual(rc, 0, err)
        self.assertEqual((packed / "report.md").read_text(), md)
        self.assertFalse((packed / "report.csv").exists())     # written again in the form it was kept in
        self.assertEqual((packed / "report.csv.gz").read_bytes(), packed_csv)
        self.assertEqual(gzip.decompress(packed_csv), (plain / "report.csv").read_bytes())
        for f in ("plots/latency.svg", "checks.txt", "meta.json"):
            self.assertEqual((packed / f).read_bytes(), (plain / f).read_bytes(), f)
        rc, _, err = run(packed, "--compress")
        self.assertEqual(rc, 0, err)
        self.assertIn("nothing left to compress", err)

    def test_errors_in_a_compressed_file_name_it(self):
        d = self.outdir("bad")
        with open(d / "results.csv", "a") as f:
            f.write("scx_nope,tbench,,1,value,MB/s,3\n")
        rc, _, err = run(d, "--compress")
        self.assertEqual(rc, 0, err)
        self.assert_one_line_error([d], "results.csv.gz line 10", "unknown setting 'scx_nope'")
        (d / "results.csv.gz").write_bytes((d / "results.csv.gz").read_bytes()[:20])
        self.assert_one_line_error([d], "results.csv.gz", "not a whole gzip file")


class Readme(Base):
    BEGIN, END = "<!-- lab:begin -->", "<!-- lab:end -->"

    def outdir(self, wl_value=150.0):
        return make_outdir(self.tmp / "docs/lab/2026-12-02", [
            ("eevdf", "tbench", "", "value", "MB/s", [100.0, 101.0, 99.0]),
            ("wakelab", "tbench", "", "value", "MB/s", [wl_value, wl_value + 1, wl_value - 1]),
            ("rustland", "tbench", "", "value", "MB/s", [100.0, 100.0]),
            ("eevdf", "tbench", "", "migrations", "count", [10, 12]),
            ("wakelab", "tbench", "", "migrations", "count", [30, 32]),
            ("rustland", "tbench", "", "migrations", "count", [11, 12]),
            ("eevdf", "hackbench-pipe", "8", "value", "s", [1.0, 1.0]),
            ("wakelab", "hackbench-pipe", "8", "value", "s", [0.5, 0.5]),
            ("rustland", "hackbench-pipe", "8", "value", "s", [2.0, 2.0]),
            # a seed flip run on one workload only: in the report, not in the README's columns
            ("wakelab+seed1", "hackbench-pipe", "8", "value", "s", [0.4, 0.4])],
            settings=SETTINGS + [{"name": "wakelab+seed1", "kind": "wakelab", "args": "--set x=true"}],
            checks=["CHECK PASS seed1 ok", "CHECK PASS seed2 ok"])

    def split(self, text):
        a, b = text.index(self.BEGIN), text.index(self.END) + len(self.END)
        return text[:a], text[a:b], text[b:]

    def test_real_readme_gets_a_section_and_keeps_everything_else(self):
        readme = self.tmp / "README.md"
        original = (ROOT / "README.md").read_text()
        if self.BEGIN in original:   # already generated once: start from the text without it
            head, _, tail = self.split(original)
            original = head.rstrip("\n") + "\n" + tail.lstrip("\n")
        readme.write_text(original)
        d = self.outdir()
        rc, _, err = run(d, "--readme", readme)
        self.assertEqual(rc, 0, err)
        self.assertIn("updated", err)
        first = readme.read_text()
        head, section, tail = self.split(first)
        # only blank lines around the new section differ from the original
        self.assertEqual(head.rstrip("\n") + "\n" + tail.lstrip("\n"), original)
        self.assertGreater(head.rfind("## Performance"), 0)
        self.assertNotIn("\n## ", head[head.rfind("## Performance"):])   # inside the Performance section
        for cmd in ("\n    tools/run --stats 2\n", "\n    tools/test\n"):
            self.assertEqual(first.count(cmd), original.count(cmd))
            self.assertEqual(original.count(cmd), 1)
        self.assertIn("[docs/lab/2026-12-02/report.md](docs/lab/2026-12-02/report.md)", section)
        self.assertIn("Seed checks: 2 of 2 passed.", section)
        self.assertRegex(section, r"\| tbench \| migrations \| 2\.82\* \| 1\.05 \|")
        self.assertRegex(section, r"\| tbench \| MB/s, higher is better \| 1\.50\* \| 1\.00 \|")
        self.assertRegex(section, r"\| hackbench-pipe \(groups 8\) \| s, lower is better \| 0\.50\* \| 2\.00\* \|")
        self.assertIn("| workload | metric | wakelab | rustland |", section)
        self.assertIn("wakelab+seed1", (d / "report.md").read_text())
        # idempotent: a second run changes nothing
        rc, _, err = run(d, "--readme", readme)
        self.assertEqual(rc, 0, err)
        self.assertIn("unchanged", err)
        self.assertEqual(readme.read_text(), first)
        # new results replace only the section
        d = self.outdir(wl_value=200.0)
        rc, _, err = run(d, "--readme", readme)
        self.assertEqual(rc, 0, err)
        head2, section2, tail2 = self.split(readme.read_text())
        self.assertEqual((head2, tail2), (head, tail))
        self.assertNotEqual(section2, section)
        self.assertRegex(section2, r"\| tbench \| MB/s, higher is better \| 2\.00\* \|")

    def test_existing_markers_replaced_and_unbalanced_markers_refused(self):
        readme = self.tmp / "README.md"
        text = f"# x\n\nintro\n\n{self.BEGIN}\nold numbers\n{self.END}\n\n## After\nkeep\n"
        readme.write_text(text)
        rc, _, err = run(self.outdir(), "--readme", readme)
        self.assertEqual(rc, 0, err)
        new = readme.read_text()
        self.assertNotIn("old numbers", new)
        self.assertTrue(new.startswith("# x\n\nintro\n\n" + self.BEGIN))
        self.assertTrue(new.endswith(self.END + "\n\n## After\nkeep\n"))
        readme.write_text(f"# x\n{self.BEGIN}\nno end\n")
        self.assert_one_line_error([self.outdir(), "--readme", readme], "README.md", "found 1 and 0")
        readme.write_text("# x\nno performance section\n")
        self.assert_one_line_error([self.outdir(), "--readme", readme], "## Performance")


def main():
    suite = unittest.defaultTestLoader.loadTestsFromModule(sys.modules[__name__])
    result = unittest.TextTestRunner(verbosity=2).run(suite)
    failed = len(result.failures) + len(result.errors) + len(result.unexpectedSuccesses)
    # the last line, as tools/test's count() reads it
    print(f"{result.testsRun - failed} passed, {failed} failed")
    return 0 if failed == 0 else 1


class Looks(unittest.TestCase):
    def test_every_setting_of_the_lab_looks_different(self):
        import lablib
        looks = report.colors_of(list(lablib.SETTINGS))
        self.assertEqual(len(set(looks.values())), len(lablib.SETTINGS), looks)

    def test_a_dashed_look_is_dashed_in_lines_and_legend(self):
        looks = report.colors_of([f"s{i}" for i in range(9)])
        svg = report.svg_lines("t", "x", "y", {"s8": [(1, 1.0, None), (2, 2.0, None)]}, looks)
        self.assertIn('stroke-dasharray="6 3"', svg)
        self.assertIn("<rect", svg)  # square markers
        self.assertEqual(looks["s8"].color, looks["s0"].color)
        self.assertNotEqual(looks["s8"], looks["s0"])


if __name__ == "__main__":
    sys.exit(main())
