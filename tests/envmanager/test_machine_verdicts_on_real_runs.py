"""Specification of the verdicts that read the kernel's counts, on real runs: worker processes,
pipes and envs, and a real busy program outside the run (see machine_runs.py).

The figures are checked against what the kernel reports, never against a clock.
"""

from __future__ import annotations

import sys

import pytest
from kernel_counts import busy_program_outside_the_run
from machine_runs import sleeping_run, stepped_run
from tree_paths import find

from profiler.analysis.machine_verdicts import OUTSIDE_LOAD
from profiler.analysis.verdicts import CPU_OVERSUBSCRIPTION, judge_run

# Runs built to show a verdict, or not to: no other test loads the machine meanwhile (tests/conftest.py).
pytestmark = [pytest.mark.skipif(not sys.platform.startswith("linux"), reason="schedstat is Linux's"),
              pytest.mark.quiet_machine]


@pytest.fixture(scope="module")
def oversubscribed():
    """6 workers burning 3 ms of CPU a step on 2 cores: 18 ms of CPU for each step."""
    return stepped_run(workers=6, cpu_seconds=0.003, steps=40)


@pytest.fixture(scope="module")
def beside_a_busy_program():
    """2 workers burning 3 ms a step on 2 cores, beside a busy loop on the same cores."""
    with busy_program_outside_the_run() as pid:
        tree, _ = stepped_run(workers=2, cpu_seconds=0.003, steps=60)
    return tree, pid


@pytest.fixture(scope="module")
def sleeping_beside_a_busy_program():
    """2 workers sleeping 100 ms a step beside the same busy loop: the run rarely needs a core."""
    with busy_program_outside_the_run() as pid:
        tree, waited = sleeping_run(workers=2, sleep_seconds=0.1, steps=15)
    return tree, waited, pid


def test_each_workers_dumped_run_queue_delay_is_the_kernels_count(oversubscribed):
    tree, counted = oversubscribed
    for entry, kernel in zip(tree["workers"], counted):
        # The dump covers the interval the test read, and a reply or two around it more.
        assert entry["scheduling"]["run_queue_seconds"] >= kernel * 0.999
        assert entry["scheduling"]["run_queue_seconds"] <= entry["scheduling"]["wall_seconds"]


def test_an_oversubscribed_run_quotes_the_longest_wait_for_a_core(oversubscribed):
    tree, counted = oversubscribed
    verdicts = judge_run(tree)
    # The run's own crowding, and on a shared machine other programs' load, each quote it.
    cpu = verdicts.of_kind(CPU_OVERSUBSCRIPTION) + verdicts.of_kind(OUTSIDE_LOAD)
    assert cpu
    dumped = {entry["name"]: entry["scheduling"] for entry in tree["workers"]}
    for verdict in cpu:
        waits = {entry["process"]: entry for entry in verdict.evidence["run_queue_by_process"]}
        worst = max(waits, key=lambda label: (waits[label]["waiting_share"], label))
        assert f"{worst} waited {waits[worst]['waiting_share']:.1%} of its wall time for a core" in verdict.title
        if worst in dumped:
            assert waits[worst]["run_queue_seconds"] == dumped[worst]["run_queue_seconds"]
            # The figure quoted holds at least what the test read from the worker's schedstat.
            kernel = dict(zip(dumped, counted))[worst]
            assert waits[worst]["run_queue_seconds"] >= kernel * 0.999


def test_a_busy_program_on_the_runs_cores_is_named_with_what_it_cost(beside_a_busy_program):
    tree, pid = beside_a_busy_program
    outside = judge_run(tree).of_kind(OUTSIDE_LOAD)[0]
    assert pid in [process["pid"] for process in outside.evidence["outside_processes"]]
    assert outside.cost_seconds > 0
    assert "taskset" in outside.suggestion


def test_a_run_with_a_core_per_worker_is_not_called_oversubscribed_beside_a_busy_program(
        beside_a_busy_program):
    tree, _ = beside_a_busy_program
    assert not judge_run(tree).of_kind(CPU_OVERSUBSCRIPTION)


def test_a_run_the_kernel_saw_barely_wait_is_not_said_to_be_held_up_by_a_busy_program_beside_it(
        sleeping_beside_a_busy_program):
    # The busy loop keeps a core busy, but a run that sleeps between steps needs a core only for
    # moments. Whether it then waited is the kernel's count, read by the test: on a machine other
    # programs load heavily the run really is held up, and the verdict would be true.
    tree, waited, pid = sleeping_beside_a_busy_program
    wall = find(tree, "train")["total"]
    if waited > 0.05 * wall:
        pytest.skip(f"not a quiet machine: the kernel counted {waited:.3f} s of waits for a core "
                    f"in a {wall:.2f} s run")
    assert pid in [process["pid"] for process in tree["machine_load"]["outside_processes"]]
    verdicts = judge_run(tree)
    assert not verdicts.of_kind(OUTSIDE_LOAD) and not verdicts.of_kind(CPU_OVERSUBSCRIPTION)
