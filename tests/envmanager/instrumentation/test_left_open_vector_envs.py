"""Specification: a vector env the program left open is closed at the end of ``rlprof run`` to
collect its workers' last timers, and a close that cannot end does not keep the run from ending."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("stable_baselines3")

PROGRAM = Path(__file__).parent / "programs" / "crashing_worker.py"


def test_a_program_ending_on_a_crashed_sb3_worker_ends_as_under_python(tmp_path):
    plain = subprocess.run([sys.executable, str(PROGRAM)], cwd=tmp_path, capture_output=True, text=True,
                           timeout=120)
    assert plain.returncode == 1 and "EOFError" in plain.stderr
    profiled = subprocess.run(
        [sys.executable, "-m", "profiler", "run", "--summaries-dir", "out", str(PROGRAM)],
        cwd=tmp_path, capture_output=True, text=True, timeout=120,
    )
    assert profiled.returncode == 1
    assert "EOFError" in profiled.stderr
    assert ("rlprof: closing the program's SubprocVecEnv did not end within the 5 seconds the end of the run "
            "waits for the workers and was left running (a worker that died mid-step, or a slow close): the "
            "last timers of its workers are missing" in profiled.stderr)
    assert (tmp_path / "out" / "crashing_worker_timers.json").is_file()
