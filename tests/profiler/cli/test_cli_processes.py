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

MLAGENTS_FILE = Path(__file__).parents[2] / "data" / "mlagents_timers.json"
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


# --- files that used to crash the command line ----------------------------------------------------

DEEP_TREE = '{"total": 1.0, "children": ' + '[{"name": "a", "children": ' * 600 + "[]" + "}]" * 600 + "}"
LONE_SURROGATE = '{"total": 1.0, "children": [{"name": "load \\udcff.bin", "total": 0.5, "count": 1}]}'
HUGE_COUNT = '{"total": 1.0, "children": [{"name": "step", "total": 0.5, "count": ' + "9" * 400 + "}]}"


@pytest.mark.parametrize(
    "content, command, message",
    [
        (DEEP_TREE, ["analyze"], "nested too deeply to read"),
        (DEEP_TREE, ["convert", "--to", "chrome", "-o", "out.json"], "nested too deeply to read"),
        (LONE_SURROGATE, ["report", "-o", "report.html"], "is not valid Unicode text"),
        (LONE_SURROGATE, ["analyze"], "is not valid Unicode text"),
        (HUGE_COUNT, ["analyze"], "root/step.count: must be a whole number from 0 to 2**63-1"),
        (HUGE_COUNT, ["diff", "RUN"], "root/step.count: must be a whole number from 0 to 2**63-1"),
    ],
    ids=["deep analyze", "deep convert", "surrogate report", "surrogate analyze", "huge count analyze",
         "huge count diff"],
)
def test_a_hostile_file_is_one_line_on_stderr_and_exit_code_2(tmp_path, content, command, message):
    run_file = tmp_path / "run.json"
    run_file.write_text(content)
    arguments = [command[0], str(run_file), *(str(run_file) if part == "RUN" else part for part in command[1:])]
    result = run([sys.executable, "-m", "profiler", *arguments], cwd=tmp_path)
    assert result.returncode == 2
    assert result.stderr.startswith(f"rlprof: error: {run_file}: ")
    assert result.stderr.count("\n") == 1
    assert message in result.stderr
    assert sorted(path.name for path in tmp_path.iterdir()) == ["run.json"]
