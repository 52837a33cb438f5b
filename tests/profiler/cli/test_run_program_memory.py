"""Specification of ``rlprof run --memory`` and ``--track-allocations``: the memory of the trainer
and of every env worker of an unedited program, sampled, and a leak named where it is.

Each run is ``python -m profiler run`` as a real subprocess, on a program whose Gymnasium
``AsyncVectorEnv`` runs its envs in worker processes (timed in place, not replaced).
"""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from profiler import load_timing_tree
from profiler.analysis.verdicts import MEMORY_LEAK, judge_run

FINISHES_WITHIN = 180  # seconds: generous, for a loaded machine; no test checks a duration
STEPS = 150
KEPT_PER_STEP = 1_000_000  # bytes the leaking env (or trainer) keeps from each step: 150 MB over the run

PROGRAM = """
    import sys
    import time

    import gymnasium as gym

    LEAKING = sys.argv[1]  # the env that keeps every step's data (0 or 1), "trainer", or "none"
    CONTEXT = sys.argv[2] if len(sys.argv) > 2 else None  # the workers' start method


    class KeepsEverything(gym.Wrapper):
        def __init__(self, env):
            super().__init__(env)
            self.kept = []

        def step(self, action):
            self.kept.append(b"x" * {kept})  # written, so resident
            return self.env.step(action)


    def make(index):
        def thunk():
            env = gym.make("CartPole-v1")
            return KeepsEverything(env) if LEAKING == str(index) else env
        return thunk


    if __name__ == "__main__":
        envs = gym.vector.AsyncVectorEnv([make(0), make(1)], context=CONTEXT)
        envs.reset(seed=0)
        kept = []
        for _ in range({steps}):
            envs.step(envs.action_space.sample())
            if LEAKING == "trainer":
                kept.append(b"x" * {kept})
            time.sleep(0.02)
        envs.close()
        print("done")
"""


def rlprof_run(folder: Path, *arguments: str) -> subprocess.CompletedProcess[str]:
    script = folder / "train.py"
    script.write_text(textwrap.dedent(PROGRAM.format(kept=KEPT_PER_STEP, steps=STEPS)))
    return subprocess.run([sys.executable, "-m", "profiler", "run", "--summaries-dir", "out", *arguments],
                          cwd=folder, capture_output=True, text=True, timeout=FINISHES_WITHIN)


def sampled_run(folder: Path, *program_arguments: str) -> tuple[subprocess.CompletedProcess[str], dict]:
    result = rlprof_run(folder, "--memory=0.1", "train.py", *program_arguments)
    assert result.returncode == 0, result.stderr
    return result, load_timing_tree(folder / "out" / "train_timers.json")


@pytest.fixture(scope="module")
def leaking_worker(tmp_path_factory):
    return sampled_run(tmp_path_factory.mktemp("leaking"), "1")


@pytest.fixture(scope="module")
def nothing_leaks(tmp_path_factory):
    return sampled_run(tmp_path_factory.mktemp("steady"), "none")


def test_the_program_runs_to_its_end_with_its_own_output(leaking_worker):
    result, _ = leaking_worker
    assert result.stdout == "done\n"


def test_the_trainer_and_each_worker_sampled_their_memory_over_the_run(leaking_worker):
    _, tree = leaking_worker
    processes = {process["name"]: process for process in tree["memory"]["processes"]}
    assert set(processes) == {"trainer", "worker 0", "worker 1"}
    for process in processes.values():
        assert len(process["samples"]) >= 8  # a trend's worth: the run lasts over three seconds


def test_the_worker_whose_env_keeps_every_step_is_named_a_leak(leaking_worker):
    _, tree = leaking_worker
    (leak,) = judge_run(tree).of_kind(MEMORY_LEAK)
    assert leak.evidence["process"] == "worker 1"
    assert leak.evidence["growth_bytes"] >= STEPS * KEPT_PER_STEP / 2


def test_a_trainer_that_keeps_every_steps_data_is_named_a_leak(tmp_path):
    _, tree = sampled_run(tmp_path, "trainer")
    (leak,) = judge_run(tree).of_kind(MEMORY_LEAK)
    assert leak.evidence["process"] == "trainer"
    assert leak.evidence["growth_bytes"] >= STEPS * KEPT_PER_STEP / 2


def test_workers_started_by_spawn_sample_as_the_trainer_asked(tmp_path):
    _, tree = sampled_run(tmp_path, "1", "spawn")
    (leak,) = judge_run(tree).of_kind(MEMORY_LEAK)
    assert leak.evidence["process"] == "worker 1"


def test_the_leak_advice_names_rlprof_runs_option_for_allocations(leaking_worker):
    result, _ = leaking_worker
    assert "Run it again with rlprof run --memory --track-allocations to see which block keeps it" in " ".join(
        result.stderr.split())


def test_a_program_that_keeps_nothing_gets_no_leak_verdict(nothing_leaks):
    _, tree = nothing_leaks
    assert len(tree["memory"]["processes"]) == 3
    assert not judge_run(tree).of_kind(MEMORY_LEAK)


def test_track_allocations_names_the_block_of_the_worker_that_keeps_memory(tmp_path):
    result = rlprof_run(tmp_path, "--memory=0.1", "--track-allocations", "train.py", "1")
    assert result.returncode == 0, result.stderr
    tree = load_timing_tree(tmp_path / "out" / "train_timers.json")
    (leak,) = judge_run(tree).of_kind(MEMORY_LEAK)
    assert leak.evidence["process"] == "worker 1"
    assert leak.evidence["blocks_keeping_most"][0]["block"] == "env.step"
    assert leak.evidence["blocks_keeping_most"][0]["net_bytes"] >= STEPS * KEPT_PER_STEP / 2
    assert "Largest Python allocations per block" in result.stderr


def test_without_memory_the_analysis_names_the_option_and_shows_what_the_trainer_read(tmp_path):
    result = rlprof_run(tmp_path, "train.py", "none")
    assert result.returncode == 0, result.stderr
    assert "memory" not in load_timing_tree(tmp_path / "out" / "train_timers.json")
    assert "run it again with rlprof run --memory to see each process's memory over time" in " ".join(
        result.stderr.split())
    resident = result.stderr.split("Resident memory as the trainer read it, once a second:\n", 1)[1]
    rows = resident.splitlines()[1:4]  # under the column names
    assert [row.rsplit("  ", 1)[1] for row in rows] == ["trainer", "worker 0", "worker 1"]


@pytest.mark.parametrize("value", ["0", "-1", "soon", "nan"])
def test_a_bad_memory_interval_is_a_one_line_error_before_anything_runs(tmp_path, value):
    result = rlprof_run(tmp_path, f"--memory={value}", "train.py", "none")
    assert (result.returncode, result.stdout) == (2, "")
    assert "--memory" in result.stderr and "seconds" in result.stderr
    assert "Traceback" not in result.stderr
    assert len(result.stderr.strip().splitlines()) <= 2  # argparse's usage line and the error
    assert not (tmp_path / "out").exists()
