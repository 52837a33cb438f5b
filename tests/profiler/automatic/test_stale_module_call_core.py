"""A stale build of the framework phases' C pass-through (compiled from other sources than this
code's): it is not used, the Python pass-through runs, and one warning line names the file."""

from __future__ import annotations

from extension_builds import (assert_loaded_quietly, assert_refused_as_stale, build_module, copy_packages,
                              needs_compiler, run_in)

pytestmark = needs_compiler

REPORT = """
import json
from profiler.automatic import torch_phases
print(json.dumps({"compiled": torch_phases.compiled_pass_through()}))
"""


def build_both(root, *macros: str):
    """The timer's core as these sources say (the pass-through loads only beside it), and the
    pass-through with ``macros``; the pass-through's built file."""
    copy_packages(root)
    build_module(root, "profiler.timing._timer_core", "profiler/timing/_timer_core.c")
    return build_module(root, "profiler.automatic._module_call_core", "profiler/automatic/_module_call_core.c",
                        *macros)


def test_a_stale_pass_through_is_not_loaded_and_one_line_says_why(tmp_path):
    stale = build_both(tmp_path, "MODULE_CALL_CORE_VERSION=0")
    assert_refused_as_stale(run_in(tmp_path, REPORT), stale, "the framework phases' C pass-through")


def test_the_pass_through_built_from_these_sources_is_loaded(tmp_path):
    build_both(tmp_path)
    assert_loaded_quietly(run_in(tmp_path, REPORT))
