#!/usr/bin/env python3
"""Tests of the oracle lab's host side without a VM: the parser of the guest's output (both
replays of a workload, kernel and live inputs, told apart by their ORACLE-COMPARE lines), the
tables of docs/oracle.md and the checks, on made-up guest output; and, where a built
scx_wakelab is found, that the parser's patterns match what `oracle compare` prints.
Ends with "N passed, N failed" for tools/test."""
import contextlib
import io
import json
import os
import subprocess
import sys
import tempfile
import unittest
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent.parent


sys.path.insert(0, str(ROOT / "tools" / "lab"))
import runlib  # noqa: E402

run = runlib.load_script(HERE / "run", "oracle_run")


def compare_output(inputs, agree, records, classes, pairs=(), race=True, stand_ins=()):
    """What `oracle compare --inputs INPUTS` prints for one file, in the format of
    src/oracle (FileComparison::render); classes: {label: (records, engine, prev)};
    pairs: [(own, other, differ, own's, other's, same policy)]; stand_ins: [(name, alone,
    alone on left prev, all but it, all but it on left prev)] of `records` and of the left-prev
    class's."""
    def pct(n, of):
        return f"{100 * n / of:.1f}%" if of else "-"
    out = [f"/tmp/oracle-w.jsonl: preset mainline, {inputs} inputs: {agree} of {records} agree "
           f"({pct(agree, records)})"]
    for label, (n, e, p) in classes.items():
        out.append(f"  {inputs} inputs: {label:<23} {n:>7}; engine agrees {e:>7} ({pct(e, n)}), "
                   f"always prev {p:>7} ({pct(p, n)})")
    for own, other, n, o, t, same in pairs:
        out.append(f"  {inputs} inputs: preset {own} against {other}: {n} records decide differently; "
                   f"the kernel's CPU is {own}'s in {o} ({pct(o, n)}), {other}'s in {t}, another in "
                   f"{n - o - t}" + (" (the same policy)" if same else ""))
    left = classes["wake-ups that left prev"][0]
    for name, a, al, b, bl in stand_ins:
        out.append(f"  stand-in {name}: alone {a} of {records} ({pct(a, records)}), left prev {al} of "
                   f"{left} ({pct(al, left)}); all but it {b} ({pct(b, records)}), left prev {bl} "
                   f"({pct(bl, left)})")
    out += ["  per kind: records, agree, share",
            "    wake-up                                         1571    1565   99.6%"]
    if race:
        out.append("  race: a CPU changed during the kernel's decision in 10 of 100 records; agreement "
                   "90.0% there, 95.0% in the other 90; of 6 disagreements, 2 on a CPU that changed")
    out += ["  estimator's error from the kernel's averages (relative to the kernel's value, or to "
            "1024 where it is smaller): field, values, p50, p99",
            "    cpu load_avg           800    0.3%   12.5%",
            "    cpu util_avg           800    0.1%    4.0%",
            "    wakee load_avg          90    0.0%    1.2%",
            "    wakee util_avg           0       -       -"]
    out += ["  seeds (cases; kernel, engine on the same records):",
            "    seed 4: to recent_used_cpu (not prev, not waker's)          40; kernel       3 (7.5%), "
            f"engine       {3 if inputs == 'kernel' else 9} ({'7.5' if inputs == 'kernel' else '22.5'}%)",
            "    seed 4: recent_used_cpu examined (engine's chain), hits       12; kernel       5 (41.7%), "
            "engine       4 (33.3%)",
            "    seed 4: past the target and prev (engine's chain), hits       30; kernel       5 (16.7%), "
            "engine       4 (13.3%)",
            f"agreement: {agree} of {records} ({pct(agree, records)})"]
    return out


def classes(all_, kept, left, forks, execs):
    return {"all placements": all_, "wake-ups kept on prev": kept, "wake-ups that left prev": left,
            "forks": forks, "execs": execs}


