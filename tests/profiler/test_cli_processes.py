"""The ``rlprof`` command as users run it: the installed console script and ``python -m profiler``.

Separate processes, so these check what in-process tests cannot: real exit codes, that stderr
holds exactly one line (no traceback), and that entry-point plugins are found by
``importlib.metadata`` in a fresh interpreter.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

MLAGENTS_FILE = Path(__file__).parent.parent / "data" / "mlagents_timers.json"
CONSOLE_SCRIPT = shutil.which("rlprof", path=str(Path(sys.executable).parent))


def run(command, **kwargs):
    return subprocess.run(command, capture_output=True, text=True, timeout=60, **kwargs)


@pytest.mark.skipif(CONSOLE_SCRIPT is None, reason="the rlprof console script is not installed "
                    "next to this Python (pip install -e . creates it)")
def test_the_console_script_reports_a_missing_file_in_one_line_with_exit_code_2(tmp_path):
    result = run([CONSOLE_SCRIPT, "analyze", str(tmp_path / "missing.json")])
    assert result.returncode == 2
    assert result.stdout == ""
    assert result.stderr == f"rlprof: error: {tmp_path / 'missing.json'}: no such file\n"


@pytest.mark.skipif(CONSOLE_SCRIPT is None, reason="the rlprof console script is not installed")
def test_the_console_script_analyses_the_mlagents_file():
    result = run([CONSOLE_SCRIPT, "analyze", str(MLAGENTS_FILE)])
    assert (result.returncode, result.stderr) == (0, "")
    assert "Where the env_step time went" in result.stdout


def test_python_dash_m_profiler_runs_the_same_command_line():
    result = run([sys.executable, "-m", "profiler", "--version"])
    assert result.returncode == 0
    assert result.stdout.startswith("rlprof ")


def test_an_installed_entry_point_plugin_adds_its_command(tmp_path):
    """A tiny real distribution on the path, with an ``rlprof.commands`` entry point."""
    dist_info = tmp_path / "rlprof_hello-0.1.dist-info"
    dist_info.mkdir()
    (dist_info / "METADATA").write_text("Metadata-Version: 2.1\nName: rlprof-hello\nVersion: 0.1\n")
    (dist_info / "entry_points.txt").write_text("[rlprof.commands]\nhello = rlprof_hello:register\n")
    (tmp_path / "rlprof_hello.py").write_text(
        "def register(subparsers):\n"
        "    parser = subparsers.add_parser('hello')\n"
        "    parser.set_defaults(run=lambda arguments: print('hello from a plugin') or 0)\n"
    )
    environment = {**os.environ, "PYTHONPATH": str(tmp_path)}
    result = run([sys.executable, "-m", "profiler", "hello"], env=environment)
    assert (result.returncode, result.stdout) == (0, "hello from a plugin\n")
