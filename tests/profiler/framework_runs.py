"""Runs of the programs in ``automatic/programs/`` under ``rlprof run`` (real subprocesses, real torch),
for the tests of ``profiler.automatic``: a test module runs a program once, its tests read the
files it wrote."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

PROGRAMS = Path(__file__).resolve().parent / "automatic" / "programs"
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


def counted_run(folder: Path, program: str, *arguments: str, options: tuple[str, ...] = ()) -> tuple[dict, dict]:
    """``program`` under ``rlprof run`` (with rlprof's ``options``), and the counts it wrote of what
    it did (its ``--counts FILE``)."""
    run = rlprof_run(folder, program, *arguments, "--counts", "counts.json", options=options)
    return run, json.loads((folder / "counts.json").read_text())