KERNEL = classes((100, 95, 80), (78, 77, 78), (20, 17, 0), (2, 1, 2), (0, 0, 0))
LIVE = classes((100, 88, 80), (78, 74, 78), (20, 13, 0), (2, 1, 2), (0, 0, 0))
PAIRS_K = [("mainline", "v5.10.y", 12, 11, 1, False), ("mainline", "v6.12.y", 0, 0, 0, True)]
PAIRS_L = [("mainline", "v5.10.y", 10, 7, 2, False), ("mainline", "v6.12.y", 0, 0, 0, True)]


STAND_INS = [("cpu_load", 90, 12, 93, 17), ("wakee_load", 95, 17, 88, 13)]


def newidle_output(w, pending_balanced=0, release="7.2.13+deb14-amd64", engine=490, on_pulls=15):
    """`oracle newidle`'s account (src/oracle/newidle.rs): 500 balances, 10 with a wake-up
    pending, 4 of them with the other gates open; the engine's replay agrees in `engine`, in
    `on_pulls` of the kernel's 20 pulls."""
    return [f"/tmp/newidle-{w}.jsonl: 500 newly-idle balances ({release})",
            f"  entered with a wake-up pending            10 (2.0%); the other gates open 4, "
            f"balanced {pending_balanced}",
            "  root domain not overloaded               400 (80.0%)",
            "  balanced in a domain                      60 (12.0%)",
            "    first in domain 0                       60",
            "  pulled a task                             20 (4.0%)",
            "    from its LLC                            20",
            "  a fair task arrived, none pulled           1 (0.2%)",
            f"  engine (mainline), whether and whence to pull: agrees {engine} of 500 ({engine / 5:.1f}%), never "
            f"pulling 480 (96.0%); where the kernel pulled {on_pulls} of 20 ({on_pulls * 5:.1f}%); the engine "
            "pulled 25 times"]


def guest_output(workloads=("hackbench-pipes", "tbench"), stand_ins=(), release="7.2.13+deb14-amd64",
                 newidle=("hackbench-pipes", "tbench"), pending_balanced=0, engine=490, on_pulls=15, reps=1):
    out = [f"ORACLE-KERNEL {release}",
           "ORACLE-NOBTF rc=2 lines=1 error: no BTF"]
    for rep, w in [(r, w) for r in range(1, reps + 1) for w in workloads]:
        name = w if reps == 1 else f"{w}@{rep}"
        out += [f"ORACLE-BEGIN {name} record-rc=0", "  record: 100 placements written",
                "ORACLE-COMPARE inputs=kernel"]
        out += compare_output("kernel", 95, 100, KERNEL, PAIRS_K,
                              stand_ins=STAND_INS if w in stand_ins else ())
        out += ["ORACLE-COMPARE inputs=live"]
        out += compare_output("live", 88, 100, LIVE, PAIRS_L, race=False)
        if w in newidle:
            out += ["ORACLE-NEWIDLE"] + newidle_output(w, pending_balanced, release, engine, on_pulls)
        out += [f"ORACLE-END {name}"]
    return "\n".join(out) + "\n"


