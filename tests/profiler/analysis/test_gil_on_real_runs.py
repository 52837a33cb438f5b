"""Specification of the GIL verdict on real runs: a trainer process whose env workers are Python
threads (threaded_trainer.py), and one that works alone before a spell beside a thread
(threaded_spell.py), each run as a program of its own and judged from its dump."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from profiler import load_timing_tree
from profiler.analysis.machine_verdicts import GIL_CONTENTION
from profiler.analysis.verdicts import judge_run

TRAINER = Path(__file__).parents[1] / "threaded_trainer.py"
SPELL = Path(__file__).parents[1] / "threaded_spell.py"

pytestmark = [
    pytest.mark.skipif(not sys.platform.startswith("linux"), reason="schedstat is Linux's"),
    pytest.mark.skipif(len(getattr(os, "sched_getaffinity", lambda _: ())(0)) < 2,
                       reason="with one core, threads have nothing to gain from processes"),
]


def threaded_run(tmp_path: Path, kind: str, when: str, layout: str = "threads"):
    out = tmp_path / f"{kind}.json"
    subprocess.run([sys.executable, str(TRAINER), str(out), kind, when, layout], check=True, timeout=120)
    return judge_run(load_timing_tree(out))


@pytest.mark.parametrize("when", ["alive", "ended"])
def test_worker_threads_running_python_are_named_as_waiting_for_the_gil(tmp_path, when):
    gil = threaded_run(tmp_path, "compute", when).of_kind(GIL_CONTENTION)[0]
    named = {thread["name"] for thread in gil.evidence["threads"]}
    assert {"env-worker-0", "env-worker-1", "env-worker-2"} <= named
    assert gil.evidence["cores_used"] <= 1.25


@pytest.mark.parametrize("when", ["alive", "ended"])
def test_worker_threads_that_sleep_are_not_called_gil_contention(tmp_path, when):
    assert not threaded_run(tmp_path, "sleep", when).of_kind(GIL_CONTENTION)


def test_worker_threads_merged_under_the_step_as_ml_agents_does_are_named_as_waiting_for_the_gil(tmp_path):
    # The run: "nothing stands out" while the step was 96% of the wall time.
    gil = threaded_run(tmp_path, "compute", "ended", "mlagents").of_kind(GIL_CONTENTION)[0]
    assert {"env-worker-0", "env-worker-1", "env-worker-2"} <= {thread["name"] for thread in gil.evidence["threads"]}


def test_sleeping_worker_threads_merged_as_ml_agents_does_are_not_called_gil_contention(tmp_path):
    assert not threaded_run(tmp_path, "sleep", "ended", "mlagents").of_kind(GIL_CONTENTION)


def spell_run(tmp_path: Path, main_thread: str):
    out = tmp_path / f"{main_thread}.json"
    subprocess.run([sys.executable, str(SPELL), str(out), main_thread], check=True, timeout=120)
    return judge_run(load_timing_tree(out))


def test_a_main_thread_computing_beside_a_thread_after_working_alone_is_named_as_waiting_for_the_gil(tmp_path):
    gil = spell_run(tmp_path, "learns").of_kind(GIL_CONTENTION)[0]
    assert {thread["name"] for thread in gil.evidence["threads"]} == {"MainThread", "collector"}
    assert gil.evidence["seconds_together"] < gil.evidence["process_wall_seconds"] * 0.8


def test_a_main_thread_waiting_in_join_for_its_only_thread_is_not_called_gil_contention(tmp_path):
    # Over the whole run both threads worked and the process ran on one core, busy throughout.
    assert not spell_run(tmp_path, "joins").of_kind(GIL_CONTENTION)
