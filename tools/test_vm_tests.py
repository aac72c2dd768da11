#!/usr/bin/env python3
"""Host-side checks of tools/vm-tests, on made-up suite DATA: the seed-4 decision rule and
the foundation run's exit stats.

usage: python3 tools/test_vm_tests.py [-q]   (ends "N passed, N failed")
"""
import contextlib
import io
import sys
import unittest
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE / "lab"))
import runlib  # noqa: E402

vm = runlib.load_script(HERE / "vm-tests", "vm_tests")


def seed4_data(hv, mv, hp, mp, pairs=1):
    """live_flags DATA with the pipe's own tasks' recent_used hits and misses per mode
    (v5.10 form: hv, mv; prev form: hp, mp) over `pairs` pairs of pipe phases."""
    d = {"seed4_own_tasks": {"pipe_pairs": pairs, "trace_dropped": 0,
                             "pipe_v5.10": {"hit": hv, "miss": mv}, "pipe_prev": {"hit": hp, "miss": mp},
                             "hackbench_v5.10": {"hit": 0, "miss": 70}, "hackbench_prev": {"hit": 1, "miss": 400}}}
    counters = {"counters": {"sis_recent_used_hit": 3, "sis_recent_used_miss": 1}}
    for r in range(1, pairs + 1):
        d[f"seed4_pipe_v5.10_r{r}"] = d[f"seed4_pipe_prev_r{r}"] = counters
    d["seed4_hackbench_v5.10"] = d["seed4_hackbench_prev"] = counters
    return d


def seed4(data):
    with contextlib.redirect_stdout(io.StringIO()):
        res = vm.check_live_flags(data)
    return next(r for r in res if r[0].startswith("seed4"))


class Seed4(unittest.TestCase):
    def test_the_binomial_tail(self):
        self.assertEqual(vm.binomial_tail(0, 10), 1 / 1024)
        self.assertEqual(vm.binomial_tail(1, 3), 0.5)
        self.assertEqual(vm.binomial_tail(3, 3), 1.0)
        self.assertEqual(vm.binomial_tail(0, 0), 1.0)

    def test_ten_hits_against_none_decide(self):
        name, ok, detail = seed4(seed4_data(0, 0, 10, 2))
        self.assertEqual(name, "seed4_pipe_recent_used_hits_follow_mode")
        self.assertTrue(ok, detail)
        self.assertIn("one-sided p 0.00098", detail)

    def test_nine_hits_are_too_few_to_decide(self):
        _, ok, detail = seed4(seed4_data(0, 0, 9, 2, pairs=6))
        self.assertFalse(ok)
        self.assertIn("too few hits to decide", detail)
        self.assertIn("6 pairs of 10000 round trips", detail)

    def test_a_v5_10_hit_raises_the_bar(self):
        # 1 against 12: p = 14/8192, not decided; 1 against 13: p = 15/16384, decided.
        self.assertFalse(seed4(seed4_data(1, 0, 12, 0))[1])
        self.assertTrue(seed4(seed4_data(1, 0, 13, 0))[1])

    def test_a_low_hit_rate_fails(self):
        _, ok, detail = seed4(seed4_data(0, 0, 12, 13))
        self.assertFalse(ok, detail)

    def test_hits_in_both_modes_alike_fail(self):
        _, ok, detail = seed4(seed4_data(20, 5, 25, 5))
        self.assertFalse(ok, detail)
        self.assertIn("too few hits to decide", detail)

    def test_system_wide_rates_sum_every_pair(self):
        _, _, detail = seed4(seed4_data(0, 0, 30, 2, pairs=3))
        self.assertIn("system-wide 9/12 (75.0%) -> 9/12 (75.0%)", detail)


class Foundation(unittest.TestCase):
    """The foundation run's exit stats: new tasks are the agent's, by the slow path."""

    def stats(self, forks, slow):
        return {"foundation_exit_stats": {"nr_agent_dispatches": 5000, "nr_decisions": 5000,
                                          "policy": {"nr_fork_placements": forks,
                                                     "nr_slow_path": slow}}}

    def check(self, data):
        return {name: (ok, detail) for name, ok, detail in vm.check_foundation_stats(data)}

    def test_new_tasks_placed_by_the_slow_path_pass(self):
        ok, detail = self.check(self.stats(333, 333))["agent_places_new_tasks"]
        self.assertTrue(ok, detail)

    def test_no_new_task_placed_fails(self):
        ok, detail = self.check(self.stats(0, 0))["agent_places_new_tasks"]
        self.assertFalse(ok, detail)

    def test_slow_path_for_other_placements_fails(self):
        self.assertFalse(self.check(self.stats(333, 340))["agent_places_new_tasks"][0])


if __name__ == "__main__":
    sys.exit(runlib.run_unittests(sys.modules[__name__]))
