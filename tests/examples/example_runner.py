"""Run a script from examples/ the way a user would: a fresh interpreter, from the repository."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

REPOSITORY = Path(__file__).resolve().parents[2]


def run_example(script: str, *arguments: str) -> subprocess.CompletedProcess[str]:
    """Run ``examples/<script>`` with ``arguments``; fail the test with its stderr if it fails."""
    completed = subprocess.run(
        [sys.executable, str(REPOSITORY / "examples" / script), *arguments],
        cwd=REPOSITORY,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert completed.returncode == 0, completed.stderr
    return completed