class Parse(unittest.TestCase):
    def test_both_replays_are_told_apart(self):
        release, res, nobtf = run.parse(guest_output())
        self.assertEqual(release, "7.2.13+deb14-amd64")
        self.assertEqual(nobtf[:2], (2, 1))
        r = res["tbench"]
        # The headline and the CI check stay the kernel inputs', though the live replay's
        # agreement line comes last.
        self.assertEqual((r["agree"], r["records"]), (95, 100))
        self.assertEqual((r["inputs"]["live"]["agree"], r["inputs"]["live"]["records"]), (88, 100))
        self.assertEqual(r["inputs"]["kernel"]["classes"]["wake-ups that left prev"], (20, 17, 0))
        self.assertEqual(r["inputs"]["live"]["classes"]["wake-ups that left prev"], (20, 13, 0))
        self.assertEqual(r["inputs"]["live"]["classes"]["forks"], (2, 1, 2))
        self.assertEqual(r["inputs"]["kernel"]["pairs"][("mainline", "v5.10.y")], (12, 11, 1, 0, False))
        self.assertEqual(r["inputs"]["live"]["pairs"][("mainline", "v5.10.y")], (10, 7, 2, 1, False))
        self.assertEqual(r["inputs"]["live"]["pairs"][("mainline", "v6.12.y")], (0, 0, 0, 0, True))
        # Race and seeds are the kernel inputs' (the live replay's seed line differs).
        self.assertEqual(r["race"], (10, 100, 6, 2))
        self.assertEqual(r["seeds"][4], (40, 3, 3))
        self.assertIn("# oracle compare --inputs live", r["text"])
        self.assertEqual(r["estimates"]["cpu load"], (800, 0.3, 12.5))
        self.assertEqual(r["estimates"]["wakee util"], (0, None, None))
        # The newly-idle account comes last, apart from the live replay's.
        self.assertEqual(r["newidle"], {"balances": 500, "pending": 10, "pending_open": 4,
                                        "pending_balanced": 0, "not_overloaded": 400,
                                        "balanced": 60, "pulled": 20, "engine_agrees": 490,
                                        "replayed": 500, "never_pull": 480, "engine_on_pulls": 15,
                                        "replayed_pulls": 20})
        self.assertEqual(r["inputs"]["live"]["agree"], 88)
        self.assertIn("# oracle newidle", r["text"])

    def test_a_replay_without_its_marker_is_the_kernel_inputs(self):
        out = "\n".join(["ORACLE-BEGIN sched-pipe record-rc=0"]
                        + compare_output("kernel", 9, 10, KERNEL) + ["ORACLE-END sched-pipe"])
        _, res, _ = run.parse(out)
        r = res["sched-pipe"]
        self.assertEqual((r["agree"], r["records"]), (9, 10))
        self.assertNotIn("live", r["inputs"])
        self.assertEqual(r["inputs"]["kernel"]["classes"]["execs"], (0, 0, 0))


class Tables(unittest.TestCase):
    def results(self):
        release, res, _ = run.parse(guest_output())
        return {"sid": (release, res)}

    def test_agreement_stands_beside_always_prev(self):
        t = run.table(self.results())
        self.assertIn("| 7.2.13+deb14-amd64 | tbench | 100 | 95 (95.0%) | 88 (88.0%) | 80 (80.0%) |", t)
        # The kernel's workloads summed.
        self.assertIn("| 7.2.13+deb14-amd64 | all | 200 | 190 (95.0%) | 176 (88.0%) | 160 (80.0%) |", t)

    def test_left_prev_and_fork_exec_tables(self):
        t = run.left_prev_table(self.results())
        self.assertIn("| 7.2.13+deb14-amd64 | all | 40 | 34 (85.0%) | 26 (65.0%) |", t)
        t = run.fork_exec_table(self.results())
        self.assertIn("| 7.2.13+deb14-amd64 | tbench | 2 | 1 (50.0%) | 1 (50.0%) | 2 (100.0%) "
                      "| 0 | n/a | n/a | n/a |", t)

    def test_discrimination_sums_a_kernels_workloads(self):
        t = run.discrimination_table(self.results())
        self.assertIn("| 7.2.13+deb14-amd64 | mainline | v5.10.y | 24 | 22 (91.7%) | 2 (8.3%) "
                      "| 20 | 14 (70.0%) | 4 (20.0%) |", t)
        self.assertIn("| mainline | v6.12.y | the same policy | - | - | the same policy | - | - |", t)
        # Without --discriminate (the quick profile) there is no table at all.
        out = guest_output().replace("against", "versus")
        self.assertEqual(run.discrimination_table({"sid": run.parse(out)[:2]}), "")

    def test_the_estimator_stands_beside_its_bar(self):
        t = run.estimate_table(self.results())
        self.assertIn("| 7.2.13+deb14-amd64 | tbench | 0.3% / 12.5% (over) | 0.1% / 4.0% | "
                      "0.0% / 1.2% | - |", t)
        # Without estimator lines (an older recorder) there is no table.
        out = guest_output().replace("_avg ", "_mean ")
        self.assertEqual(run.estimate_table({"sid": run.parse(out)[:2]}), "")

    def test_an_output_without_classes_keeps_its_agreement(self):
        out = "\n".join(["ORACLE-BEGIN lat-ctx record-rc=0", "agreement: 5 of 10 (50.0%)",
                         "ORACLE-END lat-ctx"])
        t = run.table({"sid": run.parse(out)[:2]})
        self.assertIn("| lat-ctx | 10 | 5 (50.0%) | n/a | n/a |", t)


