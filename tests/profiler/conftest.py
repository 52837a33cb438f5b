"""Fixtures shared by the tests of profiler/: the two real runs most analysis and CLI tests read."""

from __future__ import annotations

from typing import Any

import pytest
from run_files import write_plain_run, write_vector_run

from profiler import load_timing_tree


@pytest.fixture
def vector_run(tmp_path, fake_clock) -> str:
    """A trainer over four workers, worker 3 the slowest (see run_files.write_vector_run)."""
    return str(write_vector_run(tmp_path / "vector_timers.json", fake_clock))


@pytest.fixture
def plain_run(tmp_path, fake_clock) -> str:
    """A single-process run (see run_files.write_plain_run)."""
    return str(write_plain_run(tmp_path / "plain_timers.json", fake_clock))


@pytest.fixture
def vector_tree(vector_run) -> dict[str, Any]:
    return load_timing_tree(vector_run)


@pytest.fixture
def plain_tree(plain_run) -> dict[str, Any]:
    return load_timing_tree(plain_run)
