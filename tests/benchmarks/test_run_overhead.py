"""Specification: how ``benchmarks/run_overhead.py`` decides a wall goal from a few noisy rounds."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import pytest

SCRIPT = Path(__file__).resolve().parents[2] / "benchmarks" / "run_overhead.py"


@pytest.fixture(scope="module")
def run_overhead():
    spec = importlib.util.spec_from_file_location("run_overhead", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # its dataclasses look their module up there
    try:
        spec.loader.exec_module(module)
        yield module
    finally:
        del sys.modules[spec.name]


def test_five_rounds_bound_the_median_by_their_extremes_at_94_percent(run_overhead):
    assert run_overhead.median_interval([1.04, 0.98, 1.01, 1.10, 1.02]) == (0.98, 1.10, pytest.approx(1 - 2 / 32))


def test_eleven_rounds_bound_it_by_their_second_and_tenth(run_overhead):
    values = [float(value) for value in range(11)]
    low, high, held = run_overhead.median_interval(values[::-1])
    assert (low, high) == (1.0, 9.0)
    assert held == pytest.approx(1 - 2 * (1 + 11) / 2**11)


def test_a_goal_above_the_whole_interval_is_met(run_overhead):
    assert run_overhead.goal_verdict([1.01, 1.02, 1.00, 1.01, 1.02], 1.03).endswith(": met")


def test_a_goal_below_the_whole_interval_is_missed(run_overhead):
    assert run_overhead.goal_verdict([1.05, 1.04, 1.06, 1.08, 1.04], 1.03).endswith(": NOT met")


def test_a_goal_inside_the_interval_is_left_undecided_whatever_the_median(run_overhead):
    verdict = run_overhead.goal_verdict([1.00, 1.02, 1.04, 1.05, 1.01], 1.03)  # median 1.02, under the goal
    assert verdict == "94% interval 1.000-1.050: undecided by these rounds"


def test_no_rounds_is_refused(run_overhead):
    with pytest.raises(ValueError, match="at least one value"):
        run_overhead.median_interval([])
