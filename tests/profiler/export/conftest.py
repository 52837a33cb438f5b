"""Runs to export: real timer trees made with the fake clock, a recorded timeline, ML-Agents' file."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import pytest

from profiler import get_timer_root, get_timer_tree, hierarchical_timer, load_timing_tree, set_gauge
from profiler.timing.timers import TimerStack

MLAGENTS_FILE = Path(__file__).parents[2] / "data" / "mlagents_timers.json"
WORKER_STEP_SECONDS = (0.003, 0.003, 0.009)  # worker 2 is the straggler


def _worker_tree(fake_clock, worker_id: int, step_seconds: float, steps: int) -> TimerStack:
    stack = TimerStack(f"worker {worker_id}")
    for _ in range(steps):
        with hierarchical_timer("env.step", stack):
            fake_clock.advance(step_seconds)
        with hierarchical_timer("send", stack):
            fake_clock.advance(0.0005)
    return stack


@pytest.fixture
def trainer_tree(fake_clock) -> dict[str, Any]:
    """A trainer loop with no workers: every block ran inside its parent."""
    with hierarchical_timer("train"):
        for _ in range(3):
            with hierarchical_timer("vector.step"):
                fake_clock.advance(0.001)
                with hierarchical_timer("wait"):
                    fake_clock.advance(0.004)
            with hierarchical_timer("policy.act"):
                fake_clock.advance(0.002)
        with hierarchical_timer("policy.update"):
            fake_clock.advance(0.010)
    fake_clock.advance(0.0015)
    set_gauge("reward", 1.5)
    set_gauge("reward", 2.5)
    return get_timer_tree()


@pytest.fixture
def run_with_workers(fake_clock) -> dict[str, Any]:
    """Three workers' trees merged under the trainer's ``vector.step`` (``is_parallel``), plus
    each worker's own tree in ``workers``, the way the merger lays a run out."""
    steps = 4
    worker_stacks = [
        _worker_tree(fake_clock, worker_id, seconds, steps)
        for worker_id, seconds in enumerate(WORKER_STEP_SECONDS)
    ]
    fake_clock.time = 1000.0  # the workers ran beside the trainer, from the same start
    with hierarchical_timer("train"):
        for _ in range(steps):
            with hierarchical_timer("vector.step"):
                with hierarchical_timer("wait"):
                    fake_clock.advance(0.0095)
        with hierarchical_timer("policy.update"):
            fake_clock.advance(0.010)
    vector_step = get_timer_root().children["train"].children["vector.step"]
    worker_root = vector_step.get_child("worker_root")
    for stack in worker_stacks:
        worker_root.add(stack.root, parallel=True)
    # Like ML-Agents' worker_root: the workers' whole time, once per payload.
    worker_root.total = sum(child.total for child in worker_root.children.values())
    worker_root.count = steps
    set_gauge("reward", 3.0)
    tree = get_timer_tree()
    tree["workers"] = []
    for worker_id, stack in enumerate(worker_stacks):
        worker = stack.root.to_dict()
        worker.update(name=f"worker {worker_id}", worker_id=worker_id, pid=4000 + worker_id, payloads=2)
        worker["total"] = sum(child["total"] for child in worker["children"])
        worker["count"] = 1
        worker["gauges"] = {"episode_length": {"value": 20.0, "min": 10.0, "max": 30.0, "count": 4}}
        tree["workers"].append(worker)
    return tree


@pytest.fixture
def recorded_timeline() -> dict[str, Any]:
    """A timeline as the recorder writes it: two processes, two trainer threads, markers, counters.

    ``wait`` ends a float hair after its parent, the way clock rounding can make it.
    """
    return {
        "clock": "perf_counter",
        "dropped": 0,
        "processes": [
            {
                "pid": 1234,
                "name": "trainer",
                "clock_offset": 0.0,
                "threads": [
                    {
                        "tid": 1,
                        "name": "MainThread",
                        "spans": [
                            ["wait", 12.000150, 12.000350 + 1e-12],
                            ["vector.step", 12.000100, 12.000350],
                            ["policy.act", 12.000400, 12.000600],
                            ["vector.step", 12.000600, 12.000900],
                        ],
                        "instants": [["restart worker 2", 12.0005]],
                    },
                    {"tid": 7, "name": "logger", "spans": [["flush", 12.000200, 12.000700]], "instants": []},
                ],
                "counters": [["cpu_percent", 12.0001, 85.0], ["cpu_percent", 12.0008, 40.0]],
            },
            {
                "pid": 4000,
                "name": "worker 0",
                "clock_offset": 0.0,
                "threads": [
                    {
                        "tid": 1,
                        "name": "MainThread",
                        "spans": [["env.step", 12.000120, 12.000300], ["send", 12.000300, 12.000320]],
                        "instants": [],
                    }
                ],
                "counters": [["rss_mb", 12.0002, 120.0]],
            },
        ],
    }


@pytest.fixture
def run_with_timeline(run_with_workers, recorded_timeline) -> dict[str, Any]:
    run_with_workers["timeline"] = recorded_timeline
    return run_with_workers


@pytest.fixture
def mlagents_tree() -> dict[str, Any]:
    return load_timing_tree(MLAGENTS_FILE)



@pytest.fixture
def run_with_nan_readings(run_with_timeline) -> dict[str, Any]:
    """A run whose loss diverged: a NaN gauge, and NaN and infinite counter samples."""
    run_with_timeline["gauges"]["loss"] = {"value": math.nan, "min": 0.1, "max": 0.9, "count": 50}
    trainer = run_with_timeline["timeline"]["processes"][0]
    trainer["counters"] += [["loss", 12.0002, 0.5], ["loss", 12.0006, math.nan], ["loss", 12.0007, math.inf]]
    return run_with_timeline