class LiveCheck(unittest.TestCase):
    def test_passes_when_every_workload_was_replayed_both_ways(self):
        _, res, _ = run.parse(guest_output().replace("agreement: 88 of 100", "agreement: 97 of 100"))
        ok, why = run.live_check(res, ["hackbench-pipes", "tbench"])
        self.assertTrue(ok, why)
        self.assertEqual(why, "200 placements: kernel inputs 190 (95.0%), live inputs 194 (97.0%) "
                              "(needs >= 97%), always prev 160 (80.0%)")

    def test_fails_below_the_live_bar(self):
        _, res, _ = run.parse(guest_output())
        ok, why = run.live_check(res, ["hackbench-pipes", "tbench"])
        self.assertFalse(ok)
        self.assertIn("live inputs 176 (88.0%) (needs >= 97%)", why)

    def test_fails_without_a_live_replay_or_over_other_placements(self):
        out = guest_output()
        _, res, _ = run.parse(out.replace("ORACLE-COMPARE inputs=live\n", "", 1))
        # The first workload's live lines now count as its kernel replay's: no live replay.
        ok, why = run.live_check(res, ["hackbench-pipes", "tbench"])
        self.assertFalse(ok)
        self.assertIn("hackbench-pipes", why)
        _, res, _ = run.parse(out.replace("agreement: 88 of 100", "agreement: 88 of 99"))
        ok, why = run.live_check(res, ["hackbench-pipes", "tbench"])
        self.assertFalse(ok)
        ok, why = run.live_check(run.parse(guest_output(("tbench",)))[1], ["tbench", "lat-ctx"])
        self.assertFalse(ok)
        self.assertIn("lat-ctx", why)


class NewidleCheck(unittest.TestCase):
    W = ("hackbench-pipes", "tbench")

    def check(self, **kw):
        release, res, _ = run.parse(guest_output(**kw))
        return run.newidle_check(release, res, self.W)

    def test_a_kernel_with_seed_2_balances_none_with_a_wake_up_pending(self):
        ok, why = self.check()
        self.assertTrue(ok, why)
        self.assertEqual(why, "1000 newly-idle balances; 20 entered with a wake-up pending, 8 of them with the "
                              "other gates open, 0 balanced (seed 2's test: none may)")
        ok, why = self.check(pending_balanced=1)
        self.assertFalse(ok, why)

    def test_5_10_may_balance_them(self):
        ok, why = self.check(release="5.10.0-32-amd64", pending_balanced=3)
        self.assertTrue(ok, why)
        self.assertIn("6 balanced (no seed 2 test here: those with the gates open may)", why)

    def test_a_workload_without_newidle_records_fails(self):
        ok, why = self.check(newidle=("tbench",))
        self.assertFalse(ok)
        self.assertTrue(why.startswith("no newly-idle balances recorded for hackbench-pipes;"), why)


