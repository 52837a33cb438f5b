"""Specification of the memory check: a file too large for the memory left is refused up front."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys

import pytest

from profiler.tree.memory_check import READ_MEMORY_PER_DENSE_BYTE, available_memory, memory_shortage, read_memory_estimate

SPANS = 1_400_000  # about 20 MB of compact timeline: above the size from which files are checked


def write_compact_run(path, spans: int = SPANS):
    span = '["env.step",12.5,12.75]'
    path.write_text(
        '{"total":1.0,"count":1,"children":[],"timeline":{"clock":"perf_counter","processes":'
        '[{"pid":1,"name":"trainer","threads":[{"tid":1,"name":"MainThread","spans":['
        + ",".join([span] * spans)
        + "]}]}]}}"
    )
    return path


def test_the_estimate_counts_the_text_and_the_values_not_the_indentation(tmp_path):
    document = {"total": 1.0, "children": [{"name": "step", "total": 0.5, "count": 1}] * 2000}
    compact = tmp_path / "compact.json"
    compact.write_text(json.dumps(document, separators=(",", ":")))
    indented = tmp_path / "indented.json"
    indented.write_text(json.dumps(document, indent=8))
    dense = compact.stat().st_size
    assert read_memory_estimate(compact) == dense * (1 + READ_MEMORY_PER_DENSE_BYTE)
    assert read_memory_estimate(indented) == pytest.approx(indented.stat().st_size + dense * READ_MEMORY_PER_DENSE_BYTE, rel=0.02)


def test_small_files_are_never_refused(tmp_path):
    path = tmp_path / "small.json"
    path.write_text('{"total": 1.0}')
    assert memory_shortage(path) is None


def test_the_memory_available_is_a_positive_number_of_bytes():
    assert available_memory() > 0


READ_UNDER_AN_ADDRESS_SPACE_LIMIT = """
import resource, sys
import psutil
from profiler.cli.commands import main
# Leave this process 40 MB more address space than it uses: far less than the file needs.
room = psutil.Process().memory_info().vms + 40_000_000
resource.setrlimit(resource.RLIMIT_AS, (room, room))
sys.exit(main(["analyze", sys.argv[1]]))
"""


def analyze_with_little_memory(run_file, **environment):
    return subprocess.run(
        [sys.executable, "-c", READ_UNDER_AN_ADDRESS_SPACE_LIMIT, str(run_file)],
        capture_output=True, text=True, timeout=120, env={**os.environ, **environment},
    )


def test_a_file_larger_than_the_memory_left_is_refused_before_reading_in_one_line(tmp_path):
    run_file = write_compact_run(tmp_path / "large_timers.json")
    result = analyze_with_little_memory(run_file)
    assert result.returncode == 2
    assert result.stderr.count("\n") == 1
    assert re.fullmatch(
        f"rlprof: error: {re.escape(str(run_file))}: reading this [0-9.]+ MB file needs about "
        r"[0-9.]+ MB of memory and only [0-9.]+ MB is available to this process; free some memory, "
        r"or set RLPROF_SKIP_MEMORY_CHECK=1 to try anyway\n",
        result.stderr,
    )


def test_running_out_of_memory_anyway_is_still_one_line(tmp_path):
    run_file = write_compact_run(tmp_path / "large_timers.json")
    result = analyze_with_little_memory(run_file, RLPROF_SKIP_MEMORY_CHECK="1")
    assert result.returncode == 2
    assert result.stderr == (
        "rlprof: error: out of memory while reading or converting the run; the file is too large "
        "for the memory this machine has free\n"
    )
