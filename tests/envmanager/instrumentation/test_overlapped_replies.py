"""Specification: under ``rlprof run`` the trainer reads each worker's reply as soon as it is
there, in the class's own order, as under python, while the other workers still step; and the
time it was blocked on a worker's pipe is still told from the rest of ``step_wait``.

The program (programs/overlapped_replies.py) has worker 1's step wait until the trainer has
unpickled worker 0's reply: under python it never times out. rlprof used to wait for every reply
before the class read any, and there it timed out at every step."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

PROGRAM = Path(__file__).parent / "programs" / "overlapped_replies.py"
PHASES = ("vector.send_actions", "vector.wait_for_workers", "vector.receive_results")


def run(folder: Path, *arguments: str, rlprof: bool, pure_python: bool = False) -> tuple[list, dict | None]:
    """The program's steps, and the dump of its ``rlprof run`` (None under python)."""
    out = folder / "out"
    command = ["-m", "profiler", "run", "--summaries-dir", str(out), str(PROGRAM)] if rlprof else [str(PROGRAM)]
    environment = {**os.environ, **({"RLPROF_PURE_PYTHON": "1"} if pure_python else {})}
    result = subprocess.run([sys.executable, *command, *arguments], cwd=folder, capture_output=True, text=True,
                            timeout=240, env=environment)
    assert result.returncode == 0, result.stderr
    steps = json.loads(result.stdout.splitlines()[-1])["steps"]
    return steps, json.loads((out / "overlapped_replies_timers.json").read_text()) if rlprof else None


def child(node: dict, name: str) -> dict:
    (found,) = [each for each in node["children"] if each["name"] == name and not each.get("is_parallel")]
    return found


@pytest.mark.parametrize("pure_python", [False, True], ids=["compiled", "python"])
@pytest.mark.parametrize("direct", [False, True], ids=["step", "step_async+step_wait"])
@pytest.mark.parametrize("vector", ["async", "sb3"])
def test_the_trainer_reads_each_reply_as_soon_as_it_is_there_as_under_python(tmp_path, vector, direct, pure_python):
    arguments = ("--vector", vector, *(["--direct"] if direct else []))
    plain, _ = run(tmp_path, *arguments, rlprof=False)
    profiled, tree = run(tmp_path, *arguments, rlprof=True, pure_python=pure_python)
    assert [step["timed_out"] for step in plain] == [False] * 3
    assert profiled == plain
    # Every step counted on the critical path for each worker whose timers arrived. (A program this
    # short can end before rlprof's channel has accepted its workers' connections: a race of the
    # channel's, not of this; test_phased_vector_step.py counts longer programs' steps exactly.)
    complete = [worker for worker in tree["workers"] if worker["channel"] == "complete"]
    assert [worker["critical_path"]["vector_steps"] for worker in complete] == [3] * len(complete)
    phases = tree if direct else child(tree, "vector.step")
    assert [child(phases, phase)["count"] for phase in PHASES] == [3, 3, 3]


@pytest.mark.parametrize("direct", [False, True], ids=["step", "step_async+step_wait"])
def test_a_slow_worker_shows_up_as_waiting_not_receiving(tmp_path, direct):
    steps, sleep = 4, 0.2
    profiled, tree = run(tmp_path, "--vector", "async", "--steps", str(steps), "--sleep", str(sleep),
                         *(["--direct"] if direct else []), rlprof=True)
    assert not any(step["timed_out"] for step in profiled)
    parent = tree if direct else child(tree, "vector.step")
    waiting, receiving = child(parent, "vector.wait_for_workers"), child(parent, "vector.receive_results")
    # The trainer is blocked on worker 1's pipe while it sleeps, less what it did meanwhile (read
    # worker 0's reply): half of the sleep is a floor that no load breaks.
    assert waiting["total"] >= steps * sleep / 2
    assert receiving["total"] < waiting["total"] / 4
    if not direct:  # one phased run: the phases add up to the step, exactly
        step = child(tree, "vector.step")
        assert sum(child(step, phase)["total"] for phase in PHASES) == pytest.approx(step["total"], rel=1e-9)