class NewidleAgreementCheck(unittest.TestCase):
    W = ("hackbench-pipes", "tbench")

    def check(self, **kw):
        _, res, _ = run.parse(guest_output(**kw))
        return run.newidle_agreement_check(res, self.W)

    def test_the_engine_must_reach_the_bar_and_beat_never_pulling(self):
        ok, why = self.check()
        self.assertTrue(ok, why)
        self.assertEqual(why, "the engine agrees on whether and whence to pull in 980 of 1000 balances (98.0%), "
                              "never pulling 960 (96.0%); where the kernel pulled 30 of 40 (75.0%) (needs >= 95% "
                              "and more than never pulling)")
        # Above the bar but no better than never pulling: proves nothing.
        ok, why = self.check(engine=480)
        self.assertFalse(ok, why)
        ok, why = self.check(engine=470)
        self.assertFalse(ok, why)

    def test_too_few_pulls_cannot_decide(self):
        # One workload's 20 pulls are enough; none are not.
        self.assertTrue(self.check(newidle=("tbench",))[0])
        ok, why = self.check(newidle=())
        self.assertFalse(ok)
        self.assertTrue(why.startswith("too few pulls to tell the engine from never pulling (needs >= 20)"), why)


class Main(unittest.TestCase):
    """The whole host side, with the VM replaced by made-up guest output."""

    def run_main(self, *argv):
        asked = []

        def guest_run(kernel, workloads, secs, binary, log, discriminate=False, stand_ins=(), reps=1,
                      secs_for=None):
            asked.append((discriminate, stand_ins))
            self.secs_asked = (secs, dict(secs_for or {}))
            return 0, guest_output(stand_ins=stand_ins, reps=reps), ["wakelab-vm"]
        out = io.StringIO()
        saved = run.guest_run, run.MIN_RECORDS, os.environ.get("WAKELAB_CACHE"), run.MIN_LIVE_AGREEMENT
        with tempfile.TemporaryDirectory() as d:
            os.environ["WAKELAB_CACHE"] = d
            # 200 made-up placements a kernel, 88% of them agreeing with live inputs.
            run.guest_run, run.MIN_RECORDS, run.MIN_LIVE_AGREEMENT = guest_run, 100, 85.0
            doc = Path(d) / "oracle.md"
            quick = "--quick" in argv
            try:
                with contextlib.redirect_stdout(out), contextlib.redirect_stderr(io.StringIO()):
                    rc = run.main([*argv, "--binary", sys.executable] + ([] if quick else ["--out", str(doc)]))
                doc = "" if quick else doc.read_text()
            finally:
                run.guest_run, run.MIN_RECORDS = saved[:2]
                run.MIN_LIVE_AGREEMENT = saved[3]
                if saved[2] is None:
                    os.environ.pop("WAKELAB_CACHE")
                else:
                    os.environ["WAKELAB_CACHE"] = saved[2]
        return rc, out.getvalue(), doc, asked

    def test_reps_are_recorded_apart_and_written_for_the_lab(self):
        with tempfile.TemporaryDirectory() as d:
            path = Path(d) / "kernels.json"
            rc, out, doc, asked = self.run_main("--kernels", "sid", "--workloads", "hackbench-pipes,tbench",
                                                "--reps", "2", "--json", str(path))
            self.assertEqual(rc, 0, out)
            got = json.loads(path.read_text())
        self.assertEqual(got["reps"], 2)
        self.assertTrue(got["command"].startswith("tools/oracle/run --kernels sid --workloads"), got["command"])
        sid = got["kernels"]["sid"]
        self.assertEqual(sid["release"], "7.2.13+deb14-amd64")
        self.assertEqual(sorted((r["workload"], r["rep"]) for r in sid["runs"]),
                         [("hackbench-pipes", 1), ("hackbench-pipes", 2), ("tbench", 1), ("tbench", 2)])
        one = sid["runs"][0]
        # 100 placements, 2 of them forks: 98 wake-ups; both seed-4 lines, apart.
        self.assertEqual((one["record_rc"], one["placements"], one["wakeups"]), (0, 100, 98))
        self.assertEqual(one["seeds"], {"4": [40, 3, 3], "4x": [12, 5, 4], "4p": [30, 5, 4]})
        self.assertEqual((one["newidle"]["pending_open"], one["newidle"]["pending_balanced"]), (4, 0))
        # Every run's newly-idle balances count: 4 runs of 500.
        self.assertIn("CHECK PASS oracle_newidle_sid 7.2.13+deb14-amd64: 2000 newly-idle balances;", out)

    def test_the_json_names_the_commit_the_run_started_at(self):
        # a recording takes an hour or more: a commit made meanwhile is not in it
        facts = iter([("start" + "0" * 35, "s", [])] + [("later" + "0" * 35, "l", [])] * 9)
        saved = run.runlib.git_facts
        run.runlib.git_facts = lambda rev=None: next(facts)
        try:
            with tempfile.TemporaryDirectory() as d:
                path = Path(d) / "kernels.json"
                rc, out, doc, asked = self.run_main("--kernels", "sid", "--workloads", "tbench",
                                                    "--json", str(path))
                got = json.loads(path.read_text())
        finally:
            run.runlib.git_facts = saved
        self.assertEqual(rc, 0, out)
        self.assertEqual(got["commit"], "start" + "0" * 35)

    def test_one_workload_may_run_longer_than_the_others(self):
        with tempfile.TemporaryDirectory() as d:
            path = Path(d) / "kernels.json"
            rc, out, doc, asked = self.run_main("--kernels", "sid", "--workloads", "hackbench-pipes,tbench",
                                                "--secs", "6", "--secs", "tbench=40",
                                                "--json", str(path))
            self.assertEqual(rc, 0, out)
            got = json.loads(path.read_text())
        self.assertEqual(self.secs_asked, (6, {"tbench": 40}))
        self.assertEqual((got["secs"], got["secs_for"]), (6, {"tbench": 40}))
        self.assertIn("--secs 6 --secs tbench=40", got["command"])

    def refused(self, *argv):
        """run.main(argv) exits 2 with one line on stderr and boots no VM: that line."""
        asked = []
        saved = run.guest_run
        run.guest_run = lambda *a, **k: asked.append(a) or (0, "", [])
        err = io.StringIO()
        try:
            with contextlib.redirect_stderr(err), self.assertRaises(SystemExit) as e:
                run.main([*argv, "--binary", sys.executable])
        finally:
            run.guest_run = saved
        self.assertEqual((e.exception.code, asked), (2, []))
        self.assertEqual(err.getvalue().count("\n"), 1, err.getvalue())
        return err.getvalue()

    def test_seconds_for_a_workload_not_run_or_unknown_are_refused(self):
        self.assertIn("--secs tbench=...: not among the workloads run",
                      self.refused("--kernels", "sid", "--workloads", "sched-pipe", "--secs", "tbench=5"))
        self.assertIn("'nosuch': no such workload", self.refused("--kernels", "sid", "--secs", "nosuch=5"))
        # What it echoes is escaped: still one line.
        self.assertIn("'a\\nb': no such workload", self.refused("--kernels", "sid", "--secs", "a\nb=5"))
        self.assertIn("--secs", self.refused("--kernels", "sid", "--secs", "tbench=0"))

    def test_a_longer_plan_gets_a_longer_vm_timeout(self):
        self.assertEqual(run.vm_timeout(["sched-pipe", "hackbench-pipes"], 8), 1800)
        # The lab's kernel run: 3 x (6 + 6 + 40) s of workload.
        lab = run.vm_timeout(["tbench", "hackbench-pipes", "sched-pipe-pairs"], 6,
                             {"sched-pipe-pairs": 40}, 3)
        self.assertEqual(lab, 900 + 20 * 156)
        self.assertGreater(lab, 21 * 60 * 2)

    def test_the_guest_gives_a_workload_its_own_seconds(self):
        script = (ROOT / "tools/oracle/guest.sh").read_text()
        fn = script[script.index("SECS_DEFAULT="):script.index("discriminate=")]
        got = subprocess.run(["sh", "-c", fn + 'secs_of tbench; secs_of sched-pipe-pairs; secs_of sched-pipe'],
                             env={"SECS": "6", "SECS_FOR": "sched-pipe-pairs=40 tbench=9", "PATH": "/usr/bin:/bin"},
                             capture_output=True, text=True, check=True).stdout.split()
        self.assertEqual(got, ["9", "40", "6"])

    def test_a_json_path_in_no_directory_is_refused_before_any_vm(self):
        self.assertIn("--json /nonexistent-dir/k.json: no such directory",
                      self.refused("--kernels", "sid", "--json", "/nonexistent-dir/k.json"))

    def test_the_full_profile_discriminates_and_writes_every_table(self):
        rc, out, doc, asked = self.run_main("--kernels", "sid", "--workloads", "hackbench-pipes,tbench")
        self.assertEqual(rc, 0, out)
        self.assertEqual(asked, [(True, ("tbench",))])
        self.assertIn("CHECK PASS oracle_live_inputs_sid 7.2.13+deb14-amd64: 200 placements: kernel "
                      "inputs 190 (95.0%), live inputs 176 (88.0%) (needs >= 85%), always prev 160 "
                      "(80.0%)", out)
        for heading in ("## Wake-ups that left prev", "## Forks and execs", "## Version discrimination",
                        "| kernel | workload | placements | kernel inputs | live inputs | always prev |",
                        "## What each stand-in costs", "## The state estimator against the kernel",
                        "## Newly-idle balances"):
            self.assertIn(heading, doc)
        self.assertIn("CHECK PASS oracle_newidle_sid 7.2.13+deb14-amd64: 1000 newly-idle balances;", out)
        self.assertIn("| 7.2.13+deb14-amd64 | tbench | 500 | 400 (80.0%) | 60 (12.0%) | 20 (4.0%) | 10 (2.0%) "
                      "| 4 | 0 | 490 (98.0%) | 480 (96.0%) | 15 (75.0%) | |", doc)
        # tbench's records alone: cpu_load alone 90 of 100 against the kernel inputs' 95, and
        # on the 20 that left prev 12 against 17; all but it 93 against the live inputs' 88.
        self.assertIn("| 7.2.13+deb14-amd64 | kernel inputs | 95.0% of 100 | | 85.0% of 20 | |", doc)
        self.assertIn("| | `cpu_load` alone | 90.0% of 100 | -5.0 | 60.0% of 20 | -25.0 |", doc)
        self.assertIn("| | all but `cpu_load` | 93.0% of 100 | +5.0 | 85.0% of 20 | +20.0 |", doc)

    def test_the_quick_profile_does_not_discriminate(self):
        rc, out, _doc, asked = self.run_main("--quick", "--kernels", "sid",
                                             "--workloads", "hackbench-pipes,tbench")
        self.assertEqual((rc, asked), (0, [(False, ())]), out)
        self.assertNotIn("oracle_left_prev", out)

    def test_the_full_profile_counts_the_wake_ups_that_left_prev(self):
        rc, out, _doc, _asked = self.run_main("--kernels", "sid")
        self.assertEqual(rc, 1)
        self.assertIn("CHECK FAIL oracle_left_prev_sid 7.2.13+deb14-amd64: 40 wake-ups that left prev "
                      "(needs >= 3000)", out)


