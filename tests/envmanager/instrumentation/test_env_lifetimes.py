"""Specification: an env ``rlprof run`` times is freed when the program drops it, as under plain
python, not at the next garbage collection.

``programs/env_lifetimes.py`` turns the garbage collector off and notes which of its envs were freed
(their ``__del__``) after deleting one made by ``gymnasium.make``, a ``SyncVectorEnv``'s, and after
closing an ``AsyncVectorEnv`` (its workers' envs); it runs as a real subprocess, once with
``python`` and once under ``rlprof run``, on both step cores.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from step_cores import step_core  # noqa: F401  (both step timers: the C helper, the Python reference)

PROGRAM = Path(__file__).parent / "programs" / "env_lifetimes.py"


def test_envs_are_freed_when_the_program_drops_them_as_under_plain_python(tmp_path):
    plain = subprocess.run([sys.executable, str(PROGRAM), "plain.json"], cwd=tmp_path, capture_output=True,
                           text=True, timeout=120)
    assert plain.returncode == 0, plain.stderr
    timed = subprocess.run([sys.executable, "-m", "profiler", "run", "--summaries-dir", "out", str(PROGRAM),
                            "timed.json"], cwd=tmp_path, capture_output=True, text=True, timeout=120)
    assert timed.returncode == 0, timed.stderr
    seen = json.loads((tmp_path / "timed.json").read_text())
    assert seen == json.loads((tmp_path / "plain.json").read_text())
    assert seen["async, closed"] == ["async 0", "async 1", "made", "sync 0", "sync 1"]
