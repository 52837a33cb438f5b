"""A stale build of the timer's C accelerator (compiled from other sources than this code's): it is
not used, the pure-Python core runs, and one warning line names the file and the rebuild."""

from __future__ import annotations

import json

import pytest

from extension_builds import build_module, copy_packages, needs_compiler, run_in
from profiler.timing import accelerator

pytestmark = needs_compiler

REPORT = """
import json, profiler
from profiler.timing import accelerator
print(json.dumps({"accelerated": profiler.timing.accelerated(), "reason": accelerator.unavailable_reason}))
"""


@pytest.fixture
def timer_core() -> str:
    """These tests choose their builds themselves: run once, not once per core (see conftest.py)."""
    return "python"


def test_the_accelerator_built_from_these_sources_says_their_interface_version():
    if accelerator.extension is None:
        pytest.skip(f"C accelerator not loaded: {accelerator.unavailable_reason}")
    assert accelerator.extension.VERSION == accelerator.TIMER_CORE_VERSION


def test_a_stale_accelerator_is_not_loaded_the_python_core_runs_and_one_line_says_why(tmp_path):
    copy_packages(tmp_path)
    stale = build_module(tmp_path, "profiler.timing._timer_core", "profiler/timing/_timer_core.c",
                         "TIMER_CORE_VERSION=0")
    result = run_in(tmp_path, REPORT)
    report = json.loads(result.stdout)
    assert report["accelerated"] is False
    assert report["reason"].startswith(f"the C accelerator {stale} is a stale build (interface version 0,")
    (line,) = result.stderr.splitlines()
    assert line.startswith(f"{stale}:0: RuntimeWarning: ")
    assert "`python setup.py build_ext --inplace`" in line


def test_the_same_sources_built_again_are_loaded(tmp_path):
    copy_packages(tmp_path)
    build_module(tmp_path, "profiler.timing._timer_core", "profiler/timing/_timer_core.c")
    result = run_in(tmp_path, REPORT)
    assert json.loads(result.stdout) == {"accelerated": True, "reason": ""}
    assert result.stderr == ""
