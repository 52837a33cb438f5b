"""Specification: before the program's first line, ``rlprof run`` imports only what the run needs.

What an option alone needs (the live view, PyTorch's operators) is imported when the option is
given, the analysis and the exporters at the exit: what rlprof imports before the program runs is
a cost every run pays, whatever its length. Each test runs ``python -m profiler run`` as a real
subprocess on a program that writes down the modules it finds at its first line.
"""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from profiler import load_timing_tree
from profiler.cli.commands import main
from profiler.cli.run_program import entry_points_of

FINISHES_WITHIN = 120  # seconds: generous, for a loaded machine; no test checks a duration

NOT_BEFORE_THE_PROGRAM = (
    "profiler.analysis.analyze",
    "profiler.analysis.verdicts",
    "profiler.analysis.diff",
    "profiler.analysis.profile_analyze_views",
    "profiler.export",
    "profiler.cli.watch",
    "profiler.integrations.live_view",
    "profiler.gpu.nvtx_bridge",
    "profiler.gpu.capture_range",
    "profiler.gpu.torch_ops",  # --operators only (and what records them in a worker)
    "profiler.gpu.execution_trace",
    "profiler.tree.nsys_sqlite",  # Nsight Systems exports only: neither the start nor the exit reads one
    "sqlite3",  # Nsight Systems exports only: the timers reader imports it when it reads one
    "psutil",  # the machine's figures are read from /proc; psutil where there is none
)

FIRST_LINE = """
    import sys
    with open(sys.argv[1], "w") as found:
        found.write(" ".join(sorted(sys.modules)))
    from profiler import hierarchical_timer
    with hierarchical_timer("step"):
        pass
"""


def modules_at_the_first_line(folder: Path, *options: str) -> tuple[set[str], subprocess.CompletedProcess[str]]:
    script = folder / "first_line.py"
    script.write_text(textwrap.dedent(FIRST_LINE))
    found = folder / "modules.txt"
    result = subprocess.run([sys.executable, "-m", "profiler", "run", "--summaries-dir", "out", *options,
                             str(script), str(found)],
                            cwd=folder, capture_output=True, text=True, timeout=FINISHES_WITHIN)
    assert result.returncode == 0, result.stderr
    return set(found.read_text().split()), result


def test_the_program_starts_before_the_analysis_the_exporters_and_the_live_view_are_imported(tmp_path):
    modules, _ = modules_at_the_first_line(tmp_path)
    assert sorted(modules.intersection(NOT_BEFORE_THE_PROGRAM)) == []


def test_the_exit_still_writes_the_trace_and_the_report_and_prints_the_analysis(tmp_path):
    _, result = modules_at_the_first_line(tmp_path)
    assert load_timing_tree(tmp_path / "out" / "first_line_timers.json")["children"][0]["name"] == "step"
    assert (tmp_path / "out" / "first_line_trace.json.gz").is_file()
    assert (tmp_path / "out" / "first_line_report.html").is_file()
    assert "rlprof: report" in result.stderr


def test_live_imports_the_live_view_before_the_program_starts(tmp_path):
    modules, _ = modules_at_the_first_line(tmp_path, "--live")
    assert "profiler.integrations.live_view" in modules


@pytest.mark.parametrize("command", ["run", "analyze", "watch"])
def test_a_built_in_commands_help_comes_from_its_parser_built_alone(command, capsys):
    assert main([command, "--help"]) == 0
    assert f"usage: rlprof {command}" in capsys.readouterr().out


def test_rlprof_finds_its_own_entry_points_in_its_own_distribution():
    # One entry_points.txt read instead of every installed distribution's.
    (environments,) = entry_points_of("rlprof.environments")
    assert environments.value == "envmanager.instrumentation:instrument_environments"


def test_a_group_only_another_distribution_provides_is_found_among_every_distribution(tmp_path, monkeypatch):
    # A checkout run from PYTHONPATH has its entry points in a distribution of another name.
    dist_info = tmp_path / "rlprof_checkout-0.1.dist-info"
    dist_info.mkdir()
    (dist_info / "METADATA").write_text("Metadata-Version: 2.1\nName: rlprof-checkout\nVersion: 0.1\n")
    (dist_info / "entry_points.txt").write_text("[rlprof.elsewhere]\nthere = somewhere:install\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    assert [plugin.value for plugin in entry_points_of("rlprof.elsewhere")] == ["somewhere:install"]
