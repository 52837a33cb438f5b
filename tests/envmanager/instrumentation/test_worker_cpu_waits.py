"""Specification: env workers timed in place ship the kernel's count of their waits for a core, and
the CPU verdicts quote it for a plain ``AsyncVectorEnv`` or ``SubprocVecEnv`` program; the trainer
reads its own waits inside its vector steps.

The program (programs/cpu_burning_rollout.py) knows nothing of rlprof; it pins itself to two
cores and reads the schedstat of each worker's env thread, and of its own main thread, around its
steps: the figures the dump is checked against, never a clock. The dump leaves out rlprof's own
sampling thread in the worker, so a worker's waits never exceed its wall time.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from profiler.analysis.machine_verdicts import OUTSIDE_LOAD
from profiler.analysis.verdicts import CPU_OVERSUBSCRIPTION, judge_run
from profiler.recording.block_waits import READ_ALL_FIRST
from profiler.tree.timer_json import normalize_timing_tree

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="schedstat is Linux's")

PROGRAM = Path(__file__).parent / "programs" / "cpu_burning_rollout.py"


def run_rlprof(folder: Path, *arguments: str) -> tuple[dict, dict]:
    result = subprocess.run(
        [sys.executable, "-m", "profiler", "run", "--summaries-dir", "out", str(PROGRAM), "counted.json", *arguments],
        cwd=folder, capture_output=True, text=True, timeout=180,
    )
    assert result.returncode == 0, result.stderr
    tree = normalize_timing_tree(json.loads((folder / "out" / "cpu_burning_rollout_timers.json").read_text()))
    return tree, json.loads((folder / "counted.json").read_text())


@pytest.fixture(scope="module", params=["async", "subproc"])
def oversubscribed(request, tmp_path_factory):
    """6 workers burning 3 ms of CPU a step on 2 cores: 18 ms of CPU for each step, for long enough
    that the stepping, not the program's imports (SB3's, torch's: over a second), is most of the run."""
    return run_rlprof(tmp_path_factory.mktemp(request.param), "--vec", request.param, "--envs", "6",
                      "--cpu", "0.003", "--steps", "150")


def test_each_workers_dumped_run_queue_delay_is_the_kernels_count(oversubscribed):
    tree, counted = oversubscribed
    assert len(tree["workers"]) == len(counted["workers"]) == 6
    for entry, kernel in zip(tree["workers"], counted["workers"]):
        # The dump covers the steps the program read around, and the env's start and close more.
        assert entry["scheduling"]["run_queue_seconds"] >= kernel * 0.999
        assert entry["scheduling"]["run_queue_seconds"] <= entry["scheduling"]["wall_seconds"]
        assert entry["scheduling"]["involuntary_switches"] > 0


def test_the_cpu_verdicts_quote_the_longest_wait_for_a_core(oversubscribed):
    tree, _ = oversubscribed
    verdicts = judge_run(tree)
    # The run's own crowding, and on a shared machine other programs' load, each quote it.
    cpu = verdicts.of_kind(CPU_OVERSUBSCRIPTION) + verdicts.of_kind(OUTSIDE_LOAD)
    assert cpu
    dumped = {entry["name"]: entry["scheduling"] for entry in tree["workers"]}
    for verdict in cpu:
        waits = {entry["process"]: entry for entry in verdict.evidence["run_queue_by_process"]}
        assert set(dumped) <= set(waits)  # every worker measured, none inferred
        worst = max(waits, key=lambda label: (waits[label]["waiting_share"], label))
        assert f"{worst} waited {waits[worst]['waiting_share']:.1%} of its wall time for a core" in verdict.title
        if worst in dumped:
            assert waits[worst]["run_queue_seconds"] == dumped[worst]["run_queue_seconds"]
    assert not [line for line in verdicts.cannot_tell if "run-queue delay" in line]


def test_a_run_with_a_core_per_worker_has_its_figures_and_is_not_called_oversubscribed(tmp_path):
    tree, counted = run_rlprof(tmp_path, "--vec", "async", "--envs", "2", "--cpu", "0.0005", "--steps", "40")
    for entry, kernel in zip(tree["workers"], counted["workers"]):
        assert entry["scheduling"]["run_queue_seconds"] >= kernel * 0.999
    assert not judge_run(tree).of_kind(CPU_OVERSUBSCRIPTION)


def test_the_trainer_reads_its_waits_for_a_core_inside_each_of_its_first_vector_steps(oversubscribed):
    tree, counted = oversubscribed
    in_steps = tree["scheduling"]["in_blocks"]["vector.step"]
    assert in_steps["runs_read"] == 150 < READ_ALL_FIRST
    # Six workers each woken by the actions it sends take the trainer's two cores from it.
    assert in_steps["run_queue_seconds"] > 0
    # Those steps are some of the steps the program read around: never more than the kernel counted there.
    assert in_steps["run_queue_seconds"] <= counted["trainer"] + 1e-6
