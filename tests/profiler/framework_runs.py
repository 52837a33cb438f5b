"""Shared runs of the programs in ``programs/`` under ``rlprof run``: each test module runs a
program once (a real subprocess, real torch) and its tests read the files it wrote."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

PROGRAMS = Path(__file__).resolve().parent / "programs"
FINISHES_WITHIN = 180  # seconds: generous, for a loaded machine; no test checks a duration


def rlprof(*arguments: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "profiler", *arguments], cwd=cwd,
                          capture_output=True, text=True, timeout=FINISHES_WITHIN)


def rlprof_run(folder: Path, program: str, *arguments: str, options: tuple[str, ...] = ()) -> dict:
    """Run ``programs/<program>`` under ``rlprof run``; the analysis as ``--format json`` gives it,
    with the run's tree under ``"tree"`` and its stderr under ``"stderr"``."""
    from profiler import load_timing_tree

    run = rlprof("run", *options, "--summaries-dir", "out", str(PROGRAMS / program), *arguments, cwd=folder)
    assert run.returncode == 0, run.stderr
    timers = next((folder / "out").glob("*_timers.json"))
    analysis = rlprof("analyze", "--format", "json", str(timers), cwd=folder)
    assert analysis.returncode == 0, analysis.stderr
    return {**json.loads(analysis.stdout), "tree": load_timing_tree(timers), "stderr": run.stderr,
            "stdout": run.stdout}


@pytest.fixture(scope="session")
def cleanrl_run(tmp_path_factory):
    """The CleanRL-style PPO under ``rlprof run``, with a planted slow ``write_logs`` after each
    update (outside anything the hooks time) for the stack sampler to find."""
    pytest.importorskip("torch")
    return rlprof_run(tmp_path_factory.mktemp("cleanrl"), "cleanrl_torch_ppo.py", "--slow-logging", "0.1")
