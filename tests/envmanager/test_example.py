"""The example script runs as a user would run it."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "vector_env_cartpole.py"


def test_the_cartpole_example_runs_and_reports_episodes():
    result = subprocess.run([sys.executable, str(EXAMPLE)], capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stderr
    assert "episodes ended" in result.stdout
    assert result.stderr == ""
