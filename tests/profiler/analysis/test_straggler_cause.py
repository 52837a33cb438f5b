"""Specification of a slow worker's env time split: on a CPU, waiting for a core, or blocked.

Real runs (a sleeping and a computing straggler) are in tests/envmanager/test_verdicts_on_real_runs.py.
"""

from __future__ import annotations

import pytest

from profiler.analysis.machine_figures import ProcessWaits
from profiler.analysis.run_measurements import EnvTime
from profiler.analysis.straggler_cause import BLOCKED_FROM_SHARE, env_time_split


def waits(run_queue_seconds: float) -> ProcessWaits:
    return ProcessWaits("worker 3", run_queue_seconds, cpu_seconds=1.0, wall_seconds=10.0, involuntary_switches=0)


def split_of(wall: float, cpu: float, run_queue: float | None):
    return env_time_split(EnvTime(wall_seconds=wall, cpu_seconds=cpu, calls=100),
                          None if run_queue is None else waits(run_queue))


def test_env_calls_mostly_neither_on_a_cpu_nor_waiting_for_one_are_blocked():
    split = split_of(4.0, cpu=0.2, run_queue=0.2)
    assert split.blocked
    assert split.blocked_share == pytest.approx(0.9)
    assert split.sentence("worker 3") == (
        "worker 3's env calls were on a CPU 5.0% of their 4.00 s, and the worker waited for a core at "
        "most 5.0% of that: for at least 90.0% they were blocked, waiting on something other than a CPU.")


@pytest.mark.parametrize("beyond, blocked", [(0.0, True), (0.02, False)])
def test_blocked_starts_at_its_threshold_share_of_the_env_time(beyond, blocked):
    # 2 s of env calls, none on a CPU: the blocked share is what the waits for a core leave.
    run_queue = 2.0 * (1.0 - BLOCKED_FROM_SHARE) + beyond
    assert split_of(2.0, cpu=0.0, run_queue=run_queue).blocked is blocked


def test_env_calls_on_a_cpu_are_its_computation():
    split = split_of(4.0, cpu=3.9, run_queue=0.2)
    assert not split.blocked
    assert split.blocked_share == 0.0
    assert split.sentence("worker 3").endswith("its time is its env's computation, not a wait on something else.")


def test_waits_for_a_core_all_its_life_count_against_the_env_time_at_most_whole():
    split = split_of(1.0, cpu=0.1, run_queue=5.0)
    assert split.core_wait_share == 1.0
    assert split.blocked_share == 0.0


def test_without_the_workers_waits_counted_blocked_is_not_claimed():
    split = split_of(4.0, cpu=0.2, run_queue=None)
    assert split.blocked_share is None and not split.blocked
    assert split.sentence("worker 3").endswith(
        "the rest they waited for a core or were blocked (this dump does not count worker 3's waits for a core).")
    assert split.evidence() == {"env_on_cpu_share": 0.05}


def test_without_the_workers_waits_an_env_mostly_on_a_cpu_computes():
    assert split_of(4.0, cpu=3.0, run_queue=None).sentence("worker 3").endswith(
        "its env computes longer than the others'.")


def test_the_evidence_gives_each_share():
    assert split_of(4.0, cpu=0.2, run_queue=0.2).evidence() == pytest.approx(
        {"env_on_cpu_share": 0.05, "env_core_wait_share_at_most": 0.05, "env_blocked_share_at_least": 0.9})


@pytest.mark.parametrize("env_time", [None, EnvTime(wall_seconds=0.0, cpu_seconds=0.0, calls=0)])
def test_a_worker_without_env_time_has_no_split(env_time):
    assert env_time_split(env_time, waits(0.1)) is None
