"""Specification of a ``step_wait(timeout=...)`` under ``rlprof run``: the program's timeout is the
class's own. The trainer's wait for its workers (``vector.wait_for_workers``) waits out the
program's timeout at most once: the class's own ``step_wait`` must not wait it again, or a reply
that comes after the timeout but before twice it lets the step through where the program, run
with python, gets ``multiprocessing.TimeoutError``; that error says the program's timeout, as
without rlprof."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

PROGRAM = Path(__file__).parent / "programs" / "late_reply_after_timeout.py"


def outcome(folder: Path, command: list[str], pure_python: bool) -> str:
    environment = {**os.environ, **({"RLPROF_PURE_PYTHON": "1"} if pure_python else {})}
    result = subprocess.run([sys.executable, *command], cwd=folder, capture_output=True, text=True,
                            timeout=120, env=environment)
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout.splitlines()[-1])["outcome"]


@pytest.mark.parametrize("pure_python", [False, True], ids=["compiled", "python"])
@pytest.mark.parametrize("context", ["fork", "spawn"])
def test_a_reply_after_the_programs_timeout_gives_the_class_timeout_error_as_without_rlprof(tmp_path, context,
                                                                                             pure_python):
    without = outcome(tmp_path, [str(PROGRAM), context], pure_python)
    under_rlprof = outcome(tmp_path, ["-m", "profiler", "run", "--summaries-dir", str(tmp_path / "run"),
                                      str(PROGRAM), context], pure_python)
    assert without.startswith("TimeoutError")
    assert under_rlprof == without  # the class's error, its message with the program's timeout