def binary():
    target = Path(os.environ.get("CARGO_TARGET_DIR") or ROOT / "target")
    for name in ("scx_wakelab-offline", "scx_wakelab"):
        p = target / "release" / name
        if p.is_file():
            return p
    return None


# A trace record as bad-input's (tools/bad-input TRACE_RECORD): a sync wake-up on 4 CPUs.
RECORD = {"seq": 0, "topology": {"shape": "1x1x4x1"}, "policy": {"preset": "mainline"},
          "cpus": ["busy", "busy", "idle", "busy"], "task": {"pid": 7, "prev_cpu": 0},
          "wake": {"waker_cpu": 1, "sync": True}, "recorded_cpu": 0,
          "estimated": {"cpu_load": [1024, 1024, 0, 1024], "cpu_util": [0, 0, 0, 0], "task_load": 1024}}


# bad-input's newly-idle record (CPU 2 pulled from CPU 0), on 5.10 with a wake-up pending.
NEWIDLE_RECORD = dict(runlib.load_script(ROOT / "tools" / "bad-input", "bad_input").NEWIDLE_RECORD,
                      release="5.10.0-32-amd64", ttwu_pending=True)


@unittest.skipUnless(binary(), "no built scx_wakelab (cargo build --release)")
class AgainstTheBinary(unittest.TestCase):
    def test_the_patterns_match_what_oracle_newidle_prints(self):
        with tempfile.TemporaryDirectory() as d:
            f = Path(d) / "n.jsonl"
            f.write_text("\n".join(json.dumps(dict(NEWIDLE_RECORD, seq=i)) for i in range(3)) + "\n")
            p = subprocess.run([str(binary()), "oracle", "newidle", str(f)], capture_output=True, text=True)
            self.assertEqual(p.returncode, 0, p.stderr)
            _, res, _ = run.parse("\n".join(["ORACLE-BEGIN w record-rc=0", "ORACLE-NEWIDLE"]
                                             + p.stdout.splitlines() + ["ORACLE-END w"]))
        # Every CPU runs two: the engine pulls from CPU 0 (the LLC's busiest, then the
        # lowest), as the kernel did.
        self.assertEqual(res["w"]["newidle"], {"balances": 3, "pending": 3, "pending_open": 3,
                                               "pending_balanced": 3, "not_overloaded": 0,
                                               "balanced": 3, "pulled": 3, "engine_agrees": 3,
                                               "replayed": 3, "never_pull": 0, "engine_on_pulls": 3,
                                               "replayed_pulls": 3})

    def test_the_patterns_match_what_oracle_compare_prints(self):
        with tempfile.TemporaryDirectory() as d:
            f = Path(d) / "t.jsonl"
            f.write_text("\n".join(json.dumps(dict(RECORD, seq=i, recorded_cpu=c))
                                   for i, c in enumerate((0, 1, 2))) + "\n")
            lines = ["ORACLE-BEGIN w record-rc=0"]
            for inputs in run.INPUTS:
                stand_ins = ["--stand-ins"] if inputs == "kernel" else []
                p = subprocess.run([str(binary()), "oracle", "compare", "--inputs", inputs,
                                    "--discriminate", *stand_ins, str(f)], capture_output=True, text=True)
                self.assertEqual(p.returncode, 0, p.stderr)
                lines += [f"ORACLE-COMPARE inputs={inputs}"] + p.stdout.splitlines()
            _, res, _ = run.parse("\n".join(lines + ["ORACLE-END w"]))
        r = res["w"]
        # Every stand-in, each replay of every record counted.
        self.assertEqual(len(r["stand_ins"]), 11, r["stand_ins"])
        # The estimator's lines: 4 CPUs of 3 records, the wakee's load where it is given.
        self.assertEqual(r["estimates"]["cpu load"][0], 12)
        self.assertEqual(r["estimates"]["wakee load"][0], 3)
        self.assertEqual(r["estimates"]["wakee util"], (0, None, None))
        self.assertEqual({v[0] for v in r["stand_ins"].values()}, {3})
        for inputs in run.INPUTS:
            mine = r["inputs"][inputs]
            self.assertEqual(mine["records"], 3)
            self.assertEqual(sorted(mine["classes"]), sorted(KERNEL))
            self.assertEqual(mine["classes"]["all placements"][0], 3)
            # prev is CPU 0: the first record's kernel kept it.
            self.assertEqual(mine["classes"]["wake-ups kept on prev"][::2], (1, 1))
            self.assertEqual(sorted(mine["pairs"]), [("mainline", p) for p in ("v5.10.y", "v6.1.y", "v6.12.y")])
            self.assertTrue(mine["pairs"][("mainline", "v6.12.y")][4])


if __name__ == "__main__":
    sys.exit(runlib.run_unittests(sys.modules[__name__]))
