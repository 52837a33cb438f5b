"""Specification: each env worker timed in place samples its own stack outside its env calls, and
``rlprof analyze`` names, per worker, where that time went with the sample counts.

The program (programs/slow_worker_call.py) knows nothing of rlprof: between steps it calls a
slow method of its envs through ``AsyncVectorEnv.call``, which runs in each worker outside
``step`` and ``reset``. Real worker processes (fork and spawn), a real ``rlprof run``.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

PROGRAM = Path(__file__).parent / "programs" / "slow_worker_call.py"
ENVS = 2


def run_rlprof(folder: Path, *options: str, context: str = "fork") -> tuple[dict, str]:
    result = subprocess.run(
        [sys.executable, "-m", "profiler", "run", *options, "--summaries-dir", "out", str(PROGRAM),
         "--context", context, "--envs", str(ENVS)],
        cwd=folder, capture_output=True, text=True, timeout=180,
    )
    assert result.returncode == 0, result.stderr
    return json.loads((folder / "out" / "slow_worker_call_timers.json").read_text()), result.stderr


def analyze_json(folder: Path) -> dict:
    result = subprocess.run([sys.executable, "-m", "profiler", "analyze", "--format", "json",
                             "out/slow_worker_call_timers.json"], cwd=folder, capture_output=True, text=True,
                            timeout=120)
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout)


@pytest.mark.parametrize("context", ["fork", "spawn"])
def test_a_slow_call_outside_the_env_calls_is_named_in_each_workers_samples(tmp_path, context):
    tree, stderr = run_rlprof(tmp_path, context=context)
    for worker in tree["workers"]:
        places = worker["untimed_samples"]["places"]
        planted = [place for place in places if place["function"] == "planted_slow_render"]
        assert planted and planted[0]["file"] == str(PROGRAM)  # the script's own file under spawn too
        assert planted[0]["samples"] > 0
        # Frames a forked worker copied from the trainer (the script's main) are never its places.
        assert not [place for place in places if place["function"] in ("main", "<module>")]
    assert "where each worker's time outside its env calls went" in stderr
    assert "planted_slow_render (slow_worker_call.py:" in stderr


def test_the_analysis_lists_each_workers_places_with_their_sample_counts(tmp_path):
    tree, _ = run_rlprof(tmp_path)
    workers = analyze_json(tmp_path)["untimed"]["workers"]
    assert [worker["worker"] for worker in workers] == [f"AsyncVectorEnv worker {index}" for index in range(ENVS)]
    for worker, entry in zip(workers, tree["workers"]):
        dumped = {place["function"]: place["samples"] for place in entry["untimed_samples"]["places"]}
        analysed = {place["function"]: place["samples"] for place in worker["places"]}
        assert analysed["planted_slow_render"] == dumped["planted_slow_render"]
        assert sum(place["seconds"] for place in worker["places"]) <= worker["untimed_seconds"] * (1 + 1e-9)


def test_a_worker_waiting_for_the_trainer_is_said_in_those_words(tmp_path):
    _, stderr = run_rlprof(tmp_path)
    assert "in _async_worker: waiting for the trainer's next call" in stderr


def test_without_the_stack_sampler_the_workers_sample_nothing(tmp_path):
    tree, stderr = run_rlprof(tmp_path, "--no-stack-sampler")
    assert not [worker for worker in tree["workers"] if "untimed_samples" in worker]
    assert "where each worker's time outside its env calls went" not in stderr
