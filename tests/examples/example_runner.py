"""Run a script from examples/ the way a user would: a fresh interpreter, from the repository."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

REPOSITORY = Path(__file__).resolve().parents[2]


def run_example(
    script: str, *arguments: str, environment: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    """Run ``examples/<script>`` with ``arguments`` (and these ``environment`` variables added);
    fail the test with its stderr if it fails."""
    completed = subprocess.run(
        [sys.executable, str(REPOSITORY / "examples" / script), *arguments],
        cwd=REPOSITORY,
        capture_output=True,
        text=True,
        timeout=120,
        env=None if environment is None else {**os.environ, **environment},
    )
    assert completed.returncode == 0, completed.stderr
    return completed
