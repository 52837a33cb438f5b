"""A test program run twice, as a user would: with ``python`` and under ``rlprof run``.

Each program takes the file it writes what it saw to (JSON) as its first argument; the timed run
writes its dumps to ``out/`` of the working folder.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any


def run_plain_and_timed(program: Path, folder: Path, *arguments: str) -> tuple[Any, Any]:
    """What ``program`` saw under ``python`` and under ``rlprof run`` (run in ``folder``); each run
    must succeed."""
    seen = []
    for name, launcher in (("plain", []), ("timed", ["-m", "profiler", "run", "--summaries-dir", "out"])):
        finished = subprocess.run([sys.executable, *launcher, str(program), f"{name}.json", *arguments], cwd=folder,
                                  capture_output=True, text=True, timeout=120)
        assert finished.returncode == 0, finished.stderr
        seen.append(json.loads((folder / f"{name}.json").read_text()))
    return seen[0], seen[1]
